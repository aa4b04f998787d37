/* dftimage_internal.h - what the dftimage backends share: the pixel grid,
 * the tile-centred phase decomposition, the per-visibility table a tile's
 * kernel reads, and the polynomial sincos in turns.
 *
 * Tile-centred phases. For a tile of pixels with centre (l0, m0, n0), the
 * phase of visibility k at pixel p, in turns, is
 *     x = s (u l0 + v m0 + w n0) + s (u dl_p + v dm_p + w dn_p),
 * dl_p = l_p - l0 and so on. The first part is computed per visibility and
 * tile in float64 and reduced to [-0.5, 0.5] there; only the second, a few
 * turns at most, is summed in float32. A plain float32 phase of 40 turns
 * carries about 4e-6 turns of rounding; this one about 5e-7, which is what
 * lets the float32 kernels beat the usual kernel's 3.1e-5 error.
 *
 * Invariant: every backend computes the same function as the reference
 * pk_dftimage_ref_points; the grid is (a - c) * cell with c = n / 2
 * (integer division) in both axes.
 */
#ifndef PAIRKIT_DFTIMAGE_INTERNAL_H
#define PAIRKIT_DFTIMAGE_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "../common/common.h"
#include "pairkit/dftimage.h"

#define PK_DFT_TWO_PI 6.283185307179586476925286766559

/* The largest |u|, |v|, |w| imaged, in wavelengths: with |l|, |m|, |n'| <= 1
 * a phase stays below 3 * 2^38 < 2^40 turns, the range over which the
 * kernels' phase reduction (pk_dft_sincos2pi_d) is exact. 2.7e11
 * wavelengths is the longest baseline flown (RadioAstron at 1.3 cm, 3.5e5
 * km); the EHT's reach 8.3e9. Beyond it a float64 phase has lost its
 * fraction of a turn anyway. */
#define PK_DFT_MAX_UVW 274877906944.0 /* 2^38 */

/* Direction cosine of pixel index a on an n-pixel axis. */
static inline double pk_dft_pixel_lm(size_t a, size_t n, double cell) {
    return ((double)a - (double)(n / 2)) * cell;
}

/* n' = sqrt(1 - l^2 - m^2) - 1, written to keep precision for small l, m:
 * -(l^2 + m^2) / (1 + sqrt(1 - l^2 - m^2)). Points outside the unit circle
 * (only padding pixels of a tile can be) get the value on the circle. */
static inline double pk_dft_nprime(double l, double m) {
    double r2 = l * l + m * m;
    if (r2 > 1.0) r2 = 1.0;
    return -r2 / (1.0 + sqrt(1.0 - r2));
}

/* x - rint(x) for a double: the fraction of a turn, in [-0.5, 0.5]. */
static inline double pk_dft_frac(double x) {
    return x - rint(x);
}

/* The real-image form of a visibility: V = amp e^{2 pi i psi} with psi in
 * [-1/4, 1/4] turns and amp of either sign, so that
 *     Re(V e^{2 pi i x}) = amp cos(2 pi (x + psi)).
 * Why signed: an approximate cosine has a small mean error (the GPU's
 * MUFU.COS after its round-toward-zero scaling of the argument: about 3e-8
 * over uniform phases). With amp = |V| >= 0 that error adds up coherently,
 * N times over N visibilities, while the image of incoherent data grows only
 * as sqrt(N): measured on the H200 for 1M random visibilities, relative
 * error 2.9e-5 with amp >= 0 against 1.8e-6 on 3,001. Amplitudes of both
 * signs make the error add up as a random walk again (numpy emulation of
 * the kernel: 2.7e-5 -> 8.5e-7). */
static inline void pk_dft_polar(double re, double im, double *amp, double *psi) {
    double a = hypot(re, im), p = atan2(im, re) / PK_DFT_TWO_PI;
    if (p > 0.25) {
        p -= 0.5;
        a = -a;
    } else if (p < -0.25) {
        p += 0.5;
        a = -a;
    }
    *amp = a;
    *psi = p;
}

/* ---- CPU tiles ------------------------------------------------------------ */

/* A CPU tile is PK_DFT_TILE_W x PK_DFT_TILE_H pixels: 32 columns are two
 * AVX-512 or four AVX2 vectors; 8 rows make 256 pixels, over which the
 * float64 per-visibility work is shared. */
#define PK_DFT_TILE_W 32
#define PK_DFT_TILE_H 8
#define PK_DFT_TILE_PIX (PK_DFT_TILE_W * PK_DFT_TILE_H)
/* Visibilities per chunk: 512 x 6 floats = 12 KB of table, in L1 beside
 * the tile's 8 KB of offsets and accumulators. */
#define PK_DFT_CHUNK 512

/* The per-visibility table of one tile and chunk, float32, structure of
 * arrays: U, V, W are s u, s v, s w (turns per unit direction cosine), R the
 * tile-centre phase reduced to [-0.5, 0.5]. Complex mode: (vr, vi) is V_k.
 * Real mode: R also holds psi and vr = amp of pk_dft_polar, so the term
 * is vr cos(2 pi x). */
typedef struct pk_dft_table {
    float *U, *V, *W, *R, *vr, *vi;
    size_t n;
} pk_dft_table;

/* The pixel offsets of one tile from its centre, float32, row-major
 * [PK_DFT_TILE_H][PK_DFT_TILE_W], and its accumulators. */
typedef struct pk_dft_tile {
    float dl[PK_DFT_TILE_PIX], dm[PK_DFT_TILE_PIX], dn[PK_DFT_TILE_PIX];
    float acc_re[PK_DFT_TILE_PIX], acc_im[PK_DFT_TILE_PIX];
} pk_dft_tile;

/* Add the terms of table entries [0, t->n) to the tile's accumulators.
 * want_imag = 0: only acc_re (real mode table). */
typedef void (*pk_dft_block_fn)(const pk_dft_table *t, pk_dft_tile *tile, int want_imag);

void pk_dft_block_scalar(const pk_dft_table *t, pk_dft_tile *tile, int want_imag);
void pk_dft_block_avx2(const pk_dft_table *t, pk_dft_tile *tile, int want_imag);
void pk_dft_block_avx512(const pk_dft_table *t, pk_dft_tile *tile, int want_imag);

/* sin and cos of 2 pi r for r in [-0.5, 0.5]: minimax polynomials in r^2
 * (degree 13 and 12), fitted here with numpy. Measured in float32 Horner
 * over 2e6 uniform r: max error 5.3e-7, rms 7e-8 for both. */
#define PK_DFT_COS_C0 1.0f
#define PK_DFT_COS_C1 -19.73920440673828f
#define PK_DFT_COS_C2 64.93911743164062f
#define PK_DFT_COS_C3 -85.4501724243164f
#define PK_DFT_COS_C4 60.16786575317383f
#define PK_DFT_COS_C5 -25.968442916870117f
#define PK_DFT_COS_C6 6.529795169830322f
#define PK_DFT_SIN_C0 6.2831854820251465f
#define PK_DFT_SIN_C1 -41.341697692871094f
#define PK_DFT_SIN_C2 81.60502624511719f
#define PK_DFT_SIN_C3 -76.70155334472656f
#define PK_DFT_SIN_C4 42.01618194580078f
#define PK_DFT_SIN_C5 -14.868667602539062f
#define PK_DFT_SIN_C6 3.199768304824829f

/* Rounding to the nearest integer by adding and subtracting 1.5 * 2^23:
 * exact for |x| < 2^22, and two plain adds on every SIMD unit. */
#define PK_DFT_ROUND_MAGIC 12582912.0f

static inline float pk_dft_cos2pi_f(float r) {
    float z = r * r;
    float p = PK_DFT_COS_C6;
    p = p * z + PK_DFT_COS_C5;
    p = p * z + PK_DFT_COS_C4;
    p = p * z + PK_DFT_COS_C3;
    p = p * z + PK_DFT_COS_C2;
    p = p * z + PK_DFT_COS_C1;
    return p * z + PK_DFT_COS_C0;
}

static inline float pk_dft_sin2pi_f(float r) {
    float z = r * r;
    float p = PK_DFT_SIN_C6;
    p = p * z + PK_DFT_SIN_C5;
    p = p * z + PK_DFT_SIN_C4;
    p = p * z + PK_DFT_SIN_C3;
    p = p * z + PK_DFT_SIN_C2;
    p = p * z + PK_DFT_SIN_C1;
    p = p * z + PK_DFT_SIN_C0;
    return p * r;
}

/* sin and cos of 2 pi x in float64 for |x| < 2^40: the quadrant q =
 * rint(4 x), then Taylor series on [-pi/4, pi/4] to the 17th and 18th order
 * (remainder below 3e-18). Rounding by adding and subtracting 1.5 * 2^52 and
 * selects instead of branches, so that loops over it vectorise (libm's rint
 * and floor do not, under the default -ftrapping-math). */
#define PK_DFT_ROUND_MAGIC_D 6755399441055744.0

typedef struct pk_dft_sc {
    double s, c;
} pk_dft_sc;

static inline pk_dft_sc pk_dft_sincos2pi_d(double x) {
    double q = (4.0 * x + PK_DFT_ROUND_MAGIC_D) - PK_DFT_ROUND_MAGIC_D;
    double r = x - 0.25 * q;
    double t = PK_DFT_TWO_PI * r, t2 = t * t;
    double ps = 1.0 / 355687428096000.0;  /* 1/17! */
    ps = ps * t2 - 1.0 / 1307674368000.0; /* 1/15! */
    ps = ps * t2 + 1.0 / 6227020800.0;    /* 1/13! */
    ps = ps * t2 - 1.0 / 39916800.0;      /* 1/11! */
    ps = ps * t2 + 1.0 / 362880.0;        /* 1/9! */
    ps = ps * t2 - 1.0 / 5040.0;
    ps = ps * t2 + 1.0 / 120.0;
    ps = ps * t2 - 1.0 / 6.0;
    double sn = t + t * t2 * ps;
    double pc = 1.0 / 6402373705728000.0;  /* 1/18! */
    pc = pc * t2 - 1.0 / 20922789888000.0; /* 1/16! */
    pc = pc * t2 + 1.0 / 87178291200.0;    /* 1/14! */
    pc = pc * t2 - 1.0 / 479001600.0;      /* 1/12! */
    pc = pc * t2 + 1.0 / 3628800.0;        /* 1/10! */
    pc = pc * t2 - 1.0 / 40320.0;
    pc = pc * t2 + 1.0 / 720.0;
    pc = pc * t2 - 1.0 / 24.0;
    pc = pc * t2 + 0.5;
    double cs = 1.0 - t2 * pc;
    /* quadrant k = q mod 4, from floor(q / 4) = rint(q / 4 - 3/8) (no ties) */
    double k = q - 4.0 * (((0.25 * q - 0.375) + PK_DFT_ROUND_MAGIC_D) - PK_DFT_ROUND_MAGIC_D);
    int odd = k == 1.0 || k == 3.0;
    double a = odd ? cs : sn, b = odd ? sn : cs;
    pk_dft_sc out = {k >= 2.0 ? -a : a, (k == 1.0 || k == 2.0) ? -b : b};
    return out;
}

/* ---- backends ------------------------------------------------------------ */

/* A resolved imaging job: grid, sign, mode, and where to put the result
 * (double arrays of n * n, im NULL unless want_imag). */
typedef struct pk_dft_job {
    const pk_vis *vis;
    size_t n;
    double cell;
    int sign;
    int want_imag;
    double *re, *im;
    size_t gpu_memory; /* CUDA: bytes of device memory allowed, 0 = what is free */
} pk_dft_job;

/* The arrays of a caller-built pk_vis: u, v, w, re and im present when
 * n > 0 (weight may be NULL); the message starts with fn when given. */
pk_status pk_vis_arrays_check(pk_context *ctx, const char *fn, const pk_vis *vis);

pk_status pk_dft_run_ref(pk_context *ctx, const pk_dft_job *job, pk_progress *progress);
pk_status pk_dft_run_cpu(pk_context *ctx, int kernel, const pk_dft_job *job, pk_progress *progress);

#ifdef PK_HAVE_CUDA
#define PK_DFTIMAGE_KERNEL_CUDA_FIRST 100
/* cuda.cu names its kernels, picks the best of a precision, and runs one,
 * in bands of image rows when the whole image does not fit in the device
 * memory free (or job->gpu_memory); the report gives the device time of the
 * kernels, the bands and the device bytes allocated. */
typedef struct pk_dft_cuda_report {
    double kernel_ms;
    int bands;
    size_t gpu_bytes;
} pk_dft_cuda_report;
const char *pk_dft_cuda_kernel_name(int kernel);
int pk_dft_cuda_kernel_from_name(const char *name);
pk_precision pk_dft_cuda_kernel_precision(int kernel);
int pk_dft_cuda_best(pk_precision precision);
pk_status pk_dft_run_cuda(pk_context *ctx, int kernel, const pk_dft_job *job, pk_progress *progress,
                          pk_dft_cuda_report *report);
#endif

#endif
