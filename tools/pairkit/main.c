/* main.c - the pairkit command: one subcommand per workload, plus bench. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mpi.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"angcorr", cmd_angcorr, "angular two-point correlation of a data and a random catalog"},
    {"dftimage", cmd_dftimage, "exact direct Fourier (dirty) image of radio visibilities"},
    {"memsort", cmd_memsort, "plan and fill of a zkVM memory trace's instances for one worker"},
    {"memsort-fill", cmd_memsort_fill, "fill instances from a memsort.bin's plans and the chunk files held"},
    {"memsort-gen", cmd_memsort_gen, "write a synthetic zkVM memory trace (chunk files)"},
    {"bench", cmd_bench, "time a workload's kernels, from the naive one to the fastest"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: pairkit <command> [options]   (pairkit <command> --help for more)\n\ncommands:\n");
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        fprintf(out, "  %-13s %s\n", commands[k].name, commands[k].summary);
    fprintf(out, "  %-13s %s\n", "version", "print the version and the backends of this build");
}

/* A command's arguments as its parser reads them: `--name=value` split
 * into `--name` `value`, and after a lone `--` (dropped) every argument
 * taken as a name, one starting with '-' given as `./-x` (the same file).
 * *out is one allocation, the strings after the pointers (free(*out));
 * *joined (within it) the values split off, *n_joined of them, so that an
 * option that takes no value can be refused one (cli_check_flags).
 * Returns the new count, or -1 when out of memory. */
static int normalise_args(int argc, char **argv, char ***out, char ***joined, int *n_joined) {
    size_t text = 0;
    for (int k = 0; k < argc; k++) text += strlen(argv[k]) + 4; /* room for "./" and two ends */
    size_t slots = (size_t)argc * 2 + 1;
    char **a = malloc((slots + (size_t)argc) * sizeof *a + text);
    if (!a) return -1;
    char **values = a + slots;
    char *at = (char *)(values + argc);
    int n = 0, names_only = 0, n_values = 0;
    for (int k = 0; k < argc; k++) {
        const char *s = argv[k];
        if (k > 0 && !names_only && strcmp(s, "--") == 0) {
            names_only = 1;
            continue;
        }
        const char *eq = k > 0 && !names_only && strncmp(s, "--", 2) == 0 && s[2] != '=' ? strchr(s, '=') : NULL;
        size_t len = strlen(s);
        a[n++] = at;
        if (eq) { /* "--name\0value\0" */
            memcpy(at, s, len + 1);
            at[eq - s] = '\0';
            a[n++] = values[n_values++] = at + (eq - s) + 1;
            at += len + 1;
        } else {
            at += sprintf(at, "%s%s", names_only && s[0] == '-' ? "./" : "", s) + 1;
        }
    }
    a[n] = NULL;
    *out = a;
    *joined = values;
    *n_joined = n_values;
    return n;
}

/* What was printed to standard output must have got there: a bench's
 * table redirected to a full disk is an error, not exit 0. Nothing printed
 * (stdout closed, -q) is no error. */
static int stdout_written(int rc) {
    errno = 0;
    int flushed = fflush(stdout) == 0;
    if (flushed && !ferror(stdout)) return rc;
    if (!flushed && errno) fprintf(stderr, "pairkit: writing to standard output failed: %s\n", strerror(errno));
    else fprintf(stderr, "pairkit: writing to standard output failed\n");
    return rc ? rc : 1;
}

static int run(int argc, char **argv);

int main(int argc, char **argv) {
    /* a file-size limit (ulimit -f) makes a write fail with EFBIG, which
     * the writers report and clean up after, instead of killing the
     * process with its staged outputs on disk */
    signal(SIGXFSZ, SIG_IGN);
    return stdout_written(run(argc, argv));
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "version") == 0 || strcmp(name, "--version") == 0) {
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            printf(
                "usage: pairkit version\n  The version, whether the CUDA backend and MPI are built, and the CUDA\n"
                "  devices this machine has.\n");
            return 0;
        }
        int devices = pk_cuda_device_count();
        printf("pairkit %s  (CUDA backend: %s, CUDA devices: %d; MPI: %s)\n", PK_VERSION_STRING,
               pk_cuda_built() ? "built" : "not built", devices,
               cli_mpi_built() ? "built, for mpirun -np K" : "not built");
        for (int d = 0; d < devices; d++) {
            char line[256];
            pk_cuda_describe(d, line, sizeof line);
            printf("  CUDA device %d: %s\n", d, line);
        }
        return 0;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(name, commands[k].name) == 0) {
            cli_mpi_init(&argc, &argv);
            cli_catch_fatal();
            char **args, **joined;
            int n_joined;
            int n_args = normalise_args(argc - 1, argv + 1, &args, &joined, &n_joined);
            if (n_args < 0) {
                fprintf(stderr, "pairkit: out of memory\n");
                cli_mpi_finalize();
                return 1;
            }
            cli_note_joined(joined, n_joined);
            int rc = commands[k].run(n_args, args);
            cli_note_joined(NULL, 0);
            free(args);
            cli_mpi_finalize();
            return rc;
        }
    }
    fprintf(stderr, "pairkit: unknown command '%s'\n", name);
    usage(stderr);
    return 2;
}
