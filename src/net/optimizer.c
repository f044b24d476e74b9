/*
 * optimizer.c — the optimizer of a network (net stage): SGD and Adam
 * options, their state, and the update after a backward. The layout of
 * the optimizer state is defined here once (sl_optimizer_state_blocks and
 * sl_net_visit_optimizer_state); the update and training snapshots
 * (io/snapshot.c) both go through it.
 */
#include <math.h>
#include <string.h>

#include "net/net.h"

sl_optimizer_options sl_sgd(float lr, float momentum, float weight_decay, int nesterov)
{
    sl_optimizer_options o = {SL_OPT_SGD, lr, momentum, nesterov, weight_decay, 0.9f, 0.999f, 1e-8f};
    return o;
}

sl_optimizer_options sl_adam(float lr, float beta1, float beta2, float eps, float weight_decay)
{
    sl_optimizer_options o = {SL_OPT_ADAM, lr, 0.0f, 0, weight_decay, beta1, beta2, eps};
    return o;
}

static sl_status check_optimizer(const sl_optimizer_options *o)
{
    if (o->kind != SL_OPT_SGD && o->kind != SL_OPT_ADAM)
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
    if (o->kind == SL_OPT_ADAM &&
        !(o->beta1 >= 0.0f && o->beta1 < 1.0f && o->beta2 >= 0.0f && o->beta2 < 1.0f && o->eps > 0.0f))
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "sl_net_set_optimizer: Adam needs betas in [0, 1) and eps > 0 (got %g, %g, %g)",
                       o->beta1, o->beta2, o->eps);
    return SL_OK;
}

/* ---- the state layout, in one place ---- */

int sl_optimizer_state_blocks(const sl_optimizer_options *o, const char *names[SL_OPT_STATE_MAX])
{
    if (o->kind == SL_OPT_ADAM) {
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
    int per = sl_optimizer_state_blocks(&net->opt, names);
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
    const char *names[SL_OPT_STATE_MAX];
    size_t floats = net->grad_floats * (size_t)sl_optimizer_state_blocks(opts, names);
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
    be->free(be, net->opt_block);
    net->opt_block = state;
    net->opt_floats = floats;
    net->opt = *opts;
    net->has_optimizer = 1;
    /* Budget schedules count optimizer state: plan again. */
    sl_run_cache_release(&net->cache[SL_MODE_TRAIN]);
    net->steps = 0;
    return SL_OK;
}

sl_status sl_net_set_lr(sl_net *net, float lr)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_lr: network is NULL");
    if (!net->has_optimizer)
        return sl_set_error(SL_ERR_STATE, "sl_net_set_lr: no optimizer set (call sl_net_set_optimizer)");
    if (!(lr >= 0.0f) || !isfinite(lr))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_set_lr: lr %g must be finite and >= 0", lr);
    net->opt.lr = lr;
    return SL_OK;
}

typedef struct update_ctx {
    sl_net *net;
    sl_exec ex;
    int64_t step;
} update_ctx;

static void update_param(void *user, int param, int per, float *const *blocks)
{
    (void)per;
    update_ctx *u = user;
    const sl_optimizer_options *o = &u->net->opt;
    sl_param_spec *p = u->net->params[param].spec;
    if (o->kind == SL_OPT_SGD)
        u->ex.be->sgd_update(&u->ex, p->count, p->data, p->grad, blocks[0], o->lr, o->momentum,
                             o->weight_decay, o->nesterov, u->step == 1);
    else
        u->ex.be->adam_update(&u->ex, p->count, p->data, p->grad, blocks[0], blocks[1], o->lr,
                              o->beta1, o->beta2, o->eps, o->weight_decay, u->step);
}

sl_status sl_net_update(sl_net *net)
{
    if (!net)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_net_update: network is NULL");
    if (!net->has_optimizer)
        return sl_set_error(SL_ERR_STATE, "sl_net_update: no optimizer set (call sl_net_set_optimizer)");
    sl_status st = sl_net_check_training(net, "sl_net_update");
    if (st != SL_OK)
        return st;
    if (!net->has_grads)
        return sl_set_error(SL_ERR_STATE, "sl_net_update: no gradients (call sl_net_compute_gradients)");
    update_ctx u = {net, sl_net_exec(net), net->steps + 1};
    double t0 = sl_profile_clock(net, &u.ex);
    sl_net_visit_optimizer_state(net, update_param, &u);
    sl_profile_add_update(net, &u.ex, t0);
    st = u.ex.be->sync(&u.ex);
    if (st != SL_OK)
        return st;
    net->steps = u.step;
    return SL_OK;
}

sl_status sl_net_train_step(sl_net *net, const float *x, sl_shape shape, const int *labels,
                            sl_step_result *result)
{
    if (net && !net->has_optimizer)
        return sl_set_error(SL_ERR_STATE, "sl_net_train_step: no optimizer set (call sl_net_set_optimizer)");
    sl_status st = sl_net_compute_gradients(net, x, shape, labels, result);
    return st == SL_OK ? sl_net_update(net) : st;
}

int64_t sl_net_step_count(const sl_net *net) { return net ? net->steps : 0; }
