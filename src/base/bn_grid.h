/*
 * bn_grid.h — how a GPU splits BatchNorm's per-channel sums into partial
 * sums (run stage; the plan reserves their scratch through the backend's
 * batchnorm_*_workspace_bytes). Plain arithmetic that C and nvcc both
 * read, so a CPU test checks what the CUDA kernels in cuda_norm.cu use.
 *
 * A channel holds n planes of hw values. Its sum is split into `parts`
 * partial sums: hw into `slices` ranges of `slice_len` values (a multiple
 * of 32, so a warp reads whole cache lines), the images into
 * `image_groups` residue classes (group q takes images q, q + groups,
 * ...). Part p is (q = p / slices, s = p % slices). The grid is a pure
 * function of (n, c, hw), never of the device, so the partial sums, and
 * the fixed-order totals over them, are the same bits on every GPU and
 * every call.
 */
#ifndef SL_BN_GRID_H
#define SL_BN_GRID_H

#include <stddef.h>

/* Blocks the statistics aim for over all channels (an H100 has 132 SMs,
 * several 256-thread blocks each), threads per block, and the fewest
 * values a block is given before the split stops (a tiny layer is not
 * spread over blocks that would each read a few values). */
#define SL_BN_GRID_TARGET_BLOCKS 1024
#define SL_BN_GRID_THREADS 256
#define SL_BN_GRID_MIN_VALUES 4096

typedef struct sl_bn_grid {
    int parts;        /* partial sums per channel: slices * image_groups */
    int slices;       /* ranges of hw */
    int slice_len;    /* values per range (the last may be shorter) */
    int image_groups; /* image residue classes */
} sl_bn_grid;

static inline sl_bn_grid sl_bn_grid_for(int n, int c, int hw)
{
    sl_bn_grid g;
    if (n < 1 || c < 1 || hw < 1) { /* nothing to sum: one empty part */
        g.image_groups = g.slices = g.parts = 1;
        g.slice_len = 32;
        return g;
    }
    long long per_channel = (long long)n * hw;
    long long want = (SL_BN_GRID_TARGET_BLOCKS + c - 1) / c;
    long long cap = per_channel / SL_BN_GRID_MIN_VALUES;
    if (want > cap)
        want = cap;
    if (want < 1)
        want = 1;
    g.image_groups = (int)(want < n ? want : n);
    long long slices = (want + g.image_groups - 1) / g.image_groups;
    long long max_slices = ((long long)hw + SL_BN_GRID_THREADS - 1) / SL_BN_GRID_THREADS;
    if (slices > max_slices)
        slices = max_slices;
    if (slices < 1)
        slices = 1;
    long long len = ((long long)hw + slices - 1) / slices;
    len = (len + 31) / 32 * 32;
    g.slice_len = (int)len;
    g.slices = (int)(((long long)hw + len - 1) / len); /* no empty slice */
    if (g.slices < 1)
        g.slices = 1;
    g.parts = g.slices * g.image_groups;
    return g;
}

/* Bytes of the partial sums: a pair of doubles per part per channel. */
static inline size_t sl_bn_grid_partials_bytes(int n, int c, int hw)
{
    sl_bn_grid g = sl_bn_grid_for(n, c, hw);
    return (size_t)c * (size_t)g.parts * 2 * sizeof(double);
}

#endif
