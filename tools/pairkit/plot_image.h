/* plot_image.h - a false-colour PNG of an image (PLplot), for dftimage. */
#ifndef PAIRKIT_PLOT_IMAGE_H
#define PAIRKIT_PLOT_IMAGE_H

#include <stddef.h>

/* An n x n image, values[b * n + a], pixel (a, b) at x = x0 + a dx,
 * y = y0 + b dx (world units, e.g. arcseconds). Drawn with the origin at
 * the lower left and x increasing to the LEFT (east left, as on the sky),
 * a colour map from the minimum to the maximum, axis labels and a title.
 * Written under a temporary name and renamed: no partial PNG is left.
 * 0 on success; on failure prints a message and returns non-zero. */
typedef struct cli_image {
    const char *title, *xlabel, *ylabel;
    const double *values;
    size_t n;
    double x0, y0, dx;
} cli_image;

/* The image as the preview draws it: n x n values reduced to m x m cells
 * (returned), m <= max_cells, each cell the value of largest magnitude in
 * its block of k x k pixels (k = ceil(n / max_cells); the last blocks of a
 * row or column may be partial), so that a point source keeps its peak
 * and the colour bar its range; n <= max_cells (or max_cells 0): the image
 * itself. cells[b * m + a] holds the block of pixels (a k.., b k..); it
 * has room for min(n, max_cells)^2 values. Non-finite values are passed
 * over (a block of nothing else is NaN). */
size_t cli_image_preview(const double *values, size_t n, size_t max_cells, double *cells);

/* As cli_plot_png: 0 on success, else a message naming shown (NULL: path). */
int cli_image_png(const char *cmd, const char *path, const char *shown, const cli_image *image);

#endif
