/* memsort_internal.h - what the memsort backends share: the region layout
 * in the form the hot loops use, the instance table, result buffers, and
 * the backends' entry points.
 *
 * The invariant every backend keeps: its result equals that of the
 * reference (ref.c) field for field, for every worker and trace.
 */
#ifndef PAIRKIT_MEMSORT_INTERNAL_H
#define PAIRKIT_MEMSORT_INTERNAL_H

#include <stdint.h>

#include "../common/common.h"
#include "pairkit/memsort.h"

/* Entries whose keys the CPU kernel makes at once, into a buffer of each
 * thread's. Long blocks keep the trace's reads streaming: 2^25 entries,
 * two threads, the scatter took 22.5-24.8 ms with blocks of 1024 (the keys
 * in L1), 20.1-22.7 with 16384, about the same with 65536. */
#define PK_MEMSORT_KEY_BLOCK 16384u

/* memsort.bin (layout in docs/memsort.md), as pk_memsort_write writes it
 * and pk_memsort_read reads it: its magic, its version, and the bytes of
 * its header, of a region's record and of an instance's record. */
#define PK_MEMSORT_BIN_MAGIC "PKMSORT1"
#define PK_MEMSORT_BIN_VERSION 2u /* 2: the chunk table after the regions */
#define PK_MEMSORT_BIN_HEADER_BYTES 72u
#define PK_MEMSORT_BIN_REGION_BYTES 48u
#define PK_MEMSORT_BIN_INSTANCE_BYTES 96u

/* dir, a slash and name in a new string (the caller frees it); NULL when
 * out of memory. */
char *pk_memsort_join_path(const char *dir, const char *name);

/* The region table as the loops read it: raw [base, end) and the compact
 * address of each region's first word. */
typedef struct pk_memsort_layout {
    uint32_t n_regions;
    uint64_t base[PK_MEMSORT_MAX_REGIONS];
    uint64_t end[PK_MEMSORT_MAX_REGIONS];
    uint32_t compact_base[PK_MEMSORT_MAX_REGIONS + 1]; /* [n_regions] = total */
    uint32_t instance_entries[PK_MEMSORT_MAX_REGIONS];
    uint32_t max_instances[PK_MEMSORT_MAX_REGIONS];
    uint32_t n_compact;
    int key_bits; /* bits of the largest compact address */
} pk_memsort_layout;

void pk_memsort_layout_make(const pk_memsort_regions *regions, pk_memsort_layout *layout);

/* Region of a raw address, -1 if none. */
static inline int pk_memsort_region_of(const pk_memsort_layout *l, uint32_t raw) {
    for (uint32_t r = 0; r < l->n_regions; r++)
        if (raw >= l->base[r] && raw < l->end[r]) return (int)r;
    return -1;
}

static inline uint32_t pk_memsort_compact(const pk_memsort_layout *l, int r, uint32_t raw) {
    return l->compact_base[r] + (uint32_t)((raw - l->base[r]) >> 3);
}

/* Region of a compact address (always found for a < n_compact). */
static inline int pk_memsort_region_of_compact(const pk_memsort_layout *l, uint32_t a) {
    int r = 0;
    while ((uint32_t)r + 1 < l->n_regions && a >= l->compact_base[r + 1]) r++;
    return r;
}

static inline uint32_t pk_memsort_raw(const pk_memsort_layout *l, uint32_t a) {
    int r = pk_memsort_region_of_compact(l, a);
    return (uint32_t)(l->base[r] + ((uint64_t)(a - l->compact_base[r]) << 3));
}

/* Chunk of a trace position: the c with chunk_start[c] <= pos < chunk_start[c + 1]
 * (empty chunks are never the answer). */
uint32_t pk_memsort_chunk_of(const pk_memsort_trace *trace, uint64_t pos);

/* Tests set this to have pk_memsort_fill_from_chunks scan the chunks one
 * entry at a time, as it does on a CPU without AVX-512 (0: as the CPU
 * allows). Process-wide; not thread-safe. */
extern int pk_memsort_fill_scalar;

/* The chunk table and sizes of a trace, without looking at the entries. */
pk_status pk_memsort_trace_check_structure(pk_context *ctx, const pk_memsort_trace *trace);

/* Describe entry `pos` for messages: "mem_addr_0012.bin entry 345". */
void pk_memsort_entry_name(const pk_memsort_trace *trace, uint64_t pos, char *buf, size_t size);

/* Fill result->instances (gid, region, index, owned, first_row, n_rows)
 * from the entries per region, allocating as needed; check each region's
 * capacity. Sets n_instances, n_owned, region_entries. */
pk_status pk_memsort_instances_build(pk_context *ctx, const pk_memsort_layout *layout,
                                     const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                                     const uint64_t *region_entries, uint32_t n_workers, uint32_t worker,
                                     pk_memsort_result *result);

/* Large host arrays (trace, rows, scratch) on 2 MB pages where the kernel
 * offers them (madvise): a scatter over hundreds of MB then misses the
 * TLB far less, and first touches fault 512 times less often. Free with
 * pk_aligned_free. */
void *pk_memsort_big_alloc(size_t bytes);

/* Make room in the result's buffers. pinned: use page-locked memory
 * (CUDA results). */
pk_status pk_memsort_result_reserve(pk_context *ctx, pk_memsort_result *result, uint64_t n_runs, uint64_t n_values,
                                    uint64_t n_counts, int pinned);

/* The capacity check's message when region r holds too many entries:
 * finds the first entry beyond the capacity in trace order. */
pk_status pk_memsort_capacity_error(pk_context *ctx, const pk_memsort_layout *layout, const pk_memsort_regions *regions,
                                    const pk_memsort_trace *trace, int r, uint64_t n_region);

/* Chunk files written all or none (pk_memsort_trace_write, and the
 * generator, a chunk at a time): begin checks and creates dir for
 * n_chunks chunk files; each put writes the next chunk to a temporary
 * file and syncs it; commit (after exactly n_chunks puts) renames them all
 * into place and removes an older trace's further chunk files; abort,
 * after a failure or instead of commit, removes the temporary files (and
 * the folder, where begin created it). Commit ends the writer whatever it
 * returns. The struct must not move between begin and commit or abort. */
typedef struct pk_memsort_chunk_writer {
    char dir_buf[4096];
    char **tmp;
    uint32_t n_chunks, next;
    int le;
    int created; /* begin made the folder */
} pk_memsort_chunk_writer;
pk_status pk_memsort_chunk_writer_begin(pk_context *ctx, pk_memsort_chunk_writer *w, const char *dir,
                                        uint32_t n_chunks);
pk_status pk_memsort_chunk_writer_put(pk_context *ctx, pk_memsort_chunk_writer *w, const uint32_t *addr, uint64_t n);
pk_status pk_memsort_chunk_writer_commit(pk_context *ctx, pk_memsort_chunk_writer *w);
void pk_memsort_chunk_writer_abort(pk_memsort_chunk_writer *w);

/* The first of the n entries at a that is misaligned or in no region of
 * l (n when none); each region's entries are added to counts. One thread. */
uint64_t pk_memsort_first_bad(const pk_memsort_layout *l, const uint32_t *a, uint64_t n, uint64_t *counts);

/* State a backend keeps in result->backend_state between runs (scratch
 * buffers, device memory); every kind starts with its int tag. */
enum { PK_MEMSORT_STATE_CPU = 1, PK_MEMSORT_STATE_CUDA = 2 };
void pk_memsort_backend_state_free(pk_memsort_result *result);
void pk_memsort_cpu_state_free(void *state);

/* Backends. On entry the trace's chunk table has been checked; the
 * entries are checked on the way (a bad one ends the run with the
 * message of pk_memsort_trace_check). */
pk_status pk_memsort_run_ref(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress);
/* portable: no hand-written vector code (the kernel "cpu-portable"). */
pk_status pk_memsort_run_cpu(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                             uint32_t n_workers, uint32_t worker, int portable, pk_memsort_result *result,
                             pk_progress *progress);

#ifdef PK_HAVE_CUDA
pk_status pk_memsort_run_cuda(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                              uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress);
void *pk_memsort_cuda_host_alloc(size_t bytes);
pk_status pk_memsort_cuda_device_bytes(pk_context *ctx, const pk_memsort_layout *layout, uint64_t n_entries,
                                       uint64_t *bytes);
/* 1 when a run of n_entries under regions fits in the device memory free
 * (with what result's CUDA state already holds), 0 when it does not; 1 too
 * when that cannot be told (the run then reports what fails). */
int pk_memsort_cuda_fits(pk_context *ctx, const pk_memsort_regions *regions, uint64_t n_entries,
                         const pk_memsort_result *result);
/* 1 when the last CUDA run on result stopped because an allocation found
 * the device full. */
int pk_memsort_cuda_device_was_full(const pk_memsort_result *result);
void pk_memsort_cuda_host_free(void *p);
void pk_memsort_cuda_state_free(void *state);
int pk_memsort_cuda_host_register(void *p, size_t bytes);
void pk_memsort_cuda_host_unregister(void *p);
#endif

#endif
