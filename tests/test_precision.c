/*
 * test_precision.c — mixed precision (sl_net_set_precision, bf16
 * activations with float math, parameters and optimizer state):
 *  - exact: under every schedule (sqrt, k = 2, the least budget with its
 *    multi-level re-forwards, an operator-level budget) a bf16 step gives
 *    the loss, gradients, parameters and running statistics of the plain
 *    bf16 step bit for bit, over 3 SGD steps of ResNet-20 (also at 96²,
 *    where layers run a few images at a time to keep their float copies
 *    small), a ResNet-56 with dropout and GoogLeNet (concatenation), and one step of a GPT-2
 *    with dropout; the measured arena equals the plan;
 *  - right: a bf16 step is the float step within bf16's rounding (loss
 *    within 1e-2 relative, each gradient within a stated bound), and the
 *    stored activations really are bf16 (the step differs from float);
 *  - smaller: the planned activation arena of ResNet-152 (batch 16,
 *    224x224) and GPT-2 small (4 x 1024 tokens) in bf16 is at most 0.55x
 *    the float one under schedules none and sqrt (planning only);
 *  - errors: an unknown precision is refused and changes nothing.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "net/net.h"
#include "harness.h"

#define STEPS 3

typedef struct run {
    th_params params;
    float loss[STEPS];
    uint64_t total, arena;
} run;

/* STEPS SGD steps of model at res x res in `precision` under `schedule`
 * (budget 1: the least budget of that kind, read from the error it
 * gives); records losses, tensors and gradients, and checks the measured
 * arena against the plan. */
static float g_perturb;     /* train_cnn: each input value times 1 +- this */
static size_t g_copy_bytes; /* train_cnn, gpt2_step: net->f32_copy_bytes (0: the default) */
static int g_chunked;    /* steps of train_cnn's last program run a few images at a time */
static int g_native;     /* layers of train_cnn's last net that ran on bf16 themselves */
static int g_native_conv; /* of which convolutions */

static void train_cnn(const char *model, int res, int batch, sl_precision precision,
                      sl_schedule schedule, int least_kind, run *out)
{
    sl_context *ctx = th_context(42);
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, 3, schedule, &net) == SL_OK);
    th_build_model(net, model, res);
    ck_assert(sl_net_set_precision(net, precision) == SL_OK);
    ck_assert(sl_net_precision(net) == precision);
    net->f32_copy_bytes = g_copy_bytes;
    sl_optimizer_options o = sl_optimizer_sgd(0.01f, 0.9f, 1e-4f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    sl_shape shape = sl_shape_nchw(batch, 3, res, res);
    if (least_kind) {
        uint64_t least = th_least_budget(net, shape);
        ck_assert(sl_net_set_schedule(net, least_kind == 1 ? SL_SCHEDULE_BUDGET(least)
                                                           : SL_SCHEDULE_BUDGET_OPS(least)) ==
                  SL_OK);
    }
    th_train_steps(net, shape, STEPS, g_perturb, out->loss);
    sl_memory_report rep;
    ck_assert(sl_net_memory_report(net, shape, SL_MODE_TRAIN, &rep) == SL_OK);
    out->total = rep.total;
    out->arena = rep.arena_bytes;
    const sl_program *prog = &net->cache[SL_MODE_TRAIN].prog;
    g_chunked = 0;
    for (int i = 0; i < prog->n_steps; i++)
        g_chunked += prog->steps[i].f_chunk > 0;
    g_native = g_native_conv = 0;
    for (int i = 0; i < net->graph.n_nodes; i++) {
        int native = sl_shapes_native(&net->cache[SL_MODE_TRAIN].sh, i);
        g_native += native;
        g_native_conv += native && !strcmp(net->graph.nodes[i].layer->ops->type, "Conv2d");
    }
    th_params_capture(net, &out->params);
    sl_net_free(net);
    sl_context_free(ctx);
}

static void check_schedules(const char *model, int res, int batch)
{
    run plain, other;
    train_cnn(model, res, batch, SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &plain);
    int chunked = g_chunked, native = g_native, native_conv = g_native_conv;
    struct {
        sl_schedule s;
        int least;
        const char *name;
    } cases[] = {{SL_SCHEDULE_SQRT, 0, "sqrt"},
                 {SL_SCHEDULE_SEGMENTS(2), 0, "k=2"},
                 {SL_SCHEDULE_BUDGET(1), 1, "least budget"},
                 {SL_SCHEDULE_BUDGET_OPS(1), 2, "least operator-level budget"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Under SL_TEST_QUICK (the sanitizer run): every schedule on
         * ResNet-20, the deepest (the least operator-level budget) on the
         * larger models */
        if (getenv("SL_TEST_QUICK") && strcmp(model, "resnet20") != 0 && cases[i].least != 2)
            continue;
        train_cnn(model, res, batch, SL_PRECISION_BF16, cases[i].s, cases[i].least, &other);
        char what[96];
        snprintf(what, sizeof what, "%s bf16 %s", model, cases[i].name);
        ck_assert_msg(memcmp(plain.loss, other.loss, sizeof plain.loss) == 0, "%s: losses differ",
                      what);
        th_params_assert_identical(&plain.params, &other.params, what);
        ck_assert_msg(other.total < plain.total, "%s: planned %" PRIu64 " not below plain %" PRIu64,
                      what, other.total, plain.total);
        ck_assert_int_eq(g_native, native);
        printf("  %-34s planned %.2f MiB (none %.2f MiB), the same bits; %d steps in chunks "
               "(none: %d); %d layers on bf16 themselves\n", what, other.total / 1048576.0,
               plain.total / 1048576.0, g_chunked, chunked, g_native);
        th_params_free(&other.params);
    }
    th_params_free(&plain.params);
    g_chunked = chunked;
    g_native = native;
    g_native_conv = native_conv;
}

/* On a CPU with bf16 dot products convolutions run on bf16 themselves
 * through oneDNN, where that plans no more workspace than the float
 * copies (conv2d.c): not the stem (it reads the float input); on an AMX
 * machine 18 of the other 20. */
START_TEST(test_bf16_schedules_resnet20)
{
    check_schedules("resnet20", 32, 8);
    if (sl_cpu_has_bf16_dot() && sl_cpu_conv_onednn())
        ck_assert_msg(g_native_conv > 0 && g_native_conv <= 20, "%d convolutions on bf16",
                      g_native_conv);
    else
        printf("  (this CPU has no bf16 dot products: every convolution used float copies)\n");
}
END_TEST

/* BatchNorm, ReLU and the adds read and write bf16 themselves on the CPU
 * (sl_backend.bf16_kernels), widening each element as they read it and
 * rounding as they write it: the bits of the float-copies path, which the
 * same model with those kernels off runs. At 32² (whole tensors) and at
 * 96² (where the copies path runs them in chunks of rows and channels). */
static void check_bf16_kernels(int res, int batch)
{
    run on, off;
    train_cnn("resnet20", res, batch, SL_PRECISION_BF16, SL_SCHEDULE_SQRT, 0, &on);
    int native_on = g_native;
    sl_cpu_bf16_kernels_force(0);
    train_cnn("resnet20", res, batch, SL_PRECISION_BF16, SL_SCHEDULE_SQRT, 0, &off);
    int native_off = g_native;
    sl_cpu_bf16_kernels_force(1);
    char what[64];
    snprintf(what, sizeof what, "resnet20 %d² bf16 kernels against copies", res);
    ck_assert_msg(memcmp(on.loss, off.loss, sizeof on.loss) == 0, "%s: losses differ", what);
    th_params_assert_identical(&on.params, &off.params, what);
    /* ResNet-20: 19 BatchNorms, 19 ReLUs and 9 adds */
    ck_assert_msg(native_on >= native_off + 19 + 19 + 9, "%s: %d layers native, %d without", what,
                  native_on, native_off);
    printf("  %s: the same bits; %d layers on bf16 themselves (%d with the kernels off); "
           "planned %.2f and %.2f MiB\n", what, native_on, native_off, on.total / 1048576.0,
           off.total / 1048576.0);
    th_params_free(&on.params);
    th_params_free(&off.params);
}

START_TEST(test_bf16_kernels_give_the_copies_bits)
{
    check_bf16_kernels(32, 8);
    check_bf16_kernels(96, 16);
}
END_TEST

/* The float-copies path for every layer (oneDNN's convolutions and the
 * bf16 kernels off): what a backend without bf16 kernels runs; exact
 * under every schedule too. */
START_TEST(test_bf16_schedules_resnet20_copies)
{
    int gemm = sl_cpu_gemm_onednn(), conv = sl_cpu_conv_onednn();
    sl_cpu_kernels_force(gemm, 0);
    sl_cpu_bf16_kernels_force(0);
    check_schedules("resnet20", 32, 8);
    ck_assert_int_eq(g_native, 0);
    sl_cpu_bf16_kernels_force(1);
    sl_cpu_kernels_force(gemm, conv);
}
END_TEST

/* Large enough images that ReLU's and the adds' copies pass
 * SL_F32_COPY_BYTES, so those steps run a few images at a time (the bf16
 * kernels off, so that they take copies). */
START_TEST(test_bf16_schedules_resnet20_chunks)
{
    sl_cpu_bf16_kernels_force(0);
    check_schedules("resnet20", 96, 16);
    sl_cpu_bf16_kernels_force(1);
    ck_assert_msg(g_chunked > 0, "no step ran in chunks");
}
END_TEST

/* An MLP of four Linear layers (batch 256 of 64 features): the inner two
 * read and write bf16 activations only, so on a CPU with bf16 dot
 * products they run their GEMMs on bf16 (gemm_bf16); every schedule gives
 * plain bf16's bits, and bf16 stays near float. */
static void mlp_steps(sl_precision precision, sl_schedule schedule, run *out)
{
    enum { B = 256, F = 64, H = 192 };
    sl_context *ctx = th_context(31);
    sl_net *net = NULL;
    ck_assert(sl_sublinear(ctx, F, schedule, &net) == SL_OK);
    ck_assert_msg(sl_net_add(net, "fc1", sl_linear(F, H, 1)) == SL_OK, "%s", sl_last_error());
    ck_assert(sl_net_add(net, "act1", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "fc2", sl_linear(H, H, 1)) == SL_OK);
    ck_assert(sl_net_add(net, "act2", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "fc3", sl_linear(H, H, 0)) == SL_OK);
    ck_assert(sl_net_add(net, "act3", sl_relu()) == SL_OK);
    ck_assert(sl_net_add(net, "fc4", sl_linear(H, 10, 1)) == SL_OK);
    ck_assert(sl_net_set_precision(net, precision) == SL_OK);
    sl_optimizer_options o = sl_optimizer_sgd(0.05f, 0.9f, 0.0f, 0);
    ck_assert(sl_net_set_optimizer(net, &o) == SL_OK);
    th_train_steps(net, sl_shape_nchw(B, F, 1, 1), STEPS, 0.0f, out->loss);
    g_native = 0;
    for (int i = 0; i < net->graph.n_nodes; i++)
        g_native += sl_shapes_native(&net->cache[SL_MODE_TRAIN].sh, i) &&
                    !strcmp(net->graph.nodes[i].layer->ops->type, "Linear");
    th_params_capture(net, &out->params);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_bf16_mlp_linear)
{
    run plain, other, f32, copies;
    mlp_steps(SL_PRECISION_BF16, SL_SCHEDULE_NONE, &plain);
    int native = g_native;
    printf("  MLP bf16: %d of 4 Linear layers on bf16 GEMMs\n", native);
    ck_assert_int_eq(native, sl_cpu_has_bf16_dot() ? 2 : 0);
    sl_schedule cases[] = {SL_SCHEDULE_SQRT, SL_SCHEDULE_SEGMENTS(2)};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mlp_steps(SL_PRECISION_BF16, cases[i], &other);
        ck_assert_int_eq(g_native, native);
        ck_assert_msg(memcmp(plain.loss, other.loss, sizeof plain.loss) == 0, "MLP case %zu: "
                      "losses differ", i);
        th_params_assert_identical(&plain.params, &other.params, "MLP bf16");
        th_params_free(&other.params);
    }
    mlp_steps(SL_PRECISION_F32, SL_SCHEDULE_NONE, &f32);
    sl_cpu_bf16_kernels_force(0); /* every layer on float copies */
    mlp_steps(SL_PRECISION_BF16, SL_SCHEDULE_NONE, &copies);
    sl_cpu_bf16_kernels_force(1);
    ck_assert_int_eq(g_native, 0);
    for (int k = 0; k < STEPS; k++) {
        double rel = fabs((double)plain.loss[k] - f32.loss[k]) / fabs((double)f32.loss[k]);
        ck_assert_msg(rel < 1e-2, "step %d: bf16 loss %g, float %g", k, plain.loss[k], f32.loss[k]);
    }
    /* the last step's gradients from float's: on the bf16 GEMMs (weights
     * rounded to bf16 too) at most twice as far as on the float copies,
     * plus 1e-2 (about 5 % either way after three steps) */
    double worst = 0.0;
    for (int i = 0; i < f32.params.n; i++)
        if (f32.params.grad[i]) {
            size_t n = f32.params.count[i];
            double e = th_norm_rel(plain.params.grad[i], f32.params.grad[i], n);
            double ec = th_norm_rel(copies.params.grad[i], f32.params.grad[i], n);
            ck_assert_msg(e <= 2.0 * ec + 1e-2, "MLP tensor %d: bf16 gradient %.3g from the float "
                          "one, on float copies %.3g", i, e, ec);
            worst = e > worst ? e : worst;
        }
    printf("  MLP worst gradient distance from float: %.2e\n", worst);
    th_params_free(&plain.params);
    th_params_free(&f32.params);
    th_params_free(&copies.params);
}
END_TEST

/* Every layer that may run in chunks does so, as small as they go (a copy
 * limit of 1 byte): BatchNorm a channel at a time, ReLU and the adds a
 * row at a time. The same step as the whole batch's within float
 * rounding (the per-channel sums do not depend on the other channels),
 * and every schedule still gives plain's bits. */
START_TEST(test_bf16_resnet20_smallest_chunks)
{
    run whole, small;
    sl_cpu_bf16_kernels_force(0); /* BatchNorm, ReLU and the adds on copies */
    train_cnn("resnet20", 32, 8, SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &whole);
    ck_assert_int_eq(g_chunked, 0);
    g_copy_bytes = 1;
    check_schedules("resnet20", 32, 8);
    ck_assert_msg(g_chunked > 0, "no step ran in chunks");
    train_cnn("resnet20", 32, 8, SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &small);
    g_copy_bytes = 0;
    double worst = 0;
    for (int i = 0; i < whole.params.n; i++) {
        double e = th_norm_rel(small.params.data[i], whole.params.data[i], whole.params.count[i]);
        worst = e > worst ? e : worst;
    }
    printf("  ResNet-20 bf16 in the smallest chunks: %d steps in chunks; losses %.7f %.7f %.7f "
           "(whole batch %.7f %.7f %.7f); parameters within %.2e\n", g_chunked, small.loss[0],
           small.loss[1], small.loss[2], whole.loss[0], whole.loss[1], whole.loss[2], worst);
    for (int k = 0; k < STEPS; k++)
        ck_assert_msg(fabs((double)small.loss[k] - whole.loss[k]) <= 1e-5 * fabs(whole.loss[k]),
                      "step %d: loss %.9g in chunks, %.9g whole", k, small.loss[k], whole.loss[k]);
    ck_assert_msg(worst < 1e-4, "parameters %.3g from the whole-batch run's", worst);
    th_params_free(&whole.params);
    th_params_free(&small.params);
    sl_cpu_bf16_kernels_force(1);
}
END_TEST

START_TEST(test_bf16_schedules_resnet56_dropout) { check_schedules("resnet56-dropout", 32, 4); }
END_TEST

START_TEST(test_bf16_schedules_googlenet) { check_schedules("googlenet", 32, 4); }
END_TEST

/* The bf16 run against the float run. This network's gradients at init
 * on random data are ill-conditioned (BatchNorm's backward removes most
 * of each gradient; what is left is small next to what was removed), so
 * the bf16 gradients are held to the conditioning of the float run
 * itself: no further from it than the float run with its input moved by
 * bf16's half-ulp (2^-9 relative) is, with a factor of 3. The losses
 * agree within 1e-2 relative and differ (something was rounded), and the
 * bf16 arena is at most 0.6x the float one. */
START_TEST(test_bf16_against_f32_resnet20)
{
    run f, h, moved;
    train_cnn("resnet20", 32, 8, SL_PRECISION_F32, SL_SCHEDULE_NONE, 0, &f);
    train_cnn("resnet20", 32, 8, SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &h);
    g_perturb = 1.0f / 512;
    train_cnn("resnet20", 32, 8, SL_PRECISION_F32, SL_SCHEDULE_NONE, 0, &moved);
    g_perturb = 0;
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs((double)h.loss[s] - f.loss[s]) / fabs((double)f.loss[s]);
        printf("  step %d loss f32 %.6f bf16 %.6f (rel %.2e)\n", s, f.loss[s], h.loss[s], rel);
        ck_assert_msg(rel < 1e-2, "step %d: bf16 loss %g vs f32 %g", s, h.loss[s], f.loss[s]);
    }
    ck_assert_msg(memcmp(f.loss, h.loss, sizeof f.loss) != 0,
                  "bf16 gives the float losses bit for bit: nothing was rounded");
    double worst_h = 0, worst_m = 0;
    ck_assert_int_eq(f.params.n, h.params.n);
    for (int i = 0; i < f.params.n; i++) {
        if (!f.params.grad[i])
            continue;
        double eh = th_norm_rel(h.params.grad[i], f.params.grad[i], f.params.count[i]);
        double em = th_norm_rel(moved.params.grad[i], f.params.grad[i], f.params.count[i]);
        worst_h = eh > worst_h ? eh : worst_h;
        worst_m = em > worst_m ? em : worst_m;
    }
    printf("  worst gradient distance from float: bf16 %.3f, float with its input moved by "
           "2^-9 %.3f\n", worst_h, worst_m);
    ck_assert_msg(worst_m > 0, "the moved input changed no gradient");
    ck_assert_msg(worst_h <= 3 * worst_m, "bf16 gradients %.3g from the float ones, more than 3x "
                  "the float run's own sensitivity %.3g", worst_h, worst_m);
    double ratio = (double)h.arena / (double)f.arena;
    printf("  arena: bf16 %.2f MiB, f32 %.2f MiB (%.3f)\n", h.arena / 1048576.0,
           f.arena / 1048576.0, ratio);
    ck_assert_msg(ratio <= 0.6, "bf16 arena %.3f of the float one", ratio);
    th_params_free(&f.params);
    th_params_free(&h.params);
    th_params_free(&moved.params);
}
END_TEST

#define GB 2
#define GT 32

/* One GPT-2 step with dropout in `precision` under `schedule` (least 1 or
 * 2: the least budget of that kind). */
static int g_attn_chunked;  /* gpt2_step: attention steps that ran in chunks of images */
static int g_native_conv1d; /* gpt2_step: Conv1D layers on bf16 themselves (bf16 GEMMs) */
static int g_native_ln_gelu; /* gpt2_step: LayerNorm and GELU layers on bf16 themselves */
static int g_native_attn;    /* gpt2_step: attention layers on bf16 themselves */
static int g_head_bf16;      /* gpt2_step: the LM head's products on bf16 */

static void gpt2_step(sl_precision precision, sl_schedule schedule, int least, th_params *out,
                      float *loss)
{
    sl_context *ctx = th_context(23);
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 6;
    c.embd = 32;
    c.heads = 4;
    c.vocab = 256;
    c.context = 64;
    c.dropout = 0.1f;
    c.flash = 1;
    sl_net *net = th_gpt2(ctx, &c, schedule);
    ck_assert(sl_net_set_precision(net, precision) == SL_OK);
    net->f32_copy_bytes = g_copy_bytes;
    if (least) {
        uint64_t l = th_least_budget(net, sl_shape_seq(GB, GT, 1));
        ck_assert(sl_net_set_schedule(net, least == 1 ? SL_SCHEDULE_BUDGET(l)
                                                      : SL_SCHEDULE_BUDGET_OPS(l)) == SL_OK);
    }
    int32_t ids[GB * GT], targets[GB * GT];
    for (int i = 0; i < GB * GT; i++) {
        ids[i] = (i * 37 + 5) % c.vocab;
        targets[i] = (i * 11 + 3) % c.vocab;
    }
    th_token_step_as_planned(net, ids, targets, GB, GT, loss);
    const sl_program *prog = &net->cache[SL_MODE_TRAIN].prog;
    g_attn_chunked = 0;
    for (int i = 0; i < prog->n_steps; i++)
        if (prog->steps[i].f_chunk > 0 &&
            strcmp(net->graph.nodes[prog->steps[i].node].layer->ops->type, "CausalAttention") == 0)
            g_attn_chunked++;
    g_native_conv1d = g_native_ln_gelu = g_native_attn = 0;
    g_head_bf16 = net->cache[SL_MODE_TRAIN].sh.head_bf16;
    for (int i = 0; i < net->graph.n_nodes; i++) {
        const char *type = net->graph.nodes[i].layer->ops->type;
        int native = sl_shapes_native(&net->cache[SL_MODE_TRAIN].sh, i);
        g_native_conv1d += native && !strcmp(type, "Conv1D");
        g_native_ln_gelu += native && (!strcmp(type, "LayerNorm") || !strcmp(type, "GELU"));
        g_native_attn += native && !strcmp(type, "CausalAttention");
    }
    th_params_capture(net, out);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_bf16_gpt2)
{
    th_params ref, f32, got;
    float ref_loss, f32_loss, loss;
    gpt2_step(SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &ref, &ref_loss);
    int native = g_native_conv1d;
    /* on a CPU with bf16 dot products a Conv1D runs its GEMMs on bf16
     * (oneDNN's matmul) where their workspace is at most the float copies
     * they replace: at this tiny width not all do (oneDNN's packing
     * scratch is a few KiB); elsewhere all run on float copies */
    printf("  GPT-2 bf16: %d of 24 Conv1D layers on bf16 GEMMs, the head's products %s\n",
           native, g_head_bf16 ? "on bf16" : "in float");
    if (sl_cpu_has_bf16_dot())
        ck_assert_int_gt(native, 0);
    else
        ck_assert_int_eq(native, 0);
    /* the head on bf16 products wherever the GEMMs have them */
    ck_assert_int_eq(g_head_bf16, sl_cpu_has_bf16_dot());
    struct {
        sl_schedule s;
        int least;
        const char *name;
    } cases[] = {{SL_SCHEDULE_SQRT, 0, "sqrt"},
                 {SL_SCHEDULE_SEGMENTS(3), 0, "segments:3"},
                 {SL_SCHEDULE_BUDGET(1), 1, "least budget"},
                 {SL_SCHEDULE_BUDGET_OPS(1), 2, "least ops budget"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gpt2_step(SL_PRECISION_BF16, cases[i].s, cases[i].least, &got, &loss);
        ck_assert_int_eq(g_native_conv1d, native);
        ck_assert_msg(loss == ref_loss, "%s: loss %.9g vs %.9g", cases[i].name, loss, ref_loss);
        th_params_assert_identical(&ref, &got, cases[i].name);
        th_params_free(&got);
    }
    gpt2_step(SL_PRECISION_F32, SL_SCHEDULE_NONE, 0, &f32, &f32_loss);
    double rel = fabs((double)ref_loss - f32_loss) / fabs((double)f32_loss);
    printf("  GPT-2 loss f32 %.6f bf16 %.6f (rel %.2e)\n", f32_loss, ref_loss, rel);
    ck_assert_msg(rel < 1e-2, "bf16 loss %g vs f32 %g", ref_loss, f32_loss);
    ck_assert_msg(ref_loss != f32_loss, "bf16 gives the float loss bit for bit");
    double worst = 0;
    for (int i = 0; i < f32.n; i++)
        if (f32.grad[i]) {
            double e = th_norm_rel(ref.grad[i], f32.grad[i], f32.count[i]);
            ck_assert_msg(e < 0.1, "tensor %d: gradient %.3g from the float one", i, e);
            if (e > worst)
                worst = e;
        }
    printf("  GPT-2 worst gradient distance from float: %.2e\n", worst);
    th_params_free(&ref);
    th_params_free(&f32);
}
END_TEST

/* LayerNorm, GELU, the residual adds and attention (with dropout) on
 * their bf16 kernels give the float copies' bits (the GEMMs left on copies
 * for the comparison): the same loss and gradients, 12 LayerNorm, 6 GELU
 * and 6 attention layers native. */
START_TEST(test_bf16_gpt2_kernels_give_the_copies_bits)
{
    th_params kern, copies;
    float kern_loss, copies_loss;
    sl_cpu_bf16_kernels_mask(SL_BF16_ADD | SL_BF16_LAYERNORM | SL_BF16_GELU | SL_BF16_ATTENTION);
    gpt2_step(SL_PRECISION_BF16, SL_SCHEDULE_SQRT, 0, &kern, &kern_loss);
    int native = g_native_ln_gelu, native_attn = g_native_attn;
    sl_cpu_bf16_kernels_mask(~0u);
    sl_cpu_bf16_kernels_force(0);
    gpt2_step(SL_PRECISION_BF16, SL_SCHEDULE_SQRT, 0, &copies, &copies_loss);
    sl_cpu_bf16_kernels_force(1);
    ck_assert_int_eq(g_native_ln_gelu, 0);
    ck_assert_int_eq(g_native_attn, 0);
    printf("  GPT-2 bf16: LayerNorm, GELU (%d layers) and attention (%d) on their bf16 kernels: "
           "loss %.7f, on copies %.7f\n", native, native_attn, kern_loss, copies_loss);
    ck_assert_int_eq(native, 12 + 6); /* ln_f writes the head's float input */
    ck_assert_int_eq(native_attn, 6);
    ck_assert_msg(kern_loss == copies_loss, "loss %.9g on the kernels, %.9g on copies", kern_loss,
                  copies_loss);
    th_params_assert_identical(&kern, &copies, "GPT-2 bf16 kernels against copies");
    th_params_free(&kern);
    th_params_free(&copies);
}
END_TEST

/* Every layer that may run in chunks does so, as small as they go (a copy
 * limit of 1 byte: attention a sequence a call, the others a row):
 * attention draws its dropout mask once for the batch and indexes it from
 * the call's first image, so the step
 * is the whole-batch step (the same loss and gradients within GEMM
 * rounding: the GEMMs see fewer rows); and every schedule still gives
 * plain's bits. */
START_TEST(test_bf16_gpt2_chunks)
{
    th_params whole, ref, got;
    float whole_loss, ref_loss, loss;
    /* attention and Conv1D on copies, in chunks; the head in float (its
     * bf16 products would round the chunks' GEMM differences in h to
     * bf16's unit, test_bf16_gpt2 holds them to float) */
    sl_cpu_bf16_kernels_mask(~(unsigned)(SL_BF16_ATTENTION | SL_BF16_GEMM));
    gpt2_step(SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &whole, &whole_loss);
    ck_assert_int_eq(g_attn_chunked, 0);
    g_copy_bytes = 1;
    gpt2_step(SL_PRECISION_BF16, SL_SCHEDULE_NONE, 0, &ref, &ref_loss);
    ck_assert_msg(g_attn_chunked > 0, "no attention step ran in chunks");
    printf("  GPT-2 bf16 in the smallest chunks: %d attention steps in chunks; loss %.7f, whole batch "
           "%.7f\n", g_attn_chunked, ref_loss, whole_loss);
    ck_assert_msg(fabs((double)ref_loss - whole_loss) <= 1e-5 * fabs((double)whole_loss),
                  "loss %.9g in chunks, %.9g whole", ref_loss, whole_loss);
    double worst = 0;
    for (int i = 0; i < whole.n; i++)
        if (whole.grad[i]) {
            double e = th_norm_rel(ref.grad[i], whole.grad[i], whole.count[i]);
            worst = e > worst ? e : worst;
        }
    printf("  worst gradient distance, chunks to whole: %.2e\n", worst);
    ck_assert_msg(worst < 1e-3, "gradients %.3g from the whole-batch step's", worst);
    sl_schedule s[2] = {SL_SCHEDULE_SQRT, SL_SCHEDULE_BUDGET(1)};
    for (int k = 0; k < 2; k++) {
        gpt2_step(SL_PRECISION_BF16, s[k], k, &got, &loss);
        ck_assert_msg(loss == ref_loss, "schedule %d: loss %.9g vs %.9g", k, loss, ref_loss);
        th_params_assert_identical(&ref, &got, k ? "least budget, in chunks" : "sqrt, in chunks");
        th_params_free(&got);
    }
    g_copy_bytes = 0;
    sl_cpu_bf16_kernels_mask(~0u);
    th_params_free(&whole);
    th_params_free(&ref);
}
END_TEST

/* Planned arena of a network under a schedule and precision, no kernels. */
static uint64_t planned_arena(sl_net *net, sl_shape in, sl_schedule s, sl_precision p)
{
    ck_assert(sl_net_set_schedule(net, s) == SL_OK);
    ck_assert(sl_net_set_precision(net, p) == SL_OK);
    sl_memory_report rep;
    ck_assert_msg(sl_net_memory_report(net, in, SL_MODE_TRAIN, &rep) == SL_OK, "%s",
                  sl_last_error());
    return rep.arena_bytes;
}

/* At most 0.55x under none and sqrt (the float copies weigh most in the
 * small arenas of sqrt: layers run in chunks to keep them within 16 MiB). */
static void check_arena_ratio(sl_net *net, sl_shape in, const char *what)
{
    sl_schedule s[2] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT};
    const char *names[2] = {"none", "sqrt"};
    const double bound[2] = {0.55, 0.55};
    for (int i = 0; i < 2; i++) {
        uint64_t f = planned_arena(net, in, s[i], SL_PRECISION_F32);
        uint64_t h = planned_arena(net, in, s[i], SL_PRECISION_BF16);
        double ratio = (double)h / (double)f;
        printf("  %s %s: arena f32 %.1f MiB, bf16 %.1f MiB (%.3f)\n", what, names[i],
               f / 1048576.0, h / 1048576.0, ratio);
        ck_assert_msg(ratio <= bound[i], "%s %s: bf16 arena %.3f of the float one", what,
                      names[i], ratio);
    }
}

START_TEST(test_bf16_arena_resnet152)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_model_build(net, "resnet152", 1000, 224) == SL_OK);
    check_arena_ratio(net, sl_shape_nchw(16, 3, 224, 224), "ResNet-152 b16");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_bf16_arena_gpt2_small)
{
    sl_context *ctx = th_context(1);
    sl_gpt2_config c = sl_gpt2_defaults();
    sl_net *net = th_gpt2(ctx, &c, SL_SCHEDULE_NONE);
    check_arena_ratio(net, sl_shape_seq(4, 1024, 1), "GPT-2 small 4x1024");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_precision_errors)
{
    sl_context *ctx = th_context(1);
    sl_net *net = NULL;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    ck_assert(sl_net_set_precision(net, SL_PRECISION_BF16) == SL_OK);
    th_assert_error(sl_net_set_precision(net, (sl_precision)7), SL_ERR_INVALID_ARG,
                    "unknown precision 7");
    ck_assert(sl_net_precision(net) == SL_PRECISION_BF16);
    th_assert_error(sl_net_set_precision(NULL, SL_PRECISION_F32), SL_ERR_INVALID_ARG, "NULL");
    ck_assert(sl_net_precision(NULL) == SL_PRECISION_F32);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("precision");
    TCase *tc = tcase_create("bf16");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_precision_errors);
    tcase_add_test(tc, test_bf16_against_f32_resnet20);
    tcase_add_test(tc, test_bf16_schedules_resnet20);
    tcase_add_test(tc, test_bf16_schedules_resnet20_copies);
    tcase_add_test(tc, test_bf16_kernels_give_the_copies_bits);
    tcase_add_test(tc, test_bf16_schedules_resnet20_chunks);
    tcase_add_test(tc, test_bf16_resnet20_smallest_chunks);
    tcase_add_test(tc, test_bf16_schedules_resnet56_dropout);
    tcase_add_test(tc, test_bf16_schedules_googlenet);
    tcase_add_test(tc, test_bf16_gpt2);
    tcase_add_test(tc, test_bf16_mlp_linear);
    tcase_add_test(tc, test_bf16_gpt2_kernels_give_the_copies_bits);
    tcase_add_test(tc, test_bf16_gpt2_chunks);
    tcase_add_test(tc, test_bf16_arena_resnet152);
    tcase_add_test(tc, test_bf16_arena_gpt2_small);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
