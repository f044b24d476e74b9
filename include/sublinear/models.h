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
 * the token runs (sl_net_train_step_tokens). On failure the network is
 * left empty. */
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

/* NULL-terminated list of the model names above. */
SL_API const char *const *sl_model_names(void);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_MODELS_H */
