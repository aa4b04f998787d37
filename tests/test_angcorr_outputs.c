/* test_angcorr_outputs.c - what a run hands the user, against the float64
 * reference and hand-computed values, on small catalogs (fast):
 *
 * - the estimators' guards (a zero DR or RR bin), weighted and not, by hand;
 * - every estimator, weighted and unweighted, of pk_angcorr_run_ex: the
 *   counts, weighted counts, mean separations of DD, DR and RR and omega
 *   against pk_angcorr_count_ref_weighted and the estimators' formulas
 *   written out here;
 * - the CSV and ECSV rows: every column read back equals the value it
 *   names;
 * - RR files: cells of other random weights refused; a plain file whose
 *   counts exceed the n^2 pairs (with a checksum that matches) refused;
 * - weights summing to 0 refused (the estimators divide by the total).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "angcorr/angcorr_internal.h"
#include "angcorr_util.h"

static int close_to(double got, double want, double rel) {
    if (isnan(want)) return isnan(got);
    return fabs(got - want) <= rel * (fabs(want) + 1e-300);
}

/* ---- the estimators' guards, by hand -------------------------------------- */

/* Two bins with N_D = N_R = 2 (sums of weights 2): bin 0 has DR = 0, bin 1
 * RR = 0. Normalised: DD/4, DR/4, RR/4. Bin 0: DD = 1, DR = 0, RR = 0.5;
 * bin 1: DD = 1, DR = 0.5, RR = 0. */
static void estimator_guards(void) {
    const uint64_t dd[2] = {4, 4}, dr[2] = {0, 2}, rr[2] = {2, 0};
    const double ddw[2] = {4, 4}, drw[2] = {0, 2}, rrw[2] = {2, 0};
    const struct {
        pk_estimator est;
        double want[2];
    } cases[] = {
        /* LS: (1 - 0 + 0.5) / 0.5 = 3; RR = 0: NaN */
        {PK_ESTIMATOR_LANDY_SZALAY, {3.0, (double)NAN}},
        /* natural: 1 / 0.5 - 1 = 1; RR = 0: NaN */
        {PK_ESTIMATOR_NATURAL, {1.0, (double)NAN}},
        /* Hamilton: DR = 0: NaN; 1 * 0 / 0.25 - 1 = -1 */
        {PK_ESTIMATOR_HAMILTON, {(double)NAN, -1.0}},
        /* Davis-Peebles: DR = 0: NaN; 1 / 0.5 - 1 = 1 */
        {PK_ESTIMATOR_DAVIS_PEEBLES, {(double)NAN, 1.0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double w[2], ww[2];
        pk_estimate(cases[c].est, 2, 2, 2, dd, dr, rr, w);
        pk_estimate_weighted(cases[c].est, 2.0, 2.0, 2, ddw, drw, rrw, ww);
        /* N_D != N_R (2 and 4; weights summing to 2 and 4): RR / 16, DR / 8 */
        const uint64_t rr4[2] = {8, 0}, dr4[2] = {0, 4};
        const double rrw4[2] = {8, 0}, drw4[2] = {0, 4};
        double w4[2], ww4[2];
        pk_estimate(cases[c].est, 2, 4, 2, dd, dr4, rr4, w4);
        pk_estimate_weighted(cases[c].est, 2.0, 4.0, 2, ddw, drw4, rrw4, ww4);
        for (int k = 0; k < 2; k++) {
            double want = cases[c].want[k];
            CHECK(close_to(w[k], want, 1e-15), "%s bin %d: %.17g, want %.17g", pk_estimator_name(cases[c].est), k, w[k],
                  want);
            CHECK(close_to(ww[k], want, 1e-15), "weighted %s bin %d: %.17g, want %.17g",
                  pk_estimator_name(cases[c].est), k, ww[k], want);
            CHECK(close_to(w4[k], want, 1e-15), "%s (N_D != N_R) bin %d: %.17g, want %.17g",
                  pk_estimator_name(cases[c].est), k, w4[k], want);
            CHECK(close_to(ww4[k], want, 1e-15), "weighted %s (N_D != N_R) bin %d: %.17g, want %.17g",
                  pk_estimator_name(cases[c].est), k, ww4[k], want);
        }
    }
}

/* ---- a run against the reference ------------------------------------------ */

/* The estimator written out from normalised pair counts. */
static double estimator_formula(pk_estimator est, double dd, double dr, double rr) {
    switch (est) {
    case PK_ESTIMATOR_LANDY_SZALAY: return rr != 0 ? (dd - 2 * dr + rr) / rr : (double)NAN;
    case PK_ESTIMATOR_NATURAL: return rr != 0 ? dd / rr - 1 : (double)NAN;
    case PK_ESTIMATOR_HAMILTON: return dr != 0 ? dd * rr / (dr * dr) - 1 : (double)NAN;
    case PK_ESTIMATOR_DAVIS_PEEBLES: return dr != 0 ? dd / dr - 1 : (double)NAN;
    }
    return (double)NAN;
}

/* The reference's counts, weighted counts and separation sums of one
 * count (b NULL: a with itself). */
typedef struct ref_count {
    uint64_t *c;
    double *w, *t;
} ref_count;

static ref_count ref_of(const pk_catalog *a, const double *wa, const pk_catalog *b, const double *wb,
                        const pk_bins *bins) {
    pk_context ctx;
    pk_context_init(&ctx);
    size_t n = bins->n_bins;
    ref_count r = {calloc(n, sizeof(uint64_t)), calloc(n, sizeof(double)), calloc(n, sizeof(double))};
    CHECK_OK(pk_angcorr_count_ref_weighted(&ctx, a, wa, b, wb, bins, r.c, r.w, r.t), &ctx);
    return r;
}

static void ref_free(ref_count *r) {
    free(r->c), free(r->w), free(r->t);
}

static double total(const double *w, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += w ? w[i] : 1.0;
    return s;
}

/* One value of a CSV row read back: the next comma-separated number. */
static double next_number(const char **p) {
    char *end;
    double v = strtod(*p, &end);
    *p = *end == ',' ? end + 1 : end;
    return v;
}

/* The CSV (ECSV) of a run read back: every row's columns equal the values
 * they name (%.17g reads back exactly; the edges are %.15g). */
static void csv_columns(const char *path, int ecsv, const pk_angcorr_result *res, const pk_angcorr_extras *ex,
                        const pk_bins *bins, const char *what) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_status st =
        ecsv ? pk_angcorr_write_ecsv(&ctx, path, res, ex, bins) : pk_angcorr_write_csv_ex(&ctx, path, res, ex, bins);
    CHECK_OK(st, &ctx);
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL, "%s: %s written", what, path);
    if (!fp) return;
    char line[4096];
    size_t row = 0;
    int header_seen = 0, bad = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#') continue;
        if (!header_seen) {
            header_seen = 1;
            CHECK(strcmp(line,
                         "theta_lo_deg,theta_hi_deg,theta_mean_dd_deg,theta_mean_dr_deg,theta_mean_rr_deg,"
                         "omega,dd,dr,rr,dd_weighted,dr_weighted,rr_weighted\n") == 0,
                  "%s: header %s", what, line);
            continue;
        }
        if (row >= res->n_bins) {
            bad++;
            break;
        }
        const char *p = line;
        const size_t k = row++;
        const double deg = 180.0 / M_PI;
        double lo = next_number(&p), hi = next_number(&p);
        double m[3];
        for (int c = 0; c < 3; c++) m[c] = next_number(&p);
        double omega = next_number(&p);
        double cnt[3];
        for (int c = 0; c < 3; c++) cnt[c] = next_number(&p);
        double wsum[3];
        for (int c = 0; c < 3; c++) wsum[c] = next_number(&p);
        const double *means[3] = {ex->theta_mean_dd, ex->theta_mean_dr, ex->theta_mean_rr};
        const uint64_t *counts[3] = {res->dd, res->dr, res->rr};
        const double *ws[3] = {ex->dd_w, ex->dr_w, ex->rr_w};
        int ok = close_to(lo, bins->edges[k] * deg, 1e-14) && close_to(hi, bins->edges[k + 1] * deg, 1e-14) &&
                 close_to(omega, res->omega[k], 0);
        for (int c = 0; c < 3; c++)
            ok = ok && close_to(m[c], means[c][k] * deg, 0) && cnt[c] == (double)counts[c][k] &&
                 close_to(wsum[c], ws[c][k], 0);
        if (!ok && bad++ < 3) CHECK(0, "%s: row %zu does not hold the run's values: %s", what, k, line);
    }
    fclose(fp);
    CHECK(header_seen && row == res->n_bins && bad == 0, "%s: %zu rows of %zu, %d bad", what, row, res->n_bins, bad);
    unlink(path);
}

/* pk_angcorr_run_ex with mean separations, every estimator, weighted and
 * not: its counts, weighted counts, mean separations and omega as the
 * reference's counts and the formulas make them. */
static void run_against_reference(check_rng *rng) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins bins;
    CHECK_OK(pk_bins_log(&ctx, 0.2 * M_PI / 180, 25 * M_PI / 180, 7, &bins), &ctx);
    const double d2r = M_PI / 180;
    pk_catalog d = test_catalog(rng, 160, 10 * d2r, 40 * d2r, -10 * d2r, 15 * d2r);
    pk_catalog r = test_catalog(rng, 230, 10 * d2r, 40 * d2r, -10 * d2r, 15 * d2r);
    double *wd = malloc(d.n * sizeof(double)), *wr = malloc(r.n * sizeof(double));
    for (size_t i = 0; i < d.n; i++) wd[i] = 0.3 + 1.5 * check_uniform(rng);
    for (size_t i = 0; i < r.n; i++) wr[i] = 0.4 + 1.2 * check_uniform(rng);
    const size_t n = bins.n_bins;
    for (int weighted = 0; weighted < 2; weighted++) {
        const double *wdd = weighted ? wd : NULL, *wrr = weighted ? wr : NULL;
        ref_count rdd = ref_of(&d, wdd, NULL, NULL, &bins), rdr = ref_of(&d, wdd, &r, wrr, &bins),
                  rrr = ref_of(&r, wrr, NULL, NULL, &bins);
        const ref_count *refs[3] = {&rdd, &rdr, &rrr};
        const double sd = total(wdd, d.n), sr = total(wrr, r.n);
        for (int e = 0; e <= PK_ESTIMATOR_DAVIS_PEEBLES; e++) {
            const pk_estimator est = (pk_estimator)e;
            pk_angcorr_run_options ro = {wdd, wrr, 1, 0, PK_PRUNE_AUTO};
            pk_angcorr_result res;
            pk_angcorr_extras ex;
            pk_status st = pk_angcorr_run_ex(&ctx, NULL, &d, &r, &bins, est, &ro, &res, &ex);
            CHECK_OK(st, &ctx);
            if (st) continue;
            char what[128];
            snprintf(what, sizeof what, "%s %s", weighted ? "weighted" : "unweighted", pk_estimator_name(est));
            const uint64_t *counts[3] = {res.dd, res.dr, res.rr};
            const double *wsums[3] = {ex.dd_w, ex.dr_w, ex.rr_w};
            const double *means[3] = {ex.theta_mean_dd, ex.theta_mean_dr, ex.theta_mean_rr};
            const char *names[3] = {"DD", "DR", "RR"};
            CHECK(ex.weighted == weighted && (!weighted || (ex.dd_w && ex.dr_w && ex.rr_w)) && ex.theta_mean_dd &&
                      ex.theta_mean_dr && ex.theta_mean_rr,
                  "%s: extras missing", what);
            if (!ex.theta_mean_dd || !ex.theta_mean_dr || !ex.theta_mean_rr || (weighted && !ex.dd_w)) {
                pk_angcorr_result_free(&res), pk_angcorr_extras_free(&ex);
                continue;
            }
            int filled = 0;
            for (size_t k = 0; k < n; k++) {
                for (int c = 0; c < 3; c++) {
                    const ref_count *rc = refs[c];
                    CHECK(counts[c][k] == rc->c[k], "%s: %s bin %zu: %llu pairs, reference %llu", what, names[c], k,
                          (unsigned long long)counts[c][k], (unsigned long long)rc->c[k]);
                    if (weighted)
                        CHECK(close_to(wsums[c][k], rc->w[k], 1e-12), "%s: %s bin %zu: weighted %.17g, reference %.17g",
                              what, names[c], k, wsums[c][k], rc->w[k]);
                    double mean = rc->w[k] != 0 ? rc->t[k] / rc->w[k] : (double)NAN;
                    CHECK(close_to(means[c][k], mean, 1e-12), "%s: %s bin %zu: mean separation %.17g, reference %.17g",
                          what, names[c], k, means[c][k], mean);
                }
                filled += rdd.c[k] && rdr.c[k] && rrr.c[k];
                double want = estimator_formula(est, rdd.w[k] / (sd * sd), rdr.w[k] / (sd * sr), rrr.w[k] / (sr * sr));
                CHECK(close_to(res.omega[k], want, 1e-11), "%s: bin %zu: omega %.17g, formula %.17g", what, k,
                      res.omega[k], want);
            }
            CHECK(filled >= 4, "%s: only %d bins hold DD, DR and RR pairs", what, filled);
            if (weighted && e == 0) {
                char path[128];
                snprintf(path, sizeof path, "/tmp/pairkit_outputs_%ld.csv", (long)getpid());
                csv_columns(path, 0, &res, &ex, &bins, "CSV");
                snprintf(path, sizeof path, "/tmp/pairkit_outputs_%ld.ecsv", (long)getpid());
                csv_columns(path, 1, &res, &ex, &bins, "ECSV");
            }
            pk_angcorr_result_free(&res);
            pk_angcorr_extras_free(&ex);
        }
        for (int c = 0; c < 3; c++) ref_free((ref_count *)refs[c]);
    }
    free(wd), free(wr);
    pk_catalog_free(&d), pk_catalog_free(&r);
    pk_bins_free(&bins);
}

/* ---- RR files --------------------------------------------------------------- */

/* FNV-1a over 64-bit values, as docs/angcorr.md describes the checksum. */
static uint64_t fnv_values(const uint64_t *v, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ v[i]) * 0x100000001b3ull;
    return h;
}

static char *read_all(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *text = calloc(1, 1 << 20);
    if (text) text[fread(text, 1, (1 << 20) - 1, fp)] = '\0';
    fclose(fp);
    return text;
}

static void rr_files(check_rng *rng) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins bins;
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 2 * M_PI / 180, 4, &bins), &ctx);
    pk_catalog r = test_catalog(rng, 40, 0, 0.2, 0, 0.2), d = test_catalog(rng, 30, 0, 0.2, 0, 0.2);
    char path[128];
    snprintf(path, sizeof path, "/tmp/pairkit_outputs_rr_%ld.txt", (long)getpid());

    /* cells counted with random weights wr, read for a run with other
     * random weights: refused */
    double *wr = malloc(r.n * sizeof(double)), *wr2 = malloc(r.n * sizeof(double));
    for (size_t i = 0; i < r.n; i++) wr[i] = wr2[i] = 0.5 + check_uniform(rng);
    wr2[7] *= 2;
    pk_angcorr_run_options ro = {NULL, wr, 0, 0, PK_PRUNE_AUTO}, ro2 = {NULL, wr2, 0, 0, PK_PRUNE_AUTO};
    pk_angcorr_result res;
    pk_angcorr_extras ex;
    pk_angcorr_rr_cells kept, back;
    pk_status st =
        pk_angcorr_run_ex_rr(&ctx, NULL, &d, &r, &bins, PK_ESTIMATOR_LANDY_SZALAY, &ro, NULL, &kept, &res, &ex);
    CHECK_OK(st, &ctx);
    if (st == PK_OK) {
        CHECK_OK(pk_angcorr_write_rr_cells(&ctx, path, &r, &ro, &bins, &kept), &ctx);
        st = pk_angcorr_read_rr_cells(&ctx, path, &r, &ro, &bins, &back);
        CHECK_OK(st, &ctx);
        if (st == PK_OK) pk_angcorr_rr_cells_free(&back);
        st = pk_angcorr_read_rr_cells(&ctx, path, &r, &ro2, &bins, &back);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, ":3: the RR in the file was counted with other random weights"),
              "RR cells of other random weights: status %d: %s", (int)st, ctx.message);
        if (st == PK_OK) pk_angcorr_rr_cells_free(&back);
        pk_angcorr_rr_cells_free(&kept);
        pk_angcorr_result_free(&res);
        pk_angcorr_extras_free(&ex);
    }
    free(wr), free(wr2);

    /* a plain RR file whose first count is n^2 + 1, more pairs than the
     * catalog has, with its checksum made again to match: refused */
    uint64_t rr[4];
    CHECK_OK(pk_angcorr_count(&ctx, NULL, &r, NULL, &bins, rr, NULL), &ctx);
    CHECK_OK(pk_angcorr_write_rr(&ctx, path, &r, &bins, rr), &ctx);
    uint64_t back_rr[4];
    CHECK_OK(pk_angcorr_read_rr(&ctx, path, &r, &bins, back_rr), &ctx);
    char *text = read_all(path);
    /* the header's first three lines, then "counts SUM" and the bin lines */
    char *counts_line = text ? strstr(text, "\ncounts ") : NULL;
    char *first_bin = counts_line ? strchr(counts_line + 1, '\n') : NULL;
    CHECK(first_bin != NULL, "plain RR file: %s", text ? text : "(unread)");
    if (first_bin) {
        uint64_t edited[4];
        memcpy(edited, rr, sizeof rr);
        edited[0] = (uint64_t)r.n * r.n + 1;
        FILE *fp = fopen(path, "w");
        fprintf(fp, "%.*s\ncounts %016llx\n", (int)(counts_line - text), text,
                (unsigned long long)fnv_values(edited, 4));
        for (size_t k = 0; k < 4; k++)
            fprintf(fp, "%.17g %.17g %llu\n", bins.edges[k], bins.edges[k + 1], (unsigned long long)edited[k]);
        fclose(fp);
        st = pk_angcorr_read_rr(&ctx, path, &r, &bins, back_rr);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, ":5: the counts add up to more than the 40^2 pairs there are"),
              "RR counts above n^2 with a matching checksum: status %d: %s", (int)st, ctx.message);
        /* the same file with the true counts and their checksum reads */
        fp = fopen(path, "w");
        fprintf(fp, "%.*s\ncounts %016llx\n", (int)(counts_line - text), text, (unsigned long long)fnv_values(rr, 4));
        for (size_t k = 0; k < 4; k++)
            fprintf(fp, "%.17g %.17g %llu\n", bins.edges[k], bins.edges[k + 1], (unsigned long long)rr[k]);
        fclose(fp);
        CHECK_OK(pk_angcorr_read_rr(&ctx, path, &r, &bins, back_rr), &ctx);
        CHECK(memcmp(back_rr, rr, sizeof rr) == 0, "plain RR file rewritten: counts differ");
    }
    free(text);
    unlink(path);
    pk_catalog_free(&r), pk_catalog_free(&d);
    pk_bins_free(&bins);
}

/* ---- weights the estimators cannot divide by -------------------------------- */

/* Data weights summing to exactly 0 (1, -1, 0.5, -0.5): the estimators
 * divide by the total, so the run is refused, as a negative total is. */
static void zero_total_weights(check_rng *rng) {
    pk_context ctx;
    pk_context_init(&ctx);
    pk_bins bins;
    CHECK_OK(pk_bins_linear(&ctx, 0.0, 2 * M_PI / 180, 4, &bins), &ctx);
    pk_catalog d = test_catalog(rng, 4, 0, 0.1, 0, 0.1), r = test_catalog(rng, 6, 0, 0.1, 0, 0.1);
    double wd[4] = {1.0, -1.0, 0.5, -0.5};
    for (int neg = 0; neg < 2; neg++) {
        if (neg) wd[0] = 0.25; /* sum -0.75 */
        pk_angcorr_run_options ro = {wd, NULL, 0, 0, PK_PRUNE_AUTO};
        pk_angcorr_result res;
        pk_angcorr_extras ex;
        pk_status st = pk_angcorr_run_ex(&ctx, NULL, &d, &r, &bins, PK_ESTIMATOR_LANDY_SZALAY, &ro, &res, &ex);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, neg ? "data weights sum to -0.75" : "data weights sum to 0"),
              "data weights summing to %s: status %d: %s", neg ? "-0.75" : "0", (int)st, ctx.message);
        if (st == PK_OK) pk_angcorr_result_free(&res), pk_angcorr_extras_free(&ex);
    }
    pk_catalog_free(&d), pk_catalog_free(&r);
    pk_bins_free(&bins);
}

int main(void) {
    check_rng rng = check_rng_make(424242);
    estimator_guards();
    run_against_reference(&rng);
    rr_files(&rng);
    zero_total_weights(&rng);
    return check_finish("test_angcorr_outputs");
}
