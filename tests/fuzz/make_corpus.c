/*
 * make_corpus.c — writes a fuzz target's seed corpus into a directory,
 * valid files and broken ones:
 *  - --model (the default; fuzz_load_model): a model, SGD and Adam
 *    snapshots for the fuzzed network, and broken ones (truncated, lying
 *    header lengths, wrong dtype, shape or name, overlapping offsets, not
 *    JSON, too short, a NaN weight);
 *  - --config (fuzz_gpt2_config): the config.json sl_gpt2_save_pretrained
 *    writes, Hugging Face's other spellings, and broken ones (missing or
 *    ill-typed keys, sizes out of range, settings GPT-2 here does not
 *    compute, bad JSON and UTF-8);
 *  - --shard (fuzz_token_shard): llm.c token shards of a few lengths and
 *    broken ones (short header, wrong magic or version, a count that lies).
 *
 * Usage: sl_fuzz_corpus [--model|--config|--shard] DIR
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_net.h"

static const char *g_dir;

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        abort();
    long len = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
        abort();
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void put(const char *name, const unsigned char *data, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
        abort();
}

/* A copy of a file with the first `from` replaced by `to` (same length). */
static void put_patched(const char *name, const unsigned char *data, size_t n, const char *from,
                        const char *to)
{
    size_t k = strlen(from);
    unsigned char *copy = malloc(n);
    memcpy(copy, data, n);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(copy + i, from, k) == 0) {
            memcpy(copy + i, to, k);
            put(name, copy, n);
            break;
        }
    free(copy);
}

static void save_valid(void)
{
    char path[4096];
    sl_context *ctx;
    sl_net *net = fuzz_net_build(&ctx);
    float x[2 * 3 * 5 * 5];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    int labels[2] = {0, 2};
    sl_optimizer_options opt[2] = {sl_optimizer_sgd(0.1f, 0.9f, 1e-4f, 0),
                                   sl_optimizer_adam(0.01f, 0.9f, 0.999f, 1e-8f, 0.0f)};
    const char *names[2] = {"snapshot_sgd.safetensors", "snapshot_adam.safetensors"};
    for (int k = 0; k < 2; k++) {
        if (sl_net_set_optimizer(net, &opt[k]) != SL_OK ||
            sl_net_train_step(net, x, sl_shape_nchw(2, 3, 5, 5), labels, NULL) != SL_OK)
            abort();
        snprintf(path, sizeof path, "%s/%s", g_dir, names[k]);
        if (sl_save_snapshot(net, path) != SL_OK)
            abort();
    }
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    if (sl_save_model(net, path) != SL_OK)
        abort();
    sl_net_free(net);
    sl_context_free(ctx);
}

/* ---- config.json ---- */

static void put_text(const char *name, const char *text)
{
    put(name, (const unsigned char *)text, strlen(text));
}

/* The config.json that sl_gpt2_save_pretrained writes for a small GPT-2,
 * and variants of it. */
static void config_corpus(void)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/.pretrained", g_dir);
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 1;
    c.embd = 16;
    c.heads = 2;
    c.vocab = 64;
    c.context = 16;
    if (sl_context_create(NULL, &ctx) != SL_OK || sl_sequential(ctx, 1, &net) != SL_OK ||
        sl_model_gpt2(net, &c) != SL_OK || sl_gpt2_save_pretrained(net, &c, dir) != SL_OK)
        abort();
    sl_net_free(net);
    sl_context_free(ctx);
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t n;
    unsigned char *m = slurp(path, &n);
    put("config_saved.json", m, n);
    remove(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    remove(path);
    rmdir(dir);
    put_patched("config_layers_zero.json", m, n, "\"n_layer\": 1", "\"n_layer\": 0");
    put_patched("config_heads_not_dividing.json", m, n, "\"n_head\": 2", "\"n_head\": 3");
    put_patched("config_model_type.json", m, n, "\"gpt2\"", "\"bert\"");
    put_patched("config_untied.json", m, n, "\"tie_word_embeddings\": true",
                "\"tie_word_embeddings\": 1234");
    put_patched("config_activation.json", m, n, "\"gelu_new\"", "\"relu____\"");
    put_patched("config_dropout_differs.json", m, n, "\"attn_pdrop\": 0.0", "\"attn_pdrop\": 0.5");
    put_patched("config_truncated.json", m, n / 2, "{", "{");
    free(m);
    static const char *const texts[][2] = {
        {"config_minimal.json", "{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":32,"
                                "\"n_head\":4,\"vocab_size\":100,\"n_positions\":64}"},
        {"config_hf_spellings.json",
         "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 8, \"n_head\": 2,\n"
         " \"vocab_size\": 50, \"n_positions\": 32, \"n_ctx\": 32, \"n_inner\": 32,\n"
         " \"activation_function\": \"gelu_pytorch_tanh\", \"layer_norm_epsilon\": 1e-05,\n"
         " \"embd_pdrop\": 0.1, \"attn_pdrop\": 0.1, \"resid_pdrop\": 0.1,\n"
         " \"scale_attn_weights\": true, \"add_cross_attention\": false,\n"
         " \"architectures\": [\"GPT2LMHeadModel\"], \"task_specific_params\": "
         "{\"text-generation\": {\"do_sample\": true, \"max_length\": 50}}}"},
        {"config_repeated_key.json", "{\"model_type\":\"gpt2\",\"n_layer\":1,\"n_layer\":3,"
                                     "\"n_embd\":8,\"n_head\":2,\"vocab_size\":10,"
                                     "\"n_positions\":8}"},
        {"config_huge_sizes.json", "{\"model_type\":\"gpt2\",\"n_layer\":2147483647,"
                                   "\"n_embd\":536870912,\"n_head\":1,\"vocab_size\":"
                                   "4294967296,\"n_positions\":-1}"},
        {"config_number_forms.json", "{\"model_type\":\"gpt2\",\"n_layer\":2.0,\"n_embd\":"
                                     "1e1,\"n_head\":\"2\",\"vocab_size\":10,\"n_positions\":"
                                     "8,\"layer_norm_epsilon\":1e400,\"embd_pdrop\":-0.0}"},
        {"config_bad_utf8.json", "{\"model_type\":\"gpt2\",\"n_\xc0\xa1layer\":1,\"\xff\":2}"},
        {"config_escapes.json", "{\"model_type\":\"gp\\u0074\\u0032\",\"n_layer\\u0000\":1,"
                                "\"\\ud83d\\ude00\":[],\"x\":\"\\ud800\"}"},
        {"config_not_object.json", "[{\"model_type\":\"gpt2\"}]"},
        {"config_nested.json", "{\"a\":[[[[[[[[[[[[[[[[{\"b\":null}]]]]]]]]]]]]]]]]}"},
        {"config_empty.json", ""},
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        put_text(texts[i][0], texts[i][1]);
}

/* ---- token shards ---- */

/* A shard of count tokens (ids i * 7919 mod 65536) whose header says
 * header_count, with magic and version as given. */
static void put_shard(const char *name, uint32_t magic, uint32_t version, uint32_t header_count,
                      size_t count, size_t keep)
{
    size_t n = 1024 + 2 * count;
    unsigned char *b = calloc(1, n);
    if (!b)
        abort();
    uint32_t head[3] = {magic, version, header_count};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 4; j++)
            b[4 * k + j] = (unsigned char)(head[k] >> (8 * j));
    b[12] = 3; /* the fuzz target's batch and seq bytes: 4 x 6 */
    b[13] = 5;
    for (size_t i = 0; i < count; i++) {
        uint16_t t = (uint16_t)(i * 7919u);
        b[1024 + 2 * i] = (unsigned char)t;
        b[1024 + 2 * i + 1] = (unsigned char)(t >> 8);
    }
    put(name, b, keep < n ? keep : n);
    free(b);
}

static void shard_corpus(void)
{
    const uint32_t magic = 20240520, v = 1;
    put_shard("shard_empty", magic, v, 0, 0, (size_t)-1);
    put_shard("shard_one", magic, v, 1, 1, (size_t)-1);
    put_shard("shard_two", magic, v, 2, 2, (size_t)-1);
    put_shard("shard_25", magic, v, 25, 25, (size_t)-1);
    put_shard("shard_600", magic, v, 600, 600, (size_t)-1);
    put_shard("shard_short_header", magic, v, 0, 0, 1000);
    put_shard("shard_bad_magic", magic + 1, v, 4, 4, (size_t)-1);
    put_shard("shard_bad_version", magic, 2, 4, 4, (size_t)-1);
    put_shard("shard_count_more", magic, v, 9, 8, (size_t)-1);
    put_shard("shard_count_less", magic, v, 7, 8, (size_t)-1);
    put_shard("shard_count_huge", magic, v, 0xffffffffu, 8, (size_t)-1);
    put_shard("shard_odd_length", magic, v, 8, 9, 1024 + 17);
}

/* The model with a NaN weight: refused, or loaded when allowed. */
static void nan_model(void)
{
    char path[4096];
    sl_context *ctx;
    sl_net *net = fuzz_net_build(&ctx);
    sl_param_info p;
    if (sl_net_find_param(net, "fc.weight", &p) != SL_OK)
        abort();
    p.data[1] = (float)NAN;
    snprintf(path, sizeof path, "%s/model_nan.safetensors", g_dir);
    if (sl_save_model(net, path) != SL_OK)
        abort();
    sl_net_free(net);
    sl_context_free(ctx);
}

int main(int argc, char **argv)
{
    const char *kind = argc == 3 ? argv[1] : "--model";
    if (argc < 2 || argc > 3 ||
        (strcmp(kind, "--model") && strcmp(kind, "--config") && strcmp(kind, "--shard"))) {
        fprintf(stderr, "usage: %s [--model|--config|--shard] DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[argc - 1];
    if (strcmp(kind, "--config") == 0) {
        config_corpus();
        return 0;
    }
    if (strcmp(kind, "--shard") == 0) {
        shard_corpus();
        return 0;
    }
    save_valid();
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    size_t n;
    unsigned char *m = slurp(path, &n);
    put("truncated_data", m, n - 10);
    put("truncated_header", m, 40);
    put("too_short", m, 3);
    unsigned char *lie = malloc(n);
    memcpy(lie, m, n);
    lie[0] = (unsigned char)(lie[0] + 1);
    put("header_length_plus_one", lie, n);
    memset(lie, 0xff, 8);
    put("header_length_huge", lie, n);
    free(lie);
    put_patched("not_json", m, n, "{", "[");
    put_patched("dtype_f64", m, n, "\"F32\"", "\"F64\"");
    put_patched("dtype_unknown", m, n, "\"F32\"", "\"F99\"");
    put_patched("unexpected_name", m, n, "fc.bias", "fc.bia2");
    put_patched("shape_changed", m, n, "\"shape\":[3]", "\"shape\":[4]");
    put_patched("offset_overlap", m, n, "\"data_offsets\":[0,", "\"data_offsets\":[4,");
    put_patched("metadata_number", m, n, "\"pt\"", "1234");
    free(m);
    nan_model();
    snprintf(path, sizeof path, "%s/snapshot_sgd.safetensors", g_dir);
    m = slurp(path, &n);
    put_patched("snapshot_bad_step", m, n, "\"step\":\"", "\"step\":\"-");
    put_patched("snapshot_bad_optimizer", m, n, "\"sgd\"", "\"sgx\"");
    free(m);
    return 0;
}
