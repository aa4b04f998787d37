/* catalog_formats.c - catalogs as CSV with a header and as FITS binary
 * tables (cfitsio), with named RA, Dec and weight columns, and the reader
 * that picks the format by extension or by request.
 *
 * As in catalog_io.c, values are parsed to double and checked; every error
 * names the file and the line (CSV) or row (FITS) and the column.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <fitsio.h>

#include "angcorr_internal.h"
#include "common/fits_open.h"

pk_status pk_catalog_format_parse(const char *name, pk_catalog_format *out) {
    if (!name || !out) return PK_ERR_INVALID;
    if (strcmp(name, "auto") == 0) *out = PK_FORMAT_AUTO;
    else if (strcmp(name, "native") == 0 || strcmp(name, "txt") == 0) *out = PK_FORMAT_NATIVE;
    else if (strcmp(name, "csv") == 0) *out = PK_FORMAT_CSV;
    else if (strcmp(name, "fits") == 0) *out = PK_FORMAT_FITS;
    else return PK_ERR_INVALID;
    return PK_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

pk_catalog_format pk_catalog_format_of(const char *path) {
    if (!path) return PK_FORMAT_NATIVE;
    if (ends_with(path, ".csv") || ends_with(path, ".csv.gz")) return PK_FORMAT_CSV;
    const char *fits[] = {".fits", ".fit", ".fts", ".fits.gz", ".fit.gz", ".fts.gz"};
    for (size_t k = 0; k < sizeof fits / sizeof fits[0]; k++)
        if (ends_with(path, fits[k])) return PK_FORMAT_FITS;
    return PK_FORMAT_NATIVE;
}

/* Check and convert one object, RA in ra_units and Dec in dec_units;
 * where names file and line or row. */
static pk_status store_object(pk_context *ctx, const char *where, double ra, double dec, pk_units ra_units,
                              pk_units dec_units, pk_catalog *out, size_t i) {
    if (!isfinite(ra)) return pk_fail(ctx, PK_ERR_PARSE, "%s: ra is not a finite number", where);
    if (!isfinite(dec)) return pk_fail(ctx, PK_ERR_PARSE, "%s: dec is not a finite number", where);
    double lim = pk_dec_limit(dec_units);
    char num[32];
    if (dec < -lim || dec > lim)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: dec %s %s is outside [-90, 90] degrees", where,
                       pk_format_exact(dec, num), pk_units_name(dec_units));
    if (!pk_ra_in_range(ra, ra_units))
        return pk_fail(
            ctx, PK_ERR_PARSE,
            "%s: ra %s %s is beyond 4096 radians (652 turns), where float64 values lie about 1e-12 rad apart or more",
            where, pk_format_exact(ra, num), pk_units_name(ra_units));
    out->ra[i] = pk_units_to_rad(ra, ra_units);
    out->dec[i] = pk_units_to_rad(dec, dec_units);
    return PK_OK;
}

static pk_status alloc_catalog(pk_context *ctx, const char *path, size_t n, int with_weights, pk_catalog *out,
                               double **weights) {
    out->n = n;
    out->ra = malloc((n ? n : 1) * sizeof(double));
    out->dec = malloc((n ? n : 1) * sizeof(double));
    if (with_weights) *weights = malloc((n ? n : 1) * sizeof(double));
    if (!out->ra || !out->dec || (with_weights && !*weights)) {
        pk_catalog_free(out);
        if (with_weights) {
            free(*weights);
            *weights = NULL;
        }
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory for %zu objects", path, n);
    }
    return PK_OK;
}

/* ---- CSV -------------------------------------------------------------------- */

/* Split a line at commas in place, fields trimmed of blanks. A field that
 * starts with a double quote runs to the matching closing quote, so that it
 * may hold commas, and "" inside it is one quote (RFC 4180; a quoted field
 * does not continue on the next line). Returns the number of fields (at
 * most max are stored), or -1 with *why set when a quote is not closed or
 * text follows a closing quote. */
static int split_csv(char *line, char **fields, int max, const char **why) {
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *f, *e;
        if (*p == '"') {
            f = e = ++p;
            for (;;) {
                if (*p == '\0') {
                    *why = "a quoted field is not closed on its line";
                    return -1;
                }
                if (*p == '"') {
                    if (p[1] != '"') break;
                    p++; /* "" is one quote */
                }
                *e++ = *p++;
            }
            p++; /* past the closing quote */
            while (*p == ' ' || *p == '\t' || *p == '\r') p++;
            if (*p != ',' && *p != '\0') {
                *why = "text after a quoted field's closing quote";
                return -1;
            }
        } else {
            f = p;
            while (*p && *p != ',') p++;
            e = p;
            while (e > f && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
        }
        char end = *p;
        *e = '\0';
        if (n < max) fields[n] = f;
        n++;
        if (!end) break;
        p++;
    }
    return n;
}

static pk_status find_named_column(pk_context *ctx, const char *path, const char *where, const char *kind,
                                   const char *want, int given, int numbers, char *const *names, int n_cols, int *col);

/* One column for two roles (--ra-col dec) read Dec as RA too: refused.
 * col[] are the columns found for RA, Dec and weight (-1: none), counted
 * from base; name[] their names. */
static pk_status one_role_each(pk_context *ctx, const char *path, const char *const kind[3], const int col[3],
                               const char *const name[3], int base) {
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (col[i] >= 0 && col[i] == col[j])
                return pk_fail(ctx, PK_ERR_PARSE, "%s: column %d '%s' is asked for as both the %s and the %s", path,
                               col[i] + 1 - base, name[i], kind[i], kind[j]);
    return PK_OK;
}

static pk_status missing_column(pk_context *ctx, const char *path, const char *where, const char *kind,
                                const char *want, char **names, int n) {
    char list[256] = "";
    size_t used = 0;
    for (int c = 0; c < n && used + 2 < sizeof list; c++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", c ? ", " : "", names[c]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return pk_fail(ctx, PK_ERR_PARSE, "%s%s: no %s column '%s' (the columns are: %s)", path, where, kind, want, list);
}

#define CSV_MAX_COLUMNS 4096

static pk_status read_csv(pk_context *ctx, const char *path, char *text, size_t size, const pk_catalog_spec *spec,
                          pk_catalog *out, double **weights) {
    const char *want[3] = {spec->ra_column ? spec->ra_column : "ra", spec->dec_column ? spec->dec_column : "dec",
                           spec->weight_column};
    const int given[3] = {spec->ra_column != NULL, spec->dec_column != NULL, 1};
    const char *kind[3] = {"RA", "Dec", "weight"};
    char **fields = malloc(CSV_MAX_COLUMNS * sizeof(char *));
    if (!fields) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    /* lines: count them first (an upper bound on rows) */
    size_t n_lines = 1;
    for (size_t i = 0; i < size; i++) n_lines += text[i] == '\n';
    char *p = text, *end = text + size;
    /* a UTF-8 byte order mark (spreadsheets write one) is not part of the first column's name */
    if (size >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    size_t line_no = 0;
    char *header = NULL;
    int col[3] = {-1, -1, -1}, n_cols = 0;
    pk_status st = PK_OK;
    size_t rows = 0;
    while (p < end && st == PK_OK) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line = p;
        char *e = nl ? nl : end;
        p = nl ? nl + 1 : end;
        *e = '\0';
        line_no++;
        char *q = line;
        while (*q == ' ' || *q == '\t' || *q == '\r') q++;
        if (*q == '\0' || *q == '#') continue; /* blank lines and comments */
        const char *why = NULL;
        if (!header) {
            header = line;
            n_cols = split_csv(line, fields, CSV_MAX_COLUMNS, &why);
            if (n_cols < 0) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the header line: %s", path, line_no, why);
                header = NULL;
                break;
            }
            if (n_cols > CSV_MAX_COLUMNS) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: more than %d columns", path, line_no, CSV_MAX_COLUMNS);
                break;
            }
            char where[32];
            snprintf(where, sizeof where, ":%zu", line_no);
            for (int c = 0; c < 3 && st == PK_OK; c++) {
                if (!want[c]) continue;
                st = find_named_column(ctx, path, where, kind[c], want[c], given[c], 0, fields, n_cols, &col[c]);
            }
            if (st == PK_OK) {
                const char *name[3];
                for (int c = 0; c < 3; c++) name[c] = col[c] >= 0 ? fields[col[c]] : "";
                st = one_role_each(ctx, path, kind, col, name, 0);
            }
            if (st == PK_OK) st = alloc_catalog(ctx, path, n_lines, want[2] != NULL, out, weights);
            continue;
        }
        int nf = split_csv(line, fields, CSV_MAX_COLUMNS, &why);
        if (nf < 0) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: %s", path, line_no, why);
            break;
        }
        if (nf > n_cols) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the row has %d fields, the header names %d", path, line_no, nf,
                         n_cols);
            break;
        }
        double v[3] = {0, 0, 1};
        for (int c = 0; c < 3 && st == PK_OK; c++) {
            if (col[c] < 0) continue;
            if (col[c] >= nf) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: the row has %d fields, column '%s' (%d) is missing", path,
                             line_no, nf, want[c], col[c] + 1);
                break;
            }
            const char *f = fields[col[c]];
            char *endp;
            errno = 0;
            v[c] = pk_catalog_strtod(f, &endp);
            if (*f == '\0' || *endp != '\0') {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: column '%s': '%.40s' is not a number", path, line_no, want[c],
                             f);
                break;
            }
            if (!isfinite(v[c])) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s:%zu: column '%s': the %s is %s", path, line_no, want[c],
                             c == 2   ? "weight"
                             : c == 0 ? "RA"
                                      : "Dec",
                             isnan(v[c]) ? "NaN" : "infinite");
                break;
            }
        }
        if (st) break;
        char where[300];
        snprintf(where, sizeof where, "%s:%zu", path, line_no);
        if ((st = store_object(ctx, where, v[0], v[1], spec->units, spec->units, out, rows)) != PK_OK) break;
        if (want[2]) (*weights)[rows] = v[2];
        rows++;
    }
    free(fields);
    if (st == PK_OK && !header)
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: empty file, expected a header line naming the columns", path);
    if (st == PK_OK && rows == 0) st = pk_fail(ctx, PK_ERR_PARSE, "%s: no rows after the header", path);
    if (st) {
        if (header) {
            pk_catalog_free(out);
            if (want[2] && weights) {
                free(*weights);
                *weights = NULL;
            }
        }
        return st;
    }
    out->n = rows;
    return PK_OK;
}

/* ---- FITS ------------------------------------------------------------------- */

static pk_status fits_error(pk_context *ctx, const char *path, const char *what, int status) {
    char text[FLEN_STATUS];
    fits_get_errstatus(status, text);
    return pk_fail(ctx, status == FILE_NOT_OPENED ? PK_ERR_IO : PK_ERR_PARSE, "%s: %s: %s", path, what, text);
}

static const char *option_of(const char *kind) {
    return strcmp(kind, "RA") == 0 ? "--ra-col" : strcmp(kind, "Dec") == 0 ? "--dec-col" : "--weight-col";
}

/* The column named want (0-based into *col), names[] being the table's
 * column names ("" where there is none). Names are matched without
 * regard to case; where two columns match so, a name the caller gave
 * (given: not a default) picks the one it matches exactly, case included,
 * and otherwise the choice is refused. With numbers (FITS, as cfitsio took
 * them), a given name that no column bears may be a column's number from
 * 1. where: after the path in messages (":1" for a CSV header). */
static pk_status find_named_column(pk_context *ctx, const char *path, const char *where, const char *kind,
                                   const char *want, int given, int numbers, char *const *names, int n_cols, int *col) {
    int first = -1, second = -1, exact = -1, exact2 = -1;
    for (int k = 0; k < n_cols; k++) {
        if (strcasecmp(names[k], want) != 0) continue;
        if (first < 0) first = k;
        else if (second < 0) second = k;
        if (strcmp(names[k], want) != 0) continue;
        if (exact < 0) exact = k;
        else if (exact2 < 0) exact2 = k;
    }
    if (first < 0 && given && numbers && n_cols > 0) {
        char *end;
        long number = strtol(want, &end, 10);
        if (end != want && *end == '\0' && want[0] >= '1' && want[0] <= '9' && number <= n_cols) {
            *col = (int)number - 1;
            return PK_OK;
        }
    }
    if (first < 0) {
        char *list[64];
        int m = n_cols < 64 ? n_cols : 64;
        for (int k = 0; k < m; k++) list[k] = names[k][0] ? names[k] : "?";
        return missing_column(ctx, path, where, kind, want, list, m);
    }
    if (exact2 >= 0)
        return pk_fail(ctx, PK_ERR_PARSE, "%s%s: the %s column '%s' is named twice (columns %d and %d)", path, where,
                       kind, want, exact + 1, exact2 + 1);
    if (second >= 0 && given && exact >= 0) {
        *col = exact; /* the one named exactly */
        return PK_OK;
    }
    if (second >= 0 && strcmp(names[first], names[second]) == 0) /* no name given could choose between them */
        return pk_fail(ctx, PK_ERR_PARSE, "%s%s: the %s column '%s' is named twice (columns %d and %d)", path, where,
                       kind, names[first], first + 1, second + 1);
    if (second >= 0)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s%s: the %s column '%s' could be column %d '%s' or column %d '%s' (names are matched without "
                       "regard to case): give the name of one exactly, case included, to choose it (%s)",
                       path, where, kind, want, first + 1, names[first], second + 1, names[second], option_of(kind));
    *col = first;
    return PK_OK;
}

/* A binary table's column must hold one real number a row: a vector
 * column (TFORM 2D) would be read element by element across the rows, a
 * complex one as real and imaginary parts in turn, one of arrays of
 * varying length from the first row's array. */
static pk_status check_fits_column(pk_context *ctx, fitsfile *f, const char *path, const char *kind, int col,
                                   const char *name) {
    char key[FLEN_KEYWORD], tform[FLEN_VALUE] = "?";
    int s = 0;
    snprintf(key, sizeof key, "TFORM%d", col);
    if (fits_read_key(f, TSTRING, key, tform, NULL, &s)) snprintf(tform, sizeof tform, "?");
    int type = 0;
    long repeat = 0, width = 0;
    s = 0;
    if (fits_get_coltype(f, col, &type, &repeat, &width, &s)) return fits_error(ctx, path, name, s);
    char many[64];
    const char *what = NULL;
    if (type < 0) what = "holds an array of varying length a row";
    else if (type == TSTRING) what = "holds text";
    else if (type == TLOGICAL) what = "holds logical values";
    else if (type == TCOMPLEX || type == TDBLCOMPLEX) what = "holds complex numbers";
    else if (repeat == 0) what = "holds no value a row";
    else if (repeat != 1) {
        snprintf(many, sizeof many, "holds %ld values a row", repeat);
        what = many;
    }
    if (!what) return PK_OK;
    return pk_fail(ctx, PK_ERR_PARSE, "%s: the %s column '%s' %s (%s = '%s'); a catalog needs one real number a row",
                   path, kind, name, what, key, tform);
}

/* Where column col's field lies in an ASCII table's rows, and its null
 * string (TNULLn without trailing blanks; "" when none): 0, or the status
 * of the failed read. */
static int ascii_field_place(fitsfile *f, int col, long *tbcol, long *width, long *row_bytes, char *nulstr) {
    char ttype[FLEN_VALUE], tunit[FLEN_VALUE], tform[FLEN_VALUE], tdisp[FLEN_VALUE];
    double scale, zero;
    int type, s = 0;
    long repeat;
    fits_get_acolparms(f, col, ttype, tbcol, tunit, tform, &scale, &zero, nulstr, tdisp, &s);
    fits_get_coltype(f, col, &type, &repeat, width, &s);
    fits_read_key(f, TLONG, "NAXIS1", row_bytes, NULL, &s);
    if (!s && (*tbcol < 1 || *width < 1 || *row_bytes < *tbcol - 1 + *width)) s = BAD_TBCOL;
    size_t b = s ? 0 : strlen(nulstr);
    while (b > 0 && nulstr[b - 1] == ' ') b--;
    nulstr[b] = '\0';
    return s;
}

/* A field's text without the blanks around it, into text. */
static void field_text(const unsigned char *field, long width, char *text, size_t cap) {
    long a = 0, b = width;
    while (a < b && field[a] == ' ') a++;
    while (b > a && field[b - 1] == ' ') b--;
    snprintf(text, cap, "%.*s", (int)(b - a), (const char *)field + a);
}

/* The first row (from 1) whose field of column col in an ASCII table
 * holds no digit before its exponent, if any, and is not the column's
 * null string: a blank field, which cfitsio reads as 0 when the column
 * has no TNULLn, or a lone sign, point or exponent ("-", "E5"), which it
 * reads as 0. Its text in text; 0 when there is none, -1 with *status
 * set when the table cannot be read. */
static long ascii_empty_row(fitsfile *f, int col, long n_rows, char *text, size_t cap, int *status) {
    long tbcol, width, row_bytes;
    char nulstr[FLEN_VALUE];
    if ((*status = ascii_field_place(f, col, &tbcol, &width, &row_bytes, nulstr)) != 0) return -1;
    size_t null_len = strlen(nulstr);
    long chunk = (1L << 20) / row_bytes + 1;
    unsigned char *rows = malloc((size_t)chunk * (size_t)row_bytes);
    if (!rows) {
        *status = MEMORY_ALLOCATION;
        return -1;
    }
    long found = 0;
    for (long r0 = 1; r0 <= n_rows && !found; r0 += chunk) {
        long m = n_rows - r0 + 1 < chunk ? n_rows - r0 + 1 : chunk;
        if (fits_read_tblbytes(f, r0, 1, (LONGLONG)m * row_bytes, rows, status)) {
            found = -1;
            break;
        }
        for (long i = 0; i < m && !found; i++) {
            const unsigned char *field = rows + i * row_bytes + tbcol - 1;
            long a = 0, b = width, digit = 0;
            while (a < b && field[a] == ' ') a++;
            while (b > a && field[b - 1] == ' ') b--;
            for (long k = a; k < b && !digit && !strchr("EeDd", field[k] ? field[k] : 'E'); k++)
                digit = field[k] >= '0' && field[k] <= '9';
            /* null as cfitsio reads it: the field starts with TNULLn */
            if (digit || (null_len && (size_t)width >= null_len && memcmp(field, nulstr, null_len) == 0)) continue;
            found = r0 + i;
            field_text(field, width, text, cap);
        }
    }
    free(rows);
    return found;
}

/* The first row (from 1) of column col that cfitsio cannot read as a
 * number, its text (trimmed) in text and cfitsio's reason in why; 0 when
 * every row reads. */
static long ascii_bad_row(fitsfile *f, int col, long n_rows, char *text, size_t cap, char *why) {
    enum { CHUNK = 1024 };
    double v[CHUNK], nulval = (double)NAN;
    for (long r0 = 1; r0 <= n_rows; r0 += CHUNK) {
        long m = n_rows - r0 + 1 < CHUNK ? n_rows - r0 + 1 : CHUNK;
        int s = 0, anynul = 0;
        if (!fits_read_col(f, TDOUBLE, col, r0, 1, m, &nulval, v, &anynul, &s)) continue;
        for (long r = r0; r < r0 + m; r++) {
            s = 0;
            if (!fits_read_col(f, TDOUBLE, col, r, 1, 1, &nulval, v, &anynul, &s)) continue;
            fits_get_errstatus(s, why);
            long tbcol, width, row_bytes;
            char nulstr[FLEN_VALUE];
            unsigned char field[1024];
            snprintf(text, cap, "?");
            s = 0;
            if (!ascii_field_place(f, col, &tbcol, &width, &row_bytes, nulstr) && width < (long)sizeof field &&
                !fits_read_tblbytes(f, r, tbcol, width, field, &s))
                field_text(field, width, text, cap);
            return r;
        }
    }
    return 0;
}

/* What a value that is not finite was in the file: cfitsio reads an
 * infinity as null (NaN here), as it does a NaN and an integer equal to
 * the column's TNULLn; read again without the check of nulls, the row
 * tells them apart. */
static const char *not_finite_word(fitsfile *f, int col, long row) {
    double raw = 0, no_check = 0;
    int anynul = 0, s = 0;
    fits_read_col(f, TDOUBLE, col, row, 1, 1, &no_check, &raw, &anynul, &s);
    if (s || isfinite(raw)) return "null (the column's TNULL value)";
    return isnan(raw) ? "NaN" : "infinite";
}

/* The units of angle a FITS TUNITn value names, matched without regard to
 * case and blanks around it: 1 with *out set, 0 when it is empty (no
 * units said), -1 when it names something else. */
static int tunit_units(const char *tunit, pk_units *out) {
    static const struct {
        const char *name;
        pk_units units;
    } known[] = {{"deg", PK_UNITS_DEG},       {"degree", PK_UNITS_DEG},       {"degrees", PK_UNITS_DEG},
                 {"rad", PK_UNITS_RAD},       {"radian", PK_UNITS_RAD},       {"radians", PK_UNITS_RAD},
                 {"arcmin", PK_UNITS_ARCMIN}, {"arcminute", PK_UNITS_ARCMIN}, {"arcminutes", PK_UNITS_ARCMIN},
                 {"arcsec", PK_UNITS_ARCSEC}, {"arcsecond", PK_UNITS_ARCSEC}, {"arcseconds", PK_UNITS_ARCSEC}};
    while (*tunit == ' ') tunit++;
    size_t len = strlen(tunit);
    while (len > 0 && tunit[len - 1] == ' ') len--;
    if (len == 0) return 0;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (strlen(known[k].name) == len && strncasecmp(tunit, known[k].name, len) == 0) {
            *out = known[k].units;
            return 1;
        }
    return -1;
}

/* The units of the RA or Dec column col (kind, named name) into *units:
 * those its TUNITn names, else spec->units; refused when TUNITn names
 * something else, or other units than spec->units with units_given. */
static pk_status fits_column_units(pk_context *ctx, fitsfile *f, const char *path, const pk_catalog_spec *spec,
                                   const char *kind, int col, const char *name, pk_units *units) {
    char key[FLEN_KEYWORD], tunit[FLEN_VALUE] = "";
    int s = 0;
    snprintf(key, sizeof key, "TUNIT%d", col);
    if (fits_read_key(f, TSTRING, key, tunit, NULL, &s)) tunit[0] = '\0'; /* no TUNITn: no units said */
    pk_units said;
    int known = tunit_units(tunit, &said);
    *units = spec->units;
    if (known == 0) return PK_OK;
    if (known < 0)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: the %s column '%s' has %s = '%s', which is not units of angle pairkit reads (deg, degree, "
                       "degrees, rad, radian, radians, arcmin, arcminute, arcminutes, arcsec, arcsecond, arcseconds, "
                       "in any case)",
                       path, kind, name, key, tunit);
    if (spec->units_given && said != spec->units)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: the %s column '%s' is in %s (%s = '%s'), not in %s as --units says; leave --units out "
                       "to read each column in the units of its %s",
                       path, kind, name, pk_units_name(said), key, tunit, pk_units_name(spec->units), key);
    *units = said;
    return PK_OK;
}

static pk_status read_fits(pk_context *ctx, const char *path, const pk_catalog_spec *spec, pk_catalog *out,
                           double **weights) {
    const char *want[3] = {spec->ra_column ? spec->ra_column : "ra", spec->dec_column ? spec->dec_column : "dec",
                           spec->weight_column};
    const int given[3] = {spec->ra_column != NULL, spec->dec_column != NULL, 1};
    const char *kind[3] = {"RA", "Dec", "weight"};
    fitsfile *f = NULL;
    int status = 0;
    long long file_size = -1;
    void *mem = NULL;
    pk_status hst = pk_fits_open(ctx, path, &f, &file_size, &mem);
    if (hst) return hst;
    /* the first HDU that holds a table */
    int hdu_type = IMAGE_HDU;
    fits_get_hdu_type(f, &hdu_type, &status);
    while (!status && hdu_type != BINARY_TBL && hdu_type != ASCII_TBL) fits_movrel_hdu(f, 1, &hdu_type, &status);
    if (status) {
        pk_status st = status == END_OF_FILE ? pk_fail(ctx, PK_ERR_PARSE, "%s: no table in the FITS file", path)
                                             : fits_error(ctx, path, "no FITS table", status);
        pk_fits_close(f, mem);
        return st;
    }
    long n_rows = 0;
    int n_cols = 0;
    fits_get_num_rows(f, &n_rows, &status);
    fits_get_num_cols(f, &n_cols, &status);
    pk_status st = PK_OK;
    if (status) st = fits_error(ctx, path, "reading the table header", status);
    /* the columns' names, matched here rather than by cfitsio, which
     * reads wildcards in a name and does not say which columns a name
     * matches twice */
    char(*names)[FLEN_VALUE] = NULL;
    if (st == PK_OK && !(names = malloc((size_t)(n_cols > 0 ? n_cols : 1) * sizeof *names)))
        st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    for (int k = 0; k < n_cols && st == PK_OK; k++) {
        char key[FLEN_KEYWORD];
        int s = 0;
        snprintf(key, sizeof key, "TTYPE%d", k + 1);
        if (fits_read_key(f, TSTRING, key, names[k], NULL, &s)) names[k][0] = '\0';
    }
    char **name_list = st == PK_OK ? malloc((size_t)(n_cols > 0 ? n_cols : 1) * sizeof *name_list) : NULL;
    if (st == PK_OK && !name_list) st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    for (int k = 0; k < n_cols && st == PK_OK; k++) name_list[k] = names[k];
    int col[3] = {-1, -1, -1};
    for (int c = 0; c < 3 && st == PK_OK; c++) {
        if (!want[c]) continue;
        st = find_named_column(ctx, path, "", kind[c], want[c], given[c], 1, name_list, n_cols, &col[c]);
        if (st == PK_OK) col[c]++; /* FITS counts columns from 1 */
        if (st == PK_OK && hdu_type == BINARY_TBL)
            st = check_fits_column(ctx, f, path, kind[c], col[c], names[col[c] - 1]);
    }
    if (st == PK_OK) {
        const char *name[3];
        for (int c = 0; c < 3; c++) name[c] = col[c] >= 1 ? names[col[c] - 1] : "";
        st = one_role_each(ctx, path, kind, col, name, 1);
    }
    pk_units units[2] = {spec->units, spec->units}; /* of RA and Dec */
    for (int c = 0; c < 2 && st == PK_OK; c++)
        st = fits_column_units(ctx, f, path, spec, kind[c], col[c], names[col[c] - 1], &units[c]);
    free(name_list);
    free(names);
    if (st == PK_OK && n_rows < 1) st = pk_fail(ctx, PK_ERR_PARSE, "%s: the table has no rows", path);
    if (st == PK_OK) {
        /* A cut file: the rows the header announces must be there before
         * memory is taken for them (NAXIS2 = 2^31 in an 8 KB file). */
        LONGLONG head_start, data_start, data_end;
        int s = 0;
        if (!fits_get_hduaddrll(f, &head_start, &data_start, &data_end, &s) && file_size >= 0 &&
            file_size < (long long)data_end)
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s: truncated: the header announces %ld rows (%lld bytes of data, padded to 2880-byte "
                         "blocks), the file holds %lld after the header",
                         path, n_rows, (long long)(data_end - data_start), file_size - (long long)data_start);
    }
    if (st == PK_OK) st = alloc_catalog(ctx, path, (size_t)n_rows, want[2] != NULL, out, weights);
    if (st) {
        pk_fits_close(f, mem);
        return st;
    }
    double *v[3] = {malloc((size_t)n_rows * sizeof(double)), malloc((size_t)n_rows * sizeof(double)),
                    want[2] ? *weights : NULL};
    if (!v[0] || !v[1]) st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    for (int c = 0; c < 3 && st == PK_OK; c++) {
        if (col[c] < 0) continue;
        if (hdu_type == ASCII_TBL) {
            char text[64];
            long empty = ascii_empty_row(f, col[c], n_rows, text, sizeof text, &status);
            if (empty < 0) st = fits_error(ctx, path, want[c], status);
            else if (empty > 0 && !text[0])
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: row %ld, column '%s': the field is blank (no number)", path, empty,
                             want[c]);
            else if (empty > 0)
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: row %ld, column '%s': '%s' is not a number", path, empty, want[c],
                             text);
            if (st) break;
        }
        int anynul = 0;
        double nulval = (double)NAN;
        if (fits_read_col(f, TDOUBLE, col[c], 1, 1, n_rows, &nulval, v[c], &anynul, &status)) {
            char text[64], why[FLEN_STATUS];
            long bad = hdu_type == ASCII_TBL ? ascii_bad_row(f, col[c], n_rows, text, sizeof text, why) : 0;
            if (bad > 0)
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: row %ld, column '%s': '%s' is not a number (cfitsio: %s)", path,
                             bad, want[c], text, why);
            else st = fits_error(ctx, path, want[c], status);
        }
    }
    for (long r = 0; r < n_rows && st == PK_OK; r++) {
        if (v[2] && !isfinite(v[2][r])) {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: row %ld, column '%s': the weight is %s", path, r + 1, want[2],
                         not_finite_word(f, col[2], r + 1));
            break;
        }
        for (int c = 0; c < 2 && st == PK_OK; c++)
            if (!isfinite(v[c][r]))
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: row %ld, column '%s': the %s is %s", path, r + 1, want[c], kind[c],
                             not_finite_word(f, col[c], r + 1));
        if (st) break;
        char where[300];
        snprintf(where, sizeof where, "%.200s: row %ld (columns '%.20s', '%.20s')", path, r + 1, want[0], want[1]);
        st = store_object(ctx, where, v[0][r], v[1][r], units[0], units[1], out, (size_t)r);
    }
    free(v[0]);
    free(v[1]);
    pk_fits_close(f, mem);
    if (st) {
        pk_catalog_free(out);
        if (want[2]) {
            free(*weights);
            *weights = NULL;
        }
    }
    return st;
}

/* ---- dispatch ------------------------------------------------------------------ */

pk_status pk_catalog_read_spec(pk_context *ctx, const char *path, const pk_catalog_spec *spec, pk_catalog *out,
                               double **weights) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_catalog_read_spec: out is NULL");
    memset(out, 0, sizeof *out);
    if (weights) *weights = NULL;
    pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_ARCMIN, NULL, NULL, NULL, 0};
    if (spec) sp = *spec;
    pk_status ust = pk_units_check(ctx, sp.units, "pk_catalog_read_spec");
    if (ust) return ust;
    if (sp.format < PK_FORMAT_AUTO || sp.format > PK_FORMAT_FITS)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_catalog_read_spec: format %d is not a pk_catalog_format",
                       (int)sp.format);
    if (sp.weight_column && !weights)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: a weight column was asked for but no place to put the weights", path);
    pk_catalog_format fmt = sp.format == PK_FORMAT_AUTO ? pk_catalog_format_of(path) : sp.format;
    if (fmt == PK_FORMAT_NATIVE) {
        if (sp.weight_column)
            return pk_fail(ctx, PK_ERR_INVALID, "%s: the native format has no weight column '%s' (use CSV or FITS)",
                           path, sp.weight_column);
        return pk_catalog_read(ctx, path, sp.units, out);
    }
    if (fmt == PK_FORMAT_FITS) return read_fits(ctx, path, &sp, out, weights);
    char *text;
    size_t size;
    pk_status st = pk_catalog_read_text(ctx, path, "CSV", &text, &size);
    if (st) return st;
    st = read_csv(ctx, path, text, size, &sp, out, weights);
    free(text);
    return st;
}
