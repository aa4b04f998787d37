/* test_dftimage_cuda.c - every CUDA kernel against the float64 reference on
 * fresh random visibilities (sizes that are not multiples of the tiles,
 * visibility counts that are not multiples of the chunks, both signs, real
 * and complex images), and on a real UVFITS file, natural and Briggs
 * weighted; the beams (pk_dftimage_psf) of random and real data. Without a device: exit
 * 77 (skipped). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "pairkit/dftimage.h"

static double rel_l2(const pk_image *a, const pk_image *ref, int imag) {
    double num = 0, den = 0;
    for (size_t p = 0; p < a->n * a->n; p++) {
        double d = a->re[p] - ref->re[p];
        num += d * d, den += ref->re[p] * ref->re[p];
        if (imag) {
            d = a->im[p] - ref->im[p];
            num += d * d, den += ref->im[p] * ref->im[p];
        }
    }
    return sqrt(num / den);
}

static void compare_all(pk_context *ctx, const pk_vis *vis, size_t n, double cell, int sign, int imag,
                        const char *what) {
    pk_dftimage_options ro = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, sign, imag};
    pk_image ref;
    CHECK_OK(pk_dftimage_run(ctx, &ro, vis, n, cell, &ref, NULL), ctx);
    for (int kernel = 100; kernel < 200; kernel++) {
        if (!pk_dftimage_kernel_name(kernel)) continue;
        pk_dftimage_options o = {PK_BACKEND_CUDA, kernel, PK_PRECISION_SINGLE, sign, imag};
        pk_image img;
        pk_dftimage_stats stats;
        pk_status st = pk_dftimage_run(ctx, &o, vis, n, cell, &img, &stats);
        CHECK_OK(st, ctx);
        if (st) continue;
        double err = rel_l2(&img, &ref, imag);
        int f64 = pk_dftimage_kernel_precision(kernel) == PK_PRECISION_DOUBLE;
        int usual =
            strstr(pk_dftimage_kernel_name(kernel), "usual") || strstr(pk_dftimage_kernel_name(kernel), "naive");
        double limit = f64 ? 1e-11 : usual ? 2e-4 : 1e-5;
        printf("%-24s %-16s n=%-4zu vis=%-7zu sign=%+d imag=%d  rel L2 %.3g  %.3g ms\n", what,
               pk_dftimage_kernel_name(kernel), n, vis->n, sign, imag, err, stats.kernel_ms);
        CHECK(err <= limit, "%s kernel %s: rel L2 error %.3g > %.3g", what, pk_dftimage_kernel_name(kernel), err,
              limit);
        CHECK(stats.kernel_ms > 0, "device time recorded");
        pk_image_free(&img);
    }
    pk_image_free(&ref);
}

/* The beam of vis (after weighting) from every CUDA kernel against the
 * float64 CPU kernel's, and 1 at the centre. */
static void compare_psf(pk_context *ctx, const pk_vis *vis, size_t n, double cell, const char *what) {
    pk_dftimage_options ro = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, 0, 0};
    pk_image ref;
    CHECK_OK(pk_dftimage_psf(ctx, &ro, vis, n, cell, &ref, NULL), ctx);
    for (int kernel = 100; kernel < 200; kernel++) {
        if (!pk_dftimage_kernel_name(kernel)) continue;
        pk_dftimage_options o = {PK_BACKEND_CUDA, kernel, PK_PRECISION_SINGLE, 0, 0};
        pk_image psf;
        pk_status st = pk_dftimage_psf(ctx, &o, vis, n, cell, &psf, NULL);
        CHECK_OK(st, ctx);
        if (st) continue;
        double err = rel_l2(&psf, &ref, 0), centre = psf.re[(n / 2) * n + n / 2];
        int f64 = pk_dftimage_kernel_precision(kernel) == PK_PRECISION_DOUBLE;
        int usual =
            strstr(pk_dftimage_kernel_name(kernel), "usual") || strstr(pk_dftimage_kernel_name(kernel), "naive");
        double limit = f64 ? 1e-11 : usual ? 2e-4 : 1e-5;
        printf("%-24s %-16s beam n=%-4zu rel L2 %.3g, centre %.9f\n", what, pk_dftimage_kernel_name(kernel), n, err,
               centre);
        CHECK(err <= limit && fabs(centre - 1) <= (usual ? 1e-4 : 1e-5) && psf.psf == 1,
              "%s kernel %s: beam rel L2 %.3g > %.3g or centre %.9f", what, pk_dftimage_kernel_name(kernel), err, limit,
              centre);
        pk_image_free(&psf);
    }
    pk_image_free(&ref);
}

int main(void) {
    if (pk_cuda_device_count() == 0) return check_skip("test_dftimage_cuda", "no CUDA device");
    pk_context ctx;
    pk_context_init(&ctx);
    check_rng rng = check_rng_make(20261130);
    printf("seed %llu\n", rng.s);
    const size_t sizes[] = {1, 45, 129};
    const size_t n_vis[] = {5, 1000, 20011};
    for (int s = 0; s < 3; s++) {
        pk_vis vis;
        CHECK_OK(pk_vis_random(&ctx, n_vis[s], check_next(&rng), &vis), &ctx);
        for (int sign = -1; sign <= 1; sign += 2)
            for (int imag = 0; imag <= 1; imag++) compare_all(&ctx, &vis, sizes[s], 0.0005, sign, imag, "random");
        for (size_t k = 0; k < vis.n; k++) vis.weight[k] = 0.5 + (double)(check_next(&rng) >> 11) * 0x1p-53;
        vis.weight_sum = 0;
        for (size_t k = 0; k < vis.n; k++) vis.weight_sum += vis.weight[k];
        CHECK_OK(pk_vis_weighting(&ctx, &vis, PK_WEIGHTING_UNIFORM, 0, sizes[s], 0.0005), &ctx);
        compare_psf(&ctx, &vis, sizes[s], 0.0005, "random, uniform");
        pk_vis_free(&vis);
    }
    pk_vis vis;
    pk_status st = pk_vis_read(&ctx, "data/vis/1133866760.uvfits", PK_WEIGHTS_ABS, &vis);
    CHECK_OK(st, &ctx);
    if (st == PK_OK) {
        compare_all(&ctx, &vis, 200, 0.004, 0, 0, "MWA uvfits");
        compare_all(&ctx, &vis, 64, 0.004, 0, 1, "MWA uvfits");
        CHECK_OK(pk_vis_weighting(&ctx, &vis, PK_WEIGHTING_BRIGGS, 0, 200, 2e-4), &ctx);
        compare_all(&ctx, &vis, 200, 2e-4, 0, 0, "MWA uvfits, briggs 0");
        compare_psf(&ctx, &vis, 200, 2e-4, "MWA uvfits, briggs 0");
        pk_vis_free(&vis);
    }
    return check_finish("test_dftimage_cuda");
}
