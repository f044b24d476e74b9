/*
 * common.c — helpers the subcommands of `sublinear` share: building the
 * network the options describe, printing memory reports as text or JSON.
 */
#include <stdlib.h>
#include <string.h>

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
    else if (sl_sublinear(*ctx, 3, o->schedule, net) != SL_OK)
        what = "creating the network";
    else if (sl_model_build(*net, o->model, o->classes, o->res) != SL_OK)
        what = "building the model";
    else if (o->no_memory_check && sl_net_set_memory_check(*net, 0) != SL_OK)
        what = "turning the memory check off";
    else if (o->no_reuse && sl_net_set_memory_reuse(*net, 0) != SL_OK)
        what = "turning memory reuse off";
    else if (o->bn_rescale && sl_net_set_bn_momentum_rescale(*net, 1) != SL_OK)
        what = "turning the BatchNorm momentum rescale on";
    else if (o->optimizer && strcmp(o->optimizer, "none") != 0) {
        sl_optimizer_options opt = strcmp(o->optimizer, "adam") == 0
                                       ? sl_adam(o->lr, 0.9f, 0.999f, 1e-8f, 0.0f)
                                       : sl_sgd(o->lr, 0.9f, 5e-4f, 0);
        if (strcmp(o->optimizer, "adamw") == 0)
            opt = sl_adamw(o->lr, 0.9f, 0.999f, 1e-8f, 0.01f);
        if (sl_net_set_optimizer(*net, &opt) != SL_OK)
            what = "setting the optimizer";
        else if (sl_net_set_grad_clip(*net, o->clip) != SL_OK)
            what = "setting gradient clipping";
        else if (o->accum > 1 && sl_net_set_grad_accumulation(*net, o->accum) != SL_OK)
            what = "setting gradient accumulation";
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

void cli_print_report(FILE *f, const sl_memory_report *r)
{
    fprintf(f, "  outputs       %10.2f MiB\n", cli_mib(r->outputs));
    fprintf(f, "  gradInputs    %10.2f MiB\n", cli_mib(r->grad_inputs));
    fprintf(f, "  buffers       %10.2f MiB\n", cli_mib(r->buffers));
    fprintf(f, "  activation arena (peak of the three, shared) %.2f MiB\n",
            cli_mib(r->arena_bytes));
    fprintf(f, "  parameters    %10.2f MiB\n", cli_mib(r->params));
    fprintf(f, "  param grads   %10.2f MiB\n", cli_mib(r->param_grads));
    fprintf(f, "  optimizer     %10.2f MiB\n", cli_mib(r->optimizer));
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
