/* memsort_baselines.c - the CPU baselines of memsort: the floor, one
 * streaming pass that reads the trace and writes an output of the same
 * size as plan + fill writes (a position per row and a run table), both
 * sequentially; and the plain sort, an LSD radix sort of (compact address,
 * trace index) pairs, the CPU twin of the CUB alternative.
 *
 * In the floor each output word depends on the input, so the compiler
 * cannot drop the reads.
 *
 * The floor writes with non-temporal stores (on x86-64): the output is
 * larger than the caches, so a plain store first reads every line it is
 * about to overwrite. The plain pass took 1.14-1.36x as long on the 2-core
 * development machine and 1.5x on 16 cores (docs/performance.md); the
 * bench times both. */
#include "memsort_baselines.h"
#include "../src/common/common.h"
#include "../src/memsort/memsort_internal.h"

#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define PK_STREAM_SSE2 1
#endif

/* This thread's number and the team's size (0 and 1 without OpenMP). */
static void thread_place(int *t, int *nt) {
    *t = 0;
    *nt = 1;
#ifdef _OPENMP
    *t = omp_get_thread_num();
    *nt = omp_get_num_threads();
#endif
}

/* Thread t's share of [0, n), its bounds multiples of 16 elements so that
 * a thread's non-temporal lines are whole lines of its own. */
static void share(uint64_t n, int t, int n_threads, uint64_t *b, uint64_t *e) {
    *b = n * (uint64_t)t / (uint64_t)n_threads & ~(uint64_t)15;
    *e = t + 1 == n_threads ? n : n * (uint64_t)(t + 1) / (uint64_t)n_threads & ~(uint64_t)15;
}

static void values_plain(const uint32_t *addr, uint32_t *values, uint64_t b, uint64_t e) {
    for (uint64_t i = b; i < e; i++) values[i] = addr[i] ^ (uint32_t)i;
}

static void runs_plain(const uint32_t *addr, pk_memsort_run_entry *runs, uint64_t b, uint64_t e) {
    for (uint64_t k = b; k < e; k++) { /* n_runs <= n: a sequential read too */
        runs[k].addr = addr[k];
        runs[k].count = (uint32_t)k;
    }
}

#ifdef PK_STREAM_SSE2
static void values_stream(const uint32_t *addr, uint32_t *values, uint64_t b, uint64_t e) {
    uint64_t i = b;
    for (; i < e && ((uintptr_t)(values + i) & 15); i++) values[i] = addr[i] ^ (uint32_t)i;
    const __m128i step = _mm_set1_epi32(4);
    __m128i idx = _mm_add_epi32(_mm_set1_epi32((int)(uint32_t)i), _mm_setr_epi32(0, 1, 2, 3));
    for (; i + 4 <= e; i += 4) {
        __m128i a = _mm_loadu_si128((const __m128i *)(addr + i));
        _mm_stream_si128((__m128i *)(values + i), _mm_xor_si128(a, idx));
        idx = _mm_add_epi32(idx, step);
    }
    values_plain(addr, values, i, e);
}

static void runs_stream(const uint32_t *addr, pk_memsort_run_entry *runs, uint64_t b, uint64_t e) {
    uint64_t k = b;
    for (; k < e && ((uintptr_t)(runs + k) & 15); k++) runs_plain(addr, runs, k, k + 1);
    const __m128i step = _mm_setr_epi32(2, 2, 0, 0);
    __m128i cnt = _mm_setr_epi32((int)(uint32_t)k, (int)(uint32_t)k + 1, 0, 0);
    for (; k + 2 <= e; k += 2) { /* two runs: (addr[k], k, addr[k + 1], k + 1) */
        __m128i a = _mm_loadl_epi64((const __m128i *)(addr + k));
        _mm_stream_si128((__m128i *)(runs + k), _mm_unpacklo_epi32(a, cnt));
        cnt = _mm_add_epi32(cnt, step);
    }
    runs_plain(addr, runs, k, e);
}
#endif

double pk_memsort_bench_stream_pass(const uint32_t *addr, uint64_t n, uint32_t *values, uint64_t n_values,
                                    pk_memsort_run_entry *runs, uint64_t n_runs, int n_threads, int nontemporal) {
    double t0 = pk_now();
    if (n_values > n) n_values = n;
    if (n_runs > n) n_runs = n;
    if (n_threads < 1) n_threads = 1;
#ifndef PK_STREAM_SSE2
    (void)nontemporal; /* no non-temporal stores without SSE2: the plain pass */
#endif
#pragma omp parallel num_threads(n_threads)
    {
        int t, nt;
        thread_place(&t, &nt);
        uint64_t vb, ve, rb, re;
        share(n_values, t, nt, &vb, &ve);
        share(n_runs, t, nt, &rb, &re);
#ifdef PK_STREAM_SSE2
        if (nontemporal) {
            values_stream(addr, values, vb, ve);
            runs_stream(addr, runs, rb, re);
            _mm_sfence();
        } else
#endif
        {
            values_plain(addr, values, vb, ve);
            runs_plain(addr, runs, rb, re);
        }
    }
    return pk_now() - t0;
}

/* The radix sort: digits of at most 11 bits, as few passes as the compact
 * space needs (3 of 9 bits for the default table's 96M addresses). Each
 * pass: every thread counts the digits of its contiguous part, one thread
 * turns the counts into offsets (digit by digit, thread by thread, so that
 * the sort is stable), every thread scatters its part. The first pass
 * makes the keys (stored for the next passes) and takes the trace index as
 * the value. */
#define RADIX_MAX_DIGIT 11

double pk_memsort_bench_radix(const pk_memsort_regions *regions, const uint32_t *addr, uint64_t n, uint32_t *buf[4],
                              int n_threads, const uint32_t **keys_out, const uint32_t **values_out) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    uint32_t lo[PK_MEMSORT_MAX_REGIONS], span[PK_MEMSORT_MAX_REGIONS], cb[PK_MEMSORT_MAX_REGIONS];
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        lo[r] = (uint32_t)layout.base[r];
        span[r] = (uint32_t)(layout.end[r] - 1 - layout.base[r]); /* the last byte: no overflow at 4 GiB */
        cb[r] = layout.compact_base[r];
    }
    const uint32_t nr = layout.n_regions;
    int bits = layout.key_bits > 0 ? layout.key_bits : 1;
    int passes = (bits + RADIX_MAX_DIGIT - 1) / RADIX_MAX_DIGIT;
    int digit = (bits + passes - 1) / passes;
    const uint64_t nb = 1ull << digit, mask = nb - 1;
    if (n_threads < 1) n_threads = 1;
    uint64_t *hist = calloc((size_t)n_threads * nb, sizeof(uint64_t));
    if (!hist) return -1;
    double t0 = pk_now();
#pragma omp parallel num_threads(n_threads)
    {
        int t, nt;
        thread_place(&t, &nt);
        const uint64_t b = n * (uint64_t)t / (uint64_t)nt, e = n * (uint64_t)(t + 1) / (uint64_t)nt;
        uint64_t *h = hist + (uint64_t)t * nb;
        uint32_t *src_k = buf[0], *src_v = buf[1], *dst_k = buf[2], *dst_v = buf[3];
        for (int p = 0; p < passes; p++) {
            const int shift = p * digit;
            for (uint64_t d = 0; d < nb; d++) h[d] = 0;
            if (p == 0) {
                for (uint64_t i = b; i < e; i++) {
                    uint32_t raw = addr[i], k = 0;
                    for (uint32_t r = 0; r < nr; r++) k = raw - lo[r] <= span[r] ? cb[r] + ((raw - lo[r]) >> 3) : k;
                    src_k[i] = k;
                    h[k & mask]++;
                }
            } else {
                for (uint64_t i = b; i < e; i++) h[(src_k[i] >> shift) & mask]++;
            }
#pragma omp barrier
#pragma omp single
            {
                uint64_t off = 0;
                for (uint64_t d = 0; d < nb; d++)
                    for (int u = 0; u < nt; u++) {
                        uint64_t c = hist[(uint64_t)u * nb + d];
                        hist[(uint64_t)u * nb + d] = off;
                        off += c;
                    }
            }
            if (p == 0) {
                for (uint64_t i = b; i < e; i++) {
                    uint32_t k = src_k[i];
                    uint64_t o = h[k & mask]++;
                    dst_k[o] = k;
                    dst_v[o] = (uint32_t)i;
                }
            } else {
                for (uint64_t i = b; i < e; i++) {
                    uint32_t k = src_k[i];
                    uint64_t o = h[(k >> shift) & mask]++;
                    dst_k[o] = k;
                    dst_v[o] = src_v[i];
                }
            }
#pragma omp barrier
            uint32_t *tk = src_k, *tv = src_v;
            src_k = dst_k, src_v = dst_v, dst_k = tk, dst_v = tv;
        }
        if (t == 0) {
            *keys_out = src_k;
            *values_out = src_v;
        }
    }
    double seconds = pk_now() - t0;
    free(hist);
    return seconds;
}
