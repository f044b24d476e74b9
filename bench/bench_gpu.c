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
 * time went by layer type and pass. Prints one JSON line, with the device's
 * name, the cuDNN / cuBLAS versions the process loaded and the cuDNN API
 * its convolutions used ("conv_api"), with SL_CUDA_CONV_TUNE's value
 * ("conv_tune": whether their engines were timed). bench/gpu.sh
 * runs it for every schedule beside PyTorch.
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
    sl_optimizer_options o = sl_optimizer_sgd(0.01f, 0.9f, 1e-4f, 0);
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
           sl_net_memory_report(net, sl_shape_nchw(hi, 3, res, res), SL_MODE_TRAIN, &r) == SL_OK &&
           r.total <= limit) {
        lo = hi;
        hi *= 2;
    }
    while (net && hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (sl_net_memory_report(net, sl_shape_nchw(mid, 3, res, res), SL_MODE_TRAIN, &r) == SL_OK &&
            r.total <= limit)
            lo = mid;
        else
            hi = mid;
    }
    sl_net_free(net);
    return lo;
}

typedef struct options {
    const char *model, *sched;
    int batch, res, steps, tf32, profile, gpu, cpu, nondet;
    uint64_t limit; /* --max-batch: the bytes a planned step must fit */
} options;

/* The defaults (ResNet-152 under sqrt, batch 16, 224x224, 6 steps), then
 * the command line; returns 0, or 2 after printing why not (a line it
 * cannot read prints the usage and exits). */
static int parse_options(int argc, char **argv, options *o, sl_schedule *s)
{
    *o = (options){"resnet152", "sqrt", 16, 224, 6, 0, 0, 0, 0, 0, 0};
    const bench_opt opts[] = {
        BENCH_OPT_FLAG("--tf32", &o->tf32, 1),
        BENCH_OPT_FLAG("--nondeterministic", &o->nondet, 1),
        BENCH_OPT_FLAG("--profile", &o->profile, 1),
        BENCH_OPT("--model", BENCH_STRING, &o->model),
        BENCH_OPT("--schedule", BENCH_STRING, &o->sched),
        BENCH_OPT("--batch", BENCH_ATOI, &o->batch),
        BENCH_OPT("--res", BENCH_ATOI, &o->res),
        BENCH_OPT("--steps", BENCH_ATOI, &o->steps),
        BENCH_OPT("--max-batch", BENCH_U64, &o->limit),
        BENCH_OPT("--gpu", BENCH_ATOI, &o->gpu),
        /* a smoke run of this program without a GPU */
        BENCH_OPT_WORD("--device", &o->cpu, "cpu"),
        BENCH_OPT_END,
    };
    if (bench_parse_args(argc, argv, opts) != 0)
        bench_usage("bench_gpu", "[--model M] [--schedule S] [--batch N] [--res N] [--steps N] "
                                 "[--max-batch BYTES] [--gpu N] [--tf32] [--profile] "
                                 "[--nondeterministic] [--device cpu]\n");
    if (sl_schedule_parse(o->sched, s) != SL_OK || o->batch < 1 || o->steps < 2) {
        fprintf(stderr, "bench_gpu: bad schedule, batch or steps\n");
        return 2;
    }
    return 0;
}

static int create_context(const options *o, sl_context **ctx)
{
    sl_context_options co = sl_context_defaults();
    co.device = o->cpu ? SL_DEVICE_CPU : SL_DEVICE_CUDA;
    co.gpu = o->gpu;
    co.tf32 = o->tf32;
    co.deterministic = !o->nondet; /* what a comparison with PyTorch's default costs us */
    if (sl_context_create(&co, ctx) != SL_OK) {
        fprintf(stderr, "bench_gpu: %s\n", sl_last_error());
        return 1;
    }
    return 0;
}

/* The buffers and dataset of a run at o->batch. */
typedef struct inputs {
    sl_dataset *ds;
    float *x;
    int *labels;
    double *dt; /* each step's seconds */
} inputs;

/* Runs the timed steps (one under --max-batch) into in->dt; returns 0, or
 * 1 (with a message where the step itself failed). */
static int train(sl_net *net, const options *o, sl_shape shape, inputs *in)
{
    int rc = 0, run_steps = o->limit ? 1 : o->steps;
    for (int i = 0; !rc && i < run_steps; i++) {
        if (sl_dataset_batch(in->ds, SL_SPLIT_TRAIN, (int64_t)i * o->batch, o->batch, in->x,
                             in->labels) != SL_OK)
            rc = 1;
        double t0 = bench_now_s();
        if (!rc && sl_net_train_step(net, in->x, shape, in->labels, NULL) != SL_OK) {
            fprintf(stderr, "bench_gpu: %s\n", sl_last_error());
            rc = 1;
        }
        in->dt[i] = bench_now_s() - t0;
    }
    return rc;
}

#define MAX_PROFILE 48

/* One more step, profiled: where a step's time goes. */
static int profile_step(sl_net *net, sl_shape shape, inputs *in, sl_profile_entry *prof,
                        int *n_prof)
{
    if (sl_net_set_profiling(net, 1) != SL_OK ||
        sl_net_train_step(net, in->x, shape, in->labels, NULL) != SL_OK ||
        sl_net_profile(net, prof, MAX_PROFILE, n_prof, 0) != SL_OK) {
        fprintf(stderr, "bench_gpu: profiling: %s\n", sl_last_error());
        return 1;
    }
    return 0;
}

/* The cuDNN API the convolutions went through, as the CUDA backend reads
 * SL_CUDA_CONV_API (cuda_backend.cu): "legacy" (cudnnGetConvolution*_v7)
 * or "graph" (engine heuristics; a geometry the graph API cannot run
 * falls back to the legacy choice, which SL_CUDA_CONV_LOG=1 shows). */
static const char *conv_api(void)
{
    const char *v = getenv("SL_CUDA_CONV_API");
    return v && strcmp(v, "legacy") == 0 ? "legacy" : "graph";
}

/* The JSON line; it/s from the median of the steps after the first (none
 * under --max-batch). Reorders dt[1..steps). */
static void print_json(const options *o, const sl_memory_report *r, double *dt,
                       const sl_profile_entry *prof, int n_prof, int threads)
{
    double median = 0;
    if (!o->limit) {
        qsort(dt + 1, (size_t)o->steps - 1, sizeof *dt, bench_cmp_double);
        median = dt[1 + (o->steps - 1) / 2];
    }
    printf("{\"side\":\"sublinear\",\"model\":\"%s\",\"schedule\":\"%s\",\"batch\":%d,"
           "\"planned_total\":%llu,\"planned_arena\":%llu,\"measured_total\":%llu,"
           "\"device_used\":%llu,\"recompute_fraction\":%.4f,\"it_per_s\":%.4f,",
           o->model, o->sched, o->batch, (unsigned long long)r->total,
           (unsigned long long)r->arena_bytes, (unsigned long long)r->measured_total,
           (unsigned long long)r->device_used, r->recompute_fraction,
           median > 0 ? 1.0 / median : 0.0);
    if (!o->cpu) {
        bench_print_gpu_json(o->gpu); /* the device, the cuDNN / cuBLAS versions loaded */
        const char *tune = getenv("SL_CUDA_CONV_TUNE"); /* engines timed (cuda_conv.cu) */
        printf("\"conv_api\":\"%s\",\"conv_tune\":\"%s\",", conv_api(),
               tune && *tune ? tune : "off");
    } else { /* the CPU model, what its kernels dispatch to, the threads */
        bench_print_machine_json();
        printf("\"threads\":%d,", threads);
    }
    printf("\"tf32\":%s,\"deterministic\":%s%s", o->tf32 ? "true" : "false",
           o->nondet ? "false" : "true", o->limit ? ",\"max_batch_search\":true" : "");
    if (o->profile) {
        printf(",\"profile\":[");
        for (int i = 0; i < n_prof && i < MAX_PROFILE; i++)
            printf("%s{\"type\":\"%s\",\"pass\":\"%s\",\"calls\":%lld,\"ms\":%.3f}",
                   i ? "," : "", prof[i].layer_type, prof[i].pass, (long long)prof[i].calls,
                   1e3 * prof[i].seconds);
        printf("]");
    }
    printf("}\n");
}

int main(int argc, char **argv)
{
    options o;
    sl_schedule s;
    int rc = parse_options(argc, argv, &o, &s);
    if (rc)
        return rc;
    sl_context *ctx = NULL;
    if (create_context(&o, &ctx) != 0)
        return 1;
    if (o.limit)
        o.batch = max_batch(ctx, o.model, s, o.res, o.limit);
    sl_net *net = o.batch > 0 ? build(ctx, o.model, s, o.res) : NULL;
    inputs in = {NULL, NULL, NULL, NULL};
    in.x = malloc((size_t)o.batch * 3 * o.res * o.res * sizeof(float) + 1);
    in.labels = malloc((size_t)o.batch * sizeof(int) + 1);
    in.dt = calloc((size_t)o.steps, sizeof(double));
    rc = !net || !in.x || !in.labels || !in.dt ||
         sl_dataset_synthetic(1000, 3, o.res, o.res, 1, &in.ds) != SL_OK;
    sl_shape shape = sl_shape_nchw(o.batch, 3, o.res, o.res);
    if (!rc)
        rc = train(net, &o, shape, &in);
    sl_memory_report r;
    if (!rc && sl_net_memory_report(net, shape, SL_MODE_TRAIN, &r) != SL_OK)
        rc = 1;
    sl_profile_entry prof[MAX_PROFILE];
    int n_prof = 0;
    if (!rc && o.profile)
        rc = profile_step(net, shape, &in, prof, &n_prof);
    if (!rc)
        print_json(&o, &r, in.dt, prof, n_prof, bench_context_threads(ctx));
    free(in.x);
    free(in.labels);
    free(in.dt);
    sl_dataset_free(in.ds);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}
