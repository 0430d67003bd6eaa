/* IEEE binary16 <-> binary32 conversions (round to nearest even) and the
 * int8 rounding. Their contracts (rows_typed.h) are trusted by the proofs:
 * bit casts through memcpy and float-to-int rounding are beyond WP and its
 * provers here; tests/unit/test_dtype checks them. */
#include <math.h>
#include <string.h>

#include "rows_typed.h"

/* Largest finite half: stored values saturate there (a cache of finite
   inputs never holds an infinity). */
#define KVC_F16_MAX_BITS 0x7BFFu

uint16_t kvc_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t e = (x >> 23) & 0xFFu;
    uint32_t m = x & 0x7FFFFFu;
    if (e == 0xFFu) return (uint16_t)(sign | (m ? 0x7E00u : KVC_F16_MAX_BITS)); /* NaN stays NaN */
    const int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31) return (uint16_t)(sign | KVC_F16_MAX_BITS);
    if (he <= 0) { /* half subnormal (or zero): value = hm * 2^-24 */
        if (he < -10) return sign;
        m |= 0x800000u;
        const uint32_t shift = (uint32_t)(14 - he);
        uint32_t hm = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = ((uint32_t)he << 10) | (m >> 13);
    const uint32_t rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
    if (h > KVC_F16_MAX_BITS) h = KVC_F16_MAX_BITS;
    return (uint16_t)(sign | h);
}

float kvc_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t x;
    if (e == 0) {
        const float f = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return sign ? -f : f;
    }
    if (e == 31)
        x = sign | 0x7F800000u | (m << 13);
    else
        x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Half away from zero as t + copysign(1/2, t) truncated: the same integer as
 * rounding |t| + 1/2 and putting the sign back (t - 1/2 = -(|t| + 1/2) exactly
 * for t < 0), without the branch on the sign that random data mispredicts
 * half the time (measured: the int8 store spent 60% of an append in the
 * branchy form). */
int kvc_round_clamp127(double t)
{
    if (!(t <= 127.0)) t = 127.0; /* also NaN, which finite inputs never give */
    if (!(t >= -127.0)) t = -127.0;
    return (int)(t + copysign(0.5, t)); /* |t| + 0.5 <= 127.5 */
}

int kvc_round_clamp32767(double t)
{
    if (!(t <= 32767.0)) t = 32767.0; /* also NaN */
    if (!(t >= -32767.0)) t = -32767.0;
    return (int)(t + copysign(0.5, t)); /* |t| + 0.5 <= 32767.5 */
}
