/* fuzz_rr.c - the kept-RR file reader (pk_angcorr_read_rr) on arbitrary
 * bytes, against a fixed random catalog of 5 objects and 4 linear bins of 30
 * degrees (the seeds in fuzz/corpus/rr are files of that catalog and bins,
 * so that the fuzzer reaches the bin lines past the hash).
 *
 * Invariants: a failure has a message naming the file; accepted counts add
 * up to at most the 25 pairs there are, and writing them back gives the
 * same counts.
 */
#include <math.h>

#include "fuzz.h"
#include "pairkit/angcorr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("kept_rr.txt", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    static const double ra[5] = {0.1, 1.0, 2.0, 3.0, 4.0}, dec[5] = {0.0, 0.5, -0.5, 1.0, -1.2};
    pk_catalog random;
    pk_bins bins;
    FUZZ_REQUIRE(pk_catalog_from_arrays(&ctx, 5, ra, dec, PK_UNITS_RAD, "random", &random) == PK_OK, "catalog");
    FUZZ_REQUIRE(pk_bins_linear(&ctx, 0.0, M_PI / 6, 4, &bins) == PK_OK, "bins");
    uint64_t rr[4], again[4];
    pk_status st = pk_angcorr_read_rr(&ctx, path, &random, &bins, rr);
    if (st != PK_OK) {
        FUZZ_REQUIRE(strstr(ctx.message, path) != NULL, "message does not name the file: %s", ctx.message);
    } else {
        FUZZ_REQUIRE(rr[0] + rr[1] + rr[2] + rr[3] <= 25, "counts add up to %llu",
                     (unsigned long long)(rr[0] + rr[1] + rr[2] + rr[3]));
        const char *copy = fuzz_path("copy_rr.txt");
        FUZZ_REQUIRE(pk_angcorr_write_rr(&ctx, copy, &random, &bins, rr) == PK_OK, "write: %s", ctx.message);
        FUZZ_REQUIRE(pk_angcorr_read_rr(&ctx, copy, &random, &bins, again) == PK_OK, "read back: %s", ctx.message);
        FUZZ_REQUIRE(memcmp(rr, again, sizeof rr) == 0, "read back differs");
    }
    pk_bins_free(&bins);
    pk_catalog_free(&random);
    return 0;
}
