/*
 * test_cuda_attention.c — the CUDA backend's attention op against the CPU
 * backend's (cpu_attention.c), op by op the way ggml's test-backend-ops
 * checks a backend: forward (output and saved state: each row's
 * log-sum-exp, or the probabilities) and backward (into garbage without
 * accumulating, onto a start when accumulating), flash and plain, with and
 * without dropout (the same Philox mask), in one chunk and in several
 * chunks and groups (base/attn_chunks.h), for a head size that is a
 * multiple of 4 and one that is not. Tolerances, relative to the largest
 * value: 1e-4 in FP32, 1e-2 with TF32 (10-bit mantissas in the products);
 * with TF32 both kernel sets of the fused tiles (mma.sync, and wmma with
 * SL_CUDA_FLASH_MMA=off).
 * On the GPU: the same call at other addresses gives the same bits (what
 * a re-forward under any schedule relies on), and evaluation (no saved
 * state) gives training's output without dropout; the fused tiles on bf16
 * activations give the bits of their float run on the widened inputs,
 * rounded; GPT-2 small's shape
 * (B=8 T=1024, 12 heads of 64) runs, repeats its bits and prints its
 * time. Skipped, visibly, without a usable GPU.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/backend.h"
#include "base/element.h"
#include "cpu/cpu.h"
#include "cuda/cuda_backend.h"
#include "harness.h"

typedef struct shape {
    int n, heads, t, d, flash;
    float p;
} shape;

static sl_attention_desc desc_of(const shape *s, float p)
{
    sl_attention_desc a;
    memset(&a, 0, sizeof a);
    a.n = s->n;
    a.heads = s->heads;
    a.t = s->t;
    a.d = s->d;
    a.flash = s->flash;
    a.p = p;
    a.seed = 0xa77e11u;
    a.counter = 5;
    /* with dropout, a call on images 3.. of a larger batch: its mask
     * elements start past the first 3 images' */
    a.bh0 = p > 0.0f ? 3 * s->heads : 0;
    return a;
}

/* One case's host tensors and the CPU's results. */
typedef struct host_case {
    size_t nq, ny, ns;
    float *qkv, *dy, *start; /* inputs; dqkv's start when accumulating */
    float *y, *saved;        /* the CPU's forward */
    float *dq[2];            /* the CPU's backward: over garbage, onto start */
} host_case;

static void host_case_make(const sl_backend *cpu, const shape *s, host_case *h)
{
    sl_attention_desc d = desc_of(s, s->p);
    size_t c = (size_t)s->heads * s->d, rows = (size_t)s->n * s->t;
    h->nq = rows * 3 * c;
    h->ny = rows * c;
    h->ns = (size_t)s->n * s->heads * s->t * (s->flash ? 1 : (size_t)s->t);
    h->qkv = malloc(h->nq * sizeof(float));
    h->dy = malloc(h->ny * sizeof(float));
    h->start = malloc(h->nq * sizeof(float));
    h->y = malloc(h->ny * sizeof(float));
    h->saved = malloc(h->ns * sizeof(float));
    th_fill_normal(h->qkv, h->nq, 11 + (uint64_t)s->t, 1.0f);
    th_fill_normal(h->dy, h->ny, 12 + (uint64_t)s->t, 1.0f);
    th_fill_normal(h->start, h->nq, 13, 1.0f);
    sl_exec ex = {cpu, 8, 0, NULL};
    size_t wf = cpu->attention_workspace_bytes(cpu, &d, 0),
           wb = cpu->attention_workspace_bytes(cpu, &d, 1);
    void *ws = malloc((wf > wb ? wf : wb) + 64);
    cpu->attention_forward(&ex, &d, h->qkv, h->y, h->saved, ws);
    for (int acc = 0; acc < 2; acc++) {
        h->dq[acc] = malloc(h->nq * sizeof(float));
        for (size_t i = 0; i < h->nq; i++)
            h->dq[acc][i] = acc ? h->start[i] : 12345.0f;
        cpu->attention_backward(&ex, &d, h->qkv, h->y, h->dy, h->saved, h->dq[acc], acc, ws);
    }
    free(ws);
}

static void host_case_free(host_case *h)
{
    free(h->qkv);
    free(h->dy);
    free(h->start);
    free(h->y);
    free(h->saved);
    free(h->dq[0]);
    free(h->dq[1]);
}

/* One run on the device, every tensor `shift` floats past its
 * allocation's start; the results copied back. */
typedef struct device_run {
    float *y, *saved, *dq[2], *y_eval;
} device_run;

static float *dev_alloc(const sl_backend *be, size_t floats, size_t shift)
{
    float *p = be->alloc(be, (floats + shift) * sizeof(float) + 64, "test tensor");
    ck_assert_ptr_nonnull(p);
    return p;
}

static void device_run_do(const sl_backend *be, const shape *s, const host_case *h, size_t shift,
                          device_run *r)
{
    sl_exec ex = {be, 1, 0, NULL};
    sl_attention_desc d = desc_of(s, s->p);
    size_t wf = be->attention_workspace_bytes(be, &d, 0), wb = be->attention_workspace_bytes(be, &d, 1);
    size_t wsf = ((wf > wb ? wf : wb) + sizeof(float) - 1) / sizeof(float);
    float *qkv0 = dev_alloc(be, h->nq, shift), *dy0 = dev_alloc(be, h->ny, shift),
          *y0 = dev_alloc(be, h->ny, shift), *s0 = dev_alloc(be, h->ns, shift),
          *dq0 = dev_alloc(be, h->nq, shift), *ws0 = dev_alloc(be, wsf, shift);
    float *qkv = qkv0 + shift, *dy = dy0 + shift, *y = y0 + shift, *sv = s0 + shift,
          *dq = dq0 + shift, *ws = ws0 + shift;
    be->upload(&ex, qkv, h->qkv, h->nq * sizeof(float));
    be->upload(&ex, dy, h->dy, h->ny * sizeof(float));
    be->attention_forward(&ex, &d, qkv, y, sv, ws);
    r->y = malloc(h->ny * sizeof(float));
    r->saved = malloc(h->ns * sizeof(float));
    be->download(&ex, r->y, y, h->ny * sizeof(float));
    be->download(&ex, r->saved, sv, h->ns * sizeof(float));
    float *nan = malloc(h->nq * sizeof(float));
    for (size_t i = 0; i < h->nq; i++)
        nan[i] = NAN; /* without accumulating, dqkv is written, never read */
    for (int acc = 0; acc < 2; acc++) {
        be->upload(&ex, dq, acc ? h->start : nan, h->nq * sizeof(float));
        be->attention_backward(&ex, &d, qkv, y, dy, sv, dq, acc, ws);
        r->dq[acc] = malloc(h->nq * sizeof(float));
        be->download(&ex, r->dq[acc], dq, h->nq * sizeof(float));
    }
    /* evaluation: no saved state, no dropout */
    be->attention_forward(&ex, &d, qkv, y, NULL, ws);
    r->y_eval = malloc(h->ny * sizeof(float));
    be->download(&ex, r->y_eval, y, h->ny * sizeof(float));
    ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
    free(nan);
    float *const all[6] = {qkv0, dy0, y0, s0, dq0, ws0};
    for (int k = 0; k < 6; k++)
        be->free(be, all[k]);
}

static void device_run_free(device_run *r)
{
    free(r->y);
    free(r->saved);
    free(r->dq[0]);
    free(r->dq[1]);
    free(r->y_eval);
}

static void assert_same_bits(const float *a, const float *b, size_t n, const char *what,
                             const shape *s)
{
    ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0,
                  "n %d heads %d t %d d %d %s: %s differ between two runs", s->n, s->heads, s->t,
                  s->d, s->flash ? "flash" : "plain", what);
}

/* The CUDA instances the checks run on (gpu_variant below). */
enum { VARIANTS = 4 };
static const char *const VARIANT_NAMES[VARIANTS] = {"fp32", "tf32", "tf32 wmma", "tf32 bf16-widened"};

static void check_bf16(const sl_backend *be, const shape *s, const host_case *h, int bf16_products);

static void check_shape(const sl_backend *gpu, int variant, const shape *s, const host_case *h)
{
    /* the fused tiles: with dropout only their mma.sync kernels (the wmma
     * ones of variant 2 leave it to the chunks) */
    int tf32 = variant > 0,
        fused = tf32 && s->flash && s->d == 64 && (s->p == 0.0f || variant != 2);
    if (variant == 3 && !fused)
        return; /* 3 differs from 1 only in the fused tiles' bf16 */
    double tol = tf32 ? 1e-2 : 1e-4;
    device_run a, b;
    device_run_do(gpu, s, h, 0, &a);
    device_run_do(gpu, s, h, 64 + 3 * 4, &b); /* other addresses, still 16-byte aligned */
    double ey = th_rel_err(a.y, h->y, h->ny), es = th_rel_err(a.saved, h->saved, h->ns);
    double e0 = th_rel_err(a.dq[0], h->dq[0], h->nq), e1 = th_rel_err(a.dq[1], h->dq[1], h->nq);
    printf("n %d heads %d t %4d d %2d %s p %.1f %s: y %.1e saved %.1e dqkv %.1e (+= %.1e)\n",
           s->n, s->heads, s->t, s->d, s->flash ? "flash" : "plain", s->p,
           VARIANT_NAMES[variant], ey, es, e0, e1);
    ck_assert_msg(ey <= tol && es <= tol && e0 <= tol && e1 <= tol,
                  "n %d heads %d t %d d %d flash %d p %g tf32 %d: y %g saved %g dqkv %g / %g "
                  "(bound %g)",
                  s->n, s->heads, s->t, s->d, s->flash, s->p, tf32, ey, es, e0, e1, tol);
    assert_same_bits(a.y, b.y, h->ny, "outputs", s);
    assert_same_bits(a.saved, b.saved, h->ns, "saved states", s);
    assert_same_bits(a.dq[0], b.dq[0], h->nq, "gradients", s);
    assert_same_bits(a.dq[1], b.dq[1], h->nq, "accumulated gradients", s);
    assert_same_bits(a.y_eval, b.y_eval, h->ny, "evaluation outputs", s);
    if (s->p == 0.0f) /* evaluation is training without dropout */
        assert_same_bits(a.y_eval, a.y, h->ny, "evaluation and training outputs", s);
    if (fused) {
        /* the fused tiles stage tensors that are only 4-byte aligned a
         * float at a time instead of 16 bytes at a time: the same bits */
        device_run c;
        device_run_do(gpu, s, h, 1, &c);
        assert_same_bits(a.y, c.y, h->ny, "outputs (4-byte aligned)", s);
        assert_same_bits(a.saved, c.saved, h->ns, "saved states (4-byte aligned)", s);
        assert_same_bits(a.dq[0], c.dq[0], h->nq, "gradients (4-byte aligned)", s);
        assert_same_bits(a.dq[1], c.dq[1], h->nq, "accumulated gradients (4-byte aligned)", s);
        device_run_free(&c);
        check_bf16(gpu, s, h, variant == 1);
    }
    device_run_free(&a);
    device_run_free(&b);
}

/* bf16 activations in the fused tiles (SL_BF16_ATTENTION). On widened
 * tiles (bf16_products 0), the device's bf16 run gives the bits of its
 * float run on the widened inputs with the results rounded (y; the saved
 * state; dqkv written and accumulated into, where the float run's start
 * is the widened bf16 start). With bf16 products, P and dS are rounded
 * to bf16 where the float run has them in TF32: the same results within
 * 2e-2 of the largest value (the saved log-sum-exp within 1e-4: the
 * scores are exact products of bf16 values in both), and a second bf16
 * run repeats the first's bits. */
static void check_bf16(const sl_backend *be, const shape *s, const host_case *h, int bf16_products)
{
    sl_exec ex = {be, 1, 0, NULL}, ex16 = {be, 1, 1, NULL};
    sl_attention_desc d = desc_of(s, s->p), d16 = d;
    d16.bf16 = 1;
    ck_assert(be->attention_native_bf16 && be->attention_native_bf16(be, &d16));
    ck_assert(be->bf16_kernels & SL_BF16_ATTENTION);
    size_t nq = h->nq, ny = h->ny, ns = h->ns, ws = 0;
    for (int k = 0; k < 4; k++) {
        size_t w = be->attention_workspace_bytes(be, k & 1 ? &d16 : &d, k >> 1);
        ws = w > ws ? w : ws;
    }
    uint16_t *q16 = malloc(nq * 2), *dy16 = malloc(ny * 2), *st16 = malloc(nq * 2),
             *got = malloc(nq * 2);
    float *qf = malloc(nq * 4), *dyf = malloc(ny * 4), *stf = malloc(nq * 4), *hf = malloc(nq * 4),
          *sv = malloc(ns * 4), *sv16 = malloc(ns * 4);
    ck_assert(q16 && dy16 && st16 && got && qf && dyf && stf && hf && sv && sv16);
    th_bf16_round_all(q16, h->qkv, nq);
    th_bf16_round_all(dy16, h->dy, ny);
    th_bf16_round_all(st16, h->start, nq);
    th_bf16_widen_all(qf, q16, nq);
    th_bf16_widen_all(dyf, dy16, ny);
    th_bf16_widen_all(stf, st16, nq);
    float *dq_ = dev_alloc(be, nq, 0), *q_ = dev_alloc(be, nq, 0), *g_ = dev_alloc(be, ny, 0),
          *y_ = dev_alloc(be, ny, 0), *s_ = dev_alloc(be, ns, 0), *w_ = dev_alloc(be, ws / 4 + 1, 0);
    /* the float run on the widened inputs, y rounded as a bf16 network
     * stores it and widened again for the backward */
    be->upload(&ex, q_, qf, nq * 4);
    be->upload(&ex, g_, dyf, ny * 4);
    be->attention_forward(&ex, &d, q_, y_, s_, w_);
    be->download(&ex, hf, y_, ny * 4);
    be->download(&ex, sv, s_, ns * 4);
    ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
    uint16_t *yr = malloc(ny * 2), *y16 = malloc(ny * 2);
    ck_assert(yr && y16);
    th_bf16_round_all(yr, hf, ny);
    th_bf16_widen_all(hf, yr, ny);
    be->upload(&ex, y_, hf, ny * 4);
    uint16_t *wantd[2];
    for (int acc = 0; acc < 2; acc++) {
        be->upload(&ex, dq_, stf, nq * 4);
        be->attention_backward(&ex, &d, q_, y_, g_, s_, dq_, acc, w_);
        be->download(&ex, hf, dq_, nq * 4);
        ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
        wantd[acc] = malloc(nq * 2);
        ck_assert(wantd[acc]);
        th_bf16_round_all(wantd[acc], hf, nq);
    }
    /* the bf16 run */
    be->upload(&ex, q_, q16, nq * 2);
    be->upload(&ex, g_, dy16, ny * 2);
    be->attention_forward(&ex16, &d16, q_, y_, s_, w_);
    be->download(&ex, y16, y_, ny * 2);
    be->download(&ex, sv16, s_, ns * 4);
    ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
    /* against the float run: within bf16's rounding with bf16 products
     * (a, b: the two widened), its bits on widened tiles */
    float *a = malloc(nq * 4), *b = malloc(nq * 4);
    ck_assert(a && b);
    double ey = 0.0, es = 0.0, ed[2] = {0.0, 0.0};
    if (bf16_products) {
        uint16_t *again = malloc(ny * 2);
        ck_assert(again);
        th_bf16_widen_all(a, y16, ny);
        th_bf16_widen_all(b, yr, ny);
        ey = th_rel_err(a, b, ny);
        es = th_rel_err(sv16, sv, ns);
        be->attention_forward(&ex16, &d16, q_, y_, s_, w_);
        be->download(&ex, again, y_, ny * 2);
        ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(memcmp(again, y16, ny * 2) == 0, "t %d: bf16 y not repeated", s->t);
        ck_assert_msg(ey <= 2e-2 && es <= 1e-4, "t %d: bf16 products: y %g saved %g", s->t, ey, es);
        free(again);
    } else {
        ck_assert_msg(memcmp(y16, yr, ny * 2) == 0, "t %d: bf16 y differs from the float run's",
                      s->t);
        ck_assert_msg(memcmp(sv16, sv, ns * 4) == 0, "t %d: bf16 saved state differs", s->t);
    }
    for (int acc = 0; acc < 2; acc++) {
        be->upload(&ex, dq_, st16, nq * 2);
        be->attention_backward(&ex16, &d16, q_, y_, g_, s_, dq_, acc, w_);
        be->download(&ex, got, dq_, nq * 2);
        ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
        if (bf16_products) {
            th_bf16_widen_all(a, got, nq);
            th_bf16_widen_all(b, wantd[acc], nq);
            ed[acc] = th_rel_err(a, b, nq);
            ck_assert_msg(ed[acc] <= 2e-2, "t %d: bf16 products: dqkv (accumulate %d) %g", s->t,
                          acc, ed[acc]);
        } else {
            ck_assert_msg(memcmp(got, wantd[acc], nq * 2) == 0,
                          "t %d: bf16 dqkv (accumulate %d) differs from the float run's", s->t, acc);
        }
        free(wantd[acc]);
    }
    if (bf16_products)
        printf("n %d heads %d t %4d d %2d flash bf16 products: y %.1e saved %.1e dqkv %.1e (+= "
               "%.1e) of the float run, repeated\n",
               s->n, s->heads, s->t, s->d, ey, es, ed[0], ed[1]);
    else
        printf("n %d heads %d t %4d d %2d flash bf16: the float run's bits, rounded\n", s->n,
               s->heads, s->t, s->d);
    free(a), free(b);
    float *const all[6] = {dq_, q_, g_, y_, s_, w_};
    for (int k = 0; k < 6; k++)
        be->free(be, all[k]);
    free(q16), free(dy16), free(st16), free(got), free(yr), free(y16);
    free(qf), free(dyf), free(stf), free(hf), free(sv), free(sv16);
}

static const shape SHAPES[] = {
    /* one chunk; d = 5 keeps the products FP32 even with TF32 */
    {2, 3, 7, 5, 1, 0.0f},
    {2, 3, 7, 5, 0, 0.3f},
    {2, 3, 7, 5, 1, 0.3f},
    {1, 2, 1, 4, 1, 0.2f},
    {2, 4, 300, 16, 0, 0.1f},
    {2, 12, 256, 64, 1, 0.1f},
    /* two chunks (768 + 256 rows), plain: P of 8 x 1024 x 1024 */
    {1, 8, 1024, 8, 0, 0.1f},
    /* 32 chunks of 64 rows, two groups (48 + 16 pairs) */
    {2, 32, 2048, 4, 1, 0.1f},
    /* one chunk, two groups (1536 + 512 pairs), plain */
    {32, 64, 64, 4, 0, 0.1f},
    /* head size 64, flash: with TF32 cuda_flash.cu's fused tiles (whole
     * tiles; a last tile of 44 and of 1 query rows; a single token), in
     * FP32 the chunks above; with dropout (and {2, 12, 256, 64, 1, 0.1}
     * above) the mma.sync tiles draw the chunks' mask, rows not a
     * multiple of 4 keys long included (t = 65, 300) */
    {2, 12, 256, 64, 1, 0.0f},
    {3, 2, 300, 64, 1, 0.0f},
    {1, 3, 65, 64, 1, 0.0f},
    {2, 2, 1, 64, 1, 0.0f},
    {3, 2, 300, 64, 1, 0.1f},
    {1, 3, 65, 64, 1, 0.2f},
};

/* A CUDA instance: FP32 (variant 0); TF32 (1: where the fused tiles
 * apply, their mma.sync kernels, and for bf16 activations their bf16
 * products); TF32 with the fused tiles' wmma kernels and bf16 on widened
 * tiles (2: SL_CUDA_FLASH_MMA=off SL_CUDA_FLASH_BF16=off); TF32 with the
 * mma.sync kernels on widened bf16 tiles (3: SL_CUDA_FLASH_BF16=off). The
 * instance reads the switches when it is made. */

static sl_status gpu_variant(int variant, sl_backend **out)
{
    static const char *const names[2] = {"SL_CUDA_FLASH_MMA", "SL_CUDA_FLASH_BF16"};
    const unsigned off[VARIANTS] = {0u, 0u, 3u, 2u}; /* bit k: names[k] off */
    th_switches sw;
    th_switches_off(&sw, names, 2, off[variant]);
    sl_status st = sl_cuda_backend_create(0, 1, variant > 0, out);
    th_switches_restore(&sw);
    return st;
}

/* Each shape's CPU results once, against each variant. */
START_TEST(test_cuda_attention_matches_cpu_and_repeats_its_bits)
{
    sl_backend *gpu[VARIANTS] = {NULL};
    for (int v = 0; v < VARIANTS; v++)
        if (gpu_variant(v, &gpu[v]) != SL_OK) {
            printf("SKIPPED: no usable CUDA device: %s\n", sl_last_error());
            for (int u = 0; u < v; u++)
                sl_backend_destroy(gpu[u]);
            return;
        }
    sl_backend *cpu = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(8, &cpu), SL_OK);
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) {
        host_case h;
        host_case_make(cpu, &SHAPES[k], &h);
        for (int v = 0; v < VARIANTS; v++)
            check_shape(gpu[v], v, &SHAPES[k], &h);
        host_case_free(&h);
    }
    sl_backend_destroy(cpu);
    for (int v = 0; v < VARIANTS; v++)
        sl_backend_destroy(gpu[v]);
}
END_TEST

/* GPT-2 small's attention (B=8, T=1024, 12 heads of 64, flash), with
 * dropout 0.1 and without (with TF32: the fused tiles, their wmma kernels
 * leaving dropout to 16 chunks of 64 rows): forward and backward run,
 * repeat their bits, and their time is printed (for reading, not a
 * bound). */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void gpt2_small_attention(float p)
{
    const shape s = {8, 12, 1024, 64, 1, p};
    sl_attention_desc d = desc_of(&s, s.p), d16 = d;
    d16.bf16 = 1;
    size_t c = (size_t)s.heads * s.d, rows = (size_t)s.n * s.t;
    size_t nq = rows * 3 * c, ny = rows * c, ns = (size_t)s.n * s.heads * s.t;
    float *qkv = malloc(nq * sizeof(float)), *dy = malloc(ny * sizeof(float));
    uint16_t *qkv16 = malloc(nq * 2), *dy16 = malloc(ny * 2);
    ck_assert(qkv && dy && qkv16 && dy16);
    th_fill_normal(qkv, nq, 21, 1.0f);
    th_fill_normal(dy, ny, 22, 1.0f);
    th_bf16_round_all(qkv16, qkv, nq);
    th_bf16_round_all(dy16, dy, ny);
    /* float activations on variants 0-2 (3 is 1 in float), bf16
     * activations on 1 (bf16 products) and 3 (widened) */
    const int runs[5][2] = {{0, 0}, {1, 0}, {2, 0}, {1, 1}, {3, 1}};
    for (int k = 0; k < 5; k++) {
        int v = runs[k][0], bf16 = runs[k][1];
        size_t es = bf16 ? 2 : sizeof(float); /* bytes an activation */
        sl_backend *be = NULL;
        if (gpu_variant(v, &be) != SL_OK) {
            printf("SKIPPED: no usable CUDA device: %s\n", sl_last_error());
            break;
        }
        sl_exec ex = {be, 1, bf16, NULL};
        const sl_attention_desc *dd = bf16 ? &d16 : &d;
        size_t wf = be->attention_workspace_bytes(be, dd, 0),
               wb = be->attention_workspace_bytes(be, dd, 1);
        float *dq_ = dev_alloc(be, nq, 0), *q_ = dev_alloc(be, nq, 0), *g_ = dev_alloc(be, ny, 0),
              *y_ = dev_alloc(be, ny, 0), *s_ = dev_alloc(be, ns, 0),
              *w_ = dev_alloc(be, ((wf > wb ? wf : wb) + 3) / 4, 0);
        be->upload(&ex, q_, bf16 ? (const void *)qkv16 : (const void *)qkv, nq * es);
        be->upload(&ex, g_, bf16 ? (const void *)dy16 : (const void *)dy, ny * es);
        char *out[2][2];
        double ms = 0;
        for (int run = 0; run < 5; run++) {
            ck_assert(be->sync(&ex) == SL_OK);
            double t0 = now_ms();
            be->attention_forward(&ex, dd, q_, y_, s_, w_);
            be->attention_backward(&ex, dd, q_, y_, g_, s_, dq_, 0, w_);
            ck_assert_msg(be->sync(&ex) == SL_OK, "%s", sl_last_error());
            if (run >= 2)
                ms += (now_ms() - t0) / 3;
            if (run < 2) {
                out[run][0] = malloc(ny * es);
                out[run][1] = malloc(nq * es);
                be->download(&ex, out[run][0], y_, ny * es);
                be->download(&ex, out[run][1], dq_, nq * es);
            }
        }
        ck_assert(be->sync(&ex) == SL_OK);
        ck_assert_msg(memcmp(out[0][0], out[1][0], ny * es) == 0, "GPT-2 small outputs not repeated");
        ck_assert_msg(memcmp(out[0][1], out[1][1], nq * es) == 0,
                      "GPT-2 small gradients not repeated");
        int finite = 1;
        for (size_t i = 0; i < nq; i++) {
            float g;
            if (bf16)
                th_bf16_widen_all(&g, (const uint16_t *)out[0][1] + i, 1);
            else
                memcpy(&g, out[0][1] + i * sizeof(float), sizeof g);
            finite &= isfinite(g) != 0;
        }
        ck_assert_msg(finite, "GPT-2 small gradients not finite");
        /* the causal products' FLOPs: 2 in the forward (S, P V), 5 in a
         * backward that recomputes S once (S, dP, dV, dQ, dK), each
         * 2 n h (t^2 / 2) d */
        double unit = 2.0 * s.n * s.heads * ((double)s.t * s.t / 2) * s.d;
        printf("GPT-2 small attention (B=8 T=1024 12x64, flash, dropout %.1f, %s, %s "
               "activations): forward + backward %.2f ms (%.1f TFLOP/s of the causal products), "
               "workspace %.1f MiB\n",
               (double)p, VARIANT_NAMES[v], bf16 ? "bf16" : "float", ms, 7 * unit / (ms * 1e9),
               (wf > wb ? wf : wb) / 1048576.0);
        for (int run = 0; run < 2; run++) {
            free(out[run][0]);
            free(out[run][1]);
        }
        float *const all[6] = {dq_, q_, g_, y_, s_, w_};
        for (int m = 0; m < 6; m++)
            be->free(be, all[m]);
        sl_backend_destroy(be);
    }
    free(qkv);
    free(dy);
    free(qkv16);
    free(dy16);
}

START_TEST(test_cuda_attention_gpt2_small_runs_and_repeats_its_bits)
{
    gpt2_small_attention(0.1f);
    gpt2_small_attention(0.0f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_attention");
    TCase *tc = tcase_create("cuda_attention");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cuda_attention_matches_cpu_and_repeats_its_bits);
    tcase_add_test(tc, test_cuda_attention_gpt2_small_runs_and_repeats_its_bits);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
