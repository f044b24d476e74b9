/*
 * schedule.h — costs of the top-level units and the schedules built from
 * them (schedule stage). See schedule.c and budget.c.
 */
#ifndef SL_SCHEDULE_H
#define SL_SCHEDULE_H

#include "checkpoint/pipeline.h"

/* Per top-level unit: bytes of its output (what a boundary keeps), bytes
 * it stores for backward when kept, its forward FLOPs, and the FLOPs a
 * re-forward spends on it (all but the boundary-producing node). */
typedef struct sl_unit_costs {
    int n;
    uint64_t *out_bytes, *stored_bytes, *fwd_flops, *redo_flops;
} sl_unit_costs;

sl_status sl_unit_costs_compute(const sl_graph *g, const sl_shapes *sh, sl_unit_costs *out);
void sl_unit_costs_release(sl_unit_costs *u);

sl_status sl_segments_alloc(int n_segments, sl_segments *out);
/* k segments balancing stored bytes; all but the last recomputed. */
sl_status sl_segments_balanced(const sl_unit_costs *u, int k, sl_segments *out);
int sl_sqrt_segments(int n_top);

/* What one single-level segment costs, from the program of the segment
 * alone planned with the real planner's liveness (segcost.c). Bytes are
 * live arena bytes of the segment's own storages. */
typedef struct sl_seg_cost {
    uint64_t fwd_peak;       /* during its forward */
    uint64_t bwd_peak_inner; /* during its backward, not the last segment */
    uint64_t bwd_peak_last;  /* during its backward, as the last segment */
    uint64_t held;           /* across the other segments' steps (boundary included) */
    uint64_t redo_flops;     /* re-forward FLOPs */
} sl_seg_cost;

/* Costs of every segment [p, q) of the top-level chain, recomputed (r 1)
 * or kept (r 0), with its input outside the arena (a 0: the previous
 * segment's backward reads that boundary) or in it (a 1). */
typedef struct sl_seg_costs {
    int n;
    int input_in_arena;
    sl_seg_cost *cost;       /* use SL_SEG_COST_AT */
    uint64_t *out_bytes;     /* [n] aligned bytes of each unit's output */
    unsigned char *out_read; /* [n] the unit's own backward reads its output */
} sl_seg_costs;

#define SL_SEG_COST_AT(c, p, q, r, a) ((((size_t)(p) * ((c)->n + 1) + (q)) * 2 + (r)) * 2 + (a))

sl_status sl_seg_costs_compute(const sl_graph *g, const sl_shapes *sh, int input_in_arena,
                               sl_seg_costs *out);
void sl_seg_costs_release(sl_seg_costs *c);
/* Segment [p, q) flagged r after a prefix that holds `held` bytes (its
 * last boundary not counted): the live peak during the segment and the
 * bytes held after it. 0 when not allowed (a recomputed last segment). */
int sl_seg_step(const sl_seg_costs *c, int p, int q, int r, uint64_t held, uint64_t *peak,
                uint64_t *held_after, uint64_t *redo_flops);
/* The live peak of a single-level schedule from the segment costs: equal
 * to the planner's live peak of its program. */
sl_status sl_seg_costs_peak(const sl_seg_costs *c, const sl_segments *seg, uint64_t *peak);

/* What a budget search needs to plan a candidate for real. */
typedef struct sl_budget_query {
    const sl_graph *g;
    const sl_shapes *sh;
    uint64_t budget_bytes;  /* for the whole step */
    uint64_t fixed_bytes;   /* parameters, gradients, optimizer state */
    int bn_rescale;
    int input_in_arena;
} sl_budget_query;

/* The schedule with the least recomputed FLOPs whose planned peak (arena +
 * fixed bytes) fits the budget; SL_ERR_BUDGET naming the smallest feasible
 * budget when none does. */
sl_status sl_segments_for_budget(const sl_budget_query *q, sl_segments *out);

#endif
