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

int bench_dftimage(int argc, char **argv) {
    const char *cmd = "bench dftimage";
    const char *vis_path = NULL, *npz_out = NULL;
    char *kernel_list = NULL;
    pk_backend backend = PK_BACKEND_CPU;
    size_t n_vis = 0, size = 700, check_pixels = 1024, seed = 1;
    double cell = 0.0005;
    int runs = 3, want_imag = 0, seed_given = 0;
    pk_context ctx;
    pk_context_init(&ctx);
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
            for (int id = 1; id < 200; id++) {
                const char *name = pk_dftimage_kernel_name(id);
                if (name)
                    printf("%-18s %-7s %s\n", name,
                           pk_dftimage_kernel_precision(id) == PK_PRECISION_DOUBLE ? "float64" : "float32",
                           pk_dftimage_kernel_available(id) ? "available" : "not available here");
            }
            return 0;
        } else if (strcmp(a, "--imag") == 0) {
            want_imag = 1;
        } else if (a[0] == '-') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            if (strcmp(a, "--kernels") == 0) kernel_list = v[0] ? strdup(v) : NULL;
            else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &backend) || backend == PK_BACKEND_AUTO)
                    return cli_usage_error(cmd, "--backend: '%s' is not cpu or cuda", v);
            } else if (strcmp(a, "--nvis") == 0) {
                if (cli_parse_range(cmd, a, v, 1, (size_t)1 << 32, &n_vis)) return 2;
            } else if (strcmp(a, "--size") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 1u << 16, &size)) return 2;
            } else if (strcmp(a, "--cell") == 0) {
                if (cli_parse_double(cmd, a, v, &cell)) return 2;
            } else if (strcmp(a, "--seed") == 0) {
                if (cli_parse_size(cmd, a, v, &seed)) return 2;
                seed_given = 1;
            } else if (strcmp(a, "--vis") == 0) {
                vis_path = v;
            } else if (strcmp(a, "--write-npz") == 0) {
                npz_out = v;
            } else if (strcmp(a, "--runs") == 0) {
                if (cli_parse_range(cmd, a, v, 1, 100000, &t)) return 2;
                runs = (int)t;
            } else if (strcmp(a, "--check-pixels") == 0) {
                if (cli_parse_size(cmd, a, v, &check_pixels)) return 2;
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx.n_threads)) return 2;
            } else return cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (vis_path && (n_vis || seed_given))
        return cli_usage_error(cmd, "--vis images the file's visibilities: %s would not be used",
                               n_vis ? "--nvis" : "--seed");
    cli_input(vis_path);
    if (npz_out) { /* a folder, a missing folder, an input's name: said before the problem is made */
        const cli_named output = {npz_out, "--write-npz"};
        int names_bad = cli_check_names(cmd, &output, 1);
        if (names_bad) return names_bad == 3 ? 1 : 2;
    }
    int cuda = backend == PK_BACKEND_CUDA;
    if (n_vis == 0) n_vis = cuda ? 1000000 : 65536;

    pk_vis vis;
    pk_status st = vis_path ? pk_vis_read(&ctx, vis_path, PK_WEIGHTS_DATA, &vis)
                            : pk_vis_random(&ctx, n_vis, (uint64_t)seed, &vis);
    if (st) return cli_error(cmd, st, &ctx);
    if (npz_out) {
        st = pk_vis_write_npz(&ctx, npz_out, &vis);
        size_t n_written = vis.n;
        pk_vis_free(&vis);
        if (st) return cli_error(cmd, st, &ctx);
        if (vis_path) printf("wrote %s (%zu visibilities of %s)\n", npz_out, n_written, vis_path);
        else printf("wrote %s (%zu visibilities, seed %zu)\n", npz_out, n_vis, seed);
        return 0;
    }

    int kernels[64], n_kernels = 0;
    if (kernel_list) {
        for (char *tok = strtok(kernel_list, ","); tok && n_kernels < 64; tok = strtok(NULL, ",")) {
            int id = pk_dftimage_kernel_from_name(tok);
            if (id <= 0) {
                int rc = cli_unknown_kernel(cmd, "--kernels", tok); /* tok lies in kernel_list */
                free(kernel_list);
                pk_vis_free(&vis);
                return rc;
            }
            if (!pk_dftimage_kernel_available(id)) {
                fprintf(stderr, "pairkit %s: kernel '%s' is not available here, skipped\n", cmd, tok);
                continue;
            }
            kernels[n_kernels++] = id;
        }
        free(kernel_list);
    } else {
        for (int id = 2; id < 200 && n_kernels < 64; id++) {
            if (!pk_dftimage_kernel_name(id) || !pk_dftimage_kernel_available(id)) continue;
            if ((id >= 100) != cuda) continue;
            kernels[n_kernels++] = id;
        }
    }
    if (n_kernels == 0) {
        pk_vis_free(&vis);
        pk_backend resolved;
        pk_status bst = pk_backend_resolve(&ctx, backend, &resolved); /* says why CUDA is missing */
        if (bst != PK_OK) return cli_error(cmd, bst, &ctx);
        return cli_usage_error(cmd, "no kernel to run on backend %s", pk_backend_name(backend));
    }

    /* The grid as the runs will check it, before the reference's work. */
    if ((st = pk_dftimage_check_grid(&ctx, size, cell, want_imag)) != PK_OK) {
        pk_vis_free(&vis);
        return cli_error(cmd, st, &ctx);
    }

    /* The reference on a fixed pseudo-random subset of pixels. */
    size_t n_pix = size * size, n_check = check_pixels < n_pix ? check_pixels : n_pix;
    size_t *index = malloc((n_check + 1) * sizeof(size_t));
    double *ref_re = malloc((n_check + 1) * sizeof(double)), *ref_im = malloc((n_check + 1) * sizeof(double));
    double *pl = malloc((n_check + 1) * sizeof(double)), *pm = malloc((n_check + 1) * sizeof(double));
    double *times = calloc((size_t)n_kernels * (size_t)runs, sizeof(double));
    double *cold = calloc((size_t)n_kernels, sizeof(double)), *err = calloc((size_t)n_kernels, sizeof(double));
    if (!index || !ref_re || !ref_im || !pl || !pm || !times || !cold || !err) {
        fprintf(stderr, "pairkit %s: out of memory\n", cmd);
        return 1;
    }
    unsigned long long s = 0x243F6A8885A308D3ull;
    for (size_t p = 0; p < n_check; p++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        index[p] = (size_t)((s * 2685821657736338717ull) % n_pix);
        pl[p] = ((double)(index[p] % size) - (double)(size / 2)) * cell;
        pm[p] = ((double)(index[p] / size) - (double)(size / 2)) * cell;
    }
    printf(
        "pairkit bench dftimage: %zu visibilities x %zu x %zu pixels (%.3g terms), cell %g, %s image, %d warm runs\n",
        vis.n, size, size, (double)vis.n * (double)n_pix, cell, want_imag ? "complex" : "real", runs);
    cli_print_machine(&ctx, backend == PK_BACKEND_CUDA);
    fflush(stdout);
    if (n_check > 0) {
        double t0 = now_seconds();
        if ((st = pk_dftimage_ref_points(&ctx, &vis, vis.sign, n_check, pl, pm, ref_re, ref_im)) != PK_OK)
            return cli_error(cmd, st, &ctx);
        printf("float64 reference on %zu pixels: %.1f s\n", n_check, now_seconds() - t0);
        fflush(stdout);
    }

    for (int round = 0; round <= runs; round++) {
        for (int q = 0; q < n_kernels; q++) {
            int kk = (q + round) % n_kernels;
            pk_dftimage_options opts = {PK_BACKEND_AUTO, kernels[kk], PK_PRECISION_SINGLE, 0, want_imag, 0};
            pk_image img;
            pk_dftimage_stats stats;
            if ((st = pk_dftimage_run(&ctx, &opts, &vis, size, cell, &img, &stats)) != PK_OK)
                return cli_error(cmd, st, &ctx);
            double t = kernels[kk] >= 100 ? stats.kernel_ms * 1e-3 : stats.seconds;
            if (round == 0) {
                cold[kk] = t;
                double num = 0, den = 0;
                for (size_t p = 0; p < n_check; p++) {
                    double d = img.re[index[p]] - ref_re[p];
                    num += d * d, den += ref_re[p] * ref_re[p];
                    if (want_imag) {
                        d = img.im[index[p]] - ref_im[p];
                        num += d * d, den += ref_im[p] * ref_im[p];
                    }
                }
                err[kk] = n_check ? sqrt(num / den) : (double)NAN;
            } else {
                times[(size_t)kk * (size_t)runs + (size_t)(round - 1)] = t;
            }
            pk_image_free(&img);
        }
    }
    double terms = (double)vis.n * (double)n_pix;
    printf("%-18s %10s %10s %10s %12s %11s %9s\n", "kernel", "cold ms", "median ms", "min ms", "terms/s", "rel L2 err",
           "speed-up");
    double first = 0;
    for (int kk = 0; kk < n_kernels; kk++) {
        double *v = times + (size_t)kk * (size_t)runs;
        double mn, med = cli_runs_median(v, runs, &mn);
        if (kk == 0) first = med;
        char err_text[32] = "-"; /* --check-pixels 0: no comparison */
        if (n_check) snprintf(err_text, sizeof err_text, "%.3g", err[kk]);
        printf("%-18s %10.2f %10.2f %10.2f %12.3g %11s %8.2fx\n", pk_dftimage_kernel_name(kernels[kk]), cold[kk] * 1e3,
               med * 1e3, mn * 1e3, terms / med, err_text, first / med);
    }
    free(index), free(ref_re), free(ref_im), free(pl), free(pm), free(times), free(cold), free(err);
    pk_vis_free(&vis);
    return 0;
}
