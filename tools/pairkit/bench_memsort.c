/* bench_memsort.c - `pairkit bench memsort`: memsort's kernels beside the
 * plain alternatives, under the bench protocol (cmd_bench.c): a cold run of
 * each variant reported apart, then warm rounds in which the variants take
 * turns in a rotating order; median and minimum of the warm runs.
 *
 * CPU (--backend cpu): one streaming pass that reads the trace and writes
 * an output of the result's size with non-temporal stores (the floor) and
 * the same pass with plain stores, pairkit's plan + fill (all instances,
 * and one worker of 16), the same plan + fill without its hand-written
 * vector code (cpu-portable: what the AVX-512 paths buy), the reference
 * sort, and the plain sort (an LSD radix sort of (compact address, index) pairs, the CPU
 * twin of the CUB alternative). CUDA (--backend cuda):
 * the plain CUB alternative (upload, radix sort of (compact address,
 * index) pairs, download keys and values), pairkit for all instances, and
 * pairkit for one worker of 16, all on a trace pinned once up front, timed
 * with device events. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../bench/memsort_baselines.h"
#include "cli.h"
#include "common/common.h"
#include "memsort/memsort_internal.h"
#include "pairkit/memsort.h"

enum { MAX_VARIANTS = 7 };

static void bench_usage(FILE *out) {
    fprintf(out,
            "usage: pairkit bench memsort [options]\n"
            "  Times plan + fill on a generated trace beside the plain alternatives.\n"
            "  --entries N      trace entries (default 2^24; 519000000 is a real block's trace)\n"
            "  --seed S         generator seed (default 1)\n"
            "  --regions R      default (default), zisk or a region table file\n"
            "  --backend B      cpu (default) or cuda\n"
            "  --runs N         warm runs per variant (default 5)\n"
            "  --no-ref         CPU: leave out the reference sort (slow at large sizes);\n"
            "                   CUDA: skip checking the results against the CPU kernel\n"
            "  --threads N      CPU threads\n");
}

/* CPU seconds of the process (all threads), to compare variants on a
 * machine that others load: contention lengthens wall time, not this. */
static double process_cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static double peak_rss_gib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / (1024.0 * 1024.0);
}

/* One variant's row of the table (its runs sorted in place). */
static void summarize(const char *name, double *v, int runs, double cold, double base_median, const char *extra) {
    double least, med = cli_runs_median(v, runs, &least);
    printf("%-16s %10.2f %10.2f %10.2f %9.3fx  %s\n", name, cold, med, least, base_median > 0 ? med / base_median : 1.0,
           extra ? extra : "");
}

/* The median of a variant's runs, leaving them in their order (NaN when
 * there is no memory for the copy). */
static double median_of(const double *v, int runs) {
    if (runs < 1) return (double)NAN; /* --runs is 1 .. 100000; said for the compiler's size check too */
    double *c = malloc((size_t)runs * sizeof *c);
    if (!c) return (double)NAN;
    memcpy(c, v, (size_t)runs * sizeof *c);
    double med = cli_runs_median(c, runs, NULL);
    free(c);
    return med;
}

/* The options that take a value. */
static const char *const value_options[] = {"--entries", "--seed",    "--regions", "--backend",
                                            "--runs",    "--threads", NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h", "--help", "--no-ref", NULL};

/* The command line, checked. */
typedef struct bench_args {
    uint64_t n, seed;
    const char *regions_name;
    pk_backend backend;
    int runs, with_ref;
} bench_args;

/* What a variant runs: the floor (non-temporal or plain stores), the LSD
 * radix sort, the CUB alternative, or a memsort kernel for one worker of
 * n_workers. */
typedef enum variant_kind {
    VARIANT_STREAM,
    VARIANT_STREAM_PLAIN,
    VARIANT_RADIX,
    VARIANT_CUB,
    VARIANT_KERNEL
} variant_kind;

typedef struct variant {
    const char *name;
    variant_kind kind;
    int kernel; /* VARIANT_KERNEL: PK_MEMSORT_KERNEL_* */
    uint32_t n_workers;
} variant;

/* What the benchmark holds, freed by bench_free whatever step it stopped at. */
typedef struct bench_state {
    pk_context ctx;
    pk_memsort_regions regions;
    pk_memsort_trace trace;
    variant var[MAX_VARIANTS];
    int n_var;
    int v_cpu, v_ref, v_portable, v_plain, v_worker, v_radix; /* where those sit, -1 when absent */
    double *times, *cpu_times;                                /* [variant][runs] warm wall and CPU times, ms */
    double cold[MAX_VARIANTS], up_ms[MAX_VARIANTS];
    pk_memsort_result res[MAX_VARIANTS];
    int nt; /* the baselines' threads, as many as pairkit's */
    /* the floor writes as much as the CPU result holds */
    uint32_t *stream_values;
    pk_memsort_run_entry *stream_runs;
    uint64_t stream_n_runs;
    uint32_t *radix_buf[4];
    const uint32_t *radix_keys, *radix_values;
#ifdef PK_HAVE_CUDA
    pk_memsort_cub_baseline *cub;
#endif
    pk_memsort_cub_times cub_t;
} bench_state;

#define BENCH_CONTINUE (-1)

/* BENCH_CONTINUE, or the exit code: 0 after --help, 2 for a usage error. */
static int parse_bench_args(const char *cmd, int argc, char **argv, bench_args *args, pk_context *ctx) {
    *args = (bench_args){
        .n = 1u << 24, .seed = 1, .regions_name = "default", .backend = PK_BACKEND_CPU, .runs = 5, .with_ref = 1};
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        size_t t;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            bench_usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-ref") == 0) {
            args->with_ref = 0;
        } else if (a[0] == '-') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            if (strcmp(a, "--entries") == 0) {
                uint64_t c;
                if (cli_parse_count(cmd, a, v, &c)) return 2;
                args->n = c;
            } else if (strcmp(a, "--seed") == 0) {
                if (cli_parse_size(cmd, a, v, &t)) return 2;
                args->seed = t;
            } else if (strcmp(a, "--regions") == 0) {
                args->regions_name = v;
            } else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &args->backend) || args->backend == PK_BACKEND_AUTO)
                    return cli_usage_error(cmd, "--backend: '%s' is not cpu or cuda", v);
            } else if (strcmp(a, "--runs") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 100000, &t)) return 2;
                args->runs = (int)t;
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx->n_threads)) return 2;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    return BENCH_CONTINUE;
}

/* The region table, the backend, and the generated trace. */
static int make_trace(const char *cmd, const bench_args *args, bench_state *b) {
    pk_status st = pk_memsort_regions_get(&b->ctx, args->regions_name, &b->regions);
    if (st) return cli_error(cmd, st, &b->ctx);
    if (args->backend == PK_BACKEND_CUDA) {
        pk_backend resolved;
        if ((st = pk_backend_resolve(&b->ctx, args->backend, &resolved)) != PK_OK) return cli_error(cmd, st, &b->ctx);
    }
    pk_memsort_gen_options g = {args->n, args->seed, 0, 0};
    double t0 = pk_now();
    if ((st = pk_memsort_generate(&b->ctx, &b->regions, &g, &b->trace)) != PK_OK) return cli_error(cmd, st, &b->ctx);
    printf(
        "pairkit bench memsort: %llu entries (seed %llu, %u chunk%s, regions %s), generated in %.2f s, %d warm runs\n",
        (unsigned long long)args->n, (unsigned long long)args->seed, b->trace.n_chunks,
        b->trace.n_chunks == 1 ? "" : "s", args->regions_name, pk_now() - t0, args->runs);
    cli_print_machine(&b->ctx, args->backend == PK_BACKEND_CUDA);
    fflush(stdout);
    return 0;
}

static int add_variant(bench_state *b, const char *name, variant_kind kind, int kernel, uint32_t n_workers) {
    b->var[b->n_var] = (variant){name, kind, kernel, n_workers};
    return b->n_var++;
}

/* The CPU ladder: the floor first (the table's base), pairkit's plan + fill,
 * the reference, the portable kernel (what the AVX-512 paths buy), the floor
 * with plain stores, one worker of 16, and the plain sort; and the buffers
 * the floor and the plain sort write. */
static int add_cpu_variants(const char *cmd, const bench_args *args, bench_state *b) {
    add_variant(b, "stream-pass", VARIANT_STREAM, 0, 1);
    b->v_cpu = add_variant(b, "cpu", VARIANT_KERNEL, PK_MEMSORT_KERNEL_CPU, 1);
    if (args->with_ref) b->v_ref = add_variant(b, "ref", VARIANT_KERNEL, PK_MEMSORT_KERNEL_REF, 1);
    b->v_portable = add_variant(b, "cpu-portable", VARIANT_KERNEL, PK_MEMSORT_KERNEL_CPU_PORTABLE, 1);
    b->v_plain = add_variant(b, "stream-plain", VARIANT_STREAM_PLAIN, 0, 1);
    b->v_worker = add_variant(b, "cpu-1-of-16", VARIANT_KERNEL, PK_MEMSORT_KERNEL_CPU, 16);
    b->v_radix = add_variant(b, "lsd-radix", VARIANT_RADIX, 0, 1);
    /* the stream pass writes as much as the CPU result holds: learn that first */
    pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, 1, 0};
    pk_status st = pk_memsort_run(&b->ctx, &o, &b->regions, &b->trace, &b->res[b->v_cpu]);
    if (st != PK_OK) return cli_error(cmd, st, &b->ctx);
    uint64_t n = args->n;
    b->stream_n_runs = b->res[b->v_cpu].n_runs;
    b->stream_values = pk_memsort_big_alloc((n + 1) * sizeof(uint32_t));
    b->stream_runs = pk_memsort_big_alloc((b->stream_n_runs + 1) * sizeof(pk_memsort_run_entry));
    for (int k = 0; k < 4; k++) b->radix_buf[k] = pk_memsort_big_alloc((n + 1) * sizeof(uint32_t));
    if (!b->stream_values || !b->stream_runs || !b->radix_buf[0] || !b->radix_buf[1] || !b->radix_buf[2] ||
        !b->radix_buf[3])
        return cli_error(cmd, PK_ERR_NOMEM, NULL);
    return 0;
}

/* The CUDA ladder: the CUB alternative first (the table's base), pairkit
 * for all instances and for one worker of 16, on a trace pinned once. */
static int add_cuda_variants(const char *cmd, bench_state *b) {
#ifdef PK_HAVE_CUDA
    add_variant(b, "cub-baseline", VARIANT_CUB, 0, 1);
    b->v_cpu = add_variant(b, "cuda", VARIANT_KERNEL, PK_MEMSORT_KERNEL_CUDA, 1);
    b->v_worker = add_variant(b, "cuda-1-of-16", VARIANT_KERNEL, PK_MEMSORT_KERNEL_CUDA, 16);
    pk_status st = pk_memsort_trace_pin(&b->ctx, &b->trace);
    if (st != PK_OK) return cli_error(cmd, st, &b->ctx);
    b->cub = pk_memsort_cub_baseline_create(&b->ctx, &b->regions, b->trace.n_entries);
    if (!b->cub) return cli_error(cmd, PK_ERR_CUDA, &b->ctx);
#else
    (void)cmd, (void)b;
#endif
    return 0;
}

/* One run of variant v: its time in seconds (device events for CUDA), or
 * -1 after printing an error (*rc set). */
static double time_variant(const char *cmd, const bench_args *args, bench_state *b, int v, int *rc) {
    const variant *var = &b->var[v];
    const uint64_t n = args->n;
    switch (var->kind) {
    case VARIANT_STREAM:
    case VARIANT_STREAM_PLAIN:
        return pk_memsort_bench_stream_pass(b->trace.addr, n, b->stream_values, n, b->stream_runs, b->stream_n_runs,
                                            b->nt, var->kind == VARIANT_STREAM);
    case VARIANT_RADIX: {
        double t = pk_memsort_bench_radix(&b->regions, b->trace.addr, n, b->radix_buf, b->nt, &b->radix_keys,
                                          &b->radix_values);
        if (t < 0) *rc = cli_error(cmd, PK_ERR_NOMEM, NULL);
        return t < 0 ? -1 : t;
    }
    case VARIANT_CUB: {
#ifdef PK_HAVE_CUDA
        pk_status st = pk_memsort_cub_baseline_run(&b->ctx, b->cub, b->trace.addr, &b->cub_t);
        if (st != PK_OK) {
            *rc = cli_error(cmd, st, &b->ctx);
            return -1;
        }
        b->up_ms[v] = b->cub_t.up_ms;
        return b->cub_t.total_ms * 1e-3;
#else
        *rc = cli_error(cmd, PK_ERR_UNSUPPORTED, NULL);
        return -1;
#endif
    }
    case VARIANT_KERNEL:
    default: {
        pk_memsort_options o = {args->backend, var->kernel, var->n_workers, 0};
        pk_status st = pk_memsort_run(&b->ctx, &o, &b->regions, &b->trace, &b->res[v]);
        if (st != PK_OK) {
            *rc = cli_error(cmd, st, &b->ctx);
            return -1;
        }
        b->up_ms[v] = b->res[v].stats.upload_ms;
        return var->kernel == PK_MEMSORT_KERNEL_CUDA ? b->res[v].stats.device_ms * 1e-3 : b->res[v].stats.seconds;
    }
    }
}

/* A cold round, then warm rounds in which the variants take turns in a
 * rotating order; wall and CPU time of each warm run. */
static int run_rounds(const char *cmd, const bench_args *args, bench_state *b) {
    const int runs = args->runs;
    b->times = calloc((size_t)MAX_VARIANTS * (size_t)runs, sizeof(double));
    b->cpu_times = calloc((size_t)MAX_VARIANTS * (size_t)runs, sizeof(double));
    if (!b->times || !b->cpu_times) return cli_error(cmd, PK_ERR_NOMEM, NULL);
    for (int round = 0; round <= runs; round++) {
        for (int q = 0; q < b->n_var; q++) {
            int v = (q + round) % b->n_var;
            /* the threads of the run before go idle first: OpenMP's
             * threads spin a while after a parallel region, and that CPU
             * time would count in this variant's (at 2^20 entries it was
             * most of it) */
            if (round > 0) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
            double cpu0 = process_cpu_seconds();
            int rc = 0;
            double t = time_variant(cmd, args, b, v, &rc);
            if (rc) return rc;
            if (round == 0) {
                b->cold[v] = t * 1e3;
            } else {
                b->times[(size_t)v * (size_t)runs + (size_t)(round - 1)] = t * 1e3;
                b->cpu_times[(size_t)v * (size_t)runs + (size_t)(round - 1)] = (process_cpu_seconds() - cpu0) * 1e3;
            }
        }
    }
    return 0;
}

/* The CPU results against each other and the reference (worker 0 of 16
 * against the reference's worker 0), and the plain sort against the rows;
 * *rc gets 1 on a difference. */
static const char *check_cpu_results(const bench_args *args, bench_state *b, int *rc) {
    pk_status st = pk_memsort_compare(&b->ctx, &b->res[b->v_cpu], &b->res[b->v_portable]);
    if (!st && args->with_ref) st = pk_memsort_compare(&b->ctx, &b->res[b->v_ref], &b->res[b->v_cpu]);
    if (!st && args->with_ref) {
        pk_memsort_result ref16;
        pk_memsort_result_init(&ref16);
        pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, 16, 0};
        st = pk_memsort_run(&b->ctx, &o, &b->regions, &b->trace, &ref16);
        if (!st) st = pk_memsort_compare(&b->ctx, &ref16, &b->res[b->v_worker]);
        pk_memsort_result_free(&ref16);
    }
    *rc |= st != PK_OK;
    const uint64_t n = args->n;
    const pk_memsort_result *cpu = &b->res[b->v_cpu];
    int same = cpu->n_values == n && b->radix_values && b->radix_keys &&
               memcmp(cpu->values, b->radix_values, n * sizeof(uint32_t)) == 0;
    for (uint64_t i = 1; same && i < n; i++)
        same = b->radix_keys[i - 1] <= b->radix_keys[i]; /* the keys in order too */
    printf("lsd-radix: %s\n", same ? "its keys in order, its values identical to the cpu result's rows"
                                   : "its keys out of order or its values DIFFERENT from the cpu result's rows");
    *rc |= !same;
    return st               ? b->ctx.message
           : args->with_ref ? "cpu, cpu-portable and cpu-1-of-16 results identical to the reference"
                            : "cpu-portable result identical to cpu";
}

/* The CUDA rows against the CUB sort's values, and (unless --no-ref) every
 * field of both CUDA results against the CPU kernel. */
static const char *check_cuda_results(const bench_args *args, bench_state *b, int *rc) {
#ifdef PK_HAVE_CUDA
    const pk_memsort_result *all = &b->res[b->v_cpu];
    int same = all->n_values == args->n &&
               memcmp(all->values, pk_memsort_cub_baseline_values(b->cub), args->n * sizeof(uint32_t)) == 0;
    *rc |= !same;
    for (int v = b->v_cpu; v <= b->v_worker && args->with_ref; v++) {
        pk_memsort_result cpu;
        pk_memsort_result_init(&cpu);
        pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, b->var[v].n_workers, 0};
        double t1 = pk_now();
        pk_status st = pk_memsort_run(&b->ctx, &o, &b->regions, &b->trace, &cpu);
        if (!st) st = pk_memsort_compare(&b->ctx, &cpu, &b->res[v]);
        printf("%s: %s (CPU kernel %.2f s)\n", b->var[v].name,
               st ? b->ctx.message : "identical to the CPU kernel, every field", pk_now() - t1);
        *rc |= st != PK_OK;
        pk_memsort_result_free(&cpu);
    }
    return same ? "cuda rows identical to the CUB sort's values" : "cuda rows DIFFER from the CUB sort";
#else
    (void)args, (void)b, (void)rc;
    return "";
#endif
}

/* The warm runs' median of variant v (-1: absent, NaN). */
static double median_ms(const bench_args *args, const double *times, int v) {
    return v < 0 ? (double)NAN : median_of(times + (size_t)v * (size_t)args->runs, args->runs);
}

static void print_table(const bench_args *args, bench_state *b) {
    printf("%-16s %10s %10s %10s %10s  %s\n", "variant", "cold ms", "median ms", "min ms", "time/first", "notes");
    double base = median_ms(args, b->times, 0);
    for (int v = 0; v < b->n_var; v++) {
        char extra[160] = "";
        const pk_memsort_result *r = &b->res[v];
        if (b->var[v].kind == VARIANT_CUB)
            snprintf(extra, sizeof extra, "last run: up %.1f, sort %.1f, down %.1f ms; device %.2f GB", b->cub_t.up_ms,
                     b->cub_t.sort_ms, b->cub_t.down_ms, (double)b->cub_t.device_bytes / 1e9);
        else if (args->backend == PK_BACKEND_CUDA)
            snprintf(extra, sizeof extra, "upload %.1f ms; %llu rows, %llu runs back; device %.2f GB, PCIe %.2f GB",
                     b->up_ms[v], (unsigned long long)r->n_values, (unsigned long long)r->n_runs,
                     (double)r->stats.device_bytes / 1e9, (double)r->stats.pcie_bytes / 1e9);
        else if (strncmp(b->var[v].name, "cpu", 3) == 0)
            snprintf(extra, sizeof extra, "%llu runs; backend host memory %.2f GB", (unsigned long long)r->n_runs,
                     (double)r->stats.host_bytes / 1e9);
        summarize(b->var[v].name, b->times + (size_t)v * (size_t)args->runs, args->runs, b->cold[v], base, extra);
    }
}

/* The CPU ladder's ratios: plan + fill over the floor (the target's
 * measure), the other variants over plan + fill, and CPU times. */
static void print_cpu_ratios(const bench_args *args, const bench_state *b) {
    double base = median_ms(args, b->times, 0), cpu = median_ms(args, b->times, b->v_cpu);
    printf(
        "cpu plan+fill / stream pass: %.2fx (/ the pass with plain stores: %.2fx); cpu-portable / cpu: %.2fx; "
        "cpu-1-of-16 / cpu: %.2fx",
        cpu / base, cpu / median_ms(args, b->times, b->v_plain), median_ms(args, b->times, b->v_portable) / cpu,
        median_ms(args, b->times, b->v_worker) / cpu);
    if (args->with_ref) printf("; reference sort / cpu plan+fill: %.2fx", median_ms(args, b->times, b->v_ref) / cpu);
    printf("; lsd-radix / cpu plan+fill: %.2fx\n", median_ms(args, b->times, b->v_radix) / cpu);
    double cpu_base = median_ms(args, b->cpu_times, 0), cpu_cpu = median_ms(args, b->cpu_times, b->v_cpu);
    printf("CPU time (all threads), median ms: stream pass %.1f, cpu %.1f (%.2fx), stream-plain %.1f", cpu_base,
           cpu_cpu, cpu_cpu / cpu_base, median_ms(args, b->cpu_times, b->v_plain));
    if (args->with_ref) printf(", ref %.1f", median_ms(args, b->cpu_times, b->v_ref));
    printf(", lsd-radix %.1f\n", median_ms(args, b->cpu_times, b->v_radix));
}

static void bench_free(bench_state *b) {
    for (int v = 0; v < MAX_VARIANTS; v++) pk_memsort_result_free(&b->res[v]);
#ifdef PK_HAVE_CUDA
    pk_memsort_cub_baseline_free(b->cub);
#endif
    pk_aligned_free(b->stream_values);
    pk_aligned_free(b->stream_runs);
    for (int k = 0; k < 4; k++) pk_aligned_free(b->radix_buf[k]);
    free(b->times);
    free(b->cpu_times);
    pk_memsort_trace_free(&b->trace);
}

/* The variants, the timed rounds, the results checked against each other,
 * and the table. */
static int run_benchmark(const char *cmd, const bench_args *args, bench_state *b) {
    int cpu = args->backend == PK_BACKEND_CPU;
    int rc = make_trace(cmd, args, b);
    if (!rc) rc = cpu ? add_cpu_variants(cmd, args, b) : add_cuda_variants(cmd, b);
    if (!rc) rc = run_rounds(cmd, args, b);
    if (rc) return rc;
    const char *agree = cpu ? check_cpu_results(args, b, &rc) : check_cuda_results(args, b, &rc);
    print_table(args, b);
    if (cpu) print_cpu_ratios(args, b);
    printf("%s; peak host memory (RSS) %.2f GiB\n", agree, peak_rss_gib());
    return rc;
}

int bench_memsort(int argc, char **argv) {
    const char *cmd = "bench memsort";
    bench_args args;
    bench_state b;
    memset(&b, 0, sizeof b);
    pk_context_init(&b.ctx);
    for (int v = 0; v < MAX_VARIANTS; v++) pk_memsort_result_init(&b.res[v]);
    b.v_cpu = b.v_ref = b.v_portable = b.v_plain = b.v_worker = b.v_radix = -1;
    int rc = parse_bench_args(cmd, argc, argv, &args, &b.ctx);
    if (rc != BENCH_CONTINUE) return rc;
    b.nt = pk_thread_count(&b.ctx);
    rc = run_benchmark(cmd, &args, &b);
    bench_free(&b);
    return rc;
}
