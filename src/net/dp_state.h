/*
 * dp_state.h — a network's data-parallel state (internal, net stage): the
 * communicator a network that joined one (src/dist) runs with, as a small
 * table of what the network calls, and the slice of the gradient block
 * this rank owns under ZeRO. The network holds one (net->dp) and calls
 * through it without knowing MPI or NCCL; src/dist fills it.
 */
#ifndef SL_DP_STATE_H
#define SL_DP_STATE_H

#include <stddef.h>

#include "sublinear.h"

struct sl_run_cache;

/* How a network that joined a communicator (src/dist) takes part in its
 * training runs. The network calls these without knowing what is behind
 * them; NULL members are skipped. */
typedef struct sl_net_comm {
    void *user;
    /* Before a training run's kernels: `local` is this rank's status so far
     * (its own checks, planning, the arena) and c the plan about to run
     * (NULL when local is an error). Returns SL_OK when every rank may run
     * this step, else an error (on the rank that failed, its own status
     * and message). */
    sl_status (*agree)(void *user, sl_status local, const struct sl_run_cache *c,
                       const char *fn);
    /* sl_run_io.after_step of the training run. */
    void (*after_step)(void *user, int step);
    /* After the run's kernels were queued: completes the communication
     * (averaged gradients, identical running statistics on every rank). */
    sl_status (*finish)(void *user);
    /* sl_net_free of the network: the communicator forgets it. */
    void (*detach)(void *user);
    /* After sl_net_update of a network with sharded optimizer state
     * (net->shard) updated this rank's slice: gives every rank every
     * updated parameter. An error leaves the communicator broken. */
    sl_status (*after_update)(void *user);
    /* sl_run_io.reduce of the training run (ZeRO-2, net->shard 2). */
    void (*reduce)(void *user, int node, float *grads, int prev_node, float *prev_grads);
    /* sl_save_model (snapshot 0, in dtype) and sl_save_snapshot (1) of a
     * network in a communicator: rank 0 writes (a snapshot of sharded
     * state gathered first), every rank takes part and returns rank 0's
     * status. Collective; fn names the public call. */
    sl_status (*save)(void *user, const char *path, int snapshot, sl_file_dtype dtype,
                      const char *fn);
    uint64_t bytes; /* held for communication (the memory report) */
} sl_net_comm;

typedef struct sl_net_dp {
    const sl_net_comm *comm; /* set while the network is in a communicator */
    /* ZeRO-1 (src/dist): 1 while the optimizer state covers only the
     * gradient-block floats [shard_lo, shard_hi) (opt_block then holds,
     * for each state block k, shard_hi - shard_lo floats at k times that:
     * state of gradient float g at opt_block[k * len + g - shard_lo]).
     * The update updates that slice only, then comm->after_update.
     * ZeRO-2: 2 while in the communicator: gradients are arena values
     * reduced node by node (REDUCE steps) to the rank owning each float;
     * grad_block then holds the reduced gradients of the slice only
     * (gradient float g at grad_block[g - shard_lo]), none with the
     * update in backward. */
    int shard;
    size_t shard_lo, shard_hi;
    int plan_ranks; /* sl_net_set_plan_ranks: > 1 while planning as a rank of that
                       many (shard and the slice set as its largest rank's) */
} sl_net_dp;

#endif
