/*
 * test_backend_table.c — every backend fills the whole contract of
 * base/backend.h: each member not marked "(optional)" is set, on the CPU
 * instance and on the table every CUDA instance starts from (checked
 * without a GPU; only in a build with CUDA). Members are named one by one,
 * so a member added to the interface and forgotten by a backend fails here,
 * not in a run on a machine the tests never see.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backend.h"
#include "cpu/cpu.h"
#include "cuda/cuda_backend.h"
#include "harness.h"

/* The names of the required members of t that are NULL, into missing;
 * returns how many. */
static int missing_members(const sl_backend *t, char *missing, size_t size)
{
    int count = 0;
    missing[0] = '\0';
#define REQUIRE(member)                                                                        \
    do {                                                                                       \
        if (!t->member) {                                                                      \
            size_t used_ = strlen(missing);                                                    \
            snprintf(missing + used_, size - used_, " %s", #member);                           \
            count++;                                                                           \
        }                                                                                      \
    } while (0)
    REQUIRE(name);
    REQUIRE(destroy);
    REQUIRE(alloc);
    REQUIRE(free);
    REQUIRE(upload);
    REQUIRE(download);
    REQUIRE(sync);
    REQUIRE(gemm);
    REQUIRE(conv2d_workspace_bytes);
    REQUIRE(conv2d_forward);
    REQUIRE(conv2d_backward_data);
    REQUIRE(conv2d_backward_filter);
    REQUIRE(batchnorm_forward_train);
    REQUIRE(batchnorm_forward_apply);
    REQUIRE(batchnorm_forward_infer);
    REQUIRE(batchnorm_backward);
    REQUIRE(maxpool_forward);
    REQUIRE(maxpool_backward);
    REQUIRE(avgpool_forward);
    REQUIRE(avgpool_backward);
    REQUIRE(relu_forward);
    REQUIRE(relu_backward);
    REQUIRE(dropout_forward);
    REQUIRE(dropout_backward);
    REQUIRE(random_uniform);
    REQUIRE(add);
    REQUIRE(copy);
    REQUIRE(fill);
    REQUIRE(copy_channels);
    REQUIRE(global_avgpool_forward);
    REQUIRE(global_avgpool_backward);
    REQUIRE(bias_add);
    REQUIRE(bias_backward);
    REQUIRE(softmax_xent);
    REQUIRE(lm_xent);
    REQUIRE(sgd_update);
    REQUIRE(adam_update);
    REQUIRE(layernorm_forward);
    REQUIRE(layernorm_backward);
    REQUIRE(gelu_forward);
    REQUIRE(gelu_backward);
    REQUIRE(embedding_forward);
    REQUIRE(embedding_backward);
    REQUIRE(attention_workspace_bytes);
    REQUIRE(attention_forward);
    REQUIRE(attention_backward);
    REQUIRE(sum_squares);
#undef REQUIRE
    return count;
}

START_TEST(test_backend_table_check_names_an_unset_member)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(&be), SL_OK);
    sl_backend broken = *be;
    broken.copy_channels = NULL;
    char missing[1024];
    ck_assert_int_eq(missing_members(&broken, missing, sizeof missing), 1);
    ck_assert_str_eq(missing, " copy_channels");
    sl_backend_destroy(be);
}
END_TEST

START_TEST(test_backend_table_cpu_sets_every_required_member)
{
    sl_backend *be = NULL;
    ck_assert_int_eq(sl_cpu_backend_create(&be), SL_OK);
    char missing[1024];
    int n = missing_members(be, missing, sizeof missing);
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
    int n = missing_members(t, missing, sizeof missing);
    ck_assert_msg(n == 0, "the CUDA backend leaves unset:%s", missing);
    /* the GPU's own members, optional in the interface, it must set */
    ck_assert_ptr_nonnull(t->wait);
    ck_assert_ptr_nonnull(t->device_free_bytes);
    ck_assert_ptr_nonnull(t->native_stream);
    ck_assert_ptr_nonnull(t->batchnorm_forward_workspace_bytes);
    ck_assert_ptr_nonnull(t->batchnorm_backward_workspace_bytes);
    ck_assert_ptr_nonnull(t->softmax_xent_workspace_bytes);
    ck_assert_int_eq(t->host_memory, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_table");
    TCase *tc = tcase_create("backend_table");
    tcase_add_test(tc, test_backend_table_check_names_an_unset_member);
    tcase_add_test(tc, test_backend_table_cpu_sets_every_required_member);
    tcase_add_test(tc, test_backend_table_cuda_sets_every_required_member);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
