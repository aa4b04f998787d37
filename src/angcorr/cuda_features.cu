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
 * Work items are some rows of a unit of the plan (at most 256) against one
 * range of cells, tagged with their count: a launch can carry a batch of
 * counts (the patch pairs of a jackknife), each with its own objects in the
 * arena and its own slots. Persistent blocks (as many as fit the device)
 * load the tables into shared memory once and take a contiguous run of
 * items each, the rows of an item sharing the 256 threads (each row's
 * columns split among 256 / rows threads). Counts go to shared u32 slots,
 * weights and weighted separations to shared float64 sums (atomicAdd),
 * flushed to the count's slots when a block's run passes to the next count
 * and at its end. The float64 sums therefore depend on the order in
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

/* One count of a batch on the device: where its objects lie in the arena
 * (float4 and float64 indices from the arena's start; x[n], y[n], z[n]
 * follow one another; weights at w, or none when ~0) and its objects. */
struct FeatureJob {
    unsigned long long pa, pb, a64, b64, wa, wb;
    unsigned na, nb;
    int autocorr, pad;
};

#define NO_WEIGHTS (~0ull)

struct FeatureArgs {
    const float4 *p;        /* the arena as float4 */
    const double *v;        /* the arena as double */
    const FeatureJob *jobs; /* [n_jobs] */
    const double *thr;      /* dot thresholds [n_bounds] */
    int n_bounds, n_slots, n_bins;
    const int *cell_slot;       /* [n_cells] */
    const float *c2_lo, *c2_hi; /* [n_bounds + 1] */
    int n_cells, cell_shift, cell_base;
    const uint4 *items;       /* i0, i1, j0, j1 */
    const unsigned *item_job; /* the job of each item; items in job order */
    int n_items;
    int weighted, mean_theta;
    unsigned long long *slots, *n_fp64; /* [n_jobs][n_slots], [n_jobs] */
    double *wslots, *tslots;            /* [n_jobs][n_slots] */
};

/* A block's shared sums into job's slots, then zeroed for the next job
 * (called by every thread of the block between barriers). */
__device__ static void flush_job(const FeatureArgs &g, unsigned job, double *s_w, double *s_t, unsigned *s_cnt) {
    size_t at = (size_t)job * (size_t)g.n_slots;
    for (int s = threadIdx.x; s < g.n_slots; s += FEATURE_THREADS) {
        if (s_cnt[s]) atomicAdd(&g.slots[at + s], (unsigned long long)s_cnt[s]);
        if (g.weighted) {
            if (s_w[s] != 0) atomicAdd(&g.wslots[at + s], s_w[s]);
            if (g.mean_theta && s_t[s] != 0) atomicAdd(&g.tslots[at + s], s_t[s]);
        }
        s_w[s] = 0;
        s_t[s] = 0;
        s_cnt[s] = 0;
    }
}

__global__ void __launch_bounds__(FEATURE_THREADS) features_kernel(FeatureArgs g) {
    extern __shared__ __align__(16) unsigned char smem[];
    double *s_w = (double *)smem;
    double *s_t = s_w + g.n_slots;
    unsigned *s_cnt = (unsigned *)(s_t + g.n_slots);
    int *s_cells = (int *)(s_cnt + g.n_slots);
    float *s_lo = (float *)(s_cells + g.n_cells);
    float *s_hi = s_lo + g.n_bounds + 1;
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
    __syncthreads();

    /* Each block takes a contiguous run of items (the tables loaded once),
     * so that it meets few jobs: its sums go out when the job changes. An
     * item's rows share the threads: tpr threads per row, each walking
     * every tpr-th column. */
    unsigned per = (unsigned)((g.n_items + gridDim.x - 1) / gridDim.x);
    unsigned first = blockIdx.x * per, last = min(first + per, (unsigned)g.n_items);
    unsigned cur = ~0u, fp64 = 0;
    FeatureJob J;
    const float4 *pa = NULL, *pb = NULL;
    const double *a64 = NULL, *b64 = NULL, *wa = NULL, *wb = NULL;
    for (unsigned item = first; item < last; item++) {
        unsigned jb = g.item_job[item];
        if (jb != cur) { /* the same for the whole block */
            if (cur != ~0u) {
                if (fp64) atomicAdd(&g.n_fp64[cur], (unsigned long long)fp64);
                fp64 = 0;
                __syncthreads();
                flush_job(g, cur, s_w, s_t, s_cnt);
                __syncthreads();
            }
            cur = jb;
            J = g.jobs[jb];
            pa = g.p + J.pa, pb = g.p + J.pb;
            a64 = g.v + J.a64, b64 = g.v + J.b64;
            wa = J.wa == NO_WEIGHTS ? NULL : g.v + J.wa;
            wb = J.wb == NO_WEIGHTS ? NULL : g.v + J.wb;
        }
        uint4 it = g.items[item];
        unsigned n_rows = it.y - it.x;
        unsigned tpr = FEATURE_THREADS / n_rows;
        if (tpr < 1) tpr = 1;
        unsigned r = threadIdx.x / tpr, c = threadIdx.x % tpr;
        if (r >= n_rows) continue;
        size_t i = it.x + r;
        float4 p = pa[i];
        double wi = wa ? wa[i] : 1.0;
        for (size_t j = it.z + c; j < it.w; j += tpr) {
            if (J.autocorr && j <= i) continue;
            float4 q = pb[j];
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
                dot = pk_dot_rn(a64[i], a64[J.na + i], a64[2 * (size_t)J.na + i], b64[j], b64[J.nb + j],
                                b64[2 * (size_t)J.nb + j]);
                have_dot = true;
                s = pk_slot_of_dot(g.thr, g.n_bounds, dot);
                fp64++;
            }
            atomicAdd(&s_cnt[s], 1u);
            if (g.weighted) {
                double w = wi * (wb ? wb[j] : 1.0);
                atomicAdd(&s_w[s], w);
                if (g.mean_theta && s >= 1 && s <= g.n_bins) {
                    if (!have_dot)
                        dot = pk_dot_rn(a64[i], a64[J.na + i], a64[2 * (size_t)J.na + i], b64[j], b64[J.nb + j],
                                        b64[2 * (size_t)J.nb + j]);
                    dot = fmin(fmax(dot, -1.0), 1.0);
                    atomicAdd(&s_t[s], w * acos(dot));
                }
            }
        }
    }
    if (cur != ~0u) {
        if (fp64) atomicAdd(&g.n_fp64[cur], (unsigned long long)fp64);
        __syncthreads();
        flush_job(g, cur, s_w, s_t, s_cnt);
    }
}

/* ---- host ------------------------------------------------------------------ */

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

/* The kernel's shared memory for a table: its slots' counts and sums, the
 * cells and the windows' bounds. */
#define FEATURE_SMEM_MAX (200 * 1024)
static size_t feature_smem(const pk_edge_table *table) {
    return (size_t)table->n_slots * (2 * sizeof(double) + sizeof(unsigned)) + (size_t)table->n_cells * sizeof(int) +
           2 * ((size_t)table->n_bounds + 1) * sizeof(float) + 64;
}

extern "C" int pk_angcorr_cuda_features_fit(const pk_edge_table *table) {
    return feature_smem(table) <= FEATURE_SMEM_MAX;
}

/* A table too large for the kernel: PK_ERR_UNSUPPORTED, without a message
 * when nothing is weighted (the full-range kernels count those). */
static pk_status feature_refused(pk_context *ctx, const pk_bins *bins, const pk_edge_table *table, int weighted) {
    if (!weighted) return PK_ERR_UNSUPPORTED;
    return pk_fail(ctx, PK_ERR_UNSUPPORTED,
                   "weighted CUDA counts take at most about 4000 bins here (%zu needed "
                   "%zu bytes of shared memory)",
                   bins->n_bins, feature_smem(table));
}

/* A grid staged once for every job of a batch that uses it: a jackknife
 * patch takes part in ~2K counts, and its grid is the same in each that
 * builds it with the same band height (pk_grid_build is deterministic in
 * the catalog, its weights and h). An open-addressed table over
 * (catalog, weights, h). */
struct StagedGrid {
    const pk_catalog *cat;
    const double *w;
    double h;
    const pk_grid *grid; /* NULL: an empty entry */
    size_t p_at, v_at, w_at;
};

struct StageTable {
    StagedGrid *at;
    size_t cap; /* a power of two, at least twice the entries */
};

static const StagedGrid *stage_find(StageTable *t, const pk_catalog *cat, const double *w, const pk_grid *g,
                                    size_t *arena_at) {
    uint64_t hb;
    memcpy(&hb, &g->h, sizeof hb);
    uint64_t key = (uint64_t)(uintptr_t)cat * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)w * 0xC2B2AE3D27D4EB4Full ^
                   hb * 0x165667B19E3779F9ull;
    for (size_t probe = 0; probe < t->cap; probe++) {
        StagedGrid *e = &t->at[((size_t)(key >> 20) + probe) & (t->cap - 1)];
        if (!e->grid) {
            e->cat = cat, e->w = w, e->h = g->h, e->grid = g;
            e->p_at = arena_take(arena_at, g->n * sizeof(float4));
            e->v_at = arena_take(arena_at, 3 * g->n * sizeof(double));
            e->w_at = g->w ? arena_take(arena_at, g->n * sizeof(double)) : 0;
            return e;
        }
        if (e->cat == cat && e->w == w && memcmp(&e->h, &g->h, sizeof e->h) == 0 && e->grid->n == g->n) return e;
    }
    return NULL;
}

/* The items of one job: a unit's rows (item_rows at most) against a column
 * range (item_cols at most), into items (NULL: only counted). */
static size_t job_items(const pk_feature_job *job, uint32_t item_rows, uint32_t item_cols, uint4 *items) {
    const int autocorr = job->b == NULL;
    const pk_grid *gbp = autocorr ? &job->ga : &job->gb;
    const pk_grid_plan *plan = &job->plan;
    size_t n = 0;
    for (size_t u = 0; u < plan->n_units; u++)
        for (uint32_t a0 = plan->units[u].i0; a0 < plan->units[u].i1; a0 += item_rows) {
            uint32_t a1 = plan->units[u].i1 - a0 > item_rows ? a0 + item_rows : plan->units[u].i1;
            for (size_t r = plan->units[u].r0; r < plan->units[u].r1; r++) {
                uint32_t j0 = gbp->cell_start[plan->ranges[2 * r]], j1 = gbp->cell_start[plan->ranges[2 * r + 1]];
                for (uint32_t c0 = j0; c0 < j1; c0 += item_cols) {
                    uint32_t c1 = j1 - c0 > item_cols ? c0 + item_cols : j1;
                    /* autocorrelations count j > i: nothing in a range left of the rows */
                    if (autocorr && c1 <= a0 + 1) continue;
                    if (items) items[n] = make_uint4(a0, a1, c0, c1);
                    n++;
                }
            }
        }
    return n;
}

/* Pairs of a job's units before row trimming. */
static double job_pairs(const pk_feature_job *job) {
    const pk_grid *gbp = job->b == NULL ? &job->ga : &job->gb;
    const pk_grid_plan *plan = &job->plan;
    double pairs = 0;
    for (size_t u = 0; u < plan->n_units; u++) {
        double cols = 0;
        for (size_t r = plan->units[u].r0; r < plan->units[u].r1; r++)
            cols += gbp->cell_start[plan->ranges[2 * r + 1]] - gbp->cell_start[plan->ranges[2 * r]];
        pairs += (double)(plan->units[u].i1 - plan->units[u].i0) * cols;
    }
    return pairs;
}

/* One batch on its way through pk_angcorr_cuda_feature_batch: its inputs,
 * the launch shape, the arena's layout (byte offsets; the inputs end at
 * in_bytes, the outputs at bytes) and the buffers it owns. */
struct FeatureBatch {
    pk_context *ctx;
    pk_feature_job *jobs;
    size_t n_jobs;
    const pk_bins *bins;
    const pk_edge_table *table;
    int weighted, mean_theta;
    size_t n_slots, smem;
    size_t n_blocks;               /* persistent blocks that fit the device */
    uint32_t item_cols, item_rows; /* the largest item */
    double pairs;                  /* of every job's units */
    size_t n_items;
    size_t *job_first; /* [n_jobs + 1] each job's first item */
    FeatureJob *fj;    /* [n_jobs] the jobs as the device reads them */
    StageTable staged;
    size_t in_bytes, bytes, at_slots, at_fp64, at_w, at_t;
    size_t at_thr, at_cells, at_lo, at_hi, at_jobs, at_items, at_item_job;
    unsigned char *host_io; /* the inputs staged for the device, then the outputs read back */
    uint4 *items;           /* in host_io */
    void *arena;
    cudaEvent_t ev0, ev1;
    float ms;
};

/* The kernel's shared memory, and as many persistent blocks as fit the
 * device with it. */
static pk_status fit_blocks(FeatureBatch *b) {
    pk_context *ctx = b->ctx;
    PK_CUDA(ctx, cudaSetDevice(ctx ? ctx->cuda_device : 0));
    PK_CUDA(ctx, cudaFuncSetAttribute(features_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b->smem));
    int dev = ctx ? ctx->cuda_device : 0, n_sm = 0, per_sm = 0;
    PK_CUDA(ctx, cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    PK_CUDA(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, features_kernel, FEATURE_THREADS, b->smem));
    if (per_sm < 1) per_sm = 1;
    b->n_blocks = (size_t)n_sm * (size_t)per_sm;
    return PK_OK;
}

/* An item: some of a unit's rows (at most 256) against a column range of at
 * most FEATURE_ITEM_COLS, so that it holds at most 2^24 pairs; the ranges
 * cut in halves (down to 64 columns), then the rows (down to 32), while an
 * item would still hold an eighth of a block's share of the batch's pairs
 * or more (four to eight items a block, as cut), so that a small count (a
 * jackknife patch pair of a few thousand objects) still fills the device. */
static void size_items(FeatureBatch *b) {
    for (size_t k = 0; k < b->n_jobs; k++) b->pairs += job_pairs(&b->jobs[k]);
    double want = b->pairs / (8.0 * (double)b->n_blocks);
    while (b->item_cols > 64 && 256.0 * b->item_cols / 2 >= want) b->item_cols /= 2;
    while (b->item_rows > 32 && (double)b->item_rows * b->item_cols / 2 >= want) b->item_rows /= 2;
}

/* The host tables of the batch, and each job's first item. */
static pk_status count_items(FeatureBatch *b) {
    pk_context *ctx = b->ctx;
    size_t n_jobs = b->n_jobs;
    b->job_first = (size_t *)malloc((n_jobs + 1) * sizeof(size_t));
    b->fj = (FeatureJob *)calloc(n_jobs, sizeof(FeatureJob));
    b->staged.cap = 16;
    while (b->staged.cap < 4 * n_jobs) b->staged.cap *= 2;
    b->staged.at = (StagedGrid *)calloc(b->staged.cap, sizeof(StagedGrid));
    if (!b->job_first || !b->fj || !b->staged.at) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n_jobs; k++) {
        b->job_first[k] = b->n_items;
        b->n_items += job_items(&b->jobs[k], b->item_rows, b->item_cols, NULL);
    }
    b->job_first[n_jobs] = b->n_items;
    if (b->n_items > (size_t)INT32_MAX)
        return pk_fail(ctx, PK_ERR_UNSUPPORTED, "a batch of %zu work items is too large for the device", b->n_items);
    return PK_OK;
}

/* The arena's layout: inputs (the tables, each staged grid once, the jobs,
 * the items), then outputs; and each job's place in it. */
static pk_status lay_out_arena(FeatureBatch *b) {
    const pk_edge_table *table = b->table;
    size_t n_jobs = b->n_jobs, n_items = b->n_items, n_slots = b->n_slots;
    size_t at = 0;
    b->at_thr = arena_take(&at, (size_t)table->n_bounds * sizeof(double));
    b->at_cells = arena_take(&at, (size_t)table->n_cells * sizeof(int));
    b->at_lo = arena_take(&at, ((size_t)table->n_bounds + 1) * sizeof(float));
    b->at_hi = arena_take(&at, ((size_t)table->n_bounds + 1) * sizeof(float));
    for (size_t k = 0; k < n_jobs; k++) {
        const pk_feature_job *job = &b->jobs[k];
        const int autocorr = job->b == NULL;
        const StagedGrid *sa = stage_find(&b->staged, job->a, job->wa, &job->ga, &at);
        const StagedGrid *sb = autocorr ? sa : stage_find(&b->staged, job->b, job->wb, &job->gb, &at);
        if (!sa || !sb) return pk_fail(b->ctx, PK_ERR_INTERNAL, "the batch's table of staged catalogs is full");
        FeatureJob *d = &b->fj[k];
        d->pa = sa->p_at / sizeof(float4), d->pb = sb->p_at / sizeof(float4);
        d->a64 = sa->v_at / sizeof(double), d->b64 = sb->v_at / sizeof(double);
        d->wa = sa->grid->w ? sa->w_at / sizeof(double) : NO_WEIGHTS;
        d->wb = sb->grid->w ? sb->w_at / sizeof(double) : NO_WEIGHTS;
        d->na = (unsigned)sa->grid->n, d->nb = (unsigned)sb->grid->n;
        d->autocorr = autocorr;
    }
    b->at_jobs = arena_take(&at, n_jobs * sizeof(FeatureJob));
    b->at_items = arena_take(&at, n_items * sizeof(uint4));
    b->at_item_job = arena_take(&at, n_items * sizeof(unsigned));
    b->in_bytes = at;
    b->at_slots = arena_take(&at, n_jobs * n_slots * sizeof(unsigned long long));
    b->at_fp64 = arena_take(&at, n_jobs * sizeof(unsigned long long));
    b->at_w = arena_take(&at, b->weighted ? n_jobs * n_slots * sizeof(double) : 0);
    b->at_t = arena_take(&at, b->mean_theta ? n_jobs * n_slots * sizeof(double) : 0);
    b->bytes = at;
    return PK_OK;
}

/* The inputs into the host staging, laid out as in the arena. */
static pk_status stage_inputs(FeatureBatch *b) {
    const pk_edge_table *table = b->table;
    b->host_io = (unsigned char *)malloc(b->bytes);
    if (!b->host_io)
        return pk_fail(b->ctx, PK_ERR_NOMEM, "out of memory for a batch of %zu counts (%zu bytes)", b->n_jobs,
                       b->bytes);
    unsigned char *host_io = b->host_io;
    memcpy(host_io + b->at_thr, table->dot_threshold, (size_t)table->n_bounds * sizeof(double));
    memcpy(host_io + b->at_cells, table->cell_slot, (size_t)table->n_cells * sizeof(int));
    memcpy(host_io + b->at_lo, table->c2_lo, ((size_t)table->n_bounds + 1) * sizeof(float));
    memcpy(host_io + b->at_hi, table->c2_hi, ((size_t)table->n_bounds + 1) * sizeof(float));
    uint4 *items = b->items = (uint4 *)(host_io + b->at_items);
    unsigned *item_job = (unsigned *)(host_io + b->at_item_job);
    const StageTable *staged = &b->staged;
    for (size_t e = 0; e < staged->cap; e++)
        if (staged->at[e].grid)
            stage_grid(staged->at[e].grid, host_io, staged->at[e].p_at, staged->at[e].v_at, staged->at[e].w_at);
    for (size_t k = 0; k < b->n_jobs; k++) {
        const pk_feature_job *job = &b->jobs[k];
        size_t made = job_items(job, b->item_rows, b->item_cols, items + b->job_first[k]);
        for (size_t q = 0; q < made; q++) item_job[b->job_first[k] + q] = (unsigned)k;
    }
    memcpy(host_io + b->at_jobs, b->fj, b->n_jobs * sizeof(FeatureJob));
    return PK_OK;
}

/* The arena on the device: the inputs up in one transfer, the outputs
 * zeroed in one. */
static pk_status upload_arena(FeatureBatch *b) {
    pk_context *ctx = b->ctx;
    size_t in_bytes = b->in_bytes, bytes = b->bytes;
    PK_CUDA(ctx, pk_cuda_pool_malloc(&b->arena, bytes));
    PK_CUDA(ctx, cudaMemcpy(b->arena, b->host_io, in_bytes, cudaMemcpyHostToDevice));
    PK_CUDA(ctx, cudaMemset((unsigned char *)b->arena + in_bytes, 0, bytes - in_bytes));
    return PK_OK;
}

/* The kernel's arguments for the whole batch; the items are set per
 * launch. */
static FeatureArgs feature_args(const FeatureBatch *b) {
    unsigned char *base = (unsigned char *)b->arena;
    const pk_edge_table *table = b->table;
    FeatureArgs g;
    memset(&g, 0, sizeof g);
    g.p = (const float4 *)base;
    g.v = (const double *)base;
    g.jobs = (const FeatureJob *)(base + b->at_jobs);
    g.thr = (const double *)(base + b->at_thr);
    g.n_bounds = table->n_bounds;
    g.n_slots = (int)b->n_slots;
    g.n_bins = (int)b->bins->n_bins;
    g.cell_slot = (const int *)(base + b->at_cells);
    g.c2_lo = (const float *)(base + b->at_lo);
    g.c2_hi = (const float *)(base + b->at_hi);
    g.n_cells = table->n_cells;
    g.cell_shift = table->cell_shift;
    g.cell_base = table->cell_base;
    g.weighted = b->weighted;
    g.mean_theta = b->mean_theta;
    g.slots = (unsigned long long *)(base + b->at_slots);
    g.n_fp64 = (unsigned long long *)(base + b->at_fp64);
    g.wslots = b->weighted ? (double *)(base + b->at_w) : NULL;
    g.tslots = b->mean_theta ? (double *)(base + b->at_t) : NULL;
    return g;
}

/* Launches of at most 2^16 items, with progress and cancellation between
 * them; fewer where a block's u32 shared counts could pass 2^31 pairs (a
 * block takes ceil(per_launch / blocks) items of at most 256 rows x the
 * widest range, FEATURE_ITEM_COLS at most). */
static size_t items_per_launch(const FeatureBatch *b) {
    size_t per_launch = 65536, widest = 1, n_blocks = b->n_blocks;
    for (size_t q = 0; q < b->n_items; q++)
        if (b->items[q].w - b->items[q].z > widest) widest = b->items[q].w - b->items[q].z;
    while (per_launch > 1 && (double)((per_launch + n_blocks - 1) / n_blocks) * 256.0 * (double)widest > 2147483648.0)
        per_launch /= 2;
    return per_launch;
}

/* Every item, in launches of items_per_launch, each waited for; the time
 * from the first launch to the last one's end into b->ms. */
static pk_status launch_items(FeatureBatch *b, pk_progress *progress) {
    pk_context *ctx = b->ctx;
    size_t n_items = b->n_items, n_blocks = b->n_blocks;
    PK_CUDA(ctx, cudaEventCreate(&b->ev0));
    PK_CUDA(ctx, cudaEventCreate(&b->ev1));
    PK_CUDA(ctx, cudaEventRecord(b->ev0));
    unsigned char *base = (unsigned char *)b->arena;
    FeatureArgs g = feature_args(b);
    size_t per_launch = items_per_launch(b);
    double scale = progress && n_items ? progress->total / (double)n_items : 0;
    for (size_t first = 0; first < n_items; first += per_launch) {
        size_t count = n_items - first < per_launch ? n_items - first : per_launch;
        FeatureArgs gk = g;
        gk.items = (const uint4 *)(base + b->at_items) + first;
        gk.item_job = (const unsigned *)(base + b->at_item_job) + first;
        gk.n_items = (int)count;
        unsigned grid = (unsigned)(n_blocks < count ? n_blocks : count);
        features_kernel<<<grid, FEATURE_THREADS, b->smem>>>(gk);
        PK_CUDA(ctx, cudaGetLastError());
        PK_CUDA(ctx, cudaDeviceSynchronize());
        if (progress && pk_progress_add(progress, (double)count * scale, 1))
            return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    PK_CUDA(ctx, cudaEventRecord(b->ev1));
    PK_CUDA(ctx, cudaEventSynchronize(b->ev1));
    PK_CUDA(ctx, cudaEventElapsedTime(&b->ms, b->ev0, b->ev1));
    return PK_OK;
}

/* Every output in one transfer, into the staging's input part (no longer
 * needed), then added to each job's slots. */
static pk_status read_outputs(FeatureBatch *b) {
    pk_context *ctx = b->ctx;
    unsigned char *host_io = b->host_io;
    size_t in_bytes = b->in_bytes, n_slots = b->n_slots;
    PK_CUDA(ctx,
            cudaMemcpy(host_io, (unsigned char *)b->arena + in_bytes, b->bytes - in_bytes, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < b->n_jobs; k++) {
        pk_feature_job *job = &b->jobs[k];
        const size_t off = k * n_slots;
        const uint64_t *cnt = (const uint64_t *)(host_io + (b->at_slots - in_bytes)) + off;
        for (size_t s = 0; s < n_slots; s++) job->slots[s] += cnt[s];
        job->n_fp64 += ((const uint64_t *)(host_io + (b->at_fp64 - in_bytes)))[k];
        if (b->weighted && job->wslots) {
            const double *w = (const double *)(host_io + (b->at_w - in_bytes)) + off;
            for (size_t s = 0; s < n_slots; s++) job->wslots[s] += w[s];
        }
        if (b->mean_theta && job->tslots) {
            const double *t = (const double *)(host_io + (b->at_t - in_bytes)) + off;
            for (size_t s = 0; s < n_slots; s++) job->tslots[s] += t[s];
        }
        /* the batch's kernel time shared by the jobs' pairs */
        job->stats->kernel_ms = b->pairs > 0 ? b->ms * job_pairs(job) / b->pairs : b->ms / (double)b->n_jobs;
    }
    return PK_OK;
}

/* What the batch holds; after a failure, the work queued on the arena ends
 * before the arena goes back to the pool. */
static void free_batch(FeatureBatch *b, pk_status st) {
    if (b->ev0) cudaEventDestroy(b->ev0);
    if (b->ev1) cudaEventDestroy(b->ev1);
    if (st != PK_OK && b->arena) cudaDeviceSynchronize(); /* queued work first */
    pk_cuda_pool_free(b->arena);
    free(b->host_io);
    free(b->job_first);
    free(b->fj);
    free(b->staged.at);
}

/* A batch's buffers in one arena: the tables, every job's objects, the job
 * list and the items (copied up in one transfer), then the outputs (zeroed
 * and read back in one each): a batch of small jackknife patch pairs costs
 * a few calls instead of a few for each. */
extern "C" pk_status pk_angcorr_cuda_feature_batch(pk_context *ctx, pk_feature_job *jobs, size_t n_jobs,
                                                   const pk_bins *bins, const pk_edge_table *table, int weighted,
                                                   int mean_theta, pk_progress *progress) {
    if (!weighted) mean_theta = 0;
    size_t smem = feature_smem(table);
    if (smem > FEATURE_SMEM_MAX) return feature_refused(ctx, bins, table, weighted);
    if (n_jobs == 0) return PK_OK;
    if (n_jobs > UINT32_MAX - 1) return pk_fail(ctx, PK_ERR_INVALID, "too many counts in one batch");
    FeatureBatch b;
    memset(&b, 0, sizeof b);
    b.ctx = ctx, b.jobs = jobs, b.n_jobs = n_jobs, b.bins = bins, b.table = table;
    b.weighted = weighted, b.mean_theta = mean_theta;
    b.n_slots = (size_t)table->n_slots, b.smem = smem;
    b.n_blocks = 1;
    b.item_cols = FEATURE_ITEM_COLS, b.item_rows = 256;
    pk_status st = PK_OK;
    if ((st = fit_blocks(&b)) != PK_OK) goto done;
    size_items(&b);
    if ((st = count_items(&b)) != PK_OK) goto done;
    if ((st = lay_out_arena(&b)) != PK_OK) goto done;
    if ((st = stage_inputs(&b)) != PK_OK) goto done;
    if ((st = upload_arena(&b)) != PK_OK) goto done;
    if ((st = launch_items(&b, progress)) != PK_OK) goto done;
    st = read_outputs(&b);
done:
    free_batch(&b, st);
    return st;
}

extern "C" pk_status pk_angcorr_count_cuda_features(pk_context *ctx, int kernel, const pk_catalog *a, const double *wa,
                                                    const pk_catalog *b, const double *wb, const pk_bins *bins,
                                                    const pk_edge_table *table, int prune, int mean_theta,
                                                    uint64_t *slots, double *wslots, double *tslots,
                                                    pk_pair_stats *stats, pk_progress *progress) {
    (void)kernel;
    int weighted = wslots != NULL;
    if (!mean_theta || !weighted) tslots = NULL;
    size_t n_slots = (size_t)table->n_slots;
    if (!pk_angcorr_cuda_features_fit(table)) return feature_refused(ctx, bins, table, weighted); /* before the grids */
    pk_feature_job job;
    memset(&job, 0, sizeof job);
    job.a = a, job.wa = wa, job.b = b, job.wb = b ? wb : NULL;
    job.slots = slots, job.wslots = wslots, job.tslots = tslots, job.stats = stats;
    pk_status st = pk_feature_job_prepare(ctx, &job, bins, table, prune, weighted);
    if (st) return st;
    memset(slots, 0, n_slots * sizeof(uint64_t));
    if (wslots) memset(wslots, 0, n_slots * sizeof(double));
    if (tslots) memset(tslots, 0, n_slots * sizeof(double));
    st = pk_angcorr_cuda_feature_batch(ctx, &job, 1, bins, table, weighted, tslots != NULL, progress);
    if (st == PK_OK) pk_feature_job_finish(&job, bins, table);
    pk_feature_job_free(&job);
    return st;
}
