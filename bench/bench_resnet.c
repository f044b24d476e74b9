/*
 * bench_resnet.c — memory against speed of one checkpointing schedule:
 * trains an ImageNet ResNet (ResNet-152 by default, batch 16, 224x224, the
 * built-in synthetic dataset, SGD with momentum 0.9) for a few steps and
 * reports the planned peak, the peak RSS of this process, seconds per step
 * and the recomputed share of the FLOPs.
 *
 *   bench_resnet [--model NAME] [--batch N] [--res N] [--classes N]
 *                [--schedule S] [--steps N] [--threads N] [--seed N] [--json]
 *                [--plan-only]
 *
 * Schedules: none, sqrt, segments:K, budget:SIZE and ops:SIZE (bytes, or
 * with a KiB / MiB / GiB suffix; ops is the operator-level search),
 * budget-half (half the planned total of keep-everything at this shape),
 * budget-sqrt (sqrt's planned total: the budget search at the memory sqrt
 * uses), budget-third and ops-third (a third of keep-everything's
 * activation arena, plus parameters, gradients and optimizer state) and
 * least (the least planned peak any schedule reaches). Planning runs no kernel, so the reference
 * plans cost nothing but a little time; --plan-only stops after them and
 * prints the planned figures (resnet152.sh reads sqrt's segment count and
 * planned total from it before it starts the timed runs).
 *
 * Peak RSS is the process's (getrusage ru_maxrss), so run one schedule per
 * process; resnet152.sh runs each schedule and PyTorch's runs
 * (bench_resnet_torch.py) in one job and prints the table. The first step
 * is a warm-up (it allocates the parameters and the arena); s/step is the
 * median of the others. The RSS after building and planning, before the
 * first step (libraries, OpenMP, the parameters, the input batch) is
 * printed as the baseline.
 */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sublinear.h"

typedef struct options {
    const char *model;
    const char *schedule;
    int batch, res, classes, steps, threads, json, plan_only;
    uint64_t seed;
} options;

_Noreturn static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--model NAME] [--batch N] [--res N] [--classes N] [--schedule S]\n"
            "          [--steps N] [--threads N] [--seed N] [--json] [--plan-only]\n"
            "schedules: none, sqrt, segments:K, budget:SIZE, ops:SIZE (bytes or\n"
            "           KiB/MiB/GiB), budget-half (half of keep-everything's planned\n"
            "           total), budget-sqrt (sqrt's planned total), budget-third and\n"
            "           ops-third (a third of keep-everything's activations), least\n",
            argv0);
    exit(2);
}

static int parse_int(const char *s, int min, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_resnet: %s: %s\n", what, sl_last_error());
    return 1;
}

/* Segments the schedule re-forwards: the maximal runs of "refwd" steps in
 * the planned program (each recomputed segment is re-run in one piece just
 * before its backward). -1 when the timeline cannot be built. */
static int recomputed_segments(sl_net *net, sl_shape s)
{
    sl_memory_timeline t;
    if (sl_net_memory_timeline(net, s, SL_MODE_TRAIN, &t) != SL_OK)
        return -1;
    int runs = 0, in_run = 0;
    for (int i = 0; i < t.steps; i++) {
        int refwd = t.step_names[i] && strncmp(t.step_names[i], "refwd", 5) == 0;
        runs += refwd && !in_run;
        in_run = refwd;
    }
    sl_memory_timeline_free(&t);
    return runs;
}

/* Plans the network at shape s under schedule sc; *out gets the report. */
static int plan(sl_net *net, sl_schedule sc, sl_shape s, sl_memory_report *out)
{
    if (sl_net_set_schedule(net, sc) != SL_OK)
        return fail("setting the schedule");
    if (sl_net_memory_report(net, s, SL_MODE_TRAIN, out) != SL_OK)
        return fail("planning");
    return 0;
}

int main(int argc, char **argv)
{
    options o = {"resnet152", "none", 16, 224, 1000, 4, 2, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            o.json = 1;
            continue;
        }
        if (!strcmp(a, "--plan-only")) {
            o.plan_only = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage(argv[0]);
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--model"))
            o.model = v;
        else if (!strcmp(a, "--schedule"))
            o.schedule = v;
        else if (!strcmp(a, "--batch"))
            bad = parse_int(v, 1, &o.batch);
        else if (!strcmp(a, "--res"))
            bad = parse_int(v, 32, &o.res);
        else if (!strcmp(a, "--classes"))
            bad = parse_int(v, 2, &o.classes);
        else if (!strcmp(a, "--steps"))
            bad = parse_int(v, 1, &o.steps);
        else if (!strcmp(a, "--threads"))
            bad = parse_int(v, 0, &o.threads);
        else if (!strcmp(a, "--seed")) {
            int seed;
            bad = parse_int(v, 0, &seed);
            o.seed = (uint64_t)seed;
        } else
            bad = 1;
        if (bad)
            usage(argv[0]);
    }

    sl_context_options co = sl_context_defaults();
    co.threads = o.threads;
    co.seed = o.seed;
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    sl_dataset *ds = NULL;
    float *x = NULL;
    int *labels = NULL;
    double *times = NULL;
    int rc = 0;
    sl_shape s = {o.batch, 3, o.res, o.res};
    sl_optimizer_options opt = sl_sgd(0.01f, 0.9f, 5e-4f, 0);

    if (sl_context_create(&co, &ctx) != SL_OK)
        return fail("creating the context");
    if (sl_sublinear(ctx, 3, SL_SCHEDULE_NONE, &net) != SL_OK ||
        sl_model_build(net, o.model, o.classes, o.res) != SL_OK ||
        sl_net_set_optimizer(net, &opt) != SL_OK) { /* before planning: its state counts */
        rc = fail("building the network");
        goto done;
    }
    int n_top = sl_net_layer_count(net);
    int sqrt_k = (int)ceil(sqrt((double)n_top));

    /* The reference plans, then the schedule under test. */
    sl_memory_report none_plan, sqrt_plan, mine;
    if ((rc = plan(net, SL_SCHEDULE_NONE, s, &none_plan)) != 0 ||
        (rc = plan(net, SL_SCHEDULE_SQRT, s, &sqrt_plan)) != 0)
        goto done;
    /* schedules relative to the plans above, else the library's texts */
    sl_schedule sc;
    uint64_t bytes = 0;
    if (!strcmp(o.schedule, "budget-half"))
        sc = SL_SCHEDULE_BUDGET(none_plan.total / 2);
    else if (!strcmp(o.schedule, "budget-sqrt"))
        sc = SL_SCHEDULE_BUDGET(sqrt_plan.total);
    else if (!strcmp(o.schedule, "budget-third") || !strcmp(o.schedule, "ops-third")) {
        uint64_t third = none_plan.total - none_plan.arena_bytes + none_plan.arena_bytes / 3;
        sc = o.schedule[0] == 'o' ? SL_SCHEDULE_BUDGET_OPS(third) : SL_SCHEDULE_BUDGET(third);
    } else if (!strcmp(o.schedule, "least")) {
        sl_memory_report tmp;
        if (sl_net_set_schedule(net, SL_SCHEDULE_BUDGET(1)) == SL_OK &&
            sl_net_memory_report(net, s, SL_MODE_TRAIN, &tmp) == SL_ERR_BUDGET) {
            const char *at = strstr(sl_last_error(), "smallest planned peak is ");
            bytes = at ? strtoull(at + strlen("smallest planned peak is "), NULL, 10) : 0;
        }
        if (!bytes) {
            rc = fail("finding the least budget");
            goto done;
        }
        sc = SL_SCHEDULE_BUDGET(bytes);
    } else if (sl_schedule_parse(o.schedule, &sc) != SL_OK)
        usage(argv[0]);
    if ((rc = plan(net, sc, s, &mine)) != 0)
        goto done;
    int recomputed = recomputed_segments(net, s);
    if (o.plan_only) {
        if (o.json)
            printf("{\"impl\":\"sublinear\",\"model\":\"%s\",\"batch\":%d,\"res\":%d,"
                   "\"schedule\":\"%s\",\"top_layers\":%d,\"sqrt_segments\":%d,"
                   "\"recomputed_segments\":%d,\"planned_total\":%llu,\"planned_arena\":%llu,"
                   "\"none_planned_total\":%llu,\"sqrt_planned_total\":%llu,"
                   "\"recompute_fraction\":%.6f,\"recompute_time_fraction\":%.6f}\n",
                   o.model, o.batch, o.res, o.schedule, n_top, sqrt_k, recomputed,
                   (unsigned long long)mine.total, (unsigned long long)mine.arena_bytes,
                   (unsigned long long)none_plan.total, (unsigned long long)sqrt_plan.total,
                   mine.recompute_fraction, mine.recompute_time_fraction);
        else
            printf("%s, batch %d, %dx%d, schedule %s: top-level layers %d (sqrt: %d segments), "
                   "recomputed segments %d, planned total %.1f MiB (arena %.1f MiB), recompute "
                   "%.1f%%; keep-everything %.1f MiB, sqrt %.1f MiB\n",
                   o.model, o.batch, o.res, o.res, o.schedule, n_top, sqrt_k, recomputed,
                   bench_mib(mine.total), bench_mib(mine.arena_bytes), 100.0 * mine.recompute_fraction,
                   bench_mib(none_plan.total), bench_mib(sqrt_plan.total));
        goto done;
    }

    size_t per = (size_t)3 * (size_t)o.res * (size_t)o.res;
    x = malloc(per * (size_t)o.batch * sizeof(float));
    labels = malloc((size_t)o.batch * sizeof(int));
    times = malloc((size_t)o.steps * sizeof(double));
    if (!x || !labels || !times) {
        fprintf(stderr, "bench_resnet: out of memory\n");
        rc = 1;
        goto done;
    }
    if (sl_dataset_synthetic(o.classes, 3, o.res, o.res, o.seed, &ds) != SL_OK) {
        rc = fail("creating the dataset");
        goto done;
    }
    /* Touch the input once so the baseline counts it. */
    if (sl_dataset_batch(ds, SL_SPLIT_TRAIN, 0, o.batch, x, labels) != SL_OK) {
        rc = fail("drawing a batch");
        goto done;
    }
    uint64_t rss_base = bench_current_rss(), peak_base = bench_peak_rss();

    if (!o.json) {
        printf("%s, batch %d, %dx%d, %d classes, schedule %s, %d threads, %d steps\n", o.model,
               o.batch, o.res, o.res, o.classes, o.schedule, o.threads, o.steps);
        printf("top-level layers %d (sqrt: %d segments), recomputed segments %d\n", n_top,
               sqrt_k, recomputed);
        printf("planned total %.1f MiB (arena %.1f MiB; keep-everything %.1f MiB, sqrt %.1f MiB)\n",
               bench_mib(mine.total), bench_mib(mine.arena_bytes), bench_mib(none_plan.total),
               bench_mib(sqrt_plan.total));
        printf("RSS before the first step: %.1f MiB (peak so far %.1f MiB)\n", bench_mib(rss_base),
               bench_mib(peak_base));
        fflush(stdout);
    }

    bench_load load;
    bench_load_start(&load);
    bench_steps run = {times, o.steps, 0.0f, 0.0f};
    for (int step = 0; step < o.steps; step++) {
        sl_step_result r;
        if (sl_dataset_batch(ds, SL_SPLIT_TRAIN, (int64_t)step * o.batch, o.batch, x, labels) !=
            SL_OK) {
            rc = fail("drawing a batch");
            goto done;
        }
        double t0 = bench_now_s();
        if (sl_net_train_step(net, x, s, labels, &r) != SL_OK) {
            rc = fail("training");
            goto done;
        }
        bench_steps_record(&run, step, bench_now_s() - t0, r.loss, o.json);
    }
    double foreign = bench_load_foreign_pct(&load);
    double warmup = times[0];
    int m;
    double median = bench_steps_median(&run, &m);

    sl_memory_report after;
    if (sl_net_memory_report(net, s, SL_MODE_TRAIN, &after) != SL_OK) {
        rc = fail("reporting memory");
        goto done;
    }
    uint64_t rss_peak = bench_peak_rss();

    if (o.json) {
        printf("{\"impl\":\"sublinear\",\"model\":\"%s\",\"batch\":%d,\"res\":%d,\"classes\":%d,"
               "\"schedule\":\"%s\",\"threads\":%d,\"steps\":%d,\"top_layers\":%d,"
               "\"sqrt_segments\":%d,\"recomputed_segments\":%d,"
               "\"planned_total\":%llu,\"planned_arena\":%llu,\"none_planned_total\":%llu,"
               "\"sqrt_planned_total\":%llu,\"budget_bytes\":%llu,"
               "\"arena_measured\":%llu,\"measured_total\":%llu,"
               "\"rss_baseline\":%llu,\"peak_rss\":%llu,\"s_per_step\":%.4f,"
               "\"warmup_s\":%.4f,\"recompute_fraction\":%.6f,"
               "\"recompute_time_fraction\":%.6f,\"first_loss\":%.5f,"
               "\"last_loss\":%.5f,\"foreign_cpu_pct\":%.1f}\n",
               o.model, o.batch, o.res, o.classes, o.schedule, o.threads, o.steps, n_top, sqrt_k,
               recomputed, (unsigned long long)mine.total, (unsigned long long)mine.arena_bytes,
               (unsigned long long)none_plan.total, (unsigned long long)sqrt_plan.total,
               (unsigned long long)sc.budget_bytes, (unsigned long long)after.arena_measured,
               (unsigned long long)after.measured_total, (unsigned long long)rss_base,
               (unsigned long long)rss_peak, median, warmup, mine.recompute_fraction,
               mine.recompute_time_fraction, run.first_loss, run.last_loss, foreign);
    } else {
        printf("planned total %.1f MiB, measured by the library %.1f MiB (arena %.1f / %.1f "
               "MiB planned)\n",
               bench_mib(mine.total), bench_mib(after.measured_total), bench_mib(after.arena_measured),
               bench_mib(mine.arena_bytes));
        printf("peak RSS %.1f MiB (baseline %.1f MiB)\n", bench_mib(rss_peak), bench_mib(rss_base));
        printf("%.3f s/step (median of %d after a %.3f s warm-up), recompute %.1f%%\n", median,
               m, warmup, 100.0 * mine.recompute_fraction);
        if (foreign >= 0.0)
            printf("other processes used %.1f%% of the cores meanwhile\n", foreign);
    }

done:
    free(times);
    free(x);
    free(labels);
    sl_dataset_free(ds);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}
