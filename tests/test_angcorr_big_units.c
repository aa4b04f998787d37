/* test_angcorr_big_units.c - one work unit holding more than 2^32 pairs of
 * one bin: 256 objects of a in one tiny patch against 2^24 + 1 objects of
 * b spread over the sky, one bin [0, 180) degrees, so that every pair of a
 * unit of rows lands in the same 32-bit counter. The pruned CPU grid
 * engine (unweighted) and the weighted path (CPU; CUDA too when a device
 * is present: its block counters) must count all 256 (2^24 + 1) pairs.
 * Label slow: 4.3e9 pairs a count, ~12 s each on two cores. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "pairkit/angcorr.h"

int main(void) {
    const size_t na = 256, nb = ((size_t)1 << 24) + 1;
    double *ra = malloc((na + nb) * sizeof(double)), *dec = malloc((na + nb) * sizeof(double));
    double *wa = malloc(na * sizeof(double));
    check_rng rng = check_rng_make(424242);
    for (size_t i = 0; i < na + nb; i++) {
        double u1 = check_uniform(&rng), u2 = check_uniform(&rng);
        if (i < na) { /* a: one tiny patch */
            ra[i] = 1.0 + 1e-7 * u1;
            dec[i] = 0.3 + 1e-7 * u2;
        } else { /* b: uniform on the sphere */
            ra[i] = 2 * M_PI * u1;
            dec[i] = asin(2 * u2 - 1);
        }
    }
    for (size_t i = 0; i < na; i++) wa[i] = 1.0;
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog a, b;
    pk_bins bins;
    CHECK_OK(pk_catalog_from_arrays(&ctx, na, ra, dec, PK_UNITS_RAD, "a", &a), &ctx);
    CHECK_OK(pk_catalog_from_arrays(&ctx, nb, ra + na, dec + na, PK_UNITS_RAD, "b", &b), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, M_PI, 1, &bins), &ctx);
    const uint64_t want = (uint64_t)na * nb;
    struct {
        pk_backend backend;
        int weighted;
        const char *what;
    } runs[] = {{PK_BACKEND_CPU, 0, "CPU grid engine, pruned"},
                {PK_BACKEND_CPU, 1, "CPU, weighted"},
                {PK_BACKEND_CUDA, 1, "CUDA, weighted"}};
    for (size_t k = 0; k < 3; k++) {
        if (runs[k].backend == PK_BACKEND_CUDA && pk_cuda_device_count() == 0) {
            printf("%s: skipped, no CUDA device\n", runs[k].what);
            continue;
        }
        pk_angcorr_options o = {runs[k].backend, 0};
        pk_angcorr_features f = {runs[k].weighted ? wa : NULL, NULL, 0, runs[k].weighted ? PK_PRUNE_AUTO : PK_PRUNE_ON};
        uint64_t count = 0;
        double weighted = 0;
        pk_pair_stats st;
        CHECK_OK(
            pk_angcorr_count_ex(&ctx, &o, &a, &b, &bins, &f, &count, runs[k].weighted ? &weighted : NULL, NULL, &st),
            &ctx);
        CHECK(count == want, "%s: %llu pairs in the bin, expected %llu", runs[k].what, (unsigned long long)count,
              (unsigned long long)want);
        if (runs[k].weighted)
            CHECK(weighted == (double)want, "%s: weighted sum %.17g, expected %llu", runs[k].what, weighted,
                  (unsigned long long)want);
        printf("%s: %llu pairs, %.2f s\n", runs[k].what, (unsigned long long)count, st.seconds);
    }
    pk_catalog_free(&a);
    pk_catalog_free(&b);
    pk_bins_free(&bins);
    free(ra), free(dec), free(wa);
    return check_finish("test_angcorr_big_units");
}
