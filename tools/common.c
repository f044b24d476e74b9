/*
 * common.c — helpers the subcommands of `sublinear` share: building the
 * network the options describe, printing memory reports as text or JSON.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_fail(const char *what)
{
    fprintf(stderr, "sublinear: %s: %s\n", what, sl_last_error());
    return CLI_EXIT_FAIL;
}

int cli_local_rank(void)
{
    /* set by Open MPI's mpirun, and by MPICH / Slurm launchers */
    const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        int r;
        if (v && cli_parse_int(v, 0, 1 << 20, &r) == 0)
            return r;
    }
    return 0;
}

const char *cli_mode_name(sl_mode mode) { return mode == SL_MODE_INFER ? "infer" : "train"; }

int cli_is_lm(const cli_options *o) { return o->model && strcmp(o->model, "gpt2") == 0; }

sl_shape cli_input_shape(const cli_options *o)
{
    return cli_is_lm(o) ? sl_shape_seq(o->batch, o->seq, 1)
                        : sl_shape_nchw(o->batch, 3, o->res, o->res);
}

float cli_lr_at(const cli_options *o, int64_t step)
{
    if (o->warmup_set)
        return sl_lr_warmup_cosine(step, o->warmup, o->steps, o->lr, o->lr_min);
    return o->steps > 10 && step >= o->steps / 2 ? o->lr * 0.1f : o->lr;
}

sl_gpt2_config cli_gpt2_config(const cli_options *o)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = o->layers;
    c.embd = o->embd;
    c.heads = o->heads;
    c.vocab = o->vocab;
    c.context = o->context;
    c.dropout = o->dropout;
    return c;
}

static sl_status build_gpt2(const cli_options *o, sl_net *net)
{
    sl_gpt2_config c = cli_gpt2_config(o);
    return sl_model_gpt2(net, &c);
}

int cli_build(const cli_options *o, sl_context **ctx, sl_net **net)
{
    sl_context_options co = sl_context_defaults();
    co.threads = o->threads;
    co.seed = o->seed;
    co.device = o->device;
    co.tf32 = o->tf32;
    co.gpu = o->gpu_set ? o->gpu : o->distributed ? cli_local_rank() : 0;
    *ctx = NULL;
    *net = NULL;
    const char *what = NULL;
    if (sl_context_create(&co, ctx) != SL_OK)
        what = "creating the context";
    else if (sl_sublinear(*ctx, cli_is_lm(o) ? 1 : 3, o->schedule, net) != SL_OK)
        what = "creating the network";
    /* Off before building, which checks the model's size: with
     * --no-memory-check, and for plan, dot and memplot, which allocate no
     * model and may plan one for a larger machine. */
    else if ((o->no_memory_check || o->cmd != CLI_TRAIN) && sl_net_set_memory_check(*net, 0) != SL_OK)
        what = "turning the memory check off";
    else if (cli_is_lm(o) ? build_gpt2(o, *net) != SL_OK
                          : sl_model_build(*net, o->model, o->classes, o->res) != SL_OK)
        what = "building the model";
    else if (sl_net_set_precision(*net, o->precision) != SL_OK)
        what = "setting the precision";
    else if (o->no_reuse && sl_net_set_memory_reuse(*net, 0) != SL_OK)
        what = "turning memory reuse off";
    else if (o->bn_rescale && sl_net_set_bn_momentum_rescale(*net, 1) != SL_OK)
        what = "turning the BatchNorm momentum rescale on";
    else if (o->optimizer && strcmp(o->optimizer, "none") != 0) {
        sl_optimizer_options opt = strcmp(o->optimizer, "adam") == 0
                                       ? sl_optimizer_adam(o->lr, 0.9f, 0.999f, 1e-8f, 0.0f)
                                       : sl_optimizer_sgd(o->lr, 0.9f, 5e-4f, 0);
        if (strcmp(o->optimizer, "adamw") == 0) /* GPT-2 recipes: betas (0.9, 0.95), decay 0.1 */
            opt = cli_is_lm(o) ? sl_optimizer_adamw(o->lr, 0.9f, 0.95f, 1e-8f, 0.1f)
                               : sl_optimizer_adamw(o->lr, 0.9f, 0.999f, 1e-8f, 0.01f);
        if (sl_net_set_optimizer(*net, &opt) != SL_OK)
            what = "setting the optimizer";
        else if (sl_net_set_grad_clip(*net, o->clip) != SL_OK)
            what = "setting gradient clipping";
        else if (o->accum > 1 && sl_net_set_grad_accumulation(*net, o->accum) != SL_OK)
            what = "setting gradient accumulation";
        else if (o->update_in_backward && sl_net_set_update_in_backward(*net, 1) != SL_OK)
            what = "turning the update in backward on";
    }
    if (!what)
        return 0;
    int rc = cli_fail(what);
    sl_net_free(*net);
    sl_context_free(*ctx);
    *net = NULL;
    *ctx = NULL;
    return rc;
}

double cli_mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

double cli_now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void cli_progress_bar(char bar[CLI_BAR_WIDTH + 1], int64_t step, int steps)
{
    int filled = (int)((double)CLI_BAR_WIDTH * (double)step / (double)steps);
    for (int i = 0; i < CLI_BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[CLI_BAR_WIDTH] = '\0';
}

int cli_plan_with_baseline(sl_net *net, sl_shape shape, sl_schedule schedule,
                           sl_memory_report *planned, sl_memory_report *baseline)
{
    if (sl_net_memory_report(net, shape, SL_MODE_TRAIN, planned) != SL_OK)
        return cli_fail("planning");
    if (sl_net_set_schedule(net, SL_SCHEDULE_NONE) != SL_OK ||
        sl_net_memory_report(net, shape, SL_MODE_TRAIN, baseline) != SL_OK ||
        sl_net_set_schedule(net, schedule) != SL_OK)
        return cli_fail("planning the keep-everything baseline");
    return 0;
}

void cli_json_number(double v)
{
    if (isfinite(v))
        printf("%.6g", v);
    else
        printf("null");
}

static double saving(uint64_t plain, uint64_t mine)
{
    return plain ? 1.0 - (double)mine / (double)plain : 0.0;
}

void cli_print_saving(const sl_memory_report *baseline, const sl_memory_report *m)
{
    printf("activation memory saved against keep-everything: %.2f MiB -> %.2f MiB (%.1f%% less); "
           "total %.2f MiB -> %.2f MiB (%.1f%% less)\n",
           cli_mib(baseline->arena_bytes), cli_mib(m->arena_bytes),
           100.0 * saving(baseline->arena_bytes, m->arena_bytes), cli_mib(baseline->total),
           cli_mib(m->total), 100.0 * saving(baseline->total, m->total));
}

void cli_json_memory_end(const cli_options *o, const sl_memory_report *m,
                         const sl_memory_report *baseline)
{
    printf(",\"memory\":");
    cli_json_report(stdout, m);
    printf(",\"baseline_memory\":");
    cli_json_report(stdout, baseline);
    printf(",\"saving\":{\"arena_bytes\":%lld,\"arena_fraction\":%.6f,\"total_fraction\":%.6f}",
           (long long)baseline->arena_bytes - (long long)m->arena_bytes,
           saving(baseline->arena_bytes, m->arena_bytes), saving(baseline->total, m->total));
    printf(",\"saved_model\":");
    cli_json_string(stdout, o->save_model);
    printf(",\"snapshot\":");
    cli_json_string(stdout, o->snapshot);
    printf("}\n");
}

void cli_print_report(FILE *f, const sl_memory_report *r)
{
    fprintf(f, "  outputs       %10.2f MiB\n", cli_mib(r->outputs));
    fprintf(f, "  gradInputs    %10.2f MiB\n", cli_mib(r->grad_inputs));
    fprintf(f, "  buffers       %10.2f MiB\n", cli_mib(r->buffers));
    fprintf(f, "  activation arena (peak of the %s, shared) %.2f MiB\n",
            r->param_grads_in_arena ? "three and the param grads" : "three", cli_mib(r->arena_bytes));
    fprintf(f, "  parameters    %10.2f MiB\n", cli_mib(r->params));
    if (r->param_grads_in_arena)
        fprintf(f, "  param grads   %10.2f MiB  largest live set, in the arena (update in backward)\n",
                cli_mib(r->param_grads));
    else
        fprintf(f, "  param grads   %10.2f MiB\n", cli_mib(r->param_grads));
    fprintf(f, "  optimizer     %10.2f MiB\n", cli_mib(r->optimizer));
    fprintf(f, "  fixed part    %10.2f MiB  (parameters%s + optimizer: no schedule changes it)\n",
            cli_mib(r->fixed), r->param_grads_in_arena ? "" : " + gradients");
    if (r->communication)
        fprintf(f, "  communication %10.2f MiB\n", cli_mib(r->communication));
    fprintf(f, "  total         %10.2f MiB\n", cli_mib(r->total));
    if (r->arena_measured)
        fprintf(f, "  measured: arena high-water %.2f MiB, total %.2f MiB\n",
                cli_mib(r->arena_measured), cli_mib(r->measured_total));
}

void cli_json_report(FILE *f, const sl_memory_report *r)
{
    char buf[1024];
    if (sl_memory_report_json(r, buf, sizeof buf) == SL_OK)
        fputs(buf, f);
    else
        fputs("null", f);
}

void cli_json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}
