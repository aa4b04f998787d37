/* cuda.cu - the CUDA backend of angcorr.
 *
 * Kernels are numbered from PK_ANGCORR_KERNEL_CUDA_FIRST, naive first. Every
 * kernel bins exactly: a pair's slot equals the float64 reference's. The
 * float64 dot product is evaluated with __dmul_rn/__dadd_rn so that no FMA
 * contraction can make it differ from the host's (-ffp-contract=off).
 */
#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "angcorr_internal.h"
}
#include "../common/cuda_check.cuh"

enum {
    /* one thread per ordered pair, float64 dot, search of the thresholds,
     * global atomics: the simplest exact kernel */
    PK_ANGCORR_KERNEL_CUDA_NAIVE = PK_ANGCORR_KERNEL_CUDA_FIRST,
};

static const struct {
    int kernel;
    const char *name;
} cuda_kernels[] = {
    {PK_ANGCORR_KERNEL_CUDA_NAIVE, "cuda-naive"},
};
#define N_CUDA_KERNELS (sizeof cuda_kernels / sizeof cuda_kernels[0])

extern "C" const char *pk_angcorr_cuda_kernel_name(int kernel) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (cuda_kernels[k].kernel == kernel) return cuda_kernels[k].name;
    return NULL;
}

extern "C" int pk_angcorr_cuda_kernel_from_name(const char *name) {
    for (size_t k = 0; k < N_CUDA_KERNELS; k++)
        if (strcmp(cuda_kernels[k].name, name) == 0) return cuda_kernels[k].kernel;
    return -1;
}

/* The reference dot product, rounded exactly as on the host. */
__device__ __forceinline__ double dot_rn(double x1, double y1, double z1, double x2, double y2, double z2) {
    return __dadd_rn(__dadd_rn(__dmul_rn(x1, x2), __dmul_rn(y1, y2)), __dmul_rn(z1, z2));
}

/* #{s : dot < T_s} over the non-increasing thresholds. */
__device__ __forceinline__ int slot_fp64(const double *thr, int n_bounds, double dot) {
    int lo = 0, hi = n_bounds;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (dot < thr[mid]) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

__global__ void naive_kernel(const double *__restrict__ a, size_t n_a, const double *__restrict__ b, size_t n_b,
                             const double *__restrict__ thr, int n_bounds, unsigned long long *slots) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_a * n_b) return;
    size_t i = p / n_b, j = p % n_b;
    double d = dot_rn(a[i], a[n_a + i], a[2 * n_a + i], b[j], b[n_b + j], b[2 * n_b + j]);
    atomicAdd(&slots[slot_fp64(thr, n_bounds, d)], 1ull);
}

/* Host unit vectors (the reference's) as x[n], y[n], z[n]. */
static pk_status upload_vectors(pk_context *ctx, const pk_catalog *c, double **dev) {
    pk_unit_vectors v;
    pk_status st = pk_unit_vectors_make(ctx, c, &v);
    if (st) return st;
    double *host = (double *)malloc(3 * c->n * sizeof(double));
    if (!host) {
        pk_unit_vectors_free(&v);
        return pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
    }
    memcpy(host, v.x, c->n * sizeof(double));
    memcpy(host + c->n, v.y, c->n * sizeof(double));
    memcpy(host + 2 * c->n, v.z, c->n * sizeof(double));
    pk_unit_vectors_free(&v);
    st = PK_OK;
    *dev = NULL;
    PK_CUDA_GOTO(ctx, st, done, cudaMalloc(dev, 3 * c->n * sizeof(double)));
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(*dev, host, 3 * c->n * sizeof(double), cudaMemcpyHostToDevice));
done:
    free(host);
    return st;
}

extern "C" pk_status pk_angcorr_count_cuda(pk_context *ctx, int kernel, const pk_catalog *a, const pk_catalog *b,
                                           const pk_bins *bins, const pk_edge_table *table, uint64_t *slots,
                                           pk_pair_stats *stats, pk_progress *progress) {
    (void)bins;
    (void)progress;
    if (!pk_angcorr_cuda_kernel_name(kernel)) return pk_fail(ctx, PK_ERR_INVALID, "kernel %d is not a CUDA kernel", kernel);
    const pk_catalog *bb = b ? b : a;
    pk_status st = PK_OK;
    double *d_a = NULL, *d_b = NULL, *d_thr = NULL;
    unsigned long long *d_slots = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    float ms = 0;
    size_t n_pairs = a->n * bb->n;
    PK_CUDA(ctx, cudaSetDevice(ctx ? ctx->cuda_device : 0));
    if ((st = upload_vectors(ctx, a, &d_a)) != PK_OK) goto done;
    if (b && (st = upload_vectors(ctx, b, &d_b)) != PK_OK) goto done;
    PK_CUDA_GOTO(ctx, st, done, cudaMalloc(&d_thr, (size_t)table->n_bounds * sizeof(double)));
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(d_thr, table->dot_threshold, (size_t)table->n_bounds * sizeof(double),
                                           cudaMemcpyHostToDevice));
    PK_CUDA_GOTO(ctx, st, done, cudaMalloc(&d_slots, (size_t)table->n_slots * sizeof(unsigned long long)));
    PK_CUDA_GOTO(ctx, st, done, cudaMemset(d_slots, 0, (size_t)table->n_slots * sizeof(unsigned long long)));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&ev[0]));
    PK_CUDA_GOTO(ctx, st, done, cudaEventCreate(&ev[1]));
    PK_CUDA_GOTO(ctx, st, done, cudaEventRecord(ev[0]));
    {
        const int threads = 256;
        size_t blocks = (n_pairs + threads - 1) / threads;
        naive_kernel<<<(unsigned)blocks, threads>>>(d_a, a->n, b ? d_b : d_a, bb->n, d_thr, table->n_bounds, d_slots);
        PK_CUDA_LAUNCHED(ctx, st, done);
    }
    PK_CUDA_GOTO(ctx, st, done, cudaEventRecord(ev[1]));
    PK_CUDA_GOTO(ctx, st, done, cudaEventSynchronize(ev[1]));
    PK_CUDA_GOTO(ctx, st, done, cudaEventElapsedTime(&ms, ev[0], ev[1]));
    PK_CUDA_GOTO(ctx, st, done, cudaMemcpy(slots, d_slots, (size_t)table->n_slots * sizeof(uint64_t),
                                           cudaMemcpyDeviceToHost));
    stats->kernel_ms = ms;
    stats->pairs_visited = n_pairs;
    stats->pairs_fp64 = n_pairs;
done:
    if (ev[0]) cudaEventDestroy(ev[0]);
    if (ev[1]) cudaEventDestroy(ev[1]);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_thr);
    cudaFree(d_slots);
    return st;
}

extern "C" const int pk_angcorr_cuda_best_kernel = PK_ANGCORR_KERNEL_CUDA_NAIVE;
