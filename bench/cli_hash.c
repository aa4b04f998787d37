/* cli_hash.c - the speed of the hash the ranks under mpirun compare of
 * their inputs (cli_hash_bytes, tools/pairkit/mpi.c) against one plain pass
 * summing the same 64-bit words, over 1 GiB (a 519M-entry trace's
 * addresses are 2 GiB). 7 runs each, median and min.
 *
 *   cc -O3 -Itools/pairkit -Isrc -Iinclude bench/cli_hash.c tools/pairkit/mpi.c \
 *      -Lbuild -lpairkit -lm -o /tmp/cli_hash && /tmp/cli_hash
 * (the CMake Release build's -O3; build/libpairkit.a for the stubs mpi.c
 * calls without MPI). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    const size_t n = (size_t)1 << 30;
    unsigned char *buf = malloc(n);
    if (!buf) return 1;
    uint64_t state = 1;
    for (size_t i = 0; i < n; i += 8) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        memcpy(buf + i, &state, 8);
    }
    double hash_ms[7], sum_ms[7];
    volatile uint64_t sink = 0;
    for (int r = 0; r < 7; r++) {
        double t = now();
        sink ^= cli_hash_bytes(CLI_HASH_START, buf, n);
        hash_ms[r] = 1e3 * (now() - t);
        t = now();
        uint64_t acc = 0;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t w;
            memcpy(&w, buf + i, 8);
            acc += w;
        }
        sink ^= acc;
        sum_ms[r] = 1e3 * (now() - t);
    }
    qsort(hash_ms, 7, sizeof(double), by_value);
    qsort(sum_ms, 7, sizeof(double), by_value);
    printf("1 GiB: cli_hash_bytes median %.1f ms (min %.1f), a summing pass %.1f ms (min %.1f): %.2fx\n", hash_ms[3],
           hash_ms[0], sum_ms[3], sum_ms[0], hash_ms[3] / sum_ms[3]);
    free(buf);
    return 0;
}
