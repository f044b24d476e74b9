/*
 * test_update_in_backward.c — the optimizer update inside backward
 * (sl_net_set_update_in_backward): parameters and optimizer state
 * bit-identical to the separate update for SGD, Adam and AdamW under
 * every kind of schedule (a ResNet with BatchNorm; a GPT-2 with dropout,
 * whose tied embedding gets gradient from the head and from its own
 * layer); the gradients planned as arena values (the fixed block gone,
 * the planned peak lower, measured == planned); and the refusals.
 */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sublinear/io.h"
#include "sublinear/models.h"

enum { B = 2, RES = 8, STEPS = 3, T = 16 };

static sl_optimizer_options optimizer(int which)
{
    switch (which) {
    case 0: return sl_optimizer_sgd(0.05f, 0.9f, 1e-3f, 1);
    case 1: return sl_optimizer_adam(1e-2f, 0.9f, 0.999f, 1e-8f, 1e-3f);
    default: return sl_optimizer_adamw(1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f);
    }
}

static const char *optimizer_name(int which)
{
    return which == 0 ? "SGD (momentum, Nesterov, decay)" : which == 1 ? "Adam" : "AdamW";
}

/* Schedules: 0 none, 1 sqrt, 2 the least budget (multi-level), 3 the
 * least operator-level budget. */
static void set_schedule(sl_net *net, int which, sl_shape in)
{
    sl_schedule s = which == 1 ? SL_SCHEDULE_SQRT : SL_SCHEDULE_NONE;
    ck_assert(sl_net_set_schedule(net, s) == SL_OK);
    if (which >= 2) {
        uint64_t least = th_least_budget(net, in);
        ck_assert(sl_net_set_schedule(net, which == 2 ? SL_SCHEDULE_BUDGET(least)
                                                      : SL_SCHEDULE_BUDGET_OPS(least)) == SL_OK);
    }
}

static sl_net *cnn(sl_context *ctx, int opt)
{
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    th_build_model(net, "resnet20", RES);
    sl_optimizer_options o = optimizer(opt);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    return net;
}

static void batch(float *x, int *labels, int step)
{
    th_fill_normal(x, (size_t)B * 3 * RES * RES, 100 + (uint64_t)step, 1.0f);
    for (int i = 0; i < B; i++)
        labels[i] = (3 * step + 7 * i) % 10;
}

/* Asserts that a and b hold the same tensors bit for bit, and that their
 * snapshots (parameters, running statistics, optimizer state, step) are
 * the same bytes. */
static void assert_same_state(sl_net *a, sl_net *b, const char *what)
{
    int n = th_param_count(a);
    ck_assert_int_eq(n, th_param_count(b));
    for (int i = 0; i < n; i++) {
        sl_param_info pa, pb;
        ck_assert(sl_net_param(a, i, &pa) == SL_OK && sl_net_param(b, i, &pb) == SL_OK);
        ck_assert_msg(memcmp(pa.data, pb.data, pa.count * sizeof(float)) == 0,
                      "%s: %s differs", what, pa.name);
    }
    char pa[] = "/tmp/sl_uib_a_XXXXXX", pb[] = "/tmp/sl_uib_b_XXXXXX";
    int fa = mkstemp(pa), fb = mkstemp(pb);
    ck_assert(fa >= 0 && fb >= 0);
    close(fa);
    close(fb);
    ck_assert_msg(sl_save_snapshot(a, pa) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(sl_save_snapshot(b, pb) == SL_OK, "%s", sl_last_error());
    FILE *x = fopen(pa, "rb"), *y = fopen(pb, "rb");
    ck_assert(x && y);
    /* one assertion for the whole file: Check records every ck_assert
     * (a write to its log), so one a byte took minutes */
    long bytes = 0, differs = -1;
    int cx, cy;
    do {
        cx = fgetc(x);
        cy = fgetc(y);
        if (cx != cy && differs < 0)
            differs = bytes;
        bytes++;
    } while (cx != EOF && cy != EOF);
    if (cx != cy && differs < 0)
        differs = bytes - 1; /* one file ends first */
    ck_assert_msg(differs < 0, "%s: the snapshots differ at byte %ld", what, differs);
    fclose(x);
    fclose(y);
    unlink(pa);
    unlink(pb);
}

/* The CNN (BatchNorm, dropout) under optimizer _i / 4 and schedule _i % 4:
 * the update in backward against the separate one, step by step. */
START_TEST(cnn_bit_identical)
{
    int opt = _i / 4, sched = _i % 4;
    /* Under SL_TEST_QUICK (the sanitizer run): every optimizer and every
     * schedule once, not every pair. */
    if (getenv("SL_TEST_QUICK") && sched != opt && _i != 3)
        return;
    char what[128];
    snprintf(what, sizeof what, "%s, schedule %d", optimizer_name(opt), sched);
    sl_context *ca = th_context(5), *cb = th_context(5);
    sl_net *sep = cnn(ca, opt), *upd = cnn(cb, opt);
    sl_shape in = sl_shape_nchw(B, 3, RES, RES);
    set_schedule(sep, sched, in);
    set_schedule(upd, sched, in);
    ck_assert(sl_net_set_update_in_backward(upd, 1) == SL_OK);
    ck_assert_int_eq(sl_net_update_in_backward(upd), 1);
    float x[B * 3 * RES * RES];
    int labels[B];
    for (int s = 0; s < STEPS; s++) {
        batch(x, labels, s);
        sl_step_result ra, rb;
        ck_assert_msg(sl_net_train_step(sep, x, in, labels, &ra) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(sl_net_train_step(upd, x, in, labels, &rb) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(memcmp(&ra.loss, &rb.loss, sizeof ra.loss) == 0, "%s: step %d loss %.9g vs %.9g",
                      what, s, ra.loss, rb.loss);
    }
    ck_assert_int_eq(sl_net_step_count(upd), STEPS);
    assert_same_state(sep, upd, what);
    sl_net_free(sep);
    sl_net_free(upd);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

static sl_gpt2_config gpt2_config(void)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 6;
    c.embd = 32;
    c.heads = 4;
    c.vocab = 256;
    c.context = 32;
    c.dropout = 0.1f;
    return c;
}

static void tokens(int32_t *ids, int32_t *targets, int step)
{
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int32_t)((i * 37 + step * 11) % 256);
        targets[i] = (int32_t)((i * 53 + step * 5 + 1) % 256);
    }
    targets[3] = SL_GPT2_IGNORE_INDEX;
}

/* GPT-2 with dropout and AdamW (SGD for _i == 3): the tied embedding is
 * updated after its last use, the head's. Schedules none, sqrt, the least
 * budget. */
START_TEST(gpt2_bit_identical)
{
    int sched = _i < 3 ? _i : 2;
    if (getenv("SL_TEST_QUICK") && _i < 2) /* the sanitizer run: the least budget only */
        return;
    sl_context *ca = th_context(9), *cb = th_context(9);
    sl_gpt2_config c = gpt2_config();
    sl_net *sep = th_gpt2(ca, &c, SL_SCHEDULE_NONE), *upd = th_gpt2(cb, &c, SL_SCHEDULE_NONE);
    sl_optimizer_options o = _i == 3 ? sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0) : optimizer(2);
    ck_assert(sl_net_set_optimizer(sep, &o) == SL_OK && sl_net_set_optimizer(upd, &o) == SL_OK);
    sl_shape in = sl_shape_seq(B, T, 1);
    set_schedule(sep, sched, in);
    set_schedule(upd, sched, in);
    ck_assert(sl_net_set_update_in_backward(upd, 1) == SL_OK);
    int32_t ids[B * T], targets[B * T];
    for (int s = 0; s < STEPS; s++) {
        tokens(ids, targets, s);
        sl_step_result ra, rb;
        ck_assert_msg(sl_net_train_step_tokens(sep, ids, targets, B, T, &ra) == SL_OK, "%s",
                      sl_last_error());
        ck_assert_msg(sl_net_train_step_tokens(upd, ids, targets, B, T, &rb) == SL_OK, "%s",
                      sl_last_error());
        ck_assert(memcmp(&ra.loss, &rb.loss, sizeof ra.loss) == 0);
    }
    assert_same_state(sep, upd, "GPT-2");
    sl_net_free(sep);
    sl_net_free(upd);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

/* The gradients are arena values: no fixed gradient block, their largest
 * live set inside the arena, a lower total, a lower least budget; the run
 * measures what was planned. */
START_TEST(planned_as_values)
{
    sl_context *ctx = th_context(3);
    sl_net *net = cnn(ctx, 0);
    sl_shape in = sl_shape_nchw(B, 3, RES, RES);
    set_schedule(net, 2, in);
    sl_memory_report sep, upd;
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &sep) == SL_OK);
    uint64_t least_sep = th_least_budget(net, in);
    ck_assert(sl_net_set_update_in_backward(net, 1) == SL_OK);
    uint64_t least_upd = th_least_budget(net, in);
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_BUDGET(least_upd)) == SL_OK);
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &upd) == SL_OK);
    /* the gradients' largest live set is far below all of them */
    ck_assert_uint_gt(upd.param_grads, 0);
    ck_assert_uint_lt(upd.param_grads, sep.param_grads / 4);
    ck_assert_uint_eq(upd.total, upd.arena_bytes + upd.params + upd.optimizer);
    ck_assert_uint_eq(upd.total, least_upd);
    ck_assert_uint_eq(sep.params, upd.params);
    ck_assert_uint_eq(sep.optimizer, upd.optimizer);
    /* the fixed block is gone: the least peak drops by nearly all of it */
    ck_assert_uint_lt(least_upd, least_sep);
    ck_assert_uint_ge(least_upd + sep.param_grads, least_sep);
    ck_assert_uint_le(least_upd + sep.param_grads / 2, least_sep);
    /* the timeline shows where they live: none before the first backward */
    sl_memory_timeline tl;
    ck_assert(sl_net_memory_timeline(net, in, SL_MODE_TRAIN, &tl) == SL_OK);
    uint64_t most = 0;
    ck_assert_uint_eq(tl.param_grads[0], 0);
    for (int s = 0; s < tl.steps; s++)
        if (tl.param_grads[s] > most)
            most = tl.param_grads[s];
    ck_assert_uint_eq(most, upd.param_grads);
    int updates = 0;
    for (int s = 0; s < tl.steps; s++)
        updates += strncmp(tl.step_names[s], "update ", 7) == 0;
    ck_assert_int_gt(updates, 20); /* one per layer with parameters */
    sl_memory_timeline_free(&tl);
    /* the run uses what was planned, and holds no gradient block */
    float x[B * 3 * RES * RES];
    int labels[B];
    batch(x, labels, 0);
    ck_assert_msg(sl_net_train_step(net, x, in, labels, NULL) == SL_OK, "%s", sl_last_error());
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &upd) == SL_OK);
    ck_assert_uint_eq(upd.arena_measured, upd.arena_bytes);
    ck_assert_uint_eq(upd.measured_param_grads, 0);
    ck_assert_uint_eq(upd.measured_total, upd.total);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(refusals)
{
    sl_context *ctx = th_context(4);
    sl_net *net = cnn(ctx, 1);
    sl_shape in = sl_shape_nchw(B, 3, RES, RES);
    float x[B * 3 * RES * RES];
    int labels[B];
    batch(x, labels, 0);
    /* clipping and accumulation, in either order */
    ck_assert(sl_net_set_grad_clip(net, 1.0f) == SL_OK);
    th_assert_error(sl_net_set_update_in_backward(net, 1), SL_ERR_STATE, "clipping");
    ck_assert_int_eq(sl_net_update_in_backward(net), 0);
    ck_assert(sl_net_set_grad_clip(net, 0.0f) == SL_OK);
    ck_assert(sl_net_set_grad_accumulation(net, 2) == SL_OK);
    th_assert_error(sl_net_set_update_in_backward(net, 1), SL_ERR_STATE, "accumulation");
    ck_assert(sl_net_set_grad_accumulation(net, 1) == SL_OK);
    ck_assert(sl_net_set_update_in_backward(net, 1) == SL_OK);
    th_assert_error(sl_net_set_grad_clip(net, 1.0f), SL_ERR_STATE, "update in backward");
    th_assert_error(sl_net_set_grad_accumulation(net, 4), SL_ERR_STATE, "update in backward");
    /* no kept gradients: the calls that need them say so */
    th_assert_error(sl_net_compute_gradients(net, x, in, labels, NULL), SL_ERR_STATE,
                    "sl_net_train_step");
    th_assert_error(sl_net_update(net), SL_ERR_STATE, "update in backward");
    ck_assert_int_eq(sl_net_step_count(net), 0);
    /* a failing step (a label out of range) changes nothing */
    ck_assert_msg(sl_net_train_step(net, x, in, labels, NULL) == SL_OK, "%s", sl_last_error());
    sl_param_info p0;
    ck_assert(sl_net_param(net, 0, &p0) == SL_OK);
    ck_assert_ptr_null(p0.grad);
    th_assert_error(sl_net_param_read_grad(net, 0, p0.data), SL_ERR_STATE, "no gradient");
    float *before = malloc(p0.count * sizeof(float));
    ck_assert(before);
    memcpy(before, p0.data, p0.count * sizeof(float));
    int bad[B] = {0, 10};
    th_assert_error(sl_net_train_step(net, x, in, bad, NULL), SL_ERR_INVALID_ARG, "outside");
    ck_assert(memcmp(before, p0.data, p0.count * sizeof(float)) == 0);
    ck_assert_int_eq(sl_net_step_count(net), 1);
    free(before);
    /* off again: gradients are kept and computed as before */
    ck_assert(sl_net_set_update_in_backward(net, 0) == SL_OK);
    ck_assert_msg(sl_net_compute_gradients(net, x, in, labels, NULL) == SL_OK, "%s", sl_last_error());
    ck_assert(sl_net_param(net, 0, &p0) == SL_OK);
    ck_assert_ptr_nonnull(p0.grad);
    ck_assert(sl_net_update(net) == SL_OK);
    ck_assert_int_eq(sl_net_step_count(net), 2);
    th_assert_error(sl_net_set_update_in_backward(NULL, 1), SL_ERR_INVALID_ARG, "NULL");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* Switching the update in backward on and off between steps continues
 * exactly as a network that always updated separately. */
START_TEST(switching_continues_exactly)
{
    sl_context *ca = th_context(6), *cb = th_context(6);
    sl_net *sep = cnn(ca, 2), *mix = cnn(cb, 2);
    sl_shape in = sl_shape_nchw(B, 3, RES, RES);
    float x[B * 3 * RES * RES];
    int labels[B];
    for (int s = 0; s < 4; s++) {
        ck_assert(sl_net_set_update_in_backward(mix, s % 2) == SL_OK);
        batch(x, labels, s);
        ck_assert_msg(sl_net_train_step(sep, x, in, labels, NULL) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(sl_net_train_step(mix, x, in, labels, NULL) == SL_OK, "%s", sl_last_error());
    }
    assert_same_state(sep, mix, "switching");
    sl_net_free(sep);
    sl_net_free(mix);
    sl_context_free(ca);
    sl_context_free(cb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("update_in_backward");
    /* three cases, so that CK_RUN_CASE can pick one (valgrind runs gpt2
     * and api) */
    TCase *cnn = tcase_create("cnn"), *gpt2 = tcase_create("gpt2"), *api = tcase_create("api");
    tcase_set_timeout(cnn, 600);
    tcase_set_timeout(gpt2, 600);
    tcase_set_timeout(api, 600);
    tcase_add_loop_test(cnn, cnn_bit_identical, 0, 12);
    tcase_add_loop_test(gpt2, gpt2_bit_identical, 0, 4);
    tcase_add_test(api, planned_as_values);
    tcase_add_test(api, refusals);
    tcase_add_test(api, switching_continues_exactly);
    suite_add_tcase(s, cnn);
    suite_add_tcase(s, gpt2);
    suite_add_tcase(s, api);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
