/*
 * models_add.c — sl_models_add, the one helper every model builder
 * (resnet.c, vgg.c, ...) appends its layers with: sl_net_add under a
 * printf-formatted name. Stage: models, before the pipeline; the registry
 * (models.c) calls the builders, the builders call this.
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/base.h"
#include "models/models.h"

sl_status sl_models_add(sl_net *net, sl_layer *layer, const char *name_fmt, ...)
{
    char name[SL_NAME_MAX];
    va_list ap;
    va_start(ap, name_fmt);
    int n = vsnprintf(name, sizeof name, name_fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof name) {
        sl_layer_free(layer);
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_build: layer name too long (format \"%s\")",
                            name_fmt);
    }
    return sl_net_add(net, name, layer);
}
