/*
 * tokens.c — llm.c's token shards (data stage): a header of 256 int32
 * [20240520, 1, count, 0 ...] and count uint16 tokens, read whole, cut
 * into batches of ids and next-token targets as llm.c's loader does.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sublinear.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

struct sl_token_shard {
    size_t count;
    uint16_t *tokens;
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
    size_t header = SHARD_HEADER_INTS * sizeof(int32_t);
    if (bytes < header) {
        sl_free(data);
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' has %zu bytes, fewer than the 1024-byte header "
                            "of a token shard", fn, path, bytes);
    }
    uint32_t magic = le32(data), version = le32(data + 4), count = le32(data + 8);
    if (magic != SHARD_MAGIC || version != SHARD_VERSION) {
        sl_free(data);
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' is not a token shard (magic %u version %u; "
                            "llm.c's shards start with %d and version %d)", fn, path, magic, version,
                            SHARD_MAGIC, SHARD_VERSION);
    }
    if (bytes != header + (size_t)count * 2) {
        sl_free(data);
        return sl_set_error(SL_ERR_FORMAT, "%s: '%s' says it holds %u tokens (%zu bytes) but has %zu "
                            "bytes after its header (truncated or padded)", fn, path, count,
                            (size_t)count * 2, bytes - header);
    }
    sl_token_shard *s = sl_alloc(sizeof *s, "a token shard");
    uint16_t *tokens = sl_alloc(count ? (size_t)count * sizeof *tokens : 1, "the tokens of a shard");
    if (!s || !tokens) {
        sl_free(s);
        sl_free(tokens);
        sl_free(data);
        return SL_ERR_NOMEM;
    }
    for (size_t i = 0; i < count; i++)
        tokens[i] = (uint16_t)(data[header + 2 * i] | data[header + 2 * i + 1] << 8);
    sl_free(data);
    s->count = count;
    s->tokens = tokens;
    *out = s;
    return SL_OK;
}

void sl_token_shard_free(sl_token_shard *s)
{
    if (!s)
        return;
    sl_free(s->tokens);
    sl_free(s);
}

size_t sl_token_shard_count(const sl_token_shard *s) { return s ? s->count : 0; }

int64_t sl_token_shard_batches(const sl_token_shard *s, int batch, int seq)
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
    int64_t n = sl_token_shard_batches(s, batch, seq);
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
