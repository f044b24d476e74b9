/*
 * test_prepare.c — sl_net_prepare does a step's first-use work once, all
 * or nothing: after it the network is finalised, its parameters,
 * gradients, optimizer state and arena are allocated for the shape, and a
 * step on that shape plans nothing more (the arena and the cached plan stay
 * where they are); the steps then give the bits of a network that was
 * never prepared. A prepare that fails (an input the network does not
 * take, a step larger than the machine, a network in inference mode asked
 * for training) leaves the network as it was: layers can still be added
 * and nothing is allocated.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "net/net.h"

#define BATCH 4
#define RES 8
#define CLASSES 3

/* A small checkpointed CNN, with SGD when optimizer is 1 (setting an
 * optimizer finalises a network: it sizes the optimizer's state). */
static sl_net *small_net_with(sl_context *ctx, int optimizer)
{
    sl_net *net = NULL;
    ck_assert_int_eq(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net), SL_OK);
    ck_assert_int_eq(sl_net_add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1)), SL_OK);
    ck_assert_int_eq(sl_net_add(net, "relu1", sl_relu()), SL_OK);
    ck_assert_int_eq(sl_net_add(net, "conv2", sl_conv2d(8, 8, 3, 1, 1)), SL_OK);
    ck_assert_int_eq(sl_net_add(net, "relu2", sl_relu()), SL_OK);
    ck_assert_int_eq(sl_net_add(net, "pool", sl_global_avgpool()), SL_OK);
    ck_assert_int_eq(sl_net_add(net, "fc", sl_linear(8, CLASSES, 1)), SL_OK);
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 0);
    if (optimizer)
        ck_assert_int_eq(sl_net_set_optimizer(net, &o), SL_OK);
    return net;
}

static sl_net *small_net(sl_context *ctx) { return small_net_with(ctx, 1); }

static void batch(float *x, int *labels, int step)
{
    th_fill_normal(x, (size_t)BATCH * 3 * RES * RES, 100 + (uint64_t)step, 1.0f);
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i + step) % CLASSES;
}

START_TEST(test_prepare_allocates_once_and_the_step_plans_nothing)
{
    sl_context *ctx = th_context(7);
    sl_net *net = small_net(ctx);
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    ck_assert_ptr_null(net->param_block);
    ck_assert_int_eq(sl_net_prepare(net, sh, SL_MODE_TRAIN), SL_OK);
    ck_assert_int_eq(net->finalized, 1);
    ck_assert_ptr_nonnull(net->param_block);
    ck_assert_ptr_nonnull(net->grad_block);
    ck_assert_ptr_nonnull(net->opt_block);
    ck_assert_ptr_nonnull(net->arena);
    ck_assert_int_eq(net->cache[SL_MODE_TRAIN].valid, 1);
    ck_assert_uint_ge(net->arena_capacity, net->cache[SL_MODE_TRAIN].plan.arena_bytes);
    /* what was allocated is what the report plans */
    sl_memory_report r;
    ck_assert_int_eq(sl_net_memory_report(net, sh, SL_MODE_TRAIN, &r), SL_OK);
    ck_assert_uint_eq(r.measured_params, r.params);
    ck_assert_uint_eq(r.measured_param_grads, r.param_grads);
    ck_assert_uint_eq(r.measured_optimizer, r.optimizer);
    /* a finalised network takes no more layers */
    sl_layer *extra = sl_relu();
    th_assert_error(sl_net_add(net, "late", extra), SL_ERR_STATE, "");

    char *arena = net->arena;
    /* a new plan is built beside the old one: its steps lie elsewhere */
    const sl_step *steps = net->cache[SL_MODE_TRAIN].prog.steps;
    float x[BATCH * 3 * RES * RES];
    int labels[BATCH];
    sl_step_result res;
    for (int step = 0; step < 2; step++) {
        batch(x, labels, step);
        ck_assert_int_eq(sl_net_train_step(net, x, sh, labels, &res), SL_OK);
    }
    ck_assert_ptr_eq(net->arena, arena);
    ck_assert_ptr_eq(net->cache[SL_MODE_TRAIN].prog.steps, steps);
    /* preparing a prepared shape again changes nothing */
    ck_assert_int_eq(sl_net_prepare(net, sh, SL_MODE_TRAIN), SL_OK);
    ck_assert_ptr_eq(net->arena, arena);
    ck_assert_ptr_eq(net->cache[SL_MODE_TRAIN].prog.steps, steps);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_prepare_then_train_is_bit_identical_to_train_alone)
{
    sl_context *ctx[2] = {th_context(21), th_context(21)};
    sl_net *net[2] = {small_net(ctx[0]), small_net(ctx[1])};
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    ck_assert_int_eq(sl_net_prepare(net[0], sh, SL_MODE_TRAIN), SL_OK);
    ck_assert_int_eq(sl_net_prepare(net[0], sh, SL_MODE_INFER), SL_OK);
    float x[BATCH * 3 * RES * RES];
    int labels[BATCH];
    sl_step_result res[2];
    for (int step = 0; step < 3; step++) {
        batch(x, labels, step);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(sl_net_train_step(net[i], x, sh, labels, &res[i]), SL_OK);
        ck_assert(memcmp(&res[0].loss, &res[1].loss, sizeof res[0].loss) == 0);
    }
    th_params p[2];
    for (int i = 0; i < 2; i++)
        th_params_capture(net[i], &p[i]);
    th_params_assert_identical(&p[0], &p[1], "prepared against unprepared");
    float logits[2][BATCH * CLASSES];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sl_net_predict(net[i], x, sh, logits[i]), SL_OK);
    ck_assert(memcmp(logits[0], logits[1], sizeof logits[0]) == 0);
    for (int i = 0; i < 2; i++) {
        th_params_free(&p[i]);
        sl_net_free(net[i]);
        sl_context_free(ctx[i]);
    }
}
END_TEST

/* The network after a failed prepare: finalised as before, nothing
 * allocated, and (when never finalised) it still takes layers. (A plan
 * that was made may stay cached: it is derived from the network and
 * holds no memory of the step.) */
static void assert_untouched(sl_net *net, int was_finalized)
{
    ck_assert_int_eq(net->finalized, was_finalized);
    ck_assert_ptr_null(net->param_block);
    ck_assert_ptr_null(net->grad_block);
    ck_assert_ptr_null(net->opt_block);
    ck_assert_ptr_null(net->arena);
    if (!was_finalized)
        ck_assert_int_eq(sl_net_add(net, "late", sl_relu()), SL_OK);
}

START_TEST(test_prepare_failing_leaves_the_network_as_it_was)
{
    sl_context *ctx = th_context(3);
    for (int optimizer = 0; optimizer < 2; optimizer++) {
        sl_net *net = small_net_with(ctx, optimizer);
        /* four channels into a network that takes three */
        th_assert_error(sl_net_prepare(net, sl_shape_nchw(BATCH, 4, RES, RES), SL_MODE_TRAIN),
                        SL_ERR_SHAPE, "the network takes 3");
        assert_untouched(net, optimizer);
        sl_net_free(net);
    }
    sl_net *net = small_net(ctx);
    th_assert_error(sl_net_prepare(net, sl_shape_nchw(0, 3, RES, RES), SL_MODE_INFER), SL_ERR_SHAPE,
                    "batch, height and width");
    th_assert_error(sl_net_prepare(net, sl_shape_nchw(BATCH, 3, RES, RES), (sl_mode)7),
                    SL_ERR_INVALID_ARG, "unknown mode 7");
    th_assert_error(sl_net_prepare(NULL, sl_shape_nchw(BATCH, 3, RES, RES), SL_MODE_TRAIN),
                    SL_ERR_INVALID_ARG, "network is NULL");
    sl_net_free(net);

    /* a step far larger than the machine: refused before any allocation */
    sl_net *big = NULL;
    ck_assert_int_eq(sl_sequential(ctx, 3, &big), SL_OK);
    ck_assert_int_eq(sl_model_build(big, "resnet152", 1000000, 224), SL_OK);
    sl_optimizer_options adam = sl_optimizer_adam(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f);
    ck_assert_int_eq(sl_net_set_optimizer(big, &adam), SL_OK);
    th_assert_error(sl_net_prepare(big, sl_shape_nchw(16, 3, 224, 224), SL_MODE_TRAIN), SL_ERR_NOMEM,
                    "sl_net_prepare");
    assert_untouched(big, 1);
    sl_net_free(big);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_prepare_for_training_refuses_a_network_in_inference_mode)
{
    sl_context *ctx = th_context(5);
    sl_net *net = small_net(ctx);
    sl_shape sh = sl_shape_nchw(BATCH, 3, RES, RES);
    ck_assert_int_eq(sl_net_set_mode(net, SL_MODE_INFER), SL_OK);
    th_assert_error(sl_net_prepare(net, sh, SL_MODE_TRAIN), SL_ERR_STATE, "inference mode");
    ck_assert_int_eq(sl_net_prepare(net, sh, SL_MODE_INFER), SL_OK);
    ck_assert_ptr_null(net->grad_block); /* inference keeps no gradients */
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prepare");
    TCase *tc = tcase_create("prepare");
    tcase_add_test(tc, test_prepare_allocates_once_and_the_step_plans_nothing);
    tcase_add_test(tc, test_prepare_then_train_is_bit_identical_to_train_alone);
    tcase_add_test(tc, test_prepare_failing_leaves_the_network_as_it_was);
    tcase_add_test(tc, test_prepare_for_training_refuses_a_network_in_inference_mode);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
