/*
 * gelu.c — GPT-2's tanh GELU (layers stage), torch's
 * F.gelu(approximate='tanh'). Its backward is the exact derivative at the
 * forward's input, so it reads the input and never runs in place.
 */
#include "layers/layer.h"

/* tanh, a cube and a handful of multiplies and adds per element */
#define GELU_FWD_FLOPS 12
#define GELU_BWD_FLOPS 18

static sl_status gelu_infer(const sl_layer *l, const sl_backend *be, int n_in,
                            const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    sl_status st = sl_elementwise_infer(l, be, n_in, in, out, cost);
    cost->fwd_flops = sl_mul_sat(cost->fwd_flops, GELU_FWD_FLOPS);
    cost->bwd_flops = sl_mul_sat(cost->bwd_flops, GELU_BWD_FLOPS);
    return st;
}

static void gelu_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    (void)l;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->gelu_forward(&e, sl_shape_count(a->out), a->x[0], a->y);
}

static void gelu_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    (void)l;
    sl_exec e = sl_exec_for(ex, a->bf16);
    if (a->dx[0])
        ex->be->gelu_backward(&e, sl_shape_count(a->out), a->x[0], a->dy, a->dx[0],
                              a->accumulate[0]);
}

/* bf16 in the backend's own kernels (SL_BF16_GELU): the copies' bits. */
static int gelu_native_bf16(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                            sl_shape out, sl_layer_cost *cost)
{
    (void)l, (void)n_in, (void)in, (void)out, (void)cost;
    return sl_native_bf16_if(be, SL_BF16_GELU);
}

static const sl_layer_ops gelu_ops = {
    .type = "GELU",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_BWD_INPLACE | SL_LAYER_ROW_CHUNKS | SL_LAYER_GRAPH_SAFE,
    .infer = gelu_infer,
    .forward = gelu_forward,
    .backward = gelu_backward,
    .native_bf16 = gelu_native_bf16,
    .out_channels = sl_same_channels,
};

sl_layer *sl_gelu(void)
{
    sl_layer *l = sl_alloc(sizeof *l, "a GELU layer");
    if (l)
        sl_layer_init(l, &gelu_ops);
    return l;
}
