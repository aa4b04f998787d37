/* test_memsort_cpu.c - the CPU kernel against the reference: every awkward
 * case (a run across an instance boundary, a run longer than an instance,
 * an empty region, a partial last instance) with W = 1, 3 and 16, one
 * chunk and 4096 chunks, plus realistic traces under both presets. With
 * the argument "cuda" the same cases run on the CUDA kernel (exit 77
 * without a device). */
#include <stdio.h>
#include <stdlib.h>

#include <omp.h>

#include "common/common.h"

#include "memsort_util.h"

#ifdef __linux__
/* This process's resident memory, kB (-1 when unknown). */
static long test_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}
#endif

static int stop_at_once(void *user, double fraction) {
    (void)user, (void)fraction;
    return 1;
}

int main(int argc, char **argv) {
    int kernel = PK_MEMSORT_KERNEL_CPU;
    const char *name = "test_memsort_cpu";
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        if (pk_cuda_device_count() == 0) return check_skip("test_memsort_cuda", "no CUDA device");
        kernel = PK_MEMSORT_KERNEL_CUDA;
        name = "test_memsort_cuda";
    }
    int big = argc > 2 && strcmp(argv[2], "big") == 0;
    check_rng rng = check_rng_make(20261129);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions small = test_regions_small();

    /* awkward traces: sizes around instance multiples, chunkings from one
     * chunk to 4096 */
    const uint64_t sizes[] = {1, 2, 17, 131, 1000, 4096 * 3 + 5, 40000};
    const uint32_t workers[] = {1, 3, 16};
    /* OpenMP's threads, then 5, then (CPU) the portable kernel on 5 */
    for (int pass = 0; pass < (kernel == PK_MEMSORT_KERNEL_CPU ? 3 : 2); pass++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            test_memsort_threads = pass ? 5 : 0;
            int pass_kernel = pass == 2 ? PK_MEMSORT_KERNEL_CPU_PORTABLE : kernel;
            uint64_t n = sizes[s];
            uint64_t fewest = (n + 4095) / 4096; /* the smallest chunks that stay within 4096 files */
            uint64_t chunkings[4] = {n, fewest, 7 > fewest ? 7 : fewest, fewest + check_next(&rng) % n};
            for (int c = 0; c < 4; c++) {
                pk_memsort_gen_options g = {n, check_next(&rng), (uint32_t)chunkings[c], 1};
                pk_memsort_trace trace;
                pk_status st = pk_memsort_generate(&ctx, &small, &g, &trace);
                CHECK(st == PK_OK, "generate awkward n=%llu: %s", (unsigned long long)n, ctx.message);
                if (st) continue;
                for (size_t w = 0; w < 3; w++) {
                    char what[128];
                    snprintf(what, sizeof what, "awkward n=%llu chunks=%u W=%u %s", (unsigned long long)n,
                             trace.n_chunks, workers[w], pk_memsort_kernel_name(pass_kernel));
                    test_kernel_against_ref(what, pass_kernel, &small, &trace, workers[w]);
                }
                pk_memsort_trace_free(&trace);
            }
            test_memsort_threads = 0;
        }

    /* 4096 chunks exactly, and chunks of one entry */
    {
        pk_memsort_gen_options g = {4096 * 2, 7, 2, 1};
        pk_memsort_trace trace;
        CHECK_OK(pk_memsort_generate(&ctx, &small, &g, &trace), &ctx);
        CHECK(trace.n_chunks == 4096, "%u chunks", trace.n_chunks);
        test_kernel_against_ref("awkward 4096 chunks", kernel, &small, &trace, 3);
        pk_memsort_trace_free(&trace);
        pk_memsort_gen_options g1 = {300, 8, 1, 1};
        CHECK_OK(pk_memsort_generate(&ctx, &small, &g1, &trace), &ctx);
        test_kernel_against_ref("awkward chunks of one entry", kernel, &small, &trace, 16);
        pk_memsort_trace_free(&trace);
    }

    /* awkward traces up to a table's whole capacity: every size is
     * generated (the last region's count not a multiple of its instance
     * rows while the table has room for that), sizes near the capacity
     * run against the reference, one entry past it refused */
    {
        pk_memsort_regions tight = small;
        tight.region[0].max_instances = 8;  /* ROM: 128 entries */
        tight.region[2].max_instances = 64; /* RAM: 2048 entries */
        uint64_t cap = 128 + 2048, n_bad = 0;
        for (uint64_t n = 1; n <= cap + 1; n++) {
            pk_memsort_gen_options g = {n, n, 64, 1};
            pk_memsort_trace trace;
            pk_status st = pk_memsort_generate(&ctx, &tight, &g, &trace);
            if (n > cap) {
                CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "more than its"), "n=%llu past capacity: %d %s",
                      (unsigned long long)n, (int)st, ctx.message);
                continue;
            }
            if (st != PK_OK) {
                if (n_bad++ < 3)
                    CHECK(0, "awkward n=%llu within capacity %llu: %s", (unsigned long long)n, (unsigned long long)cap,
                          ctx.message);
                continue;
            }
            uint64_t ram = 0, rom = 0;
            for (uint64_t i = 0; i < n; i++) {
                ram += trace.addr[i] >= 0x100000;
                rom += trace.addr[i] < 0x10000;
            }
            int whole_possible = ram < 2048 || rom < 128;
            if (n > 1 && whole_possible && ram % 32 == 0 && n_bad++ < 3)
                CHECK(0, "awkward n=%llu: RAM has %llu entries, whole instances only", (unsigned long long)n,
                      (unsigned long long)ram);
            if (n + 12 > cap || n % 509 == 0) {
                char what[96];
                snprintf(what, sizeof what, "awkward n=%llu near a full table", (unsigned long long)n);
                test_kernel_against_ref(what, kernel, &tight, &trace, 3);
            }
            pk_memsort_trace_free(&trace);
        }
        CHECK(n_bad == 0, "%llu awkward sizes within capacity failed", (unsigned long long)n_bad);
    }

    /* the awkward cases are there (counted off the trace): the first
     * region's rows S - 1 and S in address order share an address (a run
     * across its first instance boundary); the middle region is empty;
     * the last region has an address on more than 2S entries (a run over
     * two whole instances), S or more of them one after another in the
     * trace (across chunks of 13), and a count that is not a multiple of S */
    {
        const uint64_t s0 = small.region[0].instance_entries, s2 = small.region[2].instance_entries;
        const uint64_t words0 = small.region[0].size / 8, words2 = small.region[2].size / 8;
        for (uint64_t n = 400; n <= 40000; n *= 10) {
            pk_memsort_gen_options g = {n, n + 1, 13, 1};
            pk_memsort_trace trace;
            CHECK_OK(pk_memsort_generate(&ctx, &small, &g, &trace), &ctx);
            uint32_t *count0 = calloc(words0, sizeof(uint32_t)), *count2 = calloc(words2, sizeof(uint32_t));
            uint64_t n1 = 0, n2 = 0, longest = 0, streak = 0, streak_addr = 0;
            for (uint64_t i = 0; count0 && count2 && i < trace.n_entries; i++) {
                uint32_t a = trace.addr[i];
                streak = i && a == streak_addr ? streak + 1 : 1;
                streak_addr = a;
                if (a - small.region[0].base < small.region[0].size) count0[(a - small.region[0].base) / 8]++;
                else if (a - small.region[1].base < small.region[1].size) n1++;
                else if (a - small.region[2].base < small.region[2].size) {
                    count2[(a - small.region[2].base) / 8]++;
                    n2++;
                    if (streak > longest) longest = streak;
                }
            }
            /* the first region's words at sorted rows S - 1 and S */
            uint64_t below = 0, w_before = words0, w_at = words0;
            for (uint64_t w = 0; count0 && w < words0; w++) {
                if (below <= s0 - 1 && s0 - 1 < below + count0[w]) w_before = w;
                if (below <= s0 && s0 < below + count0[w]) w_at = w;
                below += count0[w];
            }
            uint32_t most = 0;
            for (uint64_t w = 0; count2 && w < words2; w++)
                if (count2[w] > most) most = count2[w];
            CHECK(w_before < words0 && w_before == w_at, "awkward n=%llu: ROM rows %llu and %llu: words %llu and %llu",
                  (unsigned long long)n, (unsigned long long)(s0 - 1), (unsigned long long)s0,
                  (unsigned long long)w_before, (unsigned long long)w_at);
            CHECK(n1 == 0, "awkward n=%llu: INPUT has %llu entries", (unsigned long long)n, (unsigned long long)n1);
            CHECK(most > 2 * s2 && longest >= s2 && n2 % s2 != 0,
                  "awkward n=%llu: RAM: %llu entries, %u of one address, %llu of them in a row", (unsigned long long)n,
                  (unsigned long long)n2, most, (unsigned long long)longest);
            free(count0);
            free(count2);
            pk_memsort_trace_free(&trace);
        }
    }

    /* a hand-made trace: every entry the same address, chunk table with
     * empty chunks */
    {
        uint32_t addr[100];
        for (int i = 0; i < 100; i++) addr[i] = 0x100000 + 8 * 7;
        uint64_t starts[6] = {0, 0, 40, 40, 99, 100};
        pk_memsort_trace trace = {100, addr, 5, starts, 0};
        for (uint32_t w = 1; w <= 16; w *= 4)
            test_kernel_against_ref("one address, empty chunks", kernel, &small, &trace, w);
        pk_memsort_trace empty = {0, addr, 1, starts, 0};
        test_kernel_against_ref("empty trace", kernel, &small, &empty, 3);
    }

    /* entries alone in their page of 4096 words at the places where the
     * kernel's loops cut the trace: each thread's first and last entry,
     * the first entries of its blocks of 16384 keys, the trace's ends;
     * the rest ties on one hot word that every thread's part holds (its
     * rows in trace order across threads). 2, 3 and 5 threads, both key
     * loops, 1 and 3 workers, the same result reused run after run. */
    {
        pk_memsort_regions one;
        memset(&one, 0, sizeof one);
        one.n_regions = 1;
        one.region[0] = (pk_memsort_region){"RAM", 0x100000, 8 * 4096 * 64, 64, 1024};
        const uint64_t n = 2 * 16384 + 77;
        uint32_t *addr = malloc(n * sizeof(uint32_t));
        uint64_t starts[4] = {0, 1000, 20000, n};
        pk_memsort_trace trace = {n, addr, 3, starts, 0};
        const uint32_t threads[] = {0, 3, 5};
        for (size_t ti = 0; addr && ti < 3; ti++) {
            uint32_t nt = threads[ti] ? threads[ti] : 2;
            for (uint64_t i = 0; i < n; i++) addr[i] = 0x100000 + 8 * (uint32_t)(i % 3);
            uint32_t page = 1;
            for (uint32_t t = 0; t <= nt; t++) {
                uint64_t b = n * t / nt; /* thread t's first entry (t = nt: past the end) */
                const uint64_t at[5] = {b, b + 1, b + 16383, b + 16384, b + 16385};
                for (int k = 0; k < 5; k++) {
                    if (at[k] >= n) continue;
                    addr[at[k]] = 0x100000 + 8 * 4096 * page + 8 * (page % 7);
                    page = page % 63 + 1;
                }
                if (b > 0) addr[b - 1] = 0x100000 + 8 * 4096 * page + 8 * 3, page = page % 63 + 1;
            }
            /* a word of a page inside one instance that every thread's part holds */
            for (uint32_t t = 0; t < nt; t++) addr[n * t / nt + 7] = 0x100000 + 8 * 4096 * 50 + 8 * 9;
            addr[n - 7] = 0x100000 + 8 * 4096 * 50 + 8 * 9;
            addr[n / 3 + 11] = 0x100000 + 8 * 4096 * 63; /* the region's last page with entries */
            test_memsort_threads = threads[ti];
            for (int portable = 0; portable <= 1; portable++)
                for (uint32_t w = 1; w <= 3; w += 2) {
                    char what[96];
                    snprintf(what, sizeof what, "lone pages at the cuts, %u threads, %s, W=%u", nt,
                             portable ? "portable" : "cpu", w);
                    test_kernel_against_ref(what, portable ? PK_MEMSORT_KERNEL_CPU_PORTABLE : kernel, &one, &trace, w);
                }
            test_memsort_threads = 0;
        }
        free(addr);
    }

    /* a run that reuses a result reports the memory of the pages it
     * touched itself: the run before zeroed its pages and cleared their
     * flags (1000 entries on 1000 pages, then 10 on one page, on the
     * default table, where histograms are too sparse for 2 MB pages) */
    if (kernel == PK_MEMSORT_KERNEL_CPU) {
        pk_memsort_regions def;
        CHECK_OK(pk_memsort_regions_preset(&ctx, "default", &def), &ctx);
        uint32_t spread[1000], one[10];
        for (uint32_t i = 0; i < 1000; i++) spread[i] = 0xA0000000u + 8 * 4096 * i;
        for (uint32_t i = 0; i < 10; i++) one[i] = 0xA0000000u + 8 * i;
        uint64_t starts_a[2] = {0, 1000}, starts_b[2] = {0, 10};
        pk_memsort_trace a = {1000, spread, 1, starts_a, 0}, b = {10, one, 1, starts_b, 0};
        pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 1, 0};
        pk_memsort_result reused, fresh;
        pk_memsort_result_init(&reused);
        pk_memsort_result_init(&fresh);
        CHECK_OK(pk_memsort_run(&ctx, &o, &def, &a, &reused), &ctx);
        uint64_t after_a = reused.stats.host_bytes;
        CHECK_OK(pk_memsort_run(&ctx, &o, &def, &b, &reused), &ctx);
        CHECK_OK(pk_memsort_run(&ctx, &o, &def, &b, &fresh), &ctx);
        CHECK(reused.stats.host_bytes == fresh.stats.host_bytes && fresh.stats.host_bytes < after_a,
              "10 entries on one page after 1000 on 1000 pages: %llu bytes, %llu in a fresh result (%llu before)",
              (unsigned long long)reused.stats.host_bytes, (unsigned long long)fresh.stats.host_bytes,
              (unsigned long long)after_a);
        pk_memsort_result_free(&reused);
        pk_memsort_result_free(&fresh);
    }

    /* two regions that touch (the first ends at the second's base): the
     * first's last word and the second's first word, alternating, each
     * sorted in its own region (20 entries each, instances of 8: 3 + 3) */
    {
        pk_memsort_regions touch;
        memset(&touch, 0, sizeof touch);
        touch.n_regions = 2;
        touch.region[0] = (pk_memsort_region){"LO", 0x2000, 8 * 64, 16, 8};
        touch.region[1] = (pk_memsort_region){"HI", 0x2000 + 8 * 64, 8 * 64, 16, 8};
        CHECK_OK(pk_memsort_regions_check(&ctx, &touch), &ctx);
        uint32_t addr[40];
        for (int i = 0; i < 40; i++) addr[i] = i % 2 ? 0x2200 : 0x21f8;
        uint64_t starts[3] = {0, 15, 40};
        pk_memsort_trace trace = {40, addr, 2, starts, 0};
        pk_memsort_result res;
        pk_memsort_result_init(&res);
        pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 1, 0};
        pk_status st = pk_memsort_run(&ctx, &o, &touch, &trace, &res);
        CHECK(st == PK_OK && res.region_entries[0] == 20 && res.region_entries[1] == 20 && res.n_instances == 6 &&
                  res.instances[2].last_addr == 0x21f8 && res.instances[3].region == 1 &&
                  res.instances[3].first_addr == 0x2200 && !res.instances[3].has_prev,
              "regions that touch: status %d (%s), %u instances", (int)st, ctx.message, res.n_instances);
        pk_memsort_result_free(&res);
        test_kernel_against_ref("regions that touch", kernel, &touch, &trace, 3);
    }

    /* bad entries in memory: the error names the chunk file and entry */
    {
        uint32_t addr[64];
        for (int i = 0; i < 64; i++) addr[i] = 0x100000 + 8 * (uint32_t)(i % 5);
        uint64_t starts[3] = {0, 40, 64};
        pk_memsort_trace trace = {64, addr, 2, starts, 0};
        pk_memsort_result res;
        pk_memsort_result_init(&res);
        pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 1, 0};
        addr[45] = 0x100004;
        pk_status st = pk_memsort_run(&ctx, &o, &small, &trace, &res);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "mem_addr_0001.bin entry 5") && strstr(ctx.message, "aligned"),
              "unaligned in memory: status %d: %s", (int)st, ctx.message);
        addr[45] = 0x100000;
        addr[3] = 0x2000000;
        st = pk_memsort_run(&ctx, &o, &small, &trace, &res);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "mem_addr_0000.bin entry 3") &&
                  strstr(ctx.message, "no region"),
              "no region in memory: status %d: %s", (int)st, ctx.message);
        addr[3] = 0x100000;
        /* a region's ends: its last word is in it; the word at base + size,
         * the word below base and a word's address + 4 are refused, by
         * the trace check and by every kernel, naming the entry */
        {
            const uint32_t ram_end = small.region[2].base + (uint32_t)small.region[2].size;
            const struct {
                uint32_t a;
                const char *why;
            } ends[] = {{ram_end, "no region"},
                        {small.region[2].base - 8, "no region"},
                        {small.region[0].base + (uint32_t)small.region[0].size, "no region"},
                        {ram_end - 4, "not 8-byte aligned"}};
            const int kernels[3] = {kernel, PK_MEMSORT_KERNEL_CPU_PORTABLE, PK_MEMSORT_KERNEL_REF};
            for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
                addr[50] = ends[e].a;
                st = pk_memsort_trace_check(&ctx, &small, &trace);
                CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "mem_addr_0001.bin entry 10") &&
                          strstr(ctx.message, ends[e].why),
                      "trace check, address 0x%08x: status %d: %s", ends[e].a, (int)st, ctx.message);
                for (int k = 0; k < 3; k++) {
                    pk_memsort_options ok = {PK_BACKEND_AUTO, kernels[k], 1, 0};
                    st = pk_memsort_run(&ctx, &ok, &small, &trace, &res);
                    CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "mem_addr_0001.bin entry 10") &&
                              strstr(ctx.message, ends[e].why),
                          "%s, address 0x%08x: status %d: %s", pk_memsort_kernel_name(kernels[k]), ends[e].a, (int)st,
                          ctx.message);
                }
            }
            addr[50] = ram_end - 8;
            addr[51] = small.region[0].base + (uint32_t)small.region[0].size - 8;
            CHECK_OK(pk_memsort_trace_check(&ctx, &small, &trace), &ctx);
            test_kernel_against_ref("the last words of ROM and RAM", kernel, &small, &trace, 3);
            addr[50] = addr[51] = 0x100000;
        }
        pk_memsort_regions tight = small;
        tight.region[2].max_instances = 1;
        st = pk_memsort_run(&ctx, &o, &tight, &trace, &res);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "mem_addr_0000.bin entry 32") && strstr(ctx.message, "RAM"),
              "capacity in memory: status %d: %s", (int)st, ctx.message);
        st = pk_memsort_run(&ctx, &o, &small, &trace, &res);
        CHECK_OK(st, &ctx);
        /* filling from the plan: too little room, chunks out of order, a
         * misaligned entry inside the instance's range, a fill with no plan */
        pk_memsort_chunk ch[2];
        uint32_t n_ch = test_trace_chunks(&trace, 0, ch);
        const pk_memsort_instance *in = &res.instances[res.n_instances - 1];
        uint32_t pairs[2 * 64];
        pk_memsort_fill fl = {in, pairs, in->n_rows, 0, NULL};
        CHECK(in->first_addr < 0x100014 && in->last_addr > 0x100014, "the last instance spans 0x%08x .. 0x%08x",
              in->first_addr, in->last_addr);
        CHECK_OK(pk_memsort_fill_from_chunks(&ctx, ch, n_ch, &fl, 1), &ctx);
        CHECK(fl.n_rows == in->n_rows, "filled %llu rows of %u", (unsigned long long)fl.n_rows, in->n_rows);
        fl.capacity = in->n_rows - 1;
        st = pk_memsort_fill_from_chunks(&ctx, ch, n_ch, &fl, 1);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "more than the room") && fl.n_rows == in->n_rows,
              "fill with too little room: status %d, %llu rows: %s", (int)st, (unsigned long long)fl.n_rows,
              ctx.message);
        fl.capacity = in->n_rows;
        pk_memsort_chunk swapped[2] = {ch[1], ch[0]};
        st = pk_memsort_fill_from_chunks(&ctx, swapped, 2, &fl, 1);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "increasing order of their numbers"),
              "fill with chunks out of order: %s", ctx.message);
        pk_memsort_chunk wrap = {0, 2, addr, UINT64_MAX - 1}; /* 2 + (2^64 - 2) wraps to 0 */
        st = pk_memsort_fill_from_chunks(&ctx, &wrap, 1, &fl, 1);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "reaches past trace position 2^32"),
              "fill with a chunk past 2^32: %s", ctx.message);
        pk_memsort_chunk overlap[2] = {ch[0], ch[1]};
        overlap[1].first_position = ch[0].first_position + 1;
        st = pk_memsort_fill_from_chunks(&ctx, overlap, 2, &fl, 1);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "chunk 1 starts at trace position 1, inside chunk 0"),
              "fill with overlapping chunks: %s", ctx.message);
        addr[45] = 0x100014;
        st = pk_memsort_fill_from_chunks(&ctx, ch, n_ch, &fl, 1);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "mem_addr_0001.bin entry 5") && strstr(ctx.message, "aligned"),
              "fill with a misaligned entry: status %d: %s", (int)st, ctx.message);
        addr[45] = 0x100000;
        /* impossible plans: addresses the wrong way round, no rows, a last
         * address off the 8-byte grid */
        for (int k = 0; k < 3; k++) {
            pk_memsort_instance bad = *in;
            if (k == 0) bad.first_addr = in->last_addr, bad.last_addr = in->first_addr;
            else if (k == 1) bad.n_rows = 0;
            else bad.last_addr += 4;
            pk_memsort_fill fb = {&bad, pairs, in->n_rows, 0, NULL};
            st = pk_memsort_fill_from_chunks(&ctx, ch, n_ch, &fb, 1);
            CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "not a plan"), "fill with impossible plan %d: %d %s", k,
                  (int)st, ctx.message);
        }
        /* the plan check that --verify runs: a plan or a count changed is found */
        CHECK_OK(pk_memsort_check_plans(&ctx, &trace, &res), &ctx);
        pk_memsort_instance *last = &res.instances[res.n_instances - 1];
        last->first_skip++;
        st = pk_memsort_check_plans(&ctx, &trace, &res);
        CHECK(st == PK_ERR_INTERNAL && strstr(ctx.message, "its plan takes"), "plan check, a skip changed: %s",
              ctx.message);
        last->first_skip--;
        res.chunk_counts[last->counts_offset + 1]++;
        st = pk_memsort_check_plans(&ctx, &trace, &res);
        CHECK(st == PK_ERR_INTERNAL && strstr(ctx.message, "the chunk counts say"), "plan check, a count changed: %s",
              ctx.message);
        res.chunk_counts[last->counts_offset + 1]--;
        pk_memsort_trace half = trace;
        half.n_entries = 40;
        half.n_chunks = 1;
        st = pk_memsort_check_plans(&ctx, &half, &res);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "another trace"), "plan check, another trace: %s",
              ctx.message);
        pk_context stop = ctx;
        stop.progress = stop_at_once;
        st = pk_memsort_fill_from_chunks(&stop, ch, n_ch, &fl, 1);
        CHECK(st == PK_ERR_CANCELLED, "a cancelled fill: status %d: %s", (int)st, stop.message);
        fl.plan = NULL;
        st = pk_memsort_fill_from_chunks(&ctx, ch, n_ch, &fl, 1);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "no plan"), "fill with no plan: %s", ctx.message);
        pk_memsort_result_free(&res);
    }

    /* realistic traces under both presets; instances of 2^21 and 2^22 rows
     * mean only a few instances, so W = 3 still has empty workers */
    const char *presets[2] = {"default", "zisk"};
    for (int p = 0; p < 2; p++) {
        pk_memsort_regions regions;
        CHECK_OK(pk_memsort_regions_preset(&ctx, presets[p], &regions), &ctx);
        uint64_t n = big ? (1u << 24) + 12345 : 300000;
        pk_memsort_gen_options g = {n, check_next(&rng), 1u << 14, 0};
        pk_memsort_trace trace;
        CHECK_OK(pk_memsort_generate(&ctx, &regions, &g, &trace), &ctx);
        char what[64];
        snprintf(what, sizeof what, "realistic %s n=%llu", presets[p], (unsigned long long)n);
        test_kernel_against_ref(what, kernel, &regions, &trace, 1);
        test_kernel_against_ref(what, kernel, &regions, &trace, 3);
        if (kernel == PK_MEMSORT_KERNEL_CPU)
            test_kernel_against_ref(what, PK_MEMSORT_KERNEL_CPU_PORTABLE, &regions, &trace, 3);
        /* the memory query bounds what a run takes */
        pk_memsort_result res;
        pk_memsort_result_init(&res);
        pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 1, 0};
        uint64_t host = 0, device = 0;
        CHECK_OK(pk_memsort_memory_bytes(&ctx, &regions, n, kernel, ctx.n_threads, &host, &device), &ctx);
        CHECK_OK(pk_memsort_run(&ctx, &o, &regions, &trace, &res), &ctx);
        CHECK(host >= res.stats.host_bytes && device >= res.stats.device_bytes,
              "%s: memory query %llu host, %llu device bytes; the run took %llu and %llu", what,
              (unsigned long long)host, (unsigned long long)device, (unsigned long long)res.stats.host_bytes,
              (unsigned long long)res.stats.device_bytes);
        pk_memsort_result_free(&res);
        /* the device's memory taken by another process between auto's
         * check and the run's allocations (pk_test_gpu_leave_free: all but
         * 64 MiB, where this table alone needs ~1.5 GiB): auto sorts on the
         * CPU and says so, cuda stops with the memory it needs; with the
         * memory back, auto runs on the GPU again */
        if (kernel == PK_MEMSORT_KERNEL_CUDA) {
            pk_memsort_result ref;
            pk_memsort_result_init(&ref);
            pk_memsort_result_init(&res);
            pk_memsort_options o_ref = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, 3, 1};
            pk_memsort_options o_auto = {PK_BACKEND_AUTO, PK_MEMSORT_KERNEL_BEST, 3, 1};
            pk_memsort_options o_cuda = {PK_BACKEND_CUDA, PK_MEMSORT_KERNEL_BEST, 3, 1};
            CHECK_OK(pk_memsort_run(&ctx, &o_ref, &regions, &trace, &ref), &ctx);
            pk_test_gpu_leave_free = (size_t)64 << 20;
            pk_status st = pk_memsort_run(&ctx, &o_auto, &regions, &trace, &res);
            CHECK(st == PK_OK && res.stats.gpu_too_small == 1 && res.stats.kernel == PK_MEMSORT_KERNEL_CPU,
                  "%s, device memory taken, auto: status %d (%s), gpu_too_small %d, kernel %d", what, (int)st,
                  ctx.message, res.stats.gpu_too_small, res.stats.kernel);
            if (st == PK_OK) CHECK_OK(pk_memsort_compare(&ctx, &ref, &res), &ctx);
            st = pk_memsort_run(&ctx, &o_cuda, &regions, &trace, &res);
            CHECK(st == PK_ERR_NOMEM && strstr(ctx.message, "out of memory; this trace needs about"),
                  "%s, device memory taken, cuda: status %d (%s)", what, (int)st, ctx.message);
            pk_test_gpu_leave_free = 0;
            st = pk_memsort_run(&ctx, &o_auto, &regions, &trace, &res);
            CHECK(st == PK_OK && res.stats.gpu_too_small == 0 && res.stats.kernel == PK_MEMSORT_KERNEL_CUDA,
                  "%s, memory back, auto: status %d (%s), gpu_too_small %d, kernel %d", what, (int)st, ctx.message,
                  res.stats.gpu_too_small, res.stats.kernel);
            if (st == PK_OK) CHECK_OK(pk_memsort_compare(&ctx, &ref, &res), &ctx);
            pk_memsort_result_free(&ref);
            pk_memsort_result_free(&res);
        }
        pk_memsort_trace_free(&trace);
    }
    /* a sparse trace over a large table: what the run holds stays within
     * the memory query's bound (histograms advised onto 2 MB pages took
     * 2 MB for each entry, 4 GB here) */
#ifdef __linux__
    if (kernel == PK_MEMSORT_KERNEL_CPU) {
        pk_memsort_regions t;
        memset(&t, 0, sizeof t);
        t.n_regions = 1;
        strcpy(t.region[0].name, "ALL");
        t.region[0].size = 1ull << 32;
        t.region[0].max_instances = 1000;
        t.region[0].instance_entries = 37;
        enum { N_SPARSE = 20000 };
        uint32_t *addr = malloc(N_SPARSE * sizeof(uint32_t));
        uint64_t starts[2] = {0, N_SPARSE};
        for (int i = 0; addr && i < N_SPARSE; i++) addr[i] = (uint32_t)(check_next(&rng) % (1u << 29)) * 8u;
        pk_memsort_trace trace = {N_SPARSE, addr, 1, starts, 0};
        pk_context c2 = ctx;
        c2.n_threads = 2;
        uint64_t host = 0, device = 0;
        CHECK_OK(pk_memsort_memory_bytes(&c2, &t, N_SPARSE, kernel, 2, &host, &device), &c2);
        long before = test_rss_kb();
        pk_memsort_result res;
        pk_memsort_result_init(&res);
        pk_memsort_options o = {PK_BACKEND_CPU, kernel, 1, 0};
        if (addr) CHECK_OK(pk_memsort_run(&c2, &o, &t, &trace, &res), &c2);
        long grown = test_rss_kb() - before;
        printf("sparse trace, 4 GiB table: bound %.1f MB, stats %.1f MB, resident +%.1f MB\n", host / 1e6,
               res.stats.host_bytes / 1e6, grown / 1e3);
#if defined(__SANITIZE_ADDRESS__)
        /* AddressSanitizer's own memory (its shadow, its allocator)
         * counts in the resident size too: +388 MB against +308 MB
         * without it, in CI and here alike; the resident bound is
         * checked by the build without it */
        printf("sparse trace: resident size not checked under AddressSanitizer\n");
        grown = 0;
#endif
        CHECK(before > 0 && (uint64_t)grown * 1000 <= host && res.stats.host_bytes <= host,
              "sparse trace: bound %llu bytes, the run holds %ld kB more (stats %llu)", (unsigned long long)host, grown,
              (unsigned long long)res.stats.host_bytes);
        pk_memsort_result_free(&res);
        free(addr);
    }
#endif
    /* realistic traces on the small table: many instances per region */
    for (int rep = 0; rep < 3; rep++) {
        pk_memsort_regions t = small;
        t.region[2].size = 8 * 65536;
        t.region[1].max_instances = 4096;
        pk_memsort_gen_options g = {50000 + check_next(&rng) % 1000, check_next(&rng), 4096, 0};
        pk_memsort_trace trace;
        CHECK_OK(pk_memsort_generate(&ctx, &t, &g, &trace), &ctx);
        test_kernel_against_ref("realistic small table W=16", kernel, &t, &trace, 16);
        pk_memsort_trace_free(&trace);
    }
    /* the plan check in batches (4096 chunks: 4096 instances a batch), a
     * change in a late batch's plan found */
    if (kernel == PK_MEMSORT_KERNEL_CPU) {
        pk_memsort_regions t = small;
        t.region[0].max_instances = 8192;
        t.region[1].max_instances = 16384;
        t.region[2].size = 8 * 65536;
        t.region[2].max_instances = 65536;
        pk_memsort_gen_options g = {1u << 18, check_next(&rng), 64, 0};
        pk_memsort_trace trace;
        CHECK_OK(pk_memsort_generate(&ctx, &t, &g, &trace), &ctx);
        pk_memsort_result res;
        pk_memsort_result_init(&res);
        pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 1, 0};
        CHECK_OK(pk_memsort_run(&ctx, &o, &t, &trace, &res), &ctx);
        CHECK(trace.n_chunks == 4096 && res.n_owned > 2 * 4096, "%u chunks, %u instances", trace.n_chunks, res.n_owned);
        CHECK_OK(pk_memsort_check_plans(&ctx, &trace, &res), &ctx);
        pk_memsort_instance *late = &res.instances[res.n_instances - 2];
        late->last_include--;
        pk_status st = pk_memsort_check_plans(&ctx, &trace, &res);
        CHECK(st == PK_ERR_INTERNAL && strstr(ctx.message, "its plan takes"), "plan check, a late plan changed: %s",
              ctx.message);
        pk_memsort_result_free(&res);
        pk_memsort_trace_free(&trace);
    }
    /* called from inside the caller's own parallel region, the run's
     * team has one thread whatever ctx.n_threads asks for: the same
     * result as the reference (the trace's parts were once left out) */
    {
        pk_memsort_gen_options g = {200000, 7, 5000, 0};
        pk_memsort_trace trace;
        CHECK_OK(pk_memsort_generate(&ctx, &small, &g, &trace), &ctx);
        pk_memsort_result want;
        pk_memsort_result_init(&want);
        pk_memsort_options o_ref = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, 3, 1};
        CHECK_OK(pk_memsort_run(&ctx, &o_ref, &small, &trace, &want), &ctx);
        omp_set_max_active_levels(1);
        int failed[2] = {0, 0};
        char message[2][PK_MESSAGE_MAX + 32] = {"", ""};
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num();
            for (int asks = 0; asks <= 4; asks += 2) {
                pk_context c;
                pk_context_init(&c);
                c.n_threads = asks;
                pk_memsort_result got;
                pk_memsort_result_init(&got);
                pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 3, 1};
                pk_status st = pk_memsort_run(&c, &o, &small, &trace, &got);
                if (st == PK_OK) st = pk_memsort_compare(&c, &want, &got);
                if (st != PK_OK && !failed[t])
                    snprintf(message[t], sizeof message[t], "n_threads %d: %s", asks, c.message);
                failed[t] += st != PK_OK;
                pk_memsort_result_free(&got);
            }
        }
        for (int t = 0; t < 2; t++)
            CHECK(failed[t] == 0, "a run inside the caller's parallel region (its thread %d): %s", t, message[t]);
        pk_memsort_result_free(&want);
        pk_memsort_trace_free(&trace);
    }
    /* a progress callback that asks to stop: PK_ERR_CANCELLED, and the
     * result kept by the next run is right */
    {
        pk_memsort_gen_options g = {200000, 5, 0, 0};
        pk_memsort_trace trace;
        CHECK_OK(pk_memsort_generate(&ctx, &small, &g, &trace), &ctx);
        pk_memsort_result res;
        pk_memsort_result_init(&res);
        pk_memsort_options o = {PK_BACKEND_AUTO, kernel, 3, 1};
        pk_context stop = ctx;
        stop.progress = stop_at_once;
        CHECK(pk_memsort_run(&stop, &o, &small, &trace, &res) == PK_ERR_CANCELLED, "a cancelled run returned: %s",
              stop.message);
        pk_memsort_result_free(&res);
        test_kernel_against_ref("after a cancelled run", kernel, &small, &trace, 3);
        pk_memsort_trace_free(&trace);
    }
    return check_finish(name);
}
