/*
 * conv1d.c — Hugging Face GPT-2's Conv1D (layers stage): a linear map of
 * each token, y = x W + b, with the weight stored [in, out] (the transpose
 * of Linear's), over the rows of a sequence tensor {B, in, T, 1} (or
 * feature vectors {N, in, 1, 1}), through the backend's GEMM.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "layers/layer.h"

typedef struct conv1d {
    sl_layer base;
    int in_features, out_features;
} conv1d;

#define CONV1D_INIT_STD 0.02f /* GPT-2's initializer_range */

static sl_status conv1d_infer(const sl_layer *l, const sl_backend *be, int n_in,
                              const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    const conv1d *cv = (const conv1d *)l;
    (void)be;
    (void)n_in;
    if (in[0].c != cv->in_features)
        return sl_set_error(SL_ERR_SHAPE,
                            "Conv1D '%s' expects %d input channels (features per token) but "
                            "receives %d",
                            sl_layer_label(l), cv->in_features, in[0].c);
    *out = in[0]; /* NHWC: the shape pass's rule for SL_LAYER_ROWS_INPUT */
    out->c = cv->out_features;
    uint64_t rows = sl_mul3_sat((uint64_t)in[0].n, (uint64_t)in[0].h, (uint64_t)in[0].w);
    uint64_t macs = sl_mul3_sat(rows, (uint64_t)cv->in_features, (uint64_t)cv->out_features);
    cost->fwd_flops = sl_mul_sat(2, macs);
    cost->bwd_flops = sl_mul_sat(4, macs);
    return SL_OK;
}

/* ---- bf16 activations on the backend's bf16 GEMMs (SL_BF16_GEMM) ----
 *
 * x, y, dy and dx stay bf16; the weight is rounded to bf16 (nearest even)
 * into the workspace for the forward and the input gradient; the weight
 * and bias gradients are summed in float (layer.c's sl_gemm_bf16_*). */
static sl_gemm_bf16_layer gemms_of(int rows, int f, int o)
{
    return sl_gemm_bf16_layer_of(rows, f, o, 0, 1); /* W [in, out], a bias */
}

/* Yes where the backend has bf16 GEMMs for all the products and they plan
 * no more than the float copies (Conv1D's float path has no workspace). */
static int conv1d_native_bf16(const sl_layer *l, const sl_backend *be, int n_in,
                              const sl_shape *in, sl_shape out, sl_layer_cost *cost)
{
    const conv1d *cv = (const conv1d *)l;
    (void)n_in;
    uint64_t rows = sl_mul3_sat((uint64_t)in[0].n, (uint64_t)in[0].h, (uint64_t)in[0].w);
    if (rows > INT_MAX)
        return 0;
    sl_gemm_bf16_layer g = gemms_of((int)rows, cv->in_features, cv->out_features);
    return sl_gemm_native_bf16(be, &g, sl_shape_count(in[0]) * sizeof(float),
                               sl_shape_count(out) * sizeof(float), cost);
}

static void conv1d_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    conv1d *cv = (conv1d *)l;
    int rows = a->in[0].n * a->in[0].h * a->in[0].w, f = cv->in_features, o = cv->out_features;
    if (a->bf16) {
        sl_gemm_bf16_layer g = gemms_of(rows, f, o);
        sl_gemm_bf16_forward(ex, &g, l->params[0].data, a->x[0], l->params[1].data, a->y, a->ws);
        return;
    }
    if (ex->be->gemm_bias) /* the bias in the GEMM's epilogue */
        ex->be->gemm_bias(ex, 0, 0, rows, o, f, a->x[0], f, l->params[0].data, o,
                          l->params[1].data, a->y, o);
    else {
        ex->be->gemm(ex, 0, 0, rows, o, f, 1.0f, a->x[0], f, l->params[0].data, o, 0.0f, a->y, o);
        ex->be->bias_add(ex, rows, o, l->params[1].data, a->y);
    }
}

static void conv1d_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    conv1d *cv = (conv1d *)l;
    int rows = a->in[0].n * a->in[0].h * a->in[0].w, f = cv->in_features, o = cv->out_features;
    if (a->bf16) {
        sl_gemm_bf16_layer g = gemms_of(rows, f, o);
        sl_gemm_bf16_backward(ex, &g, l->params[0].data, l->params[0].grad, a->x[0], a->dy,
                              l->params[1].grad, rows, a->dx[0], a->accumulate[0], a->ws);
        return;
    }
    /* dW[in, out] += x^T dy; db += column sums of dy; dx (+)= dy W^T */
    ex->be->gemm(ex, 1, 0, f, o, rows, 1.0f, a->x[0], f, a->dy, o, 1.0f, l->params[0].grad, o);
    ex->be->bias_backward(ex, rows, o, a->dy, l->params[1].grad);
    if (a->dx[0])
        ex->be->gemm(ex, 0, 1, rows, f, o, 1.0f, a->dy, o, l->params[0].data, o,
                     a->accumulate[0] ? 1.0f : 0.0f, a->dx[0], f);
}

static int conv1d_out_channels(const sl_layer *l, int in_c)
{
    const conv1d *cv = (const conv1d *)l;
    return sl_check_channels(l, cv->in_features, in_c) ? -1 : cv->out_features;
}

static const sl_layer_ops conv1d_ops = {
    .type = "Conv1D",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_COMPUTE_BOUND | SL_LAYER_ROW_CHUNKS |
             SL_LAYER_ROWS_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = conv1d_infer,
    .forward = conv1d_forward,
    .backward = conv1d_backward,
    .native_bf16 = conv1d_native_bf16,
    .out_channels = conv1d_out_channels,
};

sl_layer *sl_conv1d(int in_features, int out_features)
{
    if (in_features < 1 || out_features < 1) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_conv1d: in_features %d and out_features %d must be >= 1",
                     in_features, out_features);
        return NULL;
    }
    conv1d *cv = sl_alloc(sizeof *cv, "a Conv1D layer");
    if (!cv)
        return NULL;
    sl_layer_init(&cv->base, &conv1d_ops);
    cv->in_features = in_features;
    cv->out_features = out_features;
    int wd[2] = {in_features, out_features};
    int w = sl_layer_add_param(&cv->base, "weight", 2, wd, SL_INIT_NORMAL, in_features, 1);
    cv->base.params[w].std = CONV1D_INIT_STD;
    int bd[1] = {out_features};
    sl_layer_add_param(&cv->base, "bias", 1, bd, SL_INIT_ZEROS, in_features, 1);
    return &cv->base;
}

int sl_conv1d_set_init_std(sl_layer *l, float std)
{
    if (!l || l->ops != &conv1d_ops) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_conv1d_set_init_std: '%s' is not a Conv1D layer",
                     l ? sl_layer_label(l) : "(null)");
        return -1;
    }
    if (!(std > 0.0f) || !isfinite(std)) {
        sl_set_error(SL_ERR_INVALID_ARG,
                     "sl_conv1d_set_init_std: the standard deviation %g of Conv1D '%s' must be "
                     "positive and finite",
                     (double)std, sl_layer_label(l));
        return -1;
    }
    l->params[0].std = std;
    return 0;
}
