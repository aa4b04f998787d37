/* gpu_table.c - the edge table in the form the CUDA kernels read (see
 * gpu_table.h). Host code only, built with or without CUDA so that its
 * windows can be checked on any machine.
 *
 * The chord windows are derived from the edge table's c2 windows alone
 * (shifted and widened), the dot windows from its float64 thresholds and
 * PK_GPU_DOT_ERROR_ULPS; both are then made monotone exactly as bins.c
 * makes the c2 windows, and the cells are built from them with the rule
 * bins.c uses.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_table.h"

static int32_t bits_from_float(float f) {
    int32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static float lo_of(const pk_gpu_table *g, int32_t s) {
    return g->lohi[2 * s];
}

static float hi_of(const pk_gpu_table *g, int32_t s) {
    return g->lohi[2 * s + 1];
}

/* #{s <= n_bounds : hi[s] <= q}: boundaries certainly passed at q. */
static int32_t passed(const pk_gpu_table *g, float q) {
    int32_t lo = 0, hi = g->n_bounds;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (hi_of(g, mid) <= q) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

double pk_gpu_first_boundary_c2(const pk_edge_table *t) {
    double first = (double)INFINITY;
    for (int32_t s = 0; s < t->n_bounds; s++) {
        double T = t->dot_threshold[s];
        if (!isfinite(T)) continue;
        double c = 2.0 - 2.0 * T;
        if (c > 0 && c < first) first = c;
    }
    return first;
}

/* The first binade of the chord cells: as bins.c, two binades below the
 * smallest positive window edge, and no higher than 2^-20. */
static int chord_first_exponent(const pk_edge_table *t) {
    int e_min = -20;
    for (int32_t s = 0; s < t->n_bounds; s++) {
        float lo = t->c2_lo[s];
        if (lo > 0 && isfinite(lo)) {
            int e;
            frexpf(lo, &e);
            if (e - 2 < e_min) e_min = e - 2;
            break;
        }
    }
    return e_min < -125 ? -125 : e_min;
}

pk_status pk_gpu_table_build(pk_context *ctx, const pk_edge_table *t, pk_gpu_space space, int clamped, int cell_bits,
                             pk_gpu_table *g) {
    memset(g, 0, sizeof *g);
    if (cell_bits < 6 || cell_bits > 12)
        return pk_fail(ctx, PK_ERR_INVALID, "GPU edge table: %d mantissa bits per cell is outside 6..12", cell_bits);
    if (t->n_bounds - 1 > PK_GPU_TABLE_MAX_BINS)
        return pk_fail(ctx, PK_ERR_UNSUPPORTED, "the CUDA table kernels take at most %d bins (%d given)",
                       PK_GPU_TABLE_MAX_BINS, t->n_bounds - 1);
    if (space == PK_GPU_SPACE_DOT && clamped)
        return pk_fail(ctx, PK_ERR_INVALID, "dot-space GPU tables always carry an offset");
    g->space = space;
    g->clamped = clamped;
    g->n_bounds = t->n_bounds;
    int32_t nb = t->n_bounds;
    g->lohi = malloc(2 * ((size_t)nb + 2) * sizeof(float));
    if (!g->lohi) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the GPU edge table");

    int e_first; /* cells start at 2^e_first */
    if (space == PK_GPU_SPACE_CHORD) {
        e_first = chord_first_exponent(t);
        double off = clamped ? 0.0 : ldexp(1.0, e_first);
        /* q = off + c2 rounds each partial sum, now larger by off: at most
         * 3 * 2^-24 * off more error than the c2 windows allow for; 2^-20 *
         * off covers it. */
        double widen = ldexp(off, -20);
        g->offset = (float)off;
        g->q_min = (float)off;
        for (int32_t s = 0; s < nb; s++) {
            float lo = t->c2_lo[s], hi = t->c2_hi[s];
            if (isfinite(lo)) lo = pk_float_down((double)lo + off - widen);
            if (isfinite(hi)) hi = pk_float_up((double)hi + off + widen);
            g->lohi[2 * s] = lo;
            g->lohi[2 * s + 1] = hi;
        }
    } else {
        /* q >= 2^-19 - PK_GPU_DOT_ERROR_ULPS * 2^-24 > 2^-20 */
        e_first = -20;
        double off = ldexp(1.0, -19);
        double err = ldexp(PK_GPU_DOT_ERROR_ULPS, -24);
        g->offset = (float)off;
        g->q_min = (float)ldexp(1.0, -20);
        for (int32_t s = 0; s < nb; s++) {
            double T = t->dot_threshold[s];
            float lo, hi;
            if (isinf(T) && T > 0) {
                lo = hi = -INFINITY; /* always passed */
            } else if (isinf(T)) {
                lo = hi = INFINITY; /* never passed */
            } else {
                double q = (1.0 + off) - T;
                lo = pk_float_down(q - err);
                hi = pk_float_up(q + err);
            }
            g->lohi[2 * s] = lo;
            g->lohi[2 * s + 1] = hi;
        }
        for (int32_t s = nb - 1; s > 0; s--)
            if (g->lohi[2 * (s - 1)] > g->lohi[2 * s]) g->lohi[2 * (s - 1)] = g->lohi[2 * s];
        for (int32_t s = 1; s < nb; s++)
            if (g->lohi[2 * s + 1] < g->lohi[2 * (s - 1) + 1]) g->lohi[2 * s + 1] = g->lohi[2 * (s - 1) + 1];
    }
    /* The chord windows come from monotone c2 windows shifted by one
     * constant, so they stay monotone (outward rounding of a monotone
     * sequence is monotone). */
    g->lohi[2 * nb] = g->lohi[2 * nb + 1] = INFINITY;
    g->lohi[2 * (nb + 1)] = -INFINITY;
    g->lohi[2 * (nb + 1) + 1] = INFINITY;

    /* clamped: the first cell also takes every q below 2^e_first */
    int shift = 23 - cell_bits;
    g->cell_shift = shift;
    g->cell_base = bits_from_float(ldexpf(1.0f, e_first)) >> shift;
    g->n_cells = (bits_from_float(8.0f) >> shift) - g->cell_base;
    g->cells = malloc((size_t)g->n_cells * sizeof(uint16_t));
    if (!g->cells) {
        pk_gpu_table_free(g);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the GPU edge table");
    }
    int32_t n_multi = 0;
    for (int32_t c = 0; c < g->n_cells; c++) {
        float a = c == 0 && clamped ? -INFINITY : pk_float_from_bits((c + g->cell_base) << shift);
        float b = c == g->n_cells - 1 ? INFINITY : pk_float_from_bits((c + 1 + g->cell_base) << shift);
        int32_t s0 = passed(g, a);
        if (s0 + 1 <= nb && lo_of(g, s0 + 1) < b) {
            s0 = nb + 1;
            n_multi++;
        }
        g->cells[c] = (uint16_t)(8 * s0);
    }
    g->multi_share = (double)n_multi / (double)g->n_cells;
    if (space == PK_GPU_SPACE_DOT) {
        /* the constant width: the widest window a packed cell uses, at
         * most 2 err plus an ulp of q < 4 at each end; windows the
         * monotone fix-ups widened beyond that take the multi path */
        double cap = 2.0 * ldexp(PK_GPU_DOT_ERROR_ULPS, -24) + ldexp(1.0, -21);
        double width = 0;
        for (int32_t c = 0; c < g->n_cells; c++) {
            int32_t s0 = g->cells[c] / 8;
            if (s0 > nb || !isfinite(hi_of(g, s0))) continue;
            double w = (double)hi_of(g, s0) - (double)lo_of(g, s0);
            if (w <= cap && w > width) width = w;
        }
        g->packed_width = pk_float_up(width);
        g->packed = malloc(2 * (size_t)g->n_cells * sizeof(uint32_t));
        if (!g->packed) {
            pk_gpu_table_free(g);
            return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the GPU edge table");
        }
        for (int32_t c = 0; c < g->n_cells; c++) {
            int32_t s0 = g->cells[c] / 8;
            float hi = NAN;
            if (s0 <= nb) {
                float h = hi_of(g, s0), l = lo_of(g, s0);
                if (!isfinite(h) || (double)h - (double)l <= (double)g->packed_width) hi = h;
            }
            g->packed[2 * c] = (uint32_t)bits_from_float(hi);
            g->packed[2 * c + 1] = (uint32_t)g->cells[c];
        }
    }
    return PK_OK;
}

void pk_gpu_table_free(pk_gpu_table *g) {
    if (!g) return;
    free(g->lohi);
    free(g->cells);
    free(g->packed);
    memset(g, 0, sizeof *g);
}

/* ---- kept with the edge table ------------------------------------------- */

/* The GPU tables built from one edge table, one per (space, clamped,
 * cell_bits) asked for: every count of a run (a jackknife run makes
 * thousands) shares its edge table, and building a table took 30-110 us
 * on the development machine, as long as a small count's kernel. */
#define GPU_TABLE_CACHE_MAX 8

struct pk_gpu_table_cache {
    int n;
    pk_gpu_table table[GPU_TABLE_CACHE_MAX];
    int cell_bits[GPU_TABLE_CACHE_MAX];
};

struct pk_gpu_table_cache *pk_gpu_table_cache_new(void) {
    return calloc(1, sizeof(struct pk_gpu_table_cache));
}

void pk_gpu_table_cache_free(struct pk_gpu_table_cache *c) {
    if (!c) return;
    for (int k = 0; k < c->n; k++) pk_gpu_table_free(&c->table[k]);
    free(c);
}

/* dst = a copy of src with arrays of its own; 1 when out of memory. */
static int table_copy(const pk_gpu_table *src, pk_gpu_table *dst) {
    *dst = *src;
    size_t lohi = 2 * ((size_t)src->n_bounds + 2) * sizeof(float), cells = (size_t)src->n_cells * sizeof(uint16_t),
           packed = 2 * (size_t)src->n_cells * sizeof(uint32_t);
    dst->lohi = malloc(lohi);
    dst->cells = malloc(cells);
    dst->packed = src->packed ? malloc(packed) : NULL;
    if (!dst->lohi || !dst->cells || (src->packed && !dst->packed)) {
        pk_gpu_table_free(dst);
        return 1;
    }
    memcpy(dst->lohi, src->lohi, lohi);
    memcpy(dst->cells, src->cells, cells);
    if (src->packed) memcpy(dst->packed, src->packed, packed);
    return 0;
}

pk_status pk_gpu_table_get(pk_context *ctx, const pk_edge_table *t, pk_gpu_space space, int clamped, int cell_bits,
                           pk_gpu_table *g) {
    struct pk_gpu_table_cache *c = t->gpu_cache;
    if (!c) return pk_gpu_table_build(ctx, t, space, clamped, cell_bits, g);
    int found = 0, nomem = 0;
#pragma omp critical(pk_gpu_table_cache)
    for (int k = 0; k < c->n && !found; k++)
        if (c->table[k].space == space && c->table[k].clamped == clamped && c->cell_bits[k] == cell_bits) {
            found = 1;
            nomem = table_copy(&c->table[k], g);
        }
    if (nomem) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for the GPU edge table");
    if (found) return PK_OK;
    pk_status st = pk_gpu_table_build(ctx, t, space, clamped, cell_bits, g);
    if (st) return st;
#pragma omp critical(pk_gpu_table_cache)
    {
        int there = 0; /* another thread may have built it meanwhile */
        for (int k = 0; k < c->n; k++)
            there |= c->table[k].space == space && c->table[k].clamped == clamped && c->cell_bits[k] == cell_bits;
        if (!there && c->n < GPU_TABLE_CACHE_MAX && table_copy(g, &c->table[c->n]) == 0)
            c->cell_bits[c->n++] = cell_bits;
    }
    return PK_OK;
}

int32_t pk_gpu_table_slot_packed(const pk_gpu_table *g, float q) {
    int32_t idx = (bits_from_float(q) >> g->cell_shift) - g->cell_base;
    float d = pk_float_from_bits((int32_t)g->packed[2 * idx]) - q;
    int32_t s = (int32_t)g->packed[2 * idx + 1] / 8;
    if (d <= 0) return s + 1;
    return d > g->packed_width ? s : -1;
}

int pk_gpu_table_in_multi(const pk_gpu_table *g, float q) {
    int32_t idx = (bits_from_float(q) >> g->cell_shift) - g->cell_base;
    if (idx < 0) idx = 0;
    if (idx >= g->n_cells) idx = g->n_cells - 1;
    return g->cells[idx] / 8 == g->n_bounds + 1;
}

int32_t pk_gpu_table_slot(const pk_gpu_table *g, float q) {
    int32_t idx = (bits_from_float(q) >> g->cell_shift) - g->cell_base;
    if (g->clamped) {
        if (idx < 0) idx = 0;
        if (idx >= g->n_cells) idx = g->n_cells - 1;
    }
    int32_t s = g->cells[idx] / 8;
    if (s == g->n_bounds + 1) {
        s = passed(g, q);
        return q >= lo_of(g, s) ? -1 : s;
    }
    if (q >= hi_of(g, s)) return s + 1;
    return q >= lo_of(g, s) ? -1 : s;
}
