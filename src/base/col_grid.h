/*
 * col_grid.h — how a GPU splits the column sums of a rows x cols matrix
 * (a bias gradient, LayerNorm's weight and bias gradients) over blocks
 * (run stage). Plain arithmetic that C and nvcc both read, so a CPU test
 * checks the split the CUDA kernels walk (cuda_block.h, column parts).
 *
 * A block takes SL_COL_GRID_COLS adjacent columns (a tile) and one part
 * of the rows: part p holds rows [p * part_rows, min((p + 1) * part_rows,
 * rows)). Its thread (x, y) adds rows lo + y, lo + y + SL_COL_GRID_RUNS,
 * ... of column x in order, so a warp reads 32 adjacent values of one row
 * (whole sectors, and one row's LayerNorm statistics for all its lanes).
 * The parts of a tile are the blocks of one thread-block cluster, at
 * most SL_COL_GRID_MAX_PARTS (the portable cluster size), joined in part
 * order through distributed shared memory: no scratch, no atomics. The
 * grid is a pure function of (rows, cols), so wherever these kernels run
 * (a device with clusters; cuda_backend.cu's col_parts) the sums are the
 * same bits on every call. A thread loads its rows a batch at a time
 * before adding them (sl_col_batches_end below), then the rest one by
 * one: the same rows in the same order.
 */
#ifndef SL_COL_GRID_H
#define SL_COL_GRID_H

#include "base/philox.h" /* SL_HD */

/* Columns a block takes (a warp's 32 lanes, one each), its row runs
 * (threads along y: blocks of 1024 threads), the most parts a tile's rows
 * are split into, the blocks the split aims for over all tiles (about
 * one wave: an H100 holds 132 SMs x 2 such blocks), and the fewest rows a
 * part is given (so a short matrix, such as a classifier's batch of 16,
 * stays one block a tile). */
#define SL_COL_GRID_COLS 32
#define SL_COL_GRID_RUNS 32
#define SL_COL_GRID_MAX_PARTS 8
#define SL_COL_GRID_TARGET_BLOCKS 256
#define SL_COL_GRID_MIN_ROWS 256

typedef struct sl_col_grid {
    int tiles;     /* blocks along the columns */
    int parts;     /* blocks along the rows: a cluster */
    int part_rows; /* rows a part holds (the last may hold fewer), a multiple of RUNS */
} sl_col_grid;

static inline sl_col_grid sl_col_grid_for(int rows, int cols)
{
    sl_col_grid g;
    g.tiles = cols > 0 ? (cols + SL_COL_GRID_COLS - 1) / SL_COL_GRID_COLS : 1;
    long long want = (SL_COL_GRID_TARGET_BLOCKS + g.tiles - 1) / g.tiles;
    long long cap = rows > 0 ? rows / SL_COL_GRID_MIN_ROWS : 0;
    if (want > cap)
        want = cap;
    if (want > SL_COL_GRID_MAX_PARTS)
        want = SL_COL_GRID_MAX_PARTS;
    if (want < 1)
        want = 1;
    long long len = rows > 0 ? ((long long)rows + want - 1) / want : 1;
    len = (len + SL_COL_GRID_RUNS - 1) / SL_COL_GRID_RUNS * SL_COL_GRID_RUNS;
    g.part_rows = (int)len;
    g.parts = rows > 0 ? (int)(((long long)rows + len - 1) / len) : 1; /* no empty part */
    return g;
}

/* Part p's rows [*lo, *hi) of a matrix of `rows` rows split into parts
 * of part_rows (sl_col_grid's). */
SL_HD static inline void sl_col_part_rows(int rows, int part_rows, int p, int *lo, int *hi)
{
    *lo = p * part_rows;
    *hi = rows - *lo < part_rows ? rows : *lo + part_rows;
}

/* A thread's rows in its part [lo, hi) are r0 = lo + y, r0 + RUNS, ...
 * below hi. It takes them in batches of `batch` rows (loaded, then
 * added) while a whole batch fits, then one at a time: the first row
 * past its whole batches, r0 + k * batch * RUNS for the k whole batches
 * (r0 itself when none fits). */
SL_HD static inline int sl_col_batches_end(int lo, int hi, int y, int batch)
{
    int r0 = lo + y, span = (batch - 1) * SL_COL_GRID_RUNS;
    if (r0 + span >= hi)
        return r0;
    int k = (hi - 1 - r0 - span) / (batch * SL_COL_GRID_RUNS) + 1;
    return r0 + k * batch * SL_COL_GRID_RUNS;
}

#endif
