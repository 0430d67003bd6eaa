/* The integer attend (kvc_fixed.h): no floating-point operation, no libm.
 *
 * Scores live in log2 units as Q16.16 int32: t_j = beta * log2(e) * q_scale
 * * k_scale_j * <q, k_j>, the scales as 16-bit mantissas and exponents, the
 * product of the int32 dot and two mantissas in int64 (|.| <= 2^54), then a
 * power-of-two scaling. p_j = 2^(t_j - t_max) in Q16 from a 257-entry table.
 * The values' per-row scales m_j 2^e_j are aligned to the largest exponent
 * E of the rows: with w_j = p_j m_j / 2^16 (16 bits), acc_c = sum_j w_j v_jc
 * 2^(e_j - E) in int64 (|term| < 2^24, n <= 2^20), den = sum_j p_j, and
 * out_c = acc_c / den * 2^(E + 16) built as binary32 bits.
 *
 * Bit fields and power-of-two scalings are written as division, remainder
 * and multiplication by constants (halve_by: a shift by a variable amount as
 * its binary digits): compilers emit shifts and masks, and WP's provers
 * reason about / and % (they treat >> & | as opaque functions). */
#include "kvc/kvc_fixed.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kvc_fixed reads the binary32 row scales as little-endian bytes"
#endif

/*@ ghost
  /@ requires a <= b;
     assigns \nothing;
     ensures a * c <= b * c;
  @/
  static void fx_mul_mono(size_t a, size_t b, size_t c) {}
*/

/* 2^(-i/256) in Q16, i = 0 .. 256 (rounded) */
static const uint32_t g_exp2_q16[257] = {65536, 65359, 65182, 65006, 64830, 64655, 64480, 64306, 64132, 63958, 63785, 63613, 63441, 63269, 63098, 62928, 62757, 62588, 62419, 62250, 62081, 61914, 61746, 61579, 61413, 61247, 61081, 60916, 60751, 60587, 60423, 60260, 60097, 59934, 59772, 59611, 59449, 59289, 59128, 58968, 58809, 58650, 58491, 58333, 58176, 58018, 57861, 57705, 57549, 57393, 57238, 57083, 56929, 56775, 56622, 56468, 56316, 56163, 56012, 55860, 55709, 55558, 55408, 55258, 55109, 54960, 54811, 54663, 54515, 54368, 54221, 54074, 53928, 53782, 53637, 53492, 53347, 53203, 53059, 52916, 52773, 52630, 52488, 52346, 52204, 52063, 51922, 51782, 51642, 51502, 51363, 51224, 51085, 50947, 50810, 50672, 50535, 50399, 50262, 50126, 49991, 49856, 49721, 49586, 49452, 49319, 49185, 49052, 48920, 48787, 48655, 48524, 48393, 48262, 48131, 48001, 47871, 47742, 47613, 47484, 47356, 47228, 47100, 46973, 46846, 46719, 46593, 46467, 46341, 46216, 46091, 45966, 45842, 45718, 45594, 45471, 45348, 45225, 45103, 44981, 44859, 44738, 44617, 44497, 44376, 44256, 44137, 44017, 43898, 43780, 43661, 43543, 43425, 43308, 43191, 43074, 42958, 42841, 42726, 42610, 42495, 42380, 42265, 42151, 42037, 41923, 41810, 41697, 41584, 41472, 41360, 41248, 41136, 41025, 40914, 40804, 40693, 40583, 40473, 40364, 40255, 40146, 40037, 39929, 39821, 39714, 39606, 39499, 39392, 39286, 39180, 39074, 38968, 38863, 38757, 38653, 38548, 38444, 38340, 38236, 38133, 38030, 37927, 37824, 37722, 37620, 37518, 37417, 37316, 37215, 37114, 37014, 36914, 36814, 36715, 36615, 36516, 36417, 36319, 36221, 36123, 36025, 35928, 35831, 35734, 35637, 35541, 35445, 35349, 35253, 35158, 35063, 34968, 34874, 34779, 34685, 34591, 34498, 34405, 34312, 34219, 34126, 34034, 33942, 33850, 33759, 33667, 33576, 33486, 33395, 33305, 33215, 33125, 33035, 32946, 32857, 32768};

/* x / 2^s, truncated, for s <= 63: s's binary digits as divisions by
 * constants (each a shift after compilation; a few instructions instead of s
 * halvings). */
/*@ requires s <= 63;
    assigns \nothing;
    ensures 0 <= \result <= x;
*/
static uint64_t halve_by(uint64_t x, uint32_t s)
{
    uint64_t r = x;
    uint32_t t = s;
    if (t >= 32u) r /= 4294967296u, t -= 32u;
    if (t >= 16u) r /= 65536u, t -= 16u;
    if (t >= 8u) r /= 256u, t -= 8u;
    if (t >= 4u) r /= 16u, t -= 4u;
    if (t >= 2u) r /= 4u, t -= 2u;
    if (t >= 1u) r /= 2u;
    return r;
}

void kvc_fx_decode_scale(uint32_t bits, int32_t *mant, int32_t *exp)
{
    const uint32_t biased = bits / 8388608u % 256u;
    if (bits >= 2147483648u || biased == 0u || biased == 255u) {
        *mant = 0, *exp = 0;
        return;
    }
    /* value = (2^23 + fraction) 2^(biased - 150) = ((2^23 + fraction) / 2^8) 2^(biased - 142), truncated */
    *mant = (int32_t)((bits % 8388608u + 8388608u) / 256u);
    *exp = (int32_t)biased - 142;
}

uint32_t kvc_fx_exp2_neg(int32_t u)
{
    if (u <= -(17 * 65536)) return 0u;
    const uint32_t a = (uint32_t)(-u); /* 0 .. 17 * 65536 - 1 */
    const uint32_t n = a / 65536u, f = a % 65536u;
    const uint32_t idx = f / 256u, fr = f % 256u;
    /* the table falls from 65536 to 32768; the clamps state it locally */
    const uint32_t hi = g_exp2_q16[idx] <= 65536u ? g_exp2_q16[idx] : 65536u;
    const uint32_t lo = g_exp2_q16[idx + 1u] <= hi ? g_exp2_q16[idx + 1u] : hi;
    uint32_t v = hi - ((hi - lo) * fr + 128u) / 256u;
    /* v / 2^n, rounded half up (n <= 16) */
    uint32_t p2 = 1u;
    if (n >= 16u) p2 *= 65536u;
    else {
        if (n % 16u >= 8u) p2 *= 256u;
        if (n % 8u >= 4u) p2 *= 16u;
        if (n % 4u >= 2u) p2 *= 4u;
        if (n % 2u >= 1u) p2 *= 2u;
    }
    return (v + p2 / 2u) / p2;
}

int32_t kvc_fx_dot_i8(const int8_t *a, const int8_t *b, size_t d)
{
    int32_t s = 0;
    /*@ loop invariant 0 <= i <= d;
        loop invariant -16384 * (integer)i <= s <= 16384 * (integer)i;
        loop assigns i, s;
        loop variant d - i;
    */
    for (size_t i = 0; i < d; i++) s += (int32_t)a[i] * (int32_t)b[i];
    return s;
}

int32_t kvc_fx_score(int32_t dot, int32_t cm, int32_t km, int32_t e)
{
    const int64_t prod = (int64_t)dot * (int64_t)cm * (int64_t)km; /* |.| <= 2^22 * 2^32 */
    uint64_t mag = (uint64_t)(prod < 0 ? -prod : prod);
    int32_t sh = e + 16; /* to Q16.16 */
    /*@ loop invariant -984 <= sh <= 1016;
        loop invariant mag <= 18014398509481984;
        loop assigns sh, mag;
        loop variant sh;
    */
    while (sh > 0 && mag <= 1073741824u) { /* doubling, until past 2^30 (saturation) */
        mag *= 2u;
        sh--;
    }
    if (sh < 0) mag = sh < -63 ? 0u : halve_by(mag, (uint32_t)(-sh)); /* truncation */
    const int32_t r = mag > 1073741824u ? 1073741824 : (int32_t)mag;
    return prod < 0 ? -r : r;
}

uint32_t kvc_fx_quotient_bits(int64_t num, uint64_t den, int32_t e)
{
    if (num == 0) return 0u;
    const uint32_t sign = num < 0 ? 2147483648u : 0u;
    uint64_t mag = (uint64_t)(num < 0 ? -num : num);
    /* mag into [2^61, 2^62], den into [2^36, 2^37): the quotient has 24 .. 26
       bits. Each loop counts its steps; the caps (62, 63, 63, 24) are never
       reached (mag >= 1, den <= 2^62, quo <= 2^26) but state the bounds. */
    int32_t up = 0, down = 0;
    /*@ loop invariant 1 <= mag <= 4611686018427387904;
        loop invariant 0 <= up <= 62;
        loop assigns mag, up;
        loop variant 62 - up;
    */
    while (mag < 2305843009213693952u && up < 62) {
        mag *= 2u;
        up++;
    }
    /*@ loop invariant 1 <= den <= 4611686018427387904;
        loop invariant 0 <= down <= 63;
        loop assigns den, down;
        loop variant 63 - down;
    */
    while (den >= 137438953472u && down < 63) {
        den /= 2u;
        down++;
    }
    uint64_t quo = mag / den;
    /*@ loop invariant 0 <= quo <= 4611686018427387904;
        loop invariant 0 <= down <= 126;
        loop assigns quo, down;
        loop variant 126 - down;
    */
    while (quo >= 16777216u && down < 126) {
        quo /= 2u;
        down++;
    }
    /*@ loop invariant 0 <= quo <= 4611686018427387904;
        loop invariant 0 <= up <= 86;
        loop assigns quo, up;
        loop variant 86 - up;
    */
    while (quo != 0u && quo < 8388608u && up < 86) {
        quo *= 2u;
        up++;
    }
    if (quo < 8388608u || quo >= 16777216u) return sign; /* quo == 0 only (den <= 2^62, mag >= 2^61) */
    /* value = quo 2^(e - up + down), quo in [2^23, 2^24): binary32 exponent field + 150 */
    const int32_t biased = e - up + down + 150;
    if (biased <= 0) return sign;                 /* below the normal range: signed zero */
    if (biased >= 255) return sign + 2139095039u; /* the largest finite, 0x7F7FFFFF */
    return sign + (uint32_t)biased * 8388608u + ((uint32_t)quo - 8388608u);
}

/* A row's scale bits: 4 little-endian bytes read as int8 (the type the row is read with). */
/*@ requires \valid_read(row + (0 .. 3));
    assigns \nothing;
*/
static uint32_t row_scale_bits(const int8_t *row)
{
    const uint32_t b0 = (uint32_t)(row[0] < 0 ? row[0] + 256 : row[0]);
    const uint32_t b1 = (uint32_t)(row[1] < 0 ? row[1] + 256 : row[1]);
    const uint32_t b2 = (uint32_t)(row[2] < 0 ? row[2] + 256 : row[2]);
    const uint32_t b3 = (uint32_t)(row[3] < 0 ? row[3] + 256 : row[3]);
    return b0 + b1 * 256u + b2 * 65536u + b3 * 16777216u;
}

/* (w x) / 2^shift, truncated toward zero: |w x| < 2^24 */
/*@ requires 0 <= w <= 65536 && -128 <= x <= 127;
    assigns \nothing;
    ensures -8388608 <= \result <= 8388608;
*/
static int32_t value_term(uint32_t w, int32_t x, uint32_t shift)
{
    const int32_t t = (int32_t)w * x;
    const uint32_t mag = (uint32_t)(t < 0 ? -t : t);
    const uint32_t r = shift >= 24u ? 0u : (uint32_t)halve_by(mag, shift);
    return t < 0 ? -(int32_t)r : (int32_t)r;
}

/* Row j's score (Q16.16 log2 units) from its key row, and its value row's
 * scale as mantissa and exponent: what both passes need of a row. */
/*@ requires 1 <= d <= 256;
    requires \valid_read(kr + (0 .. 3 + d)) && \valid_read(vr + (0 .. 3)) && \valid_read(q + (0 .. d - 1));
    requires 0 <= cm <= 65535 && -500 <= ce <= 500;
    requires \valid(vm) && \valid(ve) && \separated(vm, ve);
    assigns *vm, *ve;
    ensures -1073741824 <= \result <= 1073741824;
    ensures 0 <= *vm <= 65535 && -150 <= *ve <= 120;
*/
static inline int32_t row_score(const int8_t *kr, const int8_t *vr, const int8_t *q, size_t d, int32_t cm, int32_t ce,
                         int32_t *vm, int32_t *ve)
{
    int32_t km, ke;
    kvc_fx_decode_scale(row_scale_bits(kr), &km, &ke);
    kvc_fx_decode_scale(row_scale_bits(vr), vm, ve);
    return kvc_fx_score(kvc_fx_dot_i8(q, kr + 4, d), cm, km, ce + ke);
}

int kvc_fx_attend_rows(const int8_t *k, size_t kstride, const int8_t *v, size_t vstride, size_t n, size_t d,
                       size_t dv, const int8_t *q, uint32_t q_scale_bits, uint32_t beta_bits, uint32_t *out_bits)
{
    /* C = beta * log2(e) * q_scale as cm 2^ce: log2(e) = 47274.7 / 2^15 */
    int32_t bm, be, qm, qe;
    kvc_fx_decode_scale(beta_bits, &bm, &be);
    kvc_fx_decode_scale(q_scale_bits, &qm, &qe);
    const int32_t cm = (int32_t)((uint64_t)(uint32_t)bm * (uint32_t)qm * 47275u / 4294967296u); /* < 2^16 */
    const int32_t ce = be + qe - 15 + 32;

    /* pass 1: the largest score and the largest value exponent */
    int32_t t_max = -1073741824, e_max = -150;
    /*@ loop invariant 0 <= j <= n;
        loop invariant -1073741824 <= t_max <= 1073741824;
        loop invariant -150 <= e_max <= 120;
        loop assigns j, t_max, e_max;
        loop variant n - j;
    */
    for (size_t j = 0; j < n; j++) {
        /*@ ghost fx_mul_mono(j + 1, n, kstride); */
        /*@ ghost fx_mul_mono(j + 1, n, vstride); */
        const int8_t *kr = k + j * kstride, *vr = v + j * vstride;
        int32_t vm, ve;
        const int32_t t = row_score(kr, vr, q, d, cm, ce, &vm, &ve);
        if (t > t_max) t_max = t;
        if (vm != 0 && ve > e_max) e_max = ve;
    }

    /* pass 2: probabilities, denominator, aligned value sums */
    int64_t acc[256];
    /*@ loop invariant 0 <= c <= dv;
        loop invariant \forall integer i; 0 <= i < c ==> acc[i] == 0;
        loop assigns c, acc[0 .. 255];
        loop variant dv - c;
    */
    for (size_t c = 0; c < dv; c++) acc[c] = 0;
    uint64_t den = 0;
    /*@ loop invariant 0 <= j <= n;
        loop invariant 0 <= den <= 65536 * (integer)j;
        loop invariant \forall integer i; 0 <= i < dv ==>
            -8388608 * (integer)j <= acc[i] <= 8388608 * (integer)j;
        loop assigns j, den, acc[0 .. 255];
        loop variant n - j;
    */
    for (size_t j = 0; j < n; j++) {
        /*@ ghost fx_mul_mono(j + 1, n, kstride); */
        /*@ ghost fx_mul_mono(j + 1, n, vstride); */
        const int8_t *kr = k + j * kstride, *vr = v + j * vstride;
        int32_t vm, ve;
        const int32_t t = row_score(kr, vr, q, d, cm, ce, &vm, &ve);
        const int64_t diff = (int64_t)t - (int64_t)t_max; /* <= 0: t_max is the largest score */
        const int32_t u = diff >= 0 ? 0 : diff < -2147483647 ? -2147483647 : (int32_t)diff;
        const uint32_t p = kvc_fx_exp2_neg(u);
        den += p;
        const uint32_t shift = vm == 0 ? 63u : ve >= e_max ? 0u : (uint32_t)(e_max - ve);
        const uint32_t w = (uint32_t)((uint64_t)p * (uint32_t)vm / 65536u); /* p m_j / 2^16 <= 2^16 */
        /*@ loop invariant 0 <= c <= dv;
            loop invariant \forall integer i; 0 <= i < c ==>
                -8388608 * ((integer)j + 1) <= acc[i] <= 8388608 * ((integer)j + 1);
            loop invariant \forall integer i; c <= i < dv ==>
                -8388608 * (integer)j <= acc[i] <= 8388608 * (integer)j;
            loop assigns c, acc[0 .. 255];
            loop variant dv - c;
        */
        for (size_t c = 0; c < dv; c++) acc[c] += value_term(w, vr[4 + c], shift);
    }
    /*@ loop invariant 0 <= c <= dv;
        loop assigns c, out_bits[0 .. dv - 1];
        loop variant dv - c;
    */
    for (size_t c = 0; c < dv; c++) out_bits[c] = den == 0u ? 0u : kvc_fx_quotient_bits(acc[c], den, e_max + 16);
    return 0;
}
