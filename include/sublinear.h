/*
 * sublinear.h — the public interface of the sublinear library.
 *
 * sublinear trains sequential deep networks (chains of layers and of
 * composite blocks such as residual or inception blocks) in C. A network
 * built with sl_sequential() keeps every activation; the same network built
 * with sl_sublinear() keeps only the tensors at segment boundaries and
 * re-runs each segment's forward during backward, with gradients equal bit
 * for bit to the plain run.
 *
 * Conventions, for every function below:
 *  - Functions that can fail return an sl_status; on failure
 *    sl_last_error() returns a message a person can read, and the objects
 *    passed in are left as they were.
 *  - Every *_create / constructor has a matching *_free that accepts NULL.
 *  - Tensors are float32, NCHW, contiguous, in host memory owned by the
 *    caller unless a comment says otherwise.
 *  - Handles are not safe to use from two threads at once; different
 *    handles may be used from different threads.
 */
#ifndef SUBLINEAR_H
#define SUBLINEAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SL_VERSION_MAJOR 0
#define SL_VERSION_MINOR 1
#define SL_VERSION_PATCH 0

/* ------------------------------------------------------------------ */
/* Status and errors                                                   */
/* ------------------------------------------------------------------ */

typedef enum sl_status {
    SL_OK = 0,
    SL_ERR_INVALID_ARG,  /* a NULL handle, a negative size, an unknown name */
    SL_ERR_SHAPE,        /* a tensor shape a layer cannot take */
    SL_ERR_NOMEM,        /* an allocation failed */
    SL_ERR_IO,           /* a file could not be read or written */
    SL_ERR_FORMAT,       /* a file is truncated, foreign or inconsistent */
    SL_ERR_NOT_FOUND,    /* a named tensor or model does not exist */
    SL_ERR_BUDGET,       /* a memory budget that no schedule can meet */
    SL_ERR_STATE,        /* the call is not valid in the object's state */
    SL_ERR_BACKEND,      /* the compute backend (e.g. CUDA) reported a failure */
    SL_ERR_UNSUPPORTED   /* valid request, not implemented in this build */
} sl_status;

/* The message of the last failed call on this thread. Never NULL; the
 * string stays valid until the next failing call on this thread. */
const char *sl_last_error(void);

/* A short constant name for a status ("SL_ERR_SHAPE"). Never NULL. */
const char *sl_status_name(sl_status status);

/* ------------------------------------------------------------------ */
/* Shapes                                                              */
/* ------------------------------------------------------------------ */

/* A 4-d NCHW shape. Feature vectors (after Flatten or Linear) are
 * {n, features, 1, 1}. */
typedef struct sl_shape {
    int n, c, h, w;
} sl_shape;

/* ------------------------------------------------------------------ */
/* Context: device, threads, seed                                      */
/* ------------------------------------------------------------------ */

typedef enum sl_device { SL_DEVICE_CPU = 0, SL_DEVICE_CUDA = 1 } sl_device;

typedef struct sl_context_options {
    sl_device device;  /* SL_DEVICE_CPU (default) or SL_DEVICE_CUDA */
    int threads;       /* CPU threads for kernels (an OpenMP team); 0 = all
                          cores. On cores shared with other processes set
                          OMP_WAIT_POLICY=passive in the environment: spinning
                          waits can slow a step many times (docs/guide.md) */
    uint64_t seed;     /* seeds weight initialisation and dropout */
    int deterministic; /* CUDA: deterministic cuDNN algorithms only (default
                          1): checkpointed and plain gradients then match bit
                          for bit, as they always do on the CPU */
} sl_context_options;

typedef struct sl_context sl_context;

/* Defaults: CPU, all cores, seed 0, deterministic. */
sl_context_options sl_context_defaults(void);

/* Creates a context. opts may be NULL for the defaults. On success *out
 * owns a new context; free it with sl_context_free() after every network
 * made from it. SL_DEVICE_CUDA fails with SL_ERR_UNSUPPORTED when this
 * build has no CUDA backend or no device is usable (the message says
 * which). */
sl_status sl_context_create(const sl_context_options *opts, sl_context **out);
void sl_context_free(sl_context *ctx);

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
sl_layer *sl_conv2d(int in_channels, int out_channels, int kernel, int stride, int pad);
/* Every option of Conv2d. */
sl_layer *sl_conv2d_ex(const sl_conv2d_options *opts);

/* BatchNorm2d with PyTorch's defaults: momentum 0.1, eps 1e-5. In training
 * it normalises with the batch statistics and updates the running mean and
 * (unbiased) variance; in evaluation it uses the running statistics. */
sl_layer *sl_batchnorm2d(int channels);
sl_layer *sl_batchnorm2d_ex(int channels, float momentum, float eps);

/* y = max(x, 0); runs in place when nothing later reads its input. */
sl_layer *sl_relu(void);

/* Pooling over kernel x kernel windows. Average pooling divides by the
 * window size including padding (PyTorch's count_include_pad=True). */
sl_layer *sl_maxpool2d(int kernel, int stride, int pad);
sl_layer *sl_avgpool2d(int kernel, int stride, int pad);
/* Pooling with ceil_mode: the output size rounds up (GoogLeNet's pools). */
sl_layer *sl_maxpool2d_ceil(int kernel, int stride, int pad);

/* Mean over H and W: {n, c, h, w} -> {n, c, 1, 1}. */
sl_layer *sl_global_avgpool(void);

/* {n, c, h, w} -> {n, c*h*w, 1, 1}; no copy. */
sl_layer *sl_flatten(void);

/* y = x W^T + b over the flattened input; in_features must equal c*h*w. */
sl_layer *sl_linear(int in_features, int out_features, int bias);

/* Dropout with drop probability p in [0, 1). Masks are drawn with
 * Philox4x32-10 keyed by (context seed, counter): a mask is a pure
 * function of the counter saved at forward time. */
sl_layer *sl_dropout(float p);

/* Residual blocks of torchvision's ResNet. A projection shortcut
 * (1x1 conv + BN, named "downsample.0" / "downsample.1") is added when the
 * stride is not 1 or the channel counts differ. */
sl_layer *sl_basic_block(int in_channels, int out_channels, int stride);
/* Bottleneck: 1x1 (width) -> 3x3 (width, stride) -> 1x1 (4 * width). */
sl_layer *sl_bottleneck(int in_channels, int width, int stride);
/* GoogLeNet's inception block (torchvision's naming: branch1, branch2.0,
 * branch2.1, branch3.0, branch3.1, branch4.1; each a conv + BN + ReLU; the
 * third branch uses a 3x3 conv where the paper has 5x5, as torchvision
 * does). Output channels: c1 + c3 + c5 + pool_proj. */
sl_layer *sl_inception(int in_channels, int c1, int c3_reduce, int c3,
                       int c5_reduce, int c5, int pool_proj);

/* "conv + BN + ReLU" as one block (torchvision's BasicConv2d: children
 * "conv" and "bn"; the conv has no bias, BN eps 1e-3). */
sl_layer *sl_conv_bn_relu(int in_channels, int out_channels, int kernel, int stride, int pad);

/* Frees a layer that was not added to a network. Accepts NULL. */
void sl_layer_free(sl_layer *layer);

/* ------------------------------------------------------------------ */
/* Schedules                                                           */
/* ------------------------------------------------------------------ */

typedef enum sl_schedule_kind {
    SL_SCHEDULE_NONE = 0, /* keep every activation (the baseline) */
    SL_SCHEDULE_SQRT,     /* ceil(sqrt(N)) segments over the top-level chain */
    SL_SCHEDULE_SEGMENTS, /* k segments balancing kept bytes */
    SL_SCHEDULE_BUDGET,   /* least recomputed FLOPs whose planned peak fits a
                             budget: segments, re-forwarded segments checkpointing
                             again inside (multi-level) */
    SL_SCHEDULE_BUDGET_OPS /* the same search with operator-level choices: a block
                              may keep its convolution outputs and recompute its
                              BatchNorm, ReLU and add outputs from them; least
                              estimated recompute time (see sl_cost_model) */
} sl_schedule_kind;

typedef struct sl_schedule {
    sl_schedule_kind kind;
    int segments;          /* for SL_SCHEDULE_SEGMENTS */
    uint64_t budget_bytes; /* for SL_SCHEDULE_BUDGET */
} sl_schedule;

#define SL_CKPT_NONE ((sl_schedule){SL_SCHEDULE_NONE, 0, 0})
#define SL_CKPT_SQRT ((sl_schedule){SL_SCHEDULE_SQRT, 0, 0})
#define SL_CKPT_SEGMENTS(k) ((sl_schedule){SL_SCHEDULE_SEGMENTS, (k), 0})
#define SL_CKPT_BUDGET(bytes) ((sl_schedule){SL_SCHEDULE_BUDGET, 0, (uint64_t)(bytes)})
#define SL_CKPT_BUDGET_OPS(bytes) ((sl_schedule){SL_SCHEDULE_BUDGET_OPS, 0, (uint64_t)(bytes)})

/* How SL_SCHEDULE_BUDGET_OPS weighs recomputation: a layer's time is
 * estimated as its FLOPs / flops_per_s + the bytes it moves / bytes_per_s,
 * so a memory-bound BatchNorm costs more than its FLOPs say. */
typedef struct sl_cost_model {
    double flops_per_s;
    double bytes_per_s;
} sl_cost_model;

/* Measures the pair on the context's device: a 768^3 matrix product and a
 * 64 MiB copy, the best of three (well under a second). */
sl_status sl_cost_model_measure(sl_context *ctx, sl_cost_model *out);

/* ------------------------------------------------------------------ */
/* Networks                                                            */
/* ------------------------------------------------------------------ */

typedef struct sl_net sl_net;

/* A plain network: every activation kept for backward. in_channels is the
 * channel count of the input images. The network refers to ctx, which
 * must outlive it. On success *out owns the network (sl_net_free). */
sl_status sl_sequential(sl_context *ctx, int in_channels, sl_net **out);

/* The same network trained in sublinear memory under the given schedule
 * (SL_CKPT_SQRT is memonger's rule). Gradients equal those of
 * sl_sequential bit for bit on the CPU. */
sl_status sl_sublinear(sl_context *ctx, int in_channels, sl_schedule schedule, sl_net **out);

/* Frees a network, its layers, parameters and memory. Accepts NULL. */
void sl_net_free(sl_net *net);

/* Appends a layer under a name (its parameters become "name.weight" ...;
 * NULL names it by its index, as torch.nn.Sequential does). Takes
 * ownership of layer, also on failure. Fails when layer is NULL (with the
 * constructor's message), when its input channels differ from the
 * current output channels, or after the network has been run. */
sl_status sl_net_add(sl_net *net, const char *name, sl_layer *layer);

/* Number of layers added at the top level. */
int sl_net_layer_count(const sl_net *net);

/* The output shape for an input shape, or SL_ERR_SHAPE naming the first
 * layer that cannot take its input. */
sl_status sl_net_output_shape(sl_net *net, sl_shape input, sl_shape *output);

/* Changes the schedule; the next step plans anew. */
sl_status sl_net_set_schedule(sl_net *net, sl_schedule schedule);

/* The cost model the network's schedule search and memory report use;
 * NULL restores the device's default (a pair measured once on a
 * development machine). Both rates must be positive. Plans anew. */
sl_status sl_net_set_cost_model(sl_net *net, const sl_cost_model *model);

/* BatchNorm under re-forward. By default (0) a re-forward normalises with
 * the batch statistics saved by the first forward and leaves the running
 * statistics alone: exact, the running statistics equal the plain run's.
 * With 1, memonger's behaviour: every BatchNorm layer the schedule
 * re-forwards computes its batch statistics in both passes and updates
 * its running statistics in both, with momentum m' = 1 - sqrt(1 - m), so
 * the two updates together decay the old value as one update with m does.
 * Layers that are not re-forwarded keep momentum m. */
sl_status sl_net_set_bn_momentum_rescale(sl_net *net, int enabled);

/* Frozen BatchNorm, for fine-tuning: with frozen = 1 every BatchNorm layer
 * of the network (inside blocks too) normalises with its running
 * statistics in training as in evaluation, never updates them, and
 * back-propagates through that fixed affine map (dx = dy * gamma /
 * sqrt(running_var + eps)); gamma and beta still learn. 0 restores batch
 * statistics. Re-forward stays exact, so checkpointed and plain runs still
 * agree bit for bit. The network counts as used afterwards (no more
 * sl_net_add). count, when not NULL, gets how many layers were set. */
sl_status sl_net_freeze_batchnorm(sl_net *net, int frozen, int *count);

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

/* Number of named tensors (parameters and running statistics). Finalises
 * the network: layers cannot be added afterwards. */
int sl_net_param_count(sl_net *net);
/* The i-th named tensor, in the order layers were added. */
sl_status sl_net_param(sl_net *net, int index, sl_param_info *out);
/* The tensor with this exact name, or SL_ERR_NOT_FOUND. */
sl_status sl_net_find_param(sl_net *net, const char *name, sl_param_info *out);

/* Copies tensor `index` (count floats) to / from the caller's host memory,
 * on any device. read_grad copies its gradient (SL_ERR_STATE when it has
 * none: running statistics, inference mode). */
sl_status sl_net_param_read(sl_net *net, int index, float *dst);
sl_status sl_net_param_write(sl_net *net, int index, const float *src);
sl_status sl_net_param_read_grad(sl_net *net, int index, float *dst);

/* ------------------------------------------------------------------ */
/* Optimizers                                                          */
/* ------------------------------------------------------------------ */

typedef enum sl_optimizer_kind { SL_OPT_SGD = 0, SL_OPT_ADAM = 1 } sl_optimizer_kind;

typedef struct sl_optimizer_options {
    sl_optimizer_kind kind;
    float lr;
    float momentum;     /* SGD */
    int nesterov;       /* SGD */
    float weight_decay; /* L2, added to the gradient (PyTorch's rule) */
    float beta1, beta2, eps; /* Adam */
} sl_optimizer_options;

/* SGD as torch.optim.SGD (dampening 0). */
sl_optimizer_options sl_sgd(float lr, float momentum, float weight_decay, int nesterov);
/* Adam as torch.optim.Adam (bias-corrected, L2 weight decay). */
sl_optimizer_options sl_adam(float lr, float beta1, float beta2, float eps, float weight_decay);

/* Sets the optimizer; its state (momentum, moments) starts at zero. */
sl_status sl_net_set_optimizer(sl_net *net, const sl_optimizer_options *opts);
/* Changes the learning rate, keeping the optimizer state. */
sl_status sl_net_set_lr(sl_net *net, float lr);

/* ------------------------------------------------------------------ */
/* Running                                                             */
/* ------------------------------------------------------------------ */

typedef struct sl_step_result {
    float loss;   /* mean softmax cross-entropy over the batch */
    int correct;  /* samples whose arg-max logit equals the label */
} sl_step_result;

/* Forward in evaluation mode (running BN statistics, no dropout). x holds
 * shape.n images; logits receives the output (n x output features),
 * caller-allocated. */
sl_status sl_net_predict(sl_net *net, const float *x, sl_shape shape, float *logits);

/* Forward in training mode, softmax cross-entropy against labels (each in
 * [0, classes)), and backward: afterwards every parameter's grad holds
 * d(loss)/d(param). Updates BN running statistics as a training forward
 * does. Does not change the weights. result may be NULL. */
sl_status sl_net_compute_gradients(sl_net *net, const float *x, sl_shape shape,
                                   const int *labels, sl_step_result *result);

/* One optimizer step from the current gradients. */
sl_status sl_net_update(sl_net *net);

/* For losses other than softmax cross-entropy: forward in training mode,
 * then backward from the caller's gradient dy of the network output
 * (n x output features). output (may be NULL) receives the forward output;
 * dx (may be NULL) receives the gradient with respect to the input (same
 * size as x). Parameter gradients are set as by sl_net_compute_gradients. */
sl_status sl_net_forward_backward(sl_net *net, const float *x, sl_shape shape, const float *dy,
                                  float *output, float *dx);

/* sl_net_compute_gradients followed by sl_net_update. */
sl_status sl_net_train_step(sl_net *net, const float *x, sl_shape shape,
                            const int *labels, sl_step_result *result);

/* Number of optimizer steps taken. */
int64_t sl_net_step_count(const sl_net *net);

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

typedef enum sl_mode { SL_MODE_TRAIN = 0, SL_MODE_INFER = 1 } sl_mode;

typedef struct sl_memory_report {
    /* planned bytes by category */
    uint64_t outputs;     /* activations (forward outputs) */
    uint64_t grad_inputs; /* gradients with respect to activations */
    uint64_t buffers;     /* workspaces and state saved for backward */
    uint64_t params;      /* parameters and running statistics */
    uint64_t param_grads;
    uint64_t optimizer;   /* momentum / Adam moments */
    uint64_t total;       /* arena peak + params + grads + optimizer */
    uint64_t arena_bytes; /* the planned activation arena (peak of the
                             first three categories together) */
    uint64_t arena_measured; /* high-water mark of the arena the executor
                                used in the last run of this mode at this
                                shape; 0 if none ran */
    /* measured: bytes the library holds now for each of these */
    uint64_t measured_params, measured_param_grads, measured_optimizer;
    uint64_t measured_total; /* arena_measured + the three above */
    uint64_t device_used;    /* CUDA: drop of the device's free memory since the
                                context was created (all of this process's
                                use, as cudaMemGetInfo sees it); 0 on the CPU */
    double recompute_fraction; /* recomputed FLOPs / FLOPs of one plain step */
    double recompute_time_fraction; /* the same in time estimated by the network's
                                       cost model (sl_net_set_cost_model) */
} sl_memory_report;

/* The planned memory of one step at this input shape in this mode. Needs
 * no kernel to run. The category figures are the bytes of the largest
 * simultaneous set of live tensors of that category (so categories can sum
 * to more than arena_bytes, never less). */
sl_status sl_net_memory_report(sl_net *net, sl_shape input, sl_mode mode,
                               sl_memory_report *out);

/* Writes a report as one JSON object (keys: outputs, grad_inputs, buffers,
 * params, param_grads, optimizer, arena, total, arena_measured,
 * measured_total, recompute_fraction, recompute_time_fraction) into buf of
 * size n, NUL-terminated.
 * Returns SL_ERR_INVALID_ARG when it does not fit. */
sl_status sl_memory_report_json(const sl_memory_report *r, char *buf, size_t n);

/* Inference mode (optnet's removal of gradients): frees the parameter
 * gradients; sl_net_predict keeps working, training calls fail with
 * SL_ERR_STATE. Optimizer state stays (it is needed to resume exactly) but
 * is not counted in an inference plan. Switching back to SL_MODE_TRAIN
 * allocates the gradients again: training then continues bit-identically
 * to a network that never switched. New networks start in training mode. */
sl_status sl_net_set_mode(sl_net *net, sl_mode mode);
sl_mode sl_net_mode(const sl_net *net);

/* Memory sharing in plans (default on). Off gives optnet's "before": every
 * output, gradient and workspace in storage of its own, nothing in place,
 * as a plain framework would run. Results are identical either way. */
sl_status sl_net_set_memory_reuse(sl_net *net, int enabled);

/* Live bytes per program step of one planned step, by category. */
typedef struct sl_memory_timeline {
    int steps;          /* program steps (forward, re-forward, loss, backward) */
    uint64_t *outputs;  /* [steps] */
    uint64_t *grad_inputs;
    uint64_t *buffers;
    uint64_t arena_bytes;
    char **step_names;  /* [steps] "fwd layer1.0.conv1", "bwd fc", ... */
} sl_memory_timeline;

/* Fills *out for this input shape and mode under the network's schedule;
 * free with sl_memory_timeline_free. No kernel runs. */
sl_status sl_net_memory_timeline(sl_net *net, sl_shape input, sl_mode mode,
                                 sl_memory_timeline *out);
void sl_memory_timeline_free(sl_memory_timeline *t);

/* Writes n timelines on shared axes as a self-contained SVG (total live
 * bytes per step, one series per timeline, labelled). */
sl_status sl_memory_timeline_svg(const char *path, const sl_memory_timeline *const *series,
                                 const char *const *labels, int n);

/* One top-level unit (a layer, or a whole block) of a training plan, for
 * people: what it costs and what the schedule does with it (the table of
 * `sublinear plan --explain`). Sizes in bytes; times are estimates of the
 * network's cost model (sl_net_set_cost_model). */
typedef struct sl_unit_report {
    const char *name;        /* the layer's name, owned by the network */
    const char *type;        /* "Bottleneck", "Conv2d", ... (static) */
    uint64_t fwd_flops, bwd_flops;
    double fwd_seconds, bwd_seconds;
    uint64_t input_bytes, output_bytes;
    /* held from its forward to its backward (output included) when it
     * keeps everything its backward reads / only its conv outputs (the
     * rest recomputed from them) / only its output (its backward
     * re-forwards it from its input) */
    uint64_t keep_all_bytes, keep_conv_bytes, keep_output_bytes;
    uint64_t workspace_bytes; /* the largest scratch one of its kernels takes */
    int forwards;             /* times its forward runs in a step (1 + re-forwards) */
    const char *action;       /* what its first forward keeps: "keep all", "keep conv",
                                 "checkpoint" (only its output, kept), "recompute"
                                 (output dropped once read); "-" in inference */
} sl_unit_report;

/* Reports every top-level unit of the plan of this input shape and mode
 * (no kernel runs). On success *out is a new array of *n reports; free it
 * with sl_unit_reports_free (the strings belong to the network). */
sl_status sl_net_unit_reports(sl_net *net, sl_shape input, sl_mode mode, sl_unit_report **out,
                              int *n);
void sl_unit_reports_free(sl_unit_report *reports);

/* Writes the network as a Graphviz DOT graph: one node per layer with its
 * output shape and size; nodes whose outputs share arena storage have the
 * same fill colour (with reuse off every node has its own colour).
 * Composite blocks are drawn as clusters. */
sl_status sl_net_write_dot(sl_net *net, sl_shape input, sl_mode mode, const char *path);

/* ------------------------------------------------------------------ */
/* Models                                                              */
/* ------------------------------------------------------------------ */

/* Appends a model's layers to an empty network with 3 input channels.
 * Names: "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"
 * (ImageNet stem), "resnet20", "resnet56", "resnet110" (CIFAR), "vgg-a",
 * "alexnet", "googlenet". res is the input resolution the classifier is
 * sized for (224 for ImageNet models, 32 for CIFAR). */
sl_status sl_model_build(sl_net *net, const char *model, int num_classes, int res);

/* NULL-terminated list of the model names above. */
const char *const *sl_model_names(void);

/* ------------------------------------------------------------------ */
/* Built-in dataset                                                    */
/* ------------------------------------------------------------------ */

/* A seeded synthetic image-classification dataset that needs no download:
 * each class is a smooth random pattern; a sample is its class pattern,
 * randomly shifted and scaled, plus noise. Learnable, not noise. Samples
 * are a pure function of (seed, split, index). */
typedef struct sl_dataset sl_dataset;

typedef enum sl_split { SL_SPLIT_TRAIN = 0, SL_SPLIT_TEST = 1 } sl_split;

/* Creates the dataset (num_classes >= 2, sizes >= 1). On success *out owns
 * it; free with sl_dataset_free. */
sl_status sl_dataset_synthetic(int num_classes, int channels, int height, int width,
                               uint64_t seed, sl_dataset **out);
void sl_dataset_free(sl_dataset *ds);

/* Fills x (n x channels x height x width floats) and labels (n ints) with
 * samples index .. index + n - 1 of a split. */
sl_status sl_dataset_batch(const sl_dataset *ds, sl_split split, int64_t index, int n,
                           float *x, int *labels);

/* ------------------------------------------------------------------ */
/* Saving and loading                                                  */
/* ------------------------------------------------------------------ */

/* Files are .safetensors: an 8-byte little-endian header length, a JSON
 * header naming each tensor's dtype, shape and data_offsets, then the raw
 * little-endian data. Tensor names are torchvision's ("layer1.0.conv1.weight",
 * "bn1.running_mean"), so PyTorch's load_state_dict reads a model file and
 * a file written from a torchvision state_dict loads here.
 *
 * Every write is atomic: the file is written to a temporary file in the
 * target's directory, synced, and renamed over the target. A write that
 * fails (a missing or read-only directory, a full disk) returns SL_ERR_IO,
 * removes the temporary file and leaves a previous file at path intact.
 *
 * Every load validates the whole file and stages it before it changes the
 * network: on any failure the network's tensors (and, for snapshots, its
 * optimizer and step count) are as they were. Errors name the tensor and
 * the problem:
 *   SL_ERR_IO         the file cannot be opened or read
 *   SL_ERR_FORMAT     truncated or not safetensors: a header length beyond
 *                     the file, malformed JSON, an unknown dtype, offsets out
 *                     of range, overlapping, leaving holes or not matching
 *                     the shape (in every mode); a tensor of the network
 *                     stored with a dtype other than F32 (strict)
 *   SL_ERR_NOT_FOUND  a tensor of the network is missing from the file, or
 *                     the file has a tensor the network does not (strict)
 *   SL_ERR_SHAPE      a tensor's shape differs from the network's (strict)
 */

/* What a load found wrong with one tensor. */
typedef enum sl_load_issue {
    SL_LOAD_MISSING = 0, /* the network has it, the file does not */
    SL_LOAD_UNEXPECTED,  /* the file has it, the network does not */
    SL_LOAD_MISMATCHED   /* both have it, with a different shape or dtype */
} sl_load_issue;

/* Called once per tensor with an issue, in both modes, before the load
 * succeeds or fails. name and detail (e.g. "shape [10, 64] in the file,
 * [5, 64] in the network") are valid during the call only. */
typedef void (*sl_load_issue_fn)(void *user, const char *name, sl_load_issue issue,
                                 const char *detail);

typedef struct sl_load_options {
    /* 1 (default): any issue fails the load, which changes nothing.
     * 0: the tensors that match are loaded, the others are reported and
     * keep their values. */
    int strict;
    sl_load_issue_fn on_issue; /* may be NULL */
    void *user;                /* passed to on_issue */
} sl_load_options;

/* Counts of one load; filled also when a strict load fails on issues. */
typedef struct sl_load_report {
    int loaded;     /* tensors copied into the network */
    int ignored;    /* "*.num_batches_tracked" entries (see sl_load_model) */
    int missing, unexpected, mismatched;
} sl_load_report;

/* Strict, no callback. */
sl_load_options sl_load_defaults(void);

/* Saves the parameters and BatchNorm running statistics (F32), never
 * gradients, activations, workspaces or optimizer state, so a model file
 * is as large as its parameters plus a header. After each BatchNorm's
 * running statistics it writes "<bn>.num_batches_tracked" as an I64
 * scalar holding sl_net_step_count(), as PyTorch's state_dict has it, so
 * load_state_dict(strict=True) accepts the file. __metadata__ is
 * {"format": "pt", "producer": "sublinear"}. path is written atomically
 * (see above). Finalises the network as sl_net_param_count does. */
sl_status sl_save_model(sl_net *net, const char *path);

/* Loads a model file into a built network with the same tensor names.
 * opts may be NULL for sl_load_defaults(); report may be NULL. Entries
 * named "*.num_batches_tracked" (PyTorch's BatchNorm counters, which this
 * library does not use) are accepted and ignored in both modes. Tensors
 * must be F32 (no conversion). A snapshot's weights load with strict = 0
 * (its optimizer state is then reported as unexpected). Errors: see
 * above; on failure the network is unchanged. */
sl_status sl_load_model(sl_net *net, const char *path, const sl_load_options *opts,
                        sl_load_report *report);

/* sl_load_model from a file's bytes in memory (data, bytes; the caller
 * keeps ownership, nothing is kept after the call). */
sl_status sl_load_model_memory(sl_net *net, const void *data, size_t bytes,
                               const sl_load_options *opts, sl_load_report *report);

/* Saves everything needed to resume training exactly: the model file's
 * tensors; the optimizer's state as "optimizer.<param>.momentum_buffer"
 * (SGD with momentum) or "optimizer.<param>.exp_avg" and ".exp_avg_sq"
 * (Adam), F32; and, as strings in __metadata__ ("format":
 * "sublinear-snapshot"), the optimizer kind and hyperparameters, the step
 * count, and the context's seed and dropout counter. SL_ERR_STATE when no
 * optimizer is set. Written atomically. */
sl_status sl_save_snapshot(sl_net *net, const char *path);

/* Resumes from a snapshot: loads it (always strictly) into a network of
 * the same architecture, sets the file's optimizer (replacing any the
 * network has, or setting one where it has none) with its state and step
 * count, and sets the seed and dropout counter of the network's context
 * (shared with every network of that context). Training on from here
 * gives bit for bit the parameters of never having stopped. SL_ERR_FORMAT
 * for a file that is not a snapshot; otherwise errors as sl_load_model;
 * on failure the network and its context are unchanged. */
sl_status sl_load_snapshot(sl_net *net, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_H */
