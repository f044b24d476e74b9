/*
 * test_train.c — end to end: a CIFAR-shaped ResNet-20 trained on the
 * built-in dataset learns (held-out accuracy far above chance), with the
 * plain network and with sqrt(N) checkpointing (SGD with momentum; the
 * accuracy run with a cosine learning-rate decay).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#define CLASSES 10
#define BATCH 32

static float held_out_accuracy(sl_net *net, sl_dataset *ds, int samples)
{
    float *x = malloc((size_t)BATCH * 3 * 32 * 32 * sizeof(float));
    float logits[BATCH * CLASSES];
    int labels[BATCH], correct = 0, seen = 0;
    ck_assert(x);
    for (int64_t i = 0; seen < samples; i += BATCH) {
        ck_assert(sl_dataset_batch(ds, SL_SPLIT_TEST, i, BATCH, x, labels) == SL_OK);
        ck_assert_msg(sl_net_predict(net, x, sl_shape_nchw(BATCH, 3, 32, 32), logits) == SL_OK, "%s",
                      sl_last_error());
        for (int b = 0; b < BATCH && seen < samples; b++, seen++) {
            int best = 0;
            for (int c = 1; c < CLASSES; c++)
                if (logits[b * CLASSES + c] > logits[b * CLASSES + best])
                    best = c;
            correct += best == labels[b];
        }
    }
    free(x);
    return (float)correct / (float)seen;
}

static void train_resnet20(sl_schedule schedule, int steps, int decay, float *first_loss,
                           float *last_loss, float *accuracy)
{
    sl_context *ctx = th_context(11);
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    ck_assert_msg(sl_model_build(net, "resnet20", CLASSES, 32) == SL_OK, "%s", sl_last_error());
    sl_optimizer_options opt = sl_optimizer_sgd(0.05f, 0.9f, 5e-4f, 0);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    sl_dataset *ds = NULL;
    ck_assert(sl_dataset_synthetic(CLASSES, 3, 32, 32, 5, &ds) == SL_OK);
    float *x = malloc((size_t)BATCH * 3 * 32 * 32 * sizeof(float));
    int labels[BATCH];
    ck_assert(x);
    for (int step = 0; step < steps; step++) {
        sl_step_result r;
        /* For the accuracy run the learning rate decays along a cosine to
         * 1 % of its start. A run that ends at the full rate lands wherever
         * its last steps threw it: held-out accuracy 25-89 % across seeds
         * and GEMM engines at a constant 0.05, 99.6-100 % with the decay. */
        if (decay)
            ck_assert(sl_net_set_lr(net, sl_lr_warmup_cosine(step, 0, steps, 0.05f, 0.0005f)) ==
                      SL_OK);
        ck_assert(sl_dataset_batch(ds, SL_SPLIT_TRAIN, (int64_t)step * BATCH, BATCH, x, labels) ==
                  SL_OK);
        ck_assert_msg(sl_net_train_step(net, x, sl_shape_nchw(BATCH, 3, 32, 32), labels, &r) == SL_OK,
                      "%s", sl_last_error());
        if (step == 0)
            *first_loss = r.loss;
        *last_loss = r.loss;
    }
    *accuracy = held_out_accuracy(net, ds, 512);
    free(x);
    sl_dataset_free(ds);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_resnet20_learns_builtin_dataset)
{
    float first, last, acc;
    train_resnet20(SL_SCHEDULE_SQRT, 80, 1, &first, &last, &acc);
    printf("ResNet-20, sqrt checkpointing, 80 steps of 32: loss %.3f -> %.3f, held-out accuracy "
           "%.1f%% (chance 10%%)\n",
           first, last, 100.0 * acc);
    ck_assert_msg(acc >= 0.8f, "held-out accuracy %.3f", acc);
    ck_assert(last < 0.5f * first);
}
END_TEST

START_TEST(test_plain_resnet20_loss_falls)
{
    float first, last, acc;
    train_resnet20(SL_SCHEDULE_NONE, 30, 0, &first, &last, &acc);
    printf("ResNet-20, plain, 30 steps: loss %.3f -> %.3f, held-out accuracy %.1f%%\n", first, last,
           100.0 * acc);
    ck_assert_msg(last < 0.9f * first, "loss %.3f -> %.3f", first, last);
    ck_assert_msg(acc > 0.2f, "held-out accuracy %.3f", acc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_set_timeout(tc, 900);
    if (getenv("SL_TEST_QUICK"))
        printf("SL_TEST_QUICK: skipping the 80-step accuracy run\n");
    else
        tcase_add_test(tc, test_resnet20_learns_builtin_dataset);
    tcase_add_test(tc, test_plain_resnet20_loss_falls);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
