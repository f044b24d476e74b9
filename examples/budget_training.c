/*
 * budget_training.c — training under a memory budget.
 *
 * SL_SCHEDULE_BUDGET(bytes) picks, among checkpointing schedules, the one with
 * the least recomputation whose planned peak (activation arena + parameters
 * + gradients + optimizer state) fits in bytes. The peak is known before
 * the first kernel runs, so a budget is checked at planning time: when no
 * schedule fits, sl_net_memory_report fails with SL_ERR_BUDGET and a
 * message naming the smallest peak any schedule reaches.
 *
 * This program asks for a fraction of what keeping every activation takes
 * (default 0.5), raises the budget by 10% while it cannot be met, then
 * trains a CIFAR ResNet-20 under it and compares the measured peak.
 *
 *   budget_training [FRACTION]
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

enum { BATCH = 8, RES = 32, CLASSES = 10, STEPS = 30 };

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

int main(int argc, char **argv)
{
    double fraction = argc > 1 ? atof(argv[1]) : 0.5;
    if (!(fraction > 0)) {
        fprintf(stderr, "usage: budget_training [FRACTION > 0]\n");
        return 2;
    }
    sl_context *ctx;
    sl_net *net;
    sl_dataset *data;
    sl_shape shape = sl_shape_nchw(BATCH, 3, RES, RES);
    CHECK(sl_context_create(NULL, &ctx));
    CHECK(sl_sublinear(ctx, 3, SL_SCHEDULE_NONE, &net));
    CHECK(sl_model_build(net, "resnet20", CLASSES, RES));
    sl_optimizer_options opt = sl_optimizer_sgd(0.05f, 0.9f, 5e-4f, 0);
    CHECK(sl_net_set_optimizer(net, &opt));

    /* What keeping everything would take, then the budget. */
    sl_memory_report plain, planned;
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &plain));
    uint64_t budget = (uint64_t)(fraction * (double)plain.total);
    for (;;) {
        CHECK(sl_net_set_schedule(net, SL_SCHEDULE_BUDGET(budget)));
        sl_status st = sl_net_memory_report(net, shape, SL_MODE_TRAIN, &planned);
        if (st == SL_OK)
            break;
        if (st != SL_ERR_BUDGET)
            CHECK(st);
        printf("budget %.2f MiB cannot be met: %s\n", mib(budget), sl_last_error());
        budget += budget / 10;
    }
    printf("budget %.2f MiB: planned peak %.2f MiB (keep-everything %.2f MiB), recompute %.1f%% "
           "of a step\n", mib(budget), mib(planned.total), mib(plain.total),
           100.0 * planned.recompute_fraction);

    /* Training is the same loop as without a budget. */
    CHECK(sl_dataset_synthetic(CLASSES, 3, RES, RES, 3, &data));
    float *x = malloc(sizeof(float) * BATCH * 3 * RES * RES), loss = 0;
    int labels[BATCH];
    if (!x)
        return 1;
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

    /* After a run the report carries what the executor measured. */
    sl_memory_report measured;
    CHECK(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &measured));
    printf("measured peak %.2f MiB (arena high-water %.2f MiB): %s the budget\n",
           mib(measured.measured_total), mib(measured.arena_measured),
           measured.measured_total <= budget ? "within" : "OVER");
    printf("saving against keep-everything: %.1f%% of the total, %.1f%% of the activations\n",
           100.0 * (1.0 - (double)planned.total / (double)plain.total),
           100.0 * (1.0 - (double)planned.arena_bytes / (double)plain.arena_bytes));
    free(x);
    sl_dataset_free(data);
    sl_net_free(net);
    sl_context_free(ctx);
    return measured.measured_total <= budget ? 0 : 1;
}
