/*
 * lm_head.c — the language model's head fused with its loss (layers
 * stage): per chunk of rows, logits = h W^T (GEMM), the loss rows
 * (backend lm_xent, base/element.h's rule), then dh = dlogits W and
 * dW += dlogits^T h (GEMMs), so scratch is one chunk of logits.
 */
#include <string.h>

#include "layers/lm_head.h"

static int g_force_step; /* sl_lm_head_force_layout */

void sl_lm_head_force_layout(int step) { g_force_step = step > 1 ? step : 0; }

/* The layout's step (see lm_head.h); 1: the CPU's plain layout. */
static int layout_step(int device)
{
    if (device)
        return SL_LM_HEAD_DEVICE_LD_STEP;
    return g_force_step ? g_force_step : 1;
}

int sl_lm_head_ld(const sl_lm_head *h, int device)
{
    int s = layout_step(device);
    return (h->vocab + s - 1) / s * s;
}

int sl_lm_head_split(const sl_lm_head *h, int device)
{
    int s = layout_step(device);
    return h->vocab / s * s;
}

int sl_lm_head_chunk(const sl_lm_head *h, int rows, int device)
{
    if (rows < 1)
        return 1;
    if (h->chunk_rows > 0)
        return h->chunk_rows < rows ? h->chunk_rows : rows;
    size_t row_bytes = (size_t)h->vocab * sizeof(float);
    size_t per = SL_LM_HEAD_CHUNK_BYTES / row_bytes;
    if (device) { /* see SL_LM_HEAD_DEVICE_CHUNK_BYTES */
        size_t wide = SL_LM_HEAD_DEVICE_CHUNK_BYTES / row_bytes;
        if ((size_t)h->channels < wide)
            wide = (size_t)h->channels;
        if (wide > per)
            per = wide;
    }
    if (per < 1)
        per = 1;
    size_t chunks = ((size_t)rows + per - 1) / per; /* then equal chunks */
    size_t c = ((size_t)rows + chunks - 1) / chunks;
    if (device) { /* whole steps of rows where the cap and the run allow */
        size_t s = SL_LM_HEAD_DEVICE_LD_STEP, r = (c + s - 1) / s * s;
        if (r <= per && r <= (size_t)rows)
            c = r;
    }
    return (int)c;
}

/* Scratch: one chunk of logits, then per row a loss (double), a hit and a
 * label (ints), then the backend's 16 bytes of lm_xent_total. */
static size_t logits_bytes(const sl_lm_head *h, int rows, int device)
{
    return sl_align_up((size_t)sl_lm_head_chunk(h, rows, device) *
                       (size_t)sl_lm_head_ld(h, device) * sizeof(float));
}

/* The head's three products over a chunk of n rows, the vocabulary in
 * parts [0, va) and [va, V) (lm_head.h); lg holds the chunk's logits, L
 * floats a row. */
typedef struct head_gemms {
    const sl_backend *be;
    const sl_exec *ex;
    int n, C, V, va, L;
    const float *W, *hc; /* the weight [V, C]; the chunk's hidden states */
    float *lg;
} head_gemms;

/* lg = hc W^T */
static void gemm_logits(const head_gemms *g)
{
    if (g->va > 0)
        g->be->gemm(g->ex, 0, 1, g->n, g->va, g->C, 1.0f, g->hc, g->C, g->W, g->C, 0.0f, g->lg,
                    g->L);
    if (g->V > g->va)
        g->be->gemm(g->ex, 0, 1, g->n, g->V - g->va, g->C, 1.0f, g->hc, g->C,
                    g->W + (size_t)g->va * g->C, g->C, 0.0f, g->lg + g->va, g->L);
}

/* dh = lg W (lg now the logits' gradient), the parts added in order */
static void gemm_dh(const head_gemms *g, float *dh)
{
    if (g->va > 0)
        g->be->gemm(g->ex, 0, 0, g->n, g->C, g->va, 1.0f, g->lg, g->L, g->W, g->C, 0.0f, dh,
                    g->C);
    if (g->V > g->va)
        g->be->gemm(g->ex, 0, 0, g->n, g->C, g->V - g->va, 1.0f, g->lg + g->va, g->L,
                    g->W + (size_t)g->va * g->C, g->C, g->va > 0 ? 1.0f : 0.0f, dh, g->C);
}

/* dW += lg^T hc, each part's rows of dW */
static void gemm_dw(const head_gemms *g, float *dw)
{
    if (g->va > 0)
        g->be->gemm(g->ex, 1, 0, g->va, g->C, g->n, 1.0f, g->lg, g->L, g->hc, g->C, 1.0f, dw,
                    g->C);
    if (g->V > g->va)
        g->be->gemm(g->ex, 1, 0, g->V - g->va, g->C, g->n, 1.0f, g->lg + g->va, g->L, g->hc,
                    g->C, 1.0f, dw + (size_t)g->va * g->C, g->C);
}

size_t sl_lm_head_ws_bytes(const sl_lm_head *h, int rows, int device)
{
    size_t r = rows > 0 ? (size_t)rows : 0;
    return logits_bytes(h, rows, device) + sl_align_up(r * sizeof(double)) +
           2 * sl_align_up(r * sizeof(int)) + sl_align_up(16);
}

uint64_t sl_lm_head_fwd_flops(const sl_lm_head *h, int rows)
{
    return sl_mul_sat(2, sl_mul3_sat((uint64_t)rows, (uint64_t)h->vocab, (uint64_t)h->channels));
}

uint64_t sl_lm_head_bwd_flops(const sl_lm_head *h, int rows)
{
    return sl_mul_sat(4, sl_mul3_sat((uint64_t)rows, (uint64_t)h->vocab, (uint64_t)h->channels));
}

/* The rows' losses and hits summed: by the backend's lm_xent_total on a
 * device (read back with the step's sync), or in order, in double, here
 * (the CPU's rows are host memory). */
static void sum_rows(const sl_exec *ex, int rows, const double *row_loss, const int *row_hit,
                     int counted, void *out_ws, float *loss, int *hits)
{
    if (ex->be->lm_xent_total) {
        ex->be->lm_xent_total(ex, rows, row_loss, row_hit, counted, loss, hits, out_ws);
        return;
    }
    double sum = 0.0;
    int h = 0;
    for (int r = 0; r < rows; r++) { /* an ignored row holds 0 */
        sum += row_loss[r];
        h += row_hit[r];
    }
    *loss = counted ? (float)(sum / counted) : 0.0f;
    *hits = h;
}

void sl_lm_head_run(const sl_lm_head *hd, const sl_exec *ex, int rows, const float *h,
                    const int *labels, float *dh, float *logits_out, void *ws, float *loss,
                    int *hits, int *counted)
{
    *loss = 0.0f;
    *hits = 0;
    *counted = 0;
    const sl_backend *be = ex->be;
    int V = hd->vocab, C = hd->channels, device = !be->host_memory;
    int chunk = sl_lm_head_chunk(hd, rows, device), L = sl_lm_head_ld(hd, device);
    int va = sl_lm_head_split(hd, device);
    char *base = ws;
    float *logits = (float *)base;
    double *row_loss = (double *)(base + logits_bytes(hd, rows, device));
    int *row_hit = (int *)((char *)row_loss + sl_align_up((size_t)rows * sizeof(double)));
    int *dev_labels = (int *)((char *)row_hit + sl_align_up((size_t)rows * sizeof(int)));
    void *out_ws = (char *)dev_labels + sl_align_up((size_t)rows * sizeof(int));
    float scale = 0.0f;
    if (labels) {
        for (int r = 0; r < rows; r++)
            *counted += labels[r] != hd->ignore_index;
        scale = *counted ? 1.0f / (float)*counted : 0.0f;
        be->upload(ex, dev_labels, labels, (size_t)rows * sizeof(int));
    }
    const float *W = hd->weight->data;
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int n = rows - r0 < chunk ? rows - r0 : chunk;
        const float *hc = h + (size_t)r0 * C;
        /* Logits straight into the caller's buffer when it is reachable
         * (host memory, rows vocab apart). */
        float *lg = logits_out && be->host_memory && !dh && L == V ? logits_out + (size_t)r0 * V
                                                                   : logits;
        head_gemms g = {be, ex, n, C, V, va, L, W, hc, lg};
        gemm_logits(&g);
        if (logits_out && lg == logits) {
            if (L == V)
                be->download(ex, logits_out + (size_t)r0 * V, logits,
                             (size_t)n * V * sizeof(float));
            else /* a device's padded rows, one at a time (reading logits back is rare) */
                for (int r = 0; r < n; r++)
                    be->download(ex, logits_out + (size_t)(r0 + r) * V, logits + (size_t)r * L,
                                 (size_t)V * sizeof(float));
        }
        if (!labels)
            continue;
        be->lm_xent(ex, n, V, L, lg, dev_labels + r0, hd->ignore_index, scale, dh != NULL,
                    row_loss + r0, row_hit + r0);
        if (!dh)
            continue;
        gemm_dh(&g, dh + (size_t)r0 * C);
        gemm_dw(&g, hd->weight->grad);
    }
    if (labels)
        sum_rows(ex, rows, row_loss, row_hit, *counted, out_ws, loss, hits);
}
