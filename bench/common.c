/*
 * common.c — clock, median, machine-load and memory helpers, the command-line
 * reader and the measured step loop of the C benchmarks (see common.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf */

#include "common.h"
#include "base/base.h"
#include "cpu/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* strtol's reading of a whole decimal string within [min, max]. */
static int parse_int(const char *s, long min, long max, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

static int set_value(const bench_opt *o, const char *v)
{
    switch (o->kind) {
    case BENCH_INT:
        return parse_int(v, o->min, o->max, o->dest);
    case BENCH_ATOI:
        *(int *)o->dest = atoi(v);
        return 0;
    case BENCH_DOUBLE:
        *(double *)o->dest = atof(v);
        return 0;
    case BENCH_U64:
        *(uint64_t *)o->dest = (uint64_t)strtoull(v, NULL, 10);
        return 0;
    case BENCH_STRING:
        *(const char **)o->dest = v;
        return 0;
    case BENCH_WORD:
        if (strcmp(v, o->word) != 0)
            return -1;
        *(int *)o->dest = 1;
        return 0;
    default:
        return -1;
    }
}

int bench_parse_args(int argc, char **argv, const bench_opt *opts)
{
    for (int i = 1; i < argc; i++) {
        const bench_opt *o = opts;
        while (o->name && strcmp(o->name, argv[i]) != 0)
            o++;
        if (!o->name)
            return -1;
        if (o->kind == BENCH_FLAG)
            *(int *)o->dest = o->value;
        else if (i + 1 >= argc || set_value(o, argv[++i]) != 0)
            return -1;
    }
    return 0;
}

_Noreturn void bench_usage(const char *program, const char *options)
{
    fprintf(stderr, "usage: %s %s", program, options);
    exit(2);
}

int bench_fail(const char *bench, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", bench, what, sl_last_error());
    return 1;
}

int bench_context(const char *bench, int threads, uint64_t seed, sl_context **ctx)
{
    sl_context_options co = sl_context_defaults();
    co.threads = threads;
    co.seed = seed;
    if (sl_context_create(&co, ctx) != SL_OK)
        return bench_fail(bench, "creating the context");
    return 0;
}

int bench_plan(const char *bench, sl_net *net, sl_schedule sc, sl_shape s, sl_memory_report *out)
{
    if (sl_net_set_schedule(net, sc) != SL_OK)
        return bench_fail(bench, "setting the schedule");
    if (sl_net_memory_report(net, s, SL_MODE_TRAIN, out) != SL_OK)
        return bench_fail(bench, "planning");
    return 0;
}

uint64_t bench_least_budget(sl_net *net, sl_shape s)
{
    static const char said[] = "smallest planned peak is ";
    sl_memory_report tmp;
    if (sl_net_set_schedule(net, SL_SCHEDULE_BUDGET_OPS(1)) != SL_OK ||
        sl_net_memory_report(net, s, SL_MODE_TRAIN, &tmp) != SL_ERR_BUDGET)
        return 0;
    const char *at = strstr(sl_last_error(), said);
    return at ? strtoull(at + strlen(said), NULL, 10) : 0;
}

int bench_measure(const char *bench, sl_net *net, sl_shape s, bench_step_fn step, void *arg,
                  int quiet, bench_run *r)
{
    bench_load load;
    bench_load_start(&load);
    for (int i = 0; i < r->steps.n; i++) {
        double seconds;
        float loss;
        if (step(arg, i, &seconds, &loss) != 0)
            return 1;
        bench_steps_record(&r->steps, i, seconds, loss, quiet);
    }
    r->foreign_pct = bench_load_foreign_pct(&load);
    r->warmup_s = r->steps.times[0];
    r->median_s = bench_steps_median(&r->steps, &r->counted);
    if (sl_net_memory_report(net, s, SL_MODE_TRAIN, &r->after) != SL_OK)
        return bench_fail(bench, "reporting memory");
    r->rss_peak = bench_peak_rss();
    return 0;
}

/* The machine a CPU result comes from: the CPU's model name, what the
 * CPU backend's kernels dispatch to, and OpenBLAS's core type if the
 * environment holds it to one (JSON fields, each followed by a comma). */
static void print_json_string(const char *key, const char *value)
{
    printf("\"%s\":\"", key);
    for (const char *c = value; *c; c++)
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if ((unsigned char)*c >= 0x20)
            putchar(*c);
    printf("\",");
}

void bench_print_machine_json(void)
{
    char model[256] = "unknown", line[512], kernels[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(model, sizeof model, "%s", colon + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
    const char *core = getenv("OPENBLAS_CORETYPE");
    print_json_string("cpu_model", model);
    print_json_string("cpu_kernels", sl_cpu_kernels_describe(kernels, sizeof kernels));
    print_json_string("openblas_coretype", core ? core : "");
}

int bench_context_threads(const sl_context *ctx) { return sl_context_threads(ctx); }

void bench_print_run_json(const bench_run *r)
{
    bench_print_machine_json();
    printf("\"arena_measured\":%llu,\"measured_total\":%llu,\"rss_baseline\":%llu,"
           "\"peak_rss\":%llu,\"s_per_step\":%.4f,\"warmup_s\":%.4f,",
           (unsigned long long)r->after.arena_measured, (unsigned long long)r->after.measured_total,
           (unsigned long long)r->rss_base, (unsigned long long)r->rss_peak, r->median_s,
           r->warmup_s);
}

void bench_print_run_text(const sl_memory_report *planned, const bench_run *r)
{
    printf("planned total %.1f MiB, measured by the library %.1f MiB (arena %.1f / %.1f "
           "MiB planned)\n",
           bench_mib(planned->total), bench_mib(r->after.measured_total),
           bench_mib(r->after.arena_measured), bench_mib(planned->arena_bytes));
    printf("peak RSS %.1f MiB (baseline %.1f MiB)\n", bench_mib(r->rss_peak),
           bench_mib(r->rss_base));
    printf("%.3f s/step (median of %d after a %.3f s warm-up), recompute %.1f%%\n", r->median_s,
           r->counted, r->warmup_s, 100.0 * planned->recompute_fraction);
    if (r->foreign_pct >= 0.0)
        printf("other processes used %.1f%% of the cores meanwhile\n", r->foreign_pct);
}
