/*
 * cpu_backend.c — the CPU backend's sl_backend table: host memory, copies,
 * and the kernels of the other cpu_*.c files. Part of the "run" stage: the
 * executor calls these through the table at planned offsets.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cpu/cpu.h"

static void *cpu_alloc(const sl_backend *be, size_t bytes, const char *what)
{
    (void)be;
    return sl_aligned_zalloc(bytes, what);
}

static void cpu_free(const sl_backend *be, void *p)
{
    (void)be;
    sl_aligned_free(p);
}

static void cpu_destroy(sl_backend *be) { free(be); }

static void cpu_memcpy(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    if (dst != src && bytes)
        memcpy(dst, src, bytes);
}

static sl_status cpu_sync(const sl_exec *ex)
{
    (void)ex;
    return SL_OK;
}

static const sl_backend cpu_table = {
    .name = "cpu",
    .host_memory = 1,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .sync = cpu_sync,
    .gemm = cpu_gemm,
    .conv2d_workspace_bytes = cpu_conv2d_workspace_bytes,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward_data = cpu_conv2d_backward_data,
    .conv2d_backward_filter = cpu_conv2d_backward_filter,
    .batchnorm_forward_train = cpu_batchnorm_forward_train,
    .batchnorm_forward_apply = cpu_batchnorm_forward_apply,
    .batchnorm_forward_infer = cpu_batchnorm_forward_infer,
    .batchnorm_backward = cpu_batchnorm_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .random_uniform = cpu_random_uniform,
    .add = cpu_add,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .copy_channels = cpu_copy_channels,
    .global_avgpool_forward = cpu_global_avgpool_forward,
    .global_avgpool_backward = cpu_global_avgpool_backward,
    .bias_add = cpu_bias_add,
    .bias_backward = cpu_bias_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_update = cpu_sgd_update,
    .adam_update = cpu_adam_update,
};

sl_status sl_cpu_backend_create(sl_backend **out)
{
    sl_backend *be = sl_alloc(sizeof *be, "a CPU backend");
    if (!be)
        return SL_ERR_NOMEM;
    *be = cpu_table;
    *out = be;
    return SL_OK;
}
