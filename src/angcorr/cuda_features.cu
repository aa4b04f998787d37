/* cuda_features.cu - the CUDA side of the small-scale and weighted counts:
 * the visit plan of grid.h (cells on the sphere, far cell pairs skipped)
 * and per-object weights and mean separations, on the device.
 *
 * Slots are decided exactly as on the CPU: float32 chord squared from float
 * unit vectors, the host edge table's cells and windows (angcorr_internal.h),
 * and pairs inside a window settled with the reference float64 dot product,
 * evaluated with __dmul_rn/__dadd_rn so that no fma contraction changes it.
 * Skipped pairs are counted into the top slot on the host.
 *
 * Work items are a unit of the plan (at most 256 rows) against one range of
 * cells; persistent blocks (as many as fit the device) load the tables into
 * shared memory once and take items grid-stride, the rows of an item
 * sharing the 256 threads (each row's columns split among 256 / rows
 * threads). Counts go to shared u32 slots,
 * weights and weighted separations to shared float64 sums (atomicAdd), all
 * flushed once per block. The float64 sums therefore depend on the order in
 * which blocks and threads add: they agree with the reference to float64
 * rounding (tests/test_angcorr_features.c bounds the difference), not bit
 * for bit; the integer counts are exact.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "angcorr_internal.h"
#include "grid.h"
}
#include "../common/cuda_check.cuh"
#include "cuda_exact.cuh"

#define FEATURE_THREADS 256
#define FEATURE_ITEM_COLS \
    (1u << 16) /* 256 rows x 2^16 columns: 2^24 pairs at most an item, and items enough for every SM */

struct FeatureArgs {
    const float4 *pa, *pb;   /* float unit vectors, sorted */
    const double *a64, *b64; /* x[n], y[n], z[n] at strides na, nb */
    size_t na, nb;
    const double *wa, *wb; /* sorted weights or NULL */
    const double *thr;     /* dot thresholds [n_bounds] */
    int n_bounds, n_slots, n_bins;
    const int *cell_slot;       /* [n_cells] */
    const float *c2_lo, *c2_hi; /* [n_bounds + 1] */
    int n_cells, cell_shift, cell_base;
    const uint4 *items; /* i0, i1, j0, j1 */
    int n_items;
    int autocorr, weighted, mean_theta;
    unsigned long long *slots, *n_fp64;
    double *wslots, *tslots;
};

__global__ void __launch_bounds__(FEATURE_THREADS) features_kernel(FeatureArgs g) {
    extern __shared__ __align__(16) unsigned char smem[];
    double *s_w = (double *)smem;
    double *s_t = s_w + g.n_slots;
    unsigned *s_cnt = (unsigned *)(s_t + g.n_slots);
    int *s_cells = (int *)(s_cnt + g.n_slots);
    float *s_lo = (float *)(s_cells + g.n_cells);
    float *s_hi = s_lo + g.n_bounds + 1;
    __shared__ unsigned s_fp64;
    for (int s = threadIdx.x; s < g.n_slots; s += FEATURE_THREADS) {
        s_w[s] = 0;
        s_t[s] = 0;
        s_cnt[s] = 0;
    }
    for (int c = threadIdx.x; c < g.n_cells; c += FEATURE_THREADS) s_cells[c] = g.cell_slot[c];
    for (int s = threadIdx.x; s <= g.n_bounds; s += FEATURE_THREADS) {
        s_lo[s] = g.c2_lo[s];
        s_hi[s] = g.c2_hi[s];
    }
    if (threadIdx.x == 0) s_fp64 = 0;
    __syncthreads();

    /* Persistent blocks: the tables are loaded once per block, then the
     * block takes items grid-stride. An item's rows share the threads: tpr
     * threads per row, each walking every tpr-th column. */
    unsigned fp64 = 0;
    for (int item = blockIdx.x; item < g.n_items; item += gridDim.x) {
        uint4 it = g.items[item];
        unsigned n_rows = it.y - it.x;
        unsigned tpr = FEATURE_THREADS / n_rows;
        if (tpr < 1) tpr = 1;
        unsigned r = threadIdx.x / tpr, c = threadIdx.x % tpr;
        if (r >= n_rows) continue;
        size_t i = it.x + r;
        float4 p = g.pa[i];
        double wi = g.wa ? g.wa[i] : 1.0;
        for (size_t j = it.z + c; j < it.w; j += tpr) {
            if (g.autocorr && j <= i) continue;
            float4 q = g.pb[j];
            float dx = p.x - q.x, dy = p.y - q.y, dz = p.z - q.z;
            float c2 = fmaf(dz, dz, fmaf(dy, dy, dx * dx));
            int cell = (int)(__float_as_uint(c2) >> g.cell_shift) - g.cell_base;
            cell = min(max(cell, 0), g.n_cells - 1);
            int e = s_cells[cell];
            int s;
            if (!(e & PK_CELL_MULTI)) {
                s = e;
                if (c2 >= s_hi[s]) s++;
                else if (c2 >= s_lo[s]) s = -1;
            } else {
                int lo = 0, hi = g.n_bounds; /* #{s : c2_hi[s] <= c2} */
                while (lo < hi) {
                    int mid = (lo + hi) >> 1;
                    if (s_hi[mid] <= c2) lo = mid + 1;
                    else hi = mid;
                }
                s = c2 >= s_lo[lo] ? -1 : lo;
            }
            double dot = 0;
            bool have_dot = false;
            if (s < 0) {
                dot = pk_dot_rn(g.a64[i], g.a64[g.na + i], g.a64[2 * g.na + i], g.b64[j], g.b64[g.nb + j],
                                g.b64[2 * g.nb + j]);
                have_dot = true;
                s = pk_slot_of_dot(g.thr, g.n_bounds, dot);
                fp64++;
            }
            atomicAdd(&s_cnt[s], 1u);
            if (g.weighted) {
                double w = wi * (g.wb ? g.wb[j] : 1.0);
                atomicAdd(&s_w[s], w);
                if (g.mean_theta && s >= 1 && s <= g.n_bins) {
                    if (!have_dot)
                        dot = pk_dot_rn(g.a64[i], g.a64[g.na + i], g.a64[2 * g.na + i], g.b64[j], g.b64[g.nb + j],
                                        g.b64[2 * g.nb + j]);
                    dot = fmin(fmax(dot, -1.0), 1.0);
                    atomicAdd(&s_t[s], w * acos(dot));
                }
            }
        }
    }
    if (fp64) atomicAdd(&s_fp64, fp64);
    __syncthreads();
    for (int s = threadIdx.x; s < g.n_slots; s += FEATURE_THREADS) {
        if (s_cnt[s]) atomicAdd(&g.slots[s], (unsigned long long)s_cnt[s]);
        if (g.weighted) {
            if (s_w[s] != 0) atomicAdd(&g.wslots[s], s_w[s]);
            if (g.mean_theta && s_t[s] != 0) atomicAdd(&g.tslots[s], s_t[s]);
        }
    }
    if (threadIdx.x == 0 && s_fp64) atomicAdd(g.n_fp64, (unsigned long long)s_fp64);
}

/* ---- host ------------------------------------------------------------------ */

struct FeatureDevice {
    void *arena; /* every buffer below, in one allocation */
    float4 *pa, *pb;
    double *a64, *b64, *wa, *wb, *thr, *wslots, *tslots;
    int *cells;
    float *lo, *hi;
    uint4 *items;
    unsigned long long *slots, *n_fp64;
};

/* failed: as release() in cuda.cu, queued work waited for first. */
static void release(FeatureDevice *d, int failed) {
    if (failed) cudaDeviceSynchronize();
    pk_cuda_pool_free(d->arena);
    memset(d, 0, sizeof *d);
}

/* A count's buffers laid out in one arena: the inputs first (copied up in
 * one transfer), then the outputs (zeroed, and copied back, in one each):
 * a count of a small jackknife patch pair costs a few calls instead of a
 * few dozen. */
struct FeatureLayout {
    size_t pa, pb, a64, b64, wa, wb, thr, cells, lo, hi, items, in_bytes; /* inputs */
    size_t slots, n_fp64, wslots, tslots, bytes;                          /* outputs, from in_bytes */
};

static size_t arena_take(size_t *at, size_t bytes) {
    size_t here = *at;
    *at += (bytes + 255) / 256 * 256;
    return here;
}

/* The grid's float and float64 vectors and weights into the host staging. */
static void stage_grid(const pk_grid *g, unsigned char *host, size_t p_at, size_t v_at, size_t w_at) {
    size_t n = g->n;
    float4 *p = (float4 *)(host + p_at);
    double *v = (double *)(host + v_at);
    for (size_t i = 0; i < n; i++) {
        p[i] = make_float4(g->fx[i], g->fy[i], g->fz[i], 0.0f);
        v[i] = g->v.x[i];
        v[n + i] = g->v.y[i];
        v[2 * n + i] = g->v.z[i];
    }
    if (g->w) memcpy(host + w_at, g->w, n * sizeof(double));
}

extern "C" pk_status pk_angcorr_count_cuda_features(pk_context *ctx, int kernel, const pk_catalog *a, const double *wa,
                                                    const pk_catalog *b, const double *wb, const pk_bins *bins,
                                                    const pk_edge_table *table, int prune, int mean_theta,
                                                    uint64_t *slots, double *wslots, double *tslots,
                                                    pk_pair_stats *stats, pk_progress *progress) {
    (void)kernel;
    int autocorr = b == NULL;
    int weighted = wslots != NULL;
    if (!mean_theta || !weighted) tslots = NULL;
    size_t n_slots = (size_t)table->n_slots;
    double theta_max = bins->edges[bins->n_bins];
    double chord2 = prune == PK_PRUNE_OFF ? 0.0 : pk_grid_prune_chord2(table);
    if (prune == PK_PRUNE_AUTO && theta_max >= M_PI / 3) chord2 = 0;
    if (prune == PK_PRUNE_AUTO && chord2 <= 0 && !weighted) return PK_ERR_UNSUPPORTED;
    size_t smem = n_slots * (2 * sizeof(double) + sizeof(unsigned)) + (size_t)table->n_cells * sizeof(int) +
                  2 * ((size_t)table->n_bounds + 1) * sizeof(float) + 64;
    if (smem > 200 * 1024) {
        if (!weighted) return PK_ERR_UNSUPPORTED;
        return pk_fail(ctx, PK_ERR_UNSUPPORTED,
                       "weighted CUDA counts take at most about 4000 bins here (%zu needed "
                       "%zu bytes of shared memory)",
                       bins->n_bins, smem);
    }

    pk_grid ga, gb;
    memset(&ga, 0, sizeof ga);
    memset(&gb, 0, sizeof gb);
    pk_status st;
    if (chord2 > 0) {
        st = pk_grid_build_pair(ctx, a, wa, b, wb, theta_max, &ga, autocorr ? NULL : &gb);
    } else {
        st = pk_grid_build(ctx, a, wa, 0, &ga);
        if (st == PK_OK && !autocorr && (st = pk_grid_build(ctx, b, wb, 0, &gb)) != PK_OK) pk_grid_free(&ga);
    }
    if (st) return st;
    const pk_grid *gbp = autocorr ? &ga : &gb;
    pk_grid_plan plan;
    memset(&plan, 0, sizeof plan);
    if ((st = pk_grid_plan_build(ctx, &ga, autocorr ? NULL : &gb, theta_max, chord2, &plan)) != PK_OK) {
        pk_grid_free(&ga);
        pk_grid_free(&gb);
        return st;
    }
    if (prune == PK_PRUNE_AUTO && !weighted && (double)plan.pairs_visited > 0.67 * (double)plan.pairs_all) {
        pk_grid_plan_free(&plan);
        pk_grid_free(&ga);
        pk_grid_free(&gb);
        return PK_ERR_UNSUPPORTED;
    }

    FeatureDevice d;
    memset(&d, 0, sizeof d);
    FeatureArgs g;
    memset(&g, 0, sizeof g);
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    float ms = 0;
    unsigned long long n_fp64 = 0;
    size_t n_items = 0, n_blocks = 1;
    uint4 *items = NULL;
    uint32_t item_cols = FEATURE_ITEM_COLS, item_rows = 256;
    unsigned char *host_io = NULL; /* the inputs staged for the device, then the outputs read back */
    size_t out_at = 0, out_bytes = 0, out_offs[4] = {0, 0, 0, 0};
    PK_CUDA_GOTO(ctx, st, done, cudaSetDevice(ctx ? ctx->cuda_device : 0));
    PK_CUDA_GOTO(ctx, st, done,
                 cudaFuncSetAttribute(features_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    {
        int dev = ctx ? ctx->cuda_device : 0, n_sm = 0, per_sm = 0;
        PK_CUDA_GOTO(ctx, st, done, cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
        PK_CUDA_GOTO(ctx, st, done,
                     cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, features_kernel, FEATURE_THREADS, smem));
        if (per_sm < 1) per_sm = 1;
        n_blocks = (size_t)n_sm * (size_t)per_sm;
    }
    {
        /* an item: some of a unit's rows (at most 256) against a column
         * range of at most FEATURE_ITEM_COLS, so that it holds at most 2^24
         * pairs; the ranges cut in halves (down to 64 columns), then the
         * rows (down to 32), while an item would still hold an eighth of a
         * block's share of the pairs or more (four to eight items a block,
         * as cut), so that a small count (a jackknife patch pair of a few
         * thousand objects) still fills the device */
        double pairs = 0;
        for (size_t u = 0; u < plan.n_units; u++) {
            double cols = 0;
            for (size_t r = plan.units[u].r0; r < plan.units[u].r1; r++)
                cols += gbp->cell_start[plan.ranges[2 * r + 1]] - gbp->cell_start[plan.ranges[2 * r]];
            pairs += (double)(plan.units[u].i1 - plan.units[u].i0) * cols;
        }
        double want = pairs / (8.0 * (double)n_blocks);
        while (item_cols > 64 && 256.0 * item_cols / 2 >= want) item_cols /= 2;
        while (item_rows > 32 && (double)item_rows * item_cols / 2 >= want) item_rows /= 2;
    }
    for (size_t u = 0; u < plan.n_units; u++) {
        uint32_t row_chunks = (plan.units[u].i1 - plan.units[u].i0 + item_rows - 1) / item_rows;
        for (size_t r = plan.units[u].r0; r < plan.units[u].r1; r++) {
            uint32_t j0 = gbp->cell_start[plan.ranges[2 * r]], j1 = gbp->cell_start[plan.ranges[2 * r + 1]];
            n_items += (size_t)row_chunks * (j1 > j0 ? (j1 - j0 + item_cols - 1) / item_cols : 1);
        }
    }
    items = (uint4 *)malloc((n_items ? n_items : 1) * sizeof(uint4));
    if (!items) {
        st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        goto done;
    }
    n_items = 0;
    for (size_t u = 0; u < plan.n_units; u++)
        for (uint32_t a0 = plan.units[u].i0; a0 < plan.units[u].i1; a0 += item_rows) {
            uint32_t a1 = plan.units[u].i1 - a0 > item_rows ? a0 + item_rows : plan.units[u].i1;
            for (size_t r = plan.units[u].r0; r < plan.units[u].r1; r++) {
                uint32_t j0 = gbp->cell_start[plan.ranges[2 * r]], j1 = gbp->cell_start[plan.ranges[2 * r + 1]];
                for (uint32_t c0 = j0; c0 < j1; c0 += item_cols) {
                    uint32_t c1 = j1 - c0 > item_cols ? c0 + item_cols : j1;
                    /* autocorrelations count j > i: nothing in a range left of the rows */
                    if (autocorr && c1 <= a0 + 1) continue;
                    items[n_items++] = make_uint4(a0, a1, c0, c1);
                }
            }
        }
    {
        FeatureLayout L;
        size_t at = 0, nb = autocorr ? 0 : gb.n;
        L.pa = arena_take(&at, ga.n * sizeof(float4));
        L.pb = arena_take(&at, nb * sizeof(float4));
        L.a64 = arena_take(&at, 3 * ga.n * sizeof(double));
        L.b64 = arena_take(&at, 3 * nb * sizeof(double));
        L.wa = arena_take(&at, ga.w ? ga.n * sizeof(double) : 0);
        L.wb = arena_take(&at, !autocorr && gb.w ? nb * sizeof(double) : 0);
        L.thr = arena_take(&at, (size_t)table->n_bounds * sizeof(double));
        L.cells = arena_take(&at, (size_t)table->n_cells * sizeof(int));
        L.lo = arena_take(&at, ((size_t)table->n_bounds + 1) * sizeof(float));
        L.hi = arena_take(&at, ((size_t)table->n_bounds + 1) * sizeof(float));
        L.items = arena_take(&at, n_items * sizeof(uint4));
        L.in_bytes = at;
        L.slots = arena_take(&at, n_slots * sizeof(unsigned long long));
        L.n_fp64 = arena_take(&at, sizeof(unsigned long long));
        L.wslots = arena_take(&at, n_slots * sizeof(double));
        L.tslots = arena_take(&at, n_slots * sizeof(double));
        L.bytes = at;
        host_io = (unsigned char *)malloc(L.bytes);
        if (!host_io) {
            st = pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
            goto done;
        }
        stage_grid(&ga, host_io, L.pa, L.a64, L.wa);
        if (!autocorr) stage_grid(&gb, host_io, L.pb, L.b64, L.wb);
        memcpy(host_io + L.thr, table->dot_threshold, (size_t)table->n_bounds * sizeof(double));
        memcpy(host_io + L.cells, table->cell_slot, (size_t)table->n_cells * sizeof(int));
        memcpy(host_io + L.lo, table->c2_lo, ((size_t)table->n_bounds + 1) * sizeof(float));
        memcpy(host_io + L.hi, table->c2_hi, ((size_t)table->n_bounds + 1) * sizeof(float));
        memcpy(host_io + L.items, items, n_items * sizeof(uint4));
        PK_CUDA_GOTO(ctx, st, done, pk_cuda_pool_malloc(&d.arena, L.bytes));
        unsigned char *base = (unsigned char *)d.arena;
        PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(base, host_io, L.in_bytes, cudaMemcpyHostToDevice));
        PK_CUDA_GOTO(ctx, st, done, cudaMemset(base + L.in_bytes, 0, L.bytes - L.in_bytes));
        d.pa = (float4 *)(base + L.pa);
        d.pb = (float4 *)(base + L.pb);
        d.a64 = (double *)(base + L.a64);
        d.b64 = (double *)(base + L.b64);
        d.wa = ga.w ? (double *)(base + L.wa) : NULL;
        d.wb = !autocorr && gb.w ? (double *)(base + L.wb) : NULL;
        d.thr = (double *)(base + L.thr);
        d.cells = (int *)(base + L.cells);
        d.lo = (float *)(base + L.lo);
        d.hi = (float *)(base + L.hi);
        d.items = (uint4 *)(base + L.items);
        d.slots = (unsigned long long *)(base + L.slots);
        d.n_fp64 = (unsigned long long *)(base + L.n_fp64);
        d.wslots = (double *)(base + L.wslots);
        d.tslots = (double *)(base + L.tslots);
        out_at = L.in_bytes;
        out_bytes = L.bytes - L.in_bytes;
        out_offs[0] = L.slots - L.in_bytes, out_offs[1] = L.n_fp64 - L.in_bytes;
        out_offs[2] = L.wslots - L.in_bytes, out_offs[3] = L.tslots - L.in_bytes;
    }
    g.pa = d.pa;
    g.pb = autocorr ? d.pa : d.pb;
    g.a64 = d.a64;
    g.b64 = autocorr ? d.a64 : d.b64;
    g.na = ga.n;
    g.nb = gbp->n;
    g.wa = d.wa;
    g.wb = autocorr ? d.wa : d.wb;
    g.thr = d.thr;
    g.n_bounds = table->n_bounds;
    g.n_slots = (int)n_slots;
    g.n_bins = (int)bins->n_bins;
    g.cell_slot = d.cells;
    g.c2_lo = d.lo;
    g.c2_hi = d.hi;
    g.n_cells = table->n_cells;
    g.cell_shift = table->cell_shift;
    g.cell_base = table->cell_base;
    g.autocorr = autocorr;
    g.weighted = weighted;
    g.mean_theta = tslots != NULL;
    g.slots = d.slots;
    g.n_fp64 = d.n_fp64;
    g.wslots = d.wslots;
    g.tslots = d.tslots;
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&ev0));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&ev1));
    PK_CUDA_GOTO(ctx, st, done, cudaEventRecord(ev0));
    {
        /* launches of at most 2^16 items (2^31 pairs of 256-row units at most
         * 2^15 columns wide would take well under a second), with progress
         * and cancellation between them */
        /* the u32 shared counts of a block take fewer than 2^32 pairs: a
         * block takes ceil(per_launch / blocks) items of at most 256 rows x
         * the widest range (FEATURE_ITEM_COLS at most: 2^24 pairs) */
        size_t per_launch = 65536, widest = 1;
        for (size_t q = 0; q < n_items; q++)
            if (items[q].w - items[q].z > widest) widest = items[q].w - items[q].z;
        while (per_launch > 1 &&
               (double)((per_launch + n_blocks - 1) / n_blocks) * 256.0 * (double)widest > 2147483648.0)
            per_launch /= 2;
        double scale = progress && plan.pairs_visited ? progress->total / (double)n_items : 0;
        for (size_t first = 0; first < n_items; first += per_launch) {
            size_t count = n_items - first < per_launch ? n_items - first : per_launch;
            FeatureArgs gk = g;
            gk.items = d.items + first;
            gk.n_items = (int)count;
            unsigned grid = (unsigned)(n_blocks < count ? n_blocks : count);
            features_kernel<<<grid, FEATURE_THREADS, smem>>>(gk);
            PK_CUDA_LAUNCHED(ctx, st, done);
            PK_CUDA_GOTO(ctx, st, done, cudaDeviceSynchronize());
            if (progress && pk_progress_add(progress, (double)count * scale, 1)) {
                st = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
                goto done;
            }
        }
    }
    PK_CUDA_GOTO(ctx, st, done, cudaEventRecord(ev1));
    PK_CUDA_GOTO(ctx, st, done, cudaEventSynchronize(ev1));
    PK_CUDA_GOTO(ctx, st, done, cudaEventElapsedTime(&ms, ev0, ev1));
    /* every output in one transfer, into the staging's input part (no
     * longer needed) */
    PK_CUDA_GOTO(ctx, st, done,
                 cudaMemcpy(host_io, (unsigned char *)d.arena + out_at, out_bytes, cudaMemcpyDeviceToHost));
    memcpy(slots, host_io + out_offs[0], n_slots * sizeof(uint64_t));
    memcpy(&n_fp64, host_io + out_offs[1], sizeof n_fp64);
    if (weighted) memcpy(wslots, host_io + out_offs[2], n_slots * sizeof(double));
    if (tslots) memcpy(tslots, host_io + out_offs[3], n_slots * sizeof(double));
    /* the pairs the plan skipped are beyond the last edge */
    slots[n_slots - 1] += plan.pairs_all - plan.pairs_visited;
    if (weighted) wslots[n_slots - 1] += pk_grid_plan_skipped_weight(&plan, &ga, gbp, autocorr);
    if (autocorr) {
        for (size_t s = 0; s < n_slots; s++) {
            slots[s] *= 2;
            if (weighted) wslots[s] *= 2;
            if (tslots) tslots[s] *= 2;
        }
        for (size_t i = 0; i < ga.n; i++) {
            double dot = pk_angcorr_dot_ref(ga.v.x[i], ga.v.y[i], ga.v.z[i], ga.v.x[i], ga.v.y[i], ga.v.z[i]);
            int32_t s = pk_edge_table_slot_fp64(table, dot);
            slots[s]++;
            if (weighted) {
                double w = ga.w ? ga.w[i] * ga.w[i] : 1.0;
                wslots[s] += w;
                if (tslots && s >= 1 && s <= (int32_t)bins->n_bins) tslots[s] += w * acos(fmin(fmax(dot, -1.0), 1.0));
            }
        }
        n_fp64 += ga.n;
    }
    stats->kernel_ms = ms;
    stats->pairs_visited = plan.pairs_visited + (autocorr ? ga.n : 0);
    stats->pairs_fp64 = n_fp64;
done:
    if (ev0) cudaEventDestroy(ev0);
    if (ev1) cudaEventDestroy(ev1);
    free(items);
    free(host_io);
    release(&d, st != PK_OK);
    pk_grid_plan_free(&plan);
    pk_grid_free(&ga);
    pk_grid_free(&gb);
    return st;
}
