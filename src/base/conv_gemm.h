/*
 * conv_gemm.h — a 1x1 convolution's filter gradient as batched GEMMs
 * (run stage, CUDA backend: cuda/cuda_conv.cu). A pure rule and split,
 * so that the CPU tests (test_conv_engine) check them without a GPU.
 *
 * cuDNN's deterministic filter-gradient engines are slow for 1x1
 * convolutions: on an H100 (2026-11-28, ResNet-152 b16, TF32 off) they
 * took 0.1-0.4 ms a pass where the same geometry's forward took
 * 0.02-0.07 ms: 15 ms of a 75 ms step over ResNet-152's 101 1x1
 * convolutions of stride 1 (the tuning log's pass times weighted by the
 * layers), most of what determinism costs there (the step took 63 ms
 * with non-deterministic engines); their products are about 166 GFLOP,
 * 2.5 ms at the H100's FP32 peak. With stride 1
 * and no padding a 1x1 convolution is a product per image: in NCHW,
 *
 *   dW[k x c] += sum over images i of dY_i[k x hw] X_i[c x hw]^T,
 *
 * so the filter gradient is cuBLAS's strided-batched GEMM over the
 * images (one product each, into a partial of k x c floats) followed by
 * a sum of the partials into dW in a fixed order (segments of 16
 * partials, then the segments): the same sums in the same order every
 * run, whatever the stream does, so the bits repeat.
 *
 * Where k x c is small and hw long (ResNet's first stage: 64 x 64 over
 * 3136 pixels), one product per image leaves most of the GPU idle, so
 * the pixels are cut into `chunks` pieces, each its own batched GEMM
 * and its own partials. Where the partials of every image would not fit
 * in the workspace cap, the images go in groups, each group's partials
 * summed into dW before the next (again a fixed order).
 *
 *   sl_conv_gemm_split sp;
 *   if (sl_conv_gemm_applies(&desc) && sl_conv_gemm_plan(n, k, c, hw, sms, cap, &sp))
 *       workspace = sp.workspace_bytes;
 */
#ifndef SL_CONV_GEMM_H
#define SL_CONV_GEMM_H

#include <stddef.h>
#include <string.h>

#include "base/backend.h"

/* How the filter gradient of a 1x1 convolution is cut. */
typedef struct sl_conv_gemm_split {
    int group;              /* images per batched GEMM (the last group may hold fewer) */
    int groups;             /* ceil(n / group) */
    int chunks;             /* pieces of the hw pixels, each a batched GEMM */
    int chunk;              /* pixels per piece (a multiple of 4 where hw allows; the last
                               piece may be shorter) */
    size_t workspace_bytes; /* the partials: group * chunks * k * c floats, in bytes */
} sl_conv_gemm_split;

/* 1 where geometry d's filter gradient is a product per image: a float
 * 1x1 convolution of stride 1, no padding, one group (its output has its
 * input's size, so dilation is moot). */
static inline int sl_conv_gemm_applies(const sl_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0 &&
           d->groups == 1 && !d->bf16 && d->oh == d->h && d->ow == d->w && d->n > 0 &&
           d->c > 0 && d->k > 0 && d->h > 0 && d->w > 0;
}

/* The split of n images of hw pixels, c input and k output channels, on
 * a device of `sms` multiprocessors, with at most cap bytes of partials,
 * into *out; 0 (out untouched) where even one image's k x c partial
 * exceeds the cap. The pixels are halved into more pieces while the
 * products (estimated as 128 x 128 output tiles per image and piece)
 * would not fill twice the multiprocessors, a piece keeps at least 64
 * pixels and there are at most 32 pieces; pieces start at multiples of 4
 * pixels (16-byte aligned where hw is a multiple of 4, as in ResNet's
 * planes). Pieces are dropped again
 * where their partials would not fit for one image; then as many images
 * go in a group as the cap holds. */
static inline int sl_conv_gemm_plan(int n, int k, int c, int hw, int sms, size_t cap,
                                    sl_conv_gemm_split *out)
{
    if (n < 1 || k < 1 || c < 1 || hw < 1)
        return 0;
    const size_t part = (size_t)k * (size_t)c * sizeof(float); /* one product's partial */
    if (part > cap)
        return 0;
    const long long tiles = (long long)((k + 127) / 128) * ((c + 127) / 128);
    const long long want = 2LL * (sms > 0 ? sms : 1);
    int chunks = 1;
    while (chunks < 32 && tiles * n * chunks < want && hw / (2 * chunks) >= 64)
        chunks *= 2;
    if ((size_t)chunks * part > cap)
        chunks = 1;
    int chunk = (hw + chunks - 1) / chunks;
    if (chunks > 1) {
        chunk = (chunk + 3) / 4 * 4; /* pieces start 16-byte aligned */
        chunks = (hw + chunk - 1) / chunk;
    }
    size_t per_image = (size_t)chunks * part;
    size_t fit = cap / per_image;
    int group = fit >= (size_t)n ? n : (int)fit;
    sl_conv_gemm_split sp;
    memset(&sp, 0, sizeof sp);
    sp.group = group;
    sp.groups = (n + group - 1) / group;
    sp.chunks = chunks;
    sp.chunk = chunk;
    sp.workspace_bytes = (size_t)group * per_image;
    *out = sp;
    return 1;
}

/* SL_CUDA_CONV_GEMM's value: 1 (unset, empty, "on" or "1": deterministic
 * instances, where cuDNN's filter-gradient engines are slow), 2 ("all":
 * every instance), 0 ("off" or "0": cuDNN everywhere), -1 for anything
 * else. */
static inline int sl_conv_gemm_mode(const char *v)
{
    if (!v || !*v || strcmp(v, "on") == 0 || strcmp(v, "1") == 0)
        return 1;
    if (strcmp(v, "all") == 0)
        return 2;
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
        return 0;
    return -1;
}

#endif
