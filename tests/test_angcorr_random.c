/* test_angcorr_random.c - every CPU kernel against the float64 reference
 * on random catalogs: awkward sizes (1, 2, 7, sizes that are not a multiple
 * of any SIMD width), the whole sphere, the poles, duplicate points, and
 * several bin layouts. */
#include "angcorr_util.h"

int main(void) {
    check_rng rng = check_rng_make(20261129);
    printf("seed %llu\n", rng.s);
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
    pk_bins_free(&def);
    pk_bins_free(&fine);
    pk_bins_free(&lin);
    pk_bins_free(&logb);
    return check_finish("test_angcorr_random");
}
