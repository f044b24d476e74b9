/*
 * optimizer.c — the optimizer of a network (net stage): SGD, Adam and
 * AdamW options, their state, and the update after a backward (with
 * gradient accumulation and global-norm clipping); the warmup + cosine
 * learning rate. The layout of
 * the optimizer state is defined here once (sl_optimizer_state_blocks and
 * sl_net_visit_optimizer_state); the update and training snapshots
 * (io/snapshot.c) both go through it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

sl_optimizer_options sl_optimizer_sgd(float lr, float momentum, float weight_decay, int nesterov)
{
    sl_optimizer_options o = {SL_OPT_SGD, lr, momentum, nesterov, weight_decay, 0.9f, 0.999f, 1e-8f};
    return o;
}

sl_optimizer_options sl_optimizer_adam(float lr, float beta1, float beta2, float eps,
                                       float weight_decay)
{
    sl_optimizer_options o = {SL_OPT_ADAM, lr, 0.0f, 0, weight_decay, beta1, beta2, eps};
    return o;
}

sl_optimizer_options sl_optimizer_adamw(float lr, float beta1, float beta2, float eps,
                                        float weight_decay)
{
    sl_optimizer_options o = {SL_OPT_ADAMW, lr, 0.0f, 0, weight_decay, beta1, beta2, eps};
    return o;
}

/* The gradient norm's partial sums, on the device and on the host. */
#define NORM_SLOTS_BYTES (SL_SUM_SQUARES_SLOTS * sizeof(double))

static int is_adam(sl_optimizer_kind k) { return k == SL_OPT_ADAM || k == SL_OPT_ADAMW; }

static sl_status check_optimizer(const sl_optimizer_options *o)
{
    if (o->kind != SL_OPT_SGD && !is_adam(o->kind))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_optimizer: unknown optimizer kind %d",
                            (int)o->kind);
    if (!(o->lr >= 0.0f) || !(o->weight_decay >= 0.0f) || !isfinite(o->lr))
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_net_set_optimizer: lr %g and weight_decay %g must be finite and >= 0",
                       o->lr, o->weight_decay);
    if (o->kind == SL_OPT_SGD && (!(o->momentum >= 0.0f) || (o->nesterov && o->momentum == 0.0f)))
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_net_set_optimizer: momentum %g must be >= 0 (and > 0 for Nesterov)",
                            o->momentum);
    if (is_adam(o->kind) &&
        !(o->beta1 >= 0.0f && o->beta1 < 1.0f && o->beta2 >= 0.0f && o->beta2 < 1.0f && o->eps > 0.0f))
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_net_set_optimizer: Adam and AdamW need betas in [0, 1) and eps > 0 (got %g, %g, %g)",
                       o->beta1, o->beta2, o->eps);
    return SL_OK;
}

/* ---- the state layout, in one place ---- */

int sl_optimizer_state_blocks(const sl_optimizer_options *o, const char *names[SL_OPT_STATE_MAX])
{
    if (is_adam(o->kind)) {
        names[0] = "exp_avg";
        names[1] = "exp_avg_sq";
        return 2;
    }
    names[0] = "momentum_buffer";
    names[1] = NULL;
    return o->momentum != 0.0f ? 1 : 0;
}

void sl_net_visit_optimizer_state(sl_net *net, sl_opt_state_visit visit, void *user)
{
    const char *names[SL_OPT_STATE_MAX];
    int per = sl_optimizer_state_blocks(&net->optim.opt, names);
    size_t so = 0;
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        if (!p->trainable)
            continue;
        size_t stride = sl_stride_floats(p->count);
        float *blocks[SL_OPT_STATE_MAX] = {NULL, NULL};
        for (int k = 0; k < per; k++)
            blocks[k] = net->opt_block + so + (size_t)k * stride;
        visit(user, i, per, blocks);
        so += stride * (size_t)per;
    }
}

sl_status sl_net_set_optimizer(sl_net *net, const sl_optimizer_options *opts)
{
    if (!net || !opts)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_optimizer: network or options are NULL");
    sl_net_mark m = sl_net_mark_now(net);
    sl_status st = check_optimizer(opts);
    if (st == SL_OK)
        st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    /* Joined with ZeRO-1 (src/dist): the state of this rank's slice. */
    int sharded = net->dp.shard && (net->dp.comm || net->dp.plan_ranks > 1);
    size_t floats = sl_optimizer_state_floats(net, opts, sharded);
    float *state = NULL;
    const sl_backend *be = net->ctx->backend;
    /* Before the parameters are allocated, the state waits for them
     * (sl_net_materialize allocates it, after checking all three fit);
     * once they are, the new state is allocated next to the old. */
    if (floats && net->param_block) {
        st = sl_net_check_fixed_memory(net, floats * sizeof(float), "the new optimizer state",
                                       "sl_net_set_optimizer");
        if (st == SL_OK && !(state = be->alloc(be, floats * sizeof(float), "optimizer state")))
            st = SL_ERR_NOMEM;
        if (st != SL_OK)
            return sl_net_undo_first_use(net, m, st);
    }
    /* The update's gradient norm: allocated here, so that an update
     * (which has already run its forward and backward inside
     * sl_net_train_step) never fails for memory. */
    if (!net->optim.norm_slots) {
        double *slots = be->alloc(be, NORM_SLOTS_BYTES, "the gradient norm's partial sums");
        double *host = slots ? sl_alloc(NORM_SLOTS_BYTES, "the gradient norm's partial sums "
                                                          "on the host") : NULL;
        if (!host) {
            be->free(be, slots);
            be->free(be, state);
            return sl_net_undo_first_use(net, m, SL_ERR_NOMEM);
        }
        net->optim.norm_slots = slots;
        net->optim.norm_host = host;
    }
    be->free(be, net->opt_block);
    net->opt_block = state;
    net->opt_floats = floats;
    net->optim.opt = *opts;
    net->optim.has_optimizer = 1;
    net->dp.shard = sharded ? net->dp.shard : 0; /* 1 or 2 (ZeRO-2 also shards the gradients) */
    /* Budget schedules count optimizer state: plan again. */
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    net->optim.steps = 0;
    return SL_OK;
}

sl_status sl_net_set_lr(sl_net *net, float lr)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_lr: network is NULL");
    if (!net->optim.has_optimizer)
        return sl_set_error(SL_ERR_STATE, "sl_net_set_lr: no optimizer set (call sl_net_set_optimizer)");
    if (!(lr >= 0.0f) || !isfinite(lr))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_lr: lr %g must be finite and >= 0", lr);
    net->optim.opt.lr = lr;
    return SL_OK;
}

/* Clipping and accumulation need every gradient kept whole: refused with
 * the update in backward and under ZeRO-2 (`what` says why). */
static sl_status needs_whole_gradients(const sl_net *net, const char *fn, const char *what)
{
    if (net->dp.shard == 2 && net->dp.comm)
        return sl_set_error(SL_ERR_STATE, "%s: the gradients are sharded over the ranks and "
                            "reduced as backward makes them (ZeRO-2), and %s; not supported "
                            "there", fn, what);
    if (net->optim.update_in_backward)
        return sl_set_error(SL_ERR_STATE, "%s: the update in backward is on, and %s; turn it off "
                            "first (sl_net_set_update_in_backward(net, 0))", fn, what);
    return SL_OK;
}

sl_status sl_net_set_grad_clip(sl_net *net, float max_norm)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_grad_clip: network is NULL");
    if (!(max_norm >= 0.0f) || !isfinite(max_norm))
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_net_set_grad_clip: max_norm %g must be finite and >= 0 (0: off)",
                            max_norm);
    if (max_norm > 0.0f) {
        sl_status st = needs_whole_gradients(net, "sl_net_set_grad_clip",
                                             "global-norm clipping needs every gradient at once");
        if (st != SL_OK)
            return st;
    }
    net->optim.grad_clip = max_norm;
    return SL_OK;
}

sl_status sl_net_last_grad_norm(const sl_net *net, float *norm)
{
    if (!net || !norm)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_last_grad_norm: network or norm is NULL");
    if (net->optim.last_grad_norm < 0.0f)
        return sl_set_error(SL_ERR_STATE, "sl_net_last_grad_norm: no update has measured a norm yet");
    *norm = net->optim.last_grad_norm;
    return SL_OK;
}

sl_status sl_net_set_grad_accumulation(sl_net *net, int micro_batches)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_grad_accumulation: network is NULL");
    if (micro_batches < 1)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "sl_net_set_grad_accumulation: %d micro-batches; must be >= 1",
                            micro_batches);
    if (micro_batches > 1) {
        sl_status st = needs_whole_gradients(net, "sl_net_set_grad_accumulation",
                                             "accumulating micro-batches needs them kept");
        if (st != SL_OK)
            return st;
    }
    net->optim.accum = micro_batches;
    net->optim.micro = 0;
    return SL_OK;
}

float sl_lr_warmup_cosine(int64_t step, int64_t warmup, int64_t total, float lr_max, float lr_min)
{
    if (step < warmup)
        return (float)((double)lr_max * (double)(step + 1) / (double)warmup);
    if (step >= total)
        return lr_min;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    return (float)((double)lr_min + cosine * ((double)lr_max - (double)lr_min));
}

/* Each trainable gradient's squares into the fixed slots (backend.h's
 * sum_squares), tensors in parameter order: in one list where the backend
 * takes lists (a few launches on a GPU), else one call per tensor. */
static void grad_squares(sl_net *net, const sl_exec *ex)
{
    const sl_backend *be = ex->be;
    /* norm_slots: see set_optimizer; +0.0 bits */
    be->fill(ex, NORM_SLOTS_BYTES / sizeof(float), 0.0f, (float *)net->optim.norm_slots);
    const float **x = be->sum_squares_list ? malloc((size_t)net->n_params * sizeof *x) : NULL;
    size_t *count = x ? malloc((size_t)net->n_params * sizeof *count) : NULL;
    int n = 0;
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        if (!p->trainable || !p->grad)
            continue;
        if (count) {
            x[n] = p->grad;
            count[n++] = p->count;
        } else {
            be->sum_squares(ex, p->count, p->grad, net->optim.norm_slots);
        }
    }
    if (count && n)
        be->sum_squares_list(ex, n, x, count, net->optim.norm_slots);
    free(x);
    free(count);
}

static double slots_norm(const double *host)
{
    double total = 0.0;
    for (int t = 0; t < SL_SUM_SQUARES_SLOTS; t++)
        total += host[t];
    return sqrt(total);
}

/* The norm of all trainable gradients, the slots summed in order. */
static sl_status grad_norm(sl_net *net, const sl_exec *ex, double *out)
{
    grad_squares(net, ex);
    ex->be->download(ex, net->optim.norm_host, net->optim.norm_slots, NORM_SLOTS_BYTES);
    sl_status st = ex->be->sync(ex);
    if (st != SL_OK)
        return st;
    *out = slots_norm(net->optim.norm_host);
    return SL_OK;
}

typedef struct update_ctx {
    sl_net *net;
    sl_exec ex;
    int64_t step;
    float grad_scale;
    /* with room for one span per parameter: the ranges gathered for one
     * list update (flush_spans); NULL: each range updated at once */
    sl_update_span *spans;
    int n_spans;
} update_ctx;

/* One span's update (the optimizer's rule over its floats). */
static void update_span(update_ctx *u, const sl_update_span *sp)
{
    const sl_optimizer_options *o = &u->net->optim.opt;
    if (o->kind == SL_OPT_SGD)
        u->ex.be->sgd_update(&u->ex, sp->count, sp->w, sp->g, sp->m, o->lr, o->momentum,
                             sp->weight_decay, o->nesterov, u->step == 1, u->grad_scale);
    else
        u->ex.be->adam_update(&u->ex, sp->count, sp->w, sp->g, sp->m, sp->v, o->lr, o->beta1,
                              o->beta2, o->eps, sp->weight_decay, o->kind == SL_OPT_ADAMW,
                              u->step, u->grad_scale);
}

/* Floats [off, off + n) of one parameter (the element kernels work on
 * any range; the whole parameter, or a ZeRO-1 shard's piece of it):
 * gathered into the list when there is one, else updated at once. */
static void update_range(update_ctx *u, int param, size_t off, size_t n, const float *grad,
                         float *const *blocks)
{
    const sl_optimizer_options *o = &u->net->optim.opt;
    sl_param_spec *p = u->net->params[param].spec;
    /* AdamW decays only >= 2-d parameters (sl_optimizer_adamw). */
    float wd = o->kind == SL_OPT_ADAMW && p->ndim < 2 ? 0.0f : o->weight_decay;
    sl_update_span sp = {p->data + off, grad, blocks[0], o->kind == SL_OPT_SGD ? NULL : blocks[1],
                         n, wd};
    if (u->spans)
        u->spans[u->n_spans++] = sp;
    else
        update_span(u, &sp);
}

/* The gathered spans: one list call where the backend has one, else one
 * update per span (the same arithmetic either way). */
static void flush_spans(update_ctx *u)
{
    const sl_optimizer_options *o = &u->net->optim.opt;
    const sl_backend *be = u->ex.be;
    sl_update_span *sp = u->spans;
    int n = u->n_spans, first = u->step == 1, decoupled = o->kind == SL_OPT_ADAMW;
    u->n_spans = 0;
    if (o->kind == SL_OPT_SGD && be->sgd_update_list && n)
        be->sgd_update_list(&u->ex, n, sp, o->lr, o->momentum, o->nesterov, first, u->grad_scale);
    else if (o->kind != SL_OPT_SGD && be->adam_update_list && n)
        be->adam_update_list(&u->ex, n, sp, o->lr, o->beta1, o->beta2, o->eps, decoupled, u->step,
                             u->grad_scale);
    else
        for (int i = 0; i < n; i++)
            update_span(u, &sp[i]);
}

/* Visits the optimizer's ranges (this rank's slice when sharded: piece,
 * else whole; user is what they get, u inside it) and updates them in one
 * list of at most max_spans; without the memory for it, each range at once. */
static void update_gathered(update_ctx *u, int max_spans, sl_opt_state_visit whole,
                            sl_opt_shard_visit piece, void *user)
{
    u->spans = malloc((size_t)(max_spans > 0 ? max_spans : 1) * sizeof *u->spans);
    u->n_spans = 0;
    if (u->net->dp.shard)
        sl_net_visit_optimizer_shard(u->net, piece, user);
    else
        sl_net_visit_optimizer_state(u->net, whole, user);
    if (u->spans)
        flush_spans(u);
    free(u->spans);
    u->spans = NULL;
}

static void update_param(void *user, int param, int per, float *const *blocks)
{
    (void)per;
    update_ctx *u = user;
    const sl_param_spec *p = u->net->params[param].spec;
    update_range(u, param, 0, p->count, p->grad, blocks);
}

/* The factor the gradients enter the update with: 1/k for k accumulated
 * micro-batches, times the clip coefficient when clipping cuts. Records
 * the norm (of the averaged gradient). */
static sl_status update_scale(sl_net *net, const sl_exec *ex, float *scale, int *norm_later)
{
    *norm_later = 0;
    if (net->dp.shard == 2) { /* ZeRO-2: no rank holds every gradient (clipping and
                              accumulation are refused at the join) */
        *scale = 1.0f;
        return SL_OK;
    }
    double inv_k = 1.0 / (double)net->optim.accum;
    if (net->optim.grad_clip <= 0.0f && ex->be->download_later) {
        /* nothing needs the norm before the update: read it back with the
         * update's sync instead of stopping the queue here (later_norm) */
        grad_squares(net, ex);
        ex->be->download_later(ex, net->optim.norm_host, net->optim.norm_slots, NORM_SLOTS_BYTES);
        *norm_later = 1;
        *scale = (float)inv_k;
        return SL_OK;
    }
    double norm;
    sl_status st = grad_norm(net, ex, &norm);
    if (st != SL_OK)
        return st;
    norm *= inv_k;
    double s = inv_k;
    if (net->optim.grad_clip > 0.0f) {
        double coef = (double)net->optim.grad_clip / (norm + 1e-6);
        if (coef < 1.0)
            s *= coef;
    }
    net->optim.last_grad_norm = (float)norm;
    *scale = (float)s;
    return SL_OK;
}

/* After the update's sync: the norm whose slots update_scale read back
 * with it, recorded as the synchronous path records it. */
static void later_norm(sl_net *net)
{
    double inv_k = 1.0 / (double)net->optim.accum;
    net->optim.last_grad_norm = (float)(slots_norm(net->optim.norm_host) * inv_k);
}

/* ---- the update in backward ---- */

sl_status sl_net_set_update_in_backward(sl_net *net, int enabled)
{
    const char *fn = "sl_net_set_update_in_backward";
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network is NULL", fn);
    enabled = enabled != 0;
    if (enabled == net->optim.update_in_backward)
        return SL_OK;
    if (enabled && net->optim.grad_clip > 0.0f)
        return sl_set_error(SL_ERR_STATE, "%s: global-norm gradient clipping (max_norm %g) needs "
                            "every gradient before the first update; turn it off first "
                            "(sl_net_set_grad_clip(net, 0))", fn, net->optim.grad_clip);
    if (enabled && net->optim.accum > 1)
        return sl_set_error(SL_ERR_STATE, "%s: gradient accumulation over %d micro-batches keeps "
                            "the gradients; set it to 1 first (sl_net_set_grad_accumulation)", fn,
                            net->optim.accum);
    if (net->dp.comm)
        return sl_set_error(SL_ERR_STATE, "%s: the network is in a communicator; set the update "
                            "in backward before sl_dist_join (it runs there with ZeRO-2, "
                            "sl_dist_options.shard 2)", fn);
    net->optim.update_in_backward = enabled;
    sl_status st = SL_OK;
    if (enabled)
        sl_net_drop_gradients(net);
    else if (net->mode == SL_MODE_TRAIN)
        st = sl_net_restore_gradients(net);
    if (st != SL_OK) {
        net->optim.update_in_backward = 1;
        return sl_set_error(st, "%s: no memory for the gradient block of %zu bytes", fn,
                            net->grad_floats * sizeof(float));
    }
    net->optim.has_grads = 0;
    net->optim.micro = 0;
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    return SL_OK;
}

int sl_net_update_in_backward(const sl_net *net) { return net ? net->optim.update_in_backward : 0; }

typedef struct node_update {
    update_ctx u;
    const sl_layer *layer;
} node_update;

static int in_node(const node_update *n, int param)
{
    const sl_param_spec *p = n->u.net->params[param].spec;
    return p >= n->layer->params && p < n->layer->params + n->layer->n_params;
}

static void update_if_in_node(void *user, int param, int per, float *const *blocks)
{
    if (in_node(user, param))
        update_param(&((node_update *)user)->u, param, per, blocks);
}

/* ZeRO-2: this rank's piece of the node's parameters, from their
 * gradients reduced in place in the node's arena value. */
static void update_piece_if_in_node(void *user, int param, size_t gfirst, size_t off, size_t n,
                                    int per, float *const *blocks)
{
    (void)gfirst;
    (void)per;
    node_update *nu = user;
    if (in_node(nu, param))
        update_range(&nu->u, param, off, n, nu->u.net->params[param].spec->grad + off, blocks);
}

/* The UPDATE steps of the update in backward (io->update of a train
 * step's run, from sl_net_step_begin): user is the net; node's trainable
 * parameters, whose grad pointers point into the arena, get the update of
 * step steps + 1. */
static void update_node(void *user, int node)
{
    sl_net *net = user;
    node_update n = {{net, sl_net_exec(net), net->optim.steps + 1, 1.0f, NULL, 0},
                     net->graph.nodes[node].layer};
    update_gathered(&n.u, n.layer->n_params, update_if_in_node, update_piece_if_in_node, &n);
}

/* ---- ZeRO-1: the update of a rank's slice (net->shard, src/dist) ---- */

enum { SHARD_ALIGN = 16 }; /* floats: slice boundaries are multiples (the
                              gradient block is: every stride is 64 bytes) */

size_t sl_shard_bound(size_t floats, int size, int r)
{
    if (r >= size)
        return floats;
    size_t units = floats / SHARD_ALIGN;
    return units * (size_t)r / (size_t)size * SHARD_ALIGN;
}

sl_status sl_net_set_plan_ranks(sl_net *net, int ranks, int shard)
{
    const char *fn = "sl_net_set_plan_ranks";
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network is NULL", fn);
    if (ranks < 1 || shard < 0 || shard > 2 || (ranks == 1 && shard))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: %d ranks and shard %d: ranks must be >= 1 and "
                            "shard 0, 1 or 2 (0 with 1 rank)", fn, ranks, shard);
    if (net->dp.comm)
        return sl_set_error(SL_ERR_STATE, "%s: the network is in a communicator: its reports are "
                            "already its rank's", fn);
    if (net->dp.shard && net->dp.plan_ranks <= 1)
        return sl_set_error(SL_ERR_STATE, "%s: the network holds its slice of optimizer state from "
                            "a sharded communicator; set the optimizer again first", fn);
    if (net->param_block && ranks > 1)
        return sl_set_error(SL_ERR_STATE, "%s: the network's parameters exist already; plan ranks "
                            "on a network that has not run (planning allocates nothing)", fn);
    if (ranks > 1 && net->optim.update_in_backward && shard != 2)
        return sl_set_error(SL_ERR_STATE, "%s: the update in backward runs in a communicator only "
                            "with shard 2", fn);
    if (ranks > 1 && shard == 2 && (net->optim.grad_clip > 0.0f || net->optim.accum > 1))
        return sl_set_error(SL_ERR_STATE, "%s: shard 2 refuses global-norm clipping and gradient "
                            "accumulation (as sl_dist_join does)", fn);
    sl_status st = sl_net_finalize(net);
    if (st != SL_OK)
        return st;
    net->dp.plan_ranks = ranks > 1 ? ranks : 0;
    net->dp.shard = ranks > 1 ? shard : 0;
    /* the largest slice: the last rank's */
    net->dp.shard_lo = ranks > 1 ? sl_shard_bound(net->grad_floats, ranks, ranks - 1) : 0;
    net->dp.shard_hi = ranks > 1 ? net->grad_floats : 0;
    if (net->optim.has_optimizer)
        net->opt_floats = sl_optimizer_state_floats(net, &net->optim.opt, net->dp.shard != 0);
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    return SL_OK;
}

size_t sl_optimizer_state_floats(const sl_net *net, const sl_optimizer_options *o, int sharded)
{
    const char *names[SL_OPT_STATE_MAX];
    size_t per = (size_t)sl_optimizer_state_blocks(o, names);
    return per * (sharded ? net->dp.shard_hi - net->dp.shard_lo : net->grad_floats);
}

void sl_net_visit_optimizer_shard(sl_net *net, sl_opt_shard_visit visit, void *user)
{
    const char *names[SL_OPT_STATE_MAX];
    int per = sl_optimizer_state_blocks(&net->optim.opt, names);
    const size_t lo = net->dp.shard_lo, hi = net->dp.shard_hi, len = hi - lo;
    size_t g = 0; /* gradient-block index of the parameter's first float */
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        if (!p->trainable)
            continue;
        size_t a = g > lo ? g : lo, b = g + p->count < hi ? g + p->count : hi;
        if (a < b) {
            float *blocks[SL_OPT_STATE_MAX] = {NULL, NULL};
            for (int k = 0; k < per; k++)
                blocks[k] = net->opt_block + (size_t)k * len + (a - lo);
            visit(user, i, a, a - g, b - a, per, blocks);
        }
        g += sl_stride_floats(p->count);
    }
}

static void update_shard_piece(void *user, int param, size_t gfirst, size_t off, size_t n,
                               int per, float *const *blocks)
{
    (void)per;
    update_ctx *u = user;
    sl_net *net = u->net;
    /* ZeRO-2 keeps the reduced gradients of the slice only */
    const float *grad = net->dp.shard == 2 ? net->grad_block + (gfirst - net->dp.shard_lo)
                                        : net->params[param].spec->grad + off;
    update_range(u, param, off, n, grad, blocks);
}

static sl_status apply_update(sl_net *net);

sl_status sl_net_update(sl_net *net)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_update: network is NULL");
    if (net->optim.update_in_backward)
        return sl_set_error(SL_ERR_STATE, "sl_net_update: the update in backward is on: "
                            "sl_net_train_step updates inside backward, and no gradients are kept");
    if (!net->optim.has_optimizer)
        return sl_set_error(SL_ERR_STATE, "sl_net_update: no optimizer set (call sl_net_set_optimizer)");
    sl_status st = sl_net_check_training(net, "sl_net_update");
    if (st != SL_OK)
        return st;
    if (!net->optim.has_grads)
        return sl_set_error(SL_ERR_STATE, "sl_net_update: no gradients (call sl_net_compute_gradients)");
    st = sl_net_check_shard(net, "sl_net_update");
    if (st != SL_OK)
        return st;
    if (net->optim.accum > 1 && net->optim.micro < net->optim.accum)
        return sl_set_error(SL_ERR_STATE,
                            "sl_net_update: gradient accumulation over %d micro-batches, %d "
                            "accumulated so far; compute the gradients of %d more first",
                            net->optim.accum, net->optim.micro, net->optim.accum - net->optim.micro);
    return apply_update(net);
}

/* The update itself, its conditions checked (by sl_net_update, or by a
 * train step's begin and run). */
static sl_status apply_update(sl_net *net)
{
    update_ctx u = {net, sl_net_exec(net), net->optim.steps + 1, 1.0f, NULL, 0};
    double t0 = sl_profile_clock(net, &u.ex);
    int norm_later;
    sl_status st = update_scale(net, &u.ex, &u.grad_scale, &norm_later);
    if (st != SL_OK)
        return st;
    update_gathered(&u, net->n_params, update_param, update_shard_piece, &u);
    sl_profile_add_update(net, &u.ex, t0);
    st = u.ex.be->sync(&u.ex);
    if (st == SL_OK && norm_later)
        later_norm(net);
    if (st == SL_OK && net->dp.shard)
        st = net->dp.comm->after_update(net->dp.comm->user);
    if (st != SL_OK)
        return st;
    net->optim.steps = u.step;
    net->optim.micro = 0;
    return SL_OK;
}

sl_status sl_net_step_begin(sl_net *net, const char *fn, sl_run_io *io)
{
    memset(io, 0, sizeof *io);
    if (!net)
        return SL_OK; /* the gradient run reports it */
    if (!net->optim.has_optimizer)
        return sl_set_error(SL_ERR_STATE, "%s: no optimizer set (call sl_net_set_optimizer)", fn);
    sl_status st = sl_net_check_shard(net, fn);
    if (st != SL_OK)
        return st;
    if (net->optim.update_in_backward) { /* the run updates inside backward */
        io->update = update_node;
        io->update_user = net;
    }
    return SL_OK;
}

sl_status sl_net_step_end(sl_net *net, sl_status st, const sl_step_result *res, const char *fn)
{
    if (!net)
        return st;
    int in_backward = net->optim.update_in_backward; /* the run updated inside backward */
    if (st == SL_OK)
        st = sl_net_check_step_loss(net, res, in_backward, fn);
    if (in_backward || st != SL_OK || net->optim.micro < net->optim.accum)
        return st; /* accumulating: the update follows the k-th micro-batch */
    return apply_update(net); /* begin and the run checked what sl_net_update checks */
}

sl_status sl_net_train_step(sl_net *net, const float *x, sl_shape shape, const int *labels,
                            sl_step_result *result)
{
    const char *fn = "sl_net_train_step";
    sl_run_io io;
    sl_status st = sl_net_step_begin(net, fn, &io);
    if (st != SL_OK)
        return st;
    sl_step_result local;
    if (!result)
        result = &local;
    return sl_net_step_end(net, sl_net_gradients(net, x, shape, labels, result, &io, fn), result,
                           fn);
}

int64_t sl_net_step_count(const sl_net *net) { return net ? net->optim.steps : 0; }
