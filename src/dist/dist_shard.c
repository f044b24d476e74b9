/*
 * dist_shard.c — ZeRO stage 1 (dist stage): the optimizer state sharded
 * over the ranks. The trainable floats (the gradient block's layout) are
 * split into one contiguous range per rank; a rank holds the state of its
 * range only (net->shard, net->shard_lo / shard_hi: optimizer.c updates
 * just that range), and after each update every rank's updated floats are
 * gathered everywhere (MPI_Iallgatherv in place per parameter, or grouped
 * NCCL broadcasts). The join slices the full state rank 0 broadcast;
 * snapshots gather it back on rank 0 into the unsharded layout, so files
 * never depend on the rank count.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "io/serialize.h"

static void split(size_t floats, int size, size_t *bounds)
{
    for (int r = 0; r < size; r++)
        bounds[r] = sl_shard_bound(floats, size, r);
    bounds[size] = floats;
}

/* Each trainable parameter's piece per rank, for the gather. */
static sl_status list_pieces(sl_dist *d)
{
    sl_net *net = d->net;
    int n = 0;
    for (int i = 0; i < net->n_params; i++)
        n += net->params[i].spec->trainable != 0;
    size_t cells = (size_t)n * (size_t)d->size + 1;
    d->gather_data = sl_calloc((size_t)n + 1, sizeof *d->gather_data);
    d->gather_req = sl_calloc((size_t)n + 1, sizeof *d->gather_req);
    d->gather_count = sl_calloc(cells, sizeof *d->gather_count);
    d->gather_displ = sl_calloc(cells, sizeof *d->gather_displ);
    if (!d->gather_data || !d->gather_req || !d->gather_count || !d->gather_displ)
        return sl_set_error(SL_ERR_NOMEM, "sl_dist_join: out of memory for the shard's pieces");
    size_t g = 0;
    int t = 0;
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        if (!p->trainable)
            continue;
        if (p->count > (size_t)0x7fffffff)
            return sl_set_error(SL_ERR_UNSUPPORTED, "sl_dist_join: parameter '%s' has %zu floats, "
                                "more than MPI counts allow (shard 1)", net->params[i].name, p->count);
        d->gather_data[t] = p->data;
        for (int r = 0; r < d->size; r++) {
            size_t a = g > d->bounds[r] ? g : d->bounds[r];
            size_t b = g + p->count < d->bounds[r + 1] ? g + p->count : d->bounds[r + 1];
            d->gather_count[t * d->size + r] = a < b ? (int)(b - a) : 0;
            d->gather_displ[t * d->size + r] = a < b ? (int)(a - g) : 0;
        }
        g += sl_stride_floats(p->count);
        t++;
    }
    d->n_gather = t;
    return SL_OK;
}

typedef struct slice_ctx {
    const sl_exec *ex;
    const float *full; /* the unsharded layout */
    const sl_net *net;
} slice_ctx;

/* Full layout: parameter at gradient offset g with stride s has its
 * block k at per * g + k * s. */
static size_t full_offset(const sl_net *net, int param, size_t gfirst, size_t off, int per, int k)
{
    size_t stride = sl_stride_floats(net->params[param].spec->count);
    return (size_t)per * (gfirst - off) + (size_t)k * stride + off;
}

static void copy_from_full(void *user, int param, size_t gfirst, size_t off, size_t n, int per,
                           float *const *blocks)
{
    slice_ctx *c = user;
    for (int k = 0; k < per; k++)
        c->ex->be->copy(c->ex, n, c->full + full_offset(c->net, param, gfirst, off, per, k),
                        blocks[k], 0);
}

sl_status sl_shard_join(sl_dist *d)
{
    sl_net *net = d->net;
    d->bounds = sl_calloc((size_t)d->size + 1, sizeof *d->bounds);
    if (!d->bounds)
        return sl_set_error(SL_ERR_NOMEM, "sl_dist_join: out of memory");
    split(net->grad_floats, d->size, d->bounds);
    if (net->grad_floats > (size_t)0x7fffffff)
        return sl_set_error(SL_ERR_UNSUPPORTED, "sl_dist_join: %zu trainable floats: more than "
                            "MPI counts allow for shard 1", net->grad_floats);
    sl_status st = list_pieces(d);
    if (st != SL_OK)
        return st;
    const sl_backend *be = net->ctx->backend;
    size_t lo = d->bounds[d->rank], hi = d->bounds[d->rank + 1];
    size_t keep_lo = net->dp.shard_lo, keep_hi = net->dp.shard_hi;
    net->dp.shard_lo = lo;
    net->dp.shard_hi = hi;
    float *slice = NULL;
    size_t floats = net->optim.has_optimizer ? sl_optimizer_state_floats(net, &net->optim.opt, 1) : 0;
    if (floats && !(slice = be->alloc(be, floats * sizeof(float), "optimizer state (this rank's shard)"))) {
        net->dp.shard_lo = keep_lo;
        net->dp.shard_hi = keep_hi;
        return SL_ERR_NOMEM;
    }
    float *full = net->opt_block;
    net->opt_block = slice;
    net->dp.shard = 1;
    if (floats) {
        sl_exec ex = sl_net_exec(net);
        slice_ctx c = {&ex, full, net};
        sl_net_visit_optimizer_shard(net, copy_from_full, &c);
        st = be->sync(&ex);
        if (st != SL_OK) {
            net->opt_block = full;
            net->dp.shard = 0;
            net->dp.shard_lo = keep_lo;
            net->dp.shard_hi = keep_hi;
            be->free(be, slice);
            return st;
        }
    }
    be->free(be, full);
    net->opt_floats = floats;
    return SL_OK;
}

void sl_shard_release(sl_dist *d)
{
    free(d->bounds);
    free(d->gather_data);
    free(d->gather_req);
    free(d->gather_count);
    free(d->gather_displ);
}

sl_status sl_shard_gather_params(void *user)
{
    sl_dist *d = user;
    static const char what[] = "gathering the updated parameters (shard 1)";
    if (d->broken)
        return sl_set_error(SL_ERR_STATE, "%s: the communicator failed earlier (%s)", what,
                            d->broken_why);
    double deadline = MPI_Wtime() + d->opts.timeout_seconds;
    if (d->nccl)
        return sl_nccl_gather_params(d, deadline);
    int started = 0;
    sl_status st = SL_OK;
    for (; started < d->n_gather; started++) {
        const int *count = d->gather_count + (size_t)started * d->size;
        const int *displ = d->gather_displ + (size_t)started * d->size;
        if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d->gather_data[started], count,
                            displ, MPI_FLOAT, d->comm, &d->gather_req[started]) != MPI_SUCCESS) {
            st = sl_dist_break(d, "%s: MPI_Iallgatherv failed on rank %d", what, d->rank);
            break;
        }
    }
    for (int i = 0; st == SL_OK && i < started; i++)
        st = sl_dist_wait_until(d, &d->gather_req[i], deadline, what);
    return st;
}

/* ---- snapshots: the state gathered on rank 0 ---- */

typedef struct place_ctx {
    float *full;          /* rank 0: per * grad_floats, the unsharded layout */
    const float *gathered; /* block k of every rank, gradient layout */
    int k;
} place_ctx;

/* Every trainable parameter's floats of block k into the full layout. */
static void place_block(const sl_net *net, int per, const place_ctx *c)
{
    size_t g = 0;
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        if (!p->trainable)
            continue;
        size_t stride = sl_stride_floats(p->count);
        memcpy(c->full + (size_t)per * g + (size_t)c->k * stride, c->gathered + g,
               p->count * sizeof(float));
        g += stride;
    }
}

/* Agrees on a local failure (any rank's): SL_ERR_STATE on the others. */
static sl_status agree_ok(sl_dist *d, sl_status local, const char *fn)
{
    int v = local != SL_OK ? d->rank + 1 : 0;
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, d->comm, &r) != MPI_SUCCESS)
        return sl_dist_break(d, "%s: MPI_Iallreduce failed", fn);
    sl_status st = sl_dist_wait(d, &r, fn);
    if (st != SL_OK || local != SL_OK)
        return st != SL_OK ? st : local;
    if (v)
        return sl_set_error(SL_ERR_STATE, "%s: rank %d failed to stage its optimizer state", fn,
                            v - 1);
    return SL_OK;
}

/* Rank 0: the gathered state as the network's (unsharded) state while
 * sl_save_snapshot writes it. */
static sl_status save_full(sl_net *net, const char *path, const float *full, size_t floats,
                           const char *fn)
{
    const sl_backend *be = net->ctx->backend;
    float *block = NULL;
    if (floats) {
        block = be->alloc(be, floats * sizeof(float), "a gathered copy of the optimizer state");
        if (!block)
            return SL_ERR_NOMEM;
        sl_exec ex = sl_net_exec(net);
        be->upload(&ex, block, full, floats * sizeof(float));
        sl_status st = be->sync(&ex);
        if (st != SL_OK) {
            be->free(be, block);
            return st;
        }
    }
    float *keep = net->opt_block;
    size_t keep_floats = net->opt_floats;
    int keep_shard = net->dp.shard;
    net->opt_block = block;
    net->opt_floats = floats;
    net->dp.shard = 0;
    sl_status st = sl_save_snapshot_here(net, path, fn);
    net->opt_block = keep;
    net->opt_floats = keep_floats;
    net->dp.shard = keep_shard;
    be->free(be, block);
    return st;
}

sl_status sl_shard_save_snapshot(sl_dist *d, const char *path, int *rank0_status,
                                 const char *fn)
{
    sl_net *net = d->net;
    const char *names[SL_OPT_STATE_MAX];
    int per = net->optim.has_optimizer ? sl_optimizer_state_blocks(&net->optim.opt, names) : 0;
    size_t len = net->dp.shard_hi - net->dp.shard_lo;
    size_t full_floats = (size_t)per * net->grad_floats;
    float *mine = NULL, *full = NULL, *gathered = NULL;
    int *count = NULL, *displ = NULL;
    sl_status local = SL_OK;
    if (per) {
        mine = malloc((size_t)per * len * sizeof(float) + sizeof(float));
        count = malloc((size_t)d->size * sizeof *count);
        displ = malloc((size_t)d->size * sizeof *displ);
        if (d->rank == 0) {
            full = calloc(full_floats, sizeof(float));
            gathered = malloc(net->grad_floats * sizeof(float));
        }
        if (!mine || !count || !displ || (d->rank == 0 && (!full || !gathered)))
            local = sl_set_error(SL_ERR_NOMEM, "%s: out of memory staging the optimizer state", fn);
    }
    if (local == SL_OK && per) {
        sl_exec ex = sl_net_exec(net);
        ex.be->download(&ex, mine, net->opt_block, (size_t)per * len * sizeof(float));
        local = ex.be->sync(&ex);
    }
    sl_status st = agree_ok(d, local, fn);
    for (int r = 0; st == SL_OK && per && r < d->size; r++) {
        count[r] = (int)(d->bounds[r + 1] - d->bounds[r]);
        displ[r] = (int)d->bounds[r];
    }
    for (int k = 0; st == SL_OK && k < per; k++) {
        MPI_Request r;
        if (MPI_Igatherv(mine + (size_t)k * len, (int)len, MPI_FLOAT, gathered, count, displ,
                         MPI_FLOAT, 0, d->comm, &r) != MPI_SUCCESS)
            st = sl_dist_break(d, "%s: MPI_Igatherv of the optimizer state failed", fn);
        if (st == SL_OK)
            st = sl_dist_wait(d, &r, fn);
        if (st == SL_OK && d->rank == 0) {
            place_ctx c = {full, gathered, k};
            place_block(net, per, &c);
        }
    }
    if (st == SL_OK && d->rank == 0)
        *rank0_status = (int)save_full(net, path, full, full_floats, fn);
    free(mine);
    free(full);
    free(gathered);
    free(count);
    free(displ);
    return st;
}

/* ---- ZeRO-2: gradients reduced node by node to their owners ---- */

sl_status sl_shard2_join(sl_dist *d)
{
    sl_net *net = d->net;
    const sl_graph *g = &net->graph;
    d->node_goff = sl_malloc((size_t)g->n_nodes * sizeof *d->node_goff);
    d->red_req = sl_malloc((size_t)d->size * sizeof *d->red_req);
    d->red_root = sl_malloc((size_t)d->size * sizeof *d->red_root);
    d->red_first = sl_malloc((size_t)d->size * sizeof *d->red_first);
    d->red_count = sl_malloc((size_t)d->size * sizeof *d->red_count);
    if (!d->node_goff || !d->red_req || !d->red_root || !d->red_first || !d->red_count)
        return sl_set_error(SL_ERR_NOMEM, "sl_dist_join: out of memory for ZeRO-2's reductions");
    /* A node's value holds its trainable parameters' gradients in the
     * gradient block's layout: they must be neighbours there. */
    for (int i = 0; i < g->n_nodes; i++)
        d->node_goff[i] = SIZE_MAX;
    size_t off = 0;
    int node = -1;
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        if (!p->trainable)
            continue;
        int n = sl_graph_param_node(g, p);
        if (n < 0)
            return sl_set_error(SL_ERR_STATE, "sl_dist_join: parameter '%s' belongs to no layer of "
                                "the graph (shard 2)", net->params[i].name);
        if (d->node_goff[n] == SIZE_MAX)
            d->node_goff[n] = off;
        else if (n != node)
            return sl_set_error(SL_ERR_UNSUPPORTED, "sl_dist_join: the parameters of one layer are "
                                "not neighbours in the gradient block ('%s'); shard 2 needs them "
                                "so", net->params[i].name);
        node = n;
        off += sl_stride_floats(p->count);
    }
    d->red_n = 0;
    /* The slice's gradient block replaces the whole one. */
    sl_net_drop_gradients(net);
    net->dp.shard = 2;
    sl_status st = sl_net_restore_gradients(net);
    if (st != SL_OK) {
        net->dp.shard = 1;
        sl_net_restore_gradients(net);
        return sl_set_error(st, "sl_dist_join: out of memory for this rank's slice of the "
                            "reduced gradients");
    }
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    return SL_OK;
}

void sl_shard2_leave(sl_dist *d)
{
    sl_net *net = d->net;
    free(d->node_goff);
    free(d->red_req);
    free(d->red_root);
    free(d->red_first);
    free(d->red_count);
    d->node_goff = NULL;
    d->red_req = NULL;
    if (!net || net->dp.shard != 2)
        return;
    /* The state stays this rank's slice (ZeRO-1's leaving); training alone
     * needs the whole gradient block again (the run allocates it when
     * this fails). */
    sl_net_drop_gradients(net);
    net->dp.shard = 1;
    sl_net_restore_gradients(net);
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
}

void sl_shard2_progress(sl_dist *d)
{
    for (int k = 0; k < d->red_n && !d->broken; k++) {
        int flag = 0;
        if (MPI_Test(&d->red_req[k], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            sl_dist_break(d, "MPI_Test of a gradient reduction failed on rank %d", d->rank);
    }
}

/* Waits for the reduction in flight, then this rank's pieces are means
 * (sl_dist_sum_to_mean, as the all-reduce's buckets). */
static void finish_reduction(sl_dist *d, float *grads)
{
    sl_net *net = d->net;
    double deadline = MPI_Wtime() + d->opts.timeout_seconds;
    for (int k = 0; k < d->red_n; k++) {
        if (d->broken)
            break;
        if (sl_dist_wait_until(d, &d->red_req[k], deadline, "reducing the gradients (shard 2)") != SL_OK)
            break;
        if (d->red_root[k] != d->rank)
            continue;
        float *p = grads + d->red_first[k];
        sl_dist_sum_to_mean(d, p, d->red_count[k]);
        if (!net->optim.update_in_backward) /* kept for the update after backward */
            memcpy(net->grad_block + (d->node_goff[d->red_node] + d->red_first[k] - net->dp.shard_lo), p,
                   d->red_count[k] * sizeof(float));
    }
    d->red_n = 0;
}

void sl_shard2_reduce(void *user, int node, float *grads, int prev_node, float *prev_grads)
{
    sl_dist *d = user;
    sl_net *net = d->net;
    /* prev_node's reduction (started by the REDUCE step before, and
     * progressing since) first, then node's: every rank issues the same
     * collectives in the same order. */
    if (prev_node >= 0 && prev_grads)
        finish_reduction(d, prev_grads);
    d->red_n = 0;
    d->red_node = node;
    if (node < 0 || d->broken)
        return;
    size_t g0 = d->node_goff[node];
    size_t n = sl_node_param_grad_bytes(&net->graph, node) / sizeof(float);
    for (int r = 0; r < d->size; r++) {
        size_t a = g0 > d->bounds[r] ? g0 : d->bounds[r];
        size_t b = g0 + n < d->bounds[r + 1] ? g0 + n : d->bounds[r + 1];
        if (a >= b)
            continue;
        if (b - a > (size_t)0x7fffffff) {
            sl_dist_break(d, "a layer's gradients of %zu floats are more than MPI counts allow", b - a);
            return;
        }
        float *piece = grads + (a - g0);
        int k = d->red_n;
        if (MPI_Ireduce(r == d->rank ? MPI_IN_PLACE : piece, piece, (int)(b - a), MPI_FLOAT, MPI_SUM,
                        r, d->comm, &d->red_req[k]) != MPI_SUCCESS) {
            sl_dist_break(d, "MPI_Ireduce of a layer's gradients failed on rank %d", d->rank);
            return;
        }
        d->red_root[k] = r;
        d->red_first[k] = a - g0;
        d->red_count[k] = b - a;
        d->red_n++;
        d->counters.buckets++;
        d->counters.bytes_reduced += (b - a) * sizeof(float);
    }
}
