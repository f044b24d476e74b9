/*
 * cmd_plan.c — the planning subcommands of `sublinear`: plan (the memory
 * report of one step), dot (the network as a Graphviz graph of shared
 * storage) and memplot (live memory per program step as an SVG). They
 * stop at the plan stage of network -> schedule -> program -> plan -> run:
 * no kernel runs, so a ResNet-152 at batch 16 plans in well under a second.
 */
#include <string.h>

#include "cli.h"

static const char g_plan_help[] =
    "usage: sublinear plan --model NAME [options]\n"
    "  Prints the planned memory of one step by category and the recomputed\n"
    "  fraction of FLOPs. No kernel runs.\n"
    "options:\n"
    "  --model NAME          model to plan (required)\n"
    "  --batch N             batch size (16)\n"
    "  --res N               input resolution (224)\n"
    "  --classes N           classifier outputs (1000)\n"
    "  --schedule S          checkpointing schedule (sqrt); see below\n"
    "  --mode train|infer    plan a training step or an inference forward (train)\n"
    "  --no-reuse            every tensor in storage of its own (a plain framework)\n"
    "  --precision f32|bf16  activations in float, or bf16 with float math (f32)\n"
    "  --optimizer KIND      sgd, adam, adamw or none: optimizer state counted (sgd;\n"
    "                        adamw for gpt2)\n"
    "  --update-in-backward  plan the update inside backward: parameter gradients\n"
    "                        as arena values instead of a fixed block\n"
    "  --ranks N --shard S   plan one rank of N data-parallel ranks (the one with the\n"
    "                        largest slice) under ZeRO stage S (0 none, 1 optimizer\n"
    "                        state sharded, 2 gradients too)\n"
    "  --seq T, --layers N, --embd C, --heads H, --vocab V, --context N\n"
    "                        gpt2's sequence length and shape (1024; GPT-2 small)\n"
    "  --explain             also print every top-level unit (layer or block): its\n"
    "                        forward and backward FLOPs and estimated ms, input and\n"
    "                        output bytes, the bytes it holds to its backward when\n"
    "                        it keeps all / its conv outputs / its output only, its\n"
    "                        largest workspace, how many times its forward runs and\n"
    "                        what the schedule keeps of it\n"
    "  --json                print one JSON object\n";

static const char g_dot_help[] =
    "usage: sublinear dot --model NAME -o FILE.dot [options]\n"
    "  Writes the network as a Graphviz graph: one node per layer with its\n"
    "  output shape; equal fill colour means shared arena storage.\n"
    "options:\n"
    "  --model NAME, --batch N (16), --res N (224), --classes N (1000),\n"
    "  --schedule S (sqrt), --mode train|infer (train), --no-reuse,\n"
    "  --precision f32|bf16 (f32), --optimizer sgd|adam|none (sgd)\n"
    "  -o, --output FILE     the .dot file to write (required)\n"
    "  --json                print one JSON object describing what was written\n";

static const char g_memplot_help[] =
    "usage: sublinear memplot --model NAME -o FILE.svg [options]\n"
    "  Draws the live memory of every program step of one planned step, one\n"
    "  series per schedule, on one SVG. No kernel runs.\n"
    "options:\n"
    "  --model NAME, --batch N (16), --res N (224), --classes N (1000),\n"
    "  --mode train|infer (train), --no-reuse, --precision f32|bf16 (f32),\n"
    "  --optimizer sgd|adam|none (sgd)\n"
    "  --schedules S1,S2,..  up to 8 schedules (none,sqrt)\n"
    "  -o, --output FILE     the .svg file to write (required)\n"
    "  --json                print one JSON object with each series' steps and arena\n";

enum { MAX_SERIES = 8 };

static sl_shape input_shape(const cli_options *o) { return cli_input_shape(o); }

/* The per-unit table of --explain: as text, or (json) as a "units" member
 * of the object being printed. */
static int print_units(const cli_options *o, sl_net *net, int json)
{
    sl_unit_report *u;
    int n;
    if (sl_net_unit_reports(net, input_shape(o), o->mode, &u, &n) != SL_OK)
        return cli_fail("explaining the plan");
    if (json) {
        printf(",\"units\":[");
        for (int i = 0; i < n; i++) {
            printf("%s{\"name\":", i ? "," : "");
            cli_json_string(stdout, u[i].name);
            printf(",\"type\":");
            cli_json_string(stdout, u[i].type);
            printf(",\"fwd_flops\":%llu,\"bwd_flops\":%llu,\"fwd_seconds\":%.6g,"
                   "\"bwd_seconds\":%.6g,\"input_bytes\":%llu,\"output_bytes\":%llu,"
                   "\"keep_all_bytes\":%llu,\"keep_conv_bytes\":%llu,\"keep_output_bytes\":%llu,"
                   "\"workspace_bytes\":%llu,\"forwards\":%d,\"action\":",
                   (unsigned long long)u[i].fwd_flops, (unsigned long long)u[i].bwd_flops,
                   u[i].fwd_seconds, u[i].bwd_seconds, (unsigned long long)u[i].input_bytes,
                   (unsigned long long)u[i].output_bytes, (unsigned long long)u[i].keep_all_bytes,
                   (unsigned long long)u[i].keep_conv_bytes,
                   (unsigned long long)u[i].keep_output_bytes,
                   (unsigned long long)u[i].workspace_bytes, u[i].forwards);
            cli_json_string(stdout, u[i].action);
            printf("}");
        }
        printf("]");
    } else {
        printf("\nper unit (MiB; estimated ms by the cost model; keep: bytes held from its forward\n"
               "to its backward when it keeps all / conv outputs / its output only):\n");
        printf("%-16s %-15s %8s %8s %7s %7s %8s %8s %8s %8s %7s %4s  %s\n", "unit", "type",
               "fwd GF", "bwd GF", "fwd ms", "bwd ms", "input", "keep all", "conv", "output",
               "ws", "runs", "action");
        for (int i = 0; i < n; i++)
            printf("%-16s %-15s %8.2f %8.2f %7.1f %7.1f %8.2f %8.2f %8.2f %8.2f %7.2f %4d  %s\n",
                   u[i].name, u[i].type, u[i].fwd_flops / 1e9, u[i].bwd_flops / 1e9,
                   1e3 * u[i].fwd_seconds, 1e3 * u[i].bwd_seconds, cli_mib(u[i].input_bytes),
                   cli_mib(u[i].keep_all_bytes), cli_mib(u[i].keep_conv_bytes),
                   cli_mib(u[i].keep_output_bytes), cli_mib(u[i].workspace_bytes), u[i].forwards,
                   u[i].action);
    }
    sl_unit_reports_free(u);
    return 0;
}

static int run_plan(void *opts)
{
    const cli_options *o = opts;
    sl_context *ctx;
    sl_net *net;
    int rc = cli_build(o, &ctx, &net);
    if (rc)
        return rc;
    sl_memory_report r;
    if (o->ranks > 1 && sl_net_set_plan_ranks(net, o->ranks, o->shard) != SL_OK)
        rc = cli_fail("planning per rank");
    else if (sl_net_memory_report(net, input_shape(o), o->mode, &r) != SL_OK)
        rc = cli_fail("planning");
    if (!rc && o->json) {
        printf("{\"model\":");
        cli_json_string(stdout, o->model);
        printf(",\"batch\":%d,\"res\":%d,\"classes\":%d,\"mode\":\"%s\",\"schedule\":", o->batch,
               o->res, o->classes, cli_mode_name(o->mode));
        cli_json_string(stdout, o->schedule_text);
        printf(",\"precision\":\"%s\",\"reuse\":%s,\"ranks\":%d,\"shard\":%d,"
               "\"update_in_backward\":%s,\"optimizer\":",
               o->precision == SL_PRECISION_BF16 ? "bf16" : "f32", o->no_reuse ? "false" : "true",
               o->ranks > 1 ? o->ranks : 1, o->shard,
               o->update_in_backward ? "true" : "false");
        cli_json_string(stdout, o->optimizer);
        printf(",\"planned_bytes\":{\"outputs\":%llu,\"grad_inputs\":%llu,\"buffers\":%llu,"
               "\"params\":%llu,\"param_grads\":%llu,\"optimizer\":%llu,\"fixed\":%llu,"
               "\"total\":%llu,\"arena\":%llu},\"param_grads_in_arena\":%s,"
               "\"recompute_fraction\":%.6f,\"recompute_time_fraction\":%.6f",
               (unsigned long long)r.outputs, (unsigned long long)r.grad_inputs,
               (unsigned long long)r.buffers, (unsigned long long)r.params,
               (unsigned long long)r.param_grads, (unsigned long long)r.optimizer,
               (unsigned long long)r.fixed, (unsigned long long)r.total,
               (unsigned long long)r.arena_bytes, r.param_grads_in_arena ? "true" : "false",
               r.recompute_fraction, r.recompute_time_fraction);
        if (o->explain)
            rc = print_units(o, net, 1);
        printf("}\n");
    } else if (!rc) {
        /* a forward-only program recomputes nothing: the schedule has no say */
        char input[64];
        if (cli_is_lm(o))
            snprintf(input, sizeof input, "%d tokens", o->seq);
        else
            snprintf(input, sizeof input, "%dx%d", o->res, o->res);
        char ranks[96] = "";
        if (o->ranks > 1)
            snprintf(ranks, sizeof ranks, ", per rank of %d (ZeRO stage %d; the largest slice)",
                     o->ranks, o->shard);
        printf("%s, batch %d, %s, %s%s%s%s%s%s\n", o->model, o->batch, input,
               o->mode == SL_MODE_TRAIN ? "training, schedule " : "inference (forward only)",
               o->mode == SL_MODE_TRAIN ? o->schedule_text : "",
               o->precision == SL_PRECISION_BF16 ? ", bf16 activations" : "",
               o->no_reuse ? ", no reuse" : "",
               o->update_in_backward && o->mode == SL_MODE_TRAIN ? ", update in backward" : "",
               ranks);
        cli_print_report(stdout, &r);
        printf("  recomputed: %.1f%% of one plain step's FLOPs, %.1f%% of its estimated time\n",
               100.0 * r.recompute_fraction, 100.0 * r.recompute_time_fraction);
        if (o->explain)
            rc = print_units(o, net, 0);
    }
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

static int run_dot(void *opts)
{
    const cli_options *o = opts;
    sl_context *ctx;
    sl_net *net;
    int rc = cli_build(o, &ctx, &net);
    if (rc)
        return rc;
    if (sl_net_write_dot(net, input_shape(o), o->mode, o->output) != SL_OK)
        rc = cli_fail("writing the graph");
    if (!rc && o->json) {
        printf("{\"output\":");
        cli_json_string(stdout, o->output);
        printf(",\"model\":");
        cli_json_string(stdout, o->model);
        printf(",\"layers\":%d,\"mode\":\"%s\",\"reuse\":%s}\n", sl_net_layer_count(net),
               cli_mode_name(o->mode), o->no_reuse ? "false" : "true");
    } else if (!rc) {
        printf("wrote %s (%s plan, %s)\n", o->output,
               o->mode == SL_MODE_TRAIN ? "training" : "inference",
               o->no_reuse ? "no reuse" : "memory reuse on");
    }
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

/* Splits o->schedules into at most MAX_SERIES parsed schedules; labels
 * point into buf. Returns 0 or CLI_EXIT_USAGE. */
static int split_schedules(const char *list, char *buf, size_t size, sl_schedule *s,
                           const char **labels, int *n)
{
    if (strlen(list) >= size)
        return cli_usage_error(&cli_memplot_command, "--schedules is too long");
    memcpy(buf, list, strlen(list) + 1);
    *n = 0;
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        if (*n == MAX_SERIES)
            return cli_usage_error(&cli_memplot_command, "at most %d schedules", MAX_SERIES);
        if (sl_schedule_parse(tok, &s[*n]) != SL_OK)
            return cli_usage_error(&cli_memplot_command, "bad schedule '%s' in --schedules", tok);
        labels[(*n)++] = tok;
    }
    return 0;
}

static void print_series_json(const cli_options *o, const sl_memory_timeline *tl,
                              const char *const *labels, int n)
{
    printf("{\"output\":");
    cli_json_string(stdout, o->output);
    printf(",\"model\":");
    cli_json_string(stdout, o->model);
    printf(",\"batch\":%d,\"res\":%d,\"mode\":\"%s\",\"series\":[", o->batch, o->res,
           cli_mode_name(o->mode));
    for (int i = 0; i < n; i++) {
        printf("%s{\"schedule\":", i ? "," : "");
        cli_json_string(stdout, labels[i]);
        printf(",\"steps\":%d,\"arena\":%llu}", tl[i].steps, (unsigned long long)tl[i].arena_bytes);
    }
    printf("]}\n");
}

static int run_memplot(void *opts)
{
    const cli_options *o = opts;
    char buf[512];
    sl_schedule sched[MAX_SERIES];
    const char *labels[MAX_SERIES];
    int n = 0;
    int rc = split_schedules(o->schedules ? o->schedules : "none,sqrt", buf, sizeof buf, sched,
                             labels, &n);
    if (rc)
        return rc;
    sl_context *ctx;
    sl_net *net;
    rc = cli_build(o, &ctx, &net);
    if (rc)
        return rc;
    sl_memory_timeline tl[MAX_SERIES];
    const sl_memory_timeline *series[MAX_SERIES];
    int planned = 0;
    for (; planned < n; planned++) {
        if (sl_net_set_schedule(net, sched[planned]) != SL_OK ||
            sl_net_memory_timeline(net, input_shape(o), o->mode, &tl[planned]) != SL_OK) {
            fprintf(stderr, "sublinear: planning schedule %s: %s\n", labels[planned],
                    sl_last_error());
            rc = CLI_EXIT_FAIL;
            break;
        }
        series[planned] = &tl[planned];
    }
    if (!rc && sl_memory_timeline_write_svg(o->output, series, labels, n) != SL_OK)
        rc = cli_fail("writing the plot");
    if (!rc && o->json) {
        print_series_json(o, tl, labels, n);
    } else if (!rc) {
        for (int i = 0; i < n; i++)
            printf("%-20s %5d steps, arena %.2f MiB\n", labels[i], tl[i].steps,
                   cli_mib(tl[i].arena_bytes));
        printf("wrote %s\n", o->output);
    }
    for (int i = 0; i < planned; i++)
        sl_memory_timeline_free(&tl[i]);
    sl_net_free(net);
    sl_context_free(ctx);
    return rc;
}

const cli_command cli_plan_command = {
    .name = "plan",
    .summary = "print the planned memory of one step (no kernel runs)",
    .usage = g_plan_help,
    .run = run_plan,
    CLI_NET_COMMAND(CLI_PLAN),
};

const cli_command cli_dot_command = {
    .name = "dot",
    .summary = "write the network as a Graphviz graph of shared storage",
    .usage = g_dot_help,
    .run = run_dot,
    CLI_NET_COMMAND(CLI_DOT),
};

const cli_command cli_memplot_command = {
    .name = "memplot",
    .summary = "draw live memory per step for several schedules (SVG)",
    .usage = g_memplot_help,
    .run = run_memplot,
    CLI_NET_COMMAND(CLI_MEMPLOT),
};
