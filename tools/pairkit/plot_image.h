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

/* As cli_plot_png: 0 on success, else a message naming shown (NULL: path). */
int cli_image_png(const char *cmd, const char *path, const char *shown, const cli_image *image);

#endif
