/*
 * test_schedule.c — schedules: sqrt uses ceil(sqrt(N)) segments, budget
 * schedules fit their budget and pick less recompute for more memory, an
 * infeasible budget names the least feasible one, the reported recompute
 * fraction equals a FLOP count of the program, a re-forward runs only
 * what is read, multi-level recursion reaches the least-memory targets,
 * and memonger's BatchNorm momentum rescale changes running statistics as
 * 1 - sqrt(1 - m) predicts (and as 1 - (1 - m)^(1/k) for k runs).
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "net/net.h"
#include "harness.h"

static sl_net *resnet(sl_context *ctx, const char *model, sl_schedule s)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, s, &net) == SL_OK);
    ck_assert_msg(sl_model_build(net, model, 10, 32) == SL_OK, "%s", sl_last_error());
    return net;
}

START_TEST(test_sqrt_schedule_segment_count)
{
    sl_context *ctx = th_context(1);
    sl_net *net = resnet(ctx, "resnet56", SL_SCHEDULE_SQRT);
    sl_memory_report r;
    ck_assert(sl_net_memory_report(net, sl_shape_nchw(8, 3, 32, 32), SL_MODE_TRAIN, &r) == SL_OK);
    const sl_segments *seg = &net->cache[SL_MODE_TRAIN].seg;
    int n = sl_net_layer_count(net); /* 3 + 27 blocks + 3 = 33 -> 6 segments */
    ck_assert_int_eq(n, 33);
    ck_assert_int_eq(seg->n, 6);
    ck_assert_int_eq(seg->start[0], 0);
    ck_assert_int_eq(seg->start[seg->n], n);
    for (int j = 0; j < seg->n; j++) {
        ck_assert_int_lt(seg->start[j], seg->start[j + 1]);
        ck_assert_int_eq(seg->recompute[j], j + 1 < seg->n);
    }
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* Balanced segments: the largest segment as small as it can be, and, when
 * one big layer fixes that size (VGG's first conv), the rest split evenly
 * rather than into one-layer segments at the front. */
START_TEST(test_balanced_segments_split_evenly_behind_a_big_layer)
{
    uint64_t stored[9] = {100, 1, 1, 1, 1, 1, 1, 1, 1}, zero[9] = {0};
    sl_unit_costs u = {9, stored, stored, zero, zero};
    sl_segments s;
    ck_assert(sl_segments_balanced(&u, 3, &s) == SL_OK);
    ck_assert_int_eq(s.n, 3);
    int expect[4] = {0, 1, 5, 9}; /* [100] [1 1 1 1] [1 1 1 1] */
    for (int j = 0; j <= 3; j++)
        ck_assert_int_eq(s.start[j], expect[j]);
    ck_assert(s.recompute[0] && s.recompute[1] && !s.recompute[2]);
    sl_segments_release(&s);
    /* without a dominant layer: the least largest segment decides */
    uint64_t even[6] = {3, 1, 2, 2, 1, 3};
    u = (sl_unit_costs){6, even, even, zero, zero};
    ck_assert(sl_segments_balanced(&u, 2, &s) == SL_OK);
    ck_assert_int_eq(s.start[1], 3); /* 6 | 6 */
    sl_segments_release(&s);
}
END_TEST

/* Sum of forward FLOPs of the re-forwarded nodes, from the segments and
 * the layers' flags alone: in a recomputed segment, walking back from its
 * end, a node runs again when a backward of the segment reads its output
 * or saved state (pooling indices) or a node that runs again reads its
 * output; the segment's boundary output is kept, never recomputed. */
static uint64_t expected_refwd_flops(const sl_net *net, const sl_run_cache *c)
{
    const sl_graph *g = &net->graph;
    uint64_t f = 0;
    char *read = calloc((size_t)g->n_nodes + 1, 1);
    ck_assert(read);
    for (int j = 0; j < c->seg.n; j++) {
        if (!c->seg.recompute[j])
            continue;
        int first = g->top_first_node[c->seg.start[j]];
        int end = g->top_first_node[c->seg.start[j + 1]];
        int boundary = g->top_output[c->seg.start[j + 1] - 1];
        memset(read, 0, (size_t)g->n_nodes + 1);
        for (int i = first; i < end; i++) {
            unsigned flags = g->nodes[i].layer->ops->flags;
            for (int k = 0; k < g->nodes[i].n_in && (flags & SL_LAYER_NEEDS_INPUT); k++)
                read[g->nodes[i].in[k]] = 1;
            if (flags & SL_LAYER_NEEDS_OUTPUT)
                read[g->nodes[i].out] = 1;
            if (c->sh.cost[i].saved_bytes && !(flags & SL_LAYER_SAVED_KEPT))
                read[g->nodes[i].out] = 1; /* its backward needs its fresh state */
        }
        for (int i = end - 1; i >= first; i--) {
            int t = g->nodes[i].out;
            int state = c->sh.cost[i].saved_bytes &&
                        !(g->nodes[i].layer->ops->flags & SL_LAYER_SAVED_KEPT);
            if (!read[t] || (t == boundary && !state))
                continue;
            f += c->sh.cost[i].fwd_flops;
            for (int k = 0; k < g->nodes[i].n_in; k++)
                read[g->nodes[i].in[k]] = 1;
        }
    }
    free(read);
    return f;
}

START_TEST(test_recompute_fraction_matches_flop_count)
{
    sl_context *ctx = th_context(1);
    /* budgets: a quarter and three quarters of the way from sqrt's planned
     * total to keep-everything's (ResNet-20, batch 4), filled in below */
    sl_schedule s[6] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(3), SL_SCHEDULE_SEGMENTS(9)};
    uint64_t total[2] = {0, 0};
    for (int i = 0; i < 6; i++) {
        if (i == 4) {
            s[4] = SL_SCHEDULE_BUDGET(total[1] + (total[0] - total[1]) / 4);
            s[5] = SL_SCHEDULE_BUDGET(total[1] + 3 * (total[0] - total[1]) / 4);
        }
        sl_net *net = resnet(ctx, "resnet20", s[i]);
        sl_memory_report r;
        ck_assert(sl_net_memory_report(net, sl_shape_nchw(4, 3, 32, 32), SL_MODE_TRAIN, &r) == SL_OK);
        const sl_run_cache *c = &net->cache[SL_MODE_TRAIN];
        uint64_t fwd = 0, bwd = 0;
        for (int n = 0; n < net->graph.n_nodes; n++) {
            fwd += c->sh.cost[n].fwd_flops;
            bwd += c->sh.cost[n].bwd_flops;
        }
        double want = (double)expected_refwd_flops(net, c) / (double)(fwd + bwd);
        ck_assert_msg(fabs(r.recompute_fraction - want) < 1e-12, "schedule %d: %g vs %g", i,
                      r.recompute_fraction, want);
        if (i < 2)
            total[i] = r.total;
        if (i == 0)
            ck_assert(r.recompute_fraction == 0.0);
        else
            ck_assert(r.recompute_fraction > 0.0 && r.recompute_fraction < 0.34);
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

/* A re-forward runs only what is read: every REFWD step's output or saved
 * state is read by a later step, and the last block of a recomputed
 * segment does not run its last BatchNorm and add again (its output, the
 * next boundary, is kept). On ResNet-152 at batch 16 this lowers the
 * least activation arena of the single-level family from 465.5 MiB (the
 * earlier program) by a boundary-sized tensor. */
/* Node i sits in the last unit of a recomputed segment. */
static int ends_recomputed_segment(const sl_net *net, int node)
{
    const sl_segments *seg = &net->cache[SL_MODE_TRAIN].seg;
    int top = net->graph.nodes[node].top;
    for (int j = 0; j < seg->n; j++)
        if (seg->recompute[j] && top == seg->start[j + 1] - 1)
            return 1;
    return 0;
}

/* Node i is a residual Add, or its output is read by one. */
static int feeds_add(const sl_net *net, int node)
{
    const sl_graph *g = &net->graph;
    for (int i = node; i < g->n_nodes && g->nodes[i].top == g->nodes[node].top; i++)
        if (strcmp(g->nodes[i].layer->ops->type, "Add") == 0 &&
            (i == node || g->nodes[i].in[0] == node + 1 || g->nodes[i].in[1] == node + 1))
            return 1;
    return 0;
}

START_TEST(test_refwd_skips_nodes_nothing_reads)
{
    sl_context *ctx = th_context(1);
    int blocks_at_ends = 0;
    const char *models[2] = {"resnet50", "resnet20"};
    sl_schedule s[3] = {SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(3), SL_SCHEDULE_SEGMENTS(7)};
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 3; i++) {
            sl_net *net = resnet(ctx, models[m], s[i]);
            sl_memory_report r;
            ck_assert(sl_net_memory_report(net, sl_shape_nchw(2, 3, 32, 32), SL_MODE_TRAIN, &r) == SL_OK);
            const sl_program *p = &net->cache[SL_MODE_TRAIN].prog;
            int refwd = 0, last_block_tail = 0;
            for (int a = 0; a < p->n_steps; a++) {
                const sl_step *st = &p->steps[a];
                if (st->kind != SL_STEP_REFWD)
                    continue;
                refwd++;
                int read = 0;
                for (int b = a + 1; b < p->n_steps && !read; b++) {
                    const sl_step *o = &p->steps[b];
                    for (int k = 0; k < SL_MAX_INPUTS; k++)
                        read |= o->x[k] == st->y;
                    read |= o->y == st->y && o->kind != SL_STEP_REFWD && o->kind != SL_STEP_FWD;
                    read |= st->saved >= 0 && o->saved == st->saved && o->kind == SL_STEP_BWD;
                }
                ck_assert_msg(read, "%s schedule %d: re-forward of %s is read by nothing", models[m],
                              i, net->graph.nodes[st->node].layer->name);
                if (ends_recomputed_segment(net, st->node) && feeds_add(net, st->node))
                    last_block_tail++;
            }
            ck_assert_int_gt(refwd, 0);
            ck_assert_int_eq(last_block_tail, 0);
            const sl_segments *seg = &net->cache[SL_MODE_TRAIN].seg;
            for (int j = 0; j < seg->n; j++) /* not vacuous: a recomputed segment ends in a block */
                blocks_at_ends += seg->recompute[j] &&
                                  net->graph.top_first_node[seg->start[j + 1]] -
                                          net->graph.top_first_node[seg->start[j + 1] - 1] > 5;
            sl_net_free(net);
        }
    ck_assert_int_gt(blocks_at_ends, 0);
    sl_context_free(ctx);
}
END_TEST

static int report(sl_context *ctx, sl_schedule s, sl_memory_report *r)
{
    sl_net *net = resnet(ctx, "resnet56", s);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    int st = sl_net_memory_report(net, sl_shape_nchw(16, 3, 32, 32), SL_MODE_TRAIN, r);
    sl_net_free(net);
    return st;
}

START_TEST(test_budget_schedules_fit_and_trade_memory_for_time)
{
    sl_context *ctx = th_context(1);
    sl_memory_report plain, sqrt_r, r;
    ck_assert(report(ctx, SL_SCHEDULE_NONE, &plain) == SL_OK);
    ck_assert(report(ctx, SL_SCHEDULE_SQRT, &sqrt_r) == SL_OK);
    ck_assert(report(ctx, SL_SCHEDULE_BUDGET(1), &r) == SL_ERR_BUDGET);
    uint64_t least = th_named_least();
    ck_assert_msg(least <= sqrt_r.total, "least %" PRIu64 " above sqrt's %" PRIu64, least,
                  sqrt_r.total);
    ck_assert(report(ctx, SL_SCHEDULE_BUDGET(least - 1), &r) == SL_ERR_BUDGET);
    double last_fraction = 2.0;
    for (int k = 0; k <= 4; k++) {
        uint64_t budget = least + (plain.total - least) * (uint64_t)k / 4;
        ck_assert_msg(report(ctx, SL_SCHEDULE_BUDGET(budget), &r) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(r.total <= budget, "planned %" PRIu64 " over budget %" PRIu64, r.total, budget);
        ck_assert_msg(r.recompute_fraction <= last_fraction, "more memory, more recompute");
        last_fraction = r.recompute_fraction;
        printf("budget %7.2f MiB: planned %7.2f MiB, recompute %5.1f%%\n", budget / 1048576.0,
               r.total / 1048576.0, 100 * r.recompute_fraction);
    }
    ck_assert(last_fraction == 0.0); /* the keep-everything budget needs no recompute */
    /* At sqrt's own memory the budget search recomputes no more than sqrt. */
    ck_assert(report(ctx, SL_SCHEDULE_BUDGET(sqrt_r.total), &r) == SL_OK);
    ck_assert(r.recompute_fraction <= sqrt_r.recompute_fraction);
    sl_context_free(ctx);
}
END_TEST

/* Wherever a balanced k-segment schedule stands, a budget of its planned
 * peak gives a schedule that fits and recomputes no more. */
START_TEST(test_budget_never_loses_to_balanced_segments)
{
    sl_context *ctx = th_context(1);
    for (int k = 2; k <= 12; k++) {
        sl_memory_report seg, r;
        ck_assert(report(ctx, SL_SCHEDULE_SEGMENTS(k), &seg) == SL_OK);
        ck_assert_msg(report(ctx, SL_SCHEDULE_BUDGET(seg.total), &r) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(r.total <= seg.total, "k=%d: planned %" PRIu64 " over %" PRIu64, k, r.total,
                      seg.total);
        ck_assert_msg(r.recompute_fraction <= seg.recompute_fraction,
                      "k=%d: budget recomputes %g, segments %g", k, r.recompute_fraction,
                      seg.recompute_fraction);
    }
    sl_context_free(ctx);
}
END_TEST

/* One BN layer inside a re-forwarded segment and one in the kept last
 * segment: with the rescale on, the first sees two updates with
 * m' = 1 - sqrt(1 - m), the second one update with m. */
START_TEST(test_bn_momentum_rescale_formula)
{
    const float m = 0.1f;
    const float mr = 1.0f - sqrtf(1.0f - m);
    for (int rescale = 0; rescale <= 1; rescale++) {
        sl_context *ctx = th_context(3);
        sl_net *net = NULL;
        ck_assert(sl_sublinear(ctx, 2, SL_SCHEDULE_SEGMENTS(2), &net) == SL_OK);
        sl_batchnorm2d_options bn = {.channels = 2, .momentum = m, .eps = 1e-5f};
        ck_assert(sl_net_add(net, "bn_a", sl_batchnorm2d_with(&bn)) == SL_OK);
        ck_assert(sl_net_add(net, "conv", sl_conv2d(2, 2, 1, 1, 0)) == SL_OK);
        ck_assert(sl_net_add(net, "bn_b", sl_batchnorm2d_with(&bn)) == SL_OK);
        ck_assert(sl_net_add(net, "pool", sl_global_avgpool()) == SL_OK);
        ck_assert(sl_net_add(net, "fc", sl_linear(2, 2, 1)) == SL_OK);
        ck_assert(sl_net_set_bn_momentum_rescale(net, rescale) == SL_OK);
        float x[4 * 2 * 3 * 3];
        th_fill_normal(x, 72, 5, 2.0f);
        for (int i = 0; i < 72; i++)
            x[i] += (i / 9) % 2 ? 1.5f : -0.5f; /* channel means away from 0 */
        int labels[4] = {0, 1, 1, 0};
        ck_assert(sl_net_compute_gradients(net, x, sl_shape_nchw(4, 2, 3, 3), labels, NULL) == SL_OK);
        const sl_segments *seg = &net->cache[SL_MODE_TRAIN].seg;
        ck_assert_int_eq(seg->n, 2);
        ck_assert_msg(seg->start[1] >= 1 && seg->start[1] <= 3, "bn_a must be re-forwarded");
        sl_param_info rm, rv;
        ck_assert(sl_net_find_param(net, "bn_a.running_mean", &rm) == SL_OK);
        ck_assert(sl_net_find_param(net, "bn_a.running_var", &rv) == SL_OK);
        for (int c = 0; c < 2; c++) {
            double mean = 0, sq = 0;
            for (int n = 0; n < 4; n++)
                for (int j = 0; j < 9; j++)
                    mean += x[(n * 2 + c) * 9 + j];
            mean /= 36;
            for (int n = 0; n < 4; n++)
                for (int j = 0; j < 9; j++)
                    sq += pow(x[(n * 2 + c) * 9 + j] - mean, 2);
            double var_unbiased = sq / 35;
            /* Running mean starts at 0, running variance at 1. */
            double want_mean = rescale ? (1 - mr) * (mr * mean) + mr * mean : m * mean;
            double want_var = rescale ? (1 - mr) * ((1 - mr) + mr * var_unbiased) + mr * var_unbiased
                                      : (1 - m) + m * var_unbiased;
            ck_assert_msg(fabs(rm.data[c] - want_mean) <= 1e-5 * fabs(want_mean) + 1e-6,
                          "rescale %d channel %d: running mean %g, want %g", rescale, c, rm.data[c],
                          want_mean);
            ck_assert_msg(fabs(rv.data[c] - want_var) <= 1e-5 * fabs(want_var),
                          "rescale %d channel %d: running var %g, want %g", rescale, c, rv.data[c],
                          want_var);
            /* Two updates with m' decay the old value as one with m. */
            ck_assert(fabs((1 - mr) * (1 - mr) - (1 - m)) < 1e-6);
        }
        sl_net_free(net);
        sl_context_free(ctx);
    }
}
END_TEST

/* The least planned peak a 1-byte budget names, minus the bytes outside
 * the arena: the least activation arena any schedule reaches. */
static uint64_t least_arena(sl_context *ctx, const char *model, int batch, int res, sl_net **kept)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_BUDGET(1), &net) == SL_OK);
    ck_assert(sl_model_build(net, model, res == 32 ? 10 : 1000, res) == SL_OK);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 5e-4f, 0); /* the command's */
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    sl_shape shape = sl_shape_nchw(batch, 3, res, res);
    sl_memory_report r;
    uint64_t least = th_least_budget(net, shape);
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_BUDGET(least)) == SL_OK);
    ck_assert_msg(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &r) == SL_OK, "%s", sl_last_error());
    ck_assert(r.total <= least);
    *kept = net;
    return r.arena_bytes;
}

/* Multi-level recursion below the single-level floor (issue 13's
 * targets, planning only): ResNet-152 at batch 16, 224x224, fits a
 * 330 MiB activation arena (the best single-level schedule needs 392 MiB),
 * CIFAR ResNet-110 at batch 128 a 60 MiB one (single-level: 120.5 MiB). */
START_TEST(test_multilevel_reaches_least_memory_targets)
{
    sl_context *ctx = th_context(1);
    struct { const char *model; int batch, res; double mib; } t[2] = {
        {"resnet152", 16, 224, 330.0}, {"resnet110", 128, 32, 60.0}};
    for (int i = 0; i < 2; i++) {
        sl_net *net;
        uint64_t arena = least_arena(ctx, t[i].model, t[i].batch, t[i].res, &net);
        printf("%s batch %d: least activation arena %.1f MiB, a layer runs up to %d times\n",
               t[i].model, t[i].batch, arena / 1048576.0, th_most_forwards(net));
        ck_assert_msg(arena <= (uint64_t)(t[i].mib * 1048576), "%s: %.1f MiB", t[i].model,
                      arena / 1048576.0);
        ck_assert_int_gt(net->cache[SL_MODE_TRAIN].seg.n_actions, 0); /* multi-level */
        ck_assert_int_gt(th_most_forwards(net), 2);
        sl_net_free(net);
    }
    sl_context_free(ctx);
}
END_TEST

/* memonger's rescale under multi-level recursion: a BatchNorm that runs k
 * times a step updates its running statistics k times with
 * m' = 1 - (1 - m)^(1/k), which together decay the old value as one update
 * with m does; so they end where the plain run's do, up to rounding. */
START_TEST(test_bn_rescale_under_multilevel_recursion)
{
    float *stats[2];
    int count[2];
    for (int run = 0; run < 2; run++) {
        sl_context *ctx = th_context(4);
        sl_net *net;
        if (run == 0) {
            ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_NONE, &net) == SL_OK);
            ck_assert(sl_model_build(net, "resnet20", 10, 32) == SL_OK);
        } else {
            least_arena(ctx, "resnet20", 8, 32, &net);
            ck_assert_int_gt(th_most_forwards(net), 2);
            ck_assert(sl_net_set_bn_momentum_rescale(net, 1) == SL_OK);
        }
        sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 5e-4f, 0);
        ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
        float *x = malloc(8 * 3 * 32 * 32 * sizeof *x);
        th_fill_normal(x, 8 * 3 * 32 * 32, 9, 1.0f);
        int labels[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        ck_assert_msg(sl_net_compute_gradients(net, x, sl_shape_nchw(8, 3, 32, 32), labels, NULL) ==
                      SL_OK, "%s", sl_last_error());
        if (run == 1)
            ck_assert_int_gt(th_most_forwards(net), 2);
        count[run] = 0;
        stats[run] = NULL;
        for (int i = 0; i < th_param_count(net); i++) {
            sl_param_info p;
            ck_assert(sl_net_param(net, i, &p) == SL_OK);
            if (!strstr(p.name, "running_"))
                continue;
            stats[run] = realloc(stats[run], (count[run] + p.count) * sizeof(float));
            memcpy(stats[run] + count[run], p.data, p.count * sizeof(float));
            count[run] += (int)p.count;
        }
        free(x);
        sl_net_free(net);
        sl_context_free(ctx);
    }
    ck_assert_int_eq(count[0], count[1]);
    int differ = 0;
    for (int i = 0; i < count[0]; i++) {
        ck_assert_msg(fabsf(stats[0][i] - stats[1][i]) <= 1e-5f * fabsf(stats[0][i]) + 1e-6f,
                      "running statistic %d: %g plain, %g rescaled", i, stats[0][i], stats[1][i]);
        differ += stats[0][i] != stats[1][i];
    }
    ck_assert_int_gt(differ, 0); /* the rescaled path did run */
    free(stats[0]);
    free(stats[1]);
}
END_TEST

/* The cost model: measured rates are positive, bad ones are refused, and
 * at a budget the operator-level search (least estimated time, blocks may
 * keep their conv outputs only) never takes more estimated time than the
 * FLOP-optimal search; keep-everything recomputes nothing in either. */
START_TEST(test_operator_level_never_slower_by_its_cost_model)
{
    sl_context *ctx = th_context(1);
    sl_cost_model m;
    ck_assert(sl_cost_model_measure(ctx, &m) == SL_OK);
    ck_assert(m.flops_per_s > 0 && m.bytes_per_s > 0);
    sl_net *net = resnet(ctx, "resnet56", SL_SCHEDULE_NONE);
    ck_assert(sl_net_set_cost_model(net, &(sl_cost_model){0, 1e9}) == SL_ERR_INVALID_ARG);
    ck_assert(sl_net_set_cost_model(net, &m) == SL_OK);
    ck_assert(sl_net_set_cost_model(net, NULL) == SL_OK);
    sl_shape shape = sl_shape_nchw(16, 3, 32, 32);
    sl_memory_report plain, least_r, r;
    ck_assert(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &plain) == SL_OK);
    ck_assert(plain.recompute_time_fraction == 0.0);
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_SQRT) == SL_OK);
    ck_assert(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &least_r) == SL_OK);
    ck_assert(least_r.recompute_time_fraction > 0.0);
    int conv = 0;
    for (int k = 0; k <= 4; k++) {
        uint64_t budget = least_r.total + (plain.total - least_r.total) * (uint64_t)k / 4;
        double t[2];
        for (int ops = 0; ops < 2; ops++) {
            ck_assert(sl_net_set_schedule(net, ops ? SL_SCHEDULE_BUDGET_OPS(budget) : SL_SCHEDULE_BUDGET(budget)) ==
                      SL_OK);
            ck_assert_msg(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &r) == SL_OK, "%s",
                          sl_last_error());
            ck_assert(r.total <= budget);
            t[ops] = r.recompute_time_fraction;
            const sl_segments *seg = &net->cache[SL_MODE_TRAIN].seg;
            for (int a = 0; ops && a < seg->n_actions; a++)
                conv |= seg->actions[a].kind == SL_ACT_FWD && seg->actions[a].keep == SL_KEEP_CONV;
        }
        printf("budget %.1f MiB: estimated recompute time %.1f %% (FLOP-optimal %.1f %%)\n",
               budget / 1048576.0, 100 * t[1], 100 * t[0]);
        ck_assert_msg(t[1] <= t[0], "operator-level %g > %g", t[1], t[0]);
        if (k == 4)
            ck_assert(t[1] == 0.0);
    }
    ck_assert(conv); /* some budget kept conv outputs only */
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("schedule");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sqrt_schedule_segment_count);
    tcase_add_test(tc, test_balanced_segments_split_evenly_behind_a_big_layer);
    tcase_add_test(tc, test_recompute_fraction_matches_flop_count);
    tcase_add_test(tc, test_refwd_skips_nodes_nothing_reads);
    tcase_add_test(tc, test_budget_schedules_fit_and_trade_memory_for_time);
    tcase_add_test(tc, test_budget_never_loses_to_balanced_segments);
    tcase_add_test(tc, test_bn_momentum_rescale_formula);
    tcase_add_test(tc, test_multilevel_reaches_least_memory_targets);
    tcase_add_test(tc, test_bn_rescale_under_multilevel_recursion);
    tcase_add_test(tc, test_operator_level_never_slower_by_its_cost_model);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
