/* fuzz_memsort.h - what the memsort targets share: a small region table
 * (so that a whole plan and fill costs microseconds), and the check run on
 * every trace a reader accepts: the reference and the CPU kernel must give
 * identical results for every worker count the input picks. */
#ifndef PAIRKIT_FUZZ_MEMSORT_H
#define PAIRKIT_FUZZ_MEMSORT_H

#include "fuzz.h"
#include "pairkit/memsort.h"

/* Tables with at most this many compact addresses are sorted after a
 * read; larger ones (the presets: 96M) only parsed. */
#define FUZZ_SORT_MAX_COMPACT (1u << 16)

/* ROM, INPUT and RAM at the default bases, a few small instances each. */
static inline void fuzz_small_regions(pk_memsort_regions *t) {
    memset(t, 0, sizeof *t);
    t->n_regions = 3;
    const char *names[3] = {"ROM", "INPUT", "RAM"};
    const uint32_t base[3] = {0x80000000u, 0x90000000u, 0xA0000000u};
    const uint64_t size[3] = {64 * 8, 256 * 8, 4096 * 8};
    const uint32_t max_instances[3] = {4, 4, 8}, instance_entries[3] = {16, 8, 32};
    for (int r = 0; r < 3; r++) {
        snprintf(t->region[r].name, sizeof t->region[r].name, "%s", names[r]);
        t->region[r].base = base[r];
        t->region[r].size = size[r];
        t->region[r].max_instances = max_instances[r];
        t->region[r].instance_entries = instance_entries[r];
    }
}

/* Plan and fill with the reference and both CPU kernels for worker w of W;
 * both must succeed (the trace passed the reader's checks) and agree. */
static inline void fuzz_sort_both(const pk_memsort_regions *regions, const pk_memsort_trace *trace, uint32_t n_workers,
                                  uint32_t worker) {
    if (pk_memsort_regions_compact_size(regions) > FUZZ_SORT_MAX_COMPACT) return;
    pk_context ctx;
    pk_context_init(&ctx);
    ctx.n_threads = 1;
    pk_memsort_result ref, cpu;
    pk_memsort_result_init(&ref);
    pk_memsort_result_init(&cpu);
    pk_memsort_options ref_opts = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, n_workers, worker};
    pk_memsort_options cpu_opts = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, n_workers, worker};
    pk_status st = pk_memsort_run(&ctx, &ref_opts, regions, trace, &ref);
    FUZZ_REQUIRE(st == PK_OK, "reference: %s", ctx.message);
    st = pk_memsort_run(&ctx, &cpu_opts, regions, trace, &cpu);
    FUZZ_REQUIRE(st == PK_OK, "cpu: %s", ctx.message);
    st = pk_memsort_compare(&ctx, &ref, &cpu);
    FUZZ_REQUIRE(st == PK_OK, "cpu differs from the reference: %s", ctx.message);
    cpu_opts.kernel = PK_MEMSORT_KERNEL_CPU_PORTABLE; /* the same without its vector code */
    st = pk_memsort_run(&ctx, &cpu_opts, regions, trace, &cpu);
    FUZZ_REQUIRE(st == PK_OK, "cpu-portable: %s", ctx.message);
    st = pk_memsort_compare(&ctx, &ref, &cpu);
    FUZZ_REQUIRE(st == PK_OK, "cpu-portable differs from the reference: %s", ctx.message);
    uint64_t rows = 0;
    for (uint32_t r = 0; r < regions->n_regions; r++) rows += ref.region_entries[r];
    FUZZ_REQUIRE(rows == trace->n_entries, "%llu rows for %llu entries", (unsigned long long)rows,
                 (unsigned long long)trace->n_entries);
    pk_memsort_result_free(&ref);
    pk_memsort_result_free(&cpu);
}

#endif
