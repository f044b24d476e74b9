/*
 * schedule.c — which segments of the top-level chain are kept and which
 * are re-forwarded during backward (schedule stage).
 *
 * The unit of scheduling is a top-level layer: a plain layer or a whole
 * composite block (a block's interior is a small DAG whose tensors all die
 * within the block, so a boundary inside it would keep several tensors
 * alive, not one). The cheap-layer rule of Chen et al. falls out of the
 * costs: a boundary after a ReLU or pooling layer costs its output bytes,
 * after a conv the conv's, and the search picks whichever is cheaper.
 *
 *   NONE          one segment, nothing recomputed
 *   SEGMENTS(k)   k segments whose stored bytes are as equal as possible
 *                 (minimise the largest segment: the backward of the
 *                 largest segment sets the peak; then the sum of squares)
 *   SQRT          SEGMENTS(ceil(sqrt(N))), memonger's count; memonger cuts
 *                 equal layer counts, we cut equal bytes
 *   BUDGET(b)     see budget.c
 *
 * Every segment but the last is recomputed: the last is needed right
 * after the loss, so recomputing it would only cost time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"

sl_status sl_unit_costs_compute(const sl_graph *g, const sl_shapes *sh, sl_unit_costs *out)
{
    int n = g->n_top;
    memset(out, 0, sizeof *out);
    out->n = n;
    out->out_bytes = sl_calloc((size_t)n, sizeof(uint64_t));
    out->stored_bytes = sl_calloc((size_t)n, sizeof(uint64_t));
    out->fwd_flops = sl_calloc((size_t)n, sizeof(uint64_t));
    out->redo_flops = sl_calloc((size_t)n, sizeof(uint64_t));
    if (!out->out_bytes || !out->stored_bytes || !out->fwd_flops || !out->redo_flops) {
        sl_unit_costs_release(out);
        return sl_set_error(SL_ERR_NOMEM, "out of memory costing the schedule");
    }
    for (int t = 0; t < n; t++) {
        int boundary = g->top_output[t];
        out->out_bytes[t] = sh->bytes[boundary];
        for (int i = g->top_first_node[t]; i < g->top_first_node[t + 1]; i++) {
            const sl_graph_node *nd = &g->nodes[i];
            unsigned flags = nd->layer->ops->flags;
            const sl_layer_cost *c = &sh->cost[i];
            out->fwd_flops[t] = sl_add_sat(out->fwd_flops[t], c->fwd_flops);
            if (nd->out != boundary)
                out->redo_flops[t] = sl_add_sat(out->redo_flops[t], c->fwd_flops);
            /* Storage a kept unit holds until backward: outputs that do not
             * alias their input, and saved state. */
            if (!(flags & (SL_LAYER_FWD_INPLACE | SL_LAYER_VIEW)))
                out->stored_bytes[t] += sh->bytes[nd->out];
            out->stored_bytes[t] += c->saved_bytes;
        }
    }
    return SL_OK;
}

void sl_unit_costs_release(sl_unit_costs *u)
{
    free(u->out_bytes);
    free(u->stored_bytes);
    free(u->fwd_flops);
    free(u->redo_flops);
    memset(u, 0, sizeof *u);
}

sl_status sl_segments_alloc(int n_segments, sl_segments *out)
{
    memset(out, 0, sizeof *out);
    out->n = n_segments;
    out->start = sl_calloc((size_t)n_segments + 1, sizeof(int));
    out->recompute = sl_calloc((size_t)n_segments, sizeof(int));
    if (!out->start || !out->recompute) {
        sl_segments_release(out);
        return sl_set_error(SL_ERR_NOMEM, "out of memory building a schedule");
    }
    return SL_OK;
}

sl_status sl_segments_keep_all(int n_top, sl_segments *out)
{
    sl_status st = sl_segments_alloc(1, out);
    if (st == SL_OK)
        out->start[1] = n_top;
    return st;
}

void sl_segments_release(sl_segments *s)
{
    free(s->start);
    free(s->recompute);
    free(s->actions);
    memset(s, 0, sizeof *s);
}

static void push_action(sl_action *a, int *n, sl_action_kind kind, int unit, sl_keep keep)
{
    a[*n] = (sl_action){kind, keep, unit};
    (*n)++;
}

sl_status sl_segments_actions(const sl_segments *seg, sl_action **out, int *n)
{
    int units = seg->n > 0 ? seg->start[seg->n] : 0;
    if (seg->n_actions) {
        *out = sl_malloc((size_t)seg->n_actions * sizeof **out);
        if (!*out)
            return sl_set_error(SL_ERR_NOMEM, "out of memory building a schedule");
        memcpy(*out, seg->actions, (size_t)seg->n_actions * sizeof **out);
        *n = seg->n_actions;
        return SL_OK;
    }
    /* forward: one FWD and at most one DROP per unit; the loss; backward:
     * at most one FWD and one BWD per unit */
    sl_action *a = sl_malloc((size_t)(4 * units + 1) * sizeof *a);
    if (!a)
        return sl_set_error(SL_ERR_NOMEM, "out of memory building a schedule");
    int k = 0;
    for (int j = 0; j < seg->n; j++)
        for (int u = seg->start[j]; u < seg->start[j + 1]; u++) {
            push_action(a, &k, SL_ACT_FWD, u, seg->recompute[j] ? SL_KEEP_OUTPUT : SL_KEEP_ALL);
            if (seg->recompute[j] && u > seg->start[j])
                push_action(a, &k, SL_ACT_DROP, u - 1, SL_KEEP_OUTPUT);
        }
    push_action(a, &k, SL_ACT_LOSS, units - 1, SL_KEEP_OUTPUT);
    for (int j = seg->n - 1; j >= 0; j--) {
        if (seg->recompute[j]) /* the last unit's backward completes itself */
            for (int u = seg->start[j]; u + 1 < seg->start[j + 1]; u++)
                push_action(a, &k, SL_ACT_FWD, u, SL_KEEP_ALL);
        for (int u = seg->start[j + 1] - 1; u >= seg->start[j]; u--)
            push_action(a, &k, SL_ACT_BWD, u, SL_KEEP_OUTPUT);
    }
    *out = a;
    *n = k;
    return SL_OK;
}

/* Linear partition: k contiguous segments minimising the largest sum of
 * stored bytes, and among the partitions that reach it the one with the
 * least sum of squares (O(k N^2) dynamic programming; N is at most a few
 * hundred). The second criterion matters when one large layer fixes the
 * largest sum (VGG's and AlexNet's first conv): taking the first cut that
 * reaches it would leave one-layer segments at the front, which recompute
 * nothing, and everything else in the kept last segment. */
sl_status sl_segments_balanced(const sl_unit_costs *u, int k, sl_segments *out)
{
    int n = u->n;
    if (k > n)
        k = n;
    if (k < 1)
        k = 1;
    uint64_t *prefix = sl_calloc((size_t)n + 1, sizeof *prefix);
    uint64_t *best = sl_malloc((size_t)(k + 1) * (n + 1) * sizeof *best);
    double *sq = sl_malloc((size_t)(k + 1) * (n + 1) * sizeof *sq);
    int *cut = sl_malloc((size_t)(k + 1) * (n + 1) * sizeof *cut);
    sl_status st = (prefix && best && sq && cut)
                       ? sl_segments_alloc(k, out)
                       : sl_set_error(SL_ERR_NOMEM, "out of memory building a schedule");
    if (st != SL_OK) {
        free(prefix);
        free(best);
        free(sq);
        free(cut);
        return st;
    }
    for (int i = 0; i < n; i++)
        prefix[i + 1] = prefix[i] + u->stored_bytes[i];
#define AT(a, b) ((size_t)(a) * (n + 1) + (b))
    /* 1. the least possible largest segment, m */
    for (int q = 0; q <= n; q++)
        best[AT(1, q)] = prefix[q];
    for (int j = 2; j <= k; j++)
        for (int q = 0; q <= n; q++) {
            best[AT(j, q)] = UINT64_MAX;
            for (int p = j - 1; p < q; p++) {
                uint64_t seg = prefix[q] - prefix[p];
                uint64_t worst = best[AT(j - 1, p)] > seg ? best[AT(j - 1, p)] : seg;
                if (worst < best[AT(j, q)])
                    best[AT(j, q)] = worst;
            }
        }
    uint64_t m = best[AT(k, n)];
    /* 2. among partitions with every segment <= m, the least sum of squares */
    for (int q = 0; q <= n; q++)
        sq[AT(1, q)] = prefix[q] <= m ? (double)prefix[q] * (double)prefix[q] : INFINITY;
    for (int j = 2; j <= k; j++)
        for (int q = 0; q <= n; q++) {
            sq[AT(j, q)] = INFINITY;
            cut[AT(j, q)] = j - 1;
            for (int p = j - 1; p < q; p++) {
                uint64_t seg = prefix[q] - prefix[p];
                double s2 = sq[AT(j - 1, p)] + (double)seg * (double)seg;
                if (seg <= m && s2 < sq[AT(j, q)]) {
                    sq[AT(j, q)] = s2;
                    cut[AT(j, q)] = p;
                }
            }
        }
    int q = n;
    for (int j = k; j >= 1; j--) {
        out->start[j] = q;
        q = j > 1 ? cut[AT(j, q)] : 0;
    }
    out->start[0] = 0;
#undef AT
    for (int j = 0; j + 1 < k; j++)
        out->recompute[j] = 1;
    free(prefix);
    free(best);
    free(sq);
    free(cut);
    return SL_OK;
}

int sl_sqrt_segments(int n_top) { return (int)ceil(sqrt((double)n_top)); }
