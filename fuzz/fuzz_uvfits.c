/* fuzz_uvfits.c - the UVFITS visibility reader (pk_vis_read_uvfits:
 * cfitsio, then the random-groups layout decoded by pairkit) on arbitrary
 * bytes. The weights mode comes from the input's length, so the seeds stay
 * real files. */
#include "fuzz_vis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("vis.uvfits", data, size);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    pk_status st = pk_vis_read_uvfits(&ctx, path, (pk_weights)(size % 3), &vis);
    fuzz_vis_check(st, &ctx, path, &vis);
    pk_vis_free(&vis);
    return 0;
}
