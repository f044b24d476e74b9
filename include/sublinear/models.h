/*
 * sublinear/models.h — the model builders: ResNets, VGG-A, AlexNet,
 * GoogLeNet, appended to a network by name.
 *
 *     sl_model_build(net, "resnet152", 1000, 224);
 */
#ifndef SUBLINEAR_MODELS_H
#define SUBLINEAR_MODELS_H

#include "sublinear/core.h"
#include "sublinear/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Models                                                              */
/* ------------------------------------------------------------------ */

/* Appends a model's layers to an empty network with 3 input channels.
 * Names: "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"
 * (ImageNet stem), "resnet20", "resnet56", "resnet110" (CIFAR), "vgg-a",
 * "alexnet", "googlenet". res is the input resolution the classifier is
 * sized for (224 for ImageNet models, 32 for CIFAR). */
SL_API sl_status sl_model_build(sl_net *net, const char *model, int num_classes, int res);

/* GPT-2's shape, as Hugging Face's GPT2Config names it. */
typedef struct sl_gpt2_config {
    int layers;    /* n_layer: 12 */
    int embd;      /* n_embd, the channels C: 768 */
    int heads;     /* n_head: 12 (embd must be a multiple) */
    int vocab;     /* vocab_size: 50257 */
    int context;   /* n_positions, the longest sequence: 1024 */
    float dropout; /* embd_pdrop = attn_pdrop = resid_pdrop; 0 (GPT-2 used 0.1) */
    float ln_eps;  /* layer_norm_epsilon: 1e-5 */
    int flash;     /* 1: attention that keeps no T x T matrix (FlashAttention-2's
                      scheme); 0: plain attention keeping the probabilities */
} sl_gpt2_config;

/* The largest value of each field sl_model_gpt2, sl_gpt2_read_config and
 * the command accept (each field is at least 1). They keep every product
 * of the shapes (the 4 x embd MLP, vocab x embd, the parameter count)
 * exact in 64 bits; deeper than SL_GPT2_MAX_LAYERS is far past any
 * published GPT (GPT-3 has 96 layers) and would only fill memory with the
 * network's bookkeeping. heads is bounded by embd, which it divides. */
#define SL_GPT2_MAX_LAYERS 4096
#define SL_GPT2_MAX_EMBD 65536
#define SL_GPT2_MAX_VOCAB (1 << 24)
#define SL_GPT2_MAX_CONTEXT (1 << 24)

/* Targets equal to this count nothing in a GPT-2 network's loss. */
#define SL_GPT2_IGNORE_INDEX (-100)

/* GPT-2 small (124M): the values in the comments above. */
SL_API sl_gpt2_config sl_gpt2_defaults(void);

/* Builds GPT-2 into an empty network made with one input channel
 * (sl_sequential(ctx, 1, &net) or sl_sublinear): token and position
 * embeddings, `layers` blocks, the final LayerNorm, and the LM head tied
 * to the token embedding, fused with the loss (sl_net_set_lm_head with
 * SL_GPT2_IGNORE_INDEX). Parameter names and layouts are Hugging Face's
 * GPT2LMHeadModel's ("transformer.h.0.attn.c_attn.weight", Conv1D weights
 * [in, out]); weights start as its _init_weights draws them (normal, std
 * 0.02, the residual projections 0.02 / sqrt(2 layers)). Train it with
 * the token runs (sl_net_train_step_tokens). A field outside [1, its
 * SL_GPT2_MAX_*] is SL_ERR_INVALID_ARG naming it and its bound. Before a
 * layer is built, the parameters (and, in training mode, their gradients)
 * are checked against the memory this process may still take, as a run
 * checks its step (sl_net_set_memory_check switches it off): a model
 * that cannot fit is SL_ERR_NOMEM at once, naming its parameter count.
 * On failure the network is left empty. */
SL_API sl_status sl_model_gpt2(sl_net *net, const sl_gpt2_config *config);

/* Hugging Face's directory layout for GPT-2 (GPT2LMHeadModel's
 * save_pretrained / from_pretrained): DIR/model.safetensors holds the
 * tensors under the names and layouts sl_model_gpt2 already uses (no
 * lm_head.weight: the head is tied to transformer.wte.weight), and
 * DIR/config.json holds GPT2Config's keys. From Hugging Face:
 *
 *     sl_gpt2_config cfg;
 *     sl_gpt2_read_config("gpt2-dir/config.json", &cfg);
 *     sl_model_gpt2(net, &cfg);
 *     sl_load_model(net, "gpt2-dir/model.safetensors", NULL, NULL);
 *
 * (sl_load_model accepts the attention buffers and the tied
 * lm_head.weight such a file may hold; see io.h.) To Hugging Face:
 * sl_gpt2_save_pretrained(net, &cfg, "out"), then in Python
 * GPT2LMHeadModel.from_pretrained("out"). */

/* Writes dir/model.safetensors (sl_save_model: F32, metadata
 * {"format": "pt"}, which from_pretrained requires) and dir/config.json
 * (model_type "gpt2", architectures ["GPT2LMHeadModel"], n_layer, n_embd,
 * n_head, vocab_size, n_positions, n_ctx, layer_norm_epsilon, the three
 * pdrops = cfg->dropout, activation_function "gelu_new",
 * tie_word_embeddings true and GPT2Config's other keys at their
 * defaults), each atomically (io.h). Creates dir when it is missing (not
 * its parents). cfg must be the config net was built with: every tensor's
 * name and shape is checked against it (SL_ERR_INVALID_ARG or
 * SL_ERR_SHAPE naming the first that differs; heads, ln_eps and dropout
 * leave no trace in the tensors and are taken from cfg). A failed write
 * returns SL_ERR_IO; model.safetensors may then be new while config.json
 * is old (each file is whole, old or new). The network is unchanged. */
SL_API sl_status sl_gpt2_save_pretrained(sl_net *net, const sl_gpt2_config *cfg, const char *dir);

/* Reads a Hugging Face GPT-2 config.json into *out: n_layer, n_embd,
 * n_head, vocab_size and n_positions (required, positive integers),
 * layer_norm_epsilon (default 1e-5) and the dropout rate (embd_pdrop,
 * attn_pdrop and resid_pdrop, GPT2Config's default 0.1, which must be
 * equal); flash = 1. Fails, with *out unchanged, on: a file that cannot be
 * read (SL_ERR_IO) or is not a JSON object (SL_ERR_FORMAT); a missing or
 * ill-typed required key (SL_ERR_FORMAT, naming it); a model_type other
 * than "gpt2" (SL_ERR_UNSUPPORTED, naming it); and settings this GPT-2
 * does not compute (SL_ERR_UNSUPPORTED): an activation_function other than
 * "gelu_new" / "gelu_pytorch_tanh", n_inner other than null or 4 n_embd,
 * tie_word_embeddings false, scale_attn_weights false,
 * scale_attn_by_inverse_layer_idx or add_cross_attention true, or pdrops
 * that differ. Other keys are ignored. */
SL_API sl_status sl_gpt2_read_config(const char *config_json, sl_gpt2_config *out);

/* ------------------------------------------------------------------ */
/* Sampling from GPT-2 with a KV cache                                 */
/* ------------------------------------------------------------------ */

/* A text generator over a GPT-2 network built by sl_model_gpt2: it reads
 * the weights by name (sl_net_find_param, on the network's device) and
 * keeps a KV cache, per layer the keys and values of every position fed
 * so far, so that each new token costs O(T) (one row through every layer,
 * attention of that row against the cache) instead of a forward over the
 * whole prefix. Its steps run on the network's backend (CPU or CUDA) with
 * the kernels the layers use; the logits of a step equal the last
 * position's logits of sl_net_predict_tokens on the prefix, up to float
 * rounding (products of one row instead of all).
 *
 *     sl_gpt2_generator *gen;
 *     sl_gpt2_generator_create(net, &cfg, 64, &gen);
 *     sl_sample_options so = sl_sample_defaults();   (temperature 1, all tokens)
 *     so.top_k = 40; so.seed = 7;
 *     sl_gpt2_generate(gen, prompt, n_prompt, 32, &so, out);
 *     sl_gpt2_generator_free(gen);
 *
 * The generator refers to the network, which must outlive it and keep its
 * weights where they are (loading new values with sl_load_model or a
 * training step is fine; the next step reads them). Not thread-safe: one
 * thread at a time per generator. */
typedef struct sl_gpt2_generator sl_gpt2_generator;

/* Called with each new token as it is chosen (index 0 .. n_new-1). */
typedef void sl_token_callback(void *user, int index, int32_t token);

/* How the next token is chosen from a position's logits. */
typedef struct sl_sample_options {
    float temperature; /* 0: greedy (the first arg-max); > 0: sample from
                          softmax(logits / temperature) */
    int top_k;         /* > 0: only among the top_k largest logits (ties: the
                          lower id first); 0: among all */
    uint64_t seed;     /* token i draws uniform number i of the Philox stream
                          keyed by seed: the same seed, the same text */
    sl_token_callback *on_token; /* may be NULL */
    void *user;                  /* passed to on_token */
} sl_sample_options;

/* Temperature 1, top_k 0, seed 0, no callback. */
SL_API sl_sample_options sl_sample_defaults(void);

/* Picks one token from vocab logits (host memory) as opts says (NULL:
 * greedy); index selects the uniform number of opts->seed's stream (the
 * token's index in the generated text). SL_ERR_INVALID_ARG for a negative
 * or non-finite temperature, a negative top_k, vocab < 1, or NaN logits
 * among the candidates; SL_ERR_NOMEM when its scratch (8 bytes per logit,
 * freed before it returns) cannot be had. */
SL_API sl_status sl_sample_token(const float *logits, int vocab, const sl_sample_options *opts,
                                 uint64_t index, int32_t *out);

/* A generator for net (built by sl_model_gpt2 with cfg) holding up to
 * max_tokens positions, 1 <= max_tokens <= cfg->context (a longer
 * context is refused: GPT-2 has no position embedding past it). It
 * allocates, on the network's device: the KV cache, 2 * layers *
 * max_tokens * embd floats (GPT-2 small at 1024 tokens: 72 MiB), and
 * scratch of 11 * embd + vocab + 16 floats; on the host vocab floats.
 * Before it allocates anything, these and the network's parameters (and,
 * for a network in training mode, its gradients) when not allocated yet
 * pass the memory check (sl_net_set_memory_check): too much is
 * SL_ERR_NOMEM naming every figure and how many positions would fit. A
 * network used only to generate is best put in SL_MODE_INFER
 * (sl_net_set_mode) before its parameters are allocated (before loading),
 * so that it never holds gradients. Fails with SL_ERR_INVALID_ARG (NULL
 * arguments, a bad max_tokens or config), SL_ERR_NOT_FOUND / SL_ERR_SHAPE
 * naming the first tensor of the config the network lacks or holds in
 * another shape, SL_ERR_NOMEM; on failure *out is NULL, nothing stays
 * allocated and the network is as it was. */
SL_API sl_status sl_gpt2_generator_create(sl_net *net, const sl_gpt2_config *cfg, int max_tokens,
                                          sl_gpt2_generator **out);
/* Frees a generator (not its network); NULL is fine. */
SL_API void sl_gpt2_generator_free(sl_gpt2_generator *gen);

/* Empties the cache: the next step is position 0. */
SL_API void sl_gpt2_generator_reset(sl_gpt2_generator *gen);
/* Positions fed since the last reset. */
SL_API int sl_gpt2_generator_position_count(const sl_gpt2_generator *gen);

/* Feeds one token at the next position (its keys and values join the
 * cache) and, when logits is not NULL, writes that position's vocab
 * logits there (host memory): the prediction of the token after it.
 * SL_ERR_INVALID_ARG for an id outside [0, vocab), SL_ERR_STATE when the
 * cache is full (max_tokens positions), SL_ERR_BACKEND when the device
 * fails; the cache is unchanged on failure. */
SL_API sl_status sl_gpt2_generator_step(sl_gpt2_generator *gen, int32_t token, float *logits);

/* Generates n_new tokens after a prompt of n_prompt >= 1 ids into
 * out[0, n_new): empties the cache, feeds the prompt, then repeatedly
 * picks a token from the last logits (sl_sample_token with index = its
 * index in out; opts NULL: greedy), calls opts->on_token and feeds it
 * (the last one is not fed). The whole text, n_prompt + n_new tokens,
 * must fit in the generator's max_tokens (which is at most the model's
 * context): otherwise SL_ERR_INVALID_ARG saying by how much, before
 * anything runs, as for ids outside the vocabulary and bad options. */
SL_API sl_status sl_gpt2_generate(sl_gpt2_generator *gen, const int32_t *prompt, int n_prompt,
                                  int n_new, const sl_sample_options *opts, int32_t *out);

/* NULL-terminated list of the model names above. */
SL_API const char *const *sl_model_names(void);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_MODELS_H */
