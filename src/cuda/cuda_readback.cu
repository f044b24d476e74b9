/*
 * cuda_readback.cu — read-backs deferred to the next sync: a result the
 * host needs after the step (the loss, the gradient norm's slots) is
 * copied into pinned memory in stream order, and reaches its destination
 * when sync (or wait) has seen the stream finish, so that reading it does
 * not stop the queue in the middle of a step.
 */
#include <string.h>

#include "cuda/cuda_common.h"

static const size_t kReadback = (size_t)256 << 10; /* bytes deferred to one sync */

/* The deferred read-backs to their destinations (the stream has finished
 * everything queued before them). */
extern "C" void sl_cuda_flush_pending(sl_cuda_state *s)
{
    for (int i = 0; i < s->n_pending; i++)
        memcpy(s->pending[i].dst, s->readback + s->pending[i].off, s->pending[i].bytes);
    s->n_pending = 0;
    s->readback_used = 0;
}

extern "C" void sl_cuda_read_later(sl_cuda_state *s, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    size_t off = (s->readback_used + 15) & ~(size_t)15;
    if (!s->readback && cudaHostAlloc((void **)&s->readback, kReadback, cudaHostAllocDefault) !=
                            cudaSuccess) {
        (void)cudaGetLastError();
        s->readback = NULL;
    }
    if (!s->readback || off + bytes > kReadback || s->n_pending == 16) {
        /* no room: this one now (the earlier ones are done by then too) */
        SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
        sl_cuda_flush_pending(s);
        SL_CUDA_CHECK(s, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s->stream));
        SL_CUDA_CHECK(s, cudaStreamSynchronize(s->stream));
        return;
    }
    SL_CUDA_CHECK(s, cudaMemcpyAsync(s->readback + off, src, bytes, cudaMemcpyDeviceToHost,
                                     s->stream));
    s->pending[s->n_pending++] = {dst, off, bytes};
    s->readback_used = off + bytes;
}

