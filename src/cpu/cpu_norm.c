/*
 * cpu_norm.c — BatchNorm2d kernels on the CPU (run stage): training
 * forward with batch statistics, forward with given statistics (eval, or
 * re-forward of a checkpointed segment) and backward. The per-element
 * rules (normalise, the backward's dx, invstd, the running statistics) are
 * base/element.h's, shared with cuda_norm.cu; the channel sums here are
 * the CPU's own reduction.
 *
 * Each channel is handled by one thread; its sums are accumulated in double
 * over a fixed set of 8 partial sums, so the statistics are the same bits on
 * every call. The training forward and the apply forward share
 * bn_normalise_channel, so a re-forward with the saved statistics
 * reproduces the training output exactly.
 */
#include <math.h>

#include "base/element.h"
#include "cpu/cpu.h"

#define BN_LANES 8

static double bn_lanes_total(const double lane[BN_LANES])
{
    double t = 0.0;
    for (int u = 0; u < BN_LANES; u++)
        t += lane[u];
    return t;
}

#define BN_T float
#define BN_LD(v) (v)
#define BN_ST(v) (v)
#define BN_FN(name) name##_f32
#include "cpu/cpu_norm_kernels.h"
#undef BN_T
#undef BN_LD
#undef BN_ST
#undef BN_FN

#define BN_T uint16_t
#define BN_LD(v) sl_bf16_widen(v)
#define BN_ST(v) sl_bf16_round(v)
#define BN_FN(name) name##_bf16
#include "cpu/cpu_norm_kernels.h"
#undef BN_T
#undef BN_LD
#undef BN_ST
#undef BN_FN

/* The table's kernels: the float ones, or the bf16 ones when the call's
 * activations are bf16 (ex->bf16; the weights and statistics are float
 * either way). */
void sl_cpu_batchnorm_forward_train(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta, float *y,
                                    float *save_mean, float *save_invstd, float *running_mean,
                                    float *running_var, float momentum, float eps, void *ws)
{
    if (ex->bf16)
        bn_forward_train_bf16(ex, n, c, hw, (const uint16_t *)x, gamma, beta, (uint16_t *)y,
                              save_mean, save_invstd, running_mean, running_var, momentum, eps,
                              ws, 0);
    else
        bn_forward_train_f32(ex, n, c, hw, x, gamma, beta, y, save_mean, save_invstd,
                             running_mean, running_var, momentum, eps, ws, 0);
}

/* The joined ReLU (batchnorm_relu_*): float activations only, as the
 * executor joins only steps on float storage. */
void sl_cpu_batchnorm_relu_forward_train(const sl_exec *ex, int n, int c, int hw, const float *x,
                                         const float *gamma, const float *beta, float *y,
                                         float *save_mean, float *save_invstd,
                                         float *running_mean, float *running_var, float momentum,
                                         float eps, void *ws)
{
    bn_forward_train_f32(ex, n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                         running_var, momentum, eps, ws, 1);
}

void sl_cpu_batchnorm_forward_apply(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta, const float *mean,
                                    const float *invstd, float *y)
{
    if (ex->bf16)
        bn_forward_apply_bf16(ex, n, c, hw, (const uint16_t *)x, gamma, beta, mean, invstd,
                              (uint16_t *)y, 0);
    else
        bn_forward_apply_f32(ex, n, c, hw, x, gamma, beta, mean, invstd, y, 0);
}

void sl_cpu_batchnorm_relu_forward_apply(const sl_exec *ex, int n, int c, int hw, const float *x,
                                         const float *gamma, const float *beta, const float *mean,
                                         const float *invstd, float *y)
{
    bn_forward_apply_f32(ex, n, c, hw, x, gamma, beta, mean, invstd, y, 1);
}

void sl_cpu_batchnorm_forward_infer(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var, float eps,
                                    float *y, float *save_mean, float *save_invstd)
{
    if (ex->bf16)
        bn_forward_infer_bf16(ex, n, c, hw, (const uint16_t *)x, gamma, beta, running_mean,
                              running_var, eps, (uint16_t *)y, save_mean, save_invstd);
    else
        bn_forward_infer_f32(ex, n, c, hw, x, gamma, beta, running_mean, running_var, eps, y,
                             save_mean, save_invstd);
}

void sl_cpu_batchnorm_backward(const sl_exec *ex, int n, int c, int hw, const float *x,
                               const float *dy, const float *gamma, const float *save_mean,
                               const float *save_invstd, float *dx, int accumulate, float *dgamma,
                               float *dbeta, int frozen, void *ws)
{
    if (ex->bf16)
        bn_backward_bf16(ex, n, c, hw, (const uint16_t *)x, (const uint16_t *)dy, gamma, NULL,
                         save_mean, save_invstd, (uint16_t *)dx, accumulate, dgamma, dbeta, frozen,
                         ws, 0);
    else
        bn_backward_f32(ex, n, c, hw, x, dy, gamma, NULL, save_mean, save_invstd, dx, accumulate,
                        dgamma, dbeta, frozen, ws, 0);
}

void sl_cpu_batchnorm_relu_backward(const sl_exec *ex, int n, int c, int hw, const float *x,
                                    const float *dy, const float *gamma, const float *beta,
                                    const float *save_mean, const float *save_invstd, float *dx,
                                    int accumulate, float *dgamma, float *dbeta, int frozen,
                                    void *ws)
{
    bn_backward_f32(ex, n, c, hw, x, dy, gamma, beta, save_mean, save_invstd, dx, accumulate,
                    dgamma, dbeta, frozen, ws, 1);
}
