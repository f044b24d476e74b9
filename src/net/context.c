/*
 * context.c — the context a caller owns (net stage): device, threads and
 * seed, and the backend instance it owns, made by the one registry
 * function sl_backend_create (src/cpu or src/cuda, the run stage). Holds
 * the dropout counter so that every dropout mask drawn in a context comes
 * from a distinct Philox counter block.
 */
#include <stdlib.h>

#include "base/backend.h"
#include "base/base.h"
#include "cpu/cpu.h"
#include "cuda/cuda_backend.h"

sl_status sl_backend_create(const sl_context_options *o, sl_backend **out)
{
    switch (o->device) {
    case SL_DEVICE_CPU:
        return sl_cpu_backend_create(sl_threads_resolve(o->threads), out);
    case SL_DEVICE_CUDA:
        return sl_cuda_backend_create(o->gpu, o->deterministic, o->tf32, out);
    }
    return sl_set_error(SL_ERR_INVALID_ARG, "unknown device %d", (int)o->device);
}

sl_context_options sl_context_defaults(void)
{
    sl_context_options o = {SL_DEVICE_CPU, 0, 0, 1, 0, 0};
    return o;
}

sl_status sl_context_create(const sl_context_options *opts, sl_context **out)
{
    if (!out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_context_create: out is NULL");
    sl_context_options o = opts ? *opts : sl_context_defaults();
    if (o.threads < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_context_create: threads is %d (use 0 for all cores)",
                            o.threads);
    if (o.gpu < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_context_create: gpu is %d (a device ordinal, 0 "
                            "for the first)", o.gpu);
    if (o.device != SL_DEVICE_CPU && o.device != SL_DEVICE_CUDA)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_context_create: unknown device %d", (int)o.device);
    sl_context *ctx = sl_zalloc(sizeof *ctx, "a context");
    if (!ctx)
        return SL_ERR_NOMEM;
    sl_backend *be;
    sl_status st = sl_backend_create(&o, &be);
    if (st != SL_OK) {
        free(ctx);
        return sl_set_error(st, "sl_context_create: %s", sl_last_error());
    }
    ctx->device = o.device;
    ctx->threads = o.threads;
    ctx->seed = o.seed;
    ctx->deterministic = o.deterministic != 0;
    ctx->backend = be;
    if (be->device_free_bytes)
        ctx->device_free_at_start = be->device_free_bytes(be, NULL);
    /* Kernels split GEMMs over the OpenMP team themselves; OpenBLAS's own
     * threads would compete with it for the cores. */
    sl_cpu_set_blas_threads(1);
    *out = ctx;
    return SL_OK;
}

void sl_context_free(sl_context *ctx)
{
    if (!ctx)
        return;
    sl_backend_destroy(ctx->backend);
    free(ctx);
}
