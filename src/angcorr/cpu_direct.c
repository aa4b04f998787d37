/* cpu_direct.c - the single-gather kernel of the small-scale path, for any
 * bins (log and listed bins above all).
 *
 * The direct table holds, for every cell of the edge table (the top bits
 * of the float32 chord squared), the slot of the whole cell when no
 * uncertainty window touches it, and -1 otherwise. Within such a cell every
 * boundary is either certainly passed (c2_hi <= cell start) or certainly
 * not (c2_lo >= cell end), so the slot is exact; a pair in a flagged cell
 * takes the table path of cpu_kernel.h (windows, float64 settling). One
 * gather of 16 int16 entries replaces the table path's three gathers.
 *
 * Pairs in the top slot (beyond theta_max) and the three slots below it are
 * counted with popcounts, the other lanes compressed into a buffer counted
 * in bulk; rows end with a masked step, not a scalar tail, since the plan's
 * rows are short.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernel.h"
#include "grid.h"

static float float_from_bits(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

pk_status pk_direct_table_build(pk_context *ctx, const pk_edge_table *t, pk_direct_table *d) {
    memset(d, 0, sizeof *d);
    if (t->n_slots > 32767) return pk_fail(ctx, PK_ERR_UNSUPPORTED, "the direct table takes at most 32765 bins");
    /* +2 entries: the kernel's 32-bit gathers read 2 bytes past an entry */
    d->slot = pk_aligned_alloc(((size_t)t->n_cells + 2) * sizeof(int16_t));
    if (!d->slot) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the direct table");
    d->n_cells = t->n_cells;
    for (int32_t c = 0; c < t->n_cells; c++) {
        float a = c == 0 ? 0.0f : float_from_bits((c + t->cell_base) << t->cell_shift);
        float b = c == t->n_cells - 1 ? (float)INFINITY : float_from_bits((c + 1 + t->cell_base) << t->cell_shift);
        int32_t s0 = 0; /* boundaries certainly passed at the cell start */
        while (s0 < t->n_bounds && t->c2_hi[s0] <= a) s0++;
        /* c2_lo, c2_hi are non-decreasing: window s0 is the next one */
        int touched = s0 < t->n_bounds && t->c2_lo[s0] < b;
        d->slot[c] = touched ? (int16_t)-1 : (int16_t)s0;
    }
    d->slot[t->n_cells] = d->slot[t->n_cells + 1] = 0;
    return PK_OK;
}

void pk_direct_table_free(pk_direct_table *d) {
    if (!d) return;
    pk_aligned_free(d->slot);
    memset(d, 0, sizeof *d);
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) uint64_t
pk_angcorr_block_avx512_direct(const pk_pair_job *job, const pk_direct_table *d, size_t i0, size_t i1, size_t j0,
                               size_t j1, uint32_t *hist, size_t stride) {
    const pk_edge_table *t = job->table;
    const __m128i shift = _mm_cvtsi32_si128(t->cell_shift);
    const __m512i base = _mm512_set1_epi32(t->cell_base);
    const __m512i last_cell = _mm512_set1_epi32(t->n_cells - 1);
    const __m512i zero = _mm512_setzero_si512();
    (void)stride; /* one histogram copy */
    int32_t cold[PK_HOT16_COLD + 16] __attribute__((aligned(64)));
    pk_hot16 h = pk_hot16_make(t->n_slots - 1, cold);
    uint64_t n_fp64 = 0;

    for (size_t i = i0; i < i1; i++) {
        size_t j = j0;
        if (job->autocorr && j < i + 1) j = i + 1;
        const __m512 xi = _mm512_set1_ps(job->fxa[i]), yi = _mm512_set1_ps(job->fya[i]),
                     zi = _mm512_set1_ps(job->fza[i]);
        for (; j < j1; j += 16) {
            __mmask16 valid = j1 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j1 - j)) - 1);
            __m512 c2 = pk_chord2_16(job, j, valid, xi, yi, zi);
            __m512i cell = _mm512_sub_epi32(_mm512_srl_epi32(_mm512_castps_si512(c2), shift), base);
            cell = _mm512_min_epi32(_mm512_max_epi32(cell, zero), last_cell);
            __m512i e = _mm512_mask_i32gather_epi32(zero, valid, cell, (const int *)d->slot, 2);
            __m512i s = _mm512_srai_epi32(_mm512_slli_epi32(e, 16), 16);
            __mmask16 flagged = _mm512_mask_cmplt_epi32_mask(valid, s, zero);
            if (flagged) s = pk_settle16(job, i, j, s, c2, flagged, &n_fp64);
            pk_hot16_add(&h, s, valid, hist);
        }
    }
    pk_hot16_finish(&h, hist);
    return n_fp64;
}

#else

uint64_t pk_angcorr_block_avx512_direct(const pk_pair_job *job, const pk_direct_table *d, size_t i0, size_t i1,
                                        size_t j0, size_t j1, uint32_t *hist, size_t stride) {
    (void)job, (void)d, (void)i0, (void)i1, (void)j0, (void)j1, (void)hist, (void)stride;
    return 0;
}

#endif
