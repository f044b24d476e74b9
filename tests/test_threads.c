/*
 * test_threads.c — the threading rule of sublinear.h: a context and the
 * networks made from it are used by one thread at a time; different
 * contexts may be used from different threads at once. Two threads each
 * train their own checkpointed network (dropout and BatchNorm inside) in
 * their own context, save a snapshot, resume it into a fresh network and
 * train on; the results equal, bit for bit, the same work done one after
 * the other. The CI runs this test under ThreadSanitizer (SL_TSAN=ON), which
 * fails on any data race between the two.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define BATCH 4
#define RES 12
#define STEPS 3

typedef struct job {
    uint64_t seed;
    char path[64];
    float *params;
    size_t n;
    sl_status st;
    char error[256];
} job;

static sl_net *build(sl_context *ctx)
{
    sl_net *net = NULL;
    if (sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net) != SL_OK)
        return NULL;
    sl_status st = sl_net_add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1));
    if (st == SL_OK) st = sl_net_add(net, "bn1", sl_batchnorm2d(8));
    if (st == SL_OK) st = sl_net_add(net, "relu", sl_relu());
    if (st == SL_OK) st = sl_net_add(net, "drop", sl_dropout(0.3f));
    if (st == SL_OK) st = sl_net_add(net, "layer1", sl_basic_block(8, 16, 2));
    if (st == SL_OK) st = sl_net_add(net, "pool", sl_global_avgpool());
    if (st == SL_OK) st = sl_net_add(net, "flat", sl_flatten());
    if (st == SL_OK) st = sl_net_add(net, "drop2", sl_dropout(0.2f));
    if (st == SL_OK) st = sl_net_add(net, "fc", sl_linear(16, 5, 1));
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 0);
    if (st == SL_OK) st = sl_net_set_optimizer(net, &o);
    if (st != SL_OK) {
        sl_net_free(net);
        return NULL;
    }
    return net;
}

static sl_status train(sl_net *net, uint64_t seed, int steps)
{
    float x[BATCH * 3 * RES * RES];
    int labels[BATCH];
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    for (int s = 0; s < steps; s++) {
        th_fill_normal(x, sizeof x / sizeof x[0], seed * 100 + (uint64_t)s, 1.0f);
        for (int b = 0; b < BATCH; b++)
            labels[b] = (b + s) % 5;
        sl_status st = sl_net_train_step(net, x, sh, labels, NULL);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

/* Train, snapshot, resume into a new network of another context, train. */
static void *work(void *arg)
{
    job *j = arg;
    sl_context_options co = sl_context_defaults();
    co.threads = 1;
    co.seed = j->seed;
    sl_context *c1 = NULL, *c2 = NULL;
    sl_net *a = NULL, *b = NULL;
    j->st = sl_context_create(&co, &c1);
    co.seed = j->seed + 1000; /* the snapshot restores the seed */
    if (j->st == SL_OK) j->st = sl_context_create(&co, &c2);
    if (j->st == SL_OK && (!(a = build(c1)) || !(b = build(c2)))) j->st = SL_ERR_STATE;
    if (j->st == SL_OK) j->st = train(a, j->seed, STEPS);
    if (j->st == SL_OK) j->st = sl_save_snapshot(a, j->path);
    if (j->st == SL_OK) j->st = sl_load_snapshot(b, j->path);
    if (j->st == SL_OK) j->st = train(b, j->seed + 7, STEPS);
    if (j->st == SL_OK) {
        int n = th_param_count(b);
        for (int i = 0; i < n; i++) {
            sl_param_info pi;
            sl_net_param(b, i, &pi);
            j->params = realloc(j->params, (j->n + pi.count) * sizeof(float));
            memcpy(j->params + j->n, pi.data, pi.count * sizeof(float));
            j->n += pi.count;
        }
    } else {
        snprintf(j->error, sizeof j->error, "%s", sl_last_error());
    }
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(c1);
    sl_context_free(c2);
    unlink(j->path);
    return NULL;
}

START_TEST(test_contexts_on_two_threads_match_sequential_runs)
{
    job seq[2], par[2];
    memset(seq, 0, sizeof seq);
    memset(par, 0, sizeof par);
    for (int i = 0; i < 2; i++) {
        seq[i].seed = par[i].seed = 3 + (uint64_t)i;
        snprintf(seq[i].path, sizeof seq[i].path, "/tmp/sl_threads_%d_s%d", (int)getpid(), i);
        snprintf(par[i].path, sizeof par[i].path, "/tmp/sl_threads_%d_p%d", (int)getpid(), i);
        work(&seq[i]);
        ck_assert_msg(seq[i].st == SL_OK, "sequential %d: %s", i, seq[i].error);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert(pthread_create(&t[i], NULL, work, &par[i]) == 0);
    for (int i = 0; i < 2; i++)
        ck_assert(pthread_join(t[i], NULL) == 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(par[i].st == SL_OK, "thread %d: %s", i, par[i].error);
        ck_assert(par[i].n == seq[i].n && par[i].n > 0);
        ck_assert_msg(memcmp(par[i].params, seq[i].params, par[i].n * sizeof(float)) == 0,
                      "thread %d: parameters differ from the sequential run", i);
        free(seq[i].params);
        free(par[i].params);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_contexts_on_two_threads_match_sequential_runs);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
