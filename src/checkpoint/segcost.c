/*
 * segcost.c — what a single-level segment costs, measured by the real
 * program builder and planner (schedule stage).
 *
 * The live bytes of a single-level program decompose over its segments.
 * At a step of segment j's forward or backward, what is alive is what
 * the segments before j hold across their own forward and backward, plus
 * segment j's own storages. Segments meet only at their boundary
 * tensors: segment j's output (read by the next segment, and by j's own
 * backward when its last layer reads its output, as ReLU does) and the
 * gradient of it (written by the next segment's backward, read by j's).
 *
 * So each candidate segment [p, q) with a recompute flag is built alone,
 * as the program of a sub-network whose input is the boundary before it
 * and whose loss stands for the next segment, and its live bytes per
 * step are measured with the planner's own liveness and in-place rules.
 * The input comes in two forms: outside the arena, when the previous
 * segment's backward reads it anyway (it is held there, and nothing may
 * overwrite it in place), or as an arena tensor that lives exactly as
 * long as this segment reads it (and may be overwritten in place by its
 * first layer). The search adds the boundary to the previous segment's
 * held bytes in the first case only. Summed this way the peak equals the
 * planner's live peak of the whole program; the arena can exceed that
 * only where greedy placement leaves gaps, which the search checks by
 * planning its answer.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"

/* The sub-network of top-level units [p, q) of g: nodes copied, tensors
 * renumbered so that the tensor before unit p is tensor 0. */
typedef struct window {
    sl_graph g;
    sl_shapes sh;
    const sl_cost_model *model; /* NULL: no time costs */
} window;

static sl_status window_alloc(const sl_graph *g, window *w)
{
    memset(w, 0, sizeof *w);
    size_t nodes = (size_t)g->n_nodes + 1, tops = (size_t)g->n_top + 1;
    w->g.nodes = sl_malloc(nodes * sizeof *w->g.nodes);
    w->g.top_first_node = sl_malloc(tops * sizeof(int));
    w->g.top_output = sl_malloc(tops * sizeof(int));
    w->sh.tensor = sl_malloc(nodes * sizeof *w->sh.tensor);
    w->sh.bytes = sl_malloc(nodes * sizeof *w->sh.bytes);
    w->sh.cost = sl_malloc(nodes * sizeof *w->sh.cost);
    w->sh.dtype = sl_malloc(nodes);
    w->sh.native = sl_malloc(nodes);
    if (!w->sh.dtype || !w->sh.native || !w->g.nodes || !w->g.top_first_node ||
        !w->g.top_output || !w->sh.tensor || !w->sh.bytes || !w->sh.cost)
        return sl_set_error(SL_ERR_NOMEM, "out of memory costing segments");
    return SL_OK;
}

static void window_release(window *w)
{
    free(w->g.nodes);
    free(w->g.top_first_node);
    free(w->g.top_output);
    free(w->sh.tensor);
    free(w->sh.bytes);
    free(w->sh.cost);
    free(w->sh.dtype);
    free(w->sh.native);
}

static void window_set(const sl_graph *g, const sl_shapes *sh, int p, int q, window *w)
{
    int base = g->top_first_node[p], end = g->top_first_node[q];
    int n = end - base;
    w->g.n_nodes = w->g.cap_nodes = n;
    w->g.n_top = q - p;
    w->sh.n_nodes = n;
    w->sh.n_tensors = n + 1;
    w->sh.tensor[0] = sh->tensor[base];
    w->sh.bytes[0] = sh->bytes[base];
    w->sh.dtype[0] = (unsigned char)sl_shapes_dtype(sh, base);
    w->sh.fwd_flops = w->sh.bwd_flops = 0;
    w->sh.f32_copy_bytes = sh->f32_copy_bytes;
    for (int i = 0; i < n; i++) {
        sl_graph_node nd = g->nodes[base + i];
        for (int k = 0; k < nd.n_in; k++)
            nd.in[k] = nd.in[k] <= base ? 0 : nd.in[k] - base;
        nd.out -= base;
        nd.top -= p;
        w->g.nodes[i] = nd;
        w->sh.tensor[i + 1] = sh->tensor[base + i + 1];
        w->sh.bytes[i + 1] = sh->bytes[base + i + 1];
        w->sh.dtype[i + 1] = (unsigned char)sl_shapes_dtype(sh, base + i + 1);
        w->sh.cost[i] = sh->cost[base + i];
        w->sh.native[i] = (unsigned char)sl_shapes_native(sh, base + i);
        w->sh.fwd_flops = sl_add_sat(w->sh.fwd_flops, sh->cost[base + i].fwd_flops);
        w->sh.bwd_flops = sl_add_sat(w->sh.bwd_flops, sh->cost[base + i].bwd_flops);
    }
    for (int u = p; u <= q; u++)
        w->g.top_first_node[u - p] = g->top_first_node[u] - base;
    for (int u = p; u < q; u++)
        w->g.top_output[u - p] = g->top_output[u] - base;
}

/* Live bytes per step (storages in the arena), and the F/B split. */
static sl_status measure(const window *w, const sl_program *prog, sl_seg_cost *c)
{
    sl_plan pl;
    sl_status st = sl_plan_lifetimes(&w->g, prog, 1, &pl);
    if (st != SL_OK)
        return st;
    int n = prog->n_steps;
    int64_t *delta = sl_calloc((size_t)n + 2, sizeof *delta);
    if (!delta) {
        sl_plan_release(&pl);
        return sl_set_error(SL_ERR_NOMEM, "out of memory costing segments");
    }
    int last_fwd = -1, loss = -1;
    for (int s = 0; s < n; s++) {
        if (prog->steps[s].kind == SL_STEP_FWD)
            last_fwd = s;
        if (prog->steps[s].kind == SL_STEP_LOSS)
            loss = s;
    }
    uint64_t held = 0, logits_bytes = 0;
    int logits_root = pl.alias[prog->logits];
    for (int v = 0; v < prog->n_values; v++) {
        if (pl.alias[v] != v || prog->values[v].external || pl.first[v] < 0)
            continue;
        uint64_t bytes = sl_align_up(prog->values[v].bytes);
        delta[pl.first[v]] += (int64_t)bytes;
        delta[pl.last[v] + 1] -= (int64_t)bytes;
        if (pl.first[v] <= last_fwd && pl.last[v] > last_fwd)
            held += bytes;
        if (v == logits_root && pl.last[v] == loss)
            logits_bytes = bytes; /* read by nothing after the loss */
    }
    memset(c, 0, sizeof *c);
    int64_t live = 0;
    for (int s = 0; s <= n; s++) {
        live += delta[s];
        uint64_t b = (uint64_t)live;
        if (s <= last_fwd) {
            if (b > c->fwd_peak)
                c->fwd_peak = b;
            continue;
        }
        if (b > c->bwd_peak_last)
            c->bwd_peak_last = b;
        /* As an inner segment the boundary is not read by a loss: when
         * nothing else in the segment's backward reads it, it died in the
         * next segment's backward. */
        uint64_t inner = s == loss ? b - logits_bytes : b;
        if (inner > c->bwd_peak_inner)
            c->bwd_peak_inner = inner;
    }
    c->held = held;
    c->redo_flops = prog->refwd_flops;
    c->redo_seconds = 0;
    for (int s = 0; s < n && w->model; s++)
        if (prog->steps[s].kind == SL_STEP_REFWD)
            c->redo_seconds += sl_node_forward_seconds(&w->g, &w->sh, prog->steps[s].node, w->model);
    free(delta);
    sl_plan_release(&pl);
    return SL_OK;
}

static sl_status cost_program(const window *w, const sl_segments *seg, int input_in_arena,
                              int input_grad, sl_seg_cost *c)
{
    sl_program prog;
    sl_status st = sl_program_build(&w->g, &w->sh, seg, SL_MODE_TRAIN, 0, input_grad,
                                    input_in_arena, 0, &prog);
    if (st != SL_OK)
        return st;
    st = measure(w, &prog, c);
    sl_program_release(&prog);
    return st;
}

static sl_status cost_one(const window *w, int recompute, int input_in_arena, int input_grad,
                          sl_seg_cost *c)
{
    int start[2] = {0, w->g.n_top}, flag = recompute;
    sl_segments seg = {1, start, &flag, 0, NULL};
    return cost_program(w, &seg, input_in_arena, input_grad, c);
}

/* The backward of unit u reads u's output (a ReLU's backward does). */
static int reads_own_output(const sl_graph *g, int u)
{
    int last = g->top_first_node[u + 1] - 1;
    return (g->nodes[last].layer->ops->flags & SL_LAYER_NEEDS_OUTPUT) != 0;
}

sl_status sl_seg_costs_compute(const sl_graph *g, const sl_shapes *sh, int input_in_arena,
                               const sl_cost_model *model, sl_seg_costs *out)
{
    int n = g->n_top;
    memset(out, 0, sizeof *out);
    out->n = n;
    out->input_in_arena = input_in_arena;
    out->model = model;
    out->cost = sl_calloc((size_t)(n + 1) * (n + 1) * 4, sizeof *out->cost);
    out->out_bytes = sl_calloc((size_t)n + 1, sizeof *out->out_bytes);
    out->out_read = sl_calloc((size_t)n + 1, 1);
    window w;
    sl_status st = out->cost && out->out_bytes && out->out_read
                       ? window_alloc(g, &w)
                       : sl_set_error(SL_ERR_NOMEM, "out of memory costing segments");
    if (st != SL_OK) {
        if (out->cost && out->out_bytes && out->out_read)
            window_release(&w);
        sl_seg_costs_release(out);
        return st;
    }
    w.model = model;
    for (int u = 0; u < n; u++) {
        out->out_bytes[u] = sl_align_up(sh->bytes[g->top_output[u]]);
        out->out_read[u] = (unsigned char)reads_own_output(g, u);
    }
    for (int p = 0; p < n && st == SL_OK; p++)
        for (int q = p + 1; q <= n && st == SL_OK; q++) {
            window_set(g, sh, p, q, &w);
            for (int r = 0; r < 2 && st == SL_OK; r++)
                for (int arena = 0; arena < 2 && st == SL_OK; arena++)
                    st = cost_one(&w, r, arena, p > 0, &out->cost[SL_SEG_COST_AT(out, p, q, r, arena)]);
        }
    window_release(&w);
    if (st != SL_OK)
        sl_seg_costs_release(out);
    return st;
}

/* The input form of the segment starting at p (segcost.c): in the arena
 * unless the previous segment's backward reads its boundary. */
static int entry_form(const sl_seg_costs *c, int p)
{
    return p == 0 ? c->input_in_arena : !c->out_read[p - 1];
}

/* Bytes held when the segment starting at p begins: the prefix's, and its
 * boundary when the previous segment keeps it for its own backward. */
static uint64_t entry_held(const sl_seg_costs *c, int p, uint64_t held)
{
    return held + (p > 0 && c->out_read[p - 1] ? c->out_bytes[p - 1] : 0);
}

int sl_seg_step(const sl_seg_costs *c, int p, int q, int r, uint64_t held,
                        uint64_t *peak, uint64_t *held_after, uint64_t *redo)
{
    int last = q == c->n;
    if (last && r)
        return 0;
    const sl_seg_cost *s = &c->cost[SL_SEG_COST_AT(c, p, q, r, entry_form(c, p))];
    uint64_t before = entry_held(c, p, held);
    uint64_t local = last ? s->bwd_peak_last : s->bwd_peak_inner;
    if (s->fwd_peak > local)
        local = s->fwd_peak;
    *peak = before + local;
    *held_after = before + s->held - (last ? 0 : c->out_bytes[q - 1]);
    *redo = s->redo_flops;
    return 1;
}

sl_status sl_seg_costs_peak(const sl_seg_costs *c, const sl_segments *seg, uint64_t *peak)
{
    if (seg->n_actions || seg->n < 1 || seg->start[0] != 0 || seg->start[seg->n] != c->n)
        return sl_set_error(SL_ERR_INVALID_ARG, "internal: not a single-level schedule of %d units", c->n);
    uint64_t held = 0, worst = 0;
    for (int j = 0; j < seg->n; j++) {
        uint64_t p, h, redo;
        if (!sl_seg_step(c, seg->start[j], seg->start[j + 1], seg->recompute[j], held, &p, &h, &redo))
            return sl_set_error(SL_ERR_INVALID_ARG, "internal: the last segment is recomputed");
        if (p > worst)
            worst = p;
        held = h;
    }
    *peak = worst;
    return SL_OK;
}

/* A one-unit window run by the given actions (input held elsewhere). */
static sl_status cost_actions(const window *w, const sl_action *a, int n, sl_seg_cost *c)
{
    int start[2] = {0, 1}, flag = 0;
    sl_segments seg = {1, start, &flag, n, (sl_action *)a};
    return cost_program(w, &seg, 0, 1, c);
}

sl_status sl_unit_probes_compute(const sl_graph *g, const sl_shapes *sh, const sl_cost_model *model,
                                 sl_unit_probe *out)
{
    window w;
    sl_status st = window_alloc(g, &w);
    w.model = model;
    for (int u = 0; u < g->n_top && st == SL_OK; u++) {
        sl_unit_probe *pr = &out[u];
        memset(pr, 0, sizeof *pr);
        window_set(g, sh, u, u + 1, &w);
        sl_seg_cost keep[2], ck[2]; /* [input form] */
        for (int a = 0; a < 2 && st == SL_OK; a++) {
            st = cost_one(&w, 0, a, 1, &keep[a]);
            if (st == SL_OK)
                st = cost_one(&w, 1, a, 1, &ck[a]);
        }
        if (st != SL_OK)
            break;
        pr->out_bytes = sl_align_up(sh->bytes[g->top_output[u]]);
        pr->out_read = reads_own_output(g, u);
        pr->in_bytes = sh->bytes[g->top_first_node[u]];
        for (int i = g->top_first_node[u]; i < g->top_first_node[u + 1]; i++) {
            const sl_layer_cost *lc = &sh->cost[i];
            pr->fwd_flops = sl_add_sat(pr->fwd_flops, lc->fwd_flops);
            pr->bwd_flops = sl_add_sat(pr->bwd_flops, lc->bwd_flops);
            size_t ws = lc->ws_fwd_bytes > lc->ws_bwd_bytes ? lc->ws_fwd_bytes : lc->ws_bwd_bytes;
            if (ws > pr->ws_bytes)
                pr->ws_bytes = ws;
            if (model) {
                pr->fwd_seconds += sl_node_forward_seconds(g, sh, i, model);
                pr->bwd_seconds += sl_node_backward_seconds(g, sh, i, model);
            }
        }
        pr->kept_out_seconds = ck[0].redo_seconds;
        for (int a = 0; a < 2; a++)
            pr->chain_fwd[a] = ck[a].fwd_peak;
        pr->all_fwd = keep[0].fwd_peak;
        pr->all_held = keep[0].held;
        pr->all_bwd = keep[0].bwd_peak_inner;
        pr->all_bwd_last = keep[0].bwd_peak_last;
        pr->kept_out_bwd = ck[0].bwd_peak_inner;
        pr->kept_out_redo = ck[0].redo_flops;
        sl_action drop[4] = {{SL_ACT_FWD, SL_KEEP_OUTPUT, 0}, {SL_ACT_LOSS, SL_KEEP_OUTPUT, 0},
                             {SL_ACT_DROP, SL_KEEP_OUTPUT, 0}, {SL_ACT_BWD, SL_KEEP_OUTPUT, 0}};
        sl_seg_cost c;
        memset(&c, 0, sizeof c);
        st = cost_actions(&w, drop, 4, &c);
        pr->dropped_out_bwd = c.bwd_peak_inner;
        pr->dropped_out_redo = c.redo_flops;
        pr->dropped_out_seconds = c.redo_seconds;
        sl_action conv[3] = {{SL_ACT_FWD, SL_KEEP_CONV, 0}, {SL_ACT_LOSS, SL_KEEP_OUTPUT, 0},
                             {SL_ACT_BWD, SL_KEEP_OUTPUT, 0}};
        if (st == SL_OK)
            st = cost_actions(&w, conv, 3, &c);
        pr->conv_held = c.held;
        pr->conv_fwd = c.fwd_peak;
        pr->conv_bwd = c.bwd_peak_inner;
        pr->conv_redo = c.redo_flops;
        pr->conv_seconds = c.redo_seconds;
    }
    window_release(&w);
    return st;
}

void sl_seg_costs_release(sl_seg_costs *c)
{
    free(c->cost);
    free(c->out_bytes);
    free(c->out_read);
    memset(c, 0, sizeof *c);
}
