/*
 * dist_nccl.c — the NCCL transport of data-parallel training (dist stage)
 * for networks on a CUDA context: one NCCL communicator per membership,
 * bootstrapped over the membership's MPI communicator (rank 0's unique id
 * broadcast), one GPU per rank, and a stream of its own. A bucket's
 * reduction waits on an event recorded on the compute stream after the
 * backward steps that produced it, then runs ncclAllReduce (ncclAvg, in
 * place) on the communication stream while the compute stream goes on with
 * the rest of backward and the re-forwards. finish waits on the host,
 * polling an event until the membership's deadline; past it the NCCL
 * communicator is aborted (ncclCommAbort), so no rank hangs.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <time.h>

#include "cuda/cuda_backend.h"
#include "dist/dist.h"

struct sl_nccl {
    ncclComm_t comm;
    int comm_ok;
    cudaStream_t stream;  /* communication */
    cudaStream_t compute; /* the backend instance's stream */
    cudaEvent_t ready, done;
};

static sl_status nccl_break(sl_dist *d, const char *what, ncclResult_t r)
{
    return sl_dist_break(d, "%s failed on rank %d: %s", what, d->rank, ncclGetErrorString(r));
}

static sl_status cuda_break(sl_dist *d, const char *what, cudaError_t e)
{
    return sl_dist_break(d, "%s failed on rank %d: %s", what, d->rank, cudaGetErrorString(e));
}

sl_status sl_nccl_create(sl_dist *d, struct sl_nccl **out)
{
    *out = NULL;
    struct sl_nccl *n = sl_zalloc(sizeof *n, "an NCCL communicator");
    if (!n)
        return SL_ERR_NOMEM;
    n->compute = (cudaStream_t)sl_cuda_backend_stream(d->net->ctx->backend);
    cudaError_t e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        sl_nccl_destroy(n, 0);
        return sl_set_error(SL_ERR_BACKEND, "sl_dist_join: CUDA stream or event: %s", cudaGetErrorString(e));
    }
    ncclUniqueId id;
    ncclResult_t r = d->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    if (r != ncclSuccess) {
        /* the other ranks learn it from the broadcast timing out; say why here */
        sl_nccl_destroy(n, 0);
        return nccl_break(d, "ncclGetUniqueId", r);
    }
    MPI_Request req;
    sl_status st = SL_OK;
    if (MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, d->comm, &req) != MPI_SUCCESS)
        st = sl_dist_break(d, "sl_dist_join: MPI_Ibcast of the NCCL id failed");
    if (st == SL_OK)
        st = sl_dist_wait(d, &req, "sl_dist_join: the NCCL id");
    if (st == SL_OK) {
        r = ncclCommInitRank(&n->comm, d->size, id, d->rank);
        if (r != ncclSuccess)
            st = nccl_break(d, "ncclCommInitRank", r);
        else
            n->comm_ok = 1;
    }
    if (st != SL_OK) {
        sl_nccl_destroy(n, 0);
        return st;
    }
    *out = n;
    return SL_OK;
}

void sl_nccl_destroy(struct sl_nccl *n, int abort)
{
    if (!n)
        return;
    if (n->comm_ok) {
        if (abort)
            ncclCommAbort(n->comm);
        else
            ncclCommDestroy(n->comm);
    }
    if (n->ready)
        cudaEventDestroy(n->ready);
    if (n->done)
        cudaEventDestroy(n->done);
    if (n->stream)
        cudaStreamDestroy(n->stream);
    free(n);
}

/* The communication stream waits for the compute stream's work so far. */
static sl_status follow_compute(sl_dist *d)
{
    struct sl_nccl *n = d->nccl;
    cudaError_t e = cudaEventRecord(n->ready, n->compute);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(n->stream, n->ready, 0);
    return e == cudaSuccess ? SL_OK : cuda_break(d, "ordering the NCCL stream", e);
}

/* Polls until the communication stream's work is done or the deadline
 * passes (then aborts the communicator). */
static sl_status wait_stream(sl_dist *d, double deadline, const char *what)
{
    struct sl_nccl *n = d->nccl;
    cudaError_t e = cudaEventRecord(n->done, n->stream);
    if (e != cudaSuccess)
        return cuda_break(d, what, e);
    for (long spins = 0;; spins++) {
        e = cudaEventQuery(n->done);
        if (e == cudaSuccess)
            return SL_OK;
        if (e != cudaErrorNotReady)
            return cuda_break(d, what, e);
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(n->comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(n->comm);
            n->comm_ok = 0;
            return nccl_break(d, what, async);
        }
        if (MPI_Wtime() > deadline) {
            ncclCommAbort(n->comm);
            n->comm_ok = 0;
            return sl_dist_break(d, "%s: rank %d of %d waited %.3g s for the other ranks (the "
                                 "timeout): a rank failed, hangs or stopped calling; the NCCL "
                                 "communicator was aborted", what, d->rank, d->size,
                                 d->opts.timeout_seconds);
        }
        if (spins > 1000) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

sl_status sl_nccl_broadcast(sl_dist *d, float *data, size_t count, double deadline)
{
    sl_status st = follow_compute(d);
    if (st != SL_OK)
        return st;
    ncclResult_t r = ncclBroadcast(data, data, count, ncclFloat32, 0, d->nccl->comm, d->nccl->stream);
    if (r != ncclSuccess)
        return nccl_break(d, "ncclBroadcast", r);
    return wait_stream(d, deadline, "sl_dist_join: broadcasting rank 0's tensors");
}

sl_status sl_nccl_reduce_start(sl_dist *d, float *data, size_t count)
{
    sl_status st = follow_compute(d);
    if (st != SL_OK)
        return st;
    ncclResult_t r = ncclAllReduce(data, data, count, ncclFloat32, ncclAvg, d->nccl->comm,
                                   d->nccl->stream);
    return r == ncclSuccess ? SL_OK : nccl_break(d, "ncclAllReduce of a gradient bucket", r);
}

sl_status sl_nccl_finish(sl_dist *d, double deadline)
{
    if (d->n_stats) {
        sl_status st = follow_compute(d);
        if (st != SL_OK)
            return st;
        ncclResult_t r = ncclGroupStart();
        for (int i = 0; r == ncclSuccess && i < d->n_stats; i++)
            r = ncclBroadcast(d->stats[i].data, d->stats[i].data, d->stats[i].count, ncclFloat32, 0,
                              d->nccl->comm, d->nccl->stream);
        ncclResult_t end = ncclGroupEnd();
        if (r == ncclSuccess)
            r = end;
        if (r != ncclSuccess)
            return nccl_break(d, "ncclBroadcast of the running statistics", r);
    }
    return wait_stream(d, deadline, "reducing the gradients");
}
