/*
 * cuda_none.c — the CUDA backend of a build without the CUDA toolkit:
 * asking for it is a clear error, never a crash.
 */
#include "base/base.h"
#include "cuda/cuda_backend.h"

sl_status sl_cuda_backend_create(int deterministic, sl_backend **out)
{
    (void)deterministic;
    (void)out;
    return sl_fail(SL_ERR_UNSUPPORTED,
                   "this build of sublinear has no CUDA backend (the CUDA toolkit or cuDNN was "
                   "not found when it was configured)");
}

void *sl_cuda_backend_stream(const sl_backend *be)
{
    (void)be;
    return NULL;
}
