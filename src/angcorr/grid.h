/* grid.h - cells on the sphere for counts at small separations, and the
 * visit plan that skips cell pairs whose every pair lies beyond theta_max.
 *
 * Objects are sorted into cells: declination bands of height h, each cut in
 * RA into cells about h wide (fewer towards the poles, a few around each). A
 * cell is a contiguous run of the sorted catalog, with a bounding sphere in
 * 3-d: its centre c and a radius r that holds every member's double unit
 * vector. For cells A and B every pair has chord |p_i - p_j| >=
 * |c_A - c_B| - r_A - r_B (the triangle inequality), so when that bound
 * exceeds the chord of the last bin edge (with a margin, see
 * pk_grid_prune_chord2) all of their pairs are out of range for the
 * reference and are counted into the top slot arithmetically, unvisited.
 *
 * The invariant: a plan never drops a pair whose reference slot is not the
 * top one. Band and RA cell boundaries only decide efficiency; correctness
 * rests on the sphere test alone (and on the band window, which is wider
 * than any in-range pair's declination difference).
 */
#ifndef PAIRKIT_ANGCORR_GRID_H
#define PAIRKIT_ANGCORR_GRID_H

#include "angcorr_internal.h"

typedef struct pk_grid {
    size_t n;
    double h;            /* band height and RA cell width, radians; 0: one cell */
    uint32_t *order;     /* sorted position -> catalog index */
    pk_unit_vectors v;   /* double unit vectors in sorted order (the reference's values) */
    float *fx, *fy, *fz; /* the same rounded to float */
    double *w;           /* weights in sorted order, NULL when unweighted */
    double *w_prefix;    /* [n + 1] prefix sums of w (NULL when unweighted) */
    size_t n_cells;
    uint32_t *cell_start; /* [n_cells + 1] */
    int64_t *cell_band;   /* [n_cells] */
    double *cell_c;       /* [3 n_cells] bounding sphere centres */
    double *cell_r;       /* [n_cells] radii (chord) */
} pk_grid;

/* Build the grid of a catalog with band height h (radians; h <= 0: a
 * single cell in catalog order). weights may be NULL. */
pk_status pk_grid_build(pk_context *ctx, const pk_catalog *cat, const double *weights, double h, pk_grid *g);
void pk_grid_free(pk_grid *g);
/* The grids of a and b (b NULL: a alone) for counts up to theta_max:
 * band height theta_max / GRID_REFINE, coarser until cells hold
 * GRID_MIN_PER_CELL objects on average (cpu_grid.c). */
pk_status pk_grid_build_pair(pk_context *ctx, const pk_catalog *a, const double *wa, const pk_catalog *b,
                             const double *wb, double theta_max, pk_grid *ga, pk_grid *gb);

/* The chord squared beyond which a pair's reference slot is certainly the
 * top one (n_bins + 1), from the last dot threshold; 0 when nothing can be
 * pruned (theta_max at or beyond pi). */
double pk_grid_prune_chord2(const pk_edge_table *table);

/* A unit of work: rows [i0, i1) of a (sorted) against the ranges
 * ranges[r0..r1) of b, each a run [cb0, cb1) of b's cells (contiguous
 * objects). Each row trims a range's ends to the cells its own point can
 * reach (the same sphere test, point against cell). For autocorrelations
 * only j > i is counted. */
typedef struct pk_grid_unit {
    uint32_t i0, i1;
    size_t r0, r1;
} pk_grid_unit;

typedef struct pk_grid_plan {
    size_t n_units;
    pk_grid_unit *units;
    uint32_t *ranges; /* pairs cb0, cb1 of b's cells */
    size_t n_ranges;
    uint64_t pairs_visited; /* ordered pairs in the units before row trimming (j > i only for autos) */
    uint64_t pairs_all;     /* n_a n_b, or n (n - 1) / 2 for autos */
    double chord2;          /* the pruning chord squared it was built with (0: every pair visited) */
} pk_grid_plan;

/* Plan for grids a and b (b == NULL: autocorrelation of a), both built
 * with the same h. chord2 <= 0 or a single-cell grid: every pair visited. */
pk_status pk_grid_plan_build(pk_context *ctx, const pk_grid *a, const pk_grid *b, double theta_max, double chord2,
                             pk_grid_plan *plan);
void pk_grid_plan_free(pk_grid_plan *plan);
/* Weight (or count, unweighted) of the pairs a plan does not visit:
 * every row's columns minus those of its units' ranges (rows of a in no
 * unit: all their columns). */
double pk_grid_plan_skipped_weight(const pk_grid_plan *plan, const pk_grid *ga, const pk_grid *gb, int autocorr);

/* The grids and the plan of one count (b NULL: the autocorrelation of a),
 * for the CPU engine and the device's feature jobs alike: pruned at the
 * last edge's chord (PK_PRUNE_AUTO: unless theta_max >= 60 degrees), every
 * pair visited with PK_PRUNE_OFF. PK_ERR_UNSUPPORTED without a message when
 * prune is AUTO, nothing is weighted and pruning would not pay; nothing is
 * left to free on failure. */
pk_status pk_grid_count_prepare(pk_context *ctx, const pk_catalog *a, const double *wa, const pk_catalog *b,
                                const double *wb, const pk_bins *bins, const pk_edge_table *table, int prune,
                                int weighted, pk_grid *ga, pk_grid *gb, pk_grid_plan *plan);
/* Each object of an autocorrelation paired with itself, at the separation
 * the reference's float64 dot product gives it (up to ~3e-6 degree): one
 * count into slots, and w^2 (and w^2 theta for slots 1..n_bins) into
 * wslots and tslots where not NULL. */
void pk_grid_add_self_pairs(const pk_grid *g, const pk_bins *bins, const pk_edge_table *table, uint64_t *slots,
                            double *wslots, double *tslots);

/* The CPU counting engine behind pk_angcorr_count_ex and the pruned path of
 * pk_angcorr_count: slots[n_slots] += counts; wslots, tslots (n_slots each,
 * may be NULL) += weighted counts and weighted separation sums (theta only
 * for slots 1..n_bins). prune: PK_PRUNE_*. Returns PK_ERR_UNSUPPORTED
 * (without a message) when prune is AUTO and pruning would not pay, so the
 * caller can run the full-range kernels instead. */
pk_status pk_angcorr_count_grid(pk_context *ctx, int kernel, const pk_catalog *a, const double *wa, const pk_catalog *b,
                                const double *wb, const pk_bins *bins, const pk_edge_table *table, int prune,
                                int mean_theta, uint64_t *slots, double *wslots, double *tslots, pk_pair_stats *stats,
                                pk_progress *progress);

/* Whether the pruned path is worth trying for these bins (theta_max small
 * enough), for the hook in api.c. */
int pk_angcorr_grid_wanted(int kernel, const pk_bins *bins);

/* The single-gather kernel for any bins (cpu_direct.c): the cell of c2 gives
 * the slot directly unless a window touches the cell. Needs the direct
 * table in job->table's companion (see pk_direct_table). */
typedef struct pk_direct_table {
    int16_t *slot; /* per cell of the edge table: the slot, or -1 when a window touches the cell */
    int32_t n_cells;
} pk_direct_table;

pk_status pk_direct_table_build(pk_context *ctx, const pk_edge_table *t, pk_direct_table *d);
void pk_direct_table_free(pk_direct_table *d);
/* Count the pairs of rows [i0, i1) against columns [j0, j1) like a
 * pk_block_fn, through the direct table; masked tails, no scalar tail.
 * hist: one histogram of n_slots entries (stride is unused). */
uint64_t pk_angcorr_block_avx512_direct(const pk_pair_job *job, const pk_direct_table *d, size_t i0, size_t i1,
                                        size_t j0, size_t j1, uint32_t *hist, size_t stride);

/* The arithmetic path for log bins (cpu_log.c): t = ln(theta / theta_min) /
 * ln(ratio) in float32 from c2, with a per-pair margin; see the file. */
typedef struct pk_log_fast {
    float a, b, c;        /* t = a log2(c2) + b G(c2) + c */
    float lp[8];          /* log2(1 + x) on [0, 1] */
    float g[5];           /* G(y) = log2(2 asin(sqrt(y) / 2) / sqrt(y)) on [0, c2_top] */
    float m1, m0;         /* margin = m1 / sqrt(c2) + m0 */
    float c2_lo0, c2_top; /* below: slot 0; at or above: the top slot */
    int32_t top;
} pk_log_fast;

/* 0 when the bins are not logarithmic (edges off a geometric sequence by
 * more than 1e-6 bin), reach beyond 90 degrees, or the margin would exceed
 * 0.02 bin. */
int pk_log_fast_init(const pk_bins *bins, const pk_edge_table *t, pk_log_fast *lf);
uint64_t pk_angcorr_block_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i0, size_t i1, size_t j0,
                                     size_t j1, uint32_t *hist, size_t stride);
/* The slots of row i against columns [j0, j1) into out[j1 - j0]. */
uint64_t pk_angcorr_row_slots_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i, size_t j0, size_t j1,
                                         int32_t *out);

/* One count for the device's feature kernel (weighted sums, mean
 * separations, the pruned plan), its host parts in feature_jobs.c. The
 * caller fills the inputs and outputs; prepare builds the grids and the
 * plan (PK_ERR_UNSUPPORTED without a message when pruning would not pay
 * and nothing is weighted; nothing is left to free on failure), the device
 * adds the visited pairs into the outputs (zeroed by the caller), finish
 * adds the pairs the plan skipped and, for autocorrelations, doubles the
 * counts and adds each object's pair with itself; free releases the grids. */
typedef struct pk_feature_job {
    const pk_catalog *a, *b; /* b NULL: the autocorrelation of a */
    const double *wa, *wb;   /* weights or NULL */
    uint64_t *slots;         /* [n_slots] */
    double *wslots, *tslots; /* [n_slots] each, or NULL */
    pk_pair_stats *stats;    /* pairs_visited, pairs_fp64 and kernel_ms set */
    pk_grid ga, gb;          /* built by prepare */
    pk_grid_plan plan;
    uint64_t n_fp64; /* pairs the device settled in float64 */
} pk_feature_job;

pk_status pk_feature_job_prepare(pk_context *ctx, pk_feature_job *job, const pk_bins *bins, const pk_edge_table *table,
                                 int prune, int weighted);
void pk_feature_job_finish(pk_feature_job *job, const pk_bins *bins, const pk_edge_table *table);
void pk_feature_job_free(pk_feature_job *job);

#ifdef PK_HAVE_CUDA
/* The CUDA counterpart of pk_angcorr_count_grid (cuda_features.cu): weighted
 * sums, mean separations and the pruned plan on the device. Same contract,
 * including PK_ERR_UNSUPPORTED without a message when pruning would not pay
 * and nothing is weighted. */
pk_status pk_angcorr_count_cuda_features(pk_context *ctx, int kernel, const pk_catalog *a, const double *wa,
                                         const pk_catalog *b, const double *wb, const pk_bins *bins,
                                         const pk_edge_table *table, int prune, int mean_theta, uint64_t *slots,
                                         double *wslots, double *tslots, pk_pair_stats *stats, pk_progress *progress);
/* Whether the feature kernel's shared memory holds the table's slots
 * (about 4,000 bins at most). */
int pk_angcorr_cuda_features_fit(const pk_edge_table *table);
/* Prepared jobs counted on the device in one batch: one upload, launches
 * over every job's items, one download. Each job's outputs receive the
 * visited pairs (then pk_feature_job_finish); weighted: wslots are summed
 * (tslots too when mean_theta). PK_ERR_UNSUPPORTED without a message when
 * the table does not fit the device's shared memory and nothing is
 * weighted. progress (may be NULL) advances to its total over the batch's
 * launches, and a cancellation seen there ends the batch. */
pk_status pk_angcorr_cuda_feature_batch(pk_context *ctx, pk_feature_job *jobs, size_t n_jobs, const pk_bins *bins,
                                        const pk_edge_table *table, int weighted, int mean_theta,
                                        pk_progress *progress);
#endif

#endif
