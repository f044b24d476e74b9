/*
 * dist_wait.c — waiting for the other ranks (dist stage: data-parallel
 * training): an MPI request polled until the membership's deadline
 * (base/poll.c: short pauses that leave the cores to ranks still
 * computing), and the
 * membership marked broken when the deadline passes or MPI fails. The join
 * (dist.c), the per-step hooks (dist_step.c) and the NCCL transport wait
 * through it. Also the sum-to-mean every reduction ends with.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>

#include "base/poll.h"
#include "dist/dist.h"

sl_status sl_dist_break(sl_dist *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->broken_why, sizeof d->broken_why, fmt, ap);
    va_end(ap);
    d->broken = 1;
    return sl_set_error(SL_ERR_BACKEND, "%s", d->broken_why);
}

/* An MPI request as a poll probe: its MPI_Test result is kept. */
typedef struct mpi_probe {
    MPI_Request *request;
    int rc;
} mpi_probe;

static sl_poll test_request(void *state)
{
    mpi_probe *p = state;
    int done = 0;
    p->rc = MPI_Test(p->request, &done, MPI_STATUS_IGNORE);
    if (p->rc != MPI_SUCCESS)
        return SL_POLL_FAILED;
    return done ? SL_POLL_DONE : SL_POLL_PENDING;
}

sl_status sl_dist_wait_until(sl_dist *d, MPI_Request *r, double deadline, const char *what)
{
    mpi_probe p = {r, MPI_SUCCESS};
    sl_poll got = sl_poll_until(test_request, &p, deadline, MPI_Wtime);
    if (got == SL_POLL_DONE)
        return SL_OK;
    if (got == SL_POLL_FAILED) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(p.rc, msg, &len);
        return sl_dist_break(d, "%s: MPI failed on rank %d: %s", what, d->rank, msg);
    }
    return sl_dist_break(d, "%s: rank %d of %d waited %.3g s for the other ranks (the "
                         "timeout): a rank failed, hangs or stopped calling; the "
                         "communicator is unusable now", what, d->rank, d->size,
                         d->opts.timeout_seconds);
}

sl_status sl_dist_wait(sl_dist *d, MPI_Request *r, const char *what)
{
    return sl_dist_wait_until(d, r, MPI_Wtime() + d->opts.timeout_seconds, what);
}

void sl_dist_sum_to_mean(const sl_dist *d, float *p, size_t n)
{
    float inv = 1.0f / (float)d->size;
    for (size_t k = 0; k < n; k++)
        p[k] *= inv;
}
