/*
 * cli.h — what the files of the `sublinear` command share: the parsed
 * options, the argument parser, usage texts, and small helpers for
 * building a network and printing memory reports and JSON.
 *
 * The command sits on top of the public API only (include/sublinear.h):
 * it builds a network, asks for plans and reports, and runs steps.
 * Exit codes: 0 success, 1 a failure while running (a missing or malformed
 * file, a budget no schedule meets, a library error), 2 bad arguments
 * (always with a usage message on stderr).
 */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "sublinear.h"

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* The subcommands that take options from the shared table (bench has its
 * own parser: its options pass through to the bench programs). */
typedef enum cli_command {
    CLI_TRAIN = 1 << 0,
    CLI_PLAN = 1 << 1,
    CLI_DOT = 1 << 2,
    CLI_MEMPLOT = 1 << 3,
} cli_command;

typedef struct cli_options {
    cli_command cmd;
    const char *model;
    int steps, batch, res, classes, threads, eval_samples, log_every, snapshot_every;
    int json, no_reuse, quiet, bn_rescale, distributed, no_memory_check, explain;
    int gpu, gpu_set, tf32; /* --gpu N (gpu_set: given), --tf32 */
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
} cli_options;

/* The defaults of a command (train: resnet20 on the built-in dataset;
 * plan / dot / memplot: batch 16 at 224x224, 1000 classes). */
void cli_defaults(cli_command cmd, cli_options *o);

/* Parses argv (the words after the subcommand) into o. Returns 0, or
 * CLI_EXIT_USAGE after printing what is wrong and the usage. --help prints
 * the command's usage on stdout and sets *help. */
int cli_parse(cli_command cmd, int argc, char **argv, cli_options *o, int *help);

/* Usage of a command ("train", "plan", "dot", "memplot", "bench"), or of
 * the whole command when name is NULL. */
void cli_usage(FILE *f, const char *name);

/* Prints "sublinear CMD: <message>", then the usage of CMD, on stderr;
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A decimal integer in [lo, hi], nothing after it. Returns 0 or -1. */
int cli_parse_int(const char *s, long lo, long hi, int *out);

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

/* The subcommands. */
int cli_cmd_train(cli_options *o);
/* cli_fail(what) after a failed load, adding that --allow-nonfinite
 * loads the file when NaN or inf values were what it refused. */
int cli_load_failed(const char *what);
/* After a training run failed at (0-based) step: says on stderr what
 * --snapshot holds now (the last snapshot the run wrote, of
 * snapshot_step, or the file as it was when snapshot_step < 0); returns
 * CLI_EXIT_FAIL. */
int cli_train_stopped(const cli_options *o, int64_t snapshot_step, int64_t step);
/* 0 when every tensor of net is finite; else prints "sublinear: WHAT:
 * tensor ... holds ..." and returns CLI_EXIT_FAIL (before saving: no file
 * of a diverged run replaces a good one). */
int cli_check_params_finite(sl_net *net, const char *what);
/* train with --model gpt2 (cmd_train_lm.c), called by cli_cmd_train. */
int cli_cmd_train_lm(cli_options *o);
int cli_cmd_plan(cli_options *o);
int cli_cmd_dot(cli_options *o);
int cli_cmd_memplot(cli_options *o);
/* bench takes the raw words after "bench". argv0 locates the bench
 * programs when /proc/self/exe cannot. */
int cli_cmd_bench(const char *argv0, int argc, char **argv);
/* `sublinear tokenize` (cmd_tokenize.c), with its own parser like bench;
 * cli_tokenize_usage prints its usage. */
int cli_cmd_tokenize(int argc, char **argv);
void cli_tokenize_usage(FILE *f);
/* `sublinear sample` (cmd_sample.c), with its own parser; cli_sample_usage
 * prints its usage. */
int cli_cmd_sample(int argc, char **argv);
void cli_sample_usage(FILE *f);

#endif
