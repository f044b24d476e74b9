/*
 * test_nonfinite.c — NaN and infinite values. Loading refuses them: a
 * model file (F32, BF16, F16; strict or not) or a snapshot (its weights,
 * running statistics or optimizer state) holding one fails with
 * SL_ERR_FORMAT naming the tensor and the index of the first such value,
 * and leaves the network as it was, unless sl_load_options.allow_nonfinite
 * says to load it. A training step whose loss is not finite fails with
 * SL_ERR_STATE naming the step and the loss, and is not applied: the next
 * good step gives the parameters of a twin that never saw the bad one.
 */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/serialize.h"
#include "harness.h"

#define PATH_LEN 1024

static char g_root[PATH_LEN];

static void path_of(char *out, const char *name)
{
    ck_assert(snprintf(out, PATH_LEN, "%s/%s", g_root, name) < PATH_LEN);
}

/* conv 3->4 3x3, BatchNorm, ReLU, global pool, Linear 4->3 ("fc.weight"
 * is [3, 4]): small, with running statistics and trainable tensors. */
static sl_net *small_net(uint64_t seed, sl_context **ctx)
{
    *ctx = th_context(seed);
    sl_net *net = NULL;
    ck_assert(sl_sequential(*ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "conv", sl_conv2d_with(&(sl_conv2d_options){3, 4, 3, 3, 1, 1, 1, 1, 1,
                                                                        1, 1, 1})) == SL_OK);
    ck_assert(sl_net_add(net, "bn", sl_batchnorm2d(4)) == SL_OK);
    ck_assert(sl_net_add(net, "relu", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "flatten", sl_flatten()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 1e-4f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    return net;
}

static const sl_shape g_shape = {2, 3, 5, 5, SL_LAYOUT_NCHW};

static void batch(float x[2 * 3 * 5 * 5], int labels[2], uint64_t seed)
{
    th_fill_normal(x, 2 * 3 * 5 * 5, seed, 1.0f);
    labels[0] = (int)(seed % 3);
    labels[1] = (int)((seed + 1) % 3);
}

static sl_status step(sl_net *net, uint64_t seed, sl_step_result *res)
{
    float x[2 * 3 * 5 * 5];
    int labels[2];
    batch(x, labels, seed);
    return sl_net_train_step(net, x, g_shape, labels, res);
}

static int param_index(sl_net *net, const char *name)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        if (strcmp(p.name, name) == 0)
            return i;
    }
    ck_abort_msg("no tensor %s", name);
    return -1;
}

/* Sets value `at` of tensor `name` to v; returns the value it held. */
static float set_value(sl_net *net, const char *name, size_t at, float v)
{
    int i = param_index(net, name);
    sl_param_info p;
    ck_assert(sl_net_param(net, i, &p) == SL_OK);
    float *buf = malloc(p.count * sizeof *buf);
    ck_assert(buf && sl_net_param_read(net, i, buf) == SL_OK);
    float old = buf[at];
    buf[at] = v;
    ck_assert(sl_net_param_write(net, i, buf) == SL_OK);
    free(buf);
    return old;
}

/* Every tensor of the network (trainable_only: the trainable ones), in
 * one block, for "unchanged" and "equal" bit for bit. */
typedef struct values {
    size_t n;
    float *v;
} values;

static values take(sl_net *net, int trainable_only)
{
    values c = {0, NULL};
    int n = th_param_count(net);
    c.v = malloc(1);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        if (trainable_only && !p.trainable)
            continue;
        c.v = realloc(c.v, (c.n + p.count) * sizeof(float));
        ck_assert(c.v && sl_net_param_read(net, i, c.v + c.n) == SL_OK);
        c.n += p.count;
    }
    return c;
}

static void assert_same(const values *a, const values *b, const char *what)
{
    ck_assert_msg(a->n == b->n && memcmp(a->v, b->v, a->n * sizeof(float)) == 0, "%s", what);
}

/* ---- loading ---- */

static void expect_refused(sl_status st, const char *fragment)
{
    ck_assert_msg(st == SL_ERR_FORMAT, "status %s (%s), wanted SL_ERR_FORMAT",
                  sl_status_name(st), sl_last_error());
    ck_assert_msg(strstr(sl_last_error(), fragment), "message \"%s\" lacks \"%s\"",
                  sl_last_error(), fragment);
}

START_TEST(test_model_with_nan_or_inf_is_refused_unless_allowed)
{
    static const float bad[3] = {NAN, INFINITY, -INFINITY};
    static const char *const shown[3] = {"NaN", "+inf", "-inf"};
    static const sl_file_dtype dtypes[3] = {SL_FILE_F32, SL_FILE_BF16, SL_FILE_F16};
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *b = small_net(2, &cb);
    ck_assert(step(a, 10, NULL) == SL_OK);
    ck_assert(step(b, 11, NULL) == SL_OK);
    char path[PATH_LEN], want[160];
    path_of(path, "bad_model.safetensors");
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 3; d++) {
            set_value(a, "fc.weight", 5, bad[k]);
            sl_save_options so = {.dtype = dtypes[d]};
            ck_assert_msg(sl_save_model_with(a, path, &so) == SL_OK, "%s", sl_last_error());
            values before = take(b, 0);
            snprintf(want, sizeof want,
                     "tensor 'fc.weight' holds %s at element 5 (index [1, 1]) of 12", shown[k]);
            sl_load_options o = sl_load_defaults();
            sl_load_report rep;
            for (o.strict = 1; o.strict >= 0; o.strict--) {
                expect_refused(sl_load_model(b, path, &o, &rep), want);
                ck_assert(strstr(sl_last_error(), "sl_load_model: '"));
                ck_assert(strstr(sl_last_error(), "nothing was loaded"));
                values after = take(b, 0);
                assert_same(&before, &after, "a refused load changed the network");
                free(after.v);
            }
            /* Allowed: every tensor loads, the bad value included. */
            o.strict = 1;
            o.allow_nonfinite = 1;
            ck_assert_msg(sl_load_model(b, path, &o, &rep) == SL_OK, "%s", sl_last_error());
            ck_assert_int_eq(rep.loaded, th_param_count(b));
            float w[12];
            ck_assert(sl_net_param_read(b, param_index(b, "fc.weight"), w) == SL_OK);
            ck_assert(k == 0 ? isnan(w[5]) : w[5] == bad[k]);
            set_value(a, "fc.weight", 5, 0.5f); /* finite again: the file loads by default */
            ck_assert(sl_save_model_with(a, path, &so) == SL_OK);
            ck_assert_msg(sl_load_model(b, path, NULL, NULL) == SL_OK, "%s", sl_last_error());
            free(before.v);
        }
    /* A running statistic (not trainable) is checked too, from memory. */
    set_value(a, "bn.running_var", 3, NAN);
    ck_assert(sl_save_model(a, path) == SL_OK);
    size_t n = 0;
    uint8_t *buf = NULL;
    ck_assert(sl_read_whole_file(path, "test", &buf, &n) == SL_OK);
    expect_refused(sl_load_model_memory(b, buf, n, NULL, NULL),
                   "tensor 'bn.running_var' holds NaN at element 3 (index [3]) of 4");
    ck_assert(strstr(sl_last_error(), "sl_load_model_memory: '<memory>'"));
    free(buf);
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

/* The file's bytes with the F32 value of entry `name` at `at` replaced. */
static void patch_file(const char *path, const char *name, size_t at, float v)
{
    size_t n = 0;
    uint8_t *buf = NULL;
    ck_assert(sl_read_whole_file(path, "test", &buf, &n) == SL_OK);
    sl_st_file f;
    ck_assert_msg(sl_st_parse(buf, n, path, &f) == SL_OK, "%s", sl_last_error());
    const sl_st_entry *e = sl_st_find(&f, name);
    ck_assert_msg(e && e->dtype == SL_ST_F32, "no F32 entry %s", name);
    size_t off = (size_t)(e->data - buf) + 4 * at;
    sl_st_release(&f);
    memcpy(buf + off, &v, 4);
    FILE *out = fopen(path, "wb");
    ck_assert(out && fwrite(buf, 1, n, out) == n && fclose(out) == 0);
    free(buf);
}

START_TEST(test_snapshot_with_nonfinite_state_is_refused_unless_allowed)
{
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *b = small_net(2, &cb);
    ck_assert(step(a, 10, NULL) == SL_OK);
    ck_assert(step(a, 11, NULL) == SL_OK);
    ck_assert(step(b, 12, NULL) == SL_OK);
    char path[PATH_LEN];
    path_of(path, "bad.snapshot");
    static const char *const names[2] = {"optimizer.fc.weight.momentum_buffer", "conv.weight"};
    static const char *const want[2] = {
        "tensor 'optimizer.fc.weight.momentum_buffer' holds +inf at element 7 (index [1, 3]) of 12",
        "tensor 'conv.weight' holds NaN at element 40 (index [1, 1, 1, 1]) of 108"};
    for (int k = 0; k < 2; k++) {
        ck_assert(sl_save_snapshot(a, path) == SL_OK);
        patch_file(path, names[k], k ? 40 : 7, k ? NAN : INFINITY);
        values before = take(b, 0);
        int64_t steps = sl_net_step_count(b);
        expect_refused(sl_load_snapshot(b, path), want[k]);
        ck_assert(strstr(sl_last_error(), "sl_load_snapshot: '"));
        sl_load_options o = sl_load_defaults();
        o.strict = 0; /* ignored: snapshots load strictly */
        expect_refused(sl_load_snapshot_with(b, path, &o), want[k]);
        values after = take(b, 0);
        assert_same(&before, &after, "a refused snapshot changed the network");
        ck_assert_int_eq(sl_net_step_count(b), steps);
        o.allow_nonfinite = 1;
        ck_assert_msg(sl_load_snapshot_with(b, path, &o) == SL_OK, "%s", sl_last_error());
        ck_assert_int_eq(sl_net_step_count(b), 2);
        free(before.v);
        free(after.v);
    }
    ck_assert(sl_save_snapshot(a, path) == SL_OK); /* finite: loads by default */
    ck_assert_msg(sl_load_snapshot_with(b, path, NULL) == SL_OK, "%s", sl_last_error());
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

/* ---- training ---- */

static void expect_loss_refused(sl_status st, const char *fragment)
{
    ck_assert_msg(st == SL_ERR_STATE, "status %s (%s), wanted SL_ERR_STATE", sl_status_name(st),
                  sl_last_error());
    ck_assert_msg(strstr(sl_last_error(), fragment), "message \"%s\" lacks \"%s\"",
                  sl_last_error(), fragment);
}

START_TEST(test_nan_loss_fails_the_step_and_changes_nothing)
{
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *twin = small_net(1, &cb);
    for (int s = 0; s < 2; s++) {
        ck_assert(step(a, 20 + (uint64_t)s, NULL) == SL_OK);
        ck_assert(step(twin, 20 + (uint64_t)s, NULL) == SL_OK);
    }
    /* A NaN weight after the ReLU (which would map a NaN to 0): the loss
     * is NaN. */
    float kept = set_value(a, "fc.weight", 6, NAN);
    values before = take(a, 1);
    sl_step_result res = {0, 0, 0};
    expect_loss_refused(step(a, 30, &res), "sl_net_train_step: the loss is NaN at step 3:");
    ck_assert(strstr(sl_last_error(), "the step was not applied"));
    ck_assert(isnan(res.loss));
    ck_assert_int_eq(sl_net_step_count(a), 2);
    values after = take(a, 1);
    assert_same(&before, &after, "a refused step changed the parameters");
    /* Its gradients are gone: no update can use them. */
    ck_assert_int_eq(sl_net_update(a), SL_ERR_STATE);
    ck_assert(strstr(sl_last_error(), "no gradients"));
    set_value(a, "fc.weight", 6, kept);
    /* And the optimizer state is as before: the next good step equals
     * the twin's, which never saw the bad one (training-mode BatchNorm
     * ignores the running statistics the bad forward touched). */
    ck_assert(step(a, 31, NULL) == SL_OK);
    ck_assert(step(twin, 31, NULL) == SL_OK);
    values got = take(a, 1), want = take(twin, 1);
    assert_same(&got, &want, "the step after a refused one differs from the twin's");
    /* With NULL result too, and an infinite weight. */
    set_value(a, "fc.bias", 0, -INFINITY);
    expect_loss_refused(step(a, 32, NULL), "the loss is");
    ck_assert_int_eq(sl_net_step_count(a), 3);
    free(before.v);
    free(after.v);
    free(got.v);
    free(want.v);
    sl_net_free(a);
    sl_net_free(twin);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

START_TEST(test_nan_loss_in_accumulation_discards_the_micro_batches)
{
    sl_context *ca, *cb;
    sl_net *a = small_net(1, &ca), *twin = small_net(1, &cb);
    ck_assert(sl_net_set_grad_accumulation(a, 2) == SL_OK);
    ck_assert(sl_net_set_grad_accumulation(twin, 2) == SL_OK);
    ck_assert(step(a, 40, NULL) == SL_OK);
    float kept = set_value(a, "fc.weight", 0, NAN);
    expect_loss_refused(step(a, 41, NULL), "the loss is NaN at step 1 (micro-batch 2 of 2)");
    set_value(a, "fc.weight", 0, kept);
    ck_assert_int_eq(sl_net_step_count(a), 0);
    ck_assert_int_eq(sl_net_update(a), SL_ERR_STATE);
    /* The first micro-batch was discarded with the bad one. */
    for (uint64_t s = 42; s < 44; s++) {
        ck_assert(step(a, s, NULL) == SL_OK);
        ck_assert(step(twin, s, NULL) == SL_OK);
    }
    ck_assert_int_eq(sl_net_step_count(a), 1);
    values got = take(a, 1), want = take(twin, 1);
    assert_same(&got, &want, "accumulation after a refused micro-batch differs from the twin's");
    free(got.v);
    free(want.v);
    sl_net_free(a);
    sl_net_free(twin);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

START_TEST(test_nan_weight_fails_update_in_backward_and_says_so)
{
    sl_context *ca;
    sl_net *a = small_net(1, &ca);
    ck_assert(sl_net_set_update_in_backward(a, 1) == SL_OK);
    ck_assert(step(a, 50, NULL) == SL_OK);
    set_value(a, "fc.bias", 1, NAN);
    expect_loss_refused(step(a, 51, NULL), "the loss is NaN at step 2");
    ck_assert(strstr(sl_last_error(), "the update in backward had already applied this step"));
    sl_net_free(a);
    sl_context_free(ca);
}
END_TEST

START_TEST(test_nan_weight_fails_a_token_step)
{
    sl_context *ctx = th_context(3);
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 1;
    c.embd = 16;
    c.heads = 2;
    c.vocab = 32;
    c.context = 8;
    c.dropout = 0.0f;
    sl_net *net = th_gpt2(ctx, &c, SL_SCHEDULE_NONE);
    sl_optimizer_options o = sl_optimizer_adamw(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    int32_t ids[8], targets[8];
    for (int i = 0; i < 8; i++) {
        ids[i] = (i * 5) % 32;
        targets[i] = (i * 5 + 5) % 32;
    }
    ck_assert(sl_net_train_step_tokens(net, ids, targets, 1, 8, NULL) == SL_OK);
    set_value(net, "transformer.ln_f.weight", 2, NAN);
    values before = take(net, 1);
    expect_loss_refused(sl_net_train_step_tokens(net, ids, targets, 1, 8, NULL),
                        "sl_net_train_step_tokens: the loss is NaN at step 2");
    values after = take(net, 1);
    assert_same(&before, &after, "a refused token step changed the parameters");
    ck_assert_int_eq(sl_net_step_count(net), 1);
    free(before.v);
    free(after.v);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    snprintf(g_root, sizeof g_root, "/tmp/sl_nonfinite_XXXXXX");
    if (!mkdtemp(g_root))
        return EXIT_FAILURE;
    Suite *s = suite_create("nonfinite");
    TCase *tc = tcase_create("nonfinite");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_with_nan_or_inf_is_refused_unless_allowed);
    tcase_add_test(tc, test_snapshot_with_nonfinite_state_is_refused_unless_allowed);
    tcase_add_test(tc, test_nan_loss_fails_the_step_and_changes_nothing);
    tcase_add_test(tc, test_nan_loss_in_accumulation_discards_the_micro_batches);
    tcase_add_test(tc, test_nan_weight_fails_update_in_backward_and_says_so);
    tcase_add_test(tc, test_nan_weight_fails_a_token_step);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    char cmd[PATH_LEN + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        failed = 1;
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
