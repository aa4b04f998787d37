/* image_out.c - the dirty image as a FITS file (cfitsio) with a WCS header.
 *
 * Orientation: east on the left, north up, as astronomers display the sky.
 * FITS column i (0-based) holds grid column a = n - 1 - i, so l decreases
 * with i (CDELT1 < 0); row j holds b = j. In the SIN projection the
 * intermediate world coordinates are (l, m) in degrees, so CRPIX1 = n - c,
 * CRPIX2 = c + 1 (1-based) with c = n / 2.
 *
 * The file is written under a temporary name beside the target and renamed
 * over it only when complete, so no reader sees a half-written image.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <fitsio.h>

#include "dftimage_internal.h"

double pk_image_fits_value(const pk_image *image, size_t i, size_t j) {
    if (!image || !image->re || i >= image->n || j >= image->n) return (double)NAN; /* no such pixel */
    return image->re[j * image->n + (image->n - 1 - i)];
}

static int write_plane(fitsfile *f, const pk_image *image, const double *plane, int *status) {
    size_t n = image->n;
    int dbl = image->precision == PK_PRECISION_DOUBLE;
    void *buf = malloc(n * (dbl ? sizeof(double) : sizeof(float)));
    if (!buf) return *status = MEMORY_ALLOCATION;
    for (size_t j = 0; j < n && !*status; j++) {
        for (size_t i = 0; i < n; i++) {
            double v = plane[j * n + (n - 1 - i)];
            if (dbl) ((double *)buf)[i] = v;
            else ((float *)buf)[i] = (float)v;
        }
        fits_write_img(f, dbl ? TDOUBLE : TFLOAT, (LONGLONG)(j * n + 1), (LONGLONG)n, buf, status);
    }
    free(buf);
    return *status;
}

/* The phase centre's frame and equinox as the input gave them (EQUINOX or
 * EPOCH, RADESYS): a B1950 file keeps B1950 coordinates. An equinox alone
 * takes FITS's default frame, a frame alone its default equinox, neither:
 * FK5 J2000, each said so in the card's comment. ICRS and GAPPT take no
 * EQUINOX. */
static void write_frame(fitsfile *f, const pk_vis *vis, int *status) {
    char frame[sizeof vis->radesys];
    double equinox = vis->equinox;
    const char *note = NULL;
    snprintf(frame, sizeof frame, "%s", vis->radesys);
    if (!frame[0] && equinox > 0) { /* FITS WCS paper II's default for an equinox alone */
        snprintf(frame, sizeof frame, "%s", equinox < 1984.0 ? "FK4" : "FK5");
        note = "from the input's equinox";
    } else if (!frame[0]) {
        snprintf(frame, sizeof frame, "FK5");
        note = "not in the input: assumed";
    }
    fits_write_key(f, TSTRING, "RADESYS", frame, note, status);
    if (strcmp(frame, "ICRS") == 0 || strcmp(frame, "GAPPT") == 0) return;
    if (!(equinox > 0)) {
        equinox = strncmp(frame, "FK4", 3) == 0 ? 1950.0 : 2000.0;
        note = "not in the input: the frame's default";
    } else note = "as in the input";
    fits_write_key(f, TDOUBLE, "EQUINOX", &equinox, note, status);
}

static void write_wcs(fitsfile *f, const pk_image *image, const pk_vis *vis, int *status) {
    const double deg = 180.0 / M_PI;
    double c = (double)(image->n / 2);
    double crpix1 = (double)image->n - c, crpix2 = c + 1.0;
    double cdelt1 = -image->cell * deg, cdelt2 = image->cell * deg;
    if (vis && vis->has_phase_centre) {
        double ra = vis->ra0_deg, dec = vis->dec0_deg;
        fits_write_key(f, TSTRING, "CTYPE1", "RA---SIN", "l = east direction cosine (SIN projection)", status);
        fits_write_key(f, TDOUBLE, "CRVAL1", &ra, "phase centre right ascension", status);
        fits_write_key(f, TDOUBLE, "CDELT1", &cdelt1, "east is left", status);
        fits_write_key(f, TDOUBLE, "CRPIX1", &crpix1, NULL, status);
        fits_write_key(f, TSTRING, "CUNIT1", "deg", NULL, status);
        fits_write_key(f, TSTRING, "CTYPE2", "DEC--SIN", "m = north direction cosine (SIN projection)", status);
        fits_write_key(f, TDOUBLE, "CRVAL2", &dec, "phase centre declination", status);
        fits_write_key(f, TDOUBLE, "CDELT2", &cdelt2, NULL, status);
        fits_write_key(f, TDOUBLE, "CRPIX2", &crpix2, NULL, status);
        fits_write_key(f, TSTRING, "CUNIT2", "deg", NULL, status);
        write_frame(f, vis, status);
    } else {
        /* No phase centre: plain direction cosines (dimensionless). */
        double cd1 = -image->cell, cd2 = image->cell, zero = 0.0;
        fits_write_key(f, TSTRING, "CTYPE1", "L", "east direction cosine (phase centre unknown)", status);
        fits_write_key(f, TDOUBLE, "CRVAL1", &zero, NULL, status);
        fits_write_key(f, TDOUBLE, "CDELT1", &cd1, "east is left", status);
        fits_write_key(f, TDOUBLE, "CRPIX1", &crpix1, NULL, status);
        fits_write_key(f, TSTRING, "CTYPE2", "M", "north direction cosine", status);
        fits_write_key(f, TDOUBLE, "CRVAL2", &zero, NULL, status);
        fits_write_key(f, TDOUBLE, "CDELT2", &cd2, NULL, status);
        fits_write_key(f, TDOUBLE, "CRPIX2", &crpix2, NULL, status);
    }
    if (vis && vis->object[0]) fits_write_key(f, TSTRING, "OBJECT", (void *)vis->object, NULL, status);
    if (vis && vis->date_obs[0]) fits_write_key(f, TSTRING, "DATE-OBS", (void *)vis->date_obs, "first record", status);
    if (vis && vis->freq_hz > 0) {
        double fr = vis->freq_hz;
        fits_write_key(f, TDOUBLE, "RESTFRQ", &fr, "[Hz] mean frequency of the channels read", status);
    }
    long nvis = vis ? (long)vis->n : 0;
    int sign = image->sign;
    double cell = image->cell;
    if (image->psf)
        fits_write_key(f, TSTRING, "BTYPE", "dirty beam", "sum_k w_k exp(s 2 pi i (u l + v m + w (n-1))) / WEIGHTS",
                       status);
    else if (image->normalised)
        fits_write_key(f, TSTRING, "BTYPE", "dirty image", "sum_k V_k exp(s 2 pi i (u l + v m + w (n-1))) / WEIGHTS",
                       status);
    else fits_write_key(f, TSTRING, "BTYPE", "dirty image", "sum_k V_k exp(s 2 pi i (u l + v m + w (n-1)))", status);
    fits_write_key(f, TLONG, "NVIS", &nvis, "visibilities summed", status);
    if (image->bmaj > 0) {
        double bmaj = image->bmaj * 180.0 / M_PI, bmin = image->bmin * 180.0 / M_PI, bpa = image->bpa;
        fits_write_key(f, TDOUBLE, "BMAJ", &bmaj, "[deg] beam FWHM, major axis (Gaussian fit to the PSF)", status);
        fits_write_key(f, TDOUBLE, "BMIN", &bmin, "[deg] beam FWHM, minor axis", status);
        fits_write_key(f, TDOUBLE, "BPA", &bpa, "[deg] beam major axis, east of north", status);
    }
    if (vis) {
        double ws = vis->weight_sum;
        fits_write_key(f, TDOUBLE, "WEIGHTS", &ws, "sum of the weights used", status);
        fits_write_key(f, TSTRING, "WEIGHTNG", (void *)pk_weighting_name((pk_weighting)vis->weighting),
                       "imaging weights: natural, uniform or briggs", status);
        if (vis->weighting == PK_WEIGHTING_BRIGGS) {
            double r = vis->robust;
            fits_write_key(f, TDOUBLE, "ROBUST", &r, "Briggs robustness", status);
        }
        if (vis->bunit[0]) {
            char unit[48];
            snprintf(unit, sizeof unit, "%s", vis->bunit);
            fits_write_key(f, TSTRING, "DATAUNIT", unit, "the visibilities' unit (UVFITS BUNIT)", status);
            if (image->normalised && !image->psf) {
                /* FITS spells the units Jy and beam, and readers such as
                 * astropy's parse them case by case: AIPS's 'JY' becomes
                 * 'Jy/beam' (CASA's spelling); any other unit is kept */
                if (strcasecmp(vis->bunit, "JY") == 0) snprintf(unit, sizeof unit, "Jy/beam");
                else snprintf(unit, sizeof unit, "%s/beam", vis->bunit);
                fits_write_key(f, TSTRING, "BUNIT", unit, "the weighted mean of the visibilities", status);
            }
        }
        if (image->psf) {
            fits_write_comment(f, "Pixels: the point spread function of the weights, 1 at the phase centre.", status);
        } else if (image->normalised) {
            fits_write_comment(f, "Pixels: the sum of the weighted visibilities divided by WEIGHTS, their", status);
            fits_write_comment(f, "weighted mean (Jy/beam for data in Jy).", status);
        } else {
            fits_write_comment(f, "Pixels: the unnormalised sum of the weighted visibilities.", status);
            fits_write_comment(f, "Divided by WEIGHTS: their weighted mean (Jy/beam for data in Jy).", status);
        }
    }
    fits_write_key(f, TINT, "DFTSIGN", &sign, "sign s of the transform", status);
    fits_write_key(f, TDOUBLE, "CELLRAD", &cell, "[rad] cell size", status);
    fits_write_key(f, TSTRING, "ORIGIN", "pairkit " PK_VERSION_STRING, "exact direct Fourier transform", status);
}

/* PK_ERR_INVALID, naming the first, when a pixel is not finite or (a
 * float32 image) beyond float32's range: such an image is not written. */
static pk_status check_pixels(pk_context *ctx, const char *path, const pk_image *image, const double *plane,
                              const char *part) {
    size_t n = image->n;
    int dbl = image->precision == PK_PRECISION_DOUBLE;
    for (size_t p = 0; p < n * n; p++) {
        double v = plane[p];
        if (isfinite(v) && (dbl || fabs(v) <= (double)FLT_MAX)) continue;
        size_t i = n - p % n, j = p / n + 1; /* FITS column and row, from 1 as FITS counts */
        if (!isfinite(v))
            return pk_fail(ctx, PK_ERR_INVALID,
                           "%s: the %s's pixel at FITS column %zu, row %zu is %g: an image with values that are not "
                           "finite is not written",
                           path, part, i, j, v);
        return pk_fail(ctx, PK_ERR_INVALID,
                       "%s: the %s's pixel at FITS column %zu, row %zu is %.3g, beyond the range of a float32 image "
                       "(%.3g); image in double precision (--precision double)",
                       path, part, i, j, v, (double)FLT_MAX);
    }
    return PK_OK;
}

pk_status pk_image_write_fits(pk_context *ctx, const char *path, const pk_image *image, const pk_vis *vis,
                              int with_imag) {
    pk_clear(ctx);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_image_write_fits: path is NULL");
    if (!image) return pk_fail(ctx, PK_ERR_INVALID, "pk_image_write_fits: image is NULL");
    if (!image->re || image->n == 0)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the image is empty (n %zu, re %s)", path, image->n,
                       image->re ? "set" : "NULL");
    if (with_imag && !image->im)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the imaginary part was asked for but not computed", path);
    pk_status checked = check_pixels(ctx, path, image, image->re, image->psf ? "beam" : "image");
    if (!checked && with_imag) checked = check_pixels(ctx, path, image, image->im, "imaginary part");
    if (checked) return checked;
    const char *unfit = pk_output_unfit(path);
    if (unfit) return pk_fail(ctx, PK_ERR_IO, "%s: cannot write: %s", path, unfit);
    /* the file replaced: path, or where a link at path points */
    char *target = pk_output_path(path);
    char *tmp = target ? pk_sibling_name(target, ".tmp.XXXXXX") : NULL;
    if (!tmp) {
        free(target);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        free(target);
        return st;
    }
    close(fd);
    unlink(tmp); /* cfitsio creates the file itself and refuses to overwrite */
    pk_temp_note(tmp);

    fitsfile *f = NULL;
    int status = 0;
    long naxes[2] = {(long)image->n, (long)image->n};
    int bitpix = image->precision == PK_PRECISION_DOUBLE ? DOUBLE_IMG : FLOAT_IMG;
    fits_write_errmark(); /* cfitsio's messages of this write, cleared back to here below */
    fits_create_diskfile(&f, tmp, &status);
    fits_create_img(f, bitpix, 2, naxes, &status);
    write_wcs(f, image, vis, &status);
    fits_write_key(f, TSTRING, "EXTNAME", image->psf ? "PSF" : "REAL",
                   image->psf ? "point spread function (dirty beam)" : "real part of the dirty image", &status);
    write_plane(f, image, image->re, &status);
    if (with_imag) {
        fits_create_img(f, bitpix, 2, naxes, &status);
        write_wcs(f, image, vis, &status);
        fits_write_key(f, TSTRING, "EXTNAME", "IMAG", "imaginary part of the dirty image", &status);
        write_plane(f, image, image->im, &status);
    }
    int close_status = 0;
    if (f) fits_close_file(f, &close_status);
    if (!status) status = close_status;
    fits_clear_errmark();
    if (!status) {
        /* fsync before the rename, so the new name never points at an
         * incomplete file after a crash. */
        int fd2 = open(tmp, O_RDONLY);
        if (fd2 >= 0) {
            fsync(fd2);
            close(fd2);
        }
        pk_keep_mode(tmp, target);
        if (rename(tmp, target) != 0) {
            pk_status st =
                pk_fail(ctx, PK_ERR_IO, "%s: cannot rename the finished image into place: %s", path, strerror(errno));
            unlink(tmp);
            pk_temp_forget(tmp);
            free(tmp);
            free(target);
            return st;
        }
        pk_temp_forget(tmp);
        free(tmp);
        free(target);
        return PK_OK;
    }
    char text[FLEN_STATUS];
    fits_get_errstatus(status, text);
    unlink(tmp);
    pk_temp_forget(tmp);
    free(tmp);
    free(target);
    if (status == WRITE_ERROR) /* cfitsio keeps no errno */
        return pk_fail(ctx, PK_ERR_IO, "%s: writing the FITS image failed: %s (%s)", path, text,
                       pk_write_failure_causes());
    return pk_fail(ctx, PK_ERR_IO, "%s: writing the FITS image failed: %s", path, text);
}
