/*
 * dist.h — data-parallel training (dist stage, above io and the net stage:
 * it uses io/, net/ and below; nothing below includes it). A network's
 * membership of a communicator (sl_dist), the gradient buckets of a
 * planned training program, and the transports that reduce them:
 * non-blocking MPI on the CPU, NCCL on a second CUDA stream. The network
 * reaches all of it only through the hooks of net.h's sl_net_comm.
 */
#ifndef SL_DIST_H
#define SL_DIST_H

#include <mpi.h>

#include "net/net.h"

/* ---------------- buckets ---------------- */

/* One bucket: a contiguous slice of the gradient block, reduced as one
 * message, started after program step launch_step. */
typedef struct sl_bucket {
    int launch_step;
    size_t first, count; /* floats of the gradient block */
} sl_bucket;

typedef struct sl_bucket_plan {
    int n, cap;
    sl_bucket *b;          /* in launch order */
    int *top_ready_step;   /* scratch: [n_top] */
    size_t *top_first;     /* scratch: [n_top + 1] gradient floats before top t */
    int cap_top;
} sl_bucket_plan;

/* The buckets of the training program of cache c of net: top-level layers
 * join a bucket at the backward step that finishes their gradients; a
 * bucket closes after the first layer of a schedule segment (so the
 * segment before it, re-forwarded next, never waits on communication)
 * or once it holds cap_bytes. Together the buckets cover the whole
 * gradient block once. Reuses out's arrays. */
sl_status sl_buckets_build(const sl_net *net, const sl_run_cache *c, size_t cap_bytes,
                           sl_bucket_plan *out);
void sl_buckets_release(sl_bucket_plan *p);

/* ---------------- membership ---------------- */

struct sl_nccl; /* dist_nccl.c: NCCL communicator, stream, events */

/* A running statistic (BatchNorm's running mean / variance). */
typedef struct sl_dist_stat {
    float *data;
    size_t count;
} sl_dist_stat;

struct sl_dist {
    sl_net *net; /* NULL once the network was freed */
    sl_net_comm hooks;
    sl_dist_options opts;
    MPI_Comm comm; /* our duplicate of the caller's communicator */
    int rank, size;
    int broken;    /* a collective timed out or failed: nothing more runs */
    char broken_why[384];

    sl_bucket_plan plan; /* of the current training run */
    MPI_Request *req;    /* [plan.n] */
    int *done;           /* [plan.n] */
    int cap_req;
    int launched, completed;
    int64_t run_buckets; /* buckets of the runs since the join */

    int n_stats;
    sl_dist_stat *stats;  /* running statistics, broadcast from rank 0 */
    float *stats_staging; /* packed copy (CPU) */
    size_t stats_floats;

    sl_dist_stats counters;
    struct sl_nccl *nccl; /* NULL on the CPU */

    /* ZeRO-1 (opts.shard 1, dist_shard.c) */
    size_t *bounds;          /* [size + 1]: rank r updates gradient floats
                                [bounds[r], bounds[r + 1]) */
    int n_gather;            /* trainable parameters */
    float **gather_data;     /* [n_gather] their values */
    int *gather_count, *gather_displ; /* [n_gather * size]: rank r's floats
                                         of parameter i, from its start */
    MPI_Request *gather_req; /* [n_gather] */

    /* ZeRO-2 (opts.shard 2, dist_shard.c): each node's gradients are
     * reduced to the ranks owning their floats as backward finishes them */
    size_t *node_goff;       /* [n_nodes]: gradient-block float of the node's
                                first trainable parameter (SIZE_MAX: none) */
    MPI_Request *red_req;    /* [size]: the pieces of the reduction in flight */
    int *red_root;           /* [size] */
    size_t *red_first, *red_count; /* [size]: floats of the node's value */
    int red_n;               /* pieces in flight */
    int red_node;            /* their node */
};

/* Marks the membership broken and records why (also as the error). */
sl_status sl_dist_break(sl_dist *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Waits for an MPI request until the deadline (MPI_Wtime seconds);
 * SL_ERR_BACKEND and a broken membership when it passes or MPI fails. */
sl_status sl_dist_wait_until(sl_dist *d, MPI_Request *r, double deadline, const char *what);
/* The same with the membership's timeout from now. */
sl_status sl_dist_wait(sl_dist *d, MPI_Request *r, const char *what);

/* Sum over the ranks -> mean, in host memory: on every rank, and for the
 * buckets and ZeRO-2's reductions alike, the same multiplication by
 * 1 / size (dist_wait.c). */
void sl_dist_sum_to_mean(const sl_dist *d, float *p, size_t n);

/* The per-step hooks (dist_step.c), installed in d->hooks by the join. */
void sl_dist_install_hooks(sl_dist *d);
/* Sends rank 0's running statistics to every rank. */
sl_status sl_dist_broadcast_stats(sl_dist *d);

/* ---------------- ZeRO-1 (dist_shard.c) ---------------- */

/* Splits the gradient block over the ranks, lists every parameter's
 * pieces, and replaces the network's optimizer state by this rank's
 * slice of it (the last step of a join: nothing changes on failure). */
sl_status sl_shard_join(sl_dist *d);
void sl_shard_release(sl_dist *d);
/* sl_net_comm.after_update: every rank's updated floats everywhere. */
sl_status sl_shard_gather_params(void *user);
/* sl_save_snapshot of a sharded network, collective: the state gathered
 * on rank 0, which writes the file (status: rank 0's, on rank 0); fn
 * names the public call. */
sl_status sl_shard_save_snapshot(sl_dist *d, const char *path, int *rank0_status,
                                 const char *fn);

/* ZeRO-2 on top of sl_shard_join: the nodes' gradient offsets, the
 * gradient block replaced by the slice's reduced gradients (none with the
 * update in backward), and the REDUCE hook. */
sl_status sl_shard2_join(sl_dist *d);
/* sl_net_comm.reduce: starts the in-place reduction of node's gradients
 * (grads: its arena value) to the owners of their floats, then waits for
 * prev_node's and turns this rank's pieces of them into means (kept in
 * the slice's gradient block, or in place for the update in backward). */
void sl_shard2_reduce(void *user, int node, float *grads, int prev_node, float *prev_grads);
/* MPI_Test of the reduction in flight (progress between steps). */
void sl_shard2_progress(sl_dist *d);
/* Back to ZeRO-1's layout when the network leaves: the full gradient block. */
void sl_shard2_leave(sl_dist *d);

/* ---------------- NCCL (dist_nccl.c, CUDA builds with NCCL) ---------------- */

/* An NCCL communicator over d's MPI ranks on the device of d's context,
 * with a stream of its own. SL_ERR_UNSUPPORTED in builds without NCCL. */
sl_status sl_nccl_create(sl_dist *d, struct sl_nccl **out);
/* Aborts when the membership is broken (an operation may be pending). */
void sl_nccl_destroy(struct sl_nccl *n, int abort);
/* Broadcasts count floats of device memory from rank 0, in place, and
 * waits (deadline in MPI_Wtime seconds). */
sl_status sl_nccl_broadcast(sl_dist *d, float *data, size_t count, double deadline);
/* Starts the mean over ranks of a device slice, in place, on the NCCL
 * stream after the work queued so far on the compute stream. */
sl_status sl_nccl_reduce_start(sl_dist *d, float *data, size_t count);
/* Broadcasts the running statistics as one group, then waits until
 * every started reduction and the broadcast are done or the deadline
 * passes (then the communicator is aborted). */
sl_status sl_nccl_finish(sl_dist *d, double deadline);
/* ZeRO-1: broadcasts every rank's piece of every parameter from that
 * rank (one group) after the compute stream's work, and waits. */
sl_status sl_nccl_gather_params(sl_dist *d, double deadline);

#endif
