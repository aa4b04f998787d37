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

int bench_memsort(int argc, char **argv) {
    const char *cmd = "bench memsort";
    uint64_t n = 1u << 24, seed = 1;
    const char *regions_name = "default";
    pk_backend backend = PK_BACKEND_CPU;
    int runs = 5, with_ref = 1;
    pk_context ctx;
    pk_context_init(&ctx);
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
            with_ref = 0;
        } else if (a[0] == '-') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            if (strcmp(a, "--entries") == 0) {
                uint64_t c;
                if (cli_parse_count(cmd, a, v, &c)) return 2;
                n = c;
            } else if (strcmp(a, "--seed") == 0) {
                if (cli_parse_size(cmd, a, v, &t)) return 2;
                seed = t;
            } else if (strcmp(a, "--regions") == 0) {
                regions_name = v;
            } else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &backend) || backend == PK_BACKEND_AUTO)
                    return cli_usage_error(cmd, "--backend: '%s' is not cpu or cuda", v);
            } else if (strcmp(a, "--runs") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 100000, &t)) return 2;
                runs = (int)t;
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx.n_threads)) return 2;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    pk_memsort_regions regions;
    pk_status st = pk_memsort_regions_get(&ctx, regions_name, &regions);
    if (st) return cli_error(cmd, st, &ctx);
    if (backend == PK_BACKEND_CUDA) {
        pk_backend resolved;
        if ((st = pk_backend_resolve(&ctx, backend, &resolved)) != PK_OK) return cli_error(cmd, st, &ctx);
    }
    pk_memsort_gen_options g = {n, seed, 0, 0};
    pk_memsort_trace trace;
    double t0 = pk_now();
    if ((st = pk_memsort_generate(&ctx, &regions, &g, &trace)) != PK_OK) return cli_error(cmd, st, &ctx);
    printf(
        "pairkit bench memsort: %llu entries (seed %llu, %u chunk%s, regions %s), generated in %.2f s, %d warm runs\n",
        (unsigned long long)n, (unsigned long long)seed, trace.n_chunks, trace.n_chunks == 1 ? "" : "s", regions_name,
        pk_now() - t0, runs);
    cli_print_machine(&ctx, backend == PK_BACKEND_CUDA);
    fflush(stdout);

    const char *names[MAX_VARIANTS];
    int n_var = 0, rc = 0, v_portable = 0, v_plain = 0, v_worker = 0, v_radix = 0; /* CPU: where those sit */
    double *times = calloc((size_t)MAX_VARIANTS * (size_t)runs, sizeof(double));
    double *cpu_times = calloc((size_t)MAX_VARIANTS * (size_t)runs, sizeof(double));
    double cold[MAX_VARIANTS] = {0};
    pk_memsort_result res[MAX_VARIANTS];
    for (int v = 0; v < MAX_VARIANTS; v++) pk_memsort_result_init(&res[v]);
    uint32_t *stream_values = NULL;
    pk_memsort_run_entry *stream_runs = NULL;
    uint64_t stream_n_runs = 0;
    uint32_t *radix_buf[4] = {NULL, NULL, NULL, NULL};
    const uint32_t *radix_keys = NULL, *radix_values = NULL;
#ifdef PK_HAVE_CUDA
    pk_memsort_cub_baseline *cub = NULL;
#endif
    pk_memsort_cub_times cub_t = {0};
    double up_ms[MAX_VARIANTS] = {0};
    int nt = pk_thread_count(&ctx); /* the baselines' threads, as many as pairkit's */

    if (backend == PK_BACKEND_CPU) {
        names[n_var++] = "stream-pass";
        names[n_var++] = "cpu";
        if (with_ref) names[n_var++] = "ref";
        v_portable = n_var;
        names[n_var++] = "cpu-portable"; /* what the AVX-512 paths buy */
        v_plain = n_var;
        names[n_var++] = "stream-plain"; /* the floor with plain stores */
        v_worker = n_var;
        names[n_var++] = "cpu-1-of-16";
        v_radix = n_var;
        names[n_var++] = "lsd-radix"; /* the plain sort */
        /* the stream pass writes as much as the CPU result holds: learn that first */
        pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, 1, 0};
        if ((st = pk_memsort_run(&ctx, &o, &regions, &trace, &res[1])) != PK_OK) return cli_error(cmd, st, &ctx);
        stream_n_runs = res[1].n_runs;
        stream_values = pk_memsort_big_alloc((n + 1) * sizeof(uint32_t));
        stream_runs = pk_memsort_big_alloc((stream_n_runs + 1) * sizeof(pk_memsort_run_entry));
        for (int k = 0; k < 4; k++) radix_buf[k] = pk_memsort_big_alloc((n + 1) * sizeof(uint32_t));
        if (!stream_values || !stream_runs || !radix_buf[0] || !radix_buf[1] || !radix_buf[2] || !radix_buf[3])
            return cli_error(cmd, PK_ERR_NOMEM, NULL);
    } else {
#ifdef PK_HAVE_CUDA
        names[n_var++] = "cub-baseline";
        names[n_var++] = "cuda";
        names[n_var++] = "cuda-1-of-16";
        if ((st = pk_memsort_trace_pin(&ctx, &trace)) != PK_OK) return cli_error(cmd, st, &ctx);
        cub = pk_memsort_cub_baseline_create(&ctx, &regions, n);
        if (!cub) return cli_error(cmd, PK_ERR_CUDA, &ctx);
#endif
    }

    for (int round = 0; round <= runs; round++) {
        for (int q = 0; q < n_var; q++) {
            int v = (q + round) % n_var;
            const char *name = names[v];
            /* the threads of the run before go idle first: OpenMP's
             * threads spin a while after a parallel region, and that CPU
             * time would count in this variant's (at 2^20 entries it was
             * most of it) */
            if (round > 0) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
            double t = 0, cpu0 = process_cpu_seconds();
            if (strncmp(name, "stream-", 7) == 0) {
                t = pk_memsort_bench_stream_pass(trace.addr, n, stream_values, n, stream_runs, stream_n_runs, nt,
                                                 strcmp(name, "stream-pass") == 0);
            } else if (strcmp(name, "lsd-radix") == 0) {
                t = pk_memsort_bench_radix(&regions, trace.addr, n, radix_buf, nt, &radix_keys, &radix_values);
                if (t < 0) {
                    rc = cli_error(cmd, PK_ERR_NOMEM, NULL);
                    goto done;
                }
#ifdef PK_HAVE_CUDA
            } else if (strcmp(name, "cub-baseline") == 0) {
                if ((st = pk_memsort_cub_baseline_run(&ctx, cub, trace.addr, &cub_t)) != PK_OK) {
                    rc = cli_error(cmd, st, &ctx);
                    goto done;
                }
                t = cub_t.total_ms * 1e-3;
                up_ms[v] = cub_t.up_ms;
#endif
            } else {
                pk_memsort_options o = {backend, PK_MEMSORT_KERNEL_CPU, 1, 0};
                if (strcmp(name, "ref") == 0) o.kernel = PK_MEMSORT_KERNEL_REF;
                if (strcmp(name, "cpu-portable") == 0) o.kernel = PK_MEMSORT_KERNEL_CPU_PORTABLE;
                if (strncmp(name, "cuda", 4) == 0) o.kernel = PK_MEMSORT_KERNEL_CUDA;
                if (strstr(name, "-1-of-16")) o.n_workers = 16;
                if ((st = pk_memsort_run(&ctx, &o, &regions, &trace, &res[v])) != PK_OK) {
                    rc = cli_error(cmd, st, &ctx);
                    goto done;
                }
                t = o.kernel == PK_MEMSORT_KERNEL_CUDA ? res[v].stats.device_ms * 1e-3 : res[v].stats.seconds;
                up_ms[v] = res[v].stats.upload_ms;
            }
            if (round == 0) cold[v] = t * 1e3;
            else times[(size_t)v * (size_t)runs + (size_t)(round - 1)] = t * 1e3;
            if (round > 0)
                cpu_times[(size_t)v * (size_t)runs + (size_t)(round - 1)] = (process_cpu_seconds() - cpu0) * 1e3;
        }
    }

    /* the results agree with each other */
    const char *agree = "";
    if (backend == PK_BACKEND_CPU) {
        st = pk_memsort_compare(&ctx, &res[1], &res[v_portable]);
        if (!st && with_ref) st = pk_memsort_compare(&ctx, &res[2], &res[1]);
        if (!st && with_ref) { /* worker 0 of 16 against the reference's worker 0 */
            pk_memsort_result ref16;
            pk_memsort_result_init(&ref16);
            pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_REF, 16, 0};
            st = pk_memsort_run(&ctx, &o, &regions, &trace, &ref16);
            if (!st) st = pk_memsort_compare(&ctx, &ref16, &res[v_worker]);
            pk_memsort_result_free(&ref16);
        }
        agree = st         ? ctx.message
                : with_ref ? "cpu, cpu-portable and cpu-1-of-16 results identical to the reference"
                           : "cpu-portable result identical to cpu";
        rc |= st != PK_OK;
        int same = res[1].n_values == n && radix_values && radix_keys &&
                   memcmp(res[1].values, radix_values, n * sizeof(uint32_t)) == 0;
        for (uint64_t i = 1; same && i < n; i++) same = radix_keys[i - 1] <= radix_keys[i]; /* the keys in order too */
        printf("lsd-radix: %s\n", same ? "its keys in order, its values identical to the cpu result's rows"
                                       : "its keys out of order or its values DIFFERENT from the cpu result's rows");
        rc |= !same;
#ifdef PK_HAVE_CUDA
    } else if (backend == PK_BACKEND_CUDA) {
        int same = res[1].n_values == n &&
                   memcmp(res[1].values, pk_memsort_cub_baseline_values(cub), n * sizeof(uint32_t)) == 0;
        agree = same ? "cuda rows identical to the CUB sort's values" : "cuda rows DIFFER from the CUB sort";
        rc |= !same;
        /* every field of both CUDA results against the CPU kernel */
        for (int v = 1; v <= 2 && with_ref; v++) {
            pk_memsort_result cpu;
            pk_memsort_result_init(&cpu);
            pk_memsort_options o = {PK_BACKEND_CPU, PK_MEMSORT_KERNEL_CPU, v == 2 ? 16 : 1, 0};
            double t1 = pk_now();
            st = pk_memsort_run(&ctx, &o, &regions, &trace, &cpu);
            if (!st) st = pk_memsort_compare(&ctx, &cpu, &res[v]);
            printf("%s: %s (CPU kernel %.2f s)\n", names[v],
                   st ? ctx.message : "identical to the CPU kernel, every field", pk_now() - t1);
            rc |= st != PK_OK;
            pk_memsort_result_free(&cpu);
        }
#endif
    }

    printf("%-16s %10s %10s %10s %10s  %s\n", "variant", "cold ms", "median ms", "min ms", "time/first", "notes");
    double base = median_of(times, runs);
    for (int v = 0; v < n_var; v++) {
        char extra[160] = "";
        if (backend == PK_BACKEND_CUDA && v == 0)
            snprintf(extra, sizeof extra, "last run: up %.1f, sort %.1f, down %.1f ms; device %.2f GB", cub_t.up_ms,
                     cub_t.sort_ms, cub_t.down_ms, (double)cub_t.device_bytes / 1e9);
        else if (backend == PK_BACKEND_CUDA)
            snprintf(extra, sizeof extra, "upload %.1f ms; %llu rows, %llu runs back; device %.2f GB, PCIe %.2f GB",
                     up_ms[v], (unsigned long long)res[v].n_values, (unsigned long long)res[v].n_runs,
                     (double)res[v].stats.device_bytes / 1e9, (double)res[v].stats.pcie_bytes / 1e9);
        else if (strncmp(names[v], "cpu", 3) == 0)
            snprintf(extra, sizeof extra, "%llu runs; backend host memory %.2f GB", (unsigned long long)res[v].n_runs,
                     (double)res[v].stats.host_bytes / 1e9);
        summarize(names[v], times + (size_t)v * (size_t)runs, runs, cold[v], base, extra);
    }
    if (backend == PK_BACKEND_CPU) {
        double cpu = median_of(times + (size_t)runs, runs);
        double plain = median_of(times + (size_t)v_plain * (size_t)runs, runs);
        printf(
            "cpu plan+fill / stream pass: %.2fx (/ the pass with plain stores: %.2fx); cpu-portable / cpu: %.2fx; "
            "cpu-1-of-16 / cpu: %.2fx",
            cpu / base, cpu / plain, median_of(times + (size_t)v_portable * (size_t)runs, runs) / cpu,
            median_of(times + (size_t)v_worker * (size_t)runs, runs) / cpu);
        if (with_ref)
            printf("; reference sort / cpu plan+fill: %.2fx", median_of(times + 2 * (size_t)runs, runs) / cpu);
        printf("; lsd-radix / cpu plan+fill: %.2fx\n", median_of(times + (size_t)v_radix * (size_t)runs, runs) / cpu);
        double cpu_base = median_of(cpu_times, runs), cpu_cpu = median_of(cpu_times + (size_t)runs, runs);
        printf("CPU time (all threads), median ms: stream pass %.1f, cpu %.1f (%.2fx), stream-plain %.1f", cpu_base,
               cpu_cpu, cpu_cpu / cpu_base, median_of(cpu_times + (size_t)v_plain * (size_t)runs, runs));
        if (with_ref) printf(", ref %.1f", median_of(cpu_times + 2 * (size_t)runs, runs));
        printf(", lsd-radix %.1f\n", median_of(cpu_times + (size_t)v_radix * (size_t)runs, runs));
    }
    printf("%s; peak host memory (RSS) %.2f GiB\n", agree, peak_rss_gib());
done:
    for (int v = 0; v < MAX_VARIANTS; v++) pk_memsort_result_free(&res[v]);
#ifdef PK_HAVE_CUDA
    pk_memsort_cub_baseline_free(cub);
#endif
    pk_aligned_free(stream_values);
    pk_aligned_free(stream_runs);
    for (int k = 0; k < 4; k++) pk_aligned_free(radix_buf[k]);
    free(times);
    free(cpu_times);
    pk_memsort_trace_free(&trace);
    return rc;
}
