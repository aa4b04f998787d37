/* bench_dftimage.c - `pairkit bench dftimage`: the dftimage kernels from
 * the naive one to the final one on the benchmark problem (random
 * visibilities, u, v ~ N(0, 300), w ~ N(0, 30), complex normal data), under
 * the protocol of cmd_bench.c: the first run of each kernel reported apart
 * as cold, then warm rounds in which the kernels take turns in rotating
 * order; median and minimum of the warm runs; device-event times on the
 * GPU. Every kernel's image is compared with the float64 reference on a
 * fixed subset of pixels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "pairkit/dftimage.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: pairkit bench dftimage [options]\n"
            "  Times the dirty image of the benchmark problem for each kernel.\n"
            "  --kernels a,b,c   kernels in ladder order (default: every available kernel\n"
            "                    of the backend except ref)\n"
            "  --backend B       cpu (default) or cuda\n"
            "  --nvis N          visibilities (default 1000000 on cuda, 65536 on cpu)\n"
            "  --size N          pixels a side (default 700)\n"
            "  --cell RAD        cell size (default 0.0005)\n"
            "  --seed S          generator seed (default 1)\n"
            "  --vis FILE        image this .npz instead of generating the problem (not\n"
            "                    with --nvis or --seed)\n"
            "  --write-npz FILE  write the generated problem as .npz and exit\n"
            "  --imag            complex images (default: the real part, as the CLI writes)\n"
            "  --runs N          warm runs per kernel (default 3)\n"
            "  --check-pixels N  pixels compared with the float64 reference (default 1024;\n"
            "                    0 = none)\n"
            "  --threads N       CPU threads\n"
            "  --list            list the kernels and exit\n");
}

/* The options that take a value. */
static const char *const value_options[] = {"--kernels", "--backend",      "--nvis",    "--size",
                                            "--cell",    "--seed",         "--vis",     "--write-npz",
                                            "--runs",    "--check-pixels", "--threads", NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h", "--help", "--list", "--imag", NULL};

/* The command line, checked. */
typedef struct bench_args {
    const char *vis_path, *npz_out;
    const char *kernel_list; /* --kernels as given, or NULL */
    pk_backend backend;
    size_t n_vis, size, check_pixels, seed;
    double cell;
    int runs, want_imag, seed_given;
} bench_args;

/* What the benchmark holds, freed by bench_free whatever step it stopped at. */
typedef struct bench_state {
    pk_context ctx;
    pk_vis vis;
    int kernels[64], n_kernels;
    size_t n_check;          /* pixels compared with the reference */
    size_t *index;           /* [n_check] their positions in the image */
    double *pl, *pm;         /* [n_check] their direction cosines */
    double *ref_re, *ref_im; /* [n_check] the float64 reference there */
    double *times;           /* [n_kernels][runs] warm run times, seconds */
    double *cold, *err;      /* [n_kernels] the cold run and its relative L2 error */
} bench_state;

#define BENCH_CONTINUE (-1)

/* Kernel ids below KERNEL_IDS_END hold every dftimage kernel, 1 the
 * reference and CUDA's from 100 (dftimage.h's numbering). */
#define KERNEL_IDS_END 200
#define CUDA_KERNEL_FIRST 100

static void list_kernels(void) {
    for (int id = 1; id < KERNEL_IDS_END; id++) {
        const char *name = pk_dftimage_kernel_name(id);
        if (name)
            printf("%-18s %-7s %s\n", name,
                   pk_dftimage_kernel_precision(id) == PK_PRECISION_DOUBLE ? "float64" : "float32",
                   pk_dftimage_kernel_available(id) ? "available" : "not available here");
    }
}

/* BENCH_CONTINUE, or the exit code: 0 after --help or --list, 2 for a
 * usage error. */
static int parse_bench_args(const char *cmd, int argc, char **argv, bench_args *args, pk_context *ctx) {
    memset(args, 0, sizeof *args);
    args->backend = PK_BACKEND_CPU;
    args->size = 700, args->check_pixels = 1024, args->seed = 1;
    args->cell = 0.0005;
    args->runs = 3;
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        size_t t;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            list_kernels();
            return 0;
        } else if (strcmp(a, "--imag") == 0) {
            args->want_imag = 1;
        } else if (a[0] == '-') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            if (strcmp(a, "--kernels") == 0) args->kernel_list = v[0] ? v : NULL;
            else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &args->backend) || args->backend == PK_BACKEND_AUTO)
                    return cli_usage_error(cmd, "--backend: '%s' is not cpu or cuda", v);
            } else if (strcmp(a, "--nvis") == 0) {
                if (cli_parse_range(cmd, a, v, 1, (size_t)1 << 32, &args->n_vis)) return 2;
            } else if (strcmp(a, "--size") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 1u << 16, &args->size)) return 2;
            } else if (strcmp(a, "--cell") == 0) {
                if (cli_parse_double(cmd, a, v, &args->cell)) return 2;
            } else if (strcmp(a, "--seed") == 0) {
                if (cli_parse_size(cmd, a, v, &args->seed)) return 2;
                args->seed_given = 1;
            } else if (strcmp(a, "--vis") == 0) {
                args->vis_path = v;
            } else if (strcmp(a, "--write-npz") == 0) {
                args->npz_out = v;
            } else if (strcmp(a, "--runs") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 100000, &t)) return 2;
                args->runs = (int)t;
            } else if (strcmp(a, "--check-pixels") == 0) {
                if (cli_parse_size(cmd, a, v, &args->check_pixels)) return 2;
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx->n_threads)) return 2;
            } else return cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (args->vis_path && (args->n_vis || args->seed_given))
        return cli_usage_error(cmd, "--vis images the file's visibilities: %s would not be used",
                               args->n_vis ? "--nvis" : "--seed");
    cli_input(args->vis_path);
    if (args->npz_out) { /* a folder, a missing folder, an input's name: said before the problem is made */
        const cli_named output = {args->npz_out, "--write-npz"};
        int names_bad = cli_check_names(cmd, &output, 1);
        if (names_bad) return names_bad == 3 ? 1 : 2;
    }
    if (args->n_vis == 0) args->n_vis = args->backend == PK_BACKEND_CUDA ? 1000000 : 65536;
    return BENCH_CONTINUE;
}

/* --write-npz: the problem written as .npz, nothing timed. */
static int write_problem(const char *cmd, const bench_args *args, bench_state *b) {
    pk_status st = pk_vis_write_npz(&b->ctx, args->npz_out, &b->vis);
    if (st) return cli_error(cmd, st, &b->ctx);
    if (args->vis_path) printf("wrote %s (%zu visibilities of %s)\n", args->npz_out, b->vis.n, args->vis_path);
    else printf("wrote %s (%zu visibilities, seed %zu)\n", args->npz_out, args->n_vis, args->seed);
    return 0;
}

/* The kernels of --kernels in its order (those not available here skipped,
 * said), or every available kernel of the backend but the reference. */
static int pick_kernels(const char *cmd, const bench_args *args, bench_state *b) {
    int cuda = args->backend == PK_BACKEND_CUDA;
    b->n_kernels = 0;
    if (args->kernel_list) {
        char *list = strdup(args->kernel_list);
        if (!list) {
            fprintf(stderr, "pairkit %s: out of memory\n", cmd);
            return 1;
        }
        for (char *tok = strtok(list, ","); tok && b->n_kernels < 64; tok = strtok(NULL, ",")) {
            int id = pk_dftimage_kernel_from_name(tok);
            if (id <= 0) {
                int rc = cli_unknown_kernel(cmd, "--kernels", tok); /* tok lies in list */
                free(list);
                return rc;
            }
            if (!pk_dftimage_kernel_available(id)) {
                fprintf(stderr, "pairkit %s: kernel '%s' is not available here, skipped\n", cmd, tok);
                continue;
            }
            b->kernels[b->n_kernels++] = id;
        }
        free(list);
    } else {
        for (int id = 2; id < KERNEL_IDS_END && b->n_kernels < 64; id++) { /* 1 is the reference */
            if (!pk_dftimage_kernel_name(id) || !pk_dftimage_kernel_available(id)) continue;
            if ((id >= CUDA_KERNEL_FIRST) != cuda) continue;
            b->kernels[b->n_kernels++] = id;
        }
    }
    if (b->n_kernels > 0) return 0;
    pk_backend resolved;
    pk_status bst = pk_backend_resolve(&b->ctx, args->backend, &resolved); /* says why CUDA is missing */
    if (bst != PK_OK) return cli_error(cmd, bst, &b->ctx);
    return cli_usage_error(cmd, "no kernel to run on backend %s", pk_backend_name(args->backend));
}

/* The float64 reference on a fixed pseudo-random subset of pixels (the
 * same for every run of these arguments), and the buffers of the timing. */
static int make_reference(const char *cmd, const bench_args *args, bench_state *b) {
    size_t size = args->size, n_pix = size * size;
    size_t n_check = args->check_pixels < n_pix ? args->check_pixels : n_pix;
    b->n_check = n_check;
    b->index = malloc((n_check + 1) * sizeof(size_t));
    b->ref_re = malloc((n_check + 1) * sizeof(double)), b->ref_im = malloc((n_check + 1) * sizeof(double));
    b->pl = malloc((n_check + 1) * sizeof(double)), b->pm = malloc((n_check + 1) * sizeof(double));
    b->times = calloc((size_t)b->n_kernels * (size_t)args->runs, sizeof(double));
    b->cold = calloc((size_t)b->n_kernels, sizeof(double)), b->err = calloc((size_t)b->n_kernels, sizeof(double));
    if (!b->index || !b->ref_re || !b->ref_im || !b->pl || !b->pm || !b->times || !b->cold || !b->err) {
        fprintf(stderr, "pairkit %s: out of memory\n", cmd);
        return 1;
    }
    unsigned long long s = 0x243F6A8885A308D3ull; /* xorshift64*, as the tests' check_rng */
    for (size_t p = 0; p < n_check; p++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        b->index[p] = (size_t)((s * 2685821657736338717ull) % n_pix);
        b->pl[p] = ((double)(b->index[p] % size) - (double)(size / 2)) * args->cell;
        b->pm[p] = ((double)(b->index[p] / size) - (double)(size / 2)) * args->cell;
    }
    printf(
        "pairkit bench dftimage: %zu visibilities x %zu x %zu pixels (%.3g terms), cell %g, %s image, %d warm runs\n",
        b->vis.n, size, size, (double)b->vis.n * (double)n_pix, args->cell, args->want_imag ? "complex" : "real",
        args->runs);
    cli_print_machine(&b->ctx, args->backend == PK_BACKEND_CUDA);
    fflush(stdout);
    if (n_check == 0) return 0;
    double t0 = now_seconds();
    pk_status st = pk_dftimage_ref_points(&b->ctx, &b->vis, b->vis.sign, n_check, b->pl, b->pm, b->ref_re, b->ref_im);
    if (st != PK_OK) return cli_error(cmd, st, &b->ctx);
    printf("float64 reference on %zu pixels: %.1f s\n", n_check, now_seconds() - t0);
    fflush(stdout);
    return 0;
}

/* The relative L2 error of an image against the reference pixels. */
static double error_against_reference(const bench_state *b, const pk_image *img, int want_imag) {
    double num = 0, den = 0;
    for (size_t p = 0; p < b->n_check; p++) {
        double d = img->re[b->index[p]] - b->ref_re[p];
        num += d * d, den += b->ref_re[p] * b->ref_re[p];
        if (want_imag) {
            d = img->im[b->index[p]] - b->ref_im[p];
            num += d * d, den += b->ref_im[p] * b->ref_im[p];
        }
    }
    return b->n_check ? sqrt(num / den) : (double)NAN;
}

/* A cold round, then warm rounds in which the kernels take turns in a
 * rotating order; device-event times for CUDA kernels. */
static int time_kernels(const char *cmd, const bench_args *args, bench_state *b) {
    const int runs = args->runs;
    for (int round = 0; round <= runs; round++) {
        for (int q = 0; q < b->n_kernels; q++) {
            int kk = (q + round) % b->n_kernels;
            pk_dftimage_options opts = {PK_BACKEND_AUTO, b->kernels[kk], PK_PRECISION_SINGLE, 0, args->want_imag, 0};
            pk_image img;
            pk_dftimage_stats stats;
            pk_status st = pk_dftimage_run(&b->ctx, &opts, &b->vis, args->size, args->cell, &img, &stats);
            if (st != PK_OK) return cli_error(cmd, st, &b->ctx);
            double t = b->kernels[kk] >= CUDA_KERNEL_FIRST ? stats.kernel_ms * 1e-3 : stats.seconds;
            if (round == 0) {
                b->cold[kk] = t;
                b->err[kk] = error_against_reference(b, &img, args->want_imag);
            } else {
                b->times[(size_t)kk * (size_t)runs + (size_t)(round - 1)] = t;
            }
            pk_image_free(&img);
        }
    }
    return 0;
}

static void print_table(const bench_args *args, bench_state *b) {
    double terms = (double)b->vis.n * (double)args->size * (double)args->size;
    printf("%-18s %10s %10s %10s %12s %11s %9s\n", "kernel", "cold ms", "median ms", "min ms", "terms/s", "rel L2 err",
           "speed-up");
    double first = 0;
    for (int kk = 0; kk < b->n_kernels; kk++) {
        double *v = b->times + (size_t)kk * (size_t)args->runs;
        double mn, med = cli_runs_median(v, args->runs, &mn);
        if (kk == 0) first = med;
        char err_text[32] = "-"; /* --check-pixels 0: no comparison */
        if (b->n_check) snprintf(err_text, sizeof err_text, "%.3g", b->err[kk]);
        printf("%-18s %10.2f %10.2f %10.2f %12.3g %11s %8.2fx\n", pk_dftimage_kernel_name(b->kernels[kk]),
               b->cold[kk] * 1e3, med * 1e3, mn * 1e3, terms / med, err_text, first / med);
    }
}

static void bench_free(bench_state *b) {
    free(b->index), free(b->ref_re), free(b->ref_im), free(b->pl), free(b->pm);
    free(b->times), free(b->cold), free(b->err);
    pk_vis_free(&b->vis);
}

/* The kernels, the grid as the runs will check it (before the reference's
 * work), the reference, the timed rounds and the table. */
static int run_benchmark(const char *cmd, const bench_args *args, bench_state *b) {
    int rc = pick_kernels(cmd, args, b);
    if (rc) return rc;
    pk_status st = pk_dftimage_check_grid(&b->ctx, args->size, args->cell, args->want_imag);
    if (st) return cli_error(cmd, st, &b->ctx);
    if ((rc = make_reference(cmd, args, b)) != 0 || (rc = time_kernels(cmd, args, b)) != 0) return rc;
    print_table(args, b);
    return 0;
}

int bench_dftimage(int argc, char **argv) {
    const char *cmd = "bench dftimage";
    bench_args args;
    bench_state b;
    memset(&b, 0, sizeof b);
    pk_context_init(&b.ctx);
    int rc = parse_bench_args(cmd, argc, argv, &args, &b.ctx);
    if (rc != BENCH_CONTINUE) return rc;
    pk_status st = args.vis_path ? pk_vis_read(&b.ctx, args.vis_path, PK_WEIGHTS_DATA, &b.vis)
                                 : pk_vis_random(&b.ctx, args.n_vis, (uint64_t)args.seed, &b.vis);
    if (st) return cli_error(cmd, st, &b.ctx);
    rc = args.npz_out ? write_problem(cmd, &args, &b) : run_benchmark(cmd, &args, &b);
    bench_free(&b);
    return rc;
}
