/*
 * budget.c — the cheapest schedule under a byte budget (schedule stage).
 *
 * Single-level schedules: a partition of the top-level chain into
 * segments, each kept or re-forwarded, the last kept. Its cost is the
 * FLOPs re-forwarded; its memory is the planner's. segcost.c measures
 * every segment alone with the real program builder and planner, and
 * the live bytes of a whole program are the sum, step by step, of what
 * the segments before hold and what the current one uses. So a dynamic
 * program over chain positions is exact: at each position it keeps the
 * Pareto front of (bytes held, FLOPs re-forwarded) over the prefixes
 * that fit so far, and the least-recompute complete schedule that fits
 * is the optimum of the family (in the spirit of Chen et al.'s
 * Algorithm 2 and of optimal checkpointing for heterogeneous chains, on
 * measured rather than modelled costs). The least feasible peak is
 * found the same way, by bisection on a feasibility pass that keeps only
 * the least held bytes per position.
 *
 * The dynamic program is exact about live bytes; the arena can exceed
 * them where greedy placement leaves gaps (never on the ResNets). So the
 * answer is planned for real, and where it does not fit a bounded
 * enumeration of the schedules within the live limit looks for one that
 * does (exhaustive on short chains).
 *
 * Then the multi-level search (multilevel.c; operator-level too for
 * SL_SCHEDULE_KIND_BUDGET_OPS) proposes its own answers, planned for real, and
 * the best that fits wins: by FLOPs, or by estimated time for the
 * operator-level search. When nothing fits, the least planned peak of all
 * the families is named, and a budget of that size gets that schedule.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"

typedef struct state {
    uint64_t held; /* bytes the prefix holds, its last boundary not counted */
    uint64_t redo; /* FLOPs re-forwarded so far */
    int prev;      /* pool index of the previous state, -1 at the start */
    int pos;       /* chain position this state stands at */
    int recompute; /* whether the segment ending here is re-forwarded */
} state;

/* Pareto fronts per position: states sorted by held (ascending), redo
 * strictly descending. */
typedef struct front {
    int *ids;
    int n, cap;
} front;

typedef struct dp {
    const sl_seg_costs *c;
    state *pool;
    int pool_n, pool_cap;
    front *fronts; /* [n + 1] */
} dp;

static void dp_release(dp *d)
{
    free(d->pool);
    if (d->fronts)
        for (int p = 0; p <= d->c->n; p++)
            free(d->fronts[p].ids);
    free(d->fronts);
}

static sl_status dp_init(dp *d, const sl_seg_costs *c)
{
    memset(d, 0, sizeof *d);
    d->c = c;
    d->pool_cap = 1024;
    d->pool = sl_malloc((size_t)d->pool_cap * sizeof *d->pool);
    d->fronts = sl_calloc((size_t)c->n + 1, sizeof *d->fronts);
    if (!d->pool || !d->fronts)
        return sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    return SL_OK;
}

/* Adds s to the front at its position unless a state there dominates it;
 * drops the states it dominates. -1 on allocation failure. */
static int push_state(dp *d, state s)
{
    front *f = &d->fronts[s.pos];
    int lo = 0, hi = f->n; /* first index with held > s.held */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (d->pool[f->ids[mid]].held <= s.held)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && d->pool[f->ids[lo - 1]].redo <= s.redo)
        return 0; /* less or as much held and no more redo */
    int end = lo; /* states at or after lo with redo >= s.redo are dominated */
    while (end < f->n && d->pool[f->ids[end]].redo >= s.redo)
        end++;
    if (d->pool_n == d->pool_cap) {
        state *p = sl_realloc(d->pool, (size_t)d->pool_cap * 2 * sizeof *p);
        if (!p)
            return -1;
        d->pool = p;
        d->pool_cap *= 2;
    }
    int removed = end - lo;
    if (removed == 0 && f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        int *ids = sl_realloc(f->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return -1;
        f->ids = ids;
        f->cap = cap;
    }
    int id = d->pool_n++;
    d->pool[id] = s;
    if (removed == 0) {
        memmove(f->ids + lo + 1, f->ids + lo, (size_t)(f->n - lo) * sizeof *f->ids);
        f->n++;
    } else {
        memmove(f->ids + lo + 1, f->ids + end, (size_t)(f->n - end) * sizeof *f->ids);
        f->n -= removed - 1;
    }
    f->ids[lo] = id;
    return 0;
}

/* Least-recompute single-level schedule whose live peak is <= budget:
 * the final state's pool index, -1 when none fits, -2 out of memory. */
static int solve(dp *d, uint64_t budget)
{
    const sl_seg_costs *c = d->c;
    int n = c->n;
    d->pool_n = 0;
    for (int p = 0; p <= n; p++)
        d->fronts[p].n = 0;
    if (push_state(d, (state){0, 0, -1, 0, 0}) < 0)
        return -2;
    for (int p = 0; p < n; p++)
        for (int i = 0; i < d->fronts[p].n; i++) {
            int sid = d->fronts[p].ids[i];
            state s = d->pool[sid];
            for (int q = p + 1; q <= n; q++)
                for (int r = 0; r < 2; r++) {
                    uint64_t peak, held, redo;
                    if (!sl_seg_step(c, p, q, r, s.held, &peak, &held, &redo) || peak > budget)
                        continue;
                    if (push_state(d, (state){held, sl_add_sat(s.redo, redo), sid, q, r}) < 0)
                        return -2;
                }
        }
    /* at the end held no longer matters: the last state has the least redo */
    return d->fronts[n].n ? d->fronts[n].ids[d->fronts[n].n - 1] : -1;
}

/* Whether some single-level schedule has a live peak <= budget. */
static int feasible(const sl_seg_costs *c, uint64_t budget, uint64_t *least_held)
{
    int n = c->n;
    for (int p = 0; p <= n; p++)
        least_held[p] = UINT64_MAX;
    least_held[0] = 0;
    for (int p = 0; p < n; p++) {
        if (least_held[p] == UINT64_MAX)
            continue;
        for (int q = p + 1; q <= n; q++)
            for (int r = 0; r < 2; r++) {
                uint64_t peak, held, redo;
                if (sl_seg_step(c, p, q, r, least_held[p], &peak, &held, &redo) &&
                    peak <= budget && held < least_held[q])
                    least_held[q] = held;
            }
    }
    return least_held[n] != UINT64_MAX;
}

static sl_status segments_from_state(const dp *d, int id, sl_segments *out)
{
    int k = 0;
    for (int s = id; d->pool[s].prev >= 0; s = d->pool[s].prev)
        k++;
    sl_status st = sl_segments_alloc(k, out);
    if (st != SL_OK)
        return st;
    int j = k;
    for (int s = id; d->pool[s].prev >= 0; s = d->pool[s].prev) {
        out->start[j] = d->pool[s].pos;
        out->recompute[j - 1] = d->pool[s].recompute;
        j--;
    }
    out->start[0] = 0;
    return SL_OK;
}

typedef struct candidate {
    sl_segments seg;
    uint64_t peak;  /* planned: arena + fixed */
    uint64_t redo;  /* re-forwarded FLOPs of the real program */
    double seconds; /* its re-forwards' estimated time (operator-level search) */
} candidate;

/* Plans c->seg for real: its planned peak (arena + fixed), re-forwarded
 * FLOPs and their estimated time. */
static sl_status measure(const sl_budget_query *q, candidate *c)
{
    sl_program prog;
    sl_plan plan;
    sl_status st = sl_program_build(q->g, q->sh, &c->seg, SL_MODE_TRAIN, q->bn_rescale, 0,
                                    q->input_in_arena, q->pgrad_flags, &prog);
    if (st != SL_OK)
        return st;
    st = sl_plan_build(q->g, &prog, 1, &plan);
    if (st == SL_OK) {
        c->peak = plan.arena_bytes + q->fixed_bytes;
        c->redo = prog.refwd_flops;
        double plain = 0;
        c->seconds = 0;
        if (q->cost_model)
            sl_program_seconds(q->g, q->sh, &prog, q->cost_model, &plain, &c->seconds);
        sl_plan_release(&plan);
    }
    sl_program_release(&prog);
    return st;
}

/* Solves under a live-byte budget and plans the answer; *found 0 when
 * nothing fits that budget. */
static sl_status solve_and_plan(const sl_budget_query *q, dp *d, uint64_t live_budget,
                                candidate *c, int *found)
{
    *found = 0;
    int id = solve(d, live_budget);
    if (id == -2)
        return sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    if (id < 0)
        return SL_OK;
    sl_status st = segments_from_state(d, id, &c->seg);
    if (st == SL_OK)
        st = measure(q, c);
    if (st != SL_OK) {
        sl_segments_release(&c->seg);
        return st;
    }
    *found = 1;
    return SL_OK;
}

/* Whether a costs less than b: estimated time in the operator-level
 * search, FLOPs otherwise. */
static int costs_less(int by_time, const candidate *a, const candidate *b)
{
    if (by_time && a->seconds != b->seconds)
        return a->seconds < b->seconds;
    if (a->redo != b->redo)
        return a->redo < b->redo;
    return a->peak < b->peak;
}

/* Keeps the better of *best and c (fits the budget, then costs less; when
 * neither fits, the lower peak); releases the other. by_time: compare
 * estimated time before FLOPs. */
static void keep_better_by(const sl_budget_query *q, int by_time, candidate *best, int *have,
                           candidate *c)
{
    int fits = c->peak <= q->budget_bytes, best_fits = *have && best->peak <= q->budget_bytes;
    int better = !*have || (fits && !best_fits) || (fits && best_fits && costs_less(by_time, c, best)) ||
                 (!fits && !best_fits && c->peak < best->peak);
    if (better) {
        if (*have)
            sl_segments_release(&best->seg);
        *best = *c;
        *have = 1;
    } else {
        sl_segments_release(&c->seg);
    }
}

/* The single-level search compares FLOPs (its dynamic program is exact in
 * them); the final choice compares what the query asks for. */
static void keep_better(const sl_budget_query *q, candidate *best, int *have, candidate *c)
{
    keep_better_by(q, 0, best, have, c);
}

static void keep_final(const sl_budget_query *q, candidate *best, int *have, candidate *c)
{
    keep_better_by(q, q->operator_level, best, have, c);
}

/* Where greedy placement leaves gaps, the schedule with the least live
 * peak (or redo) need not have the least planned peak (or fit). Then the
 * search enumerates the schedules whose live peak is within the limit,
 * depth first, pruned by what can still fit and by the best answer so
 * far, planning each; exhaustive on chains of up to 7 units (3^6
 * single-level schedules), bounded on longer ones, where each plan costs
 * more and the enumeration is a local search. */
#define ENUM_VISITS 200000
#define ENUM_SMALL_CHAIN 7
#define ENUM_PLANS_SMALL 729
#define ENUM_PLANS 8

typedef struct search {
    const sl_budget_query *q;
    const sl_seg_costs *c;
    uint64_t live_limit;
    int by_peak;       /* 0: least redo that fits the budget; 1: least planned peak */
    uint64_t *maxheld; /* [n + 1]: most held bytes at p that can still finish */
    int *path_q, *path_r, depth;
    int visits, plans;
    candidate *best;
    int *have;
    sl_status st;
} search;

#define NO_WAY UINT64_MAX /* maxheld: nothing finishes from here */

/* maxheld[p] under s->live_limit, from the end of the chain back. */
static void completion_bounds(search *s)
{
    const sl_seg_costs *c = s->c;
    int n = c->n;
    s->maxheld[n] = NO_WAY - 1;
    for (int p = n - 1; p >= 0; p--) {
        s->maxheld[p] = NO_WAY;
        for (int q = p + 1; q <= n; q++)
            for (int r = 0; r < 2; r++) {
                uint64_t peak, after, redo;
                if (s->maxheld[q] == NO_WAY ||
                    !sl_seg_step(c, p, q, r, 0, &peak, &after, &redo) || peak > s->live_limit ||
                    after > s->maxheld[q])
                    continue;
                /* peak and held-after grow one for one with the held bytes */
                uint64_t room = s->live_limit - peak;
                if (s->maxheld[q] - after < room)
                    room = s->maxheld[q] - after;
                if (s->maxheld[p] == NO_WAY || room > s->maxheld[p])
                    s->maxheld[p] = room;
            }
    }
}

static void enumerate_from(search *s, int p, uint64_t held, uint64_t redo)
{
    const sl_seg_costs *c = s->c;
    int max_plans = c->n <= ENUM_SMALL_CHAIN ? ENUM_PLANS_SMALL : ENUM_PLANS;
    if (s->st != SL_OK || ++s->visits > ENUM_VISITS || s->plans >= max_plans)
        return;
    int best_fits = *s->have && s->best->peak <= s->q->budget_bytes;
    if (!s->by_peak && best_fits && redo >= s->best->redo)
        return;
    if (p == c->n) {
        candidate cand;
        s->st = sl_segments_alloc(s->depth, &cand.seg);
        if (s->st != SL_OK)
            return;
        for (int j = 0; j < s->depth; j++) {
            cand.seg.start[j + 1] = s->path_q[j];
            cand.seg.recompute[j] = s->path_r[j];
        }
        s->st = measure(s->q, &cand);
        s->plans++;
        if (s->st != SL_OK) {
            sl_segments_release(&cand.seg);
            return;
        }
        keep_better(s->q, s->best, s->have, &cand);
        return;
    }
    for (int q = c->n; q > p; q--)
        for (int r = 0; r < 2; r++) {
            uint64_t peak, after, more;
            if (s->maxheld[q] == NO_WAY || !sl_seg_step(c, p, q, r, held, &peak, &after, &more) ||
                peak > s->live_limit || after > s->maxheld[q])
                continue;
            s->path_q[s->depth] = q;
            s->path_r[s->depth] = r;
            s->depth++;
            enumerate_from(s, q, after, sl_add_sat(redo, more));
            s->depth--;
        }
}

static sl_status enumerate(const sl_budget_query *q, const sl_seg_costs *c, uint64_t live_limit,
                           int by_peak, candidate *best, int *have)
{
    int n = c->n;
    search s = {q, c, live_limit, by_peak, NULL, NULL, NULL, 0, 0, 0, best, have, SL_OK};
    s.maxheld = sl_malloc(((size_t)n + 1) * sizeof *s.maxheld);
    s.path_q = sl_malloc(((size_t)n + 1) * sizeof *s.path_q);
    s.path_r = sl_malloc(((size_t)n + 1) * sizeof *s.path_r);
    if (!s.maxheld || !s.path_q || !s.path_r)
        s.st = sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    else {
        completion_bounds(&s);
        enumerate_from(&s, 0, 0, 0);
    }
    free(s.maxheld);
    free(s.path_q);
    free(s.path_r);
    return s.st;
}

#define ML_SLOTS 400 /* memory slots of the multi-level table */
#define ML_REPLANS 6 /* answers planned while lowering the table's budget */

/* Multi-level schedules (operator-level ones too when the query asks, by
 * estimated time) from a table over [0, max_live] bytes: the one at the
 * table's top, planned and lowered by the overshoot while it does not
 * fit; or (least) the least the table reaches and a few sizes above. */
static sl_status multilevel_candidates(const sl_budget_query *q, const sl_unit_probe *units,
                                       uint64_t max_live, int least, int operator_level,
                                       candidate *best, int *have)
{
    int n = q->g->n_top, by_time = operator_level && q->cost_model;
    double *seconds = by_time ? sl_malloc((size_t)n * 4 * sizeof *seconds) : NULL;
    if (by_time && !seconds)
        return sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    for (int u = 0; u < n && by_time; u++) {
        seconds[4 * u + 0] = units[u].fwd_seconds;
        seconds[4 * u + 1] = units[u].kept_out_seconds;
        seconds[4 * u + 2] = units[u].dropped_out_seconds;
        seconds[4 * u + 3] = units[u].conv_seconds;
    }
    sl_multilevel *ml;
    sl_status st = sl_multilevel_create(units, n, max_live, ML_SLOTS, operator_level, seconds, &ml);
    free(seconds);
    if (st != SL_OK)
        return st;
    uint64_t slot = sl_multilevel_slot_bytes(ml);
    int m = least ? sl_multilevel_least_slots(ml) : ML_SLOTS;
    for (int i = 0; i < ML_REPLANS && m >= 0 && m <= ML_SLOTS && st == SL_OK; i++) {
        if (!isfinite(sl_multilevel_cost(ml, m)))
            break;
        candidate c;
        st = sl_multilevel_schedule(ml, m, &c.seg);
        if (st == SL_OK)
            st = measure(q, &c);
        if (st != SL_OK) {
            sl_segments_release(&c.seg);
            break;
        }
        uint64_t over = c.peak > q->budget_bytes ? c.peak - q->budget_bytes : 0;
        keep_final(q, best, have, &c);
        if (least)
            m++; /* a few sizes up from the least: placement varies */
        else if (over)
            m -= (int)((over + slot - 1) / slot);
        else
            break;
        if (least && i == 2)
            break;
    }
    sl_multilevel_free(ml);
    return st;
}

/* Where the dynamic program's answer does not fit as planned, the
 * enumeration is a local search on long chains; the balanced k-segment
 * schedules (SL_SCHEDULE_SEGMENTS, k = 2 .. n) are planned for real too,
 * so that a budget never re-forwards more than a balanced split that fits
 * it. Large workspaces (oneDNN's convolution passes) leave such gaps. */
static sl_status balanced_candidates(const sl_budget_query *q, candidate *best, int *have)
{
    sl_unit_costs u;
    sl_status st = sl_unit_costs_compute(q->g, q->sh, &u);
    for (int k = 2; k <= u.n && st == SL_OK; k++) {
        candidate c;
        memset(&c, 0, sizeof c);
        st = sl_segments_balanced(&u, k, &c.seg);
        if (st == SL_OK)
            st = measure(q, &c);
        if (st != SL_OK) {
            sl_segments_release(&c.seg);
            break;
        }
        if (c.peak <= q->budget_bytes)
            keep_better(q, best, have, &c);
        else
            sl_segments_release(&c.seg);
    }
    sl_unit_costs_release(&u); /* safe after a failed compute: it released itself */
    return st;
}

sl_status sl_segments_for_budget(const sl_budget_query *q, sl_segments *out)
{
    sl_seg_costs costs;
    sl_status st = sl_seg_costs_compute(q->g, q->sh, q->input_in_arena, q->cost_model, &costs);
    if (st != SL_OK)
        return st;
    dp d;
    memset(&d, 0, sizeof d);
    uint64_t *held = sl_malloc(((size_t)costs.n + 1) * sizeof *held);
    sl_unit_probe *units = sl_malloc((size_t)costs.n * sizeof *units);
    st = held && units ? dp_init(&d, &costs)
                       : sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    if (st == SL_OK)
        st = sl_unit_probes_compute(q->g, q->sh, q->cost_model, units);
    candidate best;
    int have = 0;
    memset(&best, 0, sizeof best);
    uint64_t least_live = 0, fixed = q->fixed_bytes;
    if (st == SL_OK) {
        /* the least live peak of the single-level family, by bisection */
        uint64_t lo = 0, hi = UINT64_MAX / 2;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (feasible(&costs, mid, held))
                hi = mid;
            else
                lo = mid + 1;
        }
        least_live = lo;
    }
    if (st == SL_OK && q->budget_bytes >= fixed + least_live) {
        /* The single-level optimum of the live bytes; if it fits as
         * planned, no single-level schedule that fits re-forwards less. */
        uint64_t live = q->budget_bytes - fixed;
        candidate c;
        int found;
        st = solve_and_plan(q, &d, live, &c, &found);
        if (st == SL_OK && found)
            keep_better(q, &best, &have, &c);
        if (st == SL_OK && have && best.peak > q->budget_bytes) {
            st = enumerate(q, &costs, live, 0, &best, &have);
            if (st == SL_OK)
                st = balanced_candidates(q, &best, &have);
        }
    }
    /* Multi-level (and operator-level) schedules, wherever the
     * single-level answer re-forwards anything (or nothing single-level
     * fits); compared by what the query asks (FLOPs or time). */
    if (st == SL_OK && !q->single_level && q->budget_bytes > fixed &&
        !(have && best.peak <= q->budget_bytes && best.redo == 0)) {
        /* the FLOP-optimal table first, so that the operator-level search
         * (by time) never returns more estimated time than it */
        st = multilevel_candidates(q, units, q->budget_bytes - fixed, 0, 0, &best, &have);
        if (st == SL_OK && q->operator_level)
            st = multilevel_candidates(q, units, q->budget_bytes - fixed, 0, 1, &best, &have);
    }
    if (st == SL_OK && !(have && best.peak <= q->budget_bytes)) {
        /* Nothing fits: the least planned peak, for the error (and so that
         * a budget of that size gets a schedule). */
        candidate c;
        int found;
        st = solve_and_plan(q, &d, least_live, &c, &found);
        if (st == SL_OK && found)
            keep_better(q, &best, &have, &c);
        if (st == SL_OK && have && best.peak > fixed + least_live)
            st = enumerate(q, &costs, best.peak - fixed - 1, 1, &best, &have);
        if (st == SL_OK && !q->single_level)
            st = multilevel_candidates(q, units, least_live, 1, 0, &best, &have);
    }
    if (st == SL_OK && !(have && best.peak <= q->budget_bytes)) {
        uint64_t least_peak = have ? best.peak : fixed + least_live;
        st = sl_set_error(SL_ERR_BUDGET,
                     "no schedule fits a budget of %llu bytes (%.1f MiB): the smallest planned peak "
                     "is %llu bytes (%.1f MiB), of which %llu bytes are the fixed part "
                     "(parameters, %soptimizer state)",
                     (unsigned long long)q->budget_bytes, q->budget_bytes / 1048576.0,
                     (unsigned long long)least_peak, least_peak / 1048576.0,
                     (unsigned long long)fixed,
                     q->pgrad_flags ? "the gradients kept outside the arena, " : "gradients, ");
    }
    if (st == SL_OK) {
        *out = best.seg;
        have = 0;
    }
    if (have)
        sl_segments_release(&best.seg);
    free(held);
    free(units);
    if (d.c)
        dp_release(&d);
    sl_seg_costs_release(&costs);
    return st;
}
