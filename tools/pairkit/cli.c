/* cli.c - what the pairkit subcommands share: error and usage messages
 * (under mpirun, said once by rank 0 where every rank holds the same),
 * option checks and value parsing, the machine line of a benchmark, the
 * progress line and Ctrl-C, removal of staged and scratch files on a fatal
 * signal, and the outputs: inputs that no output may replace, the checks
 * of output names and folders before the work, and staged files moved
 * into place together, or none. The library never prints; this file and
 * the commands do. */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/common.h"
#include "mpi.h"

static int interrupted_code(void);

int cli_error(const char *cmd, pk_status st, const pk_context *ctx) {
    if (st == PK_ERR_CANCELLED) {
        /* every rank is stopped alike: under mpirun rank 0 alone says so */
        if (cli_mpi_rank() == 0) fprintf(stderr, "pairkit %s: interrupted; no output written\n", cmd);
        return interrupted_code();
    }
    const char *what = ctx && ctx->message[0] ? ctx->message : pk_status_str(st);
    if (cli_mpi_error_shared()) { /* the ranks' one finding: once, from rank 0 */
        if (cli_mpi_rank() == 0) fprintf(stderr, "pairkit %s: %s\n", cmd, what);
    } else if (cli_mpi_size() > 1) fprintf(stderr, "pairkit %s [rank %d]: %s\n", cmd, cli_mpi_rank(), what);
    else fprintf(stderr, "pairkit %s: %s\n", cmd, what);
    return st == PK_ERR_INVALID ? 2 : 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    /* the command line is every rank's: under mpirun rank 0 alone says what is wrong with it */
    if (cli_mpi_rank() != 0) return 2;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pairkit %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'pairkit %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

int cli_unknown_kernel(const char *cmd, const char *opt, const char *name) {
    if (!pk_cuda_built() && strncmp(name, "cuda", 4) == 0)
        return cli_usage_error(cmd, "%s: '%s' is a CUDA kernel, and this build has no CUDA backend", opt, name);
    return cli_usage_error(cmd, "%s: unknown kernel '%s'", opt, name);
}

void cli_print_machine(const pk_context *ctx, int gpu) {
    char model[160] = "a CPU of unknown model", line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        size_t len = strcspn(colon, "\n");
        if (len >= sizeof model) len = sizeof model - 1;
        memcpy(model, colon, len);
        model[len] = 0;
        break;
    }
    if (f) fclose(f);
    char when[32] = "";
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    int threads = pk_thread_count(ctx);
    printf("on %s, %d thread%s; %s", model, threads, threads == 1 ? "" : "s", when);
    /* a CPU bench leaves the GPU alone: no CUDA context, no device memory */
    if (gpu && pk_cuda_device_count() > 0) {
        char desc[256];
        pk_cuda_describe(ctx->cuda_device, desc, sizeof desc);
        printf("; CUDA device %d: %s", ctx->cuda_device, desc);
    }
    printf("\n");
}

void cli_note_cpu_fallback(const char *cmd, const pk_context *ctx, pk_backend backend, int kernel_best, int quiet) {
    if (quiet || backend != PK_BACKEND_AUTO || !kernel_best || pk_cuda_device_count() == 0) return;
    const char *why = pk_cuda_unusable(ctx->cuda_device);
    if (why)
        fprintf(stderr, "pairkit %s: CUDA device %d is present but cannot be used (%s): running on the CPU\n", cmd,
                ctx->cuda_device, why);
}

int cli_missing_value(const char *cmd, const char *a, const char *const *value_options) {
    for (const char *const *o = value_options; *o; o++)
        if (strcmp(a, *o) == 0) return cli_usage_error(cmd, "%s needs a value", a);
    return cli_usage_error(cmd, "unknown option '%s'", a);
}

/* The long name of a short option, else a itself. */
static const char *long_option(const char *a) {
    return strcmp(a, "-o") == 0 ? "--output" : strcmp(a, "-q") == 0 ? "--quiet" : a;
}

int cli_check_repeats(const char *cmd, int argc, char **argv, const char *const *value_options) {
    int seen[64], n_seen = 0; /* where the options so far are */
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k];
        if (a[0] != '-' || a[1] == '\0' || strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) continue;
        for (int s = 0; s < n_seen; s++) {
            const char *b = argv[seen[s]];
            if (strcmp(long_option(a), long_option(b)) != 0) continue;
            if (strcmp(a, b) == 0) return cli_usage_error(cmd, "%s given twice; give each option once", a);
            return cli_usage_error(cmd, "%s given twice (as %s and %s); give each option once", long_option(a), b, a);
        }
        if (n_seen < (int)(sizeof seen / sizeof seen[0])) seen[n_seen++] = k;
        for (const char *const *o = value_options; *o; o++)
            if (strcmp(a, *o) == 0) {
                k++; /* its value */
                break;
            }
    }
    return 0;
}

static char *const *joined_values; /* cli_note_joined's */
static int n_joined_values;

void cli_note_joined(char *const *values, int n) {
    joined_values = values;
    n_joined_values = n;
}

static int is_joined(const char *arg) {
    for (int k = 0; k < n_joined_values; k++)
        if (joined_values[k] == arg) return 1;
    return 0;
}

static int in_list(const char *a, const char *const *list) {
    for (const char *const *o = list; *o; o++)
        if (strcmp(a, *o) == 0) return 1;
    return 0;
}

int cli_check_flags(const char *cmd, int argc, char **argv, const char *const *value_options,
                    const char *const *flag_options) {
    for (int k = 1; k + 1 < argc; k++) {
        const char *a = argv[k];
        if (a[0] != '-' || a[1] == '\0') continue;
        if (in_list(a, value_options)) {
            /* its value, whatever it looks like, unless it is one of the
             * command's own options (`-o -q` wrote a file named -q) */
            const char *v = argv[++k];
            if (in_list(v, value_options) || in_list(v, flag_options))
                return cli_usage_error(
                    cmd, "%s needs a value; '%s' is one of this command's options (to name a file so, write ./%s)", a,
                    v, v);
        } else if (in_list(a, flag_options) && is_joined(argv[k + 1]))
            return cli_usage_error(cmd, "%s takes no value", a);
    }
    return 0;
}

static volatile sig_atomic_t interrupted = 0; /* the signal that asked to stop */

static void on_sigint(int sig) {
    interrupted = sig;
}

/* A shell's code for a run stopped by a signal: 128 + its number (130 for
 * Ctrl-C, 143 for SIGTERM, 129 for SIGHUP). */
static int interrupted_code(void) {
    return 128 + (interrupted ? (int)interrupted : SIGINT);
}

int cli_interrupted(void) {
    return interrupted != 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct progress_state {
    const char *label;
    int show;
    int shown;
    double start;
} progress_state;

static progress_state progress;

static int on_progress(void *user, double fraction) {
    progress_state *p = user;
    if (p->show) {
        double el = now_s() - p->start;
        if (el > 0.5) {
            if (fraction > 0.01)
                fprintf(stderr, "\r%s %5.1f%%  elapsed %.1f s  left %.1f s   ", p->label, 100.0 * fraction, el,
                        el * (1 - fraction) / fraction);
            else fprintf(stderr, "\r%s %5.1f%%  elapsed %.1f s               ", p->label, 100.0 * fraction, el);
            fflush(stderr);
            p->shown = 1;
        }
    }
    return interrupted != 0;
}

/* sig caught by sa unless the process started with it ignored: nohup's
 * SIGHUP, a shell's background job's SIGINT, `trap '' INT` stay ignored. */
static void catch_unless_ignored(int sig, const struct sigaction *sa) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    sigaction(sig, sa, NULL);
}

void cli_progress_attach(pk_context *ctx, const char *label, int quiet) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    catch_unless_ignored(SIGINT, &sa);
    catch_unless_ignored(SIGTERM, &sa);
    catch_unless_ignored(SIGHUP, &sa);
    progress.label = label;
    progress.show = !quiet && isatty(STDERR_FILENO);
    progress.shown = 0;
    progress.start = now_s();
    ctx->progress = on_progress;
    ctx->progress_user = &progress;
}

void cli_progress_done(pk_context *ctx) {
    if (progress.shown) fprintf(stderr, "\r%*s\r", 70, "");
    progress.shown = 0;
    ctx->progress = NULL;
}

int cli_parse_double(const char *cmd, const char *opt, const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v)) {
        cli_usage_error(cmd, "%s expects a number, got '%s'", opt, text);
        return 1;
    }
    *out = v;
    return 0;
}

int cli_parse_size(const char *cmd, const char *opt, const char *text, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || !isdigit((unsigned char)text[0])) {
        if (errno == ERANGE && text[0] != '-' && end != text && *end == '\0')
            cli_usage_error(cmd, "%s: %s is too large, beyond any count the command takes", opt, text);
        else cli_usage_error(cmd, "%s expects a whole number, got '%s'", opt, text);
        return 1;
    }
    *out = (size_t)v;
    return 0;
}

int cli_parse_count(const char *cmd, const char *opt, const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v;
    int ok = text[0] >= '0' && text[0] <= '9';
    if (ok && strncmp(text, "2^", 2) == 0) {
        v = strtoull(text + 2, &end, 10);
        ok = isdigit((unsigned char)text[2]) && *end == '\0' && errno != ERANGE && v <= 63;
        v = ok ? 1ull << v : 0;
    } else if (ok) {
        v = strtoull(text, &end, 10);
        int shift = *end == 'K' || *end == 'k'   ? 10
                    : *end == 'M' || *end == 'm' ? 20
                    : *end == 'G' || *end == 'g' ? 30
                                                 : 0;
        if (shift) end++;
        ok = end != text && *end == '\0' && errno != ERANGE && v <= (UINT64_MAX >> shift);
        v <<= shift;
    }
    if (!ok) {
        cli_usage_error(cmd,
                        "%s: '%s' is not a count (a whole number, 2^k, or one with a K, M or G suffix, below 2^64)",
                        opt, text);
        return 1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_range(const char *cmd, const char *opt, const char *text, size_t lo, size_t hi, size_t *out) {
    size_t t;
    if (cli_parse_size(cmd, opt, text, &t)) return 1;
    if (t < lo || t > hi) {
        cli_usage_error(cmd, "%s: %s is out of range %zu .. %zu", opt, text, lo, hi);
        return 1;
    }
    *out = t;
    return 0;
}

int cli_parse_threads(const char *cmd, const char *opt, const char *text, int *out) {
    size_t t;
    if (cli_parse_range(cmd, opt, text, 1, PK_MAX_THREADS, &t)) return 1;
    *out = (int)t;
    return 0;
}

/* Output sets with staged files not yet moved or removed: removed at exit
 * too, should something end the process on the way (PLplot calls exit()
 * on errors of its own). */
static cli_outputs *open_sets[4];
static const char *volatile scratch_file; /* a PNG being drawn (cli_note_scratch) */

/* unlink alone: also called from a handler of a fatal signal */
static void remove_open_sets(void) {
    for (int s = 0; s < 4; s++)
        for (int k = 0; open_sets[s] && k < open_sets[s]->n; k++) unlink(open_sets[s]->staged[k]);
    const char *f = scratch_file;
    if (f) unlink(f);
    pk_temp_remove_all(); /* the library's temporary files being written */
}

void cli_note_scratch(const char *path) {
    scratch_file = path;
}

/* A crash inside a library (fontconfig under a memory limit, say) ends the
 * process without exit(): the staged files go first, then the action the
 * signal had before (the default's core and 128 + n, or a sanitizer's
 * report). A fault (SEGV, BUS, FPE, ILL from an instruction) comes again
 * from its instruction once the handler returns; one raised or sent
 * (abort's ABRT, GLib's TRAP, kill -SEGV) is raised again. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
static struct sigaction fatal_before[sizeof fatal_signals / sizeof fatal_signals[0]];

static void on_fatal(int sig, siginfo_t *info, void *context) {
    (void)context;
    remove_open_sets();
    for (size_t k = 0; k < sizeof fatal_signals / sizeof fatal_signals[0]; k++)
        if (fatal_signals[k] == sig) sigaction(sig, &fatal_before[k], NULL);
    /* si_code <= 0: kill, tgkill, raise, sigqueue (SI_USER, SI_TKILL, ...) */
    if (sig == SIGABRT || sig == SIGTRAP || !info || info->si_code <= 0) raise(sig); /* delivered on return */
}

void cli_catch_fatal(void) {
    static int caught;
    if (caught) return;
    caught = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof fatal_signals / sizeof fatal_signals[0]; k++)
        sigaction(fatal_signals[k], &sa, &fatal_before[k]);
}

static void track(cli_outputs *o, int on) {
    static int at_exit;
    if (on && !at_exit) at_exit = atexit(remove_open_sets) == 0;
    for (int s = 0; s < 4; s++) {
        if (on && open_sets[s] == o) return;
        if (!on && open_sets[s] == o) open_sets[s] = NULL;
    }
    for (int s = 0; on && s < 4; s++)
        if (!open_sets[s]) {
            open_sets[s] = o;
            return;
        }
}

void cli_parent_dir(const char *name, char *dir, size_t size) {
    const char *slash = strrchr(name, '/');
    if (!slash) snprintf(dir, size, ".");
    else if (slash == name) snprintf(dir, size, "/");
    else snprintf(dir, size, "%.*s", (int)((size_t)(slash - name) < size ? slash - name : (ptrdiff_t)size - 1), name);
}

/* The real path of the folder a name lies in (the name need not exist);
 * 0 when that folder cannot be resolved. */
static int real_folder(const char *name, char *out) {
    char dir[4096];
    cli_parent_dir(name, dir, sizeof dir);
    return realpath(dir, out) != NULL;
}

/* Whether two names, existing or not, name one file: the same last
 * component in the same folder. */
static int same_file_name(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    if (strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b) != 0) return 0;
    char real_a[PATH_MAX], real_b[PATH_MAX];
    return real_folder(a, real_a) && real_folder(b, real_b) && strcmp(real_a, real_b) == 0;
}

/* The files this run reads (cli_input), so that no output replaces one. */
#define CLI_MAX_INPUTS 8
static const char *inputs[CLI_MAX_INPUTS];
static int n_inputs;

void cli_input(const char *path) {
    if (path && n_inputs < CLI_MAX_INPUTS) inputs[n_inputs++] = path;
}

/* ... and the folder of chunk files it reads (cli_input_trace). */
static const char *input_trace;

void cli_input_trace(const char *dir) {
    input_trace = dir;
}

/* The chunk file of the input trace that is the file out stands for, into
 * name; 0 when none is. */
static int trace_chunk_of(const struct stat *out, char *name, size_t size) {
    DIR *d = input_trace ? opendir(input_trace) : NULL;
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "mem_addr_", 9) != 0) continue;
        struct stat in;
        snprintf(name, size, "%s/%s", input_trace, e->d_name);
        found = stat(name, &in) == 0 && in.st_dev == out->st_dev && in.st_ino == out->st_ino;
    }
    closedir(d);
    return found;
}

int cli_check_output(const char *cmd, const char *final_path) {
    /* the file the output replaces (a symbolic link to a file is written
     * through), the input's file (followed, as the read did) */
    struct stat out, in;
    if (!final_path || stat(final_path, &out) != 0) return 0;
    for (int k = 0; k < n_inputs; k++) {
        if (stat(inputs[k], &in) != 0 || in.st_dev != out.st_dev || in.st_ino != out.st_ino) continue;
        if (cli_mpi_rank() != 0) return 1; /* rank 0 says it */
        if (strcmp(inputs[k], final_path) == 0)
            fprintf(stderr, "pairkit %s: %s: is an input of this run; give the output another name\n", cmd, final_path);
        else
            fprintf(stderr, "pairkit %s: %s: is an input of this run (as %s); give the output another name\n", cmd,
                    final_path, inputs[k]);
        return 1;
    }
    char chunk[4200];
    if (trace_chunk_of(&out, chunk, sizeof chunk)) {
        if (cli_mpi_rank() == 0)
            fprintf(stderr,
                    "pairkit %s: %s: is a chunk file of this run's trace (as %s); give the output another name\n", cmd,
                    final_path, chunk);
        return 1;
    }
    return 0;
}

const char *cli_output_unfit(const char *path) {
    struct stat sb;
    const char *unfit = pk_output_unfit(path);
    if (!unfit && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) unfit = "is a directory, not a file";
    return unfit;
}

int cli_check_out_dir(const char *cmd, const char *out_dir, const char *const *files, int n_files) {
    struct stat sb;
    char parent[4096];
    cli_parent_dir(out_dir, parent, sizeof parent);
    const char *why = NULL;
    char dangling[4300];
    if (stat(out_dir, &sb) == 0) {
        why = !S_ISDIR(sb.st_mode)                ? "exists and is not a directory"
              : access(out_dir, W_OK | X_OK) != 0 ? "is not writable"
                                                  : NULL;
    } else if (errno != ENOENT) {
        why = strerror(errno);
    } else if (lstat(out_dir, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        /* mkdir does not follow a link: the folder it names is not made */
        char target[4096];
        ssize_t len = readlink(out_dir, target, sizeof target - 1);
        target[len > 0 ? len : 0] = '\0';
        snprintf(dangling, sizeof dangling,
                 "a symbolic link to '%s', which does not exist (make that folder, or give another name)", target);
        why = dangling;
    } else if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        why = "cannot be made: its parent folder is missing";
    } else if (access(parent, W_OK | X_OK) != 0) {
        why = "cannot be made: its parent folder is not writable";
    }
    if (why) {
        if (cli_mpi_rank() == 0) fprintf(stderr, "pairkit %s: %s: %s\n", cmd, out_dir, why);
        return 1;
    }
    for (int k = 0; k < n_files; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%.4000s/%s", out_dir, files[k]);
        if (cli_check_output(cmd, path)) return 2;
        const char *unfit = cli_output_unfit(path);
        if (!unfit) continue;
        if (cli_mpi_rank() == 0) fprintf(stderr, "pairkit %s: %s: cannot write: %s\n", cmd, path, unfit);
        return 1;
    }
    return 0;
}

/* 1 after printing an error when the output's folder is missing or not
 * writable, or the output's name is a folder: found before the work, not
 * after it. */
static int check_output_place(const char *cmd, const char *path) {
    struct stat sb;
    const char *unfit = cli_output_unfit(path);
    if (unfit) {
        if (cli_mpi_rank() == 0) fprintf(stderr, "pairkit %s: %s: %s\n", cmd, *path ? path : "''", unfit);
        return 1;
    }
    char dir[4096];
    cli_parent_dir(path, dir, sizeof dir);
    const char *why = NULL;
    if (stat(dir, &sb) != 0) why = errno == ENOENT ? "does not exist" : strerror(errno);
    else if (!S_ISDIR(sb.st_mode)) why = "is not a directory";
    else if (access(dir, W_OK | X_OK) != 0) why = "is not writable";
    if (!why) return 0;
    if (cli_mpi_rank() == 0) fprintf(stderr, "pairkit %s: %s: cannot write: the folder %s %s\n", cmd, path, dir, why);
    return 1;
}

int cli_check_names(const char *cmd, const cli_named *outputs, int n) {
    for (int k = 0; k < n; k++) {
        if (!outputs[k].path) continue;
        if (!*outputs[k].path) { /* a command-line error, as memsort's empty names are */
            cli_usage_error(cmd, "%s: an empty file name", outputs[k].what);
            return 1;
        }
        if (cli_check_output(cmd, outputs[k].path)) return 1;
        if (check_output_place(cmd, outputs[k].path)) return 3; /* the caller's exit code 1 */
        for (int j = 0; j < k; j++) {
            if (!outputs[j].path || !same_file_name(outputs[j].path, outputs[k].path)) continue;
            if (cli_mpi_rank() != 0) return 1; /* rank 0 says it */
            fprintf(stderr, "pairkit %s: %s: named for two outputs, %s and %s; give one of them another name\n", cmd,
                    outputs[k].path, outputs[j].what, outputs[k].what);
            return 1;
        }
    }
    return 0;
}

const char *cli_stage(const char *cmd, cli_outputs *o, const char *final_path) {
    if (!final_path) {
        fprintf(stderr, "pairkit %s: out of memory for an output's name\n", cmd);
        return NULL;
    }
    if (cli_check_output(cmd, final_path)) return NULL;
    const char *unfit = cli_output_unfit(final_path);
    if (unfit) {
        fprintf(stderr, "pairkit %s: %s: %s\n", cmd, *final_path ? final_path : "''", unfit);
        return NULL;
    }
    if (o->n == CLI_MAX_OUTPUTS) {
        fprintf(stderr, "pairkit %s: %s: too many output files\n", cmd, final_path);
        return NULL;
    }
    /* the file replaced: final_path, or where a link there points */
    char *fin = pk_output_path(final_path);
    if (!fin) {
        fprintf(stderr, "pairkit %s: out of memory\n", cmd);
        return NULL;
    }
    /* two outputs under one name (`-o x.png` and the default PNG x.png):
     * the second would replace the first */
    for (int k = 0; k < o->n; k++) {
        if (same_file_name(o->final_path[k], fin)) {
            if (strcmp(o->final_path[k], fin) == 0)
                fprintf(stderr, "pairkit %s: %s: named for two outputs; give them different names\n", cmd, final_path);
            else
                fprintf(stderr, "pairkit %s: %s: named for two outputs (as %s too); give them different names\n", cmd,
                        final_path, o->final_path[k]);
            free(fin);
            return NULL;
        }
    }
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".pkstage%ld-%d", (long)getpid(), o->n);
    char *staged = pk_sibling_name(fin, suffix);
    if (!staged) {
        free(fin);
        fprintf(stderr, "pairkit %s: out of memory\n", cmd);
        return NULL;
    }
    /* noted before it exists, so that a signal between its making and its
     * noting cannot leave it behind */
    o->final_path[o->n] = fin;
    o->staged[o->n] = staged;
    o->n++;
    track(o, 1);
    int fd = open(staged, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        fprintf(stderr, "pairkit %s: %s: cannot write: %s\n", cmd, final_path, strerror(errno));
        o->n--;
        free(staged);
        free(fin);
        return NULL;
    }
    close(fd);
    return staged;
}

int cli_output_error(const char *cmd, pk_status st, pk_context *ctx, const cli_outputs *o) {
    for (int k = 0; k < o->n; k++) {
        char *at = strstr(ctx->message, o->staged[k]);
        if (!at) continue;
        char rest[PK_MESSAGE_MAX];
        snprintf(rest, sizeof rest, "%s", at + strlen(o->staged[k]));
        snprintf(at, sizeof ctx->message - (size_t)(at - ctx->message), "%s%s", o->final_path[k], rest);
    }
    return cli_error(cmd, st, ctx);
}

static void outputs_free(cli_outputs *o) {
    track(o, 0);
    for (int k = 0; k < o->n; k++) {
        free(o->final_path[k]);
        free(o->staged[k]);
    }
    o->n = 0;
}

void cli_discard(cli_outputs *o) {
    for (int k = 0; k < o->n; k++) unlink(o->staged[k]);
    outputs_free(o);
}

int cli_commit(const char *cmd, cli_outputs *o) {
    if (interrupted) { /* Ctrl-C while the outputs were written: none of them */
        cli_discard(o);
        fprintf(stderr, "pairkit %s: interrupted; no output written\n", cmd);
        return interrupted_code();
    }
    int failed = pk_rename_all(o->n, o->staged, o->final_path);
    if (failed >= 0) {
        fprintf(stderr, "pairkit %s: %s: cannot move into place: %s; no output changed\n", cmd, o->final_path[failed],
                strerror(errno));
        for (int k = 0; k < o->n; k++) unlink(o->staged[k]);
    }
    outputs_free(o);
    return failed >= 0;
}

int cli_png_complete(const char *path) {
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    unsigned char tail[12];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    off_t size = lseek(fd, 0, SEEK_END);
    int ok = size >= 12 + 8 && pread(fd, tail, sizeof tail, size - 12) == (ssize_t)sizeof tail &&
             memcmp(tail, iend, sizeof tail) == 0 && fsync(fd) == 0;
    close(fd);
    return ok;
}

const char *cli_sibling_into(const char *out_path, const char *suffix, char *buf, size_t size) {
    /* the extension: from the name's last dot, unless that dot begins the
     * name (".a" is a hidden file's name, not an extension: .a.png) */
    const char *slash = strrchr(out_path, '/'), *base = slash ? slash + 1 : out_path;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot > base ? (size_t)(dot - out_path) : strlen(out_path);
    int n = snprintf(buf, size, "%.*s%s", (int)stem, out_path, suffix);
    return n >= 0 && (size_t)n < size ? buf : NULL;
}

int cli_want_png(const char *cmd, const char *png_path, int warn) {
    if (png_path && strcasecmp(png_path, "none") == 0) return 0; /* NONE and None too: no file of that name */
    if (png_path || cli_png_available()) return 1;
    /* the plot nobody asked for by name: the results without it, said even
     * with -q (a missing output, not progress) */
    if (!warn) return 0;
#ifdef PK_HAVE_PLPLOT
    fprintf(stderr, "pairkit %s: no PNG plot: %s; --png none leaves the plot out without this warning\n", cmd,
            cli_png_unavailable_reason());
#else
    fprintf(stderr,
            "pairkit %s: no PNG plot: this build has no PLplot (apt-get install libplplot-dev "
            "plplot-driver-cairo, then rebuild); --png none leaves the plot out without this warning\n",
            cmd);
#endif
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_runs_median(double *times, int n, double *min) {
    qsort(times, (size_t)n, sizeof *times, cmp_double);
    if (min) *min = times[0];
    return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}
