/* cuda.cu - the CUDA backend of dftimage: a ladder of kernels from the
 * naive float64 one to the final float32 one, each selectable by name so
 * that `pairkit bench dftimage` shows what each step bought.
 *
 *   cuda-naive-f64   one thread per pixel, float64 sincospi, global loads
 *   cuda-naive-f32   the same in float32 with accurate sincosf
 *   cuda-usual-f32   the usual optimised kernel: visibilities cached in
 *                    shared memory, 3 pixels per thread, __sincosf, FMA;
 *                    phases of tens of turns summed in float32
 *   cuda-tile-f32    tile-centred phases: per visibility and block the
 *                    phase at the tile centre in float64, reduced to
 *                    [-0.5, 0.5] turns; per pixel only the offset phase in
 *                    float32 (dftimage_internal.h), __sincosf, 8 pixels per
 *                    thread in one column so u dl is shared
 *   cuda-final-f32   tile-centred; for the real image only one cosine per
 *                    term, amp cos(phase + psi) (pk_dft_polar), on the MUFU
 *                    unit
 *   cuda-hybrid-f32  as final, with one pixel in eight (real) or two in
 *                    eight (complex) taking a polynomial sincos on the FMA
 *                    pipe, so that the SFU, which bounds final, is not the
 *                    only unit doing sines and cosines
 *   cuda-tile-f64    tile-centred float64 with sincospi
 *
 * Work is split into visibility batches (one launch each, so progress and
 * cancellation are seen between launches) and, inside a launch, into
 * visibility slices (gridDim.z) that write partial images, summed by a last
 * kernel in slice order: results do not depend on scheduling.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "dftimage_internal.h"
}
#include "../common/cuda_check.cuh"

enum {
    K_NAIVE_F64 = PK_DFTIMAGE_KERNEL_CUDA_FIRST,
    K_NAIVE_F32,
    K_USUAL_F32,
    K_TILE_F32,
    K_FINAL_F32,
    K_HYBRID_F32,
    K_TILE_F64 = PK_DFTIMAGE_KERNEL_CUDA_FIRST + 10,
};

static const struct {
    int kernel;
    const char *name;
    pk_precision precision;
} cuda_kernels[] = {
    {K_NAIVE_F64, "cuda-naive-f64", PK_PRECISION_DOUBLE}, {K_NAIVE_F32, "cuda-naive-f32", PK_PRECISION_SINGLE},
    {K_USUAL_F32, "cuda-usual-f32", PK_PRECISION_SINGLE}, {K_TILE_F32, "cuda-tile-f32", PK_PRECISION_SINGLE},
    {K_FINAL_F32, "cuda-final-f32", PK_PRECISION_SINGLE}, {K_HYBRID_F32, "cuda-hybrid-f32", PK_PRECISION_SINGLE},
    {K_TILE_F64, "cuda-tile-f64", PK_PRECISION_DOUBLE},
};
#define N_CUDA_KERNELS (sizeof cuda_kernels / sizeof cuda_kernels[0])

extern "C" const char *pk_dft_cuda_kernel_name(int kernel) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (cuda_kernels[k].kernel == kernel) return cuda_kernels[k].name;
    return NULL;
}

extern "C" int pk_dft_cuda_kernel_from_name(const char *name) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (strcmp(cuda_kernels[k].name, name) == 0) return cuda_kernels[k].kernel;
    return -1;
}

extern "C" pk_precision pk_dft_cuda_kernel_precision(int kernel) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (cuda_kernels[k].kernel == kernel) return cuda_kernels[k].precision;
    return PK_PRECISION_SINGLE;
}

/* The best kernel of each precision, from the H200 measurements in
 * docs/performance.md. */
extern "C" int pk_dft_cuda_best(pk_precision precision) {
    return precision == PK_PRECISION_DOUBLE ? K_TILE_F64 : K_HYBRID_F32;
}

/* ---- device helpers -------------------------------------------------------- */

#define TWO_PI_F 6.28318530717958647692f
#define INV_TWO_PI_F 0.15915494309189533577f

__device__ __forceinline__ double pixel_lm(int a, int n, double cell) {
    return (double)(a - n / 2) * cell;
}

__device__ __forceinline__ double nprime(double l, double m) {
    double r2 = l * l + m * m;
    r2 = r2 > 1.0 ? 1.0 : r2;
    return -r2 / (1.0 + sqrt(1.0 - r2));
}

/* cos and sin of 2 pi r, r in [-0.5, 0.5] turns: the CPU kernels'
 * polynomials (dftimage_internal.h), on the FMA pipe. */
__device__ __forceinline__ float poly_cos2pi(float z) {
    float p = PK_DFT_COS_C6;
    p = fmaf(p, z, PK_DFT_COS_C5);
    p = fmaf(p, z, PK_DFT_COS_C4);
    p = fmaf(p, z, PK_DFT_COS_C3);
    p = fmaf(p, z, PK_DFT_COS_C2);
    p = fmaf(p, z, PK_DFT_COS_C1);
    return fmaf(p, z, PK_DFT_COS_C0);
}

__device__ __forceinline__ float poly_sin2pi(float r, float z) {
    float p = PK_DFT_SIN_C6;
    p = fmaf(p, z, PK_DFT_SIN_C5);
    p = fmaf(p, z, PK_DFT_SIN_C4);
    p = fmaf(p, z, PK_DFT_SIN_C3);
    p = fmaf(p, z, PK_DFT_SIN_C2);
    p = fmaf(p, z, PK_DFT_SIN_C1);
    p = fmaf(p, z, PK_DFT_SIN_C0);
    return p * r;
}

/* x (radians) to the fraction of a turn in [-0.5, 0.5]: one multiply and
 * rounding by the 1.5 * 2^23 trick (plain adds, no conversion unit). */
__device__ __forceinline__ float turns_frac(float x_rad) {
    float t = x_rad * INV_TWO_PI_F;
    float k = __fsub_rn(__fadd_rn(t, PK_DFT_ROUND_MAGIC), PK_DFT_ROUND_MAGIC);
    return t - k;
}

/* ---- naive kernels ----------------------------------------------------------- */

/* One thread per pixel over visibilities [k0, k1), adding into out. The
 * band: pixels [p0, p0 + n_band) of the image, out[0] the first. */
__global__ void naive_f64(const double *__restrict__ u, const double *__restrict__ v, const double *__restrict__ w,
                          const double *__restrict__ re, const double *__restrict__ im, int k0, int k1, int n, int p0,
                          int n_band, double cell, double sign, double *out_re, double *out_im) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_band) return;
    int g = p0 + p;
    double l = pixel_lm(g % n, n, cell), m = pixel_lm(g / n, n, cell), np = nprime(l, m);
    double sr = 0, si = 0;
    for (int k = k0; k < k1; k++) {
        double s, c;
        sincospi(2.0 * sign * (u[k] * l + v[k] * m + w[k] * np), &s, &c);
        sr += re[k] * c - im[k] * s;
        si += re[k] * s + im[k] * c;
    }
    out_re[p] += sr;
    out_im[p] += si;
}

/* The float32 arrays: 2 pi s u, 2 pi s v, 2 pi s w, re, im. */
__global__ void naive_f32(const float *__restrict__ u, const float *__restrict__ v, const float *__restrict__ w,
                          const float *__restrict__ re, const float *__restrict__ im, int k0, int k1, int n, int p0,
                          int n_band, float cell, double *out_re, double *out_im) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_band) return;
    int g = p0 + p;
    float l = (float)((g % n) - n / 2) * cell, m = (float)((g / n) - n / 2) * cell;
    float np = -(l * l + m * m) / (1.0f + sqrtf(1.0f - l * l - m * m));
    float sr = 0, si = 0;
    for (int k = k0; k < k1; k++) {
        float s, c;
        sincosf(u[k] * l + v[k] * m + w[k] * np, &s, &c);
        sr += re[k] * c - im[k] * s;
        si += re[k] * s + im[k] * c;
    }
    out_re[p] += (double)sr;
    out_im[p] += (double)si;
}

/* ---- the usual optimised kernel --------------------------------------------- */

#define USUAL_THREADS 256
#define USUAL_PIX 3

__global__ void __launch_bounds__(USUAL_THREADS)
    usual_f32(const float4 *__restrict__ uvwr, const float *__restrict__ vim, int k0, int k1, int n, int p0, int n_band,
              float cell, double *out_re, double *out_im) {
    __shared__ float4 s_uvwr[USUAL_THREADS];
    __shared__ float s_im[USUAL_THREADS];
    int base = (blockIdx.x * USUAL_THREADS + threadIdx.x) * USUAL_PIX;
    float l[USUAL_PIX], m[USUAL_PIX], np[USUAL_PIX], sr[USUAL_PIX], si[USUAL_PIX];
    for (int q = 0; q < USUAL_PIX; q++) {
        int g = p0 + (base + q < n_band ? base + q : n_band - 1);
        l[q] = (float)((g % n) - n / 2) * cell;
        m[q] = (float)((g / n) - n / 2) * cell;
        np[q] = -(l[q] * l[q] + m[q] * m[q]) / (1.0f + sqrtf(1.0f - l[q] * l[q] - m[q] * m[q]));
        sr[q] = si[q] = 0.0f;
    }
    for (int c0 = k0; c0 < k1; c0 += USUAL_THREADS) {
        __syncthreads();
        int k = c0 + threadIdx.x;
        if (k < k1) {
            s_uvwr[threadIdx.x] = uvwr[k];
            s_im[threadIdx.x] = vim[k];
        }
        __syncthreads();
        int count = k1 - c0 < USUAL_THREADS ? k1 - c0 : USUAL_THREADS;
        for (int j = 0; j < count; j++) {
            float4 e = s_uvwr[j];
            float vi = s_im[j];
#pragma unroll
            for (int q = 0; q < USUAL_PIX; q++) {
                float ph = fmaf(e.x, l[q], fmaf(e.y, m[q], e.z * np[q]));
                float s, c;
                __sincosf(ph, &s, &c);
                sr[q] = fmaf(e.w, c, fmaf(-vi, s, sr[q]));
                si[q] = fmaf(e.w, s, fmaf(vi, c, si[q]));
            }
        }
    }
    for (int q = 0; q < USUAL_PIX; q++)
        if (base + q < n_band) {
            out_re[base + q] += (double)sr[q];
            out_im[base + q] += (double)si[q];
        }
}

/* ---- tile-centred kernels ------------------------------------------------------ */

/* A block owns a tile of 32 columns x (4 * P) rows; thread t holds column
 * t % 32 and rows t / 32 + 4 q, q < P. Per chunk of TILE_CHUNK visibilities
 * the block first writes each one's table entry (float64 work, once per
 * visibility and tile), then every thread runs over the chunk. */
#define TILE_THREADS 128
#define TILE_COLS 32
#define TILE_CHUNK 256

struct tile_args {
    const double *u, *v, *w, *re, *im, *amp, *psi;
    int n_vis, n;
    double cell, sign;
    int slice_len; /* visibilities per slice (gridDim.z slices) */
    int k_begin, k_end;
    double *part_re, *part_im; /* [slices][pad_y][pad_x]: the band's rows */
    int pad_x, pad_y;
    int row_base; /* the band's first image row; blockIdx.y counts tiles from it */
};

/* IMAG: complex image; else the real part by amp cos. P pixels a thread, of
 * which the first Q take the polynomial path. */
template <bool IMAG, int P, int Q> __global__ void __launch_bounds__(TILE_THREADS) tile_f32(tile_args a) {
    __shared__ float4 s_uvwr[TILE_CHUNK]; /* 2 pi s u, 2 pi s v, 2 pi s w, 2 pi R (radians) */
    __shared__ float2 s_val[TILE_CHUNK];  /* (re, im), or (amp, 0) */
    const int tile_rows = 4 * P;
    int col = threadIdx.x % TILE_COLS, row0 = threadIdx.x / TILE_COLS;
    int a0 = blockIdx.x * TILE_COLS, b0 = a.row_base + blockIdx.y * tile_rows;
    double l0 = pixel_lm(a0 + TILE_COLS / 2, a.n, a.cell), m0 = pixel_lm(b0 + tile_rows / 2, a.n, a.cell);
    double n0 = nprime(l0, m0);
    int a_pix = a0 + col;
    double l = pixel_lm(a_pix, a.n, a.cell);
    float dl = (float)(l - l0);
    float dm[P], dn[P], acc_re[P], acc_im[P];
    double tot_re[P], tot_im[P];
#pragma unroll
    for (int q = 0; q < P; q++) {
        int b = b0 + row0 + 4 * q;
        double m = pixel_lm(b, a.n, a.cell);
        dm[q] = (float)(m - m0);
        dn[q] = (float)(nprime(l, m) - n0);
        acc_re[q] = acc_im[q] = 0.0f;
        tot_re[q] = tot_im[q] = 0.0;
    }
    int k_lo = a.k_begin + blockIdx.z * a.slice_len;
    int k_hi = min(k_lo + a.slice_len, a.k_end);
    for (int c0 = k_lo; c0 < k_hi; c0 += TILE_CHUNK) {
        int count = min(TILE_CHUNK, k_hi - c0);
        __syncthreads();
        for (int j = threadIdx.x; j < count; j += TILE_THREADS) {
            int k = c0 + j;
            double su = a.sign * a.u[k], sv = a.sign * a.v[k], sw = a.sign * a.w[k];
            double ph = su * l0 + sv * m0 + sw * n0;
            if (!IMAG) ph += a.psi[k];
            ph -= rint(ph);
            s_uvwr[j] = make_float4((float)(PK_DFT_TWO_PI * su), (float)(PK_DFT_TWO_PI * sv),
                                    (float)(PK_DFT_TWO_PI * sw), (float)(PK_DFT_TWO_PI * ph));
            s_val[j] = IMAG ? make_float2((float)a.re[k], (float)a.im[k]) : make_float2((float)a.amp[k], 0.0f);
        }
        __syncthreads();
#pragma unroll 2
        for (int j = 0; j < count; j++) {
            float4 e = s_uvwr[j];
            float2 val = s_val[j];
            float base = fmaf(e.x, dl, e.w);
#pragma unroll
            for (int q = 0; q < P; q++) {
                float x = fmaf(e.y, dm[q], fmaf(e.z, dn[q], base));
                float s = 0.0f, c;
                if (q < Q) {
                    float r = turns_frac(x), z = r * r;
                    c = poly_cos2pi(z);
                    if (IMAG) s = poly_sin2pi(r, z);
                } else if (IMAG) {
                    __sincosf(x, &s, &c);
                } else {
                    c = __cosf(x);
                }
                if (IMAG) {
                    acc_re[q] = fmaf(val.x, c, fmaf(-val.y, s, acc_re[q]));
                    acc_im[q] = fmaf(val.x, s, fmaf(val.y, c, acc_im[q]));
                } else {
                    acc_re[q] = fmaf(val.x, c, acc_re[q]);
                }
            }
        }
        /* float32 within a chunk, float64 across chunks */
#pragma unroll
        for (int q = 0; q < P; q++) {
            tot_re[q] += (double)acc_re[q];
            acc_re[q] = 0.0f;
            if (IMAG) {
                tot_im[q] += (double)acc_im[q];
                acc_im[q] = 0.0f;
            }
        }
    }
    size_t plane = (size_t)a.pad_x * a.pad_y * blockIdx.z;
#pragma unroll
    for (int q = 0; q < P; q++) {
        size_t idx = plane + (size_t)(blockIdx.y * tile_rows + row0 + 4 * q) * a.pad_x + a_pix;
        a.part_re[idx] += tot_re[q];
        if (IMAG) a.part_im[idx] += tot_im[q];
    }
}

#define F64_P 4

__global__ void __launch_bounds__(TILE_THREADS) tile_f64(tile_args a) {
    __shared__ double2 s_uv[TILE_CHUNK], s_wr[TILE_CHUNK]; /* (s u, s v), (s w, R turns) */
    __shared__ double2 s_val[TILE_CHUNK];
    const int tile_rows = 4 * F64_P;
    int col = threadIdx.x % TILE_COLS, row0 = threadIdx.x / TILE_COLS;
    int a0 = blockIdx.x * TILE_COLS, b0 = a.row_base + blockIdx.y * tile_rows;
    double l0 = pixel_lm(a0 + TILE_COLS / 2, a.n, a.cell), m0 = pixel_lm(b0 + tile_rows / 2, a.n, a.cell);
    double n0 = nprime(l0, m0);
    int a_pix = a0 + col;
    double l = pixel_lm(a_pix, a.n, a.cell), dl = l - l0;
    double dm[F64_P], dn[F64_P], acc_re[F64_P], acc_im[F64_P];
#pragma unroll
    for (int q = 0; q < F64_P; q++) {
        double m = pixel_lm(b0 + row0 + 4 * q, a.n, a.cell);
        dm[q] = m - m0;
        dn[q] = nprime(l, m) - n0;
        acc_re[q] = acc_im[q] = 0.0;
    }
    int k_lo = a.k_begin + blockIdx.z * a.slice_len;
    int k_hi = min(k_lo + a.slice_len, a.k_end);
    for (int c0 = k_lo; c0 < k_hi; c0 += TILE_CHUNK) {
        int count = min(TILE_CHUNK, k_hi - c0);
        __syncthreads();
        for (int j = threadIdx.x; j < count; j += TILE_THREADS) {
            int k = c0 + j;
            double su = a.sign * a.u[k], sv = a.sign * a.v[k], sw = a.sign * a.w[k];
            double ph = su * l0 + sv * m0 + sw * n0;
            s_uv[j] = make_double2(su, sv);
            s_wr[j] = make_double2(sw, ph - rint(ph));
            s_val[j] = make_double2(a.re[k], a.im[k]);
        }
        __syncthreads();
        for (int j = 0; j < count; j++) {
            double2 uv = s_uv[j], wr = s_wr[j];
            double2 val = s_val[j];
            double base = fma(uv.x, dl, wr.y);
#pragma unroll
            for (int q = 0; q < F64_P; q++) {
                double x = fma(uv.y, dm[q], fma(wr.x, dn[q], base));
                double s, c;
                sincospi(2.0 * x, &s, &c);
                acc_re[q] = fma(val.x, c, fma(-val.y, s, acc_re[q]));
                acc_im[q] = fma(val.x, s, fma(val.y, c, acc_im[q]));
            }
        }
    }
    size_t plane = (size_t)a.pad_x * a.pad_y * blockIdx.z;
#pragma unroll
    for (int q = 0; q < F64_P; q++) {
        size_t idx = plane + (size_t)(blockIdx.y * tile_rows + row0 + 4 * q) * a.pad_x + a_pix;
        a.part_re[idx] += acc_re[q];
        a.part_im[idx] += acc_im[q];
    }
}

/* Sum the slices' partial images in slice order into the band's rows x n
 * pixels. */
__global__ void sum_slices(const double *__restrict__ part, int slices, int pad_x, int pad_y, int n, int rows,
                           double *out) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n * rows) return;
    int a = p % n, b = p / n;
    double s = 0;
    for (int z = 0; z < slices; z++) s += part[(size_t)z * pad_x * pad_y + (size_t)b * pad_x + a];
    out[p] = s;
}

/* ---- host ---------------------------------------------------------------------- */

struct device_buffers {
    double *u, *v, *w, *re, *im, *amp, *psi;
    float *f32; /* naive/usual float arrays */
    double *out_re, *out_im, *part_re, *part_im;
};

static void free_buffers(device_buffers *d) {
    void *all[] = {d->u, d->v, d->w, d->re, d->im, d->amp, d->f32, d->out_re, d->out_im, d->part_re, d->part_im};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (all[k]) cudaFree(all[k]);
    memset(d, 0, sizeof *d);
}

/* Terms per launch: about a tenth to a half second of work, so that progress
 * and Ctrl-C are seen promptly. */
static double batch_terms(int kernel) {
    return (kernel == K_NAIVE_F64 || kernel == K_TILE_F64) ? 3e10 : (kernel == K_NAIVE_F32 ? 1e11 : 6e11);
}

typedef void (*tile_fn)(tile_args);

static tile_fn tile_kernel_for(int kernel, int imag, int *p) {
    *p = 8;
    switch (kernel) {
    case K_TILE_F32: return tile_f32<true, 8, 0>;
    case K_FINAL_F32: return imag ? tile_f32<true, 8, 0> : tile_f32<false, 8, 0>;
    case K_HYBRID_F32: return imag ? tile_f32<true, 8, 2> : tile_f32<false, 8, 1>;
    case K_TILE_F64: *p = F64_P; return tile_f64;
    default: return NULL;
    }
}

/* Bytes of device memory the run may take: what is free on the device
 * (less a margin for the allocator's rounding), and at most the caller's
 * limit. */
static size_t device_budget(size_t limit, size_t *free_out) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) free_b = 0;
    *free_out = free_b;
    size_t margin = (size_t)64 << 20;
    size_t budget = free_b > margin ? free_b - margin : 0;
    if (limit && limit < budget) budget = limit;
    return budget;
}

/* Ends a timed stretch begun by recording ev0: records ev1, waits for it
 * and adds the stretch's milliseconds to total. */
static cudaError_t add_elapsed(cudaEvent_t ev0, cudaEvent_t ev1, float *total) {
    float ms = 0;
    cudaError_t err = cudaEventRecord(ev1);
    if (err == cudaSuccess) err = cudaEventSynchronize(ev1);
    if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, ev0, ev1);
    if (err == cudaSuccess) *total += ms;
    return err;
}

/* A byte count for a message: GiB, MiB or KiB by its size. */
static const char *bytes_text(double b, char *buf, size_t size) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, size, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, size, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, size, "%.1f KiB", b / 1024.0);
    return buf;
}

/* Slices and rows a band for the image's buffers in `budget` bytes, of
 * which vis_bytes go to the visibilities: the whole image with the slices
 * asked for when it fits, else bands of whole tiles of rows with one
 * slice. 0 when not even one tile of rows fits (row_bytes then holds what
 * a row of that band takes). */
static int size_bands(size_t budget, size_t vis_bytes, int n, int tile_rows, int planes, int tile_kernel, int pad_x,
                      int *slices, int *band_rows, double *row_bytes) {
    int pad_y = (n + tile_rows - 1) / tile_rows * tile_rows;
    *row_bytes = (double)planes * sizeof(double) * ((double)n + (tile_kernel ? (double)*slices * pad_x : 0.0));
    if ((double)vis_bytes + *row_bytes * (double)pad_y <= (double)budget) {
        *band_rows = n;
        return 1;
    }
    *slices = 1;
    *row_bytes = (double)planes * sizeof(double) * ((double)n + (tile_kernel ? (double)pad_x : 0.0));
    double rows = ((double)budget - (double)vis_bytes) / *row_bytes;
    int r = rows >= (double)pad_y ? pad_y : rows > 0 ? (int)rows / tile_rows * tile_rows : 0;
    if (r < tile_rows) return 0;
    *band_rows = r > n ? n : r;
    return 1;
}

/* The error for an image whose visibilities and one band of tile_rows rows
 * do not fit in the memory allowed (limit) or free. */
static pk_status no_room(pk_context *ctx, int n, size_t n_vis, size_t vis_bytes, double row_bytes, int tile_rows,
                         size_t limit, size_t free_b) {
    char need[32], vis_text[32], band[32], have[32];
    int limited = limit && limit < free_b;
    return pk_fail(ctx, PK_ERR_NOMEM,
                   "not enough GPU memory: an image of %d x %d pixels with %zu visibilities needs at least %s (%s "
                   "for the visibilities, %s for a band of %d rows), and %s %s",
                   n, n, n_vis, bytes_text((double)vis_bytes + row_bytes * tile_rows, need, sizeof need),
                   bytes_text((double)vis_bytes, vis_text, sizeof vis_text),
                   bytes_text(row_bytes * tile_rows, band, sizeof band), tile_rows,
                   bytes_text(limited ? (double)limit : (double)free_b, have, sizeof have),
                   limited ? "are allowed" : "are free on the device");
}

/* cudaMalloc for the visibilities; a full device is named as such. */
static pk_status vis_malloc(pk_context *ctx, void **p, size_t bytes, size_t n_vis, size_t vis_bytes) {
    cudaError_t err = cudaMalloc(p, bytes);
    if (err == cudaSuccess) return PK_OK;
    *p = NULL;
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError(), free_b = 0;
        char need[32], have[32];
        return pk_fail(ctx, PK_ERR_NOMEM,
                       "not enough GPU memory: the %zu visibilities take %s on the device, and only %s are free "
                       "there now",
                       n_vis, bytes_text((double)vis_bytes, need, sizeof need),
                       bytes_text((double)free_b, have, sizeof have));
    }
    return pk_fail(ctx, PK_ERR_CUDA, "cudaMalloc of %zu bytes for the visibilities failed: %s", bytes,
                   cudaGetErrorString(err));
}

/* One image on its way through pk_dft_run_cuda: the job, the kernel's
 * shape, how the image is cut into bands and slices, and what the run holds
 * on the device. */
struct dft_run {
    pk_context *ctx;
    int kernel;
    const pk_dft_job *job;
    int n;
    size_t n_vis, n_pix;
    int imag_kernel;     /* the kernel makes the imaginary image too */
    int planes;          /* images made: 2 with the imaginary one, else 1 */
    tile_fn tile_kernel; /* NULL for the naive and usual kernels */
    int p_per_thread;
    int slices, pad_x, tile_rows, band_rows;
    size_t vis_bytes;
    device_buffers d;
    cudaEvent_t ev0, ev1;
    float ms_total;
};

/* Rows [y0, y0 + rows) of the image, made in one pass over the
 * visibilities: pix pixels from p0, rows_pad rows with the tile padding. */
struct band {
    int y0, rows, rows_pad;
    size_t pix, p0;
};

/* Slices: enough blocks for several full waves of the device, with the
 * count chosen so that the last wave is nearly full. */
static pk_status choose_slices(dft_run *r) {
    pk_context *ctx = r->ctx;
    int n = r->n;
    r->tile_rows = 4 * r->p_per_thread;
    int tiles_x = (n + TILE_COLS - 1) / TILE_COLS, tiles_y = (n + r->tile_rows - 1) / r->tile_rows;
    r->pad_x = tiles_x * TILE_COLS;
    int dev = 0, sms = 1, per_sm = 1;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    PK_CUDA(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, r->tile_kernel, TILE_THREADS, 0));
    if (per_sm < 1) per_sm = 1;
    long slots = (long)sms * per_sm, tiles = (long)tiles_x * tiles_y;
    double best_eff = 0;
    for (int s = 1; s <= 64; s++) {
        long blocks = tiles * s;
        if ((size_t)s * TILE_CHUNK > r->n_vis && s > 1) break;
        double waves = ceil((double)blocks / (double)slots);
        double eff = (double)blocks / (waves * (double)slots);
        if (blocks < 2 * slots) eff *= 0.9; /* one wave leaves SMs idle as blocks finish unevenly */
        if (eff > best_eff + 0.01) best_eff = eff, r->slices = s;
    }
    return PK_OK;
}

/* Device memory: the visibilities, and for each image row its output and
 * (tile kernels) the slices' partial rows. When the whole image does not
 * fit in what the device has free (or the caller allows), it is made in
 * bands of rows, one after another, with one slice. */
static pk_status plan_bands(dft_run *r) {
    const pk_dft_job *job = r->job;
    if (r->kernel == K_NAIVE_F32 || r->kernel == K_USUAL_F32) r->vis_bytes = 5 * r->n_vis * sizeof(float);
    else r->vis_bytes = (5 + (r->imag_kernel ? 0 : 2)) * r->n_vis * sizeof(double);
    size_t free_b = 0, budget = device_budget(job->gpu_memory, &free_b);
    double row_bytes = 0;
    if (!size_bands(budget, r->vis_bytes, r->n, r->tile_rows, r->planes, r->tile_kernel != NULL, r->pad_x, &r->slices,
                    &r->band_rows, &row_bytes))
        return no_room(r->ctx, r->n, r->n_vis, r->vis_bytes, row_bytes, r->tile_rows, job->gpu_memory, free_b);
    return PK_OK;
}

/* The naive and usual kernels' float arrays, 2 pi s folded in: naive as u,
 * v, w, re, im planes; usual as float4 (u, v, w, re) + im. */
static pk_status upload_vis_f32(dft_run *r) {
    pk_context *ctx = r->ctx;
    const pk_vis *vis = r->job->vis;
    size_t n_vis = r->n_vis;
    float *host_f32 = (float *)malloc(5 * n_vis * sizeof(float));
    if (!host_f32) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    double f = PK_DFT_TWO_PI * r->job->sign;
    for (size_t k = 0; k < n_vis; k++) {
        float fu = (float)(f * vis->u[k]), fv = (float)(f * vis->v[k]), fw = (float)(f * vis->w[k]);
        if (r->kernel == K_NAIVE_F32) {
            host_f32[k] = fu, host_f32[n_vis + k] = fv, host_f32[2 * n_vis + k] = fw;
            host_f32[3 * n_vis + k] = (float)vis->re[k], host_f32[4 * n_vis + k] = (float)vis->im[k];
        } else {
            host_f32[4 * k] = fu, host_f32[4 * k + 1] = fv, host_f32[4 * k + 2] = fw;
            host_f32[4 * k + 3] = (float)vis->re[k];
            host_f32[4 * n_vis + k] = (float)vis->im[k];
        }
    }
    pk_status st = PK_OK;
    if ((st = vis_malloc(ctx, (void **)&r->d.f32, 5 * n_vis * sizeof(float), n_vis, r->vis_bytes)) != PK_OK) goto done;
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(r->d.f32, host_f32, 5 * n_vis * sizeof(float), cudaMemcpyHostToDevice));
done:
    free(host_f32);
    return st;
}

/* The float64 kernels' u, v, w, re, im, and for a real image from the
 * final and hybrid kernels each visibility's amplitude and phase
 * (pk_dft_polar). */
static pk_status upload_vis_f64(dft_run *r) {
    pk_context *ctx = r->ctx;
    const pk_vis *vis = r->job->vis;
    size_t n_vis = r->n_vis;
    device_buffers *d = &r->d;
    pk_status st = PK_OK;
    double **dst[5] = {&d->u, &d->v, &d->w, &d->re, &d->im};
    const double *src[5] = {vis->u, vis->v, vis->w, vis->re, vis->im};
    for (int c = 0; c < 5; c++) {
        if ((st = vis_malloc(ctx, (void **)dst[c], n_vis * sizeof(double), n_vis, r->vis_bytes)) != PK_OK) return st;
        PK_CUDA(ctx, cudaMemcpy(*dst[c], src[c], n_vis * sizeof(double), cudaMemcpyHostToDevice));
    }
    if (r->imag_kernel) return PK_OK;
    double *host_polar = (double *)malloc(2 * n_vis * sizeof(double));
    if (!host_polar) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n_vis; k++) pk_dft_polar(vis->re[k], vis->im[k], &host_polar[k], &host_polar[n_vis + k]);
    if ((st = vis_malloc(ctx, (void **)&d->amp, 2 * n_vis * sizeof(double), n_vis, r->vis_bytes)) != PK_OK) goto done;
    d->psi = d->amp + n_vis;
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(d->amp, host_polar, 2 * n_vis * sizeof(double), cudaMemcpyHostToDevice));
done:
    free(host_polar);
    return st;
}

static pk_status upload_vis(dft_run *r) {
    if (r->kernel == K_NAIVE_F32 || r->kernel == K_USUAL_F32) return upload_vis_f32(r);
    return upload_vis_f64(r);
}

static void free_band_buffers(device_buffers *d) {
    double *band_bufs[] = {d->out_re, d->out_im, d->part_re, d->part_im};
    for (int b = 0; b < 4; b++)
        if (band_bufs[b]) cudaFree(band_bufs[b]);
    d->out_re = d->out_im = d->part_re = d->part_im = NULL;
}

/* The image's buffers. The device's free memory can shrink between the
 * sizing in plan_bands and here (another process, or another rank on the
 * same GPU, allocating meanwhile): when an allocation finds it full, the
 * buffers are sized again from what is free now, at most half of what was
 * just asked for (fewer slices, then thinner bands), until they fit or a
 * band of one tile of rows does not. */
static pk_status alloc_band_buffers(dft_run *r, pk_dft_cuda_report *report) {
    pk_context *ctx = r->ctx;
    const pk_dft_job *job = r->job;
    device_buffers *d = &r->d;
    int n = r->n, tile_rows = r->tile_rows;
    for (;;) {
        size_t band_pix = (size_t)r->band_rows * n;
        int band_pad = (r->band_rows + tile_rows - 1) / tile_rows * tile_rows;
        size_t part_pix = r->tile_kernel ? (size_t)r->slices * r->pad_x * band_pad : 0;
        cudaError_t err = cudaMalloc(&d->out_re, band_pix * sizeof(double));
        if (err == cudaSuccess && r->imag_kernel) err = cudaMalloc(&d->out_im, band_pix * sizeof(double));
        if (err == cudaSuccess && r->tile_kernel) err = cudaMalloc(&d->part_re, part_pix * sizeof(double));
        if (err == cudaSuccess && r->tile_kernel && r->imag_kernel)
            err = cudaMalloc(&d->part_im, part_pix * sizeof(double));
        size_t asked = (size_t)r->planes * (band_pix + part_pix) * sizeof(double);
        if (err == cudaSuccess) {
            report->gpu_bytes = r->vis_bytes + asked;
            return PK_OK;
        }
        if (err != cudaErrorMemoryAllocation)
            return pk_fail(ctx, PK_ERR_CUDA, "cudaMalloc of the image's %zu bytes failed: %s", asked,
                           cudaGetErrorString(err));
        cudaGetLastError();
        free_band_buffers(d);
        size_t free_b = 0, budget = device_budget(job->gpu_memory ? job->gpu_memory - r->vis_bytes : 0, &free_b);
        if (budget > asked / 2) budget = asked / 2;
        double row_bytes = 0;
        if (!size_bands(budget, 0, n, tile_rows, r->planes, r->tile_kernel != NULL, r->pad_x, &r->slices, &r->band_rows,
                        &row_bytes))
            return no_room(ctx, n, r->n_vis, r->vis_bytes, row_bytes, tile_rows, job->gpu_memory,
                           free_b + r->vis_bytes);
    }
}

/* Zeroes what the band's launches add to: the slices' partial images for
 * the tile kernels, the output images for the others. */
static pk_status clear_band(dft_run *r, const band *b) {
    pk_context *ctx = r->ctx;
    if (r->tile_kernel) {
        size_t bytes = (size_t)r->slices * r->pad_x * b->rows_pad * sizeof(double);
        PK_CUDA(ctx, cudaMemset(r->d.part_re, 0, bytes));
        if (r->imag_kernel) PK_CUDA(ctx, cudaMemset(r->d.part_im, 0, bytes));
    } else {
        PK_CUDA(ctx, cudaMemset(r->d.out_re, 0, b->pix * sizeof(double)));
        PK_CUDA(ctx, cudaMemset(r->d.out_im, 0, b->pix * sizeof(double)));
    }
    return PK_OK;
}

/* One launch: visibilities [k0, k1) onto the band's pixels. */
static void launch_batch(const dft_run *r, const band *b, size_t k0, size_t k1) {
    const device_buffers *d = &r->d;
    const pk_dft_job *job = r->job;
    int n = r->n;
    size_t n_vis = r->n_vis, pix = b->pix, p0 = b->p0;
    if (r->kernel == K_NAIVE_F64) {
        naive_f64<<<(unsigned)((pix + 255) / 256), 256>>>(d->u, d->v, d->w, d->re, d->im, (int)k0, (int)k1, n, (int)p0,
                                                          (int)pix, job->cell, (double)job->sign, d->out_re, d->out_im);
    } else if (r->kernel == K_NAIVE_F32) {
        naive_f32<<<(unsigned)((pix + 255) / 256), 256>>>(d->f32, d->f32 + n_vis, d->f32 + 2 * n_vis,
                                                          d->f32 + 3 * n_vis, d->f32 + 4 * n_vis, (int)k0, (int)k1, n,
                                                          (int)p0, (int)pix, (float)job->cell, d->out_re, d->out_im);
    } else if (r->kernel == K_USUAL_F32) {
        size_t threads = (pix + USUAL_PIX - 1) / USUAL_PIX;
        usual_f32<<<(unsigned)((threads + USUAL_THREADS - 1) / USUAL_THREADS), USUAL_THREADS>>>(
            (const float4 *)d->f32, d->f32 + 4 * n_vis, (int)k0, (int)k1, n, (int)p0, (int)pix, (float)job->cell,
            d->out_re, d->out_im);
    } else {
        tile_args a;
        a.u = d->u, a.v = d->v, a.w = d->w, a.re = d->re, a.im = d->im, a.amp = d->amp, a.psi = d->psi;
        a.n_vis = (int)n_vis, a.n = n, a.cell = job->cell, a.sign = (double)job->sign;
        a.k_begin = (int)k0, a.k_end = (int)k1;
        int len = (int)((k1 - k0 + (size_t)r->slices - 1) / (size_t)r->slices);
        a.slice_len = (len + TILE_CHUNK - 1) / TILE_CHUNK * TILE_CHUNK;
        a.part_re = d->part_re, a.part_im = d->part_im, a.pad_x = r->pad_x, a.pad_y = b->rows_pad;
        a.row_base = b->y0;
        dim3 grid((unsigned)(r->pad_x / TILE_COLS), (unsigned)(b->rows_pad / r->tile_rows), (unsigned)r->slices);
        r->tile_kernel<<<grid, TILE_THREADS>>>(a);
    }
}

/* The tile kernels' slices summed into the band's output images, timed. */
static pk_status sum_band_slices(dft_run *r, const band *b) {
    pk_context *ctx = r->ctx;
    size_t pix = b->pix;
    PK_CUDA(ctx, cudaEventRecord(r->ev0));
    sum_slices<<<(unsigned)((pix + 255) / 256), 256>>>(r->d.part_re, r->slices, r->pad_x, b->rows_pad, r->n, b->rows,
                                                       r->d.out_re);
    if (r->imag_kernel)
        sum_slices<<<(unsigned)((pix + 255) / 256), 256>>>(r->d.part_im, r->slices, r->pad_x, b->rows_pad, r->n,
                                                           b->rows, r->d.out_im);
    PK_CUDA(ctx, cudaGetLastError());
    PK_CUDA(ctx, add_elapsed(r->ev0, r->ev1, &r->ms_total));
    return PK_OK;
}

/* The band's images into the job's, at its first pixel. */
static pk_status copy_band_back(dft_run *r, const band *b) {
    pk_context *ctx = r->ctx;
    const pk_dft_job *job = r->job;
    PK_CUDA(ctx, cudaMemcpy(job->re + b->p0, r->d.out_re, b->pix * sizeof(double), cudaMemcpyDeviceToHost));
    if (job->im) {
        if (!r->imag_kernel) return pk_fail(ctx, PK_ERR_INTERNAL, "kernel %d computed no imaginary part", r->kernel);
        PK_CUDA(ctx, cudaMemcpy(job->im + b->p0, r->d.out_im, b->pix * sizeof(double), cudaMemcpyDeviceToHost));
    }
    return PK_OK;
}

/* One band: the visibilities in batches of per_batch, one timed launch
 * each with progress and cancellation after it, then the slices' sum and
 * the copy back. */
static pk_status make_band(dft_run *r, const band *b, size_t per_batch, pk_progress *progress) {
    pk_context *ctx = r->ctx;
    pk_status st = clear_band(r, b);
    if (st != PK_OK) return st;
    for (size_t k0 = 0; k0 < r->n_vis; k0 += per_batch) {
        size_t k1 = k0 + per_batch < r->n_vis ? k0 + per_batch : r->n_vis;
        PK_CUDA(ctx, cudaEventRecord(r->ev0));
        launch_batch(r, b, k0, k1);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, add_elapsed(r->ev0, r->ev1, &r->ms_total));
        if (pk_progress_add(progress, (double)(k1 - k0) * (double)b->pix, 1))
            return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    if (r->tile_kernel && (st = sum_band_slices(r, b)) != PK_OK) return st;
    return copy_band_back(r, b);
}

/* The image, band after band. */
static pk_status make_image(dft_run *r, pk_progress *progress) {
    /* visibilities a launch: from the whole image, so that every pixel
     * sums the same batches however the image is banded */
    size_t per_batch = (size_t)(batch_terms(r->kernel) / (double)r->n_pix);
    if (per_batch < 1024) per_batch = 1024;
    int n = r->n;
    for (int y0 = 0; y0 < n; y0 += r->band_rows) {
        band b;
        b.y0 = y0;
        b.rows = n - y0 < r->band_rows ? n - y0 : r->band_rows;
        b.rows_pad = (b.rows + r->tile_rows - 1) / r->tile_rows * r->tile_rows;
        b.pix = (size_t)b.rows * n, b.p0 = (size_t)y0 * n;
        pk_status st = make_band(r, &b, per_batch, progress);
        if (st != PK_OK) return st;
    }
    return PK_OK;
}

extern "C" pk_status pk_dft_run_cuda(pk_context *ctx, int kernel, const pk_dft_job *job, pk_progress *progress,
                                     pk_dft_cuda_report *report) {
    memset(report, 0, sizeof *report);
    /* 2^30: a slice's end (its start plus up to n_vis) stays within int */
    if (job->vis->n > ((size_t)1 << 30) || job->n > 46340)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "the CUDA backend takes at most 2^30 visibilities a run (more: split them over mpirun "
                       "ranks) and 46340 pixels a side");
    dft_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx, r.kernel = kernel, r.job = job;
    r.n = (int)job->n, r.n_vis = job->vis->n, r.n_pix = job->n * job->n;
    r.imag_kernel = kernel != K_FINAL_F32 && kernel != K_HYBRID_F32 ? 1 : job->want_imag;
    r.planes = r.imag_kernel ? 2 : 1;
    r.tile_kernel = tile_kernel_for(kernel, job->want_imag, &r.p_per_thread);
    r.slices = 1, r.tile_rows = 1, r.band_rows = r.n;
    if (!r.tile_kernel && kernel != K_NAIVE_F64 && kernel != K_NAIVE_F32 && kernel != K_USUAL_F32)
        return pk_fail(ctx, PK_ERR_INVALID, "kernel %d is not a CUDA kernel", kernel);

    pk_status st = PK_OK;
    void *taken = NULL; /* pk_test_gpu_leave_free's */
    PK_CUDA_GOTO(ctx, st, done, cudaSetDevice(ctx ? ctx->cuda_device : 0));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&r.ev0));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&r.ev1));
    if (r.tile_kernel && (st = choose_slices(&r)) != PK_OK) goto done;
    if ((st = plan_bands(&r)) != PK_OK) goto done;
    taken = pk_cuda_test_take();
    if ((st = upload_vis(&r)) != PK_OK) goto done;
    if ((st = alloc_band_buffers(&r, report)) != PK_OK) goto done;
    report->bands = (r.n + r.band_rows - 1) / r.band_rows;
    if ((st = make_image(&r, progress)) != PK_OK) goto done;
    report->kernel_ms = r.ms_total;
done:
    free_buffers(&r.d);
    if (taken) cudaFree(taken);
    if (r.ev0) cudaEventDestroy(r.ev0);
    if (r.ev1) cudaEventDestroy(r.ev1);
    return st;
}
