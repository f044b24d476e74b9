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

/* NULL-terminated list of the model names above. */
SL_API const char *const *sl_model_names(void);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_MODELS_H */
