/* cuda_exact.cuh - the float64 settling every angcorr CUDA kernel shares:
 * the reference dot product with each product and sum rounded on its own
 * (__dmul_rn/__dadd_rn, so no FMA contraction can make it differ from the
 * host's -ffp-contract=off evaluation), and the slot of a dot product from
 * the edge table's thresholds, #{s : dot < T_s}. */
#ifndef PAIRKIT_ANGCORR_CUDA_EXACT_CUH
#define PAIRKIT_ANGCORR_CUDA_EXACT_CUH

__device__ __forceinline__ double pk_dot_rn(double x1, double y1, double z1, double x2, double y2, double z2) {
    return __dadd_rn(__dadd_rn(__dmul_rn(x1, x2), __dmul_rn(y1, y2)), __dmul_rn(z1, z2));
}

/* thr: the non-increasing thresholds T_s, n_bounds of them. */
__device__ __forceinline__ int pk_slot_of_dot(const double *thr, int n_bounds, double dot) {
    int lo = 0, hi = n_bounds;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (dot < thr[mid]) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#endif
