/* api.c - the public memsort entry points: kernel choice, the instance
 * table every backend shares, result buffers, comparison, and the output
 * files (memsort.bin and summary.txt, layout in docs/memsort.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "memsort_internal.h"

static const char *kernel_names[PK_MEMSORT_KERNEL_COUNT_] = {"best", "ref", "cpu", "cuda", "cpu-portable"};

const char *pk_memsort_kernel_name(int kernel) {
    if (kernel < 0 || kernel >= PK_MEMSORT_KERNEL_COUNT_) return NULL;
    return kernel_names[kernel];
}

int pk_memsort_kernel_from_name(const char *name) {
    for (int k = 0; name && k < PK_MEMSORT_KERNEL_COUNT_; k++)
        if (strcmp(kernel_names[k], name) == 0) return k;
    return -1;
}

int pk_memsort_kernel_available(int kernel) {
    switch (kernel) {
    case PK_MEMSORT_KERNEL_BEST:
    case PK_MEMSORT_KERNEL_REF:
    case PK_MEMSORT_KERNEL_CPU:
    case PK_MEMSORT_KERNEL_CPU_PORTABLE: return 1;
    case PK_MEMSORT_KERNEL_CUDA: return pk_cuda_device_count() > 0;
    default: return 0;
    }
}

void pk_memsort_result_init(pk_memsort_result *result) {
    if (result) memset(result, 0, sizeof *result);
}

#define HUGE_PAGE_BYTES (2u << 20)

void *pk_memsort_big_alloc(size_t bytes) {
    if (bytes < 2 * HUGE_PAGE_BYTES) return pk_aligned_alloc(bytes);
    void *p = NULL;
    size_t rounded = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    if (posix_memalign(&p, HUGE_PAGE_BYTES, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
    return p;
}

static void host_free(void *p, int pinned) {
#ifdef PK_HAVE_CUDA
    if (pinned) {
        pk_memsort_cuda_host_free(p);
        return;
    }
#endif
    (void)pinned;
    pk_aligned_free(p);
}

static void *host_alloc(size_t bytes, int pinned) {
#ifdef PK_HAVE_CUDA
    if (pinned) return pk_memsort_cuda_host_alloc(bytes);
#endif
    (void)pinned;
    return pk_memsort_big_alloc(bytes);
}

void pk_memsort_result_free(pk_memsort_result *result) {
    if (!result) return;
    host_free(result->runs, result->host_pinned);
    host_free(result->values, result->host_pinned);
    host_free(result->chunk_counts, result->host_pinned);
    free(result->instances);
    free(result->chunk_start);
    pk_memsort_backend_state_free(result);
    memset(result, 0, sizeof *result);
}

void pk_memsort_backend_state_free(pk_memsort_result *result) {
    void *state = result->backend_state;
    result->backend_state = NULL;
    if (!state) return;
    if (*(const int *)state == PK_MEMSORT_STATE_CPU) pk_memsort_cpu_state_free(state);
#ifdef PK_HAVE_CUDA
    else if (*(const int *)state == PK_MEMSORT_STATE_CUDA) pk_memsort_cuda_state_free(state);
#endif
}

pk_status pk_memsort_result_reserve(pk_context *ctx, pk_memsort_result *result, uint64_t n_runs, uint64_t n_values,
                                    uint64_t n_counts, int pinned) {
    if (result->host_pinned != pinned) {
        host_free(result->runs, result->host_pinned);
        host_free(result->values, result->host_pinned);
        host_free(result->chunk_counts, result->host_pinned);
        result->runs = NULL;
        result->values = NULL;
        result->chunk_counts = NULL;
        result->cap_runs = result->cap_values = result->cap_counts = 0;
        result->host_pinned = pinned;
    }
    if (n_runs > result->cap_runs || !result->runs) {
        host_free(result->runs, pinned);
        result->runs = host_alloc((n_runs + 1) * sizeof(pk_memsort_run_entry), pinned);
        result->cap_runs = result->runs ? n_runs : 0;
    }
    if (n_values > result->cap_values || !result->values) {
        host_free(result->values, pinned);
        result->values = host_alloc((n_values + 1) * sizeof(uint32_t), pinned);
        result->cap_values = result->values ? n_values : 0;
    }
    if (n_counts > result->cap_counts || !result->chunk_counts) {
        host_free(result->chunk_counts, pinned);
        result->chunk_counts = host_alloc((n_counts + 1) * sizeof(uint32_t), pinned);
        result->cap_counts = result->chunk_counts ? n_counts : 0;
    }
    /* name the table that did not fit: the rows per (owned instance, chunk)
     * grow with instances x chunks, large for instances of few rows */
    const char *kind = pinned ? "pinned " : "";
    if (!result->chunk_counts)
        return pk_fail(ctx, PK_ERR_NOMEM,
                       "out of %shost memory for the rows per (owned instance, chunk): %llu counts, %.2f GiB (%llu "
                       "owned instances of %u chunks each; fewer, larger instances or more workers need less)",
                       kind, (unsigned long long)n_counts, (double)(n_counts + 1) * 4 / (1u << 30),
                       (unsigned long long)result->n_owned,
                       result->n_owned ? (unsigned)(n_counts / result->n_owned) : 0u);
    if (!result->runs || !result->values)
        return pk_fail(ctx, PK_ERR_NOMEM, "out of %shost memory for %llu rows and %llu runs (%.2f GiB)", kind,
                       (unsigned long long)n_values, (unsigned long long)n_runs,
                       ((double)(n_values + 1) * 4 + (double)(n_runs + 1) * 8) / (1u << 30));
    uint64_t bytes = (n_runs + 1) * sizeof(pk_memsort_run_entry) + (n_values + 1) * 4 + (n_counts + 1) * 4;
    if (bytes > result->stats.host_bytes) result->stats.host_bytes = bytes;
    return PK_OK;
}

pk_status pk_memsort_instances_build(pk_context *ctx, const pk_memsort_layout *layout,
                                     const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                                     const uint64_t *region_entries, uint32_t n_workers, uint32_t worker,
                                     pk_memsort_result *result) {
    uint64_t total = 0;
    for (uint32_t r = 0; r < layout->n_regions; r++) {
        uint64_t s = layout->instance_entries[r];
        uint64_t k = (region_entries[r] + s - 1) / s;
        if (k > layout->max_instances[r])
            return pk_memsort_capacity_error(ctx, layout, regions, trace, (int)r, region_entries[r]);
        total += k;
    }
    if (total > result->cap_instances || !result->instances) {
        free(result->instances);
        result->instances = calloc(total + 1, sizeof(pk_memsort_instance));
        if (!result->instances) {
            result->cap_instances = 0;
            return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %llu instances", (unsigned long long)total);
        }
        result->cap_instances = (uint32_t)total;
    }
    memset(result->instances, 0, (total + 1) * sizeof(pk_memsort_instance));
    free(result->chunk_start);
    result->chunk_start = malloc(((size_t)trace->n_chunks + 1) * sizeof(uint64_t));
    if (!result->chunk_start) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %u chunk starts", trace->n_chunks);
    memcpy(result->chunk_start, trace->chunk_start, ((size_t)trace->n_chunks + 1) * sizeof(uint64_t));
    result->n_entries = trace->n_entries;
    result->n_chunks = trace->n_chunks;
    result->n_workers = n_workers;
    result->worker = worker;
    result->n_instances = (uint32_t)total;
    result->n_owned = 0;
    result->n_runs = result->n_values = 0;
    memset(result->region_entries, 0, sizeof result->region_entries);
    uint32_t gid = 0;
    for (uint32_t r = 0; r < layout->n_regions; r++) {
        result->region_entries[r] = region_entries[r];
        uint64_t s = layout->instance_entries[r];
        for (uint64_t first = 0; first < region_entries[r]; first += s, gid++) {
            pk_memsort_instance *in = &result->instances[gid];
            in->gid = gid;
            in->region = r;
            in->index = (uint32_t)(first / s);
            in->owned = gid % n_workers == worker;
            in->first_row = first;
            in->n_rows = (uint32_t)(region_entries[r] - first < s ? region_entries[r] - first : s);
            result->n_owned += in->owned;
        }
    }
    return PK_OK;
}

/* opts checked as pk_memsort_options_check says, into the kernel to run
 * (PK_MEMSORT_KERNEL_BEST resolved by the backend) */
static pk_status options_resolve(pk_context *ctx, const pk_memsort_options *opts, pk_memsort_options *o,
                                 int *kernel_out) {
    *o = (pk_memsort_options){PK_BACKEND_AUTO, PK_MEMSORT_KERNEL_BEST, 1, 0};
    if (opts) *o = *opts;
    if ((unsigned)o->backend > PK_BACKEND_CUDA)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_options.backend: %d is not auto (0), cpu (1) or cuda (2)",
                       (int)o->backend);
    if (o->n_workers == 0) o->n_workers = 1;
    if (o->worker >= o->n_workers)
        return pk_fail(ctx, PK_ERR_INVALID, "worker %u: must be below the number of workers, %u", o->worker,
                       o->n_workers);
    int kernel = o->kernel;
    if (kernel < 0 || kernel >= PK_MEMSORT_KERNEL_COUNT_)
        return pk_fail(ctx, PK_ERR_INVALID, "unknown kernel %d", kernel);
    if (kernel == PK_MEMSORT_KERNEL_BEST) {
        pk_backend backend;
        pk_status st = pk_backend_resolve(ctx, o->backend, &backend);
        if (st) return st;
        kernel = backend == PK_BACKEND_CUDA ? PK_MEMSORT_KERNEL_CUDA : PK_MEMSORT_KERNEL_CPU;
    } else if (!pk_memsort_kernel_available(kernel)) {
        return pk_fail(ctx, PK_ERR_UNSUPPORTED, "kernel '%s' cannot run here (%s)", pk_memsort_kernel_name(kernel),
                       pk_kernel_absent_reason(1, 0));
    } else if (o->backend != PK_BACKEND_AUTO && (o->backend == PK_BACKEND_CUDA) != (kernel == PK_MEMSORT_KERNEL_CUDA)) {
        return pk_fail(ctx, PK_ERR_INVALID, "kernel '%s' does not belong to backend '%s'",
                       pk_memsort_kernel_name(kernel), pk_backend_name(o->backend));
    }
    *kernel_out = kernel;
    return PK_OK;
}

pk_status pk_memsort_options_check(pk_context *ctx, const pk_memsort_options *opts) {
    pk_clear(ctx);
    pk_memsort_options o;
    int kernel = PK_MEMSORT_KERNEL_BEST;
    return options_resolve(ctx, opts, &o, &kernel);
}

pk_status pk_memsort_run(pk_context *ctx, const pk_memsort_options *opts, const pk_memsort_regions *regions,
                         const pk_memsort_trace *trace, pk_memsort_result *result) {
    pk_clear(ctx);
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_run: regions is NULL");
    if (!trace) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_run: trace is NULL");
    if (!result) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_run: result is NULL");
    double t0 = pk_now();
    pk_memsort_options o;
    int kernel = PK_MEMSORT_KERNEL_BEST;
    pk_status st = options_resolve(ctx, opts, &o, &kernel);
    if (st) return st;
    if ((st = pk_memsort_regions_check(ctx, regions)) != PK_OK) return st;
    if ((st = pk_memsort_trace_check_structure(ctx, trace)) != PK_OK) return st;
    int gpu_too_small = 0, chosen = o.kernel == PK_MEMSORT_KERNEL_BEST && o.backend == PK_BACKEND_AUTO;
    (void)chosen; /* used with CUDA only */
#ifdef PK_HAVE_CUDA
    /* auto: a trace the GPU's free memory cannot hold is sorted on the CPU */
    if (chosen && kernel == PK_MEMSORT_KERNEL_CUDA && !pk_memsort_cuda_fits(ctx, regions, trace->n_entries, result))
        kernel = PK_MEMSORT_KERNEL_CPU, gpu_too_small = 1;
#endif
    memset(&result->stats, 0, sizeof result->stats);
    result->stats.gpu_too_small = gpu_too_small;
    pk_progress progress;
    pk_progress_begin(&progress, ctx, (double)trace->n_entries + 1, 0, 1);
    if (kernel == PK_MEMSORT_KERNEL_REF) {
        if ((st = pk_memsort_trace_check(ctx, regions, trace)) != PK_OK) return st;
        st = pk_memsort_run_ref(ctx, regions, trace, o.n_workers, o.worker, result, &progress);
    } else if (kernel == PK_MEMSORT_KERNEL_CPU || kernel == PK_MEMSORT_KERNEL_CPU_PORTABLE) {
        st = pk_memsort_run_cpu(ctx, regions, trace, o.n_workers, o.worker, kernel == PK_MEMSORT_KERNEL_CPU_PORTABLE,
                                result, &progress);
#ifdef PK_HAVE_CUDA
    } else {
        st = pk_memsort_run_cuda(ctx, regions, trace, o.n_workers, o.worker, result, &progress);
        /* auto: the device's free memory held the trace when it was
         * checked, but another process (or another rank on the same GPU)
         * took it before this run's allocations: the CPU sorts it, the
         * device memory already taken given back */
        if (st == PK_ERR_NOMEM && chosen && pk_memsort_cuda_device_was_full(result)) {
            pk_memsort_backend_state_free(result);
            pk_clear(ctx);
            kernel = PK_MEMSORT_KERNEL_CPU;
            result->stats.gpu_too_small = 1;
            pk_progress_begin(&progress, ctx, (double)trace->n_entries + 1, 0, 1);
            st = pk_memsort_run_cpu(ctx, regions, trace, o.n_workers, o.worker, 0, result, &progress);
        }
#endif
    }
    if (st) return st;
    result->stats.kernel = kernel;
    result->stats.seconds = pk_now() - t0;
    return PK_OK;
}

pk_status pk_memsort_memory_bytes(pk_context *ctx, const pk_memsort_regions *regions, uint64_t n_entries, int kernel,
                                  int n_threads, uint64_t *host_bytes, uint64_t *device_bytes) {
    pk_clear(ctx);
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_memory_bytes: regions is NULL");
    if (!host_bytes) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_memory_bytes: host_bytes is NULL");
    if (!device_bytes) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_memory_bytes: device_bytes is NULL");
    pk_status st = pk_memsort_regions_check(ctx, regions);
    if (st) return st;
    if (n_entries >= (1ull << 32))
        return pk_fail(ctx, PK_ERR_INVALID, "%llu entries: a trace holds fewer than 2^32",
                       (unsigned long long)n_entries);
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    uint64_t n = n_entries, instances = 0;
    for (uint32_t r = 0; r < layout.n_regions; r++) instances += layout.max_instances[r];
    /* every kernel's result: rows, runs (one per entry at most), plans, chunk counts */
    uint64_t result = 4 * n + 8 * n + instances * (sizeof(pk_memsort_instance) + 4ull * PK_MEMSORT_MAX_CHUNKS);
    *device_bytes = 0;
#ifdef _OPENMP
    if (n_threads <= 0) n_threads = omp_get_max_threads();
    if (n_threads > PK_MAX_THREADS) n_threads = PK_MAX_THREADS;
#endif
    if (n_threads <= 0) n_threads = 1;
    switch (kernel) {
    case PK_MEMSORT_KERNEL_REF: *host_bytes = result + 16 * n; return PK_OK; /* keys and merge buffer */
    case PK_MEMSORT_KERNEL_CPU:
    case PK_MEMSORT_KERNEL_CPU_PORTABLE:
    case PK_MEMSORT_KERNEL_BEST:
        /* a histogram per thread over the padded key space, of which only
         * the pages a thread touches take memory (at most one page per
         * entry of its part), a byte per page and thread, a block of keys
         * per thread, the page table */
        {
            uint64_t keys = 0;
            for (uint32_t r = 0; r < layout.n_regions; r++)
                keys += ((layout.end[r] - layout.base[r]) / 8 + 4095) / 4096 * 4096;
            uint64_t part = n / (uint64_t)n_threads + 1, hist = part * 4096 < keys ? part * 4096 : keys;
            *host_bytes = result + (uint64_t)n_threads * (4 * hist + keys / 4096 + 128 + 4 * PK_MEMSORT_KEY_BLOCK) +
                          keys / 4096 * 37;
        }
        return PK_OK;
    case PK_MEMSORT_KERNEL_CUDA: {
        *host_bytes = result;
#ifdef PK_HAVE_CUDA
        return pk_memsort_cuda_device_bytes(ctx, &layout, n, device_bytes);
#else
        return pk_fail(ctx, PK_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
    }
    default: return pk_fail(ctx, PK_ERR_INVALID, "unknown kernel %d", kernel);
    }
}

void pk_memsort_instance_rows(const pk_memsort_result *result, const pk_memsort_instance *in, uint32_t *pairs) {
    if (!result || !in || !pairs) return;
    uint64_t j = 0;
    for (uint32_t k = 0; k < in->n_runs; k++) {
        const pk_memsort_run_entry *run = &result->runs[in->runs_offset + k];
        for (uint32_t m = 0; m < run->count; m++, j++) {
            pairs[2 * j] = run->addr;
            pairs[2 * j + 1] = result->values[in->values_offset + j];
        }
    }
}

pk_status pk_memsort_compare(pk_context *ctx, const pk_memsort_result *a, const pk_memsort_result *b) {
    pk_clear(ctx);
    if (!a) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_compare: expected is NULL");
    if (!b) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_compare: got is NULL");
    if ((a->n_instances && !a->instances) || (b->n_instances && !b->instances))
        return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_compare: %s has %u instances and instances is NULL",
                       a->n_instances && !a->instances ? "expected" : "got",
                       a->n_instances && !a->instances ? a->n_instances : b->n_instances);
    if (a->n_instances != b->n_instances || a->n_owned != b->n_owned || a->n_chunks != b->n_chunks ||
        a->n_entries != b->n_entries)
        return pk_fail(ctx, PK_ERR_INTERNAL, "results differ: %u vs %u instances, %u vs %u owned", a->n_instances,
                       b->n_instances, a->n_owned, b->n_owned);
    for (uint32_t c = 0; a->chunk_start && b->chunk_start && c <= a->n_chunks; c++)
        if (a->chunk_start[c] != b->chunk_start[c])
            return pk_fail(ctx, PK_ERR_INTERNAL, "chunk %u starts at trace position %llu, expected %llu", c,
                           (unsigned long long)b->chunk_start[c], (unsigned long long)a->chunk_start[c]);
    for (uint32_t g = 0; g < a->n_instances; g++) {
        const pk_memsort_instance *x = &a->instances[g], *y = &b->instances[g];
#define FIELD(f)                                                                                               \
    do {                                                                                                       \
        if (x->f != y->f)                                                                                      \
            return pk_fail(ctx, PK_ERR_INTERNAL, "instance %u (region %u, #%u): %s is %llu, expected %llu", g, \
                           x->region, x->index, #f, (unsigned long long)y->f, (unsigned long long)x->f);       \
    } while (0)
        FIELD(gid);
        FIELD(region);
        FIELD(index);
        FIELD(owned);
        FIELD(first_row);
        FIELD(n_rows);
        FIELD(first_addr);
        FIELD(last_addr);
        FIELD(first_chunk);
        FIELD(first_skip);
        FIELD(first_skip_total);
        FIELD(last_chunk);
        FIELD(last_include);
        FIELD(last_include_total);
        FIELD(has_prev);
        FIELD(prev_addr);
        FIELD(prev_value);
        if (!x->owned) continue;
        FIELD(n_runs);
#undef FIELD
        for (uint32_t k = 0; k < x->n_runs; k++) {
            const pk_memsort_run_entry *p = &a->runs[x->runs_offset + k], *q = &b->runs[y->runs_offset + k];
            if (p->addr != q->addr || p->count != q->count)
                return pk_fail(ctx, PK_ERR_INTERNAL, "instance %u: run %u is (0x%08x, %u), expected (0x%08x, %u)", g, k,
                               q->addr, q->count, p->addr, p->count);
        }
        for (uint32_t j = 0; j < x->n_rows; j++)
            if (a->values[x->values_offset + j] != b->values[y->values_offset + j])
                return pk_fail(ctx, PK_ERR_INTERNAL, "instance %u: row %u has value %u, expected %u", g, j,
                               b->values[y->values_offset + j], a->values[x->values_offset + j]);
        for (uint32_t c = 0; c < a->n_chunks; c++)
            if (a->chunk_counts[x->counts_offset + c] != b->chunk_counts[y->counts_offset + c])
                return pk_fail(ctx, PK_ERR_INTERNAL, "instance %u: chunk %u holds %u rows, expected %u", g, c,
                               b->chunk_counts[y->counts_offset + c], a->chunk_counts[x->counts_offset + c]);
    }
    return PK_OK;
}

/* ---- output files ---------------------------------------------------------- */

typedef struct out_buf {
    unsigned char *p;
    size_t len, cap;
    int failed;
} out_buf;

static void put_bytes(out_buf *b, const void *src, size_t n) {
    if (b->failed) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u32(out_buf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put_bytes(b, x, 4);
}

static void put_u64(out_buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

/* u32 arrays in little-endian order. */
static void write_u32s(FILE *fp, const uint32_t *v, size_t n) {
    const uint16_t one = 1;
    if (*(const uint8_t *)&one == 1) {
        fwrite(v, sizeof(uint32_t), n, fp);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char x[4] = {(unsigned char)v[i], (unsigned char)(v[i] >> 8), (unsigned char)(v[i] >> 16),
                              (unsigned char)(v[i] >> 24)};
        fwrite(x, 1, 4, fp);
    }
}

char *pk_memsort_join_path(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

/* The caller's callback asked at once (pk_progress_add asks at most every
 * 0.05 s): non-zero when it wants the write cancelled. */
static int write_cancel_asked(pk_context *ctx) {
    return ctx && ctx->progress && ctx->progress(ctx->progress_user, 1.0);
}

/* memsort.bin's header, its region records and its chunk table, into b. */
static void put_bin_head(out_buf *b, const pk_memsort_regions *regions, const pk_memsort_result *res) {
    put_bytes(b, PK_MEMSORT_BIN_MAGIC, 8);
    put_u32(b, PK_MEMSORT_BIN_VERSION);
    put_u32(b, PK_MEMSORT_BIN_HEADER_BYTES);
    put_u64(b, res->n_entries);
    put_u32(b, res->n_chunks);
    put_u32(b, regions->n_regions);
    put_u32(b, res->n_instances);
    put_u32(b, res->n_owned);
    put_u32(b, res->n_workers);
    put_u32(b, res->worker);
    put_u64(b, res->n_runs);
    put_u64(b, res->n_values);
    put_u32(b, PK_MEMSORT_BIN_REGION_BYTES);
    put_u32(b, PK_MEMSORT_BIN_INSTANCE_BYTES);
    for (uint32_t r = 0; r < regions->n_regions; r++) {
        const pk_memsort_region *reg = &regions->region[r];
        char name[PK_MEMSORT_NAME_MAX] = {0};
        memcpy(name, reg->name, strnlen(reg->name, PK_MEMSORT_NAME_MAX - 1));
        put_bytes(b, name, PK_MEMSORT_NAME_MAX);
        put_u32(b, reg->base);
        put_u32(b, reg->max_instances);
        put_u64(b, reg->size);
        put_u64(b, res->region_entries[r]);
        put_u32(b, reg->instance_entries);
        put_u32(b, 0);
    }
    for (uint32_t c = 0; c <= res->n_chunks; c++) put_u64(b, res->chunk_start[c]);
}

/* memsort.bin's instance records, into b, each owned one with where its
 * runs and values lie among the owned instances'; returns the values of
 * all owned instances. */
static uint64_t put_bin_instances(out_buf *b, const pk_memsort_result *res) {
    uint64_t run_at = 0, value_at = 0;
    for (uint32_t g = 0; g < res->n_instances; g++) {
        const pk_memsort_instance *in = &res->instances[g];
        put_u32(b, in->gid);
        put_u32(b, in->region);
        put_u32(b, in->index);
        put_u32(b, in->owned);
        put_u64(b, in->first_row);
        put_u32(b, in->n_rows);
        put_u32(b, in->first_addr);
        put_u32(b, in->last_addr);
        put_u32(b, in->first_chunk);
        put_u32(b, in->first_skip);
        put_u32(b, in->first_skip_total);
        put_u32(b, in->last_chunk);
        put_u32(b, in->last_include);
        put_u32(b, in->last_include_total);
        put_u32(b, in->has_prev);
        put_u32(b, in->prev_addr);
        put_u32(b, in->prev_value);
        put_u32(b, in->n_runs);
        put_u32(b, 0);
        put_u64(b, in->owned ? run_at : 0);
        put_u64(b, in->owned ? value_at : 0);
        if (in->owned) {
            run_at += in->n_runs;
            value_at += in->n_rows;
        }
    }
    return value_at;
}

/* memsort.bin's arrays after the instance records: the owned instances'
 * chunk counts, runs and values, each array padded to 8 bytes. Returns
 * non-zero when cancelled (between instances, as progress reports). */
static int write_bin_arrays(FILE *fp, const pk_memsort_result *res, uint64_t n_values, pk_progress *progress) {
    for (uint32_t g = 0; g < res->n_instances; g++) {
        const pk_memsort_instance *in = &res->instances[g];
        if (in->owned) write_u32s(fp, res->chunk_counts + in->counts_offset, res->n_chunks);
    }
    if (((uint64_t)res->n_owned * res->n_chunks) % 2) write_u32s(fp, (const uint32_t[]){0}, 1);
    int cancelled = progress->cancelled;
    for (uint32_t g = 0; g < res->n_instances && !cancelled; g++) {
        const pk_memsort_instance *in = &res->instances[g];
        if (!in->owned) continue;
        write_u32s(fp, (const uint32_t *)(res->runs + in->runs_offset), 2 * (size_t)in->n_runs);
        cancelled = pk_progress_add(progress, 8.0 * (double)in->n_runs, 1);
    }
    for (uint32_t g = 0; g < res->n_instances && !cancelled; g++) {
        const pk_memsort_instance *in = &res->instances[g];
        if (!in->owned) continue;
        write_u32s(fp, res->values + in->values_offset, in->n_rows);
        cancelled = pk_progress_add(progress, 4.0 * (double)in->n_rows, 1);
    }
    if (n_values % 2) write_u32s(fp, (const uint32_t[]){0}, 1); /* the file ends 8-byte aligned */
    return cancelled;
}

/* The binary file: header, regions, chunk table, instances, chunk counts,
 * runs, values. Returns non-zero when cancelled; *out_of_memory when the
 * records could not be gathered. */
static int write_bin(FILE *fp, const pk_memsort_regions *regions, const pk_memsort_result *res, pk_progress *progress,
                     int *out_of_memory) {
    out_buf b = {0};
    put_bin_head(&b, regions, res);
    fwrite(b.p, 1, b.len, fp);
    b.len = 0;
    uint64_t n_values = put_bin_instances(&b, res);
    fwrite(b.p, 1, b.len, fp);
    *out_of_memory = b.failed;
    free(b.p);
    return write_bin_arrays(fp, res, n_values, progress);
}

/* The text summary: the totals, the regions, a line per instance. */
static void write_summary(FILE *t, const pk_memsort_regions *regions, const pk_memsort_result *res) {
    fprintf(t, "pairkit memsort %s\n", PK_VERSION_STRING);
    fprintf(t, "entries %llu  chunks %u  instances %u\n", (unsigned long long)res->n_entries, res->n_chunks,
            res->n_instances);
    fprintf(t, "worker %u of %u: %u instances owned, %llu rows, %llu runs\n", res->worker, res->n_workers, res->n_owned,
            (unsigned long long)res->n_values, (unsigned long long)res->n_runs);
    for (uint32_t r = 0; r < regions->n_regions; r++) {
        const pk_memsort_region *reg = &regions->region[r];
        fprintf(t, "region %-8s base 0x%08x size 0x%09llx  %llu entries in instances of %u (at most %u instances)\n",
                reg->name, reg->base, (unsigned long long)reg->size, (unsigned long long)res->region_entries[r],
                reg->instance_entries, reg->max_instances);
    }
    fprintf(t, "%5s %-8s %5s %8s %10s %10s %5s %8s %5s %8s %5s\n", "gid", "region", "index", "rows", "first", "last",
            "fchunk", "fskip", "lchunk", "linclude", "owned");
    for (uint32_t g = 0; g < res->n_instances; g++) {
        const pk_memsort_instance *in = &res->instances[g];
        fprintf(t, "%5u %-8s %5u %8u 0x%08x 0x%08x %6u %8u %6u %8u %5s\n", in->gid, regions->region[in->region].name,
                in->index, in->n_rows, in->first_addr, in->last_addr, in->first_chunk, in->first_skip, in->last_chunk,
                in->last_include, in->owned ? "yes" : "no");
    }
}

/* memsort.bin and summary.txt, staged as temporary files beside their
 * places and moved into place together, or neither. */
typedef struct output_pair {
    char *bin_path, *txt_path; /* as the caller named them, for messages */
    pk_atomic_file bin, txt;
} output_pair;

static pk_status write_args_check(pk_context *ctx, const char *out_dir, const pk_memsort_regions *regions,
                                  const pk_memsort_result *res) {
    if (!out_dir) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_write: out_dir is NULL");
    if (!regions) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_write: regions is NULL");
    if (!res) return pk_fail(ctx, PK_ERR_INVALID, "pk_memsort_write: result is NULL");
    pk_status st = pk_memsort_regions_check(ctx, regions);
    if (st) return st;
    if (!res->chunk_start)
        return pk_fail(ctx, PK_ERR_INVALID, "the result has no chunk table (chunk_start); pk_memsort_run makes one");
    return PK_OK;
}

/* The two paths in out_dir (free with output_pair_free_paths). */
static pk_status output_pair_name(pk_context *ctx, output_pair *out, const char *out_dir) {
    out->bin_path = pk_memsort_join_path(out_dir, "memsort.bin");
    out->txt_path = pk_memsort_join_path(out_dir, "summary.txt");
    if (out->bin_path && out->txt_path) return PK_OK;
    free(out->bin_path);
    free(out->txt_path);
    return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
}

static void output_pair_free_paths(output_pair *out) {
    free(out->bin_path);
    free(out->txt_path);
}

/* Both temporary files opened, or neither. */
static pk_status output_pair_open(pk_context *ctx, output_pair *out) {
    pk_status st = pk_atomic_open(ctx, &out->bin, out->bin_path);
    if (st) return st;
    if ((st = pk_atomic_open(ctx, &out->txt, out->txt_path)) != PK_OK) pk_atomic_abort(&out->bin);
    return st;
}

static void output_pair_abort(output_pair *out) {
    pk_atomic_abort(&out->bin);
    pk_atomic_abort(&out->txt);
}

/* Both files reach the disk before either is renamed into place, so a
 * full disk cannot leave a new memsort.bin beside an old summary.txt.
 * Both temporary files removed on a failure or when cancelled. */
static pk_status output_pair_sync(pk_context *ctx, output_pair *out, int cancelled) {
    pk_progress sync;
    if (!cancelled) {
        off_t bytes = ftello(out->bin.fp) + ftello(out->txt.fp);
        pk_progress_begin(&sync, ctx, bytes > 0 ? (double)bytes : 1, 0.5, 0.5);
        cancelled = sync.cancelled;
    }
    for (int k = 0; k < 2 && !cancelled; k++) {
        pk_atomic_file *f = k ? &out->txt : &out->bin;
        errno = 0;
        int r = pk_sync_file(f->fp, PK_SYNC_STEP_BYTES, &sync);
        if (r < 0) {
            pk_status st = pk_fail(ctx, PK_ERR_IO, "%s: write failed: %s", k ? out->txt_path : out->bin_path,
                                   errno ? strerror(errno) : pk_earlier_write_failure());
            output_pair_abort(out);
            return st;
        }
        cancelled = r > 0;
    }
    if (cancelled) {
        output_pair_abort(out);
        return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    return PK_OK;
}

/* Then both renamed into place, or neither: an older pair stays whole. */
static pk_status output_pair_commit(pk_context *ctx, output_pair *out) {
    pk_status st = PK_OK;
    int closed = fclose(out->bin.fp) == 0;
    out->bin.fp = NULL;
    closed &= fclose(out->txt.fp) == 0;
    out->txt.fp = NULL;
    if (write_cancel_asked(ctx)) { /* asked after the last step of the sync */
        st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    } else if (!closed) {
        st = pk_fail(ctx, PK_ERR_IO, "%s: write failed: %s", out->bin_path, strerror(errno));
    } else {
        char *from[2] = {out->bin.tmp_path, out->txt.tmp_path},
             *to[2] = {out->bin.path, out->txt.path}; /* where links lead */
        int bad = pk_rename_all(2, from, to);
        if (bad >= 0)
            st = pk_fail(ctx, PK_ERR_IO, "%s: cannot move into place: %s; neither file changed", to[bad],
                         strerror(errno));
    }
    output_pair_abort(out); /* the names freed; a temporary file left only after a failure */
    return st;
}

/* After both files are written: out of memory (unless cancelled), or both
 * synced, then committed. */
static pk_status output_pair_finish(pk_context *ctx, output_pair *out, int out_of_memory, int cancelled) {
    if (out_of_memory && !cancelled) {
        output_pair_abort(out);
        return pk_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", out->bin_path);
    }
    pk_status st = output_pair_sync(ctx, out, cancelled);
    if (st) return st;
    return output_pair_commit(ctx, out);
}

pk_status pk_memsort_write(pk_context *ctx, const char *out_dir, const pk_memsort_regions *regions,
                           const pk_memsort_result *res) {
    pk_clear(ctx);
    pk_status st = write_args_check(ctx, out_dir, regions, res);
    if (st) return st;
    char dir_buf[4096];
    out_dir = pk_dir_name(out_dir, dir_buf, sizeof dir_buf);
    st = pk_dir_make(ctx, out_dir, "the output folder for memsort.bin and summary.txt", NULL);
    if (st) return st;
    output_pair out;
    if ((st = output_pair_name(ctx, &out, out_dir)) != PK_OK) return st;
    /* progress by bytes, the first half as they are written (cancelled
     * between instances), the second as they reach the disk (cancelled
     * between steps of the sync); asked once more before the renames */
    pk_progress progress;
    pk_progress_begin(&progress, ctx, 4.0 * (double)(res->n_values + 2 * res->n_runs) + 1, 0, 0.5);
    if ((st = output_pair_open(ctx, &out)) == PK_OK) {
        int out_of_memory = 0;
        int cancelled = write_bin(out.bin.fp, regions, res, &progress, &out_of_memory);
        write_summary(out.txt.fp, regions, res);
        st = output_pair_finish(ctx, &out, out_of_memory, cancelled);
    }
    output_pair_free_paths(&out);
    return st;
}
