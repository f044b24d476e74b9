/*
 * relu.c — ReLU (layers stage). Runs in place when nothing later reads its
 * input (ReLU after BatchNorm: BN's backward reads BN's input, not its
 * output); its backward reads only its own output, and dx may overwrite dy.
 * After a BatchNorm, in place, the executor may run it inside BatchNorm's
 * steps instead (SL_LAYER_JOINS_RELU, sl_program_joins_relu).
 */
#include "layers/layer.h"

static void relu_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    (void)l;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->relu_forward(&e, sl_shape_count(a->out), a->x[0], a->y);
}

static void relu_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    (void)l;
    sl_exec e = sl_exec_for(ex, a->bf16);
    if (a->dx[0])
        ex->be->relu_backward(&e, sl_shape_count(a->out), a->y, a->dy, a->dx[0], a->accumulate[0]);
}

static int relu_native_bf16(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                            sl_shape out, sl_layer_cost *cost)
{
    (void)l, (void)n_in, (void)in, (void)out, (void)cost;
    return sl_native_bf16_if(be, SL_BF16_RELU);
}

const sl_layer_ops sl_relu_ops = {
    .type = "ReLU",
    .flags = SL_LAYER_NEEDS_OUTPUT | SL_LAYER_FWD_INPLACE | SL_LAYER_BWD_INPLACE |
             SL_LAYER_ROW_CHUNKS | SL_LAYER_GRAPH_SAFE,
    .infer = sl_elementwise_infer,
    .forward = relu_forward,
    .backward = relu_backward,
    .native_bf16 = relu_native_bf16,
    .out_channels = sl_same_channels,
};

sl_layer *sl_relu(void)
{
    sl_layer *l = sl_alloc(sizeof *l, "a ReLU layer");
    if (l)
        sl_layer_init(l, &sl_relu_ops);
    return l;
}
