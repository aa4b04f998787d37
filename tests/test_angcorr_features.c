/* test_angcorr_features.c - weights, mean separations, the pruned small-scale
 * path and jackknife errors against the float64 reference, on every CPU
 * kernel (and the CUDA path when a device is present):
 *
 * - counts bit for bit, weighted sums and separation sums to float64
 *   rounding: |fast - ref| <= 2 m eps S, with m the pairs of the bin and S
 *   the sum of |w_i w_j| (theta: times pi), the bound of two recursive sums
 *   of the same m rounded products in different orders;
 * - the pruned plan forced on, with pairs built on the last edge (the one
 *   pruning relies on) and on the others, near the poles, across RA = 0;
 * - jackknife: every leave-one-out w(theta) equals a direct run without the
 *   patch's objects (bit for bit unweighted, to rounding weighted);
 * - RR cells kept, written, read and given to another run: its outputs as
 *   the run that counts RR (bit for bit on the CPU);
 * - the parts of a distributed run (threads summing through the callback):
 *   bit for bit with patches, to rounding with blocks, one failing part
 *   stopping every part;
 * - the N_D != N_R and weighted normalisations against the formulas.
 */
#include <pthread.h>
#include <unistd.h>

#include "angcorr/angcorr_internal.h"
#include "angcorr_util.h"

static void offset_point(double ra, double dec, double theta, double bearing, double *ra2, double *dec2) {
    double sd = sin(dec) * cos(theta) + cos(dec) * sin(theta) * cos(bearing);
    if (sd > 1) sd = 1;
    if (sd < -1) sd = -1;
    *dec2 = asin(sd);
    *ra2 = ra + atan2(sin(bearing) * sin(theta) * cos(dec), cos(theta) - sin(dec) * sd);
}

static double *test_weights(check_rng *rng, size_t n) {
    double *w = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) w[i] = 0.2 + 1.6 * check_uniform(rng);
    return w;
}

/* ---- patches: the construction with qsort, as pairkit made it before
 * its radix sort, to compare with ---------------------------------------- */

static int ref_cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* RA measured from the middle of the largest empty RA gap of the randoms,
 * so that a field across RA = 0 is not cut in two. */
static double ref_ra_shift(double ra, double origin) {
    double r = fmod(ra - origin, 2 * M_PI);
    if (r < 0) r += 2 * M_PI;
    return r;
}

/* Index of the last edge <= v among edges[0..n) (0 when below all). */
static int ref_bucket_of(const double *edges, int n, double v) {
    int lo = 0, hi = n; /* first edge > v */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (edges[mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 ? lo - 1 : 0;
}

/* The edge below sorted value v[j]: halfway to v[j - 1], so that an object
 * in the gap between two cells' randoms joins the nearer one (an edge at
 * v[j] itself would give the whole gap to the cell below, which may be a
 * separate field far away). Every random stays in its cell: v[j - 1] is
 * below the edge, v[j] not (where the two are adjacent doubles, v[j]). */
static int old_edges; /* the rule before: the edge at v[j] itself */
static double edge_before(const double *v, size_t j) {
    if (j == 0 || old_edges) return v[j];
    double m = 0.5 * v[j - 1] + 0.5 * v[j]; /* no overflow to inf */
    return m > v[j - 1] && m <= v[j] ? m : v[j];
}

static pk_status ref_patches(pk_context *ctx, const pk_catalog *random, int k, const pk_catalog *objects,
                             int32_t *patch) {
    if (k < 2) return pk_fail(ctx, PK_ERR_INVALID, "jackknife: at least 2 patches are needed (got %d)", k);
    size_t n = random->n;
    if ((size_t)k > n)
        return pk_fail(ctx, PK_ERR_INVALID, "jackknife: %d patches need at least %d random objects (have %zu)", k, k,
                       n);
    double *ra = malloc(n * sizeof(double)), *dec = malloc(n * sizeof(double));
    int n_stripes = (int)floor(sqrt((double)k) + 0.5);
    if (n_stripes < 1) n_stripes = 1;
    double *dec_edges = malloc((size_t)n_stripes * sizeof(double));
    double *ra_edges = malloc((size_t)k * sizeof(double));
    int *first_patch = malloc(((size_t)n_stripes + 1) * sizeof(int));
    if (!ra || !dec || !dec_edges || !ra_edges || !first_patch) {
        free(ra), free(dec), free(dec_edges), free(ra_edges), free(first_patch);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory for jackknife patches");
    }
    /* the RA origin: middle of the largest gap between sorted RAs */
    for (size_t i = 0; i < n; i++) ra[i] = ref_ra_shift(random->ra[i], 0.0);
    qsort(ra, n, sizeof(double), ref_cmp_double);
    double gap = ra[0] + 2 * M_PI - ra[n - 1], origin = 0.5 * (ra[n - 1] + ra[0] + 2 * M_PI);
    for (size_t i = 1; i < n; i++)
        if (ra[i] - ra[i - 1] > gap) gap = ra[i] - ra[i - 1], origin = 0.5 * (ra[i] + ra[i - 1]);
    /* declination stripes of equal random counts */
    memcpy(dec, random->dec, n * sizeof(double));
    qsort(dec, n, sizeof(double), ref_cmp_double);
    for (int s = 0; s < n_stripes; s++) dec_edges[s] = edge_before(dec, (size_t)((double)n * s / n_stripes));
    dec_edges[0] = -(double)INFINITY;
    first_patch[0] = 0;
    for (int s = 0; s < n_stripes; s++) first_patch[s + 1] = first_patch[s] + k / n_stripes + (s < k % n_stripes);
    /* in each stripe, RA cells of equal random counts */
    for (int s = 0; s < n_stripes; s++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (ref_bucket_of(dec_edges, n_stripes, random->dec[i]) == s) ra[m++] = ref_ra_shift(random->ra[i], origin);
        qsort(ra, m, sizeof(double), ref_cmp_double);
        int cells = first_patch[s + 1] - first_patch[s];
        for (int c = 0; c < cells; c++)
            ra_edges[first_patch[s] + c] =
                c == 0 || m == 0 ? -(double)INFINITY : edge_before(ra, (size_t)((double)m * c / cells));
    }
    for (size_t i = 0; i < objects->n; i++) {
        int s = ref_bucket_of(dec_edges, n_stripes, objects->dec[i]);
        int cells = first_patch[s + 1] - first_patch[s];
        patch[i] =
            first_patch[s] + ref_bucket_of(ra_edges + first_patch[s], cells, ref_ra_shift(objects->ra[i], origin));
    }
    free(ra), free(dec), free(dec_edges), free(ra_edges), free(first_patch);
    return PK_OK;
}

/* pk_angcorr_patches against the construction above: randoms in a field
 * across RA = 0, over the sphere, with repeated values and signed zeros,
 * K from 2 to 300; every object's patch the same. */
static void patches_as_before(check_rng *rng) {
    pk_context ctx;
    pk_context_init(&ctx);
    const int ks[] = {2, 7, 100, 300};
    for (int c = 0; c < 3; c++) {
        pk_catalog r = c == 0   ? test_catalog(rng, 5000, -0.3, 0.4, -0.2, 0.5)
                       : c == 1 ? test_catalog(rng, 70000, 0, 2 * M_PI, -M_PI / 2, M_PI / 2)
                                : test_catalog(rng, 3000, 0, 1, -0.5, 0.5);
        if (c == 0)
            for (size_t i = 0; i < r.n; i++)
                if (r.ra[i] < 0) r.ra[i] += 2 * M_PI; /* across RA = 0 */
        if (c == 2)
            for (size_t i = 0; i < r.n; i++) { /* few distinct values, zeros of both signs */
                r.dec[i] = (double)((int)(i % 7) - 3) * 0.1;
                if (r.dec[i] == 0) r.dec[i] = i % 2 ? -0.0 : 0.0;
                r.ra[i] = (double)(i % 5) * 0.2;
            }
        pk_catalog d = test_catalog(rng, 4000, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        int32_t *got = malloc(d.n * sizeof(int32_t)), *want = malloc(d.n * sizeof(int32_t));
        int32_t *got_r = malloc(r.n * sizeof(int32_t)), *want_r = malloc(r.n * sizeof(int32_t));
        for (int x = 0; x < 4 && got && want && got_r && want_r; x++) {
            if ((size_t)ks[x] > r.n) continue;
            CHECK_OK(pk_angcorr_patches(&ctx, &r, ks[x], &d, got), &ctx);
            CHECK_OK(pk_angcorr_patches(&ctx, &r, ks[x], &r, got_r), &ctx);
            CHECK_OK(ref_patches(&ctx, &r, ks[x], &d, want), &ctx);
            CHECK_OK(ref_patches(&ctx, &r, ks[x], &r, want_r), &ctx);
            CHECK(memcmp(got, want, d.n * sizeof(int32_t)) == 0 && memcmp(got_r, want_r, r.n * sizeof(int32_t)) == 0,
                  "patches (randoms %d, K = %d): not as the plain construction makes them", c, ks[x]);
            /* the randoms' own patches as the earlier rule made them, so a
             * saved RR file (its hash of them) stays valid */
            old_edges = 1;
            CHECK_OK(ref_patches(&ctx, &r, ks[x], &r, want_r), &ctx);
            old_edges = 0;
            CHECK(memcmp(got_r, want_r, r.n * sizeof(int32_t)) == 0,
                  "patches (randoms %d, K = %d): a random's patch differs from the earlier rule's", c, ks[x]);
        }
        free(got), free(want), free(got_r), free(want_r);
        pk_catalog_free(&r);
        pk_catalog_free(&d);
    }
}

/* Two fields 180 degrees apart (RA 10-20 and 200-210): K = 2 puts each in
 * its own patch, and data objects just outside a field's randoms, on
 * either side, join that field's patch, not the far one. */
static void patches_two_fields(void) {
    pk_context ctx;
    pk_context_init(&ctx);
    const double deg = M_PI / 180;
    pk_catalog r = {0}, d = {0};
    r.n = 1000;
    r.ra = malloc(r.n * sizeof(double));
    r.dec = malloc(r.n * sizeof(double));
    for (size_t i = 0; i < r.n && r.ra && r.dec; i++) {
        double t = (double)(i % 500) / 499;
        r.ra[i] = ((i < 500 ? 10 : 200) + 10 * t) * deg;
        r.dec[i] = (5 * t) * deg;
    }
    const double d_ra[] = {9.9, 20.1, 199.9, 210.1, 15, 205, 100};
    const int field[] = {0, 0, 1, 1, 0, 1, 0};
    d.n = sizeof d_ra / sizeof d_ra[0];
    d.ra = malloc(d.n * sizeof(double));
    d.dec = malloc(d.n * sizeof(double));
    for (size_t i = 0; i < d.n && d.ra && d.dec; i++) d.ra[i] = d_ra[i] * deg, d.dec[i] = 2.5 * deg;
    int32_t pr[1000], pd[7];
    if (r.ra && r.dec && d.ra && d.dec) {
        CHECK_OK(pk_angcorr_patches(&ctx, &r, 2, &r, pr), &ctx);
        CHECK_OK(pk_angcorr_patches(&ctx, &r, 2, &d, pd), &ctx);
        CHECK(pr[0] != pr[500], "two fields, K = 2: both in patch %d", pr[0]);
        for (size_t i = 0; i < r.n; i++)
            if (pr[i] != pr[i < 500 ? 0 : 500]) {
                CHECK(0, "two fields, K = 2: random %zu in patch %d", i, pr[i]);
                break;
            }
        for (size_t i = 0; i < d.n; i++)
            CHECK(pd[i] == pr[field[i] ? 500 : 0], "two fields: an object at RA %g is in patch %d, not field %d's (%d)",
                  d_ra[i], pd[i], field[i] + 1, pr[field[i] ? 500 : 0]);
    }
    pk_catalog_free(&r);
    pk_catalog_free(&d);
}

/* A progress callback that stops the run at its first report. */
static int stop_at_first(void *user, double fraction_done) {
    int *calls = user;
    (*calls)++;
    return fraction_done >= 0;
}

/* Ten million bins: the edge table alone takes seconds (~16 s on one
 * core), and a callback that asks to stop at its first report stops it
 * there, long before the table is done. */
static void cancel_in_edge_table(check_rng *rng) {
    pk_context ctx;
    pk_context_init(&ctx);
    ctx.n_threads = 1; /* a table shared among many threads but not watched could finish within the bound */
    pk_bins bins;
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 1e-5 * M_PI / 180, 10000000, &bins), &ctx);
    pk_catalog a = test_catalog(rng, 100, 0, 0.1, 0, 0.1);
    uint64_t *counts = calloc(bins.n_bins, sizeof(uint64_t));
    int calls = 0;
    ctx.progress = stop_at_first;
    ctx.progress_user = &calls;
    double t0 = check_now();
    pk_status st = counts ? pk_angcorr_count(&ctx, NULL, &a, NULL, &bins, counts, NULL) : PK_ERR_NOMEM;
    double took = check_now() - t0;
    CHECK(st == PK_ERR_CANCELLED && calls == 1 && took < 3.0,
          "10^7 bins, stopped at the first report: %s after %.2f s, %d reports", pk_status_str(st), took, calls);
    printf("10^7 bins, stopped at the first report: %s after %.3f s\n", pk_status_str(st), took);
    free(counts);
    pk_catalog_free(&a);
    pk_bins_free(&bins);
}

/* A jackknife run stopped from its callback at the first report, which
 * the shared patch-pair counts make (on the CPU's threads, or with the GPU
 * under auto): it ends cancelled, with no report after that one (a stage
 * that went on regardless would report again). */
static void cancel_in_counts(pk_context *ctx, const pk_catalog *d, const pk_catalog *r, const pk_bins *bins, int k,
                             const pk_angcorr_options *opts, const double *wd, const double *wr) {
    int calls = 0;
    ctx->progress = stop_at_first;
    ctx->progress_user = &calls;
    pk_angcorr_run_options ro = {wd, wr, 0, k, PK_PRUNE_AUTO};
    pk_angcorr_result res;
    pk_angcorr_extras ex;
    pk_status st = pk_angcorr_run_ex(ctx, opts, d, r, bins, PK_ESTIMATOR_LANDY_SZALAY, &ro, &res, &ex);
    CHECK(st == PK_ERR_CANCELLED && calls == 1, "jackknife K = %d (%s%s), stopped at its first report: %s, %d reports",
          k, opts ? pk_angcorr_kernel_name(opts->kernel) : "auto", wd ? ", weighted" : "", pk_status_str(st), calls);
    pk_angcorr_result_free(&res);
    pk_angcorr_extras_free(&ex);
    ctx->progress = NULL;
    ctx->progress_user = NULL;
}

static int kernels_to_test(int *ids) {
    int n = 0;
    for (int k = 0; k < N_TEST_CPU_KERNELS; k++)
        if (pk_angcorr_kernel_available(test_cpu_kernels[k])) ids[n++] = test_cpu_kernels[k];
    if (pk_angcorr_kernel_available(PK_ANGCORR_KERNEL_CPU_AVX512_TABLE)) ids[n++] = PK_ANGCORR_KERNEL_CPU_AVX512_TABLE;
#ifdef PK_HAVE_CUDA
    if (pk_cuda_device_count() > 0) ids[n++] = pk_angcorr_kernel_from_name("cuda-dot");
#endif
    return n;
}

/* Every kernel with weights / mean separations / pruning against the
 * weighted reference. */
static void compare_weighted(const char *what, const pk_catalog *a, const double *wa, const pk_catalog *b,
                             const double *wb, const pk_bins *bins, int mean_theta) {
    pk_context ctx;
    pk_context_init(&ctx);
    size_t n = bins->n_bins;
    uint64_t *rc = calloc(n, sizeof(uint64_t)), *gc = calloc(n, sizeof(uint64_t));
    double *rw = calloc(n, sizeof(double)), *rt = calloc(n, sizeof(double));
    double *gw = calloc(n, sizeof(double)), *gt = calloc(n, sizeof(double));
    double *abs_w = calloc(n, sizeof(double));
    CHECK_OK(pk_angcorr_count_ref_weighted(&ctx, a, wa, b, wb, bins, rc, rw, mean_theta ? rt : NULL), &ctx);
    /* |w| sums for the bound (weights here are positive: the sums themselves) */
    for (size_t k = 0; k < n; k++) abs_w[k] = fabs(rw[k]);
    int ids[8];
    int nk = kernels_to_test(ids);
    pk_prune prunes[2] = {PK_PRUNE_ON, PK_PRUNE_OFF};
    /* the first CPU kernel's sums, per pruning: every CPU kernel's the same bits */
    double *first_w[2] = {calloc(n, sizeof(double)), calloc(n, sizeof(double))};
    double *first_t[2] = {calloc(n, sizeof(double)), calloc(n, sizeof(double))};
    int have_first[2] = {0, 0};
    for (int k = 0; k < nk; k++) {
        for (int p = 0; p < 2; p++) {
            pk_angcorr_options opts = {PK_BACKEND_AUTO, ids[k]};
            pk_angcorr_features f = {wa, wb, mean_theta, prunes[p]};
            pk_pair_stats stats;
            pk_status st = pk_angcorr_count_ex(&ctx, &opts, a, b, bins, &f, gc, gw, mean_theta ? gt : NULL, &stats);
            CHECK_OK(st, &ctx);
            if (st) continue;
            if (strncmp(pk_angcorr_kernel_name(ids[k]), "cuda", 4) != 0) {
                if (!have_first[p]) {
                    memcpy(first_w[p], gw, n * sizeof(double));
                    memcpy(first_t[p], gt, n * sizeof(double));
                    have_first[p] = 1;
                } else {
                    CHECK(memcmp(first_w[p], gw, n * sizeof(double)) == 0 &&
                              (!mean_theta || memcmp(first_t[p], gt, n * sizeof(double)) == 0),
                          "%s: CPU kernel %s prune %d: sums not the first CPU kernel's bits", what,
                          pk_angcorr_kernel_name(ids[k]), p == 0);
                }
            }
            int bad = 0;
            for (size_t q = 0; q < n && bad < 3; q++) {
                double m = (double)rc[q] + 2;
                double tol_w = 2.0 * m * 0x1p-53 * abs_w[q] * 1.0000001 + 1e-300;
                double tol_t = tol_w * M_PI;
                int ok =
                    gc[q] == rc[q] && fabs(gw[q] - rw[q]) <= tol_w && (!mean_theta || fabs(gt[q] - rt[q]) <= tol_t);
                if (!ok) bad++;
                CHECK(ok,
                      "%s: kernel %s prune %d bin %zu: count %llu vs %llu, weight %.17g vs %.17g (tol %.3g), theta "
                      "%.17g vs %.17g",
                      what, pk_angcorr_kernel_name(ids[k]), p == 0, q, (unsigned long long)gc[q],
                      (unsigned long long)rc[q], gw[q], rw[q], tol_w, gt[q], rt[q]);
            }
        }
    }
    free(rc), free(gc), free(rw), free(rt), free(gw), free(gt), free(abs_w);
    free(first_w[0]), free(first_w[1]), free(first_t[0]), free(first_t[1]);
}

/* The unweighted pruned path forced on, every kernel, against the reference. */
static void compare_pruned(const char *what, const pk_catalog *a, const pk_catalog *b, const pk_bins *bins) {
    pk_context ctx;
    pk_context_init(&ctx);
    size_t n = bins->n_bins;
    uint64_t *ref = calloc(n, sizeof(uint64_t)), *got = calloc(n, sizeof(uint64_t));
    pk_angcorr_options ro = {PK_BACKEND_AUTO, PK_ANGCORR_KERNEL_REF};
    CHECK_OK(pk_angcorr_count(&ctx, &ro, a, b, bins, ref, NULL), &ctx);
    int ids[8];
    int nk = kernels_to_test(ids);
    for (int k = 0; k < nk; k++) {
        pk_angcorr_options opts = {PK_BACKEND_AUTO, ids[k]};
        pk_angcorr_features f = {NULL, NULL, 0, PK_PRUNE_ON};
        pk_pair_stats stats;
        CHECK_OK(pk_angcorr_count_ex(&ctx, &opts, a, b, bins, &f, got, NULL, NULL, &stats), &ctx);
        size_t diff = n;
        for (size_t q = 0; q < n; q++)
            if (got[q] != ref[q]) {
                diff = q;
                break;
            }
        CHECK(diff == n, "%s: pruned kernel %s differs in bin %zu: %llu vs %llu", what, pk_angcorr_kernel_name(ids[k]),
              diff, diff < n ? (unsigned long long)got[diff] : 0ull, diff < n ? (unsigned long long)ref[diff] : 0ull);
    }
    free(ref);
    free(got);
}

/* a: n points; b: for each, a point at an edge (the last one half the
 * time) +- a spread, so that pruning near theta_max is exercised. */
static void edge_catalogs(check_rng *rng, const pk_bins *bins, size_t n, double ra0, double ra1, double dec0,
                          double dec1, double spread, pk_catalog *a, pk_catalog *b) {
    *a = test_catalog(rng, n, ra0, ra1, dec0, dec1);
    *b = test_catalog(rng, n, ra0, ra1, dec0, dec1);
    for (size_t i = 0; i < n; i++) {
        size_t k = i % 2 ? bins->n_bins : (size_t)(check_uniform(rng) * (double)(bins->n_bins + 1));
        double theta = fabs(bins->edges[k] + spread * (2 * check_uniform(rng) - 1));
        if (i % 7 == 0) theta = bins->edges[k];
        offset_point(a->ra[i], a->dec[i], theta, 2 * M_PI * check_uniform(rng), &b->ra[i], &b->dec[i]);
    }
}

static pk_catalog merged(const pk_catalog *a, const pk_catalog *b) {
    pk_catalog m;
    m.n = a->n + b->n;
    m.ra = malloc(m.n * sizeof(double));
    m.dec = malloc(m.n * sizeof(double));
    memcpy(m.ra, a->ra, a->n * sizeof(double));
    memcpy(m.ra + a->n, b->ra, b->n * sizeof(double));
    memcpy(m.dec, a->dec, a->n * sizeof(double));
    memcpy(m.dec + a->n, b->dec, b->n * sizeof(double));
    return m;
}

static void pruned_cases(check_rng *rng, const pk_bins *bins, const char *name) {
    struct {
        const char *where;
        double ra0, ra1, dec0, dec1;
    } regions[] = {
        {"patch", 0.2, 0.6, 0.1, 0.5},
        {"north pole", 0, 2 * M_PI, M_PI / 2 - 0.2, M_PI / 2},
        {"south pole", 0, 2 * M_PI, -M_PI / 2, -M_PI / 2 + 0.15},
        {"across ra 0", -0.3, 0.3, -0.2, 0.2},
        {"sphere", 0, 2 * M_PI, -M_PI / 2, M_PI / 2},
    };
    for (size_t r = 0; r < sizeof regions / sizeof regions[0]; r++) {
        pk_catalog a, b;
        edge_catalogs(rng, bins, 2000, regions[r].ra0, regions[r].ra1, regions[r].dec0, regions[r].dec1, 8e-6, &a, &b);
        if (r == 3)
            for (size_t i = 0; i < a.n; i++) /* as users write them: in [0, 2 pi) */
                if (a.ra[i] < 0) a.ra[i] += 2 * M_PI;
        if (r == 1) a.dec[0] = M_PI / 2, b.dec[1] = M_PI / 2; /* exactly at the pole */
        char what[200];
        snprintf(what, sizeof what, "%s bins, %s, cross", name, regions[r].where);
        compare_pruned(what, &a, &b, bins);
        pk_catalog m = merged(&a, &b);
        snprintf(what, sizeof what, "%s bins, %s, auto", name, regions[r].where);
        compare_pruned(what, &m, NULL, bins);
        if (r == 0 || r == 3) {
            double *wa = test_weights(rng, a.n), *wb = test_weights(rng, b.n), *wm = test_weights(rng, m.n);
            snprintf(what, sizeof what, "%s bins, %s, weighted cross", name, regions[r].where);
            compare_weighted(what, &a, wa, &b, wb, bins, 1);
            snprintf(what, sizeof what, "%s bins, %s, weighted auto", name, regions[r].where);
            compare_weighted(what, &m, wm, NULL, NULL, bins, 1);
            snprintf(what, sizeof what, "%s bins, %s, mean theta only", name, regions[r].where);
            compare_weighted(what, &a, NULL, &b, NULL, bins, 1);
            /* weights alone: the kernels' row slots (log, linear, edge table) */
            snprintf(what, sizeof what, "%s bins, %s, weights alone, cross", name, regions[r].where);
            compare_weighted(what, &a, wa, &b, wb, bins, 0);
            snprintf(what, sizeof what, "%s bins, %s, weights alone, auto", name, regions[r].where);
            compare_weighted(what, &m, wm, NULL, NULL, bins, 0);
            free(wa), free(wb), free(wm);
        }
        pk_catalog_free(&a);
        pk_catalog_free(&b);
        pk_catalog_free(&m);
    }
}

/* ---- jackknife ------------------------------------------------------------- */

static pk_catalog without_patch(const pk_catalog *c, const double *w, const int32_t *patch, int j, double **w_out) {
    pk_catalog s;
    s.n = 0;
    s.ra = malloc(c->n * sizeof(double));
    s.dec = malloc(c->n * sizeof(double));
    *w_out = w ? malloc(c->n * sizeof(double)) : NULL;
    for (size_t i = 0; i < c->n; i++) {
        if (patch[i] == j) continue;
        s.ra[s.n] = c->ra[i];
        s.dec[s.n] = c->dec[i];
        if (w) (*w_out)[s.n] = w[i];
        s.n++;
    }
    return s;
}

static void jackknife_case(check_rng *rng, const pk_bins *bins, int k, int weighted, pk_estimator est) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog d = test_catalog(rng, 1500, 0.1, 0.9, 0.1, 0.8), r = test_catalog(rng, 2100, 0.1, 0.9, 0.1, 0.8);
    double *wd = weighted ? test_weights(rng, d.n) : NULL, *wr = weighted ? test_weights(rng, r.n) : NULL;
    pk_angcorr_run_options ro = {wd, wr, 0, k, PK_PRUNE_AUTO};
    pk_angcorr_result res;
    pk_angcorr_extras ex;
    pk_status st = pk_angcorr_run_ex(&ctx, NULL, &d, &r, bins, est, &ro, &res, &ex);
    CHECK_OK(st, &ctx);
    if (st) return;
    CHECK(ex.n_patches == (size_t)k, "jackknife: %zu patches, asked for %d", ex.n_patches, k);
    int32_t *pd = malloc(d.n * sizeof(int32_t)), *pr = malloc(r.n * sizeof(int32_t));
    CHECK_OK(pk_angcorr_patches(&ctx, &r, k, &d, pd), &ctx);
    CHECK_OK(pk_angcorr_patches(&ctx, &r, k, &r, pr), &ctx);
    size_t n = bins->n_bins;
    for (int j = 0; j < k; j++) {
        double *wd2, *wr2;
        pk_catalog d2 = without_patch(&d, wd, pd, j, &wd2), r2 = without_patch(&r, wr, pr, j, &wr2);
        pk_angcorr_run_options ro2 = {wd2, wr2, 0, 0, PK_PRUNE_OFF};
        pk_angcorr_result direct;
        pk_angcorr_extras dex;
        st = pk_angcorr_run_ex(&ctx, NULL, &d2, &r2, bins, est, &ro2, &direct, &dex);
        CHECK_OK(st, &ctx);
        for (size_t q = 0; st == PK_OK && q < n; q++) {
            double a = ex.omega_jk[(size_t)j * n + q], b = direct.omega[q];
            int same = weighted ? (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-9 * (1 + fabs(b))
                                : (isnan(a) && isnan(b)) || a == b;
            CHECK(same, "jackknife K=%d %s %s: patch %d bin %zu: leave-one-out %.17g, direct %.17g", k,
                  weighted ? "weighted" : "unweighted", pk_estimator_name(est), j, q, a, b);
        }
        if (st == PK_OK) {
            pk_angcorr_result_free(&direct);
            pk_angcorr_extras_free(&dex);
        }
        pk_catalog_free(&d2);
        pk_catalog_free(&r2);
        free(wd2), free(wr2);
    }
    /* the covariance from the leave-one-out values, every entry as the
     * plain sum makes it (the same products added in the same order: bit
     * for bit) */
    {
        const double f = (double)(k - 1) / (double)k;
        double *m = calloc(n, sizeof(double));
        size_t bad = 0, first_bad = 0;
        for (size_t x = 0; m && x < n; x++) {
            for (int j = 0; j < k; j++) m[x] += ex.omega_jk[(size_t)j * n + x];
            m[x] /= k;
        }
        for (size_t x = 0; m && x < n; x++)
            for (size_t y = 0; y < n; y++) {
                double sum = 0;
                for (int j = 0; j < k; j++)
                    sum += (ex.omega_jk[(size_t)j * n + x] - m[x]) * (ex.omega_jk[(size_t)j * n + y] - m[y]);
                double want = f * sum, got = ex.omega_cov[x * n + y];
                if (!(got == want || (isnan(got) && isnan(want))) && bad++ == 0) first_bad = x * n + y;
            }
        CHECK(m && bad == 0, "jackknife covariance: %zu of %zu entries differ from the plain sums (first: %zu)", bad,
              n * n, first_bad);
        for (size_t x = 0; x < n; x++)
            CHECK(ex.omega_err[x] == sqrt(ex.omega_cov[x * n + x]) || isnan(ex.omega_err[x]),
                  "jackknife error bin %zu: %.17g, covariance %.17g", x, ex.omega_err[x], ex.omega_cov[x * n + x]);
        free(m);
    }
    pk_angcorr_result_free(&res);
    pk_angcorr_extras_free(&ex);
    free(pd), free(pr), free(wd), free(wr);
    pk_catalog_free(&d);
    pk_catalog_free(&r);
}

/* ---- RR cells kept and given again ------------------------------------------- */

static int same_doubles(const double *a, const double *b, size_t n) {
    return (!a && !b) || (a && b && memcmp(a, b, n * sizeof(double)) == 0);
}

/* Bit for bit (exact), or to rounding: the CUDA path's float64 atomics add
 * in the order the device runs them, which changes from run to run. */
static int agree(const double *a, const double *b, size_t n, int exact) {
    if (exact || !a || !b) return same_doubles(a, b, n);
    for (size_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && !(fabs(a[i] - b[i]) <= 1e-9 * (1 + fabs(b[i])))) return 0;
    return 1;
}

/* A run given the RR cells of another data catalog's run (through a file
 * and straight) has every output bit for bit as the run that counts RR,
 * on every CPU kernel (on CUDA the counts bit for bit, the sums to
 * rounding); it counts no RR pairs. */
static void rr_cells_case(check_rng *rng, const pk_bins *bins, int k, int weighted, int mean_theta) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog d1 = test_catalog(rng, 900, 0.1, 0.9, 0.1, 0.8), d2 = test_catalog(rng, 700, 0.1, 0.9, 0.1, 0.8);
    pk_catalog r = test_catalog(rng, 1300, 0.1, 0.9, 0.1, 0.8);
    double *w1 = weighted ? test_weights(rng, d1.n) : NULL, *w2 = weighted ? test_weights(rng, d2.n) : NULL;
    double *wr = weighted ? test_weights(rng, r.n) : NULL;
    const int jk = k > 1 ? k : 0; /* K = 1: no patches */
    pk_angcorr_run_options ro1 = {w1, wr, mean_theta, jk, PK_PRUNE_AUTO}, ro2 = {w2, wr, mean_theta, jk, PK_PRUNE_AUTO};
    char path[256];
    snprintf(path, sizeof path, "/tmp/pairkit_rr_cells_%ld.txt", (long)getpid());
    int ids[16];
    int n_ids = kernels_to_test(ids);
    for (int x = 0; x < n_ids; x++) {
        pk_angcorr_options opts = {PK_BACKEND_AUTO, ids[x]};
        pk_angcorr_result r1, counted, given;
        pk_angcorr_extras e1, ec, eg;
        pk_angcorr_rr_cells kept, read_back;
        pk_status st =
            pk_angcorr_run_ex_rr(&ctx, &opts, &d1, &r, bins, PK_ESTIMATOR_LANDY_SZALAY, &ro1, NULL, &kept, &r1, &e1);
        CHECK_OK(st, &ctx);
        if (st) break;
        st = pk_angcorr_write_rr_cells(&ctx, path, &r, &ro1, bins, &kept);
        CHECK_OK(st, &ctx);
        if (st == PK_OK) {
            st = pk_angcorr_read_rr_cells(&ctx, path, &r, &ro2, bins, &read_back);
            CHECK_OK(st, &ctx);
        }
        if (st) {
            pk_angcorr_rr_cells_free(&kept), pk_angcorr_result_free(&r1), pk_angcorr_extras_free(&e1);
            break;
        }
        size_t cells = (size_t)(k > 1 ? k : 1) * (size_t)(k > 1 ? k : 1) * bins->n_bins;
        CHECK(read_back.n_patches == kept.n_patches && read_back.n_bins == kept.n_bins &&
                  memcmp(read_back.counts, kept.counts, cells * sizeof(uint64_t)) == 0 &&
                  same_doubles(read_back.weighted, kept.weighted, cells) &&
                  same_doubles(read_back.theta_sum, kept.theta_sum, cells),
              "RR cells (K=%d weighted=%d mean_theta=%d, %s): read back differ from those written", k, weighted,
              mean_theta, pk_angcorr_kernel_name(ids[x]));
        st = pk_angcorr_run_ex(&ctx, &opts, &d2, &r, bins, PK_ESTIMATOR_LANDY_SZALAY, &ro2, &counted, &ec);
        CHECK_OK(st, &ctx);
        pk_status st2 = pk_angcorr_run_ex_rr(&ctx, &opts, &d2, &r, bins, PK_ESTIMATOR_LANDY_SZALAY, &ro2, &read_back,
                                             NULL, &given, &eg);
        CHECK_OK(st2, &ctx);
        if (st || st2) {
            pk_angcorr_rr_cells_free(&kept), pk_angcorr_rr_cells_free(&read_back);
            pk_angcorr_result_free(&r1), pk_angcorr_result_free(&counted), pk_angcorr_result_free(&given);
            pk_angcorr_extras_free(&e1), pk_angcorr_extras_free(&ec), pk_angcorr_extras_free(&eg);
            break;
        }
        size_t n = bins->n_bins, kk = eg.n_patches;
        int exact = !(weighted || mean_theta) || strncmp(pk_angcorr_kernel_name(ids[x]), "cuda", 4) != 0;
        int same = memcmp(counted.dd, given.dd, n * 8) == 0 && memcmp(counted.dr, given.dr, n * 8) == 0 &&
                   memcmp(counted.rr, given.rr, n * 8) == 0 && agree(counted.omega, given.omega, n, exact) &&
                   agree(ec.rr_w, eg.rr_w, n, exact) && agree(ec.theta_mean_rr, eg.theta_mean_rr, n, exact) &&
                   agree(ec.theta_mean_dd, eg.theta_mean_dd, n, exact) && ec.n_patches == kk &&
                   agree(ec.omega_jk, eg.omega_jk, kk * n, exact) &&
                   agree(ec.omega_cov, eg.omega_cov, kk ? n * n : 0, exact);
        CHECK(same, "RR cells (K=%d weighted=%d mean_theta=%d, %s): the run given RR differs from the one counting it",
              k, weighted, mean_theta, pk_angcorr_kernel_name(ids[x]));
        CHECK(given.stats_rr.pairs_total == 0 && counted.stats_rr.pairs_total == (uint64_t)r.n * r.n,
              "RR cells: %llu RR pairs counted with RR given", (unsigned long long)given.stats_rr.pairs_total);
        if (!jk && !weighted && !mean_theta) { /* no run options at all: the defaults, a plain file */
            pk_angcorr_rr_cells plain;
            st = pk_angcorr_write_rr_cells(&ctx, path, &r, NULL, bins, &kept);
            CHECK_OK(st, &ctx);
            if (st == PK_OK) {
                st = pk_angcorr_read_rr_cells(&ctx, path, &r, NULL, bins, &plain);
                CHECK_OK(st, &ctx);
            }
            if (st == PK_OK) {
                CHECK(memcmp(plain.counts, kept.counts, bins->n_bins * 8) == 0, "RR cells with run NULL differ");
                pk_angcorr_rr_cells_free(&plain);
            }
        }
        /* cells of another patch count or without the separation sums are refused */
        pk_angcorr_run_options other = ro2;
        other.jackknife = jk ? jk + 1 : 3;
        pk_angcorr_result bad;
        pk_angcorr_extras ebad;
        CHECK(pk_angcorr_run_ex_rr(&ctx, &opts, &d2, &r, bins, PK_ESTIMATOR_LANDY_SZALAY, &other, &read_back, NULL,
                                   &bad, &ebad) == PK_ERR_INVALID &&
                  strstr(ctx.message, "this run has"),
              "RR cells of other patches taken: %s", ctx.message);
        pk_angcorr_rr_cells_free(&kept);
        pk_angcorr_rr_cells_free(&read_back);
        pk_angcorr_result_free(&r1), pk_angcorr_result_free(&counted), pk_angcorr_result_free(&given);
        pk_angcorr_extras_free(&e1), pk_angcorr_extras_free(&ec), pk_angcorr_extras_free(&eg);
    }
    remove(path);
    free(w1), free(w2), free(wr);
    pk_catalog_free(&d1), pk_catalog_free(&d2), pk_catalog_free(&r);
}

/* ---- parts summed through the callback -------------------------------------- */

/* The parts of a distributed run as threads of this process: the callback
 * adds each part's cells into one total under a lock and hands every part
 * the total, as a reduction over ranks would. */
typedef struct fake_ranks {
    pthread_mutex_t lock;
    pthread_barrier_t barrier;
    int all_ok;
    uint64_t *c;
    double *w;
    size_t nc, nw;
} fake_ranks;

static int fake_sum(void *user, int ok, uint64_t *counts, size_t nc, double *sums, size_t nw) {
    fake_ranks *f = user;
    pthread_mutex_lock(&f->lock);
    if (!ok) f->all_ok = 0;
    if (ok && !f->c) {
        f->c = calloc(nc, sizeof(uint64_t)), f->w = calloc(nw, sizeof(double));
        f->nc = nc, f->nw = nw;
    }
    if (ok && f->c && nc == f->nc && nw == f->nw) {
        for (size_t i = 0; i < nc; i++) f->c[i] += counts[i];
        for (size_t i = 0; i < nw; i++) f->w[i] += sums[i];
    } else if (ok) {
        f->all_ok = 0;
    }
    pthread_mutex_unlock(&f->lock);
    pthread_barrier_wait(&f->barrier);
    int all = f->all_ok;
    if (all && ok) {
        memcpy(counts, f->c, nc * sizeof(uint64_t));
        memcpy(sums, f->w, nw * sizeof(double));
    }
    pthread_barrier_wait(&f->barrier);
    return !all;
}

typedef struct part_job {
    fake_ranks *f;
    int part, n_parts, kernel;
    const pk_catalog *d, *r;
    const pk_bins *bins;
    const pk_angcorr_run_options *ro;
    pk_angcorr_rr_cells cells;
    pk_angcorr_result res;
    pk_angcorr_extras ex;
    pk_status st;
    char message[512];
} part_job;

static void *part_thread(void *arg) {
    part_job *j = arg;
    pk_context ctx;
    pk_context_init(&ctx);
    ctx.n_threads = 1;
    pk_angcorr_options opts = {PK_BACKEND_CPU, j->kernel};
    j->st = pk_angcorr_run_ex_part(&ctx, &opts, j->part, j->n_parts, fake_sum, j->f, j->d, j->r, j->bins,
                                   PK_ESTIMATOR_LANDY_SZALAY, j->ro, NULL, &j->cells, &j->res, &j->ex);
    snprintf(j->message, sizeof j->message, "%s", ctx.message);
    return NULL;
}

/* n_parts threads as parts: with patches part 0's results bit for bit those
 * of one process, without them the counts exact and the sums to rounding;
 * a part that fails (an unknown kernel) stops every part. */
static void parts_case(check_rng *rng, int n_parts, int jackknife, int bad_part) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins bins;
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 12, &bins), &ctx);
    pk_catalog d = test_catalog(rng, 800, 0.1, 0.9, 0.1, 0.8), r = test_catalog(rng, 1100, 0.1, 0.9, 0.1, 0.8);
    double *wd = test_weights(rng, d.n), *wr = test_weights(rng, r.n);
    pk_angcorr_run_options ro = {wd, wr, 1, jackknife, PK_PRUNE_AUTO};
    pk_angcorr_result one;
    pk_angcorr_extras eone;
    pk_angcorr_rr_cells cone;
    pk_angcorr_options cpu = {PK_BACKEND_CPU, 0}; /* as the parts run (CUDA's sums are not bit-reproducible) */
    CHECK_OK(pk_angcorr_run_ex_rr(&ctx, &cpu, &d, &r, &bins, PK_ESTIMATOR_LANDY_SZALAY, &ro, NULL, &cone, &one, &eone),
             &ctx);
    fake_ranks f = {.all_ok = 1};
    pthread_mutex_init(&f.lock, NULL);
    pthread_barrier_init(&f.barrier, NULL, (unsigned)n_parts);
    part_job jobs[8];
    pthread_t th[8];
    for (int p = 0; p < n_parts; p++) {
        memset(&jobs[p], 0, sizeof jobs[p]);
        jobs[p].f = &f, jobs[p].part = p, jobs[p].n_parts = n_parts, jobs[p].kernel = p == bad_part ? 12345 : 0;
        jobs[p].d = &d, jobs[p].r = &r, jobs[p].bins = &bins, jobs[p].ro = &ro;
        pthread_create(&th[p], NULL, part_thread, &jobs[p]);
    }
    for (int p = 0; p < n_parts; p++) pthread_join(th[p], NULL);
    size_t n = bins.n_bins;
    if (bad_part >= 0) {
        for (int p = 0; p < n_parts; p++)
            CHECK(jobs[p].st != PK_OK && (p == bad_part || strstr(jobs[p].message, "another part of the run failed")),
                  "parts: part %d of %d went on (status %d: %s) after part %d failed", p, n_parts, (int)jobs[p].st,
                  jobs[p].message, bad_part);
    } else {
        part_job *j = &jobs[0];
        CHECK(j->st == PK_OK, "parts: part 0 of %d: status %d: %s", n_parts, (int)j->st, j->message);
        int exact = jackknife >= 2;
        int same = j->st == PK_OK && memcmp(j->res.dd, one.dd, n * 8) == 0 && memcmp(j->res.dr, one.dr, n * 8) == 0 &&
                   memcmp(j->res.rr, one.rr, n * 8) == 0 && agree(j->res.omega, one.omega, n, exact) &&
                   agree(j->ex.dd_w, eone.dd_w, n, exact) && agree(j->ex.rr_w, eone.rr_w, n, exact) &&
                   agree(j->ex.theta_mean_dr, eone.theta_mean_dr, n, exact) &&
                   (!exact || agree(j->ex.omega_cov, eone.omega_cov, n * n, 1)) &&
                   j->res.stats_rr.pairs_total == one.stats_rr.pairs_total && j->cells.n_patches == cone.n_patches &&
                   memcmp(j->cells.counts, cone.counts, (size_t)cone.n_patches * cone.n_patches * n * 8) == 0 &&
                   agree(j->cells.weighted, cone.weighted, (size_t)cone.n_patches * cone.n_patches * n, exact);
        CHECK(same, "parts: %d parts (jackknife %d) differ from one process%s", n_parts, jackknife,
              exact ? " (bit for bit expected)" : " beyond rounding");
    }
    for (int p = 0; p < n_parts; p++) {
        pk_angcorr_result_free(&jobs[p].res);
        pk_angcorr_extras_free(&jobs[p].ex);
        pk_angcorr_rr_cells_free(&jobs[p].cells);
    }
    pthread_barrier_destroy(&f.barrier);
    pthread_mutex_destroy(&f.lock);
    free(f.c), free(f.w);
    pk_angcorr_result_free(&one);
    pk_angcorr_extras_free(&eone);
    pk_angcorr_rr_cells_free(&cone);
    free(wd), free(wr);
    pk_catalog_free(&d), pk_catalog_free(&r);
    pk_bins_free(&bins);
}

/* ---- normalisation ------------------------------------------------------------ */

/* pk_acos within one ulp of the C library's acos everywhere on [-1, 1]
 * (uniform draws, draws crowded towards both ends, where the mean
 * separations of small scales live, and the branch points), and a row's
 * separations from pk_angcorr_row_theta (vectorised) the scalar's bits. */
static void acos_fast(check_rng *rng) {
    double worst = 0, worst_x = 0;
    for (int k = 0; k < 3000000; k++) {
        double u = check_uniform(rng), x;
        if (k % 3 == 0) x = 2 * u - 1;
        else x = (k % 3 == 1 ? 1 : -1) * (1 - u * ldexp(1.0, -(k % 50)));
        double want = acos(x), got = pk_acos(x);
        double ulp = nextafter(want, INFINITY) - want;
        double e = fabs(got - want) / ulp;
        if (e > worst) worst = e, worst_x = x;
    }
    CHECK(worst <= 1.0, "pk_acos: %.3g ulp from acos at x = %.17g", worst, worst_x);
    const double special[] = {
        1.0,    -1.0,  0.5, -0.5, 0.0, -0.0, nextafter(0.5, 0), nextafter(0.5, 1), nextafter(1, 0), nextafter(-1, 0),
        1e-300, -1e-20};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) {
        double want = acos(special[k]), got = pk_acos(special[k]);
        CHECK(fabs(got - want) <= nextafter(want, INFINITY) - want, "pk_acos(%.17g) = %.17g, acos %.17g", special[k],
              got, want);
    }
    pk_catalog a = test_catalog(rng, 37, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
    pk_catalog b = test_catalog(rng, 1001, 0.1, 0.2, 0.1, 0.2);
    pk_unit_vectors va, vb;
    pk_context ctx;
    pk_context_init(&ctx);
    CHECK_OK(pk_unit_vectors_make(&ctx, &a, &va), &ctx);
    CHECK_OK(pk_unit_vectors_make(&ctx, &b, &vb), &ctx);
    pk_pair_job job;
    memset(&job, 0, sizeof job);
    job.xa = va.x, job.ya = va.y, job.za = va.z, job.xb = vb.x, job.yb = vb.y, job.zb = vb.z;
    job.n_a = a.n, job.n_b = b.n;
    double theta[1001];
    int bad = 0;
    for (int path = 0; path < 3; path++) {
        if ((path == 2 && !pk_cpu_has_avx512()) || (path == 1 && !pk_cpu_has_avx2_fma())) continue;
        pk_angcorr_row_theta_path = path;
        for (size_t i = 0; i < a.n; i++) {
            size_t j0 = i % 7, j1 = b.n - i % 5; /* odd starts and lengths: the vector loops' tails */
            pk_angcorr_row_theta(&job, i, j0, j1, theta);
            for (size_t j = j0; j < j1 && bad < 3; j++) {
                double d = pk_angcorr_dot_ref(va.x[i], va.y[i], va.z[i], vb.x[j], vb.y[j], vb.z[j]);
                d = d > 1.0 ? 1.0 : d < -1.0 ? -1.0 : d;
                double want = pk_acos(d);
                if (memcmp(&want, &theta[j - j0], sizeof want) != 0) bad++;
                CHECK(memcmp(&want, &theta[j - j0], sizeof want) == 0,
                      "row separations, path %d: row %zu column %zu %.17g, %.17g", path, i, j, theta[j - j0], want);
            }
        }
    }
    pk_angcorr_row_theta_path = -1;
    /* dot products exactly d (a = (1, 0, 0), b = (d, 0, 0)): both ends,
     * the branch points and their neighbours, and beyond +-1 (clamped) */
    {
        const double ds[] = {1.0,
                             -1.0,
                             0.5,
                             -0.5,
                             0.0,
                             nextafter(1.0, 0),
                             nextafter(-1.0, 0),
                             nextafter(0.5, 0),
                             nextafter(0.5, 1),
                             nextafter(-0.5, 0),
                             nextafter(-0.5, -1),
                             nextafter(1.0, 2),
                             nextafter(-1.0, -2),
                             1.0 + 1e-12,
                             -1.0 - 1e-12,
                             1e-300,
                             -1e-300,
                             0.999999999,
                             -0.999999999};
        enum { N_D = sizeof ds / sizeof ds[0] };
        double one = 1.0, zero = 0.0, zb[N_D], got[N_D];
        for (int k = 0; k < N_D; k++) zb[k] = 0.0;
        pk_pair_job dj;
        memset(&dj, 0, sizeof dj);
        dj.xa = &one, dj.ya = &zero, dj.za = &zero, dj.xb = ds, dj.yb = zb, dj.zb = zb;
        for (int path = 0; path < 3; path++) {
            if ((path == 2 && !pk_cpu_has_avx512()) || (path == 1 && !pk_cpu_has_avx2_fma())) continue;
            pk_angcorr_row_theta_path = path;
            pk_angcorr_row_theta(&dj, 0, 0, N_D, got);
            for (int k = 0; k < N_D; k++) {
                double c = ds[k] > 1.0 ? 1.0 : ds[k] < -1.0 ? -1.0 : ds[k];
                double want = acos(c);
                CHECK(fabs(got[k] - want) <= nextafter(want, INFINITY) - want && !isnan(got[k]),
                      "row separations, path %d: dot %.17g gives %.17g, acos %.17g", path, ds[k], got[k], want);
            }
        }
        pk_angcorr_row_theta_path = -1;
    }
    pk_unit_vectors_free(&va);
    pk_unit_vectors_free(&vb);
    pk_catalog_free(&a);
    pk_catalog_free(&b);
}

static void normalisation(void) {
    uint64_t dd[1] = {1000}, dr[1] = {3000}, rr[1] = {5000};
    double w[1], want;
    double nd = 100, nr = 150;
    pk_estimate(PK_ESTIMATOR_LANDY_SZALAY, 100, 150, 1, dd, dr, rr, w);
    want = (1000 / (nd * nd) - 2 * 3000 / (nd * nr) + 5000 / (nr * nr)) / (5000 / (nr * nr));
    CHECK(fabs(w[0] - want) <= 1e-14 * fabs(want), "LS with N_D != N_R: %.17g vs %.17g", w[0], want);
    double ddw[1] = {1000}, drw[1] = {3000}, rrw[1] = {5000};
    pk_estimate_weighted(PK_ESTIMATOR_LANDY_SZALAY, nd, nr, 1, ddw, drw, rrw, w);
    CHECK(fabs(w[0] - want) <= 1e-14 * fabs(want), "weighted LS with unit weights: %.17g vs %.17g", w[0], want);
    pk_estimate_weighted(PK_ESTIMATOR_NATURAL, 2 * nd, 3 * nr, 1, ddw, drw, rrw, w);
    want = (1000 / (4 * nd * nd)) / (5000 / (9 * nr * nr)) - 1;
    CHECK(fabs(w[0] - want) <= 1e-14 * fabs(want), "weighted natural: %.17g vs %.17g", w[0], want);
    pk_estimate_weighted(PK_ESTIMATOR_HAMILTON, nd, nr, 1, ddw, drw, rrw, w);
    want = (1000 / (nd * nd)) * (5000 / (nr * nr)) / ((3000 / (nd * nr)) * (3000 / (nd * nr))) - 1;
    CHECK(fabs(w[0] - want) <= 1e-13 * fabs(want), "weighted Hamilton: %.17g vs %.17g", w[0], want);
}

#ifdef PK_HAVE_CUDA
/* A run with the backend left to pairkit against the same run on the
 * CPU: counts and pair totals bit for bit, omega, the leave-one-out omegas
 * and the covariance bit for bit (exact) or to rounding. The auto run's
 * result goes to *keep (the caller frees it) where keep is not NULL. */
static void backend_matches_cpu(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *d,
                                const pk_catalog *r, const pk_bins *bins, const pk_angcorr_run_options *ro, int exact,
                                const char *what, pk_angcorr_result *keep) {
    pk_angcorr_options cpu = {PK_BACKEND_CPU, 0};
    pk_angcorr_result ra, rc;
    pk_angcorr_extras ea, ec;
    pk_status sa = pk_angcorr_run_ex(ctx, opts, d, r, bins, PK_ESTIMATOR_LANDY_SZALAY, ro, &ra, &ea);
    CHECK_OK(sa, ctx);
    pk_status sc = pk_angcorr_run_ex(ctx, &cpu, d, r, bins, PK_ESTIMATOR_LANDY_SZALAY, ro, &rc, &ec);
    CHECK_OK(sc, ctx);
    if (sa == PK_OK && sc == PK_OK) {
        size_t n = bins->n_bins, k = ro->jackknife > 1 ? (size_t)ro->jackknife : 0;
        CHECK(memcmp(ra.dd, rc.dd, n * 8) == 0 && memcmp(ra.dr, rc.dr, n * 8) == 0 &&
                  memcmp(ra.rr, rc.rr, n * 8) == 0 && agree(ra.omega, rc.omega, n, exact) &&
                  agree(ea.omega_jk, ec.omega_jk, k * n, exact) &&
                  agree(ea.omega_cov, ec.omega_cov, k ? n * n : 0, exact) &&
                  ra.stats_dd.pairs_total == rc.stats_dd.pairs_total &&
                  ra.stats_dr.pairs_total == rc.stats_dr.pairs_total &&
                  ra.stats_dr.pairs_in_range == rc.stats_dr.pairs_in_range &&
                  ra.stats_rr.pairs_in_range == rc.stats_rr.pairs_in_range,
              "%s backend, %s: differs from the CPU run", opts ? "cuda" : "auto", what);
        CHECK(agree(ea.dd_w, ec.dd_w, ea.dd_w ? n : 0, exact) && agree(ea.dr_w, ec.dr_w, ea.dr_w ? n : 0, exact) &&
                  agree(ea.rr_w, ec.rr_w, ea.rr_w ? n : 0, exact) && !ea.dd_w == !ec.dd_w,
              "%s: weighted counts differ from the CPU run's", what);
        CHECK(agree(ea.theta_mean_dd, ec.theta_mean_dd, ea.theta_mean_dd ? n : 0, exact) &&
                  agree(ea.theta_mean_dr, ec.theta_mean_dr, ea.theta_mean_dr ? n : 0, exact) &&
                  agree(ea.theta_mean_rr, ec.theta_mean_rr, ea.theta_mean_rr ? n : 0, exact) &&
                  !ea.theta_mean_dd == !ec.theta_mean_dd && !ea.theta_mean_dd == !ro->mean_theta,
              "%s: mean separations differ from the CPU run's", what);
    }
    if (sa == PK_OK && keep) *keep = ra;
    else if (sa == PK_OK) pk_angcorr_result_free(&ra);
    if (sa == PK_OK) pk_angcorr_extras_free(&ea);
    if (sc == PK_OK) pk_angcorr_result_free(&rc), pk_angcorr_extras_free(&ec);
    if (sa != PK_OK && keep) memset(keep, 0, sizeof *keep);
}

static void auto_matches_cpu(pk_context *ctx, const pk_catalog *d, const pk_catalog *r, const pk_bins *bins,
                             const pk_angcorr_run_options *ro, int exact, const char *what, pk_angcorr_result *keep) {
    backend_matches_cpu(ctx, NULL, d, r, bins, ro, exact, what, keep);
}
#endif

int main(void) {
    check_rng rng = check_rng_make(6060606);
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins logb, lin, list;
    CHECK_OK(pk_bins_log(&ctx, 0.01 * M_PI / 180, 10 * M_PI / 180, 20, &logb), &ctx);
    CHECK_OK(pk_bins_linear(&ctx, 0.5 * M_PI / 180, 0.25 * M_PI / 180, 30, &lin), &ctx);
    const double e[] = {0.0, 0.003, 0.02, 0.05, 0.4, 1.0, 2.5, 3.0};
    double er[8];
    for (int k = 0; k < 8; k++) er[k] = e[k] * M_PI / 180;
    CHECK_OK(pk_bins_from_edges(&ctx, er, 8, &list), &ctx);
    const pk_bins *all[3] = {&logb, &lin, &list};
    const char *names[3] = {"log", "linear", "listed"};
    for (int k = 0; k < 3; k++) pruned_cases(&rng, all[k], names[k]);

    /* weights on the whole sphere with wide bins (no pruning possible) */
    {
        pk_bins def;
        CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
        pk_catalog a = test_catalog(&rng, 700, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        pk_catalog b = test_catalog(&rng, 333, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        double *wa = test_weights(&rng, a.n), *wb = test_weights(&rng, b.n);
        compare_weighted("default bins weighted cross", &a, wa, &b, wb, &def, 1);
        compare_weighted("default bins weighted auto", &a, wa, NULL, NULL, &def, 0);
        free(wa), free(wb);
        pk_catalog_free(&a);
        pk_catalog_free(&b);
        pk_bins_free(&def);
    }

    jackknife_case(&rng, &logb, 4, 0, PK_ESTIMATOR_LANDY_SZALAY);
    jackknife_case(&rng, &lin, 6, 0, PK_ESTIMATOR_NATURAL);
    jackknife_case(&rng, &logb, 5, 1, PK_ESTIMATOR_LANDY_SZALAY);
    {
        /* 100 bins: the covariance's rows shared among threads */
        pk_bins lin100;
        CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.01 * M_PI / 180, 100, &lin100), &ctx);
        jackknife_case(&rng, &lin100, 3, 0, PK_ESTIMATOR_LANDY_SZALAY);
        pk_bins_free(&lin100);
    }
    /* patch pairs that cannot fit are refused before any counting, and so
     * are more patches than random objects */
    {
        pk_bins def;
        CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
        pk_catalog a = test_catalog(&rng, 50, 0.1, 0.9, 0.1, 0.8), r = test_catalog(&rng, 2100, 0.1, 0.9, 0.1, 0.8);
        pk_angcorr_result res;
        pk_angcorr_extras ex;
        pk_angcorr_run_options ro = {NULL, NULL, 0, 2000, PK_PRUNE_AUTO};
        pk_status st = pk_angcorr_run_ex(&ctx, NULL, &a, &r, &def, PK_ESTIMATOR_LANDY_SZALAY, &ro, &res, &ex);
        CHECK(st == PK_ERR_INVALID &&
                  strstr(ctx.message, "jackknife K = 2000 with 1440 bins: the K^2 patch-pair cells"),
              "K = 2000 over 1440 bins: status %d: %s", (int)st, ctx.message);
        if (st == PK_OK) pk_angcorr_result_free(&res), pk_angcorr_extras_free(&ex);
        ro.jackknife = 3000;
        st = pk_angcorr_run_ex(&ctx, NULL, &a, &r, &def, PK_ESTIMATOR_LANDY_SZALAY, &ro, &res, &ex);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "3000 patches need at least 3000 random objects (have 2100)"),
              "K = 3000 over 2100 randoms: status %d: %s", (int)st, ctx.message);
        if (st == PK_OK) pk_angcorr_result_free(&res), pk_angcorr_extras_free(&ex);
        pk_catalog_free(&a);
        pk_catalog_free(&r);
        pk_bins_free(&def);
    }
#ifdef PK_HAVE_CUDA
    /* the backend left to pairkit on a GPU machine, two threads: the GPU
     * and the CPU share the patch pairs, the GPU taking one batch
     * (unweighted: the largest quarter of the work, RR pairs) or one count
     * (weighted: the largest, an RR pair) and the CPU the rest; counts and
     * unweighted results as the CPU's, sums to rounding */
    if (pk_cuda_device_count() > 0) {
        ctx.n_threads = 2;
        pk_angcorr_share_gpu_batches = 1;
        pk_catalog d = test_catalog(&rng, 3000, 0.1, 0.9, 0.1, 0.8), r = test_catalog(&rng, 6000, 0.1, 0.9, 0.1, 0.8);
        double *wd = test_weights(&rng, d.n), *wr = test_weights(&rng, r.n);
        for (int weighted = 0; weighted < 2; weighted++) {
            pk_angcorr_run_options ro = {weighted ? wd : NULL, weighted ? wr : NULL, 0, 4, PK_PRUNE_AUTO};
            pk_angcorr_result ra;
            auto_matches_cpu(&ctx, &d, &r, &logb, &ro, !weighted,
                             weighted ? "small patch pairs on the CPU, weighted" : "one GPU batch, unweighted", &ra);
            if (!ra.dd) break;
            CHECK(strncmp(pk_angcorr_kernel_name(ra.stats_rr.kernel), "cuda", 4) == 0 &&
                      strncmp(pk_angcorr_kernel_name(ra.stats_dd.kernel), "cuda", 4) != 0,
                  "auto backend: RR by %s, DD by %s", pk_angcorr_kernel_name(ra.stats_rr.kernel),
                  pk_angcorr_kernel_name(ra.stats_dd.kernel));
            pk_angcorr_result_free(&ra);
        }
        pk_angcorr_share_gpu_batches = -1;
        free(wd), free(wr);
        pk_catalog_free(&d);
        pk_catalog_free(&r);
        ctx.n_threads = 0;
        /* the GPU stopping early: bins beyond its table (the session
         * refused: every count the CPU's or the later loops'; weighted, the
         * first count refused and handed back), and one batch with the rest
         * too large for a CPU thread (left to the GPU's later pass); each as
         * the CPU counts them */
        for (int how = 0; how < 3; how++) {
            ctx.n_threads = 2;
            pk_bins many;
            CHECK_OK(pk_bins_log(&ctx, 0.001, 3.0, 9000, &many), &ctx);
            const pk_bins *bb = how != 1 ? &many : &logb;
            size_t nd = how != 1 ? 3000 : 30000;
            pk_catalog ds = test_catalog(&rng, nd, 0.1, 0.9, 0.1, 0.8), rs = test_catalog(&rng, nd, 0.1, 0.9, 0.1, 0.8);
            double *wds = how == 2 ? test_weights(&rng, ds.n) : NULL, *wrs = how == 2 ? test_weights(&rng, rs.n) : NULL;
            pk_angcorr_run_options ro = {wds, wrs, 0, 4, PK_PRUNE_AUTO};
            pk_angcorr_share_gpu_batches = how != 1 ? -1 : 1;
            auto_matches_cpu(&ctx, &ds, &rs, bb, &ro, how != 2,
                             how == 0   ? "the GPU stopping early (9,000 bins)"
                             : how == 1 ? "the GPU stopping early (one batch, then counts of 5.6e7 pairs)"
                                        : "the GPU refusing a weighted count (9,000 bins)",
                             NULL);
            free(wds), free(wrs);
            pk_angcorr_share_gpu_batches = -1;
            pk_bins_free(&many);
            pk_catalog_free(&ds);
            pk_catalog_free(&rs);
            ctx.n_threads = 0;
        }
        /* shared without a limit: tiny patches (K = 300 over 2,000 x 3,000
         * objects, the CPU the faster) and K = 40 over 30,000 x 30,000 (the
         * GPU the faster), each as the CPU counts it; a run stopped from
         * its progress callback ends cancelled */
        for (int big = 0; big < 2; big++) {
            size_t nd = big ? 30000 : 2000, nr = big ? 30000 : 3000;
            int kp = big ? 40 : 300;
            pk_catalog ds = test_catalog(&rng, nd, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
            pk_catalog rs = test_catalog(&rng, nr, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
            pk_angcorr_run_options ro = {NULL, NULL, 0, kp, PK_PRUNE_AUTO};
            char what[96];
            snprintf(what, sizeof what, "K = %d shared by the GPU and the CPU", kp);
            auto_matches_cpu(&ctx, &ds, &rs, &logb, &ro, 1, what, NULL);
            if (big) cancel_in_counts(&ctx, &ds, &rs, &logb, kp, NULL, NULL, NULL);
            /* weighted and pruned counts, which the GPU takes one at a time */
            double *wds = test_weights(&rng, ds.n), *wrs = test_weights(&rng, rs.n);
            pk_angcorr_run_options rw = {wds, wrs, 0, kp, PK_PRUNE_AUTO}, rp = {NULL, NULL, 0, kp, PK_PRUNE_ON};
            snprintf(what, sizeof what, "K = %d weighted, shared by the GPU and the CPU", kp);
            auto_matches_cpu(&ctx, &ds, &rs, &logb, &rw, 0, what, NULL);
            if (big) cancel_in_counts(&ctx, &ds, &rs, &logb, kp, NULL, wds, wrs);
            snprintf(what, sizeof what, "K = %d pruned, shared by the GPU and the CPU", kp);
            auto_matches_cpu(&ctx, &ds, &rs, &logb, &rp, 1, what, NULL);
            free(wds), free(wrs);
            pk_catalog_free(&ds);
            pk_catalog_free(&rs);
        }
        /* --backend cuda alone: weighted, weighted with mean separations,
         * and pruned patch pairs in batches (K = 300: 45 batches of at most
         * 4,096 counts; K = 40 also with batches of one count, the objects
         * a batch holds lowered below a count's), as the CPU counts them */
        for (int big = 0; big < 2; big++) {
            size_t nd = big ? 30000 : 2000, nr = big ? 30000 : 3000;
            int kp = big ? 40 : 300;
            pk_catalog ds = test_catalog(&rng, nd, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
            pk_catalog rs = test_catalog(&rng, nr, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
            double *wds = test_weights(&rng, ds.n), *wrs = test_weights(&rng, rs.n);
            pk_angcorr_options gpu = {PK_BACKEND_CUDA, 0};
            pk_angcorr_run_options rw = {wds, wrs, 0, kp, PK_PRUNE_AUTO}, rt = {wds, wrs, 1, kp, PK_PRUNE_ON};
            pk_angcorr_run_options rp = {NULL, NULL, 0, kp, PK_PRUNE_ON};
            for (int one = 0; one < 1 + big; one++) {
                char what[96];
                if (one) pk_angcorr_feature_batch_objects = 100; /* every count alone */
                snprintf(what, sizeof what, "K = %d weighted on the GPU%s", kp, one ? ", one count a batch" : "");
                backend_matches_cpu(&ctx, &gpu, &ds, &rs, &logb, &rw, 0, what, NULL);
                snprintf(what, sizeof what, "K = %d weighted, mean separations, pruned on the GPU%s", kp,
                         one ? ", one count a batch" : "");
                backend_matches_cpu(&ctx, &gpu, &ds, &rs, &logb, &rt, 0, what, NULL);
                snprintf(what, sizeof what, "K = %d pruned on the GPU%s", kp, one ? ", one count a batch" : "");
                backend_matches_cpu(&ctx, &gpu, &ds, &rs, &logb, &rp, 1, what, NULL);
                pk_angcorr_feature_batch_objects = (size_t)1 << 20;
            }
            if (big) cancel_in_counts(&ctx, &ds, &rs, &logb, kp, &gpu, wds, wrs);
            free(wds), free(wrs);
            pk_catalog_free(&ds);
            pk_catalog_free(&rs);
        }
        /* many patch pairs on the GPU at once: K = 80 over the whole sky
         * with the default bins (DR's 6,400 pairs in two batches of the
         * device's slots), the fastest CUDA kernel; counts, leave-one-out
         * omegas and covariance as the CPU's */
        pk_bins def;
        CHECK_OK(pk_bins_default(&ctx, &def), &ctx);
        pk_catalog dk = test_catalog(&rng, 2500, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        pk_catalog rk = test_catalog(&rng, 4000, 0, 2 * M_PI, -M_PI / 2, M_PI / 2);
        pk_angcorr_run_options ro = {NULL, NULL, 0, 80, PK_PRUNE_AUTO};
        pk_angcorr_options gpu = {PK_BACKEND_CUDA, 0}, cpu = {PK_BACKEND_CPU, 0};
        pk_angcorr_result rg, rc;
        pk_angcorr_extras eg, ec;
        pk_status sg = pk_angcorr_run_ex(&ctx, &gpu, &dk, &rk, &def, PK_ESTIMATOR_LANDY_SZALAY, &ro, &rg, &eg);
        CHECK_OK(sg, &ctx);
        pk_status sc = pk_angcorr_run_ex(&ctx, &cpu, &dk, &rk, &def, PK_ESTIMATOR_LANDY_SZALAY, &ro, &rc, &ec);
        CHECK_OK(sc, &ctx);
        if (sg == PK_OK && sc == PK_OK) {
            size_t n = def.n_bins;
            CHECK(memcmp(rg.dd, rc.dd, n * 8) == 0 && memcmp(rg.dr, rc.dr, n * 8) == 0 &&
                      memcmp(rg.rr, rc.rr, n * 8) == 0 && agree(rg.omega, rc.omega, n, 1) &&
                      agree(eg.omega_jk, ec.omega_jk, 80 * n, 1) && agree(eg.omega_cov, ec.omega_cov, n * n, 1),
                  "K = 80 on the GPU at once: differs from the CPU run");
            CHECK(strncmp(pk_angcorr_kernel_name(rg.stats_dr.kernel), "cuda", 4) == 0 &&
                      rg.stats_dr.pairs_total == (uint64_t)dk.n * rk.n &&
                      rg.stats_rr.pairs_total == (uint64_t)rk.n * rk.n &&
                      rg.stats_dd.pairs_in_range == rc.stats_dd.pairs_in_range,
                  "K = 80 on the GPU: DR by %s, %llu DR pairs", pk_angcorr_kernel_name(rg.stats_dr.kernel),
                  (unsigned long long)rg.stats_dr.pairs_total);
            pk_angcorr_result_free(&rg), pk_angcorr_result_free(&rc);
            pk_angcorr_extras_free(&eg), pk_angcorr_extras_free(&ec);
        }
        pk_catalog_free(&dk);
        pk_catalog_free(&rk);
        pk_bins_free(&def);
    }
#endif
    patches_as_before(&rng);
    patches_two_fields();
    cancel_in_edge_table(&rng);
    /* stopped inside the patch-pair counts, on the CPU's threads */
    {
        ctx.n_threads = 2;
        pk_catalog d = test_catalog(&rng, 2000, 0.1, 0.9, 0.1, 0.8), r = test_catalog(&rng, 3000, 0.1, 0.9, 0.1, 0.8);
        pk_angcorr_options cpu = {PK_BACKEND_CPU, 0};
        cancel_in_counts(&ctx, &d, &r, &logb, 8, &cpu, NULL, NULL);
        pk_catalog_free(&d);
        pk_catalog_free(&r);
        ctx.n_threads = 0;
    }
    rr_cells_case(&rng, &logb, 4, 1, 1);
    rr_cells_case(&rng, &lin, 5, 0, 0);
    rr_cells_case(&rng, &list, 1, 1, 1);
    rr_cells_case(&rng, &logb, 1, 0, 0); /* plain RR: a plain file */
    parts_case(&rng, 3, 4, -1);
    parts_case(&rng, 2, 0, -1);
    parts_case(&rng, 5, 0, -1);
    parts_case(&rng, 3, 4, 1);
    parts_case(&rng, 4, 0, 3);
    normalisation();
    acos_fast(&rng);

    /* bad values */
    {
        pk_bins b;
        CHECK(pk_bins_log(&ctx, 1.0, 1.0, 10, &b) == PK_ERR_INVALID, "log bins with theta_min == theta_max accepted");
        CHECK(pk_bins_log(&ctx, 0.0, 1.0, 10, &b) == PK_ERR_INVALID, "log bins from 0 accepted");
        CHECK(pk_bins_log(&ctx, -1.0, 1.0, 10, &b) == PK_ERR_INVALID, "log bins from -1 accepted");
        CHECK(strstr(ctx.message, "theta_min > 0") != NULL, "message: %s", ctx.message);
        pk_catalog a = test_catalog(&rng, 10, 0, 1, 0, 1);
        double w[10];
        for (int i = 0; i < 10; i++) w[i] = 1;
        w[3] = (double)NAN;
        pk_angcorr_features f = {w, NULL, 0, PK_PRUNE_AUTO};
        uint64_t c[20];
        CHECK(pk_angcorr_count_ex(&ctx, NULL, &a, NULL, &logb, &f, c, NULL, NULL, NULL) == PK_ERR_INVALID,
              "a NaN weight accepted");
        CHECK(strstr(ctx.message, "weights_a[3] is NaN") != NULL, "message: %s", ctx.message);
        pk_angcorr_run_options ro = {NULL, NULL, 0, 1, PK_PRUNE_AUTO};
        pk_angcorr_result res;
        pk_angcorr_extras ex;
        CHECK(pk_angcorr_run_ex(&ctx, NULL, &a, &a, &logb, PK_ESTIMATOR_LANDY_SZALAY, &ro, &res, &ex) == PK_ERR_INVALID,
              "jackknife with one patch accepted");
        ro.jackknife = 11;
        CHECK(pk_angcorr_run_ex(&ctx, NULL, &a, &a, &logb, PK_ESTIMATOR_LANDY_SZALAY, &ro, &res, &ex) == PK_ERR_INVALID,
              "jackknife with more patches than randoms accepted");
        pk_catalog_free(&a);
    }
    for (int k = 0; k < 3; k++) pk_bins_free((pk_bins *)all[k]);
    return check_finish("test_angcorr_features");
}
