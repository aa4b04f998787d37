/* dftimage.h - direct Fourier imaging of radio visibilities.
 *
 * The dirty image of N x N pixels with cell size d (radians) is, at pixel
 * (a, b) with l = (a - c) d, m = (b - c) d, c = floor(N / 2),
 * n' = sqrt(1 - l^2 - m^2) - 1:
 *
 *     I(l, m) = sum_k V_k exp(s 2 pi i (u_k l + v_k m + w_k n'))
 *
 * with u, v, w in wavelengths and V_k the weighted visibilities (the
 * readers apply the weights). The w term is kept: this is the exact
 * transform. The sign s is -1 for UVFITS and +1 for the .npz format of the
 * GPU imaging lesson (pk_vis.sign); options may override it. l points east
 * (increasing right ascension), m north. Details: docs/dftimage.md.
 *
 * Images in this API are arrays re[b * n + a] over the (a, b) grid above,
 * so a grows with l. The FITS and PNG writers flip the first axis so that
 * east is on the left, as astronomers display the sky.
 */
#ifndef PAIRKIT_DFTIMAGE_H
#define PAIRKIT_DFTIMAGE_H

#include "pairkit/pairkit.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default) /* the public API: what libpairkit.so exports */
#endif

/* ---- visibilities ------------------------------------------------------ */

/* A set of visibilities, one per baseline, time and channel. u, v, w in
 * wavelengths; re, im the visibility times its weight, and weight that
 * weight (flagged data are dropped by the readers, never stored). Every
 * value is finite. A pk_vis from pk_vis_alloc or a reader holds its six
 * arrays in one allocation, which pk_vis_free releases; one built by the
 * caller (its own arrays) is the caller's to free, not pk_vis_free's, and
 * may leave weight NULL: a weight of 1 for every visibility. */
typedef struct pk_vis {
    size_t n;
    double *u, *v, *w;
    double *re, *im;
    int sign;             /* the format's sign convention: -1 UVFITS, +1 npz */
    int has_phase_centre; /* 1 when ra0_deg, dec0_deg are known */
    double ra0_deg, dec0_deg;
    double freq_hz;    /* mean frequency of the channels (UVFITS), 0 when unknown */
    char object[72];   /* source name, "" when unknown */
    char date_obs[32]; /* ISO date of the first record, "" when unknown */
    size_t n_records;  /* visibilities in the file before flagging */
    size_t n_flagged;  /* of those, dropped as flagged */
    double weight_sum; /* sum of the weights used */
    double *weight;    /* each visibility's weight (> 0), or NULL: 1 each */
    int weighting;     /* pk_weighting applied (pk_vis_weighting), NATURAL as read */
    double robust;     /* its robustness, for BRIGGS */
    char bunit[24];    /* the data's unit (UVFITS BUNIT: "JY", "UNCALIB"), "" when unknown */
    double equinox;    /* of ra0_deg, dec0_deg (UVFITS EQUINOX or EPOCH: 2000, 1950), 0 when unknown */
    char radesys[12];  /* their frame as the file declares it (RADESYS or RADECSYS, one FITS names: "FK5",
                        * "FK4", "FK4-NO-E", "ICRS", "GAPPT"), "" otherwise; the image then takes FITS's
                        * default for the equinox (FK4 before 1984, FK5 after) */
} pk_vis;

/* How UVFITS weights are used. DATA: weight as stored, weight <= 0 is
 * flagged (AIPS). ABS: |weight|, only weight == 0 flagged (files whose
 * writer stored every weight negative). UNIT: weight 1 for every record
 * whose weight is not 0. */
typedef enum pk_weights { PK_WEIGHTS_DATA = 0, PK_WEIGHTS_ABS, PK_WEIGHTS_UNIT } pk_weights;

pk_status pk_weights_parse(const char *name, pk_weights *out);
/* "data", "abs", "unit"; "unknown" for a value outside the enum. */
const char *pk_weights_name(pk_weights weights);

/* Read visibilities: .npz (arrays u, v, w float64 and data complex128, as
 * numpy.savez writes them; weights are 1) or UVFITS (random groups), told
 * apart by the file's first bytes. UVFITS: u, v, w from seconds to
 * wavelengths with each channel's frequency (FQ table IF offsets and
 * channel widths included), one visibility per channel and IF, Stokes I from the parallel
 * hands (XX,YY or RR,LL; either alone when the other is flagged).
 * Errors name the file and the array, parameter, group or keyword. A
 * UVFITS read asks ctx's progress every 1024 groups: a nonzero answer
 * stops it with PK_ERR_CANCELLED, nothing kept. pk_vis_read and
 * pk_vis_read_uvfits refuse weights outside pk_weights (PK_ERR_INVALID)
 * before opening the file; pk_vis_read_npz takes none. */
pk_status pk_vis_read(pk_context *ctx, const char *path, pk_weights weights, pk_vis *out);
pk_status pk_vis_read_npz(pk_context *ctx, const char *path, pk_vis *out);
pk_status pk_vis_read_uvfits(pk_context *ctx, const char *path, pk_weights weights, pk_vis *out);

/* Write u, v, w and data (re + i im) as a .npz that numpy.load reads.
 * Atomic: on failure no file is left and an existing one is untouched. */
pk_status pk_vis_write_npz(pk_context *ctx, const char *path, const pk_vis *vis);

/* The benchmark problem: n visibilities with u, v and w normal, of mean 0
 * and standard deviation 300, 300 and 30 wavelengths, and re and im
 * standard normal; deterministic for a given seed on
 * every machine. sign = +1. */
pk_status pk_vis_random(pk_context *ctx, size_t n, uint64_t seed, pk_vis *out);

/* An empty pk_vis with arrays for n visibilities (contents undefined but
 * for weight, 1 for each). */
pk_status pk_vis_alloc(pk_context *ctx, size_t n, pk_vis *out);
/* Frees what pk_vis_alloc or a reader allocated; NULL and an emptied pk_vis
 * are fine. */
void pk_vis_free(pk_vis *vis);

/* Keeps the visibilities whose baseline length sqrt(u^2 + v^2) lies in
 * [min_l, max_l] wavelengths (max_l may be INFINITY), in their order, and
 * drops the others (autocorrelations, at 0, by min_l > 0): the arrays
 * compacted in place, n and weight_sum updated, *dropped (may be NULL)
 * the count dropped. PK_ERR_INVALID when the range is empty or negative,
 * or no visibility lies in it (nothing changed then). Select before
 * pk_vis_weighting: the imaging weights derive from the baselines present. */
pk_status pk_vis_select_uv(pk_context *ctx, pk_vis *vis, double min_l, double max_l, size_t *dropped);

/* ---- imaging weights ---------------------------------------------------- */

/* How the visibilities are weighted in the image, as imagers (CASA, WSClean)
 * do it. NATURAL: each by its own weight (as read). UNIFORM: weight w_k /
 * W(k), where W(k) is the sum of the weights in visibility k's uv cell, so
 * that every sampled cell weighs the same. BRIGGS (robust R): w_k / (1 +
 * W(k) f^2), f^2 = (5 10^-R)^2 / (sum_cells W^2 / sum_k w_k); R = -2 is
 * close to uniform, R = +2 close to natural. The uv cells are those of the
 * image, 1 / (n cell) wavelengths a side, with (u, v) and (-u, -v) in one
 * cell. */
typedef enum pk_weighting { PK_WEIGHTING_NATURAL = 0, PK_WEIGHTING_UNIFORM, PK_WEIGHTING_BRIGGS } pk_weighting;

pk_status pk_weighting_parse(const char *name, pk_weighting *out);
/* "natural", "uniform", "briggs"; "unknown" for a value outside the enum. */
const char *pk_weighting_name(pk_weighting weighting);

/* Reweights vis in place for an image of n x n pixels of cell radians:
 * re, im and weight of each visibility times its factor above, weight_sum
 * their new sum, weighting and robust recorded. NATURAL changes nothing.
 * vis->weight must be set; every weight finite and > 0, robust finite.
 * Errors name the visibility. */
pk_status pk_vis_weighting(pk_context *ctx, pk_vis *vis, pk_weighting weighting, double robust, size_t n, double cell);

/* ---- imaging ----------------------------------------------------------- */

typedef enum pk_precision { PK_PRECISION_SINGLE = 0, PK_PRECISION_DOUBLE } pk_precision;

/* Kernels. CPU ones below; CUDA kernels are numbered from 100 and named by
 * pk_dftimage_kernel_name. BEST picks the fastest of the backend for the
 * precision. */
typedef enum pk_dftimage_kernel {
    PK_DFTIMAGE_KERNEL_BEST = 0,
    PK_DFTIMAGE_KERNEL_REF,        /* float64 reference: libm sin and cos per term */
    PK_DFTIMAGE_KERNEL_CPU_F64,    /* float64, tile-centred phases, OpenMP */
    PK_DFTIMAGE_KERNEL_CPU_SCALAR, /* float32 polynomial sincos, portable C, OpenMP */
    PK_DFTIMAGE_KERNEL_CPU_AVX2,   /* the same with AVX2 + FMA */
    PK_DFTIMAGE_KERNEL_CPU_AVX512  /* the same with AVX-512 */
} pk_dftimage_kernel;

/* Options of pk_dftimage_run and pk_dftimage_psf; a field out of its range
 * is PK_ERR_INVALID naming it. precision DOUBLE with a kernel that computes
 * in single precision (scalar, avx2, avx512, a CUDA f32 kernel) is refused;
 * precision SINGLE (the default, so also "not said") with a float64 kernel
 * (ref, cpu-f64, a CUDA f64 kernel) runs that kernel in double, and the
 * image says so (pk_image.precision). */
typedef struct pk_dftimage_options {
    pk_backend backend;     /* AUTO by default */
    int kernel;             /* 0 = best for backend and precision */
    pk_precision precision; /* SINGLE by default */
    int sign;               /* +1 or -1; 0 = the data's own (pk_vis.sign, then +1 or -1) */
    int want_imag;          /* also compute the imaginary part */
    /* CUDA: bytes of device memory the run may allocate; 0 = what the
     * device has free. An image that does not fit is made in bands of
     * rows, one after another (each pixel gets the same sums); too little
     * for one band and the visibilities is PK_ERR_NOMEM with the least
     * that would do. */
    size_t gpu_memory;
} pk_dftimage_options;

/* A dirty image. re (and im when asked for) hold n * n values, row b at
 * re + b * n. Free with pk_image_free. */
typedef struct pk_image {
    size_t n;
    double cell; /* radians */
    double *re, *im;
    int sign; /* the sign used */
    pk_precision precision;
    int psf; /* 1: a point spread function (pk_dftimage_psf) */
    /* The fitted beam (pk_dftimage_beam_fit), written as BMAJ, BMIN, BPA;
     * bmaj == 0: none. FWHM in radians, position angle in degrees east of
     * north. */
    double bmaj, bmin, bpa;
    /* 1: divided by the weight sum (Jy/beam for data in Jy): written with
     * BUNIT = 'Jy/beam' for data in JY, else '<data unit>/beam', when the data's unit is known */
    int normalised;
} pk_image;

typedef struct pk_dftimage_stats {
    double terms;     /* visibility-pixel terms: n_vis * n * n */
    double seconds;   /* wall time of the imaging */
    double kernel_ms; /* device time of the kernels (CUDA), else 0 */
    int kernel;       /* the kernel that ran */
    int gpu_bands;    /* CUDA: bands of rows the image was made in (1: all at once); CPU: 0 */
    size_t gpu_bytes; /* CUDA: device memory allocated; CPU: 0 */
} pk_dftimage_stats;

/* The kernel's name; NULL for a number that is no kernel. */
const char *pk_dftimage_kernel_name(int kernel);
/* Look a kernel up by its exact name ("ref", "avx512", "cuda-final-f32", ...); -1 if unknown or NULL. */
int pk_dftimage_kernel_from_name(const char *name);
/* 1 if the kernel can run here (built in, CPU supports it, device present). */
int pk_dftimage_kernel_available(int kernel);
/* The precision a kernel computes in (SINGLE for BEST and for a number
 * that is no kernel). */
pk_precision pk_dftimage_kernel_precision(int kernel);

/* Bytes the image of n x n pixels needs on the host; fails with
 * PK_ERR_NOMEM and a message when that exceeds the machine's memory or
 * size_t, so callers learn before any work. */
pk_status pk_dftimage_check_size(pk_context *ctx, size_t n, int want_imag, size_t *bytes);

/* The image's grid as pk_dftimage_run checks it, before any work: a cell
 * above 0, every pixel on the sky (l^2 + m^2 < 1), the image within the
 * machine's memory (pk_dftimage_check_size). */
pk_status pk_dftimage_check_grid(pk_context *ctx, size_t n, double cell, int want_imag);

/* The dirty image of vis on n x n pixels of cell radians (0 < n, 0 < cell,
 * n * cell small enough that every pixel has l^2 + m^2 < 1). The sum of
 * the moduli |re + i im| must stay below half the largest value of the
 * precision's floats (1.7e38 in single, 9e307 in double): beyond it the
 * sums could overflow, and PK_ERR_INVALID names the visibility of the
 * largest modulus (for pk_dftimage_psf, the sum of the weights). An image
 * with a pixel that is not finite is never returned. stats may be
 * NULL. Progress is reported. On any failure, cancellation included, out
 * is left empty, as pk_image_free leaves it. vis and out are required,
 * and a vis with n > 0 needs its u, v, w, re and im arrays; opts NULL: the
 * defaults (pk_dftimage_options says which combinations are refused).
 * Reentrant; uses ctx->n_threads CPU threads. */
pk_status pk_dftimage_run(pk_context *ctx, const pk_dftimage_options *opts, const pk_vis *vis, size_t n, double cell,
                          pk_image *out, pk_dftimage_stats *stats);
void pk_image_free(pk_image *image);

/* The point spread function (dirty beam) of vis on the same grid: the
 * image of the weights alone (V_k = weight_k, 1 where weight is NULL),
 * divided by vis->weight_sum, so 1 at the phase centre when weight_sum is
 * the sum of the weights (a caller imaging a share of the visibilities
 * keeps the whole set's weight_sum, and the shares' PSFs add up). Real
 * part only; opts as for pk_dftimage_run (want_imag ignored); out->psf is 1. */
pk_status pk_dftimage_psf(pk_context *ctx, const pk_dftimage_options *opts, const pk_vis *vis, size_t n, double cell,
                          pk_image *out, pk_dftimage_stats *stats);

/* The beam of a PSF (pk_dftimage_psf): an elliptical Gaussian fitted to
 * its main lobe, the pixels reached from the phase centre by steps that
 * never rise and stay at half the centre's value or more, by least squares
 * on the logarithm (weighted by the pixel values). FWHM of the major and minor axes in radians, the
 * major axis's position angle in degrees east of north, in (-90, 90].
 * PK_ERR_INVALID, saying why, when the lobe reaches the image's edge, has
 * fewer than 5 pixels (the cells do not resolve it), or is no ellipse. */
pk_status pk_dftimage_beam_fit(pk_context *ctx, const pk_image *psf, double *bmaj, double *bmin, double *bpa);

/* The float64 reference at arbitrary direction cosines: for each point p,
 * re[p] + i im[p] = sum_k V_k exp(sign 2 pi i (u l_p + v m_p + w n'_p)),
 * l_p^2 + m_p^2 < 1. vis, and l, m, re when n_points > 0, are required;
 * im may be NULL. The specification every kernel is tested against. */
pk_status pk_dftimage_ref_points(pk_context *ctx, const pk_vis *vis, int sign, size_t n_points, const double *l,
                                 const double *m, double *re, double *im);

/* Direction cosines (l, m) of the sky position (ra, dec) in the SIN
 * projection about the phase centre (ra0, dec0); all in degrees. l is
 * east, m north. l or m NULL: nothing written. */
void pk_radec_to_lm(double ra_deg, double dec_deg, double ra0_deg, double dec0_deg, double *l, double *m);

/* Relative L2 error of an image against the float64 reference,
 * ||I - I_ref|| / ||I_ref||, over the real parts (and imaginary parts when
 * the image has them). With max_pixels == 0 or >= n * n every pixel is
 * compared; otherwise a fixed pseudo-random subset of max_pixels pixels.
 * vis, image (with its re) and rel_l2 required; n_compared may be NULL. */
pk_status pk_dftimage_check(pk_context *ctx, const pk_vis *vis, const pk_image *image, size_t max_pixels,
                            double *rel_l2, size_t *n_compared);

/* Write the image as a FITS primary image with a WCS header (RA---SIN /
 * DEC--SIN about the phase centre when vis has one, else plain l, m),
 * float32 or float64 as the image's precision; with with_imag, the
 * imaginary part as a second image extension named IMAG (PK_ERR_INVALID
 * when the image has none). East is on the left: FITS column i holds
 * a = n - 1 - i (CDELT1 < 0). A pixel that is not finite, or beyond
 * float32's range in a float32 image, is PK_ERR_INVALID naming it, and
 * nothing is written. path and image (with its re) required, vis may be
 * NULL (no phase centre). Atomic. */
pk_status pk_image_write_fits(pk_context *ctx, const char *path, const pk_image *image, const pk_vis *vis,
                              int with_imag);

/* Pixel value at FITS column i, row j (0-based) of the written image; NaN
 * for a NULL or empty image and for i or j outside it. */
double pk_image_fits_value(const pk_image *image, size_t i, size_t j);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
