/*
 * conv2d.c — Conv2d (layers stage): stride, padding, dilation, groups,
 * optional bias. Kernels come from the backend (im2col + sgemm on the CPU,
 * cuDNN on CUDA); the workspace each pass needs is declared here so the
 * planner can share it between steps.
 */
#include <stdlib.h>

#include "layers/layer.h"

typedef struct conv2d {
    sl_layer base;
    sl_conv2d_options o;
} conv2d;

static sl_conv_desc conv_desc(const conv2d *cv, sl_shape in, sl_shape out, int bf16)
{
    sl_conv_desc d = {in.n, in.c, in.h, in.w, out.c, out.h, out.w,
                      cv->o.kernel_h, cv->o.kernel_w, cv->o.stride_h, cv->o.stride_w,
                      cv->o.pad_h, cv->o.pad_w, cv->o.dilation_h, cv->o.dilation_w,
                      cv->o.groups, bf16};
    return d;
}

static void conv_workspaces(const sl_backend *be, const sl_conv_desc *d, sl_layer_cost *cost)
{
    cost->ws_fwd_bytes = be->conv2d_workspace_bytes(be, d, SL_CONV_FWD);
    size_t a = be->conv2d_workspace_bytes(be, d, SL_CONV_BWD_DATA);
    size_t b = be->conv2d_workspace_bytes(be, d, SL_CONV_BWD_FILTER);
    cost->ws_bwd_bytes = a > b ? a : b;
}

static sl_status conv_infer(const sl_layer *l, const sl_backend *be, int n_in,
                            const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    const conv2d *cv = (const conv2d *)l;
    (void)n_in;
    if (sl_check_channels(l, cv->o.in_channels, in[0].c))
        return SL_ERR_SHAPE;
    int oh = sl_window_out(in[0].h, cv->o.kernel_h, cv->o.stride_h, cv->o.pad_h, cv->o.dilation_h, 0);
    int ow = sl_window_out(in[0].w, cv->o.kernel_w, cv->o.stride_w, cv->o.pad_w, cv->o.dilation_w, 0);
    if (oh < 1 || ow < 1)
        return sl_set_error(SL_ERR_SHAPE,
                       "Conv2d '%s': input %dx%d is smaller than its %dx%d kernel (dilation %d, "
                       "padding %d)",
                       sl_layer_label(l), in[0].h, in[0].w, cv->o.kernel_h, cv->o.kernel_w,
                       cv->o.dilation_h, cv->o.pad_h);
    *out = sl_shape_nchw(in[0].n, cv->o.out_channels, oh, ow);
    sl_conv_desc d = conv_desc(cv, in[0], *out, 0);
    uint64_t taps = sl_mul3_sat((uint64_t)(cv->o.in_channels / cv->o.groups),
                                (uint64_t)cv->o.kernel_h, (uint64_t)cv->o.kernel_w);
    uint64_t macs = sl_mul_sat(sl_shape_count_sat(*out), taps);
    cost->fwd_flops = sl_mul_sat(2, macs);
    cost->bwd_flops = sl_mul_sat(4, macs);
    conv_workspaces(be, &d, cost);
    cost->saved_bytes = 0;
    if (cost->ws_fwd_bytes == SIZE_MAX || cost->ws_bwd_bytes == SIZE_MAX)
        return sl_set_error(sl_error_status() == SL_ERR_NOMEM ? SL_ERR_NOMEM : SL_ERR_BACKEND, "Conv2d '%s' (input %dx%dx%dx%d): %s", sl_layer_label(l),
                            in[0].n, in[0].c, in[0].h, in[0].w, sl_last_error());
    return SL_OK;
}

/* bf16 activations in the backend's own kernels, where it has them for
 * this geometry (oneDNN on a CPU with bf16 dot products) and they plan no
 * more than the float path would: each pass's workspace at most the float
 * copies it replaces (x and y forward; x, dy and dx backward) plus the
 * float workspace. A convolution with a bias keeps float copies (no
 * backend fuses it in bf16 yet). */
static int conv_native_bf16(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                            sl_shape out, sl_layer_cost *cost)
{
    const conv2d *cv = (const conv2d *)l;
    (void)n_in;
    if (cv->o.bias || !be->conv2d_native_bf16)
        return 0;
    sl_conv_desc d = conv_desc(cv, in[0], out, 1);
    if (!be->conv2d_native_bf16(be, &d))
        return 0;
    sl_layer_cost c = *cost;
    conv_workspaces(be, &d, &c);
    size_t x = sl_shape_count(in[0]) * sizeof(float), y = sl_shape_count(out) * sizeof(float);
    if (c.ws_fwd_bytes == SIZE_MAX || c.ws_bwd_bytes == SIZE_MAX ||
        c.ws_fwd_bytes > cost->ws_fwd_bytes + x + y ||
        c.ws_bwd_bytes > cost->ws_bwd_bytes + 2 * x + y)
        return 0;
    *cost = c;
    return 1;
}

static void conv_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    conv2d *cv = (conv2d *)l;
    sl_conv_desc d = conv_desc(cv, a->in[0], a->out, a->bf16);
    ex->be->conv2d_forward(ex, &d, a->x[0], l->params[0].data,
                           cv->o.bias ? l->params[1].data : NULL, a->y, a->ws);
}

static void conv_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    conv2d *cv = (conv2d *)l;
    sl_conv_desc d = conv_desc(cv, a->in[0], a->out, a->bf16);
    ex->be->conv2d_backward_filter(ex, &d, a->x[0], a->dy, l->params[0].grad,
                                   cv->o.bias ? l->params[1].grad : NULL, a->ws);
    if (a->dx[0])
        ex->be->conv2d_backward_data(ex, &d, l->params[0].data, a->dy, a->dx[0], a->accumulate[0],
                                     a->ws);
}

static int conv_out_channels(const sl_layer *l, int in_c)
{
    const conv2d *cv = (const conv2d *)l;
    return sl_check_channels(l, cv->o.in_channels, in_c) ? -1 : cv->o.out_channels;
}

static const sl_layer_ops conv_ops = {
    .type = "Conv2d",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_COMPUTE_BOUND | SL_LAYER_PLANAR_INPUT |
             SL_LAYER_GRAPH_SAFE,
    .infer = conv_infer,
    .forward = conv_forward,
    .backward = conv_backward,
    .native_bf16 = conv_native_bf16,
    .out_channels = conv_out_channels,
};

sl_layer *sl_conv2d_with(const sl_conv2d_options *o)
{
    if (!o) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_conv2d_with: options are NULL");
        return NULL;
    }
    if (o->in_channels < 1 || o->out_channels < 1 || o->kernel_h < 1 || o->kernel_w < 1 ||
        o->stride_h < 1 || o->stride_w < 1 || o->pad_h < 0 || o->pad_w < 0 ||
        o->dilation_h < 1 || o->dilation_w < 1 || o->groups < 1) {
        sl_set_error(SL_ERR_INVALID_ARG,
                "sl_conv2d: invalid options (in %d, out %d, kernel %dx%d, stride %dx%d, padding "
                "%dx%d, dilation %dx%d, groups %d): channels, kernel, stride, dilation and groups "
                "must be >= 1, padding >= 0",
                o->in_channels, o->out_channels, o->kernel_h, o->kernel_w, o->stride_h,
                o->stride_w, o->pad_h, o->pad_w, o->dilation_h, o->dilation_w, o->groups);
        return NULL;
    }
    if (o->in_channels % o->groups || o->out_channels % o->groups) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_conv2d: groups %d must divide in_channels %d and out_channels %d",
                     o->groups, o->in_channels, o->out_channels);
        return NULL;
    }
    conv2d *cv = sl_alloc(sizeof *cv, "a Conv2d layer");
    if (!cv)
        return NULL;
    sl_layer_init(&cv->base, &conv_ops);
    cv->o = *o;
    int cin = o->in_channels / o->groups;
    int dims[4] = {o->out_channels, cin, o->kernel_h, o->kernel_w};
    int fan_in = cin * o->kernel_h * o->kernel_w;
    /* torchvision's ResNet init: kaiming_normal_(mode="fan_out") uses
     * out_channels * kh * kw (groups ignored, as torch computes fan_out). */
    sl_layer_add_param(&cv->base, "weight", 4, dims, SL_INIT_KAIMING_NORMAL_FAN_OUT,
                       o->out_channels * o->kernel_h * o->kernel_w, 1);
    if (o->bias) {
        int bd[1] = {o->out_channels};
        sl_layer_add_param(&cv->base, "bias", 1, bd, SL_INIT_ZEROS, fan_in, 1);
    }
    return &cv->base;
}

sl_layer *sl_conv2d(int in_channels, int out_channels, int kernel, int stride, int pad)
{
    sl_conv2d_options o = {in_channels, out_channels, kernel, kernel, stride, stride,
                           pad, pad, 1, 1, 1, 0};
    return sl_conv2d_with(&o);
}
