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

/* The defaults, then the command line; a bad one prints the usage and
 * exits. */
static void parse(int argc, char **argv, options *o)
{
    *o = (options){"resnet50", "sqrt", 8, 224, 4, 1, 1, 1, 4.0};
    const bench_opt opts[] = {
        BENCH_OPT("--model", BENCH_STRING, &o->model),
        BENCH_OPT("--schedule", BENCH_STRING, &o->schedule),
        BENCH_OPT("--batch", BENCH_ATOI, &o->batch),
        BENCH_OPT("--res", BENCH_ATOI, &o->res),
        BENCH_OPT("--steps", BENCH_ATOI, &o->steps),
        BENCH_OPT("--warmup", BENCH_ATOI, &o->warmup),
        BENCH_OPT("--threads", BENCH_ATOI, &o->threads),
        BENCH_OPT("--overlap", BENCH_ATOI, &o->overlap),
        BENCH_OPT("--bucket-mib", BENCH_DOUBLE, &o->bucket_mib),
        BENCH_OPT_END,
    };
    if (bench_parse_args(argc, argv, opts) != 0 || o->batch <= 0 || o->res <= 0 ||
        o->steps <= 0 || o->warmup < 0 || !(o->bucket_mib > 0))
        bench_usage("mpirun -np N bench_dist",
                    "[--model M] [--batch N] [--res N] [--steps N] [--warmup N] [--threads N] "
                    "[--schedule sqrt|none] [--overlap 1|0] [--bucket-mib X]\n");
}

/* The message names the failed call as written, so the helpers below keep
 * the calls' spelling (local names included). */
#define CHECK(call)                                                                            \
    do {                                                                                       \
        if ((call) != SL_OK) {                                                                 \
            fprintf(stderr, "bench_dist: %s: %s\n", #call, sl_last_error());                    \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

/* A run: the network on its communicator, one batch's buffers, the
 * per-step figures (step times, the last rank's wait, every rank's wait of
 * one step) and the counters at the start of the measured steps. */
typedef struct dist_run {
    sl_context *ctx;
    sl_net *net;
    sl_dist *dist;
    sl_dataset *ds;
    float *x;
    int *labels;
    double *step_s, *exposed, *waits;
    int rank, ranks;
    sl_dist_stats before;
    bench_load load;
} dist_run;

/* The model with SGD, joined to the communicator (every rank). */
static int join(options o, dist_run *d)
{
    sl_context_options co = sl_context_defaults();
    co.threads = o.threads;
    co.seed = 1;
    sl_optimizer_options opt = sl_optimizer_sgd(0.01f, 0.9f, 1e-4f, 0);
    sl_dist_options dopt = sl_dist_defaults();
    dopt.overlap = o.overlap;
    dopt.bucket_bytes = (size_t)(o.bucket_mib * 1048576.0);
    sl_context *ctx;
    sl_net *net;
    sl_dist *dist;
    CHECK(sl_context_create(&co, &ctx));
    d->ctx = ctx;
    CHECK(sl_sublinear(ctx, 3, strcmp(o.schedule, "none") ? SL_SCHEDULE_SQRT : SL_SCHEDULE_NONE,
                       &net));
    d->net = net;
    CHECK(sl_model_build(net, o.model, 1000, o.res));
    CHECK(sl_net_set_optimizer(net, &opt));
    CHECK(sl_dist_join(net, &dopt, &dist));
    d->dist = dist;
    d->rank = sl_dist_rank(dist);
    d->ranks = sl_dist_size(dist);
    return 0;
}

/* The buffers and the synthetic dataset. */
static int prepare_inputs(options o, dist_run *d)
{
    size_t n = (size_t)o.batch * 3 * o.res * o.res;
    d->x = malloc(n * sizeof(float));
    d->labels = malloc((size_t)o.batch * sizeof(int));
    d->step_s = malloc((size_t)o.steps * sizeof(double));
    if (!d->x || !d->labels || !d->step_s)
        return 1;
    sl_dataset *ds;
    CHECK(sl_dataset_synthetic(1000, 3, o.res, o.res, 7, &ds));
    d->ds = ds;
    d->exposed = malloc((size_t)o.steps * sizeof(double));
    d->waits = calloc((size_t)d->ranks, sizeof(double));
    return d->exposed && d->waits ? 0 : 1;
}

/* The wait of the rank that arrived last at this step (the least wait of
 * all ranks, since `at`), gathered as a sum of one slot per rank. */
static int last_rank_wait(dist_run *d, const sl_dist_stats *at, double *out)
{
    sl_dist *dist = d->dist;
    double *waits = d->waits;
    int rank = d->rank, ranks = d->ranks;
    sl_dist_stats now;
    CHECK(sl_dist_get_stats(dist, &now));
    for (int r = 0; r < ranks; r++)
        waits[r] = r == rank ? now.wait_seconds - at->wait_seconds : 0.0;
    CHECK(sl_dist_sum(dist, waits, ranks));
    double least = waits[0];
    for (int r = 1; r < ranks; r++)
        least = waits[r] < least ? waits[r] : least;
    *out = least;
    return 0;
}

/* The warm-up steps, then the measured ones: each rank its own slice of
 * the dataset; the step times and last-rank waits into d. */
static int train(options o, dist_run *d)
{
    sl_net *net = d->net;
    sl_dist *dist = d->dist;
    sl_dataset *ds = d->ds;
    float *x = d->x;
    int *labels = d->labels;
    int rank = d->rank, ranks = d->ranks;
    sl_shape shape = sl_shape_nchw(o.batch, 3, o.res, o.res);
    sl_dist_stats before, at;
    for (int s = 0; s < o.warmup + o.steps; s++) {
        CHECK(sl_dataset_batch(ds, SL_SPLIT_TRAIN, ((int64_t)s * ranks + rank) * o.batch, o.batch,
                               x, labels));
        if (s == o.warmup) {
            CHECK(sl_dist_get_stats(dist, &before));
            d->before = before;
            bench_load_start(&d->load);
        }
        CHECK(sl_dist_get_stats(dist, &at));
        double t0 = bench_now_s();
        CHECK(sl_net_train_step(net, x, shape, labels, NULL));
        if (s < o.warmup)
            continue;
        d->step_s[s - o.warmup] = bench_now_s() - t0;
        if (last_rank_wait(d, &at, &d->exposed[s - o.warmup]) != 0)
            return 1;
    }
    return 0;
}

/* Means over ranks (sums, divided on rank 0), and rank 0's JSON line. */
static int report(options o, dist_run *d)
{
    sl_dist *dist = d->dist;
    const sl_dist_stats before = d->before;
    int ranks = d->ranks;
    sl_dist_stats after;
    CHECK(sl_dist_get_stats(dist, &after));
    double foreign = bench_load_foreign_pct(&d->load);
    double steps = (double)(after.steps - before.steps);
    double sums[3] = {(after.wait_seconds - before.wait_seconds) / steps,
                      (after.agree_seconds - before.agree_seconds) / steps,
                      bench_median(d->step_s, o.steps)};
    CHECK(sl_dist_sum(dist, sums, 3));
    if (d->rank == 0)
        printf("{\"model\":\"%s\",\"ranks\":%d,\"batch\":%d,\"res\":%d,\"threads\":%d,"
               "\"schedule\":\"%s\",\"overlap\":%d,\"bucket_mib\":%g,\"steps\":%d,"
               "\"step_s\":%.4f,\"wait_s\":%.4f,\"exposed_s\":%.4f,\"agree_s\":%.4f,"
               "\"reduced_mib\":%.2f,"
               "\"buckets\":%.1f,\"buckets_hidden\":%.1f,\"foreign_cpu_pct\":%.1f}\n",
               o.model, ranks, o.batch, o.res, o.threads, o.schedule, o.overlap, o.bucket_mib,
               o.steps, sums[2] / ranks, sums[0] / ranks, bench_median(d->exposed, o.steps),
               sums[1] / ranks,
               (double)(after.bytes_reduced - before.bytes_reduced) / steps / 1048576.0,
               (double)(after.buckets - before.buckets) / steps,
               (double)(after.buckets_hidden - before.buckets_hidden) / steps, foreign);
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    parse(argc, argv, &o);
    dist_run d;
    memset(&d, 0, sizeof d);
    int rc = join(o, &d);
    if (!rc)
        rc = prepare_inputs(o, &d);
    if (!rc)
        rc = train(o, &d);
    if (!rc)
        rc = report(o, &d);
    /* A run that failed after joining exits as it is: the other ranks may
     * still be inside a collective call that freeing the communicator
     * would wait on. */
    if (rc && d.dist)
        return rc;
    free(d.x);
    free(d.labels);
    free(d.step_s);
    free(d.exposed);
    free(d.waits);
    sl_dataset_free(d.ds);
    sl_dist_free(d.dist);
    sl_net_free(d.net);
    sl_context_free(d.ctx);
    return rc;
}
