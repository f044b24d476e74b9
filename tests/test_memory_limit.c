/*
 * test_memory_limit.c — a step larger than memory fails cleanly. The
 * command trains a ResNet-20 whose keep-everything arena (1.16 GiB at
 * batch 16, 224x224) exceeds an address-space limit 768 MiB above what the
 * libraries map (RLIMIT_AS, which needs no privilege; a memory cgroup is
 * read the same way): it must exit
 * with status 1, before allocating the arena, with a message giving the
 * planned and the available memory and a budget schedule that fits (or
 * that none does). Under
 * AddressSanitizer (which reserves terabytes of address space) the limit
 * cannot be set: skipped visibly.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Runs the command under an address-space limit; its stderr into out. */
static int run_limited(rlim_t limit, char *const argv[], char *out, size_t n)
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
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status), "the command was killed (signal %d): %s",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, out);
    return WEXITSTATUS(status);
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
    ck_assert_msg(strstr(out, "needs 1.16 GiB for its activation arena"), "%s", out);
    char figure[96];
    snprintf(figure, sizeof figure, "the address-space limit (RLIMIT_AS): %.2f GiB",
             (double)limit / (1024.0 * 1024.0 * 1024.0));
    ck_assert_msg(strstr(out, "GiB of memory is available (") && strstr(out, figure), "%s", out);
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

int main(void)
{
    Suite *s = suite_create("memory_limit");
    TCase *tc = tcase_create("memory_limit");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_training_larger_than_memory_fails_with_the_figures);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
