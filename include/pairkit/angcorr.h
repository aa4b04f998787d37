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

/* ---- catalogs ---------------------------------------------------------- */

typedef enum pk_units { PK_UNITS_ARCMIN = 0, PK_UNITS_DEG, PK_UNITS_RAD } pk_units;

/* A catalog of sky positions. ra and dec in radians, dec within
 * [-pi/2, pi/2]; every value finite. Owned by the catalog: free with
 * pk_catalog_free. */
typedef struct pk_catalog {
    size_t n;
    double *ra;
    double *dec;
} pk_catalog;

/* Angle in the given units to radians, the one conversion all of pairkit
 * uses: arcmin * (pi / 10800), deg * (pi / 180), rad unchanged. */
double pk_units_to_rad(double value, pk_units units);
pk_status pk_units_parse(const char *name, pk_units *out);

/* Read a catalog file. The native text format: the object count N, then N
 * rows "ra dec" separated by spaces or tabs, LF or CRLF line ends. Errors
 * (missing file, count mismatch, text in a number, NaN or inf, declination
 * outside [-90, 90] degrees, empty file) name the file and line. */
pk_status pk_catalog_read(pk_context *ctx, const char *path, pk_units units, pk_catalog *out);

/* Copy n positions given in `units` into a new catalog, with the same
 * checks as the reader ("field" names the source in messages). */
pk_status pk_catalog_from_arrays(pk_context *ctx, size_t n, const double *ra, const double *dec,
                                 pk_units units, const char *field, pk_catalog *out);

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

/* The default of the course format: 1440 bins of 0.25 degree from 0. */
pk_status pk_bins_default(pk_context *ctx, pk_bins *out);
pk_status pk_bins_linear(pk_context *ctx, double theta_min, double width, size_t n_bins, pk_bins *out);
/* n_bins logarithmic bins over [theta_min, theta_max), 0 < theta_min < theta_max. */
pk_status pk_bins_log(pk_context *ctx, double theta_min, double theta_max, size_t n_bins, pk_bins *out);
/* Bins from n_edges >= 2 strictly increasing finite edges >= 0. */
pk_status pk_bins_from_edges(pk_context *ctx, const double *edges, size_t n_edges, pk_bins *out);
void pk_bins_free(pk_bins *bins);

/* The reference binning rule for a separation theta (radians): the bin
 * index in [0, n_bins), -1 below theta_min, n_bins at or above theta_max. */
int64_t pk_bins_index(const pk_bins *bins, double theta);

/* ---- pair counting ------------------------------------------------------- */

/* Kernels, from the specification to the fastest. PK_ANGCORR_KERNEL_BEST
 * picks the fastest one the backend and CPU support. */
typedef enum pk_angcorr_kernel {
    PK_ANGCORR_KERNEL_BEST = 0,
    PK_ANGCORR_KERNEL_REF,        /* float64 reference: acos per pair, single thread */
    PK_ANGCORR_KERNEL_CPU_SCALAR, /* float32 chord-squared table + float64 settling, portable C, OpenMP */
    PK_ANGCORR_KERNEL_CPU_AVX2_TABLE,   /* the same with AVX2 + FMA gathers */
    PK_ANGCORR_KERNEL_CPU_AVX512_TABLE, /* the same with AVX-512 gathers */
    PK_ANGCORR_KERNEL_CPU_AVX2,   /* AVX2: arithmetic bin for linear bins, table otherwise */
    PK_ANGCORR_KERNEL_CPU_AVX512, /* AVX-512: arithmetic bin for linear bins, table otherwise */
    /* The usual fast loop, kept as the speed anchor: float32 dot product and a
     * polynomial acos, no settling. INEXACT: it misbins pairs near edges and
     * is never chosen by PK_ANGCORR_KERNEL_BEST. Linear bins only. */
    PK_ANGCORR_KERNEL_CPU_APPROX,
    PK_ANGCORR_KERNEL_COUNT_ /* CUDA kernels are numbered from 100 */
} pk_angcorr_kernel;

typedef struct pk_angcorr_options {
    pk_backend backend; /* PK_BACKEND_AUTO by default */
    int kernel;         /* a pk_angcorr_kernel or a CUDA kernel id; 0 = best */
} pk_angcorr_options;

typedef struct pk_pair_stats {
    uint64_t pairs_total;    /* ordered pairs the counts stand for */
    uint64_t pairs_in_range; /* of those, inside [theta_min, theta_max) */
    uint64_t pairs_visited;  /* pair separations computed (j > i once for autos) */
    uint64_t pairs_fp64;     /* of those, settled in float64 near a bin edge */
    double seconds;          /* wall time of the counting */
    double kernel_ms;        /* device time of the kernels (CUDA only, else 0) */
    int kernel;              /* the kernel that ran */
} pk_pair_stats;

const char *pk_angcorr_kernel_name(int kernel);
/* 1 when the kernel's counts equal the reference's by construction; the
 * anchors that reproduce the usual approximate kernels answer 0 (their
 * names contain "approx"). */
int pk_angcorr_kernel_exact(int kernel);
/* Look a kernel up by name ("ref", "scalar", "avx2", ...); -1 if unknown. */
int pk_angcorr_kernel_from_name(const char *name);
/* 1 if the kernel can run here (built in, CPU supports it, device present). */
int pk_angcorr_kernel_available(int kernel);

/* Count the pairs between catalogs a and b into counts[n_bins] (zeroed
 * first). With b == NULL, the auto-pairs of a: every ordered pair (i, j),
 * self-pairs included, so an unbinned count would be n_a^2. Otherwise every
 * (i, j) with i in a and j in b. Pairs outside the bin range are not
 * counted. Each run checks that the in-range and out-of-range counts add up
 * to the number of pairs and fails with PK_ERR_INTERNAL otherwise.
 * stats may be NULL. Reentrant; uses ctx->n_threads CPU threads. */
pk_status pk_angcorr_count(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *a,
                           const pk_catalog *b, const pk_bins *bins, uint64_t *counts,
                           pk_pair_stats *stats);

/* ---- estimators ---------------------------------------------------------- */

typedef enum pk_estimator {
    PK_ESTIMATOR_LANDY_SZALAY = 0, /* (DD - 2 DR + RR) / RR */
    PK_ESTIMATOR_NATURAL,          /* DD / RR - 1 */
    PK_ESTIMATOR_HAMILTON,         /* DD RR / DR^2 - 1 */
    PK_ESTIMATOR_DAVIS_PEEBLES     /* DD / DR - 1 */
} pk_estimator;

pk_status pk_estimator_parse(const char *name, pk_estimator *out);
const char *pk_estimator_name(pk_estimator estimator);

/* w(theta) per bin from counts normalised by their totals (n_d^2, n_d n_r,
 * n_r^2). With n_d == n_r the Landy-Szalay value is computed from the raw
 * counts, as the course format always did. Bins whose denominator is 0 get
 * NaN. */
void pk_estimate(pk_estimator estimator, uint64_t n_data, uint64_t n_random, size_t n_bins,
                 const uint64_t *dd, const uint64_t *dr, const uint64_t *rr, double *omega);

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
 * reported over the three counts together. Free with
 * pk_angcorr_result_free. */
pk_status pk_angcorr_run(pk_context *ctx, const pk_angcorr_options *opts, const pk_catalog *data,
                         const pk_catalog *random, const pk_bins *bins, pk_estimator estimator,
                         pk_angcorr_result *out);
void pk_angcorr_result_free(pk_angcorr_result *result);

/* Write the course format (omega.out): a header line and one row per bin
 * with RR > 0. Written atomically: on failure no file is left behind and an
 * existing file is untouched. */
pk_status pk_angcorr_write_omega(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                                 const pk_bins *bins);
/* CSV with a header: bin edges in degrees, omega, DD, DR, RR. Atomic. */
pk_status pk_angcorr_write_csv(pk_context *ctx, const char *path, const pk_angcorr_result *result,
                               const pk_bins *bins);

#ifdef __cplusplus
}
#endif

#endif
