/* fits_check.c - a check of FITS files before cfitsio reads them: every
 * header card of every HDU must be printable ASCII (bytes 0x20 to 0x7E), as
 * the FITS standard requires, and a keyword's value that is not a quoted
 * string must be a token of at most 68 characters (a number or a logical;
 * a string holds at most 68 between its quotes). cfitsio 4.2 (Debian 12)
 * overflows a buffer on some header cards breaking either rule (a byte
 * outside ASCII; an unquoted 70-character TTYPEn value, copied into its
 * 70-byte column name), so the readers of pairkit open files through
 * pk_fits_open, which checks first. The check reads only the header blocks,
 * and the cards of a last, partial block. A gzip-compressed file is
 * decompressed here, checked and handed to cfitsio from memory (cfitsio
 * would decompress it too, but without the check, and the size of the file
 * on disk says nothing about the size of the FITS file in it). A file
 * that does not start with SIMPLE (an empty one, text, an extension without
 * its primary HDU, which cfitsio would open unchecked) is refused here,
 * saying which.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "common.h"
#include "fits_open.h"

/* A decompressed file handed to cfitsio. */
typedef struct fits_memory {
    void *bytes;
    size_t size;
} fits_memory;

/* The file being checked: on disk, or in memory after decompression. */
typedef struct fits_bytes {
    FILE *fp;
    const unsigned char *mem;
    size_t size;
} fits_bytes;

static size_t bytes_read(const fits_bytes *b, long long offset, void *dst, size_t n) {
    if (b->fp) {
        if (fseeko(b->fp, (off_t)offset, SEEK_SET) != 0) return 0;
        return fread(dst, 1, n, b->fp);
    }
    if (offset < 0 || (unsigned long long)offset >= b->size) return 0;
    size_t left = b->size - (size_t)offset;
    if (n > left) n = left;
    memcpy(dst, b->mem + offset, n);
    return n;
}

/* An integer keyword's value from one header card: 1 when the card holds
 * it, 0 when the card is another keyword's, -1 when the value is not a
 * whole number (only spaces or a comment may follow it). */
static int card_int(const char *card, const char *key, long long *value) {
    size_t n = strlen(key);
    if (strncmp(card, key, n) != 0 || card[n] != ' ' || card[8] != '=') return 0;
    char text[72];
    memcpy(text, card + 10, 70);
    text[70] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || errno == ERANGE) return -1;
    while (*end == ' ') end++;
    if (*end && *end != '/') return -1;
    *value = v;
    return 1;
}

/* The error for a structural keyword whose value is not a whole number
 * (cfitsio would read some other number from it, and size the HDU by it). */
static pk_status bad_int(pk_context *ctx, const char *path, int hdu, const char *card) {
    char key[9], value[71];
    memcpy(key, card, 8);
    key[8] = '\0';
    for (int k = 7; k >= 0 && key[k] == ' '; k--) key[k] = '\0';
    memcpy(value, card + 10, 70);
    value[70] = '\0';
    char *comment = strchr(value, '/');
    if (comment) *comment = '\0';
    for (int k = (int)strlen(value) - 1; k >= 0 && value[k] == ' '; k--) value[k] = '\0';
    const char *v = value;
    while (*v == ' ') v++;
    return pk_fail(ctx, PK_ERR_PARSE, "%s: HDU %d: %s = '%s' is not a whole number", path, hdu, key, v);
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

/* A keyword card's value as written: a quoted string with its quotes, or
 * the token before a comment; "" for cards without a value and for the
 * free text of COMMENT and HISTORY. */
static void card_value(const char *card, char *out) {
    out[0] = '\0';
    if (card[8] != '=' || card[9] != ' ') return;
    if (strncmp(card, "COMMENT ", 8) == 0 || strncmp(card, "HISTORY ", 8) == 0) return;
    int k = 10, n = 0;
    while (k < 80 && card[k] == ' ') k++;
    if (k < 80 && card[k] == '\'') {
        out[n++] = card[k++];
        while (k < 80) {
            out[n++] = card[k];
            if (card[k] == '\'' && (k + 1 == 80 || card[k + 1] != '\'')) break;
            if (card[k] == '\'') out[n++] = card[++k]; /* '' inside a string */
            k++;
        }
    } else {
        while (k < 80 && card[k] != ' ' && card[k] != '/') out[n++] = card[k++];
    }
    out[n] = '\0';
}

/* A header's keywords with values so far, to find one given twice. */
typedef struct card_list {
    char (*key)[9];
    char (*value)[72];
    long long *at;
    int n, cap;
} card_list;

/* 1 and an error in ctx when card gives a keyword already given with
 * another value (a reader would take one of them unseen); 0 otherwise. */
static int card_repeated(pk_context *ctx, pk_status *st, const char *path, int hdu, const char *card, long long at,
                         card_list *cl) {
    char value[72];
    card_value(card, value);
    if (!value[0] || cl->n >= 100000) return 0;
    char key[9];
    memcpy(key, card, 8);
    key[8] = '\0';
    for (int k = 7; k >= 0 && key[k] == ' '; k--) key[k] = '\0';
    for (int j = 0; j < cl->n; j++) {
        if (strcmp(cl->key[j], key) != 0) continue;
        if (strcmp(cl->value[j], value) == 0) return 0; /* the same value again: no doubt which */
        *st = pk_fail(ctx, PK_ERR_PARSE,
                      "%s: HDU %d: keyword %s is given twice, as %s (byte %lld) and as %s (byte %lld); FITS allows "
                      "one",
                      path, hdu, key, cl->value[j], cl->at[j], value, at);
        return 1;
    }
    if (cl->n == cl->cap) {
        int cap = cl->cap ? 2 * cl->cap : 256;
        char(*nk)[9] = realloc(cl->key, (size_t)cap * sizeof *nk);
        if (nk) cl->key = nk;
        char(*nv)[72] = realloc(cl->value, (size_t)cap * sizeof *nv);
        if (nv) cl->value = nv;
        long long *na = realloc(cl->at, (size_t)cap * sizeof *na);
        if (na) cl->at = na;
        if (!nk || !nv || !na) return 0; /* out of memory: the check stops short, the read goes on */
        cl->cap = cap;
    }
    memcpy(cl->key[cl->n], key, 9);
    memcpy(cl->value[cl->n], value, 72);
    cl->at[cl->n++] = at;
    return 0;
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

/* Whether a block is blank (zeros or spaces): padding after the last HDU. */
static int blank_block(const char *block, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (block[k] != 0 && block[k] != ' ') return 0;
    return 1;
}

/* Whether an XTENSION card starts a block at or after `offset`: an HDU
 * that the sizes before it did not lead to. */
static int xtension_later(const fits_bytes *b, long long offset) {
    char head[8];
    for (;; offset += 2880) {
        size_t got = bytes_read(b, offset, head, sizeof head);
        if (got < sizeof head) return 0;
        if (memcmp(head, "XTENSION", 8) == 0) return 1;
    }
}

/* The walk follows the HDU sizes: every header card is checked, every
 * HDU after the first must start where the one before it ends (a wrong
 * BITPIX, NAXISn, PCOUNT or GCOUNT puts it elsewhere, which an XTENSION
 * card further on shows; other bytes after the last HDU are allowed, as
 * the standard's special records), and the file must hold every HDU's
 * data (the walk lets the last HDU lack the padding to a whole block;
 * cfitsio reads whole blocks, so a reader checks the padded end of the HDU
 * it reads, and a table it does not read may lack it). Where it
 * cannot follow a header (a malformed one) it stops and leaves the verdict
 * to cfitsio. */
static pk_status walk_headers(pk_context *ctx, const char *path, const fits_bytes *b, card_list *cl) {
    /* cfitsio takes any file whose first card starts with SIMPLE (the "="
     * may sit elsewhere), so the check does too */
    char magic[6];
    if (bytes_read(b, 0, magic, sizeof magic) != sizeof magic || memcmp(magic, "SIMPLE", 6) != 0)
        return PK_OK; /* not FITS: cfitsio says so */
    long long file_size = (long long)b->size;
    if (b->fp) file_size = fseeko(b->fp, 0, SEEK_END) == 0 ? (long long)ftello(b->fp) : -1;
    char block[2880];
    long long offset = 0;
    pk_status st = PK_OK;
    for (int hdu = 1; hdu <= 1000 && st == PK_OK; hdu++) {
        cl->n = 0;
        long long bitpix = 0, naxis = 0, pcount = 0, gcount = 1, dims[1000] = {0}, n_dims = 0;
        int ended = 0, groups = 0;
        int partial = 0;
        const long long hdu_start = offset;
        if (hdu > 1) {
            size_t got = bytes_read(b, offset, block, sizeof block);
            if (got == 0 || blank_block(block, got)) break; /* the end, or padding after the last HDU */
            if (got < 8 || memcmp(block, "XTENSION", 8) != 0) {
                if (!xtension_later(b, offset + 2880)) break; /* special records after the last HDU */
                return pk_fail(ctx, PK_ERR_PARSE,
                               "%s: HDU %d does not start where HDU %d's BITPIX, NAXISn, PCOUNT and GCOUNT put "
                               "the end of its data (byte %lld holds no XTENSION card): one of them is wrong, or "
                               "the file is damaged",
                               path, hdu, hdu - 1, offset);
            }
        }
        while (!ended && !partial && st == PK_OK) {
            size_t got = bytes_read(b, offset, block, sizeof block);
            partial = got < sizeof block; /* a truncated file: its whole cards are still checked */
            int n_cards = (int)(got / 80);
            offset += (long long)sizeof block;
            for (int c = 0; c < n_cards && !ended; c++) {
                const char *card = block + 80 * c;
                long long at = offset - (long long)sizeof block + 80 * c;
                if (card_bad(ctx, &st, path, hdu, card, at) || card_repeated(ctx, &st, path, hdu, card, at, cl)) break;
                long long v;
                int r = 0;
                if (strncmp(card, "END     ", 8) == 0) ended = 1;
                else if ((r = card_int(card, "BITPIX", &v)) > 0) bitpix = v;
                else if (!r && (r = card_int(card, "NAXIS", &v)) > 0) naxis = v;
                else if (!r && (r = card_int(card, "PCOUNT", &v)) > 0) pcount = v;
                else if (!r && (r = card_int(card, "GCOUNT", &v)) > 0) gcount = v;
                if (r < 0) return bad_int(ctx, path, hdu, card);
                if (ended || r) continue;
                if (hdu == 1 && strncmp(card, "GROUPS  =", 9) == 0) {
                    int k = 9;
                    while (k < 80 && card[k] == ' ') k++;
                    groups = k < 80 && card[k] == 'T';
                } else if (strncmp(card, "NAXIS", 5) == 0 && card[5] >= '1' && card[5] <= '9') {
                    char key[9];
                    memcpy(key, card, 8);
                    key[8] = '\0';
                    char *sp = strchr(key, ' ');
                    if (sp) *sp = '\0';
                    long idx = strtol(key + 5, NULL, 10);
                    r = idx >= 1 && idx <= 999 ? card_int(card, key, &v) : 0;
                    if (r < 0) return bad_int(ctx, path, hdu, card);
                    if (r > 0) {
                        dims[idx - 1] = v;
                        if (idx > n_dims) n_dims = idx;
                    }
                }
            }
        }
        if (st) break;
        if (!ended && partial && file_size >= 0)
            return pk_fail(
                ctx, PK_ERR_PARSE,
                "%s: truncated: HDU %d's header, from byte %lld, has no END card before the file ends at byte %lld",
                path, hdu, hdu_start, file_size);
        if (ended && partial && file_size >= 0)
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: truncated: HDU %d's header, from byte %lld, ends in a block of 2880 bytes that the "
                           "file cuts at byte %lld",
                           path, hdu, hdu_start, file_size);
        if (!ended || partial) break;
        if (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 && bitpix != -64)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: HDU %d: BITPIX = %lld; FITS allows 8, 16, 32, 64, -32 or -64", path,
                           hdu, bitpix);
        /* a negative size: cfitsio says only "keyword value not positive int" */
        const char *neg_key = naxis < 0 ? "NAXIS" : pcount < 0 ? "PCOUNT" : gcount < 0 ? "GCOUNT" : NULL;
        long long neg_value = naxis < 0 ? naxis : pcount < 0 ? pcount : gcount;
        if (neg_key)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: HDU %d: %s = %lld is negative", path, hdu, neg_key, neg_value);
        for (long long k = 0; k < naxis && k < n_dims; k++)
            if (dims[k] < 0)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: HDU %d: NAXIS%lld = %lld is negative", path, hdu, k + 1,
                               dims[k]);
        /* data size: |BITPIX|/8 * GCOUNT * (PCOUNT + NAXIS1 * ... * NAXISn),
         * NAXIS1 = 0 standing for 1 in random groups (a primary HDU with
         * GROUPS = T) */
        if (naxis < 0 || naxis > 999 || n_dims < naxis || bitpix == 0 || pcount < 0 || gcount < 0) break;
        long long elems = naxis > 0 ? 1 : 0;
        int ok = 1;
        for (long long k = 0; k < naxis && ok; k++) {
            long long d = dims[k] == 0 && k == 0 && naxis > 1 && groups ? 1 : dims[k];
            if (d < 0 || (d > 0 && elems > (1LL << 50) / d)) ok = 0;
            else elems *= d;
        }
        if (!ok || pcount > (1LL << 50) || gcount > (1LL << 20) * 1024) break;
        long long bytes_per = (bitpix < 0 ? -bitpix : bitpix) / 8;
        long long items = elems + pcount;
        if (gcount > 0 && items > (1LL << 52) / gcount / (bytes_per ? bytes_per : 1)) break;
        long long data = items * gcount * bytes_per;
        if (file_size >= 0 && offset + data > file_size)
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: truncated: HDU %d announces %lld bytes of data from byte %lld, the file holds %lld of "
                           "them",
                           path, hdu, data, offset, file_size > offset ? file_size - offset : 0);
        long long padded = (data + 2879) / 2880 * 2880;
        if (file_size >= 0 && offset + padded > file_size) /* as for a header's last block, above */
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: truncated: HDU %d's data, from byte %lld, ends in a block of 2880 bytes that the file "
                           "cuts at byte %lld",
                           path, hdu, offset, file_size);
        /* the padding after the data is zeros (blanks after an ASCII
         * table's): other bytes there are data that a GCOUNT, PCOUNT or
         * NAXISn too small left out. Checked where the next HDU starts
         * where the sizes put it, or the file ends there (elsewhere the
         * next HDU's check says more) */
        char next[8];
        size_t next_got = bytes_read(b, offset + padded, next, sizeof next);
        int next_in_place = next_got < sizeof next || memcmp(next, "XTENSION", 8) == 0;
        if (padded > data && next_in_place) {
            char pad[2880];
            size_t got = bytes_read(b, offset + data, pad, (size_t)(padded - data));
            for (size_t k = 0; k < got; k++)
                if (pad[k] != 0 && pad[k] != ' ')
                    return pk_fail(ctx, PK_ERR_PARSE,
                                   "%s: HDU %d: byte %lld, after the %lld bytes of data that its BITPIX, NAXISn, "
                                   "PCOUNT and GCOUNT announce, is not padding (0x%02x, not zero): one of them is too "
                                   "small, or the file is damaged",
                                   path, hdu, offset + data + (long long)k, data, (unsigned char)pad[k]);
        }
        offset += padded;
    }
    return st;
}

static pk_status check_headers(pk_context *ctx, const char *path, const fits_bytes *b) {
    card_list cl = {0};
    pk_status st = walk_headers(ctx, path, b, &cl);
    free(cl.key);
    free(cl.value);
    free(cl.at);
    return st;
}

/* The whole of a gzip file, decompressed, into *mem (malloc'ed). */
static pk_status gunzip_file(pk_context *ctx, const char *path, unsigned char **mem, size_t *size) {
    gzFile gz = gzopen(path, "rb");
    if (!gz) return pk_fail(ctx, PK_ERR_IO, "%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
    size_t cap = (size_t)1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    pk_status st = buf ? PK_OK : pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    while (st == PK_OK) {
        if (n == cap) {
            unsigned char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory decompressing it (%zu bytes so far)", path, n);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        int got = gzread(gz, buf + n, (unsigned)want);
        if (got < 0) {
            int err = 0;
            const char *text = gzerror(gz, &err);
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: not a readable gzip file (after %zu decompressed bytes): %s", path, n,
                         err == Z_ERRNO ? strerror(errno) : text);
        } else if (got == 0) {
            int err = 0;
            gzerror(gz, &err);
            if (err == Z_BUF_ERROR) /* the stream ended before its end */
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: truncated gzip file (it ends after %zu decompressed bytes)", path,
                             n);
            break;
        } else {
            n += (size_t)got;
        }
    }
    gzclose(gz);
    if (st) {
        free(buf);
        return st;
    }
    *mem = buf;
    *size = n;
    return PK_OK;
}

pk_status pk_fits_open(pk_context *ctx, const char *path, fitsfile **f, long long *size, void **mem) {
    *f = NULL;
    *mem = NULL;
    *size = -1;
    pk_status st = pk_need_seekable(ctx, path, "a FITS file");
    if (st) return st;
    FILE *fp;
    st = pk_open_read(ctx, path, &fp);
    if (st) return st;
    unsigned char magic[8] = {0};
    size_t got = fread(magic, 1, sizeof magic, fp);
    if (got < sizeof magic && ferror(fp)) {
        fclose(fp);
        return pk_fail(ctx, PK_ERR_IO, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
    }
    int gzip = got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    int status = 0;
    if (!gzip && (got < 6 || memcmp(magic, "SIMPLE", 6) != 0)) {
        /* cfitsio would say "tried to move past end of file" or "error
         * reading from FITS file"; it would also open a file that starts
         * with an extension, which check_headers does not walk */
        fclose(fp);
        size_t len = strlen(path);
        int gz_name = len >= 3 && strcasecmp(path + len - 3, ".gz") == 0;
        if (got == 0)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: an empty file (0 bytes)%s", path,
                           gz_name ? ", named .gz but not gzip data" : ", not a FITS file");
        return pk_fail(ctx, PK_ERR_PARSE, "%s: %s (it does not start with 'SIMPLE'%s)", path,
                       gz_name ? "named .gz but not gzip data, nor a FITS file" : "not a FITS file",
                       got == 8 && memcmp(magic, "XTENSION", 8) == 0 ? ": an extension without its primary HDU" : "");
    }
    if (!gzip) {
        fits_bytes b = {fp, NULL, 0};
        st = check_headers(ctx, path, &b);
        if (fseeko(fp, 0, SEEK_END) == 0) *size = (long long)ftello(fp);
        fclose(fp);
        if (st) return st;
        /* the file as it is named: no cfitsio filters or decompression;
         * cfitsio's messages from here to pk_fits_close go above a mark of
         * their own and are cleared back to it */
        fits_write_errmark();
        if (fits_open_diskfile(f, path, READONLY, &status)) {
            char text[FLEN_STATUS];
            fits_get_errstatus(status, text);
            int s = 0;
            if (*f) fits_close_file(*f, &s); /* cfitsio 4.2 keeps the handle on some failures */
            *f = NULL;
            fits_clear_errmark();
            return pk_fail(ctx, status == FILE_NOT_OPENED ? PK_ERR_IO : PK_ERR_PARSE, "%s: cannot open as FITS: %s",
                           path, text);
        }
        return PK_OK;
    }
    fclose(fp);
    unsigned char *buf = NULL;
    size_t n = 0;
    if ((st = gunzip_file(ctx, path, &buf, &n)) != PK_OK) return st;
    if (n < 6 || memcmp(buf, "SIMPLE", 6) != 0) {
        /* not a FITS file inside: say what it is where that is known */
        int zip = n >= 4 && buf[0] == 'P' && buf[1] == 'K';
        free(buf);
        return pk_fail(ctx, PK_ERR_PARSE, "%s: gzip-compressed, but %s", path,
                       zip ? "a zip archive (an .npz?) inside: gunzip it first; only FITS files are read compressed"
                       : n == 0 ? "empty inside (0 bytes once decompressed)"
                                : "not a FITS file inside (it does not start with 'SIMPLE')");
    }
    fits_bytes b = {NULL, buf, n};
    if ((st = check_headers(ctx, path, &b)) != PK_OK) {
        free(buf);
        return st;
    }
    /* cfitsio keeps the addresses of the pointer and the size it is given
     * until the file is closed: both live on the heap, with the bytes */
    fits_memory *m = malloc(sizeof *m);
    if (!m) {
        free(buf);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    m->bytes = buf;
    m->size = n;
    /* a fixed name: cfitsio reads brackets in the name it is given as an
     * extension or a filter (pairkit's messages name the path) */
    fits_write_errmark();
    if (fits_open_memfile(f, "pairkit-gunzipped.fits", READONLY, &m->bytes, &m->size, 0, NULL, &status)) {
        char text[FLEN_STATUS];
        fits_get_errstatus(status, text);
        pk_fits_close(*f, m);
        *f = NULL;
        return pk_fail(ctx, PK_ERR_PARSE, "%s: decompressed, cannot open as FITS: %s", path, text);
    }
    *mem = m;
    *size = (long long)n;
    return PK_OK;
}

void pk_fits_close(fitsfile *f, void *mem) {
    int s = 0;
    if (f) fits_close_file(f, &s);
    fits_memory *m = mem;
    if (m) free(m->bytes);
    free(m);
    fits_clear_errmark(); /* back to pk_fits_open's mark */
}
