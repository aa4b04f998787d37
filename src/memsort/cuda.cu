/* cuda.cu - the CUDA backend of memsort: the whole plan and fill on the GPU,
 * from the trace in host memory to filled instances in (pinned) host memory.
 *
 * The trace goes up in pieces on one stream while a second stream works on
 * each piece as soon as it has arrived, so the compute hides under the
 * copy. Per piece: compact addresses (checking alignment and regions), a
 * CUB radix sort of (compact address, position), and each row's rank among
 * the rows of its address so far (hist holds how many rows of each address
 * the earlier pieces had; pieces are processed in trace order, so the rank
 * is the stable one). After the last piece, one exclusive scan of hist gives
 * every address's first sorted position, a scatter puts each position at
 * offset[address] + rank, and small kernels read the plan, the runs and the
 * per-chunk counts off the offsets and the sorted positions. Only owned
 * instances travel back: positions (4 bytes a row) and runs of equal
 * address (8 bytes a run), not an address per row.
 *
 * Invariant: the result equals the reference's field for field; everything
 * a piece kernel reads of another piece (hist, prev) is ordered by the one
 * compute stream.
 */
#include <cuda_runtime.h>

#include <cub/cub.cuh>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "memsort_internal.h"
}
#include "../common/cuda_check.cuh"

/* Entries per piece: 2^23 entries (32 MB) take ~0.6 ms to upload at
 * 55 GB/s, longer than the piece's sort and rank kernels (~0.4 ms on an
 * H200), so the compute stays hidden; smaller pieces add launch overhead
 * (6 launches a piece) and a longer tail after the last copy. */
#define PIECE_ENTRIES (1u << 23)
#define THREADS 256
#define COUNT_TILE 8192 /* rows per block of the per-chunk count kernel */

struct dev_layout {
    uint32_t n_regions;
    uint32_t base[PK_MEMSORT_MAX_REGIONS];
    unsigned long long end[PK_MEMSORT_MAX_REGIONS];
    uint32_t compact_base[PK_MEMSORT_MAX_REGIONS + 1];
    uint32_t instance_entries[PK_MEMSORT_MAX_REGIONS];
    uint32_t inst_base[PK_MEMSORT_MAX_REGIONS + 1];
    uint32_t region_start[PK_MEMSORT_MAX_REGIONS + 1];
    uint32_t n_compact;
    uint32_t n_workers, worker;
};

/* The plan of one instance as the GPU writes it. */
struct dev_plan {
    uint32_t first_addr, last_addr, first_chunk, first_skip, first_skip_total, last_chunk, last_include,
        last_include_total, has_prev, prev_addr, prev_value, first_compact, n_runs, pad;
};

struct max_op {
    __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

typedef struct cuda_state {
    int device;
    uint64_t cap_n;
    uint32_t cap_compact, cap_instances, cap_chunks;
    int cap_key_bits;
    uint64_t cap_runs, cap_counts;
    uint32_t *d_trace, *d_key, *d_val, *d_rel, *d_sorted;
    uint32_t *d_key_in, *d_val_in, *d_head, *d_run_start;
    uint32_t *d_hist, *d_prev, *d_offset, *d_nzpos;
    uint32_t *d_small; /* bad index, region boundary offsets */
    uint32_t *d_start, *d_end, *d_runs_off, *d_chunk_start, *d_owned_start, *d_owned_rows;
    uint32_t *d_counts;
    dev_plan *d_plan;
    pk_memsort_run_entry *d_runs;
    void *d_temp;
    size_t temp_bytes;
    uint64_t device_bytes;
    uint32_t *h_small;
    dev_plan *h_plan;
    uint32_t *h_table; /* instance table staging: start, end, runs_off, chunk_start, owned start/rows */
    size_t h_table_words;
    cudaStream_t s_copy, s_comp, s_down;
    cudaEvent_t *ev_piece;
    uint32_t n_ev_piece;
    cudaEvent_t ev_start, ev_uploaded, ev_small, ev_scattered, ev_down, ev_end;
    int ready;
} cuda_state;

/* ---- kernels ----------------------------------------------------------------- */

__device__ __forceinline__ int region_of(const dev_layout &L, uint32_t raw) {
    for (uint32_t r = 0; r < L.n_regions; r++)
        if (raw >= L.base[r] && (unsigned long long)raw < L.end[r]) return (int)r;
    return -1;
}

__device__ __forceinline__ int region_of_compact(const dev_layout &L, uint32_t a) {
    int r = 0;
    while ((uint32_t)r + 1 < L.n_regions && a >= L.compact_base[r + 1]) r++;
    return r;
}

__device__ __forceinline__ uint32_t raw_of(const dev_layout &L, uint32_t a) {
    int r = region_of_compact(L, a);
    return L.base[r] + ((a - L.compact_base[r]) << 3);
}

/* Largest a with offset[a] <= pos. */
__device__ uint32_t address_at(const uint32_t *offset, uint32_t n_compact, uint32_t pos) {
    uint32_t lo = 0, hi = n_compact;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (offset[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* The chunk holding position pos: last c with chunk_start[c] <= pos. */
__device__ __forceinline__ uint32_t chunk_of(const uint32_t *chunk_start, uint32_t n_chunks, uint32_t pos) {
    uint32_t lo = 0, hi = n_chunks;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (chunk_start[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* First j in [lo, hi) with sorted[j] >= value. */
__device__ uint32_t lower_bound_values(const uint32_t *sorted, uint32_t lo, uint32_t hi, uint32_t value) {
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < value) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

__global__ void compact_kernel(const uint32_t *__restrict__ trace, uint32_t len, uint32_t first_pos, dev_layout L,
                               uint32_t *__restrict__ key, uint32_t *__restrict__ val, uint32_t *bad) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x) {
        uint32_t raw = trace[i];
        int r = region_of(L, raw);
        uint32_t k = 0;
        if (r < 0 || (raw & 7)) atomicMin(bad, first_pos + i);
        else k = L.compact_base[r] + ((raw - L.base[r]) >> 3);
        key[i] = k;
        val[i] = first_pos + i;
    }
}

__global__ void head_kernel(const uint32_t *__restrict__ key, uint32_t len, uint32_t *__restrict__ head) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x)
        head[i] = (i == 0 || key[i] != key[i - 1]) ? i : 0;
}

/* The last row of each address's run in the piece moves hist on, keeping
 * the old value in prev for the rank kernel. One tail per address per
 * piece, so no atomics. */
__global__ void tail_kernel(const uint32_t *__restrict__ key, const uint32_t *__restrict__ run_start, uint32_t len,
                            uint32_t *hist, uint32_t *prev) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x) {
        uint32_t a = key[i];
        if (i + 1 == len || key[i + 1] != a) {
            uint32_t before = hist[a];
            prev[a] = before;
            hist[a] = before + (i - run_start[i] + 1);
        }
    }
}

__global__ void rank_kernel(const uint32_t *__restrict__ key, const uint32_t *__restrict__ run_start, uint32_t len,
                            const uint32_t *__restrict__ prev, uint32_t *__restrict__ rel) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x)
        rel[i] = prev[key[i]] + (i - run_start[i]);
}

__global__ void nonzero_kernel(const uint32_t *__restrict__ hist, uint32_t n_compact, uint32_t *__restrict__ flag) {
    for (uint32_t a = blockIdx.x * blockDim.x + threadIdx.x; a <= n_compact; a += gridDim.x * blockDim.x)
        flag[a] = a < n_compact && hist[a] > 0;
}

/* small[0] stays the bad index; small[1 + r] = first sorted position of region r. */
__global__ void boundaries_kernel(const uint32_t *offset, dev_layout L, uint32_t *small) {
    uint32_t r = threadIdx.x;
    if (r <= L.n_regions) small[1 + r] = offset[L.compact_base[r]];
}

__global__ void scatter_kernel(const uint32_t *__restrict__ key, const uint32_t *__restrict__ rel,
                               const uint32_t *__restrict__ val, uint64_t n, const uint32_t *__restrict__ offset,
                               uint32_t *__restrict__ sorted) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        sorted[offset[key[i]] + rel[i]] = val[i];
}

/* First and last compact address of each instance, and its runs. */
__global__ void plan_address_kernel(const uint32_t *start, const uint32_t *end, uint32_t n_inst, dev_layout L,
                                    const uint32_t *offset, const uint32_t *nzpos, dev_plan *plan) {
    uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_inst) return;
    uint32_t fc = address_at(offset, L.n_compact, start[g]), lc = address_at(offset, L.n_compact, end[g] - 1);
    plan[g].first_compact = fc;
    plan[g].n_runs = g % L.n_workers == L.worker ? nzpos[lc + 1] - nzpos[fc] : 0;
}

__global__ void plan_kernel(const uint32_t *start, const uint32_t *end, const uint32_t *inst_index, uint32_t n_inst,
                            dev_layout L, const uint32_t *offset, const uint32_t *sorted, const uint32_t *chunk_start,
                            uint32_t n_chunks, dev_plan *plan) {
    uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_inst) return;
    uint32_t s = start[g], e = end[g];
    uint32_t fc = plan[g].first_compact, lc = address_at(offset, L.n_compact, e - 1);
    dev_plan p = plan[g];
    p.first_addr = raw_of(L, fc);
    p.last_addr = raw_of(L, lc);
    p.first_chunk = chunk_of(chunk_start, n_chunks, sorted[s]);
    p.first_skip_total = s - offset[fc];
    p.first_skip = s - lower_bound_values(sorted, offset[fc], s, chunk_start[p.first_chunk]);
    uint32_t last_from = offset[lc] > s ? offset[lc] : s;
    p.last_chunk = chunk_of(chunk_start, n_chunks, sorted[e - 1]);
    p.last_include_total = e - last_from;
    p.last_include = e - lower_bound_values(sorted, last_from, e, chunk_start[p.last_chunk]);
    p.has_prev = inst_index[g] > 0;
    p.prev_addr = p.has_prev ? raw_of(L, address_at(offset, L.n_compact, s - 1)) : 0;
    p.prev_value = p.has_prev ? sorted[s - 1] : 0;
    plan[g] = p;
}

/* Rows per (owned instance, chunk): a shared-memory histogram of the chunk
 * of each row (binary search in the chunk table, also in shared memory),
 * flushed with one global atomic per nonzero bin. */
__global__ void chunk_count_kernel(const uint32_t *owned_start, const uint32_t *owned_rows, uint32_t n_owned,
                                   const uint32_t *sorted, const uint32_t *chunk_start, uint32_t n_chunks,
                                   uint32_t *counts) {
    extern __shared__ uint32_t smem[];
    uint32_t *starts = smem, *hist = smem + n_chunks + 1;
    for (uint32_t c = threadIdx.x; c <= n_chunks; c += blockDim.x) starts[c] = chunk_start[c];
    for (uint32_t o = blockIdx.y; o < n_owned; o += gridDim.y) {
        uint32_t rows = owned_rows[o], tile0 = blockIdx.x * COUNT_TILE;
        if (tile0 >= rows) continue; /* uniform over the block */
        for (uint32_t c = threadIdx.x; c < n_chunks; c += blockDim.x) hist[c] = 0;
        __syncthreads();
        uint32_t tile1 = tile0 + COUNT_TILE < rows ? tile0 + COUNT_TILE : rows;
        const uint32_t *v = sorted + owned_start[o];
        for (uint32_t j = tile0 + threadIdx.x; j < tile1; j += blockDim.x)
            atomicAdd(&hist[chunk_of(starts, n_chunks, v[j])], 1u);
        __syncthreads();
        for (uint32_t c = threadIdx.x; c < n_chunks; c += blockDim.x)
            if (hist[c]) atomicAdd(&counts[(uint64_t)o * n_chunks + c], hist[c]);
        __syncthreads();
    }
}

/* One thread per compact address with rows: its run in each owned
 * instance its rows fall in. */
__global__ void runs_kernel(const uint32_t *__restrict__ hist, const uint32_t *__restrict__ offset,
                            const uint32_t *__restrict__ nzpos, dev_layout L, const uint32_t *start,
                            const uint32_t *end, const uint32_t *runs_off, const dev_plan *plan,
                            pk_memsort_run_entry *runs) {
    for (uint32_t a = blockIdx.x * blockDim.x + threadIdx.x; a < L.n_compact; a += gridDim.x * blockDim.x) {
        uint32_t cnt = hist[a];
        if (cnt == 0) continue;
        int r = region_of_compact(L, a);
        uint32_t o0 = offset[a], o1 = o0 + cnt, rs = L.region_start[r], S = L.instance_entries[r];
        uint32_t k0 = (o0 - rs) / S, k1 = (o1 - 1 - rs) / S;
        uint32_t raw = L.base[r] + ((a - L.compact_base[r]) << 3);
        for (uint32_t k = k0; k <= k1; k++) {
            uint32_t g = L.inst_base[r] + k;
            if (g % L.n_workers != L.worker) continue;
            uint32_t lo = o0 > start[g] ? o0 : start[g], hi = o1 < end[g] ? o1 : end[g];
            pk_memsort_run_entry run;
            run.addr = raw;
            run.count = hi - lo;
            runs[runs_off[g] + (nzpos[a] - nzpos[plan[g].first_compact])] = run;
        }
    }
}

/* ---- host side --------------------------------------------------------------- */

static unsigned grid_for(uint64_t n) {
    uint64_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks > 132u * 16) blocks = 132u * 16; /* grid-stride beyond 16 blocks an SM */
    return blocks ? (unsigned)blocks : 1;
}

extern "C" void *pk_memsort_cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void pk_memsort_cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

extern "C" int pk_memsort_cuda_host_register(void *p, size_t bytes) {
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return 0;
}

extern "C" void pk_memsort_cuda_host_unregister(void *p) {
    if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

static void free_buffers(cuda_state *s) {
    uint32_t **bufs[] = {&s->d_trace, &s->d_key, &s->d_val, &s->d_rel, &s->d_sorted, &s->d_key_in, &s->d_val_in,
                         &s->d_head, &s->d_run_start, &s->d_hist, &s->d_prev, &s->d_offset, &s->d_nzpos, &s->d_small,
                         &s->d_start, &s->d_end, &s->d_runs_off, &s->d_chunk_start, &s->d_owned_start,
                         &s->d_owned_rows, &s->d_counts};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) {
        if (*bufs[k]) cudaFree(*bufs[k]);
        *bufs[k] = NULL;
    }
    if (s->d_plan) cudaFree(s->d_plan);
    if (s->d_runs) cudaFree(s->d_runs);
    if (s->d_temp) cudaFree(s->d_temp);
    s->d_plan = NULL;
    s->d_runs = NULL;
    s->d_temp = NULL;
    if (s->h_small) cudaFreeHost(s->h_small);
    if (s->h_plan) cudaFreeHost(s->h_plan);
    if (s->h_table) cudaFreeHost(s->h_table);
    s->h_small = NULL;
    s->h_plan = NULL;
    s->h_table = NULL;
    s->cap_n = 0;
    s->cap_compact = s->cap_instances = s->cap_chunks = 0;
    s->cap_runs = s->cap_counts = 0;
    s->temp_bytes = 0;
    s->device_bytes = 0;
    s->h_table_words = 0;
}

extern "C" void pk_memsort_cuda_state_free(void *state) {
    cuda_state *s = (cuda_state *)state;
    if (!s) return;
    cudaSetDevice(s->device);
    free_buffers(s);
    if (s->ready) {
        cudaStreamDestroy(s->s_copy);
        cudaStreamDestroy(s->s_comp);
        cudaStreamDestroy(s->s_down);
        cudaEventDestroy(s->ev_start);
        cudaEventDestroy(s->ev_uploaded);
        cudaEventDestroy(s->ev_small);
        cudaEventDestroy(s->ev_scattered);
        cudaEventDestroy(s->ev_down);
        cudaEventDestroy(s->ev_end);
        for (uint32_t k = 0; k < s->n_ev_piece; k++) cudaEventDestroy(s->ev_piece[k]);
    }
    free(s->ev_piece);
    free(s);
}

static pk_status device_alloc(pk_context *ctx, cuda_state *s, void **p, size_t bytes, const char *what) {
    cudaError_t err = cudaMalloc(p, bytes ? bytes : 4);
    if (err != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return pk_fail(ctx, PK_ERR_CUDA, "cudaMalloc of %zu bytes for %s failed: %s", bytes, what,
                       cudaGetErrorString(err));
    }
    s->device_bytes += bytes;
    return PK_OK;
}

/* Grow the device buffers to n entries, n_compact addresses. */
static pk_status reserve_trace(pk_context *ctx, cuda_state *s, uint64_t n, uint32_t n_compact, int key_bits) {
    if (n <= s->cap_n && n_compact <= s->cap_compact && key_bits <= s->cap_key_bits && s->d_temp) return PK_OK;
    free_buffers(s);
    uint64_t cn = n > 1 ? n : 1;
    size_t piece = cn < PIECE_ENTRIES ? (size_t)cn : PIECE_ENTRIES;
    size_t ncw = (size_t)n_compact + 1;
    pk_status st = PK_OK;
    struct {
        uint32_t **p;
        size_t words;
        const char *what;
    } want[] = {{&s->d_trace, cn, "the trace"}, {&s->d_key, cn, "sorted keys"}, {&s->d_val, cn, "sorted positions"},
                {&s->d_rel, cn, "ranks"}, {&s->d_sorted, cn, "the sorted rows"}, {&s->d_key_in, piece, "piece keys"},
                {&s->d_val_in, piece, "piece positions"}, {&s->d_head, piece, "run heads"},
                {&s->d_run_start, piece, "run starts"}, {&s->d_hist, ncw, "the address histogram"},
                {&s->d_prev, ncw, "ranks before a piece"}, {&s->d_offset, ncw, "address offsets"},
                {&s->d_nzpos, ncw, "run positions"}, {&s->d_small, 64, "status"}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if ((st = device_alloc(ctx, s, (void **)want[k].p, want[k].words * 4, want[k].what)) != PK_OK) return st;
    size_t b1 = 0, b2 = 0, b3 = 0;
    PK_CUDA(ctx, cub::DeviceRadixSort::SortPairs(NULL, b1, s->d_key_in, s->d_key, s->d_val_in, s->d_val, (int)piece, 0,
                                                 key_bits));
    PK_CUDA(ctx, cub::DeviceScan::InclusiveScan(NULL, b2, s->d_head, s->d_run_start, max_op(), (int)piece));
    PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(NULL, b3, s->d_hist, s->d_offset, (int)ncw));
    s->temp_bytes = b1 > b2 ? b1 : b2;
    if (b3 > s->temp_bytes) s->temp_bytes = b3;
    if ((st = device_alloc(ctx, s, &s->d_temp, s->temp_bytes, "CUB scratch")) != PK_OK) return st;
    s->h_small = (uint32_t *)pk_memsort_cuda_host_alloc(64 * 4);
    if (!s->h_small) return pk_fail(ctx, PK_ERR_NOMEM, "out of pinned host memory");
    s->cap_n = cn;
    s->cap_compact = n_compact;
    s->cap_key_bits = key_bits;
    return PK_OK;
}

static pk_status reserve_tables(pk_context *ctx, cuda_state *s, uint32_t n_inst, uint32_t n_chunks, uint64_t n_counts,
                                uint64_t n_runs) {
    pk_status st = PK_OK;
    if (n_inst > s->cap_instances || n_chunks > s->cap_chunks || !s->d_start) {
        uint32_t **bufs[] = {&s->d_start, &s->d_end, &s->d_runs_off, &s->d_chunk_start, &s->d_owned_start,
                             &s->d_owned_rows};
        for (size_t k = 0; k < 6; k++)
            if (*bufs[k]) cudaFree(*bufs[k]), *bufs[k] = NULL;
        if (s->d_plan) cudaFree(s->d_plan), s->d_plan = NULL;
        if (s->h_plan) cudaFreeHost(s->h_plan), s->h_plan = NULL;
        if (s->h_table) cudaFreeHost(s->h_table), s->h_table = NULL;
        uint32_t ci = n_inst + 1, cc = PK_MEMSORT_MAX_CHUNKS + 1;
        if ((st = device_alloc(ctx, s, (void **)&s->d_start, (size_t)ci * 4 * 4, "instance table"))) return st;
        /* d_start holds start, end, index and runs_off one after another */
        if ((st = device_alloc(ctx, s, (void **)&s->d_chunk_start, (size_t)cc * 4, "chunk table"))) return st;
        if ((st = device_alloc(ctx, s, (void **)&s->d_owned_start, (size_t)ci * 2 * 4, "owned table"))) return st;
        if ((st = device_alloc(ctx, s, (void **)&s->d_plan, (size_t)ci * sizeof(dev_plan), "plans"))) return st;
        s->h_table_words = (size_t)ci * 6 + cc;
        s->h_table = (uint32_t *)pk_memsort_cuda_host_alloc(s->h_table_words * 4);
        s->h_plan = (dev_plan *)pk_memsort_cuda_host_alloc((size_t)ci * sizeof(dev_plan));
        if (!s->h_table || !s->h_plan) return pk_fail(ctx, PK_ERR_NOMEM, "out of pinned host memory");
        s->cap_instances = n_inst;
        s->cap_chunks = PK_MEMSORT_MAX_CHUNKS;
    }
    if (n_counts > s->cap_counts || !s->d_counts) {
        if (s->d_counts) cudaFree(s->d_counts);
        if ((st = device_alloc(ctx, s, (void **)&s->d_counts, (n_counts + 1) * 4, "chunk counts"))) return st;
        s->cap_counts = n_counts;
    }
    if (n_runs > s->cap_runs || !s->d_runs) {
        if (s->d_runs) cudaFree(s->d_runs);
        if ((st = device_alloc(ctx, s, (void **)&s->d_runs, (n_runs + 1) * sizeof(pk_memsort_run_entry), "runs")))
            return st;
        s->cap_runs = n_runs;
    }
    return PK_OK;
}

static pk_status state_get(pk_context *ctx, pk_memsort_result *result, cuda_state **out) {
    int device = ctx ? ctx->cuda_device : 0;
    cuda_state *s = (cuda_state *)result->backend_state;
    if (s && s->device != device) {
        pk_memsort_cuda_state_free(s);
        result->backend_state = s = NULL;
    }
    PK_CUDA(ctx, cudaSetDevice(device));
    if (!s) {
        s = (cuda_state *)calloc(1, sizeof *s);
        if (!s) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        s->device = device;
        result->backend_state = s;
        PK_CUDA(ctx, cudaStreamCreateWithFlags(&s->s_copy, cudaStreamNonBlocking));
        PK_CUDA(ctx, cudaStreamCreateWithFlags(&s->s_comp, cudaStreamNonBlocking));
        PK_CUDA(ctx, cudaStreamCreateWithFlags(&s->s_down, cudaStreamNonBlocking));
        PK_CUDA(ctx, cudaEventCreate(&s->ev_start));
        PK_CUDA(ctx, cudaEventCreate(&s->ev_uploaded));
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_small, cudaEventDisableTiming));
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_scattered, cudaEventDisableTiming));
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_down, cudaEventDisableTiming));
        PK_CUDA(ctx, cudaEventCreate(&s->ev_end));
        s->ready = 1;
    }
    *out = s;
    return PK_OK;
}

static pk_status piece_events(pk_context *ctx, cuda_state *s, uint32_t n_pieces) {
    if (n_pieces <= s->n_ev_piece) return PK_OK;
    cudaEvent_t *ev = (cudaEvent_t *)realloc(s->ev_piece, n_pieces * sizeof(cudaEvent_t));
    if (!ev) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    s->ev_piece = ev;
    while (s->n_ev_piece < n_pieces) {
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_piece[s->n_ev_piece], cudaEventDisableTiming));
        s->n_ev_piece++;
    }
    return PK_OK;
}

extern "C" pk_status pk_memsort_run_cuda(pk_context *ctx, const pk_memsort_regions *regions,
                                         const pk_memsort_trace *trace, uint32_t n_workers, uint32_t worker,
                                         pk_memsort_result *result, pk_progress *progress) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    const uint64_t n = trace->n_entries;
    const uint32_t n_chunks = trace->n_chunks;
    cuda_state *s = NULL;
    pk_status st = state_get(ctx, result, &s);
    if (st) return st;
    if ((st = reserve_trace(ctx, s, n, layout.n_compact, layout.key_bits)) != PK_OK) return st;

    dev_layout L;
    memset(&L, 0, sizeof L);
    L.n_regions = layout.n_regions;
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        L.base[r] = (uint32_t)layout.base[r];
        L.end[r] = layout.end[r];
        L.instance_entries[r] = layout.instance_entries[r];
    }
    for (uint32_t r = 0; r <= layout.n_regions; r++) L.compact_base[r] = layout.compact_base[r];
    L.n_compact = layout.n_compact;
    L.n_workers = n_workers;
    L.worker = worker;

    /* 1. upload in pieces; each piece is sorted and ranked once it is there */
    const uint32_t n_pieces = (uint32_t)((n + PIECE_ENTRIES - 1) / PIECE_ENTRIES);
    if ((st = piece_events(ctx, s, n_pieces)) != PK_OK) return st;
    PK_CUDA(ctx, cudaEventRecord(s->ev_start, s->s_copy));
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_start, 0));
    PK_CUDA(ctx, cudaMemsetAsync(s->d_hist, 0, ((size_t)layout.n_compact + 1) * 4, s->s_comp));
    PK_CUDA(ctx, cudaMemsetAsync(s->d_small, 0xff, 4, s->s_comp));
    for (uint32_t p = 0; p < n_pieces; p++) {
        uint64_t b = (uint64_t)p * PIECE_ENTRIES, len = n - b < PIECE_ENTRIES ? n - b : PIECE_ENTRIES;
        PK_CUDA(ctx, cudaMemcpyAsync(s->d_trace + b, trace->addr + b, len * 4, cudaMemcpyHostToDevice, s->s_copy));
        PK_CUDA(ctx, cudaEventRecord(s->ev_piece[p], s->s_copy));
    }
    PK_CUDA(ctx, cudaEventRecord(s->ev_uploaded, s->s_copy));
    for (uint32_t p = 0; p < n_pieces; p++) {
        uint64_t b = (uint64_t)p * PIECE_ENTRIES;
        uint32_t len = (uint32_t)(n - b < PIECE_ENTRIES ? n - b : PIECE_ENTRIES);
        unsigned grid = grid_for(len);
        size_t temp = s->temp_bytes;
        PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_piece[p], 0));
        compact_kernel<<<grid, THREADS, 0, s->s_comp>>>(s->d_trace + b, len, (uint32_t)b, L, s->d_key_in, s->d_val_in,
                                                         s->d_small);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cub::DeviceRadixSort::SortPairs(s->d_temp, temp, s->d_key_in, s->d_key + b, s->d_val_in,
                                                     s->d_val + b, (int)len, 0, layout.key_bits, s->s_comp));
        head_kernel<<<grid, THREADS, 0, s->s_comp>>>(s->d_key + b, len, s->d_head);
        PK_CUDA(ctx, cudaGetLastError());
        temp = s->temp_bytes;
        PK_CUDA(ctx, cub::DeviceScan::InclusiveScan(s->d_temp, temp, s->d_head, s->d_run_start, max_op(), (int)len,
                                                    s->s_comp));
        tail_kernel<<<grid, THREADS, 0, s->s_comp>>>(s->d_key + b, s->d_run_start, len, s->d_hist, s->d_prev);
        rank_kernel<<<grid, THREADS, 0, s->s_comp>>>(s->d_key + b, s->d_run_start, len, s->d_prev, s->d_rel + b);
        PK_CUDA(ctx, cudaGetLastError());
    }

    /* 2. offsets of every address; region sizes back to the host */
    {
        size_t temp = s->temp_bytes;
        PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(s->d_temp, temp, s->d_hist, s->d_offset, (int)layout.n_compact + 1,
                                                   s->s_comp));
        nonzero_kernel<<<grid_for(layout.n_compact + 1), THREADS, 0, s->s_comp>>>(s->d_hist, layout.n_compact,
                                                                                   s->d_prev);
        temp = s->temp_bytes;
        PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(s->d_temp, temp, s->d_prev, s->d_nzpos, (int)layout.n_compact + 1,
                                                   s->s_comp));
        boundaries_kernel<<<1, 32, 0, s->s_comp>>>(s->d_offset, L, s->d_small);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaMemcpyAsync(s->h_small, s->d_small, 64 * 4, cudaMemcpyDeviceToHost, s->s_comp));
        PK_CUDA(ctx, cudaEventRecord(s->ev_small, s->s_comp));
        /* the scatter runs while the host builds the instance table */
        scatter_kernel<<<grid_for(n), THREADS, 0, s->s_comp>>>(s->d_key, s->d_rel, s->d_val, n, s->d_offset,
                                                                s->d_sorted);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaEventRecord(s->ev_scattered, s->s_comp));
        PK_CUDA(ctx, cudaEventSynchronize(s->ev_small));
    }
    if (s->h_small[0] != UINT32_MAX) {
        PK_CUDA(ctx, cudaStreamSynchronize(s->s_comp));
        st = pk_memsort_trace_check(ctx, regions, trace);
        return st ? st : pk_fail(ctx, PK_ERR_INTERNAL, "the GPU found a bad entry the check did not");
    }
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS] = {0};
    for (uint32_t r = 0; r < layout.n_regions; r++) region_entries[r] = s->h_small[2 + r] - s->h_small[1 + r];
    if ((st = pk_memsort_instances_build(ctx, &layout, regions, trace, region_entries, n_workers, worker, result)))
        return st;
    const uint32_t n_inst = result->n_instances, n_owned = result->n_owned;
    {
        uint32_t g = 0;
        for (uint32_t r = 0; r < layout.n_regions; r++) {
            L.inst_base[r] = g;
            L.region_start[r] = s->h_small[1 + r];
            g += (uint32_t)((region_entries[r] + layout.instance_entries[r] - 1) / layout.instance_entries[r]);
        }
        L.inst_base[layout.n_regions] = g;
        L.region_start[layout.n_regions] = (uint32_t)n;
    }
    if ((st = reserve_tables(ctx, s, n_inst, n_chunks, (uint64_t)n_owned * n_chunks, 0)) != PK_OK) return st;

    /* 3. the instance table up, first addresses and run counts back */
    uint32_t *h_start = s->h_table, *h_end = h_start + n_inst + 1, *h_index = h_end + n_inst + 1;
    uint32_t *h_runs_off = h_index + n_inst + 1, *h_owned_start = h_runs_off + n_inst + 1;
    uint32_t *h_owned_rows = h_owned_start + n_inst + 1, *h_chunk_start = h_owned_rows + n_inst + 1;
    uint64_t n_values = 0;
    for (uint32_t g = 0, o = 0; g < n_inst; g++) {
        const pk_memsort_instance *in = &result->instances[g];
        h_start[g] = L.region_start[in->region] + (uint32_t)in->first_row;
        h_end[g] = h_start[g] + in->n_rows;
        h_index[g] = in->index;
        if (in->owned) {
            h_owned_start[o] = h_start[g];
            h_owned_rows[o] = in->n_rows;
            o++;
            n_values += in->n_rows;
        }
    }
    for (uint32_t c = 0; c <= n_chunks; c++) h_chunk_start[c] = (uint32_t)trace->chunk_start[c];
    uint32_t *d_start = s->d_start, *d_end = d_start + n_inst + 1, *d_index = d_end + n_inst + 1;
    uint32_t *d_runs_off = d_index + n_inst + 1;
    uint32_t *d_owned_start = s->d_owned_start, *d_owned_rows = d_owned_start + n_inst + 1;
    /* on the download stream, beside the scatter (offsets and run
     * positions are final since ev_small) */
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_down, s->ev_small, 0));
    PK_CUDA(ctx, cudaMemcpyAsync(d_start, h_start, (size_t)(n_inst + 1) * 3 * 4, cudaMemcpyHostToDevice, s->s_down));
    PK_CUDA(ctx, cudaMemcpyAsync(d_owned_start, h_owned_start, (size_t)(n_inst + 1) * 2 * 4, cudaMemcpyHostToDevice,
                                 s->s_down));
    PK_CUDA(ctx, cudaMemcpyAsync(s->d_chunk_start, h_chunk_start, (size_t)(n_chunks + 1) * 4, cudaMemcpyHostToDevice,
                                 s->s_down));
    if (n_inst) {
        plan_address_kernel<<<(n_inst + 127) / 128, 128, 0, s->s_down>>>(d_start, d_end, n_inst, L, s->d_offset,
                                                                          s->d_nzpos, s->d_plan);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaMemcpyAsync(s->h_plan, s->d_plan, (size_t)n_inst * sizeof(dev_plan), cudaMemcpyDeviceToHost,
                                     s->s_down));
    }
    PK_CUDA(ctx, cudaStreamSynchronize(s->s_down));
    uint64_t n_runs = 0;
    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        h_runs_off[g] = (uint32_t)n_runs;
        if (!in->owned) continue;
        in->runs_offset = n_runs;
        in->n_runs = s->h_plan[g].n_runs;
        n_runs += in->n_runs;
    }
    if ((st = reserve_tables(ctx, s, n_inst, n_chunks, (uint64_t)n_owned * n_chunks, n_runs)) != PK_OK) return st;
    if ((st = pk_memsort_result_reserve(ctx, result, n_runs, n_values, (uint64_t)n_owned * n_chunks, 1)) != PK_OK)
        return st;
    result->n_runs = n_runs;
    result->n_values = n_values;

    /* 4. owned rows down on their own stream while the plan kernels run */
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_down, s->ev_scattered, 0));
    {
        uint64_t value_at = 0;
        uint32_t o = 0;
        for (uint32_t g = 0; g < n_inst;) {
            pk_memsort_instance *in = &result->instances[g];
            if (!in->owned) {
                g++;
                continue;
            }
            /* merge owned neighbours into one copy */
            uint32_t first = g;
            uint64_t rows = 0;
            while (g < n_inst && result->instances[g].owned && (g == first || h_start[g] == h_end[g - 1])) {
                pk_memsort_instance *m = &result->instances[g];
                m->values_offset = value_at + rows;
                m->counts_offset = (uint64_t)o * n_chunks;
                rows += m->n_rows;
                o++;
                g++;
            }
            if (rows)
                PK_CUDA(ctx, cudaMemcpyAsync(result->values + value_at, s->d_sorted + h_start[first], rows * 4,
                                             cudaMemcpyDeviceToHost, s->s_down));
            value_at += rows;
        }
    }
    PK_CUDA(ctx, cudaEventRecord(s->ev_down, s->s_down));

    if (n_inst) {
        PK_CUDA(ctx, cudaMemcpyAsync(d_runs_off, h_runs_off, (size_t)n_inst * 4, cudaMemcpyHostToDevice, s->s_comp));
        plan_kernel<<<(n_inst + 127) / 128, 128, 0, s->s_comp>>>(d_start, d_end, d_index, n_inst, L, s->d_offset,
                                                                 s->d_sorted, s->d_chunk_start, n_chunks, s->d_plan);
        PK_CUDA(ctx, cudaGetLastError());
    }
    if (n_owned) {
        uint32_t max_rows = 0;
        for (uint32_t o = 0; o < n_owned; o++) max_rows = h_owned_rows[o] > max_rows ? h_owned_rows[o] : max_rows;
        PK_CUDA(ctx, cudaMemsetAsync(s->d_counts, 0, (size_t)n_owned * n_chunks * 4, s->s_comp));
        dim3 grid((max_rows + COUNT_TILE - 1) / COUNT_TILE, n_owned < 65535 ? n_owned : 65535);
        size_t smem = (2 * (size_t)n_chunks + 1) * 4;
        chunk_count_kernel<<<grid, THREADS, smem, s->s_comp>>>(d_owned_start, d_owned_rows, n_owned, s->d_sorted,
                                                               s->d_chunk_start, n_chunks, s->d_counts);
        PK_CUDA(ctx, cudaGetLastError());
        runs_kernel<<<grid_for(layout.n_compact), THREADS, 0, s->s_comp>>>(s->d_hist, s->d_offset, s->d_nzpos, L, d_start,
                                                                           d_end, d_runs_off, s->d_plan, s->d_runs);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaMemcpyAsync(result->chunk_counts, s->d_counts, (size_t)n_owned * n_chunks * 4,
                                     cudaMemcpyDeviceToHost, s->s_comp));
        if (n_runs)
            PK_CUDA(ctx, cudaMemcpyAsync(result->runs, s->d_runs, n_runs * sizeof(pk_memsort_run_entry),
                                         cudaMemcpyDeviceToHost, s->s_comp));
    }
    if (n_inst)
        PK_CUDA(ctx, cudaMemcpyAsync(s->h_plan, s->d_plan, (size_t)n_inst * sizeof(dev_plan), cudaMemcpyDeviceToHost,
                                     s->s_comp));
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_down, 0));
    PK_CUDA(ctx, cudaEventRecord(s->ev_end, s->s_comp));
    PK_CUDA(ctx, cudaEventSynchronize(s->ev_end));
    PK_CUDA(ctx, cudaGetLastError());

    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        const dev_plan *p = &s->h_plan[g];
        in->first_addr = p->first_addr;
        in->last_addr = p->last_addr;
        in->first_chunk = p->first_chunk;
        in->first_skip = p->first_skip;
        in->first_skip_total = p->first_skip_total;
        in->last_chunk = p->last_chunk;
        in->last_include = p->last_include;
        in->last_include_total = p->last_include_total;
        in->has_prev = p->has_prev;
        in->prev_addr = p->prev_addr;
        in->prev_value = p->prev_value;
    }
    float ms = 0, up = 0;
    PK_CUDA(ctx, cudaEventElapsedTime(&ms, s->ev_start, s->ev_end));
    PK_CUDA(ctx, cudaEventElapsedTime(&up, s->ev_start, s->ev_uploaded));
    result->stats.device_ms = ms;
    result->stats.upload_ms = up;
    result->stats.device_bytes = s->device_bytes;
    result->stats.pcie_bytes = 4 * n + 4 * n_values + 8 * n_runs + 4ull * n_owned * n_chunks +
                               (uint64_t)n_inst * sizeof(dev_plan) * 2;
    pk_progress_add(progress, (double)n, 1);
    return PK_OK;
}
