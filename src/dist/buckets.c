/*
 * buckets.c — the gradient buckets of one planned training program (dist
 * stage: data-parallel training). Parameter gradients lie in one block in
 * the order layers were added, so the gradients of a run of top-level
 * layers are one contiguous slice: a bucket is such a slice, reduced in
 * place (the block is the bucket buffer, as DDP's
 * gradient_as_bucket_view). Backward runs the top-level layers last to
 * first, so layers join the current bucket in descending order as their
 * last backward step runs.
 */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

/* Adds the gradient floats of l and its children (net.c's layout). */
static void count_gradient_floats(const sl_layer *l, size_t *floats)
{
    for (int p = 0; p < l->n_params; p++)
        if (l->params[p].trainable)
            *floats += sl_align_up(l->params[p].count * sizeof(float)) / sizeof(float);
    for (int i = 0; i < l->n_children; i++)
        count_gradient_floats(l->children[i], floats);
}

static sl_status grow(sl_bucket_plan *p, int n_top, int n_buckets)
{
    if (n_top > p->cap_top) {
        int *ready = sl_realloc(p->top_ready_step, (size_t)n_top * sizeof *ready);
        if (ready)
            p->top_ready_step = ready;
        size_t *first = sl_realloc(p->top_first, (size_t)(n_top + 1) * sizeof *first);
        if (first)
            p->top_first = first;
        if (!ready || !first)
            return sl_set_error(SL_ERR_NOMEM, "out of memory planning gradient buckets");
        p->cap_top = n_top;
    }
    if (n_buckets > p->cap) {
        sl_bucket *b = sl_realloc(p->b, (size_t)n_buckets * sizeof *b);
        if (!b)
            return sl_set_error(SL_ERR_NOMEM, "out of memory planning gradient buckets");
        p->b = b;
        p->cap = n_buckets;
    }
    return SL_OK;
}

static void add_bucket(sl_bucket_plan *p, int step, size_t first, size_t end)
{
    if (end > first)
        p->b[p->n++] = (sl_bucket){step, first, end - first};
}

sl_status sl_buckets_build(const sl_net *net, const sl_run_cache *c, size_t cap_bytes,
                           sl_bucket_plan *out)
{
    int n_top = net->n_top;
    /* At most one bucket per top layer, plus the closing one. */
    sl_status st = grow(out, n_top, n_top + 1);
    if (st != SL_OK)
        return st;
    size_t floats = 0;
    for (int t = 0; t < n_top; t++) {
        out->top_first[t] = floats;
        count_gradient_floats(net->top[t], &floats);
        out->top_ready_step[t] = -1;
    }
    out->top_first[n_top] = floats;
    const sl_program *p = &c->prog;
    int last_bwd = -1;
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == SL_STEP_BWD) {
            int t = net->graph.nodes[p->steps[s].node].top;
            out->top_ready_step[t] = s;
            last_bwd = s;
        }
    out->n = 0;
    size_t cap_floats = cap_bytes / sizeof(float);
    int open_hi = -1, open_lo = n_top; /* the open bucket covers tops [open_lo, open_hi] */
    int seg = c->seg.n - 1;
    for (int s = 0; s <= last_bwd; s++) {
        if (p->steps[s].kind != SL_STEP_BWD)
            continue;
        int t = net->graph.nodes[p->steps[s].node].top;
        if (out->top_ready_step[t] != s)
            continue;
        if (open_hi < 0)
            open_hi = open_lo - 1;
        open_lo = t; /* tops between t and the previous one have no backward (no gradients) */
        while (seg > 0 && c->seg.start[seg] > t)
            seg--;
        int segment_start = c->seg.start[seg] == t;
        size_t held = out->top_first[open_hi + 1] - out->top_first[open_lo];
        if (segment_start || held >= cap_floats || s == last_bwd) {
            add_bucket(out, s, out->top_first[open_lo], out->top_first[open_hi + 1]);
            open_hi = -1;
        }
    }
    /* Tops before the first one backward reached (none in practice): their
     * gradients were zeroed with the others; reduce them with the last. */
    add_bucket(out, last_bwd < 0 ? p->n_steps - 1 : last_bwd, 0, out->top_first[open_lo]);
    return SL_OK;
}

void sl_buckets_release(sl_bucket_plan *p)
{
    free(p->b);
    free(p->top_ready_step);
    free(p->top_first);
    memset(p, 0, sizeof *p);
}
