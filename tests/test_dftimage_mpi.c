/* test_dftimage_mpi.c - `mpirun -np K pairkit dftimage` for K = 1, 2, 3
 * (Briggs weights from every visibility, the normalised image and its beam):
 * each rank images a share of the visibilities and rank 0 sums the partial
 * images, so the result equals the one-process image up to the order of the
 * float sums: a relative L2 difference within twice the kernel's own error
 * against the float64 reference (tested here at 1e-5 for float32 and 1e-12
 * for float64). A failing rank fails the job and nothing is written. */
#include <fitsio.h>
#include <math.h>

#include "cli_util.h"

static double *read_fits(const char *path, long *n) {
    fitsfile *f = NULL;
    int status = 0, naxis = 0;
    long axes[2] = {0, 0};
    fits_open_file(&f, path, READONLY, &status);
    fits_get_img_dim(f, &naxis, &status);
    fits_get_img_size(f, 2, axes, &status);
    if (status) {
        if (f) fits_close_file(f, &status);
        return NULL;
    }
    *n = axes[0] * axes[1];
    double *v = malloc((size_t)*n * sizeof(double));
    long first[2] = {1, 1};
    fits_read_pix(f, TDOUBLE, first, *n, NULL, v, NULL, &status);
    fits_close_file(f, &status);
    if (status) {
        free(v);
        return NULL;
    }
    return v;
}

static double rel_diff(const char *a, const char *b) {
    long na = 0, nb = 0;
    double *x = read_fits(a, &na), *y = read_fits(b, &nb);
    double d = INFINITY;
    if (x && y && na == nb && na > 0) {
        double num = 0, den = 0;
        for (long i = 0; i < na; i++) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
        d = sqrt(num / den);
    }
    free(x);
    free(y);
    return d;
}

int main(void) {
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) return 1;
    cli_scratch();
    const char *mpirun = "mpirun --oversubscribe --allow-run-as-root";
    const char *precisions[2] = {"single", "double"};
    const double bounds[2] = {1e-5, 1e-12};
    for (int p = 0; p < 2; p++) {
        char args[1024];
        snprintf(args, sizeof args,
                 "dftimage %s/data/vis/1133866760.uvfits --weights abs --size 96 -o one.fits -q --backend cpu "
                 "--precision %s --weighting briggs --robust 0.5 --psf one_psf.fits --normalise",
                 cwd, precisions[p]);
        int rc = cli_run(args);
        CHECK(rc == 0, "one process (%s): exit %d", precisions[p], rc);
        for (int k = 1; k <= 3; k++) {
            char cmd[2048];
            snprintf(
                cmd, sizeof cmd,
                "cd '%s' && %s -np %d '%s' dftimage %s/data/vis/1133866760.uvfits --weights abs --size 96 "
                "-o k%d.fits -q --backend cpu --threads 1 --precision %s --weighting briggs --robust 0.5 --normalise "
                "--psf k%d_psf.fits > mpi.log 2>&1",
                cli_dir, mpirun, k, cli_binary(), cwd, k, precisions[p], k);
            rc = system(cmd);
            CHECK(rc == 0, "np %d (%s): exit status %d", k, precisions[p], rc);
            char one[600], kk[600];
            snprintf(one, sizeof one, "%s/one.fits", cli_dir);
            snprintf(kk, sizeof kk, "%s/k%d.fits", cli_dir, k);
            double d = rel_diff(kk, one);
            printf("np %d, %s: relative L2 difference from one process %.3g (bound %.0e)\n", k, precisions[p], d,
                   bounds[p]);
            CHECK(d <= bounds[p], "np %d (%s): relative L2 difference %.3g > %.0e", k, precisions[p], d, bounds[p]);
            snprintf(one, sizeof one, "%s/one_psf.fits", cli_dir);
            snprintf(kk, sizeof kk, "%s/k%d_psf.fits", cli_dir, k);
            d = rel_diff(kk, one);
            CHECK(d <= bounds[p], "np %d (%s): the beams' relative L2 difference %.3g > %.0e", k, precisions[p], d,
                  bounds[p]);
        }
    }
    /* Fewer visibilities than ranks (one left after the baseline cut):
     * the empty shares add nothing, and the image and beam are the one
     * process's, byte for byte. */
    {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && '%s' dftimage %s/data/vis/lesson_small.npz --size 32 --maxuv-l 1 -o few1.fits "
                 "--psf few1_psf.fits --png none -q && %s -np 3 '%s' dftimage %s/data/vis/lesson_small.npz --size 32 "
                 "--maxuv-l 1 -o few3.fits --psf few3_psf.fits --png none -q --threads 1 > few.log 2>&1 && "
                 "cmp few1.fits few3.fits && cmp few1_psf.fits few3_psf.fits",
                 cli_dir, cli_binary(), cwd, mpirun, cli_binary(), cwd);
        int rc = system(cmd);
        char *log = cli_read(cli_path("few.log"));
        CHECK(rc == 0, "one visibility over 3 ranks: exit status %d, the same files expected: %s", rc, log ? log : "");
        free(log);
    }
    /* Rank 1 reads another file under its name (a stale copy on one node;
     * here the rephased twin): the ranks compare what they read, the job
     * fails, nothing written. */
    {
        char cmd[2048];
        snprintf(
            cmd, sizeof cmd,
            "cd '%s' && printf '#!/bin/sh\\nf=%s/data/vis/1133866760.uvfits\\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; "
            "then f=%s/data/vis/1133866760_rephase.uvfits; fi\\nexec %s dftimage $f --weights abs --size 32 -o "
            "copies.fits --png none -q --threads 1\\n' > copies.sh && chmod +x copies.sh && %s -np 2 ./copies.sh "
            "> copies.log 2>&1",
            cli_dir, cwd, cwd, cli_binary(), mpirun);
        int rc = system(cmd);
        char *log = cli_read(cli_path("copies.log"));
        const char *said = log ? strstr(log, "the ranks read different visibilities") : NULL;
        CHECK(rc != 0 && said && !strstr(said + 1, "the ranks read different visibilities"),
              "ranks reading different files (said once): exit status %d, %s", rc, log ? log : "");
        free(log);
        CHECK(access(cli_path("copies.fits"), F_OK) != 0, "no image from different files");
    }
    /* Rank 1 reads a file that is not there: the job fails, nothing written. */
    {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && printf '#!/bin/sh\\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then f=missing.uvfits; "
                 "else f=%s/data/vis/1133866760.uvfits; fi\\nexec %s dftimage $f --weights abs --size 64 -o fail.fits "
                 "-q --threads 1\\n' > one_bad.sh && chmod +x one_bad.sh && %s -np 2 ./one_bad.sh > bad.log 2>&1",
                 cli_dir, cwd, cli_binary(), mpirun);
        int rc = system(cmd);
        CHECK(rc != 0, "a failing rank must fail the job");
        char *log = cli_read(cli_path("bad.log"));
        CHECK(log && strstr(log, "missing.uvfits"), "the failing rank names the file: %s", log ? log : "");
        free(log);
        CHECK(cli_count_files("fail.") == 0, "no image after a failed rank");
    }
    /* Rank 1 reads a file that is not there while rank 0 reads a .npz
     * with --weights, a usage error: both reach the same collectives, so
     * the job fails at once (rank 0 once returned alone and left rank 1
     * waiting forever). */
    {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && printf '#!/bin/sh\\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then f=missing.uvfits; "
                 "else f=%s/data/vis/lesson_small.npz; fi\\nexec %s dftimage $f --weights abs --size 16 -o npz.fits "
                 "-q --threads 1\\n' > npz_weights.sh && chmod +x npz_weights.sh && timeout 120 %s -np 2 "
                 "./npz_weights.sh > npz.log 2>&1",
                 cli_dir, cwd, cli_binary(), mpirun);
        int rc = system(cmd);
        int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
        char *log = cli_read(cli_path("npz.log"));
        CHECK(code != 0 && code != 124,
              "--weights with a .npz on one rank, a failed read on another: exit %d "
              "(124: it hung), %s",
              code, log ? log : "");
        CHECK(log && strstr(log, "which has no weights") && strstr(log, "missing.uvfits"), "both ranks say why: %s",
              log ? log : "");
        free(log);
        CHECK(cli_count_files("npz.fits") == 0, "no image after the usage error");
    }
    cli_scratch_remove();
    return check_finish("test_dftimage_mpi");
}
