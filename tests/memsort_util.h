/* memsort_util.h - what the memsort tests share: a small region table whose
 * instances are a few rows long (so every awkward case fits in a small
 * trace), and a check of one kernel against the reference for every worker
 * of W. */
#ifndef PAIRKIT_MEMSORT_UTIL_H
#define PAIRKIT_MEMSORT_UTIL_H

#include <string.h>

#include "check.h"
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
        owned_total += got.n_owned;
        n_instances = got.n_instances;
    }
    CHECK(owned_total == n_instances, "%s: workers own %u of %u instances", what, owned_total, n_instances);
    pk_memsort_result_free(&ref);
    pk_memsort_result_free(&got);
    return failures;
}

#endif
