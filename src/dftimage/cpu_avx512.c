/* cpu_avx512.c - the float32 dftimage kernel with AVX-512: a tile row of
 * 32 pixels is two vectors; per visibility the phase offset (3 FMA), the
 * exact reduction to [-0.5, 0.5] turns (round + subtract), the polynomial
 * cosine (and sine in complex mode) and the accumulation. Compiled for every
 * x86-64 build with a target attribute, chosen at run time only when the
 * CPU has AVX-512. Same arithmetic as the portable kernel, so results
 * differ from it only by FMA rounding.
 */
#include "dftimage_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define ATTR __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))

ATTR static inline __m512 cos2pi_512(__m512 z) {
    __m512 p = _mm512_set1_ps(PK_DFT_COS_C6);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_COS_C5));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_COS_C4));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_COS_C3));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_COS_C2));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_COS_C1));
    return _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_COS_C0));
}

ATTR static inline __m512 sin2pi_512(__m512 r, __m512 z) {
    __m512 p = _mm512_set1_ps(PK_DFT_SIN_C6);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_SIN_C5));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_SIN_C4));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_SIN_C3));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_SIN_C2));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_SIN_C1));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(PK_DFT_SIN_C0));
    return _mm512_mul_ps(p, r);
}

/* x - rint(x) */
#define REDUCE512(x) _mm512_sub_ps((x), _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))

ATTR void pk_dft_block_avx512(const pk_dft_table *t, pk_dft_tile *tile, int want_imag) {
    for (int row = 0; row < PK_DFT_TILE_H; row++) {
        int o = row * PK_DFT_TILE_W;
        const __m512 dl0 = _mm512_load_ps(tile->dl + o), dl1 = _mm512_load_ps(tile->dl + o + 16);
        const __m512 dm0 = _mm512_load_ps(tile->dm + o), dm1 = _mm512_load_ps(tile->dm + o + 16);
        const __m512 dn0 = _mm512_load_ps(tile->dn + o), dn1 = _mm512_load_ps(tile->dn + o + 16);
        __m512 re0 = _mm512_load_ps(tile->acc_re + o), re1 = _mm512_load_ps(tile->acc_re + o + 16);
        if (!want_imag) {
            for (size_t j = 0; j < t->n; j++) {
                __m512 U = _mm512_set1_ps(t->U[j]), V = _mm512_set1_ps(t->V[j]), W = _mm512_set1_ps(t->W[j]);
                __m512 R = _mm512_set1_ps(t->R[j]), A = _mm512_set1_ps(t->vr[j]);
                __m512 x0 = _mm512_fmadd_ps(U, dl0, _mm512_fmadd_ps(V, dm0, _mm512_fmadd_ps(W, dn0, R)));
                __m512 x1 = _mm512_fmadd_ps(U, dl1, _mm512_fmadd_ps(V, dm1, _mm512_fmadd_ps(W, dn1, R)));
                __m512 r0 = REDUCE512(x0), r1 = REDUCE512(x1);
                __m512 c0 = cos2pi_512(_mm512_mul_ps(r0, r0)), c1 = cos2pi_512(_mm512_mul_ps(r1, r1));
                re0 = _mm512_fmadd_ps(A, c0, re0);
                re1 = _mm512_fmadd_ps(A, c1, re1);
            }
        } else {
            __m512 im0 = _mm512_load_ps(tile->acc_im + o), im1 = _mm512_load_ps(tile->acc_im + o + 16);
            for (size_t j = 0; j < t->n; j++) {
                __m512 U = _mm512_set1_ps(t->U[j]), V = _mm512_set1_ps(t->V[j]), W = _mm512_set1_ps(t->W[j]);
                __m512 R = _mm512_set1_ps(t->R[j]), vr = _mm512_set1_ps(t->vr[j]), vi = _mm512_set1_ps(t->vi[j]);
                __m512 x0 = _mm512_fmadd_ps(U, dl0, _mm512_fmadd_ps(V, dm0, _mm512_fmadd_ps(W, dn0, R)));
                __m512 x1 = _mm512_fmadd_ps(U, dl1, _mm512_fmadd_ps(V, dm1, _mm512_fmadd_ps(W, dn1, R)));
                __m512 r0 = REDUCE512(x0), r1 = REDUCE512(x1);
                __m512 z0 = _mm512_mul_ps(r0, r0), z1 = _mm512_mul_ps(r1, r1);
                __m512 c0 = cos2pi_512(z0), c1 = cos2pi_512(z1);
                __m512 s0 = sin2pi_512(r0, z0), s1 = sin2pi_512(r1, z1);
                re0 = _mm512_fmadd_ps(vr, c0, _mm512_fnmadd_ps(vi, s0, re0));
                re1 = _mm512_fmadd_ps(vr, c1, _mm512_fnmadd_ps(vi, s1, re1));
                im0 = _mm512_fmadd_ps(vr, s0, _mm512_fmadd_ps(vi, c0, im0));
                im1 = _mm512_fmadd_ps(vr, s1, _mm512_fmadd_ps(vi, c1, im1));
            }
            _mm512_store_ps(tile->acc_im + o, im0);
            _mm512_store_ps(tile->acc_im + o + 16, im1);
        }
        _mm512_store_ps(tile->acc_re + o, re0);
        _mm512_store_ps(tile->acc_re + o + 16, re1);
    }
}

#endif
