/*
 * test_memory_limit.c — a step larger than memory fails cleanly. The
 * command trains a ResNet-20 whose keep-everything arena (1.16 GiB at
 * batch 16, 224x224) exceeds an address-space limit 768 MiB above what the
 * libraries map (RLIMIT_AS, which needs no privilege; a memory cgroup is
 * read the same way): it must exit
 * with status 1, before allocating the arena, with a message giving the
 * planned and the available memory and a budget schedule that fits (or
 * that none does). The check covers the whole step: a ResNet-152 with a
 * million classes and Adam (31 GiB of parameters, gradients and state,
 * 37 MiB of activations) fails before anything is allocated, naming the
 * fixed bytes, and planning it allocates none of them; a step whose arena
 * fits but not the BLAS's work buffers and the threads' stacks besides
 * (where OpenBLAS would retry its mmap forever) fails, and the budget it
 * advises runs under the same limit. The training command checks its step
 * with its batch before it allocates the batch (its peak memory stays
 * that of planning). The commands run with an alarm, so a
 * hang fails the test. Under AddressSanitizer (which reserves terabytes of
 * address space) the limit cannot be set: skipped visibly.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define SL_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SL_UNDER_ASAN 1
#endif
#endif

#ifndef SL_UNDER_ASAN
/* This process's mapped bytes: the command links the same libraries, so
 * the limit is set this far above them (CUDA's libraries alone map most of
 * a GiB). */
static rlim_t own_vm_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert(f);
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
            break;
    fclose(f);
    ck_assert(kb > 0);
    return (rlim_t)kb * 1024;
}

/* Runs the command under an address-space limit; its stderr into out;
 * its peak resident memory in KiB into *max_rss_kb when not NULL. */
static int run_limited_rss(rlim_t limit, char *const argv[], char *out, size_t n,
                           long *max_rss_kb)
{
    int fds[2];
    ck_assert(pipe(fds) == 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {limit, limit};
        dup2(fds[1], 2);
        dup2(fds[1], 1);
        close(fds[0]);
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(97);
        alarm(120); /* kept across exec: a hang ends as SIGALRM */
        execv(SL_CLI_PATH, argv);
        _exit(98);
    }
    close(fds[1]);
    size_t at = 0;
    ssize_t got;
    while (at + 1 < n && (got = read(fds[0], out + at, n - 1 - at)) > 0)
        at += (size_t)got;
    out[at] = '\0';
    close(fds[0]);
    int status;
    struct rusage usage;
    ck_assert(wait4(pid, &status, 0, &usage) == pid);
    ck_assert_msg(WIFEXITED(status), "the command was killed (signal %d): %s",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, out);
    if (max_rss_kb)
        *max_rss_kb = usage.ru_maxrss;
    return WEXITSTATUS(status);
}

static int run_limited(rlim_t limit, char *const argv[], char *out, size_t n)
{
    return run_limited_rss(limit, argv, out, n, NULL);
}


/* The "N.NN GiB in use" of a memory-check message (the command's own
 * address space at its check), or 0 when out has none. */
static double in_use_gib(const char *out)
{
    const char *use = strstr(out, " GiB in use");
    if (!use)
        return 0.0;
    const char *num = use;
    while (num > out && (num[-1] == '.' || (num[-1] >= '0' && num[-1] <= '9')))
        num--;
    return strtod(num, NULL);
}

/* run_limited for a run that must give the command the room a limit was
 * computed for: the address space the command has mapped at its memory
 * check differs between runs by a thread's buffers (mapped before or
 * after the check, as the threads happen to be scheduled on a loaded
 * machine), so a run whose check read another "in use" than want_gib is
 * repeated with the limit moved by the difference, the same room beside
 * what the command holds, up to four times. A run that passed its check
 * says nothing of it and is taken as it is. *limit becomes the limit of
 * the run returned. */
static int run_at_in_use(rlim_t *limit, char *const argv[], char *out, size_t n, double want_gib)
{
    rlim_t base = *limit, at = base;
    int rc = 0;
    for (int tries = 0; tries < 4; tries++) {
        *limit = at;
        rc = run_limited(at, argv, out, n);
        double got = in_use_gib(out);
        if (got == 0.0 || (got > want_gib - 0.005 && got < want_gib + 0.005))
            break;
        printf("(the command had %.2f GiB in use at its check, not %.2f: again with the same "
               "room)\n", got, want_gib);
        at = (rlim_t)((double)base + (got - want_gib) * (double)((rlim_t)1 << 30));
    }
    return rc;
}
#endif

#ifndef SL_UNDER_ASAN
/* The fixed part and arena of a model's training step under a schedule,
 * optimizer and thread count, planned in this process (which allocates no
 * parameters: checked by its VmSize). The arena depends on the
 * convolution workspaces the CPU backend chose on this machine. */
static sl_memory_report plan_in_process(const char *model, int classes, int res, int batch,
                                        sl_schedule schedule, int threads,
                                        sl_optimizer_options opt)
{
    sl_context_options o = sl_context_defaults();
    o.threads = threads;
    o.seed = 1;
    sl_context *ctx = NULL;
    ck_assert(sl_context_create(&o, &ctx) == SL_OK);
    sl_net *net;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    ck_assert(sl_model_build(net, model, classes, res) == SL_OK);
    rlim_t before = own_vm_bytes();
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    sl_memory_report r;
    sl_shape shape = sl_shape_nchw(batch, 3, res, res);
    ck_assert_msg(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &r) == SL_OK, "%s",
                  sl_last_error());
    ck_assert_msg(own_vm_bytes() < before + ((rlim_t)256 << 20),
                  "planning mapped %llu MiB", (unsigned long long)((own_vm_bytes() - before) >> 20));
    sl_net_free(net);
    sl_context_free(ctx);
    return r;
}

static const char *gib(uint64_t bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
    return buf;
}
#endif

START_TEST(test_training_larger_than_memory_fails_with_the_figures)
{
#ifdef SL_UNDER_ASAN
    printf("SKIPPED test_training_larger_than_memory_fails_with_the_figures: AddressSanitizer "
           "reserves more address space than the limit\n");
    return;
#else
    char *argv[] = {"sublinear", "train", "--model", "resnet20", "--res", "224", "--batch", "16",
                    "--steps", "1", "--quiet", "--schedule", "none", "--threads", "1", NULL};
    static char out[8192];
    rlim_t limit = own_vm_bytes() + ((rlim_t)768 << 20);
    int rc = run_limited(limit, argv, out, sizeof out);
    printf("%s", out);
    ck_assert_msg(rc == 1, "exit status %d: %s", rc, out);
    /* the arena of the command's run: resnet20, 10 classes, SGD with momentum */
    sl_memory_report planned = plan_in_process("resnet20", 10, 224, 16, SL_SCHEDULE_NONE, 1,
                                               sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0));
    char arena[96], arena_gib[32];
    snprintf(arena, sizeof arena, "needs %s for its activation arena",
             gib(planned.arena_bytes, arena_gib, sizeof arena_gib));
    ck_assert_msg(strstr(out, arena), "%s", out);
    char figure[96];
    snprintf(figure, sizeof figure, "the address-space limit (RLIMIT_AS): %.2f GiB",
             (double)limit / (1024.0 * 1024.0 * 1024.0));
    ck_assert_msg(strstr(out, "of memory is available (") && strstr(out, figure), "%s", out);
    /* The advice: a budget that fits, or (where the libraries loaded take
     * most of the limit, as CUDA's do) that none does. */
    ck_assert_msg(strstr(out, "--schedule budget:") || strstr(out, "no schedule fits"), "%s",
                  out);
    /* The same run with the check off still fails cleanly: the allocation
     * itself fails under RLIMIT_AS. */
    char *unchecked[] = {"sublinear", "train", "--model", "resnet20", "--res", "224", "--batch",
                         "16", "--steps", "1", "--quiet", "--schedule", "none", "--threads", "1",
                         "--no-memory-check", NULL};
    rc = run_limited(limit, unchecked, out, sizeof out);
    ck_assert_msg(rc == 1 && strstr(out, "out of memory"), "exit status %d: %s", rc, out);
#endif
}
END_TEST

/* Parameters, gradients and optimizer state count: a step whose
 * activations are small but whose fixed part is 31 GiB fails before
 * anything is allocated (under a limit of 2 GiB above the libraries, any
 * allocation of the fixed part would fail too, so the figures in the
 * message are what shows the check caught it), and its plan is made
 * without allocating it. */
START_TEST(test_fixed_part_is_checked_and_plans_allocate_none)
{
#ifdef SL_UNDER_ASAN
    printf("SKIPPED test_fixed_part_is_checked_and_plans_allocate_none: AddressSanitizer\n");
    return;
#else
    sl_memory_report r = plan_in_process("resnet152", 1000000, 224, 1, SL_SCHEDULE_SQRT, 2,
                                         sl_optimizer_adam(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f));
    ck_assert(r.params > ((uint64_t)7 << 30) && r.optimizer == 2 * r.param_grads);
    ck_assert(r.arena_bytes < ((uint64_t)64 << 20));
    rlim_t limit = own_vm_bytes() + ((rlim_t)2 << 30);
    static char out[8192];
    char *train[] = {"sublinear", "train", "--model", "resnet152", "--classes", "1000000",
                     "--optimizer", "adam", "--batch", "1", "--res", "224", "--steps", "1",
                     "--eval", "8", "--quiet", NULL};
    int rc = run_limited(limit, train, out, sizeof out);
    printf("%s", out);
    ck_assert_msg(rc == 1, "exit status %d: %s", rc, out);
    char expect[256], a[32], b[32], c[32];
    snprintf(expect, sizeof expect, "of fixed bytes (parameters %s, gradients %s, optimizer state %s)",
             gib(r.params, a, sizeof a), gib(r.param_grads, b, sizeof b),
             gib(r.optimizer, c, sizeof c));
    /* The command checks the step with its batch before allocating it. */
    ck_assert_msg(strstr(out, "sl_net_check_step_memory: this step needs") && strstr(out, expect) &&
                      strstr(out, "for its activation arena") &&
                      strstr(out, "the fixed bytes alone do not fit"),
                  "expected '%s' in: %s", expect, out);
    /* The plan of the same step, under a limit far below its fixed part. */
    char *plan[] = {"sublinear", "plan", "--model", "resnet152", "--classes", "1000000",
                    "--optimizer", "adam", "--batch", "1", "--res", "224", NULL};
    rc = run_limited(own_vm_bytes() + ((rlim_t)512 << 20), plan, out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "optimizer") && strstr(out, "total"),
                  "exit status %d: %s", rc, out);
    /* Outside a run: materialising checks the three together. */
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {limit, limit};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(97);
        sl_context *ctx = th_context(1);
        sl_net *net;
        sl_optimizer_options opt = sl_optimizer_adam(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f);
        int count = 0;
        if (sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net) != SL_OK ||
            sl_model_build(net, "resnet152", 1000000, 224) != SL_OK ||
            sl_net_set_optimizer(net, &opt) != SL_OK)
            _exit(96);
        sl_status st = sl_net_param_count(net, &count);
        int ok = st == SL_ERR_NOMEM &&
                 strstr(sl_last_error(), "allocating the network's parameters: the network needs") &&
                 strstr(sl_last_error(), expect);
        if (!ok)
            fprintf(stderr, "status %d: %s\n", (int)st, sl_last_error());
        sl_net_free(net);
        sl_context_free(ctx);
        _exit(ok ? 0 : 1);
    }
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "materialising: status %d",
                  status);
#endif
}
END_TEST

/* The arena fits under the limit, but not with the BLAS's work buffers
 * (one per thread, mapped at its first GEMM) and the worker's stack: the
 * step fails at once instead of hanging in OpenBLAS, and the budget it
 * advises runs to the end under the same limit. */
START_TEST(test_blas_buffers_are_left_room_and_the_advice_runs)
{
#ifdef SL_UNDER_ASAN
    printf("SKIPPED test_blas_buffers_are_left_room_and_the_advice_runs: AddressSanitizer\n");
    return;
#else
    /* The keep-everything arena of the command's step. */
    char *plan[] = {"sublinear", "plan", "--model", "resnet20", "--batch", "32", "--res", "64",
                    "--schedule", "none", "--json", NULL};
    static char out[8192];
    ck_assert(run_limited(own_vm_bytes() + ((rlim_t)1 << 30), plan, out, sizeof out) == 0);
    const char *at = strstr(out, "\"arena\":");
    ck_assert_msg(at, "%s", out);
    unsigned long long arena = strtoull(at + strlen("\"arena\":"), NULL, 10);
    ck_assert(arena > ((uint64_t)64 << 20));
    /* 224 MiB beside the arena: less than two threads' BLAS buffers and a
     * stack (264 MiB), where the step used to pass the check and hang;
     * more than the least budget (54 MiB of arena) besides them. */
    rlim_t limit = own_vm_bytes() + (rlim_t)arena + ((rlim_t)224 << 20);
    char *train[] = {"sublinear", "train", "--model", "resnet20", "--batch", "32", "--res", "64",
                     "--steps", "1", "--schedule", "none", "--eval", "8", "--threads", "2",
                     "--quiet", NULL};
    int rc = run_limited(limit, train, out, sizeof out);
    /* The command may map more than this test before its step (a CUDA
     * build's command links NCCL and MPI): its own message says how much
     * address space it had in use; set the limit from that and run again. */
    double gib = in_use_gib(out);
    if (gib > 0) {
        limit = (rlim_t)(gib * (double)((rlim_t)1 << 30)) + (rlim_t)arena + ((rlim_t)224 << 20);
        rc = run_at_in_use(&limit, train, out, sizeof out, gib);
    }
    printf("%s", out);
    double advised_in_use = in_use_gib(out);
    ck_assert_msg(rc == 1 && strstr(out, "kept for the BLAS's work buffers and the threads' stacks"),
                  "exit status %d: %s", rc, out);
    at = strstr(out, "--schedule budget:");
    ck_assert_msg(at, "no budget advised: %s", out);
    char budget[64];
    snprintf(budget, sizeof budget, "budget:%lluM",
             strtoull(at + strlen("--schedule budget:"), NULL, 10));
    char *advised[] = {"sublinear", "train", "--model", "resnet20", "--batch", "32", "--res", "64",
                       "--steps", "1", "--schedule", budget, "--eval", "8", "--threads", "2",
                       "--quiet", NULL};
    rc = run_at_in_use(&limit, advised, out, sizeof out, advised_in_use);
    ck_assert_msg(rc == 0 && strstr(out, "done: 1 steps"), "%s: exit status %d: %s", budget, rc,
                  out);
#endif
}
END_TEST

/* The training command checks its step together with the batch it is
 * about to allocate (the input images, labels and logits) before
 * allocating and filling the batch: a ResNet-20 step at 512x512, batch 64
 * (a 192 MiB batch, an arena of gigabytes) is refused with the batch in
 * the figures, and the command's peak resident memory stays that of
 * planning the same step (`sublinear plan`), far below the batch; the run
 * of the issue (ResNet-152 at 4096x4096, batch 64: a 12 GiB batch) is
 * refused the same way. */
START_TEST(test_train_checks_the_step_before_allocating_the_batch)
{
#ifdef SL_UNDER_ASAN
    printf("SKIPPED test_train_checks_the_step_before_allocating_the_batch: AddressSanitizer\n");
    return;
#else
    rlim_t limit = own_vm_bytes() + ((rlim_t)2 << 30);
    static char out[8192];
    char *plan[] = {"sublinear", "plan", "--model", "resnet20", "--res", "512", "--batch", "64",
                    NULL};
    long plan_kb = 0, train_kb = 0;
    ck_assert(run_limited_rss(limit, plan, out, sizeof out, &plan_kb) == 0);
    char *train[] = {"sublinear", "train", "--model", "resnet20", "--res", "512", "--batch", "64",
                     "--steps", "1", "--threads", "1", "--quiet", NULL};
    int rc = run_limited_rss(limit, train, out, sizeof out, &train_kb);
    printf("%s(peak resident memory: plan %ld KiB, train %ld KiB)\n", out, plan_kb, train_kb);
    ck_assert_msg(rc == 1, "exit status %d: %s", rc, out);
    ck_assert_msg(strstr(out, "sublinear: checking the step's memory before allocating the batch: "
                              "sl_net_check_step_memory: this step needs ") &&
                      strstr(out, " for its activation arena, 192.00 MiB for the caller's batch "
                                  "(input, labels, outputs) and ") &&
                      strstr(out, "of memory is available (the address-space limit"),
                  "%s", out);
    /* The batch (192 MiB) was never touched: the command's peak is that of
     * planning, give or take 64 MiB. */
    ck_assert_msg(train_kb < plan_kb + 64 * 1024, "peak %ld KiB, planning's %ld KiB", train_kb,
                  plan_kb);
    char *issue[] = {"sublinear", "train", "--model", "resnet152", "--res", "4096", "--batch",
                     "64", "--steps", "1", "--threads", "1", "--quiet", NULL};
    rc = run_limited_rss(limit, issue, out, sizeof out, &train_kb);
    printf("%s(peak resident memory %ld KiB)\n", out, train_kb);
    ck_assert_msg(rc == 1 && strstr(out, "sl_net_check_step_memory: this step needs ") &&
                      strstr(out, ", 12.00 GiB for the caller's batch (input, labels, outputs)"),
                  "exit status %d: %s", rc, out);
    ck_assert_msg(train_kb < plan_kb + 64 * 1024, "peak %ld KiB", train_kb);
#endif
}
END_TEST

/* The host's figure is labelled with what it is: MemTotal, of which
 * MemAvailable is what is left. */
START_TEST(test_host_memory_names_memtotal)
{
    sl_host_memory m = sl_host_memory_available(0);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) {
        printf("SKIPPED test_host_memory_names_memtotal: no /proc/meminfo\n");
        return;
    }
    char line[256];
    unsigned long long total = 0, kb;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            total = kb * 1024;
    fclose(f);
    ck_assert(m.known && total > 0);
    ck_assert_msg(!strstr(m.source, "MemAvailable"), "%s", m.source);
    if (strcmp(m.source, "MemTotal") == 0)
        ck_assert_uint_eq(m.limit, total);
    else /* a cgroup or RLIMIT_AS binds tighter than the host */
        printf("test_host_memory_names_memtotal: %s binds here\n", m.source);
    ck_assert_uint_eq(m.reserved, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory_limit");
    TCase *tc = tcase_create("memory_limit");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_training_larger_than_memory_fails_with_the_figures);
    tcase_add_test(tc, test_fixed_part_is_checked_and_plans_allocate_none);
    tcase_add_test(tc, test_blas_buffers_are_left_room_and_the_advice_runs);
    tcase_add_test(tc, test_train_checks_the_step_before_allocating_the_batch);
    tcase_add_test(tc, test_host_memory_names_memtotal);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
