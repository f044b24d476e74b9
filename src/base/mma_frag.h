/*
 * mma_frag.h — where a warp's tensor-core operands live for the fused
 * attention's mma.sync kernels (cuda_flash.cu), as plain index arithmetic
 * that C and nvcc both read, so that tests/test_mma_frag.c checks on the
 * CPU, against the PTX ISA's fragment tables, that every product the
 * kernels build from these offsets is the product they mean.
 *
 * The instruction is mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32:
 * D (16 x 8) = A (16 x 8) B (8 x 8) + C, the 32 lanes of a warp each
 * holding 4 values of A, 2 of B and 4 of C and D. With g = lane / 4 and
 * q = lane % 4, the PTX ISA places them so:
 *   A: a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4);
 *   B: b0 (q, g), b1 (q + 4, g)               (row k, column n);
 *   C: c0 (g, 2q), c1 (g, 2q + 1), c2 (g + 8, 2q), c3 (g + 8, 2q + 1).
 *
 * A product sums over k, so the kernels may number k in any order that A
 * and B share. They number it so that a lane's two k of A's row (q and q
 * + 4) and of B's column are adjacent in memory: the instruction's k = q
 * is the tile's k = 2q, its k = q + 4 the tile's 2q + 1. Then
 *   - A from 16 rows x 8 k of a row-major tile is two 8-byte loads a
 *     lane, (a0, a2) at row g and (a1, a3) at row g + 8 (sl_mma_a_pair);
 *   - B as the transpose of 8 rows of a row-major tile (S = Q K^T: B[k][n]
 *     = K[n][k]) is one 8-byte load a lane, (b0, b1) (sl_mma_bt_pair);
 *   - a C of 8 columns is, as it stands, the A of the next product over
 *     those 8 columns (P V after S = Q K^T; dV += P^T dO, dK += dS^T Q,
 *     dQ += dS K): a = (c0, c2, c1, c3) (sl_mma_c_as_a), since C holds the
 *     tile's columns 2q and 2q + 1, which are the k = q and q + 4 of the
 *     numbering. So P and dS never leave the registers;
 *   - B from 8 rows (k) x 8 columns (n) of a row-major tile (V, dO, Q, K
 *     in those second products) is two 4-byte loads a lane, rows 2q and
 *     2q + 1 of column g (sl_mma_b_off).
 *
 * Tiles: 64 rows x 64 floats, rows 64 floats apart, each row's 8-float
 * blocks permuted by an XOR of its row (sl_mma_at): block b of row r is
 * stored at block b ^ f(r), f(r) = (r ^ (r >> 1)) & 3. Padding rows to 68
 * floats, as the wmma kernels do, cannot serve both kinds of load: the
 * 8-byte pairs (rows g, columns 2q) want rows 8 banks apart, the 4-byte
 * B loads (rows 2q, columns g) rows 4 or 12 apart. With the XOR, every
 * load and store of the kernels touches 32 different banks (an 8-byte
 * access: in each half-warp, 16 lanes x 2 words in 32 banks), and the
 * 16-byte stores that stage a tile (4 floats in one block) stay whole;
 * the test checks it. f depends on r % 8 alone, so a warp's rows from a
 * multiple of 8 use the same offsets.
 */
#ifndef SL_MMA_FRAG_H
#define SL_MMA_FRAG_H

#include "base/philox.h" /* SL_HD */

enum { SL_MMA_LD = 64 }; /* floats a tile row */

/* The XOR of row r's 8-float blocks, in floats: 8 f(r). */
SL_HD static inline int sl_mma_swz(int row) { return 8 * ((row ^ (row >> 1)) & 3); }

/* Where element (row, col) of a tile is stored, in floats from its start. */
SL_HD static inline int sl_mma_at(int row, int col)
{
    return row * SL_MMA_LD + (col ^ sl_mma_swz(row));
}

/* The offsets below are sl_mma_at's, written so that the XOR is of a
 * lane's own rows mod 8 (f(8 j + x) = f(x) for x < 8): loop-invariant in
 * a kernel, the loads' offsets then differ by constants. */

/* The k-step s (tile k = 8 s ..) of 16 rows of a tile (from a multiple of
 * 8): off[h] is the first of two adjacent floats, (a[h], a[h + 2]), h = 0
 * at row g and h = 1 at row g + 8. */
SL_HD static inline void sl_mma_a_pair(int lane, int s, int off[2])
{
    int g = lane >> 2, q = lane & 3, col = (8 * s + 2 * q) ^ sl_mma_swz(g);
    off[0] = g * SL_MMA_LD + col;
    off[1] = (g + 8) * SL_MMA_LD + col;
}

/* B = the transpose of rows 8 j .. 8 j + 7 of a tile, k-step s: (b0, b1)
 * are the two adjacent floats from the offset returned. */
SL_HD static inline int sl_mma_bt_pair(int lane, int j, int s)
{
    int g = lane >> 2, q = lane & 3;
    return (8 * j + g) * SL_MMA_LD + ((8 * s + 2 * q) ^ sl_mma_swz(g));
}

/* B = rows 8 j .. 8 j + 7 (k) and columns 8 nb .. 8 nb + 7 (n) of a tile:
 * b[r] is the float at the offset returned for r. */
SL_HD static inline int sl_mma_b_off(int lane, int j, int nb, int r)
{
    int g = lane >> 2, x = 2 * (lane & 3) + r;
    return (8 * j + x) * SL_MMA_LD + ((8 * nb + g) ^ sl_mma_swz(x));
}

/* The first of the two adjacent floats of C elements (2 h, 2 h + 1) of
 * the n-tile j, for a warp whose rows start at row0 (a multiple of 8). */
SL_HD static inline int sl_mma_c_pair(int lane, int row0, int j, int h)
{
    int g = lane >> 2, q = lane & 3;
    return (row0 + g + 8 * h) * SL_MMA_LD + ((8 * j + 2 * q) ^ sl_mma_swz(g));
}

/* Element i of a lane's C of the n-tile j (columns 8 j ..): its row in
 * the warp's 16 and its column. */
SL_HD static inline int sl_mma_c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
SL_HD static inline int sl_mma_c_col(int lane, int j, int i)
{
    return 8 * j + 2 * (lane & 3) + (i & 1);
}

/* Which C element is A's register r when a C of 8 columns is the A of a
 * product over those columns. */
SL_HD static inline int sl_mma_c_as_a(int r) { return (r & 1) * 2 + (r >> 1); }

/* ---- bf16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ----
 *
 * A 16 x 16, B 16 x 8, C and D 16 x 8 as above; a register holds two
 * bf16, the lower column (k) in its low half. The PTX ISA places them:
 *   A: a0 (g, 2q..2q+1), a1 (g + 8, 2q..), a2 (g, 2q + 8..), a3 (g + 8, 2q + 8..);
 *   B: b0 (k 2q..2q+1, n g), b1 (k 2q + 8.., n g).
 * So a C of n-tiles 2 kk and 2 kk + 1, rounded to bf16 in pairs (c0, c1),
 * (c2, c3), is the A of k-step kk of the next product, as it stands:
 * a0 = tile 2 kk's (c0, c1), a1 its (c2, c3), a2 and a3 tile 2 kk + 1's.
 *
 * Operands come from shared memory by ldmatrix.sync.aligned.m8n8.x4
 * (.trans): lanes 8 i .. 8 i + 7 name the 8 rows (16 bytes each) of
 * matrix i, and register i of lane l receives matrix i's (row l / 4,
 * columns 2 (l % 4), + 1), or with .trans its (rows 2 (l % 4), + 1,
 * column l / 4). Tiles are 64 x 64 bf16, rows 128 bytes apart, the 16-byte
 * chunk c of row r stored at chunk c ^ (r % 8) (sl_mma16_at): the 8 rows
 * of one ldmatrix phase, and the 8 chunks of a row that a staging
 * quarter-warp writes, each fall in 8 different 4-bank groups. The
 * functions below give the element a lane's address names (a row's first
 * of 8), sl_mma16_at's offset written with the XOR of the lane's row mod
 * 8, which is lane % 8 in all three (loop-invariant in a kernel). */

/* Where bf16 element (row, col) of a tile is stored, in elements. */
SL_HD static inline int sl_mma16_at(int row, int col)
{
    return row * 64 + ((((col >> 3) ^ row) & 7) << 3) + (col & 7);
}

/* A of k-step kk (columns 16 kk ..) of 16 rows from a multiple of 8: the
 * x4 load's registers are a0 .. a3. */
SL_HD static inline int sl_mma16_ldm_a(int lane, int kk)
{
    int row = (lane & 7) + 8 * ((lane >> 3) & 1), chunk = 2 * kk + (lane >> 4);
    return row * 64 + (((chunk ^ lane) & 7) << 3);
}

/* B as the transpose of rows 8 j .. 8 j + 7, k-steps 2 kk2 and 2 kk2 + 1
 * (columns 32 kk2 ..): registers b0, b1 of the first, then b0, b1 of the
 * second. */
SL_HD static inline int sl_mma16_ldm_bt(int lane, int j, int kk2)
{
    int chunk = 4 * kk2 + (lane >> 3);
    return (8 * j + (lane & 7)) * 64 + (((chunk ^ lane) & 7) << 3);
}

/* B from rows 16 kk .. (k) and columns 16 nb2 .. (n-tiles 2 nb2 and 2 nb2
 * + 1), loaded with .trans: registers b0, b1 of n-tile 2 nb2, then of
 * 2 nb2 + 1. */
SL_HD static inline int sl_mma16_ldm_b(int lane, int kk, int nb2)
{
    int row = 16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1), chunk = 2 * nb2 + (lane >> 4);
    return row * 64 + (((chunk ^ lane) & 7) << 3);
}

#endif
