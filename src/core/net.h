/*
 * net.h — the network object behind sl_net (internal): its top-level
 * chain, its parameters in one block, its optimizer state, and the cached
 * plan for the last input shape of each mode.
 */
#ifndef SL_NET_H
#define SL_NET_H

#include "checkpoint/pipeline.h"

typedef struct sl_run_cache {
    int valid;
    sl_shape shape;
    int input_grad;
    size_t arena_touched; /* measured in the last run of this plan */
    sl_shapes sh;
    sl_segments seg;
    sl_program prog;
    sl_plan plan;
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
    sl_cost_model cost_model; /* zero: the device's default */

    int n_top, cap_top;
    sl_layer **top;

    int finalized;
    sl_graph graph;
    int n_params;
    sl_net_entry *params;
    float *param_block, *grad_block, *opt_block;
    size_t param_floats, grad_floats, opt_floats;

    int has_optimizer;
    sl_optimizer_options opt;
    int64_t steps;
    int has_grads;

    sl_run_cache cache[2]; /* indexed by sl_mode */
    int debug_poison; /* tests: NaN-fill dead storage during runs */
    int no_reuse;     /* plan every value in storage of its own */
    sl_mode mode;     /* SL_MODE_INFER: gradients freed */
    char *arena;
    size_t arena_capacity;
};

/* Lists parameters (names, sizes) and builds the graph, once; layers can
 * no longer be added. Allocates no parameter memory (planning needs none). */
sl_status sl_net_finalize(sl_net *net);
/* sl_net_finalize, then allocates and initialises the parameters, once. */
sl_status sl_net_materialize(sl_net *net);

/* Plans (or reuses the cached plan for) one input shape in one mode. */
sl_status sl_net_prepare(sl_net *net, sl_shape input, sl_mode mode, int input_grad,
                         sl_run_cache **out);

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

/* The context a network uses (for tests: they reset its dropout counter). */
sl_context *sl_net_context(sl_net *net);

/* Checks the arguments of a public planning call (net and out not NULL, a
 * known mode, an input the network takes) and plans: the common head of
 * sl_net_memory_report, sl_net_memory_timeline and sl_net_write_dot. */
sl_status sl_net_plan_for(sl_net *net, sl_shape input, sl_mode mode, const void *out,
                          const char *fn, sl_run_cache **cache);

/* The cost model of the network's schedule search (set or the device's). */
sl_cost_model sl_net_cost_model(const sl_net *net);

/* Segments for a schedule over the network's top-level chain. */
sl_status sl_schedule_segments(const sl_net *net, const sl_shapes *sh, sl_schedule schedule,
                               sl_segments *out);

#endif
