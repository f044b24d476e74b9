/*
 * sublinear/text.h — GPT-2's byte-level BPE tokenizer, read from the
 * standard `encoder.json` (token -> id) and `vocab.bpe` (the merges, in
 * order). Text is bytes: any byte string encodes, and decoding its ids gives
 * the same bytes back, valid UTF-8 or not.
 *
 *     sl_tokenizer *tok;
 *     if (sl_tokenizer_load("encoder.json", "vocab.bpe", &tok) != SL_OK)
 *         fprintf(stderr, "%s\n", sl_last_error());
 *     int32_t ids[64];
 *     size_t n;
 *     sl_tokenizer_encode(tok, "Hello world", 11, ids, 64, &n); // 15496 995
 *     sl_tokenizer_free(tok);
 *
 * Encoding splits the text with GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (Unicode letters, numbers and white space; PCRE2 matches it), then merges
 * the bytes of each piece: the adjacent pair whose merge comes first in
 * vocab.bpe, the leftmost of equals, until no pair merges. Bytes that are
 * not valid UTF-8 match no part of the pattern: each run of them is a
 * piece of its own. The ids equal tiktoken's `gpt2` encoding
 * (encode_ordinary) on the same files; "<|endoftext|>" in the text is
 * plain text, never the special token.
 *
 * A tokenizer is read-only once loaded: several threads may encode and
 * decode with one tokenizer at once.
 */
#ifndef SUBLINEAR_TEXT_H
#define SUBLINEAR_TEXT_H

#include "sublinear/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_tokenizer sl_tokenizer;

/* Reads encoder.json (one JSON object of token -> id, tokens in GPT-2's
 * byte-to-character form) and vocab.bpe ("#version" line, then one merge
 * "A B" per line). Refused with SL_ERR_FORMAT and a message naming the
 * file and the place: JSON that does not parse, a token that is not in
 * the byte-to-character form, ids that are not 0..N-1 each once, a byte
 * without a token of its own, a merge line that is not two known tokens
 * whose concatenation is a token; SL_ERR_IO when a file cannot be read.
 * On success *out is a new tokenizer the caller frees with
 * sl_tokenizer_free; on failure *out is NULL. */
SL_API sl_status sl_tokenizer_load(const char *encoder_json_path, const char *vocab_bpe_path,
                                   sl_tokenizer **out);
/* Frees tok; NULL is fine. */
SL_API void sl_tokenizer_free(sl_tokenizer *tok);

/* The number of ids (50257 for GPT-2): ids are 0..size-1. */
SL_API int sl_tokenizer_vocab_size(const sl_tokenizer *tok);

/* Encodes text[0, n) into ids. A text of n bytes has at most n ids, so
 * cap >= n always suffices. *count receives the number of ids the text
 * encodes to, whatever cap is. With ids == NULL nothing is written and
 * the call only counts (SL_OK). When *count > cap, ids[0, cap) hold the
 * first cap ids and the call returns SL_ERR_INVALID_ARG with a message
 * giving both numbers. */
SL_API sl_status sl_tokenizer_encode(const sl_tokenizer *tok, const void *text, size_t n,
                                     int32_t *ids, size_t cap, size_t *count);

/* Decodes ids[0, n) into out: the bytes of each token, one after the
 * other, no terminating NUL. *bytes receives their total length whatever
 * cap is; out == NULL only counts. When *bytes > cap, out[0, cap) holds
 * the first cap bytes and the call returns SL_ERR_INVALID_ARG. An id
 * outside 0..size-1 is SL_ERR_INVALID_ARG (nothing written). */
SL_API sl_status sl_tokenizer_decode(const sl_tokenizer *tok, const int32_t *ids, size_t n,
                                     char *out, size_t cap, size_t *bytes);

/* The id of the token whose bytes are exactly bytes[0, n) (for example
 * "<|endoftext|>", 50256 in GPT-2), or SL_ERR_NOT_FOUND. */
SL_API sl_status sl_tokenizer_token_id(const sl_tokenizer *tok, const void *bytes, size_t n,
                                       int32_t *id);

#ifdef __cplusplus
}
#endif

#endif /* SUBLINEAR_TEXT_H */
