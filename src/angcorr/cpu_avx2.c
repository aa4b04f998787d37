/* cpu_avx2.c - the angcorr block kernel with AVX2 + FMA, 8 pairs a step.
 * Compiled for every x86-64 build with a target attribute and chosen at
 * run time only when the CPU has AVX2 and FMA. Slots are identical to the
 * scalar kernel's (both are exact); only the float32 c2 may differ in its
 * last bit, which the uncertainty windows cover. Each path computes 8
 * slots in one inline function that the histogram kernels and the row-slot
 * functions of the weighted path share.
 */
#include "cpu_kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* c2 (float32 squared chord) of row i's point against columns j .. j + 7. */
AVX2_INLINE __m256 chord2_8(const pk_pair_job *job, size_t j, __m256 xi, __m256 yi, __m256 zi) {
    __m256 dx = _mm256_sub_ps(xi, _mm256_loadu_ps(job->fxb + j));
    __m256 dy = _mm256_sub_ps(yi, _mm256_loadu_ps(job->fyb + j));
    __m256 dz = _mm256_sub_ps(zi, _mm256_loadu_ps(job->fzb + j));
    __m256 c2 = _mm256_mul_ps(dx, dx);
    c2 = _mm256_fmadd_ps(dy, dy, c2);
    return _mm256_fmadd_ps(dz, dz, c2);
}

/* The lanes of s marked in `unsure` settled exactly (pk_slot_from_c2). */
AVX2_INLINE __m256i settle8(const pk_pair_job *job, size_t i, size_t j, __m256i s, __m256 c2, int unsure,
                            uint64_t *n_fp64) {
    int32_t slot[8] __attribute__((aligned(32)));
    float c2v[8] __attribute__((aligned(32)));
    _mm256_store_si256((__m256i *)slot, s);
    _mm256_store_ps(c2v, c2);
    while (unsure) {
        int l = __builtin_ctz((unsigned)unsure);
        unsure &= unsure - 1;
        slot[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], n_fp64);
    }
    return _mm256_load_si256((const __m256i *)slot);
}

/* ---- the edge table --------------------------------------------------- */

typedef struct table8 {
    __m128i shift;
    __m256i base, last_cell, zero, slot_mask;
} table8;

AVX2_INLINE table8 table8_make(const pk_edge_table *t) {
    table8 k;
    k.shift = _mm_cvtsi32_si128(t->cell_shift);
    k.base = _mm256_set1_epi32(t->cell_base);
    k.last_cell = _mm256_set1_epi32(t->n_cells - 1);
    k.zero = _mm256_setzero_si256();
    k.slot_mask = _mm256_set1_epi32(PK_CELL_SLOT_MASK);
    return k;
}

/* The exact slots of row i against columns j .. j + 7 through the table. */
AVX2_INLINE __m256i table_slots8(const pk_pair_job *job, const table8 *k, size_t i, size_t j, __m256 xi, __m256 yi,
                                 __m256 zi, uint64_t *n_fp64) {
    const pk_edge_table *t = job->table;
    __m256 c2 = chord2_8(job, j, xi, yi, zi);
    __m256i cell = _mm256_sub_epi32(_mm256_srl_epi32(_mm256_castps_si256(c2), k->shift), k->base);
    cell = _mm256_min_epi32(_mm256_max_epi32(cell, k->zero), k->last_cell);
    __m256i e = _mm256_i32gather_epi32(t->cell_slot, cell, 4);
    __m256i s0 = _mm256_and_si256(e, k->slot_mask);
    __m256 lo = _mm256_i32gather_ps(t->c2_lo, s0, 4);
    __m256 hi = _mm256_i32gather_ps(t->c2_hi, s0, 4);
    __m256 ge_hi = _mm256_cmp_ps(c2, hi, _CMP_GE_OQ);
    __m256 ge_lo = _mm256_cmp_ps(c2, lo, _CMP_GE_OQ);
    __m256i s = _mm256_sub_epi32(s0, _mm256_castps_si256(ge_hi));
    int unsure = _mm256_movemask_ps(_mm256_andnot_ps(ge_hi, ge_lo)) |
                 _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(e, 1)));
    return unsure ? settle8(job, i, j, s, c2, unsure, n_fp64) : s;
}

__attribute__((target("avx2,fma"))) uint64_t pk_angcorr_block_avx2(const pk_pair_job *job, size_t i0, size_t i1,
                                                                   size_t j0, size_t j1, uint32_t *hist4,
                                                                   size_t stride) {
    const table8 k = table8_make(job->table);
    uint32_t *h0 = hist4, *h1 = hist4 + stride, *h2 = hist4 + 2 * stride, *h3 = hist4 + 3 * stride;
    uint64_t n_fp64 = 0;
    int32_t slot[32] __attribute__((aligned(32)));

    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
        /* the slots of four groups of 8 columns before their increments,
         * where four remain (cpu_avx512.c) */
        for (; j + 8 <= j1;) {
            int groups = j + 32 <= j1 ? 4 : 1;
            for (int g = 0; g < groups; g++)
                _mm256_store_si256((__m256i *)(slot + 8 * g),
                                   table_slots8(job, &k, i, j + 8 * (size_t)g, xi, yi, zi, &n_fp64));
            for (int l = 0; l < 8 * groups; l += 4) {
                h0[slot[l]]++;
                h1[slot[l + 1]]++;
                h2[slot[l + 2]]++;
                h3[slot[l + 3]]++;
            }
            j += 8 * (size_t)groups;
        }
        for (; j < j1; j++) {
            int32_t s = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
            hist4[(j & 3) * stride + (size_t)s]++;
        }
    }
    return n_fp64;
}

/* The slots of row i against columns [j0, j1) into out[j1 - j0] through
 * the edge table, for any bins (scalar tail): the weighted path adds the
 * weights in column order after this, so its sums are those of the scalar
 * slots bit for bit. */
__attribute__((target("avx2,fma"))) uint64_t pk_angcorr_row_slots_avx2_table(const pk_pair_job *job, size_t i,
                                                                             size_t j0, size_t j1, int32_t *out) {
    const table8 k = table8_make(job->table);
    uint64_t n_fp64 = 0;
    float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
    const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
    size_t j = j0;
    for (; j + 8 <= j1; j += 8)
        _mm256_storeu_si256((__m256i *)(out + (j - j0)), table_slots8(job, &k, i, j, xi, yi, zi, &n_fp64));
    for (; j < j1; j++) out[j - j0] = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
    return n_fp64;
}

/* Add one to h[s[l]] for the 8 lanes (two lanes per 64-bit extract), in
 * the four histogram copies stride apart, lane l into copy l % 4:
 * neighbouring columns, often in one bin, then wait on four store chains
 * instead of one (AMD Zen 3, the whole bundled problem: 3-9% in seven
 * rounds; an Intel Xeon's 2 and 16 threads: no difference beyond the
 * spread; docs/performance.md). cpu_avx512.c keeps one copy, which
 * measured faster there. */
__attribute__((target("avx2"))) static inline void hist_add8(uint32_t *h, size_t stride, __m256i s) {
    __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
    uint64_t a = (uint64_t)_mm_cvtsi128_si64(lo), b = (uint64_t)_mm_extract_epi64(lo, 1);
    uint64_t c = (uint64_t)_mm_cvtsi128_si64(hi), d = (uint64_t)_mm_extract_epi64(hi, 1);
    uint32_t *h1 = h + stride, *h2 = h + 2 * stride, *h3 = h + 3 * stride;
    h[(uint32_t)a]++;
    h1[a >> 32]++;
    h2[(uint32_t)b]++;
    h3[b >> 32]++;
    h[(uint32_t)c]++;
    h1[c >> 32]++;
    h2[(uint32_t)d]++;
    h3[d >> 32]++;
}

/* ---- the arithmetic path for linear bins (see pk_linear_fast in
 * angcorr_internal.h and cpu_avx512.c) --------------------------------- */

typedef struct linear8 {
    __m256 q[PK_LINEAR_DEGREE + 1];
    __m256 two, t_offset, minus_half, half_less_margin, abs_mask;
    __m256i one, zero, last;
} linear8;

AVX2_INLINE linear8 linear8_make(const pk_linear_fast *lf) {
    linear8 k;
    for (int d = 0; d <= PK_LINEAR_DEGREE; d++) k.q[d] = _mm256_set1_ps(lf->coef[d]);
    k.two = _mm256_set1_ps(2.0f);
    k.t_offset = _mm256_set1_ps(lf->t_offset);
    k.minus_half = _mm256_set1_ps(-0.5f);
    k.half_less_margin = _mm256_set1_ps(0.5f - lf->margin_t);
    k.abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    k.one = _mm256_set1_epi32(1), k.zero = _mm256_setzero_si256();
    k.last = _mm256_set1_epi32(lf->last_slot);
    return k;
}

/* The slots of row i against columns j .. j + 7 by arithmetic, and in *u
 * the lanes left to settle (linear_slots8). The chain from the loads to
 * the slots is what bounds the block loop on an AVX2 machine (AMD Zen 3:
 * the loop waits on it, not on its ports), so it is kept short: sqrt in one
 * instruction (correctly rounded), Q in Estrin's form (three FMAs deep
 * instead of seven), one test of |f - 1/2| for both edges (a pair within
 * the margin above theta_min = 0 is settled too, where cpu_avx512.c skips
 * it: the same slots), and no call on the way. */
AVX2_INLINE __m256i linear_raw8(const pk_pair_job *job, const linear8 *k, size_t j, __m256 xi, __m256 yi, __m256 zi,
                                int *u) {
    __m256 c2 = chord2_8(job, j, xi, yi, zi);
    __m256 c = _mm256_sqrt_ps(c2);
    __m256 x2 = _mm256_mul_ps(c2, c2), x4 = _mm256_mul_ps(x2, x2);
    __m256 p01 = _mm256_fmadd_ps(k->q[1], c2, k->q[0]), p23 = _mm256_fmadd_ps(k->q[3], c2, k->q[2]);
    __m256 p45 = _mm256_fmadd_ps(k->q[5], c2, k->q[4]), p67 = _mm256_fmadd_ps(k->q[7], c2, k->q[6]);
    __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(p67, x2, p45), x4, _mm256_fmadd_ps(p23, x2, p01));
    __m256 t = _mm256_fmsub_ps(c, p, k->t_offset);
    __m256 fl = _mm256_floor_ps(t);
    __m256 off = _mm256_and_ps(_mm256_add_ps(_mm256_sub_ps(t, fl), k->minus_half), k->abs_mask);
    __m256 unsure =
        _mm256_or_ps(_mm256_cmp_ps(off, k->half_less_margin, _CMP_GT_OQ), _mm256_cmp_ps(c2, k->two, _CMP_GT_OQ));
    __m256i s = _mm256_add_epi32(_mm256_cvttps_epi32(fl), k->one);
    *u = _mm256_movemask_ps(unsure);
    return _mm256_min_epi32(_mm256_max_epi32(s, k->zero), k->last);
}

/* The exact slots of row i against columns j .. j + 7. */
AVX2_INLINE __m256i linear_slots8(const pk_pair_job *job, const linear8 *k, size_t i, size_t j, __m256 xi, __m256 yi,
                                  __m256 zi, uint64_t *n_fp64) {
    int u;
    __m256i s = linear_raw8(job, k, j, xi, yi, zi, &u);
    return u ? settle8(job, i, j, s, chord2_8(job, j, xi, yi, zi), u, n_fp64) : s;
}

__attribute__((target("avx2,fma"))) uint64_t pk_angcorr_block_avx2_linear(const pk_pair_job *job, size_t i0, size_t i1,
                                                                          size_t j0, size_t j1, uint32_t *hist4,
                                                                          size_t stride) {
    const linear8 k = linear8_make(job->linear);
    uint32_t *h = hist4;
    uint64_t n_fp64 = 0;
    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
        /* eight groups' slots before their increments: more chains in
         * flight (docs/performance.md: four on an Intel Xeon 1.48-2.00 ->
         * 1.22-1.34 s against one; eight on an AMD Zen 3, below) */
        for (; j + 64 <= j1; j += 64) {
            __m256i s[8];
            int u[8], any = 0;
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                s[g] = linear_raw8(job, &k, j + 8 * (size_t)g, xi, yi, zi, &u[g]);
                any |= u[g];
            }
            if (__builtin_expect(any != 0, 0)) /* the settles after the chains, not among them */
                for (int g = 0; g < 8; g++)
                    if (u[g])
                        s[g] = settle8(job, i, j + 8 * (size_t)g, s[g], chord2_8(job, j + 8 * (size_t)g, xi, yi, zi),
                                       u[g], &n_fp64);
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) hist_add8(h, stride, s[g]);
        }
        for (; j + 8 <= j1; j += 8) hist_add8(h, stride, linear_slots8(job, &k, i, j, xi, yi, zi, &n_fp64));
        for (; j < j1; j++) {
            int32_t s = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
            h[s]++;
        }
    }
    return n_fp64;
}

/* The slots of row i against columns [j0, j1) into out[j1 - j0] by the
 * arithmetic path for linear bins (scalar tail): the weighted path adds the
 * weights in column order after this, so its sums are those of the scalar
 * slots bit for bit. */
__attribute__((target("avx2,fma"))) uint64_t pk_angcorr_row_slots_avx2_linear(const pk_pair_job *job, size_t i,
                                                                              size_t j0, size_t j1, int32_t *out) {
    const linear8 k = linear8_make(job->linear);
    uint64_t n_fp64 = 0;
    float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
    const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
    size_t j = j0;
    for (; j + 8 <= j1; j += 8)
        _mm256_storeu_si256((__m256i *)(out + (j - j0)), linear_slots8(job, &k, i, j, xi, yi, zi, &n_fp64));
    for (; j < j1; j++) out[j - j0] = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
    return n_fp64;
}

#endif
