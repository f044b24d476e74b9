/*
 * vgg.c — VGG-A (VGG-11 without BatchNorm), the model of OptNet's tables.
 *
 * Stage: models, before the pipeline (see models.h). "features.<i>"
 * follows torchvision's vgg11 numbering (each conv and its ReLU take one
 * index each, a max-pool one), and "classifier.<i>" its classifier, so the
 * parameter names match torchvision's state_dict. torchvision's
 * AdaptiveAvgPool2d(7) is left out: the first Linear is sized for the real
 * res/32 x res/32 feature map instead (at res 224 it is 7x7, the same).
 */
#include <limits.h>
#include <stdint.h>

#include "base/base.h"
#include "models/models.h"

#define VGG_POOL 0 /* "M" in torchvision's configuration */
#define VGG_LAST_CHANNELS 512 /* channels of the last conv in the config */

static const int vgg_a_config[] = {64,  VGG_POOL, 128, VGG_POOL, 256, 256, VGG_POOL,
                                   512, 512,      VGG_POOL, 512, 512, VGG_POOL};

static sl_layer *vgg_conv3x3(int in_channels, int out_channels)
{
    sl_conv2d_options o = {
        .in_channels = in_channels, .out_channels = out_channels,
        .kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
        .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 1,
        .groups = 1, .bias = 1,
    };
    return sl_conv2d_with(&o);
}

static sl_status vgg_add_features(sl_net *net, int *channels)
{
    int index = 0;
    int count = (int)(sizeof vgg_a_config / sizeof vgg_a_config[0]);
    for (int i = 0; i < count; i++) {
        sl_status st;
        if (vgg_a_config[i] == VGG_POOL) {
            st = sl_models_add(net, sl_maxpool2d(2, 2, 0), "features.%d", index++);
        } else {
            st = sl_models_add(net, vgg_conv3x3(*channels, vgg_a_config[i]), "features.%d",
                               index++);
            if (st == SL_OK)
                st = sl_models_add(net, sl_relu(), "features.%d", index++);
            *channels = vgg_a_config[i];
        }
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

sl_status sl_models_vgg_a(sl_net *net, int variant, int num_classes, int res)
{
    (void)variant;
    if (res < 32 || res % 32 != 0)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_model_build: vgg-a needs res a positive multiple of 32 "
                            "(five 2x2 pools), got %d",
                            res);
    int side = res / 32;
    if ((int64_t)VGG_LAST_CHANNELS * side * side > INT_MAX)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: vgg-a: res %d is too large", res);
    int channels = 3;
    sl_status st = vgg_add_features(net, &channels);
    if (st == SL_OK)
        st = sl_net_add(net, "flatten", sl_flatten());
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.0", sl_linear(channels * side * side, 4096, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.1", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.2", sl_dropout(0.5f));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.3", sl_linear(4096, 4096, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.4", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.5", sl_dropout(0.5f));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.6", sl_linear(4096, num_classes, 1));
    return st;
}
