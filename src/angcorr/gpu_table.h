/* gpu_table.h - the edge table in the form the CUDA kernels read.
 *
 * A CUDA kernel computes one float32 value q per pair that grows with the
 * separation, then looks q up in two small tables kept in shared memory:
 *   cells[(bits(q) >> cell_shift) - cell_base] = 8 * s0 (a byte offset)
 *   lohi[s] = (lo_s, hi_s), the uncertainty window of boundary s in q
 * and takes slot = s0 + (q >= hi[s0]), settling the pair in float64 when
 * lo[s0] <= q < hi[s0]. Two forms of q:
 *
 *   PK_GPU_SPACE_CHORD  q = offset + |p1 - p2|^2, the fma chain started at
 *                       offset: the CPU's chord squared, shifted. Its
 *                       windows are the edge table's c2 windows shifted by
 *                       offset and widened by the extra rounding offset adds.
 *   PK_GPU_SPACE_DOT    q = (1 + offset) - p1.p2, three fmas from 1 + offset:
 *                       half the arithmetic of the chord, with an absolute
 *                       error (PK_GPU_DOT_ERROR_ULPS) in place of the chord's
 *                       relative one, so windows are wider for small
 *                       separations and narrower for large ones.
 *
 * With offset > 0 every q a kernel can produce is at least q_min > 0, so the
 * cell index needs no clamp: cells start at the binade of q_min and end
 * with the binade [4, 8). With offset 0 (`clamped`) cells are those of the
 * CPU table and the kernel clamps the index.
 *
 * The invariant: for every pair, a kernel that computes q as described
 * (float unit vectors rounded from the reference's double ones, each fma or
 * add rounded to nearest) and finds q outside lohi[s] for every boundary s
 * it decides gets the reference's slot. Cells flagged multi point at the
 * pseudo-slot n_bounds + 1, whose window (-inf, +inf) sends every pair to
 * the settling path.
 */
#ifndef PAIRKIT_ANGCORR_GPU_TABLE_H
#define PAIRKIT_ANGCORR_GPU_TABLE_H

#include "angcorr_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Mantissa bits of q in the cell index: 9 by default, as on the CPU (the
 * default bins then need 11,776 cells, 23 KB of u16 in shared memory);
 * 8 halves the cells a warp touches where the pairs allow it (cuda.cu). */
#define PK_GPU_CELL_BITS 9

/* Bound on |q - ((1 + offset) - dot_ref)| in dot space, in units of 2^-24:
 * 6 for the three fma roundings (each result below 2.001 in magnitude, so
 * within 2^-24 * 2.001 of the exact value), 2 for rounding the unit vectors
 * to float (|sum of x y (d1 + d2 + d1 d2)| <= 2.0001 * 2^-24 for unit
 * vectors), and the float64 rounding of the reference dot (< 1e-15); 8.5
 * keeps a margin over the 8.01 this adds up to. */
#define PK_GPU_DOT_ERROR_ULPS 8.5

typedef enum pk_gpu_space { PK_GPU_SPACE_CHORD = 0, PK_GPU_SPACE_DOT = 1 } pk_gpu_space;

typedef struct pk_gpu_table {
    pk_gpu_space space;
    int clamped;      /* offset 0, cell index clamped to [0, n_cells) */
    float offset;     /* see above */
    float q_min;      /* no kernel q lies below this (clamped: 0) */
    int32_t n_bounds; /* n_bins + 1 */
    float *lohi;      /* [2 * (n_bounds + 2)]: (lo, hi) per slot; entry n_bounds
                           never passes (+inf, +inf), n_bounds + 1 is the multi
                           pseudo-slot (-inf, +inf) */
    uint16_t *cells;  /* [n_cells]: 8 * s0, or 8 * (n_bounds + 1) for multi cells */
    int32_t n_cells;
    int32_t cell_shift; /* 23 - mantissa bits */
    int32_t cell_base;  /* bits(q) >> cell_shift of the first cell */
    double multi_share; /* share of cells flagged multi */
    /* Dot space only: the cells packed with their window, one 8-byte load
     * a pair. packed[2c] holds the bits of hi[s0] and packed[2c + 1] 8 * s0;
     * every window of a packed cell is [hi - packed_width, hi), so with
     * d = hi - q (float): slot = s0 + (d <= 0), undecided when
     * !(d > packed_width) && !(d <= 0). A multi cell, or one whose window
     * is wider, holds hi = NaN: every pair undecided. */
    uint32_t *packed;
    float packed_width;
} pk_gpu_table;

/* Largest n_bins the u16 byte offsets allow: 8 * (n_bounds + 2) < 65536. */
#define PK_GPU_TABLE_MAX_BINS 8186

/* Build the GPU table of edge table t with cells of cell_bits (6..12)
 * mantissa bits (the result owns its arrays; t may be freed after). Fails
 * with PK_ERR_UNSUPPORTED when the bins are more than
 * PK_GPU_TABLE_MAX_BINS. */
pk_status pk_gpu_table_build(pk_context *ctx, const pk_edge_table *t, pk_gpu_space space, int clamped, int cell_bits,
                             pk_gpu_table *out);

/* pk_gpu_table_build, from the tables kept with t (t->gpu_cache, built at
 * the first request and freed with t). The result is the caller's own
 * copy, freed with pk_gpu_table_free. Safe from several threads. */
pk_status pk_gpu_table_get(pk_context *ctx, const pk_edge_table *t, pk_gpu_space space, int clamped, int cell_bits,
                           pk_gpu_table *out);

/* 1 when q falls in a multi cell (every such pair is settled). */
int pk_gpu_table_in_multi(const pk_gpu_table *g, float q);
void pk_gpu_table_free(pk_gpu_table *g);

/* The slot of q by the rules a kernel follows: -1 when q lies in a window
 * (settle in float64). For tests and the settling path's search. */
int32_t pk_gpu_table_slot(const pk_gpu_table *g, float q);

/* The same by the packed cells (dot space). */
int32_t pk_gpu_table_slot_packed(const pk_gpu_table *g, float q);

/* Smallest positive boundary of t in chord-squared units (2 - 2 T_s), or
 * +inf when there is none; dot space pays only when this is well above
 * its error (see cuda.cu). */
double pk_gpu_first_boundary_c2(const pk_edge_table *t);

#ifdef __cplusplus
}
#endif

#endif
