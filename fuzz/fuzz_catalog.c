/* fuzz_catalog.c - the native catalog reader (pk_catalog_read) on arbitrary
 * bytes. The units come from the input's length, so the seeds stay real
 * catalog files.
 *
 * Invariants: a failure leaves an empty catalog and a message naming the
 * file; a success gives finite positions with |dec| <= pi/2. Small catalogs
 * are also counted, by the float64 reference and by the fastest CPU kernel,
 * and the two histograms must be identical (the exactness promise of
 * pk_angcorr_count on whatever positions a reader lets through).
 */
#include <math.h>

#include "fuzz.h"
#include "pairkit/angcorr.h"

/* Catalogs up to this size are counted twice per input: 24^2 pairs keep a
 * run near 10^4 inputs a second. */
#define FUZZ_COUNT_MAX 24

static void count_both(const pk_catalog *cat, const pk_bins *bins) {
    pk_context ctx;
    pk_context_init(&ctx);
    ctx.n_threads = 1;
    uint64_t ref[64] = {0}, best[64] = {0};
    pk_angcorr_options ref_opts = {PK_BACKEND_CPU, PK_ANGCORR_KERNEL_REF};
    pk_angcorr_options best_opts = {PK_BACKEND_CPU, PK_ANGCORR_KERNEL_BEST};
    pk_status st = pk_angcorr_count(&ctx, &ref_opts, cat, NULL, bins, ref, NULL);
    FUZZ_REQUIRE(st == PK_OK, "reference count: %s", ctx.message);
    st = pk_angcorr_count(&ctx, &best_opts, cat, NULL, bins, best, NULL);
    FUZZ_REQUIRE(st == PK_OK, "best count: %s", ctx.message);
    for (size_t k = 0; k < bins->n_bins; k++)
        FUZZ_REQUIRE(ref[k] == best[k], "bin %zu: reference %llu, best kernel %llu", k, (unsigned long long)ref[k],
                     (unsigned long long)best[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("catalog.txt", data, size);
    pk_units units = (pk_units)(size % 3);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog cat;
    pk_status st = pk_catalog_read(&ctx, path, units, &cat);
    if (st != PK_OK) {
        FUZZ_REQUIRE(cat.n == 0 && !cat.ra && !cat.dec, "failed read left a catalog");
        FUZZ_REQUIRE(strstr(ctx.message, path) != NULL, "message does not name the file: %s", ctx.message);
        return 0;
    }
    FUZZ_REQUIRE(cat.n >= 1 && cat.ra && cat.dec, "empty catalog read as success");
    for (size_t i = 0; i < cat.n; i++)
        FUZZ_REQUIRE(isfinite(cat.ra[i]) && isfinite(cat.dec[i]) && fabs(cat.dec[i]) <= M_PI / 2,
                     "object %zu: ra %g dec %g", i, cat.ra[i], cat.dec[i]);
    if (cat.n <= FUZZ_COUNT_MAX) {
        pk_bins bins;
        /* linear bins of 2 degrees, or log bins from 0.01 to 90 degrees */
        st = (size / 3) % 2 ? pk_bins_linear(&ctx, 0.0, 2.0 * M_PI / 180.0, 64, &bins)
                            : pk_bins_log(&ctx, 0.01 * M_PI / 180.0, M_PI / 2, 40, &bins);
        FUZZ_REQUIRE(st == PK_OK, "bins: %s", ctx.message);
        count_both(&cat, &bins);
        pk_bins_free(&bins);
    }
    pk_catalog_free(&cat);
    return 0;
}
