/*
 * dist_wait.c — waiting for the other ranks (dist stage: data-parallel
 * training): an MPI request polled until the membership's deadline, with
 * short pauses that leave the cores to ranks still computing, and the
 * membership marked broken when the deadline passes or MPI fails. The join
 * (dist.c), the per-step hooks (dist_step.c) and the NCCL transport wait
 * through it.
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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

/* Short pauses while polling: yield first, then sleep 50 us, so a rank
 * that waits leaves the cores to ranks still computing. */
static void poll_pause(long spins)
{
    if (spins < 200) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

sl_status sl_dist_wait_until(sl_dist *d, MPI_Request *r, double deadline, const char *what)
{
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            return sl_dist_break(d, "%s: MPI failed on rank %d: %s", what, d->rank, msg);
        }
        if (done)
            return SL_OK;
        if (MPI_Wtime() > deadline)
            return sl_dist_break(d, "%s: rank %d of %d waited %.3g s for the other ranks (the "
                                 "timeout): a rank failed, hangs or stopped calling; the "
                                 "communicator is unusable now", what, d->rank, d->size,
                                 d->opts.timeout_seconds);
        poll_pause(spins);
    }
}

sl_status sl_dist_wait(sl_dist *d, MPI_Request *r, const char *what)
{
    return sl_dist_wait_until(d, r, MPI_Wtime() + d->opts.timeout_seconds, what);
}
