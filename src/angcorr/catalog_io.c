/* catalog_io.c - reading sky catalogs. The native text format: the object
 * count, then that many rows "ra dec" separated by spaces or tabs, LF or
 * CRLF line ends. Values are parsed to double (never float: parsing to
 * float first moves thousands of pairs across bin edges) and checked: every
 * error names the file and the line.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr_internal.h"

double pk_units_to_rad(double value, pk_units units) {
    switch (units) {
    case PK_UNITS_ARCMIN: return value * (M_PI / 10800.0);
    case PK_UNITS_DEG: return value * (M_PI / 180.0);
    case PK_UNITS_RAD: return value;
    case PK_UNITS_ARCSEC: return value * (M_PI / 648000.0);
    }
    return (double)NAN; /* units outside the enum */
}

pk_status pk_units_parse(const char *name, pk_units *out) {
    if (!name || !out) return PK_ERR_INVALID;
    if (strcmp(name, "arcmin") == 0) *out = PK_UNITS_ARCMIN;
    else if (strcmp(name, "deg") == 0) *out = PK_UNITS_DEG;
    else if (strcmp(name, "rad") == 0) *out = PK_UNITS_RAD;
    else if (strcmp(name, "arcsec") == 0) *out = PK_UNITS_ARCSEC;
    else return PK_ERR_INVALID;
    return PK_OK;
}

const char *pk_units_name(pk_units units) {
    switch (units) {
    case PK_UNITS_ARCMIN: return "arcmin";
    case PK_UNITS_DEG: return "deg";
    case PK_UNITS_ARCSEC: return "arcsec";
    case PK_UNITS_RAD: break;
    }
    return "rad";
}

double pk_dec_limit(pk_units units) {
    switch (units) {
    case PK_UNITS_ARCMIN: return 5400.0;
    case PK_UNITS_DEG: return 90.0;
    case PK_UNITS_ARCSEC: return 324000.0;
    case PK_UNITS_RAD: break;
    }
    return M_PI / 2;
}

/* Whether |ra| is at most 4096 radians (652 turns; unwrapped angles, such
 * as a spiral's, are directions too): from 4096 rad on, neighbouring
 * float64 values lie 2^-40 = 9.1e-13 rad apart or more, and far beyond, no
 * direction is left at all (1e20 arcmin is a multiple of 4 radians). */
int pk_ra_in_range(double ra, pk_units units) {
    double lim = 4096.0 / pk_units_to_rad(1.0, units);
    return ra >= -lim && ra <= lim;
}

pk_status pk_units_check(pk_context *ctx, pk_units units, const char *fn) {
    if (!isnan(pk_units_to_rad(1.0, units))) return PK_OK;
    return pk_fail(ctx, PK_ERR_INVALID, "%s: units %d is not one of PK_UNITS_ARCMIN, _DEG, _RAD, _ARCSEC", fn,
                   (int)units);
}

static pk_status catalog_alloc(pk_context *ctx, size_t n, const char *where, pk_catalog *out) {
    memset(out, 0, sizeof *out);
    out->ra = malloc((n ? n : 1) * sizeof(double));
    out->dec = malloc((n ? n : 1) * sizeof(double));
    if (!out->ra || !out->dec) {
        pk_catalog_free(out);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory for %zu objects", where, n);
    }
    out->n = n;
    return PK_OK;
}

void pk_catalog_free(pk_catalog *catalog) {
    if (!catalog) return;
    free(catalog->ra);
    free(catalog->dec);
    memset(catalog, 0, sizeof *catalog);
}

/* Check one position given in `units`; on failure the message says
 * "<where>: <problem>". */
static pk_status check_position(pk_context *ctx, double ra, double dec, pk_units units, const char *where) {
    if (!isfinite(ra)) return pk_fail(ctx, PK_ERR_PARSE, "%s: ra is not a finite number", where);
    if (!isfinite(dec)) return pk_fail(ctx, PK_ERR_PARSE, "%s: dec is not a finite number", where);
    double lim = pk_dec_limit(units);
    char num[32];
    if (dec < -lim || dec > lim)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: dec %s %s is outside [-90, 90] degrees", where,
                       pk_format_exact(dec, num), pk_units_name(units));
    if (!pk_ra_in_range(ra, units))
        return pk_fail(
            ctx, PK_ERR_PARSE,
            "%s: ra %s %s is beyond 4096 radians (652 turns), where float64 values lie about 1e-12 rad apart or more",
            where, pk_format_exact(ra, num), pk_units_name(units));
    return PK_OK;
}

pk_status pk_catalog_from_arrays(pk_context *ctx, size_t n, const double *ra, const double *dec, pk_units units,
                                 const char *field, pk_catalog *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_catalog_from_arrays: out is NULL");
    memset(out, 0, sizeof *out);
    if (!field) field = "catalog";
    pk_status ust = pk_units_check(ctx, units, "pk_catalog_from_arrays");
    if (ust) return ust;
    if (n == 0) return pk_fail(ctx, PK_ERR_INVALID, "%s: the catalog is empty", field);
    if (!ra || !dec)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_catalog_from_arrays: %s is NULL (with n = %zu)", !ra ? "ra" : "dec", n);
    pk_status st = catalog_alloc(ctx, n, field, out);
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        char where[256];
        snprintf(where, sizeof where, "%s[%zu]", field, i);
        if ((st = check_position(ctx, ra[i], dec[i], units, where)) != PK_OK) {
            pk_catalog_free(out);
            return st;
        }
        out->ra[i] = pk_units_to_rad(ra[i], units);
        out->dec[i] = pk_units_to_rad(dec[i], units);
    }
    return PK_OK;
}

/* A cursor over the lines of a text file. */
typedef struct line_reader {
    char *p, *end;
    size_t line;
} line_reader;

/* Next line, NUL-terminated in place, with CR/LF stripped; NULL at EOF. */
static char *next_line(line_reader *r) {
    if (r->p >= r->end) return NULL;
    char *s = r->p;
    char *nl = memchr(s, '\n', (size_t)(r->end - s));
    char *e = nl ? nl : r->end;
    r->p = nl ? nl + 1 : r->end;
    if (e > s && e[-1] == '\r') e--;
    *e = '\0';
    r->line++;
    return s;
}

static int is_blank(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return *s == '\0';
}

/* The first 40 bytes of a token as a message shows them: a byte that is
 * not printable ASCII (a stray carriage return, a form feed) written as
 * \r, \f or \xNN, so that it can be seen. */
static void show_token(char *dst, size_t size, const char *src, size_t len) {
    size_t at = 0;
    dst[0] = '\0';
    for (size_t k = 0; k < len && k < 40 && at + 5 < size; k++) {
        unsigned char c = (unsigned char)src[k];
        if (c >= 0x20 && c < 0x7f) dst[at++] = (char)c;
        else if (c == '\r') at += (size_t)snprintf(dst + at, size - at, "\\r");
        else if (c == '\f') at += (size_t)snprintf(dst + at, size - at, "\\f");
        else if (c == '\v') at += (size_t)snprintf(dst + at, size - at, "\\v");
        else at += (size_t)snprintf(dst + at, size - at, "\\x%02x", c);
        dst[at] = '\0';
    }
}

/* Parse one double token from *s; fails on text, leaves *s past it. */
static int parse_double(char **s, double *v, char *token, size_t token_size) {
    char *p = *s;
    while (*p == ' ' || *p == '\t') p++;
    char *start = p;
    while (*p && *p != ' ' && *p != '\t') p++;
    size_t len = (size_t)(p - start);
    show_token(token, token_size, start, len);
    if (len == 0) return 0;
    char saved = *p;
    *p = '\0';
    char *endp;
    *v = pk_catalog_strtod(start, &endp); /* overflow gives inf, which the range check reports */
    int ok = endp == p;
    *p = saved;
    *s = p;
    return ok;
}

static pk_status read_native(pk_context *ctx, const char *path, char *text, size_t size, pk_units units,
                             pk_catalog *out) {
    line_reader r = {text, text + size, 0};
    char *line;
    while ((line = next_line(&r)) != NULL && is_blank(line)) {
    }
    if (!line) return pk_fail(ctx, PK_ERR_PARSE, "%s: empty file, expected the object count on line 1", path);
    size_t count_line = r.line;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    char *endp;
    errno = 0;
    long long n = strtoll(p, &endp, 10);
    if (endp != p && is_blank(endp) && errno == ERANGE)
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the object count '%.40s' is too %s", path, count_line, p,
                       n < 0 ? "small (it must be at least 1)" : "large");
    if (endp == p || !is_blank(endp)) {
        char shown[200];
        show_token(shown, sizeof shown, p, strlen(p));
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected the object count (a whole number), found '%s'%s", path,
                       count_line, shown,
                       strncmp(p, "SIMPLE  =", 9) == 0 ? " (a FITS file, read as native text because its name "
                                                         "does not end in .fits: give --format fits, and the file "
                                                         "itself where this is a pipe)"
                       : strchr(p, '\r')               ? " (carriage returns without line feeds: lines must end in LF "
                                                         "or CRLF)"
                       : *p == '#' || strchr(p, ',')   ? " (a CSV catalog? name it .csv or give --format csv)"
                                                       : "");
    }
    if (n < 1) return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the object count must be at least 1", path, count_line);
    if ((unsigned long long)n > (unsigned long long)(size / 4 + 1)) {
        /* more objects than the file has room for (a row takes 4 bytes at
         * least): said as the end of the file would say it */
        size_t rows = 0;
        while ((line = next_line(&r)) != NULL) rows += !is_blank(line);
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the count on line %zu says %lld objects but the file has %zu row%s",
                       path, r.line, count_line, n, rows, rows == 1 ? "" : "s");
    }
    pk_status st = catalog_alloc(ctx, (size_t)n, path, out);
    if (st) return st;
    size_t rows = 0;
    while ((line = next_line(&r)) != NULL) {
        if (is_blank(line)) continue;
        if (rows == (size_t)n) {
            pk_catalog_free(out);
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: more rows than the %lld objects the count on line %zu says",
                           path, r.line, n, count_line);
        }
        double v[2];
        char token[200];
        p = line;
        for (int c = 0; c < 2; c++) {
            if (!parse_double(&p, &v[c], token, sizeof token)) {
                pk_catalog_free(out);
                if (token[0] == '\0')
                    return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 2 values (ra dec), found %d", path, r.line, c);
                return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: %s '%s' is not a number", path, r.line,
                               c == 0 ? "ra" : "dec", token);
            }
        }
        if (!is_blank(p)) {
            pk_catalog_free(out);
            return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: expected 2 values (ra dec), found more", path, r.line);
        }
        char where[300];
        snprintf(where, sizeof where, "%s:%zu", path, r.line);
        if ((st = check_position(ctx, v[0], v[1], units, where)) != PK_OK) {
            pk_catalog_free(out);
            return st;
        }
        out->ra[rows] = pk_units_to_rad(v[0], units);
        out->dec[rows] = pk_units_to_rad(v[1], units);
        rows++;
    }
    if (rows != (size_t)n) {
        pk_catalog_free(out);
        return pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the count on line %zu says %lld objects but the file has %zu row%s",
                       path, r.line, count_line, n, rows, rows == 1 ? "" : "s");
    }
    return PK_OK;
}

pk_status pk_catalog_read_text(pk_context *ctx, const char *path, const char *kind, char **text, size_t *size) {
    pk_status st = pk_read_file(ctx, path, text, size);
    if (st) return st;
    const char *refused = NULL;
    if (*size >= 2 && (unsigned char)(*text)[0] == 0x1f && (unsigned char)(*text)[1] == 0x8b)
        refused = "gzip-compressed; %s catalogs are read uncompressed (gunzip it first; FITS may stay compressed)";
    else if (memchr(*text, '\0', *size)) refused = "not a %s catalog (it contains NUL bytes)";
    if (!refused) return PK_OK;
    free(*text);
    *text = NULL;
    char what[128];
    snprintf(what, sizeof what, refused, kind);
    return pk_fail(ctx, PK_ERR_PARSE, "%s: %s", path, what);
}

pk_status pk_catalog_read(pk_context *ctx, const char *path, pk_units units, pk_catalog *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_catalog_read: out is NULL");
    memset(out, 0, sizeof *out);
    pk_status ust = pk_units_check(ctx, units, "pk_catalog_read");
    if (ust) return ust;
    char *text;
    size_t size;
    pk_status st = pk_catalog_read_text(ctx, path, "text", &text, &size);
    if (st) return st;
    /* a UTF-8 byte-order mark (editors on some systems write one) is not
     * part of the count */
    size_t bom = size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    st = read_native(ctx, path, text + bom, size - bom, units, out);
    free(text);
    return st;
}
