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
