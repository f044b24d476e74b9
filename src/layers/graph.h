/*
 * graph.h — a network flattened to primitive nodes (layers stage;
 * composites emit their children and joins here, so the top level stays
 * a chain while the planner sees every primitive tensor), and the shape
 * pass: every tensor's shape and bytes and every node's cost for one
 * input shape, without running a kernel. The checkpoint stages
 * (checkpoint/pipeline.h) build schedules, programs and plans over these.
 */
#ifndef SL_GRAPH_H
#define SL_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "layers/layer.h"
#include "layers/lm_head.h"

typedef struct sl_graph_node {
    sl_layer *layer;
    int n_in;
    int in[SL_MAX_INPUTS]; /* tensor ids */
    int out;               /* tensor id produced (= node index + 1) */
    int top;               /* index of the top-level layer it belongs to */
} sl_graph_node;

/* Tensor 0 is the network input; tensor i + 1 is node i's output. */
struct sl_graph {
    int n_nodes, cap_nodes;
    sl_graph_node *nodes;
    int n_top;
    int *top_first_node; /* [n_top + 1]: nodes of top layer t are [first[t], first[t+1]) */
    int *top_output;     /* [n_top]: tensor at the end of top layer t */
    int current_top;     /* while emitting */
    /* A language model's head fused with its loss, read by the loss step
     * (NULL: softmax cross-entropy on the last tensor). The last tensor
     * then holds hidden states, rows of head->channels. */
    const sl_lm_head *head;
};

/* Builds the graph of a chain of top-level layers. */
sl_status sl_graph_build(sl_layer *const *top, int n_top, sl_graph *out);
void sl_graph_release(sl_graph *g);
/* Adds a primitive node reading tensors in[0..n_in); returns its output
 * tensor id or -1 (composites call this from their emit function). */
int sl_graph_add_node(sl_graph *g, sl_layer *layer, int n_in, const int *in);
/* Emits a layer (primitive or composite) reading tensor `input`. */
int sl_graph_emit(sl_graph *g, sl_layer *layer, int input);

typedef struct sl_shapes {
    int n_tensors, n_nodes;
    sl_shape *tensor;    /* [n_tensors] */
    size_t *bytes;       /* [n_tensors], as stored (2 bytes an element in bf16) */
    unsigned char *dtype;/* [n_tensors] sl_dtype as stored; NULL: every tensor F32 */
    unsigned char *native;/* [n_nodes] 1: the layer runs on its bf16 tensors itself
                             (its native_bf16 said so, cost rewritten); NULL: none */
    size_t f32_copy_bytes;/* mixed precision: what one step's float copies of a layer
                             that runs in chunks of images may total (0: the
                             program's default) */
    sl_layer_cost *cost; /* [n_nodes], TRAIN pass costs (saved_bytes 0 in eval) */
    uint64_t fwd_flops, bwd_flops; /* totals */
    size_t loss_ws_bytes;          /* the loss step's scratch: the backend's softmax
                                      cross-entropy's, or the LM head's */
    int head_bf16;                 /* mixed precision: the LM head's products on bf16
                                      (sl_lm_head_bf16_ws_bytes) */
    unsigned char input_dtype;     /* the input's sl_dtype: I32 (token ids) or F32
                                      (sl_graph_input_dtype) */
} sl_shapes;

/* The most bytes the tensors of one step (each node's output, saved
 * state and workspaces, and the input) may total: 64 PiB, far beyond any
 * machine. Every planned figure is a sum of fewer than 2^7 times this
 * (each value of a step, its gradient and re-forwarded copies, placed
 * once), so none can wrap past 2^64. */
#define SL_MAX_STEP_BYTES ((uint64_t)1 << 56)

/* The dtype of a graph's input: SL_DTYPE_I32 (token ids) where a layer
 * that reads ids (SL_LAYER_TOKEN_INPUT: the embedding) reads it, else
 * SL_DTYPE_F32. Such a layer must read the input itself, and no other
 * layer may read the ids: SL_ERR_SHAPE otherwise, naming the layers. */
sl_status sl_graph_input_dtype(const sl_graph *g, sl_dtype *out);

/* Shape pass (the input's dtype by sl_graph_input_dtype). On failure the
 * message names the layer and the shapes; a step whose tensors total
 * more than SL_MAX_STEP_BYTES is SL_ERR_NOMEM. */
sl_status sl_shapes_compute(const sl_graph *g, const sl_backend *be, sl_shape input,
                            sl_shapes *out);
void sl_shapes_release(sl_shapes *s);

/* Mixed precision (SL_DTYPE_BF16): every tensor is stored in bf16 except
 * the input (the caller's: F32, or I32 token ids), the last tensor (read by
 * the loss or the head, and given to the caller) and a view of an F32
 * tensor (it shares the storage); bytes become 2 an element. A layer
 * whose tensors are all bf16 and whose native_bf16 says so with `be` runs
 * on them itself (sh->native, its cost's workspaces rewritten); the
 * others get float copies from the program. A language-model head runs
 * its products on bf16 where the backend can (sh->head_bf16, the loss
 * step's scratch rewritten). F32 leaves the shapes as they are.
 * SL_ERR_NOMEM leaves them unchanged. */
sl_status sl_shapes_set_dtype(const sl_graph *g, const sl_backend *be, sl_dtype dtype,
                              sl_shapes *sh);

/* The dtype a tensor is stored in. */
static inline sl_dtype sl_shapes_dtype(const sl_shapes *sh, int t)
{
    return sh->dtype ? (sl_dtype)sh->dtype[t] : t == 0 ? (sl_dtype)sh->input_dtype : SL_DTYPE_F32;
}

/* Whether node i runs on its bf16 tensors itself (no float copies). */
static inline int sl_shapes_native(const sl_shapes *sh, int i)
{
    return sh->native && sh->native[i];
}

#endif
