/*
 * memory_check.c — before a run allocates anything (net stage), its whole
 * step is checked with memory_room.c: the activation arena the plan sizes
 * (replacing the network's smaller one, freed first), the fixed part
 * (parameters; in training their gradients and the optimizer state) not
 * allocated yet, and on the host the address space the BLAS and the
 * threads map during the step. A step larger than memory then fails with
 * SL_ERR_NOMEM naming each figure and a budget schedule that fits (found
 * with net_plan.c's sl_net_schedule_segments), instead of being killed by
 * the OOM killer while the arena is zero-filled, or hanging in OpenBLAS
 * (which retries a failed mmap of its work buffer forever). net_run.c
 * calls it before it materialises the parameters; a caller checks a step
 * with its own batch buffers before it allocates them with
 * sl_net_check_step_memory. sl_net_set_memory_check switches it off.
 */
#include <stdio.h>
#include <string.h>

#include "net/net.h"

sl_status sl_net_set_memory_check(sl_net *net, int enabled)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_memory_check: network is NULL");
    net->no_memory_check = !enabled;
    return SL_OK;
}

/* The run whose step is checked, for the advice. */
typedef struct advice_ctx {
    sl_net *net;
    const sl_run_cache *c;
    sl_mode mode;
} advice_ctx;

/* "a budget schedule fits: ..." or why none does, into buf. */
static void suggest(void *user, uint64_t budget, uint64_t fixed, char *buf, size_t n)
{
    (void)fixed; /* a budget schedule counts the fixed part itself */
    const advice_ctx *a = user;
    sl_net *net = a->net;
    const sl_run_cache *c = a->c;
    if (a->mode != SL_MODE_TRAIN) {
        snprintf(buf, n, "predict with a smaller batch");
        return;
    }
    sl_segments seg;
    memset(&seg, 0, sizeof seg);
    sl_status st = sl_net_schedule_segments(net, &c->sh, SL_SCHEDULE_BUDGET(budget), &seg);
    if (st == SL_OK)
        snprintf(buf, n, "the schedule SL_SCHEDULE_BUDGET(%llu) (the command's --schedule budget:%lluM) "
                 "fits, or a smaller batch", (unsigned long long)budget,
                 (unsigned long long)(budget >> 20));
    else if (st == SL_ERR_BUDGET)
        snprintf(buf, n, "no schedule fits at this batch size (%.400s); use a smaller batch",
                 sl_last_error());
    else
        snprintf(buf, n, "use a smaller batch");
    sl_segments_release(&seg);
}

sl_status sl_net_check_memory(sl_net *net, const sl_run_cache *c, sl_mode mode, const char *fn)
{
    advice_ctx a = {net, c, mode};
    sl_room_request rq = {.arena = c->plan.arena_bytes,
                          .arena_held = net->arena ? net->arena_capacity : 0,
                          .what = "its activation arena",
                          .step = 1,
                          .advise = suggest,
                          .user = &a};
    return sl_net_check_room(net, &rq, fn);
}

sl_status sl_net_check_step_memory(sl_net *net, sl_shape input, sl_mode mode, uint64_t batch_bytes)
{
    const char *fn = "sl_net_check_step_memory";
    sl_run_cache *c;
    /* The plan is the one the run will use (cached): planning allocates
     * no parameter, gradient or arena. */
    sl_status st = sl_net_plan_for(net, input, mode, net, fn, &c);
    if (st != SL_OK)
        return st;
    advice_ctx a = {net, c, mode};
    sl_room_request rq = {.arena = c->plan.arena_bytes,
                          .arena_held = net->arena ? net->arena_capacity : 0,
                          .host_extra = batch_bytes,
                          .what = "its activation arena",
                          .host_what = "the caller's batch (input, labels, outputs)",
                          .step = 1,
                          .advise = suggest,
                          .user = &a};
    return sl_net_check_room(net, &rq, fn);
}
