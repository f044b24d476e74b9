/*
 * linear.c — Linear (layers stage): y = x W^T + b over the flattened
 * input, through the backend's GEMM (OpenBLAS / cuBLAS).
 */
#include "layers/layer.h"

typedef struct linear {
    sl_layer base;
    int in_features, out_features, bias;
} linear;

static sl_status linear_infer(const sl_layer *l, const sl_backend *be, int n_in,
                              const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    const linear *li = (const linear *)l;
    (void)be;
    (void)n_in;
    long features = (long)in[0].c * in[0].h * in[0].w;
    if (features != li->in_features)
        return sl_set_error(SL_ERR_SHAPE,
                            "Linear '%s' expects %d input features but receives %ld (%d x %d x %d)",
                       sl_layer_label(l), li->in_features, features, in[0].c, in[0].h, in[0].w);
    *out = sl_shape_nchw(in[0].n, li->out_features, 1, 1);
    uint64_t macs = sl_mul3_sat((uint64_t)in[0].n, (uint64_t)li->in_features,
                                (uint64_t)li->out_features);
    cost->fwd_flops = sl_mul_sat(2, macs);
    cost->bwd_flops = sl_mul_sat(4, macs);
    return SL_OK;
}

/* bf16 activations on the backend's bf16 GEMMs (SL_BF16_GEMM; layer.h's
 * sl_gemm_native_bf16): the weight [out, in] rounded to bf16 at the
 * workspace's start, the bias and the gradients of both float. */
static sl_gemm_bf16_layer gemms_of(const linear *li, int n)
{
    /* W [out, in] */
    return sl_gemm_bf16_layer_of(n, li->in_features, li->out_features, 1, li->bias);
}

static int linear_native_bf16(const sl_layer *l, const sl_backend *be, int n_in,
                              const sl_shape *in, sl_shape out, sl_layer_cost *cost)
{
    const linear *li = (const linear *)l;
    (void)n_in;
    sl_gemm_bf16_layer g = gemms_of(li, in[0].n);
    return sl_gemm_native_bf16(be, &g, sl_shape_count(in[0]) * sizeof(float),
                               sl_shape_count(out) * sizeof(float), cost);
}

static void linear_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    linear *li = (linear *)l;
    int n = a->in[0].n, f = li->in_features, o = li->out_features;
    if (a->bf16) {
        sl_gemm_bf16_layer g = gemms_of(li, n);
        sl_gemm_bf16_forward(ex, &g, l->params[0].data, a->x[0],
                             li->bias ? l->params[1].data : NULL, a->y, a->ws);
        return;
    }
    if (li->bias && ex->be->gemm_bias) { /* the bias in the GEMM's epilogue */
        ex->be->gemm_bias(ex, 0, 1, n, o, f, a->x[0], f, l->params[0].data, f, l->params[1].data,
                          a->y, o);
        return;
    }
    ex->be->gemm(ex, 0, 1, n, o, f, 1.0f, a->x[0], f, l->params[0].data, f, 0.0f, a->y, o);
    if (li->bias)
        ex->be->bias_add(ex, n, o, l->params[1].data, a->y);
}

static void linear_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    linear *li = (linear *)l;
    int n = a->in[0].n, f = li->in_features, o = li->out_features;
    if (a->bf16) {
        sl_gemm_bf16_layer g = gemms_of(li, n);
        sl_gemm_bf16_backward(ex, &g, l->params[0].data, l->params[0].grad, a->x[0], a->dy,
                              li->bias ? l->params[1].grad : NULL, n, a->dx[0],
                              a->accumulate[0], a->ws);
        return;
    }
    ex->be->gemm(ex, 1, 0, o, f, n, 1.0f, a->dy, o, a->x[0], f, 1.0f, l->params[0].grad, f);
    if (li->bias)
        ex->be->bias_backward(ex, n, o, a->dy, l->params[1].grad);
    if (a->dx[0])
        ex->be->gemm(ex, 0, 0, n, f, o, 1.0f, a->dy, o, l->params[0].data, f,
                     a->accumulate[0] ? 1.0f : 0.0f, a->dx[0], f);
}

static int linear_out_channels(const sl_layer *l, int in_c)
{
    const linear *li = (const linear *)l;
    /* The input's c x h x w features are a multiple of its channels; the
     * exact count is checked at the shape pass. */
    if (in_c > 0 && li->in_features % in_c != 0) {
        sl_set_error(SL_ERR_SHAPE, "Linear '%s' expects %d input features, which %d input channels "
                              "cannot give (features = channels x height x width)",
                sl_layer_label(l), li->in_features, in_c);
        return -1;
    }
    return li->out_features;
}

static const sl_layer_ops linear_ops = {
    .type = "Linear",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_COMPUTE_BOUND | SL_LAYER_BATCH_CHUNKS |
             SL_LAYER_PLANAR_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = linear_infer,
    .forward = linear_forward,
    .backward = linear_backward,
    .native_bf16 = linear_native_bf16,
    .out_channels = linear_out_channels,
};

sl_layer *sl_linear(int in_features, int out_features, int bias)
{
    if (in_features < 1 || out_features < 1) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_linear: in_features %d and out_features %d must be >= 1",
                     in_features, out_features);
        return NULL;
    }
    linear *li = sl_alloc(sizeof *li, "a Linear layer");
    if (!li)
        return NULL;
    sl_layer_init(&li->base, &linear_ops);
    li->in_features = in_features;
    li->out_features = out_features;
    li->bias = bias != 0;
    int wd[2] = {out_features, in_features};
    sl_layer_add_param(&li->base, "weight", 2, wd, SL_INIT_UNIFORM_FAN_IN, in_features, 1);
    if (li->bias) {
        int bd[1] = {out_features};
        sl_layer_add_param(&li->base, "bias", 1, bd, SL_INIT_UNIFORM_FAN_IN, in_features, 1);
    }
    return &li->base;
}
