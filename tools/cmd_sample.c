/*
 * cmd_sample.c — `sublinear sample`: text from a GPT-2 model file with
 * the library's KV-cache generator (sl_gpt2_generate, models.h) and
 * GPT-2's tokenizer (text.h).
 *
 * The model's shape comes from a Hugging Face config.json (--config; the
 * file may then be Hugging Face's model.safetensors) or from the same
 * flags as `train --model gpt2` (--layers --embd --heads --vocab-size
 * --context; the vocabulary size is --vocab-size here because --vocab
 * names encoder.json). The prompt is encoded, printed, and the new text
 * printed token by token as it is chosen; --json prints one object with
 * the ids and the text instead. The network is in inference mode from the
 * start, so it never holds gradients, and the generator (whose memory
 * check covers the parameters and the KV cache) is made before the
 * weights are loaded into it. Its options (cli_option) are its own.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char g_sample_help[] =
    "usage: sublinear sample --model-file FILE [--config config.json]\n"
    "                        [--vocab encoder.json --merges vocab.bpe] [--prompt TEXT]\n"
    "                        [--tokens N] [--temperature X] [--top-k K] [--seed S]\n"
    "                        [--device cpu|cuda [--gpu N]] [--no-memory-check] [--json]\n"
    "Generates text from a GPT-2 model (sublinear train --model gpt2 --save-model, or\n"
    "Hugging Face's model.safetensors with its config.json) with a KV cache: each new\n"
    "token costs one row through the network. Prints the prompt, then the new text as\n"
    "it comes.\n"
    "  --model-file FILE   the weights (safetensors or the library's model file)\n"
    "  --config FILE       Hugging Face's config.json giving the shape; without it:\n"
    "  --layers N --embd N --heads N --vocab-size N --context N\n"
    "                      the shape as `train --model gpt2` takes it (defaults: GPT-2\n"
    "                      small, 12 / 768 / 12 / 50257 / 1024)\n"
    "  --vocab FILE        encoder.json (default data/gpt2/encoder.json, which\n"
    "                      scripts/setup.sh installs)\n"
    "  --merges FILE       vocab.bpe (default data/gpt2/vocab.bpe)\n"
    "  --prompt TEXT       the text to continue (default: empty, which starts from\n"
    "                      <|endoftext|> as GPT-2 does)\n"
    "  --tokens N          new tokens (default 32); prompt + new must fit the context\n"
    "  --temperature X     0: greedy (arg-max); > 0: sample softmax(logits / X)\n"
    "                      (default 1)\n"
    "  --top-k K           sample among the K likeliest tokens only (default 0: all)\n"
    "  --seed S            the sampler's seed (default 0): the same seed, the same text\n"
    "  --threads N         CPU threads (default 0: all cores)\n"
    "  --device cpu|cuda   where to run (default cpu; cuda needs a build with CUDA)\n"
    "  --gpu N             the CUDA device (default 0; implies --device cuda)\n"
    "  --no-memory-check   skip the check that the parameters and the KV cache fit\n"
    "                      in memory before they are allocated\n"
    "  --json              print {\"prompt_ids\", \"ids\", \"prompt\", \"text\", ...,\n"
    "                      \"memory\": the bytes the network holds}\n";

typedef struct sample_options {
    const char *model_file, *config, *vocab, *merges, *prompt;
    int tokens, top_k, threads, gpu, gpu_set, cuda, json, no_memory_check;
    float temperature;
    uint64_t seed;
    sl_gpt2_config shape;
    int shape_flags;
} sample_options;

enum {
    /* integers, in the order of g_ints */
    OPT_TOKENS, OPT_TOP_K, OPT_THREADS, OPT_GPU, OPT_LAYERS, OPT_EMBD, OPT_HEADS, OPT_VOCAB_SIZE,
    OPT_CONTEXT,
    /* words, in the order of string_option's list */
    OPT_MODEL_FILE, OPT_CONFIG, OPT_VOCAB, OPT_MERGES, OPT_PROMPT,
    OPT_TEMPERATURE, OPT_SEED, OPT_DEVICE, OPT_JSON, OPT_NO_MEMORY_CHECK,
};

static const cli_option g_sample_options[] = {
    {"--tokens", OPT_TOKENS, 0, 1},         {"--top-k", OPT_TOP_K, 0, 1},
    {"--threads", OPT_THREADS, 0, 1},       {"--gpu", OPT_GPU, 0, 1},
    {"--layers", OPT_LAYERS, 0, 1},         {"--embd", OPT_EMBD, 0, 1},
    {"--heads", OPT_HEADS, 0, 1},           {"--vocab-size", OPT_VOCAB_SIZE, 0, 1},
    {"--context", OPT_CONTEXT, 0, 1},       {"--model-file", OPT_MODEL_FILE, 0, 1},
    {"--config", OPT_CONFIG, 0, 1},         {"--vocab", OPT_VOCAB, 0, 1},
    {"--merges", OPT_MERGES, 0, 1},         {"--prompt", OPT_PROMPT, 0, 1},
    {"--temperature", OPT_TEMPERATURE, 0, 1}, {"--seed", OPT_SEED, 0, 1},
    {"--device", OPT_DEVICE, 0, 1},         {"--json", OPT_JSON, 0, 0},
    {"--no-memory-check", OPT_NO_MEMORY_CHECK, 0, 0},
    {NULL, 0, 0, 0},
};

/* The bounds of the integer options; shape: one of the model's shape. */
static const struct {
    long lo, hi;
    int shape;
} g_ints[] = {
    [OPT_TOKENS] = {0, 1L << 30, 0},  [OPT_TOP_K] = {0, 1L << 30, 0},
    [OPT_THREADS] = {0, 4096, 0},     [OPT_GPU] = {0, 1024, 0},
    [OPT_LAYERS] = {1, 1L << 20, 1},  [OPT_EMBD] = {1, 1L << 20, 1},
    [OPT_HEADS] = {1, 1L << 20, 1},   [OPT_VOCAB_SIZE] = {1, 1L << 30, 1},
    [OPT_CONTEXT] = {1, 1L << 24, 1},
};

static void sample_defaults(const cli_command *self, void *opts)
{
    (void)self;
    sample_options *o = opts;
    o->vocab = "data/gpt2/encoder.json";
    o->merges = "data/gpt2/vocab.bpe";
    o->prompt = "";
    o->tokens = 32;
    o->temperature = 1.0f;
    o->shape = sl_gpt2_defaults();
}

static int sample_set_int(const cli_command *self, sample_options *o, const cli_option *opt,
                   const char *v)
{
    int *dest[] = {&o->tokens, &o->top_k, &o->threads, &o->gpu, &o->shape.layers,
                   &o->shape.embd, &o->shape.heads, &o->shape.vocab, &o->shape.context};
    if (cli_parse_int(v, g_ints[opt->id].lo, g_ints[opt->id].hi, dest[opt->id]) != 0)
        return cli_usage_error(self, "%s wants an integer in [%ld, %ld], not '%s'", opt->name,
                               g_ints[opt->id].lo, g_ints[opt->id].hi, v);
    o->shape_flags |= g_ints[opt->id].shape;
    o->gpu_set |= opt->id == OPT_GPU;
    return 0;
}

static int sample_set(const cli_command *self, void *opts, const cli_option *opt, const char *v)
{
    sample_options *o = opts;
    const char **words[] = {&o->model_file, &o->config, &o->vocab, &o->merges, &o->prompt};
    if (opt->id <= OPT_CONTEXT)
        return sample_set_int(self, o, opt, v);
    if (opt->id <= OPT_PROMPT) {
        *words[opt->id - OPT_MODEL_FILE] = v;
        return 0;
    }
    char *end;
    errno = 0;
    switch (opt->id) {
    case OPT_TEMPERATURE: {
        double d = strtod(v, &end);
        if (errno || end == v || *end || !(d >= 0.0 && d < 1e30))
            return cli_usage_error(self, "%s wants a number >= 0, not '%s'", opt->name, v);
        o->temperature = (float)d;
        return 0;
    }
    case OPT_SEED: {
        unsigned long long seed = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-')
            return cli_usage_error(self, "--seed wants a non-negative integer, not '%s'", v);
        o->seed = (uint64_t)seed;
        return 0;
    }
    case OPT_DEVICE:
        if (strcmp(v, "cuda") != 0 && strcmp(v, "cpu") != 0)
            return cli_usage_error(self, "--device wants cpu or cuda, not '%s'", v);
        o->cuda = strcmp(v, "cuda") == 0;
        return 0;
    case OPT_JSON: o->json = 1; return 0;
    default: o->no_memory_check = 1; return 0;
    }
}

static int sample_check(const cli_command *self, void *opts)
{
    const sample_options *o = opts;
    if (!o->model_file)
        return cli_usage_error(self, "--model-file is required");
    if (o->config && o->shape_flags)
        return cli_usage_error(self, "--config gives the shape: leave out --layers, --embd, "
                               "--heads, --vocab-size and --context");
    return 0;
}

/* Streams each new token's bytes to stdout as it is chosen. */
typedef struct stream_state {
    const sl_tokenizer *tok;
    int failed;
} stream_state;

static void print_token(void *user, int index, int32_t token)
{
    (void)index;
    stream_state *s = (stream_state *)user;
    char buf[256];
    size_t n = 0;
    if (s->failed || sl_tokenizer_decode(s->tok, &token, 1, buf, sizeof buf, &n) != SL_OK) {
        s->failed = 1;
        return;
    }
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
}

/* The text of ids (malloc'd, NUL-terminated) or NULL. */
static char *decode_all(const sl_tokenizer *tok, const int32_t *ids, size_t n, size_t *len)
{
    if (sl_tokenizer_decode(tok, ids, n, NULL, 0, len) != SL_OK)
        return NULL;
    char *text = malloc(*len + 1);
    if (text && sl_tokenizer_decode(tok, ids, n, text, *len, len) != SL_OK) {
        free(text);
        return NULL;
    }
    if (text)
        text[*len] = '\0';
    return text;
}

static void json_ids(const char *key, const int32_t *ids, int n)
{
    printf("  \"%s\": [", key);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? ", " : "", (int)ids[i]);
    printf("],\n");
}

static int sample_run(void *opts)
{
    const sample_options o = *(const sample_options *)opts;
    int rc;
    sl_gpt2_config cfg = o.shape;
    if (o.config && sl_gpt2_read_config(o.config, &cfg) != SL_OK)
        return cli_fail("reading --config");
    cfg.dropout = 0.0f; /* inference: no dropout */
    sl_tokenizer *tok = NULL;
    sl_context *ctx = NULL;
    sl_net *net = NULL;
    sl_gpt2_generator *gen = NULL;
    int32_t *ids = NULL;
    char *prompt_text = NULL, *new_text = NULL;
    rc = 0;
    if (sl_tokenizer_load(o.vocab, o.merges, &tok) != SL_OK) {
        rc = cli_fail("loading the tokenizer (--vocab / --merges; scripts/setup.sh installs "
                      "data/gpt2/)");
        goto done;
    }
    if (cfg.vocab > sl_tokenizer_vocab_size(tok)) {
        fprintf(stderr, "sublinear sample: the model's vocabulary (%d) is larger than the "
                        "tokenizer's (%d): its tokens could not be decoded\n",
                cfg.vocab, sl_tokenizer_vocab_size(tok));
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    size_t plen = strlen(o.prompt), n_prompt = 0;
    ids = malloc((plen + 1 + (size_t)o.tokens) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "sublinear sample: out of memory\n");
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    if (plen == 0) {
        if (sl_tokenizer_token_id(tok, "<|endoftext|>", 13, &ids[0]) != SL_OK) {
            rc = cli_fail("an empty prompt starts from <|endoftext|>, which the vocabulary lacks; "
                          "give --prompt");
            goto done;
        }
        n_prompt = 1;
    } else if (sl_tokenizer_encode(tok, o.prompt, plen, ids, plen, &n_prompt) != SL_OK) {
        rc = cli_fail("encoding the prompt");
        goto done;
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (ids[i] >= cfg.vocab) {
            fprintf(stderr, "sublinear sample: prompt token %zu is id %d, outside the model's "
                            "vocabulary of %d\n", i, (int)ids[i], cfg.vocab);
            rc = CLI_EXIT_FAIL;
            goto done;
        }
    if ((long long)n_prompt + o.tokens > cfg.context) {
        fprintf(stderr, "sublinear sample: the prompt's %zu tokens + --tokens %d exceed the model's "
                        "context of %d tokens\n", n_prompt, o.tokens, cfg.context);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    sl_context_options co = sl_context_defaults();
    co.threads = o.threads;
    if (o.gpu_set || o.cuda) {
        co.device = SL_DEVICE_CUDA;
        co.gpu = o.gpu;
    }
    if (sl_context_create(&co, &ctx) != SL_OK) {
        rc = cli_fail("creating the context");
        goto done;
    }
    if (sl_sequential(ctx, 1, &net) != SL_OK || sl_model_gpt2(net, &cfg) != SL_OK) {
        rc = cli_fail("building the model");
        goto done;
    }
    /* Inference only: the network never holds gradients (or optimizer
     * state), and the memory check counts none. */
    if (sl_net_set_mode(net, SL_MODE_INFER) != SL_OK ||
        sl_net_set_memory_check(net, !o.no_memory_check) != SL_OK) {
        rc = cli_fail("building the model");
        goto done;
    }
    /* The generator first: its memory check covers the parameters and the
     * KV cache together before either is allocated; loading then fills
     * the parameters in place. */
    if (sl_gpt2_generator_create(net, &cfg, (int)n_prompt + (o.tokens > 0 ? o.tokens : 0), &gen) !=
        SL_OK) {
        rc = cli_fail("creating the generator");
        goto done;
    }
    if (sl_load_model(net, o.model_file, NULL, NULL) != SL_OK) {
        rc = cli_fail("loading --model-file");
        goto done;
    }
    size_t len = 0;
    prompt_text = decode_all(tok, ids, n_prompt, &len);
    if (!prompt_text) {
        rc = cli_fail("decoding the prompt");
        goto done;
    }
    if (!o.json) {
        if (plen)
            fwrite(prompt_text, 1, len, stdout);
        fflush(stdout);
    }
    stream_state ss = {tok, 0};
    sl_sample_options so = sl_sample_defaults();
    so.temperature = o.temperature;
    so.top_k = o.top_k;
    so.seed = o.seed;
    if (!o.json) {
        so.on_token = print_token;
        so.user = &ss;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (sl_gpt2_generate(gen, ids, (int)n_prompt, o.tokens, &so, ids + n_prompt) != SL_OK) {
        if (!o.json)
            printf("\n");
        rc = cli_fail("generating");
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (ss.failed) {
        printf("\n");
        rc = cli_fail("decoding a generated token");
        goto done;
    }
    if (!o.json) {
        printf("\n");
        goto done;
    }
    new_text = decode_all(tok, ids + n_prompt, (size_t)o.tokens, &len);
    if (!new_text) {
        rc = cli_fail("decoding the generated tokens");
        goto done;
    }
    /* What the network holds, measured: the parameters alone. */
    sl_memory_report m;
    sl_shape shape = sl_shape_seq(1, (int)n_prompt + o.tokens, 1);
    if (sl_net_memory_report(net, shape, SL_MODE_INFER, &m) != SL_OK) {
        rc = cli_fail("reporting memory");
        goto done;
    }
    printf("{\n");
    json_ids("prompt_ids", ids, (int)n_prompt);
    json_ids("ids", ids + n_prompt, o.tokens);
    printf("  \"prompt\": ");
    cli_json_string(stdout, prompt_text);
    printf(",\n  \"text\": ");
    cli_json_string(stdout, new_text);
    printf(",\n  \"temperature\": %g,\n  \"top_k\": %d,\n  \"seed\": %llu,\n", (double)o.temperature,
           o.top_k, (unsigned long long)o.seed);
    printf("  \"tokens_per_second\": %.3f,\n", secs > 0 ? o.tokens / secs : 0.0);
    printf("  \"memory\": {\"params_bytes\": %llu, \"param_grads_bytes\": %llu, "
           "\"optimizer_bytes\": %llu}\n}\n", (unsigned long long)m.measured_params,
           (unsigned long long)m.measured_param_grads, (unsigned long long)m.measured_optimizer);
done:
    free(new_text);
    free(prompt_text);
    free(ids);
    sl_gpt2_generator_free(gen);
    sl_net_free(net);
    sl_context_free(ctx);
    sl_tokenizer_free(tok);
    return rc;
}

const cli_command cli_sample_command = {
    .name = "sample",
    .summary = "generate text from a GPT-2 model file (KV cache)",
    .usage = g_sample_help,
    .options = g_sample_options,
    .options_size = sizeof(sample_options),
    .defaults = sample_defaults,
    .set = sample_set,
    .check = sample_check,
    .run = sample_run,
};
