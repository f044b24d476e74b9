/*
 * sublinear/layers.h — the built-in layers and blocks (torchvision's
 * names and defaults), and blocks of your own built from them.
 *
 *     sl_net_add(net, "conv1", sl_conv2d(3, 16, 3, 1, 1));
 *     sl_net_add(net, "bn1", sl_batchnorm2d(16));
 *     sl_net_add(net, "relu", sl_relu());
 *     sl_net_add(net, "layer1.0", sl_basic_block(16, 16, 1));
 */
#ifndef SUBLINEAR_LAYERS_H
#define SUBLINEAR_LAYERS_H

#include "sublinear/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Layers                                                              */
/* ------------------------------------------------------------------ */

/* A layer specification. Constructors return a new layer, or NULL with
 * sl_last_error() set when an argument is invalid. A layer is owned by the
 * caller until sl_net_add() takes it (sl_net_add always takes ownership,
 * also when it fails); free an unused layer with sl_layer_free(). */
typedef struct sl_layer sl_layer;

typedef struct sl_conv2d_options {
    int in_channels, out_channels;
    int kernel_h, kernel_w;
    int stride_h, stride_w;     /* >= 1 */
    int pad_h, pad_w;           /* >= 0, zero padding */
    int dilation_h, dilation_w; /* >= 1 */
    int groups;                 /* divides both channel counts */
    int bias;                   /* nonzero: add a learned bias */
} sl_conv2d_options;

/* Square kernel, no dilation, one group, no bias: the convolution of
 * residual networks. */
SL_API sl_layer *sl_conv2d(int in_channels, int out_channels, int kernel, int stride, int pad);
/* Every option of Conv2d. */
SL_API sl_layer *sl_conv2d_with(const sl_conv2d_options *opts);

/* BatchNorm2d with PyTorch's defaults: momentum 0.1, eps 1e-5. In training
 * it normalises with the batch statistics and updates the running mean and
 * (unbiased) variance; in evaluation it uses the running statistics. */
SL_API sl_layer *sl_batchnorm2d(int channels);

typedef struct sl_batchnorm2d_options {
    int channels;   /* >= 1 */
    float momentum; /* in [0, 1]; PyTorch's default 0.1 */
    float eps;      /* > 0; PyTorch's default 1e-5 */
} sl_batchnorm2d_options;

/* Every option of BatchNorm2d. */
SL_API sl_layer *sl_batchnorm2d_with(const sl_batchnorm2d_options *opts);

/* y = max(x, 0); runs in place when nothing later reads its input. */
SL_API sl_layer *sl_relu(void);

/* Pooling over kernel x kernel windows. Average pooling divides by the
 * window size including padding (PyTorch's count_include_pad=True). */
SL_API sl_layer *sl_maxpool2d(int kernel, int stride, int pad);
SL_API sl_layer *sl_avgpool2d(int kernel, int stride, int pad);

typedef struct sl_maxpool2d_options {
    int kernel, stride; /* >= 1 */
    int pad;            /* in [0, kernel / 2] */
    int ceil_mode;      /* nonzero: the output size rounds up (GoogLeNet's
                           pools); 0: down, as sl_maxpool2d */
} sl_maxpool2d_options;

/* Every option of MaxPool2d. */
SL_API sl_layer *sl_maxpool2d_with(const sl_maxpool2d_options *opts);

/* Mean over H and W: {n, c, h, w} -> {n, c, 1, 1}. */
SL_API sl_layer *sl_global_avgpool(void);

/* {n, c, h, w} -> {n, c*h*w, 1, 1}; no copy. */
SL_API sl_layer *sl_flatten(void);

/* y = x W^T + b over the flattened input; in_features must equal c*h*w. */
SL_API sl_layer *sl_linear(int in_features, int out_features, int bias);

/* Dropout with drop probability p in [0, 1). Masks are drawn with
 * Philox4x32-10 keyed by (context seed, counter): a mask is a pure
 * function of the counter saved at forward time. */
SL_API sl_layer *sl_dropout(float p);

/* Causal multi-head self-attention, the core of a GPT-2 attention block
 * (between c_attn and c_proj). Input {B, 3 * channels, T, 1} token-major:
 * row (b, t) holds q in columns [0, C), k in [C, 2C), v in [2C, 3C), head
 * h using columns h*D .. h*D+D-1 of each (D = channels / heads). Output
 * {B, channels, T, 1}, head h's output in columns h*D ..: per head
 * softmax(q k^T / sqrt(D)) v with token i attending to tokens j <= i, and
 * dropout with probability dropout_p on the probabilities in training
 * (masks drawn with Philox like sl_dropout's; none in evaluation).
 * flash 1: FlashAttention-2 tiling, which keeps one log-sum-exp per row
 * for the backward and never stores a T x T matrix (memory linear in T);
 * flash 0: the plain computation, which keeps the B*heads*T*T
 * probabilities. NULL with SL_ERR_SHAPE when channels is not a multiple of
 * heads. */
SL_API sl_layer *sl_causal_attention(int channels, int heads, float dropout_p, int flash);

/* Residual blocks of torchvision's ResNet. A projection shortcut
 * (1x1 conv + BN, named "downsample.0" / "downsample.1") is added when the
 * stride is not 1 or the channel counts differ. */
SL_API sl_layer *sl_basic_block(int in_channels, int out_channels, int stride);
/* Bottleneck: 1x1 (width) -> 3x3 (width, stride) -> 1x1 (4 * width). */
SL_API sl_layer *sl_bottleneck(int in_channels, int width, int stride);
/* GoogLeNet's inception block (torchvision's naming: branch1, branch2.0,
 * branch2.1, branch3.0, branch3.1, branch4.1; each a conv + BN + ReLU; the
 * third branch uses a 3x3 conv where the paper has 5x5, as torchvision
 * does). Output channels: c1 + c3 + c5 + pool_proj. */
SL_API sl_layer *sl_inception(int in_channels, int c1, int c3_reduce, int c3,
                       int c5_reduce, int c5, int pool_proj);

/* "conv + BN + ReLU" as one block (torchvision's BasicConv2d: children
 * "conv" and "bn"; the conv has no bias, BN eps 1e-3). */
SL_API sl_layer *sl_conv_bn_relu(int in_channels, int out_channels, int kernel, int stride, int pad);

/* Frees a layer that was not added to a network. Accepts NULL. */
SL_API void sl_layer_free(sl_layer *layer);

/* GPT-2's layers. They work on sequence tensors: a [B, T, C] activation
 * has shape sl_shape_seq(B, T, C) ({B, C, T, 1} in layout NHWC) and is
 * stored token-major, element (b, t, ch) at (b * T + t) * C + ch, so each
 * token is a row of C values; a layer that works on rows treats n x h x w
 * as rows and c as C (feature vectors {N, C, 1, 1} are N rows). Build such
 * a network with sl_sequential(ctx, C, ...) and run it with input shape
 * sl_shape_seq(B, T, C), or sl_shape_seq(B, T, 1) token ids before
 * sl_embedding. LayerNorm, Conv1D and attention refuse an NCHW input of
 * more than one channel at more than one position (an image is not a
 * sequence); their outputs are NHWC. */

/* LayerNorm over the C channels of each token (nn.LayerNorm(C, eps)): the
 * row's mean and biased variance, statistics in double; parameters
 * "weight" [C] (ones) and "bias" [C] (zeros). eps > 0 (GPT-2: 1e-5). */
SL_API sl_layer *sl_layernorm(int channels, float eps);

/* Hugging Face GPT-2's Conv1D: y = x W + b for each token, weight
 * "weight" stored [in_features, out_features] (the transpose of
 * sl_linear's), "bias" [out_features]. [B, T, in] -> [B, T, out]
 * (also {N, in, 1, 1} -> {N, out, 1, 1}). Init: weight N(0, 0.02^2),
 * bias zeros. */
SL_API sl_layer *sl_conv1d(int in_features, int out_features);

/* GPT-2's GELU, the tanh approximation (torch's F.gelu(x,
 * approximate='tanh')): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
 * Keeps the input's shape; its backward reads its input. */
SL_API sl_layer *sl_gelu(void);

/* GPT-2's token + position embedding: y[b, t, :] = wte[id[b, t], :] +
 * wpe[t, :]. Its input, of shape sl_shape_seq(B, T, 1) with T <= context, is int32
 * token ids: it must be the network's first layer, and the network then
 * takes its input through the _tokens functions (net.h:
 * sl_net_train_step_tokens, sl_net_forward_backward_tokens, ...; the
 * float ones refuse it); the output is sl_shape_seq(B, T, channels). Parameters "wte.weight"
 * [vocab, channels] and "wpe.weight" [context, channels], both N(0,
 * 0.02^2); added to a network as "transformer" they get Hugging Face's
 * names (transformer.wte.weight). Ids must lie in [0, vocab): the caller
 * checks them (an id outside embeds as wpe[t] alone and gets no gradient;
 * nothing outside the tables is read). The ids get no gradient (zeros
 * where one is asked for). */
SL_API sl_layer *sl_embedding(int vocab, int context, int channels);

/* ------------------------------------------------------------------ */
/* Blocks of your own                                                  */
/* ------------------------------------------------------------------ */

/* A composite block of your own: layers (built-in, custom, or blocks)
 * wired as a graph inside one top-level layer, emitted into the network's
 * graph as ResNet's blocks are, so the top level stays a chain
 * (checkpoints sit between blocks) while the planner sees every tensor.
 * type_name (1 to 31 characters) names the block kind in graphs. An empty
 * block; NULL with sl_last_error() set on a bad name. */
SL_API sl_layer *sl_block(const char *type_name);

/* Adds child to a block, reading n_in tensors of the block: 0 is the
 * block's input, k the output of the k-th child added. On success *id (when
 * id is not NULL) gets the id of the child's output (>= 1). Fails, with the
 * block unchanged and *id set to -1, on a name that is taken, empty or too
 * long (NULL names the child by its index), an input id that does not exist
 * yet, n_in out of range, or a block child (which takes one input) with
 * n_in != 1. An input of -1 (the id a failed sl_block_add gave) fails too,
 * with that failure's status and message, so a chain of adds can be checked
 * once, at its end:
 *
 *     int t = 0;
 *     sl_block_add(b, "conv", sl_conv2d(c, c, 3, 1, 1), 1, &t, &t);
 *     sl_block_add(b, "bn", sl_batchnorm2d(c), 1, &t, &t);
 *     if (sl_block_add(b, "act", sl_relu(), 1, &t, &t) != SL_OK) ...
 *
 * A NULL child (its constructor failed) fails with the constructor's
 * status and message. Takes ownership of child, also when it fails. The
 * block's output is its last child's; every other child's output must be
 * read by a later child (checked when the block is added). Parameters are
 * named "<block>.<child>.<name>". */
SL_API sl_status sl_block_add(sl_layer *block, const char *name, sl_layer *child, int n_in,
                       const int *inputs, int *id);

/* The residual join for blocks: y = x0 + x1, two inputs of one shape. */
SL_API sl_layer *sl_join_sum(void);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_LAYERS_H */
