/*
 * nccl_none.c — the NCCL transport of a build with MPI but without NCCL
 * (or without CUDA; dist stage): a network on a CUDA context cannot join.
 */
#include "dist/dist.h"

sl_status sl_nccl_create(sl_dist *d, struct sl_nccl **out)
{
    (void)d;
    *out = NULL;
    return sl_set_error(SL_ERR_UNSUPPORTED, "sl_dist_join: this build of sublinear has no NCCL (CUDA "
                        "networks need it; it was not found in the CUDA toolkit when configured)");
}

void sl_nccl_destroy(struct sl_nccl *n, int abort)
{
    (void)n;
    (void)abort;
}

static sl_status none(void) { return sl_set_error(SL_ERR_UNSUPPORTED, "no NCCL in this build"); }

sl_status sl_nccl_broadcast(sl_dist *d, float *data, size_t count, double deadline)
{
    (void)d;
    (void)data;
    (void)count;
    (void)deadline;
    return none();
}

sl_status sl_nccl_reduce_start(sl_dist *d, float *data, size_t count)
{
    (void)d;
    (void)data;
    (void)count;
    return none();
}

sl_status sl_nccl_finish(sl_dist *d, double deadline)
{
    (void)d;
    (void)deadline;
    return none();
}

sl_status sl_nccl_gather_params(sl_dist *d, double deadline)
{
    (void)d;
    (void)deadline;
    return none();
}
