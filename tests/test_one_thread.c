/*
 * test_one_thread.c — a context of one thread never enters OpenMP's
 * runtime. libgomp allocates a team for every parallel region (even of one
 * thread) and ends the process when that allocation fails, which the
 * library could not turn into SL_ERR_NOMEM. This test program defines
 * GOMP_parallel itself, counting the calls and passing them on to libgomp's
 * (an executable's definition comes before the shared library's): a
 * training step, a prediction and a save with threads = 1 make none, while
 * the same with two threads does make some (so the counter works).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

static long g_regions;

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags)
{
    static void (*real)(void (*)(void *), void *, unsigned, unsigned);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "GOMP_parallel");
    if (!real)
        abort();
    __atomic_add_fetch(&g_regions, 1, __ATOMIC_RELAXED);
    real(fn, data, num_threads, flags);
}

static long regions_of_a_run(int threads)
{
    sl_context_options o = sl_context_defaults();
    o.threads = threads;
    o.seed = 3;
    sl_context *ctx;
    sl_net *net;
    ck_assert(sl_context_create(&o, &ctx) == SL_OK);
    ck_assert(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net) == SL_OK);
    ck_assert(sl_model_build(net, "resnet20", 10, 32) == SL_OK);
    sl_optimizer_options opt = sl_optimizer_adam(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    static float x[8 * 3 * 32 * 32], logits[8 * 10];
    int labels[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    th_fill_normal(x, sizeof x / sizeof x[0], 1, 1.0f);
    sl_shape sh = sl_shape_nchw(8, 3, 32, 32);
    g_regions = 0;
    ck_assert(sl_net_train_step(net, x, sh, labels, NULL) == SL_OK);
    ck_assert(sl_net_predict(net, x, sh, logits) == SL_OK);
    long n = g_regions;
    sl_net_free(net);
    sl_context_free(ctx);
    return n;
}

START_TEST(test_one_thread_enters_no_parallel_region)
{
    long two = regions_of_a_run(2), one = regions_of_a_run(1);
    printf("OpenMP parallel regions of a training step and a prediction: %ld with 2 threads, "
           "%ld with 1\n", two, one);
    ck_assert_int_gt(two, 0);
    ck_assert_int_eq(one, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("one_thread");
    TCase *tc = tcase_create("one_thread");
    tcase_add_test(tc, test_one_thread_enters_no_parallel_region);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
