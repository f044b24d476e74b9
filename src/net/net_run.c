/*
 * net_run.c — running a network: planning per input shape and mode
 * (cached), a training step (forward, loss, backward at planned offsets),
 * prediction, the optimizer update and the planned memory report.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "net/net.h"

static sl_status check_input(const sl_net *net, sl_shape s, const char *fn)
{
    if (s.n < 1 || s.h < 1 || s.w < 1)
        return sl_set_error(SL_ERR_SHAPE, "%s: input shape %dx%dx%dx%d must have batch, height and width >= 1",
                       fn, s.n, s.c, s.h, s.w);
    if (s.c != net->in_channels)
        return sl_set_error(SL_ERR_SHAPE, "%s: input has %d channels, the network takes %d", fn, s.c,
                       net->in_channels);
    return SL_OK;
}

void sl_run_cache_release(sl_run_cache *c)
{
    sl_plan_release(&c->plan);
    sl_program_release(&c->prog);
    sl_segments_release(&c->seg);
    sl_shapes_release(&c->sh);
    c->valid = 0;
}

/* Bytes outside the arena in training: parameters, gradients, optimizer. */
static uint64_t fixed_train_bytes(const sl_net *net)
{
    return (uint64_t)(net->param_floats + net->grad_floats + net->opt_floats) * sizeof(float);
}

sl_status sl_schedule_segments(const sl_net *net, const sl_shapes *sh, sl_schedule schedule,
                               sl_segments *out)
{
    const sl_graph *g = &net->graph;
    if (schedule.kind == SL_SCHEDULE_KIND_NONE)
        return sl_segments_keep_all(g->n_top, out);
    if (schedule.kind == SL_SCHEDULE_KIND_BUDGET || schedule.kind == SL_SCHEDULE_KIND_BUDGET_OPS) {
        sl_cost_model model = sl_net_cost_model(net);
        sl_budget_query q = {.g = g, .sh = sh, .budget_bytes = schedule.budget_bytes,
                             .fixed_bytes = fixed_train_bytes(net), .bn_rescale = net->bn_rescale,
                             .input_in_arena = !net->ctx->backend->host_memory,
                             .operator_level = schedule.kind == SL_SCHEDULE_KIND_BUDGET_OPS,
                             .cost_model = &model};
        return sl_segments_for_budget(&q, out);
    }
    sl_unit_costs u;
    sl_status st = sl_unit_costs_compute(g, sh, &u);
    if (st != SL_OK)
        return st;
    int k = schedule.kind == SL_SCHEDULE_KIND_SQRT ? sl_sqrt_segments(g->n_top) : schedule.segments;
    st = sl_segments_balanced(&u, k, out);
    sl_unit_costs_release(&u);
    return st;
}

sl_status sl_net_prepare(sl_net *net, sl_shape input, sl_mode mode, int input_grad,
                         sl_run_cache **out)
{
    sl_status st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    sl_run_cache *c = &net->cache[mode];
    if (c->valid && sl_shape_equal(c->shape, input) && c->input_grad == input_grad) {
        *out = c;
        return SL_OK;
    }
    sl_run_cache fresh;
    memset(&fresh, 0, sizeof fresh);
    fresh.shape = input;
    fresh.input_grad = input_grad;
    st = sl_shapes_compute(&net->graph, net->ctx->backend, input, &fresh.sh);
    if (st == SL_OK) {
        if (mode == SL_MODE_TRAIN)
            st = sl_schedule_segments(net, &fresh.sh, net->schedule, &fresh.seg);
        else
            st = sl_segments_keep_all(net->n_top, &fresh.seg);
    }
    if (st == SL_OK)
        st = sl_program_build(&net->graph, &fresh.sh, &fresh.seg, mode, net->bn_rescale, input_grad,
                              !net->ctx->backend->host_memory, &fresh.prog);
    if (st == SL_OK)
        st = sl_plan_build(&net->graph, &fresh.prog, !net->no_reuse, &fresh.plan);
    if (st != SL_OK) {
        sl_run_cache_release(&fresh);
        return st;
    }
    sl_run_cache_release(c);
    *c = fresh;
    c->valid = 1;
    *out = c;
    return SL_OK;
}

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

sl_exec sl_net_exec(const sl_net *net)
{
    sl_exec ex = {net->ctx->backend, sl_context_threads(net->ctx)};
    return ex;
}

/* Checks the input, plans if needed and makes the arena ready. */
static sl_status prepare_run(sl_net *net, const float *x, sl_shape shape, sl_mode mode,
                             const sl_run_io *io, const char *fn, sl_run_cache **cache)
{
    if (!net || !x)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or input is NULL", fn);
    sl_status st = check_input(net, shape, fn);
    if (st == SL_OK)
        st = sl_net_materialize(net);
    if (st != SL_OK)
        return st;
    sl_run_cache *c;
    st = sl_net_prepare(net, shape, mode, io->dx_out != NULL, &c);
    if (st != SL_OK)
        return st;
    sl_shape out = c->sh.tensor[net->graph.n_nodes];
    int classes = out.c * out.h * out.w;
    if (io->labels)
        for (int i = 0; i < shape.n; i++)
            if (io->labels[i] < 0 || io->labels[i] >= classes)
                return sl_set_error(SL_ERR_INVALID_ARG, "%s: label %d of sample %d is outside [0, %d)",
                               fn, io->labels[i], i, classes);
    st = sl_net_check_memory(net, c, mode, fn);
    if (st == SL_OK)
        st = ensure_arena(net, c->plan.arena_bytes);
    if (st == SL_OK)
        *cache = c;
    return st;
}

/* Plans if needed and runs one program; io carries the caller's buffers.
 * pre is the status of the caller's own checks. A training run of a
 * network in a communicator first agrees with the other ranks that every
 * rank can run, and communicates gradients while it runs. */
static sl_status run_program(sl_net *net, const float *x, sl_shape shape, sl_mode mode,
                             sl_status pre, sl_run_io *io, sl_step_result *result, const char *fn)
{
    sl_run_cache *c = NULL;
    sl_status st = pre == SL_OK ? prepare_run(net, x, shape, mode, io, fn, &c) : pre;
    const sl_net_comm *comm = net && mode == SL_MODE_TRAIN ? net->comm : NULL;
    if (comm && comm->agree)
        st = comm->agree(comm->user, st, st == SL_OK ? c : NULL, fn);
    if (st != SL_OK)
        return st;
    sl_exec ex = sl_net_exec(net);
    io->input = x;
    io->poison = net->debug_poison;
    if (comm) {
        io->after_step = comm->after_step;
        io->after_step_user = comm->user;
    }
    sl_profile_begin_run(net, &c->prog, &ex, io);
    net->ctx->callback_status = SL_OK;
    sl_execute(&net->graph, &c->sh, &c->prog, &c->plan, net->arena, net->ctx, &ex, io);
    /* A failing custom layer's rank still ran every step, so its
     * communication matches the other ranks'. */
    st = comm && comm->finish ? comm->finish(comm->user) : SL_OK;
    sl_status synced = ex.be->sync(&ex);
    if (st == SL_OK)
        st = synced;
    if (net->ctx->callback_status != SL_OK) /* a custom layer's own report comes first */
        st = sl_set_error(net->ctx->callback_status, "%s: %s", fn, net->ctx->callback_error);
    if (st != SL_OK)
        return st;
    c->arena_touched = io->arena_touched;
    if (mode == SL_MODE_TRAIN)
        net->has_grads = 1;
    if (result) {
        result->loss = io->loss;
        result->correct = io->correct;
    }
    return SL_OK;
}

/* run_program, undoing what a failing call did on the network's first
 * use (parameters allocated, graph built), so the network is as it was. */
static sl_status run(sl_net *net, const float *x, sl_shape shape, sl_mode mode, sl_status pre,
                     sl_run_io *io, sl_step_result *result, const char *fn)
{
    if (!net)
        return run_program(net, x, shape, mode, pre, io, result, fn);
    sl_net_mark m = sl_net_mark_now(net);
    return sl_net_undo_first_use(net, m, run_program(net, x, shape, mode, pre, io, result, fn));
}

sl_status sl_net_predict(sl_net *net, const float *x, sl_shape shape, float *logits)
{
    if (!logits)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_predict: logits is NULL");
    sl_run_io io;
    memset(&io, 0, sizeof io);
    io.logits_out = logits;
    return run(net, x, shape, SL_MODE_INFER, SL_OK, &io, NULL, "sl_net_predict");
}

sl_status sl_net_check_training(const sl_net *net, const char *fn)
{
    if (net && net->mode == SL_MODE_INFER)
        return sl_set_error(SL_ERR_STATE, "%s: the network is in inference mode (gradients freed); "
                                     "call sl_net_set_mode(net, SL_MODE_TRAIN) first", fn);
    return SL_OK;
}

sl_status sl_net_compute_gradients(sl_net *net, const float *x, sl_shape shape, const int *labels,
                                   sl_step_result *result)
{
    sl_status pre = sl_net_check_training(net, "sl_net_compute_gradients");
    if (pre == SL_OK && !labels)
        pre = sl_set_error(SL_ERR_INVALID_ARG, "sl_net_compute_gradients: labels is NULL");
    sl_run_io io;
    memset(&io, 0, sizeof io);
    io.labels = labels;
    return run(net, x, shape, SL_MODE_TRAIN, pre, &io, result, "sl_net_compute_gradients");
}

sl_status sl_net_forward_backward(sl_net *net, const float *x, sl_shape shape, const float *dy,
                                  float *output, float *dx)
{
    sl_status pre = sl_net_check_training(net, "sl_net_forward_backward");
    if (pre == SL_OK && !dy)
        pre = sl_set_error(SL_ERR_INVALID_ARG, "sl_net_forward_backward: dy is NULL");
    sl_run_io io;
    memset(&io, 0, sizeof io);
    io.dy_in = dy;
    io.logits_out = output;
    io.dx_out = dx;
    return run(net, x, shape, SL_MODE_TRAIN, pre, &io, NULL, "sl_net_forward_backward");
}

sl_status sl_net_output_shape(sl_net *net, sl_shape input, sl_shape *output)
{
    if (!net || !output)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_output_shape: network or output is NULL");
    sl_status st = check_input(net, input, "sl_net_output_shape");
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

sl_status sl_net_freeze_batchnorm(sl_net *net, int frozen, int *count)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_freeze_batchnorm: network is NULL");
    sl_status st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    int n = 0;
    for (int i = 0; i < net->graph.n_nodes; i++)
        n += sl_batchnorm2d_set_frozen(net->graph.nodes[i].layer, frozen);
    if (count)
        *count = n;
    return SL_OK;
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

sl_cost_model sl_net_cost_model(const sl_net *net)
{
    if (net->cost_model.flops_per_s > 0)
        return net->cost_model;
    return sl_cost_model_for(net->ctx->backend->host_memory);
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

/* ---- memory report ---- */

sl_status sl_net_plan_for(sl_net *net, sl_shape input, sl_mode mode, const void *out,
                          const char *fn, sl_run_cache **cache)
{
    if (!net || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or out is NULL", fn);
    if (mode != SL_MODE_TRAIN && mode != SL_MODE_INFER)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: unknown mode %d", fn, (int)mode);
    sl_status st = check_input(net, input, fn);
    if (st != SL_OK)
        return st;
    /* The plan the last run used, when it was for this shape (with or
     * without the input's gradient): its measured bytes stay valid and
     * the next run need not plan again. */
    const sl_run_cache *c = &net->cache[mode];
    int input_grad = c->valid && sl_shape_equal(c->shape, input) ? c->input_grad : 0;
    sl_net_mark m = sl_net_mark_now(net);
    return sl_net_undo_first_use(net, m, sl_net_prepare(net, input, mode, input_grad, cache));
}

sl_status sl_net_memory_report(sl_net *net, sl_shape input, sl_mode mode, sl_memory_report *out)
{
    sl_run_cache *c;
    sl_status st = sl_net_plan_for(net, input, mode, out, "sl_net_memory_report", &c);
    if (st != SL_OK)
        return st;
    memset(out, 0, sizeof *out);
    const sl_plan *pl = &c->plan;
    out->outputs = pl->category_peak[SL_VALUE_OUTPUT];
    out->grad_inputs = pl->category_peak[SL_VALUE_GRAD];
    out->buffers = pl->category_peak[SL_VALUE_SAVED] + pl->category_peak[SL_VALUE_WORKSPACE];
    out->params = net->param_floats * sizeof(float);
    out->param_grads = mode == SL_MODE_TRAIN ? net->grad_floats * sizeof(float) : 0;
    out->optimizer = mode == SL_MODE_TRAIN ? net->opt_floats * sizeof(float) : 0;
    out->arena_bytes = pl->arena_bytes;
    out->communication = mode == SL_MODE_TRAIN && net->comm ? net->comm->bytes : 0;
    out->total = out->arena_bytes + out->params + out->param_grads + out->optimizer +
                 out->communication;
    out->arena_measured = c->arena_touched;
    out->measured_params = net->param_block ? net->param_floats * sizeof(float) : 0;
    out->measured_param_grads = net->grad_block ? net->grad_floats * sizeof(float) : 0;
    out->measured_optimizer = net->opt_block ? net->opt_floats * sizeof(float) : 0;
    if (net->ctx->backend->device_free_bytes) {
        size_t now = net->ctx->backend->device_free_bytes(net->ctx->backend, NULL);
        out->device_used = now < net->ctx->device_free_at_start ? net->ctx->device_free_at_start - now : 0;
    }
    out->measured_total = out->arena_measured + out->measured_params + out->measured_param_grads +
                          out->measured_optimizer + out->communication;
    uint64_t plain = c->prog.fwd_flops + (mode == SL_MODE_TRAIN ? c->prog.bwd_flops : 0);
    out->recompute_fraction = plain ? (double)c->prog.refwd_flops / (double)plain : 0.0;
    sl_cost_model model = sl_net_cost_model(net);
    double plain_s, refwd_s;
    sl_program_seconds(&net->graph, &c->sh, &c->prog, &model, &plain_s, &refwd_s);
    out->recompute_time_fraction = plain_s > 0 && mode == SL_MODE_TRAIN ? refwd_s / plain_s : 0.0;
    return SL_OK;
}

/* For tests and tools inside the project: the context a network uses. */
sl_context *sl_net_context(sl_net *net) { return net ? net->ctx : NULL; }

sl_status sl_memory_report_json(const sl_memory_report *r, char *buf, size_t n)
{
    if (!r || !buf)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_report_json: report or buffer is NULL");
    int len = snprintf(buf, n,
                       "{\"outputs\":%llu,\"grad_inputs\":%llu,\"buffers\":%llu,\"params\":%llu,"
                       "\"param_grads\":%llu,\"optimizer\":%llu,\"communication\":%llu,"
                       "\"arena\":%llu,\"total\":%llu,\"arena_measured\":%llu,\"measured_total\":%llu,"
                       "\"recompute_fraction\":%.6f,\"recompute_time_fraction\":%.6f}",
                       (unsigned long long)r->outputs, (unsigned long long)r->grad_inputs,
                       (unsigned long long)r->buffers, (unsigned long long)r->params,
                       (unsigned long long)r->param_grads, (unsigned long long)r->optimizer,
                       (unsigned long long)r->communication, (unsigned long long)r->arena_bytes,
                       (unsigned long long)r->total, (unsigned long long)r->arena_measured,
                       (unsigned long long)r->measured_total,
                       r->recompute_fraction, r->recompute_time_fraction);
    if (len < 0 || (size_t)len >= n)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_report_json: buffer of %zu bytes is too small", n);
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
        net->has_grads = 0;
    }
    return st;
}
