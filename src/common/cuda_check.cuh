/* cuda_check.cuh - the one way pairkit calls CUDA: PK_CUDA(ctx, call) turns
 * a failing call into PK_ERR_CUDA with the statement, file and line in
 * ctx->message, and returns it from the enclosing function. Use
 * PK_CUDA_GOTO(ctx, st, label, call) where resources must be released. */
#ifndef PAIRKIT_CUDA_CHECK_CUH
#define PAIRKIT_CUDA_CHECK_CUH

#include <cuda_runtime.h>

#include "common.h"

#define PK_CUDA(ctx, call)                                                                                       \
    do {                                                                                                         \
        cudaError_t pk_cuda_err_ = (call);                                                                       \
        if (pk_cuda_err_ != cudaSuccess)                                                                         \
            return pk_fail((ctx), PK_ERR_CUDA, "%s failed: %s (%s:%d)", #call, cudaGetErrorString(pk_cuda_err_), \
                           __FILE__, __LINE__);                                                                  \
    } while (0)

#define PK_CUDA_GOTO(ctx, st, label, call)                                                                       \
    do {                                                                                                         \
        cudaError_t pk_cuda_err_ = (call);                                                                       \
        if (pk_cuda_err_ != cudaSuccess) {                                                                       \
            (st) = pk_fail((ctx), PK_ERR_CUDA, "%s failed: %s (%s:%d)", #call, cudaGetErrorString(pk_cuda_err_), \
                           __FILE__, __LINE__);                                                                  \
            goto label;                                                                                          \
        }                                                                                                        \
    } while (0)

/* After a kernel launch: the launch error, then (when sync) the run error. */
#define PK_CUDA_LAUNCHED(ctx, st, label) PK_CUDA_GOTO(ctx, st, label, cudaGetLastError())

/* Device memory for short-lived buffers (cuda_common.cu): blocks of up to
 * 64 MiB are kept after pk_cuda_pool_free and given to the next request of
 * their size class on the same device, so that many small counts do not
 * pay cudaMalloc and cudaFree each time. Work queued on the default stream
 * with the old buffer runs before any later use of it there. */
extern "C" cudaError_t pk_cuda_pool_malloc(void **p, size_t bytes);
extern "C" void pk_cuda_pool_free(void *p);

/* With pk_test_gpu_leave_free set: device memory holding all but that many
 * bytes of what the current device has free (NULL otherwise), to be given
 * back with cudaFree at the end of the run. */
extern "C" void *pk_cuda_test_take(void);

#endif
