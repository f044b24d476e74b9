/*
 * pool2d.c — MaxPool2d and AvgPool2d (layers stage). Max pooling keeps
 * the argmax of each window (int32, output-sized) from forward to
 * backward; a re-forward recomputes it with the output, so it is not
 * "kept" state. Average pooling counts padding in the divisor.
 */
#include "layers/layer.h"

typedef struct pool2d {
    sl_layer base;
    int kernel, stride, pad, ceil_mode, is_max;
} pool2d;

static sl_pool_desc pool_desc(const pool2d *p, sl_shape in, sl_shape out)
{
    sl_pool_desc d = {in.n, in.c, in.h, in.w, out.h, out.w,
                      p->kernel, p->kernel, p->stride, p->stride, p->pad, p->pad};
    return d;
}

static sl_status pool_infer(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                            sl_shape *out, sl_layer_cost *cost)
{
    const pool2d *p = (const pool2d *)l;
    (void)be;
    (void)n_in;
    int oh = sl_window_out(in[0].h, p->kernel, p->stride, p->pad, 1, p->ceil_mode);
    int ow = sl_window_out(in[0].w, p->kernel, p->stride, p->pad, 1, p->ceil_mode);
    if (oh < 1 || ow < 1)
        return sl_set_error(SL_ERR_SHAPE, "%s '%s': input %dx%d is smaller than its %dx%d window",
                       l->ops->type, sl_layer_label(l), in[0].h, in[0].w, p->kernel, p->kernel);
    *out = sl_shape_nchw(in[0].n, in[0].c, oh, ow);
    uint64_t count = sl_shape_count_sat(*out);
    uint64_t work = sl_mul3_sat(count, (uint64_t)p->kernel, (uint64_t)p->kernel);
    cost->fwd_flops = work;
    cost->bwd_flops = p->is_max ? count : work;
    cost->saved_bytes = p->is_max ? sl_mul_sat(count, sizeof(int32_t)) : 0;
    return SL_OK;
}

static void pool_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    pool2d *p = (pool2d *)l;
    sl_pool_desc d = pool_desc(p, a->in[0], a->out);
    if (p->is_max)
        ex->be->maxpool_forward(ex, &d, a->x[0], a->y, a->saved);
    else
        ex->be->avgpool_forward(ex, &d, a->x[0], a->y);
}

static void pool_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    pool2d *p = (pool2d *)l;
    if (!a->dx[0])
        return;
    sl_pool_desc d = pool_desc(p, a->in[0], a->out);
    if (p->is_max)
        ex->be->maxpool_backward(ex, &d, a->saved, a->dy, a->dx[0], a->accumulate[0]);
    else
        ex->be->avgpool_backward(ex, &d, a->dy, a->dx[0], a->accumulate[0]);
}

static const sl_layer_ops maxpool_ops = {
    .type = "MaxPool2d",
    .flags = SL_LAYER_PLANAR_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = pool_infer,
    .forward = pool_forward,
    .backward = pool_backward,
    .out_channels = sl_same_channels,
};

static const sl_layer_ops avgpool_ops = {
    .type = "AvgPool2d",
    .flags = SL_LAYER_PLANAR_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = pool_infer,
    .forward = pool_forward,
    .backward = pool_backward,
    .out_channels = sl_same_channels,
};

static sl_layer *pool_new(int kernel, int stride, int pad, int ceil_mode, int is_max)
{
    const char *what = is_max ? "sl_maxpool2d" : "sl_avgpool2d";
    if (kernel < 1 || stride < 1 || pad < 0 || pad > kernel / 2) {
        sl_set_error(SL_ERR_INVALID_ARG,
                     "%s: kernel %d and stride %d must be >= 1, padding %d in [0, kernel/2]", what,
                     kernel, stride, pad);
        return NULL;
    }
    pool2d *p = sl_alloc(sizeof *p, "a pooling layer");
    if (!p)
        return NULL;
    sl_layer_init(&p->base, is_max ? &maxpool_ops : &avgpool_ops);
    p->kernel = kernel;
    p->stride = stride;
    p->pad = pad;
    p->ceil_mode = ceil_mode;
    p->is_max = is_max;
    return &p->base;
}

sl_layer *sl_maxpool2d(int kernel, int stride, int pad) { return pool_new(kernel, stride, pad, 0, 1); }
sl_layer *sl_avgpool2d(int kernel, int stride, int pad) { return pool_new(kernel, stride, pad, 0, 0); }

sl_layer *sl_maxpool2d_with(const sl_maxpool2d_options *o)
{
    if (!o) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_maxpool2d_with: options are NULL");
        return NULL;
    }
    return pool_new(o->kernel, o->stride, o->pad, o->ceil_mode != 0, 1);
}
