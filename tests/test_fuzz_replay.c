/* test_fuzz_replay.c - replays inputs through a fuzz target without
 * libFuzzer: every file of every folder given on the command line goes to
 * the target's LLVMFuzzerTestOneInput, which aborts on a broken invariant
 * (and the sanitizers, in a sanitizer build, on memory errors and undefined
 * behaviour). Linked once per target with fuzz/fuzz_<parser>.c; ctest runs
 * it on fuzz/corpus/<parser> and fuzz/regressions/<parser>. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../fuzz/fuzz.h"

static int replay_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nbuf = realloc(buf, cap *= 2);
            if (!nbuf) free(buf);
            buf = nbuf;
        }
    }
    fclose(fp);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay every regular file of dir in name order; returns how many, or -1. */
static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) abort();
            names = nn;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) abort();
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    int count = 0;
    for (size_t k = 0; k < n; k++) {
        struct stat sb;
        if (stat(names[k], &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (replay_file(names[k]) != 0) return -1;
            count++;
        }
        free(names[k]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv) {
    int total = 0;
    for (int k = 1; k < argc; k++) {
        int n = replay_dir(argv[k]);
        if (n < 0) {
            /* a folder of kept crashers may not exist yet: nothing to replay */
            struct stat sb;
            if (stat(argv[k], &sb) == 0) {
                fprintf(stderr, "%s: cannot replay\n", argv[k]);
                return 1;
            }
            n = 0;
        }
        printf("%s: %d inputs replayed\n", argv[k], n);
        total += n;
    }
    printf("%d inputs, no invariant broken\n", total);
    return 0;
}
