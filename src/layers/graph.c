/*
 * graph.c — the network flattened to primitive nodes, and the shape pass
 * (layers stage). Composites emit their children; tensor 0 is the input
 * and tensor i + 1 the output of node i, so nodes are in topological order
 * by construction. The shape pass computes every tensor's shape and every
 * node's cost for one input shape without running a kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "layers/graph.h"

int sl_graph_add_node(sl_graph *g, sl_layer *layer, int n_in, const int *in)
{
    if (n_in < 1 || n_in > SL_MAX_INPUTS) {
        sl_set_error(SL_ERR_INVALID_ARG, "internal: node '%s' has %d inputs", sl_layer_label(layer), n_in);
        return -1;
    }
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
        sl_graph_node *nodes = sl_realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) {
            sl_set_error(SL_ERR_NOMEM, "out of memory building the network graph");
            return -1;
        }
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    sl_graph_node *nd = &g->nodes[g->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->layer = layer;
    nd->n_in = n_in;
    memcpy(nd->in, in, (size_t)n_in * sizeof *in);
    nd->out = g->n_nodes + 1;
    nd->top = g->current_top;
    g->n_nodes++;
    return nd->out;
}

int sl_graph_emit(sl_graph *g, sl_layer *layer, int input)
{
    if (input < 0)
        return -1;
    if (layer->ops->emit)
        return layer->ops->emit(layer, g, input);
    return sl_graph_add_node(g, layer, 1, &input);
}

sl_status sl_graph_build(sl_layer *const *top, int n_top, sl_graph *out)
{
    sl_graph g;
    memset(&g, 0, sizeof g);
    g.n_top = n_top;
    g.top_first_node = sl_calloc((size_t)n_top + 1, sizeof(int));
    g.top_output = sl_calloc((size_t)n_top + 1, sizeof(int));
    if (!g.top_first_node || !g.top_output) {
        sl_graph_release(&g);
        return sl_set_error(SL_ERR_NOMEM, "out of memory building the network graph");
    }
    int t = 0;
    for (int i = 0; i < n_top; i++) {
        g.current_top = i;
        g.top_first_node[i] = g.n_nodes;
        t = sl_graph_emit(&g, top[i], t);
        if (t < 0) {
            sl_graph_release(&g);
            return SL_ERR_NOMEM;
        }
        g.top_output[i] = t;
    }
    g.top_first_node[n_top] = g.n_nodes;
    *out = g;
    return SL_OK;
}

void sl_graph_release(sl_graph *g)
{
    free(g->nodes);
    free(g->top_first_node);
    free(g->top_output);
    memset(g, 0, sizeof *g);
}

sl_status sl_shapes_compute(const sl_graph *g, const sl_backend *be, sl_shape input,
                            sl_shapes *out)
{
    sl_shapes s;
    memset(&s, 0, sizeof s);
    s.n_nodes = g->n_nodes;
    s.n_tensors = g->n_nodes + 1;
    s.tensor = sl_calloc((size_t)s.n_tensors, sizeof *s.tensor);
    s.bytes = sl_calloc((size_t)s.n_tensors, sizeof *s.bytes);
    s.cost = sl_calloc((size_t)s.n_nodes + 1, sizeof *s.cost);
    if (!s.tensor || !s.bytes || !s.cost) {
        sl_shapes_release(&s);
        return sl_set_error(SL_ERR_NOMEM, "out of memory in the shape pass");
    }
    s.tensor[0] = input;
    s.bytes[0] = sl_shape_count(input) * sizeof(float);
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_graph_node *nd = &g->nodes[i];
        sl_shape in[SL_MAX_INPUTS];
        for (int k = 0; k < nd->n_in; k++)
            in[k] = s.tensor[nd->in[k]];
        sl_shape o = {0, 0, 0, 0};
        sl_status st = nd->layer->ops->infer(nd->layer, be, nd->n_in, in, &o, &s.cost[i]);
        if (st != SL_OK) {
            sl_shapes_release(&s);
            return st;
        }
        s.tensor[nd->out] = o;
        s.bytes[nd->out] = sl_shape_count(o) * sizeof(float);
        s.fwd_flops += s.cost[i].fwd_flops;
        s.bwd_flops += s.cost[i].bwd_flops;
    }
    sl_shape last = s.tensor[g->n_nodes];
    if (g->head) {
        if (last.c != g->head->channels) {
            sl_shapes_release(&s);
            return sl_set_error(SL_ERR_SHAPE, "the language-model head reads rows of %d channels but "
                                "the last layer gives %d", g->head->channels, last.c);
        }
        int rows = last.n * last.h * last.w;
        s.loss_ws_bytes = sl_lm_head_ws_bytes(g->head, rows);
        s.fwd_flops += sl_lm_head_fwd_flops(g->head, rows);
        s.bwd_flops += sl_lm_head_bwd_flops(g->head, rows);
    } else if (be->softmax_xent_workspace_bytes) {
        s.loss_ws_bytes = be->softmax_xent_workspace_bytes(be, last.n);
    }
    *out = s;
    return SL_OK;
}

void sl_shapes_release(sl_shapes *s)
{
    free(s->tensor);
    free(s->bytes);
    free(s->cost);
    memset(s, 0, sizeof *s);
}
