/*
 * global_avgpool.c — global average pooling and Flatten (layers stage).
 * Flatten is a view: the planner gives its output the storage of its
 * input, no kernel runs.
 */
#include "layers/layer.h"

static sl_status gap_infer(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                           sl_shape *out, sl_layer_cost *cost)
{
    (void)l;
    (void)be;
    (void)n_in;
    *out = sl_shape_nchw(in[0].n, in[0].c, 1, 1);
    cost->fwd_flops = sl_shape_count_sat(in[0]);
    cost->bwd_flops = sl_shape_count_sat(in[0]);
    return SL_OK;
}

static void gap_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    (void)l;
    ex->be->global_avgpool_forward(ex, a->in[0].n * a->in[0].c, a->in[0].h * a->in[0].w, a->x[0],
                                   a->y);
}

static void gap_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    (void)l;
    if (a->dx[0])
        ex->be->global_avgpool_backward(ex, a->in[0].n * a->in[0].c, a->in[0].h * a->in[0].w,
                                        a->dy, a->dx[0], a->accumulate[0]);
}

static const sl_layer_ops gap_ops = {
    .type = "GlobalAvgPool2d",
    .flags = SL_LAYER_PLANAR_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = gap_infer,
    .forward = gap_forward,
    .backward = gap_backward,
    .out_channels = sl_same_channels,
};

sl_layer *sl_global_avgpool(void)
{
    sl_layer *l = sl_alloc(sizeof *l, "a global average pooling layer");
    if (l)
        sl_layer_init(l, &gap_ops);
    return l;
}

static sl_status flatten_infer(const sl_layer *l, const sl_backend *be, int n_in,
                               const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    (void)l;
    (void)be;
    (void)n_in;
    (void)cost;
    *out = sl_shape_nchw(in[0].n, in[0].c * in[0].h * in[0].w, 1, 1);
    return SL_OK;
}

/* A view: the executor never calls these with distinct storage, but a
 * backward must still pass the gradient on when the planner could not
 * alias (the network input is the caller's memory). */
static void flatten_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    (void)l;
    if (a->y != a->x[0])
        ex->be->copy(ex, sl_shape_count(a->out), a->x[0], a->y, 0);
}

static void flatten_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    (void)l;
    if (a->dx[0] && (a->dx[0] != a->dy || a->accumulate[0]))
        ex->be->copy(ex, sl_shape_count(a->out), a->dy, a->dx[0], a->accumulate[0]);
}

static int flatten_channels(const sl_layer *l, int in_c)
{
    (void)l;
    (void)in_c;
    return 0; /* c*h*w: not known before a shape pass; Linear checks it there */
}

static const sl_layer_ops flatten_ops = {
    .type = "Flatten",
    .flags = SL_LAYER_VIEW | SL_LAYER_FWD_INPLACE | SL_LAYER_BWD_INPLACE | SL_LAYER_GRAPH_SAFE,
    .infer = flatten_infer,
    .forward = flatten_forward,
    .backward = flatten_backward,
    .out_channels = flatten_channels,
};

sl_layer *sl_flatten(void)
{
    sl_layer *l = sl_alloc(sizeof *l, "a Flatten layer");
    if (l)
        sl_layer_init(l, &flatten_ops);
    return l;
}
