/*
 * bench_resnet.c — memory against speed of one checkpointing schedule:
 * trains an ImageNet ResNet (ResNet-152 by default, batch 16, 224x224, the
 * built-in synthetic dataset, SGD with momentum 0.9) for a few steps and
 * reports the planned peak, the peak RSS of this process, seconds per step
 * and the recomputed share of the FLOPs.
 *
 *   bench_resnet [--model NAME] [--batch N] [--res N] [--classes N]
 *                [--schedule S] [--steps N] [--threads N] [--seed N]
 *                [--precision f32|bf16] [--json] [--plan-only]
 *
 * --precision bf16 stores the activations in bf16 (sl_net_set_precision);
 * on a CPU with bf16 dot products the convolutions then compute in bf16
 * through oneDNN (bench_resnet_torch.py --autocast is PyTorch's peer).
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

static const char BENCH[] = "bench_resnet";

typedef struct options {
    const char *model;
    const char *schedule;
    const char *precision; /* "f32" or "bf16" */
    int batch, res, classes, steps, threads, json, plan_only, seed;
} options;

/* The plans a run reports: the references (keep-everything, sqrt) and the
 * schedule's under test, with the network's top-level layer count, sqrt's
 * segment count and the segments the schedule re-forwards. */
typedef struct plans {
    sl_schedule sc;
    sl_memory_report none, sqrt, mine;
    int n_top, sqrt_k, recomputed;
} plans;

_Noreturn static void usage(const char *argv0)
{
    bench_usage(argv0,
                "[--model NAME] [--batch N] [--res N] [--classes N] [--schedule S]\n"
                "          [--steps N] [--threads N] [--seed N] [--precision f32|bf16]\n"
                "          [--json] [--plan-only]\n"
                "schedules: none, sqrt, segments:K, budget:SIZE, ops:SIZE (bytes or\n"
                "           KiB/MiB/GiB), budget-half (half of keep-everything's planned\n"
                "           total), budget-sqrt (sqrt's planned total), budget-third and\n"
                "           ops-third (a third of keep-everything's activations), least\n");
}

#define MAX_COUNT 1000000

/* The defaults (ResNet-152, batch 16, 224x224, 1000 classes, 4 steps on 2
 * threads), then the command line; a bad one prints the usage and exits. */
static void parse_options(int argc, char **argv, options *o)
{
    *o = (options){"resnet152", "none", "f32", 16, 224, 1000, 4, 2, 0, 0, 0};
    const bench_opt opts[] = {
        BENCH_OPT_FLAG("--json", &o->json, 1),
        BENCH_OPT_FLAG("--plan-only", &o->plan_only, 1),
        BENCH_OPT("--model", BENCH_STRING, &o->model),
        BENCH_OPT("--schedule", BENCH_STRING, &o->schedule),
        BENCH_OPT("--precision", BENCH_STRING, &o->precision),
        BENCH_OPT_INT("--batch", &o->batch, 1, MAX_COUNT),
        BENCH_OPT_INT("--res", &o->res, 32, MAX_COUNT),
        BENCH_OPT_INT("--classes", &o->classes, 2, MAX_COUNT),
        BENCH_OPT_INT("--steps", &o->steps, 1, MAX_COUNT),
        BENCH_OPT_INT("--threads", &o->threads, 0, MAX_COUNT),
        BENCH_OPT_INT("--seed", &o->seed, 0, MAX_COUNT),
        BENCH_OPT_END,
    };
    if (bench_parse_args(argc, argv, opts) != 0 ||
        (strcmp(o->precision, "f32") != 0 && strcmp(o->precision, "bf16") != 0))
        usage(argv[0]);
}

/* The model with SGD (momentum 0.9, weight decay 5e-4), the optimizer set
 * before planning: its state counts. */
static int build(sl_context *ctx, const options *o, sl_net **net)
{
    sl_optimizer_options opt = sl_optimizer_sgd(0.01f, 0.9f, 5e-4f, 0);
    if (sl_sublinear(ctx, 3, SL_SCHEDULE_NONE, net) != SL_OK ||
        sl_model_build(*net, o->model, o->classes, o->res) != SL_OK ||
        sl_net_set_optimizer(*net, &opt) != SL_OK ||
        sl_net_set_precision(*net, strcmp(o->precision, "bf16") == 0 ? SL_PRECISION_BF16
                                                                     : SL_PRECISION_F32) != SL_OK)
        return bench_fail(BENCH, "building the network");
    return 0;
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

/* The schedule under test: those relative to the reference plans, else the
 * library's texts (a bad one prints the usage and exits). */
static int choose_schedule(sl_net *net, sl_shape s, const char *name, const char *argv0,
                           plans *p)
{
    if (!strcmp(name, "budget-half"))
        p->sc = SL_SCHEDULE_BUDGET(p->none.total / 2);
    else if (!strcmp(name, "budget-sqrt"))
        p->sc = SL_SCHEDULE_BUDGET(p->sqrt.total);
    else if (!strcmp(name, "budget-third") || !strcmp(name, "ops-third")) {
        uint64_t third = p->none.total - p->none.arena_bytes + p->none.arena_bytes / 3;
        p->sc = name[0] == 'o' ? SL_SCHEDULE_BUDGET_OPS(third) : SL_SCHEDULE_BUDGET(third);
    } else if (!strcmp(name, "least")) {
        uint64_t bytes = bench_least_budget(net, s);
        if (!bytes)
            return bench_fail(BENCH, "finding the least budget");
        p->sc = SL_SCHEDULE_BUDGET_OPS(bytes); /* see bench_least_budget */
    } else if (sl_schedule_parse(name, &p->sc) != SL_OK)
        usage(argv0);
    return 0;
}

/* The reference plans, then the schedule under test. */
static int plan_schedule(sl_net *net, sl_shape s, const options *o, const char *argv0, plans *p)
{
    int rc;
    p->n_top = sl_net_layer_count(net);
    p->sqrt_k = (int)ceil(sqrt((double)p->n_top));
    if ((rc = bench_plan(BENCH, net, SL_SCHEDULE_NONE, s, &p->none)) != 0 ||
        (rc = bench_plan(BENCH, net, SL_SCHEDULE_SQRT, s, &p->sqrt)) != 0 ||
        (rc = choose_schedule(net, s, o->schedule, argv0, p)) != 0 ||
        (rc = bench_plan(BENCH, net, p->sc, s, &p->mine)) != 0)
        return rc;
    p->recomputed = recomputed_segments(net, s);
    return 0;
}

/* --plan-only's one line, JSON or text. */
static void print_plan(const options *o, const plans *p)
{
    const sl_memory_report *m = &p->mine;
    if (o->json)
        printf("{\"impl\":\"sublinear\",\"model\":\"%s\",\"batch\":%d,\"res\":%d,"
               "\"precision\":\"%s\",\"schedule\":\"%s\",\"top_layers\":%d,\"sqrt_segments\":%d,"
               "\"recomputed_segments\":%d,\"planned_total\":%llu,\"planned_arena\":%llu,"
               "\"none_planned_total\":%llu,\"sqrt_planned_total\":%llu,"
               "\"recompute_fraction\":%.6f,\"recompute_time_fraction\":%.6f}\n",
               o->model, o->batch, o->res, o->precision, o->schedule, p->n_top, p->sqrt_k,
               p->recomputed, (unsigned long long)m->total, (unsigned long long)m->arena_bytes,
               (unsigned long long)p->none.total, (unsigned long long)p->sqrt.total,
               m->recompute_fraction, m->recompute_time_fraction);
    else
        printf("%s, batch %d, %dx%d, schedule %s: top-level layers %d (sqrt: %d segments), "
               "recomputed segments %d, planned total %.1f MiB (arena %.1f MiB), recompute "
               "%.1f%%; keep-everything %.1f MiB, sqrt %.1f MiB\n",
               o->model, o->batch, o->res, o->res, o->schedule, p->n_top, p->sqrt_k,
               p->recomputed, bench_mib(m->total), bench_mib(m->arena_bytes),
               100.0 * m->recompute_fraction, bench_mib(p->none.total), bench_mib(p->sqrt.total));
}

/* The text run's opening lines: the configuration, the plan, the RSS. */
static void print_header(const options *o, const plans *p, uint64_t rss_base, uint64_t peak_base)
{
    printf("%s, batch %d, %dx%d, %d classes, schedule %s, %s, %d threads, %d steps\n", o->model,
           o->batch, o->res, o->res, o->classes, o->schedule, o->precision, o->threads, o->steps);
    printf("top-level layers %d (sqrt: %d segments), recomputed segments %d\n", p->n_top,
           p->sqrt_k, p->recomputed);
    printf("planned total %.1f MiB (arena %.1f MiB; keep-everything %.1f MiB, sqrt %.1f MiB)\n",
           bench_mib(p->mine.total), bench_mib(p->mine.arena_bytes), bench_mib(p->none.total),
           bench_mib(p->sqrt.total));
    printf("RSS before the first step: %.1f MiB (peak so far %.1f MiB)\n", bench_mib(rss_base),
           bench_mib(peak_base));
    fflush(stdout);
}

/* The synthetic dataset's batches of the measured steps. */
typedef struct image_source {
    sl_net *net;
    sl_dataset *ds;
    float *x;
    int *labels;
    sl_shape s;
} image_source;

/* bench_step_fn: the step's batch of the dataset, in order. */
static int image_step(void *arg, int step, double *seconds, float *loss)
{
    image_source *b = arg;
    int batch = b->s.n;
    sl_step_result r;
    if (sl_dataset_batch(b->ds, SL_SPLIT_TRAIN, (int64_t)step * batch, batch, b->x, b->labels) !=
        SL_OK)
        return bench_fail(BENCH, "drawing a batch");
    double t0 = bench_now_s();
    if (sl_net_train_step(b->net, b->x, b->s, b->labels, &r) != SL_OK)
        return bench_fail(BENCH, "training");
    *seconds = bench_now_s() - t0;
    *loss = r.loss;
    return 0;
}

/* The inputs of a run: one batch's buffers, the step times' array and the
 * dataset, with the first batch drawn so that the RSS baseline counts it. */
static int prepare_inputs(const options *o, image_source *b, double **times)
{
    size_t per = (size_t)3 * (size_t)o->res * (size_t)o->res;
    b->x = malloc(per * (size_t)o->batch * sizeof(float));
    b->labels = malloc((size_t)o->batch * sizeof(int));
    *times = malloc((size_t)o->steps * sizeof(double));
    if (!b->x || !b->labels || !*times) {
        fprintf(stderr, "bench_resnet: out of memory\n");
        return 1;
    }
    if (sl_dataset_synthetic(o->classes, 3, o->res, o->res, (uint64_t)o->seed, &b->ds) != SL_OK)
        return bench_fail(BENCH, "creating the dataset");
    if (sl_dataset_batch(b->ds, SL_SPLIT_TRAIN, 0, o->batch, b->x, b->labels) != SL_OK)
        return bench_fail(BENCH, "drawing a batch");
    return 0;
}

static void print_json(const options *o, const plans *p, const bench_run *r)
{
    const sl_memory_report *m = &p->mine;
    printf("{\"impl\":\"sublinear\",\"model\":\"%s\",\"batch\":%d,\"res\":%d,\"classes\":%d,"
           "\"precision\":\"%s\",\"schedule\":\"%s\",\"threads\":%d,\"steps\":%d,\"top_layers\":%d,"
           "\"sqrt_segments\":%d,\"recomputed_segments\":%d,"
           "\"planned_total\":%llu,\"planned_arena\":%llu,\"none_planned_total\":%llu,"
           "\"sqrt_planned_total\":%llu,\"budget_bytes\":%llu,",
           o->model, o->batch, o->res, o->classes, o->precision, o->schedule, o->threads, o->steps,
           p->n_top,
           p->sqrt_k, p->recomputed, (unsigned long long)m->total,
           (unsigned long long)m->arena_bytes, (unsigned long long)p->none.total,
           (unsigned long long)p->sqrt.total, (unsigned long long)p->sc.budget_bytes);
    bench_print_run_json(r);
    printf("\"recompute_fraction\":%.6f,\"recompute_time_fraction\":%.6f,\"first_loss\":%.5f,"
           "\"last_loss\":%.5f,\"foreign_cpu_pct\":%.1f}\n",
           m->recompute_fraction, m->recompute_time_fraction, r->steps.first_loss,
           r->steps.last_loss, r->foreign_pct);
}

int main(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    sl_context *ctx = NULL;
    sl_shape s = sl_shape_nchw(o.batch, 3, o.res, o.res);
    image_source src = {NULL, NULL, NULL, NULL, s};
    bench_run run = {{NULL, o.steps, 0.0f, 0.0f}, 0.0, 0.0, 0.0, 0, 0, 0, {0}};
    plans p;
    int rc;

    if ((rc = bench_context(BENCH, o.threads, (uint64_t)o.seed, &ctx)) != 0)
        return rc;
    if ((rc = build(ctx, &o, &src.net)) != 0 ||
        (rc = plan_schedule(src.net, s, &o, argv[0], &p)) != 0)
        goto done;
    if (o.plan_only) {
        print_plan(&o, &p);
        goto done;
    }
    if ((rc = prepare_inputs(&o, &src, &run.steps.times)) != 0)
        goto done;
    run.rss_base = bench_current_rss();
    uint64_t peak_base = bench_peak_rss();
    if (!o.json)
        print_header(&o, &p, run.rss_base, peak_base);
    if ((rc = bench_measure(BENCH, src.net, s, image_step, &src, o.json, &run)) != 0)
        goto done;
    if (o.json)
        print_json(&o, &p, &run);
    else
        bench_print_run_text(&p.mine, &run);

done:
    free(run.steps.times);
    free(src.x);
    free(src.labels);
    sl_dataset_free(src.ds);
    sl_net_free(src.net);
    sl_context_free(ctx);
    return rc;
}
