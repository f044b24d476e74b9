/*
 * test_lm_head.c — the language-model head fused with its loss
 * (sl_net_set_lm_head): against the same network ending in a separate
 * Linear classifier and the plain softmax cross-entropy (loss, logits,
 * and the tied weight's gradient as the sum of its two uses), chunked
 * against unfused, the ignore index, the planned scratch of one chunk,
 * checkpointed runs bit-identical to plain, and the errors.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"
#include "layers/lm_head.h"

#define C 6
#define V 11
#define N 9

/* in -> a: Linear(C, V) (weight [V, C], the tied one) -> relu -> b:
 * Linear(V, C); with `separate`, a classifier Linear(C, V) named "head"
 * ends the chain instead of the tied head. Weights are seeded alike. */
static sl_net *make_net(sl_context *ctx, int separate, sl_schedule schedule, int depth)
{
    sl_net *net;
    ck_assert(sl_sublinear(ctx, C, schedule, &net) == SL_OK);
    ck_assert(sl_net_add(net, "a", sl_linear(C, V, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "act", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "b", sl_linear(V, C, 1)) == SL_OK);
    for (int i = 0; i < depth; i++) {
        char name[16];
        snprintf(name, sizeof name, "deep%d", i);
        ck_assert(sl_net_add(net, name, sl_linear(C, C, 1)) == SL_OK);
    }
    if (separate)
        ck_assert(sl_net_add(net, "head", sl_linear(C, V, 0)) == SL_OK);
    return net;
}

static void copy_params(sl_net *dst, sl_net *src)
{
    int n = th_param_count(src);
    for (int i = 0; i < n; i++) {
        sl_param_info a, b;
        ck_assert(sl_net_param(src, i, &a) == SL_OK);
        if (sl_net_find_param(dst, a.name, &b) != SL_OK)
            continue;
        memcpy(b.data, a.data, a.count * sizeof(float));
    }
    sl_param_info w, h;
    if (sl_net_find_param(dst, "head.weight", &h) == SL_OK) {
        ck_assert(sl_net_find_param(src, "a.weight", &w) == SL_OK);
        memcpy(h.data, w.data, w.count * sizeof(float));
    }
}

static void assert_close(const float *a, const float *b, size_t n, double rtol, const char *what)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)a[i] - b[i]) <= rtol * scale + 1e-7, "%s[%zu]: %.9g vs %.9g", what,
                      i, a[i], b[i]);
}

static float *grad_of(sl_net *net, const char *name)
{
    sl_param_info p;
    ck_assert_msg(sl_net_find_param(net, name, &p) == SL_OK, "%s", name);
    float *g = malloc(p.count * sizeof(float));
    ck_assert(g);
    memcpy(g, p.grad, p.count * sizeof(float));
    return g;
}

/* The tied head (any chunk) equals a separate classifier with the same
 * weight: loss, logits, the hidden layers' gradients, and the tied
 * weight's gradient = its own use's + the classifier's. */
static void check_against_separate(int chunk)
{
    sl_context *ctx = th_context(3);
    sl_net *tied = make_net(ctx, 0, SL_SCHEDULE_NONE, 0);
    sl_net *sep = make_net(ctx, 1, SL_SCHEDULE_NONE, 0);
    ck_assert(sl_net_set_lm_head(tied, "a.weight", -100, chunk) == SL_OK);
    copy_params(sep, tied);
    float x[N * C];
    int labels[N];
    th_fill_normal(x, N * C, 5, 1.0f);
    for (int i = 0; i < N; i++)
        labels[i] = (i * 7 + 3) % V;
    sl_step_result rt, rs;
    ck_assert_msg(sl_net_compute_gradients(tied, x, sl_shape_nchw(N, C, 1, 1), labels, &rt) == SL_OK,
                  "%s", sl_last_error());
    ck_assert(sl_net_compute_gradients(sep, x, sl_shape_nchw(N, C, 1, 1), labels, &rs) == SL_OK);
    ck_assert_msg(fabsf(rt.loss - rs.loss) <= 1e-6f * fabsf(rs.loss), "loss %.9g vs %.9g", rt.loss,
                  rs.loss);
    ck_assert_int_eq(rt.correct, rs.correct);
    ck_assert_int_eq(rt.counted, N);
    const char *same[] = {"a.bias", "b.weight", "b.bias"};
    for (int k = 0; k < 3; k++) {
        float *gt = grad_of(tied, same[k]), *gs = grad_of(sep, same[k]);
        sl_param_info p;
        sl_net_find_param(tied, same[k], &p);
        assert_close(gt, gs, p.count, 1e-5, same[k]);
        free(gt);
        free(gs);
    }
    float *gw = grad_of(tied, "a.weight"), *ga = grad_of(sep, "a.weight"),
          *gh = grad_of(sep, "head.weight");
    for (int i = 0; i < V * C; i++)
        ga[i] += gh[i];
    assert_close(gw, ga, V * C, 1e-5, "tied a.weight");
    free(gw);
    free(ga);
    free(gh);
    float lt[N * V], ls[N * V];
    sl_shape out;
    ck_assert(sl_net_output_shape(tied, sl_shape_nchw(N, C, 1, 1), &out) == SL_OK);
    ck_assert_int_eq(out.c, V);
    ck_assert(sl_net_predict(tied, x, sl_shape_nchw(N, C, 1, 1), lt) == SL_OK);
    ck_assert(sl_net_predict(sep, x, sl_shape_nchw(N, C, 1, 1), ls) == SL_OK);
    assert_close(lt, ls, N * V, 1e-6, "logits");
    sl_net_free(tied);
    sl_net_free(sep);
    sl_context_free(ctx);
}

START_TEST(test_unfused_matches_separate) { check_against_separate(N); }
END_TEST

/* A device's layout, taken by the CPU (rows 12 floats apart, the
 * vocabulary in parts of 8 and 3): the same results, whole and chunked. */
START_TEST(test_device_layout_matches_separate)
{
    sl_lm_head_force_layout(4);
    check_against_separate(N);
    check_against_separate(4);
    sl_lm_head_force_layout(0);
}
END_TEST

START_TEST(test_chunked_matches_separate)
{
    check_against_separate(2); /* 5 chunks, the last of one row */
    check_against_separate(0); /* automatic: one chunk here */
}
END_TEST

/* Ignored positions count nothing: the loss and gradients equal those of
 * the batch without them. */
START_TEST(test_ignore_index)
{
    sl_context *ctx = th_context(4);
    sl_net *all = make_net(ctx, 0, SL_SCHEDULE_NONE, 0);
    sl_net *sub = make_net(ctx, 0, SL_SCHEDULE_NONE, 0);
    ck_assert(sl_net_set_lm_head(all, "a.weight", -1, 4) == SL_OK);
    ck_assert(sl_net_set_lm_head(sub, "a.weight", -1, 4) == SL_OK);
    copy_params(sub, all);
    float x[N * C], xs[N * C];
    int labels[N], ls[N], kept = 0;
    th_fill_normal(x, N * C, 6, 1.0f);
    for (int i = 0; i < N; i++) {
        labels[i] = i % 3 == 1 ? -1 : (i * 5 + 1) % V;
        if (labels[i] >= 0) {
            memcpy(xs + kept * C, x + i * C, C * sizeof(float));
            ls[kept++] = labels[i];
        }
    }
    sl_step_result ra, rs;
    ck_assert(sl_net_compute_gradients(all, x, sl_shape_nchw(N, C, 1, 1), labels, &ra) == SL_OK);
    ck_assert(sl_net_compute_gradients(sub, xs, sl_shape_nchw(kept, C, 1, 1), ls, &rs) == SL_OK);
    ck_assert_int_eq(ra.counted, kept);
    ck_assert(fabsf(ra.loss - rs.loss) <= 1e-6f * rs.loss);
    const char *names[] = {"a.weight", "a.bias", "b.weight", "b.bias"};
    for (int k = 0; k < 4; k++) {
        sl_param_info p;
        sl_net_find_param(all, names[k], &p);
        float *g1 = grad_of(all, names[k]), *g2 = grad_of(sub, names[k]);
        assert_close(g1, g2, p.count, 1e-5, names[k]);
        free(g1);
        free(g2);
    }
    /* Every position ignored: loss 0, no gradient from the head. */
    for (int i = 0; i < N; i++)
        labels[i] = -1;
    ck_assert(sl_net_compute_gradients(all, x, sl_shape_nchw(N, C, 1, 1), labels, &ra) == SL_OK);
    ck_assert_int_eq(ra.counted, 0);
    ck_assert(ra.loss == 0.0f);
    float *g = grad_of(all, "b.bias");
    for (int i = 0; i < C; i++)
        ck_assert(g[i] == 0.0f);
    free(g);
    sl_net_free(all);
    sl_net_free(sub);
    sl_context_free(ctx);
}
END_TEST

/* The loss step's planned scratch is one chunk of logits, not N of them. */
START_TEST(test_scratch_is_one_chunk)
{
    sl_context *ctx = th_context(5);
    sl_net *net = make_net(ctx, 0, SL_SCHEDULE_NONE, 0);
    const int rows = 4096;
    sl_shape in = sl_shape_nchw(rows, C, 1, 1);
    sl_memory_report full, chunked;
    ck_assert(sl_net_set_lm_head(net, "a.weight", -100, rows) == SL_OK);
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &full) == SL_OK);
    ck_assert(sl_net_set_lm_head(net, "a.weight", -100, 16) == SL_OK);
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &chunked) == SL_OK);
    uint64_t logits = (uint64_t)rows * V * sizeof(float), chunk = 16 * V * sizeof(float);
    ck_assert_msg(full.buffers >= logits, "unfused scratch %llu < logits %llu",
                  (unsigned long long)full.buffers, (unsigned long long)logits);
    ck_assert_msg(chunked.buffers < chunk + (uint64_t)rows * 16 + 1024,
                  "chunked scratch %llu", (unsigned long long)chunked.buffers);
    ck_assert_msg(full.arena_bytes >= logits && chunked.arena_bytes < full.arena_bytes,
                  "arena %llu chunked vs %llu unfused", (unsigned long long)chunked.arena_bytes,
                  (unsigned long long)full.arena_bytes);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* The automatic chunk rule (layers/lm_head.h): on the CPU at most 32 MiB
 * of logits a chunk; on a device at least `channels` rows where 256 MiB
 * allows; chunks as equal as can be and never more rows than the run;
 * an explicit chunk_rows wins on both. A device's logit rows are padded
 * to 128 bytes, and the scratch holds a chunk of them. */
START_TEST(test_automatic_chunk_rule)
{
    sl_lm_head h = {NULL, 50257, 768, -100, 0}; /* GPT-2 small's head */
    size_t row = (size_t)h.vocab * sizeof(float);
    ck_assert_int_eq(sl_lm_head_chunk(&h, 8192, 0), 164); /* 50 chunks of <= 166 rows */
    ck_assert_int_eq(sl_lm_head_chunk(&h, 8192, 1), 768); /* 11 chunks, whole steps of 32 */
    ck_assert_int_eq(sl_lm_head_chunk(&h, 256, 0), 128);
    ck_assert_int_eq(sl_lm_head_chunk(&h, 256, 1), 256);
    ck_assert_int_eq(sl_lm_head_chunk(&h, 7, 1), 7);
    for (int device = 0; device < 2; device++)
        for (int rows = 1; rows <= 20000; rows += 997) {
            int c = sl_lm_head_chunk(&h, rows, device);
            size_t cap = device ? SL_LM_HEAD_DEVICE_CHUNK_BYTES : SL_LM_HEAD_CHUNK_BYTES;
            ck_assert(c >= 1 && c <= rows && (size_t)c * row <= cap);
            if (device)
                ck_assert_int_ge(c, rows < h.channels ? rows : h.channels / 2); /* equalised */
            /* a chunk of rows at the layout's leading dimension fits */
            size_t ld = (size_t)sl_lm_head_ld(&h, device);
            ck_assert(sl_lm_head_ws_bytes(&h, rows, device) >= (size_t)c * ld * sizeof(float));
        }
    /* a device's rows start 128-byte aligned: 50257 -> 50272, and its
     * vocabulary goes in parts of 50240 and 17; the CPU's are vocab, one part */
    ck_assert_int_eq(sl_lm_head_ld(&h, 0), 50257);
    ck_assert_int_eq(sl_lm_head_ld(&h, 1), 50272);
    ck_assert_int_eq(sl_lm_head_split(&h, 0), 50257);
    ck_assert_int_eq(sl_lm_head_split(&h, 1), 50240);
    sl_lm_head even = {NULL, 512, 64, -100, 0};
    ck_assert_int_eq(sl_lm_head_ld(&even, 1), 512);
    ck_assert_int_eq(sl_lm_head_split(&even, 1), 512);
    for (int rows = 1; rows <= 20000; rows += 997) { /* whole steps of rows where they fit */
        int c = sl_lm_head_chunk(&h, rows, 1);
        ck_assert(c % SL_LM_HEAD_DEVICE_LD_STEP == 0 || c == rows);
    }
    /* a head so wide that even the device's cap holds fewer than C rows */
    sl_lm_head wide = {NULL, 1000000, 4096, -100, 0};
    ck_assert_int_eq(sl_lm_head_chunk(&wide, 100000, 1), 67); /* 256 MiB / 4 MB a row */
    h.chunk_rows = 100;
    ck_assert_int_eq(sl_lm_head_chunk(&h, 8192, 0), 100);
    ck_assert_int_eq(sl_lm_head_chunk(&h, 8192, 1), 100);
    ck_assert_int_eq(sl_lm_head_chunk(&h, 50, 1), 50);
}
END_TEST

/* Checkpointed schedules give the plain run's bits, the head included. */
START_TEST(test_schedules_bit_identical)
{
    sl_context *ctx = th_context(6);
    const int rows = 40;
    float *x = malloc(rows * C * sizeof(float));
    int labels[rows];
    th_fill_normal(x, rows * C, 8, 1.0f);
    for (int i = 0; i < rows; i++)
        labels[i] = i % 5 == 0 ? -100 : (i * 3) % V;
    sl_schedule schedules[] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(3)};
    th_params ref;
    float ref_loss = 0;
    for (int s = 0; s < 3; s++) {
        sl_net *net = make_net(ctx, 0, schedules[s], 6);
        ck_assert(sl_net_set_lm_head(net, "a.weight", -100, 7) == SL_OK);
        sl_step_result r;
        ck_assert(sl_net_compute_gradients(net, x, sl_shape_nchw(rows, C, 1, 1), labels, &r) == SL_OK);
        th_params got;
        th_params_capture(net, &got);
        if (s == 0) {
            ref = got;
            ref_loss = r.loss;
        } else {
            ck_assert(r.loss == ref_loss);
            th_params_assert_identical(&ref, &got, "checkpointed vs plain");
            th_params_free(&got);
        }
        sl_net_free(net);
    }
    th_params_free(&ref);
    free(x);
    sl_context_free(ctx);
}
END_TEST

/* A bf16 network's head on bf16 products (where the CPU has bf16 dot
 * products): against double sums of the same bf16 operands (h and W
 * rounded, the logits rounded to bf16, their gradient computed in float
 * and rounded), over
 * three chunks and two vocabulary blocks, in the CPU's layout and in a
 * device's (W rounded whole, see lm_head.c). The
 * loss within float rounding; dh and W's gradient within 1e-3 of their
 * largest value (the float gradient of a logit may round to the other
 * bf16 neighbour than the double one). */
static double bf16_of(float x) { return sl_bf16_widen(sl_bf16_round(x)); }

/* gemm_bf16 for a CPU without bf16 dot products (oneDNN's are the
 * backend's only bf16 GEMM): backend.h's contract computed plainly, in
 * double, so the head's chunks, blocks and layouts are checked on every
 * machine. */
static size_t plain_gemm_bf16_ws(const sl_backend *be, const sl_gemm_bf16_desc *d)
{
    (void)be, (void)d;
    return 0;
}

static void plain_gemm_bf16(const sl_exec *ex, const sl_gemm_bf16_desc *d, const void *a,
                            const void *b, const float *bias, void *c, void *ws)
{
    (void)ex, (void)ws;
    const uint16_t *pa = a, *pb = b;
    for (int i = 0; i < d->m; i++)
        for (int j = 0; j < d->n; j++) {
            double acc = d->has_bias ? bias[j] : 0.0;
            for (int p = 0; p < d->k; p++) {
                uint16_t x = d->trans_a ? pa[(size_t)p * d->lda + i] : pa[(size_t)i * d->lda + p];
                uint16_t y = d->trans_b ? pb[(size_t)j * d->ldb + p] : pb[(size_t)p * d->ldb + j];
                acc += (double)sl_bf16_widen(x) * sl_bf16_widen(y);
            }
            size_t at = (size_t)i * d->ldc + j;
            if (d->c_bf16) {
                uint16_t *pc = c;
                pc[at] = sl_bf16_round((float)(acc + (d->accumulate ? sl_bf16_widen(pc[at]) : 0.0)));
            } else {
                float *pc = c;
                pc[at] = d->accumulate ? pc[at] + (float)acc : (float)acc;
            }
        }
}

START_TEST(test_bf16_products)
{
    sl_backend *cpu = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(2, &cpu), SL_OK);
    sl_backend plain = *cpu, *be = cpu;
    if (!(cpu->bf16_kernels & SL_BF16_GEMM)) {
        printf("this CPU has no bf16 dot products: the head's bf16 GEMMs are the test's own\n");
        plain.bf16_kernels |= SL_BF16_GEMM;
        plain.gemm_bf16 = plain_gemm_bf16;
        plain.gemm_bf16_workspace_bytes = plain_gemm_bf16_ws;
        be = &plain;
    }
    enum { R = 37, CC = 24, VV = 4096 + 301 };
    float *h = malloc(R * CC * 4), *w = malloc((size_t)VV * CC * 4), *gw = calloc((size_t)VV * CC, 4);
    float *dh = malloc(R * CC * 4);
    double *ref_dw = calloc((size_t)VV * CC, 8), *ref_dh = calloc(R * CC, 8);
    double *ref_lg = malloc((size_t)R * VV * 8), *ref_dstep = calloc((size_t)R * VV, 8);
    float *out = malloc((size_t)R * VV * 4);
    ck_assert(h && w && gw && dh && ref_dw && ref_dh && ref_lg && ref_dstep && out);
    th_fill_normal(h, R * CC, 61, 1.0f);
    th_fill_normal(w, (size_t)VV * CC, 62, 0.5f);
    int labels[R];
    for (int r = 0; r < R; r++)
        labels[r] = r % 7 == 3 ? -100 : (r * 131 + 7) % VV;
    sl_param_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.count = (size_t)VV * CC;
    spec.data = w;
    spec.grad = gw;
    sl_lm_head head = {&spec, VV, CC, -100, 16};
    /* the reference: the logits' double sums rounded to float, then to
     * bf16. A GEMM summing in float may round a logit whose sum lies
     * within its float error (taken as 1e-5 of the sum of its terms'
     * sizes, far above C = 24 float roundings) of a bf16 rounding
     * boundary to the other neighbour; `slack` adds what each such logit
     * can move the loss (one bf16 step, times its softmax weight, or
     * whole at the label) */
    double ref_loss = 0, slack = 0;
    int ref_counted = 0;
    for (int r = 0; r < R; r++)
        ref_counted += labels[r] != -100;
    for (int r = 0; r < R; r++) {
        if (labels[r] == -100)
            continue;
        double mx = -INFINITY, sum = 0, *lg = ref_lg + (size_t)r * VV;
        double *step = ref_dstep + (size_t)r * VV;
        for (int v = 0; v < VV; v++) {
            double a = 0, mag = 0;
            for (int c = 0; c < CC; c++) {
                double t = bf16_of(h[r * CC + c]) * bf16_of(w[(size_t)v * CC + c]);
                a += t;
                mag += fabs(t);
            }
            lg[v] = bf16_of((float)a);
            double e = 1e-5 * mag; /* a float sum's error: of its terms' sizes */
            double lo = bf16_of((float)(a - e)), hi = bf16_of((float)(a + e));
            step[v] = fmax(hi - lg[v], lg[v] - lo);
            mx = fmax(mx, lg[v]);
        }
        for (int v = 0; v < VV; v++)
            sum += exp(lg[v] - mx);
        ref_loss += mx + log(sum) - lg[labels[r]];
        for (int v = 0; v < VV; v++)
            slack += step[v] * (exp(lg[v] - mx) / sum + (v == labels[r]));
        for (int v = 0; v < VV; v++) {
            double g = (exp(lg[v] - mx) / sum - (v == labels[r])) / ref_counted;
            double gb = bf16_of((float)g);
            for (int c = 0; c < CC; c++) {
                ref_dh[r * CC + c] += gb * bf16_of(w[(size_t)v * CC + c]);
                ref_dw[(size_t)v * CC + c] += gb * bf16_of(h[r * CC + c]);
            }
        }
    }
    ref_loss /= ref_counted;
    slack /= ref_counted;
    float *rdh = malloc(R * CC * 4), *rdw = malloc((size_t)VV * CC * 4);
    ck_assert(rdh && rdw);
    for (int i = 0; i < R * CC; i++)
        rdh[i] = (float)ref_dh[i];
    for (size_t i = 0; i < (size_t)VV * CC; i++)
        rdw[i] = (float)ref_dw[i];
    /* the CPU's layout (blocks of 4096 rows of W rounded when used); a
     * device's taken by the CPU (all of W rounded once with zero rows to
     * 4416, the logits and dh over those, W's gradient in parts of 4384
     * and 13 rows, logit rows 4416 values apart); and the same backend as
     * if its memory were a device's (logits read back row by row and
     * widened in place). Each trains, then gives its logits. */
    static const char *kind[3] = {"the CPU's layout", "a device's layout", "device memory"};
    for (int k = 0; k < 3; k++) {
        sl_backend dev = *be;
        dev.host_memory = k < 2;
        sl_lm_head_force_layout(k == 1 ? 32 : 0);
        memset(gw, 0, (size_t)VV * CC * 4);
        size_t ws_bytes = sl_lm_head_bf16_ws_bytes(&head, &dev, R);
        ck_assert(ws_bytes != SIZE_MAX);
        void *ws = malloc(ws_bytes);
        ck_assert(ws);
        /* scratch is not zero: a device's layout must zero w16's padding */
        memset(ws, 0x7f, ws_bytes);
        sl_exec ex = {&dev, 2, 0, NULL};
        float loss, none;
        int hits, counted, nh, nc;
        sl_lm_head_run(&head, &ex, R, h, labels, dh, NULL, ws, &loss, &hits, &counted, 1);
        sl_lm_head_run(&head, &ex, R, h, NULL, NULL, out, ws, &none, &nh, &nc, 1);
        free(ws);
        sl_lm_head_force_layout(0);
        ck_assert_int_eq(counted, ref_counted);
        printf("bf16 head, %s: loss %.7f, double sums of the bf16 operands %.7f "
               "(bf16 rounding slack %.2g)\n",
               kind[k], loss, ref_loss, slack);
        ck_assert_msg(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss) + slack,
                      "loss %.9g vs %.9g (slack %.3g)", loss, ref_loss, slack);
        assert_close(dh, rdh, R * CC, 1e-3, "bf16 head dh");
        assert_close(gw, rdw, (size_t)VV * CC, 1e-3, "bf16 head dW");
        for (size_t i = 0; i < (size_t)R * VV; i++)
            if (labels[i / VV] != -100) /* the reference has the counted rows' */
                ck_assert_msg(fabs(out[i] - ref_lg[i]) <= ref_dstep[i],
                              "%s: logit %zu: %.9g, the reference %.9g", kind[k], i,
                              (double)out[i], ref_lg[i]);
    }
    free(h), free(w), free(gw), free(dh), free(ref_dw), free(ref_dh), free(ref_lg), free(ref_dstep), free(out), free(rdh),
        free(rdw);
    sl_backend_destroy(cpu);
}
END_TEST

START_TEST(test_errors)
{
    sl_context *ctx = th_context(7);
    sl_net *net = make_net(ctx, 0, SL_SCHEDULE_NONE, 0);
    th_assert_error(sl_net_set_lm_head(net, "nope.weight", -100, 0), SL_ERR_NOT_FOUND, "nope.weight");
    th_assert_error(sl_net_set_lm_head(net, "b.weight", -100, 0), SL_ERR_SHAPE, "b.weight");
    th_assert_error(sl_net_set_lm_head(net, "a.bias", -100, 0), SL_ERR_SHAPE, "a.bias");
    th_assert_error(sl_net_set_lm_head(net, "a.weight", 3, 0), SL_ERR_INVALID_ARG, "ignore_index");
    th_assert_error(sl_net_set_lm_head(net, "a.weight", -100, -1), SL_ERR_INVALID_ARG, "chunk_rows");
    int32_t ids[4] = {0, 1, 2, 3};
    sl_step_result r;
    th_assert_error(sl_net_compute_gradients_tokens(net, ids, ids, 1, 4, &r), SL_ERR_STATE,
                    "language-model head");
    ck_assert(sl_net_set_lm_head(net, "a.weight", -100, 0) == SL_OK);
    float x[2 * C] = {0}, dy[2 * C] = {0};
    int labels[2] = {1, V};
    th_assert_error(sl_net_compute_gradients(net, x, sl_shape_nchw(2, C, 1, 1), labels, &r),
                    SL_ERR_INVALID_ARG, "outside [0, 11)");
    th_assert_error(sl_net_forward_backward(net, x, sl_shape_nchw(2, C, 1, 1), dy, NULL, NULL),
                    SL_ERR_STATE, "language-model head");
    /* Token runs need a token input ({B, 1, T, 1}); this network takes C channels. */
    int32_t bad[2] = {0, V};
    th_assert_error(sl_net_compute_gradients_tokens(net, bad, bad, 1, 2, &r), SL_ERR_INVALID_ARG,
                    "outside the vocabulary");
    th_assert_error(sl_net_compute_gradients_tokens(net, ids, ids, 0, 4, &r), SL_ERR_SHAPE,
                    "batch 0");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lm_head");
    TCase *t = tcase_create("lm_head");
    tcase_add_test(t, test_unfused_matches_separate);
    tcase_add_test(t, test_device_layout_matches_separate);
    tcase_add_test(t, test_chunked_matches_separate);
    tcase_add_test(t, test_ignore_index);
    tcase_add_test(t, test_scratch_is_one_chunk);
    tcase_add_test(t, test_automatic_chunk_rule);
    tcase_add_test(t, test_schedules_bit_identical);
    tcase_add_test(t, test_bf16_products);
    tcase_add_test(t, test_errors);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return th_run_suite(suite()) ? EXIT_FAILURE : EXIT_SUCCESS; }
