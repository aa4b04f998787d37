/* plot_axes.h - which axes of the w(theta) plot are logarithmic. */
#ifndef PAIRKIT_PLOT_AXES_H
#define PAIRKIT_PLOT_AXES_H

#include <stddef.h>

/* theta is drawn on a logarithmic axis for logarithmic bins (log_bins),
 * and for bin edges read from a file (edges_from_file) that start above
 * zero and span more than a factor of 100 (edges[0] .. edges[n_bins]).
 * w is drawn on one too, as small-scale w(theta) is usually shown, where
 * theta is, every one of the n plotted w (two or more) is positive, so
 * that every point can be drawn, and they span a decade or more. *log_x
 * and *log_y are set to 0 or 1. */
void cli_wtheta_axes(int log_bins, int edges_from_file, const double *edges, size_t n_bins, const double *w, size_t n,
                     int *log_x, int *log_y);

/* The x axis' extent before padding, on its own scale (log10 of the
 * values on a logarithmic axis, log_x), for the n points x[] drawn (on
 * that scale too): from the least to the greatest. With none drawn, the
 * span [x_lo, x_hi] (values, not logarithms; for w(theta), the bins'
 * range), or 0 .. 1 where that is empty or, on a logarithmic axis, not
 * above 0. An extent of one value is widened about it by half the value
 * (0.5 on a logarithmic axis or about 0), so that an angle stays > 0. */
void cli_plot_x_extent(const double *x, size_t n, int log_x, double x_lo, double x_hi, double *xmin, double *xmax);

#endif
