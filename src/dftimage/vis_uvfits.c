/* vis_uvfits.c - visibilities from UVFITS (random groups) through cfitsio.
 *
 * What real files do, and this reader handles (see data/vis/README.md):
 * - group parameters are stored scaled: value = raw * PSCALn + PZEROn, and
 *   cfitsio does not apply that for group parameters, so it is done here
 *   (the VLBA and EHT files store u, v, w with PSCAL near 1e-10);
 * - parameter names vary: UU, UU--, UU---SIN (the same for VV, WW);
 * - the date may be split over two DATE parameters, which add up; so may
 *   u, v, w (a float32 high and low part);
 * - an axis of length 1 may lack its CTYPE;
 * - u, v, w are in seconds: times each channel's frequency (FREQ axis plus
 *   the IF offset and signed channel width of the AIPS FQ table, in the
 *   row of the file's FREQSEL setup; several setups are refused) they give
 *   wavelengths, so every channel and IF is its own visibility;
 * - a SOURCE parameter: one source is imaged at its AIPS SU table
 *   position, several are refused;
 * - Stokes I is the weighted mean of the parallel hands (XX,YY or RR,LL),
 *   either alone when the other is flagged;
 * - weight <= 0 means flagged (AIPS); pk_weights chooses otherwise for files
 *   whose writer stored every weight negative.
 * The data axes are located by CTYPE, so any axis order is read.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fitsio.h>

#include "dftimage_internal.h"
#include "common/fits_open.h"

#define MAX_AXES 8

typedef struct uvfits_axes {
    int naxis;
    long len[MAX_AXES];    /* NAXISn, index n - 1 */
    long stride[MAX_AXES]; /* elements between neighbours along the axis */
    char ctype[MAX_AXES][FLEN_VALUE];
    double crval[MAX_AXES], cdelt[MAX_AXES], crpix[MAX_AXES];
    int complex_ax, stokes_ax, freq_ax, if_ax, ra_ax, dec_ax; /* -1 when absent */
} uvfits_axes;

/* From the status alone: cfitsio's message stack is the whole process's
 * (another thread's messages would mix in); pk_fits_close clears what this
 * read put on it. */
static pk_status fits_error(pk_context *ctx, const char *path, const char *what, int status) {
    char text[FLEN_STATUS];
    fits_get_errstatus(status, text);
    pk_status st = status == FILE_NOT_OPENED ? PK_ERR_IO : PK_ERR_PARSE;
    return pk_fail(ctx, st, "%s: %s: %s", path, what, text);
}

/* "UU", "UU--", "UU---SIN": the name, then nothing or dashes and a projection. */
static int param_is(const char *ptype, const char *base) {
    size_t n = strlen(base);
    if (strncmp(ptype, base, n) != 0) return 0;
    return ptype[n] == '\0' || ptype[n] == '-' || ptype[n] == ' ';
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ') s[--n] = '\0';
}

/* The equinox of the phase centre: EQUINOX, else EPOCH (AIPS writes
 * either), a number (2000.0) or a string ('J2000', 'B1950'); 0 when
 * neither is there as a plausible year. */
static double read_equinox(fitsfile *f) {
    static const char *const keys[] = {"EQUINOX", "EPOCH"};
    for (int k = 0; k < 2; k++) {
        int status = 0;
        char text[FLEN_VALUE] = "";
        if (fits_read_key(f, TSTRING, keys[k], text, NULL, &status)) continue;
        trim(text);
        const char *p = text;
        while (*p == ' ') p++;
        if (*p == 'B' || *p == 'b' || *p == 'J' || *p == 'j') p++;
        char *end;
        double e = strtod(p, &end);
        if (end == p || *end != '\0' || !(e >= 1800.0 && e <= 2200.0)) continue;
        return e;
    }
    return 0.0;
}

/* The reference frame of the phase centre (RADESYS, or the older
 * RADECSYS), upper case; "" when absent or not one FITS names. */
static void read_radesys(fitsfile *f, char *out, size_t size) {
    static const char *const keys[] = {"RADESYS", "RADECSYS"};
    static const char *const known[] = {"ICRS", "FK5", "FK4", "FK4-NO-E", "GAPPT"};
    out[0] = '\0';
    for (int k = 0; k < 2 && !out[0]; k++) {
        int status = 0;
        char text[FLEN_VALUE] = "";
        if (fits_read_key(f, TSTRING, keys[k], text, NULL, &status)) continue;
        trim(text);
        for (char *c = text; *c; c++)
            if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
        for (size_t j = 0; j < sizeof known / sizeof known[0]; j++)
            if (strcmp(text, known[j]) == 0) snprintf(out, size, "%s", text);
    }
}

/* An optional real keyword: *value as it was when the keyword is absent,
 * an error naming the keyword when its value is not a finite number. */
static pk_status read_real_key(pk_context *ctx, const char *path, fitsfile *f, const char *key, double *value) {
    int status = 0;
    char text[FLEN_VALUE] = "";
    if (fits_read_keyword(f, key, text, NULL, &status)) {
        if (status == KEY_NO_EXIST) return PK_OK;
        return fits_error(ctx, path, key, status);
    }
    double v = 0;
    if (fits_read_key(f, TDOUBLE, key, &v, NULL, &status) || !isfinite(v)) {
        trim(text);
        return pk_fail(ctx, PK_ERR_PARSE, "%s: %s = %s is not a finite number", path, key, text);
    }
    *value = v;
    return PK_OK;
}

static pk_status read_axes(pk_context *ctx, const char *path, fitsfile *f, uvfits_axes *ax) {
    int status = 0;
    memset(ax, 0, sizeof *ax);
    ax->complex_ax = ax->stokes_ax = ax->freq_ax = ax->if_ax = ax->ra_ax = ax->dec_ax = -1;
    if (fits_read_key(f, TINT, "NAXIS", &ax->naxis, NULL, &status)) return fits_error(ctx, path, "NAXIS", status);
    if (ax->naxis < 2 || ax->naxis > MAX_AXES)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: NAXIS = %d; a UVFITS file has 2 to %d axes", path, ax->naxis, MAX_AXES);
    long stride = 1;
    for (int k = 1; k < ax->naxis; k++) { /* axis 1 is the empty NAXIS1 = 0 */
        char key[32];
        snprintf(key, sizeof key, "NAXIS%d", k + 1);
        if (fits_read_key(f, TLONG, key, &ax->len[k], NULL, &status)) return fits_error(ctx, path, key, status);
        /* Every data axis holds at least one element; the product stays
         * far below what a long and the file can hold. */
        if (ax->len[k] < 1 || ax->len[k] > (1L << 40) / stride)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: %s = %ld: a data axis needs 1 to %ld elements", path, key,
                           ax->len[k], (1L << 40) / stride);
        ax->stride[k] = stride;
        stride *= ax->len[k];
        snprintf(key, sizeof key, "CTYPE%d", k + 1);
        if (fits_read_key(f, TSTRING, key, ax->ctype[k], NULL, &status)) {
            status = 0;
            ax->ctype[k][0] = '\0';
            if (ax->len[k] != 1)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: axis %d has %ld elements but no CTYPE%d", path, k + 1,
                               ax->len[k], k + 1);
        }
        trim(ax->ctype[k]);
        ax->crval[k] = 0, ax->cdelt[k] = 1, ax->crpix[k] = 1;
        const char *names[3] = {"CRVAL", "CDELT", "CRPIX"};
        double *values[3] = {&ax->crval[k], &ax->cdelt[k], &ax->crpix[k]};
        for (int q = 0; q < 3; q++) {
            snprintf(key, sizeof key, "%s%d", names[q], k + 1);
            pk_status st = read_real_key(ctx, path, f, key, values[q]);
            if (st) return st;
        }
        const char *t = ax->ctype[k];
        int *slot = strcmp(t, "COMPLEX") == 0   ? &ax->complex_ax
                    : strcmp(t, "STOKES") == 0  ? &ax->stokes_ax
                    : strcmp(t, "FREQ") == 0    ? &ax->freq_ax
                    : strcmp(t, "IF") == 0      ? &ax->if_ax
                    : strncmp(t, "RA", 2) == 0  ? &ax->ra_ax
                    : strncmp(t, "DEC", 3) == 0 ? &ax->dec_ax
                                                : NULL;
        /* an axis not read would be summed over or dropped without a word */
        if (!slot && ax->len[k] > 1)
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: axis %d (CTYPE%d = '%s') has %ld elements; the data axes read are COMPLEX, STOKES, "
                           "FREQ, IF, RA and DEC",
                           path, k + 1, k + 1, t, ax->len[k]);
        if (slot && *slot >= 0)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: two %s axes (%d and %d)", path, t, *slot + 1, k + 1);
        if (slot) *slot = k;
    }
    /* the phase centre, copied into the image's WCS */
    if (ax->ra_ax >= 0 && fabs(ax->crval[ax->ra_ax]) > 360)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: CRVAL%d = %g: the phase centre's right ascension is not an angle in degrees", path,
                       ax->ra_ax + 1, ax->crval[ax->ra_ax]);
    if (ax->dec_ax >= 0 && fabs(ax->crval[ax->dec_ax]) > 90)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: CRVAL%d = %g: the phase centre's declination is outside -90 .. 90 degrees", path,
                       ax->dec_ax + 1, ax->crval[ax->dec_ax]);
    if (ax->complex_ax < 0) return pk_fail(ctx, PK_ERR_PARSE, "%s: no COMPLEX axis (CTYPEn = 'COMPLEX')", path);
    if (ax->len[ax->complex_ax] < 2 || ax->len[ax->complex_ax] > 3)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: the COMPLEX axis has %ld elements; expected 3 (re, im, weight) or 2",
                       path, ax->len[ax->complex_ax]);
    if (ax->freq_ax < 0) return pk_fail(ctx, PK_ERR_PARSE, "%s: no FREQ axis: the frequency is unknown", path);
    return PK_OK;
}

/* One column of row `row` of the AIPS FQ table into values[n_if]; a column
 * absent and not required leaves values as they are. */
static pk_status read_fq_column(pk_context *ctx, const char *path, fitsfile *f, const char *name, int required,
                                long row, long n_if, double *values) {
    int status = 0, col;
    char what[64];
    snprintf(what, sizeof what, "AIPS FQ table: column '%s'", name);
    if (fits_get_colnum(f, CASEINSEN, (char *)name, &col, &status))
        return required ? fits_error(ctx, path, what, status) : PK_OK;
    int typecode;
    long repeat, width;
    fits_get_coltype(f, col, &typecode, &repeat, &width, &status);
    if (!status && repeat < n_if)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: AIPS FQ table: '%s' holds %ld values for %ld IFs", path, name, repeat,
                       n_if);
    if (!status) fits_read_col(f, TDOUBLE, col, row, 1, n_if, NULL, values, NULL, &status);
    if (status) return fits_error(ctx, path, what, status);
    for (long i = 0; i < n_if; i++)
        if (!isfinite(values[i]))
            return pk_fail(ctx, PK_ERR_PARSE, "%s: AIPS FQ table: '%s' of IF %ld is not a finite number", path, name,
                           i + 1);
    return PK_OK;
}

/* The row of the AIPS FQ table that describes frequency setup `fq_id`
 * (the FREQSEL group parameter's value; 1 without one, as in AIPS): the
 * row whose FRQSEL is fq_id, or without that column row fq_id itself.
 * Without a FREQSEL parameter (given 0) a table of one row is that row,
 * whatever its FRQSEL says: the file has one setup. */
static pk_status find_fq_row(pk_context *ctx, const char *path, fitsfile *f, double fq_id, int given, long *row) {
    int status = 0, col;
    long rows = 0;
    if (fits_get_num_rows(f, &rows, &status)) return fits_error(ctx, path, "AIPS FQ table", status);
    if (!given && rows == 1) {
        *row = 1;
        return PK_OK;
    }
    if (fits_get_colnum(f, CASEINSEN, "FRQSEL", &col, &status)) {
        status = 0;
        if (fq_id >= 1 && fq_id <= (double)rows && fq_id == floor(fq_id)) {
            *row = (long)fq_id;
            return PK_OK;
        }
        return pk_fail(ctx, PK_ERR_PARSE, "%s: AIPS FQ table: no 'FRQSEL' column and no row %g of %ld", path, fq_id,
                       rows);
    }
    for (long r = 1; r <= rows; r++) {
        double id = 0;
        if (fits_read_col(f, TDOUBLE, col, r, 1, 1, NULL, &id, NULL, &status))
            return fits_error(ctx, path, "AIPS FQ table: column 'FRQSEL'", status);
        if (id == fq_id) {
            *row = r;
            return PK_OK;
        }
    }
    return pk_fail(ctx, PK_ERR_PARSE, "%s: AIPS FQ table: none of its %ld rows has FRQSEL = %g (frequency setup %g)",
                   path, rows, fq_id, fq_id);
}

/* From the AIPS FQ table, the row of setup fq_id: each IF's frequency
 * offset (Hz) and its channel width (Hz, signed: negative for a
 * lower-sideband IF, whose frequency falls with the channel number), as
 * AIPS, CASA and pyuvdata read them. Without a table (one IF) the offset
 * is 0; without the 'CH WIDTH' column every IF takes the FREQ axis's CDELT. */
static pk_status read_fq_table(pk_context *ctx, const char *path, fitsfile *f, double fq_id, int given, long n_if,
                               long n_chan, double cdelt, double *offsets, double *widths) {
    int status = 0;
    for (long i = 0; i < n_if; i++) offsets[i] = 0.0, widths[i] = cdelt;
    if (fits_movnam_hdu(f, BINARY_TBL, "AIPS FQ", 0, &status)) {
        status = 0;
        if (n_if > 1)
            return pk_fail(ctx, PK_ERR_PARSE, "%s: %ld IFs but no AIPS FQ table with their frequency offsets", path,
                           n_if);
        return PK_OK;
    }
    long row = 1;
    pk_status st = find_fq_row(ctx, path, f, fq_id, given, &row);
    if (!st) st = read_fq_column(ctx, path, f, "IF FREQ", 1, row, n_if, offsets);
    if (!st) st = read_fq_column(ctx, path, f, "CH WIDTH", 0, row, n_if, widths);
    for (long i = 0; !st && n_chan > 1 && i < n_if; i++)
        if (widths[i] == 0)
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: AIPS FQ table: 'CH WIDTH' of IF %ld is 0 for %ld channels", path,
                         i + 1, n_chan);
    status = 0;
    fits_movabs_hdu(f, 1, NULL, &status);
    if (!st && status) st = fits_error(ctx, path, "primary HDU", status);
    return st;
}

/* The frequency (Hz) of channel c (from 0) of IF i (from 0): CRVAL of the
 * FREQ axis, the IF's offset, and its channel width from CRPIX on. */
static double channel_freq(const uvfits_axes *ax, const double *if_off, const double *ch_width, long i, long c) {
    return ax->crval[ax->freq_ax] + if_off[i] + ((double)(c + 1) - ax->crpix[ax->freq_ax]) * ch_width[i];
}

/* The phase centre and name of source `id` from the AIPS SU table, which a
 * file with a SOURCE group parameter carries (its header's RA and Dec may
 * be 0 and its OBJECT 'MULTI'): RAEPO, DECEPO (degrees, at the equinox of
 * EPOCH) and SOURCE of the row whose 'ID. NO.' is id. *found 0 when the
 * table or the row is absent. */
static pk_status read_su_source(pk_context *ctx, const char *path, fitsfile *f, double id, pk_vis *out, int *found) {
    int status = 0, c_id, c_name, c_ra, c_dec, c_epoch = 0;
    *found = 0;
    if (fits_movnam_hdu(f, BINARY_TBL, "AIPS SU", 0, &status)) return PK_OK;
    long rows = 0;
    pk_status st = PK_OK;
    if (fits_get_colnum(f, CASEINSEN, "ID. NO.", &c_id, &status) ||
        fits_get_colnum(f, CASEINSEN, "SOURCE", &c_name, &status) ||
        fits_get_colnum(f, CASEINSEN, "RAEPO", &c_ra, &status) ||
        fits_get_colnum(f, CASEINSEN, "DECEPO", &c_dec, &status) || fits_get_num_rows(f, &rows, &status)) {
        st = fits_error(ctx, path, "AIPS SU table (columns 'ID. NO.', 'SOURCE', 'RAEPO', 'DECEPO')", status);
        rows = 0;
    }
    int s_epoch = 0, s_name = 0, name_type = 0;
    if (!st && fits_get_colnum(f, CASEINSEN, "EPOCH", &c_epoch, &s_epoch)) c_epoch = 0;
    /* the name read only from a text column that fits the buffer */
    long name_chars = 0, name_width = 0;
    if (!st && (fits_get_coltype(f, c_name, &name_type, &name_chars, &name_width, &s_name) || name_type != TSTRING ||
                name_chars >= FLEN_VALUE))
        c_name = 0;
    for (long r = 1; !st && r <= rows; r++) {
        double row_id = 0, ra = 0, dec = 0, epoch = 0;
        char name[FLEN_VALUE] = "", *names[1] = {name};
        if (fits_read_col(f, TDOUBLE, c_id, r, 1, 1, NULL, &row_id, NULL, &status) || row_id != id) {
            if (status) st = fits_error(ctx, path, "AIPS SU table: 'ID. NO.'", status);
            continue;
        }
        if (fits_read_col(f, TDOUBLE, c_ra, r, 1, 1, NULL, &ra, NULL, &status) ||
            fits_read_col(f, TDOUBLE, c_dec, r, 1, 1, NULL, &dec, NULL, &status) ||
            (c_name && fits_read_col(f, TSTRING, c_name, r, 1, 1, NULL, names, NULL, &status)) ||
            (c_epoch && fits_read_col(f, TDOUBLE, c_epoch, r, 1, 1, NULL, &epoch, NULL, &status))) {
            st = fits_error(ctx, path, "AIPS SU table", status);
            break;
        }
        if (!isfinite(ra) || !isfinite(dec) || fabs(ra) > 360 || fabs(dec) > 90) {
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s: AIPS SU table, row %ld (source %g): RAEPO = %g, DECEPO = %g is not a "
                         "position in degrees",
                         path, r, id, ra, dec);
            break;
        }
        trim(name);
        out->has_phase_centre = 1;
        out->ra0_deg = ra;
        out->dec0_deg = dec;
        if (epoch >= 1800.0 && epoch <= 2200.0) out->equinox = epoch;
        if (name[0]) snprintf(out->object, sizeof out->object, "%s", name);
        *found = 1;
        break;
    }
    status = 0;
    fits_movabs_hdu(f, 1, NULL, &status);
    if (!st && status) st = fits_error(ctx, path, "primary HDU", status);
    return st;
}

/* The error of a group parameter that must hold group 1's value in every
 * group (SOURCE, FREQSEL), at the first group g that differs; why: what
 * such a file is and what to do. */
static pk_status not_throughout(pk_context *ctx, const char *path, long g, const char *name, double value, double first,
                                const char *why) {
    return pk_fail(ctx, PK_ERR_PARSE, "%s: group %ld: %s = %g where group 1 has %g: %s", path, g, name, value, first,
                   why);
}

/* Julian date to "YYYY-MM-DDThh:mm:ss" (Fliegel and Van Flandern). */
static void jd_to_iso(double jd, char *out, size_t size) {
    double jd_noon = floor(jd + 0.5);
    double day_frac = jd + 0.5 - jd_noon;
    long l = (long)jd_noon + 68569;
    long n = 4 * l / 146097;
    l = l - (146097 * n + 3) / 4;
    long i = 4000 * (l + 1) / 1461001;
    l = l - 1461 * i / 4 + 31;
    long j = 80 * l / 2447;
    long day = l - 2447 * j / 80;
    l = j / 11;
    long month = j + 2 - 12 * l;
    long year = 100 * (n - 49) + i + l;
    long secs = (long)floor(day_frac * 86400.0 + 0.5);
    if (secs >= 86400) secs = 86399;
    char text[128];
    snprintf(text, sizeof text, "%04ld-%02ld-%02ldT%02ld:%02ld:%02ld", year, month, day, secs / 3600, secs / 60 % 60,
             secs % 60);
    snprintf(out, size, "%.*s", (int)(size - 1), text);
}

typedef struct hand {
    long index; /* along the STOKES axis */
} hand;

pk_status pk_vis_read_uvfits(pk_context *ctx, const char *path, pk_weights weights, pk_vis *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_uvfits: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_uvfits: path is NULL");
    fitsfile *f = NULL;
    int status = 0;
    long long file_size = -1;
    void *mem = NULL;
    pk_status hst = pk_fits_open(ctx, path, &f, &file_size, &mem);
    if (hst) return hst;
    pk_status st = PK_OK;
    double *params = NULL, *pscal = NULL, *pzero = NULL, *if_off = NULL;
    double *data = NULL; /* as double: a BITPIX -64 file keeps its precision */
    int groups = 0;
    long pcount = 0, gcount = 0;
    uvfits_axes ax;
    char key[32];

    if (fits_read_key(f, TLOGICAL, "GROUPS", &groups, NULL, &status) || !groups) {
        status = 0;
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: not a random-groups UVFITS file (GROUPS = T is missing)", path);
        goto done;
    }
    if (fits_read_key(f, TLONG, "PCOUNT", &pcount, NULL, &status) ||
        fits_read_key(f, TLONG, "GCOUNT", &gcount, NULL, &status)) {
        st = fits_error(ctx, path, "PCOUNT/GCOUNT", status);
        goto done;
    }
    if (pcount < 3 || gcount < 1) {
        st = pk_fail(ctx, PK_ERR_PARSE, "%s: PCOUNT = %ld, GCOUNT = %ld: no u, v, w parameters or no groups", path,
                     pcount, gcount);
        goto done;
    }
    if ((st = read_axes(ctx, path, f, &ax)) != PK_OK) goto done;
    {
        /* A cut file: cfitsio would only fail at the first missing group. */
        LONGLONG head_start, data_start, data_end;
        if (fits_get_hduaddrll(f, &head_start, &data_start, &data_end, &status)) {
            st = fits_error(ctx, path, "primary HDU", status);
            goto done;
        }
        if (file_size >= 0 && file_size < (long long)data_end) {
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s: truncated: the header announces %lld bytes of groups, the file holds %lld", path,
                         (long long)(data_end - data_start), file_size - (long long)data_start);
            goto done;
        }
    }

    /* Group parameters: names, scales, zeros. */
    /* u, v, w: each the sum of the parameters of one name, as for DATE
     * (a writer may store a float32 value as a high and a low part) */
    static const char *const uvw_names[3] = {"UU", "VV", "WW"};
    int iuvw[3][4], n_uvw[3] = {0, 0, 0}, n_date = 0, idate[4], isource = -1, ifreqsel = -1;
    char uvw_ptype[3][FLEN_VALUE] = {"", "", ""};
    params = malloc((size_t)pcount * sizeof(double));
    pscal = malloc((size_t)pcount * sizeof(double));
    pzero = malloc((size_t)pcount * sizeof(double));
    if (!params || !pscal || !pzero) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (long p = 0; p < pcount; p++) {
        char ptype[FLEN_VALUE] = "";
        snprintf(key, sizeof key, "PTYPE%ld", p + 1);
        if (fits_read_key(f, TSTRING, key, ptype, NULL, &status)) {
            st = fits_error(ctx, path, key, status);
            goto done;
        }
        trim(ptype);
        pscal[p] = 1.0;
        pzero[p] = 0.0;
        snprintf(key, sizeof key, "PSCAL%ld", p + 1);
        if ((st = read_real_key(ctx, path, f, key, &pscal[p])) != PK_OK) goto done;
        snprintf(key, sizeof key, "PZERO%ld", p + 1);
        if ((st = read_real_key(ctx, path, f, key, &pzero[p])) != PK_OK) goto done;
        if (strncmp(ptype, "UU-L", 4) == 0 || strncmp(ptype, "VV-L", 4) == 0 || strncmp(ptype, "WW-L", 4) == 0) {
            /* AIPS's internal form, in wavelengths at the reference
             * frequency: read as seconds it would scale every baseline
             * by that frequency, a wrong image with no error */
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s: PTYPE%ld = '%s': u, v, w in wavelengths (AIPS's internal 'UU-L' form); UVFITS gives "
                         "them in seconds ('UU', 'UU---SIN'), which is what pairkit reads",
                         path, p + 1, ptype);
            goto done;
        }
        int q = param_is(ptype, "UU") ? 0 : param_is(ptype, "VV") ? 1 : param_is(ptype, "WW") ? 2 : -1;
        if (q >= 0) {
            if (n_uvw[q] > 0 && strcmp(ptype, uvw_ptype[q]) != 0) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: PTYPE%ld = '%s' after PTYPE%d = '%s': two kinds of %s parameter",
                             path, p + 1, ptype, iuvw[q][0] + 1, uvw_ptype[q], uvw_names[q]);
                goto done;
            }
            if (n_uvw[q] == 4) {
                st = pk_fail(ctx, PK_ERR_PARSE, "%s: PTYPE%ld: more than four '%s' parameters", path, p + 1, ptype);
                goto done;
            }
            snprintf(uvw_ptype[q], sizeof uvw_ptype[q], "%s", ptype);
            iuvw[q][n_uvw[q]++] = (int)p;
            if (n_uvw[q] > 1) continue; /* a second part may hold one value throughout */
        } else if (strcmp(ptype, "DATE") == 0 && n_date < 4) {
            idate[n_date++] = (int)p;
        } else {
            if (strcmp(ptype, "SOURCE") == 0 && isource < 0) isource = (int)p;
            if (strcmp(ptype, "FREQSEL") == 0 && ifreqsel < 0) ifreqsel = (int)p;
            continue;
        }
        if (pscal[p] == 0) { /* every value of a parameter read would be PZEROn (every u zero, say) */
            st = pk_fail(ctx, PK_ERR_PARSE,
                         "%s: PSCAL%ld = 0: group parameter %ld ('%s') would hold one value "
                         "throughout",
                         path, p + 1, p + 1, ptype);
            goto done;
        }
    }
    if (!n_uvw[0] || !n_uvw[1] || !n_uvw[2]) {
        const char *name = uvw_names[!n_uvw[0] ? 0 : !n_uvw[1] ? 1 : 2];
        st = pk_fail(ctx, PK_ERR_PARSE,
                     "%s: group parameter %s is missing (looked for PTYPE '%s', '%s--' or '%s---SIN')", path, name,
                     name, name, name);
        goto done;
    }

    /* Frequencies of every (IF, channel). */
    long n_chan = ax.len[ax.freq_ax], n_if = ax.if_ax >= 0 ? ax.len[ax.if_ax] : 1;
    if_off = malloc(2 * (size_t)n_if * sizeof(double));
    double *ch_width = if_off ? if_off + n_if : NULL;
    if (!if_off) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    /* the frequency setup: group 1's FREQSEL, which every group must share */
    double fq_id = 1;
    if (ifreqsel >= 0) {
        if (fits_read_grppar_dbl(f, 1, 1, pcount, params, &status)) {
            st = fits_error(ctx, path, "group 1 of the file", status);
            goto done;
        }
        fq_id = params[ifreqsel] * pscal[ifreqsel] + pzero[ifreqsel];
    }
    if ((st = read_fq_table(ctx, path, f, fq_id, ifreqsel >= 0, n_if, n_chan, ax.cdelt[ax.freq_ax], if_off,
                            ch_width)) != PK_OK)
        goto done;

    /* Stokes: I alone, or the parallel hands. */
    long n_stokes = ax.stokes_ax >= 0 ? ax.len[ax.stokes_ax] : 1;
    hand hands[2];
    int n_hands = 0;
    if (ax.stokes_ax < 0) {
        hands[n_hands++].index = 0;
    } else {
        long ii = -1, rr = -1, ll = -1, xx = -1, yy = -1;
        for (long s = 0; s < n_stokes; s++) {
            double code = ax.crval[ax.stokes_ax] + ((double)(s + 1) - ax.crpix[ax.stokes_ax]) * ax.cdelt[ax.stokes_ax];
            long c = lround(code);
            if (c == 1) ii = s;
            else if (c == -1) rr = s;
            else if (c == -2) ll = s;
            else if (c == -5) xx = s;
            else if (c == -6) yy = s;
        }
        if (ii >= 0) hands[n_hands++].index = ii;
        else if (rr >= 0 || ll >= 0) {
            if (rr >= 0) hands[n_hands++].index = rr;
            if (ll >= 0) hands[n_hands++].index = ll;
        } else if (xx >= 0 || yy >= 0) {
            if (xx >= 0) hands[n_hands++].index = xx;
            if (yy >= 0) hands[n_hands++].index = yy;
        } else {
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: the STOKES axis holds neither I nor parallel hands (RR, LL, XX, YY)",
                         path);
            goto done;
        }
    }

    long n_elem = 1;
    for (int k = 1; k < ax.naxis; k++) n_elem *= ax.len[k];
    data = malloc((size_t)n_elem * sizeof(double));
    size_t max_vis = (size_t)gcount * (size_t)n_chan * (size_t)n_if;
    if (!data || (st = pk_vis_alloc(ctx, max_vis, out)) != PK_OK) {
        if (!st) st = pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    out->sign = -1;
    size_t n_out = 0;
    double source_id = 0;
    int has_weight = ax.len[ax.complex_ax] == 3;
    long s_cplx = ax.stride[ax.complex_ax];
    long s_stokes = ax.stokes_ax >= 0 ? ax.stride[ax.stokes_ax] : 0;
    long s_freq = ax.stride[ax.freq_ax], s_if = ax.if_ax >= 0 ? ax.stride[ax.if_ax] : 0;
    for (long g = 1; g <= gcount; g++) {
        int anynul = 0;
        /* the caller's progress asked every 1024 groups, so that a long
         * read can be stopped (Python's Ctrl-C) */
        if ((g & 1023) == 0 && ctx && ctx->progress && ctx->progress(ctx->progress_user, (double)g / (double)gcount)) {
            st = pk_fail(ctx, PK_ERR_CANCELLED, "%s: cancelled while reading (group %ld of %ld)", path, g, gcount);
            goto done;
        }
        if (fits_read_grppar_dbl(f, g, 1, pcount, params, &status) ||
            fits_read_img_dbl(f, g, 1, n_elem, 0.0, data, &anynul, &status)) {
            char what[64];
            snprintf(what, sizeof what, "group %ld of %ld (truncated or corrupt file?)", g, gcount);
            st = fits_error(ctx, path, what, status);
            goto done;
        }
        for (long p = 0; p < pcount; p++) params[p] = params[p] * pscal[p] + pzero[p];
        double uvw_s[3] = {0, 0, 0};
        for (int q = 0; q < 3; q++)
            for (int k = 0; k < n_uvw[q]; k++) uvw_s[q] += params[iuvw[q][k]];
        double u_s = uvw_s[0], v_s = uvw_s[1], w_s = uvw_s[2];
        if (isource >= 0 && g == 1) source_id = params[isource];
        /* one phase centre an image: visibilities of several sources
         * summed would make an image of none of them */
        if (isource >= 0 && params[isource] != source_id) {
            st = not_throughout(ctx, path, g, "SOURCE", params[isource], source_id,
                                "a multi-source file, whose visibilities are phased to several centres; image one "
                                "source at a time (split the file by source first: AIPS SPLIT, CASA split, or "
                                "pyuvdata's select)");
            goto done;
        }
        /* the channels of another setup lie at other frequencies */
        if (ifreqsel >= 0 && params[ifreqsel] != fq_id) {
            st = not_throughout(ctx, path, g, "FREQSEL", params[ifreqsel], fq_id,
                                "a file of several frequency setups; image one setup at a time (select it first: "
                                "AIPS UVCOP or SPLIT with FREQID, CASA split with spw, or pyuvdata's select)");
            goto done;
        }
        if (!isfinite(u_s) || !isfinite(v_s) || !isfinite(w_s)) {
            const char *name = !isfinite(u_s) ? "u" : !isfinite(v_s) ? "v" : "w";
            double value = !isfinite(u_s) ? u_s : !isfinite(v_s) ? v_s : w_s;
            st = pk_fail(ctx, PK_ERR_PARSE, "%s: group %ld: %s is not finite (%g)", path, g, name, value);
            goto done;
        }
        if (g == 1 && n_date > 0) {
            double jd = 0;
            for (int d = 0; d < n_date; d++) jd += params[idate[d]];
            if (jd > 1e6 && jd < 1e8) jd_to_iso(jd, out->date_obs, sizeof out->date_obs); /* years -1975 to 269000 */
        }
        for (long i = 0; i < n_if; i++) {
            for (long c = 0; c < n_chan; c++) {
                double freq = channel_freq(&ax, if_off, ch_width, i, c);
                double sum_re = 0, sum_im = 0, sum_w = 0;
                int n_valid = 0;
                for (int h = 0; h < n_hands; h++) {
                    long base = i * s_if + c * s_freq + hands[h].index * s_stokes;
                    double re = data[base], im = data[base + s_cplx];
                    double wt = has_weight ? data[base + 2 * s_cplx] : 1.0;
                    double use;
                    if (!isfinite(wt)) {
                        st = pk_fail(ctx, PK_ERR_PARSE,
                                     "%s: group %ld, IF %ld, channel %ld, Stokes index %ld: weight is not finite (%g)",
                                     path, g, i + 1, c + 1, hands[h].index + 1, wt);
                        goto done;
                    }
                    if (weights == PK_WEIGHTS_DATA) {
                        if (!(wt > 0)) continue;
                        use = wt;
                    } else {
                        if (wt == 0) continue;
                        use = weights == PK_WEIGHTS_ABS ? fabs(wt) : 1.0;
                    }
                    if (!isfinite(re) || !isfinite(im)) {
                        st = pk_fail(ctx, PK_ERR_PARSE,
                                     "%s: group %ld, IF %ld, channel %ld, Stokes index %ld: unflagged visibility is "
                                     "not finite (NaN or inf)",
                                     path, g, i + 1, c + 1, hands[h].index + 1);
                        goto done;
                    }
                    sum_re += use * re;
                    sum_im += use * im;
                    sum_w += use;
                    n_valid++;
                }
                if (n_valid == 0) {
                    out->n_flagged++;
                    continue;
                }
                if (!(freq > 0)) {
                    st = pk_fail(ctx, PK_ERR_PARSE, "%s: IF %ld channel %ld has frequency %g Hz", path, i + 1, c + 1,
                                 freq);
                    goto done;
                }
                out->u[n_out] = u_s * freq;
                out->v[n_out] = v_s * freq;
                out->w[n_out] = w_s * freq;
                if (!isfinite(freq) || !isfinite(out->u[n_out]) || !isfinite(out->v[n_out]) ||
                    !isfinite(out->w[n_out]) || !isfinite(sum_re) || !isfinite(sum_im) || !isfinite(sum_w)) {
                    st = pk_fail(ctx, PK_ERR_PARSE,
                                 "%s: group %ld, IF %ld, channel %ld: u, v, w in wavelengths (frequency %g Hz) or the "
                                 "weighted visibility overflow",
                                 path, g, i + 1, c + 1, freq);
                    goto done;
                }
                if (weights == PK_WEIGHTS_UNIT) {
                    /* Unit weight for the Stokes I visibility: the mean of the hands. */
                    out->re[n_out] = sum_re / sum_w;
                    out->im[n_out] = sum_im / sum_w;
                    out->weight[n_out] = 1.0;
                    out->weight_sum += 1.0;
                } else {
                    /* Weight sum_w times the weighted mean sum / sum_w. */
                    out->re[n_out] = sum_re;
                    out->im[n_out] = sum_im;
                    out->weight[n_out] = sum_w;
                    out->weight_sum += sum_w;
                }
                n_out++;
            }
        }
    }
    out->n_records = max_vis;
    out->n = n_out;
    { /* the mean frequency of the channels, the band's centre */
        double sum = 0;
        for (long i = 0; i < n_if; i++)
            for (long c = 0; c < n_chan; c++) sum += channel_freq(&ax, if_off, ch_width, i, c);
        out->freq_hz = sum / (double)(n_if * n_chan);
    }
    if (ax.ra_ax >= 0 && ax.dec_ax >= 0) {
        out->has_phase_centre = 1;
        out->ra0_deg = ax.crval[ax.ra_ax];
        out->dec0_deg = ax.crval[ax.dec_ax];
    } else {
        double ra, dec;
        int s1 = 0;
        if (!fits_read_key(f, TDOUBLE, "OBSRA", &ra, NULL, &s1) &&
            !fits_read_key(f, TDOUBLE, "OBSDEC", &dec, NULL, &s1)) {
            out->has_phase_centre = 1;
            out->ra0_deg = ra;
            out->dec0_deg = dec;
        }
    }
    if (out->has_phase_centre) {
        out->equinox = read_equinox(f);
        read_radesys(f, out->radesys, sizeof out->radesys);
    }
    {
        int s1 = 0;
        char object[FLEN_VALUE] = "";
        if (!fits_read_key(f, TSTRING, "OBJECT", object, NULL, &s1)) {
            trim(object);
            snprintf(out->object, sizeof out->object, "%s", object);
        }
        char bunit[FLEN_VALUE] = "";
        s1 = 0;
        if (!fits_read_key(f, TSTRING, "BUNIT", bunit, NULL, &s1)) {
            trim(bunit);
            snprintf(out->bunit, sizeof out->bunit, "%s", bunit);
        }
        char date[FLEN_VALUE] = "";
        s1 = 0;
        if (!out->date_obs[0] && !fits_read_key(f, TSTRING, "DATE-OBS", date, NULL, &s1)) {
            /* no DATE parameter: the header's date of the observation, in
             * FITS's form YYYY-MM-DD[Thh:mm:ss[.s]] (not the old dd/mm/yy) */
            trim(date);
            int ok = strlen(date) >= 10 && date[4] == '-' && date[7] == '-';
            for (int k = 0; ok && k < 10; k++) ok = k == 4 || k == 7 || (date[k] >= '0' && date[k] <= '9');
            if (ok) snprintf(out->date_obs, sizeof out->date_obs, "%.*s", (int)sizeof out->date_obs - 1, date);
        }
    }
    if (isource >= 0) {
        int found = 0;
        if ((st = read_su_source(ctx, path, f, source_id, out, &found)) != PK_OK) goto done;
        if (found && !out->radesys[0]) read_radesys(f, out->radesys, sizeof out->radesys);
        if (found && out->equinox == 0) out->equinox = read_equinox(f); /* the SU table gave none */
    }
    if (n_out == 0) {
        st = pk_fail(
            ctx, PK_ERR_PARSE, "%s: every one of the %zu visibilities is flagged (weight <= 0 with --weights %s)%s",
            path, max_vis, pk_weights_name(weights),
            weights == PK_WEIGHTS_DATA ? "; if the writer stored all weights negative, try --weights abs or unit" : "");
    }
done:
    if (st) pk_vis_free(out);
    free(params);
    free(pscal);
    free(pzero);
    free(if_off);
    free(data);
    pk_fits_close(f, mem);
    return st;
}
