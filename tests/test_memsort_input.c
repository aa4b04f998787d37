/* test_memsort_input.c - bad input gets a clear error naming the file and
 * entry (or line), and nothing half-written: an unaligned address, an
 * address in no region, a truncated chunk file, a missing chunk in the
 * sequence, more entries than the region table allows, malformed region
 * tables. Also: chunk files round-trip, and memsort.bin has the documented
 * size. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memsort_util.h"

static char tmp_root[64];

static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror(path);
        exit(1);
    }
    fwrite(data, 1, bytes, fp);
    fclose(fp);
}

static void write_chunk(const char *dir, int idx, const uint32_t *v, size_t n) {
    char name[64];
    snprintf(name, sizeof name, "mem_addr_%04d.bin", idx);
    write_file(dir, name, v, n * 4);
}

static char *fresh_dir(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, name);
    mkdir(path, 0777);
    return path;
}

/* A small text file's contents (NULL if absent); caller frees. */
static char *read_text(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *s = calloc(4096, 1);
    if (s) (void)fread(s, 1, 4095, fp);
    fclose(fp);
    return s;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Read dir and expect failure with every fragment in the message. */
static char last_message[PK_MESSAGE_MAX]; /* expect_error's */

static void expect_error(const char *what, const char *dir, const pk_memsort_regions *regions, const char *frag1,
                         const char *frag2) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_trace trace;
    pk_status st = pk_memsort_trace_read(&ctx, dir, regions, &trace);
    CHECK(st != PK_OK, "%s: read succeeded", what);
    if (st == PK_OK) {
        pk_memsort_trace_free(&trace);
        return;
    }
    CHECK(strstr(ctx.message, frag1) != NULL, "%s: message '%s' lacks '%s'", what, ctx.message, frag1);
    CHECK(strstr(ctx.message, frag2) != NULL, "%s: message '%s' lacks '%s'", what, ctx.message, frag2);
    printf("%s: %s\n", what, ctx.message);
    snprintf(last_message, sizeof last_message, "%s", ctx.message);
}

static void expect_regions_error(const char *what, const char *text, const char *frag1, const char *frag2) {
    char *dir = fresh_dir("regions");
    write_file(dir, "table.txt", text, strlen(text));
    char path[600];
    snprintf(path, sizeof path, "%s/table.txt", dir);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions t;
    pk_status st = pk_memsort_regions_read(&ctx, path, &t);
    CHECK(st != PK_OK, "%s: accepted", what);
    CHECK(strstr(ctx.message, frag1) != NULL, "%s: message '%s' lacks '%s'", what, ctx.message, frag1);
    CHECK(strstr(ctx.message, frag2) != NULL, "%s: message '%s' lacks '%s'", what, ctx.message, frag2);
    printf("%s: %s\n", what, ctx.message);
}

/* Entries in a folder, "." and ".." aside (-1: no folder). */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static int gen_asks, gen_cancel_at;
static double gen_last_fraction;
static int gen_fractions_ok;
static int gen_progress(void *user, double fraction) {
    (void)user;
    if (fraction < gen_last_fraction || fraction > 1) gen_fractions_ok = 0;
    gen_last_fraction = fraction;
    return ++gen_asks == gen_cancel_at;
}

/* The folder holds exactly the trace `want` (its chunk files, nothing more). */
static void expect_trace_in(const char *what, const char *dir, const pk_memsort_regions *regions,
                            const pk_memsort_trace *want) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_trace back;
    pk_status st = pk_memsort_trace_read(&ctx, dir, regions, &back);
    CHECK(st == PK_OK, "%s: reading back: %s", what, ctx.message);
    if (st != PK_OK) return;
    CHECK(back.n_entries == want->n_entries && back.n_chunks == want->n_chunks &&
              memcmp(back.addr, want->addr, want->n_entries * 4) == 0 &&
              memcmp(back.chunk_start, want->chunk_start, (want->n_chunks + 1) * 8) == 0,
          "%s: the folder holds another trace (%llu entries in %u chunks, %llu in %u wanted)", what,
          (unsigned long long)back.n_entries, back.n_chunks, (unsigned long long)want->n_entries, want->n_chunks);
    int files = count_entries(dir);
    CHECK(files == (int)want->n_chunks, "%s: %d files in the folder, %u chunk files wanted", what, files,
          want->n_chunks);
    pk_memsort_trace_free(&back);
}

/* FNV-1a over a trace's entries. */
static uint64_t trace_hash(const pk_memsort_trace *t) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < t->n_entries; i++)
        for (int k = 0; k < 4; k++) h = (h ^ ((t->addr[i] >> (8 * k)) & 0xff)) * 1099511628211ull;
    return h;
}

/* The generator's seed and chunking: the same seed gives the same trace,
 * bit for bit (pinned here, so that a trace named by its seed stays the
 * same on every machine and in every version), another seed another
 * trace; chunks hold exactly the entries asked, the last the rest. */
static void test_generate_seeds(const pk_memsort_regions *def) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions small = test_regions_small();
    for (int awkward = 0; awkward <= 1; awkward++) {
        const pk_memsort_regions *r = awkward ? &small : def;
        pk_memsort_gen_options g = {30000, 11, 1000, awkward};
        pk_memsort_trace a, b, c;
        CHECK_OK(pk_memsort_generate(&ctx, r, &g, &a), &ctx);
        CHECK_OK(pk_memsort_generate(&ctx, r, &g, &b), &ctx);
        g.seed = 12;
        CHECK_OK(pk_memsort_generate(&ctx, r, &g, &c), &ctx);
        if (a.addr && b.addr && c.addr) {
            CHECK(memcmp(a.addr, b.addr, 30000 * 4) == 0, "awkward %d: seed 11 twice, different traces", awkward);
            uint64_t differ = 0;
            for (uint64_t i = 0; i < 30000; i++) differ += a.addr[i] != c.addr[i];
            CHECK(differ > 3000, "awkward %d: seeds 11 and 12 give traces that differ in %llu of 30000 entries",
                  awkward, (unsigned long long)differ);
            const uint64_t pinned[2] = {0x315b0426b83be5beull, 0x79b70acf24afa0e3ull};
            CHECK(trace_hash(&a) == pinned[awkward], "awkward %d: seed 11 gave trace hash 0x%016llx, not 0x%016llx",
                  awkward, (unsigned long long)trace_hash(&a), (unsigned long long)pinned[awkward]);
        }
        pk_memsort_trace_free(&a);
        pk_memsort_trace_free(&b);
        pk_memsort_trace_free(&c);
    }
    const uint32_t chunkings[] = {1, 2, 999, 1000, 2999, 3000, 5000, 0};
    for (size_t k = 0; k < sizeof chunkings / sizeof chunkings[0]; k++) {
        pk_memsort_gen_options g = {3000, 5, chunkings[k], 0};
        pk_memsort_trace t;
        pk_status st = pk_memsort_generate(&ctx, def, &g, &t);
        CHECK_OK(st, &ctx);
        if (st) continue;
        uint64_t chunk = chunkings[k] ? chunkings[k] : PK_MEMSORT_GEN_CHUNK;
        int ok = t.n_chunks == (3000 + chunk - 1) / chunk && t.chunk_start[0] == 0;
        for (uint32_t c = 1; ok && c <= t.n_chunks; c++) ok = t.chunk_start[c] == (c * chunk < 3000 ? c * chunk : 3000);
        CHECK(ok, "chunks of %u: %u chunks, not each of the entries asked", chunkings[k], t.n_chunks);
        pk_memsort_trace_free(&t);
    }
}

/* pk_memsort_generate_dir writes the trace pk_memsort_generate makes, a
 * chunk at a time: the same entries and chunk table for chunkings that
 * divide the entries and that do not, one chunk, the path for a last
 * region too small for a stack, the zisk preset and awkward mode (with a
 * first region of one word too). A
 * region over its capacity and a cancellation at any chunk leave the
 * folder's older trace as it was, with no temporary file. */
static void test_generate_dir(const pk_memsort_regions *def) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions zisk, small = test_regions_small(), tiny_first = test_regions_small();
    CHECK_OK(pk_memsort_regions_preset(&ctx, "zisk", &zisk), &ctx);
    tiny_first.region[0].size = 8; /* one word: awkward mode's three low entries repeat it */
    struct {
        const pk_memsort_regions *r;
        pk_memsort_gen_options g;
    } cases[] = {
        {def, {100000, 3, 7777, 0}},    {def, {65536, 4, 4096, 0}},    {def, {5000, 5, 0, 0}},
        {&zisk, {50000, 6, 10000, 0}},  {&small, {20000, 7, 1000, 0}}, {&small, {20000, 8, 999, 1}},
        {&tiny_first, {2000, 9, 0, 1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char what[64], name[32];
        snprintf(what, sizeof what, "generate_dir case %zu", k);
        snprintf(name, sizeof name, "gendir%zu", k);
        pk_memsort_trace mem;
        CHECK_OK(pk_memsort_generate(&ctx, cases[k].r, &cases[k].g, &mem), &ctx);
        char *dir = fresh_dir(name);
        CHECK_OK(pk_memsort_generate_dir(&ctx, cases[k].r, &cases[k].g, dir), &ctx);
        expect_trace_in(what, dir, cases[k].r, &mem);
        pk_memsort_trace_free(&mem);
    }

    /* over the folder's older trace: cancelled after each of the 13 chunks
     * in turn, then run through */
    pk_memsort_gen_options older_g = {1000, 5, 100, 0}, g = {100000, 3, 7777, 0};
    pk_memsort_trace older, newer;
    CHECK_OK(pk_memsort_generate(&ctx, def, &older_g, &older), &ctx);
    CHECK_OK(pk_memsort_generate(&ctx, def, &g, &newer), &ctx);
    char *dir = fresh_dir("gendir_over");
    CHECK_OK(pk_memsort_trace_write(&ctx, dir, &older), &ctx);
    ctx.progress = gen_progress;
    for (gen_cancel_at = 1; gen_cancel_at <= 14; gen_cancel_at++) {
        gen_asks = 0;
        gen_last_fraction = 0;
        gen_fractions_ok = 1;
        pk_status st = pk_memsort_generate_dir(&ctx, def, &g, dir);
        char what[64];
        snprintf(what, sizeof what, "generate_dir cancelled at ask %d", gen_cancel_at);
        if (gen_cancel_at <= 13) {
            CHECK(st == PK_ERR_CANCELLED && strstr(ctx.message, "cancelled; no chunk file written") &&
                      gen_asks == gen_cancel_at,
                  "%s: status %d after %d asks: %s", what, (int)st, gen_asks, ctx.message);
            expect_trace_in(what, dir, def, &older);
        } else {
            CHECK(st == PK_OK && gen_asks == 13 && gen_last_fraction == 1.0,
                  "generate_dir run through: status %d, %d asks, last fraction %g: %s", (int)st, gen_asks,
                  gen_last_fraction, ctx.message);
            expect_trace_in("generate_dir over an older trace", dir, def, &newer);
        }
        CHECK(gen_fractions_ok, "%s: the progress went back or past 1", what);
    }
    /* the trace in memory asks after each full chunk too (12 of them):
     * cancelled at the third, nothing kept; run through, the same trace */
    for (gen_cancel_at = 3; gen_cancel_at <= 13; gen_cancel_at += 10) {
        gen_asks = 0;
        gen_last_fraction = 0;
        gen_fractions_ok = 1;
        pk_memsort_trace mem;
        pk_status st = pk_memsort_generate(&ctx, def, &g, &mem);
        if (gen_cancel_at == 3)
            CHECK(st == PK_ERR_CANCELLED && gen_asks == 3 && mem.addr == NULL && mem.n_entries == 0,
                  "generate cancelled at ask 3: status %d after %d asks", (int)st, gen_asks);
        else
            CHECK(st == PK_OK && gen_asks == 12 && gen_fractions_ok && mem.n_entries == newer.n_entries &&
                      memcmp(mem.addr, newer.addr, newer.n_entries * 4) == 0,
                  "generate run through with progress: status %d, %d asks, not the same trace", (int)st, gen_asks);
        pk_memsort_trace_free(&mem);
    }
    /* an awkward trace is shuffled in place, asking at every 2^20 entries
     * of the shuffle (3 asks here): cancelled at the second, nothing
     * kept; run through, the trace made without a progress callback */
    pk_memsort_gen_options awk = {(1u << 22) + 5, 3, 7777, 1};
    pk_memsort_trace awk_plain;
    ctx.progress = NULL;
    CHECK_OK(pk_memsort_generate(&ctx, def, &awk, &awk_plain), &ctx);
    ctx.progress = gen_progress;
    for (gen_cancel_at = 2; gen_cancel_at <= 12; gen_cancel_at += 10) {
        gen_asks = 0;
        gen_last_fraction = 0;
        gen_fractions_ok = 1;
        pk_memsort_trace mem;
        pk_status st = pk_memsort_generate(&ctx, def, &awk, &mem);
        if (gen_cancel_at == 2)
            CHECK(st == PK_ERR_CANCELLED && gen_asks == 2 && mem.addr == NULL && mem.n_entries == 0,
                  "awkward generate cancelled at ask 2: status %d after %d asks", (int)st, gen_asks);
        else
            CHECK(st == PK_OK && gen_asks == 3 && gen_fractions_ok && mem.n_entries == awk_plain.n_entries &&
                      memcmp(mem.addr, awk_plain.addr, awk_plain.n_entries * 4) == 0,
                  "awkward generate run through with progress: status %d, %d asks, not the same trace", (int)st,
                  gen_asks);
        pk_memsort_trace_free(&mem);
    }
    pk_memsort_trace_free(&awk_plain);
    ctx.progress = NULL;

    /* a region over its capacity: stopped at the chunk that overflows it,
     * named by region, the folder as it was */
    pk_memsort_regions tight = *def;
    tight.region[2].max_instances = 1;
    tight.region[2].instance_entries = 20000;
    uint64_t ram = 0, stop = 0;
    for (uint64_t i = 0; i < newer.n_entries && !stop; i++) {
        ram += newer.addr[i] >= def->region[2].base;
        if (ram > 20000) stop = (i / 7777 + 1) * 7777; /* the end of the chunk that overflows */
    }
    char expect[128];
    snprintf(expect, sizeof expect, "in region RAM by entry %llu, more than its 1 instances of 20000 rows",
             (unsigned long long)stop);
    pk_status st = pk_memsort_generate_dir(&ctx, &tight, &g, dir);
    CHECK(st == PK_ERR_INVALID && stop > 0 && strstr(ctx.message, expect) && !strstr(ctx.message, "mem_addr"),
          "generate_dir over capacity: status %d: %s (wanted '%s')", (int)st, ctx.message, expect);
    printf("generate_dir over capacity: %s\n", ctx.message);
    expect_trace_in("generate_dir over capacity", dir, def, &newer);
    /* ... and into a folder it made: the folder goes too */
    char made[600];
    snprintf(made, sizeof made, "%s/gendir_made", tmp_root);
    st = pk_memsort_generate_dir(&ctx, &tight, &g, made);
    CHECK(st == PK_ERR_INVALID && !exists(made), "generate_dir over capacity into a new folder: status %d, folder %s",
          (int)st, exists(made) ? "left" : "removed");
    ctx.progress = gen_progress;
    gen_asks = 0;
    gen_cancel_at = 2;
    st = pk_memsort_generate_dir(&ctx, def, &g, made);
    ctx.progress = NULL;
    CHECK(st == PK_ERR_CANCELLED && !exists(made), "generate_dir cancelled into a new folder: status %d, folder %s",
          (int)st, exists(made) ? "left" : "removed");
    /* a folder name that is a file: refused before anything is made */
    char file[600];
    snprintf(file, sizeof file, "%s/mem_addr_0000.bin", dir);
    st = pk_memsort_generate_dir(&ctx, def, &g, file);
    CHECK(st == PK_ERR_IO && strstr(ctx.message, "not a directory"), "generate_dir into a file: status %d: %s", (int)st,
          ctx.message);
    pk_memsort_trace_free(&older);
    pk_memsort_trace_free(&newer);
}

/* A chunk of eight good entries: each in a region of the default table. */
static const uint32_t good[8] = {0x80000000, 0x90000008, 0xA0000010, 0xA0000010,
                                 0x80000040, 0xA0001000, 0x90000000, 0xA0000000};

/* unaligned address */
static void unaligned_address_is_refused(const pk_memsort_regions *def) {
    char *d = fresh_dir("unaligned");
    write_chunk(d, 0, good, 8);
    uint32_t bad[8];
    memcpy(bad, good, sizeof bad);
    bad[3] = 0x80000004;
    write_chunk(d, 1, bad, 8);
    expect_error("unaligned", d, def, "mem_addr_0001.bin entry 3", "not 8-byte aligned");
}

/* an address in no region */
static void address_in_no_region_is_refused(const pk_memsort_regions *def) {
    char *d = fresh_dir("noregion");
    uint32_t bad[8];
    memcpy(bad, good, sizeof bad);
    bad[5] = 0x00001000;
    write_chunk(d, 0, bad, 8);
    expect_error("no region", d, def, "mem_addr_0000.bin entry 5", "in no region");
    CHECK(strstr(last_message, "preset") == NULL, "a hint for an address in no preset's region");
}

/* an address of the other preset's layout: the message suggests it */
static void other_presets_address_names_the_preset(const pk_memsort_regions *def) {
    char *d = fresh_dir("zisk_address");
    uint32_t bad[8];
    memcpy(bad, good, sizeof bad);
    bad[2] = 0x40000008; /* INPUT of the zisk layout */
    write_chunk(d, 0, bad, 8);
    expect_error("zisk address", d, def, "mem_addr_0000.bin entry 2", "(it lies in region INPUT of the 'zisk' preset)");
}

/* truncated chunk: 10 bytes */
static void truncated_chunk_is_refused(const pk_memsort_regions *def) {
    char *d = fresh_dir("truncated");
    write_chunk(d, 0, good, 8);
    write_file(d, "mem_addr_0001.bin", good, 10);
    expect_error("truncated", d, def, "mem_addr_0001.bin", "entry 2 is incomplete");
}

/* One or two bad entries put into `big` (the k-th try): first at fixed
 * places (the ends, either side of the first block's end and of the
 * middle), then at random ones; the check must name the first. */
static void first_of_bad_entries_is_named(const pk_memsort_regions *def, pk_memsort_trace *big, check_rng *rng,
                                          int threads, int k) {
    const uint64_t n = big->n_entries;
    pk_context c;
    pk_context_init(&c);
    c.n_threads = threads;
    const uint64_t fixed[] = {0, 4095, 4096, n / 2 - 1, n / 2, n - 1};
    uint64_t at[2], n_bad = 1 + k % 2;
    for (uint64_t b = 0; b < n_bad; b++) at[b] = k < 12 && b == 0 ? fixed[k / 2] : check_next(rng) % n;
    uint32_t kept[2], value[2];
    for (uint64_t b = 0; b < n_bad; b++) {
        kept[b] = big->addr[at[b]];
        value[b] = check_next(rng) % 2 ? 0x80000004u : 0x00001000u; /* misaligned, or in no region */
    }
    for (uint64_t b = 0; b < n_bad; b++) big->addr[at[b]] = value[b];
    uint64_t first = n_bad == 2 && at[1] < at[0] ? at[1] : at[0];
    uint32_t chunk = 0;
    while (big->chunk_start[chunk + 1] <= first) chunk++;
    char want[64];
    snprintf(want, sizeof want, "mem_addr_%04u.bin entry %llu", chunk,
             (unsigned long long)(first - big->chunk_start[chunk]));
    pk_status st = pk_memsort_trace_check(&c, def, big);
    CHECK(st == PK_ERR_PARSE && strstr(c.message, want) &&
              strstr(c.message, big->addr[first] & 7 ? "not 8-byte aligned" : "in no region"),
          "bad entries at %llu and %llu (%d threads): expected '%s', got %d '%s'", (unsigned long long)at[0],
          (unsigned long long)(n_bad == 2 ? at[1] : at[0]), threads, want, (int)st, c.message);
    for (uint64_t b = n_bad; b-- > 0;) big->addr[at[b]] = kept[b];
}

/* the regions' entry counts exact: a capacity of the count passes, one
 * less fails */
static void region_capacity_is_exact(pk_context *ctx, const pk_memsort_regions *def, const pk_memsort_trace *big) {
    uint64_t per_region[PK_MEMSORT_MAX_REGIONS] = {0};
    for (uint64_t i = 0; i < big->n_entries; i++)
        for (uint32_t r = 0; r < def->n_regions; r++)
            per_region[r] += big->addr[i] - def->region[r].base < def->region[r].size;
    for (uint32_t r = 0; r < def->n_regions; r++) {
        if (!per_region[r]) continue;
        pk_memsort_regions capped = *def;
        capped.region[r].instance_entries = 1;
        capped.region[r].max_instances = (uint32_t)per_region[r];
        CHECK_OK(pk_memsort_trace_check(ctx, &capped, big), ctx);
        capped.region[r].max_instances = (uint32_t)per_region[r] - 1;
        CHECK(pk_memsort_trace_check(ctx, &capped, big) != PK_OK && strstr(ctx->message, def->region[r].name),
              "region %s capped one below its %llu entries: %s", def->region[r].name, (unsigned long long)per_region[r],
              ctx->message);
    }
}

/* a large trace in memory: the first bad entry wherever it lies (the
 * check goes a block of entries at a time, each thread its part), and
 * the regions' entry counts exact (a capacity of the count passes,
 * one less fails) */
static void large_trace_is_checked_exactly(pk_context *ctx, const pk_memsort_regions *def) {
    check_rng rng = check_rng_make(20261201);
    pk_memsort_gen_options g = {300000, check_next(&rng), 1u << 16, 0};
    pk_memsort_trace big;
    CHECK_OK(pk_memsort_generate(ctx, def, &g, &big), ctx);
    for (int threads = 0; threads <= 3; threads += 3)
        for (int k = 0; k < 40; k++) first_of_bad_entries_is_named(def, &big, &rng, threads, k);
    CHECK_OK(pk_memsort_trace_check(ctx, def, &big), ctx);
    region_capacity_is_exact(ctx, def, &big);
    pk_memsort_trace_free(&big);
}

/* missing chunk in the sequence */
static void missing_chunk_is_refused(const pk_memsort_regions *def) {
    char *d = fresh_dir("missing");
    write_chunk(d, 0, good, 8);
    write_chunk(d, 1, good, 8);
    write_chunk(d, 3, good, 8);
    expect_error("missing chunk", d, def, "mem_addr_0002.bin", "missing chunk");
}

/* a chunk-like name of five digits: an error, not a chunk left out */
static void chunk_names_not_of_four_digits_are_refused(const pk_memsort_regions *def) {
    char *d = fresh_dir("fivedigits");
    write_chunk(d, 0, good, 8);
    write_file(d, "mem_addr_00001.bin", good, 32);
    write_file(d, "mem_addr_0001_old.bin", good, 32); /* not digits: some other file, ignored */
    expect_error("five digits", d, def, "mem_addr_00001.bin", "four digits");
    d = fresh_dir("elevendigits");
    write_chunk(d, 0, good, 8);
    write_file(d, "mem_addr_12345678901.bin", good, 32);
    expect_error("eleven digits", d, def, "mem_addr_12345678901.bin", "four digits");
    d = fresh_dir("pastlast");
    write_chunk(d, 0, good, 8);
    write_file(d, "mem_addr_9999.bin", good, 32);
    expect_error("chunk 9999", d, def, "mem_addr_9999.bin: chunk numbers end at 4095", "move it out of the folder");
}

/* no chunk files at all */
static void folder_without_chunks_is_refused(const pk_memsort_regions *def) {
    char *d = fresh_dir("nochunks");
    expect_error("no chunks", d, def, "nochunks", "no chunk files");
}

/* more entries than the table allows: ROM of one instance of 4 rows,
 * the fifth ROM entry (chunk 1, entry 1) is one too many */
static void entries_past_capacity_are_refused(const pk_memsort_regions *def) {
    pk_memsort_regions tiny = *def;
    tiny.region[0].max_instances = 1;
    tiny.region[0].instance_entries = 4;
    char *d = fresh_dir("capacity");
    uint32_t rom[4] = {0x80000000, 0x80000008, 0xA0000000, 0x80000000};
    write_chunk(d, 0, rom, 4);
    write_chunk(d, 1, rom, 4);
    expect_error("capacity", d, &tiny, "mem_addr_0001.bin entry 1", "region ROM");
}

/* region table files */
static void malformed_region_tables_are_refused(void) {
    expect_regions_error("regions: field count", "ROM 0x80000000 128M 32 4M\n# ok\nRAM 0xA0000000 512M 256\n",
                         "table.txt:3", "expected 5 fields");
    expect_regions_error("regions: too many fields, all counted", "ROM 0x80000000 128M 32 2^22 a b c d\n",
                         "table.txt:1", "got 9");
    expect_regions_error("regions: number", "ROM 0x80000000 12x8 32 4M\n", "table.txt:1", "size");
    expect_regions_error("regions: overlap", "A 0x1000 0x1000 1 8\nB 0x1800 0x1000 1 8\n", "table.txt:2", "overlap");
    expect_regions_error("regions: unaligned", "A 0x1004 0x1000 1 8\n", "table.txt:1", "multiples of 8");
    expect_regions_error("regions: empty", "# nothing\n\n", "table.txt", "no regions");
    expect_regions_error("regions: blank lines counted",
                         "# table\n\n\nROM 0x80000000 1M 1 16\n\n\nRAM 0x80000000 1M 1 16\n",
                         "table.txt:7:", "overlap");
    expect_regions_error("regions: after blank lines", "\n\n\n\nROM 0x80000000 1M 1 bogus\n",
                         "table.txt:5:", "'bogus' is not a number");
}

/* a region file that spells out the zisk preset reads as it; a leading
 * 0 is decimal, not octal; 0X is hex too */
static void region_file_reads_as_the_preset_it_spells(pk_context *ctx) {
    const char *text =
        "# name base size max_instances instance_entries\nROM 0x80000000 128M 32 2^22\n"
        "INPUT 0x40000000 1G 32 2^21\nRAM 0xA0000000 512M 256 4194304\n";
    char *rd = fresh_dir("regions_ok");
    write_file(rd, "zisk.txt", text, strlen(text));
    char path[600];
    snprintf(path, sizeof path, "%s/zisk.txt", rd);
    pk_memsort_regions from_file, zisk;
    CHECK_OK(pk_memsort_regions_read(ctx, path, &from_file), ctx);
    CHECK_OK(pk_memsort_regions_preset(ctx, "zisk", &zisk), ctx);
    zisk.region[0].instance_entries = 1u << 22; /* the file gives ROM 2^22 rows */
    CHECK(memcmp(&from_file, &zisk, sizeof zisk) == 0, "region file differs from the preset it spells out");
    /* a leading 0 is decimal, not octal; 0X is hex too */
    const char *zeros = "ROM 0X80000000 0128K 010 0016\n";
    write_file(rd, "zeros.txt", zeros, strlen(zeros));
    snprintf(path, sizeof path, "%s/zeros.txt", rd);
    CHECK_OK(pk_memsort_regions_read(ctx, path, &from_file), ctx);
    CHECK(from_file.region[0].base == 0x80000000u && from_file.region[0].size == 128u << 10 &&
              from_file.region[0].max_instances == 10 && from_file.region[0].instance_entries == 16,
          "leading zeros: base %#x size %llu max_instances %u instance_entries %u", from_file.region[0].base,
          (unsigned long long)from_file.region[0].size, from_file.region[0].max_instances,
          from_file.region[0].instance_entries);
}

/* region tables at their limits: the whole 32-bit space in one region of
 * 4G bytes (2^29 compact addresses, the most a table holds, and the largest
 * size a file may give), lower-case suffixes, comments after the fields,
 * regions that touch; a byte past 2^32, a size that is no multiple of 8
 * are refused */
static void region_tables_at_their_limits(pk_context *ctx) {
    const struct {
        const char *text;
        uint32_t n, base1;
        uint64_t size0;
    } ok[] = {
        {"ALL 0 4G 1 2^29\n", 1, 0, 1ull << 32},
        {"ALL 0x0 4g 1 2^29 # the whole space\n", 1, 0, 1ull << 32},
        {"LO 0 2G 1 8 # low half\nHI 0x80000000 2048m 1 8\n", 2, 0x80000000u, 1ull << 31},
        {"A 0x1000 0x1000 1 8#touching\nB 0x2000 8k 1 8\n", 2, 0x2000, 0x1000},
    };
    char *rd = fresh_dir("regions_limits");
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        write_file(rd, "t.txt", ok[k].text, strlen(ok[k].text));
        char path[600];
        snprintf(path, sizeof path, "%s/t.txt", rd);
        pk_memsort_regions t;
        pk_status st = pk_memsort_regions_read(ctx, path, &t);
        CHECK(st == PK_OK && t.n_regions == ok[k].n && t.region[0].size == ok[k].size0 &&
                  (ok[k].n < 2 || t.region[1].base == ok[k].base1),
              "region table '%s': status %d, %u regions: %s", ok[k].text, (int)st, t.n_regions, ctx->message);
    }
    expect_regions_error("regions: past 2^32", "ALL 8 4G 1 2^29\n", "table.txt:1", "ends beyond 2^32");
    expect_regions_error("regions: size no multiple of 8", "A 0x1000 0x1004 1 8\n", "table.txt:1", "multiples of 8");
    expect_regions_error("regions: a word shared", "A 0x1000 0x1008 1 8\nB 0x2000 8 1 8\n", "table.txt:2", "overlap");
}

/* numbers in a region file that are not numbers, or out of range */
static void region_numbers_out_of_range_are_refused(void) {
    expect_regions_error("regions: 0x alone", "ROM 0x 1M 1 16\n", "table.txt:1", "base: '0x' is not a number");
    expect_regions_error("regions: 08", "ROM 0x80000000 1M 1 08x\n", "table.txt:1", "'08x' is not a number");
    expect_regions_error("regions: suffix too large", "ROM 0x8000000g 1M 1 16\n", "table.txt:1",
                         "base: 0x8000000g is out of range (at most 4294967295; a K, M or G suffix multiplies");
    expect_regions_error("regions: too large", "ROM 0x100000000 1M 1 16\n", "table.txt:1",
                         "base: 0x100000000 is out of range (at most 4294967295)");
    /* past 64 bits: out of range too, not "not a number" */
    expect_regions_error("regions: 2^64", "ROM 0x80000000 2^64 1 16\n", "table.txt:1",
                         "size: 2^64 is out of range (at most 4294967296)");
    expect_regions_error("regions: 20 digits", "ROM 0x80000000 1M 99999999999999999999G 16\n", "table.txt:1",
                         "max_instances: 99999999999999999999G is out of range (at most 4294967295; a K, M or G");
    expect_regions_error("regions: 2^ alone", "ROM 0x80000000 2^ 1 16\n", "table.txt:1", "size: '2^' is not a number");
}

/* a NUL byte: not a text file (it would have cut its line short) */
static void nul_byte_in_region_file_is_refused(pk_context *ctx) {
    static const char nul[] = "ROM 0x80000000 128M 32 2^22\nRAM 0xA0000000 512M 256 2^22 \0 extra\n";
    char *rd = fresh_dir("regions_nul");
    write_file(rd, "nul.txt", nul, sizeof nul - 1);
    char path[600];
    snprintf(path, sizeof path, "%s/nul.txt", rd);
    pk_memsort_regions t;
    CHECK(pk_memsort_regions_read(ctx, path, &t) == PK_ERR_PARSE && strstr(ctx->message, "nul.txt:2: a NUL byte"),
          "a NUL byte in a region file: %s", ctx->message);
}

/* Whether chunk 0 in `dir` still begins with the 100 entries of `older`. */
static int chunk0_is_older(const char *dir, const pk_memsort_trace *older) {
    char c0[700];
    snprintf(c0, sizeof c0, "%s/mem_addr_0000.bin", dir);
    FILE *f0 = fopen(c0, "rb");
    uint32_t first[100];
    int same = f0 && fread(first, 4, 100, f0) == 100 && memcmp(first, older->addr, sizeof first) == 0;
    if (f0) fclose(f0);
    return same;
}

/* An empty file at `path`. */
static void touch(const char *path) {
    FILE *fp = fopen(path, "w");
    if (fp) fclose(fp);
}

/* a trace that is not one is refused, and the folder's chunk files stay;
 * `back` is that trace read back */
static void invalid_trace_is_not_written(pk_context *ctx, const pk_memsort_regions *def, const char *td,
                                         pk_memsort_trace *trace, pk_memsort_trace *back) {
    pk_memsort_trace empty;
    memset(&empty, 0, sizeof empty);
    snprintf(ctx->message, sizeof ctx->message, "stale");
    pk_status st = pk_memsort_trace_write(ctx, td, &empty);
    CHECK(st == PK_ERR_INVALID && strstr(ctx->message, "0 chunks"), "a trace of no chunks: status %d: %s", (int)st,
          ctx->message);
    uint64_t kept = trace->chunk_start[3];
    trace->chunk_start[3] = trace->chunk_start[4] + 1;
    st = pk_memsort_trace_write(ctx, td, trace);
    CHECK(st == PK_ERR_INVALID && strstr(ctx->message, "chunk 3"), "chunk starts going back: status %d: %s", (int)st,
          ctx->message);
    trace->chunk_start[3] = kept;
    CHECK_OK(pk_memsort_trace_read(ctx, td, def, back), ctx);
    CHECK(back->n_chunks == 10 && back->n_entries == 1000, "the written trace survives: %u chunks, %llu entries",
          back->n_chunks, (unsigned long long)back->n_entries);
}

/* a rename refused midway (chunk 7's name taken by a folder): the
 * chunks already renamed get their older files back */
static void refused_rename_puts_older_chunks_back(pk_context *ctx, const char *td, const pk_memsort_trace *other,
                                                  const pk_memsort_trace *older) {
    char c7[700], c7x[720];
    snprintf(c7, sizeof c7, "%s/mem_addr_0007.bin", td);
    snprintf(c7x, sizeof c7x, "%s/x", c7);
    CHECK(unlink(c7) == 0 && mkdir(c7, 0777) == 0, "chunk 7 made a folder");
    touch(c7x);
    pk_status st = pk_memsort_trace_write(ctx, td, other);
    CHECK(st == PK_ERR_IO && strstr(ctx->message, "mem_addr_0007.bin: cannot rename into place"),
          "rename refused midway: status %d: %s", (int)st, ctx->message);
    CHECK(chunk0_is_older(td, older), "chunk 0 is not the older trace's after a failed write");
    unlink(c7x);
    rmdir(c7);
}

/* a name that would make the folder unreadable as a trace is
 * refused before anything is written */
static void odd_chunk_name_in_the_folder_refuses_a_write(pk_context *ctx, const char *td, const pk_memsort_trace *other,
                                                         const pk_memsort_trace *older) {
    char odd[700];
    snprintf(odd, sizeof odd, "%s/mem_addr_00001.bin", td);
    touch(odd);
    pk_status st = pk_memsort_trace_write(ctx, td, other);
    CHECK(st == PK_ERR_PARSE && strstr(ctx->message, "mem_addr_00001.bin: not a chunk file name"),
          "an odd chunk name in the folder: status %d: %s", (int)st, ctx->message);
    CHECK(chunk0_is_older(td, older), "chunk 0 changed although the write was refused");
    unlink(odd);
}

/* ... and so is a chunk-like name that is not four digits: read
 * back, the trace would silently lack it */
static void chunk_name_of_letters_is_refused(pk_context *ctx, const pk_memsort_regions *def, const char *td,
                                             const pk_memsort_trace *other) {
    char odd[700];
    snprintf(odd, sizeof odd, "%s/mem_addr_000a.bin", td);
    touch(odd);
    pk_memsort_trace again;
    pk_status st = pk_memsort_trace_read(ctx, td, def, &again);
    CHECK(st == PK_ERR_PARSE && strstr(ctx->message, "mem_addr_000a.bin: not a chunk file name"),
          "a chunk name of letters, read: status %d: %s", (int)st, ctx->message);
    if (st == PK_OK) pk_memsort_trace_free(&again);
    st = pk_memsort_trace_write(ctx, td, other);
    CHECK(st == PK_ERR_PARSE && strstr(ctx->message, "mem_addr_000a.bin: not a chunk file name"),
          "a chunk name of letters, written: status %d: %s", (int)st, ctx->message);
    unlink(odd);
}

/* a generated trace over the table's capacity names the region, not
 * chunk files that were never written */
static void generated_trace_over_capacity_names_the_region(pk_context *ctx, const pk_memsort_regions *def,
                                                           const pk_memsort_gen_options *g) {
    pk_memsort_regions small = *def;
    small.region[2].max_instances = 1;
    small.region[2].instance_entries = 16;
    pk_memsort_trace over;
    pk_status st = pk_memsort_generate(ctx, &small, g, &over);
    CHECK(st == PK_ERR_INVALID && strstr(ctx->message, "in region RAM, more than its 1 instances of 16 rows") &&
              !strstr(ctx->message, "mem_addr"),
          "generated over capacity: status %d: %s", (int)st, ctx->message);
}

/* a successful call leaves no message; freeing NULL is allowed */
static void success_clears_the_message(pk_context *ctx) {
    snprintf(ctx->message, sizeof ctx->message, "stale");
    pk_memsort_regions z;
    CHECK_OK(pk_memsort_regions_preset(ctx, "zisk", &z), ctx);
    CHECK(ctx->message[0] == '\0', "a successful call leaves a message: %s", ctx->message);
    pk_memsort_trace_free(NULL); /* as free(NULL) */
    pk_memsort_result_free(NULL);
}

/* a trace that is not one is refused, and the folder's chunk files stay */
static void folder_keeps_its_trace_when_a_write_fails(pk_context *ctx, const pk_memsort_regions *def) {
    pk_memsort_gen_options g = {1000, 5, 100, 0};
    pk_memsort_trace trace, back;
    CHECK_OK(pk_memsort_generate(ctx, def, &g, &trace), ctx);
    char *td = fresh_dir("keep");
    CHECK_OK(pk_memsort_trace_write(ctx, td, &trace), ctx);
    invalid_trace_is_not_written(ctx, def, td, &trace, &back);
    pk_memsort_gen_options g2 = {1000, 6, 100, 0};
    pk_memsort_trace other;
    CHECK_OK(pk_memsort_generate(ctx, def, &g2, &other), ctx);
    refused_rename_puts_older_chunks_back(ctx, td, &other, &back);
    odd_chunk_name_in_the_folder_refuses_a_write(ctx, td, &other, &back);
    chunk_name_of_letters_is_refused(ctx, def, td, &other);
    generated_trace_over_capacity_names_the_region(ctx, def, &g2);
    pk_memsort_trace_free(&other);
    success_clears_the_message(ctx);
    pk_memsort_trace_free(&back);
    pk_memsort_trace_free(&trace);
}

/* round trip of chunk files */
static void chunk_files_round_trip(pk_context *ctx, const pk_memsort_regions *def, const pk_memsort_trace *trace,
                                   pk_memsort_trace *back) {
    char *td = fresh_dir("roundtrip");
    CHECK_OK(pk_memsort_trace_write(ctx, td, trace), ctx);
    CHECK_OK(pk_memsort_trace_read(ctx, td, def, back), ctx);
    CHECK(back->n_entries == trace->n_entries && back->n_chunks == trace->n_chunks &&
              memcmp(back->addr, trace->addr, trace->n_entries * 4) == 0 &&
              memcmp(back->chunk_start, trace->chunk_start, (trace->n_chunks + 1) * 8) == 0,
          "chunk files do not round-trip");
}

/* memsort.bin at `path` has the size the documented layout gives, and its magic */
static void memsort_bin_has_the_documented_size(const char *path, const pk_memsort_regions *def,
                                                const pk_memsort_result *res) {
    struct stat sb;
    CHECK(stat(path, &sb) == 0, "no memsort.bin");
    uint64_t counts = (uint64_t)res->n_owned * res->n_chunks;
    uint64_t expect = 72 + 48ull * def->n_regions + 8ull * (res->n_chunks + 1) + 96ull * res->n_instances +
                      4 * (counts + counts % 2) + 8 * res->n_runs + 4 * (res->n_values + res->n_values % 2);
    CHECK((uint64_t)sb.st_size == expect, "memsort.bin has %lld bytes, the layout gives %llu", (long long)sb.st_size,
          (unsigned long long)expect);
    FILE *fp = fopen(path, "rb");
    char magic[9] = {0};
    CHECK(fp && fread(magic, 1, 8, fp) == 8 && strcmp(magic, "PKMSORT1") == 0, "bad magic");
    if (fp) fclose(fp);
}

/* writing into a path that is a file fails and leaves nothing */
static void writing_into_a_file_path_fails(pk_context *ctx, const pk_memsort_regions *def, const pk_memsort_result *res,
                                           const char *path) {
    CHECK(pk_memsort_write(ctx, path, def, res) != PK_OK && strstr(ctx->message, "memsort.bin: not a directory"),
          "writing into a file path: %s", ctx->message);
    pk_memsort_trace one_chunk = {4, (uint32_t[]){0x80000000u, 0x80000008u, 0x80000000u, 0x90000000u}, 1,
                                  (uint64_t[]){0, 4}, 0};
    CHECK(pk_memsort_trace_write(ctx, path, &one_chunk) != PK_OK &&
              strstr(ctx->message, "memsort.bin: not a directory (the folder for the chunk files"),
          "chunk files into a file path: %s", ctx->message);
}

/* when the second file cannot be moved into place (summary.txt is a
 * folder), the first is put back: the older memsort.bin stays */
static void failed_second_rename_keeps_the_older_memsort_bin(pk_context *ctx, const pk_memsort_regions *def,
                                                             const pk_memsort_result *res, const char *od,
                                                             const char *path) {
    char txt[700], inner[720], old[8] = {0};
    snprintf(txt, sizeof txt, "%s/summary.txt", od);
    snprintf(inner, sizeof inner, "%s/x", txt);
    FILE *keep = fopen(path, "r+b");
    CHECK(keep && fwrite("OLDFILE", 1, 7, keep) == 7, "marking the older memsort.bin");
    if (keep) fclose(keep);
    CHECK(unlink(txt) == 0 && mkdir(txt, 0777) == 0, "summary.txt made a folder");
    touch(inner);
    pk_status wst = pk_memsort_write(ctx, od, def, res);
    CHECK(wst == PK_ERR_IO && strstr(ctx->message, "summary.txt: cannot move into place"),
          "second rename failing: status %d: %s", (int)wst, ctx->message);
    FILE *fp = fopen(path, "rb");
    CHECK(fp && fread(old, 1, 7, fp) == 7 && strcmp(old, "OLDFILE") == 0, "the older memsort.bin changed");
    if (fp) fclose(fp);
    char ls[800];
    snprintf(ls, sizeof ls, "test $(ls -a '%s' | wc -l) -eq 4", od); /* . .. memsort.bin summary.txt */
    CHECK(system(ls) == 0, "files left in %s", od);
    /* and with no older memsort.bin, the new one moved in first is taken
     * out again: both outputs or neither */
    CHECK(unlink(path) == 0, "removing memsort.bin");
    wst = pk_memsort_write(ctx, od, def, res);
    CHECK(wst == PK_ERR_IO && strstr(ctx->message, "summary.txt: cannot move into place"),
          "second rename failing, no older file: status %d: %s", (int)wst, ctx->message);
    CHECK(access(path, F_OK) != 0, "memsort.bin left alone after its group failed");
    snprintf(ls, sizeof ls, "test $(ls -a '%s' | wc -l) -eq 3", od); /* . .. summary.txt */
    CHECK(system(ls) == 0, "files left in %s", od);
}

/* round trip of chunk files, then memsort.bin's size */
static void trace_and_memsort_bin_round_trip(pk_context *ctx, const pk_memsort_regions *def) {
    pk_memsort_gen_options g = {100000, 5, 7777, 0};
    pk_memsort_trace trace, back;
    CHECK_OK(pk_memsort_generate(ctx, def, &g, &trace), ctx);
    chunk_files_round_trip(ctx, def, &trace, &back);
    pk_memsort_result res;
    pk_memsort_result_init(&res);
    pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, 1, 0};
    CHECK_OK(pk_memsort_run(ctx, &o, def, &back, &res), ctx);
    char od[600];
    snprintf(od, sizeof od, "%s", fresh_dir("out"));
    CHECK_OK(pk_memsort_write(ctx, od, def, &res), ctx);
    char path[700];
    snprintf(path, sizeof path, "%s/memsort.bin", od);
    memsort_bin_has_the_documented_size(path, def, &res);
    writing_into_a_file_path_fails(ctx, def, &res, path);
    failed_second_rename_keeps_the_older_memsort_bin(ctx, def, &res, od, path);
    pk_memsort_result_free(&res);
    pk_memsort_trace_free(&trace);
    pk_memsort_trace_free(&back);
}

/* A trace small enough to work out by hand. Regions of 16 words: A at
 * 0x1000 in instances of 4, E at 0x2000 (left empty), B at 0x3000 in
 * instances of 2. Positions 0..8 hold A+8, A+0, A+8, A+8, B+0, A+16, A+8,
 * A+8, B+0 in chunks [0, 2) and [2, 9). A's stable order is 0x1000@1,
 * 0x1008@0, 0x1008@2, 0x1008@3 | 0x1008@6, 0x1008@7, 0x1010@5 (the run of
 * 0x1008 crosses the boundary, the last instance is partial); E has no
 * instance; B's one whole instance is 0x3000@4, 0x3000@8. */
static pk_memsort_regions hand_regions(void) {
    pk_memsort_regions t;
    memset(&t, 0, sizeof t);
    t.n_regions = 3;
    const char *names[3] = {"A", "E", "B"};
    const uint32_t rows[3] = {4, 4, 2};
    for (int r = 0; r < 3; r++) {
        strcpy(t.region[r].name, names[r]);
        t.region[r].base = 0x1000u * (uint32_t)(r + 1);
        t.region[r].size = 8 * 16;
        t.region[r].max_instances = 8;
        t.region[r].instance_entries = rows[r];
    }
    return t;
}

static uint32_t hand_addr[9] = {0x1008, 0x1000, 0x1008, 0x1008, 0x3000, 0x1010, 0x1008, 0x1008, 0x3000};
static uint64_t hand_chunk_start[3] = {0, 2, 9};

/* the plans worked out by hand: gid, region, index, first_row, n_rows,
 * first_addr, last_addr, first_chunk, first_skip, first_skip_total,
 * last_chunk, last_include, last_include_total, has_prev, prev_addr,
 * prev_value, n_runs */
static const uint32_t hand_plan[3][17] = {
    {0, 0, 0, 0, 4, 0x1000, 0x1008, 0, 0, 0, 1, 2, 3, 0, 0, 0, 2},
    {1, 0, 1, 4, 3, 0x1008, 0x1010, 1, 2, 3, 1, 1, 1, 1, 0x1008, 3, 2},
    {2, 2, 0, 0, 2, 0x3000, 0x3000, 1, 0, 0, 1, 2, 2, 0, 0, 0, 1},
};
static const uint32_t hand_values[3][4] = {{1, 0, 2, 3}, {6, 7, 5}, {4, 8}};
static const uint32_t hand_counts[3][2] = {{2, 2}, {0, 3}, {0, 2}};

static void check_hand_plans(const char *what, const pk_memsort_result *res, uint32_t n_workers, uint32_t worker) {
    CHECK(res->n_instances == 3 && res->n_entries == 9 && res->n_chunks == 2, "%s: %u instances, %llu entries", what,
          res->n_instances, (unsigned long long)res->n_entries);
    if (res->n_instances != 3) return;
    for (uint32_t g = 0; g < 3; g++) {
        const pk_memsort_instance *in = &res->instances[g];
        const uint32_t *e = hand_plan[g];
        uint32_t got[17] = {in->gid,
                            in->region,
                            in->index,
                            (uint32_t)in->first_row,
                            in->n_rows,
                            in->first_addr,
                            in->last_addr,
                            in->first_chunk,
                            in->first_skip,
                            in->first_skip_total,
                            in->last_chunk,
                            in->last_include,
                            in->last_include_total,
                            in->has_prev,
                            in->prev_addr,
                            in->prev_value,
                            in->n_runs};
        uint32_t owned = g % n_workers == worker;
        int n_fields = owned ? 17 : 16; /* n_runs: owned instances only */
        for (int f = 0; f < n_fields; f++)
            CHECK(got[f] == e[f], "%s: instance %u: field %d is %u, by hand %u", what, g, f, got[f], e[f]);
        CHECK(in->owned == owned, "%s: instance %u owned %u", what, g, in->owned);
        if (!owned || in->n_rows != e[4]) continue;
        uint32_t pairs[8];
        pk_memsort_instance_rows(res, in, pairs);
        for (uint32_t j = 0; j < in->n_rows; j++) {
            uint32_t v = hand_values[g][j];
            CHECK(pairs[2 * j] == hand_addr[v] && pairs[2 * j + 1] == v, "%s: instance %u row %u: (0x%x, %u)", what, g,
                  j, pairs[2 * j], pairs[2 * j + 1]);
        }
        for (uint32_t c = 0; c < 2; c++)
            CHECK(res->chunk_counts[in->counts_offset + c] == hand_counts[g][c], "%s: instance %u chunk %u: %u rows",
                  what, g, c, res->chunk_counts[in->counts_offset + c]);
    }
}

/* every kernel (CUDA's on a GPU), 1 and 2 workers, against the plans worked out by hand;
 * memsort.bin read back and summary.txt's lines against them too */
static void hand_made_trace_gives_the_hand_made_plans(pk_context *ctx) {
    pk_memsort_regions t = hand_regions();
    pk_memsort_trace trace = {.n_entries = 9, .addr = hand_addr, .n_chunks = 2, .chunk_start = hand_chunk_start};
    /* the CUDA kernel too where a device is present */
    const int kernels[4] = {PK_MEMSORT_KERNEL_REF, PK_MEMSORT_KERNEL_CPU, PK_MEMSORT_KERNEL_CPU_PORTABLE,
                            PK_MEMSORT_KERNEL_CUDA};
    const int n_kernels = pk_cuda_device_count() > 0 ? 4 : 3;
    pk_memsort_result res;
    pk_memsort_result_init(&res);
    for (int k = 0; k < n_kernels; k++)
        for (uint32_t w = 0; w < 3; w++) {
            uint32_t n_workers = w == 0 ? 1 : 2, worker = w == 0 ? 0 : w - 1;
            pk_memsort_options o = {kernels[k] == PK_MEMSORT_KERNEL_CUDA ? PK_BACKEND_CUDA : PK_BACKEND_CPU, kernels[k],
                                    n_workers, worker};
            char what[96];
            snprintf(what, sizeof what, "hand-made trace, %s, worker %u of %u", pk_memsort_kernel_name(kernels[k]),
                     worker, n_workers);
            pk_status st = pk_memsort_run(ctx, &o, &t, &trace, &res);
            CHECK_OK(st, ctx);
            if (!st) check_hand_plans(what, &res, n_workers, worker);
        }
    pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, 1, 0};
    CHECK_OK(pk_memsort_run(ctx, &o, &t, &trace, &res), ctx);
    /* summary.txt: a line per region and per instance, the plans' numbers */
    char *od = fresh_dir("hand");
    CHECK_OK(pk_memsort_write(ctx, od, &t, &res), ctx);
    pk_memsort_regions back_t;
    pk_memsort_result back;
    pk_memsort_result_init(&back);
    char path[700];
    snprintf(path, sizeof path, "%s/memsort.bin", od);
    CHECK_OK(pk_memsort_read(ctx, path, 1, &back_t, &back), ctx);
    if (back.n_instances == 3) check_hand_plans("hand-made trace, memsort.bin read back", &back, 1, 0);
    snprintf(path, sizeof path, "%s/summary.txt", od);
    char *text = read_text(path);
    CHECK(text != NULL, "%s: not written", path);
    if (text) {
        char want[160];
        snprintf(want, sizeof want, "entries 9  chunks 2  instances 3\n");
        CHECK(strstr(text, want) != NULL, "summary.txt lacks '%s':\n%s", want, text);
        snprintf(want, sizeof want, "worker 0 of 1: 3 instances owned, 9 rows, 5 runs\n");
        CHECK(strstr(text, want) != NULL, "summary.txt lacks '%s':\n%s", want, text);
        const char *names[3] = {"A", "E", "B"};
        const unsigned entries[3] = {7, 0, 2}, rows[3] = {4, 4, 2};
        for (int r = 0; r < 3; r++) {
            snprintf(want, sizeof want,
                     "region %-8s base 0x%08x size 0x%09x  %u entries in instances of %u (at most 8 instances)\n",
                     names[r], 0x1000u * (r + 1), 0x80u, entries[r], rows[r]);
            CHECK(strstr(text, want) != NULL, "summary.txt lacks '%s':\n%s", want, text);
        }
        for (int g = 0; g < 3; g++) {
            const uint32_t *e = hand_plan[g];
            /* gid, region, index, rows, first and last address, first chunk and skip, last chunk and include */
            snprintf(want, sizeof want, "%5u %-8s %5u %8u 0x%08x 0x%08x %6u %8u %6u %8u %5s\n", e[0], names[e[1]], e[2],
                     e[4], e[5], e[6], e[7], e[8], e[10], e[11], "yes");
            CHECK(strstr(text, want) != NULL, "summary.txt lacks '%s':\n%s", want, text);
        }
    }
    free(text);
    pk_memsort_result_free(&back);
    pk_memsort_result_free(&res);
}

/* entries at a region's first and last words count towards its
 * capacity: a capacity of the count passes, one less fails */
static void capacity_counts_the_regions_edge_words(pk_context *ctx) {
    pk_memsort_regions t = hand_regions();
    /* A: its last word three times, its first once; E: its last word twice */
    uint32_t addr[6] = {0x1078, 0x2078, 0x1000, 0x1078, 0x2078, 0x1078};
    uint64_t cs[2] = {0, 6};
    pk_memsort_trace trace = {.n_entries = 6, .addr = addr, .n_chunks = 1, .chunk_start = cs};
    const uint32_t in_region[2] = {4, 2};
    for (int r = 0; r < 2; r++) {
        pk_memsort_regions capped = t;
        capped.region[r].instance_entries = 1;
        capped.region[r].max_instances = in_region[r];
        CHECK_OK(pk_memsort_trace_check(ctx, &capped, &trace), ctx);
        capped.region[r].max_instances = in_region[r] - 1;
        CHECK(pk_memsort_trace_check(ctx, &capped, &trace) == PK_ERR_PARSE && strstr(ctx->message, t.region[r].name),
              "region %s capped one below its %u entries at its edges: %s", t.region[r].name, in_region[r],
              ctx->message);
    }
}

/* The exit code of a system() status, -1 when it did not exit. */
static int exit_code(int rc) {
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* the CLI: a bad trace leaves no output behind; a good one writes it
 * (into cli_out, which later checks read) */
static void cli_writes_output_only_for_a_good_trace(const char *cli) {
    char command[2048], out[600];
    snprintf(out, sizeof out, "%s/cli_out", tmp_root);
    snprintf(command, sizeof command, "%s memsort %s/unaligned -o %s -q 2>/dev/null", cli, tmp_root, out);
    int rc = system(command);
    CHECK(rc != 0, "CLI accepted a bad trace");
    char bin[700];
    snprintf(bin, sizeof bin, "%s/memsort.bin", out);
    CHECK(!exists(bin), "CLI left %s after an error", bin);
    snprintf(command, sizeof command, "%s memsort %s/roundtrip -o %s -q --verify --workers 3 --worker 2", cli, tmp_root,
             out);
    CHECK(system(command) == 0, "CLI failed on a good trace: %s", command);
    CHECK(exists(bin), "CLI wrote no %s", bin);
}

/* a pipe where memsort.bin goes: refused before the sort, the pipe
 * and the older summary.txt kept */
static void pipe_as_memsort_bin_is_refused(const char *cli) {
    char command[2048], fifo[200], txt[300], path[300];
    snprintf(fifo, sizeof fifo, "%s/fifo_out", tmp_root);
    snprintf(command, sizeof command, "mkdir -p %s && mkfifo %s/memsort.bin && echo older > %s/summary.txt", fifo, fifo,
             fifo);
    CHECK(system(command) == 0, "%s", command);
    snprintf(command, sizeof command, "%s memsort %s/roundtrip -o %s -q 2> %s/fifo_err.txt", cli, tmp_root, fifo,
             tmp_root);
    int rc = system(command);
    snprintf(path, sizeof path, "%s/fifo_err.txt", tmp_root);
    char *fifo_err = read_text(path);
    snprintf(path, sizeof path, "%s/memsort.bin", fifo);
    snprintf(txt, sizeof txt, "%s/summary.txt", fifo);
    char *older = read_text(txt);
    struct stat sb;
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && fifo_err &&
              strstr(fifo_err, "memsort.bin: cannot write: is not a regular"),
          "a pipe as memsort.bin: exit %d, %s", exit_code(rc), fifo_err ? fifo_err : "");
    CHECK(lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode) && older && strcmp(older, "older\n") == 0,
          "a pipe as memsort.bin: the outputs were changed");
    free(fifo_err);
    free(older);
}

/* found before any input is read (the inputs named do not exist):
 * options this build or machine cannot run, and an output folder
 * that cannot take the outputs */
static void unusable_options_are_found_before_the_input(const char *cli) {
    struct {
        const char *args, *want;
        int code;
    } early[] = {
        {"memsort %s/nosuch -o %s/early -q --kernel ref --backend cuda", "does not belong to backend 'cuda'", 2},
        {"memsort %s/nosuch -o %s/early_dir -q", "early_dir/memsort.bin: cannot write: is a directory", 1},
        {"memsort-fill %s/nosuch.bin %s/nosuch -o %s/early_dir -q", "early_dir/fill.bin: cannot write: is a directory",
         1},
    };
    char command[2048], path[300];
    snprintf(command, sizeof command, "mkdir -p %s/early_dir/memsort.bin %s/early_dir/fill.bin", tmp_root, tmp_root);
    CHECK(system(command) == 0, "%s", command);
    for (size_t k = 0; k < sizeof early / sizeof early[0]; k++) {
        char args[1200];
        if (strncmp(early[k].args, "memsort-fill", 12) == 0)
            snprintf(args, sizeof args, early[k].args, tmp_root, tmp_root, tmp_root);
        else snprintf(args, sizeof args, early[k].args, tmp_root, tmp_root);
        snprintf(command, sizeof command, "%s %s 2> %s/early_err.txt", cli, args, tmp_root);
        int rc = system(command);
        snprintf(path, sizeof path, "%s/early_err.txt", tmp_root);
        char *err = read_text(path);
        CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == early[k].code && err && strstr(err, early[k].want) &&
                  !strstr(err, "nosuch"),
              "'%s': exit %d, '%s' lacks '%s' (or names the input)", args, exit_code(rc), err ? err : "",
              early[k].want);
        free(err);
    }
}

/* usage errors: exit 2 and a message naming the option */
static void usage_errors_exit_2_naming_the_option(const char *cli) {
    struct {
        const char *args, *want;
    } usage[] = {
        {"memsort %s/roundtrip -o %s/w -q --workers 3", "give --worker w too"},
        {"memsort %s/roundtrip -o '' -q%s", "-o: the output directory is an empty name"},
        {"memsort-gen ''%.0s%s --entries 100", "the output directory is an empty name"},
        {"memsort-gen %s/g%s --entries 4096 --seed 18446744073709551616", "--seed: 18446744073709551616 is too large"},
        {"memsort-gen %s/g%s --entries 17592186044417M", "--entries: '17592186044417M' is not a count"},
        {"memsort-gen %s/g%s --entries 2^64", "--entries: '2^64' is not a count"},
        {"bench memsort --backend cpu --entries 2^70%.0s%.0s", "--entries: '2^70' is not a count"},
    };
    for (size_t k = 0; k < sizeof usage / sizeof usage[0]; k++) {
        char args[1200], err_path[700], command[2048];
        snprintf(args, sizeof args, usage[k].args, tmp_root, strstr(usage[k].args, "-o %s") ? tmp_root : "");
        snprintf(err_path, sizeof err_path, "%s/usage_err.txt", tmp_root);
        snprintf(command, sizeof command, "%s %s > /dev/null 2> %s", cli, args, err_path);
        int rc = system(command);
        FILE *fp = fopen(err_path, "r");
        char err[1000] = "";
        if (fp) {
            size_t got = fread(err, 1, sizeof err - 1, fp);
            err[got] = '\0';
            fclose(fp);
        }
        CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2 && strstr(err, usage[k].want), "'%s': exit %d, '%s' lacks '%s'",
              args, exit_code(rc), err, usage[k].want);
    }
}

/* no output replaces an input: the region table given as OUT/summary.txt
 * (it was overwritten, exit 0) */
static void region_table_as_summary_txt_is_kept(const char *cli, const char *dir) {
    char command[2400], file[700];
    snprintf(command, sizeof command,
             "mkdir -p %s && printf 'ROM 0x80000000 128M 32 2^22\\nINPUT 0x90000000 128M 32 2^22\\nRAM "
             "0xA0000000 512M 256 2^22\\n' > %s/summary.txt",
             dir, dir);
    CHECK(system(command) == 0, "%s", command);
    snprintf(file, sizeof file, "%s/summary.txt", dir);
    char *table = read_text(file);
    snprintf(command, sizeof command, "%s memsort %s/roundtrip -o %s --regions %s -q 2>/dev/null", cli, tmp_root, dir,
             file);
    int rc = system(command);
    char *after = read_text(file);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2 && table && after && strcmp(table, after) == 0,
          "--regions OUT/summary.txt: exit %d, the table %s", exit_code(rc),
          after && table && strcmp(table, after) == 0 ? "kept" : "changed");
    free(table), free(after);
}

/* ... and the plans given as OUT/fill.bin (it was overwritten, exit 0) */
static void plans_as_fill_bin_are_kept(const char *cli, const char *dir) {
    char command[2400];
    snprintf(command, sizeof command, "cp %s/cli_out/memsort.bin %s/fill.bin", tmp_root, dir);
    CHECK(system(command) == 0, "%s", command);
    snprintf(command, sizeof command, "%s memsort-fill %s/fill.bin %s/roundtrip -o %s -q 2>/dev/null", cli, dir,
             tmp_root, dir);
    int rc = system(command);
    snprintf(command, sizeof command, "cmp -s %s/cli_out/memsort.bin %s/fill.bin", tmp_root, dir);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2 && system(command) == 0, "PLANS as OUT/fill.bin: exit %d, the plans %s",
          exit_code(rc), system(command) == 0 ? "kept" : "changed");
}

/* a folder where memsort-gen's chunk would go (it wrote a trace that did
 * not read back) */
static void gen_beside_a_folder_named_like_a_chunk_is_refused(const char *cli) {
    char command[2400], file[700];
    snprintf(command, sizeof command,
             "mkdir -p %s/gen/mem_addr_0005.bin && %s memsort-gen %s/gen --entries 1K -q 2> %s/gen_err.txt", tmp_root,
             cli, tmp_root, tmp_root);
    int rc = system(command);
    snprintf(file, sizeof file, "%s/gen_err.txt", tmp_root);
    char *err = read_text(file);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && err &&
              strstr(err, "mem_addr_0005.bin: not a regular file (a directory)"),
          "memsort-gen beside a folder named like a chunk: exit %d, %s", exit_code(rc), err ? err : "");
    free(err);
}

/* a chunk number past 4095 (four digits, so the name reads as a
 * chunk's): refused before writing, the file kept */
static void gen_beside_chunk_9999_is_refused(const char *cli) {
    char command[2400], file[700];
    snprintf(command, sizeof command,
             "mkdir -p %s/gen9 && echo keep > %s/gen9/mem_addr_9999.bin && %s memsort-gen %s/gen9 --entries 1K "
             "-q 2> %s/gen_err.txt",
             tmp_root, tmp_root, cli, tmp_root, tmp_root);
    int rc = system(command);
    snprintf(file, sizeof file, "%s/gen_err.txt", tmp_root);
    char *err = read_text(file);
    snprintf(command, sizeof command, "test -f %s/gen9/mem_addr_9999.bin && ! test -e %s/gen9/mem_addr_0000.bin",
             tmp_root, tmp_root);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && err && strstr(err, "mem_addr_9999.bin: chunk numbers end at 4095") &&
              system(command) == 0,
          "memsort-gen beside mem_addr_9999.bin: exit %d, %s", exit_code(rc), err ? err : "");
    free(err);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/pk_memsort_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions def;
    CHECK_OK(pk_memsort_regions_preset(&ctx, "default", &def), &ctx);

    unaligned_address_is_refused(&def);
    address_in_no_region_is_refused(&def);
    other_presets_address_names_the_preset(&def);
    truncated_chunk_is_refused(&def);
    large_trace_is_checked_exactly(&ctx, &def);
    missing_chunk_is_refused(&def);
    chunk_names_not_of_four_digits_are_refused(&def);
    folder_without_chunks_is_refused(&def);
    entries_past_capacity_are_refused(&def);

    malformed_region_tables_are_refused();
    region_file_reads_as_the_preset_it_spells(&ctx);
    region_numbers_out_of_range_are_refused();
    region_tables_at_their_limits(&ctx);
    nul_byte_in_region_file_is_refused(&ctx);

    folder_keeps_its_trace_when_a_write_fails(&ctx, &def);
    test_generate_dir(&def);
    test_generate_seeds(&def);
    trace_and_memsort_bin_round_trip(&ctx, &def);
    hand_made_trace_gives_the_hand_made_plans(&ctx);
    capacity_counts_the_regions_edge_words(&ctx);

    /* the command; later checks read the outputs of earlier ones
     * (unaligned, roundtrip, cli_out) */
    const char *cli = getenv("PAIRKIT_CLI");
    if (cli) {
        cli_writes_output_only_for_a_good_trace(cli);
        pipe_as_memsort_bin_is_refused(cli);
        unusable_options_are_found_before_the_input(cli);
        usage_errors_exit_2_naming_the_option(cli);
        char self[600];
        snprintf(self, sizeof self, "%s/self", tmp_root);
        region_table_as_summary_txt_is_kept(cli, self);
        plans_as_fill_bin_are_kept(cli, self);
        gen_beside_a_folder_named_like_a_chunk_is_refused(cli);
        gen_beside_chunk_9999_is_refused(cli);
    }

    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", tmp_root);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
    return check_finish("test_memsort_input");
}
