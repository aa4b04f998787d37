/* plot_image.c - false-colour PNG previews of images through PLplot's
 * cairo driver: plimage with a cmap1 colour map (dark blue through red to
 * pale yellow), origin lower left, x increasing to the left, and a colour
 * bar. The file is drawn under a temporary name and renamed, so a failed
 * plot leaves no partial PNG. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "plot_image.h"
#include "cli.h"
#include "common/common.h"
#include "plot_guard.h"

#ifdef PK_HAVE_PLPLOT
#include <plplot.h>

/* What the image draws, fixed before PLplot starts. */
typedef struct image_draw {
    const char *tmp;
    const cli_image *img;
    PLFLT **columns;
    size_t n;
    double xlo, xhi, ylo, yhi, zmin, zmax;
} image_draw;

/* The drawing, with PLplot's fatal errors returned as 1 (plot_guard.h). */
static int draw_image(const image_draw *d) {
    if (!CLI_PLPLOT_TRY()) {
        cli_plplot_guard_end();
        return 1;
    }
    if (cli_plplot_open(d->tmp, 900, 800)) {
        cli_plplot_guard_end();
        return 1;
    }
    /* cmap1: dark blue, purple, red, orange, pale yellow */
    PLFLT pos[5] = {0.0, 0.25, 0.55, 0.8, 1.0};
    PLFLT r[5] = {0.0, 0.40, 0.85, 0.98, 1.0};
    PLFLT g[5] = {0.0, 0.05, 0.20, 0.60, 1.0};
    PLFLT bl[5] = {0.15, 0.50, 0.25, 0.05, 0.75};
    plscmap1n(256);
    plscmap1l(1, 5, pos, r, g, bl, NULL);
    /* a square viewport with room for the colour bar on the right */
    pladv(0);
    plvpas(0.13, 0.8, 0.1, 0.9, 1.0);       /* 0.13: the m label clears the left edge */
    plwind(d->xhi, d->xlo, d->ylo, d->yhi); /* x reversed: east (larger l) on the left */
    plimage((PLFLT_MATRIX)d->columns, (PLINT)d->n, (PLINT)d->n, d->xlo, d->xhi, d->ylo, d->yhi, d->zmin, d->zmax,
            d->xlo, d->xhi, d->ylo, d->yhi);
    plcol0(1);
    plbox("bcnst", 0.0, 0, "bcnstv", 0.0, 0);
    pllab(d->img->xlabel, d->img->ylabel, d->img->title);

    PLFLT bar_w, bar_h;
    PLINT label_opts[1] = {PL_COLORBAR_LABEL_BOTTOM};
    const char *labels[1] = {""};
    const char *axis_opts[1] = {"bcvtm"};
    PLFLT ticks[1] = {0.0};
    PLINT sub_ticks[1] = {0};
    PLINT n_values[1] = {2};
    PLFLT range[2] = {d->zmin, d->zmax};
    const PLFLT *values[1] = {range};
    plcolorbar(&bar_w, &bar_h, PL_COLORBAR_IMAGE | PL_COLORBAR_SHADE_LABEL, PL_POSITION_RIGHT, 0.03, 0.0, 0.04, 0.8, 0,
               1, 1, 0.0, 0.0, 0, 0.0, 1, label_opts, labels, 1, axis_opts, ticks, sub_ticks, n_values,
               (const PLFLT *const *)values);
    plend();
    cli_plplot_guard_end();
    return 0;
}

/* The PNG's image viewport is about 600 pixels wide: a larger image is
 * drawn as at most PREVIEW_CELLS cells a side (cli_image_preview).
 * Drawing every pixel of a 4000^2 image took ~12 s (docs/performance.md);
 * at 40000^2 the cells handed to PLplot alone would be 12.8 GB. */
#define PREVIEW_CELLS 1024

int cli_image_png(const char *cmd, const char *path, const char *shown, const cli_image *img) {
    const char *name = shown ? shown : path;
    size_t n = img->n;
    double zmin = (double)INFINITY, zmax = -(double)INFINITY;
    for (size_t p = 0; p < n * n; p++) {
        double v = img->values[p];
        if (!isfinite(v)) continue;
        if (v < zmin) zmin = v;
        if (v > zmax) zmax = v;
    }
    if (!(zmin <= zmax)) {
        fprintf(stderr, "pairkit %s: %s: nothing to plot (no finite values)\n", cmd, name);
        return 1;
    }
    if (zmax == zmin) { /* one value everywhere: in the middle of a range about it */
        double half_range = 0.5 * (fabs(zmin) > 1 ? fabs(zmin) : 1);
        zmin -= half_range;
        zmax += half_range;
    }
    /* PLplot draws nothing of a 1 x 1 image: its one pixel as 2 x 2 */
    size_t side = n < PREVIEW_CELLS ? n : PREVIEW_CELLS;
    double *reduced = malloc(side * side * sizeof(double));
    size_t r = reduced ? cli_image_preview(img->values, n, PREVIEW_CELLS, reduced) : 0;
    size_t m = r == 1 ? 2 : r;
    PLFLT **columns = malloc(m * sizeof(PLFLT *));
    PLFLT *cells = malloc(m * m * sizeof(PLFLT));
    if (!reduced || !columns || !cells) {
        free(reduced), free(columns), free(cells);
        fprintf(stderr, "pairkit %s: %s: out of memory for the plot\n", cmd, name);
        return 1;
    }
    for (size_t a = 0; a < m; a++) {
        columns[a] = cells + a * m;
        for (size_t b = 0; b < m; b++) columns[a][b] = reduced[(b % r) * r + a % r];
    }
    free(reduced);
    double half = 0.5 * img->dx;
    double xlo = img->x0 - half, xhi = img->x0 + (double)(n - 1) * img->dx + half;
    double ylo = img->y0 - half, yhi = img->y0 + (double)(n - 1) * img->dx + half;

    if (!cli_png_available()) {
        free(cells);
        free(columns);
        fprintf(stderr, "pairkit %s: %s: %s; no PNG written\n", cmd, name, cli_png_unavailable_reason());
        return 1;
    }
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".tmp%ld.png", (long)getpid());
    char *tmp = pk_sibling_name(path, suffix);
    if (!tmp) {
        free(columns), free(cells);
        fprintf(stderr, "pairkit %s: %s: out of memory for the image\n", cmd, name);
        return 1;
    }
    cli_note_scratch(tmp); /* removed should PLplot or a library under it crash */
    image_draw d = {tmp, img, columns, m, xlo, xhi, ylo, yhi, zmin, zmax};
    if (draw_image(&d)) {
        free(columns), free(cells);
        unlink(tmp);
        cli_note_scratch(NULL);
        free(tmp);
        fprintf(stderr, "pairkit %s: %s: PLplot failed: %s\n", cmd, name, cli_plplot_message);
        return 1;
    }
    free(columns), free(cells);

    int complete = cli_png_complete(tmp), ok = complete && rename(tmp, path) == 0;
    if (!ok) {
        char cut[128];
        snprintf(cut, sizeof cut, "the file was cut short (%s)", pk_write_failure_causes());
        const char *why = !complete ? cut : strerror(errno);
        unlink(tmp);
        fprintf(stderr, "pairkit %s: %s: could not write the PNG image: %s\n", cmd, name, why);
    }
    cli_note_scratch(NULL);
    free(tmp);
    return ok ? 0 : 1;
}

#else

int cli_image_png(const char *cmd, const char *path, const char *shown, const cli_image *image) {
    const char *name = shown ? shown : path;
    (void)image;
    fprintf(stderr, "pairkit %s: %s: this build has no PLplot; rebuild with libplplot-dev to get PNG images\n", cmd,
            name);
    return 1;
}

#endif
