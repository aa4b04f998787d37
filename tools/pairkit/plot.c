/* plot.c - PNG plots through PLplot's cairo driver (axes, ticks, labels,
 * error bars). The file is drawn under a temporary name and renamed, so a
 * failed plot leaves no partial PNG. */

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli.h"
#include "plot_axes.h"
#include "common/common.h"
#include "plot_guard.h"

#ifdef PK_HAVE_PLPLOT
#include <plplot.h>

jmp_buf cli_plplot_escape;
char cli_plplot_message[256];

/* PLplot's exit handler: back to the CLI_PLPLOT_TRY instead of exit(). */
static int escape_exit(PLCHAR_VECTOR message) {
    snprintf(cli_plplot_message, sizeof cli_plplot_message, "%s", message ? message : "");
    longjmp(cli_plplot_escape, 1);
}

void cli_plplot_guard_begin(void) {
    plsexit(escape_exit);
}

void cli_plplot_guard_end(void) {
    plsexit(NULL);
}

int cli_plplot_open(const char *path, int w, int h) {
    /* PLplot reads "%n" in a file name as the member number of a family
     * of files (w%n.png would become w1.png, or fail), so the file is
     * opened here and handed over; PLplot closes it in plend */
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        snprintf(cli_plplot_message, sizeof cli_plplot_message, "cannot create %s: %s", path, strerror(errno));
        return 1;
    }
    plsdev("pngcairo");
    plsfile(fp);
    plspage(0.0, 0.0, w, h, 0, 0);
    plscolbg(255, 255, 255);
    plinit();
    plscol0(1, 0, 0, 0);
    plcol0(1);
    return 0;
}

static char png_unavailable[512]; /* why not, once cli_png_available has said 0 */

const char *cli_png_unavailable_reason(void) {
    return png_unavailable[0] ? png_unavailable : "PLplot's cairo driver is missing here";
}

int cli_png_available(void) {
    static volatile int known = -1;
    if (known >= 0) return known;
    /* PLplot asks on the terminal for another device when the one named
     * is missing, and exits when it finds no driver at all: read its list
     * first, with its exit turned into a return */
    static const char *menu[256], *names[256];
    const char **m = menu, **d = names;
    int n = 256;
    known = 0;
    /* PLplot prints its own complaint ("Could not open drivers directory")
     * before giving up: the caller says what it means, so stderr is closed
     * to PLplot for the look */
    fflush(stderr);
    int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
    if (saved >= 0 && devnull >= 0) dup2(devnull, 2);
    if (CLI_PLPLOT_TRY()) {
        plgDevs(&m, &d, &n);
        for (int k = 0; k < n && names[k]; k++)
            if (strcmp(names[k], "pngcairo") == 0) known = 1;
        if (!known)
            snprintf(png_unavailable, sizeof png_unavailable,
                     "PLplot did not offer its cairo driver (not installed: apt-get install plplot-driver-cairo; "
                     "or not loadable here, as with no file descriptor left)");
    } else {
        /* PLplot gave up before it could list its drivers: not a missing
         * package (a working folder that is gone, no descriptor left) */
        snprintf(png_unavailable, sizeof png_unavailable, "PLplot could not list its drivers: %s%s",
                 cli_plplot_message[0] ? cli_plplot_message : "no reason given",
                 strstr(cli_plplot_message, "No device drivers") ? " (apt-get install plplot-driver-cairo)" : "");
    }
    cli_plplot_guard_end();
    fflush(stderr);
    if (saved >= 0 && devnull >= 0) dup2(saved, 2);
    if (saved >= 0) close(saved);
    if (devnull >= 0) close(devnull);
    return known;
}

/* What the plot draws, fixed before PLplot starts. */
typedef struct plot_draw {
    const char *tmp, *title;
    const cli_plot *plot;
    double xmin, xmax, ymin, ymax, xpad, ypad;
    size_t n;
    const double *x, *y, *ylo, *yhi;
} plot_draw;

/* The drawing, with PLplot's fatal errors returned as 1 (plot_guard.h). */
static int draw_plot(const plot_draw *d) {
    if (!CLI_PLPLOT_TRY()) {
        cli_plplot_guard_end();
        return 1;
    }
    const cli_plot *plot = d->plot;
    if (cli_plplot_open(d->tmp, 1000, 650)) {
        cli_plplot_guard_end();
        return 1;
    }
    int axis = (plot->log_x ? 10 : 0) + (plot->log_y ? 20 : 0);
    plenv(d->xmin - d->xpad, d->xmax + d->xpad, d->ymin - d->ypad, d->ymax + d->ypad, 0, axis);
    pllab(plot->xlabel, plot->ylabel, d->title);
    if (!plot->log_y && d->ymin < 0 && d->ymax > 0) {
        plscol0(2, 160, 160, 160);
        plcol0(2);
        double zx[2] = {d->xmin - d->xpad, d->xmax + d->xpad}, zy[2] = {0, 0};
        plline(2, zx, zy);
    }
    plscol0(3, 31, 119, 180);
    plcol0(3);
    if (d->n) {
        plline((PLINT)d->n, d->x, d->y);
        plpoin((PLINT)d->n, d->x, d->y, 17);
        if (plot->yerr) plerry((PLINT)d->n, d->x, d->ylo, d->yhi);
    }
    plend();
    cli_plplot_guard_end();
    return 0;
}

int cli_plot_png(const char *cmd, const char *path, const char *shown, const cli_plot *plot) {
    const char *name = shown ? shown : path;
    size_t n = 0;
    double *x = malloc((plot->n + 1) * sizeof(double));
    double *y = malloc((plot->n + 1) * sizeof(double));
    double *ylo = malloc((plot->n + 1) * sizeof(double));
    double *yhi = malloc((plot->n + 1) * sizeof(double));
    if (!x || !y || !ylo || !yhi) {
        free(x), free(y), free(ylo), free(yhi);
        fprintf(stderr, "pairkit %s: %s: out of memory for the plot\n", cmd, name);
        return 1;
    }
    double xmin, xmax, ymin = (double)INFINITY, ymax = -(double)INFINITY;
    for (size_t k = 0; k < plot->n; k++) {
        double xv = plot->x[k], yv = plot->y[k];
        double e = plot->yerr ? plot->yerr[k] : 0;
        if (!isfinite(xv) || !isfinite(yv) || (plot->log_x && xv <= 0) || (plot->log_y && yv <= 0)) continue;
        double lo = yv - (isfinite(e) ? e : 0), hi = yv + (isfinite(e) ? e : 0);
        if (plot->log_y && lo <= 0) lo = yv;
        x[n] = plot->log_x ? log10(xv) : xv;
        y[n] = plot->log_y ? log10(yv) : yv;
        ylo[n] = plot->log_y ? log10(lo) : lo;
        yhi[n] = plot->log_y ? log10(hi) : hi;
        if (ylo[n] < ymin) ymin = ylo[n];
        if (yhi[n] > ymax) ymax = yhi[n];
        n++;
    }
    /* nothing finite (no pair in any bin): empty axes over the span the
     * caller gives (the bins'), saying so, rather than no plot beside a
     * fresh output */
    char title[256];
    snprintf(title, sizeof title, "%s%s", plot->title, n ? "" : " (no finite values)");
    cli_plot_x_extent(x, n, plot->log_x, plot->x_lo, plot->x_hi, &xmin, &xmax);
    if (n == 0) ymin = -1, ymax = 1;
    if (ymax == ymin) ymin -= 0.5, ymax += 0.5;
    double xpad = 0.02 * (xmax - xmin), ypad = 0.05 * (ymax - ymin);
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".tmp%ld.png", (long)getpid());
    char *tmp = pk_sibling_name(path, suffix);
    if (!tmp) {
        free(x), free(y), free(ylo), free(yhi);
        fprintf(stderr, "pairkit %s: %s: out of memory for the plot\n", cmd, name);
        return 1;
    }

    if (!cli_png_available()) {
        free(x), free(y), free(ylo), free(yhi);
        free(tmp);
        fprintf(stderr, "pairkit %s: %s: %s; no PNG written\n", cmd, name, cli_png_unavailable_reason());
        return 1;
    }
    cli_note_scratch(tmp); /* removed should PLplot or a library under it crash */
    plot_draw d = {tmp, title, plot, xmin, xmax, ymin, ymax, xpad, ypad, n, x, y, ylo, yhi};
    if (draw_plot(&d)) {
        free(x), free(y), free(ylo), free(yhi);
        unlink(tmp);
        cli_note_scratch(NULL);
        free(tmp);
        fprintf(stderr, "pairkit %s: %s: PLplot failed: %s\n", cmd, name, cli_plplot_message);
        return 1;
    }
    free(x), free(y), free(ylo), free(yhi);

    int complete = cli_png_complete(tmp), ok = complete && rename(tmp, path) == 0;
    if (!ok) {
        char cut[128];
        snprintf(cut, sizeof cut, "the file was cut short (%s)", pk_write_failure_causes());
        const char *why = !complete ? cut : strerror(errno);
        unlink(tmp);
        fprintf(stderr, "pairkit %s: %s: could not write the PNG plot: %s\n", cmd, name, why);
    }
    cli_note_scratch(NULL);
    free(tmp);
    return ok ? 0 : 1;
}

#else

int cli_png_available(void) {
    return 0;
}

const char *cli_png_unavailable_reason(void) {
    return "this build has no PLplot";
}

int cli_plot_png(const char *cmd, const char *path, const char *shown, const cli_plot *plot) {
    const char *name = shown ? shown : path;
    (void)plot;
    fprintf(stderr, "pairkit %s: %s: this build has no PLplot; rebuild with libplplot-dev to get PNG plots\n", cmd,
            name);
    return 1;
}

#endif
