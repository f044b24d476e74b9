/* minimal_swap.c — the one-line change: the same network and training loop,
 * built with sl_sublinear instead of sl_sequential, keeps only segment
 * boundaries and re-runs segments in backward. Run with "plain" to compare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sublinear.h"

#define CHECK(call) \
    do { if ((call) != SL_OK) { fprintf(stderr, "%s: %s\n", #call, sl_last_error()); exit(1); } } while (0)

int main(int argc, char **argv)
{
    enum { BATCH = 16, RES = 16, CLASSES = 4, STEPS = 40 };
    sl_context *ctx; sl_net *net; sl_dataset *data;
    CHECK(sl_context_create(NULL, &ctx));
    if (argc > 1 && strcmp(argv[1], "plain") == 0)
        CHECK(sl_sequential(ctx, 3, &net));
    else
        CHECK(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net)); /* the swap */
    int width[] = {16, 16, 32, 32, 64};
    for (int i = 0, in = 3; i < 5; in = width[i++]) {
        CHECK(sl_net_add(net, NULL, sl_conv2d(in, width[i], 3, i == 2 ? 2 : 1, 1)));
        CHECK(sl_net_add(net, NULL, sl_batchnorm2d(width[i])));
        CHECK(sl_net_add(net, NULL, sl_relu()));
    }
    CHECK(sl_net_add(net, NULL, sl_global_avgpool()));
    CHECK(sl_net_add(net, NULL, sl_linear(64, CLASSES, 1)));
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
    sl_memory_report mine, plain;
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &mine));
    CHECK(sl_net_set_schedule(net, SL_SCHEDULE_NONE)); /* the same net, keeping everything */
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &plain));
    printf("activation memory %.1f KiB, keep-everything %.1f KiB: saving %.1f%%\n",
           mine.arena_bytes / 1024.0, plain.arena_bytes / 1024.0,
           100.0 * (1.0 - (double)mine.arena_bytes / (double)plain.arena_bytes));
    free(x);
    sl_dataset_free(data);
    sl_net_free(net);
    sl_context_free(ctx);
    return 0;
}
