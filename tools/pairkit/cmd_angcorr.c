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

/* parse_angcorr_args' answer when the command goes on (else an exit code). */
#define ANGCORR_CONTINUE (-1)

/* The command line, as parse_angcorr_args leaves it; check_angcorr_outputs
 * adds the outputs' default names and whether the plot is drawn. */
typedef struct angcorr_args {
    const char *paths[2]; /* DATA, RANDOM */
    const char *out_path, *csv_path, *png_path, *cov_path, *rr_path, *save_rr_path, *edges_path;
    pk_units units;
    int units_given;
    pk_catalog_format format;
    const char *ra_col[2], *dec_col[2], *weight_col[2]; /* per catalog: data, random */
    const char *col_option[2];                          /* a --data-* or --random-* column option given */
    const char *shared_ra, *shared_dec;                 /* --ra-col, --dec-col: for a catalog without its own */
    const char *shared_weight;                          /* --weight-col, likewise */
    double width_deg, theta_min_deg, log_max_deg;
    size_t n_bins;
    int has_log;
    const char *linear_given, *theta_min_given, *nbins_given; /* the option, once given */
    int mean_theta, jackknife, quiet;
    pk_prune prune;
    pk_estimator estimator;
    pk_angcorr_options opts;
    /* weights, mean separations, jackknife errors or pruning: the counts
     * of the patch pairs (pk_angcorr_run_ex_part) */
    int features;
    int want_png;
    char cov_buf[4200], png_buf[4200]; /* the default names, when made */
} angcorr_args;

/* One run's state on one rank, freed by angcorr_job_free. */
typedef struct angcorr_job {
    pk_context ctx;
    int rank, n_ranks;
    pk_bins bins;
    pk_catalog data, random;
    double *weights[2]; /* NULL: unweighted */
    pk_angcorr_run_options run;
    pk_angcorr_rr_cells rr_cells; /* kept for --save-rr with the features */
    pk_angcorr_result result;
    pk_angcorr_extras extras;
} angcorr_job;

static void angcorr_job_free(angcorr_job *job) {
    pk_angcorr_rr_cells_free(&job->rr_cells);
    pk_angcorr_result_free(&job->result);
    pk_angcorr_extras_free(&job->extras);
    free(job->weights[0]);
    free(job->weights[1]);
    pk_catalog_free(&job->data);
    pk_catalog_free(&job->random);
    pk_bins_free(&job->bins);
}

/* One option a that takes the value v: 0, or 2 after a usage error. */
static int parse_angcorr_option(angcorr_args *a, pk_context *ctx, const char *o, const char *v) {
    const char *cmd = "angcorr";
    if (strcmp(o, "-o") == 0 || strcmp(o, "--output") == 0) a->out_path = v;
    else if (strcmp(o, "--csv") == 0) a->csv_path = v;
    else if (strcmp(o, "--png") == 0) a->png_path = v;
    else if (strcmp(o, "--units") == 0) {
        if (pk_units_parse(v, &a->units))
            return cli_usage_error(cmd, "--units: '%s' is not arcmin, deg, rad or arcsec", v);
        a->units_given = 1;
    } else if (strcmp(o, "--format") == 0) {
        if (pk_catalog_format_parse(v, &a->format))
            return cli_usage_error(cmd, "--format: '%s' is not auto, native, csv or fits", v);
    } else if (strcmp(o, "--ra-col") == 0) {
        a->shared_ra = v;
    } else if (strcmp(o, "--dec-col") == 0) {
        a->shared_dec = v;
    } else if (strcmp(o, "--data-ra-col") == 0 || strcmp(o, "--random-ra-col") == 0) {
        a->ra_col[o[2] == 'r'] = v;
        a->col_option[o[2] == 'r'] = o;
    } else if (strcmp(o, "--data-dec-col") == 0 || strcmp(o, "--random-dec-col") == 0) {
        a->dec_col[o[2] == 'r'] = v;
        a->col_option[o[2] == 'r'] = o;
    } else if (strcmp(o, "--weight-col") == 0) {
        a->shared_weight = v;
    } else if (strcmp(o, "--data-weight-col") == 0) {
        a->weight_col[0] = v;
    } else if (strcmp(o, "--random-weight-col") == 0) {
        a->weight_col[1] = v;
    } else if (strcmp(o, "--edges") == 0) {
        a->edges_path = v;
    } else if (strcmp(o, "--cov") == 0) {
        a->cov_path = v;
    } else if (strcmp(o, "--rr") == 0) {
        a->rr_path = v;
    } else if (strcmp(o, "--save-rr") == 0) {
        a->save_rr_path = v;
    } else if (strcmp(o, "--jackknife") == 0) {
        size_t kj;
        if (cli_parse_size(cmd, o, v, &kj)) return 2;
        if (kj < 2 || kj > 10000) return cli_usage_error(cmd, "--jackknife: %s patches; use 2 to 10000", v);
        a->jackknife = (int)kj;
    } else if (strcmp(o, "--prune") == 0) {
        if (strcmp(v, "auto") == 0) a->prune = PK_PRUNE_AUTO;
        else if (strcmp(v, "on") == 0) a->prune = PK_PRUNE_ON;
        else if (strcmp(v, "off") == 0) a->prune = PK_PRUNE_OFF;
        else return cli_usage_error(cmd, "--prune: '%s' is not auto, on or off", v);
    } else if (strcmp(o, "--bin-width") == 0) {
        if (cli_parse_double(cmd, o, v, &a->width_deg)) return 2;
        a->linear_given = o;
    } else if (strcmp(o, "--theta-min") == 0) {
        if (cli_parse_double(cmd, o, v, &a->theta_min_deg)) return 2;
        a->theta_min_given = o;
    } else if (strcmp(o, "--log") == 0) {
        if (cli_parse_double(cmd, o, v, &a->log_max_deg)) return 2;
        a->has_log = 1;
    } else if (strcmp(o, "--nbins") == 0) {
        if (cli_parse_size(cmd, o, v, &a->n_bins)) return 2;
        a->nbins_given = o;
    } else if (strcmp(o, "--estimator") == 0) {
        if (pk_estimator_parse(v, &a->estimator))
            return cli_usage_error(cmd, "--estimator: '%s' is not ls, natural, hamilton or dp", v);
    } else if (strcmp(o, "--backend") == 0) {
        if (pk_backend_parse(v, &a->opts.backend))
            return cli_usage_error(cmd, "--backend: '%s' is not auto, cpu or cuda", v);
    } else if (strcmp(o, "--kernel") == 0) {
        a->opts.kernel = pk_angcorr_kernel_from_name(v);
        if (a->opts.kernel < 0) return cli_unknown_kernel(cmd, "--kernel", v);
        if (!pk_angcorr_kernel_exact(a->opts.kernel))
            return cli_usage_error(cmd,
                                   "--kernel: '%s' is the approximate baseline of 'pairkit bench angcorr' "
                                   "(a pair near a bin edge can land in the next bin); angcorr runs exact "
                                   "kernels only",
                                   v);
    } else if (strcmp(o, "--threads") == 0) {
        if (cli_parse_threads(cmd, o, v, &ctx->n_threads)) return 2;
    } else {
        return cli_usage_error(cmd, "unknown option '%s'", o);
    }
    return 0;
}

/* The command line into a (and --threads into ctx): ANGCORR_CONTINUE, or
 * the exit code: 0 after --help, 2 after a usage error. */
static int parse_angcorr_args(int argc, char **argv, angcorr_args *a, pk_context *ctx) {
    const char *cmd = "angcorr";
    memset(a, 0, sizeof *a);
    a->out_path = "omega.out";
    a->units = PK_UNITS_ARCMIN;
    a->width_deg = 0.25;
    a->n_bins = 1440;
    a->format = PK_FORMAT_AUTO;
    a->prune = PK_PRUNE_AUTO;
    a->estimator = PK_ESTIMATOR_LANDY_SZALAY;
    a->opts = (pk_angcorr_options){PK_BACKEND_AUTO, PK_ANGCORR_KERNEL_BEST};
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    int n_paths = 0;
    for (int k = 1; k < argc; k++) {
        const char *o = argv[k];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(o, "-q") == 0 || strcmp(o, "--quiet") == 0) {
            a->quiet = 1;
        } else if (strcmp(o, "--mean-theta") == 0) {
            a->mean_theta = 1;
        } else if (o[0] == '-' && o[1] != '\0') {
            if (k + 1 >= argc) return cli_missing_value(cmd, o, value_options);
            int rc = parse_angcorr_option(a, ctx, o, argv[++k]);
            if (rc) return rc;
        } else {
            if (n_paths == 2) return cli_usage_error(cmd, "expected two catalogs, got a third: '%s'", o);
            a->paths[n_paths++] = o;
        }
    }
    if (n_paths != 2) return cli_usage_error(cmd, "expected two catalogs: DATA RANDOM");
    a->features = a->weight_col[0] || a->weight_col[1] || a->shared_weight || a->mean_theta || a->jackknife ||
                  a->prune != PK_PRUNE_AUTO;
    return ANGCORR_CONTINUE;
}

/* Options that exclude or need each other: 0, or 2 after a usage error. */
static int validate_angcorr_args(const angcorr_args *a) {
    const char *cmd = "angcorr";
    if (a->edges_path && a->has_log) return cli_usage_error(cmd, "--edges and --log exclude each other");
    const char *bins_option = a->linear_given      ? a->linear_given
                              : a->theta_min_given ? a->theta_min_given
                                                   : a->nbins_given;
    if (a->edges_path && bins_option)
        return cli_usage_error(cmd, "--edges gives every bin; %s would be ignored: leave it out", bins_option);
    if (a->has_log && a->linear_given)
        return cli_usage_error(cmd,
                               "--bin-width is for linear bins; --log bins are set by --theta-min, THETA_MAX and "
                               "--nbins");
    if (a->has_log && !(a->log_max_deg > 0))
        return cli_usage_error(cmd, "--log: theta_max must be > 0 degrees (got %g)", a->log_max_deg);
    if (a->has_log && !(a->theta_min_deg > 0))
        return cli_usage_error(cmd, "--log: log bins need theta_min > 0: give --theta-min, the first edge in degrees%s",
                               a->theta_min_given ? "" : " (it defaults to 0)");
    if (a->cov_path && !a->jackknife)
        return cli_usage_error(cmd, "--cov: the covariance comes from --jackknife K, which is not given");
    if (a->mean_theta && !a->csv_path)
        return cli_usage_error(cmd, "--mean-theta: the mean separations are written to the CSV; add --csv FILE");
    if (a->shared_weight && a->weight_col[0] && a->weight_col[1])
        return cli_usage_error(cmd,
                               "--weight-col would be ignored: --data-weight-col and --random-weight-col name both "
                               "catalogs' weight columns; leave one of the three out");
    return 0;
}

/* Every output's final name, the defaults made here included, checked
 * before the count (rank 0 alone writes them): 0, or the exit code on
 * every rank alike (collective: one cli_mpi_all_ok). No output may
 * replace a file the run reads. */
static int check_angcorr_outputs(angcorr_args *a, int rank) {
    const char *cmd = "angcorr";
    cli_input(a->paths[0]);
    cli_input(a->paths[1]);
    cli_input(a->edges_path);
    cli_input(a->rr_path);
    const char *cov_default = NULL, *png_default = NULL;
    if (a->jackknife && !a->cov_path)
        a->cov_path = cov_default = cli_sibling_into(a->out_path, "_cov.csv", a->cov_buf, sizeof a->cov_buf);
    a->want_png = cli_want_png(cmd, a->png_path, rank == 0); /* the same on every rank, said by rank 0 */
    if (a->want_png && !a->png_path)
        a->png_path = png_default = cli_sibling_into(a->out_path, ".png", a->png_buf, sizeof a->png_buf);
    const cli_named outputs[] = {
        {a->out_path, "-o (default omega.out)"},
        {a->csv_path, "--csv"},
        {a->cov_path,
         cov_default ? "the covariance CSV (by default the -o name with _cov.csv; --cov names it)" : "--cov"},
        {a->want_png ? a->png_path : NULL,
         png_default ? "the PNG plot (by default the -o name with .png; --png names it, --png none leaves it out)"
                     : "--png"},
        {a->save_rr_path, "--save-rr"},
    };
    int names_bad = cli_check_names(cmd, outputs, 5);
    if (!cli_mpi_all_ok(!names_bad)) return names_bad == 3 ? 1 : 2; /* every rank stops, or none */
    return 0;
}

/* Each catalog's columns, its own before the shared ones, and the format
 * it is read as (into read_as): 0, or 2 after a usage error when a
 * catalog without named columns is given some (refused, not ignored).
 * The same answer on every rank: from the command line and the names. */
static int choose_angcorr_columns(angcorr_args *a, pk_catalog_format read_as[2]) {
    const char *cmd = "angcorr";
    for (int c = 0; c < 2; c++) {
        if (!a->ra_col[c]) a->ra_col[c] = a->shared_ra;
        if (!a->dec_col[c]) a->dec_col[c] = a->shared_dec;
        if (!a->weight_col[c]) a->weight_col[c] = a->shared_weight;
    }
    for (int c = 0; c < 2; c++) {
        read_as[c] = a->format == PK_FORMAT_AUTO ? pk_catalog_format_of(a->paths[c]) : a->format;
        if (read_as[c] == PK_FORMAT_NATIVE && a->col_option[c])
            return cli_usage_error(cmd, "%s: %s is in the native format, which has no named columns", a->col_option[c],
                                   a->paths[c]);
    }
    if (read_as[0] == PK_FORMAT_NATIVE && read_as[1] == PK_FORMAT_NATIVE && (a->ra_col[0] || a->dec_col[0]))
        return cli_usage_error(cmd, "%s: both catalogs are in the native format, which has no named columns",
                               a->ra_col[0] ? "--ra-col" : "--dec-col");
    return 0;
}

/* The estimators divide by the weights' total: said here with the file and
 * column, as a problem of catalog c. */
static pk_status check_angcorr_weights(const angcorr_args *a, angcorr_job *job, int c) {
    const pk_catalog *cat = c ? &job->random : &job->data;
    const double *weights = job->weights[c];
    double total = 0, abs_total = 0, smallest = (double)INFINITY;
    for (size_t i = 0; i < cat->n; i++) {
        double w = weights[i];
        total += w, abs_total += fabs(w);
        if (w != 0 && fabs(w) < smallest) smallest = fabs(w);
    }
    if (!(total > 0)) {
        snprintf(job->ctx.message, sizeof job->ctx.message,
                 "%s: column '%s': the weights sum to %g; the estimators need a positive total weight", a->paths[c],
                 a->weight_col[c], total);
        return PK_ERR_PARSE;
    }
    if (abs_total > PK_WEIGHT_MAX * (1 + 1e-9) || smallest < PK_WEIGHT_MIN) {
        snprintf(job->ctx.message, sizeof job->ctx.message,
                 "%s: column '%s': |weights| from %g, summing to %g: pair products would leave double "
                 "precision (nonzero weights need |w| >= %g and sum |w| <= %g); rescale the column (the "
                 "estimators do not change)",
                 a->paths[c], a->weight_col[c], smallest, abs_total, PK_WEIGHT_MIN, PK_WEIGHT_MAX);
        return PK_ERR_PARSE;
    }
    return PK_OK;
}

/* The bins and both catalogs (with their weights), then under mpirun the
 * ranks compare what they read (collective: every rank calls this, and
 * with more than one rank it makes one cli_mpi_all_ok and, when that
 * agrees, one cli_mpi_same_input a catalog until one differs). */
static pk_status read_angcorr_inputs(const angcorr_args *a, const pk_catalog_format read_as[2], angcorr_job *job) {
    pk_context *ctx = &job->ctx;
    const double to_rad = M_PI / 180.0;
    pk_status st;
    if (a->edges_path) st = pk_bins_read_edges(ctx, a->edges_path, &job->bins);
    else if (a->has_log)
        st = pk_bins_log(ctx, a->theta_min_deg * to_rad, a->log_max_deg * to_rad, a->n_bins, &job->bins);
    else st = pk_bins_linear(ctx, a->theta_min_deg * to_rad, a->width_deg * to_rad, a->n_bins, &job->bins);
    pk_catalog *cats[2] = {&job->data, &job->random};
    for (int c = 0; c < 2 && st == PK_OK; c++) {
        pk_catalog_spec spec = {a->format, a->units, a->ra_col[c], a->dec_col[c], a->weight_col[c], a->units_given};
        /* CSV and FITS catalogs are in degrees unless --units (or, in FITS, a
         * column's TUNITn) says otherwise */
        if (!a->units_given && read_as[c] != PK_FORMAT_NATIVE) spec.units = PK_UNITS_DEG;
        st = pk_catalog_read_spec(ctx, a->paths[c], &spec, cats[c], &job->weights[c]);
        if (st == PK_OK && job->weights[c]) st = check_angcorr_weights(a, job, c);
    }
    if (job->n_ranks > 1 && cli_mpi_all_ok(st == PK_OK)) {
        for (int c = 0; c < 2 && st == PK_OK; c++) {
            uint64_t h = cli_hash_bytes(CLI_HASH_START ^ cats[c]->n, cats[c]->ra, cats[c]->n * sizeof(double));
            h = cli_hash_bytes(h, cats[c]->dec, cats[c]->n * sizeof(double));
            if (job->weights[c]) h = cli_hash_bytes(h, job->weights[c], cats[c]->n * sizeof(double));
            st = cli_mpi_same_input(ctx, h, a->paths[c], "catalogs");
        }
    }
    job->run = (pk_angcorr_run_options){job->weights[0], job->weights[1], a->mean_theta, a->jackknife, a->prune};
    return st;
}

/* This rank's part of the pairs, from st (a failure so far, carried in).
 * With the features the ranks count together (collective: one
 * cli_mpi_all_ok, then, when every rank has its inputs, the library's
 * sum_parts); without, each counts alone and combine_ranks sums. */
static pk_status count_angcorr_pairs(const angcorr_args *a, angcorr_job *job, pk_status st) {
    pk_context *ctx = &job->ctx;
    int quiet = a->quiet || job->rank != 0;
    if (a->features) {
        /* RR per patch pair: read from --rr, or kept for --save-rr */
        pk_angcorr_rr_cells rr_in = {0};
        if (st == PK_OK && a->rr_path)
            st = pk_angcorr_read_rr_cells(ctx, a->rr_path, &job->random, &job->run, &job->bins, &rr_in);
        /* a rank that has not its inputs says why */
        if (cli_mpi_all_ok(st == PK_OK)) {
            cli_progress_attach(ctx, "angcorr", quiet);
            st = pk_angcorr_run_ex_part(ctx, &a->opts, job->rank, job->n_ranks, sum_parts, NULL, &job->data,
                                        &job->random, &job->bins, a->estimator, &job->run, a->rr_path ? &rr_in : NULL,
                                        a->save_rr_path ? &job->rr_cells : NULL, &job->result, &job->extras);
            cli_progress_done(ctx);
        }
        pk_angcorr_rr_cells_free(&rr_in);
    } else if (st == PK_OK) {
        uint64_t *rr = NULL;
        if (a->rr_path) {
            rr = malloc(job->bins.n_bins * sizeof(uint64_t));
            if (!rr) snprintf(ctx->message, sizeof ctx->message, "out of memory");
            st = rr ? pk_angcorr_read_rr(ctx, a->rr_path, &job->random, &job->bins, rr) : PK_ERR_NOMEM;
        }
        if (st == PK_OK) {
            cli_progress_attach(ctx, "angcorr", quiet);
            st = pk_angcorr_run_part_rr(ctx, &a->opts, job->rank, job->n_ranks, &job->data, &job->random, &job->bins,
                                        a->estimator, rr, &job->result);
            cli_progress_done(ctx);
        }
        free(rr);
    }
    return st;
}

static int counts_do_not_add_up(void) {
    fprintf(stderr, "pairkit angcorr: the ranks' pair counts do not add up to the whole\n");
    return 1;
}

/* With the features the library has summed the counts (sum_parts); the
 * times are the slowest rank's (collective: six cli_mpi_max), and the
 * summed pairs must be every pair. 0, or 1 after the error. */
static int check_library_sums(const angcorr_args *a, angcorr_job *job) {
    pk_angcorr_result *r = &job->result;
    pk_pair_stats *ps[3] = {&r->stats_dd, &r->stats_dr, &r->stats_rr};
    uint64_t want[3] = {(uint64_t)job->data.n * job->data.n, (uint64_t)job->data.n * job->random.n,
                        a->rr_path ? 0 : (uint64_t)job->random.n * job->random.n};
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        ps[k]->seconds = cli_mpi_max(ps[k]->seconds);
        ps[k]->kernel_ms = cli_mpi_max(ps[k]->kernel_ms);
        if (job->rank == 0 && ps[k]->pairs_total != want[k]) failed = 1;
    }
    return failed ? counts_do_not_add_up() : 0;
}

/* Without the features each rank counted its part alone: the counts and
 * pairs summed onto rank 0, exactly, the times the slowest rank's, and w
 * estimated there (collective: one cli_mpi_all_ok on the buffer, then,
 * when every rank has one, one cli_mpi_sum_u64 and six cli_mpi_max). 0,
 * or 1 after the error. */
static int sum_counts_over_ranks(const angcorr_args *a, angcorr_job *job) {
    pk_angcorr_result *r = &job->result;
    size_t nb = r->n_bins;
    uint64_t *sum = malloc((3 * nb + 12) * sizeof(uint64_t));
    int rc = 0;
    if (!sum) {
        snprintf(job->ctx.message, sizeof job->ctx.message, "out of memory");
        rc = cli_error("angcorr", PK_ERR_NOMEM, &job->ctx);
    }
    /* the sums below are collective: every rank has its buffer, or none sums */
    if (!cli_mpi_all_ok(sum != NULL)) {
        free(sum);
        return rc ? rc : 1; /* another rank failed and said why */
    }
    memcpy(sum, r->dd, nb * sizeof(uint64_t));
    memcpy(sum + nb, r->dr, nb * sizeof(uint64_t));
    memcpy(sum + 2 * nb, r->rr, nb * sizeof(uint64_t));
    pk_pair_stats *ps[3] = {&r->stats_dd, &r->stats_dr, &r->stats_rr};
    for (int k = 0; k < 3; k++) {
        uint64_t *q = sum + 3 * nb + 4 * (size_t)k;
        q[0] = ps[k]->pairs_total, q[1] = ps[k]->pairs_in_range, q[2] = ps[k]->pairs_visited, q[3] = ps[k]->pairs_fp64;
    }
    int failed = cli_mpi_sum_u64(sum, 3 * nb + 12);
    double seconds[3] = {cli_mpi_max(r->stats_dd.seconds), cli_mpi_max(r->stats_dr.seconds),
                         cli_mpi_max(r->stats_rr.seconds)};
    double kernel_ms[3] = {cli_mpi_max(r->stats_dd.kernel_ms), cli_mpi_max(r->stats_dr.kernel_ms),
                           cli_mpi_max(r->stats_rr.kernel_ms)};
    if (job->rank == 0 && !failed) {
        size_t n_data = job->data.n, n_random = job->random.n;
        memcpy(r->dd, sum, nb * sizeof(uint64_t));
        memcpy(r->dr, sum + nb, nb * sizeof(uint64_t));
        memcpy(r->rr, sum + 2 * nb, nb * sizeof(uint64_t));
        uint64_t want[3] = {(uint64_t)n_data * n_data, (uint64_t)n_data * n_random, (uint64_t)n_random * n_random};
        for (int k = 0; k < 3; k++) {
            const uint64_t *q = sum + 3 * nb + 4 * (size_t)k;
            ps[k]->pairs_total = q[0], ps[k]->pairs_in_range = q[1], ps[k]->pairs_visited = q[2];
            ps[k]->pairs_fp64 = q[3];
            ps[k]->seconds = seconds[k];
            ps[k]->kernel_ms = kernel_ms[k];
            if (ps[k]->pairs_total != (k == 2 && a->rr_path ? 0 : want[k])) failed = 1;
        }
        pk_estimate(a->estimator, n_data, n_random, nb, r->dd, r->dr, r->rr, r->omega);
    }
    free(sum);
    return failed ? counts_do_not_add_up() : 0;
}

/* This rank's outcome st said (by the rank that failed), then the ranks'
 * counts made one result on rank 0. Every rank calls this, with any st
 * (collective: one cli_mpi_all_ok, then under mpirun, when every rank
 * succeeded, check_library_sums or sum_counts_over_ranks). 0, or the exit
 * code. */
static int combine_ranks(const angcorr_args *a, angcorr_job *job, pk_status st) {
    int rc = st ? cli_error("angcorr", st, &job->ctx) : 0;
    if (!cli_mpi_all_ok(st == PK_OK)) return rc ? rc : 1; /* another rank failed and said why */
    if (job->n_ranks == 1) return 0;
    return a->features ? check_library_sums(a, job) : sum_counts_over_ranks(a, job);
}

/* The course format prints bin starts to 0.001 degree: say when that
 * cannot tell two bins apart and the CSV was not asked for. */
static void note_close_bins(const angcorr_args *a, const pk_bins *bins) {
    if (a->csv_path) return;
    for (size_t k = 1; k < bins->n_bins; k++) {
        char lo[32], hi[32];
        snprintf(lo, sizeof lo, "%6.3f", bins->edges[k - 1] * (180.0 / M_PI));
        snprintf(hi, sizeof hi, "%6.3f", bins->edges[k] * (180.0 / M_PI));
        if (strcmp(lo, hi) != 0) continue;
        fprintf(stderr,
                "pairkit angcorr: note: %s gives bin starts to 0.001 degree, which does not tell bins %zu and %zu "
                "apart (both %s); --csv FILE has every edge in full\n",
                a->out_path, k - 1, k, lo + strspn(lo, " "));
        break;
    }
}

/* w(theta) against theta (the bins' centres, or the mean separations of
 * DD), with the jackknife errors, drawn to staged, named shown: 0, or 1
 * after the error. */
static int plot_angcorr(const angcorr_args *a, const angcorr_job *job, const char *staged, const char *shown) {
    const pk_angcorr_result *r = &job->result;
    const pk_angcorr_extras *ex = &job->extras;
    const pk_bins *bins = &job->bins;
    double *theta = malloc(r->n_bins * sizeof(double));
    double *w = malloc(r->n_bins * sizeof(double));
    double *werr = ex->omega_err ? malloc(r->n_bins * sizeof(double)) : NULL;
    size_t n = 0;
    for (size_t k = 0; k < r->n_bins; k++) {
        if (r->rr[k] == 0 || !isfinite(r->omega[k])) continue;
        double lo = bins->edges[k], hi = bins->edges[k + 1];
        theta[n] = (a->has_log ? sqrt(lo * hi) : 0.5 * (lo + hi)) * (180.0 / M_PI);
        if (ex->theta_mean_dd && isfinite(ex->theta_mean_dd[k])) theta[n] = ex->theta_mean_dd[k] * (180.0 / M_PI);
        w[n] = r->omega[k];
        if (werr) werr[n] = ex->omega_err[k];
        n++;
    }
    char title[128];
    snprintf(title, sizeof title, "w(#gh) %s, %zu x %zu objects", estimator_title(a->estimator), (size_t)r->n_data,
             (size_t)r->n_random);
    int log_x, log_y;
    cli_wtheta_axes(a->has_log, a->edges_path != NULL, bins->edges, bins->n_bins, w, n, &log_x, &log_y);
    /* with no w to draw, the axis spans the bins */
    double theta_lo = bins->edges[0] * (180.0 / M_PI), theta_hi = bins->edges[bins->n_bins] * (180.0 / M_PI);
    cli_plot plot = {title, "#gh (degrees)", "w(#gh)", theta, w, werr, n, log_x, log_y, theta_lo, theta_hi};
    int rc = cli_plot_png("angcorr", staged, shown, &plot) ? 1 : 0;
    free(theta);
    free(w);
    free(werr);
    return rc;
}

/* Rank 0's outputs, all of them written under staged names and moved into
 * place together, or none: 0, or the exit code after the error. */
static int write_angcorr_outputs(const angcorr_args *a, angcorr_job *job) {
    const char *cmd = "angcorr";
    pk_context *ctx = &job->ctx;
    const pk_angcorr_result *r = &job->result;
    const pk_angcorr_extras *ex = &job->extras;
    int has_cov = ex->omega_cov != NULL;
    note_close_bins(a, &job->bins);
    cli_outputs outs = {0};
    const char *s_out = cli_stage(cmd, &outs, a->out_path);
    const char *s_csv = s_out && a->csv_path ? cli_stage(cmd, &outs, a->csv_path) : NULL;
    const char *s_cov = s_out && (!a->csv_path || s_csv) && has_cov ? cli_stage(cmd, &outs, a->cov_path) : NULL;
    const char *s_png = s_out && (!a->csv_path || s_csv) && (!has_cov || s_cov) && a->want_png
                            ? cli_stage(cmd, &outs, a->png_path)
                            : NULL;
    const char *s_rr =
        s_out && (!a->csv_path || s_csv) && (!has_cov || s_cov) && (!a->want_png || s_png) && a->save_rr_path
            ? cli_stage(cmd, &outs, a->save_rr_path)
            : NULL;
    int rc = 0;
    pk_status st;
    if (!s_out || (a->csv_path && !s_csv) || (has_cov && !s_cov) || (a->want_png && !s_png) ||
        (a->save_rr_path && !s_rr))
        rc = 1;
    if (!rc && (st = pk_angcorr_write_omega(ctx, s_out, r, &job->bins)) != PK_OK)
        rc = cli_output_error(cmd, st, ctx, &outs);
    if (!rc && a->csv_path) { /* ECSV by the name: the file written now is the staged one */
        size_t n = strlen(a->csv_path);
        const pk_angcorr_extras *with = a->features ? ex : NULL;
        st = n >= 5 && strcasecmp(a->csv_path + n - 5, ".ecsv") == 0
                 ? pk_angcorr_write_ecsv(ctx, s_csv, r, with, &job->bins)
                 : pk_angcorr_write_csv_ex(ctx, s_csv, r, with, &job->bins);
        if (st != PK_OK) rc = cli_output_error(cmd, st, ctx, &outs);
    }
    if (!rc && has_cov && (st = pk_angcorr_write_covariance(ctx, s_cov, ex, &job->bins)) != PK_OK)
        rc = cli_output_error(cmd, st, ctx, &outs);
    if (!rc && a->save_rr_path &&
        (st = a->features ? pk_angcorr_write_rr_cells(ctx, s_rr, &job->random, &job->run, &job->bins, &job->rr_cells)
                          : pk_angcorr_write_rr(ctx, s_rr, &job->random, &job->bins, r->rr)) != PK_OK)
        rc = cli_output_error(cmd, st, ctx, &outs);
    if (!rc && a->want_png) rc = plot_angcorr(a, job, s_png, a->png_path);
    if (!rc) rc = cli_commit(cmd, &outs);
    else cli_discard(&outs);
    return rc;
}

/* A valid run with something missing, said rather than left to be found
 * in the outputs: no bin with random pairs (an output with no rows), or
 * bins with a w(theta) but no jackknife error. */
static void warn_angcorr_results(const angcorr_args *a, const angcorr_job *job) {
    const pk_angcorr_result *r = &job->result;
    const double *edges = job->bins.edges;
    size_t with_rr = 0;
    for (size_t k = 0; k < r->n_bins; k++) with_rr += r->rr[k] > 0;
    if (with_rr == 0)
        fprintf(stderr,
                "pairkit angcorr: warning: no bin has random pairs in range (RR is 0 in all %zu bins, %g to %g "
                "degrees): %s has no rows and w(theta) is nowhere defined\n",
                r->n_bins, edges[0] * (180.0 / M_PI), edges[job->bins.n_bins] * (180.0 / M_PI), a->out_path);
    if (!job->extras.omega_err) return;
    /* no error: some patch left out takes every random pair of the bin,
     * or its DD or DR */
    size_t with_w = 0, no_err = 0;
    for (size_t k = 0; k < r->n_bins; k++) {
        if (r->rr[k] == 0 || !isfinite(r->omega[k])) continue;
        with_w++;
        no_err += !isfinite(job->extras.omega_err[k]);
    }
    if (no_err)
        fprintf(stderr,
                "pairkit angcorr: warning: %zu of the %zu bins with a w(theta) have no jackknife error (nan): "
                "leaving out one of the %d patches leaves a count of zero there (too few objects for that "
                "many patches?)\n",
                no_err, with_w, a->jackknife);
}

/* The counts' pairs and times, the kernel and the files written. */
static void print_angcorr_summary(const angcorr_args *a, const angcorr_job *job) {
    const pk_angcorr_result *r = &job->result;
    const pk_pair_stats *s[3] = {&r->stats_dd, &r->stats_dr, &r->stats_rr};
    const char *names[3] = {"DD", "DR", "RR"};
    double total_s = 0, visited = 0, fp64 = 0, device_ms = 0;
    for (int k = 0; k < 3; k++) {
        if (k == 2 && a->rr_path) {
            fprintf(stderr, "RR: from %s, not counted\n", a->rr_path);
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
    if (job->n_ranks > 1)
        fprintf(stderr, "%d ranks: %.3f s of rank 0 in MPI collectives (reductions and waiting for the others)\n",
                job->n_ranks, cli_mpi_comm_seconds());
    if (device_ms > 0)
        fprintf(stderr, "device kernel time %.3f ms (DD + DR%s%s)\n", device_ms, a->rr_path ? "" : " + RR",
                job->n_ranks > 1 ? ", the slowest rank of each" : "");
    int has_cov = job->extras.omega_cov != NULL;
    fprintf(stderr, "kernel %s: %.3f s, %.3g separations/s, %.4f%% settled in float64; wrote %s%s%s%s%s%s%s%s%s\n",
            pk_angcorr_kernel_name(r->stats_dd.kernel), total_s, visited / total_s, 100.0 * fp64 / visited, a->out_path,
            a->csv_path ? ", " : "", a->csv_path ? a->csv_path : "", a->want_png ? ", " : "",
            a->want_png ? a->png_path : "", has_cov ? ", " : "", has_cov ? a->cov_path : "",
            a->save_rr_path ? ", " : "", a->save_rr_path ? a->save_rr_path : "");
}

/* Under mpirun every rank counts its part of the pairs (on GPU rank modulo
 * the devices, within each node, when CUDA runs), the counts are summed
 * exactly on rank 0, which alone writes the outputs. Every rank makes the
 * same collective calls in the same order: each step below that makes
 * some takes the status so far rather than being skipped, and a rank
 * returns early only where every rank does. */
int cmd_angcorr(int argc, char **argv) {
    angcorr_args args;
    angcorr_job job;
    memset(&job, 0, sizeof job);
    pk_context_init(&job.ctx);
    int rc = parse_angcorr_args(argc, argv, &args, &job.ctx);
    if (rc != ANGCORR_CONTINUE) return rc;
    job.rank = cli_mpi_rank(), job.n_ranks = cli_mpi_size();
    job.ctx.cuda_device = cli_mpi_cuda_device();
    cli_note_cpu_fallback("angcorr", &job.ctx, args.opts.backend, args.opts.kernel == PK_ANGCORR_KERNEL_BEST,
                          args.quiet);
    pk_catalog_format read_as[2];
    if ((rc = validate_angcorr_args(&args)) != 0 || (rc = check_angcorr_outputs(&args, job.rank)) != 0 ||
        (rc = choose_angcorr_columns(&args, read_as)) != 0)
        return rc;

    pk_status st = read_angcorr_inputs(&args, read_as, &job);
    st = count_angcorr_pairs(&args, &job, st);
    rc = combine_ranks(&args, &job, st);
    if (rc == 0 && job.rank == 0) {
        rc = write_angcorr_outputs(&args, &job);
        if (!rc) warn_angcorr_results(&args, &job);
        if (!rc && !args.quiet) print_angcorr_summary(&args, &job);
    }
    angcorr_job_free(&job);
    return rc;
}
