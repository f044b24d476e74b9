/*
 * cuda_error.cu — the sticky first error of a CUDA backend instance (run
 * stage on a GPU): kernels and library calls record their failure here
 * (SL_CUDA_CHECK), sync turns it into the library's error. A file of its
 * own, below the kernel files and the instance's table that all call it,
 * so calls inside src/cuda go one way.
 */
#include <mutex>
#include <stdio.h>

#include "cuda/cuda_common.h"

extern "C" {
#include "base/base.h"
}

extern "C" void sl_cuda_record(sl_cuda_state *s, const char *file, int line, const char *what,
                               const char *detail)
{
    std::lock_guard<std::mutex> g(s->error_lock);
    if (s->error_set)
        return;
    s->error_set = 1;
    snprintf(s->error_text, sizeof s->error_text, "CUDA backend: %s failed (%s) at %s:%d", what,
             detail, file, line);
}

extern "C" sl_status sl_cuda_take_error(sl_cuda_state *s)
{
    std::lock_guard<std::mutex> g(s->error_lock);
    if (!s->error_set)
        return SL_OK;
    s->error_set = 0;
    return sl_set_error(SL_ERR_BACKEND, "%s", s->error_text);
}
