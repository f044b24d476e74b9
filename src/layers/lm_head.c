/*
 * lm_head.c — the language model's head fused with its loss (layers
 * stage): per chunk of rows, logits = h W^T (GEMM), the loss rows
 * (backend lm_xent, base/element.h's rule), then dh = dlogits W and
 * dW += dlogits^T h (GEMMs), so scratch is one chunk of logits. A bf16
 * network's head runs the three products on bf16 operands where the
 * backend has bf16 GEMMs (see "bf16" below).
 */
#include <string.h>

#include "base/element.h"
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

/* The chunk rule for rows of row_bytes bytes of scratch each, beside
 * `fixed` bytes whatever the chunk (the float head: its logits, 0; the
 * bf16 head: see sl_lm_head_bf16_chunk). */
static int chunk_of(const sl_lm_head *h, int rows, int device, size_t row_bytes, size_t fixed)
{
    if (rows < 1)
        return 1;
    if (h->chunk_rows > 0)
        return h->chunk_rows < rows ? h->chunk_rows : rows;
    size_t cap = SL_LM_HEAD_CHUNK_BYTES > fixed ? SL_LM_HEAD_CHUNK_BYTES - fixed : 0;
    size_t per = cap / row_bytes;
    if (device) { /* see SL_LM_HEAD_DEVICE_CHUNK_BYTES */
        size_t dcap = SL_LM_HEAD_DEVICE_CHUNK_BYTES > fixed ? SL_LM_HEAD_DEVICE_CHUNK_BYTES - fixed : 0;
        size_t wide = dcap / row_bytes;
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

int sl_lm_head_chunk(const sl_lm_head *h, int rows, int device)
{
    return chunk_of(h, rows, device, (size_t)h->vocab * sizeof(float), 0);
}

/* Rows a block of the bf16 head's vocabulary (see "bf16" below). */
#define SL_LM_HEAD_BF16_BLOCK 4096

/* A device's layout keeps all of W in bf16, rounded once a run, with zero
 * rows up to the padded vocabulary (see "bf16" below); the CPU's, blocks
 * of SL_LM_HEAD_BF16_BLOCK rows rounded when used. */
static int bf16_whole(int device) { return layout_step(device) > 1; }

int sl_lm_head_bf16_chunk(const sl_lm_head *h, int rows, int device)
{
    /* a row: its bf16 logits (then their gradient) and two bf16 copies of
     * its hidden state; beside them one block of W in bf16 (the whole bf16
     * W of a device's layout is not a chunk's: it stays beside) */
    size_t block = (size_t)(h->vocab < SL_LM_HEAD_BF16_BLOCK ? h->vocab : SL_LM_HEAD_BF16_BLOCK);
    return chunk_of(h, rows, device,
                    (size_t)h->vocab * sizeof(uint16_t) + 2 * (size_t)h->channels * sizeof(uint16_t),
                    bf16_whole(device) ? 0 : block * (size_t)h->channels * sizeof(uint16_t));
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

/* The scratch after the logits: per row a loss (double), a hit and a
 * label, then lm_xent_total's 16 bytes. */
static size_t rows_bytes(int rows)
{
    size_t r = rows > 0 ? (size_t)rows : 0;
    return sl_align_up(r * sizeof(double)) + 2 * sl_align_up(r * sizeof(int)) + sl_align_up(16);
}

size_t sl_lm_head_ws_bytes(const sl_lm_head *h, int rows, int device)
{
    return logits_bytes(h, rows, device) + rows_bytes(rows);
}

/* ---- bf16 ----
 * The head of a bf16 network on bf16 products (sl_lm_head_bf16_ws_bytes):
 * per chunk of n rows, h rounded to bf16 (h16); the vocabulary in blocks
 * of SL_LM_HEAD_BF16_BLOCK rows of W, each rounded to bf16 into w16 when
 * used; logits = h16 w16^T summed in float and rounded to bf16 (gemm_bf16
 * into dl16), the loss rows from them in float and double (lm_xent on bf16
 * rows) writing the logits' gradient over them in bf16, then dh = sum over
 * blocks of dl16 w16 and dW += dl16^T h16, summed in float. So the head
 * computes as torch.autocast does (bf16 matmul outputs, the loss in fp32
 * from them); W, its gradient and the loss stay float. A chunk holds its
 * bf16 logits, two bf16 row copies and a bf16 block of W within the float
 * head's chunk bytes (sl_lm_head_bf16_chunk): no float logits (on an
 * H100, GPT-2 small's float logits took 11 roundings of 154 MB and a loss
 * kernel reading them three times a step, about 4 ms of 29). In training one pass
 * over the blocks serves two chunks: each block of W is rounded once for
 * chunk c's backward products and chunk c + 1's logits (W is rounded
 * chunks + 1 times a step, not twice a chunk; the products and the order
 * of every sum are those of a pass per chunk). A device's layout rounds
 * all of W into w16 once a run instead (2 L C bytes beside the chunk, its
 * rows past V zero: 74 MiB for GPT-2), and a chunk's logits and dh are
 * one product each over that padded vocabulary, W's gradient two
 * (sl_lm_head_split's parts), so the products are few, large and
 * aligned: on an H100, GPT-2 small's bf16 head in blocks of 4096 rows ran
 * 169 roundings of W and about 470 GEMMs of a few GFLOP a step (about 11
 * of a 33 ms step, ncu, 2026-11-27). Scratch:
 * dl16, two h16 (chunks c and c + 1), w16, the rows' scratch,
 * then the largest gemm_bf16 workspace of the head's geometries. The
 * backward's products of a block read chunk c's dl16 columns before the
 * next logits' product writes chunk c + 1's over them (one queue). */
typedef struct head16 {
    int chunk, L, C, V, vb; /* rows a chunk, logits' row length, channels, vocab, block */
    int whole;              /* w16 holds all of W, rounded once a run (bf16_whole) */
    int va;                 /* whole: W's gradient in parts [0, va), [va, V) */
    size_t dl16, h16, w16, rows; /* bytes of each part (h16: each of the two) */
} head16;

static head16 head16_of(const sl_lm_head *h, int rows, int device)
{
    head16 b;
    b.chunk = sl_lm_head_bf16_chunk(h, rows, device);
    b.L = sl_lm_head_ld(h, device);
    b.C = h->channels;
    b.V = h->vocab;
    b.whole = bf16_whole(device);
    b.va = sl_lm_head_split(h, device);
    if (b.whole) /* one block of the padded vocabulary (see head16_pass) */
        b.vb = b.L;
    else
        b.vb = b.V < SL_LM_HEAD_BF16_BLOCK ? b.V : SL_LM_HEAD_BF16_BLOCK;
    b.dl16 = sl_align_up((size_t)b.chunk * (size_t)b.L * sizeof(uint16_t));
    b.h16 = sl_align_up((size_t)b.chunk * (size_t)b.C * sizeof(uint16_t));
    b.w16 = sl_align_up((size_t)b.vb * (size_t)b.C * sizeof(uint16_t));
    b.rows = rows_bytes(rows);
    return b;
}

/* The three products of n rows against a block of vb vocabulary rows. */
static sl_gemm_bf16_desc logits_desc(const head16 *b, int n, int vb)
{
    sl_gemm_bf16_desc d = {0, 1, n, vb, b->C, b->C, b->C, b->L, 1, 0, 0};
    return d;
}

static sl_gemm_bf16_desc dh_desc(const head16 *b, int n, int vb, int accumulate)
{
    sl_gemm_bf16_desc d = {0, 0, n, b->C, vb, b->L, b->C, b->C, 0, accumulate, 0};
    return d;
}

static sl_gemm_bf16_desc dw_desc(const head16 *b, int n, int vb)
{
    sl_gemm_bf16_desc d = {1, 0, vb, b->C, n, b->L, b->C, b->C, 0, 1, 0};
    return d;
}

/* Every product a chunk of n rows runs (at most 8), for the workspace
 * query: the CPU's layout, each block size's logits, dh written and
 * added, and dW; a device's, the padded vocabulary's logits and dh, and
 * dW's two parts. */
static int head16_descs(const head16 *b, int n, sl_gemm_bf16_desc *d)
{
    int k = 0;
    if (b->whole) {
        d[k++] = logits_desc(b, n, b->L);
        d[k++] = dh_desc(b, n, b->L, 0);
        if (b->va > 0)
            d[k++] = dw_desc(b, n, b->va);
        if (b->V > b->va)
            d[k++] = dw_desc(b, n, b->V - b->va);
        return k;
    }
    int vbs[2] = {b->vb, b->V % b->vb ? b->V % b->vb : b->vb};
    for (int j = 0; j < 2; j++) {
        d[k++] = logits_desc(b, n, vbs[j]);
        d[k++] = dh_desc(b, n, vbs[j], 0);
        d[k++] = dh_desc(b, n, vbs[j], 1);
        d[k++] = dw_desc(b, n, vbs[j]);
    }
    return k;
}

size_t sl_lm_head_bf16_ws_bytes(const sl_lm_head *h, const sl_backend *be, int rows)
{
    if (rows < 1 || !sl_native_bf16_if(be, SL_BF16_GEMM) || !be->gemm_bf16 ||
        !be->gemm_bf16_workspace_bytes)
        return SIZE_MAX;
    /* a device's bf16 GEMMs take tensors on 16 bytes: every chunk's rows
     * of dh and of the hidden states' bf16 copy start there when a row is
     * a multiple of 8 channels */
    if (!be->host_memory && h->channels % 8 != 0)
        return SIZE_MAX;
    head16 b = head16_of(h, rows, !be->host_memory);
    int ns[2] = {b.chunk, rows % b.chunk ? rows % b.chunk : b.chunk};
    size_t most = 0;
    for (int i = 0; i < 2; i++) {
        sl_gemm_bf16_desc d[8];
        int nd = head16_descs(&b, ns[i], d);
        for (int k = 0; k < nd; k++) {
            size_t w = be->gemm_bf16_workspace_bytes(be, &d[k]);
            if (w == SIZE_MAX)
                return SIZE_MAX;
            most = w > most ? w : most;
        }
    }
    return b.dl16 + 2 * b.h16 + b.w16 + b.rows + sl_align_up(most);
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

/* The bf16 products of one vocabulary block [v0, v0 + vb) of W, already
 * rounded into w16 (see head16): a chunk's bf16 logits into dl16, and a
 * chunk's backward from its logits' gradient there: dh (the first block
 * writes, the others add) and the block's rows of W's gradient. */
static void block_logits(const head16 *b, const sl_exec *ex, int n, int v0, int vb,
                         const void *h16, const void *w16, void *dl16, void *gws)
{
    sl_gemm_bf16_desc d = logits_desc(b, n, vb);
    ex->be->gemm_bf16(ex, &d, h16, w16, NULL, (uint16_t *)dl16 + v0, gws);
}

static void block_backward(const head16 *b, const sl_exec *ex, int n, int v0, int vb,
                           const void *dl16, const void *h16, const void *w16, float *dh,
                           float *dW, void *gws)
{
    const uint16_t *dl = (const uint16_t *)dl16 + v0;
    sl_gemm_bf16_desc d = dh_desc(b, n, vb, v0 > 0);
    ex->be->gemm_bf16(ex, &d, dl, w16, NULL, dh, gws);
    sl_gemm_bf16_desc g = dw_desc(b, n, vb);
    ex->be->gemm_bf16(ex, &g, dl, h16, NULL, dW + (size_t)v0 * b->C, gws);
}

/* Rows [r0, r0 + n) of a C-column float matrix (the hidden states h, or
 * W) rounded into dst (h16, w16). */
static void rows_round(const head16 *b, const sl_exec *ex, const float *m, int r0, int n,
                       void *dst)
{
    ex->be->cast(ex, (size_t)n * b->C, m + (size_t)r0 * b->C, SL_DTYPE_F32, dst, SL_DTYPE_BF16);
}

/* All of W rounded into w16 (a device's layout), then w16's rows past V
 * (to L) zeroed: the padded vocabulary head16_pass multiplies. */
static void w16_round(const head16 *b, const sl_exec *ex, const float *W, void *w16)
{
    rows_round(b, ex, W, 0, b->V, w16);
    size_t pad = (size_t)(b->L - b->V) * (size_t)b->C; /* bf16 values */
    uint16_t *p = (uint16_t *)w16 + (size_t)b->V * b->C;
    if (pad == 0)
        return;
    if (ex->be->host_memory)
        memset(p, 0, pad * sizeof(uint16_t));
    else /* a device's bf16 head has C a multiple of 8 (sl_lm_head_bf16_ws_bytes
          * refuses others): pad is even, whole floats of zero bits */
        ex->be->fill(ex, pad / 2, 0.0f, (float *)(void *)p);
}

/* One block pass over dl16: chunk `back`'s backward from its gradient
 * there (when h_back is not NULL), then chunk `next`'s logits over it
 * (when h_next is not NULL), block by block; W rounded once a block (or,
 * whole, already rounded). */
static void head16_pass(const head16 *b, const sl_exec *ex, const float *W, float *dW, int n_back,
                        const void *h_back, float *dh, int n_next, const void *h_next,
                        void *dl16, void *w16, void *gws)
{
    if (!h_back && !h_next)
        return;
    if (b->whole) {
        /* The logits and dh over the padded vocabulary, one product each:
         * w16's rows past V are zeros (w16_round), so the logits' columns
         * past V are zeros too (of finite hidden states: a non-finite one
         * gives its row NaN there, and so a NaN dh row, even where the row
         * is ignored; W's gradient is NaN from such a row anyway), and
         * lm_xent leaves them so (it writes the
         * gradient over columns below V only): they add nothing to dh. Two
         * parts of W's gradient, whose rows stop at V. (The parts of
         * sl_lm_head_split all through had three products of 17 columns
         * a chunk for GPT-2, on cuBLAS's Turing and Ampere kernels for
         * unaligned operands: about 60 us a chunk, 0.7 ms a bf16 step on
         * an H100, ncu 2026-11-27.) */
        if (h_back) {
            sl_gemm_bf16_desc d = dh_desc(b, n_back, b->L, 0);
            ex->be->gemm_bf16(ex, &d, dl16, w16, NULL, dh, gws);
            for (int p = 0; p < 2; p++) {
                int v0 = p ? b->va : 0, vn = p ? b->V - b->va : b->va;
                if (vn < 1)
                    continue;
                sl_gemm_bf16_desc g = dw_desc(b, n_back, vn);
                ex->be->gemm_bf16(ex, &g, (const uint16_t *)dl16 + v0, h_back, NULL,
                                  dW + (size_t)v0 * b->C, gws);
            }
        }
        if (h_next)
            block_logits(b, ex, n_next, 0, b->L, h_next, w16, dl16, gws);
        return;
    }
    for (int v0 = 0; v0 < b->V; v0 += b->vb) {
        int vb = b->V - v0 < b->vb ? b->V - v0 : b->vb;
        rows_round(b, ex, W, v0, vb, w16);
        if (h_back)
            block_backward(b, ex, n_back, v0, vb, dl16, h_back, w16, dh, dW, gws);
        if (h_next)
            block_logits(b, ex, n_next, v0, vb, h_next, w16, dl16, gws);
    }
}

/* Rows [r0, r0 + n) of a chunk's bf16 logits (dl16, L apart) widened
 * into the caller's host logits_out (V apart). From a device, each row's
 * bf16 values are read back into the first half of its own float slot,
 * then widened last to first: value j is read before float j is written
 * over bytes [4j, 4j + 4), which hold only values already read. */
static void logits16_out(const head16 *b, const sl_exec *ex, int r0, int n, const void *dl16,
                         float *logits_out)
{
    for (int r = 0; r < n; r++) {
        char *o = (char *)(logits_out + (size_t)(r0 + r) * b->V);
        const uint16_t *x = (const uint16_t *)dl16 + (size_t)r * b->L;
        if (ex->be->host_memory) {
            for (int j = 0; j < b->V; j++)
                ((float *)(void *)o)[j] = sl_bf16_widen(x[j]);
            continue;
        }
        ex->be->download(ex, o, x, (size_t)b->V * sizeof(uint16_t));
        for (int j = b->V - 1; j >= 0; j--) {
            uint16_t v;
            memcpy(&v, o + (size_t)j * sizeof v, sizeof v);
            float f = sl_bf16_widen(v);
            memcpy(o + (size_t)j * sizeof f, &f, sizeof f);
        }
    }
}

void sl_lm_head_run(const sl_lm_head *hd, const sl_exec *ex_in, int rows, const float *h,
                    const int *labels, float *dh, float *logits_out, void *ws, float *loss,
                    int *hits, int *counted, int bf16)
{
    *loss = 0.0f;
    *hits = 0;
    *counted = 0;
    /* lm_xent's logits: float, or the bf16 head's bf16 */
    sl_exec exv = *ex_in;
    exv.bf16 = bf16 != 0;
    const sl_exec *ex = &exv;
    const sl_backend *be = ex->be;
    int V = hd->vocab, C = hd->channels, device = !be->host_memory;
    int L = sl_lm_head_ld(hd, device);
    int va = sl_lm_head_split(hd, device);
    /* scratch: the float head's logits, or the bf16 head's parts (head16);
     * then the rows' (rows_bytes); then the bf16 products' workspace */
    char *base = ws;
    float *logits = (float *)base;
    head16 b16 = head16_of(hd, rows, device);
    int chunk = bf16 ? b16.chunk : sl_lm_head_chunk(hd, rows, device);
    char *dl16 = base, *h16[2] = {dl16 + b16.dl16, dl16 + b16.dl16 + b16.h16};
    char *w16 = h16[1] + b16.h16;
    char *rows_ws = bf16 ? w16 + b16.w16 : base + logits_bytes(hd, rows, device);
    void *gws = rows_ws + b16.rows;
    double *row_loss = (double *)rows_ws;
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
    if (rows < 1)
        return;
    if (bf16 && b16.whole)
        w16_round(&b16, ex, W, w16);
    if (bf16) { /* training: one block pass serves two chunks; evaluation: a pass a chunk */
        int chunks = (rows + chunk - 1) / chunk, n0 = rows < chunk ? rows : chunk;
        rows_round(&b16, ex, h, 0, n0, h16[0]);
        head16_pass(&b16, ex, W, NULL, 0, NULL, NULL, n0, h16[0], dl16, w16, gws);
        for (int c = 0; c < chunks; c++) {
            int r0 = c * chunk, n = rows - r0 < chunk ? rows - r0 : chunk;
            if (logits_out)
                logits16_out(&b16, ex, r0, n, dl16, logits_out);
            if (labels) /* the logits' gradient over them, in bf16 */
                be->lm_xent(ex, n, V, L, (float *)(void *)dl16, dev_labels + r0,
                            hd->ignore_index, scale, dh != NULL, row_loss + r0, row_hit + r0);
            int r1 = r0 + n, n1 = rows - r1 < chunk ? rows - r1 : chunk;
            if (n1 > 0)
                rows_round(&b16, ex, h, r1, n1, h16[(c + 1) % 2]);
            int back = labels && dh;
            head16_pass(&b16, ex, W, hd->weight->grad, n, back ? h16[c % 2] : NULL,
                        back ? dh + (size_t)r0 * C : NULL, n1, n1 > 0 ? h16[(c + 1) % 2] : NULL,
                        dl16, w16, gws);
        }
        if (labels)
            sum_rows(ex, rows, row_loss, row_hit, *counted, out_ws, loss, hits);
        return;
    }
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
