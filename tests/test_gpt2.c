/*
 * test_gpt2.c — GPT-2 (sl_model_gpt2) end to end on a small shape
 * (L = 2, C = 64, 4 heads, V = 512, T = 32):
 *  - one training step (logits, loss, every parameter's gradient) against
 *    GPT-2's math in plain PyTorch (tests/gpt2_reference.py) in float64:
 *    no further from float64 than PyTorch's own float32 run, within a
 *    factor for summation order;
 *  - every schedule (sqrt, segments, budget with multi-level, ops) gives
 *    the plain run's gradients bit for bit, with dropout on;
 *  - flash attention and the chunked head against plain attention and
 *    the unfused head;
 *  - a few AdamW steps on a repeating text lower the loss.
 */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/pipeline.h"
#include "harness.h"
#include "net/net.h"

#define B 2
#define T 32

static char g_python[512];
static char g_script[512];

static sl_gpt2_config small_config(float dropout, int flash)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 2;
    c.embd = 64;
    c.heads = 4;
    c.vocab = 512;
    c.context = 64;
    c.dropout = dropout;
    c.flash = flash;
    return c;
}

/* Moves LayerNorm weights and every bias away from their 1 / 0 init, so
 * that each gradient path is exercised. */
static void perturb(sl_net *net, uint64_t seed)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        if (p.ndim != 1)
            continue;
        float *noise = malloc(p.count * sizeof(float));
        th_fill_normal(noise, p.count, seed + (uint64_t)i, 0.1f);
        for (size_t k = 0; k < p.count; k++)
            p.data[k] += noise[k];
        free(noise);
    }
}

static void fill_tokens(int32_t *ids, int32_t *targets, int vocab, uint64_t seed, int ignore_some)
{
    th_rng r = {seed, 1, 0};
    for (int i = 0; i < B * T; i++) {
        ids[i] = th_pick(&r, vocab);
        targets[i] = ignore_some && i % 7 == 3 ? SL_GPT2_IGNORE_INDEX : th_pick(&r, vocab);
    }
}

static void write_floats(const char *dir, const char *name, const float *x, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    ck_assert(fwrite(x, sizeof(float), n, f) == n);
    fclose(f);
}

static double *read_ref(const char *dir, const char *tag, const char *key, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ref%s.%s.bin", dir, tag, key);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "missing %s", path);
    double *v = malloc(n * sizeof(double));
    ck_assert(v && fread(v, sizeof(double), n, f) == n);
    fclose(f);
    return v;
}

/* max |a - ref| / max |ref|. */
static double rel_err_f(const float *a, const double *ref, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return m > 0 ? e / m : e;
}

static double rel_err_d(const double *a, const double *ref, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return m > 0 ? e / m : e;
}

/* Ours may be up to this many times further from float64 than PyTorch's
 * float32 is: both are float32 computations whose sums run in different
 * orders; a wrong gradient is off by orders of magnitude more. The floor
 * covers tensors PyTorch's float32 gets almost exactly. */
#define FACTOR 4.0
#define FLOOR 2e-6

/* tag: PyTorch's precision compared with ("32": float32; "bf16": autocast's
 * bfloat16, whose floor is bf16's half-ulp 2^-9 instead). */
static void compare(const char *tag, const char *what, double ours, double torch_err)
{
    double floor = strcmp(tag, "bf16") == 0 ? 1.0 / 512 : FLOOR;
    printf("  %-4s %-40s ours %.3g  torch %s %.3g\n", tag, what, ours, tag, torch_err);
    ck_assert_msg(ours <= FACTOR * torch_err + floor, "%s %s: %.3g from float64, PyTorch %.3g",
                  tag, what, ours, torch_err);
}

/* The loss and every parameter's gradient of net's last step against
 * float64, beside PyTorch's in precision tag (compare). */
static void compare_step(sl_net *net, const char *dir, const char *tag, double loss)
{
    double *l64 = read_ref(dir, "64", "loss", 1), *lt = read_ref(dir, tag, "loss", 1);
    compare(tag, "loss", rel_err_d(&loss, l64, 1), rel_err_d(lt, l64, 1));
    free(l64);
    free(lt);
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        char key[300];
        snprintf(key, sizeof key, "grad.%s", p.name);
        double *g64 = read_ref(dir, "64", key, p.count), *gt = read_ref(dir, tag, key, p.count);
        compare(tag, key, rel_err_f(p.grad, g64, p.count), rel_err_d(gt, g64, p.count));
        free(g64);
        free(gt);
    }
}

START_TEST(test_against_pytorch)
{
    if (access(g_python, X_OK) != 0) {
        printf("SKIPPED: no %s\n", g_python);
        return;
    }
    char check[1100];
    snprintf(check, sizeof check, "'%s' -c 'import torch, numpy' >/dev/null 2>&1", g_python);
    if (system(check) != 0) {
        printf("SKIPPED: python3-torch not importable (%s)\n", g_python);
        return;
    }
    sl_context *ctx = th_context(21);
    sl_gpt2_config cfg = small_config(0.0f, 1);
    sl_net *net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    perturb(net, 77);
    int32_t ids[B * T], targets[B * T];
    fill_tokens(ids, targets, cfg.vocab, 5, 1);
    char dir[] = "/tmp/sl_gpt2_XXXXXX";
    ck_assert(mkdtemp(dir));
    char path[1024];
    snprintf(path, sizeof path, "%s/case.txt", dir);
    FILE *m = fopen(path, "w");
    ck_assert(m);
    fprintf(m, "config %d %d %d %d %d %d %d %.9g\n", cfg.layers, cfg.embd, cfg.heads, cfg.vocab,
            cfg.context, B, T, cfg.ln_eps);
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        fprintf(m, "param %s", p.name);
        for (int d = 0; d < p.ndim; d++)
            fprintf(m, " %d", p.dims[d]);
        fprintf(m, "\n");
        write_floats(dir, p.name, p.data, p.count);
    }
    fclose(m);
    write_floats(dir, "ids", (const float *)(const void *)ids, B * T);
    write_floats(dir, "targets", (const float *)(const void *)targets, B * T);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' 2>&1", g_python, g_script, dir);
    ck_assert_msg(system(cmd) == 0, "gpt2_reference.py failed");

    sl_step_result r;
    ck_assert_msg(sl_net_compute_gradients_tokens(net, ids, targets, B, T, &r) == SL_OK, "%s",
                  sl_last_error());
    compare_step(net, dir, "32", r.loss);
    size_t nl = (size_t)B * T * cfg.vocab;
    float *logits = malloc(nl * sizeof(float));
    ck_assert(sl_net_predict_tokens(net, ids, B, T, logits) == SL_OK);
    double *o64 = read_ref(dir, "64", "logits", nl), *o32 = read_ref(dir, "32", "logits", nl);
    compare("32", "logits", rel_err_f(logits, o64, nl), rel_err_d(o32, o64, nl));
    free(o64);
    free(o32);
    free(logits);

    /* Mixed precision against torch.autocast's bfloat16 on the same
     * weights: both round to bf16 (ours the activations, autocast the
     * matmuls' operands and outputs), so each is as far from float64 as
     * bf16's 8 bits make it; ours within a factor of autocast's distance,
     * and the losses within 1e-2 of each other. */
    ck_assert(sl_net_set_precision(net, SL_PRECISION_BF16) == SL_OK);
    ck_assert_msg(sl_net_compute_gradients_tokens(net, ids, targets, B, T, &r) == SL_OK, "%s",
                  sl_last_error());
    double *lbf = read_ref(dir, "bf16", "loss", 1);
    printf("  bf16 loss: ours %.6f, autocast %.6f\n", r.loss, *lbf);
    ck_assert_msg(fabs(r.loss - *lbf) <= 1e-2 * fabs(*lbf), "bf16 loss %.6g, autocast %.6g",
                  r.loss, *lbf);
    free(lbf);
    compare_step(net, dir, "bf16", r.loss);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* The gradients of one step under `schedule`, with dropout on. */
static void step_params(sl_schedule schedule, int ops_floor, th_params *out, float *loss,
                        int *forwards)
{
    sl_context *ctx = th_context(23);
    sl_gpt2_config c = small_config(0.1f, 1);
    c.layers = 8; /* enough units for the least budget to nest */
    c.embd = 32;
    sl_net *net = th_gpt2(ctx, &c, schedule);
    int32_t ids[B * T], targets[B * T];
    fill_tokens(ids, targets, 512, 9, 1);
    if (ops_floor) { /* the least budget of this kind: multi-level */
        sl_shape in = sl_shape_seq(B, T, 1);
        uint64_t least = th_least_budget(net, in);
        ck_assert(sl_net_set_schedule(net, ops_floor == 1 ? SL_SCHEDULE_BUDGET(least)
                                                           : SL_SCHEDULE_BUDGET_OPS(least)) == SL_OK);
    }
    sl_step_result r;
    ck_assert_msg(sl_net_compute_gradients_tokens(net, ids, targets, B, T, &r) == SL_OK, "%s",
                  sl_last_error());
    *loss = r.loss;
    *forwards = th_most_forwards(net);
    th_params_capture(net, out);
    sl_net_free(net);
    sl_context_free(ctx);
}

START_TEST(test_schedules_bit_identical)
{
    th_params ref;
    float ref_loss;
    int fw;
    step_params(SL_SCHEDULE_NONE, 0, &ref, &ref_loss, &fw);
    struct {
        sl_schedule s;
        int floor;
        const char *name;
    } cases[] = {{SL_SCHEDULE_SQRT, 0, "sqrt"},
                 {SL_SCHEDULE_SEGMENTS(2), 0, "segments:2"},
                 {SL_SCHEDULE_BUDGET(1), 1, "budget at the floor"},
                 {SL_SCHEDULE_BUDGET_OPS(1), 2, "ops at the floor"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        th_params got;
        float loss;
        step_params(cases[i].s, cases[i].floor, &got, &loss, &fw);
        printf("  %s: most forwards of a node %d\n", cases[i].name, fw);
        ck_assert_msg(loss == ref_loss, "%s: loss %.9g vs %.9g", cases[i].name, loss, ref_loss);
        th_params_assert_identical(&ref, &got, cases[i].name);
        if (cases[i].floor == 1)
            ck_assert_msg(fw > 2, "the least budget should re-forward inside re-forwards");
        th_params_free(&got);
    }
    th_params_free(&ref);
}
END_TEST

/* Flash attention and the chunked head against plain attention and the
 * unfused head: the same step within float rounding. */
START_TEST(test_flash_and_chunks)
{
    sl_context *ctx = th_context(25);
    sl_gpt2_config flash = small_config(0.0f, 1), plain = small_config(0.0f, 0);
    sl_net *a = th_gpt2(ctx, &flash, SL_SCHEDULE_NONE);
    sl_net *b = th_gpt2(ctx, &plain, SL_SCHEDULE_NONE);
    ck_assert(sl_net_set_lm_head(a, "transformer.wte.weight", SL_GPT2_IGNORE_INDEX, 5) == SL_OK);
    ck_assert(sl_net_set_lm_head(b, "transformer.wte.weight", SL_GPT2_IGNORE_INDEX, B * T) == SL_OK);
    int n = th_param_count(a);
    for (int i = 0; i < n; i++) {
        sl_param_info pa, pb;
        ck_assert(sl_net_param(a, i, &pa) == SL_OK && sl_net_param(b, i, &pb) == SL_OK);
        memcpy(pb.data, pa.data, pa.count * sizeof(float));
    }
    int32_t ids[B * T], targets[B * T];
    fill_tokens(ids, targets, 512, 11, 0);
    sl_step_result ra, rb;
    ck_assert(sl_net_compute_gradients_tokens(a, ids, targets, B, T, &ra) == SL_OK);
    ck_assert(sl_net_compute_gradients_tokens(b, ids, targets, B, T, &rb) == SL_OK);
    ck_assert(fabsf(ra.loss - rb.loss) <= 1e-5f * rb.loss);
    for (int i = 0; i < n; i++) {
        sl_param_info pa, pb;
        sl_net_param(a, i, &pa);
        sl_net_param(b, i, &pb);
        double e = 0, mx = 0;
        for (size_t k = 0; k < pa.count; k++) {
            e = fmax(e, fabs((double)pa.grad[k] - pb.grad[k]));
            mx = fmax(mx, fabs((double)pb.grad[k]));
        }
        ck_assert_msg(e <= 1e-5 * mx, "%s: flash+chunks vs plain %.3g of %.3g", pa.name, e, mx);
    }
    sl_net_free(a);
    sl_net_free(b);
    sl_context_free(ctx);
}
END_TEST

/* A repeating sequence is learnt: AdamW lowers the loss a lot. */
START_TEST(test_learns)
{
    sl_context *ctx = th_context(27);
    sl_gpt2_config c = small_config(0.0f, 1);
    sl_net *net = th_gpt2(ctx, &c, SL_SCHEDULE_SQRT);
    sl_optimizer_options opt = sl_optimizer_adamw(3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (i * 5) % 23;
        targets[i] = ((i + 1) * 5) % 23;
    }
    sl_step_result r;
    float first = 0;
    for (int s = 0; s < 30; s++) {
        ck_assert(sl_net_train_step_tokens(net, ids, targets, B, T, &r) == SL_OK);
        if (s == 0)
            first = r.loss;
    }
    printf("  loss %.3f -> %.3f\n", first, r.loss);
    ck_assert_msg(r.loss < 0.25f * first, "loss %.3f -> %.3f", first, r.loss);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* What a device may record of a GPT-2 training step (CUDA graphs,
 * sl_program_graph_ranges, planned on the CPU like any plan): without
 * dropout, attention queues the same work every run, so every block's
 * forward, re-forward and backward steps lie in ranges, and the steps
 * left out are the token embedding's (its backward buckets the run's
 * tokens on the host; the LM head is the loss step, never a range's);
 * with dropout, on a backend that does not offset its counters on the
 * device (the CPU's ranges, as planned here), no attention or dropout
 * step is in a range. Flash and plain attention, schedules none and
 * sqrt. */
START_TEST(test_graph_ranges_cover_the_blocks_without_dropout)
{
    sl_schedule sched[2] = {SL_SCHEDULE_NONE, SL_SCHEDULE_SQRT};
    for (int drop = 0; drop < 2; drop++)
        for (int flash = 0; flash < 2; flash++)
            for (int k = 0; k < 2; k++) {
                sl_context *ctx = th_context(5);
                sl_gpt2_config cfg = small_config(drop ? 0.1f : 0.0f, flash);
                sl_net *net = th_gpt2(ctx, &cfg, sched[k]);
                int32_t ids[B * T], targets[B * T];
                fill_tokens(ids, targets, cfg.vocab, 9, 1);
                sl_step_result r;
                ck_assert_msg(sl_net_compute_gradients_tokens(net, ids, targets, B, T, &r) ==
                                  SL_OK,
                              "%s", sl_last_error());
                const sl_run_cache *c = &net->cache[SL_MODE_TRAIN];
                ck_assert(c->valid);
                const sl_program *p = &c->prog;
                char *in = calloc((size_t)p->n_steps, 1);
                ck_assert_ptr_nonnull(in);
                for (int g = 0; g < c->graphs.n; g++)
                    for (int s = c->graphs.lo[g]; s < c->graphs.hi[g]; s++)
                        in[s] = 1;
                int attention = 0, attention_in = 0, outside = 0, embedding = 0, bad = 0;
                char what[96] = "";
                for (int s = 0; s < p->n_steps; s++) {
                    const sl_step *st = &p->steps[s];
                    if (!sl_step_runs_layer(st))
                        continue;
                    const char *type = net->graph.nodes[st->node].layer->ops->type;
                    int is_attention = strcmp(type, "CausalAttention") == 0;
                    int random = is_attention || strcmp(type, "Dropout") == 0;
                    int is_embedding = strcmp(type, "Embedding") == 0;
                    attention += is_attention;
                    attention_in += is_attention && in[s];
                    embedding += is_embedding;
                    outside += !in[s];
                    /* the embedding never in a range; with dropout a step
                     * between two drawing ones may stand alone (a range is
                     * two steps at least) */
                    int wrong = (is_embedding && in[s]) ||
                                (drop ? random && in[s] : !in[s] && !is_embedding);
                    if (wrong && !bad) {
                        bad = 1;
                        snprintf(what, sizeof what, "step %d (%s) %s", s, type,
                                 in[s] ? "in a range" : "left out of the ranges");
                    }
                }
                ck_assert_msg(!bad, "dropout %d flash %d schedule %d: %s", drop, flash, k, what);
                ck_assert_int_gt(attention, 0);
                ck_assert_int_gt(embedding, 0);
                if (!drop) /* exactly the embedding's steps stay out (the head is the loss) */
                    ck_assert_int_eq(outside, embedding);
                if (drop)
                    ck_assert_int_eq(attention_in, 0);
                else
                    ck_assert_int_eq(attention_in, attention);
                if (!drop && !flash)
                    printf("gpt2 %s: %d graph ranges, %d layer steps outside them\n",
                           k ? "sqrt" : "none", c->graphs.n, outside);
                free(in);
                sl_net_free(net);
                sl_context_free(ctx);
            }
}
END_TEST

START_TEST(test_errors)
{
    sl_context *ctx = th_context(29);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 3, &net) == SL_OK);
    sl_gpt2_config c = small_config(0.0f, 1);
    th_assert_error(sl_model_gpt2(net, &c), SL_ERR_STATE, "1 input channel");
    sl_net_free(net);
    ck_assert(sl_sequential(ctx, 1, &net) == SL_OK);
    c.heads = 5;
    th_assert_error(sl_model_gpt2(net, &c), SL_ERR_INVALID_ARG, "multiple of heads");
    ck_assert_int_eq(sl_net_layer_count(net), 0);
    c = small_config(0.0f, 1);
    ck_assert(sl_model_gpt2(net, &c) == SL_OK);
    int32_t ids[65] = {0}, targets[65] = {0}; /* context + 1 */
    sl_step_result r;
    th_assert_error(sl_net_compute_gradients_tokens(net, ids, targets, 1, c.context + 1, &r),
                    SL_ERR_SHAPE, "context");
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

int main(void)
{
    const char *py = getenv("SL_TEST_PYTHON");
    snprintf(g_python, sizeof g_python, "%s", py && *py ? py : "/usr/bin/python3");
    snprintf(g_script, sizeof g_script, "%s/gpt2_reference.py", SL_TEST_SOURCE_DIR);
    Suite *s = suite_create("gpt2");
    TCase *t = tcase_create("gpt2");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_against_pytorch);
    tcase_add_test(t, test_schedules_bit_identical);
    tcase_add_test(t, test_flash_and_chunks);
    tcase_add_test(t, test_learns);
    tcase_add_test(t, test_errors);
    tcase_add_test(t, test_graph_ranges_cover_the_blocks_without_dropout);
    suite_add_tcase(s, t);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
