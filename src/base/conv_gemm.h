/*
 * conv_gemm.h — a 1x1 convolution's passes as batched GEMMs
 * (run stage, CUDA backend: cuda/cuda_conv.cu). Pure rules and splits,
 * so that the CPU tests (test_conv_engine) check them without a GPU.
 *
 * cuDNN's deterministic filter-gradient engines are slow for 1x1
 * convolutions: on an H100 (2026-11-28, ResNet-152 b16, TF32 off) they
 * took 0.1-0.4 ms a pass where the same geometry's forward took
 * 0.02-0.07 ms: 15 ms of a 75 ms step over ResNet-152's 101 1x1
 * convolutions of stride 1 (the tuning log's pass times weighted by the
 * layers), most of what determinism costs there (the step took 63 ms
 * with non-deterministic engines); their products are about 166 GFLOP,
 * 2.5 ms at the H100's FP32 peak. With no padding a 1x1 convolution is
 * a product per image: in NCHW, with X_i the image's input taken at the
 * stride's points (c x ohw; X_i itself at stride 1),
 *
 *   dW[k x c] += sum over images i of dY_i[k x ohw] X_i[c x ohw]^T,
 *
 * so the filter gradient is cuBLAS's strided-batched GEMM over the
 * images (one product each, into a partial of k x c floats) followed by
 * a sum of the partials into dW in a fixed order (segments of 16
 * partials, then the segments): the same sums in the same order every
 * run, whatever the stream does, so the bits repeat. With a stride the
 * images' points are first gathered into a dense c x ohw copy each
 * (GEMMs read their sums' operands at a unit stride).
 *
 * Where k x c is small and hw long (ResNet's first stage: 64 x 64 over
 * 3136 pixels), one product per image leaves most of the GPU idle, so
 * the pixels are cut into `chunks` pieces, each its own batched GEMM
 * and its own partials. Where the partials (and gathered copies) of
 * every image would not fit in the workspace cap, the images go in
 * groups, each group's partials summed into dW before the next (again a
 * fixed order).
 *
 * The input gradient of a strided 1x1 convolution (ResNet's
 * downsampling shortcuts: 0.3-0.6 ms a pass with cuDNN's deterministic
 * engines on the same run, for 1.6 GFLOP at most) is the product
 * T_i[c x ohw] = W^T dY_i per image, one batched GEMM with no sum across
 * images (so its bits repeat by themselves), scattered onto the
 * stride's points of dX_i (zeros between them, or added to dX_i where
 * the pass accumulates); the T_i are the workspace, in groups of images
 * where they would pass the cap. Stride 1 keeps cuDNN's engines for the
 * forward and the input gradient by default: they ran at 20-26 TFLOPS
 * there (15 ms of the step over 170 GFLOP each way; the filter
 * gradient's engines at 11; the H100's FP32 peak is about 67).
 * SL_CUDA_CONV_GEMM_FWD=on takes those to cuBLAS too, to be timed
 * against them: the forward
 * Y_i[k x hw] = W X_i and the input gradient dX_i (+)= W^T dY_i, each one
 * batched GEMM over the images writing its output in place (no
 * workspace, no sum across images).
 *
 *   sl_conv_gemm_split sp;
 *   if (sl_conv_gemm_applies(&desc) && sl_conv_gemm_filter_plan(&desc, sms, cap, &sp))
 *       workspace = sp.workspace_bytes;
 */
#ifndef SL_CONV_GEMM_H
#define SL_CONV_GEMM_H

#include <stddef.h>
#include <string.h>

#include "base/backend.h"
#include "base/conv_engine.h"

/* How the filter gradient of a 1x1 convolution is cut. */
typedef struct sl_conv_gemm_split {
    int group;              /* images per batched GEMM (the last group may hold fewer) */
    int groups;             /* ceil(n / group) */
    int chunks;             /* pieces of the pixels, each a batched GEMM */
    int chunk;              /* pixels per piece (a multiple of 4 where hw allows; the last
                               piece may be shorter) */
    size_t gather_offset;   /* where the gathered inputs start in the workspace (bytes; the
                               partials' size rounded up to 256), 0 where none are gathered */
    size_t workspace_bytes; /* the partials, group * chunks * k * c floats, then (strided
                               geometries) the group's gathered inputs, group * c * ohw floats */
} sl_conv_gemm_split;

/* How the input gradient of a 1x1 convolution is cut: the products T_i
 * of `group` images at a time, group * c * ohw floats of workspace where
 * strided (none at stride 1: the products are dX itself). */
typedef struct sl_conv_gemm_data_split {
    int group, groups;
    size_t workspace_bytes;
} sl_conv_gemm_data_split;

/* 1 where geometry d's passes are products per image: a float 1x1
 * convolution without padding, one group, whose output has one point
 * per stride step of its input (oh = (h - 1) / sh + 1, likewise ow;
 * dilation is moot for 1x1). Which of its passes run as GEMMs:
 * sl_conv_gemm_passes. */
static inline int sl_conv_gemm_applies(const sl_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh >= 1 && d->sw >= 1 && d->ph == 0 && d->pw == 0 &&
           d->groups == 1 && !d->bf16 && d->n > 0 && d->c > 0 && d->k > 0 && d->h > 0 &&
           d->w > 0 && d->oh == (d->h - 1) / d->sh + 1 && d->ow == (d->w - 1) / d->sw + 1;
}

/* 1 where geometry d (sl_conv_gemm_applies) has a stride above 1 in
 * either direction: its input is gathered for the filter gradient, and
 * its input gradient is a product scattered onto the stride's points. */
static inline int sl_conv_gemm_strided(const sl_conv_desc *d)
{
    return d->sh > 1 || d->sw > 1;
}

/* The split of n images of hw pixels, c input and k output channels, on
 * a device of `sms` multiprocessors, with at most cap bytes of partials
 * and `extra` bytes of each image's own (its gathered input: 0 at
 * stride 1), into *out; 0 (out untouched) where even one image's k x c
 * partial and extra bytes exceed the cap. The pixels are halved into
 * more pieces while the products (estimated as 128 x 128 output tiles
 * per image and piece) would not fill twice the multiprocessors, a piece
 * keeps at least 64 pixels and there are at most 32 pieces; pieces start
 * at multiples of 4 pixels (16-byte aligned where hw is a multiple of 4,
 * as in ResNet's planes). Pieces are dropped again where their partials
 * would not fit for one image; then as many images go in a group as the
 * cap holds. */
static inline int sl_conv_gemm_plan_extra(int n, int k, int c, int hw, int sms, size_t cap,
                                          size_t extra, sl_conv_gemm_split *out)
{
    if (n < 1 || k < 1 || c < 1 || hw < 1)
        return 0;
    const size_t part = (size_t)k * (size_t)c * sizeof(float); /* one product's partial */
    const size_t pad = extra ? 256 : 0; /* the gathered inputs start 256-byte aligned */
    if (part + extra + pad > cap || part + extra + pad < part)
        return 0;
    const long long tiles = (long long)((k + 127) / 128) * ((c + 127) / 128);
    const long long want = 2LL * (sms > 0 ? sms : 1);
    int chunks = 1;
    while (chunks < 32 && tiles * n * chunks < want && hw / (2 * chunks) >= 64)
        chunks *= 2;
    if ((size_t)chunks * part + extra + pad > cap)
        chunks = 1;
    int chunk = (hw + chunks - 1) / chunks;
    if (chunks > 1) {
        chunk = (chunk + 3) / 4 * 4; /* pieces start 16-byte aligned */
        chunks = (hw + chunk - 1) / chunk;
    }
    const size_t per_image = (size_t)chunks * part + extra;
    const size_t fit = (cap - pad) / per_image;
    const int group = fit >= (size_t)n ? n : (int)fit;
    const size_t parts = (size_t)group * chunks * part;
    sl_conv_gemm_split sp;
    memset(&sp, 0, sizeof sp);
    sp.group = group;
    sp.groups = (n + group - 1) / group;
    sp.chunks = chunks;
    sp.chunk = chunk;
    sp.gather_offset = extra ? (parts + 255) / 256 * 256 : 0;
    sp.workspace_bytes = extra ? sp.gather_offset + (size_t)group * extra : parts;
    *out = sp;
    return 1;
}

/* sl_conv_gemm_plan_extra without gathered inputs (stride 1). */
static inline int sl_conv_gemm_plan(int n, int k, int c, int hw, int sms, size_t cap,
                                    sl_conv_gemm_split *out)
{
    return sl_conv_gemm_plan_extra(n, k, c, hw, sms, cap, 0, out);
}

/* The filter gradient's split for geometry d (sl_conv_gemm_applies):
 * over its output's pixels, with each image's gathered input (c x ohw
 * floats) in the workspace where d is strided. */
static inline int sl_conv_gemm_filter_plan(const sl_conv_desc *d, int sms, size_t cap,
                                           sl_conv_gemm_split *out)
{
    const size_t ohw = (size_t)d->oh * (size_t)d->ow;
    const size_t extra = sl_conv_gemm_strided(d) ? (size_t)d->c * ohw * sizeof(float) : 0;
    if (ohw > (size_t)0x7fffffff)
        return 0;
    return sl_conv_gemm_plan_extra(d->n, d->k, d->c, (int)ohw, sms, cap, extra, out);
}

/* The input gradient's split for 1x1 geometry d: strided, as many
 * images' products (c x ohw floats each) as fit in cap; at stride 1 all
 * the images in one group and no workspace (the products are dX itself);
 * into *out. 0 (out untouched) where d is not a 1x1 geometry
 * (sl_conv_gemm_applies) or one image's product exceeds the cap. */
static inline int sl_conv_gemm_data_plan(const sl_conv_desc *d, size_t cap,
                                         sl_conv_gemm_data_split *out)
{
    if (!sl_conv_gemm_applies(d))
        return 0;
    if (!sl_conv_gemm_strided(d)) {
        out->group = d->n;
        out->groups = 1;
        out->workspace_bytes = 0;
        return 1;
    }
    const size_t per_image = (size_t)d->c * d->oh * d->ow * sizeof(float);
    if (per_image > cap || (size_t)d->oh * d->ow > (size_t)0x7fffffff)
        return 0;
    const size_t fit = cap / per_image;
    sl_conv_gemm_data_split sp;
    sp.group = fit >= (size_t)d->n ? d->n : (int)fit;
    sp.groups = (d->n + sp.group - 1) / sp.group;
    sp.workspace_bytes = (size_t)sp.group * per_image;
    *out = sp;
    return 1;
}

/* SL_CUDA_CONV_GEMM's value: 1 (unset, empty, "on" or "1": deterministic
 * instances, where cuDNN's engines for these passes are slow), 2 ("all":
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

/* Which passes of geometry d run as GEMMs, as bits 1 << sl_conv_pass, in
 * an instance of SL_CUDA_CONV_GEMM mode `mode` (sl_conv_gemm_mode: 1 in
 * deterministic instances only, 2 in every one), deterministic or not,
 * with strided geometries among them (`strided_on`,
 * SL_CUDA_CONV_GEMM_STRIDED) and the stride-1 forward and input gradient
 * (`fwd_on`, SL_CUDA_CONV_GEMM_FWD=on): the filter gradient of every 1x1
 * geometry (sl_conv_gemm_applies), the input gradient of the strided
 * ones, and with fwd_on both other passes of the stride-1 ones. A pass
 * whose split does not fit the cap stays on cuDNN even so. */
static inline unsigned sl_conv_gemm_passes(const sl_conv_desc *d, int mode, int deterministic,
                                           int strided_on, int fwd_on)
{
    if (mode <= (deterministic ? 0 : 1) || !sl_conv_gemm_applies(d))
        return 0;
    const int strided = sl_conv_gemm_strided(d);
    if (strided && !strided_on)
        return 0;
    unsigned passes = 1u << SL_CONV_BWD_FILTER;
    if (strided || fwd_on)
        passes |= 1u << SL_CONV_BWD_DATA;
    if (!strided && fwd_on)
        passes |= 1u << SL_CONV_FWD;
    return passes;
}

/* The default cap on a GEMM pass's workspace (partials, gathered inputs,
 * products): the size of cuDNN's own workspaces for those passes (17-78
 * MB on ResNet-152 b16). */
#define SL_CONV_GEMM_CAP_DEFAULT ((size_t)64 << 20)

/* SL_CUDA_CONV_GEMM_CAP_KIB's value in bytes: the default where unset or
 * empty, else a whole number of KiB from 1 to 4194304 (4 GiB); 0 for
 * anything else. A smaller cap cuts the images into more groups (and
 * leaves a geometry whose one image does not fit on cuDNN). */
static inline size_t sl_conv_gemm_cap(const char *v)
{
    if (!v || !*v)
        return SL_CONV_GEMM_CAP_DEFAULT;
    long kib = sl_decimal_at_most(v, 4194304);
    return kib >= 1 ? (size_t)kib << 10 : 0;
}

#endif
