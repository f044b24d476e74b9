/*
 * googlenet.c — torchvision's GoogLeNet (Inception v1) without the
 * auxiliary classifiers and without transform_input: OptNet's benchmark
 * model.
 *
 * Stage: models, before the pipeline (see models.h). Names follow
 * torchvision ("conv1", "maxpool1", "inception3a", "fc"); torchvision has
 * no flatten module (it calls torch.flatten), so ours is named "flatten".
 * The inception blocks and BasicConv2d blocks name their own children
 * ("inception3a.branch2.1.conv.weight", "conv1.bn.running_var").
 */
#include "base/base.h"
#include "models/models.h"

/* One inception block's arguments, in sl_inception's order. */
typedef struct inception_config {
    const char *name;
    int in_channels, c1, c3_reduce, c3, c5_reduce, c5, pool_proj;
} inception_config;

/* A row of the body is an inception block, or, when pool_name is set, a
 * ceil-mode max-pool of pool_kernel, stride 2, between two stages. */
typedef struct googlenet_row {
    const char *pool_name; /* non-NULL: a max-pool with this name */
    int pool_kernel;
    inception_config block;
} googlenet_row;

static const googlenet_row googlenet_body[] = {
    {NULL, 0, {"inception3a", 192, 64, 96, 128, 16, 32, 32}},
    {NULL, 0, {"inception3b", 256, 128, 128, 192, 32, 96, 64}},
    {"maxpool3", 3, {0}},
    {NULL, 0, {"inception4a", 480, 192, 96, 208, 16, 48, 64}},
    {NULL, 0, {"inception4b", 512, 160, 112, 224, 24, 64, 64}},
    {NULL, 0, {"inception4c", 512, 128, 128, 256, 24, 64, 64}},
    {NULL, 0, {"inception4d", 512, 112, 144, 288, 32, 64, 64}},
    {NULL, 0, {"inception4e", 528, 256, 160, 320, 32, 128, 128}},
    {"maxpool4", 2, {0}},
    {NULL, 0, {"inception5a", 832, 256, 160, 320, 32, 128, 128}},
    {NULL, 0, {"inception5b", 832, 384, 192, 384, 48, 128, 128}},
};

#define GOOGLENET_CHANNELS 1024 /* output channels of inception5b */

/* GoogLeNet's max-pools round their output size up (ceil_mode). */
static sl_layer *ceil_maxpool(int kernel, int stride)
{
    return sl_maxpool2d_with(&(sl_maxpool2d_options){kernel, stride, 0, 1});
}

static sl_status googlenet_add_stem(sl_net *net)
{
    sl_status st = sl_net_add(net, "conv1", sl_conv_bn_relu(3, 64, 7, 2, 3));
    if (st == SL_OK)
        st = sl_net_add(net, "maxpool1", ceil_maxpool(3, 2));
    if (st == SL_OK)
        st = sl_net_add(net, "conv2", sl_conv_bn_relu(64, 64, 1, 1, 0));
    if (st == SL_OK)
        st = sl_net_add(net, "conv3", sl_conv_bn_relu(64, 192, 3, 1, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "maxpool2", ceil_maxpool(3, 2));
    return st;
}

static sl_status googlenet_add_body(sl_net *net)
{
    int rows = (int)(sizeof googlenet_body / sizeof googlenet_body[0]);
    for (int i = 0; i < rows; i++) {
        const googlenet_row *r = &googlenet_body[i];
        const inception_config *b = &r->block;
        sl_status st = r->pool_name
            ? sl_net_add(net, r->pool_name, ceil_maxpool(r->pool_kernel, 2))
            : sl_net_add(net, b->name, sl_inception(b->in_channels, b->c1, b->c3_reduce, b->c3,
                                                    b->c5_reduce, b->c5, b->pool_proj));
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

sl_status sl_models_googlenet(sl_net *net, int variant, int num_classes, int res)
{
    (void)variant;
    /* A stride-2 conv and four stride-2 pools bring 32 pixels to 1. */
    if (res < 32)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: googlenet needs res >= 32, got %d",
                            res);
    sl_status st = googlenet_add_stem(net);
    if (st == SL_OK)
        st = googlenet_add_body(net);
    if (st == SL_OK)
        st = sl_net_add(net, "avgpool", sl_global_avgpool());
    if (st == SL_OK)
        st = sl_net_add(net, "flatten", sl_flatten());
    if (st == SL_OK)
        st = sl_net_add(net, "dropout", sl_dropout(0.2f));
    if (st == SL_OK)
        st = sl_net_add(net, "fc", sl_linear(GOOGLENET_CHANNELS, num_classes, 1));
    return st;
}
