/* cpu_avx2.c - the float32 dftimage kernel with AVX2 + FMA: a tile row of
 * 32 pixels in two passes of two 8-wide vectors (16 registers leave no room
 * for more); per visibility the phase offset (3 FMA), the exact reduction to
 * [-0.5, 0.5] turns (round + subtract), the polynomial cosine (and sine in
 * complex mode) and the accumulation. Compiled for every x86-64 build with
 * a target attribute, chosen at run time only when the CPU has AVX2 and FMA.
 */
#include "dftimage_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define ATTR __attribute__((target("avx2,fma")))

ATTR static inline __m256 cos2pi_256(__m256 z) {
    __m256 p = _mm256_set1_ps(PK_DFT_COS_C6);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_COS_C5));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_COS_C4));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_COS_C3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_COS_C2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_COS_C1));
    return _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_COS_C0));
}

ATTR static inline __m256 sin2pi_256(__m256 r, __m256 z) {
    __m256 p = _mm256_set1_ps(PK_DFT_SIN_C6);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_SIN_C5));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_SIN_C4));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_SIN_C3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_SIN_C2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_SIN_C1));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(PK_DFT_SIN_C0));
    return _mm256_mul_ps(p, r);
}

/* x - rint(x) */
#define REDUCE256(x) _mm256_sub_ps((x), _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))

ATTR void pk_dft_block_avx2(const pk_dft_table *t, pk_dft_tile *tile, int want_imag) {
    for (int o = 0; o < PK_DFT_TILE_PIX; o += 16) {
        const __m256 dl0 = _mm256_load_ps(tile->dl + o), dl1 = _mm256_load_ps(tile->dl + o + 8);
        const __m256 dm0 = _mm256_load_ps(tile->dm + o), dm1 = _mm256_load_ps(tile->dm + o + 8);
        const __m256 dn0 = _mm256_load_ps(tile->dn + o), dn1 = _mm256_load_ps(tile->dn + o + 8);
        __m256 re0 = _mm256_load_ps(tile->acc_re + o), re1 = _mm256_load_ps(tile->acc_re + o + 8);
        if (!want_imag) {
            for (size_t j = 0; j < t->n; j++) {
                __m256 U = _mm256_broadcast_ss(t->U + j), V = _mm256_broadcast_ss(t->V + j);
                __m256 W = _mm256_broadcast_ss(t->W + j), R = _mm256_broadcast_ss(t->R + j);
                __m256 x0 = _mm256_fmadd_ps(U, dl0, _mm256_fmadd_ps(V, dm0, _mm256_fmadd_ps(W, dn0, R)));
                __m256 x1 = _mm256_fmadd_ps(U, dl1, _mm256_fmadd_ps(V, dm1, _mm256_fmadd_ps(W, dn1, R)));
                __m256 r0 = REDUCE256(x0), r1 = REDUCE256(x1);
                __m256 c0 = cos2pi_256(_mm256_mul_ps(r0, r0)), c1 = cos2pi_256(_mm256_mul_ps(r1, r1));
                __m256 A = _mm256_broadcast_ss(t->vr + j);
                re0 = _mm256_fmadd_ps(A, c0, re0);
                re1 = _mm256_fmadd_ps(A, c1, re1);
            }
        } else {
            __m256 im0 = _mm256_load_ps(tile->acc_im + o), im1 = _mm256_load_ps(tile->acc_im + o + 8);
            for (size_t j = 0; j < t->n; j++) {
                __m256 U = _mm256_broadcast_ss(t->U + j), V = _mm256_broadcast_ss(t->V + j);
                __m256 W = _mm256_broadcast_ss(t->W + j), R = _mm256_broadcast_ss(t->R + j);
                __m256 x0 = _mm256_fmadd_ps(U, dl0, _mm256_fmadd_ps(V, dm0, _mm256_fmadd_ps(W, dn0, R)));
                __m256 x1 = _mm256_fmadd_ps(U, dl1, _mm256_fmadd_ps(V, dm1, _mm256_fmadd_ps(W, dn1, R)));
                __m256 r0 = REDUCE256(x0), r1 = REDUCE256(x1);
                __m256 z0 = _mm256_mul_ps(r0, r0), z1 = _mm256_mul_ps(r1, r1);
                __m256 c0 = cos2pi_256(z0), c1 = cos2pi_256(z1);
                __m256 s0 = sin2pi_256(r0, z0), s1 = sin2pi_256(r1, z1);
                __m256 vr = _mm256_broadcast_ss(t->vr + j), vi = _mm256_broadcast_ss(t->vi + j);
                re0 = _mm256_fmadd_ps(vr, c0, _mm256_fnmadd_ps(vi, s0, re0));
                re1 = _mm256_fmadd_ps(vr, c1, _mm256_fnmadd_ps(vi, s1, re1));
                im0 = _mm256_fmadd_ps(vr, s0, _mm256_fmadd_ps(vi, c0, im0));
                im1 = _mm256_fmadd_ps(vr, s1, _mm256_fmadd_ps(vi, c1, im1));
            }
            _mm256_store_ps(tile->acc_im + o, im0);
            _mm256_store_ps(tile->acc_im + o + 8, im1);
        }
        _mm256_store_ps(tile->acc_re + o, re0);
        _mm256_store_ps(tile->acc_re + o + 8, re1);
    }
}

#endif
