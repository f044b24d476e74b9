/*
 * memory_check.c — before a run allocates anything (net stage), what its
 * step will hold is compared with what this process may still take (host
 * memory: base/sysmem.c; a GPU: its free memory): the activation arena
 * the plan sizes, the fixed part (parameters; in training their gradients
 * and the optimizer state) not allocated yet, and on the host the address
 * space the BLAS and the threads map during the step. A step larger than
 * memory then fails with SL_ERR_NOMEM naming each figure and a budget
 * schedule that fits (found with net_plan.c's sl_net_schedule_segments),
 * instead of being killed by the OOM killer while the arena is zero-filled,
 * or hanging in OpenBLAS (which retries a failed mmap of its work buffer
 * forever). net_run.c calls sl_net_check_memory before it materialises the
 * parameters; net.c and optimizer.c call sl_net_check_fixed_memory before
 * they allocate parameters or optimizer state outside a run.
 * sl_net_set_memory_check switches both off.
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

sl_status sl_net_set_memory_check(sl_net *net, int enabled)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_memory_check: network is NULL");
    net->no_memory_check = !enabled;
    return SL_OK;
}

/* The fixed part of a step by kind: what materialising allocates (the
 * gradients while the network is in training mode) and the optimizer's
 * state; held is the part already allocated. */
typedef struct fixed_part {
    uint64_t params, grads, opt, total, held;
} fixed_part;

static fixed_part fixed_part_of(const sl_net *net)
{
    fixed_part f;
    f.params = (uint64_t)net->param_floats * sizeof(float);
    f.grads = net->mode == SL_MODE_TRAIN ? (uint64_t)net->grad_floats * sizeof(float) : 0;
    f.opt = (uint64_t)net->opt_floats * sizeof(float);
    f.total = f.params + f.grads + f.opt;
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

/* "a budget schedule fits: ..." or why none does, into buf. */
static void suggest(sl_net *net, const sl_run_cache *c, sl_mode mode, uint64_t budget,
                    uint64_t fixed, char *buf, size_t n)
{
    if (!c || budget <= fixed) {
        snprintf(buf, n, "the fixed bytes%s do not fit: use a smaller model or fewer classes%s",
                 c ? " alone" : "", net->opt_floats ? ", or an optimizer with less state" : "");
        return;
    }
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

/* Checks that `arena` bytes (the activation arena, or what the caller is
 * about to allocate besides the fixed part: `what`), replacing the
 * `arena_held` the network holds (freed first), and the fixed part not
 * allocated yet fit, with the BLAS's and the threads' address space when
 * `step`. c and mode: the run's plan, for the advice (c NULL outside a
 * run). */
static sl_status check(sl_net *net, const sl_run_cache *c, sl_mode mode, uint64_t arena,
                       uint64_t arena_held, const char *what, int step, const char *fn)
{
    const sl_backend *be = net->ctx->backend;
    fixed_part f = fixed_part_of(net);
    if (net->no_memory_check || (arena <= arena_held && f.held == f.total))
        return SL_OK;
    if (!be->host_memory && !be->device_free_bytes)
        return SL_OK;
    uint64_t reserve = be->host_memory && step ? address_reserve(net) : 0;
    sl_host_memory m = be->host_memory ? sl_host_memory_available(reserve) : device_memory(be);
    /* Room for the step: what is free plus what it already holds. */
    uint64_t room = m.available + arena_held + f.held;
    uint64_t need = arena + f.total;
    if (!m.known || need <= room)
        return SL_OK;
    char advice[600];
    suggest(net, c, mode, room, f.total, advice, sizeof advice);
    char kept[160] = "";
    if (m.reserved)
        snprintf(kept, sizeof kept, ", and %s kept for the BLAS's work buffers and the threads' "
                 "stacks", fig(m.reserved).text);
    char head[200];
    if (arena)
        snprintf(head, sizeof head, "%s needs %s for %s and", c ? "this step" : "the network",
                 fig(arena).text, what);
    else
        snprintf(head, sizeof head, "the network needs");
    return sl_set_error(SL_ERR_NOMEM,
                   "%s: %s %s of fixed bytes (parameters %s, gradients %s, optimizer state %s), "
                   "%s in all, but only %s of memory is available (%s: %.2f GiB, %.2f GiB in "
                   "use%s); %s. sl_net_set_memory_check(net, 0) (--no-memory-check) skips this "
                   "check",
                   fn, head, fig(f.total).text, fig(f.params).text, fig(f.grads).text,
                   fig(f.opt).text, fig(need).text, fig(room).text, m.source, m.limit / GIB,
                   m.used / GIB, kept, advice);
}

sl_status sl_net_check_memory(sl_net *net, const sl_run_cache *c, sl_mode mode, const char *fn)
{
    return check(net, c, mode, c->plan.arena_bytes, net->arena ? net->arena_capacity : 0,
                 "its activation arena", 1, fn);
}

sl_status sl_net_check_fixed_memory(sl_net *net, uint64_t extra, const char *what, const char *fn)
{
    return check(net, NULL, net->mode, extra, 0, what, 0, fn);
}
