/* test_fault_sigint.c - Ctrl-C (SIGINT) during a long memsort run and while
 * memsort-gen writes its chunk files: the command stops within a second
 * and leaves no file behind, or (when the signal came after the work) a
 * complete output. Also Ctrl-C once memsort, memsort-fill and angcorr are
 * writing their outputs (a staged file seen): exit 130 and no output; a
 * signal ignored when the command starts (nohup) stays ignored; SIGSEGV,
 * SIGBUS or SIGABRT sent while writing end the run, no staged file left.
 * angcorr and dftimage have the Ctrl-C test of a long run in
 * test_angcorr_cli.c and test_dftimage_cli.c. */
#include <signal.h>
#include <time.h>

#include "cli_util.h"
#include "pairkit/memsort.h"

/* Start pairkit with args (NULL-terminated, at most 18) in the scratch
 * folder, its stderr into err.txt, with signal `ignored` (0: none) ignored
 * as nohup ignores SIGHUP; the child's pid. */
static pid_t spawn_ignoring(const char *const *args, int ignored) {
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(cli_dir) != 0) _exit(99);
        if (!freopen("err.txt", "w", stderr)) _exit(99);
        signal(SIGINT, SIG_DFL);
        if (ignored) signal(ignored, SIG_IGN);
        const char *argv[20] = {cli_binary()};
        for (int k = 0; args[k] && k < 18; k++) argv[k + 1] = args[k];
        execv(cli_binary(), (char *const *)argv);
        _exit(98);
    }
    return pid;
}

static pid_t spawn(const char *const *args) {
    return spawn_ignoring(args, 0);
}

/* Run pairkit with args (NULL-terminated) in the scratch folder, send
 * SIGINT after delay seconds; *stop_s is the time from the signal to the
 * exit. Returns the exit code (128 + signal when killed). */
/* The command's exit code after signal sig, delay seconds in; *exited
 * whether it exited (else the signal killed it, given as 128 + its number). */
static int run_signalled(const char *const *args, double delay, int sig, double *stop_s, int *exited) {
    pid_t pid = spawn(args);
    struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
    nanosleep(&ts, NULL);
    double t0 = check_now();
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    *stop_s = check_now() - t0;
    *exited = WIFEXITED(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run_interrupted(const char *const *args, double delay, double *stop_s) {
    int exited;
    return run_signalled(args, delay, SIGINT, stop_s, &exited);
}

/* Files in dir (under the scratch folder) whose name contains part. */
static int count_in(const char *dir, const char *part) {
    DIR *d = opendir(cli_path(dir));
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && strstr(e->d_name, part)) n++;
    if (d) closedir(d);
    return n;
}

static void test_memsort(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions regions;
    CHECK_OK(pk_memsort_regions_preset(&ctx, "default", &regions), &ctx);
    pk_memsort_gen_options gen = {1u << 22, 9, 0, 0};
    pk_memsort_trace trace;
    CHECK_OK(pk_memsort_generate(&ctx, &regions, &gen, &trace), &ctx);
    CHECK_OK(pk_memsort_trace_write(&ctx, cli_path("trace"), &trace), &ctx);
    pk_memsort_trace_free(&trace);
    /* SIGTERM and SIGHUP stop it as Ctrl-C does, with the shell's code for
     * each (128 + the signal's number), not 130 for all */
    const int sigs[2] = {SIGTERM, SIGHUP};
    for (int s = 0; s < 2; s++) {
        char out[32];
        snprintf(out, sizeof out, "out_sig%d", sigs[s]);
        const char *args[] = {"memsort", "trace", "-o", out, "--backend", "cpu", "--kernel", "ref", "-q", NULL};
        double stop;
        int exited;
        int rc = run_signalled(args, 0.45, sigs[s], &stop, &exited);
        int files = count_in(out, "");
        printf("memsort --kernel ref, signal %d at 0.45 s: exit %d (%s) after %.3f s, %d files\n", sigs[s], rc,
               exited ? "exited" : "killed", stop, files);
        if (!(exited && rc == 0))
            CHECK(exited && rc == 128 + sigs[s] && files == 0, "memsort after signal %d: %s %d, %d files", sigs[s],
                  exited ? "exit" : "killed by", exited ? rc : rc - 128, files);
    }
    /* a signal the command started with ignored (nohup's SIGHUP, a
     * background job's SIGINT) stays ignored: the run ends with its output */
    const int ign[2] = {SIGHUP, SIGINT};
    for (int s = 0; s < 2; s++) {
        char out[32];
        snprintf(out, sizeof out, "out_ign%d", ign[s]);
        const char *args[] = {"memsort", "trace", "-o", out, "--backend", "cpu", "--kernel", "ref", "-q", NULL};
        pid_t pid = spawn_ignoring(args, ign[s]);
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        kill(pid, ign[s]);
        int status = 0;
        waitpid(pid, &status, 0);
        int files = count_in(out, "");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && files == 2,
              "memsort with signal %d ignored, then sent: %s %d, %d files", ign[s],
              WIFEXITED(status) ? "exit" : "killed by", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
              files);
    }
    const char *kernels[2] = {"ref", "cpu"};
    for (int k = 0; k < 2; k++) {
        for (double delay = 0.15; delay < 0.8; delay += 0.3) {
            char out[32];
            snprintf(out, sizeof out, "out_%s_%d", kernels[k], (int)(delay * 10));
            const char *args[] = {"memsort", "trace",    "-o",       out,  "--backend",
                                  "cpu",     "--kernel", kernels[k], "-q", NULL};
            double stop;
            int rc = run_interrupted(args, delay, &stop);
            int files = count_in(out, "");
            printf("memsort --kernel %s, SIGINT at %.1f s: exit %d after %.3f s, %d files in %s\n", kernels[k], delay,
                   rc, stop, files, out);
            CHECK(stop < 1.0, "memsort %s: stopped %.2f s after SIGINT", kernels[k], stop);
            if (rc == 0) {
                CHECK(files == 2, "memsort %s: finished with %d files", kernels[k], files);
            } else {
                CHECK(rc == 130, "memsort %s: exit code %d after SIGINT", kernels[k], rc);
                CHECK(files == 0, "memsort %s: %d files left after SIGINT", kernels[k], files);
            }
        }
    }
}

static void test_memsort_gen(void) {
    int cancelled = 0;
    /* the trace is made and written a chunk at a time: the signal comes
     * from the first chunks on */
    for (double delay = 0.05; delay < 1.0; delay *= 2) {
        const char *args[] = {"memsort-gen", "gen", "--entries", "2^24", "--chunk", "32768", NULL};
        double stop;
        int rc = run_interrupted(args, delay, &stop);
        int chunks = count_in("gen", ".bin"), temps = count_in("gen", ".tmp");
        printf("memsort-gen, SIGINT at %.2f s: exit %d after %.3f s, %d chunk files, %d temporary\n", delay, rc, stop,
               chunks, temps);
        CHECK(stop < 1.0, "memsort-gen: stopped %.2f s after SIGINT", stop);
        CHECK(temps == 0, "memsort-gen: %d temporary files left after SIGINT", temps);
        CHECK(chunks - temps == 0 || (rc == 0 && chunks == 512), "memsort-gen: exit %d with %d chunk files", rc,
              chunks - temps);
        CHECK(rc == 0 || rc == 130, "memsort-gen: exit code %d after SIGINT", rc);
        cancelled += rc == 130;
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cli_path("gen"));
        if (system(cmd) != 0) printf("could not remove %s\n", cli_path("gen"));
    }
    CHECK(cancelled > 0, "memsort-gen: every run ended before its SIGINT; none was cancelled");
}

/* Whether an output is being written in dir (under the scratch folder):
 * a staged file (the CLI's NAME.pkstage..., the library's NAME.tmp....). */
static int writing_in(const char *dir) {
    DIR *d = opendir(cli_path(dir));
    int found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d)) != NULL) found = strstr(e->d_name, ".pkstage") || strstr(e->d_name, ".tmp.");
    if (d) closedir(d);
    return found;
}

/* Run pairkit with args in the scratch folder and send SIGINT as soon as
 * it is seen writing its outputs into dir. Returns the exit code; *sent:
 * whether the signal went (the run may end before a staged file is seen). */
static int signal_while_writing(const char *const *args, const char *dir, int sig, int *sent) {
    pid_t pid = spawn(args);
    int status = 0;
    *sent = 0;
    struct timespec tick = {0, 100000};
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (!*sent && writing_in(dir)) {
            kill(pid, sig);
            *sent = 1;
        }
        nanosleep(&tick, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int interrupt_while_writing(const char *const *args, const char *dir, int *sent) {
    return signal_while_writing(args, dir, SIGINT, sent);
}

/* SIGSEGV, SIGBUS or SIGABRT sent (kill) while a command writes its
 * outputs: the command dies of that signal, as it did before it caught
 * them to remove its staged files (a handler that swallowed a sent SEGV
 * let the run go on and exit 0), and no staged file is left. */
static void test_fatal_while_writing(const char *const *args, const char *dir) {
    const int sigs[3] = {SIGSEGV, SIGBUS, SIGABRT};
    for (int k = 0; k < 3; k++) {
        int died = 0;
        for (int attempt = 0; attempt < 3 && !died; attempt++) {
            int sent = 0, rc = signal_while_writing(args, dir, sigs[k], &sent);
            /* built with AddressSanitizer, whose own handler takes SEGV and
             * BUS after pairkit's: its report, then its exit code 1 */
            char *e = cli_read(cli_path("err.txt"));
            int sanitizer = rc == 1 && e && strstr(e, "AddressSanitizer");
            free(e);
            CHECK(!writing_in(dir), "signal %d while writing: a staged file is left", sigs[k]);
            CHECK(!sent || rc == 128 + sigs[k] || sanitizer || rc == 0, "signal %d while writing: exit %d", sigs[k],
                  rc);
            died += sent && (rc == 128 + sigs[k] || sanitizer);
        }
        CHECK(died, "signal %d while writing: never ended the run", sigs[k]);
    }
}

/* SIGINT while a command writes its outputs: exit 130, no output and no
 * staged file left. A run can still finish when the signal lands after
 * its last rename (exit 0, every output there); of three tries at least
 * one must be stopped. outputs: the names in dir that a finished run
 * writes; NULL-terminated. */
static void test_write_interrupted(const char *what, const char *const *args, const char *dir,
                                   const char *const *outputs) {
    int stopped = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        int sent = 0;
        int rc = interrupt_while_writing(args, dir, &sent);
        int present = 0, n_out = 0;
        for (int k = 0; outputs[k]; k++, n_out++) {
            char name[128];
            snprintf(name, sizeof name, "%.60s/%.60s", dir, outputs[k]);
            present += access(cli_path(name), F_OK) == 0;
        }
        printf("%s, SIGINT once writing: %s, exit %d, %d of %d outputs\n", what, sent ? "sent" : "not sent", rc,
               present, n_out);
        CHECK(!writing_in(dir), "%s: a staged file is left", what);
        if (rc == 130) {
            CHECK(present == 0, "%s: exit 130 with %d outputs written", what, present);
            char *e = cli_read(cli_path("err.txt"));
            CHECK(e && strstr(e, "interrupted"), "%s: says it was interrupted: %s", what, e ? e : "");
            free(e);
            stopped++;
        } else {
            CHECK(rc == 0 && present == n_out, "%s: exit %d with %d of %d outputs", what, rc, present, n_out);
        }
        for (int k = 0; outputs[k]; k++) {
            char name[128];
            snprintf(name, sizeof name, "%.60s/%.60s", dir, outputs[k]);
            unlink(cli_path(name));
        }
    }
    CHECK(stopped > 0, "%s: SIGINT while writing never stopped the run", what);
}

static void test_writes(void) {
    /* memsort (the library's writer) and memsort-fill, on the trace of
     * test_memsort */
    const char *ms[] = {"memsort", "trace", "-o", "plans", "--backend", "cpu", "-q", NULL};
    const char *ms_out[] = {"memsort.bin", "summary.txt", NULL};
    test_write_interrupted("memsort", ms, "plans", ms_out);
    CHECK(cli_run("memsort trace -o plans --backend cpu -q") == 0, "memsort for the plans"); /* a run left whole */
    const char *fill[] = {"memsort-fill", "plans", "trace", "-o", "filled", "-q", NULL};
    const char *fill_out[] = {"fill.bin", "fill.txt", NULL};
    test_write_interrupted("memsort-fill", fill, "filled", fill_out);
    /* angcorr: its text output, then the PNG plot where this build draws one */
    FILE *fp[2] = {fopen(cli_path("d.txt"), "w"), fopen(cli_path("r.txt"), "w")};
    uint64_t x = 88172645463325252ull;
    for (int f = 0; f < 2; f++) {
        fprintf(fp[f], "%d\n", 3000);
        for (int i = 0; i < 3000; i++) {
            double v[2];
            for (int k = 0; k < 2; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                v[k] = 5400.0 * (double)(x >> 11) / 9007199254740992.0;
            }
            fprintf(fp[f], "%.6f %.6f\n", v[0], v[1]);
        }
        fclose(fp[f]);
    }
    const char *ac[] = {"angcorr", "d.txt", "r.txt", "-o", "w.out", "--png", "w.png", "-q", NULL};
    const char *ac_out[] = {"w.out", "w.png", NULL};
    const char *ac_text[] = {"angcorr", "d.txt", "r.txt", "-o", "w.out", "--png", "none", "--csv", "w.csv", "-q", NULL};
    const char *ac_text_out[] = {"w.out", "w.csv", NULL};
    int png = cli_run("angcorr d.txt r.txt -o w.out --png w.png -q") == 0 && access(cli_path("w.png"), F_OK) == 0;
    if (!png) printf("angcorr: no PNG plot in this build or here; its text outputs alone\n");
    unlink(cli_path("w.out"));
    unlink(cli_path("w.png"));
    test_write_interrupted("angcorr", png ? ac : ac_text, ".", png ? ac_out : ac_text_out);
    test_fatal_while_writing(png ? ac : ac_text, ".");
}

int main(void) {
    cli_scratch();
    test_memsort();
    test_writes();
    test_memsort_gen();
    cli_scratch_remove();
    return check_finish("test_fault_sigint");
}
