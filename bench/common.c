/*
 * common.c — clock, median, machine-load and memory helpers of the C benchmarks
 * (see common.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf */

#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_steps_record(bench_steps *b, int step, double seconds, float loss, int quiet)
{
    b->times[step] = seconds;
    if (step == 0)
        b->first_loss = loss;
    b->last_loss = loss;
    if (!quiet) {
        printf("step %d: %.3f s, loss %.4f, RSS %.1f MiB\n", step + 1, seconds, loss,
               bench_mib(bench_current_rss()));
        fflush(stdout);
    }
}

double bench_steps_median(bench_steps *b, int *counted)
{
    int first = b->n > 1 ? 1 : 0;
    *counted = b->n - first;
    return bench_median(b->times + first, *counted);
}

/* Busy CPU seconds of the whole machine (all cores: not idle, not iowait),
 * or -1 where /proc/stat cannot be read. */
static double machine_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (!f)
        return -1.0;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                     &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got < 8)
        return -1.0;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

static double own_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void bench_load_start(bench_load *l)
{
    l->wall_s = bench_now_s();
    l->busy_s = machine_busy_s();
    l->own_s = own_cpu_s();
}

double bench_load_foreign_pct(const bench_load *l)
{
    double wall = bench_now_s() - l->wall_s, busy = machine_busy_s();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (l->busy_s < 0.0 || busy < 0.0 || ncpu <= 0 || wall <= 0.0)
        return -1.0;
    double pct = 100.0 * ((busy - l->busy_s) - (own_cpu_s() - l->own_s)) / (wall * (double)ncpu);
    return pct < 0.0 ? 0.0 : pct;
}

uint64_t bench_peak_rss(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024u;
}

uint64_t bench_current_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (!f)
        return 0;
    int got = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    return got == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

double bench_mib(uint64_t bytes) { return (double)bytes / 1048576.0; }
