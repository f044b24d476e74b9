/*
 * dist_step.c — what a joined network's training run does with the other
 * ranks (dist stage: data-parallel training), through the hooks of
 * net.h's sl_net_comm:
 *
 *   agree       before any kernel: plan this run's buckets, then one small
 *               allreduce of "did any rank fail so far" — a rank that
 *               failed its checks makes every rank return an error
 *   after_step  after each program step: start the buckets backward has
 *               just finished (non-blocking MPI allreduce, or NCCL on its
 *               own stream) and progress the ones in flight (MPI makes
 *               progress only inside MPI calls)
 *   finish      after the program: wait for what is left (the exposed
 *               communication time), turn sums into means, and broadcast
 *               rank 0's running statistics
 */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

static sl_status prepare_buckets(sl_dist *d, const sl_run_cache *c)
{
    if (d->opts.shard == 2) { /* ZeRO-2: the program's REDUCE steps, no buckets */
        d->plan.n = 0;
        d->launched = d->completed = 0;
        d->red_n = 0;
        return SL_OK;
    }
    sl_status st = sl_buckets_build(d->net, c, d->opts.bucket_bytes, &d->plan);
    if (st != SL_OK)
        return st;
    if (d->plan.n > d->cap_req) {
        MPI_Request *req = sl_realloc(d->req, (size_t)d->plan.n * sizeof *req);
        if (req)
            d->req = req;
        int *done = sl_realloc(d->done, (size_t)d->plan.n * sizeof *done);
        if (done)
            d->done = done;
        if (!req || !done)
            return sl_set_error(SL_ERR_NOMEM, "out of memory for gradient buckets");
        d->cap_req = d->plan.n;
    }
    for (int i = 0; i < d->plan.n; i++) {
        d->req[i] = MPI_REQUEST_NULL;
        d->done[i] = 0;
    }
    d->launched = d->completed = 0;
    return SL_OK;
}

static sl_status agree(void *user, sl_status local, const sl_run_cache *c, const char *fn)
{
    sl_dist *d = user;
    if (d->broken)
        return local != SL_OK ? local
                              : sl_set_error(SL_ERR_STATE, "%s: the communicator failed earlier (%s); "
                                             "end the job", fn, d->broken_why);
    if (local == SL_OK && !d->net)
        local = sl_set_error(SL_ERR_STATE, "%s: the network left its communicator", fn);
    if (local == SL_OK)
        local = prepare_buckets(d, c);
    int v[2] = {local != SL_OK ? d->rank + 1 : 0, local != SL_OK ? (int)local : 0};
    double t0 = MPI_Wtime();
    MPI_Request r;
    sl_status st = SL_OK;
    if (MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, d->comm, &r) != MPI_SUCCESS)
        st = sl_dist_break(d, "%s: MPI_Iallreduce failed", fn);
    if (st == SL_OK)
        st = sl_dist_wait(d, &r, fn);
    d->counters.agree_seconds += MPI_Wtime() - t0;
    if (st != SL_OK || local != SL_OK)
        return st != SL_OK ? st : local;
    if (v[0])
        return sl_set_error(SL_ERR_STATE, "%s: rank %d of %d failed this step (%s) before running it, "
                       "so no rank ran it", fn, v[0] - 1, d->size, sl_status_name((sl_status)v[1]));
    return SL_OK;
}

static float *bucket_data(const sl_dist *d, int i) { return d->net->grad_block + d->plan.b[i].first; }

static void launch(sl_dist *d, int i)
{
    const sl_bucket *b = &d->plan.b[i];
    d->counters.buckets++;
    d->counters.bytes_reduced += b->count * sizeof(float);
    if (d->nccl) {
        if (sl_nccl_reduce_start(d, bucket_data(d, i), b->count) != SL_OK)
            d->broken = 1;
        return;
    }
    if (b->count > (size_t)0x7fffffff) {
        sl_dist_break(d, "a gradient bucket of %zu floats is larger than MPI counts allow", b->count);
        return;
    }
    if (MPI_Iallreduce(MPI_IN_PLACE, bucket_data(d, i), (int)b->count, MPI_FLOAT, MPI_SUM,
                       d->comm, &d->req[i]) != MPI_SUCCESS)
        sl_dist_break(d, "MPI_Iallreduce of a gradient bucket failed on rank %d", d->rank);
}

static void complete(sl_dist *d, int i)
{
    sl_dist_sum_to_mean(d, bucket_data(d, i), d->plan.b[i].count);
    d->done[i] = 1;
}

/* One MPI_Test per bucket in flight: moves them on, finishes what ended. */
static void progress(sl_dist *d)
{
    for (int i = d->completed; i < d->launched; i++) {
        if (d->done[i])
            continue;
        int flag = 0;
        if (MPI_Test(&d->req[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            sl_dist_break(d, "MPI_Test of a gradient bucket failed on rank %d", d->rank);
            return;
        }
        if (flag) {
            complete(d, i);
            d->counters.buckets_hidden++;
        }
    }
    while (d->completed < d->launched && d->done[d->completed])
        d->completed++;
}

static void after_step(void *user, int step)
{
    sl_dist *d = user;
    if (d->broken || !d->opts.overlap)
        return;
    while (!d->broken && d->launched < d->plan.n && d->plan.b[d->launched].launch_step <= step)
        launch(d, d->launched++);
    if (!d->nccl && !d->broken && d->completed < d->launched)
        progress(d);
    if (d->red_n && !d->broken)
        sl_shard2_progress(d);
}

sl_status sl_dist_broadcast_stats(sl_dist *d)
{
    if (d->n_stats == 0)
        return SL_OK;
    float *buf = d->stats_staging;
    if (d->rank == 0)
        for (int i = 0, o = 0; i < d->n_stats; o += (int)d->stats[i].count, i++)
            memcpy(buf + o, d->stats[i].data, d->stats[i].count * sizeof(float));
    MPI_Request r;
    if (MPI_Ibcast(buf, (int)d->stats_floats, MPI_FLOAT, 0, d->comm, &r) != MPI_SUCCESS)
        return sl_dist_break(d, "MPI_Ibcast of the running statistics failed");
    sl_status st = sl_dist_wait(d, &r, "broadcasting the running statistics");
    if (st == SL_OK && d->rank != 0)
        for (int i = 0, o = 0; i < d->n_stats; o += (int)d->stats[i].count, i++)
            memcpy(d->stats[i].data, buf + o, d->stats[i].count * sizeof(float));
    return st;
}

static sl_status finish(void *user)
{
    sl_dist *d = user;
    double t0 = MPI_Wtime(), deadline = t0 + d->opts.timeout_seconds;
    while (!d->broken && d->launched < d->plan.n)
        launch(d, d->launched++);
    sl_status st = SL_OK;
    if (d->broken)
        st = sl_set_error(SL_ERR_BACKEND, "gradient communication failed: %s", d->broken_why);
    else if (d->nccl)
        st = sl_nccl_finish(d, deadline);
    for (int i = 0; st == SL_OK && !d->nccl && i < d->launched; i++)
        if (!d->done[i]) {
            st = sl_dist_wait_until(d, &d->req[i], deadline, "reducing the gradients");
            if (st == SL_OK)
                complete(d, i);
        }
    if (st == SL_OK && !d->nccl)
        st = sl_dist_broadcast_stats(d);
    d->counters.wait_seconds += MPI_Wtime() - t0;
    d->counters.steps++;
    return st;
}

static void detach(void *user)
{
    sl_dist *d = user;
    d->net = NULL;
}

void sl_dist_install_hooks(sl_dist *d)
{
    d->hooks.user = d;
    d->hooks.agree = agree;
    d->hooks.after_step = after_step;
    d->hooks.finish = finish;
    d->hooks.detach = detach;
}
