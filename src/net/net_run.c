/*
 * net_run.c — running a network (net stage): a training step's forward,
 * loss and backward, a forward and backward with the caller's gradient,
 * and prediction, each through the cached plan of net_plan.c at its
 * planned offsets in one arena (after memory_check.c's check); and the
 * settings that invalidate a cached plan (schedule, cost model, BatchNorm
 * rescaling and freezing, memory reuse, mode). The optimizer update is
 * optimizer.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "net/net.h"

/* Grows the arena to the plan's size (never shrinks while the net lives). */
static sl_status ensure_arena(sl_net *net, size_t bytes)
{
    if (bytes <= net->arena_capacity && net->arena)
        return SL_OK;
    const sl_backend *be = net->ctx->backend;
    be->free(be, net->arena); /* first: the old and new arena need not fit together */
    net->arena = NULL;
    net->arena_capacity = 0;
    char *a = be->alloc(be, bytes, "the activation arena");
    if (!a)
        return SL_ERR_NOMEM;
    net->arena = a;
    net->arena_capacity = bytes;
    return SL_OK;
}

/* The plan of the last run, when it is for this shape and its memory is
 * all allocated: the prepared step's path, which plans and checks
 * nothing. */
static sl_run_cache *prepared(sl_net *net, sl_shape shape, sl_mode mode, int input_grad)
{
    sl_run_cache *c = &net->cache[mode];
    if (!c->valid || !sl_shape_equal(c->shape, shape) || c->input_grad != input_grad)
        return NULL;
    if (!net->param_block || !net->arena || net->arena_capacity < c->plan.arena_bytes)
        return NULL;
    return c;
}

sl_status sl_net_ready(sl_net *net, sl_shape shape, sl_mode mode, int input_grad, const char *fn,
                       sl_run_cache **cache)
{
    if ((*cache = prepared(net, shape, mode, input_grad)) != NULL)
        return SL_OK;
    sl_net_mark m = sl_net_mark_now(net);
    sl_run_cache *c = NULL;
    sl_status st = sl_net_check_input(net, shape, fn);
    if (st == SL_OK)
        st = sl_net_plan_cached(net, shape, mode, input_grad, &c);
    /* The whole step is checked before its parameters, gradients,
     * optimizer state or arena are allocated. */
    if (st == SL_OK)
        st = sl_net_check_memory(net, c, mode, fn);
    if (st == SL_OK)
        st = sl_net_materialize(net);
    if (st == SL_OK)
        st = ensure_arena(net, c->plan.arena_bytes);
    if (st == SL_OK)
        *cache = c;
    return sl_net_undo_first_use(net, m, st);
}

sl_status sl_net_prepare(sl_net *net, sl_shape input, sl_mode mode)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_prepare: network is NULL");
    if (mode != SL_MODE_TRAIN && mode != SL_MODE_INFER)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_prepare: unknown mode %d", (int)mode);
    if (mode == SL_MODE_TRAIN) {
        sl_status st = sl_net_check_training(net, "sl_net_prepare");
        if (st != SL_OK)
            return st;
    }
    /* A plan with the input's gradient (sl_net_forward_backward's) serves
     * a run without it, so a prepared shape keeps the plan it has. */
    const sl_run_cache *cached = &net->cache[mode];
    int input_grad = cached->valid && sl_shape_equal(cached->shape, input) && cached->input_grad;
    sl_run_cache *c;
    return sl_net_ready(net, input, mode, input_grad, "sl_net_prepare", &c);
}

/* FNV-1a over the bytes of a 64-bit value. */
static uint64_t mix_u64(uint64_t h, uint64_t v)
{
    for (size_t i = 0; i < sizeof v; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
    }
    return h;
}

/* mix_u64 over a pointer's bits. */
static uint64_t mix_ptr(uint64_t h, const void *ptr)
{
    return mix_u64(h, (uint64_t)(uintptr_t)ptr);
}

/* The recordings of plan c's graph ranges (the backend's graph_* ops:
 * CUDA's, unless SL_CUDA_GRAPHS=off), or NULL where the backend records
 * nothing.
 * A recording holds the arena's and the parameters' and gradients'
 * addresses (and the caller's input's, where the steps read it in place)
 * and the context's dropout seed: when any of them changed since (a new
 * arena, parameters loaded into new memory, a snapshot's seed), the
 * recordings are made anew. */
static sl_graph_cache *run_graphs(sl_net *net, sl_run_cache *c, const sl_exec *ex,
                                  const float *x)
{
    if (!ex->be->graph_begin)
        return NULL;
    sl_graph_cache *gc = &c->graphs;
    uint64_t key = mix_ptr(1469598103934665603ull, net->arena);
    /* the dropout masks' Philox key is a recorded kernel argument: a new
     * seed (a snapshot loaded into the context) needs new recordings */
    key = mix_u64(key, net->ctx->seed);
    if (c->prog.values[0].external) /* the steps read the caller's input where it is */
        key = mix_ptr(key, x);
    for (int i = 0; i < net->graph.n_nodes; i++) {
        const sl_layer *l = net->graph.nodes[i].layer;
        for (int k = 0; k < l->n_params; k++)
            key = mix_ptr(mix_ptr(key, l->params[k].data), l->params[k].grad);
    }
    if (gc->key != key) {
        sl_graph_cache_clear(gc);
        gc->key = key;
    }
    return gc;
}

/* Every label names a class of the network's output (or, under a language
 * model head, is its ignore index). */
static sl_status check_labels(const sl_net *net, const sl_run_cache *c, const int *labels,
                              int samples, const char *fn)
{
    sl_shape out = c->sh.tensor[net->graph.n_nodes];
    const sl_lm_head *head = net->graph.head;
    int classes = head ? head->vocab : out.c * out.h * out.w;
    int rows = head ? out.n * out.h * out.w : samples;
    for (int i = 0; i < rows; i++)
        if ((labels[i] < 0 || labels[i] >= classes) && !(head && labels[i] == head->ignore_index))
            return sl_set_error(SL_ERR_INVALID_ARG, "%s: label %d of %s %d is outside [0, %d)%s",
                                fn, labels[i], head ? "position" : "sample", i, classes,
                                head ? " and is not the ignore index" : "");
    return SL_OK;
}

/* The caller's input is of the kind the network reads: floats, or int32
 * token ids (an embedding first; the _tokens runs). */
static sl_status check_input_dtype(sl_net *net, sl_dtype given, const char *fn)
{
    sl_net_mark m = sl_net_mark_now(net);
    sl_status st = sl_net_finalize(net);
    sl_dtype want = SL_DTYPE_F32;
    if (st == SL_OK)
        st = sl_graph_input_dtype(&net->graph, &want);
    if (st == SL_OK && want != given)
        st = want == SL_DTYPE_I32
                 ? sl_set_error(SL_ERR_INVALID_ARG, "%s: the network's input is int32 token ids "
                                "(its first layer is an embedding); give them to the _tokens "
                                "functions (sl_net_train_step_tokens, "
                                "sl_net_forward_backward_tokens, ...)", fn)
                 : sl_set_error(SL_ERR_INVALID_ARG, "%s: the network's input is floats (no layer "
                                "of it reads token ids); give it to sl_net_train_step, "
                                "sl_net_predict, ...", fn);
    return sl_net_undo_first_use(net, m, st);
}

/* A training run of a network in a communicator first agrees with the
 * other ranks that every rank can run (a rank whose own checks failed
 * still takes part), and communicates gradients while it runs. */
sl_status sl_net_run(sl_net *net, const float *x, sl_shape shape, sl_mode mode, sl_status pre,
                     sl_run_io *io, sl_step_result *result, const char *fn)
{
    sl_run_cache *c = NULL;
    if (pre == SL_OK && (!net || !x))
        pre = sl_set_error(SL_ERR_INVALID_ARG, "%s: network or input is NULL", fn);
    if (!net)
        return pre;
    const sl_net_optim *o = &net->optim;
    if (pre == SL_OK && mode == SL_MODE_TRAIN && o->accum > 1 && o->micro >= o->accum)
        pre = sl_set_error(SL_ERR_STATE, "%s: the %d micro-batches of gradient accumulation are "
                           "complete; call sl_net_update before computing more gradients",
                           fn, o->accum);
    if (pre == SL_OK && net->dp.plan_ranks > 1)
        pre = sl_set_error(SL_ERR_STATE, "%s: the network plans as one of %d ranks "
                           "(sl_net_set_plan_ranks); it runs alone once that is set back to 1, or "
                           "in a communicator (sl_dist_join)", fn, net->dp.plan_ranks);
    int update = pre == SL_OK && mode == SL_MODE_TRAIN && net->optim.update_in_backward;
    if (update && !io->update)
        pre = sl_set_error(SL_ERR_STATE, "%s: the update in backward is on, so gradients are not "
                           "kept; train with sl_net_train_step (or _tokens), or turn it off "
                           "(sl_net_set_update_in_backward)", fn);
    else if (update && net->dp.comm && net->dp.shard != 2)
        pre = sl_set_error(SL_ERR_STATE, "%s: the update in backward runs in a communicator "
                           "only with ZeRO-2 (sl_dist_options.shard 2)", fn);
    if (pre == SL_OK)
        pre = check_input_dtype(net, io->input_dtype, fn);
    sl_status st = pre == SL_OK ? sl_net_ready(net, shape, mode, io->dx_out != NULL, fn, &c) : pre;
    if (st == SL_OK && io->labels)
        st = check_labels(net, c, io->labels, shape.n, fn);
    const sl_net_comm *comm = mode == SL_MODE_TRAIN ? net->dp.comm : NULL;
    if (comm && comm->agree)
        st = comm->agree(comm->user, st, st == SL_OK ? c : NULL, fn);
    if (st != SL_OK)
        return st;
    sl_exec ex = sl_net_exec(net);
    io->input = x;
    io->poison = net->debug_poison;
    /* Accumulation: only the first micro-batch after an update zeroes. */
    io->keep_grads = mode == SL_MODE_TRAIN && net->optim.accum > 1 && net->optim.micro > 0;
    if (comm) {
        io->after_step = comm->after_step;
        io->after_step_user = comm->user;
    }
    if (comm && comm->reduce && (c->prog.pgrad_flags & SL_PGRAD_REDUCE)) {
        io->reduce = comm->reduce;
        io->reduce_user = comm->user;
    }
    sl_profile_begin_run(net, &c->prog, &ex, io);
    io->graphs = run_graphs(net, c, &ex, x);
    net->ctx->callback_status = SL_OK;
    sl_execute(&net->graph, &c->sh, &c->prog, &c->plan, net->arena, net->ctx, &ex, io);
    /* A failing custom layer's rank still ran every step, so its
     * communication matches the other ranks'. */
    st = comm && comm->finish ? comm->finish(comm->user) : SL_OK;
    /* The update ran in backward on this rank's slice: every rank gets
     * every updated parameter. */
    if (st == SL_OK && update && comm && comm->after_update)
        st = comm->after_update(comm->user);
    sl_status synced = ex.be->sync(&ex);
    if (st == SL_OK)
        st = synced;
    if (net->ctx->callback_status != SL_OK) /* a custom layer's own report comes first */
        st = sl_set_error(net->ctx->callback_status, "%s: %s", fn, net->ctx->callback_error);
    if (st != SL_OK) {
        if (mode == SL_MODE_TRAIN)
            net->optim.micro = 0; /* the gradients are of no use now: accumulate anew */
        return st;
    }
    c->arena_touched = io->arena_touched;
    if (update)
        net->optim.steps++; /* the step's updates ran inside it; no gradient is kept */
    else if (mode == SL_MODE_TRAIN) {
        net->optim.has_grads = 1;
        net->optim.micro += net->optim.micro < net->optim.accum;
    }
    if (result) {
        result->loss = io->loss;
        result->correct = io->correct;
        result->counted = net->graph.head ? io->counted : shape.n;
    }
    return SL_OK;
}

sl_status sl_net_check_step_loss(sl_net *net, const sl_step_result *res, int in_backward,
                                 const char *fn)
{
    if (isfinite(res->loss) || net->dp.comm)
        return SL_OK;
    /* After an update in backward net->steps already counts this step. */
    long long step = (long long)net->optim.steps + (in_backward ? 0 : 1);
    char micro[64] = "";
    if (net->optim.accum > 1)
        snprintf(micro, sizeof micro, " (micro-batch %d of %d)", net->optim.micro, net->optim.accum);
    if (!in_backward) { /* no update may use them: accumulate anew */
        net->optim.has_grads = 0;
        net->optim.micro = 0;
    }
    return sl_set_error(SL_ERR_STATE,
                        "%s: the loss is %s at step %lld%s: training diverged (a learning rate "
                        "too high?) or a weight or input is NaN or infinite; %s",
                        fn, isnan(res->loss) ? "NaN" : res->loss > 0 ? "+inf" : "-inf", step, micro,
                        in_backward ? "the update in backward had already applied this step "
                                      "(its loss is known only at the step's end)"
                                    : "the step was not applied: the parameters and optimizer "
                                      "state are as before it");
}

sl_status sl_net_predict(sl_net *net, const float *x, sl_shape shape, float *logits)
{
    if (!logits)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_predict: logits is NULL");
    sl_run_io io;
    memset(&io, 0, sizeof io);
    io.logits_out = logits;
    return sl_net_run(net, x, shape, SL_MODE_INFER, SL_OK, &io, NULL, "sl_net_predict");
}

sl_status sl_net_gradients(sl_net *net, const float *x, sl_shape shape, const int *labels,
                           sl_step_result *result, sl_run_io *io, const char *fn)
{
    sl_status pre = sl_net_check_training(net, fn);
    if (pre == SL_OK && !labels)
        pre = sl_set_error(SL_ERR_INVALID_ARG, "%s: labels is NULL", fn);
    io->labels = labels;
    return sl_net_run(net, x, shape, SL_MODE_TRAIN, pre, io, result, fn);
}

sl_status sl_net_compute_gradients(sl_net *net, const float *x, sl_shape shape, const int *labels,
                                   sl_step_result *result)
{
    sl_run_io io;
    memset(&io, 0, sizeof io);
    return sl_net_gradients(net, x, shape, labels, result, &io, "sl_net_compute_gradients");
}

sl_status sl_net_forward_backward(sl_net *net, const float *x, sl_shape shape, const float *dy,
                                  float *output, float *dx)
{
    sl_status pre = sl_net_check_training(net, "sl_net_forward_backward");
    if (pre == SL_OK && !dy)
        pre = sl_set_error(SL_ERR_INVALID_ARG, "sl_net_forward_backward: dy is NULL");
    if (pre == SL_OK && net && net->has_head)
        pre = sl_set_error(SL_ERR_STATE, "sl_net_forward_backward: the network ends with a "
                           "language-model head, whose loss is its own; use "
                           "sl_net_compute_gradients or sl_net_compute_gradients_tokens");
    sl_run_io io;
    memset(&io, 0, sizeof io);
    io.dy_in = dy;
    io.logits_out = output;
    io.dx_out = dx;
    return sl_net_run(net, x, shape, SL_MODE_TRAIN, pre, &io, NULL, "sl_net_forward_backward");
}

sl_status sl_net_output_shape(sl_net *net, sl_shape input, sl_shape *output)
{
    if (!net || !output)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_output_shape: network or output is NULL");
    sl_status st = sl_net_check_input(net, input, "sl_net_output_shape");
    if (st != SL_OK)
        return st;
    sl_net_mark m = sl_net_mark_now(net);
    st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    sl_shapes sh;
    st = sl_shapes_compute(&net->graph, net->ctx->backend, input, &sh);
    if (st != SL_OK)
        return sl_net_undo_first_use(net, m, st);
    *output = sh.tensor[net->graph.n_nodes];
    if (net->graph.head) /* the head's logits: vocab per row */
        output->c = net->graph.head->vocab;
    sl_shapes_release(&sh);
    return SL_OK;
}

sl_status sl_net_set_bn_momentum_rescale(sl_net *net, int enabled)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_bn_momentum_rescale: network is NULL");
    net->bn_rescale = enabled != 0;
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    return SL_OK;
}

sl_status sl_net_set_batchnorm_frozen(sl_net *net, int frozen, int *count)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_batchnorm_frozen: network is NULL");
    sl_status st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    int n = 0;
    for (int i = 0; i < net->graph.n_nodes; i++)
        n += sl_batchnorm2d_set_frozen(net->graph.nodes[i].layer, frozen);
    if (count)
        *count = n;
    /* a frozen BatchNorm queues other kernels: recordings are stale */
    for (int m = 0; m < 2 && n > 0; m++)
        sl_graph_cache_clear(&net->cache[m].graphs);
    return SL_OK;
}

sl_status sl_net_set_precision(sl_net *net, sl_precision precision)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_precision: network is NULL");
    if (precision != SL_PRECISION_F32 && precision != SL_PRECISION_BF16)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_net_set_precision: unknown precision %d (SL_PRECISION_F32 or "
                            "SL_PRECISION_BF16)", (int)precision);
    sl_dtype dt = precision == SL_PRECISION_BF16 ? SL_DTYPE_BF16 : SL_DTYPE_F32;
    if (dt != net->precision) {
        net->precision = dt;
        sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
        sl_run_cache_release(&net->cache[SL_MODE_INFER]);
    }
    return SL_OK;
}

sl_precision sl_net_precision(const sl_net *net)
{
    return net && net->precision == SL_DTYPE_BF16 ? SL_PRECISION_BF16 : SL_PRECISION_F32;
}

sl_status sl_net_set_schedule(sl_net *net, sl_schedule schedule)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_schedule: network is NULL");
    sl_status st = sl_schedule_check(schedule, "sl_net_set_schedule");
    if (st != SL_OK)
        return st;
    net->schedule = schedule;
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    return SL_OK;
}

sl_status sl_net_set_cost_model(sl_net *net, const sl_cost_model *model)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_cost_model: network is NULL");
    if (model && !(model->flops_per_s > 0 && model->bytes_per_s > 0 &&
                   model->flops_per_s < INFINITY && model->bytes_per_s < INFINITY))
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_net_set_cost_model: rates %g FLOP/s and %g bytes/s must be positive "
                       "and finite", model->flops_per_s, model->bytes_per_s);
    net->cost_model = model ? *model : (sl_cost_model){0, 0};
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    return SL_OK;
}

sl_status sl_net_set_memory_reuse(sl_net *net, int enabled)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_memory_reuse: network is NULL");
    net->no_reuse = !enabled;
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    sl_run_cache_release(&net->cache[SL_MODE_INFER]);
    return SL_OK;
}

sl_mode sl_net_mode(const sl_net *net) { return net ? net->mode : SL_MODE_TRAIN; }

sl_status sl_net_set_mode(sl_net *net, sl_mode mode)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_mode: network is NULL");
    if (mode != SL_MODE_TRAIN && mode != SL_MODE_INFER)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_mode: unknown mode %d", (int)mode);
    if (mode == net->mode)
        return SL_OK;
    sl_status st = mode == SL_MODE_INFER ? sl_net_drop_gradients(net) : sl_net_restore_gradients(net);
    if (st == SL_OK) {
        net->mode = mode;
        net->optim.has_grads = 0;
        net->optim.micro = 0;
    }
    return st;
}
