/* test_angcorr_ref.c - the reference rules themselves: bin indices at and
 * around edges, known separations, sums, the estimators and the exact text
 * of the course output format. */
#include <unistd.h>

#include "angcorr_util.h"

static void bins_rules(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins def, logb;
    CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
    double w = 0.25 * M_PI / 180;
    CHECK(pk_bins_index(&def, 0.0) == 0, "theta 0");
    CHECK(pk_bins_index(&def, w) == 1, "theta = w is the start of bin 1");
    CHECK(pk_bins_index(&def, nextafter(w, 0)) == 0, "just below w");
    CHECK(pk_bins_index(&def, 179.9 * M_PI / 180) == 719, "179.9 deg");
    CHECK(pk_bins_index(&def, 2 * M_PI) == 1440, "at theta_max: out of range");
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 20, &logb), &ctx);
    CHECK(pk_bins_index(&logb, logb.edges[0]) == 0, "first edge");
    CHECK(pk_bins_index(&logb, nextafter(logb.edges[0], 0)) == -1, "below theta_min");
    CHECK(pk_bins_index(&logb, logb.edges[7]) == 7, "edge 7 starts bin 7");
    CHECK(pk_bins_index(&logb, nextafter(logb.edges[7], 0)) == 6, "just below edge 7");
    CHECK(pk_bins_index(&logb, logb.edges[20]) == 20, "theta_max is out");
    CHECK(fabs(logb.edges[10] / logb.edges[9] - pow(1000.0, 1.0 / 20)) < 1e-12, "log spacing");
    /* bad bins */
    pk_bins bad;
    CHECK(pk_bins_log(&ctx, 0.0, 1.0, 10, &bad) == PK_ERR_INVALID, "log bins from 0");
    CHECK(pk_bins_log(&ctx, 0.2, 0.1, 10, &bad) == PK_ERR_INVALID, "log bins reversed");
    CHECK(pk_bins_linear(&ctx, 0.0, -1.0, 10, &bad) == PK_ERR_INVALID, "negative width");
    CHECK(pk_bins_linear(&ctx, 0.0, 1.0, 0, &bad) == PK_ERR_INVALID, "zero bins");
    double edges[3] = {0.1, 0.3, 0.2};
    CHECK(pk_bins_from_edges(&ctx, edges, 3, &bad) == PK_ERR_INVALID, "edges not increasing");
    pk_bins_free(&def);
    pk_bins_free(&logb);
}

static void known_pairs(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins def;
    pk_bins_default(&ctx, &def);
    /* Two points on the equator 0.3 degree apart, and one 10.1 degrees up. */
    double ra[3] = {0.0, 0.3, 0.0}, dec[3] = {0.0, 0.0, 10.1};
    pk_catalog c;
    CHECK_OK(pk_catalog_from_arrays(&ctx, 3, ra, dec, PK_UNITS_DEG, "test", &c), &ctx);
    uint64_t counts[1440];
    pk_pair_stats st;
    pk_angcorr_options opts = {PK_BACKEND_CPU, PK_ANGCORR_KERNEL_REF};
    CHECK_OK(pk_angcorr_count(&ctx, &opts, &c, NULL, &def, counts, &st), &ctx);
    CHECK(counts[0] == 3, "three self-pairs in bin 0, got %llu", (unsigned long long)counts[0]);
    CHECK(counts[1] == 2, "the 0.3 degree pair twice in bin 1, got %llu", (unsigned long long)counts[1]);
    /* 10.1 and 10.1044 degrees: both pairs twice in bin 40 */
    CHECK(counts[40] == 4, "the two long pairs twice each in bin 40, got %llu", (unsigned long long)counts[40]);
    CHECK(st.pairs_total == 9 && st.pairs_in_range == 9, "sums: %llu %llu", (unsigned long long)st.pairs_total,
          (unsigned long long)st.pairs_in_range);
    for (int k = 0; k < N_TEST_CPU_KERNELS; k++) {
        if (!pk_angcorr_kernel_available(test_cpu_kernels[k])) continue;
        uint64_t got[1440];
        opts.kernel = test_cpu_kernels[k];
        CHECK_OK(pk_angcorr_count(&ctx, &opts, &c, NULL, &def, got, &st), &ctx);
        CHECK(memcmp(got, counts, sizeof got) == 0, "kernel %s on known pairs", pk_angcorr_kernel_name(opts.kernel));
    }
    /* A narrow range: pairs outside are not counted, the sums say so. */
    pk_bins narrow;
    CHECK_OK(pk_bins_linear(&ctx, 0.2 * M_PI / 180, 0.2 * M_PI / 180, 2, &narrow), &ctx);
    uint64_t two[2];
    opts.kernel = PK_ANGCORR_KERNEL_BEST;
    CHECK_OK(pk_angcorr_count(&ctx, &opts, &c, NULL, &narrow, two, &st), &ctx);
    CHECK(two[0] == 2 && two[1] == 0, "narrow bins: %llu %llu", (unsigned long long)two[0], (unsigned long long)two[1]);
    CHECK(st.pairs_total == 9 && st.pairs_in_range == 2, "narrow sums");
    pk_bins_free(&narrow);
    pk_catalog_free(&c);
    pk_bins_free(&def);
}

static void estimators(void) {
    uint64_t dd[2] = {10, 0}, dr[2] = {5, 3}, rr[2] = {4, 0};
    double w[2];
    pk_estimate(PK_ESTIMATOR_LANDY_SZALAY, 7, 7, 2, dd, dr, rr, w);
    CHECK(w[0] == 1.0, "LS raw counts: %g", w[0]);
    CHECK(isnan(w[1]), "LS with RR = 0 is NaN");
    /* n_d = 2, n_r = 4: (10/4 - 2*5/8 + 4/16) / (4/16) = (2.5 - 1.25 + 0.25) / 0.25 = 6 */
    pk_estimate(PK_ESTIMATOR_LANDY_SZALAY, 2, 4, 1, dd, dr, rr, w);
    CHECK(fabs(w[0] - 6.0) < 1e-12, "LS normalised: %g", w[0]);
    pk_estimate(PK_ESTIMATOR_NATURAL, 2, 4, 1, dd, dr, rr, w);
    CHECK(fabs(w[0] - 9.0) < 1e-12, "natural: (10/4)/(4/16) - 1 = 9, got %g", w[0]);
    pk_estimate(PK_ESTIMATOR_DAVIS_PEEBLES, 2, 4, 1, dd, dr, rr, w);
    CHECK(fabs(w[0] - 3.0) < 1e-12, "Davis-Peebles: (10/4)/(5/8) - 1 = 3, got %g", w[0]);
    pk_estimate(PK_ESTIMATOR_HAMILTON, 2, 4, 1, dd, dr, rr, w);
    CHECK(fabs(w[0] - (2.5 * 0.25 / (0.625 * 0.625) - 1)) < 1e-12, "Hamilton: %g", w[0]);
}

static void omega_format(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins def;
    pk_bins_default(&ctx, &def);
    pk_angcorr_result r;
    memset(&r, 0, sizeof r);
    r.n_bins = 1440;
    r.dd = calloc(1440, sizeof(uint64_t));
    r.dr = calloc(1440, sizeof(uint64_t));
    r.rr = calloc(1440, sizeof(uint64_t));
    r.omega = calloc(1440, sizeof(double));
    r.dd[0] = 2353476, r.dr[0] = 397208, r.rr[0] = 1141990, r.omega[0] = 2.365213;
    r.dd[3] = 6483062, r.dr[3] = 2673593, r.rr[3] = 5272392, r.omega[3] = 1.2154384;
    const char *path = "test_omega_format.out";
    CHECK_OK(pk_angcorr_write_omega(&ctx, path, &r, &def), &ctx);
    char *text = NULL;
    size_t size = 0;
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL, "output written");
    if (fp) {
        text = calloc(1, 4096);
        size = fread(text, 1, 4095, fp);
        fclose(fp);
    }
    const char *want =
        "bin start\t\tomega\t        hist_DD\t        hist_DR\t        hist_RR\n"
        " 0.000\t       2.365213\t        2353476\t         397208\t        1141990\n"
        " 0.750\t       1.215438\t        6483062\t        2673593\t        5272392\n";
    CHECK(text && size == strlen(want) && memcmp(text, want, size) == 0, "omega.out text:\n%s", text ? text : "");
    free(text);
    unlink(path);
    pk_angcorr_result_free(&r);
    pk_bins_free(&def);
}

int main(void) {
    bins_rules();
    known_pairs();
    estimators();
    omega_format();
    return check_finish("test_angcorr_ref");
}
