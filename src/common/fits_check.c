/* fits_check.c - a check of FITS files before cfitsio reads them: every
 * header card of every HDU must be printable ASCII (bytes 0x20 to 0x7E), as
 * the FITS standard requires, and a keyword's value that is not a quoted
 * string must be a token of at most 68 characters (a number or a logical;
 * a string holds at most 68 between its quotes). cfitsio 4.2 (Debian 12)
 * overflows a buffer on some header cards breaking either rule (a byte
 * outside ASCII; an unquoted 70-character TTYPEn value, copied into its
 * 70-byte column name), so the readers of pairkit call this first. It
 * reads only the header blocks, and the cards of a last, partial block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* An integer keyword's value from one header card, if the card holds it. */
static int card_int(const char *card, const char *key, long long *value) {
    size_t n = strlen(key);
    if (strncmp(card, key, n) != 0 || card[n] != ' ' || card[8] != '=') return 0;
    char text[72];
    memcpy(text, card + 10, 70);
    text[70] = '\0';
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text) return 0;
    *value = v;
    return 1;
}

/* Characters of the value of a keyword card when that value is not a
 * quoted string (0 for strings, comments and cards without a value). */
static int unquoted_value_length(const char *card) {
    if (card[8] != '=' || card[9] != ' ') return 0;
    if (strncmp(card, "COMMENT ", 8) == 0 || strncmp(card, "HISTORY ", 8) == 0) return 0; /* free text */
    int k = 10;
    while (k < 80 && card[k] == ' ') k++;
    if (k == 80 || card[k] == '\'' || card[k] == '/') return 0;
    int start = k;
    while (k < 80 && card[k] != ' ' && card[k] != '/') k++;
    return k - start;
}

/* 1 and an error in ctx when one card breaks a rule above. */
static int card_bad(pk_context *ctx, pk_status *st, const char *path, int hdu, const char *card, long long at) {
    for (int k = 0; k < 80; k++)
        if ((unsigned char)card[k] < 0x20 || (unsigned char)card[k] > 0x7E) {
            *st = pk_fail(ctx, PK_ERR_PARSE,
                          "%s: HDU %d: header byte 0x%02x at offset %lld is not printable ASCII (not a FITS header)",
                          path, hdu, (unsigned char)card[k], at + k);
            return 1;
        }
    int len = unquoted_value_length(card);
    if (len > 68) {
        *st = pk_fail(ctx, PK_ERR_PARSE,
                      "%s: HDU %d: keyword %.8s at offset %lld has a value of %d characters that is neither a quoted "
                      "string nor a number (not a FITS header)",
                      path, hdu, card, at, len);
        return 1;
    }
    return 0;
}

/* The walk follows the HDU sizes; where it cannot (a truncated or
 * malformed header) it stops and leaves the verdict to cfitsio. */
pk_status pk_fits_check_headers(pk_context *ctx, const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return PK_OK; /* cfitsio reports it */
    /* cfitsio takes any file whose first card starts with SIMPLE (the "="
     * may sit elsewhere), so the check does too */
    char magic[6];
    if (fread(magic, 1, sizeof magic, fp) != sizeof magic || memcmp(magic, "SIMPLE", 6) != 0) {
        fclose(fp); /* not a plain FITS file (compressed, or not FITS at all): cfitsio decides */
        return PK_OK;
    }
    char block[2880];
    long long offset = 0;
    pk_status st = PK_OK;
    for (int hdu = 1; hdu <= 1000 && st == PK_OK; hdu++) {
        long long bitpix = 0, naxis = 0, pcount = 0, gcount = 1, dims[1000] = {0}, n_dims = 0;
        int ended = 0;
        if (fseeko(fp, (off_t)offset, SEEK_SET) != 0) break;
        int partial = 0;
        while (!ended && !partial && st == PK_OK) {
            size_t got = fread(block, 1, sizeof block, fp);
            partial = got < sizeof block; /* a truncated file: its whole cards are still checked */
            int n_cards = (int)(got / 80);
            offset += (long long)sizeof block;
            for (int c = 0; c < n_cards && !ended; c++) {
                const char *card = block + 80 * c;
                if (card_bad(ctx, &st, path, hdu, card, offset - (long long)sizeof block + 80 * c)) break;
                long long v;
                if (strncmp(card, "END     ", 8) == 0) ended = 1;
                else if (card_int(card, "BITPIX", &v)) bitpix = v;
                else if (card_int(card, "NAXIS", &v)) naxis = v;
                else if (card_int(card, "PCOUNT", &v)) pcount = v;
                else if (card_int(card, "GCOUNT", &v)) gcount = v;
                else if (strncmp(card, "NAXIS", 5) == 0 && card[5] >= '1' && card[5] <= '9') {
                    char key[9];
                    memcpy(key, card, 8);
                    key[8] = '\0';
                    char *sp = strchr(key, ' ');
                    if (sp) *sp = '\0';
                    long idx = strtol(key + 5, NULL, 10);
                    if (idx >= 1 && idx <= 999 && card_int(card, key, &v)) {
                        dims[idx - 1] = v;
                        if (idx > n_dims) n_dims = idx;
                    }
                }
            }
        }
        if (st || !ended || partial) break;
        /* data size: |BITPIX|/8 * GCOUNT * (PCOUNT + NAXIS1 * ... * NAXISn),
         * NAXIS1 = 0 standing for 1 in random groups */
        if (naxis < 0 || naxis > 999 || n_dims < naxis || bitpix == 0 || pcount < 0 || gcount < 0) break;
        long long elems = naxis > 0 ? 1 : 0;
        int ok = 1;
        for (long long k = 0; k < naxis && ok; k++) {
            long long d = dims[k] == 0 && k == 0 && naxis > 1 ? 1 : dims[k];
            if (d < 0 || (d > 0 && elems > (1LL << 50) / d)) ok = 0;
            else elems *= d;
        }
        if (!ok || pcount > (1LL << 50) || gcount > (1LL << 20) * 1024) break;
        long long bytes_per = (bitpix < 0 ? -bitpix : bitpix) / 8;
        long long items = elems + pcount;
        if (gcount > 0 && items > (1LL << 52) / gcount / (bytes_per ? bytes_per : 1)) break;
        long long data = items * gcount * bytes_per;
        offset += (data + 2879) / 2880 * 2880;
    }
    fclose(fp);
    return st;
}
