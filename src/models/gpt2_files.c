/*
 * gpt2_files.c — GPT-2 in Hugging Face's directory layout: a folder with
 * model.safetensors (the tensors of sl_save_model, whose names and
 * layouts already are GPT2LMHeadModel's) and config.json (GPT2Config's
 * keys), as save_pretrained writes it and from_pretrained reads it.
 *
 * Stage: models (above io): the tensors go through sl_save_model, the
 * config through io's atomic writer and strict JSON reader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "models/models.h"

#define SAVE_FN "sl_gpt2_save_pretrained"
#define READ_FN "sl_gpt2_read_config"

/* ---- checking a network against a config ---- */

/* The shape GPT2LMHeadModel gives the tensor `name` under config c, into
 * dims; its ndim, or 0 when no tensor of that name belongs to the model. */
static int gpt2_tensor_shape(const sl_gpt2_config *c, const char *name, int dims[2])
{
    int C = c->embd;
    if (strcmp(name, "transformer.wte.weight") == 0) {
        dims[0] = c->vocab;
        dims[1] = C;
        return 2;
    }
    if (strcmp(name, "transformer.wpe.weight") == 0) {
        dims[0] = c->context;
        dims[1] = C;
        return 2;
    }
    if (strcmp(name, "transformer.ln_f.weight") == 0 || strcmp(name, "transformer.ln_f.bias") == 0) {
        dims[0] = C;
        return 1;
    }
    int layer = -1, used = 0;
    if (sscanf(name, "transformer.h.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0 ||
        layer >= c->layers)
        return 0;
    char canonical[64];
    snprintf(canonical, sizeof canonical, "transformer.h.%d.", layer);
    if (strncmp(name, canonical, strlen(canonical)) != 0) /* "h.01." and the like */
        return 0;
    static const struct {
        const char *suffix;
        int in, out; /* multiples of C; out 0: a vector of `in` C */
    } table[] = {
        {"ln_1.weight", 1, 0},        {"ln_1.bias", 1, 0},
        {"attn.c_attn.weight", 1, 3}, {"attn.c_attn.bias", 3, 0},
        {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 1, 0},
        {"ln_2.weight", 1, 0},        {"ln_2.bias", 1, 0},
        {"mlp.c_fc.weight", 1, 4},    {"mlp.c_fc.bias", 4, 0},
        {"mlp.c_proj.weight", 4, 1},  {"mlp.c_proj.bias", 1, 0},
    };
    for (size_t k = 0; k < sizeof table / sizeof *table; k++) {
        if (strcmp(name + used, table[k].suffix) != 0)
            continue;
        dims[0] = table[k].in * C;
        if (!table[k].out)
            return 1;
        dims[1] = table[k].out * C;
        return 2;
    }
    return 0;
}

#define GPT2_TENSORS_PER_BLOCK 12

/* The network's tensors are exactly GPT-2's under c: same count, each
 * name one of the model's with its shape. */
static sl_status check_net_matches(sl_net *net, const sl_gpt2_config *c)
{
    int n = 0;
    sl_status st = sl_net_param_count(net, &n);
    if (st != SL_OK)
        return sl_set_error(st, "%s: %s", SAVE_FN, sl_last_error());
    int expected = 4 + GPT2_TENSORS_PER_BLOCK * c->layers;
    for (int i = 0; i < n; i++) {
        sl_param_info p;
        if ((st = sl_net_param(net, i, &p)) != SL_OK)
            return sl_set_error(st, "%s: %s", SAVE_FN, sl_last_error());
        int dims[2], nd = gpt2_tensor_shape(c, p.name, dims);
        if (nd == 0)
            return sl_set_error(SL_ERR_INVALID_ARG,
                                "%s: the network has a tensor '%s', which GPT-2 with %d layer(s) "
                                "has not (is it the network sl_model_gpt2 built with this config?)",
                                SAVE_FN, p.name, c->layers);
        int same = p.ndim == nd && p.dims[0] == dims[0] && (nd == 1 || p.dims[1] == dims[1]);
        if (!same)
            return sl_set_error(SL_ERR_SHAPE,
                                "%s: tensor '%s' has %d dimension(s) [%d%s], the config (embd %d, "
                                "vocab %d, context %d) gives it [%d%s]; save with the config the "
                                "network was built with",
                                SAVE_FN, p.name, p.ndim, p.dims[0], p.ndim > 1 ? ", ..." : "",
                                c->embd, c->vocab, c->context, dims[0], nd > 1 ? ", ..." : "");
    }
    if (n != expected)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "%s: the network has %d tensors, GPT-2 with %d layer(s) has %d",
                            SAVE_FN, n, c->layers, expected);
    return SL_OK;
}

/* ---- writing config.json ---- */

/* The shortest decimal ("%.Ng") that reads back as the float x. */
static void shortest_float(char *buf, size_t size, float x)
{
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".eEn")) /* a float in JSON: 0 -> 0.0, as Python writes it */
        snprintf(buf + strlen(buf), size - strlen(buf), ".0");
}

/* GPT2Config's to_json_string: keys sorted, two-space indent. */
static int config_text(const sl_gpt2_config *c, char *out, size_t size)
{
    char eps[32], drop[32];
    shortest_float(eps, sizeof eps, c->ln_eps);
    shortest_float(drop, sizeof drop, c->dropout);
    /* GPT-2's <|endoftext|> is token 50256; a smaller vocabulary ends at vocab - 1. */
    int eos = c->vocab > 50256 ? 50256 : c->vocab - 1;
    int n = snprintf(out, size,
                     "{\n"
                     "  \"activation_function\": \"gelu_new\",\n"
                     "  \"architectures\": [\n"
                     "    \"GPT2LMHeadModel\"\n"
                     "  ],\n"
                     "  \"attn_pdrop\": %s,\n"
                     "  \"bos_token_id\": %d,\n"
                     "  \"embd_pdrop\": %s,\n"
                     "  \"eos_token_id\": %d,\n"
                     "  \"initializer_range\": 0.02,\n"
                     "  \"layer_norm_epsilon\": %s,\n"
                     "  \"model_type\": \"gpt2\",\n"
                     "  \"n_ctx\": %d,\n"
                     "  \"n_embd\": %d,\n"
                     "  \"n_head\": %d,\n"
                     "  \"n_inner\": null,\n"
                     "  \"n_layer\": %d,\n"
                     "  \"n_positions\": %d,\n"
                     "  \"reorder_and_upcast_attn\": false,\n"
                     "  \"resid_pdrop\": %s,\n"
                     "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                     "  \"scale_attn_weights\": true,\n"
                     "  \"summary_activation\": null,\n"
                     "  \"summary_first_dropout\": 0.1,\n"
                     "  \"summary_proj_to_labels\": true,\n"
                     "  \"summary_type\": \"cls_index\",\n"
                     "  \"summary_use_proj\": true,\n"
                     "  \"tie_word_embeddings\": true,\n"
                     "  \"torch_dtype\": \"float32\",\n"
                     "  \"use_cache\": true,\n"
                     "  \"vocab_size\": %d\n"
                     "}\n",
                     drop, eos, drop, eos, eps, c->context, c->embd, c->heads, c->layers,
                     c->context, drop, c->vocab);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = sl_malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static int config_valid(const sl_gpt2_config *c)
{
    return c->layers >= 1 && c->layers <= SL_GPT2_MAX_LAYERS && c->embd >= 1 &&
           c->embd <= SL_GPT2_MAX_EMBD && c->heads >= 1 && c->vocab >= 1 &&
           c->vocab <= SL_GPT2_MAX_VOCAB && c->context >= 1 && c->context <= SL_GPT2_MAX_CONTEXT &&
           c->embd % c->heads == 0 && c->dropout >= 0.0f && c->dropout < 1.0f && c->ln_eps > 0.0f;
}

sl_status sl_gpt2_save_pretrained(sl_net *net, const sl_gpt2_config *cfg, const char *dir)
{
    if (!net || !cfg || !dir || !*dir)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network, config or directory is NULL or empty",
                            SAVE_FN);
    if (!config_valid(cfg))
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "%s: not a valid GPT-2 config (layers %d, embd %d, heads %d, vocab %d, "
                            "context %d, dropout %g, ln_eps %g; see sl_model_gpt2)",
                            SAVE_FN, cfg->layers, cfg->embd, cfg->heads, cfg->vocab, cfg->context,
                            (double)cfg->dropout, (double)cfg->ln_eps);
    sl_status st = check_net_matches(net, cfg);
    if (st != SL_OK)
        return st;
    char text[2048];
    int len = config_text(cfg, text, sizeof text);
    if (len < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: config.json does not fit its buffer", SAVE_FN);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return sl_set_error(SL_ERR_IO, "%s: cannot create directory '%s': %s", SAVE_FN, dir,
                            strerror(errno));
    char *model = join_path(dir, "model.safetensors"), *config = join_path(dir, "config.json");
    if (!model || !config) {
        sl_free(model);
        sl_free(config);
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory", SAVE_FN);
    }
    st = sl_save_model(net, model);
    if (st != SL_OK)
        st = sl_set_error(st, "%s: %s", SAVE_FN, sl_last_error());
    sl_atomic_file af;
    if (st == SL_OK && (st = sl_atomic_open(&af, config, SAVE_FN)) == SL_OK) {
        af.expected_bytes = (uint64_t)len;
        st = sl_atomic_write(&af, text, (size_t)len);
        if (st == SL_OK)
            st = sl_atomic_commit(&af);
        else
            sl_atomic_abort(&af);
    }
    sl_free(model);
    sl_free(config);
    return st;
}

/* ---- reading config.json ---- */

typedef struct config_reader {
    const sl_json_doc *doc;
    const char *path;
} config_reader;

static const sl_json_value *member(const config_reader *r, const char *key)
{
    const sl_json_value *root = &r->doc->v[0];
    const sl_json_value *found = NULL;
    for (int i = root->child; i >= 0; i = r->doc->v[i].next) {
        const sl_json_value *m = &r->doc->v[i];
        if (m->key_len == strlen(key) && strcmp(m->key, key) == 0)
            found = m; /* Python's json keeps the last of repeated keys */
    }
    return found;
}

/* A required integer from 1 to max (sl_model_gpt2's bound of the field). */
static sl_status read_int(const config_reader *r, const char *key, int max, int *out)
{
    const sl_json_value *v = member(r, key);
    if (!v)
        return sl_set_error(SL_ERR_FORMAT,
                            "%s: '%s' has no \"%s\" (a GPT-2 config.json names n_layer, n_embd, "
                            "n_head, vocab_size and n_positions)", READ_FN, r->path, key);
    if (v->type != SL_JSON_NUMBER || !v->is_uint || v->uint < 1 || v->uint > (uint64_t)max)
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s': \"%s\" must be an integer from 1 to %d",
                            READ_FN, r->path, key, max);
    *out = (int)v->uint;
    return SL_OK;
}

/* An optional number in [lo, hi), *out unchanged when absent. */
static sl_status read_number(const config_reader *r, const char *key, double lo, double hi,
                             double *out)
{
    const sl_json_value *v = member(r, key);
    if (!v)
        return SL_OK;
    if (v->type != SL_JSON_NUMBER || !(v->number >= lo && v->number < hi))
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s': \"%s\" must be a number in [%g, %g)",
                            READ_FN, r->path, key, lo, hi);
    *out = v->number;
    return SL_OK;
}

/* An optional boolean that this GPT-2 supports only at `want`. */
static sl_status require_bool(const config_reader *r, const char *key, int want,
                              const char *why)
{
    const sl_json_value *v = member(r, key);
    if (!v)
        return SL_OK;
    if (v->type != SL_JSON_TRUE && v->type != SL_JSON_FALSE)
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s': \"%s\" must be true or false", READ_FN,
                            r->path, key);
    if ((v->type == SL_JSON_TRUE) != want)
        return sl_set_error(SL_ERR_UNSUPPORTED, "%s: '%s': \"%s\": %s is not supported (%s)",
                            READ_FN, r->path, key, want ? "false" : "true", why);
    return SL_OK;
}

static sl_status read_tree(const config_reader *r, sl_gpt2_config *c)
{
    const sl_json_value *root = &r->doc->v[0];
    if (root->type != SL_JSON_OBJECT)
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' is not a JSON object", READ_FN, r->path);
    const sl_json_value *type = member(r, "model_type");
    if (!type)
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' has no \"model_type\" (not a Hugging Face "
                            "config.json?)", READ_FN, r->path);
    if (type->type != SL_JSON_STRING || type->len != 4 || strcmp(type->str, "gpt2") != 0) {
        char shown[64] = "a non-string";
        if (type->type == SL_JSON_STRING)
            sl_printable(shown, sizeof shown, type->str, type->len);
        return sl_set_error(SL_ERR_UNSUPPORTED,
                            "%s: '%s' describes model_type \"%s\"; only \"gpt2\" "
                            "(GPT2LMHeadModel) is supported", READ_FN, r->path, shown);
    }
    sl_status st;
    if ((st = read_int(r, "n_layer", SL_GPT2_MAX_LAYERS, &c->layers)) != SL_OK ||
        (st = read_int(r, "n_embd", SL_GPT2_MAX_EMBD, &c->embd)) != SL_OK ||
        (st = read_int(r, "n_head", SL_GPT2_MAX_EMBD, &c->heads)) != SL_OK ||
        (st = read_int(r, "vocab_size", SL_GPT2_MAX_VOCAB, &c->vocab)) != SL_OK ||
        (st = read_int(r, "n_positions", SL_GPT2_MAX_CONTEXT, &c->context)) != SL_OK)
        return st;
    if (c->embd % c->heads != 0)
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s': n_embd %d is not a multiple of n_head %d",
                            READ_FN, r->path, c->embd, c->heads);
    /* GPT2Config's defaults where a key is absent. */
    double eps = 1e-5, pdrop[3] = {0.1, 0.1, 0.1};
    static const char *const drops[3] = {"embd_pdrop", "attn_pdrop", "resid_pdrop"};
    if ((st = read_number(r, "layer_norm_epsilon", 1e-30, 1.0, &eps)) != SL_OK)
        return st;
    for (int k = 0; k < 3; k++)
        if ((st = read_number(r, drops[k], 0.0, 1.0, &pdrop[k])) != SL_OK)
            return st;
    if (pdrop[0] != pdrop[1] || pdrop[1] != pdrop[2])
        return sl_set_error(SL_ERR_UNSUPPORTED,
                            "%s: '%s': embd_pdrop %g, attn_pdrop %g and resid_pdrop %g differ; "
                            "sl_gpt2_config has one dropout rate for all three (set them equal)",
                            READ_FN, r->path, pdrop[0], pdrop[1], pdrop[2]);
    const sl_json_value *act = member(r, "activation_function");
    if (act && (act->type != SL_JSON_STRING ||
                (strcmp(act->str, "gelu_new") != 0 && strcmp(act->str, "gelu_pytorch_tanh") != 0))) {
        char shown[64] = "a non-string";
        if (act->type == SL_JSON_STRING)
            sl_printable(shown, sizeof shown, act->str, act->len);
        return sl_set_error(SL_ERR_UNSUPPORTED,
                            "%s: '%s': activation_function \"%s\" is not supported (GPT-2's tanh "
                            "GELU, \"gelu_new\" or \"gelu_pytorch_tanh\", is)", READ_FN, r->path,
                            shown);
    }
    const sl_json_value *inner = member(r, "n_inner");
    if (inner && inner->type != SL_JSON_NULL &&
        !(inner->type == SL_JSON_NUMBER && inner->is_uint && inner->uint == 4 * (uint64_t)c->embd))
        return sl_set_error(SL_ERR_UNSUPPORTED,
                            "%s: '%s': n_inner must be null or 4 * n_embd = %llu (the MLP's width)",
                            READ_FN, r->path, 4 * (unsigned long long)c->embd);
    if ((st = require_bool(r, "tie_word_embeddings", 1, "the LM head is tied to wte")) != SL_OK ||
        (st = require_bool(r, "scale_attn_weights", 1, "attention scales by 1/sqrt(head size)")) !=
            SL_OK ||
        (st = require_bool(r, "scale_attn_by_inverse_layer_idx", 0,
                           "no per-layer attention scaling")) != SL_OK ||
        (st = require_bool(r, "add_cross_attention", 0, "no cross-attention")) != SL_OK)
        return st;
    c->ln_eps = (float)eps;
    c->dropout = (float)pdrop[0];
    return SL_OK;
}

sl_status sl_gpt2_read_config(const char *config_json, sl_gpt2_config *out)
{
    if (!config_json || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: path or output is NULL", READ_FN);
    uint8_t *buf = NULL;
    size_t bytes = 0;
    sl_status st = sl_read_whole_file(config_json, READ_FN, &buf, &bytes);
    if (st != SL_OK)
        return st;
    sl_json_doc doc;
    st = sl_json_parse((const char *)buf, bytes, &doc);
    if (st != SL_OK) {
        st = sl_set_error(st, "%s: '%s' is not valid JSON: %s", READ_FN, config_json,
                          sl_last_error());
        sl_free(buf);
        return st;
    }
    sl_gpt2_config c = sl_gpt2_defaults();
    config_reader r = {&doc, config_json};
    st = read_tree(&r, &c);
    if (st == SL_OK)
        *out = c;
    sl_json_release(&doc);
    sl_free(buf);
    return st;
}
