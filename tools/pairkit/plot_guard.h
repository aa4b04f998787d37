/* plot_guard.h - PLplot's fatal errors turned into returns. PLplot calls
 * exit() on its errors (a file it cannot open, no driver); between
 * CLI_PLPLOT_TRY() and cli_plplot_guard_end() such an error jumps back to
 * the TRY with its message in cli_plplot_message instead. PLplot is not
 * used again in the process after that. */
#ifndef PAIRKIT_PLOT_GUARD_H
#define PAIRKIT_PLOT_GUARD_H

#include <setjmp.h>

extern jmp_buf cli_plplot_escape;
extern char cli_plplot_message[256];
void cli_plplot_guard_begin(void);
void cli_plplot_guard_end(void);

/* PLplot started on a white w x h pixel PNG written to path, colour 1 black;
 * 1, with the reason in cli_plplot_message, when path cannot be created. */
int cli_plplot_open(const char *path, int w, int h);

/* Non-zero on the way in; zero when PLplot failed and jumped back. */
#define CLI_PLPLOT_TRY() (cli_plplot_guard_begin(), setjmp(cli_plplot_escape) == 0)

#endif
