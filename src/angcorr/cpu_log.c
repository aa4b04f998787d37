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
 * Counting: the top slot and the three slots below it (half, a quarter and
 * an eighth of the pairs in range of log bins fall in the last three) are
 * counted by popcount per vector; the other lanes are compressed into a
 * buffer and counted in bulk, without a branch per lane. On the bundled DR
 * this took the CPU time from 0.72 s (the direct kernel's lane-private
 * increments) to 0.56 s (interleaved runs, docs/performance.md).
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
    /* c2 error of bins.c (2^-19 sqrt(c) + 2^-20 c + 1e-12 at 1.01 c + 1e-12)
     * in log2(c2), with 2% for the logarithm's curvature and the rsqrt14
     * estimate of 1/sqrt(c2) */
    double k_log = 1.02 / M_LN2;
    lf->m1 = (float)(a * k_log * ldexp(1.0, -19) * sqrt(1.01) * 1.001);
    double t_max = fabs(a) * 130 + fabs(b) * 1 + fabs(c); /* |terms| of t: log2(c2) >= -126 */
    double m0 = a * k_log * (ldexp(1.01, -20) + ldexp(1e-6, -19) / lo0 + 3e-12 / lo0) + a * 2 * LOG2_POLY_ERROR +
                b * 2 * g_err + 2 * dev + 8 * ldexp(t_max, -24) + 1e-6 +
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

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_block_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i0, size_t i1, size_t j0, size_t j1,
                            uint32_t *hist, size_t stride) {
    const __m512 p0 = _mm512_set1_ps(lf->lp[0]), p1 = _mm512_set1_ps(lf->lp[1]), p2 = _mm512_set1_ps(lf->lp[2]),
                 p3 = _mm512_set1_ps(lf->lp[3]), p4 = _mm512_set1_ps(lf->lp[4]), p5 = _mm512_set1_ps(lf->lp[5]),
                 p6 = _mm512_set1_ps(lf->lp[6]), p7 = _mm512_set1_ps(lf->lp[7]);
    const __m512 g0 = _mm512_set1_ps(lf->g[0]), g1 = _mm512_set1_ps(lf->g[1]), g2 = _mm512_set1_ps(lf->g[2]),
                 g3 = _mm512_set1_ps(lf->g[3]), g4 = _mm512_set1_ps(lf->g[4]);
    const __m512 va = _mm512_set1_ps(lf->a), vb = _mm512_set1_ps(lf->b), vc = _mm512_set1_ps(lf->c);
    const __m512 m1 = _mm512_set1_ps(lf->m1), m0 = _mm512_set1_ps(lf->m0), one = _mm512_set1_ps(1.0f);
    const __m512 lo0 = _mm512_set1_ps(lf->c2_lo0), top_c2 = _mm512_set1_ps(lf->c2_top);
    const __m512i top_v = _mm512_set1_epi32(lf->top), zero = _mm512_setzero_si512(), onei = _mm512_set1_epi32(1);
    const int32_t top = lf->top;
    (void)stride; /* one histogram copy: the hot slots never touch it per pair */
    uint64_t n_fp64 = 0, n_top = 0, n_hot[3] = {0, 0, 0};
    /* hot slots below the top; with fewer than 4 slots below it none (-1
     * matches no lane) */
    const __m512i hot1 = _mm512_set1_epi32(top >= 4 ? top - 1 : -1), hot2 = _mm512_set1_epi32(top >= 4 ? top - 2 : -1),
                  hot3 = _mm512_set1_epi32(top >= 4 ? top - 3 : -1);
#define COLD_BUF 1024
    int32_t cold_buf[COLD_BUF + 16] __attribute__((aligned(64)));
    size_t n_cold = 0;
    int32_t slot[16] __attribute__((aligned(64)));
    float c2v[16] __attribute__((aligned(64)));

    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        const __m512 xi = _mm512_set1_ps(job->fxa[i]), yi = _mm512_set1_ps(job->fya[i]),
                     zi = _mm512_set1_ps(job->fza[i]);
        for (; j < j1; j += 16) {
            __mmask16 valid = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
            __m512 c2 = pk_chord2_16(job, j, valid, xi, yi, zi);
            __mmask16 below = _mm512_cmp_ps_mask(c2, lo0, _CMP_LT_OQ);
            __mmask16 above = _mm512_cmp_ps_mask(c2, top_c2, _CMP_GE_OQ);
            __m512 cm = _mm512_max_ps(c2, lo0); /* keeps log and rsqrt finite; those lanes are decided */
            __m512 e = _mm512_getexp_ps(cm);
            __m512 x = _mm512_sub_ps(_mm512_getmant_ps(cm, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero), one);
            __m512 p = _mm512_fmadd_ps(p7, x, p6);
            p = _mm512_fmadd_ps(p, x, p5);
            p = _mm512_fmadd_ps(p, x, p4);
            p = _mm512_fmadd_ps(p, x, p3);
            p = _mm512_fmadd_ps(p, x, p2);
            p = _mm512_fmadd_ps(p, x, p1);
            p = _mm512_fmadd_ps(p, x, p0);
            __m512 L = _mm512_add_ps(e, p);
            __m512 g = _mm512_fmadd_ps(g4, cm, g3);
            g = _mm512_fmadd_ps(g, cm, g2);
            g = _mm512_fmadd_ps(g, cm, g1);
            g = _mm512_fmadd_ps(g, cm, g0);
            __m512 t = _mm512_fmadd_ps(va, L, _mm512_fmadd_ps(vb, g, vc));
            __m512 margin = _mm512_fmadd_ps(m1, _mm512_rsqrt14_ps(cm), m0);
            __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            __m512 f = _mm512_sub_ps(t, k);
            __mmask16 near = _mm512_cmp_ps_mask(f, margin, _CMP_LT_OQ) |
                             _mm512_cmp_ps_mask(f, _mm512_sub_ps(one, margin), _CMP_GT_OQ);
            __mmask16 decided = below | above;
            __mmask16 unsure = near & (__mmask16)~decided & valid;
            __m512i s = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_max_ps(k, _mm512_set1_ps(-1.0f))), onei);
            s = _mm512_min_epi32(_mm512_max_epi32(s, zero), top_v);
            s = _mm512_mask_mov_epi32(s, below, zero);
            s = _mm512_mask_mov_epi32(s, above, top_v);
            if (unsure) {
                _mm512_store_si512((__m512i *)slot, s);
                _mm512_store_ps(c2v, c2);
                unsigned u = unsure;
                while (u) {
                    int l = __builtin_ctz(u);
                    u &= u - 1;
                    slot[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], &n_fp64);
                }
                s = _mm512_load_si512((const __m512i *)slot);
            }
            /* The top slot and the three below it (log bins put most pairs
             * in range in their last bins) are counted by popcount; the
             * other lanes are compressed into a buffer, counted in bulk. */
            __mmask16 is_top = _mm512_mask_cmpeq_epi32_mask(valid, s, top_v);
            __mmask16 is_h1 = _mm512_mask_cmpeq_epi32_mask(valid, s, hot1);
            __mmask16 is_h2 = _mm512_mask_cmpeq_epi32_mask(valid, s, hot2);
            __mmask16 is_h3 = _mm512_mask_cmpeq_epi32_mask(valid, s, hot3);
            n_top += (uint64_t)__builtin_popcount((unsigned)is_top);
            n_hot[0] += (uint64_t)__builtin_popcount((unsigned)is_h1);
            n_hot[1] += (uint64_t)__builtin_popcount((unsigned)is_h2);
            n_hot[2] += (uint64_t)__builtin_popcount((unsigned)is_h3);
            __mmask16 cold = valid & (__mmask16) ~(is_top | is_h1 | is_h2 | is_h3);
            _mm512_storeu_si512((__m512i *)(cold_buf + n_cold), _mm512_maskz_compress_epi32(cold, s));
            n_cold += (size_t)__builtin_popcount((unsigned)cold);
            if (n_cold > COLD_BUF - 16) {
                for (size_t q = 0; q < n_cold; q++) hist[(uint32_t)cold_buf[q]]++;
                n_cold = 0;
            }
        }
    }
    for (size_t q = 0; q < n_cold; q++) hist[(uint32_t)cold_buf[q]]++;
    if (top >= 4) {
        hist[top - 1] += (uint32_t)n_hot[0];
        hist[top - 2] += (uint32_t)n_hot[1];
        hist[top - 3] += (uint32_t)n_hot[2];
    }
    hist[top] += (uint32_t)n_top;
    return n_fp64;
}

/* The slots of row i against columns [j0, j1) into out[j1 - j0] (the
 * weighted path adds the weights in column order after this). */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_row_slots_avx512_log(const pk_pair_job *job, const pk_log_fast *lf, size_t i, size_t j0, size_t j1,
                                int32_t *out) {
    const __m512 p0 = _mm512_set1_ps(lf->lp[0]), p1 = _mm512_set1_ps(lf->lp[1]), p2 = _mm512_set1_ps(lf->lp[2]),
                 p3 = _mm512_set1_ps(lf->lp[3]), p4 = _mm512_set1_ps(lf->lp[4]), p5 = _mm512_set1_ps(lf->lp[5]),
                 p6 = _mm512_set1_ps(lf->lp[6]), p7 = _mm512_set1_ps(lf->lp[7]);
    const __m512 g0 = _mm512_set1_ps(lf->g[0]), g1 = _mm512_set1_ps(lf->g[1]), g2 = _mm512_set1_ps(lf->g[2]),
                 g3 = _mm512_set1_ps(lf->g[3]), g4 = _mm512_set1_ps(lf->g[4]);
    const __m512 va = _mm512_set1_ps(lf->a), vb = _mm512_set1_ps(lf->b), vc = _mm512_set1_ps(lf->c);
    const __m512 m1 = _mm512_set1_ps(lf->m1), m0 = _mm512_set1_ps(lf->m0), one = _mm512_set1_ps(1.0f);
    const __m512 lo0 = _mm512_set1_ps(lf->c2_lo0), top_c2 = _mm512_set1_ps(lf->c2_top);
    const __m512i top_v = _mm512_set1_epi32(lf->top), zero = _mm512_setzero_si512(), onei = _mm512_set1_epi32(1);
    const __m512 xi = _mm512_set1_ps(job->fxa[i]), yi = _mm512_set1_ps(job->fya[i]), zi = _mm512_set1_ps(job->fza[i]);
    uint64_t n_fp64 = 0;
    float c2v[16] __attribute__((aligned(64)));
    for (size_t j = j0; j < j1; j += 16) {
        __mmask16 valid = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
        __m512 c2 = pk_chord2_16(job, j, valid, xi, yi, zi);
        __mmask16 below = _mm512_cmp_ps_mask(c2, lo0, _CMP_LT_OQ);
        __mmask16 above = _mm512_cmp_ps_mask(c2, top_c2, _CMP_GE_OQ);
        __m512 cm = _mm512_max_ps(c2, lo0);
        __m512 e = _mm512_getexp_ps(cm);
        __m512 x = _mm512_sub_ps(_mm512_getmant_ps(cm, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero), one);
        __m512 p = _mm512_fmadd_ps(p7, x, p6);
        p = _mm512_fmadd_ps(p, x, p5);
        p = _mm512_fmadd_ps(p, x, p4);
        p = _mm512_fmadd_ps(p, x, p3);
        p = _mm512_fmadd_ps(p, x, p2);
        p = _mm512_fmadd_ps(p, x, p1);
        p = _mm512_fmadd_ps(p, x, p0);
        __m512 L = _mm512_add_ps(e, p);
        __m512 g = _mm512_fmadd_ps(g4, cm, g3);
        g = _mm512_fmadd_ps(g, cm, g2);
        g = _mm512_fmadd_ps(g, cm, g1);
        g = _mm512_fmadd_ps(g, cm, g0);
        __m512 t = _mm512_fmadd_ps(va, L, _mm512_fmadd_ps(vb, g, vc));
        __m512 margin = _mm512_fmadd_ps(m1, _mm512_rsqrt14_ps(cm), m0);
        __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 f = _mm512_sub_ps(t, k);
        __mmask16 near =
            _mm512_cmp_ps_mask(f, margin, _CMP_LT_OQ) | _mm512_cmp_ps_mask(f, _mm512_sub_ps(one, margin), _CMP_GT_OQ);
        __mmask16 unsure = near & (__mmask16) ~(below | above) & valid;
        __m512i s = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_max_ps(k, _mm512_set1_ps(-1.0f))), onei);
        s = _mm512_min_epi32(_mm512_max_epi32(s, zero), top_v);
        s = _mm512_mask_mov_epi32(s, below, zero);
        s = _mm512_mask_mov_epi32(s, above, top_v);
        int32_t *o = out + (j - j0);
        _mm512_mask_storeu_epi32(o, valid, s);
        if (unsure) {
            _mm512_store_ps(c2v, c2);
            unsigned u = unsure;
            while (u) {
                int l = __builtin_ctz(u);
                u &= u - 1;
                o[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], &n_fp64);
            }
        }
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
