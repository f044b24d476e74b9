/*
 * test_checkpoint.c — sublinear training is exact: under every schedule
 * (sqrt, k = 2, k = 5, several budgets, the least of them multi-level on
 * the ResNets, and an operator-level budget whose blocks keep their conv
 * outputs and recompute BatchNorm, ReLU and add from them) the loss, parameter gradients, parameters and BatchNorm
 * running statistics after 3 optimizer steps are bit-identical to
 * keep-everything, for ResNet-20 (also with every BatchNorm frozen), a
 * CIFAR ResNet-56 with dropout, VGG-A and GoogLeNet at small resolution;
 * and the arena high-water mark the executor measures equals the planned
 * peak. The keep-everything reference runs BatchNorm and the ReLU after
 * it as two steps, every other schedule joined (the CPU's batchnorm_relu_*
 * ops), so each comparison holds the joins to the two steps' bits too.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/pipeline.h"
#include "cpu/cpu.h"
#include "net/net.h"
#include "harness.h"

#define STEPS 3

typedef struct snapshot {
    th_params params;
    float loss[STEPS];
} snapshot;

static sl_net *build(sl_context *ctx, const char *model, int res, sl_schedule schedule)
{
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    int frozen = strcmp(model, "resnet20-frozen-bn") == 0;
    th_build_model(net, frozen ? "resnet20" : model, res);
    if (frozen) /* fine-tuning */
        ck_assert_int_gt(th_freeze_batchnorms(net), 10);
    sl_optimizer_options o = sl_optimizer_sgd(0.01f, 0.9f, 1e-4f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    return net;
}

static int g_most_forwards; /* of the last train() */
static int g_keeps_conv;    /* the last train()'s schedule keeps some unit's conv outputs only */
static int g_joins;         /* the last train()'s program's BatchNorm-ReLU joins */

/* Three training steps; records losses, then copies every tensor and the
 * last gradients. Checks the measured arena peak against the plan. */
static void train(const char *model, int res, int batch, sl_schedule schedule, snapshot *out,
                  uint64_t *planned_total)
{
    sl_context *ctx = th_context(42);
    sl_net *net = build(ctx, model, res, schedule);
    sl_shape shape = sl_shape_nchw(batch, 3, res, res);
    th_train_steps(net, shape, STEPS, 0.0f, out->loss);
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &rep) == SL_OK);
    if (planned_total)
        *planned_total = rep.total;
    g_most_forwards = th_most_forwards(net);
    const sl_segments *seg = &net->cache[SL_MODE_TRAIN].seg;
    const sl_run_cache *c = &net->cache[SL_MODE_TRAIN];
    g_joins = 0;
    for (int k = 0; k < c->prog.n_steps; k++)
        g_joins += sl_program_joins_relu(&net->graph, &c->sh, &c->prog, &c->plan, k);
    g_keeps_conv = 0;
    for (int a = 0; a < seg->n_actions; a++)
        g_keeps_conv |= seg->actions[a].kind == SL_ACT_FWD && seg->actions[a].keep == SL_KEEP_CONV;
    th_params_capture(net, &out->params);
    sl_net_free(net);
    sl_context_free(ctx);
}

static void snapshot_free(snapshot *s) { th_params_free(&s->params); }

static void assert_identical(const snapshot *a, const snapshot *b, const char *what)
{
    ck_assert_msg(memcmp(a->loss, b->loss, sizeof a->loss) == 0, "%s: losses differ", what);
    th_params_assert_identical(&a->params, &b->params, what);
}

/* The smallest feasible budget, read from the error a 1-byte budget gives. */
static uint64_t least_budget(const char *model, int res, int batch)
{
    sl_context *ctx = th_context(42);
    sl_net *net = build(ctx, model, res, SL_SCHEDULE_NONE);
    uint64_t least = th_least_budget(net, sl_shape_nchw(batch, 3, res, res));
    sl_net_free(net);
    sl_context_free(ctx);
    return least;
}

static void check_model(const char *model, int res, int batch)
{
    snapshot plain, other;
    uint64_t plain_total, total;
    sl_cpu_bn_relu_force(0); /* the reference: BatchNorm and ReLU apart */
    train(model, res, batch, SL_SCHEDULE_NONE, &plain, &plain_total);
    sl_cpu_bn_relu_force(1);
    sl_schedule fixed[3] = {SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(2), SL_SCHEDULE_SEGMENTS(5)};
    const char *names[3] = {"sqrt", "k=2", "k=5"};
    for (int i = 0; i < 3; i++) {
        train(model, res, batch, fixed[i], &other, &total);
        /* VGG-A has no BatchNorm */
        ck_assert_msg(g_joins > 0 || strcmp(model, "vgg-a") == 0, "%s %s: no BatchNorm-ReLU join",
                      model, names[i]);
        char what[64];
        snprintf(what, sizeof what, "%s %s", model, names[i]);
        assert_identical(&plain, &other, what);
        ck_assert_msg(total < plain_total, "%s: planned %" PRIu64 " not below plain %" PRIu64, what,
                      total, plain_total);
        snapshot_free(&other);
    }
    uint64_t least = least_budget(model, res, batch);
    uint64_t budgets[3] = {least, least + (plain_total - least) / 2, plain_total};
    int multilevel = 0;
    for (int i = 0; i < 3; i++) {
        train(model, res, batch, SL_SCHEDULE_BUDGET(budgets[i]), &other, &total);
        if (i == 0)
            multilevel = g_most_forwards;
        char what[96];
        snprintf(what, sizeof what, "%s budget %" PRIu64, model, budgets[i]);
        assert_identical(&plain, &other, what);
        ck_assert_msg(total <= budgets[i], "%s: planned %" PRIu64 " over budget", what, total);
        snapshot_free(&other);
    }
    /* the least budget of the residual networks takes a multi-level schedule */
    if (strncmp(model, "resnet", 6) == 0)
        ck_assert_msg(multilevel > 2, "%s: least budget runs a layer at most %d times", model,
                      multilevel);
    /* operator-level: blocks keeping their conv outputs only */
    uint64_t ops_budget = least + (plain_total - least) / 3;
    train(model, res, batch, SL_SCHEDULE_BUDGET_OPS(ops_budget), &other, &total);
    assert_identical(&plain, &other, "operator-level budget");
    ck_assert_msg(total <= ops_budget, "%s: operator-level planned %" PRIu64 " over budget", model,
                  total);
    if (strncmp(model, "resnet", 6) == 0)
        ck_assert_msg(g_keeps_conv, "%s: the operator-level schedule keeps no conv outputs", model);
    int keeps_conv = g_keeps_conv;
    snapshot_free(&other);
    printf("%-18s bit-identical under sqrt, k=2, k=5, budgets %.1f / %.1f / %.1f MiB "
           "and operator-level %.1f MiB (plain %.1f MiB; least: a layer runs up to %d times; "
           "operator-level %s conv outputs)\n",
           model, budgets[0] / 1048576.0, budgets[1] / 1048576.0, budgets[2] / 1048576.0,
           ops_budget / 1048576.0, plain_total / 1048576.0, multilevel,
           keeps_conv ? "keeps" : "keeps no");
    snapshot_free(&plain);
    sl_cpu_bn_relu_force(-1);
}

START_TEST(test_checkpoint_bit_identical_resnet20) { check_model("resnet20", 32, 8); }
END_TEST

START_TEST(test_checkpoint_bit_identical_resnet20_frozen_bn) { check_model("resnet20-frozen-bn", 32, 8); }
END_TEST

START_TEST(test_checkpoint_bit_identical_resnet56_dropout) { check_model("resnet56-dropout", 32, 4); }
END_TEST

START_TEST(test_checkpoint_bit_identical_vgg_a) { check_model("vgg-a", 32, 4); }
END_TEST

START_TEST(test_checkpoint_bit_identical_googlenet) { check_model("googlenet", 32, 4); }
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("bit-identical");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_checkpoint_bit_identical_resnet20);
    tcase_add_test(tc, test_checkpoint_bit_identical_resnet20_frozen_bn);
    tcase_add_test(tc, test_checkpoint_bit_identical_resnet56_dropout);
    tcase_add_test(tc, test_checkpoint_bit_identical_vgg_a);
    tcase_add_test(tc, test_checkpoint_bit_identical_googlenet);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
