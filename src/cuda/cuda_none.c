/*
 * cuda_none.c — the CUDA backend of a build without the CUDA toolkit:
 * asking for it is a clear error, never a crash.
 */
#include "base/base.h"
#include "cuda/cuda_backend.h"

sl_status sl_cuda_backend_create(int gpu, int deterministic, int tf32, sl_backend **out)
{
    (void)gpu;
    (void)deterministic;
    (void)tf32;
    if (out)
        *out = NULL;
    return sl_set_error(SL_ERR_UNSUPPORTED,
                   "this build of sublinear has no CUDA backend (the CUDA toolkit or cuDNN was "
                   "not found when it was configured)");
}

void *sl_cuda_backend_stream(const sl_backend *be)
{
    (void)be;
    return NULL;
}

const sl_backend *sl_cuda_backend_template(void) { return NULL; }

int sl_cuda_lm_xent_staged(const sl_backend *be, int vocab)
{
    (void)be;
    (void)vocab;
    return 0;
}

int sl_cuda_ln_regs(const sl_backend *be)
{
    (void)be;
    return 0;
}

int sl_cuda_column_parts(const sl_backend *be, const char **why)
{
    (void)be;
    if (why)
        *why = "this build has no CUDA backend";
    return 0;
}

int sl_cuda_bn_fused(const sl_backend *be)
{
    (void)be;
    return 0;
}

int sl_cuda_bn_vec(const sl_backend *be)
{
    (void)be;
    return 0;
}

int sl_cuda_xent_blocks(const sl_backend *be)
{
    (void)be;
    return 0;
}

int sl_cuda_conv_tuned_passes(const sl_backend *be)
{
    (void)be;
    return 0;
}

int sl_cuda_conv_gemm_geometries(const sl_backend *be, sl_conv_pass pass)
{
    (void)be;
    (void)pass;
    return 0;
}
