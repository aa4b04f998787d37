/* api.c - the public angcorr entry points: kernel names and choice, the
 * count (pruned through the grid where that pays) with the sums every run
 * asserts, the rows of a part of a split run (pk_angcorr_part_rows), the
 * estimators and the output formats. The edge table is bins.c's.
 *
 * The invariant: every histogram a kernel returns is checked to hold every
 * ordered pair of the catalogs it was given (n_a n_b), whichever kernel
 * made it, before it is used (count_slots).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "angcorr_internal.h"
#include "grid.h"

static const struct {
    int kernel;
    const char *name;
} cpu_kernels[] = {
    {PK_ANGCORR_KERNEL_REF, "ref"},
    {PK_ANGCORR_KERNEL_CPU_SCALAR, "scalar"},
    {PK_ANGCORR_KERNEL_CPU_AVX2_TABLE, "avx2-table"},
    {PK_ANGCORR_KERNEL_CPU_AVX512_TABLE, "avx512-table"},
    {PK_ANGCORR_KERNEL_CPU_AVX2, "avx2"},
    {PK_ANGCORR_KERNEL_CPU_AVX512, "avx512"},
    {PK_ANGCORR_KERNEL_CPU_APPROX, "cpu-approx-acos"},
};
#define N_CPU_KERNELS (sizeof cpu_kernels / sizeof cpu_kernels[0])

const char *pk_angcorr_kernel_name(int kernel) {
    if (kernel == PK_ANGCORR_KERNEL_BEST) return "best";
    for (size_t k = 0; k < N_CPU_KERNELS; k++)
        if (cpu_kernels[k].kernel == kernel) return cpu_kernels[k].name;
#ifdef PK_HAVE_CUDA
    return pk_angcorr_cuda_kernel_name(kernel);
#else
    return NULL;
#endif
}

int pk_angcorr_kernel_exact(int kernel) {
    const char *name = pk_angcorr_kernel_name(kernel);
    return name && !strstr(name, "approx");
}

int pk_angcorr_kernel_from_name(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "best") == 0) return PK_ANGCORR_KERNEL_BEST;
    for (size_t k = 0; k < N_CPU_KERNELS; k++)
        if (strcmp(cpu_kernels[k].name, name) == 0) return cpu_kernels[k].kernel;
#ifdef PK_HAVE_CUDA
    return pk_angcorr_cuda_kernel_from_name(name);
#else
    return -1;
#endif
}

int pk_angcorr_kernel_available(int kernel) {
    switch (kernel) {
    case PK_ANGCORR_KERNEL_BEST:
    case PK_ANGCORR_KERNEL_REF:
    case PK_ANGCORR_KERNEL_CPU_SCALAR:
    case PK_ANGCORR_KERNEL_CPU_APPROX: return 1;
    case PK_ANGCORR_KERNEL_CPU_AVX2:
    case PK_ANGCORR_KERNEL_CPU_AVX2_TABLE: return pk_cpu_has_avx2_fma();
    case PK_ANGCORR_KERNEL_CPU_AVX512:
    case PK_ANGCORR_KERNEL_CPU_AVX512_TABLE: return pk_cpu_has_avx512();
    default:
#ifdef PK_HAVE_CUDA
        return kernel >= PK_ANGCORR_KERNEL_CUDA_FIRST && pk_angcorr_cuda_kernel_name(kernel) != NULL &&
               pk_cuda_device_count() > 0;
#else
        return 0;
#endif
    }
}

static int is_cuda_kernel(int kernel) {
    return kernel >= PK_ANGCORR_KERNEL_CUDA_FIRST;
}

/* The fastest CPU kernel this CPU runs (measured order: docs/performance.md). */
static int best_cpu_kernel(void) {
    if (pk_cpu_has_avx512()) return PK_ANGCORR_KERNEL_CPU_AVX512;
    if (pk_cpu_has_avx2_fma()) return PK_ANGCORR_KERNEL_CPU_AVX2;
    return PK_ANGCORR_KERNEL_CPU_SCALAR;
}

pk_status pk_angcorr_choose_kernel(pk_context *ctx, const pk_angcorr_options *opts, pk_backend *backend, int *kernel) {
    pk_angcorr_options o = {PK_BACKEND_AUTO, PK_ANGCORR_KERNEL_BEST};
    if (opts) o = *opts;
    if ((unsigned)o.backend > PK_BACKEND_CUDA)
        return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_options.backend: %d is not auto (0), cpu (1) or cuda (2)",
                       (int)o.backend);
    if (o.kernel != PK_ANGCORR_KERNEL_BEST) {
        if (!pk_angcorr_kernel_name(o.kernel)) return pk_fail(ctx, PK_ERR_INVALID, "unknown kernel %d", o.kernel);
        if (!pk_angcorr_kernel_available(o.kernel)) {
            int avx512 = o.kernel == PK_ANGCORR_KERNEL_CPU_AVX512 || o.kernel == PK_ANGCORR_KERNEL_CPU_AVX512_TABLE;
            return pk_fail(ctx, PK_ERR_UNSUPPORTED, "kernel '%s' cannot run here (%s)",
                           pk_angcorr_kernel_name(o.kernel), pk_kernel_absent_reason(is_cuda_kernel(o.kernel), avx512));
        }
        *backend = is_cuda_kernel(o.kernel) ? PK_BACKEND_CUDA : PK_BACKEND_CPU;
        if (o.backend != PK_BACKEND_AUTO && o.backend != *backend)
            return pk_fail(ctx, PK_ERR_INVALID, "kernel '%s' does not belong to backend '%s'",
                           pk_angcorr_kernel_name(o.kernel), pk_backend_name(o.backend));
        *kernel = o.kernel;
        return PK_OK;
    }
    pk_status st = pk_backend_resolve(ctx, o.backend, backend);
    if (st) return st;
#ifdef PK_HAVE_CUDA
    if (*backend == PK_BACKEND_CUDA) {
        *kernel = PK_ANGCORR_KERNEL_CUDA_BEST;
        return PK_OK;
    }
#endif
    *kernel = best_cpu_kernel();
    return PK_OK;
}

static uint64_t pairs_visited_estimate(const pk_catalog *a, const pk_catalog *b) {
    return b ? (uint64_t)a->n * b->n : (uint64_t)a->n * (a->n + 1) / 2;
}

/* One count with a ready table into all slots, then the sum check. */
static pk_status count_slots(pk_context *ctx, pk_backend backend, int kernel, const pk_catalog *a, const pk_catalog *b,
                             const pk_bins *bins, const pk_edge_table *table, uint64_t *slots, pk_pair_stats *stats,
                             pk_progress *progress) {
    memset(stats, 0, sizeof *stats);
    memset(slots, 0, (size_t)table->n_slots * sizeof(uint64_t));
    double t0 = pk_now();
    pk_status st;
#ifdef PK_HAVE_CUDA
    if (backend == PK_BACKEND_CUDA) st = pk_angcorr_count_cuda(ctx, kernel, a, b, bins, table, slots, stats, progress);
    else
#endif
    {
        /* Small theta_max: the pruned path (grid.h) skips far cell pairs. */
        st = PK_ERR_UNSUPPORTED;
        if (pk_angcorr_grid_wanted(kernel, bins))
            st = pk_angcorr_count_grid(ctx, kernel, a, NULL, b, NULL, bins, table, PK_PRUNE_AUTO, 0, slots, NULL, NULL,
                                       stats, progress);
        if (st == PK_ERR_UNSUPPORTED) st = pk_angcorr_count_cpu(ctx, kernel, a, b, bins, table, slots, stats, progress);
    }
    (void)backend;
    if (st) return st;
    stats->seconds = pk_now() - t0;
    stats->kernel = kernel;
    uint64_t n_b = b ? b->n : a->n;
    stats->pairs_total = (uint64_t)a->n * n_b;
    uint64_t sum = 0;
    for (int32_t s = 0; s < table->n_slots; s++) sum += slots[s];
    stats->pairs_in_range = sum - slots[0] - slots[table->n_slots - 1];
    if (sum != stats->pairs_total)
        return pk_fail(ctx, PK_ERR_INTERNAL,
                       "pair count check failed: the histogram holds %llu pairs, expected %llu (kernel %s)",
                       (unsigned long long)sum, (unsigned long long)stats->pairs_total, pk_angcorr_kernel_name(kernel));
    return PK_OK;
}

/* Rows before which `share` of the triangle's work lies: row i of an
 * autocorrelation owns the ordered pairs (i, j), (j, i) for j > i and
 * (i, i), 2 (n - i) - 1 of them; W(i) = i (2n - i) pairs lie before row i. */
static size_t triangle_split(size_t n, double share) {
    double target = share * (double)n * (double)n;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((double)mid * (2.0 * (double)n - (double)mid) < target) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void pk_angcorr_part_rows(size_t n, int autocorr, int part, int n_parts, size_t *begin, size_t *end) {
    if (!begin || !end) return;
    if (n_parts > 1 && (part < 0 || part >= n_parts)) { /* no such part: no rows */
        *begin = *end = 0;
        return;
    }
    if (n_parts <= 1) {
        *begin = 0;
        *end = n;
        return;
    }
    if (autocorr) {
        *begin = part == 0 ? 0 : triangle_split(n, (double)part / n_parts);
        *end = part == n_parts - 1 ? n : triangle_split(n, (double)(part + 1) / n_parts);
    } else {
        *begin = (size_t)((unsigned long long)n * (unsigned long long)part / (unsigned long long)n_parts);
        *end = (size_t)((unsigned long long)n * (unsigned long long)(part + 1) / (unsigned long long)n_parts);
    }
}

static pk_catalog catalog_rows(const pk_catalog *c, size_t begin, size_t end) {
    pk_catalog s = *c;
    s.ra = c->ra + begin;
    s.dec = c->dec + begin;
    s.n = end - begin;
    return s;
}

static void stats_add(pk_pair_stats *into, const pk_pair_stats *s, uint64_t times) {
    into->pairs_total += times * s->pairs_total;
    into->pairs_in_range += times * s->pairs_in_range;
    into->pairs_visited += s->pairs_visited;
    into->pairs_fp64 += s->pairs_fp64;
    into->seconds += s->seconds;
    into->kernel_ms += s->kernel_ms;
    into->kernel = s->kernel;
    into->blocks_per_sm = s->blocks_per_sm > into->blocks_per_sm ? s->blocks_per_sm : into->blocks_per_sm;
}

/* Part `part` of a count. A cross count takes a slice of a's rows. An
 * autocorrelation's rows S = a[r0, r1) own the triangle of S and, twice,
 * every pair of S with the rows after it T = a[r1, n): auto(S) + 2 cross(S, T),
 * each checked on its own. */
static pk_status count_part(pk_context *ctx, pk_backend backend, int kernel, int part, int n_parts, const pk_catalog *a,
                            const pk_catalog *b, const pk_bins *bins, const pk_edge_table *table, uint64_t *slots,
                            pk_pair_stats *stats, pk_progress *progress) {
    if (n_parts <= 1) return count_slots(ctx, backend, kernel, a, b, bins, table, slots, stats, progress);
    size_t r0, r1;
    pk_angcorr_part_rows(a->n, b == NULL, part, n_parts, &r0, &r1);
    memset(stats, 0, sizeof *stats);
    memset(slots, 0, (size_t)table->n_slots * sizeof(uint64_t));
    stats->kernel = kernel;
    if (r0 == r1) return PK_OK;
    pk_catalog rows = catalog_rows(a, r0, r1);
    if (b) return count_slots(ctx, backend, kernel, &rows, b, bins, table, slots, stats, progress);
    pk_status st = count_slots(ctx, backend, kernel, &rows, NULL, bins, table, slots, stats, progress);
    if (st || r1 == a->n) return st;
    pk_catalog after = catalog_rows(a, r1, a->n);
    uint64_t *cross = malloc((size_t)table->n_slots * sizeof(uint64_t));
    if (!cross) return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    pk_pair_stats auto_stats = *stats, cross_stats;
    st = count_slots(ctx, backend, kernel, &rows, &after, bins, table, cross, &cross_stats, progress);
    if (st == PK_OK) {
        for (int32_t s = 0; s < table->n_slots; s++) slots[s] += 2 * cross[s];
        memset(stats, 0, sizeof *stats);
        stats_add(stats, &auto_stats, 1);
        stats_add(stats, &cross_stats, 2);
    }
    free(cross);
    return st;
}

pk_status pk_angcorr_check_sizes(pk_context *ctx, const pk_catalog *a, const pk_catalog *b) {
    const pk_catalog *cats[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        if (cats[k] && cats[k]->n > PK_ANGCORR_MAX_OBJECTS)
            return pk_fail(ctx, PK_ERR_INVALID, "a catalog of %zu objects: at most %u (2^31 - 1) can be counted",
                           cats[k]->n, PK_ANGCORR_MAX_OBJECTS);
        if (cats[k] && cats[k]->n && (!cats[k]->ra || !cats[k]->dec))
            return pk_fail(ctx, PK_ERR_INVALID, "a catalog of %zu objects whose %s is NULL", cats[k]->n,
                           !cats[k]->ra ? "ra" : "dec");
    }
    uint64_t n_a = a ? a->n : 0, n_b = b ? b->n : n_a;
    if (n_a && n_b > UINT64_MAX / n_a)
        return pk_fail(ctx, PK_ERR_INVALID, "%llu x %llu pairs overflow a 64-bit count", (unsigned long long)n_a,
                       (unsigned long long)n_b);
    return PK_OK;
}

pk_status pk_angcorr_count(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *a, const pk_catalog *b,
                           const pk_bins *bins, uint64_t *counts, pk_pair_stats *stats) {
    pk_clear(ctx);
    if (!a) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_count: a is NULL");
    if (!bins) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_count: bins is NULL");
    if (!counts) return pk_fail(ctx, PK_ERR_INVALID, "pk_angcorr_count: counts is NULL");
    if (a->n == 0 || (b && b->n == 0)) return pk_fail(ctx, PK_ERR_INVALID, "empty catalog");
    pk_backend backend;
    int kernel;
    pk_status st = pk_angcorr_check_sizes(ctx, a, b);
    if (st) return st;
    if ((st = pk_angcorr_choose_kernel(ctx, opts, &backend, &kernel)) != PK_OK) return st;
    pk_edge_table table;
    if ((st = pk_edge_table_build(ctx, bins, &table)) != PK_OK) return st;
    uint64_t *slots = malloc((size_t)table.n_slots * sizeof(uint64_t));
    if (!slots) {
        pk_edge_table_free(&table);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    pk_pair_stats local;
    pk_progress progress;
    pk_progress_begin(&progress, ctx, (double)pairs_visited_estimate(a, b), 0.0, 1.0);
    st = count_slots(ctx, backend, kernel, a, b, bins, &table, slots, &local, &progress);
    if (st == PK_OK) {
        memcpy(counts, slots + 1, bins->n_bins * sizeof(uint64_t));
        if (stats) *stats = local;
    }
    free(slots);
    pk_edge_table_free(&table);
    return st;
}

/* ---- estimators ---------------------------------------------------------- */

/* The estimators in the enum's order, for messages. */
#define ESTIMATOR_NAMES "landy-szalay, natural, hamilton, davis-peebles"

pk_status pk_estimator_parse(const char *name, pk_estimator *out) {
    if (!name || !out) return PK_ERR_INVALID;
    if (strcmp(name, "ls") == 0 || strcmp(name, "landy-szalay") == 0) *out = PK_ESTIMATOR_LANDY_SZALAY;
    else if (strcmp(name, "natural") == 0 || strcmp(name, "peebles-hauser") == 0) *out = PK_ESTIMATOR_NATURAL;
    else if (strcmp(name, "hamilton") == 0) *out = PK_ESTIMATOR_HAMILTON;
    else if (strcmp(name, "davis-peebles") == 0 || strcmp(name, "dp") == 0) *out = PK_ESTIMATOR_DAVIS_PEEBLES;
    else return PK_ERR_INVALID;
    return PK_OK;
}

const char *pk_estimator_name(pk_estimator estimator) {
    switch (estimator) {
    case PK_ESTIMATOR_LANDY_SZALAY: return "landy-szalay";
    case PK_ESTIMATOR_NATURAL: return "natural";
    case PK_ESTIMATOR_HAMILTON: return "hamilton";
    case PK_ESTIMATOR_DAVIS_PEEBLES: return "davis-peebles";
    }
    return "unknown";
}

void pk_estimate(pk_estimator estimator, uint64_t n_data, uint64_t n_random, size_t n_bins, const uint64_t *dd,
                 const uint64_t *dr, const uint64_t *rr, double *omega) {
    if (!omega) return;
    if (!dd || !dr || !rr) {
        for (size_t k = 0; k < n_bins; k++) omega[k] = (double)NAN;
        return;
    }
    double nd = (double)n_data, nr = (double)n_random;
    double f_dd = nd * nd, f_dr = nd * nr, f_rr = nr * nr;
    for (size_t k = 0; k < n_bins; k++) {
        double DD = (double)dd[k], DR = (double)dr[k], RR = (double)rr[k];
        double w = (double)NAN;
        switch (estimator) {
        case PK_ESTIMATOR_LANDY_SZALAY:
            if (rr[k] == 0) break;
            if (n_data == n_random) w = (DD - 2.0 * DR + RR) / RR;
            else w = (DD / f_dd - 2.0 * DR / f_dr + RR / f_rr) / (RR / f_rr);
            break;
        case PK_ESTIMATOR_NATURAL:
            if (rr[k] == 0) break;
            w = (DD / f_dd) / (RR / f_rr) - 1.0;
            break;
        case PK_ESTIMATOR_HAMILTON:
            if (dr[k] == 0) break;
            w = (DD / f_dd) * (RR / f_rr) / ((DR / f_dr) * (DR / f_dr)) - 1.0;
            break;
        case PK_ESTIMATOR_DAVIS_PEEBLES:
            if (dr[k] == 0) break;
            w = (DD / f_dd) / (DR / f_dr) - 1.0;
            break;
        }
        omega[k] = w;
    }
}

/* ---- the whole correlation --------------------------------------------- */

void pk_angcorr_result_free(pk_angcorr_result *result) {
    if (!result) return;
    free(result->dd);
    free(result->dr);
    free(result->rr);
    free(result->omega);
    memset(result, 0, sizeof *result);
}

/* pk_angcorr_run_part_rr; fn: the public function called, for messages. */
static pk_status run_part_rr(const char *fn, pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                             const pk_catalog *data, const pk_catalog *random, const pk_bins *bins,
                             pk_estimator estimator, const uint64_t *rr, pk_angcorr_result *out) {
    pk_clear(ctx);
    if (!out) return pk_fail(ctx, PK_ERR_INVALID, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!bins) return pk_fail(ctx, PK_ERR_INVALID, "%s: bins is NULL", fn);
    if ((unsigned)estimator > PK_ESTIMATOR_DAVIS_PEEBLES)
        return pk_fail(ctx, PK_ERR_INVALID, "estimator %d is not a pk_estimator (0 to 3: %s)", (int)estimator,
                       ESTIMATOR_NAMES);
    if (n_parts < 1 || part < 0 || part >= n_parts)
        return pk_fail(ctx, PK_ERR_INVALID, "part %d of %d does not exist", part, n_parts);
    if (!data || !random) return pk_fail(ctx, PK_ERR_INVALID, "%s: %s is NULL", fn, !data ? "data" : "random");
    if (data->n == 0 || random->n == 0)
        return pk_fail(ctx, PK_ERR_INVALID, "both catalogs must hold at least one object");
    pk_backend backend;
    int kernel;
    pk_status st = pk_angcorr_check_sizes(ctx, data, random);
    if (st) return st;
    if ((st = pk_angcorr_choose_kernel(ctx, opts, &backend, &kernel)) != PK_OK) return st;
    pk_edge_table table;
    if ((st = pk_edge_table_build(ctx, bins, &table)) != PK_OK) return st;
    size_t n = bins->n_bins;
    out->n_bins = n;
    out->n_data = data->n;
    out->n_random = random->n;
    out->estimator = estimator;
    out->dd = malloc(n * sizeof(uint64_t));
    out->dr = malloc(n * sizeof(uint64_t));
    out->rr = malloc(n * sizeof(uint64_t));
    out->omega = malloc(n * sizeof(double));
    uint64_t *slots = malloc((size_t)table.n_slots * sizeof(uint64_t));
    if (!out->dd || !out->dr || !out->rr || !out->omega || !slots) {
        free(slots);
        pk_edge_table_free(&table);
        pk_angcorr_result_free(out);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    double w_dd = (double)pairs_visited_estimate(data, NULL) / n_parts;
    double w_dr = (double)pairs_visited_estimate(data, random) / n_parts;
    double w_rr = rr ? 0.0 : (double)pairs_visited_estimate(random, NULL) / n_parts;
    double total = w_dd + w_dr + w_rr;
    struct {
        const pk_catalog *a, *b;
        uint64_t *dst;
        pk_pair_stats *stats;
        double base, span;
    } steps[3] = {
        {data, NULL, out->dd, &out->stats_dd, 0.0, w_dd / total},
        {data, random, out->dr, &out->stats_dr, w_dd / total, w_dr / total},
        {random, NULL, out->rr, &out->stats_rr, (w_dd + w_dr) / total, w_rr / total},
    };
    if (rr) { /* given: part 0 holds it, so that the parts add up to it */
        if (part == 0) memcpy(out->rr, rr, n * sizeof(uint64_t));
        else memset(out->rr, 0, n * sizeof(uint64_t));
    }
    for (int k = 0; k < (rr ? 2 : 3) && st == PK_OK; k++) {
        pk_progress progress;
        double work = k == 0 ? w_dd : k == 1 ? w_dr : w_rr;
        pk_progress_begin(&progress, ctx, work, steps[k].base, steps[k].span);
        st = count_part(ctx, backend, kernel, part, n_parts, steps[k].a, steps[k].b, bins, &table, slots,
                        steps[k].stats, &progress);
        if (st == PK_OK) memcpy(steps[k].dst, slots + 1, n * sizeof(uint64_t));
    }
    free(slots);
    pk_edge_table_free(&table);
    if (st) {
        pk_angcorr_result_free(out);
        return st;
    }
    pk_estimate(estimator, data->n, random->n, n, out->dd, out->dr, out->rr, out->omega);
    return PK_OK;
}

pk_status pk_angcorr_run(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                         const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                         pk_angcorr_result *out) {
    return run_part_rr(__func__, ctx, opts, 0, 1, data, random, bins, estimator, NULL, out);
}

pk_status pk_angcorr_run_part(pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                              const pk_catalog *data, const pk_catalog *random, const pk_bins *bins,
                              pk_estimator estimator, pk_angcorr_result *out) {
    return run_part_rr(__func__, ctx, opts, part, n_parts, data, random, bins, estimator, NULL, out);
}

pk_status pk_angcorr_run_part_rr(pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                                 const pk_catalog *data, const pk_catalog *random, const pk_bins *bins,
                                 pk_estimator estimator, const uint64_t *rr, pk_angcorr_result *out) {
    return run_part_rr(__func__, ctx, opts, part, n_parts, data, random, bins, estimator, rr, out);
}

/* ---- output -------------------------------------------------------------- */

double pk_rad_to_deg(double rad) {
    return rad * (180.0 / M_PI);
}

pk_status pk_angcorr_result_writable(pk_context *ctx, const char *fn, const char *path, const pk_angcorr_result *result,
                                     const pk_bins *bins) {
    if (!path) return pk_fail(ctx, PK_ERR_INVALID, "%s: path is NULL", fn);
    if (!result) return pk_fail(ctx, PK_ERR_INVALID, "%s: result is NULL", fn);
    pk_status st = pk_bins_check(ctx, bins);
    if (st) return st;
    if (result->n_bins != bins->n_bins)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the result has %zu bins, the bins given %zu", path, result->n_bins,
                       bins->n_bins);
    if (!result->dd || !result->dr || !result->rr || !result->omega)
        return pk_fail(ctx, PK_ERR_INVALID, "%s: the result's %s is NULL", path,
                       !result->dd   ? "dd"
                       : !result->dr ? "dr"
                       : !result->rr ? "rr"
                                     : "omega");
    return PK_OK;
}

/* The checks before any file, then the atomic file open. */
static pk_status result_file_open(pk_context *ctx, pk_atomic_file *f, const char *path, const pk_angcorr_result *result,
                                  const pk_bins *bins) {
    pk_clear(ctx);
    pk_status st = pk_angcorr_result_writable(ctx, "pk_angcorr_write_omega", path, result, bins);
    return st ? st : pk_atomic_open(ctx, f, path);
}

pk_status pk_angcorr_write_omega(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                 const pk_bins *bins) {
    pk_atomic_file f;
    pk_status st = result_file_open(ctx, &f, path, result, bins);
    if (st) return st;
    fprintf(f.fp, "bin start\t\tomega\t        hist_DD\t        hist_DR\t        hist_RR\n");
    for (size_t k = 0; k < result->n_bins; k++) {
        if (result->rr[k] == 0) continue;
        fprintf(f.fp, "%6.3f\t%15f\t%15ld\t%15ld\t%15ld\n", pk_rad_to_deg(bins->edges[k]),
                pk_plain_nan(result->omega[k]), (long)result->dd[k], (long)result->dr[k], (long)result->rr[k]);
    }
    return pk_atomic_commit(ctx, &f);
}

pk_status pk_angcorr_write_csv(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                               const pk_bins *bins) {
    return pk_angcorr_write_csv_ex(ctx, path, result, NULL, bins); /* the same columns without extras */
}
