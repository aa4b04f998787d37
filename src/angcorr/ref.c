/* ref.c - the float64 reference of angcorr, and the specification every
 * other kernel is tested against. Kept as simple as possible and never
 * optimised: every ordered pair, acos of the clamped double dot product of
 * double unit vectors, then the bins' rule.
 */
#include <math.h>
#include <string.h>

#include "angcorr_internal.h"

pk_status pk_unit_vectors_make(pk_context *ctx, const pk_catalog *cat, pk_unit_vectors *out) {
    out->n = cat->n;
    out->x = pk_aligned_alloc(3 * (cat->n + 16) * sizeof(double));
    if (!out->x) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %zu unit vectors", cat->n);
    out->y = out->x + cat->n + 16;
    out->z = out->y + cat->n + 16;
    for (size_t i = 0; i < cat->n; i++) {
        double cd = cos(cat->dec[i]);
        out->x[i] = cd * cos(cat->ra[i]);
        out->y[i] = cd * sin(cat->ra[i]);
        out->z[i] = sin(cat->dec[i]);
    }
    return PK_OK;
}

void pk_unit_vectors_free(pk_unit_vectors *v) {
    pk_aligned_free(v->x);
    v->x = v->y = v->z = NULL;
    v->n = 0;
}

int64_t pk_angcorr_slot_ref(const pk_bins *bins, double dot) {
    if (dot > 1.0) dot = 1.0;
    if (dot < -1.0) dot = -1.0;
    return pk_bins_index(bins, acos(dot)) + 1;
}

void pk_angcorr_ref_rows(const pk_bins *bins, const pk_unit_vectors *a, const pk_unit_vectors *b, size_t i0, size_t i1,
                         uint64_t *slots) {
    for (size_t i = i0; i < i1; i++) {
        for (size_t j = 0; j < b->n; j++) {
            double dot = pk_angcorr_dot_ref(a->x[i], a->y[i], a->z[i], b->x[j], b->y[j], b->z[j]);
            slots[pk_angcorr_slot_ref(bins, dot)]++;
        }
    }
}

/* The weighted reference: every ordered pair (i, j) of a x b in row order,
 * then column order; w_i * w_j (rounded) added to its bin's running sum,
 * and w_i * w_j * theta to theta_sum. b == NULL: the pairs of a with
 * itself, self-pairs included. Weights NULL: 1. */
pk_status pk_angcorr_count_ref_weighted(pk_context *ctx, const pk_catalog *a, const double *wa, const pk_catalog *b,
                                        const double *wb, const pk_bins *bins, uint64_t *counts, double *weighted,
                                        double *theta_sum) {
    pk_clear(ctx);
    if (!a) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_count_ref_weighted: a is NULL");
    pk_status st = pk_bins_check(ctx, bins);
    if (st == PK_OK) st = pk_angcorr_check_sizes(ctx, a, b);
    if (st) return st;
    if (a->n == 0 || (b && b->n == 0)) return pk_fail(ctx, PK_ERR_INVALID, "empty catalog");
    if (!b) b = a, wb = wa;
    pk_unit_vectors va, vb;
    if ((st = pk_unit_vectors_make(ctx, a, &va)) != PK_OK) return st;
    if ((st = pk_unit_vectors_make(ctx, b, &vb)) != PK_OK) {
        pk_unit_vectors_free(&va);
        return st;
    }
    size_t n = bins->n_bins;
    if (counts) memset(counts, 0, n * sizeof(uint64_t));
    if (weighted) memset(weighted, 0, n * sizeof(double));
    if (theta_sum) memset(theta_sum, 0, n * sizeof(double));
    for (size_t i = 0; i < a->n; i++) {
        for (size_t j = 0; j < b->n; j++) {
            double dot = pk_angcorr_dot_ref(va.x[i], va.y[i], va.z[i], vb.x[j], vb.y[j], vb.z[j]);
            if (dot > 1.0) dot = 1.0;
            if (dot < -1.0) dot = -1.0;
            double theta = acos(dot);
            int64_t k = pk_bins_index(bins, theta);
            if (k < 0 || k >= (int64_t)n) continue;
            double w = (wa ? wa[i] : 1.0) * (wb ? wb[j] : 1.0);
            if (counts) counts[k]++;
            if (weighted) weighted[k] += w;
            if (theta_sum) theta_sum[k] += w * theta;
        }
    }
    pk_unit_vectors_free(&va);
    pk_unit_vectors_free(&vb);
    return PK_OK;
}
