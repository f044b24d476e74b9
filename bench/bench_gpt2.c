/*
 * bench_gpt2.c — one GPT-2 training configuration: builds GPT-2 (small by
 * default, or --layers/--embd/--heads/--vocab/--context) with seeded random
 * weights, AdamW (weight decay 0, as llm.c), random token batches, and trains
 * a warm-up step plus a few measured ones at --batch B --seq T under a
 * checkpointing schedule. It reports the median step time, the planned
 * memory (activation arena, parameters, gradients, optimizer state,
 * total), the library's measured peak and the peak RSS of the process
 * (getrusage ru_maxrss): run one configuration per process.
 *
 *   bench_gpt2 [--layers N] [--embd N] [--heads N] [--vocab N] [--context N]
 *              [--batch B] [--seq T] [--schedule S] [--steps N] [--threads N]
 *              [--seed N] [--plain-attention] [--profile] [--plan-only] [--json]
 *
 * Schedules: none, sqrt, segments:K, budget:SIZE and ops:SIZE (bytes, or
 * with a KiB / MiB / GiB suffix; ops is the operator-level search), and
 * budget-arena:F / ops-arena:F: the budget that leaves F (a fraction, e.g.
 * 0.25) of keep-everything's activation arena on top of the parameters,
 * gradients and optimizer state. --steps N counts the warm-up (the first
 * step, which allocates gradients, moments and the arena): s/step is the
 * median of the steps after it (the warm-up's own time when N = 1).
 * --profile times every layer type and pass (sl_net_set_profiling) over the
 * measured steps and prints them, slowest first. gpt2.sh runs this beside
 * PyTorch (bench_gpt2_torch.py) and llm.c (bench_gpt2_llmc.py).
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sublinear.h"

typedef struct options {
    sl_gpt2_config cfg;
    const char *schedule;
    int batch, seq, steps, threads, json, plan_only, profile, seed;
} options;

_Noreturn static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--layers N] [--embd N] [--heads N] [--vocab N] [--context N]\n"
            "          [--batch B] [--seq T] [--schedule S] [--steps N] [--threads N]\n"
            "          [--seed N] [--plain-attention] [--profile] [--plan-only] [--json]\n"
            "schedules: none, sqrt, segments:K, budget:SIZE, ops:SIZE (bytes or\n"
            "           KiB/MiB/GiB), budget-arena:F, ops-arena:F (fixed memory plus\n"
            "           the fraction F of keep-everything's activation arena)\n",
            argv0);
    exit(2);
}

static int parse_int(const char *s, int min, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > 100000000)
        return -1;
    *out = (int)v;
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_gpt2: %s: %s\n", what, sl_last_error());
    return 1;
}

static int plan(sl_net *net, sl_schedule sc, sl_shape s, sl_memory_report *out)
{
    if (sl_net_set_schedule(net, sc) != SL_OK)
        return fail("setting the schedule");
    if (sl_net_memory_report(net, s, SL_MODE_TRAIN, out) != SL_OK)
        return fail("planning");
    return 0;
}

/* xorshift64*: the token ids (any seeded stream will do). */
static uint32_t next_id(uint64_t *st, int vocab)
{
    *st ^= *st >> 12;
    *st ^= *st << 25;
    *st ^= *st >> 27;
    return (uint32_t)(((*st * 2685821657736338717ull) >> 33) % (uint64_t)vocab);
}

int main(int argc, char **argv)
{
    options o;
    memset(&o, 0, sizeof o);
    o.cfg = sl_gpt2_defaults();
    o.cfg.flash = 1;
    o.schedule = "none";
    o.batch = 4;
    o.seq = 64;
    o.steps = 4;
    o.threads = 2;
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
        if (!strcmp(a, "--profile")) {
            o.profile = 1;
            continue;
        }
        if (!strcmp(a, "--plain-attention")) {
            o.cfg.flash = 0;
            continue;
        }
        if (i + 1 >= argc)
            usage(argv[0]);
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--layers"))
            bad = parse_int(v, 1, &o.cfg.layers);
        else if (!strcmp(a, "--embd"))
            bad = parse_int(v, 1, &o.cfg.embd);
        else if (!strcmp(a, "--heads"))
            bad = parse_int(v, 1, &o.cfg.heads);
        else if (!strcmp(a, "--vocab"))
            bad = parse_int(v, 2, &o.cfg.vocab);
        else if (!strcmp(a, "--context"))
            bad = parse_int(v, 1, &o.cfg.context);
        else if (!strcmp(a, "--batch"))
            bad = parse_int(v, 1, &o.batch);
        else if (!strcmp(a, "--seq"))
            bad = parse_int(v, 1, &o.seq);
        else if (!strcmp(a, "--schedule"))
            o.schedule = v;
        else if (!strcmp(a, "--steps"))
            bad = parse_int(v, 1, &o.steps);
        else if (!strcmp(a, "--threads"))
            bad = parse_int(v, 0, &o.threads);
        else if (!strcmp(a, "--seed"))
            bad = parse_int(v, 0, &o.seed);
        else
            bad = 1;
        if (bad)
            usage(argv[0]);
    }

    sl_context_options co = sl_context_defaults();
    co.threads = o.threads;
    co.seed = (uint64_t)o.seed;
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    int32_t *ids = NULL, *targets = NULL;
    double *times = NULL;
    sl_profile_entry *prof = NULL;
    int rc = 0;
    sl_shape s = {o.batch, 1, o.seq, 1};
    /* AdamW as bench_gpt2_torch.py's torch.optim.AdamW and llm.c's
     * train_gpt2 run it: lr 1e-4, betas 0.9 / 0.999, eps 1e-8, weight
     * decay 0 (llm.c's setting). */
    sl_optimizer_options opt = sl_adamw(1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f);

    if (sl_context_create(&co, &ctx) != SL_OK)
        return fail("creating the context");
    if (sl_sublinear(ctx, 1, SL_SCHEDULE_NONE, &net) != SL_OK ||
        sl_model_gpt2(net, &o.cfg) != SL_OK || sl_net_set_optimizer(net, &opt) != SL_OK) {
        rc = fail("building the network");
        goto done;
    }
    int n_params = 0;
    uint64_t param_count = 0;
    sl_net_param_count(net, &n_params);
    for (int i = 0; i < n_params; i++) {
        sl_param_info p;
        if (sl_net_param(net, i, &p) == SL_OK)
            param_count += p.count;
    }

    sl_memory_report none_plan, mine;
    if ((rc = plan(net, SL_SCHEDULE_NONE, s, &none_plan)) != 0)
        goto done;
    sl_schedule sc;
    if (!strncmp(o.schedule, "budget-arena:", 13) || !strncmp(o.schedule, "ops-arena:", 10)) {
        double f = atof(strchr(o.schedule, ':') + 1);
        if (f <= 0.0)
            usage(argv[0]);
        uint64_t fixed = none_plan.total - none_plan.arena_bytes;
        uint64_t b = fixed + (uint64_t)(f * (double)none_plan.arena_bytes);
        sc = o.schedule[0] == 'o' ? SL_SCHEDULE_BUDGET_OPS(b) : SL_SCHEDULE_BUDGET(b);
    } else if (sl_schedule_parse(o.schedule, &sc) != SL_OK)
        usage(argv[0]);
    if ((rc = plan(net, sc, s, &mine)) != 0)
        goto done;
    if (o.plan_only) {
        if (o.json)
            printf("{\"impl\":\"sublinear\",\"batch\":%d,\"seq\":%d,\"schedule\":\"%s\","
                   "\"params\":%llu,\"planned_total\":%llu,\"planned_arena\":%llu,"
                   "\"planned_params\":%llu,\"planned_grads\":%llu,\"planned_optimizer\":%llu,"
                   "\"none_planned_total\":%llu,\"none_planned_arena\":%llu,"
                   "\"budget_bytes\":%llu,\"recompute_fraction\":%.6f}\n",
                   o.batch, o.seq, o.schedule, (unsigned long long)param_count,
                   (unsigned long long)mine.total, (unsigned long long)mine.arena_bytes,
                   (unsigned long long)mine.params, (unsigned long long)mine.param_grads,
                   (unsigned long long)mine.optimizer, (unsigned long long)none_plan.total,
                   (unsigned long long)none_plan.arena_bytes,
                   (unsigned long long)sc.budget_bytes, mine.recompute_fraction);
        else
            printf("GPT-2 L=%d C=%d heads=%d V=%d context=%d, B=%d T=%d, schedule %s: %llu "
                   "parameters; planned total %.1f MiB (activation arena %.1f, params %.1f, "
                   "grads %.1f, optimizer %.1f), recompute %.1f%%; keep-everything %.1f MiB "
                   "(arena %.1f)\n",
                   o.cfg.layers, o.cfg.embd, o.cfg.heads, o.cfg.vocab, o.cfg.context, o.batch,
                   o.seq, o.schedule, (unsigned long long)param_count, bench_mib(mine.total),
                   bench_mib(mine.arena_bytes), bench_mib(mine.params), bench_mib(mine.param_grads),
                   bench_mib(mine.optimizer), 100.0 * mine.recompute_fraction, bench_mib(none_plan.total),
                   bench_mib(none_plan.arena_bytes));
        goto done;
    }

    size_t n = (size_t)o.batch * (size_t)o.seq;
    ids = malloc(n * sizeof *ids);
    targets = malloc(n * sizeof *targets);
    times = malloc((size_t)o.steps * sizeof *times);
    if (!ids || !targets || !times) {
        fprintf(stderr, "bench_gpt2: out of memory\n");
        rc = 1;
        goto done;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(o.seed + 1);
    uint64_t rss_base = bench_current_rss();
    if (!o.json) {
        printf("GPT-2 L=%d C=%d heads=%d V=%d context=%d (%llu parameters), B=%d T=%d, "
               "schedule %s, %s attention, %d threads, %d steps\n",
               o.cfg.layers, o.cfg.embd, o.cfg.heads, o.cfg.vocab, o.cfg.context,
               (unsigned long long)param_count, o.batch, o.seq, o.schedule,
               o.cfg.flash ? "flash" : "plain", o.threads, o.steps);
        printf("planned total %.1f MiB: activation arena %.1f, params %.1f, grads %.1f, "
               "optimizer %.1f; recompute %.1f%% (keep-everything %.1f MiB, arena %.1f)\n",
               bench_mib(mine.total), bench_mib(mine.arena_bytes), bench_mib(mine.params), bench_mib(mine.param_grads),
               bench_mib(mine.optimizer), 100.0 * mine.recompute_fraction, bench_mib(none_plan.total),
               bench_mib(none_plan.arena_bytes));
        printf("RSS before the first step: %.1f MiB\n", bench_mib(rss_base));
        fflush(stdout);
    }

    bench_load load;
    bench_load_start(&load);
    bench_steps run = {times, o.steps, 0.0f, 0.0f};
    for (int step = 0; step < o.steps; step++) {
        for (size_t i = 0; i < n; i++) {
            ids[i] = (int32_t)next_id(&rng, o.cfg.vocab);
            targets[i] = (int32_t)next_id(&rng, o.cfg.vocab);
        }
        if (o.profile && step == 1 && sl_net_set_profiling(net, 1) != SL_OK) {
            rc = fail("profiling");
            goto done;
        }
        sl_step_result r;
        double t0 = bench_now_s();
        if (sl_net_train_step_tokens(net, ids, targets, o.batch, o.seq, &r) != SL_OK) {
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

    int n_prof = 0;
    if (o.profile && o.steps > 1) {
        if (sl_net_profile(net, NULL, 0, &n_prof, 0) != SL_OK ||
            !(prof = calloc((size_t)n_prof + 1, sizeof *prof)) ||
            sl_net_profile(net, prof, n_prof, &n_prof, 0) != SL_OK) {
            rc = fail("reading the profile");
            goto done;
        }
    }

    if (o.json) {
        printf("{\"impl\":\"sublinear\",\"layers\":%d,\"embd\":%d,\"heads\":%d,\"vocab\":%d,"
               "\"context\":%d,\"params\":%llu,\"batch\":%d,\"seq\":%d,\"schedule\":\"%s\","
               "\"threads\":%d,\"steps\":%d,\"planned_total\":%llu,\"planned_arena\":%llu,"
               "\"planned_params\":%llu,\"planned_grads\":%llu,\"planned_optimizer\":%llu,"
               "\"none_planned_total\":%llu,\"none_planned_arena\":%llu,\"budget_bytes\":%llu,"
               "\"arena_measured\":%llu,\"measured_total\":%llu,\"rss_baseline\":%llu,"
               "\"peak_rss\":%llu,\"s_per_step\":%.4f,\"warmup_s\":%.4f,"
               "\"recompute_fraction\":%.6f,\"first_loss\":%.5f,\"last_loss\":%.5f,"
               "\"foreign_cpu_pct\":%.1f,\"profile\":[",
               o.cfg.layers, o.cfg.embd, o.cfg.heads, o.cfg.vocab, o.cfg.context,
               (unsigned long long)param_count, o.batch, o.seq, o.schedule, o.threads, o.steps,
               (unsigned long long)mine.total, (unsigned long long)mine.arena_bytes,
               (unsigned long long)mine.params, (unsigned long long)mine.param_grads,
               (unsigned long long)mine.optimizer, (unsigned long long)none_plan.total,
               (unsigned long long)none_plan.arena_bytes, (unsigned long long)sc.budget_bytes,
               (unsigned long long)after.arena_measured, (unsigned long long)after.measured_total,
               (unsigned long long)rss_base, (unsigned long long)rss_peak, median, warmup,
               mine.recompute_fraction, run.first_loss, run.last_loss, foreign);
        for (int i = 0; i < n_prof; i++)
            printf("%s{\"layer\":\"%s\",\"pass\":\"%s\",\"calls\":%lld,\"s_per_step\":%.4f}",
                   i ? "," : "", prof[i].layer_type, prof[i].pass, (long long)prof[i].calls,
                   prof[i].seconds / m);
        printf("]}\n");
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
        for (int i = 0; i < n_prof; i++)
            printf("  profile: %-24s %-10s %.3f s/step (%lld calls)\n", prof[i].layer_type,
                   prof[i].pass, prof[i].seconds / m, (long long)prof[i].calls);
    }

done:
    free(prof);
    free(times);
    free(ids);
    free(targets);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}
