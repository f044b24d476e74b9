/*
 * libc_faults.h — failures of the C library itself, for test_alloc_failure
 * (libc_faults.c). The library's own hook (sl_test_alloc_fail_at) fails
 * sl_malloc; this one fails malloc, calloc and realloc as the whole
 * process calls them, the C library's own allocations on the library's
 * behalf included (fopen's and fdopen's FILE, a stream's buffer,
 * fdopendir's DIR), and can make snprintf fail as it does when it cannot
 * get memory. It leaves errno as it was, as the allocator did when these
 * paths were found to report "Success" or a stale "No such file or
 * directory": the library must not lean on errno after such a failure.
 */
#ifndef SL_TEST_LIBC_FAULTS_H
#define SL_TEST_LIBC_FAULTS_H

/* 1 when the hooks are built in: not under a sanitizer, whose runtime
 * owns malloc (the tests that need them skip visibly there). */
int lf_available(void);
/* As sl_test_alloc_fail_at, for malloc, calloc and realloc: with n > 0 the
 * n-th call from now returns NULL (once); n < 0 only counts; 0 is off. */
void lf_fail_malloc_at(long n);
/* Calls counted since the last lf_fail_malloc_at with n != 0. */
long lf_malloc_count(void);
/* While on, snprintf returns -1 without writing, as when the C library
 * cannot allocate what a conversion needs. */
void lf_fail_snprintf(int on);

#endif
