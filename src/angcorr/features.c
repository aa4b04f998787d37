/* features.c - what astronomers ask of angcorr beyond the course format:
 * weighted counts and mean separations (pk_angcorr_count_ex), weighted
 * estimators, jackknife errors over sky patches (pk_angcorr_run_ex), edge
 * files, and the CSV outputs that carry all of it.
 *
 * Counts stay exact: weights and separations ride on the same slot
 * decisions as the unweighted kernels, and every count checks that its
 * slots hold every pair (integers exactly, weights to float64 rounding).
 * Jackknife counts are made patch pair by patch pair, so the leave-one-out
 * counts are integer sums equal to a direct recomputation without the patch.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "angcorr_internal.h"
#include "grid.h"

/* ---- kernel choice --------------------------------------------------------- */

/* Patch pairs of fewer pairs than this a CPU thread go to the CPU when
 * the backend is pairkit's choice (see pk_angcorr_run_ex_part): a device
 * count, one pk_angcorr_count_cuda call as it was measured on the H200
 * machine, costs ~1 ms of calls and copies however small, in which a
 * thread counts ~2^19 pairs; at least 2^20. */
#define SMALL_TASK_PAIRS_A_THREAD (1u << 19)
/* Patch pairs of fewer pairs than this, counted on the CPU, are counted
 * several at once, one thread each. */
#define PARALLEL_TASK_PAIRS (1u << 22)

/* pk_angcorr_choose_kernel, and weights, mean separations and jackknife
 * take exact kernels only (the default ones are). */
static pk_status features_kernel(pk_context *ctx, const pk_angcorr_options *opts, pk_backend *backend, int *kernel) {
    pk_status st = pk_angcorr_choose_kernel(ctx, opts, backend, kernel);
    if (st == PK_OK && !pk_angcorr_kernel_exact(*kernel))
        st = pk_fail(ctx, PK_ERR_INVALID,
                     "kernel '%s' is inexact; weights, mean separations and jackknife "
                     "take exact kernels only",
                     pk_angcorr_kernel_name(*kernel));
    return st;
}

/* Finite weights; with positive_total, also a positive sum (the
 * estimators divide by it; a count alone does not). */
static pk_status check_weights(pk_context *ctx, const double *w, size_t n, const char *name, int positive_total) {
    if (!w) return PK_OK;
    double total = 0, abs_total = 0, smallest = (double)INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(w[i]))
            return pk_fail(ctx, PK_ERR_INVALID, "%s[%zu] is %s: weights must be finite numbers", name, i,
                           isnan(w[i]) ? "NaN" : "infinite");
        total += w[i];
        abs_total += fabs(w[i]);
        if (w[i] != 0 && fabs(w[i]) < smallest) smallest = fabs(w[i]);
    }
    /* pair products w_i w_j and their sums stay normal doubles (1e-170
     * weights gave products of 0 and NaN estimators; 1e200 gave inf) */
    if (abs_total > PK_WEIGHT_MAX * (1 + 1e-9) || smallest < PK_WEIGHT_MIN)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "%s: |weights| from %g, summing to %g: pair products and their sums would leave double "
                       "precision (nonzero weights need |w| >= %g and sum |w| <= %g); rescale them (the estimators "
                       "do not change)",
                       name, smallest, abs_total, PK_WEIGHT_MIN, PK_WEIGHT_MAX);
    /* the estimators divide by the weights' sums (and pair sums) */
    if (positive_total && !(total > 0))
        return pk_fail(ctx, PK_ERR_INVALID, "%s sum to %g: the estimators need a positive total weight", name, total);
    return PK_OK;
}

static double weight_total(const double *w, size_t n) {
    if (!w) return (double)n;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += w[i];
    return s;
}

static double weight_abs_total(const double *w, size_t n) {
    if (!w) return (double)n;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs(w[i]);
    return s;
}

/* ---- one count into all slots ----------------------------------------------- */

typedef struct count_out {
    uint64_t *slots; /* [n_slots] */
    double *wslots;  /* [n_slots] or NULL: unweighted, no separations */
    double *tslots;  /* [n_slots] or NULL */
} count_out;

/* A count's statistics completed and its slots checked: every pair once
 * (b NULL: a with itself), and with weights their total weight. */
static pk_status check_slots(pk_context *ctx, int kernel, const pk_catalog *a, const double *wa, const pk_catalog *b,
                             const double *wb, size_t n_slots, const count_out *out, pk_pair_stats *stats,
                             double seconds) {
    if (!b) wb = wa;
    stats->seconds = seconds;
    stats->kernel = kernel;
    uint64_t n_b = b ? b->n : a->n;
    stats->pairs_total = (uint64_t)a->n * n_b;
    uint64_t sum = 0;
    for (size_t s = 0; s < n_slots; s++) sum += out->slots[s];
    stats->pairs_in_range = sum - out->slots[0] - out->slots[n_slots - 1];
    if (sum != stats->pairs_total)
        return pk_fail(ctx, PK_ERR_INTERNAL,
                       "pair count check failed: the histogram holds %llu pairs, expected %llu (kernel %s)",
                       (unsigned long long)sum, (unsigned long long)stats->pairs_total, pk_angcorr_kernel_name(kernel));
    if (out->wslots) {
        /* The weighted slots hold every pair's weight: sum_i w_i sum_j w_j,
         * to the rounding of summing pairs_total terms of at most
         * max|w_i w_j| (a generous bound: n eps times the absolute sums). */
        double wsum = 0;
        for (size_t s = 0; s < n_slots; s++) wsum += out->wslots[s];
        double want = weight_total(wa, a->n) * weight_total(wb, n_b);
        double scale = weight_abs_total(wa, a->n) * weight_abs_total(wb, n_b);
        double tol = 4.0 * ((double)a->n + (double)n_b + 16.0) * 0x1p-52 * scale;
        if (!(fabs(wsum - want) <= tol))
            return pk_fail(ctx, PK_ERR_INTERNAL,
                           "weighted pair check failed: the slots hold %.17g, expected %.17g (kernel %s)", wsum, want,
                           pk_angcorr_kernel_name(kernel));
    }
    return PK_OK;
}

/* A count with a ready table: slots (and weighted sums) of every pair,
 * then the sum checks. */
static pk_status count_slots_ex(pk_context *ctx, pk_backend backend, int kernel, const pk_catalog *a, const double *wa,
                                const pk_catalog *b, const double *wb, const pk_bins *bins, const pk_edge_table *table,
                                pk_prune prune, int mean_theta, count_out *out, pk_pair_stats *stats,
                                pk_progress *progress) {
    size_t n_slots = (size_t)table->n_slots;
    memset(stats, 0, sizeof *stats);
    memset(out->slots, 0, n_slots * sizeof(uint64_t));
    if (out->wslots) memset(out->wslots, 0, n_slots * sizeof(double));
    if (out->tslots) memset(out->tslots, 0, n_slots * sizeof(double));
    if (!b) wb = wa;
    double t0 = pk_now();
    pk_status st = PK_ERR_UNSUPPORTED;
    int weighted_path = out->wslots != NULL;
    if (kernel == PK_ANGCORR_KERNEL_REF && weighted_path) {
        /* the reference itself: in-range bins only, out-of-range slots by difference */
        size_t n = bins->n_bins;
        uint64_t *c = calloc(n, sizeof(uint64_t));
        double *w = calloc(n, sizeof(double)), *t = out->tslots ? calloc(n, sizeof(double)) : NULL;
        if (!c || !w || (out->tslots && !t)) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        else st = pk_angcorr_count_ref_weighted(ctx, a, wa, b, wb, bins, c, w, t);
        if (st == PK_OK) {
            uint64_t in = 0;
            double win = 0;
            for (size_t k = 0; k < n; k++) {
                out->slots[k + 1] = c[k];
                out->wslots[k + 1] = w[k];
                if (t) out->tslots[k + 1] = t[k];
                in += c[k];
                win += w[k];
            }
            uint64_t total = (uint64_t)a->n * (uint64_t)(b ? b->n : a->n);
            out->slots[n_slots - 1] = total - in; /* the reference does not tell below from above */
            out->wslots[n_slots - 1] = weight_total(wa, a->n) * weight_total(wb, b ? b->n : a->n) - win;
            stats->pairs_visited = stats->pairs_fp64 = total;
        }
        free(c);
        free(w);
        free(t);
        if (st) return st;
        st = PK_OK;
    } else if (backend == PK_BACKEND_CPU) {
        if (kernel != PK_ANGCORR_KERNEL_REF)
            st = pk_angcorr_count_grid(ctx, kernel, a, wa, b, wb, bins, table, prune, mean_theta, out->slots,
                                       out->wslots, out->tslots, stats, progress);
        if (st == PK_ERR_UNSUPPORTED)
            st = pk_angcorr_count_cpu(ctx, kernel, a, b, bins, table, out->slots, stats, progress);
    }
#ifdef PK_HAVE_CUDA
    else {
        /* The pruned plan on the device only when asked for: on an H200 the
         * full-range kernels count DR of the bundled catalogs in 6.0 ms of
         * kernel time, the plan's simple kernel in 18.6 ms (docs/performance.md). */
        if (weighted_path || prune == PK_PRUNE_ON)
            st = pk_angcorr_count_cuda_features(ctx, kernel, a, wa, b, wb, bins, table, prune, mean_theta, out->slots,
                                                out->wslots, out->tslots, stats, progress);
        if (st == PK_ERR_UNSUPPORTED && !weighted_path)
            st = pk_angcorr_count_cuda(ctx, kernel, a, b, bins, table, out->slots, stats, progress);
    }
#endif
    if (st == PK_ERR_UNSUPPORTED && (!ctx || !ctx->message[0]))
        st = pk_fail(ctx, PK_ERR_UNSUPPORTED, "kernel %s cannot count these pairs", pk_angcorr_kernel_name(kernel));
    if (st) return st;
    return check_slots(ctx, kernel, a, wa, b, wb, n_slots, out, stats, pk_now() - t0);
}

pk_status pk_angcorr_count_ex(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *a, const pk_catalog *b,
                              const pk_bins *bins, const pk_angcorr_features *features, uint64_t *counts,
                              double *weighted, double *theta_sum, pk_pair_stats *stats) {
    pk_context none; /* the counts look at a context's message: one for a caller without */
    if (!ctx) {
        pk_context_init(&none);
        ctx = &none;
    }
    pk_clear(ctx);
    if (!a) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_count_ex: a is NULL");
    if (!bins) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_count_ex: bins is NULL");
    if (a->n == 0 || (b && b->n == 0)) return pk_fail(ctx, PK_ERR_INVALID, "empty catalog");
    pk_angcorr_features f = {NULL, NULL, 0, PK_PRUNE_AUTO};
    if (features) f = *features;
    if ((unsigned)f.prune > PK_PRUNE_ON)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_features.prune: %d is not auto (0), off (1) or on (2)",
                       (int)f.prune);
    if (theta_sum && !f.mean_theta) f.mean_theta = 1;
    pk_status st;
    if ((st = pk_angcorr_check_sizes(ctx, a, b)) != PK_OK) return st;
    if ((st = check_weights(ctx, f.weights_a, a->n, "weights_a", 0)) != PK_OK) return st;
    if (b && (st = check_weights(ctx, f.weights_b, b->n, "weights_b", 0)) != PK_OK) return st;
    pk_backend backend;
    int kernel;
    if ((st = features_kernel(ctx, opts, &backend, &kernel)) != PK_OK) return st;
    pk_edge_table table;
    if ((st = pk_edge_table_build(ctx, bins, &table)) != PK_OK) return st;
    size_t n_slots = (size_t)table.n_slots;
    int weighted_path = f.weights_a || (b && f.weights_b) || f.mean_theta;
    count_out out = {calloc(n_slots, sizeof(uint64_t)), weighted_path ? calloc(n_slots, sizeof(double)) : NULL,
                     f.mean_theta ? calloc(n_slots, sizeof(double)) : NULL};
    if (!out.slots || (weighted_path && !out.wslots) || (f.mean_theta && !out.tslots)) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    } else {
        pk_pair_stats local;
        pk_progress progress;
        double work = b ? (double)a->n * (double)b->n : 0.5 * (double)a->n * (double)(a->n + 1);
        pk_progress_begin(&progress, ctx, work, 0.0, 1.0);
        st = count_slots_ex(ctx, backend, kernel, a, f.weights_a, b, b ? f.weights_b : f.weights_a, bins, &table,
                            f.prune, f.mean_theta, &out, &local, &progress);
        if (st == PK_OK) {
            size_t n = bins->n_bins;
            if (counts) memcpy(counts, out.slots + 1, n * sizeof(uint64_t));
            for (size_t k = 0; k < n; k++) {
                if (weighted) weighted[k] = out.wslots ? out.wslots[k + 1] : (double)out.slots[k + 1];
                if (theta_sum) theta_sum[k] = out.tslots[k + 1];
            }
            if (stats) *stats = local;
        }
    }
    free(out.slots);
    free(out.wslots);
    free(out.tslots);
    pk_edge_table_free(&table);
    return st;
}

void pk_estimate_weighted(pk_estimator estimator, double sum_w_data, double sum_w_random, size_t n_bins,
                          const double *dd, const double *dr, const double *rr, double *omega) {
    if (!omega) return;
    if (!dd || !dr || !rr) {
        for (size_t k = 0; k < n_bins; k++) omega[k] = (double)NAN;
        return;
    }
    double f_dd = sum_w_data * sum_w_data, f_dr = sum_w_data * sum_w_random, f_rr = sum_w_random * sum_w_random;
    for (size_t k = 0; k < n_bins; k++) {
        double DD = dd[k] / f_dd, DR = dr[k] / f_dr, RR = rr[k] / f_rr;
        double w = (double)NAN;
        switch (estimator) {
        case PK_ESTIMATOR_LANDY_SZALAY:
            if (rr[k] != 0) w = (DD - 2.0 * DR + RR) / RR;
            break;
        case PK_ESTIMATOR_NATURAL:
            if (rr[k] != 0) w = DD / RR - 1.0;
            break;
        case PK_ESTIMATOR_HAMILTON:
            if (dr[k] != 0) w = DD * RR / (DR * DR) - 1.0;
            break;
        case PK_ESTIMATOR_DAVIS_PEEBLES:
            if (dr[k] != 0) w = DD / DR - 1.0;
            break;
        }
        omega[k] = w;
    }
}

/* ---- jackknife patches ------------------------------------------------------ */

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Doubles sorted ascending (finite values; -0 and +0 compare equal, so
 * either order of them is the same sorted array to the callers): an LSD
 * radix sort of their order-preserving bit patterns, six passes of 11
 * bits (a million values: 49-70 ms on the 2-core machine, qsort 338-444
 * ms). tmp: n more. */
static void sort_doubles(double *v, double *tmp, size_t n) {
    enum { BITS = 11, PASSES = 6, RADIX = 1 << BITS };
    size_t *count = calloc((size_t)PASSES * RADIX, sizeof(size_t));
    if (!count) { /* no memory for the counts */
        qsort(v, n, sizeof(double), cmp_double);
        return;
    }
    uint64_t *a = (uint64_t *)v, *b = (uint64_t *)tmp;
    for (size_t i = 0; i < n; i++) { /* to keys: flip all of a negative, the sign bit of a positive */
        uint64_t u;
        memcpy(&u, &v[i], sizeof u);
        u ^= (u >> 63) ? ~(uint64_t)0 : (uint64_t)1 << 63;
        a[i] = u;
        for (int p = 0; p < PASSES; p++) count[(size_t)p * RADIX + ((u >> (p * BITS)) & (RADIX - 1))]++;
    }
    for (int p = 0; p < PASSES; p++) {
        size_t *c = count + (size_t)p * RADIX, sum = 0;
        for (size_t d = 0; d < RADIX; d++) {
            size_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) b[c[(a[i] >> (p * BITS)) & (RADIX - 1)]++] = a[i];
        uint64_t *t = a;
        a = b, b = t;
    }
    /* six passes: the keys are back in v */
    for (size_t i = 0; i < n; i++) {
        uint64_t u = a[i];
        u ^= (u >> 63) ? (uint64_t)1 << 63 : ~(uint64_t)0;
        memcpy(&v[i], &u, sizeof u);
    }
    free(count);
}

/* RA measured from the middle of the largest empty RA gap of the randoms,
 * so that a field across RA = 0 is not cut in two. */
static double ra_shift(double ra, double origin) {
    double r = fmod(ra - origin, 2 * M_PI);
    if (r < 0) r += 2 * M_PI;
    return r;
}

/* Index of the last edge <= v among edges[0..n) (0 when below all). */
static int bucket_of(const double *edges, int n, double v) {
    int lo = 0, hi = n; /* first edge > v */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (edges[mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 ? lo - 1 : 0;
}

/* The edge below sorted value v[j]: halfway to v[j - 1], so that an object
 * in the gap between two cells' randoms joins the nearer one (an edge at
 * v[j] itself would give the whole gap to the cell below, which may be a
 * separate field far away). Every random stays in its cell: v[j - 1] is
 * below the edge, v[j] not (where the two are adjacent doubles, v[j]). */
static double edge_before(const double *v, size_t j) {
    if (j == 0) return v[0];
    double m = 0.5 * v[j - 1] + 0.5 * v[j]; /* no overflow to inf */
    return m > v[j - 1] && m <= v[j] ? m : v[j];
}

/* pk_angcorr_patches for up to two catalogs at once (b NULL: one), the
 * patches made once from the randoms. */
static pk_status patches_of(pk_context *ctx, const pk_catalog *random, int k, const pk_catalog *a, int32_t *patch_a,
                            const pk_catalog *b, int32_t *patch_b) {
    pk_clear(ctx);
    if (k < 2) return pk_fail(ctx, PK_ERR_INVALID, "jackknife: at least 2 patches are needed (got %d)", k);
    size_t n = random->n;
    if ((size_t)k > n)
        return pk_fail(ctx, PK_ERR_INVALID, "jackknife: %d patches need at least %d random objects (have %zu)", k, k,
                       n);
    double *ra = malloc(n * sizeof(double)), *dec = malloc(n * sizeof(double)), *tmp = malloc(n * sizeof(double));
    int32_t *stripe = malloc(n * sizeof(int32_t));
    int n_stripes = (int)floor(sqrt((double)k) + 0.5);
    if (n_stripes < 1) n_stripes = 1;
    double *dec_edges = malloc((size_t)n_stripes * sizeof(double));
    double *ra_edges = malloc((size_t)k * sizeof(double));
    int *first_patch = malloc(((size_t)n_stripes + 1) * sizeof(int));
    size_t *stripe_first = calloc((size_t)n_stripes + 1, sizeof(size_t));
    if (!ra || !dec || !tmp || !stripe || !dec_edges || !ra_edges || !first_patch || !stripe_first) {
        free(ra), free(dec), free(tmp), free(stripe), free(dec_edges), free(ra_edges), free(first_patch);
        free(stripe_first);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    /* the RA origin: middle of the largest gap between sorted RAs */
    for (size_t i = 0; i < n; i++) ra[i] = ra_shift(random->ra[i], 0.0);
    sort_doubles(ra, tmp, n);
    double gap = ra[0] + 2 * M_PI - ra[n - 1], origin = 0.5 * (ra[n - 1] + ra[0] + 2 * M_PI);
    for (size_t i = 1; i < n; i++)
        if (ra[i] - ra[i - 1] > gap) gap = ra[i] - ra[i - 1], origin = 0.5 * (ra[i] + ra[i - 1]);
    /* declination stripes of equal random counts */
    memcpy(dec, random->dec, n * sizeof(double));
    sort_doubles(dec, tmp, n);
    for (int s = 0; s < n_stripes; s++) dec_edges[s] = edge_before(dec, (size_t)((double)n * s / n_stripes));
    dec_edges[0] = -(double)INFINITY;
    first_patch[0] = 0;
    for (int s = 0; s < n_stripes; s++) first_patch[s + 1] = first_patch[s] + k / n_stripes + (s < k % n_stripes);
    /* in each stripe, RA cells of equal random counts: the randoms' shifted
     * RAs grouped by stripe (each stripe's in catalog order), then each
     * group sorted */
    for (size_t i = 0; i < n; i++) {
        stripe[i] = bucket_of(dec_edges, n_stripes, random->dec[i]);
        stripe_first[stripe[i] + 1]++;
    }
    for (int s = 0; s < n_stripes; s++) stripe_first[s + 1] += stripe_first[s];
    size_t *next = malloc(((size_t)n_stripes + 1) * sizeof(size_t));
    if (!next) {
        free(ra), free(dec), free(tmp), free(stripe), free(dec_edges), free(ra_edges), free(first_patch);
        free(stripe_first);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    memcpy(next, stripe_first, ((size_t)n_stripes + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) ra[next[stripe[i]]++] = ra_shift(random->ra[i], origin);
    free(next);
    for (int s = 0; s < n_stripes; s++) {
        size_t m = stripe_first[s + 1] - stripe_first[s];
        double *ras = ra + stripe_first[s];
        sort_doubles(ras, tmp, m);
        int cells = first_patch[s + 1] - first_patch[s];
        for (int c = 0; c < cells; c++)
            ra_edges[first_patch[s] + c] =
                c == 0 || m == 0 ? -(double)INFINITY : edge_before(ras, (size_t)((double)m * c / cells));
    }
    for (int which = 0; which < 2; which++) {
        const pk_catalog *objects = which ? b : a;
        int32_t *patch = which ? patch_b : patch_a;
        if (!objects) continue;
#pragma omp parallel for schedule(static) num_threads(pk_thread_count(ctx)) if (objects->n >= 65536)
        for (size_t i = 0; i < objects->n; i++) {
            int s = bucket_of(dec_edges, n_stripes, objects->dec[i]);
            int cells = first_patch[s + 1] - first_patch[s];
            patch[i] = first_patch[s] + bucket_of(ra_edges + first_patch[s], cells, ra_shift(objects->ra[i], origin));
        }
    }
    free(ra), free(dec), free(tmp), free(stripe), free(dec_edges), free(ra_edges), free(first_patch);
    free(stripe_first);
    return PK_OK;
}

pk_status pk_angcorr_patches(pk_context *ctx, const pk_catalog *random, int k, const pk_catalog *objects,
                             int32_t *patch) {
    pk_clear(ctx);
    if (!random) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_patches: random is NULL");
    if (!objects) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_patches: objects is NULL");
    if (!patch) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_patches: patch is NULL");
    pk_status st = pk_angcorr_check_sizes(ctx, random, objects);
    if (st) return st;
    return patches_of(ctx, random, k, objects, patch, NULL, NULL);
}

/* ---- the whole correlation with extras ----------------------------------- */

void pk_angcorr_extras_free(pk_angcorr_extras *e) {
    if (!e) return;
    free(e->dd_w), free(e->dr_w), free(e->rr_w);
    free(e->theta_mean_dd), free(e->theta_mean_dr), free(e->theta_mean_rr);
    free(e->omega_jk), free(e->omega_cov), free(e->omega_err);
    memset(e, 0, sizeof *e);
}

/* Objects of one patch: positions and weights copied out. */
typedef struct patch_cat {
    pk_catalog cat;
    double *w;
    double w_total;
} patch_cat;

static pk_status split_patches(pk_context *ctx, const pk_catalog *c, const double *w, const int32_t *patch, int k,
                               patch_cat *out) {
    size_t *count = calloc((size_t)k, sizeof(size_t));
    if (!count) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c->n; i++) count[patch[i]]++;
    for (int p = 0; p < k; p++) {
        size_t m = count[p] ? count[p] : 1;
        out[p].cat.ra = malloc(m * sizeof(double));
        out[p].cat.dec = malloc(m * sizeof(double));
        out[p].w = w ? malloc(m * sizeof(double)) : NULL;
        out[p].cat.n = 0;
        out[p].w_total = 0;
        if (!out[p].cat.ra || !out[p].cat.dec || (w && !out[p].w)) {
            free(count);
            return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        patch_cat *pc = &out[patch[i]];
        pc->cat.ra[pc->cat.n] = c->ra[i];
        pc->cat.dec[pc->cat.n] = c->dec[i];
        if (w) pc->w[pc->cat.n] = w[i];
        pc->cat.n++;
    }
    for (int p = 0; p < k; p++) out[p].w_total = weight_total(out[p].w, out[p].cat.n);
    free(count);
    return PK_OK;
}

static void free_patches(patch_cat *pcs, int k) {
    if (!pcs) return;
    for (int p = 0; p < k; p++) {
        free(pcs[p].cat.ra);
        free(pcs[p].cat.dec);
        free(pcs[p].w);
    }
    free(pcs);
}

/* ---- the counts of a run, patch pair by patch pair ------------------------- */

/* The three counts of a correlation. DD and RR pair a catalog with itself
 * (autocorrelations), DR the data with the randoms. */
enum count_kind { COUNT_DD, COUNT_DR, COUNT_RR };
#define N_COUNT_KINDS 3

/* An autocorrelation's cross pair (p, q) stands for (q, p) too. */
static int is_autocorr(enum count_kind kind) {
    return kind != COUNT_DR;
}

/* Whether a count's first catalog is the randoms (RR only), and its second
 * (DR and RR): also the device's set of each (0 data, 1 random). */
static int first_is_random(enum count_kind kind) {
    return kind == COUNT_RR;
}

static int second_is_random(enum count_kind kind) {
    return kind != COUNT_DD;
}

/* Counts of one kind per patch pair: [n_cells_side][n_cells_side][n_bins] each. */
typedef struct patch_counts {
    uint64_t *c;
    double *w, *t;
} patch_counts;

void pk_angcorr_rr_cells_free(pk_angcorr_rr_cells *cells) {
    if (!cells) return;
    free(cells->counts), free(cells->weighted), free(cells->theta_sum);
    memset(cells, 0, sizeof *cells);
}

/* Blocks a catalog is cut into, without jackknife patches, for n_parts > 1
 * parts to share its counts: the fewest (2 to 64, a power of two) that make
 * four counts a part (m (m + 1) autocorrelation counts of DD and RR, m^2 of
 * DR). */
static int count_blocks(int n_parts) {
    int m = 2;
    while (m < 64 && (uint64_t)m * (uint64_t)(m + 1) + (uint64_t)m * (uint64_t)m < 4 * (uint64_t)n_parts) m *= 2;
    return m;
}

/* The catalogs a run's counts take their objects from: the whole data and
 * randoms, and their cells (the jackknife patches, or blocks of objects). */
typedef struct run_catalogs {
    const pk_catalog *data, *random;
    const pk_angcorr_run_options *ro;         /* the weights, prune and mean_theta */
    int n_cells_side;                         /* cells on each side; 1: the whole catalogs */
    patch_cat *data_patches, *random_patches; /* [n_cells_side] when above 1 */
} run_catalogs;

/* One count of the patch-pair loop: which (DD, DR, RR), which patches,
 * its pairs and the part that makes it. */
typedef struct count_task {
    enum count_kind kind;
    int p, q;
    double work;
    int part;
} count_task;

/* The catalogs (and weights) of task t. */
static void task_catalogs(const run_catalogs *cats, const count_task *t, const pk_catalog **a, const double **wa,
                          const pk_catalog **b, const double **wb) {
    const enum count_kind kind = t->kind;
    if (cats->n_cells_side == 1) {
        *a = first_is_random(kind) ? cats->random : cats->data;
        *wa = first_is_random(kind) ? cats->ro->weights_random : cats->ro->weights_data;
        *b = second_is_random(kind) ? cats->random : cats->data;
        *wb = kind == COUNT_DR ? cats->ro->weights_random : *wa;
    } else {
        patch_cat *A = first_is_random(kind) ? &cats->random_patches[t->p] : &cats->data_patches[t->p];
        patch_cat *B = second_is_random(kind) ? &cats->random_patches[t->q] : &cats->data_patches[t->q];
        *a = &A->cat, *wa = A->w, *b = &B->cat, *wb = B->w;
    }
}

/* A count's slots into cell (p, q) of cells (and (q, p) for an
 * autocorrelation's cross pair, which stands for both orders). */
static void store_cells(patch_counts *cells, int autocorr, int p, int q, int n_cells_side, size_t n_bins,
                        const count_out *co) {
    for (int mirror = 0; mirror < (autocorr && p != q ? 2 : 1); mirror++) {
        size_t cell =
            mirror ? (size_t)q * (size_t)n_cells_side + (size_t)p : (size_t)p * (size_t)n_cells_side + (size_t)q;
        for (size_t b_ = 0; b_ < n_bins; b_++) {
            cells->c[cell * n_bins + b_] = co->slots[b_ + 1];
            if (co->wslots) cells->w[cell * n_bins + b_] = co->wslots[b_ + 1]; /* else the counts stand for it */
            if (co->tslots)
                cells->t[cell * n_bins + b_] = co->tslots[b_ + 1]; /* else left 0 (calloc): no page touched */
        }
    }
}

/* Task i's count, its slots checked already, stored in its cells (cells:
 * those of every kind) and the task marked counted. A task counted before
 * (taken by two sides) is an internal error. */
static pk_status record_count(pk_context *ctx, const count_task *tasks, size_t i, int n_cells_side, size_t n_bins,
                              const count_out *co, patch_counts *cells, uint8_t *counted) {
    const count_task *t = &tasks[i];
    if (counted[i])
        return pk_fail(ctx, PK_ERR_INTERNAL, "jackknife patch pair %d, %d of count %d taken twice", t->p, t->q,
                       (int)t->kind);
    store_cells(&cells[t->kind], is_autocorr(t->kind), t->p, t->q, n_cells_side, n_bins, co);
    counted[i] = 1;
    return PK_OK;
}

/* A count's statistics added to its total's. */
static void add_stats(pk_pair_stats *to, const pk_pair_stats *s, int both_orders) {
    to->pairs_total += (both_orders ? 2 : 1) * s->pairs_total;
    to->pairs_in_range += (both_orders ? 2 : 1) * s->pairs_in_range;
    to->pairs_visited += s->pairs_visited;
    to->pairs_fp64 += s->pairs_fp64;
    to->seconds += s->seconds;
    to->kernel_ms += s->kernel_ms;
}

#ifdef PK_HAVE_CUDA
/* Each pair's table for kernels of 8-bit cells (pk_angcorr_cuda_pairs_judge),
 * judged on the threads (a sample of 1,024 separations a pair: ~0.5 s of
 * one core for the 20,100 pairs of a 1M x 1M K = 100 run), before the
 * counts are queued. Inside a parallel region: on the calling thread. */
static void judge_pairs(const pk_cuda_pairs *s, int set_a, int set_b, const int32_t *pp, const int32_t *qq, size_t n,
                        unsigned char *use8, int n_threads) {
#pragma omp parallel for schedule(dynamic, 16) num_threads(n_threads) if (n >= 64)
    for (size_t k = 0; k < n; k++) use8[k] = (unsigned char)pk_angcorr_cuda_pairs_judge(s, set_a, set_b, pp[k], qq[k]);
}

/* The GPU's patch pairs of count `kind` of this part, all at once through
 * session sess (the data patches set 0, the random ones set 1): the counts
 * are queued without a wait between them (one at a time, each a
 * pk_angcorr_count_cuda call with its table and buffers kept from the
 * last, a count costs ~0.3 ms of calls and copies however few its pairs).
 * Tasks left to the CPU (on_cpu) are not taken; those taken are marked
 * counted. PK_OK without counting when the kernel takes counts one at a
 * time only. */
static pk_status gpu_patch_pairs(pk_context *ctx, pk_cuda_pairs *sess, int kernel, enum count_kind kind,
                                 const run_catalogs *cats, const count_task *tasks, size_t n_tasks, int part,
                                 const uint8_t *on_cpu, uint8_t *counted, size_t n_slots, size_t n_bins,
                                 patch_counts *cells, pk_pair_stats *kind_stats, int *gpu_counted, double *done,
                                 double w_all) {
    const int n_cells_side = cats->n_cells_side;
    const pk_catalog **acat = malloc((size_t)n_cells_side * sizeof(*acat)),
                     **bcat = malloc((size_t)n_cells_side * sizeof(*bcat));
    /* at most 256 MiB of slots a call, so that the host's share stays small
     * beside the cells; a pair beyond one launch is left to the caller */
    size_t chunk = ((size_t)256 << 20) / (n_slots * sizeof(uint64_t));
    if (chunk < 2) chunk = 2;
    size_t *sel = malloc(chunk * sizeof(size_t));
    int32_t *pp = malloc(chunk * sizeof(int32_t)), *qq = malloc(chunk * sizeof(int32_t));
    unsigned char *use8 = malloc(chunk);
    uint64_t *slots = malloc(chunk * n_slots * sizeof(uint64_t));
    pk_pair_stats *st_k = calloc(chunk, sizeof(pk_pair_stats));
    pk_status st = PK_OK;
    if (!sel || !pp || !qq || !use8 || !slots || !st_k || !acat || !bcat)
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (int p = 0; st == PK_OK && p < n_cells_side; p++) {
        acat[p] = first_is_random(kind) ? &cats->random_patches[p].cat : &cats->data_patches[p].cat;
        bcat[p] = &cats->random_patches[p].cat; /* DR's random patches */
    }
    size_t next = 0;
    while (st == PK_OK) {
        size_t n_sel = 0;
        double work = 0;
        for (; next < n_tasks && n_sel < chunk; next++) {
            const count_task *t = &tasks[next];
            if (t->kind != kind || t->part != part || counted[next] || on_cpu[next]) continue;
            size_t na = acat[t->p]->n, nb = kind == COUNT_DR ? bcat[t->q]->n : acat[t->q]->n;
            if ((double)na * (double)nb > 0.5 * (double)pk_angcorr_cuda_chunk_pairs) continue; /* several launches */
            sel[n_sel] = next, pp[n_sel] = t->p, qq[n_sel] = t->q;
            work += t->work;
            n_sel++;
        }
        if (n_sel < 2) break; /* nothing left to gain */
        double t0 = pk_now();
        pk_progress progress;
        pk_progress_begin(&progress, ctx, work, *done / w_all, work / w_all);
        pk_clear(ctx);
        /* DD: data x data, DR: data x random, RR: random x random */
        judge_pairs(sess, first_is_random(kind), second_is_random(kind), pp, qq, n_sel, use8, pk_thread_count(ctx));
        st = pk_angcorr_cuda_pairs_count(ctx, sess, first_is_random(kind), second_is_random(kind), pp, qq, n_sel, use8,
                                         slots, st_k, &progress);
        if (st == PK_ERR_UNSUPPORTED && !ctx->message[0]) {
            st = PK_OK; /* a pair beyond one launch: the caller's loop */
            break;
        }
        if (st) break;
        *done += work;
        double seconds = pk_now() - t0;
        for (size_t k = 0; k < n_sel; k++) {
            const int p = pp[k], q = qq[k], autocorr = is_autocorr(kind), as_auto = autocorr && p == q;
            count_out co = {slots + k * n_slots, NULL, NULL};
            st = check_slots(ctx, kernel, acat[p], NULL,
                             as_auto            ? NULL
                             : kind == COUNT_DR ? bcat[q]
                                                : acat[q],
                             NULL, n_slots, &co, &st_k[k], seconds / (double)n_sel);
            if (st == PK_OK) st = record_count(ctx, tasks, sel[k], n_cells_side, n_bins, &co, cells, counted);
            if (st) break;
            add_stats(kind_stats, &st_k[k], autocorr && p != q);
            kind_stats->kernel = kernel;
            *gpu_counted = 1;
        }
    }
    free(sel);
    free(pp);
    free(qq);
    free(use8);
    free(slots);
    free(st_k);
    free(acat);
    free(bcat);
    return st;
}

/* The most objects of the distinct catalogs a batch of weighted or pruned
 * counts uses (40-48 bytes an object staged on the device, once a batch
 * for each band height a patch is gridded with), the most objects summed
 * over its counts (each count's grids live on the host until the batch
 * ends, ~60 bytes an object: ~1 GiB), and the most counts. A count larger
 * than a limit goes alone. */
size_t pk_angcorr_feature_batch_objects = (size_t)1 << 20;
#define FEATURE_BATCH_GRID_OBJECTS ((size_t)1 << 24)
#define FEATURE_BATCH_COUNTS 4096

/* Whether catalog c is new to a batch's set (then added): open addressing
 * over cap (a power of two) slots, cleared per batch. */
static int first_in_batch(const pk_catalog **set, size_t cap, const pk_catalog *c) {
    size_t h = (size_t)(((uint64_t)(uintptr_t)c * 0x9E3779B97F4A7C15ull) >> 24);
    for (size_t probe = 0; probe < cap; probe++) {
        const pk_catalog **e = &set[(h + probe) & (cap - 1)];
        if (*e == c) return 0;
        if (!*e) {
            *e = c;
            return 1;
        }
    }
    return 1; /* full: cannot happen, the set holds four times the catalogs a batch names */
}

/* A batch's outputs and jobs, for at most cap counts. */
typedef struct feature_batch {
    size_t cap;
    size_t *sel; /* the task of each job */
    pk_feature_job *jobs;
    pk_status *jst;
    uint64_t *slots;
    double *wslots, *tslots;
} feature_batch;

static void feature_batch_free(feature_batch *fb) {
    free(fb->sel), free(fb->jobs), free(fb->jst), free(fb->slots), free(fb->wslots), free(fb->tslots);
    memset(fb, 0, sizeof *fb);
}

/* Buffers for batches of count_cap counts at most (fewer where their
 * outputs would pass 128 MiB). 0 when out of memory. */
static int feature_batch_alloc(feature_batch *fb, size_t count_cap, size_t n_slots, int weighted, int mean_theta) {
    size_t cap = ((size_t)128 << 20) / (n_slots * 3 * sizeof(uint64_t));
    if (cap > count_cap) cap = count_cap;
    if (cap < 1) cap = 1;
    fb->cap = cap;
    fb->sel = malloc(cap * sizeof(size_t));
    fb->jobs = calloc(cap, sizeof(pk_feature_job));
    fb->jst = malloc(cap * sizeof(pk_status));
    fb->slots = malloc(cap * n_slots * sizeof(uint64_t));
    fb->wslots = weighted ? malloc(cap * n_slots * sizeof(double)) : NULL;
    fb->tslots = mean_theta ? malloc(cap * n_slots * sizeof(double)) : NULL;
    if (fb->sel && fb->jobs && fb->jst && fb->slots && (!weighted || fb->wslots) && (!mean_theta || fb->tslots))
        return 1;
    feature_batch_free(fb);
    return 0;
}

/* Job m of a batch: task i's catalogs, the batch's m-th outputs, stats. */
static void feature_batch_set(feature_batch *fb, size_t m, size_t i, const pk_catalog *a, const double *wa,
                              const pk_catalog *b, const double *wb, size_t n_slots, pk_pair_stats *stats) {
    pk_feature_job *job = &fb->jobs[m];
    memset(job, 0, sizeof *job);
    job->a = a, job->wa = fb->wslots ? wa : NULL;
    job->b = b, job->wb = fb->wslots && b ? wb : NULL;
    job->slots = fb->slots + m * n_slots;
    job->wslots = fb->wslots ? fb->wslots + m * n_slots : NULL;
    job->tslots = fb->tslots ? fb->tslots + m * n_slots : NULL;
    job->stats = stats;
    memset(job->slots, 0, n_slots * sizeof(uint64_t));
    if (job->wslots) memset(job->wslots, 0, n_slots * sizeof(double));
    if (job->tslots) memset(job->tslots, 0, n_slots * sizeof(double));
    memset(stats, 0, sizeof *stats);
    fb->sel[m] = i;
}

/* The m jobs of a batch counted: grids and plans built (on n_threads
 * threads), the batch on the device, the counts finished, each then to be
 * checked. The jobs are weighted or pruned with --prune on, whose grids
 * are always built (never PK_ERR_UNSUPPORTED), and gpu_feature_counts has
 * checked that the table fits the kernel: a job or a batch refused anyway
 * is an internal error, not a silent fallback. Every job's grids are
 * freed. */
static pk_status feature_batch_count(pk_context *ctx, feature_batch *fb, size_t m, int n_threads, const pk_bins *bins,
                                     const pk_edge_table *table, pk_prune prune, int mean_theta,
                                     pk_progress *progress) {
    pk_feature_job *jobs = fb->jobs;
    pk_status *jst = fb->jst, st = PK_OK;
    const int weighted = fb->wslots != NULL;
    /* the grids and plans on the threads (their errors, out of memory or a
     * grid that could not be sized, told again below with ctx) */
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads) if (m > 1 && n_threads > 1)
    for (size_t k = 0; k < m; k++) jst[k] = pk_feature_job_prepare(NULL, &jobs[k], bins, table, prune, weighted);
    for (size_t k = 0; k < m && st == PK_OK; k++) {
        if (jst[k] == PK_OK) continue;
        if (jst[k] == PK_ERR_UNSUPPORTED) {
            st = pk_fail(ctx, PK_ERR_INTERNAL, "a weighted or pruned count of a GPU batch was not gridded");
            break;
        }
        pk_status again = pk_feature_job_prepare(ctx, &jobs[k], bins, table, prune, weighted);
        if (again == PK_OK) {
            pk_feature_job_free(&jobs[k]);
            again = pk_fail(ctx, jst[k], "a count's grid could not be built (out of memory?)");
        }
        st = again;
    }
    if (st == PK_OK) {
        pk_clear(ctx);
        st = pk_angcorr_cuda_feature_batch(ctx, jobs, m, bins, table, weighted, mean_theta, progress);
        if (st == PK_ERR_UNSUPPORTED && !ctx->message[0])
            st = pk_fail(ctx, PK_ERR_INTERNAL, "the device refused a batch of weighted or pruned counts");
        else if (st == PK_OK) {
#pragma omp parallel for schedule(dynamic, 4) num_threads(n_threads) if (m > 1 && n_threads > 1)
            for (size_t k = 0; k < m; k++) pk_feature_job_finish(&jobs[k], bins, table);
        }
    }
    for (size_t k = 0; k < m; k++)
        if (jst[k] == PK_OK) pk_feature_job_free(&jobs[k]);
    return st;
}

/* The weighted, pruned or mean-separation patch pairs of this part that
 * the GPU counts (those not on_cpu and not yet counted), in batches: the
 * CPU's threads build each count's grids and visit plan, the device counts
 * the whole batch from one upload (pk_angcorr_cuda_feature_batch), the
 * threads finish the counts (skipped pairs, self-pairs), then each is
 * checked and stored as a count of its own would be. A table too large
 * for the kernel's shared memory leaves every count to the caller's loop. */
static pk_status gpu_feature_counts(pk_context *ctx, int kernel, const run_catalogs *cats, const pk_bins *bins,
                                    const pk_edge_table *table, const count_task *tasks, size_t n_tasks, int part,
                                    const uint8_t *on_cpu, uint8_t *counted, size_t n_slots, size_t n_bins,
                                    patch_counts *cells, pk_pair_stats **stats_of, int *gpu_counted, int weighted,
                                    double *done, double w_all) {
    const pk_angcorr_run_options *ro = cats->ro;
    const int n_threads = pk_thread_count(ctx), mean_theta = weighted && ro->mean_theta;
    feature_batch fb;
    memset(&fb, 0, sizeof fb);
    pk_pair_stats *st_k = NULL;
    const pk_catalog **set = NULL;
    size_t set_cap = 16;
    pk_status st = PK_OK;
    if (!feature_batch_alloc(&fb, n_tasks < FEATURE_BATCH_COUNTS ? n_tasks : FEATURE_BATCH_COUNTS, n_slots, weighted,
                             mean_theta))
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    while (st == PK_OK && set_cap < 4 * fb.cap) set_cap *= 2;
    if (st == PK_OK) {
        st_k = calloc(fb.cap, sizeof(pk_pair_stats));
        set = calloc(set_cap, sizeof(*set));
        if (!st_k || !set) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    size_t next = 0;
    /* a table too large for the kernel: every count to the caller's loop
     * (the full-range kernels, or the error that says so when weighted) */
    if (st == PK_OK && !pk_angcorr_cuda_features_fit(table)) next = n_tasks;
    while (st == PK_OK) {
        size_t m = 0, objects = 0, grid_objects = 0;
        double work = 0;
        memset(set, 0, set_cap * sizeof(*set));
        for (; next < n_tasks && m < fb.cap; next++) {
            const count_task *t = &tasks[next];
            if (t->part != part || counted[next] || on_cpu[next]) continue;
            const int as_auto = is_autocorr(t->kind) && t->p == t->q;
            const pk_catalog *a, *b;
            const double *wa, *wb;
            task_catalogs(cats, t, &a, &wa, &b, &wb);
            /* the objects of catalogs new to the batch (a first count's own both) */
            int new_a = first_in_batch(set, set_cap, a), new_b = !as_auto && first_in_batch(set, set_cap, b);
            size_t here = (new_a ? a->n : 0) + (new_b ? b->n : 0);
            size_t gridded = a->n + (as_auto ? 0 : b->n);
            if (m > 0 && (objects + here > pk_angcorr_feature_batch_objects ||
                          grid_objects + gridded > FEATURE_BATCH_GRID_OBJECTS))
                break; /* the next batch's first */
            feature_batch_set(&fb, m, next, a, wa, as_auto ? NULL : b, wb, n_slots, &st_k[m]);
            m++;
            objects += here;
            grid_objects += gridded;
            work += t->work;
        }
        if (m == 0) break;
        pk_progress progress;
        pk_progress_begin(&progress, ctx, work, *done / w_all, work / w_all);
        if (progress.cancelled) {
            st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
            break;
        }
        double t0 = pk_now();
        st = feature_batch_count(ctx, &fb, m, n_threads, bins, table, ro->prune, mean_theta, &progress);
        double seconds = pk_now() - t0;
        for (size_t k = 0; k < m && st == PK_OK; k++) {
            const pk_feature_job *job = &fb.jobs[k];
            const count_task *t = &tasks[fb.sel[k]];
            const enum count_kind kind = t->kind;
            count_out co = {job->slots, job->wslots, job->tslots};
            st = check_slots(ctx, kernel, job->a, job->wa, job->b, job->wb, n_slots, &co, job->stats,
                             seconds / (double)m);
            if (st == PK_OK) st = record_count(ctx, tasks, fb.sel[k], cats->n_cells_side, n_bins, &co, cells, counted);
            if (st) break;
            add_stats(stats_of[kind], job->stats, is_autocorr(kind) && t->p != t->q);
            stats_of[kind]->kernel = kernel;
            gpu_counted[kind] = 1;
        }
        if (st == PK_OK) *done += work;
    }
    feature_batch_free(&fb);
    free(st_k);
    free(set);
    return st;
}
#endif

/* The counts that threads share out: see count_shared. */
typedef struct shared_counts {
    pk_context *ctx;
    int share;      /* a GPU counts too, from the large end */
    int share_one;  /* share, the GPU's counts one at a time (weighted or pruned ones) */
    int cpu_kernel; /* the CPU threads' kernel */
    int gpu_kernel; /* share: the device's */
    double cpu_max; /* without share: the work below which a count is the CPU's */
    int n_threads, part;
    const run_catalogs *cats;
    const pk_bins *bins;
    const pk_edge_table *table;
    size_t n_slots, n_bins;
    int weighted_path;
    patch_counts *cells;
    const count_task *tasks;
    size_t n_tasks;
    uint8_t *counted;
    pk_pair_stats **stats_of;
    int *gpu_counted;
    double done, w_all;
} shared_counts;

typedef struct share_item {
    double work;
    size_t i;
} share_item;

static int share_item_cmp(const void *x, const void *y) {
    const share_item *a = x, *b = y;
    if (a->work != b->work) return a->work < b->work ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

#ifdef PK_HAVE_CUDA
/* Where a batch of list[lo .. hi) taken from the top begins: share of
 * the work left or more, at least one count, at most cap. */
static size_t take_from_top(const size_t *list, const count_task *tasks, const double *prefix, size_t lo, size_t hi,
                            double share, size_t cap) {
    double target = share * (prefix[hi] - prefix[lo]), w = 0;
    size_t h = hi;
    while (h > lo && (h == hi || w < target) && hi - h < cap) w += tasks[list[--h]].work;
    return h;
}
#endif

/* The first failure of the shared counts: the lowest task's among those
 * that failed (the counts begun before the others stopped depend on the
 * threads' timing). */
typedef struct share_failure {
    int failed;
    size_t at;
    pk_status st;
    char msg[PK_MESSAGE_MAX];
} share_failure;

static void share_fail(share_failure *f, size_t i, pk_status st, const char *msg) {
#pragma omp critical(pk_jackknife_failure)
    if (i < f->at) {
        f->at = i;
        f->st = st;
        snprintf(f->msg, sizeof f->msg, "%s", msg);
    }
#pragma omp atomic write
    f->failed = 1;
}

/* The most batches (with share_one, counts) the GPU takes from a shared
 * list (-1: no limit); the tests set 1, so that both sides count whatever
 * their speeds. */
#ifdef PK_HAVE_CUDA
int pk_angcorr_share_gpu_batches = -1;
#endif

/* Whether the shared counts are to stop: a count failed, or the user
 * asked to stop. */
static int share_stopped(share_failure *f, int *cancelled) {
    int failed, stop;
#pragma omp atomic read
    failed = f->failed;
#pragma omp atomic read
    stop = *cancelled;
    return failed || stop;
}

/* Work a CPU thread takes at once from the shared list (fewer takings of
 * its lock when counts are tiny, as those of K = 300 patches of 10 objects
 * are). */
#define SHARE_GROUP_WORK 65536.0

/* What count_shared's threads share: the list of counts, the smallest
 * first, what is left of it, and how the counts went. */
typedef struct share_state {
    size_t *list, n_list;      /* tasks */
    double *prefix;            /* [n_list + 1]: prefix[j], the work of list[0 .. j) */
    uint8_t *mark;             /* by task: 0 not listed, 1 listed, 2 counted by the GPU */
    pk_pair_stats *task_stats; /* by task */
    size_t lo, hi;             /* what is left: list[lo .. hi) */
    pk_progress progress;
    int cancelled;
    share_failure fail;
#ifdef PK_HAVE_CUDA
    size_t gpu_cap;            /* the most counts of a GPU batch */
    size_t first_b0, first_b1; /* the GPU's first batch: list[first_b0 .. first_b1) */
    pk_cuda_pairs *sess;       /* NULL: no GPU batches */
    const pk_catalog **dcat, **rcat;
    unsigned char *judged; /* by task */
#endif
} share_state;

static void share_state_free(share_state *s) {
    free(s->list), free(s->prefix), free(s->mark), free(s->task_stats);
#ifdef PK_HAVE_CUDA
    free(s->dcat), free(s->rcat), free(s->judged);
#endif
}

/* The counts of this part to share, the smallest first (ties in task
 * order), and the prefix sums of their work. */
static pk_status list_shared_tasks(const shared_counts *sc, share_state *s) {
    pk_context *ctx = sc->ctx;
    const count_task *tasks = sc->tasks;
    const size_t n_tasks = sc->n_tasks;
    s->list = malloc((n_tasks + 1) * sizeof(size_t));
    s->prefix = malloc((n_tasks + 1) * sizeof(double));
    s->mark = calloc(n_tasks + 1, 1);
    s->task_stats = calloc(n_tasks + 1, sizeof(pk_pair_stats));
    if (!s->list || !s->prefix || !s->mark || !s->task_stats) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    size_t *list = s->list, n_list = 0;
    for (size_t i = 0; i < n_tasks; i++) {
        const count_task *t = &tasks[i];
        if (t->part != sc->part || sc->counted[i]) continue;
        int take = t->work < PARALLEL_TASK_PAIRS && t->work < sc->cpu_max;
#ifdef PK_HAVE_CUDA
        if (sc->share_one) take = 1; /* the device counts any size */
        else if (sc->share) {
            const pk_catalog *a, *b;
            const double *wa, *wb;
            task_catalogs(sc->cats, t, &a, &wa, &b, &wb);
            take = (double)a->n * (double)b->n <= 0.5 * (double)pk_angcorr_cuda_chunk_pairs; /* one launch */
        }
#endif
        if (take) list[n_list++] = i;
    }
    /* the smallest first (ties in task order) */
    share_item *order = malloc((n_list + 1) * sizeof(share_item));
    if (!order) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < n_list; j++) order[j] = (share_item){tasks[list[j]].work, list[j]};
    qsort(order, n_list, sizeof *order, share_item_cmp);
    for (size_t j = 0; j < n_list; j++) list[j] = order[j].i, s->mark[list[j]] = 1;
    free(order);
    s->prefix[0] = 0;
    for (size_t j = 0; j < n_list; j++) s->prefix[j + 1] = s->prefix[j] + tasks[list[j]].work;
    s->n_list = n_list;
    return PK_OK;
}

#ifdef PK_HAVE_CUDA
/* The GPU's session over the data (set 0) and the random patches (set 1),
 * opened here, where its setup has the threads, and every listed count's
 * table judged on the threads (those the CPU takes too: ~26 us of one core
 * a pair, in the 1M x 1M K = 100 run's profile); then the GPU's first
 * batch, a sixteenth of the work (its speed unknown yet), taken before the
 * threads start so that it is the same whatever their timing; later ones a
 * quarter of what is left. No session (PK_OK) where the kernel counts one
 * at a time. */
static pk_status open_gpu_session(const shared_counts *sc, share_state *s) {
    pk_context *ctx = sc->ctx;
    const count_task *tasks = sc->tasks;
    const size_t n_tasks = sc->n_tasks, n_list = s->n_list;
    const size_t *list = s->list;
    /* host slots for at most 256 MiB of a GPU batch's counts */
    s->gpu_cap = ((size_t)256 << 20) / (sc->n_slots * sizeof(uint64_t)), s->first_b0 = s->hi, s->first_b1 = s->hi;
    if (s->gpu_cap < 1) s->gpu_cap = 1;
    if (sc->share && !sc->share_one) {
        const int n_cells_side = sc->cats->n_cells_side;
        s->dcat = malloc((size_t)n_cells_side * sizeof(*s->dcat));
        s->rcat = malloc((size_t)n_cells_side * sizeof(*s->rcat));
        s->judged = malloc(n_tasks + 1);
        pk_status so = s->dcat && s->rcat && s->judged ? PK_OK : pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        for (int p = 0; so == PK_OK && p < n_cells_side; p++)
            s->dcat[p] = &sc->cats->data_patches[p].cat, s->rcat[p] = &sc->cats->random_patches[p].cat;
        if (so == PK_OK) {
            pk_clear(ctx);
            so = pk_angcorr_cuda_pairs_open(ctx, sc->gpu_kernel, s->dcat, n_cells_side, s->rcat, n_cells_side, sc->bins,
                                            sc->table, &s->sess);
            if (so == PK_ERR_UNSUPPORTED && !ctx->message[0]) so = PK_OK; /* the CPU's threads alone */
        }
        if (so != PK_OK) return so;
        const pk_cuda_pairs *js = s->sess;
        unsigned char *judged = s->judged;
#pragma omp parallel for schedule(dynamic, 64) num_threads(sc->n_threads) if (js != NULL)
        for (size_t j = 0; j < (js ? n_list : 0); j++) {
            const count_task *t = &tasks[list[j]];
            judged[list[j]] = (unsigned char)pk_angcorr_cuda_pairs_judge(js, first_is_random(t->kind),
                                                                         second_is_random(t->kind), t->p, t->q);
        }
    }
    if (s->sess) /* the first batch: a sixteenth of the work */
        s->first_b0 = s->hi = take_from_top(list, tasks, s->prefix, s->lo, s->hi, 1.0 / 16, s->gpu_cap);
    return PK_OK;
}

/* Thread 0's GPU side for weighted or pruned counts: one at a time, the
 * largest first. one: the thread's context, mine: its slots. */
static void gpu_side_one_at_a_time(shared_counts *sc, share_state *s, const pk_context *one, count_out *mine) {
    pk_context *ctx = sc->ctx;
    const count_task *tasks = sc->tasks;
    const pk_angcorr_run_options *ro = sc->cats->ro;
    pk_context g = *one;
    g.n_threads = ctx->n_threads;
    g.progress_user = ctx->progress_user;
    for (int taken = 0; taken != pk_angcorr_share_gpu_batches; taken++) {
        if (share_stopped(&s->fail, &s->cancelled)) break;
        if (s->progress.cancelled) { /* seen by thread 0's own reports */
#pragma omp atomic write
            s->cancelled = 1;
            break;
        }
        size_t j = SIZE_MAX;
#pragma omp critical(pk_share_list)
        if (s->hi > s->lo) j = --s->hi;
        if (j == SIZE_MAX) break; /* the two ends met */
        const size_t i = s->list[j];
        const count_task *t = &tasks[i];
        const int as_auto = is_autocorr(t->kind) && t->p == t->q;
        const pk_catalog *a, *b;
        const double *wa, *wb;
        task_catalogs(sc->cats, t, &a, &wa, &b, &wb);
        /* a large count's own progress (thread 0 reports, and sees
         * Ctrl-C, within it): its share of the shared line, from
         * where that stands; a small one reports when it ends */
        g.progress = t->work >= PARALLEL_TASK_PAIRS ? ctx->progress : NULL;
        double done_now;
#pragma omp atomic read
        done_now = s->progress.done;
        pk_progress gp;
        pk_progress_begin(&gp, &g, t->work, s->progress.base + s->progress.span * done_now / s->progress.total,
                          s->progress.span * t->work / s->progress.total);
        g.message[0] = '\0';
        pk_status sg = gp.cancelled ? pk_fail(&g, PK_ERR_CANCELLED, "cancelled")
                                    : count_slots_ex(&g, PK_BACKEND_CUDA, sc->gpu_kernel, a, wa, as_auto ? NULL : b,
                                                     as_auto ? NULL : wb, sc->bins, sc->table, ro->prune,
                                                     ro->mean_theta, mine, &s->task_stats[i], &gp);
        if (sg == PK_ERR_UNSUPPORTED) {
            /* the device cannot take it (a table too large for its
             * shared memory): the count back to the list, the GPU's
             * side done; what the threads do not take, the
             * caller's loop counts */
#pragma omp critical(pk_share_list)
            if (s->hi == j) s->hi = j + 1;
            break;
        }
        if (sg == PK_OK)
            sg = record_count(&g, tasks, i, sc->cats->n_cells_side, sc->n_bins, mine, sc->cells, sc->counted);
        if (sg == PK_ERR_CANCELLED) {
#pragma omp atomic write
            s->cancelled = 1;
            break;
        }
        if (sg != PK_OK) {
            share_fail(&s->fail, i, sg, g.message);
            break;
        }
        s->mark[i] = 2;
        if (pk_progress_add(&s->progress, t->work, 1)) {
#pragma omp atomic write
            s->cancelled = 1;
        }
    }
}

/* Thread 0's GPU side for unweighted, unpruned counts: batches from the
 * large end, each count type's counts of a batch in one call. */
static void gpu_side_batches(shared_counts *sc, share_state *s, const pk_context *one) {
    pk_context *ctx = sc->ctx;
    const count_task *tasks = sc->tasks;
    const size_t n_slots = sc->n_slots;
    const size_t cap = s->gpu_cap;
    size_t *sel = malloc(cap * sizeof(size_t));
    int32_t *pp = malloc(cap * sizeof(int32_t)), *qq = malloc(cap * sizeof(int32_t));
    unsigned char *use8 = malloc(cap);
    uint64_t *slots = malloc(cap * n_slots * sizeof(uint64_t));
    pk_pair_stats *st_k = malloc(cap * sizeof(pk_pair_stats));
    int gpu_ok = sel && pp && qq && use8 && slots && st_k;
    pk_context g = *one;
    g.n_threads = ctx->n_threads;
    if (!gpu_ok) share_fail(&s->fail, 0, pk_fail(&g, PK_ERR_NOMEM, "out of memory"), g.message);
    for (int batches = 0; gpu_ok && batches != pk_angcorr_share_gpu_batches; batches++) {
        if (share_stopped(&s->fail, &s->cancelled)) break;
        size_t b0 = s->first_b0, b1 = s->first_b1; /* the first batch, taken before the threads started */
        if (batches > 0) {
#pragma omp critical(pk_share_list)
            {
                b1 = s->hi;
                b0 = s->hi = take_from_top(s->list, tasks, s->prefix, s->lo, s->hi, 0.25, s->gpu_cap);
            }
        }
        if (b0 == b1) break; /* the two ends met */
        int counted_in_batch = 0;
        for (int kind = 0; kind < N_COUNT_KINDS && gpu_ok; kind++) {
            size_t m = 0;
            for (size_t j = b0; j < b1; j++) {
                const count_task *t = &tasks[s->list[j]];
                if ((int)t->kind != kind) continue;
                sel[m] = s->list[j], pp[m] = t->p, qq[m] = t->q, use8[m] = s->judged[s->list[j]];
                m++;
            }
            if (m == 0) continue;
            pk_status sg = PK_OK;
            size_t failed_task = sel[0];
            g.message[0] = '\0';
            double t0 = pk_now();
            /* DD: data x data, DR: data x random, RR: random x random */
            sg = pk_angcorr_cuda_pairs_count(&g, s->sess, first_is_random(kind), second_is_random(kind), pp, qq, m,
                                             use8, slots, st_k, &s->progress);
            if (sg == PK_ERR_UNSUPPORTED && !g.message[0]) {
                /* counts one at a time: the batch, when none of it
                 * was counted and nothing was taken below it, back
                 * to the CPU's threads; the rest to the caller */
                gpu_ok = 0;
                if (!counted_in_batch) {
#pragma omp critical(pk_share_list)
                    if (s->hi == b0) s->hi = b1;
                }
                break;
            }
            counted_in_batch = 1;
            double seconds = pk_now() - t0;
            for (size_t k = 0; k < m && sg == PK_OK; k++) {
                const count_task *t = &tasks[sel[k]];
                const int as_auto = is_autocorr(t->kind) && t->p == t->q;
                count_out co = {slots + k * n_slots, NULL, NULL};
                const pk_catalog *a, *b;
                const double *wa, *wb;
                task_catalogs(sc->cats, t, &a, &wa, &b, &wb);
                sg = check_slots(&g, sc->gpu_kernel, a, NULL, as_auto ? NULL : b, NULL, n_slots, &co, &st_k[k],
                                 seconds / (double)m);
                if (sg == PK_OK)
                    sg = record_count(&g, tasks, sel[k], sc->cats->n_cells_side, sc->n_bins, &co, sc->cells,
                                      sc->counted);
                if (sg) {
                    failed_task = sel[k];
                    break;
                }
                s->task_stats[sel[k]] = st_k[k];
                s->mark[sel[k]] = 2;
            }
            if (sg == PK_ERR_CANCELLED) {
#pragma omp atomic write
                s->cancelled = 1;
                gpu_ok = 0;
            } else if (sg != PK_OK) {
                share_fail(&s->fail, failed_task, sg, g.message);
                gpu_ok = 0;
            }
        }
    }
    free(sel), free(pp), free(qq), free(use8), free(slots), free(st_k);
}
#endif

/* A thread's CPU side: groups of counts from the list, from the small end
 * with share, else the largest first, each count on this thread alone.
 * one: the thread's context, mine: its slots (ok: allocated). */
static void cpu_side(shared_counts *sc, share_state *s, pk_context *one, count_out *mine, int ok, int owner) {
    const count_task *tasks = sc->tasks;
    const pk_angcorr_run_options *ro = sc->cats->ro;
    for (;;) {
        if (share_stopped(&s->fail, &s->cancelled)) break;
        size_t g0, g1;
#pragma omp critical(pk_share_list)
        {
            if (sc->share) { /* from the small end, a group of tiny counts at once */
                g0 = s->lo;
                double w = 0;
                while (s->lo < s->hi && tasks[s->list[s->lo]].work < PARALLEL_TASK_PAIRS &&
                       (s->lo == g0 || w < SHARE_GROUP_WORK))
                    w += tasks[s->list[s->lo++]].work;
                g1 = s->lo;
            } else { /* the largest first */
                g1 = s->hi;
                double w = 0;
                while (s->hi > s->lo && (s->hi == g1 || w < SHARE_GROUP_WORK)) w += tasks[s->list[--s->hi]].work;
                g0 = s->hi;
            }
        }
        if (g0 == g1) break;
        for (size_t j = g0; j < g1; j++) {
            const size_t i = s->list[j];
            const count_task *t = &tasks[i];
            const int as_auto = is_autocorr(t->kind) && t->p == t->q;
            const pk_catalog *a, *b;
            const double *wa, *wb;
            task_catalogs(sc->cats, t, &a, &wa, &b, &wb);
            pk_progress quiet;
            pk_progress_begin(&quiet, one, t->work, 0.0, 1.0);
            pk_status st_i =
                ok ? count_slots_ex(one, PK_BACKEND_CPU, sc->cpu_kernel, a, wa, as_auto ? NULL : b, as_auto ? NULL : wb,
                                    sc->bins, sc->table, ro->prune, ro->mean_theta, mine, &s->task_stats[i], &quiet)
                   : pk_fail(one, PK_ERR_NOMEM, "out of memory");
            if (st_i == PK_OK)
                st_i = record_count(one, tasks, i, sc->cats->n_cells_side, sc->n_bins, mine, sc->cells, sc->counted);
            if (st_i != PK_OK) {
                share_fail(&s->fail, i, st_i, one->message);
                break;
            }
            if (pk_progress_add(&s->progress, t->work, owner)) {
#pragma omp atomic write
                s->cancelled = 1;
            }
        }
    }
}

/* The shared counts' statistics added in task order, as the caller's loop
 * would, whichever side counted each. */
static void merge_task_stats(shared_counts *sc, const share_state *s) {
    const count_task *tasks = sc->tasks;
    for (size_t i = 0; i < sc->n_tasks; i++) {
        if (!sc->counted[i] || !s->mark[i]) continue; /* not counted here */
        const enum count_kind kind = tasks[i].kind;
        add_stats(sc->stats_of[kind], &s->task_stats[i], is_autocorr(kind) && tasks[i].p != tasks[i].q);
        if (s->mark[i] == 2) sc->gpu_counted[kind] = 1;
        if (s->mark[i] == 2 || !sc->gpu_counted[kind]) sc->stats_of[kind]->kernel = s->task_stats[i].kernel;
    }
}

/* Counts of this part on the CPU's threads, one thread each, as many at
 * once as there are threads, instead of all threads on each in turn, whose
 * parallel regions and barriers cost more than such a count's work. Each
 * count is the same whatever its thread count (the weighted sums merge in
 * a fixed order), so the cells are too.
 *
 * Without share: the counts below PARALLEL_TASK_PAIRS (and cpu_max), the
 * largest first. With share, the list is every count the GPU takes in one
 * launch, the smallest first: thread 0 sends the GPU batches from the
 * large end (the first a sixteenth of the work, then each a quarter of the
 * work left), while the other threads take counts below
 * PARALLEL_TASK_PAIRS from the small end, until the two meet; the faster
 * side takes the more without a model of either's speed (jackknife K = 300
 * over 3,000 x 5,000 objects: the CPU's 16 threads the faster; K = 100 over
 * 100,000 x 100,000: the H200). The CPU waits for the GPU only at the end
 * of a batch, or where the counts left are all too large for one thread;
 * those would go to the GPU in any case. With share_one (weighted or
 * pruned counts, which the GPU takes one at a time) every count is listed
 * and thread 0 sends the GPU one count at a time from the large end. What
 * neither takes is left uncounted for the caller. */
static pk_status count_shared(shared_counts *sc) {
    pk_context *ctx = sc->ctx;
    share_state s;
    memset(&s, 0, sizeof s);
    pk_status st = list_shared_tasks(sc, &s);
    if (st != PK_OK || s.n_list < 2) { /* n_list < 2: the caller's loop */
        share_state_free(&s);
        return st;
    }
    const double list_work = s.prefix[s.n_list];
    pk_progress_begin(&s.progress, ctx, list_work, sc->done / sc->w_all, list_work / sc->w_all);
    s.lo = 0, s.hi = s.n_list;
    s.fail = (share_failure){0, sc->n_tasks, PK_OK, ""};
#ifdef PK_HAVE_CUDA
    if ((st = open_gpu_session(sc, &s)) != PK_OK) {
        share_state_free(&s);
        return st;
    }
#endif
#pragma omp parallel num_threads(sc->n_threads)
    {
        const int owner = pk_thread_num() == 0;
        /* one thread's count: its own slots, a context of one thread whose
         * progress the loop reports */
        pk_context one = *ctx;
        one.n_threads = 1;
        one.progress = NULL;
        one.message[0] = '\0';
        const size_t n_slots = sc->n_slots;
        const pk_angcorr_run_options *ro = sc->cats->ro;
        count_out mine = {malloc(n_slots * sizeof(uint64_t)),
                          sc->weighted_path ? malloc(n_slots * sizeof(double)) : NULL,
                          ro->mean_theta ? malloc(n_slots * sizeof(double)) : NULL};
        int ok = mine.slots && (!sc->weighted_path || mine.wslots) && (!ro->mean_theta || mine.tslots);
#ifdef PK_HAVE_CUDA
        if (sc->share_one && owner && ok) gpu_side_one_at_a_time(sc, &s, &one, &mine);
        if (s.sess && owner) gpu_side_batches(sc, &s, &one);
#endif
        cpu_side(sc, &s, &one, &mine, ok, owner);
        free(mine.slots);
        free(mine.wslots);
        free(mine.tslots);
    }
#ifdef PK_HAVE_CUDA
    pk_angcorr_cuda_pairs_close(s.sess, 0); /* every count ended with its work */
#endif
    if (s.fail.failed) {
        st = s.fail.st;
        snprintf(ctx->message, sizeof ctx->message, "%s", s.fail.msg);
    } else if (s.cancelled || s.progress.cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    if (st == PK_OK) merge_task_stats(sc, &s);
    for (size_t j = 0; j < s.n_list; j++)
        if (sc->counted[s.list[j]]) sc->done += sc->tasks[s.list[j]].work;
    share_state_free(&s);
    return st;
}

static int task_by_work(const void *a, const void *b) {
    const count_task *x = a, *y = b;
    if (x->work != y->work) return x->work > y->work ? -1 : 1;
    return x->kind != y->kind ? (int)x->kind - (int)y->kind : x->p != y->p ? x->p - y->p : x->q - y->q;
}

/* Each task to a part, the largest first to the part with the least work
 * so far (the same on every part: it depends on the sizes alone). */
static pk_status assign_parts(pk_context *ctx, count_task *tasks, size_t n_tasks, int n_parts) {
    double *load = calloc((size_t)n_parts, sizeof(double));
    count_task *sorted = malloc((n_tasks ? n_tasks : 1) * sizeof(count_task));
    if (!load || !sorted) {
        free(load), free(sorted);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n_tasks; i++) sorted[i] = tasks[i], sorted[i].part = (int)i; /* part: its index, for now */
    qsort(sorted, n_tasks, sizeof *sorted, task_by_work);
    for (size_t i = 0; i < n_tasks; i++) {
        int best = 0;
        for (int r = 1; r < n_parts; r++)
            if (load[r] < load[best]) best = r;
        load[best] += sorted[i].work;
        tasks[sorted[i].part].part = best;
    }
    free(load), free(sorted);
    return PK_OK;
}

/* ---- pk_angcorr_run_ex_part, step by step ------------------------------------ */

/* One run of pk_angcorr_run_ex_part: the call, then what its steps make. */
typedef struct ex_run {
    const char *fn; /* the public function called, for messages */
    pk_context *ctx;
    const pk_angcorr_options *opts;
    int part, n_parts;
    pk_angcorr_sum_fn sum;
    void *sum_user;
    const pk_catalog *data, *random;
    const pk_bins *bins;
    pk_estimator estimator;
    const pk_angcorr_rr_cells *rr_in;
    pk_angcorr_rr_cells *rr_out;
    pk_angcorr_result *out;
    pk_angcorr_extras *extras;
    pk_angcorr_run_options ro; /* the run options given, or the defaults */

    pk_backend backend;
    int kernel;
    pk_edge_table table;
    size_t n_bins, n_slots;
    int weighted;        /* data or random weights */
    int weighted_path;   /* weighted, or mean separations */
    int need_wt;         /* the cells' weighted and separation sums are kept */
    int n_patches;       /* the jackknife patches; 1 without */
    size_t n_cell_pairs; /* cats.n_cells_side squared */
    run_catalogs cats;
    int32_t *patch_d, *patch_r; /* each object's cell */
    patch_counts cells[N_COUNT_KINDS];
    uint64_t *all_c; /* the three counts' cells one after another, then 12 pair totals */
    double *all_wt;  /* their weighted sums, then their separation sums */
    count_out co;    /* one count's slots */
    count_task *tasks;
    size_t n_tasks;
    uint8_t *counted;   /* by task */
    double w_all, done; /* this part's work, and what of it is counted */
    pk_pair_stats *stats_of[N_COUNT_KINDS];
    int small_kernel;   /* >= 0: the CPU kernel of the small counts */
    double small_limit; /* the work below which a count is small */
    int gpu_counted[N_COUNT_KINDS];
} ex_run;

/* The outputs cleared, then the arguments checked (before any part is
 * bound to call sum). */
static pk_status check_run_args(ex_run *r, const pk_angcorr_run_options *run) {
    pk_context *ctx = r->ctx;
    const char *fn = r->fn;
    const pk_catalog *data = r->data, *random = r->random;
    const pk_angcorr_rr_cells *rr_in = r->rr_in;
    if (!r->out) return pk_fail(ctx, PK_ERR_INVALID, "%s: out is NULL", fn);
    if (!r->extras) return pk_fail(ctx, PK_ERR_INVALID, "%s: extras is NULL", fn);
    memset(r->out, 0, sizeof *r->out);
    memset(r->extras, 0, sizeof *r->extras);
    if (r->rr_out) memset(r->rr_out, 0, sizeof *r->rr_out);
    if (!data || !random) return pk_fail(ctx, PK_ERR_INVALID, "%s: %s is NULL", fn, !data ? "data" : "random");
    if (!r->bins) return pk_fail(ctx, PK_ERR_INVALID, "%s: bins is NULL", fn);
    if ((unsigned)r->estimator > PK_ESTIMATOR_DAVIS_PEEBLES)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "estimator %d is not a pk_estimator (0 to 3: landy-szalay, natural, hamilton, davis-peebles)",
                       (int)r->estimator);
    if (run && (unsigned)run->prune > PK_PRUNE_ON)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_run_options.prune: %d is not auto (0), off (1) or on (2)",
                       (int)run->prune);
    if (data->n == 0 || random->n == 0)
        return pk_fail(ctx, PK_ERR_INVALID, "both catalogs must hold at least one object");
    const int part = r->part, n_parts = r->n_parts;
    if (n_parts < 1 || part < 0 || part >= n_parts || (n_parts > 1 && !r->sum))
        return pk_fail(ctx, PK_ERR_INVALID, "part %d of %d%s", part, n_parts,
                       n_parts > 1 && !r->sum ? " needs a function that sums the parts" : " does not exist");
    pk_angcorr_run_options ro = {NULL, NULL, 0, 0, PK_PRUNE_AUTO};
    if (run) ro = *run;
    r->ro = ro;
    pk_status st;
    if ((st = pk_angcorr_check_sizes(ctx, data, random)) != PK_OK) return st;
    if ((st = check_weights(ctx, ro.weights_data, data->n, "data weights", 1)) != PK_OK) return st;
    if ((st = check_weights(ctx, ro.weights_random, random->n, "random weights", 1)) != PK_OK) return st;
    if (ro.jackknife == 1 || ro.jackknife < 0)
        return pk_fail(ctx, PK_ERR_INVALID, "jackknife: at least 2 patches are needed (got %d)", ro.jackknife);
    if (rr_in) {
        if (rr_in->n_patches != (ro.jackknife >= 2 ? ro.jackknife : 1) || rr_in->n_bins != r->bins->n_bins)
            return pk_fail(ctx, PK_ERR_INVALID,
                           "the RR given is of %d patch%s and %zu bins; this run has %d patch%s and %zu bins",
                           rr_in->n_patches, rr_in->n_patches == 1 ? "" : "es", rr_in->n_bins,
                           ro.jackknife >= 2 ? ro.jackknife : 1, ro.jackknife >= 2 ? "es" : "", r->bins->n_bins);
        if (!rr_in->counts || !rr_in->weighted || (ro.mean_theta && !rr_in->theta_sum))
            return pk_fail(ctx, PK_ERR_INVALID, "the RR given lacks %s",
                           !rr_in->counts     ? "its counts"
                           : !rr_in->weighted ? "its weighted counts"
                                              : "the separation sums that mean_theta needs");
    }
    return PK_OK;
}

/* A part that stops before its counts: sum called once all the same. */
static void sum_nothing(const ex_run *r) {
    if (r->n_parts > 1) (void)r->sum(r->sum_user, 0, NULL, 0, NULL, 0);
}

/* The kernel, the edge table and the run's sizes; a run whose patches or
 * cells cannot be had, refused. */
static pk_status plan_run(ex_run *r) {
    pk_context *ctx = r->ctx;
    pk_status st;
    if ((st = features_kernel(ctx, r->opts, &r->backend, &r->kernel)) != PK_OK ||
        (st = pk_edge_table_build(ctx, r->bins, &r->table)) != PK_OK) {
        sum_nothing(r);
        return st;
    }
    const size_t n_bins = r->n_bins = r->bins->n_bins;
    r->n_slots = (size_t)r->table.n_slots;
    r->weighted = r->ro.weights_data || r->ro.weights_random;
    r->weighted_path = r->weighted || r->ro.mean_theta;
    const int n_patches = r->n_patches = r->ro.jackknife >= 2 ? r->ro.jackknife : 1;
    /* cells per side: the jackknife patches; without them, under
     * n_parts > 1, blocks of objects in file order, so that the parts
     * have counts to share */
    const int n_cells_side = r->cats.n_cells_side = n_patches > 1    ? n_patches
                                                    : r->n_parts > 1 ? count_blocks(r->n_parts)
                                                                     : 1;
    r->n_cell_pairs = (size_t)n_cells_side * (size_t)n_cells_side;
    if (n_patches > 1 && (size_t)n_patches > r->random->n) {
        pk_edge_table_free(&r->table);
        sum_nothing(r);
        return pk_fail(ctx, PK_ERR_INVALID, "jackknife: %d patches need at least %d random objects (have %zu)",
                       n_patches, n_patches, r->random->n);
    }
    /* the cells' weighted and separation sums: for weights, mean
     * separations or an RR given in (whose weighted cells come with it) */
    r->need_wt = r->weighted_path || r->rr_in != NULL;
    if (n_patches > 1) {
        /* the K^2 patch-pair cells, 24 bytes a bin each for the three
         * counts, 48 more for six sums where they are kept: refused up
         * front when they cannot fit */
        double need = (r->need_wt ? 72.0 : 24.0) * (double)r->n_cell_pairs * (double)n_bins,
               have = pk_host_memory_bytes();
        if (have > 0 && need > 0.5 * have) {
            pk_edge_table_free(&r->table);
            sum_nothing(r);
            return pk_fail(ctx, PK_ERR_INVALID,
                           "jackknife K = %d with %zu bins: the K^2 patch-pair cells take %.1f GB, more than half "
                           "of this machine's %.1f GB of memory; use fewer patches or bins",
                           n_patches, n_bins, need / 1e9, have / 1e9);
        }
    }
    return PK_OK;
}

/* The outputs' arrays, one count's slots and the cells of the three counts. */
static pk_status alloc_cells(ex_run *r) {
    pk_angcorr_result *out = r->out;
    pk_angcorr_extras *extras = r->extras;
    const size_t n_bins = r->n_bins, n_slots = r->n_slots, n_cell_pairs = r->n_cell_pairs;
    out->n_bins = n_bins;
    out->n_data = r->data->n;
    out->n_random = r->random->n;
    out->estimator = r->estimator;
    out->dd = calloc(n_bins, sizeof(uint64_t));
    out->dr = calloc(n_bins, sizeof(uint64_t));
    out->rr = calloc(n_bins, sizeof(uint64_t));
    out->omega = calloc(n_bins, sizeof(double));
    extras->n_bins = n_bins;
    extras->weighted = r->weighted;
    extras->sum_w_data = weight_total(r->ro.weights_data, r->data->n);
    extras->sum_w_random = weight_total(r->ro.weights_random, r->random->n);
    count_out co = {malloc(n_slots * sizeof(uint64_t)), r->weighted_path ? malloc(n_slots * sizeof(double)) : NULL,
                    r->ro.mean_theta ? malloc(n_slots * sizeof(double)) : NULL};
    r->co = co;
    int failed = !out->dd || !out->dr || !out->rr || !out->omega || !co.slots || (r->weighted_path && !co.wslots) ||
                 (r->ro.mean_theta && !co.tslots);
    /* the three counts' cells one after another, so that the parts sum
     * them in two calls */
    r->all_c = failed ? NULL : calloc(3 * n_cell_pairs * n_bins + 12, sizeof(uint64_t));
    r->all_wt = failed || !r->need_wt ? NULL : calloc(6 * n_cell_pairs * n_bins, sizeof(double));
    failed = failed || !r->all_c || (r->need_wt && !r->all_wt);
    for (int kind = 0; kind < N_COUNT_KINDS && !failed; kind++) {
        r->cells[kind].c = r->all_c + (size_t)kind * n_cell_pairs * n_bins;
        /* NULL: neither written nor read */
        r->cells[kind].w = r->all_wt ? r->all_wt + (size_t)kind * n_cell_pairs * n_bins : NULL;
        r->cells[kind].t = r->all_wt ? r->all_wt + (size_t)(3 + kind) * n_cell_pairs * n_bins : NULL;
    }
    return failed ? pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory") : PK_OK;
}

/* The catalogs cut into cells: the jackknife patches, or blocks of objects
 * in file order; none with one cell a side. */
static pk_status make_patches(ex_run *r) {
    pk_context *ctx = r->ctx;
    const pk_catalog *data = r->data, *random = r->random;
    const int n_patches = r->n_patches, n_cells_side = r->cats.n_cells_side;
    if (n_cells_side == 1) return PK_OK;
    pk_status st = PK_OK;
    r->patch_d = malloc(data->n * sizeof(int32_t));
    r->patch_r = malloc(random->n * sizeof(int32_t));
    r->cats.data_patches = calloc((size_t)n_cells_side, sizeof(patch_cat));
    r->cats.random_patches = calloc((size_t)n_cells_side, sizeof(patch_cat));
    if (!r->patch_d || !r->patch_r || !r->cats.data_patches || !r->cats.random_patches)
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    if (st == PK_OK && n_patches > 1) st = patches_of(ctx, random, n_patches, data, r->patch_d, random, r->patch_r);
    if (st == PK_OK && n_patches == 1) {
        for (size_t i = 0; i < data->n; i++) r->patch_d[i] = (int32_t)((uint64_t)i * (uint64_t)n_cells_side / data->n);
        for (size_t i = 0; i < random->n; i++)
            r->patch_r[i] = (int32_t)((uint64_t)i * (uint64_t)n_cells_side / random->n);
    }
    if (st == PK_OK) st = split_patches(ctx, data, r->ro.weights_data, r->patch_d, n_cells_side, r->cats.data_patches);
    if (st == PK_OK)
        st = split_patches(ctx, random, r->ro.weights_random, r->patch_r, n_cells_side, r->cats.random_patches);
    return st;
}

/* The counts, patch pair by patch pair (one pair of "patches" without
 * jackknife). Autocorrelations: (p, p) as an autocorrelation, p < q as a
 * cross count that stands for (q, p) too. Part `part` makes the tasks
 * assign_parts gives it. */
static pk_status build_tasks(ex_run *r) {
    const int n_cells_side = r->cats.n_cells_side;
    const size_t n_cell_pairs = r->n_cell_pairs;
    r->tasks = malloc(((r->rr_in ? 1 : 2) * n_cell_pairs + n_cell_pairs + 1) * sizeof(count_task));
    if (!r->tasks) return pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
    for (int kind = 0; kind < (r->rr_in ? COUNT_RR : N_COUNT_KINDS); kind++) {
        const int autocorr = is_autocorr(kind);
        for (int p = 0; p < n_cells_side; p++)
            for (int q = autocorr ? p : 0; q < n_cells_side; q++) {
                count_task t = {kind, p, q, 0, 0};
                const pk_catalog *a, *b;
                const double *wa, *wb;
                task_catalogs(&r->cats, &t, &a, &wa, &b, &wb);
                size_t na = a->n, nb = b->n;
                if (na == 0 || nb == 0) continue;
                t.work = autocorr && p == q ? 0.5 * (double)na * (double)na : (double)na * (double)nb;
                r->tasks[r->n_tasks++] = t;
            }
    }
    pk_status st = r->n_parts > 1 ? assign_parts(r->ctx, r->tasks, r->n_tasks, r->n_parts) : PK_OK;
    for (size_t i = 0; i < r->n_tasks; i++)
        if (r->tasks[i].part == r->part) r->w_all += r->tasks[i].work;
    return st;
}

/* With the backend left to pairkit and CUDA chosen, a patch pair of few
 * pairs is counted by the best CPU kernel instead (jackknife K = 300
 * over 3,000 x 5,000 objects on an H200 machine: 29.6 s all on the GPU,
 * 1.0 s all on its 16 cores). Counts are exact either way. */
static void choose_small_kernel(ex_run *r) {
    const pk_angcorr_options *opts = r->opts;
    r->small_kernel = -1;
    r->small_limit = (double)SMALL_TASK_PAIRS_A_THREAD * (double)pk_thread_count(r->ctx);
    if (r->small_limit < 1048576.0) r->small_limit = 1048576.0;
    if (r->backend != PK_BACKEND_CPU && r->cats.n_cells_side > 1 &&
        (!opts || (opts->backend == PK_BACKEND_AUTO && opts->kernel == PK_ANGCORR_KERNEL_BEST))) {
        pk_angcorr_options cpu_opts = {PK_BACKEND_CPU, PK_ANGCORR_KERNEL_BEST};
        pk_backend cpu_backend;
        int cpu_kernel;
        if (pk_angcorr_choose_kernel(r->ctx, &cpu_opts, &cpu_backend, &cpu_kernel) == PK_OK)
            r->small_kernel = cpu_kernel;
    }
}

/* Whether a count of this work is a small one, for the CPU. */
static int small_on_cpu(const ex_run *r, double work) {
    return r->small_kernel >= 0 && work < r->small_limit;
}

/* With the backend left to pairkit on a GPU, the GPU and the CPU's
 * threads count the patch pairs at once (unweighted, unpruned counts
 * many at a time on the GPU, weighted or pruned ones one at a time);
 * otherwise the small counts on the CPU, one thread each. */
static pk_status count_on_threads(ex_run *r, int n_threads) {
    int share = 0, share_one = 0;
#ifdef PK_HAVE_CUDA
    share = r->backend == PK_BACKEND_CUDA && r->small_kernel >= 0 && r->cats.n_cells_side > 1 && n_threads > 1;
    /* the device counts these one at a time */
    share_one = share && (r->weighted_path || r->ro.prune == PK_PRUNE_ON);
#endif
    shared_counts sc = {.ctx = r->ctx,
                        .share = share,
                        .share_one = share_one,
                        .cpu_kernel = r->backend == PK_BACKEND_CPU ? r->kernel : r->small_kernel,
                        .gpu_kernel = r->kernel,
                        .cpu_max = r->backend == PK_BACKEND_CPU ? (double)INFINITY : r->small_limit,
                        .n_threads = n_threads,
                        .part = r->part,
                        .cats = &r->cats,
                        .bins = r->bins,
                        .table = &r->table,
                        .n_slots = r->n_slots,
                        .n_bins = r->n_bins,
                        .weighted_path = r->weighted_path,
                        .cells = r->cells,
                        .tasks = r->tasks,
                        .n_tasks = r->n_tasks,
                        .counted = r->counted,
                        .stats_of = r->stats_of,
                        .gpu_counted = r->gpu_counted,
                        .done = r->done,
                        .w_all = r->w_all};
    pk_status st = count_shared(&sc);
    r->done = sc.done;
    return st;
}

#ifdef PK_HAVE_CUDA
/* By task: whether the CPU counts it (a small count), not the GPU. */
static uint8_t *tasks_on_cpu(const ex_run *r) {
    uint8_t *on_cpu = calloc(r->n_tasks + 1, 1);
    for (size_t i = 0; on_cpu && i < r->n_tasks; i++) on_cpu[i] = (uint8_t)small_on_cpu(r, r->tasks[i].work);
    return on_cpu;
}

/* Unweighted, unpruned patch pairs on the GPU, each count type's at once
 * through a session over the patches (gpu_patch_pairs). */
static pk_status gpu_unweighted_counts(ex_run *r) {
    pk_context *ctx = r->ctx;
    const int n_cells_side = r->cats.n_cells_side;
    pk_status st = PK_OK;
    uint8_t *on_cpu = tasks_on_cpu(r);
    const pk_catalog **dcat = malloc((size_t)n_cells_side * sizeof(*dcat)),
                     **rcat = malloc((size_t)n_cells_side * sizeof(*rcat));
    if (!on_cpu || !dcat || !rcat) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    size_t left = 0; /* counts the GPU may take at once */
    for (size_t i = 0; on_cpu && i < r->n_tasks; i++)
        left += r->tasks[i].part == r->part && !r->counted[i] && !on_cpu[i];
    pk_cuda_pairs *sess = NULL;
    for (int p = 0; st == PK_OK && p < n_cells_side; p++)
        dcat[p] = &r->cats.data_patches[p].cat, rcat[p] = &r->cats.random_patches[p].cat;
    if (st == PK_OK && left >= 2) {
        pk_clear(ctx);
        st = pk_angcorr_cuda_pairs_open(ctx, r->kernel, dcat, n_cells_side, rcat, n_cells_side, r->bins, &r->table,
                                        &sess);
        if (st == PK_ERR_UNSUPPORTED && !ctx->message[0]) st = PK_OK; /* one at a time: count_one_by_one */
    }
    for (int kind = 0; kind < N_COUNT_KINDS && st == PK_OK && sess; kind++)
        st = gpu_patch_pairs(ctx, sess, r->kernel, kind, &r->cats, r->tasks, r->n_tasks, r->part, on_cpu, r->counted,
                             r->n_slots, r->n_bins, r->cells, r->stats_of[kind], &r->gpu_counted[kind], &r->done,
                             r->w_all);
    pk_angcorr_cuda_pairs_close(sess, st != PK_OK);
    free(on_cpu), free(dcat), free(rcat);
    return st;
}

/* Weighted, pruned or mean-separation patch pairs on the GPU: in batches
 * (gpu_feature_counts). */
static pk_status gpu_weighted_counts(ex_run *r) {
    uint8_t *on_cpu = tasks_on_cpu(r);
    if (!on_cpu) return pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
    pk_status st = gpu_feature_counts(r->ctx, r->kernel, &r->cats, r->bins, &r->table, r->tasks, r->n_tasks, r->part,
                                      on_cpu, r->counted, r->n_slots, r->n_bins, r->cells, r->stats_of, r->gpu_counted,
                                      r->weighted_path, &r->done, r->w_all);
    free(on_cpu);
    return st;
}
#endif

/* Whatever of this part is left uncounted, one count at a time, each on
 * all the threads (small counts on the CPU where small_kernel says so). */
static pk_status count_one_by_one(ex_run *r) {
    pk_context *ctx = r->ctx;
    const pk_angcorr_run_options *ro = &r->ro;
    pk_status st = PK_OK;
    for (size_t i = 0; i < r->n_tasks && st == PK_OK; i++) {
        const count_task *t = &r->tasks[i];
        if (t->part != r->part || r->counted[i]) continue;
        const enum count_kind kind = t->kind;
        const int p = t->p, q = t->q, autocorr = is_autocorr(kind), as_auto = autocorr && p == q;
        const pk_catalog *a, *b;
        const double *wa, *wb;
        task_catalogs(&r->cats, t, &a, &wa, &b, &wb);
        double work = t->work;
        pk_progress progress;
        pk_progress_begin(&progress, ctx, work, r->done / r->w_all, work / r->w_all);
        r->done += work;
        pk_pair_stats s;
        int on_cpu = small_on_cpu(r, work);
        st = count_slots_ex(ctx, on_cpu ? PK_BACKEND_CPU : r->backend, on_cpu ? r->small_kernel : r->kernel, a, wa,
                            as_auto ? NULL : b, as_auto ? NULL : wb, r->bins, &r->table, ro->prune, ro->mean_theta,
                            &r->co, &s, &progress);
        if (st) break;
        pk_pair_stats *kind_stats = r->stats_of[kind];
        add_stats(kind_stats, &s, autocorr && p != q);
        if (!on_cpu || !r->gpu_counted[kind]) kind_stats->kernel = s.kernel; /* the device's where it counted */
        r->gpu_counted[kind] |= !on_cpu;
        store_cells(&r->cells[kind], autocorr, p, q, r->cats.n_cells_side, r->n_bins, &r->co);
    }
    return st;
}

/* This part's counts: many small ones at once on the threads (and the
 * GPU), the GPU's many at a time, then the rest one by one. */
static pk_status count_tasks(ex_run *r) {
    pk_status st = PK_OK;
    choose_small_kernel(r);
    int n_threads = pk_thread_count(r->ctx);
    r->counted = calloc(r->n_tasks + 1, 1);
    if (!r->counted) st = pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
    if (st == PK_OK && n_threads > 1 && (r->backend == PK_BACKEND_CPU || r->small_kernel >= 0))
        st = count_on_threads(r, n_threads);
#ifdef PK_HAVE_CUDA
    if (st == PK_OK && r->backend == PK_BACKEND_CUDA && r->cats.n_cells_side > 1) {
        if (!r->weighted_path && r->ro.prune != PK_PRUNE_ON) st = gpu_unweighted_counts(r);
        else st = gpu_weighted_counts(r);
    }
#endif
    if (st == PK_OK) st = count_one_by_one(r);
    return st;
}

/* The tasks freed, and the kernel's id set where this part made none of a count. */
static void finish_counts(ex_run *r) {
    free(r->counted);
    free(r->tasks);
    r->counted = NULL, r->tasks = NULL, r->n_tasks = 0;
    for (int kind = 0; kind < N_COUNT_KINDS; kind++)
        for (int u = 0; u < N_COUNT_KINDS && !r->stats_of[kind]->kernel; u++)
            r->stats_of[kind]->kernel = r->stats_of[u]->kernel;
}

/* The parts' cells and pair totals summed: each cell was made by one part
 * and is zero in the others, so its sum is exact. Every part calls sum
 * once, failed (st) or not. */
static pk_status sum_parts(ex_run *r, pk_status st) {
    const size_t n_cells = r->n_cell_pairs * r->n_bins;
    pk_pair_stats **stats_of = r->stats_of;
    uint64_t *pairs = st == PK_OK ? r->all_c + 3 * n_cells : NULL;
    for (int kind = 0; kind < N_COUNT_KINDS && pairs; kind++) {
        pairs[4 * kind] = stats_of[kind]->pairs_total, pairs[4 * kind + 1] = stats_of[kind]->pairs_in_range;
        pairs[4 * kind + 2] = stats_of[kind]->pairs_visited, pairs[4 * kind + 3] = stats_of[kind]->pairs_fp64;
    }
    /* an unweighted run's weighted and separation cells are all zero:
     * not sent (every part runs alike) */
    double no_sums = 0;
    int failed_parts = st == PK_OK ? r->sum(r->sum_user, 1, r->all_c, 3 * n_cells + 12,
                                            r->weighted_path ? r->all_wt : &no_sums, r->weighted_path ? 6 * n_cells : 0)
                                   : r->sum(r->sum_user, 0, NULL, 0, NULL, 0);
    if (failed_parts && st == PK_OK)
        st = pk_fail(r->ctx, PK_ERR_INTERNAL, "another part of the run failed, or the parts could not be summed");
    for (int kind = 0; kind < N_COUNT_KINDS && st == PK_OK; kind++) {
        stats_of[kind]->pairs_total = pairs[4 * kind], stats_of[kind]->pairs_in_range = pairs[4 * kind + 1];
        stats_of[kind]->pairs_visited = pairs[4 * kind + 2], stats_of[kind]->pairs_fp64 = pairs[4 * kind + 3];
    }
    return st;
}

/* RR given: its cells as they were counted (one cell: into the first block's). */
static void use_rr_given(ex_run *r) {
    size_t given = (size_t)r->n_patches * (size_t)r->n_patches * r->n_bins;
    memcpy(r->cells[COUNT_RR].c, r->rr_in->counts, given * sizeof(uint64_t));
    memcpy(r->cells[COUNT_RR].w, r->rr_in->weighted, given * sizeof(double));
    if (r->ro.mean_theta) memcpy(r->cells[COUNT_RR].t, r->rr_in->theta_sum, given * sizeof(double));
}

/* The cells summed into the totals (counts, weighted sums, mean
 * separations), and omega from them. */
static pk_status totals_and_estimate(ex_run *r) {
    pk_angcorr_result *out = r->out;
    pk_angcorr_extras *extras = r->extras;
    const size_t n = r->n_bins, n_cell_pairs = r->n_cell_pairs;
    const patch_counts *cells = r->cells;
    pk_status st = PK_OK;
    uint64_t *dst[3] = {out->dd, out->dr, out->rr};
    double *wsum[3], *tsum[3];
    for (int c = 0; c < 3; c++) {
        wsum[c] = calloc(n, sizeof(double));
        tsum[c] = calloc(n, sizeof(double));
    }
    if (!wsum[0] || !wsum[1] || !wsum[2] || !tsum[0] || !tsum[1] || !tsum[2])
        st = pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
    for (int c = 0; c < 3 && st == PK_OK; c++)
        for (size_t cell = 0; cell < n_cell_pairs; cell++)
            for (size_t b_ = 0; b_ < n; b_++) {
                dst[c][b_] += cells[c].c[cell * n + b_];
                if (r->weighted_path) { /* else neither is read, nor were they written */
                    wsum[c][b_] += cells[c].w[cell * n + b_];
                    tsum[c][b_] += cells[c].t[cell * n + b_];
                }
            }
    if (st == PK_OK) {
        if (r->weighted) {
            extras->dd_w = wsum[0], extras->dr_w = wsum[1], extras->rr_w = wsum[2];
            wsum[0] = wsum[1] = wsum[2] = NULL;
            pk_estimate_weighted(r->estimator, extras->sum_w_data, extras->sum_w_random, n, extras->dd_w, extras->dr_w,
                                 extras->rr_w, out->omega);
        } else {
            pk_estimate(r->estimator, r->data->n, r->random->n, n, out->dd, out->dr, out->rr, out->omega);
        }
        if (r->ro.mean_theta) {
            double **means[3] = {&extras->theta_mean_dd, &extras->theta_mean_dr, &extras->theta_mean_rr};
            for (int c = 0; c < 3; c++) {
                const double *ws = r->weighted ? (c == 0   ? extras->dd_w
                                                  : c == 1 ? extras->dr_w
                                                           : extras->rr_w)
                                               : wsum[c];
                *means[c] = malloc(n * sizeof(double));
                if (!*means[c]) {
                    st = pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
                    break;
                }
                for (size_t b_ = 0; b_ < n; b_++) (*means[c])[b_] = ws[b_] != 0 ? tsum[c][b_] / ws[b_] : (double)NAN;
            }
        }
    }
    for (int c = 0; c < 3; c++) {
        free(wsum[c]);
        free(tsum[c]);
    }
    return st;
}

/* The weighted sums of each patch's row and column of cells, and of all
 * cells, by count kind ([n_patches][n_bins], [n_patches][n_bins], [n_bins]). */
typedef struct patch_wsums {
    double *row_wsum[3], *col_wsum[3], *total_wsum[3];
} patch_wsums;

/* The weighted sums of each patch's row and column of cells, made once
 * (the counts, exact integers, are subtracted cell by cell): all K
 * leave-one-out sums cost O(K^2 n), not O(K^3 n). */
static pk_status sum_patch_weights(ex_run *r, patch_wsums *ws) {
    const int n_patches = r->n_patches;
    const size_t n = r->n_bins;
    pk_status st = PK_OK;
    for (int c = 0; c < 3 && st == PK_OK; c++) {
        double *row_wsum = ws->row_wsum[c] = calloc((size_t)n_patches * n, sizeof(double));
        double *col_wsum = ws->col_wsum[c] = calloc((size_t)n_patches * n, sizeof(double));
        double *total_wsum = ws->total_wsum[c] = calloc(n, sizeof(double));
        if (!row_wsum || !col_wsum || !total_wsum) st = pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
        for (int p = 0; p < n_patches && st == PK_OK; p++)
            for (int q = 0; q < n_patches; q++) {
                const double *cell = r->cells[c].w + ((size_t)p * (size_t)n_patches + (size_t)q) * n;
                for (size_t b_ = 0; b_ < n; b_++) {
                    row_wsum[(size_t)p * n + b_] += cell[b_];
                    col_wsum[(size_t)q * n + b_] += cell[b_];
                }
            }
        for (int p = 0; p < n_patches && st == PK_OK; p++)
            for (size_t b_ = 0; b_ < n; b_++) total_wsum[b_] += row_wsum[(size_t)p * n + b_];
    }
    return st;
}

static void patch_wsums_free(patch_wsums *ws) {
    for (int c = 0; c < 3; c++) {
        free(ws->row_wsum[c]);
        free(ws->col_wsum[c]);
        free(ws->total_wsum[c]);
    }
}

/* omega without patch j: total - row j - column j + (j, j), of the counts
 * (lc) or of the weighted sums (lw, from ws), into omega_jk's row j. */
static void leave_one_out(ex_run *r, int j, uint64_t **lc, double **lw, const patch_wsums *ws) {
    pk_angcorr_result *out = r->out;
    pk_angcorr_extras *extras = r->extras;
    const int n_patches = r->n_patches;
    const size_t n = r->n_bins;
    for (int c = 0; c < 3; c++) {
        const uint64_t *total = c == 0 ? out->dd : c == 1 ? out->dr : out->rr;
        /* cell by cell along the bins (the cells' own order):
         * exact integers, so the order of subtraction is free */
        memcpy(lc[c], total, n * sizeof(uint64_t));
        for (int q = 0; q < n_patches; q++) {
            const uint64_t *row = r->cells[c].c + ((size_t)j * (size_t)n_patches + (size_t)q) * n;
            const uint64_t *col = r->cells[c].c + ((size_t)q * (size_t)n_patches + (size_t)j) * n;
            for (size_t b_ = 0; b_ < n; b_++) lc[c][b_] -= row[b_] + (q == j ? 0 : col[b_]);
        }
        for (size_t b_ = 0; b_ < n; b_++) {
            if (r->weighted) {
                double diag = r->cells[c].w[((size_t)j * (size_t)n_patches + (size_t)j) * n + b_];
                lw[c][b_] = ws->total_wsum[c][b_] - ws->row_wsum[c][(size_t)j * n + b_] -
                            ws->col_wsum[c][(size_t)j * n + b_] + diag;
            }
        }
    }
    const patch_cat *data_patches = r->cats.data_patches, *random_patches = r->cats.random_patches;
    double *w_j = extras->omega_jk + (size_t)j * n;
    if (r->weighted)
        pk_estimate_weighted(r->estimator, extras->sum_w_data - data_patches[j].w_total,
                             extras->sum_w_random - random_patches[j].w_total, n, lw[0], lw[1], lw[2], w_j);
    else
        pk_estimate(r->estimator, r->data->n - data_patches[j].cat.n, r->random->n - random_patches[j].cat.n, n, lc[0],
                    lc[1], lc[2], w_j);
}

/* The jackknife covariance of the leave-one-out omegas, (K - 1) / K times
 * the sum of their deviations' products, and the errors, its diagonal's
 * roots. */
static pk_status covariance(ex_run *r, pk_progress *progress) {
    pk_context *ctx = r->ctx;
    pk_angcorr_extras *extras = r->extras;
    const int n_patches = r->n_patches;
    const size_t n = r->n_bins;
    pk_status st = PK_OK;
    double f = (double)(n_patches - 1) / (double)n_patches;
    double *mean = calloc(n, sizeof(double));
    if (!mean) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (size_t x = 0; st == PK_OK && x < n; x++) {
        for (int j = 0; j < n_patches; j++) mean[x] += extras->omega_jk[(size_t)j * n + x];
        mean[x] /= n_patches;
    }
    /* cov(x, y) = f sum_j dev_j(x) dev_j(y), j in order, each
     * product and sum as written (no contraction): row x from
     * y = x on, along y so that it vectorises, rows shared among
     * the threads; the lower triangle copied (cov(y, x) is the
     * same sum of the same products) */
    double *dev = st == PK_OK ? malloc((size_t)n_patches * n * sizeof(double)) : NULL;
    if (st == PK_OK && !dev) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (int j = 0; dev && j < n_patches; j++)
        for (size_t x = 0; x < n; x++) dev[(size_t)j * n + x] = extras->omega_jk[(size_t)j * n + x] - mean[x];
    int stop = 0, no_memory = 0;
    double *cov = extras->omega_cov;
#pragma omp parallel num_threads(pk_thread_count(ctx)) if (dev && n >= 64)
    {
        /* a row summed in the thread's own buffer, then written
         * once (its pages faulted in by one write each) */
        double *acc = dev ? malloc(n * sizeof(double)) : NULL;
        if (dev && !acc) {
#pragma omp atomic write
            no_memory = 1;
        }
        const int owner = pk_thread_num() == 0;
#pragma omp for schedule(dynamic, 8)
        for (size_t x = 0; x < (dev ? n : 0); x++) {
            int stopped;
#pragma omp atomic read
            stopped = stop;
            if (stopped || !acc) continue;
            for (size_t y = x; y < n; y++) acc[y] = 0;
            for (int j = 0; j < n_patches; j++) {
                const double *dj = dev + (size_t)j * n;
                const double dx = dj[x];
                for (size_t y = x; y < n; y++) acc[y] += dx * dj[y];
            }
            double *row = cov + x * n;
            for (size_t y = x; y < n; y++) row[y] = f * acc[y];
            if (pk_progress_add(progress, 0.0, owner)) {
#pragma omp atomic write
                stop = 1;
            }
        }
        free(acc);
    }
    if (st == PK_OK && no_memory) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    if (st == PK_OK && stop) st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
#pragma omp parallel for schedule(dynamic, 16) num_threads(pk_thread_count(ctx)) if (st == PK_OK && n >= 64)
    for (size_t x = 0; x < (st == PK_OK ? n : 0); x++) {
        for (size_t y = 0; y < x; y++) cov[x * n + y] = cov[y * n + x];
        extras->omega_err[x] = sqrt(cov[x * n + x]);
    }
    free(dev);
    free(mean);
    return st;
}

/* The jackknife: omega without each patch in turn, their covariance and
 * the errors. */
static pk_status jackknife_errors(ex_run *r) {
    pk_context *ctx = r->ctx;
    pk_angcorr_extras *extras = r->extras;
    const int n_patches = r->n_patches;
    const size_t n = r->n_bins;
    pk_status st = PK_OK;
    extras->n_patches = (size_t)n_patches;
    extras->omega_jk = malloc((size_t)n_patches * n * sizeof(double));
    extras->omega_cov = calloc(n * n, sizeof(double));
    extras->omega_err = malloc(n * sizeof(double));
    uint64_t *lc[3];
    double *lw[3];
    for (int c = 0; c < 3; c++) {
        lc[c] = malloc(n * sizeof(uint64_t));
        lw[c] = malloc(n * sizeof(double));
    }
    if (!extras->omega_jk || !extras->omega_cov || !extras->omega_err || !lc[0] || !lc[1] || !lc[2] || !lw[0] ||
        !lw[1] || !lw[2])
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    patch_wsums ws;
    memset(&ws, 0, sizeof ws);
    if (r->weighted && st == PK_OK) st = sum_patch_weights(r, &ws);
    pk_progress progress;
    pk_progress_begin(&progress, ctx, (double)n_patches, 1.0, 0.0);
    for (int j = 0; j < n_patches && st == PK_OK; j++) {
        leave_one_out(r, j, lc, lw, &ws);
        if (pk_progress_add(&progress, 1.0, 1)) st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    patch_wsums_free(&ws);
    if (st == PK_OK) st = covariance(r, &progress);
    for (int c = 0; c < 3; c++) {
        free(lc[c]);
        free(lw[c]);
    }
    return st;
}

/* The RR cells, copied out for a later run to take in. */
static pk_status rr_cells_out(ex_run *r) {
    const int n_patches = r->n_patches;
    const size_t n = r->n_bins;
    const patch_counts *rr = &r->cells[COUNT_RR];
    size_t kept = (size_t)n_patches * (size_t)n_patches * n;
    pk_angcorr_rr_cells cells = {n_patches, n, malloc(kept * sizeof(uint64_t)), malloc(kept * sizeof(double)),
                                 r->ro.mean_theta ? malloc(kept * sizeof(double)) : NULL};
    if (!cells.counts || !cells.weighted || (r->ro.mean_theta && !cells.theta_sum)) {
        pk_angcorr_rr_cells_free(&cells);
        return pk_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
    }
    if (r->cats.n_cells_side == n_patches) {
        memcpy(cells.counts, rr->c, kept * sizeof(uint64_t));
        if (r->weighted_path) memcpy(cells.weighted, rr->w, kept * sizeof(double));
        if (cells.theta_sum) memcpy(cells.theta_sum, rr->t, kept * sizeof(double));
    } else { /* blocks without patches: one cell, summed in the order of the totals */
        memset(cells.counts, 0, kept * sizeof(uint64_t));
        memset(cells.weighted, 0, kept * sizeof(double));
        if (cells.theta_sum) memset(cells.theta_sum, 0, kept * sizeof(double));
        for (size_t cell = 0; cell < r->n_cell_pairs; cell++)
            for (size_t b_ = 0; b_ < n; b_++) {
                cells.counts[b_] += rr->c[cell * n + b_];
                if (r->weighted_path) cells.weighted[b_] += rr->w[cell * n + b_];
                if (cells.theta_sum) cells.theta_sum[b_] += rr->t[cell * n + b_];
            }
    }
    /* unweighted: the cells' weighted sums were not written; they
     * are the counts (exact in a double below 2^53, as the sums) */
    if (!r->weighted_path)
        for (size_t i = 0; i < kept; i++) cells.weighted[i] = (double)cells.counts[i];
    *r->rr_out = cells;
    return PK_OK;
}

static void free_run(ex_run *r) {
    const int n_cells_side = r->cats.n_cells_side;
    free(r->all_c);
    free(r->all_wt);
    free(r->co.slots);
    free(r->co.wslots);
    free(r->co.tslots);
    free(r->patch_d);
    free(r->patch_r);
    free_patches(r->cats.data_patches, n_cells_side > 1 ? n_cells_side : 0);
    free_patches(r->cats.random_patches, n_cells_side > 1 ? n_cells_side : 0);
    pk_edge_table_free(&r->table);
}

/* pk_angcorr_run_ex_part; fn: the public function called, for messages. */
static pk_status run_ex_part(const char *fn, pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                             pk_angcorr_sum_fn sum, void *sum_user, const pk_catalog *data, const pk_catalog *random,
                             const pk_bins *bins, pk_estimator estimator, const pk_angcorr_run_options *run,
                             const pk_angcorr_rr_cells *rr_in, pk_angcorr_rr_cells *rr_out, pk_angcorr_result *out,
                             pk_angcorr_extras *extras) {
    pk_context none; /* the counts below look at a context's message and threads: one for a caller without */
    if (!ctx) {
        pk_context_init(&none);
        ctx = &none;
    }
    pk_clear(ctx);
    ex_run r;
    memset(&r, 0, sizeof r);
    r.fn = fn, r.ctx = ctx, r.opts = opts;
    r.part = part, r.n_parts = n_parts, r.sum = sum, r.sum_user = sum_user;
    r.data = data, r.random = random, r.bins = bins, r.estimator = estimator;
    r.rr_in = rr_in, r.rr_out = rr_out, r.out = out, r.extras = extras;
    pk_status st = check_run_args(&r, run);
    if (st) return st;
    r.cats.data = data, r.cats.random = random, r.cats.ro = &r.ro;
    r.stats_of[COUNT_DD] = &out->stats_dd, r.stats_of[COUNT_DR] = &out->stats_dr, r.stats_of[COUNT_RR] = &out->stats_rr;
    /* from here on every part calls sum once, failed or not, so that no
     * part waits for one that stopped */
    if ((st = plan_run(&r)) != PK_OK) return st;
    st = alloc_cells(&r);
    if (st == PK_OK) st = make_patches(&r);
    if (st == PK_OK) st = build_tasks(&r);
    if (st == PK_OK) st = count_tasks(&r);
    finish_counts(&r);
    if (n_parts > 1) st = sum_parts(&r, st);
    if (st == PK_OK && rr_in) use_rr_given(&r);
    if (st == PK_OK) st = totals_and_estimate(&r);
    if (st == PK_OK && r.n_patches > 1) st = jackknife_errors(&r);
    if (st == PK_OK && rr_out) st = rr_cells_out(&r);
    free_run(&r);
    if (st) {
        pk_angcorr_result_free(out);
        pk_angcorr_extras_free(extras);
    }
    return st;
}

pk_status pk_angcorr_run_ex(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                            const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                            const pk_angcorr_run_options *run, pk_angcorr_result *out, pk_angcorr_extras *extras) {
    return run_ex_part(__func__, ctx, opts, 0, 1, NULL, NULL, data, random, bins, estimator, run, NULL, NULL, out,
                       extras);
}

pk_status pk_angcorr_run_ex_rr(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                               const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                               const pk_angcorr_run_options *run, const pk_angcorr_rr_cells *rr_in,
                               pk_angcorr_rr_cells *rr_out, pk_angcorr_result *out, pk_angcorr_extras *extras) {
    return run_ex_part(__func__, ctx, opts, 0, 1, NULL, NULL, data, random, bins, estimator, run, rr_in, rr_out, out,
                       extras);
}

pk_status pk_angcorr_run_ex_part(pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                                 pk_angcorr_sum_fn sum, void *sum_user, const pk_catalog *data,
                                 const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                                 const pk_angcorr_run_options *run, const pk_angcorr_rr_cells *rr_in,
                                 pk_angcorr_rr_cells *rr_out, pk_angcorr_result *out, pk_angcorr_extras *extras) {
    return run_ex_part(__func__, ctx, opts, part, n_parts, sum, sum_user, data, random, bins, estimator, run, rr_in,
                       rr_out, out, extras);
}

/* ---- outputs ------------------------------------------------------------------ */

static void ecsv_column(FILE *fp, const char *name, const char *unit, const char *type, const char *what) {
    fprintf(fp, "# - {name: %s, %s%s%sdatatype: %s, description: '%s'}\n", name, unit ? "unit: " : "", unit ? unit : "",
            unit ? ", " : "", type, what);
}

/* The ECSV 1.0 header (YAML in comment lines) of the columns below: their
 * units, types and the run's metadata, for astropy's Table.read. */
static void ecsv_header(FILE *fp, const pk_angcorr_result *result, int means, int errs, int wts) {
    fprintf(fp, "# %%ECSV 1.0\n# ---\n# delimiter: ','\n# datatype:\n");
    ecsv_column(fp, "theta_lo_deg", "deg", "float64", "lower edge of the bin (counted from it)");
    ecsv_column(fp, "theta_hi_deg", "deg", "float64", "upper edge of the bin (not counted)");
    if (means) {
        ecsv_column(fp, "theta_mean_dd_deg", "deg", "float64", "mean separation of the DD pairs in the bin");
        ecsv_column(fp, "theta_mean_dr_deg", "deg", "float64", "mean separation of the DR pairs in the bin");
        ecsv_column(fp, "theta_mean_rr_deg", "deg", "float64", "mean separation of the RR pairs in the bin");
    }
    ecsv_column(fp, "omega", NULL, "float64", "w(theta) by the estimator in meta");
    if (errs) ecsv_column(fp, "omega_err", NULL, "float64", "jackknife error of omega");
    ecsv_column(fp, "dd", NULL, "uint64", "data-data ordered pairs, self-pairs included");
    ecsv_column(fp, "dr", NULL, "uint64", "data-random pairs");
    ecsv_column(fp, "rr", NULL, "uint64", "random-random ordered pairs, self-pairs included");
    if (wts) {
        ecsv_column(fp, "dd_weighted", NULL, "float64", "sum of w_i w_j over the DD pairs");
        ecsv_column(fp, "dr_weighted", NULL, "float64", "sum of w_i w_j over the DR pairs");
        ecsv_column(fp, "rr_weighted", NULL, "float64", "sum of w_i w_j over the RR pairs");
    }
    fprintf(fp,
            "# meta: !!omap\n# - {estimator: %s}\n# - {n_data: %llu}\n# - {n_random: %llu}\n"
            "# - {pairs: 'every ordered pair, self-pairs included; exact bins'}\n# schema: astropy-2.0\n",
            pk_estimator_name(result->estimator), (unsigned long long)result->n_data,
            (unsigned long long)result->n_random);
}

static pk_status write_table(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                             const pk_angcorr_extras *extras, const pk_bins *bins, int ecsv) {
    pk_clear(ctx);
    pk_status st =
        pk_angcorr_result_writable(ctx, ecsv ? "pk_angcorr_write_ecsv" : "pk_angcorr_write_csv_ex", path, result, bins);
    if (st) return st;
    if (extras && extras->n_bins && extras->n_bins != bins->n_bins)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the extras have %zu bins, the bins given %zu", path, extras->n_bins,
                       bins->n_bins);
    pk_atomic_file f;
    if ((st = pk_atomic_open(ctx, &f, path)) != PK_OK) return st;
    int means = extras && extras->theta_mean_dd, errs = extras && extras->omega_err, wts = extras && extras->dd_w;
    if (ecsv) ecsv_header(f.fp, result, means, errs, wts);
    fprintf(f.fp, "theta_lo_deg,theta_hi_deg%s,omega%s,dd,dr,rr%s\n",
            means ? ",theta_mean_dd_deg,theta_mean_dr_deg,theta_mean_rr_deg" : "", errs ? ",omega_err" : "",
            wts ? ",dd_weighted,dr_weighted,rr_weighted" : "");
    for (size_t k = 0; k < result->n_bins; k++) {
        fprintf(f.fp, "%.15g,%.15g", pk_rad_to_deg(bins->edges[k]), pk_rad_to_deg(bins->edges[k + 1]));
        if (means)
            fprintf(f.fp, ",%.17g,%.17g,%.17g", pk_plain_nan(pk_rad_to_deg(extras->theta_mean_dd[k])),
                    pk_plain_nan(pk_rad_to_deg(extras->theta_mean_dr[k])),
                    pk_plain_nan(pk_rad_to_deg(extras->theta_mean_rr[k])));
        fprintf(f.fp, ",%.17g", pk_plain_nan(result->omega[k]));
        if (errs) fprintf(f.fp, ",%.17g", pk_plain_nan(extras->omega_err[k]));
        fprintf(f.fp, ",%llu,%llu,%llu", (unsigned long long)result->dd[k], (unsigned long long)result->dr[k],
                (unsigned long long)result->rr[k]);
        if (wts)
            fprintf(f.fp, ",%.17g,%.17g,%.17g", pk_plain_nan(extras->dd_w[k]), pk_plain_nan(extras->dr_w[k]),
                    pk_plain_nan(extras->rr_w[k]));
        fprintf(f.fp, "\n");
    }
    return pk_atomic_commit(ctx, &f);
}

pk_status pk_angcorr_write_csv_ex(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                  const pk_angcorr_extras *extras, const pk_bins *bins) {
    return write_table(ctx, path, result, extras, bins, 0);
}

pk_status pk_angcorr_write_ecsv(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                const pk_angcorr_extras *extras, const pk_bins *bins) {
    return write_table(ctx, path, result, extras, bins, 1);
}

pk_status pk_angcorr_write_covariance(pk_context *ctx, const char *path, const pk_angcorr_extras *extras,
                                      const pk_bins *bins) {
    pk_clear(ctx);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_write_covariance: path is NULL");
    pk_status st = pk_bins_check(ctx, bins);
    if (st) return st;
    if (!extras || !extras->omega_cov)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: no jackknife covariance to write", path);
    if (extras->n_bins != bins->n_bins)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the extras have %zu bins, the bins given %zu", path, extras->n_bins,
                       bins->n_bins);
    pk_atomic_file f;
    if ((st = pk_atomic_open(ctx, &f, path)) != PK_OK) return st;
    size_t n = extras->n_bins;
    fprintf(f.fp, "theta_lo_deg,theta_hi_deg");
    for (size_t k = 0; k < n; k++) fprintf(f.fp, ",bin_%zu", k);
    fprintf(f.fp, "\n");
    /* rows formatted by the threads, 256 at a time, and written in order
     * (n^2 numbers: 2 million with the default bins, ~0.25 s of one core in
     * a profile of a K = 100 run on the H200 machine) */
    const size_t block = 256, row_max = 2 * 32 + n * 32 + 2; /* "%.17g" takes at most 24 characters */
    char *buf = malloc(block * row_max);
    size_t *len = malloc(block * sizeof(size_t));
    if (!buf || !len) {
        free(buf), free(len);
        pk_atomic_abort(&f);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    for (size_t x0 = 0; x0 < n; x0 += block) {
        const size_t rows = n - x0 < block ? n - x0 : block;
#pragma omp parallel for schedule(dynamic, 4) num_threads(pk_thread_count(ctx)) if (rows * n >= 65536)
        for (size_t r = 0; r < rows; r++) {
            const size_t x = x0 + r;
            char *p = buf + r * row_max, *end = p + row_max;
            p += snprintf(p, (size_t)(end - p), "%.15g,%.15g", pk_rad_to_deg(bins->edges[x]),
                          pk_rad_to_deg(bins->edges[x + 1]));
            for (size_t y = 0; y < n; y++)
                p += snprintf(p, (size_t)(end - p), ",%.17g", pk_plain_nan(extras->omega_cov[x * n + y]));
            *p++ = '\n';
            len[r] = (size_t)(p - (buf + r * row_max));
        }
        for (size_t r = 0; r < rows; r++) fwrite(buf + r * row_max, 1, len[r], f.fp);
    }
    free(buf), free(len);
    return pk_atomic_commit(ctx, &f);
}

/* ---- edge files ----------------------------------------------------------------- */

pk_status pk_bins_read_edges(pk_context *ctx, const char *path, pk_bins *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_read_edges: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_bins_read_edges: path is NULL");
    char *text;
    size_t size;
    pk_status st = pk_read_file(ctx, path, &text, &size);
    if (st) return st;
    size_t cap = 64, n = 0, line = 1;
    double *edges = malloc(cap * sizeof(double));
    if (!edges) {
        free(text);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    const char *nul = memchr(text, '\0', size);
    if (nul) { /* the parse below would stop there, quietly dropping what follows */
        size_t nul_line = 1;
        for (const char *q = text; q < nul; q++) nul_line += *q == '\n';
        free(text), free(edges);
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: a NUL byte (not a text file of edges)", path, nul_line);
    }
    char *p = text;
    if (size >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3; /* a UTF-8 byte order mark, as catalogs may start with */
    while (*p && st == PK_OK) {
        if (*p == '\n') {
            line++;
            p++;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == ',') {
            p++;
            continue;
        }
        if (*p == '#') {
            while (*p && *p != '\n') p++;
            continue;
        }
        char *end;
        errno = 0;
        double v = pk_strtod(p, &end);
        int hex = 0; /* strtod reads hexadecimal floats; the catalogs refuse them, and so do edge files */
        for (const char *q = p; q < end; q++) hex |= *q == 'x' || *q == 'X';
        if (end == p || hex || (*end && !isspace((unsigned char)*end) && *end != ',' && *end != '#')) {
            char *tok_end = p;
            while (*tok_end && !isspace((unsigned char)*tok_end)) tok_end++;
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: '%.*s' is not an edge (degrees)", path, line,
                         (int)(tok_end - p < 40 ? tok_end - p : 40), p);
            break;
        }
        if (!isfinite(v) || v < 0 || v > 180) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: edge %.10g is not an angle in [0, 180] degrees", path, line, v);
            break;
        }
        if (n == cap) {
            double *e2 = realloc(edges, 2 * cap * sizeof(double));
            if (!e2) {
                st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
                break;
            }
            edges = e2;
            cap *= 2;
        }
        double rad = pk_units_to_rad(v, PK_UNITS_DEG);
        if (n > 0 && !(rad > edges[n - 1])) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: edge %.10g degrees does not increase on the previous one", path,
                         line, v);
            break;
        }
        edges[n++] = rad;
        p = end;
    }
    free(text);
    if (st == PK_OK && n < 2)
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: an edge file needs at least 2 edges (found %zu)", path, n);
    if (st == PK_OK) st = pk_bins_from_edges(ctx, edges, n, out);
    free(edges);
    return st;
}
