/*
 * dist_none.c — data-parallel training in a build without MPI (dist
 * stage): joining a communicator is a clear error, and the other calls
 * behave as for a single process that never joined.
 */
#include <string.h>

#include "base/base.h"

sl_dist_options sl_dist_defaults(void)
{
    sl_dist_options o = {NULL, 600.0, (size_t)4 << 20, 1, 0};
    return o;
}

static sl_status no_mpi(const char *fn)
{
    return sl_set_error(SL_ERR_UNSUPPORTED, "%s: this build of sublinear has no data-parallel training "
                        "(MPI, Debian's libopenmpi-dev, was not found when it was configured)", fn);
}

sl_status sl_dist_join(sl_net *net, const sl_dist_options *opts, sl_dist **out)
{
    (void)net;
    (void)opts;
    (void)out;
    return no_mpi("sl_dist_join");
}

void sl_dist_free(sl_dist *dist) { (void)dist; }
int sl_dist_rank(const sl_dist *dist) { (void)dist; return 0; }
int sl_dist_size(const sl_dist *dist) { (void)dist; return 1; }

sl_status sl_dist_sum(sl_dist *dist, double *values, int n)
{
    (void)dist;
    (void)values;
    (void)n;
    return no_mpi("sl_dist_sum");
}

sl_status sl_dist_get_stats(const sl_dist *dist, sl_dist_stats *out)
{
    (void)dist;
    if (out)
        memset(out, 0, sizeof *out);
    return no_mpi("sl_dist_get_stats");
}
