/*
 * net.c — the network object (net stage): the public constructors,
 * appending layers with channel checks and torchvision-style names,
 * finalising (one block for parameters, initialised from the context's
 * seed, one for their gradients, and the flattened graph), parameter
 * access, host views of the blocks, and the small accessors every other
 * file of src/net shares. It calls into no other file of src/net but
 * profile.c, so the rest (net_plan.c, net_run.c, memory_check.c,
 * optimizer.c, dot.c, timeline.c) build on it without a circle.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "net/net.h"

static sl_status net_new(sl_context *ctx, int in_channels, sl_schedule schedule, const char *fn,
                         sl_net **out)
{
    if (!out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if (!ctx)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: context is NULL", fn);
    if (in_channels < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: in_channels is %d, must be >= 1", fn, in_channels);
    sl_status st = sl_schedule_check(schedule, fn);
    if (st != SL_OK)
        return st;
    sl_net *net = sl_zalloc(sizeof *net, "a network");
    if (!net)
        return SL_ERR_NOMEM;
    net->ctx = ctx;
    net->in_channels = in_channels;
    net->out_channels = in_channels;
    net->schedule = schedule;
    net->optim.accum = 1;
    net->optim.last_grad_norm = -1.0f;
    *out = net;
    return SL_OK;
}

sl_status sl_sequential(sl_context *ctx, int in_channels, sl_net **out)
{
    return net_new(ctx, in_channels, SL_SCHEDULE_NONE, "sl_sequential", out);
}

sl_status sl_sublinear(sl_context *ctx, int in_channels, sl_schedule schedule, sl_net **out)
{
    return net_new(ctx, in_channels, schedule, "sl_sublinear", out);
}

void sl_net_free(sl_net *net)
{
    if (!net)
        return;
    if (net->dp.comm && net->dp.comm->detach)
        net->dp.comm->detach(net->dp.comm->user);
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    sl_run_cache_release(&net->cache[SL_MODE_INFER]);
    const sl_backend *be = net->ctx->backend;
    be->free(be, net->arena);
    sl_graph_release(&net->graph);
    for (int i = 0; i < net->n_top; i++)
        sl_layer_free(net->top[i]);
    free(net->top);
    free(net->params);
    be->free(be, net->param_block);
    be->free(be, net->grad_block);
    be->free(be, net->opt_block);
    be->free(be, net->optim.norm_slots);
    sl_free(net->optim.norm_host);
    sl_profile_free(net->profile);
    free(net);
}

/* Full names, depth first: parent.name + "." + child.local. */
static void assign_names(sl_layer *l)
{
    for (int i = 0; i < l->n_children; i++) {
        sl_layer *c = l->children[i];
        sl_join_name(c->name, sizeof c->name, l->name, c->local);
        assign_names(c);
    }
}

static int name_taken(const sl_net *net, const char *name)
{
    for (int i = 0; i < net->n_top; i++)
        if (strcmp(net->top[i]->name, name) == 0)
            return 1;
    return 0;
}

sl_status sl_net_add(sl_net *net, const char *name, sl_layer *layer)
{
    sl_status st = SL_OK;
    char auto_name[16];
    if (!net) {
        st = sl_set_error(SL_ERR_INVALID_ARG, "sl_net_add: network is NULL");
    } else if (!layer) {
        /* The constructor's failure travels up with its status (out of
         * memory stays SL_ERR_NOMEM, a bad argument SL_ERR_INVALID_ARG);
         * a NULL with no failure recorded is the caller's mistake. */
        sl_status why = sl_error_status();
        st = sl_set_error(why != SL_OK ? why : SL_ERR_INVALID_ARG,
                     "sl_net_add: layer is NULL (its constructor failed: %s)", sl_last_error());
    } else if (net->finalized) {
        st = sl_set_error(SL_ERR_STATE,
                          "sl_net_add: the network has been used (parameters allocated); add every "
                          "layer before the first run or parameter access");
    } else {
        if (!name) {
            snprintf(auto_name, sizeof auto_name, "%d", net->n_top);
            name = auto_name;
        }
        if (!name[0] || strlen(name) >= SL_LOCAL_NAME_MAX * 2)
            st = sl_set_error(SL_ERR_INVALID_ARG, "sl_net_add: name '%s' must have 1 to %d characters",
                              name, SL_LOCAL_NAME_MAX * 2 - 1);
        else if (name_taken(net, name))
            st = sl_set_error(SL_ERR_INVALID_ARG, "sl_net_add: a layer named '%s' already exists", name);
    }
    if (st != SL_OK) {
        sl_layer_free(layer);
        return st;
    }
    snprintf(layer->name, sizeof layer->name, "%s", name);
    int out_c = layer->ops->out_channels(layer, net->out_channels);
    if (out_c < 0) { /* a shape that does not fit, or a block's pass out of memory */
        st = sl_set_error(sl_error_status() == SL_ERR_NOMEM ? SL_ERR_NOMEM : SL_ERR_SHAPE,
                          "sl_net_add: %s", sl_last_error());
        sl_layer_free(layer);
        return st;
    }
    if (net->n_top == net->cap_top) {
        int cap = net->cap_top ? 2 * net->cap_top : 16;
        sl_layer **top = sl_realloc(net->top, (size_t)cap * sizeof *top);
        if (!top) {
            sl_layer_free(layer);
            return sl_set_error(SL_ERR_NOMEM, "sl_net_add: out of memory");
        }
        net->top = top;
        net->cap_top = cap;
    }
    assign_names(layer);
    net->top[net->n_top++] = layer;
    net->out_channels = out_c;
    return SL_OK;
}

int sl_net_layer_count(const sl_net *net) { return net ? net->n_top : 0; }

void sl_net_remove_layers_from(sl_net *net, int n_top, int out_channels)
{
    while (net->n_top > n_top)
        sl_layer_free(net->top[--net->n_top]);
    net->out_channels = out_channels;
}

/* ---- finalising: parameters ---- */

static int count_params(const sl_layer *l)
{
    int n = l->n_params;
    for (int i = 0; i < l->n_children; i++)
        n += count_params(l->children[i]);
    return n;
}

static void collect_params(sl_net *net, sl_layer *l, int *k)
{
    for (int p = 0; p < l->n_params; p++) {
        sl_net_entry *np = &net->params[(*k)++];
        sl_join_name(np->name, sizeof np->name, l->name, l->params[p].local);
        np->spec = &l->params[p];
    }
    for (int i = 0; i < l->n_children; i++)
        collect_params(net, l->children[i], k);
}

static void init_param(sl_param_spec *p, uint64_t seed, uint64_t stream, int threads)
{
    switch (p->init) {
    case SL_INIT_ZEROS:
        memset(p->data, 0, p->count * sizeof(float));
        break;
    case SL_INIT_ONES:
        for (size_t i = 0; i < p->count; i++)
            p->data[i] = 1.0f;
        break;
    case SL_INIT_KAIMING_NORMAL_FAN_OUT: {
        float std = sqrtf(2.0f / (float)p->fan);
        /* Each element is a pure function of (seed, stream, i): threads
         * cannot change the result. */
        SL_PARALLEL_FOR(threads, p->count > 65536, (size_t i = 0; i < p->count; i++),
                        { p->data[i] = std * sl_random_normal(seed, stream, i); });
        break;
    }
    case SL_INIT_UNIFORM_FAN_IN: {
        float bound = 1.0f / sqrtf((float)p->fan);
        SL_PARALLEL_FOR(threads, p->count > 65536, (size_t i = 0; i < p->count; i++), {
            p->data[i] = bound * (2.0f * sl_random_uniform(seed, stream, i) - 1.0f);
        });
        break;
    }
    case SL_INIT_NORMAL: {
        float std = p->std;
        SL_PARALLEL_FOR(threads, p->count > 65536, (size_t i = 0; i < p->count; i++),
                        { p->data[i] = std * sl_random_normal(seed, stream, i); });
        break;
    }
    }
}

/* Names and sizes of every parameter (no memory for their values yet). */
static sl_status list_params(sl_net *net)
{
    int n = 0;
    for (int i = 0; i < net->n_top; i++)
        n += count_params(net->top[i]);
    net->params = sl_calloc((size_t)n + 1, sizeof *net->params);
    if (!net->params)
        return sl_set_error(SL_ERR_NOMEM, "out of memory listing parameters");
    int k = 0;
    for (int i = 0; i < net->n_top; i++)
        collect_params(net, net->top[i], &k);
    net->n_params = n;
    size_t pf = 0, gf = 0;
    for (int i = 0; i < n; i++) {
        pf += sl_stride_floats(net->params[i].spec->count);
        if (net->params[i].spec->trainable)
            gf += sl_stride_floats(net->params[i].spec->count);
    }
    net->param_floats = pf;
    net->grad_floats = gf;
    return SL_OK;
}

/* One block for parameters on the context's device, values initialised
 * from the context's seed, stream = parameter index (on a device through a
 * host staging copy). */
static sl_status allocate_params(sl_net *net)
{
    const sl_backend *be = net->ctx->backend;
    size_t bytes = net->param_floats * sizeof(float);
    net->param_block = be->alloc(be, bytes, "parameters");
    if (!net->param_block)
        return SL_ERR_NOMEM;
    float *host = be->host_memory ? net->param_block : sl_aligned_zalloc(bytes, "parameter staging");
    if (!host) {
        be->free(be, net->param_block);
        net->param_block = NULL;
        return SL_ERR_NOMEM;
    }
    size_t po = 0;
    for (int i = 0; i < net->n_params; i++) {
        sl_param_spec *p = net->params[i].spec;
        p->data = host + po;
        init_param(p, net->ctx->seed, (uint64_t)i, sl_context_threads(net->ctx));
        p->data = net->param_block + po;
        po += sl_stride_floats(p->count);
    }
    if (!be->host_memory) {
        sl_exec ex = sl_net_exec(net);
        be->upload(&ex, net->param_block, host, bytes);
        sl_aligned_free(host);
        sl_status st = be->sync(&ex);
        if (st != SL_OK) {
            be->free(be, net->param_block);
            net->param_block = NULL;
            return st;
        }
    }
    return SL_OK;
}

sl_status sl_net_finalize(sl_net *net)
{
    if (net->finalized)
        return SL_OK;
    if (net->n_top == 0)
        return sl_set_error(SL_ERR_STATE, "the network has no layers");
    sl_status st = list_params(net);
    if (st == SL_OK)
        st = sl_graph_build(net->top, net->n_top, &net->graph);
    if (st == SL_OK && net->has_head)
        net->graph.head = &net->head;
    if (st != SL_OK) {
        free(net->params);
        net->params = NULL;
        net->n_params = 0;
        net->param_floats = net->grad_floats = 0;
        return st;
    }
    net->finalized = 1;
    return SL_OK;
}

/* Undoes sl_net_finalize, for a call that failed after finalising. */
static void unfinalize(sl_net *net)
{
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    sl_run_cache_release(&net->cache[SL_MODE_INFER]);
    sl_graph_release(&net->graph);
    sl_free(net->params);
    net->params = NULL;
    net->n_params = 0;
    net->param_floats = net->grad_floats = 0;
    net->finalized = 0;
}

sl_net_mark sl_net_mark_now(const sl_net *net)
{
    sl_net_mark m = {net->finalized, net->param_block != NULL};
    return m;
}

sl_status sl_net_undo_first_use(sl_net *net, sl_net_mark m, sl_status st)
{
    if (st == SL_OK || !net)
        return st;
    const sl_backend *be = net->ctx->backend;
    if (!m.materialized && net->param_block) {
        for (int i = 0; i < net->n_params; i++)
            net->params[i].spec->data = net->params[i].spec->grad = NULL;
        be->free(be, net->param_block);
        be->free(be, net->grad_block);
        be->free(be, net->opt_block); /* allocated with the parameters */
        net->param_block = net->grad_block = net->opt_block = NULL;
    }
    if (!m.finalized && net->finalized && !net->opt_block)
        unfinalize(net);
    return st;
}

/* The optimizer's state, zero, for an optimizer set before the
 * parameters were allocated (sl_net_set_optimizer defers it). */
static sl_status allocate_opt_state(sl_net *net)
{
    if (net->opt_block || !net->opt_floats)
        return SL_OK;
    const sl_backend *be = net->ctx->backend;
    net->opt_block = be->alloc(be, net->opt_floats * sizeof(float), "optimizer state");
    return net->opt_block ? SL_OK : SL_ERR_NOMEM;
}

sl_status sl_net_materialize(sl_net *net)
{
    int was_finalized = net->finalized;
    sl_status st = sl_net_finalize(net);
    if (st != SL_OK || net->param_block)
        return st;
    /* Parameters, gradients and optimizer state are checked together
     * before any is allocated. */
    st = sl_net_check_fixed_memory(net, 0, "", "allocating the network's parameters");
    if (st == SL_OK)
        st = allocate_params(net);
    if (st == SL_OK && net->mode == SL_MODE_TRAIN)
        st = sl_net_restore_gradients(net);
    if (st == SL_OK)
        st = allocate_opt_state(net);
    if (st != SL_OK) {
        const sl_backend *be = net->ctx->backend;
        for (int i = 0; i < net->n_params; i++)
            net->params[i].spec->data = net->params[i].spec->grad = NULL;
        be->free(be, net->param_block);
        be->free(be, net->grad_block);
        net->param_block = net->grad_block = NULL;
        /* Failed calls leave the network as it was: layers can still be
         * added when it was not finalised before. */
        if (!was_finalized)
            unfinalize(net);
    }
    return st;
}

/* Gradients are overwritten by every backward (zeroed first), so freeing
 * them and allocating them again changes no later result. */
sl_status sl_net_drop_gradients(sl_net *net)
{
    for (int i = 0; i < net->n_params; i++)
        net->params[i].spec->grad = NULL;
    net->ctx->backend->free(net->ctx->backend, net->grad_block);
    net->grad_block = NULL;
    return SL_OK;
}

sl_status sl_net_restore_gradients(sl_net *net)
{
    if (!net->param_block || net->grad_block || net->optim.update_in_backward)
        return SL_OK; /* not materialised yet: allocated with the parameters;
                         update in backward: gradients are arena values */
    if (net->dp.shard == 2) { /* ZeRO-2: the reduced gradients of the slice */
        size_t floats = net->dp.shard_hi - net->dp.shard_lo;
        net->grad_block = net->ctx->backend->alloc(net->ctx->backend, floats * sizeof(float),
                                                   "this rank's slice of the reduced gradients");
        return net->grad_block ? SL_OK : SL_ERR_NOMEM;
    }
    net->grad_block = net->ctx->backend->alloc(net->ctx->backend, net->grad_floats * sizeof(float), "parameter gradients");
    if (!net->grad_block)
        return SL_ERR_NOMEM;
    size_t go = 0;
    for (int i = 0; i < net->n_params; i++) {
        sl_param_spec *p = net->params[i].spec;
        if (p->trainable) {
            p->grad = net->grad_block + go;
            go += sl_stride_floats(p->count);
        }
    }
    return SL_OK;
}

/* ---- parameter access ---- */

sl_status sl_net_param_count(sl_net *net, int *count)
{
    if (!net || !count)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_param_count: network or count is NULL");
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return st;
    *count = net->n_params;
    return SL_OK;
}

static void fill_info(const sl_net_entry *np, sl_param_info *out)
{
    const sl_param_spec *p = np->spec;
    out->name = np->name;
    out->ndim = p->ndim;
    for (int d = 0; d < 4; d++)
        out->dims[d] = d < p->ndim ? p->dims[d] : 1;
    out->count = p->count;
    out->data = p->data;
    out->grad = p->grad;
    out->trainable = p->trainable;
}

sl_status sl_net_param(sl_net *net, int index, sl_param_info *out)
{
    if (!net || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_param: network or out is NULL");
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return st;
    if (index < 0 || index >= net->n_params)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_param: index %d out of range [0, %d)", index,
                            net->n_params);
    fill_info(&net->params[index], out);
    return SL_OK;
}

sl_status sl_net_find_param(sl_net *net, const char *name, sl_param_info *out)
{
    if (!net || !name || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_find_param: an argument is NULL");
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return st;
    for (int i = 0; i < net->n_params; i++)
        if (strcmp(net->params[i].name, name) == 0) {
            fill_info(&net->params[i], out);
            return SL_OK;
        }
    return sl_set_error(SL_ERR_NOT_FOUND, "sl_net_find_param: no tensor named '%s'", name);
}

/* ---- copies to and from the caller's memory, on any device ---- */

static sl_status param_copy(sl_net *net, int index, float *dst, const float *src, int grad,
                            const char *fn)
{
    if (!net || (!dst && !src))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or buffer is NULL", fn);
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return st;
    if (index < 0 || index >= net->n_params)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: index %d out of range [0, %d)", fn, index,
                            net->n_params);
    sl_param_spec *p = net->params[index].spec;
    float *dev = grad ? p->grad : p->data;
    if (!dev)
        return sl_set_error(SL_ERR_STATE, "%s: '%s' has no gradient (a running statistic, inference "
                                     "mode, or the update in backward)", fn, net->params[index].name);
    const sl_backend *be = net->ctx->backend;
    sl_exec ex = sl_net_exec(net);
    if (dst)
        be->download(&ex, dst, dev, p->count * sizeof(float));
    else
        be->upload(&ex, dev, src, p->count * sizeof(float));
    return be->sync(&ex);
}

sl_status sl_net_param_read(sl_net *net, int index, float *dst)
{
    return param_copy(net, index, dst, NULL, 0, "sl_net_param_read");
}

sl_status sl_net_param_write(sl_net *net, int index, const float *src)
{
    return param_copy(net, index, NULL, src, 0, "sl_net_param_write");
}

sl_status sl_net_param_read_grad(sl_net *net, int index, float *dst)
{
    return param_copy(net, index, dst, NULL, 1, "sl_net_param_read_grad");
}

/* ---- host views of the parameter and optimizer blocks ---- */

sl_status sl_host_view_open(sl_net *net, sl_host_view *v)
{
    const sl_backend *be = net->ctx->backend;
    memset(v, 0, sizeof *v);
    if (be->host_memory) {
        v->params = net->param_block;
        v->opt = net->opt_block;
        return SL_OK;
    }
    size_t pb = net->param_floats * sizeof(float), ob = net->opt_floats * sizeof(float);
    v->copies = 1;
    v->params = sl_aligned_zalloc(pb, "a host copy of the parameters");
    v->opt = ob ? sl_aligned_zalloc(ob, "a host copy of the optimizer state") : NULL;
    if (!v->params || (ob && !v->opt)) {
        sl_host_view_close(net, v);
        return SL_ERR_NOMEM;
    }
    sl_exec ex = sl_net_exec(net);
    be->download(&ex, v->params, net->param_block, pb);
    if (ob)
        be->download(&ex, v->opt, net->opt_block, ob);
    sl_status st = be->sync(&ex);
    if (st != SL_OK)
        sl_host_view_close(net, v);
    return st;
}

sl_status sl_host_view_commit(sl_net *net, const sl_host_view *v)
{
    const sl_backend *be = net->ctx->backend;
    if (!v->copies)
        return SL_OK;
    sl_exec ex = sl_net_exec(net);
    be->upload(&ex, net->param_block, v->params, net->param_floats * sizeof(float));
    if (v->opt && net->opt_block)
        be->upload(&ex, net->opt_block, v->opt, net->opt_floats * sizeof(float));
    return be->sync(&ex);
}

void sl_host_view_close(sl_net *net, sl_host_view *v)
{
    (void)net;
    if (v->copies) {
        sl_aligned_free(v->params);
        sl_aligned_free(v->opt);
    }
    memset(v, 0, sizeof *v);
}

float *sl_host_view_at(const sl_net *net, const sl_host_view *v, const float *device)
{
    if (device >= net->param_block && device < net->param_block + net->param_floats)
        return v->params + (device - net->param_block);
    return v->opt + (device - net->opt_block);
}

/* ---- what the other files of src/net share ---- */

sl_status sl_net_check_input(const sl_net *net, sl_shape s, const char *fn)
{
    if (s.n < 1 || s.h < 1 || s.w < 1)
        return sl_set_error(SL_ERR_SHAPE, "%s: input shape %dx%dx%dx%d must have batch, height and width >= 1",
                            fn, s.n, s.c, s.h, s.w);
    if (!sl_layout_known(s.layout))
        return sl_set_error(SL_ERR_SHAPE, "%s: input shape %dx%dx%dx%d has layout %d; it must be "
                            "SL_LAYOUT_NCHW or SL_LAYOUT_NHWC (build shapes with sl_shape_nchw or "
                            "sl_shape_seq)", fn, s.n, s.c, s.h, s.w, (int)s.layout);
    if (s.c != net->in_channels)
        return sl_set_error(SL_ERR_SHAPE, "%s: input has %d channels, the network takes %d", fn, s.c,
                            net->in_channels);
    uint64_t positions = (uint64_t)s.n * (uint64_t)s.h * (uint64_t)s.w;
    if (positions > INT_MAX) /* the kernels' rows (GEMM dimensions) are int */
        return sl_set_error(SL_ERR_SHAPE, "%s: input shape %dx%dx%dx%d has %llu positions (batch x "
                            "height x width); at most %d", fn, s.n, s.c, s.h, s.w,
                            (unsigned long long)positions, INT_MAX);
    return SL_OK;
}

sl_status sl_net_check_shard(const sl_net *net, const char *fn)
{
    if (net->dp.shard && !(net->dp.comm && net->dp.comm->after_update))
        return sl_set_error(SL_ERR_STATE, "%s: the optimizer state is sharded over ranks "
                            "(sl_dist_options.shard) and the network left its communicator: this "
                            "rank holds only its slice; set the optimizer again (or load a "
                            "snapshot saved in the communicator)", fn);
    return SL_OK;
}

sl_status sl_net_check_training(const sl_net *net, const char *fn)
{
    if (net && net->mode == SL_MODE_INFER)
        return sl_set_error(SL_ERR_STATE, "%s: the network is in inference mode (gradients freed); "
                                     "call sl_net_set_mode(net, SL_MODE_TRAIN) first", fn);
    return SL_OK;
}

sl_exec sl_net_exec(const sl_net *net)
{
    sl_exec ex = {net->ctx->backend, sl_context_threads(net->ctx), 0, NULL};
    return ex;
}

sl_cost_model sl_net_cost_model(const sl_net *net)
{
    if (net->cost_model.flops_per_s > 0)
        return net->cost_model;
    return sl_cost_model_for(net->ctx->backend->host_memory);
}

void sl_run_cache_release(sl_run_cache *c)
{
    sl_graph_cache_release(&c->graphs);
    sl_plan_release(&c->plan);
    sl_program_release(&c->prog);
    sl_segments_release(&c->seg);
    sl_shapes_release(&c->sh);
    c->valid = 0;
}

/* For tests and tools inside the project: the context a network uses. */
sl_context *sl_net_context(sl_net *net) { return net ? net->ctx : NULL; }
