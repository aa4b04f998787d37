/* cpu.c - the CPU backend of memsort: a stable counting sort by compact
 * address with one cursor table per thread, then the plan read off the
 * offsets and the sorted positions.
 *
 * Thread t takes the trace positions [n t / T, n (t + 1) / T). Pass 1
 * counts its addresses into its own histogram; pass 2 turns the T
 * histograms into cursors, so that thread t's first row of address a
 * lands after all rows of a from threads before it; pass 3 writes each
 * position to its cursor. Positions of one address therefore come out in
 * trace order: the sort is stable without comparing anything. The
 * histograms are calloc'ed, so address pages a thread never touches cost
 * no memory.
 *
 * Invariant: result->values holds every row in global sorted order (the
 * regions one after another) and an instance's values_offset is its global
 * position; the reference packs owned instances instead, and
 * pk_memsort_compare compares contents, not offsets.
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "memsort_internal.h"

/* Entries between progress reports and cancellation checks: about 1 ms of
 * work on one core. */
#define PROGRESS_STEP (1u << 20)

typedef struct cpu_job {
    const pk_memsort_layout *layout;
    const pk_memsort_trace *trace;
    int n_threads;
    uint32_t **hist; /* [n_threads][n_compact + 1] counts, then cursors */
    uint32_t *offset; /* [n_compact + 1] first sorted position of each address */
    uint32_t *sorted; /* [n] positions in stable address order */
} cpu_job;

static uint64_t part_begin(uint64_t n, int t, int n_threads) {
    return n * (uint64_t)t / (uint64_t)n_threads;
}

/* Largest a with offset[a] <= pos: the address of sorted row pos. */
static uint32_t address_at(const uint32_t *offset, uint32_t n_compact, uint64_t pos) {
    uint32_t lo = 0, hi = n_compact; /* offset[lo] <= pos < offset[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (offset[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
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

static pk_status count_pass(pk_context *ctx, cpu_job *job, uint64_t *region_entries, pk_progress *progress) {
    const pk_memsort_layout *l = job->layout;
    const uint32_t *addr = job->trace->addr;
    uint64_t n = job->trace->n_entries;
    int bad = 0, cancelled = 0;
#pragma omp parallel num_threads(job->n_threads) reduction(| : bad, cancelled)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        uint32_t *h = job->hist[t];
        uint64_t local[PK_MEMSORT_MAX_REGIONS] = {0};
        uint64_t b = part_begin(n, t, job->n_threads), e = part_begin(n, t + 1, job->n_threads);
        int r = 0;
        for (uint64_t i0 = b; i0 < e && !bad && !cancelled; i0 += PROGRESS_STEP) {
            uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
            for (uint64_t i = i0; i < i1; i++) {
                uint32_t raw = addr[i];
                if (raw < l->base[r] || raw >= l->end[r]) { /* most neighbours share a region */
                    r = pk_memsort_region_of(l, raw);
                    if (r < 0) {
                        bad = 1;
                        r = 0;
                        break;
                    }
                }
                if (raw & 7) {
                    bad = 1;
                    break;
                }
                h[pk_memsort_compact(l, r, raw)]++;
                local[r]++;
            }
            if (pk_progress_add(progress, 0.3 * (double)(i1 - i0), t == 0)) cancelled = 1;
        }
#pragma omp critical
        for (uint32_t k = 0; k < l->n_regions; k++) region_entries[k] += local[k];
    }
    if (cancelled) return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    if (bad) return PK_ERR_PARSE;
    return PK_OK;
}

/* Offsets of every address and per-thread cursors, over blocks of the
 * compact space in parallel. */
static void cursor_pass(cpu_job *job) {
    uint32_t n_compact = job->layout->n_compact;
    int n_threads = job->n_threads;
    enum { BLOCKS = 256 };
    uint64_t block_total[BLOCKS + 1];
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int blk = 0; blk < BLOCKS; blk++) {
        uint32_t a0 = (uint32_t)((uint64_t)n_compact * blk / BLOCKS), a1 = (uint32_t)((uint64_t)n_compact * (blk + 1) / BLOCKS);
        uint64_t sum = 0;
        for (int t = 0; t < n_threads; t++) {
            const uint32_t *h = job->hist[t];
            for (uint32_t a = a0; a < a1; a++) sum += h[a];
        }
        block_total[blk] = sum;
    }
    uint64_t run = 0;
    for (int blk = 0; blk < BLOCKS; blk++) {
        uint64_t s = block_total[blk];
        block_total[blk] = run;
        run += s;
    }
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int blk = 0; blk < BLOCKS; blk++) {
        uint32_t a0 = (uint32_t)((uint64_t)n_compact * blk / BLOCKS), a1 = (uint32_t)((uint64_t)n_compact * (blk + 1) / BLOCKS);
        uint32_t pos = (uint32_t)block_total[blk];
        for (uint32_t a = a0; a < a1; a++) {
            job->offset[a] = pos;
            for (int t = 0; t < n_threads; t++) {
                uint32_t h = job->hist[t][a];
                if (h) {
                    job->hist[t][a] = pos;
                    pos += h;
                }
            }
        }
    }
    job->offset[n_compact] = (uint32_t)run;
}

pk_status pk_memsort_run_cpu(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    const uint64_t n = trace->n_entries;
    const uint32_t n_chunks = trace->n_chunks;
    int n_threads = ctx && ctx->n_threads > 0 ? ctx->n_threads : 1;
#ifdef _OPENMP
    if (!(ctx && ctx->n_threads > 0)) n_threads = omp_get_max_threads();
#endif
    if ((uint64_t)n_threads > n / 4096 + 1) n_threads = (int)(n / 4096 + 1); /* tiny traces: one thread */
    cpu_job job = {&layout, trace, n_threads, NULL, NULL, NULL};
    uint32_t *owned_index = NULL, *thread_counts = NULL;
    pk_status st = PK_OK;
    job.hist = calloc((size_t)n_threads, sizeof(uint32_t *));
    job.offset = malloc(((size_t)layout.n_compact + 1) * sizeof(uint32_t));
    if (!job.hist || !job.offset) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the address offsets");
        goto done;
    }
    for (int t = 0; t < n_threads; t++) {
        job.hist[t] = calloc((size_t)layout.n_compact + 1, sizeof(uint32_t));
        if (!job.hist[t]) {
            st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %d address histograms", n_threads);
            goto done;
        }
    }
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0};
    st = count_pass(ctx, &job, region_entries, progress);
    if (st == PK_ERR_PARSE) {
        st = pk_memsort_trace_check(ctx, regions, trace);
        if (st == PK_OK) st = pk_fail(ctx, PK_ERR_INTERNAL, "the count pass found a bad entry the check did not");
    }
    if (st) goto done;
    if ((st = pk_memsort_instances_build(ctx, &layout, regions, trace, region_entries, n_workers, worker, result)))
        goto done;
    cursor_pass(&job);
    if ((st = pk_memsort_result_reserve(ctx, result, 0, n, (uint64_t)result->n_owned * n_chunks, 0))) goto done;
    job.sorted = result->values;
    result->n_values = 0;

    /* Owned instances get a slot in the per-thread chunk counts. */
    uint32_t n_inst = result->n_instances;
    uint32_t inst_base[PK_MEMSORT_MAX_REGIONS + 1];
    uint64_t region_start[PK_MEMSORT_MAX_REGIONS];
    {
        uint32_t g = 0;
        uint64_t pos = 0;
        for (uint32_t r = 0; r < layout.n_regions; r++) {
            inst_base[r] = g;
            region_start[r] = pos;
            g += (uint32_t)((region_entries[r] + layout.instance_entries[r] - 1) / layout.instance_entries[r]);
            pos += region_entries[r];
        }
        inst_base[layout.n_regions] = g;
    }
    owned_index = malloc(((size_t)n_inst + 1) * sizeof(uint32_t));
    thread_counts = calloc((size_t)n_threads * result->n_owned * n_chunks + 1, sizeof(uint32_t));
    if (!owned_index || !thread_counts) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the chunk counts");
        goto done;
    }
    {
        uint32_t k = 0;
        for (uint32_t g = 0; g < n_inst; g++) owned_index[g] = result->instances[g].owned ? k++ : UINT32_MAX;
    }

    /* Pass 3: every position to its cursor; rows per (owned instance, chunk). */
    int cancelled = 0;
    const uint32_t *addr = trace->addr;
    uint32_t *sorted = job.sorted;
    const uint64_t counts_per_thread = (uint64_t)result->n_owned * n_chunks;
#pragma omp parallel num_threads(n_threads) reduction(| : cancelled)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        uint32_t *cur = job.hist[t];
        uint32_t *counts = thread_counts + (uint64_t)t * counts_per_thread;
        uint64_t b = part_begin(n, t, n_threads), e = part_begin(n, t + 1, n_threads);
        uint32_t chunk = b < n ? pk_memsort_chunk_of(trace, b) : 0;
        uint64_t chunk_end = trace->chunk_start[chunk + 1];
        int r = 0;
        for (uint64_t i0 = b; i0 < e && !cancelled; i0 += PROGRESS_STEP) {
            uint64_t i1 = i0 + PROGRESS_STEP < e ? i0 + PROGRESS_STEP : e;
            for (uint64_t i = i0; i < i1; i++) {
                while (i >= chunk_end) chunk_end = trace->chunk_start[++chunk + 1];
                uint32_t raw = addr[i];
                if (raw < layout.base[r] || raw >= layout.end[r]) r = pk_memsort_region_of(&layout, raw);
                uint32_t d = cur[pk_memsort_compact(&layout, r, raw)]++;
                sorted[d] = (uint32_t)i;
                uint32_t g = inst_base[r] + (uint32_t)((d - region_start[r]) / layout.instance_entries[r]);
                uint32_t o = owned_index[g];
                if (o != UINT32_MAX) counts[(uint64_t)o * n_chunks + chunk]++;
            }
            if (pk_progress_add(progress, 0.6 * (double)(i1 - i0), t == 0)) cancelled = 1;
        }
    }
    if (cancelled) {
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
        goto done;
    }
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t k = 0; k < (int64_t)counts_per_thread; k++) {
        uint32_t sum = 0;
        for (int t = 0; t < n_threads; t++) sum += thread_counts[(uint64_t)t * counts_per_thread + (uint64_t)k];
        result->chunk_counts[k] = sum;
    }

    /* The plan of every instance; runs counted for the owned ones. */
    const uint32_t *offset = job.offset;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        uint64_t s = region_start[in->region] + in->first_row, e = s + in->n_rows;
        uint32_t fc = address_at(offset, layout.n_compact, s), lc = address_at(offset, layout.n_compact, e - 1);
        uint64_t base = layout.base[in->region], cb = layout.compact_base[in->region];
        in->first_addr = (uint32_t)(base + 8 * (fc - cb));
        in->last_addr = (uint32_t)(base + 8 * (lc - cb));
        in->first_chunk = pk_memsort_chunk_of(trace, sorted[s]);
        in->first_skip_total = (uint32_t)(s - offset[fc]);
        in->first_skip = (uint32_t)(s - lower_bound_values(sorted, offset[fc], s, trace->chunk_start[in->first_chunk]));
        uint64_t last_from = offset[lc] > s ? offset[lc] : s;
        in->last_chunk = pk_memsort_chunk_of(trace, sorted[e - 1]);
        in->last_include_total = (uint32_t)(e - last_from);
        in->last_include = (uint32_t)(e - lower_bound_values(sorted, last_from, e, trace->chunk_start[in->last_chunk]));
        in->has_prev = in->index > 0;
        if (in->has_prev) {
            in->prev_value = sorted[s - 1];
            in->prev_addr = pk_memsort_raw(&layout, address_at(offset, layout.n_compact, s - 1));
        }
        if (!in->owned) continue;
        uint32_t runs = 0;
        for (uint32_t a = fc; a <= lc; a++) runs += offset[a + 1] > offset[a];
        in->n_runs = runs;
        in->values_offset = s;
        in->counts_offset = (uint64_t)owned_index[gi] * n_chunks;
    }
    uint64_t n_runs = 0;
    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        if (!in->owned) continue;
        in->runs_offset = n_runs;
        n_runs += in->n_runs;
        result->n_values += in->n_rows;
    }
    if ((st = pk_memsort_result_reserve(ctx, result, n_runs, n, (uint64_t)result->n_owned * n_chunks, 0))) goto done;
    result->n_runs = n_runs;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t gi = 0; gi < (int64_t)n_inst; gi++) {
        pk_memsort_instance *in = &result->instances[gi];
        if (!in->owned) continue;
        uint64_t s = region_start[in->region] + in->first_row, e = s + in->n_rows;
        uint32_t fc = address_at(offset, layout.n_compact, s), lc = address_at(offset, layout.n_compact, e - 1);
        uint64_t base = layout.base[in->region], cb = layout.compact_base[in->region];
        pk_memsort_run_entry *run = result->runs + in->runs_offset;
        for (uint32_t a = fc; a <= lc; a++) {
            uint64_t lo = offset[a] > s ? offset[a] : s, hi = offset[a + 1] < e ? offset[a + 1] : e;
            if (hi > lo) {
                run->addr = (uint32_t)(base + 8 * (a - cb));
                run->count = (uint32_t)(hi - lo);
                run++;
            }
        }
    }
    {
        uint64_t bytes = ((uint64_t)layout.n_compact + 1) * 4 * (uint64_t)(n_threads + 1) +
                         (uint64_t)n_threads * counts_per_thread * 4;
        result->stats.host_bytes += bytes;
    }
done:
    if (job.hist)
        for (int t = 0; t < n_threads; t++) free(job.hist[t]);
    free(job.hist);
    free(job.offset);
    free(owned_index);
    free(thread_counts);
    return st;
}
