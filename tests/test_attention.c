/*
 * test_attention.c — sl_causal_attention: the flash (FlashAttention-2)
 * mode against the plain one (outputs and input gradients, with and
 * without dropout, where both draw the same mask), both against finite
 * differences and against PyTorch in float64 (tests/attention_reference.py,
 * written with the explicit softmax; skipped visibly without torch),
 * re-forward exactness under checkpointing schedules, thread-count
 * invariance, evaluation without dropout, sequence lengths that are not a
 * multiple of the tile (and T = 1), and the shape errors.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/element.h"
#include "cpu/cpu.h"
#include "harness.h"
#include "sublinear.h"

#ifndef SL_TEST_SOURCE_DIR
#define SL_TEST_SOURCE_DIR "."
#endif

/* One attention layer as a network, in a context of `threads` threads. */
typedef struct one_net {
    sl_context *ctx;
    sl_net *net;
} one_net;

static one_net attention_net(int c, int heads, float p, int flash, int threads, uint64_t seed)
{
    sl_context_options o = sl_context_defaults();
    o.threads = threads;
    o.seed = seed;
    one_net r = {NULL, NULL};
    ck_assert_msg(sl_context_create(&o, &r.ctx) == SL_OK, "%s", sl_last_error());
    ck_assert_msg(sl_sequential(r.ctx, 3 * c, &r.net) == SL_OK, "%s", sl_last_error());
    sl_layer *l = sl_causal_attention(c, heads, p, flash);
    ck_assert_msg(l != NULL, "%s", sl_last_error());
    ck_assert_msg(sl_net_add(r.net, "attn", l) == SL_OK, "%s", sl_last_error());
    return r;
}

static void one_net_free(one_net *r)
{
    sl_net_free(r->net);
    sl_context_free(r->ctx);
}

/* A run's output and input gradient for L = sum(y * dy). */
typedef struct run {
    float *y, *dx;
    size_t ny, nx;
} run;

static run run_net(sl_net *net, const float *x, sl_shape in, const float *dy, int c)
{
    run r;
    r.nx = (size_t)in.n * in.c * in.h;
    r.ny = (size_t)in.n * c * in.h;
    r.y = malloc(r.ny * sizeof(float));
    r.dx = malloc(r.nx * sizeof(float));
    ck_assert(r.y && r.dx);
    ck_assert_msg(sl_net_forward_backward(net, x, in, dy, r.y, r.dx) == SL_OK, "%s",
                  sl_last_error());
    return r;
}

static void run_free(run *r)
{
    free(r->y);
    free(r->dx);
}

/* max |a - b| / max |b|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        worst = e > worst ? e : worst;
        scale = fabs((double)b[i]) > scale ? fabs((double)b[i]) : scale;
    }
    return scale > 0.0 ? worst / scale : worst;
}

typedef struct inputs {
    float *x, *dy;
    sl_shape in;
} inputs;

static inputs make_inputs(int b, int t, int c, uint64_t seed)
{
    inputs r;
    r.in = sl_shape_seq(b, t, 3 * c);
    size_t nx = (size_t)b * t * 3 * c, ny = (size_t)b * t * c;
    r.x = malloc(nx * sizeof(float));
    r.dy = malloc(ny * sizeof(float));
    ck_assert(r.x && r.dy);
    th_fill_normal(r.x, nx, seed, 1.0f);
    th_fill_normal(r.dy, ny, seed + 1, 1.0f);
    return r;
}

static void inputs_free(inputs *r)
{
    free(r->x);
    free(r->dy);
}

/* Flash and plain on one input: outputs and input gradients within 1e-5
 * of each other (relative to the largest value). */
static void check_flash_vs_plain(int b, int t, int c, int heads, float p)
{
    inputs in = make_inputs(b, t, c, 11 + (uint64_t)t);
    one_net f = attention_net(c, heads, p, 1, 2, 5), q = attention_net(c, heads, p, 0, 2, 5);
    run rf = run_net(f.net, in.x, in.in, in.dy, c), rq = run_net(q.net, in.x, in.in, in.dy, c);
    double ey = rel_diff(rf.y, rq.y, rf.ny), ex = rel_diff(rf.dx, rq.dx, rf.nx);
    ck_assert_msg(ey <= 1e-5 && ex <= 1e-5,
                  "B=%d T=%d C=%d heads=%d p=%g: flash vs plain output %.3g, dx %.3g", b, t, c,
                  heads, p, ey, ex);
    run_free(&rf);
    run_free(&rq);
    one_net_free(&f);
    one_net_free(&q);
    inputs_free(&in);
}

START_TEST(test_flash_matches_plain)
{
    /* T past one tile (128 rows) and not a multiple of it, T = 1, several heads */
    check_flash_vs_plain(2, 70, 16, 2, 0.0f);
    check_flash_vs_plain(1, 1, 8, 2, 0.0f);
    check_flash_vs_plain(2, 150, 24, 3, 0.0f);
    check_flash_vs_plain(1, 300, 8, 1, 0.0f);
    check_flash_vs_plain(1, 256, 8, 2, 0.0f);
}
END_TEST

START_TEST(test_flash_matches_plain_with_dropout)
{
    check_flash_vs_plain(2, 70, 16, 2, 0.1f);
    check_flash_vs_plain(1, 300, 24, 3, 0.1f);
    check_flash_vs_plain(1, 1, 8, 2, 0.1f);
}
END_TEST

/* Dropout does change the result (the mask is not all ones), and
 * evaluation uses none: predict with p = 0.1 is the training forward with
 * p = 0, bit for bit. */
START_TEST(test_dropout_and_evaluation)
{
    int b = 2, t = 40, c = 16, heads = 2;
    inputs in = make_inputs(b, t, c, 3);
    for (int flash = 0; flash <= 1; flash++) {
        one_net d = attention_net(c, heads, 0.1f, flash, 2, 5);
        one_net z = attention_net(c, heads, 0.0f, flash, 2, 5);
        run rd = run_net(d.net, in.x, in.in, in.dy, c), rz = run_net(z.net, in.x, in.in, in.dy, c);
        ck_assert_msg(rel_diff(rd.y, rz.y, rd.ny) > 1e-2, "flash %d: dropout changed nothing",
                      flash);
        float *pred = malloc(rd.ny * sizeof(float));
        ck_assert(pred);
        ck_assert_msg(sl_net_predict(d.net, in.x, in.in, pred) == SL_OK, "%s", sl_last_error());
        ck_assert_msg(memcmp(pred, rz.y, rd.ny * sizeof(float)) == 0,
                      "flash %d: evaluation is not the forward without dropout", flash);
        free(pred);
        run_free(&rd);
        run_free(&rz);
        one_net_free(&d);
        one_net_free(&z);
    }
    inputs_free(&in);
}
END_TEST

START_TEST(test_gradcheck_both_modes)
{
    for (int flash = 0; flash <= 1; flash++) {
        int b = 2, t = 140, c = 8, heads = 2;
        one_net r = attention_net(c, heads, 0.0f, flash, 2, 7);
        size_t nx = (size_t)b * t * 3 * c;
        float *x = malloc(nx * sizeof(float));
        ck_assert(x);
        th_fill_normal(x, nx, 9, 1.0f);
        th_gradcheck_result g;
        th_gradcheck(r.net, x, sl_shape_seq(b, t, 3 * c), 1, 40, 4e-3f, 1e-2, 1e-3, &g);
        ck_assert_msg(g.checked > 20 && g.worst_error <= 1.0,
                      "flash %d: %d of %d checked, worst %.3g at %s", flash, g.checked,
                      g.candidates, g.worst_error, g.worst);
        free(x);
        one_net_free(&r);
    }
}
END_TEST

/* 1 and 2 threads give the same bits, in both modes, with dropout. */
START_TEST(test_thread_count_invariance)
{
    int b = 2, t = 300, c = 16, heads = 2;
    inputs in = make_inputs(b, t, c, 21);
    for (int flash = 0; flash <= 1; flash++) {
        one_net a = attention_net(c, heads, 0.1f, flash, 1, 5);
        one_net z = attention_net(c, heads, 0.1f, flash, 2, 5);
        run ra = run_net(a.net, in.x, in.in, in.dy, c), rz = run_net(z.net, in.x, in.in, in.dy, c);
        ck_assert_msg(memcmp(ra.y, rz.y, ra.ny * sizeof(float)) == 0,
                      "flash %d: outputs differ between 1 and 2 threads", flash);
        ck_assert_msg(memcmp(ra.dx, rz.dx, ra.nx * sizeof(float)) == 0,
                      "flash %d: input gradients differ between 1 and 2 threads", flash);
        run_free(&ra);
        run_free(&rz);
        one_net_free(&a);
        one_net_free(&z);
    }
    inputs_free(&in);
}
END_TEST

/* Attention layers with dropout between Conv1D projections (any layers that
 * map C to 3C channels): under checkpointing schedules the re-forwarded
 * attention layers redraw their masks and repeat their bits, so the
 * gradients equal those of the plain run bit for bit. */
#define STACK_T 150 /* two tiles, the second partial */

static void train_stack(int flash, sl_schedule schedule, float *y, float *dx, th_params *params,
                        int *most_forwards)
{
    int b = 2, t = STACK_T, c = 8, heads = 2, layers = 4;
    sl_context *ctx = th_context(13);
    sl_net *net = NULL;
    ck_assert_msg(sl_sublinear(ctx, 3 * c, schedule, &net) == SL_OK, "%s", sl_last_error());
    char name[32];
    for (int i = 0; i < layers; i++) {
        snprintf(name, sizeof name, "attn%d", i);
        ck_assert_msg(sl_net_add(net, name, sl_causal_attention(c, heads, 0.1f, flash)) == SL_OK,
                      "%s", sl_last_error());
        snprintf(name, sizeof name, "proj%d", i);
        ck_assert_msg(sl_net_add(net, name, sl_conv1d(c, 3 * c)) == SL_OK, "%s",
                      sl_last_error());
    }
    ck_assert_msg(sl_net_add(net, "last", sl_causal_attention(c, heads, 0.1f, flash)) == SL_OK,
                  "%s", sl_last_error());
    inputs in = make_inputs(b, t, c, 17);
    ck_assert_msg(sl_net_forward_backward(net, in.x, in.in, in.dy, y, dx) == SL_OK, "%s",
                  sl_last_error());
    th_params_capture(net, params);
    *most_forwards = th_most_forwards(net);
    inputs_free(&in);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_reforward_is_exact)
{
    size_t ny = 2 * STACK_T * 8, nx = 2 * STACK_T * 24;
    for (int flash = 0; flash <= 1; flash++) {
        float *y0 = malloc(ny * sizeof(float)), *dx0 = malloc(nx * sizeof(float));
        float *y1 = malloc(ny * sizeof(float)), *dx1 = malloc(nx * sizeof(float));
        ck_assert(y0 && dx0 && y1 && dx1);
        th_params p0, p1;
        int f0, f1;
        train_stack(flash, SL_SCHEDULE_NONE, y0, dx0, &p0, &f0);
        sl_schedule schedules[2] = {SL_SCHEDULE_SEGMENTS(2), SL_SCHEDULE_SQRT};
        for (int s = 0; s < 2; s++) {
            train_stack(flash, schedules[s], y1, dx1, &p1, &f1);
            ck_assert_msg(f1 >= 2, "flash %d schedule %d re-forwards nothing", flash, s);
            ck_assert_msg(memcmp(y0, y1, ny * sizeof(float)) == 0, "flash %d: outputs differ",
                          flash);
            ck_assert_msg(memcmp(dx0, dx1, nx * sizeof(float)) == 0,
                          "flash %d schedule %d: input gradients differ", flash, s);
            th_params_assert_identical(&p0, &p1, "checkpointed vs plain");
            th_params_free(&p1);
        }
        th_params_free(&p0);
        free(y0);
        free(dx0);
        free(y1);
        free(dx1);
    }
}
END_TEST

/* ---- PyTorch float64 reference ---- */

static int torch_available(void)
{
    return access("/usr/bin/python3", X_OK) == 0 &&
           system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
}

static void write_floats(const char *dir, const char *name, const float *v, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fwrite(v, sizeof(float), n, f) == n);
    fclose(f);
}

static double *read_doubles(const char *dir, const char *name, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    double *v = malloc(n * sizeof(double));
    ck_assert(v);
    ck_assert_msg(fread(v, sizeof(double), n, f) == n, "%s is short", path);
    fclose(f);
    return v;
}

/* max |a - ref| / max |ref| */
static double rel_diff64(const float *a, const double *ref, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        worst = e > worst ? e : worst;
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    }
    return worst / scale;
}

static void check_torch(int b, int t, int c, int heads, float p)
{
    inputs in = make_inputs(b, t, c, 31 + (uint64_t)t);
    /* The dropout factors the first TRAIN forward of a context of seed 5
     * draws: counter 0, element ((b*heads + h)*t + i)*t + j. */
    size_t nf = (size_t)b * heads * t * t;
    float *factors = malloc(nf * sizeof(float));
    ck_assert(factors);
    sl_dropout_mask m = sl_dropout_mask_of(p, 5);
    sl_dropout_factors(&m, 0, 0, (int)nf, factors);
    char dir[] = "/tmp/sl_attention_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    write_floats(dir, "qkv.bin", in.x, (size_t)b * t * 3 * c);
    write_floats(dir, "dy.bin", in.dy, (size_t)b * t * c);
    write_floats(dir, "factors.bin", factors, nf);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/attention_reference.py' '%s' %d %d %d %d",
             SL_TEST_SOURCE_DIR, dir, b, t, c, heads);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    double *ry = read_doubles(dir, "out.bin", (size_t)b * t * c);
    double *rdx = read_doubles(dir, "dx.bin", (size_t)b * t * 3 * c);
    for (int flash = 0; flash <= 1; flash++) {
        one_net r = attention_net(c, heads, p, flash, 2, 5);
        run o = run_net(r.net, in.x, in.in, in.dy, c);
        /* float32 rounding: inputs of order 1, sums over at most t + d terms */
        double ey = rel_diff64(o.y, ry, o.ny), ex = rel_diff64(o.dx, rdx, o.nx);
        ck_assert_msg(ey <= 1e-5 && ex <= 1e-5,
                      "flash %d B=%d T=%d heads=%d p=%g: vs torch float64 output %.3g, dx %.3g",
                      flash, b, t, heads, p, ey, ex);
        run_free(&o);
        one_net_free(&r);
    }
    free(ry);
    free(rdx);
    free(factors);
    const char *files[] = {"qkv.bin", "dy.bin", "factors.bin", "out.bin", "dx.bin"};
    char path[512];
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    inputs_free(&in);
}

START_TEST(test_torch_reference)
{
    if (!torch_available()) {
        printf("SKIPPED: test_torch_reference: /usr/bin/python3 cannot import torch\n");
        return;
    }
    check_torch(2, 70, 16, 2, 0.0f);
    check_torch(1, 1, 8, 2, 0.0f);
    check_torch(2, 97, 24, 3, 0.1f);
    check_torch(1, 300, 16, 2, 0.1f);
}
END_TEST

/* The kernels' accumulate flag: dqkv += the gradient, on top of what dqkv
 * held (flash adds with sl_put: exactly the sum; plain through sgemm's
 * beta = 1, whose fused multiply-add may round once less). */
START_TEST(test_backward_accumulates)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(2, &be), SL_OK);
    sl_exec ex = {be, 2, 0, NULL};
    int b = 2, t = 150, c = 16, heads = 2;
    inputs in = make_inputs(b, t, c, 41);
    size_t nx = (size_t)b * t * 3 * c, ny = (size_t)b * t * c;
    for (int flash = 0; flash <= 1; flash++) {
        sl_attention_desc d = {b, t, heads, c / heads, flash, 0.1f, 5, 0, 0, 0, NULL};
        size_t saved_n = (size_t)b * heads * t * (flash ? 1 : (size_t)t);
        size_t ws = be->attention_workspace_bytes(be, &d, 0);
        size_t ws_b = be->attention_workspace_bytes(be, &d, 1);
        ws = ws > ws_b ? ws : ws_b;
        float *y = malloc(ny * sizeof(float)), *saved = malloc(saved_n * sizeof(float));
        float *dx0 = malloc(nx * sizeof(float)), *dx1 = malloc(nx * sizeof(float));
        void *w = malloc(ws);
        ck_assert(y && saved && dx0 && dx1 && w);
        be->attention_forward(&ex, &d, in.x, y, saved, w);
        th_fill_normal(dx0, nx, 43, 1.0f); /* garbage that accumulate 0 overwrites */
        be->attention_backward(&ex, &d, in.x, y, in.dy, saved, dx0, 0, w);
        th_fill_normal(dx1, nx, 47, 1.0f);
        float *before = malloc(nx * sizeof(float));
        ck_assert(before);
        memcpy(before, dx1, nx * sizeof(float));
        be->attention_backward(&ex, &d, in.x, y, in.dy, saved, dx1, 1, w);
        double worst = 0.0;
        for (size_t i = 0; i < nx; i++) {
            float want = before[i] + dx0[i];
            double e = fabs((double)dx1[i] - (double)want) / (fabs((double)want) + 1.0);
            worst = e > worst ? e : worst;
            if (flash)
                ck_assert_msg(dx1[i] == want, "flash: dx[%zu] %g != %g + %g", i, dx1[i],
                              before[i], dx0[i]);
        }
        ck_assert_msg(worst <= 1e-6, "flash %d: accumulated gradient off by %.3g", flash, worst);
        free(before);
        free(y);
        free(saved);
        free(dx0);
        free(dx1);
        free(w);
    }
    inputs_free(&in);
    sl_backend_destroy(be);
}
END_TEST

/* bf16 qkv, y, dy and dqkv (flash mode, SL_BF16_ATTENTION): the kernels
 * widen what they read and round what they write, so they give the bits
 * of the float kernels run on widened copies with the results rounded:
 * y, the saved log-sum-exp, and dqkv written and accumulated into. Two
 * query tiles (t = 150), dropout on. */
START_TEST(test_bf16_gives_the_copies_bits)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(2, &be), SL_OK);
    ck_assert(be->attention_native_bf16 && (be->bf16_kernels & SL_BF16_ATTENTION));
    int b = 2, t = 150, c = 16, heads = 2;
    inputs in = make_inputs(b, t, c, 51);
    size_t nx = (size_t)b * t * 3 * c, ny = (size_t)b * t * c, ns = (size_t)b * heads * t;
    sl_attention_desc d = {b, t, heads, c / heads, 1, 0.1f, 5, 0, 0, 0, NULL};
    ck_assert(be->attention_native_bf16(be, &d));
    sl_attention_desc d16 = d;
    d16.bf16 = 1;
    size_t ws = 0;
    for (int k = 0; k < 2; k++) {
        size_t w = be->attention_workspace_bytes(be, k ? &d16 : &d, 0),
               wb = be->attention_workspace_bytes(be, k ? &d16 : &d, 1);
        ws = w > ws ? w : ws;
        ws = wb > ws ? wb : ws;
    }
    ck_assert_uint_gt(be->attention_workspace_bytes(be, &d16, 1),
                      be->attention_workspace_bytes(be, &d, 1));
    uint16_t *x16 = malloc(nx * 2), *dy16 = malloc(ny * 2), *y16 = malloc(ny * 2),
             *dx16 = malloc(nx * 2), *acc16 = malloc(nx * 2), *want16 = malloc(nx * 2);
    float *xf = malloc(nx * 4), *dyf = malloc(ny * 4), *yf = malloc(ny * 4), *dxf = malloc(nx * 4);
    float *lse = malloc(ns * 4), *lse16 = malloc(ns * 4);
    void *w = malloc(ws);
    ck_assert(x16 && dy16 && y16 && dx16 && acc16 && want16 && xf && dyf && yf && dxf && lse &&
              lse16 && w);
    th_bf16_round_all(x16, in.x, nx);
    th_bf16_round_all(dy16, in.dy, ny);
    th_bf16_widen_all(xf, x16, nx);
    th_bf16_widen_all(dyf, dy16, ny);
    sl_exec ex = {be, 2, 0, NULL}, ex16 = {be, 2, 1, NULL};
    /* the copies: float kernels on widened values, then rounded */
    be->attention_forward(&ex, &d, xf, yf, lse, w);
    uint16_t *yr = malloc(ny * 2);
    ck_assert(yr);
    th_bf16_round_all(yr, yf, ny);
    th_bf16_widen_all(yf, yr, ny); /* the backward's copy of the stored y */
    /* the bf16 kernels */
    be->attention_forward(&ex16, &d16, (const float *)(void *)x16, (float *)(void *)y16, lse16, w);
    ck_assert_msg(memcmp(y16, yr, ny * 2) == 0, "bf16 y differs from the rounded float y");
    ck_assert_msg(memcmp(lse16, lse, ns * 4) == 0, "bf16 saved state differs");
    for (int acc = 0; acc <= 1; acc++) {
        th_fill_normal(dxf, nx, 53, 1.0f);
        th_bf16_round_all(acc16, dxf, nx);
        th_bf16_widen_all(dxf, acc16, nx);
        be->attention_backward(&ex, &d, xf, yf, dyf, lse, dxf, acc, w);
        th_bf16_round_all(want16, dxf, nx);
        memcpy(dx16, acc16, nx * 2);
        be->attention_backward(&ex16, &d16, (const float *)(void *)x16, (const float *)(void *)y16,
                               (const float *)(void *)dy16, lse16, (float *)(void *)dx16, acc, w);
        ck_assert_msg(memcmp(dx16, want16, nx * 2) == 0, "bf16 dqkv (accumulate %d) differs", acc);
    }
    free(x16), free(dy16), free(y16), free(dx16), free(acc16), free(want16), free(yr);
    free(xf), free(dyf), free(yf), free(dxf), free(lse), free(lse16), free(w);
    inputs_free(&in);
    sl_backend_destroy(be);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_shape_errors)
{
    ck_assert_ptr_null(sl_causal_attention(10, 3, 0.0f, 1));
    th_assert_error(SL_ERR_SHAPE, SL_ERR_SHAPE, "multiple of heads");
    ck_assert_ptr_null(sl_causal_attention(8, 2, 1.0f, 1));
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 20, &net) == SL_OK);
    sl_status st = sl_net_add(net, "attn", sl_causal_attention(8, 2, 0.0f, 1));
    if (st == SL_OK) {
        sl_shape out;
        st = sl_net_output_shape(net, sl_shape_seq(1, 5, 20), &out);
    }
    th_assert_error(st, SL_ERR_SHAPE, "3 x 8 = 24 input channels");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_flash_matches_plain);
    tcase_add_test(tc, test_flash_matches_plain_with_dropout);
    tcase_add_test(tc, test_dropout_and_evaluation);
    tcase_add_test(tc, test_gradcheck_both_modes);
    tcase_add_test(tc, test_thread_count_invariance);
    tcase_add_test(tc, test_reforward_is_exact);
    tcase_add_test(tc, test_torch_reference);
    tcase_add_test(tc, test_backward_accumulates);
    tcase_add_test(tc, test_bf16_gives_the_copies_bits);
    tcase_add_test(tc, test_shape_errors);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
