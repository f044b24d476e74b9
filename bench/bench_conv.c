/*
 * bench_conv.c — times the convolutions of torchvision's ResNet-50 (v1.5:
 * stride on the 3x3 conv of a bottleneck) through the CPU backend's
 * kernels: forward, backward-data and backward-filter of every distinct
 * conv shape, at batch 8 and 224x224 input by default.
 *
 * Each shape is listed once with its multiplicity (how many convs of the
 * network have that geometry); totals weight each shape by it, so they are
 * the conv time of one training step of the whole network. bench_conv_torch.py
 * times the same shapes with PyTorch; conv.sh runs both and compares.
 *
 *   bench_conv [--threads N] [--batch N] [--reps N] [--bf16] [--json]
 *
 * --bf16 times the passes on bf16 activations (sl_conv_desc.bf16: what a
 * network under --precision bf16 runs where the backend says it can,
 * conv2d_native_bf16); a shape the backend cannot run so is reported and
 * the run fails.
 *
 * Each pass is run once to warm up, then --reps times; the median is kept.
 * GFLOP/s counts 2 * multiply-adds per pass (n * k * oh * ow * c * kh * kw).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "base/backend.h"
#include "base/element.h"
#include "cpu/cpu.h"

static int g_bf16; /* --bf16 */

typedef struct conv_shape {
    char name[32]; /* the first conv of the network with this geometry */
    int c, k, hw, kern, stride, pad, ohw;
    int count;
    double ms[3]; /* median per pass: fwd, bwd-data, bwd-filter */
} conv_shape;

#define MAX_SHAPES 64

static conv_shape g_shapes[MAX_SHAPES];
static int g_nshapes;

static void add_conv(const char *name, int c, int k, int hw, int kern, int stride, int pad)
{
    int ohw = (hw + 2 * pad - kern) / stride + 1;
    for (int i = 0; i < g_nshapes; i++) {
        conv_shape *s = &g_shapes[i];
        if (s->c == c && s->k == k && s->hw == hw && s->kern == kern && s->stride == stride &&
            s->pad == pad) {
            s->count++;
            return;
        }
    }
    if (g_nshapes == MAX_SHAPES) {
        fprintf(stderr, "too many shapes\n");
        exit(1);
    }
    conv_shape *s = &g_shapes[g_nshapes++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->c = c;
    s->k = k;
    s->hw = hw;
    s->kern = kern;
    s->stride = stride;
    s->pad = pad;
    s->ohw = ohw;
    s->count = 1;
}

/* torchvision resnet50: stem 7x7/2, max pool 3x3/2, then [3, 4, 6, 3]
 * bottlenecks of widths 64..512 (expansion 4); the first block of layers
 * 2-4 has stride 2 on its 3x3 conv and a 1x1 stride-2 downsample. */
static void resnet50_shapes(int image)
{
    static const int blocks[4] = {3, 4, 6, 3};
    char name[32];
    int hw = (image + 2 * 3 - 7) / 2 + 1;
    add_conv("conv1", 3, 64, image, 7, 2, 3);
    hw = (hw + 2 * 1 - 3) / 2 + 1; /* max pool */
    int in = 64;
    for (int l = 0; l < 4; l++) {
        int width = 64 << l, out = width * 4;
        for (int b = 0; b < blocks[l]; b++) {
            int stride = (b == 0 && l > 0) ? 2 : 1;
            int ohw = (hw - 1) / stride + 1;
            snprintf(name, sizeof name, "layer%d.%d.conv1", l + 1, b);
            add_conv(name, in, width, hw, 1, 1, 0);
            snprintf(name, sizeof name, "layer%d.%d.conv2", l + 1, b);
            add_conv(name, width, width, hw, 3, stride, 1);
            snprintf(name, sizeof name, "layer%d.%d.conv3", l + 1, b);
            add_conv(name, width, out, ohw, 1, 1, 0);
            if (b == 0) {
                snprintf(name, sizeof name, "layer%d.%d.downsample.0", l + 1, b);
                add_conv(name, in, out, hw, 1, stride, 0);
            }
            in = out;
            hw = ohw;
        }
    }
}

static sl_conv_desc desc_of(const conv_shape *s, int batch)
{
    sl_conv_desc d;
    memset(&d, 0, sizeof d);
    d.n = batch;
    d.c = s->c;
    d.h = d.w = s->hw;
    d.k = s->k;
    d.oh = d.ow = s->ohw;
    d.kh = d.kw = s->kern;
    d.sh = d.sw = s->stride;
    d.ph = d.pw = s->pad;
    d.dh = d.dw = 1;
    d.groups = 1;
    d.bf16 = g_bf16;
    return d;
}

static double macs_of(const conv_shape *s, int batch)
{
    return (double)batch * s->k * s->ohw * s->ohw * (double)s->c * s->kern * s->kern;
}

static float *alloc_floats(size_t count)
{
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    if (bytes == 0)
        bytes = 64;
    float *p = aligned_alloc(64, bytes);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static void fill_random(float *p, size_t count, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < count; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(s >> 40) / (double)(1 << 24) * 2.0 - 1.0);
    }
}

typedef struct bufs {
    float *x, *w, *y, *dy, *dx, *dw;
    void *ws;
} bufs;

static void run_pass(const sl_exec *ex, const sl_conv_desc *d, int pass, bufs *b)
{
    const sl_backend *be = ex->be;
    if (pass == SL_CONV_FWD)
        be->conv2d_forward(ex, d, b->x, b->w, NULL, b->y, b->ws);
    else if (pass == SL_CONV_BWD_DATA)
        be->conv2d_backward_data(ex, d, b->w, b->dy, b->dx, 0, b->ws);
    else
        be->conv2d_backward_filter(ex, d, b->x, b->dy, b->dw, NULL, b->ws);
}

typedef struct options {
    int threads, batch, reps, image, json;
} options;

/* The defaults (2 threads, batch 8, 5 repetitions, 224x224), then the
 * command line; a bad one prints the usage and exits. */
static void parse_options(int argc, char **argv, options *o)
{
    *o = (options){2, 8, 5, 224, 0};
    const bench_opt opts[] = {
        BENCH_OPT("--threads", BENCH_ATOI, &o->threads),
        BENCH_OPT("--batch", BENCH_ATOI, &o->batch),
        BENCH_OPT("--reps", BENCH_ATOI, &o->reps),
        BENCH_OPT("--image", BENCH_ATOI, &o->image),
        BENCH_OPT_FLAG("--json", &o->json, 1),
        BENCH_OPT_FLAG("--bf16", &g_bf16, 1),
        BENCH_OPT_END,
    };
    if (bench_parse_args(argc, argv, opts) != 0 || o->threads < 1 || o->batch < 1 ||
        o->reps < 1 || o->image < 32)
        bench_usage(argv[0], "[--threads N] [--batch N] [--reps N] [--image N] [--bf16] [--json]\n");
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* One set of buffers sized for the largest shape, filled with seeded
 * random values (small weights). */
static void alloc_bufs(const sl_exec *ex, int batch, bufs *b)
{
    size_t max_x = 0, max_y = 0, max_w = 0, max_ws = 0;
    for (int i = 0; i < g_nshapes; i++) {
        const conv_shape *s = &g_shapes[i];
        sl_conv_desc d = desc_of(s, batch);
        max_x = max_size(max_x, (size_t)batch * s->c * s->hw * s->hw);
        max_y = max_size(max_y, (size_t)batch * s->k * s->ohw * s->ohw);
        max_w = max_size(max_w, (size_t)s->k * s->c * s->kern * s->kern);
        for (int p = 0; p < 3; p++)
            max_ws = max_size(max_ws, ex->be->conv2d_workspace_bytes(ex->be, &d, (sl_conv_pass)p));
    }
    b->x = alloc_floats(max_x);
    b->dx = alloc_floats(max_x);
    b->y = alloc_floats(max_y);
    b->dy = alloc_floats(max_y);
    b->w = alloc_floats(max_w);
    b->dw = alloc_floats(max_w);
    b->ws = alloc_floats(max_ws / sizeof(float) + 1);
    fill_random(b->x, max_x, 1);
    fill_random(b->dy, max_y, 2);
    fill_random(b->w, max_w, 3);
    for (size_t i = 0; i < max_w; i++)
        b->w[i] *= 0.05f;
    memset(b->dw, 0, max_w * sizeof(float));
    memset(b->dx, 0, max_x * sizeof(float));
    memset(b->y, 0, max_y * sizeof(float));
    if (g_bf16) { /* the activations rounded in place (bf16 i never overwrites float j > i) */
        uint16_t *x = (uint16_t *)b->x, *dy = (uint16_t *)b->dy;
        for (size_t i = 0; i < max_x; i++)
            x[i] = sl_bf16_round(b->x[i]);
        for (size_t i = 0; i < max_y; i++)
            dy[i] = sl_bf16_round(b->dy[i]);
    }
}

static void free_bufs(bufs *b)
{
    free(b->x);
    free(b->dx);
    free(b->y);
    free(b->dy);
    free(b->w);
    free(b->dw);
    free(b->ws);
}

/* Times every pass of every shape: a warm-up run, then the median of
 * `reps` into the shape's ms[]. Returns 0, or 1 out of memory. */
static int time_shapes(const sl_exec *ex, int batch, int reps, bufs *b)
{
    double *t = malloc((size_t)reps * sizeof(double));
    if (!t)
        return 1;
    for (int i = 0; i < g_nshapes; i++) {
        conv_shape *s = &g_shapes[i];
        sl_conv_desc d = desc_of(s, batch);
        for (int p = 0; p < 3; p++) {
            run_pass(ex, &d, p, b); /* warm-up */
            for (int r = 0; r < reps; r++) {
                double t0 = bench_now_s();
                run_pass(ex, &d, p, b);
                t[r] = (bench_now_s() - t0) * 1e3;
            }
            s->ms[p] = bench_median(t, reps);
        }
    }
    free(t);
    return 0;
}

/* The network's totals: each shape weighted by its multiplicity. */
typedef struct totals {
    double ms[3], all_ms, macs;
    int convs;
} totals;

static totals sum_shapes(int batch)
{
    totals t = {{0, 0, 0}, 0, 0, 0};
    for (int i = 0; i < g_nshapes; i++) {
        const conv_shape *s = &g_shapes[i];
        for (int p = 0; p < 3; p++)
            t.ms[p] += s->count * s->ms[p];
        t.macs += s->count * macs_of(s, batch);
        t.convs += s->count;
    }
    t.all_ms = t.ms[0] + t.ms[1] + t.ms[2];
    return t;
}

static void print_json(const options *o, const totals *t, double foreign)
{
    printf("{\"impl\": \"sublinear\", \"threads\": %d, \"batch\": %d, \"image\": %d, "
           "\"reps\": %d, \"precision\": \"%s\", \"shapes\": [\n",
           o->threads, o->batch, o->image, o->reps, g_bf16 ? "bf16" : "f32");
    for (int i = 0; i < g_nshapes; i++) {
        const conv_shape *s = &g_shapes[i];
        printf("  {\"name\": \"%s\", \"c\": %d, \"k\": %d, \"hw\": %d, \"kernel\": %d, "
               "\"stride\": %d, \"pad\": %d, \"ohw\": %d, \"count\": %d, \"macs\": %.0f, "
               "\"fwd_ms\": %.4f, \"bwd_data_ms\": %.4f, \"bwd_filter_ms\": %.4f}%s\n",
               s->name, s->c, s->k, s->hw, s->kern, s->stride, s->pad, s->ohw, s->count,
               macs_of(s, o->batch), s->ms[0], s->ms[1], s->ms[2], i + 1 < g_nshapes ? "," : "");
    }
    printf("], \"total\": {\"convs\": %d, \"macs\": %.0f, \"fwd_ms\": %.4f, "
           "\"bwd_data_ms\": %.4f, \"bwd_filter_ms\": %.4f, \"ms\": %.4f}, "
           "\"foreign_cpu_pct\": %.1f}\n",
           t->convs, t->macs, t->ms[0], t->ms[1], t->ms[2], t->all_ms, foreign);
}

static void print_text(const options *o, const totals *t, double foreign)
{
    printf("sublinear CPU conv, ResNet-50 shapes: batch %d, %dx%d, %s, %d threads, median of %d\n",
           o->batch, o->image, o->image, g_bf16 ? "bf16" : "f32", o->threads, o->reps);
    printf("%-26s %-24s %3s %9s %9s %9s %7s %7s %7s\n", "first conv", "c->k kxk/s hw->ohw", "n",
           "fwd ms", "bwdD ms", "bwdW ms", "fwd GF", "bwdD GF", "bwdW GF");
    for (int i = 0; i < g_nshapes; i++) {
        const conv_shape *s = &g_shapes[i];
        char geo[64];
        snprintf(geo, sizeof geo, "%d->%d %dx%d/%d %d->%d", s->c, s->k, s->kern, s->kern,
                 s->stride, s->hw, s->ohw);
        double gf = 2.0 * macs_of(s, o->batch) * 1e-6;
        printf("%-26s %-24s %3d %9.2f %9.2f %9.2f %7.1f %7.1f %7.1f\n", s->name, geo, s->count,
               s->ms[0], s->ms[1], s->ms[2], gf / s->ms[0], gf / s->ms[1], gf / s->ms[2]);
    }
    double gf = 2.0 * t->macs * 1e-6;
    printf("total (%d convs, weighted) %24s %9.1f %9.1f %9.1f %7.1f %7.1f %7.1f\n", t->convs, "",
           t->ms[0], t->ms[1], t->ms[2], gf / t->ms[0], gf / t->ms[1], gf / t->ms[2]);
    printf("fwd + bwd: %.1f ms, %.1f GFLOP/s (%.1f GFLOP)\n", t->all_ms, 3.0 * gf / t->all_ms,
           3.0 * gf * 1e-3);
    if (foreign >= 0.0)
        printf("other processes used %.1f%% of the cores meanwhile\n", foreign);
}

int main(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    sl_cpu_set_blas_threads(1); /* the kernels split their GEMMs themselves */
    resnet50_shapes(o.image);
    sl_backend *cpu;
    if (sl_cpu_backend_create(o.threads, &cpu) != SL_OK)
        return 1;
    sl_exec ex = {cpu, o.threads, 0, NULL};
    for (int i = 0; g_bf16 && i < g_nshapes; i++) {
        sl_conv_desc d = desc_of(&g_shapes[i], o.batch);
        if (!cpu->conv2d_native_bf16(cpu, &d)) {
            fprintf(stderr, "bench_conv: %s (%d->%d %dx%d/%d at %d) has no bf16 kernel on this "
                            "CPU (oneDNN with avx512_core_bf16 or AMX)\n",
                    g_shapes[i].name, g_shapes[i].c, g_shapes[i].k, g_shapes[i].kern,
                    g_shapes[i].kern, g_shapes[i].stride, g_shapes[i].hw);
            return 1;
        }
    }
    bufs b;
    alloc_bufs(&ex, o.batch, &b);
    /* Other processes' share of the cores while we timed: noise indicator. */
    bench_load load;
    bench_load_start(&load);
    if (time_shapes(&ex, o.batch, o.reps, &b) != 0)
        return 1;
    sl_backend_destroy(cpu);
    double foreign = bench_load_foreign_pct(&load);
    free_bufs(&b);
    totals t = sum_shapes(o.batch);
    if (o.json)
        print_json(&o, &t, foreign);
    else
        print_text(&o, &t, foreign);
    return 0;
}
