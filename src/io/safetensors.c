/*
 * safetensors.c — the .safetensors container (io stage): parsing and
 * validating a whole file held in memory, and writing one. The JSON header
 * is read with the strict reader of json.c and interpreted as the
 * reference implementation (safetensors 0.8, serde) does; a parsed file is
 * trusted by the loaders only after every rule of the format holds: known
 * dtypes, integral shapes and offsets, each entry's byte range equal to
 * its shape times its dtype's size, and the ranges covering the data
 * section exactly (no overlap, no hole, nothing past the end).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this file assumes a little-endian host"
#endif

static const struct {
    const char *name;
    unsigned bits;
} dtypes[SL_ST_DTYPE_COUNT] = {
    [SL_ST_BOOL] = {"BOOL", 8},        [SL_ST_F4] = {"F4", 4},
    [SL_ST_F6_E2M3] = {"F6_E2M3", 6},  [SL_ST_F6_E3M2] = {"F6_E3M2", 6},
    [SL_ST_U8] = {"U8", 8},            [SL_ST_I8] = {"I8", 8},
    [SL_ST_F8_E5M2] = {"F8_E5M2", 8},  [SL_ST_F8_E4M3] = {"F8_E4M3", 8},
    [SL_ST_F8_E8M0] = {"F8_E8M0", 8},  [SL_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [SL_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [SL_ST_I16] = {"I16", 16},         [SL_ST_U16] = {"U16", 16},
    [SL_ST_F16] = {"F16", 16},         [SL_ST_BF16] = {"BF16", 16},
    [SL_ST_I32] = {"I32", 32},         [SL_ST_U32] = {"U32", 32},
    [SL_ST_F32] = {"F32", 32},         [SL_ST_C64] = {"C64", 64},
    [SL_ST_F64] = {"F64", 64},         [SL_ST_I64] = {"I64", 64},
    [SL_ST_U64] = {"U64", 64},
};

const char *sl_st_dtype_name(sl_st_dtype dtype)
{
    return dtype >= 0 && dtype < SL_ST_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

unsigned sl_st_dtype_bits(sl_st_dtype dtype)
{
    return dtype >= 0 && dtype < SL_ST_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

/* Exact bytes: a name holding NUL names no dtype. */
static int dtype_from_name(const char *name, size_t len)
{
    for (int i = 0; i < SL_ST_DTYPE_COUNT; i++)
        if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, name, len) == 0)
            return i;
    return -1;
}

static int key_is(const sl_json_value *v, const char *key)
{
    size_t n = strlen(key);
    return v->key_len == n && memcmp(v->key, key, n) == 0;
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

const char *sl_st_entry_label(const sl_st_entry *e, char *buf, size_t size)
{
    sl_printable(buf, size, e->name, e->name_len);
    return buf;
}

/* ---- parsing ---- */

typedef struct parse_state {
    const char *what;
    size_t data_bytes;
    const uint8_t *data;
    const sl_json_doc *doc;
} parse_state;

static sl_status bad(const parse_state *ps, const sl_st_entry *e, const char *problem)
{
    if (e) {
        char label[SL_ST_NAME_MAX + 16];
        return sl_set_error(SL_ERR_FORMAT, "'%s': tensor '%s': %s", ps->what,
                            sl_st_entry_label(e, label, sizeof label), problem);
    }
    return sl_set_error(SL_ERR_FORMAT, "'%s': %s", ps->what, problem);
}

static const sl_json_value *at(const parse_state *ps, int i) { return i < 0 ? NULL : &ps->doc->v[i]; }

static sl_status parse_shape(const parse_state *ps, const sl_json_value *shape, sl_st_entry *e,
                             uint64_t *numel)
{
    if (!shape || shape->type != SL_JSON_ARRAY)
        return bad(ps, e, "\"shape\" is missing or not an array");
    *numel = 1;
    int nd = 0;
    for (const sl_json_value *d = at(ps, shape->child); d; d = at(ps, d->next), nd++) {
        if (d->type != SL_JSON_NUMBER || !d->is_uint)
            return bad(ps, e, "\"shape\" holds something other than a non-negative integer");
        if (nd < SL_ST_DIMS_KEPT)
            e->dims[nd] = d->uint;
        /* The reference multiplies left to right and fails on the first
         * overflow, even when a later dimension is 0. */
        if (d->uint != 0 && *numel > UINT64_MAX / d->uint)
            return bad(ps, e, "\"shape\" has more elements than can exist");
        *numel *= d->uint;
    }
    e->ndim = nd;
    return SL_OK;
}

/* "F32", or serde's other spelling of a unit variant: {"F32": null}. */
static sl_status parse_dtype(const parse_state *ps, const sl_json_value *v, sl_st_entry *e)
{
    const char *name = NULL;
    size_t len = 0;
    if (v && v->type == SL_JSON_STRING) {
        name = v->str;
        len = v->len;
    } else if (v && v->type == SL_JSON_OBJECT && v->count == 1 &&
               at(ps, v->child)->type == SL_JSON_NULL) {
        name = at(ps, v->child)->key;
        len = at(ps, v->child)->key_len;
    } else {
        return bad(ps, e, "\"dtype\" is missing or not a string");
    }
    int dt = dtype_from_name(name, len);
    if (dt < 0) {
        char msg[96], shown[48];
        sl_printable(shown, sizeof shown, name, len);
        snprintf(msg, sizeof msg, "unknown dtype \"%s\"", shown);
        return bad(ps, e, msg);
    }
    e->dtype = (sl_st_dtype)dt;
    return SL_OK;
}

/* The three fields of an entry: members of an object (others ignored, as
 * serde does; each of the three at most once), or an array of exactly
 * three (serde reads a struct from a sequence too). */
static sl_status entry_fields(const parse_state *ps, const sl_json_value *item, sl_st_entry *e,
                              const sl_json_value *f[3])
{
    static const char *const names[3] = {"dtype", "shape", "data_offsets"};
    f[0] = f[1] = f[2] = NULL;
    if (item->type == SL_JSON_ARRAY) {
        if (item->count != 3)
            return bad(ps, e, "its header entry is an array, but not of three items "
                              "(dtype, shape, data_offsets)");
        f[0] = at(ps, item->child);
        f[1] = at(ps, f[0]->next);
        f[2] = at(ps, f[1]->next);
        return SL_OK;
    }
    if (item->type != SL_JSON_OBJECT)
        return bad(ps, e, "its header entry is not a JSON object");
    for (const sl_json_value *m = at(ps, item->child); m; m = at(ps, m->next))
        for (int k = 0; k < 3; k++)
            if (key_is(m, names[k])) {
                if (f[k]) {
                    char msg[64];
                    snprintf(msg, sizeof msg, "\"%s\" appears twice in its entry", names[k]);
                    return bad(ps, e, msg);
                }
                f[k] = m;
            }
    return SL_OK;
}

static sl_status parse_entry(const parse_state *ps, const sl_json_value *item, sl_st_entry *e)
{
    char msg[256];
    e->name = item->key;
    e->name_len = item->key_len;
    const sl_json_value *f[3];
    sl_status st = entry_fields(ps, item, e, f);
    if (st == SL_OK)
        st = parse_dtype(ps, f[0], e);
    uint64_t numel = 0;
    if (st == SL_OK)
        st = parse_shape(ps, f[1], e, &numel);
    if (st != SL_OK)
        return st;
    const sl_json_value *offs = f[2], *b = offs ? at(ps, offs->child) : NULL;
    const sl_json_value *en = b ? at(ps, b->next) : NULL;
    if (!offs || offs->type != SL_JSON_ARRAY || offs->count != 2 || b->type != SL_JSON_NUMBER ||
        !b->is_uint || en->type != SL_JSON_NUMBER || !en->is_uint)
        return bad(ps, e, "\"data_offsets\" is missing or not two non-negative integers");
    e->begin = b->uint;
    e->end = en->uint;
    if (e->begin > e->end) {
        snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] end before they begin",
                 (unsigned long long)e->begin, (unsigned long long)e->end);
        return bad(ps, e, msg);
    }
    unsigned bits = dtypes[e->dtype].bits;
    int overflow = numel > UINT64_MAX / bits;
    if (!overflow && numel * bits % 8 != 0) {
        snprintf(msg, sizeof msg, "%llu elements of %s do not fill whole bytes",
                 (unsigned long long)numel, dtypes[e->dtype].name);
        return bad(ps, e, msg);
    }
    uint64_t need = overflow ? 0 : numel * bits / 8;
    if (overflow || need != e->end - e->begin) {
        snprintf(msg, sizeof msg,
                 "data_offsets [%llu, %llu] span %llu bytes, but its shape and dtype %s need "
                 "%s%llu",
                 (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)(e->end - e->begin), dtypes[e->dtype].name,
                 overflow ? "more than " : "",
                 overflow ? (unsigned long long)(UINT64_MAX / 8) : (unsigned long long)need);
        return bad(ps, e, msg);
    }
    if (e->end > ps->data_bytes) {
        snprintf(msg, sizeof msg,
                 "data_offsets [%llu, %llu] run past the end of the data section (%zu bytes): "
                 "truncated file or lying header",
                 (unsigned long long)e->begin, (unsigned long long)e->end, ps->data_bytes);
        return bad(ps, e, msg);
    }
    e->data = ps->data + e->begin;
    return SL_OK;
}

static int bytes_cmp(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    if (c)
        return c;
    return na < nb ? -1 : na > nb;
}

static int by_name(const void *a, const void *b)
{
    const sl_st_entry *x = a, *y = b;
    return bytes_cmp(x->name, x->name_len, y->name, y->name_len);
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
    const sl_st_entry **order = sl_malloc(((size_t)f->n + 1) * sizeof *order);
    if (!order)
        return sl_set_error(SL_ERR_NOMEM, "'%s': out of memory checking data offsets", ps->what);
    for (int i = 0; i < f->n; i++)
        order[i] = &f->entries[i];
    qsort(order, (size_t)f->n, sizeof *order, by_range);
    sl_status st = SL_OK;
    uint64_t pos = 0;
    char msg[SL_ST_NAME_MAX + 200], label[SL_ST_NAME_MAX + 16];
    for (int i = 0; i < f->n && st == SL_OK; i++) {
        const sl_st_entry *e = order[i];
        if (e->begin > pos) {
            snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] leave bytes [%llu, %llu) unused",
                     (unsigned long long)e->begin, (unsigned long long)e->end,
                     (unsigned long long)pos, (unsigned long long)e->begin);
            st = bad(ps, e, msg);
        } else if (e->begin < pos) {
            snprintf(msg, sizeof msg, "data_offsets [%llu, %llu] overlap tensor '%s' (ends at %llu)",
                     (unsigned long long)e->begin, (unsigned long long)e->end,
                     sl_st_entry_label(order[i - 1], label, sizeof label),
                     (unsigned long long)pos);
            st = bad(ps, e, msg);
        }
        pos = e->end;
    }
    if (st == SL_OK && pos != ps->data_bytes) {
        snprintf(msg, sizeof msg,
                 "the data section has %zu bytes but the tensors cover %llu: %llu bytes belong "
                 "to no tensor",
                 ps->data_bytes, (unsigned long long)pos,
                 (unsigned long long)(ps->data_bytes - pos));
        st = bad(ps, NULL, msg);
    }
    sl_free(order);
    return st;
}

static int by_key(const void *a, const void *b)
{
    const sl_json_value *x = *(const sl_json_value *const *)a, *y = *(const sl_json_value *const *)b;
    return bytes_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* null, or an object of string values with distinct keys. */
static sl_status check_metadata(const parse_state *ps, const sl_json_value *meta)
{
    if (meta->type == SL_JSON_NULL)
        return SL_OK;
    if (meta->type != SL_JSON_OBJECT)
        return bad(ps, NULL, "\"__metadata__\" is not a JSON object");
    char msg[160], shown[64];
    const sl_json_value **keys = sl_malloc(((size_t)meta->count + 1) * sizeof *keys);
    if (!keys)
        return sl_set_error(SL_ERR_NOMEM, "'%s': out of memory reading \"__metadata__\"", ps->what);
    int n = 0;
    for (const sl_json_value *m = at(ps, meta->child); m; m = at(ps, m->next)) {
        keys[n++] = m;
        if (m->type != SL_JSON_STRING) {
            sl_printable(shown, sizeof shown, m->key, m->key_len);
            snprintf(msg, sizeof msg, "\"__metadata__\" value of \"%s\" is not a string", shown);
            sl_free(keys);
            return bad(ps, NULL, msg);
        }
    }
    qsort(keys, (size_t)n, sizeof *keys, by_key);
    sl_status st = SL_OK;
    for (int i = 1; i < n && st == SL_OK; i++)
        if (by_key(&keys[i - 1], &keys[i]) == 0) {
            sl_printable(shown, sizeof shown, keys[i]->key, keys[i]->key_len);
            snprintf(msg, sizeof msg, "\"__metadata__\" has the key \"%s\" twice", shown);
            st = bad(ps, NULL, msg);
        }
    sl_free(keys);
    return st;
}

/* Entries of the parsed header into f (sorted, unique, each valid). */
static sl_status collect_entries(const parse_state *ps, sl_st_file *f)
{
    const sl_json_value *root = &ps->doc->v[0];
    f->entries = sl_calloc((size_t)root->count + 1, sizeof *f->entries);
    if (!f->entries)
        return sl_set_error(SL_ERR_NOMEM, "'%s': out of memory reading the header", ps->what);
    for (int i = root->child; i >= 0; i = ps->doc->v[i].next) {
        const sl_json_value *it = &ps->doc->v[i];
        if (key_is(it, "__metadata__")) {
            if (f->metadata >= 0)
                return bad(ps, NULL, "\"__metadata__\" appears twice");
            sl_status st = check_metadata(ps, it);
            if (st != SL_OK)
                return st;
            f->metadata = i;
            continue;
        }
        sl_status st = parse_entry(ps, it, &f->entries[f->n]);
        if (st != SL_OK)
            return st;
        f->n++;
    }
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_name);
    for (int i = 1; i < f->n; i++)
        if (by_name(&f->entries[i - 1], &f->entries[i]) == 0)
            return bad(ps, &f->entries[i], "appears twice in the header");
    return check_coverage(ps, f);
}

/* The header: UTF-8, then one JSON object with only whitespace around it. */
static sl_status parse_header(const parse_state *ps, const uint8_t *text, size_t len,
                              sl_json_doc *doc)
{
    char msg[SL_ST_NAME_MAX + 200];
    size_t valid = sl_utf8_valid_prefix(text, len);
    if (valid != len) {
        snprintf(msg, sizeof msg, "the header is not valid UTF-8 (byte %zu of %zu)", valid, len);
        return bad(ps, NULL, msg);
    }
    sl_status st = sl_json_parse((const char *)text, len, doc);
    if (st == SL_ERR_NOMEM)
        return sl_set_error(st, "'%s': %s", ps->what, sl_last_error());
    if (st != SL_OK) {
        snprintf(msg, sizeof msg, "the header is not valid JSON (%s)", sl_last_error());
        return bad(ps, NULL, msg);
    }
    if (doc->v[0].type != SL_JSON_OBJECT) {
        sl_json_release(doc);
        return bad(ps, NULL, "the header is not a JSON object: not a safetensors file");
    }
    return SL_OK;
}

sl_status sl_st_parse(const uint8_t *buf, size_t bytes, const char *what, sl_st_file *out)
{
    memset(out, 0, sizeof *out);
    out->metadata = -1;
    parse_state ps = {what, 0, NULL, NULL};
    char msg[160];
    if (bytes < 8) {
        snprintf(msg, sizeof msg,
                 "the file has %zu bytes, fewer than the 8 of a safetensors header length", bytes);
        return bad(&ps, NULL, msg);
    }
    uint64_t hlen = read_le64(buf);
    if (hlen > SL_ST_HEADER_MAX) {
        snprintf(msg, sizeof msg, "header length %llu exceeds the limit of %llu bytes%s",
                 (unsigned long long)hlen, SL_ST_HEADER_MAX,
                 hlen > bytes - 8 ? " (and the file): truncated or not safetensors" : "");
        return bad(&ps, NULL, msg);
    }
    if (hlen > bytes - 8) {
        snprintf(msg, sizeof msg,
                 "header length %llu exceeds the %zu bytes after it: truncated or not safetensors",
                 (unsigned long long)hlen, bytes - 8);
        return bad(&ps, NULL, msg);
    }
    ps.data = buf + 8 + hlen;
    ps.data_bytes = bytes - 8 - (size_t)hlen;
    ps.doc = &out->doc;
    sl_status st = parse_header(&ps, buf + 8, (size_t)hlen, &out->doc);
    if (st != SL_OK)
        return st;
    st = collect_entries(&ps, out);
    if (st != SL_OK)
        sl_st_release(out);
    return st;
}

void sl_st_release(sl_st_file *f)
{
    if (!f)
        return;
    sl_json_release(&f->doc);
    sl_free(f->entries);
    memset(f, 0, sizeof *f);
    f->metadata = -1;
}

const sl_st_entry *sl_st_find(const sl_st_file *f, const char *name)
{
    if (!f->n)
        return NULL;
    sl_st_entry key;
    memset(&key, 0, sizeof key);
    key.name = name;
    key.name_len = strlen(name);
    return bsearch(&key, f->entries, (size_t)f->n, sizeof *f->entries, by_name);
}

const char *sl_st_metadata(const sl_st_file *f, const char *key, size_t *len)
{
    if (f->metadata < 0)
        return NULL;
    const sl_json_value *meta = &f->doc.v[f->metadata];
    for (int i = meta->type == SL_JSON_OBJECT ? meta->child : -1; i >= 0; i = f->doc.v[i].next)
        if (key_is(&f->doc.v[i], key)) {
            if (len)
                *len = f->doc.v[i].len;
            return f->doc.v[i].str;
        }
    return NULL;
}

/* ---- writing ---- */

/* A growing text buffer for the header; `failed` once anything did not fit. */
typedef struct text_buf {
    char *s;
    size_t len, cap;
    int failed;
} text_buf;

static void tb_reserve(text_buf *t, size_t more)
{
    if (t->failed || t->len + more + 1 <= t->cap)
        return;
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + more + 1)
        cap *= 2;
    char *s = sl_realloc(t->s, cap);
    if (!s) {
        t->failed = 1;
        return;
    }
    t->s = s;
    t->cap = cap;
}

static void tb_put(text_buf *t, const char *s)
{
    size_t n = strlen(s);
    tb_reserve(t, n);
    if (t->failed)
        return;
    memcpy(t->s + t->len, s, n + 1);
    t->len += n;
}

static void tb_string(text_buf *t, const char *s)
{
    size_t n = strlen(s);
    tb_reserve(t, 6 * n + 2); /* every byte escaped at worst */
    if (t->failed)
        return;
    t->s[t->len++] = '"';
    sl_json_escape(t->s, t->cap, &t->len, s, n);
    t->s[t->len++] = '"';
    t->s[t->len] = '\0';
}

static void tb_entry(text_buf *t, const sl_st_tensor *e, uint64_t begin)
{
    char num[64];
    tb_string(t, e->name);
    tb_put(t, ":{\"dtype\":");
    tb_string(t, sl_st_dtype_name(e->dtype));
    tb_put(t, ",\"shape\":[");
    for (int d = 0; d < e->ndim; d++) {
        snprintf(num, sizeof num, "%s%d", d ? "," : "", e->dims[d]);
        tb_put(t, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)begin,
             (unsigned long long)(begin + e->bytes));
    tb_put(t, num);
}

/* The header text padded with spaces to a multiple of 8 bytes (as the
 * reference writer does, so the data section starts aligned). */
static char *header_text(const sl_st_tensor *t, int n, const char *const (*meta)[2], int n_meta,
                         size_t *len)
{
    text_buf tb = {NULL, 0, 0, 0};
    tb_put(&tb, "{");
    if (n_meta) {
        tb_put(&tb, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i)
                tb_put(&tb, ",");
            tb_string(&tb, meta[i][0]);
            tb_put(&tb, ":");
            tb_string(&tb, meta[i][1]);
        }
        tb_put(&tb, "}");
    }
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (i || n_meta)
            tb_put(&tb, ",");
        tb_entry(&tb, &t[i], pos);
        pos += t[i].bytes;
    }
    tb_put(&tb, "}");
    size_t padded = (tb.len + 7) / 8 * 8;
    tb_reserve(&tb, padded - tb.len);
    if (tb.failed) {
        sl_free(tb.s);
        return NULL;
    }
    memset(tb.s + tb.len, ' ', padded - tb.len);
    tb.s[padded] = '\0';
    *len = padded;
    return tb.s;
}

sl_status sl_st_write(const char *path, const sl_st_tensor *tensors, int n,
                      const char *const (*meta)[2], int n_meta, const char *fn)
{
    size_t hlen = 0;
    char *header = header_text(tensors, n, meta, n_meta, &hlen);
    if (!header)
        return sl_set_error(SL_ERR_NOMEM, "%s: out of memory building the header of '%s'", fn, path);
    sl_atomic_file af;
    sl_status st = sl_atomic_open(&af, path, fn);
    if (st == SL_OK) {
        af.expected_bytes = 8 + hlen;
        for (int i = 0; i < n; i++)
            af.expected_bytes += tensors[i].bytes;
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
    sl_free(header);
    return st;
}
