/*
 * consumer.c — a program built against an installed sublinear (by
 * tests/test_install.sh, once through find_package and once through
 * pkg-config): a small network trained for a few steps under sqrt(N)
 * checkpointing, its planned memory, and a model file written and read.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sublinear.h>

#define CHECK(call)                                                                 \
    do {                                                                            \
        if ((call) != SL_OK) {                                                      \
            fprintf(stderr, "%s: %s\n", #call, sl_last_error());                    \
            return 1;                                                               \
        }                                                                           \
    } while (0)

int main(int argc, char **argv)
{
    enum { N = 4, RES = 8, CLASSES = 3 };
    const char *model_path = argc > 1 ? argv[1] : "consumer.safetensors";
    sl_context *ctx;
    sl_net *net;
    sl_dataset *data;
    CHECK(sl_context_create(NULL, &ctx));
    CHECK(sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net));
    CHECK(sl_net_add(net, "conv1", sl_conv2d(3, 8, 3, 1, 1)));
    CHECK(sl_net_add(net, "bn1", sl_batchnorm2d(8)));
    CHECK(sl_net_add(net, "relu1", sl_relu()));
    CHECK(sl_net_add(net, "conv2", sl_conv2d(8, 8, 3, 1, 1)));
    CHECK(sl_net_add(net, "relu2", sl_relu()));
    CHECK(sl_net_add(net, "pool", sl_global_avgpool()));
    CHECK(sl_net_add(net, "fc", sl_linear(8, CLASSES, 1)));
    sl_optimizer_options opt = sl_optimizer_sgd(0.1f, 0.9f, 0.0f, 0);
    CHECK(sl_net_set_optimizer(net, &opt));
    CHECK(sl_dataset_synthetic(CLASSES, 3, RES, RES, 1, &data));
    float x[N * 3 * RES * RES];
    int labels[N];
    sl_shape shape = sl_shape_nchw(N, 3, RES, RES);
    sl_step_result r = {0};
    for (int step = 0; step < 3; step++) {
        CHECK(sl_dataset_batch(data, SL_SPLIT_TRAIN, step * N, N, x, labels));
        CHECK(sl_net_train_step(net, x, shape, labels, &r));
    }
    sl_memory_report report;
    char json[1024];
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &report));
    CHECK(sl_memory_report_json(&report, json, sizeof json));
    CHECK(sl_save_model(net, model_path));
    CHECK(sl_load_model(net, model_path, NULL, NULL));
    printf("consumer ok: sublinear %d.%d.%d, loss %.4f, memory %s\n", SL_VERSION_MAJOR,
           SL_VERSION_MINOR, SL_VERSION_PATCH, r.loss, json);
    sl_dataset_free(data);
    sl_net_free(net);
    sl_context_free(ctx);
    return 0;
}
