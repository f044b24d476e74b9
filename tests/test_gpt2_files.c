/*
 * test_gpt2_files.c — GPT-2 in Hugging Face's directory layout
 * (sl_gpt2_save_pretrained, sl_gpt2_read_config) and the file entries
 * sl_load_model accepts from such files, without transformers:
 *  - save_pretrained, read_config, build, load: the config read back is
 *    the one saved and every tensor and logit is bit-identical;
 *  - model.safetensors carries {"format": "pt"} and exactly
 *    GPT2LMHeadModel's tensor names and shapes (no lm_head.weight);
 *    config.json has GPT2Config's keys and values;
 *  - a hand-written HF-style file with attention buffers and a tied
 *    lm_head.weight loads; an lm_head.weight that differs from wte, or a
 *    buffer beside no attention, fails and changes nothing;
 *  - read_config refuses other model types, missing keys and settings
 *    this GPT-2 does not compute, leaving its output unchanged;
 *  - save_pretrained refuses a config that is not the network's.
 */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "io/json.h"
#include "io/safetensors.h"

#define B 2
#define T 16

static sl_gpt2_config small_config(void)
{
    sl_gpt2_config c = sl_gpt2_defaults();
    c.layers = 2;
    c.embd = 64;
    c.heads = 4;
    c.vocab = 512;
    c.context = 64;
    return c;
}

/* Every tensor moved by noise, so that no value is its init's. */
static void perturb(sl_net *net, uint64_t seed)
{
    int n = th_param_count(net);
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        float *noise = malloc(p.count * sizeof(float));
        th_fill_normal(noise, p.count, seed + (uint64_t)i, 0.05f);
        for (size_t k = 0; k < p.count; k++)
            p.data[k] += noise[k];
        free(noise);
    }
}

static void path_in(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert(f);
    ck_assert(fputs(text, f) >= 0);
    fclose(f);
}

static void logits_of(sl_net *net, int vocab, float *out)
{
    int32_t ids[B * T];
    th_rng r = {9, 2, 0};
    for (int i = 0; i < B * T; i++)
        ids[i] = th_pick(&r, vocab);
    ck_assert_msg(sl_net_predict_tokens(net, ids, B, T, out) == SL_OK, "%s", sl_last_error());
}

static void remove_dir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}

/* GPT2LMHeadModel(config).state_dict() keys less the tied lm_head.weight
 * and the non-persistent buffers, with their shapes, in its order. */
static int hf_names(const sl_gpt2_config *c, char (*names)[96], int (*dims)[2], int *ndim)
{
    int n = 0, C = c->embd;
#define ADD(nd, d0, d1, ...)                                                                       \
    do {                                                                                           \
        snprintf(names[n], 96, __VA_ARGS__);                                                       \
        ndim[n] = nd;                                                                              \
        dims[n][0] = d0;                                                                           \
        dims[n][1] = d1;                                                                           \
        n++;                                                                                       \
    } while (0)
    ADD(2, c->vocab, C, "transformer.wte.weight");
    ADD(2, c->context, C, "transformer.wpe.weight");
    for (int l = 0; l < c->layers; l++) {
        ADD(1, C, 0, "transformer.h.%d.ln_1.weight", l);
        ADD(1, C, 0, "transformer.h.%d.ln_1.bias", l);
        ADD(2, C, 3 * C, "transformer.h.%d.attn.c_attn.weight", l);
        ADD(1, 3 * C, 0, "transformer.h.%d.attn.c_attn.bias", l);
        ADD(2, C, C, "transformer.h.%d.attn.c_proj.weight", l);
        ADD(1, C, 0, "transformer.h.%d.attn.c_proj.bias", l);
        ADD(1, C, 0, "transformer.h.%d.ln_2.weight", l);
        ADD(1, C, 0, "transformer.h.%d.ln_2.bias", l);
        ADD(2, C, 4 * C, "transformer.h.%d.mlp.c_fc.weight", l);
        ADD(1, 4 * C, 0, "transformer.h.%d.mlp.c_fc.bias", l);
        ADD(2, 4 * C, C, "transformer.h.%d.mlp.c_proj.weight", l);
        ADD(1, C, 0, "transformer.h.%d.mlp.c_proj.bias", l);
    }
    ADD(1, C, 0, "transformer.ln_f.weight");
    ADD(1, C, 0, "transformer.ln_f.bias");
#undef ADD
    return n;
}

START_TEST(test_round_trip)
{
    sl_context *ctx = th_context(3);
    sl_gpt2_config cfg = small_config();
    cfg.dropout = 0.1f; /* values that print with several digits */
    cfg.ln_eps = 3e-6f;
    sl_net *net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    perturb(net, 40);
    char dir[] = "/tmp/sl_gpt2_files_XXXXXX";
    ck_assert(mkdtemp(dir));
    char out[1100], path[1200];
    path_in(out, sizeof out, dir, "out"); /* created by the save */
    ck_assert_msg(sl_gpt2_save_pretrained(net, &cfg, out) == SL_OK, "%s", sl_last_error());

    sl_gpt2_config back;
    memset(&back, 0x5a, sizeof back);
    path_in(path, sizeof path, out, "config.json");
    ck_assert_msg(sl_gpt2_read_config(path, &back) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(back.layers, cfg.layers);
    ck_assert_int_eq(back.embd, cfg.embd);
    ck_assert_int_eq(back.heads, cfg.heads);
    ck_assert_int_eq(back.vocab, cfg.vocab);
    ck_assert_int_eq(back.context, cfg.context);
    ck_assert(back.dropout == cfg.dropout);
    ck_assert(back.ln_eps == cfg.ln_eps);
    ck_assert_int_eq(back.flash, 1);

    sl_net *other = th_gpt2(ctx, &back, SL_SCHEDULE_NONE);
    sl_load_report rep;
    path_in(path, sizeof path, out, "model.safetensors");
    ck_assert_msg(sl_load_model(other, path, NULL, &rep) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(rep.loaded, th_param_count(net));
    ck_assert_int_eq(rep.ignored + rep.missing + rep.unexpected + rep.mismatched, 0);
    th_params a, b;
    th_params_capture(net, &a);
    th_params_capture(other, &b);
    th_params_assert_identical(&a, &b, "after save_pretrained / read_config / load");
    th_params_free(&a);
    th_params_free(&b);
    size_t nl = (size_t)B * T * cfg.vocab;
    float *la = malloc(nl * sizeof(float)), *lb = malloc(nl * sizeof(float));
    logits_of(net, cfg.vocab, la);
    logits_of(other, cfg.vocab, lb);
    ck_assert(memcmp(la, lb, nl * sizeof(float)) == 0);
    free(la);
    free(lb);

    /* Saving again over the same directory replaces both files. */
    ck_assert_msg(sl_gpt2_save_pretrained(other, &back, out) == SL_OK, "%s", sl_last_error());
    sl_net_free(net);
    sl_net_free(other);
    sl_context_free(ctx);
    remove_dir(dir);
}
END_TEST

static const sl_json_value *json_get(const sl_json_doc *d, const char *key)
{
    for (int i = d->v[0].child; i >= 0; i = d->v[i].next)
        if (strcmp(d->v[i].key, key) == 0)
            return &d->v[i];
    return NULL;
}

static void expect_uint(const sl_json_doc *d, const char *key, uint64_t want)
{
    const sl_json_value *v = json_get(d, key);
    ck_assert_msg(v && v->type == SL_JSON_NUMBER && v->is_uint && v->uint == want,
                  "config.json: %s should be %llu", key, (unsigned long long)want);
}

static void expect_string(const sl_json_doc *d, const char *key, const char *want)
{
    const sl_json_value *v = json_get(d, key);
    ck_assert_msg(v && v->type == SL_JSON_STRING && strcmp(v->str, want) == 0,
                  "config.json: %s should be \"%s\"", key, want);
}

static void expect_number(const sl_json_doc *d, const char *key, float want)
{
    const sl_json_value *v = json_get(d, key);
    ck_assert_msg(v && v->type == SL_JSON_NUMBER && (float)v->number == want,
                  "config.json: %s should be %g", key, (double)want);
}

START_TEST(test_file_contents)
{
    sl_context *ctx = th_context(4);
    sl_gpt2_config cfg = small_config();
    sl_net *net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    char dir[] = "/tmp/sl_gpt2_files_XXXXXX";
    ck_assert(mkdtemp(dir));
    ck_assert_msg(sl_gpt2_save_pretrained(net, &cfg, dir) == SL_OK, "%s", sl_last_error());

    /* model.safetensors: metadata and exactly Hugging Face's tensors. */
    char path[1200];
    path_in(path, sizeof path, dir, "model.safetensors");
    uint8_t *buf;
    size_t bytes;
    ck_assert(sl_read_whole_file(path, "test", &buf, &bytes) == SL_OK);
    sl_st_file f;
    ck_assert_msg(sl_st_parse(buf, bytes, path, &f) == SL_OK, "%s", sl_last_error());
    const char *format = sl_st_metadata(&f, "format", NULL);
    ck_assert_msg(format && strcmp(format, "pt") == 0, "__metadata__ format \"pt\" is missing");
    enum { MAXN = 64 };
    char names[MAXN][96];
    int dims[MAXN][2], ndim[MAXN];
    int n = hf_names(&cfg, names, dims, ndim);
    ck_assert_int_eq(f.n, n);
    for (int i = 0; i < n; i++) {
        const sl_st_entry *e = sl_st_find(&f, names[i]);
        ck_assert_msg(e, "model.safetensors lacks %s", names[i]);
        ck_assert_int_eq(e->dtype, SL_ST_F32);
        ck_assert_int_eq(e->ndim, ndim[i]);
        for (int d = 0; d < ndim[i]; d++)
            ck_assert_uint_eq(e->dims[d], (uint64_t)dims[i][d]);
    }
    ck_assert(sl_st_find(&f, "lm_head.weight") == NULL);
    sl_st_release(&f);
    sl_free(buf);

    /* config.json: GPT2Config's keys. */
    path_in(path, sizeof path, dir, "config.json");
    ck_assert(sl_read_whole_file(path, "test", &buf, &bytes) == SL_OK);
    sl_json_doc d;
    ck_assert_msg(sl_json_parse((const char *)buf, bytes, &d) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(d.v[0].type, SL_JSON_OBJECT);
    expect_string(&d, "model_type", "gpt2");
    expect_string(&d, "activation_function", "gelu_new");
    const sl_json_value *arch = json_get(&d, "architectures");
    ck_assert(arch && arch->type == SL_JSON_ARRAY && arch->count == 1);
    ck_assert_str_eq(d.v[arch->child].str, "GPT2LMHeadModel");
    expect_uint(&d, "n_layer", 2);
    expect_uint(&d, "n_embd", 64);
    expect_uint(&d, "n_head", 4);
    expect_uint(&d, "vocab_size", 512);
    expect_uint(&d, "n_positions", 64);
    expect_uint(&d, "n_ctx", 64);
    expect_uint(&d, "eos_token_id", 511);
    expect_number(&d, "layer_norm_epsilon", 1e-5f);
    expect_number(&d, "embd_pdrop", 0.0f);
    expect_number(&d, "attn_pdrop", 0.0f);
    expect_number(&d, "resid_pdrop", 0.0f);
    const sl_json_value *tie = json_get(&d, "tie_word_embeddings");
    ck_assert(tie && tie->type == SL_JSON_TRUE);
    const sl_json_value *inner = json_get(&d, "n_inner");
    ck_assert(inner && inner->type == SL_JSON_NULL);
    /* Python writes 1e-05 and 0.0; so do we. */
    ck_assert(strstr((const char *)buf, "\"layer_norm_epsilon\": 1e-05,"));
    ck_assert(strstr((const char *)buf, "\"attn_pdrop\": 0.0,"));
    sl_json_release(&d);
    sl_free(buf);
    sl_net_free(net);
    sl_context_free(ctx);
    remove_dir(dir);
}
END_TEST

/* Writes the tensors of net as Hugging Face's older files have them: an
 * attention mask (BOOL [1, 1, context, context]) and masked_bias (F32
 * scalar) in every block, and lm_head.weight = wte.weight, or wte with
 * one value changed when `untie`; extra: a buffer beside no attention. */
static void write_hf_style(sl_net *net, const sl_gpt2_config *c, const char *path, int untie,
                           int extra)
{
    int n = th_param_count(net);
    int total = n + 2 * c->layers + 1 + extra;
    sl_st_tensor *t = calloc((size_t)total, sizeof *t);
    size_t ctx2 = (size_t)c->context * c->context;
    uint8_t *mask = malloc(ctx2);
    for (size_t i = 0; i < ctx2; i++)
        mask[i] = (uint8_t)(i % c->context <= i / c->context);
    static const float masked_bias = -1e4f;
    float *head = NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        ck_assert(sl_net_param(net, i, &p) == SL_OK);
        snprintf(t[k].name, sizeof t[k].name, "%s", p.name);
        t[k].dtype = SL_ST_F32;
        t[k].ndim = p.ndim;
        memcpy(t[k].dims, p.dims, sizeof p.dims);
        t[k].data = p.data;
        t[k].bytes = p.count * sizeof(float);
        k++;
        if (strcmp(p.name, "transformer.wte.weight") == 0) {
            head = malloc(p.count * sizeof(float));
            memcpy(head, p.data, p.count * sizeof(float));
            if (untie)
                head[17] += 1e-3f;
            t[k] = t[k - 1];
            snprintf(t[k].name, sizeof t[k].name, "lm_head.weight");
            t[k].data = head;
            k++;
        }
        int layer;
        char rest[64];
        if (sscanf(p.name, "transformer.h.%d.%63s", &layer, rest) == 2 &&
            strcmp(rest, "ln_1.weight") == 0) {
            for (int b = 0; b < 1 + (extra && layer == 0); b++) {
                sl_st_tensor *m = &t[k++];
                /* extra: a mask for a block this network does not have */
                snprintf(m->name, sizeof m->name, "transformer.h.%d.attn.bias",
                         b ? c->layers + 5 : layer);
                m->dtype = SL_ST_BOOL;
                m->ndim = 4;
                m->dims[0] = m->dims[1] = 1;
                m->dims[2] = m->dims[3] = c->context;
                m->data = mask;
                m->bytes = ctx2;
            }
            sl_st_tensor *s = &t[k++];
            snprintf(s->name, sizeof s->name, "transformer.h.%d.attn.masked_bias", layer);
            s->dtype = SL_ST_F32;
            s->ndim = 0;
            s->data = &masked_bias;
            s->bytes = sizeof masked_bias;
        }
    }
    ck_assert_int_eq(k, total);
    static const char *const meta[][2] = {{"format", "pt"}};
    ck_assert_msg(sl_st_write(path, t, k, meta, 1, "test") == SL_OK, "%s", sl_last_error());
    free(head);
    free(mask);
    free(t);
}

START_TEST(test_hf_style_file)
{
    sl_context *ctx = th_context(5);
    sl_gpt2_config cfg = small_config();
    sl_net *src = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    perturb(src, 90);
    char dir[] = "/tmp/sl_gpt2_files_XXXXXX";
    ck_assert(mkdtemp(dir));
    char tied[1200], untied[1200], stray[1200];
    path_in(tied, sizeof tied, dir, "tied.safetensors");
    path_in(untied, sizeof untied, dir, "untied.safetensors");
    path_in(stray, sizeof stray, dir, "stray.safetensors");
    write_hf_style(src, &cfg, tied, 0, 0);
    write_hf_style(src, &cfg, untied, 1, 0);
    write_hf_style(src, &cfg, stray, 0, 1);

    /* Buffers and a tied head: accepted, counted as ignored. */
    sl_net *dst = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    sl_load_report rep;
    ck_assert_msg(sl_load_model(dst, tied, NULL, &rep) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(rep.loaded, th_param_count(src));
    ck_assert_int_eq(rep.ignored, 2 * cfg.layers + 1);
    ck_assert_int_eq(rep.missing + rep.unexpected + rep.mismatched, 0);
    th_params a, b, fresh;
    th_params_capture(src, &a);
    th_params_capture(dst, &b);
    th_params_assert_identical(&a, &b, "HF-style file");
    th_params_free(&b);

    /* An untied head: refused, nothing loaded. */
    sl_net *other = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    th_params_capture(other, &fresh);
    th_assert_error(sl_load_model(other, untied, NULL, &rep), SL_ERR_FORMAT, "lm_head.weight");
    ck_assert(strstr(sl_last_error(), "untied LM head cannot load"));
    ck_assert(strstr(sl_last_error(), "transformer.wte.weight"));
    ck_assert_int_eq(rep.mismatched, 1);
    th_params_capture(other, &b);
    th_params_assert_identical(&fresh, &b, "after a refused untied head");
    th_params_free(&b);
    /* Non-strict: the rest loads, the head is reported. */
    sl_load_options lax = sl_load_defaults();
    lax.strict = 0;
    ck_assert_msg(sl_load_model(other, untied, &lax, &rep) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(rep.mismatched, 1);
    ck_assert_int_eq(rep.loaded, th_param_count(src));
    th_params_capture(other, &b);
    th_params_assert_identical(&a, &b, "non-strict load of an untied head");
    th_params_free(&b);
    sl_net_free(other);

    /* A buffer beside no attention of the network is unexpected. */
    other = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    th_assert_error(sl_load_model(other, stray, NULL, &rep), SL_ERR_NOT_FOUND,
                    "transformer.h.7.attn.bias");
    ck_assert_int_eq(rep.unexpected, 1);
    th_params_capture(other, &b);
    th_params_assert_identical(&fresh, &b, "after a refused stray buffer");
    th_params_free(&b);
    sl_net_free(other);

    /* A network without an LM head does not take lm_head.weight. */
    sl_net *bare;
    ck_assert(sl_sequential(ctx, 1, &bare) == SL_OK);
    ck_assert(sl_net_add(bare, "transformer", sl_embedding(cfg.vocab, cfg.context, cfg.embd)) ==
              SL_OK);
    lax.strict = 0;
    ck_assert_msg(sl_load_model(bare, tied, &lax, &rep) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(rep.loaded, 2);
    ck_assert_int_eq(rep.ignored, 0); /* no c_attn here: the buffers are unexpected too */
    ck_assert_int_eq(rep.unexpected, th_param_count(src) - 2 + 2 * cfg.layers + 1);
    sl_net_free(bare);

    th_params_free(&a);
    th_params_free(&fresh);
    sl_net_free(src);
    sl_net_free(dst);
    sl_context_free(ctx);
    remove_dir(dir);
}
END_TEST

/* read_config on `text` fails with want and fragment, *out untouched. */
static void config_fails(const char *dir, const char *text, sl_status want, const char *fragment)
{
    char path[1200];
    path_in(path, sizeof path, dir, "config.json");
    write_text(path, text);
    sl_gpt2_config out, before;
    memset(&out, 0x3c, sizeof out);
    before = out;
    th_assert_error(sl_gpt2_read_config(path, &out), want, fragment);
    ck_assert(memcmp(&out, &before, sizeof out) == 0);
}

START_TEST(test_read_config)
{
    char dir[] = "/tmp/sl_gpt2_files_XXXXXX";
    ck_assert(mkdtemp(dir));
    char path[1200];
    path_in(path, sizeof path, dir, "config.json");
    /* A minimal HF config: GPT2Config's defaults fill the rest. */
    write_text(path, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
                     "\"vocab_size\": 1000, \"n_positions\": 128}");
    sl_gpt2_config c;
    ck_assert_msg(sl_gpt2_read_config(path, &c) == SL_OK, "%s", sl_last_error());
    ck_assert_int_eq(c.layers, 3);
    ck_assert_int_eq(c.embd, 96);
    ck_assert_int_eq(c.heads, 6);
    ck_assert_int_eq(c.vocab, 1000);
    ck_assert_int_eq(c.context, 128);
    ck_assert(c.dropout == 0.1f);
    ck_assert(c.ln_eps == 1e-5f);

    config_fails(dir, "{\"model_type\": \"llama\", \"n_layer\": 3}", SL_ERR_UNSUPPORTED,
                 "model_type \"llama\"");
    config_fails(dir, "{\"n_layer\": 3}", SL_ERR_FORMAT, "no \"model_type\"");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, "
                      "\"vocab_size\": 1000, \"n_positions\": 128}",
                 SL_ERR_FORMAT, "no \"n_head\"");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3.5, \"n_embd\": 96, \"n_head\": 6, "
                      "\"vocab_size\": 1000, \"n_positions\": 128}",
                 SL_ERR_FORMAT, "\"n_layer\" must be an integer");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 5, "
                      "\"vocab_size\": 1000, \"n_positions\": 128}",
                 SL_ERR_FORMAT, "not a multiple of n_head");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
                      "\"vocab_size\": 1000, \"n_positions\": 128, \"activation_function\": "
                      "\"gelu\"}",
                 SL_ERR_UNSUPPORTED, "activation_function \"gelu\"");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
                      "\"vocab_size\": 1000, \"n_positions\": 128, \"tie_word_embeddings\": false}",
                 SL_ERR_UNSUPPORTED, "tie_word_embeddings");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
                      "\"vocab_size\": 1000, \"n_positions\": 128, \"n_inner\": 100}",
                 SL_ERR_UNSUPPORTED, "n_inner");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
                      "\"vocab_size\": 1000, \"n_positions\": 128, \"attn_pdrop\": 0.2}",
                 SL_ERR_UNSUPPORTED, "differ");
    config_fails(dir, "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 96, \"n_head\": 6, "
                      "\"vocab_size\": 1000, \"n_positions\": 128, \"layer_norm_epsilon\": -1}",
                 SL_ERR_FORMAT, "layer_norm_epsilon");
    config_fails(dir, "{\"model_type\": \"gpt2\",", SL_ERR_FORMAT, "not valid JSON");
    config_fails(dir, "[1, 2]", SL_ERR_FORMAT, "not a JSON object");
    path_in(path, sizeof path, dir, "absent.json");
    sl_gpt2_config out;
    th_assert_error(sl_gpt2_read_config(path, &out), SL_ERR_IO, "absent.json");
    th_assert_error(sl_gpt2_read_config(NULL, &out), SL_ERR_INVALID_ARG, "NULL");
    remove_dir(dir);
}
END_TEST

START_TEST(test_save_errors)
{
    sl_context *ctx = th_context(6);
    sl_gpt2_config cfg = small_config();
    sl_net *net = th_gpt2(ctx, &cfg, SL_SCHEDULE_NONE);
    char dir[] = "/tmp/sl_gpt2_files_XXXXXX";
    ck_assert(mkdtemp(dir));
    sl_gpt2_config wrong = cfg;
    wrong.layers = 3;
    th_assert_error(sl_gpt2_save_pretrained(net, &wrong, dir), SL_ERR_INVALID_ARG,
                    "GPT-2 with 3 layer(s) has 40");
    wrong = cfg;
    wrong.layers = 1;
    th_assert_error(sl_gpt2_save_pretrained(net, &wrong, dir), SL_ERR_INVALID_ARG,
                    "transformer.h.1.");
    wrong = cfg;
    wrong.vocab = 500;
    th_assert_error(sl_gpt2_save_pretrained(net, &wrong, dir), SL_ERR_SHAPE,
                    "transformer.wte.weight");
    wrong = cfg;
    wrong.heads = 5;
    th_assert_error(sl_gpt2_save_pretrained(net, &wrong, dir), SL_ERR_INVALID_ARG,
                    "not a valid GPT-2 config");
    char path[1200];
    path_in(path, sizeof path, dir, "model.safetensors");
    ck_assert_msg(access(path, F_OK) != 0, "a refused save wrote model.safetensors");
    path_in(path, sizeof path, dir, "no/such/dir");
    th_assert_error(sl_gpt2_save_pretrained(net, &cfg, path), SL_ERR_IO, "no/such/dir");
    th_assert_error(sl_gpt2_save_pretrained(NULL, &cfg, dir), SL_ERR_INVALID_ARG, "NULL");

    /* A network that is not GPT-2 at all. */
    sl_net *other;
    ck_assert(sl_sequential(ctx, 1, &other) == SL_OK);
    ck_assert(sl_net_add(other, "transformer", sl_embedding(cfg.vocab, cfg.context, cfg.embd)) ==
              SL_OK);
    th_assert_error(sl_gpt2_save_pretrained(other, &cfg, dir), SL_ERR_INVALID_ARG, "has 2 tensors");
    sl_net_free(other);
    sl_net_free(net);
    sl_context_free(ctx);
    remove_dir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt2_files");
    TCase *t = tcase_create("gpt2_files");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_round_trip);
    tcase_add_test(t, test_file_contents);
    tcase_add_test(t, test_hf_style_file);
    tcase_add_test(t, test_read_config);
    tcase_add_test(t, test_save_errors);
    suite_add_tcase(s, t);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
