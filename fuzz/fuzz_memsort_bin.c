/* fuzz_memsort_bin.c - the memsort.bin reader (pk_memsort_read) on
 * arbitrary bytes (the seeds in fuzz/corpus/memsort_bin are files that
 * pairkit memsort wrote for small traces, one worker and worker 1 of 2).
 *
 * Invariants: a failure has a message naming the file and leaves the
 * result empty; a file accepted is written back (pk_memsort_write) and
 * read again to an equal result, and its plans alone read as the same.
 */
#include "fuzz.h"
#include "pairkit/memsort.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("memsort.bin", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions regions, again_regions;
    pk_memsort_result res, again;
    pk_memsort_result_init(&res);
    pk_memsort_result_init(&again);
    pk_status st = pk_memsort_read(&ctx, path, 1, &regions, &res);
    if (st != PK_OK) {
        FUZZ_REQUIRE(strstr(ctx.message, path) != NULL, "message does not name the file: %s", ctx.message);
        FUZZ_REQUIRE(res.instances == NULL && res.n_instances == 0, "a failed read left a result");
        return 0;
    }
    const char *dir = fuzz_path("written");
    FUZZ_REQUIRE(pk_memsort_write(&ctx, dir, &regions, &res) == PK_OK, "write: %s", ctx.message);
    FUZZ_REQUIRE(pk_memsort_read(&ctx, dir, 1, &again_regions, &again) == PK_OK, "read back: %s", ctx.message);
    FUZZ_REQUIRE(pk_memsort_compare(&ctx, &res, &again) == PK_OK, "read back differs: %s", ctx.message);
    FUZZ_REQUIRE(memcmp(&regions, &again_regions, sizeof regions) == 0, "region table read back differs");
    FUZZ_REQUIRE(pk_memsort_read(&ctx, path, 0, &again_regions, &again) == PK_OK, "plans alone: %s", ctx.message);
    FUZZ_REQUIRE(again.n_instances == res.n_instances && again.n_values == 0 &&
                     memcmp(again.instances, res.instances, res.n_instances * sizeof *res.instances) == 0,
                 "plans alone differ");
    pk_memsort_result_free(&res);
    pk_memsort_result_free(&again);
    return 0;
}
