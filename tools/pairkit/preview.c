/* preview.c - an image reduced for its PNG preview (plot_image.h). */
#include <math.h>

#include "plot_image.h"

size_t cli_image_preview(const double *values, size_t n, size_t max_cells, double *cells) {
    size_t k = max_cells && n > max_cells ? (n + max_cells - 1) / max_cells : 1;
    size_t m = (n + k - 1) / k;
    if (k == 1) {
        for (size_t p = 0; p < n * n; p++) cells[p] = values[p];
        return m;
    }
    for (size_t p = 0; p < m * m; p++) cells[p] = (double)NAN;
    for (size_t row = 0; row < n; row++) { /* rows in order: the image is read once, sequentially */
        const double *v = values + row * n;
        double *out = cells + (row / k) * m;
        for (size_t a = 0; a < m; a++)
            for (size_t x = a * k; x < (a + 1) * k && x < n; x++)
                if (isfinite(v[x]) && !(fabs(v[x]) <= fabs(out[a]))) out[a] = v[x];
    }
    return m;
}
