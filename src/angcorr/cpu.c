/* cpu.c - the CPU backend of angcorr: tiling, OpenMP, per-thread
 * histograms, and the portable scalar kernel. The SIMD kernels live in
 * cpu_avx2.c and cpu_avx512.c and compute the same slots.
 *
 * Each pair's chord squared is computed in float32 and looked up in the
 * edge table (angcorr_internal.h); pairs inside an uncertainty window are
 * settled with the float64 reference dot product. For autocorrelations only
 * j > i is visited and counted twice, self-pairs once through float64.
 * Histograms are integers, so the merge order cannot change a result.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "angcorr_internal.h"
#include "cpu_kernel.h"

/* Rows of a in one unit of work: 256 rows keep ~400 units per 100,000-row
 * triangle, enough for dynamic scheduling to even out 2-16 threads. */
#define PK_TILE_ROWS 256
/* Columns of b in one block: 2048 x 3 floats = 24 KB, half the 48 KB L1 of
 * the 2-core benchmark machine. (The default bins' cell table, 46 KB, does
 * not fit beside it; the arithmetic path reads it only for flagged pairs.) */
#define PK_TILE_COLS 2048

uint64_t pk_angcorr_block_scalar(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                                 size_t stride) {
    uint64_t n_fp64 = 0;
    for (size_t i = i0; i < i1; i++) {
        size_t js = j0;
        if (job->autocorr && js < i + 1) js = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        for (size_t j = js; j < j1; j++) {
            int32_t s = pk_pair_slot_scalar(job, i, j, fx, fy, fz, &n_fp64);
            hist4[(j & 3) * stride + (size_t)s]++;
        }
    }
    return n_fp64;
}

/* The anchor: what a plain float32 OpenMP loop does. acos by Abramowitz &
 * Stegun 4.4.46 (|error| <= 2e-8 rad in exact arithmetic), bins by
 * truncation. No settling, so pairs near edges may land in the neighbour. */
static float acos_poly(float x) {
    float ax = x < 0 ? -x : x;
    float p = -0.0012624911f;
    p = p * ax + 0.0066700901f;
    p = p * ax - 0.0170881256f;
    p = p * ax + 0.0308918810f;
    p = p * ax - 0.0501743046f;
    p = p * ax + 0.0889789874f;
    p = p * ax - 0.2145988016f;
    p = p * ax + 1.5707963050f;
    float r = sqrtf(1.0f - ax) * p;
    return x < 0 ? 3.14159265f - r : r;
}

static uint64_t block_approx(const pk_pair_job *job, size_t i0, size_t i1, size_t j0, size_t j1, uint32_t *hist4,
                             size_t stride) {
    const pk_linear_fast *lf = job->linear;
    float inv_w = lf->inv_width;
    (void)stride;
    for (size_t i = i0; i < i1; i++) {
        size_t js = j0;
        if (job->autocorr && js < i + 1) js = i + 1;
        float fx = job->fxa[i], fy = job->fya[i], fz = job->fza[i];
        for (size_t j = js; j < j1; j++) {
            float d = fx * job->fxb[j] + fy * job->fyb[j] + fz * job->fzb[j];
            d = d > 1.0f ? 1.0f : d < -1.0f ? -1.0f : d;
            float t = acos_poly(d) * inv_w - lf->t_offset;
            int32_t s = t < 0 ? 0 : (int32_t)t + 1;
            hist4[s > lf->last_slot ? lf->last_slot : s]++;
        }
    }
    return 0;
}

pk_block_fn pk_angcorr_block_fn(int kernel, int linear) {
    switch (kernel) {
    case PK_ANGCORR_KERNEL_CPU_SCALAR: return pk_angcorr_block_scalar;
    case PK_ANGCORR_KERNEL_CPU_APPROX: return linear ? block_approx : NULL;
#if defined(__x86_64__)
    case PK_ANGCORR_KERNEL_CPU_AVX2_TABLE: return pk_angcorr_block_avx2;
    case PK_ANGCORR_KERNEL_CPU_AVX512_TABLE: return pk_angcorr_block_avx512;
    case PK_ANGCORR_KERNEL_CPU_AVX2: return linear ? pk_angcorr_block_avx2_linear : pk_angcorr_block_avx2;
    case PK_ANGCORR_KERNEL_CPU_AVX512: return linear ? pk_angcorr_block_avx512_linear : pk_angcorr_block_avx512;
#endif
    default: return NULL;
    }
}

static float *floats_from_doubles(const double *v, size_t n) {
    float *f = pk_aligned_alloc((n + 16) * sizeof(float));
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
    return f;
}

static pk_status count_ref(pk_context *ctx, const pk_bins *bins, const pk_unit_vectors *a, const pk_unit_vectors *b,
                           uint64_t *slots, pk_progress *progress) {
    const size_t rows = 64;
    for (size_t i0 = 0; i0 < a->n; i0 += rows) {
        size_t i1 = i0 + rows < a->n ? i0 + rows : a->n;
        pk_angcorr_ref_rows(bins, a, b, i0, i1, slots);
        if (pk_progress_add(progress, (double)(i1 - i0) * (double)b->n, 1))
            return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    }
    return PK_OK;
}

pk_status pk_angcorr_count_cpu(pk_context *ctx, int kernel, const pk_catalog *a, const pk_catalog *b,
                               const pk_bins *bins, const pk_edge_table *table, uint64_t *slots, pk_pair_stats *stats,
                               pk_progress *progress) {
    int autocorr = b == NULL;
    if (autocorr) b = a;
    size_t n_slots = (size_t)table->n_slots;
    pk_unit_vectors va = {0}, vb = {0};
    pk_status st = pk_unit_vectors_make(ctx, a, &va);
    if (st) return st;
    if (!autocorr && (st = pk_unit_vectors_make(ctx, b, &vb)) != PK_OK) {
        pk_unit_vectors_free(&va);
        return st;
    }
    const pk_unit_vectors *ub = autocorr ? &va : &vb;

    if (kernel == PK_ANGCORR_KERNEL_REF) {
        stats->pairs_visited = (uint64_t)a->n * (uint64_t)b->n;
        stats->pairs_fp64 = stats->pairs_visited;
        st = count_ref(ctx, bins, &va, ub, slots, progress);
        pk_unit_vectors_free(&va);
        pk_unit_vectors_free(&vb);
        return st;
    }
    pk_linear_fast linear;
    int use_linear = pk_linear_fast_init(bins, &linear);
    pk_block_fn block = pk_angcorr_block_fn(kernel, use_linear);
    if (!block) {
        pk_unit_vectors_free(&va);
        pk_unit_vectors_free(&vb);
        if (kernel == PK_ANGCORR_KERNEL_CPU_APPROX)
            return pk_fail(ctx, PK_ERR_INVALID, "the approximate anchor kernel takes linear bins only");
        return pk_fail(ctx, PK_ERR_INVALID, "kernel %d is not a CPU kernel", kernel);
    }

    pk_pair_job job = {0};
    job.table = table;
    job.linear = use_linear ? &linear : NULL;
    job.n_a = a->n;
    job.n_b = b->n;
    job.xa = va.x, job.ya = va.y, job.za = va.z;
    job.xb = ub->x, job.yb = ub->y, job.zb = ub->z;
    job.autocorr = autocorr;
    float *fa[3] = {floats_from_doubles(va.x, a->n), floats_from_doubles(va.y, a->n), floats_from_doubles(va.z, a->n)};
    float *fb[3] = {NULL, NULL, NULL};
    if (!autocorr) {
        fb[0] = floats_from_doubles(vb.x, b->n);
        fb[1] = floats_from_doubles(vb.y, b->n);
        fb[2] = floats_from_doubles(vb.z, b->n);
    }
    job.fxa = fa[0], job.fya = fa[1], job.fza = fa[2];
    job.fxb = autocorr ? fa[0] : fb[0];
    job.fyb = autocorr ? fa[1] : fb[1];
    job.fzb = autocorr ? fa[2] : fb[2];

    int n_threads = 1;
#ifdef _OPENMP
    n_threads = pk_thread_count(ctx);
#endif
    size_t stride = (n_slots + 15) & ~(size_t)15;
    uint64_t *thread_slots = calloc((size_t)n_threads * n_slots, sizeof(uint64_t));
    uint64_t *thread_fp64 = calloc((size_t)n_threads, sizeof(uint64_t));
    int alloc_failed =
        !fa[0] || !fa[1] || !fa[2] || !thread_slots || !thread_fp64 || (!autocorr && (!fb[0] || !fb[1] || !fb[2]));

    size_t n_tiles = (a->n + PK_TILE_ROWS - 1) / PK_TILE_ROWS;
    int cancelled = 0;
    if (!alloc_failed) {
#pragma omp parallel num_threads(n_threads)
        {
            int tid = pk_thread_num();
            uint32_t *hist4 = pk_aligned_alloc(4 * stride * sizeof(uint32_t));
            uint64_t *mine = thread_slots + (size_t)tid * n_slots;
            if (!hist4) {
#pragma omp atomic write
                alloc_failed = 1;
            } else {
                memset(hist4, 0, 4 * stride * sizeof(uint32_t));
            }
#pragma omp for schedule(dynamic, 1)
            for (size_t t = 0; t < n_tiles; t++) {
                int stop;
#pragma omp atomic read
                stop = cancelled;
                if (stop || !hist4) continue;
                size_t i0 = t * PK_TILE_ROWS;
                size_t i1 = i0 + PK_TILE_ROWS < a->n ? i0 + PK_TILE_ROWS : a->n;
                size_t jbeg = autocorr ? i0 : 0;
                for (size_t j0 = jbeg; j0 < b->n; j0 += PK_TILE_COLS) {
                    /* A tile of 256 x 10^5 pairs takes up to half a second on
                     * a busy machine: Ctrl-C is looked at every block. */
                    if (j0 > jbeg && pk_progress_add(progress, 0.0, tid == 0)) {
#pragma omp atomic write
                        cancelled = 1;
                        break;
                    }
                    size_t j1 = j0 + PK_TILE_COLS < b->n ? j0 + PK_TILE_COLS : b->n;
                    thread_fp64[tid] += block(&job, i0, i1, j0, j1, hist4, stride);
                    for (int c = 0; c < 4; c++) {
                        uint32_t *h = hist4 + (size_t)c * stride;
                        for (size_t s = 0; s < n_slots; s++) {
                            mine[s] += h[s];
                            h[s] = 0;
                        }
                    }
                }
                double work =
                    autocorr ? (double)(i1 - i0) * (double)(b->n - i0) - 0.5 * (double)(i1 - i0) * (double)(i1 - i0 + 1)
                             : (double)(i1 - i0) * (double)b->n;
                if (pk_progress_add(progress, work, tid == 0)) {
#pragma omp atomic write
                    cancelled = 1;
                }
            }
            pk_aligned_free(hist4);
        }
    }
    pk_status result = PK_OK;
    if (alloc_failed) {
        result = pk_fail(ctx, PK_ERR_NOMEM, "out of memory for pair counting");
    } else if (cancelled) {
        result = pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    } else {
        uint64_t n_fp64 = 0;
        for (int t = 0; t < n_threads; t++) {
            n_fp64 += thread_fp64[t];
            for (size_t s = 0; s < n_slots; s++) slots[s] += thread_slots[(size_t)t * n_slots + s];
        }
        if (autocorr) {
            for (size_t s = 0; s < n_slots; s++) slots[s] *= 2;
            for (size_t i = 0; i < a->n; i++) {
                double d = pk_angcorr_dot_ref(va.x[i], va.y[i], va.z[i], va.x[i], va.y[i], va.z[i]);
                slots[pk_edge_table_slot_fp64(table, d)]++;
            }
            n_fp64 += a->n;
            stats->pairs_visited = (uint64_t)a->n * (uint64_t)(a->n - 1) / 2 + a->n;
        } else {
            stats->pairs_visited = (uint64_t)a->n * (uint64_t)b->n;
        }
        stats->pairs_fp64 = n_fp64;
    }
    free(thread_slots);
    free(thread_fp64);
    for (int c = 0; c < 3; c++) {
        pk_aligned_free(fa[c]);
        pk_aligned_free(fb[c]);
    }
    pk_unit_vectors_free(&va);
    pk_unit_vectors_free(&vb);
    return result;
}
