/*
 * cpu_attention.c — causal multi-head self-attention on the CPU (run
 * stage), two modes (base/backend.h's sl_attention_desc):
 *
 * plain (flash 0), the reference: per sequence and head, S = Q K^T (t x t)
 * by one sgemm, the causal softmax row by row into P (the saved state),
 * y = (P o F) V with F the dropout factors; the backward reads P.
 *
 * flash (flash 1), the FlashAttention-2 scheme: per query tile of BR rows,
 * the key / value tiles of BC rows up to the diagonal, with an online
 * softmax (running maximum m and sum l; the accumulated output rescaled by
 * exp(m_old - m_new) when the maximum grows); only each row's log-sum-exp
 * is saved. The backward recomputes P = exp(logit - lse) tile by tile:
 * per key tile j, over the query tiles i >= j,
 *     dV_j += (P o F)^T dO_i,  dPF = dO_i V_j^T,
 *     dS = P o (dPF o F - D_i)  with D_i = rowsum(dO_i o O_i),
 *     dQ_i += scale dS K_j,  dK_j += scale dS^T Q_i.
 * Nothing of t x t size exists: the workspace holds tiles, and dQ of one
 * (sequence, head) (t x d).
 *
 * Threads: work items ((sequence, head) or (sequence, head, query tile))
 * are handed out to an OpenMP team; each item is computed by one thread
 * from start to end with single-threaded sgemm calls on fixed tile shapes
 * (the context runs OpenBLAS at one thread), into the workspace slot of
 * that thread. Every output value therefore has the same bits whatever the
 * number of threads. The workspace holds a fixed number of slots (see
 * attn_slots), and a team never has more threads than slots.
 *
 * bf16 (flash mode, d->bf16 and ex->bf16: SL_BF16_ATTENTION): qkv, y, dy
 * and dqkv are bf16. A forward item widens its query tile and each key and
 * value tile into its slot before the products; a backward item widens
 * its sequence's q, k, v, y and dy columns (t x d each). The same sgemm
 * calls then run on the same values (rows d apart instead of 3c: sgemm
 * packs its operands, so the layout does not change a sum), and y and
 * dqkv are rounded as they are written: the bits of float copies.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "base/element.h"
#include "cpu/cpu.h"

/* Tile rows of queries and of keys. The tile products are OpenBLAS calls:
 * measured on this project's machine, a single-threaded sgemm of 64 x 64
 * x 64 ran 3.5 times as fast as plain loops, and 128-row tiles about 20 %
 * faster again than 64-row ones (a slot's tiles, about 330 KB, still fit
 * in L2). */
#define BR 128
#define BC 128

/* Workspace slots: as many as the machine's processors (at least 4, so
 * that tests of several threads run them on a small machine), no more than
 * there are work items. */
static int attn_slots(size_t items)
{
    int cap = omp_get_num_procs();
    if (cap < 4)
        cap = 4;
    return items < (size_t)cap ? (int)(items > 0 ? items : 1) : cap;
}

static size_t round16(size_t floats) { return (floats + 15) / 16 * 16; }

static size_t attn_items(const sl_attention_desc *d, int backward)
{
    size_t bh = (size_t)d->n * d->heads;
    if (d->flash && !backward)
        return bh * (size_t)((d->t + BR - 1) / BR);
    return bh;
}

/* Floats a bf16 item widens into its slot, after the float layout. */
static size_t bf16_floats(const sl_attention_desc *d, int backward)
{
    size_t t = (size_t)d->t, hd = (size_t)d->d;
    if (!d->bf16 || !d->flash)
        return 0;
    if (!backward) /* the query tile, a key tile and a value tile */
        return round16(BR * hd) + 2 * round16(BC * hd);
    return 5 * round16(t * hd); /* q, k, v, y and dy of the sequence */
}

/* Floats of one slot. */
static size_t slot_floats(const sl_attention_desc *d, int backward)
{
    size_t t = (size_t)d->t, hd = (size_t)d->d;
    if (!d->flash)
        return round16(t * t) + round16(t);
    if (!backward) /* S, O, m, l (double), factors */
        return round16(BR * BC) + round16(BR * hd) + round16(BR) + round16(2 * BR) + round16(BC) +
               bf16_floats(d, 0);
    /* dQ, D, P, F, dS, dPF, dK, dV */
    return round16(t * hd) + round16(t) + 4 * round16(BR * BC) + 2 * round16(BC * hd) +
           bf16_floats(d, 1);
}

int sl_cpu_attention_native_bf16(const sl_backend *be, const sl_attention_desc *d)
{
    (void)be;
    return d->flash != 0;
}

/* rows x cols bf16 values (rows ld apart) widened into dst (packed). */
static void widen_rows(float *dst, const uint16_t *src, size_t ld, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)r * cols + c] = sl_bf16_widen(src[(size_t)r * ld + c]);
}

size_t sl_cpu_attention_workspace_bytes(const sl_backend *be, const sl_attention_desc *d,
                                        int backward)
{
    (void)be;
    return (size_t)attn_slots(attn_items(d, backward)) * slot_floats(d, backward) * sizeof(float);
}

/* Where one (sequence, head)'s columns start: q at qkv + off, k at
 * + c, v at + 2c (rows of ldq = 3c values), likewise in dqkv; its output
 * columns at y + out (rows of ldo = c values), likewise in dy. */
typedef struct attn_view {
    size_t off, c, ldq, ldo, out;
    int bh;
} attn_view;

static attn_view attn_view_of(const sl_attention_desc *d, int bh)
{
    attn_view v;
    int b = bh / d->heads, h = bh % d->heads;
    v.c = (size_t)d->heads * d->d;
    v.ldq = 3 * v.c;
    v.ldo = v.c;
    v.off = (size_t)b * d->t * v.ldq + (size_t)h * d->d;
    v.out = (size_t)b * d->t * v.c + (size_t)h * d->d;
    v.bh = bh;
    return v;
}

static void sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, size_t lda,
                  const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* Runs body (with item_ and slot_ defined) for every item on a team of at
 * most `slots` threads; items are handed out dynamically (which thread
 * runs an item does not change its bits). */
#define ATTN_FOR_ITEMS(ex, items, slots, body)                                                   \
    do {                                                                                         \
        int team_ = cpu_threads(ex) < (slots) ? cpu_threads(ex) : (slots);                       \
        if (team_ > 1 && (items) > 1) {                                                          \
            _Pragma("omp parallel for num_threads(team_) schedule(dynamic, 1)")                  \
            for (long item_ = 0; item_ < (long)(items); item_++) {                               \
                int slot_ = omp_get_thread_num();                                                \
                body;                                                                            \
            }                                                                                    \
        } else {                                                                                 \
            for (long item_ = 0; item_ < (long)(items); item_++) {                               \
                int slot_ = 0;                                                                   \
                body;                                                                            \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* The factors of row i's columns [j0, j0 + n) into f. */
static void row_factors(const sl_attention_desc *d, const sl_dropout_mask *m, int bh, int i,
                        int j0, int n, float *f)
{
    sl_dropout_factors(m, d->counter, sl_attn_element(d->bh0 + bh, d->t, i, j0), n, f);
}

/* ---------------------------------------------------------------- plain */

/* The causal softmax of row i of S (logits scaled here) in place, zero
 * past the diagonal. */
static void softmax_row(float *row, int i, int t, float scale)
{
    float mx = -INFINITY;
    for (int j = 0; j <= i; j++) {
        row[j] = sl_attn_logit(row[j], scale);
        mx = row[j] > mx ? row[j] : mx;
    }
    double s = 0.0;
    for (int j = 0; j <= i; j++) {
        row[j] = sl_attn_exp(row[j], mx);
        s += row[j];
    }
    float sf = (float)s;
    for (int j = 0; j <= i; j++)
        row[j] = row[j] / sf;
    for (int j = i + 1; j < t; j++)
        row[j] = 0.0f;
}

static void plain_forward_one(const sl_attention_desc *d, const attn_view *v, const float *qkv,
                              float *y, float *saved, float *slot)
{
    int t = d->t;
    size_t tt = (size_t)t * t;
    const float *q = qkv + v->off, *k = q + v->c, *val = q + 2 * v->c;
    float *p = saved ? saved + (size_t)v->bh * tt : slot;
    float *pf = slot, *f = slot + round16(tt);
    float scale = sl_attn_scale(d->d);
    sgemm(0, 1, t, t, d->d, 1.0f, q, v->ldq, k, v->ldq, 0.0f, p, (size_t)t);
    for (int i = 0; i < t; i++)
        softmax_row(p + (size_t)i * t, i, t, scale);
    if (saved && d->p > 0.0f) {
        sl_dropout_mask m = sl_dropout_mask_of(d->p, d->seed);
        for (int i = 0; i < t; i++) {
            const float *pr = p + (size_t)i * t;
            float *o = pf + (size_t)i * t;
            row_factors(d, &m, v->bh, i, 0, i + 1, f);
            for (int j = 0; j <= i; j++)
                o[j] = pr[j] * f[j];
            for (int j = i + 1; j < t; j++)
                o[j] = 0.0f;
        }
    } else {
        pf = p;
    }
    sgemm(0, 0, t, d->d, t, 1.0f, pf, (size_t)t, val, v->ldq, 0.0f, y + v->out, v->ldo);
}

static void plain_backward_one(const sl_attention_desc *d, const attn_view *v, const float *qkv,
                               const float *dy, const float *saved, float *dqkv, int accumulate,
                               float *slot)
{
    int t = d->t, hd = d->d;
    size_t tt = (size_t)t * t;
    const float *p = saved + (size_t)v->bh * tt;
    const float *q = qkv + v->off, *k = q + v->c, *val = q + 2 * v->c;
    const float *dout = dy + v->out;
    float *dq = dqkv + v->off, *dk = dq + v->c, *dv = dq + 2 * v->c;
    float *a = slot, *f = slot + round16(tt);
    float scale = sl_attn_scale(hd), beta = accumulate ? 1.0f : 0.0f;
    int drop = d->p > 0.0f;
    sl_dropout_mask m = sl_dropout_mask_of(d->p, d->seed);
    /* dV = (P o F)^T dO */
    const float *pf = p;
    if (drop) {
        for (int i = 0; i < t; i++) {
            const float *pr = p + (size_t)i * t;
            float *o = a + (size_t)i * t;
            row_factors(d, &m, v->bh, i, 0, i + 1, f);
            for (int j = 0; j <= i; j++)
                o[j] = pr[j] * f[j];
            for (int j = i + 1; j < t; j++)
                o[j] = 0.0f;
        }
        pf = a;
    }
    sgemm(1, 0, t, hd, t, 1.0f, pf, (size_t)t, dout, v->ldo, beta, dv, v->ldq);
    /* dPF = dO V^T, then dS in place */
    sgemm(0, 1, t, t, hd, 1.0f, dout, v->ldo, val, v->ldq, 0.0f, a, (size_t)t);
    for (int i = 0; i < t; i++) {
        const float *pr = p + (size_t)i * t;
        float *ar = a + (size_t)i * t;
        row_factors(d, &m, v->bh, i, 0, i + 1, f);
        double di = 0.0;
        for (int j = 0; j <= i; j++)
            di += (double)(ar[j] * f[j]) * pr[j];
        float dif = (float)di;
        for (int j = 0; j <= i; j++)
            ar[j] = sl_attn_grad_logit(pr[j], ar[j], f[j], dif);
        for (int j = i + 1; j < t; j++)
            ar[j] = 0.0f;
    }
    sgemm(0, 0, t, hd, t, scale, a, (size_t)t, k, v->ldq, beta, dq, v->ldq);
    sgemm(1, 0, t, hd, t, scale, a, (size_t)t, q, v->ldq, beta, dk, v->ldq);
}

/* ---------------------------------------------------------------- flash */

/* Row i's scores s[0, nc) against keys j0 .. j0+nc-1 (scaled here) into
 * exp(logit - m_new) * f, zero past the diagonal, updating the row's
 * running maximum *m and sum *l and rescaling its output accumulator o by
 * exp(m_old - m_new). f: BC floats of scratch. */
static void online_softmax_row(const sl_attention_desc *d, const sl_dropout_mask *mask, int bh,
                               int i, int j0, int nc, float *s, float *m, double *l, float *o,
                               float *f)
{
    int valid = i - j0 + 1 < nc ? i - j0 + 1 : nc;
    if (valid <= 0) {
        memset(s, 0, (size_t)nc * sizeof(float));
        return;
    }
    float scale = sl_attn_scale(d->d), mx = *m;
    for (int c = 0; c < valid; c++) {
        s[c] = sl_attn_logit(s[c], scale);
        mx = s[c] > mx ? s[c] : mx;
    }
    float alpha = sl_attn_exp(*m, mx);
    double sum = 0.0;
    row_factors(d, mask, bh, i, j0, valid, f);
    for (int c = 0; c < valid; c++) {
        float e = sl_attn_exp(s[c], mx);
        sum += e;
        s[c] = e * f[c];
    }
    for (int c = valid; c < nc; c++)
        s[c] = 0.0f;
    *l = *l * alpha + sum;
    *m = mx;
    if (alpha != 1.0f)
        for (int c = 0; c < d->d; c++)
            o[c] *= alpha;
}

/* One query tile [i0, i0 + nr) of one (sequence, head): y rows and, when
 * lse is not NULL, their log-sum-exp. */
static void flash_forward_tile(const sl_attention_desc *d, const attn_view *v, const float *qkv,
                               int i0, float *y, float *lse, float *slot)
{
    int t = d->t, hd = d->d;
    int nr = t - i0 < BR ? t - i0 : BR;
    const float *q = qkv + v->off + (size_t)i0 * v->ldq, *k = qkv + v->off + v->c,
                *val = qkv + v->off + 2 * v->c;
    float *s = slot, *o = s + round16(BR * BC), *mrow = o + round16((size_t)BR * hd);
    double *l = (double *)(mrow + round16(BR));
    float *f = mrow + round16(BR) + round16(2 * BR);
    /* bf16: the tiles widened into the slot, rows hd apart */
    const uint16_t *q16 = NULL, *k16 = NULL, *v16 = NULL;
    float *qw = f + round16(BC), *kw = qw + round16((size_t)BR * hd),
          *vw = kw + round16((size_t)BC * hd);
    size_t ldq = v->ldq; /* of q, k and v alike */
    if (d->bf16) {
        const uint16_t *base = (const uint16_t *)(const void *)qkv + v->off;
        q16 = base + (size_t)i0 * v->ldq;
        k16 = base + v->c;
        v16 = base + 2 * v->c;
        widen_rows(qw, q16, v->ldq, nr, hd);
        q = qw;
        ldq = (size_t)hd;
    }
    int drop = lse && d->p > 0.0f; /* evaluation (no lse) drops nothing */
    sl_dropout_mask m = sl_dropout_mask_of(drop ? d->p : 0.0f, d->seed);
    for (int r = 0; r < nr; r++) {
        mrow[r] = -INFINITY;
        l[r] = 0.0;
    }
    memset(o, 0, (size_t)nr * hd * sizeof(float));
    int end = i0 + nr; /* keys past the last row's position are masked for every row */
    for (int j0 = 0; j0 < end; j0 += BC) {
        int nc = end - j0 < BC ? end - j0 : BC;
        const float *kt = k + (size_t)j0 * v->ldq, *vt = val + (size_t)j0 * v->ldq;
        if (d->bf16) {
            widen_rows(kw, k16 + (size_t)j0 * v->ldq, v->ldq, nc, hd);
            widen_rows(vw, v16 + (size_t)j0 * v->ldq, v->ldq, nc, hd);
            kt = kw;
            vt = vw;
        }
        sgemm(0, 1, nr, nc, hd, 1.0f, q, ldq, kt, ldq, 0.0f, s, BC);
        for (int r = 0; r < nr; r++)
            online_softmax_row(d, &m, v->bh, i0 + r, j0, nc, s + (size_t)r * BC, &mrow[r], &l[r],
                               o + (size_t)r * hd, f);
        sgemm(0, 0, nr, hd, nc, 1.0f, s, BC, vt, ldq, 1.0f, o, (size_t)hd);
    }
    for (int r = 0; r < nr; r++) {
        float lf = (float)l[r];
        const float *orow = o + (size_t)r * hd;
        size_t at = v->out + (size_t)(i0 + r) * v->ldo;
        if (d->bf16) {
            uint16_t *yr = (uint16_t *)(void *)y + at;
            for (int c = 0; c < hd; c++)
                yr[c] = sl_bf16_round(orow[c] / lf);
        } else {
            float *yr = y + at;
            for (int c = 0; c < hd; c++)
                yr[c] = orow[c] / lf;
        }
        if (lse)
            lse[(size_t)v->bh * t + i0 + r] = sl_attn_lse(mrow[r], l[r]);
    }
}

/* Row i of a recomputed tile: p[0, nc) from the scores in p (scaled
 * here) and the row's log-sum-exp lse, the dropout factors f and p * f,
 * all zero past the diagonal. */
static void recompute_row(const sl_attention_desc *d, const sl_dropout_mask *mask, int bh, int i,
                          int j0, int nc, float lse, float *p, float *f, float *pf)
{
    int valid = i - j0 + 1 < nc ? i - j0 + 1 : nc;
    if (valid < 0)
        valid = 0;
    float scale = sl_attn_scale(d->d);
    if (valid > 0)
        row_factors(d, mask, bh, i, j0, valid, f);
    for (int c = 0; c < valid; c++) {
        p[c] = sl_attn_exp(sl_attn_logit(p[c], scale), lse);
        pf[c] = p[c] * f[c];
    }
    for (int c = valid; c < nc; c++) {
        p[c] = 0.0f;
        f[c] = 0.0f;
        pf[c] = 0.0f;
    }
}

/* The rows x cols block of dst (+)= src (packed), dst's element at is
 * (r * ld + c) of floats, or of bf16 values (bf16: each widened, added
 * to when accumulating, rounded: the copies' sl_put, then their
 * rounding). */
static void put_rows(float *dst, int bf16, size_t at, size_t ld, const float *src, int rows,
                     int cols, int accumulate)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = at + (size_t)r * ld + c;
            float v = src[(size_t)r * cols + c];
            if (bf16) {
                uint16_t *p = (uint16_t *)(void *)dst + i;
                *p = sl_bf16_round(accumulate ? sl_bf16_widen(*p) + v : v);
            } else {
                sl_put(&dst[i], v, accumulate);
            }
        }
}

/* sum a[c] * b[c] in double, in order. */
static float row_dot(const float *a, const float *b, int n)
{
    double s = 0.0;
    for (int c = 0; c < n; c++)
        s += (double)(a[c] * b[c]);
    return (float)s;
}

static void flash_backward_one(const sl_attention_desc *d, const attn_view *v, const float *qkv,
                               const float *y, const float *dy, const float *lse, float *dqkv,
                               int accumulate, float *slot)
{
    int t = d->t, hd = d->d;
    const float *q = qkv + v->off, *k = q + v->c, *val = q + 2 * v->c;
    const float *out = y + v->out, *dout = dy + v->out, *lrow = lse + (size_t)v->bh * t;
    float *dq = slot, *di = dq + round16((size_t)t * hd), *p = di + round16((size_t)t);
    float *f = p + round16(BR * BC), *ds = f + round16(BR * BC), *dpf = ds + round16(BR * BC);
    float *dk = dpf + round16(BR * BC), *dv = dk + round16((size_t)BC * hd);
    float scale = sl_attn_scale(hd);
    size_t ldq = v->ldq, ldo = v->ldo;
    if (d->bf16) { /* the sequence's columns widened, rows hd apart */
        size_t th = round16((size_t)t * hd);
        float *w = dv + round16((size_t)BC * hd);
        const uint16_t *x16 = (const uint16_t *)(const void *)qkv + v->off;
        widen_rows(w, x16, v->ldq, t, hd);
        widen_rows(w + th, x16 + v->c, v->ldq, t, hd);
        widen_rows(w + 2 * th, x16 + 2 * v->c, v->ldq, t, hd);
        widen_rows(w + 3 * th, (const uint16_t *)(const void *)y + v->out, v->ldo, t, hd);
        widen_rows(w + 4 * th, (const uint16_t *)(const void *)dy + v->out, v->ldo, t, hd);
        q = w;
        k = w + th;
        val = w + 2 * th;
        out = w + 3 * th;
        dout = w + 4 * th;
        ldq = ldo = (size_t)hd;
    }
    sl_dropout_mask m = sl_dropout_mask_of(d->p, d->seed);
    for (int i = 0; i < t; i++) /* D_i = rowsum(dO o O) */
        di[i] = row_dot(out + (size_t)i * ldo, dout + (size_t)i * ldo, hd);
    memset(dq, 0, (size_t)t * hd * sizeof(float));
    for (int j0 = 0; j0 < t; j0 += BC) {
        int nc = t - j0 < BC ? t - j0 : BC;
        memset(dk, 0, (size_t)nc * hd * sizeof(float));
        memset(dv, 0, (size_t)nc * hd * sizeof(float));
        for (int i0 = j0 / BR * BR; i0 < t; i0 += BR) {
            int nr = t - i0 < BR ? t - i0 : BR;
            const float *qi = q + (size_t)i0 * ldq, *doi = dout + (size_t)i0 * ldo;
            sgemm(0, 1, nr, nc, hd, 1.0f, qi, ldq, k + (size_t)j0 * ldq, ldq, 0.0f, p, BC);
            for (int r = 0; r < nr; r++)
                recompute_row(d, &m, v->bh, i0 + r, j0, nc, lrow[i0 + r], p + (size_t)r * BC,
                              f + (size_t)r * BC, ds + (size_t)r * BC);
            sgemm(1, 0, nc, hd, nr, 1.0f, ds, BC, doi, ldo, 1.0f, dv, (size_t)hd);
            sgemm(0, 1, nr, nc, hd, 1.0f, doi, ldo, val + (size_t)j0 * ldq, ldq, 0.0f, dpf, BC);
            for (int r = 0; r < nr; r++) {
                const float *pr = p + (size_t)r * BC, *fr = f + (size_t)r * BC,
                            *dr = dpf + (size_t)r * BC;
                float *sr = ds + (size_t)r * BC;
                float dii = di[i0 + r];
                for (int c = 0; c < nc; c++)
                    sr[c] = sl_attn_grad_logit(pr[c], dr[c], fr[c], dii);
            }
            sgemm(0, 0, nr, hd, nc, scale, ds, BC, k + (size_t)j0 * ldq, ldq, 1.0f,
                  dq + (size_t)i0 * hd, (size_t)hd);
            sgemm(1, 0, nc, hd, nr, scale, ds, BC, qi, ldq, 1.0f, dk, (size_t)hd);
        }
        size_t at = v->off + v->c + (size_t)j0 * v->ldq;
        put_rows(dqkv, d->bf16, at, v->ldq, dk, nc, hd, accumulate);
        put_rows(dqkv, d->bf16, at + v->c, v->ldq, dv, nc, hd, accumulate);
    }
    put_rows(dqkv, d->bf16, v->off, v->ldq, dq, t, hd, accumulate);
}

/* ---------------------------------------------------------------- table */

void sl_cpu_attention_forward(const sl_exec *ex, const sl_attention_desc *d, const float *qkv,
                              float *y, float *saved, void *ws)
{
    size_t items = attn_items(d, 0), per = slot_floats(d, 0);
    int slots = attn_slots(items);
    float *base = ws;
    if (d->flash) {
        int tiles = (d->t + BR - 1) / BR;
        ATTN_FOR_ITEMS(ex, items, slots, {
            attn_view v = attn_view_of(d, (int)(item_ / tiles));
            flash_forward_tile(d, &v, qkv, (int)(item_ % tiles) * BR, y, saved,
                               base + (size_t)slot_ * per);
        });
    } else {
        ATTN_FOR_ITEMS(ex, items, slots, {
            attn_view v = attn_view_of(d, (int)item_);
            plain_forward_one(d, &v, qkv, y, saved, base + (size_t)slot_ * per);
        });
    }
}

void sl_cpu_attention_backward(const sl_exec *ex, const sl_attention_desc *d, const float *qkv,
                               const float *y, const float *dy, const float *saved, float *dqkv,
                               int accumulate, void *ws)
{
    size_t items = attn_items(d, 1), per = slot_floats(d, 1);
    int slots = attn_slots(items);
    float *base = ws;
    ATTN_FOR_ITEMS(ex, items, slots, {
        attn_view v = attn_view_of(d, (int)item_);
        float *slot = base + (size_t)slot_ * per;
        if (d->flash)
            flash_backward_one(d, &v, qkv, y, dy, saved, dqkv, accumulate, slot);
        else
            plain_backward_one(d, &v, qkv, dy, saved, dqkv, accumulate, slot);
    });
}
