/* cpu.c - the CPU backend of memsort: a stable counting sort over the
 * addresses the trace touches, in two passes over the entries.
 *
 * Keys are the compact addresses with each region padded to whole pages of
 * 4096 addresses, so that a page lies in one region. Each thread owns a
 * contiguous part of the trace and a histogram over the whole key space,
 * mapped without reserving memory, so that only the pages it touches take
 * memory; a byte per page records which it touched. The runs:
 *
 *   1. count: each thread counts its part's keys into its histogram;
 *   2. page sums: the entries and distinct keys of every touched page;
 *      from them, serially, every page's first row, the regions' sizes, the
 *      instances, and each instance's number of runs (a run that an
 *      instance boundary cuts counts in both instances);
 *   3. cursors: each key's rows are handed out thread by thread (so that
 *      ties stay in trace order), the histograms become cursors, and the
 *      runs (raw address, count) of owned instances are written straight
 *      into the result, cut at instance boundaries;
 *   4. scatter: each thread writes its positions to their rows;
 *      a worker that does not own every instance writes only the rows of
 *      the keys that reach its instances or hold a row the plans read
 *      (in 3, whole pages are left out; the pages that hold an instance
 *      boundary get a bit map of their needed keys, since the hot stack
 *      pages are among them: 38% of the entries of a generated trace of
 *      2^25);
 *   5. rows per (owned instance, chunk), read off the sorted positions;
 *   6. the plans, from the runs that hold each instance's first and last
 *      row (recorded in step 3); the touched pages are zeroed again.
 *
 * The trace's locality keeps the random accesses cheap: the hot stack and
 * ROM tables touch a few pages, the heap grows through fresh addresses,
 * so a thread's histogram and the rows it writes stay near a frontier.
 * What bounds the scatter is the first write to each line of rows (a
 * store miss stalls the stores behind it), so each write also prefetches
 * the next line of its address's rows (2^25 entries, two threads, in a
 * prototype: 36 -> 20.5 ms), and the row that the entry 64 places on will
 * write (on an Intel Xeon: plan + fill 88-98 -> 85-87 ms, the minima).
 *
 * Invariant: between runs every histogram and page flag is zero (a run
 * that stops early zeroes what it counted). result->values holds every
 * row in global sorted order (the regions one after another) and an
 * instance's values_offset is its global position; the reference packs
 * owned instances instead, and pk_memsort_compare compares contents.
 */
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PK_MEMSORT_X86 1
#endif

#include "memsort_internal.h"
#ifdef MEMSORT_TIMING
#include <stdio.h>
#define TMARK(name)                                              \
    do {                                                         \
        double t_ = pk_now();                                    \
        fprintf(stderr, "%s %.2f  ", name, (t_ - t_last) * 1e3); \
        t_last = t_;                                             \
    } while (0)
#else
#define TMARK(name) ((void)0)
#endif

#define PAGE_BITS 12
#define PAGE_KEYS (1u << PAGE_BITS)
#define KEY_BLOCK PK_MEMSORT_KEY_BLOCK
/* Entries between progress reports and cancellation checks (a multiple
 * of KEY_BLOCK). */
#define PROGRESS_STEP (1u << 20)
/* The scatter prefetches the row this far past the one it writes: the
 * next line of the same address's rows. */
#define PREFETCH_ROWS 16u
/* ... and the row of the entry this far ahead, from its key's cursor now
 * (the line it will write, unless the same key comes again before it). */
#define PREFETCH_AHEAD 64u
/* Threads of one run, fewer than PK_MAX_THREADS allows: each thread keeps a
 * histogram over the whole compact space (384 MB of address space for the
 * default table), so a larger context's count is capped here. */
#define MAX_THREADS 256
/* A page's bit map of needed keys, in 32-bit words; maps beyond this many
 * pages with instance boundaries (65,533) have every key needed. */
#define NEED_WORDS_BITS (PAGE_BITS - 5)
#define NEED_WORDS (1u << NEED_WORDS_BITS)
#define NEED_MAPS 65535u

/* ---- histograms kept between runs ------------------------------------ */

typedef struct cpu_state {
    int kind; /* PK_MEMSORT_STATE_CPU */
    int n_hist;
    uint64_t n_keys; /* keys a histogram holds, a multiple of PAGE_KEYS */
    uint64_t hist_bytes;
    uint32_t *hist[MAX_THREADS];
    uint8_t mapped[MAX_THREADS]; /* hist[t] is mmap'ed (else pk_memsort_big_alloc'ed) */
    int huge;                    /* the mappings were advised to use 2 MB pages */
    uint8_t *touched;            /* [n_hist * touched_stride]: the pages each histogram touched */
    uint64_t touched_stride;
    uint32_t *keys; /* [n_hist * KEY_BLOCK]: each thread's block of keys */
} cpu_state;

static void hist_free(cpu_state *s) {
    for (int t = 0; t < s->n_hist; t++) {
        if (!s->hist[t]) continue;
#ifdef __linux__
        if (s->mapped[t]) munmap(s->hist[t], s->hist_bytes);
        else
#endif
            pk_aligned_free(s->hist[t]);
        s->hist[t] = NULL;
    }
    free(s->touched);
    s->touched = NULL;
    pk_aligned_free(s->keys);
    s->keys = NULL;
    s->n_hist = 0;
}

void pk_memsort_cpu_state_free(void *state) {
    cpu_state *s = state;
    hist_free(s);
    free(s);
}

/* A thread's histogram is advised onto 2 MB pages only when its part of
 * the trace has an entry for every HUGE_DENSITY counters or more: a 2 MB
 * page then stands for few untouched 16 KB ones, and the memory taken
 * stays within the bound of pk_memsort_memory_bytes (the whole histogram
 * once a part has an entry per 4096 counters). A sparse trace over a
 * large table would otherwise take 2 MB for each entry. */
#define HUGE_DENSITY 64u
#define HUGE_BYTES (2u << 20)

static void hist_advise_huge(void *p, uint64_t bytes, int huge) {
#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    /* advice only; "no" too, where the system gives huge pages unasked */
    madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    (void)p, (void)bytes, (void)huge;
#endif
}

/* Zeroed memory of which only the touched pages take room. */
static uint32_t *hist_alloc(uint64_t bytes, int huge, int *mapped) {
#if defined(__linux__) && defined(MAP_NORESERVE)
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
        hist_advise_huge(p, bytes, huge);
        *mapped = 1;
        return p;
    }
#endif
    *mapped = 0;
    uint32_t *h = pk_memsort_big_alloc(bytes);
    if (h) memset(h, 0, bytes);
    return h;
}

/* n_hist zeroed histograms of n_keys, kept in the result between runs. */
static cpu_state *cpu_state_get(pk_memsort_result *result, int n_hist, uint64_t n_keys, int huge) {
    cpu_state *s = result->backend_state;
    if (s && s->kind != PK_MEMSORT_STATE_CPU) {
        pk_memsort_backend_state_free(result);
        s = NULL;
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return NULL;
        s->kind = PK_MEMSORT_STATE_CPU;
        result->backend_state = s;
    }
    if (s->n_hist >= n_hist && s->n_keys == n_keys) {
        if (huge && !s->huge) { /* kept from sparser runs: their pages stay, new ones come in 2 MB */
            for (int t = 0; t < s->n_hist; t++)
                if (s->mapped[t]) hist_advise_huge(s->hist[t], s->hist_bytes, 1);
            s->huge = 1;
        }
        return s;
    }
    hist_free(s);
    s->huge = huge;
    uint64_t n_pages = n_keys >> PAGE_BITS;
    s->n_keys = n_keys;
    s->hist_bytes = n_keys * sizeof(uint32_t);
    s->touched_stride = (n_pages + 64 + 63) / 64 * 64; /* a line apart */
    s->touched = calloc((size_t)(n_hist * s->touched_stride), 1);
    s->keys = pk_aligned_alloc((size_t)n_hist * KEY_BLOCK * sizeof(uint32_t));
    if (!s->touched || !s->keys) return NULL;
    for (int t = 0; t < n_hist; t++) {
        int mapped = 0;
        s->hist[t] = hist_alloc(s->hist_bytes, huge, &mapped);
        s->n_hist = t + 1;
        s->mapped[t] = (uint8_t)mapped;
        if (!s->hist[t]) {
            hist_free(s);
            return NULL;
        }
    }
    return s;
}

/* ---- keys ------------------------------------------------------------- */

/* Each region's raw bounds and key offset, as the key loops read them. */
typedef struct key_map {
    uint32_t n_regions;
    uint32_t delta[PK_MEMSORT_MAX_REGIONS]; /* key = (raw >> 3) + delta (mod 2^32) */
    uint32_t lo[PK_MEMSORT_MAX_REGIONS];    /* raw [lo, hi] */
    uint32_t hi[PK_MEMSORT_MAX_REGIONS];
    uint32_t first_key[PK_MEMSORT_MAX_REGIONS + 1]; /* [n_regions] = keys in all */
} key_map;

static void key_map_make(const pk_memsort_layout *l, key_map *m) {
    m->n_regions = l->n_regions;
    uint32_t k = 0;
    for (uint32_t r = 0; r < l->n_regions; r++) {
        uint64_t words = (l->end[r] - l->base[r]) >> 3;
        m->first_key[r] = k;
        m->delta[r] = k - (uint32_t)(l->base[r] >> 3);
        m->lo[r] = (uint32_t)l->base[r];
        m->hi[r] = (uint32_t)(l->end[r] - 1);
        k += (uint32_t)((words + PAGE_KEYS - 1) / PAGE_KEYS * PAGE_KEYS);
    }
    m->first_key[l->n_regions] = k;
}

/* Keys of a[0..n); 1 if one is bad (no region, misaligned). Written
 * without branches, region by region, so that the compiler vectorises it
 * for whatever the build targets (SSE2 on a generic x86-64 build). */
static inline int keys_portable_nr(const key_map *m, const uint32_t *a, uint32_t n, uint32_t *keys, const uint32_t nr) {
    uint32_t lo[PK_MEMSORT_MAX_REGIONS], span[PK_MEMSORT_MAX_REGIONS], delta[PK_MEMSORT_MAX_REGIONS];
    for (uint32_t r = 0; r < nr; r++) { /* locals: keys[] may not alias them */
        lo[r] = m->lo[r];
        span[r] = m->hi[r] - m->lo[r];
        delta[r] = m->delta[r];
    }
    uint32_t bad = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t raw = a[j], w = raw >> 3, key = w, found = 0;
        for (uint32_t r = 0; r < nr; r++) {
            uint32_t in = raw - lo[r] <= span[r];
            key = in ? w + delta[r] : key;
            found |= in;
        }
        bad |= (raw & 7) | (found ^ 1);
        keys[j] = key;
    }
    return bad != 0;
}

static int keys_portable(const key_map *m, const uint32_t *a, uint32_t n, uint32_t *keys) {
    switch (m->n_regions) {
    case 1: return keys_portable_nr(m, a, n, keys, 1);
    case 2: return keys_portable_nr(m, a, n, keys, 2);
    case 3: return keys_portable_nr(m, a, n, keys, 3);
    case 4: return keys_portable_nr(m, a, n, keys, 4);
    default: return keys_portable_nr(m, a, n, keys, m->n_regions);
    }
}

#ifdef PK_MEMSORT_X86
/* nr regions, a constant in each caller so that the loop over regions
 * unrolls and every region's bounds stay in registers (not measured on
 * its own: the count pass timed the same with a variable count while the
 * masked stores below still dominated). */
__attribute__((target("avx512f"), always_inline)) static inline int
keys_avx512_nr(const key_map *m, const uint32_t *a, uint32_t n, uint32_t *keys, const uint32_t nr) {
    __m512i lo[PK_MEMSORT_MAX_REGIONS], span[PK_MEMSORT_MAX_REGIONS], delta[PK_MEMSORT_MAX_REGIONS];
    for (uint32_t r = 0; r < nr; r++) {
        lo[r] = _mm512_set1_epi32((int)m->lo[r]);
        span[r] = _mm512_set1_epi32((int)(m->hi[r] - m->lo[r]));
        delta[r] = _mm512_set1_epi32((int)m->delta[r]);
    }
    const __m512i seven = _mm512_set1_epi32(7);
    __mmask16 bad = 0;
    for (uint32_t j = 0; j < n; j += 16) {
        __mmask16 live = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        __m512i raw = live == 0xffff ? _mm512_loadu_si512(a + j) : _mm512_maskz_loadu_epi32(live, a + j);
        __m512i w = _mm512_srli_epi32(raw, 3), key = w;
        __mmask16 found = 0;
        for (uint32_t r = 0; r < nr; r++) {
            __mmask16 in = _mm512_cmple_epu32_mask(_mm512_sub_epi32(raw, lo[r]), span[r]);
            key = _mm512_mask_add_epi32(key, in, w, delta[r]);
            found |= in;
        }
        bad |= live & (__mmask16)(~found | _mm512_test_epi32_mask(raw, seven));
        /* whole vectors stored plainly: with a masked store for every
         * vector the count pass took 16.3 ms instead of 10.6 (2^25
         * entries, two threads); the scalar loads that follow cannot take
         * their data from a masked store */
        if (live == 0xffff) _mm512_storeu_si512(keys + j, key);
        else _mm512_mask_storeu_epi32(keys + j, live, key);
    }
    return bad != 0;
}

__attribute__((target("avx512f"))) static int keys_avx512(const key_map *m, const uint32_t *a, uint32_t n,
                                                          uint32_t *keys) {
    switch (m->n_regions) {
    case 1: return keys_avx512_nr(m, a, n, keys, 1);
    case 2: return keys_avx512_nr(m, a, n, keys, 2);
    case 3: return keys_avx512_nr(m, a, n, keys, 3);
    case 4: return keys_avx512_nr(m, a, n, keys, 4);
    case 5: return keys_avx512_nr(m, a, n, keys, 5);
    case 6: return keys_avx512_nr(m, a, n, keys, 6);
    case 7: return keys_avx512_nr(m, a, n, keys, 7);
    default: return keys_avx512_nr(m, a, n, keys, PK_MEMSORT_MAX_REGIONS);
    }
}
#endif

/* ---- the job ------------------------------------------------------------ */

/* The run that holds a row the plan needs (its raw address, rows [start, end)). */
typedef struct row_run {
    uint32_t addr;
    uint64_t start, end;
} row_run;

/* Bytes a page of keys and an instance take in a run's tables (page_* and
 * inst_start, inst_runs, plan_runs of cpu_job), for stats.host_bytes. */
#define PAGE_TABLE_BYTES (4 * sizeof(uint32_t) + 2 * sizeof(uint64_t) + sizeof(uint8_t) + sizeof(uint16_t))
#define INSTANCE_TABLE_BYTES (2 * sizeof(uint64_t) + 2 * sizeof(row_run))

typedef struct cpu_job {
    const pk_memsort_trace *trace;
    key_map map;
    int use_avx512;
    int n_threads;
    uint32_t **hist;        /* [n_threads] */
    uint32_t *keys;         /* [n_threads * KEY_BLOCK] */
    const uint8_t *touched; /* + t * touched_stride */
    uint64_t touched_stride;
    uint64_t n_pages;
    /* per page */
    uint32_t *page_entries, *page_keys; /* entries, distinct keys */
    uint64_t *page_row;                 /* first row */
    uint32_t *page_inst;                /* instance of the first row */
    uint64_t *page_run0;                /* index of the page's first run among its instance's runs */
    uint8_t *page_special;              /* holds a row the plan needs: cut and recorded key by key */
    /* Which keys' rows are written, for a worker that does not own every
     * instance: page p's keys by the bit map need_bits + NEED_WORDS *
     * page_need[p]; map 0 has no key, map 1 every key, and each special
     * page has a map of its own (the keys whose rows reach an owned
     * instance or hold a row the plan needs), made in the cursor pass. */
    uint16_t *page_need;
    uint32_t *need_bits;
    uint32_t n_need_maps;
    int all_needed;      /* every key's rows are written (then the maps are not made) */
    uint32_t *positions; /* [n_threads * KEY_BLOCK] where not all_needed */
    uint32_t *page_raw;  /* raw address of the page's first key */
    /* the instances */
    const pk_memsort_instance *instances;
    uint32_t n_instances;
    uint64_t *inst_start;       /* [n_instances + 1] global first row; [n] = n_entries */
    uint64_t *inst_runs;        /* [n_instances] */
    row_run *plan_runs;         /* [2 n_instances] the runs holding each instance's first and last row */
    pk_memsort_run_entry *runs; /* the result's */
    uint32_t *sorted;           /* the result's values */
} cpu_job;

static uint64_t part_begin(uint64_t n, int t, int n_threads) {
    return n * (uint64_t)t / (uint64_t)n_threads;
}

static inline int make_keys(const cpu_job *job, const uint32_t *a, uint32_t n, uint32_t *keys) {
#ifdef PK_MEMSORT_X86
    if (job->use_avx512) return keys_avx512(&job->map, a, n, keys);
#endif
    return keys_portable(&job->map, a, n, keys);
}

/* The histograms that touched page p, into h (pointing at the page). */
static int page_touchers(const cpu_job *job, uint64_t p, uint32_t **h) {
    int k = 0;
    for (int t = 0; t < job->n_threads; t++)
        if (job->touched[(uint64_t)t * job->touched_stride + p]) h[k++] = job->hist[t] + (p << PAGE_BITS);
    return k;
}

/* First j in [lo, hi) with sorted[j] >= value (sorted is increasing there). */
static uint64_t lower_bound_values(const uint32_t *sorted, uint64_t lo, uint64_t hi, uint64_t value) {
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < value) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---- 1. count ------------------------------------------------------------ */

/* Returns 1 on a bad entry; *cancelled_out when asked to stop. */
static int count_pass(cpu_job *job, uint8_t *touched, pk_progress *progress, int *cancelled_out) {
    const uint32_t *addr = job->trace->addr;
    const uint64_t n = job->trace->n_entries;
    int bad = 0, cancelled = 0;
#pragma omp parallel num_threads(job->n_threads) reduction(| : bad, cancelled)
    {
        /* part p of the trace has histogram p; a team smaller than asked
         * for takes the parts in turn */
        const int t = pk_thread_num(), nt = pk_team_size();
        uint32_t *const keys = job->keys + (uint64_t)t * KEY_BLOCK;
        for (int p = t; p < job->n_threads && !bad && !cancelled; p += nt) {
            uint32_t *const h = job->hist[p];
            uint8_t *const tc = touched + (uint64_t)p * job->touched_stride;
            uint64_t b = part_begin(n, p, job->n_threads), e = part_begin(n, p + 1, job->n_threads);
            for (uint64_t i0 = b; i0 < e && !bad && !cancelled; i0 += PROGRESS_STEP) {
                uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
                for (uint64_t i = i0; i < i1; i += KEY_BLOCK) {
                    uint32_t m = (uint32_t)(i1 - i < KEY_BLOCK ? i1 - i : KEY_BLOCK);
                    if (make_keys(job, addr + i, m, keys)) {
                        bad = 1;
                        break;
                    }
                    for (uint32_t j = 0; j < m; j++) {
                        uint32_t k = keys[j];
                        h[k]++;
                        tc[k >> PAGE_BITS] = 1;
                    }
                }
                if (pk_progress_add(progress, 0.4 * (double)(i1 - i0), t == 0)) cancelled = 1;
            }
        }
    }
    *cancelled_out = cancelled;
    return bad;
}

/* ---- 2. page sums -------------------------------------------------------- */

/* sum[j] = the counts of key j of the page over the nt > 1 histograms h,
 * one histogram after another, so that every loop runs along a page and
 * vectorises (a loop over the histograms inside the loop over keys did
 * not: the page sums took 27 ms at 519M entries on two threads, where
 * nearly every page has two histograms, and take 21 this way). */
static inline void page_total(uint32_t *const *h, int nt, uint32_t *sum) {
    memcpy(sum, h[0], PAGE_KEYS * sizeof(uint32_t));
    for (int u = 1; u < nt; u++) {
        const uint32_t *hu = h[u];
        for (uint32_t j = 0; j < PAGE_KEYS; j++) sum[j] += hu[j];
    }
}

static void page_sums(cpu_job *job) {
#pragma omp parallel for num_threads(job->n_threads) schedule(dynamic, 16)
    for (int64_t p = 0; p < (int64_t)job->n_pages; p++) {
        uint32_t *h[MAX_THREADS];
        int nt = page_touchers(job, (uint64_t)p, h);
        uint32_t entries = 0, keys = 0;
        if (nt > 0) {
            uint32_t sum[PAGE_KEYS];
            const uint32_t *t = h[0];
            if (nt > 1) {
                page_total(h, nt, sum);
                t = sum;
            }
            for (uint32_t j = 0; j < PAGE_KEYS; j++) {
                entries += t[j];
                keys += t[j] != 0;
            }
        }
        job->page_entries[p] = entries;
        job->page_keys[p] = keys;
    }
}

static inline uint64_t inst_end(const cpu_job *job, uint32_t g) {
    return job->inst_start[g + 1];
}

/* The rows the plan needs, increasing in q: 2g is instance g's first, 2g + 1 its last. */
static inline uint64_t plan_row(const cpu_job *job, uint64_t q) {
    return q & 1 ? inst_end(job, (uint32_t)(q >> 1)) - 1 : job->inst_start[q >> 1];
}

/* Serially, after the instances are known: each page's instance, whether
 * it holds a row the plan needs, whether its rows are written at all (not
 * where they all lie in instances another worker owns), the index of its
 * first run, and every instance's number of runs. */
static void page_instances(cpu_job *job) {
    uint32_t g = 0, n_maps = 2;
    const uint32_t n_inst = job->n_instances;
    job->all_needed = 1;
    for (uint32_t i = 0; i < n_inst; i++) job->all_needed &= job->instances[i].owned;
    memset(job->inst_runs, 0, (size_t)n_inst * sizeof(uint64_t));
    for (uint64_t p = 0; p < job->n_pages; p++) {
        uint32_t e = job->page_entries[p];
        job->page_special[p] = 0;
        job->page_need[p] = 0;
        if (!e) continue;
        uint64_t row = job->page_row[p], end = row + e;
        while (g < n_inst && inst_end(job, g) <= row) g++;
        job->page_inst[p] = g;
        job->page_run0[p] = job->inst_runs[g];
        if (job->inst_start[g] != row && inst_end(job, g) > end) {
            job->inst_runs[g] += job->page_keys[p]; /* inside one instance */
            job->page_need[p] = (uint16_t)job->instances[g].owned;
            continue;
        }
        /* the page holds an instance's first or last row: count its runs
         * key by key, cut at the boundaries */
        job->page_special[p] = 1;
        job->page_need[p] = n_maps < NEED_MAPS ? (uint16_t)n_maps++ : 1;
        uint32_t *h[MAX_THREADS];
        int nt = page_touchers(job, p, h);
        uint32_t gg = g;
        for (uint32_t j = 0; j < PAGE_KEYS; j++) {
            uint64_t total = 0;
            for (int u = 0; u < nt; u++) total += h[u][j];
            while (total) {
                uint64_t take = inst_end(job, gg) - row < total ? inst_end(job, gg) - row : total;
                job->inst_runs[gg]++;
                row += take;
                total -= take;
                if (row == inst_end(job, gg)) gg++;
            }
        }
    }
    job->page_need[job->n_pages] = 0; /* read with the last page's by needed_entries_avx512 */
    job->n_need_maps = n_maps;
}

/* ---- 3. cursors and runs --------------------------------------------------- */

/* A page inside one instance: cursors, and its runs if the instance is owned. */
static void page_cursors(const cpu_job *job, uint64_t p) {
    uint32_t *h[MAX_THREADS];
    int nt = page_touchers(job, p, h);
    uint64_t row = job->page_row[p];
    const pk_memsort_instance *in = &job->instances[job->page_inst[p]];
    /* Runs are written without a branch: the entry at k is written for
     * every key and kept when the key has rows. That stays inside the
     * page's own runs while k < nk; past the page's last run (at once for
     * an instance not owned) only cursors remain to be written. */
    const uint32_t raw0 = job->page_raw[p], nk = in->owned ? job->page_keys[p] : 0;
    pk_memsort_run_entry *ro = in->owned ? job->runs + in->runs_offset + job->page_run0[p] : NULL;
    /* one histogram: its counts become cursors in place; more: their
     * totals become each key's first row, handed on below */
    uint32_t first[PAGE_KEYS];
    uint32_t *t = h[0];
    if (nt > 1) {
        page_total(h, nt, first);
        t = first;
    }
    uint32_t k = 0, j = 0, r = (uint32_t)row;
    for (; j < PAGE_KEYS && k < nk; j++) {
        uint32_t c = t[j];
        t[j] = r;
        r += c;
        ro[k].addr = raw0 + (j << 3);
        ro[k].count = c;
        k += c != 0;
    }
    for (; j < PAGE_KEYS; j++) t[j] = r;
    /* each key's rows handed out histogram by histogram (thread order, so
     * that ties keep trace order), each loop along the page so that it
     * vectorises */
    for (int u = 0; nt > 1 && u < nt; u++) {
        uint32_t *hu = h[u];
        for (j = 0; j < PAGE_KEYS; j++) {
            uint32_t c = hu[j];
            hu[j] = first[j];
            first[j] += c;
        }
    }
}

/* A page holding rows the plan needs: cursors, runs cut at the instance
 * boundaries, the runs that hold the plan's rows, and (where not every
 * key is needed) its map of needed keys. */
static void page_cursors_special(cpu_job *job, uint64_t p) {
    uint32_t *h[MAX_THREADS];
    int nt = page_touchers(job, p, h);
    uint64_t row = job->page_row[p];
    uint32_t g = job->page_inst[p];
    uint64_t k = job->page_run0[p];
    const uint32_t raw0 = job->page_raw[p];
    const uint64_t n_plan = 2 * (uint64_t)job->n_instances;
    uint64_t q = 2 * (uint64_t)g; /* plan rows below this instance's first lie on earlier pages */
    while (q < n_plan && plan_row(job, q) < row) q++;
    uint32_t *bits = job->need_bits && job->page_need[p] > 1 ? job->need_bits + NEED_WORDS * job->page_need[p] : NULL;
    for (uint32_t j = 0; j < PAGE_KEYS; j++) {
        uint64_t r0 = row;
        for (int u = 0; u < nt; u++) {
            uint32_t c = h[u][j];
            h[u][j] = (uint32_t)row;
            row += c;
        }
        if (row == r0) continue;
        uint32_t addr = raw0 + (j << 3);
        uint32_t needed = 0;
        while (q < n_plan && plan_row(job, q) < row) {
            job->plan_runs[q++] = (row_run){addr, r0, row};
            needed = 1;
        }
        for (uint64_t x = r0; x < row;) {
            uint64_t end = inst_end(job, g) < row ? inst_end(job, g) : row;
            const pk_memsort_instance *in = &job->instances[g];
            if (in->owned) job->runs[in->runs_offset + k] = (pk_memsort_run_entry){addr, (uint32_t)(end - x)};
            needed |= in->owned;
            k++;
            x = end;
            if (x == inst_end(job, g)) {
                g++;
                k = 0;
            }
        }
        if (needed && bits) bits[j / 32] |= 1u << (j % 32);
    }
}

static void cursor_pass(cpu_job *job) {
#pragma omp parallel for num_threads(job->n_threads) schedule(dynamic, 8)
    for (int64_t p = 0; p < (int64_t)job->n_pages; p++) {
        if (!job->page_need[p]) continue; /* no entries, or all in instances not owned */
        if (job->page_special[p]) page_cursors_special(job, (uint64_t)p);
        else page_cursors(job, (uint64_t)p);
    }
}

/* ---- 4. scatter ---------------------------------------------------------- */

/* Entries keys[0..m) to their rows; entry j's value is pos[j], or base + j
 * without pos. */
static inline void scatter_block(uint32_t *restrict h, uint32_t *restrict out, const uint32_t *keys,
                                 const uint32_t *pos, uint32_t base, uint32_t m) {
    uint32_t j = 0;
    for (; j + PREFETCH_AHEAD < m; j++) {
        __builtin_prefetch(out + h[keys[j + PREFETCH_AHEAD]], 1);
        uint32_t c = h[keys[j]]++;
        out[c] = pos ? pos[j] : base + j;
        __builtin_prefetch(out + c + PREFETCH_ROWS, 1);
    }
    for (; j < m; j++) {
        uint32_t c = h[keys[j]]++;
        out[c] = pos ? pos[j] : base + j;
        __builtin_prefetch(out + c + PREFETCH_ROWS, 1);
    }
}

/* Keeps the entries of keys[j..m) whose rows are written (the key's bit
 * in its page's map), keys packed in place from keys[k] on (k <= j) and
 * their values into pos; returns how many are kept in all. Without
 * branches: an entry is always written and kept when its bit is set. */
static inline uint32_t needed_from(const cpu_job *job, uint32_t *keys, uint32_t *pos, uint32_t base, uint32_t j,
                                   uint32_t k, uint32_t m) {
    const uint16_t *need = job->page_need;
    const uint32_t *bits = job->need_bits;
    for (; j < m; j++) {
        uint32_t key = keys[j], in_page = key % PAGE_KEYS;
        uint32_t word = bits[NEED_WORDS * need[key >> PAGE_BITS] + in_page / 32];
        keys[k] = key;
        pos[k] = base + j;
        k += (word >> (in_page % 32)) & 1;
    }
    return k;
}

static uint32_t needed_entries(const cpu_job *job, uint32_t *keys, uint32_t *pos, uint32_t base, uint32_t m) {
    return needed_from(job, keys, pos, base, 0, 0, m);
}

#ifdef PK_MEMSORT_X86
/* The same, 16 entries at a time: page maps and words gathered, the kept
 * keys and positions compressed to the front of each vector and stored
 * whole (a store reaches no further than the keys already read). */
__attribute__((target("avx512f"))) static uint32_t needed_entries_avx512(const cpu_job *job, uint32_t *keys,
                                                                         uint32_t *pos, uint32_t base, uint32_t m) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i low16 = _mm512_set1_epi32(0xffff), in_page_mask = _mm512_set1_epi32(PAGE_KEYS - 1);
    const __m512i bit_mask = _mm512_set1_epi32(31), one = _mm512_set1_epi32(1);
    uint32_t k = 0, j = 0;
    for (; j + 16 <= m; j += 16) {
        __m512i key = _mm512_loadu_si512(keys + j);
        /* each page's 16-bit map number, read as 32 bits (the table has one spare entry) */
        __m512i map = _mm512_and_si512(
            _mm512_i32gather_epi32(_mm512_srli_epi32(key, PAGE_BITS), (const void *)job->page_need, 2), low16);
        __m512i in_page = _mm512_and_si512(key, in_page_mask);
        __m512i word_at = _mm512_add_epi32(_mm512_slli_epi32(map, NEED_WORDS_BITS), _mm512_srli_epi32(in_page, 5));
        __m512i word = _mm512_i32gather_epi32(word_at, (const void *)job->need_bits, 4);
        __mmask16 keep = _mm512_test_epi32_mask(_mm512_srlv_epi32(word, _mm512_and_si512(key, bit_mask)), one);
        _mm512_storeu_si512(keys + k, _mm512_maskz_compress_epi32(keep, key));
        _mm512_storeu_si512(
            pos + k, _mm512_maskz_compress_epi32(keep, _mm512_add_epi32(_mm512_set1_epi32((int)(base + j)), lane)));
        k += (uint32_t)__builtin_popcount(keep);
    }
    return needed_from(job, keys, pos, base, j, k, m);
}
#endif

static int scatter_pass(cpu_job *job, pk_progress *progress) {
    const uint32_t *addr = job->trace->addr;
    const uint64_t n = job->trace->n_entries;
    uint32_t *const out = job->sorted;
    int cancelled = 0;
#pragma omp parallel num_threads(job->n_threads) reduction(| : cancelled)
    {
        /* the parts of the count pass, each with its histogram's cursors */
        const int t = pk_thread_num(), nt = pk_team_size();
        uint32_t *const keys = job->keys + (uint64_t)t * KEY_BLOCK;
        uint32_t *const pos = job->all_needed ? NULL : job->positions + (uint64_t)t * KEY_BLOCK;
        for (int p = t; p < job->n_threads && !cancelled; p += nt) {
            uint32_t *const h = job->hist[p];
            uint64_t b = part_begin(n, p, job->n_threads), e = part_begin(n, p + 1, job->n_threads);
            for (uint64_t i0 = b; i0 < e && !cancelled; i0 += PROGRESS_STEP) {
                uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
                for (uint64_t i = i0; i < i1; i += KEY_BLOCK) {
                    uint32_t m = (uint32_t)(i1 - i < KEY_BLOCK ? i1 - i : KEY_BLOCK);
                    (void)make_keys(job, addr + i, m, keys); /* the count pass checked every entry */
                    if (!pos) scatter_block(h, out, keys, NULL, (uint32_t)i, m);
                    else {
#ifdef PK_MEMSORT_X86
                        uint32_t kept = job->use_avx512 ? needed_entries_avx512(job, keys, pos, (uint32_t)i, m)
                                                        : needed_entries(job, keys, pos, (uint32_t)i, m);
#else
                        uint32_t kept = needed_entries(job, keys, pos, (uint32_t)i, m);
#endif
                        scatter_block(h, out, keys, pos, 0, kept);
                    }
                }
                if (pk_progress_add(progress, 0.5 * (double)(i1 - i0), t == 0)) cancelled = 1;
            }
        }
    }
    return cancelled;
}

/* ---- 5. rows per (owned instance, chunk) ----------------------------------- */

/* chunk_of(pos) from one load: each block of 2^shift positions has the
 * chunk of its first position and where the next chunk starts; a block
 * holds at most one chunk start when chunks are no smaller than it, and
 * the lookup steps on past empty and smaller chunks. */
typedef struct chunk_block {
    uint32_t chunk, next; /* next: chunk_start[chunk + 1] (at most 2^32 - 1 entries) */
} chunk_block;

typedef struct chunk_table {
    uint32_t shift;
    chunk_block *block; /* [(n >> shift) + 1] */
} chunk_table;

static int chunk_table_make(const pk_memsort_trace *trace, chunk_table *ct) {
    const uint64_t n = trace->n_entries;
    uint64_t smallest = n;
    for (uint32_t c = 0; c < trace->n_chunks; c++) {
        uint64_t s = trace->chunk_start[c + 1] - trace->chunk_start[c];
        if (s && s < smallest) smallest = s;
    }
    uint32_t shift = 0;
    while (shift < 40 && (2ull << shift) <= smallest) shift++;
    while ((n >> shift) > (1u << 22)) shift++; /* a table of 4M entries at most */
    uint64_t blocks = (n >> shift) + 1;
    ct->shift = shift;
    ct->block = malloc(blocks * sizeof *ct->block);
    if (!ct->block) return 1;
    uint32_t c = 0;
    for (uint64_t b = 0; b < blocks; b++) {
        uint64_t pos = b << shift;
        while (c + 1 < trace->n_chunks && trace->chunk_start[c + 1] <= pos) c++;
        ct->block[b] = (chunk_block){c, (uint32_t)trace->chunk_start[c + 1]};
    }
    return 0;
}

static inline uint32_t chunk_lookup(const chunk_table *ct, const uint64_t *chunk_start, uint32_t pos) {
    chunk_block x = ct->block[pos >> ct->shift];
    if (__builtin_expect(pos < x.next, 1)) return x.chunk;
    uint32_t c = x.chunk + 1;
    while (pos >= chunk_start[c + 1]) c++;
    return c;
}

/* Whether the 16 rows at v lie in [lo, lo + span). */
static inline int rows_inside(const uint32_t *v, uint32_t lo, uint32_t span) {
    uint32_t inside = 1;
    for (int u = 0; u < 16; u++) inside &= v[u] - lo < span;
    return (int)inside;
}

#ifdef PK_MEMSORT_X86
__attribute__((target("avx512f"))) static int rows_inside_avx512(const uint32_t *v, uint32_t lo, uint32_t span) {
    __m512i x = _mm512_sub_epi32(_mm512_loadu_si512(v), _mm512_set1_epi32((int)lo));
    return _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32((int)span)) == 0xffff;
}
#else
#define rows_inside_avx512 rows_inside
#endif

/* Rows v[a..b) one by one into four copies of the counts, so that rows
 * from the same chunk do not wait on one another. */
static inline void count_rows(const chunk_table *ct, const uint64_t *chunk_start, const uint32_t *v, uint64_t a,
                              uint64_t b, uint32_t *c0, uint32_t n_chunks) {
    uint32_t *c1 = c0 + n_chunks, *c2 = c1 + n_chunks, *c3 = c2 + n_chunks;
    for (; a + 4 <= b; a += 4) {
        c0[chunk_lookup(ct, chunk_start, v[a])]++;
        c1[chunk_lookup(ct, chunk_start, v[a + 1])]++;
        c2[chunk_lookup(ct, chunk_start, v[a + 2])]++;
        c3[chunk_lookup(ct, chunk_start, v[a + 3])]++;
    }
    for (; a < b; a++) c0[chunk_lookup(ct, chunk_start, v[a])]++;
}

/* Pieces of at most 2^20 rows of the owned instances, counted into the
 * result's chunk counts. */
static int chunk_count_pass(cpu_job *job, uint32_t *chunk_counts) {
    const pk_memsort_instance *inst = job->instances;
    const uint32_t n_chunks = job->trace->n_chunks;
    const uint64_t *chunk_start = job->trace->chunk_start;
    const int use_avx512 = job->use_avx512;
    chunk_table ct;
    if (chunk_table_make(job->trace, &ct)) return 1;
    const uint64_t piece = 1u << 20;
    uint64_t n_pieces = 0;
    for (uint32_t g = 0; g < job->n_instances; g++)
        if (inst[g].owned) n_pieces += (inst[g].n_rows + piece - 1) / piece;
    uint64_t *piece_row = malloc((n_pieces + 1) * 2 * sizeof(uint64_t));
    uint32_t *piece_inst = malloc((n_pieces + 1) * sizeof(uint32_t));
    int failed = !piece_row || !piece_inst;
    if (!failed) {
        uint64_t k = 0;
        for (uint32_t g = 0; g < job->n_instances; g++) {
            if (!inst[g].owned) continue;
            uint64_t s = job->inst_start[g], e = s + inst[g].n_rows;
            for (uint64_t a = s; a < e; a += piece, k++) {
                piece_row[2 * k] = a;
                piece_row[2 * k + 1] = a + piece < e ? a + piece : e;
                piece_inst[k] = g;
            }
        }
    }
#pragma omp parallel num_threads(job->n_threads) reduction(| : failed)
    {
        uint32_t *cnt = failed ? NULL : calloc(4 * (size_t)n_chunks, sizeof(uint32_t));
        if (!cnt) failed = 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < (int64_t)n_pieces; k++) {
            if (!cnt) continue;
            const uint32_t *v = job->sorted;
            uint64_t a = piece_row[2 * k], b = piece_row[2 * k + 1];
            uint32_t *c0 = cnt, *c1 = cnt + n_chunks, *c2 = cnt + 2 * n_chunks, *c3 = cnt + 3 * n_chunks;
            /* Rows next to each other mostly come from one chunk (a run's
             * positions grow; the heap's neighbouring addresses were
             * touched at about the same time): a block of 16 rows all in
             * the chunk of its first counts at once (2^25 entries, two
             * threads: 7.5 -> 4.2 ms with the AVX-512 test). */
            for (; a + 16 <= b; a += 16) {
                uint32_t c = chunk_lookup(&ct, chunk_start, v[a]);
                uint32_t lo = (uint32_t)chunk_start[c], span = (uint32_t)(chunk_start[c + 1] - lo);
                if (use_avx512 ? rows_inside_avx512(v + a, lo, span) : rows_inside(v + a, lo, span)) c0[c] += 16;
                else count_rows(&ct, chunk_start, v, a, a + 16, c0, n_chunks);
            }
            count_rows(&ct, chunk_start, v, a, b, c0, n_chunks);
            uint32_t *dst = chunk_counts + inst[piece_inst[k]].counts_offset;
            for (uint32_t c = 0; c < n_chunks; c++) {
                uint32_t s = c0[c] + c1[c] + c2[c] + c3[c];
                if (!s) continue;
#pragma omp atomic
                dst[c] += s;
                c0[c] = c1[c] = c2[c] = c3[c] = 0;
            }
        }
        free(cnt);
    }
    free(piece_row);
    free(piece_inst);
    free(ct.block);
    return failed;
}

/* ---- 6. zero the touched pages ------------------------------------------- */

/* A histogram page zeroed with non-temporal stores where there are any:
 * the pages are far more than the caches hold and the next run's count
 * pass meets them again much later, so reading each line before
 * overwriting it (as plain stores do) would only double the traffic. */
static inline void zero_page(uint32_t *page) {
#ifdef PK_MEMSORT_X86
    const __m128i z = _mm_setzero_si128();
    for (uint32_t j = 0; j < PAGE_KEYS; j += 4) _mm_stream_si128((__m128i *)(page + j), z);
#else
    memset(page, 0, PAGE_KEYS * sizeof(uint32_t));
#endif
}

static void zero_pass(const cpu_job *job, uint8_t *touched) {
#pragma omp parallel num_threads(job->n_threads)
    {
#pragma omp for schedule(dynamic, 64)
        for (int64_t p = 0; p < (int64_t)job->n_pages; p++)
            for (int t = 0; t < job->n_threads; t++) {
                uint8_t *f = touched + (uint64_t)t * job->touched_stride + (uint64_t)p;
                if (!*f) continue;
                zero_page(job->hist[t] + ((uint64_t)p << PAGE_BITS));
                *f = 0;
            }
#ifdef PK_MEMSORT_X86
        _mm_sfence(); /* the zeros reach memory before the next run counts into them */
#endif
    }
}

/* ---- the run ------------------------------------------------------------ */

/* The job's key map, key-loop flavour and thread count, its tables not yet
 * allocated. */
static void job_init(pk_context *ctx, cpu_job *job, const pk_memsort_layout *layout, const pk_memsort_trace *trace,
                     int portable) {
    const uint64_t n = trace->n_entries;
    memset(job, 0, sizeof *job);
    job->trace = trace;
    key_map_make(layout, &job->map);
#ifdef PK_MEMSORT_X86
    job->use_avx512 = !portable && pk_cpu_has_avx512();
#else
    (void)portable;
#endif
    const uint64_t n_keys = job->map.first_key[layout->n_regions];
    job->n_pages = n_keys >> PAGE_BITS;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = pk_thread_count(ctx);
#else
    (void)ctx;
#endif
    /* tiny traces: fewer threads (each histogram costs a page per key touched) */
    if ((uint64_t)n_threads > n / 2048 + 1) n_threads = (int)(n / 2048 + 1);
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    job->n_threads = n_threads;
}

/* The histograms, page flags and key blocks kept in the result between
 * runs, for the job's threads and keys (on 2 MB pages where the trace
 * fills them densely enough). */
static pk_status job_histograms(pk_context *ctx, cpu_job *job, pk_memsort_result *result, cpu_state **state_out) {
    const uint64_t n = job->trace->n_entries, n_keys = job->map.first_key[job->map.n_regions];
    const int n_threads = job->n_threads;
    cpu_state *state = cpu_state_get(result, n_threads, n_keys, n / (uint64_t)n_threads * HUGE_DENSITY >= n_keys);
    *state_out = state;
    if (!state)
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %d histograms of %llu addresses", n_threads,
                       (unsigned long long)n_keys);
    job->hist = state->hist;
    job->touched = state->touched;
    job->touched_stride = state->touched_stride;
    job->keys = state->keys;
    return PK_OK;
}

/* The per-page tables (one more entry than pages), and each page's raw
 * address. */
static pk_status page_tables_make(pk_context *ctx, cpu_job *job, const pk_memsort_layout *layout) {
    const uint64_t np = job->n_pages;
    job->page_entries = malloc((np + 1) * sizeof(uint32_t));
    job->page_keys = malloc((np + 1) * sizeof(uint32_t));
    job->page_row = malloc((np + 1) * sizeof(uint64_t));
    job->page_inst = malloc((np + 1) * sizeof(uint32_t));
    job->page_run0 = malloc((np + 1) * sizeof(uint64_t));
    job->page_special = malloc(np + 1);
    job->page_need = malloc((np + 1) * sizeof(uint16_t));
    job->page_raw = malloc((np + 1) * sizeof(uint32_t));
    if (!job->page_entries || !job->page_keys || !job->page_row || !job->page_inst || !job->page_run0 ||
        !job->page_special || !job->page_need || !job->page_raw)
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the page table");
    for (uint32_t r = 0; r < layout->n_regions; r++)
        for (uint64_t p = job->map.first_key[r] >> PAGE_BITS; p < job->map.first_key[r + 1] >> PAGE_BITS; p++)
            job->page_raw[p] = (uint32_t)(layout->base[r] + ((p << PAGE_BITS) - job->map.first_key[r]) * 8);
    return PK_OK;
}

/* After the page sums: every page's first row, the regions' sizes, the
 * instances, and their global first rows. */
static pk_status instances_make(pk_context *ctx, cpu_job *job, const pk_memsort_layout *layout,
                                const pk_memsort_regions *regions, const pk_memsort_trace *trace, uint32_t n_workers,
                                uint32_t worker, pk_memsort_result *result) {
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0}, region_row[PK_MEMSORT_MAX_REGIONS + 1];
    uint64_t row = 0;
    for (uint32_t r = 0; r < layout->n_regions; r++) {
        region_row[r] = row;
        for (uint64_t p = job->map.first_key[r] >> PAGE_BITS; p < job->map.first_key[r + 1] >> PAGE_BITS; p++) {
            job->page_row[p] = row;
            row += job->page_entries[p];
        }
        region_entries[r] = row - region_row[r];
    }
    region_row[layout->n_regions] = row;
    pk_status st = pk_memsort_instances_build(ctx, layout, regions, trace, region_entries, n_workers, worker, result);
    if (st) return st;
    const uint32_t n_inst = result->n_instances;
    job->instances = result->instances;
    job->n_instances = n_inst;
    job->inst_start = malloc(((size_t)n_inst + 1) * sizeof(uint64_t));
    job->inst_runs = malloc(((size_t)n_inst + 1) * sizeof(uint64_t));
    job->plan_runs = malloc((2 * (size_t)n_inst + 1) * sizeof(row_run));
    if (!job->inst_start || !job->inst_runs || !job->plan_runs)
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %u instances", n_inst);
    for (uint32_t g = 0; g < n_inst; g++)
        job->inst_start[g] = region_row[result->instances[g].region] + result->instances[g].first_row;
    job->inst_start[n_inst] = trace->n_entries;
    return PK_OK;
}

/* After page_instances: the maps of the keys this worker writes (where it
 * does not own every instance), each owned instance's runs, values and
 * chunk counts placed, and room made for them in the result. */
static pk_status result_room_make(pk_context *ctx, cpu_job *job, pk_memsort_result *result) {
    const uint32_t n_inst = job->n_instances, n_chunks = job->trace->n_chunks;
    if (!job->all_needed) {
        job->positions = malloc((size_t)job->n_threads * KEY_BLOCK * sizeof(uint32_t));
        job->need_bits = calloc((size_t)job->n_need_maps * NEED_WORDS, sizeof(uint32_t));
        if (!job->positions || !job->need_bits)
            return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the maps of the rows this worker writes");
        memset(job->need_bits + NEED_WORDS, 0xff, NEED_WORDS * sizeof(uint32_t)); /* map 1: every key */
    }
    uint64_t n_runs = 0;
    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        if (!in->owned) continue;
        in->n_runs = (uint32_t)job->inst_runs[g];
        in->runs_offset = n_runs;
        in->values_offset = job->inst_start[g];
        n_runs += in->n_runs;
    }
    const uint64_t counts_total = (uint64_t)result->n_owned * n_chunks;
    pk_status st =
        pk_memsort_result_reserve(ctx, result, n_runs, job->trace->n_entries + PREFETCH_ROWS, counts_total, 0);
    if (st) return st;
    uint32_t k = 0;
    for (uint32_t g = 0; g < n_inst; g++)
        if (result->instances[g].owned) result->instances[g].counts_offset = (uint64_t)k++ * n_chunks;
    result->n_runs = n_runs;
    job->runs = result->runs;
    job->sorted = result->values;
    return PK_OK;
}

/* Each instance's plan, from the runs that hold its first and last row
 * and the sorted positions. */
static void plans_make(const cpu_job *job, const pk_memsort_trace *trace, pk_memsort_result *result) {
    const uint32_t *sorted = job->sorted;
#pragma omp parallel for num_threads(job->n_threads) schedule(static)
    for (int64_t gi = 0; gi < (int64_t)job->n_instances; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        uint64_t s = job->inst_start[gi], e = s + in->n_rows;
        const row_run *f = &job->plan_runs[2 * gi], *l = &job->plan_runs[2 * gi + 1];
        in->first_addr = f->addr;
        in->last_addr = l->addr;
        in->first_chunk = pk_memsort_chunk_of(trace, sorted[s]);
        in->first_skip_total = (uint32_t)(s - f->start);
        in->first_skip = (uint32_t)(s - lower_bound_values(sorted, f->start, s, trace->chunk_start[in->first_chunk]));
        uint64_t last_from = l->start > s ? l->start : s;
        in->last_chunk = pk_memsort_chunk_of(trace, sorted[e - 1]);
        in->last_include_total = (uint32_t)(e - last_from);
        in->last_include = (uint32_t)(e - lower_bound_values(sorted, last_from, e, trace->chunk_start[in->last_chunk]));
        in->has_prev = in->index > 0;
        if (in->has_prev) {
            in->prev_value = sorted[s - 1];
            in->prev_addr = job->plan_runs[2 * gi - 1].addr;
        }
    }
}

/* The rows of the owned instances. */
static uint64_t owned_rows(const pk_memsort_result *result) {
    uint64_t n_values = 0;
    for (uint32_t g = 0; g < result->n_instances; g++)
        if (result->instances[g].owned) n_values += result->instances[g].n_rows;
    return n_values;
}

/* The host memory the run used: the histograms' touched 16 KB pages (or
 * the 2 MB pages holding them), the page flags and key blocks, and the
 * page and instance tables. */
static uint64_t run_host_bytes(const cpu_job *job, const cpu_state *state) {
    const uint64_t np = job->n_pages;
    const uint64_t per_huge = HUGE_BYTES / (PAGE_KEYS * sizeof(uint32_t));
    uint64_t touched_bytes = 0;
    for (int t = 0; t < job->n_threads; t++) {
        const uint8_t *tp = state->touched + (uint64_t)t * state->touched_stride;
        if (!state->huge) {
            for (uint64_t p = 0; p < np; p++) touched_bytes += tp[p] * (uint64_t)(PAGE_KEYS * sizeof(uint32_t));
            continue;
        }
        /* pages grouped by the 2 MB of address space they lie in */
        const uint64_t skew = (uintptr_t)state->hist[t] % HUGE_BYTES / (PAGE_KEYS * sizeof(uint32_t));
        for (uint64_t p0 = 0; p0 < np;) {
            uint64_t p1 = (p0 + skew) / per_huge * per_huge + per_huge - skew;
            int any = 0;
            for (uint64_t p = p0; p < p1 && p < np; p++) any |= tp[p];
            touched_bytes += any ? HUGE_BYTES : 0;
            p0 = p1;
        }
    }
    return touched_bytes + (uint64_t)job->n_threads * (state->touched_stride + KEY_BLOCK * sizeof(uint32_t)) +
           np * PAGE_TABLE_BYTES + (uint64_t)job->n_instances * INSTANCE_TABLE_BYTES;
}

static void job_free(cpu_job *job) {
    free(job->page_entries);
    free(job->page_keys);
    free(job->page_row);
    free(job->page_inst);
    free(job->page_run0);
    free(job->page_special);
    free(job->page_need);
    free(job->positions);
    free(job->need_bits);
    free(job->page_raw);
    free(job->inst_start);
    free(job->inst_runs);
    free(job->plan_runs);
}

pk_status pk_memsort_run_cpu(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, int portable, pk_memsort_result *result,
                             pk_progress *progress) {
#ifdef MEMSORT_TIMING /* each pass's time on stderr (docs/performance.md) */
    double t_last = pk_now();
#endif
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    cpu_job job;
    job_init(ctx, &job, &layout, trace, portable);

    int counted = 0;
    cpu_state *state = NULL;
    pk_status st = job_histograms(ctx, &job, result, &state);
    if (!st) st = page_tables_make(ctx, &job, &layout);
    if (st) goto done;

    TMARK("setup");
    /* 1 */
    int cancelled = 0;
    counted = 1;
    int bad = count_pass(&job, state->touched, progress, &cancelled);
    if (bad) {
        st = pk_memsort_trace_check(ctx, regions, trace);
        if (st == PK_OK) st = pk_fail(ctx, PK_ERR_INTERNAL, "the count pass found a bad entry the check did not");
        goto done;
    }
    if (cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }

    TMARK("count");
    /* 2 */
    page_sums(&job);
    TMARK("sums");
    if ((st = instances_make(ctx, &job, &layout, regions, trace, n_workers, worker, result))) goto done;
    page_instances(&job);
    if ((st = result_room_make(ctx, &job, result))) goto done;

    TMARK("inst");
    /* 3, 4 */
    cursor_pass(&job);
    TMARK("cursors");
    if (scatter_pass(&job, progress)) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }

    TMARK("scatter");
    /* 5 */
    const uint64_t counts_total = (uint64_t)result->n_owned * trace->n_chunks;
    memset(result->chunk_counts, 0, counts_total * sizeof(uint32_t));
    if (chunk_count_pass(&job, result->chunk_counts)) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the chunk counts");
        goto done;
    }

    TMARK("chunks");
    /* 6: the plans */
    plans_make(&job, trace, result);
    result->n_values = owned_rows(result);
    result->stats.host_bytes += run_host_bytes(&job, state);
    TMARK("plans");
done:
    if (counted) zero_pass(&job, state->touched);
    TMARK("zero");
#ifdef MEMSORT_TIMING
    fprintf(stderr, "\n");
#endif
    job_free(&job);
    return st;
}
