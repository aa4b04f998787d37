/* cli_util.h - running the pairkit command from tests: a scratch folder,
 * files written into it, and the command's exit code and stderr. */
#ifndef PAIRKIT_TEST_CLI_UTIL_H
#define PAIRKIT_TEST_CLI_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char cli_dir[256];

static inline const char *cli_binary(void) {
    const char *p = getenv("PAIRKIT_CLI");
    return p ? p : "build/pairkit";
}

static inline void cli_scratch(void) {
    snprintf(cli_dir, sizeof cli_dir, "/tmp/pairkit_test_XXXXXX");
    if (!mkdtemp(cli_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static inline void cli_scratch_remove(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cli_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cli_dir);
}

/* Path of a file in the scratch folder (static buffer, 4 in rotation). */
static inline const char *cli_path(const char *name) {
    static char buf[4][512];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", cli_dir, name);
    return buf[k];
}

static inline void cli_write(const char *name, const char *text) {
    FILE *fp = fopen(cli_path(name), "wb");
    fputs(text, fp);
    fclose(fp);
}

/* Read a whole file (NULL if absent); caller frees. */
static inline char *cli_read(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, fp);
    s[got] = '\0';
    fclose(fp);
    return s;
}

/* Run `pairkit <args>` in the scratch folder; stderr goes to err.txt.
 * Returns the exit code. */
static inline int cli_run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > out.txt 2> err.txt", cli_dir, cli_binary(), args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static inline char *cli_stderr(void) {
    return cli_read(cli_path("err.txt"));
}

/* Number of files in the scratch folder whose name contains `part`. */
static inline int cli_count_files(const char *part) {
    DIR *d = opendir(cli_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, part)) n++;
    if (d) closedir(d);
    return n;
}

#endif
