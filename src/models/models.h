/*
 * models.h — internal interface of the model builders (models stage).
 *
 * A builder appends a known architecture to an empty network through the
 * public API only (sl_net_add and the layer constructors), so it sits
 * before the whole network → schedule → program → plan → run pipeline:
 * what it builds is an ordinary sl_net. Top-level layer names are chosen
 * so that parameter names equal torchvision's state_dict keys.
 *
 * sl_model_build() (models.c) validates the common arguments (non-NULL
 * net, num_classes >= 1, res >= 1) before a builder runs; each builder
 * checks only what is particular to its family (e.g. VGG's res % 32).
 */
#ifndef SL_MODELS_H
#define SL_MODELS_H

#include "sublinear.h"

/* Every family exposes one builder of this type. variant selects a member
 * of the family (the depth for ResNets; unused elsewhere). */
typedef sl_status (*sl_model_builder)(sl_net *net, int variant, int num_classes, int res);

/* resnet18/34/50/101/152: torchvision's ImageNet ResNets (resnet.c). */
sl_status sl_models_resnet_imagenet(sl_net *net, int depth, int num_classes, int res);
/* resnet20/56/110: the CIFAR ResNets of He et al. 2016 (resnet.c). */
sl_status sl_models_resnet_cifar(sl_net *net, int depth, int num_classes, int res);
/* vgg-a: VGG-11 without BatchNorm (vgg.c). */
sl_status sl_models_vgg_a(sl_net *net, int variant, int num_classes, int res);
/* alexnet: torchvision's AlexNet (alexnet.c). */
sl_status sl_models_alexnet(sl_net *net, int variant, int num_classes, int res);
/* googlenet: torchvision's GoogLeNet, no aux classifiers (googlenet.c). */
sl_status sl_models_googlenet(sl_net *net, int variant, int num_classes, int res);

/* sl_net_add under a printf-formatted name ("layer%d.%d"). Takes
 * ownership of layer in every case, as sl_net_add does; fails with
 * SL_ERR_INVALID_ARG (freeing layer) if the name does not fit in
 * SL_NAME_MAX bytes. */
sl_status sl_models_add(sl_net *net, sl_layer *layer, const char *name_fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
