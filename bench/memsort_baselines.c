/* memsort_baselines.c - the CPU floor for memsort: one streaming pass that
 * reads the trace and writes an output of the same size as plan + fill
 * writes (a position per row and a run table), both sequentially. Each
 * output word depends on the input so the compiler cannot drop the reads. */
#include "memsort_baselines.h"
#include "../src/common/common.h"

double pk_memsort_bench_stream_pass(const uint32_t *addr, uint64_t n, uint32_t *values, uint64_t n_values,
                                    pk_memsort_run_entry *runs, uint64_t n_runs, int n_threads) {
    double t0 = pk_now();
    if (n_values > n) n_values = n;
#pragma omp parallel num_threads(n_threads)
    {
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < (int64_t)n; i++) values[i] = addr[i] ^ (uint32_t)i;
#pragma omp for schedule(static)
        for (int64_t k = 0; k < (int64_t)n_runs; k++) { /* n_runs <= n: a sequential read too */
            runs[k].addr = addr[k];
            runs[k].count = (uint32_t)k;
        }
    }
    return pk_now() - t0;
}
