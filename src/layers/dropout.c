/*
 * dropout.c — Dropout (layers stage). A TRAIN forward takes a fresh
 * Philox counter range from the context and remembers the counter in the
 * layer (host memory, 8 bytes, whatever the device); a REFORWARD and the
 * backward redraw the identical mask from it, so no mask is ever stored
 * and recomputation is exact. A layer runs one TRAIN forward per step, so
 * one counter per layer suffices.
 */
#include "layers/layer.h"

typedef struct dropout {
    sl_layer base;
    float p;
    sl_draw draw; /* of the last TRAIN forward */
} dropout;

static void dropout_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    dropout *d = (dropout *)l;
    size_t count = sl_shape_count(a->out);
    if (a->pass == SL_PASS_EVAL || d->p == 0.0f) {
        if (a->y != a->x[0])
            ex->be->copy(ex, count, a->x[0], a->y, 0);
        return;
    }
    if (a->pass == SL_PASS_TRAIN)
        sl_draw_take(&d->draw, a->ctx, (count + 3) / 4); /* one Philox block per 4 elements */
    ex->be->dropout_forward(ex, count, a->x[0], a->y, d->p, a->ctx->seed, d->draw.counter);
}

static void dropout_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    dropout *d = (dropout *)l;
    if (!a->dx[0])
        return;
    size_t count = sl_shape_count(a->out);
    if (d->p == 0.0f) {
        ex->be->copy(ex, count, a->dy, a->dx[0], a->accumulate[0]);
        return;
    }
    ex->be->dropout_backward(ex, count, a->dy, a->dx[0], d->p, a->ctx->seed, d->draw.counter,
                             a->accumulate[0]);
}

/* The TRAIN forward's draw again, nothing queued (its kernel replayed
 * from a recording with the run's counter offset). */
static void dropout_redraw(sl_layer *l, sl_context *ctx)
{
    dropout *d = (dropout *)l;
    sl_draw_take(&d->draw, ctx, d->draw.blocks);
}

/* p > 0 draws each TRAIN forward; p == 0 is a copy (or nothing in place). */
static const sl_layer_ops dropout_ops = {
    .type = "Dropout",
    .flags = SL_LAYER_FWD_INPLACE | SL_LAYER_BWD_INPLACE | SL_LAYER_GRAPH_DRAWS,
    .infer = sl_elementwise_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .out_channels = sl_same_channels,
    .redraw = dropout_redraw,
};

static const sl_layer_ops identity_ops = {
    .type = "Dropout",
    .flags = SL_LAYER_FWD_INPLACE | SL_LAYER_BWD_INPLACE | SL_LAYER_GRAPH_SAFE,
    .infer = sl_elementwise_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .out_channels = sl_same_channels,
};

uint64_t sl_dropout_counter(const sl_layer *l)
{
    return l->ops == &dropout_ops ? ((const dropout *)l)->draw.counter : 0;
}

sl_layer *sl_dropout(float p)
{
    if (!(p >= 0.0f && p < 1.0f)) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_dropout: probability %g must be in [0, 1)", p);
        return NULL;
    }
    dropout *d = sl_alloc(sizeof *d, "a Dropout layer");
    if (!d)
        return NULL;
    sl_layer_init(&d->base, p > 0.0f ? &dropout_ops : &identity_ops);
    d->p = p;
    d->draw = (sl_draw){0, 0};
    return &d->base;
}
