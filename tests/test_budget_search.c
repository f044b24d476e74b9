/*
 * test_budget_search.c — the budget search is exact over single-level
 * schedules. On random chains small enough to enumerate every
 * single-level schedule (every partition into segments, every
 * recompute flag, the last segment kept), each planned for real:
 *  - the segment costs add up to the planner's live peak of every one;
 *  - for budgets at every distinct planned peak, the single-level search
 *    fits and re-forwards exactly as few FLOPs as the best enumerated
 *    schedule that fits; the whole search (multi-level included) fits and
 *    re-forwards no more;
 *  - a budget below the least planned peak fails the single-level search,
 *    which names exactly it; the whole search gets there or lower.
 * SL_TEST_CHAINS=N runs N chains instead of 16 (6 with SL_TEST_QUICK).
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "net/net.h"
#include "harness.h"

/* A random chain of `units` top-level layers (blocks included) ending in
 * pool, flatten, fc; returns the input size. */
static int random_chain(sl_net *net, uint64_t seed, int units)
{
    th_rng r = {seed, 0xb0d6, 0};
    int size = 8 + 4 * th_pick(&r, 3), spatial = size;
    for (int i = 0; i < units - 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "l%d", i);
        int c = net->out_channels, out = 2 + th_pick(&r, 6);
        int stride = spatial >= 6 && th_pick(&r, 4) == 0 ? 2 : 1;
        int padded = (spatial - 1) / stride + 1;
        sl_layer *l = NULL;
        switch (th_pick(&r, 9)) {
        case 0: l = sl_conv2d(c, out, 3, stride, 1); spatial = padded; break;
        case 1: l = sl_batchnorm2d(c); break;
        case 2: l = sl_relu(); break;
        case 3: l = sl_maxpool2d(3, stride, 1); spatial = padded; break;
        case 4: l = sl_dropout(0.25f); break;
        case 5: l = sl_basic_block(c, out, stride); spatial = padded; break;
        case 6: l = sl_bottleneck(c, 1 + th_pick(&r, 3), stride); spatial = padded; break;
        case 7: l = sl_inception(c, 1 + th_pick(&r, 3), 2, 2, 1, 2, 1 + th_pick(&r, 2)); break;
        default: l = sl_conv_bn_relu(c, out, 3, stride, 1); spatial = padded; break;
        }
        ck_assert_msg(sl_net_add(net, name, l) == SL_OK, "%s", sl_last_error());
    }
    th_add_classifier(net, 5);
    return size;
}

typedef struct planned {
    uint64_t peak, live, redo; /* planned total, live arena peak, re-forwarded FLOPs */
} planned;

/* Every single-level schedule of n units, by a mask: bit i set = a
 * segment boundary after unit i; bit n - 1 + j set = segment j recomputed. */
static int schedule_from(int n, unsigned cuts, unsigned flags, sl_segments *seg)
{
    int k = 1;
    for (int i = 0; i + 1 < n; i++)
        k += (cuts >> i) & 1;
    if (flags >> (k - 1))
        return 0; /* only the first k - 1 segments may be recomputed */
    ck_assert(sl_segments_alloc(k, seg) == SL_OK);
    int j = 1;
    for (int i = 0; i + 1 < n; i++)
        if ((cuts >> i) & 1)
            seg->start[j++] = i + 1;
    seg->start[k] = n;
    for (j = 0; j + 1 < k; j++)
        seg->recompute[j] = (flags >> j) & 1;
    return 1;
}

static uint64_t fixed_bytes(const sl_net *net)
{
    return (uint64_t)(net->param_floats + net->grad_floats + net->opt_floats) * sizeof(float);
}

static sl_net *chain_net(sl_context *ctx, uint64_t seed, int units, sl_shape *shape)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_NONE, &net) == SL_OK);
    int size = random_chain(net, seed, units);
    sl_optimizer_options o = sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    *shape = sl_shape_nchw(4, 3, size, size);
    sl_memory_report r;
    ck_assert_msg(sl_net_memory_report(net, *shape, SL_MODE_TRAIN, &r) == SL_OK, "%s", sl_last_error());
    return net;
}

/* Plans every single-level schedule; checks the segment costs against
 * each plan's live peak. Returns how many. */
static int enumerate(sl_net *net, const sl_seg_costs *costs, planned *out, int max)
{
    const sl_run_cache *c = &net->cache[SL_MODE_TRAIN];
    int n = net->graph.n_top, count = 0;
    for (unsigned cuts = 0; cuts < 1u << (n - 1); cuts++)
        for (unsigned flags = 0; flags < 1u << (n - 1); flags++) {
            sl_segments seg;
            if (!schedule_from(n, cuts, flags, &seg))
                continue;
            sl_program prog;
            sl_plan plan;
            ck_assert(sl_program_build(&net->graph, &c->sh, &seg, SL_MODE_TRAIN, 0, 0, 0, 0, &prog) ==
                      SL_OK);
            ck_assert(sl_plan_build(&net->graph, &prog, 1, &plan) == SL_OK);
            uint64_t model;
            ck_assert(sl_seg_costs_peak(costs, &seg, &model) == SL_OK);
            ck_assert_msg(model == plan.live_peak,
                          "cuts %x flags %x: segment costs give %" PRIu64 ", the plan %zu", cuts,
                          flags, model, plan.live_peak);
            ck_assert_int_lt(count, max);
            out[count++] = (planned){plan.arena_bytes + fixed_bytes(net), plan.live_peak,
                                     prog.refwd_flops};
            sl_plan_release(&plan);
            sl_program_release(&prog);
            sl_segments_release(&seg);
        }
    return count;
}

/* The single-level search alone (the library's search also tries
 * multi-level schedules): its planned peak and re-forwarded FLOPs, or
 * SL_ERR_BUDGET. */
static int single_level_search(sl_net *net, const sl_shapes *sh, uint64_t budget, uint64_t *peak,
                               uint64_t *redo)
{
    sl_budget_query q = {.g = &net->graph, .sh = sh, .budget_bytes = budget,
                         .fixed_bytes = fixed_bytes(net), .single_level = 1};
    sl_segments seg;
    int st = sl_segments_for_budget(&q, &seg);
    if (st != SL_OK)
        return st;
    ck_assert(seg.n_actions == 0);
    sl_program prog;
    sl_plan plan;
    ck_assert(sl_program_build(&net->graph, sh, &seg, SL_MODE_TRAIN, 0, 0, 0, 0, &prog) == SL_OK);
    ck_assert(sl_plan_build(&net->graph, &prog, 1, &plan) == SL_OK);
    *peak = plan.arena_bytes + fixed_bytes(net);
    *redo = prog.refwd_flops;
    sl_plan_release(&plan);
    sl_program_release(&prog);
    sl_segments_release(&seg);
    return SL_OK;
}

static int budget_report(sl_net *net, sl_shape shape, uint64_t budget, sl_memory_report *r,
                         uint64_t *redo)
{
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_BUDGET(budget)) == SL_OK);
    int st = sl_net_memory_report(net, shape, SL_MODE_TRAIN, r);
    *redo = st == SL_OK ? net->cache[SL_MODE_TRAIN].prog.refwd_flops : 0;
    return st;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

START_TEST(test_budget_search_exact_over_single_level_schedules)
{
    int chains = getenv("SL_TEST_CHAINS") ? atoi(getenv("SL_TEST_CHAINS")) : getenv("SL_TEST_QUICK") ? 6 : 16, gaps = 0;
    enum { MAX = 729 }; /* 3^6 single-level schedules of 7 units */
    planned *all = malloc(MAX * sizeof *all);
    uint64_t *peaks = malloc(MAX * sizeof *peaks);
    ck_assert(all && peaks);
    for (int ci = 0; ci < chains; ci++) {
        uint64_t seed = 500 + (uint64_t)ci;
        sl_context *ctx = th_context(seed);
        sl_shape shape;
        sl_net *net = chain_net(ctx, seed, 5 + ci % 3, &shape);
        const sl_run_cache *c = &net->cache[SL_MODE_TRAIN];
        sl_seg_costs costs;
        sl_shapes sh; /* the network's cache is planned anew with each schedule */
        ck_assert(sl_shapes_compute(&net->graph, net->ctx->backend, shape, &sh) == SL_OK);
        ck_assert(sl_seg_costs_compute(&net->graph, &c->sh, 0, NULL, &costs) == SL_OK);
        int n = enumerate(net, &costs, all, MAX);
        sl_seg_costs_release(&costs);
        for (int i = 0; i < n; i++) {
            peaks[i] = all[i].peak;
            gaps += all[i].peak - fixed_bytes(net) != all[i].live;
        }
        qsort(peaks, (size_t)n, sizeof *peaks, cmp_u64);
        /* the least single-level peak, named by the error of a budget just below it */
        uint64_t peak, redo, full_redo;
        ck_assert(single_level_search(net, &sh, peaks[0] - 1, &peak, &redo) == SL_ERR_BUDGET);
        ck_assert_msg(th_named_least() == peaks[0], "chain %d: error names %" PRIu64 ", least is %" PRIu64,
                      ci, th_named_least(), peaks[0]);
        /* the whole search reaches at least as low */
        sl_memory_report r;
        if (budget_report(net, shape, peaks[0] - 1, &r, &full_redo) == SL_ERR_BUDGET)
            ck_assert(th_named_least() >= peaks[0] - 1 && th_named_least() <= peaks[0]);
        else
            ck_assert(r.total <= peaks[0] - 1);
        for (int i = 0; i < n; i++) {
            if (i > 0 && peaks[i] == peaks[i - 1])
                continue;
            uint64_t budget = peaks[i], best = UINT64_MAX;
            for (int k = 0; k < n; k++)
                if (all[k].peak <= budget && all[k].redo < best)
                    best = all[k].redo;
            ck_assert_msg(single_level_search(net, &sh, budget, &peak, &redo) == SL_OK, "chain %d: %s", ci,
                          sl_last_error());
            ck_assert_msg(peak <= budget, "chain %d: planned %" PRIu64 " over %" PRIu64, ci, peak,
                          budget);
            ck_assert_msg(redo == best, "chain %d budget %" PRIu64 ": %" PRIu64 " FLOPs re-forwarded, "
                          "the best schedule that fits needs %" PRIu64, ci, budget, redo, best);
            /* multi-level included: fits, never worse */
            ck_assert_msg(budget_report(net, shape, budget, &r, &full_redo) == SL_OK, "chain %d: %s",
                          ci, sl_last_error());
            ck_assert(r.total <= budget);
            ck_assert_msg(full_redo <= redo, "chain %d budget %" PRIu64 ": %" PRIu64 " FLOPs with "
                          "multi-level, %" PRIu64 " single-level", ci, budget, full_redo, redo);
        }
        sl_shapes_release(&sh);
        sl_net_free(net);
        sl_context_free(ctx);
    }
    printf("%d chains: every single-level schedule enumerated; %d planned with gaps\n", chains, gaps);
    free(all);
    free(peaks);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("budget_search");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_budget_search_exact_over_single_level_schedules);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
