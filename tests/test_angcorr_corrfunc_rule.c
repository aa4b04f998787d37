/* test_angcorr_corrfunc_rule.c - pairkit's bins against Corrfunc's rule on
 * the small-scale configuration: DR of the bundled catalogs in 20 log bins
 * from 0.01 to 10 degrees.
 *
 * Corrfunc's DDtheta_mocks bins a pair by comparing the double dot product
 * with the cosines of the edges: bin k when cos(e_k+1) < dot <= cos(e_k).
 * pairkit's reference takes acos of the clamped dot and compares with the
 * edges. Both are step functions of the dot, so they agree on every pair
 * exactly when, for every edge, the first dot pairkit puts beyond it
 * (T_s, from the edge table) is the first double above cos(e_s). This
 * program reports the edges where they differ (in ulps of the dot), then
 * counts the pairs with Corrfunc's rule in its own double loop (visiting
 * the pairs the grid's plan visits; all others are beyond 10 degrees by
 * either rule) and compares bin by bin with pairkit's fast count.
 *
 * Argument: the number of objects of each catalog to use (0 = all).
 */
#include <omp.h>

#include "angcorr/grid.h"
#include "angcorr_util.h"

int main(int argc, char **argv) {
    size_t limit = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000;
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog d, r;
    if (pk_catalog_read(&ctx, "data/galaxy/data_100k_arcmin.txt", PK_UNITS_ARCMIN, &d) ||
        pk_catalog_read(&ctx, "data/galaxy/flat_100k_arcmin.txt", PK_UNITS_ARCMIN, &r)) {
        printf("%s\n", ctx.message);
        return check_skip("test_angcorr_corrfunc_rule", "bundled catalogs not found");
    }
    if (limit && limit < d.n) d.n = limit;
    if (limit && limit < r.n) r.n = limit;
    pk_bins bins;
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 20, &bins), &ctx);
    pk_edge_table t;
    CHECK_OK(pk_edge_table_build(&ctx, &bins, &t), &ctx);
    size_t n = bins.n_bins;

    /* the two rules' thresholds */
    double cos_e[64];
    int differing = 0;
    for (size_t s = 0; s <= n; s++) {
        cos_e[s] = cos(bins.edges[s]);
        double first_beyond_cf =
            nextafter(cos_e[s], (double)INFINITY); /* Corrfunc: beyond edge s iff dot <= cos(e_s) */
        double T = t.dot_threshold[s];
        long ulps = 0;
        for (double x = fmin(T, first_beyond_cf); x < fmax(T, first_beyond_cf) && ulps < 1000;
             x = nextafter(x, (double)INFINITY))
            ulps++;
        if (ulps) differing++;
        printf("edge %2zu: %.6f deg, cos %.17g, pairkit threshold %.17g, %s%ld ulp\n", s, bins.edges[s] * 180 / M_PI,
               cos_e[s], T, ulps ? "DIFFERENT by " : "same, ", ulps);
    }
    printf("%d of %zu edges have different thresholds in the two rules\n", differing, n + 1);

    /* Corrfunc's rule on the pairs the plan visits */
    pk_grid ga, gb;
    CHECK_OK(pk_grid_build_pair(&ctx, &d, NULL, &r, NULL, bins.edges[n], &ga, &gb), &ctx);
    pk_grid_plan plan;
    CHECK_OK(pk_grid_plan_build(&ctx, &ga, &gb, bins.edges[n], pk_grid_prune_chord2(&t), &plan), &ctx);
    uint64_t cf[64] = {0};
    double t0 = omp_get_wtime();
#pragma omp parallel
    {
        uint64_t mine[64] = {0};
#pragma omp for schedule(dynamic, 4)
        for (size_t u = 0; u < plan.n_units; u++) {
            const pk_grid_unit *un = &plan.units[u];
            for (size_t rg = un->r0; rg < un->r1; rg++) {
                size_t j0 = gb.cell_start[plan.ranges[2 * rg]], j1 = gb.cell_start[plan.ranges[2 * rg + 1]];
                for (size_t i = un->i0; i < un->i1; i++)
                    for (size_t j = j0; j < j1; j++) {
                        double dot =
                            pk_angcorr_dot_ref(ga.v.x[i], ga.v.y[i], ga.v.z[i], gb.v.x[j], gb.v.y[j], gb.v.z[j]);
                        dot = dot > 1.0 ? 1.0 : dot < -1.0 ? -1.0 : dot;
                        if (dot > cos_e[0] || dot <= cos_e[n]) continue;
                        size_t k = n - 1;
                        while (!(dot <= cos_e[k])) k--; /* the last edge whose cosine is >= dot */
                        mine[k]++;
                    }
            }
        }
#pragma omp critical
        for (size_t k = 0; k < n; k++) cf[k] += mine[k];
    }
    double t1 = omp_get_wtime();
    uint64_t *fast = calloc(n, sizeof(uint64_t));
    pk_pair_stats st;
    CHECK_OK(pk_angcorr_count(&ctx, NULL, &d, &r, &bins, fast, &st), &ctx);
    uint64_t diff = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t a = cf[k], b = fast[k];
        diff += a > b ? a - b : b - a;
        printf("bin %2zu [%.5f, %.5f) deg: Corrfunc rule %llu, pairkit %llu%s\n", k, bins.edges[k] * 180 / M_PI,
               bins.edges[k + 1] * 180 / M_PI, (unsigned long long)a, (unsigned long long)b,
               a == b ? "" : "  DIFFERENT");
    }
    printf(
        "DR of %zu x %zu objects: %llu counts differ between the rules (Corrfunc-rule loop %.2f s, pairkit %.3f s, "
        "%.3g pairs visited)\n",
        d.n, r.n, (unsigned long long)diff, t1 - t0, st.seconds, (double)st.pairs_visited);
    CHECK(diff == 0, "the rules disagree on %llu counts", (unsigned long long)diff);
    free(fast);
    pk_grid_plan_free(&plan);
    pk_grid_free(&ga);
    pk_grid_free(&gb);
    pk_edge_table_free(&t);
    pk_bins_free(&bins);
    pk_catalog_free(&d);
    pk_catalog_free(&r);
    return check_finish("test_angcorr_corrfunc_rule");
}
