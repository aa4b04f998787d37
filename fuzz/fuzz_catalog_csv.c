/* fuzz_catalog_csv.c - the CSV catalog reader (pk_catalog_read_spec with
 * PK_FORMAT_CSV) on arbitrary bytes: columns ra, dec and, for inputs of
 * odd length, a weight column w; units from the length. Checks:
 * fuzz_catalog.h. */
#include "fuzz_catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("catalog.csv", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    int weighted = size % 2;
    pk_catalog_spec spec = {PK_FORMAT_CSV, (pk_units)(size % 3), NULL, NULL, weighted ? "w" : NULL};
    pk_catalog cat;
    double *weights = NULL;
    pk_status st = pk_catalog_read_spec(&ctx, path, &spec, &cat, &weights);
    FUZZ_REQUIRE(weighted || !weights, "weights without a weight column");
    fuzz_catalog_check(st, &ctx, path, &cat, weights, size);
    pk_catalog_free(&cat);
    free(weights);
    return 0;
}
