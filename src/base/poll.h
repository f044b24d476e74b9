/*
 * poll.h — waiting with a deadline (src/base): the one polling loop of
 * data-parallel training, for MPI requests and NCCL's streams, events and
 * communicator creation alike (src/dist). Kept free of MPI and CUDA so the
 * CPU tests check its rules (tests/test_poll.c).
 */
#ifndef SL_POLL_H
#define SL_POLL_H

/* What one look at a pending operation found. */
typedef enum sl_poll {
    SL_POLL_DONE = 0, /* finished */
    SL_POLL_PENDING,  /* still running: look again */
    SL_POLL_FAILED    /* failed: the probe recorded why */
} sl_poll;

/* One look at the operation behind state. */
typedef sl_poll (*sl_poll_probe)(void *state);
/* Seconds on a monotonic clock (MPI_Wtime, sl_now_seconds). */
typedef double (*sl_poll_clock)(void);

/* Calls probe until it answers DONE or FAILED and returns that answer,
 * or returns PENDING once clock() has passed deadline with the operation
 * still running (the probe is always called at least once, and never
 * again after the deadline has passed). Between looks it yields the core,
 * then sleeps 50 us at a time, so a waiting rank leaves the cores to the
 * ranks still computing. */
sl_poll sl_poll_until(sl_poll_probe probe, void *state, double deadline, sl_poll_clock clock);

#endif
