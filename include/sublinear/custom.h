/*
 * sublinear/custom.h — the contract of a layer type of your own, planned,
 * checkpointed and re-forwarded like the built-in ones. docs/guide.md,
 * "Writing a layer", and examples/custom_layer.c walk through one.
 *
 *     static const sl_custom_type swish_type = {
 *         .shape = swish_shape, .forward = swish_forward,
 *         .backward = swish_backward, .flags = SL_CUSTOM_NEEDS_INPUT};
 *     sl_net_add(net, "act", sl_custom_layer(&swish_type, NULL, 0, NULL, 0));
 */
#ifndef SUBLINEAR_CUSTOM_H
#define SUBLINEAR_CUSTOM_H

#include "sublinear/core.h"
#include "sublinear/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    sl_shape out;                     /* the output shape (every size >= 1) and its
                                         layout: start from the input's shape to keep a
                                         sequence's (sl_shape_seq); a layer after yours
                                         that reads another layout refuses the plan */
    int64_t saved_bytes;              /* state a TRAIN forward keeps for backward */
    int64_t forward_workspace_bytes;  /* scratch of one forward */
    int64_t backward_workspace_bytes; /* scratch of one backward */
    int64_t forward_flops, backward_flops; /* for schedules and reports */
} sl_custom_sizes;

/* Random numbers, sl_custom_random_uniform (opaque; valid during one call). */
typedef struct sl_custom_call sl_custom_call;

/* What forward gets. Tensors are float32 in the memory of the context's
 * device, laid out as their shapes say (NCHW, or NHWC for sequences). Pointers to saved state and workspaces are 64-byte
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
SL_API sl_layer *sl_custom_layer(const sl_custom_type *type, const void *config, size_t config_bytes,
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
SL_API sl_status sl_custom_random_uniform(const sl_custom_call *call, uint64_t first, size_t count,
                                   float *dst);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_CUSTOM_H */
