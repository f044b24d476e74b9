/*
 * cmd_bench.c — `sublinear bench`: the benchmarks of bench/ behind one
 * interface.
 *
 * optnet's memory tables are planning only (no kernel runs, well under a
 * second), so they are built into the command and always available, also
 * where the benches were not built or in an install. The timed benches
 * (conv: ResNet-50 convolutions through the CPU kernels; resnet152:
 * memonger's headline run) stay separate programs, because they reach into
 * the library's internal kernels or measure their own process's peak RSS
 * (one configuration per process): the command finds the program and
 * replaces itself with it (exec), passing the options on, so the exit
 * status and the output are the program's own. The scripts of bench/
 * (conv.sh, resnet152.sh) add the PyTorch side and run several processes.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char g_bench_help[] =
    "usage: sublinear bench NAME [options]\n"
    "       sublinear bench list [--json]\n"
    "  Runs one of the benchmarks of bench/. NAME:\n"
    "  optnet     optnet's memory tables (AlexNet, VGG-A, GoogLeNet, ResNet-110):\n"
    "             planned memory before / after sharing; planning only, seconds.\n"
    "             Built into this command. Options: --json.\n"
    "  conv       ResNet-50 convolutions through the CPU kernels (bench_conv).\n"
    "  resnet152  memonger's headline: ResNet-152 plain vs sublinear (bench_resnet).\n"
    "  conv and resnet152 run the bench program, passing the options on (e.g.\n"
    "  --threads N --batch N --json); it is looked for in $SL_BENCH_DIR, in\n"
    "  bench/ beside this command (a build tree) and in ../libexec/sublinear\n"
    "  (an install). `sublinear bench NAME --help` describes one benchmark.\n";

typedef struct bench_program {
    const char *name, *program, *summary, *options;
} bench_program;

static const bench_program g_programs[] = {
    {"conv", "bench_conv",
     "ResNet-50's convolutions (forward, backward-data, backward-filter of each distinct\n"
     "shape, weighted by its count) through the CPU kernels; bench/conv.sh compares\n"
     "them with PyTorch.",
     "  --threads N (2)  --batch N (8)  --reps N (5)  --image N (224)  --json\n"},
    {"resnet152", "bench_resnet",
     "memonger's headline: an ImageNet ResNet (ResNet-152, batch 16, 224x224) trained\n"
     "for a few steps under one schedule: planned peak, measured peak, peak RSS,\n"
     "seconds per step, recomputed FLOPs. bench/resnet152.sh runs every schedule and\n"
     "PyTorch in one job and prints the table of bench/RESULTS.md.",
     "  --model NAME  --batch N  --res N  --classes N  --schedule S (none, sqrt,\n"
     "  segments:K, budget:SIZE, budget-half, budget-sqrt)  --steps N  --threads N\n"
     "  --seed N  --json  --plan-only\n"},
};

/* ---- optnet's tables, planned here ---------------------------------- */

typedef struct optnet_row {
    const char *model;
    int res, classes;
    double optnet_infer_outputs, optnet_train_grad_inputs; /* % saved, optnet README */
} optnet_row;

static const optnet_row g_optnet_rows[] = {
    {"alexnet", 224, 1000, 75, 48},
    {"vgg-a", 224, 1000, 55, 54},
    {"googlenet", 224, 1000, 55, 37},
    {"resnet110", 32, 10, 97, 60},
};

enum { OPTNET_ROWS = sizeof g_optnet_rows / sizeof *g_optnet_rows };

static int optnet_plan(sl_context *ctx, const optnet_row *r, int batch, sl_mode mode, int reuse,
                       sl_memory_report *out)
{
    sl_net *net = NULL;
    int ok = sl_sequential(ctx, 3, &net) == SL_OK &&
             sl_model_build(net, r->model, r->classes, r->res) == SL_OK &&
             sl_net_set_memory_reuse(net, reuse) == SL_OK &&
             sl_net_memory_report(net, sl_shape_nchw(batch, 3, r->res, r->res), mode, out) == SL_OK;
    if (!ok)
        fprintf(stderr, "sublinear bench optnet: %s: %s\n", r->model, sl_last_error());
    sl_net_free(net);
    return ok ? 0 : CLI_EXIT_FAIL;
}

static double saved(uint64_t before, uint64_t after)
{
    return before ? 1.0 - (double)after / (double)before : 0.0;
}

static void optnet_markdown(sl_memory_report (*rep)[2], sl_mode mode, int batch)
{
    int infer = mode == SL_MODE_INFER;
    printf(infer ? "### Inference, batch %d (MiB)\n\n| model | total before | total after | "
                   "outputs before | outputs after | params | outputs saved | optnet's outputs "
                   "saved |\n|---|---|---|---|---|---|---|---|\n"
                 : "\n### Training, batch %d, keep-everything (MiB)\n\n| model | total before | "
                   "total after | outputs before | outputs after | gradInputs before | gradInputs "
                   "after | params | gradInputs saved | optnet's gradInputs saved |\n"
                   "|---|---|---|---|---|---|---|---|---|---|\n",
           batch);
    for (int i = 0; i < OPTNET_ROWS; i++) {
        const sl_memory_report *b = &rep[i][0], *a = &rep[i][1];
        printf("| %s | %.1f | %.1f | %.1f | %.1f | ", g_optnet_rows[i].model, cli_mib(b->total),
               cli_mib(a->total), cli_mib(b->outputs), cli_mib(a->outputs));
        if (infer)
            printf("%.1f | %.1f %% | %.0f %% |\n", cli_mib(a->params),
                   100.0 * saved(b->outputs, a->outputs), g_optnet_rows[i].optnet_infer_outputs);
        else
            printf("%.1f | %.1f | %.1f | %.1f %% | %.0f %% |\n", cli_mib(b->grad_inputs),
                   cli_mib(a->grad_inputs), cli_mib(a->params),
                   100.0 * saved(b->grad_inputs, a->grad_inputs),
                   g_optnet_rows[i].optnet_train_grad_inputs);
    }
}

static void optnet_json(sl_memory_report (*rep)[2], sl_mode mode, int batch)
{
    int infer = mode == SL_MODE_INFER;
    printf("\"%s\":{\"batch\":%d,\"rows\":[", infer ? "inference" : "training", batch);
    for (int i = 0; i < OPTNET_ROWS; i++) {
        const sl_memory_report *b = &rep[i][0], *a = &rep[i][1];
        printf("%s{\"model\":\"%s\",\"before\":", i ? "," : "", g_optnet_rows[i].model);
        cli_json_report(stdout, b);
        printf(",\"after\":");
        cli_json_report(stdout, a);
        if (infer)
            printf(",\"outputs_saved\":%.6f,\"optnet_outputs_saved\":%.2f}",
                   saved(b->outputs, a->outputs), g_optnet_rows[i].optnet_infer_outputs / 100.0);
        else
            printf(",\"grad_inputs_saved\":%.6f,\"optnet_grad_inputs_saved\":%.2f}",
                   saved(b->grad_inputs, a->grad_inputs),
                   g_optnet_rows[i].optnet_train_grad_inputs / 100.0);
    }
    printf("]}");
}

static int bench_optnet(int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: sublinear bench optnet [--json]\n"
                   "  optnet's memory tables: planned memory of AlexNet, VGG-A, GoogLeNet (224x224)\n"
                   "  and CIFAR ResNet-110 before sharing (every tensor in storage of its own) and\n"
                   "  after (the planner), inference at batch 128 and training at batch 64, with\n"
                   "  optnet's published savings beside ours. Planning only: no kernel runs.\n");
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            return cli_usage_error(&cli_bench_command, "unknown option '%s' for optnet", argv[i]);
        }
    }
    static const struct { sl_mode mode; int batch; } tables[2] = {{SL_MODE_INFER, 128},
                                                                 {SL_MODE_TRAIN, 64}};
    sl_memory_report rep[2][OPTNET_ROWS][2];
    sl_context *ctx = NULL;
    if (sl_context_create(NULL, &ctx) != SL_OK)
        return cli_fail("creating the context");
    int rc = 0;
    for (int t = 0; t < 2; t++)
        for (int i = 0; !rc && i < OPTNET_ROWS; i++)
            for (int reuse = 0; !rc && reuse < 2; reuse++)
                rc = optnet_plan(ctx, &g_optnet_rows[i], tables[t].batch, tables[t].mode, reuse,
                                 &rep[t][i][reuse]);
    sl_context_free(ctx);
    if (rc)
        return rc;
    if (json) {
        printf("{\"bench\":\"optnet\",");
        optnet_json(rep[0], tables[0].mode, tables[0].batch);
        printf(",");
        optnet_json(rep[1], tables[1].mode, tables[1].batch);
        printf("}\n");
        return 0;
    }
    optnet_markdown(rep[0], tables[0].mode, tables[0].batch);
    optnet_markdown(rep[1], tables[1].mode, tables[1].batch);
    printf("\nBefore: every tensor in storage of its own (`sublinear plan --no-reuse`). After: "
           "the planner (in-place layers, outputs and gradInputs reused once their last reader "
           "ran, workspaces shared, one arena). Totals include parameters and, in training, their "
           "gradients (no optimizer state).\n");
    return 0;
}

/* ---- the bench programs --------------------------------------------- */

/* The directory of this executable, from /proc/self/exe or argv0. */
static int self_dir(const char *argv0, char *dir, size_t size)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0)
        path[n] = '\0';
    else if (argv0 && strchr(argv0, '/') && strlen(argv0) < sizeof path)
        strcpy(path, argv0);
    else
        return -1;
    char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= size)
        return -1;
    *slash = '\0';
    snprintf(dir, size, "%s", path[0] ? path : "/");
    return 0;
}

/* Finds a bench program; writes its path and returns 0, or -1. */
static int find_program(const char *argv0, const char *program, char *path, size_t size)
{
    char self[PATH_MAX];
    const char *env = getenv("SL_BENCH_DIR");
    if (env && *env) {
        int n = snprintf(path, size, "%s/%s", env, program);
        if (n > 0 && (size_t)n < size && access(path, X_OK) == 0)
            return 0;
    }
    if (self_dir(argv0, self, sizeof self) != 0)
        return -1;
    static const char *const rel[] = {"bench", "../libexec/sublinear"};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        int n = snprintf(path, size, "%s/%s/%s", self, rel[i], program);
        if (n > 0 && (size_t)n < size && access(path, X_OK) == 0)
            return 0;
    }
    return -1;
}

static int bench_list(const char *argv0, int argc, char **argv)
{
    int json = argc == 1 && strcmp(argv[0], "--json") == 0;
    if (argc > 1 || (argc == 1 && !json))
        return cli_usage_error(&cli_bench_command, "list takes only --json");
    char path[PATH_MAX];
    printf(json ? "{\"benches\":[{\"name\":\"optnet\",\"program\":null,\"available\":true}"
                : "optnet     built in\n");
    for (size_t i = 0; i < sizeof g_programs / sizeof *g_programs; i++) {
        const bench_program *p = &g_programs[i];
        int found = find_program(argv0, p->program, path, sizeof path) == 0;
        if (json) {
            printf(",{\"name\":\"%s\",\"program\":", p->name);
            cli_json_string(stdout, found ? path : NULL);
            printf(",\"available\":%s}", found ? "true" : "false");
        } else {
            printf("%-10s %s\n", p->name, found ? path : "not built (target of -DSL_BUILD_BENCH=ON)");
        }
    }
    if (json)
        printf("]}\n");
    return 0;
}

static int bench_program_run(const char *argv0, const bench_program *p, int argc, char **argv)
{
    char path[PATH_MAX];
    int found = find_program(argv0, p->program, path, sizeof path) == 0;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: sublinear bench %s [options]\n%s\noptions (passed to %s):\n%s"
                   "program: %s\n", p->name, p->summary, p->program, p->options,
                   found ? path : "not built (target of -DSL_BUILD_BENCH=ON)");
            return 0;
        }
    if (!found) {
        fprintf(stderr, "sublinear bench: %s not found in $SL_BENCH_DIR, bench/ beside this "
                "command or ../libexec/sublinear; build it (cmake --build BUILD --target %s, "
                "in a build configured with -DSL_BUILD_BENCH=ON, the default)\n",
                p->program, p->program);
        return CLI_EXIT_FAIL;
    }
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args)
        return CLI_EXIT_FAIL;
    args[0] = path;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    fflush(stdout);
    execv(path, args);
    fprintf(stderr, "sublinear bench: cannot run %s: %s\n", path, strerror(errno));
    free(args);
    return CLI_EXIT_FAIL;
}

static int run_bench(const cli_command *self, const char *argv0, int argc, char **argv)
{
    if (argc == 0)
        return cli_usage_error(self, "which benchmark? (optnet, conv, resnet152, or list)");
    const char *name = argv[0];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        cli_usage(stdout, self);
        return 0;
    }
    if (strcmp(name, "optnet") == 0)
        return bench_optnet(argc - 1, argv + 1);
    if (strcmp(name, "list") == 0)
        return bench_list(argv0, argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof g_programs / sizeof *g_programs; i++)
        if (strcmp(name, g_programs[i].name) == 0)
            return bench_program_run(argv0, &g_programs[i], argc - 1, argv + 1);
    return cli_usage_error(self, "unknown benchmark '%s'", name);
}

const cli_command cli_bench_command = {
    .name = "bench",
    .summary = "run a benchmark (optnet tables, conv kernels, ResNet-152)",
    .usage = g_bench_help,
    .run_words = run_bench,
};
