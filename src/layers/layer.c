/*
 * layer.c — what every layer type shares (layers stage): the common
 * header, parameter declarations, children of composites, freeing, and
 * window arithmetic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

void sl_layer_init(sl_layer *l, const sl_layer_ops *ops)
{
    memset(l, 0, sizeof *l);
    l->ops = ops;
}

int sl_layer_add_param(sl_layer *l, const char *local, int ndim, const int *dims, sl_init init,
                       int fan, int trainable)
{
    sl_param_spec *p = &l->params[l->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->local, sizeof p->local, "%s", local);
    p->ndim = ndim;
    p->count = 1;
    for (int i = 0; i < ndim; i++) {
        p->dims[i] = dims[i];
        p->count *= (size_t)dims[i];
    }
    p->init = init;
    p->fan = fan;
    p->trainable = trainable;
    return l->n_params++;
}

int sl_layer_add_child(sl_layer *parent, const char *local, sl_layer *child)
{
    if (!child)
        return -1; /* the constructor's message stays */
    sl_layer **c = sl_realloc(parent->children, (size_t)(parent->n_children + 1) * sizeof *c);
    if (!c) {
        sl_layer_free(child);
        sl_set_error(SL_ERR_NOMEM, "out of memory building a %s block", parent->ops->type);
        return -1;
    }
    parent->children = c;
    snprintf(child->local, sizeof child->local, "%s", local);
    c[parent->n_children++] = child;
    return 0;
}

void sl_layer_free(sl_layer *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n_children; i++)
        sl_layer_free(l->children[i]);
    free(l->children);
    if (l->ops && l->ops->destroy)
        l->ops->destroy(l);
    free(l);
}

int sl_same_channels(const sl_layer *l, int in_c)
{
    (void)l;
    return in_c;
}

int sl_check_channels(const sl_layer *l, int expected, int in_c)
{
    if (in_c == 0 || expected == in_c) /* 0: not known before a shape pass (after Flatten) */
        return 0;
    sl_set_error(SL_ERR_SHAPE, "%s '%s' expects %d input channels but receives %d", l->ops->type,
                 l->name[0] ? l->name : l->local, expected, in_c);
    return -1;
}

int sl_window_out(int in, int kernel, int stride, int pad, int dilation, int ceil_mode)
{
    long span = (long)dilation * (kernel - 1) + 1;
    long room = (long)in + 2L * pad - span;
    if (room < 0)
        return -1;
    long out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
    /* PyTorch: with ceil_mode the last window must start inside the input
     * or left padding. */
    if (ceil_mode && (out - 1) * stride >= (long)in + pad)
        out--;
    return (int)out;
}

/* Name for messages: the full name once added, else the local name. */
const char *sl_layer_label(const sl_layer *l)
{
    if (l->name[0])
        return l->name;
    if (l->local[0])
        return l->local;
    return l->ops->type;
}

sl_status sl_elementwise_infer(const sl_layer *l, const sl_backend *be, int n_in,
                               const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    (void)l;
    (void)be;
    (void)n_in;
    *out = in[0];
    cost->fwd_flops = sl_shape_count_sat(in[0]);
    cost->bwd_flops = sl_shape_count_sat(in[0]);
    return SL_OK;
}

int sl_native_bf16_if(const sl_backend *be, unsigned family)
{
    return (be->bf16_kernels & family) == family;
}

/* The bf16 weight copy at a workspace's start: its bytes, and w rounded
 * into it. */
static size_t weight16_bytes(size_t w_count) { return sl_align_up(w_count * sizeof(uint16_t)); }

static void *weight16(const sl_exec *ex, const float *w, size_t w_count, void *ws)
{
    ex->be->cast(ex, w_count, w, SL_DTYPE_F32, ws, SL_DTYPE_BF16);
    return ws;
}

sl_gemm_bf16_layer sl_gemm_bf16_layer_of(int rows, int f, int o, int w_out_in, int bias)
{
    sl_gemm_bf16_layer g;
    int ldw = w_out_in ? f : o;
    /* y = x op(W) (+ b) */
    g.fwd = (sl_gemm_bf16_desc){0, w_out_in, rows, o, f, f, ldw, o, 1, 0, bias};
    /* dW += dy^T x ([out, in]) or x^T dy ([in, out]) */
    g.back[0] = w_out_in ? (sl_gemm_bf16_desc){1, 0, o, f, rows, o, f, f, 0, 1, 0}
                         : (sl_gemm_bf16_desc){1, 0, f, o, rows, f, o, o, 0, 1, 0};
    /* dx (+)= dy op(W)^T */
    for (int acc = 0; acc < 2; acc++)
        g.back[1 + acc] = (sl_gemm_bf16_desc){0, !w_out_in, rows, f, o, o, ldw, f, 1, acc, 0};
    g.wgrad_dy_first = w_out_in;
    g.w_count = (size_t)f * o;
    return g;
}

int sl_gemm_native_bf16(const sl_backend *be, const sl_gemm_bf16_layer *g, size_t x_bytes,
                        size_t y_bytes, sl_layer_cost *cost)
{
    if (!sl_native_bf16_if(be, SL_BF16_GEMM) || !be->gemm_bf16 || !be->gemm_bf16_workspace_bytes)
        return 0;
    /* a geometry the backend cannot run keeps the float copies */
    size_t f = be->gemm_bf16_workspace_bytes(be, &g->fwd), b = 0;
    for (int i = 0; i < 3 && f != SIZE_MAX && b != SIZE_MAX; i++) {
        size_t one = be->gemm_bf16_workspace_bytes(be, &g->back[i]);
        b = one == SIZE_MAX ? SIZE_MAX : (one > b ? one : b);
    }
    if (f == SIZE_MAX || b == SIZE_MAX)
        return 0;
    size_t w16 = weight16_bytes(g->w_count);
    f += w16;
    b += w16;
    if (f > cost->ws_fwd_bytes + x_bytes + y_bytes || b > cost->ws_bwd_bytes + 2 * x_bytes + y_bytes)
        return 0;
    cost->ws_fwd_bytes = f;
    cost->ws_bwd_bytes = b;
    return 1;
}

void sl_gemm_bf16_forward(const sl_exec *ex, const sl_gemm_bf16_layer *g, const float *w,
                          const void *x, const float *bias, void *y, void *ws)
{
    ex->be->gemm_bf16(ex, &g->fwd, x, weight16(ex, w, g->w_count, ws), bias, y,
                      (char *)ws + weight16_bytes(g->w_count));
}

void sl_gemm_bf16_backward(const sl_exec *ex, const sl_gemm_bf16_layer *g, const float *w,
                           float *dw, const void *x, const void *dy, float *dbias, int rows,
                           void *dx, int accumulate, void *ws)
{
    char *rest = (char *)ws + weight16_bytes(g->w_count);
    ex->be->gemm_bf16(ex, &g->back[0], g->wgrad_dy_first ? dy : x, g->wgrad_dy_first ? x : dy,
                      NULL, dw, rest);
    if (dbias) {
        sl_exec e16 = sl_exec_for(ex, 1);
        ex->be->bias_backward(&e16, rows, g->fwd.n, dy, dbias);
    }
    if (dx)
        ex->be->gemm_bf16(ex, &g->back[1 + (accumulate != 0)], dy,
                          weight16(ex, w, g->w_count, ws), NULL, dx, rest);
}
