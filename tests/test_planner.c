/*
 * test_planner.c — planner invariants as a property test. On many random
 * chains (random layer types, sizes and blocks) and every schedule (the
 * least-memory one included: multi-level, some layers re-forwarded many
 * times; and an operator-level one):
 *  - no two storages live at the same step overlap in the arena;
 *  - every read sees the value its producer wrote: the run with dead
 *    storage NaN-filled after every step gives bit-identical loss and
 *    gradients to the keep-everything run without poisoning;
 *  - the same holds for the inference program;
 *  - BatchNorm and the in-place ReLU after it joined into one step each way
 *    (sl_program_joins_relu, the CPU's batchnorm_relu_* ops) give the bits
 *    of the two steps: the reference runs with the joins off, every
 *    schedule with them on, and the chains do join some pairs both ways;
 *  - the program's graph ranges (what a GPU records once and replays) are
 *    maximal runs of two or more forward, re-forward and backward steps
 *    of layers that queue the same work every run, disjoint and in order;
 *    and where a backend cannot record (its graph_begin refuses: the
 *    CPU runs kernels as they are queued, so it cannot stand in for a
 *    recording itself) the executor runs the ranges' steps one by one:
 *    the same bits, one attempt a range, none in the first run.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "checkpoint/pipeline.h"
#include "cpu/cpu.h"
#include "net/net.h"
#include "harness.h"
#include "sublinear/custom.h"

/* A random chain of layers and blocks ending in pool, flatten, fc; returns
 * the input size. */
static int random_chain(sl_net *net, uint64_t seed)
{
    th_rng r = {seed, 0xc4a1, 0};
    int size = 8 + 4 * th_pick(&r, 3), layers = 4 + th_pick(&r, 10);
    int spatial = size;
    for (int i = 0; i < layers && spatial >= 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "l%d", i);
        int c = net->out_channels, out = 2 + th_pick(&r, 6), k = 1 + 2 * th_pick(&r, 2);
        int stride = spatial >= 6 && th_pick(&r, 3) == 0 ? 2 : 1;
        int padded = (spatial - 1) / stride + 1; /* 3x3 pad 1 or 1x1 pad 0 */
        sl_layer *l = NULL;
        switch (th_pick(&r, 10)) {
        case 0: l = sl_conv2d(c, out, k, stride, 0); spatial = (spatial - k) / stride + 1; break;
        case 1: l = sl_batchnorm2d(c); break;
        case 2: l = sl_relu(); break;
        case 3: l = sl_maxpool2d(3, stride, 1); spatial = padded; break;
        case 4: l = sl_avgpool2d(2, 1, 0); spatial -= 1; break;
        case 5: l = sl_dropout(0.25f); break;
        case 6: l = sl_basic_block(c, out, stride); spatial = padded; break;
        case 7: l = sl_bottleneck(c, 1 + th_pick(&r, 3), stride); spatial = padded; break;
        case 8: l = sl_inception(c, 1 + th_pick(&r, 3), 2, 2, 1, 2, 1 + th_pick(&r, 2)); break;
        default: l = sl_conv_bn_relu(c, out, 3, stride, 1); spatial = padded; break;
        }
        ck_assert_msg(sl_net_add(net, name, l) == SL_OK, "%s", sl_last_error());
    }
    th_add_classifier(net, 5);
    return size;
}

/* No two storages with overlapping lifetimes share arena bytes. */
static void assert_no_overlap(const sl_program *p, const sl_plan *pl)
{
    for (int a = 0; a < p->n_values; a++) {
        if (pl->alias[a] != a || p->values[a].external || pl->first[a] < 0)
            continue;
        size_t a0 = pl->offset[a], a1 = a0 + p->values[a].bytes;
        ck_assert(a1 <= pl->arena_bytes);
        for (int b = a + 1; b < p->n_values; b++) {
            if (pl->alias[b] != b || p->values[b].external || pl->first[b] < 0)
                continue;
            if (pl->first[a] > pl->last[b] || pl->first[b] > pl->last[a])
                continue;
            size_t b0 = pl->offset[b], b1 = b0 + p->values[b].bytes;
            ck_assert_msg(a1 <= b0 || b1 <= a0,
                          "values %d [%zu,%zu) and %d [%zu,%zu) overlap while both live", a, a0, a1,
                          b, b0, b1);
        }
    }
}

typedef struct result {
    int joins[2]; /* the training program's joined pairs: forward, backward */
    float loss;
    int n;
    float **grad;
    size_t *count;
    float logits[4 * 5];
} result;

/* Ranges of program p: the invariants of sl_program_graph_ranges, with
 * steps of drawing layers allowed where draws says so. */
static int graphable(const sl_graph *g, const sl_program *p, int draws, int s)
{
    const sl_step *st = &p->steps[s];
    unsigned flags = sl_step_runs_layer(st) ? g->nodes[st->node].layer->ops->flags : 0;
    return (flags & SL_LAYER_GRAPH_SAFE) || (draws && (flags & SL_LAYER_GRAPH_DRAWS));
}

static int assert_graph_ranges(const sl_graph *g, const sl_program *p, int draws)
{
    int lo[SL_GRAPH_RANGES], hi[SL_GRAPH_RANGES];
    int n = sl_program_graph_ranges(g, p, draws, lo, hi, SL_GRAPH_RANGES);
    int bad = 0, last = 0;
    for (int k = 0; k < n; k++) {
        bad |= lo[k] < last || hi[k] - lo[k] < 2 || hi[k] > p->n_steps;
        for (int s = lo[k]; s < hi[k] && !bad; s++)
            bad |= !graphable(g, p, draws, s);
        /* maximal: the steps around it are not graphable */
        bad |= (lo[k] > 0 && graphable(g, p, draws, lo[k] - 1)) ||
               (hi[k] < p->n_steps && graphable(g, p, draws, hi[k]));
        last = hi[k];
    }
    ck_assert_msg(!bad, "graph ranges of a %d-step program break their invariants", p->n_steps);
    return n;
}

/* A backend that cannot start a recording: the executor must run every
 * range's steps itself. */
static int g_fake_graphs, g_begins;
static int g_repeat; /* run() computes the gradients twice more (dropout draws anew) */
static int fake_begin(const sl_exec *ex) { (void)ex; return g_begins++, 1; }
static void *fake_end(const sl_exec *ex)
{
    (void)ex;
    ck_abort_msg("a recording that never began was ended");
    return NULL;
}
static void fake_launch(const sl_exec *ex, void *graph)
{
    (void)ex, (void)graph;
    ck_abort_msg("a graph that was never made was launched");
}
static void fake_free(const sl_backend *be, void *graph) { (void)be, (void)graph; }

/* A backend that "records" (nothing: the CPU runs each kernel as it is
 * queued) and whose launches queue nothing: what a replay leaves on the
 * host, the context's counter, each dropout layer's counter, the counter
 * slot and the redraws, can be checked against eager runs, though the
 * arena's values cannot. g_rec_refuse: the begin call (counted from 1)
 * that answers "not now"; g_rec_fail: the end call that fails. */
static int g_launches, g_rec_begins, g_rec_ends, g_rec_refuse, g_rec_fail;
static int rec_begin(const sl_exec *ex)
{
    ck_assert_msg(ex->counter_delta != NULL, "a drawing range recorded without the slot");
    return ++g_rec_begins == g_rec_refuse ? 2 : 0;
}
static void *rec_end(const sl_exec *ex)
{
    (void)ex;
    return ++g_rec_ends == g_rec_fail ? NULL : malloc(1);
}
static void rec_launch(const sl_exec *ex, void *graph) { (void)ex, (void)graph, g_launches++; }
static void rec_free(const sl_backend *be, void *graph) { (void)be, free(graph); }

/* ctx's backend as a device that graphs work: one whose recordings are
 * refused (fake_*) or made of nothing (rec_*), offsetting its counters on
 * the device (drawing layers may be recorded) where draws says so. */
static void fake_device(sl_context *ctx, int records, int draws)
{
    sl_backend *be = ctx->backend;
    be->graph_begin = records ? rec_begin : fake_begin;
    be->graph_end = records ? rec_end : fake_end;
    be->graph_launch = records ? rec_launch : fake_launch;
    be->graph_free = records ? rec_free : fake_free;
    be->counter_delta = draws;
}

static void run(uint64_t seed, sl_schedule schedule, int poison, result *out)
{
    sl_context *ctx = th_context(seed);
    if (g_fake_graphs) {
        /* every other chain as a device whose ranges hold dropout too (its
         * counter slot allocated before the refusal, and freed) */
        fake_device(ctx, 0, (int)(seed & 1));
    }
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    int size = random_chain(net, seed);
    net->debug_poison = poison;
    sl_shape shape = sl_shape_nchw(4, 3, size, size);
    size_t n = (size_t)4 * 3 * size * size;
    float *x = malloc(n * sizeof(float));
    th_fill_normal(x, n, seed, 1.0f);
    int labels[4] = {0, 1, 2, 4};
    sl_step_result r;
    int begins0 = g_begins;
    ck_assert_msg(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK, "%s",
                  sl_last_error());
    ck_assert_int_eq(g_begins, begins0); /* the first run records nothing */
    /* with fake graphs: the second run tries to record each range, the
     * third no more */
    int ranges = assert_graph_ranges(&net->graph, &net->cache[SL_MODE_TRAIN].prog,
                                     ctx->backend->counter_delta);
    for (int again = 0; g_repeat && again < 2; again++) {
        int begins = g_begins;
        ck_assert_msg(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK, "%s",
                      sl_last_error());
        ck_assert_int_eq(g_begins - begins, g_fake_graphs && again == 0 && !poison ? ranges : 0);
    }
    out->loss = r.loss;
    const sl_program *p = &net->cache[SL_MODE_TRAIN].prog;
    out->joins[0] = out->joins[1] = 0;
    for (int s = 0; s < p->n_steps; s++)
        if (sl_program_joins_relu(&net->graph, &net->cache[SL_MODE_TRAIN].sh, p,
                                  &net->cache[SL_MODE_TRAIN].plan, s))
            out->joins[p->steps[s].kind == SL_STEP_BWD]++;
    assert_no_overlap(p, &net->cache[SL_MODE_TRAIN].plan);
    ck_assert_msg(sl_net_predict(net, x, shape, out->logits) == SL_OK, "%s", sl_last_error());
    assert_no_overlap(&net->cache[SL_MODE_INFER].prog, &net->cache[SL_MODE_INFER].plan);
    out->n = th_param_count(net);
    out->grad = calloc((size_t)out->n, sizeof(float *));
    out->count = calloc((size_t)out->n, sizeof(size_t));
    for (int i = 0; i < out->n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        out->count[i] = p.count;
        if (p.grad) {
            out->grad[i] = malloc(p.count * sizeof(float));
            memcpy(out->grad[i], p.grad, p.count * sizeof(float));
        }
    }
    free(x);
    sl_net_free(net);
    sl_context_free(ctx);
}

static void result_free(result *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->grad[i]);
    free(r->grad);
    free(r->count);
}

/* The least budget any schedule reaches for the chain of `seed` (a
 * multi-level schedule, usually), read from the error of a 1-byte one;
 * and keep-everything's planned total. */
static uint64_t least_budget(uint64_t seed, uint64_t *plain)
{
    sl_context *ctx = th_context(seed);
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_BUDGET(1), &net) == SL_OK);
    int size = random_chain(net, seed);
    sl_shape shape = sl_shape_nchw(4, 3, size, size);
    sl_memory_report r;
    uint64_t least = th_least_budget(net, shape);
    ck_assert(sl_net_set_schedule(net, SL_SCHEDULE_NONE) == SL_OK);
    ck_assert(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &r) == SL_OK);
    *plain = r.total;
    sl_net_free(net);
    sl_context_free(ctx);
    return least;
}

/* Graph ranges, and the executor's way round a recording refused: on
 * every schedule of the random chains, the bits of the plain reference. */
START_TEST(test_planner_graph_ranges_and_failed_recordings)
{
    int chains = getenv("SL_TEST_QUICK") ? 6 : 16;
    g_begins = 0;
    g_repeat = 1;
    for (int c = 0; c < chains; c++) {
        uint64_t seed = 2000 + (uint64_t)c;
        result ref, got;
        g_fake_graphs = 0;
        run(seed, SL_SCHEDULE_NONE, 0, &ref);
        g_fake_graphs = 1;
        sl_schedule schedules[3] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(3)};
        for (int s = 0; s < 3; s++) {
            run(seed, schedules[s], 0, &got);
            int same = memcmp(&ref.loss, &got.loss, sizeof ref.loss) == 0;
            for (int i = 0; i < ref.n; i++)
                if (ref.grad[i])
                    same &= memcmp(ref.grad[i], got.grad[i], ref.count[i] * sizeof(float)) == 0;
            ck_assert_msg(same, "chain %d schedule %d: failed recordings change the run", c, s);
            result_free(&got);
        }
        result_free(&ref);
    }
    g_fake_graphs = g_repeat = 0;
    printf("planner: %d recordings refused, each range then run step by step\n", g_begins);
    ck_assert_int_gt(g_begins, 0);
}
END_TEST


/* conv, BatchNorm, ReLU, dropout, conv, ReLU, dropout, conv, ReLU,
 * dropout and a classifier on ctx: one range each way where dropout may
 * be recorded. */
static sl_net *drawing_chain(sl_context *ctx, sl_schedule schedule)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    ck_assert(sl_net_add(net, "c1", sl_conv2d(3, 6, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "b1", sl_batchnorm2d(6)) == SL_OK);
    ck_assert(sl_net_add(net, "r1", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "d1", sl_dropout(0.3f)) == SL_OK);
    ck_assert(sl_net_add(net, "c2", sl_conv2d(6, 6, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "r2", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "d2", sl_dropout(0.2f)) == SL_OK);
    ck_assert(sl_net_add(net, "c3", sl_conv2d(6, 6, 3, 1, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "r3", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "d3", sl_dropout(0.1f)) == SL_OK);
    th_add_classifier(net, 5);
    return net;
}

enum { DRAW_RUNS = 5, DRAW_LAYERS = 3 };

/* The context's counter after each run, and each dropout layer's. */
typedef struct draw_trace {
    uint64_t ctx[DRAW_RUNS + 1];
    uint64_t layer[DRAW_RUNS][DRAW_LAYERS];
} draw_trace;

static void dropout_counters(const sl_net *net, uint64_t out[DRAW_LAYERS])
{
    int n = 0;
    for (int i = 0; i < net->graph.n_nodes; i++) {
        const sl_layer *l = net->graph.nodes[i].layer;
        if (strcmp(l->ops->type, "Dropout") == 0) {
            ck_assert_int_lt(n, DRAW_LAYERS);
            out[n++] = sl_dropout_counter(l);
        }
    }
    ck_assert_int_eq(n, DRAW_LAYERS);
}

/* Ranges that hold dropout, replayed: at every replay each drawing TRAIN
 * forward in them is redrawn on the host in step order, so the context's
 * counter and every dropout layer's after each run are the eager run's,
 * and the slot holds the run's start less that of the run that recorded
 * the range launched last (the offset its kernels add). Under none and
 * sqrt (whose re-forwards, in the backward's range, redraw nothing), with
 * every range recorded in the second run (variant 0), the backward's
 * range put off to the third ("not now", 1), and the forward's recording
 * failing (2: its steps then run, and draw, eagerly). */
START_TEST(test_planner_replayed_draws_keep_the_counters)
{
    sl_schedule schedules[2] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT};
    float x[4 * 3 * 8 * 8];
    th_fill_normal(x, sizeof x / sizeof *x, 3, 1.0f);
    int labels[4] = {0, 1, 2, 4};
    sl_shape shape = sl_shape_nchw(4, 3, 8, 8);
    for (int k = 0; k < 2; k++) {
        draw_trace eager;
        sl_step_result r;
        {
            sl_context *ctx = th_context(11);
            sl_net *net = drawing_chain(ctx, schedules[k]);
            eager.ctx[0] = ctx->dropout_counter;
            for (int i = 0; i < DRAW_RUNS; i++) {
                ck_assert(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK);
                eager.ctx[i + 1] = ctx->dropout_counter;
                dropout_counters(net, eager.layer[i]);
            }
            ck_assert_msg(eager.ctx[1] > eager.ctx[0], "the chain draws nothing");
            sl_net_free(net);
            sl_context_free(ctx);
        }
        for (int v = 0; v < 3; v++) {
            sl_context *ctx = th_context(11);
            fake_device(ctx, 1, 1);
            sl_net *net = drawing_chain(ctx, schedules[k]);
            g_launches = g_rec_begins = g_rec_ends = 0;
            g_rec_refuse = v == 1 ? 2 : 0; /* the second range: the backward's */
            g_rec_fail = v == 2 ? 1 : 0;   /* the first: the forward's */
            ck_assert_uint_eq(ctx->dropout_counter, eager.ctx[0]);
            const sl_graph_cache *gc = &net->cache[SL_MODE_TRAIN].graphs;
            int fwd = -1, bwd = -1, refwd_in = 0;
            for (int i = 0; i < DRAW_RUNS; i++) {
                int before = gc->redraws;
                ck_assert_msg(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK, "%s",
                              sl_last_error());
                ck_assert_msg(ctx->dropout_counter == eager.ctx[i + 1],
                              "schedule %d variant %d run %d: counter %llu, eager %llu", k, v, i,
                              (unsigned long long)ctx->dropout_counter,
                              (unsigned long long)eager.ctx[i + 1]);
                uint64_t layers[DRAW_LAYERS];
                dropout_counters(net, layers);
                for (int d = 0; d < DRAW_LAYERS; d++)
                    ck_assert_msg(layers[d] == eager.layer[i][d],
                                  "schedule %d variant %d run %d: dropout %d counter %llu, eager "
                                  "%llu",
                                  k, v, i, d, (unsigned long long)layers[d],
                                  (unsigned long long)eager.layer[i][d]);
                if (i == 0) { /* planned now: one range each way, dropout in both */
                    const sl_program *p = &net->cache[SL_MODE_TRAIN].prog;
                    ck_assert_int_eq(assert_graph_ranges(&net->graph, p, 1), 2);
                    ck_assert_int_eq(gc->n, 2);
                    int drawn = 0;
                    for (int g = 0; g < gc->n; g++)
                        for (int s = gc->lo[g]; s < gc->hi[g]; s++) {
                            const sl_step *st = &p->steps[s];
                            int is_dropout =
                                strcmp(net->graph.nodes[st->node].layer->ops->type, "Dropout") == 0;
                            if (st->kind == SL_STEP_BWD)
                                bwd = g;
                            else if (st->kind == SL_STEP_FWD)
                                fwd = g;
                            drawn += is_dropout && st->kind == SL_STEP_FWD &&
                                     st->pass == SL_PASS_TRAIN;
                            refwd_in += is_dropout && st->kind == SL_STEP_REFWD;
                        }
                    ck_assert_int_eq(drawn, DRAW_LAYERS);
                    ck_assert_msg(fwd == 0 && bwd == 1, "ranges: forward %d, backward %d", fwd,
                                  bwd);
                    /* sqrt re-forwards a dropout inside the backward's range */
                    ck_assert_int_eq(refwd_in > 0, k == 1);
                }
                /* run 1 is eager, run 2 records (its own draws), later ones
                 * replay and redraw, unless the forward's recording failed */
                ck_assert_int_eq(gc->redraws - before, v != 2 && i >= 2 ? DRAW_LAYERS : 0);
            }
            /* which run recorded each range: its start counter is the base */
            ck_assert_int_eq(gc->exec[fwd] != NULL, v != 2);
            ck_assert_ptr_nonnull(gc->exec[bwd]);
            if (v != 2)
                ck_assert_uint_eq(gc->base[fwd], eager.ctx[1]);
            ck_assert_uint_eq(gc->base[bwd], eager.ctx[v == 1 ? 2 : 1]);
            /* the last launch of the last run was the backward's */
            ck_assert_ptr_nonnull(gc->slot);
            ck_assert_uint_eq(*gc->slot, eager.ctx[DRAW_RUNS - 1] - gc->base[bwd]);
            ck_assert_uint_eq(gc->slot_value, *gc->slot);
            int expect = v == 0 ? 2 * (DRAW_RUNS - 1) : v == 1 ? 2 * (DRAW_RUNS - 1) - 1
                                                                : DRAW_RUNS - 1;
            ck_assert_int_eq(g_launches, expect);
            sl_net_free(net);
            sl_context_free(ctx);
        }
    }
    g_rec_refuse = g_rec_fail = 0;
}
END_TEST

/* An identity custom layer (host memory: the CPU). */
static sl_status same_shape(const void *c, int n_in, const sl_shape *in, sl_custom_sizes *out)
{
    (void)c, (void)n_in;
    out->out = in[0];
    return SL_OK;
}
static sl_status copy_forward(const sl_custom_forward_args *a)
{
    memcpy(a->y, a->x[0], sl_shape_count(a->out) * sizeof(float));
    return SL_OK;
}
static sl_status copy_backward(const sl_custom_backward_args *a)
{
    memcpy(a->dx[0], a->dy, sl_shape_count(a->out) * sizeof(float));
    return SL_OK;
}

/* A network with a custom layer records no drawing step even where the
 * backend could (a custom layer's random numbers need not come in the
 * same amounts every run); without one, its dropout is in a range. */
START_TEST(test_planner_custom_layers_keep_draws_unrecorded)
{
    static const sl_custom_type copy = {
        .name = "Copy", .shape = same_shape, .forward = copy_forward, .backward = copy_backward,
    };
    for (int custom = 0; custom < 2; custom++) {
        sl_context *ctx = th_context(5);
        fake_device(ctx, 0, 1); /* refuses: every step runs as it is */
        sl_net *net = drawing_chain(ctx, SL_SCHEDULE_NONE);
        if (custom)
            ck_assert(sl_net_add(net, "copy", sl_custom_layer(&copy, NULL, 0, NULL, 0)) ==
                      SL_OK);
        sl_memory_report r;
        ck_assert_msg(sl_net_memory_report(net, sl_shape_nchw(4, 3, 8, 8), SL_MODE_TRAIN, &r) ==
                          SL_OK,
                      "%s", sl_last_error());
        const sl_run_cache *c = &net->cache[SL_MODE_TRAIN];
        int dropout_in = 0;
        for (int g = 0; g < c->graphs.n; g++)
            for (int s = c->graphs.lo[g]; s < c->graphs.hi[g]; s++)
                dropout_in += strcmp(net->graph.nodes[c->prog.steps[s].node].layer->ops->type,
                                     "Dropout") == 0;
        ck_assert_int_gt(c->graphs.n, 0);
        if (custom)
            ck_assert_int_eq(dropout_in, 0);
        else
            ck_assert_int_gt(dropout_in, 0);
        sl_net_free(net);
        sl_context_free(ctx);
    }
}
END_TEST

/* The dropout seed is a recorded kernel argument: a new seed (as a
 * snapshot loaded into the context sets) drops the recordings, and the
 * run after runs every step as it is. */
START_TEST(test_planner_new_seed_drops_recordings)
{
    float x[4 * 3 * 8 * 8];
    th_fill_normal(x, sizeof x / sizeof *x, 3, 1.0f);
    int labels[4] = {0, 1, 2, 4};
    sl_shape shape = sl_shape_nchw(4, 3, 8, 8);
    sl_context *ctx = th_context(11);
    fake_device(ctx, 1, 1);
    sl_net *net = drawing_chain(ctx, SL_SCHEDULE_NONE);
    g_launches = g_rec_begins = g_rec_ends = g_rec_refuse = g_rec_fail = 0;
    sl_step_result r;
    for (int i = 0; i < 3; i++)
        ck_assert(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK);
    const sl_graph_cache *gc = &net->cache[SL_MODE_TRAIN].graphs;
    ck_assert_int_eq(sl_graph_cache_recorded(gc), gc->n);
    int launches = g_launches;
    ck_assert(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK);
    ck_assert_int_eq(g_launches, launches + gc->n); /* the same seed: replayed */
    ctx->seed ^= 0x9e3779b97f4a7c15ull;
    launches = g_launches;
    ck_assert(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK);
    ck_assert_int_eq(g_launches, launches);
    ck_assert_int_eq(sl_graph_cache_recorded(gc), 0);
    ck_assert(sl_net_compute_gradients(net, x, shape, labels, &r) == SL_OK);
    ck_assert_int_eq(sl_graph_cache_recorded(gc), gc->n); /* recorded anew with the new seed */
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_planner_random_chains)
{
    int chains = getenv("SL_TEST_QUICK") ? 12 : 40;
    int joins[2] = {0, 0};
    for (int c = 0; c < chains; c++) {
        uint64_t seed = 1000 + (uint64_t)c;
        result ref;
        sl_cpu_bn_relu_force(0); /* the reference: BatchNorm and ReLU apart */
        run(seed, SL_SCHEDULE_NONE, 0, &ref);
        sl_cpu_bn_relu_force(1);
        ck_assert(isfinite(ref.loss));
        /* the least-memory schedule runs many more steps: every 4th chain;
         * an operator-level one a third of the way up from it */
        uint64_t plain, least = least_budget(seed, &plain);
        sl_schedule schedules[8] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(2),
                                    SL_SCHEDULE_SEGMENTS(3), SL_SCHEDULE_BUDGET(1ull << 40), SL_SCHEDULE_SEGMENTS(50),
                                    SL_SCHEDULE_BUDGET(c % 4 ? 1ull << 40 : least),
                                    SL_SCHEDULE_BUDGET_OPS(least + (plain - least) / 3)};
        for (int s = 0; s < 8; s++) {
            result got;
            run(seed, schedules[s], 1, &got);
            joins[0] += got.joins[0];
            joins[1] += got.joins[1];
            ck_assert_msg(memcmp(&ref.loss, &got.loss, sizeof ref.loss) == 0,
                          "chain %d schedule %d: loss %g vs %g", c, s, ref.loss, got.loss);
            ck_assert_msg(memcmp(ref.logits, got.logits, sizeof ref.logits) == 0,
                          "chain %d schedule %d: inference logits differ", c, s);
            for (int i = 0; i < ref.n; i++)
                if (ref.grad[i])
                    ck_assert_msg(memcmp(ref.grad[i], got.grad[i], ref.count[i] * sizeof(float)) == 0,
                                  "chain %d schedule %d: gradient %d differs", c, s, i);
            result_free(&got);
        }
        result_free(&ref);
    }
    sl_cpu_bn_relu_force(-1);
    printf("planner: %d forward and %d backward BatchNorm-ReLU joins, each the bits of the "
           "two steps\n", joins[0], joins[1]);
    ck_assert_msg(joins[0] > 0 && joins[1] > 0, "no BatchNorm-ReLU pair joined (%d, %d)",
                  joins[0], joins[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("properties");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_planner_random_chains);
    tcase_add_test(tc, test_planner_graph_ranges_and_failed_recordings);
    tcase_add_test(tc, test_planner_replayed_draws_keep_the_counters);
    tcase_add_test(tc, test_planner_custom_layers_keep_draws_unrecorded);
    tcase_add_test(tc, test_planner_new_seed_drops_recordings);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
