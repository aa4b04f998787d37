/* cpu.c - the CPU backend of memsort: a stable two-level counting sort
 * that keeps every random access inside the cache, in two passes over the
 * entries.
 *
 * Keys are "bucket keys": the compact address with each region padded to a
 * multiple of 2^16 words, so that a bucket of 2^16 addresses lies in one
 * region. Pass 1 (partition) reads the trace once: each thread appends
 * (low 16 key bits, position) pairs of its part of the trace to per-bucket
 * chains of fixed-size blocks taken from its own stretch of one pool, so no
 * count pass is needed; a bucket's size falls out of its chains. Pass 2
 * sorts each bucket on its own with a 2^16-entry histogram that stays in
 * the cache: counts, cursors, then the scatter of positions into the
 * bucket's stretch of the sorted rows, which also counts rows per (owned
 * instance, chunk) by segments (positions in a chain only grow, so the
 * chunk changes rarely); the end cursors then give the bucket's runs
 * (raw address, count), written over the bucket's own blocks, which the
 * scatter no longer needs. Buckets holding more than their share of the
 * entries (the hot stack window is one) are sorted by all threads
 * together. Last, each instance's plan is read off the runs that hold its
 * first and last row (recorded by pass 2), and each owned instance's runs
 * are copied into the result, the two end runs cut at its boundaries.
 * No pass touches memory in proportion to the address space, only to the
 * entries and the buckets they use.
 *
 * Invariant: result->values holds every row in global sorted order (the
 * regions one after another) and an instance's values_offset is its global
 * position; the reference packs owned instances instead, and
 * pk_memsort_compare compares contents, not offsets. Positions of one
 * address come out in trace order: a bucket's blocks are read thread by
 * thread, each thread's chain in trace order.
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "memsort_internal.h"

/* 2^16 addresses a bucket: the bucket's 256 KB histogram stays in the
 * 1 MB L2 of the 2-core development machine. Buckets of 2^15 and 2^14
 * addresses, whose histogram and pairs (a heap bucket of the generated
 * traces holds ~110K entries, 880 KB at 2^16) would share the L2, were
 * slower: 106 and 110 ms against 100 at 2^25 entries. */
#define BUCKET_BITS 16
#define BUCKET_ADDRESSES (1u << BUCKET_BITS)
/* Pairs per pool block: the largest power of two (32 KB at most) for
 * which the partly filled blocks (one per thread and bucket) stay under
 * half the entries; never less than one 64-byte line. Longer blocks mean
 * fewer jumps for the partition's write streams and the bucket sort's
 * reads (2^25 entries, two threads: 91 against 98-101 ms with 8 KB
 * blocks; 64 KB blocks gained nothing more). */
#define BLOCK_PAIRS_MAX 4096u
#define BLOCK_PAIRS_MIN 8u
/* Entries between progress reports and cancellation checks. */
#define PROGRESS_STEP (1u << 20)

/* Scratch kept in the result between runs, so that a warm run touches
 * no fresh pages (a page fault per 4 KB costs more than the sort's own
 * work on that page). */
typedef struct cpu_state {
    int kind; /* PK_MEMSORT_STATE_CPU */
    uint64_t cap_bytes;
    void *pool_mem;
} cpu_state;

void pk_memsort_cpu_state_free(void *state) {
    cpu_state *s = state;
    pk_aligned_free(s->pool_mem);
    free(s);
}

static void *cpu_state_pool(pk_memsort_result *result, uint64_t bytes) {
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
    if (bytes > s->cap_bytes || !s->pool_mem) {
        pk_aligned_free(s->pool_mem);
        s->pool_mem = pk_memsort_big_alloc(bytes);
        s->cap_bytes = s->pool_mem ? bytes : 0;
    }
    return s->pool_mem;
}

/* Bucket keys without a search: the region of each 16 MB block of raw
 * addresses that lies inside one region, -1 for the others (slow path:
 * blocks at a region's edge, and bad addresses). */
typedef struct key_map {
    int8_t region[256];
    uint32_t delta[PK_MEMSORT_MAX_REGIONS];            /* key = (raw >> 3) + delta (mod 2^32) */
    uint32_t first_bucket[PK_MEMSORT_MAX_REGIONS + 1]; /* [n_regions] = buckets in all */
} key_map;

static void key_map_make(const pk_memsort_layout *l, key_map *m) {
    for (uint32_t blk = 0; blk < 256; blk++) {
        uint64_t lo = (uint64_t)blk << 24, hi = lo + (1u << 24);
        m->region[blk] = -1;
        for (uint32_t r = 0; r < l->n_regions; r++)
            if (lo >= l->base[r] && hi <= l->end[r]) m->region[blk] = (int8_t)r;
    }
    uint32_t b = 0;
    for (uint32_t r = 0; r < l->n_regions; r++) {
        uint64_t words = (l->end[r] - l->base[r]) >> 3;
        m->first_bucket[r] = b;
        m->delta[r] = (b << BUCKET_BITS) - (uint32_t)(l->base[r] >> 3);
        b += (uint32_t)((words + BUCKET_ADDRESSES - 1) >> BUCKET_BITS);
    }
    m->first_bucket[l->n_regions] = b;
}

/* Bucket key of raw, or -1 for a bad address (no region, misaligned). */
static inline int64_t bucket_key(const key_map *m, const pk_memsort_layout *l, uint32_t raw) {
    int r = m->region[raw >> 24];
    if (r < 0 || (raw & 7)) {
        if (r < 0) r = pk_memsort_region_of(l, raw);
        if (r < 0 || (raw & 7)) return -1;
    }
    return (uint32_t)((raw >> 3) + m->delta[r]);
}

/* A stretch of one bucket's pairs: a pool block and how many it holds. */
typedef struct block_ref {
    uint64_t *pairs;
    uint32_t fill;
} block_ref;

/* Where a row that the plan needs lies: the run that holds it (its raw
 * address, rows [start, end), bucket and index among the bucket's runs). */
typedef struct row_run {
    uint32_t addr, bucket, k;
    uint64_t start, end;
} row_run;

typedef struct cpu_job {
    const pk_memsort_layout *layout;
    const pk_memsort_trace *trace;
    key_map map;
    int n_threads;
    uint32_t n_buckets;
    uint32_t block_pairs, block_shift;
    uint64_t *pool;
    /* pass 1, per thread: the next free pair of each bucket, blocks per bucket */
    uint64_t **cursor;      /* [n_threads * thread_stride] */
    uint32_t *n_blocks;     /* [n_threads * thread_stride] */
    uint64_t thread_stride; /* n_buckets and a gap, so that threads share no line */
    uint64_t *pool_block0;  /* [n_threads + 1] each thread's stretch of the pool, in blocks */
    uint64_t *pool_used;    /* [n_threads] blocks taken */
    uint32_t *block_bucket; /* [pool blocks] bucket of each block taken */
    /* after pass 1 */
    uint64_t *bucket_row;     /* [n_buckets + 1] first sorted row of each bucket */
    uint64_t *bucket_block0;  /* [n_buckets + 1] first of each bucket's blocks in `blocks` */
    uint64_t *block_at;       /* [n_buckets + 1] scratch of gather_blocks */
    block_ref *blocks;        /* the blocks, bucket by bucket, each bucket's thread by thread */
    uint32_t *bucket_region;  /* [n_buckets] */
    uint32_t *bucket_raw;     /* [n_buckets] raw address of the bucket's first key */
    /* pass 2 */
    uint32_t *sorted;       /* [n] positions in stable address order */
    uint32_t *bucket_runs;  /* [n_buckets] runs of each bucket */
    uint64_t *plan_rows;    /* [n_plan_rows] rows the plan needs, increasing: each instance's first and last */
    row_run *plan_runs;     /* [n_plan_rows] */
    uint64_t n_plan_rows;
    /* the instances */
    const pk_memsort_instance *instances;
    uint32_t n_instances;
    uint32_t *owned_index;    /* [n_instances] index among the owned, UINT32_MAX if not owned */
    uint32_t *chunk_counts;   /* result->chunk_counts */
    uint64_t region_row[PK_MEMSORT_MAX_REGIONS + 1];
    uint32_t region_gid[PK_MEMSORT_MAX_REGIONS];
} cpu_job;

static uint64_t part_begin(uint64_t n, int t, int n_threads) {
    return n * (uint64_t)t / (uint64_t)n_threads;
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

/* ---- pass 1: partition -------------------------------------------------- */

/* Pass 1: returns 1 on a bad entry, 2 when a thread's stretch of the pool
 * ran out (a bug: its size is an upper bound), 0 otherwise;
 * *cancelled_out when asked to stop. */
static int partition_pass(cpu_job *job, pk_progress *progress, int *cancelled_out) {
    const pk_memsort_layout *l = job->layout;
    const uint32_t *addr = job->trace->addr;
    const uint64_t n = job->trace->n_entries;
    const uint32_t n_buckets = job->n_buckets;
    const uintptr_t block_mask = (uintptr_t)job->block_pairs * sizeof(uint64_t) - 1;
    int bad = 0, cancelled = 0;
#pragma omp parallel num_threads(job->n_threads) reduction(| : bad, cancelled)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        uint64_t **cur = job->cursor + (uint64_t)t * job->thread_stride;
        uint32_t *nblk = job->n_blocks + (uint64_t)t * job->thread_stride;
        memset(cur, 0, n_buckets * sizeof *cur);
        memset(nblk, 0, n_buckets * sizeof *nblk);
        const key_map map = job->map;
        uint64_t next_block = job->pool_block0[t], end_block = job->pool_block0[t + 1];
        uint64_t *const pool = job->pool;
        const uint32_t block_shift = job->block_shift;
        uint32_t *const block_bucket = job->block_bucket;
        uint64_t b = part_begin(n, t, job->n_threads), e = part_begin(n, t + 1, job->n_threads);
        for (uint64_t i0 = b; i0 < e && !bad && !cancelled; i0 += PROGRESS_STEP) {
            uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
            for (uint64_t i = i0; i < i1; i++) {
                int64_t key = bucket_key(&map, l, addr[i]);
                if (key < 0) {
                    bad = 1;
                    break;
                }
                uint32_t bk = (uint32_t)key >> BUCKET_BITS;
                uint64_t *p = cur[bk];
                if (((uintptr_t)p & block_mask) == 0) { /* no block yet, or the block is full */
                    if (next_block == end_block) {
                        bad = 2;
                        break;
                    }
                    p = pool + (next_block << block_shift);
                    block_bucket[next_block++] = bk;
                    nblk[bk]++;
                }
                *p = (uint64_t)((uint32_t)key & (BUCKET_ADDRESSES - 1)) << 32 | i;
                cur[bk] = p + 1;
            }
            if (pk_progress_add(progress, 0.4 * (double)(i1 - i0), t == 0)) cancelled = 1;
        }
        job->pool_used[t] = next_block - job->pool_block0[t];
    }
    *cancelled_out = cancelled;
    return bad;
}

/* Each bucket's blocks in order (thread by thread, each thread's in the
 * order taken) with their fill, and each bucket's first row. */
static void gather_blocks(cpu_job *job) {
    const uint32_t n_buckets = job->n_buckets, bp = job->block_pairs;
    const int n_threads = job->n_threads;
    uint64_t total = 0, rows = 0;
    for (uint32_t b = 0; b < n_buckets; b++) {
        job->bucket_block0[b] = total;
        job->bucket_row[b] = rows;
        for (int t = 0; t < n_threads; t++) {
            uint64_t k = (uint64_t)t * job->thread_stride + b;
            uint32_t nb = job->n_blocks[k];
            if (!nb) continue;
            total += nb;
            uint64_t *last = job->cursor[k] - 1; /* the last pair written */
            uint64_t last_fill = (uint64_t)(last - job->pool) % bp + 1;
            rows += (uint64_t)(nb - 1) * bp + last_fill;
        }
    }
    job->bucket_block0[n_buckets] = total;
    job->bucket_row[n_buckets] = rows;
    /* place the blocks: a cursor per bucket, threads in order */
    uint64_t *at = job->block_at;
    memcpy(at, job->bucket_block0, (size_t)n_buckets * sizeof(uint64_t));
    for (int t = 0; t < n_threads; t++) {
        uint64_t b0 = job->pool_block0[t], used = job->pool_used[t];
        for (uint64_t j = b0; j < b0 + used; j++) {
            uint32_t b = job->block_bucket[j];
            uint64_t *start = job->pool + (j << job->block_shift);
            uint64_t *cur = job->cursor[(uint64_t)t * job->thread_stride + b];
            uint32_t fill = cur > start && cur <= start + bp ? (uint32_t)(cur - start) : bp;
            job->blocks[at[b]++] = (block_ref){start, fill};
        }
    }
}

/* ---- pass 2: each bucket ---------------------------------------------- */

/* Rows per (owned instance, chunk) of one stretch of a bucket's pairs, by
 * segments of equal instance and chunk. */
typedef struct seg_counter {
    const cpu_job *job;
    uint32_t gid, region;
    uint64_t inst_lo, inst_len; /* the instance's rows */
    uint32_t chunk;
    uint64_t chunk_end;
    uint32_t count;
} seg_counter;

static void seg_flush(seg_counter *s) {
    if (!s->count) return;
    uint32_t k = s->job->owned_index[s->gid];
    if (k != UINT32_MAX) {
        uint32_t *c = s->job->chunk_counts + (uint64_t)k * s->job->trace->n_chunks + s->chunk;
#pragma omp atomic
        *c += s->count;
    }
    s->count = 0;
}

static void seg_set_instance(seg_counter *s, uint64_t row) {
    const cpu_job *job = s->job;
    uint64_t size = job->layout->instance_entries[s->region];
    uint64_t local = row - job->region_row[s->region];
    uint32_t index = (uint32_t)(local / size);
    s->gid = job->region_gid[s->region] + index;
    s->inst_lo = job->region_row[s->region] + (uint64_t)index * size;
    s->inst_len = size;
}

static void seg_set_chunk(seg_counter *s, uint64_t pos) {
    const pk_memsort_trace *trace = s->job->trace;
    s->chunk = pk_memsort_chunk_of(trace, pos);
    s->chunk_end = trace->chunk_start[s->chunk + 1];
}

/* Scatter blocks [b0, b1) of a bucket: positions to their rows (cursors
 * in h), counting rows per (instance, chunk). straddle: the bucket's rows
 * cross an instance boundary (else all lie in one instance). */
static inline void scatter_blocks(const cpu_job *job, const block_ref *blocks, uint64_t b0, uint64_t b1,
                                  uint32_t *h, uint32_t region, int straddle) {
    if (b0 >= b1) return;
    uint32_t *sorted = job->sorted;
    const uint64_t *chunk_start = job->trace->chunk_start;
    seg_counter s = {job, 0, region, 0, 0, 0, 0, 0};
    uint32_t first = (uint32_t)blocks[b0].pairs[0];
    seg_set_chunk(&s, first);
    seg_set_instance(&s, h[blocks[b0].pairs[0] >> 32]);
    uint64_t chunk_end = s.chunk_end, inst_lo = s.inst_lo, inst_len = s.inst_len;
    uint32_t count = 0;
    for (uint64_t q = b0; q < b1; q++) {
        const uint64_t *pr = blocks[q].pairs;
        const uint32_t fill = blocks[q].fill;
        for (uint32_t j = 0; j < fill; j++) {
            uint64_t pj = pr[j];
            uint32_t pos = (uint32_t)pj;
            uint32_t row = h[pj >> 32]++;
            sorted[row] = pos;
            if (pos >= chunk_end || (straddle && row - inst_lo >= inst_len)) {
                s.count = count;
                seg_flush(&s);
                count = 0;
                if (pos >= chunk_end) {
                    uint32_t c = s.chunk;
                    while (pos >= chunk_start[c + 1]) c++;
                    s.chunk = c;
                    chunk_end = chunk_start[c + 1];
                }
                if (straddle && row - inst_lo >= inst_len) {
                    seg_set_instance(&s, row);
                    inst_lo = s.inst_lo;
                    inst_len = s.inst_len;
                }
            }
            count++;
        }
    }
    s.count = count;
    seg_flush(&s);
}

/* The runs of a sorted bucket from its end cursors hend[lo..hi] (rows
 * start at row0), written over the bucket's blocks; records the runs that
 * hold the plan's rows. Zeroes the histograms hz[0..n_hz) over [lo, hi].
 * Returns the number of runs. */
static uint32_t bucket_runs_write(cpu_job *job, uint32_t bi, const uint32_t *hend, uint32_t lo, uint32_t hi,
                                  uint32_t **hz, int n_hz) {
    const uint64_t row0 = job->bucket_row[bi], row_end = job->bucket_row[bi + 1];
    const block_ref *blocks = job->blocks + job->bucket_block0[bi];
    const uint32_t raw0 = job->bucket_raw[bi], bp = job->block_pairs;
    /* the first plan row at or after row0 */
    uint64_t p_lo = 0, p_hi = job->n_plan_rows;
    while (p_lo < p_hi) {
        uint64_t mid = p_lo + (p_hi - p_lo) / 2;
        if (job->plan_rows[mid] < row0) p_lo = mid + 1;
        else p_hi = mid;
    }
    uint64_t p = p_lo, next_plan = p < job->n_plan_rows ? job->plan_rows[p] : UINT64_MAX;
    pk_memsort_run_entry *out = (pk_memsort_run_entry *)(void *)blocks[0].pairs;
    uint32_t k = 0, in_block = 0, q = 0;
    uint64_t prev = row0;
    for (uint32_t a = lo; a <= hi && prev < row_end; a++) {
        uint64_t end = hend[a];
        if (end == prev) continue;
        if (in_block == bp) {
            out = (pk_memsort_run_entry *)(void *)blocks[++q].pairs;
            in_block = 0;
        }
        uint32_t raw = raw0 + (a << 3);
        out[in_block].addr = raw;
        out[in_block].count = (uint32_t)(end - prev);
        in_block++;
        while (next_plan < end) {
            job->plan_runs[p] = (row_run){raw, bi, k, prev, end};
            p++;
            next_plan = p < job->n_plan_rows ? job->plan_rows[p] : UINT64_MAX;
        }
        k++;
        prev = end;
    }
    for (int t = 0; t < n_hz; t++) memset(hz[t] + lo, 0, ((size_t)hi - lo + 1) * sizeof(uint32_t));
    return k;
}

static int bucket_straddles(const cpu_job *job, uint32_t bi) {
    uint32_t r = job->bucket_region[bi];
    uint64_t size = job->layout->instance_entries[r];
    uint64_t a = job->bucket_row[bi] - job->region_row[r], b = job->bucket_row[bi + 1] - 1 - job->region_row[r];
    return a / size != b / size;
}

/* Histogram of blocks [b0, b1) of a bucket into h; the lowest and highest
 * address seen into *lo, *hi (lo > hi when there is none). Blocks lie
 * apart in the pool, so each next block is fetched while this one is
 * counted: the hardware prefetcher starts over at each block (2^25
 * entries, one thread: 53 ms to count without, 27 ms with; 20 ms with
 * the lows and highs kept twice). */
static void histogram_blocks(const block_ref *blocks, uint64_t b0, uint64_t b1, uint32_t *h, uint32_t *lo_out,
                             uint32_t *hi_out) {
    /* two lows and highs: each is a chain of one-cycle steps */
    uint32_t lo = BUCKET_ADDRESSES, hi = 0, lo2 = BUCKET_ADDRESSES, hi2 = 0;
    for (uint64_t q = b0; q < b1; q++) {
        const uint64_t *pr = blocks[q].pairs;
        const uint32_t fill = blocks[q].fill;
        const uint64_t *next = q + 1 < b1 ? blocks[q + 1].pairs : pr;
        uint32_t j = 0;
        for (; j + 2 <= fill; j += 2) {
            if ((j & 7) == 0) __builtin_prefetch(next + j); /* a line of the next block */
            uint32_t a = (uint32_t)(pr[j] >> 32), a2 = (uint32_t)(pr[j + 1] >> 32);
            lo = a < lo ? a : lo;
            hi = a > hi ? a : hi;
            lo2 = a2 < lo2 ? a2 : lo2;
            hi2 = a2 > hi2 ? a2 : hi2;
            h[a]++;
            h[a2]++;
        }
        if (j < fill) {
            uint32_t a = (uint32_t)(pr[j] >> 32);
            lo = a < lo ? a : lo;
            hi = a > hi ? a : hi;
            h[a]++;
        }
    }
    *lo_out = lo < lo2 ? lo : lo2;
    *hi_out = hi > hi2 ? hi : hi2;
}

/* One bucket by one thread; h is a zeroed histogram and is left zeroed. */
static void sort_bucket(cpu_job *job, uint32_t bi, uint32_t *h) {
    const uint64_t q0 = job->bucket_block0[bi], q1 = job->bucket_block0[bi + 1];
    const block_ref *blocks = job->blocks;
    uint32_t lo, hi;
    histogram_blocks(blocks, q0, q1, h, &lo, &hi);
    uint32_t pos = (uint32_t)job->bucket_row[bi];
    for (uint32_t a = lo; a <= hi; a++) {
        uint32_t c = h[a];
        h[a] = pos;
        pos += c;
    }
    if (bucket_straddles(job, bi)) scatter_blocks(job, blocks, q0, q1, h, job->bucket_region[bi], 1);
    else scatter_blocks(job, blocks, q0, q1, h, job->bucket_region[bi], 0);
    job->bucket_runs[bi] = bucket_runs_write(job, bi, h, lo, hi, &h, 1);
}

/* A big bucket by all threads (called by every thread of a parallel
 * region): thread t counts and places the t-th part of its blocks; the
 * cursors of an address run thread by thread, so the parts stay in trace
 * order. hist holds n_threads zeroed histograms and is left zeroed. */
static void sort_big_bucket(cpu_job *job, uint32_t bi, uint32_t *hist, uint32_t *lo_t, uint32_t *hi_t) {
    int t = 0;
    const int n_threads = job->n_threads;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    const uint64_t q0 = job->bucket_block0[bi], nq = job->bucket_block0[bi + 1] - q0;
    const uint64_t b0 = q0 + part_begin(nq, t, n_threads), b1 = q0 + part_begin(nq, t + 1, n_threads);
    const block_ref *blocks = job->blocks;
    uint32_t *h = hist + (uint64_t)t * BUCKET_ADDRESSES;
    histogram_blocks(blocks, b0, b1, h, &lo_t[t], &hi_t[t]);
#pragma omp barrier
#pragma omp single
    {
        uint32_t all_lo = BUCKET_ADDRESSES, all_hi = 0;
        for (int u = 0; u < n_threads; u++) {
            all_lo = lo_t[u] < all_lo ? lo_t[u] : all_lo;
            all_hi = hi_t[u] > all_hi ? hi_t[u] : all_hi;
        }
        lo_t[n_threads] = all_lo;
        hi_t[n_threads] = all_hi;
        uint32_t pos = (uint32_t)job->bucket_row[bi];
        for (uint32_t a = all_lo; a <= all_hi; a++)
            for (int u = 0; u < n_threads; u++) {
                uint32_t *hu = hist + (uint64_t)u * BUCKET_ADDRESSES;
                uint32_t c = hu[a];
                hu[a] = pos;
                pos += c;
            }
    } /* implied barrier */
    scatter_blocks(job, blocks, b0, b1, h, job->bucket_region[bi], bucket_straddles(job, bi));
#pragma omp barrier
#pragma omp single
    {
        /* the last thread's end cursors are every address's end */
        uint32_t *hz[256];
        for (int u = 0; u < n_threads; u++) hz[u] = hist + (uint64_t)u * BUCKET_ADDRESSES;
        job->bucket_runs[bi] = bucket_runs_write(job, bi, hz[n_threads - 1], lo_t[n_threads], hi_t[n_threads], hz,
                                                 n_threads);
    } /* implied barrier */
}

/* ---- the run ------------------------------------------------------------ */

pk_status pk_memsort_run_cpu(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    const uint64_t n = trace->n_entries;
    const uint32_t n_chunks = trace->n_chunks;
    cpu_job job;
    memset(&job, 0, sizeof job);
    job.layout = &layout;
    job.trace = trace;
    key_map_make(&layout, &job.map);
    const uint32_t n_buckets = job.map.first_bucket[layout.n_regions];
    job.n_buckets = n_buckets;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = ctx && ctx->n_threads > 0 ? ctx->n_threads : omp_get_max_threads();
#endif
    /* tiny traces: one thread; and few enough threads that each thread's
     * part holds four minimal blocks per bucket (the pool's slack, a
     * partly filled block per thread and bucket, stays small) */
    if ((uint64_t)n_threads > n / 4096 + 1) n_threads = (int)(n / 4096 + 1);
    if ((uint64_t)n_threads > n / ((uint64_t)n_buckets * 4 * BLOCK_PAIRS_MIN) + 1)
        n_threads = (int)(n / ((uint64_t)n_buckets * 4 * BLOCK_PAIRS_MIN) + 1);
    if (n_threads > 256) n_threads = 256;
    job.n_threads = n_threads;
    job.block_pairs = BLOCK_PAIRS_MAX;
    while (job.block_pairs > BLOCK_PAIRS_MIN && (uint64_t)n_threads * n_buckets * job.block_pairs > n / 2)
        job.block_pairs /= 2;
    while ((1u << job.block_shift) < job.block_pairs) job.block_shift++;

    /* the pool: each thread's entries, plus a partly filled block per bucket */
    uint64_t pool_blocks = 0;
    uint64_t pool_block0[257];
    for (int t = 0; t < n_threads; t++) {
        uint64_t entries = part_begin(n, t + 1, n_threads) - part_begin(n, t, n_threads);
        pool_block0[t] = pool_blocks;
        pool_blocks += entries / job.block_pairs + (entries < n_buckets ? entries : n_buckets) + 1;
    }
    pool_block0[n_threads] = pool_blocks;
    const uint64_t block_bytes = (uint64_t)job.block_pairs * sizeof(uint64_t);
    uint64_t pool_bytes = pool_blocks * block_bytes + block_bytes;
    pk_status st = PK_OK;
    uint32_t *hist = NULL;
    void *pool_mem = cpu_state_pool(result, pool_bytes);
    job.pool = pool_mem ? (uint64_t *)(((uintptr_t)pool_mem + block_bytes - 1) & ~(uintptr_t)(block_bytes - 1)) : NULL;
    job.pool_block0 = pool_block0;
    uint64_t pool_used[256];
    job.pool_used = pool_used;
    /* The first bucket (ROM tables) and the last (the stack) are the
     * hottest: with the threads' tables end to end, one thread's stack
     * cursor shared a line with the next thread's ROM cursor (2^25
     * entries: 66 ms to partition on two threads, 57 on one). */
    job.thread_stride = ((uint64_t)n_buckets + 31) / 16 * 16;
    job.cursor = pk_aligned_alloc((size_t)n_threads * job.thread_stride * sizeof(uint64_t *));
    job.n_blocks = pk_aligned_alloc((size_t)n_threads * job.thread_stride * sizeof(uint32_t));
    job.block_bucket = malloc((size_t)pool_blocks * sizeof(uint32_t) + 1);
    job.bucket_row = malloc(((size_t)n_buckets + 1) * sizeof(uint64_t));
    job.bucket_block0 = malloc(((size_t)n_buckets + 1) * sizeof(uint64_t));
    job.block_at = malloc(((size_t)n_buckets + 1) * sizeof(uint64_t));
    job.blocks = malloc((size_t)pool_blocks * sizeof(block_ref) + 1);
    job.bucket_region = malloc((size_t)n_buckets * sizeof(uint32_t) + 1);
    job.bucket_raw = malloc((size_t)n_buckets * sizeof(uint32_t) + 1);
    job.bucket_runs = calloc((size_t)n_buckets + 1, sizeof(uint32_t));
    if (!job.pool || !job.cursor || !job.n_blocks || !job.block_bucket || !job.bucket_row || !job.bucket_block0 ||
        !job.block_at || !job.blocks || !job.bucket_region || !job.bucket_raw || !job.bucket_runs) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for sorting %llu entries", (unsigned long long)n);
        goto done;
    }
    for (uint32_t r = 0; r < layout.n_regions; r++)
        for (uint32_t b = job.map.first_bucket[r]; b < job.map.first_bucket[r + 1]; b++) {
            job.bucket_region[b] = r;
            uint64_t offset = (uint64_t)(b - job.map.first_bucket[r]) << (BUCKET_BITS + 3);
            job.bucket_raw[b] = (uint32_t)(layout.base[r] + offset);
        }

    /* pass 1 */
    int cancelled = 0;
    int bad = partition_pass(&job, progress, &cancelled);
    if (bad & 2) {
        st = pk_fail(ctx, PK_ERR_INTERNAL, "the partition pool ran out");
        goto done;
    }
    if (bad) {
        st = pk_memsort_trace_check(ctx, regions, trace);
        if (st == PK_OK) st = pk_fail(ctx, PK_ERR_INTERNAL, "the partition pass found a bad entry the check did not");
        goto done;
    }
    if (cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }
    gather_blocks(&job);
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0};
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        job.region_row[r] = job.bucket_row[job.map.first_bucket[r]];
        region_entries[r] = job.bucket_row[job.map.first_bucket[r + 1]] - job.region_row[r];
    }
    job.region_row[layout.n_regions] = n;
    if ((st = pk_memsort_instances_build(ctx, &layout, regions, trace, region_entries, n_workers, worker, result)))
        goto done;
    const uint32_t n_inst = result->n_instances;
    const uint64_t counts_total = (uint64_t)result->n_owned * n_chunks;
    if ((st = pk_memsort_result_reserve(ctx, result, 0, n, counts_total, 0))) goto done;
    job.sorted = result->values;
    job.chunk_counts = result->chunk_counts;
    memset(result->chunk_counts, 0, counts_total * sizeof(uint32_t));
    job.instances = result->instances;
    job.n_instances = n_inst;
    job.owned_index = malloc(((size_t)n_inst + 1) * sizeof(uint32_t));
    job.n_plan_rows = 2 * (uint64_t)n_inst;
    job.plan_rows = malloc((job.n_plan_rows + 1) * sizeof(uint64_t));
    job.plan_runs = malloc((job.n_plan_rows + 1) * sizeof(row_run));
    hist = calloc((size_t)n_threads * BUCKET_ADDRESSES, sizeof(uint32_t));
    if (!job.owned_index || !job.plan_rows || !job.plan_runs || !hist) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the bucket histograms");
        goto done;
    }
    {
        uint32_t k = 0;
        for (uint32_t r = 0, g = 0; r < layout.n_regions; r++) {
            job.region_gid[r] = g;
            while (g < n_inst && result->instances[g].region == r) g++;
        }
        for (uint32_t g = 0; g < n_inst; g++) {
            const pk_memsort_instance *in = &result->instances[g];
            job.owned_index[g] = in->owned ? k++ : UINT32_MAX;
            uint64_t s = job.region_row[in->region] + in->first_row;
            job.plan_rows[2 * g] = s;
            job.plan_rows[2 * g + 1] = s + in->n_rows - 1;
        }
    }

    /* pass 2: a bucket with more than its share of the entries (the hot
     * stack window is one) is shared by all threads, the others go to one
     * thread each */
    const uint64_t big_bucket = n_threads > 1 ? n / (4 * (uint64_t)n_threads) + 1 : n + 1;
    uint32_t lo_t[257], hi_t[257];
    for (uint32_t bi = 0; bi < n_buckets && !cancelled; bi++) {
        if (job.bucket_row[bi + 1] - job.bucket_row[bi] <= big_bucket) continue;
#pragma omp parallel num_threads(n_threads)
        sort_big_bucket(&job, bi, hist, lo_t, hi_t);
        if (pk_progress_add(progress, 0.5 * (double)(job.bucket_row[bi + 1] - job.bucket_row[bi]), 1)) cancelled = 1;
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
            uint64_t m = job.bucket_row[bi + 1] - job.bucket_row[bi];
            if (m == 0 || cancelled || m > big_bucket) continue;
            sort_bucket(&job, (uint32_t)bi, h);
            if (pk_progress_add(progress, 0.5 * (double)m, t == 0)) cancelled = 1;
        }
    }
    if (cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }

    /* the plan of every instance, from the runs of its first and last row */
    uint64_t *run_base = malloc(((size_t)n_buckets + 1) * sizeof(uint64_t));
    if (!run_base) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        goto done;
    }
    {
        uint64_t k = 0;
        for (uint32_t b = 0; b < n_buckets; b++) {
            run_base[b] = k;
            k += job.bucket_runs[b];
        }
        run_base[n_buckets] = k;
    }
    uint32_t *sorted = job.sorted;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        uint64_t s = job.region_row[in->region] + in->first_row, e = s + in->n_rows;
        const row_run *f = &job.plan_runs[2 * gi], *l = &job.plan_runs[2 * gi + 1];
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
            in->prev_addr = job.plan_runs[2 * gi - 1].addr;
        }
        if (!in->owned) continue;
        in->n_runs = (uint32_t)((run_base[l->bucket] + l->k) - (run_base[f->bucket] + f->k) + 1);
        in->values_offset = s;
        in->counts_offset = (uint64_t)job.owned_index[gi] * n_chunks;
    }
    free(run_base);
    uint64_t n_runs = 0;
    result->n_values = 0;
    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        if (!in->owned) continue;
        in->runs_offset = n_runs;
        n_runs += in->n_runs;
        result->n_values += in->n_rows;
    }
    if ((st = pk_memsort_result_reserve(ctx, result, n_runs, n, counts_total, 0))) goto done;
    result->n_runs = n_runs;

    /* each owned instance's runs, copied from its buckets' blocks */
    const uint32_t bp = job.block_pairs;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        if (!in->owned) continue;
        uint64_t s = job.region_row[in->region] + in->first_row, e = s + in->n_rows;
        const row_run *f = &job.plan_runs[2 * gi], *l = &job.plan_runs[2 * gi + 1];
        pk_memsort_run_entry *out = result->runs + in->runs_offset;
        for (uint32_t b = f->bucket; b <= l->bucket; b++) {
            uint32_t k0 = b == f->bucket ? f->k : 0, k1 = b == l->bucket ? l->k + 1 : job.bucket_runs[b];
            const block_ref *blocks = job.blocks + job.bucket_block0[b];
            while (k0 < k1) {
                uint32_t q = k0 / bp, off = k0 % bp, take = bp - off < k1 - k0 ? bp - off : k1 - k0;
                if (k0 + take < k1) /* the next block while this one is copied (as in histogram_blocks) */
                    for (uint32_t j = 0; j < bp; j += 8) __builtin_prefetch(blocks[q + 1].pairs + j);
                memcpy(out, (const pk_memsort_run_entry *)(const void *)blocks[q].pairs + off,
                       take * sizeof(pk_memsort_run_entry));
                out += take;
                k0 += take;
            }
        }
        /* the end runs, cut at the instance's boundaries */
        pk_memsort_run_entry *first = result->runs + in->runs_offset, *last = first + in->n_runs - 1;
        first->count = (uint32_t)((f->end < e ? f->end : e) - s);
        last->count = (uint32_t)(e - (l->start > s ? l->start : s));
    }
    result->stats.host_bytes += pool_bytes + (uint64_t)n_threads * BUCKET_ADDRESSES * 4 +
                                (uint64_t)n_threads * n_buckets * 12 + pool_blocks * (4 + sizeof(block_ref)) +
                                job.n_plan_rows * (8 + sizeof(row_run));
done:
    free(hist);
    pk_aligned_free(job.cursor);
    pk_aligned_free(job.n_blocks);
    free(job.block_bucket);
    free(job.bucket_row);
    free(job.bucket_block0);
    free(job.block_at);
    free(job.blocks);
    free(job.bucket_region);
    free(job.bucket_raw);
    free(job.bucket_runs);
    free(job.owned_index);
    free(job.plan_rows);
    free(job.plan_runs);
    return st;
}
