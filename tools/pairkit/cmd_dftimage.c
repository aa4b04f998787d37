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

int cmd_dftimage(int argc, char **argv) {
    const char *cmd = "dftimage";
    const char *vis_path = NULL, *out_path = "image.fits", *png_path = NULL;
    size_t size = 700, check_pixels = 4096;
    int check_pixels_given = 0;
    double cell = 0.0005, sign_value = 0;
    int quiet = 0, do_check = 0, normalise = 0;
    pk_weights weights = PK_WEIGHTS_DATA;
    const char *precision_given = NULL;
    int weights_given = 0;
    pk_weighting weighting = PK_WEIGHTING_NATURAL;
    double robust = 0.0;
    int robust_given = 0;
    const char *psf_path = NULL;
    double minuv = 0.0, maxuv = (double)INFINITY;
    pk_dftimage_options opts = {PK_BACKEND_AUTO, PK_DFTIMAGE_KERNEL_BEST, PK_PRECISION_SINGLE, 0, 0, 0};
    pk_context ctx;
    pk_context_init(&ctx);
    if (cli_check_flags(cmd, argc, argv, value_options, flag_options) ||
        cli_check_repeats(cmd, argc, argv, value_options))
        return 2;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--imag") == 0) {
            opts.want_imag = 1;
        } else if (strcmp(a, "--normalise") == 0 || strcmp(a, "--normalize") == 0) {
            normalise = 1;
        } else if (strcmp(a, "--check") == 0) {
            do_check = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            if (k + 1 >= argc) return cli_missing_value(cmd, a, value_options);
            const char *v = argv[++k];
            if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) out_path = v;
            else if (strcmp(a, "--png") == 0) png_path = v;
            else if (strcmp(a, "--size") == 0) {
                if (cli_parse_size(cmd, a, v, &size)) return 2;
                if (size == 0) return cli_usage_error(cmd, "--size must be at least 1");
            } else if (strcmp(a, "--cell") == 0) {
                if (cli_parse_double(cmd, a, v, &cell)) return 2;
                if (!(cell > 0)) return cli_usage_error(cmd, "--cell must be > 0, got '%s'", v);
            } else if (strcmp(a, "--backend") == 0) {
                if (pk_backend_parse(v, &opts.backend))
                    return cli_usage_error(cmd, "--backend: '%s' is not auto, cpu or cuda", v);
            } else if (strcmp(a, "--precision") == 0) {
                precision_given = v;
                if (strcmp(v, "single") == 0) opts.precision = PK_PRECISION_SINGLE;
                else if (strcmp(v, "double") == 0) opts.precision = PK_PRECISION_DOUBLE;
                else return cli_usage_error(cmd, "--precision: '%s' is not single or double", v);
            } else if (strcmp(a, "--kernel") == 0) {
                opts.kernel = pk_dftimage_kernel_from_name(v);
                if (opts.kernel < 0) return cli_unknown_kernel(cmd, "--kernel", v);
            } else if (strcmp(a, "--sign") == 0) {
                if (cli_parse_double(cmd, a, v, &sign_value)) return 2;
                if (sign_value != 1 && sign_value != -1)
                    return cli_usage_error(cmd, "--sign must be +1 or -1, got '%s'", v);
                opts.sign = (int)sign_value;
            } else if (strcmp(a, "--weights") == 0) {
                weights_given = 1;
                if (pk_weights_parse(v, &weights))
                    return cli_usage_error(cmd, "--weights: '%s' is not data, abs or unit", v);
            } else if (strcmp(a, "--weighting") == 0) {
                if (pk_weighting_parse(v, &weighting))
                    return cli_usage_error(cmd, "--weighting: '%s' is not natural, uniform or briggs", v);
            } else if (strcmp(a, "--robust") == 0) {
                if (cli_parse_double(cmd, a, v, &robust)) return 2;
                if (!(robust >= -5 && robust <= 5))
                    return cli_usage_error(cmd,
                                           "--robust must lie in [-5, 5] (-2: near uniform, 2: near natural), "
                                           "got '%s'",
                                           v);
                robust_given = 1;
            } else if (strcmp(a, "--psf") == 0) {
                psf_path = v;
            } else if (strcmp(a, "--minuv-l") == 0 || strcmp(a, "--maxuv-l") == 0) {
                double l;
                if (cli_parse_double(cmd, a, v, &l)) return 2;
                if (!(l >= 0)) return cli_usage_error(cmd, "%s must be a length >= 0, got '%s'", a, v);
                if (a[2] == 'm' && a[3] == 'i') minuv = l;
                else maxuv = l;
            } else if (strcmp(a, "--check-pixels") == 0) {
                if (cli_parse_size(cmd, a, v, &check_pixels)) return 2;
                check_pixels_given = 1;
            } else if (strcmp(a, "--gpu-memory") == 0) {
                double gib;
                if (cli_parse_double(cmd, a, v, &gib)) return 2;
                if (!(gib > 0) || gib > 1e6)
                    return cli_usage_error(cmd, "--gpu-memory must be a number of GiB > 0 and at most 1e6, got '%s'",
                                           v);
                opts.gpu_memory = (size_t)(gib * 1073741824.0);
                if (opts.gpu_memory == 0) opts.gpu_memory = 1;
            } else if (strcmp(a, "--threads") == 0) {
                if (cli_parse_threads(cmd, a, v, &ctx.n_threads)) return 2;
            } else {
                return cli_usage_error(cmd, "unknown option '%s'", a);
            }
        } else {
            if (vis_path) return cli_usage_error(cmd, "expected one visibility file, got a second: '%s'", a);
            vis_path = a;
        }
    }
    if (!vis_path) return cli_usage_error(cmd, "expected a visibility file (.npz or UVFITS)");
    if (maxuv < minuv)
        return cli_usage_error(cmd, "--maxuv-l %g is shorter than --minuv-l %g: no baseline is left", maxuv, minuv);
    if (robust_given && weighting != PK_WEIGHTING_BRIGGS)
        return cli_usage_error(cmd, "--robust is the robustness of --weighting briggs; add that (or drop --robust)");
    if (check_pixels_given && !do_check)
        return cli_usage_error(cmd, "--check-pixels sets how many pixels --check compares; add --check");
    const char *fits_names[2] = {out_path, psf_path};
    for (int f = 0; f < 2; f++) {
        size_t len = fits_names[f] ? strlen(fits_names[f]) : 0;
        if (len >= 3 && strcasecmp(fits_names[f] + len - 3, ".gz") == 0)
            return cli_usage_error(cmd,
                                   "%s %s: the image is written as plain FITS; give a name without .gz (and gzip "
                                   "the file afterwards if it should be compressed)",
                                   f ? "--psf" : "-o", fits_names[f]);
    }
    /* the outputs' final names, the default PNG's included, checked before
     * the work; no output may replace the visibility file */
    cli_input(vis_path);
    char png_buf[4200];
    const char *png_default = NULL;
    int want_png = cli_want_png(cmd, png_path, cli_mpi_rank() == 0); /* the same on every rank */
    if (want_png && !png_path) png_path = png_default = cli_sibling_into(out_path, ".png", png_buf, sizeof png_buf);
    if (!want_png) png_path = NULL;
    /* the beam's PNG goes with the image's: left out by --png none, or where PLplot cannot draw the default one */
    char psf_png_buf[4200];
    const char *psf_png =
        psf_path && want_png ? cli_sibling_into(psf_path, ".png", psf_png_buf, sizeof psf_png_buf) : NULL;
    const cli_named outputs[] = {
        {out_path, "-o (the FITS image, default image.fits)"},
        {png_path, png_default
                       ? "the PNG preview (by default the -o name with .png; --png names it, --png none leaves it out)"
                       : "--png"},
        {psf_path, "--psf"},
        {psf_png, "the beam's PNG (the --psf name with .png; --png none leaves it out)"},
    };
    int names_bad = cli_check_names(cmd, outputs, 4);
    if (!cli_mpi_all_ok(!names_bad)) return names_bad == 3 ? 1 : 2; /* every rank stops, or none */
    if (precision_given && opts.kernel && pk_dftimage_kernel_precision(opts.kernel) != opts.precision)
        return cli_usage_error(cmd, "--kernel %s computes in %s precision, --precision says %s: give one of the two",
                               pk_dftimage_kernel_name(opts.kernel),
                               pk_dftimage_kernel_precision(opts.kernel) == PK_PRECISION_DOUBLE ? "double" : "single",
                               precision_given);

    /* Learn that the image cannot fit, or reaches beyond the sky, before
     * reading anything: by each node's memory, so a status carried to the
     * collectives below, as a failed read is. */
    pk_status st = pk_dftimage_check_grid(&ctx, size, cell, opts.want_imag);

    /* Under mpirun each rank images its share of the visibilities (on GPU
     * rank modulo the devices) and rank 0 sums the partial images: the
     * result equals the one-process image up to the order of the float
     * sums (docs/dftimage.md gives the bound), and only rank 0 writes. */
    int rank = cli_mpi_rank(), n_ranks = cli_mpi_size();
    ctx.cuda_device = cli_mpi_cuda_device();
    if (st == PK_OK) cli_note_cpu_fallback(cmd, &ctx, opts.backend, opts.kernel == PK_DFTIMAGE_KERNEL_BEST, quiet);
    pk_vis vis;
    memset(&vis, 0, sizeof vis);
    if (st == PK_OK) st = pk_vis_read(&ctx, vis_path, weights, &vis);
    /* a .npz has no weights to choose from: a usage error, carried as a
     * status to the collectives below (a rank that returned here would
     * leave one whose read failed waiting in them) */
    int rc_usage = 0;
    if (st == PK_OK && weights_given && vis.sign > 0) {
        rc_usage =
            cli_usage_error(cmd, "--weights: %s is a .npz, which has no weights (the option is for UVFITS)", vis_path);
        st = PK_ERR_INVALID;
    }
    /* under mpirun the ranks compare what they read */
    if (n_ranks > 1 && cli_mpi_all_ok(st == PK_OK)) {
        uint64_t h = CLI_HASH_START ^ vis.n;
        const double *arrays[6] = {vis.u, vis.v, vis.w, vis.re, vis.im, vis.weight};
        for (int a = 0; a < 6; a++)
            if (arrays[a]) h = cli_hash_bytes(h, arrays[a], vis.n * sizeof(double));
        st = cli_mpi_same_input(&ctx, h, vis_path, "visibilities");
    }
    /* the baselines asked for, then imaging weights from every one of them,
     * before any share is taken */
    size_t uv_dropped = 0;
    if (st == PK_OK && (minuv > 0 || isfinite(maxuv))) {
        st = pk_vis_select_uv(&ctx, &vis, minuv, maxuv, &uv_dropped);
        if (st) {
            char rest[PK_MESSAGE_MAX];
            snprintf(rest, sizeof rest, "%s", ctx.message);
            snprintf(ctx.message, sizeof ctx.message, "%.200s: %.300s", vis_path, rest);
        }
    }
    /* zero spacings (autocorrelations) add a constant to every pixel: said
     * with the summary, as imagers usually leave them out */
    size_t n_zero_spacing = 0;
    if (st == PK_OK)
        for (size_t k = 0; k < vis.n; k++) n_zero_spacing += vis.u[k] == 0 && vis.v[k] == 0;
    if (st == PK_OK && weighting != PK_WEIGHTING_NATURAL) {
        st = pk_vis_weighting(&ctx, &vis, weighting, robust, size, cell);
        if (st) {
            char rest[PK_MESSAGE_MAX];
            snprintf(rest, sizeof rest, "%s", ctx.message);
            snprintf(ctx.message, sizeof ctx.message, "%.200s: %.300s", vis_path, rest);
        }
    }
    pk_image image, psf;
    memset(&image, 0, sizeof image);
    memset(&psf, 0, sizeof psf);
    pk_dftimage_stats stats, psf_stats;
    memset(&stats, 0, sizeof stats);
    memset(&psf_stats, 0, sizeof psf_stats);
    if (st == PK_OK) {
        pk_vis part = vis;
        size_t v0 = 0; /* the first visibility of this rank's share */
        if (n_ranks > 1) {
            size_t v1 = vis.n * (size_t)(rank + 1) / (size_t)n_ranks;
            v0 = vis.n * (size_t)rank / (size_t)n_ranks;
            part.u += v0, part.v += v0, part.w += v0, part.re += v0, part.im += v0;
            if (part.weight) part.weight += v0; /* weight_sum stays the whole set's: the beams' shares add up */
            part.n = v1 - v0;
            if (opts.sign == 0) opts.sign = vis.sign;
        }
        /* fewer visibilities than ranks: an empty share images one
         * visibility of value 0 and weight 0, which adds 0 to every pixel
         * of the image and of the beam */
        static double zero_u = 0, zero_v = 0, zero_w = 0, zero_re = 0, zero_im = 0, zero_weight = 0;
        if (part.n == 0) {
            part.u = &zero_u, part.v = &zero_v, part.w = &zero_w, part.re = &zero_re, part.im = &zero_im;
            part.weight = &zero_weight;
            part.n = 1;
        }
        cli_progress_attach(&ctx, "dftimage", quiet || rank != 0);
        st = pk_dftimage_run(&ctx, &opts, &part, size, cell, &image, &stats);
        cli_progress_done(&ctx);
        if (st == PK_OK && psf_path) {
            cli_progress_attach(&ctx, "dftimage psf", quiet || rank != 0);
            st = pk_dftimage_psf(&ctx, &opts, &part, size, cell, &psf, &psf_stats);
            cli_progress_done(&ctx);
        }
        size_t k_local;
        int used = 0;
        if (st && sscanf(ctx.message, "visibility %zu%n", &k_local, &used) == 1 && used > 0) {
            /* the library knows the visibility in the share, the command the
             * file and where the share starts in it */
            char rest[PK_MESSAGE_MAX];
            snprintf(rest, sizeof rest, "%s", ctx.message + used);
            snprintf(ctx.message, sizeof ctx.message, "%.200s: visibility %zu%.280s", vis_path, v0 + k_local, rest);
        }
    }
    int rc_mine = rc_usage ? rc_usage : st ? cli_error(cmd, st, &ctx) : 0;
    if (!cli_mpi_all_ok(st == PK_OK)) {
        pk_image_free(&image);
        pk_image_free(&psf);
        pk_vis_free(&vis);
        /* one exit code for the job: the failing rank's (the highest) */
        return n_ranks > 1 ? (int)cli_mpi_max((double)rc_mine) : rc_mine;
    }
    if (n_ranks > 1) {
        int failed = cli_mpi_sum_double(image.re, size * size);
        if (image.im) failed |= cli_mpi_sum_double(image.im, size * size);
        if (psf.re) failed |= cli_mpi_sum_double(psf.re, size * size);
        stats.seconds = cli_mpi_max(stats.seconds);
        stats.kernel_ms = cli_mpi_max(stats.kernel_ms);
        psf_stats.seconds = cli_mpi_max(psf_stats.seconds);
        psf_stats.kernel_ms = cli_mpi_max(psf_stats.kernel_ms);
        stats.terms = (double)vis.n * (double)size * (double)size;
        if (rank != 0 || failed) {
            if (failed) fprintf(stderr, "pairkit %s: summing the ranks' images failed\n", cmd);
            pk_image_free(&image);
            pk_image_free(&psf);
            pk_vis_free(&vis);
            return failed;
        }
    }
    /* the beam's Gaussian, into both headers; a lobe the field or the
     * cells cannot hold is a warning, not a failure */
    char beam_text[160] = "";
    if (psf.re) {
        double bmaj, bmin, bpa;
        if (pk_dftimage_beam_fit(&ctx, &psf, &bmaj, &bmin, &bpa) == PK_OK) {
            psf.bmaj = image.bmaj = bmaj, psf.bmin = image.bmin = bmin, psf.bpa = image.bpa = bpa;
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
            snprintf(beam_text, sizeof beam_text, "; fitted beam %.4g x %.4g %s, PA %.1f deg", bmaj * per_rad,
                     bmin * per_rad, unit, bpa);
        } else if (!quiet) {
            fprintf(stderr, "pairkit %s: warning: %s\n", cmd, ctx.message);
        }
        ctx.message[0] = '\0';
    }
    double rel_l2 = (double)NAN;
    size_t compared = 0;
    cli_progress_attach(&ctx, "dftimage check", quiet);
    if (st == PK_OK && do_check) {
        size_t max_pix = (double)vis.n * (double)size * (double)size > 2e9 ? check_pixels : 0;
        st = pk_dftimage_check(&ctx, &vis, &image, max_pix, &rel_l2, &compared);
        if (st) pk_image_free(&image);
    }
    cli_progress_done(&ctx);
    if (st == PK_OK && normalise) { /* after --check, which compares the sums themselves */
        double scale = 1.0 / vis.weight_sum;
        for (size_t p = 0; p < size * size; p++) {
            image.re[p] *= scale;
            if (image.im) image.im[p] *= scale;
        }
        image.normalised = 1;
    }
    if (st) {
        int rc = cli_error(cmd, st, &ctx);
        pk_image_free(&psf);
        pk_vis_free(&vis);
        return rc;
    }
    /* the image and its PNG (by default named after the image) under staged
     * names, moved into place together */
    int rc = 0;
    cli_outputs outs = {0};
    const char *s_out = cli_stage(cmd, &outs, out_path);
    const char *s_png = s_out && want_png ? cli_stage(cmd, &outs, png_path) : NULL;
    const char *s_psf = s_out && psf_path ? cli_stage(cmd, &outs, psf_path) : NULL;
    const char *s_psf_png = s_psf && psf_png ? cli_stage(cmd, &outs, psf_png) : NULL;
    if (!s_out || (want_png && !s_png) || (psf_path && !s_psf) || (psf_png && !s_psf_png)) rc = 1;
    if (!rc && (st = pk_image_write_fits(&ctx, s_out, &image, &vis, opts.want_imag)) != PK_OK)
        rc = cli_output_error(cmd, st, &ctx, &outs);
    if (!rc && psf_path && (st = pk_image_write_fits(&ctx, s_psf, &psf, &vis, 0)) != PK_OK)
        rc = cli_output_error(cmd, st, &ctx, &outs);
    char weighting_text[48] = "";
    if (vis.weighting == PK_WEIGHTING_BRIGGS) snprintf(weighting_text, sizeof weighting_text, ", briggs %g", robust);
    else if (vis.weighting == PK_WEIGHTING_UNIFORM) snprintf(weighting_text, sizeof weighting_text, ", uniform");
    for (int which = 0; which < 2 && !rc && want_png; which++) {
        const pk_image *im = which ? &psf : &image;
        if (which && !psf_path) break;
        double extent = (double)size * cell;
        const char *unit;
        double per_rad;
        angle_unit(extent, &unit, &per_rad);
        char title[200], xlabel[64], ylabel[64];
        const char *what = which ? "dirty beam" : "dirty image";
        char what_buf[64];
        if (!which && image.normalised) { /* the colour bar's unit, as BUNIT has it */
            if (strcasecmp(vis.bunit, "JY") == 0) what = "dirty image [Jy/beam]";
            else if (vis.bunit[0])
                snprintf(what_buf, sizeof what_buf, "dirty image [%s/beam]", vis.bunit), what = what_buf;
            else what = "dirty image / WEIGHTS";
        }
        snprintf(title, sizeof title, "%s%s%s, %zu visibilit%s, s = %+d%s", vis.object, vis.object[0] ? ": " : "", what,
                 vis.n, vis.n == 1 ? "y" : "ies", im->sign, weighting_text);
        snprintf(xlabel, sizeof xlabel, "l (east) [%s]", unit);
        snprintf(ylabel, sizeof ylabel, "m (north) [%s]", unit);
        double c = (double)(size / 2);
        cli_image plot = {title,         xlabel, ylabel, im->re, size, -c * cell * per_rad, -c * cell * per_rad,
                          cell * per_rad};
        if (cli_image_png(cmd, which ? s_psf_png : s_png, which ? psf_png : png_path, &plot)) rc = 1;
    }
    if (!rc) rc = cli_commit(cmd, &outs);
    else cli_discard(&outs);
    if (!rc && !quiet) {
        double secs = stats.kernel_ms > 0 ? stats.kernel_ms * 1e-3 : stats.seconds;
        char robust_text[40] = "";
        if (vis.weighting == PK_WEIGHTING_BRIGGS) snprintf(robust_text, sizeof robust_text, " (robust %g)", robust);
        char uv_text[64] = "";
        if (uv_dropped) snprintf(uv_text, sizeof uv_text, ", %zu outside the baseline range", uv_dropped);
        fprintf(stderr, "%zu visibilities (%zu of %zu records flagged%s), %zu x %zu pixels, sign %+d, %s weighting%s\n",
                vis.n, vis.n_flagged, vis.n_records, uv_text, size, size, image.sign,
                pk_weighting_name((pk_weighting)vis.weighting), robust_text);
        if (n_zero_spacing)
            fprintf(stderr,
                    "%zu of them at u = v = 0 (autocorrelations): they add a constant to every pixel; --minuv-l 1 "
                    "leaves them out\n",
                    n_zero_spacing);
        fprintf(stderr, "kernel %s: %.3f s%s, %.3g terms/s; wrote %s%s%s\n", pk_dftimage_kernel_name(stats.kernel),
                secs, stats.kernel_ms > 0 ? " of device time" : "", stats.terms / secs, out_path, png_path ? ", " : "",
                png_path ? png_path : "");
        if (stats.gpu_bands > 1) {
            double mib = (double)stats.gpu_bytes / 1048576.0;
            fprintf(stderr,
                    "the image did not fit in the GPU memory at once: made in %d bands of rows (%.*f %s on the "
                    "GPU)\n",
                    stats.gpu_bands, mib >= 1024 ? 2 : 1, mib >= 1024 ? mib / 1024 : mib, mib >= 1024 ? "GiB" : "MiB");
        }
        if (psf_path) {
            double psecs = psf_stats.kernel_ms > 0 ? psf_stats.kernel_ms * 1e-3 : psf_stats.seconds;
            fprintf(stderr, "beam: %.3f s%s; wrote %s%s%s%s\n", psecs, psf_stats.kernel_ms > 0 ? " of device time" : "",
                    psf_path, psf_png ? ", " : "", psf_png ? psf_png : "", beam_text);
        }
        if (n_ranks > 1)
            fprintf(stderr, "%d ranks: %.3f s of rank 0 in MPI collectives (reductions and waiting for the others)\n",
                    n_ranks, cli_mpi_comm_seconds());
        if (do_check)
            fprintf(stderr, "relative L2 error vs float64 reference: %.3g (%s%zu pixels)\n", rel_l2,
                    compared < size * size ? "subset of " : "all ", compared);
    } else if (!rc && do_check) {
        printf("%.6g\n", rel_l2);
    }
    pk_image_free(&image);
    pk_image_free(&psf);
    pk_vis_free(&vis);
    return rc;
}
