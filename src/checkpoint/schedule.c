/*
 * schedule.c — which segments of the top-level chain are re-forwarded
 * (schedule stage). SL_CKPT_NONE keeps everything; SQRT splits the chain
 * into ceil(sqrt(N)) segments of near-equal layer count (memonger's rule);
 * every segment but the last is recomputed (the last is needed right after
 * the loss, so recomputing it would only cost time).
 */
#include <math.h>
#include <stdlib.h>

#include "core/net.h"

static sl_status equal_segments(int n_top, int k, sl_segments *out)
{
    if (k > n_top)
        k = n_top;
    if (k < 1)
        k = 1;
    out->n = k;
    out->start = malloc(((size_t)k + 1) * sizeof(int));
    out->recompute = calloc((size_t)k, sizeof(int));
    if (!out->start || !out->recompute) {
        sl_segments_release(out);
        return sl_fail(SL_ERR_NOMEM, "out of memory building a schedule");
    }
    for (int j = 0; j <= k; j++)
        out->start[j] = (int)(((long)n_top * j) / k);
    for (int j = 0; j + 1 < k; j++)
        out->recompute[j] = 1;
    return SL_OK;
}

sl_status sl_schedule_segments(const sl_net *net, const sl_shapes *sh, sl_schedule schedule,
                               sl_segments *out)
{
    (void)sh;
    int n = net->n_top;
    switch (schedule.kind) {
    case SL_SCHEDULE_NONE:
        return sl_segments_keep_all(n, out);
    case SL_SCHEDULE_SQRT:
        return equal_segments(n, (int)ceil(sqrt((double)n)), out);
    case SL_SCHEDULE_SEGMENTS:
        return equal_segments(n, schedule.segments, out);
    case SL_SCHEDULE_BUDGET:
        break;
    }
    return sl_fail(SL_ERR_UNSUPPORTED, "budget schedules are not implemented yet");
}
