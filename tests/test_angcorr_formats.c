/* test_angcorr_formats.c - catalogs as CSV and FITS tables with named
 * columns, edge files, and the command with weights, jackknife and the
 * new options: the same positions in every format give the same doubles;
 * every bad input gets an error naming the file, line or row and column.
 */
#include <fitsio.h>
#include <zlib.h>

#include "angcorr_util.h"
#include "cli_util.h"

static void check_error(pk_status st, const pk_context *ctx, const char *want, const char *what) {
    CHECK(st != PK_OK, "%s: accepted", what);
    CHECK(strstr(ctx->message, want) != NULL, "%s: message '%s' lacks '%s'", what, ctx->message, want);
}

/* The bytes of a file (malloc'ed; *len 0 and NULL when unreadable). */
static char *slurp_file(const char *path, size_t *len) {
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    size_t n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *bytes = malloc(n ? n : 1);
    if (bytes && fread(bytes, 1, n, fp) == n) *len = n;
    fclose(fp);
    if (!*len) {
        free(bytes);
        return NULL;
    }
    return bytes;
}

/* bytes written gzip-compressed to path */
static void gz_write(const char *path, const void *bytes, size_t len) {
    gzFile gz = gzopen(path, "wb");
    CHECK(gz != NULL, "gzopen %s", path);
    if (!gz) return;
    CHECK(gzwrite(gz, bytes, (unsigned)len) == (int)len, "gzwrite %s", path);
    gzclose(gz);
}

/* A FITS table (BINARY_TBL or ASCII_TBL), names[c] of form forms[c]; a
 * numeric column of repeat r (the number before its letter) takes r * n
 * values from cols[c]; text, logical, complex and variable-length ones
 * are left as created. */
static int write_table(const char *path, int type, int n_cols, const char **names, const char **forms, double **cols,
                       long n) {
    fitsfile *f;
    int status = 0;
    char fname[600];
    snprintf(fname, sizeof fname, "!%s", path);
    char *ttype[8], *tform[8];
    for (int c = 0; c < n_cols; c++) {
        ttype[c] = (char *)names[c];
        tform[c] = (char *)forms[c];
    }
    fits_create_file(&f, fname, &status);
    fits_create_tbl(f, type, n, n_cols, ttype, tform, NULL, "CATALOG", &status);
    for (int c = 0; c < n_cols; c++) {
        long r = type == BINARY_TBL && forms[c][0] >= '0' && forms[c][0] <= '9' ? atol(forms[c]) : 1;
        if (r > 0 && !strpbrk(forms[c], "PQCMAL")) fits_write_col(f, TDOUBLE, c + 1, 1, 1, r * n, cols[c], &status);
    }
    fits_close_file(f, &status);
    return status;
}

/* A binary table of n_cols float64 columns. */
static int write_fits(const char *path, int n_cols, const char **names, double **cols, long n) {
    const char *forms[8] = {"D", "D", "D", "D", "D", "D", "D", "D"};
    return write_table(path, BINARY_TBL, n_cols, names, forms, cols, n);
}

/* The bytes of column col's field in row row of an ASCII table replaced
 * by text (padded with blanks to the field's width). */
static int edit_field(const char *path, int col, long row, const char *text) {
    fitsfile *f;
    int status = 0;
    fits_open_file(&f, path, READWRITE, &status);
    fits_movabs_hdu(f, 2, NULL, &status);
    char ttype[FLEN_VALUE], tunit[FLEN_VALUE], tform[FLEN_VALUE], nulstr[FLEN_VALUE], tdisp[FLEN_VALUE];
    long tbcol = 0;
    double scale, zero;
    fits_get_acolparms(f, col, ttype, &tbcol, tunit, tform, &scale, &zero, nulstr, tdisp, &status);
    int width = atoi(tform + 1);
    unsigned char field[80];
    memset(field, ' ', sizeof field);
    memcpy(field, text, strlen(text));
    if (!status && width > 0 && width <= 80) fits_write_tblbytes(f, row, tbcol, width, field, &status);
    fits_close_file(f, &status);
    return status;
}

/* TUNITn of a FITS table's column col set to unit ("" leaves it empty). */
static int set_tunit(const char *path, int col, const char *unit) {
    fitsfile *f;
    int status = 0;
    char key[FLEN_KEYWORD];
    snprintf(key, sizeof key, "TUNIT%d", col);
    fits_open_file(&f, path, READWRITE, &status);
    fits_movabs_hdu(f, 2, NULL, &status);
    fits_update_key(f, TSTRING, key, (char *)unit, NULL, &status);
    fits_close_file(f, &status);
    return status;
}

static void same_catalog(const pk_catalog *a, const pk_catalog *b, const char *what) {
    CHECK(a->n == b->n, "%s: %zu vs %zu objects", what, a->n, b->n);
    for (size_t i = 0; i < a->n && i < b->n; i++) {
        CHECK(a->ra[i] == b->ra[i] && a->dec[i] == b->dec[i], "%s: object %zu differs", what, i);
        if (a->ra[i] != b->ra[i] || a->dec[i] != b->dec[i]) break;
    }
}

/* What the checks share: the context that carries the messages, the random
 * generator, and the positions (degrees) and weights of the catalog that
 * cat.txt, cat.csv and cat.fits hold. A check that writes a bad FITS file
 * changes one value and then sets a valid one, which later files carry. */
typedef struct formats_test {
    pk_context ctx;
    check_rng rng;
    size_t n;
    double *ra, *dec, *w;
} formats_test;

static const char *catalog_columns[3] = {"RA", "DEC", "WEIGHT"};

/* The shared catalog as a FITS table of columns names[0..2]. */
static int write_catalog_fits(const formats_test *t, const char *name, const char **names) {
    double *cols[3] = {t->ra, t->dec, t->w};
    return write_fits(cli_path(name), 3, names, cols, (long)t->n);
}

/* positions in degrees with a text form that parses back exactly */
static void write_catalog_in_three_formats(formats_test *t) {
    FILE *nat = fopen(cli_path("cat.txt"), "w"), *csv = fopen(cli_path("cat.csv"), "w");
    fprintf(nat, "%zu\n", t->n);
    fprintf(csv, "# a comment line\nid, RA ,Dec,weight,\"mag\"\n");
    for (size_t i = 0; i < t->n; i++) {
        t->ra[i] = 360 * check_uniform(&t->rng);
        t->dec[i] = -90 + 180 * check_uniform(&t->rng);
        t->w[i] = 0.5 + check_uniform(&t->rng);
        fprintf(nat, "%.17g\t%.17g\r\n", t->ra[i], t->dec[i]);
        fprintf(csv, "%zu,%.17g,%.17g,%.17g,%.3f\n", i, t->ra[i], t->dec[i], t->w[i], 20 + check_uniform(&t->rng));
    }
    fclose(nat);
    fclose(csv);
    CHECK(write_catalog_fits(t, "cat.fits", catalog_columns) == 0, "writing the FITS table");
}

/* the same positions from the native format, CSV and FITS; the same
 * weights from CSV and FITS */
static void three_formats_read_alike(formats_test *t) {
    pk_context *ctx = &t->ctx;
    pk_catalog c_nat, c_csv, c_fits;
    double *w_csv = NULL, *w_fits = NULL;
    pk_catalog_spec spec = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.txt"), &spec, &c_nat, NULL), ctx);
    spec.weight_column = "weight";
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.csv"), &spec, &c_csv, &w_csv), ctx);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &spec, &c_fits, &w_fits), ctx);
    same_catalog(&c_nat, &c_csv, "native vs CSV");
    same_catalog(&c_nat, &c_fits, "native vs FITS");
    for (size_t i = 0; i < t->n && w_csv && w_fits; i++)
        CHECK(w_csv[i] == t->w[i] && w_fits[i] == t->w[i], "weight %zu: %g %g vs %g", i, w_csv[i], w_fits[i], t->w[i]);
    free(w_csv), free(w_fits);
    pk_catalog_free(&c_csv);
    pk_catalog_free(&c_fits);
    pk_catalog_free(&c_nat);
}

/* column names picked by the caller, format forced */
static void csv_columns_picked_by_the_caller(pk_context *ctx) {
    cli_write("pick.dat", "x,y,w\n10,20,1\n11,21,2\n");
    pk_catalog_spec pick = {PK_FORMAT_CSV, PK_UNITS_DEG, "x", "y", "w", 0};
    pk_catalog c;
    double *wp = NULL;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("pick.dat"), &pick, &c, &wp), ctx);
    CHECK(c.n == 2 && wp && wp[1] == 2.0, "picked columns");
    free(wp);
    pk_catalog_free(&c);
}

/* quoted fields (RFC 4180): commas and doubled quotes inside them */
static void csv_quoted_fields_are_read(pk_context *ctx) {
    cli_write("quoted.csv", "name,\"ra\",dec\n\"NGC 1, a\",10,20\n\"say \"\"hi\"\"\", \"11\" ,21\n");
    pk_catalog_spec qs = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    pk_catalog c;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("quoted.csv"), &qs, &c, NULL), ctx);
    CHECK(c.n == 2 && fabs(c.ra[0] - 10 * M_PI / 180) < 1e-15 && fabs(c.dec[1] - 21 * M_PI / 180) < 1e-15,
          "quoted CSV fields: %zu objects", c.n);
    pk_catalog_free(&c);
    /* a quoted last field in a file with CRLF line ends (spreadsheets
     * write both): the \r after the closing quote is the line's end */
    cli_write("quoted_crlf.csv", "\"ra\",\"dec\"\r\n10,\"20\"\r\n\"11\",\"21\" \r\n");
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("quoted_crlf.csv"), &qs, &c, NULL), ctx);
    CHECK(c.n == 2 && fabs(c.dec[0] - 20 * M_PI / 180) < 1e-15 && fabs(c.ra[1] - 11 * M_PI / 180) < 1e-15 &&
              fabs(c.dec[1] - 21 * M_PI / 180) < 1e-15,
          "quoted CSV fields with CRLF: %zu objects", c.n);
    pk_catalog_free(&c);
}

/* a right ascension within 4096 rad of 0 is read (unwrapped angles
 * too); beyond, float64 holds the direction poorly or not at all:
 * refused by every reader, the native format and arrays too */
static void ra_beyond_4096_rad_refused(pk_context *ctx) {
    cli_write("ra_edges.csv", "ra,dec\n-360,1\n720,2\n-234683,3\n234683,4\n");
    pk_catalog_spec es = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    pk_catalog c;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("ra_edges.csv"), &es, &c, NULL), ctx);
    pk_catalog_free(&c);
    cli_write("ra_native.txt", "2\n21600 10\n1e20 10\n");
    check_error(pk_catalog_read(ctx, cli_path("ra_native.txt"), PK_UNITS_ARCMIN, &c), ctx,
                "ra_native.txt:3: ra 1e+20 arcmin is beyond 4096 radians", "native RA of 1e20 arcmin");
    const double ra_arr[2] = {1.0, 4096.5}, dec_arr[2] = {0.1, 0.2};
    check_error(pk_catalog_from_arrays(ctx, 2, ra_arr, dec_arr, PK_UNITS_RAD, "ra_rad", &c), ctx,
                "ra_rad[1]: ra 4096.5 rad is beyond 4096 radians", "array RA past 4096 rad");
    check_error(pk_catalog_from_arrays(ctx, 2, NULL, dec_arr, PK_UNITS_RAD, "x", &c), ctx,
                "pk_catalog_from_arrays: ra is NULL (with n = 2)", "NULL ra");
}

/* errors, each naming file, line or row, and column */
static void csv_errors_name_the_line_and_column(pk_context *ctx) {
    struct {
        const char *name, *text, *weight, *want;
    } bad[] = {
        {"nora.csv", "alpha,dec\n1,2\n", NULL, "nora.csv:1: no RA column 'ra' (the columns are: alpha, dec)"},
        {"now.csv", "ra,dec\n1,2\n", "wt", "now.csv:1: no weight column 'wt'"},
        {"text.csv", "ra,dec\n1,2\n3,abc\n", NULL, "text.csv:3: column 'dec': 'abc' is not a number"},
        {"nanw.csv", "ra,dec,w\n1,2,1\n1,2,nan\n", "w", "nanw.csv:3: column 'w': the weight is NaN"},
        {"short.csv", "ra,dec,w\n1,2\n", "w", "short.csv:2: the row has 2 fields, column 'w' (3) is missing"},
        {"decbad.csv", "ra,dec\n1,91\n", NULL, "decbad.csv:2: dec 91 deg is outside [-90, 90] degrees"},
        {"rabad.csv", "ra,dec\n1,2\n234700,2\n", NULL,
         "rabad.csv:3: ra 234700 deg is beyond 4096 radians (652 turns), where float64 values lie about 1e-12 rad "
         "apart or more"},
        {"rahuge.csv", "ra,dec\n-1e300,2\n", NULL, "rahuge.csv:2: ra -1e+300 deg is beyond 4096 radians"},
        {"empty.csv", "# nothing\n", NULL, "empty.csv: empty file"},
        {"header.csv", "ra,dec\n", NULL, "header.csv: no rows after the header"},
        {"nandec.csv", "ra,dec\n1,2\n1,nan\n", NULL, "nandec.csv:3: column 'dec': the Dec is NaN"},
        {"hexdec.csv", "ra,dec\n1,0x10\n", NULL, "hexdec.csv:2: column 'dec': '0x10' is not a number"},
        {"long.csv", "ra,dec\n3,4,5\n", NULL, "long.csv:2: the row has 3 fields, the header names 2"},
        {"twice.csv", "ra,dec,RA\n3,4,5\n", NULL,
         "twice.csv:1: the RA column 'ra' could be column 1 'ra' or column 3 'RA'"},
        {"open.csv", "name,ra,dec\n\"NGC 1, a,10,20\n", NULL, "open.csv:2: a quoted field is not closed on its line"},
        {"after.csv", "name,ra,dec\n\"NGC\" 1,10,20\n", NULL, "after.csv:2: text after a quoted field's closing"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cli_write(bad[k].name, bad[k].text);
        pk_catalog c;
        double *wb = NULL;
        pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, bad[k].weight, 0};
        check_error(pk_catalog_read_spec(ctx, cli_path(bad[k].name), &sp, &c, &wb), ctx, bad[k].want, bad[k].name);
    }
}

/* FITS errors name the file, row and column: a weight column missing, a
 * NaN weight, a declination out of range */
static void fits_errors_name_the_row_and_column(formats_test *t) {
    pk_context *ctx = &t->ctx;
    pk_catalog c;
    double *wb = NULL;
    pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "wt", 0};
    check_error(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &sp, &c, &wb), ctx,
                "cat.fits: no weight column 'wt' (the columns are: RA, DEC, WEIGHT)", "FITS without the column");
    t->w[7] = (double)NAN;
    CHECK(write_catalog_fits(t, "nan.fits", catalog_columns) == 0, "writing the FITS table");
    sp.weight_column = "weight";
    check_error(pk_catalog_read_spec(ctx, cli_path("nan.fits"), &sp, &c, &wb), ctx,
                "nan.fits: row 8, column 'weight': the weight is NaN", "FITS NaN weight");
    t->w[7] = 1.0;
    t->dec[3] = 95;
    CHECK(write_catalog_fits(t, "dec.fits", catalog_columns) == 0, "writing the FITS table");
    sp.weight_column = NULL;
    check_error(pk_catalog_read_spec(ctx, cli_path("dec.fits"), &sp, &c, NULL), ctx,
                "dec.fits: row 4 (columns 'ra', 'dec'): dec 95 deg is outside", "FITS dec out of range");
    t->dec[3] = 10;
}

/* FITS columns by number, as cfitsio took them */
static void fits_columns_by_number(pk_context *ctx) {
    pk_catalog_spec by_number = {PK_FORMAT_AUTO, PK_UNITS_DEG, "1", "2", NULL, 0},
                    by_name = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    pk_catalog a1, a2;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &by_number, &a1, NULL), ctx);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &by_name, &a2, NULL), ctx);
    same_catalog(&a1, &a2, "FITS columns 1 and 2 vs RA and DEC");
    pk_catalog_free(&a1), pk_catalog_free(&a2);
    /* the last column by its number: the weights, column 3 of 3 */
    pk_catalog_spec all_by_number = {PK_FORMAT_AUTO, PK_UNITS_DEG, "1", "2", "3", 0},
                    w_by_name = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "weight", 0};
    double *w1 = NULL, *w2 = NULL;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &all_by_number, &a1, &w1), ctx);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &w_by_name, &a2, &w2), ctx);
    same_catalog(&a1, &a2, "FITS columns 1, 2 and 3 vs RA, DEC and weight");
    CHECK(w1 && w2 && a1.n == a2.n && memcmp(w1, w2, a1.n * sizeof(double)) == 0,
          "FITS column 3 by number: not the weights");
    free(w1), free(w2);
    pk_catalog_free(&a1), pk_catalog_free(&a2);
    by_number.ra_column = "4";
    check_error(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &by_number, &a1, NULL), ctx,
                "cat.fits: no RA column '4'", "FITS column 4 of 3");
}

/* one column for two roles refused; names differing only in case,
 * each given exactly, are two columns */
static void one_column_for_two_roles_refused(formats_test *t) {
    pk_context *ctx = &t->ctx;
    pk_catalog c;
    pk_catalog_spec both = {PK_FORMAT_AUTO, PK_UNITS_DEG, "DEC", NULL, NULL, 0};
    check_error(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &both, &c, NULL), ctx,
                "cat.fits: column 2 'DEC' is asked for as both the RA and the Dec", "FITS RA column = Dec's");
    const char *cased[3] = {"RA", "DEC", "ra"};
    CHECK(write_catalog_fits(t, "cased.fits", cased) == 0, "writing the FITS table");
    pk_catalog_spec exact = {PK_FORMAT_AUTO, PK_UNITS_DEG, "RA", "DEC", "ra", 0};
    double *cw = NULL;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cased.fits"), &exact, &c, &cw), ctx);
    CHECK(cw && c.n == t->n && cw[0] == t->w[0], "RA and ra as two columns");
    free(cw);
    pk_catalog_free(&c);
    /* CSV as FITS: RA and ra both there, a name given exactly picks one */
    cli_write("cased.csv", "RA,DEC,ra\n10,20,40\n11,21,41\n");
    pk_catalog_spec csv_exact = {PK_FORMAT_AUTO, PK_UNITS_DEG, "ra", NULL, NULL, 0};
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cased.csv"), &csv_exact, &c, NULL), ctx);
    CHECK(c.n == 2 && fabs(c.ra[1] - 41 * M_PI / 180) < 1e-15, "CSV --ra-col ra picks column 3");
    pk_catalog_free(&c);
    pk_catalog_spec csv_default = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    check_error(pk_catalog_read_spec(ctx, cli_path("cased.csv"), &csv_default, &c, NULL), ctx,
                "cased.csv:1: the RA column 'ra' could be column 1 'RA' or column 3 'ra'", "CSV default ra, RA and ra");
    cli_write("cased2.csv", "RA,ra,Dec,DEC,ra\n10,20,1,2,3\n");
    check_error(pk_catalog_read_spec(ctx, cli_path("cased2.csv"), &csv_exact, &c, NULL), ctx,
                "cased2.csv:1: the RA column 'ra' is named twice (columns 2 and 5)", "CSV ra twice exactly");
    cli_write("roles.csv", "ra,dec,w\n10,20,1\n11,21,1\n");
    pk_catalog_spec csv_both = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "RA", 0};
    check_error(pk_catalog_read_spec(ctx, cli_path("roles.csv"), &csv_both, &c, &cw), ctx,
                "roles.csv: column 1 'ra' is asked for as both the RA and the weight", "CSV weight column = RA's");
}

/* bytes written to path as they are (an empty file when bytes is NULL) */
static void write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    if (bytes) fwrite(bytes, 1, len, fp);
    fclose(fp);
}

/* the same file with "SIMPLE       =" (cfitsio still opens it)
 * and a byte outside ASCII in TTYPE2: refused as well */
static void fits_non_ascii_header_refused(pk_context *ctx, char *bytes, size_t len) {
    pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    pk_catalog c;
    memcpy(bytes, "SIMPLE       =               T", 30);
    for (size_t at = 0; at + 80 <= len; at += 80)
        if (strncmp(bytes + at, "TTYPE2  = ", 10) == 0) memset(bytes + at + 10, 0xff, 70);
    write_bytes(cli_path("ascii.fits"), bytes, len);
    check_error(pk_catalog_read_spec(ctx, cli_path("ascii.fits"), &sp, &c, NULL), ctx, "header byte 0xff at offset",
                "FITS non-ASCII header behind a moved SIMPLE '='");
}

/* gzip-compressed: the same check, on the decompressed file */
static void gzip_fits_non_ascii_header_refused(pk_context *ctx, const char *bytes, size_t len) {
    pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    pk_catalog c;
    gz_write(cli_path("ascii.fits.gz"), bytes, len);
    check_error(pk_catalog_read_spec(ctx, cli_path("ascii.fits.gz"), &sp, &c, NULL), ctx, "header byte 0xff at offset",
                "gzip FITS with a non-ASCII header");
}

/* TTYPE2 given an unquoted value of 70 characters: cfitsio 4.2 would
 * overflow its column name; refused by the header check first */
static void fits_unquoted_long_ttype_refused(pk_context *ctx) {
    pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    pk_catalog c;
    size_t len = 0;
    char *bytes = slurp_file(cli_path("cat.fits"), &len);
    int edited = 0;
    for (size_t at = 0; bytes && at + 80 <= len && !edited; at += 80)
        if (strncmp(bytes + at, "TTYPE2  = ", 10) == 0) memset(bytes + at + 10, '[', 70), edited = 1;
    CHECK(edited, "TTYPE2 found in cat.fits");
    write_bytes(cli_path("ttype.fits"), bytes, len);
    check_error(pk_catalog_read_spec(ctx, cli_path("ttype.fits"), &sp, &c, NULL), ctx, "keyword TTYPE2   at offset",
                "FITS unquoted 70-character TTYPE2");
    CHECK(strstr(ctx->message, "neither a quoted string nor a number") != NULL, "message: %s", ctx->message);
    if (bytes && len > 80) fits_non_ascii_header_refused(ctx, bytes, len);
    if (bytes && len > 80) gzip_fits_non_ascii_header_refused(ctx, bytes, len);
    free(bytes);
}

/* cat.fits as bytes, and the catalog and weights read from it */
typedef struct plain_fits {
    const char *bytes;
    size_t len;
    pk_catalog catalog;
} plain_fits;

/* the weight column of cat.fits, for the reads below that compare */
static const pk_catalog_spec weight_spec = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "weight", 0};
static const pk_catalog_spec plain_spec = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};

/* gzip-compressed FITS: read from memory, as the plain file */
static void gzip_fits_read_as_the_plain_file(pk_context *ctx, plain_fits *cat) {
    gz_write(cli_path("cat.fits.gz"), cat->bytes, cat->len);
    pk_catalog cz;
    double *wz = NULL, *wq = NULL;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits.gz"), &weight_spec, &cz, &wz), ctx);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat.fits"), &weight_spec, &cat->catalog, &wq), ctx);
    same_catalog(&cat->catalog, &cz, "FITS vs gzip FITS");
    for (size_t i = 0; i < cat->catalog.n && wz && wq; i++) CHECK(wz[i] == wq[i], "gzip FITS weight %zu", i);
    free(wz), free(wq);
    pk_catalog_free(&cz);
}

/* the compressed file cut in half; a whole FITS file whose table is cut,
 * compressed */
static void cut_gzip_fits_refused(pk_context *ctx, const plain_fits *cat) {
    pk_catalog cz;
    FILE *fp = fopen(cli_path("cat.fits.gz"), "rb");
    char *z = malloc(cat->len + 1024);
    size_t zlen = fp && z ? fread(z, 1, cat->len + 1024, fp) : 0;
    if (fp) fclose(fp);
    write_bytes(cli_path("cut.fits.gz"), z, zlen / 2);
    free(z);
    check_error(pk_catalog_read_spec(ctx, cli_path("cut.fits.gz"), &plain_spec, &cz, NULL), ctx,
                "cut.fits.gz: truncated gzip file", "cut gzip FITS");
    gz_write(cli_path("short.fits.gz"), cat->bytes, cat->len - 2880);
    check_error(pk_catalog_read_spec(ctx, cli_path("short.fits.gz"), &plain_spec, &cz, NULL), ctx,
                "short.fits.gz: truncated: HDU 2 announces", "gzip FITS with a cut table");
}

/* the plain file cut at every 100 bytes of its headers: the
 * header named, never cfitsio's bare read error */
static void fits_cut_in_its_headers_refused(pk_context *ctx, const plain_fits *cat) {
    pk_catalog cz;
    for (size_t cut = 100; cut < cat->len && cut < 3 * 2880; cut += 100) {
        write_bytes(cli_path("cuth.fits"), cat->bytes, cut);
        pk_status cst = pk_catalog_read_spec(ctx, cli_path("cuth.fits"), &plain_spec, &cz, NULL);
        CHECK(cst == PK_ERR_PARSE && strstr(ctx->message, "cuth.fits: truncated"),
              "FITS cut at byte %zu: status %d: %s", cut, (int)cst, ctx->message);
        if (cst == PK_OK) pk_catalog_free(&cz);
    }
}

/* a name that cfitsio's filename syntax would read as a filter */
static void fits_named_like_a_filter_is_read(pk_context *ctx, const plain_fits *cat) {
    pk_catalog cz;
    double *wz = NULL;
    write_bytes(cli_path("cat[1].fits"), cat->bytes, cat->len);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat[1].fits"), &weight_spec, &cz, &wz), ctx);
    same_catalog(&cat->catalog, &cz, "FITS named cat[1].fits");
    free(wz);
    pk_catalog_free(&cz);
}

/* bytes after the last HDU that start no XTENSION (the
 * standard's special records; a stray line end): read */
static void bytes_after_the_last_hdu_are_read(pk_context *ctx, const plain_fits *cat) {
    char special[2881];
    memset(special, 'S', 2880);
    const char *tails[2] = {special, "\n"};
    size_t tail_len[2] = {2880, 1};
    for (int k = 0; k < 2; k++) {
        pk_catalog cz;
        double *wz = NULL;
        FILE *tf = fopen(cli_path("tail.fits"), "wb");
        if (tf) fwrite(cat->bytes, 1, cat->len, tf), fwrite(tails[k], 1, tail_len[k], tf), fclose(tf);
        CHECK_OK(pk_catalog_read_spec(ctx, cli_path("tail.fits"), &weight_spec, &cz, &wz), ctx);
        same_catalog(&cat->catalog, &cz, k ? "FITS with a line end after it" : "FITS with a special record");
        free(wz);
        pk_catalog_free(&cz);
    }
}

/* a table's NAXIS1 that is not a whole number (cfitsio
 * would size the table by whatever it reads from it) */
static void naxis1_not_a_whole_number_refused(pk_context *ctx, const plain_fits *cat) {
    char *odd = malloc(cat->len);
    if (!odd) return;
    memcpy(odd, cat->bytes, cat->len);
    for (size_t at = 2880; at + 80 <= cat->len; at += 80)
        if (memcmp(odd + at, "NAXIS1  =", 9) == 0) {
            memcpy(odd + at + 10, "                  )6", 20);
            break;
        }
    write_bytes(cli_path("naxis1.fits"), odd, cat->len);
    pk_catalog cz;
    double *wz = NULL;
    check_error(pk_catalog_read_spec(ctx, cli_path("naxis1.fits"), &weight_spec, &cz, &wz), ctx,
                "naxis1.fits: HDU 2: NAXIS1 = ')6' is not a whole number", "NAXIS1 not a number");
    free(odd);
}

/* a gzip-compressed name whose [2] would be an HDU that does not exist */
static void gzip_fits_named_like_an_hdu_is_read(pk_context *ctx, const plain_fits *cat) {
    pk_catalog cz;
    double *wz = NULL;
    gz_write(cli_path("cat[2].fits.gz"), cat->bytes, cat->len);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("cat[2].fits.gz"), &weight_spec, &cz, &wz), ctx);
    same_catalog(&cat->catalog, &cz, "gzip FITS named cat[2].fits.gz");
    free(wz);
    pk_catalog_free(&cz);
}

/* gzip-compressed text: not FITS inside */
static void gzip_of_text_refused(pk_context *ctx) {
    pk_catalog cz;
    gz_write(cli_path("text.fits.gz"), "not a table\n", 12);
    check_error(pk_catalog_read_spec(ctx, cli_path("text.fits.gz"), &plain_spec, &cz, NULL), ctx,
                "text.fits.gz: gzip-compressed, but not a FITS file inside", "gzip of text");
}

/* gzip-compressed FITS: read from memory, as the plain file; cut
 * or not FITS inside: errors naming the file */
static void gzip_and_cut_fits_files(pk_context *ctx) {
    size_t len = 0;
    char *bytes = slurp_file(cli_path("cat.fits"), &len);
    CHECK(bytes && len > 0, "reading cat.fits");
    if (bytes && len > 0) {
        plain_fits cat = {bytes, len, {0}};
        gzip_fits_read_as_the_plain_file(ctx, &cat);
        cut_gzip_fits_refused(ctx, &cat);
        fits_cut_in_its_headers_refused(ctx, &cat);
        fits_named_like_a_filter_is_read(ctx, &cat);
        bytes_after_the_last_hdu_are_read(ctx, &cat);
        naxis1_not_a_whole_number_refused(ctx, &cat);
        gzip_fits_named_like_an_hdu_is_read(ctx, &cat);
        pk_catalog_free(&cat.catalog);
        gzip_of_text_refused(ctx);
    }
    free(bytes);
}

/* a primary image of NAXIS1 = 0 (no data; not random groups),
 * then the table: read */
static void fits_table_after_an_empty_image_is_read(pk_context *ctx) {
    fitsfile *f;
    int status = 0;
    char fname[600];
    snprintf(fname, sizeof fname, "!%s", cli_path("empty_primary.fits"));
    long axes[2] = {0, 10};
    char *ttype[2] = {(char *)"ra", (char *)"dec"}, *tform[2] = {(char *)"D", (char *)"D"};
    double ra3[3] = {10, 20, 30}, dec3[3] = {-5, 0, 5};
    fits_create_file(&f, fname, &status);
    fits_create_img(f, BYTE_IMG, 2, axes, &status);
    fits_create_tbl(f, BINARY_TBL, 3, 2, ttype, tform, NULL, "CATALOG", &status);
    fits_write_col(f, TDOUBLE, 1, 1, 1, 3, ra3, &status);
    fits_write_col(f, TDOUBLE, 2, 1, 1, 3, dec3, &status);
    fits_close_file(f, &status);
    CHECK(status == 0, "writing empty_primary.fits: cfitsio status %d", status);
    pk_catalog e3;
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("empty_primary.fits"), &plain_spec, &e3, NULL), ctx);
    CHECK(e3.n == 3, "a FITS table behind an empty NAXIS1 = 0 image: %zu objects", e3.n);
    pk_catalog_free(&e3);
}

/* The small FITS tables below: three rows of RA, Dec and weight in
 * degrees, in columns named RA, DEC and W. */
typedef struct three_rows {
    double ra[3], dec[3], w[3];
} three_rows;

static const three_rows three_rows_default = {{10, 20, 30}, {-5, 0, 5}, {1, 2, 3}};
static const char *three_rows_names[3] = {"RA", "DEC", "W"};
static const pk_catalog_spec w_spec = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "w", 0};

static int write_three_rows(const char *name, int type, const char **forms, three_rows rows) {
    double *cols[3] = {rows.ra, rows.dec, rows.w};
    return write_table(cli_path(name), type, 3, three_rows_names, forms, cols, 3);
}

/* a value written into a FITS table's header (the table's HDU) */
static int set_key_str(const char *path, const char *key, const char *value) {
    fitsfile *f;
    int status = 0;
    fits_open_file(&f, path, READWRITE, &status);
    fits_movabs_hdu(f, 2, NULL, &status);
    fits_write_key_str(f, key, value, "null", &status);
    fits_close_file(f, &status);
    return status;
}

static int set_key_lng(const char *path, const char *key, long value) {
    fitsfile *f;
    int status = 0;
    fits_open_file(&f, path, READWRITE, &status);
    fits_movabs_hdu(f, 2, NULL, &status);
    fits_write_key_lng(f, key, value, "null", &status);
    fits_close_file(f, &status);
    return status;
}

/* a vector column: two values a row (read across rows before) */
static void fits_vector_columns_refused(pk_context *ctx) {
    pk_catalog e;
    double *we = NULL;
    three_rows rows = three_rows_default;
    double r6[6] = {10, 11, 20, 21, 30, 31};
    double *c3[3] = {r6, rows.dec, rows.w};
    const char *fv[3] = {"2D", "D", "D"};
    CHECK(write_table(cli_path("vec.fits"), BINARY_TBL, 3, three_rows_names, fv, c3, 3) == 0, "writing vec.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("vec.fits"), &plain_spec, &e, NULL), ctx,
                "vec.fits: the RA column 'RA' holds 2 values a row (TFORM1 = '2D'); a catalog needs one",
                "FITS RA column of repeat 2");
    const char *fz[3] = {"D", "D", "0D"};
    CHECK(write_three_rows("vec0.fits", BINARY_TBL, fz, rows) == 0, "writing vec0.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("vec0.fits"), &w_spec, &e, &we), ctx,
                "vec0.fits: the weight column 'W' holds no value a row (TFORM3 = '0D'); a catalog needs one",
                "FITS weight column of repeat 0");
}

static const char *ascii_forms[3] = {"F12.6", "F12.6", "F12.6"};

/* ASCII tables: a blank field (read as 0 before), text */
static void fits_ascii_table_fields(pk_context *ctx) {
    pk_catalog e = {0};
    double *we = NULL;
    CHECK(write_three_rows("asc.fits", ASCII_TBL, ascii_forms, three_rows_default) == 0, "writing asc.fits");
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("asc.fits"), &w_spec, &e, &we), ctx);
    CHECK(e.n == 3 && fabs(e.dec[0] + 5 * M_PI / 180) < 1e-15 && we && we[2] == 3, "an ASCII table read");
    if (e.n) pk_catalog_free(&e);
    free(we);
    we = NULL;
    CHECK(edit_field(cli_path("asc.fits"), 2, 2, "") == 0, "blanking a field");
    check_error(pk_catalog_read_spec(ctx, cli_path("asc.fits"), &plain_spec, &e, NULL), ctx,
                "asc.fits: row 2, column 'dec': the field is blank (no number)", "FITS ASCII table blank field");
    CHECK(write_three_rows("asct.fits", ASCII_TBL, ascii_forms, three_rows_default) == 0, "writing asct.fits");
    CHECK(edit_field(cli_path("asct.fits"), 3, 3, "  abc") == 0, "text in a field");
    check_error(pk_catalog_read_spec(ctx, cli_path("asct.fits"), &w_spec, &e, &we), ctx,
                "asct.fits: row 3, column 'w': 'abc' is not a number", "FITS ASCII table text field");
    CHECK(edit_field(cli_path("asct.fits"), 3, 3, "1") == 0 && edit_field(cli_path("asct.fits"), 1, 2, " -") == 0,
          "a lone minus in a field");
    check_error(pk_catalog_read_spec(ctx, cli_path("asct.fits"), &w_spec, &e, &we), ctx,
                "asct.fits: row 2, column 'ra': '-' is not a number", "FITS ASCII table lone minus (read as 0)");
    CHECK(edit_field(cli_path("asct.fits"), 1, 2, "E5") == 0, "an exponent alone in a field");
    check_error(pk_catalog_read_spec(ctx, cli_path("asct.fits"), &w_spec, &e, &we), ctx,
                "asct.fits: row 2, column 'ra': 'E5' is not a number", "FITS ASCII table 'E5' (read as 0)");
}

/* a field that is the column's TNULLn: null, not text */
static void fits_ascii_tnull_field_is_null(pk_context *ctx) {
    pk_catalog e;
    double *we = NULL;
    CHECK(edit_field(cli_path("asct.fits"), 1, 2, "NULL") == 0, "NULL in a field");
    int status = set_key_str(cli_path("asct.fits"), "TNULL1", "NULL");
    CHECK(status == 0, "TNULL1 written: status %d", status);
    check_error(pk_catalog_read_spec(ctx, cli_path("asct.fits"), &w_spec, &e, &we), ctx,
                "asct.fits: row 2, column 'ra': the RA is null (the column's TNULL value)", "FITS ASCII TNULL");
}

/* in a longer table, past the first chunks read */
static void fits_ascii_errors_past_the_first_chunks(pk_context *ctx) {
    pk_catalog e;
    long nl = 60000;
    double *big[3] = {malloc(nl * sizeof(double)), malloc(nl * sizeof(double)), malloc(nl * sizeof(double))};
    for (long i = 0; i < nl && big[0] && big[1] && big[2]; i++)
        big[0][i] = (double)(i % 360), big[1][i] = (double)(i % 90), big[2][i] = 1;
    CHECK(write_table(cli_path("ascl.fits"), ASCII_TBL, 3, three_rows_names, ascii_forms, big, nl) == 0,
          "writing ascl.fits");
    CHECK(edit_field(cli_path("ascl.fits"), 1, 45678, "1.2.3") == 0, "text in a field");
    check_error(pk_catalog_read_spec(ctx, cli_path("ascl.fits"), &plain_spec, &e, NULL), ctx,
                "ascl.fits: row 45678, column 'ra': '1.2.3' is not a number", "FITS ASCII table, row 45678");
    CHECK(edit_field(cli_path("ascl.fits"), 1, 51234, "") == 0, "blanking a field");
    check_error(pk_catalog_read_spec(ctx, cli_path("ascl.fits"), &plain_spec, &e, NULL), ctx,
                "ascl.fits: row 51234, column 'ra': the field is blank", "FITS ASCII table, row 51234");
    free(big[0]), free(big[1]), free(big[2]);
}

/* text, logical, complex and variable-length columns (complex
 * ones were read as real and imaginary parts in turn) */
static void fits_columns_of_other_kinds_refused(pk_context *ctx) {
    const struct {
        const char *form, *says;
    } kinds[] = {
        {"C", "the RA column 'RA' holds complex numbers (TFORM1 = 'C')"},
        {"1PD(2)", "the RA column 'RA' holds an array of varying length a row (TFORM1 = '1PD(2)')"},
        {"8A", "the RA column 'RA' holds text (TFORM1 = '8A')"},
        {"L", "the RA column 'RA' holds logical values (TFORM1 = 'L')"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        pk_catalog e;
        const char *fk[3] = {kinds[k].form, "D", "D"};
        CHECK(write_three_rows("kind.fits", BINARY_TBL, fk, three_rows_default) == 0, "writing %s", kinds[k].form);
        check_error(pk_catalog_read_spec(ctx, cli_path("kind.fits"), &plain_spec, &e, NULL), ctx, kinds[k].says,
                    kinds[k].form);
    }
}

static const char *double_forms[3] = {"D", "D", "D"};

/* two columns whose names differ only in case: refused for the
 * default name; a name given exactly as one of them picks it */
static void fits_names_differing_in_case(pk_context *ctx) {
    pk_catalog e = {0};
    three_rows rows = three_rows_default;
    const char *nd[3] = {"RA", "DEC", "ra"};
    double r3b[3] = {40, 50, 60};
    double *cd[3] = {rows.ra, rows.dec, r3b};
    CHECK(write_table(cli_path("dup.fits"), BINARY_TBL, 3, nd, double_forms, cd, 3) == 0, "writing dup.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("dup.fits"), &plain_spec, &e, NULL), ctx,
                "dup.fits: the RA column 'ra' could be column 1 'RA' or column 3 'ra'", "FITS RA and ra");
    pk_catalog_spec spu = {PK_FORMAT_AUTO, PK_UNITS_DEG, "RA", NULL, NULL, 0};
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("dup.fits"), &spu, &e, NULL), ctx);
    CHECK(e.n == 3 && fabs(e.ra[2] - 30 * M_PI / 180) < 1e-15, "--ra-col RA picks column 1");
    if (e.n) pk_catalog_free(&e);
    spu.ra_column = "ra";
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("dup.fits"), &spu, &e, NULL), ctx);
    CHECK(e.n == 3 && fabs(e.ra[2] - 60 * M_PI / 180) < 1e-15, "--ra-col ra picks column 3");
    if (e.n) pk_catalog_free(&e);
    spu.ra_column = "Ra";
    check_error(pk_catalog_read_spec(ctx, cli_path("dup.fits"), &spu, &e, NULL), ctx,
                "dup.fits: the RA column 'Ra' could be column 1 'RA' or column 3 'ra'", "FITS Ra");
    const char *nx[3] = {"ra", "dec", "ra"};
    CHECK(write_table(cli_path("dupx.fits"), BINARY_TBL, 3, nx, double_forms, cd, 3) == 0, "writing dupx.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("dupx.fits"), &spu, &e, NULL), ctx,
                "dupx.fits: the RA column 'ra' is named twice (columns 1 and 3)", "FITS ra twice, Ra");
    spu.ra_column = "ra";
    check_error(pk_catalog_read_spec(ctx, cli_path("dupx.fits"), &spu, &e, NULL), ctx,
                "dupx.fits: the RA column 'ra' is named twice (columns 1 and 3)", "FITS ra twice");
}

/* infinite values (cfitsio reads them as null), told from NaN
 * and from an integer column's TNULLn */
static void fits_infinite_nan_and_null_values_refused(pk_context *ctx) {
    pk_catalog e;
    double *we = NULL;
    three_rows rows = three_rows_default;
    rows.ra[1] = (double)INFINITY;
    CHECK(write_three_rows("inf.fits", BINARY_TBL, double_forms, rows) == 0, "writing inf.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("inf.fits"), &plain_spec, &e, NULL), ctx,
                "inf.fits: row 2, column 'ra': the RA is infinite", "FITS RA +inf");
    rows = three_rows_default;
    rows.w[2] = -(double)INFINITY;
    CHECK(write_three_rows("infw.fits", BINARY_TBL, double_forms, rows) == 0, "writing infw.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("infw.fits"), &w_spec, &e, &we), ctx,
                "infw.fits: row 3, column 'w': the weight is infinite", "FITS weight -inf");
    rows = three_rows_default;
    rows.ra[2] = (double)NAN;
    CHECK(write_three_rows("nanra.fits", BINARY_TBL, double_forms, rows) == 0, "writing nanra.fits");
    check_error(pk_catalog_read_spec(ctx, cli_path("nanra.fits"), &plain_spec, &e, NULL), ctx,
                "nanra.fits: row 3, column 'ra': the RA is NaN", "FITS RA NaN");
    rows = three_rows_default;
    rows.dec[1] = -999;
    const char *fj[3] = {"D", "J", "D"};
    CHECK(write_three_rows("tnull.fits", BINARY_TBL, fj, rows) == 0, "writing tnull.fits");
    int status = set_key_lng(cli_path("tnull.fits"), "TNULL2", -999);
    CHECK(status == 0, "TNULL2 written: status %d", status);
    check_error(pk_catalog_read_spec(ctx, cli_path("tnull.fits"), &plain_spec, &e, NULL), ctx,
                "tnull.fits: row 2, column 'dec': the Dec is null (the column's TNULL value)", "FITS TNULL");
}

/* a negative NAXIS2, an empty file, a .gz that is not gzip */
static void damaged_fits_files_refused(pk_context *ctx) {
    pk_catalog e;
    size_t len = 0;
    char *bytes = slurp_file(cli_path("asc.fits"), &len);
    int edited = 0;
    for (size_t at = 2880; bytes && at + 80 <= len && !edited; at += 80)
        if (memcmp(bytes + at, "NAXIS2  =", 9) == 0) memcpy(bytes + at + 10, "                  -5", 20), edited = 1;
    CHECK(edited, "NAXIS2 found in asc.fits");
    write_bytes(cli_path("neg.fits"), bytes, len);
    free(bytes);
    check_error(pk_catalog_read_spec(ctx, cli_path("neg.fits"), &plain_spec, &e, NULL), ctx,
                "neg.fits: HDU 2: NAXIS2 = -5 is negative", "FITS NAXIS2 = -5");
    cli_write("zero.fits", "");
    check_error(pk_catalog_read_spec(ctx, cli_path("zero.fits"), &plain_spec, &e, NULL), ctx,
                "zero.fits: an empty file (0 bytes)", "empty .fits");
    cli_write("notgz.fits.gz", "ra,dec\n1,2\n");
    check_error(pk_catalog_read_spec(ctx, cli_path("notgz.fits.gz"), &plain_spec, &e, NULL), ctx,
                "notgz.fits.gz: named .gz but not gzip data", ".fits.gz of text");
    cli_write("notfits.fits", "ra,dec\n1,2\n");
    check_error(pk_catalog_read_spec(ctx, cli_path("notfits.fits"), &plain_spec, &e, NULL), ctx,
                "notfits.fits: not a FITS file (it does not start with 'SIMPLE')", ".fits of text");
    gz_write(cli_path("empty.fits.gz"), "", 0);
    check_error(pk_catalog_read_spec(ctx, cli_path("empty.fits.gz"), &plain_spec, &e, NULL), ctx,
                "empty.fits.gz: gzip-compressed, but empty inside", "gzip of nothing");
}

/* an extension without its primary HDU (cfitsio opens it, and
 * the check of the headers did not walk it) */
static void fits_extension_without_its_primary_refused(pk_context *ctx) {
    pk_catalog e;
    size_t len = 0;
    char *bytes = slurp_file(cli_path("vec0.fits"), &len);
    FILE *fp = fopen(cli_path("xt.fits"), "wb");
    if (fp && bytes && len > 2880) fwrite(bytes + 2880, 1, len - 2880, fp);
    if (fp) fclose(fp);
    free(bytes);
    check_error(pk_catalog_read_spec(ctx, cli_path("xt.fits"), &plain_spec, &e, NULL), ctx,
                "xt.fits: not a FITS file (it does not start with 'SIMPLE': an extension without its primary",
                "FITS file starting with XTENSION");
}

/* a plain FITS file named .gz: still read */
static void plain_fits_named_gz_is_read(pk_context *ctx) {
    pk_catalog e = {0};
    size_t len = 0;
    char *bytes = slurp_file(cli_path("vec0.fits"), &len);
    write_bytes(cli_path("plain.fits.gz"), bytes, len);
    free(bytes);
    CHECK_OK(pk_catalog_read_spec(ctx, cli_path("plain.fits.gz"), &plain_spec, &e, NULL), ctx);
    if (e.n) pk_catalog_free(&e);
}

/* the native format has no columns to take weights from */
static void native_format_has_no_weight_column(pk_context *ctx) {
    pk_catalog c;
    double *wb = NULL;
    check_error(pk_catalog_read_spec(ctx, cli_path("cat.txt"), &w_spec, &c, &wb), ctx,
                "the native format has no weight column 'w'", "native with weights");
}

/* edge files */
static void edge_files_are_read_and_checked(pk_context *ctx) {
    pk_bins b;
    cli_write("edges.txt", "# edges in degrees\n0.01\n0.1 1.0\n\n10 # last\n");
    CHECK_OK(pk_bins_read_edges(ctx, cli_path("edges.txt"), &b), ctx);
    CHECK(b.n_bins == 3 && fabs(b.edges[3] - 10 * M_PI / 180) < 1e-15, "edge file: %zu bins", b.n_bins);
    pk_bins_free(&b);
    cli_write("e1.txt", "0.1\n0.05\n");
    check_error(pk_bins_read_edges(ctx, cli_path("e1.txt"), &b), ctx, "e1.txt:2: edge 0.05 degrees does not increase",
                "decreasing edges");
    cli_write("e2.txt", "0.1\nten\n");
    check_error(pk_bins_read_edges(ctx, cli_path("e2.txt"), &b), ctx, "e2.txt:2: 'ten' is not an edge", "text edge");
    cli_write("e3.txt", "0.1\n");
    check_error(pk_bins_read_edges(ctx, cli_path("e3.txt"), &b), ctx, "needs at least 2 edges", "one edge");
    cli_write("e4.txt", "-1 2\n");
    check_error(pk_bins_read_edges(ctx, cli_path("e4.txt"), &b), ctx, "e4.txt:1: edge -1 is not an angle",
                "negative edge");
}

/* The first m positions of the shared catalog in other units, written as
 * units.fits by the checks below. */
typedef struct units_table {
    const formats_test *t;
    size_t m;
    double *ra, *dec;
} units_table;

static const char *units_columns[2] = {"RA", "DEC"};

/* the positions scaled: values in the file per degree */
static void units_table_fill(units_table *u, double ra_scale, double dec_scale) {
    for (size_t i = 0; i < u->m; i++) u->ra[i] = u->t->ra[i] * ra_scale, u->dec[i] = u->t->dec[i] * dec_scale;
}

static int units_table_write(const units_table *u) {
    double *cols[2] = {u->ra, u->dec};
    return write_fits(cli_path("units.fits"), 2, units_columns, cols, (long)u->m);
}

/* FITS columns in the units their TUNITn names (any case), RA and Dec
 * each by its own; an empty one left to the units asked for */
static void fits_units_from_tunit(pk_context *ctx, units_table *u) {
    struct {
        const char *ra_unit, *dec_unit;
        pk_units ra_units, dec_units;
        double ra_scale, dec_scale; /* values in the file per degree */
    } cases[] = {
        {"rad", "rad", PK_UNITS_RAD, PK_UNITS_RAD, M_PI / 180, M_PI / 180},
        {"DEGREES", " deg ", PK_UNITS_DEG, PK_UNITS_DEG, 1, 1},
        {"Radians", "radian", PK_UNITS_RAD, PK_UNITS_RAD, M_PI / 180, M_PI / 180},
        {"arcmin", "rad", PK_UNITS_ARCMIN, PK_UNITS_RAD, 60, M_PI / 180},
        {"arcsec", "degree", PK_UNITS_ARCSEC, PK_UNITS_DEG, 3600, 1},
        {"", "rad", PK_UNITS_DEG, PK_UNITS_RAD, 1, M_PI / 180}, /* empty: the units asked for */
    };
    pk_units parsed = PK_UNITS_DEG;
    CHECK(pk_units_parse("arcsec", &parsed) == PK_OK && parsed == PK_UNITS_ARCSEC &&
              pk_units_to_rad(3600, PK_UNITS_ARCSEC) == 3600 * (M_PI / 648000.0),
          "arcsec: parsed as %d", (int)parsed);
    const double *ra = u->t->ra, *dec = u->t->dec;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        units_table_fill(u, cases[k].ra_scale, cases[k].dec_scale);
        const char *path = cli_path("units.fits");
        CHECK(units_table_write(u) == 0 && set_tunit(path, 1, cases[k].ra_unit) == 0 &&
                  set_tunit(path, 2, cases[k].dec_unit) == 0,
              "writing units.fits");
        pk_catalog c;
        pk_status st_u = pk_catalog_read_spec(ctx, path, &plain_spec, &c, NULL);
        CHECK_OK(st_u, ctx);
        int same = st_u == PK_OK && c.n == u->m;
        for (size_t i = 0; i < u->m && same; i++)
            same = c.ra[i] == pk_units_to_rad(u->ra[i], cases[k].ra_units) &&
                   c.dec[i] == pk_units_to_rad(u->dec[i], cases[k].dec_units) &&
                   fabs(c.ra[i] - ra[i] * M_PI / 180) < 1e-12 && fabs(c.dec[i] - dec[i] * M_PI / 180) < 1e-12;
        CHECK(same, "TUNIT '%s', '%s': positions not read in those units", cases[k].ra_unit, cases[k].dec_unit);
        pk_catalog_free(&c);
        /* units given that agree with TUNIT (or with no TUNIT) are taken */
        pk_catalog_spec agree = {PK_FORMAT_AUTO, cases[k].dec_units, NULL, NULL, NULL, 1};
        if (cases[k].ra_units == cases[k].dec_units) {
            CHECK_OK(pk_catalog_read_spec(ctx, path, &agree, &c, NULL), ctx);
            pk_catalog_free(&c);
        }
    }
}

/* units that are not of angle refused, and so are TUNITs that contradict
 * units the caller gave */
static void tunit_against_the_units_given_refused(pk_context *ctx, units_table *u) {
    const char *path = cli_path("units.fits");
    units_table_fill(u, M_PI / 180, M_PI / 180);
    CHECK(units_table_write(u) == 0 && set_tunit(path, 1, "rad") == 0 && set_tunit(path, 2, "rad") == 0,
          "writing units.fits");
    pk_catalog c;
    pk_catalog_spec given = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 1};
    pk_status st_given = pk_catalog_read_spec(ctx, path, &given, &c, NULL);
    check_error(st_given, ctx, "units.fits: the RA column 'RA' is in rad (TUNIT1 = 'rad'), not in deg as --units says",
                "TUNIT rad with deg given");
    CHECK(st_given == PK_ERR_PARSE, "TUNIT against --units: status %d", (int)st_given);
    CHECK(set_tunit(path, 2, "hourangle") == 0, "TUNIT2");
    check_error(pk_catalog_read_spec(ctx, path, &plain_spec, &c, NULL), ctx,
                "units.fits: the Dec column 'DEC' has TUNIT2 = 'hourangle', which is not units of angle pairkit "
                "reads (deg, degree, degrees, rad, radian, radians, arcmin",
                "TUNIT hourangle");
}

/* a declination out of range names the units it was read in */
static void dec_out_of_range_names_its_units(pk_context *ctx, units_table *u) {
    const char *path = cli_path("units.fits");
    pk_catalog c;
    units_table_fill(u, M_PI / 180, M_PI / 180);
    u->dec[3] = 2.0;
    CHECK(units_table_write(u) == 0 && set_tunit(path, 2, "rad") == 0, "units.fits");
    check_error(pk_catalog_read_spec(ctx, path, &plain_spec, &c, NULL), ctx,
                "row 4 (columns 'ra', 'dec'): dec 2 rad is outside [-90, 90] degrees", "dec 2 rad");
}

/* the command: a FITS catalog in radians gives the w(theta) of the
 * same positions in degrees; --units against TUNIT is refused */
static void command_reads_fits_in_radians(units_table *u) {
    FILE *fp = fopen(cli_path("units_deg.csv"), "w");
    fprintf(fp, "ra,dec\n");
    for (size_t i = 0; i < u->m; i++) fprintf(fp, "%.17g,%.17g\n", u->t->ra[i], u->t->dec[i]);
    fclose(fp);
    const char *path = cli_path("units.fits");
    units_table_fill(u, M_PI / 180, M_PI / 180);
    CHECK(units_table_write(u) == 0 && set_tunit(path, 1, "rad") == 0 && set_tunit(path, 2, "RAD") == 0, "units.fits");
    int rc_rad = cli_run("angcorr units.fits units.fits --nbins 18 --bin-width 10 -o u_rad.out --png none -q");
    int rc_deg = cli_run("angcorr units_deg.csv units_deg.csv --nbins 18 --bin-width 10 -o u_deg.out --png none -q");
    char *u_rad = cli_read(cli_path("u_rad.out")), *u_deg = cli_read(cli_path("u_deg.out"));
    CHECK(rc_rad == 0 && rc_deg == 0 && u_rad && u_deg && strcmp(u_rad, u_deg) == 0,
          "FITS in radians vs CSV in degrees: exit %d, %d, outputs %s", rc_rad, rc_deg,
          u_rad && u_deg && strcmp(u_rad, u_deg) == 0 ? "equal" : "differ");
    free(u_rad), free(u_deg);
    CHECK(cli_run("angcorr units.fits units.fits --units rad --nbins 18 --bin-width 10 -o u_r2.out --png none "
                  "-q") == 0,
          "--units rad with TUNIT rad refused");
    int rc = cli_run("angcorr units.fits units.fits --units deg --nbins 18 --bin-width 10 -o u_bad.out -q");
    char *err = cli_stderr();
    CHECK(rc == 1 && err &&
              strstr(err, "units.fits: the RA column 'RA' is in rad (TUNIT1 = 'rad'), not in deg as --units says"),
          "--units deg with TUNIT rad: exit %d, %s", rc, err ? err : "");
    CHECK(cli_count_files("u_bad") == 0, "an output written after the units were refused");
    free(err);
    /* without TUNIT and without --units, FITS columns are in degrees, as
     * CSV ones are (not the native format's arcminutes) */
    units_table_fill(u, 1, 1);
    CHECK(units_table_write(u) == 0, "units.fits in degrees, no TUNIT");
    int rc_fdeg = cli_run("angcorr units.fits units.fits --nbins 18 --bin-width 10 -o u_fdeg.out --png none -q");
    char *u_fdeg = cli_read(cli_path("u_fdeg.out"));
    u_deg = cli_read(cli_path("u_deg.out"));
    CHECK(rc_fdeg == 0 && u_fdeg && u_deg && strcmp(u_fdeg, u_deg) == 0,
          "FITS without TUNIT vs CSV, both in degrees: exit %d, outputs %s", rc_fdeg,
          u_fdeg && u_deg && strcmp(u_fdeg, u_deg) == 0 ? "equal" : "differ");
    free(u_fdeg), free(u_deg);
}

/* n lines of "ra,dec,w" under that header: positions within 20 degrees */
static void write_weighted_csv(const char *name, check_rng *rng, int n) {
    FILE *fp = fopen(cli_path(name), "w");
    fprintf(fp, "ra,dec,w\n");
    for (int i = 0; i < n; i++)
        fprintf(fp, "%.9f,%.9f,%.6f\n", 20 * check_uniform(rng), 20 * check_uniform(rng), 0.5 + check_uniform(rng));
    fclose(fp);
}

/* the command: CSV with weights, jackknife, mean separations, edges */
static void command_with_weights_and_jackknife(check_rng *rng) {
    write_weighted_csv("d.csv", rng, 400);
    write_weighted_csv("r.csv", rng, 600);
    int rc = cli_run(
        "angcorr d.csv r.csv --weight-col w --theta-min 0.1 --log 10 --nbins 8 --jackknife 4 "
        "--mean-theta --csv o.csv -o o.out --png none -q");
    char *err = cli_stderr();
    CHECK(rc == 0, "command with weights and jackknife: exit %d: %s", rc, err ? err : "");
    free(err);
    char *o = cli_read(cli_path("o.csv")), *cov = cli_read(cli_path("o_cov.csv"));
    CHECK(o && strstr(o,
                      "theta_lo_deg,theta_hi_deg,theta_mean_dd_deg,theta_mean_dr_deg,theta_mean_rr_deg,omega,"
                      "omega_err,dd,dr,rr,dd_weighted,dr_weighted,rr_weighted\n") == o,
          "CSV header: %.200s", o ? o : "(none)");
    int lines = 0;
    for (const char *p = cov; p && *p; p++) lines += *p == '\n';
    CHECK(lines == 9, "covariance CSV: %d lines, expected 9", lines);
    free(o), free(cov);
}

/* the kept cells damaged: edited_cells.txt with a weighted sum changed
 * in its first digit (by 10% at least: a change in the 17th significant
 * digit can leave the same double, which the reader rightly takes),
 * cut_cells.txt cut after the header and edges */
static void write_damaged_cells(const char *kept) {
    const char *cell = strstr(kept, "\n0 0 3 ");
    const char *w_start = cell ? strchr(cell + 8, ' ') : NULL; /* before the weighted sum */
    if (w_start && w_start[1] >= '0' && w_start[1] <= '9') {
        FILE *fp = fopen(cli_path("edited_cells.txt"), "w");
        char first = w_start[1] == '1' ? '2' : '1';
        fprintf(fp, "%.*s%c%s", (int)(w_start + 1 - kept), kept, first, w_start + 2);
        fclose(fp);
    }
    const char *first_cell = strstr(kept, "\n0 0 0 ");
    if (first_cell) {
        FILE *fp = fopen(cli_path("cut_cells.txt"), "w");
        fprintf(fp, "%.*s", (int)(first_cell + 1 - kept), kept);
        fclose(fp);
    }
}

/* RR per patch pair kept with --save-rr and taken again with --rr
 * for another data catalog: outputs byte for byte those of a run
 * that counts RR */
static void kept_rr_cells_give_the_counted_outputs(check_rng *rng) {
    write_weighted_csv("d2.csv", rng, 300);
    const char *opt = "--weight-col w --theta-min 0.1 --log 10 --nbins 8 --jackknife 4 --mean-theta --png none -q";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "angcorr d.csv r.csv %s --csv k0.csv -o k0.out --save-rr cells_rr.txt", opt);
    int rk0 = cli_run(cmd);
    snprintf(cmd, sizeof cmd, "angcorr d2.csv r.csv %s --csv k1.csv -o k1.out", opt);
    int rk1 = cli_run(cmd);
    snprintf(cmd, sizeof cmd, "angcorr d2.csv r.csv %s --csv k2.csv -o k2.out --rr cells_rr.txt", opt);
    int rk2 = cli_run(cmd);
    const char *same[] = {"k1.out", "k2.out", "k1.csv", "k2.csv", "k1_cov.csv", "k2_cov.csv"};
    int identical = rk0 == 0 && rk1 == 0 && rk2 == 0;
    for (int f = 0; f < 6; f += 2) {
        char *x = cli_read(cli_path(same[f])), *y = cli_read(cli_path(same[f + 1]));
        identical = identical && x && y && strcmp(x, y) == 0;
        free(x), free(y);
    }
    CHECK(identical, "--rr with weights, jackknife, mean-theta: outputs differ (exit %d, %d, %d)", rk0, rk1, rk2);
    char *kept = cli_read(cli_path("cells_rr.txt"));
    CHECK(kept && strncmp(kept, "pairkit-rr 2\nrandom 600 ", 24) == 0 && strstr(kept, "\npatches 4 ") &&
              strstr(kept, "\nmean-theta 1\nbins 8\n"),
          "the kept RR cells: %.200s", kept ? kept : "(none)");
    if (kept) write_damaged_cells(kept);
    free(kept);
}

/* a file of other patches, weights or settings, and a changed one,
 * refused with nothing written */
static void rr_cells_that_do_not_fit_refused(void) {
    const struct {
        const char *args, *says;
    } wrong[] = {
        {"--weight-col w --nbins 8 --theta-min 0.1 --log 10 --jackknife 9 --mean-theta --csv x.csv --rr "
         "cells_rr.txt",
         "cells_rr.txt:4: the RR in the file is of --jackknife 4; this run has --jackknife 9"},
        {"--data-weight-col w --nbins 8 --theta-min 0.1 --log 10 --jackknife 4 --mean-theta --csv x.csv --rr "
         "cells_rr.txt",
         "cells_rr.txt:3: the RR in the file was counted with random weights; this run has no random weights"},
        {"--weight-col w --nbins 8 --theta-min 0.1 --log 10 --jackknife 4 --rr cells_rr.txt",
         "cells_rr.txt:5: the RR in the file was counted with --mean-theta; this run does not ask for it"},
        {"--weight-col w --nbins 7 --theta-min 0.1 --log 10 --jackknife 4 --mean-theta --csv x.csv --rr "
         "cells_rr.txt",
         "cells_rr.txt:6: 8 bins in the file, 7 in this run"},
        {"--nbins 8 --theta-min 0.1 --log 10 --rr cells_rr.txt",
         "cells_rr.txt:1: these are the RR counts of a run with random weights, --mean-theta or --jackknife"},
        {"--weight-col w --nbins 8 --theta-min 0.1 --log 10 --jackknife 4 --mean-theta --csv x.csv --rr "
         "edited_cells.txt",
         "edited_cells.txt:7: the counts do not match their checksum"},
        {"--weight-col w --nbins 8 --theta-min 0.1 --log 10 --jackknife 4 --mean-theta --csv x.csv --rr "
         "cut_cells.txt",
         "cut_cells.txt:16: the file ends before cell (0, 0) bin 0"},
    };
    for (size_t b = 0; b < sizeof wrong / sizeof wrong[0]; b++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "angcorr d2.csv r.csv %s -o x.out --png none -q", wrong[b].args);
        int rc_b = cli_run(cmd);
        char *e = cli_stderr();
        CHECK(rc_b == 1 && e && strstr(e, wrong[b].says) && cli_count_files("x.out") == 0 &&
                  cli_count_files("x.csv") == 0,
              "%s: exit %d, %s", wrong[b].args, rc_b, e ? e : "");
        free(e);
    }
}

/* column names for one catalog: the same counts as the shared names;
 * a catalog's own names win over the shared ones, given before or after */
static void per_catalog_column_names(void) {
    char *dtext = cli_read(cli_path("d.csv"));
    if (dtext) {
        FILE *fp = fopen(cli_path("dj.csv"), "w");
        fprintf(fp, "RA_J2000,DEC_J2000,w\n%s", strchr(dtext, '\n') + 1);
        fclose(fp);
    }
    free(dtext);
    int rc1 = cli_run(
        "angcorr dj.csv r.csv --data-ra-col RA_J2000 --data-dec-col DEC_J2000 --nbins 40 -o p1.out "
        "--png none -q");
    int rc2 = cli_run("angcorr d.csv r.csv --nbins 40 -o p2.out --png none -q");
    int rc3 = cli_run(
        "angcorr dj.csv r.csv --data-ra-col RA_J2000 --data-dec-col DEC_J2000 --ra-col ra --dec-col "
        "dec --nbins 40 -o p4.out --png none -q");
    char *p1 = cli_read(cli_path("p1.out")), *p2 = cli_read(cli_path("p2.out")), *p4 = cli_read(cli_path("p4.out"));
    CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && p1 && p2 && p4 && strcmp(p1, p2) == 0 && strcmp(p4, p2) == 0,
          "per-catalog columns: exit %d, %d, %d", rc1, rc2, rc3);
    free(p1), free(p2), free(p4);
}

/* bins narrower than omega.out's 0.001 degree: a note, not silence */
static void narrow_bins_get_a_note(void) {
    int rc = cli_run("angcorr d.csv r.csv --theta-min 0.0005 --log 0.01 --nbins 10 -o lg.out --png none -q");
    char *note = cli_stderr();
    CHECK(rc == 0 && note && strstr(note, "does not tell bins 0 and 1 apart (both 0.001); --csv FILE"),
          "narrow bins: exit %d, %s", rc, note ? note : "");
    free(note);
}

/* --ra-col with one catalog in CSV and one in the native format */
static void column_names_with_one_native_catalog(void) {
    cli_write("n.txt", "2\n60 60\n120 120\n");
    int rc = cli_run("angcorr n.txt r.csv --ra-col ra --nbins 40 -o p3.out --png none -q");
    CHECK(rc == 0, "--ra-col with one CSV catalog and one native: exit %d", rc);
}

/* an edge file: missing, refused; given, used */
static void command_with_an_edge_file(void) {
    int rc = cli_run("angcorr d.csv r.csv --edges ../nonexistent_edges.txt -q --png none");
    CHECK(rc != 0, "a missing edge file accepted");
    cli_write("ed.txt", "0.1 0.5 2 8\n");
    cli_write("negw.csv", "ra,dec,w\n10,20,1\n11,21,-2\n");
    rc = cli_run("angcorr d.csv r.csv --edges ed.txt --csv e.csv -o e.out --png none -q");
    CHECK(rc == 0, "command with an edge file: exit %d", rc);
}

/* --weight-col beside both catalogs' own weight columns would be ignored: refused */
static void weight_col_beside_both_own_columns_refused(void) {
    int rc = cli_run("angcorr d.csv r.csv --weight-col w --data-weight-col w --random-weight-col w -o ww.out -q");
    char *err = cli_stderr();
    CHECK(rc == 2 && err &&
              strstr(err,
                     "pairkit angcorr: --weight-col would be ignored: --data-weight-col and "
                     "--random-weight-col name both catalogs' weight columns"),
          "--weight-col with both per-catalog weight columns: exit %d, stderr '%s'", rc, err ? err : "");
    CHECK(cli_count_files("ww.") == 0, "--weight-col ignored: an output written");
    free(err);
}

/* command lines that cannot run, each refused with what is wrong */
static void bad_command_lines_refused(void) {
    struct {
        const char *args, *want;
    } bad_cli[] = {
        {"angcorr d.csv r.csv --jackknife 1", "--jackknife: 1 patches"},
        {"angcorr d.csv r.csv --log 0", "--log: theta_max must be > 0"},
        {"angcorr negw.csv r.csv --data-weight-col w",
         "negw.csv: column 'w': the weights sum to -1; the estimators need a positive total weight"},
        {"angcorr d.csv r.csv --log 5 --theta-min 5", "theta_max must be greater than theta_min"},
        {"angcorr d.csv r.csv --log 5 --theta-min 0", "log bins need theta_min > 0"},
        {"angcorr d.csv r.csv --log 5 --theta-min -1", "log bins need theta_min > 0"},
        {"angcorr d.csv r.csv --weight-col nope", "d.csv:1: no weight column 'nope'"},
        /* a catalog's own weight column comes before --weight-col, given before or after it */
        {"angcorr d.csv r.csv --data-weight-col w --weight-col nope", "r.csv:1: no weight column 'nope'"},
        {"angcorr d.csv r.csv --weight-col nope --data-weight-col w", "r.csv:1: no weight column 'nope'"},
        {"angcorr d.csv r.csv --format xml", "--format: 'xml' is not"},
        {"angcorr d.csv r.csv --prune maybe", "--prune: 'maybe' is not"},
        {"angcorr d.csv r.csv --log 5", "log bins need theta_min > 0: give --theta-min"},
        {"angcorr d.csv r.csv --log 5 --theta-min 0.1 --bin-width 2", "--bin-width is for linear bins"},
        {"angcorr d.csv r.csv --edges ed.txt --nbins 3", "--nbins would be ignored"},
        {"angcorr d.csv r.csv --edges ed.txt --bin-width 2", "--bin-width would be ignored"},
        {"angcorr d.csv r.csv --edges ed.txt --theta-min 1", "--theta-min would be ignored"},
        {"angcorr d.csv r.csv --cov c.csv", "--cov: the covariance comes from --jackknife"},
        {"angcorr d.csv r.csv --mean-theta", "--mean-theta: the mean separations are written to the CSV"},
        {"angcorr d.csv r.csv --theta-min 200", "theta_min 200 degrees is beyond 180 degrees"},
        {"angcorr d.csv r.csv --log 200 --theta-min 1", "theta_max 200 degrees is beyond 180 degrees"},
        {"angcorr n.txt r.csv --data-ra-col x", "--data-ra-col: n.txt is in the native format"},
        {"angcorr d.csv n.txt --random-dec-col x", "--random-dec-col: n.txt is in the native format"},
        {"angcorr n.txt n.txt --ra-col x", "--ra-col: both catalogs are in the native format"},
        {"angcorr dj.csv r.csv --ra-col RA_J2000 --dec-col DEC_J2000", "r.csv:1: no RA column 'RA_J2000'"},
        {"angcorr d.csv r.csv -o q.png", "q.png: named for two outputs, -o (default omega.out) and the PNG plot"},
        {"angcorr d.csv r.csv -o q.out --jackknife 4 --csv q_cov.csv",
         "q_cov.csv: named for two outputs, --csv and the covariance CSV"},
    };
    for (size_t k = 0; k < sizeof bad_cli / sizeof bad_cli[0]; k++) {
        int rc = cli_run(bad_cli[k].args);
        char *err = cli_stderr();
        CHECK(rc != 0 && err && strstr(err, bad_cli[k].want), "'%s': exit %d, stderr '%s'", bad_cli[k].args, rc,
              err ? err : "");
        free(err);
    }
}

int main(void) {
    formats_test t = {.n = 300};
    t.rng = check_rng_make(4242);
    cli_scratch();
    pk_context_init(&t.ctx);
    pk_context *ctx = &t.ctx;
    t.ra = malloc(t.n * sizeof(double)), t.dec = malloc(t.n * sizeof(double)), t.w = malloc(t.n * sizeof(double));

    write_catalog_in_three_formats(&t);
    three_formats_read_alike(&t);
    csv_columns_picked_by_the_caller(ctx);
    csv_quoted_fields_are_read(ctx);
    ra_beyond_4096_rad_refused(ctx);
    csv_errors_name_the_line_and_column(ctx);

    fits_errors_name_the_row_and_column(&t);
    fits_columns_by_number(ctx);
    one_column_for_two_roles_refused(&t);
    fits_unquoted_long_ttype_refused(ctx);
    gzip_and_cut_fits_files(ctx);
    fits_table_after_an_empty_image_is_read(ctx);
    /* FITS columns that were read wrongly or refused unclearly */
    fits_vector_columns_refused(ctx);
    fits_ascii_table_fields(ctx);
    fits_ascii_tnull_field_is_null(ctx);
    fits_ascii_errors_past_the_first_chunks(ctx);
    fits_columns_of_other_kinds_refused(ctx);
    fits_names_differing_in_case(ctx);
    fits_infinite_nan_and_null_values_refused(ctx);
    damaged_fits_files_refused(ctx);
    fits_extension_without_its_primary_refused(ctx);
    plain_fits_named_gz_is_read(ctx);
    native_format_has_no_weight_column(ctx);

    edge_files_are_read_and_checked(ctx);

    units_table u = {&t, 50, malloc(50 * sizeof(double)), malloc(50 * sizeof(double))};
    fits_units_from_tunit(ctx, &u);
    tunit_against_the_units_given_refused(ctx, &u);
    dec_out_of_range_names_its_units(ctx, &u);
    command_reads_fits_in_radians(&u);
    free(u.ra), free(u.dec);

    command_with_weights_and_jackknife(&t.rng);
    kept_rr_cells_give_the_counted_outputs(&t.rng);
    rr_cells_that_do_not_fit_refused();
    per_catalog_column_names();
    narrow_bins_get_a_note();
    column_names_with_one_native_catalog();
    command_with_an_edge_file();
    weight_col_beside_both_own_columns_refused();
    bad_command_lines_refused();

    free(t.ra), free(t.dec), free(t.w);
    cli_scratch_remove();
    return check_finish("test_angcorr_formats");
}
