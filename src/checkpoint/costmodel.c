/*
 * costmodel.c — time-like costs of layers (schedule stage), for the
 * operator-level search: recomputing a BatchNorm or a ReLU is cheap in
 * FLOPs but not in time, since it streams its tensors through memory.
 * A node's time is estimated as its FLOPs at the device's FLOP rate plus
 * the bytes it moves (inputs, output, parameters, workspace written and
 * read back) at the device's memory bandwidth: one measured pair per
 * backend, a roofline summed rather than maxed, since on these devices a
 * kernel rarely overlaps the two well.
 */
#include <stdlib.h>

#include "checkpoint/schedule.h"

/* The CPU pair was measured with sl_cost_model_measure on the development
 * machine (two cores of an x86-64 server, OpenBLAS sgemm with AVX2: 64
 * GFLOP/s, 17.5 GB/s); the device pair is an H100's order of magnitude
 * (FP32 matrix products and HBM3 copies). Either is replaced by
 * sl_net_set_cost_model. */
sl_cost_model sl_cost_model_for(int host_memory)
{
    if (host_memory)
        return (sl_cost_model){64e9, 17.5e9};
    return (sl_cost_model){50e12, 2.5e12};
}

static uint64_t param_bytes(const sl_layer *l)
{
    uint64_t b = 0;
    for (int k = 0; k < l->n_params; k++)
        b += l->params[k].count * sizeof(float);
    return b;
}

double sl_node_forward_seconds(const sl_graph *g, const sl_shapes *sh, int node,
                               const sl_cost_model *m)
{
    const sl_graph_node *nd = &g->nodes[node];
    const sl_layer_cost *c = &sh->cost[node];
    if (nd->layer->ops->flags & SL_LAYER_VIEW)
        return 0.0;
    double bytes = (double)sh->bytes[nd->out] + 2.0 * (double)c->ws_fwd_bytes +
                   (double)param_bytes(nd->layer);
    for (int k = 0; k < nd->n_in; k++)
        bytes += (double)sh->bytes[nd->in[k]];
    return (double)c->fwd_flops / m->flops_per_s + bytes / m->bytes_per_s;
}

double sl_node_backward_seconds(const sl_graph *g, const sl_shapes *sh, int node,
                                const sl_cost_model *m)
{
    const sl_graph_node *nd = &g->nodes[node];
    const sl_layer_cost *c = &sh->cost[node];
    unsigned flags = nd->layer->ops->flags;
    if (flags & SL_LAYER_VIEW)
        return 0.0;
    /* reads dy (and x or y when it needs them), writes dx, reads the
     * parameters and updates their gradients */
    double bytes = (double)sh->bytes[nd->out] + 2.0 * (double)c->ws_bwd_bytes +
                   3.0 * (double)param_bytes(nd->layer);
    if (flags & SL_LAYER_NEEDS_OUTPUT)
        bytes += (double)sh->bytes[nd->out];
    for (int k = 0; k < nd->n_in; k++)
        bytes += (double)sh->bytes[nd->in[k]] * ((flags & SL_LAYER_NEEDS_INPUT) ? 2.0 : 1.0);
    return (double)c->bwd_flops / m->flops_per_s + bytes / m->bytes_per_s;
}

void sl_program_seconds(const sl_graph *g, const sl_shapes *sh, const sl_program *p,
                        const sl_cost_model *m, double *plain, double *refwd)
{
    *plain = *refwd = 0.0;
    for (int i = 0; i < g->n_nodes; i++)
        *plain += sl_node_forward_seconds(g, sh, i, m) + sl_node_backward_seconds(g, sh, i, m);
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == SL_STEP_REFWD)
            *refwd += sl_node_forward_seconds(g, sh, p->steps[s].node, m);
}

enum { GEMM_N = 768, COPY_FLOATS = 16 << 20, ROUNDS = 3 };

sl_status sl_cost_model_measure_backend(const sl_backend *be, int threads, sl_cost_model *out)
{
    size_t gemm_floats = (size_t)GEMM_N * GEMM_N;
    float *a = be->alloc(be, 3 * gemm_floats * sizeof(float), "the cost model's matrices");
    float *x = be->alloc(be, 2 * (size_t)COPY_FLOATS * sizeof(float), "the cost model's buffers");
    if (!a || !x) {
        be->free(be, a);
        be->free(be, x);
        return SL_ERR_NOMEM;
    }
    sl_exec ex = {be, threads, 0, NULL};
    be->fill(&ex, 3 * gemm_floats, 0.5f, a);
    be->fill(&ex, 2 * (size_t)COPY_FLOATS, 0.25f, x);
    double gemm = 1e30, copy = 1e30;
    sl_status st = be->sync(&ex);
    for (int r = 0; r < ROUNDS && st == SL_OK; r++) {
        double t0 = sl_now_seconds();
        be->gemm(&ex, 0, 0, GEMM_N, GEMM_N, GEMM_N, 1.0f, a, GEMM_N, a + gemm_floats, GEMM_N, 0.0f,
                 a + 2 * gemm_floats, GEMM_N);
        st = be->sync(&ex);
        double t1 = sl_now_seconds();
        be->copy(&ex, COPY_FLOATS, x, x + COPY_FLOATS, 0);
        if (st == SL_OK)
            st = be->sync(&ex);
        double t2 = sl_now_seconds();
        if (t1 - t0 < gemm)
            gemm = t1 - t0;
        if (t2 - t1 < copy)
            copy = t2 - t1;
    }
    be->free(be, a);
    be->free(be, x);
    if (st != SL_OK)
        return st;
    out->flops_per_s = 2.0 * GEMM_N * GEMM_N * (double)GEMM_N / (gemm > 1e-9 ? gemm : 1e-9);
    /* a copy reads and writes each byte */
    out->bytes_per_s = 2.0 * COPY_FLOATS * sizeof(float) / (copy > 1e-9 ? copy : 1e-9);
    return SL_OK;
}

sl_status sl_cost_model_measure(sl_context *ctx, sl_cost_model *out)
{
    if (!ctx || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_cost_model_measure: context or out is NULL");
    return sl_cost_model_measure_backend(ctx->backend, sl_context_threads(ctx), out);
}
