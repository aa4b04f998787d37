/* fuzz.h - what the fuzz targets share: the libFuzzer entry point, a
 * scratch folder in memory-backed storage where a target writes its input
 * before handing the path to the public reader, and the check that turns a
 * broken invariant into a crash the fuzzer keeps.
 *
 * The same target files are built two ways: with libFuzzer (PK_FUZZ=ON,
 * clang) to search for crashers, and with the small driver
 * tests/test_fuzz_replay.c (any compiler) that replays the seed corpora
 * and the kept crashers in fuzz/regressions/ as an ordinary test.
 */
#ifndef PAIRKIT_FUZZ_H
#define PAIRKIT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the reader's contract; abort() makes it a crasher. */
#define FUZZ_REQUIRE(cond, ...)                                                          \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n");                                                       \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static char fuzz_dir_path[256];

static inline void fuzz_dir_remove(void) {
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (fuzz_dir_path[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_dir_path);
}

/* A folder of this process's own: /dev/shm (memory, so a million runs cost
 * no disk) or else $TMPDIR or /tmp. Removed at exit. */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && tmp[0] ? tmp : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/pairkit_fuzz_XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) {
            perror(fuzz_dir_path);
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Path of `name` in the scratch folder (static buffer, 2 in rotation). */
static inline const char *fuzz_path(const char *name) {
    static char buf[2][512];
    static int k = 0;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", fuzz_dir(), name);
    return buf[k];
}

/* Write size bytes to `name` in the scratch folder; returns its path. */
static inline const char *fuzz_write(const char *name, const uint8_t *data, size_t size) {
    const char *path = fuzz_path(name);
    FILE *fp = fopen(path, "wb");
    if (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0) {
        perror(path);
        abort();
    }
    return path;
}

#endif
