/*
 * cli.h — what the files of the `sublinear` command share: the table entry
 * of a command and the option machinery that reads its words (args.c), the
 * options of the network commands (net_options.c), and small helpers for
 * building a network and printing memory reports and JSON (common.c).
 *
 * The command sits on top of the public API only (include/sublinear.h):
 * it builds a network, asks for plans and reports, and runs steps.
 * Exit codes: 0 success, 1 a failure while running (a missing or malformed
 * file, a budget no schedule meets, a library error), 2 bad arguments
 * (always with a usage message on stderr).
 */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sublinear.h"

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* ---- commands and their options (args.c) ---- */

/* One option of a command. id is the command's own number for it. In a
 * table several commands share, commands is the mask of those that take
 * it (their cli_command.mask); 0: every command of the table. has_value:
 * it takes the next word, or what follows '=' (--steps 3, --steps=3). */
typedef struct cli_option {
    const char *name;
    int id;
    unsigned commands;
    int has_value;
} cli_option;

typedef struct cli_command cli_command;

/* A command: one entry of the table in sublinear.c. Most read their words
 * with cli_parse into an options struct of their own (options_size bytes,
 * filled by defaults, set and check) that run then takes; a command whose
 * words pass through (bench) has run_words instead. */
struct cli_command {
    const char *name;
    const char *summary; /* its line in `sublinear --help` */
    const char *usage; /* `sublinear NAME --help`, and after a bad command line */
    void (*usage_more)(FILE *f); /* printed after the usage; NULL: nothing */
    const cli_option *options; /* up to an entry with a NULL name */
    unsigned mask; /* its bit in a shared option table */
    int takes_arguments; /* words that are no option go to set with opt NULL */
    size_t options_size;
    void (*defaults)(const cli_command *self, void *opts);
    /* Stores one option (or argument). Returns 0, or CLI_EXIT_USAGE after
     * cli_usage_error said what is wrong with the value. */
    int (*set)(const cli_command *self, void *opts, const cli_option *opt, const char *value);
    /* After the last word: what single options cannot say (required
     * options, combinations). Returns 0 or CLI_EXIT_USAGE. */
    int (*check)(const cli_command *self, void *opts);
    int (*run)(void *opts);
    void (*release)(void *opts); /* frees what set allocated; NULL: nothing */
    int (*run_words)(const cli_command *self, const char *argv0, int argc, char **argv);
};

/* The commands (each defined by its file; the table is in sublinear.c). */
extern const cli_command cli_train_command, cli_plan_command, cli_dot_command,
    cli_memplot_command, cli_bench_command, cli_tokenize_command, cli_sample_command;

/* Reads argv (the words after the command's name) into opts through
 * cmd's table and hooks: unknown options, options of other commands,
 * missing and unwanted values are usage errors. Returns 0, or
 * CLI_EXIT_USAGE after printing what is wrong and the usage. --help
 * prints the command's usage on stdout and sets *help. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *opts, int *help);

/* Defaults, cli_parse, run, release: the whole of a parsed command. */
int cli_parse_and_run(const cli_command *cmd, int argc, char **argv);

/* The usage of a command: its text, then what usage_more adds. */
void cli_usage(FILE *f, const cli_command *cmd);

/* Prints "sublinear CMD: <message>", then the usage of CMD, on stderr;
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A decimal integer in [lo, hi], nothing after it. Returns 0 or -1. */
int cli_parse_int(const char *s, long lo, long hi, int *out);
/* A decimal integer >= 0 that fits uint64_t, nothing after it. 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);

/* ---- the network commands: train, plan, dot, memplot (net_options.c) ---- */

/* Their bits in the option table they share. */
typedef enum cli_net_command {
    CLI_TRAIN = 1 << 0,
    CLI_PLAN = 1 << 1,
    CLI_DOT = 1 << 2,
    CLI_MEMPLOT = 1 << 3,
} cli_net_command;

typedef struct cli_options {
    cli_net_command cmd;
    const char *model;
    int steps, batch, res, classes, threads, eval_samples, log_every, snapshot_every;
    int json, no_reuse, quiet, bn_rescale, distributed, no_memory_check, explain;
    int gpu, gpu_set, tf32; /* --gpu N (gpu_set: given), --tf32 */
    sl_precision precision;  /* --precision f32|bf16 */
    sl_file_dtype save_dtype; /* of --save-model */
    int res_set, classes_set; /* given on the command line */
    float lr;
    uint64_t seed;
    sl_schedule schedule;
    char schedule_text[64];
    sl_mode mode;
    sl_device device;
    const char *output, *schedules, *optimizer;
    const char *dataset, *data_dir;
    const char *save_model, *snapshot, *resume;
    /* train: --clip, --warmup / --lr-min (warmup_set: cosine), --accum */
    float clip, lr_min;
    int warmup, warmup_set, lr_min_set, accum;
    int update_in_backward; /* --update-in-backward */
    /* --model gpt2: --seq, the shape (--layers --embd --heads --vocab
     * --context), --dropout, the held-out shard --val (--data is the
     * training shard), --load-model; optimizer_set: --optimizer given */
    int seq, layers, embd, heads, vocab, context, optimizer_set, lm_options;
    float dropout;
    const char *val_data, *load_model;
    int allow_nonfinite; /* --allow-nonfinite: load NaN / infinite tensors */
    int shard; /* --shard: sl_dist_options.shard of --distributed, or planned */
    int ranks; /* plan --ranks */
    int lr_set; /* --lr given */
} cli_options;

/* The option table the network commands share, and its hooks. */
extern const cli_option cli_net_options[];
void cli_net_defaults(const cli_command *self, void *opts);
int cli_net_set(const cli_command *self, void *opts, const cli_option *opt, const char *value);
int cli_net_check(const cli_command *self, void *opts);
/* "schedules: ..." and "models: ...", after their usage and the command's. */
void cli_print_schedules_and_models(FILE *f);

/* The members of a network command's entry that say how it reads its
 * words: bit is its cli_net_command. */
#define CLI_NET_COMMAND(bit)                                                                    \
    .usage_more = cli_print_schedules_and_models, .options = cli_net_options, .mask = (bit),   \
    .options_size = sizeof(cli_options), .defaults = cli_net_defaults, .set = cli_net_set,      \
    .check = cli_net_check

/* ---- helpers (common.c) ---- */

/* Prints "sublinear: <what>: <sl_last_error()>" on stderr; returns
 * CLI_EXIT_FAIL. */
int cli_fail(const char *what);

/* Creates the context and a network of o->model under o->schedule with
 * o->classes classes sized for o->res, memory reuse and the optimizer as
 * the options say. On failure prints why, frees what it made and returns
 * CLI_EXIT_FAIL; on success the caller frees *net then *ctx. */
int cli_build(const cli_options *o, sl_context **ctx, sl_net **net);

/* Mode names "train" / "infer" and schedule labels for output. */
const char *cli_mode_name(sl_mode mode);

/* This process's index among the ranks on its node, from the launcher's
 * environment (Open MPI, MPICH, Slurm); 0 when none says. The CUDA device
 * a --distributed rank takes when --gpu is not given. */
int cli_local_rank(void);

double cli_mib(uint64_t bytes);
/* A report as aligned lines, by category, indented. */
void cli_print_report(FILE *f, const sl_memory_report *r);
/* A report as one JSON object (sl_memory_report_json). */
void cli_json_report(FILE *f, const sl_memory_report *r);
/* Seconds on a monotonic clock. */
double cli_now_seconds(void);
/* The bar of a progress line: CLI_BAR_WIDTH characters, '#' for the share
 * of steps done, '.' for the rest, NUL-terminated. */
#define CLI_BAR_WIDTH 24
void cli_progress_bar(char bar[CLI_BAR_WIDTH + 1], int64_t step, int steps);
/* Plans one training step under `schedule` (into *planned) and under
 * keep-everything (*baseline), leaving the network's schedule as it was
 * set. Returns 0, or CLI_EXIT_FAIL after printing why. */
int cli_plan_with_baseline(sl_net *net, sl_shape shape, sl_schedule schedule,
                           sl_memory_report *planned, sl_memory_report *baseline);
/* A number for JSON (null when not finite), on stdout. */
void cli_json_number(double v);
/* "activation memory saved against keep-everything: ..." for a run's
 * report m against the keep-everything baseline, on stdout. */
void cli_print_saving(const sl_memory_report *baseline, const sl_memory_report *m);
/* The end of a train command's JSON object, on stdout: the memory report,
 * the baseline's, the saving, the saved model and snapshot paths, "}". */
void cli_json_memory_end(const cli_options *o, const sl_memory_report *m,
                         const sl_memory_report *baseline);
/* s as a JSON string literal, quotes included; NULL as null. */
void cli_json_string(FILE *f, const char *s);

/* Whether the options name a language model (gpt2): token inputs. */
int cli_is_lm(const cli_options *o);
/* The GPT-2 shape the options give (--layers --embd --heads --vocab
 * --context --dropout). */
sl_gpt2_config cli_gpt2_config(const cli_options *o);
/* The input of one step: {batch, 3, res, res}, or {batch, 1, seq, 1}
 * token ids for a language model. */
sl_shape cli_input_shape(const cli_options *o);
/* The learning rate of step s: with --warmup, warmup then cosine down to
 * --lr-min at the last step; else o->lr, a tenth of it from half of the
 * run on when the run is longer than 10 steps. */
float cli_lr_at(const cli_options *o, int64_t step);

#endif
