/*
 * profile.c — where a run's time goes (net stage): with profiling on,
 * every program step waits for the backend (on a GPU: for its kernels to
 * finish) and its wall time is added to the entry of its layer type and
 * pass; sl_net_update's optimizer kernels get an entry of their own. The
 * waits serialise the device, so a profiled step is slower than a plain
 * one; the split, not the sum, is what it is for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "checkpoint/pipeline.h"
#include "net/net.h"

struct sl_profile {
    int n, cap;
    sl_profile_entry *e;
    /* the run being timed */
    const sl_net *net;
    const sl_program *prog;
    const sl_exec *ex;
    void (*chained)(void *user, int step); /* a communicator's own hook */
    void *chained_user;
    double t_last;
};

/* Waits for the backend's queued work; a failure stays for the run's sync. */
static void wait_for(const sl_exec *ex)
{
    if (ex->be->wait)
        ex->be->wait(ex);
}

/* Adds one call of `seconds` to the entry (type, pass); an entry that
 * cannot be made (out of memory) is dropped, never the run. */
static void add(sl_profile *p, const char *type, const char *pass, double seconds)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->e[i].layer_type, type) && !strcmp(p->e[i].pass, pass)) {
            p->e[i].calls++;
            p->e[i].seconds += seconds;
            return;
        }
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        sl_profile_entry *e = sl_realloc(p->e, (size_t)cap * sizeof *e);
        if (!e)
            return;
        p->e = e;
        p->cap = cap;
    }
    sl_profile_entry *e = &p->e[p->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->layer_type, sizeof e->layer_type, "%s", type);
    snprintf(e->pass, sizeof e->pass, "%s", pass);
    e->calls = 1;
    e->seconds = seconds;
}

static void after_step(void *user, int s)
{
    sl_profile *p = user;
    wait_for(p->ex);
    double t = sl_now_seconds();
    const sl_step *st = &p->prog->steps[s];
    const char *type = "SoftmaxCrossEntropy", *pass = "loss";
    if (st->kind == SL_STEP_UPDATE) {
        type = "optimizer";
        pass = "update";
    } else if (st->kind == SL_STEP_REDUCE) {
        type = "communication";
        pass = "reduce";
    } else if (st->kind != SL_STEP_LOSS) {
        type = p->net->graph.nodes[st->node].layer->ops->type;
        pass = st->kind == SL_STEP_BWD       ? "backward"
               : st->pass == SL_PASS_EVAL    ? "eval"
               : st->kind == SL_STEP_REFWD   ? "re-forward"
                                             : "forward";
    }
    add(p, type, pass, t - p->t_last);
    if (p->chained)
        p->chained(p->chained_user, s);
    p->t_last = sl_now_seconds();
}

void sl_profile_begin_run(sl_net *net, const sl_program *prog, const sl_exec *ex, sl_run_io *io)
{
    sl_profile *p = net->profile;
    if (!p)
        return;
    p->net = net;
    p->prog = prog;
    p->ex = ex;
    p->chained = io->after_step;
    p->chained_user = io->after_step_user;
    io->after_step = after_step;
    io->after_step_user = p;
    wait_for(ex);
    p->t_last = sl_now_seconds();
}

double sl_profile_clock(const sl_net *net, const sl_exec *ex)
{
    if (!net->profile)
        return 0;
    wait_for(ex);
    return sl_now_seconds();
}

void sl_profile_add_update(sl_net *net, const sl_exec *ex, double t0)
{
    if (!net->profile)
        return;
    wait_for(ex);
    add(net->profile, "optimizer", "update", sl_now_seconds() - t0);
}

void sl_profile_free(sl_profile *p)
{
    if (!p)
        return;
    free(p->e);
    free(p);
}

sl_status sl_net_set_profiling(sl_net *net, int enabled)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_profiling: network is NULL");
    if (!enabled) {
        sl_profile_free(net->profile);
        net->profile = NULL;
        return SL_OK;
    }
    if (net->profile)
        return SL_OK;
    net->profile = sl_zalloc(sizeof *net->profile, "a profile");
    return net->profile ? SL_OK : SL_ERR_NOMEM;
}

static int slower_first(const void *a, const void *b)
{
    double x = ((const sl_profile_entry *)a)->seconds, y = ((const sl_profile_entry *)b)->seconds;
    return (x < y) - (x > y);
}

sl_status sl_net_profile(sl_net *net, sl_profile_entry *out, int cap, int *n, int reset)
{
    if (!net || !n || (cap > 0 && !out) || cap < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_profile: network or n is NULL, or out is NULL "
                                           "with cap %d", cap);
    if (!net->profile)
        return sl_set_error(SL_ERR_STATE, "sl_net_profile: profiling is off (sl_net_set_profiling)");
    sl_profile *p = net->profile;
    qsort(p->e, (size_t)p->n, sizeof *p->e, slower_first);
    if (out) /* cap 0 with out NULL asks for the count alone */
        memcpy(out, p->e, (size_t)(cap < p->n ? cap : p->n) * sizeof *p->e);
    *n = p->n;
    if (reset)
        p->n = 0;
    return SL_OK;
}
