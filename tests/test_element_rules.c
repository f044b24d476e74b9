/*
 * test_element_rules.c — the element rules of base/element.h combined the
 * way the GPU's traversals combine them, checked on the CPU (no GPU runs
 * here): the kernels of cuda_transformer.cu and cuda_loss_optim.cu split a
 * row among lanes (element j to lane j % lanes), join the lanes' partial
 * results by xor butterflies within warps of 32 and then over the warps
 * (cuda_block.h), and finish with the same finalisers as the CPU's row
 * walks. These emulations follow that order exactly and check:
 *
 * - the first-maximum combine (sl_argmax_takes) gives sl_row_max's value
 *   and index whatever the split, ties and -inf included;
 * - a butterfly leaves the same bits in every lane (so the kernels need
 *   no broadcast), over a warp and over a block's warps;
 * - a language model's row loss, hit and gradient, and LayerNorm's
 *   statistics and input gradient, from the split sums agree with the
 *   CPU's in-order walks within rounding (the GPU's tolerance against the
 *   CPU; bit equality is not a goal).
 *
 * And the CPU's own vectorised optimizer loops against the rules applied
 * one element at a time: the same bits.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"

enum { WARP = 32, MAX_LANES = 1024 };

/* A uniform double in [0, 1) from a 64-bit LCG (fixed seeds: the same
 * rows every run). */
static double unif(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* The xor butterfly over lanes [w * 32, w * 32 + 32) of v, as
 * sl_cuda_warp_sum: step o, every lane adds its partner's value of the
 * step before. */
static void warp_butterfly(double *v, int w)
{
    double *l = v + w * WARP;
    for (int o = 16; o > 0; o >>= 1) {
        double next[WARP];
        for (int i = 0; i < WARP; i++)
            next[i] = l[i] + l[i ^ o];
        memcpy(l, next, sizeof next);
    }
}

/* sl_cuda_block_sum_warps over `lanes` partial sums (a multiple of 32):
 * each warp's butterfly, then a butterfly over the warps' lane-0 sums
 * padded with zeros; every lane's result is checked to be one value. */
static double block_sum(double *v, int lanes)
{
    int warps = lanes / WARP;
    for (int w = 0; w < warps; w++) {
        warp_butterfly(v, w);
        for (int i = 1; i < WARP; i++)
            ck_assert_msg(memcmp(&v[w * WARP], &v[w * WARP + i], sizeof(double)) == 0,
                          "lane %d of warp %d differs after the butterfly", i, w);
    }
    double top[WARP];
    for (int i = 0; i < WARP; i++)
        top[i] = i < warps ? v[i * WARP] : 0.0;
    warp_butterfly(top, 0);
    for (int i = 1; i < WARP; i++)
        ck_assert(memcmp(&top[0], &top[i], sizeof(double)) == 0);
    return top[0];
}

/* sl_cuda_block_argmax over per-lane (value, index) pairs. */
static void warp_argmax(float *v, int *at, int w)
{
    float *lv = v + w * WARP;
    int *li = at + w * WARP;
    for (int o = 16; o > 0; o >>= 1) {
        float nv[WARP];
        int ni[WARP];
        for (int i = 0; i < WARP; i++) {
            int take = sl_argmax_takes(lv[i ^ o], li[i ^ o], lv[i], li[i]);
            nv[i] = take ? lv[i ^ o] : lv[i];
            ni[i] = take ? li[i ^ o] : li[i];
        }
        memcpy(lv, nv, sizeof nv);
        memcpy(li, ni, sizeof ni);
    }
}

static void block_argmax(float *v, int *at, int lanes, float *best, int *arg)
{
    int warps = lanes / WARP;
    for (int w = 0; w < warps; w++)
        warp_argmax(v, at, w);
    float tv[WARP];
    int ti[WARP];
    for (int i = 0; i < WARP; i++) {
        tv[i] = i < warps ? v[i * WARP] : -INFINITY;
        ti[i] = i < warps ? at[i * WARP] : 0x7fffffff;
    }
    warp_argmax(tv, ti, 0);
    *best = tv[0];
    *arg = ti[0];
}

/* Each lane's scan of its elements j = lane, lane + lanes, ... */
static void lane_argmax(const float *x, int n, int lanes, float *v, int *at)
{
    for (int t = 0; t < lanes; t++) {
        v[t] = -INFINITY;
        at[t] = 0x7fffffff;
        for (int j = t; j < n; j += lanes)
            if (sl_argmax_takes(x[j], j, v[t], at[t])) {
                v[t] = x[j];
                at[t] = j;
            }
    }
}

/* Rows of n logits: normal values, coarse values (many ties), or
 * everything -inf but a few. */
static void fill_row(float *x, int n, int kind, uint64_t *s)
{
    for (int j = 0; j < n; j++) {
        double u = unif(s);
        x[j] = kind == 0   ? (float)(8.0 * u - 4.0)
               : kind == 1 ? (float)floor(4.0 * u)
                           : (u < 0.999 ? -INFINITY : (float)floor(3.0 * unif(s)));
    }
    if (kind == 2)
        x[n / 2] = 1.0f; /* at least one finite value */
}

START_TEST(test_argmax_combine_finds_the_first_maximum)
{
    static float x[5000], v[MAX_LANES];
    static int at[MAX_LANES];
    int sizes[] = {1, 31, 33, 1000, 5000};
    int lanes[] = {32, 256, 1024};
    uint64_t s = 7;
    for (int kind = 0; kind < 3; kind++)
        for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
            for (size_t b = 0; b < sizeof lanes / sizeof *lanes; b++) {
                int n = sizes[a];
                fill_row(x, n, kind, &s);
                int want;
                float wv = sl_row_max(x, n, &want);
                lane_argmax(x, n, lanes[b], v, at);
                float got;
                int arg;
                block_argmax(v, at, lanes[b], &got, &arg);
                ck_assert_msg(arg == want && got == wv,
                              "kind %d, %d logits, %d lanes: (%g, %d), want (%g, %d)", kind, n,
                              lanes[b], got, arg, wv, want);
            }
}
END_TEST

START_TEST(test_butterflies_leave_one_value_in_every_lane)
{
    static double v[MAX_LANES];
    uint64_t s = 11;
    for (int lanes = 32; lanes <= MAX_LANES; lanes *= 2) {
        double exact = 0.0;
        for (int i = 0; i < lanes; i++) {
            v[i] = (unif(&s) - 0.5) * pow(10.0, (double)(i % 13) - 6.0);
            exact += v[i];
        }
        double got = block_sum(v, lanes); /* asserts one value per lane inside */
        ck_assert_msg(fabs(got - exact) <= 1e-12 * fabs(exact) + 1e-15, "%d lanes: %.17g vs %.17g",
                      lanes, got, exact);
    }
}
END_TEST

/* lm_xent_k's traversal of one row, emulated: returns the loss, hit and
 * gradient (in g). */
static void lm_row_split(const float *x, int vocab, int label, float scale, int lanes,
                         float *g, double *loss, int *hit)
{
    static float v[MAX_LANES];
    static int at[MAX_LANES];
    static double part[MAX_LANES];
    lane_argmax(x, vocab, lanes, v, at);
    float mx;
    int arg;
    block_argmax(v, at, lanes, &mx, &arg);
    for (int t = 0; t < lanes; t++) {
        part[t] = 0.0;
        for (int j = t; j < vocab; j += lanes)
            part[t] += sl_exp_poly(x[j] - mx);
    }
    double sum = block_sum(part, lanes);
    float f = sl_lm_xent_factor(sum, scale);
    for (int j = 0; j < vocab; j++) {
        float e = sl_exp_poly(x[j] - mx) * f;
        g[j] = j == label ? e - scale : e;
    }
    *loss = sl_lm_xent_loss(sum, x[label], mx);
    *hit = arg == label;
}

START_TEST(test_lm_loss_split_agrees_with_the_row_walk)
{
    enum { V = 50257 };
    float *x = malloc(V * sizeof(float)), *ref = malloc(V * sizeof(float)),
          *g = malloc(V * sizeof(float));
    ck_assert(x && ref && g);
    uint64_t s = 3;
    for (int row = 0; row < 4; row++) {
        fill_row(x, V, row % 2, &s);
        int label = (int)(unif(&s) * V);
        float scale = 1.0f / 3.0f;
        memcpy(ref, x, V * sizeof(float));
        double want_loss;
        int want_hit;
        sl_lm_xent_row(ref, V, label, -1, scale, 1, &want_loss, &want_hit);
        double loss;
        int hit;
        lm_row_split(x, V, label, scale, 1024, g, &loss, &hit);
        ck_assert_int_eq(hit, want_hit);
        ck_assert_msg(fabs(loss - want_loss) <= 1e-12 * fabs(want_loss), "loss %.17g vs %.17g",
                      loss, want_loss);
        double worst = 0.0;
        for (int j = 0; j < V; j++) {
            double d = fabs((double)g[j] - ref[j]);
            double tol = 2e-7 * fabs(ref[j]) + 1e-12; /* one float rounding of the factor */
            if (d > tol)
                worst = fmax(worst, d / tol);
        }
        ck_assert_msg(worst == 0.0, "row %d: a gradient %g tolerances off", row, worst);
    }
    free(x);
    free(ref);
    free(g);
}
END_TEST

START_TEST(test_layernorm_warp_split_agrees_with_the_row_walk)
{
    int widths[] = {1, 31, 64, 768, 1600};
    uint64_t s = 5;
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        int c = widths[k];
        float *x = malloc(c * sizeof(float)), *dy = malloc(c * sizeof(float)),
              *w = malloc(c * sizeof(float)), *ref = malloc(c * sizeof(float));
        ck_assert(x && dy && w && ref);
        for (int j = 0; j < c; j++) {
            x[j] = (float)(3.0 * unif(&s) + 0.5);
            dy[j] = (float)(unif(&s) - 0.5);
            w[j] = (float)(unif(&s) + 0.5);
        }
        float m0, r0;
        sl_ln_row_stats(x, c, 1e-5f, &m0, &r0);
        double ps[WARP], pq[WARP], pg[WARP], pgx[WARP];
        for (int l = 0; l < WARP; l++) {
            ps[l] = pq[l] = pg[l] = pgx[l] = 0.0;
            for (int j = l; j < c; j += WARP)
                sl_ln_stat_terms(x[j], &ps[l], &pq[l]);
        }
        warp_butterfly(ps, 0);
        warp_butterfly(pq, 0);
        float m, r;
        sl_ln_moments(ps[0], pq[0], c, 1e-5f, &m, &r);
        ck_assert_msg(fabsf(m - m0) <= 1e-6f * fabsf(m0) && fabsf(r - r0) <= 1e-6f * r0,
                      "c %d: mean %g vs %g, rstd %g vs %g", c, m, m0, r, r0);
        sl_ln_row_backward(x, dy, c, w, m0, r0, ref, 0);
        for (int l = 0; l < WARP; l++)
            for (int j = l; j < c; j += WARP)
                sl_ln_dx_terms(x[j], dy[j], w[j], m0, r0, &pg[l], &pgx[l]);
        warp_butterfly(pg, 0);
        warp_butterfly(pgx, 0);
        float mg, mgx;
        sl_ln_dx_means(pg[0], pgx[0], c, &mg, &mgx);
        float scale = 0.0f;
        for (int j = 0; j < c; j++)
            scale = fmaxf(scale, fabsf(ref[j]));
        for (int j = 0; j < c; j++) {
            float d = sl_ln_dx_of(x[j], dy[j], w[j], m0, r0, mg, mgx);
            ck_assert_msg(fabsf(d - ref[j]) <= 1e-5f * scale + 1e-30f, "c %d, dx[%d] %g vs %g",
                          c, j, d, ref[j]);
        }
        free(x);
        free(dy);
        free(w);
        free(ref);
    }
}
END_TEST

/* The CPU backend's optimizer loops (spans of restrict arrays, vectorised,
 * sqrtf inline) against the element rules one element at a time: the
 * same bits, for Adam and AdamW, and SGD with and without Nesterov. */
START_TEST(test_cpu_optimizer_loops_equal_the_element_rules)
{
    enum { N = 100003 };
    float *w[2], *m[2], *v[2], *g = malloc(N * sizeof(float));
    ck_assert(g);
    th_fill_normal(g, N, 9, 1e-3f);
    for (int k = 0; k < 2; k++) {
        w[k] = malloc(N * sizeof(float));
        m[k] = malloc(N * sizeof(float));
        v[k] = malloc(N * sizeof(float));
        ck_assert(w[k] && m[k] && v[k]);
        th_fill_normal(w[k], N, 10, 0.5f);
        th_fill_normal(m[k], N, 11, 1e-4f);
        for (int i = 0; i < N; i++)
            v[k][i] = g[i] * g[i] * 2.0f;
    }
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(2, &be), SL_OK);
    sl_exec ex = {be, 2, 0, NULL};
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        be->adam_update(&ex, N, w[0], g, m[0], v[0], 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, decoupled,
                        7, 0.5f);
        sl_adam_step a = sl_adam_step_of(1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, decoupled, 7, 0.5f);
        for (size_t i = 0; i < N; i++)
            sl_adam_element(i, w[1], g, m[1], v[1], &a);
        ck_assert_msg(memcmp(w[0], w[1], N * sizeof(float)) == 0 &&
                          memcmp(m[0], m[1], N * sizeof(float)) == 0 &&
                          memcmp(v[0], v[1], N * sizeof(float)) == 0,
                      "Adam (decoupled %d): the loop differs from the rule", decoupled);
    }
    for (int nesterov = 0; nesterov < 2; nesterov++)
        for (int first = 1; first >= 0; first--) {
            be->sgd_update(&ex, N, w[0], g, m[0], 0.05f, 0.9f, 1e-4f, nesterov, first, 0.5f);
            for (size_t i = 0; i < N; i++)
                sl_sgd_element(i, w[1], g, m[1], 0.05f, 0.9f, 1e-4f, nesterov, first, 0.5f);
            ck_assert_msg(memcmp(w[0], w[1], N * sizeof(float)) == 0 &&
                              memcmp(m[0], m[1], N * sizeof(float)) == 0,
                          "SGD (nesterov %d, first %d): the loop differs from the rule", nesterov,
                          first);
        }
    sl_backend_destroy(be);
    for (int k = 0; k < 2; k++) {
        free(w[k]);
        free(m[k]);
        free(v[k]);
    }
    free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("element_rules");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_argmax_combine_finds_the_first_maximum);
    tcase_add_test(tc, test_butterflies_leave_one_value_in_every_lane);
    tcase_add_test(tc, test_lm_loss_split_agrees_with_the_row_walk);
    tcase_add_test(tc, test_layernorm_warp_split_agrees_with_the_row_walk);
    tcase_add_test(tc, test_cpu_optimizer_loops_equal_the_element_rules);
    suite_add_tcase(s, tc);
    return th_run_suite(s);
}
