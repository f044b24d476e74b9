/*
 * bench_gpt2.c — one GPT-2 training configuration: builds GPT-2 (small by
 * default, or --layers/--embd/--heads/--vocab/--context) with seeded random
 * weights, AdamW (weight decay 0, as llm.c), random token batches, and trains
 * a warm-up step plus a few measured ones at --batch B --seq T under a
 * checkpointing schedule, on the CPU or (--device cuda) a GPU. It reports
 * the median step time with the fastest and slowest step, the planned
 * memory (activation arena, parameters, gradients, optimizer state,
 * total), the library's measured peak and the peak RSS of the process
 * (getrusage ru_maxrss); on a GPU also the device's memory, measured as
 * bench_gpu.c and bench_gpu_torch.py measure it for ResNet (the drop of
 * cudaMemGetInfo's free bytes since the context was made, the largest
 * after any measured step), the device's name and the cuDNN / cuBLAS
 * versions the process loaded. Run one configuration per process.
 *
 *   bench_gpt2 [--layers N] [--embd N] [--heads N] [--vocab N] [--context N]
 *              [--batch B] [--seq T] [--schedule S] [--steps N] [--threads N]
 *              [--seed N] [--plain-attention] [--profile] [--profile-steps N]
 *              [--device cpu|cuda] [--gpu N] [--tf32] [--head-chunk ROWS]
 *              [--precision f32|bf16] [--plan-only] [--json]
 *
 * Schedules: none, sqrt, segments:K, budget:SIZE and ops:SIZE (bytes, or
 * with a KiB / MiB / GiB suffix; ops is the operator-level search),
 * budget-arena:F / ops-arena:F: the budget that leaves F (a fraction, e.g.
 * 0.25) of keep-everything's activation arena on top of the parameters,
 * gradients and optimizer state, least: the budget search at the least
 * planned peak any schedule reaches, and least:F the same at that peak
 * times 1 + F (the least peak can cost far more recomputation than a
 * little above it: GPT-2 small B=8 T=1024 in bf16 recomputes 124% of a
 * step's FLOPs at 2179 MiB planned, 36% at 2203 MiB, 28% at 2227 MiB). --steps N counts the warm-up (the
 * first step, which allocates gradients, moments and the arena): the step
 * time is the median of the steps after it (the warm-up's own time when
 * N = 1). --profile runs --profile-steps more steps (1) after the measured
 * ones with every layer type and pass timed (sl_net_set_profiling: each
 * program step waited for, so the measured steps are not slowed) and
 * prints them, slowest first. --device cuda without a usable GPU (or a
 * build without CUDA) stops at once with the library's reason; --tf32
 * lets its GEMMs and convolutions use TF32 tensor cores; --precision bf16
 * stores activations in bf16 (sl_net_set_precision); --dropout P trains
 * with GPT-2's dropout rates at P (0 by default, as llm.c trains; GPT-2
 * used 0.1) and the JSON line says so. gpt2.sh runs this
 * beside PyTorch (bench_gpt2_torch.py) and llm.c (bench_gpt2_llmc.py) on
 * the CPU, gpu_gpt2.py (gpu.sh's gpt2 phase) on a GPU.
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
    const char *schedule, *device;
    int batch, seq, steps, threads, json, plan_only, profile, profile_steps, seed;
    int cuda, gpu, tf32;
    int head_chunk; /* the LM head's rows per chunk; 0: the library's choice */
    const char *precision; /* "f32" or "bf16" */
    double dropout;        /* GPT-2's three dropout rates (0: none, as llm.c trains) */
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
                "          [--seed N] [--plain-attention] [--profile] [--profile-steps N]\n"
                "          [--device cpu|cuda] [--gpu N] [--tf32] [--head-chunk ROWS]\n"
                "          [--precision f32|bf16] [--dropout P]\n"
                "          [--plan-only] [--json]\n"
                "schedules: none, sqrt, segments:K, budget:SIZE, ops:SIZE (bytes or\n"
                "           KiB/MiB/GiB), budget-arena:F, ops-arena:F (fixed memory plus\n"
                "           the fraction F of keep-everything's activation arena), least\n"
                "           (the least planned peak any schedule reaches), least:F (ops:\n"
                "           that peak times 1 + F, 0 < F < 1: GPT-2 small B=8 T=1024 in bf16\n"
                "           recomputes 124% of a step's FLOPs at its least peak, 28% at 2%\n"
                "           more)\n");
}

#define MAX_COUNT 100000000

/* The defaults (GPT-2 small, flash attention, B=4 T=64, 4 steps on 2
 * threads of the CPU), then the command line; a bad one prints the usage
 * and exits. */
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
    o->profile_steps = 1;
    o->device = "cpu";
    o->precision = "f32";
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
        BENCH_OPT_INT("--profile-steps", &o->profile_steps, 1, MAX_COUNT),
        BENCH_OPT("--device", BENCH_STRING, &o->device),
        BENCH_OPT_INT("--gpu", &o->gpu, 0, 4096),
        BENCH_OPT_FLAG("--tf32", &o->tf32, 1),
        BENCH_OPT_INT("--head-chunk", &o->head_chunk, 0, MAX_COUNT),
        BENCH_OPT("--precision", BENCH_STRING, &o->precision),
        BENCH_OPT("--dropout", BENCH_DOUBLE, &o->dropout),
        BENCH_OPT_END,
    };
    if (bench_parse_args(argc, argv, opts) != 0 || !(o->dropout >= 0.0 && o->dropout < 1.0) ||
        (strcmp(o->device, "cpu") != 0 && strcmp(o->device, "cuda") != 0) ||
        (strcmp(o->precision, "f32") != 0 && strcmp(o->precision, "bf16") != 0))
        usage(argv[0]);
    o->cuda = strcmp(o->device, "cuda") == 0;
    o->cfg.dropout = (float)o->dropout;
    if (!o->cuda && (o->tf32 || o->gpu)) {
        fprintf(stderr, "%s: --tf32 and --gpu need --device cuda\n", BENCH);
        exit(2);
    }
}

/* The run's context: the device, its threads and seed. Without a usable
 * GPU (or CUDA in the build) --device cuda fails here, before anything is
 * built, with the library's reason. */
static int create_context(const options *o, sl_context **ctx)
{
    sl_context_options co = sl_context_defaults();
    co.threads = o->threads;
    co.seed = (uint64_t)o->seed;
    co.device = o->cuda ? SL_DEVICE_CUDA : SL_DEVICE_CPU;
    co.gpu = o->gpu;
    co.tf32 = o->tf32;
    if (sl_context_create(&co, ctx) != SL_OK)
        return bench_fail(BENCH, o->cuda ? "--device cuda" : "creating the context");
    return 0;
}

/* The model's name in results, the same on PyTorch's side
 * (bench_gpt2_torch.py): gpt2-small for GPT-2 small's layers, width,
 * heads and vocabulary at any context, else gpt2-L<layers>-C<embd>-
 * H<heads>-V<vocab>. */
static void model_name(const sl_gpt2_config *c, char *buf, size_t n)
{
    sl_gpt2_config d = sl_gpt2_defaults();
    if (c->layers == d.layers && c->embd == d.embd && c->heads == d.heads && c->vocab == d.vocab)
        snprintf(buf, n, "gpt2-small");
    else
        snprintf(buf, n, "gpt2-L%d-C%d-H%d-V%d", c->layers, c->embd, c->heads, c->vocab);
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
    if (sl_net_set_precision(*net, strcmp(o->precision, "bf16") == 0 ? SL_PRECISION_BF16
                                                                      : SL_PRECISION_F32) != SL_OK)
        return bench_fail(BENCH, "--precision");
    /* --head-chunk: rows of logits per chunk of the LM head (its scratch is
     * ROWS x vocab floats; larger chunks read and write the tied weight's
     * gradient fewer times) */
    if (o->head_chunk > 0 &&
        sl_net_set_lm_head(*net, "transformer.wte.weight", SL_GPT2_IGNORE_INDEX, o->head_chunk) !=
            SL_OK)
        return bench_fail(BENCH, "--head-chunk");
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
    if (!strcmp(o->schedule, "least") || !strncmp(o->schedule, "least:", 6)) {
        double f = o->schedule[5] == ':' ? atof(o->schedule + 6) : 0.0;
        if (o->schedule[5] == ':' && !(f > 0.0 && f < 1.0))
            usage(argv0);
        uint64_t b = bench_least_budget(net, s);
        if (!b)
            return bench_fail(BENCH, "finding the least budget");
        /* see bench_least_budget; least:F allows F more than the least */
        p->sc = SL_SCHEDULE_BUDGET_OPS(b + (uint64_t)(f * (double)b));
    } else if (!strncmp(o->schedule, "budget-arena:", 13) ||
               !strncmp(o->schedule, "ops-arena:", 10)) {
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
           "schedule %s, %s attention, %d threads, %d steps, on %s%s\n",
           o->cfg.layers, o->cfg.embd, o->cfg.heads, o->cfg.vocab, o->cfg.context,
           (unsigned long long)p->param_count, o->batch, o->seq, o->schedule,
           o->cfg.flash ? "flash" : "plain", o->threads, o->steps, o->cuda ? "CUDA" : "the CPU",
           o->tf32 ? " (TF32)" : "");
    printf("planned total %.1f MiB: activation arena %.1f, params %.1f, grads %.1f, "
           "optimizer %.1f; recompute %.1f%% (keep-everything %.1f MiB, arena %.1f)\n",
           bench_mib(m->total), bench_mib(m->arena_bytes), bench_mib(m->params),
           bench_mib(m->param_grads), bench_mib(m->optimizer), 100.0 * m->recompute_fraction,
           bench_mib(p->none.total), bench_mib(p->none.arena_bytes));
    printf("RSS before the first step: %.1f MiB\n", bench_mib(rss_base));
    fflush(stdout);
}

/* The random token batches of the measured steps, and on a GPU the
 * largest drop of the device's free memory after any of them. */
typedef struct token_source {
    sl_net *net;
    int32_t *ids, *targets;
    int batch, seq, vocab, cuda;
    uint64_t rng, device_peak;
} token_source;

/* xorshift64*: the token ids (any seeded stream will do). */
static uint32_t next_id(uint64_t *st, int vocab)
{
    *st ^= *st >> 12;
    *st ^= *st << 25;
    *st ^= *st >> 27;
    return (uint32_t)(((*st * 2685821657736338717ull) >> 33) % (uint64_t)vocab);
}

/* bench_step_fn: fresh tokens, one step under the clock (it returns with
 * the step done: the loss is read back), then, off the clock, the device's
 * memory. */
static int token_step(void *arg, int step, double *seconds, float *loss)
{
    token_source *t = arg;
    size_t n = (size_t)t->batch * (size_t)t->seq;
    (void)step;
    for (size_t i = 0; i < n; i++) {
        t->ids[i] = (int32_t)next_id(&t->rng, t->vocab);
        t->targets[i] = (int32_t)next_id(&t->rng, t->vocab);
    }
    sl_step_result r;
    double t0 = bench_now_s();
    if (sl_net_train_step_tokens(t->net, t->ids, t->targets, t->batch, t->seq, &r) != SL_OK)
        return bench_fail(BENCH, "training");
    *seconds = bench_now_s() - t0;
    *loss = r.loss;
    sl_memory_report m;
    if (t->cuda) {
        if (sl_net_memory_report(t->net, sl_shape_seq(t->batch, t->seq, 1), SL_MODE_TRAIN, &m) !=
            SL_OK)
            return bench_fail(BENCH, "reading the device's memory");
        t->device_peak = m.device_used > t->device_peak ? m.device_used : t->device_peak;
    }
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

/* --profile's steps after the measured ones, every layer type and pass
 * timed: *prof gets their *n entries (the caller frees it); none without
 * --profile. */
static int profile_steps(token_source *t, const options *o, sl_profile_entry **prof, int *n)
{
    *n = 0;
    if (!o->profile)
        return 0;
    if (sl_net_set_profiling(t->net, 1) != SL_OK)
        return bench_fail(BENCH, "profiling");
    for (int i = 0; i < o->profile_steps; i++) {
        double seconds;
        float loss;
        if (token_step(t, o->steps + i, &seconds, &loss) != 0)
            return 1;
    }
    if (sl_net_profile(t->net, NULL, 0, n, 0) != SL_OK ||
        !(*prof = calloc((size_t)*n + 1, sizeof **prof)) ||
        sl_net_profile(t->net, *prof, *n, n, 0) != SL_OK)
        return bench_fail(BENCH, "reading the profile");
    return 0;
}

/* The measured steps' fastest and slowest (bench_measure sorted them). */
static void step_range(const bench_run *r, double *lo, double *hi)
{
    const bench_steps *b = &r->steps;
    *lo = b->n > 1 ? b->times[1] : b->times[0];
    *hi = b->times[b->n - 1];
}

/* What gpu_gpt2.py and gpu.sh's tables read, the same keys as
 * bench_gpt2_torch.py's: the model, the side, the device, the step time
 * in ms (median, fastest, slowest) and the peak memory in MiB (on a GPU
 * the device's, as bench_gpu.c measures it; on the CPU the peak RSS). */
static void print_common_json(const options *o, const bench_run *r, uint64_t device_peak)
{
    char model[96];
    double lo, hi;
    model_name(&o->cfg, model, sizeof model);
    step_range(r, &lo, &hi);
    printf("\"model\":\"%s\",\"side\":\"sublinear\",", model);
    if (o->cuda)
        bench_print_gpu_json(o->gpu);
    else
        printf("\"device\":\"cpu\",");
    printf("\"head_chunk\":%d,\"precision\":\"%s\",\"dropout\":%g,", o->head_chunk, o->precision,
           o->dropout);
    printf("\"tf32\":%s,\"ms_step\":%.3f,\"ms_min\":%.3f,\"ms_max\":%.3f,\"peak_MiB\":%.1f,"
           "\"peak_source\":\"%s\",\"device_used\":%llu,",
           o->tf32 ? "true" : "false", 1e3 * r->median_s, 1e3 * lo, 1e3 * hi,
           bench_mib(o->cuda ? device_peak : r->rss_peak),
           o->cuda ? "device free-memory drop" : "peak RSS",
           (unsigned long long)(o->cuda ? device_peak : 0));
}

static void print_json(const options *o, const plans *p, const bench_run *r, uint64_t device_peak,
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
    print_common_json(o, r, device_peak);
    bench_print_run_json(r);
    printf("\"recompute_fraction\":%.6f,\"first_loss\":%.5f,\"last_loss\":%.5f,"
           "\"foreign_cpu_pct\":%.1f,\"profile_steps\":%d,\"profile\":[",
           m->recompute_fraction, r->steps.first_loss, r->steps.last_loss, r->foreign_pct,
           n_prof ? o->profile_steps : 0);
    for (int i = 0; i < n_prof; i++)
        printf("%s{\"layer\":\"%s\",\"pass\":\"%s\",\"calls\":%lld,\"s_per_step\":%.6f}",
               i ? "," : "", prof[i].layer_type, prof[i].pass,
               (long long)prof[i].calls / o->profile_steps, prof[i].seconds / o->profile_steps);
    printf("]}\n");
}

static void print_text(const options *o, const plans *p, const bench_run *r,
                       uint64_t device_peak, const sl_profile_entry *prof, int n_prof)
{
    double lo, hi;
    step_range(r, &lo, &hi);
    bench_print_run_text(&p->mine, r);
    printf("measured steps from %.3f to %.3f s\n", lo, hi);
    if (o->cuda)
        printf("device memory (largest drop of the GPU's free memory after a step): %.1f MiB\n",
               bench_mib(device_peak));
    if (n_prof)
        printf("profile of %d more step%s, each program step waited for:\n", o->profile_steps,
               o->profile_steps > 1 ? "s" : "");
    for (int i = 0; i < n_prof; i++)
        printf("  profile: %-24s %-10s %.4f s/step (%lld calls)\n", prof[i].layer_type,
               prof[i].pass, prof[i].seconds / o->profile_steps,
               (long long)prof[i].calls / o->profile_steps);
}

int main(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    sl_profile_entry *prof = NULL;
    sl_shape s = sl_shape_seq(o.batch, o.seq, 1);
    token_source src = {NULL, NULL, NULL, o.batch, o.seq, o.cfg.vocab, o.cuda, 0, 0};
    bench_run run = {{NULL, o.steps, 0.0f, 0.0f}, 0.0, 0.0, 0.0, 0, 0, 0, {0}};
    plans p;
    int rc, n_prof = 0;
    uint64_t device_peak = 0;

    if ((rc = create_context(&o, &ctx)) != 0)
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
    if ((rc = bench_measure(BENCH, net, s, token_step, &src, o.json, &run)) != 0)
        goto done;
    device_peak = src.device_peak; /* the measured steps', not the profiled ones' */
    if ((rc = profile_steps(&src, &o, &prof, &n_prof)) != 0)
        goto done;
    if (o.json)
        print_json(&o, &p, &run, device_peak, prof, n_prof);
    else
        print_text(&o, &p, &run, device_peak, prof, n_prof);

done:
    free(prof);
    free(run.steps.times);
    free(src.ids);
    free(src.targets);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}
