/*
 * safetensors.c — the .safetensors container: parsing and validating a
 * whole file held in memory, and writing one. The JSON header is read and
 * written with cJSON. A parsed file is trusted by the loaders only after
 * every rule of the format holds: known dtypes, integral shapes and
 * offsets, each entry's byte range equal to its shape times its dtype's
 * size, and the ranges covering the data section exactly (no overlap, no
 * hole, nothing past the end).
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this file assumes a little-endian host"
#endif

static const struct {
    const char *name;
    unsigned bytes;
} dtypes[SL_ST_DTYPE_COUNT] = {
    [SL_ST_BOOL] = {"BOOL", 1}, [SL_ST_U8] = {"U8", 1},     [SL_ST_I8] = {"I8", 1},
    [SL_ST_F8_E4M3] = {"F8_E4M3", 1}, [SL_ST_F8_E5M2] = {"F8_E5M2", 1},
    [SL_ST_I16] = {"I16", 2},   [SL_ST_U16] = {"U16", 2},   [SL_ST_F16] = {"F16", 2},
    [SL_ST_BF16] = {"BF16", 2}, [SL_ST_I32] = {"I32", 4},   [SL_ST_U32] = {"U32", 4},
    [SL_ST_F32] = {"F32", 4},   [SL_ST_F64] = {"F64", 8},   [SL_ST_I64] = {"I64", 8},
    [SL_ST_U64] = {"U64", 8},
};

const char *sl_st_dtype_name(sl_st_dtype dtype)
{
    return dtype >= 0 && dtype < SL_ST_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

static int dtype_from_name(const char *name)
{
    for (int i = 0; i < SL_ST_DTYPE_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return i;
    return -1;
}

static uint64_t read_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void write_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A JSON number that is an exact integer in [0, 2^53]. */
static int json_uint(const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item))
        return 0;
    double v = item->valuedouble;
    if (!(v >= 0.0 && v <= 9007199254740992.0) || (double)(uint64_t)v != v)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

/* ---- parsing ---- */

typedef struct parse_state {
    const char *what;
    size_t data_bytes;
    const uint8_t *data;
} parse_state;

static sl_status bad(const parse_state *ps, const char *name, const char *problem)
{
    if (name)
        return sl_fail(SL_ERR_FORMAT, "'%s': tensor '%s': %s", ps->what, name, problem);
    return sl_fail(SL_ERR_FORMAT, "'%s': %s", ps->what, problem);
}

static sl_status parse_shape(const parse_state *ps, const cJSON *shape, sl_st_entry *e,
                             uint64_t *numel)
{
    if (!cJSON_IsArray(shape))
        return bad(ps, e->name, "\"shape\" is missing or not an array");
    *numel = 1;
    int nd = 0;
    for (const cJSON *d = shape->child; d; d = d->next, nd++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return bad(ps, e->name, "\"shape\" holds something other than a non-negative integer");
        if (nd < SL_ST_DIMS_KEPT)
            e->dims[nd] = v;
        if (v != 0 && *numel > UINT64_MAX / v)
            return bad(ps, e->name, "\"shape\" has more elements than can exist");
        *numel *= v;
    }
    e->ndim = nd;
    return SL_OK;
}

static sl_status parse_entry(const parse_state *ps, const cJSON *item, sl_st_entry *e)
{
    char msg[256];
    e->name = item->string;
    if (!cJSON_IsObject(item))
        return bad(ps, e->name, "its header entry is not a JSON object");
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dtype))
        return bad(ps, e->name, "\"dtype\" is missing or not a string");
    int dt = dtype_from_name(dtype->valuestring);
    if (dt < 0) {
        snprintf(msg, sizeof msg, "unknown dtype \"%.32s\"", dtype->valuestring);
        return bad(ps, e->name, msg);
    }
    e->dtype = (sl_st_dtype)dt;
    uint64_t numel = 0;
    sl_status st = parse_shape(ps, shape, e, &numel);
    if (st != SL_OK)
        return st;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !json_uint(offs->child, &e->begin) || !json_uint(offs->child->next, &e->end))
        return bad(ps, e->name, "\"data_offsets\" is missing or not two non-negative integers");
    if (e->begin > e->end) {
        snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] end before they begin",
                 (unsigned long long)e->begin, (unsigned long long)e->end);
        return bad(ps, e->name, msg);
    }
    unsigned size = dtypes[dt].bytes;
    if (numel > UINT64_MAX / size || numel * size != e->end - e->begin) {
        snprintf(msg, sizeof msg,
                 "data_offsets [%llu, %llu] span %llu bytes, but its shape and dtype %s need "
                 "%s%llu",
                 (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)(e->end - e->begin), dtypes[dt].name,
                 numel > UINT64_MAX / size ? "more than " : "",
                 numel > UINT64_MAX / size ? (unsigned long long)UINT64_MAX
                                           : (unsigned long long)(numel * size));
        return bad(ps, e->name, msg);
    }
    if (e->end > ps->data_bytes) {
        snprintf(msg, sizeof msg,
                 "data_offsets [%llu, %llu] run past the end of the data section (%zu bytes): "
                 "truncated file or lying header",
                 (unsigned long long)e->begin, (unsigned long long)e->end, ps->data_bytes);
        return bad(ps, e->name, msg);
    }
    e->data = ps->data + e->begin;
    return SL_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sl_st_entry *)a)->name, ((const sl_st_entry *)b)->name);
}

static int by_range(const void *a, const void *b)
{
    const sl_st_entry *x = *(const sl_st_entry *const *)a, *y = *(const sl_st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* The byte ranges, in order, tile [0, data_bytes) exactly. */
static sl_status check_coverage(const parse_state *ps, sl_st_file *f)
{
    const sl_st_entry **order = malloc(((size_t)f->n + 1) * sizeof *order);
    if (!order)
        return sl_fail(SL_ERR_NOMEM, "%s: out of memory checking data offsets", ps->what);
    for (int i = 0; i < f->n; i++)
        order[i] = &f->entries[i];
    qsort(order, (size_t)f->n, sizeof *order, by_range);
    sl_status st = SL_OK;
    uint64_t at = 0;
    char msg[SL_ST_NAME_MAX + 160];
    for (int i = 0; i < f->n && st == SL_OK; i++) {
        const sl_st_entry *e = order[i];
        if (e->begin > at) {
            snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] leave bytes [%llu, %llu) unused",
                     (unsigned long long)e->begin, (unsigned long long)e->end,
                     (unsigned long long)at, (unsigned long long)e->begin);
            st = bad(ps, e->name, msg);
        } else if (e->begin < at) {
            snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] overlap tensor '%s' (ends at %llu)",
                     (unsigned long long)e->begin, (unsigned long long)e->end,
                     order[i - 1]->name, (unsigned long long)at);
            st = bad(ps, e->name, msg);
        }
        at = e->end;
    }
    if (st == SL_OK && at != ps->data_bytes) {
        snprintf(msg, sizeof msg,
                 "the data section has %zu bytes but the tensors cover %llu: %llu bytes belong "
                 "to no tensor",
                 ps->data_bytes, (unsigned long long)at,
                 (unsigned long long)(ps->data_bytes - at));
        st = bad(ps, NULL, msg);
    }
    free(order);
    return st;
}

static sl_status check_metadata(const parse_state *ps, const cJSON *meta)
{
    if (!cJSON_IsObject(meta))
        return bad(ps, NULL, "\"__metadata__\" is not a JSON object");
    for (const cJSON *m = meta->child; m; m = m->next)
        if (!cJSON_IsString(m)) {
            char msg[128];
            snprintf(msg, sizeof msg, "\"__metadata__\" value of \"%.64s\" is not a string",
                     m->string);
            return bad(ps, NULL, msg);
        }
    return SL_OK;
}

/* Entries of the parsed header into f (sorted, unique, each valid). */
static sl_status collect_entries(const parse_state *ps, const cJSON *root, sl_st_file *f)
{
    int n = 0;
    for (const cJSON *it = root->child; it; it = it->next)
        n++;
    f->entries = calloc((size_t)n + 1, sizeof *f->entries);
    if (!f->entries)
        return sl_fail(SL_ERR_NOMEM, "%s: out of memory reading the header", ps->what);
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            if (f->metadata)
                return bad(ps, NULL, "\"__metadata__\" appears twice");
            sl_status st = check_metadata(ps, it);
            if (st != SL_OK)
                return st;
            f->metadata = it;
            continue;
        }
        sl_status st = parse_entry(ps, it, &f->entries[f->n]);
        if (st != SL_OK)
            return st;
        f->n++;
    }
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->entries[i - 1].name, f->entries[i].name) == 0)
            return bad(ps, f->entries[i].name, "appears twice in the header");
    return check_coverage(ps, f);
}

/* The header text, parsed: a JSON object, then nothing but spaces. */
static sl_status parse_header(const parse_state *ps, const uint8_t *text, size_t len,
                              cJSON **out)
{
    /* cJSON reads a NUL-terminated copy: no read can pass the end. */
    char *copy = malloc(len + 1);
    if (!copy)
        return sl_fail(SL_ERR_NOMEM, "%s: out of memory for a %zu-byte header", ps->what, len);
    memcpy(copy, text, len);
    copy[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len, &end, 0);
    sl_status st = SL_OK;
    if (!root) {
        char msg[96];
        size_t at = end && end >= copy ? (size_t)(end - copy) : 0;
        snprintf(msg, sizeof msg, "the header is not valid JSON (near byte %zu of %zu)", at, len);
        st = bad(ps, NULL, msg);
    } else if (!cJSON_IsObject(root)) {
        st = bad(ps, NULL, "the header is not a JSON object");
    } else {
        for (const char *p = end; p < copy + len && st == SL_OK; p++)
            if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
                st = bad(ps, NULL, "the header has bytes after its JSON object");
    }
    free(copy);
    if (st != SL_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return SL_OK;
}

sl_status sl_st_parse(const uint8_t *buf, size_t bytes, const char *what, sl_st_file *out)
{
    memset(out, 0, sizeof *out);
    parse_state ps = {what, 0, NULL};
    char msg[160];
    if (bytes < 8) {
        snprintf(msg, sizeof msg,
                 "the file has %zu bytes, fewer than the 8 of a safetensors header length", bytes);
        return bad(&ps, NULL, msg);
    }
    uint64_t hlen = read_le64(buf);
    if (hlen > bytes - 8) {
        snprintf(msg, sizeof msg,
                 "header length %llu exceeds the %zu bytes after it: truncated or not safetensors",
                 (unsigned long long)hlen, bytes - 8);
        return bad(&ps, NULL, msg);
    }
    if (hlen > SL_ST_HEADER_MAX) {
        snprintf(msg, sizeof msg, "header length %llu exceeds the limit of %llu bytes",
                 (unsigned long long)hlen, SL_ST_HEADER_MAX);
        return bad(&ps, NULL, msg);
    }
    if (hlen < 2 || buf[8] != '{')
        return bad(&ps, NULL, "the header does not start with '{': not a safetensors file");
    ps.data = buf + 8 + hlen;
    ps.data_bytes = bytes - 8 - (size_t)hlen;
    cJSON *root = NULL;
    sl_status st = parse_header(&ps, buf + 8, (size_t)hlen, &root);
    if (st != SL_OK)
        return st;
    out->json = root;
    st = collect_entries(&ps, root, out);
    if (st != SL_OK)
        sl_st_release(out);
    return st;
}

void sl_st_release(sl_st_file *f)
{
    if (!f)
        return;
    cJSON_Delete(f->json);
    free(f->entries);
    memset(f, 0, sizeof *f);
}

const sl_st_entry *sl_st_find(const sl_st_file *f, const char *name)
{
    if (!f->n)
        return NULL;
    sl_st_entry key;
    memset(&key, 0, sizeof key);
    key.name = name;
    return bsearch(&key, f->entries, (size_t)f->n, sizeof *f->entries, by_name);
}

const char *sl_st_metadata(const sl_st_file *f, const char *key)
{
    if (!f->metadata)
        return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- writing ---- */

static cJSON *entry_json(const sl_st_tensor *t, uint64_t begin)
{
    cJSON *e = cJSON_CreateObject();
    cJSON *shape = cJSON_CreateArray();
    cJSON *offs = cJSON_CreateArray();
    int ok = e && shape && offs && cJSON_AddStringToObject(e, "dtype", sl_st_dtype_name(t->dtype));
    for (int d = 0; ok && d < t->ndim; d++) {
        cJSON *v = cJSON_CreateNumber((double)t->dims[d]);
        ok = v && cJSON_AddItemToArray(shape, v);
    }
    cJSON *b = ok ? cJSON_CreateNumber((double)begin) : NULL;
    ok = b && cJSON_AddItemToArray(offs, b);
    cJSON *en = ok ? cJSON_CreateNumber((double)(begin + t->bytes)) : NULL;
    ok = en && cJSON_AddItemToArray(offs, en);
    ok = ok && cJSON_AddItemToObject(e, "shape", shape);
    if (ok)
        shape = NULL;
    ok = ok && cJSON_AddItemToObject(e, "data_offsets", offs);
    if (ok)
        return e;
    cJSON_Delete(shape);
    cJSON_Delete(offs);
    cJSON_Delete(e);
    return NULL;
}

/* The header text padded with spaces to a multiple of 8 bytes (as the
 * reference writer does, so the data section starts aligned). */
static char *header_text(const sl_st_tensor *t, int n, const char *const (*meta)[2], int n_meta,
                         size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    if (ok && n_meta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < n_meta && ok; i++)
            ok = cJSON_AddStringToObject(m, meta[i][0], meta[i][1]) != NULL;
        ok = ok && m;
    }
    uint64_t at = 0;
    for (int i = 0; i < n && ok; i++) {
        cJSON *e = entry_json(&t[i], at);
        ok = e && cJSON_AddItemToObject(root, t[i].name, e);
        if (!ok)
            cJSON_Delete(e);
        at += t[i].bytes;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json)
        return NULL;
    size_t raw = strlen(json), padded = (raw + 7) / 8 * 8;
    char *text = malloc(padded + 1);
    if (text) {
        memcpy(text, json, raw);
        memset(text + raw, ' ', padded - raw);
        text[padded] = '\0';
        *len = padded;
    }
    cJSON_free(json);
    return text;
}

sl_status sl_st_write(const char *path, const sl_st_tensor *tensors, int n,
                      const char *const (*meta)[2], int n_meta, const char *fn)
{
    size_t hlen = 0;
    char *header = header_text(tensors, n, meta, n_meta, &hlen);
    if (!header)
        return sl_fail(SL_ERR_NOMEM, "%s: out of memory building the header of '%s'", fn, path);
    sl_atomic_file af;
    sl_status st = sl_atomic_open(&af, path, fn);
    if (st == SL_OK) {
        uint8_t len8[8];
        write_le64(len8, hlen);
        st = sl_atomic_write(&af, len8, sizeof len8);
        if (st == SL_OK)
            st = sl_atomic_write(&af, header, hlen);
        for (int i = 0; i < n && st == SL_OK; i++)
            st = sl_atomic_write(&af, tensors[i].data, tensors[i].bytes);
        if (st == SL_OK)
            st = sl_atomic_commit(&af);
        else
            sl_atomic_abort(&af);
    }
    free(header);
    return st;
}
