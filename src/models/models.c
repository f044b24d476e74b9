/*
 * models.c — the model registry: sl_model_build() and sl_model_names().
 *
 * Stage: models, before the pipeline. A model is just a sequence of
 * sl_net_add calls, so the schedule, planner and executor see no
 * difference between a hand-built network and a registered model.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/models.h"
#include "net/net.h"

/* The one list of models: name, builder, variant. Both the public name
 * list and the lookup table are generated from it, so they cannot drift. */
#define SL_MODEL_LIST(X)                                  \
    X("resnet18", sl_models_resnet_imagenet, 18)          \
    X("resnet34", sl_models_resnet_imagenet, 34)          \
    X("resnet50", sl_models_resnet_imagenet, 50)          \
    X("resnet101", sl_models_resnet_imagenet, 101)        \
    X("resnet152", sl_models_resnet_imagenet, 152)        \
    X("resnet20", sl_models_resnet_cifar, 20)             \
    X("resnet56", sl_models_resnet_cifar, 56)             \
    X("resnet110", sl_models_resnet_cifar, 110)           \
    X("vgg-a", sl_models_vgg_a, 0)                        \
    X("alexnet", sl_models_alexnet, 0)                    \
    X("googlenet", sl_models_googlenet, 0)

typedef struct model_entry {
    const char *name;
    sl_model_builder build;
    int variant;
} model_entry;

#define SL_MODEL_NAME(name, build, variant) name,
#define SL_MODEL_ENTRY(name, build, variant) {name, build, variant},

static const char *const model_names[] = {SL_MODEL_LIST(SL_MODEL_NAME) NULL};
static const model_entry model_table[] = {SL_MODEL_LIST(SL_MODEL_ENTRY)};
#define MODEL_COUNT ((int)(sizeof model_table / sizeof model_table[0]))

const char *const *sl_model_names(void)
{
    return model_names;
}

static const model_entry *model_find(const char *name)
{
    for (int i = 0; i < MODEL_COUNT; i++)
        if (strcmp(model_table[i].name, name) == 0)
            return &model_table[i];
    return NULL;
}

/* "resnet18, resnet34, ..." for the unknown-model message. */
static void model_list_text(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < MODEL_COUNT && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", model_table[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

sl_status sl_model_build(sl_net *net, const char *model, int num_classes, int res)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: net is NULL");
    if (!model)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: model name is NULL");
    const model_entry *entry = model_find(model);
    if (!entry) {
        char names[256];
        model_list_text(names, sizeof names);
        return sl_set_error(SL_ERR_NOT_FOUND, "sl_model_build: unknown model \"%s\" (valid: %s)",
                            model, names);
    }
    if (num_classes < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: %s: num_classes must be >= 1, got %d",
                            model, num_classes);
    if (res < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: %s: res must be >= 1, got %d", model,
                            res);
    int existing = sl_net_layer_count(net);
    if (existing != 0)
        return sl_set_error(SL_ERR_STATE,
                            "sl_model_build: %s: the network already has %d layer(s); "
                            "models are built into an empty network",
                            model, existing);
    int out_channels = net->out_channels;
    sl_status st = entry->build(net, entry->variant, num_classes, res);
    if (st != SL_OK) /* objects as they were: no half-built model */
        sl_net_remove_layers_from(net, 0, out_channels);
    return st;
}
