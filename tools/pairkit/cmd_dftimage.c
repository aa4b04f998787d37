/* cmd_dftimage.c - `pairkit dftimage VIS -o image.fits`: the exact dirty
 * image of a .npz or UVFITS visibility file as FITS with a WCS header, a
 * PNG preview, and on request its error against the float64 reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "mpi.h"
#include "pairkit/dftimage.h"
#include "plot_image.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: pairkit dftimage VIS -o IMAGE.fits [options]\n"
            "  Exact direct Fourier (dirty) image of visibilities, w term included.\n"
            "  VIS: .npz with u, v, w, data (sign +1) or UVFITS (sign -1).\n\n"
            "  -o, --output FILE    FITS image (default image.fits); east left, north up\n"
            "  --png FILE           PNG preview (colour map, origin lower left, east left;\n"
            "                       default: the image's name with .png; none, any case:\n"
            "                       no PNG)\n"
            "  --size N             pixels a side (default 700)\n"
            "  --cell RAD           cell size in radians (default 0.0005)\n"
            "  --backend B          auto (default), cpu or cuda\n"
            "  --precision P        single (default) or double\n"
            "  --kernel K           a specific kernel (see 'pairkit bench dftimage --list')\n"
            "  --sign S             +1 or -1: overrides the format's sign convention\n"
            "  --weights W          UVFITS weights: data (default; <= 0 flagged), abs, unit\n"
            "  --minuv-l L          leave out baselines shorter than L wavelengths (1 leaves\n"
            "                       out the autocorrelations)\n"
            "  --maxuv-l L          leave out baselines longer than L wavelengths\n"
            "  --weighting M        imaging weights: natural (default), uniform or briggs\n"
            "  --robust R           Briggs robustness (with --weighting briggs; default 0)\n"
            "  --psf FILE           also the point spread function (dirty beam) as FITS, 1 at\n"
            "                       the phase centre, and its PNG (FILE's name with .png);\n"
            "                       its fitted Gaussian goes into both headers (BMAJ, BMIN, BPA)\n"
            "  --normalise          divide the image by the sum of the weights: their weighted\n"
            "                       mean, Jy/beam for data in Jy (BUNIT from the data's unit)\n"
            "  --imag               also compute and write the imaginary part (extension IMAG)\n"
            "  --check              report the relative L2 error against the float64 reference\n"
            "                       (on a subset of pixels when the job is large)\n"
            "  --check-pixels N     pixels in that subset (default 4096; 0: every pixel)\n"
            "  --threads N          CPU threads (default: all)\n"
            "  --gpu-memory GIB     GPU memory the run may take (default: what is free, less\n"
            "                       64 MiB); an image that does not fit is made in bands\n"
            "                       of rows\n"
            "  -q, --quiet          no progress line, no summary\n");
}

/* A readable unit for an angle extent in radians. */
static void angle_unit(double extent_rad, const char **name, double *per_rad) {
    double deg = extent_rad * 180.0 / M_PI;
    if (deg >= 2.0) *name = "deg", *per_rad = 180.0 / M_PI;
    else if (deg * 60 >= 2.0) *name = "arcmin", *per_rad = 10800.0 / M_PI;
    else if (deg * 3600 >= 2.0) *name = "arcsec", *per_rad = 648000.0 / M_PI;
    else if (deg * 3.6e6 >= 2.0) *name = "mas", *per_rad = 648000.0e3 / M_PI;
    else *name = "#gmas", *per_rad = 648000.0e6 / M_PI;
}

/* The options that take a value. */
static const char *const value_options[] = {
    "-o",       "--output",  "--png",     "--size",         "--cell",    "--backend",   "--precision",
    "--kernel", "--sign",    "--weights", "--check-pixels", "--threads", "--weighting", "--robust",
    "--psf",    "--minuv-l", "--maxuv-l", "--gpu-memory",   NULL};

/* The options that take none. */
static const char *const flag_options[] = {"-h",          "--help",      "-q",      "--quiet", "--imag",
                                           "--normalise", "--normalize", "--check", NULL};

/* parse_dftimage_args' answer when the command goes on (else an exit code). */
#define DFTIMAGE_CONTINUE (-1)

/* The command line, as parse_dftimage_args leaves it;
 * check_dftimage_outputs adds the PNGs' names. */
typedef struct dftimage_args {
    const char *vis_path, *out_path, *png_path, *psf_path;
    const char *psf_png; /* the beam's PNG: the --psf name with .png, or NULL */
    size_t size, check_pixels;
    int check_pixels_given;
    double cell;
    int quiet, do_check, normalise;
    pk_weights weights;
    int weights_given;
    const char *precision_given;
    pk_weighting weighting;
    double robust;
    int robust_given;
    double minuv, maxuv; /* the baselines kept, in wavelengths */
    pk_dftimage_options opts;
    int want_png;
    char png_buf[4200], psf_png_buf[4200];
} dftimage_args;

/* One run's state on one rank, freed by dftimage_job_free. */
typedef struct dftimage_job {
    pk_context ctx;
    int rank, n_ranks;
    int rc_usage; /* a usage error found in what was read (exit code 2), else 0 */
    pk_vis vis;
    size_t uv_dropped;     /* visibilities outside --minuv-l .. --maxuv-l */
    size_t n_zero_spacing; /* of those kept, the autocorrelations */
    pk_image image, psf;
    pk_dftimage_stats stats, psf_stats;
    char beam_text[160]; /* the fitted beam, for the summary */
    double rel_l2;       /* --check's answer, and the pixels it compared */
    size_t compared;
} dftimage_job;

static void dftimage_job_free(dftimage_job *job) {
    pk_image_free(&job->image);
    pk_image_free(&job->psf);
    pk_vis_free(&job->vis);
}

/* One option o that takes the value v: 0, or 2 after a usage error. */
static int parse_dftimage_option(dftimage_args *a, pk_context *ctx, const char *o, const char *v) {
    const char *cmd = "dftimage";
    if (strcmp(o, "-o") == 0 || strcmp(o, "--output") == 0) a->out_path = v;
    else if (strcmp(o, "--png") == 0) a->png_path = v;
    else if (strcmp(o, "--size") == 0) {
        if (cli_parse_size(cmd, o, v, &a->size)) return 2;
        if (a->size == 0) return cli_usage_error(cmd, "--size must be at least 1");
    } else if (strcmp(o, "--cell") == 0) {
        if (cli_parse_double(cmd, o, v, &a->cell)) return 2;
        if (!(a->cell > 0)) return cli_usage_error(cmd, "--cell must be > 0, got '%s'", v);
    } else if (strcmp(o, "--backend") == 0) {
        if (pk_backend_parse(v, &a->opts.backend))
            return cli_usage_error(cmd, "--backend: '%s' is not auto, cpu or cuda", v);
    } else if (strcmp(o, "--precision") == 0) {
        a->precision_given = v;
        if (strcmp(v, "single") == 0) a->opts.precision = PK_PRECISION_SINGLE;
        else if (strcmp(v, "double") == 0) a->opts.precision = PK_PRECISION_DOUBLE;
        else return cli_usage_error(cmd, "--precision: '%s' is not single or double", v);
    } else if (strcmp(o, "--kernel") == 0) {
        a->opts.kernel = pk_dftimage_kernel_from_name(v);
        if (a->opts.kernel < 0) return cli_unknown_kernel(cmd, "--kernel", v);
    } else if (strcmp(o, "--sign") == 0) {
        double sign_value = 0;
        if (cli_parse_double(cmd, o, v, &sign_value)) return 2;
        if (sign_value != 1 && sign_value != -1) return cli_usage_error(cmd, "--sign must be +1 or -1, got '%s'", v);
        a->opts.sign = (int)sign_value;
    } else if (strcmp(o, "--weights") == 0) {
        a->weights_given = 1;
        if (pk_weights_parse(v, &a->weights))
            return cli_usage_error(cmd, "--weights: '%s' is not data, abs or unit", v);
    } else if (strcmp(o, "--weighting") == 0) {
        if (pk_weighting_parse(v, &a->weighting))
            return cli_usage_error(cmd, "--weighting: '%s' is not natural, uniform or briggs", v);
    } else if (strcmp(o, "--robust") == 0) {
        if (cli_parse_double(cmd, o, v, &a->robust)) return 2;
        if (!(a->robust >= -5 && a->robust <= 5))
            return cli_usage_error(cmd,
                                   "--robust must lie in [-5, 5] (-2: near uniform, 2: near natural), "
                                   "got '%s'",
                                   v);
        a->robust_given = 1;
    } else if (strcmp(o, "--psf") == 0) {
        a->psf_path = v;
    } else if (strcmp(o, "--minuv-l") == 0 || strcmp(o, "--maxuv-l") == 0) {
        double l;
        if (cli_parse_double(cmd, o, v, &l)) return 2;
        if (!(l >= 0)) return cli_usage_error(cmd, "%s must be a length >= 0, got '%s'", o, v);
        if (o[2] == 'm' && o[3] == 'i') a->minuv = l;
        else a->maxuv = l;
    } else if (strcmp(o, "--check-pixels") == 0) {
        if (cli_parse_size(cmd, o, v, &a->check_pixels)) return 2;
        a->check_pixels_given = 1;
    } else if (strcmp(o, "--gpu-memory") == 0) {
        double gib;
        if (cli_parse_double(cmd, o, v, &gib)) return 2;
        if (!(gib > 0) || gib > 1e6)
            return cli_usage_error(cmd, "--gpu-memory must be a number of GiB > 0 and at most 1e6, got '%s'", v);
        a->opts.gpu_memory = (size_t)(gib * 1073741824.0);
        if (a->opts.gpu_memory == 0) a->opts.gpu_memory = 1;
    } else if (strcmp(o, "--threads") == 0) {
        if (cli_parse_threads(cmd, o, v, &ctx->n_threads)) return 2;
    } else {
        return cli_usage_error(cmd, "unknown option '%s'", o);
    }
    return 0;
}

/* The command line into a (and --threads into ctx): DFTIMAGE_CONTINUE, or
 * the exit code: 0 after --help, 2 after a usage error. */
static int parse_dftimage_args(int argc, char **argv, dftimage_args *a, pk_context *ctx) {
    const char *cmd = "dftimage";
    memset(a, 0, sizeof *a);
    a->out_path = "image.fits";
    a->size = 700;
    a->check_pixels = 4096;
    a->cell = 0.0005;
    a->weights = PK_WEIGHTS_DATA;
    a->weighting = PK_WEIGHTING_NATURAL;
    a->maxuv = (double)INFINITY;
    a->opts = (pk_dftimage_options){PK_BACKEND_AUTO, PK_DFTIMAGE_KERNEL_BEST, PK_PRECISION_SINGLE, 0, 0, 0};
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *o = argv[k];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(o, "-q") == 0 || strcmp(o, "--quiet") == 0) {
            a->quiet = 1;
        } else if (strcmp(o, "--imag") == 0) {
            a->opts.want_imag = 1;
        } else if (strcmp(o, "--normalise") == 0 || strcmp(o, "--normalize") == 0) {
            a->normalise = 1;
        } else if (strcmp(o, "--check") == 0) {
            a->do_check = 1;
        } else if (o[0] == '-' && o[1] != '\0') {
            if (k + 1 >= argc) return cli_missing_value(cmd, o, value_options);
            int rc = parse_dftimage_option(a, ctx, o, argv[++k]);
            if (rc) return rc;
        } else {
            if (a->vis_path) return cli_usage_error(cmd, "expected one visibility file, got a second: '%s'", o);
            a->vis_path = o;
        }
    }
    if (!a->vis_path) return cli_usage_error(cmd, "expected a visibility file (.npz or UVFITS)");
    return DFTIMAGE_CONTINUE;
}

/* Options that exclude or need each other, and the FITS names: 0, or 2
 * after a usage error. */
static int validate_dftimage_args(const dftimage_args *a) {
    const char *cmd = "dftimage";
    if (a->maxuv < a->minuv)
        return cli_usage_error(cmd, "--maxuv-l %g is shorter than --minuv-l %g: no baseline is left", a->maxuv,
                               a->minuv);
    if (a->robust_given && a->weighting != PK_WEIGHTING_BRIGGS)
        return cli_usage_error(cmd, "--robust is the robustness of --weighting briggs; add that (or drop --robust)");
    if (a->check_pixels_given && !a->do_check)
        return cli_usage_error(cmd, "--check-pixels sets how many pixels --check compares; add --check");
    const char *fits_names[2] = {a->out_path, a->psf_path};
    for (int f = 0; f < 2; f++) {
        size_t len = fits_names[f] ? strlen(fits_names[f]) : 0;
        if (len >= 3 && strcasecmp(fits_names[f] + len - 3, ".gz") == 0)
            return cli_usage_error(cmd,
                                   "%s %s: the image is written as plain FITS; give a name without .gz (and gzip "
                                   "the file afterwards if it should be compressed)",
                                   f ? "--psf" : "-o", fits_names[f]);
    }
    return 0;
}

/* The outputs' final names, the default PNG's included, checked before the
 * work; no output may replace the visibility file. 0, or the exit code on
 * every rank alike (collective: one cli_mpi_all_ok). */
static int check_dftimage_outputs(dftimage_args *a) {
    const char *cmd = "dftimage";
    cli_input(a->vis_path);
    const char *png_default = NULL;
    a->want_png = cli_want_png(cmd, a->png_path, cli_mpi_rank() == 0); /* the same on every rank */
    if (a->want_png && !a->png_path)
        a->png_path = png_default = cli_sibling_into(a->out_path, ".png", a->png_buf, sizeof a->png_buf);
    if (!a->want_png) a->png_path = NULL;
    /* the beam's PNG goes with the image's: left out by --png none, or where PLplot cannot draw the default one */
    a->psf_png = a->psf_path && a->want_png
                     ? cli_sibling_into(a->psf_path, ".png", a->psf_png_buf, sizeof a->psf_png_buf)
                     : NULL;
    const cli_named outputs[] = {
        {a->out_path, "-o (the FITS image, default image.fits)"},
        {a->png_path, png_default
                          ? "the PNG preview (by default the -o name with .png; --png names it, --png none leaves it "
                            "out)"
                          : "--png"},
        {a->psf_path, "--psf"},
        {a->psf_png, "the beam's PNG (the --psf name with .png; --png none leaves it out)"},
    };
    int names_bad = cli_check_names(cmd, outputs, 4);
    if (!cli_mpi_all_ok(!names_bad)) return names_bad == 3 ? 1 : 2; /* every rank stops, or none */
    return 0;
}

/* --kernel and --precision, when both given, must agree: 0, or 2 after a
 * usage error (the same on every rank). */
static int check_kernel_precision(const dftimage_args *a) {
    const pk_dftimage_options *o = &a->opts;
    if (a->precision_given && o->kernel && pk_dftimage_kernel_precision(o->kernel) != o->precision)
        return cli_usage_error(
            "dftimage", "--kernel %s computes in %s precision, --precision says %s: give one of the two",
            pk_dftimage_kernel_name(o->kernel),
            pk_dftimage_kernel_precision(o->kernel) == PK_PRECISION_DOUBLE ? "double" : "single", a->precision_given);
    return 0;
}

/* ctx's message as "VIS: message". */
static void name_the_file(pk_context *ctx, const char *vis_path) {
    char rest[PK_MESSAGE_MAX];
    snprintf(rest, sizeof rest, "%s", ctx->message);
    snprintf(ctx->message, sizeof ctx->message, "%.200s: %.300s", vis_path, rest);
}

/* The visibilities, once the grid is known to fit this node (before
 * reading anything), then the baselines asked for and imaging weights from
 * every one of them, before any share is taken. A failure is a status
 * carried on, and under mpirun the ranks compare what they read
 * (collective: every rank calls this, and with more than one rank it makes
 * one cli_mpi_all_ok and, when that agrees, one cli_mpi_same_input). */
static pk_status read_visibilities(const dftimage_args *a, dftimage_job *job) {
    pk_context *ctx = &job->ctx;
    pk_vis *vis = &job->vis;
    /* by each node's memory: a status carried to the collectives, as a failed read is */
    pk_status st = pk_dftimage_check_grid(ctx, a->size, a->cell, a->opts.want_imag);
    if (st == PK_OK)
        cli_note_cpu_fallback("dftimage", ctx, a->opts.backend, a->opts.kernel == PK_DFTIMAGE_KERNEL_BEST, a->quiet);
    if (st == PK_OK) st = pk_vis_read(ctx, a->vis_path, a->weights, vis);
    /* a .npz has no weights to choose from: a usage error, carried as a
     * status to the collectives (a rank that returned here would leave one
     * whose read failed waiting in them) */
    if (st == PK_OK && a->weights_given && vis->sign > 0) {
        job->rc_usage = cli_usage_error(
            "dftimage", "--weights: %s is a .npz, which has no weights (the option is for UVFITS)", a->vis_path);
        st = PK_ERR_INVALID;
    }
    if (job->n_ranks > 1 && cli_mpi_all_ok(st == PK_OK)) {
        uint64_t h = CLI_HASH_START ^ vis->n;
        const double *arrays[6] = {vis->u, vis->v, vis->w, vis->re, vis->im, vis->weight};
        for (int k = 0; k < 6; k++)
            if (arrays[k]) h = cli_hash_bytes(h, arrays[k], vis->n * sizeof(double));
        st = cli_mpi_same_input(ctx, h, a->vis_path, "visibilities");
    }
    if (st == PK_OK && (a->minuv > 0 || isfinite(a->maxuv))) {
        st = pk_vis_select_uv(ctx, vis, a->minuv, a->maxuv, &job->uv_dropped);
        if (st) name_the_file(ctx, a->vis_path);
    }
    /* zero spacings (autocorrelations) add a constant to every pixel: said
     * with the summary, as imagers usually leave them out */
    if (st == PK_OK)
        for (size_t k = 0; k < vis->n; k++) job->n_zero_spacing += vis->u[k] == 0 && vis->v[k] == 0;
    if (st == PK_OK && a->weighting != PK_WEIGHTING_NATURAL) {
        st = pk_vis_weighting(ctx, vis, a->weighting, a->robust, a->size, a->cell);
        if (st) name_the_file(ctx, a->vis_path);
    }
    return st;
}

/* This rank's share of the visibilities imaged (and its beam, with --psf),
 * from st (a failure so far, carried in; no collective calls). */
static pk_status image_my_share(const dftimage_args *a, dftimage_job *job, pk_status st) {
    if (st != PK_OK) return st;
    pk_context *ctx = &job->ctx;
    pk_dftimage_options opts = a->opts;
    pk_vis part = job->vis;
    size_t v0 = 0; /* the first visibility of this rank's share */
    if (job->n_ranks > 1) {
        size_t v1 = job->vis.n * (size_t)(job->rank + 1) / (size_t)job->n_ranks;
        v0 = job->vis.n * (size_t)job->rank / (size_t)job->n_ranks;
        part.u += v0, part.v += v0, part.w += v0, part.re += v0, part.im += v0;
        if (part.weight) part.weight += v0; /* weight_sum stays the whole set's: the beams' shares add up */
        part.n = v1 - v0;
        if (opts.sign == 0) opts.sign = job->vis.sign;
    }
    /* fewer visibilities than ranks: an empty share images one visibility
     * of value 0 and weight 0, which adds 0 to every pixel of the image and
     * of the beam */
    static double zero_u = 0, zero_v = 0, zero_w = 0, zero_re = 0, zero_im = 0, zero_weight = 0;
    if (part.n == 0) {
        part.u = &zero_u, part.v = &zero_v, part.w = &zero_w, part.re = &zero_re, part.im = &zero_im;
        part.weight = &zero_weight;
        part.n = 1;
    }
    int quiet = a->quiet || job->rank != 0;
    cli_progress_attach(ctx, "dftimage", quiet);
    st = pk_dftimage_run(ctx, &opts, &part, a->size, a->cell, &job->image, &job->stats);
    cli_progress_done(ctx);
    if (st == PK_OK && a->psf_path) {
        cli_progress_attach(ctx, "dftimage psf", quiet);
        st = pk_dftimage_psf(ctx, &opts, &part, a->size, a->cell, &job->psf, &job->psf_stats);
        cli_progress_done(ctx);
    }
    size_t k_local;
    int used = 0;
    if (st && sscanf(ctx->message, "visibility %zu%n", &k_local, &used) == 1 && used > 0) {
        /* the library knows the visibility in the share, the command the
         * file and where the share starts in it */
        char rest[PK_MESSAGE_MAX];
        snprintf(rest, sizeof rest, "%s", ctx->message + used);
        snprintf(ctx->message, sizeof ctx->message, "%.200s: visibility %zu%.280s", a->vis_path, v0 + k_local, rest);
    }
    return st;
}

/* This rank's outcome st said (by the rank that failed), then under mpirun
 * the partial images and beams summed onto rank 0, the times the slowest
 * rank's. Every rank calls this, with any st (collective: one
 * cli_mpi_all_ok; then, when a rank failed, one cli_mpi_max of the exit
 * code, else cli_mpi_sum_double of the image, its imaginary part and the
 * beam, those there are, and four cli_mpi_max). 0, or the exit code. */
static int sum_images_over_ranks(const dftimage_args *a, dftimage_job *job, pk_status st) {
    const char *cmd = "dftimage";
    int rc_mine = job->rc_usage ? job->rc_usage : st ? cli_error(cmd, st, &job->ctx) : 0;
    if (!cli_mpi_all_ok(st == PK_OK)) /* one exit code for the job: the failing rank's (the highest) */
        return job->n_ranks > 1 ? (int)cli_mpi_max((double)rc_mine) : rc_mine;
    if (job->n_ranks == 1) return 0;
    size_t pixels = a->size * a->size;
    int failed = cli_mpi_sum_double(job->image.re, pixels);
    if (job->image.im) failed |= cli_mpi_sum_double(job->image.im, pixels);
    if (job->psf.re) failed |= cli_mpi_sum_double(job->psf.re, pixels);
    pk_dftimage_stats *stats = &job->stats, *psf_stats = &job->psf_stats;
    stats->seconds = cli_mpi_max(stats->seconds);
    stats->kernel_ms = cli_mpi_max(stats->kernel_ms);
    psf_stats->seconds = cli_mpi_max(psf_stats->seconds);
    psf_stats->kernel_ms = cli_mpi_max(psf_stats->kernel_ms);
    stats->terms = (double)job->vis.n * (double)a->size * (double)a->size;
    if (failed) fprintf(stderr, "pairkit %s: summing the ranks' images failed\n", cmd);
    return failed;
}

/* The beam's Gaussian, into both headers and the summary's words; a lobe
 * the field or the cells cannot hold is a warning, not a failure. */
static void fit_beam(const dftimage_args *a, dftimage_job *job) {
    if (!job->psf.re) return;
    pk_image *image = &job->image, *psf = &job->psf;
    double bmaj, bmin, bpa;
    if (pk_dftimage_beam_fit(&job->ctx, psf, &bmaj, &bmin, &bpa) == PK_OK) {
        psf->bmaj = image->bmaj = bmaj, psf->bmin = image->bmin = bmin, psf->bpa = image->bpa = bpa;
        const char *unit = "deg";
        double per_rad = 180.0 / M_PI;
        static const struct {
            const char *name;
            double per_rad;
        } units[] = {{"arcmin", 10800.0 / M_PI},
                     {"arcsec", 648000.0 / M_PI},
                     {"mas", 648000.0e3 / M_PI},
                     {"uas", 648000.0e6 / M_PI}};
        for (int u = 0; u < 4 && bmaj * per_rad < 1.0; u++) unit = units[u].name, per_rad = units[u].per_rad;
        snprintf(job->beam_text, sizeof job->beam_text, "; fitted beam %.4g x %.4g %s, PA %.1f deg", bmaj * per_rad,
                 bmin * per_rad, unit, bpa);
    } else if (!a->quiet) {
        fprintf(stderr, "pairkit dftimage: warning: %s\n", job->ctx.message);
    }
    job->ctx.message[0] = '\0';
}

/* --check against the float64 reference (on the sums themselves), then
 * --normalise: 0, or the exit code after the error. */
static int check_and_normalise(const dftimage_args *a, dftimage_job *job) {
    pk_context *ctx = &job->ctx;
    pk_image *image = &job->image;
    size_t pixels = a->size * a->size;
    pk_status st = PK_OK;
    job->rel_l2 = (double)NAN;
    cli_progress_attach(ctx, "dftimage check", a->quiet);
    if (a->do_check) {
        size_t max_pix = (double)job->vis.n * (double)pixels > 2e9 ? a->check_pixels : 0;
        st = pk_dftimage_check(ctx, &job->vis, image, max_pix, &job->rel_l2, &job->compared);
    }
    cli_progress_done(ctx);
    if (st) return cli_error("dftimage", st, ctx);
    if (a->normalise) {
        double scale = 1.0 / job->vis.weight_sum;
        for (size_t p = 0; p < pixels; p++) {
            image->re[p] *= scale;
            if (image->im) image->im[p] *= scale;
        }
        image->normalised = 1;
    }
    return 0;
}

/* The image's PNG (which 0) or the beam's (which 1) drawn to staged: 0,
 * or 1 after the error. */
static int draw_dftimage_png(const dftimage_args *a, const dftimage_job *job, int which, const char *staged) {
    const pk_vis *vis = &job->vis;
    const pk_image *im = which ? &job->psf : &job->image;
    char weighting_text[48] = "";
    if (vis->weighting == PK_WEIGHTING_BRIGGS)
        snprintf(weighting_text, sizeof weighting_text, ", briggs %g", a->robust);
    else if (vis->weighting == PK_WEIGHTING_UNIFORM) snprintf(weighting_text, sizeof weighting_text, ", uniform");
    double extent = (double)a->size * a->cell;
    const char *unit;
    double per_rad;
    angle_unit(extent, &unit, &per_rad);
    char title[200], xlabel[64], ylabel[64];
    const char *what = which ? "dirty beam" : "dirty image";
    char what_buf[64];
    if (!which && job->image.normalised) { /* the colour bar's unit, as BUNIT has it */
        if (strcasecmp(vis->bunit, "JY") == 0) what = "dirty image [Jy/beam]";
        else if (vis->bunit[0])
            snprintf(what_buf, sizeof what_buf, "dirty image [%s/beam]", vis->bunit), what = what_buf;
        else what = "dirty image / WEIGHTS";
    }
    snprintf(title, sizeof title, "%s%s%s, %zu visibilit%s, s = %+d%s", vis->object, vis->object[0] ? ": " : "", what,
             vis->n, vis->n == 1 ? "y" : "ies", im->sign, weighting_text);
    snprintf(xlabel, sizeof xlabel, "l (east) [%s]", unit);
    snprintf(ylabel, sizeof ylabel, "m (north) [%s]", unit);
    double c = (double)(a->size / 2), cell = a->cell;
    cli_image plot = {title, xlabel, ylabel, im->re, a->size, -c * cell * per_rad, -c * cell * per_rad, cell * per_rad};
    return cli_image_png("dftimage", staged, which ? a->psf_png : a->png_path, &plot) ? 1 : 0;
}

/* Rank 0's outputs: the image and its PNG (by default named after the
 * image), the beam and its PNG, under staged names, moved into place
 * together, or none: 0, or the exit code after the error. */
static int write_dftimage_outputs(const dftimage_args *a, dftimage_job *job) {
    const char *cmd = "dftimage";
    pk_context *ctx = &job->ctx;
    int rc = 0;
    pk_status st;
    cli_outputs outs = {0};
    const char *s_out = cli_stage(cmd, &outs, a->out_path);
    const char *s_png = s_out && a->want_png ? cli_stage(cmd, &outs, a->png_path) : NULL;
    const char *s_psf = s_out && a->psf_path ? cli_stage(cmd, &outs, a->psf_path) : NULL;
    const char *s_psf_png = s_psf && a->psf_png ? cli_stage(cmd, &outs, a->psf_png) : NULL;
    if (!s_out || (a->want_png && !s_png) || (a->psf_path && !s_psf) || (a->psf_png && !s_psf_png)) rc = 1;
    if (!rc && (st = pk_image_write_fits(ctx, s_out, &job->image, &job->vis, a->opts.want_imag)) != PK_OK)
        rc = cli_output_error(cmd, st, ctx, &outs);
    if (!rc && a->psf_path && (st = pk_image_write_fits(ctx, s_psf, &job->psf, &job->vis, 0)) != PK_OK)
        rc = cli_output_error(cmd, st, ctx, &outs);
    if (!rc && a->want_png) rc = draw_dftimage_png(a, job, 0, s_png);
    if (!rc && a->want_png && a->psf_path) rc = draw_dftimage_png(a, job, 1, s_psf_png);
    if (!rc) rc = cli_commit(cmd, &outs);
    else cli_discard(&outs);
    return rc;
}

/* The visibilities, the kernel and its time, the files written, the beam
 * and --check's answer; with -q, that answer alone, on stdout. */
static void print_dftimage_summary(const dftimage_args *a, const dftimage_job *job) {
    const pk_vis *vis = &job->vis;
    const pk_dftimage_stats *stats = &job->stats, *psf_stats = &job->psf_stats;
    size_t size = a->size;
    if (a->quiet) {
        if (a->do_check) printf("%.6g\n", job->rel_l2);
        return;
    }
    double secs = stats->kernel_ms > 0 ? stats->kernel_ms * 1e-3 : stats->seconds;
    char robust_text[40] = "";
    if (vis->weighting == PK_WEIGHTING_BRIGGS) snprintf(robust_text, sizeof robust_text, " (robust %g)", a->robust);
    char uv_text[64] = "";
    if (job->uv_dropped) snprintf(uv_text, sizeof uv_text, ", %zu outside the baseline range", job->uv_dropped);
    fprintf(stderr, "%zu visibilities (%zu of %zu records flagged%s), %zu x %zu pixels, sign %+d, %s weighting%s\n",
            vis->n, vis->n_flagged, vis->n_records, uv_text, size, size, job->image.sign,
            pk_weighting_name((pk_weighting)vis->weighting), robust_text);
    if (job->n_zero_spacing)
        fprintf(stderr,
                "%zu of them at u = v = 0 (autocorrelations): they add a constant to every pixel; --minuv-l 1 "
                "leaves them out\n",
                job->n_zero_spacing);
    fprintf(stderr, "kernel %s: %.3f s%s, %.3g terms/s; wrote %s%s%s\n", pk_dftimage_kernel_name(stats->kernel), secs,
            stats->kernel_ms > 0 ? " of device time" : "", stats->terms / secs, a->out_path, a->png_path ? ", " : "",
            a->png_path ? a->png_path : "");
    if (stats->gpu_bands > 1) {
        double mib = (double)stats->gpu_bytes / 1048576.0;
        fprintf(stderr,
                "the image did not fit in the GPU memory at once: made in %d bands of rows (%.*f %s on the "
                "GPU)\n",
                stats->gpu_bands, mib >= 1024 ? 2 : 1, mib >= 1024 ? mib / 1024 : mib, mib >= 1024 ? "GiB" : "MiB");
    }
    if (a->psf_path) {
        double psecs = psf_stats->kernel_ms > 0 ? psf_stats->kernel_ms * 1e-3 : psf_stats->seconds;
        fprintf(stderr, "beam: %.3f s%s; wrote %s%s%s%s\n", psecs, psf_stats->kernel_ms > 0 ? " of device time" : "",
                a->psf_path, a->psf_png ? ", " : "", a->psf_png ? a->psf_png : "", job->beam_text);
    }
    if (job->n_ranks > 1)
        fprintf(stderr, "%d ranks: %.3f s of rank 0 in MPI collectives (reductions and waiting for the others)\n",
                job->n_ranks, cli_mpi_comm_seconds());
    if (a->do_check)
        fprintf(stderr, "relative L2 error vs float64 reference: %.3g (%s%zu pixels)\n", job->rel_l2,
                job->compared < size * size ? "subset of " : "all ", job->compared);
}

/* Under mpirun each rank images its share of the visibilities (on GPU rank
 * modulo the devices) and rank 0 sums the partial images: the result
 * equals the one-process image up to the order of the float sums
 * (docs/dftimage.md gives the bound), and only rank 0 writes. Every rank
 * makes the same collective calls in the same order: each step below that
 * makes some takes the status so far rather than being skipped, and a
 * rank returns early only where every rank does. */
int cmd_dftimage(int argc, char **argv) {
    dftimage_args args;
    dftimage_job job;
    memset(&job, 0, sizeof job);
    pk_context_init(&job.ctx);
    int rc = parse_dftimage_args(argc, argv, &args, &job.ctx);
    if (rc != DFTIMAGE_CONTINUE) return rc;
    if ((rc = validate_dftimage_args(&args)) != 0 || (rc = check_dftimage_outputs(&args)) != 0 ||
        (rc = check_kernel_precision(&args)) != 0)
        return rc;
    job.rank = cli_mpi_rank(), job.n_ranks = cli_mpi_size();
    job.ctx.cuda_device = cli_mpi_cuda_device();

    pk_status st = read_visibilities(&args, &job);
    st = image_my_share(&args, &job, st);
    rc = sum_images_over_ranks(&args, &job, st);
    if (rc == 0 && job.rank == 0) {
        fit_beam(&args, &job);
        rc = check_and_normalise(&args, &job);
        if (!rc) rc = write_dftimage_outputs(&args, &job);
        if (!rc) print_dftimage_summary(&args, &job);
    }
    dftimage_job_free(&job);
    return rc;
}
