/* test_dftimage_kernels.c - every CPU kernel against the float64 reference
 * on fresh random visibilities: awkward image sizes (1, 7, 33 and 70 pixels
 * a side, none a multiple of the 32 x 8 tile), both signs, real and
 * complex images, and the benchmark's statistics. Also cancellation (no
 * image, PK_ERR_CANCELLED), argument errors, and amplitudes too large to
 * sum in float32 or float64 (refused, naming the visibility), with the FITS
 * writer's refusal of pixels that are not finite. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "pairkit/dftimage.h"

static double normal(check_rng *r) {
    double a = check_uniform(r) + 1e-300, b = check_uniform(r);
    return sqrt(-2.0 * log(a)) * cos(2.0 * M_PI * b);
}

static void random_vis(check_rng *r, size_t n, double uv_sigma, double w_sigma, pk_vis *vis) {
    pk_context ctx;
    pk_context_init(&ctx);
    CHECK_OK(pk_vis_alloc(&ctx, n, vis), &ctx);
    for (size_t k = 0; k < n; k++) {
        vis->u[k] = uv_sigma * normal(r);
        vis->v[k] = uv_sigma * normal(r);
        vis->w[k] = w_sigma * normal(r);
        vis->re[k] = normal(r);
        vis->im[k] = normal(r);
    }
    vis->sign = 1;
}

static int stop_now(void *user, double fraction) {
    (void)user;
    (void)fraction;
    return 1;
}

int main(void) {
    check_rng rng = check_rng_make(20261129);
    pk_context ctx;
    pk_context_init(&ctx);
    const int kernels[] = {PK_DFTIMAGE_KERNEL_CPU_F64, PK_DFTIMAGE_KERNEL_CPU_SCALAR, PK_DFTIMAGE_KERNEL_CPU_AVX2,
                           PK_DFTIMAGE_KERNEL_CPU_AVX512};
    const size_t sizes[] = {1, 7, 33, 70};
    const size_t n_vis[] = {1, 13, 700, 3001};
    for (size_t si = 0; si < 4; si++) {
        pk_vis vis;
        random_vis(&rng, n_vis[si], 300.0, 30.0, &vis);
        for (int sign = -1; sign <= 1; sign += 2) {
            for (int imag = 0; imag <= 1; imag++) {
                /* the reference always complex: errors are measured against
                 * the complex image's norm, since a float32 kernel's error
                 * scales with |V|, not with the real part (one visibility
                 * on one pixel whose real part is near 0 gave 4e-6 of it for
                 * some seeds) */
                pk_dftimage_options ref_opts = {
                    PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_REF, PK_PRECISION_DOUBLE, sign, 1, 0};
                pk_image ref;
                CHECK_OK(pk_dftimage_run(&ctx, &ref_opts, &vis, sizes[si], 0.0005, &ref, NULL), &ctx);
                for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
                    int kernel = kernels[ki];
                    if (!pk_dftimage_kernel_available(kernel)) {
                        printf("kernel %s not available on this CPU, skipped\n", pk_dftimage_kernel_name(kernel));
                        continue;
                    }
                    pk_dftimage_options o = {PK_BACKEND_CPU, kernel, PK_PRECISION_SINGLE, sign, imag, 0};
                    pk_image img;
                    pk_dftimage_stats stats;
                    pk_status st = pk_dftimage_run(&ctx, &o, &vis, sizes[si], 0.0005, &img, &stats);
                    CHECK_OK(st, &ctx);
                    if (st) continue;
                    double num = 0, den = 0;
                    size_t np = sizes[si] * sizes[si];
                    for (size_t p = 0; p < np; p++) {
                        double d = img.re[p] - ref.re[p];
                        num += d * d, den += ref.re[p] * ref.re[p] + ref.im[p] * ref.im[p];
                        if (imag) {
                            d = img.im[p] - ref.im[p];
                            num += d * d;
                        }
                    }
                    double err = sqrt(num / den);
                    double limit = kernel == PK_DFTIMAGE_KERNEL_CPU_F64 ? 1e-12 : 3e-6;
                    CHECK(err <= limit, "kernel %s n=%zu vis=%zu sign=%d imag=%d: rel L2 error %.3g > %.3g",
                          pk_dftimage_kernel_name(kernel), sizes[si], n_vis[si], sign, imag, err, limit);
                    CHECK(stats.kernel == kernel && stats.terms == (double)np * (double)n_vis[si], "stats");
                    CHECK(img.sign == sign, "image sign");
                    pk_image_free(&img);
                }
                pk_image_free(&ref);
            }
        }
        pk_vis_free(&vis);
    }

    /* A large image: far from the phase centre a tile's centre phase runs
     * to tens of turns, more than a float32 holds to 3e-6 of a turn; the
     * float32 kernels take it reduced in float64 (the table's R). A float32
     * phase of the whole u l0 + v m0 + w n0 gave relative errors near 6e-6
     * here, the reduced one 6e-7. Against the float64 kernel, which agrees
     * with the reference to 1e-14 (above); 400 pixels a side, so tiles lie
     * up to 200 pixels from the centre, not a multiple of the tile either. */
    {
        pk_vis vis;
        random_vis(&rng, 100, 300.0, 30.0, &vis);
        pk_dftimage_options f64 = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_SINGLE, 1, 1, 0};
        pk_image ref;
        CHECK_OK(pk_dftimage_run(&ctx, &f64, &vis, 400, 0.0005, &ref, NULL), &ctx);
        for (size_t ki = 1; ref.re && ki < sizeof kernels / sizeof kernels[0]; ki++) {
            if (!pk_dftimage_kernel_available(kernels[ki])) continue;
            for (int imag = 0; imag <= 1; imag++) {
                pk_dftimage_options o = {PK_BACKEND_CPU, kernels[ki], PK_PRECISION_SINGLE, 1, imag, 0};
                pk_image img;
                pk_status st = pk_dftimage_run(&ctx, &o, &vis, 400, 0.0005, &img, NULL);
                CHECK_OK(st, &ctx);
                if (st) continue;
                double num = 0, den = 0;
                for (size_t p = 0; p < 400 * 400; p++) {
                    double d = img.re[p] - ref.re[p];
                    num += d * d, den += ref.re[p] * ref.re[p] + ref.im[p] * ref.im[p];
                    if (imag) {
                        d = img.im[p] - ref.im[p];
                        num += d * d;
                    }
                }
                double err = sqrt(num / den);
                CHECK(err <= 2e-6,
                      "kernel %s, 400 pixels a side, imag=%d: rel L2 error %.3g > 2e-6 (phases far from the centre)",
                      pk_dftimage_kernel_name(kernels[ki]), imag, err);
                pk_image_free(&img);
            }
        }
        pk_image_free(&ref);
        pk_vis_free(&vis);
    }

    /* The check function agrees with a direct comparison. */
    {
        pk_vis vis;
        random_vis(&rng, 2000, 300.0, 30.0, &vis);
        pk_dftimage_options o = {PK_BACKEND_CPU, 0, PK_PRECISION_SINGLE, 0, 0, 0};
        pk_image img;
        CHECK_OK(pk_dftimage_run(&ctx, &o, &vis, 64, 0.0005, &img, NULL), &ctx);
        double err_all = 1, err_sub = 1;
        size_t n_all = 0, n_sub = 0;
        CHECK_OK(pk_dftimage_check(&ctx, &vis, &img, 0, &err_all, &n_all), &ctx);
        CHECK_OK(pk_dftimage_check(&ctx, &vis, &img, 300, &err_sub, &n_sub), &ctx);
        CHECK(n_all == 64 * 64 && n_sub == 300, "compared %zu and %zu pixels", n_all, n_sub);
        CHECK(err_all < 3e-6 && err_sub < 3e-6, "check errors %.3g %.3g", err_all, err_sub);
        printf("best CPU kernel %s: rel L2 error %.3g on 2000 visibilities x 64^2 pixels\n",
               pk_dftimage_kernel_name(PK_DFTIMAGE_KERNEL_BEST), err_all);
        pk_image_free(&img);

        /* Cancellation: no image, status CANCELLED, for every CPU kernel. */
        pk_context cctx;
        pk_context_init(&cctx);
        cctx.progress = stop_now;
        for (int kernel = PK_DFTIMAGE_KERNEL_REF; kernel <= PK_DFTIMAGE_KERNEL_CPU_AVX512; kernel++) {
            if (!pk_dftimage_kernel_available(kernel)) continue;
            pk_dftimage_options co = {PK_BACKEND_CPU, kernel, PK_PRECISION_SINGLE, 0, 0, 0};
            pk_status st = pk_dftimage_run(&cctx, &co, &vis, 64, 0.0005, &img, NULL);
            CHECK(st == PK_ERR_CANCELLED && img.re == NULL, "kernel %s: cancel gave status %d",
                  pk_dftimage_kernel_name(kernel), (int)st);
        }
        /* a large image (16384^2 pixels, 2 GiB) stops before its pages are
         * all touched: the pixels' first fill watches for cancellation too
         * (filling them all took seconds before any check) */
        {
            /* the peak memory tells: a fill of every pixel touches all
             * 2 GiB (timing would not: with huge pages the whole fill takes
             * only half a second) */
            struct rusage ru0, ru1;
            getrusage(RUSAGE_SELF, &ru0);
            double t0 = check_now();
            pk_status st = pk_dftimage_run(&cctx, &o, &vis, 16384, 1e-9, &img, NULL);
            double took = check_now() - t0;
            getrusage(RUSAGE_SELF, &ru1);
            double grew_mib = (double)(ru1.ru_maxrss - ru0.ru_maxrss) / 1024.0;
            CHECK((st == PK_ERR_CANCELLED && img.re == NULL && grew_mib < 1024) || st == PK_ERR_NOMEM,
                  "16384^2 pixels, cancelled at once: status %d after %.2f s, peak memory %.0f MiB more", (int)st, took,
                  grew_mib);
            printf("16384^2 pixels, cancelled at once: %s after %.3f s, peak memory %.0f MiB more\n", pk_status_str(st),
                   took, grew_mib);
        }

        /* Argument errors. */
        CHECK(pk_dftimage_run(&ctx, &o, &vis, 64, -1.0, &img, NULL) == PK_ERR_INVALID, "negative cell");
        CHECK(pk_dftimage_run(&ctx, &o, &vis, 3000, 0.001, &img, NULL) == PK_ERR_INVALID &&
                  strstr(ctx.message, "beyond"),
              "field beyond the sky: %s", ctx.message);
        /* the corners reach farthest: 1500 cells of 1e-3 rad put the edges'
         * midpoints at l = 0.75, on the sky, and the corners at l^2 + m^2 =
         * 2 (0.75)^2 = 1.125, beyond it; 1400 cells reach 2 (0.7)^2 = 0.98 */
        CHECK(pk_dftimage_check_grid(&ctx, 1500, 0.001, 0) == PK_ERR_INVALID && strstr(ctx.message, "beyond"),
              "corners beyond the sky, edges not: %s", ctx.message);
        CHECK(pk_dftimage_check_grid(&ctx, 1400, 0.001, 0) == PK_OK, "corners at l = m = 0.7 are on the sky: %s",
              ctx.message);
        CHECK(pk_dftimage_run(&ctx, &o, &vis, (size_t)1 << 40, 1e-9, &img, NULL) == PK_ERR_NOMEM &&
                  strstr(ctx.message, "memory"),
              "huge image: %s", ctx.message);
        vis.re[17] = (double)NAN;
        CHECK(pk_dftimage_run(&ctx, &o, &vis, 16, 0.0005, &img, NULL) == PK_ERR_INVALID && strstr(ctx.message, "17"),
              "NaN visibility: %s", ctx.message);
        /* the imaginary part is checked as the real part is */
        vis.re[17] = 0.5;
        const double bad_im[2] = {(double)NAN, (double)INFINITY};
        for (int b = 0; b < 2; b++) {
            vis.im[23] = bad_im[b];
            CHECK(pk_dftimage_run(&ctx, &o, &vis, 16, 0.0005, &img, NULL) == PK_ERR_INVALID && img.re == NULL &&
                      strstr(ctx.message, "visibility 23: the value is not finite"),
                  "imaginary part %g: %s", bad_im[b], ctx.message);
        }
        vis.im[23] = 0.5;
        /* w is checked as u and v are */
        const double bad_w[2] = {(double)NAN, (double)INFINITY};
        double w31 = vis.w[31];
        for (int b = 0; b < 2; b++) {
            vis.w[31] = bad_w[b];
            CHECK(pk_dftimage_run(&ctx, &o, &vis, 16, 0.0005, &img, NULL) == PK_ERR_INVALID && img.re == NULL &&
                      strstr(ctx.message, "visibility 31: w is not finite"),
                  "w = %g: %s", bad_w[b], ctx.message);
        }
        vis.w[31] = w31;
        pk_vis_free(&vis);
    }

    /* Amplitudes beyond what a precision can sum: refused before imaging,
     * naming the visibility and the amplitudes (not the baselines); double
     * precision images what float32 cannot. */
    {
        pk_vis vis;
        random_vis(&rng, 300, 300.0, 30.0, &vis);
        vis.re[17] = 1e300;
        pk_image img;
        for (int kernel = PK_DFTIMAGE_KERNEL_CPU_SCALAR; kernel <= PK_DFTIMAGE_KERNEL_CPU_AVX512; kernel++) {
            if (!pk_dftimage_kernel_available(kernel)) continue;
            pk_dftimage_options o = {PK_BACKEND_CPU, kernel, PK_PRECISION_SINGLE, 0, 0, 0};
            pk_status st = pk_dftimage_run(&ctx, &o, &vis, 16, 0.0005, &img, NULL);
            CHECK(st == PK_ERR_INVALID && img.re == NULL && strstr(ctx.message, "visibility 17: V = 1e+300") &&
                      strstr(ctx.message, "amplitudes") && strstr(ctx.message, "(--precision double)") &&
                      !strstr(ctx.message, "baselines"),
                  "kernel %s, one amplitude of 1e300: status %d, %s", pk_dftimage_kernel_name(kernel), (int)st,
                  ctx.message);
        }
        printf("one amplitude of 1e300 in float32: %s\n", ctx.message);
        for (int kernel = PK_DFTIMAGE_KERNEL_REF; kernel <= PK_DFTIMAGE_KERNEL_CPU_F64; kernel++) {
            pk_dftimage_options o = {PK_BACKEND_CPU, kernel, PK_PRECISION_DOUBLE, 0, 1, 0};
            pk_status st = pk_dftimage_run(&ctx, &o, &vis, 16, 0.0005, &img, NULL);
            CHECK_OK(st, &ctx);
            if (st) continue;
            double rel_l2 = 1;
            int finite = 1;
            for (size_t p = 0; p < 16 * 16; p++) finite &= isfinite(img.re[p]) && isfinite(img.im[p]);
            CHECK_OK(pk_dftimage_check(&ctx, &vis, &img, 0, &rel_l2, NULL), &ctx);
            CHECK(finite && rel_l2 < 1e-12, "kernel %s, one amplitude of 1e300 in float64: finite %d, error %.3g",
                  pk_dftimage_kernel_name(kernel), finite, rel_l2);
            pk_image_free(&img);
        }
        /* every amplitude 3e38, weights 1: in range one by one, not summed */
        for (size_t k = 0; k < vis.n; k++) vis.re[k] = 3e38, vis.im[k] = 0;
        pk_dftimage_options single = {PK_BACKEND_CPU, 0, PK_PRECISION_SINGLE, 0, 0, 0};
        pk_status st = pk_dftimage_run(&ctx, &single, &vis, 16, 0.0005, &img, NULL);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "amplitudes") && strstr(ctx.message, "sum to 9e+40") &&
                  strstr(ctx.message, "(--precision double)") && !strstr(ctx.message, "baselines"),
              "every amplitude 3e38: status %d, %s", (int)st, ctx.message);
        printf("every amplitude 3e38 in float32: %s\n", ctx.message);
        pk_dftimage_options dbl = {PK_BACKEND_CPU, 0, PK_PRECISION_DOUBLE, 0, 0, 0};
        CHECK_OK(pk_dftimage_run(&ctx, &dbl, &vis, 16, 0.0005, &img, NULL), &ctx);
        CHECK(img.re && fabs(img.re[8 * 16 + 8] / 9e40 - 1) < 1e-12, "every amplitude 3e38 in float64: centre %g",
              img.re ? img.re[8 * 16 + 8] : 0.0);
        pk_image_free(&img);
        /* beyond float64 too: refused there as well, without the advice to use it */
        for (size_t k = 0; k < vis.n; k++) vis.re[k] = 1e307;
        st = pk_dftimage_run(&ctx, &dbl, &vis, 16, 0.0005, &img, NULL);
        CHECK(st == PK_ERR_INVALID && img.re == NULL && strstr(ctx.message, "even float64") &&
                  strstr(ctx.message, "over 1.8e+308"),
              "amplitudes beyond float64: status %d, %s", (int)st, ctx.message);
        st = pk_dftimage_run(&ctx, &single, &vis, 16, 0.0005, &img, NULL);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "even float64") && !strstr(ctx.message, "--precision"),
              "amplitudes beyond float64, in float32: %s", ctx.message);
        /* the beam sums the weights: 1e37 each is too much for float32 */
        for (size_t k = 0; k < vis.n; k++) vis.re[k] = 1e-30, vis.weight[k] = 1e37;
        vis.weight[5] = 2e37;
        vis.weight_sum = 301e37;
        st = pk_dftimage_psf(&ctx, &single, &vis, 16, 0.0005, &img, NULL);
        CHECK(st == PK_ERR_INVALID && img.re == NULL && strstr(ctx.message, "visibility 5: weight 2e+37") &&
                  strstr(ctx.message, "the weights sum to 3.01e+39"),
              "a beam of weights 1e37 in float32: status %d, %s", (int)st, ctx.message);
        CHECK_OK(pk_dftimage_run(&ctx, &single, &vis, 16, 0.0005, &img, NULL), &ctx);
        pk_image_free(&img);
        CHECK_OK(pk_dftimage_psf(&ctx, &dbl, &vis, 16, 0.0005, &img, NULL), &ctx);
        CHECK(img.re && fabs(img.re[8 * 16 + 8] - 1) < 1e-12, "the beam of weights 1e37 in float64: centre %g",
              img.re ? img.re[8 * 16 + 8] : 0.0);
        /* an image with a pixel that is not finite, or beyond float32 in a
         * float32 image, is not written */
        char path[] = "/tmp/pk_dftkernels_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0, "mkstemp");
        if (fd >= 0) close(fd);
        unlink(path);
        if (img.re) {
            img.re[3] = (double)INFINITY;
            st = pk_image_write_fits(&ctx, path, &img, &vis, 0);
            CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "is inf") && access(path, F_OK) != 0,
                  "an infinite pixel: status %d, %s", (int)st, ctx.message);
            img.re[3] = 1e39;
            img.precision = PK_PRECISION_SINGLE;
            st = pk_image_write_fits(&ctx, path, &img, &vis, 0);
            CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "beyond the range of a float32 image") &&
                      access(path, F_OK) != 0,
                  "a pixel beyond float32: status %d, %s", (int)st, ctx.message);
            img.precision = PK_PRECISION_DOUBLE;
            CHECK_OK(pk_image_write_fits(&ctx, path, &img, &vis, 0), &ctx);
            unlink(path);
        }
        pk_image_free(&img);
        pk_vis_free(&vis);
    }

    /* The generator is deterministic and has the benchmark's statistics. */
    {
        pk_vis a, b;
        CHECK_OK(pk_vis_random(&ctx, 200000, 7, &a), &ctx);
        CHECK_OK(pk_vis_random(&ctx, 200000, 7, &b), &ctx);
        CHECK(memcmp(a.u, b.u, 200000 * sizeof(double)) == 0 && memcmp(a.im, b.im, 200000 * sizeof(double)) == 0,
              "same seed, same visibilities");
        double su = 0, sw = 0, sr = 0, mu = 0;
        for (size_t k = 0; k < a.n; k++) {
            su += a.u[k] * a.u[k], sw += a.w[k] * a.w[k], sr += a.re[k] * a.re[k], mu += a.v[k];
        }
        su = sqrt(su / (double)a.n), sw = sqrt(sw / (double)a.n), sr = sqrt(sr / (double)a.n), mu /= (double)a.n;
        CHECK(fabs(su - 300) < 3 && fabs(sw - 30) < 0.3 && fabs(sr - 1) < 0.01 && fabs(mu) < 3,
              "generator statistics: sigma_u %.2f sigma_w %.2f sigma_re %.3f mean_v %.2f", su, sw, sr, mu);
        pk_vis_free(&a);
        pk_vis_free(&b);
    }
    return check_finish("test_dftimage_kernels");
}
