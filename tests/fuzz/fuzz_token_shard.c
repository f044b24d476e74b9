/*
 * fuzz_token_shard.c — libFuzzer target of llm.c token shards
 * (sl_token_shard_open and the batch reader, data/tokens.c). Besides the
 * sanitizers' checks it asserts what the reader promises: a shard it
 * opens is exactly a 1024-byte header and `count` uint16 tokens; the
 * batch count is (count - 1) / (batch * seq); a batch holds the file's
 * tokens from (index mod batches) * batch * seq on, and its targets the
 * same shifted by one; a refusal says why.
 *
 * The batch shape and index come from header bytes the format leaves
 * unused (12..23), so the fuzzer varies them with the file.
 *
 * Build: CC=clang cmake -DSL_FUZZ=ON; seeds: sl_fuzz_corpus --shard DIR;
 * dictionary: tests/fuzz/token_shard.dict.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sublinear.h"
#include "fuzz_file.h"

#define HEADER_BYTES 1024
#define MAX_BATCH 8
#define MAX_SEQ 64

static uint16_t token_at(const uint8_t *data, size_t i)
{
    return (uint16_t)(data[HEADER_BYTES + 2 * i] | data[HEADER_BYTES + 2 * i + 1] << 8);
}

/* Reads one batch and checks it against the file's bytes. */
static void check_batch(const sl_token_shard *s, const uint8_t *data, size_t count, int batch,
                        int seq, int64_t index)
{
    static int32_t ids[MAX_BATCH * MAX_SEQ], targets[MAX_BATCH * MAX_SEQ];
    size_t bt = (size_t)batch * (size_t)seq;
    int64_t n = sl_token_shard_batch_count(s, batch, seq);
    if (n != (count ? (int64_t)((count - 1) / bt) : 0))
        abort();
    sl_status st = sl_token_shard_batch(s, index, batch, seq, ids, targets);
    if (index < 0) {
        if (st != SL_ERR_INVALID_ARG)
            abort();
        return;
    }
    if (n < 1) {
        if (st != SL_ERR_SHAPE)
            abort();
        return;
    }
    if (st != SL_OK)
        abort();
    size_t first = (size_t)(index % n) * bt;
    for (size_t i = 0; i < bt; i++)
        if (ids[i] != token_at(data, first + i) || targets[i] != token_at(data, first + i + 1))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size);
    sl_token_shard *s = NULL;
    if (sl_token_shard_open(path, &s) != SL_OK) {
        if (s || !*sl_last_error())
            abort(); /* a refusal handed out a shard, or gave no reason */
        return 0;
    }
    size_t count = sl_token_shard_count(s);
    if (size != HEADER_BYTES + 2 * count)
        abort(); /* opened a file that is not exactly header + tokens */
    int batch = 1 + data[12] % MAX_BATCH, seq = 1 + data[13] % MAX_SEQ;
    int64_t index;
    memcpy(&index, data + 16, sizeof index);
    check_batch(s, data, count, batch, seq, index);
    check_batch(s, data, count, 1, 1, index & 0xffff);
    sl_token_shard_free(s);
    return 0;
}
