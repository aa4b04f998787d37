/* fill.c - an instance's rows from the chunks a worker holds, by the plan
 * alone: what a prover worker that did not sort the whole trace does with
 * the plans (docs/memsort.md, "Instances, workers, plans").
 *
 * Each entry goes to every instance whose address range [first_addr,
 * last_addr] holds it (one, or several when it is an address an instance
 * boundary cuts), where the plan's rules for the first and last address
 * decide whether the instance takes it. The rules look at one chunk at a
 * time, so the chunks are shared out to the threads, twice: the first pass
 * lists each chunk's rows of each instance it gives rows to (which places
 * every chunk's rows, in chunk order, and checks each instance's room
 * before any pair is written), the second writes them. Each pass first
 * picks, 16 entries at a time (AVX-512), the entries whose address lies
 * in a bucket that some instance's range meets. Each instance's rows, so
 * in trace order, are then sorted stably by address (a counting sort or a
 * least-significant-digit radix sort on the address's offset from
 * first_addr), which is its stable address order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "memsort_internal.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PK_FILL_X86 1
#endif

int pk_memsort_fill_scalar = 0;

/* Per instance and thread while a chunk is read: how many occurrences of
 * the first address the chunk has shown, how many of the last address it
 * has given (counts of the chunk at list position `at`, else stale). */
typedef struct fill_state {
    uint32_t at, seen_first, taken_last;
} fill_state;

/* Whether the instance takes an entry of address a (first <= a <= last)
 * of chunk c, at position `at` of the chunk list; updates the chunk's
 * occurrence counts. */
static int takes(const pk_memsort_instance *p, fill_state *s, uint32_t at, uint32_t c, uint32_t a) {
    if (s->at != at) *s = (fill_state){at, 0, 0};
    int is_first = a == p->first_addr, is_last = a == p->last_addr;
    if (is_first) {
        if (c < p->first_chunk) return 0;
        if (c == p->first_chunk && s->seen_first++ < p->first_skip) return 0;
    }
    if (is_last) {
        if (c > p->last_chunk) return 0;
        if (c == p->last_chunk && s->taken_last++ >= p->last_include) return 0;
    }
    return 1;
}

/* Scratch memory a thread keeps from one sort to the next (so that big
 * buffers are not mapped and faulted in again for every instance). */
typedef struct scratch {
    void *p;
    size_t bytes;
} scratch;

static void *scratch_get(scratch *s, size_t bytes) {
    if (bytes > s->bytes) {
        free(s->p);
        s->p = malloc(bytes);
        s->bytes = s->p ? bytes : 0;
    }
    return s->p;
}

/* pairs[0 .. 2n) (address, value) sorted stably by address, all in
 * [lo, lo + 8 * span_words). A counting sort over the word offsets when
 * they are few beside the rows, else a least-significant-digit radix sort
 * on them, 11 bits a pass; both keep equal addresses in the order they
 * came, which is trace order. Returns 1 when out of memory. */
static int sort_rows(uint32_t *pairs, uint64_t n, uint32_t lo, uint64_t span_words, scratch *sc) {
    if (n < 2 || span_words < 2) return 0;
    if (span_words <= 2 * n) {
        uint64_t *start = scratch_get(sc, (size_t)(2 * n + span_words + 1) * sizeof(uint64_t));
        if (!start) return 1;
        uint32_t *out = (uint32_t *)(start + span_words + 1);
        memset(start, 0, (size_t)(span_words + 1) * sizeof *start);
        for (uint64_t j = 0; j < n; j++) start[((pairs[2 * j] - lo) >> 3) + 1]++;
        for (uint64_t w = 0; w < span_words; w++) start[w + 1] += start[w];
        for (uint64_t j = 0; j < n; j++) {
            uint64_t to = start[(pairs[2 * j] - lo) >> 3]++;
            out[2 * to] = pairs[2 * j];
            out[2 * to + 1] = pairs[2 * j + 1];
        }
        memcpy(pairs, out, 2 * n * sizeof *out);
        return 0;
    }
    enum { BITS = 11, DIGITS = 1 << BITS };
    uint64_t *count = scratch_get(sc, (size_t)(2 * n + DIGITS + 1) * sizeof(uint64_t));
    if (!count) return 1;
    uint64_t *a = count + DIGITS + 1, *b = a + n;
    /* (offset << 32 | value), sorted by the offset's digits alone */
    for (uint64_t j = 0; j < n; j++) a[j] = (uint64_t)((pairs[2 * j] - lo) >> 3) << 32 | pairs[2 * j + 1];
    for (uint32_t shift = 32; shift < 64 && ((span_words - 1) >> (shift - 32)) != 0; shift += BITS) {
        memset(count, 0, (DIGITS + 1) * sizeof *count);
        for (uint64_t j = 0; j < n; j++) count[((a[j] >> shift) & (DIGITS - 1)) + 1]++;
        for (int d = 0; d < DIGITS; d++) count[d + 1] += count[d];
        for (uint64_t j = 0; j < n; j++) b[count[(a[j] >> shift) & (DIGITS - 1)]++] = a[j];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    for (uint64_t j = 0; j < n; j++) {
        pairs[2 * j] = lo + (uint32_t)(a[j] >> 32) * 8;
        pairs[2 * j + 1] = (uint32_t)a[j];
    }
    return 0;
}

/* Instances ordered by address range, for the search below. */
typedef struct fill_order {
    uint32_t first, last, k;
} fill_order;

static int order_cmp(const void *x, const void *y) {
    const fill_order *a = x, *b = y;
    if (a->last != b->last) return a->last < b->last ? -1 : 1;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

/* The fills in the order of their address ranges, for the search below:
 * by last address, and the smallest first address from each on. */
typedef struct fill_index {
    fill_order *order;
    uint32_t *lowest_first;
    uint32_t n;
    uint32_t lo, span;   /* every range lies in [lo, lo + span] */
    uint32_t shift;      /* addresses a bucket: 1 << shift bytes from lo */
    uint32_t (*cand)[2]; /* per bucket: the ranges that meet it are among [cand[0], cand[1]) */
    uint32_t *meets;     /* a bit per bucket: some range meets it */
    int use_avx512;
} fill_index;

/* Index of the first fill (by end) whose range ends at or after a, by
 * bisection: what each bucket of the table below starts from. */
static inline uint32_t search_ending_at_or_after(const fill_index *ix, uint32_t a) {
    const fill_order *base = ix->order;
    uint32_t n = ix->n;
    while (n > 1) {
        uint32_t half = n / 2;
        base = base[half - 1].last < a ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - ix->order) + (base->last < a);
}

/* A thread's tally of the chunk it reads: rows a fill takes (counting),
 * or where the fill's next row goes (writing); the fills the chunk gives
 * rows to, in the order met. */
typedef struct tally {
    uint64_t *n;       /* [n_fills] */
    uint32_t *touched; /* [n_fills] */
    uint32_t n_touched;
} tally;

/* A chunk's rows of one fill (counting), then where they go (writing). */
typedef struct fill_rows {
    uint64_t rows;
    uint32_t k;
} fill_rows;

/* A thread's store of (fill, rows) lists, and where a chunk's list is. */
typedef struct chunk_store {
    fill_rows *p;
    size_t len, cap;
} chunk_store;

typedef struct chunk_list {
    int store;
    size_t offset;
    uint32_t len;
} chunk_list;

/* Room for n more in the store; 1 when out of memory. */
static int store_reserve(chunk_store *s, size_t n) {
    if (s->len + n <= s->cap) return 0;
    size_t cap = s->cap ? 2 * s->cap : 4096;
    while (cap < s->len + n) cap *= 2;
    fill_rows *p = realloc(s->p, cap * sizeof *p);
    if (!p) return 1;
    s->p = p;
    s->cap = cap;
    return 0;
}

/* Fill k takes the entry (a, position): counted, or written at its place. */
static inline void take(pk_memsort_fill *fills, tally *t, uint32_t k, uint32_t a, uint64_t position, int write) {
    if (write) {
        uint64_t j = t->n[k]++;
        fills[k].pairs[2 * j] = a;
        fills[k].pairs[2 * j + 1] = (uint32_t)position;
    } else if (t->n[k]++ == 0) {
        t->touched[t->n_touched++] = k;
    }
}

/* Entry e of chunk ch (its address a inside [lo, lo + span]) to every fill
 * that takes it; 1 when it is misaligned inside a range. */
static inline int scan_entry(const fill_index *ix, const pk_memsort_chunk *ch, uint64_t e, uint32_t at,
                             pk_memsort_fill *fills, fill_state *state, tally *count, int write) {
    uint32_t a = ch->addr[e];
    const uint32_t *b = ix->cand[(a - ix->lo) >> ix->shift];
    uint32_t lo = b[0], hi = b[1];
    if (lo == hi) return 0; /* in no range that meets its bucket */
    if (hi - lo == 1) {     /* most buckets meet one range: is a inside it */
        const fill_order o = ix->order[lo];
        if (a - o.first > o.last - o.first) return 0;
        if (a & 7) return 1;
        uint32_t k = o.k;
        if ((a == o.first || a == o.last) && !takes(fills[k].plan, &state[k], at, ch->index, a)) return 0;
        take(fills, count, k, a, ch->first_position + e, write);
        return 0;
    }
    for (uint32_t h = hi; lo < h;) { /* the first range ending at or after a */
        uint32_t mid = lo + (h - lo) / 2;
        if (ix->order[mid].last < a) lo = mid + 1;
        else h = mid;
    }
    for (uint32_t i = lo; i < hi && ix->lowest_first[i] <= a; i++) {
        const fill_order o = ix->order[i];
        if (o.first > a) continue;
        if (a & 7) return 1;
        uint32_t k = o.k;
        if ((a == o.first || a == o.last) && !takes(fills[k].plan, &state[k], at, ch->index, a)) continue;
        take(fills, count, k, a, ch->first_position + e, write);
    }
    return 0;
}

#ifdef PK_FILL_X86
/* Entries scanned a block at a time for those that may lie in a range. */
#define SCAN_BLOCK 4096u

/* The indices j < n (a multiple of 16) of the entries a[j] inside [lo, lo
 * + span] in a bucket that some range meets (the bucket's bit gathered),
 * into idx; returns how many. */
__attribute__((target("avx512f"))) static uint32_t maybe_in_ranges(const fill_index *ix, const uint32_t *a, uint32_t n,
                                                                   uint32_t *idx) {
    const __m512i lo = _mm512_set1_epi32((int)ix->lo), span = _mm512_set1_epi32((int)ix->span);
    const __m512i shift = _mm512_set1_epi32((int)ix->shift), low5 = _mm512_set1_epi32(31), one = _mm512_set1_epi32(1);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    uint32_t k = 0;
    for (uint32_t j = 0; j < n; j += 16) {
        __m512i off = _mm512_sub_epi32(_mm512_loadu_si512(a + j), lo);
        __mmask16 inside = _mm512_cmple_epu32_mask(off, span);
        __m512i bucket = _mm512_srlv_epi32(off, shift);
        __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), inside, _mm512_srli_epi32(bucket, 5),
                                                   (const void *)ix->meets, 4);
        __m512i bit = _mm512_srlv_epi32(word, _mm512_and_si512(bucket, low5));
        __mmask16 keep = _mm512_mask_test_epi32_mask(inside, bit, one);
        _mm512_storeu_si512(idx + k,
                            _mm512_maskz_compress_epi32(keep, _mm512_add_epi32(lane, _mm512_set1_epi32((int)j))));
        k += (uint32_t)__builtin_popcount(keep);
    }
    return k;
}
#endif

/* One chunk, at list position `at`: without `write` count its rows of
 * each fill into the tally; with it write them at pairs[2 * n[k]++] of
 * fill k. Returns the first misaligned entry inside a range, or n_entries. */
static uint64_t scan_chunk(const fill_index *ix, const pk_memsort_chunk *ch, uint32_t at, pk_memsort_fill *fills,
                           fill_state *state, tally *count, int write) {
    uint64_t e = 0;
#ifdef PK_FILL_X86
    /* 16 entries at a time where most lie in no range (a worker's
     * instances span a part of the addresses), listed, then the listed
     * ones one by one: worker 3 of 16's instances from all chunks of a
     * 519M-entry trace on two threads, 2.1-2.2 -> 0.86 s (1.1 s with a
     * mask of each 16 walked at once, its branches unpredictable) */
    uint32_t idx[SCAN_BLOCK + 16];
    if (ix->use_avx512)
        for (; e + SCAN_BLOCK <= ch->n_entries; e += SCAN_BLOCK) {
            uint32_t n = maybe_in_ranges(ix, ch->addr + e, SCAN_BLOCK, idx);
            for (uint32_t i = 0; i < n; i++)
                if (scan_entry(ix, ch, e + idx[i], at, fills, state, count, write)) return e + idx[i];
        }
#endif
    for (; e < ch->n_entries; e++) {
        if (ch->addr[e] - ix->lo > ix->span) continue; /* in no fill's range */
        if (scan_entry(ix, ch, e, at, fills, state, count, write)) return e;
    }
    return ch->n_entries;
}

/* The chunks' addresses, bounds and order. */
static pk_status chunks_check(pk_context *ctx, const pk_memsort_chunk *chunks, uint32_t n_chunks) {
    for (uint32_t c = 0; c < n_chunks; c++) {
        if (chunks[c].n_entries && !chunks[c].addr)
            return pk_fail(ctx, PK_ERR_INVALID, "memsort fill: chunk %u has entries but no addresses", chunks[c].index);
        if (chunks[c].n_entries > (1ull << 32) || chunks[c].first_position > (1ull << 32) - chunks[c].n_entries)
            return pk_fail(ctx, PK_ERR_INVALID, "memsort fill: chunk %u reaches past trace position 2^32",
                           chunks[c].index);
        if (c && chunks[c].index <= chunks[c - 1].index)
            return pk_fail(ctx, PK_ERR_INVALID,
                           "memsort fill: chunks must come in increasing order of their numbers (chunk %u after "
                           "chunk %u)",
                           chunks[c].index, chunks[c - 1].index);
        if (c && chunks[c].first_position < chunks[c - 1].first_position + chunks[c - 1].n_entries)
            return pk_fail(ctx, PK_ERR_INVALID,
                           "memsort fill: chunk %u starts at trace position %llu, inside chunk %u (positions %llu .. "
                           "%llu)",
                           chunks[c].index, (unsigned long long)chunks[c].first_position, chunks[c - 1].index,
                           (unsigned long long)chunks[c - 1].first_position,
                           (unsigned long long)(chunks[c - 1].first_position + chunks[c - 1].n_entries - 1));
    }
    return PK_OK;
}

/* Each fill's plan and buffers checked and its counts cleared, in turn
 * (the fills before a bad one are cleared). */
static pk_status fills_check_and_clear(pk_context *ctx, pk_memsort_fill *fills, uint32_t n_fills, uint32_t n_chunks) {
    for (uint32_t f = 0; f < n_fills; f++) {
        const pk_memsort_instance *p = fills[f].plan;
        if (!p) return pk_fail(ctx, PK_ERR_INVALID, "memsort fill: fills[%u] has no plan", f);
        if (fills[f].capacity && !fills[f].pairs)
            return pk_fail(ctx, PK_ERR_INVALID, "memsort fill of instance %u: capacity but no pairs", p->gid);
        if (p->n_rows == 0 || p->first_addr > p->last_addr || ((p->first_addr | p->last_addr) & 7))
            return pk_fail(ctx, PK_ERR_INVALID,
                           "memsort fill of instance %u: not a plan (%u rows, addresses 0x%08x .. 0x%08x)", p->gid,
                           p->n_rows, p->first_addr, p->last_addr);
        fills[f].n_rows = 0;
        if (fills[f].chunk_rows) memset(fills[f].chunk_rows, 0, (size_t)n_chunks * sizeof(uint32_t));
    }
    return PK_OK;
}

/* What the two passes over the chunks share: the index of the fills'
 * ranges, each thread's plan states and tally, and the lists of (fill,
 * rows) each chunk gives. */
typedef struct fill_scan {
    int nt;
    fill_index ix;
    uint64_t state_stride;
    fill_state *state;   /* [nt * state_stride] */
    tally *tallies;      /* [nt] */
    chunk_store *stores; /* [nt] */
    chunk_list *lists;   /* [n_chunks] */
} fill_scan;

/* Everything but the index's buckets, for n_fills fills and n_chunks
 * chunks on the context's threads. Free with fill_scan_free, whatever it
 * returns. */
static pk_status fill_scan_alloc(pk_context *ctx, fill_scan *w, uint32_t n_chunks, uint32_t n_fills) {
    const int nt = pk_thread_count(ctx);
    *w = (fill_scan){0};
    w->nt = nt;
    w->ix = (fill_index){malloc((size_t)n_fills * sizeof(fill_order)),
                         malloc((size_t)n_fills * sizeof(uint32_t)),
                         n_fills,
                         0,
                         0,
                         0,
                         NULL,
                         NULL,
                         0};
    /* each thread's states, with more than a line between one thread's
     * and the next's */
    w->state_stride = (uint64_t)n_fills + 64 / sizeof(fill_state) + 1;
    w->state = calloc((size_t)(nt * w->state_stride), sizeof *w->state);
    /* each thread's tally, and the lists of (fill, rows) each chunk gives
     * (in its thread's store), so that the cost follows the rows taken,
     * not instances x chunks */
    w->tallies = calloc((size_t)nt, sizeof *w->tallies);
    w->stores = calloc((size_t)nt, sizeof *w->stores);
    w->lists = calloc(n_chunks, sizeof *w->lists);
    int no_memory = !w->ix.order || !w->ix.lowest_first || !w->state || !w->tallies || !w->stores || !w->lists;
    /* each thread's counts on lines of their own (a few fills' counts are
     * incremented for nearly every entry) */
    const size_t tally_bytes = ((size_t)n_fills * sizeof(uint64_t) + 63) / 64 * 64;
    for (int t = 0; t < nt && !no_memory; t++) {
        w->tallies[t].n = pk_aligned_alloc(tally_bytes);
        w->tallies[t].touched = malloc((size_t)n_fills * sizeof(uint32_t));
        no_memory = !w->tallies[t].n || !w->tallies[t].touched;
        if (w->tallies[t].n) memset(w->tallies[t].n, 0, tally_bytes);
    }
    if (no_memory)
        return pk_fail(ctx, PK_ERR_NOMEM, "memsort fill: out of memory for %u instances on %d threads", n_fills, nt);
    return PK_OK;
}

static void fill_scan_free(fill_scan *w) {
    free(w->ix.cand);
    free(w->ix.meets);
    free(w->ix.order);
    free(w->ix.lowest_first);
    free(w->state);
    for (int t = 0; t < w->nt && w->tallies; t++) {
        pk_aligned_free(w->tallies[t].n);
        free(w->tallies[t].touched);
    }
    for (int t = 0; t < w->nt && w->stores; t++) free(w->stores[t].p);
    free(w->tallies);
    free(w->stores);
    free(w->lists);
}

/* The index of the n_fills (> 0) fills' ranges (its order and
 * lowest_first allocated): the ranges by their end, their bounds, and
 * per bucket of addresses the ranges that meet it. */
static pk_status fill_index_build(pk_context *ctx, fill_index *ix, const pk_memsort_fill *fills, uint32_t n_fills) {
    for (uint32_t f = 0; f < n_fills; f++)
        ix->order[f] = (fill_order){fills[f].plan->first_addr, fills[f].plan->last_addr, f};
    qsort(ix->order, n_fills, sizeof *ix->order, order_cmp);
    /* a range ends at or after every earlier one's end; the scan from the
     * first range ending at or after a goes on while a later range can
     * still start at or below a */
    ix->lo = ix->order[0].first;
    for (uint32_t f = 1; f < n_fills; f++)
        if (ix->order[f].first < ix->lo) ix->lo = ix->order[f].first;
    ix->span = ix->order[n_fills - 1].last - ix->lo;
    ix->lowest_first[n_fills - 1] = ix->order[n_fills - 1].first;
    for (uint32_t i = n_fills - 1; i-- > 0;)
        ix->lowest_first[i] =
            ix->order[i].first < ix->lowest_first[i + 1] ? ix->order[i].first : ix->lowest_first[i + 1];
    /* at most 2^16 buckets (512 KB of candidates, in the cache beside the
     * chunk being read) */
    ix->shift = 3;
    while ((ix->span >> ix->shift) >= (1u << 16)) ix->shift++;
    uint64_t n_buckets = ((uint64_t)ix->span >> ix->shift) + 1;
    ix->cand = malloc((size_t)n_buckets * sizeof *ix->cand);
    ix->meets = calloc((size_t)(n_buckets + 31) / 32, sizeof(uint32_t));
    ix->use_avx512 = pk_cpu_has_avx512() && !pk_memsort_fill_scalar;
    if (!ix->cand || !ix->meets)
        return pk_fail(ctx, PK_ERR_NOMEM, "memsort fill: out of memory for %u instances", n_fills);
    for (uint64_t b = 0; b < n_buckets; b++) {
        uint32_t start = ix->lo + (uint32_t)(b << ix->shift);
        uint64_t end = (uint64_t)start + (1ull << ix->shift) - 1;
        uint32_t i = search_ending_at_or_after(ix, start), j = i;
        for (uint32_t k = i; k < n_fills && ix->lowest_first[k] <= end; k++)
            if (ix->order[k].first <= end) j = k + 1;
        ix->cand[b][0] = i;
        ix->cand[b][1] = j > i ? j : i;
        if (j > i) ix->meets[b / 32] |= 1u << (b % 32);
    }
    return PK_OK;
}

/* One pass over the chunks, shared out to the threads: without `write`
 * each chunk's (fill, rows) list into its thread's store; with it every
 * row written where the lists say. Stops at a cancellation, a store out
 * of room, or the first misaligned entry (in chunk order). */
static pk_status scan_pass(pk_context *ctx, fill_scan *w, const pk_memsort_chunk *chunks, uint32_t n_chunks,
                           pk_memsort_fill *fills, pk_progress *progress, int write) {
    const int nt = w->nt;
    const fill_index *ix = &w->ix;
    tally *tallies = w->tallies;
    chunk_store *stores = w->stores;
    chunk_list *lists = w->lists;
    int cancelled = 0, no_room = 0;
    uint32_t bad_at = n_chunks;
    uint64_t bad_entry = 0;
    for (uint64_t j = 0; j < (uint64_t)nt * w->state_stride; j++) w->state[j].at = UINT32_MAX;
#pragma omp parallel num_threads(nt)
    {
        int t = pk_thread_num();
        fill_state *my = w->state + (uint64_t)t * w->state_stride;
#pragma omp for schedule(dynamic, 1) reduction(| : cancelled, no_room)
        for (int64_t c = 0; c < (int64_t)n_chunks; c++) {
            if (cancelled || no_room) continue;
            tally *ty = &tallies[t];
            chunk_list *li = &lists[c];
            if (write) /* where each fill's rows of this chunk go */
                for (uint32_t i = 0; i < li->len; i++) {
                    const fill_rows *r = &stores[li->store].p[li->offset + i];
                    ty->n[r->k] = r->rows;
                }
            uint64_t e = scan_chunk(ix, &chunks[c], (uint32_t)c, fills, my, ty, write);
            if (!write) {
                /* the chunk's (fill, rows) into this thread's store */
                if (store_reserve(&stores[t], ty->n_touched)) {
                    no_room = 1;
                } else {
                    *li = (chunk_list){t, stores[t].len, ty->n_touched};
                    for (uint32_t i = 0; i < ty->n_touched; i++) {
                        uint32_t k = ty->touched[i];
                        stores[t].p[stores[t].len++] = (fill_rows){ty->n[k], k};
                        ty->n[k] = 0;
                    }
                }
                ty->n_touched = 0;
            }
            if (pk_progress_add(progress, (double)chunks[c].n_entries, t == 0)) cancelled = 1;
            if (e < chunks[c].n_entries) {
#pragma omp critical(pk_memsort_fill_bad)
                if ((uint32_t)c < bad_at) {
                    bad_at = (uint32_t)c;
                    bad_entry = e;
                }
            }
        }
    }
    if (cancelled) return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    if (no_room) return pk_fail(ctx, PK_ERR_NOMEM, "memsort fill: out of memory for the rows each chunk gives");
    if (bad_at < n_chunks) {
        const pk_memsort_chunk *ch = &chunks[bad_at];
        return pk_fail(ctx, PK_ERR_PARSE, "mem_addr_%04u.bin entry %llu: address 0x%08x is not 8-byte aligned",
                       ch->index, (unsigned long long)bad_entry, ch->addr[bad_entry]);
    }
    return PK_OK;
}

/* After the counting pass: every chunk's rows of each fill placed after
 * the earlier chunks' (the lists then hold where they go), and each
 * fill's rows checked against its room. */
static pk_status rows_place(pk_context *ctx, fill_scan *w, uint32_t n_chunks, pk_memsort_fill *fills,
                            uint32_t n_fills) {
    for (uint32_t c = 0; c < n_chunks; c++) {
        const chunk_list *li = &w->lists[c];
        for (uint32_t i = 0; i < li->len; i++) {
            fill_rows *r = &w->stores[li->store].p[li->offset + i];
            pk_memsort_fill *fl = &fills[r->k];
            if (fl->chunk_rows) fl->chunk_rows[c] = (uint32_t)r->rows;
            uint64_t at = fl->n_rows;
            fl->n_rows += r->rows;
            r->rows = at;
        }
    }
    for (uint32_t f = 0; f < n_fills; f++)
        if (fills[f].n_rows > fills[f].capacity)
            return pk_fail(ctx, PK_ERR_INVALID,
                           "memsort fill of instance %u: the chunks give %llu rows, more than the room for %llu "
                           "(the plan has %u rows)",
                           fills[f].plan->gid, (unsigned long long)fills[f].n_rows,
                           (unsigned long long)fills[f].capacity, fills[f].plan->n_rows);
    return PK_OK;
}

/* Each fill's rows, written in trace order, sorted stably by address. */
static pk_status rows_sort(pk_context *ctx, int nt, pk_memsort_fill *fills, uint32_t n_fills, pk_progress *progress) {
    int failed = 0, cancelled = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed, cancelled)
    {
        int t = pk_thread_num();
        scratch sc = {NULL, 0};
#pragma omp for schedule(dynamic, 1)
        for (int64_t f = 0; f < (int64_t)n_fills; f++) {
            if (cancelled || failed) continue;
            const pk_memsort_instance *p = fills[f].plan;
            uint64_t span = ((uint64_t)(p->last_addr - p->first_addr) >> 3) + 1;
            failed |= sort_rows(fills[f].pairs, fills[f].n_rows, p->first_addr, span, &sc);
            if (pk_progress_add(progress, (double)p->n_rows + (f == 0), t == 0)) cancelled = 1;
        }
        free(sc.p);
    }
    if (failed) return pk_fail(ctx, PK_ERR_NOMEM, "memsort fill: out of memory sorting the rows");
    if (cancelled) return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    return PK_OK;
}

pk_status pk_memsort_fill_from_chunks(pk_context *ctx, const pk_memsort_chunk *chunks, uint32_t n_chunks,
                                      pk_memsort_fill *fills, uint32_t n_fills) {
    pk_clear(ctx);
    if (n_chunks && !chunks)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_fill_from_chunks: chunks is NULL (n_chunks %u)", n_chunks);
    if (n_fills && !fills)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_fill_from_chunks: fills is NULL (n_fills %u)", n_fills);
    pk_status st = chunks_check(ctx, chunks, n_chunks);
    if (!st) st = fills_check_and_clear(ctx, fills, n_fills, n_chunks);
    if (st || !n_fills || !n_chunks) return st;

    fill_scan w;
    st = fill_scan_alloc(ctx, &w, n_chunks, n_fills);
    if (!st) st = fill_index_build(ctx, &w.ix, fills, n_fills);
    if (!st) {
        /* progress: each entry read twice, then each plan row sorted */
        uint64_t n_entries = 0, n_rows_all = 0;
        for (uint32_t c = 0; c < n_chunks; c++) n_entries += chunks[c].n_entries;
        for (uint32_t f = 0; f < n_fills; f++) n_rows_all += fills[f].plan->n_rows;
        pk_progress progress;
        pk_progress_begin(&progress, ctx, 2.0 * (double)n_entries + (double)n_rows_all + 1, 0, 1);
        st = scan_pass(ctx, &w, chunks, n_chunks, fills, &progress, 0);
        if (!st) st = rows_place(ctx, &w, n_chunks, fills, n_fills);
        if (!st) st = scan_pass(ctx, &w, chunks, n_chunks, fills, &progress, 1);
        if (!st) st = rows_sort(ctx, w.nt, fills, n_fills, &progress);
    }
    fill_scan_free(&w);
    return st;
}

/* Progress of one batch of the plan check, as a share of the whole. */
typedef struct batch_progress {
    pk_progress_fn fn;
    void *user;
    double base, span;
} batch_progress;

static int batch_report(void *user, double fraction) {
    const batch_progress *b = user;
    return b->fn(b->user, b->base + b->span * fraction);
}

/* Owned instances [g0, g1) of result (by gid), filled from all chunks and
 * compared with their rows and chunk counts. */
static pk_status check_batch(pk_context *ctx, const pk_memsort_result *result, const pk_memsort_chunk *chunks,
                             uint32_t n_chunks, uint32_t g0, uint32_t g1, uint32_t n_fills, uint64_t n_rows) {
    pk_memsort_fill *fills = calloc(n_fills, sizeof *fills);
    uint32_t *pairs = malloc((size_t)(2 * n_rows + 2) * sizeof *pairs);
    uint32_t *rows = malloc(((size_t)n_fills * n_chunks + 1) * sizeof *rows);
    pk_status st = PK_OK;
    if (!fills || !pairs || !rows) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "memsort plan check: out of memory for %llu rows", (unsigned long long)n_rows);
        goto done;
    }
    uint32_t f = 0;
    uint64_t at = 0;
    for (uint32_t g = g0; g < g1; g++) {
        const pk_memsort_instance *in = &result->instances[g];
        if (!in->owned) continue;
        fills[f] = (pk_memsort_fill){in, pairs + 2 * at, in->n_rows, 0, rows + (uint64_t)f * n_chunks};
        at += in->n_rows;
        f++;
    }
    if ((st = pk_memsort_fill_from_chunks(ctx, chunks, n_chunks, fills, f)) != PK_OK) {
        if (st != PK_ERR_CANCELLED && st != PK_ERR_NOMEM)
            st = pk_fail(ctx, PK_ERR_INTERNAL, "memsort plan check: filling from the plans failed: %s", ctx->message);
        goto done;
    }
    for (uint32_t k = 0; k < f && st == PK_OK; k++) {
        const pk_memsort_instance *in = fills[k].plan;
        if (fills[k].n_rows != in->n_rows) {
            st = pk_fail(ctx, PK_ERR_INTERNAL,
                         "memsort plan check: instance %u: its plan takes %llu rows from the chunks, the sort gave %u",
                         in->gid, (unsigned long long)fills[k].n_rows, in->n_rows);
            break;
        }
        uint64_t j = 0;
        for (uint32_t r = 0; r < in->n_runs && st == PK_OK; r++) {
            const pk_memsort_run_entry *run = &result->runs[in->runs_offset + r];
            for (uint32_t m = 0; m < run->count; m++, j++)
                if (fills[k].pairs[2 * j] != run->addr ||
                    fills[k].pairs[2 * j + 1] != result->values[in->values_offset + j]) {
                    st = pk_fail(ctx, PK_ERR_INTERNAL,
                                 "memsort plan check: instance %u row %llu: (0x%08x, %u) from its plan, (0x%08x, %u) "
                                 "from the sort",
                                 in->gid, (unsigned long long)j, fills[k].pairs[2 * j], fills[k].pairs[2 * j + 1],
                                 run->addr, result->values[in->values_offset + j]);
                    break;
                }
        }
        for (uint32_t c = 0; c < n_chunks && st == PK_OK; c++)
            if (fills[k].chunk_rows[c] != result->chunk_counts[in->counts_offset + c])
                st = pk_fail(ctx, PK_ERR_INTERNAL,
                             "memsort plan check: instance %u: chunk %u gives %u rows by the plan, the chunk counts "
                             "say %u",
                             in->gid, c, fills[k].chunk_rows[c], result->chunk_counts[in->counts_offset + c]);
    }
done:
    free(fills);
    free(pairs);
    free(rows);
    return st;
}

pk_status pk_memsort_check_plans(pk_context *ctx, const pk_memsort_trace *trace, const pk_memsort_result *result) {
    pk_clear(ctx);
    if (!trace) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_check_plans: trace is NULL");
    if (!result) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_check_plans: result is NULL");
    pk_status st = pk_memsort_trace_check_structure(ctx, trace);
    if (st) return st;
    if (result->n_instances && !result->instances)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_check_plans: the result has %u instances and instances is NULL",
                       result->n_instances);
    if (trace->n_entries != result->n_entries || trace->n_chunks != result->n_chunks)
        return pk_fail(ctx, PK_ERR_INVALID,
                       "memsort plan check: the result is of another trace (%llu entries in %u chunks, the trace "
                       "has %llu in %u)",
                       (unsigned long long)result->n_entries, result->n_chunks, (unsigned long long)trace->n_entries,
                       trace->n_chunks);
    const uint32_t n_chunks = trace->n_chunks;
    if (!result->n_owned) return PK_OK;
    pk_memsort_chunk *chunks = malloc((size_t)n_chunks * sizeof *chunks);
    if (!chunks) return pk_fail(ctx, PK_ERR_NOMEM, "memsort plan check: out of memory");
    for (uint32_t c = 0; c < n_chunks; c++) {
        uint64_t s = trace->chunk_start[c];
        chunks[c] = (pk_memsort_chunk){c, s, trace->addr + s, trace->chunk_start[c + 1] - s};
    }
    /* the owned instances in batches, so that what a batch holds stays
     * bounded (its rows, and a count per instance and chunk) whatever the
     * instances; each batch reads the trace again */
    const uint64_t max_rows = 1ull << 27;
    const uint32_t max_fills = n_chunks >= (1u << 4) ? (1u << 24) / n_chunks : (1u << 20);
    pk_context none; /* for a caller without a context */
    pk_context_init(&none);
    const pk_context *given = ctx ? ctx : &none;
    batch_progress bp = {given->progress, given->progress_user, 0, 0};
    pk_context sub = *given;
    if (given->progress) {
        sub.progress = batch_report;
        sub.progress_user = &bp;
    }
    uint64_t done_rows = 0;
    for (uint32_t g0 = 0; g0 < result->n_instances && st == PK_OK;) {
        uint32_t g1 = g0, n_fills = 0;
        uint64_t rows = 0;
        for (; g1 < result->n_instances; g1++) {
            const pk_memsort_instance *in = &result->instances[g1];
            if (!in->owned) continue;
            if (n_fills && (n_fills == max_fills || rows + in->n_rows > max_rows)) break;
            n_fills++;
            rows += in->n_rows;
        }
        bp.base = result->n_values ? (double)done_rows / (double)result->n_values : 0;
        bp.span = result->n_values ? (double)rows / (double)result->n_values : 1;
        if (n_fills) st = check_batch(&sub, result, chunks, n_chunks, g0, g1, n_fills, rows);
        if (st) pk_fail(ctx, st, "%s", sub.message);
        done_rows += rows;
        g0 = g1;
    }
    free(chunks);
    return st;
}
