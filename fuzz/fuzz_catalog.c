/* fuzz_catalog.c - the native catalog reader (pk_catalog_read) on arbitrary
 * bytes. The units come from the input's length, so the seeds stay real
 * catalog files. Checks: fuzz_catalog.h. */
#include "fuzz_catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("catalog.txt", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog cat;
    pk_status st = pk_catalog_read(&ctx, path, (pk_units)(size % 4), &cat);
    fuzz_catalog_check(st, &ctx, path, &cat, NULL, size);
    pk_catalog_free(&cat);
    return 0;
}
