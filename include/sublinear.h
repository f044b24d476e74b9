/*
 * sublinear.h — the public interface of the sublinear library.
 *
 * sublinear trains sequential deep networks (chains of layers and of
 * composite blocks such as residual or inception blocks, built in or
 * written by the user: "Writing a layer" below) in C. A network
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
 *  - Threads: a context and every network made from it are used by one
 *    thread at a time (the networks of a context share its backend
 *    instance, its seed and its dropout counter, which sl_load_snapshot
 *    sets). Different contexts, with their networks, may be used from
 *    different threads at once, and give the same results as run one after
 *    the other (tests/test_threads.c, under ThreadSanitizer in the CI).
 *    sl_last_error() is per thread.
 *  - Memory: every allocation failure is SL_ERR_NOMEM, and the failing call
 *    changes nothing (tests/test_alloc_failure.c fails every allocation of
 *    a build-train-save-load run in turn). Two exceptions outside the
 *    library's hands: on the CPU, OpenMP's runtime (libgomp) ends the
 *    process when it cannot allocate a thread team, and OpenBLAS allocates
 *    its own buffers; a run too large for the host is refused before its
 *    arena is allocated (sl_net_set_memory_check).
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
    int gpu;           /* CUDA: the device ordinal to run on (default 0);
                          a value past the machine's devices is an error */
    int tf32;          /* CUDA: 1 lets convolutions and GEMMs round their
                          inputs to TF32 on tensor cores (PyTorch's default
                          for convolutions); 0 (default) keeps true FP32
                          arithmetic, as on the CPU */
} sl_context_options;

typedef struct sl_context sl_context;

/* Defaults: CPU, all cores, seed 0, deterministic, GPU 0, no TF32. */
sl_context_options sl_context_defaults(void);

/* Creates a context. opts may be NULL for the defaults. On success *out
 * owns a new context; free it with sl_context_free() after every network
 * made from it. SL_DEVICE_CUDA fails with SL_ERR_UNSUPPORTED when this
 * build has no CUDA backend or no device is usable, and with
 * SL_ERR_INVALID_ARG when opts->gpu names no device of this machine (the
 * message says which, and how many there are). */
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
/* Writing a layer                                                     */
/* ------------------------------------------------------------------ */

/* A layer type of your own, trained like the built-in ones: it is planned,
 * checkpointed and re-forwarded by the same code. You describe the type
 * in an sl_custom_type (its callbacks and what its backward reads) and
 * make layers of it with sl_custom_layer(); a layer owns no activation
 * memory: every callback gets pointers into the planned arena (device
 * memory and the backend's stream on a CUDA context). docs/guide.md,
 * "Writing a layer", walks through an example (examples/custom_layer.c). */

#define SL_CUSTOM_MAX_INPUTS 8 /* inputs of one layer (inside a block) */
#define SL_CUSTOM_MAX_PARAMS 4 /* parameters of one custom layer */
#define SL_CUSTOM_NAME_MAX 32  /* type, parameter and block child names,
                                  with the terminating NUL */

/* Which forward a callback runs. */
typedef enum sl_custom_pass {
    SL_CUSTOM_TRAIN = 0, /* training forward: may update running statistics,
                            draws fresh random numbers, writes the saved state */
    SL_CUSTOM_EVAL,      /* evaluation (sl_net_predict): no saved state */
    SL_CUSTOM_REFORWARD  /* recompute during backward under a checkpointing
                            schedule: must give the TRAIN output bit for bit
                            and change nothing else (no running statistics) */
} sl_custom_pass;

/* Flags of a custom type: what its backward reads, and where it may write.
 * The planner keeps an input or output alive until backward only when the
 * type reads it, and runs a layer in place only when the type allows it
 * and nothing later reads the overwritten tensor. */
enum {
    SL_CUSTOM_NEEDS_INPUT = 1u << 0,  /* backward reads x[] */
    SL_CUSTOM_NEEDS_OUTPUT = 1u << 1, /* backward reads y */
    SL_CUSTOM_FWD_INPLACE = 1u << 2,  /* y may be x[0] (same size): forward
                                         must then read each element of x
                                         before writing it */
    SL_CUSTOM_BWD_INPLACE = 1u << 3,  /* dx[0] may be dy, likewise */
    SL_CUSTOM_NEEDS_SAVED = 1u << 4,  /* backward reads the saved state:
                                         sizes.saved_bytes must be > 0 (and
                                         is 0 without this flag) */
    SL_CUSTOM_SAVED_KEPT = 1u << 5    /* the saved state of the TRAIN forward
                                         lives until backward and a
                                         REFORWARD reads it instead of
                                         writing it (BatchNorm's batch
                                         statistics); needs NEEDS_SAVED */
};

/* What a layer of the type needs for one input shape. Sizes are in bytes
 * (signed so that a negative result of your arithmetic is caught). */
typedef struct sl_custom_sizes {
    sl_shape out;                     /* the output shape (every field >= 1) */
    int64_t saved_bytes;              /* state a TRAIN forward keeps for backward */
    int64_t forward_workspace_bytes;  /* scratch of one forward */
    int64_t backward_workspace_bytes; /* scratch of one backward */
    int64_t forward_flops, backward_flops; /* for schedules and reports */
} sl_custom_sizes;

/* Random numbers, sl_custom_random_uniform (opaque; valid during one call). */
typedef struct sl_custom_call sl_custom_call;

/* What forward gets. Tensors are float32 NCHW in the memory of the
 * context's device. Pointers to saved state and workspaces are 64-byte
 * aligned. */
typedef struct sl_custom_forward_args {
    sl_custom_pass pass;
    int n_in;
    const float *x[SL_CUSTOM_MAX_INPUTS];
    sl_shape in[SL_CUSTOM_MAX_INPUTS];
    float *y; /* may equal x[0] with SL_CUSTOM_FWD_INPLACE */
    sl_shape out;
    void *saved; /* saved_bytes; NULL in EVAL or when 0. TRAIN writes it;
                    REFORWARD writes it too, or reads it (SAVED_KEPT) */
    void *workspace;                      /* forward_workspace_bytes, or NULL */
    float *params[SL_CUSTOM_MAX_PARAMS];  /* in declaration order; writable
                                             (running statistics in TRAIN) */
    void *config;      /* the layer's own copy of its configuration (host) */
    sl_device device;
    void *stream;      /* CUDA: the cudaStream_t to queue kernels on; NULL on the CPU */
    int threads;       /* CPU threads the library's kernels use */
    const sl_custom_call *call; /* for sl_custom_random_uniform */
} sl_custom_forward_args;

/* What backward gets: the gradient dy of the output, and where to put the
 * gradients. dx[i] is NULL when input i needs no gradient; with
 * accumulate[i] set, add to dx[i] (a tensor read by several layers gets
 * the sum), else overwrite it. Parameter gradients are zeroed before each
 * backward: add to grads[k] (NULL for parameters declared not trainable). */
typedef struct sl_custom_backward_args {
    int n_in;
    const float *x[SL_CUSTOM_MAX_INPUTS]; /* with SL_CUSTOM_NEEDS_INPUT, else NULL */
    sl_shape in[SL_CUSTOM_MAX_INPUTS];
    const float *y;                       /* with SL_CUSTOM_NEEDS_OUTPUT, else NULL */
    sl_shape out;
    const float *dy;
    float *dx[SL_CUSTOM_MAX_INPUTS];      /* dx[0] may equal dy with SL_CUSTOM_BWD_INPLACE */
    int accumulate[SL_CUSTOM_MAX_INPUTS];
    void *saved;                          /* as the forward left it */
    void *workspace;                      /* backward_workspace_bytes, or NULL */
    const float *params[SL_CUSTOM_MAX_PARAMS];
    float *grads[SL_CUSTOM_MAX_PARAMS];
    void *config;
    sl_device device;
    void *stream;
    int threads;
    const sl_custom_call *call;
} sl_custom_backward_args;

/* A layer type. Callbacks return SL_OK, or a status with a message set by
 * sl_set_error(); a failing forward or backward makes the running call
 * (sl_net_train_step ...) return that status and message. */
typedef struct sl_custom_type {
    const char *name; /* in messages and graphs ("SiLU"); 1 to 31 characters */
    unsigned flags;   /* SL_CUSTOM_* above */
    int n_inputs;     /* inputs it takes: 1 (0 means 1); more only inside a
                         block (sl_block_add) */
    /* Required. Output shape and sizes for n_in input shapes (out is
     * zeroed before the call); refuse a shape with SL_ERR_SHAPE. Called
     * when planning, before any kernel. */
    sl_status (*shape)(const void *config, int n_in, const sl_shape *in, sl_custom_sizes *out);
    /* Required. */
    sl_status (*forward)(const sl_custom_forward_args *a);
    /* Required. */
    sl_status (*backward)(const sl_custom_backward_args *a);
    /* Optional: output channels for the inputs' channel counts (0 where
     * not known yet), 0 for "not known", or -1 (with sl_set_error) to
     * refuse a layer when it is added. NULL: not known until the shape
     * pass. Lets sl_net_add check the layers after this one. */
    int (*out_channels)(const void *config, int n_in, const int *in_channels);
} sl_custom_type;

/* How a parameter starts. fan is fan_out (KAIMING: N(0, 2 / fan)) or
 * fan_in (UNIFORM: U(-1/sqrt(fan), 1/sqrt(fan)), PyTorch's default); it
 * must be >= 1 for those two and is ignored by the others. */
typedef enum sl_param_init {
    SL_PARAM_ZEROS = 0,
    SL_PARAM_ONES,
    SL_PARAM_KAIMING_NORMAL_FAN_OUT,
    SL_PARAM_UNIFORM_FAN_IN
} sl_param_init;

/* A parameter of a custom layer: saved in model files as "<layer>.<name>".
 * trainable 0 makes a statistic that is saved but gets no gradient and no
 * optimizer update (as BatchNorm's running_mean). */
typedef struct sl_custom_param {
    const char *name; /* 1 to 31 characters, no '.' */
    int ndim;         /* 1 to 4 */
    int dims[4];      /* each >= 1 */
    sl_param_init init;
    int fan;
    int trainable;
} sl_custom_param;

/* A layer of a custom type. type and params are copied (they may be
 * locals); config_bytes of config are copied into the layer, and the
 * callbacks get that copy (config may be NULL when config_bytes is 0).
 * Returns NULL with sl_last_error() set when the definition is bad: a NULL
 * required callback, an unknown flag, SAVED_KEPT without NEEDS_SAVED, a
 * name missing or too long, n_inputs out of range, more than
 * SL_CUSTOM_MAX_PARAMS parameters, a bad parameter size, init or fan, or two
 * parameters with one name. Owned like any layer (sl_net_add,
 * sl_block_add, sl_layer_free). Sizes the shape callback returns are
 * checked when the network is planned: a negative size, an output
 * dimension < 1, or saved_bytes that disagree with SL_CUSTOM_NEEDS_SAVED
 * fail the planning call with a message naming the layer. */
sl_layer *sl_custom_layer(const sl_custom_type *type, const void *config, size_t config_bytes,
                          const sl_custom_param *params, int n_params);

/* Fills dst[0 .. count) with uniform floats in [0, 1): numbers first ..
 * first + count - 1 of this layer's draw in this step. They come from
 * Philox4x32-10 keyed by the context's seed, at the counter the layer took
 * at its TRAIN forward (from the same counter as dropout, saved in
 * snapshots), so a REFORWARD and the backward get the numbers the TRAIN
 * forward got, and a stochastic layer re-forwards exactly. A TRAIN forward
 * may draw any numbers; a REFORWARD or backward only numbers its TRAIN
 * forward drew (SL_ERR_STATE otherwise, and in EVAL). dst is memory of the
 * context's device (a workspace, the saved state, the output); on a CUDA
 * context the numbers are written on the backend's stream. */
sl_status sl_custom_random_uniform(const sl_custom_call *call, uint64_t first, size_t count,
                                   float *dst);

/* Records a message for sl_last_error() (printf format) and returns
 * status: how a callback says why it fails. */
sl_status sl_set_error(sl_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A composite block of your own: layers (built-in, custom, or blocks)
 * wired as a graph inside one top-level layer, emitted into the network's
 * graph as ResNet's blocks are, so the top level stays a chain
 * (checkpoints sit between blocks) while the planner sees every tensor.
 * type_name (1 to 31 characters) names the block kind in graphs. An empty
 * block; NULL with sl_last_error() set on a bad name. */
sl_layer *sl_block(const char *type_name);

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
 * Takes ownership of child, also when it fails. The block's output is its
 * last child's; every other child's output must be read by a later child
 * (checked when the block is added). Parameters are named
 * "<block>.<child>.<name>". */
sl_status sl_block_add(sl_layer *block, const char *name, sl_layer *child, int n_in,
                       const int *inputs, int *id);

/* The residual join for blocks: y = x0 + x1, two inputs of one shape. */
sl_layer *sl_join_add(void);

/* ------------------------------------------------------------------ */
/* Schedules                                                           */
/* ------------------------------------------------------------------ */

typedef enum sl_schedule_kind {
    SL_SCHEDULE_KIND_NONE = 0, /* keep every activation (the baseline) */
    SL_SCHEDULE_KIND_SQRT,     /* ceil(sqrt(N)) segments over the top-level chain */
    SL_SCHEDULE_KIND_SEGMENTS, /* k segments balancing kept bytes */
    SL_SCHEDULE_KIND_BUDGET,   /* least recomputed FLOPs whose planned peak fits a
                             budget: segments, re-forwarded segments checkpointing
                             again inside (multi-level) */
    SL_SCHEDULE_KIND_BUDGET_OPS /* the same search with operator-level choices: a block
                              may keep its convolution outputs and recompute its
                              BatchNorm, ReLU and add outputs from them; least
                              estimated recompute time (see sl_cost_model) */
} sl_schedule_kind;

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
sl_status sl_schedule_parse(const char *text, sl_schedule *out);

/* How SL_SCHEDULE_KIND_BUDGET_OPS weighs recomputation: a layer's time is
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
 * (SL_SCHEDULE_SQRT is memonger's rule). Gradients equal those of
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

/* Number of named tensors (parameters and running statistics) into *count.
 * Finalises the network (allocating its parameters; SL_ERR_NOMEM when that
 * fails): layers cannot be added afterwards. */
sl_status sl_net_param_count(sl_net *net, int *count);
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
    uint64_t communication; /* held for data-parallel communication (training
                               a network in a communicator: sl_dist_join);
                               0 otherwise */
    uint64_t total;       /* arena peak + params + grads + optimizer +
                             communication */
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
 * params, param_grads, optimizer, communication, arena, total, arena_measured,
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

/* Memory check (default on). Before a run allocates its activation arena,
 * its planned size is compared with the memory this process may still
 * take: on the CPU the least of /proc/meminfo's MemAvailable, the room
 * under the memory cgroup's limit (v2 memory.max, or v1) and the room
 * under RLIMIT_AS; on a GPU its free memory (cudaMemGetInfo). A step that does not fit fails with SL_ERR_NOMEM naming
 * both figures and, in training, a budget schedule that fits (or that none
 * does), instead of being killed by the kernel's OOM killer while the
 * arena is filled. enabled = 0 skips the check (the allocation itself may
 * still fail with SL_ERR_NOMEM, or the kernel may kill the process). */
sl_status sl_net_set_memory_check(sl_net *net, int enabled);

/* Where a run's time goes, by layer type and pass. */
typedef struct sl_profile_entry {
    char layer_type[32]; /* "Conv2d", a custom layer's type name,
                            "SoftmaxCrossEntropy", or "optimizer" */
    char pass[16];       /* "forward", "re-forward", "eval", "backward",
                            "loss" or "update" */
    int64_t calls;       /* program steps (or updates) timed */
    double seconds;      /* their wall time, each step waited for */
} sl_profile_entry;

/* Profiling (default off). On, every step of every run waits for the
 * device (on a GPU: for its kernels to finish) and its wall time is added
 * to the entry of its layer type and pass; sl_net_update's kernels go to
 * ("optimizer", "update"). The waits serialise the device, so profiled
 * runs are slower than plain ones: read the split, not the sum. Off
 * discards the entries. */
sl_status sl_net_set_profiling(sl_net *net, int enabled);

/* The entries gathered since profiling was turned on (or last reset),
 * slowest first: up to cap of them into out (out may be NULL when cap is
 * 0); *n gets how many there are. reset = 1 clears them after reading.
 * SL_ERR_STATE when profiling is off. */
sl_status sl_net_profile(sl_net *net, sl_profile_entry *out, int cap, int *n, int reset);

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
/* Data-parallel training: MPI (CPU ranks), NCCL (CUDA ranks)           */
/* ------------------------------------------------------------------ */

/* Ranks started by the MPI launcher (`mpirun -np N prog`) each build the
 * same network, join a communicator, and then run the usual training loop
 * (sl_net_train_step, or sl_net_compute_gradients + sl_net_update) on
 * their own batches. Every training run of a joined network:
 *  - first agrees with the other ranks that every rank can run this step
 *    (its input, labels, plan and arena are fine): when one rank's call
 *    fails before its kernels (a bad batch shape, a bad label, out of
 *    memory), every rank's call returns an error (SL_ERR_STATE on the
 *    others, naming the rank) and no rank has changed anything; the ranks
 *    stay usable for the next step;
 *  - reduces the parameter gradients while backward runs, in buckets that
 *    end where the schedule's segments end (so a re-forward never waits
 *    on communication) and at most bucket_bytes long inside a segment:
 *    a bucket starts (non-blocking MPI allreduce, progressed between
 *    program steps; on CUDA ncclAllReduce on a second stream after an
 *    event) as soon as backward has finished its gradients. The gradients
 *    are reduced in place (they are the bucket buffers): afterwards every
 *    rank's gradients hold the mean over the ranks, so with the same
 *    optimizer every rank takes the same update and parameters stay
 *    identical. With equal batches of B per rank this is the gradient of
 *    the mean loss over all N * B samples;
 *  - BatchNorm: each rank normalises with its own batch statistics (as
 *    PyTorch's DistributedDataParallel does); after the step rank 0's
 *    running statistics are broadcast to every rank (DDP's
 *    broadcast_buffers rule), so they stay identical. Frozen BatchNorm
 *    never changes them. The packed copy of the running statistics this
 *    broadcast uses is the report's `communication` line.
 * Prediction (sl_net_predict) and the update (sl_net_update) are local to
 * each rank: every rank must update after every training run, as the
 * usual loop does, or parameters drift apart.
 *
 * Timeout: a rank that waits longer than timeout_seconds for the others
 * in any collective (a rank that crashed, hangs, or stopped calling)
 * returns SL_ERR_BACKEND; on CUDA the NCCL communicator is aborted. (Not
 * covered: creating the NCCL communicator inside sl_dist_join, which
 * blocks until every rank has come.) The
 * communicator is then unusable (operations already started cannot be
 * cancelled): every later training run fails with SL_ERR_STATE; end the
 * job. */
typedef struct sl_dist sl_dist;

typedef struct sl_dist_options {
    /* The address of the MPI_Comm to join (the library works on a
     * duplicate of it); NULL for MPI_COMM_WORLD. */
    const void *mpi_comm;
    /* Seconds a rank waits for the others in one collective before it
     * fails (default 600, PyTorch's default for NCCL). */
    double timeout_seconds;
    /* Largest gradient bucket inside one segment, in bytes (default 4 MiB;
     * a bucket never spans a segment boundary). */
    size_t bucket_bytes;
    /* 1 (default): buckets start as backward produces them. 0: one
     * blocking reduction of every bucket after backward (for measuring
     * what the overlap hides). */
    int overlap;
} sl_dist_options;

/* Defaults: MPI_COMM_WORLD, 600 s, 4 MiB buckets, overlap on. */
sl_dist_options sl_dist_defaults(void);

/* Joins net to a communicator; opts may be NULL for the defaults. A
 * collective call: every rank of the communicator calls it with a network
 * of the same architecture (checked: SL_ERR_INVALID_ARG on every rank
 * otherwise). Initialises MPI when the program has not (MPI_Init_thread,
 * MPI_THREAD_FUNNELED; it is then finalised at exit); a program that
 * initialises MPI itself finalises it after sl_dist_free. Broadcasts rank
 * 0's parameters and running statistics, and its optimizer state and
 * step count when every rank has the same optimizer, so every rank starts
 * from the same network (resume from a snapshot on any rank count by
 * loading it on every rank, or on rank 0 only, before joining). A
 * network on a CUDA context uses NCCL, bootstrapped over MPI, one GPU per
 * rank (give each rank its own GPU, e.g. CUDA_VISIBLE_DEVICES).
 * On success *out owns the membership; net must stay alive while it is
 * joined. SL_ERR_UNSUPPORTED when this build has no MPI (or, on CUDA, no
 * NCCL); SL_ERR_STATE when net is already joined. */
sl_status sl_dist_join(sl_net *net, const sl_dist_options *opts, sl_dist **out);

/* Leaves the communicator (not collective): the network trains alone
 * again. Accepts NULL. */
void sl_dist_free(sl_dist *dist);

/* This rank and the number of ranks (0 and 1 for NULL). */
int sl_dist_rank(const sl_dist *dist);
int sl_dist_size(const sl_dist *dist);

/* Sums n doubles over the ranks in place (every rank gets the sums); for
 * global figures such as images/s or accuracy. Collective. */
sl_status sl_dist_sum(sl_dist *dist, double *values, int n);

/* sl_save_model / sl_save_snapshot of the joined network, written by rank
 * 0 only (atomically, as always) and the same file single-process
 * training writes; every rank returns rank 0's status. Collective. */
sl_status sl_dist_save_model(sl_dist *dist, const char *path);
sl_status sl_dist_save_snapshot(sl_dist *dist, const char *path);

/* Where a rank's time went in communication, since the join. */
typedef struct sl_dist_stats {
    int64_t steps;           /* training runs that communicated */
    int64_t buckets;         /* bucket reductions started */
    int64_t buckets_hidden;  /* of those, finished while backward still ran
                                (CPU: seen by MPI_Test between steps) */
    uint64_t bytes_reduced;  /* gradient bytes reduced (per rank) */
    double wait_seconds;     /* time the rank waited after backward for
                                reductions to finish: the exposed part */
    double agree_seconds;    /* time in the per-step agreement */
} sl_dist_stats;

sl_status sl_dist_get_stats(const sl_dist *dist, sl_dist_stats *out);

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
 * target's directory (".<name>.tmp.XXXXXX", locked with flock while it is
 * written), synced, and renamed over the target. A write that fails (a
 * missing or read-only directory, a full disk: the disk needs room for
 * the new file beside the old one) returns SL_ERR_IO, removes the
 * temporary file and leaves a previous file at path intact. A process
 * killed while saving leaves its temporary file behind; the next save of
 * the same path removes every such file that no live writer holds.
 * Names are bytes: a name holding "\u0000" is a different name from its
 * prefix (messages and on_issue show such names with control characters
 * escaped as \u00XX).
 *
 * Every load validates the whole file and stages it before it changes the
 * network: on any failure the network's tensors (and, for snapshots, its
 * optimizer and step count) are as they were. Errors name the tensor and
 * the problem:
 *   SL_ERR_IO         the file cannot be opened or read
 *   SL_ERR_FORMAT     truncated or not safetensors: a header length beyond
 *                     the file, a header that is not strict JSON in UTF-8
 *                     (the reference implementation's rules: no raw control
 *                     characters, no lone surrogates, integers only where
 *                     integers belong, at most 127 levels of nesting), a dtype
 *                     the reference does not know, offsets out of range,
 *                     overlapping, leaving holes or not matching the shape
 *                     (in every mode); a tensor name or "__metadata__" key
 *                     that appears twice (the reference keeps the last
 *                     copy; we refuse the ambiguity); a tensor of the
 *                     network stored with a dtype other than F32, F16 or
 *                     BF16 (strict)
 *   SL_ERR_NOMEM      memory ran out while reading or checking the file
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

/* The float type of a saved model's parameters and running statistics. */
typedef enum sl_file_dtype {
    SL_FILE_F32 = 0, /* exact */
    SL_FILE_BF16 = 1, /* bfloat16: F32's range, 8 significant bits; half the file */
    SL_FILE_F16 = 2   /* IEEE half: 11 significant bits, largest finite 65504 */
} sl_file_dtype;

/* sl_save_model with the tensors written as dtype. F32 values are rounded
 * to nearest, ties to even (IEEE 754's default; NaN stays NaN). A finite
 * value beyond the type's range (F16: |x| >= 65520) fails the save with
 * SL_ERR_INVALID_ARG naming the tensor, and nothing is written. Loading
 * widens F16 and BF16 back to F32 exactly. */
sl_status sl_save_model_as(sl_net *net, const char *path, sl_file_dtype dtype);

/* Loads a model file into a built network with the same tensor names.
 * opts may be NULL for sl_load_defaults(); report may be NULL. Entries
 * named "*.num_batches_tracked" (PyTorch's BatchNorm counters, which this
 * library does not use) are accepted and ignored in both modes. Tensors
 * may be F32, F16 or BF16: F16 and BF16 widen to F32 exactly (every value
 * of either is a float), in strict mode too. A tensor of another dtype
 * (F64, an integer or 8-bit float type, ...) is a mismatch of that tensor
 * only: strict loads fail, non-strict loads report it and skip it, and a
 * file tensor the network does not have is "unexpected" whatever its
 * dtype. A snapshot's weights load with strict = 0
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
