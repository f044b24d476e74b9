/*
 * program.c — one step as a flat list of steps (program stage).
 *
 * Every production of a tensor is a new value (SSA), so a tensor computed
 * in forward and again in a re-forward is two values with two lifetimes;
 * the planner needs nothing else to know what checkpointing frees.
 *
 * Training: FWD of every node (TRAIN pass), LOSS, then for each segment
 * from the last: REFWD of its nodes when the segment is recomputed
 * (except the node producing the kept boundary, whose output and state
 * live on from forward), then BWD of its nodes in reverse. BWD steps read
 * the newest value of each tensor, so forward values of a recomputed
 * segment die after their last forward reader.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/pipeline.h"

typedef struct builder {
    sl_program *p;
    const sl_graph *g;
    const sl_shapes *sh;
    int *cur;   /* [n_tensors] newest value of each tensor */
    int *grad;  /* [n_tensors] gradient value, -1 before the first write */
    int *saved; /* [n_nodes] saved-state value */
    int *redo;  /* [n_nodes] node is re-forwarded */
    int input_grad;
    int failed;
} builder;

static int new_value(builder *b, sl_value_kind kind, int tensor, size_t bytes)
{
    sl_program *p = b->p;
    if (p->n_values == p->cap_values) {
        int cap = p->cap_values ? 2 * p->cap_values : 256;
        sl_value *v = sl_realloc(p->values, (size_t)cap * sizeof *v);
        if (!v) {
            b->failed = 1;
            return 0;
        }
        p->values = v;
        p->cap_values = cap;
    }
    sl_value *v = &p->values[p->n_values];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->tensor = tensor;
    v->bytes = bytes;
    return p->n_values++;
}

static sl_step *new_step(builder *b, sl_step_kind kind, int node)
{
    sl_program *p = b->p;
    if (p->n_steps == p->cap_steps) {
        int cap = p->cap_steps ? 2 * p->cap_steps : 256;
        sl_step *s = sl_realloc(p->steps, (size_t)cap * sizeof *s);
        if (!s) {
            b->failed = 1;
            return NULL;
        }
        p->steps = s;
        p->cap_steps = cap;
    }
    sl_step *s = &p->steps[p->n_steps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->node = node;
    s->y = s->saved = s->ws = s->dy = -1;
    for (int k = 0; k < SL_MAX_INPUTS; k++)
        s->x[k] = s->dx[k] = -1;
    return s;
}

static void emit_forward(builder *b, int node, sl_pass pass, sl_step_kind kind, int rescale)
{
    const sl_graph_node *nd = &b->g->nodes[node];
    const sl_layer_cost *c = &b->sh->cost[node];
    unsigned flags = nd->layer->ops->flags;
    int y = new_value(b, SL_VALUE_OUTPUT, nd->out, b->sh->bytes[nd->out]);
    int saved = -1, written = 0;
    if (c->saved_bytes && pass != SL_PASS_EVAL) {
        if (kind == SL_STEP_REFWD && (flags & SL_LAYER_SAVED_KEPT)) {
            saved = b->saved[node];
            written = rescale; /* memonger's option recomputes the statistics */
        } else {
            saved = new_value(b, SL_VALUE_SAVED, node, c->saved_bytes);
            written = 1;
        }
    }
    int ws = c->ws_fwd_bytes ? new_value(b, SL_VALUE_WORKSPACE, node, c->ws_fwd_bytes) : -1;
    sl_step *s = new_step(b, kind, node);
    if (!s)
        return;
    s->pass = pass;
    s->n_in = nd->n_in;
    for (int k = 0; k < nd->n_in; k++)
        s->x[k] = b->cur[nd->in[k]];
    s->y = y;
    s->saved = saved;
    s->saved_written = written;
    s->ws = ws;
    s->bn_rescale = rescale;
    b->cur[nd->out] = y;
    if (saved >= 0)
        b->saved[node] = saved;
    if (kind == SL_STEP_REFWD)
        b->p->refwd_flops += c->fwd_flops;
}

static void emit_backward(builder *b, int node)
{
    const sl_graph_node *nd = &b->g->nodes[node];
    const sl_layer_cost *c = &b->sh->cost[node];
    unsigned flags = nd->layer->ops->flags;
    int ws = c->ws_bwd_bytes ? new_value(b, SL_VALUE_WORKSPACE, node, c->ws_bwd_bytes) : -1;
    int dx[SL_MAX_INPUTS], acc[SL_MAX_INPUTS];
    for (int k = 0; k < nd->n_in; k++) {
        int t = nd->in[k];
        dx[k] = -1;
        acc[k] = 0;
        if (t == 0 && !b->input_grad)
            continue; /* the caller's input needs no gradient */
        if (b->grad[t] < 0)
            b->grad[t] = new_value(b, SL_VALUE_GRAD, t, b->sh->bytes[t]);
        else
            acc[k] = 1;
        dx[k] = b->grad[t];
        for (int j = 0; j < k; j++)
            if (nd->in[j] == t)
                acc[k] = 1;
    }
    sl_step *s = new_step(b, SL_STEP_BWD, node);
    if (!s)
        return;
    s->n_in = nd->n_in;
    for (int k = 0; k < nd->n_in; k++) {
        if (flags & SL_LAYER_NEEDS_INPUT)
            s->x[k] = b->cur[nd->in[k]];
        s->dx[k] = dx[k];
        s->accumulate[k] = acc[k];
    }
    if (flags & SL_LAYER_NEEDS_OUTPUT)
        s->y = b->cur[nd->out];
    s->saved = c->saved_bytes ? b->saved[node] : -1;
    s->ws = ws;
    s->dy = b->grad[nd->out];
}

/* Marks the nodes each recomputed segment re-forwards. */
static void mark_recompute(builder *b, const sl_segments *seg)
{
    const sl_graph *g = b->g;
    for (int j = 0; j < seg->n; j++) {
        if (!seg->recompute[j])
            continue;
        int first = g->top_first_node[seg->start[j]];
        int end = g->top_first_node[seg->start[j + 1]];
        int boundary = g->top_output[seg->start[j + 1] - 1];
        for (int i = first; i < end; i++)
            b->redo[i] = g->nodes[i].out != boundary;
    }
}

static void build_train(builder *b, const sl_segments *seg, int bn_rescale)
{
    const sl_graph *g = b->g;
    mark_recompute(b, seg);
    for (int i = 0; i < g->n_nodes; i++)
        emit_forward(b, i, SL_PASS_TRAIN, SL_STEP_FWD, bn_rescale && b->redo[i]);
    int logits = g->n_nodes; /* tensor of the last node */
    int dlogits = new_value(b, SL_VALUE_GRAD, logits, b->sh->bytes[logits]);
    sl_step *loss = new_step(b, SL_STEP_LOSS, -1);
    if (!loss)
        return;
    loss->y = b->cur[logits];
    loss->dy = dlogits;
    b->grad[logits] = dlogits;
    b->p->logits = b->cur[logits];
    for (int j = seg->n - 1; j >= 0; j--) {
        int first = g->top_first_node[seg->start[j]];
        int end = g->top_first_node[seg->start[j + 1]];
        for (int i = first; i < end; i++)
            if (b->redo[i])
                emit_forward(b, i, SL_PASS_REFORWARD, SL_STEP_REFWD, bn_rescale);
        for (int i = end - 1; i >= first; i--)
            emit_backward(b, i);
    }
    b->p->input_grad = b->grad[0];
}

sl_status sl_program_build(const sl_graph *g, const sl_shapes *sh, const sl_segments *seg,
                           sl_mode mode, int bn_rescale, int input_grad, int input_in_arena,
                           sl_program *out)
{
    sl_program p;
    memset(&p, 0, sizeof p);
    p.mode = mode;
    p.fwd_flops = sh->fwd_flops;
    p.bwd_flops = sh->bwd_flops;
    p.input_grad = -1;
    builder b = {&p, g, sh, NULL, NULL, NULL, NULL, input_grad, 0};
    int nt = g->n_nodes + 1;
    b.cur = sl_malloc((size_t)nt * sizeof(int));
    b.grad = sl_malloc((size_t)nt * sizeof(int));
    b.saved = sl_malloc((size_t)nt * sizeof(int));
    b.redo = sl_calloc((size_t)nt, sizeof(int));
    if (!b.cur || !b.grad || !b.saved || !b.redo)
        b.failed = 1;
    else {
        for (int t = 0; t < nt; t++)
            b.cur[t] = b.grad[t] = b.saved[t] = -1;
        int input = new_value(&b, SL_VALUE_OUTPUT, 0, sh->bytes[0]);
        if (!b.failed) {
            p.values[input].external = !input_in_arena;
            b.cur[0] = input;
        }
        if (mode == SL_MODE_TRAIN)
            build_train(&b, seg, bn_rescale);
        else {
            for (int i = 0; i < g->n_nodes; i++)
                emit_forward(&b, i, SL_PASS_EVAL, SL_STEP_FWD, 0);
            p.logits = b.cur[g->n_nodes];
        }
    }
    free(b.cur);
    free(b.grad);
    free(b.saved);
    free(b.redo);
    if (b.failed) {
        sl_program_release(&p);
        return sl_fail(SL_ERR_NOMEM, "out of memory building the step program");
    }
    *out = p;
    return SL_OK;
}

void sl_program_release(sl_program *p)
{
    free(p->steps);
    free(p->values);
    memset(p, 0, sizeof *p);
}
