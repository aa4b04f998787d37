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

/* A FITS binary table with double columns; names[c], cols[c][n]. */
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

int main(void) {
    check_rng rng = check_rng_make(4242);
    cli_scratch();
    pk_context ctx;
    pk_context_init(&ctx);
    size_t n = 300;
    double *ra = malloc(n * sizeof(double)), *dec = malloc(n * sizeof(double)), *w = malloc(n * sizeof(double));
    /* positions in degrees with a text form that parses back exactly */
    FILE *nat = fopen(cli_path("cat.txt"), "w"), *csv = fopen(cli_path("cat.csv"), "w");
    fprintf(nat, "%zu\n", n);
    fprintf(csv, "# a comment line\nid, RA ,Dec,weight,\"mag\"\n");
    for (size_t i = 0; i < n; i++) {
        ra[i] = 360 * check_uniform(&rng);
        dec[i] = -90 + 180 * check_uniform(&rng);
        w[i] = 0.5 + check_uniform(&rng);
        fprintf(nat, "%.17g\t%.17g\r\n", ra[i], dec[i]);
        fprintf(csv, "%zu,%.17g,%.17g,%.17g,%.3f\n", i, ra[i], dec[i], w[i], 20 + check_uniform(&rng));
    }
    fclose(nat);
    fclose(csv);
    const char *names[3] = {"RA", "DEC", "WEIGHT"};
    double *cols[3] = {ra, dec, w};
    CHECK(write_fits(cli_path("cat.fits"), 3, names, cols, (long)n) == 0, "writing the FITS table");

    pk_catalog c_nat, c_csv, c_fits;
    double *w_csv = NULL, *w_fits = NULL;
    pk_catalog_spec spec = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.txt"), &spec, &c_nat, NULL), &ctx);
    spec.weight_column = "weight";
    CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.csv"), &spec, &c_csv, &w_csv), &ctx);
    CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &spec, &c_fits, &w_fits), &ctx);
    same_catalog(&c_nat, &c_csv, "native vs CSV");
    same_catalog(&c_nat, &c_fits, "native vs FITS");
    for (size_t i = 0; i < n && w_csv && w_fits; i++)
        CHECK(w_csv[i] == w[i] && w_fits[i] == w[i], "weight %zu: %g %g vs %g", i, w_csv[i], w_fits[i], w[i]);
    free(w_csv), free(w_fits);
    pk_catalog_free(&c_csv);
    pk_catalog_free(&c_fits);

    /* column names picked by the caller, format forced */
    cli_write("pick.dat", "x,y,w\n10,20,1\n11,21,2\n");
    pk_catalog_spec pick = {PK_FORMAT_CSV, PK_UNITS_DEG, "x", "y", "w", 0};
    double *wp = NULL;
    CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("pick.dat"), &pick, &c_csv, &wp), &ctx);
    CHECK(c_csv.n == 2 && wp && wp[1] == 2.0, "picked columns");
    free(wp);
    pk_catalog_free(&c_csv);

    /* quoted fields (RFC 4180): commas and doubled quotes inside them */
    cli_write("quoted.csv", "name,\"ra\",dec\n\"NGC 1, a\",10,20\n\"say \"\"hi\"\"\", \"11\" ,21\n");
    pk_catalog_spec qs = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
    CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("quoted.csv"), &qs, &c_csv, NULL), &ctx);
    CHECK(c_csv.n == 2 && fabs(c_csv.ra[0] - 10 * M_PI / 180) < 1e-15 && fabs(c_csv.dec[1] - 21 * M_PI / 180) < 1e-15,
          "quoted CSV fields: %zu objects", c_csv.n);
    pk_catalog_free(&c_csv);

    /* a right ascension within 4096 rad of 0 is read (unwrapped angles
     * too); beyond, float64 holds the direction poorly or not at all:
     * refused by every reader, the native format and arrays too */
    {
        cli_write("ra_edges.csv", "ra,dec\n-360,1\n720,2\n-234683,3\n234683,4\n");
        pk_catalog_spec es = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
        CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("ra_edges.csv"), &es, &c_csv, NULL), &ctx);
        pk_catalog_free(&c_csv);
        cli_write("ra_native.txt", "2\n21600 10\n1e20 10\n");
        pk_catalog c;
        check_error(pk_catalog_read(&ctx, cli_path("ra_native.txt"), PK_UNITS_ARCMIN, &c), &ctx,
                    "ra_native.txt:3: ra 1e+20 arcmin is beyond 4096 radians", "native RA of 1e20 arcmin");
        const double ra_arr[2] = {1.0, 4096.5}, dec_arr[2] = {0.1, 0.2};
        check_error(pk_catalog_from_arrays(&ctx, 2, ra_arr, dec_arr, PK_UNITS_RAD, "ra_rad", &c), &ctx,
                    "ra_rad[1]: ra 4096.5 rad is beyond 4096 radians", "array RA past 4096 rad");
        check_error(pk_catalog_from_arrays(&ctx, 2, NULL, dec_arr, PK_UNITS_RAD, "x", &c), &ctx,
                    "pk_catalog_from_arrays: ra is NULL (with n = 2)", "NULL ra");
    }

    /* errors, each naming file, line or row, and column */
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
        check_error(pk_catalog_read_spec(&ctx, cli_path(bad[k].name), &sp, &c, &wb), &ctx, bad[k].want, bad[k].name);
    }
    {
        pk_catalog c;
        double *wb = NULL;
        pk_catalog_spec sp = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "wt", 0};
        check_error(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &sp, &c, &wb), &ctx,
                    "cat.fits: no weight column 'wt' (the columns are: RA, DEC, WEIGHT)", "FITS without the column");
        w[7] = (double)NAN;
        CHECK(write_fits(cli_path("nan.fits"), 3, names, cols, (long)n) == 0, "writing the FITS table");
        sp.weight_column = "weight";
        check_error(pk_catalog_read_spec(&ctx, cli_path("nan.fits"), &sp, &c, &wb), &ctx,
                    "nan.fits: row 8, column 'weight': the weight is NaN", "FITS NaN weight");
        w[7] = 1.0;
        dec[3] = 95;
        CHECK(write_fits(cli_path("dec.fits"), 3, names, cols, (long)n) == 0, "writing the FITS table");
        sp.weight_column = NULL;
        check_error(pk_catalog_read_spec(&ctx, cli_path("dec.fits"), &sp, &c, NULL), &ctx,
                    "dec.fits: row 4 (columns 'ra', 'dec'): dec 95 deg is outside", "FITS dec out of range");
        dec[3] = 10;
        /* FITS columns by number, as cfitsio took them */
        {
            pk_catalog_spec by_number = {PK_FORMAT_AUTO, PK_UNITS_DEG, "1", "2", NULL, 0},
                            by_name = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
            pk_catalog a1, a2;
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &by_number, &a1, NULL), &ctx);
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &by_name, &a2, NULL), &ctx);
            same_catalog(&a1, &a2, "FITS columns 1 and 2 vs RA and DEC");
            pk_catalog_free(&a1), pk_catalog_free(&a2);
            by_number.ra_column = "4";
            check_error(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &by_number, &a1, NULL), &ctx,
                        "cat.fits: no RA column '4'", "FITS column 4 of 3");
        }
        /* one column for two roles refused; names differing only in case,
         * each given exactly, are two columns */
        {
            pk_catalog_spec both = {PK_FORMAT_AUTO, PK_UNITS_DEG, "DEC", NULL, NULL, 0};
            check_error(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &both, &c, NULL), &ctx,
                        "cat.fits: column 2 'DEC' is asked for as both the RA and the Dec", "FITS RA column = Dec's");
            const char *cased[3] = {"RA", "DEC", "ra"};
            CHECK(write_fits(cli_path("cased.fits"), 3, cased, cols, (long)n) == 0, "writing the FITS table");
            pk_catalog_spec exact = {PK_FORMAT_AUTO, PK_UNITS_DEG, "RA", "DEC", "ra", 0};
            double *cw = NULL;
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cased.fits"), &exact, &c, &cw), &ctx);
            CHECK(cw && c.n == n && cw[0] == w[0], "RA and ra as two columns");
            free(cw);
            pk_catalog_free(&c);
            /* CSV as FITS: RA and ra both there, a name given exactly picks one */
            cli_write("cased.csv", "RA,DEC,ra\n10,20,40\n11,21,41\n");
            pk_catalog_spec csv_exact = {PK_FORMAT_AUTO, PK_UNITS_DEG, "ra", NULL, NULL, 0};
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cased.csv"), &csv_exact, &c, NULL), &ctx);
            CHECK(c.n == 2 && fabs(c.ra[1] - 41 * M_PI / 180) < 1e-15, "CSV --ra-col ra picks column 3");
            pk_catalog_free(&c);
            pk_catalog_spec csv_default = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
            check_error(pk_catalog_read_spec(&ctx, cli_path("cased.csv"), &csv_default, &c, NULL), &ctx,
                        "cased.csv:1: the RA column 'ra' could be column 1 'RA' or column 3 'ra'",
                        "CSV default ra, RA and ra");
            cli_write("cased2.csv", "RA,ra,Dec,DEC,ra\n10,20,1,2,3\n");
            check_error(pk_catalog_read_spec(&ctx, cli_path("cased2.csv"), &csv_exact, &c, NULL), &ctx,
                        "cased2.csv:1: the RA column 'ra' is named twice (columns 2 and 5)", "CSV ra twice exactly");
            cli_write("roles.csv", "ra,dec,w\n10,20,1\n11,21,1\n");
            pk_catalog_spec csv_both = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "RA", 0};
            check_error(pk_catalog_read_spec(&ctx, cli_path("roles.csv"), &csv_both, &c, &cw), &ctx,
                        "roles.csv: column 1 'ra' is asked for as both the RA and the weight",
                        "CSV weight column = RA's");
        }
        /* TTYPE2 given an unquoted value of 70 characters: cfitsio 4.2 would
         * overflow its column name; refused by the header check first */
        {
            size_t len = 0;
            char *bytes = slurp_file(cli_path("cat.fits"), &len);
            FILE *fp = NULL;
            int edited = 0;
            for (size_t at = 0; bytes && at + 80 <= len && !edited; at += 80)
                if (strncmp(bytes + at, "TTYPE2  = ", 10) == 0) memset(bytes + at + 10, '[', 70), edited = 1;
            CHECK(edited, "TTYPE2 found in cat.fits");
            fp = fopen(cli_path("ttype.fits"), "wb");
            if (fp && bytes) fwrite(bytes, 1, len, fp);
            if (fp) fclose(fp);
            check_error(pk_catalog_read_spec(&ctx, cli_path("ttype.fits"), &sp, &c, NULL), &ctx,
                        "keyword TTYPE2   at offset", "FITS unquoted 70-character TTYPE2");
            CHECK(strstr(ctx.message, "neither a quoted string nor a number") != NULL, "message: %s", ctx.message);
            /* the same file with "SIMPLE       =" (cfitsio still opens it)
             * and a byte outside ASCII in TTYPE2: refused as well */
            if (bytes && len > 80) {
                memcpy(bytes, "SIMPLE       =               T", 30);
                for (size_t at = 0; at + 80 <= len; at += 80)
                    if (strncmp(bytes + at, "TTYPE2  = ", 10) == 0) memset(bytes + at + 10, 0xff, 70);
                fp = fopen(cli_path("ascii.fits"), "wb");
                if (fp) fwrite(bytes, 1, len, fp), fclose(fp);
                check_error(pk_catalog_read_spec(&ctx, cli_path("ascii.fits"), &sp, &c, NULL), &ctx,
                            "header byte 0xff at offset", "FITS non-ASCII header behind a moved SIMPLE '='");
            }
            /* gzip-compressed: the same check, on the decompressed file */
            if (bytes && len > 80) {
                gz_write(cli_path("ascii.fits.gz"), bytes, len);
                check_error(pk_catalog_read_spec(&ctx, cli_path("ascii.fits.gz"), &sp, &c, NULL), &ctx,
                            "header byte 0xff at offset", "gzip FITS with a non-ASCII header");
            }
            free(bytes);
        }
        /* gzip-compressed FITS: read from memory, as the plain file; cut
         * or not FITS inside: errors naming the file */
        {
            size_t len = 0;
            char *bytes = slurp_file(cli_path("cat.fits"), &len);
            FILE *fp = NULL;
            CHECK(bytes && len > 0, "reading cat.fits");
            if (bytes && len > 0) {
                gz_write(cli_path("cat.fits.gz"), bytes, len);
                pk_catalog cz, cp;
                double *wz = NULL, *wq = NULL;
                pk_catalog_spec spw = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "weight", 0};
                CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.fits.gz"), &spw, &cz, &wz), &ctx);
                CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat.fits"), &spw, &cp, &wq), &ctx);
                same_catalog(&cp, &cz, "FITS vs gzip FITS");
                for (size_t i = 0; i < n && wz && wq; i++) CHECK(wz[i] == wq[i], "gzip FITS weight %zu", i);
                free(wz), free(wq);
                pk_catalog_free(&cz);
                /* the compressed file cut in half */
                fp = fopen(cli_path("cat.fits.gz"), "rb");
                char *z = malloc(len + 1024);
                size_t zlen = fp && z ? fread(z, 1, len + 1024, fp) : 0;
                if (fp) fclose(fp);
                fp = fopen(cli_path("cut.fits.gz"), "wb");
                if (fp && z) fwrite(z, 1, zlen / 2, fp);
                if (fp) fclose(fp);
                free(z);
                check_error(pk_catalog_read_spec(&ctx, cli_path("cut.fits.gz"), &sp, &cz, NULL), &ctx,
                            "cut.fits.gz: truncated gzip file", "cut gzip FITS");
                /* a whole FITS file whose table is cut, compressed */
                gz_write(cli_path("short.fits.gz"), bytes, len - 2880);
                check_error(pk_catalog_read_spec(&ctx, cli_path("short.fits.gz"), &sp, &cz, NULL), &ctx,
                            "short.fits.gz: truncated: HDU 2 announces", "gzip FITS with a cut table");
                /* the plain file cut at every 100 bytes of its headers: the
                 * header named, never cfitsio's bare read error */
                for (size_t cut = 100; cut < len && cut < 3 * 2880; cut += 100) {
                    FILE *cf = fopen(cli_path("cuth.fits"), "wb");
                    if (cf) fwrite(bytes, 1, cut, cf), fclose(cf);
                    pk_status cst = pk_catalog_read_spec(&ctx, cli_path("cuth.fits"), &sp, &cz, NULL);
                    CHECK(cst == PK_ERR_PARSE && strstr(ctx.message, "cuth.fits: truncated"),
                          "FITS cut at byte %zu: status %d: %s", cut, (int)cst, ctx.message);
                    if (cst == PK_OK) pk_catalog_free(&cz);
                }
                /* a name that cfitsio's filename syntax would read as a filter */
                FILE *br = fopen(cli_path("cat[1].fits"), "wb");
                if (br) fwrite(bytes, 1, len, br), fclose(br);
                CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat[1].fits"), &spw, &cz, &wz), &ctx);
                same_catalog(&cp, &cz, "FITS named cat[1].fits");
                free(wz);
                pk_catalog_free(&cz);
                /* bytes after the last HDU that start no XTENSION (the
                 * standard's special records; a stray line end): read */
                char special[2881];
                memset(special, 'S', 2880);
                const char *tails[2] = {special, "\n"};
                size_t tail_len[2] = {2880, 1};
                for (int k = 0; k < 2; k++) {
                    FILE *tf = fopen(cli_path("tail.fits"), "wb");
                    if (tf) fwrite(bytes, 1, len, tf), fwrite(tails[k], 1, tail_len[k], tf), fclose(tf);
                    CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("tail.fits"), &spw, &cz, &wz), &ctx);
                    same_catalog(&cp, &cz, k ? "FITS with a line end after it" : "FITS with a special record");
                    free(wz);
                    pk_catalog_free(&cz);
                }
                /* a table's NAXIS1 that is not a whole number (cfitsio
                 * would size the table by whatever it reads from it) */
                char *odd = malloc(len);
                if (odd) {
                    memcpy(odd, bytes, len);
                    for (size_t at = 2880; at + 80 <= len; at += 80)
                        if (memcmp(odd + at, "NAXIS1  =", 9) == 0) {
                            memcpy(odd + at + 10, "                  )6", 20);
                            break;
                        }
                    FILE *bf = fopen(cli_path("naxis1.fits"), "wb");
                    if (bf) fwrite(odd, 1, len, bf), fclose(bf);
                    check_error(pk_catalog_read_spec(&ctx, cli_path("naxis1.fits"), &spw, &cz, &wz), &ctx,
                                "naxis1.fits: HDU 2: NAXIS1 = ')6' is not a whole number", "NAXIS1 not a number");
                    free(odd);
                }
                gz_write(cli_path("cat[2].fits.gz"), bytes, len); /* [2]: an HDU that does not exist */
                CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("cat[2].fits.gz"), &spw, &cz, &wz), &ctx);
                same_catalog(&cp, &cz, "gzip FITS named cat[2].fits.gz");
                free(wz);
                pk_catalog_free(&cz);
                pk_catalog_free(&cp);
                gz_write(cli_path("text.fits.gz"), "not a table\n", 12);
                check_error(pk_catalog_read_spec(&ctx, cli_path("text.fits.gz"), &sp, &cz, NULL), &ctx,
                            "text.fits.gz: gzip-compressed, but not a FITS file inside", "gzip of text");
            }
            free(bytes);
        }
        /* a primary image of NAXIS1 = 0 (no data; not random groups),
         * then the table: read */
        {
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
            pk_catalog_spec spd = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
            pk_catalog e3;
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("empty_primary.fits"), &spd, &e3, NULL), &ctx);
            CHECK(e3.n == 3, "a FITS table behind an empty NAXIS1 = 0 image: %zu objects", e3.n);
            pk_catalog_free(&e3);
        }
        /* FITS columns that were read wrongly or refused unclearly */
        {
            pk_catalog_spec spd = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
            pk_catalog e;
            double *we = NULL;
            double r6[6] = {10, 11, 20, 21, 30, 31}, r3[3] = {10, 20, 30}, d3[3] = {-5, 0, 5}, w3[3] = {1, 2, 3};
            double *c3[3] = {r6, d3, w3};
            /* a vector column: two values a row (read across rows before) */
            const char *nv[3] = {"RA", "DEC", "W"}, *fv[3] = {"2D", "D", "D"};
            CHECK(write_table(cli_path("vec.fits"), BINARY_TBL, 3, nv, fv, c3, 3) == 0, "writing vec.fits");
            check_error(pk_catalog_read_spec(&ctx, cli_path("vec.fits"), &spd, &e, NULL), &ctx,
                        "vec.fits: the RA column 'RA' holds 2 values a row (TFORM1 = '2D'); a catalog needs one",
                        "FITS RA column of repeat 2");
            const char *fz[3] = {"D", "D", "0D"};
            c3[0] = r3;
            CHECK(write_table(cli_path("vec0.fits"), BINARY_TBL, 3, nv, fz, c3, 3) == 0, "writing vec0.fits");
            pk_catalog_spec spw = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, "w", 0};
            check_error(pk_catalog_read_spec(&ctx, cli_path("vec0.fits"), &spw, &e, &we), &ctx,
                        "vec0.fits: the weight column 'W' holds no value a row (TFORM3 = '0D'); a catalog needs one",
                        "FITS weight column of repeat 0");
            /* ASCII tables: a blank field (read as 0 before), text */
            const char *fa[3] = {"F12.6", "F12.6", "F12.6"};
            CHECK(write_table(cli_path("asc.fits"), ASCII_TBL, 3, nv, fa, c3, 3) == 0, "writing asc.fits");
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("asc.fits"), &spw, &e, &we), &ctx);
            CHECK(e.n == 3 && fabs(e.dec[0] + 5 * M_PI / 180) < 1e-15 && we && we[2] == 3, "an ASCII table read");
            if (e.n) pk_catalog_free(&e);
            free(we);
            we = NULL;
            CHECK(edit_field(cli_path("asc.fits"), 2, 2, "") == 0, "blanking a field");
            check_error(pk_catalog_read_spec(&ctx, cli_path("asc.fits"), &spd, &e, NULL), &ctx,
                        "asc.fits: row 2, column 'dec': the field is blank (no number)",
                        "FITS ASCII table blank field");
            CHECK(write_table(cli_path("asct.fits"), ASCII_TBL, 3, nv, fa, c3, 3) == 0, "writing asct.fits");
            CHECK(edit_field(cli_path("asct.fits"), 3, 3, "  abc") == 0, "text in a field");
            check_error(pk_catalog_read_spec(&ctx, cli_path("asct.fits"), &spw, &e, &we), &ctx,
                        "asct.fits: row 3, column 'w': 'abc' is not a number", "FITS ASCII table text field");
            CHECK(edit_field(cli_path("asct.fits"), 3, 3, "1") == 0 &&
                      edit_field(cli_path("asct.fits"), 1, 2, " -") == 0,
                  "a lone minus in a field");
            check_error(pk_catalog_read_spec(&ctx, cli_path("asct.fits"), &spw, &e, &we), &ctx,
                        "asct.fits: row 2, column 'ra': '-' is not a number",
                        "FITS ASCII table lone minus (read as 0)");
            CHECK(edit_field(cli_path("asct.fits"), 1, 2, "E5") == 0, "an exponent alone in a field");
            check_error(pk_catalog_read_spec(&ctx, cli_path("asct.fits"), &spw, &e, &we), &ctx,
                        "asct.fits: row 2, column 'ra': 'E5' is not a number", "FITS ASCII table 'E5' (read as 0)");
            /* a field that is the column's TNULLn: null, not text */
            CHECK(edit_field(cli_path("asct.fits"), 1, 2, "NULL") == 0, "NULL in a field");
            {
                fitsfile *f;
                int status = 0;
                fits_open_file(&f, cli_path("asct.fits"), READWRITE, &status);
                fits_movabs_hdu(f, 2, NULL, &status);
                fits_write_key_str(f, "TNULL1", "NULL", "null", &status);
                fits_close_file(f, &status);
                CHECK(status == 0, "TNULL1 written: status %d", status);
            }
            check_error(pk_catalog_read_spec(&ctx, cli_path("asct.fits"), &spw, &e, &we), &ctx,
                        "asct.fits: row 2, column 'ra': the RA is null (the column's TNULL value)", "FITS ASCII TNULL");
            /* in a longer table, past the first chunks read */
            long nl = 60000;
            double *big[3] = {malloc(nl * sizeof(double)), malloc(nl * sizeof(double)), malloc(nl * sizeof(double))};
            for (long i = 0; i < nl && big[0] && big[1] && big[2]; i++)
                big[0][i] = (double)(i % 360), big[1][i] = (double)(i % 90), big[2][i] = 1;
            CHECK(write_table(cli_path("ascl.fits"), ASCII_TBL, 3, nv, fa, big, nl) == 0, "writing ascl.fits");
            CHECK(edit_field(cli_path("ascl.fits"), 1, 45678, "1.2.3") == 0, "text in a field");
            check_error(pk_catalog_read_spec(&ctx, cli_path("ascl.fits"), &spd, &e, NULL), &ctx,
                        "ascl.fits: row 45678, column 'ra': '1.2.3' is not a number", "FITS ASCII table, row 45678");
            CHECK(edit_field(cli_path("ascl.fits"), 1, 51234, "") == 0, "blanking a field");
            check_error(pk_catalog_read_spec(&ctx, cli_path("ascl.fits"), &spd, &e, NULL), &ctx,
                        "ascl.fits: row 51234, column 'ra': the field is blank", "FITS ASCII table, row 51234");
            free(big[0]), free(big[1]), free(big[2]);
            /* text, logical, complex and variable-length columns (complex
             * ones were read as real and imaginary parts in turn) */
            const struct {
                const char *form, *says;
            } kinds[] = {
                {"C", "the RA column 'RA' holds complex numbers (TFORM1 = 'C')"},
                {"1PD(2)", "the RA column 'RA' holds an array of varying length a row (TFORM1 = '1PD(2)')"},
                {"8A", "the RA column 'RA' holds text (TFORM1 = '8A')"},
                {"L", "the RA column 'RA' holds logical values (TFORM1 = 'L')"},
            };
            for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
                const char *fk[3] = {kinds[k].form, "D", "D"};
                CHECK(write_table(cli_path("kind.fits"), BINARY_TBL, 3, nv, fk, c3, 3) == 0, "writing %s",
                      kinds[k].form);
                check_error(pk_catalog_read_spec(&ctx, cli_path("kind.fits"), &spd, &e, NULL), &ctx, kinds[k].says,
                            kinds[k].form);
            }
            /* two columns whose names differ only in case: refused for the
             * default name; a name given exactly as one of them picks it */
            const char *nd[3] = {"RA", "DEC", "ra"}, *fd[3] = {"D", "D", "D"};
            double r3b[3] = {40, 50, 60};
            double *cd[3] = {r3, d3, r3b};
            CHECK(write_table(cli_path("dup.fits"), BINARY_TBL, 3, nd, fd, cd, 3) == 0, "writing dup.fits");
            check_error(pk_catalog_read_spec(&ctx, cli_path("dup.fits"), &spd, &e, NULL), &ctx,
                        "dup.fits: the RA column 'ra' could be column 1 'RA' or column 3 'ra'", "FITS RA and ra");
            pk_catalog_spec spu = {PK_FORMAT_AUTO, PK_UNITS_DEG, "RA", NULL, NULL, 0};
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("dup.fits"), &spu, &e, NULL), &ctx);
            CHECK(e.n == 3 && fabs(e.ra[2] - 30 * M_PI / 180) < 1e-15, "--ra-col RA picks column 1");
            if (e.n) pk_catalog_free(&e);
            spu.ra_column = "ra";
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("dup.fits"), &spu, &e, NULL), &ctx);
            CHECK(e.n == 3 && fabs(e.ra[2] - 60 * M_PI / 180) < 1e-15, "--ra-col ra picks column 3");
            if (e.n) pk_catalog_free(&e);
            spu.ra_column = "Ra";
            check_error(pk_catalog_read_spec(&ctx, cli_path("dup.fits"), &spu, &e, NULL), &ctx,
                        "dup.fits: the RA column 'Ra' could be column 1 'RA' or column 3 'ra'", "FITS Ra");
            const char *nx[3] = {"ra", "dec", "ra"};
            CHECK(write_table(cli_path("dupx.fits"), BINARY_TBL, 3, nx, fd, cd, 3) == 0, "writing dupx.fits");
            check_error(pk_catalog_read_spec(&ctx, cli_path("dupx.fits"), &spu, &e, NULL), &ctx,
                        "dupx.fits: the RA column 'ra' is named twice (columns 1 and 3)", "FITS ra twice, Ra");
            spu.ra_column = "ra";
            check_error(pk_catalog_read_spec(&ctx, cli_path("dupx.fits"), &spu, &e, NULL), &ctx,
                        "dupx.fits: the RA column 'ra' is named twice (columns 1 and 3)", "FITS ra twice");
            /* infinite values (cfitsio reads them as null), told from NaN
             * and from an integer column's TNULLn */
            r3[1] = (double)INFINITY;
            c3[0] = r3;
            CHECK(write_table(cli_path("inf.fits"), BINARY_TBL, 3, nv, fd, c3, 3) == 0, "writing inf.fits");
            check_error(pk_catalog_read_spec(&ctx, cli_path("inf.fits"), &spd, &e, NULL), &ctx,
                        "inf.fits: row 2, column 'ra': the RA is infinite", "FITS RA +inf");
            r3[1] = 20;
            w3[2] = -(double)INFINITY;
            CHECK(write_table(cli_path("infw.fits"), BINARY_TBL, 3, nv, fd, c3, 3) == 0, "writing infw.fits");
            check_error(pk_catalog_read_spec(&ctx, cli_path("infw.fits"), &spw, &e, &we), &ctx,
                        "infw.fits: row 3, column 'w': the weight is infinite", "FITS weight -inf");
            w3[2] = 3;
            r3[2] = (double)NAN;
            CHECK(write_table(cli_path("nanra.fits"), BINARY_TBL, 3, nv, fd, c3, 3) == 0, "writing nanra.fits");
            check_error(pk_catalog_read_spec(&ctx, cli_path("nanra.fits"), &spd, &e, NULL), &ctx,
                        "nanra.fits: row 3, column 'ra': the RA is NaN", "FITS RA NaN");
            r3[2] = 30;
            d3[1] = -999;
            const char *fj[3] = {"D", "J", "D"};
            CHECK(write_table(cli_path("tnull.fits"), BINARY_TBL, 3, nv, fj, c3, 3) == 0, "writing tnull.fits");
            {
                fitsfile *f;
                int status = 0;
                fits_open_file(&f, cli_path("tnull.fits"), READWRITE, &status);
                fits_movabs_hdu(f, 2, NULL, &status);
                fits_write_key_lng(f, "TNULL2", -999, "null", &status);
                fits_close_file(f, &status);
                CHECK(status == 0, "TNULL2 written: status %d", status);
            }
            check_error(pk_catalog_read_spec(&ctx, cli_path("tnull.fits"), &spd, &e, NULL), &ctx,
                        "tnull.fits: row 2, column 'dec': the Dec is null (the column's TNULL value)", "FITS TNULL");
            d3[1] = 0;
            /* a negative NAXIS2, an empty file, a .gz that is not gzip */
            size_t len = 0;
            char *bytes = slurp_file(cli_path("asc.fits"), &len);
            int edited = 0;
            for (size_t at = 2880; bytes && at + 80 <= len && !edited; at += 80)
                if (memcmp(bytes + at, "NAXIS2  =", 9) == 0)
                    memcpy(bytes + at + 10, "                  -5", 20), edited = 1;
            CHECK(edited, "NAXIS2 found in asc.fits");
            FILE *fp = fopen(cli_path("neg.fits"), "wb");
            if (fp && bytes) fwrite(bytes, 1, len, fp);
            if (fp) fclose(fp);
            free(bytes);
            check_error(pk_catalog_read_spec(&ctx, cli_path("neg.fits"), &spd, &e, NULL), &ctx,
                        "neg.fits: HDU 2: NAXIS2 = -5 is negative", "FITS NAXIS2 = -5");
            cli_write("zero.fits", "");
            check_error(pk_catalog_read_spec(&ctx, cli_path("zero.fits"), &spd, &e, NULL), &ctx,
                        "zero.fits: an empty file (0 bytes)", "empty .fits");
            cli_write("notgz.fits.gz", "ra,dec\n1,2\n");
            check_error(pk_catalog_read_spec(&ctx, cli_path("notgz.fits.gz"), &spd, &e, NULL), &ctx,
                        "notgz.fits.gz: named .gz but not gzip data", ".fits.gz of text");
            cli_write("notfits.fits", "ra,dec\n1,2\n");
            check_error(pk_catalog_read_spec(&ctx, cli_path("notfits.fits"), &spd, &e, NULL), &ctx,
                        "notfits.fits: not a FITS file (it does not start with 'SIMPLE')", ".fits of text");
            gz_write(cli_path("empty.fits.gz"), "", 0);
            check_error(pk_catalog_read_spec(&ctx, cli_path("empty.fits.gz"), &spd, &e, NULL), &ctx,
                        "empty.fits.gz: gzip-compressed, but empty inside", "gzip of nothing");
            /* an extension without its primary HDU (cfitsio opens it, and
             * the check of the headers did not walk it) */
            bytes = slurp_file(cli_path("vec0.fits"), &len);
            fp = fopen(cli_path("xt.fits"), "wb");
            if (fp && bytes && len > 2880) fwrite(bytes + 2880, 1, len - 2880, fp);
            if (fp) fclose(fp);
            free(bytes);
            check_error(pk_catalog_read_spec(&ctx, cli_path("xt.fits"), &spd, &e, NULL), &ctx,
                        "xt.fits: not a FITS file (it does not start with 'SIMPLE': an extension without its primary",
                        "FITS file starting with XTENSION");
            /* a plain FITS file named .gz: still read */
            bytes = slurp_file(cli_path("vec0.fits"), &len);
            fp = fopen(cli_path("plain.fits.gz"), "wb");
            if (fp && bytes) fwrite(bytes, 1, len, fp);
            if (fp) fclose(fp);
            free(bytes);
            CHECK_OK(pk_catalog_read_spec(&ctx, cli_path("plain.fits.gz"), &spd, &e, NULL), &ctx);
            if (e.n) pk_catalog_free(&e);
        }
        sp.weight_column = "w";
        check_error(pk_catalog_read_spec(&ctx, cli_path("cat.txt"), &sp, &c, &wb), &ctx,
                    "the native format has no weight column 'w'", "native with weights");
    }

    /* edge files */
    {
        pk_bins b;
        cli_write("edges.txt", "# edges in degrees\n0.01\n0.1 1.0\n\n10 # last\n");
        CHECK_OK(pk_bins_read_edges(&ctx, cli_path("edges.txt"), &b), &ctx);
        CHECK(b.n_bins == 3 && fabs(b.edges[3] - 10 * M_PI / 180) < 1e-15, "edge file: %zu bins", b.n_bins);
        pk_bins_free(&b);
        cli_write("e1.txt", "0.1\n0.05\n");
        check_error(pk_bins_read_edges(&ctx, cli_path("e1.txt"), &b), &ctx,
                    "e1.txt:2: edge 0.05 degrees does not increase", "decreasing edges");
        cli_write("e2.txt", "0.1\nten\n");
        check_error(pk_bins_read_edges(&ctx, cli_path("e2.txt"), &b), &ctx, "e2.txt:2: 'ten' is not an edge",
                    "text edge");
        cli_write("e3.txt", "0.1\n");
        check_error(pk_bins_read_edges(&ctx, cli_path("e3.txt"), &b), &ctx, "needs at least 2 edges", "one edge");
        cli_write("e4.txt", "-1 2\n");
        check_error(pk_bins_read_edges(&ctx, cli_path("e4.txt"), &b), &ctx, "e4.txt:1: edge -1 is not an angle",
                    "negative edge");
    }

    /* FITS columns in the units their TUNITn names (any case), RA and Dec
     * each by its own; an empty one left to the units asked for; units
     * that are not of angle refused, and so are TUNITs that contradict
     * units the caller gave */
    {
        size_t m = 50;
        double *ra_u = malloc(m * sizeof(double)), *dec_u = malloc(m * sizeof(double));
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
        const char *unames[2] = {"RA", "DEC"};
        double *ucols[2] = {ra_u, dec_u};
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            for (size_t i = 0; i < m; i++) ra_u[i] = ra[i] * cases[k].ra_scale, dec_u[i] = dec[i] * cases[k].dec_scale;
            const char *path = cli_path("units.fits");
            CHECK(write_fits(path, 2, unames, ucols, (long)m) == 0 && set_tunit(path, 1, cases[k].ra_unit) == 0 &&
                      set_tunit(path, 2, cases[k].dec_unit) == 0,
                  "writing units.fits");
            pk_catalog_spec su = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
            pk_catalog c;
            pk_status st_u = pk_catalog_read_spec(&ctx, path, &su, &c, NULL);
            CHECK_OK(st_u, &ctx);
            int same = st_u == PK_OK && c.n == m;
            for (size_t i = 0; i < m && same; i++)
                same = c.ra[i] == pk_units_to_rad(ra_u[i], cases[k].ra_units) &&
                       c.dec[i] == pk_units_to_rad(dec_u[i], cases[k].dec_units) &&
                       fabs(c.ra[i] - ra[i] * M_PI / 180) < 1e-12 && fabs(c.dec[i] - dec[i] * M_PI / 180) < 1e-12;
            CHECK(same, "TUNIT '%s', '%s': positions not read in those units", cases[k].ra_unit, cases[k].dec_unit);
            pk_catalog_free(&c);
            /* units given that agree with TUNIT (or with no TUNIT) are taken */
            pk_catalog_spec agree = {PK_FORMAT_AUTO, cases[k].dec_units, NULL, NULL, NULL, 1};
            if (cases[k].ra_units == cases[k].dec_units) {
                CHECK_OK(pk_catalog_read_spec(&ctx, path, &agree, &c, NULL), &ctx);
                pk_catalog_free(&c);
            }
        }
        const char *path = cli_path("units.fits");
        for (size_t i = 0; i < m; i++) ra_u[i] = ra[i] * (M_PI / 180), dec_u[i] = dec[i] * (M_PI / 180);
        CHECK(write_fits(path, 2, unames, ucols, (long)m) == 0 && set_tunit(path, 1, "rad") == 0 &&
                  set_tunit(path, 2, "rad") == 0,
              "writing units.fits");
        pk_catalog c;
        pk_catalog_spec given = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 1};
        pk_status st_given = pk_catalog_read_spec(&ctx, path, &given, &c, NULL);
        check_error(st_given, &ctx,
                    "units.fits: the RA column 'RA' is in rad (TUNIT1 = 'rad'), not in deg as --units says",
                    "TUNIT rad with deg given");
        CHECK(st_given == PK_ERR_PARSE, "TUNIT against --units: status %d", (int)st_given);
        CHECK(set_tunit(path, 2, "hourangle") == 0, "TUNIT2");
        pk_catalog_spec free_units = {PK_FORMAT_AUTO, PK_UNITS_DEG, NULL, NULL, NULL, 0};
        check_error(pk_catalog_read_spec(&ctx, path, &free_units, &c, NULL), &ctx,
                    "units.fits: the Dec column 'DEC' has TUNIT2 = 'hourangle', which is not units of angle pairkit "
                    "reads (deg, degree, degrees, rad, radian, radians, arcmin",
                    "TUNIT hourangle");
        /* a declination out of range names the units it was read in */
        dec_u[3] = 2.0;
        CHECK(write_fits(path, 2, unames, ucols, (long)m) == 0 && set_tunit(path, 2, "rad") == 0, "units.fits");
        check_error(pk_catalog_read_spec(&ctx, path, &free_units, &c, NULL), &ctx,
                    "row 4 (columns 'ra', 'dec'): dec 2 rad is outside [-90, 90] degrees", "dec 2 rad");
        /* the command: a FITS catalog in radians gives the w(theta) of the
         * same positions in degrees; --units against TUNIT is refused */
        FILE *fp = fopen(cli_path("units_deg.csv"), "w");
        fprintf(fp, "ra,dec\n");
        for (size_t i = 0; i < m; i++) fprintf(fp, "%.17g,%.17g\n", ra[i], dec[i]);
        fclose(fp);
        dec_u[3] = dec[3] * (M_PI / 180);
        CHECK(write_fits(path, 2, unames, ucols, (long)m) == 0 && set_tunit(path, 1, "rad") == 0 &&
                  set_tunit(path, 2, "RAD") == 0,
              "units.fits");
        int rc_rad = cli_run("angcorr units.fits units.fits --nbins 18 --bin-width 10 -o u_rad.out --png none -q");
        int rc_deg =
            cli_run("angcorr units_deg.csv units_deg.csv --nbins 18 --bin-width 10 -o u_deg.out --png none -q");
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
        free(ra_u), free(dec_u);
    }

    /* the command: CSV with weights, jackknife, mean separations, edges */
    {
        FILE *d = fopen(cli_path("d.csv"), "w"), *r = fopen(cli_path("r.csv"), "w");
        fprintf(d, "ra,dec,w\n");
        fprintf(r, "ra,dec,w\n");
        for (int i = 0; i < 400; i++)
            fprintf(d, "%.9f,%.9f,%.6f\n", 20 * check_uniform(&rng), 20 * check_uniform(&rng),
                    0.5 + check_uniform(&rng));
        for (int i = 0; i < 600; i++)
            fprintf(r, "%.9f,%.9f,%.6f\n", 20 * check_uniform(&rng), 20 * check_uniform(&rng),
                    0.5 + check_uniform(&rng));
        fclose(d);
        fclose(r);
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
        /* RR per patch pair kept with --save-rr and taken again with --rr
         * for another data catalog: outputs byte for byte those of a run
         * that counts RR; a file of other patches, weights or settings, and
         * a changed one, refused with nothing written */
        {
            FILE *d2 = fopen(cli_path("d2.csv"), "w");
            fprintf(d2, "ra,dec,w\n");
            for (int i = 0; i < 300; i++)
                fprintf(d2, "%.9f,%.9f,%.6f\n", 20 * check_uniform(&rng), 20 * check_uniform(&rng),
                        0.5 + check_uniform(&rng));
            fclose(d2);
            const char *opt =
                "--weight-col w --theta-min 0.1 --log 10 --nbins 8 --jackknife 4 --mean-theta --png none -q";
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
            CHECK(identical, "--rr with weights, jackknife, mean-theta: outputs differ (exit %d, %d, %d)", rk0, rk1,
                  rk2);
            char *kept = cli_read(cli_path("cells_rr.txt"));
            CHECK(kept && strncmp(kept, "pairkit-rr 2\nrandom 600 ", 24) == 0 && strstr(kept, "\npatches 4 ") &&
                      strstr(kept, "\nmean-theta 1\nbins 8\n"),
                  "the kept RR cells: %.200s", kept ? kept : "(none)");
            if (kept) { /* a weighted sum changed in its last digit; the file cut after the header and edges */
                char *cell = strstr(kept, "\n0 0 3 ");
                char *w_end = cell ? strchr(cell + 8, ' ') : NULL;
                w_end = w_end ? strchr(w_end + 1, ' ') : NULL; /* after the weighted sum */
                if (w_end) {
                    FILE *fp = fopen(cli_path("edited_cells.txt"), "w");
                    char last = w_end[-1] == '1' ? '2' : '1';
                    fprintf(fp, "%.*s%c%s", (int)(w_end - 1 - kept), kept, last, w_end);
                    fclose(fp);
                }
                char *first_cell = strstr(kept, "\n0 0 0 ");
                if (first_cell) {
                    FILE *fp = fopen(cli_path("cut_cells.txt"), "w");
                    fprintf(fp, "%.*s", (int)(first_cell + 1 - kept), kept);
                    fclose(fp);
                }
            }
            free(kept);
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
                snprintf(cmd, sizeof cmd, "angcorr d2.csv r.csv %s -o x.out --png none -q", wrong[b].args);
                int rc_b = cli_run(cmd);
                char *e = cli_stderr();
                CHECK(rc_b == 1 && e && strstr(e, wrong[b].says) && cli_count_files("x.out") == 0 &&
                          cli_count_files("x.csv") == 0,
                      "%s: exit %d, %s", wrong[b].args, rc_b, e ? e : "");
                free(e);
            }
        }
        /* column names for one catalog: the same counts as the shared names */
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
        /* a catalog's own names win over the shared ones, given before or after */
        int rc3 = cli_run(
            "angcorr dj.csv r.csv --data-ra-col RA_J2000 --data-dec-col DEC_J2000 --ra-col ra --dec-col "
            "dec --nbins 40 -o p4.out --png none -q");
        char *p1 = cli_read(cli_path("p1.out")), *p2 = cli_read(cli_path("p2.out")), *p4 = cli_read(cli_path("p4.out"));
        CHECK(rc1 == 0 && rc2 == 0 && rc3 == 0 && p1 && p2 && p4 && strcmp(p1, p2) == 0 && strcmp(p4, p2) == 0,
              "per-catalog columns: exit %d, %d, %d", rc1, rc2, rc3);
        free(p1), free(p2), free(p4);
        /* bins narrower than omega.out's 0.001 degree: a note, not silence */
        rc = cli_run("angcorr d.csv r.csv --theta-min 0.0005 --log 0.01 --nbins 10 -o lg.out --png none -q");
        char *note = cli_stderr();
        CHECK(rc == 0 && note && strstr(note, "does not tell bins 0 and 1 apart (both 0.001); --csv FILE"),
              "narrow bins: exit %d, %s", rc, note ? note : "");
        free(note);
        cli_write("n.txt", "2\n60 60\n120 120\n");
        rc = cli_run("angcorr n.txt r.csv --ra-col ra --nbins 40 -o p3.out --png none -q");
        CHECK(rc == 0, "--ra-col with one CSV catalog and one native: exit %d", rc);
        rc = cli_run("angcorr d.csv r.csv --edges ../nonexistent_edges.txt -q --png none");
        CHECK(rc != 0, "a missing edge file accepted");
        cli_write("ed.txt", "0.1 0.5 2 8\n");
        cli_write("negw.csv", "ra,dec,w\n10,20,1\n11,21,-2\n");
        rc = cli_run("angcorr d.csv r.csv --edges ed.txt --csv e.csv -o e.out --png none -q");
        CHECK(rc == 0, "command with an edge file: exit %d", rc);
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
        /* --weight-col beside both catalogs' own weight columns would be ignored: refused */
        rc = cli_run("angcorr d.csv r.csv --weight-col w --data-weight-col w --random-weight-col w -o ww.out -q");
        err = cli_stderr();
        CHECK(rc == 2 && err &&
                  strstr(err,
                         "pairkit angcorr: --weight-col would be ignored: --data-weight-col and "
                         "--random-weight-col name both catalogs' weight columns"),
              "--weight-col with both per-catalog weight columns: exit %d, stderr '%s'", rc, err ? err : "");
        CHECK(cli_count_files("ww.") == 0, "--weight-col ignored: an output written");
        free(err);
        for (size_t k = 0; k < sizeof bad_cli / sizeof bad_cli[0]; k++) {
            rc = cli_run(bad_cli[k].args);
            err = cli_stderr();
            CHECK(rc != 0 && err && strstr(err, bad_cli[k].want), "'%s': exit %d, stderr '%s'", bad_cli[k].args, rc,
                  err ? err : "");
            free(err);
        }
    }
    pk_catalog_free(&c_nat);
    free(ra), free(dec), free(w);
    cli_scratch_remove();
    return check_finish("test_angcorr_formats");
}
