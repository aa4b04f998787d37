/* test_memsort_baseline.c - the streaming pass that `pairkit bench memsort`
 * measures plan + fill against writes what it claims, with plain and with
 * non-temporal stores: every row and run, for sizes around the 16-element
 * blocks the threads' shares are cut at, outputs starting off a 16-byte
 * boundary, and more threads than entries; nothing past the end. */
#include <stdio.h>
#include <stdlib.h>

#include "../bench/memsort_baselines.h"
#include "check.h"

#define GUARD 0xDEADBEEFu

int main(void) {
    check_rng rng = check_rng_make(20261129);
    const uint64_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 31, 33, 1000, 4099, 100003};
    const int threads[] = {1, 2, 3, 5, 16};
    enum { PAD = 8 };
    const uint64_t max_n = 100003;
    uint32_t *addr = malloc(max_n * sizeof(uint32_t));
    uint32_t *values_mem = malloc((max_n + 2 * PAD) * sizeof(uint32_t));
    pk_memsort_run_entry *runs_mem = malloc((max_n + 2 * PAD) * sizeof(pk_memsort_run_entry));
    if (!addr || !values_mem || !runs_mem) return 1;
    for (uint64_t i = 0; i < max_n; i++) addr[i] = (uint32_t)check_next(&rng);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++)
            for (int off = 0; off < 4; off++)
                for (int nontemporal = 0; nontemporal < 2; nontemporal++) {
                    uint64_t n = sizes[si], n_runs = n / 3 + (n & 1);
                    for (uint64_t i = 0; i < max_n + 2 * PAD; i++) {
                        values_mem[i] = GUARD;
                        runs_mem[i] = (pk_memsort_run_entry){GUARD, GUARD};
                    }
                    uint32_t *values = values_mem + PAD + off; /* 4 * off bytes past a 16-byte boundary */
                    pk_memsort_run_entry *runs = runs_mem + PAD + (off & 1);
                    pk_memsort_bench_stream_pass(addr, n, values, n, runs, n_runs, threads[ti], nontemporal);
                    uint64_t bad_v = 0, bad_r = 0, bad_guard = 0;
                    for (uint64_t i = 0; i < n; i++) bad_v += values[i] != (addr[i] ^ (uint32_t)i);
                    for (uint64_t k = 0; k < n_runs; k++) bad_r += runs[k].addr != addr[k] || runs[k].count != k;
                    for (uint32_t *v = values_mem; v < values; v++) bad_guard += *v != GUARD;
                    for (uint32_t *v = values + n; v < values_mem + max_n + 2 * PAD; v++) bad_guard += *v != GUARD;
                    for (pk_memsort_run_entry *r = runs_mem; r < runs; r++) bad_guard += r->addr != GUARD;
                    for (pk_memsort_run_entry *r = runs + n_runs; r < runs_mem + max_n + 2 * PAD; r++)
                        bad_guard += r->addr != GUARD || r->count != GUARD;
                    CHECK(bad_v == 0 && bad_r == 0 && bad_guard == 0,
                          "n %llu, %d threads, offset %d, nontemporal %d: %llu rows, %llu runs, %llu guard words wrong",
                          (unsigned long long)n, threads[ti], off, nontemporal, (unsigned long long)bad_v,
                          (unsigned long long)bad_r, (unsigned long long)bad_guard);
                }
    free(addr);
    free(values_mem);
    free(runs_mem);
    return check_finish("test_memsort_baseline");
}
