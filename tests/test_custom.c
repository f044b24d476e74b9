/*
 * test_custom.c — layers written with the public custom-layer API behave
 * as built-in ones:
 *  - the example's Swish, channel gate, SE block and SE residual block
 *    (examples/swish_se.c), a stochastic layer and a BatchNorm-like layer
 *    with kept saved state pass finite-difference gradient checks;
 *  - a network with custom layers in the chain and inside residual blocks,
 *    stochastic ones included, gives losses, gradients, parameters and
 *    running statistics bit-identical to keep-everything under sqrt, k
 *    segments and budgets, and the measured arena equals the planned one;
 *  - a custom layer declaring in-place runs in place when liveness allows
 *    and not when a later backward reads its input;
 *  - custom parameters and statistics save and load with the model.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "custom_test_layers.h"
#include "harness.h"
#include "net/net.h"
#include "swish_se.h"

#define EPS 4e-3f
#define RTOL 1e-2
#define ATOL 1e-3
#define STEPS 3

/* ---- finite differences ---- */

static void check_net(sl_net *net, sl_shape in, int coords)
{
    size_t n = (size_t)in.n * in.c * in.h * in.w;
    float *x = malloc(n * sizeof(float));
    ck_assert(x);
    th_fill_normal(x, n, 3, 1.0f);
    th_gradcheck_result r;
    th_gradcheck(net, x, in, 1, coords, EPS, RTOL, ATOL, &r);
    ck_assert_msg(4 * r.checked >= 3 * r.candidates, "only %d of %d coordinates checked (%d kinks)",
                  r.checked, r.candidates, r.skipped_kinks);
    ck_assert_msg(r.worst_error <= 1.0, "worst %s (error %.3g of tolerance)", r.worst, r.worst_error);
    free(x);
}

static void check_layer(sl_layer *layer, sl_shape in, int coords)
{
    sl_context *ctx = th_context(7);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, in.c, &net) == SL_OK);
    ck_assert_msg(sl_net_add(net, "layer", layer) == SL_OK, "%s", sl_last_error());
    check_net(net, in, coords);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_gradcheck_swish_learned_slopes)
{
    sl_context *ctx = th_context(7);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "act", swish(3)) == SL_OK);
    float beta[3] = {0.5f, 1.0f, 1.75f};
    ck_assert(sl_net_param_write(net, 0, beta) == SL_OK);
    check_net(net, sl_shape_nchw(2, 3, 4, 4), 40);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_gradcheck_channel_gate_two_inputs)
{
    /* y = x * sigmoid(mean(x)): the gradient reaches x through both inputs. */
    sl_layer *b = sl_block("Gated");
    int t = 0;
    sl_block_add(b, "pool", sl_global_avgpool(), 1, &t, &t);
    int ins[2] = {0, t};
    ck_assert_msg(sl_block_add(b, "gate", channel_gate(), 2, ins, &t) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(t, 2);
    check_layer(b, sl_shape_nchw(2, 3, 4, 4), 40);
}
END_TEST

START_TEST(test_gradcheck_se_block) { check_layer(se_block(6, 2), sl_shape_nchw(2, 6, 4, 4), 30); }
END_TEST

START_TEST(test_gradcheck_se_residual_block)
{
    check_layer(se_residual_block(4, 2), sl_shape_nchw(2, 4, 5, 5), 20);
}
END_TEST

START_TEST(test_gradcheck_stochastic_layer_redraws_its_numbers)
{
    check_layer(tl_random_scale(0.5f, 1), sl_shape_nchw(2, 3, 4, 4), 40);
}
END_TEST

START_TEST(test_gradcheck_batch_statistics_with_kept_saved_state)
{
    check_layer(tl_batch_scale(3), sl_shape_nchw(3, 3, 4, 4), 40);
}
END_TEST

/* ---- checkpointed == plain ---- */

/* A residual block with the stochastic and the batch-statistics layers
 * inside, and a stochastic layer that cannot run in place after the add. */
static sl_layer *noisy_residual(int c)
{
    sl_layer *b = sl_block("NoisyResidual");
    int t = 0;
    sl_block_add(b, "conv", sl_conv2d(c, c, 3, 1, 1), 1, &t, &t);
    sl_block_add(b, "scale", tl_batch_scale(c), 1, &t, &t);
    sl_block_add(b, "noise", tl_random_scale(0.2f, 1), 1, &t, &t);
    sl_block_add(b, "act", swish(c), 1, &t, &t);
    int ins[2] = {t, 0};
    sl_block_add(b, "add", sl_join_sum(), 2, ins, &t);
    ck_assert_msg(sl_block_add(b, "noise_out", tl_random_scale(0.1f, 0), 1, &t, &t) == SL_OK, "%s",
                  sl_last_error());
    return b;
}

static void add(sl_net *net, const char *name, sl_layer *l)
{
    ck_assert_msg(sl_net_add(net, name, l) == SL_OK, "%s: %s", name, sl_last_error());
}

static sl_net *custom_net(sl_context *ctx, sl_schedule schedule)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1));
    add(net, "bn1", sl_batchnorm2d(8));
    add(net, "act1", swish(8));
    add(net, "noise1", tl_random_scale(0.3f, 1));
    add(net, "scale1", tl_batch_scale(8));
    add(net, "layer1.0", se_residual_block(8, 2));
    add(net, "layer1.1", noisy_residual(8));
    add(net, "layer1.2", se_residual_block(8, 2));
    add(net, "conv2", sl_conv2d(8, 16, 3, 2, 1));
    add(net, "bn2", sl_batchnorm2d(16));
    add(net, "act2", swish(16));
    add(net, "noise2", tl_random_scale(0.3f, 0));
    add(net, "layer2.0", se_residual_block(16, 4));
    add(net, "pool", sl_global_avgpool());
    add(net, "fc", sl_linear(16, 10, 1));
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    return net;
}

typedef struct run {
    th_params params;
    float loss[STEPS];
    uint64_t total;
    tl_counts calls;
} run;

static const sl_shape SHAPE = {4, 3, 16, 16, SL_LAYOUT_NCHW};

static void train(sl_schedule schedule, run *out)
{
    sl_context *ctx = th_context(42);
    sl_net *net = custom_net(ctx, schedule);
    size_t n = (size_t)SHAPE.n * SHAPE.c * SHAPE.h * SHAPE.w;
    float *x = malloc(n * sizeof(float));
    int labels[4];
    ck_assert(x);
    memset(&tl_stats, 0, sizeof tl_stats);
    for (int step = 0; step < STEPS; step++) {
        th_fill_normal(x, n, (uint64_t)step + 100, 1.0f);
        for (int b = 0; b < SHAPE.n; b++)
            labels[b] = (b * 7 + step) % 10;
        sl_step_result r;
        ck_assert_msg(sl_net_train_step(net, x, SHAPE, labels, &r) == SL_OK, "%s", sl_last_error());
        out->loss[step] = r.loss;
    }
    out->calls = tl_stats;
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, SHAPE, SL_MODE_TRAIN, &rep) == SL_OK);
    ck_assert_msg(rep.arena_measured == rep.arena_bytes, "measured %" PRIu64 ", planned %" PRIu64,
                  rep.arena_measured, rep.arena_bytes);
    out->total = rep.total;
    th_params_capture(net, &out->params);
    free(x);
    sl_net_free(net);
    sl_context_free(ctx);
}

static void run_free(run *r) { th_params_free(&r->params); }

static void assert_identical(const run *a, const run *b, const char *what)
{
    ck_assert_msg(memcmp(a->loss, b->loss, sizeof a->loss) == 0, "%s: losses differ (%.9g vs %.9g)",
                  what, a->loss[STEPS - 1], b->loss[STEPS - 1]);
    th_params_assert_identical(&a->params, &b->params, what);
}

static uint64_t least_budget(void)
{
    sl_context *ctx = th_context(42);
    sl_net *net = custom_net(ctx, SL_SCHEDULE_NONE);
    uint64_t least = th_least_budget(net, SHAPE);
    sl_net_free(net);
    sl_context_free(ctx);
    return least;
}

START_TEST(test_checkpointed_equals_plain_with_custom_layers)
{
    run plain, other;
    train(SL_SCHEDULE_NONE, &plain);
    ck_assert_int_eq(plain.calls.reforward, 0);
    ck_assert_int_eq(plain.calls.bad_env, 0);
    ck_assert_int_gt(plain.calls.train, 0);
    uint64_t least = least_budget();
    sl_schedule schedules[6] = {SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(2), SL_SCHEDULE_SEGMENTS(5),
                                SL_SCHEDULE_BUDGET(least), SL_SCHEDULE_BUDGET(least + (plain.total - least) / 2),
                                SL_SCHEDULE_BUDGET(plain.total)};
    const char *names[6] = {"sqrt", "segments:2", "segments:5", "least budget", "middle budget",
                            "plain's budget"};
    for (int i = 0; i < 6; i++) {
        train(schedules[i], &other);
        assert_identical(&plain, &other, names[i]);
        if (i < 4) { /* these re-forward custom layers, stochastic ones included */
            ck_assert_msg(other.calls.reforward > 0, "%s re-forwarded no custom layer", names[i]);
            ck_assert_msg(other.total < plain.total, "%s: planned %" PRIu64 " not below %" PRIu64,
                          names[i], other.total, plain.total);
        }
        if (schedules[i].kind == SL_SCHEDULE_KIND_BUDGET)
            ck_assert_msg(other.total <= schedules[i].budget_bytes, "%s: over budget", names[i]);
        ck_assert_int_eq(other.calls.train, plain.calls.train);
        ck_assert_int_eq(other.calls.backward, plain.calls.backward);
        printf("%-14s bit-identical, %d custom re-forwards, planned %.1f KiB (plain %.1f KiB)\n",
               names[i], other.calls.reforward, other.total / 1024.0, plain.total / 1024.0);
        run_free(&other);
    }
    run_free(&plain);
}
END_TEST

START_TEST(test_inference_arena_measured_equals_planned)
{
    sl_context *ctx = th_context(42);
    sl_net *net = custom_net(ctx, SL_SCHEDULE_SQRT);
    size_t n = (size_t)SHAPE.n * SHAPE.c * SHAPE.h * SHAPE.w;
    float *x = malloc(n * sizeof(float)), logits[40];
    ck_assert(x);
    th_fill_normal(x, n, 5, 1.0f);
    memset(&tl_stats, 0, sizeof tl_stats);
    ck_assert_msg(sl_net_predict(net, x, SHAPE, logits) == SL_OK, "%s", sl_last_error());
    ck_assert_int_gt(tl_stats.eval, 0);
    ck_assert_int_eq(tl_stats.train + tl_stats.reforward + tl_stats.backward, 0);
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, SHAPE, SL_MODE_INFER, &rep) == SL_OK);
    ck_assert_uint_eq(rep.arena_measured, rep.arena_bytes);
    free(x);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ---- in place ---- */

typedef struct inplace_run {
    float loss;
    uint64_t outputs; /* planned peak of activations */
    tl_counts calls;
} inplace_run;

/* conv -> [relu ->] RandomScale -> pool -> fc, one training step. */
static inplace_run step_with_scale(int after_relu, int inplace)
{
    sl_context *ctx = th_context(9);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    add(net, "conv", sl_conv2d(3, 4, 3, 1, 1));
    if (after_relu)
        add(net, "relu", sl_relu());
    add(net, "noise", tl_random_scale(0.5f, inplace));
    add(net, "pool", sl_global_avgpool());
    add(net, "fc", sl_linear(4, 3, 1));
    float x[2 * 3 * 6 * 6];
    int labels[2] = {0, 2};
    th_fill_normal(x, sizeof x / sizeof *x, 1, 1.0f);
    memset(&tl_stats, 0, sizeof tl_stats);
    sl_step_result r;
    sl_shape s = sl_shape_nchw(2, 3, 6, 6);
    ck_assert_msg(sl_net_compute_gradients(net, x, s, labels, &r) == SL_OK, "%s", sl_last_error());
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, s, SL_MODE_TRAIN, &rep) == SL_OK);
    ck_assert_uint_eq(rep.arena_measured, rep.arena_bytes);
    inplace_run out = {r.loss, rep.outputs, tl_stats};
    sl_net_free(net);
    sl_context_free(ctx);
    return out;
}

START_TEST(test_inplace_custom_layer_runs_in_place_when_liveness_allows)
{
    /* After a conv (whose backward reads its input, not its output) the
     * conv's output dies at the layer: y overwrites x, dx overwrites dy. */
    inplace_run in = step_with_scale(0, 1), copy = step_with_scale(0, 0);
    ck_assert_int_eq(in.calls.fwd_inplace, 1);
    ck_assert_int_eq(in.calls.fwd_separate, 0);
    ck_assert_int_eq(in.calls.bwd_inplace, 1);
    ck_assert_int_eq(copy.calls.fwd_inplace + copy.calls.bwd_inplace, 0);
    ck_assert_msg(in.outputs < copy.outputs, "activations in place %" PRIu64 ", copying %" PRIu64,
                  in.outputs, copy.outputs);
    ck_assert_msg(in.loss == copy.loss, "in place %.9g, copying %.9g", in.loss, copy.loss);
}
END_TEST

START_TEST(test_inplace_custom_layer_keeps_an_input_a_later_backward_reads)
{
    /* After ReLU (whose backward reads its output = this layer's input)
     * the forward must not overwrite it; the backward still may. */
    inplace_run r = step_with_scale(1, 1);
    ck_assert_int_eq(r.calls.fwd_inplace, 0);
    ck_assert_int_eq(r.calls.fwd_separate, 1);
    ck_assert_int_eq(r.calls.bwd_inplace, 1);
}
END_TEST

/* ---- random numbers ---- */

static float drawn_forward[10], drawn_backward[3];

static sl_status rec_shape(const void *c, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    (void)c;
    (void)n_in;
    out->out = in[0];
    out->forward_workspace_bytes = 16 * sizeof(float);
    out->backward_workspace_bytes = 16 * sizeof(float);
    return SL_OK;
}

/* Draws numbers 3..12 in the training forward, 5..7 in backward. */
static sl_status rec_forward(const sl_custom_forward_args *a)
{
    memcpy(a->y, a->x[0], (size_t)a->out.n * a->out.c * a->out.h * a->out.w * sizeof(float));
    if (a->pass != SL_CUSTOM_TRAIN)
        return SL_OK;
    sl_status st = sl_custom_random_uniform(a->call, 3, 10, a->workspace);
    memcpy(drawn_forward, a->workspace, sizeof drawn_forward);
    return st;
}

static sl_status rec_backward(const sl_custom_backward_args *a)
{
    size_t n = (size_t)a->out.n * a->out.c * a->out.h * a->out.w;
    for (size_t i = 0; i < n; i++)
        a->dx[0][i] = a->dy[i];
    sl_status st = sl_custom_random_uniform(a->call, 5, 3, a->workspace);
    memcpy(drawn_backward, a->workspace, sizeof drawn_backward);
    return st;
}

START_TEST(test_random_numbers_are_philox_at_the_saved_counter)
{
    static const sl_custom_type t = {
        .name = "Recorder", .shape = rec_shape, .forward = rec_forward, .backward = rec_backward,
    };
    sl_context *ctx = th_context(0x1234567890abcdefULL);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 2, &net) == SL_OK);
    add(net, "drop", sl_dropout(0.5f)); /* takes counter blocks first */
    add(net, "rec", sl_custom_layer(&t, NULL, 0, NULL, 0));
    add(net, "after", sl_dropout(0.5f));
    float x[2 * 2 * 3 * 3], dy[2 * 2 * 3 * 3];
    th_fill_normal(x, 36, 1, 1.0f);
    th_fill_normal(dy, 36, 2, 1.0f);
    ck_assert_msg(sl_net_forward_backward(net, x, sl_shape_nchw(2, 2, 3, 3), dy, NULL, NULL) == SL_OK,
                  "%s", sl_last_error());
    /* Dropout of 36 values took blocks 0..8; Recorder's numbers 3..12 are
     * words of blocks 9 + 0..3, so the next dropout starts at block 13. */
    uint32_t key[2] = {0x90abcdefu, 0x12345678u};
    for (int j = 0; j < 10; j++) {
        uint64_t e = 3 + (uint64_t)j, c = 9 + e / 4;
        uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0}, w[4];
        sl_philox4x32_10(ctr, key, w);
        float want = (float)(w[e % 4] >> 8) * (1.0f / 16777216.0f);
        ck_assert_msg(drawn_forward[j] == want, "number %d: %.9g, Philox gives %.9g", (int)e,
                      drawn_forward[j], want);
        ck_assert(want >= 0.0f && want < 1.0f);
    }
    ck_assert(memcmp(drawn_backward, drawn_forward + 2, sizeof drawn_backward) == 0);
    ck_assert_uint_eq(sl_net_context(net)->dropout_counter, 13 + 9);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* ---- files ---- */

START_TEST(test_custom_parameters_save_and_load_with_the_model)
{
    sl_context *ctx = th_context(42), *ctx2 = th_context(1234);
    sl_net *net = custom_net(ctx, SL_SCHEDULE_SQRT), *fresh = custom_net(ctx2, SL_SCHEDULE_NONE);
    size_t n = (size_t)SHAPE.n * SHAPE.c * SHAPE.h * SHAPE.w;
    float *x = malloc(n * sizeof(float)), a[40], b[40];
    int labels[4] = {1, 2, 3, 4};
    ck_assert(x);
    th_fill_normal(x, n, 11, 1.0f);
    ck_assert(sl_net_train_step(net, x, SHAPE, labels, NULL) == SL_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/sl_custom_%d.safetensors", (int)getpid());
    ck_assert_msg(sl_save_model(net, path) == SL_OK, "%s", sl_last_error());
    sl_load_report rep;
    ck_assert_msg(sl_load_model(fresh, path, NULL, &rep) == SL_OK, "%s", sl_last_error());
    unlink(path);
    ck_assert_int_eq(rep.loaded, th_param_count(net));
    sl_param_info p;
    ck_assert(sl_net_find_param(fresh, "act1.beta", &p) == SL_OK && p.trainable);
    ck_assert(sl_net_find_param(fresh, "scale1.running_msq", &p) == SL_OK && !p.trainable);
    ck_assert(p.data[0] != 1.0f); /* moved by the training step */
    ck_assert(sl_net_find_param(fresh, "layer1.0.se.fc1.weight", &p) == SL_OK);
    ck_assert(sl_net_predict(net, x, SHAPE, a) == SL_OK);
    ck_assert(sl_net_predict(fresh, x, SHAPE, b) == SL_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    free(x);
    sl_net_free(net);
    sl_net_free(fresh);
    sl_context_free(ctx);
    sl_context_free(ctx2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("custom");
    TCase *tc = tcase_create("custom");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_gradcheck_swish_learned_slopes);
    tcase_add_test(tc, test_gradcheck_channel_gate_two_inputs);
    tcase_add_test(tc, test_gradcheck_se_block);
    tcase_add_test(tc, test_gradcheck_se_residual_block);
    tcase_add_test(tc, test_gradcheck_stochastic_layer_redraws_its_numbers);
    tcase_add_test(tc, test_gradcheck_batch_statistics_with_kept_saved_state);
    tcase_add_test(tc, test_checkpointed_equals_plain_with_custom_layers);
    tcase_add_test(tc, test_inference_arena_measured_equals_planned);
    tcase_add_test(tc, test_inplace_custom_layer_runs_in_place_when_liveness_allows);
    tcase_add_test(tc, test_inplace_custom_layer_keeps_an_input_a_later_backward_reads);
    tcase_add_test(tc, test_random_numbers_are_philox_at_the_saved_counter);
    tcase_add_test(tc, test_custom_parameters_save_and_load_with_the_model);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
