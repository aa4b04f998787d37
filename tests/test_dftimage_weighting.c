/* test_dftimage_weighting.c - imaging weights and the point spread function.
 *
 * pk_vis_weighting against a reference written here another way (the
 * visibilities sorted by their folded uv cell and summed group by group,
 * where the library hashes): every cell's uniform weights sum to 1, Briggs
 * weights follow the formula with f^2 from sum_k w_k W(k) (= the sum of
 * the cells' squared weights), the robust limits approach natural and
 * uniform, (u, v) and (-u, -v) share a cell (halves included), enough
 * distinct cells to grow the table many times, and bad arguments.
 * pk_dftimage_psf against the float64 reference on the weights, every
 * CPU kernel, random data, and the MWA file: 1 at the phase centre, and
 * uniform weighting's main lobe narrower than natural's. The beam's
 * Gaussian fit (pk_dftimage_beam_fit): exact Gaussians at any position
 * angle, a sidelobe ring left out, lobes wider than the field or narrower
 * than a cell refused, and the position angle of a beam from a stretched
 * uv plane. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fitsio.h>

#include "check.h"
#include "pairkit/dftimage.h"

static double normal(check_rng *r) {
    double a = check_uniform(r) + 1e-300, b = check_uniform(r);
    return sqrt(-2.0 * log(a)) * cos(2.0 * M_PI * b);
}

static void random_vis(check_rng *r, size_t n, double uv_sigma, pk_vis *vis) {
    pk_context ctx;
    pk_context_init(&ctx);
    CHECK_OK(pk_vis_alloc(&ctx, n, vis), &ctx);
    vis->weight_sum = 0;
    for (size_t k = 0; k < n; k++) {
        vis->u[k] = uv_sigma * normal(r);
        vis->v[k] = uv_sigma * normal(r);
        vis->w[k] = 0.1 * uv_sigma * normal(r);
        vis->weight[k] = 0.25 + 2.0 * check_uniform(r);
        vis->re[k] = vis->weight[k] * normal(r);
        vis->im[k] = vis->weight[k] * normal(r);
        vis->weight_sum += vis->weight[k];
    }
    vis->sign = 1;
}

static pk_vis copy_vis(const pk_vis *a) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis b;
    CHECK_OK(pk_vis_alloc(&ctx, a->n, &b), &ctx);
    memcpy(b.u, a->u, a->n * sizeof(double));
    memcpy(b.v, a->v, a->n * sizeof(double));
    memcpy(b.w, a->w, a->n * sizeof(double));
    memcpy(b.re, a->re, a->n * sizeof(double));
    memcpy(b.im, a->im, a->n * sizeof(double));
    memcpy(b.weight, a->weight, a->n * sizeof(double));
    b.weight_sum = a->weight_sum;
    b.sign = a->sign;
    return b;
}

/* ---- the reference: sort by cell ------------------------------------------ */

typedef struct cell_ref {
    long long x, y;
    size_t k;
} cell_ref;

static int cell_cmp(const void *pa, const void *pb) {
    const cell_ref *a = pa, *b = pb;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    if (a->y != b->y) return a->y < b->y ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

/* Half away from zero, written out. */
static long long round_half_away(double x) {
    return x >= 0 ? (long long)floor(x + 0.5) : -(long long)floor(-x + 0.5);
}

/* W[k]: the summed weights of visibility k's cell (both signs of (u, v)). */
static void cell_sums(const pk_vis *vis, size_t n, double cell, double *W) {
    cell_ref *c = malloc(vis->n * sizeof *c);
    for (size_t k = 0; k < vis->n; k++) {
        long long x = round_half_away(vis->u[k] * (double)n * cell);
        long long y = round_half_away(vis->v[k] * (double)n * cell);
        if (y < 0 || (y == 0 && x < 0)) x = -x, y = -y;
        c[k] = (cell_ref){x, y, k};
    }
    qsort(c, vis->n, sizeof *c, cell_cmp);
    for (size_t a = 0; a < vis->n;) {
        size_t b = a;
        double s = 0;
        while (b < vis->n && c[b].x == c[a].x && c[b].y == c[a].y) s += vis->weight[c[b++].k];
        for (size_t j = a; j < b; j++) W[c[j].k] = s;
        a = b;
    }
    free(c);
}

static size_t distinct_cells(const pk_vis *vis, size_t n, double cell) {
    double *W = malloc(vis->n * sizeof(double));
    cell_sums(vis, n, cell, W);
    double cells = 0;
    for (size_t k = 0; k < vis->n; k++) cells += vis->weight[k] / W[k];
    free(W);
    return (size_t)llround(cells);
}

/* The library's weighting of a copy of vis against the formula. */
static void check_weighting(const pk_vis *vis, pk_weighting mode, double robust, size_t n, double cell,
                            const char *what) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis out = copy_vis(vis);
    pk_status st = pk_vis_weighting(&ctx, &out, mode, robust, n, cell);
    CHECK_OK(st, &ctx);
    double *W = malloc(vis->n * sizeof(double));
    cell_sums(vis, n, cell, W);
    double total = 0, sum_wW = 0;
    for (size_t k = 0; k < vis->n; k++) total += vis->weight[k], sum_wW += vis->weight[k] * W[k];
    double f2 = 25.0 * pow(10.0, -2.0 * robust) / (sum_wW / total);
    double worst = 0, new_sum = 0;
    for (size_t k = 0; k < vis->n && st == PK_OK; k++) {
        double factor = mode == PK_WEIGHTING_NATURAL   ? 1.0
                        : mode == PK_WEIGHTING_UNIFORM ? 1.0 / W[k]
                                                       : 1.0 / (1.0 + W[k] * f2);
        double want = vis->weight[k] * factor;
        double e = fabs(out.weight[k] - want) / want;
        e = fmax(e, fabs(out.re[k] - vis->re[k] * factor) / (fabs(vis->re[k] * factor) + 1e-300));
        e = fmax(e, fabs(out.im[k] - vis->im[k] * factor) / (fabs(vis->im[k] * factor) + 1e-300));
        if (e > worst) worst = e;
        new_sum += want;
    }
    if (st == PK_OK) {
        CHECK(worst < 1e-12, "%s: weights off the formula by %.3g (relative)", what, worst);
        CHECK(fabs(out.weight_sum - new_sum) <= 1e-12 * new_sum, "%s: weight_sum %.17g, want %.17g", what,
              out.weight_sum, new_sum);
        CHECK(out.weighting == (int)mode, "%s: weighting recorded %d", what, out.weighting);
        CHECK(out.robust == (mode == PK_WEIGHTING_BRIGGS ? robust : 0.0), "%s: robust recorded %g", what, out.robust);
        if (mode == PK_WEIGHTING_UNIFORM) /* every sampled cell weighs 1 in all */
            CHECK(fabs(out.weight_sum - (double)distinct_cells(vis, n, cell)) < 1e-9 * out.weight_sum,
                  "%s: uniform weights sum to %.17g over %zu cells", what, out.weight_sum,
                  distinct_cells(vis, n, cell));
    }
    free(W);
    pk_vis_free(&out);
}

/* Spread of new_weight / old_weight after weighting, max / min. */
static double factor_spread(const pk_vis *vis, pk_weighting mode, double robust, size_t n, double cell,
                            const double *relative_to) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis out = copy_vis(vis);
    CHECK_OK(pk_vis_weighting(&ctx, &out, mode, robust, n, cell), &ctx);
    double lo = INFINITY, hi = 0;
    for (size_t k = 0; k < vis->n; k++) {
        double f = out.weight[k] / (relative_to ? relative_to[k] : vis->weight[k]);
        lo = fmin(lo, f), hi = fmax(hi, f);
    }
    pk_vis_free(&out);
    return hi / lo;
}

static double rel_l2(const double *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t p = 0; p < n; p++) num += (a[p] - b[p]) * (a[p] - b[p]), den += b[p] * b[p];
    return sqrt(num / den);
}

/* The PSF of vis from every CPU kernel against the reference on the weights. */
static void check_psf(const pk_vis *vis, size_t n, double cell, const char *what) {
    pk_context ctx;
    pk_context_init(&ctx);
    size_t np = n * n;
    double *l = malloc(np * sizeof(double)), *m = malloc(np * sizeof(double)), *ref = malloc(np * sizeof(double));
    for (size_t p = 0; p < np; p++) {
        l[p] = ((double)(p % n) - (double)(n / 2)) * cell;
        m[p] = ((double)(p / n) - (double)(n / 2)) * cell;
    }
    pk_vis beam = *vis;
    beam.re = malloc(vis->n * sizeof(double));
    beam.im = malloc(vis->n * sizeof(double));
    for (size_t k = 0; k < vis->n; k++) beam.re[k] = vis->weight ? vis->weight[k] : 1.0, beam.im[k] = 0;
    CHECK_OK(pk_dftimage_ref_points(&ctx, &beam, vis->sign, np, l, m, ref, NULL), &ctx);
    for (size_t p = 0; p < np; p++) ref[p] /= vis->weight_sum;
    const int kernels[] = {PK_DFTIMAGE_KERNEL_CPU_F64, PK_DFTIMAGE_KERNEL_CPU_SCALAR, PK_DFTIMAGE_KERNEL_CPU_AVX2,
                           PK_DFTIMAGE_KERNEL_CPU_AVX512};
    for (size_t ki = 0; ki < 4; ki++) {
        if (!pk_dftimage_kernel_available(kernels[ki])) continue;
        pk_dftimage_options o = {PK_BACKEND_CPU, kernels[ki], PK_PRECISION_SINGLE, 0, 1, 0};
        pk_image psf;
        pk_status st = pk_dftimage_psf(&ctx, &o, vis, n, cell, &psf, NULL);
        CHECK_OK(st, &ctx);
        if (st) continue;
        int f64 = kernels[ki] == PK_DFTIMAGE_KERNEL_CPU_F64;
        double err = rel_l2(psf.re, ref, np), limit = f64 ? 1e-12 : 3e-6;
        CHECK(err <= limit, "%s: PSF from %s: rel L2 %.3g > %.3g", what, pk_dftimage_kernel_name(kernels[ki]), err,
              limit);
        double centre = psf.re[(n / 2) * n + n / 2];
        CHECK(fabs(centre - 1.0) <= (f64 ? 1e-12 : 1e-5), "%s: PSF from %s is %.17g at the centre", what,
              pk_dftimage_kernel_name(kernels[ki]), centre);
        CHECK(psf.psf == 1 && psf.im == NULL, "%s: a real PSF, marked as one", what);
        pk_image_free(&psf);
    }
    free(beam.re);
    free(beam.im);
    free(l);
    free(m);
    free(ref);
}

/* Pixels of the PSF at or above half its peak, the main lobe's area. */
static size_t half_power_pixels(const pk_image *psf) {
    size_t count = 0;
    for (size_t p = 0; p < psf->n * psf->n; p++) count += psf->re[p] >= 0.5;
    return count;
}

/* An n x n image of exp(-(A x^2 + B x y + C y^2)) for the beam of FWHM
 * bmaj x bmin (radians) at position angle pa (degrees east of north). */
static pk_image gaussian_beam(size_t n, double cell, double bmaj, double bmin, double pa) {
    pk_image im;
    memset(&im, 0, sizeof im);
    im.n = n, im.cell = cell, im.psf = 1;
    im.re = malloc(n * n * sizeof(double));
    double t = pa * M_PI / 180.0;
    double ux = sin(t), uy = cos(t); /* the major axis: east component, north component */
    double emaj = 4 * M_LN2 / (bmaj * bmaj), emin = 4 * M_LN2 / (bmin * bmin);
    for (size_t b = 0; b < n; b++)
        for (size_t a = 0; a < n; a++) {
            double x = ((double)a - (double)(n / 2)) * cell, y = ((double)b - (double)(n / 2)) * cell;
            double along = x * ux + y * uy, across = -x * uy + y * ux;
            im.re[b * n + a] = exp(-(emaj * along * along + emin * across * across));
        }
    return im;
}

static void check_beam_fit(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    /* exact Gaussians: the fit on the logarithm recovers them */
    const double pas[] = {0, 30, 45, 89, 90, -60, -89.5};
    for (int k = 0; k < 7; k++) {
        pk_image im = gaussian_beam(101, 1e-5, 2.4e-4, 1.1e-4, pas[k]);
        double bmaj, bmin, bpa;
        pk_status st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
        CHECK_OK(st, &ctx);
        double dpa = fmod(bpa - pas[k] + 270.0, 180.0) - 90.0; /* the angle between axes */
        CHECK(st == PK_OK && fabs(bmaj / 2.4e-4 - 1) < 1e-9 && fabs(bmin / 1.1e-4 - 1) < 1e-9 && fabs(dpa) < 1e-7 &&
                  bpa > -90 && bpa <= 90,
              "Gaussian at PA %g: fitted %.12g x %.12g rad, PA %.9f", pas[k], bmaj, bmin, bpa);
        pk_image_free(&im);
    }
    /* a round beam */
    pk_image im = gaussian_beam(51, 1e-5, 1.5e-4, 1.5e-4, 0);
    double bmaj, bmin, bpa;
    CHECK(pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa) == PK_OK && fabs(bmaj / 1.5e-4 - 1) < 1e-9 &&
              fabs(bmin / 1.5e-4 - 1) < 1e-9,
          "round beam: %.12g x %.12g", bmaj, bmin);
    pk_image_free(&im);
    /* a lobe larger than the field, and one narrower than a cell */
    im = gaussian_beam(21, 1e-5, 4e-4, 1.8e-4, 10);
    pk_status st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "edge"), "a beam wider than the field: %s", ctx.message);
    pk_image_free(&im);
    /* ... and one that reaches only the northern edge: an even size puts
     * the centre at row n / 2, a row nearer the last than the first */
    im = gaussian_beam(20, 1e-5, 1.9e-4, 0.8e-4, 0);
    st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
    CHECK(im.re[19 * 20 + 10] >= 0.5 && im.re[0 * 20 + 10] < 0.5 && st == PK_ERR_INVALID && strstr(ctx.message, "edge"),
          "a beam reaching the last row only: %s", ctx.message);
    pk_image_free(&im);
    im = gaussian_beam(21, 1e-3, 2e-4, 1.8e-4, 10);
    st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "do not resolve"), "a beam within one cell: %s", ctx.message);
    pk_image_free(&im);
    /* a ridge that rises from the lobe's edge (from the first pixel east
     * of the centre below half power, out to the image's edge) is not part
     * of it: the lobe only falls from the centre; at 0.99, and at 0.7, only
     * a little above the lobe's edge (it still rises from every lobe pixel
     * next to it) */
    const double ridges[2] = {0.99, 0.7};
    for (int k = 0; k < 2; k++) {
        im = gaussian_beam(101, 1e-5, 2.4e-4, 1.1e-4, 30);
        size_t a = 50;
        while (a < 100 && im.re[50 * 101 + a] >= 0.5) a++;
        for (; a < 101; a++) im.re[50 * 101 + a] = ridges[k];
        st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
        CHECK(st == PK_OK && fabs(bmaj / 2.4e-4 - 1) < 1e-9 && fabs(bmin / 1.1e-4 - 1) < 1e-9 && fabs(bpa - 30) < 1e-7,
              "beam beside a ridge at %g: %.12g x %.12g, PA %.9f (%s)", ridges[k], bmaj, bmin, bpa, ctx.message);
        pk_image_free(&im);
    }
    /* a lobe of 4 pixels (the centre and three neighbours) is too few */
    im = gaussian_beam(21, 1e-3, 2e-4, 1.8e-4, 10);
    im.re[10 * 21 + 11] = im.re[10 * 21 + 9] = im.re[11 * 21 + 10] = 0.8;
    st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
    CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "is 4 pixels") && strstr(ctx.message, "do not resolve"),
          "a lobe of 4 pixels: %s", ctx.message);
    pk_image_free(&im);
    /* a lobe that is no Gaussian, P = 1 / ((1 + (x/a)^2) (1 + (y/b)^2)):
     * the fit is the least squares of ln P weighted by P (docs/dftimage.md)
     * over the pixels at half power or more (all of them reached from the
     * centre without rising), here solved again independently; unweighted
     * it would come out some percent wider */
    {
        const size_t n = 81;
        const double cell = 1e-5, sa = 9e-5, sb = 4e-5;
        im = gaussian_beam(n, cell, 1e-4, 1e-4, 0);
        double m[3][3] = {{0}}, r[3] = {0};
        for (size_t b = 0; b < n; b++)
            for (size_t a = 0; a < n; a++) {
                double x = ((double)a - 40) * cell, y = ((double)b - 40) * cell;
                double v = 1 / ((1 + x * x / (sa * sa)) * (1 + y * y / (sb * sb)));
                im.re[b * n + a] = v;
                if (v < 0.5) continue;
                double f[3] = {x * x / (cell * cell), x * y / (cell * cell), y * y / (cell * cell)};
                for (int i = 0; i < 3; i++) {
                    r[i] += v * f[i] * -log(v);
                    for (int j = 0; j < 3; j++) m[i][j] += v * f[i] * f[j];
                }
            }
        /* symmetric about both axes: the xy terms vanish, A and C solve a 2 x 2 system */
        double det = m[0][0] * m[2][2] - m[0][2] * m[2][0];
        double A = (r[0] * m[2][2] - m[0][2] * r[2]) / det / (cell * cell);
        double C = (m[0][0] * r[2] - r[0] * m[2][0]) / det / (cell * cell);
        double want_maj = 2 * sqrt(M_LN2 / (A < C ? A : C)), want_min = 2 * sqrt(M_LN2 / (A < C ? C : A));
        st = pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa);
        double dpa = fmod(bpa + 270.0, 180.0) - 90.0; /* the major axis along x: 90 (east) */
        CHECK(st == PK_OK && fabs(bmaj / want_maj - 1) < 1e-9 && fabs(bmin / want_min - 1) < 1e-9 &&
                  fabs(fabs(dpa) - 90) < 1e-7,
              "a Lorentzian lobe: fitted %.12g x %.12g, PA %.9f; weighted by P %.12g x %.12g, PA 90 (%s)", bmaj, bmin,
              bpa, want_maj, want_min, ctx.message);
        pk_image_free(&im);
    }
    /* the fitted beam in the FITS header: BMAJ and BMIN in degrees, BPA as fitted */
    {
        im = gaussian_beam(101, 1e-5, 2.4e-4, 1.1e-4, -60);
        im.sign = 1, im.precision = PK_PRECISION_DOUBLE;
        st = pk_dftimage_beam_fit(&ctx, &im, &im.bmaj, &im.bmin, &im.bpa);
        CHECK_OK(st, &ctx);
        char dir[] = "/tmp/pk_beamfits_XXXXXX", path[64];
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        snprintf(path, sizeof path, "%s/psf.fits", dir);
        CHECK_OK(pk_image_write_fits(&ctx, path, &im, NULL, 0), &ctx);
        fitsfile *f = NULL;
        int status = 0;
        double hmaj = 0, hmin = 0, hpa = 0;
        fits_open_file(&f, path, READONLY, &status);
        fits_read_key(f, TDOUBLE, "BMAJ", &hmaj, NULL, &status);
        fits_read_key(f, TDOUBLE, "BMIN", &hmin, NULL, &status);
        fits_read_key(f, TDOUBLE, "BPA", &hpa, NULL, &status);
        if (f) fits_close_file(f, &status);
        const double deg = 180.0 / M_PI;
        CHECK(status == 0 && fabs(hmaj / (2.4e-4 * deg) - 1) < 1e-9 && fabs(hmin / (1.1e-4 * deg) - 1) < 1e-9 &&
                  fabs(hpa + 60) < 1e-7,
              "FITS beam: BMAJ %.12g, BMIN %.12g deg, BPA %.9f (want %.12g, %.12g, -60; status %d)", hmaj, hmin, hpa,
              2.4e-4 * deg, 1.1e-4 * deg, status);
        unlink(path);
        rmdir(dir);
        pk_image_free(&im);
    }
    /* a sidelobe ring at 0.8 around the lobe is not part of it */
    im = gaussian_beam(101, 1e-5, 2.4e-4, 1.1e-4, 30);
    for (size_t p = 0; p < 101 * 101; p++) {
        double x = (double)(p % 101) - 50, y = (double)(p / 101) - 50, r = sqrt(x * x + y * y);
        if (r > 30 && r < 34) im.re[p] = 0.8;
    }
    CHECK(pk_dftimage_beam_fit(&ctx, &im, &bmaj, &bmin, &bpa) == PK_OK && fabs(bmaj / 2.4e-4 - 1) < 1e-9 &&
              fabs(bpa - 30) < 1e-7,
          "beam inside a sidelobe ring: %.12g x %.12g, PA %.9f (%s)", bmaj, bmin, bpa, ctx.message);
    pk_image_free(&im);
    /* the beam of visibilities spread three times wider in one direction
     * of the uv plane is narrow along it: with the uv plane stretched
     * along position angle psi (from v towards u), the beam's major axis
     * lies at psi + 90 degrees */
    check_rng rng = check_rng_make(77);
    const double psis[] = {0, 30, 90, 135};
    for (int k = 0; k < 4; k++) {
        pk_vis vis;
        CHECK_OK(pk_vis_alloc(&ctx, 4000, &vis), &ctx);
        double t = psis[k] * M_PI / 180.0;
        for (size_t j = 0; j < vis.n; j++) {
            double along = 3000 * normal(&rng), across = 1000 * normal(&rng);
            vis.u[j] = along * sin(t) + across * cos(t);
            vis.v[j] = along * cos(t) - across * sin(t);
            vis.w[j] = 0, vis.re[j] = 1, vis.im[j] = 0;
        }
        vis.weight_sum = (double)vis.n;
        vis.sign = -1;
        pk_dftimage_options o = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, 0, 0, 0};
        pk_image psf;
        st = pk_dftimage_psf(&ctx, &o, &vis, 81, 1.5e-5, &psf, NULL);
        CHECK_OK(st, &ctx);
        if (st == PK_OK) {
            st = pk_dftimage_beam_fit(&ctx, &psf, &bmaj, &bmin, &bpa);
            CHECK_OK(st, &ctx);
            double want = psis[k] + 90, dpa = fmod(bpa - want + 270.0 + 360.0, 180.0) - 90.0;
            printf("uv stretched at PA %g: beam %.3g x %.3g rad, PA %.2f (want %g mod 180), ratio %.2f\n", psis[k],
                   bmaj, bmin, bpa, want, bmaj / bmin);
            CHECK(st == PK_OK && fabs(dpa) < 3 && bmaj / bmin > 2.5 && bmaj / bmin < 3.5,
                  "uv stretched at %g: beam PA %.2f, axes %.3g / %.3g", psis[k], bpa, bmaj, bmin);
            pk_image_free(&psf);
        }
        pk_vis_free(&vis);
    }
}

int main(void) {
    check_rng rng = check_rng_make(20261130);
    pk_context ctx;
    pk_context_init(&ctx);

    /* names */
    pk_weighting wm;
    CHECK(pk_weighting_parse("briggs", &wm) == PK_OK && wm == PK_WEIGHTING_BRIGGS, "parse briggs");
    CHECK(pk_weighting_parse("uniform", &wm) == PK_OK && wm == PK_WEIGHTING_UNIFORM, "parse uniform");
    CHECK(pk_weighting_parse("Natural", &wm) != PK_OK, "names are lower case");
    CHECK(strcmp(pk_weighting_name(PK_WEIGHTING_NATURAL), "natural") == 0, "name natural");

    /* dense (many visibilities a cell) and sparse random sets */
    const double sigmas[] = {20.0, 300.0};
    for (int si = 0; si < 2; si++) {
        pk_vis vis;
        random_vis(&rng, 3000, sigmas[si], &vis);
        /* conjugate twins and exact half-cell ties: (u, v) and (-u, -v) share a cell */
        for (size_t k = 0; k < 200; k++) {
            vis.u[2 * k + 1] = -vis.u[2 * k];
            vis.v[2 * k + 1] = -vis.v[2 * k];
        }
        double per_cell = 64 * 0.002;
        vis.u[500] = 0.5 / per_cell, vis.v[500] = 0;
        vis.u[501] = -0.5 / per_cell, vis.v[501] = 0;
        vis.u[502] = 3.5 / per_cell, vis.v[502] = -2.5 / per_cell;
        vis.u[503] = -3.5 / per_cell, vis.v[503] = 2.5 / per_cell;
        char what[64];
        snprintf(what, sizeof what, "sigma %g uniform", sigmas[si]);
        check_weighting(&vis, PK_WEIGHTING_UNIFORM, 0, 64, 0.002, what);
        const double robusts[] = {-2, -0.5, 0, 0.5, 2};
        for (int r = 0; r < 5; r++) {
            snprintf(what, sizeof what, "sigma %g briggs %g", sigmas[si], robusts[r]);
            check_weighting(&vis, PK_WEIGHTING_BRIGGS, robusts[r], 64, 0.002, what);
        }
        /* the twins' factors are equal */
        pk_vis out = copy_vis(&vis);
        CHECK_OK(pk_vis_weighting(&ctx, &out, PK_WEIGHTING_UNIFORM, 0, 64, 0.002), &ctx);
        int twins_ok = 1;
        for (size_t k = 0; k < 200; k++)
            twins_ok &= fabs(out.weight[2 * k] / vis.weight[2 * k] - out.weight[2 * k + 1] / vis.weight[2 * k + 1]) <=
                        1e-15 * out.weight[2 * k] / vis.weight[2 * k];
        for (size_t k = 500; k < 504; k += 2)
            twins_ok &= fabs(out.weight[k] / vis.weight[k] - out.weight[k + 1] / vis.weight[k + 1]) <=
                        1e-15 * out.weight[k] / vis.weight[k];
        CHECK(twins_ok, "sigma %g: conjugate visibilities share their cell", sigmas[si]);
        pk_vis_free(&out);
        /* natural changes nothing, not a bit */
        out = copy_vis(&vis);
        CHECK_OK(pk_vis_weighting(&ctx, &out, PK_WEIGHTING_NATURAL, 0, 64, 0.002), &ctx);
        CHECK(memcmp(out.weight, vis.weight, vis.n * sizeof(double)) == 0 &&
                  memcmp(out.re, vis.re, vis.n * sizeof(double)) == 0 && out.weight_sum == vis.weight_sum,
              "natural weighting leaves the visibilities as they are");
        pk_vis_free(&out);
        /* robust limits: +5 is natural within 0.1%, -5 uniform within 1e-5 */
        double *uni = malloc(vis.n * sizeof(double));
        out = copy_vis(&vis);
        CHECK_OK(pk_vis_weighting(&ctx, &out, PK_WEIGHTING_UNIFORM, 0, 64, 0.002), &ctx);
        memcpy(uni, out.weight, vis.n * sizeof(double));
        pk_vis_free(&out);
        double nat_spread = factor_spread(&vis, PK_WEIGHTING_BRIGGS, 5, 64, 0.002, NULL);
        double uni_spread = factor_spread(&vis, PK_WEIGHTING_BRIGGS, -5, 64, 0.002, uni);
        CHECK(nat_spread < 1.001, "sigma %g: robust 5 scales weights by factors spread %.6g (natural: 1)", sigmas[si],
              nat_spread);
        CHECK(uni_spread < 1.00001, "sigma %g: robust -5 against uniform: factors spread %.8g", sigmas[si], uni_spread);
        CHECK(factor_spread(&vis, PK_WEIGHTING_UNIFORM, 0, 64, 0.002, NULL) > (si == 0 ? 10.0 : 1.5),
              "sigma %g: uniform weighting changes the weights", sigmas[si]);
        free(uni);
        check_psf(&vis, 33, 0.002, si ? "random sparse" : "random dense");
        out = copy_vis(&vis);
        CHECK_OK(pk_vis_weighting(&ctx, &out, PK_WEIGHTING_BRIGGS, 0.5, 33, 0.002), &ctx);
        check_psf(&out, 33, 0.002, si ? "random sparse, briggs 0.5" : "random dense, briggs 0.5");
        pk_vis_free(&out);
        pk_vis_free(&vis);
    }

    /* weights near the ends of the double range: the same weighting as
     * for weights scaled to 1, never a silent natural one */
    {
        pk_vis vis;
        random_vis(&rng, 2000, 20, &vis);
        const double scales[] = {1e160, 1e-200, 1e300};
        for (int si = 0; si < 3; si++) {
            for (int mode = PK_WEIGHTING_UNIFORM; mode <= PK_WEIGHTING_BRIGGS; mode++) {
                pk_vis a = copy_vis(&vis), b = copy_vis(&vis);
                for (size_t k = 0; k < vis.n; k++) {
                    b.weight[k] *= scales[si], b.re[k] *= scales[si], b.im[k] *= scales[si];
                }
                CHECK_OK(pk_vis_weighting(&ctx, &a, (pk_weighting)mode, 0.5, 64, 0.002), &ctx);
                pk_status st = pk_vis_weighting(&ctx, &b, (pk_weighting)mode, 0.5, 64, 0.002);
                CHECK_OK(st, &ctx);
                double worst = 0;
                /* uniform: the new weights are the same; Briggs: scaled as the old */
                double k_scale = mode == PK_WEIGHTING_UNIFORM ? 1.0 : scales[si];
                for (size_t k = 0; k < vis.n && st == PK_OK; k++) {
                    worst = fmax(worst, fabs(b.weight[k] / k_scale / a.weight[k] - 1));
                    worst = fmax(worst, fabs(b.re[k] / k_scale - a.re[k]) / (fabs(a.re[k]) + 1e-300));
                }
                CHECK(st == PK_OK && worst < 1e-12, "%s, weights scaled by %g: off by %.3g",
                      pk_weighting_name((pk_weighting)mode), scales[si], worst);
                pk_vis_free(&a);
                pk_vis_free(&b);
            }
        }
        pk_vis wide = copy_vis(&vis);
        wide.weight[3] = 1e-300;
        pk_status st = pk_vis_weighting(&ctx, &wide, PK_WEIGHTING_BRIGGS, 0, 64, 0.002);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "1e250"), "weights 1e300 apart: %s", ctx.message);
        pk_vis_free(&wide);
        pk_vis_free(&vis);
    }

    /* many distinct cells: the table grows from 1024 slots many times */
    {
        pk_vis vis;
        random_vis(&rng, 200000, 3e4, &vis);
        size_t cells = distinct_cells(&vis, 700, 0.0005);
        printf("%zu visibilities in %zu cells\n", vis.n, cells);
        CHECK(cells > 100000, "a set of many cells (%zu)", cells);
        check_weighting(&vis, PK_WEIGHTING_UNIFORM, 0, 700, 0.0005, "200k uniform");
        check_weighting(&vis, PK_WEIGHTING_BRIGGS, 1, 700, 0.0005, "200k briggs 1");
        pk_vis_free(&vis);
    }

    /* the same bits on any number of threads: the dense grid (sigma 300)
     * and the hash tables (sigma 1e5), with several visibilities a cell */
    {
        const double sig[] = {300.0, 1e5};
        for (int si = 0; si < 2; si++) {
            pk_vis vis;
            random_vis(&rng, 600000, sig[si], &vis);
            for (size_t k = 1; k < vis.n; k += 3) vis.u[k] = -vis.u[k - 1], vis.v[k] = -vis.v[k - 1];
            for (int mode = PK_WEIGHTING_UNIFORM; mode <= PK_WEIGHTING_BRIGGS; mode++) {
                pk_vis one = copy_vis(&vis);
                pk_context c1;
                pk_context_init(&c1);
                c1.n_threads = 1;
                CHECK_OK(pk_vis_weighting(&c1, &one, (pk_weighting)mode, 0.3, 700, 0.0005), &c1);
                const int threads[] = {2, 3, 8};
                for (int ti = 0; ti < 3; ti++) {
                    pk_vis many = copy_vis(&vis);
                    pk_context cn;
                    pk_context_init(&cn);
                    cn.n_threads = threads[ti];
                    CHECK_OK(pk_vis_weighting(&cn, &many, (pk_weighting)mode, 0.3, 700, 0.0005), &cn);
                    CHECK(memcmp(one.weight, many.weight, vis.n * sizeof(double)) == 0 &&
                              memcmp(one.re, many.re, vis.n * sizeof(double)) == 0 &&
                              memcmp(one.im, many.im, vis.n * sizeof(double)) == 0 && one.weight_sum == many.weight_sum,
                          "sigma %g %s: %d threads differ from one", sig[si], pk_weighting_name((pk_weighting)mode),
                          threads[ti]);
                    pk_vis_free(&many);
                }
#ifdef _OPENMP
                /* inside a parallel region OpenMP starts one thread where 4
                 * are asked for: every share must still be summed */
                {
                    pk_vis nested = copy_vis(&vis);
                    pk_context cn;
                    pk_context_init(&cn);
                    cn.n_threads = 4;
                    pk_status nst = PK_OK;
#pragma omp parallel num_threads(2)
#pragma omp single
                    nst = pk_vis_weighting(&cn, &nested, (pk_weighting)mode, 0.3, 700, 0.0005);
                    CHECK(nst == PK_OK && memcmp(one.weight, nested.weight, vis.n * sizeof(double)) == 0 &&
                              one.weight_sum == nested.weight_sum,
                          "sigma %g %s: called inside a parallel region: %s", sig[si],
                          pk_weighting_name((pk_weighting)mode), cn.message);
                    pk_vis_free(&nested);
                }
#endif
                if (mode == PK_WEIGHTING_UNIFORM) check_weighting(&vis, PK_WEIGHTING_UNIFORM, 0, 700, 0.0005, "600k");
                pk_vis_free(&one);
            }
            pk_vis_free(&vis);
        }
    }

    /* baselines by length: those in [min, max] kept in order, the rest
     * dropped, the weight sum that of the kept; bad ranges and an empty
     * selection refused with nothing changed */
    {
        pk_vis vis;
        random_vis(&rng, 5000, 300, &vis);
        vis.u[17] = vis.v[17] = 0; /* an autocorrelation */
        vis.u[18] = 100, vis.v[18] = 0;
        vis.u[19] = 0, vis.v[19] = -500; /* the range's ends, exactly */
        pk_vis sel = copy_vis(&vis);
        size_t dropped = 0;
        CHECK_OK(pk_vis_select_uv(&ctx, &sel, 100, 500, &dropped), &ctx);
        size_t j = 0;
        int same = 1;
        double sum = 0;
        for (size_t k = 0; k < vis.n; k++) {
            double r = sqrt(vis.u[k] * vis.u[k] + vis.v[k] * vis.v[k]);
            if (r < 100 || r > 500) continue;
            same &= j < sel.n && sel.u[j] == vis.u[k] && sel.v[j] == vis.v[k] && sel.w[j] == vis.w[k] &&
                    sel.re[j] == vis.re[k] && sel.im[j] == vis.im[k] && sel.weight[j] == vis.weight[k];
            sum += vis.weight[k];
            j++;
        }
        CHECK(same && j == sel.n && dropped == vis.n - sel.n && fabs(sel.weight_sum - sum) <= 1e-12 * sum,
              "baselines of 100 to 500 wavelengths: %zu kept (want %zu), %zu dropped", sel.n, j, dropped);
        CHECK(sel.n > 1000 && sel.n < vis.n - 1000 && sel.u[0] != 0, "a selection that keeps some and drops some");
        pk_vis_free(&sel);
        sel = copy_vis(&vis);
        CHECK_OK(pk_vis_select_uv(&ctx, &sel, 1e-3, INFINITY, &dropped), &ctx);
        CHECK(dropped == 1 && sel.n == vis.n - 1 && sel.u[17] == vis.u[18], "the autocorrelation alone dropped (%zu)",
              dropped);
        pk_vis_free(&sel);
        sel = copy_vis(&vis);
        pk_status st = pk_vis_select_uv(&ctx, &sel, 5e5, 6e5, &dropped);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "no visibility") && sel.n == vis.n &&
                  memcmp(sel.u, vis.u, vis.n * sizeof(double)) == 0,
              "nothing in range: %s", ctx.message);
        st = pk_vis_select_uv(&ctx, &sel, 10, 5, NULL);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "not a range"), "min > max: %s", ctx.message);
        st = pk_vis_select_uv(&ctx, &sel, -1, 5, NULL);
        CHECK(st == PK_ERR_INVALID, "a negative length: %s", ctx.message);
        st = pk_vis_select_uv(&ctx, &sel, 0, (double)NAN, NULL);
        CHECK(st == PK_ERR_INVALID, "NaN: %s", ctx.message);
        pk_vis_free(&sel);
        pk_vis_free(&vis);
    }

    /* a caller's visibilities without weights: the PSF takes 1 each */
    {
        pk_vis vis;
        random_vis(&rng, 500, 100, &vis);
        pk_vis bare = vis;
        bare.weight = NULL;
        bare.weight_sum = (double)vis.n;
        check_psf(&bare, 17, 0.001, "no weights");
        pk_status st = pk_vis_weighting(&ctx, &bare, PK_WEIGHTING_UNIFORM, 0, 17, 0.001);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "weight is NULL"), "uniform without weights: %s",
              ctx.message);
        /* bad arguments, each naming what is wrong, nothing changed */
        pk_vis bad = copy_vis(&vis);
        bad.weight[7] = 0;
        st = pk_vis_weighting(&ctx, &bad, PK_WEIGHTING_BRIGGS, 0, 17, 0.001);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "visibility 7") && strstr(ctx.message, "> 0"),
              "a zero weight: %s", ctx.message);
        CHECK(memcmp(bad.re, vis.re, vis.n * sizeof(double)) == 0, "nothing reweighted after an error");
        bad.weight[7] = (double)NAN;
        st = pk_vis_weighting(&ctx, &bad, PK_WEIGHTING_UNIFORM, 0, 17, 0.001);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "visibility 7"), "a NaN weight: %s", ctx.message);
        bad.weight[7] = -1;
        st = pk_vis_weighting(&ctx, &bad, PK_WEIGHTING_UNIFORM, 0, 17, 0.001);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "visibility 7"), "a negative weight: %s", ctx.message);
        bad.weight[7] = 1;
        bad.u[9] = 1e12;
        st = pk_vis_weighting(&ctx, &bad, PK_WEIGHTING_UNIFORM, 0, 17, 0.001);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "visibility 9"), "u beyond 2^38: %s", ctx.message);
        bad.u[9] = 1;
        st = pk_vis_weighting(&ctx, &bad, PK_WEIGHTING_BRIGGS, (double)NAN, 17, 0.001);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "robustness"), "a NaN robustness: %s", ctx.message);
        st = pk_vis_weighting(&ctx, &bad, PK_WEIGHTING_UNIFORM, 0, 0, 0.001);
        CHECK(st == PK_ERR_INVALID, "no pixels: %s", ctx.message);
        st = pk_vis_weighting(&ctx, &bad, (pk_weighting)7, 0, 17, 0.001);
        CHECK(st == PK_ERR_INVALID, "an unknown weighting: %s", ctx.message);
        bad.weight_sum = 0;
        pk_image psf;
        st = pk_dftimage_psf(&ctx, NULL, &bad, 17, 0.001, &psf, NULL);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "normalised") && psf.re == NULL,
              "a PSF with no weight sum: %s", ctx.message);
        pk_vis_free(&bad);
        pk_vis_free(&vis);
    }

    /* the MWA file: the beam is 1 at the centre, and uniform weighting
     * narrows its main lobe (the core of the array is dense) */
    {
        pk_vis vis;
        pk_status st = pk_vis_read(&ctx, "data/vis/1133866760.uvfits", PK_WEIGHTS_ABS, &vis);
        CHECK_OK(st, &ctx);
        if (st == PK_OK) {
            size_t n = 65;
            double cell = 2e-4; /* the longest baselines, 1475 wavelengths, resolve 7e-4 rad */
            pk_dftimage_options o = {PK_BACKEND_CPU, 0, PK_PRECISION_SINGLE, 0, 0, 0};
            pk_image nat, uni, bri;
            CHECK_OK(pk_dftimage_psf(&ctx, &o, &vis, n, cell, &nat, NULL), &ctx);
            pk_vis u = copy_vis(&vis), b = copy_vis(&vis);
            u.sign = b.sign = vis.sign;
            CHECK_OK(pk_vis_weighting(&ctx, &u, PK_WEIGHTING_UNIFORM, 0, n, cell), &ctx);
            CHECK_OK(pk_vis_weighting(&ctx, &b, PK_WEIGHTING_BRIGGS, 0, n, cell), &ctx);
            CHECK_OK(pk_dftimage_psf(&ctx, &o, &u, n, cell, &uni, NULL), &ctx);
            CHECK_OK(pk_dftimage_psf(&ctx, &o, &b, n, cell, &bri, NULL), &ctx);
            size_t c = (n / 2) * n + n / 2;
            CHECK(fabs(nat.re[c] - 1) < 1e-5 && fabs(uni.re[c] - 1) < 1e-5 && fabs(bri.re[c] - 1) < 1e-5,
                  "MWA beams at the centre: %.9g %.9g %.9g", nat.re[c], uni.re[c], bri.re[c]);
            size_t a_nat = half_power_pixels(&nat), a_uni = half_power_pixels(&uni), a_bri = half_power_pixels(&bri);
            printf("MWA main lobe (pixels >= 0.5): natural %zu, briggs 0 %zu, uniform %zu\n", a_nat, a_bri, a_uni);
            CHECK(a_uni < a_bri && a_bri < a_nat, "main lobes: uniform %zu < briggs 0 %zu < natural %zu", a_uni, a_bri,
                  a_nat);
            check_psf(&u, 21, 0.004, "MWA uniform");
            pk_image_free(&nat);
            pk_image_free(&uni);
            pk_image_free(&bri);
            pk_vis_free(&u);
            pk_vis_free(&b);
            pk_vis_free(&vis);
        }
    }
    check_beam_fit();
    return check_finish("test_dftimage_weighting");
}
