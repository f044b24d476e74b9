/*
 * dist.c — a network joins a communicator (dist stage: data-parallel
 * training): MPI set up when the program has not, a duplicate of the
 * caller's communicator, a check that every rank built the same network,
 * rank 0's parameters (and optimizer state) broadcast, the hooks that the
 * network's training runs call (dist_step.c) installed; and the public
 * calls around it: rank and size, sums, files written by rank 0 only,
 * counters. Every collective wait has the membership's timeout.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "io/serialize.h"

sl_dist_options sl_dist_defaults(void)
{
    sl_dist_options o = {NULL, 600.0, (size_t)4 << 20, 1, 0};
    return o;
}

static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

static sl_status ensure_mpi(void)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
        return sl_set_error(SL_ERR_STATE, "sl_dist_join: MPI has been finalised in this process");
    if (initialized)
        return SL_OK;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return sl_set_error(SL_ERR_BACKEND, "sl_dist_join: MPI_Init_thread failed");
    atexit(finalize_at_exit);
    return SL_OK;
}

/* Broadcasts count elements of host memory from rank 0 (in pieces that
 * fit MPI's int counts). */
static sl_status broadcast_host(sl_dist *d, void *data, size_t count, MPI_Datatype type,
                                size_t elem_bytes, const char *what)
{
    const size_t piece = (size_t)1 << 28;
    for (size_t off = 0; off < count; off += piece) {
        size_t n = count - off < piece ? count - off : piece;
        MPI_Request r;
        if (MPI_Ibcast((char *)data + off * elem_bytes, (int)n, type, 0, d->comm, &r) != MPI_SUCCESS)
            return sl_dist_break(d, "%s: MPI_Ibcast failed", what);
        sl_status st = sl_dist_wait(d, &r, what);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

static sl_status broadcast_floats(sl_dist *d, float *data, size_t count, const char *what)
{
    if (d->nccl)
        return sl_nccl_broadcast(d, data, count, MPI_Wtime() + d->opts.timeout_seconds);
    return broadcast_host(d, data, count, MPI_FLOAT, sizeof(float), what);
}

enum { DESC_PARAMS, DESC_PARAM_FLOATS, DESC_GRAD_FLOATS, DESC_DEVICE, DESC_OPT, DESC_OPT_FLOATS, DESC_N };

/* Every rank's network must be the same: compares a description across
 * ranks (max of v and of -v gives max and min). *same_opt: every rank has
 * the same optimizer kind and state size. */
static sl_status check_same_network(sl_dist *d, int *same_opt)
{
    const sl_net *net = d->net;
    long long v[2 * DESC_N];
    v[DESC_PARAMS] = net->n_params;
    v[DESC_PARAM_FLOATS] = (long long)net->param_floats;
    v[DESC_GRAD_FLOATS] = (long long)net->grad_floats;
    v[DESC_DEVICE] = net->ctx->device;
    v[DESC_OPT] = net->optim.has_optimizer ? 1 + (long long)net->optim.opt.kind : 0;
    v[DESC_OPT_FLOATS] = (long long)net->opt_floats;
    for (int i = 0; i < DESC_N; i++)
        v[DESC_N + i] = -v[i];
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, v, 2 * DESC_N, MPI_LONG_LONG, MPI_MAX, d->comm, &r) !=
        MPI_SUCCESS)
        return sl_dist_break(d, "sl_dist_join: MPI_Iallreduce failed");
    sl_status st = sl_dist_wait(d, &r, "sl_dist_join");
    if (st != SL_OK)
        return st;
    for (int i = DESC_PARAMS; i <= DESC_DEVICE; i++)
        if (v[i] != -v[DESC_N + i])
            return sl_set_error(SL_ERR_INVALID_ARG,
                           "sl_dist_join: the ranks' networks differ (%s from %lld to %lld): every "
                           "rank must build the same architecture on the same kind of device",
                           i == DESC_DEVICE ? "device" : i == DESC_PARAMS ? "tensor count"
                                                                            : "parameter floats",
                           -v[DESC_N + i], v[i]);
    *same_opt = v[DESC_OPT] > 0 && v[DESC_OPT] == -v[DESC_N + DESC_OPT] &&
                v[DESC_OPT_FLOATS] == -v[DESC_N + DESC_OPT_FLOATS];
    return SL_OK;
}

/* Rank 0's optimizer hyperparameters, state and step count everywhere. */
static sl_status broadcast_optimizer(sl_dist *d)
{
    sl_net *net = d->net;
    struct {
        sl_optimizer_options opt;
        int64_t steps;
    } head = {net->optim.opt, net->optim.steps};
    sl_status st = broadcast_host(d, &head, sizeof head, MPI_BYTE, 1, "sl_dist_join");
    if (st == SL_OK && net->opt_floats)
        st = broadcast_floats(d, net->opt_block, net->opt_floats, "sl_dist_join");
    if (st == SL_OK) {
        net->optim.opt = head.opt;
        net->optim.steps = head.steps;
    }
    return st;
}

/* The running statistics (the non-trainable tensors) and their staging. */
static sl_status list_stats(sl_dist *d)
{
    sl_net *net = d->net;
    d->stats = sl_calloc((size_t)net->n_params + 1, sizeof *d->stats);
    if (!d->stats)
        return sl_set_error(SL_ERR_NOMEM, "sl_dist_join: out of memory");
    for (int i = 0; i < net->n_params; i++) {
        sl_param_spec *p = net->params[i].spec;
        if (p->trainable)
            continue;
        d->stats[d->n_stats++] = (sl_dist_stat){p->data, p->count};
        d->stats_floats += p->count;
    }
    if (!d->nccl && d->stats_floats) {
        d->stats_staging = sl_alloc(d->stats_floats * sizeof(float), "running statistics staging");
        if (!d->stats_staging)
            return SL_ERR_NOMEM;
        d->hooks.bytes = d->stats_floats * sizeof(float);
    }
    return SL_OK;
}

static sl_status join(sl_dist *d, const sl_dist_options *o)
{
    MPI_Comm parent = o->mpi_comm ? *(const MPI_Comm *)o->mpi_comm : MPI_COMM_WORLD;
    if (MPI_Comm_dup(parent, &d->comm) != MPI_SUCCESS) {
        d->comm = MPI_COMM_NULL;
        return sl_set_error(SL_ERR_BACKEND, "sl_dist_join: MPI_Comm_dup failed");
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    int same_opt = 0;
    sl_status st = check_same_network(d, &same_opt);
    if (st == SL_OK && d->net->ctx->device == SL_DEVICE_CUDA)
        st = sl_nccl_create(d, &d->nccl);
    if (st == SL_OK)
        st = list_stats(d);
    if (st == SL_OK)
        st = broadcast_floats(d, d->net->param_block, d->net->param_floats, "sl_dist_join");
    if (st == SL_OK && same_opt)
        st = broadcast_optimizer(d);
    if (st == SL_OK && o->shard >= 1)
        st = sl_shard_join(d);
    if (st == SL_OK && o->shard == 2)
        st = sl_shard2_join(d);
    return st;
}

static sl_status save_on_rank0(void *user, const char *path, int snapshot, sl_file_dtype dtype,
                               const char *fn);

sl_status sl_dist_join(sl_net *net, const sl_dist_options *opts, sl_dist **out)
{
    if (!net || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dist_join: network or out is NULL");
    if (net->dp.comm)
        return sl_set_error(SL_ERR_STATE, "sl_dist_join: the network is already in a communicator");
    sl_dist_options o = opts ? *opts : sl_dist_defaults();
    if (o.shard < 0 || o.shard > 2)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dist_join: shard %d; must be 0 (off), 1 "
                            "(ZeRO-1: optimizer state sharded over the ranks) or 2 (ZeRO-2: "
                            "gradients too)", o.shard);
    if (o.shard == 2 && net->ctx->device == SL_DEVICE_CUDA)
        return sl_set_error(SL_ERR_UNSUPPORTED, "sl_dist_join: shard 2 (ZeRO-2) runs on the CPU's "
                            "MPI ranks only so far; use shard 1 with NCCL");
    if (o.shard == 2 && net->optim.grad_clip > 0.0f)
        return sl_set_error(SL_ERR_STATE, "sl_dist_join: shard 2 keeps no rank's gradients whole, and "
                            "global-norm clipping needs them all; turn clipping off or use shard 1");
    if (o.shard == 2 && net->optim.accum > 1)
        return sl_set_error(SL_ERR_STATE, "sl_dist_join: shard 2 reduces the gradients as backward "
                            "makes them; gradient accumulation is not supported there (use shard 1)");
    if (net->optim.update_in_backward && o.shard != 2)
        return sl_set_error(SL_ERR_STATE, "sl_dist_join: the update in backward runs in a "
                            "communicator only with shard 2 (ZeRO-2), where each rank updates its "
                            "slice as the reduced gradients arrive");
    if (net->dp.shard)
        return sl_set_error(SL_ERR_STATE, "sl_dist_join: the network holds only its slice of the "
                            "optimizer state from an earlier sharded membership; set the optimizer "
                            "again or load a snapshot first");
    if (!(o.timeout_seconds > 0) || o.bucket_bytes < sizeof(float))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dist_join: timeout_seconds %g must be > 0 and "
                            "bucket_bytes %zu at least 4", o.timeout_seconds, o.bucket_bytes);
    sl_status st = ensure_mpi();
    if (st == SL_OK)
        st = sl_net_materialize(net);
    if (st != SL_OK)
        return st;
    sl_dist *d = sl_zalloc(sizeof *d, "a communicator membership");
    if (!d)
        return SL_ERR_NOMEM;
    d->net = net;
    d->opts = o;
    d->comm = MPI_COMM_NULL;
    st = join(d, &o);
    if (st != SL_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sl_last_error());
        d->net = NULL;
        sl_dist_free(d);
        return sl_set_error(st, "%s", msg);
    }
    sl_dist_install_hooks(d);
    d->hooks.save = save_on_rank0;
    if (o.shard >= 1)
        d->hooks.after_update = sl_shard_gather_params;
    if (o.shard == 2)
        d->hooks.reduce = sl_shard2_reduce;
    net->dp.comm = &d->hooks;
    *out = d;
    return SL_OK;
}

void sl_dist_free(sl_dist *d)
{
    if (!d)
        return;
    if (d->net && d->net->dp.comm == &d->hooks)
        d->net->dp.comm = NULL;
    sl_shard2_leave(d);
    if (d->nccl)
        sl_nccl_destroy(d->nccl, d->broken);
    sl_buckets_release(&d->plan);
    free(d->req);
    free(d->done);
    free(d->stats);
    free(d->stats_staging);
    sl_shard_release(d);
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* Freeing a communicator with operations pending (a broken
     * membership) is allowed: MPI frees it once they end. */
    if (!finalized && d->comm != MPI_COMM_NULL)
        MPI_Comm_free(&d->comm);
    free(d);
}

int sl_dist_rank(const sl_dist *d) { return d ? d->rank : 0; }
int sl_dist_size(const sl_dist *d) { return d ? d->size : 1; }

static sl_status check_usable(const sl_dist *d, const char *fn)
{
    if (!d)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: communicator membership is NULL", fn);
    if (d->broken)
        return sl_set_error(SL_ERR_STATE, "%s: the communicator failed earlier (%s)", fn, d->broken_why);
    return SL_OK;
}

sl_status sl_dist_sum(sl_dist *d, double *values, int n)
{
    sl_status st = check_usable(d, "sl_dist_sum");
    if (st != SL_OK)
        return st;
    if (n < 0 || (n > 0 && !values))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dist_sum: %d values at %p", n, (void *)values);
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, d->comm, &r) != MPI_SUCCESS)
        return sl_dist_break(d, "sl_dist_sum: MPI_Iallreduce failed");
    return sl_dist_wait(d, &r, "sl_dist_sum");
}

/* sl_net_comm.save: rank 0 saves on its own (a sharded state gathered to
 * it first), every rank returns rank 0's status and message. */
static sl_status save_on_rank0(void *user, const char *path, int snapshot, sl_file_dtype dtype,
                               const char *fn)
{
    sl_dist *d = user;
    sl_status st = check_usable(d, fn);
    if (st != SL_OK)
        return st;
    struct {
        int status;
        char message[512];
    } result = {SL_OK, ""};
    if (snapshot && d->net->dp.shard) {
        st = sl_shard_save_snapshot(d, path, &result.status, fn); /* collective */
        if (st != SL_OK)
            return st;
    } else if (d->rank == 0) {
        result.status = snapshot ? sl_save_snapshot_here(d->net, path, fn)
                                 : sl_save_model_here(d->net, path, dtype, fn);
    }
    if (d->rank == 0) {
        if (result.status != SL_OK)
            snprintf(result.message, sizeof result.message, "%s", sl_last_error());
    }
    st = broadcast_host(d, &result, sizeof result, MPI_BYTE, 1, fn);
    if (st != SL_OK || result.status == SL_OK)
        return st;
    if (d->rank == 0)
        return (sl_status)result.status; /* the message is this rank's own */
    return sl_set_error((sl_status)result.status, "%s: rank 0 failed: %s", fn, result.message);
}

sl_status sl_dist_get_stats(const sl_dist *d, sl_dist_stats *out)
{
    if (!d || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_dist_get_stats: an argument is NULL");
    *out = d->counters;
    return SL_OK;
}
