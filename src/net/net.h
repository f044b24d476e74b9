/*
 * net.h — the network object behind sl_net (internal, net stage): its
 * top-level chain, its parameters in one block, the cached plan for the
 * last input shape of each mode, and two parts in headers of their own:
 * its optimizer and step state (optim_state.h, net->optim) and its
 * data-parallel state (dp_state.h, net->dp); and what the
 * files of src/net call in each other. Calls go one way: net.c (and
 * profile.c, context.c) at the bottom, net_plan.c on it, memory_check.c
 * on those, net_run.c on all of them, optimizer.c, dot.c and timeline.c
 * on top.
 */
#ifndef SL_NET_H
#define SL_NET_H

#include "checkpoint/pipeline.h"
#include "net/dp_state.h"
#include "net/optim_state.h"

typedef struct sl_run_cache {
    int valid;
    sl_shape shape;
    int input_grad;
    size_t arena_touched; /* measured in the last run of this plan */
    sl_shapes sh;
    sl_segments seg;
    sl_program prog;
    sl_plan plan;
    sl_graph_cache graphs; /* CUDA graphs of its ranges (net_run.c) */
} sl_run_cache;


typedef struct sl_net_entry {
    char name[SL_NAME_MAX];
    sl_param_spec *spec; /* inside its layer */
} sl_net_entry;

struct sl_net {
    sl_context *ctx;
    int in_channels;
    int out_channels; /* of the chain so far; 0 when unknown (after Flatten) */
    sl_schedule schedule;
    int bn_rescale;
    sl_dtype precision;       /* activations' dtype (sl_net_set_precision) */
    sl_cost_model cost_model; /* zero: the device's default */

    int n_top, cap_top;
    sl_layer **top;

    int finalized;
    sl_graph graph;
    int n_params;
    sl_net_entry *params;
    float *param_block, *grad_block, *opt_block;
    size_t param_floats, grad_floats, opt_floats;

    sl_net_optim optim; /* the optimizer and its step state (optim_state.h) */

    sl_run_cache cache[2]; /* indexed by sl_mode */
    int debug_poison; /* tests: NaN-fill dead storage during runs */
    int no_reuse;     /* plan every value in storage of its own */
    int no_memory_check; /* skip sl_net_check_memory */
    size_t f32_copy_bytes; /* tests: sl_shapes.f32_copy_bytes of its plans (0: default) */
    sl_mode mode;     /* SL_MODE_INFER: gradients freed */
    char *arena;
    size_t arena_capacity;
    int has_head;            /* a language-model head ends the network (lm.c) */
    sl_lm_head head;         /* graph.head points here once finalised */
    struct sl_profile *profile; /* NULL unless profiling (profile.c) */
    sl_net_dp dp;             /* data-parallel state (dp_state.h) */
};

/* Profiling (profile.c); each does nothing while profiling is off.
 * begin_run hooks io's after_step (chaining a communicator's) to time
 * every step of the program about to run; clock waits for the device and
 * reads the clock; add_update adds an optimizer update begun at t0. */
typedef struct sl_profile sl_profile;
struct sl_program;
struct sl_run_io;
void sl_profile_begin_run(sl_net *net, const struct sl_program *prog, const sl_exec *ex,
                          struct sl_run_io *io);
double sl_profile_clock(const sl_net *net, const sl_exec *ex);
void sl_profile_add_update(sl_net *net, const sl_exec *ex, double t0);
void sl_profile_free(sl_profile *p);

/* Releases a cached plan (and what it was built from); it is then invalid. */
void sl_run_cache_release(sl_run_cache *c);

/* SL_ERR_SHAPE naming fn unless input has batch, height and width >= 1
 * and the network's input channels. */
sl_status sl_net_check_input(const sl_net *net, sl_shape input, const char *fn);

/* SL_ERR_STATE naming fn when the network holds only its slice of sharded
 * optimizer state outside the communicator that sharded it (it cannot
 * update until the optimizer is set again or a snapshot loaded). */
sl_status sl_net_check_shard(const sl_net *net, const char *fn);

/* SL_ERR_STATE naming fn when the network is in inference mode. */
sl_status sl_net_check_training(const sl_net *net, const char *fn);

/* The exec (backend instance, threads) a network's kernels run with. */
sl_exec sl_net_exec(const sl_net *net);

/* ---- the optimizer-state layout (optimizer.c), used by the update and
 * by snapshots: per trainable parameter in order, `per` blocks of
 * sl_stride_floats(count) floats each ---- */

#define SL_OPT_STATE_MAX 2

/* How many state blocks each trainable parameter has under these options
 * (0, 1 or 2), with their names in names[] ("momentum_buffer";
 * "exp_avg", "exp_avg_sq") as snapshots and PyTorch call them. */
int sl_optimizer_state_blocks(const sl_optimizer_options *o, const char *names[SL_OPT_STATE_MAX]);

/* Called for every trainable parameter in order with its state blocks
 * (blocks[k] for k < per; the others NULL). */
typedef void (*sl_opt_state_visit)(void *user, int param, int per, float *const *blocks);

/* Visits the state of the network's optimizer (net->opt, net->opt_block);
 * only for state that is not sharded (net->shard 0). */
void sl_net_visit_optimizer_state(sl_net *net, sl_opt_state_visit visit, void *user);

/* Sharded state (net->shard): called for every trainable parameter with
 * floats in [shard_lo, shard_hi), in order: its floats [off, off + n)
 * (gfirst: the gradient-block index of float off) and their state blocks
 * (blocks[k] for k < per, each n floats). */
typedef void (*sl_opt_shard_visit)(void *user, int param, size_t gfirst, size_t off, size_t n,
                                   int per, float *const *blocks);
void sl_net_visit_optimizer_shard(sl_net *net, sl_opt_shard_visit visit, void *user);

/* Floats of optimizer state under options o: per block the gradient
 * block's, or the shard's when sharded is 1. */
size_t sl_optimizer_state_floats(const sl_net *net, const sl_optimizer_options *o, int sharded);
/* Whether a network was finalised and materialised when a call began: a
 * call that fails undoes what it did on first use (sl_net_add works again
 * afterwards), so that failing calls leave the network as it was. */
typedef struct sl_net_mark {
    int finalized, materialized;
} sl_net_mark;
sl_net_mark sl_net_mark_now(const sl_net *net);
/* Returns st; when it is a failure, frees the parameters and the graph a
 * call made since mark m. */
sl_status sl_net_undo_first_use(sl_net *net, sl_net_mark m, sl_status st);

/* Frees the top-level layers from index n_top on and restores the output
 * channel count (sl_model_build undoing a build that failed). */
void sl_net_remove_layers_from(sl_net *net, int n_top, int out_channels);

/* Runs one program in the given mode (net_run.c): the run's checks, then
 * sl_net_ready (which prepares a shape or mode not prepared yet, all or
 * nothing), then the kernels; io carries the caller's buffers, pre the
 * status of the caller's own checks. A call that fails before its kernels
 * leaves parameters and gradients as they were (the network may stay
 * prepared for the shape). */
sl_status sl_net_run(sl_net *net, const float *x, sl_shape shape, sl_mode mode, sl_status pre,
                     sl_run_io *io, sl_step_result *result, const char *fn);

/* Lists parameters (names, sizes) and builds the graph, once; layers can
 * no longer be added. Allocates no parameter memory (planning needs none). */
sl_status sl_net_finalize(sl_net *net);
/* sl_net_finalize, then allocates and initialises the parameters, once. */
sl_status sl_net_materialize(sl_net *net);

/* Plans (or reuses the cached plan for) one input shape in one mode. */
sl_status sl_net_plan_cached(sl_net *net, sl_shape input, sl_mode mode, int input_grad,
                             sl_run_cache **out);

/* Makes the network ready to run inputs of `shape` in `mode` (net_run.c;
 * the work of sl_net_prepare): checks the input, plans (or reuses the
 * cached plan), checks the step's memory, allocates parameters, gradients,
 * optimizer state and the arena, and gives the plan in *cache. All of it
 * or nothing: on failure the network is as it was. */
sl_status sl_net_ready(sl_net *net, sl_shape shape, sl_mode mode, int input_grad, const char *fn,
                       sl_run_cache **cache);

/* Floats of the gradient block a step in `mode` holds outside the arena:
 * grad_floats in training, 0 in inference or with the update in backward. */
size_t sl_net_fixed_grad_floats(const sl_net *net, sl_mode mode);

/* The first gradient-block float of rank r's slice among `size` ranks
 * (r = size: floats): balanced, on multiples of 16 floats (optimizer.c;
 * src/dist and planned ranks split the same way). */
size_t sl_shard_bound(size_t floats, int size, int r);

/* How the training program holds parameter gradients (SL_PGRAD_*): as
 * values with UPDATE steps under the update in backward, with REDUCE
 * steps under ZeRO-2. */
int sl_net_pgrad_flags(const sl_net *net);

/* Around the gradient run of a train-step call (optimizer.c; fn names
 * the call): begin checks what the update needs (an optimizer; a sharded
 * state still in its communicator) and, with the update
 * in backward, hands the run the optimizer's UPDATE steps (io->update,
 * so the run calls the optimizer as an argument, not through the
 * network); end takes the run's status and result, refuses a non-finite
 * loss (sl_net_check_step_loss) and runs the separate update when one is
 * due (not while accumulating micro-batches, not after an update in
 * backward) without checking again what begin and the run checked. */
sl_status sl_net_step_begin(sl_net *net, const char *fn, sl_run_io *io);
sl_status sl_net_step_end(sl_net *net, sl_status st, const sl_step_result *res, const char *fn);

/* A train step's loss check (net_run.c): SL_OK when res->loss is finite
 * or the network is in a communicator (its ranks must stop together; the
 * command agrees on it). Otherwise SL_ERR_STATE naming the step and the
 * loss, after discarding the gradients computed since the last update so
 * that no update uses them; in_backward: the update already ran inside
 * the step, which the message says. */
sl_status sl_net_check_step_loss(sl_net *net, const sl_step_result *res, int in_backward,
                                 const char *fn);

/* The gradient run of sl_net_compute_gradients and of a train step
 * (net_run.c): its checks, then sl_net_run in training with labels; io
 * comes zeroed, or with the UPDATE steps from sl_net_step_begin. */
sl_status sl_net_gradients(sl_net *net, const float *x, sl_shape shape, const int *labels,
                           sl_step_result *result, sl_run_io *io, const char *fn);

/* Frees the gradient block (inference mode) / allocates it again, zeroed. */
sl_status sl_net_drop_gradients(sl_net *net);
sl_status sl_net_restore_gradients(sl_net *net);

/* The parameter and optimizer blocks as host memory: the blocks
 * themselves on the CPU; on a device, copies downloaded by open and
 * written back by commit. Files are read and written through a view. */
typedef struct sl_host_view {
    float *params, *opt;
    int copies; /* 1: params/opt are host copies to free */
} sl_host_view;

sl_status sl_host_view_open(sl_net *net, sl_host_view *v);
sl_status sl_host_view_commit(sl_net *net, const sl_host_view *v);
void sl_host_view_close(sl_net *net, sl_host_view *v);
/* The host address of a device address inside the parameter block or the
 * optimizer block. */
float *sl_host_view_at(const sl_net *net, const sl_host_view *v, const float *device);

/* The backend registry: a new instance of the backend of o->device (with
 * o->deterministic, o->gpu and o->tf32 where the backend has them).
 * SL_ERR_UNSUPPORTED when this build or machine has none; free
 * with sl_backend_destroy. */
sl_status sl_backend_create(const sl_context_options *o, sl_backend **out);

/* The context a network uses (for tests: they reset its dropout counter). */
sl_context *sl_net_context(sl_net *net);

/* Checks the arguments of a public planning call (net and out not NULL, a
 * known mode, an input the network takes) and plans: the common head of
 * sl_net_memory_report, sl_net_memory_timeline and sl_net_write_dot
 * (net_plan.c, like sl_net_plan_cached and sl_net_schedule_segments). */
sl_status sl_net_plan_for(sl_net *net, sl_shape input, sl_mode mode, const void *out,
                          const char *fn, sl_run_cache **cache);

/* Before the arena of plan c and the fixed part of the step not allocated
 * yet (parameters, gradients, optimizer state) are allocated, in host
 * memory or on the GPU: SL_ERR_NOMEM naming the planned, fixed and
 * available bytes and a budget schedule that fits, when the step would not
 * fit with the address space the BLAS and the threads map (memory_check.c). */
sl_status sl_net_check_memory(sl_net *net, const sl_run_cache *c, sl_mode mode, const char *fn);

/* What sl_net_check_room is asked (memory_room.c): `arena` bytes about to
 * be allocated besides the fixed part (what they are: `what`), replacing
 * `arena_held` bytes the network holds (freed first); host_extra bytes
 * the caller is about to allocate in host memory besides (what they are:
 * host_what; on a GPU they are checked against the host's memory alone);
 * step: a run's step, which also maps the BLAS's work buffers and the
 * threads' stacks; who: what needs the bytes in the message (NULL: "this
 * step" or "the network"); advise writes what would fit in a budget of
 * `budget` bytes for arena and fixed part together, of which `fixed` are
 * the fixed part (NULL: a smaller model). */
typedef struct sl_room_request {
    uint64_t arena, arena_held, host_extra;
    const char *what, *host_what, *who;
    int step;
    void (*advise)(void *user, uint64_t budget, uint64_t fixed, char *buf, size_t n);
    void *user;
} sl_room_request;
/* SL_ERR_NOMEM naming every figure when the request and the fixed part
 * not allocated yet do not fit in the host's or the GPU's memory; SL_OK
 * when they do, when nothing is known or when the check is off. */
sl_status sl_net_check_room(sl_net *net, const sl_room_request *rq, const char *fn);
/* sl_net_check_room outside a run, before parameters or optimizer state
 * are allocated: the fixed part not allocated yet plus `extra` bytes
 * (what) must fit. */
sl_status sl_net_check_fixed_memory(sl_net *net, uint64_t extra, const char *what, const char *fn);

/* The cost model of the network's schedule search (set or the device's). */
sl_cost_model sl_net_cost_model(const sl_net *net);

/* Segments for a schedule over the network's top-level chain, with its
 * parameter, gradient and optimizer bytes and its cost model
 * (checkpoint/schedule_kind.c's sl_schedule_segments). */
sl_status sl_net_schedule_segments(const sl_net *net, const sl_shapes *sh, sl_schedule schedule,
                                   sl_segments *out);

#endif
