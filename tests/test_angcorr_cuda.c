/* test_angcorr_cuda.c - the CUDA backend of angcorr against the float64
 * reference.
 *
 * Without arguments: first the GPU edge tables on the host (the float32
 * arithmetic of the kernels emulated with fmaf on pairs built to sit on bin
 * edges) and the order the tiled kernels read the catalogs in, which need
 * no device; then, with a device, every exact CUDA
 * kernel on random catalogs (sizes around the tile edges, the sphere, the
 * poles, duplicates, five bin layouts). Exits 77 (skipped) without a device.
 *
 * `test_angcorr_cuda bundled [N]`: the bundled catalogs (the first N
 * objects; all by default), DD + DR + RR by the fastest CPU kernel and by
 * every CUDA kernel; prints each kernel's misbinned counts and fails when
 * an exact kernel has any. cuda-approx-acos is reported, never required.
 *
 * `test_angcorr_cuda equator N KERNEL`: an N x N cross count whose every
 * bin is known (run_equator), for sizes past any reference's reach.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr/angcorr_internal.h"
#include "angcorr/gpu_table.h"
#include "angcorr_util.h"

static int is_inexact(const char *name) {
    return strcmp(name, "cuda-approx-acos") == 0;
}

/* The CUDA kernels, exact ones only unless with_inexact. */
static int cuda_kernels(int *ids, int max, int with_inexact) {
    int n = 0;
    for (int id = PK_ANGCORR_KERNEL_CUDA_FIRST; id < PK_ANGCORR_KERNEL_CUDA_FIRST + 100 && n < max; id++) {
        const char *name = pk_angcorr_kernel_name(id);
        if (!name || (!with_inexact && is_inexact(name))) continue;
        ids[n++] = id;
    }
    return n;
}

/* ---- the tables on the host ------------------------------------------------ */

static void unit(double ra, double dec, double *v) {
    double cd = cos(dec);
    v[0] = cd * cos(ra);
    v[1] = cd * sin(ra);
    v[2] = sin(dec);
}

/* q as the kernels compute it from float unit vectors. */
static float emulate_q(const pk_gpu_table *g, const double *a, const double *b) {
    float fa[3] = {(float)a[0], (float)a[1], (float)a[2]}, fb[3] = {(float)b[0], (float)b[1], (float)b[2]};
    if (g->space == PK_GPU_SPACE_DOT)
        return fmaf(-fa[2], fb[2], fmaf(-fa[1], fb[1], fmaf(-fa[0], fb[0], 1.0f + g->offset)));
    float dx = fa[0] - fb[0], dy = fa[1] - fb[1], dz = fa[2] - fb[2];
    if (g->clamped) return fmaf(dz, dz, fmaf(dy, dy, dx * dx));
    return fmaf(dz, dz, fmaf(dy, dy, fmaf(dx, dx, g->offset)));
}

/* Pairs at bin edges +- a few ulps of the separation, and random pairs:
 * every decided slot must be the reference's. */
static void check_tables(const char *what, const pk_bins *bins, check_rng *rng) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_edge_table t;
    CHECK_OK(pk_edge_table_build(&ctx, bins, &t), &ctx);
    struct {
        pk_gpu_space space;
        int clamped, bits;
        const char *name;
    } forms[5] = {{PK_GPU_SPACE_CHORD, 1, 9, "chord clamped"},
                  {PK_GPU_SPACE_CHORD, 0, 9, "chord offset"},
                  {PK_GPU_SPACE_DOT, 0, 9, "dot"},
                  {PK_GPU_SPACE_DOT, 0, 8, "dot 8 bits"},
                  {PK_GPU_SPACE_CHORD, 0, 8, "chord 8 bits"}};
    for (int f = 0; f < 5; f++) {
        pk_gpu_table g;
        CHECK_OK(pk_gpu_table_build(&ctx, &t, forms[f].space, forms[f].clamped, forms[f].bits, &g), &ctx);
        long wrong = 0, unsure = 0, total = 0, wrong_packed = 0, unsure_packed = 0;
        size_t n_edges = bins->n_bins + 1;
        for (int rep = 0; rep < 20000; rep++) {
            double ra = 2 * M_PI * check_uniform(rng), dec = asin(2 * check_uniform(rng) - 1);
            double theta;
            if (rep % 4 == 0) {
                theta = M_PI * check_uniform(rng);
            } else {
                double edge = bins->edges[(size_t)(check_uniform(rng) * (double)n_edges)];
                theta = edge * (1 + ldexp(check_uniform(rng) - 0.5, -8 - (rep % 32))) +
                        ldexp(check_uniform(rng) - 0.5, -40);
                if (theta < 0) theta = 0;
                if (theta > M_PI) theta = M_PI;
            }
            double bearing = 2 * M_PI * check_uniform(rng);
            double dec2 = asin(sin(dec) * cos(theta) + cos(dec) * sin(theta) * cos(bearing));
            double ra2 = ra + atan2(sin(bearing) * sin(theta) * cos(dec), cos(theta) - sin(dec) * sin(dec2));
            double a[3], b[3];
            unit(ra, dec, a);
            unit(ra2, dec2, b);
            int64_t ref = pk_angcorr_slot_ref(bins, pk_angcorr_dot_ref(a[0], a[1], a[2], b[0], b[1], b[2]));
            float q = emulate_q(&g, a, b);
            CHECK(q >= g.q_min, "%s %s: q %.9g below q_min %.9g", what, forms[f].name, (double)q, (double)g.q_min);
            int32_t s = pk_gpu_table_slot(&g, q);
            total++;
            if (s < 0) unsure++;
            else if (s != ref) wrong++;
            if (g.packed) {
                s = pk_gpu_table_slot_packed(&g, q);
                if (s < 0) unsure_packed++;
                else if (s != ref) wrong_packed++;
            }
        }
        CHECK(wrong == 0, "%s %s: %ld of %ld edge pairs got a wrong slot", what, forms[f].name, wrong, total);
        CHECK(wrong_packed == 0, "%s %s packed: %ld of %ld edge pairs got a wrong slot", what, forms[f].name,
              wrong_packed, total);
        if (g.packed)
            printf("  tables %-14s %-15s: packed cells settle %.3f%%, width %.3g\n", what, forms[f].name,
                   100.0 * (double)unsure_packed / (double)total, (double)g.packed_width);
        printf("  tables %-14s %-15s: %ld pairs near edges, %.3f%% settled in float64, multi cells %.4f%%\n", what,
               forms[f].name, total, 100.0 * (double)unsure / (double)total, 100.0 * g.multi_share);
        pk_gpu_table_free(&g);
    }
    pk_edge_table_free(&t);
}

/* The tables kept with an edge table equal fresh ones, asked for once or
 * again, in any order, more settings than are kept among them. */
static void check_table_cache(const char *what, const pk_bins *bins) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_edge_table t;
    CHECK_OK(pk_edge_table_build(&ctx, bins, &t), &ctx);
    for (int round = 0; round < 2; round++)
        for (int kind = 0; kind < 3; kind++)
            for (int bits = 6; bits <= 12; bits++) {
                pk_gpu_space space = kind == 0 ? PK_GPU_SPACE_DOT : PK_GPU_SPACE_CHORD;
                int clamped = kind == 2;
                pk_gpu_table want, got;
                CHECK_OK(pk_gpu_table_build(&ctx, &t, space, clamped, bits, &want), &ctx);
                CHECK_OK(pk_gpu_table_get(&ctx, &t, space, clamped, bits, &got), &ctx);
                size_t lohi = 2 * ((size_t)want.n_bounds + 2) * sizeof(float);
                int same =
                    got.n_cells == want.n_cells && got.n_bounds == want.n_bounds && got.offset == want.offset &&
                    got.cell_base == want.cell_base && got.cell_shift == want.cell_shift &&
                    got.packed_width == want.packed_width && got.lohi != want.lohi &&
                    memcmp(got.lohi, want.lohi, lohi) == 0 &&
                    memcmp(got.cells, want.cells, (size_t)want.n_cells * sizeof(uint16_t)) == 0 &&
                    (want.packed == NULL) == (got.packed == NULL) &&
                    (!want.packed || memcmp(got.packed, want.packed, 2 * (size_t)want.n_cells * sizeof(uint32_t)) == 0);
                CHECK(same, "%s: the kept GPU table (space %d, clamped %d, %d bits, round %d) differs from a fresh one",
                      what, (int)space, clamped, bits, round);
                got.lohi[0] = -1.0f; /* the caller's own copy: the kept one stays as it was */
                pk_gpu_table_free(&want);
                pk_gpu_table_free(&got);
            }
    pk_edge_table_free(&t);
}

/* ---- the order the tiled kernels read ------------------------------------ */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The curves themselves, on whole grid cells (lo 0, scale 1): Morton
 * interleaves the bits (x lowest); Hilbert numbers the 16^3 cells of the
 * first block 0..4095, each once, each next cell a neighbour of the one
 * before. NaN falls in cell 0. */
static void check_curve_keys(void) {
    const double lo[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    int morton_bad = 0, seen_bad = 0, step_bad = 0;
    static int cell_of[4096][3];
    static unsigned char seen[4096];
    memset(seen, 0, sizeof seen);
    for (int x = 0; x < 16; x++)
        for (int y = 0; y < 16; y++)
            for (int z = 0; z < 16; z++) {
                uint32_t want = 0;
                for (int bit = 0; bit < 10; bit++)
                    want |= (uint32_t)(((x >> bit) & 1) | ((y >> bit) & 1) << 1 | ((z >> bit) & 1) << 2) << (3 * bit);
                morton_bad += pk_curve_key(1, lo, one, x + 0.5, y + 0.5, z + 0.5) != want;
                uint32_t h = pk_curve_key(2, lo, one, x + 0.5, y + 0.5, z + 0.5);
                if (h >= 4096 || seen[h]++) {
                    seen_bad++;
                    continue;
                }
                cell_of[h][0] = x, cell_of[h][1] = y, cell_of[h][2] = z;
            }
    for (int h = 1; h < 4096 && !seen_bad; h++)
        step_bad += abs(cell_of[h][0] - cell_of[h - 1][0]) + abs(cell_of[h][1] - cell_of[h - 1][1]) +
                        abs(cell_of[h][2] - cell_of[h - 1][2]) !=
                    1;
    CHECK(morton_bad == 0, "%d Morton keys are not the interleaved bits", morton_bad);
    CHECK(seen_bad == 0, "%d Hilbert keys of the first 16^3 block outside 0..4095 or repeated", seen_bad);
    CHECK(step_bad == 0, "%d steps along the Hilbert curve are not to a neighbouring cell", step_bad);
    CHECK(pk_curve_key(1, lo, one, NAN, NAN, NAN) == 0 &&
              pk_curve_key(2, lo, one, NAN, -5.0, 1e300) == pk_curve_key(2, lo, one, 0.0, 0.0, 1023.0),
          "NaN in cell 0, out-of-range coordinates clamped");
}

/* pk_unit_vectors_curve against the definition: the reference's vectors,
 * sorted by (curve key, catalog index), whatever the thread count. */
static void check_curve_order(check_rng *rng) {
    size_t sizes[] = {1, 5, 3000, 20000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        pk_catalog c = test_catalog(rng, n, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        if (n > 4) c.ra[3] = c.ra[4], c.dec[3] = c.dec[4]; /* a tie */
        pk_context ctx;
        pk_context_init(&ctx);
        pk_unit_vectors v;
        CHECK_OK(pk_unit_vectors_make(&ctx, &c, &v), &ctx);
        for (int order = 0; order <= 2; order++) {
            double lo[3] = {-1, -1, -1}, scale[3] = {511.75, 511.75, 511.75};
            const double *col[3] = {v.x, v.y, v.z};
            for (int k = 0; order == 2 && k < 3; k++) {
                double mn = 1, mx = -1;
                for (size_t i = 0; i < n; i++) mn = fmin(mn, col[k][i]), mx = fmax(mx, col[k][i]);
                lo[k] = mn;
                scale[k] = mx > mn ? 1023.5 / (mx - mn) : 0;
            }
            uint64_t *key = malloc(n * sizeof(uint64_t));
            for (size_t i = 0; i < n; i++)
                key[i] = (order ? (uint64_t)pk_curve_key(order, lo, scale, v.x[i], v.y[i], v.z[i]) << 32 : 0) | i;
            qsort(key, n, sizeof *key, cmp_u64);
            for (int threads = 1; threads <= 2; threads++) {
                ctx.n_threads = threads;
                pk_unit_vectors got;
                CHECK_OK(pk_unit_vectors_curve(&ctx, &c, order, &got), &ctx);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++) {
                    size_t j = key[i] & 0xffffffffu;
                    bad +=
                        memcmp(&got.x[i], &v.x[j], 8) || memcmp(&got.y[i], &v.y[j], 8) || memcmp(&got.z[i], &v.z[j], 8);
                }
                CHECK(got.n == n && bad == 0, "curve order %d, n = %zu, %d threads: %zu vectors out of place", order, n,
                      threads, bad);
                pk_unit_vectors_free(&got);
            }
            free(key);
        }
        pk_unit_vectors_free(&v);
        pk_catalog_free(&c);
    }
}

/* ---- the bundled catalogs ---------------------------------------------------- */

static int run_bundled(size_t n_sub) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog cat[2];
    const char *paths[2] = {"data/galaxy/data_100k_arcmin.txt", "data/galaxy/flat_100k_arcmin.txt"};
    for (int c = 0; c < 2; c++) {
        CHECK_OK(pk_catalog_read(&ctx, paths[c], PK_UNITS_ARCMIN, &cat[c]), &ctx);
        if (check_failures) return check_finish("test_angcorr_cuda bundled");
        if (n_sub && n_sub < cat[c].n) cat[c].n = n_sub;
    }
    pk_bins bins;
    CHECK_OK(pk_bins_default(&ctx, &bins), &ctx);
    size_t nb = bins.n_bins;
    pk_angcorr_options opts = {PK_BACKEND_CPU, PK_ANGCORR_KERNEL_BEST};
    pk_angcorr_result ref;
    CHECK_OK(pk_angcorr_run(&ctx, &opts, &cat[0], &cat[1], &bins, PK_ESTIMATOR_LANDY_SZALAY, &ref), &ctx);
    printf("bundled %zu x %zu, %zu bins; reference: CPU kernel %s (%.2f s)\n", cat[0].n, cat[1].n, nb,
           pk_angcorr_kernel_name(ref.stats_dd.kernel),
           ref.stats_dd.seconds + ref.stats_dr.seconds + ref.stats_rr.seconds);
    printf("%-20s %10s %14s %12s %s\n", "kernel", "kernel ms", "misbinned", "fp64 share", "");
    int ids[32];
    int n = cuda_kernels(ids, 32, 1);
    for (int k = 0; k < n; k++) {
        const char *name = pk_angcorr_kernel_name(ids[k]);
        opts.backend = PK_BACKEND_CUDA;
        opts.kernel = ids[k];
        pk_angcorr_result r;
        pk_status st = pk_angcorr_run(&ctx, &opts, &cat[0], &cat[1], &bins, PK_ESTIMATOR_LANDY_SZALAY, &r);
        CHECK_OK(st, &ctx);
        if (st) continue;
        /* counts moved: half the sum of |difference| over DD, DR, RR */
        uint64_t moved2 = 0;
        const uint64_t *got[3] = {r.dd, r.dr, r.rr}, *want[3] = {ref.dd, ref.dr, ref.rr};
        for (int c = 0; c < 3; c++)
            for (size_t q = 0; q < nb; q++)
                moved2 += got[c][q] > want[c][q] ? got[c][q] - want[c][q] : want[c][q] - got[c][q];
        double ms = r.stats_dd.kernel_ms + r.stats_dr.kernel_ms + r.stats_rr.kernel_ms;
        double fp64 = (double)(r.stats_dd.pairs_fp64 + r.stats_dr.pairs_fp64 + r.stats_rr.pairs_fp64) /
                      (double)(r.stats_dd.pairs_visited + r.stats_dr.pairs_visited + r.stats_rr.pairs_visited);
        printf("%-20s %10.2f %14llu %12.6f %s\n", name, ms, (unsigned long long)(moved2 / 2), fp64,
               is_inexact(name) ? "(inexact anchor)"
               : moved2         ? "DIFFERENT"
                                : "identical");
        if (!is_inexact(name))
            CHECK(moved2 == 0, "bundled: kernel %s misbins %llu counts", name, (unsigned long long)(moved2 / 2));
        pk_angcorr_result_free(&r);
    }
    pk_angcorr_result_free(&ref);
    pk_bins_free(&bins);
    pk_catalog_free(&cat[0]);
    pk_catalog_free(&cat[1]);
    return check_finish("test_angcorr_cuda bundled");
}

/* ---- a count of known bins, as large as wanted --------------------------------- */

/* N points on the equator at RA = i delta in both catalogs: pair (i, j) lies
 * at |i - j| delta, so every bin's count is known without a reference
 * (N for d = 0, 2 (N - d) for each d > 0). delta keeps every such separation
 * at least 1e-11 rad from a bin edge (float64 rounding of a separation is
 * ~5e-14 rad there). With N = 1.2e7 and a one-row kernel (tiles of 256 x
 * 256) the count runs past 2^31 tiles. */
static int run_equator(size_t n, const char *kernel) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins bins;
    CHECK_OK(pk_bins_default(&ctx, &bins), &ctx);
    double delta = 0;
    for (int t = 0; t < 1000 && !delta; t++) {
        double d = 0.7 * M_PI / (double)n * (1 + t * 1e-6), nearest = 1;
        for (size_t k = 1; k <= bins.n_bins && bins.edges[k] < 0.7 * M_PI + 1e-3; k++) {
            double m = round(bins.edges[k] / d);
            if (fabs(m * d - bins.edges[k]) < nearest) nearest = fabs(m * d - bins.edges[k]);
        }
        if (nearest > 1e-11) delta = d;
    }
    CHECK(delta > 0, "equator: no spacing keeps the separations off the edges");
    uint64_t *want = calloc(bins.n_bins, sizeof(uint64_t)), *got = calloc(bins.n_bins, sizeof(uint64_t));
    for (size_t d = 0; d < n; d++) {
        int64_t k = pk_bins_index(&bins, (double)d * delta);
        if (k >= 0) want[k] += d == 0 ? n : 2 * (n - d);
    }
    double *ra = malloc(n * sizeof(double)), *dec = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) ra[i] = (double)i * delta;
    pk_catalog a, b;
    CHECK_OK(pk_catalog_from_arrays(&ctx, n, ra, dec, PK_UNITS_RAD, "a", &a), &ctx);
    CHECK_OK(pk_catalog_from_arrays(&ctx, n, ra, dec, PK_UNITS_RAD, "b", &b), &ctx);
    pk_angcorr_options opts = {PK_BACKEND_CUDA, pk_angcorr_kernel_from_name(kernel)};
    CHECK(opts.kernel >= 0, "equator: no kernel named %s", kernel);
    pk_pair_stats st;
    if (!check_failures) CHECK_OK(pk_angcorr_count(&ctx, &opts, &a, &b, &bins, got, &st), &ctx);
    size_t differ = 0;
    for (size_t k = 0; k < bins.n_bins && !check_failures; k++) {
        if (got[k] != want[k] && differ++ < 5)
            printf("bin %zu: %llu counted, %llu known\n", k, (unsigned long long)got[k], (unsigned long long)want[k]);
    }
    CHECK(differ == 0, "equator: %zu bins differ from the known counts", differ);
    if (!check_failures)
        printf("equator %zu x %zu, %s: %.1f s, %.3g pairs/s, every bin as known\n", n, n, kernel, st.seconds,
               (double)n * (double)n / st.seconds);
    pk_catalog_free(&a);
    pk_catalog_free(&b);
    free(ra);
    free(dec);
    free(want);
    free(got);
    pk_bins_free(&bins);
    return check_finish("test_angcorr_cuda equator");
}

/* ---- many counts at once --------------------------------------------------- */

#ifdef PK_HAVE_CUDA
/* pk_angcorr_count_cuda_pairs against one count at a time: every pair of
 * patches (empty ones, one object, tile edges, several tiles; within one
 * catalog and across two), kernel by kernel, the slots byte for byte. */
static void check_pairs(check_rng *rng, const char *what, const pk_bins *bins, const int *ids, int n_ids, int n_p,
                        const size_t *size_a, const size_t *size_b) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_edge_table t;
    CHECK_OK(pk_edge_table_build(&ctx, bins, &t), &ctx);
    pk_catalog A[64], B[64];
    const pk_catalog *pa[64], *pb[64];
    for (int p = 0; p < n_p; p++) {
        double ra0 = 0.5 * p, dec0 = -1.2 + 2.2 * p / n_p;
        A[p] = test_catalog(rng, size_a[p], ra0, ra0 + 0.4, dec0, dec0 + 0.3);
        B[p] = test_catalog(rng, size_b[p], ra0 + 0.1, ra0 + 0.5, dec0, dec0 + 0.4);
        pa[p] = &A[p], pb[p] = &B[p];
    }
    size_t ns = (size_t)t.n_slots, max_pairs = (size_t)n_p * (size_t)n_p;
    int32_t *pp = malloc(max_pairs * sizeof(int32_t)), *qq = malloc(max_pairs * sizeof(int32_t));
    uint64_t *got = malloc(max_pairs * ns * sizeof(uint64_t)), *one = malloc(ns * sizeof(uint64_t));
    pk_pair_stats *st = calloc(max_pairs, sizeof(pk_pair_stats)), s1;
    for (int x = 0; x < n_ids; x++) {
        for (int cross = 0; cross < 2; cross++) {
            size_t n = 0;
            for (int p = 0; p < n_p; p++)
                for (int q = 0; q < n_p; q++)
                    if (A[p].n > 0 && (cross ? B[q].n : A[q].n) > 0) pp[n] = p, qq[n] = q, n++;
            pk_status r = pk_angcorr_count_cuda_pairs(&ctx, ids[x], pa, n_p, cross ? pb : NULL, n_p, pp, qq, n, bins,
                                                      &t, got, st, NULL);
            if (r == PK_ERR_UNSUPPORTED && !ctx.message[0]) continue; /* a kernel counted one pair at a time */
            CHECK_OK(r, &ctx);
            if (r) continue;
            size_t bad = 0;
            for (size_t k = 0; k < n; k++) {
                const pk_catalog *b = cross ? &B[qq[k]] : pp[k] == qq[k] ? NULL : &A[qq[k]];
                CHECK_OK(pk_angcorr_count_cuda(&ctx, ids[x], &A[pp[k]], b, bins, &t, one, &s1, NULL), &ctx);
                bad += memcmp(one, got + k * ns, ns * sizeof(uint64_t)) != 0 || st[k].pairs_visited != s1.pairs_visited;
            }
            CHECK(bad == 0, "%s, %s, %s: %zu of %zu pairs counted at once differ from single counts", what,
                  pk_angcorr_kernel_name(ids[x]), cross ? "two catalogs" : "one catalog", bad, n);
            /* the same pairs through sessions over both catalogs' patches
             * (A as set 0, B as set 1, and the other way round), in calls
             * that grow the buffers (one pair, then all), then the first
             * pairs again with each pair's table judged beforehand, with
             * every pair on the 8-bit table and with every pair on the
             * 9-bit one (exact either way, only slower) */
            uint64_t *again = malloc(max_pairs * ns * sizeof(uint64_t));
            unsigned char *use8 = malloc(max_pairs);
            for (int swap = 0; swap < 2 && again && use8; swap++) {
                pk_cuda_pairs *sess = NULL;
                CHECK_OK(
                    pk_angcorr_cuda_pairs_open(&ctx, ids[x], swap ? pb : pa, n_p, swap ? pa : pb, n_p, bins, &t, &sess),
                    &ctx);
                const int set_a = swap, set_b = cross ? !swap : swap;
                size_t bad_s = 0;
                for (int call = 0; sess && call < 5; call++) {
                    size_t k0 = call == 1 ? 1 : 0, k1 = call == 0 ? 1 : call == 1 ? n : n < 16 ? n : 16;
                    for (size_t k = k0; k < k1; k++)
                        use8[k] = call == 2
                                      ? (unsigned char)pk_angcorr_cuda_pairs_judge(sess, set_a, set_b, pp[k], qq[k])
                                  : call == 3 ? 1
                                              : 0;
                    pk_status rs =
                        pk_angcorr_cuda_pairs_count(&ctx, sess, set_a, set_b, pp + k0, qq + k0, k1 - k0,
                                                    call < 2 ? NULL : use8 + k0, again + k0 * ns, st + k0, NULL);
                    CHECK_OK(rs, &ctx);
                    for (size_t k = k0; k < k1 && rs == PK_OK; k++)
                        bad_s += memcmp(again + k * ns, got + k * ns, ns * sizeof(uint64_t)) != 0;
                }
                CHECK(sess && bad_s == 0, "%s, %s, %s: %zu pairs counted through a session (sets %d x %d) differ", what,
                      pk_angcorr_kernel_name(ids[x]), cross ? "two catalogs" : "one catalog", bad_s, set_a, set_b);
                pk_angcorr_cuda_pairs_close(sess, 0);
            }
            free(use8);
            free(again);
        }
    }
    free(pp), free(qq), free(got), free(one), free(st);
    for (int p = 0; p < n_p; p++) pk_catalog_free(&A[p]), pk_catalog_free(&B[p]);
    pk_edge_table_free(&t);
}
#endif

/* ---- cancellation ------------------------------------------------------------ */

static int stop_at_first_report(void *user, double fraction_done) {
    int *calls = user;
    (*calls)++;
    return fraction_done >= 0;
}

/* A callback that asks to stop: a count of several launches (the naive
 * kernel launches 2^28 pairs at a time) ends with PK_ERR_CANCELLED after the
 * first one. */
static void check_cancel(check_rng *rng, const pk_bins *bins) {
    pk_context ctx;
    pk_context_init(&ctx);
    int calls = 0;
    ctx.progress = stop_at_first_report;
    ctx.progress_user = &calls;
    pk_catalog a = test_catalog(rng, 20000, 0, M_PI / 2, 0, M_PI / 2);
    pk_catalog b = test_catalog(rng, 20000, 0, M_PI / 2, 0, M_PI / 2);
    uint64_t *counts = calloc(bins->n_bins, sizeof(uint64_t));
    pk_angcorr_options opts = {PK_BACKEND_CUDA, pk_angcorr_kernel_from_name("cuda-naive")};
    pk_status st = pk_angcorr_count(&ctx, &opts, &a, &b, bins, counts, NULL);
    CHECK(st == PK_ERR_CANCELLED, "cancel: status %d (%s), expected PK_ERR_CANCELLED", (int)st, ctx.message);
    CHECK(calls == 1, "cancel: the callback ran %d times, expected once", calls);
    free(counts);
    pk_catalog_free(&a);
    pk_catalog_free(&b);
}

/* ---- random catalogs --------------------------------------------------------- */

int main(int argc, char **argv) {
    check_rng rng = check_rng_make(20261130);
    if (argc >= 2 && strcmp(argv[1], "bundled") == 0) {
        if (pk_cuda_device_count() == 0) return check_skip("test_angcorr_cuda", "no CUDA device");
        return run_bundled(argc >= 3 ? (size_t)strtoull(argv[2], NULL, 10) : 0);
    }
    if (argc >= 4 && strcmp(argv[1], "equator") == 0) {
        if (pk_cuda_device_count() == 0) return check_skip("test_angcorr_cuda", "no CUDA device");
        return run_equator((size_t)strtoull(argv[2], NULL, 10), argv[3]);
    }
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins def, fine, lin, logb, many;
    CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.01 * M_PI / 180, 2000, &fine), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 1.0 * M_PI / 180, 0.5 * M_PI / 180, 100, &lin), &ctx);
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 20, &logb), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.02 * M_PI / 180, PK_GPU_TABLE_MAX_BINS + 500, &many), &ctx);
    const pk_bins *all_bins[5] = {&def, &fine, &lin, &logb, &many};
    const char *bin_names[5] = {"default", "fine", "offset-linear", "log", "many"};

    for (int k = 0; k < 4; k++) check_tables(bin_names[k], all_bins[k], &rng);
    check_curve_keys();
    check_curve_order(&rng);
    for (int k = 0; k < 4; k++) check_table_cache(bin_names[k], all_bins[k]);

    if (pk_cuda_device_count() == 0) {
        printf("test_angcorr_cuda: host table checks: %d checks, %d failed\n", check_count, check_failures);
        for (int k = 0; k < 5; k++) pk_bins_free((pk_bins *)all_bins[k]);
        if (check_failures) return 1;
        return check_skip("test_angcorr_cuda", "no CUDA device (pk_cuda_device_count() == 0)");
    }
    int ids[32];
    int n_ids = cuda_kernels(ids, 32, 0);

    /* Sizes around the tiles (rows of 256 or 1024, columns of 256). */
    size_t sizes[] = {1, 2, 7, 255, 257, 1025, 2600};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        pk_catalog a = test_catalog(&rng, n, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        pk_catalog b = test_catalog(&rng, n + 37, 0, M_PI / 2, 0, M_PI / 2);
        for (int k = 0; k < 5; k++) {
            if (k == 4 && n > 300) continue; /* the naive fallback is slow */
            char what[128];
            snprintf(what, sizeof what, "sphere n=%zu bins=%s auto", n, bin_names[k]);
            test_against_ref(what, &a, NULL, all_bins[k], ids, n_ids);
            snprintf(what, sizeof what, "patch n=%zu bins=%s cross", n, bin_names[k]);
            test_against_ref(what, &b, &a, all_bins[k], ids, n_ids);
        }
        pk_catalog_free(&a);
        pk_catalog_free(&b);
    }
    /* The poles, where RA means little. */
    {
        pk_catalog n_pole = test_catalog(&rng, 700, 0, 2 * M_PI, M_PI / 2 - 0.5 * M_PI / 180, M_PI / 2);
        pk_catalog s_pole = test_catalog(&rng, 301, 0, 2 * M_PI, -M_PI / 2, -M_PI / 2 + 0.5 * M_PI / 180);
        n_pole.dec[0] = M_PI / 2;
        n_pole.dec[1] = M_PI / 2;
        n_pole.ra[1] = 1.0;
        s_pole.dec[0] = -M_PI / 2;
        test_against_ref("north pole auto, fine bins", &n_pole, NULL, &fine, ids, n_ids);
        test_against_ref("poles cross, default bins", &n_pole, &s_pole, &def, ids, n_ids);
        test_against_ref("south pole auto, log bins", &s_pole, NULL, &logb, ids, n_ids);
        pk_catalog_free(&n_pole);
        pk_catalog_free(&s_pole);
    }
    /* Duplicates: every point three times, and one point repeated. */
    {
        pk_catalog base = test_catalog(&rng, 400, 0, M_PI / 2, 0, M_PI / 2);
        pk_catalog dup = base;
        dup.n = 1200;
        dup.ra = malloc(1200 * sizeof(double));
        dup.dec = malloc(1200 * sizeof(double));
        for (size_t i = 0; i < 1200; i++) {
            dup.ra[i] = base.ra[i % 400];
            dup.dec[i] = base.dec[i % 400];
        }
        test_against_ref("duplicates auto", &dup, NULL, &def, ids, n_ids);
        test_against_ref("duplicates cross", &dup, &base, &fine, ids, n_ids);
        for (size_t i = 0; i < 1200; i++) dup.ra[i] = 0.3, dup.dec[i] = 0.2;
        test_against_ref("one point repeated", &dup, NULL, &def, ids, n_ids);
        pk_catalog_free(&base);
        pk_catalog_free(&dup);
    }
    check_cancel(&rng, &def);
#ifdef PK_HAVE_CUDA
    {
        const size_t za[] = {0, 1, 255, 256, 1023, 1025, 2049, 3000}, zb[] = {1025, 3000, 0, 1, 7, 2049, 256, 255};
        check_pairs(&rng, "patches, default bins", &def, ids, n_ids, 8, za, zb);
        check_pairs(&rng, "patches, log bins", &logb, ids, n_ids, 8, za, zb);
        /* 8,000 bins: the slots of 48 x 48 pairs read back in three batches */
        pk_bins many_bins;
        CHECK_OK(pk_bins_log(&ctx, 0.0005, 3.0, 8000, &many_bins), &ctx);
        size_t zm[48], zn[48];
        for (int p = 0; p < 48; p++) zm[p] = (size_t)(p * 37) % 300, zn[p] = 100 + (size_t)(p * 53) % 900;
        int best = PK_ANGCORR_KERNEL_CUDA_BEST;
        check_pairs(&rng, "48 patches, 8000 bins", &many_bins, &best, 1, 48, zm, zn);
        pk_bins_free(&many_bins);
    }
#endif

    /* Many launches: each launch takes a range of items (row tile, column
     * tile) and decodes them from their index, so launches of two items
     * or of a few (cutting row tiles anywhere) must count the same. */
#ifdef PK_HAVE_CUDA
    {
        const uint64_t saved = pk_angcorr_cuda_chunk_pairs, chunk[2] = {1, 1000003};
        pk_catalog a = test_catalog(&rng, 3001, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        pk_catalog b = test_catalog(&rng, 2049, 0, M_PI / 2, 0, M_PI / 2);
        for (int c = 0; c < 2; c++) {
            pk_angcorr_cuda_chunk_pairs = chunk[c];
            char what[96];
            snprintf(what, sizeof what, "launches of %llu pairs, auto", (unsigned long long)chunk[c]);
            test_against_ref(what, &a, NULL, &def, ids, n_ids);
            snprintf(what, sizeof what, "launches of %llu pairs, cross", (unsigned long long)chunk[c]);
            test_against_ref(what, &b, &a, &logb, ids, n_ids);
        }
        pk_angcorr_cuda_chunk_pairs = saved;
        pk_catalog_free(&a);
        pk_catalog_free(&b);
    }
#endif

    /* Every pair undecided: two points 1 degree apart (a bin edge of the
     * default bins), each repeated, so that a tile holds more undecided
     * pairs than a block can queue. */
    {
        pk_catalog p = test_catalog(&rng, 1500, 0, 0, 0, 0), q = test_catalog(&rng, 1300, 0, 0, 0, 0);
        for (size_t i = 0; i < p.n; i++) p.ra[i] = 0.5, p.dec[i] = 0.3;
        for (size_t i = 0; i < q.n; i++) q.ra[i] = 0.5, q.dec[i] = 0.3 + M_PI / 180;
        test_against_ref("every pair on an edge, cross", &p, &q, &def, ids, n_ids);
        pk_catalog_free(&p);
        pk_catalog_free(&q);
    }
    pk_bins_free(&def);
    pk_bins_free(&fine);
    pk_bins_free(&lin);
    pk_bins_free(&logb);
    pk_bins_free(&many);
    return check_finish("test_angcorr_cuda");
}
