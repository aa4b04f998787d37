/* cpu_avx512.c - the angcorr block kernel with AVX-512 (F, DQ, BW, VL), 16
 * pairs a step. Same decisions as cpu_avx2.c; chosen at run time only when
 * the CPU has AVX-512.
 */
#include "cpu_kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* ---- the edge table --------------------------------------------------- */

typedef struct table16 {
    __m128i shift;
    __m512i base, last_cell, zero, slot_mask, multi, one;
} table16;

PK_AVX512_INLINE table16 table16_make(const pk_edge_table *t) {
    table16 k;
    k.shift = _mm_cvtsi32_si128(t->cell_shift);
    k.base = _mm512_set1_epi32(t->cell_base);
    k.last_cell = _mm512_set1_epi32(t->n_cells - 1);
    k.zero = _mm512_setzero_si512();
    k.slot_mask = _mm512_set1_epi32(PK_CELL_SLOT_MASK);
    k.multi = _mm512_set1_epi32(PK_CELL_MULTI);
    k.one = _mm512_set1_epi32(1);
    return k;
}

/* The exact slots of row i against columns j .. j + 15 through the table,
 * into slot[16]. */
PK_AVX512_INLINE void table_slots16(const pk_pair_job *job, const table16 *k, size_t i, size_t j, __m512 xi, __m512 yi,
                                    __m512 zi, int32_t *slot, uint64_t *n_fp64) {
    const pk_edge_table *t = job->table;
    __m512 dx = _mm512_sub_ps(xi, _mm512_loadu_ps(job->fxb + j));
    __m512 dy = _mm512_sub_ps(yi, _mm512_loadu_ps(job->fyb + j));
    __m512 dz = _mm512_sub_ps(zi, _mm512_loadu_ps(job->fzb + j));
    __m512 c2 = _mm512_mul_ps(dx, dx);
    c2 = _mm512_fmadd_ps(dy, dy, c2);
    c2 = _mm512_fmadd_ps(dz, dz, c2);
    __m512i cell = _mm512_sub_epi32(_mm512_srl_epi32(_mm512_castps_si512(c2), k->shift), k->base);
    cell = _mm512_min_epi32(_mm512_max_epi32(cell, k->zero), k->last_cell);
    __m512i e = _mm512_i32gather_epi32(cell, t->cell_slot, 4);
    __m512i s0 = _mm512_and_si512(e, k->slot_mask);
    __m512 lo = _mm512_i32gather_ps(s0, t->c2_lo, 4);
    __m512 hi = _mm512_i32gather_ps(s0, t->c2_hi, 4);
    __mmask16 ge_hi = _mm512_cmp_ps_mask(c2, hi, _CMP_GE_OQ);
    __mmask16 ge_lo = _mm512_cmp_ps_mask(c2, lo, _CMP_GE_OQ);
    __mmask16 flagged = _mm512_test_epi32_mask(e, k->multi);
    __m512i s = _mm512_mask_add_epi32(s0, ge_hi, s0, k->one);
    unsigned unsure = (unsigned)((ge_lo & (__mmask16)~ge_hi) | flagged);
    _mm512_store_si512((__m512i *)slot, s);
    if (unsure) {
        float c2v[16] __attribute__((aligned(64)));
        _mm512_store_ps(c2v, c2);
        while (unsure) {
            int l = __builtin_ctz(unsure);
            unsure &= unsure - 1;
            slot[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], n_fp64);
        }
    }
}

/* The table kernel: the slots of four groups of 16 columns before their
 * 64 increments (as the linear path below), into four histogram copies
 * taken in turn. */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_block_avx512(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                        size_t stride) {
    const table16 k = table16_make(job->table);
    uint32_t *h0 = hist4, *h1 = hist4 + stride, *h2 = hist4 + 2 * stride, *h3 = hist4 + 3 * stride;
    uint64_t n_fp64 = 0;
    int32_t slot[64] __attribute__((aligned(64)));

    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        const __m512 xi = _mm512_set1_ps(fx), yi = _mm512_set1_ps(fy), zi = _mm512_set1_ps(fz);
        for (; j + 16 <= j1;) {
            int groups = j + 64 <= j1 ? 4 : 1;
            for (int g = 0; g < groups; g++)
                table_slots16(job, &k, i, j + 16 * (size_t)g, xi, yi, zi, slot + 16 * g, &n_fp64);
            for (int l = 0; l < 16 * groups; l += 4) {
                h0[slot[l]]++;
                h1[slot[l + 1]]++;
                h2[slot[l + 2]]++;
                h3[slot[l + 3]]++;
            }
            j += 16 * (size_t)groups;
        }
        for (; j < j1; j++) {
            int32_t s = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
            hist4[(j & 3) * stride + (size_t)s]++;
        }
    }
    return n_fp64;
}

/* Add one to h[s[l]] for the 16 lanes. Lanes leave the vector two at a time
 * through 64-bit extracts: 10-25% faster than a store and 16 reloads on the
 * benchmark machine (docs/performance.md). */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) static inline void hist_add16(uint32_t *h, __m512i s) {
    for (int q = 0; q < 4; q++) {
        __m128i v = q == 0   ? _mm512_castsi512_si128(s)
                    : q == 1 ? _mm512_extracti32x4_epi32(s, 1)
                    : q == 2 ? _mm512_extracti32x4_epi32(s, 2)
                             : _mm512_extracti32x4_epi32(s, 3);
        uint64_t a = (uint64_t)_mm_cvtsi128_si64(v), b = (uint64_t)_mm_extract_epi64(v, 1);
        h[(uint32_t)a]++;
        h[a >> 32]++;
        h[(uint32_t)b]++;
        h[b >> 32]++;
    }
}

/* ---- the arithmetic path for linear bins: no table look-up for the
 * decided pairs (see pk_linear_fast in angcorr_internal.h) ------------- */

typedef struct linear16 {
    __m512 q[PK_LINEAR_DEGREE + 1];
    __m512 tiny, two, half, three_halves, t_offset, margin, high_frac, low_from;
    __m512i one, zero, last;
} linear16;

PK_AVX512_INLINE linear16 linear16_make(const pk_linear_fast *lf) {
    linear16 k;
    for (int d = 0; d <= PK_LINEAR_DEGREE; d++) k.q[d] = _mm512_set1_ps(lf->coef[d]);
    k.tiny = _mm512_set1_ps(0x1p-60f), k.two = _mm512_set1_ps(2.0f);
    k.half = _mm512_set1_ps(0.5f), k.three_halves = _mm512_set1_ps(1.5f);
    k.t_offset = _mm512_set1_ps(lf->t_offset), k.margin = _mm512_set1_ps(lf->margin_t);
    k.high_frac = _mm512_set1_ps(1.0f - lf->margin_t);
    k.low_from = _mm512_set1_ps(lf->low_edge_from);
    k.one = _mm512_set1_epi32(1), k.zero = _mm512_setzero_si512();
    k.last = _mm512_set1_epi32(lf->last_slot);
    return k;
}

/* The exact slots of row i against the `valid` lanes of columns j .. j + 15
 * (the others hold junk). */
PK_AVX512_INLINE __m512i linear_slots16(const pk_pair_job *job, const linear16 *k, size_t i, size_t j, __mmask16 valid,
                                        __m512 xi, __m512 yi, __m512 zi, uint64_t *n_fp64) {
    __m512 c2 = pk_chord2_16(job, j, valid, xi, yi, zi);
    /* sqrt(c2) from rsqrt14 and one Newton step */
    __m512 cm = _mm512_max_ps(c2, k->tiny);
    __m512 r = _mm512_rsqrt14_ps(cm);
    __m512 c0 = _mm512_mul_ps(cm, r);
    __m512 c = _mm512_mul_ps(c0, _mm512_fnmadd_ps(_mm512_mul_ps(c0, r), k->half, k->three_halves));
    __m512 p = _mm512_fmadd_ps(k->q[7], c2, k->q[6]);
    p = _mm512_fmadd_ps(p, c2, k->q[5]);
    p = _mm512_fmadd_ps(p, c2, k->q[4]);
    p = _mm512_fmadd_ps(p, c2, k->q[3]);
    p = _mm512_fmadd_ps(p, c2, k->q[2]);
    p = _mm512_fmadd_ps(p, c2, k->q[1]);
    p = _mm512_fmadd_ps(p, c2, k->q[0]);
    __m512 t = _mm512_fmsub_ps(c, p, k->t_offset);
    __m512 fl = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, fl);
    __mmask16 unsure =
        valid & ((_mm512_cmp_ps_mask(f, k->margin, _CMP_LT_OQ) & _mm512_cmp_ps_mask(t, k->low_from, _CMP_GE_OQ)) |
                 _mm512_cmp_ps_mask(f, k->high_frac, _CMP_GT_OQ) | _mm512_cmp_ps_mask(c2, k->two, _CMP_GT_OQ));
    __m512i s = _mm512_add_epi32(_mm512_cvttps_epi32(fl), k->one);
    s = _mm512_min_epi32(_mm512_max_epi32(s, k->zero), k->last);
    return unsure ? pk_settle16(job, i, j, s, c2, unsure, n_fp64) : s;
}

/* One histogram copy: on the benchmark machine one copy beat two and four
 * (docs/performance.md). The slots of four groups of 16 columns are made
 * before their 64 increments: on an Intel Xeon one group a step took
 * 1.26-1.48 s, two 1.18-1.26, four 0.85-0.92 and eight 0.95-1.03
 * (docs/performance.md). */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_block_avx512_linear(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                               size_t stride) {
    const linear16 k = linear16_make(job->linear);
    (void)stride;
    uint32_t *h = hist4;
    uint64_t n_fp64 = 0;
    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        const __m512 xi = _mm512_set1_ps(fx), yi = _mm512_set1_ps(fy), zi = _mm512_set1_ps(fz);
        for (; j + 64 <= j1; j += 64) {
            __m512i s0 = linear_slots16(job, &k, i, j, 0xffff, xi, yi, zi, &n_fp64);
            __m512i s1 = linear_slots16(job, &k, i, j + 16, 0xffff, xi, yi, zi, &n_fp64);
            __m512i s2 = linear_slots16(job, &k, i, j + 32, 0xffff, xi, yi, zi, &n_fp64);
            __m512i s3 = linear_slots16(job, &k, i, j + 48, 0xffff, xi, yi, zi, &n_fp64);
            hist_add16(h, s0);
            hist_add16(h, s1);
            hist_add16(h, s2);
            hist_add16(h, s3);
        }
        for (; j + 16 <= j1; j += 16) hist_add16(h, linear_slots16(job, &k, i, j, 0xffff, xi, yi, zi, &n_fp64));
        for (; j < j1; j++) {
            int32_t s = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
            h[s]++;
        }
    }
    return n_fp64;
}

/* The slots of row i against columns [j0, j1) into out[j1 - j0] by the
 * arithmetic path for linear bins (masked tail); the weighted path adds
 * the weights in column order after this, as it does after the scalar
 * slots, so the sums are the same bit for bit. */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_row_slots_avx512_linear(const pk_pair_job *job, size_t i, size_t j0, size_t j1, int32_t *out) {
    const linear16 k = linear16_make(job->linear);
    const __m512 xi = _mm512_set1_ps(job->fxa[i]), yi = _mm512_set1_ps(job->fya[i]), zi = _mm512_set1_ps(job->fza[i]);
    uint64_t n_fp64 = 0;
    for (size_t j = j0; j < j1; j += 16) {
        __mmask16 valid = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
        _mm512_mask_storeu_epi32(out + (j - j0), valid, linear_slots16(job, &k, i, j, valid, xi, yi, zi, &n_fp64));
    }
    return n_fp64;
}

#endif
