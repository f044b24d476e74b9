/*
 * dist_nccl.c — the NCCL transport of data-parallel training (dist stage)
 * for networks on a CUDA context: one NCCL communicator per membership,
 * bootstrapped over the membership's MPI communicator (rank 0's unique id
 * broadcast), one GPU per rank, and a stream of its own. A bucket's
 * reduction waits on an event recorded on the compute stream after the
 * backward steps that produced it, then runs ncclAllReduce (ncclAvg, in
 * place) on the communication stream while the compute stream goes on
 * with the rest of backward and the re-forwards. finish waits on the
 * host, polling an event until the membership's deadline; past it the
 * NCCL communicator is aborted (ncclCommAbort), so no rank hangs. The
 * communicator is created non-blocking and polled against the same
 * deadline, so a rank that never joins cannot hang the others either.
 *
 * A poll that finds work still running must not leave a trace: the CUDA
 * runtime may keep cudaErrorNotReady as the thread's last error, and the
 * next launch check (cudaGetLastError after a kernel) would then fail a
 * healthy step. forget_not_ready clears exactly that record and nothing
 * else (PyTorch clears it after each not-ready query too).
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>

#include "base/poll.h"
#include "cuda/cuda_backend.h"
#include "dist/dist.h"

struct sl_nccl {
    ncclComm_t comm;
    int comm_ok;
    double timeout_seconds; /* the membership's, for the teardown */
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

/* Clears a "not ready" left as the thread's last CUDA error by a query
 * of work still running; any other pending error stays for its check. */
static void forget_not_ready(void)
{
    if (cudaPeekAtLastError() == cudaErrorNotReady)
        (void)cudaGetLastError();
}

/* A communicator's pending work (its creation, or an enqueue that
 * answered ncclInProgress), as a poll probe. */
typedef struct comm_probe {
    ncclComm_t comm;
    ncclResult_t r;
} comm_probe;

static sl_poll comm_ready(void *state)
{
    comm_probe *p = state;
    ncclResult_t async = ncclInProgress;
    p->r = ncclCommGetAsyncError(p->comm, &async);
    if (p->r == ncclSuccess)
        p->r = async;
    return p->r == ncclSuccess ? SL_POLL_DONE : p->r == ncclInProgress ? SL_POLL_PENDING
                                                                         : SL_POLL_FAILED;
}

/* Waits, until the deadline, for a communicator whose last call answered
 * ncclInProgress (on a non-blocking communicator any call may: the next
 * call must wait until it is ready again). On failure or timeout the
 * communicator is aborted and *comm_ok cleared. */
static sl_status settle(sl_dist *d, ncclComm_t comm, int *comm_ok, ncclResult_t r, double deadline,
                        const char *what)
{
    if (r == ncclSuccess)
        return SL_OK;
    sl_poll got = SL_POLL_FAILED;
    comm_probe p = {comm, r};
    if (r == ncclInProgress)
        got = sl_poll_until(comm_ready, &p, deadline, MPI_Wtime);
    if (got == SL_POLL_DONE)
        return SL_OK;
    ncclCommAbort(comm);
    *comm_ok = 0;
    if (got == SL_POLL_FAILED)
        return nccl_break(d, what, p.r);
    return sl_dist_break(d, "%s: rank %d of %d waited %.3g s for the other ranks (the timeout): "
                         "a rank failed, hangs or never joined; the NCCL communicator was "
                         "aborted", what, d->rank, d->size, d->opts.timeout_seconds);
}

/* settle with the membership's timeout from now. */
static sl_status settle_now(sl_dist *d, ncclResult_t r, const char *what)
{
    return settle(d, d->nccl->comm, &d->nccl->comm_ok, r, MPI_Wtime() + d->opts.timeout_seconds,
                  what);
}

/* ncclCommInitRankConfig without blocking, polled until the deadline: a
 * peer that never joins makes this rank fail, not hang (the half-made
 * communicator is aborted). On success n->comm is usable. */
static sl_status init_comm(sl_dist *d, struct sl_nccl *n, ncclUniqueId id, double deadline)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, d->size, id, d->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (comm)
            ncclCommAbort(comm);
        return nccl_break(d, "ncclCommInitRankConfig", r);
    }
    int ok = 1;
    sl_status st = settle(d, comm, &ok, r, deadline, "sl_dist_join: creating the NCCL communicator");
    if (st != SL_OK)
        return st;
    n->comm = comm;
    n->comm_ok = 1;
    return SL_OK;
}

sl_status sl_nccl_create(sl_dist *d, struct sl_nccl **out)
{
    *out = NULL;
    struct sl_nccl *n = sl_zalloc(sizeof *n, "an NCCL communicator");
    if (!n)
        return SL_ERR_NOMEM;
    n->compute = (cudaStream_t)sl_cuda_backend_stream(d->net->ctx->backend);
    n->timeout_seconds = d->opts.timeout_seconds;
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
    if (st == SL_OK)
        st = init_comm(d, n, id, MPI_Wtime() + d->opts.timeout_seconds);
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
        /* A non-blocking communicator is finalised first (a collective
         * with the other ranks that may answer ncclInProgress), polled
         * against the membership's timeout, and only then destroyed; a
         * finalise that fails or outlasts the timeout aborts instead, so
         * a peer that went away cannot hang this rank's teardown. */
        ncclResult_t r = abort ? ncclInternalError : ncclCommFinalize(n->comm);
        if (r == ncclInProgress) {
            comm_probe p = {n->comm, r};
            r = sl_poll_until(comm_ready, &p, MPI_Wtime() + n->timeout_seconds, MPI_Wtime) ==
                        SL_POLL_DONE
                    ? ncclSuccess
                    : ncclInternalError;
        }
        if (r == ncclSuccess)
            ncclCommDestroy(n->comm);
        else
            ncclCommAbort(n->comm);
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

/* The communication stream's last work, as a poll probe. */
typedef struct stream_probe {
    struct sl_nccl *n;
    cudaError_t e;      /* a failed event query */
    ncclResult_t async; /* a failed communicator */
} stream_probe;

static sl_poll stream_done(void *state)
{
    stream_probe *p = state;
    p->e = cudaEventQuery(p->n->done);
    if (p->e == cudaSuccess)
        return SL_POLL_DONE;
    if (p->e != cudaErrorNotReady)
        return SL_POLL_FAILED;
    forget_not_ready();
    p->e = cudaSuccess;
    ncclResult_t r = ncclCommGetAsyncError(p->n->comm, &p->async);
    if (r != ncclSuccess) { /* the query itself failed: fail now, not at the timeout */
        p->async = r;
        return SL_POLL_FAILED;
    }
    return p->async == ncclSuccess || p->async == ncclInProgress ? SL_POLL_PENDING
                                                                 : SL_POLL_FAILED;
}

/* Polls until the communication stream's work is done or the deadline
 * passes (then aborts the communicator). */
static sl_status wait_stream(sl_dist *d, double deadline, const char *what)
{
    struct sl_nccl *n = d->nccl;
    cudaError_t e = cudaEventRecord(n->done, n->stream);
    if (e != cudaSuccess)
        return cuda_break(d, what, e);
    stream_probe p = {n, cudaSuccess, ncclSuccess};
    sl_poll got = sl_poll_until(stream_done, &p, deadline, MPI_Wtime);
    if (got == SL_POLL_DONE)
        return SL_OK;
    if (got == SL_POLL_FAILED && p.e != cudaSuccess)
        return cuda_break(d, what, p.e);
    ncclCommAbort(n->comm);
    n->comm_ok = 0;
    if (got == SL_POLL_FAILED)
        return nccl_break(d, what, p.async);
    return sl_dist_break(d, "%s: rank %d of %d waited %.3g s for the other ranks (the "
                         "timeout): a rank failed, hangs or stopped calling; the NCCL "
                         "communicator was aborted", what, d->rank, d->size,
                         d->opts.timeout_seconds);
}

sl_status sl_nccl_broadcast(sl_dist *d, float *data, size_t count, double deadline)
{
    sl_status st = follow_compute(d);
    if (st != SL_OK)
        return st;
    ncclResult_t r = ncclBroadcast(data, data, count, ncclFloat32, 0, d->nccl->comm, d->nccl->stream);
    st = settle(d, d->nccl->comm, &d->nccl->comm_ok, r, deadline, "ncclBroadcast");
    if (st != SL_OK)
        return st;
    return wait_stream(d, deadline, "sl_dist_join: broadcasting rank 0's tensors");
}

sl_status sl_nccl_reduce_start(sl_dist *d, float *data, size_t count)
{
    sl_status st = follow_compute(d);
    if (st != SL_OK)
        return st;
    ncclResult_t r = ncclAllReduce(data, data, count, ncclFloat32, ncclAvg, d->nccl->comm,
                                   d->nccl->stream);
    return settle_now(d, r, "ncclAllReduce of a gradient bucket");
}

sl_status sl_nccl_finish(sl_dist *d, double deadline)
{
    if (d->n_stats) {
        sl_status st = follow_compute(d);
        if (st != SL_OK)
            return st;
        /* Inside a group, calls only queue: the group's end answers for them
         * (ncclInProgress there too on a non-blocking communicator). */
        ncclResult_t r = ncclGroupStart();
        for (int i = 0; r == ncclSuccess && i < d->n_stats; i++)
            r = ncclBroadcast(d->stats[i].data, d->stats[i].data, d->stats[i].count, ncclFloat32, 0,
                              d->nccl->comm, d->nccl->stream);
        ncclResult_t end = ncclGroupEnd();
        if (r == ncclSuccess || r == ncclInProgress)
            r = end;
        st = settle(d, d->nccl->comm, &d->nccl->comm_ok, r, deadline,
                    "ncclBroadcast of the running statistics");
        if (st != SL_OK)
            return st;
    }
    return wait_stream(d, deadline, "reducing the gradients");
}

sl_status sl_nccl_gather_params(sl_dist *d, double deadline)
{
    sl_status st = follow_compute(d);
    if (st != SL_OK)
        return st;
    /* An in-place all-gather of uneven pieces: each piece broadcast from
     * the rank that updated it, all in one group. */
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; r == ncclSuccess && i < d->n_gather; i++)
        for (int k = 0; r == ncclSuccess && k < d->size; k++) {
            int n = d->gather_count[i * d->size + k];
            float *p = d->gather_data[i] + d->gather_displ[i * d->size + k];
            if (n)
                r = ncclBroadcast(p, p, (size_t)n, ncclFloat32, k, d->nccl->comm, d->nccl->stream);
        }
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress)
        r = end;
    st = settle(d, d->nccl->comm, &d->nccl->comm_ok, r, deadline,
                "ncclBroadcast of the updated parameters");
    if (st != SL_OK)
        return st;
    return wait_stream(d, deadline, "gathering the updated parameters (shard 1)");
}
