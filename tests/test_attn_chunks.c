/*
 * test_attn_chunks.c — the chunked schedule of the CUDA attention
 * (base/attn_chunks.h), checked on the CPU: no GPU runs here, so what
 * cuda_attention.cu hands cuBLAS is run here instead. The chunks cover
 * every query once with its causal key range; the groups every pair
 * once; the workspace regions are disjoint, aligned and within the plan,
 * and stay under 64 MiB at GPT-2 small's B=8 T=1024. Then the whole
 * schedule (the same pointer arrays, the same column-major calls with
 * the same transpositions, sizes, leading dimensions, alphas and betas,
 * each checked against cuBLAS's argument rules and kept inside its
 * tensors, no two matrices of one call writing one element; the row
 * steps between them with the same element rules and Philox quads) runs
 * through cblas, and gives the CPU backend's attention (cpu_attention.c)
 * within 2e-5 of the largest value: forward and backward, flash and
 * plain, with and without dropout, accumulating or not, in one chunk and
 * in several chunks and groups.
 */
#include <cblas.h>
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/attn_chunks.h"
#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"

static sl_attention_desc desc_of(int n, int heads, int t, int d, int flash, float p)
{
    sl_attention_desc a;
    memset(&a, 0, sizeof a);
    a.n = n;
    a.heads = heads;
    a.t = t;
    a.d = d;
    a.flash = flash;
    a.p = p;
    a.seed = 0x5eed1234abcdull;
    a.counter = 77;
    return a;
}

/* ------------------------------------------------------------ geometry */

static void check_cover(int n, int heads, int t, size_t scratch)
{
    sl_attention_desc d = desc_of(n, heads, t, 8, 1, 0.0f);
    sl_attn_layout L = sl_attn_layout_for(&d, 1, scratch);
    ck_assert_int_eq(L.pairs, n * heads);
    ck_assert_int_ge(L.ld, t);
    ck_assert_int_eq(L.ld % 4, 0);
    ck_assert_int_ge(L.chunk, t < SL_ATTN_MIN_CHUNK ? t : SL_ATTN_MIN_CHUNK);
    ck_assert_int_le(L.chunk, t);
    ck_assert(L.chunk == t || L.chunk % SL_ATTN_CHUNK_STEP == 0);
    ck_assert_int_ge(L.group, 1);
    ck_assert_int_le(L.group, L.pairs);
    ck_assert_int_le(L.group, SL_ATTN_MAX_GROUP);
    /* the buffer fits the scratch, unless one slab alone is more */
    ck_assert(L.group == 1 || (size_t)L.group * L.slab * sizeof(float) <= scratch);
    ck_assert_uint_eq(L.slab, (size_t)L.chunk * L.ld);
    /* chunks: every query row once, in order, each with keys [0, last + 1) */
    int next = 0;
    for (int ci = 0; ci < L.chunks; ci++) {
        int i0, rows, keys;
        sl_attn_chunk_rows(&L, ci, &i0, &rows, &keys);
        ck_assert_int_eq(i0, next);
        ck_assert_int_ge(rows, 1);
        ck_assert_int_le(rows, L.chunk);
        ck_assert_int_eq(keys, i0 + rows);
        next = i0 + rows;
    }
    ck_assert_int_eq(next, t);
    /* the last chunk (the backward's first) covers every key row */
    int i0, rows, keys;
    sl_attn_chunk_rows(&L, L.chunks - 1, &i0, &rows, &keys);
    ck_assert_int_eq(keys, t);
    next = 0;
    for (int g = 0; g < L.groups; g++) {
        int pair0, count;
        sl_attn_group_pairs(&L, g, &pair0, &count);
        ck_assert_int_eq(pair0, next);
        ck_assert_int_ge(count, 1);
        ck_assert_int_le(count, L.group);
        next = pair0 + count;
    }
    ck_assert_int_eq(next, L.pairs);
}

START_TEST(test_attn_chunks_cover_every_query_and_pair_once)
{
    static const int shapes[][3] = {{1, 1, 1},    {2, 3, 7},     {8, 12, 1024}, {128, 12, 64},
                                    {1, 1, 4096}, {4, 16, 2048}, {3, 5, 333},   {1, 200, 65},
                                    {8192, 12, 1}};
    static const size_t scratch[] = {SL_ATTN_SCRATCH_BYTES, 1, 4096, 77824, (size_t)1 << 20};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t k = 0; k < sizeof scratch / sizeof scratch[0]; k++)
            check_cover(shapes[s][0], shapes[s][1], shapes[s][2], scratch[k]);
}
END_TEST

START_TEST(test_attn_chunks_gpt2_small_workspace_under_64_mib)
{
    sl_attention_desc d = desc_of(8, 12, 1024, 64, 1, 0.1f);
    sl_attn_layout f = sl_attn_layout_for(&d, 0, SL_ATTN_SCRATCH_BYTES);
    sl_attn_layout b = sl_attn_layout_for(&d, 1, SL_ATTN_SCRATCH_BYTES);
    printf("GPT-2 small B=8 T=1024: chunk %d x %d chunks, group %d x %d, workspace forward "
           "%.1f MiB, backward %.1f MiB\n",
           b.chunk, b.chunks, b.group, b.groups, f.bytes / 1048576.0, b.bytes / 1048576.0);
    ck_assert_int_eq(b.chunk, 64);
    ck_assert_int_eq(b.groups, 1); /* every pair in one GEMM per chunk */
    ck_assert_uint_lt(b.bytes, (size_t)64 << 20);
    ck_assert_uint_le(f.bytes, SL_ATTN_SCRATCH_BYTES + ((size_t)1 << 20));
    /* B=128 T=64: one GEMM of every pair over the whole sequence */
    sl_attention_desc s = desc_of(128, 12, 64, 64, 1, 0.0f);
    sl_attn_layout l = sl_attn_layout_for(&s, 1, SL_ATTN_SCRATCH_BYTES);
    ck_assert_int_eq(l.chunks, 1);
    ck_assert_int_eq(l.groups, 1);
    /* the layout is a function of the shape alone */
    sl_attn_layout again = sl_attn_layout_for(&d, 1, SL_ATTN_SCRATCH_BYTES);
    ck_assert(memcmp(&again, &b, sizeof b) == 0);
}
END_TEST

START_TEST(test_attn_chunks_layout_regions_disjoint_and_aligned)
{
    for (int backward = 0; backward < 2; backward++)
        for (int flash = 0; flash < 2; flash++) {
            sl_attention_desc d = desc_of(3, 5, 333, 7, flash, 0.0f);
            sl_attn_layout L = sl_attn_layout_for(&d, backward, 77824);
            size_t sum = 0;
            for (int a = 0; a < SL_ATTN_ARRAYS; a++) {
                ck_assert_uint_eq(L.first[a], sum);
                int fwd = a == SL_ATTN_Q || a == SL_ATTN_K || a == SL_ATTN_V || a == SL_ATTN_O ||
                          a == SL_ATTN_S;
                ck_assert(backward || fwd || L.count[a] == 0);
                ck_assert(!(backward || fwd) || L.count[a] > 0);
                sum += L.count[a];
            }
            ck_assert_uint_eq(L.entries, sum);
            size_t buffer = (size_t)L.group * L.slab * sizeof(float);
            ck_assert_uint_ge(L.scores_off, L.entries * sizeof(float *));
            ck_assert_uint_eq(L.scores_off % SL_ATTN_ALIGN, 0);
            size_t end = L.scores_off + buffer;
            if (backward) {
                ck_assert_uint_ge(L.grads_off, end);
                ck_assert_uint_eq(L.grads_off % SL_ATTN_ALIGN, 0);
                end = L.grads_off + buffer;
                if (flash) {
                    ck_assert_uint_ge(L.rowsum_off, end);
                    ck_assert_uint_eq(L.rowsum_off % SL_ATTN_ALIGN, 0);
                    end = L.rowsum_off + (size_t)L.pairs * L.t * sizeof(float);
                } else {
                    ck_assert_uint_eq(L.rowsum_off, 0);
                }
            }
            ck_assert_uint_ge(L.bytes, end);
            ck_assert_uint_lt(L.bytes, end + SL_ATTN_ALIGN);
        }
    sl_attention_desc none = desc_of(0, 2, 5, 4, 1, 0.0f);
    ck_assert_uint_eq(sl_attn_layout_for(&none, 1, SL_ATTN_SCRATCH_BYTES).bytes, 0);
}
END_TEST

/* Quads cut a row at the mask's Philox blocks: every element once, in
 * order, each quad inside one block, the causal count right. */
START_TEST(test_attn_quads_cut_rows_at_philox_blocks)
{
    for (uint64_t e_row = 0; e_row < 9; e_row++)
        for (int len = 0; len < 11; len++)
            for (int valid = 0; valid <= len; valid++) {
                int next = 0, j0, n, nv;
                uint64_t q = 0;
                for (; sl_attn_quad(e_row, len, valid, q, &j0, &n, &nv); q++) {
                    ck_assert_int_eq(j0, next);
                    ck_assert(n >= 1 && n <= 4);
                    ck_assert_uint_eq((e_row + (uint64_t)j0) / 4,
                                      (e_row + (uint64_t)j0 + (uint64_t)n - 1) / 4);
                    int want = valid - j0 < 0 ? 0 : (valid - j0 < n ? valid - j0 : n);
                    ck_assert_int_eq(nv > 0 ? nv : 0, want);
                    next = j0 + n;
                }
                ck_assert_int_eq(next, len);
                ck_assert(q <= (uint64_t)(len + 6) / 4 + 1);
            }
}
END_TEST

START_TEST(test_attn_offsets_aligned_when_head_size_is_a_multiple_of_4)
{
    static const int ds[] = {4, 8, 64, 3, 5};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        sl_attention_desc d = desc_of(2, 3, 131, ds[k], 1, 0.0f);
        sl_attn_layout L = sl_attn_layout_for(&d, 1, 77824);
        int all = 1;
        for (int a = 0; a < SL_ATTN_ARRAYS; a++)
            for (size_t e = 0; e < L.count[a]; e++)
                all &= sl_attn_entry_offset(&L, a, e) % 4 == 0;
        ck_assert_int_eq(sl_attn_offsets_aligned16(&L), ds[k] % 4 == 0);
        if (sl_attn_offsets_aligned16(&L))
            ck_assert_msg(all, "d %d: an entry not on 16 bytes", ds[k]);
    }
}
END_TEST

/* ------------------------------------------------------------- emulator */

/* One call's tensors: the pointer arrays point into these. */
typedef struct emu {
    sl_attn_layout L;
    const sl_attention_desc *d;
    float **ptrs;
    float *base[SL_ATTN_ARRAYS]; /* each array's tensor */
    size_t size[SL_ATTN_ARRAYS]; /* its floats */
    unsigned char *written;      /* per element of the largest tensor: one call's writes */
    size_t written_cap;
    float *scores, *grads, *rowsum;
} emu;

static void emu_init(emu *E, const sl_attention_desc *d, int backward, size_t scratch,
                     const float *qkv, float *out, float *dqkv)
{
    memset(E, 0, sizeof *E);
    E->d = d;
    E->L = sl_attn_layout_for(d, backward, scratch);
    const sl_attn_layout *L = &E->L;
    size_t c = (size_t)d->heads * d->d, rows = (size_t)d->n * d->t;
    size_t buffer = (size_t)L->group * L->slab;
    E->ptrs = calloc(L->entries, sizeof *E->ptrs);
    E->scores = malloc(buffer * sizeof(float));
    E->grads = backward ? malloc(buffer * sizeof(float)) : NULL;
    E->rowsum = backward ? malloc((size_t)L->pairs * L->t * sizeof(float)) : NULL;
    /* the buffers start as garbage the products must overwrite */
    for (size_t i = 0; i < buffer; i++) {
        E->scores[i] = 1e30f;
        if (E->grads)
            E->grads[i] = -1e30f;
    }
    float *const at[SL_ATTN_ARRAYS] = {(float *)qkv, (float *)qkv, (float *)qkv, out, dqkv,
                                       dqkv,         dqkv,         E->scores,    E->grads};
    for (int a = 0; a < SL_ATTN_ARRAYS; a++) {
        E->base[a] = at[a];
        E->size[a] = a == SL_ATTN_O ? rows * c : a >= SL_ATTN_S ? buffer : rows * 3 * c;
        if (E->size[a] > E->written_cap)
            E->written_cap = E->size[a];
        for (size_t e = 0; e < L->count[a]; e++)
            E->ptrs[L->first[a] + e] = at[a] + sl_attn_entry_offset(L, a, e);
    }
    E->written = malloc(E->written_cap);
}

static void emu_free(emu *E)
{
    free(E->ptrs);
    free(E->scores);
    free(E->grads);
    free(E->rowsum);
    free(E->written);
}

/* Matrix p (column-major: `rows` x `cols`, ld apart) of array a inside
 * a's tensor. */
static void assert_inside(const emu *E, int a, const float *m, int rows, int cols, int ld)
{
    ptrdiff_t lo = m - E->base[a];
    ptrdiff_t hi = lo + (ptrdiff_t)(cols - 1) * ld + rows;
    ck_assert_msg(lo >= 0 && (size_t)hi <= E->size[a], "array %d: [%td, %td) outside %zu", a, lo,
                  hi, E->size[a]);
}

/* The batched product exactly as chunk_gemm passes it to cuBLAS. */
static void emu_gemm(emu *E, int which, int ci, int pair0, int pairs, int accumulate)
{
    const sl_attn_layout *L = &E->L;
    sl_attn_gemm g = sl_attn_product(L, which, ci, accumulate, sl_attn_scale(L->d));
    sl_attn_colmajor x = sl_attn_colmajor_of(&g);
    /* cuBLAS's CUBLAS_STATUS_INVALID_VALUE rules */
    ck_assert(x.m >= 0 && x.n >= 0 && x.k >= 0);
    ck_assert_int_ge(x.ld_first, x.trans_first ? (x.k > 1 ? x.k : 1) : (x.m > 1 ? x.m : 1));
    ck_assert_int_ge(x.ld_second, x.trans_second ? (x.n > 1 ? x.n : 1) : (x.k > 1 ? x.k : 1));
    ck_assert_int_ge(x.ldc, x.m > 1 ? x.m : 1);
    float **A = E->ptrs + sl_attn_entry_first(L, x.first, ci, pair0);
    float **B = E->ptrs + sl_attn_entry_first(L, x.second, ci, pair0);
    float **C = E->ptrs + sl_attn_entry_first(L, x.c, ci, pair0);
    ck_assert(sl_attn_entry_first(L, x.first, ci, pair0) + (size_t)pairs <=
              L->first[x.first] + L->count[x.first]);
    ck_assert(sl_attn_entry_first(L, x.c, ci, pair0) + (size_t)pairs <=
              L->first[x.c] + L->count[x.c]);
    memset(E->written, 0, E->size[x.c]);
    for (int p = 0; p < pairs; p++) {
        assert_inside(E, x.first, A[p], x.trans_first ? x.k : x.m, x.trans_first ? x.m : x.k,
                      x.ld_first);
        assert_inside(E, x.second, B[p], x.trans_second ? x.n : x.k, x.trans_second ? x.k : x.n,
                      x.ld_second);
        assert_inside(E, x.c, C[p], x.m, x.n, x.ldc);
        /* one assertion a matrix: Check logs every ck_assert */
        size_t twice = SIZE_MAX;
        for (int col = 0; col < x.n; col++)
            for (int row = 0; row < x.m; row++) {
                size_t at = (size_t)(C[p] - E->base[x.c]) + (size_t)col * x.ldc + row;
                if (E->written[at]++ != 0 && twice == SIZE_MAX)
                    twice = at;
            }
        ck_assert_msg(twice == SIZE_MAX, "product %d: two matrices write %zu", which, twice);
        cblas_sgemm(CblasColMajor, x.trans_first ? CblasTrans : CblasNoTrans,
                    x.trans_second ? CblasTrans : CblasNoTrans, x.m, x.n, x.k, x.alpha, A[p],
                    x.ld_first, B[p], x.ld_second, x.beta, C[p], x.ldc);
    }
}

/* Factor of row element j from quad-drawn factors, as row_quads draws them. */
typedef void (*row_visit)(void *ctx, int j, int causal, float f);

static void emu_quads(const sl_dropout_mask *m, uint64_t counter, uint64_t e_row, int len,
                      int valid, row_visit visit, void *ctx)
{
    int j0, n, nv;
    for (uint64_t q = 0; sl_attn_quad(e_row, len, valid, q, &j0, &n, &nv); q++) {
        float fac[4] = {0, 0, 0, 0};
        if (nv > 0)
            sl_dropout_factors(m, counter, e_row + (uint64_t)j0, nv, fac);
        for (int u = 0; u < n; u++)
            visit(ctx, j0 + u, u < nv, fac[u]);
    }
}

typedef struct softmax_row_ctx {
    float *s, *p, mx, sf, scale;
} softmax_row_ctx;

static void softmax_visit(void *vc, int j, int causal, float f)
{
    softmax_row_ctx *c = vc;
    float pj = causal ? sl_attn_exp(sl_attn_logit(c->s[j], c->scale), c->mx) / c->sf : 0.0f;
    if (c->p)
        c->p[j] = pj;
    c->s[j] = pj * f;
}

/* softmax_rows of cuda_attention.cu, one row after another. */
static void emu_softmax(emu *E, int ci, int pair0, int pairs, float *saved,
                        const sl_dropout_mask *m)
{
    const sl_attn_layout *L = &E->L;
    int i0, rows, keys, t = L->t;
    sl_attn_chunk_rows(L, ci, &i0, &rows, &keys);
    float scale = sl_attn_scale(L->d);
    for (int slot = 0; slot < pairs; slot++)
        for (int r = 0; r < rows; r++) {
            int bh = pair0 + slot, i = i0 + r, valid = i + 1;
            float *s = E->scores + (size_t)slot * L->slab + (size_t)r * L->ld;
            float mx = -INFINITY;
            for (int j = 0; j < valid; j++)
                mx = fmaxf(mx, sl_attn_logit(s[j], scale));
            double sum = 0.0;
            for (int j = 0; j < valid; j++)
                sum += sl_attn_exp(sl_attn_logit(s[j], scale), mx);
            softmax_row_ctx c = {s, saved && !E->d->flash ? saved + ((size_t)bh * t + i) * t : NULL,
                                 mx, (float)sum, scale};
            emu_quads(m, E->d->counter, sl_attn_element(E->d->bh0 + bh, t, i, 0), keys, valid, softmax_visit,
                      &c);
            if (c.p)
                for (int j = keys; j < t; j++)
                    c.p[j] = 0.0f;
            if (saved && E->d->flash)
                saved[(size_t)bh * t + i] = sl_attn_lse(mx, sum);
        }
}

typedef struct grad_row_ctx {
    float *s, *g;
    const float *p;
    float lse, di, scale;
    int flash;
    double acc;
} grad_row_ctx;

static void di_visit(void *vc, int j, int causal, float f)
{
    grad_row_ctx *c = vc;
    (void)causal;
    c->acc += (double)(c->g[j] * f) * c->p[j];
}

static void grad_visit(void *vc, int j, int causal, float f)
{
    grad_row_ctx *c = vc;
    if (causal) {
        float pj = c->flash ? sl_attn_exp(sl_attn_logit(c->s[j], c->scale), c->lse) : c->p[j];
        c->s[j] = pj * f;
        c->g[j] = sl_attn_grad_logit(pj, c->g[j], f, c->di);
    } else {
        c->s[j] = 0.0f;
        c->g[j] = 0.0f;
    }
}

/* grad_rows of cuda_attention.cu. */
static void emu_grad(emu *E, int ci, int pair0, int pairs, const float *saved,
                     const sl_dropout_mask *m)
{
    const sl_attn_layout *L = &E->L;
    int i0, rows, keys, t = L->t, flash = E->d->flash;
    sl_attn_chunk_rows(L, ci, &i0, &rows, &keys);
    for (int slot = 0; slot < pairs; slot++)
        for (int r = 0; r < rows; r++) {
            int bh = pair0 + slot, i = i0 + r, valid = i + 1;
            size_t at = (size_t)slot * L->slab + (size_t)r * L->ld, ri = (size_t)bh * t + i;
            uint64_t e_row = sl_attn_element(E->d->bh0 + bh, t, i, 0);
            grad_row_ctx c = {E->scores + at, E->grads + at, flash ? NULL : saved + ri * t,
                              flash ? saved[ri] : 0.0f, 0.0f, sl_attn_scale(L->d), flash, 0.0};
            if (flash) {
                c.di = E->rowsum[ri];
            } else {
                emu_quads(m, E->d->counter, e_row, valid, valid, di_visit, &c);
                c.di = (float)c.acc;
            }
            emu_quads(m, E->d->counter, e_row, keys, valid, grad_visit, &c);
        }
}

/* sl_cuda_attention_forward's loop. */
static void emu_forward(const sl_attention_desc *d, size_t scratch, const float *qkv, float *y,
                        float *saved)
{
    emu E;
    emu_init(&E, d, 0, scratch, qkv, y, NULL);
    sl_dropout_mask m = sl_dropout_mask_of(saved ? d->p : 0.0f, d->seed);
    for (int g = 0; g < E.L.groups; g++) {
        int pair0, pairs;
        sl_attn_group_pairs(&E.L, g, &pair0, &pairs);
        for (int ci = 0; ci < E.L.chunks; ci++) {
            emu_gemm(&E, SL_ATTN_SCORES, ci, pair0, pairs, 0);
            emu_softmax(&E, ci, pair0, pairs, saved, &m);
            emu_gemm(&E, SL_ATTN_OUTPUT, ci, pair0, pairs, 0);
        }
    }
    emu_free(&E);
}

/* sl_cuda_attention_backward's loop. */
static void emu_backward(const sl_attention_desc *d, size_t scratch, const float *qkv,
                         const float *y, const float *dy, const float *saved, float *dqkv,
                         int accumulate)
{
    emu E;
    emu_init(&E, d, 1, scratch, qkv, (float *)dy, dqkv);
    const sl_attn_layout *L = &E.L;
    if (d->flash) {
        size_t c = (size_t)L->heads * L->d;
        for (size_t row = 0; row < (size_t)L->pairs * L->t; row++) {
            size_t bh = row / L->t, i = row % L->t, b = bh / L->heads, h = bh % L->heads;
            size_t off = (b * L->t + i) * c + h * L->d;
            double acc = 0.0;
            for (int k = 0; k < L->d; k++)
                acc += (double)(y[off + k] * dy[off + k]);
            E.rowsum[row] = (float)acc;
        }
    }
    sl_dropout_mask m = sl_dropout_mask_of(d->p, d->seed);
    for (int g = 0; g < L->groups; g++) {
        int pair0, pairs;
        sl_attn_group_pairs(L, g, &pair0, &pairs);
        for (int ci = L->chunks - 1; ci >= 0; ci--) {
            if (d->flash)
                emu_gemm(&E, SL_ATTN_SCORES, ci, pair0, pairs, accumulate);
            emu_gemm(&E, SL_ATTN_DPF, ci, pair0, pairs, accumulate);
            emu_grad(&E, ci, pair0, pairs, saved, &m);
            emu_gemm(&E, SL_ATTN_DVG, ci, pair0, pairs, accumulate);
            emu_gemm(&E, SL_ATTN_DQG, ci, pair0, pairs, accumulate);
            emu_gemm(&E, SL_ATTN_DKG, ci, pair0, pairs, accumulate);
        }
    }
    emu_free(&E);
}

/* The emulated schedule against the CPU backend for one shape. */
static void check_against_cpu(const sl_backend *cpu, int n, int heads, int t, int hd, int flash,
                              float p, size_t scratch)
{
    sl_attention_desc d = desc_of(n, heads, t, hd, flash, p);
    sl_exec ex = {cpu, 2, 0, NULL};
    size_t c = (size_t)heads * hd, rows = (size_t)n * t;
    size_t nq = rows * 3 * c, ny = rows * c;
    size_t ns = flash ? (size_t)n * heads * t : (size_t)n * heads * t * t;
    float *qkv = malloc(nq * sizeof(float)), *dy = malloc(ny * sizeof(float));
    th_fill_normal(qkv, nq, 101 + (uint64_t)t, 1.0f);
    th_fill_normal(dy, ny, 202 + (uint64_t)t, 1.0f);
    float *y_ref = malloc(ny * sizeof(float)), *y_emu = malloc(ny * sizeof(float));
    float *s_ref = malloc(ns * sizeof(float)), *s_emu = malloc(ns * sizeof(float));
    size_t ws_bytes = cpu->attention_workspace_bytes(cpu, &d, 0);
    size_t wb = cpu->attention_workspace_bytes(cpu, &d, 1);
    void *ws = malloc((ws_bytes > wb ? ws_bytes : wb) + 64);
    cpu->attention_forward(&ex, &d, qkv, y_ref, s_ref, ws);
    for (size_t i = 0; i < ny; i++)
        y_emu[i] = NAN;
    for (size_t i = 0; i < ns; i++)
        s_emu[i] = NAN;
    emu_forward(&d, scratch, qkv, y_emu, s_emu);
    double ey = th_rel_err(y_emu, y_ref, ny), es = th_rel_err(s_emu, s_ref, ns);
    /* backward: into zeros (accumulate 0, over garbage) and onto a start */
    float *start = malloc(nq * sizeof(float)), *dq_ref = malloc(nq * sizeof(float)),
          *dq_emu = malloc(nq * sizeof(float));
    th_fill_normal(start, nq, 303, 1.0f);
    double eg = 0;
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        memcpy(dq_ref, start, nq * sizeof(float));
        memcpy(dq_emu, start, nq * sizeof(float));
        cpu->attention_backward(&ex, &d, qkv, y_ref, dy, s_ref, dq_ref, accumulate, ws);
        emu_backward(&d, scratch, qkv, y_ref, dy, s_ref, dq_emu, accumulate);
        eg = fmax(eg, th_rel_err(dq_emu, dq_ref, nq));
    }
    sl_attn_layout L = sl_attn_layout_for(&d, 1, scratch);
    printf("n %d heads %d t %d d %d %s p %.1f: %d chunks of %d, %d groups of %d: y %.1e, "
           "saved %.1e, dqkv %.1e\n",
           n, heads, t, hd, flash ? "flash" : "plain", p, L.chunks, L.chunk, L.groups, L.group,
           ey, es, eg);
    ck_assert_msg(ey <= 2e-5 && es <= 2e-5 && eg <= 2e-5, "y %g saved %g dqkv %g", ey, es, eg);
    free(qkv);
    free(dy);
    free(y_ref);
    free(y_emu);
    free(s_ref);
    free(s_emu);
    free(ws);
    free(start);
    free(dq_ref);
    free(dq_emu);
}

START_TEST(test_attn_chunked_schedule_equals_cpu_attention)
{
    sl_backend *cpu = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(2, &cpu), SL_OK);
    for (int flash = 0; flash < 2; flash++)
        for (int drop = 0; drop < 2; drop++) {
            float p = drop ? 0.3f : 0.0f;
            /* one chunk, one group */
            check_against_cpu(cpu, 2, 3, 7, 5, flash, p, SL_ATTN_SCRATCH_BYTES);
            check_against_cpu(cpu, 1, 2, 1, 4, flash, p, SL_ATTN_SCRATCH_BYTES);
            /* chunks of 64 (the last 22 rows) in 3 groups of 2 pairs */
            check_against_cpu(cpu, 2, 3, 150, 8, flash, p, 77824);
            /* chunks of 96 and 8, every pair in one group; d not a multiple of 4 */
            check_against_cpu(cpu, 1, 2, 200, 3, flash, p, 2 * 96 * 200 * sizeof(float));
            /* a group of one pair, more than the scratch (the smallest chunk) */
            check_against_cpu(cpu, 2, 1, 130, 4, flash, p, 4096);
        }
    sl_backend_destroy(cpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attn_chunks");
    TCase *tc = tcase_create("attn_chunks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_attn_chunks_cover_every_query_and_pair_once);
    tcase_add_test(tc, test_attn_chunks_gpt2_small_workspace_under_64_mib);
    tcase_add_test(tc, test_attn_chunks_layout_regions_disjoint_and_aligned);
    tcase_add_test(tc, test_attn_quads_cut_rows_at_philox_blocks);
    tcase_add_test(tc, test_attn_offsets_aligned_when_head_size_is_a_multiple_of_4);
    tcase_add_test(tc, test_attn_chunked_schedule_equals_cpu_attention);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
