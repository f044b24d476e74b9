/*
 * bpe_load.c — reads GPT-2's encoder.json and vocab.bpe into a tokenizer
 * (text stage). Both files spell each token's bytes as characters: GPT-2
 * maps the 188 printable bytes of Latin-1 to themselves and the 68 others
 * (controls, space, soft hyphen...) to U+0100 onwards, in byte order, so
 * that every token is printable. Reading undoes that map. Then two hash
 * tables: bytes -> id (for the merge lines and sl_tokenizer_token_id) and
 * (left id, right id) -> merge.
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <string.h>

#include "io/json.h"
#include "text/bpe.h"

/* GPT-2's character of each byte, inverted: byte of code point cp < 324, or -1. */
static void char_to_byte_table(int16_t table[324])
{
    for (int cp = 0; cp < 324; cp++)
        table[cp] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        table[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

/* Decodes one code point of valid UTF-8 at s[*at]. */
static uint32_t next_code_point(const uint8_t *s, size_t *at)
{
    uint8_t c = s[(*at)++];
    if (c < 0x80)
        return c;
    int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    uint32_t cp = c & (0x3F >> more);
    while (more--)
        cp = cp << 6 | (s[(*at)++] & 0x3F);
    return cp;
}

/* The bytes spelled by characters s[0, n) (valid UTF-8) into out (room
 * for n bytes). Returns the byte count, or -1 for a character outside the map. */
static long spelled_bytes(const int16_t table[324], const uint8_t *s, size_t n, uint8_t *out)
{
    size_t at = 0;
    long k = 0;
    while (at < n) {
        uint32_t cp = next_code_point(s, &at);
        if (cp >= 324 || table[cp] < 0)
            return -1;
        out[k++] = (uint8_t)table[cp];
    }
    return k;
}

static size_t table_slots(size_t n)
{
    size_t slots = 64;
    while (slots < 2 * n)
        slots *= 2;
    return slots;
}

/* A vocabulary file whole, NUL-terminated (sl_read_whole_file). */
static sl_status read_text(const char *path, const char *what, char **data, size_t *size)
{
    char fn[64];
    snprintf(fn, sizeof fn, "sl_tokenizer_load: the %s", what);
    return sl_read_whole_file(path, fn, (uint8_t **)data, size);
}

/* Fills tok's token bytes, offsets, the bytes table and byte_id from the
 * parsed encoder.json. */
static sl_status load_tokens(sl_tokenizer *tok, const sl_json_doc *doc, const char *path)
{
    const sl_json_value *root = &doc->v[0];
    if (root->type != SL_JSON_OBJECT || root->count == 0)
        return sl_set_error(SL_ERR_FORMAT, "encoder.json %s: not a JSON object of token -> id", path);
    int n = root->count;
    int16_t table[324];
    char_to_byte_table(table);
    tok->vocab = n;
    tok->token_off = sl_calloc((size_t)n + 1, sizeof *tok->token_off);
    size_t total = 0;
    for (int c = root->child; c >= 0; c = doc->v[c].next)
        total += doc->v[c].key_len;
    tok->token_bytes = sl_malloc(total);
    size_t slots = table_slots((size_t)n);
    tok->by_bytes = sl_malloc(slots * sizeof *tok->by_bytes);
    int32_t *member_of = sl_malloc((size_t)n * sizeof *member_of);
    if (!tok->token_off || !tok->token_bytes || !tok->by_bytes || !member_of) {
        sl_free(member_of);
        return sl_set_error(SL_ERR_NOMEM, "out of memory for a vocabulary of %d tokens", n);
    }
    tok->by_bytes_mask = slots - 1;
    memset(tok->by_bytes, 0xff, slots * sizeof *tok->by_bytes);
    for (int i = 0; i < n; i++)
        member_of[i] = -1;
    sl_status st = SL_OK;
    for (int c = root->child; c >= 0 && st == SL_OK; c = doc->v[c].next) {
        const sl_json_value *m = &doc->v[c];
        char name[64] = "";
        if ((m->type != SL_JSON_NUMBER || !m->is_uint || m->uint >= (uint64_t)n || member_of[m->uint] >= 0))
            sl_printable(name, sizeof name, m->key, m->key_len);
        if (m->type != SL_JSON_NUMBER || !m->is_uint || m->uint >= (uint64_t)n)
            st = sl_set_error(SL_ERR_FORMAT, "encoder.json %s: token \"%s\" has no id in 0..%d",
                              path, name, n - 1);
        else if (member_of[m->uint] >= 0)
            st = sl_set_error(SL_ERR_FORMAT, "encoder.json %s: id %llu is given twice (\"%s\")", path,
                              (unsigned long long)m->uint, name);
        else
            member_of[m->uint] = c;
    }
    /* Every id is taken once, so ids are 0..n-1: lay the bytes out by id. */
    size_t at = 0;
    for (int id = 0; id < n && st == SL_OK; id++) {
        const sl_json_value *m = &doc->v[member_of[id]];
        char name[64];
        long k = spelled_bytes(table, (const uint8_t *)m->key, m->key_len, tok->token_bytes + at);
        if (k <= 0 || sl_bpe_lookup_bytes(tok, tok->token_bytes + at, (size_t)k) >= 0)
            sl_printable(name, sizeof name, m->key, m->key_len);
        if (k <= 0) {
            st = sl_set_error(SL_ERR_FORMAT, "encoder.json %s: token \"%s\" (id %d) is %s", path,
                              name, id, k == 0 ? "empty" : "not in GPT-2's byte-to-character form");
            break;
        }
        tok->token_off[id] = at;
        at += (size_t)k;
        tok->token_off[id + 1] = at;
        if (sl_bpe_lookup_bytes(tok, tok->token_bytes + tok->token_off[id], (size_t)k) >= 0) {
            st = sl_set_error(SL_ERR_FORMAT, "encoder.json %s: token \"%s\" is given twice", path, name);
            break;
        }
        size_t i = sl_bpe_hash_bytes(tok->token_bytes + tok->token_off[id], (size_t)k) & tok->by_bytes_mask;
        while (tok->by_bytes[i] >= 0)
            i = (i + 1) & tok->by_bytes_mask;
        tok->by_bytes[i] = id;
    }
    sl_free(member_of);
    for (int b = 0; b < 256 && st == SL_OK; b++) {
        uint8_t byte = (uint8_t)b;
        tok->byte_id[b] = sl_bpe_lookup_bytes(tok, &byte, 1);
        if (tok->byte_id[b] < 0)
            st = sl_set_error(SL_ERR_FORMAT, "encoder.json %s: byte 0x%02x has no token of its own",
                              path, b);
    }
    return st;
}

/* One merge line "A B" (line number lineno, 1-based, for messages). */
static sl_status add_merge(sl_tokenizer *tok, const int16_t table[324], const uint8_t *line,
                           size_t len, uint8_t *scratch, const char *path, int lineno)
{
    const uint8_t *space = memchr(line, ' ', len);
    size_t la = space ? (size_t)(space - line) : 0;
    if (!space || la == 0 || la + 1 == len || memchr(space + 1, ' ', len - la - 1))
        return sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s line %d: not two tokens separated by one space",
                            path, lineno);
    long ka = spelled_bytes(table, line, la, scratch);
    long kb = ka < 0 ? -1 : spelled_bytes(table, space + 1, len - la - 1, scratch + ka);
    int32_t a = ka < 0 ? -1 : sl_bpe_lookup_bytes(tok, scratch, (size_t)ka);
    int32_t b = kb < 0 ? -1 : sl_bpe_lookup_bytes(tok, scratch + ka, (size_t)kb);
    int32_t ab = a < 0 || b < 0 ? -1 : sl_bpe_lookup_bytes(tok, scratch, (size_t)(ka + kb));
    if (ab < 0)
        return sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s line %d: %s", path, lineno,
                            a < 0 || b < 0 ? "a token that encoder.json does not have"
                                           : "the merged token is not in encoder.json");
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = sl_bpe_hash_pair(key) & tok->merges_mask;
    for (; tok->merges[i].key != SL_BPE_EMPTY; i = (i + 1) & tok->merges_mask)
        if (tok->merges[i].key == key)
            return sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s line %d: the same merge is given twice",
                                path, lineno);
    tok->merges[i] = (sl_bpe_merge){key, tok->n_merges++, ab};
    return SL_OK;
}

static sl_status load_merges(sl_tokenizer *tok, const char *text, size_t size, const char *path)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t bad = sl_utf8_valid_prefix(s, size);
    if (bad < size)
        return sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s: not UTF-8 at byte %zu", path, bad);
    if (size < 8 || memcmp(text, "#version", 8) != 0)
        return sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s: does not start with a \"#version\" line", path);
    if (text[size - 1] != '\n')
        return sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s: does not end with a newline (truncated?)", path);
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += s[i] == '\n';
    size_t slots = table_slots(lines);
    int16_t table[324];
    char_to_byte_table(table);
    tok->merges = sl_malloc(slots * sizeof *tok->merges);
    uint8_t *scratch = sl_malloc(size);
    if (!tok->merges || !scratch) {
        sl_free(scratch);
        return sl_set_error(SL_ERR_NOMEM, "out of memory for %zu merges", lines);
    }
    tok->merges_mask = slots - 1;
    for (size_t i = 0; i < slots; i++)
        tok->merges[i].key = SL_BPE_EMPTY;
    sl_status st = SL_OK;
    size_t at = (size_t)((const uint8_t *)memchr(s, '\n', size) - s) + 1;
    int lineno = 2, blank = 0;
    while (at < size && st == SL_OK) {
        size_t end = (size_t)((const uint8_t *)memchr(s + at, '\n', size - at) - s);
        size_t len = end - at;
        if (len && s[end - 1] == '\r')
            len--;
        if (len == 0)
            blank = lineno;
        else if (blank)
            st = sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s line %d: an empty line before the last merge",
                              path, blank);
        else
            st = add_merge(tok, table, s + at, len, scratch, path, lineno);
        at = end + 1;
        lineno++;
    }
    sl_free(scratch);
    if (st == SL_OK && tok->n_merges == 0)
        st = sl_set_error(SL_ERR_FORMAT, "vocab.bpe %s: no merges", path);
    return st;
}

sl_status sl_tokenizer_load(const char *encoder_json_path, const char *vocab_bpe_path,
                            sl_tokenizer **out)
{
    if (!out)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_load: out is NULL");
    *out = NULL;
    if (!encoder_json_path || !vocab_bpe_path)
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_load: a file path is NULL");
    sl_tokenizer *tok = sl_calloc(1, sizeof *tok);
    if (!tok)
        return sl_set_error(SL_ERR_NOMEM, "out of memory for a tokenizer");
    char *text = NULL;
    size_t size = 0;
    sl_status st = read_text(encoder_json_path, "encoder.json", &text, &size);
    if (st == SL_OK) {
        sl_json_doc doc;
        st = sl_json_parse(text, size, &doc);
        sl_free(text);
        text = NULL;
        if (st != SL_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", sl_last_error());
            st = sl_set_error(st, "encoder.json %s: %s", encoder_json_path, why);
        }
        else
            st = load_tokens(tok, &doc, encoder_json_path);
        sl_json_release(&doc);
    }
    if (st == SL_OK)
        st = read_text(vocab_bpe_path, "vocab.bpe", &text, &size);
    if (st == SL_OK)
        st = load_merges(tok, text, size, vocab_bpe_path);
    sl_free(text);
    if (st == SL_OK)
        st = sl_bpe_compile_pattern(tok);
    if (st != SL_OK) {
        sl_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return SL_OK;
}

int sl_tokenizer_vocab_size(const sl_tokenizer *tok)
{
    return tok ? tok->vocab : 0;
}

sl_status sl_tokenizer_token_id(const sl_tokenizer *tok, const void *bytes, size_t n, int32_t *id)
{
    if (!tok || !id || (!bytes && n))
        return sl_set_error(SL_ERR_INVALID_ARG, "sl_tokenizer_token_id: a NULL argument");
    *id = n ? sl_bpe_lookup_bytes(tok, bytes, n) : -1;
    if (*id < 0)
        return sl_set_error(SL_ERR_NOT_FOUND, "no token has these %zu bytes", n);
    return SL_OK;
}
