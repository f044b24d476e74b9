/*
 * test_custom_errors.c — bad custom layer definitions and blocks are
 * refused with a message a person can act on, and the network stays
 * usable: a NULL callback, unknown flags, bad names and parameters and
 * name clashes are refused when the layer or block is made or added;
 * sizes that lie (negative, an output dimension of 0, saved state that
 * disagrees with the flags) when the network is planned, before any
 * kernel; callbacks that fail or draw random numbers they may not make
 * the running call fail, and the next call works.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "custom_test_layers.h"
#include "harness.h"
#include "swish_se.h"

/* conv -> act -> (test adds layers here) */
static sl_net *small_net(sl_context *ctx)
{
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_add(net, "conv", sl_conv2d(3, 4, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "act", swish(4)) == SL_OK);
    return net;
}

static const sl_shape SHAPE = {2, 3, 6, 6, SL_LAYOUT_NCHW};

/* Finishes the network and trains a step: it still works. */
static void assert_usable(sl_net *net)
{
    if (th_param_count(net) == 3) { /* not finished yet */
        ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
        ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    }
    float x[2 * 3 * 6 * 6];
    int labels[2] = {0, 2};
    th_fill_normal(x, sizeof x / sizeof *x, 1, 1.0f);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0);
    ck_assert_msg(sl_net_set_optimizer(net, &o) == SL_OK, "%s", sl_last_error());
    sl_step_result r;
    ck_assert_msg(sl_net_train_step(net, x, SHAPE, labels, &r) == SL_OK, "%s", sl_last_error());
    ck_assert(r.loss > 0.0f);
}

static sl_status ok_shape(const void *c, int n, const sl_shape *in, sl_custom_sizes *out)
{
    (void)c;
    (void)n;
    out->out = in[0];
    return SL_OK;
}
static sl_status ok_forward(const sl_custom_forward_args *a)
{
    (void)a;
    return SL_OK;
}
static sl_status ok_backward(const sl_custom_backward_args *a)
{
    (void)a;
    return SL_OK;
}

static const sl_custom_type good = {
    .name = "Good", .shape = ok_shape, .forward = ok_forward, .backward = ok_backward,
};

/* A definition refused when made: sl_net_add then reports the message. */
static void assert_refused(sl_net *net, sl_layer *layer, const char *fragment)
{
    ck_assert_ptr_null(layer);
    th_assert_error(sl_net_add(net, "bad", layer), SL_ERR_INVALID_ARG, fragment);
}

START_TEST(test_bad_types_are_refused_when_made)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    assert_refused(net, sl_custom_layer(NULL, NULL, 0, NULL, 0), "type is NULL");
    sl_custom_type t = good;
    t.forward = NULL;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "has no forward callback");
    t = good;
    t.backward = NULL;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "has no backward callback");
    t = good;
    t.shape = NULL;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "has no shape callback");
    t = good;
    t.name = "";
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "name must have 1 to 31");
    t.name = "AVeryLongTypeNameThatGoesOnAndOn";
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "name must have 1 to 31");
    t = good;
    t.flags = 1u << 9;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "unknown flags 0x200");
    t.flags = SL_CUSTOM_SAVED_KEPT;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "no SL_CUSTOM_NEEDS_SAVED");
    t = good;
    t.n_inputs = 9;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "takes 9 inputs");
    t.n_inputs = -1;
    assert_refused(net, sl_custom_layer(&t, NULL, 0, NULL, 0), "takes -1 inputs");
    assert_refused(net, sl_custom_layer(&good, NULL, 8, NULL, 0), "config is NULL");
    assert_usable(net);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_bad_parameters_are_refused_when_made)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    sl_custom_param p[2] = {{"w", 2, {4, 3}, SL_PARAM_UNIFORM_FAN_IN, 3, 1},
                            {"w", 1, {4}, SL_PARAM_ZEROS, 0, 1}};
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "two parameters named 'w'");
    p[1].name = "w.b";
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "without '.'");
    p[1].name = NULL;
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "parameter 1 of 'Good' needs a name");
    p[1].name = "b";
    p[1].dims[0] = -3;
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "dimension 0 of size -3");
    p[1].dims[0] = 4;
    p[1].ndim = 5;
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "has 5 dimensions");
    p[1].ndim = 1;
    p[0].fan = 0;
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "needs fan >= 1");
    p[0].fan = 3;
    p[0].init = (sl_param_init)7;
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 2), "unknown init 7");
    p[0].init = SL_PARAM_ZEROS;
    assert_refused(net, sl_custom_layer(&good, NULL, 0, p, 5), "declares 5 parameters");
    assert_refused(net, sl_custom_layer(&good, NULL, 0, NULL, 1), "params is NULL");
    /* The definition that is right now is accepted, under a clashing
     * name refused, and the network trains. */
    sl_layer *fine = sl_custom_layer(&good, NULL, 0, p, 2);
    ck_assert_ptr_nonnull(fine);
    th_assert_error(sl_net_add(net, "act", fine), SL_ERR_INVALID_ARG, "a layer named 'act' already exists");
    assert_usable(net);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_channels_refused_when_added)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    th_assert_error(sl_net_add(net, "act2", swish(8)), SL_ERR_SHAPE, "Swish has 8 channels");
    th_assert_error(sl_net_add(net, "gate", channel_gate()), SL_ERR_SHAPE,
                 "takes 2 inputs: add it inside a block");
    assert_usable(net);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* A lying layer makes planning fail with `fragment`, before any kernel
 * and without changing the parameters; the same call fails again. */
static void assert_lie_caught(int lie, sl_status want, const char *fragment)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    ck_assert(sl_net_add(net, "liar", tl_liar(lie)) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    float before[4 * 3 * 3 * 3], after[4 * 3 * 3 * 3];
    ck_assert(sl_net_param_read(net, 0, before) == SL_OK);
    sl_shape out;
    th_assert_error(sl_net_output_shape(net, SHAPE, &out), want, fragment);
    ck_assert_msg(strstr(sl_last_error(), "'liar' (Liar)") != NULL, "%s", sl_last_error());
    float x[2 * 3 * 6 * 6] = {0};
    int labels[2] = {0, 1};
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.0f, 0.0f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    memset(&tl_stats, 0, sizeof tl_stats);
    th_assert_error(sl_net_train_step(net, x, SHAPE, labels, NULL), want, fragment);
    ck_assert(sl_net_param_read(net, 0, after) == SL_OK);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    ck_assert_int_eq(sl_net_step_count(net), 0);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_lying_sizes_refused_when_planned)
{
    assert_lie_caught(1, SL_ERR_INVALID_ARG, "negative size");
    assert_lie_caught(2, SL_ERR_INVALID_ARG, "declares saved_bytes 0");
    assert_lie_caught(3, SL_ERR_INVALID_ARG, "but not SL_CUSTOM_NEEDS_SAVED");
    assert_lie_caught(4, SL_ERR_SHAPE, "every dimension must be >= 1");
    assert_lie_caught(5, SL_ERR_SHAPE, "refuses input 2x4x6x6: Liar wants 7 channels");
    assert_lie_caught(6, SL_ERR_SHAPE, "declares output layout 7 for input 2x4x6x6");
}
END_TEST

/* A custom layer's output has the layout its shape callback declares, and
 * the layers after it read it so: an NHWC output cannot feed pooling, an
 * NCHW one cannot feed LayerNorm, and the input's layout passes through
 * a callback that copies the input's shape. */
START_TEST(test_custom_output_layout_is_checked_downstream)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    ck_assert(sl_net_add(net, "liar", tl_liar(7)) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    sl_shape out;
    th_assert_error(sl_net_output_shape(net, SHAPE, &out), SL_ERR_SHAPE,
                    "GlobalAvgPool2d 'pool' reads NCHW images, but its input is 2x6x6x4 (NHWC)");
    sl_net_free(net);

    sl_shape seq = sl_shape_seq(2, 5, 6);
    for (int lie = 0; lie <= 1; lie++) {
        net = NULL;
        ck_assert(sl_sequential(ctx, 6, &net) == SL_OK);
        ck_assert(sl_net_add(net, "liar", lie ? tl_liar(8) : tl_random_scale(0.5f, 0)) == SL_OK);
        ck_assert(sl_net_add(net, "ln", sl_layernorm(6, 1e-5f)) == SL_OK);
        if (lie) {
            th_assert_error(sl_net_output_shape(net, seq, &out), SL_ERR_SHAPE,
                            "LayerNorm 'ln' reads rows of channels (a sequence [B, T, C], NHWC), "
                            "but its input is NCHW 2x6x5x1");
        } else {
            ck_assert_msg(sl_net_output_shape(net, seq, &out) == SL_OK, "%s", sl_last_error());
            ck_assert(out.layout == SL_LAYOUT_NHWC && out.n == 2 && out.c == 6 && out.h == 5);
        }
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_failing_callback_fails_the_call_and_the_next_works)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    ck_assert(sl_net_add(net, "flaky", tl_flaky()) == SL_OK);
    float x[2 * 3 * 6 * 6];
    int labels[2] = {0, 2};
    th_fill_normal(x, sizeof x / sizeof *x, 1, 1.0f);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    tl_fail_forward = 1;
    th_assert_error(sl_net_train_step(net, x, SHAPE, labels, NULL), SL_ERR_BACKEND,
                 "sl_net_train_step: custom layer 'flaky' (Flaky) failed in forward: "
                 "injected failure at pass 0");
    ck_assert_int_eq(sl_net_step_count(net), 0); /* no update from a failed step */
    float logits[6];
    tl_fail_forward = 2;
    th_assert_error(sl_net_predict(net, x, SHAPE, logits), SL_ERR_BACKEND, "gave no message");
    tl_fail_forward = 0;
    assert_usable(net);
    ck_assert_int_eq(sl_net_step_count(net), 1);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_random_numbers_only_where_they_exist)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    ck_assert(sl_net_add(net, "draw", tl_overdraw()) == SL_OK);
    ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
    ck_assert(sl_net_add(net, "fc", sl_linear(4, 3, 1)) == SL_OK);
    float x[2 * 3 * 6 * 6], logits[6];
    int labels[2] = {0, 2};
    th_fill_normal(x, sizeof x / sizeof *x, 1, 1.0f);
    th_assert_error(sl_net_compute_gradients(net, x, SHAPE, labels, NULL), SL_ERR_STATE,
                 "asks in its backward for numbers up to 289, but its training forward drew only 288");
    th_assert_error(sl_net_predict(net, x, SHAPE, logits), SL_ERR_STATE,
                 "'draw' (OverDraw) draws in an evaluation forward");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_bad_blocks_refused_when_added)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    sl_layer *b = sl_block("Mine");
    int t = 0;
    int id = 0;
    ck_assert_int_eq(sl_block_add(b, "conv", sl_conv2d(4, 4, 3, 1, 1), 1, &t, &id), SL_OK);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(sl_block_add(b, "conv", sl_relu(), 1, &t, &id), SL_ERR_INVALID_ARG);
    ck_assert_int_eq(id, -1);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "already has a layer named 'conv'"));
    int missing = 2;
    ck_assert_int_eq(sl_block_add(b, "relu", sl_relu(), 1, &missing, NULL), SL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "tensor 2, which does not exist"));
    int two[2] = {0, 1};
    ck_assert_int_eq(sl_block_add(b, "inner", se_block(4, 2), 2, two, NULL), SL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "is a block, which reads one input, not 2"));
    ck_assert_int_eq(sl_block_add(b, "gate", channel_gate(), 1, &t, NULL), SL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "takes 2 inputs, not 1"));
    ck_assert_int_eq(sl_block_add(b, "nothing", NULL, 1, &t, NULL), SL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "constructor failed"));
    sl_layer *not_block = sl_relu();
    ck_assert_int_eq(sl_block_add(not_block, "x", sl_relu(), 1, &t, NULL), SL_ERR_INVALID_ARG); /* frees the child */
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "not a block made by sl_block"));
    sl_layer_free(not_block);
    /* A failed add keeps its message through the adds that follow it. */
    int bad = 0;
    ck_assert_int_eq(sl_block_add(b, "x", sl_conv2d(0, 4, 3, 1, 1), 1, &t, &bad), SL_ERR_INVALID_ARG);
    ck_assert_int_eq(bad, -1);
    ck_assert_int_eq(sl_block_add(b, "y", sl_relu(), 1, &bad, &bad), SL_ERR_INVALID_ARG);
    ck_assert_int_eq(bad, -1);
    ck_assert_ptr_nonnull(strstr(sl_last_error(), "sl_conv2d"));
    /* conv (1) and a relu reading the block input (2): conv's output is dead. */
    ck_assert_int_eq(sl_block_add(b, "relu", sl_relu(), 1, &t, &id), SL_OK);
    ck_assert_int_eq(id, 2);
    th_assert_error(sl_net_add(net, "blk", b), SL_ERR_SHAPE, "the output of 'conv' is read by no later layer");
    th_assert_error(sl_net_add(net, "empty", sl_block("Empty")), SL_ERR_SHAPE, "has no layers");
    /* Channels are checked through the wiring, into nested blocks. */
    b = sl_block("Wide");
    sl_block_add(b, "se", se_block(8, 2), 1, &t, &t);
    th_assert_error(sl_net_add(net, "wide", b), SL_ERR_SHAPE, 
                 "block 'wide': block 'se': custom layer 'gate' (ChannelGate) refuses input "
                 "channels 4, 8: gate of 8 channels for 4 channels");
    b = sl_block("Sum");
    t = 0;
    sl_block_add(b, "conv", sl_conv2d(4, 6, 1, 1, 0), 1, &t, &t);
    int sum[2] = {0, t};
    ck_assert_int_eq(sl_block_add(b, "add", sl_join_sum(), 2, sum, &t), SL_OK);
    ck_assert_int_eq(t, 2);
    th_assert_error(sl_net_add(net, "sum", b), SL_ERR_SHAPE, "joins tensors of 4 and 6 channels");
    assert_usable(net);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("custom_errors");
    TCase *tc = tcase_create("custom_errors");
    tcase_add_test(tc, test_bad_types_are_refused_when_made);
    tcase_add_test(tc, test_bad_parameters_are_refused_when_made);
    tcase_add_test(tc, test_channels_refused_when_added);
    tcase_add_test(tc, test_lying_sizes_refused_when_planned);
    tcase_add_test(tc, test_custom_output_layout_is_checked_downstream);
    tcase_add_test(tc, test_failing_callback_fails_the_call_and_the_next_works);
    tcase_add_test(tc, test_random_numbers_only_where_they_exist);
    tcase_add_test(tc, test_bad_blocks_refused_when_added);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
