/*
 * token_shard_write.c — writes llm.c's token shards (text stage: the
 * tokenizer's output, written through io's atomic files; tokens.c in data
 * reads them, and data/data.h holds the layout both use). Everything goes
 * through sl_atomic_*, so a failed write leaves the previous shard intact
 * and says why it failed.
 */
#include <stdint.h>

#include "data/data.h"
#include "io/safetensors.h"

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

sl_status sl_token_shard_write(const char *path, const uint16_t *tokens, size_t count)
{
    const char *fn = "sl_token_shard_write";
    if (!path || (!tokens && count))
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: path or tokens is NULL", fn);
    if (count > INT32_MAX)
        return sl_set_error(SL_ERR_INVALID_ARG, "%s: %zu tokens are more than a shard's header can "
                            "count (2^31 - 1)", fn, count);
    sl_atomic_file af;
    sl_status st = sl_atomic_open(&af, path, fn);
    if (st != SL_OK)
        return st;
    af.expected_bytes = SL_SHARD_HEADER_BYTES + 2 * (uint64_t)count;
    uint8_t buf[8192] = {0}; /* the header, then the tokens in pieces */
    put_le32(buf, SL_SHARD_MAGIC);
    put_le32(buf + 4, SL_SHARD_VERSION);
    put_le32(buf + 8, (uint32_t)count);
    st = sl_atomic_write(&af, buf, SL_SHARD_HEADER_BYTES);
    for (size_t i = 0; st == SL_OK && i < count;) {
        size_t k = 0;
        for (; k < sizeof buf && i < count; i++, k += 2) {
            buf[k] = (uint8_t)tokens[i];
            buf[k + 1] = (uint8_t)(tokens[i] >> 8);
        }
        st = sl_atomic_write(&af, buf, k);
    }
    if (st == SL_OK)
        return sl_atomic_commit(&af);
    sl_atomic_abort(&af);
    return st;
}
