/* cpu_grid.c - the grid of cells (grid.h), the visit plan that skips far
 * cell pairs, and the CPU counting engine for weights, mean separations
 * and small scales.
 *
 * Counts are exact as everywhere in angcorr: a visited pair gets its slot
 * from the float32 chord squared and the edge table, settled in float64
 * near an edge; a skipped pair is one the plan proved to be beyond the last
 * edge, and is added to the top slot arithmetically, so the sum check of
 * api.c still sees every pair.
 *
 * Weighted sums are float64 and deterministic: the units of the plan are
 * cut into groups of consecutive units (fixed by the plan, not by the
 * thread count); within a group pairs are added unit by unit, row by row,
 * column by column into the group's own sums, and the groups' sums are
 * added in group order at the end. For autocorrelations the pairs j > i
 * are summed and doubled, and the self-pairs added last.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_kernel.h"
#include "grid.h"

/* Rows per unit: as cpu.c's tiles, and it bounds a unit's pairs below
 * 2^32 for any b of fewer than 16M objects (the u32 block histograms). */
#define GRID_UNIT_ROWS 256
/* Columns per kernel call, as cpu.c (L1-sized column tiles). */
#define GRID_TILE_COLS 2048
/* Cells should hold this many objects on average; finer grids only add
 * per-cell overhead (the plan merges neighbouring cells into long rows). */
#define GRID_MIN_PER_CELL 8
/* Band height as a fraction of theta_max. On the bundled DR to 10 degrees
 * (5.18e8 pairs in range) the plan with row trimming visits 7.59e8 pairs at
 * 1/3, 6.91e8 at 1/4, 6.29e8 at 1/6, 5.98e8 at 1/8, 5.67e8 at 1/12; CPU
 * time is flat from 1/6 to 1/8 and rises at 1/12 (docs/performance.md). */
#define GRID_REFINE 8.0
/* Largest number of per-group float64 histograms kept for the ordered merge. */
#define GRID_MAX_GROUP_SLOTS (1u << 22)

/* ---- the grid ---------------------------------------------------------- */

typedef struct sort_key {
    uint64_t key;
    uint32_t idx;
} sort_key;

static int cmp_sort_key(const void *pa, const void *pb) {
    const sort_key *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Stable LSD radix sort of keys by key, 16 bits a pass, skipping the
 * passes whose digit is the same for every key: 2 or 3 passes of O(n) for
 * the grid's keys, against qsort's n log n comparisons (about 10 ms for
 * 100,000 objects on the benchmark machine). */
static int radix_sort_keys(sort_key *keys, size_t n) {
    sort_key *tmp = malloc((n ? n : 1) * sizeof *tmp);
    uint32_t *count = malloc(65536 * sizeof(uint32_t));
    if (!tmp || !count) {
        free(tmp);
        free(count);
        return 0;
    }
    uint64_t all_or = 0, all_and = ~(uint64_t)0;
    for (size_t i = 0; i < n; i++) all_or |= keys[i].key, all_and &= keys[i].key;
    for (int shift = 0; shift < 64; shift += 16) {
        if ((((all_or ^ all_and) >> shift) & 0xffff) == 0) continue; /* every key has this digit */
        memset(count, 0, 65536 * sizeof(uint32_t));
        for (size_t i = 0; i < n; i++) count[(keys[i].key >> shift) & 0xffff]++;
        uint32_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            uint32_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) tmp[count[(keys[i].key >> shift) & 0xffff]++] = keys[i];
        memcpy(keys, tmp, n * sizeof *keys);
    }
    free(tmp);
    free(count);
    return 1;
}

void pk_grid_free(pk_grid *g) {
    if (!g) return;
    free(g->order);
    pk_unit_vectors_free(&g->v);
    pk_aligned_free(g->fx);
    pk_aligned_free(g->fy);
    pk_aligned_free(g->fz);
    free(g->w);
    free(g->w_prefix);
    free(g->cell_start);
    free(g->cell_band);
    free(g->cell_c);
    free(g->cell_r);
    memset(g, 0, sizeof *g);
}

static int64_t n_bands_of(double h) {
    return (int64_t)ceil(M_PI / h);
}

static int64_t band_of(double dec, double h, int64_t n_bands) {
    double b = floor((dec + M_PI / 2) / h);
    if (b < 0) b = 0;
    if (b > (double)(n_bands - 1)) b = (double)(n_bands - 1);
    return (int64_t)b;
}

/* RA cells of a band: about 2 pi cos(dec) / h at the band's dec nearest
 * the equator, at least one. */
static int64_t n_ra_of(int64_t band, double h) {
    double lo = -M_PI / 2 + (double)band * h, hi = lo + h;
    double c = (lo <= 0 && hi >= 0) ? 1.0 : fmax(cos(lo), cos(hi));
    double n = floor(2 * M_PI * c / h);
    if (n < 1) n = 1;
    if (n > 1048576) n = 1048576;
    return (int64_t)n;
}

pk_status pk_grid_build(pk_context *ctx, const pk_catalog *cat, const double *weights, double h, pk_grid *g) {
    memset(g, 0, sizeof *g);
    size_t n = cat->n;
    g->n = n;
    g->h = h > 0 ? h : 0;
    if (n > UINT32_MAX - 1) return pk_fail(ctx, PK_ERR_UNSUPPORTED, "catalogs of more than 2^32 objects");
    sort_key *keys = malloc((n ? n : 1) * sizeof *keys);
    g->order = malloc((n ? n : 1) * sizeof(uint32_t));
    if (!keys || !g->order) {
        free(keys);
        pk_grid_free(g);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the grid of %zu objects", n);
    }
    int64_t n_bands = h > 0 ? n_bands_of(h) : 1;
    /* RA cells per band, computed once per band (two cosines) */
    int64_t *band_n_ra = h > 0 && n_bands <= (1 << 22) ? calloc((size_t)n_bands, sizeof(int64_t)) : NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = 0;
        if (h > 0) {
            int64_t band = band_of(cat->dec[i], h, n_bands);
            int64_t n_ra;
            if (band_n_ra) {
                if (!band_n_ra[band]) band_n_ra[band] = n_ra_of(band, h);
                n_ra = band_n_ra[band];
            } else {
                n_ra = n_ra_of(band, h);
            }
            double ra = fmod(cat->ra[i], 2 * M_PI);
            if (ra < 0) ra += 2 * M_PI;
            int64_t k = (int64_t)floor(ra / (2 * M_PI / (double)n_ra));
            if (k < 0) k = 0;
            if (k >= n_ra) k = n_ra - 1;
            key = (uint64_t)band << 24 | (uint64_t)k;
        }
        keys[i].key = key;
        keys[i].idx = (uint32_t)i;
    }
    free(band_n_ra);
    if (h > 0 && !radix_sort_keys(keys, n)) qsort(keys, n, sizeof *keys, cmp_sort_key);
    size_t n_cells = 0;
    for (size_t i = 0; i < n; i++) {
        g->order[i] = keys[i].idx;
        if (i == 0 || keys[i].key != keys[i - 1].key) n_cells++;
    }
    g->n_cells = n_cells;
    g->cell_start = malloc((n_cells + 1) * sizeof(uint32_t));
    g->cell_band = malloc((n_cells ? n_cells : 1) * sizeof(int64_t));
    g->cell_c = malloc((3 * n_cells + 1) * sizeof(double));
    g->cell_r = malloc((n_cells + 1) * sizeof(double));
    g->v.n = n;
    g->v.x = pk_aligned_alloc(3 * (n + 16) * sizeof(double));
    g->fx = pk_aligned_alloc((n + 16) * sizeof(float));
    g->fy = pk_aligned_alloc((n + 16) * sizeof(float));
    g->fz = pk_aligned_alloc((n + 16) * sizeof(float));
    if (weights) {
        g->w = malloc((n ? n : 1) * sizeof(double));
        g->w_prefix = malloc((n + 1) * sizeof(double));
    }
    if (!g->cell_start || !g->cell_band || !g->cell_c || !g->cell_r || !g->v.x || !g->fx || !g->fy || !g->fz ||
        (weights && (!g->w || !g->w_prefix))) {
        free(keys);
        pk_grid_free(g);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the grid of %zu objects", n);
    }
    g->v.y = g->v.x + n + 16;
    g->v.z = g->v.y + n + 16;
    /* The reference's unit vectors, same expressions (ref.c), sorted. */
    for (size_t i = 0; i < n; i++) {
        uint32_t o = g->order[i];
        double cd = cos(cat->dec[o]);
        g->v.x[i] = cd * cos(cat->ra[o]);
        g->v.y[i] = cd * sin(cat->ra[o]);
        g->v.z[i] = sin(cat->dec[o]);
        g->fx[i] = (float)g->v.x[i];
        g->fy[i] = (float)g->v.y[i];
        g->fz[i] = (float)g->v.z[i];
        if (weights) g->w[i] = weights[o];
    }
    for (size_t i = n; i < n + 16; i++) {
        g->v.x[i] = g->v.y[i] = g->v.z[i] = 0;
        g->fx[i] = g->fy[i] = g->fz[i] = 0;
    }
    if (weights) {
        g->w_prefix[0] = 0;
        for (size_t i = 0; i < n; i++) g->w_prefix[i + 1] = g->w_prefix[i] + g->w[i];
    }
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || keys[i].key != keys[i - 1].key) {
            g->cell_start[c] = (uint32_t)i;
            g->cell_band[c] = (int64_t)(keys[i].key >> 24);
            c++;
        }
    }
    g->cell_start[n_cells] = (uint32_t)n;
    free(keys);
    /* Bounding spheres: the normalised mean as centre; the radius the
     * largest member distance, plus 1e-12 for the rounding of these
     * double computations (errors of order 1e-16). */
    for (size_t k = 0; k < n_cells; k++) {
        double sx = 0, sy = 0, sz = 0;
        for (uint32_t i = g->cell_start[k]; i < g->cell_start[k + 1]; i++) {
            sx += g->v.x[i];
            sy += g->v.y[i];
            sz += g->v.z[i];
        }
        double norm = sqrt(sx * sx + sy * sy + sz * sz);
        if (norm > 0) sx /= norm, sy /= norm, sz /= norm;
        double r2 = 0;
        for (uint32_t i = g->cell_start[k]; i < g->cell_start[k + 1]; i++) {
            double dx = g->v.x[i] - sx, dy = g->v.y[i] - sy, dz = g->v.z[i] - sz;
            double d2 = dx * dx + dy * dy + dz * dz;
            if (d2 > r2) r2 = d2;
        }
        g->cell_c[3 * k] = sx;
        g->cell_c[3 * k + 1] = sy;
        g->cell_c[3 * k + 2] = sz;
        g->cell_r[k] = sqrt(r2) + 1e-12;
    }
    return PK_OK;
}

double pk_grid_prune_chord2(const pk_edge_table *table) {
    double T = table->dot_threshold[table->n_bounds - 1];
    if (!isfinite(T) || T <= -1.0) return 0.0;
    /* A pair with chord c of double unit vectors (norms within 1e-15 of 1)
     * has a reference dot below 1 - c^2 / 2 + 1e-15; beyond this chord
     * squared that is below T, so the slot is the top one. */
    return (2.0 - 2.0 * T) * (1.0 + 1e-9) + 1e-12;
}

void pk_grid_plan_free(pk_grid_plan *plan) {
    if (!plan) return;
    free(plan->units);
    free(plan->ranges);
    memset(plan, 0, sizeof *plan);
}

/* Growable arrays of the plan. */
typedef struct plan_builder {
    pk_grid_plan *p;
    size_t cap_units, cap_ranges;
    int failed;
} plan_builder;

static void push_range(plan_builder *b, uint32_t cb0, uint32_t cb1) {
    pk_grid_plan *p = b->p;
    if (p->n_ranges == b->cap_ranges) {
        size_t cap = b->cap_ranges ? 2 * b->cap_ranges : 1024;
        uint32_t *r = realloc(p->ranges, 2 * cap * sizeof(uint32_t));
        if (!r) {
            b->failed = 1;
            return;
        }
        p->ranges = r;
        b->cap_ranges = cap;
    }
    p->ranges[2 * p->n_ranges] = cb0;
    p->ranges[2 * p->n_ranges + 1] = cb1;
    p->n_ranges++;
}

/* Ordered pairs (i, j), i in [i0, i1), j in [j0, j1), j > i when autocorr. */
static uint64_t block_pairs(uint32_t i0, uint32_t i1, uint32_t j0, uint32_t j1, int autocorr) {
    if (!autocorr) return (uint64_t)(i1 - i0) * (uint64_t)(j1 - j0);
    uint64_t s = 0;
    for (uint32_t i = i0; i < i1; i++) {
        uint32_t js = j0 > i + 1 ? j0 : i + 1;
        if (j1 > js) s += j1 - js;
    }
    return s;
}

/* Rows [i0, i1) of a, cut into units of at most GRID_UNIT_ROWS rows that
 * all share the ranges [r0, r1). */
static void push_units(plan_builder *b, const pk_grid *gb, uint32_t i0, uint32_t i1, size_t r0, size_t r1,
                       int autocorr) {
    pk_grid_plan *p = b->p;
    for (uint32_t s = i0; s < i1; s += GRID_UNIT_ROWS) {
        uint32_t e = s + GRID_UNIT_ROWS < i1 ? s + GRID_UNIT_ROWS : i1;
        if (p->n_units == b->cap_units) {
            size_t cap = b->cap_units ? 2 * b->cap_units : 1024;
            pk_grid_unit *u = realloc(p->units, cap * sizeof *u);
            if (!u) {
                b->failed = 1;
                return;
            }
            p->units = u;
            b->cap_units = cap;
        }
        p->units[p->n_units++] = (pk_grid_unit){s, e, r0, r1};
        for (size_t r = r0; r < r1; r++)
            p->pairs_visited +=
                block_pairs(s, e, gb->cell_start[p->ranges[2 * r]], gb->cell_start[p->ranges[2 * r + 1]], autocorr);
    }
}

/* First cell of grid g with band >= band. */
static size_t first_cell_of_band(const pk_grid *g, int64_t band) {
    size_t lo = 0, hi = g->n_cells;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->cell_band[mid] < band) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Whether a point (or sphere of radius r around p) may reach cell k of g
 * within the chord whose square is chord2. */
static inline int may_reach(const pk_grid *g, size_t k, const double *p, double r, double chord2) {
    const double *c = g->cell_c + 3 * k;
    double dx = p[0] - c[0], dy = p[1] - c[1], dz = p[2] - c[2];
    double lb = sqrt(dx * dx + dy * dy + dz * dz) - r - g->cell_r[k];
    return lb <= 0 || lb * lb <= chord2;
}

pk_status pk_grid_plan_build(pk_context *ctx, const pk_grid *a, const pk_grid *b, double theta_max, double chord2,
                             pk_grid_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int autocorr = b == NULL;
    if (autocorr) b = a;
    plan_builder pb = {plan, 0, 0, 0};
    plan->pairs_all = autocorr ? (uint64_t)a->n * (uint64_t)(a->n - 1) / 2 : (uint64_t)a->n * (uint64_t)b->n;
    int prune = chord2 > 0 && a->h > 0;
    /* Any pair in range has |dec_i - dec_j| <= theta < theta_max plus the
     * reference's rounding (far below 1e-7 rad); two more bands cover the
     * rounding of the band index. */
    int64_t band_reach = prune ? (int64_t)ceil((theta_max + 1e-7) / a->h) + 2 : 0;
    for (size_t ca = 0; ca < a->n_cells && !pb.failed; ca++) {
        uint32_t i0 = a->cell_start[ca], i1 = a->cell_start[ca + 1];
        size_t r0 = plan->n_ranges;
        if (!prune) {
            push_range(&pb, 0, (uint32_t)b->n_cells);
            if (!pb.failed) push_units(&pb, b, i0, i1, r0, plan->n_ranges, autocorr);
            continue;
        }
        int64_t band = a->cell_band[ca];
        size_t cb = first_cell_of_band(b, band - band_reach);
        size_t cb_end = first_cell_of_band(b, band + band_reach + 1);
        if (autocorr && cb < ca) cb = ca;
        size_t open_end = 0; /* the last range ends at this cell, when > 0 */
        for (; cb < cb_end && !pb.failed; cb++) {
            if (!may_reach(b, cb, a->cell_c + 3 * ca, a->cell_r[ca], chord2)) continue;
            if (plan->n_ranges > r0 && open_end == cb) plan->ranges[2 * plan->n_ranges - 1] = (uint32_t)(cb + 1);
            else push_range(&pb, (uint32_t)cb, (uint32_t)(cb + 1));
            open_end = cb + 1;
        }
        if (plan->n_ranges > r0 && !pb.failed) push_units(&pb, b, i0, i1, r0, plan->n_ranges, autocorr);
    }
    if (pb.failed) {
        pk_grid_plan_free(plan);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the visit plan");
    }
    return PK_OK;
}

/* ---- the engine ----------------------------------------------------------- */

/* The exact kernels' block functions: the approximate baseline is never
 * pruned. */
static pk_block_fn grid_block_fn(int kernel, int linear) {
    return kernel == PK_ANGCORR_KERNEL_CPU_APPROX ? NULL : pk_angcorr_block_fn(kernel, linear);
}

int pk_angcorr_grid_wanted(int kernel, const pk_bins *bins) {
    if (!grid_block_fn(kernel, 0)) return 0;
    /* Beyond about 60 degrees few cell pairs can be skipped. */
    return bins->edges[bins->n_bins] < M_PI / 3;
}

/* With few slots (GRID_LANE_SLOTS at most), weighted sums go to GRID_LANES
 * copies of the slots, a pair to copy (column mod GRID_LANES), so that
 * neighbouring columns in one bin (the usual case: columns are sorted on
 * the sky) do not wait on each other's load-add-store through memory; a
 * group's copies are added in a fixed order when it ends. With more slots
 * pairs spread over more bins and four copies would crowd the cache: one
 * copy, the group's own sums. Every weighted path sends a pair to the same
 * copy, in the same order, so their sums are the same bit for bit. */
#define GRID_LANES 4
#define GRID_LANE_SLOTS 256

/* The weighted / mean-separation block: rows [i0, i1) against [j0, j1),
 * into the lanes (cnt, wsum, tsum: lane_mask + 1 copies stride apart). */
static inline __attribute__((always_inline)) uint64_t block_weighted(const pk_pair_job *job, const double *wa,
                                                                     const double *wb, int mean_theta, int n_bins,
                                                                     size_t i0, size_t i1, size_t j0, size_t j1,
                                                                     uint64_t *cnt, double *wsum, double *tsum,
                                                                     size_t stride, size_t lane_mask) {
    uint64_t n_fp64 = 0;
    for (size_t i = i0; i < i1; i++) {
        size_t js = j0;
        if (job->autocorr && js < i + 1) js = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        double wi = wa ? wa[i] : 1.0;
        for (size_t j = js; j < j1; j++) {
            int32_t s = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
            double w = wi * (wb ? wb[j] : 1.0);
            size_t at = (j & lane_mask) * stride + (size_t)s;
            cnt[at]++;
            wsum[at] += w;
            if (mean_theta && s >= 1 && s <= n_bins) {
                double d = pk_angcorr_dot_ref(job->xa[i], job->ya[i], job->za[i], job->xb[j], job->yb[j], job->zb[j]);
                d = d > 1.0 ? 1.0 : d < -1.0 ? -1.0 : d;
                tsum[at] += w * pk_acos(d);
            }
        }
    }
    return n_fp64;
}

/* A row's slots (row_slots[j - j0]) and weights into the lanes, as
 * block_weighted does (theta NULL: no separations). Inlined with lane_mask
 * a constant, one copy a case. */
static inline __attribute__((always_inline)) void add_row_weighted(const int32_t *row_slots, size_t j0, size_t j1,
                                                                   double wi, const double *w_cols, const double *theta,
                                                                   int32_t n_bins, uint64_t *cnt, double *wsum,
                                                                   double *tsum, size_t stride, size_t lane_mask) {
    if (!theta) {
        for (size_t j = j0; j < j1; j++) {
            size_t at = (j & lane_mask) * stride + (size_t)row_slots[j - j0];
            cnt[at]++;
            wsum[at] += wi * (w_cols ? w_cols[j] : 1.0);
        }
        return;
    }
    for (size_t j = j0; j < j1; j++) {
        int32_t s = row_slots[j - j0];
        size_t at = (j & lane_mask) * stride + (size_t)s;
        double w = wi * (w_cols ? w_cols[j] : 1.0);
        cnt[at]++;
        wsum[at] += w;
        if (s >= 1 && s <= n_bins) tsum[at] += w * theta[j - j0];
    }
}

/* A group's lanes added into its slots (gw, gt: the group's; mine: the
 * thread's counts), in a fixed order, and cleared. */
static void merge_lanes(uint64_t *lane_c, double *lane_w, double *lane_t, size_t stride, size_t n_slots, uint64_t *mine,
                        double *gw, double *gt) {
    for (size_t s = 0; s < n_slots; s++) {
        uint64_t c = 0;
        double w = lane_w[s], t = lane_t ? lane_t[s] : 0;
        for (size_t l = 0; l < GRID_LANES; l++) c += lane_c[l * stride + s];
        for (size_t l = 1; l < GRID_LANES; l++) {
            w += lane_w[l * stride + s];
            if (lane_t) t += lane_t[l * stride + s];
        }
        mine[s] += c;
        gw[s] += w;
        if (gt) gt[s] += t;
    }
    memset(lane_c, 0, GRID_LANES * stride * sizeof(uint64_t));
    memset(lane_w, 0, GRID_LANES * stride * sizeof(double));
    if (lane_t) memset(lane_t, 0, GRID_LANES * stride * sizeof(double));
}

/* Band height for theta_max: GRID_REFINE cells across theta_max, but no
 * finer than GRID_MIN_PER_CELL objects per cell on average. */
pk_status pk_grid_build_pair(pk_context *ctx, const pk_catalog *a, const double *wa, const pk_catalog *b,
                             const double *wb, double theta_max, pk_grid *ga, pk_grid *gb) {
    double h = theta_max / GRID_REFINE;
    if (h < 1e-6) h = 1e-6;
    for (int attempt = 0; attempt < 40; attempt++) {
        pk_status st = pk_grid_build(ctx, a, wa, h, ga);
        if (st) return st;
        int too_fine = ga->n_cells > 16 && ga->n_cells * GRID_MIN_PER_CELL > a->n;
        if (!too_fine && b) {
            if ((st = pk_grid_build(ctx, b, wb, h, gb)) != PK_OK) {
                pk_grid_free(ga);
                return st;
            }
            too_fine = gb->n_cells > 16 && gb->n_cells * GRID_MIN_PER_CELL > b->n;
            if (too_fine) pk_grid_free(gb);
        }
        if (!too_fine) return PK_OK;
        pk_grid_free(ga);
        h *= 1.5;
        if (h > M_PI) h = M_PI;
    }
    return pk_fail(ctx, PK_ERR_INTERNAL, "could not size the grid");
}

/* A parallel region costs more than 2^20 pairs' work when the machine is
 * busy and threads wait for each other at its barrier: a count is given one
 * thread for each 2^20 pairs it visits, up to the context's count. */
#define GRID_PAIRS_A_THREAD 1048576.0

/* Pruning that skips less than a third of the pairs does not pay for the
 * shorter rows: past this share of the pairs visited, an unweighted count
 * runs the full-range kernels. */
#define GRID_PRUNE_WORTH_SHARE 0.67

pk_status pk_grid_count_prepare(pk_context *ctx, const pk_catalog *a, const double *wa, const pk_catalog *b,
                                const double *wb, const pk_bins *bins, const pk_edge_table *table, int prune,
                                int weighted, pk_grid *ga, pk_grid *gb, pk_grid_plan *plan) {
    int autocorr = b == NULL;
    memset(ga, 0, sizeof *ga);
    memset(gb, 0, sizeof *gb);
    memset(plan, 0, sizeof *plan);
    double theta_max = bins->edges[bins->n_bins];
    double chord2 = prune == PK_PRUNE_OFF ? 0.0 : pk_grid_prune_chord2(table);
    if (prune == PK_PRUNE_AUTO && theta_max >= M_PI / 3) chord2 = 0;
    if (prune == PK_PRUNE_AUTO && chord2 <= 0 && !weighted) return PK_ERR_UNSUPPORTED;
    pk_status st;
    if (chord2 > 0) {
        st = pk_grid_build_pair(ctx, a, wa, b, wb, theta_max, ga, autocorr ? NULL : gb);
    } else {
        st = pk_grid_build(ctx, a, wa, 0, ga);
        if (st == PK_OK && !autocorr && (st = pk_grid_build(ctx, b, wb, 0, gb)) != PK_OK) pk_grid_free(ga);
    }
    if (st) return st;
    st = pk_grid_plan_build(ctx, ga, autocorr ? NULL : gb, theta_max, chord2, plan);
    if (st == PK_OK && prune == PK_PRUNE_AUTO && !weighted &&
        (double)plan->pairs_visited > GRID_PRUNE_WORTH_SHARE * (double)plan->pairs_all) {
        pk_grid_plan_free(plan);
        st = PK_ERR_UNSUPPORTED;
    }
    if (st) {
        pk_grid_free(ga);
        pk_grid_free(gb);
        return st;
    }
    plan->chord2 = chord2;
    return PK_OK;
}

void pk_grid_add_self_pairs(const pk_grid *g, const pk_bins *bins, const pk_edge_table *table, uint64_t *slots,
                            double *wslots, double *tslots) {
    for (size_t i = 0; i < g->n; i++) {
        double dot = pk_angcorr_dot_ref(g->v.x[i], g->v.y[i], g->v.z[i], g->v.x[i], g->v.y[i], g->v.z[i]);
        int32_t s = pk_edge_table_slot_fp64(table, dot);
        slots[s]++;
        if (!wslots) continue;
        double w = g->w ? g->w[i] * g->w[i] : 1.0;
        wslots[s] += w;
        if (tslots && s >= 1 && s <= (int32_t)bins->n_bins) {
            dot = dot > 1.0 ? 1.0 : dot < -1.0 ? -1.0 : dot;
            tslots[s] += w * pk_acos(dot);
        }
    }
}

/* Columns [*j0, *j1) of row i within the cells [cb0, cb1) of gb, trimmed at
 * both ends to the cells the row's point can reach. */
static inline void row_columns(const pk_grid *ga, size_t i, const pk_grid *gb, uint32_t cb0, uint32_t cb1,
                               double chord2, int autocorr, size_t *j0, size_t *j1) {
    double p[3] = {ga->v.x[i], ga->v.y[i], ga->v.z[i]};
    while (cb0 < cb1 && !may_reach(gb, cb0, p, 0.0, chord2)) cb0++;
    while (cb1 > cb0 && !may_reach(gb, cb1 - 1, p, 0.0, chord2)) cb1--;
    size_t s = gb->cell_start[cb0], e = gb->cell_start[cb1];
    if (autocorr && s < i + 1) s = i + 1;
    *j0 = s;
    *j1 = e > s ? e : s;
}

/* Weight of the columns row i pairs with, before pruning. */
static inline double row_all_columns(const pk_grid *gb, size_t i, int autocorr) {
    if (gb->w_prefix) return autocorr ? gb->w_prefix[gb->n] - gb->w_prefix[i + 1] : gb->w_prefix[gb->n];
    return autocorr ? (double)(gb->n - i - 1) : (double)gb->n;
}

static inline double columns_weight(const pk_grid *gb, size_t j0, size_t j1) {
    return gb->w_prefix ? gb->w_prefix[j1] - gb->w_prefix[j0] : (double)(j1 - j0);
}

/* Histogram copies of the unweighted kernels: 16, one per lane, so that
 * repeated bins (most pairs of log bins fall in the last two) do not chain
 * increments of one address. */
#define GRID_HIST_COPIES 16
/* Pairs the 32-bit histogram copies take between two flushes into the
 * 64-bit counts: with a tile's pairs (at most GRID_UNIT_ROWS x
 * GRID_TILE_COLS = 2^19) on top, no counter reaches 2^32. */
#define GRID_FLUSH_PAIRS (1ull << 31)

/* The histogram copies added into the 64-bit counts and zeroed. */
static void flush_hist(uint32_t *hist, size_t stride, size_t n_slots, uint64_t *mine) {
    for (int c = 0; c < GRID_HIST_COPIES; c++) {
        uint32_t *h = hist + (size_t)c * stride;
        for (size_t s = 0; s < n_slots; s++) {
            mine[s] += h[s];
            h[s] = 0;
        }
        h[n_slots] = 0;
    }
}

/* How a grid count finds its pairs' slots: the block function (the
 * arithmetic path for linear bins where the kernel has one), for unweighted
 * AVX-512 counts the direct table or the log path, and for weighted ones a
 * row's slots by the log path, or row_slots_w: 1 the AVX-512 linear path, 2
 * the AVX2 linear path, 3 the AVX2 edge table, 0 the weighted block. */
typedef struct grid_paths {
    pk_linear_fast linear;
    int use_linear;
    pk_block_fn block;
    pk_direct_table direct;
    int use_direct, use_log;
    pk_log_fast logf;
    int use_log_w, row_slots_w;
} grid_paths;

static pk_status choose_grid_paths(pk_context *ctx, int kernel, const pk_bins *bins, const pk_edge_table *table,
                                   int weighted_path, grid_paths *p) {
    memset(p, 0, sizeof *p);
    p->use_linear = pk_linear_fast_init(bins, &p->linear);
    p->block = grid_block_fn(kernel, p->use_linear);
    if (!p->block) p->block = pk_angcorr_block_scalar;
#if defined(__x86_64__)
    if (!weighted_path && !p->use_linear && kernel == PK_ANGCORR_KERNEL_CPU_AVX512 && pk_cpu_has_avx512() &&
        table->n_slots <= 32767) {
        pk_status st = pk_direct_table_build(ctx, table, &p->direct);
        if (st != PK_OK) return st;
        p->use_direct = 1;
    }
    p->use_log = p->use_direct && pk_log_fast_init(bins, table, &p->logf);
    /* weighted counts (and separations): slots by the log path, then the
     * weights added row by row in column order */
    p->use_log_w = weighted_path && !p->use_linear && kernel == PK_ANGCORR_KERNEL_CPU_AVX512 && pk_cpu_has_avx512() &&
                   pk_log_fast_init(bins, table, &p->logf);
    /* and by the arithmetic path for linear bins */
    if (weighted_path && p->use_linear && kernel == PK_ANGCORR_KERNEL_CPU_AVX512 && pk_cpu_has_avx512())
        p->row_slots_w = 1;
    else if (weighted_path && p->use_linear && kernel == PK_ANGCORR_KERNEL_CPU_AVX2 && pk_cpu_has_avx2_fma())
        p->row_slots_w = 2; /* the AVX2 one */
    /* other bins (and log bins without AVX-512): the edge table's slots, 8 a step */
    if (weighted_path && !p->use_log_w && !p->row_slots_w &&
        (kernel == PK_ANGCORR_KERNEL_CPU_AVX512 || kernel == PK_ANGCORR_KERNEL_CPU_AVX512_TABLE ||
         kernel == PK_ANGCORR_KERNEL_CPU_AVX2) &&
        pk_cpu_has_avx2_fma())
        p->row_slots_w = 3;
#else
    (void)ctx, (void)table, (void)weighted_path;
#endif
    return PK_OK;
}

pk_status pk_angcorr_count_grid(pk_context *ctx, int kernel, const pk_catalog *a, const double *wa, const pk_catalog *b,
                                const double *wb, const pk_bins *bins, const pk_edge_table *table, int prune,
                                int mean_theta, uint64_t *slots, double *wslots, double *tslots, pk_pair_stats *stats,
                                pk_progress *progress) {
    int autocorr = b == NULL;
    int weighted_path = wslots != NULL;
    if (!mean_theta || !weighted_path) tslots = NULL;
    size_t n_slots = (size_t)table->n_slots;
    pk_grid ga, gb;
    pk_grid_plan plan;
    pk_status st = pk_grid_count_prepare(ctx, a, wa, b, wb, bins, table, prune, weighted_path, &ga, &gb, &plan);
    if (st) return st;
    const pk_grid *gbp = autocorr ? &ga : &gb;
    double chord2 = plan.chord2;
    int pruned = chord2 > 0 && ga.h > 0;

    grid_paths paths;
    if ((st = choose_grid_paths(ctx, kernel, bins, table, weighted_path, &paths)) != PK_OK) {
        pk_grid_plan_free(&plan);
        pk_grid_free(&ga);
        pk_grid_free(&gb);
        return st;
    }
    /* copies the parallel region reads as plain locals */
    const pk_linear_fast linear = paths.linear;
    const pk_log_fast logf = paths.logf;
    const pk_block_fn block = paths.block;
    const int use_linear = paths.use_linear, use_direct = paths.use_direct, use_log = paths.use_log;
    const int use_log_w = paths.use_log_w, row_slots_w = paths.row_slots_w;
    pk_direct_table direct = paths.direct;
    (void)use_log, (void)use_direct, (void)logf, (void)row_slots_w; /* x86 paths: read only there */

    pk_pair_job job;
    memset(&job, 0, sizeof job);
    job.table = table;
    job.linear = use_linear ? &linear : NULL;
    job.n_a = a->n;
    job.n_b = gbp->n;
    job.xa = ga.v.x, job.ya = ga.v.y, job.za = ga.v.z;
    job.xb = gbp->v.x, job.yb = gbp->v.y, job.zb = gbp->v.z;
    job.fxa = ga.fx, job.fya = ga.fy, job.fza = ga.fz;
    job.fxb = gbp->fx, job.fyb = gbp->fy, job.fzb = gbp->fz;
    job.autocorr = autocorr;

    int n_threads = 1;
#ifdef _OPENMP
    n_threads = pk_thread_count(ctx);
#endif
    /* Small counts (jackknife patch pairs) run on fewer threads: one more
     * thread for each GRID_PAIRS_A_THREAD pairs visited. */
    if ((double)n_threads > 1.0 + (double)plan.pairs_visited / GRID_PAIRS_A_THREAD)
        n_threads = 1 + (int)((double)plan.pairs_visited / GRID_PAIRS_A_THREAD);
    /* Groups of consecutive units, fixed by the plan: the weighted sums are
     * merged group by group, whatever the thread count. */
    size_t units_per_group = 1;
    if (weighted_path) {
        size_t max_groups = GRID_MAX_GROUP_SLOTS / (2 * n_slots) + 1;
        units_per_group = (plan.n_units + max_groups - 1) / max_groups;
        if (units_per_group < 1) units_per_group = 1;
    }
    size_t n_groups = (plan.n_units + units_per_group - 1) / units_per_group;
    size_t stride = (n_slots + 16) & ~(size_t)15; /* > n_slots: the direct kernel's spare entry */
    uint64_t *thread_slots = calloc((size_t)n_threads * n_slots, sizeof(uint64_t));
    uint64_t *thread_fp64 = calloc((size_t)n_threads, sizeof(uint64_t));
    uint64_t *thread_visited = calloc((size_t)n_threads, sizeof(uint64_t));
    double *group_w = weighted_path ? calloc(n_groups * n_slots + 1, sizeof(double)) : NULL;
    double *group_t = tslots ? calloc(n_groups * n_slots + 1, sizeof(double)) : NULL;
    double *group_skip = weighted_path ? calloc(n_groups + 1, sizeof(double)) : NULL;
    int alloc_failed = !thread_slots || !thread_fp64 || !thread_visited ||
                       (weighted_path && (!group_w || !group_skip)) || (tslots && !group_t);
    int cancelled = 0;
    double work_scale = progress && plan.pairs_visited ? progress->total / (double)plan.pairs_visited : 0;

    if (!alloc_failed) {
#pragma omp parallel num_threads(n_threads)
        {
            int tid = pk_thread_num();
            uint32_t *hist = pk_aligned_alloc(GRID_HIST_COPIES * stride * sizeof(uint32_t));
            size_t *row_j = malloc(2 * GRID_UNIT_ROWS * sizeof(size_t));
            int32_t row_slots[GRID_TILE_COLS + 16];
            double row_theta[GRID_TILE_COLS]; /* a row's separations, for the mean-separation sums */
            uint64_t *mine = thread_slots + (size_t)tid * n_slots;
            uint64_t visited = 0, n_fp64 = 0, pending = 0; /* pending: pairs in hist since its last flush */
            /* the weighted path's lanes (GRID_LANES), with few slots */
            const size_t lane_mask = weighted_path && n_slots <= GRID_LANE_SLOTS ? GRID_LANES - 1 : 0;
            uint64_t *lane_c = lane_mask ? calloc(GRID_LANES * stride, sizeof(uint64_t)) : NULL;
            double *lane_w = lane_mask ? calloc(GRID_LANES * stride, sizeof(double)) : NULL;
            double *lane_t = lane_mask && tslots ? calloc(GRID_LANES * stride, sizeof(double)) : NULL;
            if (lane_mask && (!lane_c || !lane_w || (tslots && !lane_t))) {
                free(lane_c), free(lane_w), free(lane_t);
                lane_c = NULL, lane_w = lane_t = NULL;
                free(row_j);
                row_j = NULL; /* seen as a failed allocation below */
            }
            if (!hist || !row_j) {
#pragma omp atomic write
                alloc_failed = 1;
            } else {
                memset(hist, 0, GRID_HIST_COPIES * stride * sizeof(uint32_t));
            }
#pragma omp for schedule(dynamic, 1)
            for (size_t gi = 0; gi < n_groups; gi++) {
                int stop;
#pragma omp atomic read
                stop = cancelled;
                if (stop || !hist || !row_j) continue;
                double done = 0;
                double *gw = weighted_path ? group_w + gi * n_slots : NULL;
                double *gt = group_t ? group_t + gi * n_slots : NULL;
                /* where the pairs go: the lanes, or the group's sums (stride unused) */
                uint64_t *lc = lane_mask ? lane_c : mine;
                double *lw = lane_mask ? lane_w : gw, *lt = lane_mask ? lane_t : gt;
                size_t u_end = (gi + 1) * units_per_group < plan.n_units ? (gi + 1) * units_per_group : plan.n_units;
                for (size_t ui = gi * units_per_group; ui < u_end; ui++) {
                    const pk_grid_unit *u = &plan.units[ui];
                    size_t n_rows = u->i1 - u->i0;
                    double *row_w = NULL; /* visited column weight per row, for the skipped weight */
                    double row_w_local[GRID_UNIT_ROWS];
                    if (weighted_path) {
                        row_w = row_w_local;
                        for (size_t q = 0; q < n_rows; q++) row_w[q] = 0;
                    }
                    for (size_t r = u->r0; r < u->r1; r++) {
                        uint32_t cb0 = plan.ranges[2 * r], cb1 = plan.ranges[2 * r + 1];
                        size_t lo = SIZE_MAX, hi = 0;
                        for (size_t q = 0; q < n_rows; q++) {
                            size_t i = u->i0 + q, j0, j1;
                            if (pruned) {
                                row_columns(&ga, i, gbp, cb0, cb1, chord2, autocorr, &j0, &j1);
                            } else {
                                j0 = gbp->cell_start[cb0], j1 = gbp->cell_start[cb1];
                                if (autocorr && j0 < i + 1) j0 = i + 1;
                                if (j1 < j0) j1 = j0;
                            }
                            row_j[2 * q] = j0;
                            row_j[2 * q + 1] = j1;
                            visited += j1 - j0;
                            if (row_w) row_w[q] += columns_weight(gbp, j0, j1);
                            if (j1 > j0) {
                                if (j0 < lo) lo = j0;
                                if (j1 > hi) hi = j1;
                            }
                        }
                        if (hi <= lo) continue;
                        /* column tiles, rows inside: b's tile stays in L1 */
                        for (size_t c0 = lo; c0 < hi; c0 += GRID_TILE_COLS) {
                            size_t c1 = c0 + GRID_TILE_COLS < hi ? c0 + GRID_TILE_COLS : hi;
                            for (size_t q = 0; q < n_rows; q++) {
                                size_t j0 = row_j[2 * q] > c0 ? row_j[2 * q] : c0;
                                size_t j1 = row_j[2 * q + 1] < c1 ? row_j[2 * q + 1] : c1;
                                if (j1 <= j0) continue;
                                size_t i = u->i0 + q;
                                if (use_log_w || row_slots_w) {
#if defined(__x86_64__)
                                    n_fp64 += use_log_w
                                                  ? pk_angcorr_row_slots_avx512_log(&job, &logf, i, j0, j1, row_slots)
                                              : row_slots_w == 1
                                                  ? pk_angcorr_row_slots_avx512_linear(&job, i, j0, j1, row_slots)
                                              : row_slots_w == 2
                                                  ? pk_angcorr_row_slots_avx2_linear(&job, i, j0, j1, row_slots)
                                                  : pk_angcorr_row_slots_avx2_table(&job, i, j0, j1, row_slots);
#endif
                                    double wi = ga.w ? ga.w[i] : 1.0;
                                    /* the separation in float64, the row's at once */
                                    if (gt) pk_angcorr_row_theta(&job, i, j0, j1, row_theta);
                                    if (lane_mask)
                                        add_row_weighted(row_slots, j0, j1, wi, gbp->w, gt ? row_theta : NULL,
                                                         (int32_t)bins->n_bins, lc, lw, lt, stride, GRID_LANES - 1);
                                    else
                                        add_row_weighted(row_slots, j0, j1, wi, gbp->w, gt ? row_theta : NULL,
                                                         (int32_t)bins->n_bins, lc, lw, lt, stride, 0);
                                } else if (weighted_path) {
                                    n_fp64 += lane_mask
                                                  ? block_weighted(&job, ga.w, gbp->w, gt != NULL, (int)bins->n_bins, i,
                                                                   i + 1, j0, j1, lc, lw, lt, stride, GRID_LANES - 1)
                                                  : block_weighted(&job, ga.w, gbp->w, gt != NULL, (int)bins->n_bins, i,
                                                                   i + 1, j0, j1, lc, lw, lt, stride, 0);
                                }
#if defined(__x86_64__)
                                else if (use_log) {
                                    n_fp64 += pk_angcorr_block_avx512_log(&job, &logf, i, i + 1, j0, j1, hist, stride);
                                } else if (use_direct) {
                                    n_fp64 +=
                                        pk_angcorr_block_avx512_direct(&job, &direct, i, i + 1, j0, j1, hist, stride);
                                }
#endif
                                else {
                                    n_fp64 += block(&job, i, i + 1, j0, j1, hist, stride);
                                }
                                if (!weighted_path && !use_log_w) pending += j1 - j0;
                            }
                            /* the 32-bit counters of a unit can take more than 2^32
                             * pairs (256 rows against 2^24 columns): emptied into
                             * the 64-bit ones well before */
                            if (pending > GRID_FLUSH_PAIRS) {
                                flush_hist(hist, stride, n_slots, mine);
                                pending = 0;
                            }
                        }
                    }
                    if (!weighted_path) {
                        flush_hist(hist, stride, n_slots, mine);
                        pending = 0;
                    } else {
                        for (size_t q = 0; q < n_rows; q++) {
                            size_t i = u->i0 + q;
                            double wi = ga.w ? ga.w[i] : 1.0;
                            group_skip[gi] += wi * (row_all_columns(gbp, i, autocorr) - row_w[q]);
                        }
                    }
                    if (work_scale > 0) {
                        uint64_t p = 0;
                        for (size_t r = u->r0; r < u->r1; r++)
                            p += block_pairs(u->i0, u->i1, gbp->cell_start[plan.ranges[2 * r]],
                                             gbp->cell_start[plan.ranges[2 * r + 1]], autocorr);
                        done += (double)p * work_scale;
                    }
                }
                if (lane_mask) merge_lanes(lane_c, lane_w, lane_t, stride, n_slots, mine, gw, gt);
                if (progress && pk_progress_add(progress, done, tid == 0)) {
#pragma omp atomic write
                    cancelled = 1;
                }
            }
            thread_fp64[tid] += n_fp64;
            thread_visited[tid] += visited;
            pk_aligned_free(hist);
            free(row_j);
            free(lane_c);
            free(lane_w);
            free(lane_t);
        }
    }
    pk_status result = PK_OK;
    if (alloc_failed) {
        result = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for pair counting");
    } else if (cancelled) {
        result = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    } else {
        uint64_t n_fp64 = 0, visited = 0;
        for (int t = 0; t < n_threads; t++) {
            n_fp64 += thread_fp64[t];
            visited += thread_visited[t];
            for (size_t s = 0; s < n_slots; s++) slots[s] += thread_slots[(size_t)t * n_slots + s];
        }
        /* The pairs the plan skipped are beyond the last edge. */
        slots[n_slots - 1] += plan.pairs_all - visited;
        if (weighted_path) {
            double skipped = 0;
            for (size_t g = 0; g < n_groups; g++) {
                skipped += group_skip[g];
                for (size_t s = 0; s < n_slots; s++) {
                    wslots[s] += group_w[g * n_slots + s];
                    if (tslots) tslots[s] += group_t[g * n_slots + s];
                }
            }
            /* rows in no unit (cells with nothing in reach) */
            size_t next = 0;
            for (size_t ui = 0; ui <= plan.n_units; ui++) {
                size_t until = ui < plan.n_units ? plan.units[ui].i0 : ga.n;
                for (size_t i = next; i < until; i++)
                    skipped += (ga.w ? ga.w[i] : 1.0) * row_all_columns(gbp, i, autocorr);
                if (ui < plan.n_units) next = plan.units[ui].i1;
            }
            wslots[n_slots - 1] += skipped;
        }
        if (autocorr) {
            for (size_t s = 0; s < n_slots; s++) slots[s] *= 2;
            if (weighted_path)
                for (size_t s = 0; s < n_slots; s++) {
                    wslots[s] *= 2;
                    if (tslots) tslots[s] *= 2;
                }
            pk_grid_add_self_pairs(&ga, bins, table, slots, weighted_path ? wslots : NULL, tslots);
            n_fp64 += a->n;
        }
        stats->pairs_visited = visited + (autocorr ? a->n : 0);
        stats->pairs_fp64 = n_fp64;
    }
    free(thread_slots);
    free(thread_fp64);
    free(thread_visited);
    free(group_w);
    free(group_t);
    free(group_skip);
    pk_direct_table_free(&direct);
    pk_grid_plan_free(&plan);
    pk_grid_free(&ga);
    pk_grid_free(&gb);
    return result;
}

double pk_grid_plan_skipped_weight(const pk_grid_plan *plan, const pk_grid *ga, const pk_grid *gb, int autocorr) {
    double skipped = 0;
    size_t next = 0;
    for (size_t ui = 0; ui <= plan->n_units; ui++) {
        size_t until = ui < plan->n_units ? plan->units[ui].i0 : ga->n;
        for (size_t i = next; i < until; i++) skipped += (ga->w ? ga->w[i] : 1.0) * row_all_columns(gb, i, autocorr);
        if (ui == plan->n_units) break;
        const pk_grid_unit *u = &plan->units[ui];
        for (size_t i = u->i0; i < u->i1; i++) {
            double cols = row_all_columns(gb, i, autocorr);
            for (size_t r = u->r0; r < u->r1; r++) {
                size_t j0 = gb->cell_start[plan->ranges[2 * r]], j1 = gb->cell_start[plan->ranges[2 * r + 1]];
                if (autocorr && j0 < i + 1) j0 = i + 1;
                if (j1 > j0) cols -= columns_weight(gb, j0, j1);
            }
            skipped += (ga->w ? ga->w[i] : 1.0) * cols;
        }
        next = u->i1;
    }
    return skipped;
}
