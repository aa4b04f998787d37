/* cpu.c - the CPU backend of memsort: a stable two-level counting sort
 * that keeps every random access inside the cache.
 *
 * The compact address space is cut into buckets of 2^16 addresses. Pass 1
 * counts each thread's entries per bucket (and checks them); pass 2 copies
 * (compact address, position) pairs into their bucket's slice, thread t's
 * after thread t-1's, so each slice holds its entries in trace order; pass
 * 3 sorts each bucket on its own with a 256 KB histogram that stays in the
 * cache, writing the positions into the bucket's own stretch of the sorted
 * rows and the bucket's runs of equal address. No pass touches memory in
 * proportion to the address space, only to the entries and the addresses
 * they use.
 *
 * Invariant: result->values holds every row in global sorted order (the
 * regions one after another) and an instance's values_offset is its global
 * position; the reference packs owned instances instead, and
 * pk_memsort_compare compares contents, not offsets. Positions of one
 * address come out in trace order: thread parts and bucket slices keep it.
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "memsort_internal.h"

/* 2^16 addresses a bucket: the bucket's 256 KB histogram fits the 1 MB L2
 * of the 2-core development machine, and the 1536 buckets of the default
 * table keep pass 2's write streams (one cache line each) inside the L2 as
 * well. */
#define BUCKET_BITS 16
#define BUCKET_ADDRESSES (1u << BUCKET_BITS)
/* Entries between progress reports and cancellation checks. */
#define PROGRESS_STEP (1u << 20)

/* A run of one address in global sorted order; it ends where the next run
 * of its bucket (or the bucket) ends. */
typedef struct bucket_run {
    uint32_t compact;
    uint32_t start;
} bucket_run;

/* Scratch kept in the result between runs, so that a warm run touches
 * no fresh pages (a page fault per 4 KB costs more than the sort's own
 * work on that page). */
typedef struct cpu_state {
    int kind; /* PK_MEMSORT_STATE_CPU */
    uint64_t cap_n;
    uint64_t *pairs;
    bucket_run *runs;
} cpu_state;

void pk_memsort_cpu_state_free(void *state) {
    cpu_state *s = state;
    pk_aligned_free(s->pairs);
    pk_aligned_free(s->runs);
    free(s);
}

static cpu_state *cpu_state_get(pk_memsort_result *result, uint64_t n) {
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
    if (n > s->cap_n || !s->pairs || !s->runs) {
        pk_aligned_free(s->pairs);
        pk_aligned_free(s->runs);
        s->pairs = pk_memsort_big_alloc((n + 1) * sizeof(uint64_t));
        s->runs = pk_memsort_big_alloc((n + 1) * sizeof(bucket_run));
        s->cap_n = s->pairs && s->runs ? n : 0;
        if (!s->pairs || !s->runs) return NULL;
    }
    return s;
}

/* Compact addresses without a search: the region of each 16 MB block of
 * raw addresses that lies inside one region, -1 for the others (slow
 * path: blocks at a region's edge, and bad addresses). */
typedef struct fast_map {
    int8_t region[256];
    uint32_t delta[PK_MEMSORT_MAX_REGIONS]; /* compact = (raw >> 3) + delta (mod 2^32) */
} fast_map;

static void fast_map_make(const pk_memsort_layout *l, fast_map *m) {
    for (uint32_t blk = 0; blk < 256; blk++) {
        uint64_t lo = (uint64_t)blk << 24, hi = lo + (1u << 24);
        m->region[blk] = -1;
        for (uint32_t r = 0; r < l->n_regions; r++)
            if (lo >= l->base[r] && hi <= l->end[r]) m->region[blk] = (int8_t)r;
    }
    for (uint32_t r = 0; r < l->n_regions; r++) m->delta[r] = l->compact_base[r] - (uint32_t)(l->base[r] >> 3);
}

/* Region of raw (compact address in *c), or -1 for a bad address. */
static inline int fast_compact(const fast_map *m, const pk_memsort_layout *l, uint32_t raw, uint32_t *c) {
    int r = m->region[raw >> 24];
    if (r < 0 && (r = pk_memsort_region_of(l, raw)) < 0) return -1;
    if (raw & 7) return -1;
    *c = (raw >> 3) + m->delta[r];
    return r;
}

typedef struct cpu_job {
    const pk_memsort_layout *layout;
    fast_map map;
    const pk_memsort_trace *trace;
    int n_threads;
    uint32_t n_buckets;
    uint64_t *bucket_start; /* [n_buckets + 1] first sorted row of each bucket */
    uint32_t *bucket_runs;  /* [n_buckets] runs in each bucket */
    uint64_t *run_base;     /* [n_buckets + 1] global index of each bucket's first run */
    bucket_run *runs;       /* [n] bucket b's runs at bucket_start[b] ... */
    uint32_t *sorted;       /* [n] positions in stable address order */
} cpu_job;

static uint64_t part_begin(uint64_t n, int t, int n_threads) {
    return n * (uint64_t)t / (uint64_t)n_threads;
}

/* A run located: its bucket, index in the bucket, and rows [start, end). */
typedef struct run_ref {
    uint32_t bucket;
    uint32_t k;
    uint64_t start, end;
    uint32_t compact;
} run_ref;

static run_ref run_at(const cpu_job *job, uint64_t pos) {
    uint32_t lo = 0, hi = job->n_buckets; /* bucket_start[lo] <= pos < bucket_start[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (job->bucket_start[mid] <= pos) lo = mid;
        else hi = mid;
    }
    const bucket_run *r = job->runs + job->bucket_start[lo];
    uint32_t a = 0, b = job->bucket_runs[lo]; /* r[a].start <= pos < r[b].start */
    while (b - a > 1) {
        uint32_t mid = a + (b - a) / 2;
        if (r[mid].start <= pos) a = mid;
        else b = mid;
    }
    run_ref ref = {lo, a, r[a].start, a + 1 < job->bucket_runs[lo] ? r[a + 1].start : job->bucket_start[lo + 1],
                   r[a].compact};
    return ref;
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

/* Pass 1: entries per (thread, bucket) and per region; 1 on a bad entry,
 * 2 when out of memory. */
static int count_pass(cpu_job *job, uint32_t *bucket_count, uint64_t *region_entries, pk_progress *progress,
                      int *cancelled_out) {
    const pk_memsort_layout *l = job->layout;
    const uint32_t *addr = job->trace->addr;
    uint64_t n = job->trace->n_entries;
    int bad = 0, cancelled = 0;
    uint32_t n_buckets = job->n_buckets;
#pragma omp parallel num_threads(job->n_threads) reduction(| : bad, cancelled)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        /* Four interleaved copies of the counters: neighbours (often in the
         * same bucket) land in different copies, so an increment need not
         * wait for the previous one to reach memory. Measured at 2^25
         * entries on one thread: 51 ms with one copy, 39 ms with four. */
        uint32_t *cnt4 = calloc(4 * (size_t)n_buckets, sizeof(uint32_t));
        uint64_t local[4 * PK_MEMSORT_MAX_REGIONS] = {0};
        uint64_t b = part_begin(n, t, job->n_threads), e = part_begin(n, t + 1, job->n_threads);
        if (!cnt4) bad = 2;
        for (uint64_t i0 = b; i0 < e && !bad && !cancelled; i0 += PROGRESS_STEP) {
            uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
            for (uint64_t i = i0; i < i1; i++) {
                uint32_t c;
                int r = fast_compact(&job->map, l, addr[i], &c);
                if (r < 0) {
                    bad = 1;
                    break;
                }
                cnt4[(i & 3) * n_buckets + (c >> BUCKET_BITS)]++;
                local[4 * (uint32_t)r + (i & 3)]++;
            }
            if (pk_progress_add(progress, 0.2 * (double)(i1 - i0), t == 0)) cancelled = 1;
        }
        uint32_t *cnt = bucket_count + (uint64_t)t * n_buckets;
        if (cnt4)
            for (uint32_t k = 0; k < n_buckets; k++)
                cnt[k] = cnt4[k] + cnt4[n_buckets + k] + cnt4[2 * n_buckets + k] + cnt4[3 * n_buckets + k];
        free(cnt4);
#pragma omp critical
        for (uint32_t k = 0; k < l->n_regions; k++)
            region_entries[k] += local[4 * k] + local[4 * k + 1] + local[4 * k + 2] + local[4 * k + 3];
    }
    *cancelled_out = cancelled;
    return bad;
}

/* Pass 2: (compact, position) pairs into the bucket slices. bucket_count
 * holds each (thread, bucket)'s first slot on entry. */
static int partition_pass(cpu_job *job, uint32_t *bucket_count, uint64_t *pairs, pk_progress *progress) {
    const pk_memsort_layout *l = job->layout;
    const uint32_t *addr = job->trace->addr;
    uint64_t n = job->trace->n_entries;
    int cancelled = 0;
    uint32_t n_buckets = job->n_buckets;
#pragma omp parallel num_threads(job->n_threads) reduction(| : cancelled)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        uint32_t *cur = bucket_count + (uint64_t)t * n_buckets;
        uint64_t b = part_begin(n, t, job->n_threads), e = part_begin(n, t + 1, job->n_threads);
        for (uint64_t i0 = b; i0 < e && !cancelled; i0 += PROGRESS_STEP) {
            uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
            for (uint64_t i = i0; i < i1; i++) {
                uint32_t c = 0;
                fast_compact(&job->map, l, addr[i], &c); /* checked by pass 1 */
                pairs[cur[c >> BUCKET_BITS]++] = (uint64_t)c << 32 | i;
            }
            if (pk_progress_add(progress, 0.3 * (double)(i1 - i0), t == 0)) cancelled = 1;
        }
    }
    return cancelled;
}

/* A big bucket by all threads: thread t counts and places the t-th part
 * of its entries; cursors for address a run thread by thread, so the
 * parts stay in trace order. hist holds n_threads zeroed histograms and
 * is left zeroed. */
static int big_bucket_pass(cpu_job *job, uint32_t bi, const uint64_t *pairs, uint32_t *hist, pk_progress *progress) {
    const int n_threads = job->n_threads;
    const uint64_t bs = job->bucket_start[bi], m = job->bucket_start[bi + 1] - bs;
    const uint64_t *pr = pairs + bs;
    const uint32_t base = bi << BUCKET_BITS;
    uint32_t lo_t[256], hi_t[256];
    uint64_t range_total[257], range_runs[257];
    int cancelled = 0;
#pragma omp parallel num_threads(n_threads)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        uint32_t *h = hist + (uint64_t)t * BUCKET_ADDRESSES;
        uint64_t j0 = part_begin(m, t, n_threads), j1 = part_begin(m, t + 1, n_threads);
        uint32_t lo = BUCKET_ADDRESSES, hi = 0;
        for (uint64_t j = j0; j < j1; j++) {
            uint32_t a = (uint32_t)(pr[j] >> 32) & (BUCKET_ADDRESSES - 1);
            lo = a < lo ? a : lo;
            hi = a > hi ? a : hi;
            h[a]++;
        }
        lo_t[t] = lo;
        hi_t[t] = hi;
#pragma omp barrier
        uint32_t all_lo = BUCKET_ADDRESSES, all_hi = 0;
        for (int u = 0; u < n_threads; u++) {
            all_lo = lo_t[u] < all_lo ? lo_t[u] : all_lo;
            all_hi = hi_t[u] > all_hi ? hi_t[u] : all_hi;
        }
        /* thread t's share of the address range: totals, then cursors */
        uint64_t span = all_lo <= all_hi ? (uint64_t)all_hi - all_lo + 1 : 0;
        uint32_t a0 = all_lo + (uint32_t)part_begin(span, t, n_threads);
        uint32_t a1 = all_lo + (uint32_t)part_begin(span, t + 1, n_threads);
        uint64_t total = 0, runs = 0;
        for (uint32_t a = a0; a < a1; a++) {
            uint64_t c = 0;
            for (int u = 0; u < n_threads; u++) c += hist[(uint64_t)u * BUCKET_ADDRESSES + a];
            total += c;
            runs += c > 0;
        }
        range_total[t] = total;
        range_runs[t] = runs;
#pragma omp barrier
        uint64_t pos = bs, k = 0;
        for (int u = 0; u < t; u++) {
            pos += range_total[u];
            k += range_runs[u];
        }
        bucket_run *out = job->runs + bs;
        for (uint32_t a = a0; a < a1; a++) {
            int first = 1;
            for (int u = 0; u < n_threads; u++) {
                uint32_t *hu = hist + (uint64_t)u * BUCKET_ADDRESSES;
                uint32_t c = hu[a];
                if (!c) continue;
                if (first) {
                    out[k].compact = base + a;
                    out[k].start = (uint32_t)pos;
                    k++;
                    first = 0;
                }
                hu[a] = (uint32_t)pos;
                pos += c;
            }
        }
        if (t == n_threads - 1) job->bucket_runs[bi] = (uint32_t)k;
#pragma omp barrier
        for (uint64_t j = j0; j < j1; j++) {
            uint64_t pj = pr[j];
            job->sorted[h[(uint32_t)(pj >> 32) & (BUCKET_ADDRESSES - 1)]++] = (uint32_t)pj;
        }
        if (lo <= hi) memset(h + lo, 0, ((size_t)hi - lo + 1) * sizeof(uint32_t));
        if (pk_progress_add(progress, 0.4 * (double)(j1 - j0), t == 0)) {
#pragma omp atomic write
            cancelled = 1;
        }
    }
    return cancelled;
}

/* Fast chunk lookup when every chunk but the last has the same power-of-two
 * size (the prover's chunking); -1 otherwise. */
static int uniform_chunk_shift(const pk_memsort_trace *trace) {
    if (trace->n_chunks < 2) return 63;
    uint64_t size = trace->chunk_start[1];
    if (size == 0 || (size & (size - 1))) return -1;
    for (uint32_t c = 1; c + 1 < trace->n_chunks; c++)
        if (trace->chunk_start[c + 1] - trace->chunk_start[c] != size) return -1;
    int shift = 0;
    while ((1ull << shift) < size) shift++;
    return shift;
}

pk_status pk_memsort_run_cpu(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    const uint64_t n = trace->n_entries;
    const uint32_t n_chunks = trace->n_chunks;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = ctx && ctx->n_threads > 0 ? ctx->n_threads : omp_get_max_threads();
#endif
    if ((uint64_t)n_threads > n / 4096 + 1) n_threads = (int)(n / 4096 + 1); /* tiny traces: one thread */
    if (n_threads > 256) n_threads = 256;
    cpu_job job;
    memset(&job, 0, sizeof job);
    job.layout = &layout;
    job.trace = trace;
    job.n_threads = n_threads;
    job.n_buckets = (layout.n_compact + BUCKET_ADDRESSES - 1) >> BUCKET_BITS;
    const uint32_t n_buckets = job.n_buckets;
    fast_map_make(&layout, &job.map);
    uint32_t *bucket_count = calloc((size_t)n_threads * n_buckets + 1, sizeof(uint32_t));
    cpu_state *state = cpu_state_get(result, n);
    uint64_t *pairs = state ? state->pairs : NULL;
    uint32_t *owned_index = NULL, *hist = NULL;
    job.bucket_start = malloc(((size_t)n_buckets + 1) * sizeof(uint64_t));
    job.bucket_runs = calloc((size_t)n_buckets + 1, sizeof(uint32_t));
    job.run_base = malloc(((size_t)n_buckets + 1) * sizeof(uint64_t));
    job.runs = state ? state->runs : NULL;
    pk_status st = PK_OK;
    if (!bucket_count || !pairs || !job.bucket_start || !job.bucket_runs || !job.run_base || !job.runs) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for sorting %llu entries", (unsigned long long)n);
        goto done;
    }

    /* pass 1 */
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0};
    int cancelled = 0;
    int bad = count_pass(&job, bucket_count, region_entries, progress, &cancelled);
    if (bad & 2) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the bucket counts");
        goto done;
    }
    if (bad) {
        st = pk_memsort_trace_check(ctx, regions, trace);
        if (st == PK_OK) st = pk_fail(ctx, PK_ERR_INTERNAL, "the count pass found a bad entry the check did not");
        goto done;
    }
    if (cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }
    if ((st = pk_memsort_instances_build(ctx, &layout, regions, trace, region_entries, n_workers, worker, result)))
        goto done;
    {
        uint64_t pos = 0;
        for (uint32_t b = 0; b < n_buckets; b++) {
            job.bucket_start[b] = pos;
            for (int t = 0; t < n_threads; t++) {
                uint32_t c = bucket_count[(uint64_t)t * n_buckets + b];
                bucket_count[(uint64_t)t * n_buckets + b] = (uint32_t)pos;
                pos += c;
            }
        }
        job.bucket_start[n_buckets] = pos;
    }

    /* pass 2 */
    if (partition_pass(&job, bucket_count, pairs, progress)) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }
    if ((st = pk_memsort_result_reserve(ctx, result, 0, n, (uint64_t)result->n_owned * n_chunks, 0))) goto done;
    job.sorted = result->values;

    /* the first sorted row of each region */
    const uint32_t n_inst = result->n_instances;
    uint64_t region_start[PK_MEMSORT_MAX_REGIONS + 1];
    region_start[0] = 0;
    for (uint32_t r = 0; r < layout.n_regions; r++) region_start[r + 1] = region_start[r] + region_entries[r];
    owned_index = malloc(((size_t)n_inst + 1) * sizeof(uint32_t));
    const uint64_t counts_per_thread = (uint64_t)result->n_owned * n_chunks;
    hist = calloc((size_t)n_threads * BUCKET_ADDRESSES, sizeof(uint32_t));
    if (!owned_index || !hist) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the bucket histograms");
        goto done;
    }
    {
        uint32_t k = 0;
        for (uint32_t g = 0; g < n_inst; g++) owned_index[g] = result->instances[g].owned ? k++ : UINT32_MAX;
    }

    /* pass 3: each bucket on its own; a bucket with more than its share of
     * the entries (the hot stack window is one) is shared by all threads */
    const int chunk_shift = uniform_chunk_shift(trace);
    uint32_t *sorted = job.sorted;
    const uint64_t big_bucket = n_threads > 1 ? n / (4 * (uint64_t)n_threads) + 1 : n + 1;
    for (uint32_t bi = 0; bi < n_buckets && !cancelled; bi++) {
        uint64_t bs = job.bucket_start[bi], be = job.bucket_start[bi + 1];
        if (be - bs > big_bucket) cancelled = big_bucket_pass(&job, bi, pairs, hist, progress);
    }
#pragma omp parallel num_threads(n_threads) reduction(| : cancelled)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        uint32_t *h = hist + (uint64_t)t * BUCKET_ADDRESSES; /* all zero between buckets */
#pragma omp for schedule(dynamic, 1)
        for (int64_t bi = 0; bi < (int64_t)n_buckets; bi++) {
            uint64_t bs = job.bucket_start[bi], be = job.bucket_start[bi + 1];
            if (bs == be || cancelled || be - bs > big_bucket) continue;
            const uint64_t *pr = pairs + bs;
            uint64_t m = be - bs;
            uint32_t lo = BUCKET_ADDRESSES, hi = 0;
            for (uint64_t j = 0; j < m; j++) {
                uint32_t a = (uint32_t)(pr[j] >> 32) & (BUCKET_ADDRESSES - 1);
                lo = a < lo ? a : lo;
                hi = a > hi ? a : hi;
                h[a]++;
            }
            /* cursors and runs in address order */
            bucket_run *runs = job.runs + bs;
            uint32_t k = 0, pos = (uint32_t)bs, base = (uint32_t)bi << BUCKET_BITS;
            for (uint32_t a = lo; a <= hi; a++) {
                uint32_t c = h[a];
                if (!c) continue;
                runs[k].compact = base + a;
                runs[k].start = pos;
                k++;
                h[a] = pos;
                pos += c;
            }
            job.bucket_runs[bi] = k;
            for (uint64_t j = 0; j < m; j++) {
                uint64_t pj = pr[j];
                sorted[h[(uint32_t)(pj >> 32) & (BUCKET_ADDRESSES - 1)]++] = (uint32_t)pj;
            }
            for (uint32_t q = 0; q < k; q++) h[runs[q].compact - base] = 0;
            if (pk_progress_add(progress, 0.4 * (double)m, t == 0)) cancelled = 1;
        }
    }
    if (cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }
    {
        uint64_t k = 0;
        for (uint32_t b = 0; b < n_buckets; b++) {
            job.run_base[b] = k;
            k += job.bucket_runs[b];
        }
        job.run_base[n_buckets] = k;
    }
    /* rows per (owned instance, chunk), from the sorted positions */
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        const pk_memsort_instance *in = &result->instances[gi];
        if (!in->owned) continue;
        uint32_t *counts = result->chunk_counts + (uint64_t)owned_index[gi] * n_chunks;
        memset(counts, 0, n_chunks * sizeof(uint32_t));
        const uint32_t *v = sorted + region_start[in->region] + in->first_row;
        if (chunk_shift >= 0) {
            for (uint32_t j = 0; j < in->n_rows; j++) {
                uint32_t c = (uint32_t)((uint64_t)v[j] >> chunk_shift);
                counts[c < n_chunks ? c : n_chunks - 1]++;
            }
        } else {
            for (uint32_t j = 0; j < in->n_rows; j++) counts[pk_memsort_chunk_of(trace, v[j])]++;
        }
    }

    /* The plan of every instance; runs counted for the owned ones. */
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        uint64_t s = region_start[in->region] + in->first_row, e = s + in->n_rows;
        run_ref f = run_at(&job, s), l = run_at(&job, e - 1);
        in->first_addr = pk_memsort_raw(&layout, f.compact);
        in->last_addr = pk_memsort_raw(&layout, l.compact);
        in->first_chunk = pk_memsort_chunk_of(trace, sorted[s]);
        in->first_skip_total = (uint32_t)(s - f.start);
        in->first_skip = (uint32_t)(s - lower_bound_values(sorted, f.start, s, trace->chunk_start[in->first_chunk]));
        uint64_t last_from = l.start > s ? l.start : s;
        in->last_chunk = pk_memsort_chunk_of(trace, sorted[e - 1]);
        in->last_include_total = (uint32_t)(e - last_from);
        in->last_include = (uint32_t)(e - lower_bound_values(sorted, last_from, e, trace->chunk_start[in->last_chunk]));
        in->has_prev = in->index > 0;
        if (in->has_prev) {
            in->prev_value = sorted[s - 1];
            in->prev_addr = pk_memsort_raw(&layout, run_at(&job, s - 1).compact);
        }
        if (!in->owned) continue;
        in->n_runs = (uint32_t)((job.run_base[l.bucket] + l.k) - (job.run_base[f.bucket] + f.k) + 1);
        in->values_offset = s;
        in->counts_offset = (uint64_t)owned_index[gi] * n_chunks;
    }
    uint64_t n_runs = 0;
    result->n_values = 0;
    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        if (!in->owned) continue;
        in->runs_offset = n_runs;
        n_runs += in->n_runs;
        result->n_values += in->n_rows;
    }
    if ((st = pk_memsort_result_reserve(ctx, result, n_runs, n, counts_per_thread, 0))) goto done;
    result->n_runs = n_runs;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        if (!in->owned) continue;
        uint64_t s = region_start[in->region] + in->first_row, e = s + in->n_rows;
        run_ref f = run_at(&job, s);
        pk_memsort_run_entry *out = result->runs + in->runs_offset;
        uint32_t b = f.bucket, k = f.k;
        for (uint32_t done_runs = 0; done_runs < in->n_runs; done_runs++) {
            while (k >= job.bucket_runs[b]) b++, k = 0; /* empty buckets hold no runs */
            const bucket_run *r = job.runs + job.bucket_start[b] + k;
            uint64_t end = k + 1 < job.bucket_runs[b] ? r[1].start : job.bucket_start[b + 1];
            uint64_t lo = r->start > s ? r->start : s, hi = end < e ? end : e;
            out[done_runs].addr = pk_memsort_raw(&layout, r->compact);
            out[done_runs].count = (uint32_t)(hi - lo);
            k++;
        }
    }
    result->stats.host_bytes += (uint64_t)n * (sizeof(uint64_t) + sizeof(bucket_run)) +
                                (uint64_t)n_threads * (BUCKET_ADDRESSES + n_buckets) * 4;
done:
    free(bucket_count);
    free(owned_index);
    free(hist);
    free(job.bucket_start);
    free(job.bucket_runs);
    free(job.run_base);
    return st;
}
