/*
 * json.c — the strict JSON reader behind safetensors headers (io stage):
 * a recursive-descent parser over a private copy of the text, decoding
 * strings in place (a decoded string is never longer than its source) and
 * linking values by index in one growing array. Its rules are serde_json's,
 * which the reference safetensors implementation uses, so that a header is
 * valid here exactly when it is valid there (see json.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"

typedef struct parser {
    char *s;      /* the copy, NUL-terminated at len */
    size_t len, at;
    sl_json_value *v;
    int n, cap;
    int depth;
    int nomem;
    const char *reason; /* first syntax error */
    size_t reason_at;
} parser;

static int fail(parser *p, const char *reason)
{
    if (!p->reason && !p->nomem) {
        p->reason = reason;
        p->reason_at = p->at;
    }
    return -1;
}

static int new_value(parser *p, sl_json_type type)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        sl_json_value *v = sl_realloc(p->v, (size_t)cap * sizeof *v);
        if (!v) {
            p->nomem = 1;
            return -1;
        }
        p->v = v;
        p->cap = cap;
    }
    sl_json_value *x = &p->v[p->n];
    memset(x, 0, sizeof *x);
    x->type = type;
    x->child = x->next = -1;
    return p->n++;
}

static void skip_ws(parser *p)
{
    while (p->at < p->len) {
        char c = p->s[p->at];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->at++;
    }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex4(parser *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->at < p->len ? p->s[p->at] : '\0';
        unsigned d;
        if (is_digit(c))
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return fail(p, "invalid \\u escape (four hex digits expected)");
        v = v * 16 + d;
        p->at++;
    }
    *out = v;
    return 0;
}

/* After "\u": one code point, a surrogate pair joined. */
static int unicode_escape(parser *p, unsigned *cp)
{
    if (hex4(p, cp))
        return -1;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF)
        return fail(p, "lone trailing surrogate in a \\u escape");
    if (*cp < 0xD800 || *cp > 0xDBFF)
        return 0;
    if (p->at + 1 >= p->len || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u')
        return fail(p, "lone leading surrogate in a \\u escape");
    p->at += 2;
    unsigned lo;
    if (hex4(p, &lo))
        return -1;
    if (lo < 0xDC00 || lo > 0xDFFF)
        return fail(p, "a leading surrogate is not followed by a trailing one");
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    return 0;
}

static size_t put_utf8(char *w, unsigned cp)
{
    if (cp < 0x80) {
        w[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        w[0] = (char)(0xC0 | (cp >> 6));
        w[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        w[0] = (char)(0xE0 | (cp >> 12));
        w[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        w[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    w[0] = (char)(0xF0 | (cp >> 18));
    w[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    w[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    w[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At an opening quote: decodes the string in place. */
static int parse_string(parser *p, const char **str, size_t *len)
{
    p->at++;
    size_t start = p->at, w = p->at;
    for (;;) {
        if (p->at >= p->len)
            return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->at];
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(p, "control character inside a string (it must be escaped)");
        if (c >= 0x80) { /* one whole UTF-8 character, or the string is refused */
            size_t k = sl_utf8_char((const uint8_t *)p->s + p->at, p->len - p->at, NULL);
            if (k == 0)
                return fail(p, "invalid UTF-8 inside a string (an overlong form, a surrogate, a "
                               "truncated sequence or a byte that never occurs in UTF-8)");
            memmove(p->s + w, p->s + p->at, k);
            w += k;
            p->at += k;
            continue;
        }
        if (c != '\\') {
            p->s[w++] = p->s[p->at++];
            continue;
        }
        p->at++;
        char e = p->at < p->len ? p->s[p->at++] : '\0';
        unsigned cp = 0;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (unicode_escape(p, &cp))
                return -1;
            break;
        default:
            p->at--;
            return fail(p, "invalid escape in a string");
        }
        w += put_utf8(p->s + w, cp);
    }
    p->s[w] = '\0'; /* w <= at: the closing quote or earlier */
    *str = p->s + start;
    *len = w - start;
    p->at++;
    return 0;
}

static int parse_number(parser *p, int idx)
{
    size_t start = p->at;
    int integral = 1;
    if (p->s[p->at] == '-') {
        integral = 0;
        p->at++;
    }
    if (p->at < p->len && p->s[p->at] == '0')
        p->at++;
    else if (p->at < p->len && p->s[p->at] >= '1' && p->s[p->at] <= '9')
        while (p->at < p->len && is_digit(p->s[p->at]))
            p->at++;
    else
        return fail(p, "invalid number");
    if (p->at < p->len && p->s[p->at] == '.') {
        integral = 0;
        p->at++;
        if (p->at >= p->len || !is_digit(p->s[p->at]))
            return fail(p, "invalid number (a digit must follow '.')");
        while (p->at < p->len && is_digit(p->s[p->at]))
            p->at++;
    }
    if (p->at < p->len && (p->s[p->at] == 'e' || p->s[p->at] == 'E')) {
        integral = 0;
        p->at++;
        if (p->at < p->len && (p->s[p->at] == '+' || p->s[p->at] == '-'))
            p->at++;
        if (p->at >= p->len || !is_digit(p->s[p->at]))
            return fail(p, "invalid number (a digit must follow the exponent)");
        while (p->at < p->len && is_digit(p->s[p->at]))
            p->at++;
    }
    sl_json_value *v = &p->v[idx];
    if (integral) {
        uint64_t u = 0;
        int fits = 1;
        for (size_t i = start; i < p->at && fits; i++) {
            unsigned d = (unsigned)(p->s[i] - '0');
            if (u > (UINT64_MAX - d) / 10)
                fits = 0;
            else
                u = u * 10 + d;
        }
        if (fits) {
            v->is_uint = 1;
            v->uint = u;
            v->number = (double)u;
            return 0;
        }
    }
    /* Anything else is a double for serde_json, which refuses infinity. */
    char saved = p->s[p->at];
    p->s[p->at] = '\0';
    double d = strtod(p->s + start, NULL);
    p->s[p->at] = saved;
    if (isinf(d)) {
        p->at = start;
        return fail(p, "number out of range");
    }
    v->number = d;
    return 0;
}

static int parse_value(parser *p);

/* At '[' or '{': elements or members, linked in order. */
static int parse_container(parser *p, int idx, int object)
{
    if (++p->depth > SL_JSON_DEPTH_MAX)
        return fail(p, "nested more than 127 levels deep");
    char close = object ? '}' : ']';
    p->at++;
    skip_ws(p);
    if (p->at < p->len && p->s[p->at] == close) {
        p->at++;
        p->depth--;
        return 0;
    }
    int last = -1;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (object) {
            skip_ws(p);
            if (p->at >= p->len || p->s[p->at] != '"')
                return fail(p, "expected a member name in quotes");
            if (parse_string(p, &key, &key_len))
                return -1;
            skip_ws(p);
            if (p->at >= p->len || p->s[p->at] != ':')
                return fail(p, "expected ':' after a member name");
            p->at++;
        }
        int child = parse_value(p);
        if (child < 0)
            return -1;
        p->v[child].key = key;
        p->v[child].key_len = key_len;
        if (last < 0)
            p->v[idx].child = child;
        else
            p->v[last].next = child;
        last = child;
        p->v[idx].count++;
        skip_ws(p);
        char c = p->at < p->len ? p->s[p->at] : '\0';
        p->at++;
        if (c == close)
            break;
        if (c != ',') {
            p->at--;
            return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    p->depth--;
    return 0;
}

static int literal(parser *p, const char *word, sl_json_type type)
{
    size_t n = strlen(word);
    if (p->len - p->at < n || memcmp(p->s + p->at, word, n) != 0)
        return fail(p, "expected a value");
    int idx = new_value(p, type);
    p->at += n;
    return idx;
}

/* Returns the new value's index, or -1. */
static int parse_value(parser *p)
{
    skip_ws(p);
    if (p->at >= p->len)
        return fail(p, "expected a value, found the end");
    char c = p->s[p->at];
    if (c == 't')
        return literal(p, "true", SL_JSON_TRUE);
    if (c == 'f')
        return literal(p, "false", SL_JSON_FALSE);
    if (c == 'n')
        return literal(p, "null", SL_JSON_NULL);
    int idx;
    if (c == '"') {
        if ((idx = new_value(p, SL_JSON_STRING)) < 0)
            return -1;
        const char *s;
        size_t n;
        if (parse_string(p, &s, &n))
            return -1;
        p->v[idx].str = s;
        p->v[idx].len = n;
        return idx;
    }
    if (c == '[' || c == '{') {
        if ((idx = new_value(p, c == '[' ? SL_JSON_ARRAY : SL_JSON_OBJECT)) < 0)
            return -1;
        return parse_container(p, idx, c == '{') ? -1 : idx;
    }
    if (c == '-' || is_digit(c)) {
        if ((idx = new_value(p, SL_JSON_NUMBER)) < 0)
            return -1;
        return parse_number(p, idx) ? -1 : idx;
    }
    return fail(p, "expected a value");
}

sl_status sl_json_parse(const char *text, size_t len, sl_json_doc *out)
{
    memset(out, 0, sizeof *out);
    parser p;
    memset(&p, 0, sizeof p);
    p.len = len;
    p.s = sl_malloc(len + 1);
    if (!p.s)
        return sl_set_error(SL_ERR_NOMEM, "out of memory for a copy of a %zu-byte header", len);
    memcpy(p.s, text, len);
    p.s[len] = '\0';
    int root = parse_value(&p);
    if (root == 0) {
        skip_ws(&p);
        if (p.at < p.len)
            fail(&p, "bytes after the JSON value");
    }
    if (p.nomem || p.reason) {
        sl_status st = p.nomem ? sl_set_error(SL_ERR_NOMEM, "out of memory parsing a %zu-byte header",
                                              len)
                               : sl_set_error(SL_ERR_FORMAT, "at byte %zu of %zu: %s", p.reason_at,
                                              len, p.reason);
        sl_free(p.v);
        sl_free(p.s);
        return st;
    }
    out->v = p.v;
    out->n = p.n;
    out->text = p.s;
    return SL_OK;
}

void sl_json_release(sl_json_doc *doc)
{
    if (!doc)
        return;
    sl_free(doc->v);
    sl_free(doc->text);
    memset(doc, 0, sizeof *doc);
}

size_t sl_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = sl_utf8_char(s + i, n - i, NULL)) > 0)
        i += k;
    return i;
}

int sl_json_escape(char *buf, size_t cap, size_t *at, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[6];
        size_t k = 0;
        if (c == '"' || c == '\\') {
            tmp[k++] = '\\';
            tmp[k++] = (char)c;
        } else if (c < 0x20) {
            memcpy(tmp, "\\u00", 4);
            tmp[4] = hex[c >> 4];
            tmp[5] = hex[c & 15];
            k = 6;
        } else {
            tmp[k++] = (char)c;
        }
        if (cap - *at <= k)
            return -1;
        memcpy(buf + *at, tmp, k);
        *at += k;
    }
    buf[*at] = '\0';
    return 0;
}
