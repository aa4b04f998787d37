/* fits_open.h - FITS files opened for reading, plain or gzip-compressed,
 * after a check of their header cards (fits_check.c): PK_ERR_PARSE with a
 * message naming the file, HDU and offset when a card holds a byte outside
 * printable ASCII or an over-long unquoted value, which cfitsio 4.2 would
 * overflow a buffer on. */
#ifndef PAIRKIT_FITS_OPEN_H
#define PAIRKIT_FITS_OPEN_H

#include <fitsio.h>

#include "common.h"

/* Opens path read-only at its first HDU: a plain FITS file from disk (as
 * named: no cfitsio filename syntax), or a gzip-compressed one from memory.
 * *size is the size of the FITS file (decompressed), for the readers' checks
 * of cut files. *mem, when set, holds the decompressed file: close with
 * pk_fits_close(*f, *mem). Errors name the file; the readers take cfitsio's
 * status text, never its process-wide message stack, which other threads
 * share. */
pk_status pk_fits_open(pk_context *ctx, const char *path, fitsfile **f, long long *size, void **mem);

/* Closes f (if not NULL) and frees mem (pk_fits_open's, or NULL); clears
 * cfitsio's message stack back to the mark pk_fits_open put on it, so that
 * the caller's own messages stay (call it only after a successful open). */
void pk_fits_close(fitsfile *f, void *mem);

#endif
