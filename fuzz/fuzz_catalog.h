/* fuzz_catalog.h - what the catalog reader targets check after a read: a
 * failure leaves an empty catalog and a message naming the file; a success
 * gives finite positions with |dec| <= pi/2 (and finite weights). Small
 * catalogs are also counted, by the float64 reference and by the fastest
 * CPU kernel, and the two histograms must be identical (the exactness
 * promise of pk_angcorr_count on whatever positions a reader lets
 * through). */
#ifndef PAIRKIT_FUZZ_CATALOG_H
#define PAIRKIT_FUZZ_CATALOG_H

#include <math.h>

#include "fuzz.h"
#include "pairkit/angcorr.h"

/* Catalogs up to this size are counted twice per input: 24^2 pairs keep a
 * run near 10^4 inputs a second. */
#define FUZZ_COUNT_MAX 24

static inline void fuzz_count_both(const pk_catalog *cat, const pk_bins *bins) {
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

static inline void fuzz_catalog_check(pk_status st, const pk_context *ctx, const char *path, pk_catalog *cat,
                                      const double *weights, size_t size) {
    if (st != PK_OK) {
        FUZZ_REQUIRE(cat->n == 0 && !cat->ra && !cat->dec && !weights, "failed read left a catalog");
        FUZZ_REQUIRE(strstr(ctx->message, path) != NULL, "message does not name the file: %s", ctx->message);
        return;
    }
    FUZZ_REQUIRE(cat->n >= 1 && cat->ra && cat->dec, "empty catalog read as success");
    for (size_t i = 0; i < cat->n; i++) {
        FUZZ_REQUIRE(isfinite(cat->ra[i]) && isfinite(cat->dec[i]) && fabs(cat->dec[i]) <= M_PI / 2,
                     "object %zu: ra %g dec %g", i, cat->ra[i], cat->dec[i]);
        FUZZ_REQUIRE(!weights || isfinite(weights[i]), "object %zu: weight %g", i, weights[i]);
    }
    if (cat->n <= FUZZ_COUNT_MAX) {
        pk_context bctx;
        pk_context_init(&bctx);
        pk_bins bins;
        /* linear bins of 6 degrees, or log bins from 0.01 to 90 degrees: few
         * bins, as building the exact edge table costs more than counting
         * 24^2 pairs */
        pk_status bst = (size / 3) % 2 ? pk_bins_linear(&bctx, 0.0, 6.0 * M_PI / 180.0, 16, &bins)
                                       : pk_bins_log(&bctx, 0.01 * M_PI / 180.0, M_PI / 2, 12, &bins);
        FUZZ_REQUIRE(bst == PK_OK, "bins: %s", bctx.message);
        fuzz_count_both(cat, &bins);
        pk_bins_free(&bins);
    }
}

/* One input read as a catalog file of `format` named `file`: units from the
 * length (halved, so that each of the four goes with weights and without)
 * and, for odd lengths, the weight column `weight`; then the checks
 * above. */
static inline void fuzz_catalog_spec(const uint8_t *data, size_t size, const char *file, pk_catalog_format format,
                                     const char *weight) {
    const char *path = fuzz_write(file, data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    int weighted = size % 2;
    pk_catalog_spec spec = {format, (pk_units)(size / 2 % 4), NULL, NULL, weighted ? weight : NULL, 0};
    pk_catalog cat;
    double *weights = NULL;
    pk_status st = pk_catalog_read_spec(&ctx, path, &spec, &cat, &weights);
    FUZZ_REQUIRE(weighted || !weights, "weights without a weight column");
    fuzz_catalog_check(st, &ctx, path, &cat, weights, size);
    pk_catalog_free(&cat);
    free(weights);
}

#endif
