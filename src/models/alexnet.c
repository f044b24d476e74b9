/*
 * alexnet.c — torchvision's AlexNet, one of OptNet's benchmark models.
 *
 * Stage: models, before the pipeline (see models.h). Names follow
 * torchvision's numbering ("features.0" … "features.12", "classifier.0" …
 * "classifier.6"). torchvision's AdaptiveAvgPool2d(6) is left out: the
 * first Linear is sized for the real feature map at this resolution (6x6
 * at res 224, the same as torchvision's).
 */
#include <limits.h>
#include <stdint.h>

#include "base/base.h"
#include "models/models.h"

#define ALEXNET_CHANNELS 256 /* channels of the last conv */

/* PyTorch's output size of a window along one axis (floor mode);
 * 0 when the window does not fit. */
static int window_out(int in, int kernel, int stride, int pad)
{
    int span = in + 2 * pad - kernel;
    return span < 0 ? 0 : span / stride + 1;
}

/* Side of the last feature map for a res x res input, 0 if it vanishes. */
static int alexnet_feature_side(int res)
{
    int s = window_out(res, 11, 4, 2); /* features.0 */
    s = window_out(s, 3, 2, 0);        /* features.2 */
    s = window_out(s, 5, 1, 2);        /* features.3 */
    s = window_out(s, 3, 2, 0);        /* features.5 */
    s = window_out(s, 3, 1, 1);        /* features.6, .8, .10 keep the size */
    return window_out(s, 3, 2, 0);     /* features.12 */
}

static sl_layer *alexnet_conv(int in_channels, int out_channels, int kernel, int stride, int pad)
{
    sl_conv2d_options o = {
        .in_channels = in_channels, .out_channels = out_channels,
        .kernel_h = kernel, .kernel_w = kernel, .stride_h = stride, .stride_w = stride,
        .pad_h = pad, .pad_w = pad, .dilation_h = 1, .dilation_w = 1,
        .groups = 1, .bias = 1,
    };
    return sl_conv2d_with(&o);
}

static sl_status alexnet_add_features(sl_net *net)
{
    sl_status st = sl_net_add(net, "features.0", alexnet_conv(3, 64, 11, 4, 2));
    if (st == SL_OK)
        st = sl_net_add(net, "features.1", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "features.2", sl_maxpool2d(3, 2, 0));
    if (st == SL_OK)
        st = sl_net_add(net, "features.3", alexnet_conv(64, 192, 5, 1, 2));
    if (st == SL_OK)
        st = sl_net_add(net, "features.4", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "features.5", sl_maxpool2d(3, 2, 0));
    if (st == SL_OK)
        st = sl_net_add(net, "features.6", alexnet_conv(192, 384, 3, 1, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "features.7", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "features.8", alexnet_conv(384, 256, 3, 1, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "features.9", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "features.10", alexnet_conv(256, ALEXNET_CHANNELS, 3, 1, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "features.11", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "features.12", sl_maxpool2d(3, 2, 0));
    return st;
}

static sl_status alexnet_add_classifier(sl_net *net, int in_features, int num_classes)
{
    sl_status st = sl_net_add(net, "classifier.0", sl_dropout(0.5f));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.1", sl_linear(in_features, 4096, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.2", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.3", sl_dropout(0.5f));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.4", sl_linear(4096, 4096, 1));
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.5", sl_relu());
    if (st == SL_OK)
        st = sl_net_add(net, "classifier.6", sl_linear(4096, num_classes, 1));
    return st;
}

sl_status sl_models_alexnet(sl_net *net, int variant, int num_classes, int res)
{
    (void)variant;
    /* The first test also keeps the window arithmetic from overflowing. */
    if (res > INT_MAX / 4)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: alexnet: res %d is too large", res);
    int side = alexnet_feature_side(res);
    if (side < 1) {
        int min_res = 1;
        while (alexnet_feature_side(min_res) < 1)
            min_res++;
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_model_build: alexnet needs res >= %d (its feature map vanishes), got %d",
                       min_res, res);
    }
    if ((int64_t)ALEXNET_CHANNELS * side * side > INT_MAX)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: alexnet: res %d is too large", res);

    sl_status st = alexnet_add_features(net);
    if (st == SL_OK)
        st = sl_net_add(net, "flatten", sl_flatten());
    if (st == SL_OK)
        st = alexnet_add_classifier(net, ALEXNET_CHANNELS * side * side, num_classes);
    return st;
}
