/*
 * memory_room.c — whether what a network is about to allocate fits in
 * what this process may still take (net stage, below net.c, which checks
 * its parameters with it before allocating them): host memory
 * (base/sysmem.c) or a GPU's free memory, against the fixed part of a
 * step not allocated yet (parameters; in training their gradients and the
 * optimizer state), what the caller adds (an activation arena, new
 * optimizer state, a generator's KV cache, the caller's own batch buffers
 * in host memory) and, for a step on the host, the address space the
 * BLAS and the threads map while it runs. Too much is SL_ERR_NOMEM naming
 * every figure, with the caller's advice (memory_check.c's budget
 * schedule for a run). sl_net_set_memory_check switches it off.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "net/net.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* OpenBLAS's work buffer, one per thread that calls it, mapped at that
 * thread's first GEMM: BUFFER_SIZE, 32 << 22 bytes on x86-64 and ARM64
 * (its common_x86_64.h / common_arm64.h; the 128 MiB mmaps strace shows). */
#define BLAS_BUFFER_BYTES ((uint64_t)128 << 20)

/* The fixed part of a step by kind: what materialising allocates (the
 * gradients while the network is in training mode) and the optimizer's
 * state; held is the part already allocated. */
typedef struct fixed_part {
    uint64_t params, grads, opt, total, held;
} fixed_part;

size_t sl_net_fixed_grad_floats(const sl_net *net, sl_mode mode)
{
    if (mode != SL_MODE_TRAIN || net->optim.update_in_backward)
        return 0;
    return net->dp.shard == 2 ? net->dp.shard_hi - net->dp.shard_lo : net->grad_floats;
}

int sl_net_pgrad_flags(const sl_net *net)
{
    return (net->optim.update_in_backward ? SL_PGRAD_UPDATE : 0) |
           (net->dp.shard == 2 && (net->dp.comm || net->dp.plan_ranks > 1) ? SL_PGRAD_REDUCE : 0);
}

static fixed_part fixed_part_of(const sl_net *net)
{
    fixed_part f;
    /* Gradients by the network's mode, not the run's: materialising
     * allocates them for a network in training mode even for a
     * prediction, and never for one in inference mode. */
    f.params = sl_mul_sat(net->param_floats, sizeof(float));
    f.grads = sl_mul_sat(sl_net_fixed_grad_floats(net, net->mode), sizeof(float));
    f.opt = sl_mul_sat(net->opt_floats, sizeof(float));
    f.total = sl_add_sat(sl_add_sat(f.params, f.grads), f.opt); /* too large stays too large */
    f.held = (net->param_block ? f.params : 0) + (net->grad_block ? f.grads : 0) +
             (net->opt_block ? f.opt : 0);
    return f;
}

/* Address space a step maps beyond its arena and fixed part on the host:
 * a BLAS work buffer for each thread of the team (the caller and every
 * worker each call a single-threaded GEMM on their tile) and the workers'
 * stacks (glibc's default: RLIMIT_STACK, 32 MiB when unlimited). Counted
 * whole even when a previous step mapped them already. Only RLIMIT_AS
 * counts these: the buffers' touched pages are a few MiB. */
static uint64_t address_reserve(const sl_net *net)
{
    uint64_t threads = (uint64_t)sl_context_threads(net->ctx);
    uint64_t stack = (uint64_t)32 << 20;
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        stack = (uint64_t)rl.rlim_cur;
    return threads * BLAS_BUFFER_BYTES + (threads - 1) * stack;
}

/* "1.50 GiB", or "1.04 MiB" below a GiB. */
typedef struct figure {
    char text[32];
} figure;

static figure fig(uint64_t bytes)
{
    figure f;
    if (bytes >= (1ull << 30))
        snprintf(f.text, sizeof f.text, "%.2f GiB", bytes / GIB);
    else
        snprintf(f.text, sizeof f.text, "%.2f MiB", bytes / (1024.0 * 1024.0));
    return f;
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

/* A GPU run's host-side bytes (the caller's batch buffers) against the
 * host's memory alone: the device's figures do not cover them. */
static sl_status check_host_extra(const sl_room_request *rq, const char *fn)
{
    sl_host_memory m = sl_host_memory_available(0);
    if (!m.known || rq->host_extra <= m.available)
        return SL_OK;
    return sl_set_error(SL_ERR_NOMEM,
                        "%s: %s needs %s of host memory for %s, but only %s of memory is "
                        "available (%s: %.2f GiB, %.2f GiB in use); use a smaller batch. "
                        "sl_net_set_memory_check(net, 0) (--no-memory-check) skips this check",
                        fn, rq->who ? rq->who : "this step", fig(rq->host_extra).text,
                        rq->host_what ? rq->host_what : "the caller's buffers",
                        fig(m.available).text, m.source, m.limit / GIB, m.used / GIB);
}

sl_status sl_net_check_room(sl_net *net, const sl_room_request *rq, const char *fn)
{
    uint64_t arena = rq->arena, arena_held = rq->arena_held;
    const char *what = rq->what;
    const char *buffers = rq->host_what ? rq->host_what : "the caller's buffers";
    const sl_backend *be = net->ctx->backend;
    fixed_part f = fixed_part_of(net);
    if (net->no_memory_check ||
        (arena <= arena_held && f.held == f.total && rq->host_extra == 0))
        return SL_OK;
    if (!be->host_memory && !be->device_free_bytes)
        return SL_OK;
    if (!be->host_memory && rq->host_extra) {
        sl_status st = check_host_extra(rq, fn);
        if (st != SL_OK)
            return st;
    }
    /* On the host, the caller's buffers come out of the same memory. */
    uint64_t extra = be->host_memory ? rq->host_extra : 0;
    uint64_t reserve = be->host_memory && rq->step ? address_reserve(net) : 0;
    sl_host_memory m = be->host_memory ? sl_host_memory_available(reserve) : device_memory(be);
    /* Room for the step: what is free plus what it already holds. */
    uint64_t room = sl_add_sat(sl_add_sat(m.available, arena_held), f.held);
    uint64_t need = sl_add_sat(sl_add_sat(arena, extra), f.total);
    if (!m.known || need <= room)
        return SL_OK;
    /* The advice's budget is for the arena and the fixed part: the
     * caller's buffers take their share of the room first. */
    uint64_t budget = room > extra ? room - extra : 0;
    char advice[600];
    if (rq->advise && budget > f.total)
        rq->advise(rq->user, budget, f.total, advice, sizeof advice);
    else if (extra && room > f.total)
        snprintf(advice, sizeof advice, "the fixed bytes and %s alone do not fit: use a smaller "
                 "batch", buffers);
    else
        snprintf(advice, sizeof advice, "the fixed bytes%s do not fit: use a smaller model or "
                 "fewer classes%s", rq->step ? " alone" : "",
                 net->opt_floats ? ", or an optimizer with less state" : "");
    char kept[160] = "";
    if (m.reserved)
        snprintf(kept, sizeof kept, ", and %s kept for the BLAS's work buffers and the threads' "
                 "stacks", fig(m.reserved).text);
    if (f.total == 0) /* nothing fixed yet (a model checked before it is built) */
        return sl_set_error(SL_ERR_NOMEM,
                            "%s: the network needs %s for %s, but only %s of memory is available "
                            "(%s: %.2f GiB, %.2f GiB in use%s); %s. sl_net_set_memory_check(net, 0) "
                            "(--no-memory-check) skips this check",
                            fn, fig(arena).text, what, fig(room).text, m.source, m.limit / GIB,
                            m.used / GIB, kept, advice);
    const char *who = rq->who ? rq->who : rq->step ? "this step" : "the network";
    char head[600], batch[200] = "";
    if (extra)
        snprintf(batch, sizeof batch, ", %s for %s", fig(extra).text, buffers);
    if (arena)
        snprintf(head, sizeof head, "%s needs %s for %s%s and", who, fig(arena).text, what, batch);
    else if (extra)
        snprintf(head, sizeof head, "%s needs %s for %s and", who, fig(extra).text, buffers);
    else
        snprintf(head, sizeof head, "%s needs", who);
    return sl_set_error(SL_ERR_NOMEM,
                   "%s: %s %s of fixed bytes (parameters %s, gradients %s, optimizer state %s), "
                   "%s in all, but only %s of memory is available (%s: %.2f GiB, %.2f GiB in "
                   "use%s); %s. sl_net_set_memory_check(net, 0) (--no-memory-check) skips this "
                   "check",
                   fn, head, fig(f.total).text, fig(f.params).text, fig(f.grads).text,
                   fig(f.opt).text, fig(need).text, fig(room).text, m.source, m.limit / GIB,
                   m.used / GIB, kept, advice);
}

sl_status sl_net_check_fixed_memory(sl_net *net, uint64_t extra, const char *what, const char *fn)
{
    sl_room_request rq = {.arena = extra, .what = what};
    return sl_net_check_room(net, &rq, fn);
}
