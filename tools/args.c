/*
 * args.c — the option machinery of the `sublinear` command: it reads a
 * command's words through the command's own table and hooks (cli.h) and
 * prints its usage. It knows no command: what an option means, which
 * values are good and which combinations are not, each command says.
 *
 * Values follow the option as the next word or after '=' (--steps 3,
 * --steps=3). An option that a shared table gives to other commands only
 * is an error (exit 2) rather than silently ignored.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_usage(FILE *f, const cli_command *cmd)
{
    fputs(cmd->usage, f);
    if (cmd->usage_more)
        cmd->usage_more(f);
}

int cli_usage_error(const cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sublinear %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n");
    cli_usage(stderr, cmd);
    return CLI_EXIT_USAGE;
}

int cli_parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The entry of cmd's table named by the first len characters of word. */
static const cli_option *find_option(const cli_command *cmd, const char *word, size_t len)
{
    for (const cli_option *opt = cmd->options; opt->name; opt++)
        if (strlen(opt->name) == len && strncmp(opt->name, word, len) == 0)
            return opt;
    return NULL;
}

/* A word that is no option: it does not start with '-', or is "-". */
static int is_argument(const char *word)
{
    return word[0] != '-' || word[1] == '\0';
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, int *help)
{
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_usage(stdout, cmd);
            *help = 1;
            return 0;
        }
        if (cmd->takes_arguments && is_argument(a)) {
            if (cmd->set(cmd, opts, NULL, a) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        const cli_option *opt = find_option(cmd, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!opt)
            return cli_usage_error(cmd, "unknown option '%s'", a);
        if (opt->commands && !(opt->commands & cmd->mask))
            return cli_usage_error(cmd, "%s does not apply to %s", opt->name, cmd->name);
        const char *v = NULL;
        if (opt->has_value) {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return cli_usage_error(cmd, "%s needs a value", opt->name);
        } else if (eq) {
            return cli_usage_error(cmd, "%s takes no value", opt->name);
        }
        if (cmd->set(cmd, opts, opt, v) != 0)
            return CLI_EXIT_USAGE;
    }
    return cmd->check ? cmd->check(cmd, opts) : 0;
}

int cli_parse_and_run(const cli_command *cmd, int argc, char **argv)
{
    void *opts = calloc(1, cmd->options_size);
    if (!opts) {
        fprintf(stderr, "sublinear %s: out of memory\n", cmd->name);
        return CLI_EXIT_FAIL;
    }
    int help = 0;
    if (cmd->defaults)
        cmd->defaults(cmd, opts);
    int rc = cli_parse(cmd, argc, argv, opts, &help);
    if (!rc && !help)
        rc = cmd->run(opts);
    if (cmd->release)
        cmd->release(opts);
    free(opts);
    return rc;
}
