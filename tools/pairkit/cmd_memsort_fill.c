/* cmd_memsort_fill.c - `pairkit memsort-fill PLANS TRACE_DIR -o OUT_DIR`:
 * a worker that holds only some chunk files fills instances from the
 * plans of a memsort.bin (any worker's), and writes their rows as
 * (address, value) pairs to OUT_DIR/fill.bin with OUT_DIR/fill.txt. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common/common.h"
#include "pairkit/memsort.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: pairkit memsort-fill PLANS TRACE_DIR -o OUT_DIR [--instances LIST] [options]\n"
            "  Fills instances from their plans alone, as a prover worker that holds only\n"
            "  some chunk files does: PLANS is a memsort.bin (or its folder) written by\n"
            "  pairkit memsort for any worker; TRACE_DIR holds the chunk files this worker\n"
            "  has (any of mem_addr_0000.bin ...; gaps allowed). Writes each instance's\n"
            "  rows from those chunks, in stable address order, as (address, value) pairs\n"
            "  to OUT_DIR/fill.bin, and OUT_DIR/fill.txt (docs/memsort.md).\n\n"
            "  -o, --output DIR     output directory (made if missing, in a folder that exists)\n"
            "  --instances LIST     owned (default: those the PLANS' worker owns), all, or\n"
            "                       global ids and ranges: 0,3,8-11\n"
            "  --regions R          default, zisk, or a region table file: checked to be\n"
            "                       the table in PLANS (which is used when left out)\n"
            "  --threads N          CPU threads (default: all)\n"
            "  -q, --quiet          no progress line, no summary\n");
}

static const char *const value_options[] = {"-o", "--output", "--instances", "--regions", "--threads", NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h", "--help", "-q", "--quiet", NULL};

/* LIST into a mark per instance (n of them); 0, or a usage error's exit code. */
static int parse_instances(const char *cmd, const char *list, uint32_t n, unsigned char *mark) {
    const char *p = list;
    if (!*p) return cli_usage_error(cmd, "--instances: an empty list");
    while (*p) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') return cli_usage_error(cmd, "--instances: '%s' is not a list of instance ids", list);
        unsigned long long a = strtoull(p, &end, 10), b = a;
        if (*end == '-') {
            const char *q = end + 1;
            if (*q < '0' || *q > '9')
                return cli_usage_error(cmd, "--instances: '%s' is not a list of instance ids", list);
            b = strtoull(q, &end, 10);
        }
        if (errno) return cli_usage_error(cmd, "--instances: '%s': an instance id out of range", list);
        if (b < a) return cli_usage_error(cmd, "--instances: '%s': a range must run from low to high", list);
        if (b >= n && n == 0)
            return cli_usage_error(cmd,
                                   "--instances: instance %llu does not exist (the plans have no instances: an "
                                   "empty trace)",
                                   a);
        if (b >= n)
            return cli_usage_error(cmd, "--instances: instance %llu does not exist (the plans have %u, 0 .. %u)",
                                   a >= n ? a : (unsigned long long)n, n, n - 1);
        for (unsigned long long g = a; g <= b; g++) mark[g] = 1;
        if (*end == ',' && end[1]) p = end + 1;
        else if (*end == '\0') p = end;
        else return cli_usage_error(cmd, "--instances: '%s' is not a list of instance ids", list);
    }
    return 0;
}

static void put_u32(FILE *fp, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(x, 1, 4, fp);
}

static void put_u64(FILE *fp, uint64_t v) {
    put_u32(fp, (uint32_t)v);
    put_u32(fp, (uint32_t)(v >> 32));
}

static void put_u32s(FILE *fp, const uint32_t *v, uint64_t n) {
    const uint16_t one = 1;
    if (*(const uint8_t *)&one == 1) fwrite(v, sizeof(uint32_t), n, fp);
    else
        for (uint64_t i = 0; i < n; i++) put_u32(fp, v[i]);
}

/* fill.bin: header, the given chunks, the instances, their rows per given
 * chunk, the pairs (docs/memsort.md). The pairs' bytes are added to
 * `progress` instance by instance; a cancellation stops the writing. */
static void write_fill_bin(FILE *fp, const pk_memsort_result *plans, const pk_memsort_chunk *chunks, uint32_t n_given,
                           const pk_memsort_fill *fills, uint32_t n_fills, const uint32_t *chunk_rows,
                           pk_progress *progress) {
    uint64_t n_pairs = 0;
    for (uint32_t k = 0; k < n_fills; k++) n_pairs += fills[k].n_rows;
    fwrite("PKMFILL1", 1, 8, fp);
    put_u32(fp, 1);  /* version */
    put_u32(fp, 48); /* header bytes */
    put_u64(fp, plans->n_entries);
    put_u32(fp, plans->n_chunks);
    put_u32(fp, n_given);
    put_u32(fp, n_fills);
    put_u32(fp, 24); /* instance bytes */
    put_u64(fp, n_pairs);
    for (uint32_t c = 0; c < n_given; c++) put_u32(fp, chunks[c].index);
    if (n_given % 2) put_u32(fp, 0);
    uint64_t at = 0;
    for (uint32_t k = 0; k < n_fills; k++) {
        put_u32(fp, fills[k].plan->gid);
        put_u32(fp, fills[k].n_rows == fills[k].plan->n_rows);
        put_u64(fp, fills[k].n_rows);
        put_u64(fp, at);
        at += fills[k].n_rows;
    }
    put_u32s(fp, chunk_rows, (uint64_t)n_fills * n_given);
    if (((uint64_t)n_fills * n_given) % 2) put_u32(fp, 0);
    for (uint32_t k = 0; k < n_fills && !progress->cancelled; k++) {
        put_u32s(fp, fills[k].pairs, 2 * fills[k].n_rows);
        pk_progress_add(progress, 8.0 * (double)fills[k].n_rows, 1);
    }
}

/* A file name in a line of text: a byte below 0x20, 0x7f and the
 * backslash written as C writes them (\n, \t, \\, else \xNN), so that a
 * name holding a line end keeps its line one line. */
static void put_name(FILE *fp, const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p == '\\') fputs("\\\\", fp);
        else if (*p == '\n') fputs("\\n", fp);
        else if (*p == '\t') fputs("\\t", fp);
        else if (*p < 0x20 || *p == 0x7f) fprintf(fp, "\\x%02x", *p);
        else fputc(*p, fp);
    }
}

static void write_fill_txt(FILE *fp, const char *plans_path, const pk_memsort_result *plans,
                           const pk_memsort_chunk *chunks, uint32_t n_given, const pk_memsort_fill *fills,
                           uint32_t n_fills) {
    fprintf(fp, "pairkit memsort-fill %s\n", PK_VERSION_STRING);
    fputs("plans ", fp);
    put_name(fp, plans_path);
    fprintf(fp, ": %llu entries, %u chunks, %u instances (worker %u of %u)\n", (unsigned long long)plans->n_entries,
            plans->n_chunks, plans->n_instances, plans->worker, plans->n_workers);
    fprintf(fp, "chunks given: %u of %u:", n_given, plans->n_chunks);
    for (uint32_t c = 0; c < n_given;) { /* as ranges */
        uint32_t d = c;
        while (d + 1 < n_given && chunks[d + 1].index == chunks[d].index + 1) d++;
        if (d == c) fprintf(fp, " %u", chunks[c].index);
        else fprintf(fp, " %u-%u", chunks[c].index, chunks[d].index);
        c = d + 1;
    }
    fprintf(fp, "\n%5s %8s %8s %8s %10s %10s\n", "gid", "rows", "of", "complete", "first", "last");
    for (uint32_t k = 0; k < n_fills; k++) {
        const pk_memsort_fill *f = &fills[k];
        fprintf(fp, "%5u %8llu %8u %8s", f->plan->gid, (unsigned long long)f->n_rows, f->plan->n_rows,
                f->n_rows == f->plan->n_rows ? "yes" : "no");
        if (f->n_rows) fprintf(fp, " 0x%08x 0x%08x\n", f->pairs[0], f->pairs[2 * (f->n_rows - 1)]);
        else fprintf(fp, " %10s %10s\n", "-", "-");
    }
}

/* Rows of address a at the end of a fill's pairs. */
static uint32_t trailing_rows(const pk_memsort_fill *f, uint32_t a) {
    uint32_t n = 0;
    for (uint64_t j = f->n_rows; j-- > 0 && f->pairs[2 * j] == a;) n++;
    return n;
}

/* With every chunk given, fills[k] holds the whole instance's rows, as the
 * trace has them: the plan fields those rows fix must agree
 * (pk_memsort_plan_disagrees, as pk_memsort_read checks a memsort.bin's
 * rows), with the previous instance of the region when it is filled too.
 * NULL when they agree, else the field. */
static const char *plan_against_rows(const pk_memsort_result *plans, const pk_memsort_fill *fills, uint32_t k) {
    const pk_memsort_fill *f = &fills[k], *pf = k > 0 ? &fills[k - 1] : NULL;
    const pk_memsort_instance *in = f->plan;
    if (pf && (in->index == 0 || pf->plan->gid + 1 != in->gid || pf->n_rows != pf->plan->n_rows)) pf = NULL;
    return pk_memsort_plan_disagrees(plans->chunk_start, plans->n_chunks, in, f->pairs + 1, 2,
                                     trailing_rows(f, in->last_addr), pf ? pf->plan : NULL, pf ? pf->pairs + 1 : NULL,
                                     pf ? trailing_rows(pf, pf->plan->last_addr) : 0);
}

/* The command line, checked. */
typedef struct fill_args {
    const char *plans_path, *trace_dir, *out_dir, *regions_name;
    const char *instances; /* owned, all, or a list of ids and ranges */
    int quiet;
    char out_buf[4096], trace_buf[4096]; /* the folders without trailing slashes */
    char plans_file[4200];               /* the memsort.bin itself, where PLANS names its folder */
} fill_args;

/* What the run holds, freed by fill_job_free whatever step it stopped at. */
typedef struct fill_job {
    pk_context ctx;
    pk_memsort_regions regions, plan_regions;
    pk_memsort_result plans;
    pk_memsort_chunk *chunks; /* the chunk files given, n_given of them */
    uint32_t n_given;
    unsigned char *mark; /* per instance of the plans: filled by this run */
    pk_memsort_fill *fills;
    uint32_t n_fills;
    uint32_t *chunk_rows, *pairs; /* the fills' per-chunk counts and rows */
} fill_job;

#define FILL_CONTINUE (-1)

/* FILL_CONTINUE, or the exit code: 0 after --help, 2 for a usage error. */
static int parse_fill_args(const char *cmd, int argc, char **argv, fill_args *args, pk_context *ctx) {
    memset(args, 0, sizeof *args);
    args->instances = "owned";
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            args->quiet = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) args->out_dir = v;
            else if (strcmp(a, "--instances") == 0) args->instances = v;
            else if (strcmp(a, "--regions") == 0) args->regions_name = v;
            else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx->n_threads)) return 2;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else if (!args->plans_path) {
            args->plans_path = a;
        } else if (!args->trace_dir) {
            args->trace_dir = a;
        } else {
            return cli_usage_error(cmd, "expected PLANS and TRACE_DIR, got a third: '%s'", a);
        }
    }
    if (!args->plans_path) return cli_usage_error(cmd, "expected PLANS (a memsort.bin or its folder) and TRACE_DIR");
    if (!args->trace_dir)
        return cli_usage_error(cmd, "expected TRACE_DIR (the folder of the chunk files held) after PLANS");
    if (!args->out_dir) return cli_usage_error(cmd, "expected -o OUT_DIR");
    if (!*args->plans_path || !*args->trace_dir)
        return cli_usage_error(cmd, "PLANS and TRACE_DIR must not be empty names");
    if (!*args->out_dir) return cli_usage_error(cmd, "-o: the output directory is an empty name");
    args->out_dir = pk_dir_name(args->out_dir, args->out_buf, sizeof args->out_buf);
    args->trace_dir = pk_dir_name(args->trace_dir, args->trace_buf, sizeof args->trace_buf);
    return FILL_CONTINUE;
}

/* Before the work: the output folder (made later if missing, in an
 * existing folder), and no output may replace an input: the plans (the
 * file, or memsort.bin in the folder named) or the region table. */
static int check_fill_places(const char *cmd, fill_args *args) {
    struct stat sb;
    char pb[4096];
    const char *pd = pk_dir_name(args->plans_path, pb, sizeof pb);
    if (stat(args->plans_path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(args->plans_file, sizeof args->plans_file, "%.4000s/memsort.bin", pd);
    else snprintf(args->plans_file, sizeof args->plans_file, "%s", args->plans_path);
    cli_input(args->plans_file);
    if (args->regions_name) cli_input(args->regions_name);
    cli_input_trace(args->trace_dir);
    const char *const files[2] = {"fill.bin", "fill.txt"};
    return cli_check_out_dir(cmd, args->out_dir, files, 2);
}

static int regions_equal(const pk_memsort_regions *a, const pk_memsort_regions *b, uint32_t *differs) {
    for (uint32_t r = 0; r < a->n_regions || r < b->n_regions; r++) {
        const pk_memsort_region *x = &a->region[r], *y = &b->region[r];
        if (a->n_regions != b->n_regions || x->base != y->base || x->size != y->size ||
            x->instance_entries != y->instance_entries || x->max_instances != y->max_instances ||
            strcmp(x->name, y->name) != 0) {
            *differs = r;
            return 0;
        }
    }
    return 1;
}

/* The plans and their region table, checked against --regions. */
static int load_plans(const char *cmd, const fill_args *args, fill_job *job) {
    pk_status st = pk_memsort_read(&job->ctx, args->plans_path, 0, &job->plan_regions, &job->plans);
    if (!st) {
        if (args->regions_name) st = pk_memsort_regions_get(&job->ctx, args->regions_name, &job->regions);
        else job->regions = job->plan_regions; /* the table the plans were made with */
    }
    if (st) return cli_error(cmd, st, &job->ctx);
    uint32_t r;
    if (!regions_equal(&job->regions, &job->plan_regions, &r)) {
        fprintf(stderr,
                "pairkit %s: %s: its region table is not --regions %s's (region %u differs); give the table "
                "the plans were made with\n",
                cmd, args->plans_path, args->regions_name, r);
        return 2;
    }
    return 0;
}

/* The instances to fill (--instances), and the chunk files held. */
static int select_instances(const char *cmd, const fill_args *args, fill_job *job) {
    const pk_memsort_result *plans = &job->plans;
    job->mark = calloc((size_t)plans->n_instances + 1, 1);
    if (!job->mark) return cli_error(cmd, pk_fail(&job->ctx, PK_ERR_NOMEM, "out of memory"), &job->ctx);
    int rc = 0;
    if (strcmp(args->instances, "owned") == 0 || strcmp(args->instances, "all") == 0) {
        int all = strcmp(args->instances, "all") == 0;
        for (uint32_t g = 0; g < plans->n_instances; g++) job->mark[g] = all || plans->instances[g].owned;
    } else if ((rc = parse_instances(cmd, args->instances, plans->n_instances, job->mark)) != 0) {
        return rc;
    }
    pk_status st =
        pk_memsort_chunks_read(&job->ctx, args->trace_dir, &job->regions, plans, &job->chunks, &job->n_given);
    return st ? cli_error(cmd, st, &job->ctx) : 0;
}

/* Room for the rows: each instance's whole count, or no more than the
 * entries held (the rows the chunks give cannot be more); when that bound
 * passes twice the entries held, the rows are counted first (a fill with
 * no room stops after counting), so that a worker holding a few chunks
 * takes memory for those (at most 16 bytes an entry held) and not for
 * whole instances. Then the fill. */
static int fill_instances(const char *cmd, const fill_args *args, fill_job *job) {
    const pk_memsort_result *plans = &job->plans;
    const uint32_t n_given = job->n_given;
    uint64_t held = 0, bound = 0;
    for (uint32_t c = 0; c < n_given; c++) held += job->chunks[c].n_entries;
    for (uint32_t g = 0; g < plans->n_instances; g++)
        if (job->mark[g]) {
            job->n_fills++;
            bound += plans->instances[g].n_rows < held ? plans->instances[g].n_rows : held;
        }
    const uint32_t n_fills = job->n_fills;
    job->fills = calloc((size_t)n_fills + 1, sizeof *job->fills);
    job->chunk_rows = malloc(((size_t)n_fills * n_given + 1) * sizeof(uint32_t));
    if (!job->fills || !job->chunk_rows)
        return cli_error(cmd, pk_fail(&job->ctx, PK_ERR_NOMEM, "out of memory for %u instances", n_fills), &job->ctx);
    pk_memsort_fill *fills = job->fills;
    for (uint32_t g = 0, k = 0; g < plans->n_instances; g++)
        if (job->mark[g]) {
            const pk_memsort_instance *in = &plans->instances[g];
            uint64_t room = in->n_rows < held ? in->n_rows : held;
            fills[k] = (pk_memsort_fill){.plan = in,
                                         .pairs = NULL,
                                         .capacity = bound > 2 * held ? 0 : room,
                                         .n_rows = 0,
                                         .chunk_rows = job->chunk_rows + (size_t)k * n_given};
            k++;
        }
    pk_status st;
    if (bound > 2 * held) {
        cli_progress_attach(&job->ctx, "memsort-fill: counting", args->quiet);
        st = pk_memsort_fill_from_chunks(&job->ctx, job->chunks, n_given, fills, n_fills);
        cli_progress_done(&job->ctx);
        if (st != PK_OK && st != PK_ERR_INVALID) return cli_error(cmd, st, &job->ctx);
        for (uint32_t k = 0; k < n_fills; k++) { /* the rows counted, the whole instance at most */
            fills[k].capacity = fills[k].n_rows < fills[k].plan->n_rows ? fills[k].n_rows : fills[k].plan->n_rows;
            fills[k].n_rows = 0;
        }
    }
    uint64_t room = 0;
    for (uint32_t k = 0; k < n_fills; k++) room += fills[k].capacity;
    job->pairs = malloc((2 * room + 1) * sizeof(uint32_t));
    if (!job->pairs)
        return cli_error(cmd,
                         pk_fail(&job->ctx, PK_ERR_NOMEM, "out of memory for %llu rows of %u instances",
                                 (unsigned long long)room, n_fills),
                         &job->ctx);
    for (uint64_t k = 0, at = 0; k < n_fills; at += fills[k].capacity, k++) fills[k].pairs = job->pairs + 2 * at;
    cli_progress_attach(&job->ctx, "memsort-fill", args->quiet);
    st = pk_memsort_fill_from_chunks(&job->ctx, job->chunks, n_given, fills, n_fills);
    cli_progress_done(&job->ctx);
    for (uint32_t k = 0; st == PK_ERR_INVALID && k < n_fills; k++)
        if (fills[k].n_rows > fills[k].plan->n_rows) { /* more rows than the whole instance has */
            fprintf(stderr,
                    "pairkit %s: instance %u: the chunk files give %llu rows, the plans say %u: not the trace %s "
                    "was made from, or that file was altered\n",
                    cmd, fills[k].plan->gid, (unsigned long long)fills[k].n_rows, fills[k].plan->n_rows,
                    args->plans_file);
            return 1;
        }
    return st ? cli_error(cmd, st, &job->ctx) : 0;
}

/* The chunk files against the plans: an owned instance's counts say what
 * each chunk gives; with every chunk, each instance is whole and its plan
 * fields agree with its rows. */
static int check_fills_against_plans(const char *cmd, const fill_args *args, const fill_job *job) {
    const pk_memsort_result *plans = &job->plans;
    const uint32_t n_given = job->n_given;
    for (uint32_t k = 0; k < job->n_fills; k++) {
        const pk_memsort_fill *f = &job->fills[k];
        const pk_memsort_instance *in = f->plan;
        for (uint32_t c = 0; in->owned && c < n_given; c++) {
            uint32_t want = plans->chunk_counts[in->counts_offset + job->chunks[c].index];
            if (f->chunk_rows[c] != want) {
                fprintf(stderr,
                        "pairkit %s: %s/mem_addr_%04u.bin gives instance %u %u rows, the plans say %u: not the "
                        "trace %s was made from, or that file was altered\n",
                        cmd, args->trace_dir, job->chunks[c].index, in->gid, f->chunk_rows[c], want, args->plans_file);
                return 1;
            }
        }
        if (n_given == plans->n_chunks && f->n_rows != in->n_rows) {
            fprintf(stderr,
                    "pairkit %s: instance %u: all %u chunk files give %llu rows, the plans say %u: not the trace "
                    "%s was made from, or that file was altered\n",
                    cmd, in->gid, n_given, (unsigned long long)f->n_rows, in->n_rows, args->plans_file);
            return 1;
        }
        const char *field = n_given == plans->n_chunks ? plan_against_rows(plans, job->fills, k) : NULL;
        if (field) {
            fprintf(stderr,
                    "pairkit %s: instance %u: its plan's %s does not agree with the rows all %u chunk files give: "
                    "not the trace %s was made from, or that file was altered\n",
                    cmd, in->gid, field, n_given, args->plans_file);
            return 1;
        }
    }
    return 0;
}

/* One staged output written whole and flushed to the disk; 0, or the exit
 * code after the error is printed (a cancelled write is no error here:
 * cli_commit then leaves no output). */
static int write_staged(const char *cmd, const fill_args *args, fill_job *job, const char *path, int text,
                        pk_progress *progress, cli_outputs *outs) {
    errno = 0;
    FILE *fp = fopen(path, "wb");
    int open_errno = errno;
    if (fp) {
        if (text)
            write_fill_txt(fp, args->plans_path, &job->plans, job->chunks, job->n_given, job->fills, job->n_fills);
        else
            write_fill_bin(fp, &job->plans, job->chunks, job->n_given, job->fills, job->n_fills, job->chunk_rows,
                           progress);
    }
    errno = fp ? 0 : open_errno;
    int bad = !fp || (!progress->cancelled && pk_sync_file(fp, PK_SYNC_STEP_BYTES, progress) < 0);
    /* a cancelled file (removed either way) is emptied before it is closed,
     * so that its pages are dropped rather than first given disk blocks by
     * the close; if it cannot be emptied, the close only takes longer */
    if (fp && progress->cancelled && fflush(fp) == 0) (void)!ftruncate(fileno(fp), 0);
    if (fp && fclose(fp) != 0 && !progress->cancelled) bad = 1;
    if (!bad) return 0;
    return cli_output_error(cmd,
                            pk_fail(&job->ctx, PK_ERR_IO, "%s: write failed: %s", path,
                                    errno ? strerror(errno) : pk_earlier_write_failure()),
                            &job->ctx, outs);
}

static void print_fill_summary(const fill_job *job, const char *bin_path, const char *txt_path) {
    uint32_t complete = 0;
    uint64_t rows = 0;
    for (uint32_t k = 0; k < job->n_fills; k++) {
        complete += job->fills[k].n_rows == job->fills[k].plan->n_rows;
        rows += job->fills[k].n_rows;
    }
    fprintf(stderr, "%u instance%s from %u of %u chunk files: %llu rows, %u complete; wrote %s and %s\n", job->n_fills,
            job->n_fills == 1 ? "" : "s", job->n_given, job->plans.n_chunks, (unsigned long long)rows, complete,
            bin_path, txt_path);
}

/* fill.bin and fill.txt, staged and renamed into place together; the
 * output folder is made if missing, and removed again when the outputs do
 * not come. Progress by the pairs' bytes, once as they are written and once
 * as they reach the disk (32 MiB a step); a Ctrl-C in either ends the
 * writing, and cli_commit then leaves no output. */
static int write_fill_outputs(const char *cmd, const fill_args *args, fill_job *job) {
    int made_dir = 0;
    if (mkdir(args->out_dir, 0777) == 0) {
        made_dir = 1;
    } else if (errno != EEXIST) {
        fprintf(stderr, "pairkit %s: %s: cannot create the directory: %s\n", cmd, args->out_dir, strerror(errno));
        return 1;
    }
    char bin_path[4200], txt_path[4200];
    snprintf(bin_path, sizeof bin_path, "%.4000s/fill.bin", args->out_dir);
    snprintf(txt_path, sizeof txt_path, "%.4000s/fill.txt", args->out_dir);
    cli_outputs outs = {0};
    const char *s_bin = cli_stage(cmd, &outs, bin_path);
    const char *s_txt = s_bin ? cli_stage(cmd, &outs, txt_path) : NULL;
    int rc = 0;
    if (!s_bin || !s_txt) {
        cli_discard(&outs);
        rc = 1;
    } else {
        cli_progress_attach(&job->ctx, "memsort-fill: writing", args->quiet);
        pk_progress progress;
        double bytes = 1; /* not 0: the progress line divides by it */
        for (uint32_t k = 0; k < job->n_fills; k++)
            bytes += 16.0 * (double)job->fills[k].n_rows; /* 8 bytes a row, written, then synced */
        pk_progress_begin(&progress, &job->ctx, bytes, 0, 1);
        rc = write_staged(cmd, args, job, s_bin, 0, &progress, &outs);
        if (!rc && !progress.cancelled) rc = write_staged(cmd, args, job, s_txt, 1, &progress, &outs);
        cli_progress_done(&job->ctx);
        if (!rc) rc = cli_commit(cmd, &outs);
        else cli_discard(&outs);
        if (!rc && !args->quiet) print_fill_summary(job, bin_path, txt_path);
    }
    if (rc && made_dir) rmdir(args->out_dir); /* a folder made for outputs that did not come */
    return rc;
}

static void fill_job_free(fill_job *job) {
    free(job->mark);
    free(job->fills);
    free(job->chunk_rows);
    free(job->pairs);
    pk_memsort_chunks_free(job->chunks, job->n_given);
    pk_memsort_result_free(&job->plans);
}

int cmd_memsort_fill(int argc, char **argv) {
    const char *cmd = "memsort-fill";
    fill_args args;
    fill_job job;
    memset(&job, 0, sizeof job);
    pk_context_init(&job.ctx);
    pk_memsort_result_init(&job.plans);
    int rc = parse_fill_args(cmd, argc, argv, &args, &job.ctx);
    if (rc != FILL_CONTINUE) return rc;
    if ((rc = check_fill_places(cmd, &args)) != 0) return rc;
    if ((rc = load_plans(cmd, &args, &job)) == 0 && (rc = select_instances(cmd, &args, &job)) == 0 &&
        (rc = fill_instances(cmd, &args, &job)) == 0 && (rc = check_fills_against_plans(cmd, &args, &job)) == 0)
        rc = write_fill_outputs(cmd, &args, &job);
    fill_job_free(&job);
    return rc;
}
