/* cli.h - what the pairkit subcommands share: error printing, the progress
 * line, Ctrl-C, option parsing helpers and the PNG plot. The CLI is the
 * only place that prints. */
#ifndef PAIRKIT_CLI_H
#define PAIRKIT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "pairkit/pairkit.h"

/* Print "pairkit <cmd>: <message>" to stderr; returns the exit code for st. */
int cli_error(const char *cmd, pk_status st, const pk_context *ctx);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Option a given last, without the value it would take: "a needs a value"
 * when a is one of value_options (NULL-terminated), the command's options
 * that take one, else "unknown option 'a'". Returns 2. */
int cli_missing_value(const char *cmd, const char *a, const char *const *value_options);
/* An option given twice (`-o a -o b`, `-q --quiet`) among argv[1..argc),
 * each option in value_options taking the argument after it: "X given
 * twice" and 2, else 0. The later one would otherwise win unseen. */
int cli_check_repeats(const char *cmd, int argc, char **argv, const char *const *value_options);
/* The values main split off the arguments `--name=value` (n of them, kept
 * by pointer until the command returns), so that cli_check_flags can tell
 * `--quiet=x` from `--quiet x`. */
void cli_note_joined(char *const *values, int n);
/* An option of flag_options (NULL-terminated: those that take no value)
 * given a value joined to it (`--quiet=r.txt`, `--mean-theta=0`) among
 * argv[1..argc): "--quiet takes no value" and 2, else 0. Each option in
 * value_options takes the argument after it, as in cli_check_repeats. */
int cli_check_flags(const char *cmd, int argc, char **argv, const char *const *value_options,
                    const char *const *flag_options);
/* A --kernel name the library does not know: a CUDA kernel's name on a
 * build without CUDA says so; exit code 2. */
int cli_unknown_kernel(const char *cmd, const char *opt, const char *name);

/* One line for a benchmark's record: the CPU's model and the threads a run
 * takes, the date (UTC) and, for a bench on the GPU (gpu nonzero) where
 * CUDA devices are present, the one ctx->cuda_device names
 * (pk_cuda_describe). A CPU bench does not touch the CUDA runtime here. */
void cli_print_machine(const pk_context *ctx, int gpu);
/* With --backend auto and no kernel named: when a CUDA device is present
 * but ctx->cuda_device takes no context (pk_cuda_unusable), so the library
 * runs on the CPU, say so on stderr (unless quiet). */
void cli_note_cpu_fallback(const char *cmd, const pk_context *ctx, pk_backend backend, int kernel_best, int quiet);

/* Progress on stderr when it is a terminal (and not --quiet): a line
 * "label  37%  elapsed 2.1 s  left 3.5 s", shown once the work has run for
 * half a second. Ctrl-C sets a flag the callback returns, so the library
 * stops and the command exits 130 without writing output. */
void cli_progress_attach(pk_context *ctx, const char *label, int quiet);
void cli_progress_done(pk_context *ctx);
int cli_interrupted(void);

/* Parse helpers: print a usage error and return non-zero on bad values. */
int cli_parse_double(const char *cmd, const char *opt, const char *text, double *out);
int cli_parse_size(const char *cmd, const char *opt, const char *text, size_t *out);
/* out_path with its extension (if any) replaced by suffix, into buf; NULL
 * when it does not fit (then the staging reports the missing name). */
const char *cli_sibling_into(const char *out_path, const char *suffix, char *buf, size_t size);
/* Whether to draw the PNG: not for "--png none"; for a name given, always
 * (its failure is an error); for the default one, only where PLplot can
 * (else a warning when warn, -q or not). */
int cli_want_png(const char *cmd, const char *png_path, int warn);
/* A count: N, 2^k, or N with a K, M or G suffix (x 2^10, 2^20, 2^30); a
 * usage error (returns 1) for anything else or a value of 2^64 or more. */
int cli_parse_count(const char *cmd, const char *opt, const char *text, uint64_t *out);
/* A whole number in lo .. hi (a usage error naming the range otherwise). */
int cli_parse_range(const char *cmd, const char *opt, const char *text, size_t lo, size_t hi, size_t *out);
/* --threads: 1 .. PK_MAX_THREADS. */
int cli_parse_threads(const char *cmd, const char *opt, const char *text, int *out);

/* A line or point plot written to a PNG file atomically. */
typedef struct cli_plot {
    const char *title, *xlabel, *ylabel;
    const double *x, *y, *yerr; /* yerr may be NULL */
    size_t n;
    int log_x, log_y;
    double x_lo, x_hi; /* the x axis' span when no point can be drawn (cli_plot_x_extent) */
} cli_plot;
/* Whether PNG output works here (PLplot built in, with its cairo driver). */
int cli_png_available(void);
/* A scratch file (a PNG being drawn) removed with the staged outputs
 * should the process end on the way, at exit or by a crash; NULL once it
 * is gone or renamed. The string must live until then. */
void cli_note_scratch(const char *path);
/* From here on a fatal signal (a crash in a library, or one sent: SEGV,
 * BUS, FPE, ILL, ABRT, TRAP) first removes the staged outputs, the scratch
 * file and the library's temporary files, then takes the action it had
 * before (called once MPI, which installs handlers of its own, is up). */
void cli_catch_fatal(void);
/* Why not, after cli_png_available said 0: the cairo driver missing (with
 * the package to install), or PLplot's own complaint when it could not
 * even list its drivers. */
const char *cli_png_unavailable_reason(void);
/* 0 on success; on failure prints a message, naming shown (NULL: path),
 * and returns non-zero. */
int cli_plot_png(const char *cmd, const char *path, const char *shown, const cli_plot *plot);

/* 1 when the file at path is a whole PNG (it ends with the IEND chunk)
 * and reached the disk (fsync), 0 otherwise: the drivers that draw a PNG
 * report no write errors, so a full disk shows only as a cut file. */
int cli_png_complete(const char *path);

/* The folder a name lies in ("." for a bare name, "/" at the root), into
 * dir (cut to size); the name need not exist. */
void cli_parent_dir(const char *name, char *dir, size_t size);

/* The output files of one command, all or none: each is written to a staged
 * name beside its final one, and once all are complete they are renamed
 * into place together. Should one rename fail, the files already renamed
 * are put back as they were (an older file is kept as a hard link until
 * the end), so a failed run leaves every older output as it was. */
#define CLI_MAX_OUTPUTS 8
typedef struct cli_outputs {
    int n;
    char *final_path[CLI_MAX_OUTPUTS];
    char *staged[CLI_MAX_OUTPUTS];
} cli_outputs;

/* Note a file the run reads (kept by pointer; up to 8): cli_stage refuses
 * an output that would replace it. */
void cli_input(const char *path);
/* The folder of chunk files this run reads: no output may replace one. */
void cli_input_trace(const char *dir);
/* 1 after printing an error when final_path is an existing file that is
 * one of the inputs (by device and inode, so another name for it counts). */
int cli_check_output(const char *cmd, const char *final_path);
/* Why an output cannot be written under `path` (pk_output_unfit, or a
 * directory, a link to one included), or NULL. */
const char *cli_output_unfit(const char *path);

/* Whether out_dir can hold a command's output folder, checked before the
 * work: an existing folder it may write in, or a name to be made in an
 * existing folder it may write in; and each of the n_files names in it
 * neither an input (exit 2, cli_check_output) nor a folder or another
 * name a file cannot be written under (exit 1). 0, or the exit code after
 * rank 0 printed the error. Call cli_input for the inputs first. */
int cli_check_out_dir(const char *cmd, const char *out_dir, const char *const *files, int n_files);

/* An output's name and how the user gave it (an option, or the default it
 * took from another output's name). */
typedef struct cli_named {
    const char *path; /* NULL: not written */
    const char *what;
} cli_named;
/* Non-zero after printing an error, checked before any work: 1 when two
 * outputs name one file, an output names an input (cli_check_output) or
 * is an empty name, 3
 * when an output's folder is missing or not writable or its name is a
 * folder. */
int cli_check_names(const char *cmd, const cli_named *outputs, int n);

/* The staged name to write final to, created empty at once, so that a
 * missing folder or a final name that is a folder is reported now, naming
 * final; NULL after printing such an error. */
const char *cli_stage(const char *cmd, cli_outputs *o, const char *final_path);
/* Rename every staged file over its final name (see above); 0 on success,
 * 1 after printing the error. After a Ctrl-C (SIGINT or SIGTERM, once
 * cli_progress_attach has run), 130 with the staged files removed and
 * nothing renamed. The staged names are freed either way. */
int cli_commit(const char *cmd, cli_outputs *o);
/* Remove the staged files and free the names. */
void cli_discard(cli_outputs *o);
/* cli_error for a write to a staged file: the message names the final file. */
int cli_output_error(const char *cmd, pk_status st, pk_context *ctx, const cli_outputs *o);

/* Subcommands. */
int cmd_angcorr(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_memsort(int argc, char **argv);
int cmd_memsort_gen(int argc, char **argv);
int cmd_memsort_fill(int argc, char **argv);
/* The bench protocol's summary of n > 0 warm run times: sorts them in
 * place and returns their median (the mean of the middle two for even n);
 * *min (may be NULL) receives the least. */
double cli_runs_median(double *times, int n, double *min);

int bench_memsort(int argc, char **argv);
int cmd_dftimage(int argc, char **argv);
int bench_dftimage(int argc, char **argv);

#endif
