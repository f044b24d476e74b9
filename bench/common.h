/*
 * common.h — what the C benchmarks share: a monotonic clock, the median of
 * repeated timings, and how busy other processes kept the machine while a
 * benchmark ran (the benches report ratios from shared machines, so each
 * result carries this noise indicator), and the process's resident set.
 */
#ifndef SL_BENCH_COMMON_H
#define SL_BENCH_COMMON_H

#include <stdint.h>

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

#endif
