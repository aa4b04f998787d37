/* test_angcorr_cli.c - `pairkit angcorr` end to end: the course format, CSV,
 * the PNG plot, identical output from every kernel and thread count, RR
 * kept and used again, and Ctrl-C during a long run (stops within a second,
 * writes nothing). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "angcorr_util.h"
#include "cli_util.h"

static void write_catalog(const char *name, check_rng *rng, size_t n) {
    FILE *fp = fopen(cli_path(name), "w");
    fprintf(fp, "%zu\n", n);
    for (size_t i = 0; i < n; i++)
        fprintf(fp, "%.6f\t%.6f\n", 5400.0 * check_uniform(rng), 5400.0 * check_uniform(rng));
    fclose(fp);
}

/* the default run with every output: omega.out (returned, malloc'ed, or
 * NULL when not written), the CSV and the PNG plot */
static char *run_writing_every_output(void) {
    int rc = cli_run("angcorr d.txt r.txt -o omega.out --csv omega.csv --png omega.png -q");
    char *err = cli_stderr();
    CHECK(rc == 0, "exit %d: %s", rc, err ? err : "");
    free(err);
    char *omega = cli_read(cli_path("omega.out"));
    CHECK(omega != NULL, "omega.out written");
    return omega;
}

/* outputs get the mode a plain fopen gives: 0666 less the umask */
static void outputs_get_the_mode_of_fopen(void) {
    mode_t mask = umask(0);
    umask(mask);
    const char *outs[3] = {"omega.out", "omega.csv", "omega.png"};
    for (int k = 0; k < 3; k++) {
        struct stat sb;
        int ok = stat(cli_path(outs[k]), &sb) == 0;
        CHECK(ok && (sb.st_mode & 0777) == (0666 & ~mask), "%s: mode %o, umask %o", outs[k],
              ok ? (unsigned)(sb.st_mode & 0777) : 0u, (unsigned)mask);
    }
}

/* the header line, then every row: %6.3f\t%15f\t%15ld\t%15ld\t%15ld;
 * the counts add up */
static void omega_out_in_the_course_format(char *omega) {
    const char *header = "bin start\t\tomega\t        hist_DD\t        hist_DR\t        hist_RR\n";
    CHECK(strncmp(omega, header, strlen(header)) == 0, "header line");
    unsigned long long sum[3] = {0, 0, 0};
    int rows = 0, bad_rows = 0;
    for (char *line = strchr(omega, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        double start, w;
        long dd, dr, rr;
        char *nl = strchr(line, '\n');
        if (!nl) break;
        if (nl - line != 6 + 1 + 15 + 1 + 15 + 1 + 15 + 1 + 15) bad_rows++;
        if (sscanf(line, "%lf\t%lf\t%ld\t%ld\t%ld", &start, &w, &dd, &dr, &rr) != 5 || rr <= 0) bad_rows++;
        sum[0] += (unsigned long long)dd, sum[1] += (unsigned long long)dr, sum[2] += (unsigned long long)rr;
        rows++;
    }
    CHECK(bad_rows == 0 && rows > 100, "%d rows, %d malformed", rows, bad_rows);
    CHECK(sum[0] == 1500ull * 1500 && sum[1] == 1500ull * 2100 && sum[2] == 2100ull * 2100, "sums %llu %llu %llu",
          sum[0], sum[1], sum[2]);
}

/* the CSV: its header, then a row per bin */
static void csv_has_a_row_per_bin(void) {
    char *csv = cli_read(cli_path("omega.csv"));
    CHECK(csv && strncmp(csv, "theta_lo_deg,theta_hi_deg,omega,dd,dr,rr\n", 41) == 0, "CSV header");
    if (csv) {
        int lines = 0;
        for (char *p = csv; *p; p++) lines += *p == '\n';
        CHECK(lines == 1441, "CSV has a row per bin: %d lines", lines);
    }
    free(csv);
}

static void png_plot_is_written(void) {
    char *png = cli_read(cli_path("omega.png"));
    CHECK(png && memcmp(png, "\x89PNG", 4) == 0, "PNG plot written");
    free(png);
}

/* Same bytes from every kernel and thread count. */
static void every_kernel_gives_the_same_bytes(const char *omega) {
    const char *variants[] = {"--kernel scalar", "--kernel avx2 --threads 1", "--kernel avx512", "--kernel avx2-table",
                              "--kernel ref",    "--backend cpu --threads 2"};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        char args[256];
        snprintf(args, sizeof args, "angcorr d.txt r.txt -o v.out --png none -q %s", variants[v]);
        int rc = cli_run(args);
        char *e = cli_stderr();
        if (rc != 0 && e && strstr(e, "cannot run here")) {
            printf("%s: not supported by this CPU, skipped\n", variants[v]);
            free(e);
            continue;
        }
        free(e);
        char *other = cli_read(cli_path("v.out"));
        CHECK(rc == 0 && other && omega && strcmp(other, omega) == 0, "%s: output differs", variants[v]);
        free(other);
    }
}

/* The approximate baseline kernel is for the bench only. */
static void approximate_kernel_is_for_the_bench_only(void) {
    int rc = cli_run("angcorr d.txt r.txt -o approx.out --png none -q --kernel cpu-approx-acos");
    char *e = cli_stderr();
    CHECK(rc == 2 && e && strstr(e, "approximate") && cli_count_files("approx.out") == 0,
          "--kernel cpu-approx-acos: exit %d, %s", rc, e ? e : "");
    free(e);
}

/* --png NONE and None leave the plot out as none does: no file of that
 * name (it would be a PNG without the suffix). */
static void png_none_in_any_case_leaves_the_plot_out(void) {
    const char *spellings[2] = {"NONE", "None"};
    for (int s = 0; s < 2; s++) {
        char args[200];
        snprintf(args, sizeof args, "angcorr d.txt r.txt -o none%d.out --png %s -q --nbins 20", s, spellings[s]);
        int rc = cli_run(args);
        CHECK(rc == 0 && access(cli_path(spellings[s]), F_OK) != 0 && access(cli_path("none0.png"), F_OK) != 0,
              "--png %s: exit %d, a file of that name %s", spellings[s], rc,
              access(cli_path(spellings[s]), F_OK) == 0 ? "written" : "absent");
    }
}

/* Default units follow the format the file is read as: CSV in degrees
 * whatever the case of its suffix, ... */
static void csv_suffix_in_any_case_read_in_degrees(check_rng *rng) {
    const char *names[4] = {"dd.csv", "rr.csv", "dd.CSV", "rr.CSV"};
    for (int c = 0; c < 2; c++) {
        FILE *a = fopen(cli_path(names[c]), "w"), *b = fopen(cli_path(names[c + 2]), "w");
        fprintf(a, "ra,dec\n");
        fprintf(b, "ra,dec\n");
        for (int i = 0; i < 800; i++) {
            double ra = 90.0 * check_uniform(rng), dec = 90.0 * check_uniform(rng);
            fprintf(a, "%.10f,%.10f\n", ra, dec);
            fprintf(b, "%.10f,%.10f\n", ra, dec);
        }
        fclose(a);
        fclose(b);
    }
    int rc1 = cli_run("angcorr dd.csv rr.csv -o lower.out --png none -q");
    int rc2 = cli_run("angcorr dd.CSV rr.CSV -o upper.out --png none -q");
    char *lower = cli_read(cli_path("lower.out")), *upper = cli_read(cli_path("upper.out"));
    CHECK(rc1 == 0 && rc2 == 0 && lower && upper && strcmp(lower, upper) == 0,
          ".CSV read in other units than .csv (exit %d, %d)", rc1, rc2);
    free(lower);
    free(upper);
}

/* a byte order mark before the header changes nothing */
static void byte_order_mark_changes_nothing(void) {
    char bom_cmd[1200];
    snprintf(bom_cmd, sizeof bom_cmd, "printf '\\357\\273\\277' > '%s' && cat '%s' >> '%s'", cli_path("bom.csv"),
             cli_path("dd.csv"), cli_path("bom.csv"));
    CHECK(system(bom_cmd) == 0, "bom.csv");
    int rc3 = cli_run("angcorr bom.csv rr.csv -o bom.out --png none -q");
    char *bom = cli_read(cli_path("bom.out")), *lower = cli_read(cli_path("lower.out"));
    CHECK(rc3 == 0 && bom && lower && strcmp(bom, lower) == 0, "a CSV with a byte order mark (exit %d)", rc3);
    free(bom);
    free(lower);
}

/* ... a native file in arcmin even with ".fits" inside its name; ... */
static void native_file_named_fits_txt_read_in_arcmin(void) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s' '%s'", cli_path("d.txt"), cli_path("d.fits.txt"),
             cli_path("r.txt"), cli_path("r.fits.txt"));
    CHECK(system(cmd) == 0, "copy");
    int rc1 = cli_run("angcorr d.txt r.txt -o plain.out --png none -q --nbins 90 --bin-width 1");
    int rc2 = cli_run("angcorr d.fits.txt r.fits.txt -o named.out --png none -q --nbins 90 --bin-width 1");
    char *plain = cli_read(cli_path("plain.out")), *named = cli_read(cli_path("named.out"));
    CHECK(rc1 == 0 && rc2 == 0 && plain && named && strcmp(plain, named) == 0,
          "a native file named *.fits.txt read in other units (exit %d, %d)", rc1, rc2);
    free(plain);
    free(named);
}

/* ... a gzip-compressed CSV is refused plainly. */
static void gzip_csv_refused_plainly(void) {
    cli_write("g.csv.gz", "\x1f\x8b\x08\x00 not really gzip");
    int rc = cli_run("angcorr g.csv.gz rr.csv -o g.out --png none -q");
    char *e = cli_stderr();
    CHECK(rc == 1 && e && strstr(e, "g.csv.gz: gzip-compressed"), "gzip CSV: exit %d, %s", rc, e ? e : "");
    free(e);
}

/* A run that fails on any of its outputs changes none of them: an
 * older omega.out and CSV stay, nothing staged is left behind. */
static void failed_run_changes_no_output(void) {
    cli_write("keep.out", "old omega\n");
    cli_write("keep.csv", "old csv\n");
    char dir_cmd[600];
    snprintf(dir_cmd, sizeof dir_cmd, "mkdir -p '%s'", cli_path("adir"));
    CHECK(system(dir_cmd) == 0, "mkdir");
    const char *bad[6] = {"--csv keep.csv --png nodir/x.png",
                          "--csv keep.csv --png adir",
                          "--csv nodir/x.csv",
                          "--csv adir",
                          "--csv keep.csv --jackknife 4 --cov nodir/c.csv",
                          "--csv keep.csv --png ./keep.csv"};
    for (int b = 0; b < 6; b++) {
        char args[256];
        snprintf(args, sizeof args, "angcorr d.txt r.txt -o keep.out -q --nbins 20 %s", bad[b]);
        int rc = cli_run(args);
        char *e = cli_stderr(), *o = cli_read(cli_path("keep.out")), *c = cli_read(cli_path("keep.csv"));
        /* a name clash is a usage error (2), found before the count */
        int clash = e && strstr(e, "named for two outputs") != NULL;
        CHECK(rc == (clash ? 2 : 1) && e && (strstr(e, "cannot write") || strstr(e, "is a directory") || clash),
              "%s: exit %d, %s", bad[b], rc, e ? e : "");
        CHECK(o && strcmp(o, "old omega\n") == 0 && c && strcmp(c, "old csv\n") == 0, "%s: an older output was changed",
              bad[b]);
        CHECK(cli_count_files("pkstage") == 0 && cli_count_files("pkkeep") == 0 && cli_count_files(".tmp") == 0,
              "%s: staged files left behind", bad[b]);
        free(e), free(o), free(c);
    }
}

/* an output name that a rename would wrongly replace: a pipe (or a
 * device) keeps its node, a read-only file its contents, and an
 * empty name is refused; each before the count, older outputs kept */
static void outputs_a_rename_would_replace_refused(void) {
    char fifo_cmd[600];
    snprintf(fifo_cmd, sizeof fifo_cmd, "mkfifo '%s'", cli_path("keep.fifo"));
    CHECK(system(fifo_cmd) == 0, "mkfifo");
    cli_write("readonly.out", "read-only\n");
    chmod(cli_path("readonly.out"), 0444);
    /* and a link to the pipe, as /dev/stdout is a link to a stream:
     * replacing the link would take the stream's name away */
    CHECK(symlink("keep.fifo", cli_path("stream.link")) == 0, "symlink");
    const char *unfit[5] = {"--csv keep.fifo", "--png keep.fifo", "--csv ''", "--csv readonly.out",
                            "--csv stream.link"};
    const char *why[5] = {"is not a regular file", "is not a regular file", "--csv: an empty file name", "is read-only",
                          "stream.link: is a link to something that is not a regular file"};
    for (int b = 0; b < 5; b++) {
        if (b == 3 && geteuid() == 0) {
            printf("skip: a read-only output (root may write any file)\n");
            continue;
        }
        char args[256];
        snprintf(args, sizeof args, "angcorr d.txt r.txt -o keep.out -q --nbins 20 %s", unfit[b]);
        int rc = cli_run(args);
        char *e = cli_stderr(), *o = cli_read(cli_path("keep.out")), *r = cli_read(cli_path("readonly.out"));
        struct stat sb;
        /* an empty name is a command-line error (exit 2), as in memsort */
        CHECK(rc == (b == 2 ? 2 : 1) && e && strstr(e, why[b]), "%s: exit %d, %s", unfit[b], rc, e ? e : "");
        CHECK(o && strcmp(o, "old omega\n") == 0 && r && strcmp(r, "read-only\n") == 0,
              "%s: an older output was changed", unfit[b]);
        CHECK(lstat(cli_path("keep.fifo"), &sb) == 0 && S_ISFIFO(sb.st_mode), "%s: the pipe was replaced", unfit[b]);
        CHECK(lstat(cli_path("stream.link"), &sb) == 0 && S_ISLNK(sb.st_mode), "%s: the link was replaced", unfit[b]);
        CHECK(cli_count_files("pkstage") == 0 && cli_count_files(".tmp") == 0, "%s: staged files left behind",
              unfit[b]);
        free(e), free(o), free(r);
    }
}

/* every column of the CSV's header line has its entry in the ECSV's
 * header, in order */
static void ecsv_describes_every_column_in_order(const char *plain, const char *ecsv) {
    const char *at = ecsv;
    char name[64];
    const char *h = plain;
    int n_cols = 0, found = 0;
    while (h && *h && *h != '\n') {
        size_t len = strcspn(h, ",\n");
        snprintf(name, sizeof name, "{name: %.*s,", (int)len, h);
        const char *hit = at ? strstr(at, name) : NULL;
        found += hit != NULL;
        if (hit) at = hit;
        n_cols++;
        h += len + (h[len] == ',');
    }
    CHECK(n_cols == 10 && found == n_cols, "ECSV: %d of %d columns described in order", found, n_cols);
}

/* --csv NAME.ecsv: ECSV 1.0, the CSV's lines after a YAML header
 * with a column entry for every name of the CSV's header line */
static void csv_named_ecsv_is_written_as_ecsv(void) {
    int rc = cli_run("angcorr d.txt r.txt -o e.out -q --png none --nbins 20 --jackknife 2 --mean-theta --csv t.csv");
    CHECK(rc == 0, "CSV run: exit %d", rc);
    rc = cli_run("angcorr d.txt r.txt -o e.out -q --png none --nbins 20 --jackknife 2 --mean-theta --csv t.EcSv");
    CHECK(rc == 0, "ECSV run: exit %d", rc);
    char *plain = cli_read(cli_path("t.csv")), *ecsv = cli_read(cli_path("t.EcSv"));
    CHECK(plain && ecsv && strncmp(ecsv, "# %ECSV 1.0\n# ---\n# delimiter: ','\n# datatype:\n", 43) == 0,
          "ECSV header: '%.40s'", ecsv ? ecsv : "");
    const char *body = ecsv;
    while (body && *body == '#') body = strchr(body, '\n') ? strchr(body, '\n') + 1 : body + strlen(body);
    CHECK(plain && body && strcmp(body, plain) == 0, "the ECSV's lines after its header are the CSV's");
    CHECK(ecsv && strstr(ecsv, "# - {name: theta_lo_deg, unit: deg, datatype: float64") &&
              strstr(ecsv, "# - {name: omega_err, datatype: float64") &&
              strstr(ecsv, "# - {name: rr, datatype: uint64") && strstr(ecsv, "# - {estimator: landy-szalay}") &&
              strstr(ecsv, "# - {n_data: 1500}") && strstr(ecsv, "# schema: astropy-2.0\n"),
          "ECSV columns and meta");
    ecsv_describes_every_column_in_order(plain, ecsv);
    free(plain), free(ecsv);
}

/* a link to a file is written through, as a shell's > would: the
 * link stays, the file it points at gets the output; a link to an
 * input is refused as the input's own name is */
static void output_link_to_a_file_is_written_through(void) {
    cli_write("target.out", "old target\n");
    CHECK(symlink("target.out", cli_path("through.link")) == 0, "symlink");
    CHECK(symlink("d.txt", cli_path("input.link")) == 0, "symlink");
    int rc = cli_run("angcorr d.txt r.txt -o through.link -q --png none --nbins 20");
    struct stat sb;
    char *t = cli_read(cli_path("target.out"));
    CHECK(rc == 0 && lstat(cli_path("through.link"), &sb) == 0 && S_ISLNK(sb.st_mode),
          "-o a link to a file: exit %d, the link %s", rc, S_ISLNK(sb.st_mode) ? "kept" : "replaced");
    CHECK(t && strncmp(t, "bin start", 9) == 0, "the file a link points at got the output: '%.20s'", t ? t : "");
    free(t);
    rc = cli_run("angcorr d.txt r.txt -o input.link -q --png none --nbins 20");
    char *e = cli_stderr(), *d = cli_read(cli_path("d.txt"));
    CHECK(rc == 2 && e && strstr(e, "input.link: is an input of this run (as d.txt)"),
          "-o a link to an input: exit %d, %s", rc, e ? e : "");
    CHECK(d && strncmp(d, "1500\n", 5) == 0, "the input is unchanged");
    free(e), free(d);
}

/* a link to nothing (through a second link, relative to its own
 * folder) gets the file made where it points, as a shell's >
 * makes it; a loop of links, or a link into a missing folder, is
 * refused and left as it was */
static void output_link_to_nothing_makes_the_file(void) {
    CHECK(mkdir(cli_path("sub"), 0755) == 0 || errno == EEXIST, "mkdir sub");
    CHECK(symlink("../made.out", cli_path("sub/far.link")) == 0, "symlink");
    CHECK(symlink("sub/far.link", cli_path("near.link")) == 0, "symlink");
    CHECK(symlink("loop.b", cli_path("loop.a")) == 0 && symlink("loop.a", cli_path("loop.b")) == 0, "symlink");
    CHECK(symlink("nowhere/x.out", cli_path("nowhere.link")) == 0, "symlink");
    int rc = cli_run("angcorr d.txt r.txt -o near.link -q --png none --nbins 20");
    struct stat sb;
    char *t = cli_read(cli_path("made.out"));
    CHECK(rc == 0 && lstat(cli_path("near.link"), &sb) == 0 && S_ISLNK(sb.st_mode) &&
              lstat(cli_path("sub/far.link"), &sb) == 0 && S_ISLNK(sb.st_mode),
          "-o a link to nothing: exit %d, both links kept", rc);
    CHECK(t && strncmp(t, "bin start", 9) == 0, "the file was made where the links lead: '%.20s'", t ? t : "");
    free(t);
    const struct {
        const char *name, *why;
    } refused_links[] = {{"loop.a", "loop.a: is a loop of symbolic links"},
                         {"nowhere.link", "nowhere.link: is a link to a name in a folder that does not exist"}};
    for (int k = 0; k < 2; k++) {
        char args[200];
        snprintf(args, sizeof args, "angcorr d.txt r.txt -o %s -q --png none --nbins 20", refused_links[k].name);
        rc = cli_run(args);
        char *e = cli_stderr();
        CHECK(rc != 0 && e && strstr(e, refused_links[k].why) && lstat(cli_path(refused_links[k].name), &sb) == 0 &&
                  S_ISLNK(sb.st_mode),
              "-o %s: exit %d, %s", refused_links[k].name, rc, e ? e : "");
        free(e);
    }
}

/* a hidden file's name: its leading dot is no extension, so the
 * plot and the covariance take the whole name (.a.png, not .png) */
static void hidden_file_name_has_no_extension(void) {
    int rc = cli_run("angcorr d.txt r.txt -o .a -q --nbins 20 --jackknife 4");
    CHECK(rc == 0 && access(cli_path(".a"), F_OK) == 0 && access(cli_path(".a_cov.csv"), F_OK) == 0 &&
              access(cli_path("_cov.csv"), F_OK) != 0 && access(cli_path(".png"), F_OK) != 0,
          "-o .a: exit %d", rc);
    rc = cli_run("angcorr d.txt r.txt -o .b.out -q --nbins 20 --png none --jackknife 4");
    CHECK(rc == 0 && access(cli_path(".b_cov.csv"), F_OK) == 0, "-o .b.out: exit %d", rc);
}

/* a name longer than a file's name may be: refused before the work */
static void output_name_over_255_bytes_refused(void) {
    char long_args[600];
    int at = snprintf(long_args, sizeof long_args, "angcorr d.txt r.txt -q --nbins 20 -o ");
    memset(long_args + at, 'y', 256);
    long_args[at + 256] = '\0';
    int rc = cli_run(long_args);
    char *e = cli_stderr();
    CHECK(rc == 1 && e && strstr(e, "is a name longer than the 255 bytes a file's name may have") && !strstr(e, "DD:"),
          "a 256-byte output name: exit %d, %s", rc, e ? e : "");
    free(e);
}

/* names PLplot would read as a pattern (%n), ... */
static void png_name_plplot_would_read_as_a_pattern(void) {
    int rc = cli_run("angcorr d.txt r.txt -o pct.out -q --nbins 20 --png 'w%n.png'");
    CHECK(rc == 0 && access(cli_path("w%n.png"), F_OK) == 0 && cli_count_files(".tmp") == 0,
          "--png 'w%%n.png': exit %d", rc);
}

/* ... and names of 250 bytes, whose temporary names would pass 255 */
static void output_name_of_250_bytes_is_written(void) {
    char long_name[260], args[700];
    memset(long_name, 'x', 246);
    memcpy(long_name + 246, ".out", 5); /* 250 bytes */
    snprintf(args, sizeof args, "angcorr d.txt r.txt -o %s -q --nbins 20 --png none", long_name);
    int rc = cli_run(args);
    char *e = cli_stderr();
    CHECK(rc == 0 && access(cli_path(long_name), F_OK) == 0 && cli_count_files("pkstage") == 0,
          "a 250-byte output name: exit %d, %s", rc, e ? e : "");
    free(e);
    unlink(cli_path(long_name));
}

/* an empty name for an input */
static void empty_input_name_refused(void) {
    int rc = cli_run("angcorr '' r.txt -o keep.out -q --png none --nbins 20");
    char *empty_err = cli_stderr();
    CHECK(rc == 1 && empty_err && strstr(empty_err, "'': an empty file name"), "an empty input name: exit %d, %s", rc,
          empty_err ? empty_err : "");
    free(empty_err);
}

/* jackknife errors that cannot be had (every random in one patch):
 * the run goes through and says so */
static void jackknife_errors_of_nan_are_said(void) {
    cli_write("same.txt", "3\n600 600\n600 600\n600 600\n");
    int rc = cli_run("angcorr d.txt same.txt -o jk.out -q --png none --nbins 20 --jackknife 2");
    char *jk_err = cli_stderr();
    CHECK(rc == 0 && jk_err && strstr(jk_err, "have no jackknife error (nan)"), "jackknife errors of nan: exit %d, %s",
          rc, jk_err ? jk_err : "");
    free(jk_err);
}

/* no PNG driver (PLplot finds none in an empty folder): the default
 * plot is left out with a warning, one asked for by name fails the
 * run; PLplot neither prompts nor ends the process */
static void no_png_driver_leaves_the_default_plot_out(void) {
    char empty_dir[700];
    snprintf(empty_dir, sizeof empty_dir, "mkdir -p '%s'", cli_path("no_drivers"));
    CHECK(system(empty_dir) == 0, "mkdir");
    setenv("PLPLOT_DRV_DIR", cli_path("no_drivers"), 1);
    int rc = cli_run("angcorr d.txt r.txt -o nodrv.out --nbins 20 < /dev/null");
    char *e = cli_stderr();
    CHECK(rc == 0 && cli_count_files("nodrv.out") == 1 && cli_count_files("nodrv.png") == 0 && e &&
              strstr(e, "no PNG plot: PLplot could not list its drivers: No device drivers found") &&
              strstr(e, "(apt-get install plplot-driver-cairo)"),
          "default plot without a driver: exit %d, %s", rc, e ? e : "");
    free(e);
    cli_write("keep.out", "old omega\n");
    rc = cli_run("angcorr d.txt r.txt -o keep.out --nbins 20 --png asked.png -q < /dev/null");
    char *o = cli_read(cli_path("keep.out"));
    CHECK(rc == 1 && o && strcmp(o, "old omega\n") == 0 && cli_count_files("pkstage") == 0,
          "a plot asked for without a driver: exit %d", rc);
    free(o);
    unsetenv("PLPLOT_DRV_DIR");
}

/* PLplot failing for another reason (a working folder removed under
 * the run: it cannot list its drivers) is said as that, not as a
 * package to install */
static void plplot_failing_otherwise_is_said_as_that(void) {
    char gone[2400];
    snprintf(gone, sizeof gone,
             "cd '%s' && mkdir gone && cd gone && rmdir ../gone && '%s' angcorr '%s' '%s' -o '%s' --nbins 20 "
             "-q 2> '%s'",
             cli_dir, cli_binary(), cli_path("d.txt"), cli_path("r.txt"), cli_path("gone.out"), cli_path("err.txt"));
    int grc = system(gone);
    char *ge = cli_stderr();
    CHECK(WIFEXITED(grc) && WEXITSTATUS(grc) == 0 && cli_count_files("gone.out") == 1 && ge &&
              strstr(ge, "no PNG plot: PLplot could not list its drivers") && !strstr(ge, "apt-get"),
          "a removed working folder: exit %d, %s", grc, ge ? ge : "");
    free(ge);
}

/* a --png name of 233 bytes, whose temporary names (staged, then
 * PLplot's) pass 255 bytes unless cut: written, nothing left */
static void png_name_of_233_bytes_is_written(void) {
    char long_png[300], args[400];
    struct stat png_sb;
    memset(long_png, 'p', 229);
    snprintf(long_png + 229, sizeof long_png - 229, ".png");
    snprintf(args, sizeof args, "angcorr d.txt r.txt -o keep.out --nbins 20 --png %s -q < /dev/null", long_png);
    int rc = cli_run(args);
    char *o = cli_read(cli_path("keep.out"));
    char *e = cli_stderr();
    CHECK(rc == 0 && o && strncmp(o, "bin start", 9) == 0 && cli_count_files("pkstage") == 0 &&
              cli_count_files(".tmp") == 0 && stat(cli_path(long_png), &png_sb) == 0 && png_sb.st_size > 1000,
          "a 233-byte PNG name: exit %d, %s", rc, e ? e : "");
    free(o);
    free(e);
}

/* bins that hold no pair: the outputs and an empty plot, not a failure */
static void bins_without_pairs_are_not_a_failure(void) {
    int rc = cli_run("angcorr d.txt r.txt -o empty.out -q --theta-min 179 --nbins 10");
    CHECK(rc == 0 && cli_count_files("empty.out") == 1 && cli_count_files("empty.png") == 1, "empty bins: exit %d", rc);
}

/* Log bins and the other estimators run and write a plot. */
static void log_bins_and_hamilton_write_a_plot(void) {
    int rc = cli_run("angcorr d.txt r.txt -o log.out --theta-min 0.01 --log 10 --nbins 20 --estimator hamilton -q");
    CHECK(rc == 0 && cli_count_files("log.png") == 1, "log bins with Hamilton (exit %d)", rc);
}

/* RR kept with --save-rr and used again with --rr: the same outputs as
 * counting it, for another data catalog too; ... */
static void kept_rr_gives_the_counted_outputs(void) {
    check_rng rng2 = check_rng_make(777);
    write_catalog("d2.txt", &rng2, 1300);
    write_catalog("r2.txt", &rng2, 2100); /* as many objects as r.txt, other positions */
    int rc = cli_run("angcorr d.txt r.txt -o rr_a.out --csv rr_a.csv --save-rr kept_rr.txt --png none -q");
    CHECK(rc == 0 && cli_count_files("kept_rr.txt") == 1, "--save-rr: exit %d", rc);
    int rc1 = cli_run("angcorr d2.txt r.txt -o rr_b.out --csv rr_b.csv --rr kept_rr.txt --png none -q");
    int rc2 = cli_run("angcorr d2.txt r.txt -o rr_c.out --csv rr_c.csv --png none -q");
    char *b_out = cli_read(cli_path("rr_b.out")), *c_out = cli_read(cli_path("rr_c.out"));
    char *b_csv = cli_read(cli_path("rr_b.csv")), *c_csv = cli_read(cli_path("rr_c.csv"));
    CHECK(rc1 == 0 && rc2 == 0 && b_out && c_out && b_csv && c_csv && strcmp(b_out, c_out) == 0 &&
              strcmp(b_csv, c_csv) == 0,
          "--rr: outputs differ from counting RR (exit %d, %d)", rc1, rc2);
    free(b_out);
    free(c_out);
    free(b_csv);
    free(c_csv);
}

/* the kept RR damaged: a damaged count on the fourth bin (bad_rr.txt),
 * the file cut after it (cut_rr.txt), a count changed (edited_rr.txt) */
static void write_damaged_rr_files(const char *kept) {
    const char *line = kept;
    for (int k = 0; k < 7 && line; k++) line = strchr(line, '\n') + 1;
    const char *end = strchr(line, '\n');
    FILE *fp = fopen(cli_path("bad_rr.txt"), "w");
    fprintf(fp, "%.*s", (int)(end - kept), kept);
    fprintf(fp, "x\n%s", end + 1);
    fclose(fp);
    fp = fopen(cli_path("cut_rr.txt"), "w");
    fprintf(fp, "%.*s", (int)(end + 1 - kept), kept);
    fclose(fp);
    const char *count = end; /* the fourth bin's count, one less (the counts add up to all pairs) */
    while (count[-1] != ' ') count--;
    unsigned long long c = strtoull(count, NULL, 10);
    fp = fopen(cli_path("edited_rr.txt"), "w");
    fprintf(fp, "%.*s%llu%s", (int)(count - kept), kept, c ? c - 1 : 1, end);
    fclose(fp);
}

/* ... a file of another random catalog, other bins, a cut or damaged
 * file, and the feature paths are refused, naming the file and line,
 * and write nothing. */
static void rr_files_that_do_not_fit_refused(void) {
    char *kept = cli_read(cli_path("kept_rr.txt"));
    if (kept) write_damaged_rr_files(kept);
    free(kept);
    const struct {
        const char *args, *says;
    } bad[] = {
        {"d2.txt r2.txt --rr kept_rr.txt", "kept_rr.txt:2: these RR counts are of another random catalog"},
        {"d2.txt d.txt --rr kept_rr.txt", "kept_rr.txt:2: these RR counts are of a random catalog of 2100"},
        {"d2.txt r.txt --rr kept_rr.txt --nbins 720", "kept_rr.txt:3: 1440 bins in the file, 720"},
        {"d2.txt r.txt --rr kept_rr.txt --bin-width 0.2", "kept_rr.txt:5: bin 0 is [0, 0.0043633231299858239) rad"},
        {"d2.txt r.txt --rr bad_rr.txt", "bad_rr.txt:8: expected 'LO HI RR'"},
        {"d2.txt r.txt --rr cut_rr.txt", "cut_rr.txt:9: the file ends after 4 of its 1440 bins"},
        {"d2.txt r.txt --rr edited_rr.txt", "edited_rr.txt:4: the counts do not match their checksum"},
        {"d2.txt r.txt --rr omega.csv", "omega.csv:1: not a pairkit RR file"},
        {"d2.txt r.txt --rr kept_rr.txt --jackknife 4", "kept_rr.txt:1: these are plain RR counts"},
        {"d2.txt r.txt --rr kept_rr.txt --mean-theta --csv x.csv", "kept_rr.txt:1: these are plain RR counts"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        char args[256];
        snprintf(args, sizeof args, "angcorr %s -o rr_bad.out --png none -q", bad[b].args);
        int rc = cli_run(args);
        char *e = cli_stderr();
        /* a file that does not fit the run is bad input (1) */
        CHECK(rc == 1 && e && strstr(e, bad[b].says) && cli_count_files("rr_bad.out") == 0 &&
                  cli_count_files("x.csv") == 0,
              "%s: exit %d, %s", bad[b].args, rc, e ? e : "");
        free(e);
    }
}

/* An output named like an input (by the same name, another path to it,
 * or a hard link) is refused before the count, and the input is kept;
 * a default name made later (the PNG beside -o) is caught when staged. */
static void output_named_like_an_input_refused(void) {
    char *before = cli_read(cli_path("d.txt"));
    char link_cmd[1400];
    snprintf(link_cmd, sizeof link_cmd, "ln -f '%s' '%s' && mkdir -p '%s'", cli_path("r.txt"), cli_path("r_link.txt"),
             cli_path("sub"));
    CHECK(system(link_cmd) == 0, "ln");
    cli_write("edges_in.txt", "0\n0.5\n1\n");
    snprintf(link_cmd, sizeof link_cmd, "cp '%s' '%s'", cli_path("r.txt"), cli_path("d_plot.png"));
    CHECK(system(link_cmd) == 0, "cp"); /* a catalog under the name of the default plot */
    char *plot_before = cli_read(cli_path("d_plot.png"));
    const struct {
        const char *args, *says;
    } clash[] = {
        {"d.txt r.txt -o d.txt --nbins 20", "d.txt: is an input of this run; give the output another name"},
        {"d.txt r.txt -o ./sub/../d.txt --nbins 20", "./sub/../d.txt: is an input of this run (as d.txt)"},
        {"d.txt r.txt -o x.out --csv r_link.txt --nbins 20", "r_link.txt: is an input of this run (as r.txt)"},
        {"d.txt r.txt -o x.out --save-rr kept_rr.txt --rr kept_rr.txt --nbins 20",
         "kept_rr.txt: is an input of this run"},
        {"d.txt r.txt -o x.out --edges edges_in.txt --png edges_in.txt", "edges_in.txt: is an input of this run"},
        {"d.txt d_plot.png -o d_plot.out --format native --nbins 20", "d_plot.png: is an input of this run"},
    };
    for (size_t b = 0; b < sizeof clash / sizeof clash[0]; b++) {
        char args[256];
        snprintf(args, sizeof args, "angcorr %s -q", clash[b].args);
        int rc = cli_run(args);
        char *e = cli_stderr(), *after = cli_read(cli_path("d.txt"));
        CHECK(rc != 0 && e && strstr(e, clash[b].says) && cli_count_files("x.out") == 0 &&
                  cli_count_files("d_plot.out") == 0 && cli_count_files("pkstage") == 0,
              "%s: exit %d, %s", clash[b].args, rc, e ? e : "");
        CHECK(before && after && strcmp(before, after) == 0, "%s: the data catalog changed", clash[b].args);
        free(e);
        free(after);
    }
    char *r = cli_read(cli_path("r.txt")), *plot_after = cli_read(cli_path("d_plot.png"));
    CHECK(r && strstr(r, "\n") && plot_after && plot_before && strcmp(plot_after, plot_before) == 0,
          "an input was replaced");
    free(r);
    free(plot_after);
    free(plot_before);
    free(before);
}

/* Ctrl-C: the bundled problem with the scalar kernel runs for tens of
 * seconds; SIGINT after one second must end it within a second more,
 * exit 130, and leave no output. */
static void ctrl_c_stops_the_run_within_a_second(void) {
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    char data[600], rnd[600];
    snprintf(data, sizeof data, "%s/data/galaxy/data_100k_arcmin.txt", cwd);
    snprintf(rnd, sizeof rnd, "%s/data/galaxy/flat_100k_arcmin.txt", cwd);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(cli_dir) != 0) _exit(99);
        if (!freopen("sigint_err.txt", "w", stderr)) _exit(99);
        signal(SIGINT, SIG_DFL); /* as a terminal's job has it, whatever this test inherited */
        execl(cli_binary(), cli_binary(), "angcorr", data, rnd, "-o", "sigint.out", "--kernel", "scalar", (char *)NULL);
        _exit(98);
    }
    struct timespec one = {1, 0};
    nanosleep(&one, NULL);
    double t0 = check_now();
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    double took = check_now() - t0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 130, "exit status after SIGINT: %d",
          WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
    CHECK(took < 1.0, "stopped %.2f s after SIGINT", took);
    CHECK(cli_count_files("sigint.") == 0, "no output after SIGINT");
    char *e = cli_read(cli_path("sigint_err.txt"));
    CHECK(e && strstr(e, "interrupted"), "says it was interrupted: %s", e ? e : "");
    free(e);
}

/* bins beyond every random pair (the catalogs span 90 degrees): a
 * valid run with exit 0, and a warning that nothing is in range */
static void bins_beyond_every_pair_get_a_warning(void) {
    int rc = cli_run("angcorr d.txt r.txt -o far.out --png none -q --theta-min 100 --nbins 4 --bin-width 1");
    char *e = cli_stderr(), *far = cli_read(cli_path("far.out"));
    CHECK(rc == 0 && e &&
              strstr(e,
                     "pairkit angcorr: warning: no bin has random pairs in range (RR is 0 in all 4 bins, 100 "
                     "to 104 degrees): far.out has no rows"),
          "no random pairs in range: exit %d, stderr '%s'", rc, e ? e : "");
    CHECK(far && strchr(far, '\n') == far + strlen(far) - 1, "far.out: the header line alone: '%s'", far ? far : "");
    free(e), free(far);
    rc = cli_run("angcorr d.txt r.txt -o near.out --png none -q --nbins 20");
    e = cli_stderr();
    CHECK(rc == 0 && e && !strstr(e, "warning"), "pairs in range: exit %d, stderr '%s'", rc, e ? e : "");
    free(e);
}

int main(void) {
    check_rng rng = check_rng_make(4242);
    cli_scratch();
    write_catalog("d.txt", &rng, 1500);
    write_catalog("r.txt", &rng, 2100);

    char *omega = run_writing_every_output();
    outputs_get_the_mode_of_fopen();
    if (omega) omega_out_in_the_course_format(omega);
    csv_has_a_row_per_bin();
    png_plot_is_written();
    every_kernel_gives_the_same_bytes(omega);
    free(omega);
    approximate_kernel_is_for_the_bench_only();
    png_none_in_any_case_leaves_the_plot_out();

    csv_suffix_in_any_case_read_in_degrees(&rng);
    byte_order_mark_changes_nothing();
    native_file_named_fits_txt_read_in_arcmin();
    gzip_csv_refused_plainly();

    failed_run_changes_no_output();
    outputs_a_rename_would_replace_refused();
    csv_named_ecsv_is_written_as_ecsv();
    output_link_to_a_file_is_written_through();
    output_link_to_nothing_makes_the_file();
    hidden_file_name_has_no_extension();
    output_name_over_255_bytes_refused();
    png_name_plplot_would_read_as_a_pattern();
    output_name_of_250_bytes_is_written();
    empty_input_name_refused();
    jackknife_errors_of_nan_are_said();
    no_png_driver_leaves_the_default_plot_out();
    plplot_failing_otherwise_is_said_as_that();
    png_name_of_233_bytes_is_written();
    bins_without_pairs_are_not_a_failure();
    log_bins_and_hamilton_write_a_plot();

    kept_rr_gives_the_counted_outputs();
    rr_files_that_do_not_fit_refused();
    output_named_like_an_input_refused();
    ctrl_c_stops_the_run_within_a_second();
    bins_beyond_every_pair_get_a_warning();

    cli_scratch_remove();
    return check_finish("test_angcorr_cli");
}
