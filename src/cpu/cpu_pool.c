/*
 * cpu_pool.c — pooling kernels on the CPU (run stage): max pooling with
 * argmax indices, average pooling (padding counted, PyTorch's
 * count_include_pad=True) and global average pooling, forward and backward.
 *
 * Windows, the max rule and the averages are base/element.h's, shared with
 * cuda_pool.cu. Work is split over (image, channel) planes only: pooling windows may
 * overlap, so every plane's gradient is scattered by a single thread in a
 * fixed order.
 */
#include <math.h>
#include <string.h>

#include "base/element.h"
#include "cpu/cpu.h"

static int pool_par(const sl_pool_desc *d)
{
    return (double)d->n * d->c * d->oh * d->ow * d->kh * d->kw >= CPU_PAR_MIN;
}

/* The output columns [lo, hi) whose window column kj lands inside [0, w). */
static void pool_col_range(const sl_pool_desc *d, int kj, int *lo, int *hi)
{
    int off = kj - d->pw;
    int a = off < 0 ? (-off + d->sw - 1) / d->sw : 0;
    int b = d->w - 1 - off < 0 ? 0 : (d->w - 1 - off) / d->sw + 1;
    *lo = a < d->ow ? a : d->ow;
    *hi = b < d->ow ? b : d->ow;
}

/* One output row of max pooling. Taps are visited in window order (row by
 * row), each over the whole output row, so the strict comparison keeps the
 * first maximum; a NaN wins as in PyTorch. Each argmax starts at its
 * window's first valid position, so a window of -inf still names a cell
 * inside it. ar may be NULL. */
static void maxpool_row(const sl_pool_desc *d, const float *xp, int oy, float *yr, int32_t *ar)
{
    int y0, y1;
    sl_pool_window(oy, d->sh, d->ph, d->kh, d->h, &y0, &y1);
    int ya = sl_pool_first(oy, d->sh, d->ph, d->h);
    for (int ox = 0; ox < d->ow; ox++) {
        yr[ox] = -INFINITY;
        if (ar)
            ar[ox] = ya * d->w + sl_pool_first(ox, d->sw, d->pw, d->w);
    }
    for (int iy = y0; iy < y1; iy++) {
        const float *row = xp + (size_t)iy * d->w;
        int32_t base = iy * d->w;
        for (int kj = 0; kj < d->kw; kj++) {
            int lo, hi, off = kj - d->pw, sw = d->sw;
            pool_col_range(d, kj, &lo, &hi);
            if (ar) {
                for (int ox = lo; ox < hi; ox++) {
                    int ix = ox * sw + off;
                    float v = row[ix], b = yr[ox];
                    int take = sl_maxpool_takes(v, b);
                    yr[ox] = take ? v : b;
                    ar[ox] = take ? base + ix : ar[ox];
                }
            } else {
                for (int ox = lo; ox < hi; ox++) {
                    float v = row[ox * sw + off], b = yr[ox];
                    yr[ox] = sl_maxpool_takes(v, b) ? v : b;
                }
            }
        }
    }
}

void sl_cpu_maxpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y,
                            int32_t *argmax)
{
    int planes = d->n * d->c;
    size_t hw = (size_t)d->h * d->w, ohw = (size_t)d->oh * d->ow;
    SL_PARALLEL_FOR(cpu_threads(ex), pool_par(d), (int p = 0; p < planes; p++), {
        const float *xp = x + (size_t)p * hw;
        for (int oy = 0; oy < d->oh; oy++) {
            size_t o = (size_t)p * ohw + (size_t)oy * d->ow;
            maxpool_row(d, xp, oy, y + o, argmax ? argmax + o : NULL);
        }
    });
}

void sl_cpu_maxpool_backward(const sl_exec *ex, const sl_pool_desc *d, const int32_t *argmax,
                             const float *dy, float *dx, int accumulate)
{
    int planes = d->n * d->c;
    size_t hw = (size_t)d->h * d->w, ohw = (size_t)d->oh * d->ow;
    int par = (double)planes * (double)(hw + ohw) >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int p = 0; p < planes; p++), {
        float *dxp = dx + (size_t)p * hw;
        const float *dyp = dy + (size_t)p * ohw;
        const int32_t *ap = argmax + (size_t)p * ohw;
        if (!accumulate)
            memset(dxp, 0, hw * sizeof(float));
        for (size_t j = 0; j < ohw; j++)
            if (ap[j] >= 0)
                dxp[ap[j]] += dyp[j];
    });
}

void sl_cpu_avgpool_forward(const sl_exec *ex, const sl_pool_desc *d, const float *x, float *y)
{
    int planes = d->n * d->c;
    size_t hw = (size_t)d->h * d->w, ohw = (size_t)d->oh * d->ow;
    float area = sl_avgpool_area(d);
    SL_PARALLEL_FOR(cpu_threads(ex), pool_par(d), (int p = 0; p < planes; p++), {
        const float *xp = x + (size_t)p * hw;
        float *yp = y + (size_t)p * ohw;
        for (int oy = 0; oy < d->oh; oy++) {
            int y0, y1;
            sl_pool_window(oy, d->sh, d->ph, d->kh, d->h, &y0, &y1);
            for (int ox = 0; ox < d->ow; ox++) {
                int x0, x1;
                sl_pool_window(ox, d->sw, d->pw, d->kw, d->w, &x0, &x1);
                yp[oy * d->ow + ox] = sl_avgpool_window_sum(xp, d->w, y0, y1, x0, x1) / area;
            }
        }
    });
}

void sl_cpu_avgpool_backward(const sl_exec *ex, const sl_pool_desc *d, const float *dy, float *dx,
                             int accumulate)
{
    int planes = d->n * d->c;
    size_t hw = (size_t)d->h * d->w, ohw = (size_t)d->oh * d->ow;
    float area = sl_avgpool_area(d);
    SL_PARALLEL_FOR(cpu_threads(ex), pool_par(d), (int p = 0; p < planes; p++), {
        float *dxp = dx + (size_t)p * hw;
        const float *dyp = dy + (size_t)p * ohw;
        if (!accumulate)
            memset(dxp, 0, hw * sizeof(float));
        for (int oy = 0; oy < d->oh; oy++) {
            int y0, y1;
            sl_pool_window(oy, d->sh, d->ph, d->kh, d->h, &y0, &y1);
            for (int ox = 0; ox < d->ow; ox++) {
                int x0, x1;
                sl_pool_window(ox, d->sw, d->pw, d->kw, d->w, &x0, &x1);
                float g = sl_avgpool_grad(dyp[oy * d->ow + ox], area);
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++)
                        dxp[iy * d->w + ix] += g;
            }
        }
    });
}

void sl_cpu_global_avgpool_forward(const sl_exec *ex, int nc, int hw, const float *x, float *y)
{
    int par = (double)nc * hw >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int p = 0; p < nc; p++), {
        y[p] = sl_gap_mean(x + (size_t)p * hw, hw);
    });
}

void sl_cpu_global_avgpool_backward(const sl_exec *ex, int nc, int hw, const float *dy, float *dx,
                                    int accumulate)
{
    int par = (double)nc * hw >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int p = 0; p < nc; p++), {
        float *dxp = dx + (size_t)p * hw;
        float g = sl_gap_grad(dy[p], hw);
        if (accumulate) {
            for (int j = 0; j < hw; j++)
                dxp[j] += g;
        } else {
            for (int j = 0; j < hw; j++)
                dxp[j] = g;
        }
    });
}
