/* test_cuda_pool.c - the device memory kept between counts
 * (src/common/cuda_common.cu): a block given back is handed to the next
 * request of its size class on the same device, large blocks are not
 * kept, and every block is usable memory.
 *
 * `test_cuda_pool fill`: with blocks kept, the rest of the card taken by
 * this process, a request the kept blocks must make room for succeeds
 * (they are given back to the driver first). Takes the whole GPU for a
 * moment: label slow. Exits 77 (skipped) without a device.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "check.h"
#include "pairkit/pairkit.h"

cudaError_t pk_cuda_pool_malloc(void **p, size_t bytes);
void pk_cuda_pool_free(void *p);
int pk_cuda_device_count(void);

/* Write and read back n bytes at p. */
static int usable(void *p, size_t n) {
    unsigned char b[2] = {0, 0};
    if (cudaMemset(p, 0x5a, n) != cudaSuccess) return 0;
    if (cudaMemcpy(&b[0], p, 1, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    if (cudaMemcpy(&b[1], (unsigned char *)p + n - 1, 1, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    return b[0] == 0x5a && b[1] == 0x5a;
}

static void reuse(void) {
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK(pk_cuda_pool_malloc(&a, 1000) == cudaSuccess && a && usable(a, 1000), "a block of 1000 bytes");
    pk_cuda_pool_free(a);
    CHECK(pk_cuda_pool_malloc(&b, 900) == cudaSuccess && b == a && usable(b, 900),
          "900 bytes reuse the 1000-byte block (size class 1024): %p, %p", a, b);
    CHECK(pk_cuda_pool_malloc(&c, 1000) == cudaSuccess && c && c != b && usable(c, 1000),
          "a second block while the first is held");
    CHECK(pk_cuda_pool_malloc(&d, 5000) == cudaSuccess && d && d != a && d != c && usable(d, 5000),
          "another size class");
    pk_cuda_pool_free(b);
    pk_cuda_pool_free(c);
    pk_cuda_pool_free(d);
    void *z = NULL;
    CHECK(pk_cuda_pool_malloc(&z, 0) == cudaSuccess && z, "0 bytes: a valid block");
    pk_cuda_pool_free(z);
    pk_cuda_pool_free(NULL);
    /* larger than a kept block: straight to the driver and back */
    size_t big = (size_t)100 << 20;
    void *e = NULL;
    CHECK(pk_cuda_pool_malloc(&e, big) == cudaSuccess && e && usable(e, big), "100 MiB");
    pk_cuda_pool_free(e);
    size_t free0 = 0, free1 = 0, total = 0;
    cudaMemGetInfo(&free0, &total);
    CHECK(pk_cuda_pool_malloc(&e, big) == cudaSuccess && e, "100 MiB again");
    cudaMemGetInfo(&free1, &total);
    CHECK(free0 >= free1 + big, "the 100 MiB block was not kept: %zu MiB free before, %zu after the new one",
          free0 >> 20, free1 >> 20);
    pk_cuda_pool_free(e);
}

static void fill(void) {
    /* four 32 MiB blocks kept */
    void *k[4];
    for (int i = 0; i < 4; i++) CHECK(pk_cuda_pool_malloc(&k[i], (size_t)32 << 20) == cudaSuccess, "32 MiB block");
    for (int i = 0; i < 4; i++) pk_cuda_pool_free(k[i]);
    /* the rest of the card */
    enum { MAX_HOG = 4096 };
    static void *hog[MAX_HOG];
    int n_hog = 0;
    for (size_t s = (size_t)1 << 34; s >= ((size_t)1 << 20) && n_hog < MAX_HOG;) {
        if (cudaMalloc(&hog[n_hog], s) == cudaSuccess) n_hog++;
        else {
            cudaGetLastError();
            s >>= 1;
        }
    }
    size_t left = 0, total = 0;
    cudaMemGetInfo(&left, &total);
    printf("card full: %d blocks taken, %zu MiB left of %zu\n", n_hog, left >> 20, total >> 20);
    void *p = NULL;
    cudaError_t e = pk_cuda_pool_malloc(&p, (size_t)48 << 20);
    CHECK(e == cudaSuccess && p && usable(p, (size_t)48 << 20),
          "48 MiB with the card full but 128 MiB kept: %s (the kept blocks were not given back)",
          cudaGetErrorString(e));
    void *q = NULL;
    e = pk_cuda_pool_malloc(&q, (size_t)32 << 20);
    CHECK(e == cudaSuccess && q && usable(q, (size_t)32 << 20), "then 32 MiB of what they left: %s",
          cudaGetErrorString(e));
    void *r = NULL;
    e = pk_cuda_pool_malloc(&r, (size_t)256 << 20);
    CHECK(e == cudaErrorMemoryAllocation && r == NULL, "256 MiB cannot fit: %s", cudaGetErrorString(e));
    cudaGetLastError();
    pk_cuda_pool_free(p);
    pk_cuda_pool_free(q);
    for (int i = 0; i < n_hog; i++) cudaFree(hog[i]);
}

int main(int argc, char **argv) {
    if (pk_cuda_device_count() == 0) return check_skip("test_cuda_pool", "no CUDA device");
    if (argc >= 2 && strcmp(argv[1], "fill") == 0) fill();
    else reuse();
    return check_finish("test_cuda_pool");
}
