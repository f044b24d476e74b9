/*
 * context.c — the context a caller owns: device, threads and seed. Holds
 * the dropout counter so that every dropout mask drawn in a context comes
 * from a distinct Philox counter block.
 */
#include <omp.h>
#include <stdlib.h>

#include "core/backend.h"
#include "core/core.h"
#include "cpu/cpu.h"

sl_context_options sl_context_defaults(void)
{
    sl_context_options o = {SL_DEVICE_CPU, 0, 0, 1};
    return o;
}

sl_status sl_context_create(const sl_context_options *opts, sl_context **out)
{
    if (!out)
        return sl_fail(SL_ERR_INVALID_ARG, "sl_context_create: out is NULL");
    sl_context_options o = opts ? *opts : sl_context_defaults();
    if (o.threads < 0)
        return sl_fail(SL_ERR_INVALID_ARG, "sl_context_create: threads is %d (use 0 for all cores)",
                       o.threads);
    if (o.device != SL_DEVICE_CPU && o.device != SL_DEVICE_CUDA)
        return sl_fail(SL_ERR_INVALID_ARG, "sl_context_create: unknown device %d", (int)o.device);
    const sl_backend *be = sl_cpu_backend();
    if (o.device == SL_DEVICE_CUDA && !(be = sl_cuda_backend(o.deterministic)))
        return sl_fail(SL_ERR_UNSUPPORTED, "sl_context_create: %s", sl_error_message());
    sl_context *ctx = sl_zalloc(sizeof *ctx, "a context");
    if (!ctx)
        return SL_ERR_NOMEM;
    ctx->device = o.device;
    ctx->threads = o.threads;
    ctx->seed = o.seed;
    ctx->deterministic = o.deterministic != 0;
    ctx->backend = be;
    if (be->device_free_bytes)
        ctx->device_free_at_start = be->device_free_bytes();
    /* Kernels split GEMMs over the OpenMP team themselves; OpenBLAS's own
     * threads would compete with it for the cores. */
    sl_cpu_set_blas_threads(1);
    *out = ctx;
    return SL_OK;
}

void sl_context_free(sl_context *ctx) { free(ctx); }

int sl_context_threads(const sl_context *ctx)
{
    if (ctx && ctx->threads > 0)
        return ctx->threads;
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}
