/*
 * test_sample.c — GPT-2 text generation with a KV cache
 * (sl_gpt2_generator, sl_gpt2_generate, sl_sample_token) and `sublinear
 * sample`, on small seeded models whose LayerNorm weights and biases are
 * moved off their init:
 *  - at every step of a 20-token generation, the cached step's logits
 *    equal the last position of a full forward over the whole prefix
 *    (sl_net_predict_tokens) to 1e-5 of the row's largest logit;
 *  - greedy generation equals arg-max of full forwards token for token;
 *  - sampling with top-k and temperature repeats for a seed, changes with
 *    another, picks only among the top k, and follows softmax(z / T);
 *  - errors (a prompt longer than the context, bad options, a network of
 *    another shape, each failing allocation) return the right status and
 *    leave nothing allocated;
 *  - `sublinear sample` on a model trained and saved here prints the text
 *    the library generates;
 *  - memory: a KV cache larger than memory is refused by the memory check
 *    with its figures before anything is allocated (the library and the
 *    command), and a generator on a network in inference mode, as the
 *    command's, holds no gradients (the planned and the measured
 *    gradient bytes are 0).
 */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "bpe_files.h"
#include "cli_run.h"
#include "harness.h"

#define NEW 20

static sl_gpt2_config small_config(void)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 2;
    c.embd = 32;
    c.heads = 4;
    c.vocab = 97;
    c.context = 32;
    return c;
}

/* Moves LayerNorm weights and every bias away from 1 / 0 and makes the
 * weights larger, so that the logits spread and nothing is trivial. */
static void perturb(sl_net *net, uint64_t seed)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        float *noise = malloc(p.count * sizeof(float));
        th_fill_normal(noise, p.count, seed + (uint64_t)i, p.ndim == 1 ? 0.2f : 0.15f);
        for (size_t k = 0; k < p.count; k++)
            p.data[k] += noise[k];
        free(noise);
    }
}

static sl_net *make_net(sl_context *ctx, const sl_gpt2_config *c, uint64_t seed)
{
    sl_net *net = th_gpt2(ctx, c, SL_SCHEDULE_NONE);
    perturb(net, seed);
    return net;
}

static void random_prompt(int32_t *ids, int n, int vocab, uint64_t seed)
{
    th_rng r = {seed, 3, 0};
    for (int i = 0; i < n; i++)
        ids[i] = th_pick(&r, vocab);
}

/* The logits of the last of n tokens by a full forward. */
static void full_last(sl_net *net, const int32_t *ids, int n, int vocab, float *out)
{
    float *all = malloc((size_t)n * vocab * sizeof(float));
    ck_assert_msg(sl_net_predict_tokens(net, ids, 1, n, all) == SL_OK, "%s", sl_last_error());
    memcpy(out, all + (size_t)(n - 1) * vocab, (size_t)vocab * sizeof(float));
    free(all);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* max |a - b| over the row, relative to the row's largest |b|. */
static double rel_diff(const float *a, const float *b, int n)
{
    double d = 0, m = 0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

START_TEST(test_cached_step_equals_full_forward)
{
    sl_gpt2_config c = small_config();
    sl_context *ctx = th_context(11);
    sl_net *net = make_net(ctx, &c, 100);
    int n_prompt = 5, V = c.vocab;
    int32_t ids[32];
    random_prompt(ids, n_prompt, V, 7);
    sl_gpt2_generator *gen;
    ck_assert_msg(sl_gpt2_generator_create(net, &c, n_prompt + NEW, &gen) == SL_OK, "%s",
                  sl_last_error());
    float *lg = malloc(V * sizeof(float)), *ref = malloc(V * sizeof(float));
    double worst = 0, spread = 0;
    for (int i = 0; i < n_prompt; i++) {
        ck_assert(sl_gpt2_generator_step(gen, ids[i], lg) == SL_OK);
        full_last(net, ids, i + 1, V, ref);
        worst = fmax(worst, rel_diff(lg, ref, V));
    }
    /* 20 new tokens, each fed back: every step against a full forward */
    for (int s = 0; s < NEW; s++) {
        int n = n_prompt + s;
        th_rng r = {99, 5, (uint64_t)s};
        ids[n] = s % 2 ? argmax(lg, V) : th_pick(&r, V); /* greedy and random continuations */
        ck_assert(sl_gpt2_generator_step(gen, ids[n], lg) == SL_OK);
        ck_assert_int_eq(sl_gpt2_generator_position_count(gen), n + 1);
        full_last(net, ids, n + 1, V, ref);
        double d = rel_diff(lg, ref, V);
        worst = fmax(worst, d);
        float lo = ref[0], hi = ref[0];
        for (int k = 0; k < V; k++) {
            lo = fminf(lo, ref[k]);
            hi = fmaxf(hi, ref[k]);
        }
        spread = fmax(spread, hi - lo);
        ck_assert_msg(d <= 1e-5, "step %d: cached logits differ by %g of the largest", s, d);
    }
    printf("KV cache vs full forward over %d positions: worst relative difference %.3g "
           "(logit spread %.3g)\n", n_prompt + NEW, worst, spread);
    ck_assert(spread > 1.0); /* the logits are not all alike */
    /* the cache is full now */
    th_assert_error(sl_gpt2_generator_step(gen, 0, lg), SL_ERR_STATE, "cache is full");
    th_assert_error(sl_gpt2_generator_step(gen, V, lg), SL_ERR_INVALID_ARG, "outside");
    sl_gpt2_generator_reset(gen);
    ck_assert_int_eq(sl_gpt2_generator_position_count(gen), 0);
    ck_assert(sl_gpt2_generator_step(gen, ids[0], lg) == SL_OK);
    full_last(net, ids, 1, V, ref);
    ck_assert(rel_diff(lg, ref, V) <= 1e-5);
    free(lg);
    free(ref);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_greedy_equals_argmax_of_full_forwards)
{
    sl_gpt2_config c = small_config();
    sl_context *ctx = th_context(12);
    sl_net *net = make_net(ctx, &c, 200);
    int n_prompt = 3, V = c.vocab;
    int32_t ids[32], out[NEW];
    random_prompt(ids, n_prompt, V, 8);
    sl_gpt2_generator *gen;
    ck_assert(sl_gpt2_generator_create(net, &c, c.context, &gen) == SL_OK);
    ck_assert_msg(sl_gpt2_generate(gen, ids, n_prompt, NEW, NULL, out) == SL_OK, "%s",
                  sl_last_error());
    sl_sample_options greedy = sl_sample_defaults();
    greedy.temperature = 0.0f;
    greedy.top_k = 3; /* ignored by greedy */
    int32_t out2[NEW];
    ck_assert(sl_gpt2_generate(gen, ids, n_prompt, NEW, &greedy, out2) == SL_OK);
    ck_assert(memcmp(out, out2, sizeof out) == 0);
    float *ref = malloc(V * sizeof(float));
    int distinct = 0;
    for (int s = 0; s < NEW; s++) {
        full_last(net, ids, n_prompt + s, V, ref);
        ids[n_prompt + s] = argmax(ref, V);
        ck_assert_msg(out[s] == ids[n_prompt + s], "token %d: cached %d, full forward %d", s,
                      out[s], ids[n_prompt + s]);
        distinct += s == 0 || out[s] != out[s - 1];
    }
    ck_assert(distinct > 3); /* not one token repeated */
    free(ref);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* Records the callback's tokens. */
typedef struct seen {
    int n;
    int32_t tok[NEW];
} seen;

static void record(void *user, int index, int32_t token)
{
    seen *s = user;
    ck_assert_int_eq(index, s->n);
    s->tok[s->n++] = token;
}

START_TEST(test_sampling_top_k)
{
    sl_gpt2_config c = small_config();
    sl_context *ctx = th_context(13);
    sl_net *net = make_net(ctx, &c, 300);
    int n_prompt = 4, V = c.vocab, K = 5;
    int32_t ids[32], a[NEW], b[NEW], d[NEW];
    random_prompt(ids, n_prompt, V, 9);
    sl_gpt2_generator *gen;
    ck_assert(sl_gpt2_generator_create(net, &c, n_prompt + NEW, &gen) == SL_OK);
    sl_sample_options so = sl_sample_defaults();
    so.temperature = 1.5f;
    so.top_k = K;
    so.seed = 1;
    seen rec = {0, {0}};
    so.on_token = record;
    so.user = &rec;
    ck_assert(sl_gpt2_generate(gen, ids, n_prompt, NEW, &so, a) == SL_OK);
    ck_assert_int_eq(rec.n, NEW);
    ck_assert(memcmp(rec.tok, a, sizeof a) == 0);
    so.on_token = NULL;
    ck_assert(sl_gpt2_generate(gen, ids, n_prompt, NEW, &so, b) == SL_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0); /* the same seed, the same tokens */
    so.seed = 2;
    ck_assert(sl_gpt2_generate(gen, ids, n_prompt, NEW, &so, d) == SL_OK);
    ck_assert(memcmp(a, d, sizeof a) != 0); /* another seed, other tokens */
    /* every token is among the top K of the full forward's logits */
    float *ref = malloc(V * sizeof(float));
    const int32_t *runs[2] = {a, d};
    int not_first = 0;
    for (int r = 0; r < 2; r++) {
        memcpy(ids + n_prompt, runs[r], NEW * sizeof(int32_t));
        for (int s = 0; s < NEW; s++) {
            full_last(net, ids, n_prompt + s, V, ref);
            int above = 0;
            for (int k = 0; k < V; k++)
                above += ref[k] > ref[runs[r][s]];
            ck_assert_msg(above < K, "run %d token %d: %d logits are larger", r, s, above);
            not_first += above > 0;
        }
    }
    ck_assert(not_first > 0); /* it samples, not only the arg-max */
    free(ref);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

START_TEST(test_sample_token_distribution)
{
    /* logits log 1, log 2, log 4 at ids 3, 7, 1 and lower ones elsewhere:
     * top_k 3 at temperature 1 draws them with p = 1/7, 2/7, 4/7 */
    float lg[10];
    for (int i = 0; i < 10; i++)
        lg[i] = -3.0f - 0.1f * (float)i;
    lg[3] = 0.0f;
    lg[7] = logf(2.0f);
    lg[1] = logf(4.0f);
    sl_sample_options so = sl_sample_defaults();
    so.top_k = 3;
    so.seed = 42;
    int count[10] = {0}, N = 7000;
    for (int i = 0; i < N; i++) {
        int32_t t;
        ck_assert(sl_sample_token(lg, 10, &so, (uint64_t)i, &t) == SL_OK);
        ck_assert(t == 1 || t == 3 || t == 7);
        count[t]++;
    }
    double p[3] = {1.0 / 7, 2.0 / 7, 4.0 / 7};
    int id[3] = {3, 7, 1};
    for (int k = 0; k < 3; k++) {
        double sd = sqrt(N * p[k] * (1 - p[k]));
        ck_assert_msg(fabs(count[id[k]] - N * p[k]) < 5 * sd, "id %d: %d of %d", id[k],
                      count[id[k]], N);
    }
    /* temperature 0.5 squares the odds: p ~ 1, 4, 16 */
    so.temperature = 0.5f;
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++) {
        int32_t t;
        ck_assert(sl_sample_token(lg, 10, &so, (uint64_t)i, &t) == SL_OK);
        count[t]++;
    }
    double q = 16.0 / 21.0;
    ck_assert(fabs(count[1] - N * q) < 5 * sqrt(N * q * (1 - q)));
    /* top_k 1 and greedy: the arg-max, the first of equals */
    so.top_k = 1;
    int32_t t;
    ck_assert(sl_sample_token(lg, 10, &so, 0, &t) == SL_OK);
    ck_assert_int_eq(t, 1);
    lg[5] = lg[1];
    so.temperature = 0.0f;
    ck_assert(sl_sample_token(lg, 10, &so, 0, &t) == SL_OK);
    ck_assert_int_eq(t, 1);
    /* bad options */
    so.temperature = -1.0f;
    th_assert_error(sl_sample_token(lg, 10, &so, 0, &t), SL_ERR_INVALID_ARG, "temperature");
    so.temperature = NAN;
    th_assert_error(sl_sample_token(lg, 10, &so, 0, &t), SL_ERR_INVALID_ARG, "temperature");
    so.temperature = 1.0f;
    so.top_k = -2;
    th_assert_error(sl_sample_token(lg, 10, &so, 0, &t), SL_ERR_INVALID_ARG, "top_k");
    so.top_k = 0;
    lg[2] = NAN;
    th_assert_error(sl_sample_token(lg, 10, &so, 0, &t), SL_ERR_INVALID_ARG, "NaN");
    th_assert_error(sl_sample_token(lg, 0, &so, 0, &t), SL_ERR_INVALID_ARG, "vocab");
}
END_TEST

START_TEST(test_errors)
{
    sl_gpt2_config c = small_config();
    sl_context *ctx = th_context(14);
    sl_net *net = make_net(ctx, &c, 400);
    sl_gpt2_generator *gen = (sl_gpt2_generator *)&c; /* must be set to NULL */
    th_assert_error(sl_gpt2_generator_create(net, &c, c.context + 1, &gen), SL_ERR_INVALID_ARG,
                    "context");
    ck_assert(gen == NULL);
    th_assert_error(sl_gpt2_generator_create(net, &c, 0, &gen), SL_ERR_INVALID_ARG, "max_tokens");
    th_assert_error(sl_gpt2_generator_create(NULL, &c, 4, &gen), SL_ERR_INVALID_ARG, "NULL");
    sl_gpt2_config other = c;
    other.layers = 3;
    th_assert_error(sl_gpt2_generator_create(net, &other, 4, &gen), SL_ERR_NOT_FOUND,
                    "transformer.h.2.ln_1.weight");
    ck_assert(gen == NULL);
    other = c;
    other.layers = 1;
    th_assert_error(sl_gpt2_generator_create(net, &other, 4, &gen), SL_ERR_SHAPE, "more than");
    other = c;
    other.vocab = 98;
    th_assert_error(sl_gpt2_generator_create(net, &other, 4, &gen), SL_ERR_SHAPE, "wte");
    other = c;
    other.embd = 30;
    other.heads = 3;
    th_assert_error(sl_gpt2_generator_create(net, &other, 4, &gen), SL_ERR_SHAPE, "[97, 30]");

    /* every allocation of create failing in turn: NOMEM, nothing kept
     * (leaks are ASan's to find) */
    sl_test_alloc_fail_at(-1);
    ck_assert(sl_gpt2_generator_create(net, &c, 8, &gen) == SL_OK);
    long n_alloc = sl_test_alloc_count();
    sl_test_alloc_fail_at(0);
    sl_gpt2_generator_free(gen);
    ck_assert(n_alloc >= 3);
    for (long k = 1; k <= n_alloc; k++) {
        gen = (sl_gpt2_generator *)&c;
        sl_test_alloc_fail_at(k);
        sl_status st = sl_gpt2_generator_create(net, &c, 8, &gen);
        sl_test_alloc_fail_at(0);
        th_assert_error(st, SL_ERR_NOMEM, "memory");
        ck_assert(gen == NULL);
    }

    ck_assert(sl_gpt2_generator_create(net, &c, 8, &gen) == SL_OK);
    int32_t prompt[40] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out[40];
    th_assert_error(sl_gpt2_generate(gen, prompt, 9, 1, NULL, out), SL_ERR_INVALID_ARG, "exceed");
    th_assert_error(sl_gpt2_generate(gen, prompt, 4, 5, NULL, out), SL_ERR_INVALID_ARG, "by 1");
    th_assert_error(sl_gpt2_generate(gen, prompt, 0, 2, NULL, out), SL_ERR_INVALID_ARG, "n_prompt");
    prompt[1] = c.vocab;
    th_assert_error(sl_gpt2_generate(gen, prompt, 3, 2, NULL, out), SL_ERR_INVALID_ARG,
                    "outside the vocabulary");
    prompt[1] = 2;
    sl_sample_options so = sl_sample_defaults();
    so.top_k = -1;
    th_assert_error(sl_gpt2_generate(gen, prompt, 3, 2, &so, out), SL_ERR_INVALID_ARG, "top_k");
    so.top_k = 0;
    so.temperature = INFINITY;
    th_assert_error(sl_gpt2_generate(gen, prompt, 3, 2, &so, out), SL_ERR_INVALID_ARG, "temperature");
    ck_assert_int_eq(sl_gpt2_generator_position_count(gen), 0); /* nothing ran */
    ck_assert(sl_gpt2_generate(gen, prompt, 3, 5, NULL, out) == SL_OK); /* 8 fit exactly */
    ck_assert_int_eq(sl_gpt2_generator_position_count(gen), 7);
    ck_assert(sl_gpt2_generate(gen, prompt, 3, 0, NULL, NULL) == SL_OK);
    sl_gpt2_generator_free(gen);
    sl_gpt2_generator_free(NULL);
    /* a prompt longer than the context is refused by the largest generator */
    ck_assert(sl_gpt2_generator_create(net, &c, c.context, &gen) == SL_OK);
    th_assert_error(sl_gpt2_generate(gen, prompt, c.context + 1 > 40 ? 40 : c.context + 1, 0, NULL,
                                     out), SL_ERR_INVALID_ARG, "context is 32");
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* A GPT-2 whose KV cache at its full context is 512 GiB (2 x 64 layers x
 * 2^20 positions x 1024 channels of floats) and whose parameters are 7 GiB:
 * more than any machine the tests run on has free. */
static sl_gpt2_config huge_cache_config(void)
{
    sl_gpt2_config c = small_config();
    c.layers = 64;
    c.embd = 1024;
    c.heads = 16;
    c.context = 1 << 20;
    return c;
}

#define HUGE_CACHE_FIGURE "the generator needs 512.00 GiB for its KV cache (2 x 64 layers x " \
                          "1048576 positions x 1024 channels of floats) plus scratch"

/* The generator's memory (cache, scratch, and the parameters not allocated
 * yet) is checked before any of it is allocated: refused with the figures,
 * the network left without parameters; in inference mode no gradient is
 * counted, in training mode they are. */
START_TEST(test_generator_refuses_a_cache_larger_than_memory)
{
    sl_gpt2_config c = huge_cache_config();
    sl_context *ctx = th_context(16);
    sl_net *net = th_gpt2(ctx, &c, SL_SCHEDULE_NONE);
    ck_assert(sl_net_set_mode(net, SL_MODE_INFER) == SL_OK);
    sl_gpt2_generator *gen = (sl_gpt2_generator *)&c;
    sl_status st = sl_gpt2_generator_create(net, &c, c.context, &gen);
    const char *e = sl_last_error();
    printf("%s\n", e);
    ck_assert_msg(st == SL_ERR_NOMEM, "status %d: %s", (int)st, e);
    ck_assert(gen == NULL);
    ck_assert_msg(strstr(e, "sl_gpt2_generator_create: " HUGE_CACHE_FIGURE) &&
                      strstr(e, "(parameters ") && strstr(e, ", gradients 0.00 MiB, optimizer "
                                                           "state 0.00 MiB)") &&
                      strstr(e, "of memory is available ("),
                  "%s", e);
    /* Nothing was allocated: the network holds no parameter. */
    sl_memory_report r;
    ck_assert(sl_net_memory_report(net, sl_shape_seq(1, 8, 1), SL_MODE_INFER, &r) == SL_OK);
    ck_assert_uint_eq(r.measured_params, 0);
    ck_assert_uint_eq(r.measured_param_grads, 0);
    ck_assert_uint_eq(r.param_grads, 0);
    sl_net_free(net);
    /* A network in training mode would get its gradients with its
     * parameters: they are counted. */
    net = th_gpt2(ctx, &c, SL_SCHEDULE_NONE);
    ck_assert(sl_gpt2_generator_create(net, &c, c.context, &gen) == SL_ERR_NOMEM);
    e = sl_last_error();
    ck_assert_msg(strstr(e, HUGE_CACHE_FIGURE) && strstr(e, ", gradients ") &&
                      !strstr(e, ", gradients 0.00 MiB"), "%s", e);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* A generator on a network in inference mode allocates no gradients: the
 * planned and the measured gradient bytes are 0 while it runs. */
START_TEST(test_generator_in_inference_mode_holds_no_gradients)
{
    sl_gpt2_config c = small_config();
    sl_context *ctx = th_context(17);
    sl_net *net = th_gpt2(ctx, &c, SL_SCHEDULE_NONE);
    ck_assert(sl_net_set_mode(net, SL_MODE_INFER) == SL_OK);
    sl_gpt2_generator *gen;
    ck_assert_msg(sl_gpt2_generator_create(net, &c, c.context, &gen) == SL_OK, "%s",
                  sl_last_error());
    int32_t prompt[3] = {1, 2, 3}, out[4];
    ck_assert(sl_gpt2_generate(gen, prompt, 3, 4, NULL, out) == SL_OK);
    sl_memory_report r;
    ck_assert(sl_net_memory_report(net, sl_shape_seq(1, 7, 1), SL_MODE_INFER, &r) == SL_OK);
    ck_assert(r.measured_params > 0);
    ck_assert_uint_eq(r.measured_param_grads, 0);
    ck_assert_uint_eq(r.param_grads, 0);
    ck_assert_uint_eq(r.measured_optimizer, 0);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* "hello world" over and over, in the small vocabulary's ids. */
static int hello_ids(const sl_tokenizer *tok, int32_t *ids, int cap)
{
    static const char text[] = "hello world hello world hello world hello world hello world "
                               "hello world hello world hello world hello world hello world";
    size_t n;
    ck_assert(sl_tokenizer_encode(tok, text, strlen(text), ids, (size_t)cap, &n) == SL_OK);
    return (int)n;
}

START_TEST(test_cli_sample)
{
    char enc[512], bpe[512], dir[512], cmd_model[4096];
    snprintf(enc, sizeof enc, "%s/encoder.json", cr_dir());
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", cr_dir());
    bf_write_small(enc, bpe, "", "");
    sl_tokenizer *tok;
    ck_assert(sl_tokenizer_load(enc, bpe, &tok) == SL_OK);
    sl_gpt2_config c = small_config();
    c.vocab = sl_tokenizer_vocab_size(tok);
    c.context = 64;
    int32_t ids[128];
    int n = hello_ids(tok, ids, 128);
    ck_assert(n >= 20);
    /* train a tiny model on the repeating text */
    sl_context *ctx = th_context(15);
    sl_net *net = th_gpt2(ctx, &c, SL_SCHEDULE_NONE);
    sl_optimizer_options opt = sl_optimizer_adamw(1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f);
    ck_assert(sl_net_set_optimizer(net, &opt) == SL_OK);
    int T = 16;
    sl_step_result r;
    for (int s = 0; s < 60; s++) {
        int off = s % (n - T - 1);
        ck_assert(sl_net_train_step_tokens(net, ids + off, ids + off + 1, 1, T, &r) == SL_OK);
    }
    printf("tiny model on 'hello world': loss %.3f after 60 steps\n", r.loss);
    snprintf(dir, sizeof dir, "%s/hello", cr_dir());
    ck_assert_msg(sl_gpt2_save_pretrained(net, &c, dir) == SL_OK, "%s", sl_last_error());
    /* the library's greedy continuation */
    int32_t prompt[8];
    size_t np;
    ck_assert(sl_tokenizer_encode(tok, "hello world", 11, prompt, 8, &np) == SL_OK);
    sl_gpt2_generator *gen;
    int32_t want[12];
    ck_assert(sl_gpt2_generator_create(net, &c, (int)np + 12, &gen) == SL_OK);
    ck_assert(sl_gpt2_generate(gen, prompt, (int)np, 12, NULL, want) == SL_OK);
    char want_text[256];
    size_t wn;
    ck_assert(sl_tokenizer_decode(tok, want, 12, want_text, sizeof want_text - 1, &wn) == SL_OK);
    want_text[wn] = '\0';
    printf("greedy continuation: 'hello world' + '%s'\n", want_text);
    ck_assert(strstr(want_text, "hello") != NULL); /* it learnt the text */

    snprintf(cmd_model, sizeof cmd_model, "sample --model-file %s/model.safetensors --config "
             "%s/config.json --vocab %s --merges %s --prompt 'hello world' --tokens 12 "
             "--temperature 0", dir, dir, enc, bpe);
    cr_result res = cr_run(SL_CLI_PATH, "%s", cmd_model);
    ck_assert_msg(res.status == 0, "%s", res.err);
    char expect[512];
    snprintf(expect, sizeof expect, "hello world%s\n", want_text);
    ck_assert_msg(strcmp(res.out, expect) == 0, "printed '%s', expected '%s'", res.out, expect);
    cr_free(&res);
    /* --json, the shape from flags */
    res = cr_run(SL_CLI_PATH, "sample --model-file %s/model.safetensors --layers 2 --embd 32 "
                 "--heads 4 --vocab-size %d --context 64 --vocab %s --merges %s --prompt "
                 "'hello world' --tokens 12 --temperature 0 --json", dir, c.vocab, enc, bpe);
    ck_assert_msg(res.status == 0, "%s", res.err);
    cJSON *j = cr_json(&res);
    cJSON *got = cJSON_GetObjectItem(j, "ids");
    ck_assert_int_eq(cJSON_GetArraySize(got), 12);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq((int)cJSON_GetArrayItem(got, i)->valuedouble, want[i]);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "text")->valuestring, want_text);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "prompt")->valuestring, "hello world");
    /* inference: the network holds its parameters and no gradient or
     * optimizer state */
    ck_assert(cr_num(j, "memory.params_bytes") > 0);
    ck_assert(cr_num(j, "memory.param_grads_bytes") == 0);
    ck_assert(cr_num(j, "memory.optimizer_bytes") == 0);
    cJSON_Delete(j);
    cr_free(&res);
    /* sampling: a seed repeats, text is printed */
    char outs[2][512];
    for (int k = 0; k < 2; k++) {
        res = cr_run(SL_CLI_PATH, "sample --model-file %s/model.safetensors --config %s/config.json "
                     "--vocab %s --merges %s --prompt 'hello' --tokens 10 --top-k 3 "
                     "--temperature 1.2 --seed 5", dir, dir, enc, bpe);
        ck_assert_msg(res.status == 0, "%s", res.err);
        ck_assert(strncmp(res.out, "hello", 5) == 0 && strlen(res.out) > 7);
        snprintf(outs[k], sizeof outs[k], "%s", res.out);
        cr_free(&res);
    }
    ck_assert_str_eq(outs[0], outs[1]);
    /* too long for the context, bad arguments */
    res = cr_run(SL_CLI_PATH, "%s --tokens 63", cmd_model);
    ck_assert_int_eq(res.status, 1);
    ck_assert(strstr(res.err, "context") != NULL);
    cr_free(&res);
    res = cr_run(SL_CLI_PATH, "sample --prompt hi");
    ck_assert_int_eq(res.status, 2);
    ck_assert(strstr(res.err, "--model-file") != NULL);
    cr_free(&res);
    res = cr_run(SL_CLI_PATH, "%s --top-k -1", cmd_model);
    ck_assert_int_eq(res.status, 2);
    cr_free(&res);
    /* a KV cache larger than memory is refused by the memory check before
     * anything is allocated or the model file is read; no gradient is
     * counted */
    sl_gpt2_config huge = huge_cache_config();
    res = cr_run(SL_CLI_PATH, "sample --model-file %s/absent.safetensors --layers %d --embd %d "
                 "--heads %d --vocab-size %d --context %d --vocab %s --merges %s --prompt hello "
                 "--tokens %d", cr_dir(), huge.layers, huge.embd, huge.heads, c.vocab,
                 huge.context, enc, bpe, huge.context - 16);
    printf("%s", res.err);
    ck_assert_int_eq(res.status, 1);
    ck_assert_msg(strstr(res.err, "sublinear: creating the generator: sl_gpt2_generator_create: "
                                  "the generator needs 511.99 GiB for its KV cache (2 x 64 layers "
                                  "x ") &&
                      strstr(res.err, " positions x 1024 channels of floats) plus scratch") &&
                      strstr(res.err, ", gradients 0.00 MiB, optimizer state 0.00 MiB)") &&
                      strstr(res.err, "of memory is available ("),
                  "%s", res.err);
    cr_free(&res);
    res = cr_run(SL_CLI_PATH, "sample --help");
    ck_assert_int_eq(res.status, 0);
    ck_assert(strstr(res.out, "--temperature") != NULL);
    cr_free(&res);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
    sl_tokenizer_free(tok);
}
END_TEST

int main(void)
{
    cr_init();
    Suite *s = suite_create("sample");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cached_step_equals_full_forward);
    tcase_add_test(tc, test_greedy_equals_argmax_of_full_forwards);
    tcase_add_test(tc, test_sampling_top_k);
    tcase_add_test(tc, test_sample_token_distribution);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_generator_refuses_a_cache_larger_than_memory);
    tcase_add_test(tc, test_generator_in_inference_mode_holds_no_gradients);
    tcase_add_test(tc, test_cli_sample);
    suite_add_tcase(s, tc);
    int failed = th_run_suite(s);
    cr_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
