/*
 * bpe.c — encoding and decoding with a loaded tokenizer (text stage).
 * Text is cut into pieces by GPT-2's pattern (PCRE2, UTF and UCP modes,
 * invalid UTF-8 allowed: it matches nothing, and each run of it becomes a
 * piece); each piece starts as its single bytes and merges, lowest
 * vocab.bpe line first and leftmost among equals, until no adjacent pair
 * has a merge. A heap of candidate pairs keeps a long piece (a megabyte
 * without a space) at O(n log n). Every allocation, PCRE2's included,
 * goes through the library's allocator.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

#include "text/bpe.h"

/* Unicode's White_Space property, as the \s of the reference (Rust's
 * regex) has it: PCRE2 10.42's \s leaves out U+0085. */
#define WS "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}"
static const char g_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS
                                "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

static void *pcre_alloc(PCRE2_SIZE bytes, void *data)
{
    (void)data;
    return sl_malloc(bytes);
}

static void pcre_free(void *p, void *data)
{
    (void)data;
    sl_free(p);
}

sl_status sl_bpe_compile_pattern(sl_tokenizer *tok)
{
    pcre2_general_context *memory = pcre2_general_context_create(pcre_alloc, pcre_free, NULL);
    pcre2_compile_context *cc = memory ? pcre2_compile_context_create(memory) : NULL;
    if (!cc) {
        pcre2_general_context_free(memory);
        return sl_set_error(SL_ERR_NOMEM, "out of memory compiling the pre-tokenisation pattern");
    }
    int err = 0;
    PCRE2_SIZE err_at = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)g_pattern, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_at, cc);
    pcre2_compile_context_free(cc);
    if (!code) {
        PCRE2_UCHAR why[160];
        pcre2_get_error_message(err, why, sizeof why);
        pcre2_general_context_free(memory);
        if (err == PCRE2_ERROR_HEAP_FAILED)
            return sl_set_error(SL_ERR_NOMEM, "out of memory compiling the pre-tokenisation "
                                "pattern (PCRE2: %s)", (const char *)why);
        return sl_set_error(SL_ERR_BACKEND, "PCRE2 cannot compile the pre-tokenisation pattern at "
                            "%zu: %s", (size_t)err_at, (const char *)why);
    }
    tok->pattern = code;
    tok->memory = memory;
    return SL_OK;
}

void sl_tokenizer_free(sl_tokenizer *tok)
{
    if (!tok)
        return;
    pcre2_code_free(tok->pattern);
    pcre2_general_context_free(tok->memory);
    sl_free(tok->token_bytes);
    sl_free(tok->token_off);
    sl_free(tok->by_bytes);
    sl_free(tok->merges);
    sl_free(tok);
}

/* A candidate merge of the symbols starting at bytes left and right, as
 * they were when it was found (stale once either changed). */
typedef struct candidate {
    int32_t rank, left, right, left_id, right_id;
} candidate;

/* Per-call working memory for pieces of up to cap bytes. */
typedef struct scratch {
    size_t cap;
    int32_t *id, *next, *prev; /* by a symbol's first byte; next/prev -1 at the ends */
    candidate *heap;
    size_t heap_n;
} scratch;

static int scratch_reserve(scratch *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *id = sl_realloc(s->id, cap * sizeof *id);
    if (id)
        s->id = id;
    int32_t *next = sl_realloc(s->next, cap * sizeof *next);
    if (next)
        s->next = next;
    int32_t *prev = sl_realloc(s->prev, cap * sizeof *prev);
    if (prev)
        s->prev = prev;
    candidate *heap = sl_realloc(s->heap, 3 * cap * sizeof *heap);
    if (heap)
        s->heap = heap;
    if (!id || !next || !prev || !heap)
        return -1;
    s->cap = cap;
    return 0;
}

static int before(const candidate *a, const candidate *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(scratch *s, candidate c)
{
    size_t i = s->heap_n++;
    while (i > 0 && before(&c, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = c;
}

static candidate heap_pop(scratch *s)
{
    candidate top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!before(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

static void consider(const sl_tokenizer *tok, scratch *s, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    const sl_bpe_merge *m = sl_bpe_lookup_merge(tok, s->id[left], s->id[right]);
    if (m)
        heap_push(s, (candidate){m->rank, left, right, s->id[left], s->id[right]});
}

/* Merges the piece p[0, n) and appends its ids to ids (those below cap). */
static void merge_piece(const sl_tokenizer *tok, scratch *s, const uint8_t *p, size_t n,
                        int32_t *ids, size_t cap, size_t *count)
{
    int32_t whole = n > 1 ? -1 : tok->byte_id[p[0]];
    if (whole >= 0) {
        if (ids && *count < cap)
            ids[*count] = whole;
        (*count)++;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        s->id[i] = tok->byte_id[p[i]];
        s->next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        s->prev[i] = (int32_t)i - 1;
    }
    s->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        consider(tok, s, (int32_t)i, (int32_t)i + 1);
    while (s->heap_n) {
        candidate c = heap_pop(s);
        if (s->next[c.left] != c.right || s->id[c.left] != c.left_id || s->id[c.right] != c.right_id ||
            s->id[c.right] < 0)
            continue;
        s->id[c.left] = sl_bpe_lookup_merge(tok, c.left_id, c.right_id)->id;
        s->id[c.right] = -1; /* no longer the start of a symbol */
        s->next[c.left] = s->next[c.right];
        if (s->next[c.left] >= 0)
            s->prev[s->next[c.left]] = c.left;
        consider(tok, s, s->prev[c.left], c.left);
        consider(tok, s, c.left, s->next[c.left]);
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        if (ids && *count < cap)
            ids[*count] = s->id[i];
        (*count)++;
    }
}

static sl_status encode_pieces(const sl_tokenizer *tok, const uint8_t *text, size_t n, int32_t *ids,
                               size_t cap, size_t *count, scratch *s, pcre2_match_data *md,
                               pcre2_match_context *mc)
{
    size_t at = 0, window = 256;
    while (at < n) {
        /* PCRE2 takes time in the length of the subject it is given at
         * each call, so it sees a window of the text. A match that ends
         * within one character of the window's end might have gone on (a
         * run of letters, spaces, or a lookahead): then again with a
         * window twice as long. */
        size_t len = n - at < window ? n - at : window;
        int rc = pcre2_match(tok->pattern, text + at, len, 0, 0, md, mc);
        if (len < n - at && (rc == PCRE2_ERROR_NOMATCH ||
                             (rc >= 0 && pcre2_get_ovector_pointer(md)[1] + 4 >= len))) {
            window *= 2;
            continue;
        }
        window = 256;
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR why[160];
            pcre2_get_error_message(rc, why, sizeof why);
            return sl_set_error(rc == PCRE2_ERROR_NOMEMORY ? SL_ERR_NOMEM : SL_ERR_BACKEND,
                                "PCRE2 failed splitting the text at byte %zu: %s%s", at,
                                (const char *)why, rc == PCRE2_ERROR_NOMEMORY ? " (out of memory)" : "");
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = rc < 0 ? n : at + ov[0], end = rc < 0 ? n : at + ov[1];
        if (end <= start && start < n) /* the pattern matches no empty text; be safe */
            end = start + 1;
        /* [at, start): bytes no part of the pattern matches (not UTF-8). */
        const size_t cut[2][2] = {{at, start}, {start, end}};
        for (int k = 0; k < 2; k++) {
            size_t len = cut[k][1] - cut[k][0];
            if (!len)
                continue;
            if (scratch_reserve(s, len))
                return sl_set_error(SL_ERR_NOMEM, "out of memory encoding a %zu-byte piece of text", len);
            merge_piece(tok, s, text + cut[k][0], len, ids, cap, count);
        }
        at = end;
    }
    return SL_OK;
}

sl_status sl_tokenizer_encode(const sl_tokenizer *tok, const void *text, size_t n, int32_t *ids,
                              size_t cap, size_t *count)
{
    if (!tok || !count || (!text && n))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_encode: a NULL argument");
    *count = 0;
    pcre2_match_data *md = pcre2_match_data_create(1, tok->memory);
    pcre2_match_context *mc = pcre2_match_context_create(tok->memory);
    scratch s = {0};
    sl_status st = md && mc ? encode_pieces(tok, text, n, ids, cap, count, &s, md, mc)
                            : sl_set_error(SL_ERR_NOMEM, "out of memory for PCRE2's match data");
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    sl_free(s.id);
    sl_free(s.next);
    sl_free(s.prev);
    sl_free(s.heap);
    if (st == SL_OK && ids && *count > cap)
        st = sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_encode: the text has %zu tokens, room for %zu",
                          *count, cap);
    return st;
}

sl_status sl_tokenizer_decode(const sl_tokenizer *tok, const int32_t *ids, size_t n, char *out,
                              size_t cap, size_t *bytes)
{
    if (!tok || !bytes || (!ids && n))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_decode: a NULL argument");
    *bytes = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->vocab)
            return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_decode: id %ld at %zu is not in 0..%d",
                                (long)ids[i], i, tok->vocab - 1);
        total += tok->token_off[ids[i] + 1] - tok->token_off[ids[i]];
    }
    *bytes = total;
    if (!out)
        return SL_OK;
    size_t at = 0;
    for (size_t i = 0; i < n && at < cap; i++) {
        size_t off = tok->token_off[ids[i]], len = tok->token_off[ids[i] + 1] - off;
        if (len > cap - at)
            len = cap - at;
        memcpy(out + at, tok->token_bytes + off, len);
        at += len;
    }
    if (total > cap)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_decode: %zu bytes, room for %zu", total, cap);
    return SL_OK;
}
