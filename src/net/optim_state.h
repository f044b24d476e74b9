/*
 * optim_state.h — a network's optimizer and the state of its steps
 * (internal, net stage): the options set by sl_net_set_optimizer, the step
 * count, gradient accumulation, clipping and the gradient norm's partial
 * sums, the update in backward. The network holds one (net->optim);
 * optimizer.c updates it, files (src/io) save and restore it. The
 * optimizer's own state (momentum, moments) lies in the network's
 * opt_block beside its parameters and gradients.
 */
#ifndef SL_OPTIM_STATE_H
#define SL_OPTIM_STATE_H

#include <stdint.h>

#include "sublinear.h"

typedef struct sl_net_optim {
    int has_optimizer;
    sl_optimizer_options opt;
    int64_t steps;
    int has_grads;
    float grad_clip;        /* max norm; 0: off */
    float last_grad_norm;   /* measured by the last update; < 0: none yet */
    int accum;              /* micro-batches per update (>= 1) */
    int update_in_backward; /* gradients are arena values, updated in backward */
    int micro;              /* micro-batches accumulated since the last update */
    double *norm_slots;     /* backend memory, SL_SUM_SQUARES_SLOTS doubles */
    /* The slots on the host (SL_SUM_SQUARES_SLOTS doubles, allocated with
     * norm_slots): read back at once when clipping needs the norm before
     * the update, else with the update's sync (download_later). */
    double *norm_host;
} sl_net_optim;

#endif
