/* cmd_memsort.c - `pairkit memsort TRACE_DIR`: plan and fill of one
 * worker's instances of a zkVM memory trace, written to OUT_DIR; and
 * `pairkit memsort-gen OUT_DIR`: a synthetic trace in chunk files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common/common.h"
#include "mpi.h"
#include "pairkit/memsort.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: pairkit memsort TRACE_DIR -o OUT_DIR [--workers W --worker w] [options]\n"
            "  Sorts the trace's entries stably by address, cuts each region into\n"
            "  instances and writes worker w's instances (gid %% W == w) with their plans\n"
            "  to OUT_DIR/memsort.bin and OUT_DIR/summary.txt (docs/memsort.md).\n"
            "  TRACE_DIR holds mem_addr_0000.bin, mem_addr_0001.bin, ... (u32 addresses).\n\n"
            "  --workers W          number of workers (default 1)\n"
            "  --worker w           this worker, 0 <= w < W (needed when W > 1)\n"
            "  -o, --output DIR     output directory (made if missing, in a folder that exists)\n"
            "  --regions R          default (default), zisk, or a region table file\n"
            "  --verify             compare every owned instance and every plan with the\n"
            "                       reference sort's, and fill every owned instance again\n"
            "                       from the chunk files by its plan alone (exit 1 on any\n"
            "                       difference)\n"
            "  --backend B          auto (default: the GPU when its free memory holds the\n"
            "                       trace, else the CPU), cpu or cuda\n"
            "  --kernel K           ref, cpu, cpu-portable (no hand-written vector code) or cuda\n"
            "  --threads N          CPU threads (default: all)\n"
            "  -q, --quiet          no progress line, no summary\n");
}

static void gen_usage(FILE *out) {
    fprintf(out,
            "usage: pairkit memsort-gen OUT_DIR --entries N [--seed S] [options]\n"
            "  Writes a synthetic zkVM memory trace as OUT_DIR/mem_addr_NNNN.bin, the\n"
            "  same for the same seed: a hot stack window, a bump-allocated heap, memcpy\n"
            "  runs, sequential input reads and ROM tables (docs/memsort.md); with a last\n"
            "  region of fewer than 16384 words, skewed accesses over it alone. Made and\n"
            "  written a chunk at a time (--awkward: made whole first); the chunk files\n"
            "  go into place together once all are written, or none do.\n\n"
            "  --entries N          1 .. 2^29 entries (accepts 2^k and K, M, G suffixes)\n"
            "  --seed S             a whole number, 0 .. 2^64 - 1 (default 1)\n"
            "  --chunk N            entries per chunk file (default 262144, the prover's;\n"
            "                       at most 4096 files)\n"
            "  --awkward            the awkward cases instead: a run across an instance\n"
            "                       boundary, a run longer than an instance, an empty\n"
            "                       region, a partial last instance\n"
            "  --regions R          default (default), zisk, or a region table file\n"
            "  -q, --quiet          no progress line and no summary line\n");
}

/* A worker folder and the two files memsort writes into it, removed. */
static void remove_worker_dir(const char *dir) {
    char path[4300];
    snprintf(path, sizeof path, "%.4000s/memsort.bin", dir);
    unlink(path);
    snprintf(path, sizeof path, "%.4000s/summary.txt", dir);
    unlink(path);
    rmdir(dir);
}

/* Under mpirun, the job's output, all of it or none: each rank writes its
 * worker-NNNN/ into a staging folder (rank 0 also workers.txt), then, once
 * every rank has, moves its older folder aside and the new one in; should
 * any rank fail at either step, every rank puts its older folder back. The
 * older folders are removed only when every rank has moved its new one in.
 * Returns the exit code. */
static int write_job(const char *cmd, pk_context *ctx, const char *out_dir, const char *worker_dir,
                     const pk_memsort_regions *regions, const pk_memsort_result *result, int rank, int n_ranks,
                     int quiet) {
    char staged[4200], old[4200], list[4200], list_staged[4200], list_old[4200];
    snprintf(staged, sizeof staged, "%.4000s.pkstage", worker_dir);
    snprintf(old, sizeof old, "%.4000s.pkold", worker_dir);
    snprintf(list, sizeof list, "%.4000s/workers.txt", out_dir);
    snprintf(list_staged, sizeof list_staged, "%.4000s.pkstage", list);
    snprintf(list_old, sizeof list_old, "%.4000s.pkold", list);
    int rc = 0;
    pk_status st = PK_OK;
    struct stat sb;
    /* 1: everything staged */
    int list_blocked = rank == 0 && stat(list, &sb) == 0 && !S_ISREG(sb.st_mode);
    int dir_blocked = stat(worker_dir, &sb) == 0 && !S_ISDIR(sb.st_mode);
    if (list_blocked || dir_blocked) {
        fprintf(stderr, "pairkit %s [rank %d]: %s: in the way of the output (not a %s)\n", cmd, rank,
                list_blocked ? list : worker_dir, list_blocked ? "file" : "folder");
        rc = 1;
    } else if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "pairkit %s [rank %d]: %s: cannot create the directory: %s\n", cmd, rank, out_dir,
                strerror(errno));
        rc = 1;
    } else {
        cli_progress_attach(ctx, "memsort: writing", quiet || rank != 0);
        st = pk_memsort_write(ctx, staged, regions, result);
        cli_progress_done(ctx);
        if (st != PK_OK) rc = cli_error(cmd, st, ctx);
    }
    uint32_t mine[2] = {result->n_owned, (uint32_t)result->n_values};
    uint32_t *all = rank == 0 ? calloc((size_t)n_ranks * 2, sizeof(uint32_t)) : NULL;
    cli_mpi_gather_bytes(mine, sizeof mine, all);
    if (rank == 0 && !rc) {
        pk_atomic_file f;
        st = pk_atomic_open(ctx, &f, list_staged);
        if (!st) {
            fprintf(f.fp, "pairkit memsort %s: %d workers, %u instances, %llu entries\n", PK_VERSION_STRING, n_ranks,
                    result->n_instances, (unsigned long long)result->n_entries);
            for (int w = 0; w < n_ranks; w++)
                fprintf(f.fp, "worker %d: worker-%04d/ %u instances %u rows\n", w, w, all[2 * w], all[2 * w + 1]);
            st = pk_atomic_commit(ctx, &f);
        }
        if (st) rc = cli_error(cmd, st, ctx);
    }
    free(all);
    int staged_ok = cli_mpi_all_ok(rc == 0);
    /* 2: older output aside, newer in */
    int moved_old = 0, moved_new = 0, list_moved_old = 0, list_moved_new = 0;
    if (staged_ok) {
        /* the files written again keep the modes the older ones were given */
        static const char *const names[2] = {"memsort.bin", "summary.txt"};
        for (int k = 0; k < 2; k++) {
            char from[4200], to[4200];
            snprintf(from, sizeof from, "%.4000s/%s", staged, names[k]);
            snprintf(to, sizeof to, "%.4000s/%s", worker_dir, names[k]);
            pk_keep_mode(from, to);
        }
        if (rank == 0) pk_keep_mode(list_staged, list);
        int ok = 1;
        if (stat(worker_dir, &sb) == 0) ok = (moved_old = rename(worker_dir, old) == 0);
        if (ok) ok = (moved_new = rename(staged, worker_dir) == 0);
        if (ok && rank == 0) {
            if (stat(list, &sb) == 0) ok = (list_moved_old = rename(list, list_old) == 0);
            if (ok) ok = (list_moved_new = rename(list_staged, list) == 0);
        }
        if (!ok) {
            fprintf(stderr, "pairkit %s [rank %d]: %s: cannot move into place: %s; no output changed\n", cmd, rank,
                    worker_dir, strerror(errno));
            rc = 1;
        }
    }
    int moved_ok = staged_ok && cli_mpi_all_ok(rc == 0);
    if (staged_ok && !moved_ok) {
        /* put the older output back */
        if (moved_new) rename(worker_dir, staged);
        if (moved_old) rename(old, worker_dir);
        if (list_moved_new) rename(list, list_staged);
        if (list_moved_old) rename(list_old, list);
        if (!rc) rc = 1; /* another rank failed and said why */
    }
    /* 3: what is not needed any more: the older output, or the staged one */
    remove_worker_dir(moved_ok ? old : staged);
    if (rank == 0) unlink(moved_ok ? list_old : list_staged);
    /* the folders of an older job of more ranks would read as part of this
     * one: gone, as a shorter trace's writer removes older chunk files */
    for (int w = n_ranks; moved_ok && rank == 0; w++) {
        char extra[4100];
        snprintf(extra, sizeof extra, "%.4000s/worker-%04d", out_dir, w);
        if (stat(extra, &sb) != 0 || !S_ISDIR(sb.st_mode)) break;
        remove_worker_dir(extra);
    }
    return rc;
}

/* The options that take a value. */
static const char *const value_options[] = {"-o",        "--output", "--regions", "--workers", "--worker",
                                            "--backend", "--kernel", "--threads", NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h", "--help", "-q", "--quiet", "--verify", NULL};

/* The command line, checked; the worker this run is (under mpirun, its
 * rank's). */
typedef struct memsort_args {
    const char *trace_dir, *out_dir, *regions_name;
    int quiet, verify;
    int workers_given, worker_given; /* --workers or --worker given; --worker given */
    pk_memsort_options opts;
    char out_buf[4096], trace_buf[4096]; /* the folders without trailing slashes */
    char worker_dir[4096];               /* under mpirun: OUT_DIR/worker-NNNN */
    const char *write_dir;               /* where this run's memsort.bin and summary.txt go */
} memsort_args;

/* What the run holds, freed by memsort_job_free whatever step it stopped at. */
typedef struct memsort_job {
    pk_context ctx;
    int rank, n_ranks;
    pk_memsort_regions regions;
    pk_memsort_trace trace;
    pk_memsort_result result, reference;
} memsort_job;

#define MEMSORT_CONTINUE (-1)

/* MEMSORT_CONTINUE, or the exit code: 0 after --help, 2 for a usage error. */
static int parse_memsort_args(const char *cmd, int argc, char **argv, memsort_args *args, pk_context *ctx) {
    memset(args, 0, sizeof *args);
    args->regions_name = "default";
    args->opts = (pk_memsort_options){PK_BACKEND_AUTO, PK_MEMSORT_KERNEL_BEST, 1, 0};
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
        } else if (strcmp(a, "--verify") == 0) {
            args->verify = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            size_t t;
            if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) args->out_dir = v;
            else if (strcmp(a, "--regions") == 0) args->regions_name = v;
            else if (strcmp(a, "--workers") == 0) {
                if (cli_parse_range(cmd, a, v, 1, UINT32_MAX, &t)) return 2;
                args->opts.n_workers = (uint32_t)t;
                args->workers_given = 1;
            } else if (strcmp(a, "--worker") == 0) {
                if (cli_parse_range(cmd, a, v, 0, UINT32_MAX, &t)) return 2;
                args->opts.worker = (uint32_t)t;
                args->workers_given = 1;
                args->worker_given = 1;
            } else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &args->opts.backend))
                    return cli_usage_error(cmd, "--backend: '%s' is not auto, cpu or cuda", v);
            } else if (strcmp(a, "--kernel") == 0) {
                args->opts.kernel = pk_memsort_kernel_from_name(v);
                if (args->opts.kernel < 0 || (args->opts.kernel == PK_MEMSORT_KERNEL_CUDA && !pk_cuda_built()))
                    return cli_unknown_kernel(cmd, "--kernel", v);
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx->n_threads)) return 2;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else {
            if (args->trace_dir) return cli_usage_error(cmd, "one trace directory, got a second: '%s'", a);
            args->trace_dir = a;
        }
    }
    if (!args->trace_dir) return cli_usage_error(cmd, "expected a trace directory");
    if (!args->out_dir) return cli_usage_error(cmd, "expected -o OUT_DIR");
    if (!*args->trace_dir) return cli_usage_error(cmd, "the trace directory is an empty name");
    if (!*args->out_dir) return cli_usage_error(cmd, "-o: the output directory is an empty name");
    args->out_dir = pk_dir_name(args->out_dir, args->out_buf, sizeof args->out_buf);
    args->trace_dir = pk_dir_name(args->trace_dir, args->trace_buf, sizeof args->trace_buf);
    return MEMSORT_CONTINUE;
}

/* Under mpirun each rank is one worker (W = the number of ranks, w = the
 * rank, on GPU rank modulo the devices) and writes its own instances to
 * OUT_DIR/worker-NNNN/; rank 0 also writes OUT_DIR/workers.txt. One
 * failing rank fails the job and no output changes (write_job). The
 * answers depend on the arguments and the rank count alone, the same on
 * every rank (a rank-dependent one left the others waiting). */
static int assign_worker(const char *cmd, memsort_args *args, memsort_job *job) {
    args->write_dir = args->out_dir;
    if (job->n_ranks > 1) {
        if (args->workers_given)
            return cli_usage_error(cmd, "under mpirun the workers are the %d ranks: leave out --workers and --worker",
                                   job->n_ranks);
        args->opts.n_workers = (uint32_t)job->n_ranks;
        args->opts.worker = (uint32_t)job->rank;
        job->ctx.cuda_device = cli_mpi_cuda_device();
        snprintf(args->worker_dir, sizeof args->worker_dir, "%.4000s/worker-%04d", args->out_dir, job->rank);
        args->write_dir = args->worker_dir;
    }
    const pk_memsort_options *opts = &args->opts;
    if (job->n_ranks == 1 && opts->n_workers > 1 && !args->worker_given)
        return cli_usage_error(cmd, "--workers %u: give --worker w too (which of the %u workers this run is, 0 .. %u)",
                               opts->n_workers, opts->n_workers, opts->n_workers - 1);
    if (opts->worker >= opts->n_workers)
        return cli_usage_error(cmd, "--worker %u must be below --workers %u", opts->worker, opts->n_workers);
    return 0;
}

/* Before the work: the options against this build and machine, and the
 * output's place (OUT_DIR a folder or to be made in one; the two files it
 * will hold, or under mpirun a new worker folder's, neither of them the
 * region table read). Collective: two cli_mpi_all_ok. */
static int check_before_work(const char *cmd, const memsort_args *args, memsort_job *job) {
    /* a rank's own device may fail where another's does not: every rank
     * stops, or none (a lone exit would leave the others waiting) */
    pk_status st_opts = pk_memsort_options_check(&job->ctx, &args->opts);
    int rc_opts = st_opts ? cli_error(cmd, st_opts, &job->ctx) : 0;
    if (!cli_mpi_all_ok(st_opts == PK_OK)) return rc_opts ? rc_opts : 1;
    if (strcmp(args->regions_name, "default") != 0 && strcmp(args->regions_name, "zisk") != 0)
        cli_input(args->regions_name);
    cli_input_trace(args->trace_dir);
    const char *const files[2] = {"memsort.bin", "summary.txt"};
    /* each node's own file system: likewise every rank stops, or none;
     * rank 0 prints the findings, so it says when only another's failed */
    int bad = cli_check_out_dir(cmd, args->out_dir, files, job->n_ranks == 1 ? 2 : 0);
    if (!cli_mpi_all_ok(!bad)) {
        if (!bad && job->rank == 0)
            fprintf(stderr, "pairkit %s: %s: another rank cannot write there (on its node)\n", cmd, args->out_dir);
        return bad ? bad : 1;
    }
    return 0;
}

/* The region table and the trace; under mpirun the ranks compare what they
 * read (collective: cli_mpi_all_ok, then cli_mpi_same_input where all
 * read). */
static pk_status read_trace(const memsort_args *args, memsort_job *job) {
    pk_status st = pk_memsort_regions_get(&job->ctx, args->regions_name, &job->regions);
    if (!st) st = pk_memsort_trace_read(&job->ctx, args->trace_dir, &job->regions, &job->trace);
    if (job->n_ranks > 1 && cli_mpi_all_ok(st == PK_OK)) {
        const pk_memsort_trace *trace = &job->trace;
        uint64_t h =
            cli_hash_bytes(CLI_HASH_START ^ trace->n_entries, trace->addr, trace->n_entries * sizeof(uint32_t));
        h = cli_hash_bytes(h, trace->chunk_start, ((size_t)trace->n_chunks + 1) * sizeof(uint64_t));
        st = cli_mpi_same_input(&job->ctx, h, args->trace_dir, "traces");
    }
    return st;
}

/* An empty chunk file is a trace's own (a chunk without memory accesses),
 * or one cut to nothing: said, even with -q. */
static void warn_empty_chunks(const char *cmd, const memsort_args *args, const pk_memsort_trace *trace) {
    uint32_t n_empty = 0, first = 0;
    for (uint32_t c = 0; c < trace->n_chunks; c++)
        if (trace->chunk_start[c + 1] == trace->chunk_start[c] && n_empty++ == 0) first = c;
    if (n_empty)
        fprintf(stderr,
                "pairkit %s: warning: %s/mem_addr_%04u.bin is empty (%u empty chunk file%s in all), read as a "
                "chunk without entries\n",
                cmd, args->trace_dir, first, n_empty, n_empty == 1 ? "" : "s");
}

/* The plan and fill; with --verify, the reference sort compared with it and
 * every owned instance filled again from the chunk files by its plan alone,
 * as a worker holding them would. Each with its own progress line. */
static pk_status sort_and_verify(const memsort_args *args, memsort_job *job) {
    int quiet = args->quiet || job->rank != 0;
    cli_progress_attach(&job->ctx, "memsort", quiet);
    pk_status st = pk_memsort_run(&job->ctx, &args->opts, &job->regions, &job->trace, &job->result);
    if (!st && args->verify) {
        cli_progress_done(&job->ctx);
        cli_progress_attach(&job->ctx, "memsort --verify: reference sort", quiet);
        pk_memsort_options ref_opts = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, args->opts.n_workers, args->opts.worker};
        st = pk_memsort_run(&job->ctx, &ref_opts, &job->regions, &job->trace, &job->reference);
        if (!st) st = pk_memsort_compare(&job->ctx, &job->reference, &job->result);
        if (!st) {
            cli_progress_done(&job->ctx);
            cli_progress_attach(&job->ctx, "memsort --verify: filling from the plans", quiet);
            st = pk_memsort_check_plans(&job->ctx, &job->trace, &job->result);
        }
    }
    cli_progress_done(&job->ctx);
    return st;
}

/* memsort.bin and summary.txt, when every rank got this far (collective:
 * cli_mpi_all_ok, then write_job's under mpirun). Sets *wrote. */
static int write_memsort_output(const char *cmd, const memsort_args *args, memsort_job *job, pk_status st, int *wrote) {
    int rc = st ? cli_error(cmd, st, &job->ctx) : 0;
    *wrote = 0;
    if (!cli_mpi_all_ok(st == PK_OK)) return rc ? rc : 1; /* another rank failed and said why */
    if (job->n_ranks > 1) {
        rc = write_job(cmd, &job->ctx, args->out_dir, args->write_dir, &job->regions, &job->result, job->rank,
                       job->n_ranks, args->quiet);
        *wrote = rc == 0;
        return rc;
    }
    struct stat sb;
    int existed = stat(args->write_dir, &sb) == 0;
    cli_progress_attach(&job->ctx, "memsort: writing", args->quiet);
    st = pk_memsort_write(&job->ctx, args->write_dir, &job->regions, &job->result);
    cli_progress_done(&job->ctx);
    if (st != PK_OK) {
        if (!existed) rmdir(args->write_dir); /* the folder it made, empty again: no trace of the run */
        return cli_error(cmd, st, &job->ctx);
    }
    *wrote = 1;
    return 0;
}

static void print_memsort_summary(const memsort_args *args, const memsort_job *job) {
    const pk_memsort_result *result = &job->result;
    const pk_memsort_stats *s = &result->stats;
    fprintf(stderr, "%llu entries in %u chunk%s, %u instances; worker %u of %u owns %u (%llu rows, %llu runs)\n",
            (unsigned long long)result->n_entries, result->n_chunks, result->n_chunks == 1 ? "" : "s",
            result->n_instances, result->worker, result->n_workers, result->n_owned,
            (unsigned long long)result->n_values, (unsigned long long)result->n_runs);
    if (s->gpu_too_small) {
        uint64_t host = 0, device = 0;
        pk_context scratch = job->ctx; /* the query's message, if any, is not the run's */
        if (pk_memsort_memory_bytes(&scratch, &job->regions, result->n_entries, PK_MEMSORT_KERNEL_CUDA, 0, &host,
                                    &device) == PK_OK)
            fprintf(stderr,
                    "the GPU has too little free memory for this trace (about %.2f GiB needed): sorted on the "
                    "CPU\n",
                    (double)device / 1073741824.0);
    }
    fprintf(stderr, "kernel %s: %.3f s", pk_memsort_kernel_name(s->kernel), s->seconds);
    if (s->device_ms > 0) fprintf(stderr, " (device %.2f ms, upload %.2f ms)", s->device_ms, s->upload_ms);
    fprintf(stderr, "%s; wrote %s/memsort.bin and %s/summary.txt\n",
            args->verify ? ", identical to the reference and refilled by its plans" : "", args->write_dir,
            args->write_dir);
    if (job->n_ranks > 1)
        fprintf(stderr, "rank %d of %d: %.3f s in MPI collectives (checks and waiting for the others)\n", job->rank,
                job->n_ranks, cli_mpi_comm_seconds());
}

static void memsort_job_free(memsort_job *job) {
    pk_memsort_trace_free(&job->trace);
    pk_memsort_result_free(&job->result);
    pk_memsort_result_free(&job->reference);
}

int cmd_memsort(int argc, char **argv) {
    const char *cmd = "memsort";
    memsort_args args;
    memsort_job job;
    memset(&job, 0, sizeof job);
    pk_context_init(&job.ctx);
    pk_memsort_result_init(&job.result);
    pk_memsort_result_init(&job.reference);
    int rc = parse_memsort_args(cmd, argc, argv, &args, &job.ctx);
    if (rc != MEMSORT_CONTINUE) return rc;
    job.rank = cli_mpi_rank(), job.n_ranks = cli_mpi_size();
    if ((rc = assign_worker(cmd, &args, &job)) != 0) return rc;
    cli_note_cpu_fallback(cmd, &job.ctx, args.opts.backend, args.opts.kernel == PK_MEMSORT_KERNEL_BEST, args.quiet);
    if ((rc = check_before_work(cmd, &args, &job)) != 0) return rc;

    pk_status st = read_trace(&args, &job);
    if (!st && job.rank == 0) warn_empty_chunks(cmd, &args, &job.trace);
    if (!st) st = sort_and_verify(&args, &job);
    int wrote;
    rc = write_memsort_output(cmd, &args, &job, st, &wrote);
    if (wrote && !rc && !args.quiet) print_memsort_summary(&args, &job);
    memsort_job_free(&job);
    return rc;
}

/* The options of memsort-gen that take a value. */
static const char *const gen_value_options[] = {"--entries", "--seed", "--chunk", "--regions", NULL};

/* The options of memsort-gen that take none. */
static const char *const gen_flag_options[] = {"-h", "--help", "--awkward", "-q", "--quiet", NULL};

int cmd_memsort_gen(int argc, char **argv) {
    const char *cmd = "memsort-gen";
    const char *out_dir = NULL, *regions_name = "default";
    pk_memsort_gen_options g = {0, 1, 0, 0};
    int quiet = 0, have_entries = 0;
    pk_context ctx;
    pk_context_init(&ctx);
    if (cli_check_flags(cmd, argc, argv, gen_value_options, gen_flag_options) ||
        cli_check_repeats(cmd, argc, argv, gen_value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            gen_usage(stdout);
            return 0;
        } else if (strcmp(a, "--awkward") == 0) {
            g.awkward = 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, gen_value_options);
            const char *v = argv[++k];
            uint64_t x;
            if (strcmp(a, "--entries") == 0) {
                if (cli_parse_count(cmd, a, v, &g.n_entries)) return 2;
                have_entries = 1;
            } else if (strcmp(a, "--seed") == 0) {
                size_t seed;
                if (cli_parse_size(cmd, a, v, &seed)) return 2;
                g.seed = seed;
            } else if (strcmp(a, "--chunk") == 0) {
                if (cli_parse_count(cmd, a, v, &x)) return 2;
                if (x == 0 || x > UINT32_MAX) return cli_usage_error(cmd, "--chunk: %s is out of range", v);
                g.chunk_entries = (uint32_t)x;
            } else if (strcmp(a, "--regions") == 0) {
                regions_name = v;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else {
            if (out_dir) return cli_usage_error(cmd, "one output directory, got a second: '%s'", a);
            out_dir = a;
        }
    }
    if (!out_dir) return cli_usage_error(cmd, "expected an output directory");
    if (!*out_dir) return cli_usage_error(cmd, "the output directory is an empty name");
    if (!have_entries) return cli_usage_error(cmd, "expected --entries N");
    pk_memsort_regions regions;
    pk_status st = pk_memsort_regions_get(&ctx, regions_name, &regions);
    if (st) return cli_error(cmd, st, &ctx);
    const pk_memsort_region *last = &regions.region[regions.n_regions - 1];
    /* said even with -q, as memsort's empty chunks are: the trace is not
     * the realistic one asked for */
    if (!g.awkward && last->size / 8 < PK_MEMSORT_GEN_MIN_LAST_WORDS)
        fprintf(stderr,
                "note: %s: the last region, %s, holds %llu words, too few for a stack window and a heap (%u or "
                "more): the trace is skewed accesses over its words alone, the other regions empty\n",
                cmd, last->name, (unsigned long long)(last->size / 8), PK_MEMSORT_GEN_MIN_LAST_WORDS);
    /* made and written a chunk at a time; Ctrl-C: no chunk file left behind */
    cli_progress_attach(&ctx, "memsort-gen", quiet);
    st = pk_memsort_generate_dir(&ctx, &regions, &g, out_dir);
    cli_progress_done(&ctx);
    if (st) return cli_error(cmd, st, &ctx);
    uint64_t chunk = g.chunk_entries ? g.chunk_entries : PK_MEMSORT_GEN_CHUNK;
    uint64_t n_chunks = (g.n_entries + chunk - 1) / chunk;
    if (!quiet)
        fprintf(stderr, "wrote %llu entries in %llu chunk file%s to %s\n", (unsigned long long)g.n_entries,
                (unsigned long long)n_chunks, n_chunks == 1 ? "" : "s", out_dir);
    return 0;
}
