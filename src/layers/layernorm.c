/*
 * layernorm.c — LayerNorm over the channels of each token (layers stage),
 * as PyTorch's nn.LayerNorm(C, eps): every row of a sequence tensor (rows =
 * n x h x w, see sublinear/layers.h) is normalised with its own mean and
 * biased variance, then scaled by "weight" and shifted by "bias".
 *
 * A training forward and a re-forward keep each row's mean and rstd in the
 * saved state for the backward; the statistics are a pure function of the
 * row, so a re-forward writes the same bits and the state need not be kept
 * from the first forward (unlike BatchNorm's).
 */
#include <math.h>

#include "layers/layer.h"

typedef struct layernorm {
    sl_layer base;
    int channels;
    float eps;
} layernorm;

static size_t layernorm_rows(sl_shape s) { return (size_t)s.n * s.h * s.w; }

static sl_status layernorm_infer(const sl_layer *l, const sl_backend *be, int n_in,
                                 const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    const layernorm *ln = (const layernorm *)l;
    (void)be;
    (void)n_in;
    if (in[0].c != ln->channels)
        return sl_set_error(SL_ERR_SHAPE,
                            "LayerNorm '%s' normalises %d channels but its input has %d",
                            sl_layer_label(l), ln->channels, in[0].c);
    *out = in[0];
    size_t rows = layernorm_rows(in[0]);
    cost->fwd_flops = sl_mul_sat(8, sl_shape_count_sat(in[0]));
    cost->bwd_flops = sl_mul_sat(12, sl_shape_count_sat(in[0]));
    cost->saved_bytes = 2 * rows * sizeof(float);
    return SL_OK;
}

static void layernorm_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    layernorm *ln = (layernorm *)l;
    int rows = (int)layernorm_rows(a->in[0]);
    float *mean = a->saved ? (float *)a->saved : NULL;
    float *rstd = mean ? mean + rows : NULL;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->layernorm_forward(&e, rows, ln->channels, a->x[0], l->params[0].data,
                              l->params[1].data, ln->eps, a->y, mean, rstd);
}

static void layernorm_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    layernorm *ln = (layernorm *)l;
    int rows = (int)layernorm_rows(a->in[0]);
    const float *mean = (const float *)a->saved;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->layernorm_backward(&e, rows, ln->channels, a->x[0], a->dy, l->params[0].data, mean,
                               mean + rows, a->dx[0], a->accumulate[0], l->params[0].grad,
                               l->params[1].grad);
}

/* bf16 rows in the backend's own kernels (SL_BF16_LAYERNORM), rows of at
 * most SL_BF16_ROW_MAX channels: the copies' bits without the copies. */
static int layernorm_native_bf16(const sl_layer *l, const sl_backend *be, int n_in,
                                 const sl_shape *in, sl_shape out, sl_layer_cost *cost)
{
    const layernorm *ln = (const layernorm *)l;
    (void)n_in, (void)in, (void)out, (void)cost;
    return ln->channels <= SL_BF16_ROW_MAX && sl_native_bf16_if(be, SL_BF16_LAYERNORM);
}

static int layernorm_out_channels(const sl_layer *l, int in_c)
{
    const layernorm *ln = (const layernorm *)l;
    return sl_check_channels(l, ln->channels, in_c) ? -1 : in_c;
}

static const sl_layer_ops layernorm_ops = {
    .type = "LayerNorm",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_BWD_INPLACE | SL_LAYER_ROWS_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = layernorm_infer,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .native_bf16 = layernorm_native_bf16,
    .out_channels = layernorm_out_channels,
};

sl_layer *sl_layernorm(int channels, float eps)
{
    if (channels < 1 || !(eps > 0.0f) || !isfinite(eps)) {
        sl_set_error(SL_ERR_INVALID_ARG,
                     "sl_layernorm: channels %d must be >= 1 and eps %g positive and finite",
                     channels, (double)eps);
        return NULL;
    }
    layernorm *ln = sl_alloc(sizeof *ln, "a LayerNorm layer");
    if (!ln)
        return NULL;
    sl_layer_init(&ln->base, &layernorm_ops);
    ln->channels = channels;
    ln->eps = eps;
    int d[1] = {channels};
    sl_layer_add_param(&ln->base, "weight", 1, d, SL_INIT_ONES, channels, 1);
    sl_layer_add_param(&ln->base, "bias", 1, d, SL_INIT_ZEROS, channels, 1);
    return &ln->base;
}
