/* cpu_kernel.h - the per-pair decision every CPU kernel shares for the
 * pairs it does not handle in vector form (tails, flagged cells). */
#ifndef PAIRKIT_ANGCORR_CPU_KERNEL_H
#define PAIRKIT_ANGCORR_CPU_KERNEL_H

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
#endif

#endif
