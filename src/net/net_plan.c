/*
 * net_plan.c — planning a network (net stage: the schedule, program and
 * plan stages of src/checkpoint for one input shape and mode, cached until
 * the shape, mode or a setting changes): the segments of its schedule
 * (chosen by checkpoint/schedule_kind.c), the cached plan, the common head
 * of the public planning calls and the planned memory report. Runs
 * (net_run.c), the memory check (memory_check.c) and the pictures (dot.c,
 * timeline.c) plan through it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint/schedule.h"
#include "layers/custom.h"
#include "net/net.h"

/* Whether drawing layers' steps may be recorded (sl_program_graph_ranges'
 * draws): the backend offsets its random kernels' counters on the device,
 * and every run of the network draws the same counter blocks in the same
 * order, which a custom layer's random numbers (as many as its callback
 * asks for, run by run) do not promise. */
static int draws_recordable(const sl_net *net)
{
    if (!net->ctx->backend->counter_delta)
        return 0;
    for (int i = 0; i < net->graph.n_nodes; i++)
        if (sl_custom_is(net->graph.nodes[i].layer))
            return 0;
    return 1;
}

/* Bytes outside the arena in training: parameters, gradients (unless they
 * are arena values: update in backward), optimizer. */
static uint64_t fixed_train_bytes(const sl_net *net)
{
    uint64_t floats = sl_add_sat(sl_add_sat(net->param_floats,
                                            sl_net_fixed_grad_floats(net, SL_MODE_TRAIN)),
                                 net->opt_floats);
    return sl_mul_sat(floats, sizeof(float));
}

sl_status sl_net_schedule_segments(const sl_net *net, const sl_shapes *sh, sl_schedule schedule,
                                   sl_segments *out)
{
    sl_cost_model model = sl_net_cost_model(net);
    sl_budget_query chain = {.g = &net->graph, .sh = sh, .fixed_bytes = fixed_train_bytes(net),
                             .pgrad_flags = sl_net_pgrad_flags(net),
                             .bn_rescale = net->bn_rescale,
                             .input_in_arena = !net->ctx->backend->host_memory,
                             .cost_model = &model};
    return sl_schedule_segments(&chain, schedule, out);
}

sl_status sl_net_plan_cached(sl_net *net, sl_shape input, sl_mode mode, int input_grad,
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
    if (st == SL_OK)
        st = sl_shapes_set_dtype(&net->graph, net->ctx->backend, net->precision, &fresh.sh);
    fresh.sh.f32_copy_bytes = net->f32_copy_bytes;
    if (st == SL_OK) {
        if (mode == SL_MODE_TRAIN)
            st = sl_net_schedule_segments(net, &fresh.sh, net->schedule, &fresh.seg);
        else
            st = sl_segments_keep_all(net->n_top, &fresh.seg);
    }
    if (st == SL_OK)
        st = sl_program_build(&net->graph, &fresh.sh, &fresh.seg, mode, net->bn_rescale, input_grad,
                              !net->ctx->backend->host_memory, sl_net_pgrad_flags(net),
                              &fresh.prog);
    if (st == SL_OK)
        st = sl_plan_build(&net->graph, &fresh.prog, !net->no_reuse, &fresh.plan);
    if (st == SL_OK) /* what a device may record of it (CUDA's graphs) */
        fresh.graphs.n = sl_program_graph_ranges(&net->graph, &fresh.prog, draws_recordable(net),
                                                 fresh.graphs.lo, fresh.graphs.hi,
                                                 SL_GRAPH_RANGES);
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

/* ---- the planned memory report ---- */

sl_status sl_net_plan_for(sl_net *net, sl_shape input, sl_mode mode, const void *out,
                          const char *fn, sl_run_cache **cache)
{
    if (!net || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or out is NULL", fn);
    if (mode != SL_MODE_TRAIN && mode != SL_MODE_INFER)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: unknown mode %d", fn, (int)mode);
    sl_status st = sl_net_check_input(net, input, fn);
    if (st != SL_OK)
        return st;
    /* The plan the last run used, when it was for this shape (with or
     * without the input's gradient): its measured bytes stay valid and
     * the next run need not plan again. */
    const sl_run_cache *c = &net->cache[mode];
    int input_grad = c->valid && sl_shape_equal(c->shape, input) ? c->input_grad : 0;
    sl_net_mark m = sl_net_mark_now(net);
    return sl_net_undo_first_use(net, m, sl_net_plan_cached(net, input, mode, input_grad, cache));
}

/* Re-forwarded FLOPs over the FLOPs of one plain step. The program's
 * totals saturate at UINT64_MAX past 2^64; a ratio of two saturated totals
 * would say nothing, so then the ratio is taken over the nodes' counts
 * summed in double, approximate but never wrapped (a node's own count
 * that saturated enters as 2^64, a lower bound). Below 2^64 the exact
 * integer ratio is kept, as before. */
static double recompute_fraction(const sl_graph *g, const sl_shapes *sh, const sl_program *p,
                                 sl_mode mode)
{
    int train = mode == SL_MODE_TRAIN;
    uint64_t plain = sl_add_sat(p->fwd_flops, train ? p->bwd_flops : 0);
    if (plain < UINT64_MAX && p->refwd_flops < UINT64_MAX)
        return plain ? (double)p->refwd_flops / (double)plain : 0.0;
    double all = 0.0, redo = 0.0;
    for (int i = 0; i < g->n_nodes; i++)
        all += (double)sh->cost[i].fwd_flops + (train ? (double)sh->cost[i].bwd_flops : 0.0);
    if (g->head) {
        sl_shape last = sh->tensor[g->n_nodes];
        /* at most INT_MAX rows: checked by the shape pass */
        int rows = (int)((uint64_t)last.n * (uint64_t)last.h * (uint64_t)last.w);
        all += (double)sl_lm_head_fwd_flops(g->head, rows) +
               (train ? (double)sl_lm_head_bwd_flops(g->head, rows) : 0.0);
    }
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == SL_STEP_REFWD)
            redo += (double)sh->cost[p->steps[s].node].fwd_flops;
    return all > 0 ? redo / all : 0.0;
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
    out->params = sl_mul_sat(net->param_floats, sizeof(float));
    /* With the update in backward the gradients live in the arena
     * (counted in arena_bytes): the figure is their largest live set. */
    uint64_t fixed_grads = sl_mul_sat(sl_net_fixed_grad_floats(net, mode), sizeof(float));
    out->param_grads = c->prog.pgrad_flags ? pl->category_peak[SL_VALUE_PARAM_GRAD] : fixed_grads;
    out->optimizer = mode == SL_MODE_TRAIN ? sl_mul_sat(net->opt_floats, sizeof(float)) : 0;
    out->arena_bytes = pl->arena_bytes;
    out->communication = mode == SL_MODE_TRAIN && net->dp.comm ? net->dp.comm->bytes : 0;
    out->param_grads_in_arena = c->prog.pgrad_flags != 0;
    out->fixed = sl_add_sat(sl_add_sat(out->params, fixed_grads), out->optimizer);
    out->total = sl_add_sat(sl_add_sat(out->arena_bytes, out->fixed), out->communication);
    if (out->total == UINT64_MAX) { /* a sum past 64 bits: refused, never wrapped */
        memset(out, 0, sizeof *out);
        return sl_set_error(SL_ERR_NOMEM, "sl_net_memory_report: the planned bytes (arena, "
                            "parameters, gradients and optimizer state) total 2^64 or more; use "
                            "a smaller batch, input or model");
    }
    out->arena_measured = c->arena_touched;
    out->measured_params = net->param_block ? net->param_floats * sizeof(float) : 0;
    out->measured_param_grads =
        net->grad_block ? sl_net_fixed_grad_floats(net, SL_MODE_TRAIN) * sizeof(float) : 0;
    out->measured_optimizer = net->opt_block ? net->opt_floats * sizeof(float) : 0;
    if (net->ctx->backend->device_free_bytes) {
        size_t now = net->ctx->backend->device_free_bytes(net->ctx->backend, NULL);
        out->device_used = now < net->ctx->device_free_at_start ? net->ctx->device_free_at_start - now : 0;
    }
    out->measured_total = out->arena_measured + out->measured_params + out->measured_param_grads +
                          out->measured_optimizer + out->communication;
    out->recompute_fraction = recompute_fraction(&net->graph, &c->sh, &c->prog, mode);
    sl_cost_model model = sl_net_cost_model(net);
    double plain_s, refwd_s;
    sl_program_seconds(&net->graph, &c->sh, &c->prog, &model, &plain_s, &refwd_s);
    out->recompute_time_fraction = plain_s > 0 && mode == SL_MODE_TRAIN ? refwd_s / plain_s : 0.0;
    return SL_OK;
}

sl_status sl_memory_report_json(const sl_memory_report *r, char *buf, size_t n)
{
    if (!r || !buf)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_report_json: report or buffer is NULL");
    errno = 0;
    int len = snprintf(buf, n,
                       "{\"outputs\":%llu,\"grad_inputs\":%llu,\"buffers\":%llu,\"params\":%llu,"
                       "\"param_grads\":%llu,\"param_grads_in_arena\":%s,\"optimizer\":%llu,"
                       "\"communication\":%llu,\"fixed\":%llu,\"arena\":%llu,\"total\":%llu,\"arena_measured\":%llu,\"measured_total\":%llu,"
                       "\"recompute_fraction\":%.6f,\"recompute_time_fraction\":%.6f}",
                       (unsigned long long)r->outputs, (unsigned long long)r->grad_inputs,
                       (unsigned long long)r->buffers, (unsigned long long)r->params,
                       (unsigned long long)r->param_grads, r->param_grads_in_arena ? "true" : "false",
                       (unsigned long long)r->optimizer, (unsigned long long)r->communication,
                       (unsigned long long)r->fixed, (unsigned long long)r->arena_bytes,
                       (unsigned long long)r->total, (unsigned long long)r->arena_measured,
                       (unsigned long long)r->measured_total,
                       r->recompute_fraction, r->recompute_time_fraction);
    /* snprintf fails (< 0) only when the C library cannot get memory to
     * format a number (the report's text is short and its format valid):
     * that is not a buffer too small. */
    if (len < 0)
        return sl_set_error(SL_ERR_NOMEM, "sl_memory_report_json: out of memory formatting the "
                            "report (%s)", strerror(errno ? errno : ENOMEM));
    if ((size_t)len >= n)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_memory_report_json: buffer of %zu bytes is too "
                            "small for the report's %d", n, len + 1);
    return SL_OK;
}
