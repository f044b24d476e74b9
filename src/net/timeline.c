/*
 * timeline.c — pictures of a plan (net stage, for people): live bytes per
 * program step by category, drawn as a self-contained SVG for one or more
 * schedules on the same axes; and the per-unit table of what each
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
    t.step_names = sl_calloc((size_t)t.steps + 1, sizeof(char *));
    if (!t.outputs || !t.grad_inputs || !t.buffers || !t.step_names) {
        sl_memory_timeline_free(&t);
        return sl_set_error(SL_ERR_NOMEM, "out of memory building a memory timeline");
    }
    for (int s = 0; s < t.steps; s++) {
        const size_t *live = pl->step_live + (size_t)s * SL_VALUE_KIND_COUNT;
        t.outputs[s] = live[SL_VALUE_OUTPUT];
        t.grad_inputs[s] = live[SL_VALUE_GRAD];
        t.buffers[s] = live[SL_VALUE_SAVED] + live[SL_VALUE_WORKSPACE];
    }
    for (int s = 0; s < t.steps; s++) {
        const sl_step *st_ = &p->steps[s];
        const char *who = st_->kind == SL_STEP_LOSS ? "" : net->graph.nodes[st_->node].layer->name;
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

/* Escapes &, <, > and quotes for SVG text. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

sl_status sl_memory_timeline_svg(const char *path, const sl_memory_timeline *const *series,
                                 const char *const *labels, int n)
{
    if (!path || !series || !labels || n < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_timeline_svg: path, series or labels missing");
    int max_steps = 1;
    uint64_t max_bytes = 1;
    for (int i = 0; i < n; i++) {
        if (!series[i] || !labels[i])
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_timeline_svg: series %d is NULL", i);
        if (series[i]->steps > max_steps)
            max_steps = series[i]->steps;
        for (int s = 0; s < series[i]->steps; s++) {
            uint64_t tot = series[i]->outputs[s] + series[i]->grad_inputs[s] + series[i]->buffers[s];
            if (tot > max_bytes)
                max_bytes = tot;
        }
    }
    FILE *f = fopen(path, "w");
    if (!f)
        return sl_set_error(SL_ERR_IO, "sl_memory_timeline_svg: cannot write '%s'", path);
    const double W = 920, H = 420, L = 90, R = 20, T = 40, B = 50;
    double pw = W - L - R, ph = H - T - B, mib = (double)max_bytes / 1048576.0;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<title>Live memory per program step</title>\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%.0f\" y=\"22\" font-size=\"15\">Live activation memory per step "
               "(outputs + gradInputs + buffers)</text>\n",
            W, H, L);
    fprintf(f, "<g stroke=\"#888\" stroke-width=\"1\">\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
               "y2=\"%.1f\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n",
            L, T + ph, L + pw, T + ph, L, T, L, T + ph);
    for (int k = 0; k <= 4; k++) {
        double y = T + ph - ph * k / 4.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f MiB</text>\n", L - 6,
                y + 4, mib * k / 4.0);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n",
                L + pw * k / 4.0, T + ph + 18, (max_steps - 1) * k / 4);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">program step</text>\n",
            L + pw / 2, H - 10);
    for (int i = 0; i < n; i++) {
        const sl_memory_timeline *t = series[i];
        const char *color = palette[i % (int)(sizeof palette / sizeof *palette)];
        fprintf(f, "<g class=\"series\" id=\"series-%d\">\n<title>", i);
        put_text(f, labels[i]);
        fprintf(f, "</title>\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                color);
        for (int s = 0; s < t->steps; s++) {
            uint64_t tot = t->outputs[s] + t->grad_inputs[s] + t->buffers[s];
            double x = L + (max_steps > 1 ? pw * s / (max_steps - 1) : 0);
            double y = T + ph - ph * (double)tot / (double)max_bytes;
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fprintf(f, "\"/>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\">",
                L + 10, T + 6 + 18.0 * i, color, L + 28, T + 16 + 18.0 * i);
        put_text(f, labels[i]);
        fprintf(f, " (arena %.1f MiB)</text>\n</g>\n", t->arena_bytes / 1048576.0);
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return sl_set_error(SL_ERR_IO, "sl_memory_timeline_svg: error writing '%s'", path);
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
