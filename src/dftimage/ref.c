/* ref.c - the float64 reference of dftimage, and the specification every
 * other kernel is tested against: for each point the plain sum over the
 * visibilities of V_k exp(s 2 pi i (u l + v m + w n')), with libm's sin and
 * cos of the unreduced phase in double. Never optimised beyond an OpenMP
 * loop over the points (each point's sum runs in visibility order, so the
 * result does not depend on the thread count).
 */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dftimage_internal.h"

static void ref_point(const pk_vis *vis, int sign, double l, double m, double *re, double *im) {
    double np = pk_dft_nprime(l, m);
    double sr = 0.0, si = 0.0;
    for (size_t k = 0; k < vis->n; k++) {
        double phase = (double)sign * PK_DFT_TWO_PI * (vis->u[k] * l + vis->v[k] * m + vis->w[k] * np);
        double c = cos(phase), s = sin(phase);
        sr += vis->re[k] * c - vis->im[k] * s;
        si += vis->re[k] * s + vis->im[k] * c;
    }
    *re = sr;
    *im = si;
}

static int thread_count(const pk_context *ctx) {
#ifdef _OPENMP
    return pk_thread_count(ctx);
#else
    (void)ctx;
    return 1;
#endif
}

/* Points in blocks of 16 between progress reports. */
static pk_status ref_points(pk_context *ctx, const pk_vis *vis, int sign, size_t n_points, const double *l,
                            const double *m, double *re, double *im, pk_progress *progress) {
    const size_t block = 16;
    size_t n_blocks = (n_points + block - 1) / block;
    int cancelled = 0;
#pragma omp parallel num_threads(thread_count(ctx))
    {
        int owner = pk_thread_num() == 0;
#pragma omp for schedule(dynamic, 1)
        for (size_t b = 0; b < n_blocks; b++) {
            int stop;
#pragma omp atomic read
            stop = cancelled;
            if (stop) continue;
            size_t p0 = b * block, p1 = p0 + block < n_points ? p0 + block : n_points;
            for (size_t p = p0; p < p1; p++) {
                double r, i;
                ref_point(vis, sign, l[p], m[p], &r, &i);
                re[p] = r;
                if (im) im[p] = i;
            }
            if (progress && pk_progress_add(progress, (double)(p1 - p0) * (double)vis->n, owner)) {
#pragma omp atomic write
                cancelled = 1;
            }
        }
    }
    return cancelled ? pk_fail(ctx, PK_ERR_CANCELLED, "cancelled") : PK_OK;
}

pk_status pk_dftimage_ref_points(pk_context *ctx, const pk_vis *vis, int sign, size_t n_points, const double *l,
                                 const double *m, double *re, double *im) {
    pk_clear(ctx);
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_ref_points: vis is NULL");
    if (n_points && (!l || !m || !re))
        return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_ref_points: %s is NULL (with n_points = %zu)",
                       !l   ? "l"
                       : !m ? "m"
                            : "re",
                       n_points);
    pk_status st = pk_vis_arrays_check(ctx, "pk_dftimage_ref_points", vis);
    if (st) return st;
    if (sign != 1 && sign != -1) return pk_fail(ctx, PK_ERR_INVALID, "sign must be +1 or -1, got %d", sign);
    for (size_t p = 0; p < n_points; p++)
        if (!(l[p] * l[p] + m[p] * m[p] < 1.0))
            return pk_fail(ctx, PK_ERR_INVALID, "point %zu: l = %g, m = %g lies outside the unit circle", p, l[p],
                           m[p]);
    pk_progress progress;
    pk_progress_begin(&progress, ctx, (double)n_points * (double)vis->n, 0.0, 1.0);
    return ref_points(ctx, vis, sign, n_points, l, m, re, im, &progress);
}

pk_status pk_dft_run_ref(pk_context *ctx, const pk_dft_job *job, pk_progress *progress) {
    size_t n = job->n, n_pix = n * n;
    double *l = malloc(n_pix * sizeof(double)), *m = malloc(n_pix * sizeof(double));
    if (!l || !m) {
        free(l);
        free(m);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %zu pixel coordinates", n_pix);
    }
    for (size_t b = 0; b < n; b++)
        for (size_t a = 0; a < n; a++) {
            l[b * n + a] = pk_dft_pixel_lm(a, n, job->cell);
            m[b * n + a] = pk_dft_pixel_lm(b, n, job->cell);
        }
    pk_status st = ref_points(ctx, job->vis, job->sign, n_pix, l, m, job->re, job->im, progress);
    free(l);
    free(m);
    return st;
}

void pk_radec_to_lm(double ra_deg, double dec_deg, double ra0_deg, double dec0_deg, double *l, double *m) {
    if (!l || !m) return;
    const double deg = M_PI / 180.0;
    double dra = (ra_deg - ra0_deg) * deg, dec = dec_deg * deg, dec0 = dec0_deg * deg;
    *l = cos(dec) * sin(dra);
    *m = sin(dec) * cos(dec0) - cos(dec) * sin(dec0) * cos(dra);
}
