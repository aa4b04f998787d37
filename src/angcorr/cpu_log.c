/* cpu_log.c - the arithmetic path for logarithmic bins (AVX-512), the log
 * counterpart of the linear bins' path in cpu_avx512.c: no table gather for
 * the pairs it decides.
 *
 * For c2 in [c2_lo[0], c2_hi[top]) the bin coordinate
 *   t = ln(theta / theta_min) / ln(r) = a log2(c2) + b G(c2) + c,
 * theta = 2 asin(sqrt(c2) / 2), G(y) = log2(2 asin(sqrt(y) / 2) / sqrt(y)),
 * is computed in float32: log2(c2) as the exponent (vgetexp) plus a
 * degree-7 polynomial of the mantissa, G as a degree-4 polynomial fitted at
 * set-up. floor(t) + 1 is the slot unless t lies within the margin of an
 * integer; the margin bounds, per pair, the float32 c2 error of bins.c
 * carried to t (a term in 1/sqrt(c2), from the rsqrt the kernel has anyway)
 * plus the polynomials' errors, the float32 rounding of t and the edges'
 * distance from an exact geometric sequence. Pairs inside the margin take
 * the table path (cpu_kernel.h) and, near an edge, float64 settling. c2
 * below the first window is slot 0, at or above the last window's top the
 * top slot, both certain.
 *
 * Counting: half, a quarter and an eighth of the pairs in range of log
 * bins fall in the last three slots, so the top slot and the three below
 * it are counted by popcount per vector (pk_hot16 in cpu_kernel.h).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_kernel.h"
#include "grid.h"

/* log2(1 + x) on [0, 1]: Chebyshev interpolation of degree 7, max error
 * 3.69e-7 in float32 Horner form (measured on 200,001 points). */
static const float log2_poly[8] = {3.685614093917877e-07f, 1.4426475487299526f,   -0.7203160643597616f,
                                   0.47208691624873467f,   -0.32196028547658173f, 0.18875273776112778f,
                                   -0.07565137470444938f,  0.014440352501082998f};
#define LOG2_POLY_ERROR 4.0e-7

static double g_exact(double y) {
    if (y <= 0) return 0;
    double s = sqrt(y);
    return log2(2.0 * asin(s / 2.0) / s);
}

int pk_log_fast_init(const pk_bins *bins, const pk_edge_table *t, pk_log_fast *lf) {
    memset(lf, 0, sizeof *lf);
    size_t n = bins->n_bins;
    if (bins->kind != PK_BINS_EDGES || n < 1 || !(bins->edges[0] > 0) || bins->edges[n] > M_PI / 2) return 0;
    double e0 = bins->edges[0], ln_r = log(bins->edges[n] / e0) / (double)n;
    if (!(ln_r > 1e-6)) return 0;
    double dev = 0; /* largest distance of an edge from the geometric sequence, in t */
    for (size_t k = 0; k <= n; k++) {
        double d = fabs(log(bins->edges[k] / e0) / ln_r - (double)k);
        if (d > dev) dev = d;
    }
    if (dev > 1e-6) return 0; /* not log bins */
    double lo0 = (double)t->c2_lo[0], top = (double)t->c2_hi[t->n_bounds - 1];
    if (!(lo0 > 0) || !isfinite(top) || top > 2.0) return 0;
    /* t = a log2(c2) + b G(c2) + c */
    double a = 0.5 * M_LN2 / ln_r, b = M_LN2 / ln_r, c = -log(e0) / ln_r;
    /* G on [0, top]: interpolation at 5 Chebyshev nodes, in monomial form */
    double xs[5], ys[5];
    for (int k = 0; k < 5; k++) {
        xs[k] = 0.5 * top * (1 - cos(M_PI * (k + 0.5) / 5));
        ys[k] = g_exact(xs[k]);
    }
    double coef[5] = {0, 0, 0, 0, 0};
    for (int k = 0; k < 5; k++) { /* Lagrange basis polynomials expanded */
        double basis[5] = {1, 0, 0, 0, 0}, denom = 1;
        int deg = 0;
        for (int m = 0; m < 5; m++) {
            if (m == k) continue;
            for (int q = deg + 1; q > 0; q--) basis[q] = basis[q - 1] - xs[m] * basis[q];
            basis[0] = -xs[m] * basis[0];
            deg++;
            denom *= xs[k] - xs[m];
        }
        for (int q = 0; q < 5; q++) coef[q] += ys[k] * basis[q] / denom;
    }
    double g_err = 0;
    for (int k = 0; k <= 4000; k++) {
        double y = top * k / 4000.0;
        float p = (float)coef[4];
        for (int q = 3; q >= 0; q--) p = fmaf(p, (float)y, (float)coef[q]);
        double e = fabs((double)p - g_exact(y));
        if (e > g_err) g_err = e;
    }
    for (int q = 0; q < 5; q++) lf->g[q] = (float)coef[q];
    for (int q = 0; q < 8; q++) lf->lp[q] = log2_poly[q];
    lf->a = (float)a, lf->b = (float)b, lf->c = (float)c;
    /* the edge table's c2 error (pk_c2_error_bound at PK_C2_ERR_WIDEN c +
     * PK_C2_ERR_ABS) in log2(c2), with 2% for the logarithm's curvature and
     * the rsqrt14 estimate of 1/sqrt(c2); 1e-6 is sqrt(PK_C2_ERR_ABS), 3e-12
     * the absolute terms with their widening */
    double k_log = 1.02 / M_LN2;
    lf->m1 = (float)(a * k_log * PK_C2_ERR_SQRT * sqrt(PK_C2_ERR_WIDEN) * 1.001);
    double t_max = fabs(a) * 130 + fabs(b) * 1 + fabs(c); /* |terms| of t: log2(c2) >= -126 */
    double m0 = a * k_log * (PK_C2_ERR_WIDEN * PK_C2_ERR_LIN + 1e-6 * PK_C2_ERR_SQRT / lo0 + 3e-12 / lo0) +
                a * 2 * LOG2_POLY_ERROR + b * 2 * g_err + 2 * dev + 8 * ldexp(t_max, -24) + 1e-6 +
                /* the doubles next to a threshold T_s, seen in t */
                4.0 * DBL_EPSILON / (e0 * e0) / ln_r;
    if (m0 > 0.02) return 0;
    lf->m0 = (float)m0;
    lf->c2_lo0 = (float)lo0;
    lf->c2_top = (float)top;
    lf->top = t->n_slots - 1;
    return 1;
}

#if defined(__x86_64__)
#include <immintrin.h>

typedef struct log16 {
    __m512 p[8], g[5];
    __m512 a, b, c, m1, m0, one, minus_one, lo0, top_c2;
    __m512i top, zero, one_i;
} log16;

PK_AVX512_INLINE log16 log16_make(const pk_log_fast *lf) {
    log16 k;
    for (int q = 0; q < 8; q++) k.p[q] = _mm512_set1_ps(lf->lp[q]);
    for (int q = 0; q < 5; q++) k.g[q] = _mm512_set1_ps(lf->g[q]);
    k.a = _mm512_set1_ps(lf->a), k.b = _mm512_set1_ps(lf->b), k.c = _mm512_set1_ps(lf->c);
    k.m1 = _mm512_set1_ps(lf->m1), k.m0 = _mm512_set1_ps(lf->m0);
    k.one = _mm512_set1_ps(1.0f), k.minus_one = _mm512_set1_ps(-1.0f);
    k.lo0 = _mm512_set1_ps(lf->c2_lo0), k.top_c2 = _mm512_set1_ps(lf->c2_top);
    k.top = _mm512_set1_epi32(lf->top), k.zero = _mm512_setzero_si512(), k.one_i = _mm512_set1_epi32(1);
    return k;
}

/* The exact slots of row i against the `valid` lanes of columns j .. j + 15
 * (the others hold junk). */
PK_AVX512_INLINE __m512i log_slots16(const pk_pair_job *job, const log16 *k, size_t i, size_t j, __mmask16 valid,
                                     __m512 xi, __m512 yi, __m512 zi, uint64_t *n_fp64) {
    __m512 c2 = pk_chord2_16(job, j, valid, xi, yi, zi);
    __mmask16 below = _mm512_cmp_ps_mask(c2, k->lo0, _CMP_LT_OQ);
    __mmask16 above = _mm512_cmp_ps_mask(c2, k->top_c2, _CMP_GE_OQ);
    __m512 cm = _mm512_max_ps(c2, k->lo0); /* keeps log and rsqrt finite; those lanes are decided */
    __m512 e = _mm512_getexp_ps(cm);
    __m512 x = _mm512_sub_ps(_mm512_getmant_ps(cm, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero), k->one);
    __m512 p = _mm512_fmadd_ps(k->p[7], x, k->p[6]);
#pragma GCC unroll 8
    for (int q = 5; q >= 0; q--) p = _mm512_fmadd_ps(p, x, k->p[q]);
    __m512 L = _mm512_add_ps(e, p);
    __m512 g = _mm512_fmadd_ps(k->g[4], cm, k->g[3]);
#pragma GCC unroll 8
    for (int q = 2; q >= 0; q--) g = _mm512_fmadd_ps(g, cm, k->g[q]);
    __m512 t = _mm512_fmadd_ps(k->a, L, _mm512_fmadd_ps(k->b, g, k->c));
    __m512 margin = _mm512_fmadd_ps(k->m1, _mm512_rsqrt14_ps(cm), k->m0);
    __m512 fl = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, fl);
    __mmask16 near =
        _mm512_cmp_ps_mask(f, margin, _CMP_LT_OQ) | _mm512_cmp_ps_mask(f, _mm512_sub_ps(k->one, margin), _CMP_GT_OQ);
    __mmask16 unsure = near & (__mmask16) ~(below | above) & valid;
    __m512i s = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_max_ps(fl, k->minus_one)), k->one_i);
    s = _mm512_min_epi32(_mm512_max_epi32(s, k->zero), k->top);
    s = _mm512_mask_mov_epi32(s, below, k->zero);
    s = _mm512_mask_mov_epi32(s, above, k->top);
    return unsure ? pk_settle16(job, i, j, s, c2, unsure, n_fp64) : s;
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_block_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i0, size_t i1, size_t j0, size_t j1,
                            uint32_t *hist, size_t stride) {
    const log16 k = log16_make(lf);
    (void)stride; /* one histogram copy: the hot slots never touch it per pair */
    int32_t cold[PK_HOT16_COLD + 16] __attribute__((aligned(64)));
    pk_hot16 h = pk_hot16_make(lf->top, cold);
    uint64_t n_fp64 = 0;
    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        const __m512 xi = _mm512_set1_ps(job->fxa[i]), yi = _mm512_set1_ps(job->fya[i]),
                     zi = _mm512_set1_ps(job->fza[i]);
        for (; j < j1; j += 16) {
            __mmask16 valid = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
            pk_hot16_add(&h, log_slots16(job, &k, i, j, valid, xi, yi, zi, &n_fp64), valid, hist);
        }
    }
    pk_hot16_finish(&h, hist);
    return n_fp64;
}

/* The slots of row i against columns [j0, j1) into out[j1 - j0] (the
 * weighted path adds the weights in column order after this). */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_row_slots_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i, size_t j0, size_t j1,
                                int32_t *out) {
    const log16 k = log16_make(lf);
    const __m512 xi = _mm512_set1_ps(job->fxa[i]), yi = _mm512_set1_ps(job->fya[i]), zi = _mm512_set1_ps(job->fza[i]);
    uint64_t n_fp64 = 0;
    for (size_t j = j0; j < j1; j += 16) {
        __mmask16 valid = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
        _mm512_mask_storeu_epi32(out + (j - j0), valid, log_slots16(job, &k, i, j, valid, xi, yi, zi, &n_fp64));
    }
    return n_fp64;
}

#else

uint64_t pk_angcorr_block_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i0, size_t i1, size_t j0,
                                     size_t j1, uint32_t *hist, size_t stride) {
    (void)job, (void)lf, (void)i0, (void)i1, (void)j0, (void)j1, (void)hist, (void)stride;
    return 0;
}

uint64_t pk_angcorr_row_slots_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i, size_t j0, size_t j1,
                                         int32_t *out) {
    (void)job, (void)lf, (void)i, (void)j0, (void)j1, (void)out;
    return 0;
}

#endif
