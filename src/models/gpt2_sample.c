/*
 * gpt2_sample.c — text generation from a GPT-2 network with a KV cache
 * (models stage, on top of the network's parameters and its backend).
 *
 * A step feeds one token at position p: its embedding row (wte[id] +
 * wpe[p]), then per block ln_1, c_attn (one row of q, k, v; k and v are
 * copied into the layer's cache at row p), attention of q against cache
 * rows 0..p (the backend's attention_decode), c_proj, the residual add,
 * ln_2, c_fc, GELU, the MLP's c_proj and its add; then ln_f and the tied
 * head h wte^T. Every product and element rule is the backend kernel the
 * layers call (gemm, bias_add, layernorm_forward, gelu_forward, add,
 * embedding_forward, copy), so a step runs on the CPU and on CUDA, with
 * weights read in place through sl_net_find_param (device pointers on
 * CUDA). Cost per token: the weights once, plus O(p * embd) attention.
 *
 * Sampling (sl_sample_token) runs on the host over the downloaded logits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/philox.h"
#include "net/net.h"

/* The Philox stream of the sampler's uniform numbers under the user's seed. */
#define SAMPLE_STREAM 0x53414d504c45ull /* "SAMPLE" */

typedef struct block_w {
    const float *ln1_w, *ln1_b, *attn_w, *attn_b, *aproj_w, *aproj_b;
    const float *ln2_w, *ln2_b, *fc_w, *fc_b, *mproj_w, *mproj_b;
} block_w;

struct sl_gpt2_generator {
    sl_net *net;
    sl_gpt2_config cfg;
    const sl_backend *be;
    int max_tokens, pos;
    const float *wte, *wpe, *lnf_w, *lnf_b;
    block_w *blocks;  /* host, cfg.layers */
    float *cache;     /* device: per layer, keys then values, max_tokens x embd each */
    float *work;      /* device scratch, see the pointers below */
    float *x, *h, *qkv, *att, *tmp, *fc, *logits;
    int32_t *id;      /* device, in work */
    float *host_logits;
};

sl_sample_options sl_sample_defaults(void)
{
    sl_sample_options o;
    memset(&o, 0, sizeof o);
    o.temperature = 1.0f;
    return o;
}

/* ---------------------------------------------------------- sampling */

typedef struct cand {
    float v;
    int32_t id;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = (const cand *)a, *y = (const cand *)b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static sl_status check_options(const sl_sample_options *o, const char *fn)
{
    if (!o)
        return SL_OK;
    if (!(o->temperature >= 0.0f) || isinf(o->temperature))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: temperature %g must be finite and >= 0 "
                            "(0: greedy)", fn, (double)o->temperature);
    if (o->top_k < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: top_k %d must be >= 0 (0: every token)", fn,
                            o->top_k);
    return SL_OK;
}

sl_status sl_sample_token(const float *logits, int vocab, const sl_sample_options *opts,
                          uint64_t index, int32_t *out)
{
    const char *fn = "sl_sample_token";
    if (!logits || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: logits or out is NULL", fn);
    if (vocab < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: vocab %d must be >= 1", fn, vocab);
    sl_status st = check_options(opts, fn);
    if (st != SL_OK)
        return st;
    if (!opts || opts->temperature == 0.0f) {
        int best = 0;
        for (int i = 0; i < vocab; i++) {
            if (isnan(logits[i]))
                return sl_set_error(SL_ERR_INVALID_ARG, "%s: logit %d is NaN", fn, i);
            if (logits[i] > logits[best])
                best = i;
        }
        *out = best;
        return SL_OK;
    }
    for (int i = 0; i < vocab; i++)
        if (isnan(logits[i]))
            return sl_set_error(SL_ERR_INVALID_ARG, "%s: logit %d is NaN", fn, i);
    cand *c = (cand *)sl_alloc((size_t)vocab * sizeof *c, "sl_sample_token's candidates");
    if (!c)
        return SL_ERR_NOMEM;
    for (int i = 0; i < vocab; i++)
        c[i] = (cand){logits[i], i};
    qsort(c, (size_t)vocab, sizeof *c, cand_cmp);
    int k = opts->top_k > 0 && opts->top_k < vocab ? opts->top_k : vocab;
    /* softmax(logits / T) over the k candidates, from the largest, in double */
    double inv_t = 1.0 / (double)opts->temperature, total = 0.0;
    for (int i = 0; i < k; i++)
        total += exp(((double)c[i].v - (double)c[0].v) * inv_t);
    double u = (double)sl_random_uniform(opts->seed, SAMPLE_STREAM, index) * total, acc = 0.0;
    int32_t pick = c[k - 1].id;
    for (int i = 0; i < k; i++) {
        acc += exp(((double)c[i].v - (double)c[0].v) * inv_t);
        if (u < acc) {
            pick = c[i].id;
            break;
        }
    }
    sl_free(c);
    *out = pick;
    return SL_OK;
}

/* --------------------------------------------------------- generator */

/* The tensor `name` as a [d0] or [d0, d1] tensor (d1 = 0: 1-d), into *p. */
static sl_status find(sl_net *net, const char *name, int d0, int d1, const float **p)
{
    sl_param_info pi;
    if (sl_net_find_param(net, name, &pi) != SL_OK)
        return sl_set_error(SL_ERR_NOT_FOUND, "sl_gpt2_generator_create: the network has no "
                            "tensor '%s' (is it a GPT-2 built by sl_model_gpt2 with this config?)",
                            name);
    int ndim = d1 ? 2 : 1;
    if (pi.ndim != ndim || pi.dims[0] != d0 || (d1 && pi.dims[1] != d1)) {
        if (d1)
            return sl_set_error(SL_ERR_SHAPE, "sl_gpt2_generator_create: '%s' should be [%d, %d] "
                                "by the config but the network's is %d-d [%d, %d]", name, d0, d1,
                                pi.ndim, pi.dims[0], pi.ndim > 1 ? pi.dims[1] : 0);
        return sl_set_error(SL_ERR_SHAPE, "sl_gpt2_generator_create: '%s' should be [%d] by the "
                            "config but the network's is %d-d [%d, ...]", name, d0, pi.ndim,
                            pi.dims[0]);
    }
    *p = pi.data;
    return SL_OK;
}

static sl_status find_block(sl_net *net, const sl_gpt2_config *c, int i, block_w *b)
{
    int C = c->embd;
    struct {
        const char *suffix;
        int d0, d1;
        const float **p;
    } t[] = {
        {"ln_1.weight", C, 0, &b->ln1_w},          {"ln_1.bias", C, 0, &b->ln1_b},
        {"attn.c_attn.weight", C, 3 * C, &b->attn_w}, {"attn.c_attn.bias", 3 * C, 0, &b->attn_b},
        {"attn.c_proj.weight", C, C, &b->aproj_w}, {"attn.c_proj.bias", C, 0, &b->aproj_b},
        {"ln_2.weight", C, 0, &b->ln2_w},          {"ln_2.bias", C, 0, &b->ln2_b},
        {"mlp.c_fc.weight", C, 4 * C, &b->fc_w},   {"mlp.c_fc.bias", 4 * C, 0, &b->fc_b},
        {"mlp.c_proj.weight", 4 * C, C, &b->mproj_w}, {"mlp.c_proj.bias", C, 0, &b->mproj_b},
    };
    char name[128];
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        snprintf(name, sizeof name, "transformer.h.%d.%s", i, t[k].suffix);
        sl_status st = find(net, name, t[k].d0, t[k].d1, t[k].p);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

void sl_gpt2_generator_free(sl_gpt2_generator *g)
{
    if (!g)
        return;
    if (g->be) {
        g->be->free(g->be, g->cache);
        g->be->free(g->be, g->work);
    }
    sl_free(g->blocks);
    sl_free(g->host_logits);
    sl_free(g);
}

/* a * b, or UINT64_MAX where it would wrap (a figure past any memory). */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return a && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

/* What a generator allocates, planned before anything is. */
typedef struct generator_bytes {
    uint64_t cache, per_position; /* device: the KV cache, and its bytes per position */
    uint64_t scratch;             /* device: work (its floats in work_floats) */
    uint64_t logits;              /* host: the downloaded logits */
} generator_bytes;

static generator_bytes plan_bytes(const sl_gpt2_config *c, int max_tokens)
{
    generator_bytes b;
    b.per_position = mul_sat(mul_sat(2 * sizeof(float), (uint64_t)c->layers), (uint64_t)c->embd);
    b.cache = mul_sat(b.per_position, (uint64_t)max_tokens);
    /* x, h, att, tmp (C each), qkv (3 C), fc (4 C), logits, the token id */
    b.scratch = (11 * (uint64_t)c->embd + (uint64_t)c->vocab + 16) * sizeof(float);
    b.logits = (uint64_t)c->vocab * sizeof(float);
    return b;
}

/* The memory check's advice: how many positions would fit. */
static void fewer_positions(void *user, uint64_t budget, uint64_t fixed, char *buf, size_t n)
{
    const generator_bytes *b = (const generator_bytes *)user;
    uint64_t left = budget > fixed + b->scratch ? budget - fixed - b->scratch : 0;
    uint64_t fit = left / b->per_position;
    if (fit >= 1)
        snprintf(buf, n, "a cache of %llu positions fits (max_tokens; the command's prompt + "
                 "--tokens), or use a smaller model", (unsigned long long)fit);
    else
        snprintf(buf, n, "not one position of the cache fits: use a smaller model");
}

/* The generator's memory (its KV cache, scratch and logits, and the
 * network's parameters and, in training mode, gradients when they are not
 * allocated yet) against what the process may still take, before any of
 * it is allocated: a cache larger than memory is refused with the figures
 * instead of being zero-filled until the OOM killer ends the process. */
static sl_status check_generator_memory(sl_net *net, const sl_gpt2_config *c, int max_tokens,
                                        generator_bytes *b, const char *fn)
{
    int host = net->ctx->backend->host_memory != 0;
    char what[200];
    snprintf(what, sizeof what, "its KV cache (2 x %d layers x %d positions x %d channels of "
             "floats) plus scratch", c->layers, max_tokens, c->embd);
    uint64_t device = b->cache == UINT64_MAX ? UINT64_MAX : b->cache + b->scratch;
    sl_room_request rq = {.arena = host ? (device == UINT64_MAX ? device : device + b->logits)
                                        : device,
                          .host_extra = host ? 0 : b->logits,
                          .what = what,
                          .host_what = "its logits",
                          .who = "the generator",
                          .step = 1, /* its GEMMs map the BLAS's buffers */
                          .advise = fewer_positions,
                          .user = b};
    sl_status st = sl_net_check_room(net, &rq, fn);
    if (st != SL_OK)
        return st;
    /* Unchecked (the check off, or nothing known): a size past the
     * address space must not reach an allocator. */
    if (device == UINT64_MAX || device > SIZE_MAX / 2)
        return sl_set_error(SL_ERR_NOMEM, "%s: %s is past the address space", fn, what);
    return SL_OK;
}

/* Looks up every weight and allocates the cache and scratch, once the
 * memory check passed; on failure the caller frees g. */
static sl_status build_generator(sl_gpt2_generator *g, const generator_bytes *b, const char *fn)
{
    const sl_gpt2_config *cfg = &g->cfg;
    sl_net *net = g->net;
    int C = cfg->embd;
    sl_status st = SL_OK;
    g->blocks = (block_w *)sl_zalloc((size_t)cfg->layers * sizeof *g->blocks, "a GPT-2 generator");
    if (!g->blocks)
        st = SL_ERR_NOMEM;
    if (st == SL_OK)
        st = find(net, "transformer.wte.weight", cfg->vocab, C, &g->wte);
    if (st == SL_OK)
        st = find(net, "transformer.wpe.weight", cfg->context, C, &g->wpe);
    for (int i = 0; i < cfg->layers && st == SL_OK; i++)
        st = find_block(net, cfg, i, &g->blocks[i]);
    if (st == SL_OK)
        st = find(net, "transformer.ln_f.weight", C, 0, &g->lnf_w);
    if (st == SL_OK)
        st = find(net, "transformer.ln_f.bias", C, 0, &g->lnf_b);
    if (st == SL_OK) {
        sl_param_info pi;
        char name[64];
        snprintf(name, sizeof name, "transformer.h.%d.ln_1.weight", cfg->layers);
        if (sl_net_find_param(net, name, &pi) == SL_OK)
            st = sl_set_error(SL_ERR_SHAPE, "%s: the network has more than the config's %d layers "
                              "('%s' exists)", fn, cfg->layers, name);
    }
    if (st == SL_OK && !(g->cache = (float *)g->be->alloc(g->be, (size_t)b->cache,
                                                           "the GPT-2 generator's KV cache")))
        st = SL_ERR_NOMEM;
    if (st == SL_OK && !(g->work = (float *)g->be->alloc(g->be, (size_t)b->scratch,
                                                          "the GPT-2 generator's scratch")))
        st = SL_ERR_NOMEM;
    if (st == SL_OK && !(g->host_logits = (float *)sl_alloc((size_t)b->logits,
                                                            "the GPT-2 generator's logits")))
        st = SL_ERR_NOMEM;
    if (st != SL_OK)
        return st;
    g->x = g->work;
    g->h = g->x + C;
    g->qkv = g->h + C;
    g->att = g->qkv + 3 * (size_t)C;
    g->tmp = g->att + C;
    g->fc = g->tmp + C;
    g->logits = g->fc + 4 * (size_t)C;
    g->id = (int32_t *)(g->logits + cfg->vocab);
    return SL_OK;
}

sl_status sl_gpt2_generator_create(sl_net *net, const sl_gpt2_config *cfg, int max_tokens,
                                   sl_gpt2_generator **out)
{
    const char *fn = "sl_gpt2_generator_create";
    if (out)
        *out = NULL;
    if (!net || !cfg || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network, config or out is NULL", fn);
    if (cfg->layers < 1 || cfg->embd < 1 || cfg->heads < 1 || cfg->vocab < 1 || cfg->context < 1 ||
        cfg->embd % cfg->heads != 0 || !(cfg->ln_eps > 0.0f))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: config (layers %d, embd %d, heads %d, vocab %d, "
                            "context %d, ln_eps %g) is not a GPT-2 shape", fn, cfg->layers,
                            cfg->embd, cfg->heads, cfg->vocab, cfg->context, (double)cfg->ln_eps);
    if (max_tokens < 1 || max_tokens > cfg->context)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: max_tokens %d must be in [1, %d], the model's "
                            "context (no position embedding exists past it)", fn, max_tokens,
                            cfg->context);
    /* The network's parameter count (finalising allocates none of them)
     * is part of the check; a failure leaves the network as it was. */
    sl_net_mark m = sl_net_mark_now(net);
    generator_bytes b = plan_bytes(cfg, max_tokens);
    sl_status st = sl_net_finalize(net);
    if (st == SL_OK)
        st = check_generator_memory(net, cfg, max_tokens, &b, fn);
    if (st != SL_OK)
        return sl_net_undo_first_use(net, m, st);
    sl_gpt2_generator *g = (sl_gpt2_generator *)sl_zalloc(sizeof *g, "a GPT-2 generator");
    if (!g)
        return sl_net_undo_first_use(net, m, SL_ERR_NOMEM);
    g->net = net;
    g->cfg = *cfg;
    g->max_tokens = max_tokens;
    g->be = net->ctx->backend;
    st = build_generator(g, &b, fn);
    if (st != SL_OK) {
        sl_gpt2_generator_free(g);
        return sl_net_undo_first_use(net, m, st);
    }
    *out = g;
    return SL_OK;
}

void sl_gpt2_generator_reset(sl_gpt2_generator *g)
{
    if (g)
        g->pos = 0;
}

int sl_gpt2_generator_position_count(const sl_gpt2_generator *g)
{
    return g ? g->pos : 0;
}

/* c (+ bias) = a [1 x in] W [in x out]: conv1d's product for one row. */
static void row_conv1d(const sl_exec *ex, int in, int outc, const float *a, const float *w,
                       const float *bias, float *c)
{
    ex->be->gemm(ex, 0, 0, 1, outc, in, 1.0f, a, in, w, outc, 0.0f, c, outc);
    ex->be->bias_add(ex, 1, outc, bias, c);
}

sl_status sl_gpt2_generator_step(sl_gpt2_generator *g, int32_t token, float *logits)
{
    const char *fn = "sl_gpt2_generator_step";
    if (!g)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: generator is NULL", fn);
    const sl_gpt2_config *c = &g->cfg;
    if (token < 0 || token >= c->vocab)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: token id %d is outside the vocabulary [0, %d)",
                            fn, (int)token, c->vocab);
    if (g->pos >= g->max_tokens)
        return sl_set_error(SL_ERR_STATE, "%s: the cache is full: it holds max_tokens = %d "
                            "positions (sl_gpt2_generator_reset starts again)", fn, g->max_tokens);
    sl_exec ex = sl_net_exec(g->net);
    const sl_backend *be = g->be;
    int C = c->embd, p = g->pos, hd = C / c->heads;
    size_t plane = (size_t)g->max_tokens * (size_t)C;
    be->upload(&ex, g->id, &token, sizeof token);
    be->embedding_forward(&ex, 1, 1, C, c->vocab, g->id, g->wte, g->wpe + (size_t)p * C, g->x);
    for (int l = 0; l < c->layers; l++) {
        const block_w *b = &g->blocks[l];
        float *kc = g->cache + 2 * (size_t)l * plane, *vc = kc + plane;
        be->layernorm_forward(&ex, 1, C, g->x, b->ln1_w, b->ln1_b, c->ln_eps, g->h, NULL, NULL);
        row_conv1d(&ex, C, 3 * C, g->h, b->attn_w, b->attn_b, g->qkv);
        be->copy(&ex, (size_t)C, g->qkv + C, kc + (size_t)p * C, 0);
        be->copy(&ex, (size_t)C, g->qkv + 2 * (size_t)C, vc + (size_t)p * C, 0);
        be->attention_decode(&ex, c->heads, hd, p + 1, g->qkv, kc, vc, C, g->att);
        row_conv1d(&ex, C, C, g->att, b->aproj_w, b->aproj_b, g->tmp);
        be->add(&ex, (size_t)C, g->x, g->tmp, g->x);
        be->layernorm_forward(&ex, 1, C, g->x, b->ln2_w, b->ln2_b, c->ln_eps, g->h, NULL, NULL);
        row_conv1d(&ex, C, 4 * C, g->h, b->fc_w, b->fc_b, g->fc);
        be->gelu_forward(&ex, 4 * (size_t)C, g->fc, g->fc);
        row_conv1d(&ex, 4 * C, C, g->fc, b->mproj_w, b->mproj_b, g->tmp);
        be->add(&ex, (size_t)C, g->x, g->tmp, g->x);
    }
    if (logits) {
        be->layernorm_forward(&ex, 1, C, g->x, g->lnf_w, g->lnf_b, c->ln_eps, g->h, NULL, NULL);
        be->gemm(&ex, 0, 1, 1, c->vocab, C, 1.0f, g->h, C, g->wte, C, 0.0f, g->logits, c->vocab);
        be->download(&ex, logits, g->logits, (size_t)c->vocab * sizeof(float));
    }
    sl_status st = be->sync(&ex);
    if (st != SL_OK)
        return st;
    g->pos = p + 1;
    return SL_OK;
}

sl_status sl_gpt2_generate(sl_gpt2_generator *g, const int32_t *prompt, int n_prompt, int n_new,
                           const sl_sample_options *opts, int32_t *out)
{
    const char *fn = "sl_gpt2_generate";
    if (!g || !prompt || (n_new > 0 && !out))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: generator, prompt or out is NULL", fn);
    if (n_prompt < 1 || n_new < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: n_prompt %d must be >= 1 and n_new %d >= 0", fn,
                            n_prompt, n_new);
    if ((long long)n_prompt + n_new > g->max_tokens)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: %d prompt + %d new tokens exceed the %d "
                            "positions of this generator by %lld (the model's context is %d)", fn,
                            n_prompt, n_new, g->max_tokens,
                            (long long)n_prompt + n_new - g->max_tokens, g->cfg.context);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= g->cfg.vocab)
            return sl_set_error(SL_ERR_INVALID_ARG, "%s: prompt token %d is %d, outside the "
                                "vocabulary [0, %d)", fn, i, (int)prompt[i], g->cfg.vocab);
    sl_status st = check_options(opts, fn);
    if (st != SL_OK)
        return st;
    sl_gpt2_generator_reset(g);
    for (int i = 0; i < n_prompt && st == SL_OK; i++)
        st = sl_gpt2_generator_step(g, prompt[i], i == n_prompt - 1 ? g->host_logits : NULL);
    for (int k = 0; k < n_new && st == SL_OK; k++) {
        st = sl_sample_token(g->host_logits, g->cfg.vocab, opts, (uint64_t)k, &out[k]);
        if (st != SL_OK)
            break;
        if (opts && opts->on_token)
            opts->on_token(opts->user, k, out[k]);
        if (k + 1 < n_new)
            st = sl_gpt2_generator_step(g, out[k], g->host_logits);
    }
    return st;
}
