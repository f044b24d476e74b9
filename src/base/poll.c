/*
 * poll.c — the polling loop with a deadline (poll.h; src/base).
 */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <time.h>

#include "base/poll.h"

/* Yield for the first looks (an answer is often a moment away), then
 * sleep, so a long wait costs no core. */
static void pause_between_looks(long looks)
{
    if (looks < 200) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

sl_poll sl_poll_until(sl_poll_probe probe, void *state, double deadline, sl_poll_clock clock)
{
    for (long looks = 0;; looks++) {
        sl_poll p = probe(state);
        if (p != SL_POLL_PENDING)
            return p;
        if (clock() > deadline)
            return SL_POLL_PENDING;
        pause_between_looks(looks);
    }
}
