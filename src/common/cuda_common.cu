/* cuda_common.cu - CUDA presence at run time. A binary built with CUDA runs
 * on a machine without a driver or a device: every query here then answers
 * "no device" and the backends fall back to the CPU. */
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "common.h"

extern "C" int pk_cuda_built(void) {
    return 1;
}

extern "C" int pk_cuda_device_count(void) {
    static std::atomic<int> cached{-1}; /* threads may ask at once; each gets the same count */
    int known = cached.load(std::memory_order_acquire);
    if (known >= 0) return known;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        n = 0;
    }
    cached.store(n, std::memory_order_release);
    return n;
}

extern "C" const char *pk_cuda_unusable(int device) {
    enum { KEPT = 64 };
    static std::mutex lock;
    static const char *answer[KEPT];
    static bool asked[KEPT];
    if (pk_cuda_device_count() == 0) return "no CUDA driver or device is present";
    if (device < 0 || device >= pk_cuda_device_count()) return "invalid device ordinal";
    std::lock_guard<std::mutex> hold(lock);
    if (device < KEPT && asked[device]) return answer[device];
    int cur = 0;
    bool had = cudaGetDevice(&cur) == cudaSuccess;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaFree(0); /* makes the device's primary context */
    const char *why = e == cudaSuccess ? NULL : cudaGetErrorString(e);
    cudaGetLastError(); /* a failed context is not sticky: clear it */
    if (had && cur != device) cudaSetDevice(cur);
    if (device < KEPT) asked[device] = true, answer[device] = why;
    return why;
}

extern "C" int pk_cuda_describe(int device, char *buf, size_t size) {
    if (!buf) size = 0; /* nothing written, the answer still given */
    const char *why = pk_cuda_unusable(device);
    if (why) {
        snprintf(buf, size, "cannot be used (%s)", why);
        return 1;
    }
    cudaDeviceProp prop;
    size_t free_b = 0, total_b = 0;
    int cur = 0;
    bool had = cudaGetDevice(&cur) == cudaSuccess;
    cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e == cudaSuccess) e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        snprintf(buf, size, "cannot be used (%s)", cudaGetErrorString(e));
        cudaGetLastError();
    } else {
        snprintf(buf, size, "%s, sm_%d%d, %.1f GiB, %.1f GiB free", prop.name, prop.major, prop.minor,
                 (double)total_b / 1073741824.0, (double)free_b / 1073741824.0);
    }
    if (had && cur != device) cudaSetDevice(cur);
    return e != cudaSuccess;
}

/* ---- device memory kept for the next count ------------------------------ */

/* Blocks of up to 64 MiB are kept on release, up to 64 of them and 256 MiB
 * in all, and handed to the next request of their size class (powers of
 * two) on the same device: a jackknife run makes thousands of small counts,
 * and on an H200 machine 13 cudaMalloc/cudaFree pairs cost 140 us, more
 * than such a count's kernel. Larger blocks go straight back to the
 * driver. A device's kept blocks are freed when a request finds it full,
 * and all of them at exit. The blocks belong to the device's context as it
 * was when they were made: a program that resets a device (cudaDeviceReset)
 * must not count on it with pairkit afterwards. */
#include <stdlib.h>

namespace {
const size_t POOL_MAX_BLOCK = (size_t)64 << 20, POOL_MAX_BYTES = (size_t)256 << 20;
const int POOL_MAX_BLOCKS = 64;
struct PoolBlock {
    void *p;
    size_t bytes;
    int device;
};
std::mutex pool_mutex;
PoolBlock pool_free[POOL_MAX_BLOCKS]; /* kept, unused */
int pool_n_free = 0;
size_t pool_bytes_free = 0;
struct Live {
    void *p;
    size_t bytes;
    int device;
    Live *next;
} *pool_live = NULL; /* handed out, of a pooled size class */
bool pool_exit_registered = false;

size_t size_class(size_t bytes) {
    size_t c = 256;
    while (c < bytes) c <<= 1;
    return c;
}

/* The kept blocks of `device` (all devices when < 0) back to the driver;
 * the lock is not held while cudaFree waits for the device. */
void release_kept(int device) {
    PoolBlock gone[POOL_MAX_BLOCKS];
    int n_gone = 0;
    {
        std::lock_guard<std::mutex> lock(pool_mutex);
        for (int k = 0; k < pool_n_free;) {
            if (device >= 0 && pool_free[k].device != device) {
                k++;
                continue;
            }
            gone[n_gone++] = pool_free[k];
            pool_bytes_free -= pool_free[k].bytes;
            pool_free[k] = pool_free[--pool_n_free];
        }
    }
    if (n_gone == 0) return;
    int cur = 0;
    cudaGetDevice(&cur);
    for (int k = 0; k < n_gone; k++) {
        cudaSetDevice(gone[k].device);
        cudaFree(gone[k].p);
    }
    cudaSetDevice(cur);
}

void release_all_kept() {
    release_kept(-1);
}

/* cudaMalloc on `device` (the current one), tried once more after its kept
 * blocks are given back when it is full. */
cudaError_t device_malloc(void **p, size_t bytes, int device) {
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        release_kept(device);
        e = cudaMalloc(p, bytes);
    }
    if (e != cudaSuccess) *p = NULL;
    return e;
}
} // namespace

extern "C" void *pk_cuda_test_take(void) {
    size_t leave = pk_test_gpu_leave_free, free_b = 0, total_b = 0;
    void *taken = NULL;
    if (!leave) return NULL;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess || free_b <= leave) {
        cudaGetLastError();
        return NULL;
    }
    size_t want = free_b - leave;
    while (want > ((size_t)2 << 20) && cudaMalloc(&taken, want) != cudaSuccess) {
        cudaGetLastError();
        taken = NULL;
        want -= want / 32 + ((size_t)2 << 20);
    }
    return taken;
}

extern "C" cudaError_t pk_cuda_pool_malloc(void **p, size_t bytes) {
    *p = NULL;
    if (bytes == 0) bytes = 1;
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return e;
    if (bytes > POOL_MAX_BLOCK) return device_malloc(p, bytes, device);
    size_t c = size_class(bytes);
    Live *rec = (Live *)malloc(sizeof(Live));
    if (!rec) return cudaErrorMemoryAllocation;
    {
        std::lock_guard<std::mutex> lock(pool_mutex);
        for (int k = 0; k < pool_n_free; k++)
            if (pool_free[k].bytes == c && pool_free[k].device == device) {
                *p = pool_free[k].p;
                pool_bytes_free -= c;
                pool_free[k] = pool_free[--pool_n_free];
                break;
            }
    }
    if (!*p) {
        e = device_malloc(p, c, device);
        if (e == cudaErrorMemoryAllocation && c > bytes) {
            /* the exact size may still fit where its class does not: not
             * kept (pk_cuda_pool_free gives untracked blocks back) */
            cudaGetLastError();
            free(rec);
            return device_malloc(p, bytes, device);
        }
        if (e != cudaSuccess) {
            free(rec);
            return e;
        }
    }
    std::lock_guard<std::mutex> lock(pool_mutex);
    *rec = Live{*p, c, device, pool_live};
    pool_live = rec;
    if (!pool_exit_registered) {
        /* after the runtime's own exit handler was registered (it ran
         * cudaMalloc above), so this one runs first */
        pool_exit_registered = true;
        atexit(release_all_kept);
    }
    return cudaSuccess;
}

extern "C" void pk_cuda_pool_free(void *p) {
    if (!p) return;
    Live *rec = NULL;
    {
        std::lock_guard<std::mutex> lock(pool_mutex);
        for (Live **l = &pool_live; *l; l = &(*l)->next)
            if ((*l)->p == p) {
                rec = *l;
                *l = rec->next;
                break;
            }
        if (rec && pool_n_free < POOL_MAX_BLOCKS && pool_bytes_free + rec->bytes <= POOL_MAX_BYTES) {
            pool_free[pool_n_free++] = PoolBlock{p, rec->bytes, rec->device};
            pool_bytes_free += rec->bytes;
            free(rec);
            return;
        }
    }
    if (rec) {
        int cur = 0;
        cudaGetDevice(&cur);
        if (cur != rec->device) cudaSetDevice(rec->device);
        cudaFree(p);
        if (cur != rec->device) cudaSetDevice(cur);
        free(rec);
        return;
    }
    cudaFree(p); /* not pooled: larger than a kept block, or made at its exact size */
}
