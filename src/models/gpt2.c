/*
 * gpt2.c — GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel
 * builds it: token and position embeddings, `layers` pre-LayerNorm blocks
 * (causal self-attention and a 4x MLP with tanh GELU, each added back to
 * the residual stream), a final LayerNorm and the LM head tied to the
 * token embedding, fused with the loss (sl_net_set_lm_head).
 *
 * Stage: models (see models.h). Top-level names give Hugging Face's
 * state_dict keys: "transformer.wte.weight", "transformer.h.3.attn.c_attn.weight"
 * (Conv1D, stored [in, out]), "transformer.ln_f.bias"; the tied lm_head
 * has no tensor of its own. Each block is one top-level unit, so
 * checkpoints sit between blocks and the operator-level search sees
 * every LayerNorm, matmul, attention core, GELU and add inside.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "base/base.h"
#include "models/models.h"
#include "net/net.h"

sl_gpt2_config sl_gpt2_defaults(void)
{
    sl_gpt2_config c = {12, 768, 12, 50257, 1024, 0.0f, 1e-5f, 1};
    return c;
}

/* Each field in [1, its bound], so that every product below is exact in 64 bits. */
static sl_status check_config(const sl_gpt2_config *c)
{
    static const struct {
        const char *name, *hf;
        size_t offset;
        int max;
    } fields[] = {
        {"layers", "n_layer", offsetof(sl_gpt2_config, layers), SL_GPT2_MAX_LAYERS},
        {"embd", "n_embd", offsetof(sl_gpt2_config, embd), SL_GPT2_MAX_EMBD},
        {"heads", "n_head", offsetof(sl_gpt2_config, heads), SL_GPT2_MAX_EMBD},
        {"vocab", "vocab_size", offsetof(sl_gpt2_config, vocab), SL_GPT2_MAX_VOCAB},
        {"context", "n_positions", offsetof(sl_gpt2_config, context), SL_GPT2_MAX_CONTEXT},
    };
    for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) {
        int v = *(const int *)((const char *)c + fields[k].offset);
        if (v < 1 || v > fields[k].max)
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_gpt2: %s (%s) is %d; it must be from 1 "
                                "to %d", fields[k].name, fields[k].hf, v, fields[k].max);
    }
    if (c->embd % c->heads != 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_gpt2: embd %d is not a multiple of heads %d",
                            c->embd, c->heads);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_gpt2: dropout %g must be in [0, 1)",
                            c->dropout);
    if (!(c->ln_eps > 0.0f))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_gpt2: ln_eps %g must be > 0", c->ln_eps);
    return SL_OK;
}

/* GPT2LMHeadModel's parameter count: wte, wpe, per block ln_1, c_attn
 * (C x 3C + 3C), c_proj (C x C + C), ln_2, c_fc (C x 4C + 4C), c_proj
 * (4C x C + C), and ln_f. Under check_config's bounds at most about 2^58. */
static uint64_t gpt2_param_count(const sl_gpt2_config *c)
{
    uint64_t C = (uint64_t)c->embd;
    uint64_t block = 12 * C * C + 13 * C;
    return ((uint64_t)c->vocab + (uint64_t)c->context) * C + (uint64_t)c->layers * block + 2 * C;
}

static void advise_smaller(void *user, uint64_t room, uint64_t fixed, char *buf, size_t n)
{
    (void)user;
    (void)room;
    (void)fixed;
    snprintf(buf, n, "use a smaller model (fewer layers, a narrower embedding, a smaller "
             "vocabulary or context)");
}

/* The model's fixed bytes, checked before any layer is built: the
 * parameters, and their gradients when the network trains (the optimizer
 * and the step's arena are checked by the first run). */
static sl_status check_model_size(sl_net *net, const sl_gpt2_config *c)
{
    uint64_t params = gpt2_param_count(c);
    uint64_t bytes = params * sizeof(float) * (net->mode == SL_MODE_TRAIN ? 2 : 1);
    char what[160];
    snprintf(what, sizeof what, "GPT-2's %llu parameters%s (%d layers, embd %d, vocab %d, context "
             "%d)", (unsigned long long)params,
             net->mode == SL_MODE_TRAIN ? " and their gradients" : "", c->layers, c->embd,
             c->vocab, c->context);
    sl_room_request rq = {.arena = bytes, .what = what, .advise = advise_smaller};
    return sl_net_check_room(net, &rq, "sl_model_gpt2");
}

/* Adds child to block b reading `in`, into *t; a failure is kept in *st. */
static void add(sl_layer *b, const char *name, sl_layer *child, int n_in, const int *in, int *t,
                sl_status *st)
{
    if (*st != SL_OK) {
        sl_layer_free(child);
        return;
    }
    *st = sl_block_add(b, name, child, n_in, in, t);
}

/* A projection back into the residual stream, drawn with GPT-2's smaller
 * std; NULL (the constructor's error kept for add) when it cannot be made. */
static sl_layer *resid_proj(int in, int out, float std)
{
    sl_layer *proj = sl_conv1d(in, out);
    if (proj && sl_conv1d_set_init_std(proj, std) != 0) {
        sl_layer_free(proj);
        return NULL;
    }
    return proj;
}

/* One block: x + attn(ln_1(x)), then h + mlp(ln_2(h)). */
static sl_layer *gpt2_block(const sl_gpt2_config *c)
{
    int C = c->embd;
    float resid_std = 0.02f / sqrtf(2.0f * (float)c->layers);
    sl_layer *b = sl_block("GPT2Block");
    if (!b)
        return NULL;
    sl_status st = SL_OK;
    int x = 0, t = 0, h = 0;
    add(b, "ln_1", sl_layernorm(C, c->ln_eps), 1, &x, &t, &st);
    add(b, "attn.c_attn", sl_conv1d(C, 3 * C), 1, &t, &t, &st);
    add(b, "attn.core", sl_causal_attention(C, c->heads, c->dropout, c->flash), 1, &t, &t, &st);
    add(b, "attn.c_proj", resid_proj(C, C, resid_std), 1, &t, &t, &st);
    if (c->dropout > 0.0f)
        add(b, "attn.resid_dropout", sl_dropout(c->dropout), 1, &t, &t, &st);
    int r1[2] = {x, t};
    add(b, "add_1", sl_join_sum(), 2, r1, &h, &st);
    add(b, "ln_2", sl_layernorm(C, c->ln_eps), 1, &h, &t, &st);
    add(b, "mlp.c_fc", sl_conv1d(C, 4 * C), 1, &t, &t, &st);
    add(b, "mlp.act", sl_gelu(), 1, &t, &t, &st);
    add(b, "mlp.c_proj", resid_proj(4 * C, C, resid_std), 1, &t, &t, &st);
    if (c->dropout > 0.0f)
        add(b, "mlp.dropout", sl_dropout(c->dropout), 1, &t, &t, &st);
    int r2[2] = {h, t};
    add(b, "add_2", sl_join_sum(), 2, r2, &t, &st);
    if (st != SL_OK) {
        sl_layer_free(b);
        return NULL;
    }
    return b;
}

static sl_status build(sl_net *net, const sl_gpt2_config *c)
{
    sl_status st = sl_net_add(net, "transformer", sl_embedding(c->vocab, c->context, c->embd));
    if (st == SL_OK && c->dropout > 0.0f)
        st = sl_net_add(net, "transformer.drop", sl_dropout(c->dropout));
    for (int i = 0; i < c->layers && st == SL_OK; i++)
        st = sl_models_add(net, gpt2_block(c), "transformer.h.%d", i);
    if (st == SL_OK)
        st = sl_net_add(net, "transformer.ln_f", sl_layernorm(c->embd, c->ln_eps));
    return st;
}

sl_status sl_model_gpt2(sl_net *net, const sl_gpt2_config *config)
{
    if (!net || !config)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_model_gpt2: network or config is NULL");
    sl_status st = check_config(config);
    if (st != SL_OK)
        return st;
    if (sl_net_layer_count(net) != 0 || net->in_channels != 1)
        return sl_set_error(SL_ERR_STATE, "sl_model_gpt2: GPT-2 is built into an empty network of 1 "
                            "input channel (token ids); this one has %d layer(s) and %d channel(s)",
                            sl_net_layer_count(net), net->in_channels);
    if ((st = check_model_size(net, config)) != SL_OK)
        return st;
    int out_channels = net->out_channels;
    st = build(net, config);
    if (st == SL_OK)
        st = sl_net_set_lm_head(net, "transformer.wte.weight", SL_GPT2_IGNORE_INDEX, 0);
    if (st != SL_OK) { /* objects as they were: no half-built model */
        sl_net_mark m = {0, 0};
        sl_net_undo_first_use(net, m, st);
        net->has_head = 0;
        sl_net_remove_layers_from(net, 0, out_channels);
    }
    return st;
}
