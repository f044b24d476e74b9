/*
 * pipeline.h — the stages between a network and its kernels
 * (src/checkpoint: schedule, program, plan, executor), over the graph and
 * shapes of layers/graph.h:
 *
 *   schedule  which top-level segments are re-forwarded during backward
 *   program   one step as a flat list of FWD / REFWD / LOSS / BWD steps
 *             over SSA "values" (each production of a tensor is a value)
 *   plan      liveness of every value, in-place aliases, one offset each in
 *             a single arena; the peak is known before any kernel runs
 *   execute   runs a program at its planned offsets
 */
#ifndef SL_PIPELINE_H
#define SL_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "layers/graph.h"

/* ---------------- schedule ---------------- */

/* A schedule is, in the end, a list of actions over the top-level units
 * (top-level layers; a composite block is one unit), in the order a step
 * runs them:
 *
 *   FWD u keep   run unit u's forward (the first time: the TRAIN pass of
 *                every node; later: a re-forward of only the nodes whose
 *                outputs are wanted and not kept). Its output stays kept
 *                until a DROP or the unit's BWD, and so do the tensors
 *                `keep` names, for the unit's backward.
 *   BWD u        unit u's backward: first re-forward, from what is kept,
 *                the nodes whose outputs (or saved state) its backward
 *                steps read and that are not kept, then the backward steps
 *                in reverse; the unit's tensors are dropped after. The BWD
 *                of the last unit starts with the loss.
 *   DROP u       unit u's output is no longer kept.
 *   LOSS         the loss and the gradient of the logits, which must be
 *                kept (without it, the BWD of the last unit starts with it).
 *
 * A tensor nothing reads dies at its last reader whatever is "kept": keep
 * only decides whether a later reader takes the existing value or a
 * recomputed one. */
typedef enum sl_keep {
    SL_KEEP_OUTPUT = 0, /* the unit's output only (rotor's F_ck / F_none) */
    SL_KEEP_CONV,       /* and the outputs of compute-bound nodes (conv, linear) */
    SL_KEEP_ALL         /* everything its backward reads (rotor's F_all) */
} sl_keep;

typedef enum sl_action_kind { SL_ACT_FWD = 0, SL_ACT_BWD, SL_ACT_DROP, SL_ACT_LOSS } sl_action_kind;

typedef struct sl_action {
    sl_action_kind kind;
    sl_keep keep; /* FWD */
    int unit;
} sl_action;

/* The schedule of a training step. Single-level schedules are segments
 * over the top-level chain: segment j covers top layers [start[j],
 * start[j+1]); recompute[j] says whether its interior is dropped after
 * forward and re-forwarded during backward. When n_actions is 0 the
 * program is that of the segments (sl_segments_actions); otherwise
 * `actions` is the schedule (multi-level or operator-level) and the
 * segments only describe its top level. */
typedef struct sl_segments {
    int n;
    int *start;     /* [n + 1], start[n] = n_top */
    int *recompute; /* [n] */
    int n_actions;
    sl_action *actions; /* [n_actions], owned */
} sl_segments;

/* Every top-level layer kept (one segment, no recompute). */
sl_status sl_segments_keep_all(int n_top, sl_segments *out);
void sl_segments_release(sl_segments *s);

/* The actions of seg (its own list, or the single-level program of its
 * segments: forward of every unit, a recomputed segment keeping only its
 * boundary; the loss; then from the last segment back, a recomputed segment's
 * re-forward keeping all but its last unit, whose boundary output is
 * still kept, and the backward of its units). On success *out is a new
 * array the caller frees. */
sl_status sl_segments_actions(const sl_segments *seg, sl_action **out, int *n);

/* ---------------- program ---------------- */

typedef enum sl_step_kind {
    SL_STEP_FWD = 0, /* forward (TRAIN or EVAL pass) */
    SL_STEP_REFWD,   /* re-forward during backward */
    SL_STEP_LOSS,    /* softmax cross-entropy + gradient of the logits */
    SL_STEP_BWD,
    SL_STEP_UPDATE,  /* the optimizer update of one node's parameters (update
                        in backward): right after the node's last gradient
                        write (or its reduction), its gradients' storage dies
                        with it */
    SL_STEP_REDUCE   /* ZeRO-2: starts the reduction of `pgrad_node`'s
                        gradients over the ranks (none: node -1) and waits
                        for that of `prev_node`, started by the REDUCE before */
} sl_step_kind;

/* How a training program holds parameter gradients (sl_program_build):
 * 0 in the fixed gradient block; otherwise as PARAM_GRAD values, with */
enum {
    SL_PGRAD_UPDATE = 1, /* an UPDATE step after each node's last write */
    SL_PGRAD_REDUCE = 2  /* a REDUCE step after each node's last write */
};

typedef enum sl_value_kind {
    SL_VALUE_OUTPUT = 0, /* an activation */
    SL_VALUE_GRAD,       /* a gradient w.r.t. an activation */
    SL_VALUE_SAVED,      /* state kept from forward to backward */
    SL_VALUE_WORKSPACE,  /* scratch of one step */
    SL_VALUE_PARAM_GRAD, /* the gradients of one node's trainable parameters
                            (update in backward), each at sl_stride_floats
                            of its parameter in the node's order */
    SL_VALUE_KIND_COUNT
} sl_value_kind;

typedef struct sl_value {
    sl_value_kind kind;
    int tensor;   /* tensor id (outputs, grads), node id (saved, workspace) */
    size_t bytes;
    int external; /* the caller's input: not in the arena */
    sl_dtype dtype; /* as stored: a BF16 value is 2 bytes an element */
} sl_value;

/* What a layer step runs a chunk of (sl_step.f_unit): images
 * (SL_LAYER_BATCH_CHUNKS), rows of channels, n*h*w of its output
 * (SL_LAYER_ROW_CHUNKS), or channels (SL_LAYER_CHANNEL_CHUNKS). */
typedef enum sl_chunk_unit { SL_CHUNK_IMAGES = 0, SL_CHUNK_ROWS, SL_CHUNK_CHANNELS } sl_chunk_unit;

/* How many units of kind u a layer step with output shape o has. */
static inline int64_t sl_chunk_units(sl_shape o, sl_chunk_unit u)
{
    return u == SL_CHUNK_ROWS ? (int64_t)o.n * o.h * o.w : u == SL_CHUNK_CHANNELS ? o.c : o.n;
}

typedef struct sl_step {
    sl_step_kind kind;
    int node;                  /* FWD / REFWD / BWD */
    sl_pass pass;              /* FWD / REFWD */
    int n_in;
    int x[SL_MAX_INPUTS];      /* input values (FWD, REFWD; BWD if it needs them) */
    int y;                     /* output value (FWD, REFWD; BWD if it needs it; LOSS reads) */
    int saved;                 /* saved-state value or -1 */
    int saved_written;         /* FWD/REFWD writes `saved` (else reads it) */
    int ws;                    /* workspace value or -1 */
    int dy;                    /* BWD reads; LOSS writes */
    int dx[SL_MAX_INPUTS];     /* BWD writes, -1 for no gradient */
    int accumulate[SL_MAX_INPUTS];
    int bn_rescale;            /* memonger momentum rescale: the node's forward runs
                                  this many times a step (0: no rescale) */
    int pgrad;                 /* BWD, LOSS (a head's tied weight), UPDATE: the
                                  PARAM_GRAD value of `pgrad_node`, or -1 */
    int pgrad_node;
    int pgrad_zero;            /* the first write: zero it before the step */
    int prev_pgrad, prev_node; /* REDUCE: the reduction waited for (-1: none) */
    /* Mixed precision: layers compute in F32. A BF16 operand of a FWD,
     * REFWD or BWD step has an F32 copy for the step's duration (a
     * WORKSPACE value, -1 for an F32 operand): the executor widens the
     * inputs (x, y and dy read by a backward, dx before an accumulating
     * write) into it, the layer runs on the copies, and the outputs (y of a
     * forward, dx) are rounded back (sl_bf16_round). Every schedule rounds
     * the same F32 results, so it keeps the bits of schedule none. A view's
     * forward runs on its storage as it is (no kernel). Two operands
     * holding one value share one copy. */
    int f_x[SL_MAX_INPUTS], f_y, f_dy, f_dx[SL_MAX_INPUTS];
    /* Units a chunk when a layer that may run in chunks of f_unit does so
     * to keep its copies within SL_F32_COPY_BYTES (the copies then hold
     * one chunk); 0: all at once. */
    int f_chunk;
    sl_chunk_unit f_unit;
} sl_step;

/* Whether a step runs a layer (forward, re-forward or backward). */
static inline int sl_step_runs_layer(const sl_step *st)
{
    return st->kind == SL_STEP_FWD || st->kind == SL_STEP_REFWD || st->kind == SL_STEP_BWD;
}

/* What the float copies of one mixed-precision step of a layer that runs
 * in chunks of images may total (one image at least), unless the shapes
 * say otherwise (sl_shapes.f32_copy_bytes). */
#define SL_F32_COPY_BYTES ((size_t)16 << 20)

typedef struct sl_program {
    sl_mode mode;
    int n_steps, cap_steps;
    sl_step *steps;
    int n_values, cap_values;
    sl_value *values;
    int logits;          /* value holding the network output at the end */
    int input_grad;      /* value of the input's gradient, or -1 */
    int pgrad_flags;     /* SL_PGRAD_*: parameter gradients are values */
    uint64_t fwd_flops;  /* one plain forward */
    uint64_t bwd_flops;  /* one backward */
    uint64_t refwd_flops;/* re-forward FLOPs added by the schedule */
} sl_program;

/* The program of one training step (mode TRAIN: forward, loss, backward
 * with the segments' recomputation) or of an inference forward.
 * input_grad: compute the input's gradient. input_in_arena: the input is
 * copied into the arena (a device backend) instead of read in place.
 * pgrad_flags (TRAIN, SL_PGRAD_*): each node's parameter gradients are a
 * PARAM_GRAD value, from the node's first gradient write (its backward,
 * or the loss of a head tied to its weight) to an UPDATE step right
 * after its backward (UPDATE), or to the REDUCE step after the next one
 * (REDUCE: the reduction of a node's gradients overlaps the next node's
 * backward; a last REDUCE of node -1 waits for the last), followed by
 * the node's UPDATE when both are set. */
sl_status sl_program_build(const sl_graph *g, const sl_shapes *sh, const sl_segments *seg,
                           sl_mode mode, int bn_rescale, int input_grad, int input_in_arena,
                           int pgrad_flags, sl_program *out);

/* The bytes of node's PARAM_GRAD value: its trainable parameters'
 * gradients at sl_stride_floats each; 0 when it has none. */
size_t sl_node_param_grad_bytes(const sl_graph *g, int node);

/* The node whose layer holds parameter spec p, or -1. */
int sl_graph_param_node(const sl_graph *g, const sl_param_spec *p);
void sl_program_release(sl_program *p);

/* ---------------- plan ---------------- */

typedef struct sl_plan {
    int n_values;
    int *alias;       /* [n_values]: value whose storage it shares (itself if none) */
    int *first, *last;/* [n_values]: live interval in steps, of the storage root */
    size_t *offset;   /* [n_values]: byte offset in the arena */
    size_t arena_bytes;
    size_t category_peak[SL_VALUE_KIND_COUNT]; /* max over steps of live bytes by kind */
    size_t live_peak; /* max over steps of live bytes (<= arena_bytes) */
    /* [(n_steps + 1) x SL_VALUE_KIND_COUNT]: bytes live at each step by
     * kind (row n_steps: what outlives the program, such as the logits) */
    size_t *step_live;
    int reuse;        /* 0: planned without sharing (the "before" of optnet) */
} sl_plan;

/* Plans memory: in-place aliases where the layer allows it and nothing
 * later reads the overwritten value, then greedy-by-size offsets. With
 * reuse == 0 every value gets storage of its own. */
sl_status sl_plan_build(const sl_graph *g, const sl_program *p, int reuse, sl_plan *out);
void sl_plan_release(sl_plan *pl);

/* The first half of sl_plan_build, for searches that plan many programs:
 * aliases (alias[v] is v's storage root) and, for each root, its live
 * interval in steps; no offsets (arena_bytes 0). Release with
 * sl_plan_release. */
sl_status sl_plan_lifetimes(const sl_graph *g, const sl_program *p, int reuse, sl_plan *out);

/* ---------------- execute ---------------- */

/* Runs of steps a device may record once and replay (CUDA graphs): each
 * range [lo, hi) of a program's steps is forward, re-forward or backward
 * steps of layers whose kernels take nothing that changes from run to
 * run (SL_LAYER_GRAPH_SAFE: no dropout counter, no host-side work per
 * run: a layer whose host state changes what it queues, as freezing
 * BatchNorm does, has its network's recordings cleared) or, where the
 * backend offsets its random kernels' counters on the device
 * (be->counter_delta) and no custom layer draws a number of its own
 * choosing (net_plan.c), of layers that draw (SL_LAYER_GRAPH_DRAWS), two
 * steps at least, never a loss, update or reduce step. The recordings
 * are keyed on the context's seed too (net_run.c).
 *
 * Drawing in a recording: a TRAIN forward takes counter blocks from the
 * context at a fixed place in each run (the same steps draw the same
 * amounts in the same order), so a kernel recorded in a run that began
 * at counter R, given counter R + o, must draw from B + o in a run that
 * began at B. Such a range is recorded with sl_exec.counter_delta
 * pointing at the cache's device slot, which holds B - R (written before
 * the range is launched, when it changed), and at each replay the
 * executor calls its drawing layers' redraw (sl_layer_ops) in step order,
 * so that their host state and the context's counter are what running
 * the steps would have left. */
enum { SL_GRAPH_RANGES = 64 }; /* ranges past these run step by step */
typedef struct sl_graph_cache {
    const sl_backend *be; /* whose graph_free frees exec (and free the slot) */
    uint64_t key;         /* what the recordings point into (sl_net's arena,
                             parameters and gradients): another key, new ones */
    int n;                /* ranges */
    int lo[SL_GRAPH_RANGES], hi[SL_GRAPH_RANGES];
    void *exec[SL_GRAPH_RANGES]; /* a recording, or NULL (not yet, or failed) */
    int failed[SL_GRAPH_RANGES]; /* recording failed once: run eagerly */
    uint64_t base[SL_GRAPH_RANGES]; /* the context's counter when the run that
                                       recorded it began */
    uint64_t *slot;       /* the counter offset (device memory; NULL until a
                             range that draws is recorded) */
    uint64_t slot_value;  /* what it holds, once slot_set */
    int slot_set;
    size_t touched;       /* the arena high-water mark of the recorded run */
    int runs;             /* runs seen: the first runs eagerly (lazy set-ups) */
    int replays;          /* ranges replayed (tests) */
    int redraws;          /* redraw calls at replays (tests) */
} sl_graph_cache;

/* The ranges of program p that may be recorded, into lo[] / hi[] (at most
 * cap); returns how many. draws: the backend offsets its counters on the
 * device (be->counter_delta), so steps of SL_LAYER_GRAPH_DRAWS layers may
 * be in ranges too. A pure function of the graph, the program and draws. */
int sl_program_graph_ranges(const sl_graph *g, const sl_program *p, int draws, int *lo, int *hi,
                            int cap);

/* Whether step s of p runs a layer a range may hold (the test
 * sl_program_graph_ranges applies to each step). */
int sl_step_graphable(const sl_graph *g, const sl_program *p, int draws, int s);

/* Frees a cache's recordings (its ranges and slot kept:
 * sl_program_graph_ranges when the program is planned, net_plan.c). */
void sl_graph_cache_clear(sl_graph_cache *gc);

/* sl_graph_cache_clear, then frees the slot and zeroes the cache. */
void sl_graph_cache_release(sl_graph_cache *gc);

/* How many of a cache's ranges hold a recording (tests). */
static inline int sl_graph_cache_recorded(const sl_graph_cache *gc)
{
    int n = 0;
    for (int k = 0; k < gc->n; k++)
        n += gc->exec[k] != NULL;
    return n;
}

typedef struct sl_run_io {
    const float *input; /* caller's input (external value): floats, or int32
                           token ids where input_dtype says so */
    sl_dtype input_dtype; /* SL_DTYPE_F32 (0), or SL_DTYPE_I32 from the _tokens runs;
                             sl_net_run holds it to the graph's (sl_graph_input_dtype) */
    const int *labels;  /* LOSS: softmax cross-entropy against labels, or */
    const float *dy_in; /* LOSS: the caller's gradient of the output */
    float *logits_out;  /* copied out at the end when not NULL */
    float *dx_out;      /* the input's gradient, when the program has it */
    float loss;
    int correct;
    int counted;        /* rows the loss counts (a head's labels not ignored) */
    int poison;         /* debug: NaN-fill storage as soon as it dies */
    size_t arena_touched; /* high-water mark of arena bytes the run used */
    int keep_grads;     /* 1: add into the parameter gradients (accumulation) */
    /* Called after each program step's kernels are queued (may be NULL):
     * gradient communication (src/dist) starts reducing the gradients
     * backward has finished while the rest of the program runs. */
    void (*after_step)(void *user, int step);
    void *after_step_user;
    /* UPDATE steps (update in backward): the optimizer update of node's
     * parameters, whose grad pointers are set into the arena. */
    void (*update)(void *user, int node);
    void *update_user;
    /* REDUCE steps (ZeRO-2): start reducing node's gradients (node -1:
     * none), then wait for prev_node's (-1: none). */
    void (*reduce)(void *user, int node, float *grads, int prev_node, float *prev_grads);
    void *reduce_user;
    /* Recordings of the program's graph ranges (NULL: every step queued
     * one by one): the executor records a range on the second run with
     * this cache and replays it after, when the backend has graph_* ops and
     * no hook (after_step, update, reduce) or poison is set. */
    sl_graph_cache *graphs;
} sl_run_io;

/* Whether steps s and s + 1 of p, planned by pl, run as one step on a
 * backend with the batchnorm_relu_* ops: a forward (or re-forward) of a
 * SL_LAYER_JOINS_RELU layer then the ReLU on its output, the ReLU's input
 * and output at the layer's output's storage (in place); or the backward
 * of such a ReLU, writing its input gradient over its output gradient
 * (not adding), then the layer's backward reading that storage as its dy.
 * Neither step runs in chunks, on float copies or on bf16. Joined, the
 * memory the pair leaves is what the two steps leave, except the ReLU's
 * input gradient, which nothing after the layer's backward reads; the
 * plan is the same. A pure function of the program and plan, so tests
 * count the joins without a GPU. */
int sl_program_joins_relu(const sl_graph *g, const sl_shapes *sh, const sl_program *p,
                          const sl_plan *pl, int s);

/* Runs program p planned by pl with the arena `arena` (pl->arena_bytes).
 * A training program zeroes parameter gradients before its first LOSS or
 * BWD step, unless io->keep_grads. Where the backend has the
 * batchnorm_relu_* ops, the pairs sl_program_joins_relu names run as one
 * (the second step's kernels skipped). */
void sl_execute(const sl_graph *g, const sl_shapes *sh, const sl_program *p, const sl_plan *pl,
                char *arena, sl_context *ctx, const sl_exec *ex, sl_run_io *io);

#endif
