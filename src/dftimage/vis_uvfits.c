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

/* The file open for reading, its group counts and data axes: what every
 * step of the read needs. */
typedef struct uvfits_file {
    pk_context *ctx;
    const char *path;
    fitsfile *f;
    long pcount, gcount; /* parameters of a group, groups */
    uvfits_axes ax;
} uvfits_file;

/* The group parameters: each one's scale and zero (value = raw * PSCALn +
 * PZEROn), and where u, v, w, the date, SOURCE and FREQSEL are among them
 * (indices from 0). u, v, w are each the sum of up to four parameters of
 * one name, as is the date. value holds one group's values, scaled. */
typedef struct group_params {
    double *value, *pscal, *pzero; /* [pcount] */
    int uvw_param[3][4], n_uvw[3];
    int date_param[4], n_date;
    int source_param, freqsel_param; /* -1 when absent */
} group_params;

/* Every channel's frequency: the FREQ axis, with each IF's offset and
 * signed channel width from the AIPS FQ table row of the file's setup. */
typedef struct channel_freqs {
    long n_if, n_chan;
    double *if_offset, *ch_width; /* [n_if] each, one allocation */
    double setup_id;              /* group 1's FREQSEL, which every group must share; 1 without one */
} channel_freqs;

/* The polarisations that make Stokes I: I itself, or the parallel hands
 * present (RR and LL, or XX and YY); each an index along the STOKES axis. */
typedef struct stokes_hands {
    int n;
    long index[2];
} stokes_hands;

/* The frequency (Hz) of channel c (from 0) of IF i (from 0): CRVAL of the
 * FREQ axis, the IF's offset, and its channel width from CRPIX on. */
static double channel_freq(const uvfits_axes *ax, const channel_freqs *freqs, long i, long c) {
    return ax->crval[ax->freq_ax] + freqs->if_offset[i] +
           ((double)(c + 1) - ax->crpix[ax->freq_ax]) * freqs->ch_width[i];
}

/* The mean frequency of the channels, the band's centre. */
static double band_centre(const uvfits_axes *ax, const channel_freqs *freqs) {
    double sum = 0;
    for (long i = 0; i < freqs->n_if; i++)
        for (long c = 0; c < freqs->n_chan; c++) sum += channel_freq(ax, freqs, i, c);
    return sum / (double)(freqs->n_if * freqs->n_chan);
}

/* GROUPS, PCOUNT, GCOUNT and the data axes; a file shorter than its
 * header announces refused here. */
static pk_status read_group_header(uvfits_file *uf, long long file_size) {
    pk_context *ctx = uf->ctx;
    const char *path = uf->path;
    int status = 0, groups = 0;
    if (fits_read_key(uf->f, TLOGICAL, "GROUPS", &groups, NULL, &status) || !groups)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: not a random-groups UVFITS file (GROUPS = T is missing)", path);
    if (fits_read_key(uf->f, TLONG, "PCOUNT", &uf->pcount, NULL, &status) ||
        fits_read_key(uf->f, TLONG, "GCOUNT", &uf->gcount, NULL, &status))
        return fits_error(ctx, path, "PCOUNT/GCOUNT", status);
    if (uf->pcount < 3 || uf->gcount < 1)
        return pk_fail(ctx, PK_ERR_PARSE, "%s: PCOUNT = %ld, GCOUNT = %ld: no u, v, w parameters or no groups", path,
                       uf->pcount, uf->gcount);
    pk_status st = read_axes(ctx, path, uf->f, &uf->ax);
    if (st) return st;
    /* A cut file: cfitsio would only fail at the first missing group. */
    LONGLONG head_start, data_start, data_end;
    if (fits_get_hduaddrll(uf->f, &head_start, &data_start, &data_end, &status))
        return fits_error(ctx, path, "primary HDU", status);
    if (file_size >= 0 && file_size < (long long)data_end)
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: truncated: the header announces %lld bytes of groups, the file holds %lld", path,
                       (long long)(data_end - data_start), file_size - (long long)data_start);
    return PK_OK;
}

static void group_params_free(group_params *gp) {
    free(gp->value);
    free(gp->pscal);
    free(gp->pzero);
    memset(gp, 0, sizeof *gp);
}

static const char *const uvw_names[3] = {"UU", "VV", "WW"};

/* Group parameters: names, scales, zeros. u, v, w: each the sum of the
 * parameters of one name, as for DATE (a writer may store a float32 value
 * as a high and a low part). */
static pk_status read_group_params(const uvfits_file *uf, group_params *gp) {
    pk_context *ctx = uf->ctx;
    const char *path = uf->path;
    char uvw_ptype[3][FLEN_VALUE] = {"", "", ""};
    gp->source_param = gp->freqsel_param = -1;
    gp->value = malloc((size_t)uf->pcount * sizeof(double));
    gp->pscal = malloc((size_t)uf->pcount * sizeof(double));
    gp->pzero = malloc((size_t)uf->pcount * sizeof(double));
    if (!gp->value || !gp->pscal || !gp->pzero) return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    for (long p = 0; p < uf->pcount; p++) {
        int status = 0;
        char key[32], ptype[FLEN_VALUE] = "";
        snprintf(key, sizeof key, "PTYPE%ld", p + 1);
        if (fits_read_key(uf->f, TSTRING, key, ptype, NULL, &status)) return fits_error(ctx, path, key, status);
        trim(ptype);
        gp->pscal[p] = 1.0;
        gp->pzero[p] = 0.0;
        pk_status st;
        snprintf(key, sizeof key, "PSCAL%ld", p + 1);
        if ((st = read_real_key(ctx, path, uf->f, key, &gp->pscal[p])) != PK_OK) return st;
        snprintf(key, sizeof key, "PZERO%ld", p + 1);
        if ((st = read_real_key(ctx, path, uf->f, key, &gp->pzero[p])) != PK_OK) return st;
        if (strncmp(ptype, "UU-L", 4) == 0 || strncmp(ptype, "VV-L", 4) == 0 || strncmp(ptype, "WW-L", 4) == 0) {
            /* AIPS's internal form, in wavelengths at the reference
             * frequency: read as seconds it would scale every baseline
             * by that frequency, a wrong image with no error */
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: PTYPE%ld = '%s': u, v, w in wavelengths (AIPS's internal 'UU-L' form); UVFITS gives "
                           "them in seconds ('UU', 'UU---SIN'), which is what pairkit reads",
                           path, p + 1, ptype);
        }
        int q = param_is(ptype, "UU") ? 0 : param_is(ptype, "VV") ? 1 : param_is(ptype, "WW") ? 2 : -1;
        if (q >= 0) {
            if (gp->n_uvw[q] > 0 && strcmp(ptype, uvw_ptype[q]) != 0)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: PTYPE%ld = '%s' after PTYPE%d = '%s': two kinds of %s parameter",
                               path, p + 1, ptype, gp->uvw_param[q][0] + 1, uvw_ptype[q], uvw_names[q]);
            if (gp->n_uvw[q] == 4)
                return pk_fail(ctx, PK_ERR_PARSE, "%s: PTYPE%ld: more than four '%s' parameters", path, p + 1, ptype);
            snprintf(uvw_ptype[q], sizeof uvw_ptype[q], "%s", ptype);
            gp->uvw_param[q][gp->n_uvw[q]++] = (int)p;
            if (gp->n_uvw[q] > 1) continue; /* a second part may hold one value throughout */
        } else if (strcmp(ptype, "DATE") == 0 && gp->n_date < 4) {
            gp->date_param[gp->n_date++] = (int)p;
        } else {
            if (strcmp(ptype, "SOURCE") == 0 && gp->source_param < 0) gp->source_param = (int)p;
            if (strcmp(ptype, "FREQSEL") == 0 && gp->freqsel_param < 0) gp->freqsel_param = (int)p;
            continue;
        }
        if (gp->pscal[p] == 0) /* every value of a parameter read would be PZEROn (every u zero, say) */
            return pk_fail(ctx, PK_ERR_PARSE,
                           "%s: PSCAL%ld = 0: group parameter %ld ('%s') would hold one value "
                           "throughout",
                           path, p + 1, p + 1, ptype);
    }
    if (!gp->n_uvw[0] || !gp->n_uvw[1] || !gp->n_uvw[2]) {
        const char *name = uvw_names[!gp->n_uvw[0] ? 0 : !gp->n_uvw[1] ? 1 : 2];
        return pk_fail(ctx, PK_ERR_PARSE,
                       "%s: group parameter %s is missing (looked for PTYPE '%s', '%s--' or '%s---SIN')", path, name,
                       name, name, name);
    }
    return PK_OK;
}

/* value = raw * PSCALn + PZEROn for every parameter of the group in gp->value. */
static void scale_group_params(const uvfits_file *uf, group_params *gp) {
    for (long p = 0; p < uf->pcount; p++) gp->value[p] = gp->value[p] * gp->pscal[p] + gp->pzero[p];
}

/* Frequencies of every (IF, channel): the frequency setup is group 1's
 * FREQSEL, which every group must share. */
static pk_status read_frequencies(const uvfits_file *uf, group_params *gp, channel_freqs *freqs) {
    const uvfits_axes *ax = &uf->ax;
    freqs->n_chan = ax->len[ax->freq_ax];
    freqs->n_if = ax->if_ax >= 0 ? ax->len[ax->if_ax] : 1;
    freqs->if_offset = malloc(2 * (size_t)freqs->n_if * sizeof(double));
    if (!freqs->if_offset) return pk_fail(uf->ctx, PK_ERR_NOMEM, "%s: out of memory", uf->path);
    freqs->ch_width = freqs->if_offset + freqs->n_if;
    freqs->setup_id = 1;
    if (gp->freqsel_param >= 0) {
        int status = 0;
        if (fits_read_grppar_dbl(uf->f, 1, 1, uf->pcount, gp->value, &status))
            return fits_error(uf->ctx, uf->path, "group 1 of the file", status);
        scale_group_params(uf, gp);
        freqs->setup_id = gp->value[gp->freqsel_param];
    }
    return read_fq_table(uf->ctx, uf->path, uf->f, freqs->setup_id, gp->freqsel_param >= 0, freqs->n_if, freqs->n_chan,
                         ax->cdelt[ax->freq_ax], freqs->if_offset, freqs->ch_width);
}

/* Stokes: I alone, or the parallel hands. */
static pk_status choose_hands(const uvfits_file *uf, stokes_hands *hands) {
    const uvfits_axes *ax = &uf->ax;
    hands->n = 0;
    if (ax->stokes_ax < 0) {
        hands->index[hands->n++] = 0;
        return PK_OK;
    }
    long ii = -1, rr = -1, ll = -1, xx = -1, yy = -1;
    for (long s = 0; s < ax->len[ax->stokes_ax]; s++) {
        double code =
            ax->crval[ax->stokes_ax] + ((double)(s + 1) - ax->crpix[ax->stokes_ax]) * ax->cdelt[ax->stokes_ax];
        long c = lround(code);
        if (c == 1) ii = s;
        else if (c == -1) rr = s;
        else if (c == -2) ll = s;
        else if (c == -5) xx = s;
        else if (c == -6) yy = s;
    }
    if (ii >= 0) hands->index[hands->n++] = ii;
    else if (rr >= 0 || ll >= 0) {
        if (rr >= 0) hands->index[hands->n++] = rr;
        if (ll >= 0) hands->index[hands->n++] = ll;
    } else if (xx >= 0 || yy >= 0) {
        if (xx >= 0) hands->index[hands->n++] = xx;
        if (yy >= 0) hands->index[hands->n++] = yy;
    } else {
        return pk_fail(uf->ctx, PK_ERR_PARSE, "%s: the STOKES axis holds neither I nor parallel hands (RR, LL, XX, YY)",
                       uf->path);
    }
    return PK_OK;
}

/* The hands of one channel summed into Stokes I: re and im weighted, the
 * weights' sum, and how many hands were not flagged. */
typedef struct stokes_i_sum {
    double re, im, weight;
    int n_used;
} stokes_i_sum;

/* Stokes I of channel c of IF i of group g: the hands' visibilities summed
 * with the weights the weights mode gives them, the hands it flags left
 * out. data is the group's, base the (IF, channel)'s first element. */
static pk_status sum_hands(const uvfits_file *uf, long g, long i, long c, const double *data, long base,
                           const stokes_hands *hands, pk_weights weights, stokes_i_sum *sum) {
    const uvfits_axes *ax = &uf->ax;
    int has_weight = ax->len[ax->complex_ax] == 3;
    long s_cplx = ax->stride[ax->complex_ax];
    long s_stokes = ax->stokes_ax >= 0 ? ax->stride[ax->stokes_ax] : 0;
    *sum = (stokes_i_sum){0, 0, 0, 0};
    for (int h = 0; h < hands->n; h++) {
        long at = base + hands->index[h] * s_stokes;
        double re = data[at], im = data[at + s_cplx];
        double wt = has_weight ? data[at + 2 * s_cplx] : 1.0;
        double use;
        if (!isfinite(wt))
            return pk_fail(uf->ctx, PK_ERR_PARSE,
                           "%s: group %ld, IF %ld, channel %ld, Stokes index %ld: weight is not finite (%g)", uf->path,
                           g, i + 1, c + 1, hands->index[h] + 1, wt);
        if (weights == PK_WEIGHTS_DATA) {
            if (!(wt > 0)) continue;
            use = wt;
        } else {
            if (wt == 0) continue;
            use = weights == PK_WEIGHTS_ABS ? fabs(wt) : 1.0;
        }
        if (!isfinite(re) || !isfinite(im))
            return pk_fail(uf->ctx, PK_ERR_PARSE,
                           "%s: group %ld, IF %ld, channel %ld, Stokes index %ld: unflagged visibility is "
                           "not finite (NaN or inf)",
                           uf->path, g, i + 1, c + 1, hands->index[h] + 1);
        sum->re += use * re;
        sum->im += use * im;
        sum->weight += use;
        sum->n_used++;
    }
    return PK_OK;
}

/* Group g's visibilities, one per (IF, channel), appended to out at
 * out->n (the count so far); u, v, w (seconds) to wavelengths at the
 * channel's frequency. A channel whose hands are all flagged is counted in
 * out->n_flagged. */
static pk_status add_group_visibilities(const uvfits_file *uf, long g, const double *data, const double uvw_s[3],
                                        const channel_freqs *freqs, const stokes_hands *hands, pk_weights weights,
                                        pk_vis *out) {
    const uvfits_axes *ax = &uf->ax;
    long s_freq = ax->stride[ax->freq_ax], s_if = ax->if_ax >= 0 ? ax->stride[ax->if_ax] : 0;
    for (long i = 0; i < freqs->n_if; i++) {
        for (long c = 0; c < freqs->n_chan; c++) {
            double freq = channel_freq(ax, freqs, i, c);
            stokes_i_sum sum;
            pk_status st = sum_hands(uf, g, i, c, data, i * s_if + c * s_freq, hands, weights, &sum);
            if (st) return st;
            if (sum.n_used == 0) {
                out->n_flagged++;
                continue;
            }
            if (!(freq > 0))
                return pk_fail(uf->ctx, PK_ERR_PARSE, "%s: IF %ld channel %ld has frequency %g Hz", uf->path, i + 1,
                               c + 1, freq);
            size_t k = out->n;
            out->u[k] = uvw_s[0] * freq;
            out->v[k] = uvw_s[1] * freq;
            out->w[k] = uvw_s[2] * freq;
            if (!isfinite(freq) || !isfinite(out->u[k]) || !isfinite(out->v[k]) || !isfinite(out->w[k]) ||
                !isfinite(sum.re) || !isfinite(sum.im) || !isfinite(sum.weight))
                return pk_fail(uf->ctx, PK_ERR_PARSE,
                               "%s: group %ld, IF %ld, channel %ld: u, v, w in wavelengths (frequency %g Hz) or the "
                               "weighted visibility overflow",
                               uf->path, g, i + 1, c + 1, freq);
            if (weights == PK_WEIGHTS_UNIT) {
                /* Unit weight for the Stokes I visibility: the mean of the hands. */
                out->re[k] = sum.re / sum.weight;
                out->im[k] = sum.im / sum.weight;
                out->weight[k] = 1.0;
                out->weight_sum += 1.0;
            } else {
                /* Weight sum.weight times the weighted mean sum / sum.weight. */
                out->re[k] = sum.re;
                out->im[k] = sum.im;
                out->weight[k] = sum.weight;
                out->weight_sum += sum.weight;
            }
            out->n++;
        }
    }
    return PK_OK;
}

/* Group g's scaled parameters checked: SOURCE and FREQSEL as in group 1,
 * u, v, w (uvw_s, seconds) finite. */
static pk_status check_group_params(const uvfits_file *uf, long g, const group_params *gp, const channel_freqs *freqs,
                                    double source_id, const double uvw_s[3]) {
    /* one phase centre an image: visibilities of several sources
     * summed would make an image of none of them */
    if (gp->source_param >= 0 && gp->value[gp->source_param] != source_id)
        return not_throughout(uf->ctx, uf->path, g, "SOURCE", gp->value[gp->source_param], source_id,
                              "a multi-source file, whose visibilities are phased to several centres; image one "
                              "source at a time (split the file by source first: AIPS SPLIT, CASA split, or "
                              "pyuvdata's select)");
    /* the channels of another setup lie at other frequencies */
    if (gp->freqsel_param >= 0 && gp->value[gp->freqsel_param] != freqs->setup_id)
        return not_throughout(uf->ctx, uf->path, g, "FREQSEL", gp->value[gp->freqsel_param], freqs->setup_id,
                              "a file of several frequency setups; image one setup at a time (select it first: "
                              "AIPS UVCOP or SPLIT with FREQID, CASA split with spw, or pyuvdata's select)");
    for (int q = 0; q < 3; q++)
        if (!isfinite(uvw_s[q]))
            return pk_fail(uf->ctx, PK_ERR_PARSE, "%s: group %ld: %s is not finite (%g)", uf->path, g,
                           q == 0   ? "u"
                           : q == 1 ? "v"
                                    : "w",
                           uvw_s[q]);
    return PK_OK;
}

/* Every group: its parameters and data, one visibility per (IF, channel)
 * with any hand unflagged. *source_id: group 1's SOURCE (0 without one);
 * out->date_obs from group 1's DATE parameters. */
static pk_status read_groups(const uvfits_file *uf, group_params *gp, const channel_freqs *freqs,
                             const stokes_hands *hands, pk_weights weights, pk_vis *out, double *source_id) {
    pk_context *ctx = uf->ctx;
    long n_elem = 1;
    for (int k = 1; k < uf->ax.naxis; k++) n_elem *= uf->ax.len[k];
    double *data = malloc((size_t)n_elem * sizeof(double)); /* as double: a BITPIX -64 file keeps its precision */
    size_t max_vis = (size_t)uf->gcount * (size_t)freqs->n_chan * (size_t)freqs->n_if;
    pk_status st = PK_OK;
    if (!data || (st = pk_vis_alloc(ctx, max_vis, out)) != PK_OK) {
        free(data);
        return st ? st : pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", uf->path);
    }
    out->sign = -1;
    out->n = 0; /* the visibilities kept so far */
    *source_id = 0;
    for (long g = 1; g <= uf->gcount && !st; g++) {
        int status = 0, anynul = 0;
        /* the caller's progress asked every 1024 groups, so that a long
         * read can be stopped (Python's Ctrl-C) */
        if ((g & 1023) == 0 && ctx && ctx->progress &&
            ctx->progress(ctx->progress_user, (double)g / (double)uf->gcount)) {
            st = pk_fail(ctx, PK_ERR_CANCELLED, "%s: cancelled while reading (group %ld of %ld)", uf->path, g,
                         uf->gcount);
            break;
        }
        if (fits_read_grppar_dbl(uf->f, g, 1, uf->pcount, gp->value, &status) ||
            fits_read_img_dbl(uf->f, g, 1, n_elem, 0.0, data, &anynul, &status)) {
            char what[64];
            snprintf(what, sizeof what, "group %ld of %ld (truncated or corrupt file?)", g, uf->gcount);
            st = fits_error(ctx, uf->path, what, status);
            break;
        }
        scale_group_params(uf, gp);
        double uvw_s[3] = {0, 0, 0};
        for (int q = 0; q < 3; q++)
            for (int k = 0; k < gp->n_uvw[q]; k++) uvw_s[q] += gp->value[gp->uvw_param[q][k]];
        if (gp->source_param >= 0 && g == 1) *source_id = gp->value[gp->source_param];
        st = check_group_params(uf, g, gp, freqs, *source_id, uvw_s);
        if (!st && g == 1 && gp->n_date > 0) {
            double jd = 0;
            for (int d = 0; d < gp->n_date; d++) jd += gp->value[gp->date_param[d]];
            if (jd > 1e6 && jd < 1e8) jd_to_iso(jd, out->date_obs, sizeof out->date_obs); /* years -1975 to 269000 */
        }
        if (!st) st = add_group_visibilities(uf, g, data, uvw_s, freqs, hands, weights, out);
    }
    out->n_records = max_vis;
    free(data);
    return st;
}

/* A header keyword's text, trailing blanks trimmed, into out (size
 * bytes); out untouched when the keyword is absent. */
static void read_text_key(fitsfile *f, const char *key, char *out, size_t size) {
    int key_status = 0;
    char text[FLEN_VALUE] = "";
    if (fits_read_key(f, TSTRING, key, text, NULL, &key_status)) return;
    trim(text);
    snprintf(out, size, "%s", text);
}

/* The phase centre, from the RA and DEC axes or else OBSRA and OBSDEC,
 * with its equinox and frame. */
static void read_phase_centre(const uvfits_file *uf, pk_vis *out) {
    const uvfits_axes *ax = &uf->ax;
    if (ax->ra_ax >= 0 && ax->dec_ax >= 0) {
        out->has_phase_centre = 1;
        out->ra0_deg = ax->crval[ax->ra_ax];
        out->dec0_deg = ax->crval[ax->dec_ax];
    } else {
        double ra, dec;
        int key_status = 0;
        if (!fits_read_key(uf->f, TDOUBLE, "OBSRA", &ra, NULL, &key_status) &&
            !fits_read_key(uf->f, TDOUBLE, "OBSDEC", &dec, NULL, &key_status)) {
            out->has_phase_centre = 1;
            out->ra0_deg = ra;
            out->dec0_deg = dec;
        }
    }
    if (out->has_phase_centre) {
        out->equinox = read_equinox(uf->f);
        read_radesys(uf->f, out->radesys, sizeof out->radesys);
    }
}

/* No DATE parameter: the header's date of the observation, in FITS's form
 * YYYY-MM-DD[Thh:mm:ss[.s]] (not the old dd/mm/yy). */
static void read_header_date(fitsfile *f, pk_vis *out) {
    int key_status = 0;
    char date[FLEN_VALUE] = "";
    if (out->date_obs[0] || fits_read_key(f, TSTRING, "DATE-OBS", date, NULL, &key_status)) return;
    trim(date);
    int ok = strlen(date) >= 10 && date[4] == '-' && date[7] == '-';
    for (int k = 0; ok && k < 10; k++) ok = k == 4 || k == 7 || (date[k] >= '0' && date[k] <= '9');
    if (ok) snprintf(out->date_obs, sizeof out->date_obs, "%.*s", (int)sizeof out->date_obs - 1, date);
}

/* What the header tells beside the visibilities: the phase centre, OBJECT,
 * BUNIT and DATE-OBS; with a SOURCE parameter, the source's position and
 * name from the AIPS SU table. */
static pk_status read_header_metadata(const uvfits_file *uf, const group_params *gp, double source_id, pk_vis *out) {
    read_phase_centre(uf, out);
    read_text_key(uf->f, "OBJECT", out->object, sizeof out->object);
    read_text_key(uf->f, "BUNIT", out->bunit, sizeof out->bunit);
    read_header_date(uf->f, out);
    if (gp->source_param < 0) return PK_OK;
    int found = 0;
    pk_status st = read_su_source(uf->ctx, uf->path, uf->f, source_id, out, &found);
    if (st) return st;
    if (found && !out->radesys[0]) read_radesys(uf->f, out->radesys, sizeof out->radesys);
    if (found && out->equinox == 0) out->equinox = read_equinox(uf->f); /* the SU table gave none */
    return PK_OK;
}

/* No visibility left: what the weights mode flags. */
static pk_status all_flagged(const uvfits_file *uf, size_t n_records, pk_weights weights) {
    return pk_fail(
        uf->ctx, PK_ERR_PARSE, "%s: every one of the %zu visibilities is flagged (%s weights flag %s)%s", uf->path,
        n_records, pk_weights_name(weights), weights == PK_WEIGHTS_DATA ? "every weight <= 0" : "only weight 0",
        weights == PK_WEIGHTS_DATA ? "; if the writer stored all weights negative, try --weights abs or unit" : "");
}

pk_status pk_vis_read_uvfits(pk_context *ctx, const char *path, pk_weights weights, pk_vis *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_uvfits: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_uvfits: path is NULL");
    if ((unsigned)weights > PK_WEIGHTS_UNIT)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read_uvfits: weights %d is not data (0), abs (1) or unit (2)",
                       (int)weights);
    uvfits_file uf = {ctx, path, NULL, 0, 0, {0}};
    long long file_size = -1;
    void *mem = NULL;
    pk_status st = pk_fits_open(ctx, path, &uf.f, &file_size, &mem);
    if (st) return st;
    group_params gp = {0};
    channel_freqs freqs = {0};
    stokes_hands hands = {0};
    double source_id = 0;
    st = read_group_header(&uf, file_size);
    if (!st) st = read_group_params(&uf, &gp);
    if (!st) st = read_frequencies(&uf, &gp, &freqs);
    if (!st) st = choose_hands(&uf, &hands);
    if (!st) st = read_groups(&uf, &gp, &freqs, &hands, weights, out, &source_id);
    if (!st) {
        out->freq_hz = band_centre(&uf.ax, &freqs);
        st = read_header_metadata(&uf, &gp, source_id, out);
    }
    if (!st && out->n == 0) st = all_flagged(&uf, out->n_records, weights);
    if (st) pk_vis_free(out);
    group_params_free(&gp);
    free(freqs.if_offset);
    pk_fits_close(uf.f, mem);
    return st;
}
