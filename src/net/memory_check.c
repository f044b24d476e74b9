/*
 * memory_check.c — before a run allocates its activation arena (net
 * stage), the planned size is compared with what this process may still
 * take (host memory: base/sysmem.c; a GPU: its free memory): a step larger
 * than memory then fails with SL_ERR_NOMEM naming both figures and a
 * budget schedule that would fit (found with net_plan.c's
 * sl_net_schedule_segments), instead of being killed by the OOM killer
 * while the arena is zero-filled. net_run.c calls it;
 * sl_net_set_memory_check switches it off.
 */
#include <stdio.h>
#include <string.h>

#include "net/net.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

sl_status sl_net_set_memory_check(sl_net *net, int enabled)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_memory_check: network is NULL");
    net->no_memory_check = !enabled;
    return SL_OK;
}

/* "a budget schedule fits: ..." or why none does, into buf. */
static void suggest(sl_net *net, const sl_run_cache *c, sl_mode mode, uint64_t budget, char *buf,
                    size_t n)
{
    if (mode != SL_MODE_TRAIN) {
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

/* What the device has left, in the host figures' terms. */
static sl_host_memory device_memory(const sl_backend *be)
{
    sl_host_memory m;
    memset(&m, 0, sizeof m);
    size_t total = 0;
    m.available = be->device_free_bytes(be, &total);
    m.known = total > 0;
    m.limit = total;
    m.used = total - m.available;
    snprintf(m.source, sizeof m.source, "the GPU's memory");
    return m;
}

sl_status sl_net_check_memory(sl_net *net, const sl_run_cache *c, sl_mode mode, const char *fn)
{
    const sl_backend *be = net->ctx->backend;
    size_t need = c->plan.arena_bytes;
    if (net->no_memory_check || (net->arena && need <= net->arena_capacity))
        return SL_OK;
    if (!be->host_memory && !be->device_free_bytes)
        return SL_OK;
    sl_host_memory m = be->host_memory ? sl_host_memory_available() : device_memory(be);
    /* The old arena is freed before the new one is allocated. */
    uint64_t room = m.available + (net->arena ? net->arena_capacity : 0);
    if (!m.known || need <= room)
        return SL_OK;
    uint64_t fixed = (uint64_t)net->param_floats * sizeof(float);
    if (mode == SL_MODE_TRAIN)
        fixed += (uint64_t)(net->grad_floats + net->opt_floats) * sizeof(float);
    char advice[600];
    suggest(net, c, mode, room + fixed, advice, sizeof advice);
    return sl_set_error(SL_ERR_NOMEM,
                   "%s: this step needs %.2f GiB for its activation arena (%.2f GiB in all with "
                   "parameters%s), but only %.2f GiB of memory is available (%s: %.2f GiB, "
                   "%.2f GiB in use); %s. sl_net_set_memory_check(net, 0) (--no-memory-check) "
                   "skips this check",
                   fn, need / GIB, (need + fixed) / GIB,
                   mode == SL_MODE_TRAIN ? ", gradients and optimizer state" : "",
                   room / GIB, m.source, m.limit / GIB, m.used / GIB, advice);
}
