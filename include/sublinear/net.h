/*
 * sublinear/net.h — networks and how they train: schedules (what to keep,
 * what to recompute), building a network, its parameters, optimizers,
 * and running a step (training, or inference: sl_net_set_mode).
 *
 *     sl_net *net;
 *     sl_sublinear(ctx, 3, SL_SCHEDULE_SQRT, &net);   (or sl_sequential)
 *     sl_model_build(net, "resnet20", 10, 32);         (or sl_net_add ...)
 *     sl_optimizer_options opt = sl_optimizer_sgd(0.1f, 0.9f, 5e-4f, 0);
 *     sl_net_set_optimizer(net, &opt);
 *     sl_net_prepare(net, sl_shape_nchw(32, 3, 32, 32), SL_MODE_TRAIN);   (optional)
 *     sl_step_result r;
 *     sl_net_train_step(net, x, sl_shape_nchw(32, 3, 32, 32), labels, &r);
 */
#ifndef SUBLINEAR_NET_H
#define SUBLINEAR_NET_H

#include "sublinear/core.h"
#include "sublinear/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Schedules                                                           */
/* ------------------------------------------------------------------ */

typedef enum sl_schedule_kind {
    SL_SCHEDULE_KIND_NONE = 0,  /* keep every activation (the baseline) */
    SL_SCHEDULE_KIND_SQRT,      /* ceil(sqrt(N)) segments over the top-level chain */
    SL_SCHEDULE_KIND_SEGMENTS,  /* k segments balancing kept bytes */
    SL_SCHEDULE_KIND_BUDGET,    /* least recomputed FLOPs whose planned peak fits a
                                   budget: segments, re-forwarded segments
                                   checkpointing again inside (multi-level) */
    SL_SCHEDULE_KIND_BUDGET_OPS /* the same search with operator-level choices: a
                                   block may keep its convolution outputs and
                                   recompute its BatchNorm, ReLU and add outputs
                                   from them; least estimated recompute time (see
                                   sl_cost_model) */
} sl_schedule_kind;

/* A schedule: build one with the SL_SCHEDULE_* values below (or
 * sl_schedule_parse), not field by field. */
typedef struct sl_schedule {
    sl_schedule_kind kind;
    int segments;          /* for SL_SCHEDULE_KIND_SEGMENTS */
    uint64_t budget_bytes; /* for SL_SCHEDULE_KIND_BUDGET */
} sl_schedule;

#define SL_SCHEDULE_NONE ((sl_schedule){SL_SCHEDULE_KIND_NONE, 0, 0})
#define SL_SCHEDULE_SQRT ((sl_schedule){SL_SCHEDULE_KIND_SQRT, 0, 0})
#define SL_SCHEDULE_SEGMENTS(k) ((sl_schedule){SL_SCHEDULE_KIND_SEGMENTS, (k), 0})
#define SL_SCHEDULE_BUDGET(bytes) ((sl_schedule){SL_SCHEDULE_KIND_BUDGET, 0, (uint64_t)(bytes)})
#define SL_SCHEDULE_BUDGET_OPS(bytes) ((sl_schedule){SL_SCHEDULE_KIND_BUDGET_OPS, 0, (uint64_t)(bytes)})

/* A schedule from its text, as the `sublinear` command takes it: "none",
 * "sqrt", "segments:K" (1 <= K <= 1000000), "budget:SIZE" or "ops:SIZE",
 * SIZE being bytes or a number with K/KiB, M/MiB or G/GiB (B for bytes).
 * SL_ERR_INVALID_ARG naming the text when it is none of these (*out is
 * then unchanged). */
SL_API sl_status sl_schedule_parse(const char *text, sl_schedule *out);

/* How SL_SCHEDULE_KIND_BUDGET_OPS weighs recomputation: a layer's time is
 * estimated as its FLOPs / flops_per_s + the bytes it moves / bytes_per_s,
 * so a memory-bound BatchNorm costs more than its FLOPs say. */
typedef struct sl_cost_model {
    double flops_per_s;
    double bytes_per_s;
} sl_cost_model;

/* Measures the pair on the context's device: a 768^3 matrix product and a
 * 64 MiB copy, the best of three (well under a second). */
SL_API sl_status sl_cost_model_measure(sl_context *ctx, sl_cost_model *out);

/* ------------------------------------------------------------------ */
/* Networks                                                            */
/* ------------------------------------------------------------------ */

typedef struct sl_net sl_net;

/* A plain network: every activation kept for backward. in_channels is the
 * channel count of the input images. The network refers to ctx, which
 * must outlive it. On success *out owns the network (sl_net_free). */
SL_API sl_status sl_sequential(sl_context *ctx, int in_channels, sl_net **out);

/* The same network trained in sublinear memory under the given schedule
 * (SL_SCHEDULE_SQRT is memonger's rule). Gradients equal those of
 * sl_sequential bit for bit on the CPU. */
SL_API sl_status sl_sublinear(sl_context *ctx, int in_channels, sl_schedule schedule, sl_net **out);

/* Frees a network, its layers, parameters and memory. Accepts NULL. */
SL_API void sl_net_free(sl_net *net);

/* Appends a layer under a name (its parameters become "name.weight" ...;
 * NULL names it by its index, as torch.nn.Sequential does). Takes
 * ownership of layer, also on failure. Fails when layer is NULL (with the
 * constructor's status and message: SL_ERR_NOMEM when it ran out of
 * memory), when its input channels differ from the current output
 * channels, or after the network has been run. */
SL_API sl_status sl_net_add(sl_net *net, const char *name, sl_layer *layer);

/* Number of layers added at the top level. */
SL_API int sl_net_layer_count(const sl_net *net);

/* The output shape for an input shape, or SL_ERR_SHAPE naming the first
 * layer that cannot take its input. */
SL_API sl_status sl_net_output_shape(sl_net *net, sl_shape input, sl_shape *output);

/* Changes the schedule; the next step plans anew. */
SL_API sl_status sl_net_set_schedule(sl_net *net, sl_schedule schedule);

/* What a network's steps store their activations in. */
typedef enum sl_precision {
    SL_PRECISION_F32 = 0, /* everything in float (the default) */
    SL_PRECISION_BF16 = 1 /* mixed: activations in bfloat16, math in float */
} sl_precision;

/* Mixed precision. Under SL_PRECISION_BF16 every activation a step stores
 * (the outputs kept for backward, segment boundaries, gradients of
 * activations) is bfloat16, rounded to nearest even, so the activation
 * memory about halves; each layer widens its operands to float for the
 * duration of its kernels, computes in float and rounds its results.
 * Parameters, their gradients and the optimizer state stay float, and so
 * do the input, the network's output (the logits, or a language model's
 * hidden states) and the input's gradient. A checkpointed step is the
 * same computation as a plain one in the same precision: every schedule
 * gives the bits of schedule none. Plans anew; SL_ERR_INVALID_ARG for a
 * precision not listed. */
SL_API sl_status sl_net_set_precision(sl_net *net, sl_precision precision);

/* The network's precision (SL_PRECISION_F32 for NULL). */
SL_API sl_precision sl_net_precision(const sl_net *net);

/* The cost model the network's schedule search and memory report use;
 * NULL restores the device's default (a pair measured once on a
 * development machine). Both rates must be positive. Plans anew. */
SL_API sl_status sl_net_set_cost_model(sl_net *net, const sl_cost_model *model);

/* BatchNorm under re-forward. By default (0) a re-forward normalises with
 * the batch statistics saved by the first forward and leaves the running
 * statistics alone: exact, the running statistics equal the plain run's.
 * With 1, memonger's behaviour: every BatchNorm layer the schedule
 * re-forwards computes its batch statistics in both passes and updates
 * its running statistics in both, with momentum m' = 1 - sqrt(1 - m), so
 * the two updates together decay the old value as one update with m does.
 * Layers that are not re-forwarded keep momentum m. */
SL_API sl_status sl_net_set_bn_momentum_rescale(sl_net *net, int enabled);

/* Frozen BatchNorm, for fine-tuning: with frozen = 1 every BatchNorm layer
 * of the network (inside blocks too) normalises with its running
 * statistics in training as in evaluation, never updates them, and
 * back-propagates through that fixed affine map (dx = dy * gamma /
 * sqrt(running_var + eps)); gamma and beta still learn. 0 restores batch
 * statistics. Re-forward stays exact, so checkpointed and plain runs still
 * agree bit for bit. The network counts as used afterwards (no more
 * sl_net_add). count, when not NULL, gets how many layers were set. */
SL_API sl_status sl_net_set_batchnorm_frozen(sl_net *net, int frozen, int *count);

/* ------------------------------------------------------------------ */
/* Parameters                                                          */
/* ------------------------------------------------------------------ */

typedef struct sl_param_info {
    const char *name; /* torchvision-style name, owned by the network */
    int ndim;
    int dims[4];
    size_t count;     /* number of floats */
    float *data;      /* owned by the network; writable. Device memory on a
                         CUDA context: use sl_net_param_read / _write */
    float *grad;      /* gradient after the last backward; NULL for
                         running statistics and in inference mode */
    int trainable;    /* 0 for BatchNorm running statistics */
} sl_param_info;

/* Number of named tensors (parameters and running statistics) into *count.
 * Finalises the network (allocating its parameters; SL_ERR_NOMEM when that
 * fails): layers cannot be added afterwards. */
SL_API sl_status sl_net_param_count(sl_net *net, int *count);
/* The i-th named tensor, in the order layers were added. */
SL_API sl_status sl_net_param(sl_net *net, int index, sl_param_info *out);
/* The tensor with this exact name, or SL_ERR_NOT_FOUND. */
SL_API sl_status sl_net_find_param(sl_net *net, const char *name, sl_param_info *out);

/* Copies tensor `index` (count floats) to / from the caller's host memory,
 * on any device. read_grad copies its gradient (SL_ERR_STATE when it has
 * none: running statistics, inference mode). */
SL_API sl_status sl_net_param_read(sl_net *net, int index, float *dst);
SL_API sl_status sl_net_param_write(sl_net *net, int index, const float *src);
SL_API sl_status sl_net_param_read_grad(sl_net *net, int index, float *dst);

/* ------------------------------------------------------------------ */
/* Optimizers                                                          */
/* ------------------------------------------------------------------ */

typedef enum sl_optimizer_kind {
    SL_OPT_SGD = 0,
    SL_OPT_ADAM = 1,
    SL_OPT_ADAMW = 2 /* Adam with decoupled weight decay */
} sl_optimizer_kind;

typedef struct sl_optimizer_options {
    sl_optimizer_kind kind;
    float lr;
    float momentum;     /* SGD */
    int nesterov;       /* SGD */
    float weight_decay; /* SGD, Adam: L2, added to the gradient (PyTorch's
                           rule); AdamW: decoupled, see sl_optimizer_adamw */
    float beta1, beta2, eps; /* Adam */
} sl_optimizer_options;

/* SGD as torch.optim.SGD (dampening 0). */
SL_API sl_optimizer_options sl_optimizer_sgd(float lr, float momentum, float weight_decay,
                                             int nesterov);
/* Adam as torch.optim.Adam (bias-corrected, L2 weight decay). */
SL_API sl_optimizer_options sl_optimizer_adam(float lr, float beta1, float beta2, float eps,
                                              float weight_decay);

/* AdamW as torch.optim.AdamW: each step first multiplies a parameter by
 * 1 - lr * weight_decay, then takes the bias-corrected Adam step without
 * L2 term. The decay applies only to parameters with ndim >= 2 (weights
 * of linear and convolution layers); biases and BatchNorm / LayerNorm
 * weights are not decayed, as nanoGPT and GPT-2 training do (in PyTorch:
 * two parameter groups, weight_decay 0 for the < 2-d ones). */
SL_API sl_optimizer_options sl_optimizer_adamw(float lr, float beta1, float beta2, float eps,
                                               float weight_decay);

/* Sets the optimizer; its state (momentum, moments) starts at zero. It is
 * allocated with the parameters (at the first run, or at once when they
 * exist already), so setting an optimizer and planning allocate nothing;
 * SL_ERR_NOMEM when it does not fit (the memory check). */
SL_API sl_status sl_net_set_optimizer(sl_net *net, const sl_optimizer_options *opts);
/* Changes the learning rate, keeping the optimizer state. */
SL_API sl_status sl_net_set_lr(sl_net *net, float lr);

/* Global-norm gradient clipping as torch.nn.utils.clip_grad_norm_: at each
 * update the norm of all trainable gradients together, sqrt(sum of g^2)
 * (summed in double in a fixed order: deterministic), is measured, and
 * when max_norm / (norm + 1e-6) < 1 the gradients enter the update
 * multiplied by that factor (the stored gradients are left as they are).
 * max_norm 0 turns clipping off (the default); it must be finite, >= 0. */
SL_API sl_status sl_net_set_grad_clip(sl_net *net, float max_norm);

/* The gradient norm measured by the last sl_net_update, before clipping
 * (of the averaged gradient under accumulation), into *norm; measured
 * with or without clipping. SL_ERR_STATE before the first update. */
SL_API sl_status sl_net_last_grad_norm(const sl_net *net, float *norm);

/* Gradient accumulation: one update per micro_batches (k >= 1, default 1)
 * gradient computations. With k > 1 every gradient-computing run
 * (sl_net_compute_gradients, sl_net_forward_backward, sl_net_train_step)
 * adds into the parameter gradients instead of overwriting them, except
 * the first after an update; sl_net_update then refuses (SL_ERR_STATE,
 * nothing changed) until k micro-batches were accumulated, and steps with
 * their mean (the sum times 1/k): k micro-batches of b samples step as one
 * batch of k*b would (BatchNorm aside, which normalises per micro-batch).
 * sl_net_train_step updates after every k-th micro-batch only. Setting k
 * discards the micro-batches accumulated so far. */
SL_API sl_status sl_net_set_grad_accumulation(sl_net *net, int micro_batches);

/* The update inside backward (PyTorch's optimizer-in-backward recipe,
 * planned byte for byte; default off). On, sl_net_train_step and
 * sl_net_train_step_tokens update each layer's parameters as soon as its
 * gradients are complete (right after the layer's backward; a weight tied
 * to a language-model head after the last of its two uses), and those
 * gradients' storage returns to the activation arena for the rest of
 * backward: the planner holds each layer's gradients as a value with a
 * lifetime, like an activation, and the fixed gradient block is freed
 * (sl_memory_report.param_grads is then their largest live set, inside
 * arena_bytes). Parameters and optimizer state come out bit-identical to
 * the separate update, for SGD, Adam and AdamW under every schedule.
 * Gradients are not kept: sl_net_compute_gradients, sl_net_forward_backward,
 * sl_net_compute_gradients_tokens and sl_net_update fail with SL_ERR_STATE,
 * sl_net_param_read_grad finds none, and sl_net_last_grad_norm measures
 * nothing. Refused (SL_ERR_STATE, nothing changed), in either order of the
 * calls: global-norm clipping (it needs every gradient before the first
 * update: turn it off with sl_net_set_grad_clip(net, 0)), gradient
 * accumulation over k > 1 micro-batches (the gradients must be kept), and
 * a network joined to a communicator (sl_dist_join: gradients are averaged
 * over ranks after backward). A layer that fails inside the step (a custom
 * layer's callback) leaves the layers before it updated. */
SL_API sl_status sl_net_set_update_in_backward(sl_net *net, int enabled);
/* Whether the update in backward is on (0 for NULL). */
SL_API int sl_net_update_in_backward(const sl_net *net);

/* The learning rate of a warmup + cosine schedule at optimizer step `step`
 * (from 0): lr_max * (step + 1) / warmup during the first `warmup` steps,
 * then lr_max decaying to lr_min along half a cosine until step `total`,
 * and lr_min from `total` on. A pure function: pass its value to
 * sl_net_set_lr before each update. */
SL_API float sl_lr_warmup_cosine(int64_t step, int64_t warmup, int64_t total, float lr_max,
                                 float lr_min);

/* ------------------------------------------------------------------ */
/* Running                                                             */
/* ------------------------------------------------------------------ */

/* What a run computes: a training step (forward, loss, backward, with
 * dropout and batch statistics) or inference (forward in evaluation). */
typedef enum sl_mode { SL_MODE_TRAIN = 0, SL_MODE_INFER = 1 } sl_mode;

/* Inference mode (optnet's removal of gradients): frees the parameter
 * gradients; sl_net_predict keeps working, training calls fail with
 * SL_ERR_STATE. Optimizer state stays (it is needed to resume exactly) but
 * is not counted in an inference plan. Switching back to SL_MODE_TRAIN
 * allocates the gradients again: training then continues bit-identically
 * to a network that never switched. New networks start in training mode. */
SL_API sl_status sl_net_set_mode(sl_net *net, sl_mode mode);
SL_API sl_mode sl_net_mode(const sl_net *net);

typedef struct sl_step_result {
    float loss;   /* mean softmax cross-entropy over the batch */
    int correct;  /* samples (positions, with a language-model head) whose
                     arg-max logit equals the label */
    int counted;  /* samples the loss averages over: the batch, or with a
                     language-model head the positions whose label is not
                     the ignore index */
} sl_step_result;

/* Makes the network ready to run inputs of shape `input` in `mode`
 * (SL_MODE_TRAIN: a training step; SL_MODE_INFER: prediction), once, before
 * any data is read: finalises it (no layer can be added after), builds the
 * schedule, program and plan for the shape, checks that the step's planned
 * memory fits the machine, and allocates the parameters (initialised from
 * the context's seed), their gradients and optimizer state (training) and
 * the activation arena. All of it or nothing: on failure, with a message
 * that says why (SL_ERR_NOMEM naming the bytes and a schedule that fits,
 * SL_ERR_SHAPE for an input the network does not take), the network is as
 * it was. Optional: a run on a shape or mode not prepared yet prepares
 * first, the same way; a prepared shape's runs only check, run and
 * update. A new shape prepares anew (the arena grows, never shrinks). */
SL_API sl_status sl_net_prepare(sl_net *net, sl_shape input, sl_mode mode);

/* Forward in evaluation mode (running BN statistics, no dropout). x holds
 * shape.n images; logits receives the output (n x output features),
 * caller-allocated. */
SL_API sl_status sl_net_predict(sl_net *net, const float *x, sl_shape shape, float *logits);

/* Forward in training mode, softmax cross-entropy against labels (each in
 * [0, classes)), and backward: afterwards every parameter's grad holds
 * d(loss)/d(param). Updates BN running statistics as a training forward
 * does. Does not change the weights. result may be NULL. */
SL_API sl_status sl_net_compute_gradients(sl_net *net, const float *x, sl_shape shape,
                                   const int *labels, sl_step_result *result);

/* One optimizer step from the current gradients (their mean under
 * accumulation, clipped when sl_net_set_grad_clip is set). */
SL_API sl_status sl_net_update(sl_net *net);

/* For losses other than softmax cross-entropy: forward in training mode,
 * then backward from the caller's gradient dy of the network output
 * (n x output features). output (may be NULL) receives the forward output;
 * dx (may be NULL) receives the gradient with respect to the input (same
 * size as x). Parameter gradients are set as by sl_net_compute_gradients. */
SL_API sl_status sl_net_forward_backward(sl_net *net, const float *x, sl_shape shape, const float *dy,
                                  float *output, float *dx);

/* sl_net_compute_gradients followed by sl_net_update; under gradient
 * accumulation (sl_net_set_grad_accumulation, k > 1) the update follows
 * only every k-th call, the others only accumulate.
 *
 * A loss that is NaN or infinite fails the step with SL_ERR_STATE, e.g.
 * "sl_net_train_step: the loss is NaN at step 7: training diverged ...",
 * where step counts updates from 1 (sl_net_step_count() + 1) and a
 * micro-batch under accumulation is named too. Such a step is not
 * applied: its gradients (and the micro-batches accumulated with it) are
 * discarded, and the parameters, optimizer state and step count are as
 * before it, so a training loop can stop and save what it had (the
 * forward still moved BatchNorm's running statistics and the dropout
 * counter). Two exceptions: with the update in backward
 * (sl_net_set_update_in_backward) the update has run by the time the
 * loss is known, and the step still fails, saying so; a network in a
 * communicator (sl_dist_join) does not check, as its ranks must stop
 * together (sum the losses over the ranks with sl_dist_sum). result (may
 * be NULL) holds the loss in both cases. */
SL_API sl_status sl_net_train_step(sl_net *net, const float *x, sl_shape shape,
                            const int *labels, sl_step_result *result);

/* ------------------------------------------------------------------ */
/* Language models                                                     */
/* ------------------------------------------------------------------ */

/* Ends the network with a language-model head tied to the parameter named
 * `weight` ([vocab, C], such as GPT-2's "transformer.wte.weight"). The last
 * layer gives hidden states of C channels per position (sequence tensors
 * sl_shape_seq(B, T, C), stored position by position) and the logits of a row h are
 * h W^T. The head is fused with the loss, softmax cross-entropy averaged
 * over the positions whose label is not ignore_index (which must lie
 * outside [0, vocab); PyTorch uses -100): rows go through in chunks of
 * chunk_rows (0: about 32 MiB of logits at a time on the CPU; on a GPU at
 * least C rows a chunk, up to 256 MiB), so the B*T x vocab
 * logits never exist, in forward or backward; a chunk of every row is the
 * plain computation. W then gets gradient from the head and from its own
 * layer. Finalises the network (no more sl_net_add); call it again to
 * change ignore_index or chunk_rows. With a head, sl_net_predict gives
 * logits (vocab per position, sl_net_output_shape says so) and labels are
 * per position. */
SL_API sl_status sl_net_set_lm_head(sl_net *net, const char *weight, int ignore_index,
                                    int chunk_rows);

/* Token runs: the network's input is int32 token ids (its first layer an
 * embedding: sl_embedding), of shape {batch, 1, seq, 1}, given here and
 * only here (the float runs above refuse such a network, and these refuse
 * one whose input is floats). The runs with targets need a language-model
 * head. ids and targets hold batch x seq int32 values, row by row, as
 * llm.c's token shards give them: ids in [0, vocab) (the head's, or the
 * embedding's), targets in [0, vocab) or the ignore index. result->loss is the mean over counted
 * positions (0 when every target is ignored), result->correct the
 * positions predicted right, result->counted the positions counted. */
SL_API sl_status sl_net_compute_gradients_tokens(sl_net *net, const int32_t *ids,
                                                 const int32_t *targets, int batch, int seq,
                                                 sl_step_result *result);
/* sl_net_compute_gradients_tokens followed by sl_net_update (with gradient
 * accumulation, after every k-th micro-batch, as sl_net_train_step; a
 * non-finite loss fails the step as there). */
SL_API sl_status sl_net_train_step_tokens(sl_net *net, const int32_t *ids, const int32_t *targets,
                                          int batch, int seq, sl_step_result *result);
/* The loss in evaluation mode (no dropout), without gradients. */
SL_API sl_status sl_net_evaluate_tokens(sl_net *net, const int32_t *ids, const int32_t *targets,
                                        int batch, int seq, sl_step_result *result);
/* The logits of every position: batch x seq x vocab floats, caller-allocated
 * (with a head); without one, the network's output (sl_net_output_shape
 * for input {batch, 1, seq, 1}). */
SL_API sl_status sl_net_predict_tokens(sl_net *net, const int32_t *ids, int batch, int seq,
                                       float *logits);
/* sl_net_forward_backward for a network whose input is token ids (an
 * embedding first) and which has no language-model head: forward in
 * training mode on ids (batch x seq int32, in the vocabulary), then
 * backward from the caller's gradient dy of the output; output (may be
 * NULL) receives the forward output. The ids get no gradient. */
SL_API sl_status sl_net_forward_backward_tokens(sl_net *net, const int32_t *ids, int batch,
                                                int seq, const float *dy, float *output);

/* Number of optimizer steps taken. */
SL_API int64_t sl_net_step_count(const sl_net *net);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_NET_H */
