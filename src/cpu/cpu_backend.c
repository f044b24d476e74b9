/*
 * cpu_backend.c — the CPU backend's sl_backend table: host memory, copies,
 * and the kernels of the other cpu_*.c files. Part of the "run" stage: the
 * executor calls these through the table at planned offsets.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cpu/cpu.h"

static void *sl_cpu_alloc(const sl_backend *be, size_t bytes, const char *what)
{
    (void)be;
    return sl_aligned_zalloc(bytes, what);
}

static void sl_cpu_free(const sl_backend *be, void *p)
{
    (void)be;
    sl_aligned_free(p);
}

static void sl_cpu_destroy(sl_backend *be) { free(be); }

static void sl_cpu_memcpy(const sl_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    if (dst != src && bytes)
        memcpy(dst, src, bytes);
}

static sl_status sl_cpu_sync(const sl_exec *ex)
{
    (void)ex;
    return SL_OK;
}

static const sl_backend sl_cpu_table = {
    .name = "cpu",
    .host_memory = 1,
    .destroy = sl_cpu_destroy,
    .alloc = sl_cpu_alloc,
    .free = sl_cpu_free,
    .upload = sl_cpu_memcpy,
    .download = sl_cpu_memcpy,
    .download_later = sl_cpu_memcpy, /* written at once: before any sync */
    .sync = sl_cpu_sync,
    .gemm = sl_cpu_gemm,
    .conv2d_workspace_bytes = sl_cpu_conv2d_workspace_bytes,
    .conv2d_forward = sl_cpu_conv2d_forward,
    .conv2d_backward_data = sl_cpu_conv2d_backward_data,
    .conv2d_backward_filter = sl_cpu_conv2d_backward_filter,
    .batchnorm_forward_train = sl_cpu_batchnorm_forward_train,
    .batchnorm_forward_apply = sl_cpu_batchnorm_forward_apply,
    .batchnorm_forward_infer = sl_cpu_batchnorm_forward_infer,
    .batchnorm_backward = sl_cpu_batchnorm_backward,
    .maxpool_forward = sl_cpu_maxpool_forward,
    .maxpool_backward = sl_cpu_maxpool_backward,
    .avgpool_forward = sl_cpu_avgpool_forward,
    .avgpool_backward = sl_cpu_avgpool_backward,
    .relu_forward = sl_cpu_relu_forward,
    .relu_backward = sl_cpu_relu_backward,
    .dropout_forward = sl_cpu_dropout_forward,
    .dropout_backward = sl_cpu_dropout_backward,
    .random_uniform = sl_cpu_random_uniform,
    .add = sl_cpu_add,
    .copy = sl_cpu_copy,
    .fill = sl_cpu_fill,
    .copy_channels = sl_cpu_copy_channels,
    .global_avgpool_forward = sl_cpu_global_avgpool_forward,
    .global_avgpool_backward = sl_cpu_global_avgpool_backward,
    .bias_add = sl_cpu_bias_add,
    .bias_backward = sl_cpu_bias_backward,
    .softmax_xent = sl_cpu_softmax_xent,
    .lm_xent = sl_cpu_lm_xent,
    .sgd_update = sl_cpu_sgd_update,
    .adam_update = sl_cpu_adam_update,
    .layernorm_forward = sl_cpu_layernorm_forward,
    .layernorm_backward = sl_cpu_layernorm_backward,
    .gelu_forward = sl_cpu_gelu_forward,
    .gelu_backward = sl_cpu_gelu_backward,
    .embedding_forward = sl_cpu_embedding_forward,
    .embedding_backward = sl_cpu_embedding_backward,
    .attention_workspace_bytes = sl_cpu_attention_workspace_bytes,
    .attention_forward = sl_cpu_attention_forward,
    .attention_backward = sl_cpu_attention_backward,
    .sum_squares = sl_cpu_sum_squares,
    .attention_decode = sl_cpu_attention_decode,
};

sl_status sl_cpu_backend_create(sl_backend **out)
{
    sl_backend *be = sl_alloc(sizeof *be, "a CPU backend");
    if (!be)
        return SL_ERR_NOMEM;
    *be = sl_cpu_table;
    *out = be;
    return SL_OK;
}
