/*
 * cli_run.c — running programs from the tests (see cli_run.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_run.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[256];

void cr_init(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/sl_test_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    /* ctest runs two tests at a time on two cores: OpenMP threads that
     * spin while waiting would take the cores from the other test. */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    setenv("OMP_NUM_THREADS", "2", 0);
}

void cr_cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (g_dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
}

const char *cr_dir(void) { return g_dir; }

char *cr_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    ck_assert(buf);
    for (size_t got; (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert(buf);
        }
    }
    fclose(f);
    buf[len] = '\0';
    if (n)
        *n = len;
    return buf;
}

cr_result cr_run(const char *exe, const char *fmt, ...)
{
    char args[4096], out[512], err[512], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(out, sizeof out, "%s/stdout.%d", g_dir, (int)getpid());
    snprintf(err, sizeof err, "%s/stderr.%d", g_dir, (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", exe, args, out, err);
    int st = system(cmd);
    cr_result r = {0};
    ck_assert_msg(st != -1, "cannot run %s", cmd);
    if (WIFEXITED(st)) {
        r.status = WEXITSTATUS(st);
        /* The shell reports a signal that killed its child as 128 + n. */
        if (r.status > 128 && r.status < 128 + 65) {
            r.signal = r.status - 128;
            r.status = -1;
        }
    } else {
        r.status = -1;
        r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
    r.out = cr_read(out, NULL);
    r.err = cr_read(err, NULL);
    if (!r.out)
        r.out = calloc(1, 1);
    if (!r.err)
        r.err = calloc(1, 1);
    return r;
}

void cr_free(cr_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

cJSON *cr_json(const cr_result *r)
{
    cJSON *j = cJSON_Parse(r->out);
    ck_assert_msg(j && cJSON_IsObject(j), "stdout is not a JSON object:\n%s\nstderr:\n%s", r->out,
                  r->err);
    return j;
}

static const cJSON *at(const cJSON *root, const char *path)
{
    char key[128];
    const cJSON *node = root;
    while (node && *path) {
        size_t len = strcspn(path, ".");
        ck_assert(len < sizeof key);
        memcpy(key, path, len);
        key[len] = '\0';
        node = cJSON_GetObjectItemCaseSensitive(node, key);
        path += len + (path[len] == '.');
    }
    return node;
}

double cr_num(const cJSON *root, const char *path)
{
    const cJSON *n = at(root, path);
    ck_assert_msg(n && cJSON_IsNumber(n), "no number at %s", path);
    return n->valuedouble;
}

int cr_is_null(const cJSON *root, const char *path)
{
    const cJSON *n = at(root, path);
    return n && cJSON_IsNull(n);
}

const char *cr_write(const char *name, const void *data, size_t n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    for (char *slash = path + strlen(g_dir) + 1; (slash = strchr(slash, '/')); slash++) {
        *slash = '\0';
        mkdir(path, 0755); /* the sub-directories of name, each level */
        *slash = '/';
    }
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f, "cannot write %s", path);
    ck_assert(fwrite(data, 1, n, f) == n);
    fclose(f);
    return path;
}
