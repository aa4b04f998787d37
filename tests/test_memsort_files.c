/* test_memsort_files.c - memsort.bin read back (pk_memsort_read) equals the
 * result written, and every corruption of it is refused naming the file
 * and the field; the chunk files a worker holds (pk_memsort_chunks_read)
 * are read at their trace positions and checked against the plans; and
 * `pairkit memsort-fill` fills instances from a memsort.bin's plans and
 * some chunk files: its rows are the instance rows whose values lie in
 * those chunks, and bad input leaves the older output as it was. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memsort_util.h"

static char tmp_root[64];

static char *path_in(const char *name) {
    static char buf[4][600];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_root, name);
    return buf[k];
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    *n = fread(p, 1, (size_t)len, fp);
    fclose(fp);
    return p;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror(path);
        exit(1);
    }
    fwrite(p, 1, n, fp);
    fclose(fp);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void copy_chunk(const char *from_dir, const char *to_dir, uint32_t c) {
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/mem_addr_%04u.bin", from_dir, c);
    snprintf(b, sizeof b, "%s/mem_addr_%04u.bin", to_dir, c);
    size_t n;
    unsigned char *p = read_all(a, &n);
    CHECK(p != NULL, "reading %s", a);
    if (p) write_all(b, p, n);
    free(p);
}

/* A memsort.bin changed by `mutate` must be refused by pk_memsort_read with
 * both fragments in the message, the result left empty. */
static void expect_bad_file(const char *what, const unsigned char *good, size_t n, size_t new_n,
                            void (*mutate)(unsigned char *, void *), void *arg, const char *frag1, const char *frag2) {
    unsigned char *p = calloc(new_n > n ? new_n : n, 1);
    memcpy(p, good, n < new_n ? n : new_n);
    if (mutate) mutate(p, arg);
    char *path = path_in("bad.bin");
    write_all(path, p, new_n);
    free(p);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions regions;
    pk_memsort_result r;
    pk_memsort_result_init(&r);
    pk_status st = pk_memsort_read(&ctx, path, 1, &regions, &r);
    CHECK(st != PK_OK, "%s: accepted", what);
    CHECK(strstr(ctx.message, "bad.bin") && strstr(ctx.message, frag1) && strstr(ctx.message, frag2),
          "%s: message '%s' lacks '%s' or '%s'", what, ctx.message, frag1, frag2);
    CHECK(r.instances == NULL && r.n_instances == 0 && r.chunk_start == NULL, "%s: the result is not empty", what);
    printf("%s: %s\n", what, ctx.message);
    pk_memsort_result_free(&r);
}

typedef struct {
    size_t at;
    uint32_t value;
} poke;

static void poke_u32(unsigned char *p, void *arg) {
    const poke *k = arg;
    put32(p + k->at, k->value);
}

static void add_u32(unsigned char *p, void *arg) {
    const poke *k = arg;
    put32(p + k->at, get32(p + k->at) + k->value);
}

/* A progress callback that asks to cancel at its at-th call. */
typedef struct {
    int at, calls;
} cancel_at_ask;

static int cancel_at(void *user, double fraction) {
    (void)fraction;
    cancel_at_ask *c = user;
    return ++c->calls == c->at;
}

/* A progress callback that keeps the fractions it is given. */
typedef struct {
    double fraction[256];
    int n;
} fractions_seen;

static int keep_fraction(void *user, double fraction) {
    fractions_seen *f = user;
    if (f->n < 256) f->fraction[f->n] = fraction;
    f->n++;
    return 0;
}

/* pk_sync_file in steps: one ask of the callback a step, a cancellation
 * at any of them answered at once, the file whole when it runs through. */
static void sync_file_asks_once_a_step(void) {
    const size_t size = (1u << 20) + 100, step = 1u << 16; /* 17 steps, the last short */
    unsigned char *data = malloc(size);
    for (size_t i = 0; i < size; i++) data[i] = (unsigned char)(i * 131 + 7);
    int runs = 0;
    for (int at = 1; at <= 19; at++) {
        FILE *fp = fopen(path_in("sync.bin"), "wb");
        CHECK(fp && fwrite(data, 1, size, fp) == size, "writing sync.bin");
        if (!fp) break;
        cancel_at_ask stop = {at, 0};
        pk_context c;
        pk_context_init(&c);
        c.progress = cancel_at;
        c.progress_user = &stop;
        pk_progress p;
        pk_progress_begin(&p, &c, (double)size, 0, 1); /* ask 1 */
        int r = pk_sync_file(fp, step, &p);
        fclose(fp);
        if (at <= 18) {
            CHECK(r == 1 && stop.calls == at, "sync cancelled at ask %d: returned %d after %d asks", at, r, stop.calls);
        } else {
            size_t n = 0;
            unsigned char *back = read_all(path_in("sync.bin"), &n);
            CHECK(r == 0 && stop.calls == 18 && back && n == size && memcmp(back, data, size) == 0,
                  "sync run through: returned %d after %d asks (18 expected), file %s", r, stop.calls,
                  back && n == size && memcmp(back, data, size) == 0 ? "whole" : "differs");
            free(back);
        }
        runs++;
    }
    FILE *fp = fopen(path_in("sync.bin"), "wb");
    CHECK(fp && fwrite(data, 1, 10, fp) == 10 && pk_sync_file(fp, step, NULL) == 0, "sync without progress");
    if (fp) fclose(fp);
    printf("pk_sync_file: 17 steps, cancelled at each of 18 asks, then run through (%d runs)\n", runs);
    free(data);
}

/* Run the CLI; its exit code, stderr into err. */
static int run_cli(const char *args, char *err, size_t err_size) {
    const char *cli = getenv("PAIRKIT_CLI");
    char command[4096];
    snprintf(command, sizeof command, "%s %s > /dev/null 2> %s", cli, args, path_in("err.txt"));
    int rc = system(command);
    size_t n = 0;
    unsigned char *e = read_all(path_in("err.txt"), &n);
    snprintf(err, err_size, "%.*s", (int)n, e ? (const char *)e : "");
    free(e);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Every plan field of the W = 1 file that its rows determine, changed by
 * +1 and by -1 in one instance at a time: first_chunk, first_skip,
 * first_skip_total, last_chunk, last_include, last_include_total,
 * prev_value. pk_memsort_read with the rows must refuse each change (the
 * rows and the previous instance's rows pin them all down). Instances:
 * every fifth, and every one that starts with the previous one's last
 * address. */
static void plan_fields_against_rows_are_checked(const char *bin) {
    size_t n = 0;
    unsigned char *good = read_all(bin, &n);
    CHECK(good && n > 72, "reading %s", bin);
    if (!good) return;
    uint32_t n_chunks = get32(good + 24), n_regions = get32(good + 28), n_instances = get32(good + 32);
    size_t inst = 72 + 48 * (size_t)n_regions + 8 * ((size_t)n_chunks + 1);
    static const struct {
        const char *name;
        size_t at;
    } fields[] = {{"first_chunk", 36},  {"first_skip", 40},         {"first_skip_total", 44}, {"last_chunk", 48},
                  {"last_include", 52}, {"last_include_total", 56}, {"prev_value", 68}};
    unsigned char *p = malloc(n);
    char *path = path_in("plan_field.bin");
    int tried = 0, accepted = 0, shared = 0;
    for (uint32_t g = 0; g < n_instances && p; g++) {
        const unsigned char *in = good + inst + 96 * (size_t)g;
        int starts_with_prev = g > 0 && get32(in + 8) > 0 && get32(in + 28) == get32(in - 96 + 32);
        shared += starts_with_prev;
        if (g % 5 && !starts_with_prev) continue;
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            for (int d = -1; d <= 1; d += 2) {
                if (get32(in + fields[f].at) == 0 && d < 0) continue;
                memcpy(p, good, n);
                put32(p + inst + 96 * (size_t)g + fields[f].at, get32(in + fields[f].at) + (uint32_t)d);
                write_all(path, p, n);
                pk_context ctx;
                pk_context_init(&ctx);
                pk_memsort_regions regions;
                pk_memsort_result r;
                pk_memsort_result_init(&r);
                tried++;
                if (pk_memsort_read(&ctx, path, 1, &regions, &r) == PK_OK) {
                    accepted++;
                    fprintf(stderr, "instance %u: %s %+d accepted\n", g, fields[f].name, d);
                }
                pk_memsort_result_free(&r);
            }
    }
    CHECK(accepted == 0 && tried > 100 && shared > 10,
          "plan fields against the rows: %d of %d changes accepted (%d instances start with the previous one's last "
          "address)",
          accepted, tried, shared);
    printf(
        "plan fields against the rows: %d changes of %u instances' fields, all refused (%d instances share "
        "their first address with the one before)\n",
        tried, n_instances, shared);
    free(p);
    free(good);
}

/* Whether the file at `path` holds exactly the n bytes `old`. */
static int file_holds(const char *path, const unsigned char *old, size_t n) {
    size_t now_n = 0;
    unsigned char *now = read_all(path, &now_n);
    int same = now && now_n == n && memcmp(now, old, n) == 0;
    free(now);
    return same;
}

/* What the checks below share: the small region table, a trace generated
 * once into the folder "trace", worker 2 of 3's plans and the folder of the
 * chunk files that worker holds. Later checks read what earlier ones wrote
 * (out1, out3, held, bad*, fill), so they run in the order main gives. */
typedef struct {
    pk_context ctx;
    pk_memsort_regions small;
    pk_memsort_trace trace;
    char trace_dir[600];
    pk_memsort_result plans; /* worker 2 of 3's, without rows */
    char held[600];
} fixture;

/* The chunks worker 2 of 3 holds, copied into the fixture's `held`. */
static const uint32_t mine[] = {1, 2, 5, 11, 19};
static const uint32_t n_mine = sizeof mine / sizeof mine[0];

/* a table file for the CLI, the same table */
static void write_small_table(const pk_memsort_regions *small) {
    char text[512];
    int len = 0;
    for (uint32_t r = 0; r < small->n_regions; r++)
        len += snprintf(text + len, sizeof text - (size_t)len, "%s 0x%x %llu %u %u\n", small->region[r].name,
                        small->region[r].base, (unsigned long long)small->region[r].size,
                        small->region[r].max_instances, small->region[r].instance_entries);
    write_all(path_in("small.txt"), text, (size_t)len);
}

/* a position's chunk by the table: an empty chunk is never the answer */
static void chunk_at_skips_empty_chunks(void) {
    const uint64_t table[5] = {0, 5, 5, 10, 11};
    const uint64_t pos[6] = {0, 4, 5, 9, 10, 3};
    const uint32_t want[6] = {0, 0, 2, 2, 3, 0};
    for (int k = 0; k < 6; k++)
        CHECK(pk_memsort_chunk_at(table, 4, pos[k]) == want[k], "pk_memsort_chunk_at(%llu): %u, expected %u",
              (unsigned long long)pos[k], pk_memsort_chunk_at(table, 4, pos[k]), want[k]);
}

/* The trace every later check uses, written into the folder "trace". */
static void generate_shared_trace(fixture *fx) {
    pk_memsort_gen_options g = {20000, 11, 1000, 1}; /* awkward: runs across and over instances */
    CHECK_OK(pk_memsort_generate(&fx->ctx, &fx->small, &g, &fx->trace), &fx->ctx);
    snprintf(fx->trace_dir, sizeof fx->trace_dir, "%s", path_in("trace"));
    CHECK_OK(pk_memsort_trace_write(&fx->ctx, fx->trace_dir, &fx->trace), &fx->ctx);
}

/* memsort.bin read back equals what was written, for W = 1 and worker 2 of 3
 * (this one into out1, worker w of W into out3) */
static void memsort_bin_reads_back_as_written(fixture *fx, uint32_t n_workers, uint32_t worker, const char *out_name) {
    pk_context *ctx = &fx->ctx;
    const pk_memsort_trace *trace = &fx->trace;
    pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, n_workers, worker};
    pk_memsort_result res, back, plans;
    pk_memsort_result_init(&res);
    pk_memsort_result_init(&back);
    pk_memsort_result_init(&plans);
    CHECK_OK(pk_memsort_run(ctx, &o, &fx->small, trace, &res), ctx);
    char *out = path_in(out_name);
    CHECK_OK(pk_memsort_write(ctx, out, &fx->small, &res), ctx);
    pk_memsort_regions t;
    CHECK_OK(pk_memsort_read(ctx, out, 1, &t, &back), ctx);
    CHECK(memcmp(&t, &fx->small, sizeof t) == 0, "W=%u: the region table read back differs", o.n_workers);
    CHECK_OK(pk_memsort_compare(ctx, &res, &back), ctx);
    CHECK(back.chunk_start && memcmp(back.chunk_start, trace->chunk_start, (trace->n_chunks + 1) * 8) == 0 &&
              back.n_workers == o.n_workers && back.worker == o.worker && back.n_entries == trace->n_entries,
          "W=%u: chunk table or header read back differs", o.n_workers);
    /* plans alone: no rows, the same plans and counts; they fill every
     * instance (owned or not) from all chunks as the run made it */
    char bin[700];
    snprintf(bin, sizeof bin, "%s/memsort.bin", out);
    CHECK_OK(pk_memsort_read(ctx, bin, 0, &t, &plans), ctx);
    CHECK(plans.n_runs == 0 && plans.n_values == 0 && plans.n_instances == res.n_instances &&
              memcmp(plans.chunk_counts, res.chunk_counts, (size_t)res.n_owned * res.n_chunks * 4) == 0,
          "plans-only read");
    CHECK(test_fill_from_plan("plans read back", trace, &back) == 0, "filling from the plans read back");
    pk_memsort_result_free(&res);
    pk_memsort_result_free(&back);
    pk_memsort_result_free(&plans);
}

/* a result with no chunk table cannot be written */
static void result_without_chunk_table_is_not_written(fixture *fx) {
    pk_memsort_result empty;
    pk_memsort_result_init(&empty);
    CHECK(pk_memsort_write(&fx->ctx, path_in("none"), &fx->small, &empty) == PK_ERR_INVALID &&
              strstr(fx->ctx.message, "no chunk table"),
          "writing a result without a chunk table: %s", fx->ctx.message);
}

/* A file's bytes, kept to compare with it later or to put back. */
typedef struct {
    char path[700];
    unsigned char *bytes;
    size_t n;
} kept_file;

static kept_file keep_file(const char *path) {
    kept_file k;
    snprintf(k.path, sizeof k.path, "%s", path);
    k.n = 0;
    k.bytes = read_all(path, &k.n);
    return k;
}

/* A write cancelled at each ask in turn until one lets it finish; returns
 * how many were cancelled. */
static int write_cancelled_at_each_ask(fixture *fx, const pk_memsort_result *res, const kept_file *bin,
                                       const kept_file *txt) {
    int cancelled = 0;
    for (int at = 1; at < 100; at++) {
        cancel_at_ask stop = {at, 0};
        pk_context c;
        pk_context_init(&c);
        c.progress = cancel_at;
        c.progress_user = &stop;
        pk_status st = pk_memsort_write(&c, path_in("out3"), &fx->small, res);
        if (st == PK_OK) break;
        cancelled++;
        CHECK(st == PK_ERR_CANCELLED && strcmp(c.message, "cancelled") == 0, "write cancelled at ask %d: status %d: %s",
              at, (int)st, c.message);
        CHECK(file_holds(bin->path, bin->bytes, bin->n) && file_holds(txt->path, txt->bytes, txt->n),
              "write cancelled at ask %d: the older pair changed", at);
        char cmd[800];
        snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c tmp > /dev/null", path_in("out3"));
        CHECK(system(cmd) != 0, "write cancelled at ask %d: a temporary file is left", at);
    }
    return cancelled;
}

/* the fraction: from 0, half once the files are written, whole at the end, never back */
static void write_progress_runs_from_0_to_1(fixture *fx, const pk_memsort_result *res) {
    fractions_seen seen = {{0}, 0};
    pk_context c;
    pk_context_init(&c);
    c.progress = keep_fraction;
    c.progress_user = &seen;
    CHECK_OK(pk_memsort_write(&c, path_in("out3"), &fx->small, res), &c);
    int m = seen.n < 256 ? seen.n : 256, monotone = seen.n >= 5 && seen.n <= 256;
    for (int k = 1; monotone && k < seen.n; k++) monotone = seen.fraction[k] >= seen.fraction[k - 1];
    CHECK(monotone && seen.fraction[0] == 0 && seen.fraction[m - 1] == 1 && seen.fraction[m - 4] == 0.5 &&
              seen.fraction[m - 2] == 1,
          "write progress: %d fractions, first %g, the sync's start %g, last two %g %g (0, 0.5, 1, 1 expected)", seen.n,
          m ? seen.fraction[0] : -1, m >= 4 ? seen.fraction[m - 4] : -1, m >= 2 ? seen.fraction[m - 2] : -1,
          m ? seen.fraction[m - 1] : -1);
}

/* a write cancelled by the progress callback, at each of its asks in
 * turn until one lets it finish: PK_ERR_CANCELLED, the older pair in
 * the folder byte for byte as it was, no temporary file */
static void cancelled_write_leaves_older_pair(fixture *fx) {
    pk_context *ctx = &fx->ctx;
    pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, 1u, 0u};
    pk_memsort_result res, back;
    pk_memsort_result_init(&res);
    pk_memsort_result_init(&back);
    CHECK_OK(pk_memsort_run(ctx, &o, &fx->small, &fx->trace, &res), ctx);
    char path[700];
    snprintf(path, sizeof path, "%s/memsort.bin", path_in("out3"));
    kept_file bin = keep_file(path);
    snprintf(path, sizeof path, "%s/summary.txt", path_in("out3"));
    kept_file txt = keep_file(path);
    int cancelled = write_cancelled_at_each_ask(fx, &res, &bin, &txt);
    printf("memsort.bin write cancelled at each of its first %d asks, then written\n", cancelled);
    CHECK(cancelled >= 5,
          "only %d asks of the progress callback in a write (start, the sync's start, a step of each file, "
          "before rename)",
          cancelled);
    write_progress_runs_from_0_to_1(fx, &res);
    pk_memsort_regions t;
    CHECK_OK(pk_memsort_read(ctx, path_in("out3"), 1, &t, &back), ctx);
    CHECK_OK(pk_memsort_compare(ctx, &res, &back), ctx);
    /* worker 2 of 3's pair back in place for the tests below */
    write_all(bin.path, bin.bytes, bin.n);
    write_all(txt.path, txt.bytes, txt.n);
    free(bin.bytes);
    free(txt.bytes);
    pk_memsort_result_free(&res);
    pk_memsort_result_free(&back);
}

/* Worker 2 of 3's memsort.bin and where its sections start. */
typedef struct {
    unsigned char *good;
    size_t n;
    uint32_t n_chunks;
    size_t table, inst, counts, runs; /* the chunk table, instances, chunk counts, runs */
} worker_file;

static worker_file read_worker_file(void) {
    worker_file w = {NULL, 0, 0, 0, 0, 0, 0};
    char bin[700];
    snprintf(bin, sizeof bin, "%s/memsort.bin", path_in("out3"));
    w.good = read_all(bin, &w.n);
    CHECK(w.good && w.n > 72, "reading %s", bin);
    const unsigned char *good = w.good;
    uint32_t n_regions = get32(good + 28), n_owned = get32(good + 36), n_instances = get32(good + 32);
    w.n_chunks = get32(good + 24);
    w.table = 72 + 48 * (size_t)n_regions;
    w.inst = w.table + 8 * ((size_t)w.n_chunks + 1);
    w.counts = w.inst + 96 * (size_t)n_instances;
    w.runs = w.counts + 4 * ((size_t)n_owned * w.n_chunks + ((size_t)n_owned * w.n_chunks) % 2);
    CHECK(n_owned > 0 && get32(good + w.inst + 96 * 2 + 12) == 1, "instance 2 is owned by worker 2 of 3");
    return w;
}

/* the header: the file's length, magic, version, counts and chunk table */
static void bad_header_is_refused(const worker_file *w) {
    const unsigned char *good = w->good;
    size_t n = w->n;
    poke p;
    expect_bad_file("cut short", good, n, n - 4, NULL, NULL, "cut short", "the header's sections take");
    expect_bad_file("longer", good, n, n + 8, NULL, NULL, "longer than its header says", "bytes");
    expect_bad_file("header only, cut", good, n, 40, NULL, NULL, "cut short: the header take", "the file has 40");
    p = (poke){0, 0x4f4e4b50}; /* "PKNO" */
    expect_bad_file("magic", good, n, n, poke_u32, &p, "not a memsort.bin", "PKMSORT1");
    p = (poke){8, 1};
    expect_bad_file("version 1", good, n, n, poke_u32, &p, "version 1, which holds no chunk table", "run");
    p = (poke){8, 9};
    expect_bad_file("version 9", good, n, n, poke_u32, &p, "header field version is 9", "reads version 2");
    p = (poke){24, 0};
    expect_bad_file("no chunks", good, n, n, poke_u32, &p, "header field n_chunks is 0", "1 .. 4096");
    p = (poke){44, 3};
    expect_bad_file("worker past workers", good, n, n, poke_u32, &p, "n_workers 3 and worker 3", "below");
    p = (poke){68, 100};
    expect_bad_file("instance size", good, n, n, poke_u32, &p, "instance_bytes is 100", "expected 96");
    p = (poke){w->table + 8, 999999};
    expect_bad_file("chunk table", good, n, n, poke_u32, &p, "chunk table entry 2 is 2000", "without going back");
}

/* the region table: entries, sizes and names */
static void bad_region_table_is_refused(const worker_file *w) {
    const unsigned char *good = w->good;
    size_t n = w->n;
    poke p;
    p = (poke){72 + 32, 1};
    expect_bad_file("region entries", good, n, n, add_u32, &p, "the regions' entries add up to", "n_entries");
    p = (poke){72 + 24, 7}; /* ROM's size not a multiple of 8 */
    expect_bad_file("region size", good, n, n, poke_u32, &p, "its region table", "ROM");
    unsigned char *q = malloc(n); /* ROM's name: 16 letters, no NUL */
    memcpy(q, good, n);
    memset(q + 72, 'A', 16);
    expect_bad_file("region name", q, n, n, NULL, NULL, "region 0: its name", "NUL-terminated");
    free(q);
}

/* an instance's own fields, its chunk counts and its runs */
static void bad_instance_is_refused(const worker_file *w) {
    const unsigned char *good = w->good;
    size_t n = w->n, inst = w->inst;
    uint32_t owned_runs = get32(good + inst + 96 * 2 + 72);
    poke p;
    p = (poke){inst + 96 + 16, 1}; /* instance 1's first_row */
    expect_bad_file("first_row", good, n, n, add_u32, &p, "instance 1: field first_row", "out of place");
    p = (poke){inst + 96 * 3 + 36, w->n_chunks}; /* instance 3's first_chunk */
    expect_bad_file("first_chunk", good, n, n, poke_u32, &p, "instance 3: field first_chunk", "out of place");
    p = (poke){inst + 96 * 2 + 12, 0}; /* instance 2 not owned */
    expect_bad_file("owned", good, n, n, poke_u32, &p, "instance 2: field owned", "out of place");
    p = (poke){inst + 96 * 4 + 28, 0x1004}; /* instance 4's first address misaligned */
    expect_bad_file("first_addr", good, n, n, poke_u32, &p, "instance 4: field first_addr", "out of place");
    p = (poke){inst + 96 * 2 + 88, 1}; /* the owned instance's values_offset */
    expect_bad_file("values_offset", good, n, n, poke_u32, &p, "instance 2: field values_offset", "out of place");
    p = (poke){inst + 96 * 2 + 72, owned_runs + 1};
    expect_bad_file("n_runs", good, n, n, poke_u32, &p, "instance 5: field runs_offset", "out of place");
    p = (poke){w->counts, 1};
    expect_bad_file("chunk counts", good, n, n, add_u32, &p, "instance 2: its chunk counts add up to", "its n_rows");
    p = (poke){w->runs + 4, 1}; /* the first run's count */
    expect_bad_file("run counts", good, n, n, add_u32, &p, "instance 2: its runs (17 rows", "do not match its n_rows");
    p = (poke){w->runs + 8, 0}; /* the second run's address below the first's */
    expect_bad_file("run order", good, n, n, poke_u32, &p, ": instance ", "run");
    p = (poke){w->runs, 4}; /* the first run's address off the 8-byte grid */
    expect_bad_file("run alignment", good, n, n, add_u32, &p, "instance 2: run 0 (", "unaligned");
}

/* the links between one instance and the next */
static void broken_link_between_instances_is_refused(const worker_file *w) {
    const unsigned char *good = w->good;
    size_t n = w->n, inst = w->inst;
    poke p;
    p = (poke){inst + 96 + 64, 8};
    expect_bad_file("prev_addr", good, n, n, add_u32, &p, "instance 1: field prev_addr", "out of place");
    p = (poke){inst + 96 + 68, 0xfffffff0u};
    expect_bad_file("prev_value", good, n, n, poke_u32, &p, "instance 1: field prev_value", "out of place");
    p = (poke){inst + 64, 0x1000};
    expect_bad_file("prev_addr of the first", good, n, n, poke_u32, &p, "instance 0: field prev_addr", "out of");
    p = (poke){inst + 96 + 44, 1};
    expect_bad_file("first_skip_total", good, n, n, add_u32, &p, "instance 1: field first_skip_total", "out of");
    p = (poke){inst + 96 * 2 + 28, get32(good + inst + 96 + 32) - 8}; /* below instance 1's last address */
    expect_bad_file("first_addr order", good, n, n, poke_u32, &p, "instance 2: field ", "out of place");
    /* an instance another worker owns, whose first address lies past the
     * one before's last: its first address moved to below that last one
     * (aligned, in its region, its rows not in the file), refused */
    uint32_t n_instances = get32(good + 32), moved = 0;
    for (uint32_t g = 1; g < n_instances && !moved; g++) {
        const unsigned char *in = good + inst + 96 * (size_t)g;
        uint32_t prev_first = get32(in - 96 + 28), prev_last = get32(in - 96 + 32);
        if (get32(in + 8) == 0 || get32(in + 12) || get32(in + 28) <= prev_last || prev_last - 8 < prev_first) continue;
        moved = g;
        char frag[64];
        snprintf(frag, sizeof frag, "instance %u: field first_addr", g);
        p = (poke){inst + 96 * (size_t)g + 28, prev_last - 8};
        expect_bad_file("first_addr below the previous instance's last", good, n, n, poke_u32, &p, frag,
                        "out of place");
    }
    CHECK(moved > 0, "no instance another worker owns starts past the previous one's last address");
    /* one that starts with the one before's last address: its first row
     * follows that one's last in the trace, so its first chunk moved to
     * before that one's last chunk is refused */
    uint32_t shared = 0;
    for (uint32_t g = 1; g < n_instances && !shared; g++) {
        const unsigned char *in = good + inst + 96 * (size_t)g;
        uint32_t prev_last_chunk = get32(in - 96 + 48);
        if (get32(in + 8) == 0 || get32(in + 12) || get32(in + 28) != get32(in - 96 + 32) || prev_last_chunk == 0)
            continue;
        shared = g;
        char frag[64];
        snprintf(frag, sizeof frag, "instance %u: field first_chunk", g);
        p = (poke){inst + 96 * (size_t)g + 36, prev_last_chunk - 1};
        expect_bad_file("first_chunk before the previous instance's last chunk", good, n, n, poke_u32, &p, frag,
                        "out of place");
    }
    CHECK(shared > 0, "no instance another worker owns starts with the previous one's last address");
    /* the last instance of a region, owned by another worker (no rows in
     * the file, no next instance's prev_addr to disagree), of more than one
     * address: its last address off the 8-byte grid is refused */
    uint32_t region_last = 0;
    for (uint32_t g = 0; g < n_instances && !region_last; g++) {
        const unsigned char *in = good + inst + 96 * (size_t)g;
        int last_of_region = g + 1 == n_instances || get32(in + 96 + 8) == 0;
        if (!last_of_region || get32(in + 12) || get32(in + 28) == get32(in + 32)) continue;
        region_last = g + 1;
        char frag[64];
        snprintf(frag, sizeof frag, "instance %u: field last_addr", g);
        p = (poke){inst + 96 * (size_t)g + 32, 4};
        expect_bad_file("last_addr off the grid", good, n, n, add_u32, &p, frag, "out of place");
    }
    CHECK(region_last > 0, "no region's last instance of several addresses is owned by another worker");
    p = (poke){inst + 96 + 56, 1};
    /* found through the next instance's count of earlier occurrences */
    expect_bad_file("last_include_total", good, n, n, add_u32, &p, "instance 2: field first_skip_total", "out");
}

/* an owned instance's chunk counts, their sum kept: last_chunk given
 * fewer rows than last_include says it holds (one moved to first_chunk)
 * is refused */
static void chunk_counts_short_of_last_include_are_refused(const worker_file *w) {
    const unsigned char *good = w->good;
    uint32_t n_instances = get32(good + 32), owned = 0, found = 0;
    for (uint32_t g = 0; g < n_instances && !found; g++) {
        const unsigned char *in = good + w->inst + 96 * (size_t)g;
        if (!get32(in + 12)) continue;
        uint32_t first_chunk = get32(in + 36), last_chunk = get32(in + 48), last_include = get32(in + 52);
        size_t cc = w->counts + 4 * ((size_t)owned++ * w->n_chunks);
        if (first_chunk == last_chunk || get32(good + cc + 4 * (size_t)last_chunk) != last_include) continue;
        found = 1;
        unsigned char *q = malloc(w->n);
        memcpy(q, good, w->n);
        put32(q + cc + 4 * (size_t)last_chunk, last_include - 1);
        put32(q + cc + 4 * (size_t)first_chunk, get32(q + cc + 4 * (size_t)first_chunk) + 1);
        char frag[64];
        snprintf(frag, sizeof frag, "instance %u: field last_include", g);
        expect_bad_file("last_chunk's count below last_include", q, w->n, w->n, NULL, NULL, frag, "out of place");
        free(q);
    }
    CHECK(found, "no owned instance draws on two chunks, all its last chunk's rows of its last address");
}

/* fields and padding documented as zero */
static void nonzero_reserved_bytes_are_refused(const worker_file *w) {
    const unsigned char *good = w->good;
    size_t n = w->n;
    poke p;
    p = (poke){w->inst + 96 + 76, 5};
    expect_bad_file("instance reserved", good, n, n, poke_u32, &p, "instance 1: field reserved", "out of place");
    p = (poke){72 + 44, 5};
    expect_bad_file("region reserved", good, n, n, poke_u32, &p, "region 0: field reserved is 5", "not 0");
    p = (poke){72 + 12, 0x78}; /* "ROM\0" then a byte after the NUL */
    expect_bad_file("name tail", good, n, n, poke_u32, &p, "region 0: the bytes after its name's NUL", "zero");
}

/* the padding: a trace of 999 entries in 9 chunks, one worker, so
 * an odd number of values (and of chunk counts when the owned
 * instances are odd in number) */
static void nonzero_padding_is_refused(fixture *fx) {
    pk_context *ctx = &fx->ctx;
    const pk_memsort_regions *small = &fx->small;
    pk_memsort_gen_options odd_gen = {999, 3, 111, 0};
    pk_memsort_trace odd;
    pk_memsort_result odd_res;
    pk_memsort_result_init(&odd_res);
    pk_memsort_options one = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, 1, 0};
    CHECK_OK(pk_memsort_generate(ctx, small, &odd_gen, &odd), ctx);
    CHECK_OK(pk_memsort_run(ctx, &one, small, &odd, &odd_res), ctx);
    CHECK_OK(pk_memsort_write(ctx, path_in("out_odd"), small, &odd_res), ctx);
    char bin[700];
    snprintf(bin, sizeof bin, "%s/memsort.bin", path_in("out_odd"));
    size_t n = 0;
    unsigned char *good = read_all(bin, &n);
    CHECK(good && odd_res.n_values == 999 && n % 8 == 0, "the 999-entry memsort.bin");
    poke p = {n - 4, 1};
    expect_bad_file("values padding", good, n, n, poke_u32, &p, "the padding after the values", "not zero");
    if (((uint64_t)odd_res.n_owned * odd_res.n_chunks) % 2) {
        size_t at = 72 + 48 * (size_t)small->n_regions + 8 * ((size_t)odd_res.n_chunks + 1) +
                    96 * (size_t)odd_res.n_instances + 4 * (size_t)odd_res.n_owned * odd_res.n_chunks;
        p = (poke){at, 1};
        expect_bad_file("counts padding", good, n, n, poke_u32, &p, "the padding after the chunk counts", "zero");
    }
    pk_memsort_result_free(&odd_res);
    pk_memsort_trace_free(&odd);
    free(good);
}

static void missing_memsort_bin_is_refused(fixture *fx) {
    pk_memsort_regions t;
    pk_memsort_result r;
    pk_memsort_result_init(&r);
    CHECK(pk_memsort_read(&fx->ctx, path_in("nothing.bin"), 0, &t, &r) == PK_ERR_IO &&
              strstr(fx->ctx.message, "nothing.bin: cannot open"),
          "a missing file: %s", fx->ctx.message);
}

/* corruptions of worker 2 of 3's file */
static void corrupt_memsort_bin_is_refused(fixture *fx) {
    worker_file w = read_worker_file();
    bad_header_is_refused(&w);
    bad_region_table_is_refused(&w);
    bad_instance_is_refused(&w);
    broken_link_between_instances_is_refused(&w);
    chunk_counts_short_of_last_include_are_refused(&w);
    nonzero_reserved_bytes_are_refused(&w);
    free(w.good);
    nonzero_padding_is_refused(fx);
    missing_memsort_bin_is_refused(fx);
}

/* the chunk files a worker holds: worker 2 of 3's plans, and the chunks
 * `mine` copied into the folder "held" */
static void read_plans_and_hold_chunks(fixture *fx) {
    pk_memsort_result_init(&fx->plans);
    pk_memsort_regions t;
    CHECK_OK(pk_memsort_read(&fx->ctx, path_in("out3"), 0, &t, &fx->plans), &fx->ctx);
    CHECK(fx->trace.n_chunks == 20, "the trace has %u chunks, the test expects 20", fx->trace.n_chunks);
    snprintf(fx->held, sizeof fx->held, "%s", path_in("held"));
    mkdir(fx->held, 0777);
    for (uint32_t k = 0; k < n_mine; k++) copy_chunk(fx->trace_dir, fx->held, mine[k]);
}

/* every instance filled from them: its rows with values in those chunks */
static void fill_from_held_chunks_gives_their_rows(fixture *fx, const pk_memsort_chunk *chunks, uint32_t n) {
    pk_context *ctx = &fx->ctx;
    const pk_memsort_trace *trace = &fx->trace;
    const pk_memsort_result *plans = &fx->plans;
    uint32_t *pairs = malloc(2 * sizeof(uint32_t) * (trace->n_entries + 1));
    uint32_t *rows = malloc(2 * sizeof(uint32_t) * (trace->n_entries + 1));
    pk_memsort_result every;
    pk_memsort_result_init(&every);
    pk_memsort_options all = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, 1, 0};
    CHECK_OK(pk_memsort_run(ctx, &all, &fx->small, trace, &every), ctx);
    for (uint32_t gi = 0; gi < plans->n_instances; gi++) {
        pk_memsort_fill f = {&plans->instances[gi], pairs, plans->instances[gi].n_rows, 0, NULL};
        CHECK_OK(pk_memsort_fill_from_chunks(ctx, chunks, n, &f, 1), ctx);
        pk_memsort_instance_rows(&every, &every.instances[gi], rows);
        uint64_t j = 0, bad = 0;
        for (uint32_t r = 0; r < every.instances[gi].n_rows; r++) {
            uint32_t v = rows[2 * r + 1], in_mine = 0;
            for (uint32_t k = 0; k < n_mine; k++)
                in_mine |= v >= trace->chunk_start[mine[k]] && v < trace->chunk_start[mine[k] + 1];
            if (!in_mine) continue;
            bad += j >= f.n_rows || pairs[2 * j] != rows[2 * r] || pairs[2 * j + 1] != v;
            j++;
        }
        CHECK(bad == 0 && j == f.n_rows, "instance %u from the held chunks: %llu rows, expected %llu", gi,
              (unsigned long long)f.n_rows, (unsigned long long)j);
    }
    pk_memsort_result_free(&every);
    free(pairs);
    free(rows);
}

/* the held chunk files are read at their trace positions, and fill the
 * instances from them */
static void held_chunks_are_read_at_their_positions(fixture *fx) {
    const pk_memsort_trace *trace = &fx->trace;
    pk_memsort_chunk *chunks = NULL;
    uint32_t n = 0;
    CHECK_OK(pk_memsort_chunks_read(&fx->ctx, fx->held, &fx->small, &fx->plans, &chunks, &n), &fx->ctx);
    CHECK(n == n_mine, "%u chunk files read, %u held", n, n_mine);
    for (uint32_t k = 0; k < n && k < n_mine; k++) {
        uint32_t c = mine[k];
        uint64_t s = trace->chunk_start[c], e = trace->chunk_start[c + 1];
        CHECK(chunks[k].index == c && chunks[k].first_position == s && chunks[k].n_entries == e - s &&
                  memcmp(chunks[k].addr, trace->addr + s, (e - s) * 4) == 0,
              "chunk %u read back wrong", c);
    }
    fill_from_held_chunks_gives_their_rows(fx, chunks, n);
    pk_memsort_chunks_free(chunks, n);
}

/* bad chunk files, each in a folder bad<k> beside chunk 1 */
static void bad_chunk_files_are_refused(fixture *fx) {
    pk_context *ctx = &fx->ctx;
    struct {
        const char *what;
        uint32_t chunk;
        long cut;         /* bytes off the end */
        long poke_at;     /* entry to overwrite, or -1 */
        uint32_t value;   /* its new address */
        const char *frag; /* in the message */
    } bad[] = {
        {"past the trace", 20, 0, -1, 0, "mem_addr_0020.bin: the plans' trace has 20 chunks"},
        {"wrong count", 5, 4, -1, 0, "mem_addr_0005.bin: 999 entries, but chunk 5 of the plans' trace has 1000"},
        {"truncated", 5, 2, -1, 0, "mem_addr_0005.bin: truncated: 3998 bytes"},
        {"misaligned", 11, 0, 17, 0x100004, "mem_addr_0011.bin entry 17: address 0x00100004 is not 8-byte"},
        {"no region", 2, 0, 3, 0x8, "mem_addr_0002.bin entry 3: address 0x00000008 lies in no region"},
        /* an address of the zisk preset's INPUT: said so, as memsort says it */
        {"another preset's", 2, 0, 4, 0x40000008,
         "entry 4: address 0x40000008 lies in no region (it lies in region INPUT of the 'zisk' preset)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char dir[600], from[700], to[700];
        snprintf(dir, sizeof dir, "%s/bad%zu", tmp_root, k);
        mkdir(dir, 0777);
        copy_chunk(fx->trace_dir, dir, 1);
        uint32_t src = bad[k].chunk < fx->trace.n_chunks ? bad[k].chunk : 3;
        snprintf(from, sizeof from, "%s/mem_addr_%04u.bin", fx->trace_dir, src);
        snprintf(to, sizeof to, "%s/mem_addr_%04u.bin", dir, bad[k].chunk);
        size_t n = 0;
        unsigned char *p = read_all(from, &n);
        if (bad[k].poke_at >= 0) put32(p + 4 * bad[k].poke_at, bad[k].value);
        write_all(to, p, n - (size_t)bad[k].cut);
        free(p);
        pk_memsort_chunk *chunks = NULL;
        uint32_t got = 0;
        pk_status st = pk_memsort_chunks_read(ctx, dir, &fx->small, &fx->plans, &chunks, &got);
        CHECK(st == PK_ERR_PARSE && strstr(ctx->message, bad[k].frag) && chunks == NULL && got == 0,
              "%s: status %d, '%s' lacks '%s'", bad[k].what, (int)st, ctx->message, bad[k].frag);
        printf("%s: %s\n", bad[k].what, ctx->message);
    }
}

/* two bad files: the one of the lower chunk number is reported,
 * whichever thread reads it first */
static void lower_numbered_bad_chunk_is_reported(fixture *fx) {
    char dir[600], from[700], to[700];
    snprintf(dir, sizeof dir, "%s/two_bad", tmp_root);
    mkdir(dir, 0777);
    for (uint32_t c = 0; c < fx->trace.n_chunks; c++) {
        snprintf(from, sizeof from, "%s/mem_addr_%04u.bin", fx->trace_dir, c);
        snprintf(to, sizeof to, "%s/mem_addr_%04u.bin", dir, c);
        size_t len = 0;
        unsigned char *p = read_all(from, &len);
        if (c == 6) put32(p + 4 * 9, 0x100004);
        write_all(to, p, c == 17 ? len - 4 : len);
        free(p);
    }
    for (int threads = 1; threads <= 8; threads *= 2) {
        pk_context tctx;
        pk_context_init(&tctx);
        tctx.n_threads = threads;
        pk_memsort_chunk *chunks = NULL;
        uint32_t got = 0;
        pk_status st = pk_memsort_chunks_read(&tctx, dir, &fx->small, &fx->plans, &chunks, &got);
        CHECK(st == PK_ERR_PARSE && strstr(tctx.message, "mem_addr_0006.bin entry 9: address 0x00100004"),
              "two bad files, %d threads: %s", threads, tctx.message);
    }
}

/* a FIFO or a folder named like a chunk: refused at once (opening
 * a FIFO would wait for a writer; the alarm ends a test that hangs) */
static void fifo_or_folder_named_like_a_chunk_is_refused(fixture *fx) {
    pk_context *ctx = &fx->ctx;
    for (int kind = 0; kind < 2; kind++) {
        char dir[600], odd[700], command[1600];
        snprintf(dir, sizeof dir, "%s/odd%d", tmp_root, kind);
        mkdir(dir, 0777);
        copy_chunk(fx->trace_dir, dir, 1);
        snprintf(odd, sizeof odd, "%s/mem_addr_0002.bin", dir);
        snprintf(command, sizeof command, kind ? "mkdir '%s'" : "mkfifo '%s'", odd);
        CHECK(system(command) == 0, "%s", command);
        pk_memsort_chunk *chunks = NULL;
        uint32_t got = 0;
        alarm(20);
        pk_status st = pk_memsort_chunks_read(ctx, dir, &fx->small, &fx->plans, &chunks, &got);
        alarm(0);
        CHECK(st == PK_ERR_IO && strstr(ctx->message, "mem_addr_0002.bin: not a regular file") && chunks == NULL,
              "a %s as a held chunk: status %d, %s", kind ? "folder" : "FIFO", (int)st, ctx->message);
        printf("a %s as a held chunk: %s\n", kind ? "folder" : "FIFO", ctx->message);
    }
}

static void folder_without_chunk_files_is_refused(fixture *fx) {
    mkdir(path_in("nochunks"), 0777);
    pk_memsort_chunk *chunks = NULL;
    uint32_t got = 0;
    CHECK(pk_memsort_chunks_read(&fx->ctx, path_in("nochunks"), &fx->small, &fx->plans, &chunks, &got) == PK_ERR_IO &&
              strstr(fx->ctx.message, "no chunk files"),
          "a folder without chunk files: %s", fx->ctx.message);
}

/* fill.bin's sections, as its header places them */
typedef struct {
    uint32_t n_given, n_filled;
    uint64_t n_pairs;
    size_t given, inst, rows_at, pairs_at;
} fill_layout;

static fill_layout fill_layout_of(const unsigned char *f) {
    fill_layout l;
    l.n_given = get32(f + 28);
    l.n_filled = get32(f + 32);
    l.n_pairs = get32(f + 40) | (uint64_t)get32(f + 44) << 32;
    l.given = 48;
    l.inst = l.given + 4 * (l.n_given + l.n_given % 2);
    l.rows_at = l.inst + 24 * (size_t)l.n_filled;
    l.pairs_at = l.rows_at + 4 * ((size_t)l.n_filled * l.n_given + ((size_t)l.n_filled * l.n_given) % 2);
    return l;
}

/* each instance's pairs against pk_memsort_fill_from_chunks */
static void fill_bin_instances_match_library(fixture *fx, const unsigned char *f, size_t n, const fill_layout *l) {
    pk_context *ctx = &fx->ctx;
    const pk_memsort_result *plans = &fx->plans;
    pk_memsort_chunk *chunks = NULL;
    uint32_t nc = 0;
    CHECK_OK(pk_memsort_chunks_read(ctx, fx->held, &fx->small, plans, &chunks, &nc), ctx);
    uint32_t *pairs = malloc(2 * sizeof(uint32_t) * (fx->trace.n_entries + 1));
    uint32_t crow[8];
    for (uint32_t k = 0; k < l->n_filled && n == l->pairs_at + 8 * l->n_pairs; k++) {
        const unsigned char *e = f + l->inst + 24 * (size_t)k;
        uint32_t gid = get32(e);
        uint64_t rows = get32(e + 8), at = get32(e + 16);
        pk_memsort_fill fl = {&plans->instances[gid], pairs, plans->instances[gid].n_rows, 0, crow};
        CHECK_OK(pk_memsort_fill_from_chunks(ctx, chunks, nc, &fl, 1), ctx);
        int same = gid == k && rows == fl.n_rows && get32(e + 4) == (fl.n_rows == plans->instances[gid].n_rows);
        for (uint64_t j = 0; same && j < 2 * rows; j++) same = get32(f + l->pairs_at + 8 * at + 4 * j) == pairs[j];
        for (uint32_t c = 0; same && c < l->n_given; c++)
            same = get32(f + l->rows_at + 4 * ((size_t)k * l->n_given + c)) == crow[c];
        CHECK(same, "fill.bin: instance %u differs from pk_memsort_fill_from_chunks", gid);
    }
    free(pairs);
    pk_memsort_chunks_free(chunks, nc);
}

/* the command: worker 2 of 3's plans, the held chunks, every instance;
 * fill.bin names the chunks given and holds what the library fills */
static void fill_writes_the_rows_of_held_chunks(fixture *fx) {
    char args[3000], err[2000];
    snprintf(args, sizeof args, "memsort-fill %s %s -o %s/ --instances all --regions %s -q", path_in("out3"), fx->held,
             path_in("fill"), path_in("small.txt"));
    int rc = run_cli(args, err, sizeof err);
    CHECK(rc == 0, "%s: exit %d: %s", args, rc, err);
    size_t n = 0;
    char fill_bin[700];
    snprintf(fill_bin, sizeof fill_bin, "%s/fill.bin", path_in("fill"));
    unsigned char *f = read_all(fill_bin, &n);
    CHECK(f && n >= 48 && memcmp(f, "PKMFILL1", 8) == 0 && get32(f + 8) == 1 && get32(f + 12) == 48,
          "fill.bin's header");
    if (f && n >= 48) {
        fill_layout l = fill_layout_of(f);
        CHECK(l.n_given == n_mine && l.n_filled == fx->plans.n_instances && n == l.pairs_at + 8 * l.n_pairs,
              "fill.bin: %u chunks, %u instances, %zu bytes", l.n_given, l.n_filled, n);
        for (uint32_t k = 0; k < l.n_given && k < n_mine; k++)
            CHECK(get32(f + l.given + 4 * k) == mine[k], "fill.bin: given chunk %u", k);
        fill_bin_instances_match_library(fx, f, n, &l);
    }
    free(f);
}

/* chunks 2 and 3 swapped: each the right size, not the plans' trace */
static void write_swapped_trace(const fixture *fx) {
    char swapped[600], from[700], to[700];
    snprintf(swapped, sizeof swapped, "%s", path_in("swapped"));
    mkdir(swapped, 0777);
    for (uint32_t c = 0; c < fx->trace.n_chunks; c++) {
        uint32_t src = c == 2 ? 3 : c == 3 ? 2 : c;
        snprintf(from, sizeof from, "%s/mem_addr_%04u.bin", fx->trace_dir, src);
        snprintf(to, sizeof to, "%s/mem_addr_%04u.bin", swapped, c);
        size_t len = 0;
        unsigned char *p = read_all(from, &len);
        write_all(to, p, len);
        free(p);
    }
}

/* without --regions: the plans' own table, the same output */
static void fill_without_regions_takes_the_plans_table(const fixture *fx, const kept_file *fill) {
    char args[3000], err[2000];
    snprintf(args, sizeof args, "memsort-fill %s %s -o %s --instances all -q", path_in("out3"), fx->held,
             path_in("fill_plans_table"));
    int rc = run_cli(args, err, sizeof err);
    char again_bin[700];
    snprintf(again_bin, sizeof again_bin, "%s/fill.bin", path_in("fill_plans_table"));
    size_t again_n = 0;
    unsigned char *again = read_all(again_bin, &again_n);
    CHECK(rc == 0 && again && again_n == fill->n && memcmp(again, fill->bytes, fill->n) == 0,
          "without --regions: exit %d, %s, fill.bin %s", rc, err, again ? "differs" : "missing");
    free(again);
}

/* plans in a folder whose name holds a line end and a tab: fill.txt's
 * plans line stays one line, the name written with \n and \t */
static void plans_folder_named_with_a_line_end_stays_one_line(const fixture *fx) {
    char args[3000], err[2000];
    char odd_dir[700], odd_plans[800], odd_out[700], odd_txt[800];
    snprintf(odd_dir, sizeof odd_dir, "%s", path_in("odd\nplans\tdir"));
    snprintf(odd_out, sizeof odd_out, "%s", path_in("fill_odd"));
    mkdir(odd_dir, 0777);
    snprintf(odd_plans, sizeof odd_plans, "%s/memsort.bin", odd_dir);
    char plans_from[800];
    snprintf(plans_from, sizeof plans_from, "%s/memsort.bin", path_in("out3"));
    size_t plans_n = 0;
    unsigned char *plans_bytes = read_all(plans_from, &plans_n);
    write_all(odd_plans, plans_bytes, plans_n);
    free(plans_bytes);
    snprintf(args, sizeof args, "memsort-fill '%s' %s -o %s --instances all -q", odd_dir, fx->held, odd_out);
    int rc = run_cli(args, err, sizeof err);
    snprintf(odd_txt, sizeof odd_txt, "%s/fill.txt", odd_out);
    size_t txt_n = 0;
    unsigned char *txt = read_all(odd_txt, &txt_n);
    if (txt) txt[txt_n] = '\0';
    /* line 2 is the plans line, line 3 the chunks given */
    char *line2 = txt ? strchr((char *)txt, '\n') : NULL;
    char *line3 = line2 ? strchr(line2 + 1, '\n') : NULL;
    CHECK(rc == 0 && line3 && strncmp(line2 + 1, "plans ", 6) == 0 && strstr(line2 + 1, "odd\\nplans\\tdir: ") &&
              strncmp(line3 + 1, "chunks given:", 13) == 0,
          "a plans folder named with a line end: exit %d, %s, fill.txt:\n%s", rc, err, txt ? (char *)txt : "missing");
    free(txt);
}

/* a failure into a folder not there before leaves no folder */
static void failed_fill_into_a_new_folder_leaves_none(void) {
    char args[3000], err[2000];
    snprintf(args, sizeof args, "memsort-fill %s %s/bad1 -o %s -q", path_in("out1"), tmp_root, path_in("new_out"));
    int rc = run_cli(args, err, sizeof err);
    struct stat sb;
    CHECK(rc == 1 && stat(path_in("new_out"), &sb) != 0, "a failed fill left %s (exit %d)", path_in("new_out"), rc);
}

/* bad input: a message, an exit code, and the older fill.bin untouched */
static void bad_fill_input_leaves_the_older_fill_bin(const fixture *fx, const kept_file *fill) {
    struct {
        const char *args, *want;
        int code;
    } bad[] = {
        {"memsort-fill %s %s/bad1 -o %s --regions %s -q", "999 entries, but chunk 5", 1},
        {"memsort-fill %s %s/bad3 -o %s --regions %s -q", "entry 17: address 0x00100004 is not 8-byte aligned", 1},
        {"memsort-fill %s %s/swapped -o %s --regions %s -q", "the plans say", 1},
        {"memsort-fill %s/nothing.bin %s -o %s --regions %s -q", "nothing.bin: cannot open", 1},
        {"memsort-fill %s %s -o %s --regions default%.0s -q", "its region table is not --regions default's", 2},
        {"memsort-fill %s %s -o %s --regions %s --instances 3-1 -q", "a range must run from low to high", 2},
        {"memsort-fill %s %s -o %s --regions %s --instances 1,99999 -q", "instance 99999 does not exist", 2},
        {"memsort-fill %s %s -o %s --regions %s --instances 1,x -q", "is not a list of instance ids", 2},
        {"memsort-fill %s %s -o %s --regions %s --instances 0-99999999999999999999 -q", "an instance id out of range",
         2},
    };
    char args[3000], err[2000];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *plan_arg = strstr(bad[k].args, "%s/nothing.bin") ? tmp_root : path_in("out1");
        const char *dir_arg = strstr(bad[k].args, "%s/bad") || strstr(bad[k].args, "%s/swapped") ? tmp_root : fx->held;
        char fmt[300];
        snprintf(fmt, sizeof fmt, "%s", bad[k].args);
        snprintf(args, sizeof args, fmt, plan_arg, dir_arg, path_in("fill"), path_in("small.txt"));
        int rc = run_cli(args, err, sizeof err);
        CHECK(rc == bad[k].code && strstr(err, bad[k].want), "'%s': exit %d (expected %d), '%s' lacks '%s'", args, rc,
              bad[k].code, err, bad[k].want);
        CHECK(file_holds(fill->path, fill->bytes, fill->n), "'%s' changed fill.bin", args);
    }
}

/* memsort-gen says when the last region is too small for a stack
 * and a heap (the small table's RAM: 4096 words), with -q too, and not
 * otherwise */
static void gen_warns_of_a_small_last_region(void) {
    char args[3000], err[2000];
    for (int quiet = 0; quiet <= 1; quiet++) {
        snprintf(args, sizeof args, "memsort-gen %s --entries 1000 --regions %s%s", path_in("gen_small"),
                 path_in("small.txt"), quiet ? " -q" : "");
        int rc = run_cli(args, err, sizeof err);
        CHECK(rc == 0 && strstr(err, "the last region, RAM, holds 4096 words, too few for a stack window"),
              "memsort-gen with a small last region%s: exit %d, '%s'", quiet ? " and -q" : "", rc, err);
    }
    int rc;
    snprintf(args, sizeof args, "memsort-gen %s --entries 1000", path_in("gen_default"));
    rc = run_cli(args, err, sizeof err);
    CHECK(rc == 0 && !strstr(err, "too few"), "memsort-gen with the default table: exit %d, '%s'", rc, err);
}

/* A copy of the plans `good` with the field at `at` set to `value`, written to `path`. */
static void write_plans_changed(const char *path, const unsigned char *good, size_t n, size_t at, uint32_t value) {
    unsigned char *q = malloc(n);
    memcpy(q, good, n);
    put32(q + at, value);
    write_all(path, q, n);
    free(q);
}

/* plans whose fields disagree with the trace, with every chunk
 * given: the one-worker file's fields that the rows fix, one by
 * one, +1 and -1, in instances that start with the previous one's
 * last address and in others; memsort-fill refuses each, exit 1,
 * writing nothing */
static void fill_refuses_plans_that_disagree_with_the_trace(const fixture *fx) {
    char args[3000], err[2000];
    char bin1[700];
    snprintf(bin1, sizeof bin1, "%s/memsort.bin", path_in("out1"));
    size_t n1 = 0;
    unsigned char *good = read_all(bin1, &n1);
    uint32_t n_chunks1 = get32(good + 24), n_inst1 = get32(good + 32);
    size_t inst1 = 72 + 48 * (size_t)get32(good + 28) + 8 * ((size_t)n_chunks1 + 1);
    static const size_t offsets[] = {36, 40, 44, 48, 52, 56, 68};
    char bad_dir[700], bad_bin[800];
    snprintf(bad_dir, sizeof bad_dir, "%s", path_in("plans_bad"));
    snprintf(bad_bin, sizeof bad_bin, "%s/memsort.bin", bad_dir);
    mkdir(bad_dir, 0777);
    int tried = 0, refused = 0, by_rows = 0, picked = 0;
    for (uint32_t gi = 1; gi < n_inst1 && picked < 8; gi++) {
        const unsigned char *in = good + inst1 + 96 * (size_t)gi;
        int shares = get32(in + 8) > 0 && get32(in + 28) == get32(in - 96 + 32);
        if (!shares && gi % 97) continue;
        picked++;
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
            for (int d = -1; d <= 1; d += 2) {
                uint32_t v = get32(in + offsets[o]);
                if (v == 0 && d < 0) continue;
                write_plans_changed(bad_bin, good, n1, inst1 + 96 * (size_t)gi + offsets[o], v + (uint32_t)d);
                snprintf(args, sizeof args, "memsort-fill %s %s -o %s --instances all -q", bad_dir, fx->trace_dir,
                         path_in("fill_bad"));
                int rc = run_cli(args, err, sizeof err);
                struct stat sb;
                tried++;
                refused += rc == 1 && stat(path_in("fill_bad"), &sb) != 0;
                by_rows += strstr(err, "does not agree with the rows all") != NULL;
                if (rc != 1) fprintf(stderr, "instance %u, field at %zu %+d: exit %d\n", gi, offsets[o], d, rc);
            }
    }
    CHECK(tried > 50 && refused == tried && by_rows > 0,
          "memsort-fill with plans altered: %d of %d refused, %d by the rows", refused, tried, by_rows);
    printf("memsort-fill, plan fields altered: %d of %d refused (%d by the rows' check)\n", refused, tried, by_rows);
    free(good);
}

/* outputs named by symbolic links: memsort.bin through a link to a
 * file elsewhere is written there (the link kept) */
static void memsort_bin_through_a_link_is_written_there(const fixture *fx) {
    char args[3000], err[2000];
    char link_dir[700], target[700], link_path[800];
    snprintf(link_dir, sizeof link_dir, "%s", path_in("linked_out"));
    snprintf(target, sizeof target, "%s", path_in("far_memsort.bin"));
    snprintf(link_path, sizeof link_path, "%s/memsort.bin", link_dir);
    mkdir(link_dir, 0777);
    write_all(target, "old", 3);
    CHECK(symlink(target, link_path) == 0, "symlink %s", link_path);
    snprintf(args, sizeof args, "memsort %s -o %s --regions %s -q", fx->trace_dir, link_dir, path_in("small.txt"));
    int rc = run_cli(args, err, sizeof err);
    struct stat ls;
    size_t far_n = 0;
    unsigned char *far = read_all(target, &far_n);
    CHECK(rc == 0 && lstat(link_path, &ls) == 0 && S_ISLNK(ls.st_mode) && far && far_n > 64 &&
              memcmp(far, "PKMSORT1", 8) == 0,
          "memsort -o a folder whose memsort.bin is a link: exit %d, %s", rc, err);
    free(far);
}

/* a link to one of the trace's chunk files is refused, the chunk (whose
 * bytes are `chunk0`) unchanged */
static void memsort_bin_linked_to_a_chunk_is_refused(const fixture *fx, const kept_file *chunk0) {
    char args[3000], err[2000];
    char link_dir[700], link_path[800];
    snprintf(link_dir, sizeof link_dir, "%s", path_in("linked_out"));
    snprintf(link_path, sizeof link_path, "%s/memsort.bin", link_dir);
    snprintf(args, sizeof args, "memsort %s -o %s --regions %s -q", fx->trace_dir, link_dir, path_in("small.txt"));
    CHECK(unlink(link_path) == 0 && symlink(chunk0->path, link_path) == 0, "symlink to a chunk");
    int rc = run_cli(args, err, sizeof err);
    CHECK(rc == 2 && strstr(err, "is a chunk file of this run's trace"), "memsort.bin a link to a chunk: exit %d, %s",
          rc, err);
    CHECK(chunk0->bytes && file_holds(chunk0->path, chunk0->bytes, chunk0->n), "the chunk file changed");
}

/* the generator does not write through a chunk name that is a link */
static void gen_does_not_write_through_a_chunk_link(const kept_file *chunk0) {
    char args[3000], err[2000];
    char gen_dir[700], gen_chunk[800];
    snprintf(gen_dir, sizeof gen_dir, "%s", path_in("gen_linked"));
    snprintf(gen_chunk, sizeof gen_chunk, "%s/mem_addr_0000.bin", gen_dir);
    mkdir(gen_dir, 0777);
    CHECK(symlink(chunk0->path, gen_chunk) == 0, "symlink %s", gen_chunk);
    snprintf(args, sizeof args, "memsort-gen %s --entries 1000 -q", gen_dir);
    int rc = run_cli(args, err, sizeof err);
    size_t c1_n = 0;
    unsigned char *c1 = read_all(chunk0->path, &c1_n);
    struct stat ls;
    CHECK(rc == 1 && strstr(err, "a symbolic link; chunk files are written into the trace's own folder") &&
              lstat(gen_chunk, &ls) == 0 && S_ISLNK(ls.st_mode) && c1 && c1_n == chunk0->n,
          "memsort-gen over a chunk link: exit %d, %s", rc, err);
    free(c1);
}

/* a link to one of the trace's chunk files, as memsort.bin or as a chunk
 * the generator would write: refused, the chunk unchanged */
static void links_onto_a_chunk_file_are_refused(const fixture *fx) {
    char path[700];
    snprintf(path, sizeof path, "%s/mem_addr_0000.bin", fx->trace_dir);
    kept_file chunk0 = keep_file(path);
    memsort_bin_linked_to_a_chunk_is_refused(fx, &chunk0);
    gen_does_not_write_through_a_chunk_link(&chunk0);
    free(chunk0.bytes);
}

/* an output folder named by a link to a folder that does not
 * exist (mkdir does not follow it): refused naming the link and
 * where it leads, before the work, nothing made */
static void dangling_output_link_is_refused(const fixture *fx) {
    char args[3000], err[2000];
    char dangling[700], nowhere[700];
    snprintf(dangling, sizeof dangling, "%s", path_in("dangling_out"));
    snprintf(nowhere, sizeof nowhere, "%s", path_in("no_such_folder"));
    CHECK(symlink(nowhere, dangling) == 0, "symlink %s", dangling);
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            snprintf(args, sizeof args, "memsort %s -o %s --regions %s -q", fx->trace_dir, dangling,
                     path_in("small.txt"));
        else snprintf(args, sizeof args, "memsort-gen %s --entries 1000 -q", dangling);
        int rc = run_cli(args, err, sizeof err);
        char said[1600];
        snprintf(said, sizeof said, "%s: a symbolic link to '%s', which does not exist", dangling, nowhere);
        struct stat ls;
        CHECK(rc == 1 && strstr(err, said) && access(nowhere, F_OK) != 0 && lstat(dangling, &ls) == 0 &&
                  S_ISLNK(ls.st_mode),
              "%s -o a dangling link: exit %d, %s", k ? "memsort-gen" : "memsort", rc, err);
    }
}

/* an empty chunk file: read as a chunk of no entries, and said; the
 * folder given with a trailing slash, as a shell completes it: the
 * file's name in the message without a doubled one */
static void empty_chunk_file_is_read_and_said(const fixture *fx) {
    char args[3000], err[2000];
    char with_empty[700], empty_chunk[800];
    snprintf(with_empty, sizeof with_empty, "%s", path_in("with_empty"));
    mkdir(with_empty, 0777);
    copy_chunk(fx->trace_dir, with_empty, 0);
    snprintf(empty_chunk, sizeof empty_chunk, "%s/mem_addr_0001.bin", with_empty);
    write_all(empty_chunk, "", 0);
    snprintf(args, sizeof args, "memsort %s/ -o %s --regions %s -q", with_empty, path_in("with_empty_out"),
             path_in("small.txt"));
    int rc = run_cli(args, err, sizeof err);
    char said[800];
    snprintf(said, sizeof said, "%s/mem_addr_0001.bin is empty (1 empty chunk file in all)", with_empty);
    CHECK(rc == 0 && strstr(err, "warning: ") && strstr(err, said), "an empty chunk file: exit %d, '%s'", rc, err);
}

/* the library's own messages name the file alike (the folder above with
 * chunk 1 missing now) */
static void trailing_slash_is_not_doubled_in_messages(fixture *fx) {
    char with_empty[700], empty_chunk[800], slashed[710];
    snprintf(with_empty, sizeof with_empty, "%s", path_in("with_empty"));
    snprintf(empty_chunk, sizeof empty_chunk, "%s/mem_addr_0001.bin", with_empty);
    snprintf(slashed, sizeof slashed, "%s/", with_empty);
    unlink(empty_chunk);
    copy_chunk(fx->trace_dir, with_empty, 2); /* chunk 1 missing */
    pk_memsort_trace trace;
    pk_status st = pk_memsort_trace_read(&fx->ctx, slashed, &fx->small, &trace);
    CHECK(st != PK_OK && !strstr(fx->ctx.message, "//"), "a trace folder with a trailing slash: '%s'", fx->ctx.message);
    if (st == PK_OK) pk_memsort_trace_free(&trace);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/pk_msfiles_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    fixture fx;
    pk_context_init(&fx.ctx);
    fx.small = test_regions_small();
    write_small_table(&fx.small);
    sync_file_asks_once_a_step();
    chunk_at_skips_empty_chunks();
    generate_shared_trace(&fx);

    char out1_bin[700];
    snprintf(out1_bin, sizeof out1_bin, "%s/memsort.bin", path_in("out1"));
    memsort_bin_reads_back_as_written(&fx, 1, 0, "out1");
    plan_fields_against_rows_are_checked(out1_bin);
    memsort_bin_reads_back_as_written(&fx, 3, 2, "out3");
    result_without_chunk_table_is_not_written(&fx);
    cancelled_write_leaves_older_pair(&fx);
    corrupt_memsort_bin_is_refused(&fx);

    read_plans_and_hold_chunks(&fx);
    held_chunks_are_read_at_their_positions(&fx);
    bad_chunk_files_are_refused(&fx);
    lower_numbered_bad_chunk_is_reported(&fx);
    fifo_or_folder_named_like_a_chunk_is_refused(&fx);
    folder_without_chunk_files_is_refused(&fx);

    /* the command */
    if (getenv("PAIRKIT_CLI")) {
        fill_writes_the_rows_of_held_chunks(&fx);
        write_swapped_trace(&fx);
        char fill_bin[700];
        snprintf(fill_bin, sizeof fill_bin, "%s/fill.bin", path_in("fill"));
        kept_file fill = keep_file(fill_bin);
        fill_without_regions_takes_the_plans_table(&fx, &fill);
        plans_folder_named_with_a_line_end_stays_one_line(&fx);
        failed_fill_into_a_new_folder_leaves_none();
        bad_fill_input_leaves_the_older_fill_bin(&fx, &fill);
        free(fill.bytes);
        gen_warns_of_a_small_last_region();
        fill_refuses_plans_that_disagree_with_the_trace(&fx);
        memsort_bin_through_a_link_is_written_there(&fx);
        links_onto_a_chunk_file_are_refused(&fx);
        dangling_output_link_is_refused(&fx);
        empty_chunk_file_is_read_and_said(&fx);
        trailing_slash_is_not_doubled_in_messages(&fx);
    } else {
        printf("PAIRKIT_CLI not set: the command's checks skipped\n");
    }
    pk_memsort_result_free(&fx.plans);
    pk_memsort_trace_free(&fx.trace);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", tmp_root);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
    return check_finish("test_memsort_files");
}
