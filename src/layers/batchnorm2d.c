/*
 * batchnorm2d.c — BatchNorm2d (layers stage).
 *
 * TRAIN normalises with the batch statistics, saves the batch mean and
 * inverse std (the saved state, 2C floats) and updates the running
 * statistics. REFORWARD (recompute during backward) applies the saved
 * statistics with the same arithmetic, so its output equals the TRAIN
 * output bit for bit, and leaves the running statistics alone: exact, and
 * the default. With bn_rescale (memonger's option) TRAIN and REFORWARD both
 * recompute the batch statistics and both update the running statistics
 * with momentum m' = 1 - sqrt(1 - m): two updates with m' decay the old
 * value by (1 - m')^2 = 1 - m, as one update with m does.
 *
 * FROZEN (sl_net_set_batchnorm_frozen, for fine-tuning): in training too the
 * layer normalises with its running statistics, as in evaluation, and
 * never updates them; gamma and beta still learn. Its forward saves the
 * running mean and invstd as the batch ones would be saved, so the
 * re-forward and the backward (dx = dy * gamma * invstd) run as usual.
 */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"

typedef struct batchnorm2d {
    sl_layer base;
    int channels;
    float momentum, eps;
    int frozen;
} batchnorm2d;

enum { BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR };

static sl_status bn_infer(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                          sl_shape *out, sl_layer_cost *cost)
{
    const batchnorm2d *bn = (const batchnorm2d *)l;
    (void)n_in;
    if (sl_check_channels(l, bn->channels, in[0].c))
        return SL_ERR_SHAPE;
    *out = in[0];
    uint64_t count = sl_shape_count_sat(in[0]);
    cost->fwd_flops = sl_mul_sat(5, count);
    cost->bwd_flops = sl_mul_sat(8, count);
    /* a GPU's partial sums and per-channel means: planned like any
     * workspace, since a backend allocates nothing of its own */
    int hw = in[0].h * in[0].w;
    cost->ws_fwd_bytes = be->batchnorm_forward_workspace_bytes
                             ? be->batchnorm_forward_workspace_bytes(be, in[0].n, in[0].c, hw)
                             : 0;
    cost->ws_bwd_bytes = be->batchnorm_backward_workspace_bytes
                             ? be->batchnorm_backward_workspace_bytes(be, in[0].n, in[0].c, hw)
                             : 0;
    cost->saved_bytes = 2 * (size_t)bn->channels * sizeof(float);
    return SL_OK;
}

/* memonger's momentum for a layer that runs twice per step; a schedule
 * that re-forwards a layer more than once (multi-level recursion) runs it
 * `runs` times, and (1 - m')^runs = 1 - m again. */
float sl_bn_rescaled_momentum(float m) { return 1.0f - sqrtf(1.0f - m); }

float sl_bn_rescaled_momentum_runs(float m, int runs)
{
    if (runs == 2)
        return sl_bn_rescaled_momentum(m);
    return 1.0f - (float)pow(1.0 - (double)m, 1.0 / runs);
}

/* relu_after on a path the backend has no joined op for (evaluation,
 * frozen statistics): the ReLU's own op on the output, in place. */
static void relu_tail(const sl_exec *e, const sl_fwd_args *a)
{
    if (a->relu_after)
        e->be->relu_forward(e, sl_shape_count(a->out), a->y, a->y);
}

static void bn_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    batchnorm2d *bn = (batchnorm2d *)l;
    sl_shape s = a->in[0];
    int hw = s.h * s.w, c0 = a->first_channel; /* a chunk of channels: from c0 */
    float *gamma = l->params[BN_WEIGHT].data + c0, *beta = l->params[BN_BIAS].data + c0;
    float *rmean = l->params[BN_RUNNING_MEAN].data + c0;
    float *rvar = l->params[BN_RUNNING_VAR].data + c0;
    float *mean = a->saved ? (float *)a->saved + c0 : NULL;
    float *invstd = mean ? mean + bn->channels : NULL;
    sl_exec e = sl_exec_for(ex, a->bf16);
    const sl_backend *be = ex->be;
    /* the executor sets relu_after only where the backend joins them */
    int relu = a->relu_after;

    if (a->pass == SL_PASS_EVAL) {
        be->batchnorm_forward_infer(&e, s.n, s.c, hw, a->x[0], gamma, beta, rmean, rvar, bn->eps,
                                    a->y, NULL, NULL);
        relu_tail(&e, a);
        return;
    }
    if (bn->frozen && a->pass == SL_PASS_TRAIN) {
        be->batchnorm_forward_infer(&e, s.n, s.c, hw, a->x[0], gamma, beta, rmean, rvar, bn->eps,
                                    a->y, mean, invstd);
        relu_tail(&e, a);
        return;
    }
    /* the re-forward (frozen: the saved running statistics, no rescale) */
    if (bn->frozen || (a->pass == SL_PASS_REFORWARD && !a->bn_rescale_momentum)) {
        (relu ? be->batchnorm_relu_forward_apply
              : be->batchnorm_forward_apply)(&e, s.n, s.c, hw, a->x[0], gamma, beta, mean, invstd,
                                             a->y);
        return;
    }
    float momentum = a->bn_rescale_momentum
                         ? sl_bn_rescaled_momentum_runs(bn->momentum, a->bn_rescale_momentum)
                         : bn->momentum;
    (relu ? be->batchnorm_relu_forward_train
          : be->batchnorm_forward_train)(&e, s.n, s.c, hw, a->x[0], gamma, beta, a->y, mean,
                                         invstd, rmean, rvar, momentum, bn->eps, a->ws);
}

static void bn_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    batchnorm2d *bn = (batchnorm2d *)l;
    sl_shape s = a->in[0];
    int c0 = a->first_channel; /* a chunk of channels: from c0 */
    const float *mean = (const float *)a->saved + c0, *invstd = mean + bn->channels;
    const float *gamma = l->params[BN_WEIGHT].data + c0;
    float *dgamma = l->params[BN_WEIGHT].grad + c0, *dbeta = l->params[BN_BIAS].grad + c0;
    sl_exec e = sl_exec_for(ex, a->bf16);
    if (a->relu_after) /* dy at the ReLU's output; set only where the backend joins them */
        ex->be->batchnorm_relu_backward(&e, s.n, s.c, s.h * s.w, a->x[0], a->dy, gamma,
                                        l->params[BN_BIAS].data + c0, mean, invstd, a->dx[0],
                                        a->accumulate[0], dgamma, dbeta, bn->frozen, a->ws);
    else
        ex->be->batchnorm_backward(&e, s.n, s.c, s.h * s.w, a->x[0], a->dy, gamma, mean, invstd,
                                   a->dx[0], a->accumulate[0], dgamma, dbeta, bn->frozen, a->ws);
}

static int bn_native_bf16(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                          sl_shape out, sl_layer_cost *cost)
{
    (void)l, (void)n_in, (void)in, (void)out, (void)cost;
    return sl_native_bf16_if(be, SL_BF16_BATCHNORM);
}

static int bn_out_channels(const sl_layer *l, int in_c)
{
    const batchnorm2d *bn = (const batchnorm2d *)l;
    return sl_check_channels(l, bn->channels, in_c) ? -1 : bn->channels;
}

const sl_layer_ops sl_batchnorm2d_ops = {
    .type = "BatchNorm2d",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_BWD_INPLACE | SL_LAYER_SAVED_KEPT |
             SL_LAYER_CHANNEL_CHUNKS | SL_LAYER_PLANAR_INPUT | SL_LAYER_JOINS_RELU |
             SL_LAYER_GRAPH_SAFE,
    .infer = bn_infer,
    .forward = bn_forward,
    .backward = bn_backward,
    .native_bf16 = bn_native_bf16,
    .out_channels = bn_out_channels,
};

int sl_batchnorm2d_set_frozen(sl_layer *l, int frozen)
{
    if (l->ops != &sl_batchnorm2d_ops)
        return 0;
    ((batchnorm2d *)l)->frozen = frozen != 0;
    return 1;
}

sl_layer *sl_batchnorm2d_with(const sl_batchnorm2d_options *o)
{
    if (!o) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_batchnorm2d_with: options are NULL");
        return NULL;
    }
    int channels = o->channels;
    float momentum = o->momentum, eps = o->eps;
    if (channels < 1 || !(momentum >= 0.0f && momentum <= 1.0f) || !(eps > 0.0f)) {
        sl_set_error(SL_ERR_INVALID_ARG,
                     "sl_batchnorm2d: channels %d must be >= 1, momentum %g in [0, 1], eps %g > 0",
                     channels, momentum, eps);
        return NULL;
    }
    batchnorm2d *bn = sl_zalloc(sizeof *bn, "a BatchNorm2d layer");
    if (!bn)
        return NULL;
    sl_layer_init(&bn->base, &sl_batchnorm2d_ops);
    bn->channels = channels;
    bn->momentum = momentum;
    bn->eps = eps;
    int d[1] = {channels};
    sl_layer_add_param(&bn->base, "weight", 1, d, SL_INIT_ONES, channels, 1);
    sl_layer_add_param(&bn->base, "bias", 1, d, SL_INIT_ZEROS, channels, 1);
    sl_layer_add_param(&bn->base, "running_mean", 1, d, SL_INIT_ZEROS, channels, 0);
    sl_layer_add_param(&bn->base, "running_var", 1, d, SL_INIT_ONES, channels, 0);
    return &bn->base;
}

sl_layer *sl_batchnorm2d(int channels)
{
    return sl_batchnorm2d_with(&(sl_batchnorm2d_options){channels, 0.1f, 1e-5f});
}
