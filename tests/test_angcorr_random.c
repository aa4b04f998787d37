/* test_angcorr_random.c - every CPU kernel against the float64 reference
 * on random catalogs: awkward sizes (1, 2, 7, sizes that are not a multiple
 * of any SIMD width), the whole sphere, the poles, duplicate points, and
 * several bin layouts. */
#include "angcorr_util.h"

int main(void) {
    check_rng rng = check_rng_make(20261129);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins def, fine, lin, logb;
    CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.01 * M_PI / 180, 2000, &fine), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 1.0 * M_PI / 180, 0.5 * M_PI / 180, 100, &lin), &ctx);
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 20, &logb), &ctx);
    const pk_bins *all_bins[4] = {&def, &fine, &lin, &logb};
    const char *bin_names[4] = {"default", "fine", "offset-linear", "log"};

    /* Awkward sizes on the sphere and in a 90 x 90 degree patch; the
     * table kernels too, whose block loop (unweighted histograms) no other
     * kernel shares for linear bins. */
    const int table_kernels[2] = {PK_ANGCORR_KERNEL_CPU_AVX2_TABLE, PK_ANGCORR_KERNEL_CPU_AVX512_TABLE};
    size_t sizes[] = {1, 2, 7, 15, 17, 33, 1000, 1003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        pk_catalog a = test_catalog(&rng, n, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        pk_catalog b = test_catalog(&rng, n + 5, 0, M_PI / 2, 0, M_PI / 2);
        for (int k = 0; k < 4; k++) {
            char what[128];
            snprintf(what, sizeof what, "sphere n=%zu bins=%s auto", n, bin_names[k]);
            test_against_ref(what, &a, NULL, all_bins[k], table_kernels, 2);
            snprintf(what, sizeof what, "patch n=%zu bins=%s cross", n, bin_names[k]);
            test_against_ref(what, &a, &b, all_bins[k], table_kernels, 2);
        }
        pk_catalog_free(&a);
        pk_catalog_free(&b);
    }

    /* Near the poles, where RA means little: dec within 0.5 degree of +-90. */
    {
        pk_catalog n_pole = test_catalog(&rng, 700, 0, 2 * M_PI, M_PI / 2 - 0.5 * M_PI / 180, M_PI / 2);
        pk_catalog s_pole = test_catalog(&rng, 301, 0, 2 * M_PI, -M_PI / 2, -M_PI / 2 + 0.5 * M_PI / 180);
        n_pole.dec[0] = M_PI / 2; /* exactly at the pole */
        n_pole.dec[1] = M_PI / 2;
        n_pole.ra[1] = 1.0; /* same point, another RA */
        s_pole.dec[0] = -M_PI / 2;
        test_against_ref("north pole auto, fine bins", &n_pole, NULL, &fine, NULL, 0);
        test_against_ref("poles cross, default bins", &n_pole, &s_pole, &def, NULL, 0);
        test_against_ref("south pole auto, log bins", &s_pole, NULL, &logb, NULL, 0);
        pk_catalog_free(&n_pole);
        pk_catalog_free(&s_pole);
    }

    /* Few bins from theta_min > 0, in a patch where the grid prunes: the
     * AVX-512 direct and log paths count the top slot and the three below
     * it apart (pk_hot16), and with 1, 2 or 3 bins slot 0 (below
     * theta_min) is one of the slots that must not be taken as hot. Edges
     * geometric (log path) and not (direct table). */
    {
        pk_catalog p = test_catalog(&rng, 3001, 0, 20 * M_PI / 180, 0, 20 * M_PI / 180);
        pk_catalog q = test_catalog(&rng, 1499, 0, 20 * M_PI / 180, 0, 20 * M_PI / 180);
        const double deg = M_PI / 180;
        const double geo[4] = {0.5 * deg, 1.0 * deg, 2.0 * deg, 4.0 * deg};
        const double odd[4] = {0.5 * deg, 0.9 * deg, 1.7 * deg, 2.2 * deg};
        for (size_t nb = 1; nb <= 3; nb++) {
            for (int kind = 0; kind < 2; kind++) {
                pk_bins few;
                CHECK_OK(pk_bins_from_edges(&ctx, kind ? odd : geo, nb + 1, &few), &ctx);
                char what[128];
                snprintf(what, sizeof what, "%zu %s bins from 0.5 deg, patch auto", nb, kind ? "uneven" : "geometric");
                test_against_ref(what, &p, NULL, &few, table_kernels, 2);
                snprintf(what, sizeof what, "%zu %s bins from 0.5 deg, patch cross", nb, kind ? "uneven" : "geometric");
                test_against_ref(what, &p, &q, &few, table_kernels, 2);
                pk_bins_free(&few);
            }
        }
        pk_catalog_free(&p);
        pk_catalog_free(&q);
    }

    /* Duplicate points: every point three times, and a catalog of one
     * point repeated. */
    {
        pk_catalog base = test_catalog(&rng, 200, 0, M_PI / 2, 0, M_PI / 2);
        pk_catalog dup = base;
        dup.n = 600;
        dup.ra = malloc(600 * sizeof(double));
        dup.dec = malloc(600 * sizeof(double));
        for (size_t i = 0; i < 600; i++) {
            dup.ra[i] = base.ra[i % 200];
            dup.dec[i] = base.dec[i % 200];
        }
        test_against_ref("duplicates auto", &dup, NULL, &def, NULL, 0);
        test_against_ref("duplicates cross", &dup, &base, &fine, NULL, 0);
        for (size_t i = 0; i < 600; i++) dup.ra[i] = 0.3, dup.dec[i] = 0.2;
        test_against_ref("one point repeated", &dup, NULL, &def, NULL, 0);
        pk_catalog_free(&base);
        pk_catalog_free(&dup);
    }
    /* A run split into parts (pk_angcorr_run_part): the parts' DD, DR and
     * RR add up to the whole run's, bin for bin, for each kernel, with more
     * parts than rows too. The autocorrelations' triangle rows are where a
     * part could count a cross block once instead of twice. */
    {
        size_t split_sizes[] = {1, 7, 1003};
        int split_parts[] = {1, 2, 3, 7};
        for (size_t s = 0; s < sizeof split_sizes / sizeof split_sizes[0]; s++) {
            size_t n = split_sizes[s];
            pk_catalog d = test_catalog(&rng, n, 0, M_PI / 2, 0, M_PI / 2);
            pk_catalog r = test_catalog(&rng, 2 * n + 5, 0, M_PI / 2, 0, M_PI / 2);
            for (int k = 0; k < N_TEST_CPU_KERNELS; k++) {
                if (!pk_angcorr_kernel_available(test_cpu_kernels[k])) continue;
                pk_angcorr_options opts = {PK_BACKEND_CPU, test_cpu_kernels[k]};
                pk_angcorr_result whole;
                CHECK_OK(pk_angcorr_run(&ctx, &opts, &d, &r, &def, PK_ESTIMATOR_LANDY_SZALAY, &whole), &ctx);
                size_t nb = def.n_bins;
                for (size_t q = 0; q < sizeof split_parts / sizeof split_parts[0]; q++) {
                    int n_parts = split_parts[q];
                    uint64_t *sum = calloc(3 * nb, sizeof(uint64_t));
                    uint64_t pairs = 0;
                    for (int part = 0; part < n_parts; part++) {
                        pk_angcorr_result pr;
                        CHECK_OK(pk_angcorr_run_part(&ctx, &opts, part, n_parts, &d, &r, &def,
                                                     PK_ESTIMATOR_LANDY_SZALAY, &pr),
                                 &ctx);
                        for (size_t b = 0; b < nb; b++)
                            sum[b] += pr.dd[b], sum[nb + b] += pr.dr[b], sum[2 * nb + b] += pr.rr[b];
                        pairs += pr.stats_dd.pairs_total + pr.stats_dr.pairs_total + pr.stats_rr.pairs_total;
                        pk_angcorr_result_free(&pr);
                    }
                    size_t bad = nb;
                    for (size_t b = 0; b < nb && bad == nb; b++)
                        if (sum[b] != whole.dd[b] || sum[nb + b] != whole.dr[b] || sum[2 * nb + b] != whole.rr[b])
                            bad = b;
                    CHECK(bad == nb, "split n=%zu kernel %s: %d parts' counts differ from the whole run in bin %zu", n,
                          pk_angcorr_kernel_name(test_cpu_kernels[k]), n_parts, bad);
                    uint64_t whole_pairs = (uint64_t)(n * n + n * r.n + r.n * r.n);
                    CHECK(pairs == whole_pairs, "split n=%zu kernel %s: %d parts stand for %llu pairs, not %llu", n,
                          pk_angcorr_kernel_name(test_cpu_kernels[k]), n_parts, (unsigned long long)pairs,
                          (unsigned long long)whole_pairs);
                    free(sum);
                }
                pk_angcorr_result_free(&whole);
            }
            pk_catalog_free(&d);
            pk_catalog_free(&r);
        }
    }
    pk_bins_free(&def);
    pk_bins_free(&fine);
    pk_bins_free(&lin);
    pk_bins_free(&logb);
    return check_finish("test_angcorr_random");
}
