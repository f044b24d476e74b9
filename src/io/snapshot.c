/*
 * snapshot.c — training snapshots (io stage): everything a run needs to go
 * on as if it had never stopped. A snapshot is a model file (serialize.c)
 * plus the optimizer's state tensors ("optimizer.<param>.momentum_buffer",
 * or ".exp_avg" and ".exp_avg_sq" for Adam and AdamW), with the
 * optimizer's kind ("sgd", "adam", "adamw") and hyperparameters, the step
 * count, and the context's seed and dropout counter as strings in
 * __metadata__. Floats are printed with 9
 * significant digits, which read back to the same float.
 *
 * The optimizer state is read and written through the one definition of
 * its layout that the update uses (sl_net_visit_optimizer_state,
 * net/optimizer.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "io/serialize.h"

#define SNAPSHOT_FORMAT "sublinear-snapshot"
#define META_COUNT 14

/* ---- saving ---- */

typedef struct save_ctx {
    sl_net *net;
    const sl_host_view *view;
    const char **names;
    sl_st_tensor *t;
    int n;
} save_ctx;

static void add_state_tensors(void *user, int i, int per, float *const *blocks)
{
    save_ctx *c = user;
    const sl_param_spec *p = c->net->params[i].spec;
    for (int k = 0; k < per; k++) {
        sl_st_tensor *e = &c->t[c->n++];
        snprintf(e->name, sizeof e->name, "optimizer.%s.%s", c->net->params[i].name,
                 c->names[k]);
        e->dtype = SL_ST_F32;
        e->ndim = p->ndim;
        memcpy(e->dims, p->dims, sizeof e->dims);
        e->data = sl_host_view_at(c->net, c->view, blocks[k]);
        e->bytes = p->count * sizeof(float);
    }
}

static int trainable_count(const sl_net *net)
{
    int n = 0;
    for (int i = 0; i < net->n_params; i++)
        n += net->params[i].spec->trainable != 0;
    return n;
}

/* The one path of a snapshot: in a communicator the communicator's save
 * (the state gathered, rank 0 writes), else this process's. */
sl_status sl_save_snapshot(sl_net *net, const char *path)
{
    static const char fn[] = "sl_save_snapshot";
    if (!net || !path)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or path is NULL", fn);
    if (!net->optim.has_optimizer)
        return sl_set_error(SL_ERR_STATE, "%s: no optimizer set; a snapshot resumes training (save "
                            "weights alone with sl_save_model)", fn);
    if (net->dp.comm && net->dp.comm->save)
        return net->dp.comm->save(net->dp.comm->user, path, 1, SL_FILE_F32, fn);
    return sl_save_snapshot_here(net, path, fn);
}

sl_status sl_save_snapshot_here(sl_net *net, const char *path, const char *fn)
{
    if (net->dp.shard)
        return sl_set_error(SL_ERR_STATE, "%s: this rank holds only a slice of the optimizer state "
                            "(sl_dist_options.shard) and left its communicator: save it in the "
                            "communicator, where sl_save_snapshot gathers it", fn);
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return sl_set_error(st, "%s: %s", fn, sl_last_error());
    const sl_optimizer_options *o = &net->optim.opt;
    const char *names[SL_OPT_STATE_MAX];
    int per = sl_optimizer_state_blocks(o, names);
    sl_host_view view;
    st = sl_host_view_open(net, &view);
    if (st != SL_OK)
        return st;
    save_ctx c = {net, &view, names, NULL, 0};
    st = sl_net_model_tensors(net, &view, &net->optim.steps, trainable_count(net) * per, &c.t, &c.n);
    if (st != SL_OK) {
        sl_host_view_close(net, &view);
        return st;
    }
    sl_net_visit_optimizer_state(net, add_state_tensors, &c);

    char v[10][32];
    snprintf(v[0], 32, "%.9g", (double)o->lr);
    snprintf(v[1], 32, "%.9g", (double)o->momentum);
    snprintf(v[2], 32, "%d", o->nesterov ? 1 : 0);
    snprintf(v[3], 32, "%.9g", (double)o->weight_decay);
    snprintf(v[4], 32, "%.9g", (double)o->beta1);
    snprintf(v[5], 32, "%.9g", (double)o->beta2);
    snprintf(v[6], 32, "%.9g", (double)o->eps);
    snprintf(v[7], 32, "%" PRId64, net->optim.steps);
    snprintf(v[8], 32, "%" PRIu64, net->ctx->seed);
    snprintf(v[9], 32, "%" PRIu64, net->ctx->dropout_counter);
    const char *const meta[META_COUNT][2] = {
        {"format", SNAPSHOT_FORMAT}, {"producer", "sublinear"}, {"version", "1"},
        {"optimizer", o->kind == SL_OPT_ADAMW ? "adamw" : o->kind == SL_OPT_ADAM ? "adam" : "sgd"},
        {"lr", v[0]}, {"momentum", v[1]}, {"nesterov", v[2]}, {"weight_decay", v[3]},
        {"beta1", v[4]}, {"beta2", v[5]}, {"eps", v[6]},
        {"step", v[7]}, {"seed", v[8]}, {"dropout_counter", v[9]},
    };
    st = sl_st_write(path, c.t, c.n, meta, META_COUNT, fn);
    free(c.t);
    sl_host_view_close(net, &view);
    return st;
}

/* ---- loading ---- */

typedef struct snapshot_meta {
    sl_optimizer_options opt;
    int64_t step;
    uint64_t seed, dropout_counter;
} snapshot_meta;

static sl_status meta_string(const sl_st_file *f, const char *key, const char *what,
                             const char **out)
{
    size_t len = 0;
    *out = sl_st_metadata(f, key, &len);
    if (!*out || !**out)
        return sl_set_error(SL_ERR_FORMAT, "'%s': __metadata__ lacks \"%s\"", what, key);
    if (strlen(*out) != len)
        return sl_set_error(SL_ERR_FORMAT, "'%s': __metadata__ \"%s\" holds a NUL character", what,
                            key);
    return SL_OK;
}

static sl_status meta_float(const sl_st_file *f, const char *key, const char *what, float *out)
{
    const char *s;
    sl_status st = meta_string(f, key, what, &s);
    if (st != SL_OK)
        return st;
    char *end;
    errno = 0;
    *out = strtof(s, &end);
    if (*end || end == s || errno == ERANGE)
        return sl_set_error(SL_ERR_FORMAT, "'%s': __metadata__ \"%s\" is \"%.32s\", not a number",
                            what, key, s);
    return SL_OK;
}

static sl_status meta_uint(const sl_st_file *f, const char *key, const char *what, uint64_t max,
                           uint64_t *out)
{
    const char *s;
    sl_status st = meta_string(f, key, what, &s);
    if (st != SL_OK)
        return st;
    char *end;
    errno = 0;
    unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    if (s[0] < '0' || s[0] > '9' || *end || errno == ERANGE || v > max)
        return sl_set_error(SL_ERR_FORMAT,
                       "'%s': __metadata__ \"%s\" is \"%.32s\", not an integer in [0, %llu]", what,
                       key, s, (unsigned long long)max);
    *out = v;
    return SL_OK;
}

static sl_status read_meta(const sl_st_file *f, const char *what, snapshot_meta *m)
{
    size_t format_len = 0;
    const char *format = sl_st_metadata(f, "format", &format_len);
    if (!format || format_len != strlen(SNAPSHOT_FORMAT) || strcmp(format, SNAPSHOT_FORMAT) != 0)
        return sl_set_error(SL_ERR_FORMAT,
                       "'%s' is not a training snapshot (__metadata__ \"format\" is \"%.32s\", not "
                       "\"" SNAPSHOT_FORMAT "\"); load a model file with sl_load_model",
                       what, format ? format : "(none)");
    const char *kind;
    sl_status st = meta_string(f, "optimizer", what, &kind);
    if (st != SL_OK)
        return st;
    memset(m, 0, sizeof *m);
    if (strcmp(kind, "sgd") == 0)
        m->opt.kind = SL_OPT_SGD;
    else if (strcmp(kind, "adam") == 0)
        m->opt.kind = SL_OPT_ADAM;
    else if (strcmp(kind, "adamw") == 0)
        m->opt.kind = SL_OPT_ADAMW;
    else
        return sl_set_error(SL_ERR_FORMAT, "'%s': unknown optimizer \"%.32s\"", what, kind);
    uint64_t nesterov = 0, step = 0;
    sl_optimizer_options *o = &m->opt;
    if (st == SL_OK) st = meta_float(f, "lr", what, &o->lr);
    if (st == SL_OK) st = meta_float(f, "momentum", what, &o->momentum);
    if (st == SL_OK) st = meta_uint(f, "nesterov", what, 1, &nesterov);
    if (st == SL_OK) st = meta_float(f, "weight_decay", what, &o->weight_decay);
    if (st == SL_OK) st = meta_float(f, "beta1", what, &o->beta1);
    if (st == SL_OK) st = meta_float(f, "beta2", what, &o->beta2);
    if (st == SL_OK) st = meta_float(f, "eps", what, &o->eps);
    if (st == SL_OK) st = meta_uint(f, "step", what, INT64_MAX, &step);
    if (st == SL_OK) st = meta_uint(f, "seed", what, UINT64_MAX, &m->seed);
    if (st == SL_OK) st = meta_uint(f, "dropout_counter", what, UINT64_MAX, &m->dropout_counter);
    o->nesterov = (int)nesterov;
    m->step = (int64_t)step;
    return st;
}

/* Slots: the network's tensors, then the optimizer state's. */
static sl_status snapshot_slots(sl_net *net, const sl_optimizer_options *o, sl_tensor_slot **out,
                                int *n_out)
{
    const char *names[SL_OPT_STATE_MAX];
    int per = sl_optimizer_state_blocks(o, names);
    int n = net->n_params + trainable_count(net) * per;
    sl_tensor_slot *s = sl_calloc((size_t)n + 1, sizeof *s);
    if (!s)
        return sl_set_error(SL_ERR_NOMEM, "out of memory listing the snapshot's tensors");
    sl_tensor_slot *params = NULL;
    int np = 0;
    sl_status st = sl_net_tensor_slots(net, &params, &np);
    if (st != SL_OK) {
        free(s);
        return st;
    }
    memcpy(s, params, (size_t)np * sizeof *s);
    int k = np;
    for (int i = 0; i < np; i++) {
        if (!net->params[i].spec->trainable)
            continue;
        for (int j = 0; j < per; j++) {
            s[k] = params[i];
            snprintf(s[k].name, sizeof s[k].name, "optimizer.%s.%s", net->params[i].name,
                     names[j]);
            k++;
        }
    }
    free(params);
    *out = s;
    *n_out = k;
    return SL_OK;
}

typedef struct load_ctx {
    const sl_tensor_slot *next; /* state slots, in visit order */
    sl_net *net;
    const sl_host_view *view;
} load_ctx;

static void copy_state(void *user, int param, int per, float *const *blocks)
{
    (void)param;
    load_ctx *c = user;
    for (int k = 0; k < per; k++) {
        sl_slot_copy(sl_host_view_at(c->net, c->view, blocks[k]), c->next);
        c->next++;
    }
}

/* Everything validated: set the optimizer (the one step that can fail,
 * and it fails before changing anything), then copy. */
static sl_status commit(sl_net *net, const snapshot_meta *m, const sl_tensor_slot *slots,
                        const char *what, const char *fn)
{
    sl_status st = sl_net_set_optimizer(net, &m->opt);
    if (st != SL_OK)
        return sl_set_error(st == SL_ERR_INVALID_ARG ? SL_ERR_FORMAT : st,
                            "%s: '%s': the snapshot's optimizer cannot be set: %s", fn, what,
                            sl_last_error());
    const char *names[SL_OPT_STATE_MAX];
    int per = sl_optimizer_state_blocks(&m->opt, names);
    if (net->opt_floats != net->grad_floats * (size_t)per)
        return sl_set_error(SL_ERR_STATE, "%s: internal: optimizer state of %zu floats, expected %zu",
                            fn, net->opt_floats, net->grad_floats * (size_t)per);
    sl_host_view view;
    st = sl_host_view_open(net, &view);
    if (st != SL_OK)
        return st;
    for (int i = 0; i < net->n_params; i++)
        sl_slot_copy(sl_host_view_at(net, &view, net->params[i].spec->data), &slots[i]);
    load_ctx c = {slots + net->n_params, net, &view};
    sl_net_visit_optimizer_state(net, copy_state, &c);
    st = sl_host_view_commit(net, &view);
    sl_host_view_close(net, &view);
    if (st != SL_OK)
        return st;
    net->optim.steps = m->step;
    net->ctx->seed = m->seed;
    net->ctx->dropout_counter = m->dropout_counter;
    return SL_OK;
}

sl_status sl_snapshot_load_memory(sl_net *net, const uint8_t *buf, size_t bytes, const char *what,
                                  const sl_load_options *opts)
{
    static const char fn[] = "sl_load_snapshot";
    if (!net || (!buf && bytes))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or data is NULL", fn);
    if (net->dp.shard && net->dp.comm)
        return sl_set_error(SL_ERR_STATE, "%s: the network's optimizer state is sharded over its "
                            "ranks (sl_dist_options.shard); load the snapshot on every rank (or "
                            "rank 0) before sl_dist_join, which slices it", fn);
    static const uint8_t empty[1];
    if (!buf)
        buf = empty;
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return sl_set_error(st, "%s: %s", fn, sl_last_error());
    sl_st_file f;
    st = sl_st_parse(buf, bytes, what, &f);
    if (st != SL_OK)
        return sl_set_error(st, "%s: %s", fn, sl_last_error());
    snapshot_meta m;
    st = read_meta(&f, what, &m);
    if (st != SL_OK)
        st = sl_set_error(st, "%s: %s", fn, sl_last_error());
    sl_tensor_slot *slots = NULL;
    int n = 0;
    if (st == SL_OK)
        st = snapshot_slots(net, &m.opt, &slots, &n);
    /* Always strict: a snapshot resumes the whole state or nothing. */
    sl_load_options strict = opts ? *opts : sl_load_defaults();
    strict.strict = 1;
    if (st == SL_OK)
        st = sl_match_tensors(&f, slots, n, &strict, NULL, what, NULL, fn);
    if (st == SL_OK && !strict.allow_nonfinite)
        st = sl_check_finite(slots, n, what, fn);
    if (st == SL_OK)
        st = commit(net, &m, slots, what, fn);
    free(slots);
    sl_st_release(&f);
    return st;
}

static sl_status load_snapshot_bytes(sl_net *net, const uint8_t *buf, size_t bytes,
                                     const char *what, void *user)
{
    return sl_snapshot_load_memory(net, buf, bytes, what, user);
}

sl_status sl_load_snapshot(sl_net *net, const char *path)
{
    return sl_net_load_file(net, path, "sl_load_snapshot", load_snapshot_bytes, NULL);
}

sl_status sl_load_snapshot_with(sl_net *net, const char *path, const sl_load_options *opts)
{
    sl_load_options o = opts ? *opts : sl_load_defaults();
    /* One name in messages for both calls: they are one loader. */
    return sl_net_load_file(net, path, "sl_load_snapshot", load_snapshot_bytes, &o);
}
