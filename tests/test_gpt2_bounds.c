/*
 * test_gpt2_bounds.c — GPT-2 shapes too large to build: every config
 * field is bounded (SL_GPT2_MAX_*) in sl_model_gpt2 and in config.json,
 * with a message naming the field and its bound, so no product of the
 * shapes overflows; and a model whose parameters cannot fit in memory is
 * refused before its first layer is built, through the library's memory
 * check (and built when the check is off).
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static sl_gpt2_config small(void)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 2;
    c.embd = 16;
    c.heads = 2;
    c.vocab = 32;
    c.context = 16;
    return c;
}

/* sl_model_gpt2(c) fails with want and a message holding each fragment,
 * and leaves the network empty. */
static void build_fails(const sl_gpt2_config *c, sl_status want, const char *const *fragments,
                        int n)
{
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 1, &net) == SL_OK);
    sl_status st = sl_model_gpt2(net, c);
    for (int i = 0; i < n; i++)
        th_assert_error(st, want, fragments[i]);
    ck_assert_int_eq(sl_net_layer_count(net), 0);
    sl_net_free(net);
    sl_context_free(ctx);
}

/* The field k of c (layers, embd, heads, vocab, context). */
static int *field(sl_gpt2_config *c, int k)
{
    int *f[5] = {&c->layers, &c->embd, &c->heads, &c->vocab, &c->context};
    return f[k];
}

START_TEST(test_each_field_beyond_its_bound_is_refused_naming_it)
{
    static const char *const names[5] = {"layers (n_layer)", "embd (n_embd)", "heads (n_head)",
                                         "vocab (vocab_size)", "context (n_positions)"};
    static const int max[5] = {SL_GPT2_MAX_LAYERS, SL_GPT2_MAX_EMBD, SL_GPT2_MAX_EMBD,
                               SL_GPT2_MAX_VOCAB, SL_GPT2_MAX_CONTEXT};
    for (int k = 0; k < 5; k++) {
        const int values[2] = {max[k] + 1, INT_MAX};
        for (int j = 0; j < 2; j++) {
            sl_gpt2_config c = small();
            *field(&c, k) = values[j];
            if (k == 1)
                c.heads = 1; /* embd alone out of bounds */
            char bound[32];
            snprintf(bound, sizeof bound, "from 1 to %d", max[k]);
            const char *says[2] = {names[k], bound};
            build_fails(&c, SL_ERR_INVALID_ARG, says, 2);
        }
    }
}
END_TEST

/* 4 x n_embd of 2^29 and more does not fit an int: refused, not wrapped. */
START_TEST(test_embd_of_2_to_the_29_is_refused_not_overflowed)
{
    sl_gpt2_config c = small();
    c.embd = 1 << 29;
    c.heads = 1 << 29;
    const char *says[2] = {"embd (n_embd) is 536870912", "from 1 to 65536"};
    build_fails(&c, SL_ERR_INVALID_ARG, says, 2);
}
END_TEST

/* 4096 layers of embd 65536: 2.1e14 parameters. Refused before building
 * (the layer count stays 0), naming the count and what to do. */
START_TEST(test_model_larger_than_memory_is_refused_before_building)
{
    sl_gpt2_config c = small();
    c.layers = SL_GPT2_MAX_LAYERS;
    c.embd = SL_GPT2_MAX_EMBD;
    c.heads = 64;
    const char *says[3] = {"sl_model_gpt2: the network needs",
                           "GPT-2's 211109725470720 parameters and their gradients",
                           "use a smaller model"};
    build_fails(&c, SL_ERR_NOMEM, says, 3);
}
END_TEST

/* The size check is the memory check: off, the same kind of model (one
 * layer here, 4 TiB of embeddings) builds, since building allocates no
 * parameters. */
START_TEST(test_size_check_follows_the_memory_check_switch)
{
    sl_gpt2_config c = small();
    c.layers = 1;
    c.embd = SL_GPT2_MAX_EMBD;
    c.heads = 64;
    c.vocab = SL_GPT2_MAX_VOCAB;
    const char *says[2] = {"parameters", "sl_net_set_memory_check(net, 0)"};
    build_fails(&c, SL_ERR_NOMEM, says, 2);
    sl_context *ctx = th_context(1);
    sl_net *net;
    ck_assert(sl_sequential(ctx, 1, &net) == SL_OK);
    ck_assert(sl_net_set_memory_check(net, 0) == SL_OK);
    ck_assert_msg(sl_model_gpt2(net, &c) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(sl_net_layer_count(net), 3); /* embeddings, one block, ln_f */
    sl_net_free(net);
    sl_context_free(ctx);
}
END_TEST

/* config.json: each field past its bound is a format error naming the
 * key and the bound; n_layer 2147483647 among them. */
START_TEST(test_config_json_field_beyond_its_bound_names_it)
{
    char dir[] = "/tmp/sl_gpt2_bounds_XXXXXX";
    ck_assert(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    static const struct {
        const char *key;
        long long value;
        int max;
    } cases[] = {
        {"n_layer", 2147483647LL, SL_GPT2_MAX_LAYERS},
        {"n_layer", SL_GPT2_MAX_LAYERS + 1LL, SL_GPT2_MAX_LAYERS},
        {"n_embd", 1LL << 29, SL_GPT2_MAX_EMBD},
        {"n_head", SL_GPT2_MAX_EMBD + 1LL, SL_GPT2_MAX_EMBD},
        {"vocab_size", SL_GPT2_MAX_VOCAB + 1LL, SL_GPT2_MAX_VOCAB},
        {"n_positions", SL_GPT2_MAX_CONTEXT + 1LL, SL_GPT2_MAX_CONTEXT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long long v[5] = {2, 16, 2, 32, 16};
        const char *keys[5] = {"n_layer", "n_embd", "n_head", "vocab_size", "n_positions"};
        for (int k = 0; k < 5; k++)
            if (strcmp(keys[k], cases[i].key) == 0)
                v[k] = cases[i].value;
        FILE *f = fopen(path, "w");
        ck_assert(f);
        fprintf(f, "{\"model_type\": \"gpt2\", \"n_layer\": %lld, \"n_embd\": %lld, \"n_head\": %lld, "
                   "\"vocab_size\": %lld, \"n_positions\": %lld}", v[0], v[1], v[2], v[3], v[4]);
        fclose(f);
        sl_gpt2_config out = small(), before = out;
        char says[96];
        snprintf(says, sizeof says, "\"%s\" must be an integer from 1 to %d", cases[i].key,
                 cases[i].max);
        th_assert_error(sl_gpt2_read_config(path, &out), SL_ERR_FORMAT, says);
        ck_assert(memcmp(&out, &before, sizeof out) == 0);
    }
    unlink(path);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt2_bounds");
    TCase *tc = tcase_create("gpt2_bounds");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_each_field_beyond_its_bound_is_refused_naming_it);
    tcase_add_test(tc, test_embd_of_2_to_the_29_is_refused_not_overflowed);
    tcase_add_test(tc, test_model_larger_than_memory_is_refused_before_building);
    tcase_add_test(tc, test_size_check_follows_the_memory_check_switch);
    tcase_add_test(tc, test_config_json_field_beyond_its_bound_names_it);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
