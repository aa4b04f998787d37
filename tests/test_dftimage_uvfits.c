/* test_dftimage_uvfits.c - every trap of the real UVFITS files in
 * data/vis/ (see its README), checked against values read here straight
 * from the files with cfitsio: PSCAL/PZERO applied, UU/UU--/UU---SIN, the
 * split DATE, the missing CTYPE5, u, v, w from seconds to wavelengths per
 * channel with the FQ table's IF offsets, one visibility per channel and
 * IF, Stokes I from XX,YY and RR,LL, weights <= 0 flagged, --weights abs
 * and unit. Then broken copies: a missing VV, an axis without CTYPE, a NaN
 * in an unflagged visibility, a truncated file, u in wavelengths ('UU-L').
 * The phase centre's frame and equinox, as the files give them, into the
 * image header. */
#include <fitsio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pairkit/dftimage.h"

#define MWA "data/vis/1133866760.uvfits"
#define MOJAVE "data/vis/mojave.uvfits"
#define EHT "data/vis/SR1_M87_2017_101_lo_hops_netcal_StokesI.uvfits"

static int close_rel(double a, double b, double tol) {
    return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

/* Raw group g: parameters (unscaled) and data. */
static void raw_group(const char *path, long g, double *params, long n_params, float *data, long n_data) {
    fitsfile *f;
    int status = 0, anynul;
    fits_open_file(&f, path, READONLY, &status);
    fits_read_grppar_dbl(f, g, 1, n_params, params, &status);
    fits_read_img_flt(f, g, 1, n_data, 0.0f, data, &anynul, &status);
    fits_close_file(f, &status);
    CHECK(status == 0, "cfitsio status %d reading %s", status, path);
}

static void extent(const pk_vis *vis, double *max_uv, double *max_w) {
    *max_uv = 0, *max_w = 0;
    for (size_t k = 0; k < vis->n; k++) {
        double uv = hypot(vis->u[k], vis->v[k]);
        if (uv > *max_uv) *max_uv = uv;
        if (fabs(vis->w[k]) > *max_w) *max_w = fabs(vis->w[k]);
    }
}

static void test_mwa(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    /* Every weight is negative: with AIPS's rule all is flagged, said clearly. */
    CHECK(pk_vis_read(&ctx, MWA, PK_WEIGHTS_DATA, &vis) == PK_ERR_PARSE &&
              strstr(ctx.message, "flagged (data weights flag every weight <= 0)") &&
              strstr(ctx.message, "--weights abs"),
          "MWA with data weights: %s", ctx.message);
    /* a weights value outside pk_weights refused, not read as unit weights */
    CHECK(pk_vis_read_uvfits(&ctx, MWA, (pk_weights)3, &vis) == PK_ERR_INVALID &&
              strstr(ctx.message, "pk_vis_read_uvfits: weights 3 is not data (0), abs (1) or unit (2)") && vis.n == 0,
          "MWA with weights 3: %s", ctx.message);
    CHECK_OK(pk_vis_read(&ctx, MWA, PK_WEIGHTS_ABS, &vis), &ctx);
    CHECK(vis.n_records == 5565 * 11 && vis.n + vis.n_flagged == vis.n_records, "records %zu", vis.n_records);
    CHECK(vis.sign == -1 && vis.has_phase_centre && vis.ra0_deg == 24.75 && vis.dec0_deg == -17.95, "phase centre");
    CHECK(strcmp(vis.object, "UVCeti") == 0, "object '%s'", vis.object);
    CHECK(strncmp(vis.date_obs, "2015-12-11T10:59:0", 18) == 0, "date (DATE + PZERO) '%s'", vis.date_obs);
    double max_uv, max_w;
    extent(&vis, &max_uv, &max_w);
    CHECK(close_rel(max_uv, 1475, 0.01) && close_rel(max_w, 393, 0.01), "MWA max |uv| %.1f, max |w| %.1f", max_uv,
          max_w);
    /* Group 2, a cross-correlation: each channel its own visibility, at its
     * own frequency; Stokes I from XX and YY weighted by |weight|. */
    double p[9];
    float d[3 * 4 * 11];
    raw_group(MWA, 2, p, 9, d, 3 * 4 * 11);
    CHECK(p[0] != 0, "group 2 is not an auto");
    if (vis.n_flagged == 0) {
        for (int c = 0; c < 11; c++) {
            size_t k = 11 + (size_t)c;
            double freq = 153875000.0 + 80000.0 * c;
            const float *xx = d + (c * 4 + 0) * 3, *yy = d + (c * 4 + 1) * 3;
            double re = fabs((double)xx[2]) * (double)xx[0] + fabs((double)yy[2]) * (double)yy[0];
            double im = fabs((double)xx[2]) * (double)xx[1] + fabs((double)yy[2]) * (double)yy[1];
            CHECK(close_rel(vis.u[k], p[0] * freq, 1e-12) && close_rel(vis.v[k], p[1] * freq, 1e-12) &&
                      close_rel(vis.w[k], p[2] * freq, 1e-12),
                  "channel %d: u %.6f expected %.6f", c, vis.u[k], p[0] * freq);
            CHECK(close_rel(vis.re[k], re, 1e-6) && close_rel(vis.im[k], im, 1e-6),
                  "channel %d: V %g%+gi expected %g%+gi", c, vis.re[k], vis.im[k], re, im);
        }
    }
    pk_vis unit;
    CHECK_OK(pk_vis_read(&ctx, MWA, PK_WEIGHTS_UNIT, &unit), &ctx);
    CHECK(unit.n == vis.n && unit.weight_sum == (double)unit.n, "unit weights: one per visibility");
    {
        const float *xx = d, *yy = d + 3;
        CHECK(close_rel(unit.re[11], 0.5 * ((double)xx[0] + (double)yy[0]), 1e-6), "unit weights: mean of XX and YY");
    }
    pk_vis_free(&unit);
    pk_vis_free(&vis);
}

static void test_mojave(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    CHECK_OK(pk_vis_read(&ctx, MOJAVE, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.n_records == 3150 * 2, "records %zu (3150 groups x 2 IFs)", vis.n_records);
    double flagged = (double)vis.n_flagged / (double)vis.n_records;
    CHECK(flagged > 0.02 && flagged < 0.10, "flagged share %.3f (README: 94%% of weights > 0)", flagged);
    double max_uv, max_w;
    extent(&vis, &max_uv, &max_w);
    CHECK(close_rel(max_uv, 2.3e8, 0.05), "PSCAL applied: max |uv| %.4g (README: 2.3e8)", max_uv);
    CHECK(max_w > 1e8 && max_w < 1.6e8, "max |w| %.4g (README: up to 1.4e8)", max_w);
    CHECK(strcmp(vis.date_obs, "2006-06-15") > 0 && strncmp(vis.date_obs, "2006-06-15", 10) == 0, "split DATE: '%s'",
          vis.date_obs);
    CHECK(strcmp(vis.object, "1228+126") == 0, "object");
    /* The first group with both IFs and both hands unflagged: two IFs, 8 MHz
     * apart by the FQ table; Stokes I from RR and LL. Its visibilities
     * follow those of the earlier groups' unflagged IFs. */
    double p[7];
    float d[3 * 4 * 2];
    const double pscal = 1.23388869121e-10, f0 = 8.10445875e9;
    size_t before = 0;
    long g;
    for (g = 1; g <= 200; g++) {
        raw_group(MOJAVE, g, p, 7, d, 24);
        if (d[2] > 0 && d[5] > 0 && d[14] > 0 && d[17] > 0) break;
        for (int i = 0; i < 2; i++) before += d[12 * i + 2] > 0 || d[12 * i + 5] > 0;
    }
    CHECK(g <= 200, "a fully unflagged group among the first 200");
    if (g <= 200) {
        printf("mojave: group %ld is the first fully unflagged one, visibilities %zu and %zu\n", g, before, before + 1);
        for (int i = 0; i < 2; i++) {
            size_t k = before + (size_t)i;
            double freq = f0 + 8e6 * i;
            const float *rr = d + (i * 4 + 0) * 3, *ll = d + (i * 4 + 1) * 3;
            CHECK(close_rel(vis.u[k], p[0] * pscal * freq, 1e-12) && close_rel(vis.w[k], p[2] * pscal * freq, 1e-12),
                  "IF %d: u %.6g expected %.6g", i + 1, vis.u[k], p[0] * pscal * freq);
            double re = (double)rr[2] * (double)rr[0] + (double)ll[2] * (double)ll[0];
            double im = (double)rr[2] * (double)rr[1] + (double)ll[2] * (double)ll[1];
            CHECK(close_rel(vis.re[k], re, 1e-6) && close_rel(vis.im[k], im, 1e-6), "IF %d: Stokes I from RR, LL",
                  i + 1);
        }
        CHECK(close_rel(vis.u[before + 1] / vis.u[before], (f0 + 8e6) / f0, 1e-12), "IF 2 is 8 MHz above IF 1");
    }
    pk_vis_free(&vis);
}

static void test_eht(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    CHECK_OK(pk_vis_read(&ctx, EHT, PK_WEIGHTS_DATA, &vis), &ctx); /* no CTYPE5: tolerated */
    CHECK(vis.n_records == 7447, "records %zu", vis.n_records);
    /* The zero weights (11% of all) are those of RL and LR; RR and LL,
     * which make Stokes I, are all valid. */
    CHECK(vis.n_flagged == 0, "EHT: %zu Stokes I visibilities flagged", vis.n_flagged);
    double max_uv, max_w;
    extent(&vis, &max_uv, &max_w);
    CHECK(close_rel(max_uv, 8.26e9, 0.01), "UU---SIN with PSCAL: max |uv| %.4g (README 8.26e9)", max_uv);
    CHECK(max_w == 0, "WW is identically 0");
    CHECK(strcmp(vis.object, "M87") == 0 && strncmp(vis.date_obs, "2017-04-11", 10) == 0, "object %s date %s",
          vis.object, vis.date_obs);
    CHECK(close_rel(vis.freq_hz, 227070703125.0, 1e-12), "frequency");
    /* The date is split over two DATE parameters (PTYPE5, PTYPE6, scale 1,
     * zero 0): the day's start and its fraction, here the second's. Their
     * sum for the first group gives the time of DATE-OBS. */
    {
        double p[9];
        float d[3];
        raw_group(EHT, 1, p, 9, d, 3);
        double jd = p[4] + p[5], day = jd + 0.5 - floor(jd + 0.5);
        long want = lround(day * 86400.0), hh = -1, mm = -1, ss = -1;
        int got = sscanf(vis.date_obs, "2017-04-11T%ld:%ld:%ld", &hh, &mm, &ss);
        long have = got == 3 ? hh * 3600 + mm * 60 + ss : -1;
        CHECK(p[5] != 0 && want > 0 && labs(have - want) <= 1,
              "split DATE: DATE-OBS %s, want the time %02ld:%02ld:%02ld from both DATE parameters", vis.date_obs,
              want / 3600, want / 60 % 60, want % 60);
    }
    pk_vis_free(&vis);
}

/* A copy of src in dir, changed by edit (cfitsio calls on the open copy). */
static void copy_file(const char *src, const char *dst, long bytes) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    char buf[65536];
    long left = bytes;
    size_t got;
    while ((bytes < 0 || left > 0) &&
           (got = fread(buf, 1, bytes < 0 || left > (long)sizeof buf ? sizeof buf : (size_t)left, in)) > 0) {
        fwrite(buf, 1, got, out);
        left -= (long)got;
    }
    fclose(in);
    fclose(out);
}

/* A copy of src whose primary header card `key` holds `value` (written as
 * is from column 11), bytes changed in place, as a damaged file would be. */
static void copy_with_card(const char *src, const char *dst, const char *key, const char *value) {
    copy_file(src, dst, -1);
    FILE *fp = fopen(dst, "r+b");
    char card[81] = "";
    CHECK(fp != NULL, "open %s", dst);
    for (long at = 0; fp && fread(card, 1, 80, fp) == 80; at += 80) {
        if (strncmp(card, "END     ", 8) == 0) break;
        size_t n = strlen(key);
        if (strncmp(card, key, n) != 0 || card[n] != ' ') continue;
        char fresh[81];
        snprintf(fresh, sizeof fresh, "%-8.8s= %-70.70s", key, value);
        fseek(fp, at, SEEK_SET);
        fwrite(fresh, 1, 80, fp);
        fclose(fp);
        return;
    }
    CHECK(0, "%s: no card %s", src, key);
    if (fp) fclose(fp);
}

static void expect_error(const char *path, pk_weights weights, const char *needle, const char *what) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    pk_status st = pk_vis_read(&ctx, path, weights, &vis);
    CHECK(st != PK_OK, "%s: read succeeded", what);
    CHECK(strstr(ctx.message, needle) != NULL, "%s: message '%s' lacks '%s'", what, ctx.message, needle);
    CHECK(vis.u == NULL, "%s: nothing left allocated", what);
    printf("%-24s -> %s\n", what, ctx.message);
}

/* A changed MOJAVE file that still reads whole: its 5946 visibilities. */
static void expect_mojave_read(const char *path, const char *what) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    pk_status st = pk_vis_read_uvfits(&ctx, path, PK_WEIGHTS_DATA, &vis);
    CHECK(st == PK_OK && vis.n == 5946, "%s: status %d, %s", what, (int)st, ctx.message);
    if (st == PK_OK) pk_vis_free(&vis);
}

static void test_broken(void) {
    char cmd_buf[700];
    char dir[] = "/tmp/pk_uvfits_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    int status = 0;
    fitsfile *f;

    snprintf(path, sizeof path, "%s/no_vv.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    fits_open_file(&f, path, READWRITE, &status);
    fits_update_key(f, TSTRING, "PTYPE2", "XX--", NULL, &status);
    fits_close_file(f, &status);
    expect_error(path, PK_WEIGHTS_DATA, "group parameter VV is missing (looked for PTYPE 'VV', 'VV--' or 'VV---SIN')",
                 "missing VV parameter");

    snprintf(path, sizeof path, "%s/no_ctype.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    fits_open_file(&f, path, READWRITE, &status);
    fits_delete_key(f, "CTYPE5", &status); /* the IF axis, 2 long */
    fits_close_file(f, &status);
    expect_error(path, PK_WEIGHTS_DATA, "CTYPE5", "2-long axis without CTYPE");

    snprintf(path, sizeof path, "%s/nan.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    fits_open_file(&f, path, READWRITE, &status);
    float nan_value = NAN;
    fits_write_img_flt(f, 2, 1, 1, &nan_value, &status); /* group 2 (unflagged), RR real part, IF 1 */
    fits_close_file(f, &status);
    expect_error(path, PK_WEIGHTS_DATA, "not finite", "NaN in unflagged data");

    /* a NaN or infinite weight is an error under every weighting, never a flag */
    float bad_weight[2] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++) {
        snprintf(path, sizeof path, "%s/bad_weight%d.uvfits", dir, b);
        copy_file(MOJAVE, path, -1);
        fits_open_file(&f, path, READWRITE, &status);
        fits_write_img_flt(f, 2, 3, 1, &bad_weight[b], &status); /* group 2, RR weight, IF 1 */
        fits_close_file(f, &status);
        expect_error(path, PK_WEIGHTS_DATA, "group 2, IF 1, channel 1, Stokes index 1: weight is not finite",
                     b ? "inf weight" : "NaN weight");
        expect_error(path, PK_WEIGHTS_ABS, "weight is not finite", b ? "inf weight, abs" : "NaN weight, abs");
        expect_error(path, PK_WEIGHTS_UNIT, "weight is not finite", b ? "inf weight, unit" : "NaN weight, unit");
    }

    /* header values that would be misread without a word: an unknown data
     * axis (here the 2-long STOKES axis renamed), a scale or a reference
     * value that is not a number, a phase centre off the sphere, a BITPIX
     * or an axis length that moves where the next HDU starts */
    struct {
        const char *key, *value, *says, *what;
    } cards[] = {
        {"CTYPE3", "'FOO     '", "axis 3 (CTYPE3 = 'FOO') has 4 elements", "unknown axis"},
        {"CTYPE5", "'STOKES  '", "two STOKES axes (3 and 5)", "two STOKES axes"},
        {"PSCAL1", "'x'", "PSCAL1 = 'x' is not a finite number", "PSCAL not a number"},
        {"PSCAL1", "0.0", "PSCAL1 = 0: group parameter 1", "PSCAL zero (every u zero)"},
        {"CRVAL4", "abc", "CRVAL4", "CRVAL not a number"},
        {"CRVAL7", "123.9", "CRVAL7 = 123.9: the phase centre's declination", "declination past 90"},
        {"CRVAL6", "987.7", "CRVAL6 = 987.7: the phase centre's right ascension", "RA past 360"},
        {"BITPIX", "17", "BITPIX = 17", "BITPIX 17"},
        {"BITPIX", "16", "HDU 2 does not start where HDU 1's BITPIX", "BITPIX 16"},
        {"NAXIS2", "2", "HDU 2 does not start where HDU 1's BITPIX", "NAXIS2 changed"},
        {"GCOUNT", "3000", "HDU 2 does not start where HDU 1's BITPIX", "GCOUNT changed"},
        /* one group fewer: the last group is left in the padding of the
         * same last block (it was dropped without a word) */
        {"GCOUNT", "3149", "is not padding", "GCOUNT one short"},
        /* groups beyond what the header walk sizes (2^30): the reader's own
         * check of the groups' extent against the file */
        {"GCOUNT", "2000000000", "truncated: the header announces", "GCOUNT of 2e9"},
    };
    for (size_t c = 0; c < sizeof cards / sizeof cards[0]; c++) {
        snprintf(path, sizeof path, "%s/card%zu.uvfits", dir, c);
        copy_with_card(MOJAVE, path, cards[c].key, cards[c].value);
        expect_error(path, PK_WEIGHTS_DATA, cards[c].says, cards[c].what);
    }
    /* a keyword given twice with two values (a HISTORY card made a second
     * PSCAL1; the later one was used, unseen); twice with one value is
     * no doubt */
    for (int same = 0; same < 2; same++) {
        snprintf(path, sizeof path, "%s/pscal_twice%d.uvfits", dir, same);
        copy_file(MOJAVE, path, -1);
        FILE *fp = fopen(path, "r+b");
        char card[81] = "", pscal[81] = "";
        long at = 0, history_at = -1;
        for (; fp && fread(card, 1, 80, fp) == 80 && strncmp(card, "END     ", 8) != 0; at += 80) {
            if (strncmp(card, "PSCAL1  ", 8) == 0) memcpy(pscal, card, 80);
            if (history_at < 0 && strncmp(card, "HISTORY ", 8) == 0) history_at = at;
        }
        CHECK(fp && history_at > 0 && pscal[0], "mojave: a HISTORY card and PSCAL1");
        if (!same) snprintf(pscal, sizeof pscal, "%-8.8s= %-70.70s", "PSCAL1", "2.46777738242E-10");
        if (fp) {
            fseek(fp, history_at, SEEK_SET);
            fwrite(pscal, 1, 80, fp);
            fclose(fp);
        }
        if (!same)
            expect_error(path, PK_WEIGHTS_DATA, "keyword PSCAL1 is given twice, as 1.23388869121E-10", "PSCAL1 twice");
        else expect_mojave_read(path, "PSCAL1 twice with one value");
    }
    /* a zero scale on a parameter not read (PTYPE7 'INTTIM') is no concern */
    {
        snprintf(path, sizeof path, "%s/inttim0.uvfits", dir);
        copy_with_card(MOJAVE, path, "PSCAL7", "0.0");
        expect_mojave_read(path, "PSCAL7 = 0 (INTTIM)");
    }
    /* cut inside the last table (the antennas, which the image does not use) */
    struct stat sb;
    CHECK(stat(MOJAVE, &sb) == 0, "stat");
    snprintf(path, sizeof path, "%s/no_an_end.uvfits", dir);
    copy_file(MOJAVE, path, (long)sb.st_size - 2880);
    expect_error(path, PK_WEIGHTS_DATA, "truncated: HDU", "cut in the last table");

    /* only the padding of the last table's last block cut: truncated too,
     * as a header's cut block is (the last table's rows all there) */
    snprintf(path, sizeof path, "%s/no_padding.uvfits", dir);
    copy_file(MOJAVE, path, (long)sb.st_size - 100);
    expect_error(path, PK_WEIGHTS_DATA, "data, from byte", "last block's padding cut");

    snprintf(path, sizeof path, "%s/uu_l.uvfits", dir);
    copy_with_card(MOJAVE, path, "PTYPE1", "'UU-L-SIN'");
    expect_error(path, PK_WEIGHTS_DATA, "PTYPE1 = 'UU-L-SIN': u, v, w in wavelengths", "UU-L (wavelengths)");

    snprintf(path, sizeof path, "%s/truncated.uvfits", dir);
    copy_file(MOJAVE, path, 100000);
    expect_error(path, PK_WEIGHTS_DATA, "truncated", "truncated file");

    snprintf(path, sizeof path, "%s/header_only.uvfits", dir);
    copy_file(MOJAVE, path, 1000);
    expect_error(path, PK_WEIGHTS_DATA, "header_only.uvfits", "cut inside the header");
    CHECK(status == 0, "cfitsio status %d while making the broken copies", status);

    /* gzip-compressed: the same visibilities; compressed and cut, an error */
    {
        char gz[300];
        snprintf(gz, sizeof gz, "%s/mojave.uvfits.gz", dir);
        snprintf(cmd_buf, sizeof cmd_buf, "gzip -c %s > %s", MOJAVE, gz);
        CHECK(system(cmd_buf) == 0, "gzip");
        pk_context ctx;
        pk_context_init(&ctx);
        pk_vis a, b;
        CHECK_OK(pk_vis_read(&ctx, MOJAVE, PK_WEIGHTS_DATA, &a), &ctx);
        CHECK_OK(pk_vis_read(&ctx, gz, PK_WEIGHTS_DATA, &b), &ctx);
        CHECK(a.n == b.n && a.n_records == b.n_records && a.weight_sum == b.weight_sum, "gzip: %zu vs %zu", a.n, b.n);
        for (size_t i = 0; i < a.n && a.n == b.n; i++)
            if (a.u[i] != b.u[i] || a.v[i] != b.v[i] || a.w[i] != b.w[i] || a.re[i] != b.re[i] || a.im[i] != b.im[i]) {
                CHECK(0, "gzip: visibility %zu differs", i);
                break;
            }
        pk_vis_free(&a);
        pk_vis_free(&b);
        snprintf(path, sizeof path, "%s/cut.uvfits.gz", dir);
        snprintf(cmd_buf, sizeof cmd_buf, "head -c 50000 %s > %s", gz, path);
        CHECK(system(cmd_buf) == 0, "head");
        expect_error(path, PK_WEIGHTS_DATA, "cut.uvfits.gz: truncated gzip file", "cut gzip UVFITS");
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* The frame and equinox of the phase centre: as each real file gives
 * them (EPOCH 2000.0, EQUINOX 2.0E+03, EQUINOX 'J2000'), and copies with
 * B1950 and ICRS, into the image header. */
static void frame_of(const char *path, double *equinox, char *radesys) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    *equinox = -1;
    radesys[0] = '\0';
    pk_status st = pk_vis_read(&ctx, path, PK_WEIGHTS_ABS, &vis);
    CHECK_OK(st, &ctx);
    if (st != PK_OK) return;
    *equinox = vis.equinox;
    snprintf(radesys, 12, "%s", vis.radesys);
    pk_vis_free(&vis);
}

static void image_frame(const char *uvfits, const char *fits_path, char *radesys, double *equinox) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    CHECK_OK(pk_vis_read(&ctx, uvfits, PK_WEIGHTS_ABS, &vis), &ctx);
    pk_dftimage_options o = {PK_BACKEND_CPU, 0, PK_PRECISION_SINGLE, 0, 0, 0};
    pk_image img;
    CHECK_OK(pk_dftimage_run(&ctx, &o, &vis, 8, 1e-7, &img, NULL), &ctx);
    CHECK_OK(pk_image_write_fits(&ctx, fits_path, &img, &vis, 0), &ctx);
    pk_image_free(&img);
    pk_vis_free(&vis);
    fitsfile *f;
    int status = 0;
    radesys[0] = '\0';
    *equinox = -1;
    fits_open_file(&f, fits_path, READONLY, &status);
    fits_read_key(f, TSTRING, "RADESYS", radesys, NULL, &status);
    int s2 = 0;
    if (fits_read_key(f, TDOUBLE, "EQUINOX", equinox, NULL, &s2)) *equinox = 0; /* absent */
    fits_close_file(f, &status);
    CHECK(status == 0, "%s: cfitsio status %d", fits_path, status);
}

static void test_frame(void) {
    const char *real[] = {MWA, MOJAVE, EHT};
    for (int k = 0; k < 3; k++) {
        double e;
        char frame[12];
        frame_of(real[k], &e, frame);
        /* none declares a frame: read as none, not inferred */
        CHECK(e == 2000.0 && frame[0] == '\0', "%s: equinox %g, frame '%s' (J2000, none)", real[k], e, frame);
    }
    char dir[] = "/tmp/pk_uvfits_frame_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], out[300], frame[FLEN_VALUE];
    double e;
    snprintf(path, sizeof path, "%s/b1950.uvfits", dir);
    copy_with_card(MOJAVE, path, "EQUINOX", "'B1950'");
    snprintf(out, sizeof out, "%s/b1950.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "FK4") == 0 && e == 1950.0, "B1950 input: image RADESYS '%s', EQUINOX %g", frame, e);

    snprintf(path, sizeof path, "%s/e1950.uvfits", dir);
    copy_with_card(MOJAVE, path, "EQUINOX", "1950.0");
    snprintf(out, sizeof out, "%s/e1950.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "FK4") == 0 && e == 1950.0, "EQUINOX 1950.0 input: image RADESYS '%s', EQUINOX %g", frame, e);

    /* a frame FITS does not name is not taken: the equinox's default */
    snprintf(path, sizeof path, "%s/galactic.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    int gs = 0;
    fitsfile *gf;
    fits_open_file(&gf, path, READWRITE, &gs);
    fits_update_key(gf, TSTRING, "RADESYS", "GALACTIC", NULL, &gs);
    fits_close_file(gf, &gs);
    CHECK(gs == 0, "galactic copy: cfitsio status %d", gs);
    frame_of(path, &e, frame);
    CHECK(e == 2000.0 && frame[0] == '\0', "RADESYS 'GALACTIC': read as %g, '%s' (no frame)", e, frame);
    snprintf(out, sizeof out, "%s/galactic.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "FK5") == 0 && e == 2000.0, "RADESYS 'GALACTIC': image RADESYS '%s', EQUINOX %g", frame, e);

    snprintf(path, sizeof path, "%s/j2000.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    snprintf(out, sizeof out, "%s/j2000.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "FK5") == 0 && e == 2000.0, "J2000 input: image RADESYS '%s', EQUINOX %g", frame, e);

    /* RADESYS 'ICRS' added: the frame kept, no EQUINOX */
    snprintf(path, sizeof path, "%s/icrs.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    fitsfile *f;
    int status = 0;
    fits_open_file(&f, path, READWRITE, &status);
    fits_update_key(f, TSTRING, "RADESYS", "ICRS", NULL, &status);
    fits_close_file(f, &status);
    CHECK(status == 0, "icrs copy: cfitsio status %d", status);
    snprintf(out, sizeof out, "%s/icrs.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "ICRS") == 0 && e == 0, "ICRS input: image RADESYS '%s', EQUINOX %g (none)", frame, e);

    /* neither: FK5 J2000, assumed */
    snprintf(path, sizeof path, "%s/none.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    status = 0;
    fits_open_file(&f, path, READWRITE, &status);
    fits_delete_key(f, "EQUINOX", &status);
    fits_close_file(f, &status);
    CHECK(status == 0, "none copy: cfitsio status %d", status);
    frame_of(path, &e, frame);
    CHECK(e == 0 && frame[0] == '\0', "no EQUINOX: read as unknown (%g, '%s')", e, frame);
    CHECK(strcmp(frame, "") == 0, "no EQUINOX, no RADESYS: no frame");
    snprintf(out, sizeof out, "%s/none.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "FK5") == 0 && e == 2000.0, "no EQUINOX: image RADESYS '%s', EQUINOX %g", frame, e);

    /* RADESYS 'FK4' without an equinox: the frame kept, with FK4's default
     * equinox, B1950 (FITS WCS paper II), not FK5's J2000 */
    snprintf(path, sizeof path, "%s/fk4.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    status = 0;
    fits_open_file(&f, path, READWRITE, &status);
    fits_delete_key(f, "EQUINOX", &status);
    fits_update_key(f, TSTRING, "RADESYS", "FK4", NULL, &status);
    fits_close_file(f, &status);
    CHECK(status == 0, "fk4 copy: cfitsio status %d", status);
    frame_of(path, &e, frame);
    CHECK(e == 0 && strcmp(frame, "FK4") == 0, "RADESYS 'FK4', no EQUINOX: read as %g, '%s'", e, frame);
    snprintf(out, sizeof out, "%s/fk4.fits", dir);
    image_frame(path, out, frame, &e);
    CHECK(strcmp(frame, "FK4") == 0 && e == 1950.0, "RADESYS 'FK4', no EQUINOX: image RADESYS '%s', EQUINOX %g", frame,
          e);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* A progress that asks to stop at its n-th call. */
static int stop_calls;
static int stop_at_call(void *user, double fraction) {
    (void)user, (void)fraction;
    return ++stop_calls >= 2;
}

/* A UVFITS read asks the progress every 1024 groups and stops when told
 * (MOJAVE has 3150 groups: asked at 1024, stopped at 2048). */
static void test_cancel(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    ctx.progress = stop_at_call;
    pk_vis vis;
    stop_calls = 0;
    pk_status st = pk_vis_read(&ctx, MOJAVE, PK_WEIGHTS_DATA, &vis);
    CHECK(st == PK_ERR_CANCELLED && strstr(ctx.message, "cancelled while reading (group 2048 of 3150)") &&
              vis.u == NULL && stop_calls == 2,
          "cancelled read: status %d, %d calls, %s", (int)st, stop_calls, ctx.message);
}

/* A BITPIX -64 copy of the EHT file whose visibilities and weights carry
 * a factor 1 + 2^-40, which a float32 cannot hold: the reader must keep
 * it (reading the data as float32 would lose it entirely). */
static void test_float64(void) {
    char dir[] = "/tmp/pk_uvfits64_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], out_name[300];
    snprintf(path, sizeof path, "%s/eht64.uvfits", dir);
    snprintf(out_name, sizeof out_name, "!%s", path);
    const double f = 1.0 + ldexp(1.0, -40);
    int status = 0, naxis = 0, n_keys = 0, hdu_type;
    long naxes[8] = {0}, pcount = 0, gcount = 0;
    fitsfile *in = NULL, *out = NULL;
    fits_open_file(&in, EHT, READONLY, &status);
    fits_read_key(in, TINT, "NAXIS", &naxis, NULL, &status);
    for (int k = 0; k < naxis && k < 8; k++) {
        char key[16];
        snprintf(key, sizeof key, "NAXIS%d", k + 1);
        fits_read_key(in, TLONG, key, &naxes[k], NULL, &status);
    }
    fits_read_key(in, TLONG, "PCOUNT", &pcount, NULL, &status);
    fits_read_key(in, TLONG, "GCOUNT", &gcount, NULL, &status);
    fits_create_file(&out, out_name, &status);
    fits_write_grphdr(out, TRUE, DOUBLE_IMG, naxis, naxes, pcount, gcount, TRUE, &status);
    fits_get_hdrspace(in, &n_keys, NULL, &status);
    for (int k = 1; k <= n_keys && status == 0; k++) {
        char card[FLEN_CARD];
        fits_read_record(in, k, card, &status);
        if (fits_get_keyclass(card) > TYP_CMPRS_KEY) fits_write_record(out, card, &status);
    }
    long n_data = 1;
    for (int k = 1; k < naxis; k++) n_data *= naxes[k];
    double *params = malloc((size_t)pcount * sizeof(double));
    double *data = malloc((size_t)n_data * sizeof(double));
    for (long g = 1; g <= gcount && status == 0 && params && data; g++) {
        int anynul = 0;
        fits_read_grppar_dbl(in, g, 1, pcount, params, &status);
        fits_read_img_dbl(in, g, 1, n_data, 0.0, data, &anynul, &status);
        for (long k = 0; k < n_data; k++) data[k] *= f;
        fits_write_grppar_dbl(out, g, 1, pcount, params, &status);
        fits_write_img_dbl(out, g, 1, n_data, data, &status);
    }
    free(params);
    free(data);
    for (int h = 2; status == 0; h++) {
        if (fits_movabs_hdu(in, h, &hdu_type, &status)) {
            if (status == END_OF_FILE) status = 0;
            break;
        }
        fits_copy_hdu(in, out, 0, &status);
    }
    fits_close_file(out, &status);
    fits_close_file(in, &status);
    CHECK(status == 0, "cfitsio status %d writing %s", status, path);

    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis a, b;
    CHECK_OK(pk_vis_read(&ctx, EHT, PK_WEIGHTS_DATA, &a), &ctx);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &b), &ctx);
    CHECK(a.n == b.n && a.n > 0 && a.n_records == b.n_records, "BITPIX -64: %zu vs %zu visibilities", a.n, b.n);
    size_t off = 0, moved = 0;
    for (size_t i = 0; i < a.n && a.n == b.n; i++) {
        int uvw_same = a.u[i] == b.u[i] && a.v[i] == b.v[i] && a.w[i] == b.w[i];
        /* re and im hold weight x visibility: f^2 (float32 data: 1, off by 2^-39) */
        int scaled = fabs(b.re[i] - f * f * a.re[i]) <= 1e-13 * fabs(a.re[i]) &&
                     fabs(b.im[i] - f * f * a.im[i]) <= 1e-13 * fabs(a.im[i]);
        off += !uvw_same || !scaled;
        moved += b.re[i] != a.re[i];
    }
    CHECK(off == 0 && moved > a.n / 2, "BITPIX -64: %zu of %zu visibilities not read in double precision (%zu moved)",
          off, a.n, moved);
    CHECK(fabs(b.weight_sum - f * a.weight_sum) <= 1e-14 * a.weight_sum && b.weight_sum != a.weight_sum,
          "BITPIX -64: weight sum %.17g against %.17g", b.weight_sum, f * a.weight_sum);
    printf("BITPIX -64 copy of the EHT file: %zu visibilities, each with its factor 1 + 2^-40\n", b.n);
    pk_vis_free(&a);
    pk_vis_free(&b);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* cfitsio's message stack is the whole process's: a read leaves the
 * caller's own messages on it, puts none of its own there for good, and
 * never takes the caller's text into its message. */
static void test_message_stack(void) {
    char dir[] = "/tmp/pk_uvstack_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], msg[FLEN_ERRMSG];
    snprintf(path, sizeof path, "%s/no_if_freq.uvfits", dir);
    copy_file(MOJAVE, path, -1);
    int status = 0;
    fitsfile *f;
    fits_open_file(&f, path, READWRITE, &status);
    fits_movnam_hdu(f, BINARY_TBL, "AIPS FQ", 0, &status);
    int col = 0;
    fits_get_colnum(f, CASEINSEN, "IF FREQ", &col, &status);
    char key[16];
    snprintf(key, sizeof key, "TTYPE%d", col);
    fits_update_key(f, TSTRING, key, "IF FREX", NULL, &status);
    fits_close_file(f, &status);
    CHECK(status == 0, "renaming the FQ table's column: status %d", status);
    fits_clear_errmsg();

    const char *paths[2] = {MOJAVE, path};
    for (int k = 0; k < 2; k++) {
        fits_write_errmsg("the caller's own message");
        pk_context ctx;
        pk_context_init(&ctx);
        pk_vis vis;
        pk_status st = pk_vis_read(&ctx, paths[k], PK_WEIGHTS_DATA, &vis);
        if (k == 0) CHECK_OK(st, &ctx);
        else
            CHECK(st == PK_ERR_PARSE &&
                      strstr(ctx.message, "AIPS FQ table: column 'IF FREQ': named column not found") &&
                      !strstr(ctx.message, "caller"),
                  "the renamed column: status %d: %s", (int)st, ctx.message);
        pk_vis_free(&vis);
        int n = 0, first_is_callers = 0;
        while (fits_read_errmsg(msg)) first_is_callers |= n++ == 0 && strcmp(msg, "the caller's own message") == 0;
        CHECK(n == 1 && first_is_callers, "%s: cfitsio's stack after the read holds %d messages%s", paths[k], n,
              first_is_callers ? "" : ", the caller's not first");
    }
    unlink(path);
    rmdir(dir);
}

/* ---- synthetic files: what the real ones do not show ---------------------- */

/* A small UVFITS file (BITPIX -64, so u is stored exactly): 2 IFs of 4 channels from 1 GHz (CDELT4 1 MHz, CRPIX4
 * 1), IF 2 at +50 MHz, Stokes I, weight 1 everywhere; group g has u = g,
 * v = 2g, w = 0.5g microseconds. Options: the FQ table's CH WIDTH per IF
 * (NULL: no such column), a SOURCE parameter with these ids per group
 * (NULL: none) and an AIPS SU table, u split over two 'UU' parameters, no
 * DATE parameter but the header's DATE-OBS, the ptype of the second u
 * part, a FREQSEL parameter with these ids per group (NULL: none), and
 * the FQ table's FRQSEL ids (row k: IF 2 at +50 MHz + k * 30 MHz; none:
 * one row of id 1; a 0 id: no FRQSEL column). */
typedef struct synth {
    const double *ch_width;
    const double *source; /* per group */
    int su_table;         /* 2: its SOURCE column 200 characters wide */
    int split_u;
    const char *second_u_ptype;
    const char *date_obs;  /* NULL: DATE parameters */
    const double *freqsel; /* per group */
    int n_fq_rows;
    const int *fq_ids;
    int zero_weights; /* every weight 0 */
    int no_weights;   /* a COMPLEX axis of 2 (re, im): no weights stored */
    int zero_group;   /* one group, all zeros, and no tables after it */
} synth;

#define SYNTH_GROUPS 5
#define SYNTH_CHAN 4
#define SYNTH_IF 2

static double synth_u(long g) {
    return 1e-6 * (double)g;
}

static void write_synth(const char *path, const synth *o) {
    char name[300];
    snprintf(name, sizeof name, "!%s", path);
    int status = 0;
    fitsfile *f = NULL;
    long naxes[7] = {0, o->no_weights ? 2 : 3, 1, SYNTH_CHAN, SYNTH_IF, 1, 1};
    const int have_date = o->date_obs == NULL;
    const long pcount = 3 + (o->split_u ? 1 : 0) + (have_date ? 2 : 0) + (o->source ? 1 : 0) + (o->freqsel ? 1 : 0);
    fits_create_file(&f, name, &status);
    fits_write_grphdr(f, TRUE, DOUBLE_IMG, 7, naxes, pcount, o->zero_group ? 1 : SYNTH_GROUPS, TRUE, &status);
    const char *ctype[7] = {"", "COMPLEX", "STOKES", "FREQ", "IF", "RA", "DEC"};
    const double crval[7] = {0, 1, 1, 1e9, 1, 0, 0}, cdelt[7] = {0, 1, 1, 1e6, 1, 1, 1};
    for (int k = 1; k < 7; k++) {
        char key[16];
        double one = 1;
        snprintf(key, sizeof key, "CTYPE%d", k + 1);
        fits_write_key(f, TSTRING, key, (void *)ctype[k], NULL, &status);
        snprintf(key, sizeof key, "CRVAL%d", k + 1);
        fits_write_key(f, TDOUBLE, key, (void *)&crval[k], NULL, &status);
        snprintf(key, sizeof key, "CDELT%d", k + 1);
        fits_write_key(f, TDOUBLE, key, (void *)&cdelt[k], NULL, &status);
        snprintf(key, sizeof key, "CRPIX%d", k + 1);
        fits_write_key(f, TDOUBLE, key, &one, NULL, &status);
    }
    const char *ptypes[8];
    int np = 0;
    ptypes[np++] = "UU---SIN";
    if (o->split_u) ptypes[np++] = o->second_u_ptype ? o->second_u_ptype : "UU---SIN";
    ptypes[np++] = "VV---SIN";
    ptypes[np++] = "WW---SIN";
    if (have_date) ptypes[np++] = "DATE", ptypes[np++] = "DATE";
    if (o->source) ptypes[np++] = "SOURCE";
    if (o->freqsel) ptypes[np++] = "FREQSEL";
    for (int p = 0; p < np; p++) {
        char key[16];
        snprintf(key, sizeof key, "PTYPE%d", p + 1);
        fits_write_key(f, TSTRING, key, (void *)ptypes[p], NULL, &status);
    }
    fits_write_key(f, TSTRING, "OBJECT", o->source ? "MULTI" : "SYNTH", NULL, &status);
    if (o->date_obs) fits_write_key(f, TSTRING, "DATE-OBS", (void *)o->date_obs, NULL, &status);
    for (long g = 1; g <= (o->zero_group ? 0 : SYNTH_GROUPS); g++) {
        double params[8];
        int q = 0;
        /* the split u: a float32-sized high part and the rest */
        double u = synth_u(g), hi = (double)(float)(u * 1.1), lo = u - hi;
        params[q++] = o->split_u ? hi : u;
        if (o->split_u) params[q++] = lo;
        params[q++] = 2 * synth_u(g);
        params[q++] = 0.5 * synth_u(g);
        if (have_date) params[q++] = 2458849.5, params[q++] = 0.25;
        if (o->source) params[q++] = o->source[g - 1];
        if (o->freqsel) params[q++] = o->freqsel[g - 1];
        float data[3 * SYNTH_CHAN * SYNTH_IF];
        const int per = o->no_weights ? 2 : 3;
        for (int k = 0; k < SYNTH_CHAN * SYNTH_IF; k++) {
            /* without weights, channel k's visibility is k + 2 - 0.5i: a
             * weight read from the next value would be wrong */
            data[per * k] = o->no_weights ? (float)k + 2.0f : 1.0f;
            data[per * k + 1] = o->no_weights ? -0.5f : 0.0f;
            if (!o->no_weights) data[per * k + 2] = o->zero_weights ? 0.0f : 1.0f;
        }
        fits_write_grppar_dbl(f, g, 1, q, params, &status);
        fits_write_img_flt(f, g, 1, per * SYNTH_CHAN * SYNTH_IF, data, &status);
    }
    if (o->zero_group) {
        double zeros[8 + 3 * SYNTH_CHAN * SYNTH_IF] = {0};
        fits_write_grppar_dbl(f, 1, 1, pcount, zeros, &status);
        fits_write_img_dbl(f, 1, 1, naxes[1] * SYNTH_CHAN * SYNTH_IF, zeros, &status);
    } else {
        char form_d[8], form_e[8], form_j[8];
        snprintf(form_d, sizeof form_d, "%dD", SYNTH_IF);
        snprintf(form_e, sizeof form_e, "%dE", SYNTH_IF);
        snprintf(form_j, sizeof form_j, "%dJ", SYNTH_IF);
        const int one_id = 1, rows = o->n_fq_rows ? o->n_fq_rows : 1, *ids = o->fq_ids ? o->fq_ids : &one_id;
        const int c0 = ids[0] ? 1 : 0; /* the first column after FRQSEL, when there is one */
        char *ttype[4] = {"FRQSEL", "IF FREQ", "CH WIDTH", "SIDEBAND"};
        char *tform[4] = {"1J", form_d, form_e, form_j};
        fits_create_tbl(f, BINARY_TBL, rows, (o->ch_width ? 3 : 1) + c0, ttype + 1 - c0, tform + 1 - c0, NULL,
                        "AIPS FQ", &status);
        for (int r = 0; r < rows; r++) {
            int sideband[SYNTH_IF];
            double if_freq[SYNTH_IF] = {0, 50e6 + 30e6 * r};
            if (c0) fits_write_col(f, TINT, 1, r + 1, 1, 1, (void *)&ids[r], &status);
            fits_write_col(f, TDOUBLE, 1 + c0, r + 1, 1, SYNTH_IF, if_freq, &status);
            if (o->ch_width) {
                for (int i = 0; i < SYNTH_IF; i++) sideband[i] = o->ch_width[i] < 0 ? -1 : 1;
                fits_write_col(f, TDOUBLE, 2 + c0, r + 1, 1, SYNTH_IF, (void *)o->ch_width, &status);
                fits_write_col(f, TINT, 3 + c0, r + 1, 1, SYNTH_IF, sideband, &status);
            }
        }
    }
    if (o->su_table) {
        char *ttype[5] = {"ID. NO.", "SOURCE", "RAEPO", "DECEPO", "EPOCH"};
        char *tform[5] = {"1J", o->su_table == 2 ? "200A" : "16A", "1D", "1D", "1D"};
        fits_create_tbl(f, BINARY_TBL, 2, 5, ttype, tform, NULL, "AIPS SU", &status);
        int ids[2] = {1, 2};
        char *names[2] = {"3C273", "M87"};
        double ra[2] = {187.2779, 187.7059}, dec[2] = {2.0524, 12.3911}, epoch[2] = {2000, 2000};
        fits_write_col(f, TINT, 1, 1, 1, 2, ids, &status);
        fits_write_col(f, TSTRING, 2, 1, 1, 2, names, &status);
        fits_write_col(f, TDOUBLE, 3, 1, 1, 2, ra, &status);
        fits_write_col(f, TDOUBLE, 4, 1, 1, 2, dec, &status);
        fits_write_col(f, TDOUBLE, 5, 1, 1, 2, epoch, &status);
    }
    fits_close_file(f, &status);
    CHECK(status == 0, "cfitsio status %d writing %s", status, path);
}

/* The frequency of channel c (0-based) of IF i (0-based) of a synthetic file. */
static double synth_freq(const double *ch_width, int i, int c) {
    return 1e9 + (i ? 50e6 : 0.0) + c * (ch_width ? ch_width[i] : 1e6);
}

static void test_synthetic(void) {
    char dir[] = "/tmp/pk_uvsynth_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/s.uvfits", dir);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;

    /* Channel widths from the FQ table: IF 2 a lower sideband, its
     * frequency falling with the channel number. Without the column,
     * CDELT4 for both. */
    const double usb[SYNTH_IF] = {1e6, 1e6}, lsb[SYNTH_IF] = {1e6, -1e6}, wide[SYNTH_IF] = {1e6, 2e6};
    const double *widths[4] = {NULL, usb, lsb, wide};
    for (int t = 0; t < 4; t++) {
        synth o = {.ch_width = widths[t]};
        write_synth(path, &o);
        CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
        CHECK(vis.n == SYNTH_GROUPS * SYNTH_CHAN * SYNTH_IF, "widths %d: %zu visibilities", t, vis.n);
        size_t bad = 0;
        double mean = 0;
        for (long g = 1; g <= SYNTH_GROUPS && vis.n == SYNTH_GROUPS * SYNTH_CHAN * SYNTH_IF; g++)
            for (int i = 0; i < SYNTH_IF; i++)
                for (int c = 0; c < SYNTH_CHAN; c++) {
                    size_t k = (size_t)((g - 1) * SYNTH_IF * SYNTH_CHAN + i * SYNTH_CHAN + c);
                    double fr = synth_freq(widths[t], i, c);
                    bad += !close_rel(vis.u[k], synth_u(g) * fr, 1e-12) ||
                           !close_rel(vis.v[k], 2 * synth_u(g) * fr, 1e-12);
                    if (g == 1) mean += fr / (SYNTH_IF * SYNTH_CHAN);
                }
        CHECK(bad == 0, "widths %d: %zu visibilities off their channel's frequency", t, bad);
        CHECK(close_rel(vis.freq_hz, mean, 1e-15), "widths %d: freq_hz %.17g, the channels' mean %.17g", t, vis.freq_hz,
              mean);
        CHECK(strcmp(vis.date_obs, "2020-01-01T06:00:00") == 0, "DATE parameters: '%s'", vis.date_obs);
        pk_vis_free(&vis);
    }
    const double zero[SYNTH_IF] = {1e6, 0};
    synth oz = {.ch_width = zero};
    write_synth(path, &oz);
    expect_error(path, PK_WEIGHTS_DATA, "'CH WIDTH' of IF 2 is 0 for 4 channels", "CH WIDTH 0");

    /* u as the sum of two 'UU' parameters, as for DATE; two kinds refused */
    synth os = {.split_u = 1};
    write_synth(path, &os);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.n > 0 && close_rel(vis.u[0], synth_u(1) * 1e9, 1e-12) &&
              close_rel(vis.u[vis.n - 1], synth_u(SYNTH_GROUPS) * synth_freq(NULL, 1, 3), 1e-12),
          "u from two parts: %.17g against %.17g", vis.n ? vis.u[0] : 0.0, synth_u(1) * 1e9);
    pk_vis_free(&vis);
    synth ok = {.split_u = 1, .second_u_ptype = "UU"};
    write_synth(path, &ok);
    expect_error(path, PK_WEIGHTS_DATA, "two kinds of UU parameter", "UU and UU---SIN");

    /* the header's DATE-OBS without DATE parameters; the old dd/mm/yy form
     * left out */
    synth od = {.date_obs = "2021-03-04T05:06:07.5"};
    write_synth(path, &od);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(strcmp(vis.date_obs, "2021-03-04T05:06:07.5") == 0, "header DATE-OBS: '%s'", vis.date_obs);
    pk_vis_free(&vis);
    synth old = {.date_obs = "04/03/21"};
    write_synth(path, &old);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.date_obs[0] == '\0', "old-form DATE-OBS kept: '%s'", vis.date_obs);
    pk_vis_free(&vis);

    /* SOURCE: one source's phase centre and name from the SU table; two
     * sources refused */
    const double one_src[SYNTH_GROUPS] = {2, 2, 2, 2, 2}, two_src[SYNTH_GROUPS] = {2, 2, 1, 2, 2};
    synth o1 = {.source = one_src, .su_table = 1};
    write_synth(path, &o1);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.has_phase_centre && vis.ra0_deg == 187.7059 && vis.dec0_deg == 12.3911 && strcmp(vis.object, "M87") == 0,
          "source 2 from the SU table: %g %g '%s'", vis.ra0_deg, vis.dec0_deg, vis.object);
    pk_vis_free(&vis);
    synth o_wide = {.source = one_src, .su_table = 2}; /* a name wider than FITS values: the position alone */
    write_synth(path, &o_wide);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.ra0_deg == 187.7059 && strcmp(vis.object, "MULTI") == 0, "a 200-character SOURCE column: '%s'",
          vis.object);
    pk_vis_free(&vis);
    synth o2 = {.source = two_src, .su_table = 1};
    write_synth(path, &o2);
    expect_error(path, PK_WEIGHTS_DATA, "group 3: SOURCE = 1 where group 1 has 2: a multi-source file", "two sources");
    synth o3 = {.source = one_src};
    write_synth(path, &o3);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.ra0_deg == 0 && strcmp(vis.object, "MULTI") == 0, "no SU table: the header's centre, '%s'", vis.object);
    pk_vis_free(&vis);

    /* FREQSEL: the FQ row of the file's setup (IF 2 at +50 MHz in row 1,
     * +80 MHz in row 2), found by its FRQSEL id or, without that column,
     * by position; several setups refused */
    const double sel_2[SYNTH_GROUPS] = {2, 2, 2, 2, 2}, sel_mixed[SYNTH_GROUPS] = {2, 2, 2, 1, 2},
                 sel_3[SYNTH_GROUPS] = {3, 3, 3, 3, 3};
    const int ids_12[2] = {1, 2}, ids_21[2] = {2, 1}, ids_none[2] = {0, 0};
    struct {
        const double *sel;
        const int *ids;
        double if2_offset;
    } fq_cases[5] = {{sel_2, ids_12, 80e6},
                     {sel_2, ids_21, 50e6},
                     {NULL, ids_21, 80e6},
                     {sel_2, ids_none, 80e6},
                     {NULL, ids_12, 50e6}};
    for (int t = 0; t < 5; t++) {
        synth of = {.freqsel = fq_cases[t].sel, .n_fq_rows = 2, .fq_ids = fq_cases[t].ids};
        write_synth(path, &of);
        CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
        double f_last = 1e9 + fq_cases[t].if2_offset + 3e6; /* IF 2, channel 4 */
        CHECK(vis.n == SYNTH_GROUPS * SYNTH_CHAN * SYNTH_IF &&
                  close_rel(vis.u[vis.n - 1], synth_u(SYNTH_GROUPS) * f_last, 1e-12),
              "FQ case %d: u %.17g, expected %.17g", t, vis.n ? vis.u[vis.n - 1] : 0.0, synth_u(SYNTH_GROUPS) * f_last);
        pk_vis_free(&vis);
    }
    /* one row, of another id, and no FREQSEL parameter: the file's one setup */
    const int ids_2[1] = {2};
    synth o_one = {.n_fq_rows = 1, .fq_ids = ids_2};
    write_synth(path, &o_one);
    CHECK_OK(pk_vis_read(&ctx, path, PK_WEIGHTS_DATA, &vis), &ctx);
    CHECK(vis.n == SYNTH_GROUPS * SYNTH_CHAN * SYNTH_IF &&
              close_rel(vis.u[vis.n - 1], synth_u(SYNTH_GROUPS) * (1e9 + 50e6 + 3e6), 1e-12),
          "one FQ row of FRQSEL 2, no FREQSEL: u %.17g", vis.n ? vis.u[vis.n - 1] : 0.0);
    pk_vis_free(&vis);
    synth om = {.freqsel = sel_mixed, .n_fq_rows = 2, .fq_ids = ids_12};
    write_synth(path, &om);
    expect_error(path, PK_WEIGHTS_DATA, "group 4: FREQSEL = 1 where group 1 has 2: a file of several frequency setups",
                 "two setups");
    synth o_absent = {.freqsel = sel_3, .n_fq_rows = 2, .fq_ids = ids_12};
    write_synth(path, &o_absent);
    expect_error(path, PK_WEIGHTS_DATA, "none of its 2 rows has FRQSEL = 3", "no row of setup 3");
    synth o_absent2 = {.freqsel = sel_3, .n_fq_rows = 2, .fq_ids = ids_none};
    write_synth(path, &o_absent2);
    expect_error(path, PK_WEIGHTS_DATA, "no 'FRQSEL' column and no row 3 of 2", "no row 3");

    /* every weight 0: all flagged whatever the weights mode, and the
     * message says what the mode flags (abs and unit: only weight 0) */
    synth o_zero = {.zero_weights = 1};
    write_synth(path, &o_zero);
    expect_error(path, PK_WEIGHTS_DATA, "40 visibilities is flagged (data weights flag every weight <= 0); if the",
                 "zero weights, data");
    expect_error(path, PK_WEIGHTS_ABS, "40 visibilities is flagged (abs weights flag only weight 0)",
                 "zero weights, abs");
    expect_error(path, PK_WEIGHTS_UNIT, "40 visibilities is flagged (unit weights flag only weight 0)",
                 "zero weights, unit");
    CHECK(pk_vis_read(&ctx, path, PK_WEIGHTS_ABS, &vis) == PK_ERR_PARSE && !strstr(ctx.message, "<= 0") &&
              !strstr(ctx.message, "--weights"),
          "zero weights, abs: %s", ctx.message);

    /* no groups at all (GCOUNT = 0, which cfitsio will not write: one
     * group of zeros, its count edited): refused as such */
    {
        synth o_empty = {.zero_group = 1};
        write_synth(path, &o_empty);
        char empty[300];
        snprintf(empty, sizeof empty, "%s/empty.uvfits", dir);
        copy_with_card(path, empty, "GCOUNT", "0");
        expect_error(empty, PK_WEIGHTS_DATA, "GCOUNT = 0: no u, v, w parameters or no groups", "GCOUNT 0");
        unlink(empty);
    }

    /* a COMPLEX axis of 2: every visibility unflagged, weight 1, the value
     * as stored, under every weights mode */
    synth o_nw = {.no_weights = 1};
    write_synth(path, &o_nw);
    for (int wm = PK_WEIGHTS_DATA; wm <= PK_WEIGHTS_UNIT; wm++) {
        pk_status st = pk_vis_read(&ctx, path, (pk_weights)wm, &vis);
        CHECK_OK(st, &ctx);
        if (st) continue;
        size_t bad = 0;
        for (size_t k = 0; k < vis.n; k++) {
            double want_re = (double)(k % (SYNTH_CHAN * SYNTH_IF)) + 2.0;
            bad += vis.weight[k] != 1.0 || vis.re[k] != want_re || vis.im[k] != -0.5;
        }
        CHECK(vis.n == SYNTH_GROUPS * SYNTH_CHAN * SYNTH_IF && bad == 0 && vis.weight_sum == (double)vis.n,
              "no weights stored, %s weights: %zu visibilities, %zu off, weight sum %g",
              pk_weights_name((pk_weights)wm), vis.n, bad, vis.weight_sum);
        pk_vis_free(&vis);
    }

    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_mwa();
    test_mojave();
    test_eht();
    test_broken();
    test_frame();
    test_cancel();
    test_float64();
    test_message_stack();
    test_synthetic();
    return check_finish("test_dftimage_uvfits");
}
