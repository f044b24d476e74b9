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
 * Each command is an entry (cli_command, cli.h) of the table below, defined
 * by its file with its usage, its options and its run function: cmd_train.c
 * (the training loop) with train_images.c and train_tokens.c (its batch
 * sources), cmd_plan.c (plan, dot, memplot), cmd_bench.c, cmd_tokenize.c,
 * cmd_sample.c. args.c reads a command's words through its entry;
 * net_options.c holds the options train, plan, dot and memplot share;
 * common.c builds networks and prints reports. Bad arguments print a usage
 * message and exit with status 2; failures while running exit with 1.
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

static int run_version(void *opts)
{
    (void)opts;
    printf("sublinear %d.%d.%d\n", SL_VERSION_MAJOR, SL_VERSION_MINOR, SL_VERSION_PATCH);
    return 0;
}

static const cli_option g_no_options[] = {{NULL, 0, 0, 0}};

static const cli_command g_version_command = {
    .name = "version",
    .summary = "print the version",
    .usage = "usage: sublinear version   (or sublinear --version)\n"
             "  Prints the version of sublinear.\n",
    .options = g_no_options,
    .options_size = 1,
    .run = run_version,
};

/* The commands, in the order `sublinear --help` lists them. */
static const cli_command *const g_commands[] = {
    &cli_train_command, &cli_plan_command,     &cli_dot_command,   &cli_memplot_command,
    &cli_bench_command, &cli_tokenize_command, &cli_sample_command, &g_version_command,
};

static const cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof g_commands / sizeof *g_commands; i++)
        if (strcmp(name, g_commands[i]->name) == 0)
            return g_commands[i];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sublinear COMMAND [options]   (sublinear COMMAND --help for more)\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof g_commands / sizeof *g_commands; i++)
        fprintf(f, "  %-8s %s\n", g_commands[i]->name, g_commands[i]->summary);
    fprintf(f, "exit status: 0 success, 1 failure, 2 bad arguments\n\n");
    cli_print_schedules_and_models(f);
}

/* "sublinear: MESSAGE 'name'", then the usage; returns CLI_EXIT_USAGE. */
static int no_such_command(const char *message, const char *name)
{
    fprintf(stderr, "sublinear: %s '%s'\n\n", message, name);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    prefer_passive_waits(argv);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc == 2 || strcmp(name, "help") != 0) {
            usage(stdout);
            return 0;
        }
        const cli_command *cmd = find_command(argv[2]);
        if (!cmd)
            return no_such_command("no command", argv[2]);
        cli_usage(stdout, cmd);
        return 0;
    }
    const cli_command *cmd = find_command(strcmp(name, "--version") == 0 ? "version" : name);
    if (!cmd)
        return no_such_command("unknown command", name);
    if (cmd->run_words)
        return cmd->run_words(cmd, argv[0], argc - 2, argv + 2);
    return cli_parse_and_run(cmd, argc - 2, argv + 2);
}
