/*
 * plan.c — memory planning over a program (plan stage).
 *
 * 1. Liveness: each value's first write and last read, in steps.
 * 2. Aliases: a view shares its input's storage; an in-place layer's
 *    output takes its input's storage when no later step reads any value
 *    held there; a backward that may run in place writes dx over dy under
 *    the same rule. Each alias set ("storage") is of one value kind.
 * 3. Offsets: storages sorted by size (largest first), each placed at the
 *    lowest offset that overlaps no placed storage live at the same time
 *    (greedy by size, as TensorFlow Lite's arena planner: on chains of
 *    mixed sizes it beats first-fit in step order because the few large
 *    activations claim the bottom of the arena and small ones fill gaps).
 * The arena size is the peak; it is known before any kernel runs.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/pipeline.h"

static int find_root(int *alias, int v)
{
    while (alias[v] != v) {
        alias[v] = alias[alias[v]];
        v = alias[v];
    }
    return v;
}

static void touch(sl_plan *pl, int v, int step)
{
    if (v < 0)
        return;
    if (pl->first[v] < 0 || step < pl->first[v])
        pl->first[v] = step;
    if (step > pl->last[v])
        pl->last[v] = step;
}

static void compute_liveness(const sl_program *p, sl_plan *pl)
{
    for (int s = 0; s < p->n_steps; s++) {
        const sl_step *st = &p->steps[s];
        for (int k = 0; k < SL_MAX_INPUTS; k++) {
            touch(pl, st->x[k], s);
            touch(pl, st->dx[k], s);
            touch(pl, st->f_x[k], s);
            touch(pl, st->f_dx[k], s);
        }
        touch(pl, st->f_y, s);
        touch(pl, st->f_dy, s);
        touch(pl, st->y, s);
        touch(pl, st->saved, s);
        touch(pl, st->ws, s);
        touch(pl, st->dy, s);
        touch(pl, st->pgrad, s);
        touch(pl, st->prev_pgrad, s);
    }
    if (p->mode == SL_MODE_INFER && p->logits >= 0)
        touch(pl, p->logits, p->n_steps); /* copied out after the last step */
    if (p->input_grad >= 0)
        touch(pl, p->input_grad, p->n_steps);
}

/* Storage root r may take value v when nothing reads r's storage after
 * `step`. */
static int try_alias(sl_plan *pl, const sl_program *p, int *root_last, int r, int v, int step)
{
    if (v < 0 || r < 0 || p->values[v].bytes != p->values[r].bytes)
        return 0;
    if (root_last[r] > step || find_root(pl->alias, v) != v)
        return 0;
    pl->alias[v] = r;
    if (pl->last[v] > root_last[r])
        root_last[r] = pl->last[v];
    return 1;
}

static void compute_aliases(const sl_graph *g, const sl_program *p, sl_plan *pl, int *root_last)
{
    for (int v = 0; v < p->n_values; v++)
        root_last[v] = pl->last[v];
    for (int s = 0; s < p->n_steps; s++) {
        const sl_step *st = &p->steps[s];
        if (st->kind == SL_STEP_LOSS || st->kind == SL_STEP_UPDATE || st->kind == SL_STEP_REDUCE)
            continue;
        unsigned flags = g->nodes[st->node].layer->ops->flags;
        if (st->kind == SL_STEP_BWD) {
            if (pl->reuse && (flags & SL_LAYER_BWD_INPLACE) && st->dx[0] >= 0 &&
                !st->accumulate[0] && pl->first[st->dx[0]] == s)
                try_alias(pl, p, root_last, find_root(pl->alias, st->dy), st->dx[0], s);
            continue;
        }
        int r = find_root(pl->alias, st->x[0]);
        if (flags & SL_LAYER_VIEW) {
            /* A view shares storage whatever reads it later. */
            pl->alias[st->y] = r;
            if (pl->last[st->y] > root_last[r])
                root_last[r] = pl->last[st->y];
            continue;
        }
        if (pl->reuse && (flags & SL_LAYER_FWD_INPLACE) && !p->values[r].external)
            try_alias(pl, p, root_last, r, st->y, s);
    }
}

typedef struct placed {
    size_t offset, bytes;
} placed;

static int cmp_placed(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

typedef struct root_key {
    size_t bytes;
    int first, value;
} root_key;

/* Largest first; ties by first use, then value id (deterministic). */
static int cmp_roots(const void *a, const void *b)
{
    const root_key *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    if (x->first != y->first)
        return x->first - y->first;
    return x->value - y->value;
}

static sl_status assign_offsets(const sl_program *p, sl_plan *pl)
{
    int n = p->n_values, n_roots = 0;
    root_key *keys = sl_malloc((size_t)n * sizeof *keys);
    int *roots = sl_malloc((size_t)n * sizeof *roots);
    placed *conflicts = sl_malloc((size_t)n * sizeof *conflicts);
    if (!keys || !roots || !conflicts) {
        free(keys);
        free(roots);
        free(conflicts);
        return sl_set_error(SL_ERR_NOMEM, "out of memory planning the arena");
    }
    for (int v = 0; v < n; v++)
        if (pl->alias[v] == v && !p->values[v].external && pl->first[v] >= 0)
            keys[n_roots++] = (root_key){p->values[v].bytes, pl->first[v], v};
    qsort(keys, (size_t)n_roots, sizeof *keys, cmp_roots);
    for (int i = 0; i < n_roots; i++)
        roots[i] = keys[i].value;
    free(keys);
    size_t arena = 0;
    for (int i = 0; i < n_roots; i++) {
        int v = roots[i];
        size_t bytes = sl_align_up(p->values[v].bytes), offset = 0;
        if (pl->reuse) {
            int nc = 0;
            for (int j = 0; j < i; j++) {
                int u = roots[j];
                if (pl->first[u] <= pl->last[v] && pl->first[v] <= pl->last[u])
                    conflicts[nc++] = (placed){pl->offset[u], sl_align_up(p->values[u].bytes)};
            }
            qsort(conflicts, (size_t)nc, sizeof *conflicts, cmp_placed);
            for (int j = 0; j < nc; j++) {
                if (conflicts[j].offset >= sl_add_sat(offset, bytes))
                    break; /* the gap before this one fits */
                size_t end = sl_add_sat(conflicts[j].offset, conflicts[j].bytes);
                if (end > offset)
                    offset = end;
            }
        } else {
            offset = arena;
        }
        pl->offset[v] = offset;
        if (sl_add_sat(offset, bytes) > arena)
            arena = sl_add_sat(offset, bytes);
    }
    pl->arena_bytes = arena;
    free(roots);
    free(conflicts);
    if (arena == UINT64_MAX) /* the shape pass's bound keeps this out of reach */
        return sl_set_error(SL_ERR_NOMEM, "the planned arena is 2^64 bytes or more; use a smaller "
                            "batch, input or model");
    return SL_OK;
}

/* Live bytes per step by kind, over storages, kept in pl->step_live (the
 * memory timeline reads them). Without reuse nothing is shared or freed
 * within the step: each kind's peak holds all its storages. */
static sl_status compute_peaks(const sl_program *p, sl_plan *pl)
{
    int steps = p->n_steps + 1;
    size_t *live = sl_calloc((size_t)steps * SL_VALUE_KIND_COUNT, sizeof *live);
    if (!live)
        return sl_set_error(SL_ERR_NOMEM, "out of memory counting the plan's live bytes per step");
    for (int v = 0; v < p->n_values; v++) {
        if (pl->alias[v] != v || p->values[v].external || pl->first[v] < 0)
            continue;
        for (int s = pl->first[v]; s <= pl->last[v]; s++) {
            size_t *at = &live[(size_t)s * SL_VALUE_KIND_COUNT + p->values[v].kind];
            *at = sl_add_sat(*at, sl_align_up(p->values[v].bytes));
        }
    }
    pl->step_live = live;
    if (!pl->reuse) {
        for (int v = 0; v < p->n_values; v++)
            if (pl->alias[v] == v && !p->values[v].external && pl->first[v] >= 0)
                pl->category_peak[p->values[v].kind] =
                    sl_add_sat(pl->category_peak[p->values[v].kind], sl_align_up(p->values[v].bytes));
        pl->live_peak = pl->arena_bytes;
        return SL_OK;
    }
    for (int s = 0; s < steps; s++) {
        size_t total = 0;
        for (int k = 0; k < SL_VALUE_KIND_COUNT; k++) {
            size_t b = live[(size_t)s * SL_VALUE_KIND_COUNT + k];
            total = sl_add_sat(total, b);
            if (b > pl->category_peak[k])
                pl->category_peak[k] = b;
        }
        if (total > pl->live_peak)
            pl->live_peak = total;
    }
    return SL_OK;
}

sl_status sl_plan_lifetimes(const sl_graph *g, const sl_program *p, int reuse, sl_plan *out)
{
    sl_plan pl;
    memset(&pl, 0, sizeof pl);
    int n = p->n_values;
    pl.n_values = n;
    pl.reuse = reuse;
    pl.alias = sl_malloc((size_t)n * sizeof(int));
    pl.first = sl_malloc((size_t)n * sizeof(int));
    pl.last = sl_malloc((size_t)n * sizeof(int));
    pl.offset = sl_calloc((size_t)n, sizeof(size_t));
    int *root_last = sl_malloc((size_t)n * sizeof(int));
    if (!pl.alias || !pl.first || !pl.last || !pl.offset || !root_last) {
        free(root_last);
        sl_plan_release(&pl);
        return sl_set_error(SL_ERR_NOMEM, "out of memory planning the arena");
    }
    for (int v = 0; v < n; v++) {
        pl.alias[v] = v;
        pl.first[v] = -1;
        pl.last[v] = -1;
    }
    compute_liveness(p, &pl);
    compute_aliases(g, p, &pl, root_last);
    /* A storage lives from its first value's write to its last value's read. */
    for (int v = 0; v < n; v++) {
        int r = find_root(pl.alias, v);
        if (r != v && pl.first[v] >= 0) {
            if (pl.first[r] < 0 || pl.first[v] < pl.first[r])
                pl.first[r] = pl.first[v];
            if (pl.last[v] > pl.last[r])
                pl.last[r] = pl.last[v];
        }
    }
    for (int v = 0; v < n; v++)
        pl.alias[v] = find_root(pl.alias, v);
    free(root_last);
    *out = pl;
    return SL_OK;
}

sl_status sl_plan_build(const sl_graph *g, const sl_program *p, int reuse, sl_plan *out)
{
    sl_plan pl;
    sl_status st = sl_plan_lifetimes(g, p, reuse, &pl);
    if (st != SL_OK)
        return st;
    st = assign_offsets(p, &pl);
    if (st != SL_OK) {
        sl_plan_release(&pl);
        return st;
    }
    for (int v = 0; v < pl.n_values; v++) {
        int r = pl.alias[v];
        pl.offset[v] = pl.offset[r];
        if (r != v) {
            pl.first[v] = pl.first[r];
            pl.last[v] = pl.last[r];
        }
    }
    st = compute_peaks(p, &pl);
    if (st != SL_OK) {
        sl_plan_release(&pl);
        return st;
    }
    *out = pl;
    return SL_OK;
}

void sl_plan_release(sl_plan *pl)
{
    free(pl->alias);
    free(pl->first);
    free(pl->last);
    free(pl->offset);
    free(pl->step_live);
    memset(pl, 0, sizeof *pl);
}
