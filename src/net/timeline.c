/*
 * timeline.c — pictures of a plan (net stage, for people): live bytes per
 * program step by category (drawn as an SVG by timeline_svg.c, one or
 * more schedules on the same axes); and the per-unit table of what each
 * top-level unit costs and what the schedule does with it. Plans through
 * net_plan.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "net/net.h"

static const char *step_verb(sl_step_kind k)
{
    switch (k) {
    case SL_STEP_FWD: return "fwd";
    case SL_STEP_REFWD: return "refwd";
    case SL_STEP_LOSS: return "loss";
    case SL_STEP_BWD: return "bwd";
    case SL_STEP_UPDATE: return "update";
    case SL_STEP_REDUCE: return "reduce";
    }
    return "?";
}

void sl_memory_timeline_free(sl_memory_timeline *t)
{
    if (!t)
        return;
    if (t->step_names)
        for (int s = 0; s < t->steps; s++)
            free(t->step_names[s]);
    free(t->step_names);
    free(t->outputs);
    free(t->grad_inputs);
    free(t->buffers);
    free(t->param_grads);
    memset(t, 0, sizeof *t);
}

sl_status sl_net_memory_timeline(sl_net *net, sl_shape input, sl_mode mode, sl_memory_timeline *out)
{
    sl_run_cache *c;
    sl_status st = sl_net_plan_for(net, input, mode, out, "sl_net_memory_timeline", &c);
    if (st != SL_OK)
        return st;
    const sl_program *p = &c->prog;
    const sl_plan *pl = &c->plan;
    sl_memory_timeline t;
    memset(&t, 0, sizeof t);
    t.steps = p->n_steps;
    t.arena_bytes = pl->arena_bytes;
    t.outputs = sl_calloc((size_t)t.steps + 1, sizeof(uint64_t));
    t.grad_inputs = sl_calloc((size_t)t.steps + 1, sizeof(uint64_t));
    t.buffers = sl_calloc((size_t)t.steps + 1, sizeof(uint64_t));
    t.param_grads = sl_calloc((size_t)t.steps + 1, sizeof(uint64_t));
    t.step_names = sl_calloc((size_t)t.steps + 1, sizeof(char *));
    if (!t.outputs || !t.grad_inputs || !t.buffers || !t.param_grads || !t.step_names) {
        sl_memory_timeline_free(&t);
        return sl_set_error(SL_ERR_NOMEM, "out of memory building a memory timeline");
    }
    for (int s = 0; s < t.steps; s++) {
        const size_t *live = pl->step_live + (size_t)s * SL_VALUE_KIND_COUNT;
        t.outputs[s] = live[SL_VALUE_OUTPUT];
        t.grad_inputs[s] = live[SL_VALUE_GRAD];
        t.buffers[s] = live[SL_VALUE_SAVED] + live[SL_VALUE_WORKSPACE];
        t.param_grads[s] = live[SL_VALUE_PARAM_GRAD];
    }
    for (int s = 0; s < t.steps; s++) {
        const sl_step *st_ = &p->steps[s];
        const char *who = st_->node < 0 || st_->kind == SL_STEP_LOSS
                              ? "" : net->graph.nodes[st_->node].layer->name;
        size_t len = strlen(who) + 8;
        t.step_names[s] = sl_malloc(len);
        if (!t.step_names[s]) {
            sl_memory_timeline_free(&t);
            return sl_set_error(SL_ERR_NOMEM, "out of memory building a memory timeline");
        }
        snprintf(t.step_names[s], len, "%s%s%s", step_verb(st_->kind), who[0] ? " " : "", who);
    }
    *out = t;
    return SL_OK;
}

/* What unit u's first forward keeps, from the schedule's actions: all,
 * conv outputs, or its output only, which either stays (a checkpoint) or
 * is dropped as soon as the next unit has read it. */
static const char *first_keep(const sl_action *a, int n, int u)
{
    for (int i = 0; i < n; i++) {
        if (a[i].unit != u || a[i].kind != SL_ACT_FWD)
            continue;
        if (a[i].keep == SL_KEEP_ALL)
            return "keep all";
        if (a[i].keep == SL_KEEP_CONV)
            return "keep conv";
        int j = i + 1;
        while (j < n && a[j].kind == SL_ACT_DROP)
            j++; /* the previous unit's output, dropped after this forward read it */
        int dropped = j + 1 < n && a[j].kind == SL_ACT_FWD && a[j].unit == u + 1 &&
                      a[j + 1].kind == SL_ACT_DROP && a[j + 1].unit == u;
        return dropped ? "recompute" : "checkpoint";
    }
    return "keep all"; /* run by its backward alone */
}

void sl_unit_reports_free(sl_unit_report *reports) { free(reports); }

sl_status sl_net_unit_reports(sl_net *net, sl_shape input, sl_mode mode, sl_unit_report **out,
                              int *n)
{
    sl_run_cache *c;
    sl_status st = sl_net_plan_for(net, input, mode, out, "sl_net_unit_reports", &c);
    if (st != SL_OK)
        return st;
    if (!n)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_unit_reports: n is NULL");
    const sl_graph *g = &net->graph;
    int units = g->n_top;
    sl_cost_model model = sl_net_cost_model(net);
    sl_unit_report *r = sl_calloc((size_t)units, sizeof *r);
    sl_unit_probe *probe = sl_calloc((size_t)units, sizeof *probe);
    int *runs = sl_calloc((size_t)g->n_nodes, sizeof *runs);
    sl_action *acts = NULL;
    int n_acts = 0;
    if (!r || !probe || !runs)
        st = sl_set_error(SL_ERR_NOMEM, "out of memory reporting units");
    if (st == SL_OK)
        st = sl_unit_probes_compute(g, &c->sh, &model, probe);
    if (st == SL_OK && mode == SL_MODE_TRAIN)
        st = sl_segments_actions(&c->seg, &acts, &n_acts);
    for (int s = 0; st == SL_OK && s < c->prog.n_steps; s++)
        if (c->prog.steps[s].kind == SL_STEP_FWD || c->prog.steps[s].kind == SL_STEP_REFWD)
            runs[c->prog.steps[s].node]++;
    for (int u = 0; st == SL_OK && u < units; u++) {
        const sl_unit_probe *p = &probe[u];
        sl_layer *l = net->top[u];
        r[u] = (sl_unit_report){l->name, l->ops->type, p->fwd_flops, p->bwd_flops,
                                p->fwd_seconds, p->bwd_seconds, p->in_bytes, p->out_bytes,
                                p->all_held, p->conv_held, p->out_bytes, p->ws_bytes, 0,
                                mode == SL_MODE_TRAIN ? first_keep(acts, n_acts, u) : "-"};
        for (int i = g->top_first_node[u]; i < g->top_first_node[u + 1]; i++)
            if (runs[i] > r[u].forwards)
                r[u].forwards = runs[i];
    }
    free(probe);
    free(runs);
    free(acts);
    if (st != SL_OK) {
        free(r);
        return st;
    }
    *out = r;
    *n = units;
    return SL_OK;
}
