/*
 * embedding.c — GPT-2's token + position embedding (layers stage):
 * y[b, t, :] = wte[id[b, t]] + wpe[t]. Its input {B, 1, T, 1} is int32
 * token ids (SL_LAYER_TOKEN_INPUT: the network's input is then an I32
 * value, given through the _tokens runs); its output is the sequence
 * tensor {B, C, T, 1}. Parameters "wte.weight" [vocab, C] and "wpe.weight"
 * [context, C], Hugging Face's names under the layer's name "transformer".
 *
 * The ids have no gradient: the backward only adds into the two tables
 * (deterministically, see the backend's embedding_backward) and, when the
 * executor asks for the input's gradient, writes zeros.
 */
#include <limits.h>

#include "layers/layer.h"

typedef struct embedding {
    sl_layer base;
    int vocab, context, channels;
} embedding;

#define EMBEDDING_INIT_STD 0.02f /* GPT-2's initializer_range */

static sl_status embedding_infer(const sl_layer *l, const sl_backend *be, int n_in,
                                 const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    const embedding *e = (const embedding *)l;
    (void)n_in;
    if (in[0].c != 1 || in[0].w != 1)
        return sl_set_error(SL_ERR_SHAPE,
                            "Embedding '%s' takes token ids [B, T] (sl_shape_seq(B, T, 1)) but "
                            "receives {%d, %d, %d, %d}",
                            sl_layer_label(l), in[0].n, in[0].c, in[0].h, in[0].w);
    if (in[0].h > e->context)
        return sl_set_error(SL_ERR_SHAPE,
                            "Embedding '%s': a sequence of %d tokens is longer than the context "
                            "of %d positions",
                            sl_layer_label(l), in[0].h, e->context);
    *out = sl_shape_seq(in[0].n, in[0].h, e->channels);
    uint64_t values = sl_shape_count_sat(*out);
    cost->fwd_flops = values;
    cost->bwd_flops = sl_mul_sat(2, values);
    long long tokens = (long long)in[0].n * in[0].h;
    if (tokens > INT_MAX)
        return sl_set_error(SL_ERR_SHAPE, "Embedding '%s': %lld tokens in a batch, more than %d",
                            sl_layer_label(l), tokens, INT_MAX);
    if (be->embedding_workspace_bytes)
        cost->ws_bwd_bytes = be->embedding_workspace_bytes(be, (int)tokens);
    return SL_OK;
}

static void embedding_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    embedding *e = (embedding *)l;
    ex->be->embedding_forward(ex, a->in[0].n, a->in[0].h, e->channels, e->vocab,
                              (const int32_t *)a->x[0], l->params[0].data, l->params[1].data,
                              a->y);
}

static void embedding_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    embedding *e = (embedding *)l;
    ex->be->embedding_backward(ex, a->in[0].n, a->in[0].h, e->channels, e->vocab,
                               (const int32_t *)a->x[0], a->dy, l->params[0].grad,
                               l->params[1].grad, a->ws);
    if (a->dx[0] && !a->accumulate[0])
        ex->be->fill(ex, sl_shape_count(a->in[0]), 0.0f, a->dx[0]);
}

static int embedding_out_channels(const sl_layer *l, int in_c)
{
    const embedding *e = (const embedding *)l;
    if (in_c != 0 && in_c != 1) {
        sl_set_error(SL_ERR_SHAPE,
                     "Embedding '%s' takes one channel of token ids {B, 1, T, 1} but its input "
                     "has %d channels",
                     sl_layer_label(l), in_c);
        return -1;
    }
    return e->channels;
}

static const sl_layer_ops embedding_ops = {
    .type = "Embedding",
    .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_TOKEN_INPUT,
    .infer = embedding_infer,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .out_channels = embedding_out_channels,
};

int sl_embedding_vocab(const sl_layer *l)
{
    return l && l->ops == &embedding_ops ? ((const embedding *)l)->vocab : -1;
}

sl_layer *sl_embedding(int vocab, int context, int channels)
{
    if (vocab < 1 || context < 1 || channels < 1) {
        sl_set_error(SL_ERR_INVALID_ARG,
                     "sl_embedding: vocab %d, context %d and channels %d must be >= 1", vocab,
                     context, channels);
        return NULL;
    }
    embedding *e = sl_alloc(sizeof *e, "an Embedding layer");
    if (!e)
        return NULL;
    sl_layer_init(&e->base, &embedding_ops);
    e->vocab = vocab;
    e->context = context;
    e->channels = channels;
    int wte[2] = {vocab, channels}, wpe[2] = {context, channels};
    int i = sl_layer_add_param(&e->base, "wte.weight", 2, wte, SL_INIT_NORMAL, channels, 1);
    e->base.params[i].std = EMBEDDING_INIT_STD;
    i = sl_layer_add_param(&e->base, "wpe.weight", 2, wpe, SL_INIT_NORMAL, channels, 1);
    e->base.params[i].std = EMBEDDING_INIT_STD;
    return &e->base;
}
