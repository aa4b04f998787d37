/* plot_axes.c - which axes of the w(theta) plot are logarithmic
 * (plot_axes.h). */
#include "plot_axes.h"

#include <math.h>

void cli_wtheta_axes(int log_bins, int edges_from_file, const double *edges, size_t n_bins, const double *w, size_t n,
                     int *log_x, int *log_y) {
    *log_x = log_bins || (edges_from_file && n_bins > 0 && edges[0] > 0 && edges[n_bins] / edges[0] > 100);
    double w_min = INFINITY, w_max = 0;
    int all_positive = n > 1;
    for (size_t k = 0; k < n; k++) {
        if (!(w[k] > 0) || !isfinite(w[k])) all_positive = 0;
        if (w[k] < w_min) w_min = w[k];
        if (w[k] > w_max) w_max = w[k];
    }
    *log_y = *log_x && all_positive && w_max >= 10 * w_min;
}

void cli_plot_x_extent(const double *x, size_t n, int log_x, double x_lo, double x_hi, double *xmin, double *xmax) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < n; k++) {
        if (x[k] < lo) lo = x[k];
        if (x[k] > hi) hi = x[k];
    }
    if (n == 0) {
        int usable = isfinite(x_lo) && isfinite(x_hi) && x_lo < x_hi && (!log_x || x_lo > 0);
        lo = !usable ? 0 : log_x ? log10(x_lo) : x_lo;
        hi = !usable ? 1 : log_x ? log10(x_hi) : x_hi;
    }
    if (hi == lo) {
        double half = log_x || lo == 0 ? 0.5 : 0.5 * fabs(lo);
        lo -= half, hi += half;
    }
    *xmin = lo, *xmax = hi;
}
