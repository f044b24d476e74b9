/*
 * test_row_stage.c — the cut base/row_stage.h gives the CUDA backend's
 * language-model loss for copying a row between global memory and a
 * float row in shared memory (cuda_loss_optim.cu's stage_in / stage_out),
 * checked on the CPU: for float and bf16 rows at every address a row can
 * start at (modulo 16) and lengths around every boundary, the ends and
 * pieces the block's threads take cover the row exactly once, every
 * 16-byte access is aligned in global and in shared memory, and the
 * shared row stays inside its buffer.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/row_stage.h"
#include "harness.h"

enum { THREADS = 1024 }; /* cuda_loss_optim.cu's LM_THREADS */

/* Simulates the block's threads over one row: counts[j] is how often
 * element j is copied; fails at the first misaligned access. */
static void check_cut(uintptr_t addr, int n, int elem)
{
    sl_row_stage st = sl_row_stage_of(addr, n, elem);
    ck_assert_int_eq(st.per * elem, 16);
    ck_assert_int_ge(st.head, 0);
    ck_assert_int_lt(st.head, st.per);
    ck_assert_int_ge(st.units, 0);
    ck_assert_int_le(st.tail, n);
    ck_assert_int_lt(n - st.tail, st.per);
    ck_assert_int_ge(st.off, 0);
    ck_assert_int_le(st.off, 3);
    /* the shared row's last element inside the buffer */
    ck_assert_int_le(st.off + n, sl_row_stage_floats(n));
    int *counts = calloc((size_t)n + 1, sizeof(int));
    ck_assert_ptr_nonnull(counts);
    int stray = 0;
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < 2; k++) {
            int j = sl_row_stage_end(st, n, t, k);
            if (j < 0)
                continue;
            /* inside the row, never inside a piece */
            if (j >= n || (j >= st.head && j < st.tail))
                stray++;
            else
                counts[j]++;
        }
    ck_assert_int_eq(stray, 0);
    int misaligned = -1, past = -1;
    for (int u = 0; u < st.units; u++) {
        int j = sl_row_stage_piece(st, u);
        if (misaligned < 0 &&
            ((addr + (uintptr_t)j * (uintptr_t)elem) % 16 != 0 || (st.off + j) % 4 != 0))
            misaligned = u;
        if (j + st.per > n) {
            past = u;
            break;
        }
        for (int e = 0; e < st.per; e++)
            counts[j + e]++;
    }
    ck_assert_msg(misaligned < 0 && past < 0,
                  "piece %d misaligned / piece %d past the row (row at %% 16 = %d, elem %d, n %d)",
                  misaligned, past, (int)(addr % 16), elem, n);
    int bad = -1; /* one assertion for the row: Check records each call */
    for (int j = 0; j < n && bad < 0; j++)
        if (counts[j] != 1)
            bad = j;
    int times = bad < 0 ? 1 : counts[bad];
    free(counts);
    ck_assert_msg(bad < 0, "element %d of %d (row at %% 16 = %d, elem %d) copied %d times", bad, n,
                  (int)(addr % 16), elem, times);
}

static const int kLengths[] = {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 15, 16, 17, 23, 24, 25, 31, 33, 100,
                               1023, 4096, 4097, 8191, 50257, 50304};

/* Every address modulo 16 a row of float or bf16 can start at. */
START_TEST(test_row_cut_covers_every_row_once_aligned)
{
    const int elems[] = {2, 4};
    for (size_t e = 0; e < 2; e++)
        for (int a = 0; a < 16; a += elems[e])
            for (size_t i = 0; i < sizeof kLengths / sizeof kLengths[0]; i++)
                check_cut((uintptr_t)4096 + (uintptr_t)a, kLengths[i], elems[e]);
}
END_TEST

/* The rows of a language model's chunk: row r at r * ld values from an
 * aligned base, for GPT-2's vocabulary (odd, so the rows' alignment
 * cycles) and a padded one. */
START_TEST(test_row_cut_of_a_chunk_rows)
{
    const int lds[] = {50257, 50304, 50259};
    for (int elem = 2; elem <= 4; elem += 2)
        for (size_t i = 0; i < 3; i++)
            for (int r = 0; r < 9; r++)
                check_cut((uintptr_t)1 << 20 | (uintptr_t)r * (uintptr_t)lds[i] * (uintptr_t)elem,
                          50257, elem);
}
END_TEST

/* An aligned float row is all pieces but for its tail; a row shorter
 * than its head is all head. */
START_TEST(test_row_cut_extremes)
{
    sl_row_stage st = sl_row_stage_of(4096, 50257, 4);
    ck_assert_int_eq(st.head, 0);
    ck_assert_int_eq(st.off, 0);
    ck_assert_int_eq(st.units, 12564);
    ck_assert_int_eq(st.tail, 50256);
    st = sl_row_stage_of(4098, 5, 2); /* 7 bf16 before the boundary */
    ck_assert_int_eq(st.head, 5);
    ck_assert_int_eq(st.units, 0);
    ck_assert_int_eq(st.tail, 5);
    st = sl_row_stage_of(4098, 50257, 2);
    ck_assert_int_eq(st.head, 7);
    ck_assert_int_eq(st.off, 1);
    ck_assert_int_eq(st.units, (50257 - 7) / 8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row_stage");
    TCase *tc = tcase_create("row_stage");
    tcase_add_test(tc, test_row_cut_covers_every_row_once_aligned);
    tcase_add_test(tc, test_row_cut_of_a_chunk_rows);
    tcase_add_test(tc, test_row_cut_extremes);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
