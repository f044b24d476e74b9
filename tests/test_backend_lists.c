/*
 * test_backend_lists.c — the backend members that keep a step's queue
 * going (base/backend.h): list updates and list sums of squares equal,
 * bit for bit, the same work one tensor at a time; uploads leave the
 * caller's buffer free at return; read-backs deferred to the next sync
 * arrive there, also past the room they are staged in. Run on the CPU
 * instance and, where a GPU is usable, on a CUDA instance (skipped
 * visibly otherwise).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "cpu/cpu.h"
#include "cuda/cuda_backend.h"
#include "harness.h"

/* Span lengths: empty, odd, one longer than a launch's blocks cover (a
 * span continued in the next launch), and more spans than one launch
 * holds. */
#define N_SPANS 45
static size_t span_len(int i)
{
    if (i == 0)
        return 0;
    if (i == 7)
        return 3000001;
    return (size_t)(i * 977 % 5000) + 1;
}

typedef struct device_set {
    const sl_backend *be;
    sl_exec ex;
    float *w, *g, *m, *v; /* all spans back to back */
    size_t total;
    size_t off[N_SPANS];
} device_set;

static void set_alloc(device_set *d, const sl_backend *be)
{
    d->be = be;
    d->ex = (sl_exec){be, 1, 0, NULL};
    d->total = 0;
    for (int i = 0; i < N_SPANS; i++) {
        d->off[i] = d->total;
        d->total += span_len(i);
    }
    size_t bytes = d->total * sizeof(float);
    d->w = be->alloc(be, bytes, "w");
    d->g = be->alloc(be, bytes, "g");
    d->m = be->alloc(be, bytes, "m");
    d->v = be->alloc(be, bytes, "v");
    ck_assert(d->w && d->g && d->m && d->v);
}

static void set_fill(device_set *d, uint64_t seed)
{
    size_t n = d->total;
    float *h = malloc(n * sizeof(float));
    float *const dst[4] = {d->w, d->g, d->m, d->v};
    for (int k = 0; k < 4; k++) {
        th_fill_normal(h, n, seed + (uint64_t)k, 1.0f);
        if (k == 3)
            for (size_t i = 0; i < n; i++)
                h[i] = h[i] * h[i]; /* a second moment is not negative */
        d->be->upload(&d->ex, dst[k], h, n * sizeof(float));
    }
    ck_assert(d->be->sync(&d->ex) == SL_OK);
    free(h);
}

static void set_free(device_set *d)
{
    d->be->free(d->be, d->w);
    d->be->free(d->be, d->g);
    d->be->free(d->be, d->m);
    d->be->free(d->be, d->v);
}

static float *set_read(device_set *d, const float *p)
{
    float *h = malloc(d->total * sizeof(float) + 1);
    d->be->download(&d->ex, h, p, d->total * sizeof(float));
    ck_assert(d->be->sync(&d->ex) == SL_OK);
    return h;
}

static void spans_of(device_set *d, sl_update_span *sp, int adam)
{
    for (int i = 0; i < N_SPANS; i++)
        sp[i] = (sl_update_span){d->w + d->off[i], d->g + d->off[i], d->m + d->off[i],
                                 adam ? d->v + d->off[i] : NULL, span_len(i),
                                 /* three weight decays: more than one launch's two */
                                 i % 3 == 0 ? 0.0f : (i % 3 == 1 ? 0.01f : 0.1f)};
}

static void assert_same_bits(device_set *a, device_set *b, const char *what)
{
    float *const pa[3] = {a->w, a->m, a->v}, *const pb[3] = {b->w, b->m, b->v};
    for (int k = 0; k < 3; k++) {
        float *x = set_read(a, pa[k]), *y = set_read(b, pb[k]);
        ck_assert_msg(memcmp(x, y, a->total * sizeof(float)) == 0,
                      "%s: list and one-span-at-a-time results differ (array %d)", what, k);
        free(x);
        free(y);
    }
}

/* List updates against one call per span, from the same start. */
static void check_updates(const sl_backend *be)
{
    if (!be->sgd_update_list || !be->adam_update_list) {
        printf("%s: no list updates (one call per span is the optimizer's path)\n", be->name);
        return;
    }
    device_set a, b;
    set_alloc(&a, be);
    set_alloc(&b, be);
    sl_update_span sa[N_SPANS], sb[N_SPANS];
    for (int variant = 0; variant < 4; variant++) {
        int adam = variant >= 2, flag = variant & 1; /* nesterov / decoupled */
        set_fill(&a, 11 + (uint64_t)variant);
        set_fill(&b, 11 + (uint64_t)variant);
        spans_of(&a, sa, adam);
        spans_of(&b, sb, adam);
        for (int step = 1; step <= 2; step++) {
            if (adam) {
                be->adam_update_list(&a.ex, N_SPANS, sa, 1e-3f, 0.9f, 0.999f, 1e-8f, flag, step,
                                     0.5f);
                for (int i = 0; i < N_SPANS; i++)
                    be->adam_update(&b.ex, sb[i].count, sb[i].w, sb[i].g, sb[i].m, sb[i].v,
                                    1e-3f, 0.9f, 0.999f, 1e-8f, sb[i].weight_decay, flag, step,
                                    0.5f);
            } else {
                be->sgd_update_list(&a.ex, N_SPANS, sa, 0.05f, 0.9f, flag, step == 1, 0.5f);
                for (int i = 0; i < N_SPANS; i++)
                    be->sgd_update(&b.ex, sb[i].count, sb[i].w, sb[i].g, sb[i].m, 0.05f, 0.9f,
                                   sb[i].weight_decay, flag, step == 1, 0.5f);
            }
        }
        ck_assert(be->sync(&a.ex) == SL_OK);
        char what[64];
        snprintf(what, sizeof what, "%s %s%s", be->name, adam ? "adam" : "sgd",
                 flag ? (adam ? " decoupled" : " nesterov") : "");
        assert_same_bits(&a, &b, what);
    }
    set_free(&a);
    set_free(&b);
    printf("%s: SGD and Adam list updates equal one update per span, bit for bit\n", be->name);
}

/* sum_squares_list against one sum_squares per tensor. */
static void check_squares(const sl_backend *be)
{
    if (!be->sum_squares_list) {
        printf("%s: no list sums of squares\n", be->name);
        return;
    }
    device_set d;
    set_alloc(&d, be);
    set_fill(&d, 5);
    /* more tensors than one launch takes: every span of w and of g */
    const float *x[2 * N_SPANS];
    size_t count[2 * N_SPANS];
    for (int i = 0; i < 2 * N_SPANS; i++) {
        x[i] = (i < N_SPANS ? d.w : d.g) + d.off[i % N_SPANS];
        count[i] = span_len(i % N_SPANS);
    }
    const size_t bytes = SL_SUM_SQUARES_SLOTS * sizeof(double);
    double *s1 = be->alloc(be, bytes, "slots"), *s2 = be->alloc(be, bytes, "slots");
    ck_assert(s1 && s2);
    be->sum_squares_list(&d.ex, 2 * N_SPANS, x, count, s1);
    for (int i = 0; i < 2 * N_SPANS; i++)
        be->sum_squares(&d.ex, count[i], x[i], s2);
    double h1[SL_SUM_SQUARES_SLOTS], h2[SL_SUM_SQUARES_SLOTS];
    be->download(&d.ex, h1, s1, bytes);
    be->download(&d.ex, h2, s2, bytes);
    ck_assert(be->sync(&d.ex) == SL_OK);
    ck_assert_msg(memcmp(h1, h2, bytes) == 0, "%s: list sums of squares differ", be->name);
    ck_assert(h1[0] > 0.0);
    be->free(be, s1);
    be->free(be, s2);
    set_free(&d);
    printf("%s: list sums of squares equal one call per tensor, bit for bit\n", be->name);
}

/* Uploads: the caller's buffer is overwritten right after each returns;
 * the device keeps what it held at the call. Sizes: small ones (the
 * staging buffers in turn, the third waiting for the first's copy) and
 * one larger than staging takes. Read-backs deferred to the sync: more
 * than their room holds, by count and by bytes. */
static void check_transfers(const sl_backend *be)
{
    sl_exec ex = {be, 1, 0, NULL};
    const size_t sizes[4] = {1000, 300000, 5000, (size_t)20 << 20}; /* floats */
    for (int k = 0; k < 4; k++) {
        size_t n = sizes[k];
        float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
        float *dev = be->alloc(be, n * sizeof(float), "upload");
        ck_assert(h && back && dev);
        for (size_t i = 0; i < n; i++)
            h[i] = (float)(i % 1000) + (float)k;
        be->upload(&ex, dev, h, n * sizeof(float));
        memset(h, 0xff, n * sizeof(float)); /* the caller reuses its buffer at once */
        be->download(&ex, back, dev, n * sizeof(float));
        ck_assert(be->sync(&ex) == SL_OK);
        for (size_t i = 0; i < n; i += 97)
            ck_assert_msg(back[i] == (float)(i % 1000) + (float)k,
                          "%s: upload of %zu floats changed by the caller's later write", be->name,
                          n);
        be->free(be, dev);
        free(h);
        free(back);
    }
    if (!be->download_later) {
        printf("%s: no deferred read-backs\n", be->name);
        return;
    }
    /* 40 read-backs (more than are held), then one larger than their room */
    enum { N = 40, BIG = 100000 };
    float *dev = be->alloc(be, (N + BIG) * sizeof(float), "readback");
    float *h = malloc((N + BIG) * sizeof(float)), *got = calloc(N + BIG, sizeof(float));
    for (int i = 0; i < N + BIG; i++)
        h[i] = (float)i * 0.5f;
    be->upload(&ex, dev, h, (N + BIG) * sizeof(float));
    for (int i = 0; i < N; i++)
        be->download_later(&ex, got + i, dev + i, sizeof(float));
    be->download_later(&ex, got + N, dev + N, BIG * sizeof(float));
    ck_assert(be->sync(&ex) == SL_OK);
    ck_assert_msg(memcmp(got, h, (N + BIG) * sizeof(float)) == 0,
                  "%s: deferred read-backs did not all arrive by the sync", be->name);
    be->free(be, dev);
    free(h);
    free(got);
    printf("%s: uploads free the caller's buffer, deferred read-backs arrive by the sync\n",
           be->name);
}

static void check_backend(const sl_backend *be)
{
    check_transfers(be);
    check_updates(be);
    check_squares(be);
}

START_TEST(test_backend_lists_cpu)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(1, &be), SL_OK);
    check_backend(be);
    sl_backend_destroy(be);
}
END_TEST

START_TEST(test_backend_lists_cuda)
{
    sl_backend *be = NULL;
    if (sl_cuda_backend_create(0, 1, 0, &be) != SL_OK) {
        printf("SKIPPED: no usable CUDA device: %s\n", sl_last_error());
        return;
    }
    check_backend(be);
    sl_backend_destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_lists");
    TCase *tc = tcase_create("backend_lists");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_backend_lists_cpu);
    tcase_add_test(tc, test_backend_lists_cuda);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
