/*
 * layer.h — the layer contract (layers stage).
 *
 * A layer type is a table of functions (sl_layer_ops) plus a struct of its
 * own that starts with sl_layer. A primitive layer declares, for an input
 * shape: its output shape, its FLOPs, its workspace, the state it keeps
 * from a training forward for its backward, and through flags what else
 * its backward reads (its input? its output?) and whether it may run in
 * place. It never allocates activation memory: the executor hands it
 * pointers into the planned arena.
 *
 * A composite layer (residual block, inception block) has children and an
 * `emit` function that adds its children and the joins (add, concat) to
 * the graph, so the top level stays a chain while the planner sees every
 * primitive tensor.
 */
#ifndef SL_LAYER_H
#define SL_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "base/backend.h"
#include "base/base.h"

#define SL_MAX_INPUTS 8
#define SL_MAX_PARAMS 4
#define SL_LOCAL_NAME_MAX 32

typedef enum sl_pass {
    SL_PASS_TRAIN = 0, /* training forward: batch statistics, fresh dropout masks */
    SL_PASS_EVAL,      /* evaluation: running statistics, no dropout */
    SL_PASS_REFORWARD  /* recompute during backward: same bits as TRAIN, no side effects */
} sl_pass;

/* Flags of a layer type. */
enum {
    SL_LAYER_NEEDS_INPUT = 1u << 0,  /* backward reads the forward input(s) */
    SL_LAYER_NEEDS_OUTPUT = 1u << 1, /* backward reads the forward output */
    SL_LAYER_FWD_INPLACE = 1u << 2,  /* output may overwrite input 0 */
    SL_LAYER_BWD_INPLACE = 1u << 3,  /* dx[0] may overwrite dy */
    SL_LAYER_VIEW = 1u << 4,         /* output is input 0 reinterpreted (no kernel) */
    SL_LAYER_SAVED_KEPT = 1u << 5,   /* saved state must survive from the TRAIN forward
                                        to backward; a REFORWARD reads it instead of
                                        writing it (BatchNorm's batch statistics) */
    SL_LAYER_COMPUTE_BOUND = 1u << 6, /* many FLOPs per output byte (conv, linear): an
                                        operator-level schedule keeps its output and
                                        recomputes the cheap layers after it */
    SL_LAYER_BATCH_CHUNKS = 1u << 7  /* images [a, b) of its output (and of its input
                                        gradients) depend on images [a, b) of its inputs
                                        only (and on their index, which the args give);
                                        its saved state, if any, is images' state in
                                        order; it needs no more workspace for fewer
                                        images and adds its parameter gradients: it may
                                        run a few images at a time (mixed precision, to
                                        keep its float copies small) */,
    SL_LAYER_ROW_CHUNKS = 1u << 8    /* finer: its tensors are rows of channels (n*h*w
                                        rows; an elementwise layer's are any rows of c)
                                        and row r of its output and input gradients
                                        depends on row r of its inputs only; no saved
                                        state, no more workspace for fewer rows, adds its
                                        parameter gradients: it may run a few rows at a
                                        time, seeing shapes {rows, c, 1, 1} */,
    SL_LAYER_CHANNEL_CHUNKS = 1u << 9, /* channels [a, b) of its output and input gradients
                                        depend on channels [a, b) of its inputs and on
                                        its per-channel parameters and state there only;
                                        it needs no more workspace for fewer channels: it
                                        may run a few channels at a time (the args say
                                        which; it offsets its parameters and saved state) */
    SL_LAYER_TOKEN_INPUT = 1u << 10,  /* its input is int32 token ids (SL_DTYPE_I32):
                                        the network's input, read by no other layer */
    SL_LAYER_PLANAR_INPUT = 1u << 11, /* it reads its inputs as NCHW planes
                                        (convolutions, pooling, BatchNorm, channel
                                        concatenation, Linear's flattening): the shape
                                        pass refuses an NHWC input where the layout
                                        matters (sl_shape_planar) */
    SL_LAYER_ROWS_INPUT = 1u << 12,   /* it reads its inputs as rows of channels, NHWC
                                        (LayerNorm, attention, Conv1D): the shape pass
                                        refuses an NCHW input where the layout matters
                                        (sl_shape_rows); its output is NHWC */
    SL_LAYER_JOINS_RELU = 1u << 13,   /* it honours relu_after (BatchNorm): the
                                        executor may run an in-place ReLU after it as
                                        part of it (sl_program_joins_relu) */
    SL_LAYER_GRAPH_SAFE = 1u << 14,   /* its forward and backward queue the same work on
                                        the same pointers every run (no dropout counter,
                                        nothing computed on the host from the run's
                                        data): a device may record and replay them
                                        (sl_program_graph_ranges) */
    SL_LAYER_GRAPH_DRAWS = 1u << 15   /* as GRAPH_SAFE, but its TRAIN forward takes a
                                        Philox counter range from the context (dropout):
                                        recorded where the backend honours
                                        sl_exec.counter_delta, the executor calling its
                                        redraw op at each replay of that forward */
};

typedef enum sl_init {
    SL_INIT_ZEROS = 0,
    SL_INIT_ONES,
    SL_INIT_KAIMING_NORMAL_FAN_OUT, /* N(0, 2 / fan_out): torchvision ResNet convs */
    SL_INIT_UNIFORM_FAN_IN,         /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default */
    SL_INIT_NORMAL                  /* N(0, std^2) with the spec's std: GPT-2's weights */
} sl_init;

typedef struct sl_param_spec {
    char local[SL_LOCAL_NAME_MAX]; /* "weight", "running_mean" */
    int ndim;
    int dims[4];
    size_t count;
    sl_init init;
    int fan; /* fan_in or fan_out for the initialiser */
    float std; /* SL_INIT_NORMAL's standard deviation */
    int trainable;
    float *data; /* set when the network is finalised */
    float *grad;
} sl_param_spec;

typedef struct sl_layer_cost {
    uint64_t fwd_flops;
    uint64_t bwd_flops;
    size_t ws_fwd_bytes;
    size_t ws_bwd_bytes;
    size_t saved_bytes; /* kept from a TRAIN forward until backward */
} sl_layer_cost;

struct sl_net;

typedef struct sl_fwd_args {
    sl_pass pass;
    int n_in;
    const float *x[SL_MAX_INPUTS];
    sl_shape in[SL_MAX_INPUTS];
    float *y;
    sl_shape out;
    void *saved; /* saved_bytes; NULL in SL_PASS_EVAL */
    void *ws;    /* ws_fwd_bytes */
    sl_context *ctx;
    int bn_rescale_momentum; /* memonger's rescale: the layer's forward runs this many
                                times a step (0: no rescale), see batchnorm2d.c */
    int first_image, images; /* the call covers images [first_image, first_image +
                                in[0].n) of a batch of `images` (a layer that runs in
                                chunks, SL_LAYER_BATCH_CHUNKS; else 0 and in[0].n);
                                saved is already offset to the first image's */
    int first_channel, channels; /* the call covers channels [first_channel,
                                    first_channel + in[0].c) of `channels`
                                    (SL_LAYER_CHANNEL_CHUNKS; else 0 and in[0].c) */
    int bf16; /* x and y are bf16 storage (a layer whose native_bf16 said so) */
    int relu_after; /* SL_LAYER_JOINS_RELU: y gets relu of the layer's output (the
                       in-place ReLU after it, whose step the executor skips) */
} sl_fwd_args;

typedef struct sl_bwd_args {
    int n_in;
    const float *x[SL_MAX_INPUTS]; /* valid when SL_LAYER_NEEDS_INPUT */
    sl_shape in[SL_MAX_INPUTS];
    const float *y;                /* valid when SL_LAYER_NEEDS_OUTPUT */
    sl_shape out;
    const float *dy;
    float *dx[SL_MAX_INPUTS];      /* NULL: no gradient wanted for that input */
    int accumulate[SL_MAX_INPUTS]; /* 1: add into dx[i] */
    void *saved;
    void *ws; /* ws_bwd_bytes */
    sl_context *ctx;
    int first_image, images;     /* as in sl_fwd_args */
    int first_channel, channels; /* as in sl_fwd_args */
    int bf16; /* x, y, dy and dx are bf16 storage, as in sl_fwd_args */
    int relu_after; /* SL_LAYER_JOINS_RELU: dy is the gradient at the output of
                       the in-place ReLU after the layer (its backward skipped);
                       the layer applies the ReLU's rule itself */
} sl_bwd_args;

typedef struct sl_layer sl_layer;
typedef struct sl_graph sl_graph;

typedef struct sl_layer_ops {
    const char *type; /* "Conv2d" */
    unsigned flags;
    /* Output shape and cost for n_in input shapes; SL_ERR_SHAPE with a
     * message when the layer cannot take them. `be` answers workspace
     * sizes. Primitive layers only. */
    sl_status (*infer)(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                       sl_shape *out, sl_layer_cost *cost);
    void (*forward)(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a);
    void (*backward)(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a);
    /* Mixed precision, optional: 1 when the layer runs on bf16 inputs,
     * output and their gradients itself with `be` (its args' bf16 set),
     * with cost's workspace bytes rewritten for that; 0 (or NULL) and the
     * executor widens them into float copies around an unchanged call.
     * Asked only when every one of them is bf16. */
    int (*native_bf16)(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                       sl_shape out, sl_layer_cost *cost);
    /* Composite layers: add nodes for this layer to g, reading tensor
     * `input`; return the output tensor id, or -1 on failure. */
    int (*emit)(sl_layer *l, sl_graph *g, int input);
    /* Output channels for in_c input channels, or -1 with an error set. */
    int (*out_channels)(const sl_layer *l, int in_c);
    void (*destroy)(sl_layer *l); /* frees the type's own fields; may be NULL */
    /* SL_LAYER_GRAPH_DRAWS layers: what its last TRAIN forward did to the
     * counters, done again without queuing anything (the forward's
     * kernels replayed from a recording): the same number of counter
     * blocks taken at ctx's current counter, which the layer keeps for
     * its re-forwards and backward. */
    void (*redraw)(sl_layer *l, sl_context *ctx);
} sl_layer_ops;

struct sl_layer {
    const sl_layer_ops *ops;
    char local[SL_LOCAL_NAME_MAX]; /* name inside its parent ("conv1") */
    char name[SL_NAME_MAX];        /* full name once added ("layer1.0.conv1") */
    int n_params;
    sl_param_spec params[SL_MAX_PARAMS];
    int n_children;
    sl_layer **children; /* owned */
};

/* What a layer that draws dropout masks keeps of its last TRAIN
 * forward's draw: the first Philox counter block it took from the
 * context and how many (its re-forwards and backward redraw the same
 * mask from them). */
typedef struct sl_draw {
    uint64_t counter, blocks;
} sl_draw;

/* Takes `blocks` counter blocks from ctx into d: a TRAIN forward's draw,
 * or (blocks = d->blocks) the same draw again where a recording replays
 * the forward's kernels (the layer's redraw op). */
static inline void sl_draw_take(sl_draw *d, sl_context *ctx, uint64_t blocks)
{
    d->blocks = blocks;
    d->counter = ctx->dropout_counter;
    ctx->dropout_counter += blocks;
}

/* The exec a layer's kernels get for one call: ex, with its activations
 * bf16 when the call's args say so (a layer whose native_bf16 said yes). */
static inline sl_exec sl_exec_for(const sl_exec *ex, int bf16)
{
    sl_exec e = *ex;
    e.bf16 = bf16;
    return e;
}

/* native_bf16 of a layer whose kernels are the backend's family `family`
 * (SL_BF16_*): yes when the backend's kernels of that family take bf16;
 * the cost does not change (the same kernels, narrower tensors). */
int sl_native_bf16_if(const sl_backend *be, unsigned family);

/* Layers whose passes are GEMMs (Conv1D, Linear) on bf16 activations
 * (the backend's SL_BF16_GEMM): the products, the weight (w_count floats)
 * rounded to bf16 at the start of each workspace, the products' own
 * workspace after it. fwd: y = x op(W) (+ bias); back[0]: dW += the
 * product of x and dy (dy first when wgrad_dy_first: Linear's dy^T x);
 * back[1 + accumulate]: dx (+)= dy op(W)^T. */
typedef struct sl_gemm_bf16_layer {
    sl_gemm_bf16_desc fwd, back[3];
    int wgrad_dy_first;
    size_t w_count;
} sl_gemm_bf16_layer;

/* The products of a layer y = x W (+ bias) over `rows` rows of f inputs and
 * o outputs, its weight stored [out, in] when w_out_in (Linear: y = x W^T),
 * else [in, out] (Conv1D). */
sl_gemm_bf16_layer sl_gemm_bf16_layer_of(int rows, int f, int o, int w_out_in, int bias);
/* Their native_bf16: yes where the backend runs every product and the
 * workspaces plan no more than the float copies they replace (x_bytes and
 * y_bytes: the input and output as floats; forward x and y, backward x,
 * dx and dy), cost's workspaces then rewritten. */
int sl_gemm_native_bf16(const sl_backend *be, const sl_gemm_bf16_layer *g, size_t x_bytes,
                        size_t y_bytes, sl_layer_cost *cost);
/* Their forward and backward on bf16 x, y, dy and dx: w the float weight,
 * dw its gradient; bias (and dbias, over `rows` rows of dy) may be NULL. */
void sl_gemm_bf16_forward(const sl_exec *ex, const sl_gemm_bf16_layer *g, const float *w,
                          const void *x, const float *bias, void *y, void *ws);
void sl_gemm_bf16_backward(const sl_exec *ex, const sl_gemm_bf16_layer *g, const float *w,
                           float *dw, const void *x, const void *dy, float *dbias, int rows,
                           void *dx, int accumulate, void *ws);

/* Initialises the common header of a new layer. */
void sl_layer_init(sl_layer *l, const sl_layer_ops *ops);
/* Declares a parameter; returns its index. */
int sl_layer_add_param(sl_layer *l, const char *local, int ndim, const int *dims, sl_init init,
                       int fan, int trainable);
/* Adds a child to a composite under a local name; takes ownership of
 * child (freed on failure). Returns 0, or -1 with an error set (a NULL
 * child keeps the constructor's message). */
int sl_layer_add_child(sl_layer *parent, const char *local, sl_layer *child);
/* Checks a layer's declared input channels against in_c. */
int sl_check_channels(const sl_layer *l, int expected, int in_c);

/* infer of a one-input layer whose output has its input's shape and that
 * spends one FLOP per element each way (ReLU, Dropout). */
sl_status sl_elementwise_infer(const sl_layer *l, const sl_backend *be, int n_in,
                               const sl_shape *in, sl_shape *out, sl_layer_cost *cost);

/* out_channels of a layer that keeps its input's channels. */
int sl_same_channels(const sl_layer *l, int in_c);

/* ReLU's operations: the executor joins a ReLU to the layer before it
 * (SL_LAYER_JOINS_RELU) by this identity. */
extern const sl_layer_ops sl_relu_ops;

/* Primitive joins used by composites (no parameters). */

sl_layer *sl_concat_join(void); /* channel concatenation of all inputs */

/* memonger's BatchNorm momentum for a layer run twice a step,
 * 1 - sqrt(1 - m); for one run `runs` (>= 2) times, 1 - (1 - m)^(1/runs). */
float sl_bn_rescaled_momentum(float m);
float sl_bn_rescaled_momentum_runs(float m, int runs);
/* Freezes (1) or unfreezes (0) a BatchNorm2d layer (see batchnorm2d.c);
 * returns 0 and does nothing when l is not one. */
int sl_batchnorm2d_set_frozen(sl_layer *l, int frozen);
/* The counter a Dropout layer with p > 0 keeps for its re-forwards and
 * backward (its last TRAIN forward's, or redraw's); 0 when l is not one.
 * For tests. */
uint64_t sl_dropout_counter(const sl_layer *l);

/* Sets the standard deviation of a Conv1D layer's N(0, std^2) weight
 * initialisation (GPT-2's residual projections use 0.02 / sqrt(2 n_layer));
 * before the network is finalised. Returns 0, or -1 with an error set when
 * l is not a Conv1D layer or std is not positive and finite. */
int sl_conv1d_set_init_std(sl_layer *l, float std);

/* The vocabulary of an embedding layer (the ids it reads lie in [0, it));
 * -1 when l is not one. */
int sl_embedding_vocab(const sl_layer *l);

/* Integer geometry helper: output size of a window op; -1 if it does not fit. */
int sl_window_out(int in, int kernel, int stride, int pad, int dilation, int ceil_mode);
/* The layer's name for messages. */
const char *sl_layer_label(const sl_layer *l);

#endif
