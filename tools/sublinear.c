/*
 * sublinear.c — the `sublinear` command: its entry point, which picks the
 * subcommand. The command is the library seen from the outside:
 *
 *   sublinear train   [--model resnet20] [--dataset synthetic|mnist|cifar10 --data DIR]
 *                     [--steps 300] [--batch 32] [--schedule sqrt] [--save-model PATH] ...
 *   sublinear plan    --model resnet152 --batch 16 --res 224 --schedule sqrt [--json]
 *   sublinear dot     --model resnet20 --res 32 --batch 8 -o net.dot [--no-reuse]
 *   sublinear memplot --model resnet152 --schedules none,sqrt -o timeline.svg
 *   sublinear bench   optnet|conv|resnet152|list [options]
 *   sublinear tokenize --vocab encoder.json --merges vocab.bpe --out train.bin IN.txt...
 *   sublinear sample  --model-file model.safetensors --config config.json --prompt TEXT
 *
 * Files: args.c (options, usage), common.c (building, reports),
 * cmd_train.c (datasets from the library: sl_dataset_*), cmd_plan.c (plan,
 * dot, memplot), cmd_bench.c, cmd_tokenize.c, cmd_sample.c. Bad arguments print a usage message and exit
 * with status 2; failures while running exit with 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* OpenMP threads that spin at barriers collapse on a machine whose cores
 * other processes also use (ResNet-20 training measured 17x slower next to
 * one busy process). libgomp reads OMP_WAIT_POLICY before main runs, so
 * when the user has not chosen a policy the command starts itself again
 * with "passive" (threads sleep at barriers). SUBLINEAR_KEEP_WAIT_POLICY=1
 * keeps libgomp's default. */
static void prefer_passive_waits(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("SUBLINEAR_KEEP_WAIT_POLICY"))
        return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the default policy */
}

static const struct {
    const char *name;
    cli_command cmd;
    int (*run)(cli_options *o);
} g_commands[] = {
    {"train", CLI_TRAIN, cli_cmd_train},
    {"plan", CLI_PLAN, cli_cmd_plan},
    {"dot", CLI_DOT, cli_cmd_dot},
    {"memplot", CLI_MEMPLOT, cli_cmd_memplot},
};

int main(int argc, char **argv)
{
    prefer_passive_waits(argv);
    if (argc < 2) {
        cli_usage(stderr, NULL);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2 && strcmp(name, "help") == 0)
            name = argv[2];
        else
            name = NULL;
        if (name && strcmp(name, "bench") != 0 && strcmp(name, "tokenize") != 0 &&
            strcmp(name, "sample") != 0) {
            int known = 0;
            for (size_t i = 0; i < sizeof g_commands / sizeof *g_commands; i++)
                known |= strcmp(name, g_commands[i].name) == 0;
            if (!known) {
                fprintf(stderr, "sublinear: no command '%s'\n\n", name);
                cli_usage(stderr, NULL);
                return CLI_EXIT_USAGE;
            }
        }
        cli_usage(stdout, name);
        return 0;
    }
    if (strcmp(name, "version") == 0 || strcmp(name, "--version") == 0) {
        printf("sublinear %d.%d.%d\n", SL_VERSION_MAJOR, SL_VERSION_MINOR, SL_VERSION_PATCH);
        return 0;
    }
    if (strcmp(name, "bench") == 0)
        return cli_cmd_bench(argv[0], argc - 2, argv + 2);
    if (strcmp(name, "tokenize") == 0)
        return cli_cmd_tokenize(argc - 2, argv + 2);
    if (strcmp(name, "sample") == 0)
        return cli_cmd_sample(argc - 2, argv + 2);
    for (size_t i = 0; i < sizeof g_commands / sizeof *g_commands; i++) {
        if (strcmp(name, g_commands[i].name) != 0)
            continue;
        cli_options o;
        int help;
        cli_defaults(g_commands[i].cmd, &o);
        int rc = cli_parse(g_commands[i].cmd, argc - 2, argv + 2, &o, &help);
        if (rc || help)
            return rc;
        return g_commands[i].run(&o);
    }
    fprintf(stderr, "sublinear: unknown command '%s'\n\n", name);
    cli_usage(stderr, NULL);
    return CLI_EXIT_USAGE;
}
