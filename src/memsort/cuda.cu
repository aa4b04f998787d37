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
#include <thrust/iterator/transform_iterator.h>
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
    __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const {
        return a > b ? a : b;
    }
};

typedef struct cuda_state {
    int kind; /* PK_MEMSORT_STATE_CUDA */
    int device;
    uint64_t cap_n;
    uint32_t cap_compact, cap_instances;
    int cap_key_bits;
    uint64_t cap_runs, cap_counts;
    uint32_t *d_trace, *d_key, *d_val, *d_rel, *d_sorted;
    uint32_t *d_key_in, *d_val_in, *d_head, *d_run_start;
    uint32_t *d_hist, *d_prev, *d_offset, *d_nzpos;
    uint32_t *d_small;             /* bad index, region boundary offsets */
    uint32_t *d_start;             /* instance tables, see reserve_tables */
    uint32_t *d_pieces, *h_pieces; /* piece boundaries */
    uint32_t *d_bounds;
    uint64_t cap_bounds;
    uint32_t *d_counts;
    dev_plan *d_plan;
    pk_memsort_run_entry *d_runs;
    void *d_temp;
    size_t temp_bytes;
    uint64_t device_bytes;
    /* for an allocation's failure: the run's estimated need and what was
     * free (with what this state held) when it began */
    uint64_t need_bytes, free_bytes;
    int device_full; /* 1: an allocation of this run found the device full */
    uint32_t *h_small;
    dev_plan *h_plan;
    uint32_t *h_table; /* the instance tables' host side */
    cudaStream_t s_copy, s_comp, s_down;
    cudaEvent_t *ev_piece;
    uint32_t n_ev_piece;
    cudaEvent_t ev_start, ev_uploaded, ev_small, ev_addr, ev_plan, ev_scattered, ev_down, ev_end;
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

/* 1 for an address with rows: scanned on the fly into run positions. */
struct nonzero_op {
    __host__ __device__ __forceinline__ uint32_t operator()(uint32_t count) const {
        return count > 0;
    }
};

/* small[0] stays the bad index; small[1 + r] = first sorted position of region r. */
__global__ void boundaries_kernel(const uint32_t *offset, dev_layout L, uint32_t *small) {
    uint32_t r = threadIdx.x;
    if (r <= L.n_regions) small[1 + r] = offset[L.compact_base[r]];
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
        uint64_t rows = owned_rows[o], tile0 = (uint64_t)blockIdx.x * COUNT_TILE;
        if (tile0 >= rows) continue; /* uniform over the block */
        for (uint32_t c = threadIdx.x; c < n_chunks; c += blockDim.x) hist[c] = 0;
        __syncthreads();
        uint64_t tile1 = tile0 + COUNT_TILE < rows ? tile0 + COUNT_TILE : rows;
        const uint32_t *v = sorted + owned_start[o];
        for (uint64_t j = tile0 + threadIdx.x; j < tile1; j += blockDim.x)
            atomicAdd(&hist[chunk_of(starts, n_chunks, v[j])], 1u);
        __syncthreads();
        for (uint32_t c = threadIdx.x; c < n_chunks; c += blockDim.x)
            if (hist[c]) atomicAdd(&counts[(uint64_t)o * n_chunks + c], hist[c]);
        __syncthreads();
    }
}

/* First index in [lo, hi) with a[j] >= v (a non-decreasing there). */
__device__ __forceinline__ uint32_t lower_bound_u32(const uint32_t *a, uint32_t lo, uint32_t hi, uint32_t v) {
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* First index of a piece whose row lands at or after sorted position
 * target: rows of a piece land at increasing positions (offset[key] + rank
 * grows along the sorted piece). */
__device__ uint32_t piece_lower_bound(const uint32_t *key, const uint32_t *rel, const uint32_t *offset, uint32_t len,
                                      uint32_t target) {
    uint32_t lo = 0, hi = len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (offset[key[mid]] + rel[mid] < target) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Per (piece, owned segment): the piece's index range that lands in the
 * segment. */
__global__ void range_bounds_kernel(const uint32_t *piece_start, uint32_t n_pieces, const uint32_t *seg_start,
                                    const uint32_t *seg_rows, uint32_t n_seg, const uint32_t *key, const uint32_t *rel,
                                    const uint32_t *offset, uint32_t *bounds) {
    /* 64-bit: pieces x segments passes 2^32 for small instances of large traces */
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (uint64_t)n_pieces * n_seg) return;
    uint32_t p = (uint32_t)(t / n_seg), q = (uint32_t)(t % n_seg);
    uint32_t b = piece_start[p], len = piece_start[p + 1] - b;
    bounds[2 * t] = b + piece_lower_bound(key + b, rel + b, offset, len, seg_start[q]);
    bounds[2 * t + 1] = b + piece_lower_bound(key + b, rel + b, offset, len, seg_start[q] + seg_rows[q]);
}

/* Only the rows of owned instances are written, packed: segment q's rows
 * (global rows from seg_start[q]) from seg_out[q] on, so that the owned
 * rows come down in one copy. */
__global__ void range_scatter_kernel(const uint32_t *bounds, uint64_t n_pairs, const uint32_t *seg_start,
                                     const uint32_t *seg_out, uint32_t n_seg, const uint32_t *__restrict__ key,
                                     const uint32_t *__restrict__ rel, const uint32_t *__restrict__ val,
                                     const uint32_t *__restrict__ offset, uint32_t *__restrict__ sorted) {
    /* 64-bit indices: a range ending near 2^32 entries must not wrap */
    for (uint64_t pair = blockIdx.y; pair < n_pairs; pair += gridDim.y) {
        uint64_t i0 = bounds[2 * pair], i1 = bounds[2 * pair + 1];
        uint32_t q = (uint32_t)(pair % n_seg), shift = seg_out[q] - seg_start[q]; /* mod 2^32 */
        for (uint64_t i = i0 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < i1;
             i += (uint64_t)gridDim.x * blockDim.x)
            sorted[offset[key[i]] + rel[i] + shift] = val[i];
    }
}

/* The run of compact address a in piece p: indices [k0, k1) of the piece
 * (empty when absent); its ranks are rel[k0] .. rel[k0] + k1 - k0 - 1. */
__device__ __forceinline__ void piece_run(const uint32_t *key, uint32_t len, uint32_t a, uint32_t *k0, uint32_t *k1) {
    *k0 = lower_bound_u32(key, 0, len, a);
    *k1 = lower_bound_u32(key, *k0, len, a + 1);
}

/* The trace position of rank j of address a, found by the warp's lanes
 * searching the pieces in parallel (exactly one piece holds it). */
__device__ uint32_t warp_value_at(const uint32_t *piece_start, uint32_t n_pieces, const uint32_t *key,
                                  const uint32_t *rel, const uint32_t *val, uint32_t a, uint32_t j) {
    uint32_t lane = threadIdx.x & 31, found = 0;
    int hit = 0;
    for (uint32_t p = lane; p < n_pieces; p += 32) {
        uint32_t b = piece_start[p], len = piece_start[p + 1] - b, k0, k1;
        piece_run(key + b, len, a, &k0, &k1);
        if (k0 < k1) {
            uint32_t r0 = rel[b + k0];
            if (j >= r0 && j - r0 < k1 - k0) {
                found = val[b + k0 + (j - r0)];
                hit = 1;
            }
        }
    }
    unsigned mask = __ballot_sync(0xffffffffu, hit);
    return __shfl_sync(0xffffffffu, found, mask ? __ffs(mask) - 1 : 0);
}

/* Rows of address a with rank in [r_lo, r_hi) and trace position >= v,
 * summed over the pieces by the warp. */
__device__ uint32_t warp_count_from(const uint32_t *piece_start, uint32_t n_pieces, const uint32_t *key,
                                    const uint32_t *rel, const uint32_t *val, uint32_t a, uint32_t r_lo, uint32_t r_hi,
                                    uint32_t v) {
    uint32_t lane = threadIdx.x & 31, c = 0;
    for (uint32_t p = lane; p < n_pieces; p += 32) {
        uint32_t b = piece_start[p], len = piece_start[p + 1] - b, k0, k1;
        piece_run(key + b, len, a, &k0, &k1);
        if (k0 >= k1) continue;
        uint32_t r0 = rel[b + k0], m = k1 - k0;
        uint32_t i_lo = k0 + (r_lo > r0 ? min(r_lo - r0, m) : 0);
        uint32_t i_hi = k0 + (r_hi > r0 ? min(r_hi - r0, m) : 0);
        if (i_lo < i_hi) c += i_hi - lower_bound_u32(val + b, i_lo, i_hi, v);
    }
    for (int off = 16; off > 0; off /= 2) c += __shfl_down_sync(0xffffffffu, c, off);
    return __shfl_sync(0xffffffffu, c, 0);
}

/* The plan of every instance, one warp each, from the sorted pieces alone
 * (owned or not: no scattered rows are needed). */
__global__ void plan_warp_kernel(const uint32_t *start, const uint32_t *end, const uint32_t *inst_index,
                                 uint32_t n_inst, dev_layout L, const uint32_t *offset, const uint32_t *piece_start,
                                 uint32_t n_pieces, const uint32_t *key, const uint32_t *rel, const uint32_t *val,
                                 const uint32_t *chunk_start, uint32_t n_chunks, dev_plan *plan) {
    uint64_t gw = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (gw >= n_inst) return; /* whole warps */
    uint32_t g = (uint32_t)gw;
    uint32_t s = start[g], e = end[g];
    uint32_t fc = plan[g].first_compact, lc = address_at(offset, L.n_compact, e - 1);
    uint32_t skip_total = s - offset[fc];
    uint32_t v_first = warp_value_at(piece_start, n_pieces, key, rel, val, fc, skip_total);
    uint32_t first_chunk = chunk_of(chunk_start, n_chunks, v_first);
    uint32_t first_skip =
        warp_count_from(piece_start, n_pieces, key, rel, val, fc, 0, skip_total, chunk_start[first_chunk]);
    uint32_t v_last = warp_value_at(piece_start, n_pieces, key, rel, val, lc, e - 1 - offset[lc]);
    uint32_t last_chunk = chunk_of(chunk_start, n_chunks, v_last);
    uint32_t last_from = offset[lc] > s ? offset[lc] : s;
    uint32_t last_include = warp_count_from(piece_start, n_pieces, key, rel, val, lc, last_from - offset[lc],
                                            e - offset[lc], chunk_start[last_chunk]);
    uint32_t has_prev = inst_index[g] > 0, prev_addr = 0, prev_value = 0;
    if (has_prev) {
        uint32_t pa = address_at(offset, L.n_compact, s - 1);
        prev_addr = raw_of(L, pa);
        prev_value = warp_value_at(piece_start, n_pieces, key, rel, val, pa, s - 1 - offset[pa]);
    }
    if ((threadIdx.x & 31) == 0) {
        dev_plan *p = &plan[g];
        p->first_addr = raw_of(L, fc);
        p->last_addr = raw_of(L, lc);
        p->first_chunk = first_chunk;
        p->first_skip = first_skip;
        p->first_skip_total = skip_total;
        p->last_chunk = last_chunk;
        p->last_include = last_include;
        p->last_include_total = e - last_from;
        p->has_prev = has_prev;
        p->prev_addr = prev_addr;
        p->prev_value = prev_value;
    }
}

/* The runs of each owned instance: its compact address range, a block
 * row per instance. */
__global__ void owned_runs_kernel(const uint32_t *owned_gid, uint32_t n_owned, const uint32_t *__restrict__ hist,
                                  const uint32_t *__restrict__ offset, const uint32_t *__restrict__ nzpos, dev_layout L,
                                  const uint32_t *start, const uint32_t *end, const uint32_t *runs_off,
                                  const dev_plan *plan, pk_memsort_run_entry *runs) {
    for (uint32_t o = blockIdx.y; o < n_owned; o += gridDim.y) {
        uint32_t g = owned_gid[o], s = start[g], e = end[g];
        uint32_t fc = plan[g].first_compact, lc = address_at(offset, L.n_compact, e - 1);
        uint32_t base = runs_off[g] - nzpos[fc];
        for (uint32_t a = fc + blockIdx.x * blockDim.x + threadIdx.x; a <= lc; a += gridDim.x * blockDim.x) {
            uint32_t cnt = hist[a];
            if (cnt == 0) continue;
            uint32_t lo = offset[a] > s ? offset[a] : s, hi = offset[a] + cnt < e ? offset[a] + cnt : e;
            pk_memsort_run_entry run;
            run.addr = raw_of(L, a);
            run.count = hi - lo;
            runs[base + nzpos[a]] = run;
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
    uint32_t **bufs[] = {&s->d_trace,  &s->d_key,   &s->d_val,       &s->d_rel,    &s->d_sorted, &s->d_key_in,
                         &s->d_val_in, &s->d_head,  &s->d_run_start, &s->d_hist,   &s->d_prev,   &s->d_offset,
                         &s->d_nzpos,  &s->d_small, &s->d_start,     &s->d_pieces, &s->d_bounds, &s->d_counts};
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
    if (s->h_pieces) cudaFreeHost(s->h_pieces);
    s->h_small = NULL;
    s->h_plan = NULL;
    s->h_table = NULL;
    s->h_pieces = NULL;
    s->cap_n = 0;
    s->cap_compact = s->cap_instances = 0;
    s->cap_runs = s->cap_counts = s->cap_bounds = 0;
    s->temp_bytes = 0;
    s->device_bytes = 0;
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
        cudaEventDestroy(s->ev_addr);
        cudaEventDestroy(s->ev_plan);
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
        if (err == cudaErrorMemoryAllocation) s->device_full = 1;
        if (err == cudaErrorMemoryAllocation && s->need_bytes)
            return pk_fail(ctx, PK_ERR_NOMEM,
                           "cudaMalloc of %zu bytes for %s failed: out of memory; this trace needs about %.2f GiB "
                           "of GPU memory in all and %.2f GiB were free (--backend cpu sorts it on the host)",
                           bytes, what, (double)s->need_bytes / 1073741824.0, (double)s->free_bytes / 1073741824.0);
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
    } want[] = {{&s->d_trace, cn, "the trace"},
                {&s->d_key, cn, "sorted keys"},
                {&s->d_val, cn, "sorted positions"},
                {&s->d_rel, cn, "ranks"},
                {&s->d_sorted, cn, "the sorted rows"},
                {&s->d_key_in, piece, "piece keys"},
                {&s->d_val_in, piece, "piece positions"},
                {&s->d_head, piece, "run heads"},
                {&s->d_run_start, piece, "run starts"},
                {&s->d_hist, ncw, "the address histogram"},
                {&s->d_prev, ncw, "ranks before a piece"},
                {&s->d_offset, ncw, "address offsets"},
                {&s->d_nzpos, ncw, "run positions"},
                {&s->d_small, 64, "status"}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if ((st = device_alloc(ctx, s, (void **)want[k].p, want[k].words * 4, want[k].what)) != PK_OK) return st;
    size_t b1 = 0, b2 = 0, b3 = 0;
    PK_CUDA(ctx, cub::DeviceRadixSort::SortPairs(NULL, b1, s->d_key_in, s->d_key, s->d_val_in, s->d_val, (int)piece, 0,
                                                 key_bits));
    PK_CUDA(ctx, cub::DeviceScan::InclusiveScan(NULL, b2, s->d_head, s->d_run_start, max_op(), (int)piece));
    PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(NULL, b3, s->d_hist, s->d_offset, (int)ncw));
    size_t b4 = 0;
    PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(NULL, b4, thrust::make_transform_iterator(s->d_hist, nonzero_op()),
                                               s->d_nzpos, (int)ncw));
    if (b4 > b3) b3 = b4;
    s->temp_bytes = b1 > b2 ? b1 : b2;
    if (b3 > s->temp_bytes) s->temp_bytes = b3;
    if ((st = device_alloc(ctx, s, &s->d_temp, s->temp_bytes, "CUB scratch")) != PK_OK) return st;
    size_t max_pieces = cn / PIECE_ENTRIES + 8;
    if ((st = device_alloc(ctx, s, (void **)&s->d_pieces, (max_pieces + 1) * 4, "piece table")) != PK_OK) return st;
    s->h_small = (uint32_t *)pk_memsort_cuda_host_alloc(64 * 4);
    s->h_pieces = (uint32_t *)pk_memsort_cuda_host_alloc((max_pieces + 1) * 4);
    if (!s->h_small || !s->h_pieces) return pk_fail(ctx, PK_ERR_NOMEM, "out of pinned host memory");
    s->cap_n = cn;
    s->cap_compact = n_compact;
    s->cap_key_bits = key_bits;
    return PK_OK;
}

extern "C" pk_status pk_memsort_cuda_device_bytes(pk_context *ctx, const pk_memsort_layout *layout, uint64_t n,
                                                  uint64_t *bytes) {
    uint64_t cn = n > 1 ? n : 1, piece = cn < PIECE_ENTRIES ? cn : PIECE_ENTRIES, ncw = (uint64_t)layout->n_compact + 1;
    uint64_t pieces = cn / PIECE_ENTRIES + 8, instances = 0;
    for (uint32_t r = 0; r < layout->n_regions; r++) instances += layout->max_instances[r];
    size_t b1 = 0, b2 = 0, b3 = 0, b4 = 0;
    uint32_t *none = NULL;
    PK_CUDA(ctx, cub::DeviceRadixSort::SortPairs(NULL, b1, none, none, none, none, (int)piece, 0, layout->key_bits));
    PK_CUDA(ctx, cub::DeviceScan::InclusiveScan(NULL, b2, none, none, max_op(), (int)piece));
    PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(NULL, b3, none, none, (int)ncw));
    PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(NULL, b4, thrust::make_transform_iterator(none, nonzero_op()), none,
                                               (int)ncw));
    size_t temp = b1 > b2 ? b1 : b2;
    temp = b3 > temp ? b3 : temp;
    temp = b4 > temp ? b4 : temp;
    *bytes = 20 * cn + 16 * ncw + 16 * piece + temp + 64 * 4 + 4 * (pieces + 1) +
             (instances + 1) * (10 * 4 + sizeof(dev_plan)) + 4 * (PK_MEMSORT_MAX_CHUNKS + 1) +
             8 * pieces * (instances / 2 + 1) + 4 * instances * PK_MEMSORT_MAX_CHUNKS + 8 * cn;
    return PK_OK;
}

extern "C" int pk_memsort_cuda_fits(pk_context *ctx, const pk_memsort_regions *regions, uint64_t n,
                                    const pk_memsort_result *result) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    uint64_t need = 0;
    size_t free_b = 0, total_b = 0;
    int device = ctx ? ctx->cuda_device : 0;
    if (pk_memsort_cuda_device_bytes(ctx, &layout, n, &need) != PK_OK || cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        pk_clear(ctx);
        return 1;
    }
    const cuda_state *s = (const cuda_state *)result->backend_state;
    uint64_t held = s && s->kind == PK_MEMSORT_STATE_CUDA && s->device == device ? s->device_bytes : 0;
    return need + ((uint64_t)64 << 20) <= (uint64_t)free_b + held;
}

/* The scatter bounds: two words per (piece, owned segment). */
static pk_status reserve_bounds(pk_context *ctx, cuda_state *s, uint64_t n_pairs) {
    uint64_t n_bounds = 2 * (n_pairs ? n_pairs : 1);
    if (n_bounds > s->cap_bounds || !s->d_bounds) {
        s->cap_bounds = 0;
        if (s->d_bounds) cudaFree(s->d_bounds), s->d_bounds = NULL;
        pk_status st = device_alloc(ctx, s, (void **)&s->d_bounds, n_bounds * 4, "scatter bounds");
        if (st) return st;
        s->cap_bounds = n_bounds;
    }
    return PK_OK;
}

/* Instance tables (every instance, owned ones, owned segments, chunk
 * starts: 10 arrays of n_inst + 1 words and the chunk table, in one
 * allocation), the counts and the runs. */
static pk_status reserve_tables(pk_context *ctx, cuda_state *s, uint32_t n_inst, uint64_t n_counts, uint64_t n_runs) {
    pk_status st = PK_OK;
    if (n_inst > s->cap_instances || !s->d_start) {
        s->cap_instances = 0; /* until every table below is in place (a failure leaves none trusted) */
        if (s->d_start) cudaFree(s->d_start), s->d_start = NULL;
        if (s->d_plan) cudaFree(s->d_plan), s->d_plan = NULL;
        if (s->h_plan) cudaFreeHost(s->h_plan), s->h_plan = NULL;
        if (s->h_table) cudaFreeHost(s->h_table), s->h_table = NULL;
        size_t ci = (size_t)n_inst + 1, words = ci * 10 + PK_MEMSORT_MAX_CHUNKS + 1;
        if ((st = device_alloc(ctx, s, (void **)&s->d_start, words * 4, "instance table"))) return st;
        if ((st = device_alloc(ctx, s, (void **)&s->d_plan, ci * sizeof(dev_plan), "plans"))) return st;
        s->h_table = (uint32_t *)pk_memsort_cuda_host_alloc(words * 4);
        s->h_plan = (dev_plan *)pk_memsort_cuda_host_alloc(ci * sizeof(dev_plan));
        if (!s->h_table || !s->h_plan) return pk_fail(ctx, PK_ERR_NOMEM, "out of pinned host memory");
        s->cap_instances = n_inst;
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
    if (s && (s->kind != PK_MEMSORT_STATE_CUDA || s->device != device)) {
        pk_memsort_backend_state_free(result);
        s = NULL;
    }
    PK_CUDA(ctx, cudaSetDevice(device));
    if (!s) {
        s = (cuda_state *)calloc(1, sizeof *s);
        if (!s) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        s->kind = PK_MEMSORT_STATE_CUDA;
        s->device = device;
        result->backend_state = s;
        PK_CUDA(ctx, cudaStreamCreateWithFlags(&s->s_copy, cudaStreamNonBlocking));
        PK_CUDA(ctx, cudaStreamCreateWithFlags(&s->s_comp, cudaStreamNonBlocking));
        PK_CUDA(ctx, cudaStreamCreateWithFlags(&s->s_down, cudaStreamNonBlocking));
        PK_CUDA(ctx, cudaEventCreate(&s->ev_start));
        PK_CUDA(ctx, cudaEventCreate(&s->ev_uploaded));
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_small, cudaEventDisableTiming));
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_addr, cudaEventDisableTiming));
        PK_CUDA(ctx, cudaEventCreateWithFlags(&s->ev_plan, cudaEventDisableTiming));
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

/* Piece boundaries: PIECE_ENTRIES each, but the last piece's share is cut
 * in four, so that the work left after the last copy is a quarter piece. */
static uint32_t make_pieces(uint64_t n, uint32_t *piece_start) {
    uint32_t p = 0;
    uint64_t b = 0;
    while (n - b > PIECE_ENTRIES) {
        piece_start[p++] = (uint32_t)b;
        b += PIECE_ENTRIES;
    }
    uint64_t rest = n - b, parts = rest >= 4 * 1024 ? 4 : 1;
    for (uint64_t k = 0; k < parts; k++) piece_start[p++] = (uint32_t)(b + rest * k / parts);
    piece_start[p] = (uint32_t)n;
    return p;
}

/* The instance tables of reserve_tables, as host or device arrays: ten
 * arrays of n_inst + 1 words (stride), then the chunk starts. */
struct instance_table {
    uint32_t *start, *end, *index, *runs_off;
    uint32_t *owned_start, *owned_rows, *owned_gid; /* the owned instances */
    uint32_t *seg_start, *seg_rows, *seg_out;       /* the owned segments */
    uint32_t *chunk_start;
};

static instance_table table_arrays(uint32_t *base, uint32_t stride) {
    instance_table t;
    t.start = base, t.end = t.start + stride, t.index = t.end + stride;
    t.runs_off = t.index + stride;
    uint32_t *owned = t.runs_off + stride;
    t.owned_start = owned, t.owned_rows = owned + stride, t.owned_gid = owned + 2 * stride;
    t.seg_start = owned + 3 * stride, t.seg_rows = owned + 4 * stride, t.seg_out = owned + 5 * stride;
    t.chunk_start = owned + 6 * stride;
    return t;
}

/* One call of run_cuda: its inputs, the layout the kernels read, and what
 * each step hands to the next. The steps run in the order run_cuda calls
 * them, and each queues its work on the state's streams in the order
 * written: the overlap of upload, compute and download depends on both. */
struct memsort_run {
    pk_context *ctx;
    const pk_memsort_regions *regions;
    const pk_memsort_trace *trace;
    uint32_t n_workers, worker;
    pk_memsort_result *result;
    cuda_state *s;
    pk_memsort_layout layout;
    dev_layout L;
    uint64_t n;
    uint32_t n_chunks;
    uint32_t n_pieces;
    uint64_t region_entries[PK_MEMSORT_MAX_REGIONS];
    uint32_t n_inst, n_owned;
    uint32_t stride;            /* of the instance tables: n_inst + 1 */
    instance_table host, dev;   /* s->h_table and s->d_start */
    uint64_t n_values, n_pairs; /* owned rows; (piece, owned segment) pairs */
    uint32_t n_seg, max_rows;   /* owned segments; rows of the largest owned instance */
    uint64_t n_runs;
};

/* The device buffers for the trace; the run's estimated need and what is
 * free go into the state for the message of an allocation that fails. */
static pk_status reserve_for_trace(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const pk_memsort_layout &layout = run->layout;
    const uint64_t n = run->n;
    s->device_full = 0;
    {
        size_t free_b = 0, total_b = 0;
        uint64_t need = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError(), free_b = 0;
        if (pk_memsort_cuda_device_bytes(ctx, &layout, n, &need) != PK_OK) need = 0;
        pk_clear(ctx);
        s->need_bytes = need;
        s->free_bytes = (uint64_t)free_b + s->device_bytes;
    }
    return reserve_trace(ctx, s, n, layout.n_compact, layout.key_bits);
}

/* The regions as the kernels read them; inst_base and region_start follow
 * in build_instances. */
static void make_dev_layout(memsort_run *run) {
    const pk_memsort_layout &layout = run->layout;
    dev_layout &L = run->L;
    memset(&L, 0, sizeof L);
    L.n_regions = layout.n_regions;
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        L.base[r] = (uint32_t)layout.base[r];
        L.end[r] = layout.end[r];
        L.instance_entries[r] = layout.instance_entries[r];
    }
    for (uint32_t r = 0; r <= layout.n_regions; r++) L.compact_base[r] = layout.compact_base[r];
    L.n_compact = layout.n_compact;
    L.n_workers = run->n_workers;
    L.worker = run->worker;
}

/* 1a. The trace up in pieces on the copy stream, an event after each; the
 * compute stream starts with the piece table and cleared histogram. */
static pk_status upload_pieces(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const pk_memsort_layout &layout = run->layout;
    const pk_memsort_trace *trace = run->trace;
    pk_status st = PK_OK;
    const uint32_t n_pieces = run->n_pieces = make_pieces(run->n, s->h_pieces);
    if ((st = piece_events(ctx, s, n_pieces)) != PK_OK) return st;
    PK_CUDA(ctx, cudaEventRecord(s->ev_start, s->s_copy));
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_start, 0));
    PK_CUDA(ctx,
            cudaMemcpyAsync(s->d_pieces, s->h_pieces, (size_t)(n_pieces + 1) * 4, cudaMemcpyHostToDevice, s->s_comp));
    PK_CUDA(ctx, cudaMemsetAsync(s->d_hist, 0, ((size_t)layout.n_compact + 1) * 4, s->s_comp));
    PK_CUDA(ctx, cudaMemsetAsync(s->d_small, 0xff, 4, s->s_comp));
    for (uint32_t p = 0; p < n_pieces; p++) {
        uint64_t b = s->h_pieces[p], len = s->h_pieces[p + 1] - b;
        PK_CUDA(ctx, cudaMemcpyAsync(s->d_trace + b, trace->addr + b, len * 4, cudaMemcpyHostToDevice, s->s_copy));
        PK_CUDA(ctx, cudaEventRecord(s->ev_piece[p], s->s_copy));
    }
    PK_CUDA(ctx, cudaEventRecord(s->ev_uploaded, s->s_copy));
    return PK_OK;
}

/* 1b. Each piece, once it is there: compact, sort and rank on the compute
 * stream. */
static pk_status sort_pieces(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const pk_memsort_layout &layout = run->layout;
    const dev_layout &L = run->L;
    const uint32_t n_pieces = run->n_pieces;
    for (uint32_t p = 0; p < n_pieces; p++) {
        uint32_t b = s->h_pieces[p], len = s->h_pieces[p + 1] - b;
        if (len == 0) continue;
        unsigned grid = grid_for(len);
        size_t temp = s->temp_bytes;
        PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_piece[p], 0));
        compact_kernel<<<grid, THREADS, 0, s->s_comp>>>(s->d_trace + b, len, b, L, s->d_key_in, s->d_val_in,
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
    return PK_OK;
}

/* 2. Offsets of every address, run positions; region sizes back to the
 * host (waited for here). */
static pk_status scan_offsets(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const pk_memsort_layout &layout = run->layout;
    const dev_layout &L = run->L;
    size_t temp = s->temp_bytes;
    PK_CUDA(ctx, cub::DeviceScan::ExclusiveSum(s->d_temp, temp, s->d_hist, s->d_offset, (int)layout.n_compact + 1,
                                               s->s_comp));
    boundaries_kernel<<<1, 32, 0, s->s_comp>>>(s->d_offset, L, s->d_small);
    PK_CUDA(ctx, cudaGetLastError());
    PK_CUDA(ctx, cudaMemcpyAsync(s->h_small, s->d_small, 64 * 4, cudaMemcpyDeviceToHost, s->s_comp));
    PK_CUDA(ctx, cudaEventRecord(s->ev_small, s->s_comp));
    /* run positions while the host reads the region sizes (hist[n_compact] is 0) */
    temp = s->temp_bytes;
    PK_CUDA(ctx,
            cub::DeviceScan::ExclusiveSum(s->d_temp, temp, thrust::make_transform_iterator(s->d_hist, nonzero_op()),
                                          s->d_nzpos, (int)layout.n_compact + 1, s->s_comp));
    PK_CUDA(ctx, cudaEventSynchronize(s->ev_small));
    return PK_OK;
}

/* The instances from the region sizes (an entry the GPU found bad is
 * reported by the host's check), each region's first instance and row for
 * the kernels, and the instance tables reserved. */
static pk_status build_instances(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const pk_memsort_layout &layout = run->layout;
    dev_layout &L = run->L;
    const pk_memsort_regions *regions = run->regions;
    const pk_memsort_trace *trace = run->trace;
    pk_memsort_result *result = run->result;
    uint64_t *region_entries = run->region_entries;
    const uint32_t n_chunks = run->n_chunks;
    pk_status st = PK_OK;
    if (s->h_small[0] != UINT32_MAX) {
        st = pk_memsort_trace_check(ctx, regions, trace);
        return st ? st : pk_fail(ctx, PK_ERR_INTERNAL, "the GPU found a bad entry the check did not");
    }
    for (uint32_t r = 0; r < layout.n_regions; r++) region_entries[r] = s->h_small[2 + r] - s->h_small[1 + r];
    if ((st = pk_memsort_instances_build(ctx, &layout, regions, trace, region_entries, run->n_workers, run->worker,
                                         result)))
        return st;
    const uint32_t n_inst = run->n_inst = result->n_instances, n_owned = run->n_owned = result->n_owned;
    {
        uint32_t g = 0;
        for (uint32_t r = 0; r < layout.n_regions; r++) {
            L.inst_base[r] = g;
            L.region_start[r] = s->h_small[1 + r];
            g += (uint32_t)((region_entries[r] + layout.instance_entries[r] - 1) / layout.instance_entries[r]);
        }
        L.inst_base[layout.n_regions] = g;
        L.region_start[layout.n_regions] = (uint32_t)run->n;
    }
    return reserve_tables(ctx, s, n_inst, (uint64_t)n_owned * n_chunks, 0);
}

/* 3. The instance table on the host: every instance, the owned ones, and
 * the owned segments (owned neighbours merged); the result's values and
 * counts and the scatter bounds reserved. */
static pk_status fill_instance_table(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const dev_layout &L = run->L;
    const pk_memsort_trace *trace = run->trace;
    pk_memsort_result *result = run->result;
    const uint32_t n_chunks = run->n_chunks, n_inst = run->n_inst, n_owned = run->n_owned;
    pk_status st = PK_OK;
    const uint32_t stride = run->stride = n_inst + 1;
    run->host = table_arrays(s->h_table, stride);
    uint32_t *h_start = run->host.start, *h_end = run->host.end, *h_index = run->host.index;
    uint32_t *h_owned_start = run->host.owned_start, *h_owned_rows = run->host.owned_rows;
    uint32_t *h_owned_gid = run->host.owned_gid;
    uint32_t *h_seg_start = run->host.seg_start, *h_seg_rows = run->host.seg_rows, *h_seg_out = run->host.seg_out;
    uint32_t *h_chunk_start = run->host.chunk_start;
    uint64_t n_values = 0;
    uint32_t n_seg = 0, max_rows = 0;
    for (uint32_t g = 0, o = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        h_start[g] = L.region_start[in->region] + (uint32_t)in->first_row;
        h_end[g] = h_start[g] + in->n_rows;
        h_index[g] = in->index;
        if (!in->owned) continue;
        h_owned_start[o] = (uint32_t)n_values; /* packed in d_sorted, as in the result */
        h_owned_rows[o] = in->n_rows;
        h_owned_gid[o] = g;
        in->values_offset = n_values;
        in->counts_offset = (uint64_t)o * n_chunks;
        if (n_seg && h_seg_start[n_seg - 1] + h_seg_rows[n_seg - 1] == h_start[g]) {
            h_seg_rows[n_seg - 1] += in->n_rows;
        } else {
            h_seg_start[n_seg] = h_start[g];
            h_seg_out[n_seg] = (uint32_t)n_values;
            h_seg_rows[n_seg++] = in->n_rows;
        }
        max_rows = in->n_rows > max_rows ? in->n_rows : max_rows;
        n_values += in->n_rows;
        o++;
    }
    for (uint32_t c = 0; c <= n_chunks; c++) h_chunk_start[c] = (uint32_t)trace->chunk_start[c];
    run->n_values = n_values, run->n_seg = n_seg, run->max_rows = max_rows;
    if ((st = pk_memsort_result_reserve(ctx, result, 0, n_values, (uint64_t)n_owned * n_chunks, 1)) != PK_OK) return st;
    const uint64_t n_pairs = run->n_pairs = (uint64_t)run->n_pieces * n_seg; /* (piece, owned segment) */
    if ((st = reserve_bounds(ctx, s, n_pairs)) != PK_OK) return st;
    run->dev = table_arrays(s->d_start, stride);
    return PK_OK;
}

/* The table up in one copy (runs_off is filled in later), then each
 * instance's addresses and run count; ev_addr marks their copy back. */
static pk_status plan_addresses(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const dev_layout &L = run->L;
    const uint32_t n_chunks = run->n_chunks, n_inst = run->n_inst, stride = run->stride;
    uint32_t *h_start = run->host.start;
    uint32_t *d_start = run->dev.start, *d_end = run->dev.end;
    PK_CUDA(ctx, cudaMemcpyAsync(d_start, h_start, ((size_t)stride * 10 + n_chunks + 1) * 4, cudaMemcpyHostToDevice,
                                 s->s_comp));
    if (n_inst) {
        plan_address_kernel<<<(n_inst + 127) / 128, 128, 0, s->s_comp>>>(d_start, d_end, n_inst, L, s->d_offset,
                                                                         s->d_nzpos, s->d_plan);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaMemcpyAsync(s->h_plan, s->d_plan, (size_t)n_inst * sizeof(dev_plan), cudaMemcpyDeviceToHost,
                                     s->s_comp));
    }
    PK_CUDA(ctx, cudaEventRecord(s->ev_addr, s->s_comp));
    return PK_OK;
}

/* 4. The owned rows only: per (piece, segment) the index range that lands
 * there, then the scatter; ev_scattered marks them in place. */
static pk_status scatter_owned_rows(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const uint32_t n_pieces = run->n_pieces, n_seg = run->n_seg;
    const uint64_t n_pairs = run->n_pairs, n_values = run->n_values;
    uint32_t *d_seg_start = run->dev.seg_start, *d_seg_rows = run->dev.seg_rows, *d_seg_out = run->dev.seg_out;
    if (n_pairs) {
        range_bounds_kernel<<<(unsigned)((n_pairs + 127) / 128), 128, 0, s->s_comp>>>(
            s->d_pieces, n_pieces, d_seg_start, d_seg_rows, n_seg, s->d_key, s->d_rel, s->d_offset, s->d_bounds);
        PK_CUDA(ctx, cudaGetLastError());
        uint32_t per_pair = (uint32_t)(n_values / n_pairs / (THREADS * 64)) + 1; /* ~64 rows a thread */
        if (per_pair > 1024) per_pair = 1024;
        dim3 grid(per_pair, n_pairs < 65535 ? (unsigned)n_pairs : 65535u);
        range_scatter_kernel<<<grid, THREADS, 0, s->s_comp>>>(s->d_bounds, n_pairs, d_seg_start, d_seg_out, n_seg,
                                                              s->d_key, s->d_rel, s->d_val, s->d_offset, s->d_sorted);
        PK_CUDA(ctx, cudaGetLastError());
    }
    PK_CUDA(ctx, cudaEventRecord(s->ev_scattered, s->s_comp));
    return PK_OK;
}

/* The plans of all instances on the (now idle) upload stream, after
 * ev_addr; ev_plan marks them done. */
static pk_status plan_instances(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const dev_layout &L = run->L;
    const uint32_t n_chunks = run->n_chunks, n_inst = run->n_inst, n_pieces = run->n_pieces;
    uint32_t *d_start = run->dev.start, *d_end = run->dev.end, *d_index = run->dev.index;
    uint32_t *d_chunk_start = run->dev.chunk_start;
    if (n_inst) {
        PK_CUDA(ctx, cudaStreamWaitEvent(s->s_copy, s->ev_addr, 0));
        plan_warp_kernel<<<(n_inst + 3) / 4, 128, 0, s->s_copy>>>(d_start, d_end, d_index, n_inst, L, s->d_offset,
                                                                  s->d_pieces, n_pieces, s->d_key, s->d_rel, s->d_val,
                                                                  d_chunk_start, n_chunks, s->d_plan);
        PK_CUDA(ctx, cudaGetLastError());
    }
    PK_CUDA(ctx, cudaEventRecord(s->ev_plan, s->s_copy));
    return PK_OK;
}

/* Owned rows down on the download stream as soon as they are in place;
 * ev_down marks them arrived. */
static pk_status download_values(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    pk_memsort_result *result = run->result;
    const uint64_t n_values = run->n_values;
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_down, s->ev_scattered, 0));
    if (n_values)
        PK_CUDA(ctx,
                cudaMemcpyAsync(result->values, s->d_sorted, (size_t)n_values * 4, cudaMemcpyDeviceToHost, s->s_down));
    PK_CUDA(ctx, cudaEventRecord(s->ev_down, s->s_down));
    return PK_OK;
}

/* Each owned instance's rows per chunk, on the compute stream. */
static pk_status count_chunks(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const uint32_t n_chunks = run->n_chunks, n_owned = run->n_owned, max_rows = run->max_rows;
    uint32_t *d_owned_start = run->dev.owned_start, *d_owned_rows = run->dev.owned_rows;
    uint32_t *d_chunk_start = run->dev.chunk_start;
    if (n_owned) {
        PK_CUDA(ctx, cudaMemsetAsync(s->d_counts, 0, (size_t)n_owned * n_chunks * 4, s->s_comp));
        dim3 grid((unsigned)(((uint64_t)max_rows + COUNT_TILE - 1) / COUNT_TILE), n_owned < 65535 ? n_owned : 65535);
        size_t smem = (2 * (size_t)n_chunks + 1) * 4;
        chunk_count_kernel<<<grid, THREADS, smem, s->s_comp>>>(d_owned_start, d_owned_rows, n_owned, s->d_sorted,
                                                               d_chunk_start, n_chunks, s->d_counts);
        PK_CUDA(ctx, cudaGetLastError());
    }
    return PK_OK;
}

/* 5. Run counts from the first round trip (waits for ev_addr): the runs of
 * owned instances, with room for them on the device and in the result. */
static pk_status count_runs(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    pk_memsort_result *result = run->result;
    const uint32_t n_chunks = run->n_chunks, n_inst = run->n_inst, n_owned = run->n_owned;
    const uint64_t n_values = run->n_values;
    uint32_t *h_runs_off = run->host.runs_off;
    pk_status st = PK_OK;
    PK_CUDA(ctx, cudaEventSynchronize(s->ev_addr));
    uint64_t n_runs = 0;
    for (uint32_t g = 0; g < n_inst; g++) {
        pk_memsort_instance *in = &result->instances[g];
        h_runs_off[g] = (uint32_t)n_runs;
        if (!in->owned) continue;
        in->runs_offset = n_runs;
        in->n_runs = s->h_plan[g].n_runs;
        n_runs += in->n_runs;
    }
    run->n_runs = n_runs;
    if ((st = reserve_tables(ctx, s, n_inst, (uint64_t)n_owned * n_chunks, n_runs)) != PK_OK) return st;
    if ((st = pk_memsort_result_reserve(ctx, result, n_runs, n_values, (uint64_t)n_owned * n_chunks, 1)) != PK_OK)
        return st;
    result->n_runs = n_runs;
    result->n_values = n_values;
    return PK_OK;
}

/* The owned runs, then the counts, runs and plans back to the host; waits
 * for everything, downloads included (ev_end). */
static pk_status copy_results_back(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    const dev_layout &L = run->L;
    pk_memsort_result *result = run->result;
    const uint32_t n_chunks = run->n_chunks, n_inst = run->n_inst, n_owned = run->n_owned;
    const uint64_t n_runs = run->n_runs;
    uint32_t *h_runs_off = run->host.runs_off;
    uint32_t *d_start = run->dev.start, *d_end = run->dev.end, *d_runs_off = run->dev.runs_off;
    uint32_t *d_owned_gid = run->dev.owned_gid;
    if (n_owned) {
        PK_CUDA(ctx, cudaMemcpyAsync(d_runs_off, h_runs_off, (size_t)n_inst * 4, cudaMemcpyHostToDevice, s->s_comp));
        dim3 grid(2048 / n_owned + 1, n_owned < 65535 ? n_owned : 65535);
        owned_runs_kernel<<<grid, THREADS, 0, s->s_comp>>>(d_owned_gid, n_owned, s->d_hist, s->d_offset, s->d_nzpos, L,
                                                           d_start, d_end, d_runs_off, s->d_plan, s->d_runs);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaMemcpyAsync(result->chunk_counts, s->d_counts, (size_t)n_owned * n_chunks * 4,
                                     cudaMemcpyDeviceToHost, s->s_comp));
        if (n_runs)
            PK_CUDA(ctx, cudaMemcpyAsync(result->runs, s->d_runs, n_runs * sizeof(pk_memsort_run_entry),
                                         cudaMemcpyDeviceToHost, s->s_comp));
    }
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_plan, 0));
    if (n_inst)
        PK_CUDA(ctx, cudaMemcpyAsync(s->h_plan, s->d_plan, (size_t)n_inst * sizeof(dev_plan), cudaMemcpyDeviceToHost,
                                     s->s_comp));
    PK_CUDA(ctx, cudaStreamWaitEvent(s->s_comp, s->ev_down, 0));
    PK_CUDA(ctx, cudaEventRecord(s->ev_end, s->s_comp));
    PK_CUDA(ctx, cudaEventSynchronize(s->ev_end));
    PK_CUDA(ctx, cudaGetLastError());
    return PK_OK;
}

/* The plans into the result's instances. */
static void read_plans(memsort_run *run) {
    pk_memsort_result *result = run->result;
    const cuda_state *s = run->s;
    for (uint32_t g = 0; g < run->n_inst; g++) {
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
}

/* The run's times and traffic into the result's stats. */
static pk_status record_stats(memsort_run *run) {
    pk_context *ctx = run->ctx;
    cuda_state *s = run->s;
    pk_memsort_result *result = run->result;
    const uint64_t n = run->n, n_values = run->n_values, n_runs = run->n_runs;
    const uint32_t n_chunks = run->n_chunks, n_inst = run->n_inst, n_owned = run->n_owned;
    float ms = 0, up = 0;
    PK_CUDA(ctx, cudaEventElapsedTime(&ms, s->ev_start, s->ev_end));
    PK_CUDA(ctx, cudaEventElapsedTime(&up, s->ev_start, s->ev_uploaded));
    result->stats.device_ms = ms;
    result->stats.upload_ms = up;
    result->stats.device_bytes = s->device_bytes;
    result->stats.pcie_bytes =
        4 * n + 4 * n_values + 8 * n_runs + 4ull * n_owned * n_chunks + (uint64_t)n_inst * sizeof(dev_plan) * 2;
    return PK_OK;
}

/* The steps in order (see memsort_run); each returns at its first error,
 * and the state keeps what it holds for the next run or
 * pk_memsort_cuda_state_free. */
static pk_status run_cuda(pk_context *ctx, const pk_memsort_regions *regions, const pk_memsort_trace *trace,
                          uint32_t n_workers, uint32_t worker, pk_memsort_result *result, pk_progress *progress) {
    memsort_run run;
    memset(&run, 0, sizeof run);
    run.ctx = ctx, run.regions = regions, run.trace = trace;
    run.n_workers = n_workers, run.worker = worker, run.result = result;
    pk_memsort_layout_make(regions, &run.layout);
    run.n = trace->n_entries;
    run.n_chunks = trace->n_chunks;
    pk_status st = state_get(ctx, result, &run.s);
    if (st) return st;
    if ((st = reserve_for_trace(&run)) != PK_OK) return st;
    make_dev_layout(&run);
    if ((st = upload_pieces(&run)) != PK_OK) return st;
    if ((st = sort_pieces(&run)) != PK_OK) return st;
    if ((st = scan_offsets(&run)) != PK_OK) return st;
    if ((st = build_instances(&run)) != PK_OK) return st;
    if ((st = fill_instance_table(&run)) != PK_OK) return st;
    if ((st = plan_addresses(&run)) != PK_OK) return st;
    if ((st = scatter_owned_rows(&run)) != PK_OK) return st;
    if ((st = plan_instances(&run)) != PK_OK) return st;
    if ((st = download_values(&run)) != PK_OK) return st;
    if ((st = count_chunks(&run)) != PK_OK) return st;
    if ((st = count_runs(&run)) != PK_OK) return st;
    if ((st = copy_results_back(&run)) != PK_OK) return st;
    read_plans(&run);
    if ((st = record_stats(&run)) != PK_OK) return st;
    if (pk_progress_add(progress, (double)run.n, 1)) return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    return PK_OK;
}

extern "C" pk_status pk_memsort_run_cuda(pk_context *ctx, const pk_memsort_regions *regions,
                                         const pk_memsort_trace *trace, uint32_t n_workers, uint32_t worker,
                                         pk_memsort_result *result, pk_progress *progress) {
    int device = ctx ? ctx->cuda_device : 0;
    void *taken = NULL;
    if (pk_test_gpu_leave_free && cudaSetDevice(device) == cudaSuccess) taken = pk_cuda_test_take();
    pk_status st = run_cuda(ctx, regions, trace, n_workers, worker, result, progress);
    if (taken) cudaFree(taken);
    return st;
}

extern "C" int pk_memsort_cuda_device_was_full(const pk_memsort_result *result) {
    const cuda_state *s = (const cuda_state *)result->backend_state;
    return s && s->kind == PK_MEMSORT_STATE_CUDA && s->device_full;
}
