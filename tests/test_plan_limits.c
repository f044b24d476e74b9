/*
 * test_plan_limits.c — planned figures never wrap past 2^64. A step whose
 * tensors are too large for 64-bit byte counts (or for the kernels' int
 * positions) is refused with a message before it is planned, instead of
 * being reported as its remainder mod 2^64; below the bound the report
 * adds up exactly.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include <math.h>

#include "checkpoint/pipeline.h"
#include "harness.h"
#include "net/net.h"

/* A network of `gelus` GELUs (each keeps its input for backward, so none
 * shares storage) on `channels` channels, reuse on or off. */
static sl_net *gelu_net(sl_context *ctx, int channels, int gelus, int reuse)
{
    sl_net *net;
    ck_assert(sl_sequential(ctx, channels, &net) == SL_OK);
    for (int i = 0; i < gelus; i++)
        ck_assert_msg(sl_net_add(net, NULL, sl_gelu()) == SL_OK, "%s", sl_last_error());
    ck_assert(sl_net_set_memory_reuse(net, reuse) == SL_OK);
    return net;
}

/* 2^30 x 2^30 floats (4 EiB) per tensor, six of them: an arena that
 * wrapped to a small number before. Refused, with or without reuse, in
 * training and inference, and the network still plans a sane shape after. */
START_TEST(test_arena_past_2_to_the_64_is_refused_not_wrapped)
{
    sl_context *ctx = th_context(1);
    for (int reuse = 0; reuse < 2; reuse++) {
        sl_net *net = gelu_net(ctx, 1 << 30, 6, reuse);
        sl_shape huge = sl_shape_nchw(1, 1 << 30, 1 << 30, 1);
        for (int mode = 0; mode < 2; mode++) {
            sl_memory_report r;
            sl_status st = sl_net_memory_report(net, huge, mode ? SL_MODE_INFER : SL_MODE_TRAIN, &r);
            ck_assert_msg(st != SL_OK, "reuse %d mode %d: planned an arena of %llu bytes, total %llu",
                          reuse, mode, (unsigned long long)r.arena_bytes,
                          (unsigned long long)r.total);
            th_assert_error(st, SL_ERR_NOMEM, "more than 2^56 bytes (64 PiB)");
        }
        sl_memory_report r;
        sl_shape fine = sl_shape_nchw(2, 1 << 30, 1, 1);
        ck_assert_msg(sl_net_memory_report(net, fine, SL_MODE_TRAIN, &r) == SL_OK, "%s",
                      sl_last_error());
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

/* Batch x height x width past 2^31 - 1: the kernels count positions in
 * int. Refused naming the count, before any shape is inferred. */
START_TEST(test_input_positions_past_int_are_refused)
{
    sl_context *ctx = th_context(1);
    sl_net *net = gelu_net(ctx, 1, 2, 1);
    sl_memory_report r;
    sl_shape wide = sl_shape_seq(65536, 65536, 1);
    th_assert_error(sl_net_memory_report(net, wide, SL_MODE_TRAIN, &r), SL_ERR_SHAPE,
                    "4294967296 positions (batch x height x width); at most 2147483647");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* Just below the bound (tensors of 4 TiB, without reuse: all in one
 * arena) every figure is exact and the total is their sum. */
START_TEST(test_large_plan_adds_up_exactly)
{
    sl_context *ctx = th_context(1);
    sl_net *net = gelu_net(ctx, 1 << 20, 3, 0);
    sl_memory_report r;
    sl_shape big = sl_shape_nchw(1, 1 << 20, 1 << 20, 1);
    ck_assert_msg(sl_net_memory_report(net, big, SL_MODE_TRAIN, &r) == SL_OK, "%s", sl_last_error());
    const uint64_t tensor = (uint64_t)1 << 42;
    ck_assert_msg(r.outputs == 3 * tensor, "outputs %llu", (unsigned long long)r.outputs);
    ck_assert(r.arena_bytes >= 3 * tensor && r.arena_bytes < ((uint64_t)1 << 50));
    ck_assert(r.total == r.arena_bytes + r.fixed + r.communication);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* The planner itself, on values too large for the shape pass to let
 * through (each 2^62 bytes, set by hand in a real program): offsets, the
 * arena and the live sums saturate and the plan is refused, where the
 * arena wrapped before. */
START_TEST(test_planner_refuses_an_arena_past_2_to_the_64)
{
    sl_context *ctx = th_context(1);
    for (int reuse = 0; reuse < 2; reuse++) {
        sl_net *net = gelu_net(ctx, 4, 6, reuse);
        sl_run_cache *c;
        sl_shape in = sl_shape_nchw(2, 4, 1, 1);
        ck_assert_msg(sl_net_plan_cached(net, in, SL_MODE_TRAIN, 0, &c) == SL_OK, "%s", sl_last_error());
        for (int v = 0; v < c->prog.n_values; v++)
            c->prog.values[v].bytes = (size_t)1 << 62;
        sl_plan plan;
        sl_status st = sl_plan_build(&net->graph, &c->prog, reuse, &plan);
        ck_assert_msg(st != SL_OK, "reuse %d: an arena of %llu bytes", reuse,
                      (unsigned long long)plan.arena_bytes);
        th_assert_error(st, SL_ERR_NOMEM, "the planned arena is 2^64 bytes or more");
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

/* GPT-2 of 1000 layers of 65536 channels, batch 1024 of 2048 tokens:
 * every layer's FLOPs fit 64 bits but one step's total (about 2^69) does
 * not. The totals saturate instead of wrapping, and the recomputed
 * fraction of the sqrt schedule (one extra forward of most layers, about
 * a third of a step) stays a fraction, where it read 117 before. */
START_TEST(test_recompute_fraction_of_a_model_past_2_to_the_64_flops)
{
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 1, &net) == SL_OK);
    ck_assert(sl_net_set_memory_check(net, 0) == SL_OK);
    sl_gpt2_config cfg = sl_gpt2_defaults();
    cfg.layers = 1000;
    cfg.embd = 65536;
    cfg.heads = 64;
    cfg.context = 2048;
    ck_assert_msg(sl_model_gpt2(net, &cfg) == SL_OK, "%s", sl_last_error());
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_SQRT) == SL_OK);
    sl_shape in = sl_shape_seq(1024, 2048, 1);
    sl_memory_report r;
    ck_assert_msg(sl_net_memory_report(net, in, SL_MODE_TRAIN, &r) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(isfinite(r.recompute_fraction) && r.recompute_fraction > 0.2 &&
                      r.recompute_fraction < 0.5,
                  "recompute fraction %g", r.recompute_fraction);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* One Linear of 2^20 x 2^20 over 2^25 rows: 2^66 FLOPs forward, in
 * tensors of 128 TiB the shape pass lets through. Its count saturates at
 * UINT64_MAX (it wrapped to 0 before), and a step of it and a GELU, with
 * the GELU recomputed, reports a fraction within [0, 1]. */
START_TEST(test_layer_flops_past_2_to_the_64_saturate)
{
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 1 << 20, &net) == SL_OK);
    ck_assert(sl_net_set_memory_check(net, 0) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_gelu()) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_linear(1 << 20, 1 << 20, 0)) == SL_OK);
    ck_assert(sl_net_add(net, NULL, sl_gelu()) == SL_OK);
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_SQRT) == SL_OK);
    sl_shape in = sl_shape_nchw(1 << 25, 1 << 20, 1, 1);
    sl_unit_report *u;
    int n;
    ck_assert_msg(sl_net_unit_reports(net, in, SL_MODE_TRAIN, &u, &n) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(n, 3);
    ck_assert_msg(u[1].fwd_flops == UINT64_MAX && u[1].bwd_flops == UINT64_MAX,
                  "Linear's FLOPs %llu forward, %llu backward", (unsigned long long)u[1].fwd_flops,
                  (unsigned long long)u[1].bwd_flops);
    ck_assert(u[0].fwd_flops == ((uint64_t)1 << 45) * 12); /* a GELU's count stays exact */
    sl_unit_reports_free(u);
    sl_memory_report r;
    ck_assert_msg(sl_net_memory_report(net, in, SL_MODE_TRAIN, &r) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(isfinite(r.recompute_fraction) && r.recompute_fraction >= 0.0 &&
                      r.recompute_fraction <= 1.0,
                  "recompute fraction %g", r.recompute_fraction);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_limits");
    TCase *tc = tcase_create("plan_limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_arena_past_2_to_the_64_is_refused_not_wrapped);
    tcase_add_test(tc, test_input_positions_past_int_are_refused);
    tcase_add_test(tc, test_large_plan_adds_up_exactly);
    tcase_add_test(tc, test_planner_refuses_an_arena_past_2_to_the_64);
    tcase_add_test(tc, test_recompute_fraction_of_a_model_past_2_to_the_64_flops);
    tcase_add_test(tc, test_layer_flops_past_2_to_the_64_saturate);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
