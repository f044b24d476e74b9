/*
 * common.h — what the C benchmarks share: a monotonic clock, the median of
 * repeated timings, and how busy other processes kept the machine while a
 * benchmark ran (the benches report ratios from shared machines, so each
 * result carries this noise indicator), the process's resident set, one
 * table-driven reader of command lines, and the measured step loop and
 * its report that the training benches (GPT-2, ResNet) share.
 */
#ifndef SL_BENCH_COMMON_H
#define SL_BENCH_COMMON_H

#include <stdint.h>

#include "sublinear.h"

/* Seconds on a monotonic clock. */
double bench_now_s(void);

/* qsort comparator for doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* Sorts v[0..n) and returns its median (the mean of the middle two when n
 * is even); n >= 1. */
double bench_median(double *v, int n);

/* The timed steps of a training bench: times[step] in seconds (n of them,
 * the caller's array) and the first and last step's loss. */
typedef struct bench_steps {
    double *times;
    int n;
    float first_loss, last_loss;
} bench_steps;

/* Records step `step` (from 0): its seconds and loss; unless quiet, prints
 * "step K: S s, loss L, RSS R MiB". */
void bench_steps_record(bench_steps *b, int step, double seconds, float loss, int quiet);

/* The median of the steps after the warm-up (the first), or the warm-up's
 * own time when there is one step; *counted gets how many steps it covers.
 * Reorders times[1..n). */
double bench_steps_median(bench_steps *b, int *counted);

/* Start of a measured interval: wall clock, the machine's busy CPU time
 * (/proc/stat, all cores) and this process's CPU time. */
typedef struct bench_load {
    double wall_s, busy_s, own_s;
} bench_load;

void bench_load_start(bench_load *l);

/* Share of all cores, in percent, that other processes kept busy since
 * bench_load_start; -1 where /proc/stat cannot be read. */
double bench_load_foreign_pct(const bench_load *l);

/* Peak resident set of this process in bytes (ru_maxrss is KiB on Linux). */
uint64_t bench_peak_rss(void);

/* Resident set now, in bytes (/proc/self/statm), or 0. */
uint64_t bench_current_rss(void);

/* Bytes in MiB. */
double bench_mib(uint64_t bytes);

/* What a command-line option sets, and how it reads its value. */
typedef enum bench_opt_kind {
    BENCH_FLAG,   /* no value: *(int *)dest = value */
    BENCH_INT,    /* a whole number in [min, max] into an int, else refused */
    BENCH_ATOI,   /* atoi's reading into an int, unchecked (the bench checks) */
    BENCH_DOUBLE, /* atof's reading into a double */
    BENCH_U64,    /* strtoull's reading (base 10) into a uint64_t */
    BENCH_STRING, /* the argument itself into a const char * */
    BENCH_WORD    /* the value must be `word`: *(int *)dest = 1 */
} bench_opt_kind;

/* One option of a bench's command line; a table of them ends with a
 * zeroed entry (name NULL). */
typedef struct bench_opt {
    const char *name; /* "--batch" */
    bench_opt_kind kind;
    void *dest;       /* the caller's variable, of the kind's type */
    int value;        /* BENCH_FLAG: what it stores */
    long min, max;    /* BENCH_INT: the accepted range */
    const char *word; /* BENCH_WORD: the one value accepted */
} bench_opt;

/* Table entries: a flag storing `value`; a whole number in [min, max]; an
 * option of another kind (ATOI, DOUBLE, U64, STRING); the one word a
 * value may be; the end of the table. */
#define BENCH_OPT_FLAG(name, dest, value) {name, BENCH_FLAG, dest, value, 0, 0, NULL}
#define BENCH_OPT_INT(name, dest, min, max) {name, BENCH_INT, dest, 0, min, max, NULL}
#define BENCH_OPT(name, kind, dest) {name, kind, dest, 0, 0, 0, NULL}
#define BENCH_OPT_WORD(name, dest, word) {name, BENCH_WORD, dest, 0, 0, 0, word}
#define BENCH_OPT_END {NULL, BENCH_FLAG, NULL, 0, 0, 0, NULL}

/* Reads argv[1..argc) against opts, storing each value as it comes (a later
 * option overrides an earlier one). Returns 0, or -1 for an unknown option,
 * a missing value or a value refused: the caller prints its usage. */
int bench_parse_args(int argc, char **argv, const bench_opt *opts);

/* Prints "usage: PROGRAM OPTIONS" (OPTIONS as given, its newline included)
 * to stderr and exits with status 2. */
_Noreturn void bench_usage(const char *program, const char *options);

/* Prints "BENCH: WHAT: <sl_last_error()>" to stderr; returns 1, the exit
 * status of a failed bench. */
int bench_fail(const char *bench, const char *what);

/* A context with `threads` threads and `seed`; *ctx gets it (the caller
 * frees it). Returns 0, or bench_fail's 1 ("creating the context"). */
int bench_context(const char *bench, int threads, uint64_t seed, sl_context **ctx);

/* Plans net at shape s for training under schedule sc; *out gets the
 * report. Returns 0, or bench_fail's 1. */
int bench_plan(const char *bench, sl_net *net, sl_schedule sc, sl_shape s, sl_memory_report *out);

/* The least planned peak any schedule reaches for training net at shape
 * s, read from the operator-level budget search's refusal of a 1-byte
 * budget (the refusal names it, and a budget of that size gets that
 * schedule); 0 where it cannot be read. The benches' "least" runs
 * SL_SCHEDULE_BUDGET_OPS of it: its search covers the block-level one's
 * families too, so at the same peak it never recomputes more (ResNet-152
 * b16: 35.8 % of a step's FLOPs against 38.3 % for SL_SCHEDULE_BUDGET).
 * Leaves net's schedule at the refused budget: set the one to run
 * afterwards. */
uint64_t bench_least_budget(sl_net *net, sl_shape s);

/* One training step of a bench: prepares its batch, then runs the step
 * alone under the clock; *seconds and *loss get the step's time and loss.
 * Returns 0, or 1 after printing why it failed. */
typedef int (*bench_step_fn)(void *arg, int step, double *seconds, float *loss);

/* What a training bench measured: the steps, the median after the warm-up
 * (over `counted` steps), the warm-up's time, other processes' share of
 * the cores, the resident set before the first step (the caller's) and at
 * its peak, and the library's own figures after the steps. */
typedef struct bench_run {
    bench_steps steps;
    double median_s, warmup_s, foreign_pct;
    int counted;
    uint64_t rss_base, rss_peak;
    sl_memory_report after;
} bench_run;

/* Runs r->steps.n steps of `step` (printing each unless quiet), then fills
 * in the rest of *r from them and from net at shape s. r->steps.times
 * holds r->steps.n doubles (the caller's). Returns 0, or 1 after printing
 * why. */
int bench_measure(const char *bench, sl_net *net, sl_shape s, bench_step_fn step, void *arg,
                  int quiet, bench_run *r);

/* The keys of a measured run in a bench's JSON object, from
 * "arena_measured" to "warmup_s", each followed by a comma. */
/* "cpu_model", "cpu_kernels" (sl_cpu_kernels_describe) and
 * "openblas_coretype" JSON fields, each followed by a comma. */
void bench_print_machine_json(void);
/* The CPU threads ctx's kernels run on (its threads, or all when 0). */
int bench_context_threads(const sl_context *ctx);
void bench_print_run_json(const bench_run *r);

/* What a GPU result was measured on (gpu_info.c), as JSON fields each
 * followed by a comma: "device" (CUDA device `gpu`'s name), "cuda_driver",
 * "cudart", "cudnn" (cudnnGetVersion: 91900 is 9.19.0), "cublas"
 * ("13.0.2"), "cublaslt" (cublasLtGetVersion) and "gpu_libs" (the files
 * of the CUDA runtime, cuDNN, cuBLAS and NCCL this process mapped); null
 * where not loaded. Call it after the context is made and a step ran, so
 * that what the step loaded is listed. */
void bench_print_gpu_json(int gpu);

/* The text lines after a run: planned against measured memory, peak RSS,
 * s/step with the recompute share of `planned`, and the load of others. */
void bench_print_run_text(const sl_memory_report *planned, const bench_run *r);

#endif
