/* AVX-512F kernel table (16 lanes; blocks of 16 entries): the vector
 * operations the shared batched attend (../common/attend_simd.h) is written
 * over. Compiled with -mavx512f -mavx2 -mfma -mf16c for this file only;
 * listed by kernels.c when built, chosen when the CPU has AVX-512F. */
#include "kvc/kvc_kernels.h"
#include "../common/exp_poly.h"

#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define KVC_INLINE static inline __attribute__((always_inline))
#define VW         16
typedef __m512 vf;

KVC_INLINE vf v_zero(void) { return _mm512_setzero_ps(); }
KVC_INLINE vf v_set1(float x) { return _mm512_set1_ps(x); }
KVC_INLINE vf v_load(const float *p) { return _mm512_loadu_ps(p); }
KVC_INLINE void v_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
KVC_INLINE vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
KVC_INLINE vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
KVC_INLINE vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
KVC_INLINE vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
KVC_INLINE vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }

/* 16 elements c.. of a stored row as floats (int8 without its scale) */
KVC_INLINE vf v_row(unsigned t, const unsigned char *row, size_t c)
{
    if (t == KVC_DTYPE_F32) return _mm512_loadu_ps((const float *)(const void *)row + c);
    if (t == KVC_DTYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * c)));
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(row + 4 + c));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
}

KVC_INLINE float v_hsum(vf v) { return _mm512_reduce_add_ps(v); }
KVC_INLINE float v_hmax(vf v) { return _mm512_reduce_max_ps(v); }

/* the four horizontal sums: halves added, then the AVX2 hadd tree */
KVC_INLINE __m256 fold(vf a) /* AVX-512F only (no DQ): the upper half through the double view */
{
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}
KVC_INLINE void v_hsum4(vf a0, vf a1, vf a2, vf a3, float *o)
{
    const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(fold(a0), fold(a1)), _mm256_hadd_ps(fold(a2), fold(a3)));
    _mm_storeu_ps(o, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

/* e^x for x <= 0 (or -inf: 0), the evaluation of ../common/exp_poly.h on 16 lanes. */
KVC_INLINE vf v_exp(vf x)
{
    const __m512 lo = _mm512_set1_ps(KVC_EXP_LO);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(x, lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(KVC_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KVC_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KVC_EXP_LN2_LO), r);
    __m512 y = _mm512_set1_ps(KVC_EXP_P0);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(KVC_EXP_P1));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(KVC_EXP_P2));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(KVC_EXP_P3));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(KVC_EXP_P4));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(KVC_EXP_P5));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~under, y);
}

/* 32 int4 codes (16 bytes, code 2i in byte i's low nibble) as the floats
 * mn + code * sc, in order: the nibbles split with a mask and a shift,
 * interleaved back into bytes, widened 16 at a time. The product is exact
 * (4 x 11 bits), so the one rounding of the FMA is the reference's. */
KVC_INLINE void v_nibbles32(const unsigned char *nib, float sc, float mn, float *x)
{
    const __m128i m = _mm_set1_epi8(15), b = _mm_loadu_si128((const __m128i *)(const void *)nib);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    const __m512 s = _mm512_set1_ps(sc), n = _mm512_set1_ps(mn);
    _mm512_storeu_ps(x, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi))), s, n));
    _mm512_storeu_ps(x + 16,
                     _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi))), s, n));
}
#define v_nibbles32 v_nibbles32

/* one half (an int4 group's scale or minimum) by the conversion instruction */
#define v_half_to_float(h) _cvtsh_ss(h)
#include "../common/i4_q8_avx2.h"
#include "../common/i4_pv_avx2.h"
#include "../common/attend_simd.h"

KVC_SIMD_ENTRIES(avx512, KVC_CPU_AVX2 | KVC_CPU_AVX512);
#else
typedef int kvc_avx512_not_built; /* an empty file is not valid C */
#endif
