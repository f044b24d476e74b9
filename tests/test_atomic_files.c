/*
 * test_atomic_files.c — saves survive being killed and clean up after
 * themselves. A child process saves a model in a loop and is SIGKILLed at
 * a random moment, 50 times: after every kill the target loads strictly,
 * and at most one temporary file is left (the killed save's own; the next
 * save removes it). Temporary files that a live writer holds (flock) are
 * kept; a full disk's error says that a save needs room for a second copy.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "harness.h"

#define PATH_LEN 512

static char g_dir[256];

static sl_net *small_net(sl_context *ctx)
{
    sl_net *net;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_model_build(net, "resnet20", 10, 32) == SL_OK);
    ck_assert(th_param_count(net) > 0);
    return net;
}

/* Files in g_dir named ".model.safetensors.tmp.*". */
static int temp_files(void)
{
    DIR *d = opendir(g_dir);
    ck_assert(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, ".model.safetensors.tmp.", 23) == 0;
    closedir(d);
    return n;
}

static void child_saves_forever(sl_net *net, const char *path)
{
    sl_param_info pi;
    if (sl_net_param(net, 0, &pi) != SL_OK)
        _exit(2);
    for (unsigned i = 0;; i++) {
        pi.data[0] = (float)i; /* every save a different file */
        if (sl_save_model(net, path) != SL_OK)
            _exit(3);
    }
}

START_TEST(test_killed_saves_leave_a_whole_file_and_one_temp_at_most)
{
    sl_context *ctx = th_context(1), *ctx2 = th_context(2);
    sl_net *net = small_net(ctx), *other = small_net(ctx2);
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    ck_assert(sl_save_model(net, path) == SL_OK);
    srand(12345);
    int most = 0, kills = 0;
    for (int k = 0; k < 50; k++) {
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0)
            child_saves_forever(net, path);
        struct timespec t = {0, (long)(rand() % 40000) * 1000L};
        nanosleep(&t, NULL);
        kill(pid, SIGKILL);
        int status;
        ck_assert(waitpid(pid, &status, 0) == pid);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                      "the saving child ended by itself (status %d)", status);
        kills++;
        sl_load_report rep;
        ck_assert_msg(sl_load_model(other, path, NULL, &rep) == SL_OK, "after kill %d: %s", k,
                      sl_last_error());
        int temps = temp_files();
        if (temps > most)
            most = temps;
        ck_assert_msg(temps <= 1, "after kill %d: %d temporary files", k, temps);
    }
    ck_assert(sl_save_model(net, path) == SL_OK);
    ck_assert_int_eq(temp_files(), 0);
    printf("%d kills during saves: the target loaded strictly after each; at most %d temporary "
           "file at a time, none after the next save\n", kills, most);
    sl_net_free(net);
    sl_net_free(other);
    sl_context_free(ctx);
    sl_context_free(ctx2);
}
END_TEST

static char g_stale[PATH_LEN]; /* a directory of its own */

static void touch(const char *name, int *fd_out)
{
    char p[PATH_LEN + 64];
    snprintf(p, sizeof p, "%s/%s", g_stale, name);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    ck_assert(fd >= 0);
    ck_assert(write(fd, "partial", 7) == 7);
    if (fd_out)
        *fd_out = fd;
    else
        close(fd);
}

static int exists(const char *name)
{
    char p[PATH_LEN + 64];
    snprintf(p, sizeof p, "%s/%s", g_stale, name);
    return access(p, F_OK) == 0;
}

START_TEST(test_stale_temps_go_live_ones_stay)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    snprintf(g_stale, sizeof g_stale, "%s/stale", g_dir);
    ck_assert(mkdir(g_stale, 0755) == 0);
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/model.safetensors", g_stale);
    int live;
    touch(".model.safetensors.tmp.dead01", NULL);
    touch(".model.safetensors.tmp.dead02", NULL);
    touch(".model.safetensors.tmp.live01", &live);
    ck_assert(flock(live, LOCK_EX | LOCK_NB) == 0); /* a writer still at work */
    touch(".other.safetensors.tmp.dead03", NULL);    /* another target's */
    touch(".model.safetensors.tmp.toolong1", NULL);   /* not a temp name */
    ck_assert(sl_save_model(net, path) == SL_OK);
    ck_assert(!exists(".model.safetensors.tmp.dead01"));
    ck_assert(!exists(".model.safetensors.tmp.dead02"));
    ck_assert(exists(".model.safetensors.tmp.live01"));
    ck_assert(exists(".other.safetensors.tmp.dead03"));
    ck_assert(exists(".model.safetensors.tmp.toolong1"));
    close(live); /* its writer died: the next save removes it */
    ck_assert(sl_save_model(net, path) == SL_OK);
    ck_assert(!exists(".model.safetensors.tmp.live01"));
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* A save failing with ENOSPC (simulated after 4096 bytes) into path. */
static sl_status save_on_full_disk(sl_net *net, const char *path)
{
    sl_atomic_test_fail_errno(ENOSPC);
    sl_atomic_test_fail_after(4096);
    sl_status st = sl_save_model(net, path);
    sl_atomic_test_fail_after(-1);
    sl_atomic_test_fail_errno(EIO);
    return st;
}

/* The message speaks of a previous file only where one exists. */
START_TEST(test_full_disk_says_a_save_needs_room_for_two_copies)
{
    sl_context *ctx = th_context(1);
    sl_net *net = small_net(ctx);
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/full.safetensors", g_dir);
    ck_assert_int_eq(save_on_full_disk(net, path), SL_ERR_IO);
    ck_assert_msg(strstr(sl_last_error(), "No space left on device") &&
                      strstr(sl_last_error(), "nothing is left at that path") &&
                      !strstr(sl_last_error(), "previous file"),
                  "%s", sl_last_error());
    ck_assert(!exists("full.safetensors"));
    /* Over a saved file: the second copy needs room next to it. */
    ck_assert(sl_save_model(net, path) == SL_OK);
    struct stat before, after;
    ck_assert(stat(path, &before) == 0);
    ck_assert_int_eq(save_on_full_disk(net, path), SL_ERR_IO);
    ck_assert_msg(strstr(sl_last_error(), "room for both") &&
                      strstr(sl_last_error(), "the previous file is unchanged") &&
                      strstr(sl_last_error(), "No space left on device"),
                  "%s", sl_last_error());
    ck_assert(stat(path, &after) == 0 && after.st_size == before.st_size &&
              after.st_ino == before.st_ino);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/sl_atomic_XXXXXX");
    if (!mkdtemp(g_dir))
        return EXIT_FAILURE;
    Suite *s = suite_create("atomic_files");
    TCase *tc = tcase_create("atomic_files");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_stale_temps_go_live_ones_stay);
    tcase_add_test(tc, test_full_disk_says_a_save_needs_room_for_two_copies);
    tcase_add_test(tc, test_killed_saves_leave_a_whole_file_and_one_temp_at_most);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    char cmd[PATH_LEN];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
