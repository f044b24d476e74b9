/*
 * executor.c — runs a planned program (executor stage): each step's values
 * are pointers into the one arena at their planned offsets; layers call
 * the backend's kernels on them (the run stage, src/cpu and src/cuda).
 * Nothing is allocated here.
 */
#include <string.h>

#include "checkpoint/pipeline.h"

typedef struct runner {
    const sl_program *p;
    const sl_plan *pl;
    char *arena;
    const float *input;
    size_t touched;
} runner;

static void *ptr(runner *r, int v)
{
    if (v < 0)
        return NULL;
    int root = r->pl->alias[v];
    while (r->pl->alias[root] != root)
        root = r->pl->alias[root];
    if (r->p->values[root].external)
        return (void *)r->input;
    size_t end = r->pl->offset[v] + sl_align_up(r->p->values[v].bytes);
    if (end > r->touched)
        r->touched = end;
    return r->arena + r->pl->offset[v];
}

static void zero_param_grads(const sl_graph *g, const sl_exec *ex)
{
    for (int i = 0; i < g->n_nodes; i++) {
        sl_layer *l = g->nodes[i].layer;
        for (int k = 0; k < l->n_params; k++)
            if (l->params[k].trainable && l->params[k].grad)
                ex->be->fill(ex, l->params[k].count, 0.0f, l->params[k].grad);
    }
}

/* Mixed precision (sl_step's f_ fields): a layer step runs on images
 * [r0, r0 + cn) of its batch of n (all of them unless the step runs in
 * chunks). Operand v there: its F32 copy f (widened from v first when
 * `load`), which holds just the chunk, or v's own storage at the chunk. */
typedef struct chunk {
    int r0, cn, n; /* units [r0, r0 + cn) of n */
    sl_chunk_unit unit;
    int images;    /* SL_CHUNK_CHANNELS: the batch's */
} chunk;

/* Shape s as one chunk of c sees it. */
static sl_shape chunk_shape(sl_shape s, chunk c)
{
    if (c.unit == SL_CHUNK_ROWS)
        return sl_shape_nchw(c.cn, s.c, 1, 1);
    if (c.unit == SL_CHUNK_CHANNELS)
        s.c = c.cn;
    else
        s.n = c.cn;
    return s;
}

/* Images and rows are contiguous: the chunk's offset in value v. A chunk
 * of channels is strided (each image's), so it has none: every operand
 * of such a step has a copy, and the layer offsets its saved state. */
static size_t chunk_offset(const runner *r, int v, chunk c)
{
    if (c.unit == SL_CHUNK_CHANNELS)
        return 0;
    return c.r0 ? r->p->values[v].bytes / (size_t)c.n * (size_t)c.r0 : 0;
}

/* The chunk of BF16 value v widened into its F32 copy f (widen), or f
 * rounded back into v. Images and rows are one contiguous run; a chunk of
 * channels is one run per image (channels [r0, r0 + cn) of each), packed
 * in the copy. */
static void cast_chunk(runner *r, const sl_exec *ex, int v, int f, chunk c, int widen)
{
    int runs = c.unit == SL_CHUNK_CHANNELS ? c.images : 1;
    size_t per = r->p->values[v].bytes / sizeof(uint16_t) / (size_t)runs / (size_t)c.n;
    size_t count = (size_t)c.cn * per, stride = (size_t)c.n * per;
    char *bf = (char *)ptr(r, v) + (size_t)c.r0 * per * sizeof(uint16_t);
    char *fl = ptr(r, f);
    for (int i = 0; i < runs; i++) {
        char *at = bf + (size_t)i * stride * sizeof(uint16_t);
        char *cp = fl + (size_t)i * count * sizeof(float);
        if (widen)
            ex->be->cast(ex, count, at, SL_DTYPE_BF16, cp, SL_DTYPE_F32);
        else
            ex->be->cast(ex, count, cp, SL_DTYPE_F32, at, SL_DTYPE_BF16);
    }
}

/* Value v (none: NULL) at the chunk's first image. */
static void *chunk_at(runner *r, int v, chunk c)
{
    return v < 0 ? NULL : (char *)ptr(r, v) + chunk_offset(r, v, c);
}

static void *operand(runner *r, const sl_exec *ex, int v, int f, int load, chunk c)
{
    if (v < 0)
        return NULL;
    if (f < 0)
        return chunk_at(r, v, c);
    if (load)
        cast_chunk(r, ex, v, f, c, 1);
    return ptr(r, f);
}

/* The chunk of F32 copy f rounded into BF16 value v (none when f < 0). */
static void round_back(runner *r, const sl_exec *ex, int v, int f, chunk c)
{
    if (f >= 0)
        cast_chunk(r, ex, v, f, c, 0);
}

/* Whether operand k's copy is operand j's for some j < k. */
static int copy_seen(const int *f, int k)
{
    for (int j = 0; j < k; j++)
        if (f[j] == f[k])
            return 1;
    return 0;
}

/* The args' chunk fields (sl_fwd_args). */
static void chunk_args_set(int *first_image, int *images, int *first_channel, int *channels,
                           const sl_shapes *sh, const sl_graph_node *nd, chunk c)
{
    sl_shape o = sh->tensor[nd->out];
    *first_image = c.unit == SL_CHUNK_IMAGES ? c.r0 : 0;
    *images = c.unit == SL_CHUNK_IMAGES ? c.n : o.n;
    *first_channel = c.unit == SL_CHUNK_CHANNELS ? c.r0 : 0;
    *channels = o.c;
}

static void forward_chunk(runner *r, const sl_graph *g, const sl_shapes *sh, const sl_step *st,
                          sl_context *ctx, const sl_exec *ex, chunk c, int relu_after)
{
    const sl_graph_node *nd = &g->nodes[st->node];
    sl_fwd_args a;
    memset(&a, 0, sizeof a);
    a.pass = st->pass;
    a.n_in = nd->n_in;
    for (int k = 0; k < nd->n_in; k++) {
        int f = st->f_x[k];
        a.x[k] = operand(r, ex, st->x[k], f, f >= 0 && !copy_seen(st->f_x, k), c);
        a.in[k] = chunk_shape(sh->tensor[nd->in[k]], c);
    }
    a.y = operand(r, ex, st->y, st->f_y, 0, c);
    a.out = chunk_shape(sh->tensor[nd->out], c);
    a.saved = chunk_at(r, st->saved, c);
    a.ws = ptr(r, st->ws);
    a.ctx = ctx;
    a.bn_rescale_momentum = st->bn_rescale;
    a.bf16 = sl_shapes_native(sh, st->node);
    a.relu_after = relu_after;
    chunk_args_set(&a.first_image, &a.images, &a.first_channel, &a.channels, sh, nd, c);
    nd->layer->ops->forward(nd->layer, ex, &a);
    round_back(r, ex, st->y, st->f_y, c);
}

static void backward_chunk(runner *r, const sl_graph *g, const sl_shapes *sh, const sl_step *st,
                           sl_context *ctx, const sl_exec *ex, chunk c, int relu_after)
{
    const sl_graph_node *nd = &g->nodes[st->node];
    sl_bwd_args a;
    memset(&a, 0, sizeof a);
    a.n_in = nd->n_in;
    for (int k = 0; k < nd->n_in; k++) {
        int f = st->f_x[k];
        a.x[k] = operand(r, ex, st->x[k], f, f >= 0 && !copy_seen(st->f_x, k), c);
        a.in[k] = chunk_shape(sh->tensor[nd->in[k]], c);
        a.accumulate[k] = st->accumulate[k];
    }
    a.y = operand(r, ex, st->y, st->f_y, 1, c);
    a.out = chunk_shape(sh->tensor[nd->out], c);
    a.dy = operand(r, ex, st->dy, st->f_dy, 1, c);
    /* A gradient copy starts as the gradient when its first write adds;
     * dx[0]'s copy may be dy's (in place), already loaded. */
    for (int k = 0; k < nd->n_in; k++) {
        int f = st->f_dx[k];
        a.dx[k] = operand(r, ex, st->dx[k], f,
                          f >= 0 && f != st->f_dy && !copy_seen(st->f_dx, k) && st->accumulate[k],
                          c);
    }
    a.saved = chunk_at(r, st->saved, c);
    a.ws = ptr(r, st->ws);
    a.ctx = ctx;
    a.bf16 = sl_shapes_native(sh, st->node);
    a.relu_after = relu_after;
    chunk_args_set(&a.first_image, &a.images, &a.first_channel, &a.channels, sh, nd, c);
    nd->layer->ops->backward(nd->layer, ex, &a);
    for (int k = 0; k < nd->n_in; k++)
        if (!copy_seen(st->f_dx, k))
            round_back(r, ex, st->dx[k], st->f_dx[k], c);
}

/* A layer step: at once, or a chunk of images or rows at a time (f_chunk);
 * relu_after: with the ReLU step joined to it (never in chunks). */
static void run_layer_step(runner *r, const sl_graph *g, const sl_shapes *sh, const sl_step *st,
                           sl_context *ctx, const sl_exec *ex, int relu_after)
{
    sl_shape o = sh->tensor[g->nodes[st->node].out];
    sl_chunk_unit unit = st->f_chunk > 0 ? st->f_unit : SL_CHUNK_IMAGES;
    int n = (int)sl_chunk_units(o, unit); /* the program checked it fits */
    int per = st->f_chunk > 0 && st->f_chunk < n ? st->f_chunk : n;
    for (int r0 = 0; r0 < n; r0 += per) {
        chunk c = {r0, n - r0 < per ? n - r0 : per, n, unit, o.n};
        if (st->kind == SL_STEP_BWD)
            backward_chunk(r, g, sh, st, ctx, ex, c, relu_after);
        else
            forward_chunk(r, g, sh, st, ctx, ex, c, relu_after);
    }
}

/* Update in backward: points the gradients of the step's node's
 * trainable parameters into its PARAM_GRAD value, zeroed at the first
 * write. */
static void bind_param_grads(runner *r, const sl_graph *g, const sl_step *st, const sl_exec *ex)
{
    if (st->pgrad < 0 || st->kind == SL_STEP_REDUCE)
        return;
    float *base = ptr(r, st->pgrad);
    if (st->pgrad_zero)
        ex->be->fill(ex, r->p->values[st->pgrad].bytes / sizeof(float), 0.0f, base);
    sl_layer *l = g->nodes[st->pgrad_node].layer;
    size_t off = 0;
    for (int k = 0; k < l->n_params; k++)
        if (l->params[k].trainable) {
            l->params[k].grad = base + off;
            off += sl_stride_floats(l->params[k].count);
        }
}

/* After a run with the update in backward no gradient is held. */
static void unbind_param_grads(const sl_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        sl_layer *l = g->nodes[i].layer;
        for (int k = 0; k < l->n_params; k++)
            l->params[k].grad = NULL;
    }
}

/* The language-model head's loss step: in training the loss, the hidden
 * states' gradient and the tied weight's; in inference the logits and,
 * with labels, the loss. */
static void run_head(runner *r, const sl_graph *g, const sl_shapes *sh, const sl_step *st,
                     const sl_exec *ex, sl_run_io *io)
{
    sl_shape ls = sh->tensor[g->n_nodes];
    int rows = ls.n * ls.h * ls.w;
    /* the loss and hits reach io by the step's sync on a device */
    sl_lm_head_run(g->head, ex, rows, ptr(r, st->y), io->labels, ptr(r, st->dy),
                   io->logits_out, ptr(r, st->ws), &io->loss, &io->correct, &io->counted,
                   sh->head_bf16);
}

/* Values a and b at one place of the arena. */
static int same_storage(const sl_program *p, const sl_plan *pl, int a, int b)
{
    return a >= 0 && b >= 0 && !p->values[a].external && !p->values[b].external &&
           pl->offset[a] == pl->offset[b] && p->values[a].bytes == p->values[b].bytes;
}

/* A layer step that runs at once on the layer's own float storage. */
static int plain_step(const sl_shapes *sh, const sl_step *st)
{
    if (st->f_chunk > 0 || st->f_y >= 0 || st->f_dy >= 0 || sl_shapes_native(sh, st->node))
        return 0;
    for (int k = 0; k < st->n_in; k++)
        if (st->f_x[k] >= 0 || st->f_dx[k] >= 0)
            return 0;
    return 1;
}

int sl_program_joins_relu(const sl_graph *g, const sl_shapes *sh, const sl_program *p,
                          const sl_plan *pl, int s)
{
    if (s < 0 || s + 1 >= p->n_steps)
        return 0;
    const sl_step *a = &p->steps[s], *b = &p->steps[s + 1];
    if (a->kind != b->kind || !sl_step_runs_layer(a))
        return 0;
    int fwd = a->kind != SL_STEP_BWD;
    const sl_step *layer = fwd ? a : b, *relu = fwd ? b : a;
    const sl_graph_node *ln = &g->nodes[layer->node], *rn = &g->nodes[relu->node];
    if (!(ln->layer->ops->flags & SL_LAYER_JOINS_RELU) || rn->layer->ops != &sl_relu_ops ||
        rn->n_in != 1 || rn->in[0] != ln->out || !plain_step(sh, a) || !plain_step(sh, b))
        return 0;
    if (fwd) /* the ReLU in place on the layer's output */
        return a->pass == b->pass && same_storage(p, pl, a->y, b->x[0]) &&
               same_storage(p, pl, b->x[0], b->y);
    /* the ReLU's dx over its dy, which the layer reads as its own dy */
    return relu->accumulate[0] == 0 && same_storage(p, pl, relu->dy, relu->dx[0]) &&
           same_storage(p, pl, relu->dx[0], layer->dy);
}

/* Debug: fills every storage whose life ended at `step` with NaN, so a
 * read the plan did not foresee sees garbage instead of a stale value. */
static void poison_dead(const sl_program *p, const sl_plan *pl, char *arena, int step)
{
    for (int v = 0; v < p->n_values; v++)
        if (pl->alias[v] == v && !p->values[v].external && pl->last[v] == step)
            memset(arena + pl->offset[v], 0xff, sl_align_up(p->values[v].bytes));
}

int sl_step_graphable(const sl_graph *g, const sl_program *p, int draws, int s)
{
    const sl_step *st = &p->steps[s];
    if (!sl_step_runs_layer(st))
        return 0;
    const sl_layer_ops *ops = g->nodes[st->node].layer->ops;
    return (ops->flags & SL_LAYER_GRAPH_SAFE) ||
           (draws && (ops->flags & SL_LAYER_GRAPH_DRAWS) && ops->redraw);
}

int sl_program_graph_ranges(const sl_graph *g, const sl_program *p, int draws, int *lo, int *hi,
                            int cap)
{
    int n = 0;
    for (int s = 0; s < p->n_steps;) {
        int e = s;
        while (e < p->n_steps && sl_step_graphable(g, p, draws, e))
            e++;
        if (e - s >= 2 && n < cap) {
            lo[n] = s;
            hi[n] = e;
            n++;
        }
        s = e > s ? e : s + 1;
    }
    return n;
}

void sl_graph_cache_clear(sl_graph_cache *gc)
{
    for (int k = 0; k < SL_GRAPH_RANGES; k++) {
        if (gc->exec[k] && gc->be && gc->be->graph_free)
            gc->be->graph_free(gc->be, gc->exec[k]);
        gc->exec[k] = NULL;
        gc->failed[k] = 0;
    }
    gc->touched = 0;
    gc->runs = 0;
}

void sl_graph_cache_release(sl_graph_cache *gc)
{
    sl_graph_cache_clear(gc);
    if (gc->slot && gc->be)
        gc->be->free(gc->be, gc->slot);
    memset(gc, 0, sizeof *gc);
}

/* What one run carries from step to step. */
typedef struct run_state {
    int grads_zeroed;
    int skip, relu_after; /* step s: a forward ReLU joined to s - 1; a backward given
                             the backward ReLU at s - 1 */
    int can_join;         /* BatchNorm and the ReLU after it as one step (the backend can) */
    int poison;
} run_state;

static void run_step(runner *r, const sl_graph *g, const sl_shapes *sh, sl_context *ctx,
                     const sl_exec *ex, sl_run_io *io, run_state *rs, int s)
{
    const sl_program *p = r->p;
    const sl_plan *pl = r->pl;
    const sl_step *st = &p->steps[s];
    int join = rs->can_join && !rs->skip && !rs->relu_after &&
               sl_program_joins_relu(g, sh, p, pl, s);
    /* Before the first write of a parameter gradient: a backward, or
     * the loss of a language-model head (it adds its weight's). */
    if (!rs->grads_zeroed && p->mode == SL_MODE_TRAIN &&
        (st->kind == SL_STEP_BWD || st->kind == SL_STEP_LOSS)) {
        if (!io->keep_grads && !p->pgrad_flags) /* accumulating micro-batches */
            zero_param_grads(g, ex);
        rs->grads_zeroed = 1;
    }
    bind_param_grads(r, g, st, ex);
    switch (st->kind) {
    case SL_STEP_FWD:
    case SL_STEP_REFWD:
        if (!rs->skip)
            run_layer_step(r, g, sh, st, ctx, ex, join);
        break;
    case SL_STEP_LOSS: {
        sl_shape ls = sh->tensor[g->n_nodes];
        if (g->head) {
            run_head(r, g, sh, st, ex, io);
            break;
        }
        if (io->logits_out)
            ex->be->download(ex, io->logits_out, ptr(r, st->y), p->values[st->y].bytes);
        if (io->dy_in)
            ex->be->upload(ex, ptr(r, st->dy), io->dy_in, sl_shape_count(ls) * sizeof(float));
        else
            ex->be->softmax_xent(ex, ls.n, ls.c * ls.h * ls.w, ptr(r, st->y), io->labels,
                                 ptr(r, st->dy), &io->loss, &io->correct, ptr(r, st->ws));
        break;
    }
    case SL_STEP_BWD:
        if (!join) /* joined: the ReLU's backward runs in the next step's */
            run_layer_step(r, g, sh, st, ctx, ex, rs->relu_after);
        break;
    case SL_STEP_UPDATE:
        if (io->update)
            io->update(io->update_user, st->node);
        break;
    case SL_STEP_REDUCE:
        if (io->reduce)
            io->reduce(io->reduce_user, st->node, st->pgrad >= 0 ? ptr(r, st->pgrad) : NULL,
                       st->prev_node, st->prev_pgrad >= 0 ? ptr(r, st->prev_pgrad) : NULL);
        break;
    }
    rs->skip = join && st->kind != SL_STEP_BWD;
    rs->relu_after = join && st->kind == SL_STEP_BWD;
    if (rs->poison)
        poison_dead(p, pl, r->arena, s);
    if (io->after_step)
        io->after_step(io->after_step_user, s);
}

/* Whether graph range k holds a backward step (the first of a training
 * run zeroes the gradients first, which stays outside recordings). */
static int has_backward(const sl_program *p, const sl_graph_cache *gc, int k)
{
    for (int s = gc->lo[k]; s < gc->hi[k]; s++)
        if (p->steps[s].kind == SL_STEP_BWD)
            return 1;
    return 0;
}

/* Whether step s of a training program runs a layer that draws
 * (SL_LAYER_GRAPH_DRAWS; evaluation draws nothing). */
static int step_draws(const sl_graph *g, const sl_program *p, int s)
{
    return p->mode == SL_MODE_TRAIN && sl_step_runs_layer(&p->steps[s]) &&
           (g->nodes[p->steps[s].node].layer->ops->flags & SL_LAYER_GRAPH_DRAWS);
}

/* Whether graph range k runs a layer that draws (its recording reads the
 * counter offset). */
static int range_draws(const sl_graph *g, const sl_program *p, const sl_graph_cache *gc, int k)
{
    for (int s = gc->lo[k]; s < gc->hi[k]; s++)
        if (step_draws(g, p, s))
            return 1;
    return 0;
}

/* Graph range k of io->graphs at step lo[k] of a run that began at
 * counter run_base: replays its recording, or records it (from the
 * cache's second run on) and replays that; 1 when the range's work is
 * queued, 0 when the caller must queue its steps itself (not recorded
 * yet, or recording failed). No range holds the first gradient write
 * (the caller checks) or half of a joined pair (joins pair layer steps,
 * and a range holds every such step around it). A range with drawing
 * layers is recorded reading the cache's counter slot, which is set to
 * run_base minus the recording run's before each launch (when it
 * changed); at a replay, their TRAIN forwards' draws are done again on
 * the host (redraw), in step order. */
static int run_range(runner *r, const sl_graph *g, const sl_shapes *sh, sl_context *ctx,
                     const sl_exec *ex, sl_run_io *io, run_state *rs, int k, uint64_t run_base)
{
    sl_graph_cache *gc = io->graphs;
    const sl_backend *be = ex->be;
    const sl_program *p = r->p;
    int draws = range_draws(g, p, gc, k);
    if (!gc->exec[k]) {
        if (gc->failed[k] || gc->runs < 1)
            return 0;
        sl_exec rec = *ex;
        if (draws) {
            if (!gc->slot) {
                gc->slot = be->alloc(be, sizeof(uint64_t), "the graphs' counter offset");
                gc->be = be;
                gc->slot_set = 0;
            }
            if (!gc->slot) { /* out of device memory: this range runs step by step */
                gc->failed[k] = 1;
                return 0;
            }
            rec.counter_delta = gc->slot;
        }
        int refused = be->graph_begin(&rec);
        if (refused) { /* 1: never; 2: not in this run */
            gc->failed[k] = refused == 1;
            return 0;
        }
        run_state before = *rs;
        size_t touched = r->touched;
        uint64_t counter = ctx->dropout_counter;
        for (int s = gc->lo[k]; s < gc->hi[k]; s++)
            run_step(r, g, sh, ctx, &rec, io, rs, s);
        gc->exec[k] = be->graph_end(&rec);
        gc->be = be;
        if (!gc->exec[k]) { /* nothing ran: the caller queues the steps */
            gc->failed[k] = 1;
            *rs = before;
            r->touched = touched;
            ctx->dropout_counter = counter; /* the steps run again, drawing again */
            return 0;
        }
        gc->base[k] = run_base;
        if (r->touched > gc->touched)
            gc->touched = r->touched;
    } else {
        rs->skip = rs->relu_after = 0; /* no join leaves a range */
        if (gc->touched > r->touched)
            r->touched = gc->touched;
        for (int s = gc->lo[k]; draws && s < gc->hi[k]; s++)
            if (step_draws(g, p, s) && p->steps[s].kind == SL_STEP_FWD &&
                p->steps[s].pass == SL_PASS_TRAIN) {
                sl_layer *l = g->nodes[p->steps[s].node].layer;
                l->ops->redraw(l, ctx);
                gc->redraws++;
            }
        gc->replays++;
    }
    if (draws) {
        uint64_t delta = run_base - gc->base[k]; /* modulo 2^64, as the kernels add it */
        if (!gc->slot_set || gc->slot_value != delta) {
            be->upload(ex, gc->slot, &delta, sizeof delta);
            gc->slot_value = delta;
            gc->slot_set = 1;
        }
    }
    be->graph_launch(ex, gc->exec[k]);
    return 1;
}

void sl_execute(const sl_graph *g, const sl_shapes *sh, const sl_program *p, const sl_plan *pl,
                char *arena, sl_context *ctx, const sl_exec *ex, sl_run_io *io)
{
    runner r = {p, pl, arena, io->input, 0};
    run_state rs = {0, 0, 0, sl_backend_joins_bn_relu(ex->be), io->poison && ex->be->host_memory};
    if (rs.poison)
        memset(arena, 0xff, pl->arena_bytes);
    /* Value 0 is the input: on a device backend it lives in the arena. */
    if (!p->values[0].external)
        ex->be->upload(ex, ptr(&r, 0), io->input, p->values[0].bytes);
    sl_graph_cache *gc = io->graphs;
    const uint64_t run_base = ctx->dropout_counter; /* drawing ranges' offsets count from it */
    if (gc && (!ex->be->graph_begin || io->after_step || io->update || io->reduce || rs.poison ||
               p->pgrad_flags))
        gc = NULL;
    int k = 0; /* the next graph range */
    for (int s = 0; s < p->n_steps;) {
        while (gc && k < gc->n && gc->lo[k] < s)
            k++;
        if (gc && k < gc->n && gc->lo[k] == s && !rs.skip && !rs.relu_after &&
            (rs.grads_zeroed || p->mode != SL_MODE_TRAIN || !has_backward(p, gc, k)) &&
            run_range(&r, g, sh, ctx, ex, io, &rs, k, run_base)) {
            s = gc->hi[k];
            continue;
        }
        run_step(&r, g, sh, ctx, ex, io, &rs, s);
        s++;
    }
    if (gc)
        gc->runs++;
    if (io->logits_out && p->mode == SL_MODE_INFER && !g->head)
        ex->be->download(ex, io->logits_out, ptr(&r, p->logits), p->values[p->logits].bytes);
    if (io->dx_out && p->input_grad >= 0)
        ex->be->download(ex, io->dx_out, ptr(&r, p->input_grad), p->values[p->input_grad].bytes);
    if (p->pgrad_flags)
        unbind_param_grads(g);
    io->arena_touched = r.touched;
}
