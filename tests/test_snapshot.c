/*
 * test_snapshot.c — training snapshots resume exactly: 5 steps, a
 * snapshot, 5 more steps in a freshly built network (another seed, no
 * optimizer set) give bit for bit the parameters and BatchNorm running
 * statistics of 10 uninterrupted steps, with dropout and BatchNorm in the
 * network, for SGD with momentum, Adam and AdamW, in a plain and in a
 * checkpointed network; and snapshots that do not fit are refused without
 * changing the network, its optimizer or its context.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/serialize.h"
#include "harness.h"

#define BATCH 4

/* conv-BN-ReLU-dropout, a residual block with a projection, pooling,
 * dropout and a classifier. */
static sl_net *build(sl_context *ctx, int sublinear, int classes)
{
    sl_net *net = NULL;
    if (sublinear)
        ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net) == SL_OK);
    else
        ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "bn1", sl_batchnorm2d(8)) == SL_OK);
    ck_assert(sl_net_add(net, "relu", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "drop1", sl_dropout(0.3f)) == SL_OK);
    ck_assert(sl_net_add(net, "layer1", sl_basic_block(8, 16, 2)) == SL_OK);
    ck_assert(sl_net_add(net, "avgpool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "flatten", sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, "drop2", sl_dropout(0.2f)) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(16, classes, 1)) == SL_OK);
    return net;
}

static void train(sl_net *net, int first, int steps)
{
    float x[BATCH * 3 * 8 * 8];
    int labels[BATCH];
    for (int t = first; t < first + steps; t++) {
        th_fill_normal(x, sizeof x / sizeof *x, 1000 + (uint64_t)t, 1.0f);
        for (int i = 0; i < BATCH; i++)
            labels[i] = (t + 3 * i) % 5;
        ck_assert_msg(sl_net_train_step(net, x, sl_shape_nchw(BATCH, 3, 8, 8), labels, NULL) == SL_OK,
                      "%s", sl_last_error());
    }
}

static void assert_same_tensors(sl_net *a, sl_net *b)
{
    int n = th_param_count(a);
    ck_assert_int_eq(n, th_param_count(b));
    for (int i = 0; i < n; i++) {
        sl_param_info pa, pb;
        ck_assert(sl_net_param(a, i, &pa) == SL_OK && sl_net_param(b, i, &pb) == SL_OK);
        ck_assert_str_eq(pa.name, pb.name);
        ck_assert_msg(memcmp(pa.data, pb.data, pa.count * sizeof(float)) == 0,
                      "%s differs between the resumed and the uninterrupted run", pa.name);
    }
}

static void snapshot_path(char *path, size_t n, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, n, "%s/sl_snapshot_%d_%s.safetensors", tmp && *tmp ? tmp : "/tmp", (int)getpid(),
             name);
}

static void resume_matches_uninterrupted(sl_optimizer_options opt, int sublinear_resume,
                                         const char *name)
{
    char path[512];
    snapshot_path(path, sizeof path, name);
    /* 10 steps straight. */
    sl_context *ca = th_context(11);
    sl_net *a = build(ca, 0, 5);
    ck_assert(sl_net_set_optimizer(a, &opt) == SL_OK);
    train(a, 0, 10);

    /* 5 steps, a snapshot. */
    sl_context *cb = th_context(11);
    sl_net *b = build(cb, 0, 5);
    ck_assert(sl_net_set_optimizer(b, &opt) == SL_OK);
    train(b, 0, 5);
    ck_assert_msg(sl_save_snapshot(b, path) == SL_OK, "%s", sl_last_error());

    /* A fresh network: other seed, no optimizer; resume and go on. */
    sl_context *cc = th_context(999);
    sl_net *c = build(cc, sublinear_resume, 5);
    ck_assert_msg(sl_load_snapshot(c, path) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(sl_net_step_count(c), 5);
    train(c, 5, 5);
    ck_assert_int_eq(sl_net_step_count(c), 10);
    assert_same_tensors(a, c);

    unlink(path);
    sl_net_free(a);
    sl_net_free(b);
    sl_net_free(c);
    sl_context_free(ca);
    sl_context_free(cb);
    sl_context_free(cc);
}

START_TEST(test_resume_bit_identical_sgd_momentum)
{
    resume_matches_uninterrupted(sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 0), 0, "sgd");
    resume_matches_uninterrupted(sl_optimizer_sgd(0.05f, 0.9f, 0.0f, 1), 1, "nesterov_sublinear");
}
END_TEST

START_TEST(test_resume_bit_identical_adam)
{
    resume_matches_uninterrupted(sl_optimizer_adam(0.01f, 0.9f, 0.999f, 1e-8f, 1e-4f), 0, "adam");
    resume_matches_uninterrupted(sl_optimizer_adam(0.003f, 0.8f, 0.99f, 1e-7f, 0.0f), 1,
                                 "adam_sublinear");
}
END_TEST

/* AdamW's kind is recorded: read back as Adam (L2 decay) the resumed run
 * would differ. */
START_TEST(test_resume_bit_identical_adamw)
{
    resume_matches_uninterrupted(sl_optimizer_adamw(0.01f, 0.9f, 0.95f, 1e-8f, 0.1f), 0, "adamw");
    resume_matches_uninterrupted(sl_optimizer_adamw(0.003f, 0.8f, 0.99f, 1e-7f, 0.05f), 1,
                                 "adamw_sublinear");
}
END_TEST

/* Replaces the first `from` in the file with `to` (same length). */
static void patch_file(const char *path, const char *from, const char *to)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    ck_assert(sl_read_whole_file(path, "test", &buf, &n) == SL_OK);
    size_t k = strlen(from);
    ck_assert_uint_eq(k, strlen(to));
    uint8_t *hit = NULL;
    for (size_t i = 0; i + k <= n && !hit; i++)
        if (memcmp(buf + i, from, k) == 0)
            hit = buf + i;
    ck_assert_msg(hit != NULL, "'%s' not in %s", from, path);
    memcpy(hit, to, k);
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(buf, 1, n, f) == n && fclose(f) == 0);
    free(buf);
}

START_TEST(test_snapshots_that_do_not_fit_change_nothing)
{
    char path[512], model[512];
    snapshot_path(path, sizeof path, "bad");
    snapshot_path(model, sizeof model, "model");
    sl_context *ca = th_context(11), *cb = th_context(12);
    sl_net *a = build(ca, 0, 5), *b = build(cb, 0, 7);
    th_assert_error(sl_save_snapshot(a, path), SL_ERR_STATE, "no optimizer");
    sl_optimizer_options sgd = sl_optimizer_sgd(0.05f, 0.9f, 0.0f, 0);
    sl_optimizer_options adam = sl_optimizer_adam(0.01f, 0.9f, 0.999f, 1e-8f, 0);
    ck_assert(sl_net_set_optimizer(a, &sgd) == SL_OK);
    train(a, 0, 3);
    ck_assert(sl_save_snapshot(a, path) == SL_OK);
    ck_assert(sl_save_model(a, model) == SL_OK);

    /* b: 7 classes, Adam, 2 steps taken. */
    ck_assert(sl_net_set_optimizer(b, &adam) == SL_OK);
    train(b, 0, 2);
    uint64_t counter = cb->dropout_counter;
    int n = th_param_count(b);
    float **saved = calloc((size_t)n, sizeof *saved);
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(b, i, &pi) == SL_OK);
        saved[i] = malloc(pi.count * sizeof(float));
        memcpy(saved[i], pi.data, pi.count * sizeof(float));
    }

    th_assert_error(sl_load_snapshot(b, path), SL_ERR_SHAPE,
                 "tensor 'fc.weight': shape [5, 16] in the file, [7, 16] in the network");
    th_assert_error(sl_load_snapshot(b, model), SL_ERR_FORMAT, "is not a training snapshot");
    patch_file(path, "\"step\":\"3\"", "\"step\":\"x\"");
    th_assert_error(sl_load_snapshot(a, path), SL_ERR_FORMAT, "\"step\" is \"x\"");
    patch_file(path, "\"step\":\"x\"", "\"step\":\"3\"");
    patch_file(path, "\"optimizer\":\"sgd\"", "\"optimizer\":\"sgx\"");
    th_assert_error(sl_load_snapshot(a, path), SL_ERR_FORMAT, "unknown optimizer \"sgx\"");
    patch_file(path, "\"optimizer\":\"sgx\"", "\"optimizer\":\"sgd\"");
    patch_file(path, "momentum_buffer", "momentum_bufferX" + 1);
    th_assert_error(sl_load_snapshot(a, path), SL_ERR_NOT_FOUND,
                 "tensor 'optimizer.conv1.weight.momentum_buffer': missing from the file");

    /* b is as it was: tensors, optimizer (Adam), step count, context. */
    ck_assert_int_eq(sl_net_step_count(b), 2);
    ck_assert_uint_eq(cb->dropout_counter, counter);
    ck_assert_uint_eq(cb->seed, 12);
    for (int i = 0; i < n; i++) {
        sl_param_info pi;
        ck_assert(sl_net_param(b, i, &pi) == SL_OK);
        ck_assert_msg(memcmp(saved[i], pi.data, pi.count * sizeof(float)) == 0, "%s changed",
                      pi.name);
        free(saved[i]);
    }
    free(saved);
    train(b, 2, 1);
    ck_assert_int_eq(sl_net_step_count(b), 3);

    unlink(path);
    unlink(model);
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("snapshot");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_resume_bit_identical_sgd_momentum);
    tcase_add_test(tc, test_resume_bit_identical_adam);
    tcase_add_test(tc, test_resume_bit_identical_adamw);
    tcase_add_test(tc, test_snapshots_that_do_not_fit_change_nothing);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
