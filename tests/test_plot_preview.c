/* test_plot_preview.c - the PNG preview's reduction of a large image
 * (cli_image_preview): every cell the value of largest magnitude in its
 * block, by brute force, for sizes that do and do not divide into the
 * blocks; point sources of either sign keep their peaks; a small image
 * passes through unchanged. And the w(theta) plot's choice of logarithmic
 * axes (cli_wtheta_axes) and its x axis' extent (cli_plot_x_extent). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "../tools/pairkit/plot_axes.h"
#include "../tools/pairkit/plot_image.h"

static void check_size(size_t n, size_t max_cells, check_rng *rng, int ties) {
    double *img = malloc(n * n * sizeof(double));
    size_t side = n < max_cells ? n : max_cells;
    double *cells = malloc(side * side * sizeof(double));
    if (!img || !cells) {
        CHECK(0, "out of memory");
        free(img), free(cells);
        return;
    }
    for (size_t p = 0; p < n * n; p++) img[p] = (double)(check_next(rng) >> 11) * 0x1p-53 * 2.0 - 1.0;
    /* ties: values of -2, -1, 1, 2 only, so that a block holds both signs
     * of its largest magnitude; the first in reading order is its value */
    if (ties)
        for (size_t p = 0; p < n * n; p++) img[p] = img[p] < -0.5 ? -2.0 : img[p] < 0 ? -1.0 : img[p] < 0.5 ? 1.0 : 2.0;
    /* two point sources, one negative, and a NaN beside the first */
    size_t pa = n * 2 / 3, pb = n / 5, qa = n - 1, qb = n - 1;
    int sources = n >= 3;
    if (sources) {
        img[pb * n + pa] = 1000.0;
        img[qb * n + qa] = -2000.0;
        img[pb * n + pa - 1] = (double)NAN;
    }
    size_t m = cli_image_preview(img, n, max_cells, cells);
    size_t k = n > max_cells ? (n + max_cells - 1) / max_cells : 1;
    CHECK(m == (n + k - 1) / k && m <= max_cells, "n=%zu: %zu cells a side (k %zu)", n, m, k);
    size_t bad = 0;
    for (size_t b = 0; b < m; b++)
        for (size_t a = 0; a < m; a++) {
            double best = (double)NAN;
            for (size_t y = b * k; y < (b + 1) * k && y < n; y++)
                for (size_t x = a * k; x < (a + 1) * k && x < n; x++) {
                    double v = img[y * n + x];
                    if (isfinite(v) && (isnan(best) || fabs(v) > fabs(best))) best = v;
                }
            double got = cells[b * m + a];
            if (!(got == best) && !(isnan(got) && isnan(best))) bad++;
        }
    CHECK(bad == 0, "n=%zu: %zu cells differ from their block's value of largest magnitude", n, bad);
    if (sources)
        CHECK(cells[(pb / k) * m + pa / k] == 1000.0 && cells[(qb / k) * m + qa / k] == -2000.0,
              "n=%zu: the point sources' peaks kept", n);
    if (k == 1) {
        int same = 1;
        for (size_t p = 0; p < n * n; p++)
            if (!(cells[p] == img[p]) && !(isnan(cells[p]) && isnan(img[p]))) same = 0;
        CHECK(same, "n=%zu: a small image passes unchanged", n);
    }
    printf("n=%-5zu max %-5zu -> %zu cells a side, blocks of %zu\n", n, max_cells, m, k);
    free(img), free(cells);
}

static void check_axes(const char *what, int log_bins, int from_file, const double *edges, size_t n_bins,
                       const double *w, size_t n, int want_x, int want_y) {
    int log_x = -1, log_y = -1;
    cli_wtheta_axes(log_bins, from_file, edges, n_bins, w, n, &log_x, &log_y);
    CHECK(log_x == want_x && log_y == want_y, "%s: log_x %d log_y %d, expected %d %d", what, log_x, log_y, want_x,
          want_y);
}

static void wtheta_axes(void) {
    const double lin_edges[] = {0, 0.5, 1.0, 1.5, 2.0};             /* from 0: never logarithmic */
    const double wide_edges[] = {0.001, 0.01, 0.1, 1.0, 10.0};      /* a factor of 10^4 */
    const double narrow_edges[] = {1.0, 2.0, 5.0, 20.0, 100.0};     /* exactly 100: not more than 100 */
    const double wide[] = {2.0, 0.8, 0.1, 0.02};                    /* positive, a factor of 100 */
    const double decade[] = {1.0, 0.5, 0.2, 0.1};                   /* exactly a decade */
    const double short_span[] = {1.0, 0.5, 0.2, 0.11};              /* under a decade */
    const double crosses[] = {0.5, 0.1, 0.01, -0.002};              /* one negative */
    const double zero[] = {0.5, 0.1, 0.01, 0.0};                    /* one zero */
    const double with_nan[] = {0.5, (double)NAN, 0.01, 0.002};      /* not a number */
    const double with_inf[] = {0.5, (double)INFINITY, 0.01, 0.002}; /* infinite */
    check_axes("log bins, positive w over two decades", 1, 0, wide_edges, 4, wide, 4, 1, 1);
    check_axes("log bins, w over exactly a decade", 1, 0, wide_edges, 4, decade, 4, 1, 1);
    check_axes("log bins, w over less than a decade", 1, 0, wide_edges, 4, short_span, 4, 1, 0);
    check_axes("log bins, a negative w", 1, 0, wide_edges, 4, crosses, 4, 1, 0);
    check_axes("log bins, a zero w", 1, 0, wide_edges, 4, zero, 4, 1, 0);
    check_axes("log bins, a NaN w", 1, 0, wide_edges, 4, with_nan, 4, 1, 0);
    check_axes("log bins, an infinite w", 1, 0, wide_edges, 4, with_inf, 4, 1, 0);
    check_axes("log bins, one point", 1, 0, wide_edges, 4, wide, 1, 1, 0);
    check_axes("log bins, no points", 1, 0, wide_edges, 4, wide, 0, 1, 0);
    check_axes("linear bins, positive w over two decades", 0, 0, lin_edges, 4, wide, 4, 0, 0);
    check_axes("edges from a file spanning 10^4", 0, 1, wide_edges, 4, wide, 4, 1, 1);
    check_axes("edges from a file spanning 10^4, w under a decade", 0, 1, wide_edges, 4, short_span, 4, 1, 0);
    check_axes("edges from a file spanning exactly 100", 0, 1, narrow_edges, 4, wide, 4, 0, 0);
    check_axes("edges from a file starting at 0", 0, 1, lin_edges, 4, wide, 4, 0, 0);
    check_axes("wide edges not from a file, linear bins", 0, 0, wide_edges, 4, wide, 4, 0, 0);
}

static void check_extent(const char *what, const double *x, size_t n, int log_x, double x_lo, double x_hi,
                         double want_min, double want_max) {
    double xmin = NAN, xmax = NAN;
    cli_plot_x_extent(x, n, log_x, x_lo, x_hi, &xmin, &xmax);
    CHECK(fabs(xmin - want_min) < 1e-12 && fabs(xmax - want_max) < 1e-12, "%s: x from %g to %g, expected %g to %g",
          what, xmin, xmax, want_min, want_max);
}

static void plot_x_extent(void) {
    const double x[] = {3.0, 1.5, 2.5}, lone[] = {4.0};
    check_extent("points", x, 3, 0, 100, 104, 1.5, 3.0);
    check_extent("one point", lone, 1, 0, 100, 104, 2.0, 6.0);
    check_extent("one point, log axis", lone, 1, 1, 100, 104, 3.5, 4.5);
    /* no point to draw (no bin with random pairs): the bins' span, not 0 .. 1 */
    check_extent("no points", x, 0, 0, 100, 104, 100, 104);
    check_extent("no points, log axis", x, 0, 1, 0.01, 10, -2, 1);
    check_extent("no points, no span", x, 0, 0, 0, 0, 0, 1);
    check_extent("no points, log axis from 0", x, 0, 1, 0, 10, 0, 1);
    check_extent("no points, one bin edge at 5", x, 0, 0, 5, 5, 0, 1);
}

int main(void) {
    wtheta_axes();
    plot_x_extent();
    check_rng rng = check_rng_make(20261130);
    const size_t sizes[][2] = {{1, 1024},    {7, 1024},    {1024, 1024}, {1025, 1024},
                               {2500, 1024}, {3000, 1024}, {100, 16},    {97, 10}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) check_size(sizes[s][0], sizes[s][1], &rng, 0);
    check_size(100, 16, &rng, 1);
    check_size(97, 10, &rng, 1);
    return check_finish("test_plot_preview");
}
