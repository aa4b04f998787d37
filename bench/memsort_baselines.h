/* memsort_baselines.h - the plain alternatives `pairkit bench memsort`
 * measures pairkit's memsort against, in the same run:
 *  - CPU: one streaming pass that reads the trace and writes as many bytes
 *    as the output has (the floor for any CPU plan + fill), with
 *    non-temporal stores (the floor) and with plain ones; and an LSD radix
 *    sort of (compact address, trace index) pairs (the plain sort);
 *  - CUDA: copy the trace up, CUB radix sort of (compact address, trace
 *    index) pairs over the whole trace, copy keys and values back.
 */
#ifndef PAIRKIT_BENCH_MEMSORT_BASELINES_H
#define PAIRKIT_BENCH_MEMSORT_BASELINES_H

#include "pairkit/memsort.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read addr[n] once and write values[n_values] (one per entry, the rows)
 * and runs[n_runs], with n_threads threads; with nontemporal, through
 * non-temporal stores where the processor has them (x86-64), so that no
 * line of the output is read before it is written. Returns seconds. */
double pk_memsort_bench_stream_pass(const uint32_t *addr, uint64_t n, uint32_t *values, uint64_t n_values,
                                    pk_memsort_run_entry *runs, uint64_t n_runs, int n_threads, int nontemporal);

/* The plain CPU sort: an LSD radix sort of (compact address, trace index)
 * pairs over the whole trace, with n_threads threads, through buf[0..3]
 * (n entries each; keys, values, and their scratch). On return the sorted
 * keys and values are in two of them, named by keys_out and values_out.
 * Returns seconds, -1 when out of memory for the counts. */
double pk_memsort_bench_radix(const pk_memsort_regions *regions, const uint32_t *addr, uint64_t n, uint32_t *buf[4],
                              int n_threads, const uint32_t **keys_out, const uint32_t **values_out);

typedef struct pk_memsort_cub_times {
    double total_ms, up_ms, sort_ms, down_ms; /* device events */
    uint64_t device_bytes;
} pk_memsort_cub_times;

typedef struct pk_memsort_cub_baseline pk_memsort_cub_baseline;

/* Device buffers for n entries and pinned host buffers for the keys and
 * values that come back. NULL on failure (message in ctx). */
pk_memsort_cub_baseline *pk_memsort_cub_baseline_create(pk_context *ctx, const pk_memsort_regions *regions, uint64_t n);
/* One run over the trace (pinned or not); keys and values land in host
 * memory. */
pk_status pk_memsort_cub_baseline_run(pk_context *ctx, pk_memsort_cub_baseline *b, const uint32_t *addr,
                                      pk_memsort_cub_times *times);
/* The sorted keys (compact addresses) and values of the last run. */
const uint32_t *pk_memsort_cub_baseline_keys(const pk_memsort_cub_baseline *b);
const uint32_t *pk_memsort_cub_baseline_values(const pk_memsort_cub_baseline *b);
void pk_memsort_cub_baseline_free(pk_memsort_cub_baseline *b);

#ifdef __cplusplus
}
#endif

#endif
