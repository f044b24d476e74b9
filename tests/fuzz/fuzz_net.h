/*
 * fuzz_net.h — the small fixed network the loader is fuzzed against
 * (conv 3->4 3x3 with bias, BatchNorm, ReLU, global pool, Linear 4->3),
 * shared by the fuzz target and the seed-corpus generator.
 */
#ifndef SL_FUZZ_NET_H
#define SL_FUZZ_NET_H

#include <stdlib.h>

#include "sublinear.h"

static inline sl_net *fuzz_net_build(sl_context **ctx)
{
    sl_context_options o = sl_context_defaults();
    o.threads = 1;
    o.seed = 7;
    sl_net *net = NULL;
    int n_params = 0;
    if (sl_context_create(&o, ctx) != SL_OK || sl_sequential(*ctx, 3, &net) != SL_OK ||
        sl_net_add(net, "conv", sl_conv2d_with(&(sl_conv2d_options){3, 4, 3, 3, 1, 1, 1, 1, 1, 1,
                                                                  1, 1})) != SL_OK ||
        sl_net_add(net, "bn", sl_batchnorm2d(4)) != SL_OK ||
        sl_net_add(net, "relu", sl_relu()) != SL_OK ||
        sl_net_add(net, "pool", sl_global_avgpool()) != SL_OK ||
        sl_net_add(net, "flatten", sl_flatten()) != SL_OK ||
        sl_net_add(net, "fc", sl_linear(4, 3, 1)) != SL_OK || sl_net_param_count(net, &n_params) != SL_OK ||
        n_params == 0)
        abort();
    return net;
}

#endif
