/*
 * test_backend_table.c — every backend fills the whole contract of
 * base/backend.h: each member its lists mark REQ is set, on the CPU
 * instance and on the table every CUDA instance starts from (checked
 * without a GPU; only in a build with CUDA), and the CUDA table sets the
 * OPT ones too. The members are read from the same lists that declare
 * them, so a new op is checked without touching this file.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "cpu/cpu.h"
#include "cuda/cuda_backend.h"
#include "harness.h"

/* The names of the members of t that are NULL among the required ones
 * (and, with optional_too, the optional ones), into missing; returns how
 * many. The lists of base/backend.h name them, so a member added there and
 * forgotten by a backend fails here, not in a run on a machine the tests
 * never see. */
static int missing_members(const sl_backend *t, int optional_too, char *missing, size_t size)
{
    int count = 0;
    missing[0] = '\0';
#define NOTE_MISSING(member)                                                                   \
    do {                                                                                       \
        size_t used_ = strlen(missing);                                                        \
        snprintf(missing + used_, size - used_, " %s", member);                                \
        count++;                                                                               \
    } while (0)
#define REQUIRE(ret, member, params)                                                           \
    if (!t->member)                                                                            \
        NOTE_MISSING(#member);
#define ASK(ret, member, params)                                                               \
    if (optional_too && !t->member)                                                            \
        NOTE_MISSING(#member);
    if (!t->name)
        NOTE_MISSING("name");
    SL_BACKEND_DEVICE(REQUIRE, ASK)
    SL_BACKEND_OPS(REQUIRE, ASK)
#undef ASK
#undef REQUIRE
#undef NOTE_MISSING
    return count;
}

/* Every function member of struct sl_backend comes from the lists: a
 * member written into the struct by hand would escape the checks above. */
START_TEST(test_backend_table_struct_holds_only_the_lists)
{
    size_t listed = 0;
#define COUNT(ret, member, params) listed++;
    SL_BACKEND_DEVICE(COUNT, COUNT)
    SL_BACKEND_OPS(COUNT, COUNT)
#undef COUNT
    size_t first = offsetof(sl_backend, destroy);
    ck_assert_uint_eq(sizeof(sl_backend), first + listed * sizeof(void (*)(void)));
    ck_assert_uint_gt(listed, 50);
}
END_TEST

START_TEST(test_backend_table_check_names_an_unset_member)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(1, &be), SL_OK);
    sl_backend broken = *be;
    broken.copy_channels = NULL;
    char missing[1024];
    ck_assert_int_eq(missing_members(&broken, 0, missing, sizeof missing), 1);
    ck_assert_str_eq(missing, " copy_channels");
    sl_backend_destroy(be);
}
END_TEST

START_TEST(test_backend_table_cpu_sets_every_required_member)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(1, &be), SL_OK);
    char missing[1024];
    int n = missing_members(be, 0, missing, sizeof missing);
    ck_assert_msg(n == 0, "the CPU backend leaves unset:%s", missing);
    sl_backend_destroy(be);
}
END_TEST

START_TEST(test_backend_table_cuda_sets_every_required_member)
{
    const sl_backend *t = sl_cuda_backend_template();
    if (!t) {
        printf("SKIPPED: this build has no CUDA backend\n");
        return;
    }
    char missing[1024];
    /* the GPU sets the optional members too (its queue needs wait,
     * download_later and workspaces; its lists save launches) */
    int n = missing_members(t, 1, missing, sizeof missing);
    ck_assert_msg(n == 0, "the CUDA backend leaves unset:%s", missing);
    ck_assert_int_eq(t->host_memory, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_table");
    TCase *tc = tcase_create("backend_table");
    tcase_add_test(tc, test_backend_table_check_names_an_unset_member);
    tcase_add_test(tc, test_backend_table_struct_holds_only_the_lists);
    tcase_add_test(tc, test_backend_table_cpu_sets_every_required_member);
    tcase_add_test(tc, test_backend_table_cuda_sets_every_required_member);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
