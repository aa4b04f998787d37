/* cpu_avx2.c - the angcorr block kernel with AVX2 + FMA, 8 pairs a step.
 * Compiled for every x86-64 build with a target attribute and chosen at
 * run time only when the CPU has AVX2 and FMA. Slots are identical to the
 * scalar kernel's (both are exact); only the float32 c2 may differ in its
 * last bit, which the uncertainty windows cover.
 */
#include "cpu_kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) uint64_t pk_angcorr_block_avx2(const pk_pair_job *job, size_t i0, size_t i1,
                                                                   size_t j0, size_t j1, uint32_t *hist4,
                                                                   size_t stride) {
    const pk_edge_table *t = job->table;
    const __m128i shift = _mm_cvtsi32_si128(t->cell_shift);
    const __m256i base = _mm256_set1_epi32(t->cell_base);
    const __m256i last_cell = _mm256_set1_epi32(t->n_cells - 1);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i slot_mask = _mm256_set1_epi32(PK_CELL_SLOT_MASK);
    uint32_t *h0 = hist4, *h1 = hist4 + stride, *h2 = hist4 + 2 * stride, *h3 = hist4 + 3 * stride;
    uint64_t n_fp64 = 0;
    int32_t slot[8] __attribute__((aligned(32)));
    float c2v[8] __attribute__((aligned(32)));

    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
        for (; j + 8 <= j1; j += 8) {
            __m256 dx = _mm256_sub_ps(xi, _mm256_loadu_ps(job->fxb + j));
            __m256 dy = _mm256_sub_ps(yi, _mm256_loadu_ps(job->fyb + j));
            __m256 dz = _mm256_sub_ps(zi, _mm256_loadu_ps(job->fzb + j));
            __m256 c2 = _mm256_mul_ps(dx, dx);
            c2 = _mm256_fmadd_ps(dy, dy, c2);
            c2 = _mm256_fmadd_ps(dz, dz, c2);
            __m256i cell = _mm256_sub_epi32(_mm256_srl_epi32(_mm256_castps_si256(c2), shift), base);
            cell = _mm256_min_epi32(_mm256_max_epi32(cell, zero), last_cell);
            __m256i e = _mm256_i32gather_epi32(t->cell_slot, cell, 4);
            __m256i s0 = _mm256_and_si256(e, slot_mask);
            __m256 lo = _mm256_i32gather_ps(t->c2_lo, s0, 4);
            __m256 hi = _mm256_i32gather_ps(t->c2_hi, s0, 4);
            __m256 ge_hi = _mm256_cmp_ps(c2, hi, _CMP_GE_OQ);
            __m256 ge_lo = _mm256_cmp_ps(c2, lo, _CMP_GE_OQ);
            __m256i s = _mm256_sub_epi32(s0, _mm256_castps_si256(ge_hi));
            int unsure = _mm256_movemask_ps(_mm256_andnot_ps(ge_hi, ge_lo)) |
                         _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(e, 1)));
            _mm256_store_si256((__m256i *)slot, s);
            if (unsure) {
                _mm256_store_ps(c2v, c2);
                while (unsure) {
                    int l = __builtin_ctz((unsigned)unsure);
                    unsure &= unsure - 1;
                    slot[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], &n_fp64);
                }
            }
            h0[slot[0]]++;
            h1[slot[1]]++;
            h2[slot[2]]++;
            h3[slot[3]]++;
            h0[slot[4]]++;
            h1[slot[5]]++;
            h2[slot[6]]++;
            h3[slot[7]]++;
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
    const pk_edge_table *t = job->table;
    const __m128i shift = _mm_cvtsi32_si128(t->cell_shift);
    const __m256i base = _mm256_set1_epi32(t->cell_base);
    const __m256i last_cell = _mm256_set1_epi32(t->n_cells - 1);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i slot_mask = _mm256_set1_epi32(PK_CELL_SLOT_MASK);
    uint64_t n_fp64 = 0;
    float c2v[8] __attribute__((aligned(32)));
    float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
    const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
    size_t j = j0;
    for (; j + 8 <= j1; j += 8) {
        __m256 dx = _mm256_sub_ps(xi, _mm256_loadu_ps(job->fxb + j));
        __m256 dy = _mm256_sub_ps(yi, _mm256_loadu_ps(job->fyb + j));
        __m256 dz = _mm256_sub_ps(zi, _mm256_loadu_ps(job->fzb + j));
        __m256 c2 = _mm256_mul_ps(dx, dx);
        c2 = _mm256_fmadd_ps(dy, dy, c2);
        c2 = _mm256_fmadd_ps(dz, dz, c2);
        __m256i cell = _mm256_sub_epi32(_mm256_srl_epi32(_mm256_castps_si256(c2), shift), base);
        cell = _mm256_min_epi32(_mm256_max_epi32(cell, zero), last_cell);
        __m256i e = _mm256_i32gather_epi32(t->cell_slot, cell, 4);
        __m256i s0 = _mm256_and_si256(e, slot_mask);
        __m256 lo = _mm256_i32gather_ps(t->c2_lo, s0, 4);
        __m256 hi = _mm256_i32gather_ps(t->c2_hi, s0, 4);
        __m256 ge_hi = _mm256_cmp_ps(c2, hi, _CMP_GE_OQ);
        __m256 ge_lo = _mm256_cmp_ps(c2, lo, _CMP_GE_OQ);
        __m256i s = _mm256_sub_epi32(s0, _mm256_castps_si256(ge_hi));
        int unsure = _mm256_movemask_ps(_mm256_andnot_ps(ge_hi, ge_lo)) |
                     _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(e, 1)));
        int32_t *o = out + (j - j0);
        _mm256_storeu_si256((__m256i *)o, s);
        if (unsure) {
            _mm256_store_ps(c2v, c2);
            while (unsure) {
                int l = __builtin_ctz((unsigned)unsure);
                unsure &= unsure - 1;
                o[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], &n_fp64);
            }
        }
    }
    for (; j < j1; j++) out[j - j0] = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
    return n_fp64;
}

/* Add one to h[s[l]] for the 8 lanes, two lanes per 64-bit extract. */
__attribute__((target("avx2"))) static inline void hist_add8(uint32_t *h, __m256i s) {
    __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
    uint64_t a = (uint64_t)_mm_cvtsi128_si64(lo), b = (uint64_t)_mm_extract_epi64(lo, 1);
    uint64_t c = (uint64_t)_mm_cvtsi128_si64(hi), d = (uint64_t)_mm_extract_epi64(hi, 1);
    h[(uint32_t)a]++;
    h[a >> 32]++;
    h[(uint32_t)b]++;
    h[b >> 32]++;
    h[(uint32_t)c]++;
    h[c >> 32]++;
    h[(uint32_t)d]++;
    h[d >> 32]++;
}

/* The arithmetic path for linear bins, 8 pairs a step (see
 * pk_linear_fast in angcorr_internal.h and cpu_avx512.c). */
__attribute__((target("avx2,fma"))) uint64_t pk_angcorr_block_avx2_linear(const pk_pair_job *job, size_t i0, size_t i1,
                                                                          size_t j0, size_t j1, uint32_t *hist4,
                                                                          size_t stride) {
    const pk_linear_fast *lf = job->linear;
    (void)stride;
    const __m256 q0 = _mm256_set1_ps(lf->coef[0]), q1 = _mm256_set1_ps(lf->coef[1]), q2 = _mm256_set1_ps(lf->coef[2]),
                 q3 = _mm256_set1_ps(lf->coef[3]), q4 = _mm256_set1_ps(lf->coef[4]), q5 = _mm256_set1_ps(lf->coef[5]),
                 q6 = _mm256_set1_ps(lf->coef[6]), q7 = _mm256_set1_ps(lf->coef[7]);
    const __m256 tiny = _mm256_set1_ps(0x1p-60f), two = _mm256_set1_ps(2.0f);
    const __m256 half = _mm256_set1_ps(0.5f), three_halves = _mm256_set1_ps(1.5f);
    const __m256 t_offset = _mm256_set1_ps(lf->t_offset), margin = _mm256_set1_ps(lf->margin_t);
    const __m256 high_frac = _mm256_set1_ps(1.0f - lf->margin_t);
    const __m256 low_from = _mm256_set1_ps(lf->low_edge_from);
    const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
    const __m256i last = _mm256_set1_epi32(lf->last_slot);
    uint32_t *h = hist4;
    uint64_t n_fp64 = 0;
    int32_t slot[8] __attribute__((aligned(32)));
    float c2v[8] __attribute__((aligned(32)));

    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
        for (; j + 8 <= j1; j += 8) {
            __m256 dx = _mm256_sub_ps(xi, _mm256_loadu_ps(job->fxb + j));
            __m256 dy = _mm256_sub_ps(yi, _mm256_loadu_ps(job->fyb + j));
            __m256 dz = _mm256_sub_ps(zi, _mm256_loadu_ps(job->fzb + j));
            __m256 c2 = _mm256_mul_ps(dx, dx);
            c2 = _mm256_fmadd_ps(dy, dy, c2);
            c2 = _mm256_fmadd_ps(dz, dz, c2);
            __m256 cm = _mm256_max_ps(c2, tiny);
            __m256 r = _mm256_rsqrt_ps(cm);
            __m256 c0 = _mm256_mul_ps(cm, r);
            __m256 c = _mm256_mul_ps(c0, _mm256_fnmadd_ps(_mm256_mul_ps(c0, r), half, three_halves));
            __m256 p = _mm256_fmadd_ps(q7, c2, q6);
            p = _mm256_fmadd_ps(p, c2, q5);
            p = _mm256_fmadd_ps(p, c2, q4);
            p = _mm256_fmadd_ps(p, c2, q3);
            p = _mm256_fmadd_ps(p, c2, q2);
            p = _mm256_fmadd_ps(p, c2, q1);
            p = _mm256_fmadd_ps(p, c2, q0);
            __m256 t = _mm256_fmsub_ps(c, p, t_offset);
            __m256 k = _mm256_floor_ps(t);
            __m256 f = _mm256_sub_ps(t, k);
            __m256 unsure = _mm256_or_ps(
                _mm256_and_ps(_mm256_cmp_ps(f, margin, _CMP_LT_OQ), _mm256_cmp_ps(t, low_from, _CMP_GE_OQ)),
                _mm256_or_ps(_mm256_cmp_ps(f, high_frac, _CMP_GT_OQ), _mm256_cmp_ps(c2, two, _CMP_GT_OQ)));
            __m256i s = _mm256_add_epi32(_mm256_cvttps_epi32(k), one);
            s = _mm256_min_epi32(_mm256_max_epi32(s, zero), last);
            int u = _mm256_movemask_ps(unsure);
            if (u) {
                _mm256_store_si256((__m256i *)slot, s);
                _mm256_store_ps(c2v, c2);
                while (u) {
                    int l = __builtin_ctz((unsigned)u);
                    u &= u - 1;
                    slot[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], &n_fp64);
                }
                s = _mm256_load_si256((const __m256i *)slot);
            }
            hist_add8(h, s);
        }
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
    const pk_linear_fast *lf = job->linear;
    const __m256 q0 = _mm256_set1_ps(lf->coef[0]), q1 = _mm256_set1_ps(lf->coef[1]), q2 = _mm256_set1_ps(lf->coef[2]),
                 q3 = _mm256_set1_ps(lf->coef[3]), q4 = _mm256_set1_ps(lf->coef[4]), q5 = _mm256_set1_ps(lf->coef[5]),
                 q6 = _mm256_set1_ps(lf->coef[6]), q7 = _mm256_set1_ps(lf->coef[7]);
    const __m256 tiny = _mm256_set1_ps(0x1p-60f), two = _mm256_set1_ps(2.0f);
    const __m256 half = _mm256_set1_ps(0.5f), three_halves = _mm256_set1_ps(1.5f);
    const __m256 t_offset = _mm256_set1_ps(lf->t_offset), margin = _mm256_set1_ps(lf->margin_t);
    const __m256 high_frac = _mm256_set1_ps(1.0f - lf->margin_t);
    const __m256 low_from = _mm256_set1_ps(lf->low_edge_from);
    const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
    const __m256i last = _mm256_set1_epi32(lf->last_slot);
    uint64_t n_fp64 = 0;
    float c2v[8] __attribute__((aligned(32)));
    float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
    const __m256 xi = _mm256_set1_ps(fx), yi = _mm256_set1_ps(fy), zi = _mm256_set1_ps(fz);
    size_t j = j0;
    for (; j + 8 <= j1; j += 8) {
        __m256 dx = _mm256_sub_ps(xi, _mm256_loadu_ps(job->fxb + j));
        __m256 dy = _mm256_sub_ps(yi, _mm256_loadu_ps(job->fyb + j));
        __m256 dz = _mm256_sub_ps(zi, _mm256_loadu_ps(job->fzb + j));
        __m256 c2 = _mm256_mul_ps(dx, dx);
        c2 = _mm256_fmadd_ps(dy, dy, c2);
        c2 = _mm256_fmadd_ps(dz, dz, c2);
        __m256 cm = _mm256_max_ps(c2, tiny);
        __m256 r = _mm256_rsqrt_ps(cm);
        __m256 c0 = _mm256_mul_ps(cm, r);
        __m256 c = _mm256_mul_ps(c0, _mm256_fnmadd_ps(_mm256_mul_ps(c0, r), half, three_halves));
        __m256 p = _mm256_fmadd_ps(q7, c2, q6);
        p = _mm256_fmadd_ps(p, c2, q5);
        p = _mm256_fmadd_ps(p, c2, q4);
        p = _mm256_fmadd_ps(p, c2, q3);
        p = _mm256_fmadd_ps(p, c2, q2);
        p = _mm256_fmadd_ps(p, c2, q1);
        p = _mm256_fmadd_ps(p, c2, q0);
        __m256 t = _mm256_fmsub_ps(c, p, t_offset);
        __m256 k = _mm256_floor_ps(t);
        __m256 f = _mm256_sub_ps(t, k);
        __m256 unsure =
            _mm256_or_ps(_mm256_and_ps(_mm256_cmp_ps(f, margin, _CMP_LT_OQ), _mm256_cmp_ps(t, low_from, _CMP_GE_OQ)),
                         _mm256_or_ps(_mm256_cmp_ps(f, high_frac, _CMP_GT_OQ), _mm256_cmp_ps(c2, two, _CMP_GT_OQ)));
        __m256i s = _mm256_add_epi32(_mm256_cvttps_epi32(k), one);
        s = _mm256_min_epi32(_mm256_max_epi32(s, zero), last);
        int32_t *o = out + (j - j0);
        _mm256_storeu_si256((__m256i *)o, s);
        int u = _mm256_movemask_ps(unsure);
        if (u) {
            _mm256_store_ps(c2v, c2);
            while (u) {
                int l = __builtin_ctz((unsigned)u);
                u &= u - 1;
                o[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], &n_fp64);
            }
        }
    }
    for (; j < j1; j++) out[j - j0] = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
    return n_fp64;
}
#endif
