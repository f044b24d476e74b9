/*
 * attention.c — causal multi-head self-attention (layers stage), the core
 * of a GPT-2 attention block between its c_attn and c_proj: input {B, 3C,
 * T, 1} token-major (each token's q, k and v, head h at columns h*D ..
 * h*D+D-1 of each, D = C / heads), output {B, C, T, 1} (head h's output at
 * columns h*D ..), dropout on the probabilities as GPT-2's attn_pdrop.
 *
 * Two modes over the backend's attention kernels (base/backend.h):
 * flash (FlashAttention-2: saves only each row's log-sum-exp, B*H*T
 * floats; the backward recomputes the scores tile by tile and reads the
 * forward's input and output) and plain (saves the probabilities, B*H*T*T
 * floats: the reference). The dropout mask is never stored: a TRAIN
 * forward takes a Philox counter range from the context (one block per 4
 * of the B*H*T*T probabilities) and keeps it, and a REFORWARD and the
 * backward redraw the same mask from it, as dropout.c does.
 */
#include "layers/layer.h"

typedef struct attention {
    sl_layer base;
    int channels, heads, flash;
    float p;
    sl_draw draw; /* of the last TRAIN forward */
} attention;

/* bf16: the call's activations are bf16 (a layer whose native_bf16 said
 * so: its args' bf16, or 1 when asking). */
static sl_attention_desc attention_desc(const attention *at, sl_shape in, float p,
                                        const sl_context *ctx, int first_image, int bf16)
{
    sl_attention_desc d;
    d.n = in.n;
    d.t = in.h;
    d.heads = at->heads;
    d.d = at->channels / at->heads;
    d.flash = at->flash;
    d.p = p;
    d.seed = ctx ? ctx->seed : 0;
    d.counter = at->draw.counter;
    d.bh0 = first_image * at->heads;
    d.bf16 = bf16;
    d.counter_delta = NULL;
    return d;
}

static sl_status attention_infer(const sl_layer *l, const sl_backend *be, int n_in,
                                 const sl_shape *in, sl_shape *out, sl_layer_cost *cost)
{
    const attention *at = (const attention *)l;
    (void)n_in;
    if (in[0].c != 3 * at->channels)
        return sl_set_error(SL_ERR_SHAPE,
                            "CausalAttention '%s' of %d channels expects 3 x %d = %d input "
                            "channels (q, k and v of each token) but receives %d",
                            sl_layer_label(l), at->channels, at->channels, 3 * at->channels,
                            in[0].c);
    if (in[0].w != 1)
        return sl_set_error(SL_ERR_SHAPE,
                            "CausalAttention '%s' expects a sequence {batch, channels, tokens, 1} "
                            "but the input's width is %d",
                            sl_layer_label(l), in[0].w);
    *out = sl_shape_seq(in[0].n, in[0].h, at->channels);
    sl_attention_desc d = attention_desc(at, in[0], at->p, NULL, 0, 0);
    uint64_t t = (uint64_t)d.t, bh = sl_mul_sat((uint64_t)d.n, (uint64_t)d.heads);
    uint64_t pairs = sl_mul_sat(bh, t * (t + 1) / 2); /* (i, j) with j <= i; t < 2^31 */
    /* forward: q k^T and p v over the pairs, plus the softmax; the
     * backward's four products (five with flash's recomputed scores) */
    cost->fwd_flops = sl_add_sat(sl_mul3_sat(4, pairs, (uint64_t)d.d), sl_mul_sat(5, pairs));
    cost->bwd_flops = sl_add_sat(sl_mul3_sat(at->flash ? 10 : 8, pairs, (uint64_t)d.d),
                                 sl_mul_sat(8, pairs));
    uint64_t rows = sl_mul_sat(bh, t);
    cost->saved_bytes = sl_mul_sat(at->flash ? rows : sl_mul_sat(rows, t), sizeof(float));
    cost->ws_fwd_bytes = be->attention_workspace_bytes(be, &d, 0);
    cost->ws_bwd_bytes = be->attention_workspace_bytes(be, &d, 1);
    return SL_OK;
}

static void attention_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    attention *at = (attention *)l;
    float p = a->pass == SL_PASS_EVAL ? 0.0f : at->p;
    /* The TRAIN pass draws the batch's mask once, at its first image. */
    if (a->pass == SL_PASS_TRAIN && p > 0.0f && a->first_image == 0) {
        int images = a->images > 0 ? a->images : a->in[0].n;
        uint64_t count = (uint64_t)images * at->heads * a->in[0].h * a->in[0].h;
        sl_draw_take(&at->draw, a->ctx, (count + 3) / 4); /* one Philox block per 4 elements */
    }
    sl_attention_desc d = attention_desc(at, a->in[0], p, a->ctx, a->first_image, a->bf16);
    d.counter_delta = ex->counter_delta;
    float *saved = a->pass == SL_PASS_EVAL ? NULL : a->saved;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->attention_forward(&e, &d, a->x[0], a->y, saved, a->ws);
}

static void attention_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    attention *at = (attention *)l;
    if (!a->dx[0])
        return;
    sl_attention_desc d = attention_desc(at, a->in[0], at->p, a->ctx, a->first_image, a->bf16);
    d.counter_delta = ex->counter_delta;
    sl_exec e = sl_exec_for(ex, a->bf16);
    ex->be->attention_backward(&e, &d, a->x[0], a->y, a->dy, a->saved, a->dx[0],
                               a->accumulate[0], a->ws);
}

/* bf16 qkv, y and their gradients in the backend's own kernels
 * (SL_BF16_ATTENTION) where it says it runs this geometry so (CUDA: the
 * fused tiles; the CPU: flash mode), with the workspace it asks for bf16
 * (the CPU's widens each sequence's tiles); the saved state unchanged. */
static int attention_native_bf16(const sl_layer *l, const sl_backend *be, int n_in,
                                 const sl_shape *in, sl_shape out, sl_layer_cost *cost)
{
    const attention *at = (const attention *)l;
    (void)n_in, (void)out;
    if (!sl_native_bf16_if(be, SL_BF16_ATTENTION) || !be->attention_native_bf16)
        return 0;
    sl_attention_desc d = attention_desc(at, in[0], at->p, NULL, 0, 1);
    if (!be->attention_native_bf16(be, &d))
        return 0;
    cost->ws_fwd_bytes = be->attention_workspace_bytes(be, &d, 0);
    cost->ws_bwd_bytes = be->attention_workspace_bytes(be, &d, 1);
    return 1;
}

static int attention_out_channels(const sl_layer *l, int in_c)
{
    const attention *at = (const attention *)l;
    if (in_c != 3 * at->channels) {
        sl_set_error(SL_ERR_SHAPE,
                     "CausalAttention '%s' of %d channels expects 3 x %d = %d input channels "
                     "(q, k and v of each token) but receives %d",
                     sl_layer_label(l), at->channels, at->channels, 3 * at->channels, in_c);
        return -1;
    }
    return at->channels;
}

/* The TRAIN forward's draw again, nothing queued (dropout_redraw's). */
static void attention_redraw(sl_layer *l, sl_context *ctx)
{
    attention *at = (attention *)l;
    sl_draw_take(&at->draw, ctx, at->draw.blocks);
}

#define ATTENTION_OPS(name, extra_flags)                                                         \
    static const sl_layer_ops name = {                                                         \
        .type = "CausalAttention",                                                             \
        .flags = SL_LAYER_NEEDS_INPUT | SL_LAYER_COMPUTE_BOUND | SL_LAYER_BATCH_CHUNKS |       \
                 SL_LAYER_ROWS_INPUT | (extra_flags),                                          \
        .infer = attention_infer,                                                              \
        .forward = attention_forward,                                                          \
        .backward = attention_backward,                                                        \
        .native_bf16 = attention_native_bf16,                                                  \
        .out_channels = attention_out_channels,                                                \
        .redraw = attention_redraw,                                                            \
    };
/* Flash mode's backward reads the forward's output; plain mode's does not.
 * Without dropout every run queues the same work on the same pointers
 * (the seed is the context's, the counter unused), so a device may record
 * and replay it (SL_LAYER_GRAPH_SAFE); with dropout each TRAIN forward
 * takes a new counter range (SL_LAYER_GRAPH_DRAWS: recorded where the
 * backend offsets its counters on the device, redrawn at each replay). */
ATTENTION_OPS(flash_ops, SL_LAYER_NEEDS_OUTPUT | SL_LAYER_GRAPH_DRAWS)
ATTENTION_OPS(plain_ops, SL_LAYER_GRAPH_DRAWS)
ATTENTION_OPS(flash_ops_nodrop, SL_LAYER_NEEDS_OUTPUT | SL_LAYER_GRAPH_SAFE)
ATTENTION_OPS(plain_ops_nodrop, SL_LAYER_GRAPH_SAFE)
#undef ATTENTION_OPS

sl_layer *sl_causal_attention(int channels, int heads, float dropout_p, int flash)
{
    if (channels <= 0 || heads <= 0) {
        sl_set_error(SL_ERR_SHAPE,
                     "sl_causal_attention: %d channels and %d heads must both be positive",
                     channels, heads);
        return NULL;
    }
    if (channels % heads != 0) {
        sl_set_error(SL_ERR_SHAPE,
                     "sl_causal_attention: %d channels do not split into %d heads (channels "
                     "must be a multiple of heads)",
                     channels, heads);
        return NULL;
    }
    if (!(dropout_p >= 0.0f && dropout_p < 1.0f)) {
        sl_set_error(SL_ERR_INVALID_ARG,
                     "sl_causal_attention: dropout probability %g must be in [0, 1)", dropout_p);
        return NULL;
    }
    attention *at = sl_alloc(sizeof *at, "a CausalAttention layer");
    if (!at)
        return NULL;
    const sl_layer_ops *ops = dropout_p > 0.0f ? (flash ? &flash_ops : &plain_ops)
                                               : (flash ? &flash_ops_nodrop : &plain_ops_nodrop);
    sl_layer_init(&at->base, ops);
    at->channels = channels;
    at->heads = heads;
    at->flash = flash != 0;
    at->p = dropout_p;
    at->draw = (sl_draw){0, 0};
    return &at->base;
}
