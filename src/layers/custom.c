/*
 * custom.c — layer types written in the user's code (layers stage).
 *
 * An adapter: a custom layer is an ordinary layer of the internal contract
 * (layer.h) whose infer / forward / backward translate the internal
 * arguments into the public sl_custom_* structs and call the user's
 * callbacks. Its ops table lives in the layer itself, so the type name the
 * user chose appears in messages and graphs. Nothing downstream knows a
 * layer is custom: the planner reads its flags and sizes, the executor
 * hands it arena pointers, schedules re-forward it.
 *
 * What the user declares is checked twice: the definition when the layer
 * is made (callbacks, flags, names, parameters), the sizes when the
 * network is planned (the first moment an input shape is known), both
 * before any kernel runs. A callback that fails at run time is recorded in
 * the context and reported by the running call.
 *
 * Random numbers: a TRAIN forward takes the context's dropout counter as
 * its own and moves the counter past what it draws; a REFORWARD and the
 * backward draw from the saved counter, so they see the same numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/custom.h"

_Static_assert(SL_CUSTOM_MAX_INPUTS == SL_MAX_INPUTS, "public and internal input limits differ");
_Static_assert(SL_CUSTOM_MAX_PARAMS == SL_MAX_PARAMS, "public and internal parameter limits differ");
_Static_assert(SL_CUSTOM_NAME_MAX == SL_LOCAL_NAME_MAX, "public and internal name limits differ");

#define KNOWN_FLAGS                                                                                \
    (SL_CUSTOM_NEEDS_INPUT | SL_CUSTOM_NEEDS_OUTPUT | SL_CUSTOM_FWD_INPLACE |                     \
     SL_CUSTOM_BWD_INPLACE | SL_CUSTOM_NEEDS_SAVED | SL_CUSTOM_SAVED_KEPT)

typedef struct custom {
    sl_layer base;
    sl_layer_ops ops; /* base.ops points here: .type is type_name */
    char type_name[SL_LOCAL_NAME_MAX];
    sl_custom_type type; /* the user's table (name points to type_name) */
    int n_inputs;
    void *config; /* owned copy, NULL when config_bytes is 0 */
    uint64_t counter; /* Philox counter taken by the last TRAIN forward */
    uint64_t drawn;   /* numbers that forward drew */
} custom;

/* What sl_custom_random_uniform needs to know about the running callback. */
struct sl_custom_call {
    custom *layer;
    const sl_exec *ex;
    sl_context *ctx;
    int train_forward; /* 1: a TRAIN forward, which may draw new numbers */
    int eval;          /* 1: an EVAL forward, which draws none */
    const char *what;  /* "forward", "re-forward", "backward" for messages */
};

static void custom_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a);

int sl_custom_is(const sl_layer *l) { return l->ops->forward == custom_forward; }

int sl_custom_inputs(const sl_layer *l)
{
    return sl_custom_is(l) ? ((const custom *)l)->n_inputs : 1;
}

static const char *type_of(const custom *c) { return c->type_name; }

/* "2x3x8x8" or "2x3x8x8, 2x3x1x1" for messages. */
static void format_shapes(char *buf, size_t n, int n_in, const sl_shape *in)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < n_in && used < n; k++) {
        char b[SL_SHAPE_STR];
        int w = snprintf(buf + used, n - used, "%s%s", k ? ", " : "", sl_shape_str(in[k], b));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* A status a callback returned, or `fallback` when it is not one. */
static sl_status valid_status(sl_status st, sl_status fallback)
{
    int v = (int)st;
    return v > (int)SL_OK && v <= (int)SL_ERR_UNSUPPORTED ? st : fallback;
}

/* The message a callback left, or a note that it left none. */
static const char *callback_message(void)
{
    const char *m = sl_last_error();
    return m[0] ? m : "(the callback gave no message: use sl_set_error)";
}

/* Clears the message so that a failing callback that sets none is seen. */
static void clear_message(void) { sl_set_error(SL_OK, "%s", ""); }

/* ---- planning: sizes for an input shape ---- */

static sl_status check_sizes(const custom *c, const char *shapes, const sl_custom_sizes *s)
{
    const char *who = sl_layer_label(&c->base), *type = type_of(c);
    sl_shape o = s->out;
    if (o.n < 1 || o.c < 1 || o.h < 1 || o.w < 1)
        return sl_set_error(SL_ERR_SHAPE,
                       "custom layer '%s' (%s) declares output shape %dx%dx%dx%d for input %s: "
                       "every dimension must be >= 1", who, type, o.n, o.c, o.h, o.w, shapes);
    if (!sl_layout_known(o.layout))
        return sl_set_error(SL_ERR_SHAPE,
                            "custom layer '%s' (%s) declares output layout %d for input %s: it "
                            "must be SL_LAYOUT_NCHW or SL_LAYOUT_NHWC (copy the input's shape, or "
                            "build it with sl_shape_nchw or sl_shape_seq)",
                            who, type, (int)o.layout, shapes);
    if (s->saved_bytes < 0 || s->forward_workspace_bytes < 0 || s->backward_workspace_bytes < 0 ||
        s->forward_flops < 0 || s->backward_flops < 0)
        return sl_set_error(SL_ERR_INVALID_ARG,
                       "custom layer '%s' (%s) declares a negative size for input %s (saved_bytes "
                       "%lld, forward_workspace_bytes %lld, backward_workspace_bytes %lld, "
                       "forward_flops %lld, backward_flops %lld)", who, type, shapes,
                       (long long)s->saved_bytes, (long long)s->forward_workspace_bytes,
                       (long long)s->backward_workspace_bytes, (long long)s->forward_flops,
                       (long long)s->backward_flops);
    int needs = (c->type.flags & SL_CUSTOM_NEEDS_SAVED) != 0;
    if (needs && s->saved_bytes == 0)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "custom layer '%s' (%s): its backward reads saved state "
                            "(SL_CUSTOM_NEEDS_SAVED) but its shape callback declares saved_bytes 0 "
                            "for input %s", who, type, shapes);
    if (!needs && s->saved_bytes > 0)
        return sl_set_error(SL_ERR_INVALID_ARG,
                            "custom layer '%s' (%s) declares saved_bytes %lld for input %s but not "
                            "SL_CUSTOM_NEEDS_SAVED: add the flag if its backward reads the saved "
                            "state, else declare 0", who, type, (long long)s->saved_bytes, shapes);
    return SL_OK;
}

static sl_status custom_infer(const sl_layer *l, const sl_backend *be, int n_in, const sl_shape *in,
                              sl_shape *out, sl_layer_cost *cost)
{
    const custom *c = (const custom *)l;
    (void)be;
    if (n_in != c->n_inputs)
        return sl_set_error(SL_ERR_SHAPE, "custom layer '%s' (%s) takes %d input%s but is given %d%s",
                            sl_layer_label(l), type_of(c), c->n_inputs, c->n_inputs == 1 ? "" : "s",
                            n_in, n_in == 1 ? ": a layer of several inputs goes inside a block "
                                         "(sl_block_add)" : "");
    char shapes[160];
    format_shapes(shapes, sizeof shapes, n_in, in);
    sl_custom_sizes s;
    memset(&s, 0, sizeof s);
    clear_message();
    sl_status st = c->type.shape(c->config, n_in, in, &s);
    if (st != SL_OK)
        return sl_set_error(valid_status(st, SL_ERR_SHAPE), "custom layer '%s' (%s) refuses input %s: %s",
                            sl_layer_label(l), type_of(c), shapes, callback_message());
    st = check_sizes(c, shapes, &s);
    if (st != SL_OK)
        return st;
    *out = s.out;
    cost->saved_bytes = (size_t)s.saved_bytes;
    cost->ws_fwd_bytes = (size_t)s.forward_workspace_bytes;
    cost->ws_bwd_bytes = (size_t)s.backward_workspace_bytes;
    cost->fwd_flops = (uint64_t)s.forward_flops;
    cost->bwd_flops = (uint64_t)s.backward_flops;
    return SL_OK;
}

/* ---- running ---- */

/* Keeps the first failure of a run; the running call reports it. */
static void record_failure(sl_context *ctx, const custom *c, const char *what, sl_status st)
{
    if (ctx->callback_status != SL_OK)
        return;
    ctx->callback_status = valid_status(st, SL_ERR_BACKEND);
    snprintf(ctx->callback_error, sizeof ctx->callback_error, "custom layer '%s' (%s) failed in %s: %s",
             sl_layer_label(&c->base), type_of(c), what, callback_message());
}

static void *stream_of(const sl_exec *ex)
{
    return ex->be->native_stream ? ex->be->native_stream(ex->be) : NULL;
}

static sl_custom_pass public_pass(sl_pass p)
{
    return p == SL_PASS_TRAIN ? SL_CUSTOM_TRAIN : p == SL_PASS_EVAL ? SL_CUSTOM_EVAL : SL_CUSTOM_REFORWARD;
}

static void custom_forward(sl_layer *l, const sl_exec *ex, const sl_fwd_args *a)
{
    custom *c = (custom *)l;
    if (a->pass == SL_PASS_TRAIN) {
        c->counter = a->ctx->dropout_counter;
        c->drawn = 0;
    }
    sl_custom_call call = {c, ex, a->ctx, a->pass == SL_PASS_TRAIN, a->pass == SL_PASS_EVAL,
                           a->pass == SL_PASS_REFORWARD ? "re-forward" : "forward"};
    sl_custom_forward_args u;
    memset(&u, 0, sizeof u);
    u.pass = public_pass(a->pass);
    u.n_in = a->n_in;
    for (int k = 0; k < a->n_in; k++) {
        u.x[k] = a->x[k];
        u.in[k] = a->in[k];
    }
    u.y = a->y;
    u.out = a->out;
    u.saved = a->saved;
    u.workspace = a->ws;
    for (int p = 0; p < l->n_params; p++)
        u.params[p] = l->params[p].data;
    u.config = c->config;
    u.device = a->ctx->device;
    u.stream = stream_of(ex);
    u.threads = ex->threads;
    u.call = &call;
    clear_message();
    sl_status st = c->type.forward(&u);
    if (st != SL_OK)
        record_failure(a->ctx, c, call.what, st);
}

static void custom_backward(sl_layer *l, const sl_exec *ex, const sl_bwd_args *a)
{
    custom *c = (custom *)l;
    sl_custom_call call = {c, ex, a->ctx, 0, 0, "backward"};
    sl_custom_backward_args u;
    memset(&u, 0, sizeof u);
    u.n_in = a->n_in;
    for (int k = 0; k < a->n_in; k++) {
        u.x[k] = a->x[k];
        u.in[k] = a->in[k];
        u.dx[k] = a->dx[k];
        u.accumulate[k] = a->accumulate[k];
    }
    u.y = a->y;
    u.out = a->out;
    u.dy = a->dy;
    u.saved = a->saved;
    u.workspace = a->ws;
    for (int p = 0; p < l->n_params; p++) {
        u.params[p] = l->params[p].data;
        u.grads[p] = l->params[p].trainable ? l->params[p].grad : NULL;
    }
    u.config = c->config;
    u.device = a->ctx->device;
    u.stream = stream_of(ex);
    u.threads = ex->threads;
    u.call = &call;
    clear_message();
    sl_status st = c->type.backward(&u);
    if (st != SL_OK)
        record_failure(a->ctx, c, call.what, st);
}

sl_status sl_custom_random_uniform(const sl_custom_call *call, uint64_t first, size_t count,
                                   float *dst)
{
    if (!call)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_random_uniform: call is NULL");
    custom *c = call->layer;
    const char *who = sl_layer_label(&c->base);
    if (count == 0)
        return SL_OK;
    if (!dst)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_random_uniform: dst is NULL (layer '%s')", who);
    if (first > UINT64_MAX / 8 || (uint64_t)count > UINT64_MAX / 8)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_random_uniform: numbers %llu + %zu are out "
                            "of range (layer '%s')", (unsigned long long)first, count, who);
    uint64_t end = first + (uint64_t)count;
    if (call->eval)
        return sl_set_error(SL_ERR_STATE, "sl_custom_random_uniform: layer '%s' (%s) draws in an "
                            "evaluation forward, which has no random numbers", who, type_of(c));
    if (call->train_forward) {
        if (end > c->drawn)
            c->drawn = end;
        uint64_t next = c->counter + (c->drawn + 3) / 4; /* four numbers per Philox block */
        if (next > call->ctx->dropout_counter)
            call->ctx->dropout_counter = next;
    } else if (end > c->drawn) {
        return sl_set_error(SL_ERR_STATE, "sl_custom_random_uniform: layer '%s' (%s) asks in its %s for "
                       "numbers up to %llu, but its training forward drew only %llu: a re-forward "
                       "or backward can only see the numbers the training forward drew",
                       who, type_of(c), call->what, (unsigned long long)end,
                       (unsigned long long)c->drawn);
    }
    call->ex->be->random_uniform(call->ex, count, call->ctx->seed, c->counter, first, dst);
    return SL_OK;
}

/* ---- channels (when a layer is added) ---- */

int sl_custom_channels(const sl_layer *l, int n_in, const int *in_channels)
{
    const custom *c = (const custom *)l;
    if (!c->type.out_channels)
        return 0;
    clear_message();
    int out = c->type.out_channels(c->config, n_in, in_channels);
    if (out < 0) {
        char list[96] = "";
        for (int k = 0, used = 0; k < n_in && used < (int)sizeof list; k++)
            used += snprintf(list + used, sizeof list - (size_t)used, "%s%d", k ? ", " : "",
                             in_channels[k]);
        sl_set_error(SL_ERR_SHAPE, "custom layer '%s' (%s) refuses input channels %s: %s",
                     sl_layer_label(l), type_of(c), list, callback_message());
        return -1;
    }
    return out;
}

/* As a top-level layer (one input) or in a built-in block. */
static int custom_out_channels(const sl_layer *l, int in_c)
{
    const custom *c = (const custom *)l;
    if (c->n_inputs != 1) {
        sl_set_error(SL_ERR_SHAPE, "custom layer '%s' (%s) takes %d inputs: add it inside a block "
                "(sl_block_add), where it can read several tensors", sl_layer_label(l), type_of(c),
                c->n_inputs);
        return -1;
    }
    return sl_custom_channels(l, 1, &in_c);
}

static void custom_destroy(sl_layer *l) { free(((custom *)l)->config); }

/* ---- making a layer: the definition is checked here ---- */

static unsigned internal_flags(unsigned f)
{
    unsigned out = 0;
    if (f & SL_CUSTOM_NEEDS_INPUT)
        out |= SL_LAYER_NEEDS_INPUT;
    if (f & SL_CUSTOM_NEEDS_OUTPUT)
        out |= SL_LAYER_NEEDS_OUTPUT;
    if (f & SL_CUSTOM_FWD_INPLACE)
        out |= SL_LAYER_FWD_INPLACE;
    if (f & SL_CUSTOM_BWD_INPLACE)
        out |= SL_LAYER_BWD_INPLACE;
    if (f & SL_CUSTOM_SAVED_KEPT)
        out |= SL_LAYER_SAVED_KEPT;
    return out;
}

static int name_ok(const char *name) { return name && name[0] && strlen(name) < SL_LOCAL_NAME_MAX; }

static sl_status check_type(const sl_custom_type *t)
{
    if (!t)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: type is NULL");
    if (!name_ok(t->name))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: the type's name must have 1 to %d "
                            "characters", SL_LOCAL_NAME_MAX - 1);
    const char *missing = !t->shape ? "shape" : !t->forward ? "forward" : !t->backward ? "backward" : NULL;
    if (missing)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: type '%s' has no %s callback (shape, "
                            "forward and backward are required)", t->name, missing);
    if (t->flags & ~(unsigned)KNOWN_FLAGS)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: type '%s' has unknown flags 0x%x",
                            t->name, t->flags & ~(unsigned)KNOWN_FLAGS);
    if ((t->flags & SL_CUSTOM_SAVED_KEPT) && !(t->flags & SL_CUSTOM_NEEDS_SAVED))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: type '%s' keeps saved state "
                            "(SL_CUSTOM_SAVED_KEPT) that its backward does not read (no "
                            "SL_CUSTOM_NEEDS_SAVED)", t->name);
    if (t->n_inputs < 0 || t->n_inputs > SL_MAX_INPUTS)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: type '%s' takes %d inputs; 1 to %d "
                            "(0 means 1)", t->name, t->n_inputs, SL_MAX_INPUTS);
    return SL_OK;
}

static sl_status check_param(const char *type, const sl_custom_param *p, int i)
{
    if (!name_ok(p->name) || strchr(p->name, '.'))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: parameter %d of '%s' needs a name of 1 "
                            "to %d characters without '.'", i, type, SL_LOCAL_NAME_MAX - 1);
    if (p->ndim < 1 || p->ndim > 4)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: parameter '%s' of '%s' has %d "
                            "dimensions; 1 to 4", p->name, type, p->ndim);
    size_t count = 1;
    for (int d = 0; d < p->ndim; d++) {
        if (p->dims[d] < 1 || count > ((size_t)1 << 40) / (size_t)p->dims[d])
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: parameter '%s' of '%s' has "
                           "dimension %d of size %d: each must be >= 1 (and the tensor below 2^40 "
                           "elements)", p->name, type, d, p->dims[d]);
        count *= (size_t)p->dims[d];
    }
    if ((int)p->init < (int)SL_PARAM_ZEROS || (int)p->init > (int)SL_PARAM_UNIFORM_FAN_IN)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: parameter '%s' of '%s' has unknown "
                            "init %d", p->name, type, (int)p->init);
    int fanned = p->init == SL_PARAM_KAIMING_NORMAL_FAN_OUT || p->init == SL_PARAM_UNIFORM_FAN_IN;
    if (fanned && p->fan < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: parameter '%s' of '%s' needs fan >= 1 "
                            "for its init (got %d)", p->name, type, p->fan);
    return SL_OK;
}

static sl_status check_params(const char *type, const sl_custom_param *params, int n)
{
    if (n < 0 || n > SL_MAX_PARAMS || (n > 0 && !params))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: '%s' declares %d parameters%s; 0 to %d",
                            type, n, n > 0 && !params ? " but params is NULL" : "", SL_MAX_PARAMS);
    for (int i = 0; i < n; i++) {
        sl_status st = check_param(type, &params[i], i);
        if (st != SL_OK)
            return st;
        for (int j = 0; j < i; j++)
            if (strcmp(params[j].name, params[i].name) == 0)
                return sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: '%s' declares two parameters "
                                    "named '%s'", type, params[i].name);
    }
    return SL_OK;
}

static sl_init internal_init(sl_param_init init)
{
    switch (init) {
    case SL_PARAM_ONES: return SL_INIT_ONES;
    case SL_PARAM_KAIMING_NORMAL_FAN_OUT: return SL_INIT_KAIMING_NORMAL_FAN_OUT;
    case SL_PARAM_UNIFORM_FAN_IN: return SL_INIT_UNIFORM_FAN_IN;
    case SL_PARAM_ZEROS: break;
    }
    return SL_INIT_ZEROS;
}

sl_layer *sl_custom_layer(const sl_custom_type *type, const void *config, size_t config_bytes,
                          const sl_custom_param *params, int n_params)
{
    if (check_type(type) != SL_OK || check_params(type->name, params, n_params) != SL_OK)
        return NULL;
    if (config_bytes > 0 && !config) {
        sl_set_error(SL_ERR_INVALID_ARG, "sl_custom_layer: '%s' has config_bytes %zu but config is NULL",
                     type->name, config_bytes);
        return NULL;
    }
    custom *c = sl_zalloc(sizeof *c, "a custom layer");
    void *copy = config_bytes ? sl_alloc(config_bytes, "a custom layer's configuration") : NULL;
    if (!c || (config_bytes && !copy)) {
        free(c);
        free(copy);
        return NULL;
    }
    if (copy)
        memcpy(copy, config, config_bytes);
    snprintf(c->type_name, sizeof c->type_name, "%s", type->name);
    c->type = *type;
    c->type.name = c->type_name;
    c->n_inputs = type->n_inputs ? type->n_inputs : 1;
    c->config = copy;
    c->ops = (sl_layer_ops){
        .type = c->type_name,
        .flags = internal_flags(type->flags),
        .infer = custom_infer,
        .forward = custom_forward,
        .backward = custom_backward,
        .out_channels = custom_out_channels,
        .destroy = custom_destroy,
    };
    sl_layer_init(&c->base, &c->ops);
    for (int i = 0; i < n_params; i++) {
        const sl_custom_param *p = &params[i];
        sl_layer_add_param(&c->base, p->name, p->ndim, p->dims, internal_init(p->init), p->fan,
                           p->trainable != 0);
    }
    return &c->base;
}
