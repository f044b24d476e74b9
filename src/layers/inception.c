/*
 * inception.c — GoogLeNet's blocks as composites (layers stage):
 * BasicConv2d (conv + BN(eps 1e-3) + ReLU, torchvision's naming "conv",
 * "bn") and the four-branch Inception block joined by a channel Concat.
 */
#include "layers/graph.h"

typedef struct block {
    sl_layer base;
    int in_c, out_c;
} block;

static int block_out_channels(const sl_layer *l, int in_c)
{
    const block *b = (const block *)l;
    return sl_check_channels(l, b->in_c, in_c) ? -1 : b->out_c;
}

/* Emits children [from, to) as a chain. */
static int emit_chain(sl_graph *g, sl_layer *l, int from, int to, int t)
{
    for (int k = from; k < to && t >= 0; k++)
        t = sl_graph_emit(g, l->children[k], t);
    return t;
}

static int conv_bn_relu_emit(sl_layer *l, sl_graph *g, int input)
{
    return emit_chain(g, l, 0, l->n_children, input);
}

static const sl_layer_ops conv_bn_relu_ops = {
    .type = "BasicConv2d",
    .emit = conv_bn_relu_emit,
    .out_channels = block_out_channels,
};

static block *block_new(const sl_layer_ops *ops, int in_c, int out_c)
{
    block *b = sl_alloc(sizeof *b, "a block");
    if (!b)
        return NULL;
    sl_layer_init(&b->base, ops);
    b->in_c = in_c;
    b->out_c = out_c;
    return b;
}

sl_layer *sl_conv_bn_relu(int in_channels, int out_channels, int kernel, int stride, int pad)
{
    sl_layer *conv = sl_conv2d(in_channels, out_channels, kernel, stride, pad);
    if (!conv)
        return NULL;
    block *b = block_new(&conv_bn_relu_ops, in_channels, out_channels);
    if (!b) {
        sl_layer_free(conv);
        return NULL;
    }
    sl_layer *l = &b->base;
    sl_batchnorm2d_options bn = {out_channels, 0.1f, 1e-3f};
    int bad = sl_layer_add_child(l, "conv", conv);
    bad |= sl_layer_add_child(l, "bn", sl_batchnorm2d_with(&bn));
    bad |= sl_layer_add_child(l, "relu", sl_relu());
    if (bad) {
        sl_layer_free(l);
        return NULL;
    }
    return l;
}

/* Children: branch1 | branch2.0 branch2.1 | branch3.0 branch3.1 |
 * branch4.0 (max pool) branch4.1 | concat. */
static int inception_emit(sl_layer *l, sl_graph *g, int input)
{
    int outs[4];
    outs[0] = emit_chain(g, l, 0, 1, input);
    outs[1] = emit_chain(g, l, 1, 3, input);
    outs[2] = emit_chain(g, l, 3, 5, input);
    outs[3] = emit_chain(g, l, 5, 7, input);
    for (int i = 0; i < 4; i++)
        if (outs[i] < 0)
            return -1;
    return sl_graph_add_node(g, l->children[7], 4, outs);
}

static const sl_layer_ops inception_ops = {
    .type = "Inception",
    .emit = inception_emit,
    .out_channels = block_out_channels,
};

sl_layer *sl_inception(int in_channels, int c1, int c3_reduce, int c3, int c5_reduce, int c5,
                       int pool_proj)
{
    if (in_channels < 1 || c1 < 1 || c3_reduce < 1 || c3 < 1 || c5_reduce < 1 || c5 < 1 ||
        pool_proj < 1) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_inception: every channel count must be >= 1");
        return NULL;
    }
    block *b = block_new(&inception_ops, in_channels, c1 + c3 + c5 + pool_proj);
    if (!b)
        return NULL;
    sl_layer *l = &b->base;
    int bad = sl_layer_add_child(l, "branch1", sl_conv_bn_relu(in_channels, c1, 1, 1, 0));
    bad |= sl_layer_add_child(l, "branch2.0", sl_conv_bn_relu(in_channels, c3_reduce, 1, 1, 0));
    bad |= sl_layer_add_child(l, "branch2.1", sl_conv_bn_relu(c3_reduce, c3, 3, 1, 1));
    bad |= sl_layer_add_child(l, "branch3.0", sl_conv_bn_relu(in_channels, c5_reduce, 1, 1, 0));
    bad |= sl_layer_add_child(l, "branch3.1", sl_conv_bn_relu(c5_reduce, c5, 3, 1, 1));
    sl_maxpool2d_options pool = {.kernel = 3, .stride = 1, .pad = 1, .ceil_mode = 1};
    bad |= sl_layer_add_child(l, "branch4.0", sl_maxpool2d_with(&pool));
    bad |= sl_layer_add_child(l, "branch4.1", sl_conv_bn_relu(in_channels, pool_proj, 1, 1, 0));
    bad |= sl_layer_add_child(l, "concat", sl_concat_join());
    if (bad) {
        sl_layer_free(l);
        return NULL;
    }
    return l;
}
