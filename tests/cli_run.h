/*
 * cli_run.h — helpers of the tests that run programs (test_cli,
 * test_examples): run a command line with its output captured, parse
 * stdout as JSON, and a scratch directory for the files a test makes.
 */
#ifndef SL_TEST_CLI_RUN_H
#define SL_TEST_CLI_RUN_H

#include <stddef.h>

#include <cJSON.h>

typedef struct cr_result {
    int status;   /* exit status; -1 when killed by a signal */
    int signal;   /* the signal, or 0 */
    char *out;    /* stdout, NUL-terminated */
    char *err;    /* stderr, NUL-terminated */
} cr_result;

/* Makes the scratch directory (call once in main, before the runner forks)
 * and sets the environment of the programs the tests run. */
void cr_init(void);
/* Removes the scratch directory. */
void cr_cleanup(void);
/* The scratch directory. */
const char *cr_dir(void);

/* Runs "<exe> <args>" through /bin/sh; args is a printf format. */
cr_result cr_run(const char *exe, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cr_free(cr_result *r);

/* stdout parsed as one JSON object; fails the test when it is not. */
cJSON *cr_json(const cr_result *r);
/* The number at a dotted path ("memory.total"); fails the test when absent. */
double cr_num(const cJSON *root, const char *path);
/* Whether the value at a dotted path exists and is JSON null. */
int cr_is_null(const cJSON *root, const char *path);

/* Writes bytes to a file under the scratch directory; returns its path
 * (static storage, overwritten by the next call). */
const char *cr_write(const char *name, const void *data, size_t n);
/* Reads a whole file; *n receives its size. Caller frees. NULL if absent. */
char *cr_read(const char *path, size_t *n);

#endif
