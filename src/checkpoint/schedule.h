/*
 * schedule.h — costs of the top-level units and the schedules built from
 * them (schedule stage): schedule.c (units, balanced segments), budget.c
 * and multilevel.c (the budget searches, over segcost.c's measures),
 * costmodel.c (time-like costs) and schedule_kind.c (a schedule of the
 * public API: checked, read from text, turned into segments).
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

/* ---- time-like costs (costmodel.c) ---- */

/* The default cost model of a device (measured once on a development machine). */
sl_cost_model sl_cost_model_for(int host_memory);
/* Estimated seconds of one forward / backward of a node. */
double sl_node_forward_seconds(const sl_graph *g, const sl_shapes *sh, int node,
                               const sl_cost_model *m);
double sl_node_backward_seconds(const sl_graph *g, const sl_shapes *sh, int node,
                                const sl_cost_model *m);
/* Estimated seconds of one plain step (every forward and backward) and of
 * the program's re-forwards. */
void sl_program_seconds(const sl_graph *g, const sl_shapes *sh, const sl_program *p,
                        const sl_cost_model *m, double *plain, double *refwd);
/* Measures the pair on a backend. */
sl_status sl_cost_model_measure_backend(const sl_backend *be, int threads, sl_cost_model *out);

/* What one single-level segment costs, from the program of the segment
 * alone planned with the real planner's liveness (segcost.c). Bytes are
 * live arena bytes of the segment's own storages. */
typedef struct sl_seg_cost {
    uint64_t fwd_peak;       /* during its forward */
    uint64_t bwd_peak_inner; /* during its backward, not the last segment */
    uint64_t bwd_peak_last;  /* during its backward, as the last segment */
    uint64_t held;           /* across the other segments' steps (boundary included) */
    uint64_t redo_flops;     /* re-forward FLOPs */
    double redo_seconds;     /* re-forward time by the cost model (0 without one) */
} sl_seg_cost;

/* Costs of every segment [p, q) of the top-level chain, recomputed (r 1)
 * or kept (r 0), with its input outside the arena (a 0: the previous
 * segment's backward reads that boundary) or in it (a 1). */
typedef struct sl_seg_costs {
    int n;
    int input_in_arena;
    const sl_cost_model *model; /* for redo_seconds, or NULL */
    sl_seg_cost *cost;       /* use SL_SEG_COST_AT */
    uint64_t *out_bytes;     /* [n] aligned bytes of each unit's output */
    unsigned char *out_read; /* [n] the unit's own backward reads its output */
} sl_seg_costs;

#define SL_SEG_COST_AT(c, p, q, r, a) ((((size_t)(p) * ((c)->n + 1) + (q)) * 2 + (r)) * 2 + (a))

sl_status sl_seg_costs_compute(const sl_graph *g, const sl_shapes *sh, int input_in_arena,
                               const sl_cost_model *model, sl_seg_costs *out);
void sl_seg_costs_release(sl_seg_costs *c);
/* Segment [p, q) flagged r after a prefix that holds `held` bytes (its
 * last boundary not counted): the live peak during the segment and the
 * bytes held after it. 0 when not allowed (a recomputed last segment). */
int sl_seg_step(const sl_seg_costs *c, int p, int q, int r, uint64_t held, uint64_t *peak,
                uint64_t *held_after, uint64_t *redo_flops);
/* The live peak of a single-level schedule from the segment costs: equal
 * to the planner's live peak of its program. */
sl_status sl_seg_costs_peak(const sl_seg_costs *c, const sl_segments *seg, uint64_t *peak);

/* One top-level unit measured alone (a one-unit window of segcost.c),
 * for the multi-level search. Peaks count the unit's own storages and,
 * in its backward, the gradient of its output; the input is held
 * elsewhere unless said otherwise. */
typedef struct sl_unit_probe {
    uint64_t out_bytes; /* its output (and that output's gradient) */
    uint64_t fwd_flops; /* one forward of every node */
    int out_read;       /* its backward reads its output */
    uint64_t chain_fwd[2]; /* forward keeping only its output: peak with the
                              input held (0) or dying once read (1) */
    uint64_t all_fwd, all_held, all_bwd, all_bwd_last; /* forward keeping all: peak,
                                                          held to its backward (output
                                                          included), backward peak */
    uint64_t kept_out_bwd, kept_out_redo; /* backward re-forwarding from the input,
                                             the output kept: peak, FLOPs */
    uint64_t dropped_out_bwd, dropped_out_redo; /* the same with the output dropped */
    uint64_t conv_fwd, conv_held, conv_bwd, conv_redo; /* forward keeping conv outputs
                                                          (SL_KEEP_CONV), backward
                                                          re-forwarding the rest */
    double fwd_seconds, kept_out_seconds, dropped_out_seconds, conv_seconds; /* the same
                                                          costs in estimated time */
    uint64_t in_bytes, bwd_flops, ws_bytes; /* for reports */
    double bwd_seconds;
} sl_unit_probe;

/* Fills out[0 .. g->n_top) from one-unit programs; model, when not NULL,
 * gives the time costs. */
sl_status sl_unit_probes_compute(const sl_graph *g, const sl_shapes *sh, const sl_cost_model *model,
                                 sl_unit_probe *out);

/* Multi-level schedules (multilevel.c): the least re-forward cost of
 * every memory size up to max_bytes, in `slots` slots of equal size.
 * unit_costs, when not NULL, replaces re-forward FLOPs by other costs:
 * per unit, re-forward of the unit, backward re-forwarding with its
 * output kept, with it dropped, and after a conv-only keep (4 each).
 * conv: also consider keeping only conv outputs (SL_KEEP_CONV). */
typedef struct sl_multilevel sl_multilevel;
sl_status sl_multilevel_create(const sl_unit_probe *units, int n, uint64_t max_bytes, int slots,
                               int conv, const double *unit_costs, sl_multilevel **out);
void sl_multilevel_free(sl_multilevel *ml);
uint64_t sl_multilevel_slot_bytes(const sl_multilevel *ml);
/* The least number of slots with a schedule, -1 if none. */
int sl_multilevel_least_slots(const sl_multilevel *ml);
/* The table's cost at m slots (INFINITY when nothing fits). */
double sl_multilevel_cost(const sl_multilevel *ml, int m);
/* The schedule of m slots: actions, and its top level as segments. */
sl_status sl_multilevel_schedule(const sl_multilevel *ml, int m, sl_segments *out);

/* What a budget search needs to plan a candidate for real. */
typedef struct sl_budget_query {
    const sl_graph *g;
    const sl_shapes *sh;
    uint64_t budget_bytes;  /* for the whole step */
    uint64_t fixed_bytes;   /* parameters, gradients, optimizer state */
    int pgrad_flags;        /* SL_PGRAD_*: gradients are arena values (sl_program_build) */
    int bn_rescale;
    int input_in_arena;
    int single_level;       /* 1: only single-level schedules (tests, comparisons) */
    int operator_level;     /* 1: also keep conv outputs only; least estimated time */
    const sl_cost_model *cost_model; /* for operator_level (and --explain) */
} sl_budget_query;

/* The schedule with the least recomputed FLOPs whose planned peak (arena +
 * fixed bytes) fits the budget, single-level or multi-level; SL_ERR_BUDGET
 * naming the smallest planned peak the search reaches when none does. */
sl_status sl_segments_for_budget(const sl_budget_query *q, sl_segments *out);

/* ---- a schedule of the public API (schedule_kind.c, with
 * sl_schedule_parse) ---- */

/* Checks a schedule's kind and arguments (fn names the public call). */
sl_status sl_schedule_check(sl_schedule schedule, const char *fn);
/* The segments of a checked schedule over the chain of `chain` (its
 * budget_bytes and operator_level are the schedule's, the rest is used
 * as given): one kept segment for NONE, a balanced split for SQRT and
 * SEGMENTS, the budget search for BUDGET and BUDGET_OPS. */
sl_status sl_schedule_segments(const sl_budget_query *chain, sl_schedule schedule,
                               sl_segments *out);

#endif
