/* cmd_bench.c - `pairkit bench WORKLOAD`: a workload's kernels, from the
 * naive one to the fastest, under one protocol: the first run of each kernel
 * reported apart as cold, then warm rounds in which the kernels take turns
 * (interleaved, the order rotating each round) so that drift of the machine
 * hits all of them alike; median and minimum of the warm runs. On the GPU
 * the times are device-event kernel times. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pairkit/angcorr.h"

static void bench_usage(FILE *out) {
    fprintf(out,
            "usage: pairkit bench angcorr [DATA RANDOM] [options]\n"
            "  Times DD + DR + RR for each kernel (bundled catalogs by default).\n"
            "  --kernels a,b,c   kernels in ladder order (default: every available\n"
            "                    kernel of the backend except ref)\n"
            "  --backend B       cpu (default) or cuda\n"
            "  --runs N          warm runs per kernel (default 5)\n"
            "  --n N             use the first N objects of each catalog\n"
            "  --threads N       CPU threads\n"
            "  --list            list the kernels and exit\n");
}

static pk_catalog head(const pk_catalog *c, size_t n) {
    pk_catalog h = *c;
    if (n && n < h.n) h.n = n;
    return h;
}

/* The options that take a value. */
static const char *const value_options[] = {"--kernels", "--backend", "--runs", "--n", "--threads", NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h", "--help", "--list", NULL};

/* The kernels of --kernels (comma-separated names, in ladder order) into
 * kernels[0 .. *n), those not available here skipped with a note: 0, or
 * the exit code after a usage error. */
static int parse_kernel_list(const char *cmd, const char *list, int *kernels, int max_kernels, int *n) {
    char *names = strdup(list);
    if (!names) {
        fprintf(stderr, "pairkit %s: out of memory\n", cmd);
        return 1;
    }
    int rc = 0;
    for (char *tok = strtok(names, ","); tok && *n < max_kernels; tok = strtok(NULL, ",")) {
        int id = pk_angcorr_kernel_from_name(tok);
        if (id <= 0) {
            rc = cli_unknown_kernel(cmd, "--kernels", tok);
            break;
        }
        if (!pk_angcorr_kernel_available(id)) {
            fprintf(stderr, "pairkit %s: kernel '%s' is not available here, skipped\n", cmd, tok);
            continue;
        }
        kernels[(*n)++] = id;
    }
    free(names);
    return rc;
}

/* What the rounds measure, kernel by kernel (the index into the kernels
 * run), all freed by bench_tables_free. */
typedef struct bench_tables {
    int n_kernels;
    double *times;      /* the warm runs' seconds, runs a kernel */
    double *cold;       /* the first run's seconds */
    double *fp64_share; /* of the separations, those settled in float64 */
    double *visited;    /* separations computed in a run */
    int *blocks;        /* resident blocks per SM (CUDA) */
    uint64_t *n_differ; /* counts in other bins than the first exact kernel's */
    uint64_t **counts;  /* DD, DR and RR of the first run */
} bench_tables;

static void bench_tables_free(bench_tables *t) {
    for (int kk = 0; t->counts && kk < t->n_kernels; kk++) free(t->counts[kk]);
    free(t->times), free(t->cold), free(t->fp64_share), free(t->visited), free(t->blocks), free(t->n_differ);
    free(t->counts);
    memset(t, 0, sizeof *t);
}

/* 0, or 1 with nothing held when memory is short. */
static int bench_tables_alloc(bench_tables *t, int n_kernels, int runs) {
    t->n_kernels = n_kernels;
    t->times = calloc((size_t)n_kernels * (size_t)runs, sizeof(double));
    t->cold = calloc((size_t)n_kernels, sizeof(double));
    t->fp64_share = calloc((size_t)n_kernels, sizeof(double));
    /* each kernel's own count: the reference and the naive GPU kernel
     * compute all n m ordered pairs, the others an autocorrelation's once */
    t->visited = calloc((size_t)n_kernels, sizeof(double));
    t->blocks = calloc((size_t)n_kernels, sizeof(int));
    t->n_differ = calloc((size_t)n_kernels, sizeof(uint64_t));
    t->counts = calloc((size_t)n_kernels, sizeof(uint64_t *));
    if (t->times && t->cold && t->fp64_share && t->visited && t->blocks && t->n_differ && t->counts) return 0;
    bench_tables_free(t);
    return 1;
}

/* The rounds: each kernel's first run apart as cold, then `runs` warm ones,
 * the kernels taking turns in an order rotated each round. 0, or the exit
 * code after an error. */
static int run_rounds(const char *cmd, pk_context *ctx, const int *kernels, int runs, const pk_catalog *data,
                      const pk_catalog *random, const pk_bins *bins, bench_tables *t) {
    for (int round = 0; round <= runs; round++) {
        for (int q = 0; q < t->n_kernels; q++) {
            int kk = (q + round) % t->n_kernels; /* rotate the order each round */
            pk_angcorr_options opts = {PK_BACKEND_AUTO, kernels[kk]};
            pk_angcorr_result r;
            pk_status st = pk_angcorr_run(ctx, &opts, data, random, bins, PK_ESTIMATOR_LANDY_SZALAY, &r);
            if (st != PK_OK) return cli_error(cmd, st, ctx);
            const pk_pair_stats *s[3] = {&r.stats_dd, &r.stats_dr, &r.stats_rr};
            double seconds = 0, fp = 0, vis = 0;
            int on_gpu = kernels[kk] >= 100;
            for (int c = 0; c < 3; c++) {
                seconds += on_gpu ? s[c]->kernel_ms * 1e-3 : s[c]->seconds;
                fp += (double)s[c]->pairs_fp64;
                vis += (double)s[c]->pairs_visited;
            }
            if (round == 0) {
                t->cold[kk] = seconds;
                t->fp64_share[kk] = fp / vis;
                for (int c = 0; c < 3; c++)
                    t->blocks[kk] = s[c]->blocks_per_sm > t->blocks[kk] ? s[c]->blocks_per_sm : t->blocks[kk];
                t->visited[kk] = vis;
                size_t nb = bins->n_bins;
                t->counts[kk] = malloc(3 * nb * sizeof(uint64_t));
                if (!t->counts[kk]) {
                    pk_angcorr_result_free(&r);
                    fprintf(stderr, "pairkit %s: out of memory\n", cmd);
                    return 1;
                }
                memcpy(t->counts[kk], r.dd, nb * sizeof(uint64_t));
                memcpy(t->counts[kk] + nb, r.dr, nb * sizeof(uint64_t));
                memcpy(t->counts[kk] + 2 * nb, r.rr, nb * sizeof(uint64_t));
            } else {
                t->times[(size_t)kk * (size_t)runs + (size_t)(round - 1)] = seconds;
            }
            pk_angcorr_result_free(&r);
        }
    }
    return 0;
}

/* The table of the rounds, each kernel's counts against the first exact
 * kernel's: 1 when an exact kernel's differ, else 0. */
static int print_table(const int *kernels, int runs, pk_backend backend, size_t n_bins, bench_tables *t) {
    int n_kernels = t->n_kernels;
    /* the number of counts that moved is half the sum of |difference| over the bins */
    int ref_kk = -1;
    for (int kk = 0; kk < n_kernels && ref_kk < 0; kk++)
        if (pk_angcorr_kernel_exact(kernels[kk])) ref_kk = kk;
    for (int kk = 0; kk < n_kernels && ref_kk >= 0; kk++) {
        uint64_t moved = 0;
        for (size_t q = 0; q < 3 * n_bins; q++) {
            uint64_t a = t->counts[kk][q], b = t->counts[ref_kk][q];
            moved += a > b ? a - b : b - a;
        }
        t->n_differ[kk] = moved / 2;
    }
    printf("%-16s %10s %10s %10s %12s %10s %9s %s%s\n", "kernel", "cold ms", "median ms", "min ms", "sep/s",
           "fp64 share", "speed-up", backend == PK_BACKEND_CUDA ? "blk/SM " : "",
           ref_kk >= 0 ? "counts vs the first exact kernel" : "counts");
    double first_median = 0;
    for (int kk = 0; kk < n_kernels; kk++) {
        double *v = t->times + (size_t)kk * (size_t)runs;
        double mn, med = cli_runs_median(v, runs, &mn);
        if (kk == 0) first_median = med;
        char verdict[96];
        if (ref_kk < 0) snprintf(verdict, sizeof verdict, "(no exact kernel to compare with)");
        else if (kk == ref_kk) snprintf(verdict, sizeof verdict, "(the comparison)");
        else if (t->n_differ[kk] == 0) snprintf(verdict, sizeof verdict, "identical");
        else
            snprintf(verdict, sizeof verdict, "%llu counts in other bins%s", (unsigned long long)t->n_differ[kk],
                     pk_angcorr_kernel_exact(kernels[kk]) ? "  EXACT KERNEL DIFFERS" : " (inexact anchor)");
        char blk[16] = "";
        if (backend == PK_BACKEND_CUDA) snprintf(blk, sizeof blk, "%6d ", t->blocks[kk]);
        printf("%-16s %10.2f %10.2f %10.2f %12.3g %10.5f %8.2fx %s%s\n", pk_angcorr_kernel_name(kernels[kk]),
               t->cold[kk] * 1e3, med * 1e3, mn * 1e3, t->visited[kk] / med, t->fp64_share[kk], first_median / med, blk,
               verdict);
    }
    printf(
        "sep/s: pair separations computed a second (an autocorrelation's unordered pairs once); speed-up: the "
        "first kernel's median over this one's\n");
    int bad = 0;
    for (int kk = 0; kk < n_kernels; kk++) bad |= pk_angcorr_kernel_exact(kernels[kk]) && t->n_differ[kk] != 0;
    return bad;
}

static int bench_angcorr(int argc, char **argv) {
    const char *cmd = "bench angcorr";
    const char *paths[2] = {"data/galaxy/data_100k_arcmin.txt", "data/galaxy/flat_100k_arcmin.txt"};
    int n_paths = 0, runs = 5;
    size_t n_sub = 0;
    const char *kernel_list = NULL;
    pk_backend backend = PK_BACKEND_CPU;
    pk_context ctx;
    pk_context_init(&ctx);
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            bench_usage(stdout);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            for (int id = 1; id < 1000; id++) {
                const char *name = pk_angcorr_kernel_name(id);
                if (name)
                    printf("%-16s %s\n", name, pk_angcorr_kernel_available(id) ? "available" : "not available here");
            }
            return 0;
        } else if (a[0] == '-') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            size_t t;
            if (strcmp(a, "--kernels") == 0) kernel_list = v;
            else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &backend) || backend == PK_BACKEND_AUTO)
                    return cli_usage_error(cmd, "--backend: '%s' is not cpu or cuda", v);
            } else if (strcmp(a, "--runs") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 100000, &t)) return 2;
                runs = (int)t;
            } else if (strcmp(a, "--n") == 0) {
                if (cli_parse_range(cmd, a, v, 1, SIZE_MAX, &n_sub)) return 2;
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx.n_threads)) return 2;
            } else return cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            if (n_paths == 2) return cli_usage_error(cmd, "at most two catalogs");
            paths[n_paths++] = a;
        }
    }
    if (n_paths == 1) return cli_usage_error(cmd, "give both catalogs, DATA RANDOM, or neither (the bundled ones)");
    int kernels[64], n_kernels = 0;
    if (kernel_list) {
        int rc = parse_kernel_list(cmd, kernel_list, kernels, 64, &n_kernels);
        if (rc) return rc;
    } else {
        int cuda = backend == PK_BACKEND_CUDA;
        for (int id = 2; id < 1000 && n_kernels < 64; id++) {
            if (!pk_angcorr_kernel_name(id) || !pk_angcorr_kernel_available(id)) continue;
            if ((id >= 100) != cuda) continue;
            kernels[n_kernels++] = id;
        }
    }
    if (n_kernels == 0) {
        pk_backend resolved;
        pk_status bst = pk_backend_resolve(&ctx, backend, &resolved); /* says why CUDA is missing */
        if (bst != PK_OK) return cli_error(cmd, bst, &ctx);
        return cli_usage_error(cmd, "no kernel to run on backend %s", pk_backend_name(backend));
    }

    pk_catalog cat[2];
    pk_status st;
    for (int c = 0; c < 2; c++)
        if ((st = pk_catalog_read(&ctx, paths[c], PK_UNITS_ARCMIN, &cat[c])) != PK_OK) {
            int rc = cli_error(cmd, st, &ctx);
            if (n_paths == 0) /* the default catalogs are found from the repository's root */
                fprintf(stderr,
                        "pairkit %s: no catalogs were given, and the bundled ones are read from the "
                        "repository's root: run there, or give DATA RANDOM\n",
                        cmd);
            if (c) pk_catalog_free(&cat[0]);
            return rc;
        }
    pk_catalog data = head(&cat[0], n_sub), random = head(&cat[1], n_sub);
    pk_bins bins;
    pk_bins_default(&ctx, &bins);

    bench_tables t;
    int rc = bench_tables_alloc(&t, n_kernels, runs);
    if (rc) {
        fprintf(stderr, "pairkit %s: out of memory\n", cmd);
    } else {
        printf("pairkit bench angcorr: DD+DR+RR of %zu x %zu objects, %zu bins, %d warm runs per kernel\n", data.n,
               random.n, bins.n_bins, runs);
        cli_print_machine(&ctx, backend == PK_BACKEND_CUDA);
        fflush(stdout);
        rc = run_rounds(cmd, &ctx, kernels, runs, &data, &random, &bins, &t);
        if (!rc) rc = print_table(kernels, runs, backend, bins.n_bins, &t);
    }
    bench_tables_free(&t);
    pk_catalog_free(&cat[0]);
    pk_catalog_free(&cat[1]);
    pk_bins_free(&bins);
    return rc;
}

static void bench_workloads_usage(FILE *out) {
    fprintf(out,
            "usage: pairkit bench angcorr|dftimage|memsort [options]\n"
            "  Runs a workload's kernels, from the naive to the final one, under one\n"
            "  protocol: the first run apart as cold, then the median and minimum of the\n"
            "  warm runs. 'pairkit bench WORKLOAD --help' lists each one's options.\n");
}

int cmd_bench(int argc, char **argv) {
    static const char *const no_values[] = {NULL}, *const help[] = {"-h", "--help", NULL};
    if (cli_check_flags("bench", argc < 3 ? argc : 3, argv, no_values, help)) return 2;
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        bench_workloads_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "angcorr") == 0) return bench_angcorr(argc - 1, argv + 1);
    if (strcmp(argv[1], "memsort") == 0) return bench_memsort(argc - 1, argv + 1);
    if (strcmp(argv[1], "dftimage") == 0) return bench_dftimage(argc - 1, argv + 1);
    return cli_usage_error("bench", "unknown workload '%s'", argv[1]);
}
