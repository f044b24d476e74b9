/*
 * bench_gpu.c — memonger's headline on a GPU, our side: ResNet-152 (or
 * another model), batch 16, 224², float32, one schedule per process:
 * planned peak, the library's measured peak (arena high-water mark plus
 * parameters, gradients and optimizer state), the device's free-memory
 * drop since the context was created, and iterations per second (median of
 * the timed steps after a warm-up). --max-batch BYTES instead finds the
 * largest batch whose planned step fits BYTES (planning runs no kernel),
 * then runs one step at that batch to show it does. --tf32 lets
 * convolutions and GEMMs use TF32 tensor cores (PyTorch's default for
 * convolutions); --profile adds one more profiled step and prints where its
 * time went by layer type and pass. Prints one JSON line. bench/gpu.sh runs
 * it for every schedule beside PyTorch.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sublinear.h"

static sl_net *build(sl_context *ctx, const char *model, sl_schedule s, int res)
{
    sl_net *net = NULL;
    sl_optimizer_options o = sl_sgd(0.01f, 0.9f, 1e-4f, 0);
    if (sl_sublinear(ctx, 3, s, &net) != SL_OK || sl_model_build(net, model, 1000, res) != SL_OK ||
        sl_net_set_optimizer(net, &o) != SL_OK) {
        fprintf(stderr, "bench_gpu: %s\n", sl_last_error());
        sl_net_free(net);
        return NULL;
    }
    return net;
}

/* Largest batch whose planned training step fits `limit` bytes. */
static int max_batch(sl_context *ctx, const char *model, sl_schedule s, int res, uint64_t limit)
{
    sl_net *net = build(ctx, model, s, res);
    int lo = 0, hi = 1;
    sl_memory_report r;
    while (net && hi < 65536 &&
           sl_net_memory_report(net, (sl_shape){hi, 3, res, res}, SL_MODE_TRAIN, &r) == SL_OK &&
           r.total <= limit) {
        lo = hi;
        hi *= 2;
    }
    while (net && hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (sl_net_memory_report(net, (sl_shape){mid, 3, res, res}, SL_MODE_TRAIN, &r) == SL_OK &&
            r.total <= limit)
            lo = mid;
        else
            hi = mid;
    }
    sl_net_free(net);
    return lo;
}

int main(int argc, char **argv)
{
    const char *model = "resnet152", *sched = "sqrt";
    int batch = 16, res = 224, steps = 6, tf32 = 0, profile = 0, gpu = 0, cpu = 0, nondet = 0;
    uint64_t limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tf32"))
            tf32 = 1;
        else if (!strcmp(a, "--nondeterministic"))
            nondet = 1;
        else if (!strcmp(a, "--profile"))
            profile = 1;
        else if (v && !strcmp(a, "--model"))
            model = argv[++i];
        else if (v && !strcmp(a, "--schedule"))
            sched = argv[++i];
        else if (v && !strcmp(a, "--batch"))
            batch = atoi(argv[++i]);
        else if (v && !strcmp(a, "--res"))
            res = atoi(argv[++i]);
        else if (v && !strcmp(a, "--steps"))
            steps = atoi(argv[++i]);
        else if (v && !strcmp(a, "--max-batch"))
            limit = strtoull(argv[++i], NULL, 10);
        else if (v && !strcmp(a, "--gpu"))
            gpu = atoi(argv[++i]);
        else if (v && !strcmp(a, "--device") && !strcmp(v, "cpu")) {
            cpu = 1; /* a smoke run of this program without a GPU */
            i++;
        } else {
            fprintf(stderr, "usage: bench_gpu [--model M] [--schedule S] [--batch N] [--res N] "
                            "[--steps N] [--max-batch BYTES] [--gpu N] [--tf32] [--profile] "
                            "[--nondeterministic] [--device cpu]\n");
            return 2;
        }
    }
    sl_schedule s;
    if (sl_schedule_parse(sched, &s) != SL_OK || batch < 1 || steps < 2) {
        fprintf(stderr, "bench_gpu: bad schedule, batch or steps\n");
        return 2;
    }
    sl_context_options co = sl_context_defaults();
    co.device = cpu ? SL_DEVICE_CPU : SL_DEVICE_CUDA;
    co.gpu = gpu;
    co.tf32 = tf32;
    co.deterministic = !nondet; /* what a comparison with PyTorch's default costs us */
    sl_context *ctx = NULL;
    if (sl_context_create(&co, &ctx) != SL_OK) {
        fprintf(stderr, "bench_gpu: %s\n", sl_last_error());
        return 1;
    }
    if (limit)
        batch = max_batch(ctx, model, s, res, limit);
    sl_net *net = batch > 0 ? build(ctx, model, s, res) : NULL;
    sl_dataset *ds = NULL;
    float *x = malloc((size_t)batch * 3 * res * res * sizeof(float) + 1);
    int *labels = malloc((size_t)batch * sizeof(int) + 1);
    double *dt = calloc((size_t)steps, sizeof(double));
    int rc = !net || !x || !labels || !dt ||
             sl_dataset_synthetic(1000, 3, res, res, 1, &ds) != SL_OK;
    sl_shape shape = {batch, 3, res, res};
    int run_steps = limit ? 1 : steps;
    for (int i = 0; !rc && i < run_steps; i++) {
        if (sl_dataset_batch(ds, SL_SPLIT_TRAIN, (int64_t)i * batch, batch, x, labels) != SL_OK)
            rc = 1;
        double t0 = bench_now_s();
        if (!rc && sl_net_train_step(net, x, shape, labels, NULL) != SL_OK) {
            fprintf(stderr, "bench_gpu: %s\n", sl_last_error());
            rc = 1;
        }
        dt[i] = bench_now_s() - t0;
    }
    sl_memory_report r;
    if (!rc && sl_net_memory_report(net, shape, SL_MODE_TRAIN, &r) != SL_OK)
        rc = 1;
    /* one more step, profiled: where a step's time goes */
    sl_profile_entry prof[48];
    int n_prof = 0;
    if (!rc && profile &&
        (sl_net_set_profiling(net, 1) != SL_OK ||
         sl_net_train_step(net, x, shape, labels, NULL) != SL_OK ||
         sl_net_profile(net, prof, 48, &n_prof, 0) != SL_OK)) {
        fprintf(stderr, "bench_gpu: profiling: %s\n", sl_last_error());
        rc = 1;
    }
    if (!rc) {
        double median = 0;
        if (!limit) {
            qsort(dt + 1, (size_t)steps - 1, sizeof *dt, bench_cmp_double);
            median = dt[1 + (steps - 1) / 2];
        }
        printf("{\"side\":\"sublinear\",\"model\":\"%s\",\"schedule\":\"%s\",\"batch\":%d,"
               "\"planned_total\":%llu,\"planned_arena\":%llu,\"measured_total\":%llu,"
               "\"device_used\":%llu,\"recompute_fraction\":%.4f,\"it_per_s\":%.4f,"
               "\"tf32\":%s,\"deterministic\":%s%s",
               model, sched, batch, (unsigned long long)r.total,
               (unsigned long long)r.arena_bytes, (unsigned long long)r.measured_total,
               (unsigned long long)r.device_used, r.recompute_fraction,
               median > 0 ? 1.0 / median : 0.0, tf32 ? "true" : "false", nondet ? "false" : "true",
               limit ? ",\"max_batch_search\":true" : "");
        if (profile) {
            printf(",\"profile\":[");
            for (int i = 0; i < n_prof && i < 48; i++)
                printf("%s{\"type\":\"%s\",\"pass\":\"%s\",\"calls\":%lld,\"ms\":%.3f}",
                       i ? "," : "", prof[i].layer_type, prof[i].pass, (long long)prof[i].calls,
                       1e3 * prof[i].seconds);
            printf("]");
        }
        printf("}\n");
    }
    free(x);
    free(labels);
    free(dt);
    sl_dataset_free(ds);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}
