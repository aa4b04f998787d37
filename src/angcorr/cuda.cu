/* cuda.cu - the CUDA backend of angcorr.
 *
 * Kernels are numbered from PK_ANGCORR_KERNEL_CUDA_FIRST in ladder order,
 * from the naive one (a thread per pair, float64) to the fastest; each rung
 * adds one change, so `pairkit bench angcorr --backend cuda` shows what
 * each bought (docs/performance.md). Every kernel but cuda-approx-acos bins
 * exactly: a pair's slot equals the float64 reference's. cuda-approx-acos
 * is the usual float32 kernel (polynomial acos), kept as the anchor the
 * exact ones are measured against; it misbins and is never chosen.
 *
 * The exact tiled kernels compute one float32 value q per pair and look it
 * up in the GPU edge table (gpu_table.h) held in shared memory; pairs that
 * fall into an uncertainty window are settled in float64 inside the kernel,
 * with __dmul_rn/__dadd_rn so that no fma contraction can make the dot
 * product differ from the host's (-ffp-contract=off), and the host's
 * threshold search. Autocorrelations visit j > i once and count it twice;
 * self-pairs are added on the host in float64.
 *
 * Work is cut into tiles of rows x columns handed out through an atomic
 * counter to resident blocks, each with its own shared histogram flushed
 * into the global one when the block ends (or before its u32 counters could
 * overflow). Launches come in chunks of at most CHUNK_PAIRS_* pairs, with
 * progress reported and cancellation honoured between chunks.
 *
 * What bounds the fastest kernels on an H200 (docs/performance.md): the
 * shared-memory gathers of cells and windows, not the instruction issue
 * (70% of the issue limit at 14 instructions a pair); hence the Morton and
 * Hilbert orders of the catalogs (a warp's pairs touch few table entries),
 * the 8-bit cells, the queue that keeps the rare float64 settling off the
 * warps' common path, and a shared layout sized so that four blocks (32
 * warps) stay resident to hide the gathers' latency.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "angcorr_internal.h"
#include "gpu_table.h"
}
#include "../common/cuda_check.cuh"
#include "cuda_exact.cuh"

enum {
    /* one thread per ordered pair, float64 dot, search of the thresholds,
     * global atomics: the simplest exact kernel */
    PK_ANGCORR_KERNEL_CUDA_NAIVE = PK_ANGCORR_KERNEL_CUDA_FIRST,
    /* the usual float32 kernel: tiles, shared histograms, symmetry, cos of
     * the RA difference, polynomial acos. Inexact: the anchor only. */
    PK_ANGCORR_KERNEL_CUDA_APPROX_ACOS,
    /* the CPU's exact method on tiles: float32 chord squared, clamped cell
     * index, windows, float64 settling; a row per thread */
    PK_ANGCORR_KERNEL_CUDA_CHORD,
    /* + the sum started at a small offset, so q >= offset: no clamps */
    PK_ANGCORR_KERNEL_CUDA_CHORD_OFFSET,
    /* + four rows per thread: each column read from shared serves four pairs */
    PK_ANGCORR_KERNEL_CUDA_CHORD_ROWS4,
    /* + catalogs in spatial (Morton) order: a warp's pairs share bins, so
     * its shared-memory gathers and atomics stop conflicting */
    PK_ANGCORR_KERNEL_CUDA_CHORD_SORTED,
    /* + q = (1 + offset) - dot: three fmas in place of six operations */
    PK_ANGCORR_KERNEL_CUDA_DOT,
    /* + cells packed with their window: one 8-byte shared load a pair in
     * place of two loads. Did not pay (H200: 23.4 ms against 16.4): a
     * warp's packed cells span more banks than the two small gathers, and
     * the 90 KB table halves the resident blocks */
    PK_ANGCORR_KERNEL_CUDA_DOT_PACKED,
    /* + eight rows per thread (24.6 ms) */
    PK_ANGCORR_KERNEL_CUDA_DOT_PACKED_ROWS8,
    /* cuda-dot with windows of one width, known by their upper edge: a
     * 4-byte load by slot in place of 8 (17.3 ms: more pairs settled) */
    PK_ANGCORR_KERNEL_CUDA_DOT_HI,
    /* cuda-dot + undecided pairs queued in shared memory and settled by
     * the whole block after each tile, in place of one lane at a time */
    PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE,
    /* + cells of 8 mantissa bits where a sample of the pairs finds no
     * multi cell: half the distinct cells a warp reads */
    PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE_CELLS8,
    /* the same with cuda-dot-hi's windows (13.16 ms against 13.54) */
    PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8,
    /* cuda-dot-queue-cells8 with eight rows per thread (16.5 ms: the
     * registers halve the resident warps) */
    PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE_CELLS8_ROWS8,
    /* cuda-dot-hi-queue-cells8 with the catalogs in Hilbert order over their
     * own bounding box: no long jumps between neighbours in the order, so a
     * tile's pairs spread over fewer bins; 13.03 ms against 13.13 measured
     * interleaved */
    PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT,
    /* + the shared memory of a block sized so that four blocks fit a
     * multiprocessor: the 56 KB of the kernels above, with their 16 static
     * bytes, is 16 bytes more than a quarter of the H200's 228 KB less the
     * 1 KB the driver keeps per block, so they run three blocks (24 warps);
     * 13.03 -> 12.36 ms */
    PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4,
    /* + a queued pair settled against the one threshold its cell leaves
     * open in place of a search of all 1441: 12.37 -> 12.05 ms, the
     * default */
    PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4_DIRECT,
};

static const struct {
    int kernel;
    const char *name;
} cuda_kernels[] = {
    {PK_ANGCORR_KERNEL_CUDA_NAIVE, "cuda-naive"},
    {PK_ANGCORR_KERNEL_CUDA_APPROX_ACOS, "cuda-approx-acos"},
    {PK_ANGCORR_KERNEL_CUDA_CHORD, "cuda-chord"},
    {PK_ANGCORR_KERNEL_CUDA_CHORD_OFFSET, "cuda-chord-offset"},
    {PK_ANGCORR_KERNEL_CUDA_CHORD_ROWS4, "cuda-chord-rows4"},
    {PK_ANGCORR_KERNEL_CUDA_CHORD_SORTED, "cuda-chord-sorted"},
    {PK_ANGCORR_KERNEL_CUDA_DOT, "cuda-dot"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_PACKED, "cuda-dot-packed"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_PACKED_ROWS8, "cuda-dot-packed-rows8"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI, "cuda-dot-hi"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE, "cuda-dot-queue"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE_CELLS8, "cuda-dot-queue-cells8"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8, "cuda-dot-hi-queue-cells8"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE_CELLS8_ROWS8, "cuda-dot-queue-cells8-rows8"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT, "cuda-dot-hi-queue-cells8-hilbert"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4, "cuda-dot-hi-queue-cells8-hilbert-fit4"},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4_DIRECT, "cuda-dot-hi-queue-cells8-hilbert-fit4-direct"},
};
#define N_CUDA_KERNELS (sizeof cuda_kernels / sizeof cuda_kernels[0])

extern "C" const char *pk_angcorr_cuda_kernel_name(int kernel) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (cuda_kernels[k].kernel == kernel) return cuda_kernels[k].name;
    return NULL;
}

extern "C" int pk_angcorr_cuda_kernel_from_name(const char *name) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (strcmp(cuda_kernels[k].name, name) == 0) return cuda_kernels[k].kernel;
    return -1;
}

/* ---- shared device pieces ------------------------------------------------ */

/* Double unit vectors as x[n], y[n], z[n] (n = stride). */
struct Vectors64 {
    const double *v;
    size_t stride;
};

__device__ __forceinline__ double dot_pair(Vectors64 a, size_t i, Vectors64 b, size_t j) {
    return pk_dot_rn(a.v[i], a.v[a.stride + i], a.v[2 * a.stride + i], b.v[j], b.v[b.stride + j],
                     b.v[2 * b.stride + j]);
}

/* ---- the naive kernel ------------------------------------------------------ */

__global__ void naive_kernel(Vectors64 a, size_t i0, size_t n_rows, Vectors64 b, size_t n_b,
                             const double *__restrict__ thr, int n_bounds, unsigned long long *slots) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_rows * n_b) return;
    size_t i = i0 + p / n_b, j = p % n_b;
    atomicAdd(&slots[pk_slot_of_dot(thr, n_bounds, dot_pair(a, i, b, j))], 1ull);
}

/* ---- the tiled kernels ------------------------------------------------------ */

/* Threads per block; columns per tile (one float4 per thread to load). */
#define TILE_THREADS 256
#define TILE_COLS 256

enum { SPACE_CHORD = 0, SPACE_DOT = 1, SPACE_APPROX = 2, SPACE_DOT_PACKED = 3, SPACE_DOT_HI = 4 };

struct TiledArgs {
    const float4 *pa, *pb; /* float points, padded with zeros to whole tiles */
    int n_a, n_b;
    int autocorr;
    Vectors64 a64, b64; /* the settling path's double vectors */
    const double *thr;  /* [n_bounds] */
    int n_bounds;
    const float2 *lohi;    /* [n_bounds + 2] */
    const float2 *lohi_hi; /* SPACE_DOT_HI: the same with hi = NaN where the window is
                              wider than packed_width, and for the multi pseudo-slot */
    const unsigned short *cells;
    const uint2 *packed; /* SPACE_DOT_PACKED: (bits of hi, 8 * s0) per cell */
    float packed_width;
    int n_cells, cell_base;
    float offset;               /* chord: fma start; dot: 1 + offset */
    float theta_min, inv_width; /* approx: linear bins */
    int n_bins;
    const int2 *items; /* this launch's (row tile, column tile), from items_kernel */
    int n_items;
    unsigned *counter; /* next item of this chunk */
    unsigned long long *slots, *n_fp64;
};

/* Shared memory of a block: the windows, the histogram (one u32 every 8
 * bytes, so that 8 * slot addresses both it and lohi; the last entry takes
 * masked-out pairs and queued ones), the cells, the column tile, the queue
 * of undecided pairs (i, j, q, 8 * s0). */
struct TiledLayout {
    size_t lohi, hist, cells, tile, queue, bytes;
    unsigned queue_len;
};

/* Queued pairs a block holds: what fits beside the tables, at least 256;
 * a tile of the default bins queues about 230 (0.088% of its 262,144
 * pairs). A full queue settles in place. The first queue kernels gave a
 * block 56 KB in all (blocks = 0), meant as a quarter of a multiprocessor;
 * with blocks > 0 the bytes are sized so that that many blocks fit a
 * multiprocessor of the H100/H200: 228 KB of shared memory, of which the
 * driver keeps 1 KB a block, and 128 bytes for the static variables. 56 KB
 * plus the 16 static bytes is 16 bytes more than four such blocks may take,
 * so the blocks = 0 kernels run three blocks a multiprocessor. */
#define QUEUE_BLOCK_BYTES (56 * 1024)
#define SM_SHARED_BYTES (228 * 1024)

static TiledLayout tiled_layout(int space, int n_bounds, int n_cells, int queue, int blocks) {
    TiledLayout l;
    l.lohi = 0; /* at offset 0, so that a window's address is 8 * slot + a constant */
    size_t n_lohi = space == SPACE_CHORD || space == SPACE_DOT || space == SPACE_DOT_HI ? (size_t)n_bounds + 2 : 0;
    size_t cell_bytes = space == SPACE_APPROX ? 0 : space == SPACE_DOT_PACKED ? 8 : 2;
    l.hist = l.lohi + 8 * n_lohi;
    l.cells = l.hist + 8 * ((size_t)n_bounds + 3);
    l.tile = l.cells + cell_bytes * (size_t)n_cells;
    l.tile = (l.tile + 15) & ~(size_t)15;
    l.queue = l.tile + (size_t)TILE_COLS * sizeof(float4);
    l.queue_len = 0;
    if (queue) {
        size_t budget = blocks > 0 ? SM_SHARED_BYTES / (size_t)blocks - 1024 - 128 : QUEUE_BLOCK_BYTES;
        size_t room = l.queue < budget ? (budget - l.queue) / 16 : 0;
        l.queue_len = room < 256 ? 256 : room > 2048 ? 2048 : (unsigned)room;
    }
    l.bytes = l.queue + 16 * (size_t)l.queue_len;
    return l;
}

/* acos by Abramowitz and Stegun 4.4.46 (|error| <= 2e-8 in exact
 * arithmetic) with the square root from the hardware reciprocal square
 * root, as the usual float32 kernels have it. */
__device__ __forceinline__ float acos_poly(float x) {
    float ax = fabsf(x);
    float p = -0.0012624911f;
    p = fmaf(p, ax, 0.0066700901f);
    p = fmaf(p, ax, -0.0170881256f);
    p = fmaf(p, ax, 0.0308918810f);
    p = fmaf(p, ax, -0.0501743046f);
    p = fmaf(p, ax, 0.0889789874f);
    p = fmaf(p, ax, -0.2145988016f);
    p = fmaf(p, ax, 1.5707963050f);
    float y = fmaxf(1.0f - ax, 1e-30f);
    float r = y * rsqrtf(y) * p;
    return x < 0 ? 3.14159265358979f - r : r;
}

/* The settling path: the byte offset 8 * slot of a pair float32 could not
 * decide (or whose cell holds several windows). */
__device__ __noinline__ unsigned settle(float q, unsigned e, const float2 *lohi, const double *thr, int n_bounds,
                                        Vectors64 a64, size_t i, Vectors64 b64, size_t j, unsigned *fp64_count) {
    if (e == 8u * (unsigned)(n_bounds + 1)) { /* a multi cell: search the windows */
        int lo = 0, hi = n_bounds;
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (lohi[mid].y <= q) lo = mid + 1;
            else hi = mid;
        }
        if (q < lohi[lo].x) return 8u * (unsigned)lo;
    }
    atomicAdd(fp64_count, 1u);
    return 8u * (unsigned)pk_slot_of_dot(thr, n_bounds, dot_pair(a64, i, b64, j));
}

/* The same for a queued pair when DIRECT: a cell that is not multi meets
 * one window only (gpu_table.c), so the pair's slot is s0 or s0 + 1 and
 * one threshold decides it, T_s0, in place of a search of them all. */
template <bool DIRECT>
__device__ __forceinline__ unsigned settle_queued(float q, unsigned e, const float2 *lohi, const double *thr,
                                                  int n_bounds, Vectors64 a64, size_t i, Vectors64 b64, size_t j,
                                                  unsigned *fp64_count) {
    if constexpr (DIRECT) {
        unsigned s0 = e >> 3;
        if (s0 < (unsigned)n_bounds) {
            atomicAdd(fp64_count, 1u);
            double dot = dot_pair(a64, i, b64, j);
            return 8u * (s0 + (dot < thr[s0] ? 1u : 0u));
        }
    }
    return settle(q, e, lohi, thr, n_bounds, a64, i, b64, j, fp64_count);
}

/* q of a pair: chord space offset + |pi - pj|^2, dot space (1 + offset) -
 * pi.pj, each an fma chain. */
template <int SPACE, bool CLAMP> __device__ __forceinline__ float pair_q(float4 pi, float4 pj, float offset) {
    if constexpr (SPACE == SPACE_CHORD) {
        float dx = pi.x - pj.x, dy = pi.y - pj.y, dz = pi.z - pj.z;
        if constexpr (CLAMP) return fmaf(dz, dz, fmaf(dy, dy, dx * dx));
        else return fmaf(dz, dz, fmaf(dy, dy, fmaf(dx, dx, offset)));
    } else {
        return fmaf(-pi.z, pj.z, fmaf(-pi.y, pj.y, fmaf(-pi.x, pj.x, offset)));
    }
}

template <bool CLAMP, int SHIFT>
__device__ __forceinline__ unsigned cell_entry(float q, const unsigned short *cellp, const TiledArgs &g) {
    unsigned idx = __float_as_uint(q) >> SHIFT;
    if constexpr (CLAMP) {
        int c = (int)idx - g.cell_base;
        c = min(max(c, 0), g.n_cells - 1);
        idx = (unsigned)c;
    }
    return cellp[idx];
}

/* The usual float32 kernel's slot, as a byte offset 8 * slot. */
__device__ __forceinline__ unsigned approx_entry(float4 pi, float4 pj, const TiledArgs &g) {
    float d = fmaf(pi.z * pj.z, __cosf(pi.x - pj.x), pi.y * pj.y);
    d = fminf(fmaxf(d, -1.0f), 1.0f);
    float t = (acos_poly(d) - g.theta_min) * g.inv_width;
    int k = t < 0.0f ? -1 : (int)fminf(t, (float)g.n_bins);
    return 8u * (unsigned)(k + 1);
}

/* Packed cells (dot space): the cell's entry and d = hi - q. */
template <int SHIFT> __device__ __forceinline__ uint2 packed_entry(float q, const uint2 *packedp) {
    return packedp[__float_as_uint(q) >> SHIFT];
}

/* All pairs of a tile: the thread's K rows against the TILE_COLS columns.
 * Per column, the K pairs are decided from the tables; only when one of
 * them fell into a window does the warp take the settling branch, which
 * looks the undecided ones up again and settles them, or (QUEUE) queues
 * them for the block to settle after the tile. Masked tiles (the diagonal
 * of an autocorrelation, padded rows and columns) send their invalid pairs
 * to the trash slot without settling them. */
template <int SPACE, bool CLAMP, int K, int SHIFT, bool QUEUE, bool MASKED>
__device__ __forceinline__ void tile_pairs(const float4 (&pi)[K], const float4 *tile, size_t r0, size_t c0,
                                           const TiledArgs &g, const unsigned char *sm_lohi,
                                           const unsigned short *cellp, const uint2 *packedp, unsigned char *sm_hist,
                                           unsigned *fp64_count, uint4 *queue, unsigned *queue_n, unsigned queue_len) {
    const unsigned trash = 8u * (unsigned)(g.n_bounds + 2);
#pragma unroll 2
    for (int jj = 0; jj < TILE_COLS; jj++) {
        float4 pj = tile[jj];
        size_t j = c0 + (size_t)jj;
        unsigned e[K];
        bool valid[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            if constexpr (MASKED) {
                size_t i = r0 + threadIdx.x + (size_t)k * TILE_THREADS;
                valid[k] = i < (size_t)g.n_a && j < (size_t)g.n_b && (!g.autocorr || j > i);
            } else {
                valid[k] = true;
            }
        }
        if constexpr (SPACE == SPACE_APPROX) {
#pragma unroll
            for (int k = 0; k < K; k++) e[k] = approx_entry(pi[k], pj, g);
        } else {
            constexpr int QSPACE = SPACE == SPACE_DOT_PACKED || SPACE == SPACE_DOT_HI ? SPACE_DOT : SPACE;
            float q[K];
            bool any_unsure = false;
#pragma unroll
            for (int k = 0; k < K; k++) {
                q[k] = pair_q<QSPACE, CLAMP>(pi[k], pj, g.offset);
                if constexpr (SPACE == SPACE_DOT_PACKED) {
                    uint2 c = packed_entry<SHIFT>(q[k], packedp);
                    float d = __uint_as_float(c.x) - q[k];
                    bool up = d <= 0.0f;
                    any_unsure |= !(d > g.packed_width) && !up && valid[k];
                    e[k] = up ? c.y + 8u : c.y;
                } else if constexpr (SPACE == SPACE_DOT_HI) {
                    unsigned e0 = cell_entry<false, SHIFT>(q[k], cellp, g);
                    float d = *(const float *)(sm_lohi + e0 + 4) - q[k];
                    bool up = d <= 0.0f;
                    any_unsure |= !(d > g.packed_width) && !up && valid[k];
                    e[k] = up ? e0 + 8u : e0;
                } else {
                    unsigned e0 = cell_entry<CLAMP, SHIFT>(q[k], cellp, g);
                    float2 w = *(const float2 *)(sm_lohi + e0);
                    bool up = q[k] >= w.y;
                    any_unsure |= q[k] >= w.x && !up && valid[k];
                    e[k] = up ? e0 + 8u : e0;
                }
            }
            if (any_unsure) {
#pragma unroll
                for (int k = 0; k < K; k++) {
                    bool unsure;
                    unsigned e0;
                    if constexpr (SPACE == SPACE_DOT_PACKED) {
                        uint2 c = packed_entry<SHIFT>(q[k], packedp);
                        float d = __uint_as_float(c.x) - q[k];
                        unsure = !(d > g.packed_width) && !(d <= 0.0f);
                        e0 = c.y;
                    } else if constexpr (SPACE == SPACE_DOT_HI) {
                        e0 = cell_entry<false, SHIFT>(q[k], cellp, g);
                        float d = *(const float *)(sm_lohi + e0 + 4) - q[k];
                        unsure = !(d > g.packed_width) && !(d <= 0.0f);
                    } else {
                        e0 = cell_entry<CLAMP, SHIFT>(q[k], cellp, g);
                        float2 w = *(const float2 *)(sm_lohi + e0);
                        unsure = q[k] >= w.x && q[k] < w.y;
                    }
                    if (unsure && valid[k]) {
                        size_t i = r0 + threadIdx.x + (size_t)k * TILE_THREADS;
                        unsigned at = QUEUE ? atomicAdd(queue_n, 1u) : queue_len;
                        if (at < queue_len) {
                            queue[at] = make_uint4((unsigned)i, (unsigned)j, __float_as_uint(q[k]), e0);
                            e[k] = trash;
                        } else {
                            e[k] = settle(q[k], e0,
                                          SPACE == SPACE_DOT_PACKED || SPACE == SPACE_DOT_HI ? g.lohi
                                                                                             : (const float2 *)sm_lohi,
                                          g.thr, g.n_bounds, g.a64, i, g.b64, j, fp64_count);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            if constexpr (MASKED) e[k] = valid[k] ? e[k] : trash;
            atomicAdd((unsigned *)(sm_hist + e[k]), 1u);
        }
    }
}

/* Add the block's histogram to the global one and clear it. */
__device__ __forceinline__ void flush_hist(unsigned char *sm_hist, int n_slots, unsigned long long *slots) {
    for (int s = threadIdx.x; s < n_slots; s += TILE_THREADS) {
        unsigned c = ((unsigned *)sm_hist)[2 * s];
        if (c) {
            atomicAdd(&slots[s], (unsigned long long)c);
            ((unsigned *)sm_hist)[2 * s] = 0;
        }
    }
}

/* Items item0 .. item0 + n - 1 of the row-major order as (row tile, column
 * tile), one thread each, ahead of each launch: the list of all items
 * would take 8 bytes an item (17 GB at ~1.2e7 x 1.2e7), and decoding in
 * the counting kernel cost it registers (spills: 12.05 -> 12.57 ms on the
 * bundled catalogs). A cross count's row tiles hold n_ct items each; an
 * autocorrelation's row tile rt (rows from rt K TILE_THREADS, and
 * TILE_THREADS = TILE_COLS) starts at column tile K rt, so it holds
 * n_ct - K rt items and starts at item F(rt) = rt n_ct - K rt (rt - 1) / 2:
 * rt from the quadratic's root, then made exact in integers. */
__global__ void items_kernel(int2 *items, unsigned long long item0, int n, int n_ct, int K, int autocorr) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long item = item0 + (unsigned)i;
    if (!autocorr) {
        items[i] = make_int2((int)(item / (unsigned)n_ct), (int)(item % (unsigned)n_ct));
        return;
    }
    const long long nc = n_ct, k = K;
    const double b = (double)nc + 0.5 * (double)K;
    long long rt = (long long)((b - sqrt(fmax(b * b - 2.0 * (double)K * (double)item, 0.0))) / (double)K);
    auto first = [&](long long r) { return (unsigned long long)(r * nc - k * r * (r - 1) / 2); };
    while (rt > 0 && first(rt) > item) rt--;
    while (first(rt + 1) <= item) rt++;
    items[i] = make_int2((int)rt, (int)(k * rt + (long long)(item - first(rt))));
}

/* BLOCKS blocks of 256 threads a multiprocessor by registers (four, or two
 * with K = 8 rows): 64 registers a thread for four, which the queue
 * kernels would exceed unasked (80). Five (48 registers) and six (40) were
 * tried for the fit4 kernels: the spills cost more than the warps gave
 * (16.2 and 28.7 ms against 12.3, docs/performance.md). DIRECT: queued
 * pairs settled by settle_queued's one threshold. */
template <int SPACE, bool CLAMP, int K, int SHIFT, bool QUEUE, int BLOCKS = (K >= 8 ? 2 : 4), bool DIRECT = false>
__global__ void __launch_bounds__(TILE_THREADS, BLOCKS) tiled_kernel(TiledArgs g, TiledLayout lay) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int s_item;
    __shared__ unsigned s_fp64, s_queue_n;
    uint4 *queue = (uint4 *)(smem + lay.queue);
    float4 *tile = (float4 *)(smem + lay.tile);
    unsigned char *sm_lohi = smem;
    unsigned char *sm_hist = smem + lay.hist;
    unsigned short *sm_cells = (unsigned short *)(smem + lay.cells);
    uint2 *sm_packed = (uint2 *)(smem + lay.cells);
    const int n_hist = g.n_bounds + 3;
    const unsigned tid = threadIdx.x;

    if constexpr (SPACE == SPACE_CHORD || SPACE == SPACE_DOT || SPACE == SPACE_DOT_HI) {
        const float2 *lohi = SPACE == SPACE_DOT_HI ? g.lohi_hi : g.lohi;
        for (int s = tid; s < g.n_bounds + 2; s += TILE_THREADS) ((float2 *)sm_lohi)[s] = lohi[s];
        for (int c = tid; c < g.n_cells; c += TILE_THREADS) sm_cells[c] = g.cells[c];
    } else if constexpr (SPACE == SPACE_DOT_PACKED) {
        for (int c = tid; c < g.n_cells; c += TILE_THREADS) sm_packed[c] = g.packed[c];
    }
    for (int s = tid; s < n_hist; s += TILE_THREADS) ((unsigned *)sm_hist)[2 * s] = 0;
    if (tid == 0) s_fp64 = s_queue_n = 0;
    /* index bits(q) >> shift straight into the cells of the unclamped
     * tables; the clamped ones subtract the base first */
    const unsigned short *cellp = CLAMP ? sm_cells : sm_cells - g.cell_base;
    const uint2 *packedp = sm_packed - g.cell_base;
    const size_t rows = (size_t)K * TILE_THREADS;
    /* the u32 counters take at most 2^31 pairs between flushes */
    const unsigned items_per_flush = (unsigned)((1u << 31) / (rows * TILE_COLS));
    unsigned items_done = 0;

    for (;;) {
        if (tid == 0) s_item = (int)atomicAdd(g.counter, 1u);
        __syncthreads();
        int it = s_item;
        if (it >= g.n_items) break;
        int2 rc = g.items[it];
        size_t r0 = (size_t)rc.x * rows, c0 = (size_t)rc.y * TILE_COLS;
        tile[tid] = g.pb[c0 + tid];
        float4 pi[K];
#pragma unroll
        for (int k = 0; k < K; k++) pi[k] = g.pa[r0 + tid + (size_t)k * TILE_THREADS];
        __syncthreads();
        bool masked = (g.autocorr && c0 < r0 + rows) || c0 + TILE_COLS > (size_t)g.n_b || r0 + rows > (size_t)g.n_a;
        if (masked)
            tile_pairs<SPACE, CLAMP, K, SHIFT, QUEUE, true>(pi, tile, r0, c0, g, sm_lohi, cellp, packedp, sm_hist,
                                                            &s_fp64, queue, &s_queue_n, lay.queue_len);
        else
            tile_pairs<SPACE, CLAMP, K, SHIFT, QUEUE, false>(pi, tile, r0, c0, g, sm_lohi, cellp, packedp, sm_hist,
                                                             &s_fp64, queue, &s_queue_n, lay.queue_len);
        __syncthreads();
        if constexpr (QUEUE) { /* settle the queued pairs, all threads at once */
            unsigned n = min(s_queue_n, lay.queue_len);
            for (unsigned x = tid; x < n; x += TILE_THREADS) {
                uint4 u = queue[x];
                unsigned e = settle_queued<DIRECT>(
                    __uint_as_float(u.z), u.w,
                    SPACE == SPACE_DOT_PACKED || SPACE == SPACE_DOT_HI ? g.lohi : (const float2 *)sm_lohi, g.thr,
                    g.n_bounds, g.a64, u.x, g.b64, u.y, &s_fp64);
                atomicAdd((unsigned *)(sm_hist + e), 1u);
            }
            __syncthreads();
            if (tid == 0) s_queue_n = 0;
        }
        if (++items_done == items_per_flush) {
            flush_hist(sm_hist, g.n_bounds + 2, g.slots);
            items_done = 0;
            __syncthreads();
        }
    }
    flush_hist(sm_hist, g.n_bounds + 2, g.slots);
    if (tid == 0 && s_fp64) atomicAdd(g.n_fp64, (unsigned long long)s_fp64);
}

/* ---- the kernels' table ---------------------------------------------------- */

typedef void (*tiled_fn)(TiledArgs, TiledLayout);

struct KernelSpec {
    int kernel;
    int space;     /* SPACE_* */
    int clamped;   /* chord cells with a clamped index */
    int rows;      /* rows per thread */
    int sorted;    /* catalogs in Morton order (1) or Hilbert order (2) */
    int queue;     /* undecided pairs queued for the block */
    int cell_bits; /* 8: only where a sample of the pairs finds no multi cell */
    tiled_fn fn;   /* NULL: the naive kernel */
    tiled_fn fn9;  /* cell_bits 8: the kernel with 9 bits, for other pairs */
    int blocks;    /* resident blocks the shared layout is sized for (0: the 56 KB of the first kernels) */
};

#define S9 (23 - PK_GPU_CELL_BITS)
#define S8 (23 - 8)

static const KernelSpec kernel_specs[] = {
    {PK_ANGCORR_KERNEL_CUDA_NAIVE, SPACE_CHORD, 0, 0, 0, 0, 9, NULL, NULL},
    {PK_ANGCORR_KERNEL_CUDA_APPROX_ACOS, SPACE_APPROX, 0, 1, 0, 0, 9, tiled_kernel<SPACE_APPROX, false, 1, S9, false>,
     NULL},
    {PK_ANGCORR_KERNEL_CUDA_CHORD, SPACE_CHORD, 1, 1, 0, 0, 9, tiled_kernel<SPACE_CHORD, true, 1, S9, false>, NULL},
    {PK_ANGCORR_KERNEL_CUDA_CHORD_OFFSET, SPACE_CHORD, 0, 1, 0, 0, 9, tiled_kernel<SPACE_CHORD, false, 1, S9, false>,
     NULL},
    {PK_ANGCORR_KERNEL_CUDA_CHORD_ROWS4, SPACE_CHORD, 0, 4, 0, 0, 9, tiled_kernel<SPACE_CHORD, false, 4, S9, false>,
     NULL},
    {PK_ANGCORR_KERNEL_CUDA_CHORD_SORTED, SPACE_CHORD, 0, 4, 1, 0, 9, tiled_kernel<SPACE_CHORD, false, 4, S9, false>,
     NULL},
    {PK_ANGCORR_KERNEL_CUDA_DOT, SPACE_DOT, 0, 4, 1, 0, 9, tiled_kernel<SPACE_DOT, false, 4, S9, false>, NULL},
    {PK_ANGCORR_KERNEL_CUDA_DOT_PACKED, SPACE_DOT_PACKED, 0, 4, 1, 0, 9,
     tiled_kernel<SPACE_DOT_PACKED, false, 4, S9, false>, NULL},
    {PK_ANGCORR_KERNEL_CUDA_DOT_PACKED_ROWS8, SPACE_DOT_PACKED, 0, 8, 1, 0, 9,
     tiled_kernel<SPACE_DOT_PACKED, false, 8, S9, false>, NULL},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI, SPACE_DOT_HI, 0, 4, 1, 0, 9, tiled_kernel<SPACE_DOT_HI, false, 4, S9, false>, NULL},
    {PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE, SPACE_DOT, 0, 4, 1, 1, 9, tiled_kernel<SPACE_DOT, false, 4, S9, true>, NULL},
    {PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE_CELLS8, SPACE_DOT, 0, 4, 1, 1, 8, tiled_kernel<SPACE_DOT, false, 4, S8, true>,
     tiled_kernel<SPACE_DOT, false, 4, S9, true>},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8, SPACE_DOT_HI, 0, 4, 1, 1, 8,
     tiled_kernel<SPACE_DOT_HI, false, 4, S8, true>, tiled_kernel<SPACE_DOT_HI, false, 4, S9, true>},
    {PK_ANGCORR_KERNEL_CUDA_DOT_QUEUE_CELLS8_ROWS8, SPACE_DOT, 0, 8, 1, 1, 8,
     tiled_kernel<SPACE_DOT, false, 8, S8, true>, tiled_kernel<SPACE_DOT, false, 8, S9, true>},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT, SPACE_DOT_HI, 0, 4, 2, 1, 8,
     tiled_kernel<SPACE_DOT_HI, false, 4, S8, true>, tiled_kernel<SPACE_DOT_HI, false, 4, S9, true>},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4, SPACE_DOT_HI, 0, 4, 2, 1, 8,
     tiled_kernel<SPACE_DOT_HI, false, 4, S8, true, 4, false>, tiled_kernel<SPACE_DOT_HI, false, 4, S9, true, 4, false>,
     4},
    {PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4_DIRECT, SPACE_DOT_HI, 0, 4, 2, 1, 8,
     tiled_kernel<SPACE_DOT_HI, false, 4, S8, true, 4, true>, tiled_kernel<SPACE_DOT_HI, false, 4, S9, true, 4, true>,
     4},
};

static const KernelSpec *spec_of(int kernel) {
    for (size_t k = 0; k < sizeof kernel_specs / sizeof kernel_specs[0]; k++)
        if (kernel_specs[k].kernel == kernel) return &kernel_specs[k];
    return NULL;
}

/* Dot space resolves q to about 5e-7 whatever the separation, chord space
 * to a fraction of it: below a first boundary of 2^-16 in chord squared
 * (0.22 degree) the dot windows would hold a large share of the first
 * bin's pairs, so the dot kernels run as cuda-chord-sorted there. */
#define DOT_MIN_FIRST_BOUNDARY_C2 0x1p-16

/* The kernel that runs for spec under this table (DOT_MIN_FIRST_BOUNDARY_C2). */
static const KernelSpec *spec_for_table(const KernelSpec *spec, const pk_edge_table *table) {
    if ((spec->space == SPACE_DOT || spec->space == SPACE_DOT_PACKED || spec->space == SPACE_DOT_HI) &&
        pk_gpu_first_boundary_c2(table) < DOT_MIN_FIRST_BOUNDARY_C2)
        return spec_of(PK_ANGCORR_KERNEL_CUDA_CHORD_SORTED);
    return spec;
}

/* Pairs per launch: 2^34 is about 11 ms of the fastest kernel on an H200
 * and well under a second on any GPU that runs it at a tenth of that; the
 * naive kernel does about a hundredth of the pairs per second. */
extern "C" uint64_t pk_angcorr_cuda_chunk_pairs = 1ull << 34;
#define CHUNK_PAIRS_TILED pk_angcorr_cuda_chunk_pairs
#define CHUNK_PAIRS_NAIVE (1ull << 28)

/* ---- host side ------------------------------------------------------------- */

/* Everything one count holds on the device; freed by release(). */
struct DeviceJob {
    double *a64, *b64, *thr;
    float4 *pa, *pb;
    float2 *lohi, *lohi_hi;
    unsigned short *cells;
    uint2 *packed;
    int2 *items; /* a launch's items */
    unsigned *counters;
    unsigned long long *slots, *n_fp64;
    cudaEvent_t ev_start, ev_stop, ev_chunk[2];
};

/* failed: work may still be queued with these buffers (a count that
 * stopped early), so it is waited for before they can be handed to
 * another count. */
static void release(DeviceJob *d, int failed) {
    if (failed) cudaDeviceSynchronize();
    pk_cuda_pool_free(d->a64);
    pk_cuda_pool_free(d->b64);
    pk_cuda_pool_free(d->thr);
    pk_cuda_pool_free(d->pa);
    pk_cuda_pool_free(d->pb);
    pk_cuda_pool_free(d->lohi);
    pk_cuda_pool_free(d->lohi_hi);
    pk_cuda_pool_free(d->cells);
    pk_cuda_pool_free(d->packed);
    pk_cuda_pool_free(d->items);
    pk_cuda_pool_free(d->counters);
    pk_cuda_pool_free(d->slots);
    pk_cuda_pool_free(d->n_fp64);
    cudaEvent_t evs[4] = {d->ev_start, d->ev_stop, d->ev_chunk[0], d->ev_chunk[1]};
    for (int k = 0; k < 4; k++)
        if (evs[k]) cudaEventDestroy(evs[k]);
    memset(d, 0, sizeof *d);
}

static pk_status upload(pk_context *ctx, void **dev, const void *host, size_t bytes) {
    PK_CUDA(ctx, pk_cuda_pool_malloc(dev, bytes ? bytes : 1));
    if (bytes) PK_CUDA(ctx, cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice));
    return PK_OK;
}

/* x, y, z of the double vectors on the device, each padded with zeros to
 * n_pad (the stride), so that padded rows and columns read zeros. */
static pk_status upload_vectors64(pk_context *ctx, const pk_unit_vectors *v, size_t n_pad, double **dev) {
    const double *cols[3] = {v->x, v->y, v->z};
    if (n_pad <= ((size_t)1 << 20)) {
        /* small: one copy of the padded columns (a copy costs ~10 us however small) */
        double *host = (double *)calloc(3 * n_pad, sizeof(double));
        if (!host) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        for (int c = 0; c < 3; c++) memcpy(host + (size_t)c * n_pad, cols[c], v->n * sizeof(double));
        pk_status st = upload(ctx, (void **)dev, host, 3 * n_pad * sizeof(double));
        free(host);
        return st;
    }
    PK_CUDA(ctx, pk_cuda_pool_malloc((void **)dev, 3 * n_pad * sizeof(double)));
    PK_CUDA(ctx, cudaMemset(*dev, 0, 3 * n_pad * sizeof(double)));
    for (int c = 0; c < 3; c++)
        PK_CUDA(ctx, cudaMemcpy(*dev + (size_t)c * n_pad, cols[c], v->n * sizeof(double), cudaMemcpyHostToDevice));
    return PK_OK;
}

/* The float points a tiled kernel reads, padded with zeros to n_pad. */
static pk_status upload_points(pk_context *ctx, int space, const pk_catalog *cat, const pk_unit_vectors *v,
                               size_t n_pad, float4 **dev) {
    float4 *host = (float4 *)calloc(n_pad, sizeof(float4));
    if (!host) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        if (space == SPACE_APPROX)
            host[i] = make_float4((float)cat->ra[i], (float)sin(cat->dec[i]), (float)cos(cat->dec[i]), 0.0f);
        else host[i] = make_float4((float)v->x[i], (float)v->y[i], (float)v->z[i], 0.0f);
    }
    pk_status st = upload(ctx, (void **)dev, host, n_pad * sizeof(float4));
    free(host);
    return st;
}

/* Launch chunk after chunk, at most two in flight, reporting progress and
 * honouring cancellation in between. launch(k) enqueues chunk k. */
template <class Launch>
static pk_status run_chunks(pk_context *ctx, DeviceJob *d, int n_chunks, const double *chunk_work,
                            pk_progress *progress, Launch launch) {
    pk_status st = PK_OK;
    PK_CUDA(ctx, cudaEventRecord(d->ev_start));
    for (int k = 0; k < n_chunks; k++) {
        if ((st = launch(k)) != PK_OK) return st;
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaEventRecord(d->ev_chunk[k & 1]));
        if (k >= 1) {
            PK_CUDA(ctx, cudaEventSynchronize(d->ev_chunk[(k - 1) & 1]));
            if (progress && pk_progress_add(progress, chunk_work[k - 1], 1)) {
                cudaDeviceSynchronize();
                return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
            }
        }
    }
    PK_CUDA(ctx, cudaEventRecord(d->ev_stop));
    PK_CUDA(ctx, cudaEventSynchronize(d->ev_stop));
    if (progress && n_chunks > 0) pk_progress_add(progress, chunk_work[n_chunks - 1], 1);
    return PK_OK;
}

static pk_status count_naive(pk_context *ctx, DeviceJob *d, const pk_unit_vectors *va, const pk_unit_vectors *vb,
                             const pk_edge_table *table, pk_progress *progress) {
    pk_status st;
    if ((st = upload_vectors64(ctx, va, va->n, &d->a64)) != PK_OK) return st;
    if (vb != va && (st = upload_vectors64(ctx, vb, vb->n, &d->b64)) != PK_OK) return st;
    Vectors64 a = {d->a64, va->n}, b = {vb != va ? d->b64 : d->a64, vb->n};
    size_t rows = CHUNK_PAIRS_NAIVE / vb->n;
    if (rows < 1) rows = 1;
    int n_chunks = (int)((va->n + rows - 1) / rows);
    double *work = (double *)malloc((size_t)n_chunks * sizeof(double));
    if (!work) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n_chunks; k++) {
        size_t i0 = (size_t)k * rows, n_rows = va->n - i0 < rows ? va->n - i0 : rows;
        work[k] = (double)n_rows * (double)vb->n;
    }
    const double *thr = d->thr;
    int n_bounds = table->n_bounds;
    unsigned long long *slots = d->slots;
    st = run_chunks(ctx, d, n_chunks, work, progress, [&](int k) -> pk_status {
        size_t i0 = (size_t)k * rows, n_rows = va->n - i0 < rows ? va->n - i0 : rows;
        size_t blocks = (n_rows * vb->n + 255) / 256;
        naive_kernel<<<(unsigned)blocks, 256>>>(a, i0, n_rows, b, vb->n, thr, n_bounds, slots);
        return PK_OK;
    });
    free(work);
    return st;
}

/* q of pair (i, j) in the dot table g8, as the kernels compute it. */
static float dot_q(const pk_gpu_table *g8, const pk_unit_vectors *va, size_t i, const pk_unit_vectors *vb, size_t j) {
    return fmaf(-(float)va->z[i], (float)vb->z[j],
                fmaf(-(float)va->y[i], (float)vb->y[j], fmaf(-(float)va->x[i], (float)vb->x[j], 1.0f + g8->offset)));
}

/* Whether cells of 8 mantissa bits serve these catalogs: of a fixed
 * sequence of `samples` pairs (so that the choice repeats), at most one in
 * 8192 falls into a multi cell of the 8-bit dot table g8 (a multi cell
 * settles every pair in it; the default bins have them only beyond 116
 * degrees). */
static int cells8_serve_n(const pk_gpu_table *g8, const pk_unit_vectors *va, const pk_unit_vectors *vb, int samples) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int hits = 0;
    for (int k = 0; k < samples; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = (size_t)(s >> 33) % va->n;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)(s >> 33) % vb->n;
        hits += pk_gpu_table_in_multi(g8, dot_q(g8, va, i, vb, j));
    }
    return hits <= samples / 8192; /* 8192 samples: at most one */
}

static int cells8_serve(const pk_gpu_table *g8, const pk_unit_vectors *va, const pk_unit_vectors *vb) {
    return cells8_serve_n(g8, va, vb, 8192);
}

/* cells8_serve for one of many counts (jackknife patch pairs), each judged
 * as cheaply as it can be: with 8192 pairs or fewer every pair looked at
 * (at most one may fall in a multi cell), with more a sample of 1024 (none
 * may). With samples of 8192 for each of its 20,100 pairs the bundled
 * K = 100 run took 4.78 s on an H200 machine, 3.33 s judged once. */
static int cells8_serve_pair(const pk_gpu_table *g8, const pk_unit_vectors *va, const pk_unit_vectors *vb) {
    if ((uint64_t)va->n * vb->n > 8192) return cells8_serve_n(g8, va, vb, 1024);
    int hits = 0;
    for (size_t i = 0; i < va->n; i++)
        for (size_t j = 0; j < vb->n; j++) hits += pk_gpu_table_in_multi(g8, dot_q(g8, va, i, vb, j));
    return hits <= 1;
}

/* A tiled count's slots and statistics as a count's caller sees them:
 * n_b = 0 marks an autocorrelation of va, whose pairs j > i were counted
 * once (twice that, plus the self-pairs in float64). */
static void tiled_slots_finish(uint64_t *slots, size_t n_slots, const pk_edge_table *table, const pk_unit_vectors *va,
                               size_t n_b, unsigned long long n_fp64, pk_pair_stats *stats) {
    const size_t n_a = va->n;
    if (n_b == 0) {
        for (size_t s = 0; s < n_slots; s++) slots[s] *= 2;
        for (size_t i = 0; i < n_a; i++)
            slots[pk_edge_table_slot_fp64(
                table, pk_angcorr_dot_ref(va->x[i], va->y[i], va->z[i], va->x[i], va->y[i], va->z[i]))]++;
        stats->pairs_visited = (uint64_t)n_a * (uint64_t)(n_a - 1) / 2 + n_a;
        stats->pairs_fp64 = n_fp64 + n_a;
    } else {
        stats->pairs_visited = (uint64_t)n_a * (uint64_t)n_b;
        stats->pairs_fp64 = n_fp64;
    }
}

/* The bins' side of a tiled count into g: the approximate kernel's
 * linear bins, or the GPU edge table uploaded into d. Kernels of 8-bit
 * cells: bits 9 takes the table and kernel of 9-bit cells (*fn = fn9),
 * bits 8 the 8-bit ones, bits 0 the 9-bit ones when a sample of va x vb
 * pairs finds the 8-bit cells crowded. */
static pk_status setup_table(pk_context *ctx, DeviceJob *d, const KernelSpec *spec, const pk_unit_vectors *va,
                             const pk_unit_vectors *vb, int bits, const pk_bins *bins, const pk_edge_table *table,
                             TiledArgs *g, tiled_fn *fn) {
    pk_status st;
    *fn = spec->fn;
    if (spec->space == SPACE_APPROX) {
        if (bins->kind != PK_BINS_LINEAR)
            return pk_fail(ctx, PK_ERR_UNSUPPORTED, "cuda-approx-acos takes linear bins only");
        g->theta_min = (float)bins->theta_min;
        g->inv_width = (float)(1.0 / bins->width);
        g->n_bins = (int)bins->n_bins;
        return PK_OK;
    }
    pk_gpu_table gt;
    memset(&gt, 0, sizeof gt);
    g->thr = d->thr;
    int dot = spec->space == SPACE_DOT || spec->space == SPACE_DOT_PACKED || spec->space == SPACE_DOT_HI;
    pk_gpu_space space = dot ? PK_GPU_SPACE_DOT : PK_GPU_SPACE_CHORD;
    if ((st = pk_gpu_table_get(ctx, table, space, spec->clamped, spec->cell_bits, &gt)) != PK_OK) return st;
    if (spec->cell_bits == 8 && (bits == 9 || (bits == 0 && !cells8_serve(&gt, va, vb)))) {
        pk_gpu_table_free(&gt);
        *fn = spec->fn9;
        if ((st = pk_gpu_table_get(ctx, table, space, spec->clamped, PK_GPU_CELL_BITS, &gt)) != PK_OK) return st;
    }
    st = upload(ctx, (void **)&d->lohi, gt.lohi, 2 * ((size_t)gt.n_bounds + 2) * sizeof(float));
    if (st == PK_OK) st = upload(ctx, (void **)&d->cells, gt.cells, (size_t)gt.n_cells * sizeof(uint16_t));
    if (st == PK_OK && gt.packed)
        st = upload(ctx, (void **)&d->packed, gt.packed, 2 * (size_t)gt.n_cells * sizeof(uint32_t));
    if (st == PK_OK && spec->space == SPACE_DOT_HI) {
        /* hi = NaN: every q of such a slot's cells undecided */
        for (int32_t s = 0; s <= gt.n_bounds + 1; s++) {
            float lo = gt.lohi[2 * s], hi = gt.lohi[2 * s + 1];
            if (s == gt.n_bounds + 1 || (isfinite(hi) && (double)hi - (double)lo > (double)gt.packed_width))
                gt.lohi[2 * s + 1] = NAN;
        }
        st = upload(ctx, (void **)&d->lohi_hi, gt.lohi, 2 * ((size_t)gt.n_bounds + 2) * sizeof(float));
    }
    g->lohi = d->lohi;
    g->lohi_hi = d->lohi_hi;
    g->cells = d->cells;
    g->packed = d->packed;
    g->packed_width = gt.packed_width;
    g->n_cells = gt.n_cells;
    g->cell_base = gt.cell_base;
    g->offset = dot ? 1.0f + gt.offset : gt.offset;
    pk_gpu_table_free(&gt);
    return st;
}

static pk_status count_tiled(pk_context *ctx, DeviceJob *d, const KernelSpec *spec, const pk_catalog *a,
                             const pk_catalog *b, const pk_unit_vectors *va, const pk_unit_vectors *vb,
                             const pk_bins *bins, const pk_edge_table *table, int *blocks_per_sm,
                             pk_progress *progress) {
    int autocorr = vb == va;
    size_t rows = (size_t)spec->rows * TILE_THREADS;
    size_t n_rt = (va->n + rows - 1) / rows, n_ct = (vb->n + TILE_COLS - 1) / TILE_COLS;
    /* pad to whole tiles; an autocorrelation reads a as columns too */
    size_t pad_a = n_rt * rows, pad_b = n_ct * TILE_COLS;
    if (autocorr && pad_b > pad_a) pad_a = pad_b;
    pk_status st;
    TiledArgs g;
    memset(&g, 0, sizeof g);
    g.n_a = (int)va->n;
    g.n_b = (int)vb->n;
    g.autocorr = autocorr;
    g.n_bounds = table->n_bounds;
    if ((st = upload_points(ctx, spec->space, a, va, pad_a, &d->pa)) != PK_OK) return st;
    if (!autocorr && (st = upload_points(ctx, spec->space, b, vb, pad_b, &d->pb)) != PK_OK) return st;
    g.pa = d->pa;
    g.pb = autocorr ? d->pa : d->pb;

    tiled_fn fn = spec->fn;
    if (spec->space != SPACE_APPROX) {
        if ((st = upload_vectors64(ctx, va, pad_a, &d->a64)) != PK_OK) return st;
        if (!autocorr && (st = upload_vectors64(ctx, vb, pad_b, &d->b64)) != PK_OK) return st;
        g.a64.v = d->a64;
        g.a64.stride = pad_a;
        g.b64.v = autocorr ? d->a64 : d->b64;
        g.b64.stride = autocorr ? pad_a : pad_b;
    }
    if ((st = setup_table(ctx, d, spec, va, vb, 0, bins, table, &g, &fn)) != PK_OK) return st;

    /* Items in row-major order, cut into chunks by pairs; no list of
     * them is kept (8 bytes an item would bound the catalogs by memory:
     * 2^31 items at ~1.2e7 x 1.2e7): the kernel decodes an item's index. */
    size_t n_items = 0;
    for (size_t rt = 0; rt < n_rt; rt++) n_items += autocorr ? n_ct - (rt * rows) / TILE_COLS : n_ct;
    /* A chunk closes once it holds more than chunk_pairs less one item's
     * pairs, so few chunks. */
    const uint64_t item_max = (uint64_t)rows * TILE_COLS;
    uint64_t chunk_pairs = CHUNK_PAIRS_TILED > 2 * item_max ? CHUNK_PAIRS_TILED : 2 * item_max;
    if (chunk_pairs > (1ull << 40)) chunk_pairs = 1ull << 40; /* a launch's items counted in int */
    size_t max_chunks = (size_t)((double)n_items * (double)item_max / (double)(chunk_pairs - item_max)) + 2;
    size_t *chunk_first = (size_t *)malloc((max_chunks + 2) * sizeof(size_t));
    double *chunk_work = (double *)malloc((max_chunks + 1) * sizeof(double));
    if (!chunk_first || !chunk_work) {
        free(chunk_first);
        free(chunk_work);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    int n_chunks = 0;
    uint64_t in_chunk = 0;
    size_t q = 0;
    chunk_first[0] = 0;
    /* m items of `pairs` pairs each, one chunk after another */
    auto add_items = [&](uint64_t pairs, size_t m) {
        while (m > 0) {
            if (in_chunk > 0 && in_chunk + pairs > chunk_pairs) {
                chunk_work[n_chunks] = (double)in_chunk;
                chunk_first[++n_chunks] = q;
                in_chunk = 0;
            }
            size_t k = pairs ? (size_t)((chunk_pairs - in_chunk) / pairs) : m; /* >= 1 */
            if (k > m) k = m;
            q += k;
            in_chunk += k * pairs;
            m -= k;
        }
    };
    const size_t full_cols = vb->n / TILE_COLS; /* column tiles with no padding */
    for (size_t rt = 0; rt < n_rt; rt++) {
        size_t r0 = rt * rows, r1 = r0 + rows < va->n ? r0 + rows : va->n;
        size_t ct = autocorr ? r0 / TILE_COLS : 0;
        while (ct < n_ct) {
            size_t c0 = ct * TILE_COLS, c1 = c0 + TILE_COLS < vb->n ? c0 + TILE_COLS : vb->n;
            if (autocorr && c0 < r1) { /* pairs with j > i only */
                uint64_t pairs = 0;
                for (size_t i = r0; i < r1; i++) pairs += c1 > i + 1 ? c1 - (i + 1 > c0 ? i + 1 : c0) : 0;
                add_items(pairs, 1);
                ct++;
            } else if (ct < full_cols) { /* whole tiles, all alike */
                add_items((uint64_t)(r1 - r0) * TILE_COLS, full_cols - ct);
                ct = full_cols;
            } else {
                add_items((uint64_t)(r1 - r0) * (c1 - c0), 1);
                ct++;
            }
        }
    }
    chunk_work[n_chunks] = (double)in_chunk;
    chunk_first[++n_chunks] = q;
    size_t max_items = 1; /* of one launch */
    for (int k = 0; k < n_chunks; k++)
        if (chunk_first[k + 1] - chunk_first[k] > max_items) max_items = chunk_first[k + 1] - chunk_first[k];
    {
        int dev = ctx ? ctx->cuda_device : 0, n_sm = 0, per_sm = 0;
        TiledLayout lay = tiled_layout(spec->space, table->n_bounds, g.n_cells, spec->queue, spec->blocks);
        /* one buffer: the launches run in order on one stream, so a
         * launch's items are decoded only after the last launch ended */
        cudaError_t ce = pk_cuda_pool_malloc((void **)&d->items, max_items * sizeof(int2));
        if (ce == cudaSuccess) ce = pk_cuda_pool_malloc((void **)&d->counters, (size_t)n_chunks * sizeof(unsigned));
        if (ce == cudaSuccess) ce = cudaMemset(d->counters, 0, (size_t)n_chunks * sizeof(unsigned));
        if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev);
        if (ce == cudaSuccess)
            ce = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lay.bytes);
        if (ce == cudaSuccess) ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, TILE_THREADS, lay.bytes);
        if (ce != cudaSuccess) {
            st = pk_fail(ctx, PK_ERR_CUDA, "setting up the tiled kernel failed: %s", cudaGetErrorString(ce));
        } else if (per_sm < 1) {
            st =
                pk_fail(ctx, PK_ERR_UNSUPPORTED, "%zu bytes of shared memory per block do not fit this GPU", lay.bytes);
        } else {
            *blocks_per_sm = per_sm;
            g.slots = d->slots;
            g.n_fp64 = d->n_fp64;
            st = run_chunks(ctx, d, n_chunks, chunk_work, progress, [&](int k) -> pk_status {
                TiledArgs gk = g;
                if (chunk_first[k + 1] == chunk_first[k]) return PK_OK;
                gk.items = d->items;
                gk.n_items = (int)(chunk_first[k + 1] - chunk_first[k]); /* at most 2^34 pairs of tiles */
                gk.counter = d->counters + k;
                items_kernel<<<(unsigned)((gk.n_items + 255) / 256), 256>>>(d->items, chunk_first[k], gk.n_items,
                                                                            (int)n_ct, spec->rows, autocorr);
                int grid = n_sm * per_sm < gk.n_items ? n_sm * per_sm : gk.n_items;
                fn<<<grid, TILE_THREADS, lay.bytes>>>(gk, lay);
                return PK_OK;
            });
        }
    }
    free(chunk_first);
    free(chunk_work);
    return st;
}

extern "C" pk_status pk_angcorr_count_cuda(pk_context *ctx, int kernel, const pk_catalog *a, const pk_catalog *b,
                                           const pk_bins *bins, const pk_edge_table *table, uint64_t *slots,
                                           pk_pair_stats *stats, pk_progress *progress) {
    const KernelSpec *spec = spec_of(kernel);
    if (!spec) return pk_fail(ctx, PK_ERR_INVALID, "kernel %d is not a CUDA kernel", kernel);
    int autocorr = b == NULL;
    if (a->n > (size_t)INT32_MAX / 2 || (b && b->n > (size_t)INT32_MAX / 2))
        return pk_fail(ctx, PK_ERR_UNSUPPORTED, "the CUDA kernels take catalogs of at most %d objects", INT32_MAX / 2);
    /* The table kernels keep windows and histogram in shared memory. */
    if (spec->fn && spec->space != SPACE_APPROX && bins->n_bins > PK_GPU_TABLE_MAX_BINS)
        spec = spec_of(PK_ANGCORR_KERNEL_CUDA_NAIVE);
    spec = spec_for_table(spec, table);

    DeviceJob d;
    memset(&d, 0, sizeof d);
    pk_unit_vectors va, vb;
    memset(&va, 0, sizeof va);
    memset(&vb, 0, sizeof vb);
    pk_status st = PK_OK;
    float ms = 0;
    size_t n_slots = (size_t)table->n_slots;
    unsigned long long n_fp64 = 0;
    int blocks_per_sm = 0;
    PK_CUDA(ctx, cudaSetDevice(ctx ? ctx->cuda_device : 0));
    if ((st = pk_unit_vectors_curve(ctx, a, spec->sorted, &va)) != PK_OK) goto done;
    if (!autocorr && (st = pk_unit_vectors_curve(ctx, b, spec->sorted, &vb)) != PK_OK) goto done;
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&d.ev_start));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&d.ev_stop));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&d.ev_chunk[0]));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&d.ev_chunk[1]));
    if ((st = upload(ctx, (void **)&d.thr, table->dot_threshold, (size_t)table->n_bounds * sizeof(double))) != PK_OK)
        goto done;
    /* one spare slot past n_slots: the tiled kernels' masked-out pairs */
    PK_CUDA_GOTO(ctx, st, done, pk_cuda_pool_malloc((void **)&d.slots, (n_slots + 1) * sizeof(unsigned long long)));
    PK_CUDA_GOTO(ctx, st, done, cudaMemset(d.slots, 0, (n_slots + 1) * sizeof(unsigned long long)));
    PK_CUDA_GOTO(ctx, st, done, pk_cuda_pool_malloc((void **)&d.n_fp64, sizeof(unsigned long long)));
    PK_CUDA_GOTO(ctx, st, done, cudaMemset(d.n_fp64, 0, sizeof(unsigned long long)));
    if (!spec->fn) {
        if (autocorr) {
            st = count_naive(ctx, &d, &va, &va, table, progress);
        } else {
            st = count_naive(ctx, &d, &va, &vb, table, progress);
        }
    } else {
        st = count_tiled(ctx, &d, spec, a, b, &va, autocorr ? &va : &vb, bins, table, &blocks_per_sm, progress);
    }
    if (st) goto done;
    PK_CUDA_GOTO(ctx, st, done, cudaEventElapsedTime(&ms, d.ev_start, d.ev_stop));
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(slots, d.slots, n_slots * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(&n_fp64, d.n_fp64, sizeof n_fp64, cudaMemcpyDeviceToHost));
    stats->kernel_ms = ms;
    stats->blocks_per_sm = blocks_per_sm;
    if (!spec->fn) {
        stats->pairs_visited = (uint64_t)a->n * (uint64_t)(b ? b->n : a->n);
        stats->pairs_fp64 = stats->pairs_visited;
    } else {
        tiled_slots_finish(slots, n_slots, table, &va, autocorr ? 0 : b->n, n_fp64, stats);
    }
done:
    release(&d, st != PK_OK);
    pk_unit_vectors_free(&va);
    pk_unit_vectors_free(&vb);
    return st;
}

extern "C" const int pk_angcorr_cuda_best_kernel = PK_ANGCORR_KERNEL_CUDA_DOT_HI_QUEUE_CELLS8_HILBERT_FIT4_DIRECT;

/* ---- many counts at once (jackknife patch pairs) -------------------------- */

/* The catalogs' patches laid out once on the device, each padded with
 * zeros to whole row tiles (a multiple of the column tiles too), so that a
 * pair's count reads its two patches in place. */
struct PatchLayout {
    size_t *off; /* [n + 1] first padded row of each patch; off[n] = total */
    pk_unit_vectors *v;
    int n;
};

static void patch_layout_free(PatchLayout *l) {
    for (int p = 0; l->v && p < l->n; p++) pk_unit_vectors_free(&l->v[p]);
    free(l->v);
    free(l->off);
    memset(l, 0, sizeof *l);
}

static pk_status patch_layout_make(pk_context *ctx, const KernelSpec *spec, const pk_catalog *const *cats, int n,
                                   PatchLayout *l) {
    const size_t rows = (size_t)spec->rows * TILE_THREADS;
    l->n = n;
    l->off = (size_t *)calloc((size_t)n + 1, sizeof(size_t));
    l->v = (pk_unit_vectors *)calloc((size_t)n, sizeof(pk_unit_vectors));
    if (!l->off || !l->v) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (int p = 0; p < n; p++) {
        pk_status st = pk_unit_vectors_curve(ctx, cats[p], spec->sorted, &l->v[p]);
        if (st) return st;
        l->off[p + 1] = l->off[p] + (cats[p]->n + rows - 1) / rows * rows;
    }
    return PK_OK;
}

/* The float points and the double vectors of every patch, one copy each. */
static pk_status patch_upload(pk_context *ctx, const PatchLayout *l, float4 **pts, double **v64) {
    size_t total = l->off[l->n];
    float4 *hp = (float4 *)calloc(total ? total : 1, sizeof(float4));
    double *hv = (double *)calloc(3 * (total ? total : 1), sizeof(double));
    pk_status st = PK_OK;
    if (!hp || !hv) st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %zu objects' vectors", total);
    for (int p = 0; st == PK_OK && p < l->n; p++) {
        const pk_unit_vectors *v = &l->v[p];
        for (size_t i = 0; i < v->n; i++) {
            size_t r = l->off[p] + i;
            hp[r] = make_float4((float)v->x[i], (float)v->y[i], (float)v->z[i], 0.0f);
            hv[r] = v->x[i], hv[total + r] = v->y[i], hv[2 * total + r] = v->z[i];
        }
    }
    if (st == PK_OK) st = upload(ctx, (void **)pts, hp, total * sizeof(float4));
    if (st == PK_OK) st = upload(ctx, (void **)v64, hv, 3 * total * sizeof(double));
    free(hp);
    free(hv);
    return st;
}

#define N_PAIR_STREAMS 4

/* The patches of a (and b) on the device, the tables set up and the
 * streams made once; then counts of any pairs of them, batch after batch:
 * set 0 is a's patches (d.pa, d.a64), set 1 b's (d.pb, d.b64). */
struct pk_cuda_pairs {
    const KernelSpec *spec;
    const pk_catalog *const *a, *const *b; /* b: NULL without set 1 */
    int n_a, n_b, two, dev, n_sm, per_sm, per_sm9;
    size_t rows, n_slots, batch_cap; /* batch_cap: pairs whose slots fit 64 MiB */
    const pk_edge_table *table;
    cudaStream_t streams[N_PAIR_STREAMS];
    int2 *items[N_PAIR_STREAMS]; /* each stream's items of its latest launch */
    size_t items_cap;            /* items each of those holds */
    size_t slots_cap;            /* pairs the device slots, counters and host copies hold */
    DeviceJob d, d9;             /* d9: the 9-bit table of kernels of 8-bit cells */
    pk_gpu_table gt8;
    PatchLayout la, lb;
    TiledArgs g, g9;
    tiled_fn fn, fn9;
    TiledLayout lay, lay9;
    unsigned long long *n_fp64; /* host copies, [slots_cap] */
    uint64_t *all;              /* a batch's slots read back */
};

extern "C" void pk_angcorr_cuda_pairs_close(pk_cuda_pairs *s, int failed) {
    if (!s) return;
    release(&s->d, failed);
    release(&s->d9, failed);
    for (int u = 0; u < N_PAIR_STREAMS; u++) {
        pk_cuda_pool_free(s->items[u]);
        if (s->streams[u]) cudaStreamDestroy(s->streams[u]);
    }
    pk_gpu_table_free(&s->gt8);
    patch_layout_free(&s->la);
    patch_layout_free(&s->lb);
    free(s->all);
    free(s->n_fp64);
    free(s);
}

extern "C" pk_status pk_angcorr_cuda_pairs_open(pk_context *ctx, int kernel, const pk_catalog *const *a, int n_a,
                                                const pk_catalog *const *b, int n_b, const pk_bins *bins,
                                                const pk_edge_table *table, pk_cuda_pairs **out) {
    *out = NULL;
    const KernelSpec *spec = spec_of(kernel);
    if (!spec) return pk_fail(ctx, PK_ERR_INVALID, "kernel %d is not a CUDA kernel", kernel);
    spec = spec_for_table(spec, table);
    /* the naive and approximate kernels, many bins: one count at a time */
    if (!spec->fn || spec->space == SPACE_APPROX || bins->n_bins > PK_GPU_TABLE_MAX_BINS) return PK_ERR_UNSUPPORTED;
    const int same = b == NULL; /* one set of patches */
    if (same) n_b = 0;
    for (int p = 0; p < n_a; p++)
        if (a[p]->n > (size_t)INT32_MAX / 2) return PK_ERR_UNSUPPORTED;
    for (int q = 0; q < n_b; q++)
        if (b[q]->n > (size_t)INT32_MAX / 2) return PK_ERR_UNSUPPORTED;
    pk_cuda_pairs *s = (pk_cuda_pairs *)calloc(1, sizeof *s);
    if (!s) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    pk_status st = PK_OK;
    s->spec = spec, s->a = a, s->b = b, s->n_a = n_a, s->n_b = n_b, s->table = table;
    s->dev = ctx ? ctx->cuda_device : 0;
    s->rows = (size_t)spec->rows * TILE_THREADS;
    s->n_slots = (size_t)table->n_slots;
    s->g.n_bounds = table->n_bounds;
    s->two = spec->cell_bits == 8;
    /* the pairs in batches whose slots take at most 64 MiB on the device */
    s->batch_cap = ((size_t)64 << 20) / ((s->n_slots + 1) * sizeof(unsigned long long));
    if (s->batch_cap < 1) s->batch_cap = 1;
    PK_CUDA_GOTO(ctx, st, done, cudaSetDevice(s->dev));
    if ((st = patch_layout_make(ctx, spec, a, n_a, &s->la)) != PK_OK) goto done;
    if (!same && (st = patch_layout_make(ctx, spec, b, n_b, &s->lb)) != PK_OK) goto done;
    if ((st = patch_upload(ctx, &s->la, &s->d.pa, &s->d.a64)) != PK_OK) goto done;
    if (!same && (st = patch_upload(ctx, &s->lb, &s->d.pb, &s->d.b64)) != PK_OK) goto done;
    if ((st = upload(ctx, (void **)&s->d.thr, table->dot_threshold, (size_t)table->n_bounds * sizeof(double))) != PK_OK)
        goto done;
    /* kernels of 8-bit cells: both tables on the device, and each pair
     * judged as a count of its own would be (cells8_serve) */
    if ((st = setup_table(ctx, &s->d, spec, NULL, NULL, s->two ? 8 : 0, bins, table, &s->g, &s->fn)) != PK_OK)
        goto done;
    s->g9 = s->g;
    s->fn9 = s->fn;
    if (s->two) {
        if ((st = setup_table(ctx, &s->d9, spec, NULL, NULL, 9, bins, table, &s->g9, &s->fn9)) != PK_OK) goto done;
        s->g9.thr = s->d.thr;
        int dot = spec->space == SPACE_DOT || spec->space == SPACE_DOT_PACKED || spec->space == SPACE_DOT_HI;
        if ((st = pk_gpu_table_get(ctx, table, dot ? PK_GPU_SPACE_DOT : PK_GPU_SPACE_CHORD, spec->clamped, 8,
                                   &s->gt8)) != PK_OK)
            goto done;
    }
    s->lay = tiled_layout(spec->space, table->n_bounds, s->g.n_cells, spec->queue, spec->blocks);
    s->lay9 = tiled_layout(spec->space, table->n_bounds, s->g9.n_cells, spec->queue, spec->blocks);
    for (int u = 0; u < N_PAIR_STREAMS; u++) PK_CUDA_GOTO(ctx, st, done, cudaStreamCreate(&s->streams[u]));
    PK_CUDA_GOTO(ctx, st, done, cudaDeviceGetAttribute(&s->n_sm, cudaDevAttrMultiProcessorCount, s->dev));
    PK_CUDA_GOTO(ctx, st, done,
                 cudaFuncSetAttribute(s->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s->lay.bytes));
    PK_CUDA_GOTO(ctx, st, done,
                 cudaOccupancyMaxActiveBlocksPerMultiprocessor(&s->per_sm, s->fn, TILE_THREADS, s->lay.bytes));
    PK_CUDA_GOTO(ctx, st, done,
                 cudaFuncSetAttribute(s->fn9, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s->lay9.bytes));
    PK_CUDA_GOTO(ctx, st, done,
                 cudaOccupancyMaxActiveBlocksPerMultiprocessor(&s->per_sm9, s->fn9, TILE_THREADS, s->lay9.bytes));
    if (s->per_sm < 1 || s->per_sm9 < 1) {
        st = pk_fail(ctx, PK_ERR_UNSUPPORTED, "%zu bytes of shared memory per block do not fit this GPU", s->lay.bytes);
        goto done;
    }
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&s->d.ev_start));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&s->d.ev_stop));
done:
    if (st != PK_OK) {
        pk_angcorr_cuda_pairs_close(s, 1);
        return st;
    }
    *out = s;
    return PK_OK;
}

extern "C" int pk_angcorr_cuda_pairs_judge(const pk_cuda_pairs *s, int set_a, int set_b, int p, int q) {
    if (!s->two) return 1;
    const PatchLayout *la = set_a ? &s->lb : &s->la, *lbb = set_b ? &s->lb : &s->la;
    return cells8_serve_pair(&s->gt8, &la->v[p], &lbb->v[q]);
}

extern "C" pk_status pk_angcorr_cuda_pairs_count(pk_context *ctx, pk_cuda_pairs *s, int set_a, int set_b,
                                                 const int32_t *pair_p, const int32_t *pair_q, size_t n_pairs,
                                                 const unsigned char *use8_of, uint64_t *slots, pk_pair_stats *stats,
                                                 pk_progress *progress) {
    if (n_pairs == 0) return PK_OK;
    if (set_a < 0 || set_a > 1 || set_b < 0 || set_b > 1 || ((set_a || set_b) && !s->b))
        return pk_fail(ctx, PK_ERR_INVALID, "patch set %d x %d does not exist", set_a, set_b);
    const pk_catalog *const *a = set_a ? s->b : s->a, *const *b = set_b ? s->b : s->a;
    const int n_a = set_a ? s->n_b : s->n_a, n_b = set_b ? s->n_b : s->n_a;
    const int same = set_a == set_b, two = s->two;
    const size_t rows = s->rows, n_slots = s->n_slots;
    const PatchLayout *la = set_a ? &s->lb : &s->la, *lbb = set_b ? &s->lb : &s->la;
    DeviceJob *d = &s->d;
    const float4 *pa = set_a ? d->pb : d->pa, *pb = set_b ? d->pb : d->pa;
    const double *a64 = set_a ? d->b64 : d->a64, *b64 = set_b ? d->b64 : d->a64;
    pk_status st = PK_OK;
    size_t *items_of = (size_t *)calloc(n_pairs, sizeof(size_t));
    size_t max_items = 1;
    if (!items_of) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    PK_CUDA_GOTO(ctx, st, done, cudaSetDevice(s->dev));
    /* each pair's items; a pair too large for one launch: one count at a
     * time, before anything is queued */
    for (size_t k = 0; k < n_pairs; k++) {
        if (pair_p[k] < 0 || pair_p[k] >= n_a || pair_q[k] < 0 || pair_q[k] >= n_b) {
            st = pk_fail(ctx, PK_ERR_INVALID, "patch pair %d, %d does not exist", pair_p[k], pair_q[k]);
            goto done;
        }
        size_t na = a[pair_p[k]]->n, nb = b[pair_q[k]]->n;
        int autocorr = same && pair_p[k] == pair_q[k];
        size_t n_rt = (na + rows - 1) / rows, n_ct = (nb + TILE_COLS - 1) / TILE_COLS, m = 0;
        for (size_t rt = 0; rt < n_rt; rt++) m += autocorr ? n_ct - (rt * rows) / TILE_COLS : n_ct;
        if (m > (size_t)INT32_MAX || (double)m * (double)rows * TILE_COLS > (double)CHUNK_PAIRS_TILED) {
            st = PK_ERR_UNSUPPORTED;
            goto done;
        }
        items_of[k] = m;
        if (m > max_items) max_items = m;
    }
    /* the buffers grown to this call's needs (every earlier call has
     * ended: nothing queued reads them) */
    if (max_items > s->items_cap) {
        for (int u = 0; u < N_PAIR_STREAMS; u++) {
            pk_cuda_pool_free(s->items[u]);
            s->items[u] = NULL;
        }
        s->items_cap = 0;
        for (int u = 0; u < N_PAIR_STREAMS; u++)
            PK_CUDA_GOTO(ctx, st, done, pk_cuda_pool_malloc((void **)&s->items[u], max_items * sizeof(int2)));
        s->items_cap = max_items;
    }
    {
        size_t want = n_pairs < s->batch_cap ? n_pairs : s->batch_cap;
        if (want > s->slots_cap) {
            pk_cuda_pool_free(d->counters), pk_cuda_pool_free(d->slots), pk_cuda_pool_free(d->n_fp64);
            d->counters = NULL, d->slots = NULL, d->n_fp64 = NULL;
            free(s->all), free(s->n_fp64);
            s->slots_cap = 0;
            s->all = (uint64_t *)malloc(want * (n_slots + 1) * sizeof(uint64_t));
            s->n_fp64 = (unsigned long long *)malloc(want * sizeof(unsigned long long));
            if (!s->all || !s->n_fp64) {
                st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
                goto done;
            }
            PK_CUDA_GOTO(ctx, st, done, pk_cuda_pool_malloc((void **)&d->counters, want * sizeof(unsigned)));
            PK_CUDA_GOTO(ctx, st, done,
                         pk_cuda_pool_malloc((void **)&d->slots, want * (n_slots + 1) * sizeof(unsigned long long)));
            PK_CUDA_GOTO(ctx, st, done, pk_cuda_pool_malloc((void **)&d->n_fp64, want * sizeof(unsigned long long)));
            s->slots_cap = want;
        }
    }
    for (size_t k0 = 0; k0 < n_pairs; k0 += s->slots_cap) {
        const size_t nk = n_pairs - k0 < s->slots_cap ? n_pairs - k0 : s->slots_cap;
        PK_CUDA_GOTO(ctx, st, done, cudaMemset(d->counters, 0, nk * sizeof(unsigned)));
        PK_CUDA_GOTO(ctx, st, done, cudaMemset(d->slots, 0, nk * (n_slots + 1) * sizeof(unsigned long long)));
        PK_CUDA_GOTO(ctx, st, done, cudaMemset(d->n_fp64, 0, nk * sizeof(unsigned long long)));
        PK_CUDA_GOTO(ctx, st, done, cudaEventRecord(d->ev_start));
        /* every pair's two launches queued in turn (one items buffer a
         * stream: a launch's items are decoded only after the launch
         * before ended); a wait every 2^34 pairs or 4096 counts for
         * progress and Ctrl-C */
        double queued = 0;
        size_t since_wait = 0;
        for (size_t k = k0; k < k0 + nk; k++) {
            const int p = pair_p[k], q = pair_q[k], autocorr = same && p == q;
            const size_t na = a[p]->n, nb = b[q]->n;
            if (items_of[k] > 0) {
                const int use8 = two && (use8_of ? use8_of[k] != 0 : cells8_serve_pair(&s->gt8, &la->v[p], &lbb->v[q]));
                TiledArgs gk = use8 || !two ? s->g : s->g9;
                gk.n_a = (int)na;
                gk.n_b = (int)nb;
                gk.autocorr = autocorr;
                gk.pa = pa + la->off[p];
                gk.pb = pb + lbb->off[q];
                gk.a64.v = a64 + la->off[p];
                gk.a64.stride = la->off[la->n];
                gk.b64.v = b64 + lbb->off[q];
                gk.b64.stride = lbb->off[lbb->n];
                gk.slots = d->slots + (k - k0) * (n_slots + 1);
                gk.n_fp64 = d->n_fp64 + (k - k0);
                gk.counter = d->counters + (k - k0);
                const int u = (int)(k % N_PAIR_STREAMS);
                gk.items = s->items[u];
                gk.n_items = (int)items_of[k];
                const size_t n_ct = (nb + TILE_COLS - 1) / TILE_COLS;
                items_kernel<<<(unsigned)((gk.n_items + 255) / 256), 256, 0, s->streams[u]>>>(
                    s->items[u], 0, gk.n_items, (int)n_ct, s->spec->rows, autocorr);
                const int resident = s->n_sm * (use8 || !two ? s->per_sm : s->per_sm9);
                int grid = resident < gk.n_items ? resident : gk.n_items;
                if (use8 || !two) s->fn<<<grid, TILE_THREADS, s->lay.bytes, s->streams[u]>>>(gk, s->lay);
                else s->fn9<<<grid, TILE_THREADS, s->lay9.bytes, s->streams[u]>>>(gk, s->lay9);
                PK_CUDA_GOTO(ctx, st, done, cudaGetLastError());
            }
            queued += autocorr ? 0.5 * (double)na * (double)na : (double)na * (double)nb;
            if (++since_wait >= 4096 || queued >= (double)CHUNK_PAIRS_TILED || k + 1 == k0 + nk) {
                PK_CUDA_GOTO(ctx, st, done, cudaDeviceSynchronize());
                if (progress && pk_progress_add(progress, queued, 1)) {
                    st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
                    goto done;
                }
                queued = 0;
                since_wait = 0;
            }
        }
        PK_CUDA_GOTO(ctx, st, done, cudaEventRecord(d->ev_stop));
        PK_CUDA_GOTO(ctx, st, done, cudaEventSynchronize(d->ev_stop));
        float batch_ms = 0;
        PK_CUDA_GOTO(ctx, st, done, cudaEventElapsedTime(&batch_ms, d->ev_start, d->ev_stop));
        PK_CUDA_GOTO(ctx, st, done,
                     cudaMemcpy(s->all, d->slots, nk * (n_slots + 1) * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        PK_CUDA_GOTO(ctx, st, done,
                     cudaMemcpy(s->n_fp64, d->n_fp64, nk * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        /* each pair's slots as pk_angcorr_count_cuda leaves them */
        for (size_t k = k0; k < k0 + nk; k++) {
            const int p = pair_p[k], q = pair_q[k], autocorr = same && p == q;
            const size_t nb = b[q]->n;
            uint64_t *out = slots + k * n_slots;
            memcpy(out, s->all + (k - k0) * (n_slots + 1), n_slots * sizeof(uint64_t));
            pk_pair_stats *ps = &stats[k];
            memset(ps, 0, sizeof *ps);
            ps->kernel_ms = batch_ms / (double)nk;
            ps->blocks_per_sm = s->per_sm;
            tiled_slots_finish(out, n_slots, s->table, &la->v[p], autocorr ? 0 : nb, s->n_fp64[k - k0], ps);
        }
    }
done:
    /* a count stopped early may leave work queued on the buffers */
    if (st != PK_OK && st != PK_ERR_UNSUPPORTED) cudaDeviceSynchronize();
    free(items_of);
    return st;
}

extern "C" pk_status pk_angcorr_count_cuda_pairs(pk_context *ctx, int kernel, const pk_catalog *const *a, int n_a,
                                                 const pk_catalog *const *b, int n_b, const int32_t *pair_p,
                                                 const int32_t *pair_q, size_t n_pairs, const pk_bins *bins,
                                                 const pk_edge_table *table, uint64_t *slots, pk_pair_stats *stats,
                                                 pk_progress *progress) {
    if (n_pairs == 0) return PK_ERR_UNSUPPORTED;
    pk_cuda_pairs *s = NULL;
    pk_status st = pk_angcorr_cuda_pairs_open(ctx, kernel, a, n_a, b, n_b, bins, table, &s);
    if (st == PK_OK)
        st = pk_angcorr_cuda_pairs_count(ctx, s, 0, b ? 1 : 0, pair_p, pair_q, n_pairs, NULL, slots, stats, progress);
    pk_angcorr_cuda_pairs_close(s, st != PK_OK);
    return st;
}
