/* api.c - the public dftimage entry points: kernel names and choice, input
 * checks, the image allocation (sized against the machine first), the run,
 * the comparison with the reference, and the benchmark generator.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dftimage_internal.h"

static const struct {
    int kernel;
    const char *name;
    pk_precision precision;
} cpu_kernels[] = {
    {PK_DFTIMAGE_KERNEL_REF, "ref", PK_PRECISION_DOUBLE},
    {PK_DFTIMAGE_KERNEL_CPU_F64, "cpu-f64", PK_PRECISION_DOUBLE},
    {PK_DFTIMAGE_KERNEL_CPU_SCALAR, "scalar", PK_PRECISION_SINGLE},
    {PK_DFTIMAGE_KERNEL_CPU_AVX2, "avx2", PK_PRECISION_SINGLE},
    {PK_DFTIMAGE_KERNEL_CPU_AVX512, "avx512", PK_PRECISION_SINGLE},
};
#define N_CPU_KERNELS (sizeof cpu_kernels / sizeof cpu_kernels[0])

const char *pk_dftimage_kernel_name(int kernel) {
    if (kernel == PK_DFTIMAGE_KERNEL_BEST) return "best";
    for (size_t k = 0; k < N_CPU_KERNELS; k++)
        if (cpu_kernels[k].kernel == kernel) return cpu_kernels[k].name;
#ifdef PK_HAVE_CUDA
    return pk_dft_cuda_kernel_name(kernel);
#else
    return NULL;
#endif
}

int pk_dftimage_kernel_from_name(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "best") == 0) return PK_DFTIMAGE_KERNEL_BEST;
    for (size_t k = 0; k < N_CPU_KERNELS; k++)
        if (strcmp(cpu_kernels[k].name, name) == 0) return cpu_kernels[k].kernel;
#ifdef PK_HAVE_CUDA
    return pk_dft_cuda_kernel_from_name(name);
#else
    return -1;
#endif
}

static int is_cuda_kernel(int kernel) {
    return kernel >= 100;
}

int pk_dftimage_kernel_available(int kernel) {
    switch (kernel) {
    case PK_DFTIMAGE_KERNEL_BEST:
    case PK_DFTIMAGE_KERNEL_REF:
    case PK_DFTIMAGE_KERNEL_CPU_F64:
    case PK_DFTIMAGE_KERNEL_CPU_SCALAR: return 1;
    case PK_DFTIMAGE_KERNEL_CPU_AVX2: return pk_cpu_has_avx2_fma();
    case PK_DFTIMAGE_KERNEL_CPU_AVX512: return pk_cpu_has_avx512();
    default:
#ifdef PK_HAVE_CUDA
        return is_cuda_kernel(kernel) && pk_dft_cuda_kernel_name(kernel) != NULL && pk_cuda_device_count() > 0;
#else
        return 0;
#endif
    }
}

pk_precision pk_dftimage_kernel_precision(int kernel) {
    for (size_t k = 0; k < N_CPU_KERNELS; k++)
        if (cpu_kernels[k].kernel == kernel) return cpu_kernels[k].precision;
#ifdef PK_HAVE_CUDA
    if (is_cuda_kernel(kernel)) return pk_dft_cuda_kernel_precision(kernel);
#endif
    return PK_PRECISION_SINGLE;
}

/* The fastest CPU kernel of a precision on this CPU (docs/performance.md). */
static int best_cpu_kernel(pk_precision precision) {
    if (precision == PK_PRECISION_DOUBLE) return PK_DFTIMAGE_KERNEL_CPU_F64;
    if (pk_cpu_has_avx512()) return PK_DFTIMAGE_KERNEL_CPU_AVX512;
    if (pk_cpu_has_avx2_fma()) return PK_DFTIMAGE_KERNEL_CPU_AVX2;
    return PK_DFTIMAGE_KERNEL_CPU_SCALAR;
}

static pk_status choose_kernel(pk_context *ctx, const pk_dftimage_options *o, pk_backend *backend, int *kernel) {
    if (o->kernel != PK_DFTIMAGE_KERNEL_BEST) {
        if (!pk_dftimage_kernel_name(o->kernel)) return pk_fail(ctx, PK_ERR_INVALID, "unknown kernel %d", o->kernel);
        if (!pk_dftimage_kernel_available(o->kernel))
            return pk_fail(
                ctx, PK_ERR_UNSUPPORTED, "kernel '%s' cannot run here (%s)", pk_dftimage_kernel_name(o->kernel),
                pk_kernel_absent_reason(is_cuda_kernel(o->kernel), o->kernel == PK_DFTIMAGE_KERNEL_CPU_AVX512));
        *backend = is_cuda_kernel(o->kernel) ? PK_BACKEND_CUDA : PK_BACKEND_CPU;
        if (o->backend != PK_BACKEND_AUTO && o->backend != *backend)
            return pk_fail(ctx, PK_ERR_INVALID, "kernel '%s' does not belong to backend '%s'",
                           pk_dftimage_kernel_name(o->kernel), pk_backend_name(o->backend));
        *kernel = o->kernel;
        return PK_OK;
    }
    pk_status st = pk_backend_resolve(ctx, o->backend, backend);
    if (st) return st;
#ifdef PK_HAVE_CUDA
    if (*backend == PK_BACKEND_CUDA) {
        *kernel = pk_dft_cuda_best(o->precision);
        return PK_OK;
    }
#endif
    *kernel = best_cpu_kernel(o->precision);
    return PK_OK;
}

pk_status pk_dftimage_check_size(pk_context *ctx, size_t n, int want_imag, size_t *bytes) {
    pk_clear(ctx);
    size_t planes = want_imag ? 2 : 1;
    /* The image in double, plus as much again for the backends' scratch
     * (the reference's pixel coordinates, a device's partial images). */
    size_t per_pixel = planes * sizeof(double) * 2;
    if (n == 0) return pk_fail(ctx, PK_ERR_INVALID, "image size must be at least 1 pixel");
    if (n > ((size_t)1 << 31) || n * n > SIZE_MAX / per_pixel)
        return pk_fail(ctx, PK_ERR_NOMEM, "an image of %zu x %zu pixels does not fit in memory", n, n);
    size_t need = n * n * per_pixel;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
        double have = (double)pages * (double)page;
        if ((double)need > have)
            return pk_fail(ctx, PK_ERR_NOMEM,
                           "an image of %zu x %zu pixels needs %.1f GiB, more than this machine's %.1f GiB of memory",
                           n, n, (double)need / 1073741824.0, have / 1073741824.0);
    }
    if (bytes) *bytes = need;
    return PK_OK;
}

pk_status pk_vis_arrays_check(pk_context *ctx, const char *fn, const pk_vis *vis) {
    const double *arrays[5] = {vis->u, vis->v, vis->w, vis->re, vis->im};
    static const char *const names[5] = {"u", "v", "w", "re", "im"};
    for (int a = 0; a < 5 && vis->n; a++)
        if (!arrays[a])
            return pk_fail(ctx, PK_ERR_INVALID, "%s%spk_vis.%s is NULL (with n = %zu visibilities)", fn ? fn : "",
                           fn ? ": " : "", names[a], vis->n);
    return PK_OK;
}

static pk_status check_vis(pk_context *ctx, const char *fn, const pk_vis *vis) {
    if (!vis || vis->n == 0) return pk_fail(ctx, PK_ERR_INVALID, "no visibilities to image");
    pk_status st = pk_vis_arrays_check(ctx, fn, vis);
    if (st) return st;
    for (size_t k = 0; k < vis->n; k++) {
        if (!isfinite(vis->u[k]) || !isfinite(vis->v[k]) || !isfinite(vis->w[k]))
            return pk_fail(ctx, PK_ERR_INVALID, "visibility %zu: %s is not finite", k,
                           !isfinite(vis->u[k])   ? "u"
                           : !isfinite(vis->v[k]) ? "v"
                                                  : "w");
        if (fabs(vis->u[k]) > PK_DFT_MAX_UVW || fabs(vis->v[k]) > PK_DFT_MAX_UVW || fabs(vis->w[k]) > PK_DFT_MAX_UVW)
            return pk_fail(ctx, PK_ERR_INVALID,
                           "visibility %zu: u, v, w = (%g, %g, %g) wavelengths; at most 2^38 (%.3g) can be imaged", k,
                           vis->u[k], vis->v[k], vis->w[k], PK_DFT_MAX_UVW);
        if (!isfinite(vis->re[k]) || !isfinite(vis->im[k]))
            return pk_fail(ctx, PK_ERR_INVALID, "visibility %zu: the value is not finite (NaN or inf)", k);
    }
    return PK_OK;
}

/* The float32 kernels sum s (u dl + v dm + w dn) in float32 over a tile
 * whose pixels lie at most PK_DFT_F32_TILE_HALF cells from its centre on
 * each axis (CPU 32 x 8 pixels, CUDA 32 x 32). The rounding of that sum
 * grows with its size: measured on random visibilities (u, v ~ N(0, 300),
 * 20,000 of them, avx512 / scalar kernels) the image's relative error is
 * 5.7e-7 at a largest offset of about 19 turns, 1.8e-6 at 77, 4.0e-6 at
 * 190, 1.0e-5 / 1.4e-5 at 460 and 1.9e-5 / 2.6e-5 at 960: near the usual
 * float32 kernel's 3.1e-5. Past PK_DFT_F32_MAX_TURNS single precision is
 * refused (its phases may also overflow to NaN beyond). */
#define PK_DFT_F32_TILE_HALF 16.0
#define PK_DFT_F32_MAX_TURNS 1024.0

/* The largest |u dl| + |v dm| + |w dn| over the visibilities and any
 * float32 tile's offsets, in turns; *worst the visibility that reaches it. */
static double f32_offset_turns(const pk_vis *vis, size_t n, double cell, size_t *worst) {
    double h = PK_DFT_F32_TILE_HALF * cell;
    /* |dn| <= |grad n'| sqrt(2) h + h^2 with |grad n'| = r / sqrt(1 - r^2) at
     * the farthest pixel of a padded tile, and |dn| <= 1 always */
    double r = ((double)(n / 2) + 2.0 * PK_DFT_F32_TILE_HALF) * cell * sqrt(2.0);
    double dn = r < 0.999 ? r / sqrt(1.0 - r * r) * sqrt(2.0) * h + h * h : 1.0;
    if (dn > 1.0) dn = 1.0;
    double most = 0;
    *worst = 0;
    for (size_t k = 0; k < vis->n; k++) {
        double t = (fabs(vis->u[k]) + fabs(vis->v[k])) * h + fabs(vis->w[k]) * dn;
        if (t > most) most = t, *worst = k;
    }
    return most;
}

/* Every term of a pixel's sum, and every partial sum, is at most
 * sum_k |V_k| in magnitude (V_k = re + i im, the visibility times its
 * weight), plus rounding. A precision's kernels image data whose sum of
 * moduli stays below half its largest value (FLT_MAX or DBL_MAX): the other
 * half leaves room for the rounding of the sums. */
static double amplitude_limit(pk_precision precision) {
    return 0.5 * (precision == PK_PRECISION_DOUBLE ? DBL_MAX : (double)FLT_MAX);
}

/* sum_k |V_k| in double (inf beyond it), *largest the visibility of the
 * largest |V_k|. */
static double amplitude_sum(const pk_vis *vis, size_t *largest) {
    double sum = 0, most = -1;
    *largest = 0;
    for (size_t k = 0; k < vis->n; k++) {
        double a = hypot(vis->re[k], vis->im[k]);
        sum += a;
        if (a > most) most = a, *largest = k;
    }
    return sum;
}

/* What the sums carry: the data's amplitudes, or for a beam the weights. */
static const char *amplitude_name(int beam) {
    return beam ? "weights" : "amplitudes (weight times |V|)";
}

/* The sum in words ("1.5e+40", "over 1.8e+308"), and the advice: double
 * precision where float64 sums hold it, else smaller data. */
static void sum_words(double sum, char *text, size_t size, const char **advice) {
    if (isfinite(sum)) snprintf(text, size, "%.3g", sum);
    else snprintf(text, size, "over %.3g", DBL_MAX);
    *advice = sum <= amplitude_limit(PK_PRECISION_DOUBLE) ? "use double precision (--precision double)"
                                                          : "scale the data down";
}

/* PK_ERR_INVALID, naming the largest visibility, when sum_k |V_k| exceeds
 * what the precision can sum. */
static pk_status check_amplitudes(pk_context *ctx, const pk_vis *vis, pk_precision precision, int beam) {
    size_t k;
    double sum = amplitude_sum(vis, &k);
    if (sum <= amplitude_limit(precision)) return PK_OK;
    char sum_text[48], value[80];
    const char *advice;
    sum_words(sum, sum_text, sizeof sum_text, &advice);
    if (beam) snprintf(value, sizeof value, "weight %.3g", vis->re[k]);
    else snprintf(value, sizeof value, "V = %.3g%+.3gi", vis->re[k], vis->im[k]);
    int f64_too = !(sum <= amplitude_limit(PK_PRECISION_DOUBLE));
    return pk_fail(ctx, PK_ERR_INVALID,
                   "visibility %zu: %s, the largest of the %zu; the %s sum to %s, more than %s sums may reach "
                   "(%.3g, half its largest value); %s",
                   k, value, vis->n, amplitude_name(beam), sum_text, f64_too ? "even float64" : "float32",
                   amplitude_limit(f64_too ? PK_PRECISION_DOUBLE : PK_PRECISION_SINGLE), advice);
}

pk_status pk_dftimage_check_grid(pk_context *ctx, size_t n, double cell, int want_imag) {
    pk_clear(ctx);
    if (!(cell > 0) || !isfinite(cell)) return pk_fail(ctx, PK_ERR_INVALID, "cell size must be > 0, got %g", cell);
    pk_status st = pk_dftimage_check_size(ctx, n, want_imag, NULL);
    if (st) return st;
    double edge = (double)(n / 2) * cell;
    if (!(2.0 * edge * edge < 1.0))
        return pk_fail(ctx, PK_ERR_INVALID,
                       "%zu pixels of %g rad reach beyond the sky (l^2 + m^2 >= 1 at the corners); use a smaller cell "
                       "or image (--cell, --size)",
                       n, cell);
    return PK_OK;
}

/* The options' fields that are not the data's: enums within their range,
 * the sign +1, -1 or 0. */
static pk_status check_options(pk_context *ctx, const pk_dftimage_options *o) {
    if ((unsigned)o->backend > PK_BACKEND_CUDA)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_options.backend: %d is not auto (0), cpu (1) or cuda (2)",
                       (int)o->backend);
    if ((unsigned)o->precision > PK_PRECISION_DOUBLE)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_options.precision: %d is not single (0) or double (1)",
                       (int)o->precision);
    if (o->sign != 0 && o->sign != 1 && o->sign != -1)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_options.sign must be +1, -1 or 0 (the data's), got %d",
                       o->sign);
    return PK_OK;
}

/* pk_dftimage_run; beam: vis holds the weights (pk_dftimage_psf), for the
 * messages. out is emptied by the caller. */
static pk_status run_image(pk_context *ctx, const pk_dftimage_options *opts, const pk_vis *vis, size_t n, double cell,
                           pk_image *out, pk_dftimage_stats *stats, int beam) {
    pk_clear(ctx);
    pk_dftimage_options o = {PK_BACKEND_AUTO, PK_DFTIMAGE_KERNEL_BEST, PK_PRECISION_SINGLE, 0, 0, 0};
    if (opts) o = *opts;
    pk_status st = check_options(ctx, &o);
    if (st) return st;
    if ((st = check_vis(ctx, beam ? "pk_dftimage_psf" : "pk_dftimage_run", vis)) != PK_OK) return st;
    if ((st = pk_dftimage_check_grid(ctx, n, cell, o.want_imag)) != PK_OK) return st;
    /* the options' sign was checked above: a wrong one here is the data's */
    int sign = o.sign ? o.sign : vis->sign;
    if (sign != 1 && sign != -1)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "pk_vis.sign must be +1 or -1, got %d (used because pk_dftimage_options.sign is 0)", sign);
    pk_backend backend = PK_BACKEND_CPU;
    int kernel = PK_DFTIMAGE_KERNEL_BEST;
    if ((st = choose_kernel(ctx, &o, &backend, &kernel)) != PK_OK) return st;
    /* a float64 kernel asked for single precision computes in double (the
     * default precision asks for nothing); the reverse would quietly lose
     * the digits asked for */
    if (o.precision == PK_PRECISION_DOUBLE && pk_dftimage_kernel_precision(kernel) == PK_PRECISION_SINGLE)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "kernel %s computes in single precision, pk_dftimage_options.precision asks for double: use a "
                       "float64 kernel (cpu-f64, ref, or 0 for the best) or single precision",
                       pk_dftimage_kernel_name(kernel));
    if (pk_dftimage_kernel_precision(kernel) == PK_PRECISION_SINGLE) {
        size_t k;
        double turns = f32_offset_turns(vis, n, cell, &k);
        if (turns > PK_DFT_F32_MAX_TURNS)
            return pk_fail(ctx, PK_ERR_INVALID,
                           "visibility %zu (u, v, w = %g, %g, %g wavelengths) turns its phase by up to %.3g turns "
                           "across a tile of %g rad cells, more than the %g turns float32 phases are accurate for; use "
                           "double precision or a smaller cell (--precision double, --cell)",
                           k, vis->u[k], vis->v[k], vis->w[k], turns, cell, PK_DFT_F32_MAX_TURNS);
    }
    if ((st = check_amplitudes(ctx, vis, pk_dftimage_kernel_precision(kernel), beam)) != PK_OK) return st;

    out->n = n;
    out->cell = cell;
    out->sign = sign;
    out->precision = pk_dftimage_kernel_precision(kernel);
    out->re = malloc(n * n * sizeof(double));
    out->im = o.want_imag ? malloc(n * n * sizeof(double)) : NULL;
    if (!out->re || (o.want_imag && !out->im)) {
        pk_image_free(out);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for an image of %zu x %zu pixels", n, n);
    }
    pk_dft_job job = {vis, n, cell, sign, o.want_imag, out->re, out->im, o.gpu_memory};
    pk_progress progress;
    double terms = (double)vis->n * (double)n * (double)n;
    pk_progress_begin(&progress, ctx, terms, 0.0, 1.0);
    /* every pixel must be written: NaN first, by the threads (a large
     * image's first touch of its pages takes seconds), in bands of rows
     * that watch for cancellation */
    {
        const int64_t rows = (int64_t)n, band = 64;
        int cancelled = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(pk_thread_count(ctx)) if (n * n >= (1u << 20))
        for (int64_t r0 = 0; r0 < rows; r0 += band) {
            int stop;
#pragma omp atomic read
            stop = cancelled;
            if (stop) continue;
            size_t p0 = (size_t)r0 * n, p1 = (size_t)(r0 + band < rows ? r0 + band : rows) * n;
            for (size_t p = p0; p < p1; p++) {
                out->re[p] = (double)NAN;
                if (out->im) out->im[p] = (double)NAN;
            }
            int owner = pk_thread_num() == 0;
            if (pk_progress_add(&progress, 0.0, owner)) {
#pragma omp atomic write
                cancelled = 1;
            }
        }
        if (cancelled) {
            pk_image_free(out);
            return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        }
    }
    double kernel_ms = 0, t0 = pk_now();
    int bands = 0;
    size_t gpu_bytes = 0;
#ifdef PK_HAVE_CUDA
    if (backend == PK_BACKEND_CUDA) {
        pk_dft_cuda_report report;
        st = pk_dft_run_cuda(ctx, kernel, &job, &progress, &report);
        kernel_ms = report.kernel_ms, bands = report.bands, gpu_bytes = report.gpu_bytes;
    } else
#endif
        st = pk_dft_run_cpu(ctx, kernel, &job, &progress);
    (void)backend;
    double seconds = pk_now() - t0;
    if (st == PK_OK) {
        for (size_t p = 0; p < n * n; p++) {
            double value = out->re[p];
            if (isfinite(value) && out->im) value = out->im[p];
            if (isfinite(value)) continue;
            size_t k;
            double sum = amplitude_sum(vis, &k);
            const char *kernel_name = pk_dftimage_kernel_name(kernel);
            int single = out->precision == PK_PRECISION_SINGLE;
            if (isinf(value) || !(sum <= amplitude_limit(out->precision))) {
                /* only sums too large make an infinite pixel; phases that
                 * overflow make NaN */
                char sum_text[48];
                const char *advice;
                sum_words(sum, sum_text, sizeof sum_text, &advice);
                st = pk_fail(ctx, PK_ERR_INVALID,
                             "kernel %s: pixel (%zu, %zu) is %g: the sums of the data's %s overflowed %s (they sum "
                             "to %s); %s",
                             kernel_name, p % n, p / n, value, amplitude_name(beam), single ? "float32" : "float64",
                             sum_text, single ? advice : "scale the data down");
            } else if (single) {
                /* float32 tiles carry u dl + v dm + w dn turns in float32:
                 * baselines of ~1e8 wavelengths and more at coarse cells
                 * overflow it. */
                st = pk_fail(
                    ctx, PK_ERR_INVALID,
                    "kernel %s: the float32 phases overflowed at pixel (%zu, %zu): baselines too long "
                    "for cells of %g rad in single precision; use double precision or a smaller cell (--precision "
                    "double, --cell)",
                    kernel_name, p % n, p / n, cell);
            } else {
                st = pk_fail(ctx, PK_ERR_INTERNAL, "kernel %s left pixel (%zu, %zu) unwritten or NaN", kernel_name,
                             p % n, p / n);
            }
            break;
        }
    }
    if (st) {
        pk_image_free(out);
        return st;
    }
    if (stats) {
        stats->terms = terms;
        stats->seconds = seconds;
        stats->kernel_ms = kernel_ms;
        stats->kernel = kernel;
        stats->gpu_bands = bands;
        stats->gpu_bytes = gpu_bytes;
    }
    return PK_OK;
}

pk_status pk_dftimage_run(pk_context *ctx, const pk_dftimage_options *opts, const pk_vis *vis, size_t n, double cell,
                          pk_image *out, pk_dftimage_stats *stats) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_run: out is NULL");
    memset(out, 0, sizeof *out);
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_run: vis is NULL");
    return run_image(ctx, opts, vis, n, cell, out, stats, 0);
}

void pk_image_free(pk_image *image) {
    if (!image) return;
    free(image->re);
    free(image->im);
    memset(image, 0, sizeof *image);
}

pk_status pk_dftimage_psf(pk_context *ctx, const pk_dftimage_options *opts, const pk_vis *vis, size_t n, double cell,
                          pk_image *out, pk_dftimage_stats *stats) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_psf: out is NULL");
    memset(out, 0, sizeof *out);
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_psf: vis is NULL");
    if (vis->n == 0) return pk_fail(ctx, PK_ERR_INVALID, "no visibilities to image");
    pk_status st = pk_vis_arrays_check(ctx, "pk_dftimage_psf", vis);
    if (st) return st;
    if (!(vis->weight_sum > 0) || !isfinite(vis->weight_sum))
        return pk_fail(ctx, PK_ERR_INVALID, "the sum of the weights is %g: the beam cannot be normalised",
                       vis->weight_sum);
    if (vis->n > SIZE_MAX / (2 * sizeof(double)))
        return pk_fail(ctx, PK_ERR_NOMEM, "%zu visibilities do not fit in memory", vis->n);
    double *mem = malloc(2 * vis->n * sizeof(double));
    if (!mem) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the beam's %zu visibilities", vis->n);
    pk_vis beam = *vis;
    beam.re = mem;
    beam.im = mem + vis->n;
    for (size_t k = 0; k < vis->n; k++) {
        double wk = vis->weight ? vis->weight[k] : 1.0;
        if (!isfinite(wk)) {
            free(mem);
            return pk_fail(ctx, PK_ERR_INVALID, "visibility %zu: the weight is not finite (%g)", k, wk);
        }
        beam.re[k] = wk;
        beam.im[k] = 0.0;
    }
    pk_dftimage_options o = {PK_BACKEND_AUTO, PK_DFTIMAGE_KERNEL_BEST, PK_PRECISION_SINGLE, 0, 0, 0};
    if (opts) o = *opts;
    o.want_imag = 0;
    st = run_image(ctx, &o, &beam, n, cell, out, stats, 1);
    free(mem);
    if (st) return st;
    double scale = 1.0 / vis->weight_sum;
    for (size_t p = 0; p < n * n; p++) out->re[p] *= scale;
    out->psf = 1;
    return PK_OK;
}

/* ---- comparison with the reference -------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

pk_status pk_dftimage_check(pk_context *ctx, const pk_vis *vis, const pk_image *image, size_t max_pixels,
                            double *rel_l2, size_t *n_compared) {
    pk_clear(ctx);
    if (!vis) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_check: vis is NULL");
    if (!image) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_check: image is NULL");
    if (!rel_l2) return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_check: rel_l2 is NULL");
    if (!image->re || image->n == 0)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_dftimage_check: the image is empty (n %zu, re %s)", image->n,
                       image->re ? "set" : "NULL");
    size_t n = image->n, n_pix = n * n;
    size_t count = (max_pixels == 0 || max_pixels >= n_pix) ? n_pix : max_pixels;
    size_t *index = malloc(count * sizeof(size_t));
    double *l = malloc(count * sizeof(double)), *m = malloc(count * sizeof(double));
    double *re = malloc(count * sizeof(double)), *im = malloc(count * sizeof(double));
    if (!index || !l || !m || !re || !im) {
        free(index), free(l), free(m), free(re), free(im);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the reference check");
    }
    uint64_t seed = 20261129;
    for (size_t p = 0; p < count; p++) {
        size_t q = count == n_pix ? p : (size_t)(splitmix64(&seed) % n_pix);
        index[p] = q;
        l[p] = pk_dft_pixel_lm(q % n, n, image->cell);
        m[p] = pk_dft_pixel_lm(q / n, n, image->cell);
    }
    pk_status st = pk_dftimage_ref_points(ctx, vis, image->sign, count, l, m, re, im);
    if (st == PK_OK) {
        /* the values divided by the largest, so that the squares of
         * amplitudes beyond 1e154 neither overflow nor, near 1e-154,
         * underflow */
        double big = 0;
        for (size_t p = 0; p < count; p++) {
            big = fmax(big, fmax(fabs(re[p]), fabs(image->re[index[p]])));
            if (image->im) big = fmax(big, fmax(fabs(im[p]), fabs(image->im[index[p]])));
        }
        if (!(big > 0) || !isfinite(big)) big = 1;
        double num = 0, den = 0;
        for (size_t p = 0; p < count; p++) {
            double d = image->re[index[p]] / big - re[p] / big, r = re[p] / big;
            num += d * d;
            den += r * r;
            if (image->im) {
                d = image->im[index[p]] / big - im[p] / big, r = im[p] / big;
                num += d * d;
                den += r * r;
            }
        }
        *rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num) * big; /* no reference: the absolute error */
        if (n_compared) *n_compared = count;
    }
    free(index), free(l), free(m), free(re), free(im);
    return st;
}

/* ---- visibilities ----------------------------------------------------------- */

pk_status pk_weights_parse(const char *name, pk_weights *out) {
    if (!name || !out) return PK_ERR_INVALID;
    if (strcmp(name, "data") == 0) *out = PK_WEIGHTS_DATA;
    else if (strcmp(name, "abs") == 0) *out = PK_WEIGHTS_ABS;
    else if (strcmp(name, "unit") == 0) *out = PK_WEIGHTS_UNIT;
    else return PK_ERR_INVALID;
    return PK_OK;
}

const char *pk_weights_name(pk_weights weights) {
    switch (weights) {
    case PK_WEIGHTS_DATA: return "data";
    case PK_WEIGHTS_ABS: return "abs";
    case PK_WEIGHTS_UNIT: return "unit";
    }
    return "unknown";
}

pk_status pk_vis_alloc(pk_context *ctx, size_t n, pk_vis *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_alloc: out is NULL");
    memset(out, 0, sizeof *out);
    if (n > SIZE_MAX / (6 * sizeof(double)) - 16)
        return pk_fail(ctx, PK_ERR_NOMEM, "%zu visibilities do not fit in memory", n);
    double *mem = malloc((6 * n + 6) * sizeof(double));
    if (!mem) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %zu visibilities", n);
    out->n = n;
    out->u = mem;
    out->v = mem + n + 1;
    out->w = mem + 2 * (n + 1);
    out->re = mem + 3 * (n + 1);
    out->im = mem + 4 * (n + 1);
    out->weight = mem + 5 * (n + 1);
    for (size_t k = 0; k < n; k++) out->weight[k] = 1.0;
    out->sign = 1;
    return PK_OK;
}

void pk_vis_free(pk_vis *vis) {
    if (!vis) return;
    free(vis->u);
    memset(vis, 0, sizeof *vis);
}

/* Standard normal deviates by Box-Muller from 53-bit uniforms. */
static void normal_pair(uint64_t *state, double *a, double *b) {
    double u1 = ((double)(splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
    double r = sqrt(-2.0 * log(u1));
    *a = r * cos(PK_DFT_TWO_PI * u2);
    *b = r * sin(PK_DFT_TWO_PI * u2);
}

pk_status pk_vis_random(pk_context *ctx, size_t n, uint64_t seed, pk_vis *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_random: out is NULL");
    pk_status st = pk_vis_alloc(ctx, n, out);
    if (st) return st;
    uint64_t state = seed;
    for (size_t k = 0; k < n; k++) {
        double a, b, c, d, e, f;
        normal_pair(&state, &a, &b);
        normal_pair(&state, &c, &d);
        normal_pair(&state, &e, &f);
        out->u[k] = 300.0 * a;
        out->v[k] = 300.0 * b;
        out->w[k] = 30.0 * c;
        out->re[k] = d;
        out->im[k] = e;
        (void)f;
    }
    out->sign = 1;
    out->n_records = n;
    out->weight_sum = (double)n;
    return PK_OK;
}

pk_status pk_vis_read(pk_context *ctx, const char *path, pk_weights weights, pk_vis *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read: path is NULL");
    if ((unsigned)weights > PK_WEIGHTS_UNIT)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_vis_read: weights %d is not data (0), abs (1) or unit (2)",
                       (int)weights);
    FILE *fp;
    pk_status st = pk_open_read(ctx, path, &fp);
    if (st) return st;
    unsigned char head[8] = {0};
    size_t got = fread(head, 1, sizeof head, fp);
    fclose(fp);
    if (got >= 4 && head[0] == 'P' && head[1] == 'K') return pk_vis_read_npz(ctx, path, out);
    if ((got >= 6 && memcmp(head, "SIMPLE", 6) == 0) || (got >= 2 && head[0] == 0x1f && head[1] == 0x8b)) {
        /* plain or gzip-compressed; the reader asks a context for progress */
        pk_context none;
        pk_context_init(&none);
        return pk_vis_read_uvfits(ctx ? ctx : &none, path, weights, out);
    }
    if (got == 0) return pk_fail(ctx, PK_ERR_PARSE, "%s: empty file", path);
    return pk_fail(ctx, PK_ERR_PARSE,
                   "%s: neither a .npz (zip) nor a FITS file (it starts with neither 'PK' nor 'SIMPLE', nor is it "
                   "gzip-compressed)",
                   path);
}
