/*
 * test_backend_ops.c — the CUDA backend's kernels one op at a time against
 * the CPU backend's on the same inputs (as ggml's test-backend-ops checks
 * every backend against the CPU), each within a tolerance stated here, and
 * each run twice on the GPU for the same bits. Bit equality with the CPU
 * is not asked (shared/DESIGN.md, Backends): each device sums in its own
 * fixed order; the tolerances are a few roundings of the values compared.
 *
 * Ops: every kernel of base/backend.h's table but attention's (its own
 * test_cuda_attention): LayerNorm, Linear's bias, GELU, the embedding
 * (its backward the same float adds on both devices: exact), a language
 * model's loss rows and total, casts between F32 and bf16, GEMMs,
 * convolutions, BatchNorm, pooling, elementwise maps, dropout and
 * uniforms, the classifier's loss, Adam, SGD, the norm's sums of squares (one
 * tensor, and a list in one call against one call a tensor),
 * a decoding step, and the kernels that take bf16 activations. Where both devices run the same element rule in
 * the same order the tolerance is 0 (the same bits). Skipped
 * visibly without a usable GPU; the CPU side runs anyway, so the harness
 * itself is exercised here. The CUDA backend's two traversals of the
 * language model's loss (rows staged in shared memory, or three passes
 * over global memory) are held to the same bits; its two traversals of
 * the column sums (column parts in clusters, column tiles) are each
 * checked against the CPU; its LayerNorm with rows in registers is held to
 * the bits of its loops. BatchNorm joined to the ReLU after it is held to
 * the bits of the two ops on every backend (the CPU here too).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "base/conv_gemm.h"
#include "base/element.h"
#include "cpu/cpu.h"
#include "cuda/cuda_backend.h"
#include "harness.h"

enum { DEV_PTRS = 96 };
typedef struct dev {
    const sl_backend *be;
    sl_exec ex;
    void *ptr[DEV_PTRS]; /* freed by dev_release */
    int n;
} dev;

static void *dev_alloc(dev *d, size_t bytes)
{
    void *p = d->be->alloc(d->be, bytes ? bytes : 4, "test");
    ck_assert(p && d->n < DEV_PTRS);
    d->ptr[d->n++] = p;
    return p;
}

static void *dev_up(dev *d, const void *h, size_t bytes)
{
    void *p = dev_alloc(d, bytes);
    d->be->upload(&d->ex, p, h, bytes);
    return p;
}

static void dev_down(dev *d, void *h, const void *p, size_t bytes)
{
    d->be->download(&d->ex, h, p, bytes);
    ck_assert_msg(d->be->sync(&d->ex) == SL_OK, "%s: %s", d->be->name, sl_last_error());
}

static void dev_release(dev *d)
{
    for (int i = 0; i < d->n; i++)
        d->be->free(d->be, d->ptr[i]);
    d->n = 0;
}

/* Outputs of one op on one device, host copies. */
#define MAX_OUT 40
typedef struct outputs {
    float *v[MAX_OUT];
    size_t n[MAX_OUT];
    int count;
} outputs;

static void out_add(outputs *o, dev *d, const float *p, size_t n)
{
    ck_assert(o->count < MAX_OUT);
    float *h = malloc(n * sizeof(float) + 4);
    ck_assert(h);
    dev_down(d, h, p, n * sizeof(float));
    o->v[o->count] = h;
    o->n[o->count++] = n;
}

/* An output already on the host (an index or count turned into floats). */
static void out_host(outputs *o, const float *h, size_t n)
{
    ck_assert(o->count < MAX_OUT);
    float *c = malloc(n * sizeof(float) + 4);
    ck_assert(c);
    memcpy(c, h, n * sizeof(float));
    o->v[o->count] = c;
    o->n[o->count++] = n;
}

/* n ints of device memory, as floats (exact below 2^24). */
static void out_ints(outputs *o, dev *d, const int32_t *p, size_t n)
{
    int32_t *h = malloc(n * sizeof(int32_t) + 4);
    float *f = malloc(n * sizeof(float) + 4);
    ck_assert(h && f);
    dev_down(d, h, p, n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        f[i] = (float)h[i];
    out_host(o, f, n);
    free(h);
    free(f);
}

/* n doubles of device memory, each as two floats (its float rounding and
 * the rest), so an exact comparison sees 48 of its bits. */
static void out_doubles(outputs *o, dev *d, const double *p, size_t n)
{
    double *h = malloc(n * sizeof(double) + 8);
    float *f = malloc(2 * n * sizeof(float) + 4);
    ck_assert(h && f);
    dev_down(d, h, p, n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        f[2 * i] = (float)h[i];
        f[2 * i + 1] = (float)(h[i] - (double)f[2 * i]);
    }
    out_host(o, f, 2 * n);
    free(h);
    free(f);
}

static void out_free(outputs *o)
{
    for (int i = 0; i < o->count; i++)
        free(o->v[i]);
    o->count = 0;
}

typedef void (*op_fn)(dev *d, outputs *o);

/* Runs op on the CPU and twice on the GPU: the GPU's two runs bit for
 * bit, and each output within tol * max |cpu output| of the CPU's. */
static void check_op_n(const char *name, op_fn op, const sl_backend *gpu, const double *tol,
                       int ntol)
{
    sl_backend *cpu_be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(1, &cpu_be), SL_OK);
    dev c = {cpu_be, {cpu_be, 1, 0, NULL}, {0}, 0};
    outputs oc;
    memset(&oc, 0, sizeof oc);
    op(&c, &oc);
    dev_release(&c);
    /* one tolerance per output: a short list would be read past its end */
    ck_assert_msg(oc.count == ntol, "%s: %d outputs but %d tolerances", name, oc.count, ntol);
    if (!gpu) {
        printf("%-28s CPU ran (%d outputs); GPU SKIPPED\n", name, oc.count);
        out_free(&oc);
        sl_backend_destroy(cpu_be);
        return;
    }
    outputs og[2];
    memset(og, 0, sizeof og);
    for (int r = 0; r < 2; r++) {
        dev g = {gpu, {gpu, 1, 0, NULL}, {0}, 0};
        op(&g, &og[r]);
        dev_release(&g);
    }
    ck_assert_int_eq(og[0].count, oc.count);
    for (int k = 0; k < oc.count; k++) {
        ck_assert_msg(memcmp(og[0].v[k], og[1].v[k], oc.n[k] * sizeof(float)) == 0,
                      "%s output %d: two GPU runs differ", name, k);
        if (tol[k] == 0.0) { /* exact: the same bits, NaNs and infinities included */
            ck_assert_msg(memcmp(og[0].v[k], oc.v[k], oc.n[k] * sizeof(float)) == 0,
                          "%s output %d: the GPU's bits differ from the CPU's", name, k);
            printf("%-28s output %d: GPU and CPU the same bits, two GPU runs identical\n", name,
                   k);
            continue;
        }
        double big = 0.0, worst = 0.0;
        for (size_t i = 0; i < oc.n[k]; i++)
            if (isfinite(oc.v[k][i]))
                big = fmax(big, fabs(oc.v[k][i]));
        for (size_t i = 0; i < oc.n[k]; i++) {
            if (memcmp(&og[0].v[k][i], &oc.v[k][i], sizeof(float)) == 0)
                continue; /* the same value (a NaN or an infinity too) */
            double d = fabs((double)og[0].v[k][i] - oc.v[k][i]);
            worst = fmax(worst, isnan(d) ? INFINITY : d);
        }
        double rel = big > 0.0 ? worst / big : worst;
        printf("%-28s output %d: GPU vs CPU %.2e of the largest |value| (tolerance %.0e), "
               "two GPU runs identical\n",
               name, k, rel, tol[k]);
        ck_assert_msg(rel <= tol[k], "%s output %d: %g > %g", name, k, rel, tol[k]);
    }
    out_free(&oc);
    out_free(&og[0]);
    out_free(&og[1]);
    sl_backend_destroy(cpu_be);
}
/* check_op(name, op, gpu, tol): tol an array in scope, one entry per output */
#define check_op(name, op, gpu, tol) check_op_n(name, op, gpu, tol, (int)(sizeof tol / sizeof tol[0]))

/* Inputs, the same on every device: rows x c, GPT-2's width. */
enum { ROWS = 1000, C = 768, VOCAB = 5003, LM_ROWS = 70, EMB_N = 3, EMB_T = 200 };

static float *host_normal(size_t n, uint64_t seed, float scale)
{
    float *h = malloc(n * sizeof(float));
    ck_assert(h);
    th_fill_normal(h, n, seed, scale);
    return h;
}

static float *dev_normal(dev *d, size_t n, uint64_t seed, float scale)
{
    float *h = host_normal(n, seed, scale);
    float *p = dev_up(d, h, n * sizeof(float));
    free(h);
    return p;
}

static void op_layernorm(dev *d, outputs *o)
{
    size_t n = (size_t)ROWS * C;
    float *x = dev_normal(d, n, 1, 2.0f), *w = dev_normal(d, C, 2, 1.0f),
          *b = dev_normal(d, C, 3, 1.0f), *dy = dev_normal(d, n, 4, 1.0f);
    float *y = dev_alloc(d, n * sizeof(float)), *stats = dev_alloc(d, 2 * ROWS * sizeof(float));
    float *dx = dev_normal(d, n, 5, 1.0f); /* accumulated into */
    float *dw = dev_normal(d, C, 6, 1.0f), *db = dev_normal(d, C, 7, 1.0f);
    d->be->layernorm_forward(&d->ex, ROWS, C, x, w, b, 1e-5f, y, stats, stats + ROWS);
    d->be->layernorm_backward(&d->ex, ROWS, C, x, dy, w, stats, stats + ROWS, dx, 1, dw, db);
    out_add(o, d, y, n);
    out_add(o, d, dx, n);
    out_add(o, d, dw, C);
    out_add(o, d, db, C);
}

static void op_bias_gelu(dev *d, outputs *o)
{
    size_t n = (size_t)ROWS * C;
    float *dy = dev_normal(d, n, 8, 1.0f), *db = dev_normal(d, C, 9, 1.0f);
    float *x = dev_normal(d, n, 10, 3.0f), *y = dev_alloc(d, n * sizeof(float));
    float *dx = dev_alloc(d, n * sizeof(float));
    d->be->bias_backward(&d->ex, ROWS, C, dy, db);
    d->be->gelu_forward(&d->ex, n, x, y);
    d->be->gelu_backward(&d->ex, n, x, dy, dx, 0);
    out_add(o, d, db, C);
    out_add(o, d, y, n);
    out_add(o, d, dx, n);
}

/* The column sums at a height the GPU splits into parts (base/col_grid.h:
 * 8195 rows are 8 parts of a cluster, the last one short) and widths
 * that end mid-tile: the bias gradient, float and bf16, and LayerNorm's
 * parameter sums, float and bf16; and LayerNorm's input gradient written
 * without accumulating (lanes past the row's end idle). */
static void op_column_sums_tall(dev *d, outputs *o)
{
    enum { TR = 8195, TC = 45 };
    size_t n = (size_t)TR * TC;
    float *x = dev_normal(d, n, 130, 2.0f), *dy = dev_normal(d, n, 131, 1.0f);
    float *w = dev_normal(d, TC, 132, 1.0f), *b = dev_normal(d, TC, 133, 1.0f);
    float *db = dev_normal(d, TC, 134, 1.0f), *lw = dev_normal(d, TC, 135, 1.0f);
    float *lb = dev_normal(d, TC, 136, 1.0f);
    float *y = dev_alloc(d, n * sizeof(float)), *stats = dev_alloc(d, 2 * TR * sizeof(float));
    float *dx = dev_alloc(d, n * sizeof(float));
    d->be->bias_backward(&d->ex, TR, TC, dy, db);
    d->be->layernorm_forward(&d->ex, TR, TC, x, w, b, 1e-5f, y, stats, stats + TR);
    d->be->layernorm_backward(&d->ex, TR, TC, x, dy, w, stats, stats + TR, NULL, 0, lw, lb);
    out_add(o, d, db, TC);
    out_add(o, d, lw, TC);
    out_add(o, d, lb, TC);
    d->be->layernorm_backward(&d->ex, TR, TC, x, dy, w, stats, stats + TR, dx, 0, lw, lb);
    out_add(o, d, dx, n);
    uint16_t *x16 = dev_alloc(d, n * sizeof(uint16_t)), *dy16 = dev_alloc(d, n * sizeof(uint16_t));
    d->be->cast(&d->ex, n, x, SL_DTYPE_F32, x16, SL_DTYPE_BF16);
    d->be->cast(&d->ex, n, dy, SL_DTYPE_F32, dy16, SL_DTYPE_BF16);
    sl_exec e = d->ex;
    e.bf16 = 1;
    const float *xf = (const float *)(const void *)x16, *dyf = (const float *)(const void *)dy16;
    d->be->bias_backward(&e, TR, TC, dyf, db);
    d->be->layernorm_forward(&e, TR, TC, xf, w, b, 1e-5f, (float *)(void *)y, stats, stats + TR);
    d->be->layernorm_backward(&e, TR, TC, xf, dyf, w, stats, stats + TR, NULL, 0, lw, lb);
    out_add(o, d, db, TC);
    out_add(o, d, lw, TC);
    out_add(o, d, lb, TC);
    uint16_t *dx16 = dev_alloc(d, n * sizeof(uint16_t));
    d->be->layernorm_backward(&e, TR, TC, xf, dyf, w, stats, stats + TR, (float *)(void *)dx16, 0,
                              lw, lb);
    d->be->cast(&d->ex, n, dx16, SL_DTYPE_BF16, dx, SL_DTYPE_F32);
    out_add(o, d, dx, n);
}

/* LayerNorm at the widths of each register path (300 columns: 16 a lane;
 * 1000: 32) with dx written over dy (the interface allows it),
 * accumulating and not, at heights of one part (100 rows: a cluster of
 * one) and of under one run (20 rows); the bias gradient of those
 * shapes. */
static void op_norm_shapes(dev *d, outputs *o)
{
    enum { R1 = 20, C1 = 300, R2 = 100, C2 = 1000 };
    float *x1 = dev_normal(d, R1 * C1, 140, 2.0f), *dy1 = dev_normal(d, R1 * C1, 141, 1.0f);
    float *w1 = dev_normal(d, C1, 142, 1.0f), *b1 = dev_normal(d, C1, 143, 1.0f);
    float *y1 = dev_alloc(d, R1 * C1 * sizeof(float)), *st1 = dev_alloc(d, 2 * R1 * sizeof(float));
    float *x2 = dev_normal(d, R2 * C2, 144, 2.0f), *dy2 = dev_normal(d, R2 * C2, 145, 1.0f);
    float *w2 = dev_normal(d, C2, 146, 1.0f), *st2 = dev_alloc(d, 2 * R2 * sizeof(float));
    float *g1 = dev_normal(d, 2 * C1, 147, 1.0f), *g2 = dev_normal(d, 2 * C2 + C1, 148, 1.0f);
    float *y2 = dev_alloc(d, R2 * C2 * sizeof(float));
    d->be->layernorm_forward(&d->ex, R1, C1, x1, w1, b1, 1e-5f, y1, st1, st1 + R1);
    d->be->bias_backward(&d->ex, R1, C1, dy1, g2 + 2 * C2);
    /* dx over dy, accumulating: dy1 becomes dy1 + dx */
    d->be->layernorm_backward(&d->ex, R1, C1, x1, dy1, w1, st1, st1 + R1, dy1, 1, g1, g1 + C1);
    d->be->layernorm_forward(&d->ex, R2, C2, x2, w2, w2, 1e-5f, y2, st2, st2 + R2);
    d->be->bias_backward(&d->ex, R2, C2, dy2, y2); /* into the first C2 of y2 */
    /* dx over dy, not accumulating */
    d->be->layernorm_backward(&d->ex, R2, C2, x2, dy2, w2, st2, st2 + R2, dy2, 0, g2, g2 + C2);
    out_add(o, d, y1, R1 * C1);
    out_add(o, d, dy1, R1 * C1);
    out_add(o, d, g1, 2 * C1);
    out_add(o, d, dy2, R2 * C2);
    out_add(o, d, g2, 2 * C2 + C1);
    out_add(o, d, y2, C2);
}

/* Their tolerances, on either traversal of the column sums. The sums in
 * another order of double adds: at most the float rounding of the total;
 * the input gradients as in the layernorm ops (1e-5 float, a bf16 unit in
 * bf16). tall: bias, weight and bias sums, dx (float); the same in bf16.
 * shape: y, dx over dy (accumulated), parameter sums; dx over dy,
 * parameter and bias sums; a bias sum. */
static const double tall_tol[] = {1e-6, 1e-6, 1e-6, 1e-5, 1e-6, 1e-6, 1e-6, 8e-3};
static const double shape_tol[] = {1e-6, 1e-5, 1e-6, 1e-5, 1e-6, 1e-6};

/* A bf16 copy of a normal float array (scratch f: n floats). */
static uint16_t *dev_normal_bf16(dev *d, float *f, size_t n, uint64_t seed, float scale)
{
    float *h = host_normal(n, seed, scale);
    d->be->upload(&d->ex, f, h, n * sizeof(float));
    free(h);
    uint16_t *b = dev_alloc(d, n * sizeof(uint16_t));
    d->be->cast(&d->ex, n, f, SL_DTYPE_F32, b, SL_DTYPE_BF16);
    return b;
}

/* bf16 output b widened (through scratch f) into the outputs. */
static void out_bf16(outputs *o, dev *d, float *f, const uint16_t *b, size_t n)
{
    d->be->cast(&d->ex, n, b, SL_DTYPE_BF16, f, SL_DTYPE_F32);
    out_add(o, d, f, n);
}

/* The kernel families on bf16 activations (ex.bf16): LayerNorm, GELU, the
 * adds and copies, ReLU; weights, statistics and parameter gradients
 * float. */
static void op_bf16_kernels(dev *d, outputs *o)
{
    unsigned fam = SL_BF16_RELU | SL_BF16_ADD | SL_BF16_LAYERNORM | SL_BF16_GELU;
    ck_assert_msg((d->be->bf16_kernels & fam) == fam, "%s: bf16 kernels 0x%x", d->be->name,
                  d->be->bf16_kernels);
    size_t n = (size_t)ROWS * C;
    float *f = dev_alloc(d, n * sizeof(float));
    uint16_t *x = dev_normal_bf16(d, f, n, 120, 2.0f), *dy = dev_normal_bf16(d, f, n, 121, 1.0f);
    uint16_t *acc = dev_normal_bf16(d, f, n, 122, 1.0f); /* accumulated into */
    uint16_t *y = dev_alloc(d, n * sizeof(uint16_t)), *g = dev_alloc(d, n * sizeof(uint16_t));
    float *w = dev_normal(d, C, 123, 1.0f), *b = dev_normal(d, C, 124, 1.0f);
    float *stats = dev_alloc(d, 2 * ROWS * sizeof(float));
    float *dw = dev_normal(d, C, 125, 1.0f), *db = dev_normal(d, C, 126, 1.0f);
    sl_exec e = d->ex;
    e.bf16 = 1;
    const float *xf = (const float *)(const void *)x, *dyf = (const float *)(const void *)dy;
    float *yf = (float *)(void *)y, *gf = (float *)(void *)g, *accf = (float *)(void *)acc;
    d->be->layernorm_forward(&e, ROWS, C, xf, w, b, 1e-5f, yf, stats, stats + ROWS);
    out_bf16(o, d, f, y, n);
    d->be->layernorm_backward(&e, ROWS, C, xf, dyf, w, stats, stats + ROWS, accf, 1, dw, db);
    out_bf16(o, d, f, acc, n);
    out_add(o, d, dw, C);
    out_add(o, d, db, C);
    d->be->gelu_forward(&e, n, xf, gf);
    out_bf16(o, d, f, g, n);
    d->be->gelu_backward(&e, n, xf, dyf, gf, 0);
    out_bf16(o, d, f, g, n);
    /* the adds: whole groups, then from element 1 (the unaligned path) */
    d->be->add(&e, n, xf, dyf, yf);
    d->be->add(&e, n - 1, (const float *)(const void *)(x + 1),
               (const float *)(const void *)(dy + 1), (float *)(void *)(y + 1));
    out_bf16(o, d, f, y, n);
    /* y += dy, then y += relu'(relu(x), dy) */
    d->be->copy(&e, n, dyf, yf, 1);
    d->be->relu_forward(&e, n, xf, gf);
    d->be->relu_backward(&e, n, gf, dyf, yf, 1);
    out_bf16(o, d, f, y, n);
}

static void op_embedding(dev *d, outputs *o)
{
    int tokens = EMB_N * EMB_T;
    int32_t ids[EMB_N * EMB_T];
    for (int i = 0; i < tokens; i++) /* repeats (one id very often) and one bad id */
        ids[i] = i % 5 == 0 ? 17 : (i * 7919) % VOCAB;
    ids[tokens / 2] = VOCAB + 3;
    size_t te = (size_t)VOCAB * C, pe = (size_t)EMB_T * C;
    int32_t *dids = dev_up(d, ids, sizeof ids);
    float *dy = dev_normal(d, (size_t)tokens * C, 11, 1.0f);
    float *dwte = dev_normal(d, te, 12, 1.0f), *dwpe = dev_normal(d, pe, 13, 1.0f);
    size_t ws_bytes =
        d->be->embedding_workspace_bytes ? d->be->embedding_workspace_bytes(d->be, tokens) : 0;
    void *ws = ws_bytes ? dev_alloc(d, ws_bytes) : NULL;
    d->be->embedding_backward(&d->ex, EMB_N, EMB_T, C, VOCAB, dids, dy, dwte, dwpe, ws);
    out_add(o, d, dwte, te);
    out_add(o, d, dwpe, pe);
}

static void op_lm_loss(dev *d, outputs *o)
{
    size_t n = (size_t)LM_ROWS * VOCAB;
    int labels[LM_ROWS], counted = 0;
    for (int r = 0; r < LM_ROWS; r++) {
        labels[r] = r % 7 == 3 ? -100 : (r * 131) % VOCAB;
        counted += labels[r] != -100;
    }
    float *h = host_normal(n, 14, 4.0f);
    for (int r = 0; r < LM_ROWS; r += 5) /* some rows predict their label */
        if (labels[r] >= 0)
            h[(size_t)r * VOCAB + labels[r]] = 30.0f;
    /* the second copy rows LD floats apart, the gaps holding a value that
     * would win every row's maximum if a kernel read past vocab */
    enum { LD = VOCAB + 3 };
    float *hp = malloc((size_t)LM_ROWS * LD * sizeof(float));
    ck_assert(hp);
    for (int r = 0; r < LM_ROWS; r++)
        for (int j = 0; j < LD; j++)
            hp[(size_t)r * LD + j] = j < VOCAB ? h[(size_t)r * VOCAB + j] : 1e30f;
    float *lg = dev_up(d, h, n * sizeof(float));
    float *lg2 = dev_up(d, hp, (size_t)LM_ROWS * LD * sizeof(float));
    free(h);
    free(hp);
    int *dl = dev_up(d, labels, sizeof labels);
    double *row_loss = dev_alloc(d, LM_ROWS * sizeof(double));
    int *row_hit = dev_alloc(d, LM_ROWS * sizeof(int));
    double *row_loss2 = dev_alloc(d, LM_ROWS * sizeof(double));
    int *row_hit2 = dev_alloc(d, LM_ROWS * sizeof(int));
    float scale = 1.0f / (float)counted;
    d->be->lm_xent(&d->ex, LM_ROWS, VOCAB, VOCAB, lg, dl, -100, scale, 1, row_loss, row_hit);
    d->be->lm_xent(&d->ex, LM_ROWS, VOCAB, LD, lg2, dl, -100, scale, 0, row_loss2, row_hit2);
    float total[2] = {0.0f, 0.0f}; /* loss, hits (as a float) */
    int hits = 0;
    if (d->be->lm_xent_total) {
        void *ws = dev_alloc(d, 16);
        d->be->lm_xent_total(&d->ex, LM_ROWS, row_loss, row_hit, counted, &total[0], &hits, ws);
        ck_assert(d->be->sync(&d->ex) == SL_OK);
    } else {
        double s = 0.0;
        for (int r = 0; r < LM_ROWS; r++) {
            s += row_loss[r];
            hits += row_hit[r];
        }
        total[0] = (float)(s / counted);
    }
    double rl[2][LM_ROWS];
    int rh[2][LM_ROWS];
    dev_down(d, rl[0], row_loss, sizeof rl[0]);
    dev_down(d, rl[1], row_loss2, sizeof rl[1]);
    dev_down(d, rh[0], row_hit, sizeof rh[0]);
    dev_down(d, rh[1], row_hit2, sizeof rh[1]);
    int h_sum = 0;
    for (int r = 0; r < LM_ROWS; r++) { /* the two modes and layouts agree on every row */
        ck_assert(memcmp(&rl[0][r], &rl[1][r], sizeof(double)) == 0 && rh[0][r] == rh[1][r]);
        h_sum += rh[0][r];
    }
    ck_assert_int_eq(hits, h_sum);
    ck_assert_int_gt(hits, 0);
    total[1] = (float)hits;
    out_add(o, d, lg, n);
    out_host(o, total, 2);
    out_doubles(o, d, row_loss, LM_ROWS);
}

/* lm_xent on bf16 logits (a bf16 head's, ex.bf16), rows LD apart with
 * padding that would win every maximum: on each device, the float
 * kernel's results on the widened logits, rounded (the gradient's bits,
 * the row losses' and hits exactly). Outputs: the gradient, the losses. */
static void op_lm_loss_bf16(dev *d, outputs *o)
{
    enum { LD = VOCAB + 3 };
    size_t n = (size_t)LM_ROWS * VOCAB, nl = (size_t)LM_ROWS * LD;
    int labels[LM_ROWS], counted = 0;
    for (int r = 0; r < LM_ROWS; r++) {
        labels[r] = r % 6 == 2 ? -100 : (r * 137 + 5) % VOCAB;
        counted += labels[r] != -100;
    }
    float *h = host_normal(n, 17, 4.0f);
    uint16_t *h16 = malloc(nl * sizeof(uint16_t));
    ck_assert(h16);
    for (int r = 0; r < LM_ROWS; r++)
        for (int j = 0; j < LD; j++) {
            float v = j < VOCAB ? h[(size_t)r * VOCAB + j] : 3e38f;
            h16[(size_t)r * LD + j] = sl_bf16_round(v);
            if (j < VOCAB)
                h[(size_t)r * VOCAB + j] = sl_bf16_widen(h16[(size_t)r * LD + j]);
        }
    float *lg = dev_up(d, h, n * sizeof(float));
    uint16_t *lg16 = dev_up(d, h16, nl * sizeof(uint16_t));
    int *dl = dev_up(d, labels, sizeof labels);
    double *loss = dev_alloc(d, 2 * LM_ROWS * sizeof(double));
    int *hit = dev_alloc(d, 2 * LM_ROWS * sizeof(int));
    float scale = 1.0f / (float)counted;
    sl_exec e = d->ex;
    e.bf16 = 1;
    d->be->lm_xent(&d->ex, LM_ROWS, VOCAB, VOCAB, lg, dl, -100, scale, 1, loss, hit);
    d->be->lm_xent(&e, LM_ROWS, VOCAB, LD, (float *)(void *)lg16, dl, -100, scale, 1,
                   loss + LM_ROWS, hit + LM_ROWS);
    float *g = malloc(n * sizeof(float));
    double rl[2 * LM_ROWS];
    int rh[2 * LM_ROWS];
    ck_assert(g);
    dev_down(d, g, lg, n * sizeof(float));
    dev_down(d, h16, lg16, nl * sizeof(uint16_t));
    dev_down(d, rl, loss, sizeof rl);
    dev_down(d, rh, hit, sizeof rh);
    for (int r = 0; r < LM_ROWS; r++) {
        ck_assert_msg(memcmp(&rl[r], &rl[LM_ROWS + r], sizeof(double)) == 0 &&
                          rh[r] == rh[LM_ROWS + r],
                      "%s: bf16 row %d: loss %.17g hit %d, on the widened row %.17g, %d",
                      d->be->name, r, rl[LM_ROWS + r], rh[LM_ROWS + r], rl[r], rh[r]);
        for (int j = 0; j < VOCAB; j++)
            ck_assert_msg(h16[(size_t)r * LD + j] == sl_bf16_round(g[(size_t)r * VOCAB + j]),
                          "%s: bf16 gradient (%d, %d)", d->be->name, r, j);
    }
    for (size_t i = 0; i < n; i++) /* the gradient, widened, as an output */
        g[i] = sl_bf16_widen(h16[i / VOCAB * LD + i % VOCAB]);
    out_host(o, g, n);
    out_doubles(o, d, loss + LM_ROWS, LM_ROWS);
    free(h), free(h16), free(g);
}

/* lm_xent over GPT-2's vocabulary, rows LDW = V + 2 values apart: the
 * rows of a chunk then start at every address modulo 16 a float row
 * (4 of them) or a bf16 row (8) can start at, so the CUDA backend's
 * staged rows (cuda_loss_optim.cu, base/row_stage.h) meet every head and
 * tail; the two padding values of each row hold a value that would win
 * every maximum and must come back untouched. One row ignored, one that
 * predicts its label. `odd` (the GPU-only comparison of the two CUDA
 * kernels) adds rows with a NaN, +inf and -inf logit and a label past
 * the row. Outputs: the gradient (widened, for bf16), the row losses and
 * the hits. */
enum { WIDE_R = 9, WIDE_V = 50257, WIDE_LD = WIDE_V + 2 };

static void lm_wide(dev *d, outputs *o, int bf16, int odd)
{
    enum { R = WIDE_R, V = WIDE_V, LDW = WIDE_LD };
    int labels[R], counted = 0;
    for (int r = 0; r < R; r++) {
        labels[r] = r == 4 ? -100 : (r * 7919 + 11) % V;
        if (odd && r == 7)
            labels[r] = V + 5; /* outside the row: its logit reads as NaN */
        counted += labels[r] != -100;
    }
    size_t nl = (size_t)R * LDW;
    float *h = host_normal(nl, 31 + (uint64_t)bf16, 3.0f);
    const float pad = bf16 ? 3e38f : 1e30f;
    for (int r = 0; r < R; r++)
        for (int j = V; j < LDW; j++)
            h[(size_t)r * LDW + j] = pad;
    h[(size_t)2 * LDW + labels[2]] = 25.0f; /* a row that predicts its label */
    if (odd) {
        h[(size_t)1 * LDW + 17] = NAN;
        h[(size_t)5 * LDW + 40000] = INFINITY;
        h[(size_t)6 * LDW + 3] = -INFINITY;
    }
    float scale = 1.0f / (float)counted;
    sl_exec e = d->ex;
    e.bf16 = bf16;
    void *lg;
    uint16_t *h16 = NULL;
    if (bf16) {
        h16 = malloc(nl * sizeof(uint16_t));
        ck_assert(h16);
        for (size_t i = 0; i < nl; i++)
            h16[i] = sl_bf16_round(h[i]);
        lg = dev_up(d, h16, nl * sizeof(uint16_t));
    } else {
        lg = dev_up(d, h, nl * sizeof(float));
    }
    int *dl = dev_up(d, labels, sizeof labels);
    double *loss = dev_alloc(d, R * sizeof(double));
    int *hit = dev_alloc(d, R * sizeof(int));
    d->be->lm_xent(&e, R, V, LDW, (float *)lg, dl, -100, scale, 1, loss, hit);
    size_t n = (size_t)R * V;
    float *g = malloc(n * sizeof(float) + 4), *gl = malloc(nl * sizeof(float));
    ck_assert(g && gl);
    if (bf16) {
        dev_down(d, h16, lg, nl * sizeof(uint16_t));
        for (size_t i = 0; i < nl; i++)
            gl[i] = sl_bf16_widen(h16[i]);
    } else {
        dev_down(d, gl, lg, nl * sizeof(float));
    }
    for (int r = 0; r < R; r++)
        for (int j = V; j < LDW; j++)
            ck_assert_msg(gl[(size_t)r * LDW + j] == (bf16 ? sl_bf16_widen(sl_bf16_round(pad)) : pad),
                          "%s: lm_xent wrote row %d's padding (column %d)", d->be->name, r, j);
    for (size_t i = 0; i < n; i++)
        g[i] = gl[i / V * LDW + i % V];
    out_host(o, g, n);
    out_doubles(o, d, loss, R);
    out_ints(o, d, hit, R);
    free(g), free(gl), free(h), free(h16);
}

static void op_lm_loss_wide(dev *d, outputs *o) { lm_wide(d, o, 0, 0); }
static void op_lm_loss_wide_bf16(dev *d, outputs *o) { lm_wide(d, o, 1, 0); }
static void op_lm_loss_odd(dev *d, outputs *o) { lm_wide(d, o, 0, 1); }
static void op_lm_loss_odd_bf16(dev *d, outputs *o) { lm_wide(d, o, 1, 1); }

/* Casts both ways: F32 -> BF16 -> F32 over normal values, exact ties,
 * the edges of the range, subnormals, zeros, infinities and NaN; the CPU
 * backend's against the rule itself (base/element.h, checked against
 * exact arithmetic by test_file_dtypes). */
static void op_cast(dev *d, outputs *o)
{
    enum { N = 100003 };
    float *h = host_normal(N, 15, 10.0f);
    const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u,
                              0x3f818000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u,
                              0xff800000u, 0x7fc00000u, 0xffa00001u, 0x7f800001u};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        memcpy(&h[i], &edges[i], sizeof(float));
    for (int i = 20; i < N; i += 7) { /* exact ties between two bf16 values */
        uint32_t u;
        memcpy(&u, &h[i], sizeof u);
        u = (u & 0xFFFF0000u) | 0x8000u;
        memcpy(&h[i], &u, sizeof u);
    }
    float *x = dev_up(d, h, N * sizeof(float));
    uint16_t *b = dev_alloc(d, N * sizeof(uint16_t));
    float *back = dev_alloc(d, N * sizeof(float));
    d->be->cast(&d->ex, N, x, SL_DTYPE_F32, b, SL_DTYPE_BF16);
    d->be->cast(&d->ex, N, b, SL_DTYPE_BF16, back, SL_DTYPE_F32);
    /* pointers off a 16-byte boundary (an element a thread on a GPU) */
    uint16_t *b1 = dev_alloc(d, N * sizeof(uint16_t));
    d->be->cast(&d->ex, N - 1, x + 1, SL_DTYPE_F32, b1 + 1, SL_DTYPE_BF16);
    /* and back, off a boundary: b1 + 1 widened into back1 + 1 */
    float *back1 = dev_alloc(d, N * sizeof(float));
    d->be->cast(&d->ex, N - 1, b1 + 1, SL_DTYPE_BF16, back1 + 1, SL_DTYPE_F32);
    uint16_t *hb = malloc(2 * N * sizeof(uint16_t));
    ck_assert(hb);
    dev_down(d, hb, b, N * sizeof(uint16_t));
    dev_down(d, hb + N, b1, N * sizeof(uint16_t));
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (hb[i] != sl_bf16_round(h[i]) || (i > 0 && hb[N + i] != sl_bf16_round(h[i])))
            bad = i;
    ck_assert_msg(bad < 0, "%s: cast of %a gave %04x (%04x off a boundary), the rule %04x",
                  d->be->name, h[bad < 0 ? 0 : bad], hb[bad < 0 ? 0 : bad],
                  hb[N + (bad < 0 ? 0 : bad)], sl_bf16_round(h[bad < 0 ? 0 : bad]));
    float *hw = malloc(N * sizeof(float));
    ck_assert(hw);
    dev_down(d, hw, back1, N * sizeof(float));
    for (int i = 1; i < N && bad < 0; i++) {
        float want = sl_bf16_widen(hb[N + i]); /* b1's, widened; bits: NaN payloads too */
        if (memcmp(&hw[i], &want, sizeof want) != 0)
            bad = i;
    }
    ck_assert_msg(bad < 0, "%s: widening %04x off a boundary gave %a", d->be->name,
                  hb[N + (bad < 0 ? 0 : bad)], hw[bad < 0 ? 0 : bad]);
    free(hw);
    free(hb);
    free(h);
    out_add(o, d, back, N);
}

/* ---- the rest of the table: GEMMs, convolutions, BatchNorm, pooling,
 * elementwise maps, dropout, the classifier's loss, the optimizers and a
 * decoding step ---- */

static void op_gemm(dev *d, outputs *o)
{
    enum { M = 67, N = 129, K = 300 };
    for (int t = 0; t < 4; t++) { /* the four transposes, beta 0 and 1 */
        int ta = t & 1, tb = t >> 1;
        float *a = dev_normal(d, (size_t)M * K, 20 + (uint64_t)t, 1.0f);
        float *b = dev_normal(d, (size_t)K * N, 30 + (uint64_t)t, 1.0f);
        float *c = dev_normal(d, (size_t)M * N, 40 + (uint64_t)t, 1.0f);
        d->be->gemm(&d->ex, ta, tb, M, N, K, 0.5f, a, ta ? M : K, b, tb ? K : N, t == 3 ? 1.0f : 0.0f,
                    c, N);
        out_add(o, d, c, (size_t)M * N);
    }
}

/* y = op(A) op(B) + bias: the backend's gemm_bias where it has one (the
 * GPU: cuBLASLt's BIAS epilogue), else gemm then bias_add (the CPU). The
 * four transposes at an odd shape with the bias and C one float off their
 * buffers' starts (4-byte aligned: C's algorithm must allow it; the
 * bias then takes gemm and bias_add on a GPU), and a GPT-2-like aligned
 * shape (the epilogue). */
static void op_gemm_bias(dev *d, outputs *o)
{
    enum { M = 67, N = 129, K = 300 };
    /* the operands of every case (the aligned one's are smaller) */
    float *a = dev_normal(d, (size_t)M * K, 60, 1.0f), *b = dev_normal(d, (size_t)K * N, 70, 1.0f);
    for (int t = 0; t < 5; t++) {
        int ta = t & 1, tb = (t >> 1) & 1, m = t < 4 ? M : 256, n = t < 4 ? N : 192,
            k = t < 4 ? K : 64, off = t < 4;
        float *bias = dev_normal(d, (size_t)n + 1, 80 + (uint64_t)t, 1.0f) + off;
        float *c = dev_normal(d, (size_t)m * n + 1, 90 + (uint64_t)t, 1.0f) + off;
        if (d->be->gemm_bias)
            d->be->gemm_bias(&d->ex, ta, tb, m, n, k, a, ta ? m : k, b, tb ? k : n, bias, c, n);
        else {
            d->be->gemm(&d->ex, ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
            d->be->bias_add(&d->ex, m, n, bias, c);
        }
        out_add(o, d, c, (size_t)m * n);
    }
}

/* gemm_bf16 where the backend has it (SL_BF16_GEMM: cuBLASLt on a GPU,
 * oneDNN on a CPU with bf16 dot products), else the same product on the
 * widened operands in float (exact products, float sums): the four
 * transposes with float and bf16 outputs, a bias or an accumulation. */
static void op_gemm_bf16(dev *d, outputs *o)
{
    enum { M = 67, N = 45, K = 130 };
    const sl_backend *be = d->be;
    int native = (be->bf16_kernels & SL_BF16_GEMM) && be->gemm_bf16;
    float *af = dev_normal(d, (size_t)M * K, 111, 1.0f), *bf = dev_normal(d, (size_t)K * N, 112, 1.0f);
    uint16_t *a = dev_alloc(d, (size_t)M * K * 2), *b = dev_alloc(d, (size_t)K * N * 2);
    be->cast(&d->ex, (size_t)M * K, af, SL_DTYPE_F32, a, SL_DTYPE_BF16);
    be->cast(&d->ex, (size_t)K * N, bf, SL_DTYPE_F32, b, SL_DTYPE_BF16);
    /* af, bf: the operands as the bf16 GEMM reads them */
    be->cast(&d->ex, (size_t)M * K, a, SL_DTYPE_BF16, af, SL_DTYPE_F32);
    be->cast(&d->ex, (size_t)K * N, b, SL_DTYPE_BF16, bf, SL_DTYPE_F32);
    float *bias = dev_normal(d, N, 113, 1.0f);
    for (int t = 0; t < 4; t++) {
        int ta = t & 1, tb = t >> 1, out16 = t >= 2, acc = t & 1;
        sl_gemm_bf16_desc g = {ta, tb, M, N, K, ta ? M : K, tb ? K : N, N, out16, acc, !acc};
        float *cf = dev_normal(d, (size_t)M * N, 120 + (uint64_t)t, 1.0f);
        uint16_t *c16 = NULL;
        if (out16) {
            c16 = dev_alloc(d, (size_t)M * N * 2);
            be->cast(&d->ex, (size_t)M * N, cf, SL_DTYPE_F32, c16, SL_DTYPE_BF16);
        }
        if (native) {
            size_t ws = be->gemm_bf16_workspace_bytes(be, &g);
            ck_assert_msg(ws != SIZE_MAX, "%s: %s", be->name, sl_last_error());
            be->gemm_bf16(&d->ex, &g, a, b, acc ? NULL : bias, out16 ? (void *)c16 : (void *)cf,
                          ws ? dev_alloc(d, ws) : NULL);
        } else {
            if (out16) /* the start c as the bf16 GEMM reads it */
                be->cast(&d->ex, (size_t)M * N, c16, SL_DTYPE_BF16, cf, SL_DTYPE_F32);
            be->gemm(&d->ex, ta, tb, M, N, K, 1.0f, af, ta ? M : K, bf, tb ? K : N,
                     acc ? 1.0f : 0.0f, cf, N);
            if (!acc)
                be->bias_add(&d->ex, M, N, bias, cf);
            if (out16)
                be->cast(&d->ex, (size_t)M * N, cf, SL_DTYPE_F32, c16, SL_DTYPE_BF16);
        }
        if (out16) /* compared widened */
            be->cast(&d->ex, (size_t)M * N, c16, SL_DTYPE_BF16, cf, SL_DTYPE_F32);
        out_add(o, d, cf, (size_t)M * N);
    }
}

static void *conv_ws(dev *d, const sl_conv_desc *c, sl_conv_pass pass)
{
    size_t b = d->be->conv2d_workspace_bytes(d->be, c, pass);
    ck_assert_msg(b != SIZE_MAX, "%s: %s", d->be->name, sl_last_error());
    return b ? dev_alloc(d, b) : NULL;
}

static void op_conv(dev *d, outputs *o)
{
    sl_conv_desc c = {4, 16, 15, 15, 24, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0};
    size_t nx = (size_t)c.n * c.c * c.h * c.w, ny = (size_t)c.n * c.k * c.oh * c.ow;
    size_t nw = (size_t)c.k * (c.c / c.groups) * c.kh * c.kw;
    float *x = dev_normal(d, nx, 50, 1.0f), *w = dev_normal(d, nw, 51, 0.2f);
    float *bias = dev_normal(d, (size_t)c.k, 52, 1.0f), *dy = dev_normal(d, ny, 53, 1.0f);
    float *y = dev_alloc(d, ny * sizeof(float));
    float *dx = dev_normal(d, nx, 54, 1.0f); /* accumulated into */
    float *dw = dev_normal(d, nw, 55, 1.0f), *db = dev_normal(d, (size_t)c.k, 56, 1.0f);
    d->be->conv2d_forward(&d->ex, &c, x, w, bias, y, conv_ws(d, &c, SL_CONV_FWD));
    d->be->conv2d_backward_data(&d->ex, &c, w, dy, dx, 1, conv_ws(d, &c, SL_CONV_BWD_DATA));
    d->be->conv2d_backward_filter(&d->ex, &c, x, dy, dw, db, conv_ws(d, &c, SL_CONV_BWD_FILTER));
    out_add(o, d, y, ny);
    out_add(o, d, dx, nx);
    out_add(o, d, dw, nw);
    out_add(o, d, db, (size_t)c.k);
}

/* 1x1 convolutions without padding, whose filter gradient (and, where
 * strided, input gradient) a deterministic CUDA instance takes as cuBLAS
 * GEMMs (base/conv_gemm.h): 3 images of 23 x 23 pixels, 20 -> 12
 * channels (the pixels cut into 8 pieces, the last shorter, on any GPU
 * of 7 or more multiprocessors); 20 images of 2 x 2 pixels, 1024 -> 1024
 * channels (4 MiB of partials an image: two groups, of 16 and 4); the
 * first again at stride 2 (12 x 12 points from odd sizes, cut into 2
 * pieces); 2 images of 9 x 10 at strides 2 and 3; and 20 images of
 * 3 x 3, 1024 -> 1024 channels at stride 2 (2 x 2 points; partials and
 * gathered inputs pass 64 MiB: groups of 15 and 5). The input
 * gradient's products pass 64 MiB only beside inputs of over 256 MB:
 * test_conv1x1_small_cap cuts them into groups under a cap of 16 KiB.
 * Each: y, dx accumulated, dx written (over other values: the points
 * between the stride's must be zeroed), dw (accumulated), dbias. */
enum { CONV1X1_GEOMS = 5 };
/* n c h w  k oh ow  kh kw sh sw ph pw dh dw  groups bf16 */
static const sl_conv_desc conv1x1_geoms[CONV1X1_GEOMS] = {
    {3, 20, 23, 23, 12, 23, 23, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},
    {20, 1024, 2, 2, 1024, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},
    {3, 20, 23, 23, 12, 12, 12, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0},
    {2, 16, 9, 10, 8, 5, 4, 1, 1, 2, 3, 0, 0, 1, 1, 1, 0},
    {20, 1024, 3, 3, 1024, 2, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0}};

static void op_conv1x1(dev *d, outputs *o)
{
    for (int i = 0; i < CONV1X1_GEOMS; i++) {
        const sl_conv_desc *c = &conv1x1_geoms[i];
        size_t nx = (size_t)c->n * c->c * c->h * c->w, ny = (size_t)c->n * c->k * c->oh * c->ow;
        size_t nw = (size_t)c->k * c->c;
        uint64_t sd = 60 + 10 * (uint64_t)i;
        float *x = dev_normal(d, nx, sd, 1.0f), *w = dev_normal(d, nw, sd + 1, 0.2f);
        float *bias = dev_normal(d, (size_t)c->k, sd + 2, 1.0f);
        float *dy = dev_normal(d, ny, sd + 3, 1.0f), *y = dev_alloc(d, ny * sizeof(float));
        float *dx = dev_normal(d, nx, sd + 4, 1.0f), *dw = dev_normal(d, nw, sd + 5, 1.0f);
        float *dx2 = dev_normal(d, nx, sd + 7, 1.0f);
        float *db = dev_normal(d, (size_t)c->k, sd + 6, 1.0f);
        d->be->conv2d_forward(&d->ex, c, x, w, bias, y, conv_ws(d, c, SL_CONV_FWD));
        d->be->conv2d_backward_data(&d->ex, c, w, dy, dx, 1, conv_ws(d, c, SL_CONV_BWD_DATA));
        d->be->conv2d_backward_data(&d->ex, c, w, dy, dx2, 0, conv_ws(d, c, SL_CONV_BWD_DATA));
        d->be->conv2d_backward_filter(&d->ex, c, x, dy, dw, db,
                                      conv_ws(d, c, SL_CONV_BWD_FILTER));
        out_add(o, d, y, ny);
        out_add(o, d, dx, nx);
        out_add(o, d, dx2, nx);
        out_add(o, d, dw, nw);
        out_add(o, d, db, (size_t)c->k);
    }
}

/* How many of op_conv1x1's geometries a deterministic CUDA instance
 * made with SL_CUDA_CONV_GEMM_FWD=on (fwd_on) or not and a GEMM
 * workspace cap of `cap` bytes takes `pass` of as GEMMs, with
 * SL_CUDA_CONV_GEMM and SL_CUDA_CONV_GEMM_STRIDED as the environment has
 * them (a GPU session's diagnosis may turn them off): base/conv_gemm.h's
 * rules, which test_conv_engine checks on the CPU. */
static int conv1x1_gemms_expected(sl_conv_pass pass, int fwd_on, size_t cap)
{
    const int mode = sl_conv_gemm_mode(getenv("SL_CUDA_CONV_GEMM"));
    const int strided_on = !th_env_off("SL_CUDA_CONV_GEMM_STRIDED");
    int n = 0;
    for (int i = 0; i < CONV1X1_GEOMS; i++) {
        const sl_conv_desc *d = &conv1x1_geoms[i];
        if (!(sl_conv_gemm_passes(d, mode, 1, strided_on, fwd_on) >> pass & 1u))
            continue;
        sl_conv_gemm_split sp;
        sl_conv_gemm_data_split ds;
        n += pass == SL_CONV_FWD        ? 1
             : pass == SL_CONV_BWD_DATA ? sl_conv_gemm_data_plan(d, cap, &ds)
                                        : sl_conv_gemm_filter_plan(d, 1, cap, &sp);
    }
    return n;
}

/* Asserts that instance gpu took each pass of op_conv1x1's geometries as
 * GEMMs as conv1x1_gemms_expected says. */
static void assert_conv1x1_gemms(const sl_backend *gpu, int fwd_on, size_t cap)
{
    static const char *const names[3] = {"forwards", "input gradients", "filter gradients"};
    for (int p = SL_CONV_FWD; p <= SL_CONV_BWD_FILTER; p++) {
        int got = sl_cuda_conv_gemm_geometries(gpu, (sl_conv_pass)p);
        int want = conv1x1_gemms_expected((sl_conv_pass)p, fwd_on, cap);
        ck_assert_msg(got == want, "%d 1x1 geometries took GEMMs for their %s, not %d", got,
                      names[p], want);
    }
}

/* op_conv1x1's tolerances: the filter gradient as cuBLAS GEMMs and an
 * ordered sum, a strided input gradient as a GEMM and a scatter, against
 * im2col / oneDNN (FP32: other orders of sums): y, dx (+=), dx, dw,
 * dbias per geometry. */
#define C1_TOL 1e-5, 1e-5, 1e-5, 1e-5, 1e-5
static const double conv1x1_tol[] = {C1_TOL, C1_TOL, C1_TOL, C1_TOL, C1_TOL};
#undef C1_TOL

static void *bn_ws(dev *d, size_t (*fn)(const sl_backend *, int, int, int), int n, int c, int hw)
{
    size_t b = fn ? fn(d->be, n, c, hw) : 0;
    return b ? dev_alloc(d, b) : NULL;
}

/* A BatchNorm case's outputs, in the order of BatchNorm's tolerances:
 * y, the saved statistics, the running ones, dx, dgamma, dbeta, and y
 * of a second forward (inference, or the re-forward). */
static void bn_outputs_add(outputs *o, dev *d, size_t nx, int BC, const float *y,
                           const float *stats, const float *run, const float *dx,
                           const float *dg, const float *dbeta, const float *y2)
{
    out_add(o, d, y, nx);
    out_add(o, d, stats, 2 * (size_t)BC);
    out_add(o, d, run, 2 * (size_t)BC);
    out_add(o, d, dx, nx);
    out_add(o, d, dg, (size_t)BC);
    out_add(o, d, dbeta, (size_t)BC);
    out_add(o, d, y2, nx);
}

/* BatchNorm's training forward, backward (dx written, or accumulated
 * with the statistics frozen, or no dx: parameter gradients alone) and
 * inference on n x c x hw. */
static void batchnorm_case(dev *d, outputs *o, int BN, int BC, int HW, int accumulate, int frozen,
                           int with_dx, uint64_t seed)
{
    size_t nx = (size_t)BN * BC * HW;
    float *x = dev_normal(d, nx, seed, 2.0f), *g = dev_normal(d, (size_t)BC, seed + 1, 1.0f),
          *b = dev_normal(d, (size_t)BC, seed + 2, 1.0f), *dy = dev_normal(d, nx, seed + 3, 1.0f);
    float *stats = dev_alloc(d, 2 * (size_t)BC * sizeof(float));
    float *run = dev_normal(d, 2 * (size_t)BC, seed + 4, 1.0f);
    float *ones = malloc((size_t)BC * sizeof *ones);
    ck_assert_ptr_nonnull(ones);
    for (int i = 0; i < BC; i++)
        ones[i] = 1.0f + 0.1f * (float)(i % 17);
    d->be->upload(&d->ex, run + BC, ones, (size_t)BC * sizeof *ones); /* a variance is positive */
    float *y = dev_alloc(d, nx * sizeof(float)), *y2 = dev_alloc(d, nx * sizeof(float));
    float *dx = accumulate ? dev_normal(d, nx, seed + 5, 1.0f) : dev_alloc(d, nx * sizeof(float));
    float *dg = dev_normal(d, (size_t)BC, seed + 6, 1.0f), *dbeta = dev_normal(d, (size_t)BC, seed + 7, 1.0f);
    d->be->batchnorm_forward_train(&d->ex, BN, BC, HW, x, g, b, y, stats, stats + BC, run,
                                   run + BC, 0.1f, 1e-5f,
                                   bn_ws(d, d->be->batchnorm_forward_workspace_bytes, BN, BC, HW));
    d->be->batchnorm_backward(&d->ex, BN, BC, HW, x, dy, g, stats, stats + BC,
                              with_dx ? dx : NULL, accumulate, dg, dbeta, frozen,
                              bn_ws(d, d->be->batchnorm_backward_workspace_bytes, BN, BC, HW));
    d->be->batchnorm_forward_infer(&d->ex, BN, BC, HW, x, g, b, run, run + BC, 1e-5f, y2, NULL,
                                   NULL);
    ck_assert(d->be->sync(&d->ex) == SL_OK);
    free(ones);
    bn_outputs_add(o, d, nx, BC, y, stats, run, dx, dg, dbeta, y2);
}

static void op_batchnorm(dev *d, outputs *o) { batchnorm_case(d, o, 8, 12, 49, 0, 0, 1, 60); }

/* The stem's few channels of many values (a channel's sums in several
 * parts), planes narrower than a warp, dx accumulated with frozen
 * statistics, no dx, and ResNet's 14² planes with dx accumulated (four
 * values a thread on the GPU). */
static void op_batchnorm_shapes(dev *d, outputs *o)
{
    batchnorm_case(d, o, 16, 4, 3136, 0, 0, 1, 70);
    batchnorm_case(d, o, 3, 300, 7, 1, 1, 1, 80);
    batchnorm_case(d, o, 5, 9, 100, 0, 0, 0, 90);
    batchnorm_case(d, o, 6, 10, 196, 1, 0, 1, 95);
}

/* BatchNorm then ReLU on n x c x hw, joined (the batchnorm_relu_* ops)
 * or apart (BatchNorm's ops and ReLU's): the training forward, the
 * re-forward with the saved statistics, and the backward from dy at the
 * ReLU's output, with dx written or added, over dy (in place) or not,
 * frozen statistics or the batch's. Channel 1 holds one value (variance 0:
 * every normalised value beta's, beta 0, gamma negative: the ReLU's edge
 * at 0 and -0) and, with nan, channel 2 a NaN (the devices' NaNs may
 * differ in payload: no comparison across devices takes it). */
static void batchnorm_relu_case(dev *d, outputs *o, int joined, int nan, int BN, int BC, int HW,
                                int accumulate, int frozen, int in_place, uint64_t seed)
{
    size_t nx = (size_t)BN * BC * HW;
    float *hx = host_normal(nx, seed, 2.0f), *hg = host_normal((size_t)BC, seed + 1, 1.0f);
    float *hb = host_normal((size_t)BC, seed + 2, 1.0f);
    ck_assert(BC >= 3);
    for (int i = 0; i < BN; i++)
        for (int j = 0; j < HW; j++)
            hx[((size_t)i * BC + 1) * HW + j] = 0.75f;
    if (nan)
        hx[2 * (size_t)HW + 1] = NAN;
    hg[1] = -fabsf(hg[1]);
    hb[1] = 0.0f;
    float *x = dev_up(d, hx, nx * sizeof(float)), *g = dev_up(d, hg, (size_t)BC * sizeof(float));
    float *b = dev_up(d, hb, (size_t)BC * sizeof(float));
    free(hx);
    free(hg);
    free(hb);
    float *dy = dev_normal(d, nx, seed + 3, 1.0f);
    float *stats = dev_alloc(d, 2 * (size_t)BC * sizeof(float));
    float *run = dev_normal(d, 2 * (size_t)BC, seed + 4, 0.5f);
    float *y = dev_alloc(d, nx * sizeof(float)), *y2 = dev_alloc(d, nx * sizeof(float));
    float *dx = in_place ? dy
                : accumulate ? dev_normal(d, nx, seed + 5, 1.0f)
                             : dev_alloc(d, nx * sizeof(float));
    float *dg = dev_normal(d, (size_t)BC, seed + 6, 1.0f);
    float *dbeta = dev_normal(d, (size_t)BC, seed + 7, 1.0f);
    void *fws = bn_ws(d, d->be->batchnorm_forward_workspace_bytes, BN, BC, HW);
    void *bws = bn_ws(d, d->be->batchnorm_backward_workspace_bytes, BN, BC, HW);
    const sl_backend *be = d->be;
    const sl_exec *ex = &d->ex;
    if (joined) {
        be->batchnorm_relu_forward_train(ex, BN, BC, HW, x, g, b, y, stats, stats + BC, run,
                                         run + BC, 0.1f, 1e-5f, fws);
        be->batchnorm_relu_forward_apply(ex, BN, BC, HW, x, g, b, stats, stats + BC, y2);
        be->batchnorm_relu_backward(ex, BN, BC, HW, x, dy, g, b, stats, stats + BC, dx,
                                    accumulate, dg, dbeta, frozen, bws);
    } else {
        be->batchnorm_forward_train(ex, BN, BC, HW, x, g, b, y, stats, stats + BC, run, run + BC,
                                    0.1f, 1e-5f, fws);
        be->relu_forward(ex, nx, y, y);
        be->batchnorm_forward_apply(ex, BN, BC, HW, x, g, b, stats, stats + BC, y2);
        be->relu_forward(ex, nx, y2, y2);
        /* the ReLU's gradient over dy, in place, as the plan runs it */
        be->relu_backward(ex, nx, y, dy, dy, 0);
        be->batchnorm_backward(ex, BN, BC, HW, x, dy, g, stats, stats + BC, dx, accumulate, dg,
                               dbeta, frozen, bws);
    }
    ck_assert(be->sync(ex) == SL_OK);
    bn_outputs_add(o, d, nx, BC, y, stats, run, dx, dg, dbeta, y2);
}

/* The cases: the batch's statistics, dx written; frozen, dx added; dx
 * over dy; the stem's few channels of many values; planes narrower than
 * a warp. */
static void batchnorm_relu_cases(dev *d, outputs *o, int joined, int nan)
{
    batchnorm_relu_case(d, o, joined, nan, 8, 12, 49, 0, 0, 0, 100);
    batchnorm_relu_case(d, o, joined, nan, 4, 5, 30, 1, 1, 0, 110);
    batchnorm_relu_case(d, o, joined, nan, 6, 7, 36, 0, 0, 1, 120);
    batchnorm_relu_case(d, o, joined, nan, 16, 4, 3136, 1, 0, 0, 130);
    batchnorm_relu_case(d, o, joined, nan, 3, 40, 7, 0, 0, 1, 140);
}

static void op_batchnorm_relu_joined(dev *d, outputs *o) { batchnorm_relu_cases(d, o, 1, 1); }
static void op_batchnorm_relu_apart(dev *d, outputs *o) { batchnorm_relu_cases(d, o, 0, 1); }
static void op_batchnorm_relu_finite(dev *d, outputs *o) { batchnorm_relu_cases(d, o, 1, 0); }

static void op_pool(dev *d, outputs *o)
{
    sl_pool_desc p = {3, 5, 13, 13, 7, 7, 3, 3, 2, 2, 1, 1};
    size_t nx = (size_t)p.n * p.c * p.h * p.w, ny = (size_t)p.n * p.c * p.oh * p.ow;
    float *x = dev_normal(d, nx, 70, 1.0f), *dy = dev_normal(d, ny, 71, 1.0f);
    float *y = dev_alloc(d, ny * sizeof(float)), *ya = dev_alloc(d, ny * sizeof(float));
    int32_t *arg = dev_alloc(d, ny * sizeof(int32_t));
    float *dx = dev_normal(d, nx, 72, 1.0f), *dxa = dev_alloc(d, nx * sizeof(float));
    float *g = dev_alloc(d, (size_t)p.n * p.c * sizeof(float)), *dg = dev_alloc(d, nx * sizeof(float));
    d->be->maxpool_forward(&d->ex, &p, x, y, arg);
    d->be->maxpool_backward(&d->ex, &p, arg, dy, dx, 1);
    d->be->avgpool_forward(&d->ex, &p, x, ya);
    d->be->avgpool_backward(&d->ex, &p, dy, dxa, 0);
    d->be->global_avgpool_forward(&d->ex, p.n * p.c, p.h * p.w, x, g);
    d->be->global_avgpool_backward(&d->ex, p.n * p.c, p.h * p.w, g, dg, 0);
    out_add(o, d, y, ny);
    out_ints(o, d, arg, ny);
    out_add(o, d, dx, nx);
    out_add(o, d, ya, ny);
    out_add(o, d, dxa, nx);
    out_add(o, d, dg, nx);
}

static void op_elementwise(dev *d, outputs *o)
{
    enum { N = 40001 };
    float *x = dev_normal(d, N, 80, 1.0f), *b = dev_normal(d, N, 81, 1.0f);
    float *y = dev_alloc(d, N * sizeof(float)), *dx = dev_normal(d, N, 82, 1.0f);
    float *sum = dev_alloc(d, N * sizeof(float)), *acc = dev_normal(d, N, 83, 1.0f);
    d->be->relu_forward(&d->ex, N, x, y);
    d->be->relu_backward(&d->ex, N, y, b, dx, 1);
    d->be->add(&d->ex, N, x, b, sum);
    d->be->copy(&d->ex, N, x, acc, 1);
    float *ch = dev_normal(d, (size_t)2 * 9 * 50, 84, 1.0f); /* 2 images, 9 channels of 50 */
    float *dst = dev_normal(d, (size_t)2 * 12 * 50, 85, 1.0f);
    d->be->copy_channels(&d->ex, 2, 50, 4, ch, 9, 3, dst, 12, 5, 1);
    float *bias = dev_normal(d, 50, 86, 1.0f), *rows = dev_normal(d, 800, 87, 1.0f);
    d->be->bias_add(&d->ex, 16, 50, bias, rows);
    /* the GPU's 16-byte forms: rows of 48 columns; and an add whose
     * tensors are only 4-byte aligned (the scalar form) */
    float *bias48 = dev_normal(d, 48, 88, 1.0f), *rows48 = dev_normal(d, 16 * 48, 89, 1.0f);
    d->be->bias_add(&d->ex, 16, 48, bias48, rows48);
    float *sum1 = dev_alloc(d, N * sizeof(float));
    d->be->add(&d->ex, N - 1, x + 1, b + 1, sum1 + 1);
    out_add(o, d, y, N);
    out_add(o, d, dx, N);
    out_add(o, d, sum, N);
    out_add(o, d, acc, N);
    out_add(o, d, dst, (size_t)2 * 12 * 50);
    out_add(o, d, rows, 800);
    out_add(o, d, rows48, 16 * 48);
    out_add(o, d, sum1 + 1, N - 1);
}

static void op_random(dev *d, outputs *o)
{
    enum { N = 10007 };
    float *x = dev_normal(d, N, 90, 1.0f), *y = dev_alloc(d, N * sizeof(float));
    float *dx = dev_normal(d, N, 91, 1.0f), *u = dev_alloc(d, N * sizeof(float));
    d->be->dropout_forward(&d->ex, N, x, y, 0.3f, 1234, 77);
    d->be->dropout_backward(&d->ex, N, x, dx, 0.3f, 1234, 77, 1);
    d->be->random_uniform(&d->ex, N, 99, 5, 3, u);
    out_add(o, d, y, N);
    out_add(o, d, dx, N);
    out_add(o, d, u, N);
}

/* R rows of CL classes: the GPU's block per row against the CPU's walk. */
static void softmax_xent_rows(dev *d, outputs *o, int R, int CL, uint64_t seed)
{
    int *labels = malloc((size_t)R * sizeof *labels);
    ck_assert_ptr_nonnull(labels);
    for (int r = 0; r < R; r++)
        labels[r] = (r * 37) % CL;
    float *x = dev_normal(d, (size_t)R * CL, seed, 3.0f), *g = dev_alloc(d, (size_t)R * CL * sizeof(float));
    size_t wsb = d->be->softmax_xent_workspace_bytes ? d->be->softmax_xent_workspace_bytes(d->be, R) : 0;
    float res[2] = {0.0f, 0.0f};
    int correct = -1;
    d->be->softmax_xent(&d->ex, R, CL, x, labels, g, &res[0], &correct, wsb ? dev_alloc(d, wsb) : NULL);
    ck_assert(d->be->sync(&d->ex) == SL_OK);
    free(labels);
    ck_assert_int_ge(correct, 0);
    res[1] = (float)correct;
    out_add(o, d, g, (size_t)R * CL);
    out_host(o, res, 2);
}

/* ImageNet's 1000 classes; CIFAR's 10 (fewer classes than a block's
 * threads, many rows); a row wider than a block's pass several times. */
static void op_softmax_xent(dev *d, outputs *o)
{
    softmax_xent_rows(d, o, 33, 1000, 95);
    softmax_xent_rows(d, o, 300, 10, 96);
    softmax_xent_rows(d, o, 5, 3001, 97);
}

/* softmax_xent's tolerances: each case's dlogits and (loss, hits) */
static const double sx_tol[] = {1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6};

static void op_optim(dev *d, outputs *o)
{
    enum { N = 30011 };
    float *w = dev_normal(d, N, 100, 1.0f), *g = dev_normal(d, N, 101, 1.0f);
    float *m = dev_normal(d, N, 102, 0.1f), *v = dev_alloc(d, N * sizeof(float));
    float *w2 = dev_normal(d, N, 103, 1.0f), *mom = dev_alloc(d, N * sizeof(float));
    d->be->fill(&d->ex, N, 0.01f, v);
    d->be->adam_update(&d->ex, N, w, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 3, 0.5f);
    d->be->sgd_update(&d->ex, N, w2, g, mom, 0.05f, 0.9f, 1e-4f, 1, 1, 1.0f);
    d->be->sgd_update(&d->ex, N, w2, g, mom, 0.05f, 0.9f, 1e-4f, 1, 0, 1.0f);
    double *slots = dev_alloc(d, SL_SUM_SQUARES_SLOTS * sizeof(double));
    d->be->fill(&d->ex, 2 * SL_SUM_SQUARES_SLOTS, 0.0f, (float *)slots);
    d->be->sum_squares(&d->ex, N, g, slots);
    out_add(o, d, w, N);
    out_add(o, d, m, N);
    out_add(o, d, v, N);
    out_add(o, d, w2, N);
    out_doubles(o, d, slots, SL_SUM_SQUARES_SLOTS);
}

/* The gradient norm's slots over a list of tensors: sum_squares_list
 * where the device has it (the CUDA backend's one launch over the list),
 * else one sum_squares a tensor, which is the order the list op must
 * keep; tensors shorter than, equal to and longer than the slots, the
 * longest holding several rows a slot and a partial last row. */
static void op_sum_squares_list(dev *d, outputs *o)
{
    const size_t counts[] = {1, 767, SL_SUM_SQUARES_SLOTS, SL_SUM_SQUARES_SLOTS + 5, 3,
                             5 * SL_SUM_SQUARES_SLOTS + 1234, 50000};
    enum { N = sizeof counts / sizeof counts[0] };
    const float *x[N];
    for (int k = 0; k < N; k++)
        x[k] = dev_normal(d, counts[k], 120 + (uint64_t)k, 1.0f + (float)k);
    double *slots = dev_alloc(d, SL_SUM_SQUARES_SLOTS * sizeof(double));
    d->be->fill(&d->ex, 2 * SL_SUM_SQUARES_SLOTS, 0.0f, (float *)slots);
    if (d->be->sum_squares_list)
        d->be->sum_squares_list(&d->ex, N, x, counts, slots);
    else
        for (int k = 0; k < N; k++)
            d->be->sum_squares(&d->ex, counts[k], x[k], slots);
    out_doubles(o, d, slots, SL_SUM_SQUARES_SLOTS);
}

static void op_decode_embedding(dev *d, outputs *o)
{
    enum { H = 4, D = 16, T = 37, LD = 3 * H * D };
    float *q = dev_normal(d, H * D, 110, 1.0f), *kv = dev_normal(d, (size_t)T * LD, 111, 1.0f);
    float *y = dev_alloc(d, H * D * sizeof(float));
    d->be->attention_decode(&d->ex, H, D, T, q, kv, kv + H * D, LD, y);
    int32_t ids[2 * 20];
    for (int i = 0; i < 40; i++)
        ids[i] = (i * 13) % 50;
    int32_t *di = dev_up(d, ids, sizeof ids);
    float *wte = dev_normal(d, 50 * 8, 112, 1.0f), *wpe = dev_normal(d, 20 * 8, 113, 1.0f);
    float *e = dev_alloc(d, 40 * 8 * sizeof(float));
    d->be->embedding_forward(&d->ex, 2, 20, 8, 50, di, wte, wpe, e);
    out_add(o, d, y, H * D);
    out_add(o, d, e, 40 * 8);
}

static sl_backend *gpu_or_null(void)
{
    sl_backend *be = NULL;
    if (sl_cuda_backend_create(0, 1, 0, &be) != SL_OK) {
        printf("SKIPPED (GPU side): no usable CUDA device: %s\n", sl_last_error());
        return NULL;
    }
    return be;
}

START_TEST(test_ops_gpu_vs_cpu)
{
    sl_backend *gpu = gpu_or_null();
    /* LayerNorm: y, dx (accumulated), dweight, dbias */
    const double ln_tol[] = {1e-6, 1e-5, 1e-6, 1e-6};
    check_op("layernorm", op_layernorm, gpu, ln_tol);
    /* bias gradient (double sums), GELU and its gradient (element maps) */
    const double bg_tol[] = {1e-6, 1e-6, 1e-6};
    check_op("bias_backward + gelu", op_bias_gelu, gpu, bg_tol);
    check_op("column sums, 8195 rows", op_column_sums_tall, gpu, tall_tol);
    check_op("layernorm widths, short columns", op_norm_shapes, gpu, shape_tol);
    /* the embedding's tables: the same float adds in the same order */
    const double emb_tol[] = {0.0, 0.0};
    check_op("embedding_backward", op_embedding, gpu, emb_tol);
    /* gradient rows, (loss, hits), row losses */
    const double lm_tol[] = {1e-6, 1e-6, 1e-6};
    check_op("lm_xent + lm_xent_total", op_lm_loss, gpu, lm_tol);
    /* the gradient may round to the other bf16 neighbour: one bf16 step
     * of a value, at most 2^-7 of it */
    const double lm16_tol[] = {8e-3, 1e-6};
    check_op("lm_xent on bf16 logits", op_lm_loss_bf16, gpu, lm16_tol);
    /* gradient, row losses, hits (the same first maximum: exact) */
    const double lmw_tol[] = {1e-6, 1e-6, 0.0}, lmw16_tol[] = {8e-3, 1e-6, 0.0};
    check_op("lm_xent, GPT-2's vocabulary", op_lm_loss_wide, gpu, lmw_tol);
    check_op("lm_xent, bf16, GPT-2's vocab", op_lm_loss_wide_bf16, gpu, lmw16_tol);
    /* casts: elementwise rules, the same bits (NaN payloads included) */
    const double cast_tol[] = {0.0};
    check_op("cast f32 <-> bf16", op_cast, gpu, cast_tol);
    /* GEMMs in FP32 (this instance has TF32 off): another order of sums */
    const double gemm_tol[] = {1e-5, 1e-5, 1e-5, 1e-5};
    check_op("gemm (4 transposes)", op_gemm, gpu, gemm_tol);
    /* the epilogue adds the bias before the product's one rounding */
    const double gemm_bias_tol[] = {1e-5, 1e-5, 1e-5, 1e-5, 1e-5};
    check_op("gemm_bias (epilogue)", op_gemm_bias, gpu, gemm_bias_tol);
    /* bf16 products summed in float in another order; a bf16 output may
     * round the other way: a bf16 unit (at most 2^-7 of the largest) */
    const double gemm_bf16_tol[] = {1e-5, 1e-5, 8e-3, 8e-3};
    check_op("gemm_bf16", op_gemm_bf16, gpu, gemm_bf16_tol);
    /* cuDNN against im2col / oneDNN: y, dx (accumulated), dw, dbias */
    const double conv_tol[] = {1e-5, 1e-5, 1e-5, 1e-5};
    check_op("conv2d (grouped, strided)", op_conv, gpu, conv_tol);
    check_op("conv2d 1x1 (GEMMs)", op_conv1x1, gpu, conv1x1_tol);
    if (gpu) /* by default: all five filter gradients, the three strided input gradients */
        assert_conv1x1_gemms(gpu, th_env_on("SL_CUDA_CONV_GEMM_FWD"),
                             sl_conv_gemm_cap(getenv("SL_CUDA_CONV_GEMM_CAP_KIB")));
    /* y, the saved statistics, the running ones, dx, dgamma, dbeta, y (eval) */
#define BN_TOL 1e-5, 1e-6, 1e-6, 1e-5, 1e-5, 1e-5, 1e-6
    const double bn_tol[] = {BN_TOL};
    const double bn_shape_tol[] = {BN_TOL, BN_TOL, BN_TOL, BN_TOL};
#undef BN_TOL
    check_op("batchnorm", op_batchnorm, gpu, bn_tol);
    check_op("batchnorm shapes", op_batchnorm_shapes, gpu, bn_shape_tol);
    /* pooling follows the CPU's order everywhere: the same bits */
    const double pool_tol[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    check_op("max / avg / global pooling", op_pool, gpu, pool_tol);
    const double ew_tol[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    check_op("relu, add, copy, slices, bias", op_elementwise, gpu, ew_tol);
    /* bf16 activations: LayerNorm's y and dx and GELU's y and dx may round
     * to the other bf16 neighbour where the float values differ by an ulp
     * (a bf16 unit: at most 2^-7 of the largest); LayerNorm's parameter
     * sums stay float; the adds, copies and ReLU are exact */
    const double b16_tol[] = {8e-3, 8e-3, 1e-5, 1e-5, 8e-3, 8e-3, 0.0, 0.0};
    check_op("bf16: layernorm, gelu, add, copy, relu", op_bf16_kernels, gpu, b16_tol);
    /* Philox words and their masks: the same bits */
    const double rnd_tol[] = {0.0, 0.0, 0.0};
    check_op("dropout, uniforms", op_random, gpu, rnd_tol);
    /* expf on each device (libm's and CUDA's may differ by an ulp) */
    check_op("softmax_xent", op_softmax_xent, gpu, sx_tol);
    /* the optimizers' element rules and the norm's slots: the same bits */
    const double opt_tol[] = {0.0, 0.0, 0.0, 0.0, 0.0};
    check_op("adam, sgd, sum_squares", op_optim, gpu, opt_tol);
    const double sq_tol[] = {0.0};
    check_op("sum_squares_list", op_sum_squares_list, gpu, sq_tol);
    /* a decoding step's block reductions; the embedding's sums */
    const double dec_tol[] = {1e-6, 0.0};
    check_op("attention_decode, embedding", op_decode_embedding, gpu, dec_tol);
    if (gpu)
        sl_backend_destroy(gpu);
}
END_TEST

/* A GPU instance with var=on (the switch's path; the default of every
 * switch but SL_CUDA_BN_FUSED) and one with var=off, or 0 and both NULL
 * without a usable GPU, or when var=off is already set: a GPU session's
 * diagnosis (bench/gpu_session.sh) sets a switch to see whether the path
 * it turns off is what fails, and this test, comparing that path with the
 * switched-off one, then has nothing to say. var is unset afterwards. */
static int gpu_and_off(const char *var, sl_backend **gpu, sl_backend **off)
{
    *gpu = *off = NULL;
    const char *set = getenv(var);
    if (set && strcmp(set, "off") == 0) {
        printf("%s=off is set: the comparison with the switch's path is SKIPPED\n", var);
        return 0;
    }
    ck_assert_int_eq(setenv(var, "on", 1), 0);
    *gpu = gpu_or_null();
    if (!*gpu) {
        unsetenv(var);
        return 0;
    }
    ck_assert_int_eq(setenv(var, "off", 1), 0);
    sl_status st = sl_cuda_backend_create(0, 1, 0, off);
    unsetenv(var);
    ck_assert_msg(st == SL_OK, "%s", sl_last_error());
    return 1;
}

/* op on two instances, the same bits from both (outputs compared whole). */
static void check_same_bits(const char *name, op_fn op, const sl_backend *a, const sl_backend *b,
                            const char *what)
{
    outputs out[2];
    memset(out, 0, sizeof out);
    for (int k = 0; k < 2; k++) {
        dev g = {k ? b : a, {k ? b : a, 1, 0, NULL}, {0}, 0};
        op(&g, &out[k]);
        dev_release(&g);
    }
    ck_assert_int_eq(out[0].count, out[1].count);
    for (int k = 0; k < out[0].count; k++)
        ck_assert_msg(memcmp(out[0].v[k], out[1].v[k], out[0].n[k] * sizeof(float)) == 0,
                      "%s output %d: %s differ", name, k, what);
    printf("%-38s %s: the same bits\n", name, what);
    out_free(&out[0]);
    out_free(&out[1]);
}

typedef struct named_op {
    const char *name;
    op_fn op;
} named_op;

/* The instance with var=on, whose path `on` reports 1, against one with
 * var=off (0): each of ops gives the same bits from both. */
static void check_switch_same_bits(const char *var, int (*on)(const sl_backend *),
                                   const char *what, const named_op *ops, size_t n)
{
    sl_backend *gpu, *off;
    if (!gpu_and_off(var, &gpu, &off))
        return;
    ck_assert(on(gpu) && !on(off));
    for (size_t i = 0; i < n; i++)
        check_same_bits(ops[i].name, ops[i].op, gpu, off, what);
    sl_backend_destroy(off);
    sl_backend_destroy(gpu);
}

/* With SL_CUDA_CONV_GEMM_FWD=on every pass of op_conv1x1's geometries
 * runs on cuBLAS: the forward and input gradient of the two of stride 1
 * as batched GEMMs in place, beside the filter gradients and strided
 * input gradients. Against the CPU within the same tolerances, two runs
 * the same bits. */
START_TEST(test_conv1x1_forward_gemms)
{
    if (sl_conv_gemm_mode(getenv("SL_CUDA_CONV_GEMM")) == 0 ||
        th_env_off("SL_CUDA_CONV_GEMM_FWD")) {
        printf("SL_CUDA_CONV_GEMM or SL_CUDA_CONV_GEMM_FWD is off: the forward GEMMs are "
               "SKIPPED\n");
        return;
    }
    th_switches keep;
    const char *var[1] = {"SL_CUDA_CONV_GEMM_FWD"};
    th_switches_off(&keep, var, 1, 0); /* keeps what it held */
    ck_assert_int_eq(setenv("SL_CUDA_CONV_GEMM_FWD", "on", 1), 0);
    sl_backend *gpu = gpu_or_null();
    th_switches_restore(&keep);
    check_op("conv2d 1x1 (every pass GEMMs)", op_conv1x1, gpu, conv1x1_tol);
    if (!gpu)
        return;
    /* both stride-1 forwards; all five input and filter gradients */
    assert_conv1x1_gemms(gpu, 1, sl_conv_gemm_cap(getenv("SL_CUDA_CONV_GEMM_CAP_KIB")));
    ck_assert_int_eq(sl_cuda_conv_gemm_geometries(gpu, SL_CONV_FWD), 2);
    sl_backend_destroy(gpu);
}
END_TEST

/* Under a GEMM workspace cap of 16 KiB (SL_CUDA_CONV_GEMM_CAP_KIB=16),
 * op_conv1x1's strided input gradients run a GEMM and a scatter per
 * image (the 12 x 12 case in 3 groups, the 2 x 2 one in 20) and the
 * strided 12 x 12 filter gradient gathers and sums one image at a time,
 * while the two geometries whose one partial passes the cap (1024 x
 * 1024) keep cuDNN for their filter gradient: against the CPU within the
 * same tolerances, two runs the same bits. A cap that is not a whole
 * number of KiB refuses the instance. */
START_TEST(test_conv1x1_small_cap)
{
    const size_t cap = 16 << 10;
    sl_conv_gemm_data_split ds;
    sl_conv_gemm_split sp;
    ck_assert(sl_conv_gemm_data_plan(&conv1x1_geoms[2], cap, &ds) && ds.groups == 3);
    ck_assert(sl_conv_gemm_data_plan(&conv1x1_geoms[4], cap, &ds) && ds.groups == 20);
    ck_assert(sl_conv_gemm_filter_plan(&conv1x1_geoms[2], 132, cap, &sp) && sp.groups == 3);
    ck_assert(!sl_conv_gemm_filter_plan(&conv1x1_geoms[4], 132, cap, &sp));
    th_switches keep;
    const char *var[1] = {"SL_CUDA_CONV_GEMM_CAP_KIB"};
    th_switches_off(&keep, var, 1, 0); /* keeps what it held */
    ck_assert_int_eq(setenv("SL_CUDA_CONV_GEMM_CAP_KIB", "16", 1), 0);
    sl_backend *gpu = gpu_or_null();
    if (gpu) {
        sl_backend *bad = NULL;
        ck_assert_int_eq(setenv("SL_CUDA_CONV_GEMM_CAP_KIB", "16k", 1), 0);
        th_assert_error(sl_cuda_backend_create(0, 1, 0, &bad), SL_ERR_INVALID_ARG,
                        "SL_CUDA_CONV_GEMM_CAP_KIB=\"16k\"");
        ck_assert_ptr_null(bad);
    }
    th_switches_restore(&keep);
    check_op("conv2d 1x1 (GEMMs, 16 KiB cap)", op_conv1x1, gpu, conv1x1_tol);
    if (!gpu)
        return;
    assert_conv1x1_gemms(gpu, th_env_on("SL_CUDA_CONV_GEMM_FWD"), cap);
    sl_backend_destroy(gpu);
}
END_TEST

/* LayerNorm's forward and input gradient with a row in registers and by
 * their loops (SL_CUDA_LN_REGS=off): the same sums in the same order, so
 * the same bits, at every register width (8, 16, 24, 32 a lane), float
 * and bf16, accumulating or not, dx over dy. */
START_TEST(test_layernorm_registers_equal_loops)
{
    const named_op ops[] = {{"layernorm", op_layernorm},
                            {"layernorm widths, short columns", op_norm_shapes},
                            {"column sums, 8195 rows", op_column_sums_tall},
                            {"bf16: layernorm, gelu, add, copy, relu", op_bf16_kernels}};
    check_switch_same_bits("SL_CUDA_LN_REGS", sl_cuda_ln_regs, "rows in registers and the loops",
                           ops, sizeof ops / sizeof ops[0]);
}
END_TEST

/* BatchNorm's statistics and normalise in one kernel, and its backward's
 * means and input gradient in one (SL_CUDA_BN_FUSED=on), against three
 * kernels each (the default since an H100 timed them 1.4 % faster on
 * ResNet-152, 2026-11-27-e): the same sums and the same arithmetic, so
 * the same bits. */
START_TEST(test_batchnorm_fused_equals_kernels)
{
    const named_op ops[] = {{"batchnorm", op_batchnorm},
                            {"batchnorm shapes", op_batchnorm_shapes}};
    check_switch_same_bits("SL_CUDA_BN_FUSED", sl_cuda_bn_fused, "fused and three kernels", ops,
                           sizeof ops / sizeof ops[0]);
}
END_TEST

/* BatchNorm's normalise and input gradient four values a thread (float4,
 * where a plane's size is a multiple of 4) against one (SL_CUDA_BN_VEC=
 * off): the same element rules, so the same bits, joined to the ReLU
 * or not, dx written or added, in place or not. */
START_TEST(test_batchnorm_vec_equals_scalar)
{
    const named_op ops[] = {{"batchnorm", op_batchnorm},
                            {"batchnorm shapes", op_batchnorm_shapes},
                            {"batchnorm + relu, joined", op_batchnorm_relu_finite}};
    check_switch_same_bits("SL_CUDA_BN_VEC", sl_cuda_bn_vec, "float4 and one value a thread",
                           ops, sizeof ops / sizeof ops[0]);
}
END_TEST

/* BatchNorm joined to the ReLU after it gives the two ops' bits, value
 * for value (NaNs, the ReLU's edge at 0 and -0 included), on the CPU and,
 * with a GPU, on its default kernels and its fused ones
 * (SL_CUDA_BN_FUSED=on); the GPU's joined ops against the CPU's within
 * BatchNorm's tolerance. */
START_TEST(test_batchnorm_relu_joined_equals_apart)
{
    sl_backend *cpu_be = NULL, *gpu = gpu_or_null(), *fused = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(1, &cpu_be), SL_OK);
    if (gpu) {
        ck_assert_int_eq(setenv("SL_CUDA_BN_FUSED", "on", 1), 0);
        ck_assert_int_eq(sl_cuda_backend_create(0, 1, 0, &fused), SL_OK);
        unsetenv("SL_CUDA_BN_FUSED");
        ck_assert(sl_cuda_bn_fused(fused) && !sl_cuda_bn_fused(gpu));
    }
    const sl_backend *bes[3] = {cpu_be, gpu, fused};
    const char *names[3] = {"CPU", "GPU", "GPU, fused finals"};
    for (int k = 0; k < 3; k++) {
        if (!bes[k]) {
            printf("batchnorm + relu joined, %s: SKIPPED (no usable GPU)\n", names[k]);
            continue;
        }
        ck_assert_msg(sl_backend_joins_bn_relu(bes[k]), "%s has no batchnorm_relu_* ops",
                      names[k]);
        check_same_bits("batchnorm + relu", op_batchnorm_relu_joined, bes[k], bes[k], "");
        outputs out[2];
        memset(out, 0, sizeof out);
        op_fn ops[2] = {op_batchnorm_relu_joined, op_batchnorm_relu_apart};
        for (int j = 0; j < 2; j++) {
            dev g = {bes[k], {bes[k], 1, 0, NULL}, {0}, 0};
            ops[j](&g, &out[j]);
            dev_release(&g);
        }
        ck_assert_int_eq(out[0].count, out[1].count);
        int nans = 0, zeros = 0;
        for (int i = 0; i < out[0].count; i++) {
            ck_assert_msg(memcmp(out[0].v[i], out[1].v[i], out[0].n[i] * sizeof(float)) == 0,
                          "%s: output %d joined and apart differ", names[k], i);
            for (size_t e = 0; e < out[0].n[i]; e++) {
                nans += isnan(out[0].v[i][e]);
                zeros += out[0].v[i][e] == 0.0f;
            }
        }
        ck_assert_msg(nans > 0 && zeros > 0, "%s: the cases reach no NaN (%d) or zero (%d)",
                      names[k], nans, zeros);
        printf("batchnorm + relu, %s: joined and apart the same bits over %d outputs (%d NaNs, "
               "%d zeros)\n", names[k], out[0].count, nans, zeros);
        out_free(&out[0]);
        out_free(&out[1]);
    }
    /* per case: y, the statistics, the running ones, dx, dgamma, dbeta, y
     * re-forwarded: BatchNorm's tolerances (test_ops_gpu_vs_cpu) */
#define BN_RELU_TOL 1e-5, 1e-6, 1e-6, 1e-5, 1e-5, 1e-5, 1e-5
    const double tol[] = {BN_RELU_TOL, BN_RELU_TOL, BN_RELU_TOL, BN_RELU_TOL, BN_RELU_TOL};
#undef BN_RELU_TOL
    check_op("batchnorm + relu, joined", op_batchnorm_relu_finite, gpu, tol);
    sl_backend_destroy(fused);
    sl_backend_destroy(gpu);
    sl_backend_destroy(cpu_be);
}
END_TEST

/* A classifier's loss a thread per row (SL_CUDA_XENT_BLOCKS=off, the
 * escape from the block per row) against the CPU too. */
START_TEST(test_classifier_loss_thread_rows)
{
    sl_backend *gpu, *threads;
    if (!gpu_and_off("SL_CUDA_XENT_BLOCKS", &gpu, &threads))
        return;
    ck_assert(sl_cuda_xent_blocks(gpu) && !sl_cuda_xent_blocks(threads));
    check_op("softmax_xent, a thread a row", op_softmax_xent, threads, sx_tol);
    sl_backend_destroy(threads);
    sl_backend_destroy(gpu);
}
END_TEST

/* The column sums on both of the CUDA backend's traversals (column parts
 * joined in clusters, and column tiles with SL_CUDA_COL_PARTS=off), each
 * against the CPU; the log says which the device runs by default. */
START_TEST(test_column_parts_and_tiles)
{
    sl_backend *gpu, *tiles;
    if (!gpu_and_off("SL_CUDA_COL_PARTS", &gpu, &tiles))
        return;
    const char *why = NULL;
    if (sl_cuda_column_parts(gpu, &why))
        printf("column sums: column parts joined in clusters\n");
    else
        printf("column sums: column tiles (%s)\n", why);
    ck_assert(!sl_cuda_column_parts(tiles, &why));
    ck_assert_str_eq(why, "SL_CUDA_COL_PARTS=off");
    check_op("column tiles: 8195 rows", op_column_sums_tall, tiles, tall_tol);
    check_op("column tiles: widths, short", op_norm_shapes, tiles, shape_tol);
    sl_backend_destroy(tiles);
    sl_backend_destroy(gpu);
}
END_TEST

/* The CUDA backend's two traversals of the language model's loss, rows
 * staged in shared memory and three passes over global memory
 * (SL_CUDA_XENT_STAGED=off), give the same bits: the same values visited
 * in the same order by each thread, on every op that runs lm_xent. */
START_TEST(test_lm_xent_staged_equals_passes)
{
    sl_backend *gpu, *passes; /* the first instance stages its rows */
    if (!gpu_and_off("SL_CUDA_XENT_STAGED", &gpu, &passes))
        return;
    ck_assert(!sl_cuda_lm_xent_staged(passes, VOCAB));
    const struct {
        const char *name;
        op_fn op;
        int vocab;
    } ops[] = {{"lm_xent", op_lm_loss, VOCAB},
               {"lm_xent, bf16", op_lm_loss_bf16, VOCAB},
               {"lm_xent, GPT-2's vocabulary", op_lm_loss_wide, WIDE_V},
               {"lm_xent, bf16, GPT-2's vocabulary", op_lm_loss_wide_bf16, WIDE_V},
               {"lm_xent, NaN, inf, label past the row", op_lm_loss_odd, WIDE_V},
               {"lm_xent, bf16, NaN, inf, label past", op_lm_loss_odd_bf16, WIDE_V}};
    int compared = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        /* a device whose shared memory cannot hold the row runs the
         * passes in both instances: nothing to compare */
        if (!sl_cuda_lm_xent_staged(gpu, ops[i].vocab)) {
            printf("%-38s SKIPPED: %d logits do not fit this GPU's shared memory\n", ops[i].name,
                   ops[i].vocab);
            continue;
        }
        check_same_bits(ops[i].name, ops[i].op, gpu, passes, "staged rows and three passes");
        compared++;
    }
    /* GPT-2's 5003-wide stand-in fits any GPU this library runs on */
    ck_assert_int_ge(compared, 2);
    sl_backend_destroy(passes);
    sl_backend_destroy(gpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_ops");
    TCase *tc = tcase_create("backend_ops");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_ops_gpu_vs_cpu);
    tcase_add_test(tc, test_column_parts_and_tiles);
    tcase_add_test(tc, test_layernorm_registers_equal_loops);
    tcase_add_test(tc, test_lm_xent_staged_equals_passes);
    tcase_add_test(tc, test_batchnorm_fused_equals_kernels);
    tcase_add_test(tc, test_batchnorm_vec_equals_scalar);
    tcase_add_test(tc, test_conv1x1_forward_gemms);
    tcase_add_test(tc, test_conv1x1_small_cap);
    tcase_add_test(tc, test_batchnorm_relu_joined_equals_apart);
    tcase_add_test(tc, test_classifier_loss_thread_rows);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
