/* fuzz_trace.c - the trace chunk reader (pk_memsort_trace_read) on chunk
 * files cut from arbitrary bytes.
 *
 * Input layout: one flags byte, then chunks, each a little-endian u16
 * length and that many bytes (the last one takes what is left, so lengths
 * that are not multiples of 4 reach the reader). Flags: bits 0-1 the table
 * (0, 3: the small table of fuzz_memsort.h; 1: default; 2: zisk), bits 2-3
 * the worker count - 1, bit 4 leaves a gap in the file numbering, bit 5
 * adds a stray mem_addr_4096.bin, bit 6 adds files the reader must ignore.
 *
 * Invariants: a failure leaves an empty trace and a message naming the
 * folder; an accepted trace has every entry aligned and in a region, and
 * (small table) the reference and CPU kernels agree on it.
 */
#include "fuzz_memsort.h"

#define FUZZ_MAX_CHUNKS 16

static char trace_dir[400];

static void clear_dir(void) {
    char name[512];
    for (int c = 0; c <= FUZZ_MAX_CHUNKS + 1; c++) {
        snprintf(name, sizeof name, "%s/mem_addr_%04d.bin", trace_dir, c);
        unlink(name);
    }
    snprintf(name, sizeof name, "%s/mem_addr_4096.bin", trace_dir);
    unlink(name);
    const char *others[3] = {"mem_addr_x.bin", "mem_addr_0001.txt", "notes.bin"};
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s/%s", trace_dir, others[k]);
        unlink(name);
    }
}

static void put_file(const char *name, const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", trace_dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0) {
        perror(path);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!trace_dir[0]) {
        snprintf(trace_dir, sizeof trace_dir, "%s", fuzz_path("trace"));
        if (mkdir(trace_dir, 0700) != 0) {
            perror(trace_dir);
            abort();
        }
    }
    clear_dir();
    if (size < 1) return 0;
    uint8_t flags = data[0];
    size_t pos = 1;
    int n_files = 0;
    while (pos < size && n_files < FUZZ_MAX_CHUNKS) {
        size_t len = size - pos;
        if (len >= 2 && n_files + 1 < FUZZ_MAX_CHUNKS) {
            len = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
            pos += 2;
            if (len > size - pos) len = size - pos;
        }
        int index = (flags & 0x10) && n_files >= 1 ? n_files + 1 : n_files;
        char name[32];
        snprintf(name, sizeof name, "mem_addr_%04d.bin", index);
        put_file(name, data + pos, len);
        pos += len;
        n_files++;
    }
    if (flags & 0x20) put_file("mem_addr_4096.bin", data, 0);
    if (flags & 0x40) {
        put_file("mem_addr_x.bin", data, size);
        put_file("mem_addr_0001.txt", data, size);
        put_file("notes.bin", data, size);
    }

    pk_memsort_regions regions;
    pk_context ctx;
    pk_context_init(&ctx);
    int table = flags & 3;
    if (table == 1 || table == 2) {
        pk_status st = pk_memsort_regions_preset(&ctx, table == 1 ? "default" : "zisk", &regions);
        FUZZ_REQUIRE(st == PK_OK, "preset: %s", ctx.message);
    } else {
        fuzz_small_regions(&regions);
    }
    pk_memsort_trace trace;
    pk_status st = pk_memsort_trace_read(&ctx, trace_dir, &regions, &trace);
    if (st != PK_OK) {
        FUZZ_REQUIRE(!trace.addr && !trace.chunk_start && trace.n_entries == 0, "failed read left a trace");
        FUZZ_REQUIRE(strstr(ctx.message, trace_dir) != NULL, "message does not name the folder: %s", ctx.message);
        return 0;
    }
    FUZZ_REQUIRE(trace.n_chunks >= 1 && trace.chunk_start[trace.n_chunks] == trace.n_entries, "chunk table");
    st = pk_memsort_trace_check(&ctx, &regions, &trace);
    FUZZ_REQUIRE(st == PK_OK, "accepted trace fails the check: %s", ctx.message);
    uint32_t n_workers = 1 + ((flags >> 2) & 3);
    for (uint32_t w = 0; w < n_workers; w++) fuzz_sort_both(&regions, &trace, n_workers, w);
    pk_memsort_trace_free(&trace);
    return 0;
}
