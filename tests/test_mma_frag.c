/*
 * test_mma_frag.c — the operand offsets of the fused attention's mma.sync
 * kernels (base/mma_frag.h), checked on the CPU against the PTX ISA's
 * fragment tables for mma.m16n8k8 (TF32): no GPU runs here, so a warp of
 * 32 lanes is simulated. Each lane gathers its registers at the header's
 * offsets, exactly as cuda_flash.cu's mma_xyt, mma_pv and acc_store do;
 * the instruction is carried out from the ISA's table of which register
 * holds which element (written here, independently of the header); and
 * the results must be the products the kernels mean: X Y^T, P V, and the
 * chain (X Y^T) V with the first product's accumulators reused as the
 * second's A operand. Small integers keep every sum exact, so the checks
 * are equalities. Then the lanes' shared-memory accesses: every pattern
 * touches 32 distinct banks at the kernels' row pitch, 8-byte pairs start
 * 8-byte aligned, and the lanes sharing an accumulator row are a quad (so
 * the softmax's two shuffles, xor 1 and xor 2, join a row). The same for
 * the bf16 kernels: ldmatrix (.trans) and mma.m16n8k16 simulated from the
 * ISA's tables, the products X Y^T and (X Y^T) V through the addresses
 * sl_mma16_ldm_* give, and every ldmatrix phase and staging store in 8
 * different bank groups.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mma_frag.h"
#include "harness.h"

enum { LD = SL_MMA_LD, ROWS = 64, COLS = 64 }; /* cuda_flash.cu's tiles */

/* ---- the ISA's tables (PTX ISA, "Matrix Fragments for mma.m16n8k8",
 * .tf32): g = lane >> 2, q = lane % 4 ---- */

static void isa_a(int lane, int r, int *row, int *k)
{
    int g = lane >> 2, q = lane & 3;
    *row = g + (r & 1 ? 8 : 0);
    *k = q + (r >= 2 ? 4 : 0);
}

static void isa_b(int lane, int r, int *k, int *n)
{
    *k = (lane & 3) + (r ? 4 : 0);
    *n = lane >> 2;
}

static void isa_c(int lane, int i, int *row, int *n)
{
    *row = (lane >> 2) + (i >= 2 ? 8 : 0);
    *n = (lane & 3) * 2 + (i & 1);
}

/* The end of one instruction over a warp, once A (16 x kd, rows kd
 * apart) and B (kd x 8) are assembled: each of their elements came from
 * exactly one lane's register (seen), and c[lane][i] += sum_k A[row][k]
 * B[k][n] at the element's place by the ISA's C table. */
static void isa_product(double c[32][4], const double *A, const int *seen_a, const double *B,
                        const int *seen_b, int kd)
{
    for (int e = 0; e < 16 * kd; e++)
        ck_assert_int_eq(seen_a[e], 1);
    for (int e = 0; e < kd * 8; e++)
        ck_assert_int_eq(seen_b[e], 1);
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            int row, n;
            isa_c(lane, i, &row, &n);
            for (int k = 0; k < kd; k++)
                c[lane][i] += A[row * kd + k] * B[k * 8 + n];
        }
}

/* One mma.sync over a warp: c[lane][i] += sum_k A[row][k] B[k][n], A and
 * B assembled from the lanes' registers by the ISA's tables. */
static void isa_mma(double c[32][4], const double a[32][4], const double b[32][2])
{
    double A[16][8], B[8][8];
    int seen_a[16][8] = {{0}}, seen_b[8][8] = {{0}};
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++) {
            int row, k;
            isa_a(lane, r, &row, &k);
            A[row][k] = a[lane][r];
            seen_a[row][k]++;
        }
        for (int r = 0; r < 2; r++) {
            int k, n;
            isa_b(lane, r, &k, &n);
            B[k][n] = b[lane][r];
            seen_b[k][n]++;
        }
    }
    isa_product(c, &A[0][0], &seen_a[0][0], &B[0][0], &seen_b[0][0], 8);
}

/* A warp's 16 x 64 block: 8 n-tiles, 4 values a lane (cuda_flash.cu's acc_t). */
typedef double warp_acc[8][32][4];

static void fill_tile(double *t, unsigned seed)
{
    for (int i = 0; i < ROWS * LD; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = (double)((int)(seed >> 16) % 9 - 4); /* -4 .. 4: sums exact */
    }
}

/* c = X Y^T as mma_xyt: X 16 rows at x, Y 64 rows at y, k over 64. */
static void sim_xyt(warp_acc c, const double *x, const double *y)
{
    memset(c, 0, sizeof(warp_acc));
    for (int s = 0; s < 8; s++)
        for (int j = 0; j < 8; j++) {
            double a[32][4], b[32][2];
            for (int lane = 0; lane < 32; lane++) {
                int off[2];
                sl_mma_a_pair(lane, s, off);
                a[lane][0] = x[off[0]];
                a[lane][1] = x[off[1]];
                a[lane][2] = x[off[0] + 1];
                a[lane][3] = x[off[1] + 1];
                int bo = sl_mma_bt_pair(lane, j, s);
                b[lane][0] = y[bo];
                b[lane][1] = y[bo + 1];
            }
            isa_mma(c[j], a, b);
        }
}

/* o += P V as mma_pv: P in the accumulators, V 64 x 64 at v. */
static void sim_pv(warp_acc o, warp_acc p, const double *v)
{
    for (int j = 0; j < 8; j++)
        for (int nb = 0; nb < 8; nb++) {
            double a[32][4], b[32][2];
            for (int lane = 0; lane < 32; lane++) {
                for (int r = 0; r < 4; r++)
                    a[lane][r] = p[j][lane][sl_mma_c_as_a(r)];
                for (int r = 0; r < 2; r++)
                    b[lane][r] = v[sl_mma_b_off(lane, j, nb, r)];
            }
            isa_mma(o[nb], a, b);
        }
}

/* The element (row, col) of a warp's block, read where sl_mma_c_row/col
 * say it is (each element must be found exactly once). */
static double acc_at(warp_acc c, int row, int col)
{
    int found = 0;
    double v = 0.0;
    for (int j = 0; j < 8; j++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++)
                if (sl_mma_c_row(lane, i) == row && sl_mma_c_col(lane, j, i) == col) {
                    v = c[j][lane][i];
                    found++;
                }
    ck_assert_int_eq(found, 1);
    return v;
}

START_TEST(test_mma_offsets_are_the_tile_layout)
{
    /* each offset function names the element it documents, in
     * sl_mma_at's layout, and pairs are two adjacent columns */
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, q = lane & 3;
        for (int s = 0; s < 8; s++) {
            int off[2];
            sl_mma_a_pair(lane, s, off);
            for (int h = 0; h < 2; h++)
                for (int e = 0; e < 2; e++) {
                    ck_assert_int_eq(off[h] + e, sl_mma_at(g + 8 * h, 8 * s + 2 * q + e));
                    ck_assert_int_eq(off[h] + e + 32 * LD, sl_mma_at(32 + g + 8 * h, 8 * s + 2 * q + e));
                }
            for (int j = 0; j < 8; j++)
                for (int e = 0; e < 2; e++)
                    ck_assert_int_eq(sl_mma_bt_pair(lane, j, s) + e, sl_mma_at(8 * j + g, 8 * s + 2 * q + e));
        }
        for (int j = 0; j < 8; j++) {
            for (int nb = 0; nb < 8; nb++)
                for (int r = 0; r < 2; r++)
                    ck_assert_int_eq(sl_mma_b_off(lane, j, nb, r), sl_mma_at(8 * j + 2 * q + r, 8 * nb + g));
            for (int row0 = 0; row0 < ROWS; row0 += 16)
                for (int h = 0; h < 2; h++)
                    for (int e = 0; e < 2; e++)
                        ck_assert_int_eq(sl_mma_c_pair(lane, row0, j, h) + e,
                                         sl_mma_at(row0 + sl_mma_c_row(lane, 2 * h + e),
                                                   sl_mma_c_col(lane, j, 2 * h + e)));
        }
    }
}
END_TEST

START_TEST(test_mma_xyt_is_x_times_y_transposed)
{
    static double x[ROWS * LD], y[ROWS * LD];
    static warp_acc c;
    fill_tile(x, 1);
    fill_tile(y, 2);
    for (int w = 0; w < 4; w++) { /* each warp's 16 rows of the tile */
        const double *xw = x + w * 16 * LD;
        sim_xyt(c, xw, y);
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 64; n++) {
                double want = 0.0;
                for (int k = 0; k < COLS; k++)
                    want += x[sl_mma_at(16 * w + r, k)] * y[sl_mma_at(n, k)];
                ck_assert_msg(acc_at(c, r, n) == want, "warp %d (%d, %d): %g, want %g", w, r, n,
                              acc_at(c, r, n), want);
            }
    }
}
END_TEST

START_TEST(test_mma_pv_is_p_times_v_with_p_in_registers)
{
    static double p[ROWS * LD], v[ROWS * LD];
    static warp_acc pa, o;
    fill_tile(p, 3);
    fill_tile(v, 4);
    /* P placed in the accumulators as a product would leave it */
    for (int j = 0; j < 8; j++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++)
                pa[j][lane][i] = p[sl_mma_at(sl_mma_c_row(lane, i), sl_mma_c_col(lane, j, i))];
    /* o starts non-zero: the kernels add onto a running O */
    for (int j = 0; j < 8; j++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++)
                o[j][lane][i] = (double)(lane - i);
    sim_pv(o, pa, v);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 64; n++) {
            double want = 0.0;
            for (int k = 0; k < 64; k++)
                want += p[sl_mma_at(r, k)] * v[sl_mma_at(k, n)];
            /* the start value of (r, n) */
            int lane = -1, i = -1;
            for (int l = 0; l < 32; l++)
                for (int e = 0; e < 4; e++)
                    if (sl_mma_c_row(l, e) == r && sl_mma_c_col(l, n / 8, e) == n) {
                        lane = l;
                        i = e;
                    }
            ck_assert_int_ge(lane, 0);
            want += (double)(lane - i);
            ck_assert_msg(acc_at(o, r, n) == want, "(%d, %d): %g, want %g", r, n, acc_at(o, r, n),
                          want);
        }
}
END_TEST

START_TEST(test_mma_chain_reuses_the_scores_as_operands)
{
    /* (X Y^T) V: the forward's S then P V, the backward's S^T then dV +=
     * P^T dO, with the first product's registers as they stand */
    static double x[ROWS * LD], y[ROWS * LD], v[ROWS * LD];
    static warp_acc s, o;
    fill_tile(x, 5);
    fill_tile(y, 6);
    fill_tile(v, 7);
    const double *xw = x + 2 * 16 * LD;
    sim_xyt(s, xw, y);
    memset(o, 0, sizeof o);
    sim_pv(o, s, v);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 64; n++) {
            double want = 0.0;
            for (int k = 0; k < 64; k++) {
                double skr = 0.0;
                for (int d = 0; d < 64; d++)
                    skr += x[sl_mma_at(32 + r, d)] * y[sl_mma_at(k, d)];
                want += skr * v[sl_mma_at(k, n)];
            }
            ck_assert_msg(acc_at(o, r, n) == want, "(%d, %d)", r, n);
        }
}
END_TEST

/* The 4-byte words a warp's access touches: distinct banks, in each
 * half-warp for 8-byte accesses (served a half at a time). */
static void assert_banks(const int word[32], int width, const char *what)
{
    int lanes_a_pass = width == 2 ? 16 : 32;
    for (int base = 0; base < 32; base += lanes_a_pass) {
        int used[32] = {0};
        for (int lane = base; lane < base + lanes_a_pass; lane++)
            for (int e = 0; e < width; e++)
                used[(word[lane] + e) % 32]++;
        for (int b = 0; b < 32; b++)
            ck_assert_msg(used[b] <= 1, "%s: bank %d taken %d times", what, b, used[b]);
    }
    if (width == 2)
        for (int lane = 0; lane < 32; lane++)
            ck_assert_msg(word[lane] % 2 == 0, "%s: a pair at an odd word", what);
}

START_TEST(test_mma_loads_and_stores_avoid_bank_conflicts)
{
    int word[32];
    for (int w = 0; w < 4; w++) /* each warp's rows */
        for (int s = 0; s < 8; s++)
            for (int h = 0; h < 2; h++) {
                for (int lane = 0; lane < 32; lane++) {
                    int off[2];
                    sl_mma_a_pair(lane, s, off);
                    word[lane] = w * 16 * LD + off[h];
                }
                assert_banks(word, 2, "A pairs");
            }
    for (int j = 0; j < 8; j++)
        for (int s = 0; s < 8; s++) {
            for (int lane = 0; lane < 32; lane++)
                word[lane] = sl_mma_bt_pair(lane, j, s);
            assert_banks(word, 2, "B^T pairs");
        }
    for (int j = 0; j < 8; j++)
        for (int nb = 0; nb < 8; nb++)
            for (int r = 0; r < 2; r++) {
                for (int lane = 0; lane < 32; lane++)
                    word[lane] = sl_mma_b_off(lane, j, nb, r);
                assert_banks(word, 1, "B words");
            }
    for (int w = 0; w < 4; w++) /* acc_store's pairs */
        for (int j = 0; j < 8; j++)
            for (int h = 0; h < 2; h++) {
                for (int lane = 0; lane < 32; lane++)
                    word[lane] = sl_mma_c_pair(lane, 16 * w, j, h);
                assert_banks(word, 2, "C pairs");
            }
    /* put's 16-byte stores: thread x's group u is row e / 16, columns
     * 4 (e % 16) .., e = x + 128 u; served 8 lanes (32 words) at a time */
    for (int u = 0; u < 8; u++)
        for (int w = 0; w < 4; w++)
            for (int part = 0; part < 4; part++) {
                int used[32] = {0};
                for (int l = 0; l < 8; l++) {
                    int e = 32 * w + 8 * part + l + 128 * u, r = e >> 4, c = (e & 15) * 4;
                    int at = sl_mma_at(r, c);
                    ck_assert_int_eq(at % 4, 0);
                    for (int k = 0; k < 4; k++) {
                        ck_assert_int_eq(sl_mma_at(r, c + k), at + k); /* a group stays whole */
                        used[(at + k) % 32]++;
                    }
                }
                for (int b = 0; b < 32; b++)
                    ck_assert_int_le(used[b], 1);
            }
    /* every row's 64 columns in its own 64 floats, once each; the rows
     * read out whole (a lane a column) are then conflict-free too */
    for (int r = 0; r < ROWS; r++) {
        int seen[64] = {0};
        for (int c = 0; c < 64; c++) {
            int at = sl_mma_at(r, c) - r * LD;
            ck_assert(at >= 0 && at < 64);
            seen[at]++;
        }
        for (int c = 0; c < 64; c++)
            ck_assert_int_eq(seen[c], 1);
        for (int half = 0; half < 2; half++) {
            for (int lane = 0; lane < 32; lane++)
                word[lane] = sl_mma_at(r, 32 * half + lane);
            assert_banks(word, 1, "row reads");
        }
    }
}
END_TEST

START_TEST(test_mma_rows_belong_to_quads)
{
    /* the softmax joins a row over lanes l ^ 1 and l ^ 2; acc_store's
     * pairs are elements (0, 1) and (2, 3), adjacent columns of one row */
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(sl_mma_c_row(lane, i), sl_mma_c_row(lane ^ 1, i));
            ck_assert_int_eq(sl_mma_c_row(lane, i), sl_mma_c_row(lane ^ 2, i));
            ck_assert_int_eq(sl_mma_c_row(lane, i), sl_mma_c_row(lane, i ^ 1));
            for (int j = 0; j < 8; j++)
                if (i & 1)
                    ck_assert_int_eq(sl_mma_c_col(lane, j, i), sl_mma_c_col(lane, j, i - 1) + 1);
        }
    /* the lanes of a quad, and only they, share a row */
    for (int a = 0; a < 32; a++)
        for (int b = 0; b < 32; b++)
            ck_assert_int_eq(sl_mma_c_row(a, 0) == sl_mma_c_row(b, 0), a >> 2 == b >> 2);
}
END_TEST

/* ---- bf16: mma.m16n8k16 and ldmatrix, the ISA's tables ---- */

/* ldmatrix.sync.aligned.m8n8.x4 (.trans): lanes 8 i .. 8 i + 7 name the
 * rows of matrix i (8 elements from each address); register i of lane l
 * gets matrix i's elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1),
 * or with .trans (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4). A
 * register is a pair, the first element in its low half. */
static void isa_ldmatrix(double reg[32][4][2], const double *tile, const int addr[32], int trans)
{
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++)
            for (int e = 0; e < 2; e++) {
                int r = lane >> 2, c = 2 * (lane & 3) + e;
                reg[lane][i][e] = trans ? tile[addr[8 * i + c] + r] : tile[addr[8 * i + r] + c];
            }
}

/* mma.m16n8k16 (bf16): a0 (g, 2q..2q+1), a1 (g + 8, ..), a2 (g, 2q + 8..),
 * a3 (g + 8, 2q + 8..); b0 (k 2q..2q+1, n g), b1 (k 2q + 8.., n g); C as
 * m16n8k8's. */
static void isa_mma16(double c[32][4], double a[32][4][2], double b[32][2][2])
{
    double A[16][16], B[16][8];
    int seen_a[16][16] = {{0}}, seen_b[16][8] = {{0}};
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, q = lane & 3;
        for (int r = 0; r < 4; r++)
            for (int e = 0; e < 2; e++) {
                int row = g + (r & 1 ? 8 : 0), k = 2 * q + e + (r >= 2 ? 8 : 0);
                A[row][k] = a[lane][r][e];
                seen_a[row][k]++;
            }
        for (int r = 0; r < 2; r++)
            for (int e = 0; e < 2; e++) {
                int k = 2 * q + e + (r ? 8 : 0);
                B[k][g] = b[lane][r][e];
                seen_b[k][g]++;
            }
    }
    isa_product(c, &A[0][0], &seen_a[0][0], &B[0][0], &seen_b[0][0], 16);
}

/* A bf16 tile in sl_mma16_at's layout (64 x 64, no padding), values
 * -4 .. 4 (exact in bf16 and in every sum here). */
static void fill_tile16(double *t, unsigned seed) /* 64 * 64 */
{
    for (int i = 0; i < 64 * 64; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = (double)((int)(seed >> 16) % 9 - 4);
    }
}

/* The two instructions an x4 load of B feeds: its registers 0 and 1 the
 * B of c0 += a0 B, 2 and 3 that of c1 += a1 B. */
static void isa_mma16_pair(double c0[32][4], double a0[32][4][2], double c1[32][4],
                           double a1[32][4][2], double b[32][4][2])
{
    double b0[32][2][2], b1[32][2][2];
    for (int lane = 0; lane < 32; lane++)
        for (int e = 0; e < 2; e++) {
            b0[lane][0][e] = b[lane][0][e];
            b0[lane][1][e] = b[lane][1][e];
            b1[lane][0][e] = b[lane][2][e];
            b1[lane][1][e] = b[lane][3][e];
        }
    isa_mma16(c0, a0, b0);
    isa_mma16(c1, a1, b1);
}

/* c = X Y^T as mma16_xyt_rows: X 16 rows of a tile from row0, Y a tile. */
static void sim_xyt16(warp_acc c, const double *x, int row0, const double *y)
{
    memset(c, 0, sizeof(warp_acc));
    for (int kk2 = 0; kk2 < 2; kk2++) {
        double a[2][32][4][2];
        int addr[32];
        for (int h = 0; h < 2; h++) {
            for (int lane = 0; lane < 32; lane++)
                addr[lane] = row0 * 64 + sl_mma16_ldm_a(lane, 2 * kk2 + h);
            isa_ldmatrix(a[h], x, addr, 0);
        }
        for (int j = 0; j < 8; j++) {
            double b[32][4][2];
            for (int lane = 0; lane < 32; lane++)
                addr[lane] = sl_mma16_ldm_bt(lane, j, kk2);
            isa_ldmatrix(b, y, addr, 0);
            isa_mma16_pair(c[j], a[0], c[j], a[1], b);
        }
    }
}

/* o += P V as mma16_pv: P in the accumulators, paired as A operands. */
static void sim_pv16(warp_acc o, warp_acc p, const double *v)
{
    for (int kk = 0; kk < 4; kk++) {
        double a[32][4][2];
        for (int lane = 0; lane < 32; lane++)
            for (int e = 0; e < 2; e++) {
                a[lane][0][e] = p[2 * kk][lane][e];
                a[lane][1][e] = p[2 * kk][lane][2 + e];
                a[lane][2][e] = p[2 * kk + 1][lane][e];
                a[lane][3][e] = p[2 * kk + 1][lane][2 + e];
            }
        for (int nb2 = 0; nb2 < 4; nb2++) {
            double b[32][4][2];
            int addr[32];
            for (int lane = 0; lane < 32; lane++)
                addr[lane] = sl_mma16_ldm_b(lane, kk, nb2);
            isa_ldmatrix(b, v, addr, 1);
            isa_mma16_pair(o[2 * nb2], a, o[2 * nb2 + 1], a, b);
        }
    }
}

START_TEST(test_mma16_products_through_ldmatrix)
{
    static double x[64 * 64], y[64 * 64], v[64 * 64];
    static warp_acc s, o;
    fill_tile16(x, 11);
    fill_tile16(y, 12);
    fill_tile16(v, 13);
    for (int w = 0; w < 4; w++) {
        sim_xyt16(s, x, 16 * w, y);
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 64; n++) {
                double want = 0.0;
                for (int k = 0; k < 64; k++)
                    want += x[sl_mma16_at(16 * w + r, k)] * y[sl_mma16_at(n, k)];
                ck_assert_msg(acc_at(s, r, n) == want, "warp %d S (%d, %d): %g, want %g", w, r, n,
                              acc_at(s, r, n), want);
            }
        /* the scores, as they stand, the A of P V */
        memset(o, 0, sizeof o);
        sim_pv16(o, s, v);
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 64; n++) {
                double want = 0.0;
                for (int k = 0; k < 64; k++)
                    want += acc_at(s, r, k) * v[sl_mma16_at(k, n)];
                ck_assert_msg(acc_at(o, r, n) == want, "warp %d O (%d, %d)", w, r, n);
            }
    }
}
END_TEST

START_TEST(test_mma16_addresses_are_the_layout_and_conflict_free)
{
    for (int r = 0; r < 64; r++) { /* a row's 64 elements in its own 64, chunks whole */
        int seen[64] = {0};
        for (int c = 0; c < 64; c++) {
            int at = sl_mma16_at(r, c) - 64 * r;
            ck_assert(at >= 0 && at < 64);
            ck_assert_int_eq(at % 8, c % 8);
            seen[at]++;
        }
        for (int c = 0; c < 64; c++)
            ck_assert_int_eq(seen[c], 1);
    }
    for (int lane = 0; lane < 32; lane++) {
        int l8 = lane & 7, hi = (lane >> 3) & 1;
        for (int kk = 0; kk < 4; kk++) {
            ck_assert_int_eq(sl_mma16_ldm_a(lane, kk), sl_mma16_at(l8 + 8 * hi, 16 * kk + 8 * (lane >> 4)));
            for (int nb2 = 0; nb2 < 4; nb2++)
                ck_assert_int_eq(sl_mma16_ldm_b(lane, kk, nb2),
                                 sl_mma16_at(16 * kk + l8 + 8 * hi, 16 * nb2 + 8 * (lane >> 4)));
        }
        for (int j = 0; j < 8; j++)
            for (int kk2 = 0; kk2 < 2; kk2++)
                ck_assert_int_eq(sl_mma16_ldm_bt(lane, j, kk2),
                                 sl_mma16_at(8 * j + l8, 32 * kk2 + 8 * (lane >> 3)));
    }
    /* an ldmatrix phase (8 lanes, 8 rows of 16 bytes) and a staging
     * quarter-warp (one row's 8 chunks): 8 different 4-bank groups */
    for (int pattern = 0; pattern < 4; pattern++)
        for (int idx = 0; idx < 64; idx++)
            for (int phase = 0; phase < 4; phase++) {
                int used[8] = {0};
                for (int l = 8 * phase; l < 8 * phase + 8; l++) {
                    int at;
                    if (pattern == 0)
                        at = 16 * (idx % 4) * 64 + sl_mma16_ldm_a(l, idx / 16);
                    else if (pattern == 1)
                        at = sl_mma16_ldm_bt(l, idx % 8, (idx / 8) % 2);
                    else if (pattern == 2)
                        at = sl_mma16_ldm_b(l, idx % 4, (idx / 4) % 4);
                    else {
                        int e = 8 * phase + (l - 8 * phase) + 32 * (idx % 16);
                        at = sl_mma16_at(e >> 3, (e & 7) * 8);
                    }
                    ck_assert_int_eq(at % 8, 0); /* 16-byte aligned */
                    used[(at / 8) % 8]++;
                }
                for (int b = 0; b < 8; b++)
                    ck_assert_msg(used[b] == 1, "pattern %d: bank group %d taken %d times", pattern,
                                  b, used[b]);
            }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mma_frag");
    TCase *tc = tcase_create("mma_frag");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mma_offsets_are_the_tile_layout);
    tcase_add_test(tc, test_mma_xyt_is_x_times_y_transposed);
    tcase_add_test(tc, test_mma_pv_is_p_times_v_with_p_in_registers);
    tcase_add_test(tc, test_mma_chain_reuses_the_scores_as_operands);
    tcase_add_test(tc, test_mma_loads_and_stores_avoid_bank_conflicts);
    tcase_add_test(tc, test_mma_rows_belong_to_quads);
    tcase_add_test(tc, test_mma16_products_through_ldmatrix);
    tcase_add_test(tc, test_mma16_addresses_are_the_layout_and_conflict_free);
    suite_add_tcase(s, tc);
    return th_run_suite(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
