/* fuzz_catalog_fits.c - the FITS binary-table catalog reader
 * (pk_catalog_read_spec with PK_FORMAT_FITS: cfitsio, then the columns
 * read by pairkit) on arbitrary bytes: columns RA, DEC and, for inputs of
 * odd length, WEIGHT; units from the length. Checks: fuzz_catalog.h. */
#include "fuzz_catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_catalog_spec(data, size, "catalog.fits", PK_FORMAT_FITS, "weight");
    return 0;
}
