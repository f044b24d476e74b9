/*
 * json.h — a strict JSON reader and a string escaper for safetensors
 * headers (json.c, io stage). It accepts what serde_json, the parser of the
 * reference safetensors implementation, accepts: RFC 8259 JSON in valid
 * UTF-8 (checked in every string: an overlong form such as "\xc0\xa1", a
 * surrogate, a truncated sequence or a byte such as 0xFF is refused, so
 * encoder.json and config.json get the same rule as a safetensors header),
 * no raw control characters in strings, no lone surrogates, numbers
 * that fit a double, at most 127 nested arrays and objects. Strings keep
 * their length: a name may hold "\u0000" and still differs from its prefix.
 * Knows nothing of tensors: safetensors.c reads the tree.
 */
#ifndef SL_JSON_H
#define SL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* serde_json's recursion limit: 128 levels fail, 127 pass. */
#define SL_JSON_DEPTH_MAX 127

typedef enum sl_json_type {
    SL_JSON_NULL, SL_JSON_FALSE, SL_JSON_TRUE, SL_JSON_NUMBER, SL_JSON_STRING, SL_JSON_ARRAY,
    SL_JSON_OBJECT
} sl_json_type;

/* One value of a parsed document. Children are linked by index. */
typedef struct sl_json_value {
    sl_json_type type;
    int child;          /* first element or member, -1 when none */
    int next;           /* next element or member of the parent, -1 at the end */
    int count;          /* elements or members */
    const char *key;    /* member name inside an object (decoded, NUL-terminated) */
    size_t key_len;     /* its bytes, which may include NUL */
    const char *str;    /* SL_JSON_STRING: decoded, NUL-terminated */
    size_t len;         /* its bytes, which may include NUL */
    int is_uint;        /* SL_JSON_NUMBER without sign, fraction or exponent,
                           at most UINT64_MAX: then `uint` holds it exactly */
    uint64_t uint;
    double number;      /* SL_JSON_NUMBER: its value (strtod's nearest double) */
} sl_json_value;

typedef struct sl_json_doc {
    sl_json_value *v; /* v[0] is the root */
    int n;
    char *text;       /* working copy the strings point into, owned */
} sl_json_doc;

/* Parses text[0, len) as one JSON value with only JSON whitespace around
 * it. SL_ERR_FORMAT with a message "at byte N: reason" (N counts from the
 * start of text), or SL_ERR_NOMEM; *out is empty on failure. */
sl_status sl_json_parse(const char *text, size_t len, sl_json_doc *out);
void sl_json_release(sl_json_doc *doc);

/* The offset of the first byte of s[0, n) that is not valid UTF-8
 * (Rust's str::from_utf8 rules: no overlong forms, no surrogates, nothing
 * above U+10FFFF), or n when it is valid. */
size_t sl_utf8_valid_prefix(const uint8_t *s, size_t n);

/* Appends s[0, n) as a JSON string body (no quotes) to buf (size cap) at
 * *at, escaping '"', '\\' and control characters. Returns 0, or -1 when it
 * does not fit. */
int sl_json_escape(char *buf, size_t cap, size_t *at, const char *s, size_t n);

#endif
