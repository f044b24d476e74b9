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

static const char BENCH[] = "bench_gpt2";

typedef struct options {
    sl_gpt2_config cfg;
    const char *schedule;
    int batch, seq, steps, threads, json, plan_only, profile, seed;
} options;

/* The plans a run reports: keep-everything's (the reference of the -arena
 * schedules) and the schedule's under test, with the parameter count. */
typedef struct plans {
    sl_schedule sc;
    sl_memory_report none, mine;
    uint64_t param_count;
} plans;

_Noreturn static void usage(const char *argv0)
{
    bench_usage(argv0,
                "[--layers N] [--embd N] [--heads N] [--vocab N] [--context N]\n"
                "          [--batch B] [--seq T] [--schedule S] [--steps N] [--threads N]\n"
                "          [--seed N] [--plain-attention] [--profile] [--plan-only] [--json]\n"
                "schedules: none, sqrt, segments:K, budget:SIZE, ops:SIZE (bytes or\n"
                "           KiB/MiB/GiB), budget-arena:F, ops-arena:F (fixed memory plus\n"
                "           the fraction F of keep-everything's activation arena)\n");
}

#define MAX_COUNT 100000000

/* The defaults (GPT-2 small, flash attention, B=4 T=64, 4 steps on 2
 * threads), then the command line; a bad one prints the usage and exits. */
static void parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->cfg = sl_gpt2_defaults();
    o->cfg.flash = 1;
    o->schedule = "none";
    o->batch = 4;
    o->seq = 64;
    o->steps = 4;
    o->threads = 2;
    const bench_opt opts[] = {
        BENCH_OPT_FLAG("--json", &o->json, 1),
        BENCH_OPT_FLAG("--plan-only", &o->plan_only, 1),
        BENCH_OPT_FLAG("--profile", &o->profile, 1),
        BENCH_OPT_FLAG("--plain-attention", &o->cfg.flash, 0),
        BENCH_OPT_INT("--layers", &o->cfg.layers, 1, MAX_COUNT),
        BENCH_OPT_INT("--embd", &o->cfg.embd, 1, MAX_COUNT),
        BENCH_OPT_INT("--heads", &o->cfg.heads, 1, MAX_COUNT),
        BENCH_OPT_INT("--vocab", &o->cfg.vocab, 2, MAX_COUNT),
        BENCH_OPT_INT("--context", &o->cfg.context, 1, MAX_COUNT),
        BENCH_OPT_INT("--batch", &o->batch, 1, MAX_COUNT),
        BENCH_OPT_INT("--seq", &o->seq, 1, MAX_COUNT),
        BENCH_OPT("--schedule", BENCH_STRING, &o->schedule),
        BENCH_OPT_INT("--steps", &o->steps, 1, MAX_COUNT),
        BENCH_OPT_INT("--threads", &o->threads, 0, MAX_COUNT),
        BENCH_OPT_INT("--seed", &o->seed, 0, MAX_COUNT),
        BENCH_OPT_END,
    };
    if (bench_parse_args(argc, argv, opts) != 0)
        usage(argv[0]);
}

/* GPT-2 with AdamW as bench_gpt2_torch.py's torch.optim.AdamW and llm.c's
 * train_gpt2 run it: lr 1e-4, betas 0.9 / 0.999, eps 1e-8, weight decay 0
 * (llm.c's setting). *param_count gets its parameters' total size. */
static int build(sl_context *ctx, const options *o, sl_net **net, uint64_t *param_count)
{
    sl_optimizer_options opt = sl_optimizer_adamw(1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f);
    if (sl_sublinear(ctx, 1, SL_SCHEDULE_NONE, net) != SL_OK ||
        sl_model_gpt2(*net, &o->cfg) != SL_OK || sl_net_set_optimizer(*net, &opt) != SL_OK)
        return bench_fail(BENCH, "building the network");
    int n_params = 0;
    *param_count = 0;
    sl_net_param_count(*net, &n_params);
    for (int i = 0; i < n_params; i++) {
        sl_param_info p;
        if (sl_net_param(*net, i, &p) == SL_OK)
            *param_count += p.count;
    }
    return 0;
}

/* Plans keep-everything, reads the schedule (the -arena ones relative to
 * that plan; a bad one prints the usage and exits) and plans it. */
static int plan_schedule(sl_net *net, sl_shape s, const options *o, const char *argv0, plans *p)
{
    int rc = bench_plan(BENCH, net, SL_SCHEDULE_NONE, s, &p->none);
    if (rc != 0)
        return rc;
    if (!strncmp(o->schedule, "budget-arena:", 13) || !strncmp(o->schedule, "ops-arena:", 10)) {
        double f = atof(strchr(o->schedule, ':') + 1);
        if (f <= 0.0)
            usage(argv0);
        uint64_t fixed = p->none.total - p->none.arena_bytes;
        uint64_t b = fixed + (uint64_t)(f * (double)p->none.arena_bytes);
        p->sc = o->schedule[0] == 'o' ? SL_SCHEDULE_BUDGET_OPS(b) : SL_SCHEDULE_BUDGET(b);
    } else if (sl_schedule_parse(o->schedule, &p->sc) != SL_OK)
        usage(argv0);
    return bench_plan(BENCH, net, p->sc, s, &p->mine);
}

/* --plan-only's one line, JSON or text. */
static void print_plan(const options *o, const plans *p)
{
    const sl_memory_report *m = &p->mine, *none = &p->none;
    if (o->json)
        printf("{\"impl\":\"sublinear\",\"batch\":%d,\"seq\":%d,\"schedule\":\"%s\","
               "\"params\":%llu,\"planned_total\":%llu,\"planned_arena\":%llu,"
               "\"planned_params\":%llu,\"planned_grads\":%llu,\"planned_optimizer\":%llu,"
               "\"none_planned_total\":%llu,\"none_planned_arena\":%llu,"
               "\"budget_bytes\":%llu,\"recompute_fraction\":%.6f}\n",
               o->batch, o->seq, o->schedule, (unsigned long long)p->param_count,
               (unsigned long long)m->total, (unsigned long long)m->arena_bytes,
               (unsigned long long)m->params, (unsigned long long)m->param_grads,
               (unsigned long long)m->optimizer, (unsigned long long)none->total,
               (unsigned long long)none->arena_bytes, (unsigned long long)p->sc.budget_bytes,
               m->recompute_fraction);
    else
        printf("GPT-2 L=%d C=%d heads=%d V=%d context=%d, B=%d T=%d, schedule %s: %llu "
               "parameters; planned total %.1f MiB (activation arena %.1f, params %.1f, "
               "grads %.1f, optimizer %.1f), recompute %.1f%%; keep-everything %.1f MiB "
               "(arena %.1f)\n",
               o->cfg.layers, o->cfg.embd, o->cfg.heads, o->cfg.vocab, o->cfg.context, o->batch,
               o->seq, o->schedule, (unsigned long long)p->param_count, bench_mib(m->total),
               bench_mib(m->arena_bytes), bench_mib(m->params), bench_mib(m->param_grads),
               bench_mib(m->optimizer), 100.0 * m->recompute_fraction, bench_mib(none->total),
               bench_mib(none->arena_bytes));
}

/* The text run's opening lines: the configuration, the plan, the RSS. */
static void print_header(const options *o, const plans *p, uint64_t rss_base)
{
    const sl_memory_report *m = &p->mine;
    printf("GPT-2 L=%d C=%d heads=%d V=%d context=%d (%llu parameters), B=%d T=%d, "
           "schedule %s, %s attention, %d threads, %d steps\n",
           o->cfg.layers, o->cfg.embd, o->cfg.heads, o->cfg.vocab, o->cfg.context,
           (unsigned long long)p->param_count, o->batch, o->seq, o->schedule,
           o->cfg.flash ? "flash" : "plain", o->threads, o->steps);
    printf("planned total %.1f MiB: activation arena %.1f, params %.1f, grads %.1f, "
           "optimizer %.1f; recompute %.1f%% (keep-everything %.1f MiB, arena %.1f)\n",
           bench_mib(m->total), bench_mib(m->arena_bytes), bench_mib(m->params),
           bench_mib(m->param_grads), bench_mib(m->optimizer), 100.0 * m->recompute_fraction,
           bench_mib(p->none.total), bench_mib(p->none.arena_bytes));
    printf("RSS before the first step: %.1f MiB\n", bench_mib(rss_base));
    fflush(stdout);
}

/* The random token batches of the measured steps. */
typedef struct token_source {
    sl_net *net;
    int32_t *ids, *targets;
    int batch, seq, vocab, profile;
    uint64_t rng;
} token_source;

/* xorshift64*: the token ids (any seeded stream will do). */
static uint32_t next_id(uint64_t *st, int vocab)
{
    *st ^= *st >> 12;
    *st ^= *st << 25;
    *st ^= *st >> 27;
    return (uint32_t)(((*st * 2685821657736338717ull) >> 33) % (uint64_t)vocab);
}

/* bench_step_fn: fresh tokens, profiling from the first measured step on. */
static int token_step(void *arg, int step, double *seconds, float *loss)
{
    token_source *t = arg;
    size_t n = (size_t)t->batch * (size_t)t->seq;
    for (size_t i = 0; i < n; i++) {
        t->ids[i] = (int32_t)next_id(&t->rng, t->vocab);
        t->targets[i] = (int32_t)next_id(&t->rng, t->vocab);
    }
    if (t->profile && step == 1 && sl_net_set_profiling(t->net, 1) != SL_OK)
        return bench_fail(BENCH, "profiling");
    sl_step_result r;
    double t0 = bench_now_s();
    if (sl_net_train_step_tokens(t->net, t->ids, t->targets, t->batch, t->seq, &r) != SL_OK)
        return bench_fail(BENCH, "training");
    *seconds = bench_now_s() - t0;
    *loss = r.loss;
    return 0;
}

/* The token buffers, the step times' array and the seeded stream. */
static int prepare_tokens(const options *o, token_source *t, double **times)
{
    size_t n = (size_t)o->batch * (size_t)o->seq;
    t->ids = malloc(n * sizeof *t->ids);
    t->targets = malloc(n * sizeof *t->targets);
    *times = malloc((size_t)o->steps * sizeof **times);
    if (!t->ids || !t->targets || !*times) {
        fprintf(stderr, "bench_gpt2: out of memory\n");
        return 1;
    }
    t->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(o->seed + 1);
    return 0;
}

/* The profile of the measured steps (none unless --profile and 2+ steps):
 * *prof gets *n entries (the caller frees it). */
static int read_profile(sl_net *net, const options *o, sl_profile_entry **prof, int *n)
{
    *n = 0;
    if (!o->profile || o->steps < 2)
        return 0;
    if (sl_net_profile(net, NULL, 0, n, 0) != SL_OK ||
        !(*prof = calloc((size_t)*n + 1, sizeof **prof)) ||
        sl_net_profile(net, *prof, *n, n, 0) != SL_OK)
        return bench_fail(BENCH, "reading the profile");
    return 0;
}

static void print_json(const options *o, const plans *p, const bench_run *r,
                       const sl_profile_entry *prof, int n_prof)
{
    const sl_memory_report *m = &p->mine;
    printf("{\"impl\":\"sublinear\",\"layers\":%d,\"embd\":%d,\"heads\":%d,\"vocab\":%d,"
           "\"context\":%d,\"params\":%llu,\"batch\":%d,\"seq\":%d,\"schedule\":\"%s\","
           "\"threads\":%d,\"steps\":%d,\"planned_total\":%llu,\"planned_arena\":%llu,"
           "\"planned_params\":%llu,\"planned_grads\":%llu,\"planned_optimizer\":%llu,"
           "\"none_planned_total\":%llu,\"none_planned_arena\":%llu,\"budget_bytes\":%llu,",
           o->cfg.layers, o->cfg.embd, o->cfg.heads, o->cfg.vocab, o->cfg.context,
           (unsigned long long)p->param_count, o->batch, o->seq, o->schedule, o->threads,
           o->steps, (unsigned long long)m->total, (unsigned long long)m->arena_bytes,
           (unsigned long long)m->params, (unsigned long long)m->param_grads,
           (unsigned long long)m->optimizer, (unsigned long long)p->none.total,
           (unsigned long long)p->none.arena_bytes, (unsigned long long)p->sc.budget_bytes);
    bench_print_run_json(r);
    printf("\"recompute_fraction\":%.6f,\"first_loss\":%.5f,\"last_loss\":%.5f,"
           "\"foreign_cpu_pct\":%.1f,\"profile\":[",
           m->recompute_fraction, r->steps.first_loss, r->steps.last_loss, r->foreign_pct);
    for (int i = 0; i < n_prof; i++)
        printf("%s{\"layer\":\"%s\",\"pass\":\"%s\",\"calls\":%lld,\"s_per_step\":%.4f}",
               i ? "," : "", prof[i].layer_type, prof[i].pass, (long long)prof[i].calls,
               prof[i].seconds / r->counted);
    printf("]}\n");
}

static void print_text(const plans *p, const bench_run *r, const sl_profile_entry *prof,
                       int n_prof)
{
    bench_print_run_text(&p->mine, r);
    for (int i = 0; i < n_prof; i++)
        printf("  profile: %-24s %-10s %.3f s/step (%lld calls)\n", prof[i].layer_type,
               prof[i].pass, prof[i].seconds / r->counted, (long long)prof[i].calls);
}

int main(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    sl_profile_entry *prof = NULL;
    sl_shape s = {o.batch, 1, o.seq, 1};
    token_source src = {NULL, NULL, NULL, o.batch, o.seq, o.cfg.vocab, o.profile, 0};
    bench_run run = {{NULL, o.steps, 0.0f, 0.0f}, 0.0, 0.0, 0.0, 0, 0, 0, {0}};
    plans p;
    int rc, n_prof = 0;

    if ((rc = bench_context(BENCH, o.threads, (uint64_t)o.seed, &ctx)) != 0)
        return rc;
    if ((rc = build(ctx, &o, &net, &p.param_count)) != 0 ||
        (rc = plan_schedule(net, s, &o, argv[0], &p)) != 0)
        goto done;
    if (o.plan_only) {
        print_plan(&o, &p);
        goto done;
    }
    src.net = net;
    if ((rc = prepare_tokens(&o, &src, &run.steps.times)) != 0)
        goto done;
    run.rss_base = bench_current_rss();
    if (!o.json)
        print_header(&o, &p, run.rss_base);
    if ((rc = bench_measure(BENCH, net, s, token_step, &src, o.json, &run)) != 0 ||
        (rc = read_profile(net, &o, &prof, &n_prof)) != 0)
        goto done;
    if (o.json)
        print_json(&o, &p, &run, prof, n_prof);
    else
        print_text(&p, &run, prof, n_prof);

done:
    free(prof);
    free(run.steps.times);
    free(src.ids);
    free(src.targets);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}
