/*
 * dot.c — the network as a Graphviz DOT graph (net stage: a picture of
 * the plan, for people), optnet's graphgen for our nets: one node per
 * primitive layer labelled with its output shape and size, composite
 * blocks as clusters, and fill colour = the arena offset of the layer's
 * output, so layers whose outputs reuse the same storage share a colour.
 * In-place layers share their input's colour; with reuse off every output
 * has a colour of its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

/* A distinct colour per arena offset: golden-ratio hue steps over the
 * rank of the offset among all offsets used. */
static void colour_for(int rank, char out[8])
{
    double h = fmod(rank * 0.6180339887, 1.0), s = 0.45, v = 0.95;
    int i = (int)(h * 6);
    double f = h * 6 - i, p = v * (1 - s), q = v * (1 - f * s), t = v * (1 - (1 - f) * s);
    double r, g, b;
    switch (i % 6) {
    case 0: r = v; g = t; b = p; break;
    case 1: r = q; g = v; b = p; break;
    case 2: r = p; g = v; b = t; break;
    case 3: r = p; g = q; b = v; break;
    case 4: r = t; g = p; b = v; break;
    default: r = v; g = p; b = q; break;
    }
    snprintf(out, 8, "#%02x%02x%02x", (int)(r * 255), (int)(g * 255), (int)(b * 255));
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Rank of an offset among the sorted distinct offsets. */
static int offset_rank(const size_t *sorted, int n, size_t off)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (sorted[mid] < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

sl_status sl_net_write_dot(sl_net *net, sl_shape input, sl_mode mode, const char *path)
{
    sl_run_cache *c;
    sl_status st = sl_net_plan_for(net, input, mode, path, "sl_net_write_dot", &c);
    if (st != SL_OK)
        return st;
    const sl_graph *g = &net->graph;
    const sl_program *p = &c->prog;
    const sl_plan *pl = &c->plan;
    /* The storage offset of each node's first forward output. */
    size_t *offset = sl_calloc((size_t)g->n_nodes + 1, sizeof *offset);
    size_t *sorted = sl_calloc((size_t)g->n_nodes + 1, sizeof *sorted);
    int *seen = sl_calloc((size_t)g->n_nodes + 1, sizeof *seen);
    if (!offset || !sorted || !seen) {
        free(offset);
        free(sorted);
        free(seen);
        return sl_set_error(SL_ERR_NOMEM, "out of memory writing a DOT graph");
    }
    for (int s = 0; s < p->n_steps; s++) {
        const sl_step *stp = &p->steps[s];
        if (stp->kind == SL_STEP_FWD && !seen[stp->node]) {
            seen[stp->node] = 1;
            offset[stp->node] = pl->offset[stp->y];
            /* The caller's input (a view of it) has no arena storage. */
            int root = stp->y;
            while (pl->alias[root] != root)
                root = pl->alias[root];
            if (p->values[root].external)
                seen[stp->node] = 2;
        }
    }
    int n_sorted = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (seen[i] == 1)
            sorted[n_sorted++] = offset[i];
    qsort(sorted, (size_t)n_sorted, sizeof *sorted, cmp_size);
    int distinct = 0;
    for (int i = 0; i < n_sorted; i++)
        if (i == 0 || sorted[i] != sorted[distinct - 1])
            sorted[distinct++] = sorted[i];
    FILE *f = fopen(path, "w");
    if (!f) {
        free(offset);
        free(sorted);
        free(seen);
        return sl_set_error(SL_ERR_IO, "sl_net_write_dot: cannot write '%s'", path);
    }
    fprintf(f, "digraph sublinear {\n  rankdir=TB;\n  node [shape=box, style=\"filled,rounded\", "
               "fontname=\"Helvetica\", fontsize=10];\n");
    char b[SL_SHAPE_STR];
    fprintf(f, "  label=\"%s plan, input %s, arena %.2f MiB, %s; same colour = same "
               "storage\";\n",
            mode == SL_MODE_TRAIN ? "training" : "inference", sl_shape_str(input, b),
            pl->arena_bytes / 1048576.0, pl->reuse ? "memory reuse on" : "no reuse");
    fprintf(f, "  t0 [label=\"input\\n%s\", fillcolor=\"#dddddd\"];\n", sl_shape_str(input, b));
    int open_cluster = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_graph_node *nd = &g->nodes[i];
        sl_layer *top = net->top[nd->top];
        int composite = top->n_children > 0;
        if (open_cluster != nd->top) {
            if (open_cluster >= 0)
                fprintf(f, "  }\n");
            open_cluster = -1;
            if (composite) {
                fprintf(f, "  subgraph cluster_%d {\n  label=\"%s (%s)\"; style=dashed;\n", nd->top,
                        top->name, top->ops->type);
                open_cluster = nd->top;
            }
        }
        sl_shape s = c->sh.tensor[nd->out];
        char colour[8] = "#dddddd";
        if (seen[i] == 1)
            colour_for(offset_rank(sorted, distinct, offset[i]), colour);
        fprintf(f, "  t%d [label=\"%s\\n%s\\n%s\\n%.2f MiB\", fillcolor=\"%s\"];\n",
                nd->out, nd->layer->name, nd->layer->ops->type, sl_shape_str(s, b),
                c->sh.bytes[nd->out] / 1048576.0, colour);
    }
    if (open_cluster >= 0)
        fprintf(f, "  }\n");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            fprintf(f, "  t%d -> t%d;\n", g->nodes[i].in[k], g->nodes[i].out);
    fprintf(f, "}\n");
    free(offset);
    free(sorted);
    free(seen);
    if (fclose(f) != 0)
        return sl_set_error(SL_ERR_IO, "sl_net_write_dot: error writing '%s'", path);
    return SL_OK;
}
