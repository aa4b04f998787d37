/* test_memsort_baseline.c - the baselines `pairkit bench memsort`
 * measures plan + fill against do what they claim. The streaming pass
 * writes, with plain and with non-temporal stores, every row and run, for
 * sizes around the 16-element blocks the threads' shares are cut at,
 * outputs starting off a 16-byte boundary, and more threads than entries;
 * nothing past the end. The LSD radix sort gives the keys and values of a
 * plain stable sort of (compact address, index) pairs, for tables that
 * take one, two and three passes, generated and uniform traces, and 1 to
 * 16 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/memsort_baselines.h"
#include "check.h"

#define GUARD 0xDEADBEEFu

typedef struct pair {
    uint32_t key, index;
} pair;

static int pair_cmp(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static void test_radix(void) {
    check_rng rng = check_rng_make(20261201);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_memsort_regions tables[4];
    CHECK_OK(pk_memsort_regions_preset(&ctx, "default", &tables[0]), &ctx); /* 96M addresses: 3 passes of 9 bits */
    CHECK_OK(pk_memsort_regions_preset(&ctx, "zisk", &tables[1]), &ctx);
    tables[2] = tables[0]; /* one region of 2^11 words: one pass */
    tables[2].n_regions = 1;
    tables[2].region[0].size = 8u << 11;
    tables[3] = tables[0]; /* 2^20 words: two passes of 10 bits */
    tables[3].n_regions = 2;
    tables[3].region[0].size = 8u << 19;
    tables[3].region[1].size = 8u << 19;
    const uint64_t sizes[] = {1, 2, 17, 1000, 100003};
    const int threads[] = {1, 2, 3, 16};
    const uint64_t max_n = 100003;
    uint32_t *addr = malloc(max_n * sizeof(uint32_t)), *buf[4];
    pair *want = malloc(max_n * sizeof(pair));
    for (int k = 0; k < 4; k++) buf[k] = malloc(max_n * sizeof(uint32_t));
    if (!addr || !want || !buf[0] || !buf[1] || !buf[2] || !buf[3]) exit(1);
    int generated = 0;
    for (int tb = 0; tb < 4; tb++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (int kind = 0; kind < 2; kind++) {
                const pk_memsort_regions *t = &tables[tb];
                uint64_t n = sizes[si];
                if (kind == 0) { /* a generated trace: the hot stack's many ties */
                    pk_memsort_gen_options g = {n, check_next(&rng), 0, 0};
                    pk_memsort_trace trace;
                    if (pk_memsort_generate(&ctx, t, &g, &trace) != PK_OK) continue; /* over a small table */
                    memcpy(addr, trace.addr, n * sizeof(uint32_t));
                    pk_memsort_trace_free(&trace);
                    generated++;
                } else { /* uniform over every region's words */
                    for (uint64_t i = 0; i < n; i++) {
                        const pk_memsort_region *rg = &t->region[check_next(&rng) % t->n_regions];
                        addr[i] = rg->base + 8 * (uint32_t)(check_next(&rng) % (rg->size / 8));
                    }
                }
                for (uint64_t i = 0; i < n; i++) {
                    uint32_t compact = 0, c = 0;
                    for (uint32_t r = 0; r < t->n_regions; r++) {
                        if (addr[i] >= t->region[r].base && addr[i] - t->region[r].base < t->region[r].size)
                            compact = c + ((addr[i] - t->region[r].base) >> 3);
                        c += (uint32_t)(t->region[r].size >> 3);
                    }
                    want[i] = (pair){compact, (uint32_t)i};
                }
                qsort(want, n, sizeof(pair), pair_cmp);
                for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
                    const uint32_t *keys = NULL, *values = NULL;
                    double sec = pk_memsort_bench_radix(t, addr, n, buf, threads[ti], &keys, &values);
                    uint64_t bad = 0;
                    for (uint64_t i = 0; keys && values && i < n; i++)
                        bad += keys[i] != want[i].key || values[i] != want[i].index;
                    CHECK(sec >= 0 && keys && values && bad == 0,
                          "radix: table %d, n %llu, %s trace, %d threads: %llu entries differ from the stable sort", tb,
                          (unsigned long long)n, kind ? "uniform" : "generated", threads[ti], (unsigned long long)bad);
                }
            }
    CHECK(generated >= 10, "radix: only %d generated traces fit the tables", generated);
    free(addr);
    free(want);
    for (int k = 0; k < 4; k++) free(buf[k]);
}

int main(void) {
    test_radix();
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
