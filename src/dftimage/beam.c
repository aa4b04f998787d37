/* beam.c - the beam of a point spread function: an elliptical Gaussian
 * fitted to the main lobe.
 *
 * P(x, y) = P0 exp(-(A x^2 + B x y + C y^2)) with x = l, y = m offsets
 * from the phase centre (radians) is a line in ln(P / P0): the three
 * coefficients come from weighted linear least squares over the main
 * lobe's pixels, with P0 the centre's value. The weights are P: the
 * logarithm magnifies the errors of faint pixels by 1 / P, so the bright
 * core counts most (P^2 would be the inverse variance for errors of equal
 * size in P; an exact Gaussian comes out the same either way). Along an eigenvector of
 * [[A, B/2], [B/2, C]] with eigenvalue e the profile is exp(-e t^2), half
 * its peak at t = sqrt(ln 2 / e): FWHM 2 sqrt(ln 2 / e), the major axis
 * the smaller eigenvalue's. The main lobe is the region reached from the
 * centre through 4-neighbours that never rise and stay at half of P0 or
 * more: its half-power core, which is what BMAJ and BMIN describe, without
 * sidelobes, ridges or a plateau (autocorrelations add a constant to the
 * whole beam) that a lower level or a plain flood fill would join to it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dftimage_internal.h"

#define LOBE_LEVEL 0.5

pk_status pk_dftimage_beam_fit(pk_context *ctx, const pk_image *psf, double *bmaj, double *bmin, double *bpa) {
    pk_clear(ctx);
    if (!bmaj || !bmin || !bpa)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_beam_fit: %s is NULL",
                       !bmaj   ? "bmaj"
                       : !bmin ? "bmin"
                               : "bpa");
    if (!psf || !psf->re || psf->n < 3 || !(psf->cell > 0))
        return pk_fail(ctx, PK_ERR_INVALID, "no beam to fit (an image of at least 3 x 3 pixels is needed)");
    const size_t n = psf->n, c = n / 2;
    const double p0 = psf->re[c * n + c];
    if (!(p0 > 0) || !isfinite(p0))
        return pk_fail(ctx, PK_ERR_INVALID, "the beam is %g at the phase centre: nothing to fit", p0);
    const double level = LOBE_LEVEL * p0;
    /* the main lobe by a flood fill from the centre */
    unsigned char *in = calloc(n * n, 1);
    size_t *stack = malloc(n * n * sizeof(size_t));
    if (!in || !stack) {
        free(in);
        free(stack);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the beam's main lobe");
    }
    size_t top = 0, count = 0;
    int edge = 0;
    stack[top++] = c * n + c;
    in[c * n + c] = 1;
    /* normal equations of ln(P / P0) = -(A x^2 + B x y + C y^2), weights P */
    double m[3][3] = {{0}}, r[3] = {0};
    while (top > 0) {
        size_t p = stack[--top], a = p % n, b = p / n;
        count++;
        if (a == 0 || b == 0 || a == n - 1 || b == n - 1) edge = 1;
        double x = ((double)a - (double)c) * psf->cell, y = ((double)b - (double)c) * psf->cell;
        double v = psf->re[p], wgt = v / p0, t = -log(v / p0);
        double f[3] = {x * x, x * y, y * y};
        for (int i = 0; i < 3; i++) {
            r[i] += wgt * f[i] * t;
            for (int j = 0; j < 3; j++) m[i][j] += wgt * f[i] * f[j];
        }
        const size_t next[4] = {a > 0 ? p - 1 : p, a + 1 < n ? p + 1 : p, b > 0 ? p - n : p, b + 1 < n ? p + n : p};
        for (int k = 0; k < 4; k++) {
            size_t q = next[k];
            if (!in[q] && psf->re[q] >= level && psf->re[q] <= v) {
                in[q] = 1;
                stack[top++] = q;
            }
        }
    }
    free(in);
    free(stack);
    if (edge)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "the beam's main lobe reaches the edge of the image: no beam fitted (a larger field, "
                       "more pixels or larger cells, --size or --cell, would hold it)");
    if (count < 5)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "the beam's main lobe is %zu pixel%s: cells of %g rad do not resolve it, no beam fitted", count,
                       count == 1 ? "" : "s", psf->cell);
    /* solve the 3 x 3 system by Cramer's rule (it is small and well scaled
     * once x, y are in cells) */
    double s = psf->cell * psf->cell; /* x^2 ~ s: rescale to cells */
    double mm[3][3], rr[3];
    for (int i = 0; i < 3; i++) {
        rr[i] = r[i] / s;
        for (int j = 0; j < 3; j++) mm[i][j] = m[i][j] / (s * s);
    }
    double det = mm[0][0] * (mm[1][1] * mm[2][2] - mm[1][2] * mm[2][1]) -
                 mm[0][1] * (mm[1][0] * mm[2][2] - mm[1][2] * mm[2][0]) +
                 mm[0][2] * (mm[1][0] * mm[2][1] - mm[1][1] * mm[2][0]);
    if (!(fabs(det) > 0) || !isfinite(det))
        return pk_fail(ctx, PK_ERR_INVALID, "the beam's main lobe gives no ellipse (a singular fit), no beam fitted");
    double sol[3];
    for (int k = 0; k < 3; k++) {
        double t[3][3];
        memcpy(t, mm, sizeof t);
        for (int i = 0; i < 3; i++) t[i][k] = rr[i];
        sol[k] =
            (t[0][0] * (t[1][1] * t[2][2] - t[1][2] * t[2][1]) - t[0][1] * (t[1][0] * t[2][2] - t[1][2] * t[2][0]) +
             t[0][2] * (t[1][0] * t[2][1] - t[1][1] * t[2][0])) /
            det;
    }
    /* per cell^2 back to per rad^2 */
    double A = sol[0] / s, B = sol[1] / s, C = sol[2] / s;
    double half = 0.5 * (A + C), diff = sqrt(0.25 * (A - C) * (A - C) + 0.25 * B * B);
    double e_small = half - diff, e_big = half + diff;
    if (!(e_small > 0) || !isfinite(e_big))
        return pk_fail(ctx, PK_ERR_INVALID, "the beam's main lobe is no ellipse (the fit opens along one axis)");
    *bmaj = 2.0 * sqrt(M_LN2 / e_small);
    *bmin = 2.0 * sqrt(M_LN2 / e_big);
    /* the major axis: the eigenvector of e_small, (x, y) = (l east, m
     * north); its angle from north towards east */
    double vx = B / 2.0, vy = e_small - A, wx = e_small - C, wy = B / 2.0;
    if (wx * wx + wy * wy > vx * vx + vy * vy) vx = wx, vy = wy; /* the better conditioned of the two */
    if (vx == 0 && vy == 0) vx = 0, vy = 1;                      /* a round beam: 0 */
    double pa = atan2(vx, vy) * 180.0 / M_PI;
    while (pa > 90.0) pa -= 180.0;
    while (pa <= -90.0) pa += 180.0;
    *bpa = pa;
    return PK_OK;
}
