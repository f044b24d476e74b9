/*
 * residual.c — torchvision's residual blocks as composites (layers
 * stage): BasicBlock (two 3x3 convs) and Bottleneck (1x1, 3x3, 1x1 with
 * 4x expansion, stride on the 3x3 as in ResNet v1.5). A projection
 * shortcut ("downsample.0" conv 1x1 + "downsample.1" BN) is used when the
 * shape changes. Each block emits its children and an Add join, so the
 * planner sees every tensor while the top level stays a chain.
 */
#include <stdlib.h>

#include "layers/graph.h"

typedef struct residual {
    sl_layer base;
    int in_c, out_c;
    int n_main;      /* children [0, n_main) form the main branch */
    int has_proj;    /* children n_main, n_main+1: downsample conv, BN */
    /* then: add, final relu */
} residual;

static int residual_emit(sl_layer *l, sl_graph *g, int input)
{
    residual *r = (residual *)l;
    sl_layer **c = l->children;
    int t = input, k = 0;
    for (; k < r->n_main && t >= 0; k++)
        t = sl_graph_emit(g, c[k], t);
    int s = input;
    if (r->has_proj) {
        s = sl_graph_emit(g, c[k++], input);
        if (s >= 0)
            s = sl_graph_emit(g, c[k], s);
        k++;
    }
    if (t < 0 || s < 0)
        return -1;
    int ins[2] = {t, s};
    t = sl_graph_add_node(g, c[k++], 2, ins);
    return t < 0 ? -1 : sl_graph_emit(g, c[k], t);
}

static int residual_out_channels(const sl_layer *l, int in_c)
{
    const residual *r = (const residual *)l;
    return sl_check_channels(l, r->in_c, in_c) ? -1 : r->out_c;
}

static const sl_layer_ops basic_ops = {
    .type = "BasicBlock",
    .emit = residual_emit,
    .out_channels = residual_out_channels,
};

static const sl_layer_ops bottleneck_ops = {
    .type = "Bottleneck",
    .emit = residual_emit,
    .out_channels = residual_out_channels,
};

static residual *residual_new(const sl_layer_ops *ops, int in_c, int out_c)
{
    residual *r = sl_alloc(sizeof *r, "a residual block");
    if (!r)
        return NULL;
    sl_layer_init(&r->base, ops);
    r->in_c = in_c;
    r->out_c = out_c;
    return r;
}

/* Adds the shortcut (when needed), the join and the final ReLU. */
static sl_layer *residual_finish(residual *r, int stride)
{
    sl_layer *l = &r->base;
    r->n_main = l->n_children;
    r->has_proj = stride != 1 || r->in_c != r->out_c;
    int bad = 0;
    if (r->has_proj) {
        bad |= sl_layer_add_child(l, "downsample.0", sl_conv2d(r->in_c, r->out_c, 1, stride, 0));
        bad |= sl_layer_add_child(l, "downsample.1", sl_batchnorm2d(r->out_c));
    }
    bad |= sl_layer_add_child(l, "add", sl_join_sum());
    bad |= sl_layer_add_child(l, "relu_out", sl_relu());
    if (bad) {
        sl_layer_free(l);
        return NULL;
    }
    return l;
}

sl_layer *sl_basic_block(int in_channels, int out_channels, int stride)
{
    if (in_channels < 1 || out_channels < 1 || stride < 1) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_basic_block: channels %d -> %d and stride %d must be >= 1",
                     in_channels, out_channels, stride);
        return NULL;
    }
    residual *r = residual_new(&basic_ops, in_channels, out_channels);
    if (!r)
        return NULL;
    sl_layer *l = &r->base;
    int bad = sl_layer_add_child(l, "conv1", sl_conv2d(in_channels, out_channels, 3, stride, 1));
    bad |= sl_layer_add_child(l, "bn1", sl_batchnorm2d(out_channels));
    bad |= sl_layer_add_child(l, "relu", sl_relu());
    bad |= sl_layer_add_child(l, "conv2", sl_conv2d(out_channels, out_channels, 3, 1, 1));
    bad |= sl_layer_add_child(l, "bn2", sl_batchnorm2d(out_channels));
    if (bad) {
        sl_layer_free(l);
        return NULL;
    }
    return residual_finish(r, stride);
}

sl_layer *sl_bottleneck(int in_channels, int width, int stride)
{
    if (in_channels < 1 || width < 1 || stride < 1) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_bottleneck: in_channels %d, width %d, stride %d must be >= 1",
                     in_channels, width, stride);
        return NULL;
    }
    residual *r = residual_new(&bottleneck_ops, in_channels, 4 * width);
    if (!r)
        return NULL;
    sl_layer *l = &r->base;
    int bad = sl_layer_add_child(l, "conv1", sl_conv2d(in_channels, width, 1, 1, 0));
    bad |= sl_layer_add_child(l, "bn1", sl_batchnorm2d(width));
    bad |= sl_layer_add_child(l, "relu1", sl_relu());
    bad |= sl_layer_add_child(l, "conv2", sl_conv2d(width, width, 3, stride, 1));
    bad |= sl_layer_add_child(l, "bn2", sl_batchnorm2d(width));
    bad |= sl_layer_add_child(l, "relu2", sl_relu());
    bad |= sl_layer_add_child(l, "conv3", sl_conv2d(width, 4 * width, 1, 1, 0));
    bad |= sl_layer_add_child(l, "bn3", sl_batchnorm2d(4 * width));
    if (bad) {
        sl_layer_free(l);
        return NULL;
    }
    return residual_finish(r, stride);
}
