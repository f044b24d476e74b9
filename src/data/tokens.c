/*
 * tokens.c — llm.c's token shards (data stage): a header of 256 int32
 * [20240520, 1, count, 0 ...] and count uint16 tokens, read whole, cut
 * into batches of ids and next-token targets as llm.c's loader does.
 * The shard keeps its file's name so that a token found out of the
 * vocabulary (sl_token_shard_check_vocab) is reported by file and offset,
 * before any training, not by its place in some batch hours later.
 * text/token_shard_write.c writes the same format.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "data/data.h"
#include "sublinear.h"

struct sl_token_shard {
    size_t count;
    uint16_t *tokens;
    char *path; /* the file it was read from, for messages */
    uint16_t max_token; /* the largest id (0 when empty) and where it first is */
    size_t max_at;
};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

sl_status sl_token_shard_open(const char *path, sl_token_shard **out)
{
    const char *fn = "sl_token_shard_open";
    if (!path || !out)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: path or out is NULL", fn);
    uint8_t *data;
    size_t bytes;
    sl_status st = sl_read_whole_file(path, fn, &data, &bytes);
    if (st != SL_OK)
        return st;
    size_t header = SL_SHARD_HEADER_BYTES;
    if (bytes < header) {
        sl_free(data);
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' has %zu bytes, fewer than the 1024-byte header "
                            "of a token shard", fn, path, bytes);
    }
    uint32_t magic = le32(data), version = le32(data + 4), count = le32(data + 8);
    if (magic != SL_SHARD_MAGIC || version != SL_SHARD_VERSION) {
        sl_free(data);
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' is not a token shard (magic %u version %u; "
                            "llm.c's shards start with %d and version %d)", fn, path, magic, version,
                            SL_SHARD_MAGIC, SL_SHARD_VERSION);
    }
    if (bytes != header + (size_t)count * 2) {
        sl_free(data);
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' says it holds %u tokens (%zu bytes) but has %zu "
                            "bytes after its header (truncated or padded)", fn, path, count,
                            (size_t)count * 2, bytes - header);
    }
    sl_token_shard *s = sl_alloc(sizeof *s, "a token shard");
    uint16_t *tokens = sl_alloc(count ? (size_t)count * sizeof *tokens : 1, "the tokens of a shard");
    char *name = sl_strdup(path);
    if (!s || !tokens || !name) {
        sl_free(s);
        sl_free(tokens);
        sl_free(name);
        sl_free(data);
        return name ? SL_ERR_NOMEM
                    : sl_set_error(SL_ERR_NOMEM, "%s: out of memory for the name of '%s'", fn, path);
    }
    uint16_t max = 0;
    size_t max_at = 0;
    for (size_t i = 0; i < count; i++) {
        tokens[i] = (uint16_t)(data[header + 2 * i] | data[header + 2 * i + 1] << 8);
        if (tokens[i] > max)
            max = tokens[i], max_at = i;
    }
    sl_free(data);
    s->count = count;
    s->tokens = tokens;
    s->path = name;
    s->max_token = max;
    s->max_at = max_at;
    *out = s;
    return SL_OK;
}

sl_status sl_token_shard_check_vocab(const sl_token_shard *s, int vocab)
{
    const char *fn = "sl_token_shard_check_vocab";
    if (!s || vocab < 1)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: shard is NULL or vocab %d < 1", fn, vocab);
    if (s->count == 0 || (int)s->max_token < vocab)
        return SL_OK;
    /* Some token is out of range: name the first one. */
    size_t i = 0;
    while ((int)s->tokens[i] < vocab)
        i++;
    return sl_set_error(SL_ERR_FORMAT, "%s: '%s' holds token id %u at token %zu (byte %zu of the "
                        "file), not below the vocabulary of %d (its largest id is %u, first at "
                        "token %zu): was it written with another tokenizer?", fn, s->path,
                        (unsigned)s->tokens[i], i, (size_t)SL_SHARD_HEADER_BYTES + 2 * i, vocab,
                        (unsigned)s->max_token, s->max_at);
}

void sl_token_shard_free(sl_token_shard *s)
{
    if (!s)
        return;
    sl_free(s->tokens);
    sl_free(s->path);
    sl_free(s);
}

size_t sl_token_shard_count(const sl_token_shard *s) { return s ? s->count : 0; }

int64_t sl_token_shard_batch_count(const sl_token_shard *s, int batch, int seq)
{
    if (!s || batch < 1 || seq < 1 || s->count < 1)
        return 0;
    return (int64_t)((s->count - 1) / ((size_t)batch * (size_t)seq));
}

sl_status sl_token_shard_batch(const sl_token_shard *s, int64_t index, int batch, int seq,
                               int32_t *ids, int32_t *targets)
{
    const char *fn = "sl_token_shard_batch";
    if (!s || !ids || !targets)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: shard, ids or targets is NULL", fn);
    if (batch < 1 || seq < 1 || index < 0)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: batch %d and seq %d must be >= 1 and index "
                            "%lld >= 0", fn, batch, seq, (long long)index);
    int64_t n = sl_token_shard_batch_count(s, batch, seq);
    if (n < 1)
        return sl_set_error(SL_ERR_SHAPE, "%s: the shard has %zu tokens, fewer than the %zu one "
                            "batch of %d x %d needs (one more for the last target)", fn, s->count,
                            (size_t)batch * seq + 1, batch, seq);
    size_t bt = (size_t)batch * (size_t)seq;
    const uint16_t *p = s->tokens + (size_t)(index % n) * bt;
    for (size_t i = 0; i < bt; i++) {
        ids[i] = p[i];
        targets[i] = p[i + 1];
    }
    return SL_OK;
}
