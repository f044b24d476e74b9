/*
 * bench_dist.c — data-parallel training speed (run under `mpirun -np N`):
 * a model built with the library's builders, a fixed batch per rank, a
 * few steps after a warm-up, and where the communication time went.
 * Rank 0 prints one JSON object:
 *
 *   step_s            median wall time of a step (compute + communication)
 *   wait_s            mean over ranks and steps of the time a rank waited
 *                     after backward for its gradient buckets (and the
 *                     BatchNorm broadcast); it includes waiting for a
 *                     slower rank to arrive (skew)
 *   exposed_s         median over steps of the wait of the rank that
 *                     arrived last: the communication not hidden behind
 *                     compute, without the skew (the last rank waits for
 *                     nobody). With --overlap 0 every bucket is reduced
 *                     only after backward, so it is the whole allreduce
 *                     time
 *   agree_s           mean per step of the agreement before the kernels
 *   reduced_mib       gradient MiB reduced per step and rank
 *   buckets           buckets per step
 *   buckets_hidden    of those, finished before backward ended (rank 0)
 *   foreign_cpu_pct   share of the cores other processes used meanwhile
 *
 *   mpirun -np 2 bench_dist [--model resnet50] [--batch 8] [--res 224]
 *          [--steps 4] [--warmup 1] [--threads 1] [--schedule sqrt|none]
 *          [--overlap 1|0] [--bucket-mib 4]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sublinear.h"

typedef struct options {
    const char *model, *schedule;
    int batch, res, steps, warmup, threads, overlap;
    double bucket_mib;
} options;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){"resnet50", "sqrt", 8, 224, 4, 1, 1, 1, 4.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -1;
        if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--schedule"))
            o->schedule = v;
        else if (!strcmp(a, "--batch"))
            o->batch = atoi(v);
        else if (!strcmp(a, "--res"))
            o->res = atoi(v);
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v);
        else if (!strcmp(a, "--warmup"))
            o->warmup = atoi(v);
        else if (!strcmp(a, "--threads"))
            o->threads = atoi(v);
        else if (!strcmp(a, "--overlap"))
            o->overlap = atoi(v);
        else if (!strcmp(a, "--bucket-mib"))
            o->bucket_mib = atof(v);
        else
            return -1;
        i++;
    }
    return o->batch > 0 && o->res > 0 && o->steps > 0 && o->warmup >= 0 && o->bucket_mib > 0 ? 0
                                                                                              : -1;
}

#define CHECK(call)                                                                            \
    do {                                                                                       \
        if ((call) != SL_OK) {                                                                 \
            fprintf(stderr, "bench_dist: %s: %s\n", #call, sl_last_error());                    \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: mpirun -np N bench_dist [--model M] [--batch N] [--res N] "
                        "[--steps N] [--warmup N] [--threads N] [--schedule sqrt|none] "
                        "[--overlap 1|0] [--bucket-mib X]\n");
        return 2;
    }
    sl_context_options co = sl_context_defaults();
    co.threads = o.threads;
    co.seed = 1;
    sl_context *ctx;
    sl_net *net;
    CHECK(sl_context_create(&co, &ctx));
    CHECK(sl_sublinear(ctx, 3, strcmp(o.schedule, "none") ? SL_SCHEDULE_SQRT : SL_SCHEDULE_NONE, &net));
    CHECK(sl_model_build(net, o.model, 1000, o.res));
    sl_optimizer_options opt = sl_sgd(0.01f, 0.9f, 1e-4f, 0);
    CHECK(sl_net_set_optimizer(net, &opt));
    sl_dist_options dopt = sl_dist_defaults();
    dopt.overlap = o.overlap;
    dopt.bucket_bytes = (size_t)(o.bucket_mib * 1048576.0);
    sl_dist *dist;
    CHECK(sl_dist_join(net, &dopt, &dist));
    int rank = sl_dist_rank(dist), ranks = sl_dist_size(dist);

    sl_shape shape = {o.batch, 3, o.res, o.res};
    size_t n = (size_t)o.batch * 3 * o.res * o.res;
    float *x = malloc(n * sizeof(float));
    int *labels = malloc((size_t)o.batch * sizeof(int));
    double *step_s = malloc((size_t)o.steps * sizeof(double));
    if (!x || !labels || !step_s)
        return 1;
    sl_dataset *ds;
    CHECK(sl_dataset_synthetic(1000, 3, o.res, o.res, 7, &ds));
    sl_dist_stats before, after, at;
    bench_load load;
    double *exposed = malloc((size_t)o.steps * sizeof(double));
    double *waits = calloc((size_t)ranks, sizeof(double));
    if (!exposed || !waits)
        return 1;
    for (int s = 0; s < o.warmup + o.steps; s++) {
        CHECK(sl_dataset_batch(ds, SL_SPLIT_TRAIN, ((int64_t)s * ranks + rank) * o.batch, o.batch,
                               x, labels));
        if (s == o.warmup) {
            CHECK(sl_dist_get_stats(dist, &before));
            bench_load_start(&load);
        }
        CHECK(sl_dist_get_stats(dist, &at));
        double t0 = bench_now_s();
        CHECK(sl_net_train_step(net, x, shape, labels, NULL));
        if (s < o.warmup)
            continue;
        step_s[s - o.warmup] = bench_now_s() - t0;
        /* Every rank's wait of this step (an allgather as a sum). */
        sl_dist_stats now;
        CHECK(sl_dist_get_stats(dist, &now));
        for (int r = 0; r < ranks; r++)
            waits[r] = r == rank ? now.wait_seconds - at.wait_seconds : 0.0;
        CHECK(sl_dist_sum(dist, waits, ranks));
        double least = waits[0];
        for (int r = 1; r < ranks; r++)
            least = waits[r] < least ? waits[r] : least;
        exposed[s - o.warmup] = least;
    }
    CHECK(sl_dist_get_stats(dist, &after));
    double foreign = bench_load_foreign_pct(&load);
    double steps = (double)(after.steps - before.steps);
    /* Means over ranks: sums, divided on rank 0. */
    double sums[3] = {(after.wait_seconds - before.wait_seconds) / steps,
                      (after.agree_seconds - before.agree_seconds) / steps,
                      bench_median(step_s, o.steps)};
    CHECK(sl_dist_sum(dist, sums, 3));
    if (rank == 0)
        printf("{\"model\":\"%s\",\"ranks\":%d,\"batch\":%d,\"res\":%d,\"threads\":%d,"
               "\"schedule\":\"%s\",\"overlap\":%d,\"bucket_mib\":%g,\"steps\":%d,"
               "\"step_s\":%.4f,\"wait_s\":%.4f,\"exposed_s\":%.4f,\"agree_s\":%.4f,"
               "\"reduced_mib\":%.2f,"
               "\"buckets\":%.1f,\"buckets_hidden\":%.1f,\"foreign_cpu_pct\":%.1f}\n",
               o.model, ranks, o.batch, o.res, o.threads, o.schedule, o.overlap, o.bucket_mib,
               o.steps, sums[2] / ranks, sums[0] / ranks, bench_median(exposed, o.steps),
               sums[1] / ranks,
               (double)(after.bytes_reduced - before.bytes_reduced) / steps / 1048576.0,
               (double)(after.buckets - before.buckets) / steps,
               (double)(after.buckets_hidden - before.buckets_hidden) / steps, foreign);
    free(x);
    free(labels);
    free(step_s);
    free(exposed);
    free(waits);
    sl_dataset_free(ds);
    sl_dist_free(dist);
    sl_net_free(net);
    sl_context_free(ctx);
    return 0;
}
