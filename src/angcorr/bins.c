/* bins.c - separation bins, the reference binning rule, and the edge table
 * that turns it into exact float32 decisions.
 *
 * The edge table is derived from pk_angcorr_slot_ref alone (bisection over
 * the doubles), so it is exact for any bins the rule accepts, provided the
 * rule is monotone in the dot product; tests/test_angcorr_edges.c checks
 * that around every threshold and against the reference on pairs built to
 * sit on bin edges.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr_internal.h"

/* The most bins a pk_bins may have. */
#define BINS_MAX 10000000u

static pk_status bins_alloc(pk_context *ctx, pk_bins *out, size_t n_bins) {
    memset(out, 0, sizeof *out);
    if (n_bins == 0) return pk_fail(ctx, PK_ERR_INVALID, "bins: the number of bins must be at least 1");
    if (n_bins > BINS_MAX)
        return pk_fail(ctx, PK_ERR_INVALID, "bins: %zu bins is more than the 10,000,000 supported", n_bins);
    out->edges = malloc((n_bins + 1) * sizeof(double));
    if (!out->edges) return pk_fail(ctx, PK_ERR_NOMEM, "bins: out of memory");
    out->n_bins = n_bins;
    return PK_OK;
}

/* 180 degrees given in degrees and converted (180 * (pi / 180)) may come out
 * an ulp above M_PI: a margin of a few ulps */
#define PI_LIMIT (M_PI * (1.0 + 1e-15))

pk_status pk_bins_linear(pk_context *ctx, double theta_min, double width, size_t n_bins, pk_bins *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_linear: out is NULL");
    memset(out, 0, sizeof *out);
    if (!isfinite(theta_min) || theta_min < 0)
        return pk_fail(ctx, PK_ERR_INVALID, "bins: theta_min must be finite and >= 0");
    if (!isfinite(width) || width <= 0) return pk_fail(ctx, PK_ERR_INVALID, "bins: the bin width must be > 0");
    /* bins past 180 degrees are kept (the course format's 1440 bins of 0.25
     * degree reach 360), but bins that all lie there can hold no pair */
    if (theta_min > PI_LIMIT)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "bins: theta_min %.10g degrees is beyond 180 degrees: no pair is that far apart",
                       theta_min * (180.0 / M_PI));
    if (!isfinite(theta_min + (double)n_bins * width))
        return pk_fail(ctx, PK_ERR_INVALID, "bins: %zu bins of %g rad from %g do not end at a finite angle", n_bins,
                       width, theta_min);
    pk_status st = bins_alloc(ctx, out, n_bins);
    if (st) return st;
    out->kind = PK_BINS_LINEAR;
    out->theta_min = theta_min;
    out->width = width;
    for (size_t k = 0; k <= n_bins; k++) out->edges[k] = theta_min + (double)k * width;
    return PK_OK;
}

pk_status pk_bins_default(pk_context *ctx, pk_bins *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_default: out is NULL");
    return pk_bins_linear(ctx, 0.0, 0.25 * (M_PI / 180.0), 1440, out);
}

pk_status pk_bins_log(pk_context *ctx, double theta_min, double theta_max, size_t n_bins, pk_bins *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_log: out is NULL");
    memset(out, 0, sizeof *out);
    if (!(theta_min > 0) || !isfinite(theta_min))
        return pk_fail(ctx, PK_ERR_INVALID, "bins: log bins need theta_min > 0");
    if (!(theta_max > theta_min) || !isfinite(theta_max))
        return pk_fail(ctx, PK_ERR_INVALID, "bins: theta_max must be greater than theta_min");
    if (theta_max > PI_LIMIT)
        return pk_fail(ctx, PK_ERR_INVALID, "bins: theta_max %.10g degrees is beyond 180 degrees",
                       theta_max * (180.0 / M_PI));
    pk_status st = bins_alloc(ctx, out, n_bins);
    if (st) return st;
    out->kind = PK_BINS_EDGES;
    out->theta_min = theta_min;
    double step = log(theta_max / theta_min) / (double)n_bins;
    for (size_t k = 0; k <= n_bins; k++) out->edges[k] = theta_min * exp((double)k * step);
    out->edges[0] = theta_min;
    out->edges[n_bins] = theta_max;
    for (size_t k = 1; k <= n_bins; k++) {
        if (!(out->edges[k] > out->edges[k - 1])) {
            pk_bins_free(out);
            return pk_fail(ctx, PK_ERR_INVALID, "bins: %zu log bins are too narrow for [%g, %g]", n_bins, theta_min,
                           theta_max);
        }
    }
    return PK_OK;
}

pk_status pk_bins_from_edges(pk_context *ctx, const double *edges, size_t n_edges, pk_bins *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_from_edges: out is NULL");
    memset(out, 0, sizeof *out);
    if (!edges) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_from_edges: edges is NULL");
    if (n_edges < 2) return pk_fail(ctx, PK_ERR_INVALID, "bins: an edge list needs at least 2 edges");
    for (size_t k = 0; k < n_edges; k++) {
        if (!isfinite(edges[k]) || edges[k] < 0)
            return pk_fail(ctx, PK_ERR_INVALID, "bins: edge %zu is not a finite angle >= 0", k + 1);
        if (edges[k] > PI_LIMIT)
            return pk_fail(ctx, PK_ERR_INVALID, "bins: edge %zu is %.10g degrees, beyond 180 degrees", k + 1,
                           edges[k] * (180.0 / M_PI));
        if (k > 0 && !(edges[k] > edges[k - 1]))
            return pk_fail(ctx, PK_ERR_INVALID, "bins: edges must increase (edge %zu <= edge %zu)", k + 1, k);
    }
    pk_status st = bins_alloc(ctx, out, n_edges - 1);
    if (st) return st;
    out->kind = PK_BINS_EDGES;
    out->theta_min = edges[0];
    memcpy(out->edges, edges, n_edges * sizeof(double));
    return PK_OK;
}

void pk_bins_free(pk_bins *bins) {
    if (!bins) return;
    free(bins->edges);
    memset(bins, 0, sizeof *bins);
}

pk_status pk_bins_check(pk_context *ctx, const pk_bins *bins) {
    pk_clear(ctx);
    if (!bins) return pk_fail(ctx, PK_ERR_INVALID, "bins is NULL");
    if (bins->kind != PK_BINS_LINEAR && bins->kind != PK_BINS_EDGES)
        return pk_fail(ctx, PK_ERR_INVALID, "bins: kind %d is not PK_BINS_LINEAR (0) or PK_BINS_EDGES (1)",
                       (int)bins->kind);
    if (bins->n_bins == 0 || !bins->edges)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "bins: no bins (%zu bins, edges %s); make them with pk_bins_linear, pk_bins_log, "
                       "pk_bins_from_edges, pk_bins_default or pk_bins_read_edges",
                       bins->n_bins, bins->edges ? "set" : "NULL");
    if (bins->n_bins > BINS_MAX)
        return pk_fail(ctx, PK_ERR_INVALID, "bins: %zu bins is more than the 10,000,000 supported", bins->n_bins);
    if (bins->kind == PK_BINS_LINEAR &&
        (!isfinite(bins->theta_min) || bins->theta_min < 0 || !isfinite(bins->width) || !(bins->width > 0)))
        return pk_fail(ctx, PK_ERR_INVALID, "bins: linear bins need a finite theta_min >= 0 and width > 0 (%g, %g)",
                       bins->theta_min, bins->width);
    for (size_t k = 0; k <= bins->n_bins; k++) {
        if (!isfinite(bins->edges[k]) || bins->edges[k] < 0)
            return pk_fail(ctx, PK_ERR_INVALID, "bins: edges[%zu] is %g, not a finite angle >= 0", k, bins->edges[k]);
        if (k > 0 && !(bins->edges[k] > bins->edges[k - 1]))
            return pk_fail(ctx, PK_ERR_INVALID, "bins: edges[%zu] = %g does not exceed edges[%zu] = %g", k,
                           bins->edges[k], k - 1, bins->edges[k - 1]);
    }
    return PK_OK;
}

int64_t pk_bins_index(const pk_bins *bins, double theta) {
    /* no bins at all: every separation lies outside them */
    if (!bins || bins->n_bins == 0 || (bins->kind != PK_BINS_LINEAR && !bins->edges)) return -1;
    int64_t n = (int64_t)bins->n_bins;
    if (isnan(theta)) return n; /* in no bin, and no cast of NaN to an integer */
    if (bins->kind == PK_BINS_LINEAR) {
        if (theta < bins->theta_min) return -1;
        double q = floor((theta - bins->theta_min) / bins->width);
        return q >= (double)n ? n : (int64_t)q;
    }
    const double *e = bins->edges;
    if (theta < e[0]) return -1;
    if (theta >= e[n]) return n;
    int64_t lo = 0, hi = n; /* e[lo] <= theta < e[hi] */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (e[mid] <= theta) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* ---- the edge table ------------------------------------------------------ */

/* Doubles in [-1, 1] mapped to integers in the same order. */
static int64_t ordered_from_double(double d) {
    int64_t i;
    memcpy(&i, &d, sizeof i);
    return i < 0 ? (int64_t)(INT64_MIN - i) : i;
}

static double double_from_ordered(int64_t i) {
    if (i < 0) i = INT64_MIN - i;
    double d;
    memcpy(&d, &i, sizeof d);
    return d;
}

/* T_s: the smallest double d in [-1, 1] with slot_ref(d) <= s. */
static double dot_threshold(const pk_bins *bins, int64_t s) {
    if (pk_angcorr_slot_ref(bins, 1.0) > s) return (double)INFINITY;    /* no dot reaches slot <= s */
    if (pk_angcorr_slot_ref(bins, -1.0) <= s) return -(double)INFINITY; /* every dot does */
    int64_t lo = ordered_from_double(-1.0), hi = ordered_from_double(1.0);
    /* slot(lo) > s, slot(hi) <= s */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pk_angcorr_slot_ref(bins, double_from_ordered(mid)) <= s) hi = mid;
        else lo = mid;
    }
    return double_from_ordered(hi);
}

/* #{s : c2_hi[s] <= c}: boundaries certainly passed at c. */
static int32_t bounds_passed(const pk_edge_table *t, float c) {
    int32_t lo = 0, hi = t->n_bounds; /* answer in [lo, hi] */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (t->c2_hi[mid] <= c) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int32_t pk_edge_table_slot_search(const pk_edge_table *t, float c2) {
    int32_t s = bounds_passed(t, c2);
    if (c2 >= t->c2_lo[s]) return -1; /* inside the window of boundary s */
    return s;
}

int32_t pk_edge_table_slot_fp64(const pk_edge_table *t, double dot) {
    /* #{s : dot < T_s}; T is non-increasing, so that is the first s with
     * dot >= T_s. */
    int32_t lo = 0, hi = t->n_bounds;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (dot < t->dot_threshold[mid]) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

pk_status pk_edge_table_build(pk_context *ctx, const pk_bins *bins, pk_edge_table *t) {
    memset(t, 0, sizeof *t);
    pk_status st = pk_bins_check(ctx, bins);
    if (st) return st;
    if (bins->n_bins > (size_t)(PK_CELL_SLOT_MASK - 4))
        return pk_fail(ctx, PK_ERR_INVALID, "bins: too many bins for the edge table");
    t->n_bounds = (int32_t)bins->n_bins + 1;
    t->n_slots = (int32_t)bins->n_bins + 2;
    t->dot_threshold = malloc((size_t)t->n_bounds * sizeof(double));
    t->gpu_cache = pk_gpu_table_cache_new();
    t->c2_lo = pk_aligned_alloc(((size_t)t->n_bounds + 1) * sizeof(float));
    t->c2_hi = pk_aligned_alloc(((size_t)t->n_bounds + 1) * sizeof(float));
    if (!t->dot_threshold || !t->gpu_cache || !t->c2_lo || !t->c2_hi) {
        pk_edge_table_free(t);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the edge table");
    }
    /* Each boundary's threshold is a bisection over the doubles (~64 calls
     * of the reference rule, ~1.6 us): the boundaries are shared among the
     * threads, and a table of many bins (10^7 take seconds) is watched for
     * cancellation, in blocks, without moving the progress line. */
    const int32_t n_bounds = t->n_bounds, block = 4096;
    const int watch = n_bounds > 64 * block;
    pk_progress progress;
    if (watch) pk_progress_begin(&progress, ctx, (double)n_bounds, 0.0, 0.0);
    int cancelled = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(pk_thread_count(ctx)) if (n_bounds > block)
    for (int32_t b0 = 0; b0 < n_bounds; b0 += block) {
        int stop;
#pragma omp atomic read
        stop = cancelled;
        if (stop) continue;
        int32_t b1 = n_bounds - b0 > block ? b0 + block : n_bounds;
        for (int32_t s = b0; s < b1; s++) {
            double T = dot_threshold(bins, s);
            t->dot_threshold[s] = T;
            if (isinf(T) && T > 0) { /* boundary never crossed: always passed */
                t->c2_lo[s] = t->c2_hi[s] = -INFINITY;
            } else if (isinf(T)) { /* never passed */
                t->c2_lo[s] = t->c2_hi[s] = INFINITY;
            } else {
                double c = 2.0 - 2.0 * T;
                double m = pk_c2_error_bound(c * PK_C2_ERR_WIDEN + PK_C2_ERR_ABS);
                t->c2_lo[s] = pk_float_down(c - m);
                t->c2_hi[s] = pk_float_up(c + m);
            }
        }
        int owner = pk_thread_num() == 0;
        if (watch && pk_progress_add(&progress, (double)(b1 - b0), owner)) {
#pragma omp atomic write
            cancelled = 1;
        }
    }
    if (cancelled) {
        pk_edge_table_free(t);
        return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    t->c2_lo[t->n_bounds] = t->c2_hi[t->n_bounds] = INFINITY;
    /* Windows may only widen: make both edges non-decreasing in s. */
    for (int32_t s = t->n_bounds - 1; s > 0; s--)
        if (t->c2_lo[s - 1] > t->c2_lo[s]) t->c2_lo[s - 1] = t->c2_lo[s];
    for (int32_t s = 1; s < t->n_bounds; s++)
        if (t->c2_hi[s] < t->c2_hi[s - 1]) t->c2_hi[s] = t->c2_hi[s - 1];

    /* Cells: the binade of the smallest positive window edge (less one) up
     * to the binade of 4 (c2 <= 4 + rounding), PK_CELL_MANTISSA_BITS of
     * mantissa each. */
    int e_min = -20;
    for (int32_t s = 0; s < t->n_bounds; s++) {
        float lo = t->c2_lo[s];
        if (lo > 0 && isfinite(lo)) {
            int e;
            frexpf(lo, &e);
            if (e - 2 < e_min) e_min = e - 2;
            break;
        }
    }
    if (e_min < -125) e_min = -125;
    int m = PK_CELL_MANTISSA_BITS;
    t->cell_shift = 23 - m;
    int32_t bits_lo, bits_top;
    float f_lo = ldexpf(1.0f, e_min), f_top = 8.0f;
    memcpy(&bits_lo, &f_lo, sizeof bits_lo);
    memcpy(&bits_top, &f_top, sizeof bits_top);
    t->cell_base = bits_lo >> t->cell_shift;
    t->n_cells = (bits_top >> t->cell_shift) - t->cell_base;
    t->cell_slot = pk_aligned_alloc((size_t)t->n_cells * sizeof(int32_t));
    if (!t->cell_slot) {
        pk_edge_table_free(t);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the edge table");
    }
    int32_t n_multi = 0;
    for (int32_t c = 0; c < t->n_cells; c++) {
        float a = c == 0 ? 0.0f : pk_float_from_bits((c + t->cell_base) << t->cell_shift);
        float b = c == t->n_cells - 1 ? INFINITY : pk_float_from_bits((c + 1 + t->cell_base) << t->cell_shift);
        int32_t s0 = bounds_passed(t, a);
        int32_t entry = s0;
        if (s0 + 1 <= t->n_bounds && t->c2_lo[s0 + 1] < b) {
            entry |= PK_CELL_MULTI;
            n_multi++;
        }
        t->cell_slot[c] = entry;
    }
    t->multi_share = (double)n_multi / (double)t->n_cells;
    return PK_OK;
}

void pk_edge_table_free(pk_edge_table *t) {
    if (!t) return;
    free(t->dot_threshold);
    pk_aligned_free(t->c2_lo);
    pk_aligned_free(t->c2_hi);
    pk_aligned_free(t->cell_slot);
    pk_gpu_table_cache_free(t->gpu_cache);
    memset(t, 0, sizeof *t);
}

/* ---- the arithmetic path for linear bins ---------------------------------- */

/* Q(y) ~ 2 asin(sqrt(y) / 2) / sqrt(y) on [0, 2]: polynomial through the
 * Chebyshev nodes of degree 7, max relative error 1.8e-8 (8.8e-8 in
 * float32 Horner form), both measured on 200,001 points. */
static const double linear_q[PK_LINEAR_DEGREE + 1] = {
    0.9999999887111961,    0.04166738667901692,  0.00468007152619307,    0.0007262632726982335,
    6.535698831062609e-05, 7.37692906826193e-05, -2.199370519469654e-05, 6.69396869546854e-06,
};

int pk_linear_fast_init(const pk_bins *bins, pk_linear_fast *lf) {
    memset(lf, 0, sizeof *lf);
    if (bins->kind != PK_BINS_LINEAR) return 0;
    double inv_w = 1.0 / bins->width;
    double t_max = (M_PI / 2 - bins->theta_min) * inv_w;
    if (t_max < 0) t_max = 0;
    double t_range = (M_PI / 2) * inv_w + 1.0; /* largest |intermediate| of t */
    double margin = PK_LINEAR_THETA_MARGIN * inv_w + 4.0 * ldexp(t_range, -23);
    if (margin > 0.05 || t_max > 1e6) return 0;
    for (int k = 0; k <= PK_LINEAR_DEGREE; k++) lf->coef[k] = (float)(linear_q[k] * inv_w);
    lf->t_offset = (float)(bins->theta_min * inv_w);
    lf->inv_width = (float)inv_w;
    lf->margin_t = (float)margin;
    lf->low_edge_from = bins->theta_min == 0.0 ? 0.5f : -(float)INFINITY;
    lf->last_slot = (int32_t)bins->n_bins + 1;
    return 1;
}
