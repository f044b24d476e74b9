/*
 * cuda_none.c — the CUDA backend of a build without the CUDA toolkit:
 * asking for it is a clear error, never a crash.
 */
#include "core/backend.h"
#include "core/core.h"

const sl_backend *sl_cuda_backend(int deterministic)
{
    (void)deterministic;
    sl_fail(SL_ERR_UNSUPPORTED, "this build of sublinear has no CUDA backend (the CUDA toolkit or "
                                "cuDNN was not found when it was configured)");
    return NULL;
}
