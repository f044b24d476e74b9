/*
 * schedule_kind.c — a schedule as the public API gives it (schedule
 * stage): checking its kind and arguments for every public call that
 * takes one (sl_sublinear, sl_net_set_schedule); sl_schedule_parse, the
 * one reader of "none", "sqrt", "segments:K", "budget:SIZE" and
 * "ops:SIZE" that the command and the benches share; and the segments it
 * stands for over a chain: all kept, a balanced split (schedule.c), or
 * the budget search (budget.c).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"

sl_status sl_schedule_check(sl_schedule schedule, const char *fn)
{
    if (schedule.kind < SL_SCHEDULE_KIND_NONE || schedule.kind > SL_SCHEDULE_KIND_BUDGET_OPS)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: unknown schedule kind %d", fn, (int)schedule.kind);
    if (schedule.kind == SL_SCHEDULE_KIND_SEGMENTS && schedule.segments < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: segments must be >= 1, got %d", fn,
                            schedule.segments);
    return SL_OK;
}

/* SIZE of budget:SIZE in bytes; -1 when it is not a positive size. */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || !isfinite(v))
        return -1;
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {
        {"", 1},           {"B", 1},           {"K", 1024.0},          {"KiB", 1024.0},
        {"M", 1048576.0},  {"MiB", 1048576.0}, {"G", 1073741824.0},   {"GiB", 1073741824.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            double bytes = v * units[i].mult;
            if (bytes >= 1.8e19)
                return -1;
            *out = (uint64_t)bytes;
            return 0;
        }
    return -1;
}

sl_status sl_schedule_parse(const char *text, sl_schedule *out)
{
    if (!text || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_schedule_parse: text or out is NULL");
    uint64_t bytes;
    char *end;
    if (strcmp(text, "none") == 0)
        *out = SL_SCHEDULE_NONE;
    else if (strcmp(text, "sqrt") == 0)
        *out = SL_SCHEDULE_SQRT;
    else if (strncmp(text, "segments:", 9) == 0) {
        errno = 0;
        long k = strtol(text + 9, &end, 10);
        if (errno || end == text + 9 || *end || k < 1 || k > 1000000)
            goto bad;
        *out = SL_SCHEDULE_SEGMENTS((int)k);
    } else if (strncmp(text, "budget:", 7) == 0 && parse_size(text + 7, &bytes) == 0)
        *out = SL_SCHEDULE_BUDGET(bytes);
    else if (strncmp(text, "ops:", 4) == 0 && parse_size(text + 4, &bytes) == 0)
        *out = SL_SCHEDULE_BUDGET_OPS(bytes);
    else
        goto bad;
    return SL_OK;
bad:
    return sl_set_error(SL_ERR_INVALID_ARG,
                        "sl_schedule_parse: '%.200s' is not a schedule (none, sqrt, segments:K, "
                        "budget:SIZE or ops:SIZE)", text);
}

sl_status sl_schedule_segments(const sl_budget_query *chain, sl_schedule schedule,
                               sl_segments *out)
{
    const sl_graph *g = chain->g;
    if (schedule.kind == SL_SCHEDULE_KIND_NONE)
        return sl_segments_keep_all(g->n_top, out);
    if (schedule.kind == SL_SCHEDULE_KIND_BUDGET || schedule.kind == SL_SCHEDULE_KIND_BUDGET_OPS) {
        sl_budget_query q = *chain;
        q.budget_bytes = schedule.budget_bytes;
        q.operator_level = schedule.kind == SL_SCHEDULE_KIND_BUDGET_OPS;
        return sl_segments_for_budget(&q, out);
    }
    sl_unit_costs u;
    sl_status st = sl_unit_costs_compute(g, chain->sh, &u);
    if (st != SL_OK)
        return st;
    int k = schedule.kind == SL_SCHEDULE_KIND_SQRT ? sl_sqrt_segments(g->n_top) : schedule.segments;
    st = sl_segments_balanced(&u, k, out);
    sl_unit_costs_release(&u);
    return st;
}
