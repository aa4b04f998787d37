/* cpu_theta.c - the separations of one row's pairs in float64 for the
 * mean-separation sums: the reference dot product, clamped to [-1, 1],
 * then pk_acos, over a row's columns at once so that the loop vectorises
 * (eight or four pairs a step with AVX-512 or AVX2). The same operations
 * in the same order on every path: the bits do not depend on the one taken.
 */
#include "angcorr_internal.h"

static inline __attribute__((always_inline)) void row_theta(const pk_pair_job *job, size_t i, size_t j0, size_t j1,
                                                            double *theta) {
    const double xi = job->xa[i], yi = job->ya[i], zi = job->za[i];
    const double *xb = job->xb, *yb = job->yb, *zb = job->zb;
#if !defined(__clang__) /* clang warns where it cannot honour the request (sanitizer builds) */
#pragma omp simd
#endif
    for (size_t j = j0; j < j1; j++) {
        double d = pk_angcorr_dot_ref(xi, yi, zi, xb[j], yb[j], zb[j]);
        d = d > 1.0 ? 1.0 : d;
        d = d < -1.0 ? -1.0 : d;
        theta[j - j0] = pk_acos(d);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq"))) static void row_theta_avx512(const pk_pair_job *job, size_t i, size_t j0,
                                                                         size_t j1, double *theta) {
    row_theta(job, i, j0, j1, theta);
}

__attribute__((target("avx2"))) static void row_theta_avx2(const pk_pair_job *job, size_t i, size_t j0, size_t j1,
                                                           double *theta) {
    row_theta(job, i, j0, j1, theta);
}
#endif

static void row_theta_plain(const pk_pair_job *job, size_t i, size_t j0, size_t j1, double *theta) {
    row_theta(job, i, j0, j1, theta);
}

int pk_angcorr_row_theta_path = -1;

void pk_angcorr_row_theta(const pk_pair_job *job, size_t i, size_t j0, size_t j1, double *theta) {
#if defined(__x86_64__)
    int l;
#pragma omp atomic read
    l = pk_angcorr_row_theta_path;
    if (l < 0) {
        l = pk_cpu_has_avx512() ? 2 : pk_cpu_has_avx2_fma() ? 1 : 0;
#pragma omp atomic write
        pk_angcorr_row_theta_path = l;
    }
    if (l == 2) row_theta_avx512(job, i, j0, j1, theta);
    else if (l == 1) row_theta_avx2(job, i, j0, j1, theta);
    else row_theta_plain(job, i, j0, j1, theta);
#else
    row_theta_plain(job, i, j0, j1, theta);
#endif
}
