/* fuzz_npz.c - the .npz visibility reader (pk_vis_read_npz: libzip, then
 * the .npy headers parsed by pairkit) on arbitrary bytes. */
#include "fuzz_vis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("vis.npz", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    pk_status st = pk_vis_read_npz(&ctx, path, &vis);
    fuzz_vis_check(st, &ctx, path, &vis);
    pk_vis_free(&vis);
    return 0;
}
