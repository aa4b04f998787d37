/* test_dftimage_cuda.c - every CUDA kernel against the float64 reference on
 * fresh random visibilities (sizes that are not multiples of the tiles,
 * visibility counts that are not multiples of the chunks, both signs, real
 * and complex images), and on a real UVFITS file, natural and Briggs
 * weighted; the beams (pk_dftimage_psf) of random and real data; images
 * made in bands of rows under a GPU memory limit, and when the device's
 * memory is taken between a run's sizing and its allocations. Without a
 * device: exit 77 (skipped). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "common/common.h"
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
    pk_dftimage_options ro = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, sign, imag, 0};
    pk_image ref;
    CHECK_OK(pk_dftimage_run(ctx, &ro, vis, n, cell, &ref, NULL), ctx);
    for (int kernel = 100; kernel < 200; kernel++) {
        if (!pk_dftimage_kernel_name(kernel)) continue;
        pk_dftimage_options o = {PK_BACKEND_CUDA, kernel, PK_PRECISION_SINGLE, sign, imag, 0};
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
    pk_dftimage_options ro = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, 0, 0, 0};
    pk_image ref;
    CHECK_OK(pk_dftimage_psf(ctx, &ro, vis, n, cell, &ref, NULL), ctx);
    for (int kernel = 100; kernel < 200; kernel++) {
        if (!pk_dftimage_kernel_name(kernel)) continue;
        pk_dftimage_options o = {PK_BACKEND_CUDA, kernel, PK_PRECISION_SINGLE, 0, 0, 0};
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

/* Images made in bands of rows: for every CUDA kernel, a device memory
 * limit, found by bisection below the one-pass image's, under which the
 * image takes three bands or more; the banded image against the float64
 * reference, and against the one-pass image (the per-pixel kernels bit for
 * bit; the tile kernels sum the same float32 chunks in one float64 order
 * instead of per slice). Then a limit below one band: PK_ERR_NOMEM, saying
 * so, and no image. */
static void compare_bands(pk_context *ctx, const pk_vis *vis, size_t n, double cell, int imag, const char *what) {
    pk_dftimage_options ro = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, 0, imag, 0};
    pk_image ref;
    CHECK_OK(pk_dftimage_run(ctx, &ro, vis, n, cell, &ref, NULL), ctx);
    for (int kernel = 100; kernel < 200; kernel++) {
        const char *name = pk_dftimage_kernel_name(kernel);
        if (!name) continue;
        pk_dftimage_options o = {PK_BACKEND_CUDA, kernel, PK_PRECISION_SINGLE, 0, imag, 0};
        pk_image whole, banded;
        pk_dftimage_stats ws, bs;
        pk_status st = pk_dftimage_run(ctx, &o, vis, n, cell, &whole, &ws);
        CHECK_OK(st, ctx);
        if (st) continue;
        CHECK(ws.gpu_bands == 1 && ws.gpu_bytes > 0, "%s: one pass reports %d bands, %zu bytes", name, ws.gpu_bands,
              ws.gpu_bytes);
        /* bisection between a limit too small (0) and one that fits
         * whole: the bands only grow as the limit shrinks */
        size_t lo = 0, hi = ws.gpu_bytes, limit = 0;
        int found = 0;
        while (hi - lo > 1 && !found) {
            limit = lo + (hi - lo) / 2;
            o.gpu_memory = limit;
            st = pk_dftimage_run(ctx, &o, vis, n, cell, &banded, &bs);
            if (st == PK_ERR_NOMEM) {
                lo = limit;
                continue;
            }
            CHECK_OK(st, ctx);
            if (st) break;
            if (bs.gpu_bands >= 3) found = 1;
            else hi = limit, pk_image_free(&banded);
        }
        CHECK(found, "%s: no limit below %zu bytes gave three bands or more (last status %d)", name, ws.gpu_bytes,
              (int)st);
        if (found) {
            int f64 = pk_dftimage_kernel_precision(kernel) == PK_PRECISION_DOUBLE;
            int per_pixel = strstr(name, "usual") || strstr(name, "naive");
            double tol = f64 ? 1e-11 : per_pixel ? 2e-4 : 1e-5;
            double err = rel_l2(&banded, &ref, imag), diff = rel_l2(&banded, &whole, imag);
            int same = memcmp(banded.re, whole.re, n * n * sizeof(double)) == 0 &&
                       (!imag || memcmp(banded.im, whole.im, n * n * sizeof(double)) == 0);
            printf("%-24s %-16s bands n=%-4zu imag=%d  %d bands in %zu of %zu bytes, rel L2 %.3g, vs one pass %.3g%s\n",
                   what, name, n, imag, bs.gpu_bands, bs.gpu_bytes, ws.gpu_bytes, err, diff,
                   same ? " (same bits)" : "");
            CHECK(bs.gpu_bytes <= limit, "%s: %zu bytes allocated, more than the limit %zu", name, bs.gpu_bytes, limit);
            CHECK(err <= tol, "%s in bands: rel L2 error %.3g > %.3g", name, err, tol);
            if (per_pixel) CHECK(same, "%s in bands: not the one-pass image's bits (rel L2 %.3g)", name, diff);
            else CHECK(diff <= 1e-12, "%s in bands: rel L2 %.3g from the one-pass image", name, diff);
            pk_image_free(&banded);
        }
        o.gpu_memory = 4096;
        st = pk_dftimage_run(ctx, &o, vis, n, cell, &banded, &bs);
        CHECK(st == PK_ERR_NOMEM && strstr(ctx->message, "not enough GPU memory") && banded.re == NULL,
              "%s with 4096 bytes: status %d, '%s'", name, (int)st, ctx->message);
        pk_image_free(&whole);
    }
    pk_image_free(&ref);
}

/* The device's free memory taken between a run's sizing and its
 * allocations (pk_test_gpu_leave_free, as another process would):
 * every CUDA kernel sizes the image for one pass, finds the device full,
 * sizes it again from what is left and makes it in bands; the image against
 * the float64 reference and against the one-pass image (as in
 * compare_bands). Then too little left for one band, and too little for
 * the visibilities: PK_ERR_NOMEM, saying so, and no image. */
static void compare_taken(pk_context *ctx, const pk_vis *vis, const pk_vis *big, size_t n, double cell,
                          const char *what) {
    const size_t mib = (size_t)1 << 20;
    pk_dftimage_options ro = {PK_BACKEND_CPU, PK_DFTIMAGE_KERNEL_CPU_F64, PK_PRECISION_DOUBLE, 0, 1, 0};
    pk_image ref;
    CHECK_OK(pk_dftimage_run(ctx, &ro, vis, n, cell, &ref, NULL), ctx);
    for (int kernel = 100; kernel < 200; kernel++) {
        const char *name = pk_dftimage_kernel_name(kernel);
        if (!name) continue;
        pk_dftimage_options o = {PK_BACKEND_CUDA, kernel, PK_PRECISION_SINGLE, 0, 1, 0};
        pk_image whole, img;
        pk_dftimage_stats ws, ts;
        pk_status st = pk_dftimage_run(ctx, &o, vis, n, cell, &whole, &ws);
        CHECK_OK(st, ctx);
        if (st) continue;
        /* less than the one-pass image's bytes left, so that its first
         * allocation fails; above the margin kept below the free memory
         * (64 MiB), half of what the image needs beyond it: several bands */
        CHECK(ws.gpu_bytes > 96 * mib, "%s: the one-pass image takes %zu bytes, too few for this test", name,
              ws.gpu_bytes);
        pk_test_gpu_leave_free = 64 * mib + (ws.gpu_bytes - 64 * mib) / 2;
        st = pk_dftimage_run(ctx, &o, vis, n, cell, &img, &ts);
        pk_test_gpu_leave_free = 0;
        CHECK_OK(st, ctx);
        if (st == PK_OK) {
            int f64 = pk_dftimage_kernel_precision(kernel) == PK_PRECISION_DOUBLE;
            int per_pixel = strstr(name, "usual") || strstr(name, "naive");
            double tol = f64 ? 1e-11 : per_pixel ? 2e-4 : 1e-5;
            double err = rel_l2(&img, &ref, 1), diff = rel_l2(&img, &whole, 1);
            int same = memcmp(img.re, whole.re, n * n * sizeof(double)) == 0 &&
                       memcmp(img.im, whole.im, n * n * sizeof(double)) == 0;
            printf(
                "%-24s %-16s taken n=%-4zu  %d bands in %zu bytes (one pass: %d in %zu), rel L2 %.3g, vs one "
                "pass %.3g%s\n",
                what, name, n, ts.gpu_bands, ts.gpu_bytes, ws.gpu_bands, ws.gpu_bytes, err, diff,
                same ? " (same bits)" : "");
            CHECK(ws.gpu_bands == 1 && ts.gpu_bands >= 2 && ts.gpu_bytes < ws.gpu_bytes,
                  "%s: %d bands in %zu bytes with the memory taken, %d in %zu without", name, ts.gpu_bands,
                  ts.gpu_bytes, ws.gpu_bands, ws.gpu_bytes);
            CHECK(err <= tol, "%s, memory taken: rel L2 error %.3g > %.3g", name, err, tol);
            if (per_pixel) CHECK(same, "%s, memory taken: not the one-pass image's bits (rel L2 %.3g)", name, diff);
            else CHECK(diff <= 1e-12, "%s, memory taken: rel L2 %.3g from the one-pass image", name, diff);
            pk_image_free(&img);
        }
        /* 48 MiB left, less than the margin: the visibilities (~56 KB)
         * fit, the image does not, and no band is tried */
        pk_test_gpu_leave_free = 48 * mib;
        st = pk_dftimage_run(ctx, &o, vis, n, cell, &img, &ts);
        pk_test_gpu_leave_free = 0;
        CHECK(st == PK_ERR_NOMEM && strstr(ctx->message, "not enough GPU memory") &&
                  strstr(ctx->message, "for a band of") && img.re == NULL,
              "%s with 48 MiB left: status %d, '%s'", name, (int)st, ctx->message);
        pk_image_free(&whole);
    }
    /* the visibilities themselves do not fit in what is left */
    pk_dftimage_options o = {PK_BACKEND_CUDA, PK_DFTIMAGE_KERNEL_BEST, PK_PRECISION_SINGLE, 0, 0, 0};
    pk_image img;
    pk_test_gpu_leave_free = 32 * mib;
    pk_status st = pk_dftimage_run(ctx, &o, big, 64, cell, &img, NULL);
    pk_test_gpu_leave_free = 0;
    CHECK(st == PK_ERR_NOMEM && strstr(ctx->message, "visibilities take") && img.re == NULL,
          "%zu visibilities with 32 MiB left: status %d, '%s'", big->n, (int)st, ctx->message);
    pk_image_free(&ref);
}

int main(void) {
    if (pk_cuda_device_count() == 0) return check_skip("test_dftimage_cuda", "no CUDA device");
    pk_context ctx;
    pk_context_init(&ctx);
    check_rng rng = check_rng_make(20261130);
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
    {
        pk_vis vis;
        CHECK_OK(pk_vis_random(&ctx, 3001, check_next(&rng), &vis), &ctx);
        for (int imag = 0; imag <= 1; imag++) compare_bands(&ctx, &vis, 301, 0.0005, imag, "random");
        pk_vis_free(&vis);
    }
    {
        pk_vis vis, big;
        CHECK_OK(pk_vis_random(&ctx, 1001, check_next(&rng), &vis), &ctx);
        CHECK_OK(pk_vis_random(&ctx, (size_t)1 << 20, check_next(&rng), &big), &ctx);
        compare_taken(&ctx, &vis, &big, 3072, 0.0002, "random");
        pk_vis_free(&vis);
        pk_vis_free(&big);
    }
    pk_vis vis;
    pk_status st = pk_vis_read(&ctx, "data/vis/1133866760.uvfits", PK_WEIGHTS_ABS, &vis);
    CHECK_OK(st, &ctx);
    if (st == PK_OK) {
        compare_all(&ctx, &vis, 200, 0.004, 0, 0, "MWA uvfits");
        compare_all(&ctx, &vis, 64, 0.004, 0, 1, "MWA uvfits");
        compare_bands(&ctx, &vis, 200, 0.004, 0, "MWA uvfits");
        CHECK_OK(pk_vis_weighting(&ctx, &vis, PK_WEIGHTING_BRIGGS, 0, 200, 2e-4), &ctx);
        compare_all(&ctx, &vis, 200, 2e-4, 0, 0, "MWA uvfits, briggs 0");
        compare_psf(&ctx, &vis, 200, 2e-4, "MWA uvfits, briggs 0");
        pk_vis_free(&vis);
    }
    return check_finish("test_dftimage_cuda");
}
