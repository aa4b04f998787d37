/* test_fault_limits.c - the limits a shell puts on a command, and
 * standard output that cannot take what is printed:
 * - a file-size limit (ulimit -f) below each command's outputs: the write
 *   fails with "File too large" (SIGXFSZ would kill the process and leave
 *   its staged files), the command exits 1 naming the file, and no file,
 *   staged or final, is left;
 * - standard output on a full device (/dev/full): exit 1 and a message,
 *   not exit 0 with the table lost; closed, with nothing to print: exit 0;
 * - /dev/stdout, /dev/fd/N or /proc/self/fd/N as an output's name:
 *   refused, the file they point at left as it was;
 * - an output written again keeps its permission bits;
 * - a pipe where a FITS file or an .npz is read: refused;
 * - a crash in a library while the PNG is drawn (a memory limit): no
 *   staged or scratch file left;
 * - a folder the user cannot write: refused before the work. */
#include <errno.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "pairkit/angcorr.h"
#include "pairkit/dftimage.h"

/* Run `pairkit <args>` in the scratch folder under `limit` (a shell's
 * ulimit arguments, "" for none), its stdout redirected by `out` ("> f",
 * ">&-"); the exit code. */
static int run_limited(const char *limit, const char *args, const char *out) {
    char cmd[4096], ulimit[64] = "";
    if (limit[0]) snprintf(ulimit, sizeof ulimit, "ulimit %s; ", limit);
    snprintf(cmd, sizeof cmd, "cd '%s' && (%sexec '%s' %s) %s 2> err.txt", cli_dir, ulimit, cli_binary(), args, out);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/* Entries in the scratch folder's subfolder `dir` (0 when it is absent). */
static int entries_in(const char *dir) {
    DIR *d = opendir(cli_path(dir));
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += e->d_name[0] != '.' || e->d_name[1] > '.';
    if (d) closedir(d);
    return n;
}

/* A folder this user cannot write (0555; as root, the commands run as
 * nobody through setpriv, since root may write anywhere): every command
 * refuses it before the work, naming the folder, exit 1, nothing left. */
static void unwritable_folders(void) {
    char prefix[128] = "";
    if (geteuid() == 0) {
        snprintf(prefix, sizeof prefix, "setpriv --reuid=65534 --regid=65534 --clear-groups ");
        char probe[1200];
        snprintf(probe, sizeof probe, "chmod 755 '%s' && %s'%s' version > /dev/null 2>&1", cli_dir, prefix,
                 cli_binary());
        if (system(probe) != 0) {
            printf(
                "unwritable folders: cannot run the command as nobody here (setpriv, or the binary's folders); "
                "not checked\n");
            return;
        }
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir '%s' && chmod 555 '%s'", cli_path("ro"), cli_path("ro"));
    CHECK(system(cmd) == 0, "%s", cmd);
    const char *const cases[][2] = {
        {"angcorr d.txt r.txt -o ro/w.out -q", "ro/w.out: cannot write: the folder ro is not writable"},
        {"dftimage v.npz --size 16 -o ro/i.fits -q", "ro/i.fits: cannot write: the folder ro is not writable"},
        {"memsort trace -o ro -q", "ro: is not writable"},
        {"memsort trace -o ro/new -q", "ro/new: cannot be made: its parent folder is not writable"},
        {"memsort-fill plans/memsort.bin trace -o ro/fill -q", "ro/fill: cannot be made"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && %s'%s' %s > out.txt 2> err.txt", cli_dir, prefix, cli_binary(),
                 cases[k][0]);
        int rc = system(cmd);
        rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
        char *err = cli_stderr();
        CHECK(rc == 1 && err && strstr(err, cases[k][1]) && entries_in("ro") == 0,
              "'%s' into a folder it cannot write: exit %d, %d files there, '%s'", cases[k][0], rc, entries_in("ro"),
              err ? err : "");
        free(err);
    }
    snprintf(cmd, sizeof cmd, "chmod 755 '%s'", cli_path("ro"));
    if (system(cmd) != 0) printf("could not chmod %s\n", cli_path("ro"));
}

int main(void) {
    cli_scratch();
    char cwd[1024];
    if (!getcwd(cwd, sizeof cwd)) return 1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && head -n 2001 '%s/data/galaxy/data_100k_arcmin.txt' | sed '1s/.*/2000/' > d.txt && "
             "head -n 2001 '%s/data/galaxy/flat_100k_arcmin.txt' | sed '1s/.*/2000/' > r.txt && "
             "cp '%s/data/vis/lesson_small.npz' v.npz && mkdir o",
             cli_dir, cwd, cwd, cwd);
    CHECK(system(cmd) == 0, "inputs: %s", cmd);
    CHECK(cli_run("memsort-gen trace --entries 300000 -q") == 0, "memsort-gen for the inputs");
    CHECK(cli_run("memsort trace -o plans -q") == 0, "memsort for the plans");
    /* whether this machine draws PNGs (PLplot and its cairo driver) */
    CHECK(cli_run("angcorr d.txt r.txt -o probe.out -q") == 0, "angcorr for the PNG probe");
    const int png = access(cli_path("probe.png"), F_OK) == 0;
    if (!png) printf("no PNG here (PLplot's cairo driver): the plot's cases count without it\n");

    /* each command's outputs in o/, under a limit of 4 KiB a file */
    const char *const cases[][2] = {
        {"angcorr d.txt r.txt -o o/w.out --csv o/w.csv -q", "o/w.out"},
        {"angcorr d.txt r.txt -o o/w.out --png none -q", "o/w.out"},
        {"dftimage v.npz --size 128 -o o/i.fits -q", "o/i.fits"},
        {"memsort trace -o o/ms -q", "o/ms/memsort.bin"},
        {"memsort-fill plans/memsort.bin trace -o o/fill -q", "o/fill/fill.bin"},
        {"memsort-gen o/gen --entries 300000 -q", "o/gen/mem_addr_0000.bin"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = run_limited("-f 4", cases[k][0], "> out.txt");
        char *err = cli_stderr();
        int left = entries_in("o") + entries_in("o/ms") + entries_in("o/fill") + entries_in("o/gen");
        CHECK(rc == 1 && err && strstr(err, cases[k][1]) &&
                  (strstr(err, "File too large") || strstr(err, "file-size limit")) && !strstr(err, ".pkstage") &&
                  left == 0,
              "'%s' under ulimit -f 4: exit %d, %d files left, '%s'", cases[k][0], rc, left, err ? err : "");
        free(err);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", cli_path("o"), cli_path("o"));
        if (system(cmd) != 0) printf("could not empty %s\n", cli_path("o"));
    }
    /* a memory limit under which a library may fail while drawing the PNG
     * (fontconfig and GLib end the process under 100-200 MB here, with
     * SIGSEGV or SIGTRAP): whatever the end, no staged or scratch file is
     * left, and a run that succeeds has its outputs */
    const char *const vm[] = {"-v 100000", "-v 200000", "-v 400000"};
    for (size_t k = 0; k < sizeof vm / sizeof vm[0]; k++) {
        int rc = run_limited(vm[k], "angcorr d.txt r.txt -o o/w.out -q", "> out.txt");
        int left = entries_in("o");
        printf("angcorr with a PNG under ulimit %s: exit %d, %d files\n", vm[k], rc, left);
        CHECK(rc == 0 ? left == 1 + png : left == 0, "angcorr under ulimit %s: exit %d, %d files left", vm[k], rc,
              left);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", cli_path("o"), cli_path("o"));
        if (system(cmd) != 0) printf("could not empty %s\n", cli_path("o"));
    }
    /* the same without the limit: the outputs are made (the inputs fit) */
    CHECK(run_limited("", cases[0][0], "> out.txt") == 0 && entries_in("o") == 2 + png, "angcorr without the limit");

    /* standard output */
    const char *const printing[] = {"version", "angcorr --help", "bench memsort --entries 100000 --runs 1 --no-ref"};
    for (size_t k = 0; k < sizeof printing / sizeof printing[0]; k++) {
        int rc = run_limited("", printing[k], "> /dev/full");
        char *err = cli_stderr();
        CHECK(rc == 1 && err && strstr(err, "pairkit: writing to standard output failed"),
              "'%s' > /dev/full: exit %d, '%s'", printing[k], rc, err ? err : "");
        free(err);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", cli_path("o"), cli_path("o"));
    if (system(cmd) != 0) printf("could not empty %s\n", cli_path("o"));
    int rc = run_limited("", "angcorr d.txt r.txt -o o/q.out --png none -q", "> /dev/full");
    CHECK(rc == 0 && entries_in("o") == 1, "angcorr -q, nothing printed, stdout on /dev/full: exit %d", rc);
    rc = run_limited("", "angcorr d.txt r.txt -o o/q.out --png none -q", ">&-");
    CHECK(rc == 0, "angcorr -q with stdout closed: exit %d", rc);

    /* standard output, or another open descriptor, named as an output: a
     * rename over the file it points at would take it from the shell
     * (whose `>> log` would lose what was there and what follows) */
    cli_write("log", "keep\n");
    const char *const via_fd[][2] = {
        {"angcorr d.txt r.txt --png none -q -o /dev/stdout", ">> log"},
        {"angcorr d.txt r.txt --png none -q -o o/x.out --csv /dev/fd/3", "3>> log"},
        {"dftimage v.npz --size 32 --png none -q -o /proc/self/fd/1", ">> log"},
        {"dftimage v.npz --size 32 -q -o o/x.fits --png /dev/stdout", ">> log"},
    };
    for (size_t k = 0; k < sizeof via_fd / sizeof via_fd[0]; k++) {
        rc = run_limited("", via_fd[k][0], via_fd[k][1]);
        char *err = cli_stderr(), *log = cli_read(cli_path("log"));
        CHECK(rc == 1 && err && strstr(err, "names an open file descriptor") && log && strcmp(log, "keep\n") == 0,
              "'%s' %s: exit %d, log '%s', '%s'", via_fd[k][0], via_fd[k][1], rc, log ? log : "(gone)", err ? err : "");
        free(err);
        free(log);
    }

    /* an output written again keeps the permission bits it was given
     * (the new file is renamed over it); memsort's chunk-table writer too */
    const char *const again[][2] = {{"angcorr d.txt r.txt -q -o o/m.out --csv o/m.csv", "o/m.out"},
                                    {"angcorr d.txt r.txt -q -o o/m.out --csv o/m.csv", "o/m.csv"},
                                    {"angcorr d.txt r.txt -q -o o/m.out --csv o/m.csv", "o/m.png"},
                                    {"dftimage v.npz --size 32 --png none -q -o o/i.fits", "o/i.fits"},
                                    {"memsort trace -o o/ms -q", "o/ms/memsort.bin"}};
    for (size_t k = 0; k < sizeof again / sizeof again[0]; k++) {
        if (!png && strstr(again[k][1], ".png")) continue;
        rc = run_limited("", again[k][0], "> out.txt");
        CHECK(rc == 0 && chmod(cli_path(again[k][1]), 0604) == 0, "'%s': exit %d", again[k][0], rc);
        rc = run_limited("", again[k][0], "> out.txt");
        struct stat sb;
        CHECK(rc == 0 && stat(cli_path(again[k][1]), &sb) == 0 && (sb.st_mode & 07777) == 0604,
              "%s written again: exit %d, mode %o", again[k][1], rc, (unsigned)(sb.st_mode & 07777));
    }

    /* a pipe given where a format read by seeking is expected (a FIFO,
     * a shell's <(...)): refused at once, naming it, without reading */
    if (mkfifo(cli_path("pipe"), 0600) == 0) {
        pk_context ctx;
        pk_context_init(&ctx);
        pk_vis vis;
        pk_catalog cat;
        pk_catalog_spec spec = {PK_FORMAT_FITS, PK_UNITS_DEG, NULL, NULL, NULL, 0};
        pk_status st[3] = {pk_vis_read_uvfits(&ctx, cli_path("pipe"), PK_WEIGHTS_DATA, &vis), PK_OK, PK_OK};
        char said[3][512];
        snprintf(said[0], sizeof said[0], "%s", ctx.message);
        st[1] = pk_vis_read_npz(&ctx, cli_path("pipe"), &vis);
        snprintf(said[1], sizeof said[1], "%s", ctx.message);
        st[2] = pk_catalog_read_spec(&ctx, cli_path("pipe"), &spec, &cat, NULL);
        snprintf(said[2], sizeof said[2], "%s", ctx.message);
        for (int k = 0; k < 3; k++)
            CHECK(st[k] == PK_ERR_IO && strstr(said[k], "pipe: is a pipe") && strstr(said[k], "read by seeking"),
                  "reader %d given a pipe: status %d, '%s'", k, (int)st[k], said[k]);
    } else {
        CHECK(0, "mkfifo: %s", strerror(errno));
    }

    unwritable_folders();
    cli_scratch_remove();
    return check_finish("test_fault_limits");
}
