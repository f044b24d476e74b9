/*
 * bpe.h — the inside of sl_tokenizer (text stage, above io: it reads
 * encoder.json with io's JSON reader). bpe_load.c reads the two files into
 * the tables below; bpe.c splits text with the pre-tokenisation pattern,
 * merges the bytes of each piece and decodes ids.
 */
#ifndef SL_TEXT_BPE_H
#define SL_TEXT_BPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"

/* One merge of vocab.bpe: the pair key (left id << 32 | right id), its
 * line among the merges (lower merges first) and the id it makes. */
typedef struct sl_bpe_merge {
    uint64_t key; /* SL_BPE_EMPTY in a free slot */
    int32_t rank;
    int32_t id;
} sl_bpe_merge;

#define SL_BPE_EMPTY UINT64_MAX

struct sl_tokenizer {
    int vocab;               /* ids are 0..vocab-1 */
    uint8_t *token_bytes;    /* every token's bytes, one after the other */
    size_t *token_off;       /* token id's bytes: [token_off[id], token_off[id+1]) */
    int32_t *by_bytes;       /* open addressing: id or -1, looked up by bytes */
    size_t by_bytes_mask;    /* slots - 1 (a power of two minus one) */
    sl_bpe_merge *merges;    /* open addressing by key */
    size_t merges_mask;
    int n_merges;
    int32_t byte_id[256];    /* the token of each single byte */
    void *pattern;           /* pcre2_code_8 * */
    void *memory;            /* pcre2_general_context_8 *: sl_malloc / sl_free */
};

/* The tables' hashes and look-ups (inline: both files use them). */
static inline uint64_t sl_bpe_hash_bytes(const uint8_t *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static inline uint64_t sl_bpe_hash_pair(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

static inline int32_t sl_bpe_lookup_bytes(const sl_tokenizer *tok, const uint8_t *s, size_t n)
{
    for (size_t i = sl_bpe_hash_bytes(s, n) & tok->by_bytes_mask;; i = (i + 1) & tok->by_bytes_mask) {
        int32_t id = tok->by_bytes[i];
        if (id < 0)
            return -1;
        size_t len = tok->token_off[id + 1] - tok->token_off[id];
        if (len == n && memcmp(tok->token_bytes + tok->token_off[id], s, n) == 0)
            return id;
    }
}

static inline const sl_bpe_merge *sl_bpe_lookup_merge(const sl_tokenizer *tok, int32_t left, int32_t right)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = sl_bpe_hash_pair(key) & tok->merges_mask;; i = (i + 1) & tok->merges_mask) {
        const sl_bpe_merge *m = &tok->merges[i];
        if (m->key == key)
            return m;
        if (m->key == SL_BPE_EMPTY)
            return NULL;
    }
}

/* Compiles GPT-2's pre-tokenisation pattern into tok->pattern (and makes
 * tok->memory). SL_ERR_NOMEM or SL_ERR_BACKEND (PCRE2's message). */
sl_status sl_bpe_compile_pattern(sl_tokenizer *tok);

#endif
