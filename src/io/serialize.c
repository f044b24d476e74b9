/*
 * serialize.c — model files (io stage): sl_save_model / sl_load_model, and
 * the mapping between a network's named tensors and a safetensors file
 * that snapshots (snapshot.c) share. A model file holds parameters and
 * BatchNorm running statistics only (neuraltalk2's lesson: a 2 MB model
 * saves as about 2 MB). Loading validates the whole file, matches every
 * name, shape and dtype, and only then copies the staged bytes into the
 * network, so a failed load changes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "io/serialize.h"

#define NBT_SUFFIX ".num_batches_tracked"
/* Hugging Face's name for a causal LM's output projection. */
#define SL_HF_LM_HEAD "lm_head.weight"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

sl_load_options sl_load_defaults(void)
{
    sl_load_options o = {1, NULL, NULL, 0};
    return o;
}

/* ---- the network's tensors ---- */

sl_status sl_net_tensor_slots(sl_net *net, sl_tensor_slot **slots, int *n)
{
    sl_tensor_slot *s = sl_calloc((size_t)net->n_params + 1, sizeof *s);
    if (!s)
        return sl_set_error(SL_ERR_NOMEM, "out of memory listing the network's tensors");
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        snprintf(s[i].name, sizeof s[i].name, "%s", net->params[i].name);
        s[i].ndim = p->ndim;
        memcpy(s[i].dims, p->dims, sizeof s[i].dims);
        s[i].count = p->count;
    }
    *slots = s;
    *n = net->n_params;
    return SL_OK;
}

sl_status sl_net_model_tensors(sl_net *net, const sl_host_view *view, const int64_t *steps,
                               int extra, sl_st_tensor **tensors, int *n)
{
    int bn = 0;
    for (int i = 0; i < net->n_params; i++)
        bn += ends_with(net->params[i].name, ".running_var");
    sl_st_tensor *t = sl_calloc((size_t)(net->n_params + bn + extra) + 1, sizeof *t);
    if (!t)
        return sl_set_error(SL_ERR_NOMEM, "out of memory listing the network's tensors");
    int k = 0;
    for (int i = 0; i < net->n_params; i++) {
        const sl_param_spec *p = net->params[i].spec;
        const char *name = net->params[i].name;
        sl_st_tensor *e = &t[k++];
        snprintf(e->name, sizeof e->name, "%s", name);
        e->dtype = SL_ST_F32;
        e->ndim = p->ndim;
        memcpy(e->dims, p->dims, sizeof e->dims);
        e->data = sl_host_view_at(net, view, p->data);
        e->bytes = p->count * sizeof(float);
        if (ends_with(name, ".running_var")) {
            /* PyTorch's BatchNorm counter, so load_state_dict(strict=True)
             * finds every key it expects. */
            sl_st_tensor *c = &t[k++];
            snprintf(c->name, sizeof c->name, "%.*s%s",
                     (int)(strlen(name) - strlen(".running_var")), name, NBT_SUFFIX);
            c->dtype = SL_ST_I64;
            c->ndim = 0;
            c->data = steps;
            c->bytes = sizeof *steps;
        }
    }
    *tensors = t;
    *n = k;
    return SL_OK;
}

/* ---- matching a file against the network ---- */

typedef struct issue_log {
    const sl_load_options *opts;
    sl_load_report *report;
    int count;
    sl_status first_status;
    char first[SL_ST_NAME_MAX + 200];
} issue_log;

static void note_issue(issue_log *log, const char *name, sl_load_issue kind, sl_status st,
                       const char *detail)
{
    if (kind == SL_LOAD_MISSING)
        log->report->missing++;
    else if (kind == SL_LOAD_UNEXPECTED)
        log->report->unexpected++;
    else
        log->report->mismatched++;
    if (log->count++ == 0) {
        log->first_status = st;
        snprintf(log->first, sizeof log->first, "tensor '%s': %s", name, detail);
    }
    if (log->opts->on_issue)
        log->opts->on_issue(log->opts->user, name, kind, detail);
}

static void format_dims_u64(char *buf, size_t n, int ndim, const uint64_t *dims)
{
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && at < n; d++) {
        if (d == SL_ST_DIMS_KEPT) {
            at += (size_t)snprintf(buf + at, n - at, ", ...");
            break;
        }
        at += (size_t)snprintf(buf + at, n - at, "%s%llu", d ? ", " : "",
                               (unsigned long long)dims[d]);
    }
    if (at < n)
        snprintf(buf + at, n - at, "]");
}

static int same_shape(const sl_tensor_slot *s, const sl_st_entry *e)
{
    if (e->ndim != s->ndim)
        return 0;
    for (int d = 0; d < s->ndim; d++)
        if (e->dims[d] != (uint64_t)s->dims[d])
            return 0;
    return 1;
}

/* Checks one slot against its entry; returns 1 when it can be loaded. */
static int match_slot(issue_log *log, sl_tensor_slot *s, const sl_st_entry *e)
{
    char detail[256], fs[96], ns[96];
    if (e->dtype != SL_ST_F32 && e->dtype != SL_ST_F16 && e->dtype != SL_ST_BF16) {
        snprintf(detail, sizeof detail,
                 "dtype %s in the file, F32 in the network (F32, F16 and BF16 load)",
                 sl_st_dtype_name(e->dtype));
        note_issue(log, s->name, SL_LOAD_MISMATCHED, SL_ERR_FORMAT, detail);
        return 0;
    }
    if (!same_shape(s, e)) {
        uint64_t nd[4];
        for (int d = 0; d < 4; d++)
            nd[d] = (uint64_t)s->dims[d];
        format_dims_u64(fs, sizeof fs, e->ndim, e->dims);
        format_dims_u64(ns, sizeof ns, s->ndim, nd);
        snprintf(detail, sizeof detail, "shape %s in the file, %s in the network", fs, ns);
        note_issue(log, s->name, SL_LOAD_MISMATCHED, SL_ERR_SHAPE, detail);
        return 0;
    }
    s->src = e->data;
    s->src_dtype = e->dtype;
    return 1;
}

void sl_slot_copy(float *dst, const sl_tensor_slot *slot)
{
    const uint8_t *p = slot->src;
    if (slot->src_dtype == SL_ST_F32) {
        memcpy(dst, p, slot->count * sizeof(float));
        return;
    }
    for (size_t i = 0; i < slot->count; i++) {
        uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
        dst[i] = slot->src_dtype == SL_ST_F16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
    }
}

/* Whether the 16-bit value h of dtype t (F16 or BF16) is a NaN or an
 * infinity: its exponent bits are all ones. */
static int half_nonfinite(uint16_t h, sl_st_dtype t)
{
    return t == SL_ST_F16 ? (h & 0x7c00u) == 0x7c00u : (h & 0x7f80u) == 0x7f80u;
}

/* The index of a matched slot's first NaN or infinity, or slot->count
 * when every value is finite. Reads the file's bits, so no value is
 * widened twice. */
static size_t first_nonfinite(const sl_tensor_slot *slot, float *value)
{
    const uint8_t *p = slot->src;
    for (size_t i = 0; i < slot->count; i++) {
        if (slot->src_dtype == SL_ST_F32) {
            uint32_t b;
            memcpy(&b, p + 4 * i, 4);
            if ((b & 0x7f800000u) != 0x7f800000u)
                continue;
            memcpy(value, &b, 4);
            return i;
        }
        uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
        if (!half_nonfinite(h, slot->src_dtype))
            continue;
        *value = slot->src_dtype == SL_ST_F16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
        return i;
    }
    return slot->count;
}

sl_status sl_check_finite(const sl_tensor_slot *slots, int n, const char *what, const char *fn)
{
    for (int k = 0; k < n; k++) {
        const sl_tensor_slot *s = &slots[k];
        float value = 0.0f;
        size_t i = s->src ? first_nonfinite(s, &value) : s->count;
        if (i == s->count)
            continue;
        /* The flat index as a position in the tensor's shape, row-major. */
        size_t rest = i, stride = s->count;
        char at[96] = "";
        size_t used = 0;
        for (int d = 0; d < s->ndim && s->dims[d] > 0 && used < sizeof at; d++) {
            stride /= (size_t)s->dims[d];
            used += (size_t)snprintf(at + used, sizeof at - used, "%s%zu", d ? ", " : "",
                                     stride ? rest / stride : 0);
            rest = stride ? rest % stride : 0;
        }
        return sl_set_error(SL_ERR_FORMAT,
                            "%s: '%s': tensor '%s' holds %s at element %zu (index [%s]) of %zu: "
                            "a network with a NaN or infinite value computes NaN; nothing was "
                            "loaded (sl_load_options.allow_nonfinite loads it anyway)",
                            fn, what, s->name,
                            isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf", i, at, s->count);
    }
    return SL_OK;
}

/* Hugging Face's GPT2Attention buffers: "P.attn.bias" (the causal mask)
 * and "P.attn.masked_bias" (a constant), which older versions saved. They
 * are ignored only beside a GPT-2 attention of the network, one with a
 * tensor "P.attn.c_attn.weight". */
static int is_hf_attention_buffer(const sl_st_entry *e, const sl_tensor_slot *slots, int n)
{
    static const char *const suffixes[] = {".attn.bias", ".attn.masked_bias"};
    if (e->name_len != strlen(e->name))
        return 0;
    for (size_t k = 0; k < sizeof suffixes / sizeof *suffixes; k++) {
        if (!ends_with(e->name, suffixes[k]))
            continue;
        size_t prefix = e->name_len - strlen(suffixes[k]);
        static const char tail[] = ".attn.c_attn.weight";
        char want[SL_ST_NAME_MAX + sizeof tail];
        if (prefix + sizeof tail > sizeof want)
            return 0;
        memcpy(want, e->name, prefix);
        memcpy(want + prefix, tail, sizeof tail);
        for (int i = 0; i < n; i++)
            if (strcmp(slots[i].name, want) == 0)
                return 1;
    }
    return 0;
}

/* Element i of an F32, F16 or BF16 entry as F32 bits (widened exactly). */
static uint32_t entry_bits(const sl_st_entry *e, uint64_t i)
{
    const uint8_t *p = e->data;
    if (e->dtype == SL_ST_F32) {
        uint32_t b;
        memcpy(&b, p + 4 * i, 4);
        return b;
    }
    uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
    float x = e->dtype == SL_ST_F16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

/* "lm_head.weight" against the tensor the network's head is tied to:
 * NULL when the file's copy equals the file's tied tensor (same shape,
 * the same values bit for bit once widened to F32), else why not. */
static const char *untied_head_problem(const sl_st_file *f, const sl_st_entry *head,
                                       const char *tied, char *buf, size_t size)
{
    const sl_st_entry *w = sl_st_find(f, tied);
    if (!w) {
        snprintf(buf, size, "the network's LM head is tied to '%s', which the file lacks", tied);
        return buf;
    }
    int ok = head->ndim == w->ndim;
    for (int d = 0; ok && d < head->ndim && d < SL_ST_DIMS_KEPT; d++)
        ok = head->dims[d] == w->dims[d];
    for (int k = 0; k < 2 && ok; k++) {
        sl_st_dtype t = k ? w->dtype : head->dtype;
        ok = t == SL_ST_F32 || t == SL_ST_F16 || t == SL_ST_BF16;
    }
    uint64_t count = ok ? (head->end - head->begin) * 8 / sl_st_dtype_bits(head->dtype) : 0;
    ok = ok && count == (w->end - w->begin) * 8 / sl_st_dtype_bits(w->dtype);
    for (uint64_t i = 0; ok && i < count; i++)
        ok = entry_bits(head, i) == entry_bits(w, i);
    if (ok)
        return NULL;
    snprintf(buf, size, "differs from '%s' in the file, but this network's LM head is tied to "
             "'%s' (one tensor for both): an untied LM head cannot load into it", tied, tied);
    return buf;
}

sl_status sl_match_tensors(const sl_st_file *f, sl_tensor_slot *slots, int n,
                           const sl_load_options *opts, sl_load_report *report, const char *what,
                           const char *tied_head, const char *fn)
{
    sl_load_report local;
    memset(&local, 0, sizeof local);
    issue_log log;
    memset(&log, 0, sizeof log);
    log.opts = opts;
    log.report = report ? report : &local;
    memset(log.report, 0, sizeof *log.report);
    char *claimed = sl_calloc((size_t)f->n + 1, 1);
    if (!claimed)
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory matching tensors", fn);
    for (int i = 0; i < n; i++) {
        slots[i].src = NULL;
        const sl_st_entry *e = sl_st_find(f, slots[i].name);
        if (!e) {
            note_issue(&log, slots[i].name, SL_LOAD_MISSING, SL_ERR_NOT_FOUND,
                       "missing from the file");
            continue;
        }
        claimed[e - f->entries] = 1;
        match_slot(&log, &slots[i], e);
    }
    for (int j = 0; j < f->n; j++) {
        if (claimed[j])
            continue;
        const sl_st_entry *e = &f->entries[j];
        char label[SL_ST_NAME_MAX + 16];
        char why[256];
        if (e->name_len == strlen(e->name) && ends_with(e->name, NBT_SUFFIX))
            log.report->ignored++;
        else if (is_hf_attention_buffer(e, slots, n))
            log.report->ignored++;
        else if (tied_head && e->name_len == strlen(e->name) &&
                 strcmp(e->name, SL_HF_LM_HEAD) == 0) {
            const char *problem = untied_head_problem(f, e, tied_head, why, sizeof why);
            if (problem)
                note_issue(&log, SL_HF_LM_HEAD, SL_LOAD_MISMATCHED, SL_ERR_FORMAT, problem);
            else
                log.report->ignored++;
        } else
            note_issue(&log, sl_st_entry_label(e, label, sizeof label), SL_LOAD_UNEXPECTED,
                       SL_ERR_NOT_FOUND,
                       "in the file, but the network has no tensor of that name");
    }
    free(claimed);
    if (opts->strict && log.count) {
        char more[96] = "";
        if (log.count > 1)
            snprintf(more, sizeof more, " (and %d more problem%s)", log.count - 1,
                     log.count > 2 ? "s" : "");
        return sl_set_error(log.first_status, "%s: '%s': %s%s; nothing was loaded", fn, what,
                            log.first, more);
    }
    return SL_OK;
}

/* ---- models ---- */

static sl_status wrap(sl_status st, const char *fn)
{
    return sl_set_error(st, "%s: %s", fn, sl_last_error());
}

/* Parses, matches, then copies: the network changes only at the end. */
static sl_status load_model_bytes(sl_net *net, const uint8_t *buf, size_t bytes, const char *what,
                                  const sl_load_options *opts, sl_load_report *report,
                                  const char *fn)
{
    sl_load_options defaults = sl_load_defaults();
    if (!opts)
        opts = &defaults;
    if (report)
        memset(report, 0, sizeof *report);
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return wrap(st, fn);
    sl_st_file f;
    st = sl_st_parse(buf, bytes, what, &f);
    if (st != SL_OK)
        return wrap(st, fn);
    sl_tensor_slot *slots = NULL;
    int n = 0;
    st = sl_net_tensor_slots(net, &slots, &n);
    const char *tied = NULL;
    for (int i = 0; net->has_head && i < net->n_params; i++)
        if (net->params[i].spec == net->head.weight)
            tied = net->params[i].name;
    if (st == SL_OK)
        st = sl_match_tensors(&f, slots, n, opts, report, what, tied, fn);
    if (st == SL_OK && !opts->allow_nonfinite)
        st = sl_check_finite(slots, n, what, fn);
    sl_host_view view;
    if (st == SL_OK && (st = sl_host_view_open(net, &view)) == SL_OK) {
        int loaded = 0;
        for (int i = 0; i < n; i++)
            if (slots[i].src) {
                sl_slot_copy(sl_host_view_at(net, &view, net->params[i].spec->data), &slots[i]);
                loaded++;
            }
        st = sl_host_view_commit(net, &view);
        sl_host_view_close(net, &view);
        if (report && st == SL_OK)
            report->loaded = loaded;
    }
    free(slots);
    sl_st_release(&f);
    return st;
}

sl_status sl_load_model_memory(sl_net *net, const void *data, size_t bytes,
                               const sl_load_options *opts, sl_load_report *report)
{
    static const char fn[] = "sl_load_model_memory";
    if (!net || (!data && bytes))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or data is NULL", fn);
    static const uint8_t empty[1];
    sl_net_mark m = sl_net_mark_now(net);
    return sl_net_undo_first_use(
        net, m, load_model_bytes(net, data ? data : empty, bytes, "<memory>", opts, report, fn));
}

sl_status sl_net_load_file(sl_net *net, const char *path, const char *fn, sl_bytes_loader load,
                           void *user)
{
    if (!net || !path)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or path is NULL", fn);
    uint8_t *buf = NULL;
    size_t bytes = 0;
    sl_status st = sl_read_whole_file(path, fn, &buf, &bytes);
    if (st != SL_OK)
        return st;
    sl_net_mark m = sl_net_mark_now(net);
    st = sl_net_undo_first_use(net, m, load(net, buf, bytes, path, user));
    free(buf);
    return st;
}

typedef struct model_load {
    const sl_load_options *opts;
    sl_load_report *report;
} model_load;

static sl_status load_model_file_bytes(sl_net *net, const uint8_t *buf, size_t bytes,
                                       const char *what, void *user)
{
    const model_load *m = user;
    return load_model_bytes(net, buf, bytes, what, m->opts, m->report, "sl_load_model");
}

sl_status sl_load_model(sl_net *net, const char *path, const sl_load_options *opts,
                        sl_load_report *report)
{
    model_load m = {opts, report};
    return sl_net_load_file(net, path, "sl_load_model", load_model_file_bytes, &m);
}

/* The F32 tensors of t as 16-bit values in one block (*block, to free),
 * rounded to nearest even; fails on a finite value the type cannot hold. */
static sl_status narrow_tensors(sl_st_tensor *t, int n, sl_file_dtype dtype, uint16_t **block,
                                const char *fn)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (t[i].dtype == SL_ST_F32)
            total += t[i].bytes / sizeof(float);
    uint16_t *out = sl_malloc(total * sizeof *out);
    if (!out)
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory converting %zu values to %s", fn, total,
                            dtype == SL_FILE_F16 ? "F16" : "BF16");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].dtype != SL_ST_F32)
            continue;
        const float *src = t[i].data;
        size_t count = t[i].bytes / sizeof(float);
        for (size_t k = 0; k < count; k++) {
            uint16_t h = dtype == SL_FILE_F16 ? sl_f32_to_f16(src[k]) : sl_f32_to_bf16(src[k]);
            float back = dtype == SL_FILE_F16 ? sl_f16_to_f32(h) : sl_bf16_to_f32(h);
            if (isinf(back) && !isinf(src[k])) {
                sl_free(out);
                return sl_set_error(SL_ERR_INVALID_ARG,
                               "%s: tensor '%s' holds %g (element %zu), beyond the range of %s "
                               "(largest finite %s); save as %s; nothing was written",
                               fn, t[i].name, (double)src[k], k,
                               dtype == SL_FILE_F16 ? "F16" : "BF16",
                               dtype == SL_FILE_F16 ? "65504" : "3.39e38",
                               dtype == SL_FILE_F16 ? "BF16 or F32" : "F32");
            }
            out[at + k] = h; /* little-endian host: the file's byte order */
        }
        t[i].data = out + at;
        t[i].bytes = count * sizeof *out;
        t[i].dtype = dtype == SL_FILE_F16 ? SL_ST_F16 : SL_ST_BF16;
        at += count;
    }
    *block = out;
    return SL_OK;
}

/* The one path of a model file: in a communicator the communicator's
 * save (rank 0 writes), else this process's. */
static sl_status save_model(sl_net *net, const char *path, sl_file_dtype dtype, const char *fn)
{
    if (!net || !path)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: network or path is NULL", fn);
    if (dtype != SL_FILE_F32 && dtype != SL_FILE_BF16 && dtype != SL_FILE_F16)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: unknown file dtype %d", fn, (int)dtype);
    if (net->dp.comm && net->dp.comm->save)
        return net->dp.comm->save(net->dp.comm->user, path, 0, dtype, fn);
    return sl_save_model_here(net, path, dtype, fn);
}

sl_status sl_save_model_here(sl_net *net, const char *path, sl_file_dtype dtype, const char *fn)
{
    sl_net_mark m = sl_net_mark_now(net);
    sl_status st = sl_net_materialize(net);
    if (st != SL_OK)
        return wrap(st, fn);
    sl_st_tensor *t = NULL;
    uint16_t *narrow = NULL;
    int n = 0;
    sl_host_view view;
    st = sl_host_view_open(net, &view);
    if (st != SL_OK)
        return sl_net_undo_first_use(net, m, wrap(st, fn));
    st = sl_net_model_tensors(net, &view, &net->optim.steps, 0, &t, &n);
    if (st == SL_OK && dtype != SL_FILE_F32)
        st = narrow_tensors(t, n, dtype, &narrow, fn);
    if (st == SL_OK) {
        static const char *const meta[][2] = {{"format", "pt"}, {"producer", "sublinear"}};
        st = sl_st_write(path, t, n, meta, 2, fn);
    }
    sl_free(t);
    sl_free(narrow);
    sl_host_view_close(net, &view);
    return sl_net_undo_first_use(net, m, st);
}

sl_status sl_save_model(sl_net *net, const char *path)
{
    return save_model(net, path, SL_FILE_F32, "sl_save_model");
}

sl_save_options sl_save_defaults(void)
{
    sl_save_options o = {SL_FILE_F32};
    return o;
}

sl_status sl_save_model_with(sl_net *net, const char *path, const sl_save_options *opts)
{
    sl_save_options defaults = sl_save_defaults();
    return save_model(net, path, (opts ? opts : &defaults)->dtype, "sl_save_model_with");
}
