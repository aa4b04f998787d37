/* angcorr.h - angular two-point correlation of sky catalogs.
 *
 * Pair counts DD, DR, RR in bins of angular separation and the estimators
 * built on them. Counting is exact: every pair lands in the bin the float64
 * reference puts it in (see pk_bins_index and docs/angcorr.md), whatever
 * backend or kernel computes it.
 *
 * Angles in this API are radians unless a name says otherwise.
 */
#ifndef PAIRKIT_ANGCORR_H
#define PAIRKIT_ANGCORR_H

#include "pairkit/pairkit.h"

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default) /* the public API: what libpairkit.so exports */
#endif

/* ---- catalogs ---------------------------------------------------------- */

typedef enum pk_units { PK_UNITS_ARCMIN = 0, PK_UNITS_DEG, PK_UNITS_RAD, PK_UNITS_ARCSEC } pk_units;

/* A catalog of sky positions. ra and dec in radians, dec within
 * [-pi/2, pi/2]; every value finite. Owned by the catalog: free with
 * pk_catalog_free. */
typedef struct pk_catalog {
    size_t n;
    double *ra;
    double *dec;
} pk_catalog;

/* Angle in the given units to radians, the one conversion all of pairkit
 * uses: arcmin * (pi / 10800), deg * (pi / 180), arcsec * (pi / 648000),
 * rad unchanged; NaN for units outside the enum. */
double pk_units_to_rad(double value, pk_units units);
/* "arcmin", "deg", "rad" or "arcsec" (exactly) into *out; PK_ERR_INVALID
 * for any other name. */
pk_status pk_units_parse(const char *name, pk_units *out);

/* Read a catalog file. The native text format: the object count N, then N
 * rows "ra dec" separated by spaces or tabs, LF or CRLF line ends. Errors
 * (missing file, count mismatch, text in a number, NaN or inf, declination
 * outside [-90, 90] degrees, empty file) name the file and line. */
pk_status pk_catalog_read(pk_context *ctx, const char *path, pk_units units, pk_catalog *out);

/* Copy n positions given in `units` into a new catalog, with the same
 * checks as the reader ("field" names the source in messages). Units
 * outside the enum are PK_ERR_INVALID here, in pk_catalog_read and in
 * pk_catalog_read_spec (as is a format outside its enum there). */
pk_status pk_catalog_from_arrays(pk_context *ctx, size_t n, const double *ra, const double *dec, pk_units units,
                                 const char *field, pk_catalog *out);

void pk_catalog_free(pk_catalog *catalog);

/* ---- bins ---------------------------------------------------------------- */

typedef enum pk_bins_kind {
    PK_BINS_LINEAR = 0, /* k = floor((theta - theta_min) / width) */
    PK_BINS_EDGES       /* edges[k] <= theta < edges[k + 1] (log bins are edges) */
} pk_bins_kind;

/* Separation bins. All angles in radians. A pair whose separation falls
 * outside [theta_min, theta_max) is not counted. */
typedef struct pk_bins {
    pk_bins_kind kind;
    size_t n_bins;
    double theta_min;
    double width;  /* PK_BINS_LINEAR only */
    double *edges; /* n_bins + 1 increasing edges; for LINEAR, theta_min + k * width */
} pk_bins;

/* The constructors: 1 to 10,000,000 bins into out (required), which a
 * failure leaves empty. The default of the course format: 1440 bins of
 * 0.25 degree from 0. */
pk_status pk_bins_default(pk_context *ctx, pk_bins *out);
/* edges[k] = theta_min + k * width (k as a double, one multiply and one
 * add, rounded each). */
pk_status pk_bins_linear(pk_context *ctx, double theta_min, double width, size_t n_bins, pk_bins *out);
/* n_bins logarithmic bins over [theta_min, theta_max), 0 < theta_min <
 * theta_max. The edges, in double and the C library's log and exp, are
 *
 *     step = log(theta_max / theta_min) / n_bins
 *     edges[k] = theta_min * exp(k * step)    (0 < k < n_bins)
 *
 * each operation rounded in that order (the quotient, the log, step, then
 * k * step, exp, the product), with edges[0] = theta_min and
 * edges[n_bins] = theta_max exactly. theta_min * exp(k * log(ratio) /
 * n_bins) rounds differently and can differ in the last bit. */
pk_status pk_bins_log(pk_context *ctx, double theta_min, double theta_max, size_t n_bins, pk_bins *out);
/* Bins from n_edges >= 2 strictly increasing finite edges >= 0 (edges
 * required), copied. */
pk_status pk_bins_from_edges(pk_context *ctx, const double *edges, size_t n_edges, pk_bins *out);
void pk_bins_free(pk_bins *bins);

/* Check bins built by hand, as every function taking bins does first: not
 * NULL, a known kind, 1 to 10,000,000 bins with edges, every edge finite,
 * >= 0 and above the one before, and for PK_BINS_LINEAR a finite
 * theta_min >= 0 and width > 0. An all-zero pk_bins is PK_ERR_INVALID
 * "bins: no bins ...", naming the constructors. */
pk_status pk_bins_check(pk_context *ctx, const pk_bins *bins);

/* The reference binning rule for a separation theta (radians): the bin
 * index in [0, n_bins), -1 below theta_min, n_bins at or above theta_max
 * and for NaN. bins NULL or without bins (n_bins 0, or edges NULL for
 * PK_BINS_EDGES): -1, the separation in no bin. */
int64_t pk_bins_index(const pk_bins *bins, double theta);

/* ---- pair counting ------------------------------------------------------- */

/* Kernels, from the specification to the fastest. PK_ANGCORR_KERNEL_BEST
 * picks the fastest one the backend and CPU support. */
typedef enum pk_angcorr_kernel {
    PK_ANGCORR_KERNEL_BEST = 0,
    PK_ANGCORR_KERNEL_REF,              /* float64 reference: acos per pair, single thread */
    PK_ANGCORR_KERNEL_CPU_SCALAR,       /* float32 chord-squared table + float64 settling, portable C, OpenMP */
    PK_ANGCORR_KERNEL_CPU_AVX2_TABLE,   /* the same with AVX2 + FMA gathers */
    PK_ANGCORR_KERNEL_CPU_AVX512_TABLE, /* the same with AVX-512 gathers */
    PK_ANGCORR_KERNEL_CPU_AVX2,         /* AVX2: arithmetic bin for linear bins, table otherwise */
    PK_ANGCORR_KERNEL_CPU_AVX512,       /* AVX-512: arithmetic bin for linear bins, table otherwise */
    /* The usual fast loop, kept as the speed anchor: float32 dot product and a
     * polynomial acos, no settling. INEXACT: it misbins pairs near edges and
     * is never chosen by PK_ANGCORR_KERNEL_BEST. Linear bins only. */
    PK_ANGCORR_KERNEL_CPU_APPROX,
    PK_ANGCORR_KERNEL_COUNT_ /* CUDA kernels are numbered from 100 */
} pk_angcorr_kernel;

/* Weights: finite, nonzero ones of magnitude at least PK_WEIGHT_MIN, and
 * a catalog's sum of |w| at most PK_WEIGHT_MAX (the sum's rounding within
 * a billionth of it let through), so that every pair product and sum of
 * products is a normal double. */
#define PK_WEIGHT_MIN 1e-150
#define PK_WEIGHT_MAX 1e150

typedef struct pk_angcorr_options {
    pk_backend backend; /* PK_BACKEND_AUTO by default */
    int kernel;         /* a pk_angcorr_kernel or a CUDA kernel id; 0 = best */
} pk_angcorr_options;

/* Work split for distributed runs (pk_angcorr_run_part): part `part` of
 * n_parts counts the pairs of rows [*begin, *end) of the first catalog, so
 * that the counts of parts 0..n_parts-1 add up exactly to the whole (begin
 * or end NULL: nothing written). Parts
 * have equal pair work: an autocorrelation's rows are triangle rows (row i
 * owns (i, j) and (j, i) for j > i, and (i, i)). A part outside
 * 0 .. n_parts - 1 gets no rows. */
void pk_angcorr_part_rows(size_t n, int autocorr, int part, int n_parts, size_t *begin, size_t *end);

typedef struct pk_pair_stats {
    uint64_t pairs_total;    /* ordered pairs the counts stand for */
    uint64_t pairs_in_range; /* of those, inside [theta_min, theta_max) */
    uint64_t pairs_visited;  /* pair separations computed (j > i once for autos) */
    uint64_t pairs_fp64;     /* of those, settled in float64 near a bin edge */
    double seconds;          /* wall time of the counting */
    double kernel_ms;        /* device time of the kernels (CUDA only, else 0) */
    int kernel;              /* the kernel that ran */
    int blocks_per_sm;       /* CUDA: resident blocks a multiprocessor held (else 0) */
} pk_pair_stats;

/* The kernel's name; NULL for a number that is no kernel. */
const char *pk_angcorr_kernel_name(int kernel);
/* 1 when the kernel's counts equal the reference's by construction; the
 * anchors that reproduce the usual approximate kernels answer 0 (their
 * names contain "approx"). */
int pk_angcorr_kernel_exact(int kernel);
/* Look a kernel up by name ("ref", "scalar", "avx2", ...); -1 if unknown
 * or NULL. */
int pk_angcorr_kernel_from_name(const char *name);
/* 1 if the kernel can run here (built in, CPU supports it, device present). */
int pk_angcorr_kernel_available(int kernel);

/* Count the pairs between catalogs a and b into counts[n_bins] (zeroed
 * first). With b == NULL, the auto-pairs of a: every ordered pair (i, j),
 * self-pairs included, so an unbinned count would be n_a^2. Otherwise every
 * (i, j) with i in a and j in b. Pairs outside the bin range are not
 * counted. Each run checks that the in-range and out-of-range counts add up
 * to the number of pairs and fails with PK_ERR_INTERNAL otherwise.
 * a, bins (pk_bins_check) and counts are required, stats may be NULL; a
 * catalog's ra and dec must be set when it has objects; opts NULL: the
 * defaults, and an options backend outside pk_backend is PK_ERR_INVALID.
 * Reentrant; uses ctx->n_threads CPU threads. */
pk_status pk_angcorr_count(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *a, const pk_catalog *b,
                           const pk_bins *bins, uint64_t *counts, pk_pair_stats *stats);

/* ---- estimators ---------------------------------------------------------- */

typedef enum pk_estimator {
    PK_ESTIMATOR_LANDY_SZALAY = 0, /* (DD - 2 DR + RR) / RR */
    PK_ESTIMATOR_NATURAL,          /* DD / RR - 1 */
    PK_ESTIMATOR_HAMILTON,         /* DD RR / DR^2 - 1 */
    PK_ESTIMATOR_DAVIS_PEEBLES     /* DD / DR - 1 */
} pk_estimator;

pk_status pk_estimator_parse(const char *name, pk_estimator *out);
/* "landy-szalay", ...; "unknown" for a value outside the enum. */
const char *pk_estimator_name(pk_estimator estimator);

/* w(theta) per bin from counts normalised by their totals (n_d^2, n_d n_r,
 * n_r^2). With n_d == n_r the Landy-Szalay value is computed from the raw
 * counts, as the course format always did. Bins whose denominator is 0 get
 * NaN, and so does every bin for an estimator outside the enum or when dd,
 * dr or rr is NULL; omega NULL: nothing written. */
void pk_estimate(pk_estimator estimator, uint64_t n_data, uint64_t n_random, size_t n_bins, const uint64_t *dd,
                 const uint64_t *dr, const uint64_t *rr, double *omega);

/* ---- the whole correlation --------------------------------------------- */

typedef struct pk_angcorr_result {
    size_t n_bins;
    uint64_t n_data, n_random;
    uint64_t *dd, *dr, *rr;
    double *omega;
    pk_estimator estimator;
    pk_pair_stats stats_dd, stats_dr, stats_rr;
} pk_angcorr_result;

/* DD, DR and RR of data and random, then the estimator. Progress is
 * reported over the three counts together. data, random, bins and out are
 * required; an estimator outside pk_estimator is PK_ERR_INVALID naming
 * it. Free with pk_angcorr_result_free. */
pk_status pk_angcorr_run(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                         const pk_catalog *random, const pk_bins *bins, pk_estimator estimator, pk_angcorr_result *out);
void pk_angcorr_result_free(pk_angcorr_result *result);

/* Part `part` of n_parts of pk_angcorr_run: the counts (and stats) of that
 * part only; omega is computed from them and means nothing until the parts'
 * counts are summed and pk_estimate is applied. pk_angcorr_run is part 0
 * of 1. */
pk_status pk_angcorr_run_part(pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                              const pk_catalog *data, const pk_catalog *random, const pk_bins *bins,
                              pk_estimator estimator, pk_angcorr_result *out);

/* RR counted once and used again: runs of other data catalogs against the
 * same random catalog and bins need not count RR again (it is the largest
 * count when the random catalog is the larger). pk_angcorr_write_rr keeps a
 * result's RR in a file with the random catalog's size, a hash of its
 * coordinates and every bin edge (docs/angcorr.md); pk_angcorr_read_rr
 * reads rr[bins->n_bins] back and refuses a file of another random catalog
 * or other bins, naming the file, the line and what differs. Both files are
 * written atomically. */
pk_status pk_angcorr_write_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                              const uint64_t *rr);
pk_status pk_angcorr_read_rr(pk_context *ctx, const char *path, const pk_catalog *random, const pk_bins *bins,
                             uint64_t *rr);
/* pk_angcorr_run_part with RR given (rr[n_bins], NULL: counted as usual):
 * DD and DR are counted, RR is not; part 0's result holds rr and the other
 * parts' RR are zero, so that the parts' sums are the whole; stats_rr stays
 * zero. */
pk_status pk_angcorr_run_part_rr(pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                                 const pk_catalog *data, const pk_catalog *random, const pk_bins *bins,
                                 pk_estimator estimator, const uint64_t *rr, pk_angcorr_result *out);

/* Write the course format (omega.out): a header line and one row per bin
 * with RR > 0. Written atomically: on failure no file is left behind and an
 * existing file is untouched. */
pk_status pk_angcorr_write_omega(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                 const pk_bins *bins);
/* CSV with a header: bin edges in degrees, omega, DD, DR, RR. Atomic. */
pk_status pk_angcorr_write_csv(pk_context *ctx, const char *path, const pk_angcorr_result *result, const pk_bins *bins);

/* ---- catalogs in other formats, weights ---------------------------------- */

typedef enum pk_catalog_format {
    PK_FORMAT_AUTO = 0, /* by extension: .csv -> CSV, .fits/.fit/.fts (+.gz) -> FITS, else native */
    PK_FORMAT_NATIVE,   /* the object count, then rows "ra dec" */
    PK_FORMAT_CSV,      /* a header line naming the columns, then comma-separated rows */
    PK_FORMAT_FITS      /* the first table HDU (binary or ASCII) with the named columns (cfitsio) */
} pk_catalog_format;

pk_status pk_catalog_format_parse(const char *name, pk_catalog_format *out);
/* The format PK_FORMAT_AUTO reads path as, from its name: CSV for .csv and
 * .csv.gz, FITS for .fits, .fit, .fts (also gzip-compressed), native
 * otherwise; suffixes matched without regard to case. */
pk_catalog_format pk_catalog_format_of(const char *path);

/* How to read a catalog. Column names are matched without regard to case;
 * NULL picks "ra" and "dec" (CSV, FITS). weight_column NULL: no weights
 * (the native format has none).
 *
 * units: those of the RA and Dec values. In FITS, a column whose TUNITn
 * names units of angle (without regard to case: deg, degree, degrees, rad,
 * radian, radians, arcmin, arcminute, arcminutes, arcsec, arcsecond,
 * arcseconds) is read in those, RA and Dec each by its own; units applies
 * to a column without TUNITn or with an empty one. A TUNITn on the RA or
 * Dec column that names anything else is refused, and with units_given,
 * so is one that names other units than units (the caller said what the
 * file holds, and the file says otherwise). */
typedef struct pk_catalog_spec {
    pk_catalog_format format;
    pk_units units;
    const char *ra_column, *dec_column, *weight_column;
    int units_given; /* 1: units was chosen for this file, not a default */
} pk_catalog_spec;

/* Read a catalog in any format. With a weight column, *weights receives a
 * malloc'd array of n finite weights (free with free()); otherwise it is
 * set to NULL (weights may be NULL when no weight column is asked for).
 * Errors name the file and the line (CSV), row (FITS) and column: a column
 * that does not exist, text in a number, a NaN weight, dec out of range. */
pk_status pk_catalog_read_spec(pk_context *ctx, const char *path, const pk_catalog_spec *spec, pk_catalog *out,
                               double **weights);

/* Bins from a text file of at least 2 strictly increasing edges in
 * degrees, each in [0, 180], separated by blanks, commas or line ends; '#'
 * starts a comment; decimal numbers only (hexadecimal is refused). Errors
 * name the file and line. Free with pk_bins_free. */
pk_status pk_bins_read_edges(pk_context *ctx, const char *path, pk_bins *out);

/* ---- counts with weights, mean separation, pruning ----------------------- */

typedef enum pk_prune {
    PK_PRUNE_AUTO = 0, /* skip far cell pairs when theta_max is small enough to pay */
    PK_PRUNE_OFF,
    PK_PRUNE_ON
} pk_prune;

/* What a count computes beyond the integer pair counts. */
typedef struct pk_angcorr_features {
    const double *weights_a, *weights_b; /* per object; NULL: every weight 1 */
    int mean_theta;                      /* 1: also sum the separation per bin (an acos per pair in range) */
    pk_prune prune;
} pk_angcorr_features;

/* Like pk_angcorr_count, with weights and per-bin sums. weighted[n_bins]
 * (may be NULL, as may counts) receives the sum of w_i w_j over the pairs of each bin (the
 * counts themselves when unweighted); theta_sum[n_bins] (may be NULL; needs
 * mean_theta) the sum of w_i w_j theta_ij in radians. Bins are those of the
 * reference, exactly; the sums agree with the reference's to float64
 * rounding (order of summation: docs/angcorr.md). a and bins required;
 * features->prune outside pk_prune is PK_ERR_INVALID, and so is an inexact
 * kernel in opts (the approximate baselines of the benchmark). */
pk_status pk_angcorr_count_ex(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *a, const pk_catalog *b,
                              const pk_bins *bins, const pk_angcorr_features *features, uint64_t *counts,
                              double *weighted, double *theta_sum, pk_pair_stats *stats);

/* The float64 reference of the weighted count: every ordered pair in row
 * order, then column order, w_i * w_j added to its bin's running sum (and
 * w_i * w_j * acos(dot) to theta_sum when not NULL). Single thread. */
pk_status pk_angcorr_count_ref_weighted(pk_context *ctx, const pk_catalog *a, const double *wa, const pk_catalog *b,
                                        const double *wb, const pk_bins *bins, uint64_t *counts, double *weighted,
                                        double *theta_sum);

/* w(theta) from weighted counts, normalised by the weight totals
 * (sum_w_data^2, sum_w_data sum_w_random, sum_w_random^2). NaN where the
 * denominator is 0, and as in pk_estimate for an unknown estimator or NULL
 * dd, dr or rr (omega NULL: nothing written). */
void pk_estimate_weighted(pk_estimator estimator, double sum_w_data, double sum_w_random, size_t n_bins,
                          const double *dd, const double *dr, const double *rr, double *omega);

/* ---- the whole correlation with weights and jackknife errors ------------- */

typedef struct pk_angcorr_run_options {
    const double *weights_data, *weights_random; /* NULL: unweighted */
    int mean_theta;                              /* mean separation per bin of DD, DR, RR */
    int jackknife;                               /* K sky patches (>= 2), 0: no errors */
    pk_prune prune;
} pk_angcorr_run_options;

typedef struct pk_angcorr_extras {
    size_t n_bins;
    int weighted;
    double sum_w_data, sum_w_random;
    double *dd_w, *dr_w, *rr_w;                            /* weighted counts (NULL unless weighted) */
    double *theta_mean_dd, *theta_mean_dr, *theta_mean_rr; /* radians, NaN for empty bins (NULL unless asked) */
    size_t n_patches;                                      /* jackknife patches, 0: none */
    double *omega_jk;                                      /* [n_patches][n_bins] w(theta) with patch k left out */
    double *omega_cov; /* [n_bins][n_bins] (K - 1)/K sum_k (w_k - mean)(w_k - mean) */
    double *omega_err; /* sqrt of the diagonal */
} pk_angcorr_extras;

/* pk_angcorr_run with weights, mean separations and jackknife errors.
 * Jackknife patches are made from the random catalog: round(sqrt(K))
 * declination stripes of equal random counts, each cut in RA into cells
 * of equal random counts, K / stripes cells a stripe and one more in the
 * first K % stripes stripes (K = 7: 3, 2 and 2 cells, so a cell of the
 * first stripe holds 2/3 of the randoms of one of the others); data
 * objects take the patch of their position. Leaving
 * patch k out removes its objects from both catalogs; the normalisation
 * uses the remaining totals. With weights, result->omega is the weighted
 * estimate. data, random, bins, out and extras are required; run NULL: the
 * defaults; run->prune outside pk_prune is PK_ERR_INVALID, as is an
 * inexact kernel in opts; run->jackknife needs 2 to random->n patches. Free
 * extras with pk_angcorr_extras_free. */
pk_status pk_angcorr_run_ex(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                            const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                            const pk_angcorr_run_options *run, pk_angcorr_result *out, pk_angcorr_extras *extras);
void pk_angcorr_extras_free(pk_angcorr_extras *extras);

/* RR of pk_angcorr_run_ex, patch pair by patch pair, as a later run of
 * another data catalog against the same random catalog, random weights,
 * bins, patches and mean-separation setting can take it instead of
 * counting it again. Cell (p, q) of K patches is at ((p K) + q) n_bins;
 * (q, p) holds the same counts. */
typedef struct pk_angcorr_rr_cells {
    int n_patches; /* K (1 without jackknife) */
    size_t n_bins;
    uint64_t *counts;  /* [K][K][n_bins] */
    double *weighted;  /* [K][K][n_bins]: sums of w_i w_j (the counts when the randoms have no weights) */
    double *theta_sum; /* [K][K][n_bins]: sums of w_i w_j theta_ij in radians; NULL unless mean_theta */
} pk_angcorr_rr_cells;

/* pk_angcorr_run_ex with RR given or kept: rr_in (NULL: counted) must be
 * cells of this run's patches, bins and mean-separation setting (they are
 * used as given: pk_angcorr_read_rr_cells checks them against the random
 * catalog); stats_rr's pairs and times then stay zero. rr_out (NULL: not kept) receives the
 * run's RR cells, counted or given; free with pk_angcorr_rr_cells_free. */
pk_status pk_angcorr_run_ex_rr(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                               const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                               const pk_angcorr_run_options *run, const pk_angcorr_rr_cells *rr_in,
                               pk_angcorr_rr_cells *rr_out, pk_angcorr_result *out, pk_angcorr_extras *extras);
void pk_angcorr_rr_cells_free(pk_angcorr_rr_cells *cells);

/* Called once by every part of a distributed run that passed the input
 * checks (which refuse alike on every part given the same inputs, before
 * any call), whether its own counts succeeded (ok) or not (then counts and
 * sums may be NULL): returns 0 when every part succeeded, after summing
 * n_counts counts and n_sums doubles over the parts in place (at least
 * onto part 0; n_sums is 0 for a run without weights or mean
 * separations); non-zero otherwise. */
typedef int (*pk_angcorr_sum_fn)(void *user, int ok, uint64_t *counts, size_t n_counts, double *sums, size_t n_sums);

/* Part `part` of n_parts of pk_angcorr_run_ex_rr (under mpirun, rank
 * `part`): the patch-pair counts are shared out by their pairs, the same
 * way on every part, each part makes its own, and `sum` adds every part's
 * cells together (each cell is made by one part and zero in the others, so
 * the sums are exact: with patches part 0's results are bit for bit
 * those of one process). Every part must call it with the same inputs; the results are
 * complete where `sum` leaves the totals (part 0 for a reduction onto it).
 * stats: pair counts summed, seconds this part's own. Without jackknife
 * patches the catalogs are cut into blocks of objects (2 to 64, by
 * n_parts) whose pairs are shared the same way: the counts are exact, the
 * weighted and separation sums agree with one part's to rounding. n_parts
 * = 1: sum unused. */
pk_status pk_angcorr_run_ex_part(pk_context *ctx, const pk_angcorr_options *opts, int part, int n_parts,
                                 pk_angcorr_sum_fn sum, void *sum_user, const pk_catalog *data,
                                 const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                                 const pk_angcorr_run_options *run, const pk_angcorr_rr_cells *rr_in,
                                 pk_angcorr_rr_cells *rr_out, pk_angcorr_result *out, pk_angcorr_extras *extras);

/* The RR cells in a text file (docs/angcorr.md, "pairkit-rr 2"): keyed by
 * the random catalog's coordinates and weights (run->weights_random), the
 * patches made from it, the bins and run->mean_theta, with a checksum over
 * the numbers. Where RR is the plain counts (no random weights, patches or
 * mean_theta) the plain format of pk_angcorr_write_rr is written and read
 * instead. Reading refuses a file of another random catalog, other weights,
 * patches, bins or setting, a plain file where cells are needed (and the
 * reverse), and a changed or cut file, naming the file, line and what
 * differs. run NULL: the defaults. Both atomic / all-or-nothing. */
pk_status pk_angcorr_write_rr_cells(pk_context *ctx, const char *path, const pk_catalog *random,
                                    const pk_angcorr_run_options *run, const pk_bins *bins,
                                    const pk_angcorr_rr_cells *cells);
pk_status pk_angcorr_read_rr_cells(pk_context *ctx, const char *path, const pk_catalog *random,
                                   const pk_angcorr_run_options *run, const pk_bins *bins, pk_angcorr_rr_cells *out);

/* The jackknife patch (0..k-1) of every object of `objects`, patches made
 * from `random` as pk_angcorr_run_ex does: k from 2 to random->n (else
 * PK_ERR_INVALID). patch[objects->n] is the caller's, written whole. */
pk_status pk_angcorr_patches(pk_context *ctx, const pk_catalog *random, int k, const pk_catalog *objects,
                             int32_t *patch);

/* CSV with bin edges, mean separations (when computed), omega, its
 * jackknife error (when computed), counts and weighted counts. Atomic. */
pk_status pk_angcorr_write_csv_ex(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                  const pk_angcorr_extras *extras, const pk_bins *bins);
/* The same table as ECSV 1.0, laid out as astropy's ECSV writer does:
 * the same lines after a YAML header (comment lines) of each column's
 * unit, type and meaning and the run's estimator, N_D and N_R. extras may
 * be NULL. Atomic. */
pk_status pk_angcorr_write_ecsv(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                const pk_angcorr_extras *extras, const pk_bins *bins);
/* The jackknife covariance of w(theta) as a CSV matrix: a header
 * theta_lo_deg,theta_hi_deg,bin_0,...,bin_{n-1}, then one row per bin:
 * its two edges in degrees and its n covariances. Atomic. */
pk_status pk_angcorr_write_covariance(pk_context *ctx, const char *path, const pk_angcorr_extras *extras,
                                      const pk_bins *bins);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
