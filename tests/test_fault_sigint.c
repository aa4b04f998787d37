/* test_fault_sigint.c - Ctrl-C (SIGINT) during a long memsort run and while
 * memsort-gen writes its chunk files: the command stops within a second
 * and leaves no file behind, or (when the signal came after the work) a
 * complete output. angcorr and dftimage have the same test in
 * test_angcorr_cli.c and test_dftimage_cli.c. */
#include <signal.h>
#include <time.h>

#include "cli_util.h"
#include "pairkit/memsort.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Run pairkit with args (NULL-terminated) in the scratch folder, send
 * SIGINT after delay seconds; *stop_s is the time from the signal to the
 * exit. Returns the exit code (128 + signal when killed). */
static int run_interrupted(const char *const *args, double delay, double *stop_s) {
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(cli_dir) != 0) _exit(99);
        if (!freopen("err.txt", "w", stderr)) _exit(99);
        signal(SIGINT, SIG_DFL);
        const char *argv[16] = {cli_binary()};
        for (int k = 0; args[k] && k < 14; k++) argv[k + 1] = args[k];
        execv(cli_binary(), (char *const *)argv);
        _exit(98);
    }
    struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
    nanosleep(&ts, NULL);
    double t0 = now_s();
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    *stop_s = now_s() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
    for (double delay = 0.25; delay < 1.1; delay += 0.25) {
        const char *args[] = {"memsort-gen", "gen", "--entries", "2^23", "--chunk", "32768", NULL};
        double stop;
        int rc = run_interrupted(args, delay, &stop);
        int chunks = count_in("gen", ".bin"), temps = count_in("gen", ".tmp");
        printf("memsort-gen, SIGINT at %.2f s: exit %d after %.3f s, %d chunk files, %d temporary\n", delay, rc, stop,
               chunks, temps);
        CHECK(stop < 1.0, "memsort-gen: stopped %.2f s after SIGINT", stop);
        CHECK(temps == 0, "memsort-gen: %d temporary files left after SIGINT", temps);
        CHECK(chunks - temps == 0 || (rc == 0 && chunks == 256), "memsort-gen: exit %d with %d chunk files", rc,
              chunks - temps);
        CHECK(rc == 0 || rc == 130, "memsort-gen: exit code %d after SIGINT", rc);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cli_path("gen"));
        if (system(cmd) != 0) printf("could not remove %s\n", cli_path("gen"));
    }
}

int main(void) {
    cli_scratch();
    test_memsort();
    test_memsort_gen();
    cli_scratch_remove();
    return check_finish("test_fault_sigint");
}
