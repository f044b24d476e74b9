/*
 * sublinear/models.h — the model builders: ResNets, VGG-A, AlexNet,
 * GoogLeNet, appended to a network by name.
 *
 *     sl_model_build(net, "resnet152", 1000, 224);
 */
#ifndef SUBLINEAR_MODELS_H
#define SUBLINEAR_MODELS_H

#include "sublinear/core.h"
#include "sublinear/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Models                                                              */
/* ------------------------------------------------------------------ */

/* Appends a model's layers to an empty network with 3 input channels.
 * Names: "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"
 * (ImageNet stem), "resnet20", "resnet56", "resnet110" (CIFAR), "vgg-a",
 * "alexnet", "googlenet". res is the input resolution the classifier is
 * sized for (224 for ImageNet models, 32 for CIFAR). */
SL_API sl_status sl_model_build(sl_net *net, const char *model, int num_classes, int res);

/* NULL-terminated list of the model names above. */
SL_API const char *const *sl_model_names(void);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_MODELS_H */
