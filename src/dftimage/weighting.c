/* weighting.c - imaging weights: natural, uniform and Briggs (robust),
 * from the summed weights of the image's uv cells; and the selection of
 * visibilities by baseline length.
 *
 * A visibility's cell is (round(u n d), round(v n d)) for an image of n
 * pixels of d radians (cells of 1 / (n d) wavelengths), folded so that
 * (u, v) and (-u, -v) share one: the image is the real part of the sum,
 * which is the sum over both. The DFT has no grid edge, so every cell
 * counts, however far out; the cells' sums are kept in a dense grid over
 * their extent when that is small, else in hash tables that grow with
 * the number of distinct cells. The threads share the cells out by row and
 * each adds its cells' weights in visibility order: the same sums, to the
 * bit, on any number of threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dftimage_internal.h"

static const char *const weighting_names[] = {"natural", "uniform", "briggs"};

pk_status pk_weighting_parse(const char *name, pk_weighting *out) {
    for (int k = 0; k < 3; k++)
        if (name && out && strcmp(name, weighting_names[k]) == 0) {
            *out = (pk_weighting)k;
            return PK_OK;
        }
    return PK_ERR_INVALID;
}

const char *pk_weighting_name(pk_weighting weighting) {
    return (unsigned)weighting < 3 ? weighting_names[weighting] : "unknown";
}

/* Cells in a dense grid of sums when their extent has at most this many
 * (64 MiB); else hash tables. */
#define DENSE_CELLS (1ull << 23)

typedef struct cell_slot {
    int64_t x, y; /* the folded cell; y == INT64_MIN: empty */
    double sum;   /* its summed weights (divided by the largest) */
} cell_slot;

typedef struct cell_table {
    cell_slot *slot;
    size_t mask, used;
} cell_table;

static uint64_t cell_hash(int64_t x, int64_t y) {
    uint64_t z = (uint64_t)x * 0x9E3779B97F4A7C15ull ^ ((uint64_t)y + 0x632BE59BD9B4E019ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int table_init(cell_table *t, size_t capacity) {
    t->slot = malloc(capacity * sizeof *t->slot);
    if (!t->slot) return 1;
    for (size_t i = 0; i < capacity; i++) t->slot[i].y = INT64_MIN;
    t->mask = capacity - 1;
    t->used = 0;
    return 0;
}

/* The slot of cell (x, y), or the empty slot where it would go. */
static cell_slot *table_probe(const cell_table *t, int64_t x, int64_t y) {
    size_t j = (size_t)cell_hash(x, y) & t->mask;
    while (t->slot[j].y != INT64_MIN && (t->slot[j].x != x || t->slot[j].y != y)) j = (j + 1) & t->mask;
    return &t->slot[j];
}

/* Doubles the table; 1 when memory runs out (the table is left as it was). */
static int table_grow(cell_table *t) {
    cell_table bigger;
    if ((t->mask + 1) > SIZE_MAX / (2 * sizeof(cell_slot)) || table_init(&bigger, 2 * (t->mask + 1))) return 1;
    for (size_t i = 0; i <= t->mask; i++)
        if (t->slot[i].y != INT64_MIN) *table_probe(&bigger, t->slot[i].x, t->slot[i].y) = t->slot[i];
    bigger.used = t->used;
    free(t->slot);
    *t = bigger;
    return 0;
}

/* The slot of cell (x, y), added (sum 0) if new; NULL when growing fails. */
static cell_slot *table_add(cell_table *t, int64_t x, int64_t y) {
    cell_slot *s = table_probe(t, x, y);
    if (s->y != INT64_MIN) return s;
    if (2 * (t->used + 1) > t->mask + 1) { /* keep the load at most 1/2 */
        if (table_grow(t)) return NULL;
        s = table_probe(t, x, y);
    }
    *s = (cell_slot){x, y, 0.0};
    t->used++;
    return s;
}

/* x rounded to an integer, halves away from zero (llround without the
 * library call): |x| < 2^62 here, and x - trunc(x) is exact. */
static inline int64_t round_half_away(double x) {
    int64_t i = (int64_t)x;
    double frac = x - (double)i;
    return i + (frac >= 0.5) - (frac <= -0.5);
}

/* Visibility k's folded cell. |u|, |v| <= 2^38 and n d < 2^20 (checked
 * by the caller), so the indices fit in 64 bits. Halves round away from
 * zero, so -u lands in the cell of u negated. */
static inline void vis_cell(const pk_vis *vis, size_t k, double per_cell, int64_t *x, int64_t *y) {
    int64_t a = round_half_away(vis->u[k] * per_cell), b = round_half_away(vis->v[k] * per_cell);
    if (b < 0 || (b == 0 && a < 0)) a = -a, b = -b;
    *x = a, *y = b;
}

pk_status pk_vis_weighting(pk_context *ctx, pk_vis *vis, pk_weighting weighting, double robust, size_t n, double cell) {
    pk_clear(ctx);
    if ((unsigned)weighting > PK_WEIGHTING_BRIGGS)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "pk_vis_weighting: weighting %d is not natural (0), uniform (1) or briggs (2)", (int)weighting);
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_weighting: vis is NULL");
    if (vis->n == 0) return pk_fail(ctx, PK_ERR_INVALID, "no visibilities to weight");
    if (!vis->u || !vis->v || !vis->re || !vis->im)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_weighting: pk_vis.%s is NULL (with n = %zu visibilities)",
                       !vis->u    ? "u"
                       : !vis->v  ? "v"
                       : !vis->re ? "re"
                                  : "im",
                       vis->n);
    if (weighting == PK_WEIGHTING_NATURAL) {
        vis->weighting = PK_WEIGHTING_NATURAL;
        return PK_OK;
    }
    if (!vis->weight)
        return pk_fail(ctx, PK_ERR_INVALID, "%s weighting needs each visibility's weight (weight is NULL)",
                       pk_weighting_name(weighting));
    if (weighting == PK_WEIGHTING_BRIGGS && !isfinite(robust))
        return pk_fail(ctx, PK_ERR_INVALID, "the robustness of Briggs weighting must be finite, got %g", robust);
    if (n == 0 || !(cell > 0) || !((double)n * cell < 1048576.0)) /* the image checks the sky itself */
        return pk_fail(ctx, PK_ERR_INVALID, "weighting for %zu pixels of %g rad: not an image", n, cell);
    const size_t nv = vis->n;
    const double *u = vis->u, *v = vis->v, *w = vis->weight;
    /* every pass but the sums in visibility order runs on the threads; the
     * cells are shared out by row (y mod nt), each share adding its cells'
     * weights in visibility order, so the result does not depend on
     * the thread count. Small sets stay on one thread. */
    int nt = pk_thread_count(ctx);
    if ((size_t)nt > nv / 65536 + 1) nt = (int)(nv / 65536 + 1);
    size_t bad = SIZE_MAX;
    double w_max = 0.0, w_min = INFINITY;
#pragma omp parallel for num_threads(nt) reduction(min : bad) reduction(max : w_max) reduction(min : w_min)
    for (size_t k = 0; k < nv; k++) {
        if (!(fabs(u[k]) <= PK_DFT_MAX_UVW) || !(fabs(v[k]) <= PK_DFT_MAX_UVW) || !(w[k] > 0) || !isfinite(w[k])) {
            if (k < bad) bad = k;
        } else {
            w_max = fmax(w_max, w[k]), w_min = fmin(w_min, w[k]);
        }
    }
    if (bad != SIZE_MAX) {
        if (!(fabs(u[bad]) <= PK_DFT_MAX_UVW) || !(fabs(v[bad]) <= PK_DFT_MAX_UVW))
            return pk_fail(ctx, PK_ERR_INVALID, "visibility %zu: u, v = (%g, %g) wavelengths; at most 2^38 (%.3g)", bad,
                           u[bad], v[bad], PK_DFT_MAX_UVW);
        return pk_fail(ctx, PK_ERR_INVALID, "visibility %zu: weight %g; %s weighting needs weights > 0", bad, w[bad],
                       pk_weighting_name(weighting));
    }
    if (w_min / w_max < 1e-250)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "the weights run from %g to %g: more than 1e250 apart, too far for %s weighting", w_min, w_max,
                       pk_weighting_name(weighting));
    const double per_cell = (double)n * cell; /* cells per wavelength */
    /* The cells' extent: a dense grid of their sums where it is small (an
     * image's own uv plane and a little more: every visibility inside the
     * image's Nyquist limit lies within n x n / 2 cells), else a hash table
     * for each share. */
    int64_t x_lo = INT64_MAX, x_hi = INT64_MIN, y_hi = 0;
#pragma omp parallel for num_threads(nt) reduction(min : x_lo) reduction(max : x_hi) reduction(max : y_hi)
    for (size_t k = 0; k < nv; k++) {
        int64_t x, y;
        vis_cell(vis, k, per_cell, &x, &y);
        x_lo = x < x_lo ? x : x_lo, x_hi = x > x_hi ? x : x_hi, y_hi = y > y_hi ? y : y_hi;
    }
    const uint64_t width = (uint64_t)(x_hi - x_lo) + 1, height = (uint64_t)y_hi + 1;
    const int dense = width <= DENSE_CELLS && height <= DENSE_CELLS / width;
    double *grid = NULL;
    cell_table table[PK_MAX_THREADS];
    memset(table, 0, sizeof table);
    double *factor = malloc(nv * sizeof(double));
    int failed = !factor;
    if (!failed && dense) failed = !(grid = calloc(width * height, sizeof(double)));
    for (int t = 0; t < nt && !failed && !dense; t++) failed = table_init(&table[t], 1024);
    /* the cells' sums, of the weights divided by the largest: neither the
     * sums nor Briggs' sum of their squares can overflow or underflow, and
     * both weightings are the same for weights scaled alike */
    if (!failed) {
        /* the nt shares through a worksharing loop: each is summed once
         * however many threads OpenMP starts (fewer under OMP_DYNAMIC, a
         * thread limit or an enclosing parallel region) */
#pragma omp parallel for schedule(static, 1) num_threads(nt) reduction(| : failed)
        for (int t = 0; t < nt; t++) {
            for (size_t k = 0; k < nv && !failed; k++) {
                int64_t x, y;
                vis_cell(vis, k, per_cell, &x, &y);
                if ((uint64_t)y % (uint64_t)nt != (uint64_t)t) continue;
                double add = w[k] / w_max;
                if (dense) {
                    grid[(uint64_t)y * width + (uint64_t)(x - x_lo)] += add;
                } else {
                    cell_slot *c = table_add(&table[t], x, y);
                    if (c) c->sum += add;
                    else failed = 1;
                }
            }
        }
    }
    if (!failed) {
#pragma omp parallel for num_threads(nt)
        for (size_t k = 0; k < nv; k++) {
            int64_t x, y;
            vis_cell(vis, k, per_cell, &x, &y);
            factor[k] = dense ? grid[(uint64_t)y * width + (uint64_t)(x - x_lo)]
                              : table_probe(&table[(uint64_t)y % (uint64_t)nt], x, y)->sum;
        }
    }
    free(grid);
    for (int t = 0; t < nt; t++) free(table[t].slot);
    if (failed) {
        free(factor);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the uv cells of %zu visibilities", nv);
    }
    /* Briggs' f^2 needs sum_cells W^2 / sum_k w_k; sum_cells W^2 is taken
     * as sum_k w_k W(k): sums in visibility order, whatever the threads */
    double f2 = 0.0;
    if (weighting == PK_WEIGHTING_BRIGGS) {
        double total = 0.0, sum_sq = 0.0;
        for (size_t k = 0; k < nv; k++) total += w[k] / w_max, sum_sq += w[k] / w_max * factor[k];
        double root = 5.0 * pow(10.0, -robust);
        f2 = root * root / (sum_sq / total);
    }
    /* uniform: w_k / W(k) = (w_k / w_max) / W_scaled(k), at most 1; the
     * visibility (V_k w_k) likewise divided by w_max first. Briggs: a
     * factor at most 1, the same for any scale. */
    const int uniform = weighting == PK_WEIGHTING_UNIFORM;
    if (!uniform) {
#pragma omp parallel for num_threads(nt)
        for (size_t k = 0; k < nv; k++) factor[k] = 1.0 / (1.0 + factor[k] * f2);
    }
    double new_sum = 0.0;
    for (size_t k = 0; k < nv; k++) new_sum += uniform ? w[k] / w_max / factor[k] : w[k] * factor[k];
    if (!(new_sum > 0) || !isfinite(new_sum)) { /* a robustness far outside -5 .. 5 */
        free(factor);
        return pk_fail(ctx, PK_ERR_INVALID, "%s weighting would leave a weight sum of %g", pk_weighting_name(weighting),
                       new_sum);
    }
#pragma omp parallel for num_threads(nt)
    for (size_t k = 0; k < nv; k++) {
        if (uniform) {
            vis->re[k] = vis->re[k] / w_max / factor[k];
            vis->im[k] = vis->im[k] / w_max / factor[k];
            vis->weight[k] = vis->weight[k] / w_max / factor[k];
        } else {
            vis->re[k] *= factor[k];
            vis->im[k] *= factor[k];
            vis->weight[k] *= factor[k];
        }
    }
    free(factor);
    vis->weight_sum = new_sum;
    vis->weighting = weighting;
    vis->robust = weighting == PK_WEIGHTING_BRIGGS ? robust : 0.0;
    return PK_OK;
}

pk_status pk_vis_select_uv(pk_context *ctx, pk_vis *vis, double min_l, double max_l, size_t *dropped) {
    pk_clear(ctx);
    if (dropped) *dropped = 0;
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_select_uv: vis is NULL");
    if (vis->n == 0) return pk_fail(ctx, PK_ERR_INVALID, "no visibilities to select from");
    if (!vis->u || !vis->v || !vis->w || !vis->re || !vis->im)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_select_uv: pk_vis.%s is NULL (with n = %zu visibilities)",
                       !vis->u    ? "u"
                       : !vis->v  ? "v"
                       : !vis->w  ? "w"
                       : !vis->re ? "re"
                                  : "im",
                       vis->n);
    if (!(min_l >= 0) || !(max_l >= min_l) || isnan(max_l))
        return pk_fail(ctx, PK_ERR_INVALID, "baseline range %g to %g wavelengths: not a range of lengths", min_l,
                       max_l);
    size_t kept = 0;
    for (size_t k = 0; k < vis->n; k++) {
        double r = hypot(vis->u[k], vis->v[k]);
        kept += r >= min_l && r <= max_l;
    }
    if (kept == 0)
        return pk_fail(ctx, PK_ERR_INVALID, "no visibility has a baseline of %g to %g wavelengths (of %zu)", min_l,
                       max_l, vis->n);
    size_t out = 0;
    double weight_sum = 0.0;
    for (size_t k = 0; k < vis->n; k++) {
        double r = hypot(vis->u[k], vis->v[k]);
        if (!(r >= min_l && r <= max_l)) continue;
        vis->u[out] = vis->u[k], vis->v[out] = vis->v[k], vis->w[out] = vis->w[k];
        vis->re[out] = vis->re[k], vis->im[out] = vis->im[k];
        if (vis->weight) vis->weight[out] = vis->weight[k];
        weight_sum += vis->weight ? vis->weight[k] : 1.0;
        out++;
    }
    if (dropped) *dropped = vis->n - kept;
    vis->n = kept;
    vis->weight_sum = weight_sum;
    return PK_OK;
}
