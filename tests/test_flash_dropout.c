/*
 * test_flash_dropout.c — the dropout mask of the fused attention's
 * mma.sync kernels (cuda_flash.cu's DROP instantiations), checked on the
 * CPU: no GPU runs here, so each warp's 32 lanes are simulated. For every
 * tile the kernels visit, in their traversal (the forward and dQ: a block
 * per (pair, query tile), the key tiles up to the diagonal, rows by
 * queries; dK/dV: a block per (pair, key tile), the query tiles from the
 * diagonal down, rows by keys), each lane draws its word with
 * base/flash_drop.h's sl_drop_q_word / sl_drop_k_word, takes the words of
 * the lanes sl_drop_q_lane / sl_drop_k_lane name (the shuffles), and reads
 * the factor of each of its accumulator elements at sl_drop_q_bit /
 * sl_drop_k_bit, that element's query and key being where the kernels'
 * `at` maps put it (base/flash_drop.h's sl_drop_q_at / sl_drop_k_at,
 * which those maps call). Every causal element must get the factor the
 * chunked path's row_quads draws for it (sl_attn_quad's quads,
 * sl_dropout_factors at element sl_attn_element(bh0 + bh, t, i, j)),
 * and every one must be visited exactly once a kernel. Shapes: t not a
 * multiple of 64 nor of 4, several pairs, bh0 > 0, counters near a 2^32
 * carry, element indices past 2^32, p from nearly 0 (nothing drawn) to 1
 * (all dropped). A last test proves the check bites: the same walk with
 * an element's bit or key one off finds mismatches.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/attn_chunks.h"
#include "base/element.h"
#include "base/flash_drop.h"
#include "harness.h"

enum { TILE = 64, WARPS = 4 }; /* cuda_flash.cu's tiles and warps */

typedef struct drop_case {
    int pairs, t, bh0;
    uint64_t counter, seed;
    float p;
} drop_case;

static const drop_case CASES[] = {
    {2, 100, 3, 7, 0x5eed1234abcdull, 0.1f},
    {3, 130, 0, 0, 0xa77e11u, 0.3f},
    {2, 65, 5, 5, 42, 0.5f},
    {1, 64, 1, 1, 9, 0.5f},
    {2, 1, 2, 3, 11, 0.5f},
    {1, 63, 0, 0xfffffff0ull, 13, 0.25f}, /* the counter carries past 2^32 */
    {1, 255, 7, 12345, 17, 0.9f},
    {2, 300, 1, 99, 19, 0.1f},
    {1, 1024, 5000, 77, 23, 0.1f}, /* GPT-2's t; elements past 2^32 */
    {1, 70, 0, 4, 29, 1.0f},       /* everything dropped */
    {1, 70, 0, 4, 31, 1e-12f},     /* threshold 0: nothing drawn, all kept */
};

/* The chunked path's factors of every causal element, [pair][i][j]
 * (j <= i): row_quads' quads over keys [0, i], each drawn once. */
static float *chunked_factors(const drop_case *c, const sl_dropout_mask *m)
{
    size_t t = (size_t)c->t;
    float *ref = malloc((size_t)c->pairs * t * t * sizeof(float));
    ck_assert_ptr_nonnull(ref);
    for (int bh = 0; bh < c->pairs; bh++)
        for (int i = 0; i < c->t; i++) {
            uint64_t e_row = sl_attn_element(c->bh0 + bh, c->t, i, 0);
            float *row = ref + ((size_t)bh * t + (size_t)i) * t;
            int j0, n, nv;
            for (uint64_t q = 0; sl_attn_quad(e_row, i + 1, i + 1, q, &j0, &n, &nv); q++) {
                float fac[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (nv > 0)
                    sl_dropout_factors(m, c->counter, e_row + (uint64_t)j0, nv, fac);
                for (int u = 0; u < nv; u++)
                    row[j0 + u] = fac[u];
            }
        }
    return ref;
}

/* What one walk found: elements checked, mismatches, and the first. */
typedef struct walk {
    const drop_case *c;
    const float *ref;
    unsigned char *seen; /* [pair][i][j] */
    long checked, wrong;
    int bit_skew, key_skew; /* 0; the failing test's deliberate errors */
    char first[200];
} walk;

static void visit(walk *w, int bh, int query, int key, float f)
{
    const drop_case *c = w->c;
    if (query >= c->t || key > query)
        return; /* masked: its probability is 0 */
    size_t at = ((size_t)bh * c->t + (size_t)query) * c->t + (size_t)key;
    int ref_key = key + w->key_skew;
    float want = ref_key >= 0 && ref_key <= query
                     ? w->ref[((size_t)bh * c->t + (size_t)query) * c->t + (size_t)ref_key]
                     : -1.0f;
    w->seen[at]++;
    w->checked++;
    if (f != want && w->wrong++ == 0)
        snprintf(w->first, sizeof w->first, "pair %d query %d key %d: factor %g, the mask's %g",
                 bh, query, key, (double)f, (double)want);
}

/* The forward's and dQ's walk: a block per (pair, query tile i0), warp
 * rows i0 + 16 warp .., key tiles j0 up to the tile's last query. In a
 * tile: each lane's word (sl_drop_q_word), the four words drop_by_q
 * shuffles in, and element (j, i) where sl_drop_q_at puts it: query i0
 * + 16 warp + row(i), key j0 + col(j, i) (flash_bwd_q_mma_k's `at`; the
 * forward's my_i and key). */
static void walk_by_queries(walk *w, const sl_dropout_mask *m)
{
    const drop_case *c = w->c;
    for (int bh = 0; bh < c->pairs; bh++)
        for (int i0 = 0; i0 < c->t; i0 += TILE) {
            int qrows = c->t - i0 < TILE ? c->t - i0 : TILE, last = i0 + qrows - 1;
            for (int j0 = 0; j0 <= last; j0 += TILE)
                for (int warp = 0; warp < WARPS; warp++) {
                    uint32_t mine[32];
                    for (int lane = 0; lane < 32; lane++)
                        mine[lane] = sl_drop_q_word(m, c->counter, c->bh0 + bh, c->t,
                                                    i0 + warp * 16, j0, lane);
                    for (int lane = 0; lane < 32; lane++) {
                        uint32_t wq[2][2];
                        for (int h = 0; h < 2; h++)
                            for (int hf = 0; hf < 2; hf++)
                                wq[h][hf] = mine[sl_drop_q_lane(lane, h, hf)];
                        for (int j = 0; j < 8; j++)
                            for (int i = 0; i < 4; i++) {
                                int bit = (sl_drop_q_bit(lane, j, i) + w->bit_skew) & 31;
                                float f = sl_drop_bit_factor(m, wq[i >> 1][j >> 2], bit);
                                int query, key;
                                sl_drop_q_at(lane, j, i, i0, warp * 16, j0, &query, &key);
                                visit(w, bh, query, key, f);
                            }
                    }
                }
        }
}

/* dK/dV's walk: a block per (pair, key tile j0), warp rows (keys)
 * key_of_row = j0 + 16 warp .., query tiles i0 from j0 on. In a tile:
 * each lane's word (sl_drop_k_word), n-tile j's word from lane
 * sl_drop_k_lane (drop_by_k's shuffle), element (j, i) where
 * sl_drop_k_at puts it: query i0 + col(j, i), key key_of_row + row(i)
 * (flash_bwd_kv_mma_k's `at`). */
static void walk_by_keys(walk *w, const sl_dropout_mask *m)
{
    const drop_case *c = w->c;
    for (int bh = 0; bh < c->pairs; bh++)
        for (int j0 = 0; j0 < c->t; j0 += TILE)
            for (int warp = 0; warp < WARPS; warp++) {
                int key_of_row = j0 + warp * 16;
                for (int i0 = j0; i0 < c->t; i0 += TILE) {
                    uint32_t mine[32];
                    for (int lane = 0; lane < 32; lane++)
                        mine[lane] = sl_drop_k_word(m, c->counter, c->bh0 + bh, c->t,
                                                    key_of_row, i0, lane);
                    for (int lane = 0; lane < 32; lane++)
                        for (int j = 0; j < 8; j++) {
                            uint32_t wj = mine[sl_drop_k_lane(lane, j)];
                            for (int i = 0; i < 4; i++) {
                                int bit = (sl_drop_k_bit(lane, j, i) + w->bit_skew) & 31;
                                float f = sl_drop_bit_factor(m, wj, bit);
                                int query, key;
                                sl_drop_k_at(lane, j, i, i0, key_of_row, &query, &key);
                                visit(w, bh, query, key, f);
                            }
                        }
                }
            }
}

/* One case through one walk (by_keys: dK/dV's, else the forward's and
 * dQ's); returns the mismatches, and with no skew asserts none and that
 * every causal element was visited once. */
static long run_walk(const drop_case *c, int by_keys, int bit_skew, int key_skew, char *first,
                     size_t first_len)
{
    sl_dropout_mask m = sl_dropout_mask_of(c->p, c->seed);
    float *ref = chunked_factors(c, &m);
    size_t count = (size_t)c->pairs * c->t * c->t;
    walk w;
    memset(&w, 0, sizeof w);
    w.c = c;
    w.ref = ref;
    w.seen = calloc(count, 1);
    ck_assert_ptr_nonnull(w.seen);
    w.bit_skew = bit_skew;
    w.key_skew = key_skew;
    if (by_keys)
        walk_by_keys(&w, &m);
    else
        walk_by_queries(&w, &m);
    if (bit_skew == 0 && key_skew == 0) {
        ck_assert_msg(w.wrong == 0, "t %d pairs %d bh0 %d counter %llu p %g, %s: %ld of %ld "
                      "factors differ; first: %s",
                      c->t, c->pairs, c->bh0, (unsigned long long)c->counter, (double)c->p,
                      by_keys ? "by keys" : "by queries", w.wrong, w.checked, w.first);
        /* one assertion for the walk: Check logs every ck_assert */
        int bad_bh = -1, bad_i = 0, bad_j = 0, bad_seen = 0;
        for (int bh = 0; bh < c->pairs && bad_bh < 0; bh++)
            for (int i = 0; i < c->t && bad_bh < 0; i++)
                for (int j = 0; j <= i; j++) {
                    size_t at = ((size_t)bh * c->t + (size_t)i) * c->t + (size_t)j;
                    if (w.seen[at] != 1) {
                        bad_bh = bh, bad_i = i, bad_j = j, bad_seen = w.seen[at];
                        break;
                    }
                }
        ck_assert_msg(bad_bh < 0, "%s: pair %d query %d key %d visited %d times",
                      by_keys ? "by keys" : "by queries", bad_bh, bad_i, bad_j, bad_seen);
    }
    if (first)
        snprintf(first, first_len, "%s", w.first);
    free(w.seen);
    free(ref);
    return w.wrong;
}

/* sl_drop_keep_bits against sl_dropout_factors, element by element, for
 * runs of every length and start offset within a block, with counters
 * near a carry. */
START_TEST(test_flash_keep_bits_are_the_masks_factors)
{
    const float ps[] = {0.1f, 0.5f, 0.97f, 1.0f, 1e-12f};
    const uint64_t counters[] = {0, 3, 0xffffffffull};
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
        for (size_t ci = 0; ci < sizeof counters / sizeof counters[0]; ci++) {
            sl_dropout_mask m = sl_dropout_mask_of(ps[pi], 0x1234567890ull + pi);
            for (uint64_t e0 = 0x1fffffff0ull; e0 < 0x1fffffff0ull + 8; e0++)
                for (int n = 1; n <= 32; n++) {
                    uint32_t bits = sl_drop_keep_bits(&m, counters[ci], e0, n);
                    float f[32];
                    sl_dropout_factors(&m, counters[ci], e0, n, f);
                    int bad_bit = -1, bad_factor = -1; /* one assertion a run */
                    for (int k = 0; k < 32; k++) {
                        int want = k < n && f[k] != 0.0f;
                        if ((int)((bits >> k) & 1u) != want && bad_bit < 0)
                            bad_bit = k;
                        if (k < n && sl_drop_bit_factor(&m, bits, k) != f[k] && bad_factor < 0)
                            bad_factor = k;
                    }
                    ck_assert_msg(bad_bit < 0 && bad_factor < 0,
                                  "p %g e0 %llu n %d: bit %d, factor %d", (double)ps[pi],
                                  (unsigned long long)e0, n, bad_bit, bad_factor);
                }
        }
}
END_TEST

START_TEST(test_flash_dropout_by_queries_is_the_chunked_mask)
{
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
        run_walk(&CASES[k], 0, 0, 0, NULL, 0);
}
END_TEST

START_TEST(test_flash_dropout_by_keys_is_the_chunked_mask)
{
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++)
        run_walk(&CASES[k], 1, 0, 0, NULL, 0);
}
END_TEST

/* The check fails where the kernels would be wrong: an element's bit one
 * off (the neighbouring column by queries, the neighbouring key by keys),
 * or the mask read one key off, gives mismatches in both walks. */
START_TEST(test_flash_dropout_check_catches_an_off_by_one)
{
    const drop_case c = {2, 100, 3, 7, 0x5eed1234abcdull, 0.5f};
    char first[200];
    for (int by_keys = 0; by_keys < 2; by_keys++) {
        long bit = run_walk(&c, by_keys, 1, 0, first, sizeof first);
        long key = run_walk(&c, by_keys, 0, 1, first, sizeof first);
        ck_assert_msg(bit > 0 && key > 0, "%s: bit off by one %ld mismatches, key %ld",
                      by_keys ? "by keys" : "by queries", bit, key);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("flash_dropout");
    TCase *tc = tcase_create("flash_dropout");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_flash_keep_bits_are_the_masks_factors);
    tcase_add_test(tc, test_flash_dropout_by_queries_is_the_chunked_mask);
    tcase_add_test(tc, test_flash_dropout_by_keys_is_the_chunked_mask);
    tcase_add_test(tc, test_flash_dropout_check_catches_an_off_by_one);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
