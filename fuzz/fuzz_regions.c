/* fuzz_regions.c - the region-table file parser (pk_memsort_regions_read)
 * on arbitrary bytes.
 *
 * Invariants: a failure has a message naming the file; an accepted table
 * passes pk_memsort_regions_check. A small accepted table then drives the
 * trace generator (realistic or awkward, from the input's length) and a
 * plan and fill by the reference and the CPU kernel, which must agree: the
 * table is the one input that shapes every loop of the workload.
 */
#include "fuzz_memsort.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("regions.txt", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions regions;
    pk_status st = pk_memsort_regions_read(&ctx, path, &regions);
    if (st != PK_OK) {
        FUZZ_REQUIRE(strstr(ctx.message, path) != NULL, "message does not name the file: %s", ctx.message);
        return 0;
    }
    st = pk_memsort_regions_check(&ctx, &regions);
    FUZZ_REQUIRE(st == PK_OK, "accepted table fails the check: %s", ctx.message);
    if (pk_memsort_regions_compact_size(&regions) > FUZZ_SORT_MAX_COMPACT) return 0;
    pk_memsort_gen_options gen = {200 + size % 64, size, 64, (int)(size % 2)};
    pk_memsort_trace trace;
    st = pk_memsort_generate(&ctx, &regions, &gen, &trace);
    if (st != PK_OK) {
        FUZZ_REQUIRE(ctx.message[0] != '\0', "generator failed without a message");
        return 0;
    }
    st = pk_memsort_trace_check(&ctx, &regions, &trace);
    FUZZ_REQUIRE(st == PK_OK, "generated trace fails the check: %s", ctx.message);
    fuzz_sort_both(&regions, &trace, 1, 0);
    fuzz_sort_both(&regions, &trace, 3, 1);
    pk_memsort_trace_free(&trace);
    return 0;
}
