/* memsort_cub_baseline.cu - the plain GPU alternative to pairkit's memsort,
 * kept as the baseline its speed is measured against: copy the whole trace
 * up, turn addresses into compact addresses, CUB radix sort of (compact
 * address, trace index) pairs, copy keys and values back to pinned host
 * memory. Three phases, one after the other, timed with device events. */
#include <cuda_runtime.h>

#include <cub/cub.cuh>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../src/memsort/memsort_internal.h"
#include "memsort_baselines.h"
}
#include "../src/common/cuda_check.cuh"

struct cub_layout {
    uint32_t n_regions;
    uint32_t base[PK_MEMSORT_MAX_REGIONS];
    unsigned long long end[PK_MEMSORT_MAX_REGIONS];
    uint32_t compact_base[PK_MEMSORT_MAX_REGIONS];
};

struct pk_memsort_cub_baseline {
    uint64_t n;
    int key_bits;
    cub_layout L;
    uint32_t *d_addr, *d_key_in, *d_key, *d_val_in, *d_val;
    void *d_temp;
    size_t temp_bytes;
    uint32_t *h_key, *h_val;
    cudaStream_t stream;
    cudaEvent_t ev[4];
    uint64_t device_bytes;
};

__global__ void cub_baseline_keys(const uint32_t *__restrict__ addr, uint64_t n, cub_layout L,
                                  uint32_t *__restrict__ key, uint32_t *__restrict__ val) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t raw = addr[i], k = 0;
        for (uint32_t r = 0; r < L.n_regions; r++)
            if (raw >= L.base[r] && (unsigned long long)raw < L.end[r])
                k = L.compact_base[r] + ((raw - L.base[r]) >> 3);
        key[i] = k;
        val[i] = (uint32_t)i;
    }
}

extern "C" void pk_memsort_cub_baseline_free(pk_memsort_cub_baseline *b) {
    if (!b) return;
    cudaFree(b->d_addr);
    cudaFree(b->d_key_in);
    cudaFree(b->d_key);
    cudaFree(b->d_val_in);
    cudaFree(b->d_val);
    cudaFree(b->d_temp);
    cudaFreeHost(b->h_key);
    cudaFreeHost(b->h_val);
    if (b->stream) cudaStreamDestroy(b->stream);
    for (int k = 0; k < 4; k++)
        if (b->ev[k]) cudaEventDestroy(b->ev[k]);
    free(b);
}

static pk_status create(pk_context *ctx, pk_memsort_cub_baseline *b, const pk_memsort_regions *regions, uint64_t n) {
    pk_memsort_layout layout;
    pk_memsort_layout_make(regions, &layout);
    b->n = n;
    b->key_bits = layout.key_bits;
    b->L.n_regions = layout.n_regions;
    for (uint32_t r = 0; r < layout.n_regions; r++) {
        b->L.base[r] = (uint32_t)layout.base[r];
        b->L.end[r] = layout.end[r];
        b->L.compact_base[r] = layout.compact_base[r];
    }
    size_t bytes = (n ? n : 1) * 4;
    uint32_t **bufs[5] = {&b->d_addr, &b->d_key_in, &b->d_key, &b->d_val_in, &b->d_val};
    for (int k = 0; k < 5; k++) PK_CUDA(ctx, cudaMalloc((void **)bufs[k], bytes));
    PK_CUDA(ctx, cub::DeviceRadixSort::SortPairs(NULL, b->temp_bytes, b->d_key_in, b->d_key, b->d_val_in, b->d_val,
                                                 (int64_t)n, 0, b->key_bits));
    PK_CUDA(ctx, cudaMalloc(&b->d_temp, b->temp_bytes));
    PK_CUDA(ctx, cudaMallocHost((void **)&b->h_key, bytes));
    PK_CUDA(ctx, cudaMallocHost((void **)&b->h_val, bytes));
    PK_CUDA(ctx, cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    for (int k = 0; k < 4; k++) PK_CUDA(ctx, cudaEventCreate(&b->ev[k]));
    b->device_bytes = 5 * bytes + b->temp_bytes;
    return PK_OK;
}

extern "C" pk_memsort_cub_baseline *pk_memsort_cub_baseline_create(pk_context *ctx, const pk_memsort_regions *regions,
                                                                   uint64_t n) {
    pk_memsort_cub_baseline *b = (pk_memsort_cub_baseline *)calloc(1, sizeof *b);
    if (!b) {
        pk_fail(ctx, PK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (create(ctx, b, regions, n) != PK_OK) {
        pk_memsort_cub_baseline_free(b);
        return NULL;
    }
    return b;
}

extern "C" pk_status pk_memsort_cub_baseline_run(pk_context *ctx, pk_memsort_cub_baseline *b, const uint32_t *addr,
                                                 pk_memsort_cub_times *times) {
    size_t bytes = b->n * 4, temp = b->temp_bytes;
    uint64_t blocks = (b->n + 255) / 256;
    if (blocks > 132 * 16) blocks = 132 * 16;
    if (blocks == 0) blocks = 1;
    PK_CUDA(ctx, cudaEventRecord(b->ev[0], b->stream));
    PK_CUDA(ctx, cudaMemcpyAsync(b->d_addr, addr, bytes, cudaMemcpyHostToDevice, b->stream));
    PK_CUDA(ctx, cudaEventRecord(b->ev[1], b->stream));
    cub_baseline_keys<<<(unsigned)blocks, 256, 0, b->stream>>>(b->d_addr, b->n, b->L, b->d_key_in, b->d_val_in);
    PK_CUDA(ctx, cudaGetLastError());
    PK_CUDA(ctx, cub::DeviceRadixSort::SortPairs(b->d_temp, temp, b->d_key_in, b->d_key, b->d_val_in, b->d_val,
                                                 (int64_t)b->n, 0, b->key_bits, b->stream));
    PK_CUDA(ctx, cudaEventRecord(b->ev[2], b->stream));
    PK_CUDA(ctx, cudaMemcpyAsync(b->h_key, b->d_key, bytes, cudaMemcpyDeviceToHost, b->stream));
    PK_CUDA(ctx, cudaMemcpyAsync(b->h_val, b->d_val, bytes, cudaMemcpyDeviceToHost, b->stream));
    PK_CUDA(ctx, cudaEventRecord(b->ev[3], b->stream));
    PK_CUDA(ctx, cudaEventSynchronize(b->ev[3]));
    float up = 0, sort = 0, down = 0, total = 0;
    PK_CUDA(ctx, cudaEventElapsedTime(&up, b->ev[0], b->ev[1]));
    PK_CUDA(ctx, cudaEventElapsedTime(&sort, b->ev[1], b->ev[2]));
    PK_CUDA(ctx, cudaEventElapsedTime(&down, b->ev[2], b->ev[3]));
    PK_CUDA(ctx, cudaEventElapsedTime(&total, b->ev[0], b->ev[3]));
    times->up_ms = up;
    times->sort_ms = sort;
    times->down_ms = down;
    times->total_ms = total;
    times->device_bytes = b->device_bytes;
    return PK_OK;
}

extern "C" const uint32_t *pk_memsort_cub_baseline_keys(const pk_memsort_cub_baseline *b) {
    return b->h_key;
}

extern "C" const uint32_t *pk_memsort_cub_baseline_values(const pk_memsort_cub_baseline *b) {
    return b->h_val;
}
