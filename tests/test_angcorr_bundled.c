/* test_angcorr_bundled.c - DD, DR and RR of the bundled catalogs (the
 * first N objects of each; N = 0 for all 100,000) from every CPU kernel
 * against the float64 reference, computed here row by row over the threads
 * (the reference itself is single-threaded and unchanged). */
#include <omp.h>

#include "angcorr/angcorr_internal.h"
#include "angcorr_util.h"

static void ref_counts(const pk_bins *bins, const pk_catalog *a, const pk_catalog *b, uint64_t *out) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_unit_vectors va, vb;
    pk_unit_vectors_make(&ctx, a, &va);
    pk_unit_vectors_make(&ctx, b ? b : a, &vb);
    size_t n_slots = bins->n_bins + 2;
    int n_threads = omp_get_max_threads();
    uint64_t *per = calloc((size_t)n_threads * n_slots, sizeof(uint64_t));
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t i = 0; i < a->n; i += 64) {
        size_t i1 = i + 64 < a->n ? i + 64 : a->n;
        pk_angcorr_ref_rows(bins, &va, &vb, i, i1, per + (size_t)omp_get_thread_num() * n_slots);
    }
    memset(out, 0, bins->n_bins * sizeof(uint64_t));
    for (int t = 0; t < n_threads; t++)
        for (size_t k = 0; k < bins->n_bins; k++) out[k] += per[(size_t)t * n_slots + k + 1];
    free(per);
    pk_unit_vectors_free(&va);
    pk_unit_vectors_free(&vb);
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 12000;
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog data, random;
    CHECK_OK(pk_catalog_read(&ctx, "data/galaxy/data_100k_arcmin.txt", PK_UNITS_ARCMIN, &data), &ctx);
    CHECK_OK(pk_catalog_read(&ctx, "data/galaxy/flat_100k_arcmin.txt", PK_UNITS_ARCMIN, &random), &ctx);
    if (check_failures) return check_finish("test_angcorr_bundled");
    if (n && n < data.n) data.n = n;
    if (n && n < random.n) random.n = n;
    printf("bundled catalogs: %zu x %zu objects\n", data.n, random.n);
    pk_bins bins;
    pk_bins_default(&ctx, &bins);
    size_t nb = bins.n_bins;
    uint64_t *ref = malloc(3 * nb * sizeof(uint64_t));
    double t0 = omp_get_wtime();
    ref_counts(&bins, &data, NULL, ref);
    ref_counts(&bins, &data, &random, ref + nb);
    ref_counts(&bins, &random, NULL, ref + 2 * nb);
    printf("reference: %.1f s\n", omp_get_wtime() - t0);
    uint64_t sums[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++)
        for (size_t k = 0; k < nb; k++) sums[c] += ref[c * nb + k];
    CHECK(sums[0] == (uint64_t)data.n * data.n && sums[1] == (uint64_t)data.n * random.n &&
              sums[2] == (uint64_t)random.n * random.n,
          "reference sums");
    for (int k = 0; k < N_TEST_CPU_KERNELS + 2; k++) {
        int kernel = k < N_TEST_CPU_KERNELS    ? test_cpu_kernels[k]
                     : k == N_TEST_CPU_KERNELS ? PK_ANGCORR_KERNEL_CPU_AVX2_TABLE
                                               : PK_ANGCORR_KERNEL_CPU_AVX512_TABLE;
        if (!pk_angcorr_kernel_available(kernel)) {
            printf("kernel %s: not available on this CPU, skipped\n", pk_angcorr_kernel_name(kernel));
            continue;
        }
        pk_angcorr_options opts = {PK_BACKEND_CPU, kernel};
        pk_angcorr_result r;
        t0 = omp_get_wtime();
        CHECK_OK(pk_angcorr_run(&ctx, &opts, &data, &random, &bins, PK_ESTIMATOR_LANDY_SZALAY, &r), &ctx);
        double el = omp_get_wtime() - t0;
        size_t diff = 0;
        for (size_t q = 0; q < nb; q++) {
            diff += r.dd[q] != ref[q];
            diff += r.dr[q] != ref[nb + q];
            diff += r.rr[q] != ref[2 * nb + q];
        }
        uint64_t fp64 = r.stats_dd.pairs_fp64 + r.stats_dr.pairs_fp64 + r.stats_rr.pairs_fp64;
        printf("kernel %-14s %.2f s, %llu pairs settled in float64, %zu bins differ\n", pk_angcorr_kernel_name(kernel),
               el, (unsigned long long)fp64, diff);
        CHECK(diff == 0, "kernel %s: %zu bins differ from the reference", pk_angcorr_kernel_name(kernel), diff);
        CHECK(fp64 > 0, "a problem this size has near-edge pairs");
        pk_angcorr_result_free(&r);
    }
    free(ref);
    pk_bins_free(&bins);
    pk_catalog_free(&data);
    pk_catalog_free(&random);
    return check_finish("test_angcorr_bundled");
}
