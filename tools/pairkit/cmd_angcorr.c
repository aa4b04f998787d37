/* cmd_angcorr.c - `pairkit angcorr DATA RANDOM`: the correlation function
 * in the course format (omega.out), optional CSV, and a PNG plot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "mpi.h"
#include "plot_axes.h"
#include "pairkit/angcorr.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: pairkit angcorr DATA RANDOM [options]\n"
            "  Angular two-point correlation w(theta) of a data and a random catalog,\n"
            "  with exact bins (every pair in the bin the float64 reference gives it).\n"
            "  Catalogs: the object count, then rows 'ra dec' (arcmin by default); or CSV\n"
            "  with a header, or FITS binary or ASCII tables, with named columns (degrees by\n"
            "  default, or a FITS column's TUNIT); gzip-compressed FITS too.\n\n"
            "  -o, --output FILE    the course format (default omega.out)\n"
            "  --csv FILE           also a CSV with bin edges and counts (ECSV, with units\n"
            "                       and metadata for astropy, when FILE ends in .ecsv)\n"
            "  --png FILE           plot of w(theta) (default: the output name with .png;\n"
            "                       'none', any case, for no plot)\n"
            "  --units U            arcmin (default for the native format), deg (default for\n"
            "                       CSV and FITS), rad or arcsec; a FITS RA or Dec column\n"
            "                       whose TUNIT names units is read in those (--units must\n"
            "                       agree)\n"
            "  --format F           auto (by extension, any case: .csv; .fits, .fit or .fts,\n"
            "                       gzipped or not), native, csv or fits\n"
            "  --ra-col, --dec-col NAME   RA and Dec column names (CSV, FITS; default ra, dec);\n"
            "                       in FITS also a column number, the first being 1\n"
            "  --data-ra-col, --data-dec-col, --random-ra-col, --random-dec-col NAME\n"
            "                       the same for one catalog (over --ra-col, --dec-col)\n"
            "  --weight-col NAME    per-object weights from this column of both catalogs\n"
            "  --data-weight-col NAME, --random-weight-col NAME   the same for one catalog\n"
            "                       (over --weight-col; not both with it)\n"
            "  --edges FILE         bin edges in degrees from a file (one per line or blank-separated)\n"
            "  --mean-theta         mean separation per bin (an acos per pair in range)\n"
            "  --jackknife K        jackknife errors over K sky patches (made from RANDOM)\n"
            "  --cov FILE           the jackknife covariance of w as CSV (default: the output\n"
            "                       name with _cov.csv)\n"
            "  --prune P            auto (default), on or off: skip cell pairs beyond theta_max\n"
            "  --save-rr FILE       also keep RR (with the random catalog's hash and the bins;\n"
            "                       with --jackknife, random weights or --mean-theta, per patch\n"
            "                       pair, with the weights' hash and the patches)\n"
            "  --rr FILE            RR from a --save-rr file of the same random catalog, bins\n"
            "                       (and random weights, --jackknife K, --mean-theta) instead\n"
            "                       of counting it again\n"
            "  --bin-width DEG      linear bin width in degrees (default 0.25)\n"
            "  --nbins N            number of bins (default 1440)\n"
            "  --theta-min DEG      start of the first bin (default 0)\n"
            "  --log THETA_MAX      logarithmic bins from --theta-min (> 0) to THETA_MAX degrees\n"
            "  --estimator E        ls (Landy-Szalay, default), natural, hamilton, dp\n"
            "  --backend B          auto (default), cpu or cuda\n"
            "  --kernel K           an exact kernel (see 'pairkit bench angcorr --list')\n"
            "  --threads N          CPU threads (default: all)\n"
            "  -q, --quiet          no progress line, no summary\n"
            "  Under mpirun the pairs are split across the ranks; with weights, mean\n"
            "  separations, jackknife errors or pruning the ranks share the counts patch\n"
            "  pair by patch pair (without --jackknife, pairs of blocks of objects).\n");
}

/* pk_angcorr_sum_fn over the ranks: every rank says whether its counts
 * succeeded, then the cells are summed onto rank 0. */
static int sum_parts(void *user, int ok, uint64_t *counts, size_t n_counts, double *sums, size_t n_sums) {
    (void)user;
    if (!cli_mpi_all_ok(ok)) return 1;
    int failed = cli_mpi_sum_u64(counts, n_counts);
    failed |= cli_mpi_sum_double(sums, n_sums); /* both, on every rank: collectives */
    return failed;
}

/* The options that take a value. */
static const char *const value_options[] = {"-o",
                                            "--output",
                                            "--csv",
                                            "--png",
                                            "--units",
                                            "--format",
                                            "--ra-col",
                                            "--dec-col",
                                            "--data-ra-col",
                                            "--data-dec-col",
                                            "--random-ra-col",
                                            "--random-dec-col",
                                            "--weight-col",
                                            "--data-weight-col",
                                            "--random-weight-col",
                                            "--edges",
                                            "--cov",
                                            "--rr",
                                            "--save-rr",
                                            "--jackknife",
                                            "--prune",
                                            "--bin-width",
                                            "--theta-min",
                                            "--log",
                                            "--nbins",
                                            "--estimator",
                                            "--backend",
                                            "--kernel",
                                            "--threads",
                                            NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h", "--help", "-q", "--quiet", "--mean-theta", NULL};

/* The estimator as the plot's title names it (the option's words are
 * pk_estimator_name's). */
static const char *estimator_title(pk_estimator estimator) {
    switch (estimator) {
    case PK_ESTIMATOR_LANDY_SZALAY: return "Landy-Szalay";
    case PK_ESTIMATOR_NATURAL: return "natural estimator";
    case PK_ESTIMATOR_HAMILTON: return "Hamilton";
    case PK_ESTIMATOR_DAVIS_PEEBLES: return "Davis-Peebles";
    }
    return pk_estimator_name(estimator);
}

int cmd_angcorr(int argc, char **argv) {
    const char *cmd = "angcorr";
    const char *paths[2] = {NULL, NULL};
    const char *out_path = "omega.out", *csv_path = NULL, *png_path = NULL;
    pk_units units = PK_UNITS_ARCMIN;
    double width_deg = 0.25, theta_min_deg = 0.0, log_max_deg = 0.0;
    size_t n_bins = 1440;
    int quiet = 0;
    /* issue 6: formats, weights, edges, mean separations, jackknife */
    int units_given = 0, has_log = 0, mean_theta = 0, jackknife = 0;
    const char *linear_given = NULL, *theta_min_given = NULL, *nbins_given = NULL; /* the option, once given */
    pk_catalog_format format = PK_FORMAT_AUTO;
    const char *ra_col[2] = {NULL, NULL}, *dec_col[2] = {NULL, NULL}, *weight_col[2] = {NULL, NULL};
    const char *col_option[2] = {NULL, NULL};         /* a --data-* or --random-* column option given */
    const char *shared_ra = NULL, *shared_dec = NULL; /* --ra-col, --dec-col: for a catalog without its own */
    const char *shared_weight = NULL;                 /* --weight-col, likewise */
    const char *edges_path = NULL, *cov_path = NULL;
    const char *rr_path = NULL, *save_rr_path = NULL;
    pk_prune prune = PK_PRUNE_AUTO;
    pk_estimator estimator = PK_ESTIMATOR_LANDY_SZALAY;
    pk_angcorr_options opts = {PK_BACKEND_AUTO, PK_ANGCORR_KERNEL_BEST};
    pk_context ctx;
    pk_context_init(&ctx);
    int n_paths = 0;
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        int has_value = k + 1 < argc;
#define NEXT() (has_value ? argv[++k] : NULL)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--mean-theta") == 0) {
            mean_theta = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            const char *v = NEXT();
            if (!v) return cli_missing_value(cmd, a, value_options);
            if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) out_path = v;
            else if (strcmp(a, "--csv") == 0) csv_path = v;
            else if (strcmp(a, "--png") == 0) png_path = v;
            else if (strcmp(a, "--units") == 0) {
                if (pk_units_parse(v, &units))
                    return cli_usage_error(cmd, "--units: '%s' is not arcmin, deg, rad or arcsec", v);
                units_given = 1;
            } else if (strcmp(a, "--format") == 0) {
                if (pk_catalog_format_parse(v, &format))
                    return cli_usage_error(cmd, "--format: '%s' is not auto, native, csv or fits", v);
            } else if (strcmp(a, "--ra-col") == 0) {
                shared_ra = v;
            } else if (strcmp(a, "--dec-col") == 0) {
                shared_dec = v;
            } else if (strcmp(a, "--data-ra-col") == 0 || strcmp(a, "--random-ra-col") == 0) {
                ra_col[a[2] == 'r'] = v;
                col_option[a[2] == 'r'] = a;
            } else if (strcmp(a, "--data-dec-col") == 0 || strcmp(a, "--random-dec-col") == 0) {
                dec_col[a[2] == 'r'] = v;
                col_option[a[2] == 'r'] = a;
            } else if (strcmp(a, "--weight-col") == 0) {
                shared_weight = v;
            } else if (strcmp(a, "--data-weight-col") == 0) {
                weight_col[0] = v;
            } else if (strcmp(a, "--random-weight-col") == 0) {
                weight_col[1] = v;
            } else if (strcmp(a, "--edges") == 0) {
                edges_path = v;
            } else if (strcmp(a, "--cov") == 0) {
                cov_path = v;
            } else if (strcmp(a, "--rr") == 0) {
                rr_path = v;
            } else if (strcmp(a, "--save-rr") == 0) {
                save_rr_path = v;
            } else if (strcmp(a, "--jackknife") == 0) {
                size_t kj;
                if (cli_parse_size(cmd, a, v, &kj)) return 2;
                if (kj < 2 || kj > 10000) return cli_usage_error(cmd, "--jackknife: %s patches; use 2 to 10000", v);
                jackknife = (int)kj;
            } else if (strcmp(a, "--prune") == 0) {
                if (strcmp(v, "auto") == 0) prune = PK_PRUNE_AUTO;
                else if (strcmp(v, "on") == 0) prune = PK_PRUNE_ON;
                else if (strcmp(v, "off") == 0) prune = PK_PRUNE_OFF;
                else return cli_usage_error(cmd, "--prune: '%s' is not auto, on or off", v);
            } else if (strcmp(a, "--bin-width") == 0) {
                if (cli_parse_double(cmd, a, v, &width_deg)) return 2;
                linear_given = a;
            } else if (strcmp(a, "--theta-min") == 0) {
                if (cli_parse_double(cmd, a, v, &theta_min_deg)) return 2;
                theta_min_given = a;
            } else if (strcmp(a, "--log") == 0) {
                if (cli_parse_double(cmd, a, v, &log_max_deg)) return 2;
                has_log = 1;
            } else if (strcmp(a, "--nbins") == 0) {
                if (cli_parse_size(cmd, a, v, &n_bins)) return 2;
                nbins_given = a;
            } else if (strcmp(a, "--estimator") == 0) {
                if (pk_estimator_parse(v, &estimator))
                    return cli_usage_error(cmd, "--estimator: '%s' is not ls, natural, hamilton or dp", v);
            } else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &opts.backend))
                    return cli_usage_error(cmd, "--backend: '%s' is not auto, cpu or cuda", v);
            } else if (strcmp(a, "--kernel") == 0) {
                opts.kernel = pk_angcorr_kernel_from_name(v);
                if (opts.kernel < 0) return cli_unknown_kernel(cmd, "--kernel", v);
                if (!pk_angcorr_kernel_exact(opts.kernel))
                    return cli_usage_error(cmd,
                                           "--kernel: '%s' is the approximate baseline of 'pairkit bench angcorr' "
                                           "(a pair near a bin edge can land in the next bin); angcorr runs exact "
                                           "kernels only",
                                           v);
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx.n_threads)) return 2;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else {
            if (n_paths == 2) return cli_usage_error(cmd, "expected two catalogs, got a third: '%s'", a);
            paths[n_paths++] = a;
        }
#undef NEXT
    }
    if (n_paths != 2) return cli_usage_error(cmd, "expected two catalogs: DATA RANDOM");

    /* Under mpirun every rank counts its part of the pairs (on GPU rank
     * modulo the devices, within each node, when CUDA runs), the counts are summed exactly on
     * rank 0, which alone writes the outputs. */
    int rank = cli_mpi_rank(), n_ranks = cli_mpi_size();
    ctx.cuda_device = cli_mpi_cuda_device();
    cli_note_cpu_fallback(cmd, &ctx, opts.backend, opts.kernel == PK_ANGCORR_KERNEL_BEST, quiet);

    pk_bins bins = {0};
    pk_catalog data = {0}, random = {0};
    pk_angcorr_result result = {0};
    pk_angcorr_extras extras = {0};
    double *weights[2] = {NULL, NULL};
    int features = weight_col[0] || weight_col[1] || shared_weight || mean_theta || jackknife || prune != PK_PRUNE_AUTO;
    pk_status st;
    if (edges_path && has_log) return cli_usage_error(cmd, "--edges and --log exclude each other");
    const char *bins_option = linear_given ? linear_given : theta_min_given ? theta_min_given : nbins_given;
    if (edges_path && bins_option)
        return cli_usage_error(cmd, "--edges gives every bin; %s would be ignored: leave it out", bins_option);
    if (has_log && linear_given)
        return cli_usage_error(cmd,
                               "--bin-width is for linear bins; --log bins are set by --theta-min, THETA_MAX and "
                               "--nbins");
    if (has_log && !(log_max_deg > 0))
        return cli_usage_error(cmd, "--log: theta_max must be > 0 degrees (got %g)", log_max_deg);
    if (has_log && !(theta_min_deg > 0))
        return cli_usage_error(cmd, "--log: log bins need theta_min > 0: give --theta-min, the first edge in degrees%s",
                               theta_min_given ? "" : " (it defaults to 0)");
    if (cov_path && !jackknife)
        return cli_usage_error(cmd, "--cov: the covariance comes from --jackknife K, which is not given");
    if (mean_theta && !csv_path)
        return cli_usage_error(cmd, "--mean-theta: the mean separations are written to the CSV; add --csv FILE");
    if (shared_weight && weight_col[0] && weight_col[1])
        return cli_usage_error(cmd,
                               "--weight-col would be ignored: --data-weight-col and --random-weight-col name both "
                               "catalogs' weight columns; leave one of the three out");
    /* no output may replace a file the run reads: refused before the count
     * (and again when staged, for the default names made later) */
    cli_input(paths[0]);
    cli_input(paths[1]);
    cli_input(edges_path);
    cli_input(rr_path);
    /* every output's final name, defaults included, checked before the
     * count; rank 0 alone writes them */
    char cov_buf[4200], png_buf[4200];
    const char *cov_default = NULL, *png_default = NULL;
    if (jackknife && !cov_path)
        cov_path = cov_default = cli_sibling_into(out_path, "_cov.csv", cov_buf, sizeof cov_buf);
    int want_png = cli_want_png(cmd, png_path, rank == 0); /* the same on every rank, said by rank 0 */
    if (want_png && !png_path) png_path = png_default = cli_sibling_into(out_path, ".png", png_buf, sizeof png_buf);
    const cli_named outputs[] = {
        {out_path, "-o (default omega.out)"},
        {csv_path, "--csv"},
        {cov_path, cov_default ? "the covariance CSV (by default the -o name with _cov.csv; --cov names it)" : "--cov"},
        {want_png ? png_path : NULL,
         png_default ? "the PNG plot (by default the -o name with .png; --png names it, --png none leaves it out)"
                     : "--png"},
        {save_rr_path, "--save-rr"},
    };
    int names_bad = cli_check_names(cmd, outputs, 5);
    if (!cli_mpi_all_ok(!names_bad)) return names_bad == 3 ? 1 : 2; /* every rank stops, or none */
    /* column names where a catalog has none are refused, not ignored; a
     * catalog's own names come before the shared ones */
    for (int c = 0; c < 2; c++) {
        if (!ra_col[c]) ra_col[c] = shared_ra;
        if (!dec_col[c]) dec_col[c] = shared_dec;
        if (!weight_col[c]) weight_col[c] = shared_weight;
    }
    pk_catalog_format read_as[2];
    for (int c = 0; c < 2; c++) {
        read_as[c] = format == PK_FORMAT_AUTO ? pk_catalog_format_of(paths[c]) : format;
        if (read_as[c] == PK_FORMAT_NATIVE && col_option[c])
            return cli_usage_error(cmd, "%s: %s is in the native format, which has no named columns", col_option[c],
                                   paths[c]);
    }
    if (read_as[0] == PK_FORMAT_NATIVE && read_as[1] == PK_FORMAT_NATIVE && (ra_col[0] || dec_col[0]))
        return cli_usage_error(cmd, "%s: both catalogs are in the native format, which has no named columns",
                               ra_col[0] ? "--ra-col" : "--dec-col");
    if (edges_path) st = pk_bins_read_edges(&ctx, edges_path, &bins);
    else if (has_log)
        st = pk_bins_log(&ctx, theta_min_deg * (M_PI / 180.0), log_max_deg * (M_PI / 180.0), n_bins, &bins);
    else st = pk_bins_linear(&ctx, theta_min_deg * (M_PI / 180.0), width_deg * (M_PI / 180.0), n_bins, &bins);
    pk_catalog *cats[2] = {&data, &random};
    for (int c = 0; c < 2 && st == PK_OK; c++) {
        pk_catalog_spec spec = {format, units, ra_col[c], dec_col[c], weight_col[c], units_given};
        /* CSV and FITS catalogs are in degrees unless --units (or, in FITS, a
         * column's TUNITn) says otherwise */
        if (!units_given && read_as[c] != PK_FORMAT_NATIVE) spec.units = PK_UNITS_DEG;
        st = pk_catalog_read_spec(&ctx, paths[c], &spec, cats[c], &weights[c]);
        if (st == PK_OK && weights[c]) {
            /* the estimators divide by the weights' total: said here with
             * the file and column, as a problem of the catalog */
            double total = 0, abs_total = 0, smallest = (double)INFINITY;
            for (size_t i = 0; i < cats[c]->n; i++) {
                double w = weights[c][i];
                total += w, abs_total += fabs(w);
                if (w != 0 && fabs(w) < smallest) smallest = fabs(w);
            }
            if (!(total > 0)) {
                snprintf(ctx.message, sizeof ctx.message,
                         "%s: column '%s': the weights sum to %g; the estimators need a positive total weight",
                         paths[c], weight_col[c], total);
                st = PK_ERR_PARSE;
            } else if (abs_total > PK_WEIGHT_MAX * (1 + 1e-9) || smallest < PK_WEIGHT_MIN) {
                snprintf(ctx.message, sizeof ctx.message,
                         "%s: column '%s': |weights| from %g, summing to %g: pair products would leave double "
                         "precision (nonzero weights need |w| >= %g and sum |w| <= %g); rescale the column (the "
                         "estimators do not change)",
                         paths[c], weight_col[c], smallest, abs_total, PK_WEIGHT_MIN, PK_WEIGHT_MAX);
                st = PK_ERR_PARSE;
            }
        }
    }
    /* under mpirun the ranks compare what they read */
    if (n_ranks > 1 && cli_mpi_all_ok(st == PK_OK)) {
        for (int c = 0; c < 2 && st == PK_OK; c++) {
            uint64_t h = cli_hash_bytes(CLI_HASH_START ^ cats[c]->n, cats[c]->ra, cats[c]->n * sizeof(double));
            h = cli_hash_bytes(h, cats[c]->dec, cats[c]->n * sizeof(double));
            if (weights[c]) h = cli_hash_bytes(h, weights[c], cats[c]->n * sizeof(double));
            st = cli_mpi_same_input(&ctx, h, paths[c], "catalogs");
        }
    }
    pk_angcorr_run_options run = {weights[0], weights[1], mean_theta, jackknife, prune};
    pk_angcorr_rr_cells rr_cells = {0};
    if (features) {
        /* RR per patch pair: read from --rr, or kept for --save-rr */
        pk_angcorr_rr_cells rr_in = {0};
        if (st == PK_OK && rr_path) st = pk_angcorr_read_rr_cells(&ctx, rr_path, &random, &run, &bins, &rr_in);
        /* under mpirun the ranks count together (the library sums their
         * cells through sum_parts) only when every rank has its inputs;
         * a rank that has not says why */
        if (cli_mpi_all_ok(st == PK_OK)) {
            cli_progress_attach(&ctx, "angcorr", quiet || rank != 0);
            st = pk_angcorr_run_ex_part(&ctx, &opts, rank, n_ranks, sum_parts, NULL, &data, &random, &bins, estimator,
                                        &run, rr_path ? &rr_in : NULL, save_rr_path ? &rr_cells : NULL, &result,
                                        &extras);
            cli_progress_done(&ctx);
        }
        pk_angcorr_rr_cells_free(&rr_in);
    } else if (st == PK_OK) {
        uint64_t *rr = NULL;
        if (rr_path) {
            rr = malloc(bins.n_bins * sizeof(uint64_t));
            if (!rr) snprintf(ctx.message, sizeof ctx.message, "out of memory");
            st = rr ? pk_angcorr_read_rr(&ctx, rr_path, &random, &bins, rr) : PK_ERR_NOMEM;
        }
        if (st == PK_OK) {
            cli_progress_attach(&ctx, "angcorr", quiet || rank != 0);
            st = pk_angcorr_run_part_rr(&ctx, &opts, rank, n_ranks, &data, &random, &bins, estimator, rr, &result);
            cli_progress_done(&ctx);
        }
        free(rr);
    }
    int rc = st ? cli_error(cmd, st, &ctx) : 0;
    if (!cli_mpi_all_ok(st == PK_OK)) {
        if (rc == 0) rc = 1; /* another rank failed and said why */
        st = PK_ERR_INTERNAL;
    } else if (n_ranks > 1 && features) {
        /* the counts were summed by the library (sum_parts); the times are
         * the slowest rank's; the summed pairs must be every pair */
        pk_pair_stats *ps[3] = {&result.stats_dd, &result.stats_dr, &result.stats_rr};
        uint64_t want[3] = {(uint64_t)data.n * data.n, (uint64_t)data.n * random.n,
                            rr_path ? 0 : (uint64_t)random.n * random.n};
        int failed = 0;
        for (int k = 0; k < 3; k++) {
            ps[k]->seconds = cli_mpi_max(ps[k]->seconds);
            ps[k]->kernel_ms = cli_mpi_max(ps[k]->kernel_ms);
            if (rank == 0 && ps[k]->pairs_total != want[k]) failed = 1;
        }
        if (failed) {
            fprintf(stderr, "pairkit %s: the ranks' pair counts do not add up to the whole\n", cmd);
            rc = 1;
            st = PK_ERR_INTERNAL;
        }
    } else if (n_ranks > 1) {
        size_t nb = result.n_bins;
        uint64_t *sum = malloc((3 * nb + 12) * sizeof(uint64_t));
        int failed = 0;
        if (!sum) {
            snprintf(ctx.message, sizeof ctx.message, "out of memory");
            rc = cli_error(cmd, PK_ERR_NOMEM, &ctx);
        }
        /* the sums below are collective: every rank has its buffer, or none sums */
        if (!cli_mpi_all_ok(sum != NULL)) {
            if (rc == 0) rc = 1; /* another rank failed and said why */
            st = PK_ERR_INTERNAL;
        } else {
            memcpy(sum, result.dd, nb * sizeof(uint64_t));
            memcpy(sum + nb, result.dr, nb * sizeof(uint64_t));
            memcpy(sum + 2 * nb, result.rr, nb * sizeof(uint64_t));
            const pk_pair_stats *ps[3] = {&result.stats_dd, &result.stats_dr, &result.stats_rr};
            for (int k = 0; k < 3; k++) {
                uint64_t *q = sum + 3 * nb + 4 * (size_t)k;
                q[0] = ps[k]->pairs_total, q[1] = ps[k]->pairs_in_range, q[2] = ps[k]->pairs_visited,
                q[3] = ps[k]->pairs_fp64;
            }
            failed = cli_mpi_sum_u64(sum, 3 * nb + 12);
            double seconds[3] = {cli_mpi_max(result.stats_dd.seconds), cli_mpi_max(result.stats_dr.seconds),
                                 cli_mpi_max(result.stats_rr.seconds)};
            double kernel_ms[3] = {cli_mpi_max(result.stats_dd.kernel_ms), cli_mpi_max(result.stats_dr.kernel_ms),
                                   cli_mpi_max(result.stats_rr.kernel_ms)};
            if (rank == 0 && !failed) {
                memcpy(result.dd, sum, nb * sizeof(uint64_t));
                memcpy(result.dr, sum + nb, nb * sizeof(uint64_t));
                memcpy(result.rr, sum + 2 * nb, nb * sizeof(uint64_t));
                pk_pair_stats *qs[3] = {&result.stats_dd, &result.stats_dr, &result.stats_rr};
                uint64_t want[3] = {(uint64_t)data.n * data.n, (uint64_t)data.n * random.n,
                                    (uint64_t)random.n * random.n};
                for (int k = 0; k < 3; k++) {
                    const uint64_t *q = sum + 3 * nb + 4 * (size_t)k;
                    qs[k]->pairs_total = q[0], qs[k]->pairs_in_range = q[1], qs[k]->pairs_visited = q[2];
                    qs[k]->pairs_fp64 = q[3];
                    qs[k]->seconds = seconds[k];
                    qs[k]->kernel_ms = kernel_ms[k];
                    if (qs[k]->pairs_total != (k == 2 && rr_path ? 0 : want[k])) failed = 1;
                }
                pk_estimate(estimator, data.n, random.n, nb, result.dd, result.dr, result.rr, result.omega);
            }
        }
        free(sum);
        if (failed) {
            fprintf(stderr, "pairkit %s: the ranks' pair counts do not add up to the whole\n", cmd);
            rc = 1;
            st = PK_ERR_INTERNAL;
        }
    }
    if (rank != 0 || st != PK_OK) {
        pk_angcorr_rr_cells_free(&rr_cells);
        pk_angcorr_result_free(&result);
        pk_angcorr_extras_free(&extras);
        free(weights[0]);
        free(weights[1]);
        pk_catalog_free(&data);
        pk_catalog_free(&random);
        pk_bins_free(&bins);
        return rc;
    }
    {
        /* the outputs' names, then all of them written under staged names
         * and moved into place together, or none */
        /* the course format prints bin starts to 0.001 degree: say when
         * that cannot tell two bins apart and the CSV was not asked for */
        if (!csv_path) {
            for (size_t k = 1; k < bins.n_bins; k++) {
                char a[32], b[32];
                snprintf(a, sizeof a, "%6.3f", bins.edges[k - 1] * (180.0 / M_PI));
                snprintf(b, sizeof b, "%6.3f", bins.edges[k] * (180.0 / M_PI));
                if (strcmp(a, b) != 0) continue;
                fprintf(stderr,
                        "pairkit %s: note: %s gives bin starts to 0.001 degree, which does not tell bins %zu and %zu "
                        "apart (both %s); --csv FILE has every edge in full\n",
                        cmd, out_path, k - 1, k, a + strspn(a, " "));
                break;
            }
        }
        cli_outputs outs = {0};
        const char *s_out = cli_stage(cmd, &outs, out_path);
        const char *s_csv = s_out && csv_path ? cli_stage(cmd, &outs, csv_path) : NULL;
        const char *s_cov = s_out && (!csv_path || s_csv) && extras.omega_cov ? cli_stage(cmd, &outs, cov_path) : NULL;
        const char *s_png = s_out && (!csv_path || s_csv) && (!extras.omega_cov || s_cov) && want_png
                                ? cli_stage(cmd, &outs, png_path)
                                : NULL;
        const char *s_rr =
            s_out && (!csv_path || s_csv) && (!extras.omega_cov || s_cov) && (!want_png || s_png) && save_rr_path
                ? cli_stage(cmd, &outs, save_rr_path)
                : NULL;
        if (!s_out || (csv_path && !s_csv) || (extras.omega_cov && !s_cov) || (want_png && !s_png) ||
            (save_rr_path && !s_rr))
            rc = 1;
        if (!rc && (st = pk_angcorr_write_omega(&ctx, s_out, &result, &bins)) != PK_OK)
            rc = cli_output_error(cmd, st, &ctx, &outs);
        if (!rc && csv_path) { /* ECSV by the name: the file written now is the staged one */
            size_t n = strlen(csv_path);
            const pk_angcorr_extras *ex = features ? &extras : NULL;
            st = n >= 5 && strcasecmp(csv_path + n - 5, ".ecsv") == 0
                     ? pk_angcorr_write_ecsv(&ctx, s_csv, &result, ex, &bins)
                     : pk_angcorr_write_csv_ex(&ctx, s_csv, &result, ex, &bins);
            if (st != PK_OK) rc = cli_output_error(cmd, st, &ctx, &outs);
        }
        if (!rc && extras.omega_cov && (st = pk_angcorr_write_covariance(&ctx, s_cov, &extras, &bins)) != PK_OK)
            rc = cli_output_error(cmd, st, &ctx, &outs);
        if (!rc && save_rr_path &&
            (st = features ? pk_angcorr_write_rr_cells(&ctx, s_rr, &random, &run, &bins, &rr_cells)
                           : pk_angcorr_write_rr(&ctx, s_rr, &random, &bins, result.rr)) != PK_OK)
            rc = cli_output_error(cmd, st, &ctx, &outs);
        if (!rc && want_png) {
            double *theta = malloc(result.n_bins * sizeof(double));
            double *w = malloc(result.n_bins * sizeof(double));
            double *werr = extras.omega_err ? malloc(result.n_bins * sizeof(double)) : NULL;
            size_t n = 0;
            for (size_t k = 0; k < result.n_bins; k++) {
                if (result.rr[k] == 0 || !isfinite(result.omega[k])) continue;
                double lo = bins.edges[k], hi = bins.edges[k + 1];
                theta[n] = (has_log ? sqrt(lo * hi) : 0.5 * (lo + hi)) * (180.0 / M_PI);
                if (extras.theta_mean_dd && isfinite(extras.theta_mean_dd[k]))
                    theta[n] = extras.theta_mean_dd[k] * (180.0 / M_PI);
                w[n] = result.omega[k];
                if (werr) werr[n] = extras.omega_err[k];
                n++;
            }
            char title[128];
            snprintf(title, sizeof title, "w(#gh) %s, %zu x %zu objects", estimator_title(estimator),
                     (size_t)result.n_data, (size_t)result.n_random);
            int log_x, log_y;
            cli_wtheta_axes(has_log, edges_path != NULL, bins.edges, bins.n_bins, w, n, &log_x, &log_y);
            /* with no w to draw, the axis spans the bins */
            double theta_lo = bins.edges[0] * (180.0 / M_PI), theta_hi = bins.edges[bins.n_bins] * (180.0 / M_PI);
            cli_plot plot = {title, "#gh (degrees)", "w(#gh)", theta, w, werr, n, log_x, log_y, theta_lo, theta_hi};
            if (cli_plot_png(cmd, s_png, png_path, &plot)) rc = 1;
            free(theta);
            free(w);
            free(werr);
        }
        if (!rc) rc = cli_commit(cmd, &outs);
        else cli_discard(&outs);
        if (!rc) {
            /* a valid run, but one with nothing to show: said, not left
             * to an empty output */
            size_t with_rr = 0;
            for (size_t k = 0; k < result.n_bins; k++) with_rr += result.rr[k] > 0;
            if (with_rr == 0)
                fprintf(stderr,
                        "pairkit %s: warning: no bin has random pairs in range (RR is 0 in all %zu bins, %g to %g "
                        "degrees): %s has no rows and w(theta) is nowhere defined\n",
                        cmd, result.n_bins, bins.edges[0] * (180.0 / M_PI), bins.edges[bins.n_bins] * (180.0 / M_PI),
                        out_path);
        }
        if (!rc && extras.omega_err && cli_mpi_rank() == 0) {
            /* bins with a w(theta) but no error: some patch left out takes
             * every random pair of the bin, or its DD or DR */
            size_t with_w = 0, no_err = 0;
            for (size_t k = 0; k < result.n_bins; k++) {
                if (result.rr[k] == 0 || !isfinite(result.omega[k])) continue;
                with_w++;
                no_err += !isfinite(extras.omega_err[k]);
            }
            if (no_err)
                fprintf(stderr,
                        "pairkit %s: warning: %zu of the %zu bins with a w(theta) have no jackknife error (nan): "
                        "leaving out one of the %d patches leaves a count of zero there (too few objects for that "
                        "many patches?)\n",
                        cmd, no_err, with_w, jackknife);
        }
        if (!rc && !quiet) {
            const pk_pair_stats *s[3] = {&result.stats_dd, &result.stats_dr, &result.stats_rr};
            const char *names[3] = {"DD", "DR", "RR"};
            double total_s = 0, visited = 0, fp64 = 0, device_ms = 0;
            for (int k = 0; k < 3; k++) {
                if (k == 2 && rr_path) {
                    fprintf(stderr, "RR: from %s, not counted\n", rr_path);
                    continue;
                }
                device_ms += s[k]->kernel_ms;
                fprintf(stderr,
                        "%s: %llu pairs (%llu in range), %.3f s, %.3g separations computed (%.3g/s), %.4f%% settled "
                        "in float64\n",
                        names[k], (unsigned long long)s[k]->pairs_total, (unsigned long long)s[k]->pairs_in_range,
                        s[k]->seconds, (double)s[k]->pairs_visited, (double)s[k]->pairs_visited / s[k]->seconds,
                        100.0 * (double)s[k]->pairs_fp64 / (double)s[k]->pairs_visited);
                total_s += s[k]->seconds;
                visited += (double)s[k]->pairs_visited;
                fp64 += (double)s[k]->pairs_fp64;
            }
            if (cli_mpi_size() > 1)
                fprintf(stderr,
                        "%d ranks: %.3f s of rank 0 in MPI collectives (reductions and waiting for the others)\n",
                        cli_mpi_size(), cli_mpi_comm_seconds());
            if (device_ms > 0)
                fprintf(stderr, "device kernel time %.3f ms (DD + DR%s%s)\n", device_ms, rr_path ? "" : " + RR",
                        cli_mpi_size() > 1 ? ", the slowest rank of each" : "");
            fprintf(stderr,
                    "kernel %s: %.3f s, %.3g separations/s, %.4f%% settled in float64; wrote %s%s%s%s%s%s%s%s%s\n",
                    pk_angcorr_kernel_name(result.stats_dd.kernel), total_s, visited / total_s, 100.0 * fp64 / visited,
                    out_path, csv_path ? ", " : "", csv_path ? csv_path : "", want_png ? ", " : "",
                    want_png ? png_path : "", extras.omega_cov ? ", " : "", extras.omega_cov ? cov_path : "",
                    save_rr_path ? ", " : "", save_rr_path ? save_rr_path : "");
        }
        pk_angcorr_rr_cells_free(&rr_cells);
        pk_angcorr_result_free(&result);
        pk_angcorr_extras_free(&extras);
        free(weights[0]);
        free(weights[1]);
    }
    pk_catalog_free(&data);
    pk_catalog_free(&random);
    pk_bins_free(&bins);
    return rc;
}
