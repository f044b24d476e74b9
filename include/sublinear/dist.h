/*
 * sublinear/dist.h — data-parallel training over MPI ranks (CPU) and
 * NCCL (CUDA, bootstrapped over MPI): gradients reduced in buckets while
 * backward runs.
 *
 *     sl_dist *dist;
 *     sl_dist_join(net, NULL, &dist);        (every rank, after building net)
 *     ... train as usual ...
 *     sl_dist_free(dist);
 */
#ifndef SUBLINEAR_DIST_H
#define SUBLINEAR_DIST_H

#include "sublinear/core.h"
#include "sublinear/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Data-parallel training: MPI (CPU ranks), NCCL (CUDA ranks)           */
/* ------------------------------------------------------------------ */

/* Ranks started by the MPI launcher (`mpirun -np N prog`) each build the
 * same network, join a communicator, and then run the usual training loop
 * (sl_net_train_step, or sl_net_compute_gradients + sl_net_update) on
 * their own batches. Every training run of a joined network:
 *  - first agrees with the other ranks that every rank can run this step
 *    (its input, labels, plan and arena are fine): when one rank's call
 *    fails before its kernels (a bad batch shape, a bad label, out of
 *    memory), every rank's call returns an error (SL_ERR_STATE on the
 *    others, naming the rank) and no rank has changed anything; the ranks
 *    stay usable for the next step;
 *  - reduces the parameter gradients while backward runs, in buckets that
 *    end where the schedule's segments end (so a re-forward never waits
 *    on communication) and at most bucket_bytes long inside a segment:
 *    a bucket starts (non-blocking MPI allreduce, progressed between
 *    program steps; on CUDA ncclAllReduce on a second stream after an
 *    event) as soon as backward has finished its gradients. The gradients
 *    are reduced in place (they are the bucket buffers): afterwards every
 *    rank's gradients hold the mean over the ranks, so with the same
 *    optimizer every rank takes the same update and parameters stay
 *    identical. With equal batches of B per rank this is the gradient of
 *    the mean loss over all N * B samples;
 *  - BatchNorm: each rank normalises with its own batch statistics (as
 *    PyTorch's DistributedDataParallel does); after the step rank 0's
 *    running statistics are broadcast to every rank (DDP's
 *    broadcast_buffers rule), so they stay identical. Frozen BatchNorm
 *    never changes them. The packed copy of the running statistics this
 *    broadcast uses is the report's `communication` line.
 * Prediction (sl_net_predict) and the update (sl_net_update) are local to
 * each rank (the update is collective with shard 1, below): every rank
 * must update after every training run, as the usual loop does, or
 * parameters drift apart.
 *
 * Timeout: a rank that waits longer than timeout_seconds for the others
 * in any collective (a rank that crashed, hangs, or stopped calling)
 * returns SL_ERR_BACKEND; on CUDA the NCCL communicator is aborted. (Not
 * covered: creating the NCCL communicator inside sl_dist_join, which
 * blocks until every rank has come.) The
 * communicator is then unusable (operations already started cannot be
 * cancelled): every later training run fails with SL_ERR_STATE; end the
 * job. */
typedef struct sl_dist sl_dist;

typedef struct sl_dist_options {
    /* The address of the MPI_Comm to join (the library works on a
     * duplicate of it); NULL for MPI_COMM_WORLD. */
    const void *mpi_comm;
    /* Seconds a rank waits for the others in one collective before it
     * fails (default 600, PyTorch's default for NCCL). */
    double timeout_seconds;
    /* Largest gradient bucket inside one segment, in bytes (default 4 MiB;
     * a bucket never spans a segment boundary). */
    size_t bucket_bytes;
    /* 1 (default): buckets start as backward produces them. 0: one
     * blocking reduction of every bucket after backward (for measuring
     * what the overlap hides). */
    int overlap;
    /* ZeRO stage: 0 (default) every rank holds the whole optimizer state
     * and updates every parameter. 1 (ZeRO-1): the trainable parameters'
     * floats (in the order of the gradient block) are split into one
     * contiguous, balanced range per rank (boundaries on 16 floats; a
     * parameter may be split between ranks), and each rank holds the
     * optimizer state (momentum, Adam's moments) of its range only: about
     * 1/N of it (sl_net_memory_report's `optimizer` is this rank's
     * bytes). Gradients are still averaged on every rank as with 0; then
     * sl_net_update (or sl_net_train_step) updates this rank's range, with
     * the gradient scale and clipping norm of the whole averaged gradient,
     * and gathers every rank's updated floats, so parameters stay
     * identical on all ranks and equal, bit for bit, to those of shard 0.
     * With 1 the update is collective: every rank must call it. The join
     * slices the optimizer state rank 0 holds (a snapshot loaded before
     * joining); sl_save_snapshot, called by every rank, gathers it on rank
     * 0 and writes the file an unsharded run writes, so snapshots resume
     * on any rank count and either stage. While joined, sl_load_snapshot
     * fails (SL_ERR_STATE); after sl_dist_free the network
     * holds only its slice: sl_net_update fails until the optimizer is set
     * again or a snapshot is loaded. 2 (gradients sharded too) is not
     * implemented yet: SL_ERR_UNSUPPORTED; other values SL_ERR_INVALID_ARG. */
    int shard;
} sl_dist_options;

/* Defaults: MPI_COMM_WORLD, 600 s, 4 MiB buckets, overlap on, shard 0. */
SL_API sl_dist_options sl_dist_defaults(void);

/* Joins net to a communicator; opts may be NULL for the defaults. A
 * collective call: every rank of the communicator calls it with a network
 * of the same architecture (checked: SL_ERR_INVALID_ARG on every rank
 * otherwise). Initialises MPI when the program has not (MPI_Init_thread,
 * MPI_THREAD_FUNNELED; it is then finalised at exit); a program that
 * initialises MPI itself finalises it after sl_dist_free. Broadcasts rank
 * 0's parameters and running statistics, and its optimizer state and
 * step count when every rank has the same optimizer, so every rank starts
 * from the same network (resume from a snapshot on any rank count by
 * loading it on every rank, or on rank 0 only, before joining). A
 * network on a CUDA context uses NCCL, bootstrapped over MPI, one GPU per
 * rank (give each rank its own GPU, e.g. CUDA_VISIBLE_DEVICES).
 * On success *out owns the membership; net must stay alive while it is
 * joined. SL_ERR_UNSUPPORTED when this build has no MPI (or, on CUDA, no
 * NCCL); SL_ERR_STATE when net is already joined. */
SL_API sl_status sl_dist_join(sl_net *net, const sl_dist_options *opts, sl_dist **out);

/* Leaves the communicator (not collective): the network trains alone
 * again. Accepts NULL. */
SL_API void sl_dist_free(sl_dist *dist);

/* This rank and the number of ranks (0 and 1 for NULL). */
SL_API int sl_dist_rank(const sl_dist *dist);
SL_API int sl_dist_size(const sl_dist *dist);

/* Sums n doubles over the ranks in place (every rank gets the sums); for
 * global figures such as images/s or accuracy. Collective. */
SL_API sl_status sl_dist_sum(sl_dist *dist, double *values, int n);

/* Files: sl_save_model, sl_save_model_with and sl_save_snapshot of a joined
 * network are collective (every rank calls them): rank 0 writes the file
 * (atomically, as always), the same file single-process training writes,
 * and every rank returns rank 0's status. With shard 1 or 2 the snapshot
 * first gathers every rank's slice of the optimizer state on rank 0
 * (which then briefly holds the whole state twice, once in host memory).
 * (They replace sl_dist_save_model and sl_dist_save_snapshot.) */

/* Where a rank's time went in communication, since the join. */
typedef struct sl_dist_stats {
    int64_t steps;           /* training runs that communicated */
    int64_t buckets;         /* bucket reductions started */
    int64_t buckets_hidden;  /* of those, finished while backward still ran
                                (CPU: seen by MPI_Test between steps) */
    uint64_t bytes_reduced;  /* gradient bytes reduced (per rank) */
    double wait_seconds;     /* time the rank waited after backward for
                                reductions to finish: the exposed part */
    double agree_seconds;    /* time in the per-step agreement */
} sl_dist_stats;

SL_API sl_status sl_dist_get_stats(const sl_dist *dist, sl_dist_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_DIST_H */
