/* test_dftimage_cli.c - `pairkit dftimage` end to end: a FITS image with
 * its WCS and a PNG, east on the left (a point source put east and north of
 * the centre lands left of and above it in the FITS array), --check, and
 * bad input: truncated and non-FITS files, a .npz without w, with arrays of
 * different lengths or with a NaN, an image too big for memory, bad
 * options. Every failure exits non-zero with a message naming the problem
 * and leaves no image, no temporary file, and an older image untouched.
 * Ctrl-C (SIGINT) stops a long run with exit code 130 and no output. */
#include <fitsio.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <zip.h>

#include "check.h"
#include "pairkit/dftimage.h"

static char dir[256], root[1024];

static const char *binary(void) {
    const char *p = getenv("PAIRKIT_CLI");
    return p ? p : "build/pairkit";
}

static const char *in_dir(const char *name) {
    static char buf[4][1400];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' dftimage %s > out.txt 2> err.txt", dir, binary(), args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    static char buf[65536];
    size_t got = fread(buf, 1, sizeof buf - 1, fp);
    buf[got] = '\0';
    fclose(fp);
    return buf;
}

static int count_files(const char *part) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, part)) n++;
    if (d) closedir(d);
    return n;
}

/* The first n pixels of the image in the scratch folder named name, and
 * the string keyword key into value (FLEN_VALUE) unless key is NULL:
 * cfitsio's status, 0 when all went well. */
static int read_image(const char *name, long n, float *pix, const char *key, char *value) {
    fitsfile *f;
    int status = 0, anynul;
    fits_open_file(&f, in_dir(name), READONLY, &status);
    if (key) fits_read_key(f, TSTRING, key, value, NULL, &status);
    fits_read_img_flt(f, 0, 1, n, 0.0f, pix, &anynul, &status);
    if (f) {
        int close_status = 0;
        fits_close_file(f, &close_status);
    }
    return status;
}

static void write_npz(const char *name, const pk_vis *vis) {
    pk_context ctx;
    pk_context_init(&ctx);
    CHECK_OK(pk_vis_write_npz(&ctx, in_dir(name), vis), &ctx);
}

/* A failing run: exit code, message, no new file, no temporary file. */
static void expect_failure(const char *args, const char *needle, const char *what) {
    FILE *fp = fopen(in_dir("old.fits"), "wb");
    fputs("an older image", fp);
    fclose(fp);
    int pngs = count_files(".png");
    int rc = run(args);
    char *err = slurp(in_dir("err.txt"));
    CHECK(rc != 0, "%s: exit code 0", what);
    CHECK(err && strstr(err, needle), "%s: stderr '%s' lacks '%s'", what, err ? err : "", needle);
    printf("%-28s rc %d: %s", what, rc, err ? err : "\n");
    CHECK(count_files(".png") == pngs, "%s: a PNG was written", what);
    CHECK(count_files(".tmp") == 0, "%s: a temporary file was left", what);
    char *old = slurp(in_dir("old.fits"));
    CHECK(old && strcmp(old, "an older image") == 0, "%s: the older image was touched", what);
}

static void test_good(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    /* One point source of flux 1 at l0 = 20 cells east, m0 = 10 cells north:
     * V = exp(-2 pi i (u l0 + v m0 + w n0')) images to a peak there with the
     * .npz sign +1. */
    const double cell = 0.001, l0 = 20 * cell, m0 = 10 * cell;
    const double n0 = sqrt(1 - l0 * l0 - m0 * m0) - 1;
    pk_vis vis;
    CHECK_OK(pk_vis_random(&ctx, 3000, 5, &vis), &ctx);
    for (size_t k = 0; k < vis.n; k++) {
        double ph = -2 * M_PI * (vis.u[k] * l0 + vis.v[k] * m0 + vis.w[k] * n0);
        vis.re[k] = cos(ph), vis.im[k] = sin(ph);
    }
    write_npz("point.npz", &vis);
    pk_vis_free(&vis);
    int rc = run("point.npz -o img.fits --png img.png --size 64 --cell 0.001 --check --imag");
    char *err = slurp(in_dir("err.txt"));
    CHECK(rc == 0, "good run: rc %d, %s", rc, err ? err : "");
    CHECK(err && strstr(err, "relative L2 error"), "--check reports the error: %s", err ? err : "");
    CHECK(count_files("img.png") == 1 && count_files(".tmp") == 0, "PNG written, no temporary files");
    printf("good run: %s", err ? err : "");
    /* the PNG by default, named after the image (where PLplot can draw it:
     * else a warning says so); none with --png none */
    rc = run("point.npz -o dflt.fits --size 16 --cell 0.001");
    err = slurp(in_dir("err.txt"));
    int drawn = count_files("dflt.png") == 1, warned = err && strstr(err, "no PNG plot") != NULL;
    CHECK(rc == 0 && drawn != warned, "default PNG: rc %d, drawn %d, warned %d: %s", rc, drawn, warned, err ? err : "");
    rc = run("point.npz -o nopng.fits --size 16 --cell 0.001 --png none");
    CHECK(rc == 0 && count_files("nopng") == 1, "--png none: rc %d, %d files named nopng*", rc, count_files("nopng"));
    /* an image larger than the preview's 1024 cells a side: drawn in
     * blocks, the PNG as large as any other (900 x 800) */
    {
        pk_vis few;
        CHECK_OK(pk_vis_random(&ctx, 20, 6, &few), &ctx);
        write_npz("few.npz", &few);
        pk_vis_free(&few);
        rc = run("few.npz -o wide.fits --size 2500 --cell 1e-4");
        err = slurp(in_dir("err.txt"));
        CHECK(rc == 0, "2500^2 image with its PNG: rc %d, %s", rc, err ? err : "");
        FILE *png = fopen(in_dir("wide.png"), "rb");
        if (png) {
            unsigned char h[24] = {0};
            size_t got = fread(h, 1, sizeof h, png);
            fclose(png);
            unsigned long w = (unsigned long)h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19];
            unsigned long hh = (unsigned long)h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23];
            CHECK(got == 24 && memcmp(h + 12, "IHDR", 4) == 0 && w == 900 && hh == 800,
                  "the 2500^2 image's PNG is %lu x %lu", w, hh);
        } else {
            CHECK(err && strstr(err, "no PNG"), "no PNG of the 2500^2 image, and no warning: %s", err ? err : "");
        }
    }

    /* a PNG that cannot be written fails the run before any output moves:
     * the older image stays, nothing staged is left */
    {
        FILE *keep = fopen(in_dir("keep.fits"), "w");
        if (keep) fputs("old image", keep), fclose(keep);
        rc = run("point.npz -o keep.fits --png nodir/x.png --size 16 --cell 0.001 -q");
        err = slurp(in_dir("err.txt"));
        CHECK(rc == 1 && err && strstr(err, "nodir/x.png: cannot write: the folder nodir does not exist"),
              "PNG in a missing folder: rc %d, %s", rc, err ? err : "");
        rc = run("point.npz -o keep.fits --png nodir/x.png --size 16 --cell 0.001");
        err = slurp(in_dir("err.txt"));
        CHECK(rc == 1 && err && !strstr(err, "kernel"), "PNG in a missing folder: refused before imaging: %s",
              err ? err : "");
        char *img = slurp(in_dir("keep.fits"));
        CHECK(img && strcmp(img, "old image") == 0, "the older image was changed");
        CHECK(count_files("pkstage") == 0 && count_files("pkkeep") == 0, "staged files left behind");
    }

    fitsfile *f;
    int status = 0, naxis = 0;
    long naxes[2] = {0, 0};
    fits_open_file(&f, in_dir("img.fits"), READONLY, &status);
    fits_get_img_dim(f, &naxis, &status);
    fits_get_img_size(f, 2, naxes, &status);
    CHECK(status == 0 && naxis == 2 && naxes[0] == 64 && naxes[1] == 64, "FITS 64 x 64 (status %d)", status);
    char ctype1[FLEN_VALUE] = "";
    double cdelt1 = 0, crpix1 = 0, crpix2 = 0;
    fits_read_key(f, TSTRING, "CTYPE1", ctype1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CDELT1", &cdelt1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CRPIX1", &crpix1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CRPIX2", &crpix2, NULL, &status);
    CHECK(strcmp(ctype1, "L") == 0 && cdelt1 < 0 && crpix1 == 32 && crpix2 == 33, "WCS of an npz image: %s %g %g %g",
          ctype1, cdelt1, crpix1, crpix2);
    float pix[64 * 64];
    int anynul;
    fits_read_img_flt(f, 0, 1, 64 * 64, 0.0f, pix, &anynul, &status);
    int best = 0;
    for (int p = 1; p < 64 * 64; p++)
        if (pix[p] > pix[best]) best = p;
    int col = best % 64, row = best / 64;
    /* east is left: grid column a = 32 + 20 is FITS column 63 - 52 = 11 */
    CHECK(col == 11 && row == 42, "the eastern, northern source is at FITS column %d row %d (expected 11, 42)", col,
          row);
    CHECK(fabs((double)pix[best] - 3000.0) < 0.01, "peak %.4f = the number of visibilities", (double)pix[best]);
    int hdus = 0;
    fits_get_num_hdus(f, &hdus, &status);
    CHECK(hdus == 2, "the imaginary part is a second HDU (%d HDUs)", hdus);
    fits_close_file(f, &status);
    CHECK(status == 0, "cfitsio status %d", status);

    /* UVFITS: celestial WCS about the phase centre. */
    char args[2048];
    snprintf(args, sizeof args, "'%s/data/vis/mojave.uvfits' -o vlba.fits --size 32 --cell 1e-9 -q", root);
    CHECK(run(args) == 0, "mojave image");
    status = 0;
    fits_open_file(&f, in_dir("vlba.fits"), READONLY, &status);
    double crval1 = 0, crval2 = 0, cdelt2 = 0;
    fits_read_key(f, TSTRING, "CTYPE1", ctype1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CRVAL1", &crval1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CRVAL2", &crval2, NULL, &status);
    fits_read_key(f, TDOUBLE, "CDELT1", &cdelt1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CDELT2", &cdelt2, NULL, &status);
    fits_read_key(f, TDOUBLE, "CRPIX1", &crpix1, NULL, &status);
    fits_read_key(f, TDOUBLE, "CRPIX2", &crpix2, NULL, &status);
    fits_close_file(f, &status);
    CHECK(status == 0 && strcmp(ctype1, "RA---SIN") == 0 && fabs(crval1 - 187.705930754) < 1e-9 &&
              fabs(crval2 - 12.3911232861) < 1e-9,
          "UVFITS WCS: %s %.9f %.9f", ctype1, crval1, crval2);
    /* 1e-9 rad cells in degrees, RA increasing to the left (east); the phase
     * centre, grid pixel (16, 16) of 32, is FITS pixel (32 - 16, 16 + 1) */
    const double cell_deg = 1e-9 * 180.0 / M_PI;
    CHECK(fabs(cdelt1 + cell_deg) < 1e-12 * cell_deg && fabs(cdelt2 - cell_deg) < 1e-12 * cell_deg && crpix1 == 16 &&
              crpix2 == 17,
          "UVFITS WCS: CDELT1 %.9g CDELT2 %.9g (want -/+ %.9g deg), CRPIX1 %g CRPIX2 %g (want 16, 17)", cdelt1, cdelt2,
          cell_deg, crpix1, crpix2);
}

static void test_bad(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "head -c 200000 '%s/data/vis/mojave.uvfits' > '%s/cut.uvfits'", root, dir);
    CHECK(system(cmd) == 0, "cut copy");
    expect_failure("cut.uvfits -o old.fits --size 16", "truncated", "truncated UVFITS");
    FILE *fp = fopen(in_dir("notes.uvfits"), "wb");
    fputs("these are notes, not visibilities\n", fp);
    fclose(fp);
    expect_failure("notes.uvfits -o old.fits --size 16", "neither", "not FITS");
    /* VLBA baselines (~2e8 wavelengths) at the default 0.0005 rad cells:
     * millions of turns across a float32 tile, refused before any work;
     * the same in float64 runs */
    snprintf(cmd, sizeof cmd, "'%s/data/vis/mojave.uvfits' -o old.fits --size 16", root);
    expect_failure(cmd, "--precision double", "float32 phases too long");
    snprintf(cmd, sizeof cmd, "'%s/data/vis/mojave.uvfits' -o vlba64.fits --size 16 --precision double -q", root);
    CHECK(run(cmd) == 0, "mojave at coarse cells in float64");

    /* the image named like its default PNG: refused, nothing replaced */
    snprintf(cmd, sizeof cmd, "'%s/data/vis/lesson_small.npz' -o old.png --size 16", root);
    expect_failure(cmd, "named for two outputs", "image and PNG under one name");
    /* a pipe as the image: refused before imaging, the pipe kept */
    snprintf(cmd, sizeof cmd, "mkfifo '%s'", in_dir("pipe.fits"));
    CHECK(system(cmd) == 0, "mkfifo");
    snprintf(cmd, sizeof cmd, "'%s/data/vis/lesson_small.npz' -o pipe.fits --size 16 --png none", root);
    expect_failure(cmd, "pipe.fits: is not a regular file", "a pipe as the image");
    struct stat sb;
    CHECK(lstat(in_dir("pipe.fits"), &sb) == 0 && S_ISFIFO(sb.st_mode), "the pipe was replaced");
    /* a compressed name for a plain FITS file, and --check-pixels without --check: refused */
    snprintf(cmd, sizeof cmd, "'%s/data/vis/lesson_small.npz' -o img.fits.gz --size 16", root);
    expect_failure(cmd, "the image is written as plain FITS", "-o NAME.gz");
    snprintf(cmd, sizeof cmd, "'%s/data/vis/lesson_small.npz' -o old.fits --size 16 --check-pixels 9", root);
    expect_failure(cmd, "--check-pixels sets how many pixels --check compares", "--check-pixels alone");
    /* an output that would replace the visibility file: refused */
    snprintf(cmd, sizeof cmd, "cp '%s/data/vis/lesson_small.npz' '%s/vis_copy.npz'", root, dir);
    CHECK(system(cmd) == 0, "copy");
    expect_failure("vis_copy.npz -o vis_copy.npz --size 16", "vis_copy.npz: is an input of this run",
                   "image over the input");
    expect_failure("vis_copy.npz -o old.fits --png ./vis_copy.npz --size 16",
                   "is an input of this run (as vis_copy.npz)", "PNG over the input");
    /* options that contradict each other or the file: refused, not ignored */
    snprintf(cmd, sizeof cmd,
             "'%s/data/vis/lesson_small.npz' -o old.fits --size 16 --kernel cpu-f64 --precision single", root);
    expect_failure(cmd, "--kernel cpu-f64 computes in double precision", "kernel against precision");
    snprintf(cmd, sizeof cmd, "'%s/data/vis/lesson_small.npz' -o old.fits --size 16 --weights abs", root);
    expect_failure(cmd, "has no weights", "--weights on a .npz");

    /* amplitudes beyond what float32 sums hold: refused before imaging,
     * naming the file, the visibility and the amplitudes (neither an
     * infinite image nor the PNG nor the baselines); float64 images them */
    {
        pk_vis big;
        CHECK_OK(pk_vis_random(&ctx, 100, 9, &big), &ctx);
        big.re[7] = 1e300;
        write_npz("huge.npz", &big);
        for (size_t k = 0; k < big.n; k++) big.re[k] = 3e38, big.im[k] = 0;
        write_npz("large.npz", &big);
        pk_vis_free(&big);
    }
    const char *huge_says = "huge.npz: visibility 7: V = 1e+300";
    expect_failure("huge.npz -o old.fits --size 16 --png none", huge_says, "one amplitude of 1e300");
    expect_failure("huge.npz -o old.fits --size 16", huge_says, "one amplitude of 1e300, PNG");
    expect_failure("huge.npz -o old.fits --size 16", "(--precision double)", "one amplitude of 1e300: advice");
    expect_failure("large.npz -o old.fits --size 16",
                   "large.npz: visibility 0: V = 3e+38+0i, the largest of the 100; "
                   "the amplitudes (weight times |V|) sum to 3e+40",
                   "every amplitude 3e38");
    {
        char *err = slurp(in_dir("err.txt"));
        CHECK(err && !strstr(err, "baselines") && !strstr(err, "nothing to plot"), "every amplitude 3e38: %s",
              err ? err : "");
    }
    {
        int rc = run("huge.npz -o huge64.fits --size 16 --png none --precision double -q");
        double pix[16 * 16];
        fitsfile *f;
        int status = 0, anynul;
        fits_open_file(&f, in_dir("huge64.fits"), READONLY, &status);
        fits_read_img_dbl(f, 0, 1, 16 * 16, 0.0, pix, &anynul, &status);
        int close_status = 0;
        if (f) fits_close_file(f, &close_status);
        double top = 0;
        for (int p = 0; p < 16 * 16 && status == 0; p++) top = fmax(top, fabs(pix[p]));
        CHECK(rc == 0 && status == 0 && isfinite(top) && top > 1e299, "one amplitude of 1e300 in float64: rc %d, %g",
              rc, top);
    }
    /* UVFITS: RR = LL = 3e38 in one group (float32 data, each in range) */
    {
        char path[1400], cmd2[3000];
        snprintf(path, sizeof path, "%s/loud.uvfits", dir);
        snprintf(cmd2, sizeof cmd2, "cp '%s/data/vis/mojave.uvfits' '%s'", root, path);
        CHECK(system(cmd2) == 0, "copy mojave");
        fitsfile *f;
        int status = 0;
        float loud = 3e38f;
        fits_open_file(&f, path, READWRITE, &status);
        fits_write_img_flt(f, 2, 1, 1, &loud, &status); /* group 2, IF 1: RR real part */
        fits_write_img_flt(f, 2, 4, 1, &loud, &status); /* LL real part */
        fits_close_file(f, &status);
        CHECK(status == 0, "cfitsio status %d", status);
        expect_failure("loud.uvfits -o old.fits --size 16 --cell 1e-9 --png none",
                       "loud.uvfits: visibility 1: V = 1.06e+41", "RR = LL = 3e38");
        CHECK(run("loud.uvfits -o loud64.fits --size 16 --cell 1e-9 --png none --precision double -q") == 0,
              "RR = LL = 3e38 in float64");
    }

    pk_vis vis;
    CHECK_OK(pk_vis_random(&ctx, 100, 9, &vis), &ctx);
    vis.re[41] = (double)NAN;
    write_npz("nan.npz", &vis);
    expect_failure("nan.npz -o old.fits --size 16", "data[41]", "NaN visibility");
    pk_vis_free(&vis);
    /* .npz files with one fault each, edited with libzip: w.npy replaced by
     * that of a shorter file, or removed. */
    CHECK_OK(pk_vis_random(&ctx, 100, 9, &vis), &ctx);
    write_npz("mismatch.npz", &vis);
    write_npz("now.npz", &vis);
    vis.n = 99;
    write_npz("short.npz", &vis);
    vis.n = 100;
    pk_vis_free(&vis);
    int zerr;
    zip_t *shorter = zip_open(in_dir("short.npz"), ZIP_RDONLY, &zerr);
    zip_t *target = zip_open(in_dir("mismatch.npz"), 0, &zerr);
    zip_source_t *src =
        shorter && target ? zip_source_zip(target, shorter, zip_name_locate(shorter, "w.npy", 0), 0, 0, -1) : NULL;
    CHECK(src && zip_file_add(target, "w.npy", src, ZIP_FL_OVERWRITE) >= 0, "replace w.npy");
    if (target) zip_close(target);
    if (shorter) zip_close(shorter);
    expect_failure("mismatch.npz -o old.fits --size 16", "differ in length", "npz arrays of two lengths");
    target = zip_open(in_dir("now.npz"), 0, &zerr);
    CHECK(target && zip_delete(target, zip_name_locate(target, "w.npy", 0)) == 0, "remove w.npy");
    if (target) zip_close(target);
    expect_failure("now.npz -o old.fits --size 16", "'w' is missing", "npz without w");
    expect_failure("missing.npz -o old.fits", "No such file", "no such file");
    expect_failure("point.npz -o old.fits --size 10000000", "memory", "image too big for memory");
    expect_failure("point.npz -o old.fits --size 100000000000", "does not fit", "image far too big");
    expect_failure("point.npz -o old.fits --sign 2", "--sign", "bad sign");
    expect_failure("point.npz -o old.fits --weights most", "--weights", "bad weights");
    expect_failure("point.npz -o old.fits --cell 0.01 --size 700", "beyond the sky", "field beyond the sky");
    snprintf(cmd, sizeof cmd, "'%s/data/vis/1133866760.uvfits' -o old.fits --size 16", root);
    expect_failure(cmd, "--weights abs", "MWA with data weights");
}

/* --weighting, --robust and --psf: the beam next to the image, written
 * with it or not at all, its keywords, and its peak at the centre. */
static void test_weighting_psf(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s/data/vis/1133866760.uvfits' --weights abs -o mwa.fits --psf mwa_psf.fits --size 33 --cell 2e-4 "
             "--weighting briggs --robust 0.5",
             root);
    int rc = run(cmd);
    char *err = slurp(in_dir("err.txt"));
    CHECK(rc == 0, "briggs image with its beam: rc %d, %s", rc, err ? err : "");
    CHECK(err && strstr(err, "briggs weighting (robust 0.5)") && strstr(err, "beam:") && strstr(err, "fitted beam") &&
              strstr(err, "arcmin"),
          "summary: %s", err ? err : "");
    printf("weighted run: %s", err ? err : "");
    int drawn = count_files("mwa.png") == 1;
    CHECK(count_files("mwa_psf.png") == drawn, "the beam's PNG goes with the image's (%d)", drawn);
    const char *names[2] = {"mwa.fits", "mwa_psf.fits"};
    for (int which = 0; which < 2; which++) {
        fitsfile *f;
        int status = 0;
        char btype[FLEN_VALUE] = "", weighting[FLEN_VALUE] = "", extname[FLEN_VALUE] = "";
        double robust = -9, weights = 0, bmaj = 0, bmin = 0, bpa = -999;
        fits_open_file(&f, in_dir(names[which]), READONLY, &status);
        fits_read_key(f, TSTRING, "BTYPE", btype, NULL, &status);
        fits_read_key(f, TSTRING, "WEIGHTNG", weighting, NULL, &status);
        fits_read_key(f, TSTRING, "EXTNAME", extname, NULL, &status);
        fits_read_key(f, TDOUBLE, "ROBUST", &robust, NULL, &status);
        fits_read_key(f, TDOUBLE, "WEIGHTS", &weights, NULL, &status);
        fits_read_key(f, TDOUBLE, "BMAJ", &bmaj, NULL, &status);
        fits_read_key(f, TDOUBLE, "BMIN", &bmin, NULL, &status);
        fits_read_key(f, TDOUBLE, "BPA", &bpa, NULL, &status);
        float pix[33 * 33];
        int anynul;
        fits_read_img_flt(f, 0, 1, 33 * 33, 0.0f, pix, &anynul, &status);
        fits_close_file(f, &status);
        CHECK(status == 0 && strcmp(weighting, "briggs") == 0 && robust == 0.5 && weights > 0,
              "%s: WEIGHTNG '%s', ROBUST %g, WEIGHTS %g (status %d)", names[which], weighting, robust, weights, status);
        /* the MWA snapshot's beam: a few arcmin (longest baselines 1475 wavelengths: 2.3 arcmin) */
        CHECK(bmaj * 60 > 2 && bmaj * 60 < 30 && bmin > 0 && bmin <= bmaj && bpa > -90 && bpa <= 90,
              "%s: BMAJ %g, BMIN %g deg, BPA %g", names[which], bmaj, bmin, bpa);
        if (which) {
            /* the phase centre is FITS pixel (33 - 16, 16) 0-based: column n - 1 - c */
            float centre = pix[16 * 33 + 16], top = pix[0];
            for (int p = 0; p < 33 * 33; p++) top = pix[p] > top ? pix[p] : top;
            CHECK(strcmp(btype, "dirty beam") == 0 && strcmp(extname, "PSF") == 0, "beam keywords: %s, %s", btype,
                  extname);
            CHECK(fabs((double)centre - 1.0) < 1e-5 && top == centre, "the beam peaks at 1 at the centre: %.7g, %.7g",
                  (double)centre, (double)top);
        } else {
            CHECK(strcmp(btype, "dirty image") == 0 && strcmp(extname, "REAL") == 0, "image keywords: %s, %s", btype,
                  extname);
        }
    }
    /* a beam the cells do not resolve: a warning, the outputs without BMAJ */
    snprintf(cmd, sizeof cmd,
             "'%s/data/vis/1133866760.uvfits' --weights abs -o coarse.fits --psf coarse_psf.fits "
             "--size 16 --cell 0.01 --png none",
             root);
    rc = run(cmd);
    err = slurp(in_dir("err.txt"));
    CHECK(rc == 0 && err && strstr(err, "warning: the beam's main lobe is 1 pixel") && !strstr(err, "fitted beam"),
          "an unresolved beam: rc %d, %s", rc, err ? err : "");
    {
        fitsfile *f;
        int status = 0, missing = 0;
        double bmaj;
        fits_open_file(&f, in_dir("coarse_psf.fits"), READONLY, &status);
        fits_read_key(f, TDOUBLE, "BMAJ", &bmaj, NULL, &missing);
        fits_close_file(f, &status);
        CHECK(status == 0 && missing == KEY_NO_EXIST, "no BMAJ without a fitted beam (status %d, %d)", status, missing);
    }
    /* --normalise: the image divided by WEIGHTS, BUNIT from the data's unit
     * (the EHT file's is JY), --check still on the sums */
    {
        const char *eht = "data/vis/SR1_M87_2017_101_lo_hops_netcal_StokesI.uvfits";
        snprintf(cmd, sizeof cmd, "'%s/%s' -o sum.fits --size 32 --cell 1e-11 --png none -q --imag", root, eht);
        CHECK(run(cmd) == 0, "EHT image");
        snprintf(cmd, sizeof cmd, "'%s/%s' -o mean.fits --size 32 --cell 1e-11 --png none --normalise --check --imag",
                 root, eht);
        rc = run(cmd);
        err = slurp(in_dir("err.txt"));
        CHECK(rc == 0 && err && strstr(err, "relative L2 error"), "normalised EHT image: rc %d, %s", rc,
              err ? err : "");
        fitsfile *f;
        int status = 0, anynul, missing = 0;
        float a[32 * 32], b[32 * 32];
        double wa = 0, wb = 0;
        char ua[FLEN_VALUE] = "", ub[FLEN_VALUE] = "", da[FLEN_VALUE] = "";
        fits_open_file(&f, in_dir("sum.fits"), READONLY, &status);
        fits_read_key(f, TDOUBLE, "WEIGHTS", &wa, NULL, &status);
        fits_read_key(f, TSTRING, "DATAUNIT", da, NULL, &status);
        fits_read_key(f, TSTRING, "BUNIT", ua, NULL, &missing);
        fits_read_img_flt(f, 0, 1, 32 * 32, 0.0f, a, &anynul, &status);
        fits_close_file(f, &status);
        fits_open_file(&f, in_dir("mean.fits"), READONLY, &status);
        fits_read_key(f, TDOUBLE, "WEIGHTS", &wb, NULL, &status);
        fits_read_key(f, TSTRING, "BUNIT", ub, NULL, &status);
        fits_read_img_flt(f, 0, 1, 32 * 32, 0.0f, b, &anynul, &status);
        fits_close_file(f, &status);
        double worst = 0, peak = 0;
        for (int p = 0; p < 32 * 32; p++) {
            worst = fmax(worst, fabs((double)b[p] - (double)a[p] / wa) / (fabs((double)a[p] / wa) + 1e-30));
            peak = fmax(peak, (double)b[p]);
        }
        CHECK(status == 0 && wa == wb && worst < 1e-6, "normalised = sum / WEIGHTS: worst %.3g (status %d)", worst,
              status);
        /* the imaginary part (extension IMAG) is divided by WEIGHTS too */
        {
            float ai[32 * 32], bi[32 * 32];
            int hdu_status = 0;
            fits_open_file(&f, in_dir("sum.fits"), READONLY, &hdu_status);
            fits_movabs_hdu(f, 2, NULL, &hdu_status);
            fits_read_img_flt(f, 0, 1, 32 * 32, 0.0f, ai, &anynul, &hdu_status);
            fits_close_file(f, &hdu_status);
            fits_open_file(&f, in_dir("mean.fits"), READONLY, &hdu_status);
            fits_movabs_hdu(f, 2, NULL, &hdu_status);
            fits_read_img_flt(f, 0, 1, 32 * 32, 0.0f, bi, &anynul, &hdu_status);
            fits_close_file(f, &hdu_status);
            double worst_im = 0, top_im = 0;
            for (int p = 0; p < 32 * 32; p++) {
                worst_im = fmax(worst_im, fabs((double)bi[p] - (double)ai[p] / wa));
                top_im = fmax(top_im, fabs((double)ai[p] / wa));
            }
            CHECK(hdu_status == 0 && top_im > 0 && worst_im <= 1e-6 * top_im,
                  "normalised imaginary part = sum / WEIGHTS: off by %.3g of %.3g (status %d)", worst_im, top_im,
                  hdu_status);
        }
        CHECK(strcmp(da, "JY") == 0 && missing == KEY_NO_EXIST && strcmp(ub, "Jy/beam") == 0,
              "units: data %s, sum's BUNIT %s (%d), normalised %s", da, ua, missing, ub);
        printf("EHT dirty image peak %.3f Jy/beam\n", peak);
        CHECK(peak > 0.1 && peak < 2, "the EHT image's peak, %.3g Jy/beam, is M87's compact flux", peak);
    }
    /* --minuv-l: the MWA file's 1,155 autocorrelations (105 tiles, 11
     * channels) left out, and with them the pedestal they add to every
     * pixel */
    snprintf(cmd, sizeof cmd,
             "'%s/data/vis/1133866760.uvfits' --weights abs -o autos.fits --size 16 --cell 0.01 --png none", root);
    rc = run(cmd);
    err = slurp(in_dir("err.txt"));
    CHECK(rc == 0 && err && strstr(err, "1155 of them at u = v = 0 (autocorrelations)") &&
              strstr(err, "--minuv-l 1 leaves them out"),
          "MWA with its autocorrelations, which the summary names: rc %d, %s", rc, err ? err : "");
    snprintf(cmd, sizeof cmd,
             "'%s/data/vis/1133866760.uvfits' --weights abs -o cross.fits --size 16 --cell 0.01 --png none "
             "--minuv-l 1",
             root);
    rc = run(cmd);
    err = slurp(in_dir("err.txt"));
    CHECK(rc == 0 && err && strstr(err, "60060 visibilities") && strstr(err, "1155 outside the baseline range") &&
              !strstr(err, "u = v = 0"),
          "--minuv-l 1: rc %d, %s", rc, err ? err : "");
    {
        float a[16 * 16], b[16 * 16];
        int status =
            read_image("autos.fits", 16 * 16, a, NULL, NULL) | read_image("cross.fits", 16 * 16, b, NULL, NULL);
        double mean_a = 0, mean_b = 0;
        for (int p = 0; p < 16 * 16; p++) mean_a += (double)a[p] / 256, mean_b += (double)b[p] / 256;
        printf("MWA image mean: %.4g with autocorrelations, %.4g without\n", mean_a, mean_b);
        CHECK(status == 0 && mean_a > 1e9 && fabs(mean_b) < 0.01 * mean_a, "the pedestal: %.4g, then %.4g", mean_a,
              mean_b);
    }
    /* only u = v = 0 is an autocorrelation: a north-south baseline (u = 0)
     * or an east-west one (v = 0) is not counted */
    {
        pk_context ctx;
        pk_context_init(&ctx);
        pk_vis few;
        CHECK_OK(pk_vis_random(&ctx, 40, 8, &few), &ctx);
        few.u[3] = 0;                       /* v != 0 */
        few.v[5] = 0;                       /* u != 0 */
        few.u[7] = few.v[7] = few.w[7] = 0; /* the one autocorrelation */
        write_npz("axes.npz", &few);
        pk_vis_free(&few);
        rc = run("axes.npz -o axes.fits --size 16 --cell 0.001 --png none");
        err = slurp(in_dir("err.txt"));
        CHECK(rc == 0 && err && strstr(err, "\n1 of them at u = v = 0 (autocorrelations)"),
              "one autocorrelation among baselines on the axes: rc %d, %s", rc, err ? err : "");
    }
    /* uniform weighting changes the image (and natural is the default) */
    snprintf(cmd, sizeof cmd, "'%s/data/vis/1133866760.uvfits' --weights abs -o nat.fits --size 33 --cell 2e-4 -q",
             root);
    CHECK(run(cmd) == 0, "natural image");
    snprintf(cmd, sizeof cmd,
             "'%s/data/vis/1133866760.uvfits' --weights abs -o uni.fits --size 33 --cell 2e-4 -q --weighting uniform",
             root);
    CHECK(run(cmd) == 0, "uniform image");
    {
        float a[33 * 33], b[33 * 33];
        char wa[FLEN_VALUE] = "", wb[FLEN_VALUE] = "";
        int status =
            read_image("nat.fits", 33 * 33, a, "WEIGHTNG", wa) | read_image("uni.fits", 33 * 33, b, "WEIGHTNG", wb);
        CHECK(status == 0 && strcmp(wa, "natural") == 0 && strcmp(wb, "uniform") == 0, "WEIGHTNG %s, %s", wa, wb);
        CHECK(memcmp(a, b, sizeof a) != 0, "uniform and natural images differ");
    }
    /* bad options and names: refused, nothing written */
    static const struct {
        const char *options, *needle, *what;
    } bad[] = {
        {"--minuv-l 5 --maxuv-l 2", "--maxuv-l 2 is shorter than --minuv-l 5", "maxuv below minuv"},
        {"--minuv-l -1", "--minuv-l must be a length >= 0", "negative minuv"},
        {"--minuv-l 1e9", "no visibility has a baseline", "no baseline in range"},
        {"--robust 0", "--robust is the robustness of --weighting briggs", "--robust without briggs"},
        {"--weighting robust", "--weighting: 'robust' is not natural, uniform or briggs", "unknown weighting"},
        {"--weighting briggs --robust 9", "--robust must lie in [-5, 5]", "robust out of range"},
        {"--robust 1x --weighting briggs", "--robust", "robust not a number"},
        {"--psf beam.fits.gz", "--psf beam.fits.gz: the image is written as plain FITS", "--psf NAME.gz"},
        {"--psf old.fits", "named for two outputs", "image and beam under one name"},
        {"--psf nodir/beam.fits", "nodir", "beam in a missing folder"},
        {"--gpu-memory 0", "--gpu-memory must be a number of GiB > 0", "no GPU memory"},
        {"--gpu-memory 2G", "--gpu-memory expects a number", "GPU memory with a unit"},
        {"--gpu-memory 1e9", "and at most 1e6, got '1e9'", "GPU memory beyond the limit"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(cmd, sizeof cmd, "'%s/data/vis/lesson_small.npz' -o old.fits --size 16 %s", root, bad[k].options);
        expect_failure(cmd, bad[k].needle, bad[k].what);
    }
    CHECK(count_files("beam") == 0, "no beam written");
}

/* Ctrl-C during a long CPU run: exit 130, nothing written. */
static void test_interrupt(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    CHECK_OK(pk_vis_random(&ctx, 400000, 11, &vis), &ctx);
    write_npz("long.npz", &vis);
    pk_vis_free(&vis);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(99);
        freopen("err.txt", "w", stderr);
        signal(SIGINT, SIG_DFL); /* as a terminal's job has it, whatever this test inherited */
        execl(binary(), binary(), "dftimage", "long.npz", "-o", "long.fits", "--png", "long.png", "--backend", "cpu",
              "--precision", "double", "--size", "700", (char *)NULL);
        _exit(98);
    }
    usleep(1500000);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char *err = slurp(in_dir("err.txt"));
    printf("interrupted run: rc %d, %s", rc, err ? err : "\n");
    CHECK(rc == 130, "Ctrl-C: exit code %d, expected 130", rc);
    CHECK(count_files("long.fits") == 0 && count_files("long.png") == 0 && count_files(".tmp") == 0,
          "Ctrl-C left output behind");
}

int main(void) {
    if (!getcwd(root, sizeof root)) return 1;
    snprintf(dir, sizeof dir, "/tmp/pk_dftcli_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_good();
    test_bad();
    test_weighting_psf();
    test_interrupt();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_finish("test_dftimage_cli");
}
