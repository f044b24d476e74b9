/*
 * inference.c — classify with a saved model.
 *
 * Loads a model file (thin .safetensors: parameters and BatchNorm running
 * statistics, as written by sl_save_model or `sublinear train --save-model`)
 * into a freshly built network of the same architecture, switches it to
 * inference mode (parameter gradients freed, outputs reused as soon as
 * their reader has run), and measures accuracy on held-out samples of the
 * built-in dataset.
 *
 *   inference MODEL.safetensors [SAMPLES [SEED]]
 *
 * The model is a CIFAR ResNet-20 with 10 classes at 32x32, the defaults of
 * `sublinear train`; SEED (default 1, also train's default) picks the
 * dataset the model was trained on.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sublinear.h"

#define CHECK(call)                                                                 \
    do {                                                                            \
        if ((call) != SL_OK) {                                                      \
            fprintf(stderr, "%s: %s\n", #call, sl_last_error());                    \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

enum { BATCH = 32, RES = 32, CLASSES = 10 };

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: inference MODEL.safetensors [SAMPLES [SEED]]\n");
        return 2;
    }
    int samples = argc > 2 ? atoi(argv[2]) : 256;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    if (samples < 1) {
        fprintf(stderr, "inference: SAMPLES must be at least 1\n");
        return 2;
    }
    sl_context *ctx;
    sl_net *net;
    sl_dataset *data;
    sl_shape shape = sl_shape_nchw(BATCH, 3, RES, RES);
    CHECK(sl_context_create(NULL, &ctx));
    CHECK(sl_sequential(ctx, 3, &net)); /* no checkpointing needed for inference */
    CHECK(sl_model_build(net, "resnet20", CLASSES, RES));

    /* A strict load: every tensor of the network must be in the file with
     * its shape, or nothing changes and the error names the tensor. */
    sl_load_report loaded;
    CHECK(sl_load_model(net, argv[1], NULL, &loaded));
    printf("loaded %d tensors from %s\n", loaded.loaded, argv[1]);

    sl_memory_report train, infer;
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &train));
    CHECK(sl_net_set_mode(net, SL_MODE_INFER));
    CHECK(sl_net_memory_report(net, shape, SL_MODE_INFER, &infer));
    printf("memory of a batch of %d: inference %.2f MiB, a training step %.2f MiB: saving %.1f%%\n",
           BATCH, mib(infer.total), mib(train.total),
           100.0 * (1.0 - (double)infer.total / (double)train.total));

    CHECK(sl_dataset_synthetic(CLASSES, 3, RES, RES, seed, &data));
    float *x = malloc(sizeof(float) * BATCH * 3 * RES * RES);
    float logits[BATCH * CLASSES];
    int labels[BATCH], correct = 0, seen = 0;
    if (!x)
        return 1;
    for (int64_t i = 0; seen < samples; i += BATCH) {
        CHECK(sl_dataset_batch(data, SL_SPLIT_TEST, i, BATCH, x, labels));
        CHECK(sl_net_predict(net, x, shape, logits));
        for (int b = 0; b < BATCH && seen < samples; b++, seen++) {
            int best = 0;
            for (int c = 1; c < CLASSES; c++)
                if (logits[b * CLASSES + c] > logits[b * CLASSES + best])
                    best = c;
            correct += best == labels[b];
        }
    }
    printf("accuracy %.4f on %d held-out samples (%d correct)\n", (double)correct / seen, seen,
           correct);
    free(x);
    sl_dataset_free(data);
    sl_net_free(net);
    sl_context_free(ctx);
    return 0;
}
