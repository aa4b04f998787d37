/* fuzz_catalog_csv.c - the CSV catalog reader (pk_catalog_read_spec with
 * PK_FORMAT_CSV) on arbitrary bytes: columns ra, dec and, for inputs of
 * odd length, a weight column w; units from the length. Checks:
 * fuzz_catalog.h. */
#include "fuzz_catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_catalog_spec(data, size, "catalog.csv", PK_FORMAT_CSV, "w");
    return 0;
}
