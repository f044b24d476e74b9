/*
 * test_inference.c — inference mode and the pictures of a plan: outputs
 * bit-identical with and without planning and across mode switches,
 * gradients freed in inference and training resuming bit-identically,
 * the measured arena equal to the plan, chains needing two or three
 * buffers, and the DOT and SVG files parsing with Graphviz and xmllint.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define BATCH 4

static sl_net *net_of(sl_context *ctx, const char *model, int reuse)
{
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert_msg(sl_model_build(net, model, 10, 32) == SL_OK, "%s", sl_last_error());
    ck_assert(sl_net_set_memory_reuse(net, reuse) == SL_OK);
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 1e-4f, 1);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    return net;
}

static void batch(int step, float *x, int *labels)
{
    th_fill_normal(x, (size_t)BATCH * 3 * 32 * 32, 500 + (uint64_t)step, 1.0f);
    for (int b = 0; b < BATCH; b++)
        labels[b] = (b * 3 + step) % 10;
}

static void train_steps(sl_net *net, int from, int to)
{
    float x[BATCH * 3 * 32 * 32];
    int labels[BATCH];
    for (int s = from; s < to; s++) {
        batch(s, x, labels);
        ck_assert_msg(sl_net_train_step(net, x, sl_shape_nchw(BATCH, 3, 32, 32), labels, NULL) == SL_OK,
                      "%s", sl_last_error());
    }
}

static void predict(sl_net *net, float *logits)
{
    float x[BATCH * 3 * 32 * 32];
    int labels[BATCH];
    batch(99, x, labels);
    ck_assert_msg(sl_net_predict(net, x, sl_shape_nchw(BATCH, 3, 32, 32), logits) == SL_OK, "%s",
                  sl_last_error());
}

START_TEST(test_inference_bit_identical_with_and_without_planning)
{
    const char *models[3] = {"resnet20", "googlenet", "vgg-a"};
    for (int m = 0; m < 3; m++) {
        sl_context *c1 = th_context(9), *c2 = th_context(9);
        sl_net *planned = net_of(c1, models[m], 1), *plain = net_of(c2, models[m], 0);
        train_steps(planned, 0, 2);
        train_steps(plain, 0, 2);
        float a[BATCH * 10], b[BATCH * 10], c[BATCH * 10];
        predict(planned, a); /* training-mode network, eval pass */
        predict(plain, b);
        ck_assert_msg(memcmp(a, b, sizeof a) == 0, "%s: planned and unplanned outputs differ",
                      models[m]);
        ck_assert(sl_net_set_mode(planned, SL_MODE_INFER) == SL_OK);
        predict(planned, c); /* inference mode, gradients freed */
        ck_assert_msg(memcmp(a, c, sizeof a) == 0, "%s: inference mode changes outputs", models[m]);
        sl_memory_report r;
        ck_assert(sl_net_memory_report(planned, sl_shape_nchw(BATCH, 3, 32, 32), SL_MODE_INFER, &r) ==
                  SL_OK);
        ck_assert_msg(r.arena_measured == r.arena_bytes, "measured %" PRIu64 " planned %" PRIu64,
                      r.arena_measured, r.arena_bytes);
        ck_assert(r.param_grads == 0 && r.optimizer == 0 && r.grad_inputs == 0);
        ck_assert(r.measured_param_grads == 0);
        sl_net_free(planned);
        sl_net_free(plain);
        sl_context_free(c1);
        sl_context_free(c2);
    }
}
END_TEST

START_TEST(test_mode_switch_resumes_training_bit_identically)
{
    sl_context *c1 = th_context(4), *c2 = th_context(4);
    sl_net *switched = net_of(c1, "resnet20", 1), *straight = net_of(c2, "resnet20", 1);
    train_steps(switched, 0, 3);
    ck_assert(sl_net_set_mode(switched, SL_MODE_INFER) == SL_OK);
    ck_assert_int_eq(sl_net_mode(switched), SL_MODE_INFER);
    sl_param_info p;
    ck_assert(sl_net_param(switched, 0, &p) == SL_OK);
    ck_assert_ptr_null(p.grad);
    float logits[BATCH * 10], x[BATCH * 3 * 32 * 32];
    int labels[BATCH];
    predict(switched, logits);
    batch(0, x, labels);
    ck_assert(sl_net_train_step(switched, x, sl_shape_nchw(BATCH, 3, 32, 32), labels, NULL) ==
              SL_ERR_STATE);
    ck_assert_msg(strstr(sl_last_error(), "inference mode") != NULL, "%s", sl_last_error());
    ck_assert(sl_net_set_mode(switched, SL_MODE_TRAIN) == SL_OK);
    train_steps(switched, 3, 6);
    train_steps(straight, 0, 6);
    int n = th_param_count(straight);
    for (int i = 0; i < n; i++) {
        sl_param_info a, b;
        ck_assert(sl_net_param(switched, i, &a) == SL_OK);
        ck_assert(sl_net_param(straight, i, &b) == SL_OK);
        ck_assert_msg(memcmp(a.data, b.data, a.count * sizeof(float)) == 0, "%s differs", a.name);
        if (a.grad)
            ck_assert_msg(memcmp(a.grad, b.grad, a.count * sizeof(float)) == 0, "grad %s", a.name);
    }
    sl_net_free(switched);
    sl_net_free(straight);
    sl_context_free(c1);
    sl_context_free(c2);
}
END_TEST

/* A plain chain (VGG-A: conv, relu, pool, ...) needs the two largest
 * neighbouring activations at once and nothing more (plus workspace). */
START_TEST(test_inference_chain_needs_two_buffers)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_model_build(net, "vgg-a", 10, 64) == SL_OK);
    sl_memory_report r;
    sl_shape in = sl_shape_nchw(8, 3, 64, 64);
    ck_assert(sl_net_memory_report(net, in, SL_MODE_INFER, &r) == SL_OK);
    /* conv1 output 8x64x64x64 and its pooled 8x64x32x32 */
    uint64_t conv1 = 8ull * 64 * 64 * 64 * 4, pool1 = conv1 / 4;
    ck_assert_msg(r.outputs == conv1 + pool1, "outputs %" PRIu64 ", want %" PRIu64, r.outputs,
                  conv1 + pool1);
    ck_assert(r.arena_bytes <= r.outputs + r.buffers);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

static int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    ck_assert(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

START_TEST(test_dot_graph_parses_and_has_a_node_per_layer)
{
    char dir[] = "/tmp/sl_dot_XXXXXX";
    ck_assert(mkdtemp(dir));
    char path[256], cmd[600];
    snprintf(path, sizeof path, "%s/net.dot", dir);
    sl_context *ctx = th_context(1);
    for (int reuse = 0; reuse <= 1; reuse++) {
        sl_net *net = net_of(ctx, "googlenet", reuse);
        ck_assert_msg(sl_net_write_dot(net, sl_shape_nchw(2, 3, 32, 32), SL_MODE_TRAIN, path) == SL_OK,
                      "%s", sl_last_error());
        /* googlenet: one node per primitive layer, plus the input */
        int nodes = count_lines(path, "fillcolor=");
        ck_assert_int_gt(nodes, 150);
        ck_assert_int_eq(count_lines(path, "subgraph cluster_"), 3 + 9); /* 3 stem convs, 9 inceptions */
        if (system("command -v dot > /dev/null 2>&1") == 0) {
            snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o '%s/net.svg'", path, dir);
            ck_assert_msg(system(cmd) == 0, "Graphviz rejects %s", path);
        } else {
            printf("SKIPPED: Graphviz 'dot' not installed, DOT syntax not checked\n");
        }
        sl_net_free(net);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_memory_timeline_svg_parses_with_a_series_per_schedule)
{
    char dir[] = "/tmp/sl_svg_XXXXXX";
    ck_assert(mkdtemp(dir));
    char path[256], cmd[600];
    snprintf(path, sizeof path, "%s/timeline.svg", dir);
    sl_context *ctx = th_context(1);
    sl_schedule s[3] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(2)};
    const char *labels[3] = {"none", "sqrt", "k=2 <&>"};
    sl_memory_timeline tl[3];
    const sl_memory_timeline *series[3];
    for (int i = 0; i < 3; i++) {
        sl_net *net = net_of(ctx, "resnet56", 1);
        ck_assert(sl_net_set_schedule(net, s[i]) == SL_OK);
        ck_assert(sl_net_memory_timeline(net, sl_shape_nchw(8, 3, 32, 32), SL_MODE_TRAIN, &tl[i]) == SL_OK);
        series[i] = &tl[i];
        uint64_t peak = 0;
        for (int k = 0; k < tl[i].steps; k++) {
            uint64_t t = tl[i].outputs[k] + tl[i].grad_inputs[k] + tl[i].buffers[k];
            peak = t > peak ? t : peak;
        }
        ck_assert(peak <= tl[i].arena_bytes); /* live bytes never exceed the arena */
        /* The timeline and the report read the same per-step counts. */
        sl_memory_report r;
        ck_assert(sl_net_memory_report(net, sl_shape_nchw(8, 3, 32, 32), SL_MODE_TRAIN, &r) == SL_OK);
        uint64_t out_peak = 0, grad_peak = 0;
        for (int k = 0; k < tl[i].steps; k++) {
            out_peak = tl[i].outputs[k] > out_peak ? tl[i].outputs[k] : out_peak;
            grad_peak = tl[i].grad_inputs[k] > grad_peak ? tl[i].grad_inputs[k] : grad_peak;
        }
        ck_assert_uint_eq(out_peak, r.outputs);
        ck_assert_uint_eq(grad_peak, r.grad_inputs);
        sl_net_free(net);
    }
    ck_assert(tl[1].steps > tl[0].steps); /* re-forward steps */
    ck_assert(tl[1].arena_bytes < tl[0].arena_bytes);
    ck_assert(sl_memory_timeline_write_svg(path, series, labels, 3) == SL_OK);
    ck_assert_int_eq(count_lines(path, "class=\"series\""), 3);
    if (system("command -v xmllint > /dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
        ck_assert_msg(system(cmd) == 0, "xmllint rejects %s", path);
    } else {
        printf("SKIPPED: xmllint not installed, SVG syntax not checked\n");
    }
    for (int i = 0; i < 3; i++)
        sl_memory_timeline_free(&tl[i]);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
    sl_context_free(ctx);
}
END_TEST

/* A report after a run that computed the input's gradient describes that
 * run's plan (measured bytes included) instead of planning again without
 * the gradient and dropping it. */
START_TEST(test_memory_report_after_forward_backward_with_dx_reports_the_run)
{
    sl_context *ctx = th_context(2);
    sl_net *net = net_of(ctx, "resnet20", 1);
    sl_shape in = sl_shape_nchw(BATCH, 3, 32, 32);
    float x[BATCH * 3 * 32 * 32], dy[BATCH * 10], y[BATCH * 10], dx[BATCH * 3 * 32 * 32];
    th_fill_normal(x, sizeof x / sizeof x[0], 7, 1.0f);
    th_fill_normal(dy, sizeof dy / sizeof dy[0], 8, 1.0f);
    ck_assert_msg(sl_net_forward_backward(net, x, in, dy, y, dx) == SL_OK, "%s", sl_last_error());
    sl_memory_report r;
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &r) == SL_OK);
    ck_assert_msg(r.arena_measured > 0 && r.arena_measured == r.arena_bytes,
                  "measured %" PRIu64 " planned %" PRIu64, r.arena_measured, r.arena_bytes);
    /* and the next run needs no new plan: measured stays that plan's */
    ck_assert(sl_net_forward_backward(net, x, in, dy, y, dx) == SL_OK);
    sl_memory_report r2;
    ck_assert(sl_net_memory_report(net, in, SL_MODE_TRAIN, &r2) == SL_OK);
    ck_assert_uint_eq(r2.arena_bytes, r.arena_bytes);
    ck_assert_uint_eq(r2.arena_measured, r.arena_measured);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("inference");
    TCase *tc = tcase_create("inference");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_inference_bit_identical_with_and_without_planning);
    tcase_add_test(tc, test_mode_switch_resumes_training_bit_identically);
    tcase_add_test(tc, test_inference_chain_needs_two_buffers);
    tcase_add_test(tc, test_dot_graph_parses_and_has_a_node_per_layer);
    tcase_add_test(tc, test_memory_timeline_svg_parses_with_a_series_per_schedule);
    tcase_add_test(tc, test_memory_report_after_forward_backward_with_dx_reports_the_run);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
