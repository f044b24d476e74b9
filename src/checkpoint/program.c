/*
 * program.c — one step as a flat list of steps (program stage).
 *
 * Every production of a tensor is a new value (SSA), so a tensor computed
 * in forward and again in a re-forward is two values with two lifetimes;
 * the planner needs nothing else to know what checkpointing frees.
 *
 * Training: the schedule's actions (pipeline.h) in order. A FWD runs a
 * unit's nodes (the TRAIN pass the first time, a re-forward later); a BWD
 * first re-forwards, from what is kept, the nodes whose outputs or saved
 * state its backward steps read, then runs those steps in reverse. Only
 * nodes whose outputs are wanted run in a re-forward: a node nothing
 * reads (a block's last BatchNorm and add, when the block's output is
 * still kept) is skipped. Reads take the newest value of each tensor, so
 * a value dies after its last reader and a dropped one is not read again.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/pipeline.h"

typedef struct builder {
    sl_program *p;
    const sl_graph *g;
    const sl_shapes *sh;
    int *cur;   /* [n_tensors] newest value of each tensor */
    int *grad;  /* [n_tensors] gradient value, -1 before the first write */
    int *saved; /* [n_nodes] newest saved-state value */
    unsigned char *kept;       /* [n_tensors] a later step may read cur[t] */
    unsigned char *saved_kept; /* [n_nodes] a backward may read saved[i] (state
                                  that is not SL_LAYER_SAVED_KEPT: pooling indices) */
    unsigned char *trained;    /* [n_nodes] TRAIN forward done */
    unsigned char *run;        /* [n_nodes] scratch: runs in this action */
    unsigned char *want;       /* [n_tensors] scratch: wanted in this action */
    int *runs;                 /* [n_nodes] forward executions this step */
    int *pgrad;                /* [n_nodes] PARAM_GRAD value, -1 */
    int pgrad_flags;           /* SL_PGRAD_* */
    int pending;               /* REDUCE: the node whose reduction is in flight, -1 */
    int loss_done;
    int input_grad;
    int failed;     /* 1: out of memory; 2: the schedule is not a valid step */
    int bad_action; /* the action that made it invalid */
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

/* A value of tensor t (an output or a gradient) in the tensor's dtype. */
static int tensor_value(builder *b, sl_value_kind kind, int t)
{
    int v = new_value(b, kind, t, b->sh->bytes[t]);
    if (!b->failed)
        b->p->values[v].dtype = sl_shapes_dtype(b->sh, t);
    return v;
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
    s->y = s->saved = s->ws = s->dy = s->pgrad = s->prev_pgrad = -1;
    s->pgrad_node = s->prev_node = s->f_y = s->f_dy = -1;
    for (int k = 0; k < SL_MAX_INPUTS; k++)
        s->x[k] = s->dx[k] = s->f_x[k] = s->f_dx[k] = -1;
    return s;
}

/* Saved state that lives only from one forward to the next backward (not
 * BatchNorm's batch statistics, which are kept from the TRAIN pass). */
static int has_transient_saved(const builder *b, int node)
{
    return b->sh->cost[node].saved_bytes &&
           !(b->g->nodes[node].layer->ops->flags & SL_LAYER_SAVED_KEPT);
}

/* One forward of a node: TRAIN the first time, a re-forward after. */
static void emit_forward(builder *b, int node, int bn_rescale)
{
    const sl_graph_node *nd = &b->g->nodes[node];
    const sl_layer_cost *c = &b->sh->cost[node];
    unsigned flags = nd->layer->ops->flags;
    sl_step_kind kind = b->trained[node] ? SL_STEP_REFWD : SL_STEP_FWD;
    int y = tensor_value(b, SL_VALUE_OUTPUT, nd->out);
    int saved = -1, written = 0;
    if (c->saved_bytes) {
        if (kind == SL_STEP_REFWD && (flags & SL_LAYER_SAVED_KEPT)) {
            saved = b->saved[node];
            written = bn_rescale; /* memonger's option recomputes the statistics */
        } else {
            saved = new_value(b, SL_VALUE_SAVED, node, c->saved_bytes);
            written = 1;
        }
    }
    int ws = c->ws_fwd_bytes ? new_value(b, SL_VALUE_WORKSPACE, node, c->ws_fwd_bytes) : -1;
    sl_step *s = new_step(b, kind, node);
    if (!s)
        return;
    s->pass = kind == SL_STEP_REFWD ? SL_PASS_REFORWARD : SL_PASS_TRAIN;
    s->n_in = nd->n_in;
    for (int k = 0; k < nd->n_in; k++)
        s->x[k] = b->cur[nd->in[k]];
    s->y = y;
    s->saved = saved;
    s->saved_written = written;
    s->ws = ws;
    b->cur[nd->out] = y;
    if (saved >= 0)
        b->saved[node] = saved;
    if (kind == SL_STEP_REFWD)
        b->p->refwd_flops = sl_add_sat(b->p->refwd_flops, c->fwd_flops);
    b->trained[node] = 1;
    b->runs[node]++;
}

/* The forward of an inference program (EVAL pass: no saved state). */
static void emit_eval(builder *b, int node)
{
    const sl_graph_node *nd = &b->g->nodes[node];
    const sl_layer_cost *c = &b->sh->cost[node];
    int y = tensor_value(b, SL_VALUE_OUTPUT, nd->out);
    int ws = c->ws_fwd_bytes ? new_value(b, SL_VALUE_WORKSPACE, node, c->ws_fwd_bytes) : -1;
    sl_step *s = new_step(b, SL_STEP_FWD, node);
    if (!s)
        return;
    s->pass = SL_PASS_EVAL;
    s->n_in = nd->n_in;
    for (int k = 0; k < nd->n_in; k++)
        s->x[k] = b->cur[nd->in[k]];
    s->y = y;
    s->ws = ws;
    b->cur[nd->out] = y;
}

size_t sl_node_param_grad_bytes(const sl_graph *g, int node)
{
    const sl_layer *l = g->nodes[node].layer;
    size_t floats = 0;
    for (int k = 0; k < l->n_params; k++)
        if (l->params[k].trainable)
            floats += sl_stride_floats(l->params[k].count);
    return floats * sizeof(float);
}

int sl_graph_param_node(const sl_graph *g, const sl_param_spec *p)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const sl_layer *l = g->nodes[i].layer;
        for (int k = 0; k < l->n_params; k++)
            if (&l->params[k] == p)
                return i;
    }
    return -1;
}

/* Update in backward: step s writes node's parameter gradients; the
 * first write creates their value and zeroes it. */
static void write_param_grads(builder *b, sl_step *s, int node)
{
    if (!b->pgrad_flags || node < 0)
        return;
    size_t bytes = sl_node_param_grad_bytes(b->g, node);
    if (!bytes)
        return;
    if (b->pgrad[node] < 0) {
        b->pgrad[node] = new_value(b, SL_VALUE_PARAM_GRAD, node, bytes);
        s->pgrad_zero = 1;
    }
    s->pgrad = b->pgrad[node];
    s->pgrad_node = node;
}

/* Update in backward: the node's update, once no later step writes its
 * gradients (and they are reduced, with REDUCE). */
static void emit_update(builder *b, int node)
{
    if (!(b->pgrad_flags & SL_PGRAD_UPDATE) || b->pgrad[node] < 0)
        return;
    sl_step *s = new_step(b, SL_STEP_UPDATE, node);
    if (!s)
        return;
    s->pgrad = b->pgrad[node];
    s->pgrad_node = node;
}

/* ZeRO-2: starts reducing node's gradients (node -1: none) and waits for
 * the reduction started before, whose node is then updated. */
static void emit_reduce(builder *b, int node)
{
    int prev = b->pending;
    sl_step *s = new_step(b, SL_STEP_REDUCE, node);
    if (!s)
        return;
    s->pgrad = node >= 0 ? b->pgrad[node] : -1;
    s->pgrad_node = node;
    s->prev_node = prev;
    s->prev_pgrad = prev >= 0 ? b->pgrad[prev] : -1;
    b->pending = node;
    if (prev >= 0)
        emit_update(b, prev);
}

/* After node's last gradient write. */
static void gradients_done(builder *b, int node)
{
    if (!b->pgrad_flags || b->pgrad[node] < 0)
        return;
    if (b->pgrad_flags & SL_PGRAD_REDUCE)
        emit_reduce(b, node);
    else
        emit_update(b, node);
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
            b->grad[t] = tensor_value(b, SL_VALUE_GRAD, t);
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
    write_param_grads(b, s, node);
    if (!b->failed)
        gradients_done(b, node);
}

static int unit_first(const builder *b, int u) { return b->g->top_first_node[u]; }
static int unit_end(const builder *b, int u) { return b->g->top_first_node[u + 1]; }

/* Marks in b->want the tensors the backward steps of unit u read. */
static void want_backward_reads(builder *b, int u)
{
    for (int i = unit_first(b, u); i < unit_end(b, u); i++) {
        const sl_graph_node *nd = &b->g->nodes[i];
        unsigned flags = nd->layer->ops->flags;
        if (flags & SL_LAYER_NEEDS_INPUT)
            for (int k = 0; k < nd->n_in; k++)
                b->want[nd->in[k]] = 1;
        if (flags & SL_LAYER_NEEDS_OUTPUT)
            b->want[nd->out] = 1;
    }
}

/* Marks in b->run the nodes of unit u whose backward reads saved state
 * that is not kept. */
static void run_for_saved_state(builder *b, int u)
{
    for (int i = unit_first(b, u); i < unit_end(b, u); i++)
        if (has_transient_saved(b, i) && !b->saved_kept[i])
            b->run[i] = 1;
}

/* Runs, in order, the nodes of unit u marked in b->run or whose outputs
 * are wanted and not kept, and those these need in turn; all of them the
 * first time (the TRAIN pass has side effects: running statistics,
 * dropout counters). A tensor from before the unit must be kept. */
static void run_wanted(builder *b, int u, int bn_rescale)
{
    int first = unit_first(b, u), end = unit_end(b, u);
    int untrained = !b->trained[first];
    for (int i = end - 1; i >= first; i--) {
        const sl_graph_node *nd = &b->g->nodes[i];
        if (!untrained && !b->run[i] && !(b->want[nd->out] && !b->kept[nd->out]))
            continue;
        b->run[i] = 1;
        for (int k = 0; k < nd->n_in; k++) {
            int t = nd->in[k];
            if (t <= first) { /* produced before this unit */
                if (!b->kept[t])
                    b->failed = 2;
            } else if (!b->kept[t]) {
                b->want[t] = 1;
            }
        }
    }
    for (int i = first; i < end; i++)
        if (b->run[i])
            emit_forward(b, i, bn_rescale);
}

/* Compute-bound nodes: their outputs are what SL_KEEP_CONV keeps. */
static int compute_bound(const builder *b, int node)
{
    return (b->g->nodes[node].layer->ops->flags & SL_LAYER_COMPUTE_BOUND) != 0;
}

/* After a forward of unit u keeping `keep`: the output and the kept
 * tensors stay readable, the rest of what ran is not. */
static void keep_after_forward(builder *b, int u, sl_keep keep)
{
    int first = unit_first(b, u), end = unit_end(b, u);
    int boundary = b->g->top_output[u];
    memset(b->want, 0, (size_t)b->sh->n_tensors);
    if (keep == SL_KEEP_ALL)
        want_backward_reads(b, u);
    for (int i = first; i < end; i++) {
        if (!b->run[i])
            continue;
        int t = b->g->nodes[i].out;
        b->kept[t] = t == boundary || b->want[t] || (keep == SL_KEEP_CONV && compute_bound(b, i));
        if (has_transient_saved(b, i))
            b->saved_kept[i] = keep == SL_KEEP_ALL;
    }
}

static void clear_marks(builder *b, int u)
{
    int first = unit_first(b, u), end = unit_end(b, u);
    memset(b->run + first, 0, (size_t)(end - first));
    memset(b->want, 0, (size_t)b->sh->n_tensors);
}

static void action_forward(builder *b, int u, sl_keep keep, int bn_rescale)
{
    b->want[b->g->top_output[u]] = 1;
    if (keep == SL_KEEP_ALL) {
        want_backward_reads(b, u);
        run_for_saved_state(b, u);
    } else if (keep == SL_KEEP_CONV) {
        for (int i = unit_first(b, u); i < unit_end(b, u); i++)
            if (compute_bound(b, i))
                b->want[b->g->nodes[i].out] = 1;
    }
    run_wanted(b, u, bn_rescale);
    keep_after_forward(b, u, keep);
    clear_marks(b, u);
}

/* The loss step's scratch value, or -1 when it needs none. */
static int loss_workspace(builder *b)
{
    return b->sh->loss_ws_bytes
               ? new_value(b, SL_VALUE_WORKSPACE, b->g->n_nodes - 1, b->sh->loss_ws_bytes)
               : -1;
}

/* Softmax cross-entropy on the logits and their gradient. */
static void emit_loss(builder *b)
{
    int logits = b->g->n_nodes; /* tensor of the last node */
    int dlogits = tensor_value(b, SL_VALUE_GRAD, logits);
    int ws = loss_workspace(b);
    sl_step *s = new_step(b, SL_STEP_LOSS, -1);
    if (!s)
        return;
    s->y = b->cur[logits];
    s->dy = dlogits;
    s->ws = ws;
    if (b->g->head) /* the head adds its tied weight's gradient */
        write_param_grads(b, s, sl_graph_param_node(b->g, b->g->head->weight));
    b->grad[logits] = dlogits;
    b->p->logits = b->cur[logits];
    b->loss_done = 1;
}

/* Inference with a language-model head: its logits (and loss, when the
 * caller gives labels) from the hidden states, in chunks. */
static void emit_head_eval(builder *b)
{
    int ws = loss_workspace(b);
    sl_step *s = new_step(b, SL_STEP_LOSS, -1);
    if (!s)
        return;
    s->y = b->cur[b->g->n_nodes];
    s->ws = ws;
}

static void action_backward(builder *b, int u, int bn_rescale)
{
    int first = unit_first(b, u), end = unit_end(b, u);
    int logits = b->g->n_nodes; /* tensor of the last node */
    int loss = u == b->g->n_top - 1 && !b->loss_done;
    /* Without a LOSS action the loss comes first when the logits are
     * kept (they can die before the re-forward of the unit's interior). */
    if (loss && b->kept[logits])
        emit_loss(b);
    want_backward_reads(b, u);
    run_for_saved_state(b, u);
    if (loss && !b->loss_done)
        b->want[logits] = 1;
    run_wanted(b, u, bn_rescale);
    clear_marks(b, u);
    if (loss && !b->loss_done)
        emit_loss(b);
    if (b->grad[b->g->top_output[u]] < 0) {
        b->failed = 2; /* before the loss, or before the next unit's backward */
        return;
    }
    for (int i = end - 1; i >= first; i--)
        emit_backward(b, i);
    for (int i = first; i < end; i++) {
        b->kept[b->g->nodes[i].out] = 0;
        b->saved_kept[i] = 0;
    }
}

/* Memonger's rescale applies to the layers that run more than once: it
 * needs every forward of a layer to know how many there are. */
static void set_rescale_counts(builder *b)
{
    for (int s = 0; s < b->p->n_steps; s++) {
        sl_step *st = &b->p->steps[s];
        if (st->kind == SL_STEP_FWD || st->kind == SL_STEP_REFWD)
            st->bn_rescale = b->runs[st->node] > 1 ? b->runs[st->node] : 0;
    }
}

static void build_train(builder *b, const sl_segments *seg, int bn_rescale)
{
    sl_action *owned = NULL;
    const sl_action *act = seg->actions;
    int n = seg->n_actions;
    if (!act) {
        if (sl_segments_actions(seg, &owned, &n) != SL_OK) {
            b->failed = 1;
            return;
        }
        act = owned;
    }
    for (int a = 0; a < n && !b->failed; a++) {
        int u = act[a].unit;
        b->bad_action = a;
        if (u < 0 || u >= b->g->n_top) {
            b->failed = 2;
            break;
        }
        if (act[a].kind == SL_ACT_FWD)
            action_forward(b, u, act[a].keep, bn_rescale);
        else if (act[a].kind == SL_ACT_BWD)
            action_backward(b, u, bn_rescale);
        else if (act[a].kind == SL_ACT_DROP)
            b->kept[b->g->top_output[u]] = 0;
        else if (!b->loss_done && b->kept[b->g->n_nodes])
            emit_loss(b);
        else
            b->failed = 2; /* a second loss, or logits not kept */
    }
    free(owned);
    /* Every unit's backward ran, so every node's TRAIN forward did. */
    if (!b->failed && b->grad[b->g->top_output[0]] < 0) {
        b->bad_action = n;
        b->failed = 2;
    }
    if (!b->failed && b->pending >= 0)
        emit_reduce(b, -1); /* the last reduction */
    if (!b->failed && bn_rescale)
        set_rescale_counts(b);
    b->p->input_grad = b->grad[0];
}

/* Mixed precision: the F32 copy of value v for one step (-1 when v is
 * absent or F32); copies[0..*n) pairs each value of the step with its
 * copy, so that a value read twice has one. */
static int f32_copy(builder *b, int node, int v, int copies[][2], int *n)
{
    if (v < 0 || b->p->values[v].dtype != SL_DTYPE_BF16)
        return -1;
    for (int i = 0; i < *n; i++)
        if (copies[i][0] == v)
            return copies[i][1];
    size_t bytes = b->p->values[v].bytes / sizeof(uint16_t) * sizeof(float);
    int f = new_value(b, SL_VALUE_WORKSPACE, node, bytes);
    copies[*n][0] = v;
    copies[*n][1] = f;
    (*n)++;
    return f;
}

/* Whether pair i is the first to name its copy. */
static int copy_first(int copies[][2], int i)
{
    for (int j = 0; j < i; j++)
        if (copies[j][1] == copies[i][1])
            return 0;
    return 1;
}

/* A layer that may run a few images (or rows) at a time does so when its
 * copies together pass SL_F32_COPY_BYTES: the copies then hold one chunk. */
static void chunk_images(builder *b, sl_step *s, int copies[][2], int n)
{
    const sl_graph_node *nd = &b->g->nodes[s->node];
    unsigned flags = nd->layer->ops->flags;
    sl_shape o = b->sh->tensor[nd->out];
    sl_chunk_unit unit = (flags & SL_LAYER_ROW_CHUNKS)       ? SL_CHUNK_ROWS
                         : (flags & SL_LAYER_CHANNEL_CHUNKS) ? SL_CHUNK_CHANNELS
                                                             : SL_CHUNK_IMAGES;
    int64_t units = sl_chunk_units(o, unit);
    if (!(flags & (SL_LAYER_BATCH_CHUNKS | SL_LAYER_ROW_CHUNKS | SL_LAYER_CHANNEL_CHUNKS)) ||
        units < 2 || units > INT_MAX || n == 0)
        return;
    /* A chunk of channels is strided: every operand must have a copy. */
    if (unit == SL_CHUNK_CHANNELS) {
        if ((s->y >= 0 && s->f_y < 0) || (s->dy >= 0 && s->f_dy < 0))
            return;
        for (int k = 0; k < SL_MAX_INPUTS; k++)
            if ((s->x[k] >= 0 && s->f_x[k] < 0) || (s->dx[k] >= 0 && s->f_dx[k] < 0))
                return;
    }
    int images = (int)units;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (copy_first(copies, i)) /* a shared copy once */
            total += b->p->values[copies[i][1]].bytes;
    size_t per = total / (size_t)images;
    size_t cap = b->sh->f32_copy_bytes ? b->sh->f32_copy_bytes : SL_F32_COPY_BYTES;
    if (total <= cap || per == 0)
        return;
    size_t chunk = cap / per;
    if (chunk < 1)
        chunk = 1;
    s->f_chunk = (int)chunk;
    s->f_unit = unit;
    for (int i = 0; i < n; i++) {
        sl_value *v = &b->p->values[copies[i][1]];
        if (copy_first(copies, i))
            v->bytes = v->bytes / (size_t)images * chunk;
    }
}

/* Gives every layer step its operands' F32 copies (sl_step's f_ fields).
 * A layer that may run in place does so on the copies too: a forward's
 * output copy is its input's, a backward's dx[0] copy is dy's (unless it
 * accumulates), which the layer computes the same bits either way. */
static void add_f32_copies(builder *b)
{
    for (int i = 0; i < b->p->n_steps && !b->failed; i++) {
        sl_step *s = &b->p->steps[i];
        if (!sl_step_runs_layer(s))
            continue;
        unsigned flags = b->g->nodes[s->node].layer->ops->flags;
        if (s->kind != SL_STEP_BWD && (flags & SL_LAYER_VIEW))
            continue; /* no kernel: the output is the input's storage */
        if (sl_shapes_native(b->sh, s->node))
            continue; /* the layer reads and writes bf16 itself */
        int copies[2 * SL_MAX_INPUTS + 2][2], n = 0;
        for (int k = 0; k < SL_MAX_INPUTS; k++)
            s->f_x[k] = f32_copy(b, s->node, s->x[k], copies, &n);
        if (s->kind == SL_STEP_BWD) {
            s->f_y = f32_copy(b, s->node, s->y, copies, &n);
            s->f_dy = f32_copy(b, s->node, s->dy, copies, &n);
            int k0 = 0;
            if ((flags & SL_LAYER_BWD_INPLACE) && s->f_dy >= 0 && s->dx[0] >= 0 &&
                !s->accumulate[0] && b->p->values[s->dx[0]].bytes == b->p->values[s->dy].bytes) {
                s->f_dx[0] = s->f_dy;
                copies[n][0] = s->dx[0];
                copies[n][1] = s->f_dy;
                n++;
                k0 = 1;
            }
            for (int k = k0; k < SL_MAX_INPUTS; k++)
                s->f_dx[k] = f32_copy(b, s->node, s->dx[k], copies, &n);
        } else if ((flags & SL_LAYER_FWD_INPLACE) && s->f_x[0] >= 0 &&
                   b->p->values[s->y].dtype == SL_DTYPE_BF16 &&
                   b->p->values[s->y].bytes == b->p->values[s->x[0]].bytes) {
            s->f_y = s->f_x[0];
        } else {
            s->f_y = f32_copy(b, s->node, s->y, copies, &n);
        }
        chunk_images(b, s, copies, n);
    }
}

sl_status sl_program_build(const sl_graph *g, const sl_shapes *sh, const sl_segments *seg,
                           sl_mode mode, int bn_rescale, int input_grad, int input_in_arena,
                           int pgrad_flags, sl_program *out)
{
    sl_program p;
    memset(&p, 0, sizeof p);
    p.mode = mode;
    p.fwd_flops = sh->fwd_flops;
    p.bwd_flops = sh->bwd_flops;
    p.input_grad = -1;
    builder b;
    memset(&b, 0, sizeof b);
    b.p = &p;
    b.g = g;
    b.sh = sh;
    b.input_grad = input_grad;
    b.pgrad_flags = mode == SL_MODE_TRAIN ? pgrad_flags : 0;
    b.pending = -1;
    p.pgrad_flags = b.pgrad_flags;
    size_t nt = (size_t)g->n_nodes + 1;
    b.cur = sl_malloc(nt * sizeof(int));
    b.grad = sl_malloc(nt * sizeof(int));
    b.saved = sl_malloc(nt * sizeof(int));
    b.runs = sl_calloc(nt, sizeof(int));
    b.pgrad = sl_malloc(nt * sizeof(int));
    b.kept = sl_calloc(nt, 1);
    b.saved_kept = sl_calloc(nt, 1);
    b.trained = sl_calloc(nt, 1);
    b.run = sl_calloc(nt, 1);
    b.want = sl_calloc(nt, 1);
    if (!b.cur || !b.grad || !b.saved || !b.runs || !b.kept || !b.saved_kept || !b.trained ||
        !b.run || !b.want || !b.pgrad)
        b.failed = 1;
    else {
        for (size_t t = 0; t < nt; t++)
            b.cur[t] = b.grad[t] = b.saved[t] = b.pgrad[t] = -1;
        int input = tensor_value(&b, SL_VALUE_OUTPUT, 0);
        if (!b.failed) {
            p.values[input].external = !input_in_arena;
            b.cur[0] = input;
            b.kept[0] = 1;
        }
        if (mode == SL_MODE_TRAIN && !b.failed)
            build_train(&b, seg, bn_rescale);
        else if (!b.failed) {
            for (int i = 0; i < g->n_nodes; i++)
                emit_eval(&b, i);
            p.logits = b.cur[g->n_nodes];
            if (g->head && !b.failed)
                emit_head_eval(&b);
        }
        if (sh->dtype && !b.failed)
            add_f32_copies(&b);
    }
    free(b.cur);
    free(b.grad);
    free(b.saved);
    free(b.runs);
    free(b.pgrad);
    free(b.kept);
    free(b.saved_kept);
    free(b.trained);
    free(b.run);
    free(b.want);
    if (b.failed) {
        sl_program_release(&p);
        if (b.failed == 2)
            return sl_set_error(SL_ERR_INVALID_ARG,
                           "invalid schedule: action %d reads a tensor that is not kept, runs a "
                           "backward out of order or leaves a unit without its backward",
                           b.bad_action);
        return sl_set_error(SL_ERR_NOMEM, "out of memory building the step program");
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
