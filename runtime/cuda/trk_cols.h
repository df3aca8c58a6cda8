/*
 * trk_cols.h - the geometry of the CUDA backend's column sums (templates/kernels_colsum.cu.in): bias gradients
 * and layernorm backward's dgamma, dbeta. Shared by the kernels and by their emulation (tests/cuda/emu.cc), so
 * that both sum in the same order.
 *
 * A [ROWS, COLS] operand is cut into chunks of trk_col_chunk_rows consecutive rows and tiles of TRK_COL_TILE
 * columns; one block per (tile, chunk), thread (x, s) of a block adds rows s, s + TRK_COL_SLICES, ... of its
 * chunk in column x of its tile, ascending, in float; the TRK_COL_SLICES partial sums of a column are added in
 * slice order; the chunks' partial sums are then added in chunk order by a second kernel (none when there is one
 * chunk). The chunks are as many as it takes for about TRK_COL_BLOCKS blocks (several per SM of an H100's 132),
 * with at least TRK_COL_MIN_ROWS rows each. The order depends on the shape only: deterministic.
 */
#ifndef TESS_TRK_COLS_H
#define TESS_TRK_COLS_H

constexpr int TRK_COL_TILE = 32;     /* columns per block: one warp reads 128 contiguous bytes of a row */
constexpr int TRK_COL_SLICES = 8;    /* row slices per block (blockDim.y) */
constexpr int TRK_COL_SUB = 64;      /* rows whose statistics a block stages at a time (layernorm) */
constexpr int TRK_COL_BLOCKS = 1024; /* blocks aimed at */
constexpr int TRK_COL_MIN_ROWS = 64; /* rows per chunk at least: 8 a thread */

constexpr int trk_col_tiles(int cols)
{
    return (cols + TRK_COL_TILE - 1) / TRK_COL_TILE;
}

/* rows per chunk: a multiple of TRK_COL_SLICES */
constexpr int trk_col_chunk_rows(int rows, int cols)
{
    const int want = (TRK_COL_BLOCKS + trk_col_tiles(cols) - 1) / trk_col_tiles(cols); /* chunks wanted */
    int r = (rows + want - 1) / want;
    r = (r + TRK_COL_SLICES - 1) / TRK_COL_SLICES * TRK_COL_SLICES;
    return r < TRK_COL_MIN_ROWS ? TRK_COL_MIN_ROWS : r;
}

constexpr int trk_col_chunks(int rows, int cols)
{
    return (rows + trk_col_chunk_rows(rows, cols) - 1) / trk_col_chunk_rows(rows, cols);
}

#endif
