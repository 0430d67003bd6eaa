/* The vector operations of the NEON tables (AArch64, 4 lanes) that the
 * shared batched attend (../common/attend_simd.h) is written over: included
 * by neon/attend_neon.c and neon_dotprod/attend_neon_dotprod.c, each then
 * adding what its ISA has before including attend_simd.h. */
#ifndef KVC_NEON_OPS_H
#define KVC_NEON_OPS_H

#include <arm_neon.h>
#include <string.h>

#include "kvc/kvc_kernels.h"
#include "../common/exp_poly.h"

#define KVC_INLINE static inline __attribute__((always_inline))
#define VW         4
typedef float32x4_t vf;

KVC_INLINE vf v_zero(void) { return vdupq_n_f32(0.0f); }
KVC_INLINE vf v_set1(float x) { return vdupq_n_f32(x); }
KVC_INLINE vf v_load(const float *p) { return vld1q_f32(p); }
KVC_INLINE void v_store(float *p, vf v) { vst1q_f32(p, v); }
KVC_INLINE vf v_add(vf a, vf b) { return vaddq_f32(a, b); }
KVC_INLINE vf v_sub(vf a, vf b) { return vsubq_f32(a, b); }
KVC_INLINE vf v_mul(vf a, vf b) { return vmulq_f32(a, b); }
KVC_INLINE vf v_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
KVC_INLINE vf v_max(vf a, vf b) { return vmaxq_f32(a, b); }

/* 4 elements c.. of a stored row as floats (int8 without its scale) */
KVC_INLINE vf v_row(unsigned t, const unsigned char *row, size_t c)
{
    if (t == KVC_DTYPE_F32) return vld1q_f32((const float *)(const void *)row + c);
    if (t == KVC_DTYPE_F16)
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)(row + 2 * c))));
    int32_t w; /* 4 int8 elements */
    memcpy(&w, row + 4 + c, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

KVC_INLINE float v_hsum(vf v) { return vaddvq_f32(v); }
KVC_INLINE float v_hmax(vf v) { return vmaxvq_f32(v); }

/* the four horizontal sums by pairwise adds */
KVC_INLINE void v_hsum4(vf a0, vf a1, vf a2, vf a3, float *o)
{
    vst1q_f32(o, vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3)));
}

/* e^x for x <= 0 (or -inf: 0), the evaluation of ../common/exp_poly.h on 4 lanes. */
KVC_INLINE vf v_exp(vf x)
{
    const float32x4_t lo = vdupq_n_f32(KVC_EXP_LO);
    const uint32x4_t under = vcltq_f32(x, lo);
    x = vmaxq_f32(x, lo);
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(KVC_EXP_LOG2E)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(KVC_EXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(KVC_EXP_LN2_LO));
    float32x4_t y = vdupq_n_f32(KVC_EXP_P0);
    y = vfmaq_f32(vdupq_n_f32(KVC_EXP_P1), y, r);
    y = vfmaq_f32(vdupq_n_f32(KVC_EXP_P2), y, r);
    y = vfmaq_f32(vdupq_n_f32(KVC_EXP_P3), y, r);
    y = vfmaq_f32(vdupq_n_f32(KVC_EXP_P4), y, r);
    y = vfmaq_f32(vdupq_n_f32(KVC_EXP_P5), y, r);
    y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), y, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    y = vmulq_f32(y, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), under));
}

/* 32 int4 codes (16 bytes, code 2i in byte i's low nibble) as the floats
 * mn + code * sc, in order: the nibbles split with a mask and a shift,
 * zipped back into bytes, widened 4 at a time. The product is exact
 * (4 x 11 bits), so the one rounding of the FMA is the reference's. */
KVC_INLINE void v_nibbles32(const unsigned char *nib, float sc, float mn, float *x)
{
    const uint8x16_t b = vld1q_u8(nib);
    const uint8x16x2_t e = vzipq_u8(vandq_u8(b, vdupq_n_u8(15)), vshrq_n_u8(b, 4));
    const float32x4_t s = vdupq_n_f32(sc), n = vdupq_n_f32(mn);
    for (int h = 0; h < 2; h++) {
        const uint16x8_t w0 = vmovl_u8(vget_low_u8(e.val[h])), w1 = vmovl_u8(vget_high_u8(e.val[h]));
        const uint32x4_t u[4] = {vmovl_u16(vget_low_u16(w0)), vmovl_u16(vget_high_u16(w0)), vmovl_u16(vget_low_u16(w1)),
                                 vmovl_u16(vget_high_u16(w1))};
        for (int i = 0; i < 4; i++) vst1q_f32(x + 16 * h + 4 * i, vfmaq_f32(n, vcvtq_f32_u32(u[i]), s));
    }
}
#define v_nibbles32 v_nibbles32

/* one half (an int4 group's scale or minimum) by the conversion instruction */
#define v_half_to_float(h) vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0)

#endif /* KVC_NEON_OPS_H */
