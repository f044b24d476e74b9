/*
 * join.c — the joins composites use to stay chains at the top level
 * (layers stage): Add (residual sum of two tensors of one shape) and
 * Concat (channel concatenation, inception). No parameters; their backward
 * reads only dy.
 */
#include "layers/layer.h"

static sl_status add_infer(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                           sl_shape *out, sl_layer_cost *cost)
{
    (void)be;
    char a[SL_SHAPE_STR], b[SL_SHAPE_STR];
    if (n_in != 2 || !sl_shape_equal(in[0], in[1]))
        return sl_set_error(SL_ERR_SHAPE, "residual add '%s': branch shapes differ (%s vs %s)",
                            sl_layer_label(l), sl_shape_str(in[0], a), sl_shape_str(in[1], b));
    *out = in[0];
    cost->fwd_flops = sl_shape_count_sat(in[0]);
    cost->bwd_flops = 0;
    return SL_OK;
}

static void add_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    (void)l;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->add(&e, sl_shape_count(a->out), a->x[0], a->x[1], a->y);
}

static void add_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    (void)l;
    sl_exec e = sl_exec_for(ex, a->bf16);
    size_t count = sl_shape_count(a->out);
    for (int i = 0; i < 2; i++)
        if (a->dx[i] && (a->dx[i] != a->dy || a->accumulate[i]))
            ex->be->copy(&e, count, a->dy, a->dx[i], a->accumulate[i]);
}

static int add_native_bf16(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                           sl_shape out, sl_layer_cost *cost)
{
    (void)l, (void)n_in, (void)in, (void)out, (void)cost;
    return sl_native_bf16_if(be, SL_BF16_ADD);
}

static const sl_layer_ops add_ops = {
    .type = "Add",
    .flags = SL_LAYER_FWD_INPLACE | SL_LAYER_BWD_INPLACE | SL_LAYER_ROW_CHUNKS | SL_LAYER_GRAPH_SAFE,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .native_bf16 = add_native_bf16,
    .out_channels = sl_same_channels,
};

sl_layer *sl_join_sum(void)
{
    sl_layer *l = sl_alloc(sizeof *l, "a residual add");
    if (l)
        sl_layer_init(l, &add_ops);
    return l;
}

static sl_status concat_infer(const sl_layer *l, const sl_backend *be, int n_in,
                              const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    (void)be;
    *out = in[0];
    for (int i = 1; i < n_in; i++) {
        if (in[i].n != in[0].n || in[i].h != in[0].h || in[i].w != in[0].w)
            return sl_set_error(SL_ERR_SHAPE,
                           "concat '%s': branch %d is %dx%dx%d, branch 0 is %dx%dx%d (batch and "
                           "spatial sizes must match)",
                           sl_layer_label(l), i, in[i].n, in[i].h, in[i].w, in[0].n, in[0].h,
                           in[0].w);
        out->c += in[i].c;
    }
    cost->fwd_flops = sl_shape_count_sat(*out);
    cost->bwd_flops = sl_shape_count_sat(*out);
    return SL_OK;
}

static void concat_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    (void)l;
    int off = 0, hw = a->out.h * a->out.w;
    for (int i = 0; i < a->n_in; i++) {
        ex->be->copy_channels(ex, a->out.n, hw, a->in[i].c, a->x[i], a->in[i].c, 0, a->y, a->out.c,
                              off, 0);
        off += a->in[i].c;
    }
}

static void concat_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    (void)l;
    int off = 0, hw = a->out.h * a->out.w;
    for (int i = 0; i < a->n_in; i++) {
        if (a->dx[i])
            ex->be->copy_channels(ex, a->out.n, hw, a->in[i].c, a->dy, a->out.c, off, a->dx[i],
                                  a->in[i].c, 0, a->accumulate[i]);
        off += a->in[i].c;
    }
}

static const sl_layer_ops concat_ops = {
    .type = "Concat",
    .flags = SL_LAYER_PLANAR_INPUT | SL_LAYER_GRAPH_SAFE,
    .infer = concat_infer,
    .forward = concat_forward,
    .backward = concat_backward,
    .out_channels = sl_same_channels,
};

sl_layer *sl_concat_join(void)
{
    sl_layer *l = sl_alloc(sizeof *l, "a concatenation");
    if (l)
        sl_layer_init(l, &concat_ops);
    return l;
}
