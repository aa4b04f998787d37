/* cli.h - what the pairkit subcommands share: error printing, the progress
 * line, Ctrl-C, option parsing helpers and the PNG plot. The CLI is the
 * only place that prints. */
#ifndef PAIRKIT_CLI_H
#define PAIRKIT_CLI_H

#include <stddef.h>

#include "pairkit/pairkit.h"

/* Print "pairkit <cmd>: <message>" to stderr; returns the exit code for st. */
int cli_error(const char *cmd, pk_status st, const pk_context *ctx);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Option a given last, without the value it would take: "a needs a value"
 * when a is one of value_options (NULL-terminated), the command's options
 * that take one, else "unknown option 'a'". Returns 2. */
int cli_missing_value(const char *cmd, const char *a, const char *const *value_options);

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
/* --threads: 1 .. PK_MAX_THREADS. */
int cli_parse_threads(const char *cmd, const char *opt, const char *text, int *out);

/* A line or point plot written to a PNG file atomically. */
typedef struct cli_plot {
    const char *title, *xlabel, *ylabel;
    const double *x, *y, *yerr; /* yerr may be NULL */
    size_t n;
    int log_x, log_y;
} cli_plot;
/* 0 on success; on failure prints a message and returns non-zero. */
int cli_plot_png(const char *cmd, const char *path, const cli_plot *plot);

/* 1 when the file at path is a whole PNG (it ends with the IEND chunk)
 * and reached the disk (fsync), 0 otherwise: the drivers that draw a PNG
 * report no write errors, so a full disk shows only as a cut file. */
int cli_png_complete(const char *path);

/* Subcommands. */
int cmd_angcorr(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_memsort(int argc, char **argv);
int cmd_memsort_gen(int argc, char **argv);
int bench_memsort(int argc, char **argv);
int cmd_dftimage(int argc, char **argv);
int bench_dftimage(int argc, char **argv);

#endif
