/* AVX2 + FMA + F16C kernel table (8 lanes): the vector operations the shared
 * batched attend (../common/attend_simd.h) is written over. Compiled with
 * -mavx2 -mfma -mf16c for this file only; elsewhere (a build without those
 * flags) it is empty and kernels.c does not list it. */
#include "kvc/kvc_kernels.h"
#include "../common/exp_poly.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define KVC_INLINE static inline __attribute__((always_inline))
#define VW         8
typedef __m256 vf;

KVC_INLINE vf v_zero(void) { return _mm256_setzero_ps(); }
KVC_INLINE vf v_set1(float x) { return _mm256_set1_ps(x); }
KVC_INLINE vf v_load(const float *p) { return _mm256_loadu_ps(p); }
KVC_INLINE void v_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
KVC_INLINE vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
KVC_INLINE vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
KVC_INLINE vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
KVC_INLINE vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
KVC_INLINE vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }

/* 8 elements c.. of a stored row as floats (int8 without its scale) */
KVC_INLINE vf v_row(unsigned t, const unsigned char *row, size_t c)
{
    if (t == KVC_DTYPE_F32) return _mm256_loadu_ps((const float *)(const void *)row + c);
    if (t == KVC_DTYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c)));
    const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(row + 4 + c));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
}

KVC_INLINE float v_hsum(vf v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

KVC_INLINE float v_hmax(vf v)
{
    v = _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 1));
    v = _mm256_max_ps(v, _mm256_permute_ps(v, 0x4E));
    v = _mm256_max_ps(v, _mm256_permute_ps(v, 0xB1));
    return _mm256_cvtss_f32(v);
}

/* the four horizontal sums by one hadd tree */
KVC_INLINE void v_hsum4(vf a0, vf a1, vf a2, vf a3, float *o)
{
    const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    _mm_storeu_ps(o, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

/* e^x for x <= 0 (or -inf: 0), the evaluation of ../common/exp_poly.h on 8 lanes. */
KVC_INLINE vf v_exp(vf x)
{
    const __m256 lo = _mm256_set1_ps(KVC_EXP_LO);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(KVC_EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KVC_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KVC_EXP_LN2_LO), r);
    __m256 y = _mm256_set1_ps(KVC_EXP_P0);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KVC_EXP_P1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KVC_EXP_P2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KVC_EXP_P3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KVC_EXP_P4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KVC_EXP_P5));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

/* 32 int4 codes (16 bytes, code 2i in byte i's low nibble) as the floats
 * mn + code * sc, in order: the nibbles split with a mask and a shift,
 * interleaved back into bytes, widened 8 at a time. The product is exact
 * (4 x 11 bits), so the one rounding of the FMA is the reference's. */
KVC_INLINE void v_nibbles32(const unsigned char *nib, float sc, float mn, float *x)
{
    const __m128i m = _mm_set1_epi8(15), b = _mm_loadu_si128((const __m128i *)(const void *)nib);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    const __m128i e0 = _mm_unpacklo_epi8(lo, hi), e1 = _mm_unpackhi_epi8(lo, hi);
    const __m256 s = _mm256_set1_ps(sc), n = _mm256_set1_ps(mn);
    _mm256_storeu_ps(x, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e0)), s, n));
    _mm256_storeu_ps(x + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(e0, 8))), s, n));
    _mm256_storeu_ps(x + 16, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e1)), s, n));
    _mm256_storeu_ps(x + 24, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(e1, 8))), s, n));
}
#define v_nibbles32 v_nibbles32

/* one half (an int4 group's scale or minimum) by the conversion instruction */
#define v_half_to_float(h) _cvtsh_ss(h)
#define AXPY3_STAGED_VECS  2u /* 16 registers: 6 accumulators, 3 broadcasts, the row */
#include "../common/i4_q8_avx2.h"
#include "../common/i4_pv_avx2.h"
#include "../common/attend_simd.h"

KVC_SIMD_ENTRIES(avx2, KVC_CPU_AVX2);
#else
typedef int kvc_avx2_not_built; /* an empty file is not valid C */
#endif
