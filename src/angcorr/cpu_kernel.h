/* cpu_kernel.h - the per-pair decision every CPU kernel shares for the
 * pairs it does not handle in vector form (tails, flagged cells), and the
 * steps the AVX-512 kernels share: the chord, the settling of undecided
 * lanes and the counting of the hot last slots. */
#ifndef PAIRKIT_ANGCORR_CPU_KERNEL_H
#define PAIRKIT_ANGCORR_CPU_KERNEL_H

#include <string.h>

#include "angcorr_internal.h"

/* Slot of the pair with chord squared c2 (float32) between a[i] and b[j]. */
static inline int32_t pk_slot_from_c2(const pk_pair_job *job, size_t i, size_t j, float c2, uint64_t *n_fp64) {
    const pk_edge_table *t = job->table;
    int32_t e = t->cell_slot[pk_edge_table_cell(t, c2)];
    int32_t s;
    if (!(e & PK_CELL_MULTI)) {
        s = e;
        if (c2 >= t->c2_hi[s]) s++;
        else if (c2 >= t->c2_lo[s]) s = -1;
    } else {
        s = pk_edge_table_slot_search(t, c2);
    }
    if (s < 0) {
        s = pk_pair_slot_fp64(job, i, j);
        (*n_fp64)++;
    }
    return s;
}

static inline int32_t pk_pair_slot_scalar(const pk_pair_job *job, size_t i, size_t j, float fx, float fy, float fz,
                                          uint64_t *n_fp64) {
    float dx = fx - job->fxb[j], dy = fy - job->fyb[j], dz = fz - job->fzb[j];
    float c2 = dx * dx + dy * dy + dz * dz;
    return pk_slot_from_c2(job, i, j, c2, n_fp64);
}

#if defined(__x86_64__)
#include <immintrin.h>

/* c2 (float32 squared chord) of row i's point (broadcast in xi, yi, zi)
 * against the `valid` lanes of columns j .. j + 15; the other lanes hold
 * junk. Shared by the AVX-512 kernels. */
__attribute__((target("avx512f,fma"), always_inline)) static inline __m512
pk_chord2_16(const pk_pair_job *job, size_t j, __mmask16 valid, __m512 xi, __m512 yi, __m512 zi) {
    __m512 dx = _mm512_sub_ps(xi, _mm512_maskz_loadu_ps(valid, job->fxb + j));
    __m512 dy = _mm512_sub_ps(yi, _mm512_maskz_loadu_ps(valid, job->fyb + j));
    __m512 dz = _mm512_sub_ps(zi, _mm512_maskz_loadu_ps(valid, job->fzb + j));
    __m512 c2 = _mm512_mul_ps(dx, dx);
    c2 = _mm512_fmadd_ps(dy, dy, c2);
    return _mm512_fmadd_ps(dz, dz, c2);
}

#define PK_AVX512_INLINE __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"), always_inline)) static inline

/* s with the lanes marked in `unsure` settled exactly (pk_slot_from_c2 of
 * the lane's c2, float64 near an edge): the step the AVX-512 kernels take
 * for the few pairs their float32 path cannot decide. */
PK_AVX512_INLINE __m512i pk_settle16(const pk_pair_job *job, size_t i, size_t j, __m512i s, __m512 c2, __mmask16 unsure,
                                     uint64_t *n_fp64) {
    int32_t slot[16] __attribute__((aligned(64)));
    float c2v[16] __attribute__((aligned(64)));
    _mm512_store_si512((__m512i *)slot, s);
    _mm512_store_ps(c2v, c2);
    unsigned u = unsure;
    while (u) {
        int l = __builtin_ctz(u);
        u &= u - 1;
        slot[l] = pk_slot_from_c2(job, i, j + (size_t)l, c2v[l], n_fp64);
    }
    return _mm512_load_si512((const __m512i *)slot);
}

/* Counting where the last slots take most pairs (log bins, and the top
 * slot beyond theta_max of the small-scale path): the top slot and the
 * three below it are counted by popcount per vector, the other lanes
 * compressed into a buffer and added in bulk, without a branch per lane.
 * On the bundled DR in log bins this took the CPU time from 0.72 s (lane
 * by lane increments) to 0.56 s (docs/performance.md). With fewer than 4
 * slots below the top, only the top is counted apart. */
#define PK_HOT16_COLD 1024 /* lanes buffered before they are added */

typedef struct pk_hot16 {
    __m512i top_v, hot1, hot2, hot3;
    int32_t top;
    uint64_t n_top, n_hot[3];
    size_t n_cold;
    int32_t *cold; /* PK_HOT16_COLD + 16 entries */
} pk_hot16;

PK_AVX512_INLINE pk_hot16 pk_hot16_make(int32_t top, int32_t *cold) {
    pk_hot16 h;
    memset(&h, 0, sizeof h);
    h.top = top;
    h.top_v = _mm512_set1_epi32(top);
    h.hot1 = _mm512_set1_epi32(top >= 4 ? top - 1 : -1); /* -1 matches no lane */
    h.hot2 = _mm512_set1_epi32(top >= 4 ? top - 2 : -1);
    h.hot3 = _mm512_set1_epi32(top >= 4 ? top - 3 : -1);
    h.cold = cold;
    return h;
}

PK_AVX512_INLINE void pk_hot16_add(pk_hot16 *h, __m512i s, __mmask16 valid, uint32_t *hist) {
    __mmask16 is_top = _mm512_mask_cmpeq_epi32_mask(valid, s, h->top_v);
    __mmask16 is_h1 = _mm512_mask_cmpeq_epi32_mask(valid, s, h->hot1);
    __mmask16 is_h2 = _mm512_mask_cmpeq_epi32_mask(valid, s, h->hot2);
    __mmask16 is_h3 = _mm512_mask_cmpeq_epi32_mask(valid, s, h->hot3);
    h->n_top += (uint64_t)__builtin_popcount((unsigned)is_top);
    h->n_hot[0] += (uint64_t)__builtin_popcount((unsigned)is_h1);
    h->n_hot[1] += (uint64_t)__builtin_popcount((unsigned)is_h2);
    h->n_hot[2] += (uint64_t)__builtin_popcount((unsigned)is_h3);
    __mmask16 cold = valid & (__mmask16) ~(is_top | is_h1 | is_h2 | is_h3);
    _mm512_storeu_si512((__m512i *)(h->cold + h->n_cold), _mm512_maskz_compress_epi32(cold, s));
    h->n_cold += (size_t)__builtin_popcount((unsigned)cold);
    if (h->n_cold > PK_HOT16_COLD - 16) {
        for (size_t q = 0; q < h->n_cold; q++) hist[(uint32_t)h->cold[q]]++;
        h->n_cold = 0;
    }
}

/* What h holds into hist, once, after its last pk_hot16_add. */
PK_AVX512_INLINE void pk_hot16_finish(pk_hot16 *h, uint32_t *hist) {
    for (size_t q = 0; q < h->n_cold; q++) hist[(uint32_t)h->cold[q]]++;
    if (h->top >= 4) {
        hist[h->top - 1] += (uint32_t)h->n_hot[0];
        hist[h->top - 2] += (uint32_t)h->n_hot[1];
        hist[h->top - 3] += (uint32_t)h->n_hot[2];
    }
    hist[h->top] += (uint32_t)h->n_top;
}
#endif

#endif
