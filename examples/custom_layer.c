/* custom_layer.c — layers of your own, trained in sublinear memory: a
 * network with a Swish activation (a SiLU with a learned slope) and
 * squeeze-and-excitation residual blocks, both written with the public
 * custom-layer API in swish_se.c, trained with sl_sublinear. The schedule
 * re-forwards the custom layers exactly as it does the built-in ones; run
 * with "plain" for sl_sequential: the same losses, more memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublinear.h"
#include "swish_se.h"

#define CHECK(call) \
    do { if ((call) != SL_OK) { fprintf(stderr, "%s: %s\n", #call, sl_last_error()); exit(1); } } while (0)

int main(int argc, char **argv)
{
    enum { BATCH = 16, RES = 16, CLASSES = 4, STEPS = 30 };
    sl_context *ctx; sl_net *net; sl_dataset *data;
    CHECK(sl_context_create(NULL, &ctx));
    if (argc > 1 && strcmp(argv[1], "plain") == 0)
        CHECK(sl_sequential(ctx, 3, &net));
    else
        CHECK(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net));
    CHECK(sl_net_add(net, "conv1", sl_conv2d(3, 16, 3, 1, 1)));
    CHECK(sl_net_add(net, "bn1", sl_batchnorm2d(16)));
    CHECK(sl_net_add(net, "act1", swish(16)));
    CHECK(sl_net_add(net, "layer1.0", se_residual_block(16, 4)));
    CHECK(sl_net_add(net, "layer1.1", se_residual_block(16, 4)));
    CHECK(sl_net_add(net, "conv2", sl_conv2d(16, 32, 3, 2, 1)));
    CHECK(sl_net_add(net, "bn2", sl_batchnorm2d(32)));
    CHECK(sl_net_add(net, "act2", swish(32)));
    CHECK(sl_net_add(net, "layer2.0", se_residual_block(32, 4)));
    CHECK(sl_net_add(net, "layer2.1", se_residual_block(32, 4)));
    CHECK(sl_net_add(net, "pool", sl_global_avgpool()));
    CHECK(sl_net_add(net, "fc", sl_linear(32, CLASSES, 1)));
    sl_optimizer_options opt = sl_optimizer_sgd(0.05f, 0.9f, 5e-4f, 0);
    CHECK(sl_net_set_optimizer(net, &opt));
    CHECK(sl_dataset_synthetic(CLASSES, 3, RES, RES, 7, &data));
    sl_shape shape = sl_shape_nchw(BATCH, 3, RES, RES);
    float *x = malloc(sizeof(float) * BATCH * 3 * RES * RES), loss = 0;
    int labels[BATCH];
    for (int step = 0; step < STEPS; step++) {
        sl_step_result r;
        CHECK(sl_dataset_batch(data, SL_SPLIT_TRAIN, (int64_t)step * BATCH, BATCH, x, labels));
        CHECK(sl_net_train_step(net, x, shape, labels, &r));
        loss += r.loss / 5;
        if (step % 5 == 4) {
            printf("steps %2d-%2d  mean loss %.4f\n", step - 3, step + 1, loss);
            loss = 0;
        }
    }
    sl_param_info beta;
    CHECK(sl_net_find_param(net, "layer2.1.act2.beta", &beta)); /* a custom layer's parameter */
    printf("layer2.1.act2.beta[0] learned %.4f (started at 1)\n", beta.data[0]);
    sl_memory_report mine, plain;
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &mine));
    CHECK(sl_net_set_schedule(net, SL_SCHEDULE_NONE)); /* the same net, keeping everything */
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &plain));
    printf("activation memory %.1f KiB (measured %.1f KiB), keep-everything %.1f KiB: saving %.1f%%\n",
           mine.arena_bytes / 1024.0, mine.arena_measured / 1024.0, plain.arena_bytes / 1024.0,
           100.0 * (1.0 - (double)mine.arena_bytes / (double)plain.arena_bytes));
    free(x);
    sl_dataset_free(data);
    sl_net_free(net);
    sl_context_free(ctx);
    return 0;
}
