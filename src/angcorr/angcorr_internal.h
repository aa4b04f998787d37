/* angcorr_internal.h - what the angcorr backends share: unit vectors, the
 * reference dot product, and the edge table that lets a float32 kernel bin
 * exactly.
 *
 * Slots: a pair's "slot" is its bin index + 1, with slot 0 for separations
 * below theta_min and slot n_bins + 1 for those at or above theta_max. Slots
 * grow with the separation, so they shrink with the dot product.
 *
 * The invariant every kernel keeps: the slot of a pair equals
 * pk_angcorr_slot_ref(bins, pk_angcorr_dot_ref(...)) of the float64
 * reference, bit for bit. A float32 kernel proves its slot from the
 * uncertainty windows below or settles the pair with pk_edge_table_slot_fp64.
 */
#ifndef PAIRKIT_ANGCORR_INTERNAL_H
#define PAIRKIT_ANGCORR_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/common.h"
#include "pairkit/angcorr.h"

/* x, with a NaN of either sign as the positive one, so that text outputs
 * print "nan" throughout (0/0 makes a negative NaN on x86, "-nan"). */
static inline double pk_plain_nan(double x) {
    return x != x ? (double)NAN : x;
}

/* Radians to degrees, for the text outputs of api.c and features.c. */
double pk_rad_to_deg(double rad);

/* The reference dot product, evaluated exactly as written: two products
 * added, then the third product added, each rounded to double (this file
 * and its users are compiled with -ffp-contract=off). */
static inline double pk_angcorr_dot_ref(double x1, double y1, double z1, double x2, double y2, double z2) {
    double d = x1 * x2 + y1 * y2;
    return d + z1 * z2;
}

/* acos(x) for x in [-1, 1], within 1 ulp, branch-free so that loops of it
 * vectorise (the fast paths' mean separations; the reference uses the C
 * library's acos). The algorithm and coefficients are fdlibm's e_acos.c:
 *   Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
 *   Developed at SunSoft, a Sun Microsystems, Inc. business. Permission
 *   to use, copy, modify, and distribute this software is freely granted,
 *   provided that this notice is preserved.
 * |x| < 0.5: pi/2 - (x + x r(x^2)); x >= 0.5: 2 asin(sqrt((1 - x) / 2)),
 * with sqrt's high half split off to keep the last bits; x <= -0.5:
 * pi - 2 asin(sqrt((1 + x) / 2)). The same operations in the same order on
 * every path (compiled with -ffp-contract=off), so a vectorised loop gives
 * the scalar's bits. */
static inline double pk_acos(double x) {
    const double pio2_hi = 1.57079632679489655800e+00, pio2_lo = 6.12323399573676603587e-17;
    const double pi = 3.14159265358979311600e+00;
    const double pS0 = 1.66666666666666657415e-01, pS1 = -3.25565818622400915405e-01, pS2 = 2.01212532134862925881e-01,
                 pS3 = -4.00555345006794114027e-02, pS4 = 7.91534994289814532176e-04, pS5 = 3.47933107596021167570e-05;
    const double qS1 = -2.40339491173441421878e+00, qS2 = 2.02094576023350569471e+00, qS3 = -6.88283971605453293030e-01,
                 qS4 = 7.70381505559019352791e-02;
    double ax = fabs(x);
    int small = ax < 0.5;
    double z_small = x * x, z_large = (1.0 - ax) * 0.5; /* both evaluated, then chosen: no branch */
    double z = small ? z_small : z_large;
    double p = z * (pS0 + z * (pS1 + z * (pS2 + z * (pS3 + z * (pS4 + z * pS5)))));
    double q = 1.0 + z * (qS1 + z * (qS2 + z * (qS3 + z * qS4)));
    double r = p / q;
    double s = sqrt(z);
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    bits &= 0xffffffff00000000ull;
    double df;
    memcpy(&df, &bits, sizeof df);
    double den = s + df;
    den = den > 0 ? den : 1.0; /* x = 1: z = s = df = 0 */
    double c = (z - df * df) / den;
    double small_r = pio2_hi - (x - (pio2_lo - x * r));
    double neg_r = pi - 2.0 * (s + (r * s - pio2_lo));
    double pos_r = 2.0 * (df + (r * s + c));
    double large_r = x < 0 ? neg_r : pos_r;
    return small ? small_r : large_r;
}

/* Unit vectors in double, the reference's: x = cos(dec) cos(ra),
 * y = cos(dec) sin(ra), z = sin(dec). One allocation (x owns it). */
typedef struct pk_unit_vectors {
    size_t n;
    double *x, *y, *z;
} pk_unit_vectors;

pk_status pk_unit_vectors_make(pk_context *ctx, const pk_catalog *cat, pk_unit_vectors *out);

/* The checks every writer of a result makes before any file: path,
 * result not NULL, bins that match it, its arrays not NULL; fn names the
 * caller's public function. */
pk_status pk_angcorr_result_writable(pk_context *ctx, const char *fn, const char *path, const pk_angcorr_result *result,
                                     const pk_bins *bins);

/* Whether a right ascension in these units lies within 4096 radians of 0,
 * the range every catalog reader accepts. */
int pk_ra_in_range(double ra, pk_units units);
/* PK_ERR_INVALID naming fn when units lies outside the enum. */
pk_status pk_units_check(pk_context *ctx, pk_units units, const char *fn);
/* The largest |dec| in these units (90 degrees), and their name as
 * messages give it ("deg"). */
double pk_dec_limit(pk_units units);
const char *pk_units_name(pk_units units);

/* A text catalog's bytes (NUL-terminated), refused when gzip-compressed or
 * holding NUL bytes, the message naming the path and kind ("text", "CSV"). */
pk_status pk_catalog_read_text(pk_context *ctx, const char *path, const char *kind, char **text, size_t *size);
void pk_unit_vectors_free(pk_unit_vectors *v);

/* The unit vectors of pk_unit_vectors_make (the same values), ordered for
 * the GPU's tiled kernels by a space-filling curve: order 1 Morton over
 * [-1, 1]^3, order 2 Hilbert over the catalog's bounding box, any other
 * value the catalog's own order. Ties of the curve's key keep the
 * catalog's order. Made with the context's threads (curve_order.c). */
pk_status pk_unit_vectors_curve(pk_context *ctx, const pk_catalog *cat, int order, pk_unit_vectors *out);
/* The curve key (30 bits) of one vector, coordinates mapped by (v - lo) * scale
 * to 0..1023 (clamped). */
uint32_t pk_curve_key(int order, const double lo[3], const double scale[3], double x, double y, double z);

/* The reference slot of a dot product: acos of the clamped dot, then the
 * bins' rule. */
int64_t pk_angcorr_slot_ref(const pk_bins *bins, double dot);

/* Bound on |c2(float32) - c2(exact, from the double unit vectors)| for a
 * pair whose chord squared is near c, with a factor 4 of headroom over the
 * derivation in docs/angcorr.md: PK_C2_ERR_SQRT sqrt(c) from rounding the
 * unit vectors and differences, PK_C2_ERR_LIN c from the three roundings of
 * the sum, and PK_C2_ERR_ABS for the squared rounding errors and the float64
 * dot. The edge table evaluates it at PK_C2_ERR_WIDEN c + PK_C2_ERR_ABS, so
 * that it holds over the whole window; the log path (cpu_log.c) carries the
 * same constants into log2(c2). */
#define PK_C2_ERR_SQRT 0x1p-19
#define PK_C2_ERR_LIN 0x1p-20
#define PK_C2_ERR_ABS 1e-12
#define PK_C2_ERR_WIDEN 1.01
static inline double pk_c2_error_bound(double c) {
    if (c < 0) c = 0;
    return sqrt(c) * PK_C2_ERR_SQRT + c * PK_C2_ERR_LIN + PK_C2_ERR_ABS;
}

/* Chord-squared uncertainty windows and the cell table.
 *
 * dot_threshold[s] (s = 0..n_bins) is the smallest double d whose reference
 * slot is <= s, so for every double d: slot(d) = #{s : d < T_s}. These are
 * found by bisection over the doubles against pk_angcorr_slot_ref itself.
 *
 * In chord-squared space, c2 = 2 - 2 d, boundary s sits at C_s = 2 - 2 T_s.
 * A float32 c2 computed from float32 unit vectors is within
 * pk_c2_error_bound(c2) of the exact value (derivation in docs/angcorr.md), so
 * [c2_lo[s], c2_hi[s]) = C_s -/+ that bound, rounded outwards, holds every c2
 * whose side of boundary s float32 cannot decide. Those pairs are settled in
 * float64.
 *
 * cell_slot maps the top bits of a float c2 (exponent and the first
 * cell_mantissa_bits of the mantissa) to the slot of the cell's lower end.
 * Within a cell without the PK_CELL_MULTI flag at most one uncertainty
 * window starts, that of boundary s0 = cell_slot, so
 *   slot = s0 + (c2 >= c2_hi[s0]), uncertain when c2_lo[s0] <= c2 < c2_hi[s0].
 */
#define PK_CELL_MULTI ((int32_t)0x40000000)
#define PK_CELL_SLOT_MASK ((int32_t)0x3fffffff)

typedef struct pk_edge_table {
    int32_t n_slots;       /* n_bins + 2 */
    int32_t n_bounds;      /* n_bins + 1 */
    double *dot_threshold; /* [n_bounds], non-increasing, may hold +-inf */
    float *c2_lo, *c2_hi;  /* [n_bounds + 1]; the extra entry is +inf */
    int32_t *cell_slot;    /* [n_cells] */
    int32_t n_cells;
    int32_t cell_shift;                   /* bits(c2) >> cell_shift ... */
    int32_t cell_base;                    /* ... - cell_base = cell index (clamped) */
    double multi_share;                   /* share of cells flagged PK_CELL_MULTI */
    struct pk_gpu_table_cache *gpu_cache; /* the GPU tables made from this one (gpu_table.c) */
} pk_edge_table;

struct pk_gpu_table_cache *pk_gpu_table_cache_new(void);
void pk_gpu_table_cache_free(struct pk_gpu_table_cache *c);

/* Mantissa bits of c2 that index the cell table: cells narrower than the
 * spacing of the default bins' edges up to ~150 degrees (0.23% of the cells
 * flagged as holding two windows), in a table of 23 binades x 512 cells x
 * 4 bytes = 46 KB for the default bins. */
#define PK_CELL_MANTISSA_BITS 9

#define PK_ANGCORR_KERNEL_CUDA_FIRST 100
/* The CUDA kernel PK_ANGCORR_KERNEL_BEST picks (defined in cuda.cu). */
extern const int pk_angcorr_cuda_best_kernel;
#define PK_ANGCORR_KERNEL_CUDA_BEST pk_angcorr_cuda_best_kernel

pk_status pk_edge_table_build(pk_context *ctx, const pk_bins *bins, pk_edge_table *t);
void pk_edge_table_free(pk_edge_table *t);

/* strtod for catalog values, without its hexadecimal form: "0x10" in a
 * catalog is a mistake, not 16. */
static inline double pk_catalog_strtod(const char *s, char **end) {
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '+' || *p == '-') p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        *end = (char *)s;
        return 0;
    }
    return pk_strtod(s, end);
}

/* Float helpers of the window builders: v rounded down / up to a float
 * (the float is <= / >= v), and a float from its bit pattern. */
static inline float pk_float_down(double v) {
    float f = (float)v;
    if ((double)f > v) f = nextafterf(f, -(float)INFINITY);
    return f;
}

static inline float pk_float_up(double v) {
    float f = (float)v;
    if ((double)f < v) f = nextafterf(f, (float)INFINITY);
    return f;
}

static inline float pk_float_from_bits(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Slot of an exact float64 dot product: #{s : d < T_s}. */
int32_t pk_edge_table_slot_fp64(const pk_edge_table *t, double dot);

/* Cell of a float c2 >= 0. */
static inline int32_t pk_edge_table_cell(const pk_edge_table *t, float c2) {
    union {
        float f;
        int32_t i;
    } u = {c2};
    int32_t idx = (u.i >> t->cell_shift) - t->cell_base;
    if (idx < 0) idx = 0;
    if (idx >= t->n_cells) idx = t->n_cells - 1;
    return idx;
}

/* Slot of a float c2 by search over the windows; -1 when c2 lies in an
 * uncertainty window (settle in float64). Any cell, flagged or not. */
int32_t pk_edge_table_slot_search(const pk_edge_table *t, float c2);

/* The arithmetic path for linear bins (CPU SIMD kernels). For chord
 * squared c2 <= 2 (separations up to 90 degrees) the bin coordinate
 * t = (theta - theta_min) / width is computed in float32 as
 *   t = sqrt(c2) * Q(c2) - theta_min / width,
 * Q a degree-7 fit of 2 asin(sqrt(y) / 2) / sqrt(y) / width on [0, 2]
 * (relative error 1.8e-8; 8.8e-8 when evaluated in float32). A pair is
 * decided when t lies at least margin_t from every existing edge; any other
 * pair, and every pair with c2 > 2, goes through the edge table. margin_t
 * bounds the float32 error of t: PK_LINEAR_THETA_MARGIN radians (the c2 error
 * of bins.c carried to theta, the fit, the square root from rsqrt plus one
 * Newton step, and the evaluation) over the width, plus 4 ulps of t
 * (cpu_avx2.c's exact square root and Estrin form stay within it: see
 * docs/angcorr.md). */
#define PK_LINEAR_THETA_MARGIN 2.5e-6
#define PK_LINEAR_DEGREE 7

typedef struct pk_linear_fast {
    float coef[PK_LINEAR_DEGREE + 1]; /* Q, constant term first, already / width */
    float t_offset;                   /* theta_min / width */
    float inv_width;                  /* 1 / width */
    float margin_t;
    float low_edge_from; /* check the edge below t only when t >= this (0.5 when
                             theta_min == 0: no separation lies below 0) */
    int32_t last_slot;   /* n_bins + 1 */
} pk_linear_fast;

/* Fill lf for linear bins when the margin stays small (< 0.05 bin);
 * returns 0 (not usable) otherwise. */
int pk_linear_fast_init(const pk_bins *bins, pk_linear_fast *lf);

/* A pair-counting job in the form every CPU kernel takes. */
typedef struct pk_pair_job {
    const pk_linear_fast *linear; /* NULL: use the edge table for every pair */
    const pk_edge_table *table;
    size_t n_a, n_b;
    const double *xa, *ya, *za; /* double unit vectors */
    const double *xb, *yb, *zb;
    const float *fxa, *fya, *fza; /* the same rounded to float */
    const float *fxb, *fyb, *fzb;
    int autocorr; /* b is a; count j > i only */
} pk_pair_job;

/* Slot of pair (i, j) of a job, when float32 could not decide. */
static inline int32_t pk_pair_slot_fp64(const pk_pair_job *job, size_t i, size_t j) {
    double d = pk_angcorr_dot_ref(job->xa[i], job->ya[i], job->za[i], job->xb[j], job->yb[j], job->zb[j]);
    return pk_edge_table_slot_fp64(job->table, d);
}

/* Count a block of pairs: i in [i0, i1), j in [j0, j1) (and j > i when
 * job->autocorr) into 4 interleaved uint32 histograms hist4[4][stride]
 * (each lane of a vector writes its own copy, which breaks the store-to-load
 * chains of repeated bins). Returns pairs settled in float64. The block must
 * hold fewer than 2^32 pairs. */
typedef uint64_t (*pk_block_fn)(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                                size_t stride);

uint64_t pk_angcorr_block_scalar(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                                 size_t stride);
uint64_t pk_angcorr_block_avx2(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                               size_t stride);
uint64_t pk_angcorr_block_avx512(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                                 size_t stride);
/* The block function of a CPU kernel (the arithmetic path with linear
 * set, where the kernel has one), NULL for a kernel without one here: the
 * reference, CUDA kernels, and x86 kernels on other machines. The
 * approximate baseline's needs linear bins. */
pk_block_fn pk_angcorr_block_fn(int kernel, int linear);
/* The arithmetic path (job->linear must be set). */
uint64_t pk_angcorr_block_avx2_linear(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1,
                                      uint32_t *hist4, size_t stride);
uint64_t pk_angcorr_block_avx512_linear(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1,
                                        uint32_t *hist4, size_t stride);
/* The slots of row i against columns [j0, j1) into out by the same path. */
uint64_t pk_angcorr_row_slots_avx512_linear(const pk_pair_job *job, size_t i, size_t j0, size_t j1, int32_t *out);
uint64_t pk_angcorr_row_slots_avx2_linear(const pk_pair_job *job, size_t i, size_t j0, size_t j1, int32_t *out);
/* The same through the edge table, for any bins. */
uint64_t pk_angcorr_row_slots_avx2_table(const pk_pair_job *job, size_t i, size_t j0, size_t j1, int32_t *out);
/* The float64 separations (radians) of row i against columns [j0, j1) into
 * theta[j1 - j0]: pk_acos of the clamped reference dot product, vectorised
 * where the CPU allows (cpu_theta.c), the same bits on every path. */
void pk_angcorr_row_theta(const pk_pair_job *job, size_t i, size_t j0, size_t j1, double *theta);
/* Its path: 2 AVX-512, 1 AVX2, 0 plain, -1 (the start) chosen from the CPU
 * at the first call; tests set the others the CPU has. */
extern int pk_angcorr_row_theta_path;

/* The reference count: slots[n_bins + 2] += every ordered pair (i, j) with
 * i in [i0, i1), j in [0, n_b), through acos in double. */
void pk_angcorr_ref_rows(const pk_bins *bins, const pk_unit_vectors *a, const pk_unit_vectors *b, size_t i0, size_t i1,
                         uint64_t *slots);

/* CPU pair counting into slots[n_bins + 2] (all slots, including the two
 * out-of-range ones). */
pk_status pk_angcorr_count_cpu(pk_context *ctx, int kernel, const pk_catalog *a, const pk_catalog *b,
                               const pk_bins *bins, const pk_edge_table *table, uint64_t *slots, pk_pair_stats *stats,
                               pk_progress *progress);

/* The largest catalog a count takes: the CUDA kernels index objects with
 * int, and with it every count, up to n^2 < 2^62 pairs, fits the uint64
 * histograms. */
#define PK_ANGCORR_MAX_OBJECTS 2147483647u

/* PK_ERR_INVALID, before any work, when a or b (may be NULL) holds more
 * objects than PK_ANGCORR_MAX_OBJECTS or their pairs would overflow a
 * 64-bit count. */
pk_status pk_angcorr_check_sizes(pk_context *ctx, const pk_catalog *a, const pk_catalog *b);

/* Backend and kernel from the options (NULL: automatic): an explicit kernel
 * must exist, run here and belong to the backend asked for; otherwise the
 * backend is resolved and its fastest kernel taken. */
pk_status pk_angcorr_choose_kernel(pk_context *ctx, const pk_angcorr_options *opts, pk_backend *backend, int *kernel);

#ifdef PK_HAVE_CUDA
/* CUDA kernels are numbered from PK_ANGCORR_KERNEL_CUDA_FIRST; cuda.cu
 * names them and picks PK_ANGCORR_KERNEL_CUDA_BEST. */
const char *pk_angcorr_cuda_kernel_name(int kernel);
int pk_angcorr_cuda_kernel_from_name(const char *name);
pk_status pk_angcorr_count_cuda(pk_context *ctx, int kernel, const pk_catalog *a, const pk_catalog *b,
                                const pk_bins *bins, const pk_edge_table *table, uint64_t *slots, pk_pair_stats *stats,
                                pk_progress *progress);
/* Many counts at once, in one call (a session's open, count and close
 * below; the tests' form): pair k counts patch pair_p[k] of a against patch
 * pair_q[k] of b (b NULL: patches of a, pair (p, p) an autocorrelation), into
 * slots[k * n_slots ...] and stats[k], the slots as pk_angcorr_count_cuda
 * leaves them. The patches are sent to the device once and every count is
 * queued without a wait between them (a count costs ~0.3 ms when made
 * alone). PK_ERR_UNSUPPORTED, with no message, for kernels and sizes it
 * does not take (the naive and approximate kernels, bins beyond the GPU
 * table, a pair beyond one launch): the caller counts one at a time. */
pk_status pk_angcorr_count_cuda_pairs(pk_context *ctx, int kernel, const pk_catalog *const *a, int n_a,
                                      const pk_catalog *const *b, int n_b, const int32_t *pair_p, const int32_t *pair_q,
                                      size_t n_pairs, const pk_bins *bins, const pk_edge_table *table, uint64_t *slots,
                                      pk_pair_stats *stats, pk_progress *progress);
/* The same in steps, for a caller that hands out the pairs as it goes:
 * open sends the patches of a (set 0) and of b (set 1, when b is not
 * NULL) and sets the tables up (PK_ERR_UNSUPPORTED, with no message, as
 * above); count counts pairs of set_a's patch pair_p[k] and set_b's
 * patch pair_q[k] (set_a == set_b: pairs within one set, (p, p) an
 * autocorrelation), PK_ERR_UNSUPPORTED when one is beyond one launch,
 * before anything is counted; use8: each pair's judgement (below) made
 * beforehand, or NULL; every call ends with its work (nothing left
 * queued), failed or not. close frees it (failed: after waiting for the
 * device). One thread at a time. */
typedef struct pk_cuda_pairs pk_cuda_pairs;
pk_status pk_angcorr_cuda_pairs_open(pk_context *ctx, int kernel, const pk_catalog *const *a, int n_a,
                                     const pk_catalog *const *b, int n_b, const pk_bins *bins,
                                     const pk_edge_table *table, pk_cuda_pairs **out);
pk_status pk_angcorr_cuda_pairs_count(pk_context *ctx, pk_cuda_pairs *s, int set_a, int set_b, const int32_t *pair_p,
                                      const int32_t *pair_q, size_t n_pairs, const unsigned char *use8, uint64_t *slots,
                                      pk_pair_stats *stats, pk_progress *progress);
/* Which of the two tables of 8-bit-cell kernels pair (p, q) of sets
 * (set_a, set_b) takes, as count judges it when use8 is NULL: 1 the 8-bit
 * one (also for kernels of one table), 0 the 9-bit one (a sample of 1,024
 * of its separations). Read-only: any number of threads at once. */
int pk_angcorr_cuda_pairs_judge(const pk_cuda_pairs *s, int set_a, int set_b, int p, int q);
void pk_angcorr_cuda_pairs_close(pk_cuda_pairs *s, int failed);
/* The most batches the GPU takes when it shares jackknife counts with the
 * CPU (-1, the default: no limit; defined in features.c). */
extern int pk_angcorr_share_gpu_batches;
/* The most objects a batch of weighted or pruned counts on the GPU holds
 * (a count larger alone; defined in features.c, 2^20; tests lower it). */
extern size_t pk_angcorr_feature_batch_objects;
/* Pairs per launch of the tiled kernels (2^34, defined in cuda.cu); the
 * tests lower it so that small counts take many launches. */
extern uint64_t pk_angcorr_cuda_chunk_pairs;
#endif

#endif
