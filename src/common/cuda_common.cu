/* cuda_common.cu - CUDA presence at run time. A binary built with CUDA runs
 * on a machine without a driver or a device: every query here then answers
 * "no device" and the backends fall back to the CPU. */
#include <cuda_runtime.h>

#include "common.h"

extern "C" int pk_cuda_built(void) {
    return 1;
}

extern "C" int pk_cuda_device_count(void) {
    static int cached = -1;
    if (cached >= 0) return cached;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        n = 0;
    }
    cached = n;
    return n;
}
