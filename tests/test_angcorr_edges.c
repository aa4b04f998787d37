/* test_angcorr_edges.c - pairs built to lie on bin edges, a few ulps either
 * side of them, and at distances around the float32 uncertainty margins;
 * and the edge table's thresholds against the reference rule, ulp by ulp.
 * These are the pairs a float32 kernel gets wrong if its margins are short. */
#include <float.h>

#include "angcorr/angcorr_internal.h"
#include "angcorr_util.h"

/* Point at separation theta from (ra, dec) in direction `bearing`. */
static void offset_point(double ra, double dec, double theta, double bearing, double *ra2, double *dec2) {
    double sd = sin(dec) * cos(theta) + cos(dec) * sin(theta) * cos(bearing);
    if (sd > 1) sd = 1;
    if (sd < -1) sd = -1;
    *dec2 = asin(sd);
    *ra2 = ra + atan2(sin(bearing) * sin(theta) * cos(dec), cos(theta) - sin(dec) * sd);
}

static void edge_pairs(check_rng *rng, const pk_bins *bins, const char *name, double dec_lo, double dec_hi) {
    const double deltas[] = {0.0,  1e-15, -1e-15, 1e-12, -1e-12, 1e-9,  -1e-9,  3e-7,    -3e-7, 1e-6, -1e-6,
                             2e-6, -2e-6, 4e-6,   -4e-6, 7e-6,   -7e-6, 1.5e-5, -1.5e-5, 5e-5,  -5e-5};
    const size_t n_delta = sizeof deltas / sizeof deltas[0];
    size_t n = 1500;
    pk_catalog a = test_catalog(rng, n, 0, 2 * M_PI, dec_lo, dec_hi);
    pk_catalog b = test_catalog(rng, n, 0, 2 * M_PI, dec_lo, dec_hi);
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(check_uniform(rng) * (double)bins->n_bins);
        double edge = bins->edges[k];
        if (edge > M_PI) edge = M_PI - 0.01 * check_uniform(rng);
        double theta = edge + deltas[i % n_delta];
        if (theta < 0) theta = -theta;
        offset_point(a.ra[i], a.dec[i], theta, 2 * M_PI * check_uniform(rng), &b.ra[i], &b.dec[i]);
        /* a few ulps either side of the constructed point */
        int ulps = (int)(i / n_delta % 7) - 3;
        for (int u = 0; u < (ulps < 0 ? -ulps : ulps); u++)
            b.ra[i] = nextafter(b.ra[i], ulps < 0 ? -(double)INFINITY : (double)INFINITY);
    }
    char what[160];
    snprintf(what, sizeof what, "edge pairs, %s bins, dec [%.2f, %.2f]", name, dec_lo, dec_hi);
    test_against_ref(what, &a, &b, bins, NULL, 0);
    /* The same pairs as one catalog: autocorrelation with them inside. */
    pk_catalog both = a;
    both.n = 2 * n;
    both.ra = malloc(2 * n * sizeof(double));
    both.dec = malloc(2 * n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        both.ra[2 * i] = a.ra[i], both.dec[2 * i] = a.dec[i];
        both.ra[2 * i + 1] = b.ra[i], both.dec[2 * i + 1] = b.dec[i];
    }
    snprintf(what, sizeof what, "edge pairs auto, %s bins", name);
    test_against_ref(what, &both, NULL, bins, NULL, 0);
    pk_catalog_free(&a);
    pk_catalog_free(&b);
    pk_catalog_free(&both);
}

/* One point against many points each placed within +-spread radians of a
 * bin edge: every pair of the count is a near-edge pair, so a margin that is
 * too short shows as a wrong count with high probability. */
static void dense_edges(check_rng *rng, const pk_bins *bins, const char *name, double spread) {
    size_t n = 40000;
    for (int rep = 0; rep < 12; rep++) {
        pk_catalog a = test_catalog(rng, 1, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        if (rep == 0) a.dec[0] = M_PI / 2 - 1e-3;
        pk_catalog b = test_catalog(rng, n, 0, 1, 0, 1);
        double max_edge = bins->edges[bins->n_bins] < M_PI ? bins->edges[bins->n_bins] : M_PI;
        for (size_t i = 0; i < n; i++) {
            size_t k;
            do {
                k = (size_t)(check_uniform(rng) * (double)(bins->n_bins + 1));
            } while (bins->edges[k] > max_edge);
            double theta = fabs(bins->edges[k] + spread * (2 * check_uniform(rng) - 1));
            offset_point(a.ra[0], a.dec[0], theta, 2 * M_PI * check_uniform(rng), &b.ra[i], &b.dec[i]);
        }
        char what[160];
        snprintf(what, sizeof what, "dense edges +-%.1e rad, %s bins, rep %d", spread, name, rep);
        test_against_ref(what, &a, &b, bins, NULL, 0);
        pk_catalog_free(&a);
        pk_catalog_free(&b);
    }
}

/* Pairs just inside and just outside the last edge where the grid prunes,
 * with tight cells: one point against clusters of 16 copies of one
 * point (a cell each, of radius ~0), placed at theta_max (1 +- delta)
 * in all directions, and far clusters that make pruning pay. The plan's
 * and the rows' reach tests then see the exact pair distance, so a
 * pruning chord even 1e-8 too short drops pairs of the last bin. */
static void last_edge_pruned(check_rng *rng, const pk_bins *bins, const char *name) {
    const double deltas[] = {-1e-9, -1e-8, -1e-7, -1e-6, -1e-5, -1e-4, 1e-9, 1e-8, 1e-7, 1e-6};
    const size_t n_delta = sizeof deltas / sizeof deltas[0];
    const size_t n_near = 24, copies = 16, n_far = 2000;
    double theta_max = bins->edges[bins->n_bins];
    pk_catalog a = test_catalog(rng, 1, 0.2, 0.2, 0.2, 0.2);
    pk_catalog b = test_catalog(rng, n_near * copies + n_far, 0.5, 0.9, 0.3, 0.6); /* far: 14 degrees and more */
    for (size_t k = 0; k < n_near; k++) {
        double ra, dec;
        offset_point(a.ra[0], a.dec[0], theta_max * (1 + deltas[k % n_delta]),
                     2 * M_PI * ((double)k + 0.3 * check_uniform(rng)) / (double)n_near, &ra, &dec);
        for (size_t c = 0; c < copies; c++) b.ra[k * copies + c] = ra, b.dec[k * copies + c] = dec;
    }
    char what[160];
    snprintf(what, sizeof what, "last edge, pruned, %s bins, cross", name);
    test_against_ref(what, &a, &b, bins, NULL, 0);
    pk_catalog both = b;
    both.n = b.n + 1;
    both.ra = malloc(both.n * sizeof(double));
    both.dec = malloc(both.n * sizeof(double));
    both.ra[0] = a.ra[0], both.dec[0] = a.dec[0];
    memcpy(both.ra + 1, b.ra, b.n * sizeof(double));
    memcpy(both.dec + 1, b.dec, b.n * sizeof(double));
    snprintf(what, sizeof what, "last edge, pruned, %s bins, auto", name);
    test_against_ref(what, &both, NULL, bins, NULL, 0);
    pk_catalog_free(&a);
    pk_catalog_free(&b);
    pk_catalog_free(&both);
}

/* dense_edges where the grid prunes: as many far points as near-edge
 * ones (beyond theta_max, in a patch of their own), so that the pruned
 * grid count runs, and with it the AVX-512 log path (log bins) and the
 * direct table (other edges), whose margins dense_edges alone does not
 * reach (its counts visit every pair and take the block kernels). */
static void dense_edges_pruned(check_rng *rng, const pk_bins *bins, const char *name, double spread) {
    size_t n = 20000;
    double max_edge = bins->edges[bins->n_bins];
    for (int rep = 0; rep < 4; rep++) {
        pk_catalog a = test_catalog(rng, 1, 0.1, 0.2, 0.1, 0.2);
        pk_catalog b = test_catalog(rng, 2 * n, 2.0, 2.5, -0.5, 0.5); /* the far half: 100 degrees away */
        for (size_t i = 0; i < n; i++) {
            size_t k = (size_t)(check_uniform(rng) * (double)(bins->n_bins + 1));
            double theta = fabs(bins->edges[k] + spread * (2 * check_uniform(rng) - 1));
            if (theta > max_edge) theta = max_edge - spread * check_uniform(rng);
            offset_point(a.ra[0], a.dec[0], theta, 2 * M_PI * check_uniform(rng), &b.ra[i], &b.dec[i]);
        }
        char what[160];
        snprintf(what, sizeof what, "dense edges pruned +-%.1e rad, %s bins, rep %d", spread, name, rep);
        test_against_ref(what, &a, &b, bins, NULL, 0);
        pk_catalog_free(&a);
        pk_catalog_free(&b);
    }
}

/* Every threshold of the edge table against the reference rule, for
 * doubles within a few hundred ulps of it and random doubles. */
static void thresholds(check_rng *rng, const pk_bins *bins, const char *name) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_edge_table t;
    CHECK_OK(pk_edge_table_build(&ctx, bins, &t), &ctx);
    int bad = 0;
    for (int32_t s = 0; s < t.n_bounds && bad < 5; s++) {
        double T = t.dot_threshold[s];
        if (!isfinite(T)) continue;
        double d = T;
        for (int u = 0; u < 300; u++) d = nextafter(d, -(double)INFINITY);
        for (int u = 0; u < 600 && bad < 5; u++, d = nextafter(d, (double)INFINITY)) {
            int64_t want = pk_angcorr_slot_ref(bins, d);
            int32_t got = pk_edge_table_slot_fp64(&t, d);
            if (want != got) bad++;
            CHECK(want == got, "%s: dot %.17g: threshold rule gives slot %d, reference %lld", name, d, got,
                  (long long)want);
        }
    }
    for (int r = 0; r < 200000 && bad < 5; r++) {
        double d = 2 * check_uniform(rng) - 1;
        if (r % 2) d = 1 - ldexp(check_uniform(rng), -(int)(check_uniform(rng) * 50));
        int64_t want = pk_angcorr_slot_ref(bins, d);
        int32_t got = pk_edge_table_slot_fp64(&t, d);
        if (want != got) bad++;
        CHECK(want == got, "%s: dot %.17g: slot %d vs reference %lld", name, d, got, (long long)want);
    }
    pk_edge_table_free(&t);
}

int main(void) {
    check_rng rng = check_rng_make(777);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins def, fine, offs, logb, wide;
    CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.01 * M_PI / 180, 4000, &fine), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.7 * M_PI / 180, 0.3 * M_PI / 180, 300, &offs), &ctx);
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 20, &logb), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 2.0 * M_PI / 180, 90, &wide), &ctx);
    const pk_bins *all[5] = {&def, &fine, &offs, &logb, &wide};
    const char *names[5] = {"default", "fine", "offset", "log", "wide"};
    for (int k = 0; k < 5; k++) {
        thresholds(&rng, all[k], names[k]);
        edge_pairs(&rng, all[k], names[k], 0, M_PI / 2);
        edge_pairs(&rng, all[k], names[k], -M_PI / 2, M_PI / 2);
        dense_edges(&rng, all[k], names[k], 8e-6);
        dense_edges(&rng, all[k], names[k], 1e-7);
    }
    /* pruned counts: log bins to 2 degrees, linear ones to 3 */
    pk_bins log2d, lin3d;
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 2 * M_PI / 180, 20, &log2d), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.1 * M_PI / 180, 30, &lin3d), &ctx);
    last_edge_pruned(&rng, &log2d, "log to 2 deg");
    last_edge_pruned(&rng, &lin3d, "linear to 3 deg");
    last_edge_pruned(&rng, &logb, "log to 10 deg");
    const double uneven[6] = {0.02 * M_PI / 180, 0.05 * M_PI / 180, 0.3 * M_PI / 180,
                              0.31 * M_PI / 180, 2.0 * M_PI / 180,  7.5 * M_PI / 180};
    pk_bins unev;
    CHECK_OK(pk_bins_from_edges(&ctx, uneven, 6, &unev), &ctx);
    const pk_bins *pruned_bins[4] = {&logb, &log2d, &unev, &lin3d};
    const char *pruned_names[4] = {"log to 10 deg", "log to 2 deg", "uneven", "linear to 3 deg"};
    for (int k = 0; k < 4; k++) {
        dense_edges_pruned(&rng, pruned_bins[k], pruned_names[k], 8e-6);
        dense_edges_pruned(&rng, pruned_bins[k], pruned_names[k], 1e-7);
    }
    pk_bins_free(&unev);
    pk_bins_free(&log2d);
    pk_bins_free(&lin3d);
    for (int k = 0; k < 5; k++) pk_bins_free((pk_bins *)all[k]);
    return check_finish("test_angcorr_edges");
}
