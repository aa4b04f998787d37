/* ref.c - the reference of memsort, and the specification every backend is
 * tested against: one stable sort of (compact address, trace position)
 * over the whole trace, then every field of every instance read off the
 * sorted rows by plain loops, exactly as docs/memsort.md defines it.
 * Kept simple and never optimised.
 */
#include <stdlib.h>
#include <string.h>

#include "memsort_internal.h"

/* Bottom-up merge sort of 64-bit keys (compact << 32 | position). The
 * positions make the keys distinct, so ordering them is the stable sort
 * by address. Half the run's progress, reported every 2^22 keys merged or
 * so (tens of ms), also inside the last passes' long merges, so that a
 * cancellation is seen soon; NULL when cancelled. */
/* The keys merged since the last report, reported once they reach a step:
 * 1 when the callback asks to stop. */
static int report_merged(pk_progress *progress, uint64_t *pending, uint64_t step, int passes) {
    if (*pending < step) return 0;
    int stop = pk_progress_add(progress, 0.5 * (double)*pending / passes, 1);
    *pending = 0;
    return stop;
}

static uint64_t *merge_sort(uint64_t *a, uint64_t *tmp, uint64_t n, pk_progress *progress) {
    const uint64_t step = (uint64_t)1 << 22;
    uint64_t *src = a, *dst = tmp, pending = 0; /* keys merged, not yet reported */
    int passes = 0;
    for (uint64_t width = 1; width < n; width *= 2) passes++;
    if (passes == 0 && pk_progress_add(progress, 0.5 * (double)n, 1)) return NULL;
    for (uint64_t width = 1; width < n; width *= 2) {
        for (uint64_t lo = 0; lo < n; lo += 2 * width) {
            uint64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint64_t i = lo, j = mid, k = lo;
            if (hi - lo <= step) { /* a short merge, as it is */
                while (i < mid && j < hi) dst[k++] = src[i] <= src[j] ? src[i++] : src[j++];
                while (i < mid) dst[k++] = src[i++];
                while (j < hi) dst[k++] = src[j++];
                pending += hi - lo;
            } else { /* a long one in stretches of at most step keys from either side */
                while (i < mid || j < hi) {
                    uint64_t i_end = mid - i > step ? i + step : mid, j_end = hi - j > step ? j + step : hi, k0 = k;
                    if (i < mid && j < hi)
                        while (i < i_end && j < j_end) dst[k++] = src[i] <= src[j] ? src[i++] : src[j++];
                    else if (i < mid)
                        while (i < i_end) dst[k++] = src[i++];
                    else
                        while (j < j_end) dst[k++] = src[j++];
                    pending += k - k0;
                    if (report_merged(progress, &pending, step, passes)) return NULL;
                }
            }
            if (report_merged(progress, &pending, step, passes)) return NULL;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (pending && report_merged(progress, &pending, 1, passes)) return NULL;
    return src;
}

pk_status pk_memsort_run_ref(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    uint64_t n = trace->n_entries;
    uint64_t *keys = malloc((n + 1) * sizeof(uint64_t)), *tmp = malloc((n + 1) * sizeof(uint64_t));
    if (!keys || !tmp) {
        free(keys);
        free(tmp);
        return pk_fail(ctx, PK_ERR_NOMEM, "reference: out of memory for %llu keys", (unsigned long long)n);
    }
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0};
    for (uint64_t i = 0; i < n; i++) {
        int r = pk_memsort_region_of(&layout, trace->addr[i]);
        region_entries[r]++;
        keys[i] = ((uint64_t)pk_memsort_compact(&layout, r, trace->addr[i]) << 32) | i;
    }
    uint64_t *sorted = merge_sort(keys, tmp, n, progress);
    if (!sorted) {
        free(keys);
        free(tmp);
        return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    pk_status st = pk_memsort_instances_build(ctx, &layout, regions, trace, region_entries, n_workers, worker, result);
    if (st) goto done;

    /* sizes of the owned instances' runs and values */
    uint64_t n_runs = 0, n_values = 0, region_start[PK_MEMSORT_MAX_REGIONS];
    uint64_t start = 0;
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        region_start[r] = start;
        start += region_entries[r];
    }
    for (uint32_t g = 0; g < result->n_instances; g++) {
        pk_memsort_instance *in = &result->instances[g];
        if (!in->owned) continue;
        uint64_t s = region_start[in->region] + in->first_row;
        for (uint64_t j = s; j < s + in->n_rows; j++)
            if (j == s || (sorted[j] >> 32) != (sorted[j - 1] >> 32)) n_runs++;
        n_values += in->n_rows;
    }
    if ((st = pk_memsort_result_reserve(ctx, result, n_runs, n_values, (uint64_t)result->n_owned * trace->n_chunks, 0)))
        goto done;
    memset(result->chunk_counts, 0, (size_t)result->n_owned * trace->n_chunks * sizeof(uint32_t));
    result->n_runs = n_runs;
    result->n_values = n_values;

    uint64_t run_at = 0, value_at = 0, owned_at = 0;
    for (uint32_t g = 0; g < result->n_instances; g++) {
        pk_memsort_instance *in = &result->instances[g];
        uint64_t rs = region_start[in->region];
        uint64_t s = rs + in->first_row, e = s + in->n_rows;
        uint64_t first = sorted[s] >> 32, last = sorted[e - 1] >> 32;
        in->first_addr = pk_memsort_raw(&layout, (uint32_t)first);
        in->last_addr = pk_memsort_raw(&layout, (uint32_t)last);
        in->first_chunk = pk_memsort_chunk_of(trace, (uint32_t)sorted[s]);
        in->last_chunk = pk_memsort_chunk_of(trace, (uint32_t)sorted[e - 1]);
        in->first_skip = in->first_skip_total = 0;
        for (uint64_t j = s; j > rs && (sorted[j - 1] >> 32) == first; j--) {
            in->first_skip_total++;
            if (pk_memsort_chunk_of(trace, (uint32_t)sorted[j - 1]) == in->first_chunk) in->first_skip++;
        }
        in->last_include = in->last_include_total = 0;
        for (uint64_t j = s; j < e; j++) {
            if ((sorted[j] >> 32) != last) continue;
            in->last_include_total++;
            if (pk_memsort_chunk_of(trace, (uint32_t)sorted[j]) == in->last_chunk) in->last_include++;
        }
        in->has_prev = in->index > 0;
        in->prev_addr = in->has_prev ? pk_memsort_raw(&layout, (uint32_t)(sorted[s - 1] >> 32)) : 0;
        in->prev_value = in->has_prev ? (uint32_t)sorted[s - 1] : 0;
        if (!in->owned) continue;
        in->runs_offset = run_at;
        in->values_offset = value_at;
        in->counts_offset = owned_at * trace->n_chunks;
        in->n_runs = 0;
        for (uint64_t j = s; j < e; j++) {
            uint32_t value = (uint32_t)sorted[j];
            result->values[value_at++] = value;
            result->chunk_counts[in->counts_offset + pk_memsort_chunk_of(trace, value)]++;
            if (j == s || (sorted[j] >> 32) != (sorted[j - 1] >> 32)) {
                result->runs[run_at].addr = pk_memsort_raw(&layout, (uint32_t)(sorted[j] >> 32));
                result->runs[run_at].count = 0;
                run_at++;
                in->n_runs++;
            }
            result->runs[run_at - 1].count++;
        }
        owned_at++;
    }
    if (pk_progress_add(progress, 0.5 * (double)n, 1)) st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
done:
    free(keys);
    free(tmp);
    return st;
}
