/* angcorr_util.h - helpers for the angcorr tests: random catalogs and the
 * comparison of every CPU kernel with the float64 reference. */
#ifndef PAIRKIT_TEST_ANGCORR_UTIL_H
#define PAIRKIT_TEST_ANGCORR_UTIL_H

#include <math.h>
#include <string.h>

#include "check.h"
#include "pairkit/angcorr.h"

static const int test_cpu_kernels[] = {PK_ANGCORR_KERNEL_CPU_SCALAR, PK_ANGCORR_KERNEL_CPU_AVX2,
                                       PK_ANGCORR_KERNEL_CPU_AVX512};
#define N_TEST_CPU_KERNELS 3

/* n positions (radians): ra uniform in [ra0, ra1), dec uniform in sin(dec)
 * over [dec0, dec1]. */
static inline pk_catalog test_catalog(check_rng *rng, size_t n, double ra0, double ra1, double dec0, double dec1) {
    pk_catalog c;
    c.n = n;
    c.ra = malloc((n ? n : 1) * sizeof(double));
    c.dec = malloc((n ? n : 1) * sizeof(double));
    double s0 = sin(dec0), s1 = sin(dec1);
    for (size_t i = 0; i < n; i++) {
        c.ra[i] = ra0 + (ra1 - ra0) * check_uniform(rng);
        double s = s0 + (s1 - s0) * check_uniform(rng);
        c.dec[i] = asin(s > 1 ? 1 : s < -1 ? -1 : s);
    }
    return c;
}

/* Compare every available CPU kernel (and `extra` kernels) with the
 * reference on (a, b) (b NULL: autocorrelation). Returns the number of
 * kernels that differed. */
static inline int test_against_ref(const char *what, const pk_catalog *a, const pk_catalog *b, const pk_bins *bins,
                                   const int *extra, int n_extra) {
    pk_context ctx;
    pk_context_init(&ctx);
    size_t n = bins->n_bins;
    uint64_t *ref = calloc(n, sizeof(uint64_t)), *got = calloc(n, sizeof(uint64_t));
    pk_angcorr_options opts = {PK_BACKEND_AUTO, PK_ANGCORR_KERNEL_REF};
    pk_pair_stats st_ref;
    pk_status st = pk_angcorr_count(&ctx, &opts, a, b, bins, ref, &st_ref);
    CHECK_OK(st, &ctx);
    int bad = 0;
    int kernels[16], nk = 0;
    for (int k = 0; k < N_TEST_CPU_KERNELS; k++) kernels[nk++] = test_cpu_kernels[k];
    for (int k = 0; k < n_extra && nk < 16; k++) kernels[nk++] = extra[k];
    for (int k = 0; k < nk; k++) {
        if (!pk_angcorr_kernel_available(kernels[k])) continue;
        opts.kernel = kernels[k];
        pk_pair_stats stats;
        memset(got, 0xff, n * sizeof(uint64_t));
        st = pk_angcorr_count(&ctx, &opts, a, b, bins, got, &stats);
        CHECK_OK(st, &ctx);
        size_t first_diff = n;
        for (size_t q = 0; q < n; q++)
            if (got[q] != ref[q]) {
                first_diff = q;
                break;
            }
        CHECK(first_diff == n, "%s: kernel %s differs from the reference in bin %zu: %llu vs %llu", what,
              pk_angcorr_kernel_name(kernels[k]), first_diff,
              first_diff < n ? (unsigned long long)got[first_diff] : 0ull,
              first_diff < n ? (unsigned long long)ref[first_diff] : 0ull);
        CHECK(stats.pairs_total == st_ref.pairs_total && stats.pairs_in_range == st_ref.pairs_in_range,
              "%s: kernel %s: pair totals differ", what, pk_angcorr_kernel_name(kernels[k]));
        if (first_diff != n) bad++;
    }
    free(ref);
    free(got);
    return bad;
}

#endif
