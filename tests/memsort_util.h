/* memsort_util.h - what the memsort tests share: a small region table whose
 * instances are a few rows long (so every awkward case fits in a small
 * trace), and a check of one kernel against the reference for every worker
 * of W. */
#ifndef PAIRKIT_MEMSORT_UTIL_H
#define PAIRKIT_MEMSORT_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "memsort/memsort_internal.h"
#include "pairkit/memsort.h"

/* ROM of 256 words in instances of 16, INPUT of 64 words in instances of 8
 * (left empty by the awkward generator), RAM of 4096 words in instances of
 * 32. */
static inline pk_memsort_regions test_regions_small(void) {
    pk_memsort_regions t;
    memset(&t, 0, sizeof t);
    t.n_regions = 3;
    strcpy(t.region[0].name, "ROM");
    t.region[0].base = 0x1000;
    t.region[0].size = 8 * 256;
    t.region[0].max_instances = 4096;
    t.region[0].instance_entries = 16;
    strcpy(t.region[1].name, "INPUT");
    t.region[1].base = 0x10000;
    t.region[1].size = 8 * 64;
    t.region[1].max_instances = 64;
    t.region[1].instance_entries = 8;
    strcpy(t.region[2].name, "RAM");
    t.region[2].base = 0x100000;
    t.region[2].size = 8 * 4096;
    t.region[2].max_instances = 8192;
    t.region[2].instance_entries = 32;
    return t;
}

/* Threads for the kernel under test (0: OpenMP's default); the tests run
 * the small cases again with more threads than cores, so that pages and
 * instance boundaries shared by several threads' histograms are covered. */
static int test_memsort_threads = 0;

/* The trace's chunks as pk_memsort_fill_from_chunks takes them: all, or
 * (odd) those of odd index. Returns how many. */
static inline uint32_t test_trace_chunks(const pk_memsort_trace *trace, int odd, pk_memsort_chunk *out) {
    uint32_t k = 0;
    for (uint32_t c = 0; c < trace->n_chunks; c++) {
        if (odd && c % 2 == 0) continue;
        uint64_t s = trace->chunk_start[c], e = trace->chunk_start[c + 1];
        out[k++] = (pk_memsort_chunk){c, s, trace->addr + s, e - s};
    }
    return k;
}

/* Every owned instance of `got` filled again from the trace's chunk files
 * by its plan alone (pk_memsort_fill_from_chunks): from all chunks, the
 * instance's rows and chunk counts; from the odd chunks alone, the rows
 * whose value lies in an odd chunk, in the same order. Returns the number
 * of failed comparisons. */
static inline int test_fill_from_plan(const char *what, const pk_memsort_trace *trace, const pk_memsort_result *got) {
    int failures = 0;
    pk_context ctx;
    pk_context_init(&ctx);
    uint32_t n_owned = 0;
    uint64_t rows = 0;
    for (uint32_t g = 0; g < got->n_instances; g++)
        if (got->instances[g].owned) {
            n_owned++;
            rows += got->instances[g].n_rows;
        }
    uint32_t n_chunks = trace->n_chunks;
    pk_memsort_chunk *chunks = malloc((n_chunks + 1) * sizeof *chunks);
    pk_memsort_fill *fills = calloc(n_owned + 1, sizeof *fills);
    uint32_t *pairs = malloc((2 * rows + 2) * sizeof *pairs), *want = malloc((2 * rows + 2) * sizeof *want);
    uint32_t *chunk_rows = malloc(((uint64_t)n_owned * n_chunks + 1) * sizeof *chunk_rows);
    CHECK(chunks && fills && pairs && want && chunk_rows, "%s: fill from plan: out of memory", what);
    if (!chunks || !fills || !pairs || !want || !chunk_rows) failures++;
    /* all chunks, then the odd-numbered ones; each scanned 16 entries at
     * a time where the CPU can, then one at a time */
    for (int pass = 0; pass < 4 && !failures; pass++) {
        int odd = pass % 2;
        pk_memsort_fill_scalar = pass / 2;
        const char *which = odd ? (pass / 2 ? "odd, scalar scan" : "odd") : (pass / 2 ? "all, scalar scan" : "all");
        uint32_t k = test_trace_chunks(trace, odd, chunks);
        uint64_t at = 0;
        uint32_t f = 0;
        for (uint32_t g = 0; g < got->n_instances; g++) {
            const pk_memsort_instance *in = &got->instances[g];
            if (!in->owned) continue;
            fills[f] = (pk_memsort_fill){in, pairs + 2 * at, in->n_rows, 0, chunk_rows + (uint64_t)f * n_chunks};
            at += in->n_rows;
            f++;
        }
        pk_status st = pk_memsort_fill_from_chunks(&ctx, chunks, k, fills, n_owned);
        CHECK(st == PK_OK, "%s: fill from plan (%s chunks): %s", what, which, ctx.message);
        if (st) {
            failures++;
            break;
        }
        for (f = 0; f < n_owned && !failures; f++) {
            const pk_memsort_instance *in = fills[f].plan;
            pk_memsort_instance_rows(got, in, want);
            /* the rows expected from the chunks given, and each chunk's count */
            uint64_t n_want = 0, bad_chunk = UINT64_MAX;
            for (uint32_t j = 0; j < in->n_rows; j++) {
                uint64_t pos = want[2 * j + 1];
                uint32_t lo = 0, hi = trace->n_chunks; /* the chunk: the last starting at or before pos */
                while (hi - lo > 1) {
                    uint32_t mid = lo + (hi - lo) / 2;
                    if (trace->chunk_start[mid] <= pos) lo = mid;
                    else hi = mid;
                }
                uint32_t c = lo;
                if (odd && c % 2 == 0) continue;
                want[2 * n_want] = want[2 * j];
                want[2 * n_want + 1] = want[2 * j + 1];
                n_want++;
            }
            for (uint32_t i = 0; i < k && bad_chunk == UINT64_MAX; i++)
                if (fills[f].chunk_rows[i] != got->chunk_counts[in->counts_offset + chunks[i].index]) bad_chunk = i;
            int ok = fills[f].n_rows == n_want && bad_chunk == UINT64_MAX &&
                     memcmp(fills[f].pairs, want, 2 * n_want * sizeof(uint32_t)) == 0;
            CHECK(ok, "%s: instance %u filled from its plan (%s chunks): %llu rows, %llu expected%s", what, in->gid,
                  which, (unsigned long long)fills[f].n_rows, (unsigned long long)n_want,
                  bad_chunk != UINT64_MAX ? ", a chunk's count differs" : "");
            failures += !ok;
        }
    }
    pk_memsort_fill_scalar = 0;
    free(chunks);
    free(fills);
    free(pairs);
    free(want);
    free(chunk_rows);
    return failures;
}

/* Every worker of W with `kernel` against the reference; returns the
 * number of failed comparisons. Also checks that the workers' owned
 * instances partition all instances. */
static inline int test_kernel_against_ref(const char *what, int kernel, const pk_memsort_regions *regions,
                                          const pk_memsort_trace *trace, uint32_t n_workers) {
    pk_context ctx;
    pk_context_init(&ctx);
    ctx.n_threads = test_memsort_threads;
    int failures = 0;
    uint32_t owned_total = 0, n_instances = 0;
    pk_memsort_result ref, got;
    pk_memsort_result_init(&ref);
    pk_memsort_result_init(&got);
    for (uint32_t w = 0; w < n_workers; w++) {
        pk_memsort_options o_ref = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, n_workers, w};
        pk_memsort_options o_got = {PK_BACKEND_AUTO, kernel, n_workers, w};
        pk_status st = pk_memsort_run(&ctx, &o_ref, regions, trace, &ref);
        CHECK_OK(st, &ctx);
        if (st) return 1;
        st = pk_memsort_run(&ctx, &o_got, regions, trace, &got);
        CHECK(st == PK_OK, "%s: worker %u of %u: %s", what, w, n_workers, ctx.message);
        if (st) {
            failures++;
            continue;
        }
        st = pk_memsort_compare(&ctx, &ref, &got);
        CHECK(st == PK_OK, "%s: worker %u of %u: %s", what, w, n_workers, ctx.message);
        failures += st != PK_OK;
        if (st == PK_OK) failures += test_fill_from_plan(what, trace, &got);
        /* rows this worker's run did not have to write hold garbage for the
         * next worker's run, so that one reading them is caught */
        if (got.values) memset(got.values, 0xa5, got.cap_values * sizeof(uint32_t));
        owned_total += got.n_owned;
        n_instances = got.n_instances;
    }
    CHECK(owned_total == n_instances, "%s: workers own %u of %u instances", what, owned_total, n_instances);
    pk_memsort_result_free(&ref);
    pk_memsort_result_free(&got);
    return failures;
}

#endif
