/*
 * row_stage.h — how a block of the CUDA backend copies one row of n
 * values of a stored type (float or bf16) between global memory and a
 * float row in shared memory in 16-byte pieces (cuda_loss_optim.cu's
 * language-model loss, run stage). Plain arithmetic that C and nvcc both
 * read, so tests/test_row_stage.c checks on the CPU, for every alignment
 * a row can start at, that the pieces cover the row once and that every
 * 16-byte access is aligned on both sides.
 *
 * A row at address a (a multiple of the element's size, not of 16) is
 * cut in three:
 *   - the head: the elements before the first 16-byte boundary (all of
 *     them in a row that ends before it), copied one at a time;
 *   - `units` pieces of `per` elements (16 bytes: 4 floats or 8 bf16),
 *     piece u from element head + u per, copied as one 16-byte load or
 *     store in global memory and 4-float accesses in shared memory;
 *   - the tail: the elements left, one at a time.
 * The float row in shared memory starts `off` floats (0 to 3) into its
 * buffer, so that element head, and with it every piece, lands on a
 * 16-byte boundary there too: the buffer holds n + 3 floats.
 */
#ifndef SL_BASE_ROW_STAGE_H
#define SL_BASE_ROW_STAGE_H

#include <stdint.h>

#include "base/philox.h" /* SL_HD */

typedef struct sl_row_stage {
    int head;  /* elements before the first piece */
    int per;   /* elements a piece (16 bytes of them) */
    int units; /* whole pieces */
    int tail;  /* the first element after the pieces */
    int off;   /* floats before element 0 in the shared buffer */
} sl_row_stage;

/* Floats a shared buffer needs for a row of n values. */
SL_HD static inline int sl_row_stage_floats(int n) { return n + 3; }

/* The cut of a row of n values of elem_bytes (2 or 4) each at address
 * addr (a multiple of elem_bytes). */
SL_HD static inline sl_row_stage sl_row_stage_of(uintptr_t addr, int n, int elem_bytes)
{
    sl_row_stage s;
    int head = (int)((16u - (unsigned)(addr % 16u)) % 16u) / elem_bytes;
    s.head = head < n ? head : n;
    s.per = 16 / elem_bytes;
    s.units = (n - s.head) / s.per;
    s.tail = s.head + s.units * s.per;
    s.off = (4 - s.head % 4) % 4;
    return s;
}

/* Thread t's k-th value of the ends (k = 0: head, 1: tail), or -1 for
 * none: every value of the ends belongs to one of the first per - 1
 * threads. */
SL_HD static inline int sl_row_stage_end(sl_row_stage s, int n, int t, int k)
{
    if (k == 0)
        return t < s.head ? t : -1;
    return s.tail + t < n ? s.tail + t : -1;
}

/* The first element of piece u. */
SL_HD static inline int sl_row_stage_piece(sl_row_stage s, int u) { return s.head + u * s.per; }

#endif
