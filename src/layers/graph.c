/*
 * graph.c — the network flattened to primitive nodes, and the shape pass
 * (layers stage). Composites emit their children; tensor 0 is the input
 * and tensor i + 1 the output of node i, so nodes are in topological order
 * by construction. The shape pass computes every tensor's shape and every
 * node's cost for one input shape without running a kernel.
 */
#include <limits.h>
#include <stdio.h>
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

/* A tensor's bytes, UINT64_MAX for any shape past 64 bits. */
static uint64_t shape_bytes(sl_shape s)
{
    uint64_t n = sl_mul_sat(sl_mul_sat((uint64_t)s.n, (uint64_t)s.c), (uint64_t)s.h);
    return sl_mul_sat(sl_mul_sat(n, (uint64_t)s.w), sizeof(float));
}

static sl_status too_large(sl_shape input, uint64_t bytes)
{
    char total[48];
    if (bytes == UINT64_MAX)
        snprintf(total, sizeof total, "2^64 bytes or more");
    else
        snprintf(total, sizeof total, "%llu bytes", (unsigned long long)bytes);
    char b[SL_SHAPE_STR];
    return sl_set_error(SL_ERR_NOMEM, "the tensors of one step on input %s (outputs, "
                        "saved state and workspaces) total %s, more than 2^56 bytes (64 PiB), "
                        "beyond any machine and past what its planned figures can count in 64 "
                        "bits; use a smaller batch, input or model", sl_shape_str(input, b), total);
}

sl_status sl_graph_input_dtype(const sl_graph *g, sl_dtype *out)
{
    const sl_graph_node *ids = NULL, *floats = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_graph_node *nd = &g->nodes[i];
        const sl_layer *l = nd->layer;
        int token = (l->ops->flags & SL_LAYER_TOKEN_INPUT) != 0;
        for (int k = 0; k < nd->n_in; k++) {
            if (token && nd->in[k] != 0)
                return sl_set_error(SL_ERR_SHAPE, "%s '%s' reads token ids, which only the "
                                    "network's input holds: it must be the first layer",
                                    l->ops->type, sl_layer_label(l));
            if (nd->in[k] == 0 && token)
                ids = nd;
            else if (nd->in[k] == 0 && !floats)
                floats = nd;
        }
    }
    if (ids && floats)
        return sl_set_error(SL_ERR_SHAPE, "%s '%s' reads the network's input as int32 token ids "
                            "and %s '%s' reads it as floats", ids->layer->ops->type,
                            sl_layer_label(ids->layer), floats->layer->ops->type,
                            sl_layer_label(floats->layer));
    *out = ids ? SL_DTYPE_I32 : SL_DTYPE_F32;
    return SL_OK;
}

/* The layouts a layer reads (its PLANAR_INPUT or ROWS_INPUT flag) against
 * its inputs'. */
static sl_status check_layouts(const sl_layer *l, int n_in, const sl_shape *in)
{
    unsigned flags = l->ops->flags;
    for (int k = 0; k < n_in; k++) {
        char b[SL_SHAPE_STR];
        if ((flags & SL_LAYER_PLANAR_INPUT) && !sl_shape_planar(in[k]))
            return sl_set_error(SL_ERR_SHAPE,
                                "%s '%s' reads NCHW images, but its input is %s with the "
                                "channels innermost; it cannot follow a layer that gives rows "
                                "of channels (LayerNorm, attention, Conv1D, an embedding)",
                                l->ops->type, sl_layer_label(l), sl_shape_str(in[k], b));
        if ((flags & SL_LAYER_ROWS_INPUT) && !sl_shape_rows(in[k]))
            return sl_set_error(SL_ERR_SHAPE,
                                "%s '%s' reads rows of channels (a sequence [B, T, C], NHWC), "
                                "but its input is NCHW %s; give a sequence's shape as "
                                "sl_shape_seq(B, T, C)",
                                l->ops->type, sl_layer_label(l), sl_shape_str(in[k], b));
    }
    return SL_OK;
}

sl_status sl_shapes_compute(const sl_graph *g, const sl_backend *be, sl_shape input,
                            sl_shapes *out)
{
    sl_dtype input_dtype;
    sl_status ist = sl_graph_input_dtype(g, &input_dtype);
    if (ist != SL_OK)
        return ist;
    sl_shapes s;
    memset(&s, 0, sizeof s);
    s.input_dtype = (unsigned char)input_dtype;
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
    s.bytes[0] = shape_bytes(input);
    uint64_t step_bytes = s.bytes[0];
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_graph_node *nd = &g->nodes[i];
        sl_shape in[SL_MAX_INPUTS];
        for (int k = 0; k < nd->n_in; k++)
            in[k] = s.tensor[nd->in[k]];
        sl_shape o = sl_shape_nchw(0, 0, 0, 0);
        sl_status st = check_layouts(nd->layer, nd->n_in, in);
        if (st == SL_OK)
            st = nd->layer->ops->infer(nd->layer, be, nd->n_in, in, &o, &s.cost[i]);
        if (st != SL_OK) {
            sl_shapes_release(&s);
            return st;
        }
        if (nd->layer->ops->flags & SL_LAYER_ROWS_INPUT)
            o.layout = SL_LAYOUT_NHWC;
        s.tensor[nd->out] = o;
        s.bytes[nd->out] = shape_bytes(o);
        const sl_layer_cost *c = &s.cost[i];
        step_bytes = sl_add_sat(step_bytes, sl_add_sat(s.bytes[nd->out], c->saved_bytes));
        step_bytes = sl_add_sat(step_bytes, sl_add_sat(c->ws_fwd_bytes, c->ws_bwd_bytes));
        s.fwd_flops = sl_add_sat(s.fwd_flops, c->fwd_flops);
        s.bwd_flops = sl_add_sat(s.bwd_flops, c->bwd_flops);
    }
    if (step_bytes > SL_MAX_STEP_BYTES) {
        sl_shapes_release(&s);
        return too_large(input, step_bytes);
    }
    sl_shape last = s.tensor[g->n_nodes];
    if (g->head) {
        if (!sl_shape_rows(last)) {
            char b[SL_SHAPE_STR];
            sl_shapes_release(&s);
            return sl_set_error(SL_ERR_SHAPE, "the language-model head reads rows of channels "
                                "(a sequence [B, T, C], NHWC), but the last layer gives NCHW %s",
                                sl_shape_str(last, b));
        }
        if (last.c != g->head->channels) {
            sl_shapes_release(&s);
            return sl_set_error(SL_ERR_SHAPE, "the language-model head reads rows of %d channels but "
                                "the last layer gives %d", g->head->channels, last.c);
        }
        uint64_t positions = (uint64_t)last.n * (uint64_t)last.h * (uint64_t)last.w;
        if (positions > INT_MAX) {
            sl_shapes_release(&s);
            return sl_set_error(SL_ERR_SHAPE, "the language-model head reads %llu positions; the "
                                "kernels count them in int, at most %d",
                                (unsigned long long)positions, INT_MAX);
        }
        int rows = (int)positions;
        s.loss_ws_bytes = sl_lm_head_ws_bytes(g->head, rows, !be->host_memory);
        s.fwd_flops = sl_add_sat(s.fwd_flops, sl_lm_head_fwd_flops(g->head, rows));
        s.bwd_flops = sl_add_sat(s.bwd_flops, sl_lm_head_bwd_flops(g->head, rows));
    } else if (be->softmax_xent_workspace_bytes) {
        s.loss_ws_bytes = be->softmax_xent_workspace_bytes(be, last.n);
    }
    *out = s;
    return SL_OK;
}

/* Whether node nd reads and writes bf16 tensors only. */
static int all_bf16(const sl_graph_node *nd, const unsigned char *dt)
{
    for (int k = 0; k < nd->n_in; k++)
        if (dt[nd->in[k]] != SL_DTYPE_BF16)
            return 0;
    return dt[nd->out] == SL_DTYPE_BF16;
}

sl_status sl_shapes_set_dtype(const sl_graph *g, const sl_backend *be, sl_dtype dtype,
                              sl_shapes *sh)
{
    if (dtype == SL_DTYPE_F32)
        return SL_OK;
    unsigned char *dt = sl_calloc((size_t)sh->n_tensors, 1);
    unsigned char *native = sl_calloc((size_t)sh->n_nodes + 1, 1);
    if (!dt || !native) {
        free(dt);
        free(native);
        return sl_set_error(SL_ERR_NOMEM, "out of memory in the shape pass");
    }
    /* The last tensor stays F32, and so does the tensor it is a view of. */
    int last = g->n_nodes;
    while (last > 0 && (g->nodes[last - 1].layer->ops->flags & SL_LAYER_VIEW))
        last = g->nodes[last - 1].in[0];
    dt[0] = sh->input_dtype;
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_graph_node *nd = &g->nodes[i];
        if (nd->layer->ops->flags & SL_LAYER_VIEW)
            dt[nd->out] = dt[nd->in[0]];
        else
            dt[nd->out] = nd->out == last ? SL_DTYPE_F32 : (unsigned char)dtype;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_graph_node *nd = &g->nodes[i];
        const sl_layer_ops *ops = nd->layer->ops;
        if (!ops->native_bf16 || (ops->flags & SL_LAYER_VIEW) || !all_bf16(nd, dt))
            continue;
        sl_shape in[SL_MAX_INPUTS];
        for (int k = 0; k < nd->n_in; k++)
            in[k] = sh->tensor[nd->in[k]];
        native[i] = (unsigned char)(ops->native_bf16(nd->layer, be, nd->n_in, in,
                                                     sh->tensor[nd->out], &sh->cost[i]) != 0);
    }
    for (int t = 0; t < sh->n_tensors; t++)
        if (dt[t] == SL_DTYPE_BF16)
            sh->bytes[t] = sh->bytes[t] / sizeof(float) * sizeof(uint16_t);
    if (g->head) { /* rows as sl_shapes_compute counted them (at most INT_MAX) */
        sl_shape ls = sh->tensor[g->n_nodes];
        size_t ws = sl_lm_head_bf16_ws_bytes(g->head, be, ls.n * ls.h * ls.w);
        if (ws != SIZE_MAX) {
            sh->loss_ws_bytes = ws;
            sh->head_bf16 = 1;
        }
    }
    free(sh->dtype);
    free(sh->native);
    sh->dtype = dt;
    sh->native = native;
    return SL_OK;
}

void sl_shapes_release(sl_shapes *s)
{
    free(s->tensor);
    free(s->bytes);
    free(s->dtype);
    free(s->native);
    free(s->cost);
    memset(s, 0, sizeof *s);
}
