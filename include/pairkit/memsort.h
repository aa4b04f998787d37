/* memsort.h - address-ordered sorting of zkVM memory traces.
 *
 * A trace is the sequence of raw memory addresses a zkVM touched, entry i
 * having the value i (its trace position). Each address lies in one region
 * of a region table (ROM, INPUT, RAM by default). Each region's entries,
 * sorted stably by address, are cut into instances of a fixed number of
 * rows; instances get global ids (the first region's first, in table order)
 * and worker w of W owns those with gid % W == w.
 *
 * pk_memsort_run computes, for every instance, its plan (first and last
 * address, how many occurrences of them it skips or includes, and in which
 * chunk that boundary falls, plus the previous instance's last row) and,
 * for each owned instance, its rows: the per-chunk row counts, the runs of
 * equal addresses and the trace positions in stable address order. Every
 * backend gives results identical to the reference (a plain stable sort of
 * (compact address, trace position)); docs/memsort.md states the semantics
 * and the file formats.
 *
 * Units: addresses are raw byte addresses (u32, multiples of 8); "compact"
 * addresses are (raw - base) / 8 plus the sizes of the earlier regions;
 * counts are entries (one u32 each). A trace holds fewer than 2^32 entries.
 */
#ifndef PAIRKIT_MEMSORT_H
#define PAIRKIT_MEMSORT_H

#include "pairkit/pairkit.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default) /* the public API: what libpairkit.so exports */
#endif

/* ---- regions -------------------------------------------------------------- */

#define PK_MEMSORT_MAX_REGIONS 8
#define PK_MEMSORT_MAX_CHUNKS 4096
#define PK_MEMSORT_NAME_MAX 16

typedef struct pk_memsort_region {
    char name[PK_MEMSORT_NAME_MAX]; /* "ROM", "INPUT", "RAM", ... NUL-terminated within the array */
    uint32_t base;                  /* first raw address, a multiple of 8 */
    uint64_t size;                  /* bytes, a multiple of 8, > 0; base + size <= 2^32 */
    uint32_t max_instances;         /* instances the prover can take for this region */
    uint32_t instance_entries;      /* rows per instance (S), > 0 */
} pk_memsort_region;

/* A region table. Regions do not overlap; their order is the order of the
 * global instance ids and of the compact address space. */
typedef struct pk_memsort_regions {
    uint32_t n_regions;
    pk_memsort_region region[PK_MEMSORT_MAX_REGIONS];
} pk_memsort_regions;

/* The presets: "default" (ROM 0x80000000, INPUT 0x90000000, RAM 0xA0000000
 * with 16M, 16M and 64M compact addresses, 32, 32 and 256 instances of
 * 2^22 rows) and "zisk" (the same with INPUT at 0x40000000 of 1 GiB and
 * 2^21 rows for ROM and INPUT instances). */
pk_status pk_memsort_regions_preset(pk_context *ctx, const char *name, pk_memsort_regions *out);

/* Read a region table file (format in docs/memsort.md: one region a line,
 * "name base size max_instances instance_entries", '#' comments). Errors
 * name the file and line. */
pk_status pk_memsort_regions_read(pk_context *ctx, const char *path, pk_memsort_regions *out);

/* A preset name or else a file path. */
pk_status pk_memsort_regions_get(pk_context *ctx, const char *name_or_path, pk_memsort_regions *out);

/* Check a table built by hand: not NULL, 1 to PK_MEMSORT_MAX_REGIONS
 * regions, names non-empty, NUL-terminated within their 16 bytes and
 * distinct, sizes, alignment, overlap, limits. Every function that takes a
 * table checks it so first. */
pk_status pk_memsort_regions_check(pk_context *ctx, const pk_memsort_regions *regions);

/* Compact addresses of the whole table (the sum of size / 8, over at most
 * PK_MEMSORT_MAX_REGIONS regions); 0 for NULL. */
uint64_t pk_memsort_regions_compact_size(const pk_memsort_regions *regions);

/* ---- traces ------------------------------------------------------------- */

/* A trace in memory: n_entries raw addresses in chunks; chunk c holds
 * entries [chunk_start[c], chunk_start[c + 1]). Traces made by the reader
 * or the generator own their arrays (free with pk_memsort_trace_free); one
 * built by the caller is only read. */
typedef struct pk_memsort_trace {
    uint64_t n_entries;    /* < 2^32 */
    uint32_t *addr;        /* [n_entries] */
    uint32_t n_chunks;     /* 1..PK_MEMSORT_MAX_CHUNKS */
    uint64_t *chunk_start; /* [n_chunks + 1], chunk_start[0] = 0, non-decreasing */
    int pinned;            /* set by pk_memsort_trace_pin */
} pk_memsort_trace;

/* Read TRACE_DIR/mem_addr_0000.bin, mem_addr_0001.bin, ... (little-endian
 * u32, at most 4096 files, no gap in the numbering) and check every entry
 * against the table. Errors name the file and the entry index within it: a
 * missing chunk in the sequence, a file whose size is not a multiple of 4,
 * an unaligned address, an address in no region, a region with more
 * entries than its instances can hold. */
pk_status pk_memsort_trace_read(pk_context *ctx, const char *dir, const pk_memsort_regions *regions,
                                pk_memsort_trace *out);

/* Check a trace in memory: the same checks as the reader, messages naming
 * the chunk file and entry. */
pk_status pk_memsort_trace_check(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace);

/* Write the chunk files into dir (created if missing): all of them go to
 * temporary files, then into place together, and chunk files of an older,
 * longer trace in dir are removed. On failure, or when ctx->progress asks
 * to cancel (it is called after each chunk), no new chunk file is left. The
 * trace needs 1 to 4096 chunks whose starts run from 0 to n_entries
 * without going back; otherwise PK_ERR_INVALID and nothing is touched. */
pk_status pk_memsort_trace_write(pk_context *ctx, const char *dir, const pk_memsort_trace *trace);

/* Page-lock the trace's addresses for fast copies to the GPU (a prover
 * keeps its trace pinned). No-op without CUDA, and where ctx->cuda_device
 * cannot be used (pk_cuda_unusable). Unpin before freeing. */
pk_status pk_memsort_trace_pin(pk_context *ctx, pk_memsort_trace *trace);
void pk_memsort_trace_unpin(pk_memsort_trace *trace);

void pk_memsort_trace_free(pk_memsort_trace *trace);

/* ---- the generator ------------------------------------------------------ */

/* The generator's entries a chunk unless told: the prover's steps a chunk. */
#define PK_MEMSORT_GEN_CHUNK (1u << 18)

typedef struct pk_memsort_gen_options {
    uint64_t n_entries;     /* 1 .. 2^29 */
    uint64_t seed;          /* any; the same seed gives the same trace */
    uint32_t chunk_entries; /* entries a chunk (the prover's steps); 0 = 2^18 */
    int awkward;            /* the awkward cases instead of a realistic trace */
} pk_memsort_gen_options;

/* The words (8 bytes each) the last region needs for a realistic trace:
 * room for the stack window and a heap below it. */
#define PK_MEMSORT_GEN_MIN_LAST_WORDS 16384u

/* A deterministic synthetic trace. Realistic mode mixes a hot Zipf-like
 * stack window at the top of the last region, a bump-allocated heap at its
 * base growing into fresh addresses touched a few times each, sequential
 * input reads (second region), a small set of read-only tables (first
 * region) and long memcpy-like runs; with a last region of fewer than
 * PK_MEMSORT_GEN_MIN_LAST_WORDS words it is skewed accesses over that
 * region's words alone (the other regions empty). Awkward mode gives: a run of one
 * address across an instance boundary, a run longer than a whole instance,
 * an empty region (the second, when there are three or more), and a last
 * partial instance. More than 4096 chunks is an error. A realistic trace
 * reports its progress after each full chunk, and a callback that asks to
 * stop ends the call in PK_ERR_CANCELLED with nothing kept. */
pk_status pk_memsort_generate(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_gen_options *opts,
                              pk_memsort_trace *out);

/* The same trace, written straight to chunk files in dir as it is made:
 * a realistic trace holds one chunk in memory at a time (an awkward one,
 * which is shuffled as a whole, all of it). Written as by
 * pk_memsort_trace_write: all chunk files or none, and ctx->progress
 * (fraction of entries made) is asked after each chunk and can cancel. A
 * region over its capacity stops the run at the chunk that overflows it. */
pk_status pk_memsort_generate_dir(pk_context *ctx, const pk_memsort_regions *regions,
                                  const pk_memsort_gen_options *opts, const char *dir);

/* ---- plan and fill -------------------------------------------------------- */

typedef enum pk_memsort_kernel {
    PK_MEMSORT_KERNEL_BEST = 0,
    PK_MEMSORT_KERNEL_REF,          /* stable merge sort of (compact, position), one thread */
    PK_MEMSORT_KERNEL_CPU,          /* counting sort over per-thread histograms, OpenMP, AVX-512 where present */
    PK_MEMSORT_KERNEL_CUDA,         /* streamed counting sort on the GPU */
    PK_MEMSORT_KERNEL_CPU_PORTABLE, /* the CPU kernel without hand-written vector code */
    PK_MEMSORT_KERNEL_COUNT_
} pk_memsort_kernel;

typedef struct pk_memsort_options {
    pk_backend backend; /* PK_BACKEND_AUTO by default */
    int kernel;         /* a pk_memsort_kernel; 0 = best of the backend */
    uint32_t n_workers; /* W >= 1 (0 means 1) */
    uint32_t worker;    /* w < W */
} pk_memsort_options;

/* One instance and its plan. Rows are positions [first_row, first_row +
 * n_rows) of its region's stable address order. */
typedef struct pk_memsort_instance {
    uint32_t gid;    /* global id */
    uint32_t region; /* index in the region table */
    uint32_t index;  /* instance number within the region */
    uint32_t owned;  /* gid % W == w */
    uint64_t first_row;
    uint32_t n_rows;
    uint32_t first_addr, last_addr; /* raw addresses of the first and last row */
    /* The first address: first_skip_total of its occurrences (in trace
     * order) belong to earlier instances; the first row comes from chunk
     * first_chunk, which holds first_skip of those skipped occurrences. */
    uint32_t first_chunk, first_skip, first_skip_total;
    /* The last address: the instance holds last_include_total rows of it,
     * last_include of them from chunk last_chunk, the chunk of the last
     * row. */
    uint32_t last_chunk, last_include, last_include_total;
    /* The row just before the instance in its region (none for index 0). */
    uint32_t has_prev, prev_addr, prev_value;
    /* Owned instances only (0 otherwise): */
    uint32_t n_runs;        /* runs of equal address */
    uint64_t runs_offset;   /* first run in result.runs */
    uint64_t values_offset; /* first row in result.values */
    uint64_t counts_offset; /* result.chunk_counts[counts_offset + c]: rows from chunk c */
} pk_memsort_instance;

/* A run: count consecutive rows of one raw address, addr. */
typedef struct pk_memsort_run_entry {
    uint32_t addr;
    uint32_t count;
} pk_memsort_run_entry;

typedef struct pk_memsort_stats {
    double seconds;        /* wall time of pk_memsort_run */
    double device_ms;      /* CUDA: events from the first upload to the last download */
    double upload_ms;      /* CUDA: events around the host-to-device copies */
    uint64_t device_bytes; /* CUDA: device memory held */
    uint64_t host_bytes;   /* host memory the backend allocated (peak) */
    uint64_t pcie_bytes;   /* CUDA: bytes copied in both directions */
    int kernel;            /* the kernel that ran */
    int gpu_too_small; /* 1: backend AUTO found a GPU with too little free memory for the trace, and the CPU ran it */
} pk_memsort_stats;

/* The result of one run. Initialise with pk_memsort_result_init; a result
 * may be passed to pk_memsort_run again and keeps its buffers (pinned host
 * memory on CUDA) when they are large enough. Free with
 * pk_memsort_result_free. */
typedef struct pk_memsort_result {
    uint64_t n_entries;
    uint32_t n_chunks;
    uint32_t n_workers, worker;
    uint32_t n_instances;           /* all instances of the trace */
    pk_memsort_instance *instances; /* [n_instances], by gid */
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS];
    uint32_t n_owned;
    uint64_t n_runs;            /* runs of all owned instances */
    pk_memsort_run_entry *runs; /* [n_runs] */
    uint64_t n_values;          /* rows of all owned instances */
    uint32_t *values;           /* trace positions; see values_offset (elsewhere unspecified) */
    uint32_t *chunk_counts;     /* [n_owned * n_chunks] */
    uint64_t *chunk_start;      /* [n_chunks + 1]: the trace position of each chunk's first entry, then n_entries */
    pk_memsort_stats stats;
    /* buffer capacities and backend state, owned by the library */
    uint64_t cap_runs, cap_values, cap_counts;
    uint32_t cap_instances;
    int host_pinned;
    void *backend_state;
} pk_memsort_result;

void pk_memsort_result_init(pk_memsort_result *result); /* NULL: nothing done */
void pk_memsort_result_free(pk_memsort_result *result);

const char *pk_memsort_kernel_name(int kernel);    /* NULL for a number that is no kernel */
int pk_memsort_kernel_from_name(const char *name); /* -1 if unknown or NULL */
int pk_memsort_kernel_available(int kernel);

/* Whether opts can run in this build on this machine, before any trace is
 * read (pk_memsort_run makes the same checks): the worker below the
 * workers, a known kernel that can run here and belongs to the backend
 * asked for, a usable CUDA device where cuda is asked for, a backend
 * within pk_backend. opts NULL: the defaults. */
pk_status pk_memsort_options_check(pk_context *ctx, const pk_memsort_options *opts);

/* Plan and fill for worker opts->worker of opts->n_workers. The trace is
 * checked first (PK_ERR_PARSE naming chunk and entry). Reentrant for
 * distinct results; uses ctx->n_threads CPU threads; the CUDA kernel uses
 * ctx->cuda_device and keeps device buffers in the result between calls.
 * regions, trace (with its chunk_start, and addr when it has entries) and
 * result are required; opts NULL: the defaults. */
pk_status pk_memsort_run(pk_context *ctx, const pk_memsort_options *opts, const pk_memsort_regions *regions,
                         const pk_memsort_trace *trace, pk_memsort_result *result);

/* Memory a run of `kernel` takes for a trace of n_entries under this
 * table, all instances owned (the most), queried before allocating
 * anything: host bytes (result arrays and the backend's scratch, the trace
 * itself not counted) and device bytes (CUDA; 0 for the CPU kernels).
 * Upper bounds: the runs are taken as one per entry. n_threads as in
 * pk_context (0 = OpenMP's default). n_entries below 2^32, as a trace
 * holds (PK_ERR_INVALID otherwise); both out pointers required. */
pk_status pk_memsort_memory_bytes(pk_context *ctx, const pk_memsort_regions *regions, uint64_t n_entries, int kernel,
                                  int n_threads, uint64_t *host_bytes, uint64_t *device_bytes);

/* Rows j of an owned instance as (raw address, value) pairs into
 * pairs[2 * n_rows] (address, value, address, value, ...). Any argument
 * NULL: nothing written. */
void pk_memsort_instance_rows(const pk_memsort_result *result, const pk_memsort_instance *inst, uint32_t *pairs);

/* ---- filling from the plan alone --------------------------------------- */

/* One chunk file a worker holds: its number in the trace and its raw
 * addresses; entry i has the value (trace position) first_position + i. */
typedef struct pk_memsort_chunk {
    uint32_t index; /* n of mem_addr_NNNN.bin */
    uint64_t first_position;
    const uint32_t *addr; /* [n_entries] */
    uint64_t n_entries;
} pk_memsort_chunk;

/* One instance to fill: its plan (from any worker's result, owned or not,
 * or from memsort.bin) and room for its rows. */
typedef struct pk_memsort_fill {
    const pk_memsort_instance *plan;
    uint32_t *pairs;      /* [2 * capacity]: (raw address, value) pairs */
    uint64_t capacity;    /* rows pairs has room for (plan->n_rows for a whole instance) */
    uint64_t n_rows;      /* out: the rows the chunks give */
    uint32_t *chunk_rows; /* optional [n_chunks] out: the rows each given chunk gives */
} pk_memsort_fill;

/* The rows that the given chunks hold of each instance, from the plans
 * alone, as a prover worker that holds only some chunk files fills its
 * instances (docs/memsort.md, "Instances, workers, plans"): each chunk's
 * entries inside the instance's address range, the first address's
 * skipped occurrences left out and the last address's kept ones taken,
 * the whole in stable address order. Given every chunk the instance draws
 * on (those with rows in its chunk counts), the rows are the instance's
 * rows and n_rows its n_rows; given some, the rows of those chunks, in the
 * same order. Chunks in increasing index and position order. Entries in no
 * instance's range are not read further; a misaligned one inside a range
 * is PK_ERR_PARSE naming the chunk file and entry. More rows than a fill's
 * capacity is PK_ERR_INVALID (n_rows and chunk_rows say how many) before
 * any pair is written. Uses ctx->n_threads threads, reports progress and stops when
 * asked (PK_ERR_CANCELLED; the rows are then unspecified). */
pk_status pk_memsort_fill_from_chunks(pk_context *ctx, const pk_memsort_chunk *chunks, uint32_t n_chunks,
                                      pk_memsort_fill *fills, uint32_t n_fills);

/* The chunk files a worker holds: every mem_addr_NNNN.bin in dir (any of
 * the trace's chunks; gaps allowed), into *chunks ([*n_chunks], increasing
 * number, each with the trace position of its first entry from the plans'
 * chunk table), ready for pk_memsort_fill_from_chunks. plans: a result of
 * pk_memsort_read or pk_memsort_run (its n_chunks and chunk_start). A chunk
 * number past the plans' trace, a file whose entry count is not its
 * chunk's, a file cut inside an entry, a misaligned address or one in no
 * region is PK_ERR_PARSE naming the file (and entry); a folder without
 * chunk files is PK_ERR_IO. Free with pk_memsort_chunks_free. */
pk_status pk_memsort_chunks_read(pk_context *ctx, const char *dir, const pk_memsort_regions *regions,
                                 const pk_memsort_result *plans, pk_memsort_chunk **chunks, uint32_t *n_chunks);
void pk_memsort_chunks_free(pk_memsort_chunk *chunks, uint32_t n_chunks);

/* Every owned instance of result filled again from all of the trace's
 * chunks by its plan alone (pk_memsort_fill_from_chunks) and compared with
 * its rows and chunk counts: PK_OK when all agree, else PK_ERR_INTERNAL
 * naming the first difference. The instances go in batches of at most
 * 2^27 rows and 2^24 (instance, chunk) pairs, each batch reading the
 * trace again: about 8 bytes a row and 4 bytes an (instance, chunk) pair
 * of a batch, besides pk_memsort_fill_from_chunks's own. */
pk_status pk_memsort_check_plans(pk_context *ctx, const pk_memsort_trace *trace, const pk_memsort_result *result);

/* Compare two results of the same trace and worker: every instance plan
 * and every owned instance's counts, runs and values. PK_OK when equal,
 * else PK_ERR_INTERNAL with the first difference (instance and field);
 * PK_ERR_INVALID for a NULL result. */
pk_status pk_memsort_compare(pk_context *ctx, const pk_memsort_result *expected, const pk_memsort_result *got);

/* Write OUT_DIR/memsort.bin (binary layout in docs/memsort.md) and
 * OUT_DIR/summary.txt. Both appear together or not at all; on failure an
 * older pair in OUT_DIR is left as it was. Progress is reported by bytes:
 * the first half of the fraction as they are written (the callback asked
 * between instances), the second as they reach the disk (asked when the
 * sync starts and after each 32 MiB of it); the callback is asked once
 * more before the files are renamed into place, and a cancellation at any
 * of these is PK_ERR_CANCELLED with no file changed. */
pk_status pk_memsort_write(pk_context *ctx, const char *out_dir, const pk_memsort_regions *regions,
                           const pk_memsort_result *result);

/* Read a memsort.bin that pk_memsort_write wrote (path: the file or its
 * folder; version 2, docs/memsort.md): its region table into regions and,
 * into result, every instance's plan, the chunk table, the worker's share
 * and the owned instances' chunk counts; with with_rows, also their runs
 * and values (else n_runs and n_values are 0 and no rows are read). The
 * header, the region table and each instance are checked against one
 * another and against the chunk counts, and with the rows the plan fields
 * those fix (first_chunk, last_chunk, last_include, last_include_total,
 * and, where the previous instance is owned too, prev_value and
 * first_skip) and the values themselves (trace positions within the
 * trace, rising within a run): a file cut short, an unknown version or a
 * field out of place is PK_ERR_PARSE naming the file and the field; a
 * file that cannot be read is PK_ERR_IO. result: initialised with
 * pk_memsort_result_init, or a result to reuse (its buffers are freed
 * first); on failure it is left empty. */
pk_status pk_memsort_read(pk_context *ctx, const char *path, int with_rows, pk_memsort_regions *regions,
                          pk_memsort_result *result);

/* The chunk that holds trace position `position` by a chunk table
 * (chunk_start[n_chunks + 1], as a trace or a result holds it): the c with
 * chunk_start[c] <= position < chunk_start[c + 1], an empty chunk never,
 * found by bisection; position < chunk_start[n_chunks] required. */
uint32_t pk_memsort_chunk_at(const uint64_t *chunk_start, uint32_t n_chunks, uint64_t position);

/* The plan fields an instance's rows fix, against those rows: first_chunk
 * and last_chunk (the chunks of its first and last rows),
 * last_include_total (its rows of last_addr) and last_include (those of
 * them in last_chunk); and, with prev (the instance before it in its
 * region, with its rows), prev_value (prev's last row's position) and
 * first_skip (prev's rows of first_addr in first_chunk, with those before
 * prev there when prev holds that address alone). pos[j * stride] is the
 * trace position of row j of in's in->n_rows rows (stable address order:
 * stride 1 for a result's values, 2 for a fill's (address, value) pairs
 * from pairs + 1), last_count its rows of last_addr; prev_pos,
 * prev_last_count the same of prev. NULL when every field agrees, else
 * the name of the first that does not. The chunk table is chunk_start. */
const char *pk_memsort_plan_disagrees(const uint64_t *chunk_start, uint32_t n_chunks, const pk_memsort_instance *in,
                                      const uint32_t *pos, size_t stride, uint32_t last_count,
                                      const pk_memsort_instance *prev, const uint32_t *prev_pos,
                                      uint32_t prev_last_count);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
