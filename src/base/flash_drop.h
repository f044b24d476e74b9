/*
 * flash_drop.h — attention dropout inside the fused attention's mma.sync
 * kernels (cuda_flash.cu, run stage): which lane of a warp draws which of
 * the mask's Philox blocks for the warp's 16 x 64 block of scores, and
 * where each of a lane's accumulator elements then finds its factor.
 * Plain arithmetic that C and nvcc both read, so tests/test_flash_dropout.c
 * simulates the 32 lanes on the CPU, calling these functions as the
 * kernels do, and checks every element's factor against the mask the
 * CPU and the chunked path (cuda_attention.cu's row_quads) use:
 * sl_dropout_factors of element sl_attn_element(bh0 + bh, t, i, j)
 * (base/element.h), query i, key j.
 *
 * A lane holds 32 accumulator elements of the block (base/mma_frag.h's C
 * layout: rows g and g + 8, columns 8 j + 2 q and 8 j + 2 q + 1 of each
 * n-tile j). The mask's elements of a score row are consecutive, four to
 * a Philox block; drawing a block for each element where it is held would
 * draw every block up to four times. Instead each lane draws the blocks
 * of a run of consecutive mask elements once, keeps one bit per element
 * (kept or dropped) in a 32-bit word, and the lanes holding those
 * elements read the word with a shuffle. Two orientations:
 *
 *  - by queries (the forward and dQ: rows are queries, columns keys):
 *    lane l draws row l / 2 of the warp's 16, keys 32 (l % 2) .. + 31 of
 *    the key tile: bit k is key 32 (l % 2) + k. Element (row, col) is bit
 *    col % 32 of lane 2 row + col / 32's word; a lane's elements lie in
 *    four words (its two rows, the two column halves): four shuffles a
 *    tile.
 *  - by keys (dK and dV: rows are keys, columns queries; a query's keys
 *    are consecutive mask elements, two queries t elements apart): lane l
 *    draws queries 2 l and 2 l + 1 of the query tile, the warp's 16 keys
 *    of each: bit 16 b + k is query 2 l + b, key k. Element (row, col) is
 *    bit 16 (col % 2) + row of lane col / 2's word; a lane's elements of
 *    n-tile j lie in one word: eight shuffles a tile.
 *
 * Either way a lane draws 8 blocks a tile when every run starts on a
 * block boundary (t a multiple of 4: the mask elements of row i start at
 * a multiple of t), up to 10 otherwise: the 1024 blocks of a 64 x 64
 * tile's 4096 elements, spread evenly over the block's 128 lanes. A word
 * covers elements of rows past t or keys past the diagonal too; their
 * factors multiply probabilities that are 0.
 */
#ifndef SL_FLASH_DROP_H
#define SL_FLASH_DROP_H

#include <stdint.h>

#include "base/element.h"
#include "base/mma_frag.h"

/* Where a lane's accumulator element i of the n-tile j lies in the
 * attention matrix, in the two orientations of the mma.sync kernels
 * (cuda_flash.cu's `at` maps, which call these; test_flash_dropout walks
 * them): by queries, the warp's 16 rows are queries from q0 + r0 (the
 * query tile's first, the warp's first row in it) and the columns keys
 * from k0 (the forward, dQ); by keys, the rows are keys from k0 and the
 * columns queries from q0 (dK and dV). */
SL_HD static inline void sl_drop_q_at(int lane, int j, int i, int q0, int r0, int k0, int *query,
                                      int *key)
{
    *query = q0 + (r0 + sl_mma_c_row(lane, i));
    *key = k0 + sl_mma_c_col(lane, j, i);
}

SL_HD static inline void sl_drop_k_at(int lane, int j, int i, int q0, int k0, int *query, int *key)
{
    *query = q0 + sl_mma_c_col(lane, j, i);
    *key = k0 + sl_mma_c_row(lane, i);
}

/* Bit k set iff mask element e0 + k (k < n <= 32) is kept: the blocks of
 * those elements each drawn once (sl_dropout_words), each word kept by
 * sl_dropout_factors' rule (not drop_all, and at least the threshold;
 * test_flash_dropout holds the bits to sl_dropout_factors). The words are
 * indexed by constants only, so nvcc keeps them in registers. */
SL_HD static inline uint32_t sl_drop_keep_bits(const sl_dropout_mask *m, uint64_t counter,
                                               uint64_t e0, int n)
{
    uint32_t bits = 0u;
    int skip = (int)(e0 & 3u), blocks = (skip + n + 3) / 4;
    uint64_t b0 = e0 >> 2; /* the first block */
    for (int b = 0; b < blocks; b++) {
        uint32_t r[4];
        sl_dropout_words(m, counter, b0 + (uint64_t)b, r);
        for (int u = 0; u < 4; u++) {
            int k = 4 * b + u - skip;
            if (k >= 0 && k < n && !m->drop_all && r[u] >= m->threshold)
                bits |= 1u << k;
        }
    }
    return bits;
}

/* Bit `bit` of word w as a dropout factor: the mask's scale where kept. */
SL_HD static inline float sl_drop_bit_factor(const sl_dropout_mask *m, uint32_t w, int bit)
{
    return (w >> bit) & 1u ? m->scale : 0.0f;
}

/* ---- by queries: the warp's rows are queries q0 .., columns keys k0 .. */

/* Lane's word: query q0 + lane / 2, keys k0 + 32 (lane % 2) .. + 31, of
 * pair `pair` (bh0 + bh) in a mask over t x t elements a pair. */
SL_HD static inline uint32_t sl_drop_q_word(const sl_dropout_mask *m, uint64_t counter, int pair,
                                            int t, int q0, int k0, int lane)
{
    uint64_t e0 = sl_attn_element(pair, t, q0 + (lane >> 1), k0 + 32 * (lane & 1));
    return sl_drop_keep_bits(m, counter, e0, 32);
}

/* The lane whose word holds the calling lane's elements of row half h
 * (elements i with i / 2 = h) and column half hf (n-tiles 4 hf ..). */
SL_HD static inline int sl_drop_q_lane(int lane, int h, int hf)
{
    return 2 * sl_mma_c_row(lane, 2 * h) + (sl_mma_c_col(lane, 4 * hf, 0) >> 5);
}

/* Element (j, i)'s bit in that word. */
SL_HD static inline int sl_drop_q_bit(int lane, int j, int i)
{
    return sl_mma_c_col(lane, j, i) & 31;
}

/* ---- by keys: the warp's rows are keys k0 .., columns queries q0 .. */

/* Lane's word: keys k0 .. k0 + 15 of query q0 + 2 lane (bits 0 .. 15)
 * and of query q0 + 2 lane + 1 (bits 16 .. 31). */
SL_HD static inline uint32_t sl_drop_k_word(const sl_dropout_mask *m, uint64_t counter, int pair,
                                            int t, int k0, int q0, int lane)
{
    uint64_t e0 = sl_attn_element(pair, t, q0 + 2 * lane, k0);
    uint64_t e1 = sl_attn_element(pair, t, q0 + 2 * lane + 1, k0);
    return sl_drop_keep_bits(m, counter, e0, 16) | sl_drop_keep_bits(m, counter, e1, 16) << 16;
}

/* The lane whose word holds the calling lane's elements of n-tile j. */
SL_HD static inline int sl_drop_k_lane(int lane, int j) { return sl_mma_c_col(lane, j, 0) >> 1; }

/* Element (j, i)'s bit in that word. */
SL_HD static inline int sl_drop_k_bit(int lane, int j, int i)
{
    return 16 * (sl_mma_c_col(lane, j, i) & 1) + sl_mma_c_row(lane, i);
}

#endif
