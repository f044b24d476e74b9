/*
 * multilevel.c — multi-level checkpointing (schedule stage): a segment
 * re-forwarded during backward may itself keep only some inner
 * boundaries and re-forward again, recursively, as in the persistent
 * dynamic program of rotor (Beaumont et al., "Optimal checkpointing for
 * heterogeneous chains", 2019), with per-unit costs measured by the real
 * program builder and planner (sl_unit_probe) rather than modelled.
 *
 * solve(s, t, k) is the backward of units [s, t], given their input
 * x[s-1] kept, the gradient of x[t] alive, and x[t] itself still kept
 * (k = 1) or dropped (k = 0). Its options:
 *   leaf (s = t)   re-forward what unit t's backward reads, run it;
 *   keep           re-forward unit s keeping everything (or, operator-
 *                  level, its conv outputs), solve(s + 1, t, k), then
 *                  unit s's backward;
 *   split at m     re-forward units [s, m) keeping only x[m-1], solve(m, t,
 *                  k), then drop x[m-1] (k' = 0) or keep it for the last
 *                  unit's backward (k' = 1), and solve(s, m - 1, k').
 * top(s) is the same over [s, N) during the first forward, whose
 * forwards cost nothing extra (they are the plain step's), ending with
 * the loss. The least re-forward cost under each memory size is tabled
 * for every (s, t, k) at once, memory in slots of a fixed size, every
 * size rounded up; the caller plans the answer for real, since the sum
 * of unit costs only approximates the planner.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"

enum { CH_NONE = -1, CH_LEAF = 0, CH_KEEP = 1, CH_CONV = 2, CH_SPLIT = 3 };

struct sl_multilevel {
    int n, slots;
    uint64_t slot_bytes;
    const sl_unit_probe *u;
    int conv; /* SL_KEEP_CONV allowed */
    /* per unit, sizes in slots rounded up */
    int *a, *chain0, *chain1, *allf, *allh, *allb, *allb_last, *kb, *db, *convf, *convh, *convb;
    int *out_read;
    double *rf, *rk, *rd, *rc; /* costs: re-forward, leaf kept / dropped output, conv completion */
    int *chain_peak;           /* [n * n]: peak of re-forwarding [s, m) keeping only x[m-1] */
    float *cost;               /* nested: [tri(s, t) * 2 + k][slots + 1] */
    int16_t *choice;
    float *top;                /* [s][slots + 1] */
    int16_t *top_choice;
};

static size_t tri(int s, int t) { return (size_t)t * (t + 1) / 2 + (size_t)s; }

static int slots_of(const sl_multilevel *ml, uint64_t bytes)
{
    uint64_t k = (bytes + ml->slot_bytes - 1) / ml->slot_bytes;
    return k > (uint64_t)ml->slots + 1 ? ml->slots + 1 : (int)k;
}

void sl_multilevel_free(sl_multilevel *ml)
{
    if (!ml)
        return;
    int **ints[] = {&ml->a, &ml->chain0, &ml->chain1, &ml->allf, &ml->allh, &ml->allb,
                    &ml->allb_last, &ml->kb, &ml->db, &ml->convf, &ml->convh, &ml->convb,
                    &ml->out_read, &ml->chain_peak};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        free(*ints[i]);
    free(ml->rf);
    free(ml->rk);
    free(ml->rd);
    free(ml->rc);
    free(ml->cost);
    free(ml->choice);
    free(ml->top);
    free(ml->top_choice);
    free(ml);
}

static float nested(const sl_multilevel *ml, int s, int t, int k, int m)
{
    if (m < 0)
        return INFINITY;
    if (m > ml->slots)
        m = ml->slots;
    return ml->cost[(tri(s, t) * 2 + (size_t)k) * (ml->slots + 1) + (size_t)m];
}

static float top_at(const sl_multilevel *ml, int s, int m)
{
    if (m < 0)
        return INFINITY;
    if (m > ml->slots)
        m = ml->slots;
    return ml->top[(size_t)s * (ml->slots + 1) + (size_t)m];
}

/* Costs of solve(s, t, k) for every memory size. */
static void table_nested(sl_multilevel *ml, int s, int t, int k)
{
    int M = ml->slots;
    size_t row = (tri(s, t) * 2 + (size_t)k) * (M + 1);
    for (int m = 0; m <= M; m++) {
        float best = INFINITY;
        int16_t ch = CH_NONE;
        if (s == t) {
            int need = k ? ml->kb[t] - ml->a[t] - (ml->out_read[t] ? ml->a[t] : 0)
                         : ml->db[t] - ml->a[t];
            if (need <= m) {
                best = (float)(k ? ml->rk[t] : ml->rd[t]);
                ch = CH_LEAF;
            }
        } else {
            /* keep unit s (all, or its conv outputs) */
            for (int conv = 0; conv <= ml->conv; conv++) {
                int held = conv ? ml->convh[s] : ml->allh[s];
                int fwd = conv ? ml->convf[s] : ml->allf[s];
                int bwd = conv ? ml->convb[s] : ml->allb[s];
                if (fwd > m || bwd > m + ml->a[t])
                    continue;
                float c = (float)(ml->rf[s] + (conv ? ml->rc[s] : 0.0)) +
                          nested(ml, s + 1, t, k, m - held);
                if (c < best) {
                    best = c;
                    ch = conv ? CH_CONV : CH_KEEP;
                }
            }
            double chain = 0;
            for (int cut = s + 1; cut <= t; cut++) {
                chain += ml->rf[cut - 1];
                if (ml->chain_peak[(size_t)s * ml->n + cut] > m)
                    break; /* the chain only grows */
                int x = ml->a[cut - 1];
                float right = nested(ml, cut, t, k, m - x);
                if (!isfinite(right))
                    continue;
                for (int kk = 0; kk <= ml->out_read[cut - 1]; kk++) {
                    float c = (float)chain + right +
                              nested(ml, s, cut - 1, kk, m + ml->a[t] - x - kk * x);
                    if (c < best) {
                        best = c;
                        ch = (int16_t)(CH_SPLIT + 2 * (cut - s - 1) + kk);
                    }
                }
            }
        }
        ml->cost[row + (size_t)m] = best;
        ml->choice[row + (size_t)m] = ch;
    }
}

/* Costs of top(s) (the first forward of [s, N), then its backward). */
static void table_top(sl_multilevel *ml, int s)
{
    int M = ml->slots, n = ml->n;
    size_t row = (size_t)s * (M + 1);
    for (int m = 0; m <= M; m++) {
        float best = INFINITY;
        int16_t ch = CH_NONE;
        if (s == n - 1) {
            if (ml->allf[s] <= m && ml->allb_last[s] <= m) {
                best = 0;
                ch = CH_LEAF;
            }
        } else {
            for (int conv = 0; conv <= ml->conv; conv++) {
                int held = conv ? ml->convh[s] : ml->allh[s];
                int fwd = conv ? ml->convf[s] : ml->allf[s];
                int bwd = conv ? ml->convb[s] : ml->allb[s];
                if (fwd > m || bwd > m)
                    continue;
                float c = (float)(conv ? ml->rc[s] : 0.0) + top_at(ml, s + 1, m - held);
                if (c < best) {
                    best = c;
                    ch = conv ? CH_CONV : CH_KEEP;
                }
            }
            for (int cut = s + 1; cut <= n - 1; cut++) {
                if (ml->chain_peak[(size_t)s * n + cut] > m)
                    break;
                int x = ml->a[cut - 1];
                float right = top_at(ml, cut, m - x);
                if (!isfinite(right))
                    continue;
                for (int kk = 0; kk <= ml->out_read[cut - 1]; kk++) {
                    float c = right + nested(ml, s, cut - 1, kk, m - x - kk * x);
                    if (c < best) {
                        best = c;
                        ch = (int16_t)(CH_SPLIT + 2 * (cut - s - 1) + kk);
                    }
                }
            }
        }
        ml->top[row + (size_t)m] = best;
        ml->top_choice[row + (size_t)m] = ch;
    }
}

static int alloc_ints(int n, int **p)
{
    *p = sl_calloc((size_t)n, sizeof **p);
    return *p != NULL;
}

static sl_status fill_units(sl_multilevel *ml, const double *cost_of_flops_scale)
{
    int n = ml->n;
    int **ints[] = {&ml->a, &ml->chain0, &ml->chain1, &ml->allf, &ml->allh, &ml->allb,
                    &ml->allb_last, &ml->kb, &ml->db, &ml->convf, &ml->convh, &ml->convb,
                    &ml->out_read};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (!alloc_ints(n, ints[i]))
            return sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    ml->rf = sl_calloc((size_t)n, sizeof *ml->rf);
    ml->rk = sl_calloc((size_t)n, sizeof *ml->rk);
    ml->rd = sl_calloc((size_t)n, sizeof *ml->rd);
    ml->rc = sl_calloc((size_t)n, sizeof *ml->rc);
    ml->chain_peak = sl_malloc((size_t)n * n * sizeof *ml->chain_peak);
    if (!ml->rf || !ml->rk || !ml->rd || !ml->rc || !ml->chain_peak)
        return sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    for (int u = 0; u < n; u++) {
        const sl_unit_probe *p = &ml->u[u];
        ml->a[u] = slots_of(ml, p->out_bytes);
        ml->chain0[u] = slots_of(ml, p->chain_fwd[0]);
        ml->chain1[u] = slots_of(ml, p->chain_fwd[1]);
        ml->allf[u] = slots_of(ml, p->all_fwd);
        ml->allh[u] = slots_of(ml, p->all_held);
        ml->allb[u] = slots_of(ml, p->all_bwd);
        ml->allb_last[u] = slots_of(ml, p->all_bwd_last);
        ml->kb[u] = slots_of(ml, p->kept_out_bwd);
        ml->db[u] = slots_of(ml, p->dropped_out_bwd);
        ml->convf[u] = slots_of(ml, p->conv_fwd);
        ml->convh[u] = slots_of(ml, p->conv_held);
        ml->convb[u] = slots_of(ml, p->conv_bwd);
        ml->out_read[u] = p->out_read;
        const double *w = cost_of_flops_scale;
        ml->rf[u] = w ? w[4 * u + 0] : (double)p->fwd_flops;
        ml->rk[u] = w ? w[4 * u + 1] : (double)p->kept_out_redo;
        ml->rd[u] = w ? w[4 * u + 2] : (double)p->dropped_out_redo;
        ml->rc[u] = w ? w[4 * u + 3] : (double)p->conv_redo;
    }
    for (int s = 0; s < n; s++) {
        int peak = 0;
        for (int cut = s + 1; cut <= n; cut++) {
            int f = cut - 1 == s ? ml->chain0[s] : ml->chain1[cut - 1];
            if (f > peak)
                peak = f;
            if (cut < n)
                ml->chain_peak[(size_t)s * n + cut] = peak;
        }
        ml->chain_peak[(size_t)s * n] = 0;
    }
    return SL_OK;
}

sl_status sl_multilevel_create(const sl_unit_probe *units, int n, uint64_t max_bytes, int slots,
                               int conv, const double *unit_costs, sl_multilevel **out)
{
    sl_multilevel *ml = sl_calloc(1, sizeof *ml);
    if (!ml)
        return sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    ml->n = n;
    ml->slots = slots;
    ml->u = units;
    ml->conv = conv != 0;
    ml->slot_bytes = max_bytes / (uint64_t)slots + 1;
    sl_status st = fill_units(ml, unit_costs);
    size_t rows = n > 1 ? tri(0, n - 2) + (size_t)n - 1 : 1; /* tri(s, t) for t <= n - 2 */
    if (st == SL_OK) {
        ml->cost = sl_malloc(rows * 2 * (slots + 1) * sizeof *ml->cost);
        ml->choice = sl_malloc(rows * 2 * (slots + 1) * sizeof *ml->choice);
        ml->top = sl_malloc((size_t)n * (slots + 1) * sizeof *ml->top);
        ml->top_choice = sl_malloc((size_t)n * (slots + 1) * sizeof *ml->top_choice);
        if (!ml->cost || !ml->choice || !ml->top || !ml->top_choice)
            st = sl_set_error(SL_ERR_NOMEM, "out of memory searching schedules");
    }
    if (st != SL_OK) {
        sl_multilevel_free(ml);
        return st;
    }
    for (int d = 0; d <= n - 2; d++)
        for (int s = 0; s + d <= n - 2; s++)
            for (int k = 0; k < 2; k++)
                table_nested(ml, s, s + d, k);
    for (int s = n - 1; s >= 0; s--)
        table_top(ml, s);
    *out = ml;
    return SL_OK;
}

uint64_t sl_multilevel_slot_bytes(const sl_multilevel *ml) { return ml->slot_bytes; }

int sl_multilevel_least_slots(const sl_multilevel *ml)
{
    for (int m = 0; m <= ml->slots; m++)
        if (isfinite(top_at(ml, 0, m)))
            return m;
    return -1;
}

double sl_multilevel_cost(const sl_multilevel *ml, int m) { return top_at(ml, 0, m); }

/* ---- the schedule of a table entry, as actions ---- */

typedef struct emitter {
    sl_action *a;
    int n, cap;
    int failed;
} emitter;

static void emit(emitter *e, sl_action_kind kind, int unit, sl_keep keep)
{
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 256;
        sl_action *a = sl_realloc(e->a, (size_t)cap * sizeof *a);
        if (!a) {
            e->failed = 1;
            return;
        }
        e->a = a;
        e->cap = cap;
    }
    e->a[e->n++] = (sl_action){kind, keep, unit};
}

static void emit_chain(emitter *e, int s, int cut)
{
    for (int u = s; u < cut; u++) {
        emit(e, SL_ACT_FWD, u, SL_KEEP_OUTPUT);
        if (u > s)
            emit(e, SL_ACT_DROP, u - 1, SL_KEEP_OUTPUT);
    }
}

static void emit_nested(const sl_multilevel *ml, emitter *e, int s, int t, int k, int m)
{
    if (m > ml->slots)
        m = ml->slots;
    int ch = ml->choice[(tri(s, t) * 2 + (size_t)k) * (ml->slots + 1) + (size_t)m];
    if (ch == CH_NONE || m < 0) {
        e->failed = 2;
        return;
    }
    if (ch == CH_LEAF) {
        emit(e, SL_ACT_BWD, t, SL_KEEP_OUTPUT);
    } else if (ch == CH_KEEP || ch == CH_CONV) {
        emit(e, SL_ACT_FWD, s, ch == CH_CONV ? SL_KEEP_CONV : SL_KEEP_ALL);
        emit_nested(ml, e, s + 1, t, k, m - (ch == CH_CONV ? ml->convh[s] : ml->allh[s]));
        emit(e, SL_ACT_BWD, s, SL_KEEP_OUTPUT);
    } else {
        int cut = s + 1 + (ch - CH_SPLIT) / 2, kk = (ch - CH_SPLIT) % 2, x = ml->a[cut - 1];
        emit_chain(e, s, cut);
        emit_nested(ml, e, cut, t, k, m - x);
        if (!kk)
            emit(e, SL_ACT_DROP, cut - 1, SL_KEEP_OUTPUT);
        emit_nested(ml, e, s, cut - 1, kk, m + ml->a[t] - x - kk * x);
    }
}

static void emit_top(const sl_multilevel *ml, emitter *e, int s, int m)
{
    if (m > ml->slots)
        m = ml->slots;
    int ch = m < 0 ? CH_NONE : ml->top_choice[(size_t)s * (ml->slots + 1) + (size_t)m];
    if (ch == CH_NONE) {
        e->failed = 2;
        return;
    }
    if (ch == CH_LEAF) {
        emit(e, SL_ACT_FWD, s, SL_KEEP_ALL);
        emit(e, SL_ACT_LOSS, s, SL_KEEP_OUTPUT);
        emit(e, SL_ACT_BWD, s, SL_KEEP_OUTPUT);
    } else if (ch == CH_KEEP || ch == CH_CONV) {
        emit(e, SL_ACT_FWD, s, ch == CH_CONV ? SL_KEEP_CONV : SL_KEEP_ALL);
        emit_top(ml, e, s + 1, m - (ch == CH_CONV ? ml->convh[s] : ml->allh[s]));
        emit(e, SL_ACT_BWD, s, SL_KEEP_OUTPUT);
    } else {
        int cut = s + 1 + (ch - CH_SPLIT) / 2, kk = (ch - CH_SPLIT) % 2, x = ml->a[cut - 1];
        emit_chain(e, s, cut);
        emit_top(ml, e, cut, m - x);
        if (!kk)
            emit(e, SL_ACT_DROP, cut - 1, SL_KEEP_OUTPUT);
        emit_nested(ml, e, s, cut - 1, kk, m - x - kk * x);
    }
}

/* The top-level segments of a schedule, for reports: the units the first
 * forward keeps whole form kept segments, the runs it re-forwards
 * recomputed ones. */
static sl_status describe(const sl_multilevel *ml, int m, sl_segments *out)
{
    int n = ml->n, k = 0;
    int *start = sl_malloc(((size_t)n + 1) * sizeof *start), *redo = sl_malloc((size_t)n * sizeof *redo);
    if (!start || !redo) {
        free(start);
        free(redo);
        return sl_set_error(SL_ERR_NOMEM, "out of memory building a schedule");
    }
    for (int s = 0; s < n;) {
        int mm = m > ml->slots ? ml->slots : m;
        int ch = ml->top_choice[(size_t)s * (ml->slots + 1) + (size_t)mm];
        int r = ch >= CH_SPLIT, next = r ? s + 1 + (ch - CH_SPLIT) / 2 : s + 1;
        if (k > 0 && !r && !redo[k - 1]) {
            start[k] = next; /* extends the kept segment */
        } else {
            start[k] = s;
            redo[k] = r;
            k++;
            start[k] = next;
        }
        m -= r ? ml->a[next - 1] : ch == CH_CONV ? ml->convh[s] : ml->allh[s];
        s = next;
    }
    sl_status st = sl_segments_alloc(k, out);
    if (st == SL_OK) {
        memcpy(out->start, start, ((size_t)k + 1) * sizeof *start);
        memcpy(out->recompute, redo, (size_t)k * sizeof *redo);
    }
    free(start);
    free(redo);
    return st;
}

sl_status sl_multilevel_schedule(const sl_multilevel *ml, int m, sl_segments *out)
{
    if (m < 0 || !isfinite(top_at(ml, 0, m)))
        return sl_set_error(SL_ERR_BUDGET, "internal: no multi-level schedule at %d slots", m);
    emitter e = {NULL, 0, 0, 0};
    emit_top(ml, &e, 0, m);
    if (e.failed) {
        free(e.a);
        return e.failed == 1 ? sl_set_error(SL_ERR_NOMEM, "out of memory building a schedule")
                             : sl_set_error(SL_ERR_BUDGET, "internal: broken multi-level table");
    }
    sl_status st = describe(ml, m, out);
    if (st != SL_OK) {
        free(e.a);
        return st;
    }
    out->actions = e.a;
    out->n_actions = e.n;
    return SL_OK;
}
