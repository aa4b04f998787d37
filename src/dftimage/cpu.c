/* cpu.c - the CPU backend of dftimage: tiles of 32 x 8 pixels shared out
 * by OpenMP, the per-visibility table of each tile (tile-centred phases in
 * float64, see dftimage_internal.h), the portable float32 kernel, and the
 * float64 kernel.
 *
 * A tile's pixels are summed over the visibilities in order, chunk after
 * chunk, by one thread, so an image does not depend on the thread count.
 * The SIMD kernels (cpu_avx2.c, cpu_avx512.c) take the same table and tile.
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dftimage_internal.h"

/* ---- the portable float32 kernel ------------------------------------------ */

void pk_dft_block_scalar(const pk_dft_table *t, pk_dft_tile *tile, int want_imag) {
    for (size_t j = 0; j < t->n; j++) {
        const float U = t->U[j], V = t->V[j], W = t->W[j], R = t->R[j], vr = t->vr[j], vi = t->vi[j];
        for (int p = 0; p < PK_DFT_TILE_PIX; p++) {
            float x = R + U * tile->dl[p] + V * tile->dm[p] + W * tile->dn[p];
            float k = (x + PK_DFT_ROUND_MAGIC) - PK_DFT_ROUND_MAGIC;
            float r = x - k;
            float c = pk_dft_cos2pi_f(r);
            if (want_imag) {
                float s = pk_dft_sin2pi_f(r);
                tile->acc_re[p] += vr * c - vi * s;
                tile->acc_im[p] += vr * s + vi * c;
            } else {
                tile->acc_re[p] += vr * c;
            }
        }
    }
}

static pk_dft_block_fn block_fn_for(int kernel) {
    switch (kernel) {
    case PK_DFTIMAGE_KERNEL_CPU_SCALAR: return pk_dft_block_scalar;
#if defined(__x86_64__)
    case PK_DFTIMAGE_KERNEL_CPU_AVX2: return pk_dft_block_avx2;
    case PK_DFTIMAGE_KERNEL_CPU_AVX512: return pk_dft_block_avx512;
#endif
    default: return NULL;
    }
}

/* ---- the float64 kernel ---------------------------------------------------- */

typedef struct tile_f64 {
    double dl[PK_DFT_TILE_PIX], dm[PK_DFT_TILE_PIX], dn[PK_DFT_TILE_PIX];
    double acc_re[PK_DFT_TILE_PIX], acc_im[PK_DFT_TILE_PIX];
} tile_f64;

/* All visibilities into one tile: per visibility the tile-centre phase,
 * then per pixel the offset phase and a float64 sincos. Compiled for
 * AVX-512, AVX2 and the baseline; the loader picks one. */
/* the attribute would otherwise move the name onto a line of its own */
/* clang-format off */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PK_SANITIZE_BUILD)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void block_f64(const pk_vis *vis, int sign, double l0, double m0, double n0, tile_f64 *tile) {
    /* clang-format on */
    double sg = (double)sign;
    const double *restrict dl = tile->dl, *restrict dm = tile->dm, *restrict dn = tile->dn;
    double *restrict acc_re = tile->acc_re, *restrict acc_im = tile->acc_im;
    for (size_t k = 0; k < vis->n; k++) {
        double su = sg * vis->u[k], sv = sg * vis->v[k], sw = sg * vis->w[k];
        double ph0 = pk_dft_frac(su * l0 + sv * m0 + sw * n0);
        double vr = vis->re[k], vi = vis->im[k];
        /* clang (the fuzz build) cannot vectorise this loop and warns when
         * asked to; the build that matters, gcc's target clones, does */
#ifndef __clang__
#pragma omp simd
#endif
        for (int p = 0; p < PK_DFT_TILE_PIX; p++) {
            double x = ph0 + su * dl[p] + sv * dm[p] + sw * dn[p];
            pk_dft_sc e = pk_dft_sincos2pi_d(x);
            acc_re[p] += vr * e.c - vi * e.s;
            acc_im[p] += vr * e.s + vi * e.c;
        }
    }
}

/* ---- tiles ------------------------------------------------------------------- */

typedef struct tile_geom {
    size_t a0, b0;     /* first pixel */
    double l0, m0, n0; /* centre */
} tile_geom;

static tile_geom tile_at(const pk_dft_job *job, size_t tx, size_t ty) {
    tile_geom g;
    g.a0 = tx * PK_DFT_TILE_W;
    g.b0 = ty * PK_DFT_TILE_H;
    g.l0 = pk_dft_pixel_lm(g.a0 + PK_DFT_TILE_W / 2, job->n, job->cell);
    g.m0 = pk_dft_pixel_lm(g.b0 + PK_DFT_TILE_H / 2, job->n, job->cell);
    g.n0 = pk_dft_nprime(g.l0, g.m0);
    return g;
}

/* Offsets of pixel p of the tile from the centre, in double. */
static void pixel_offsets(const pk_dft_job *job, const tile_geom *g, int p, double *dl, double *dm, double *dn) {
    size_t a = g->a0 + (size_t)(p % PK_DFT_TILE_W), b = g->b0 + (size_t)(p / PK_DFT_TILE_W);
    double l = pk_dft_pixel_lm(a, job->n, job->cell), m = pk_dft_pixel_lm(b, job->n, job->cell);
    *dl = ((double)a - (double)(g->a0 + PK_DFT_TILE_W / 2)) * job->cell;
    *dm = ((double)b - (double)(g->b0 + PK_DFT_TILE_H / 2)) * job->cell;
    *dn = pk_dft_nprime(l, m) - g->n0;
}

static void store_tile(const pk_dft_job *job, const tile_geom *g, const double *re, const double *im) {
    for (int p = 0; p < PK_DFT_TILE_PIX; p++) {
        size_t a = g->a0 + (size_t)(p % PK_DFT_TILE_W), b = g->b0 + (size_t)(p / PK_DFT_TILE_W);
        if (a >= job->n || b >= job->n) continue;
        job->re[b * job->n + a] = re[p];
        if (job->im) job->im[b * job->n + a] = im[p];
    }
}

/* Per-visibility signed amplitude and phase (turns) for the real-only mode
 * (pk_dft_polar). */
typedef struct polar_vis {
    double *amp, *psi;
} polar_vis;

static pk_status polar_make(pk_context *ctx, const pk_vis *vis, polar_vis *pv) {
    pv->amp = malloc((vis->n + 1) * sizeof(double));
    pv->psi = malloc((vis->n + 1) * sizeof(double));
    if (!pv->amp || !pv->psi) {
        free(pv->amp);
        free(pv->psi);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for %zu visibilities", vis->n);
    }
    for (size_t k = 0; k < vis->n; k++) pk_dft_polar(vis->re[k], vis->im[k], &pv->amp[k], &pv->psi[k]);
    return PK_OK;
}

/* The table of visibilities [k0, k0 + count) for the tile centred at g. */
static void table_fill(const pk_dft_job *job, const polar_vis *pv, const tile_geom *g, size_t k0, size_t count,
                       pk_dft_table *t) {
    const pk_vis *vis = job->vis;
    double sg = (double)job->sign;
    for (size_t j = 0; j < count; j++) {
        size_t k = k0 + j;
        double su = sg * vis->u[k], sv = sg * vis->v[k], sw = sg * vis->w[k];
        double ph = su * g->l0 + sv * g->m0 + sw * g->n0;
        if (!job->want_imag) ph += pv->psi[k];
        t->U[j] = (float)su;
        t->V[j] = (float)sv;
        t->W[j] = (float)sw;
        t->R[j] = (float)pk_dft_frac(ph);
        t->vr[j] = (float)(job->want_imag ? vis->re[k] : pv->amp[k]);
        t->vi[j] = (float)(job->want_imag ? vis->im[k] : 0.0);
    }
    t->n = count;
}

static int thread_count(const pk_context *ctx) {
#ifdef _OPENMP
    return pk_thread_count(ctx);
#else
    (void)ctx;
    return 1;
#endif
}

pk_status pk_dft_run_cpu(pk_context *ctx, int kernel, const pk_dft_job *job, pk_progress *progress) {
    if (kernel == PK_DFTIMAGE_KERNEL_REF) return pk_dft_run_ref(ctx, job, progress);
    int f64 = kernel == PK_DFTIMAGE_KERNEL_CPU_F64;
    pk_dft_block_fn block = block_fn_for(kernel);
    if (!f64 && !block) return pk_fail(ctx, PK_ERR_INVALID, "kernel %d is not a CPU kernel", kernel);

    polar_vis pv = {NULL, NULL};
    if (!f64 && !job->want_imag) {
        pk_status st = polar_make(ctx, job->vis, &pv);
        if (st) return st;
    }
    size_t nx = (job->n + PK_DFT_TILE_W - 1) / PK_DFT_TILE_W, ny = (job->n + PK_DFT_TILE_H - 1) / PK_DFT_TILE_H;
    size_t n_tiles = nx * ny;
    int cancelled = 0, alloc_failed = 0;
#pragma omp parallel num_threads(thread_count(ctx))
    {
        int owner = pk_thread_num() == 0;
        pk_dft_tile *tile = NULL;
        tile_f64 *tile64 = NULL;
        float *table_mem = NULL;
        if (f64) {
            tile64 = pk_aligned_alloc(sizeof *tile64);
        } else {
            tile = pk_aligned_alloc(sizeof *tile);
            table_mem = pk_aligned_alloc(6 * PK_DFT_CHUNK * sizeof(float));
        }
        if (f64 ? !tile64 : (!tile || !table_mem)) {
#pragma omp atomic write
            alloc_failed = 1;
        }
        pk_dft_table table = {0};
        if (table_mem) {
            table.U = table_mem;
            table.V = table_mem + PK_DFT_CHUNK;
            table.W = table_mem + 2 * PK_DFT_CHUNK;
            table.R = table_mem + 3 * PK_DFT_CHUNK;
            table.vr = table_mem + 4 * PK_DFT_CHUNK;
            table.vi = table_mem + 5 * PK_DFT_CHUNK;
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < n_tiles; t++) {
            int stop;
#pragma omp atomic read
            stop = cancelled;
            if (stop || alloc_failed) continue;
            tile_geom g = tile_at(job, t % nx, t / nx);
            if (f64) {
                for (int p = 0; p < PK_DFT_TILE_PIX; p++) {
                    pixel_offsets(job, &g, p, &tile64->dl[p], &tile64->dm[p], &tile64->dn[p]);
                    tile64->acc_re[p] = tile64->acc_im[p] = 0.0;
                }
                block_f64(job->vis, job->sign, g.l0, g.m0, g.n0, tile64);
                store_tile(job, &g, tile64->acc_re, tile64->acc_im);
            } else {
                for (int p = 0; p < PK_DFT_TILE_PIX; p++) {
                    double dl, dm, dn;
                    pixel_offsets(job, &g, p, &dl, &dm, &dn);
                    tile->dl[p] = (float)dl;
                    tile->dm[p] = (float)dm;
                    tile->dn[p] = (float)dn;
                    tile->acc_re[p] = tile->acc_im[p] = 0.0f;
                }
                /* float32 sums over one chunk, then float64 across chunks:
                 * a float32 sum of 1e6 unit terms alone would carry a
                 * relative error near 3e-5. */
                double re[PK_DFT_TILE_PIX] = {0}, im[PK_DFT_TILE_PIX] = {0};
                for (size_t k0 = 0; k0 < job->vis->n; k0 += PK_DFT_CHUNK) {
                    size_t count = job->vis->n - k0 < PK_DFT_CHUNK ? job->vis->n - k0 : PK_DFT_CHUNK;
                    table_fill(job, &pv, &g, k0, count, &table);
                    block(&table, tile, job->want_imag);
                    for (int p = 0; p < PK_DFT_TILE_PIX; p++) {
                        re[p] += (double)tile->acc_re[p];
                        im[p] += (double)tile->acc_im[p];
                        tile->acc_re[p] = tile->acc_im[p] = 0.0f;
                    }
                }
                store_tile(job, &g, re, im);
            }
            if (pk_progress_add(progress, (double)PK_DFT_TILE_PIX * (double)job->vis->n, owner)) {
#pragma omp atomic write
                cancelled = 1;
            }
        }
        pk_aligned_free(tile);
        pk_aligned_free(tile64);
        pk_aligned_free(table_mem);
    }
    free(pv.amp);
    free(pv.psi);
    if (alloc_failed) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the CPU tiles");
    if (cancelled) return pk_fail(ctx, PK_ERR_CANCELLED, "cancelled");
    return PK_OK;
}
