/* int4 rows scored on the integer units with the Armv8.2 dot product (sdot),
 * the NEON counterpart of i4_q8_avx2.h and the same arithmetic: the query
 * quantised to int8 per group of 32 channels (q8_prepare in attend_simd.h,
 * its layout: per pair of groups 32 bytes of even channels, group p's 16
 * then group p+1's, and 32 bytes of odd channels), and per row and group
 *   I_g = sum_c code_c q8_c            (exact: |I_g| <= 32 * 15 * 127)
 * by two sdot (low nibbles = even channels, high = odd) and one lane sum,
 * then the score sum_g (sc_g sq_g) I_g + mn_g S_g in f32, group by group.
 * The error is the one tests/kvc_attend_bound.h derives for
 * KVC_CAP_Q8_INT4 (the quantised query's term; 31 roundings in S_g and at
 * most 2 per group here, within its (d + 8) u G). Needs
 * __ARM_FEATURE_DOTPROD. */
#ifndef KVC_I4_Q8_NEON_H
#define KVC_I4_Q8_NEON_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

/* Scores of rows 0 .. nb-1 (nb <= 32) of int4 keys (row stride ks, d a
 * multiple of 64) against nq <= 3 prepared queries, into s3[x][j]; each
 * row's nibbles split once for the queries. */
static inline __attribute__((always_inline)) void v_i4_q8_scores(const unsigned char *K, size_t ks, size_t nb, size_t d,
                                                                 const unsigned char *const q8[3], size_t nq,
                                                                 float s3[3][32])
{
    const size_t ng = d / 32u;
    const uint8x16_t m15 = vdupq_n_u8(15);
    for (size_t j = 0; j < nb; j++) {
        const unsigned char *row = K + j * ks, *nib = row + 4u * ng;
        float s[3] = {0.0f, 0.0f, 0.0f};
        for (size_t g = 0; g < ng; g++) {
            uint16_t h[2];
            memcpy(h, row + 4u * g, sizeof h);
            const float32x4_t hf =
                vcvt_f32_f16(vreinterpret_f16_u16(vcreate_u16((uint64_t)h[0] | (uint64_t)h[1] << 16)));
            const float sc = vgetq_lane_f32(hf, 0), mn = vgetq_lane_f32(hf, 1);
            const uint8x16_t b = vld1q_u8(nib + 16u * g);
            const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, m15)), hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
            for (size_t x = 0; x < nq; x++) {
                const unsigned char *qq = q8[x] + 64u * (g / 2u) + 16u * (g % 2u);
                const float *sq = (const float *)(const void *)(q8[x] + d), *sum = sq + ng;
                int32x4_t acc = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8((const int8_t *)(const void *)qq));
                acc = vdotq_s32(acc, hi, vld1q_s8((const int8_t *)(const void *)(qq + 32)));
                const float ig = (float)vaddvq_s32(acc);
                s[x] += (sc * sq[g]) * ig + mn * sum[g];
            }
        }
        for (size_t x = 0; x < nq; x++) s3[x][j] = s[x];
    }
}
#define v_i4_q8_scores v_i4_q8_scores

#endif /* KVC_I4_Q8_NEON_H */
