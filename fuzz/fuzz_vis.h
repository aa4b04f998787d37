/* fuzz_vis.h - what the visibility reader targets check after a read: a
 * failure leaves an empty pk_vis and a message naming the file; a success
 * gives finite values and records in range. Small results are imaged on a
 * few pixels by every CPU kernel, so that whatever values a reader lets
 * through (1e300 wavelengths, denormals) also pass through the kernels'
 * phase reduction under the sanitizers. */
#ifndef PAIRKIT_FUZZ_VIS_H
#define PAIRKIT_FUZZ_VIS_H

#include <math.h>

#include "fuzz.h"
#include "pairkit/dftimage.h"

/* Visibilities up to this many are imaged: 16 x 8 x 8 terms per kernel. */
#define FUZZ_IMAGE_MAX_VIS 16
/* Imaging must succeed when |u|, |v|, |w| <= 2^38 wavelengths (the limit
 * pk_dftimage_run enforces) and |re|, |im| <= 1e30 (sums of 16 stay in
 * float32's range), except that a float32 kernel may refuse (invalid
 * input, with a message) phases its tiles cannot carry. Beyond either
 * limit it may fail, with a message, and must not crash. */
#define FUZZ_IMAGE_MAX_UVW 274877906944.0
#define FUZZ_IMAGE_MAX_VALUE 1e30

static inline void fuzz_vis_check(pk_status st, const pk_context *ctx, const char *path, const pk_vis *vis) {
    if (st != PK_OK) {
        FUZZ_REQUIRE(vis->n == 0 && !vis->u, "failed read left visibilities");
        FUZZ_REQUIRE(ctx->message[0] != '\0', "failure without a message");
        FUZZ_REQUIRE(strstr(ctx->message, path) != NULL, "message does not name the file: %s", ctx->message);
        return;
    }
    FUZZ_REQUIRE(vis->n >= 1 && vis->u && vis->v && vis->w && vis->re && vis->im, "empty result read as success");
    FUZZ_REQUIRE(vis->sign == 1 || vis->sign == -1, "sign %d", vis->sign);
    FUZZ_REQUIRE(vis->n <= vis->n_records, "%zu visibilities from %zu records", vis->n, vis->n_records);
    for (size_t k = 0; k < vis->n; k++)
        FUZZ_REQUIRE(isfinite(vis->u[k]) && isfinite(vis->v[k]) && isfinite(vis->w[k]) && isfinite(vis->re[k]) &&
                         isfinite(vis->im[k]),
                     "visibility %zu is not finite", k);
    FUZZ_REQUIRE(memchr(vis->object, '\0', sizeof vis->object) && memchr(vis->date_obs, '\0', sizeof vis->date_obs),
                 "unterminated header string");
    if (vis->n > FUZZ_IMAGE_MAX_VIS) return;
    int in_range = 1;
    for (size_t k = 0; k < vis->n; k++)
        if (fmax(fabs(vis->u[k]), fmax(fabs(vis->v[k]), fabs(vis->w[k]))) > FUZZ_IMAGE_MAX_UVW ||
            fmax(fabs(vis->re[k]), fabs(vis->im[k])) > FUZZ_IMAGE_MAX_VALUE)
            in_range = 0;
    static const int kernels[] = {PK_DFTIMAGE_KERNEL_REF, PK_DFTIMAGE_KERNEL_CPU_F64, PK_DFTIMAGE_KERNEL_CPU_SCALAR,
                                  PK_DFTIMAGE_KERNEL_CPU_AVX2, PK_DFTIMAGE_KERNEL_CPU_AVX512};
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        if (!pk_dftimage_kernel_available(kernels[k])) continue;
        pk_context ictx;
        pk_context_init(&ictx);
        ictx.n_threads = 1;
        pk_dftimage_options opts = {PK_BACKEND_CPU, kernels[k], pk_dftimage_kernel_precision(kernels[k]), 0, 1, 0};
        pk_image image;
        pk_status ist = pk_dftimage_run(&ictx, &opts, vis, 8, 0.01, &image, NULL);
        int must_succeed = in_range && !(opts.precision == PK_PRECISION_SINGLE && ist == PK_ERR_INVALID);
        if (must_succeed && ist != PK_OK)
            for (size_t v = 0; v < vis->n; v++)
                fprintf(stderr, "vis %zu: u %.17g v %.17g w %.17g re %.17g im %.17g\n", v, vis->u[v], vis->v[v],
                        vis->w[v], vis->re[v], vis->im[v]);
        if (must_succeed)
            FUZZ_REQUIRE(ist == PK_OK, "imaging with %s: %s", pk_dftimage_kernel_name(kernels[k]), ictx.message);
        else FUZZ_REQUIRE(ist == PK_OK || ictx.message[0], "imaging failed without a message");
        pk_image_free(&image);
    }
}

#endif
