/*
 * bench_optnet.c — optnet's memory tables, side by side: for AlexNet,
 * VGG-A, GoogLeNet (224²) and CIFAR ResNet-110 (32²), float32, the planned
 * memory before optimisation (every output, gradInput and workspace in
 * storage of its own, as a plain framework) and after (our planner), for
 * inference at batch 128 and training at batch 64 (keep-everything: this
 * table is about sharing, not recomputation), with optnet's published
 * relative savings beside ours. Planned bytes are deterministic: no kernel
 * runs. Prints markdown.
 */
#include <stdio.h>
#include <string.h>

#include "sublinear.h"

typedef struct row {
    const char *model;
    int res, classes;
    double optnet_infer_outputs, optnet_train_grad_inputs; /* % saved, optnet README */
} row;

static const row rows[] = {
    {"alexnet", 224, 1000, 75, 48},
    {"vgg-a", 224, 1000, 55, 54},
    {"googlenet", 224, 1000, 55, 37},
    {"resnet110", 32, 10, 97, 60},
};

static double mib(uint64_t b) { return (double)b / 1048576.0; }

static int plan(sl_context *ctx, const row *r, int batch, sl_mode mode, int reuse,
                sl_memory_report *out)
{
    sl_net *net = NULL;
    int ok = sl_sequential(ctx, 3, &net) == SL_OK &&
             sl_model_build(net, r->model, r->classes, r->res) == SL_OK &&
             sl_net_set_memory_reuse(net, reuse) == SL_OK &&
             sl_net_memory_report(net, (sl_shape){batch, 3, r->res, r->res}, mode, out) == SL_OK;
    if (!ok)
        fprintf(stderr, "bench_optnet: %s: %s\n", r->model, sl_last_error());
    sl_net_free(net);
    return ok ? 0 : 1;
}

int main(void)
{
    sl_context *ctx = NULL;
    if (sl_context_create(NULL, &ctx) != SL_OK)
        return 1;
    int rc = 0;
    printf("### Inference, batch 128 (MiB)\n\n"
           "| model | total before | total after | outputs before | outputs after | params | "
           "outputs saved | optnet's outputs saved |\n|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        sl_memory_report b, a;
        rc |= plan(ctx, &rows[i], 128, SL_MODE_INFER, 0, &b);
        rc |= plan(ctx, &rows[i], 128, SL_MODE_INFER, 1, &a);
        if (rc)
            break;
        printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f %% | %.0f %% |\n", rows[i].model,
               mib(b.total), mib(a.total), mib(b.outputs), mib(a.outputs), mib(a.params),
               100.0 * (1.0 - (double)a.outputs / (double)b.outputs), rows[i].optnet_infer_outputs);
    }
    printf("\n### Training, batch 64, keep-everything (MiB)\n\n"
           "| model | total before | total after | outputs before | outputs after | gradInputs "
           "before | gradInputs after | params | gradInputs saved | optnet's gradInputs saved "
           "|\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; !rc && i < sizeof rows / sizeof *rows; i++) {
        sl_memory_report b, a;
        rc |= plan(ctx, &rows[i], 64, SL_MODE_TRAIN, 0, &b);
        rc |= plan(ctx, &rows[i], 64, SL_MODE_TRAIN, 1, &a);
        if (rc)
            break;
        printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f %% | %.0f %% |\n",
               rows[i].model, mib(b.total), mib(a.total), mib(b.outputs), mib(a.outputs),
               mib(b.grad_inputs), mib(a.grad_inputs), mib(a.params),
               100.0 * (1.0 - (double)a.grad_inputs / (double)b.grad_inputs),
               rows[i].optnet_train_grad_inputs);
    }
    printf("\nBefore: every tensor in storage of its own (`sublinear plan --no-reuse`). After: "
           "the planner (in-place layers, outputs and gradInputs reused once their last reader ran, "
           "workspaces shared, one arena). Totals include parameters and, in training, their "
           "gradients (no optimizer state).\n");
    sl_context_free(ctx);
    return rc;
}
