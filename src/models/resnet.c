/*
 * resnet.c — ResNet builders: torchvision's ImageNet ResNets (18 … 152)
 * and the CIFAR ResNets of He et al. 2016 (20, 56, 110).
 *
 * Stage: models, before the pipeline (see models.h). Layer names follow
 * torchvision ("conv1", "bn1", "layer2.0", "fc"), so
 * "layer2.0.conv1.weight" and "layer2.0.downsample.0.weight" match its
 * state_dict; the blocks name their own children.
 */
#include "base/base.h"
#include "models/models.h"

#define RESNET_STAGES_MAX 4

typedef struct resnet_config {
    int bottleneck;                /* 0: BasicBlock, 1: Bottleneck */
    int blocks[RESNET_STAGES_MAX]; /* blocks per stage */
} resnet_config;

static int resnet_imagenet_config(int depth, resnet_config *cfg)
{
    switch (depth) {
    case 18: *cfg = (resnet_config){0, {2, 2, 2, 2}}; return 1;
    case 34: *cfg = (resnet_config){0, {3, 4, 6, 3}}; return 1;
    case 50: *cfg = (resnet_config){1, {3, 4, 6, 3}}; return 1;
    case 101: *cfg = (resnet_config){1, {3, 4, 23, 3}}; return 1;
    case 152: *cfg = (resnet_config){1, {3, 8, 36, 3}}; return 1;
    default: return 0;
    }
}

/* Appends "layer<stage>.0" … "layer<stage>.<blocks-1>"; *channels is the
 * input channel count on entry and the stage's output count on return. */
static sl_status resnet_add_stage(sl_net *net, int stage, int blocks, int bottleneck, int width,
                                  int stride, int *channels)
{
    for (int b = 0; b < blocks; b++) {
        int block_stride = b == 0 ? stride : 1;
        sl_layer *block = bottleneck ? sl_bottleneck(*channels, width, block_stride)
                                     : sl_basic_block(*channels, width, block_stride);
        sl_status st = sl_models_add(net, block, "layer%d.%d", stage, b);
        if (st != SL_OK)
            return st;
        *channels = bottleneck ? 4 * width : width;
    }
    return SL_OK;
}

/* avgpool, flatten, fc: the head shared by every ResNet. */
static sl_status resnet_add_head(sl_net *net, int channels, int num_classes)
{
    sl_status st = sl_net_add(net, "avgpool", sl_global_avgpool());
    if (st == SL_OK)
        st = sl_net_add(net, "flatten", sl_flatten());
    if (st == SL_OK)
        st = sl_net_add(net, "fc", sl_linear(channels, num_classes, 1));
    return st;
}

sl_status sl_models_resnet_imagenet(sl_net *net, int depth, int num_classes, int res)
{
    resnet_config cfg;
    if (!resnet_imagenet_config(depth, &cfg))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: no ImageNet ResNet of depth %d",
                            depth);
    /* Five stride-2 reductions bring 32 pixels to 1. */
    if (res < 32)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: resnet%d needs res >= 32, got %d",
                            depth, res);

    sl_status st = sl_net_add(net, "conv1", sl_conv2d(3, 64, 7, 2, 3));
    if (st == SL_OK)
        st = sl_net_add(net, "bn1", sl_batchnorm2d(64));
    if (st == SL_OK)
        st = sl_net_add(net, "relu", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "maxpool", sl_maxpool2d(3, 2, 1));
    if (st != SL_OK)
        return st;

    static const int widths[RESNET_STAGES_MAX] = {64, 128, 256, 512};
    int channels = 64;
    for (int s = 0; s < RESNET_STAGES_MAX; s++) {
        st = resnet_add_stage(net, s + 1, cfg.blocks[s], cfg.bottleneck, widths[s],
                              s == 0 ? 1 : 2, &channels);
        if (st != SL_OK)
            return st;
    }
    return resnet_add_head(net, channels, num_classes);
}

sl_status sl_models_resnet_cifar(sl_net *net, int depth, int num_classes, int res)
{
    (void)res; /* 3x3 convs with padding and a global pool take any size */
    if (depth < 8 || (depth - 2) % 6 != 0)
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_model_build: CIFAR ResNet depth must be 6n+2 (n >= 1), got %d", depth);
    int n = (depth - 2) / 6;

    sl_status st = sl_net_add(net, "conv1", sl_conv2d(3, 16, 3, 1, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "bn1", sl_batchnorm2d(16));
    if (st == SL_OK)
        st = sl_net_add(net, "relu", sl_relu());
    if (st != SL_OK)
        return st;

    static const int widths[3] = {16, 32, 64};
    int channels = 16;
    for (int s = 0; s < 3; s++) {
        st = resnet_add_stage(net, s + 1, n, 0, widths[s], s == 0 ? 1 : 2, &channels);
        if (st != SL_OK)
            return st;
    }
    return resnet_add_head(net, channels, num_classes);
}
