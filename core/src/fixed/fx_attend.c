/* The integer attend (kvc_fixed.h): no floating-point operation, no libm.
 *
 * Scores live in log2 units as Q16.16 int32: t_j = beta * log2(e) * q_scale
 * * k_scale_j * <q, k_j>, the scales as 16-bit mantissas and exponents, the
 * product of the int32 dot and two mantissas in int64 (|.| <= 2^54), then a
 * power-of-two scaling. p_j = 2^(t_j - t_max) in Q16 from a 257-entry table.
 * The values' per-row scales m_j 2^e_j are aligned to the largest exponent
 * E of the rows: with W_j = p_j m_j 2^(e_j - E) / 2^8 (< 2^24, truncated
 * once), acc_c = sum_j W_j v_jc in int64 (|term| < 2^31, n <= 2^20),
 * den = sum_j p_j, and out_c = acc_c / den * 2^(E + 8) built as binary32
 * bits. The scores and the value scales of the first pass wait in the
 * caller's workspace for the second (over the values' elements): each row
 * is read once.
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
static const uint32_t g_exp2_q16[257] = {
    65536, 65359, 65182, 65006, 64830, 64655, 64480, 64306, 64132, 63958, 63785, 63613, 63441, 63269, 63098, 62928,
    62757, 62588, 62419, 62250, 62081, 61914, 61746, 61579, 61413, 61247, 61081, 60916, 60751, 60587, 60423, 60260,
    60097, 59934, 59772, 59611, 59449, 59289, 59128, 58968, 58809, 58650, 58491, 58333, 58176, 58018, 57861, 57705,
    57549, 57393, 57238, 57083, 56929, 56775, 56622, 56468, 56316, 56163, 56012, 55860, 55709, 55558, 55408, 55258,
    55109, 54960, 54811, 54663, 54515, 54368, 54221, 54074, 53928, 53782, 53637, 53492, 53347, 53203, 53059, 52916,
    52773, 52630, 52488, 52346, 52204, 52063, 51922, 51782, 51642, 51502, 51363, 51224, 51085, 50947, 50810, 50672,
    50535, 50399, 50262, 50126, 49991, 49856, 49721, 49586, 49452, 49319, 49185, 49052, 48920, 48787, 48655, 48524,
    48393, 48262, 48131, 48001, 47871, 47742, 47613, 47484, 47356, 47228, 47100, 46973, 46846, 46719, 46593, 46467,
    46341, 46216, 46091, 45966, 45842, 45718, 45594, 45471, 45348, 45225, 45103, 44981, 44859, 44738, 44617, 44497,
    44376, 44256, 44137, 44017, 43898, 43780, 43661, 43543, 43425, 43308, 43191, 43074, 42958, 42841, 42726, 42610,
    42495, 42380, 42265, 42151, 42037, 41923, 41810, 41697, 41584, 41472, 41360, 41248, 41136, 41025, 40914, 40804,
    40693, 40583, 40473, 40364, 40255, 40146, 40037, 39929, 39821, 39714, 39606, 39499, 39392, 39286, 39180, 39074,
    38968, 38863, 38757, 38653, 38548, 38444, 38340, 38236, 38133, 38030, 37927, 37824, 37722, 37620, 37518, 37417,
    37316, 37215, 37114, 37014, 36914, 36814, 36715, 36615, 36516, 36417, 36319, 36221, 36123, 36025, 35928, 35831,
    35734, 35637, 35541, 35445, 35349, 35253, 35158, 35063, 34968, 34874, 34779, 34685, 34591, 34498, 34405, 34312,
    34219, 34126, 34034, 33942, 33850, 33759, 33667, 33576, 33486, 33395, 33305, 33215, 33125, 33035, 32946, 32857,
    32768};

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
    if (n >= 16u)
        p2 *= 65536u;
    else {
        if (n % 16u >= 8u) p2 *= 256u;
        if (n % 8u >= 4u) p2 *= 16u;
        if (n % 4u >= 2u) p2 *= 4u;
        if (n % 2u >= 1u) p2 *= 2u;
    }
    return (v + p2 / 2u) / p2;
}

/* log2(1 + i/256) in Q16, i = 0 .. 256 (rounded) */
static const int32_t g_log2_q16[257] = {
    0,     369,   736,   1102,  1466,  1829,  2190,  2551,  2909,  3267,  3623,  3978,  4331,  4683,  5034,  5384,
    5732,  6079,  6425,  6769,  7112,  7454,  7795,  8134,  8473,  8810,  9146,  9480,  9814,  10146, 10477, 10807,
    11136, 11464, 11791, 12116, 12440, 12764, 13086, 13407, 13727, 14046, 14363, 14680, 14996, 15310, 15624, 15937,
    16248, 16559, 16868, 17177, 17484, 17791, 18096, 18401, 18704, 19007, 19308, 19609, 19909, 20207, 20505, 20802,
    21098, 21393, 21687, 21980, 22272, 22564, 22854, 23144, 23433, 23720, 24007, 24293, 24579, 24863, 25146, 25429,
    25711, 25992, 26272, 26551, 26830, 27108, 27384, 27660, 27936, 28210, 28484, 28757, 29029, 29300, 29571, 29840,
    30109, 30378, 30645, 30912, 31178, 31443, 31707, 31971, 32234, 32496, 32758, 33019, 33279, 33538, 33797, 34055,
    34312, 34569, 34825, 35080, 35334, 35588, 35841, 36094, 36346, 36597, 36847, 37097, 37346, 37595, 37842, 38090,
    38336, 38582, 38827, 39072, 39316, 39559, 39802, 40044, 40286, 40527, 40767, 41006, 41246, 41484, 41722, 41959,
    42196, 42432, 42667, 42902, 43137, 43370, 43603, 43836, 44068, 44300, 44530, 44761, 44990, 45220, 45448, 45676,
    45904, 46131, 46357, 46583, 46809, 47034, 47258, 47482, 47705, 47928, 48150, 48372, 48593, 48813, 49034, 49253,
    49472, 49691, 49909, 50127, 50344, 50560, 50776, 50992, 51207, 51422, 51636, 51850, 52063, 52276, 52488, 52700,
    52911, 53122, 53332, 53542, 53751, 53960, 54169, 54377, 54584, 54791, 54998, 55204, 55410, 55615, 55820, 56025,
    56229, 56432, 56635, 56838, 57040, 57242, 57443, 57644, 57845, 58045, 58245, 58444, 58643, 58841, 59039, 59237,
    59434, 59631, 59827, 60023, 60219, 60414, 60609, 60803, 60997, 61190, 61384, 61576, 61769, 61961, 62152, 62343,
    62534, 62725, 62915, 63104, 63294, 63483, 63671, 63859, 64047, 64234, 64421, 64608, 64794, 64980, 65166, 65351,
    65536};

/* dlt * fr / 2^15, rounded: the interpolated part of one table step. */
/*@ requires dlt <= 65536 && fr <= 32767;
    assigns \nothing;
    ensures \result <= dlt;
*/
static inline uint32_t interpolate(uint32_t dlt, uint32_t fr) { return (dlt * fr + 16384u) / 32768u; }

int32_t kvc_fx_log2(uint32_t x)
{
    /* count the leading zeros by the binary digits of the shift that brings
       the top bit to 2^31 (a step is taken when it cannot overshoot) */
    uint32_t m = x;
    int32_t sh = 0;
    if (m < 65536u) m *= 65536u, sh += 16;
    if (m < 16777216u) m *= 256u, sh += 8;
    if (m < 268435456u) m *= 16u, sh += 4;
    if (m < 1073741824u) m *= 4u, sh += 2;
    if (m < 2147483648u) m *= 2u, sh += 1;
    /* m in [2^31, 2^32): the next 8 bits index the table, the 15 after them interpolate */
    const uint32_t idx = (m - 2147483648u) / 8388608u, fr = m / 256u % 32768u;
    const int32_t lo = g_log2_q16[idx] >= 0 && g_log2_q16[idx] <= 65536 ? g_log2_q16[idx] : 0;
    const int32_t hi = g_log2_q16[idx + 1u] >= lo && g_log2_q16[idx + 1u] <= 65536 ? g_log2_q16[idx + 1u] : lo;
    return (31 - sh) * 65536 + lo + (int32_t)interpolate((uint32_t)(hi - lo), fr);
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
    if (sh > 0) {
        /* mag 2^sh by sh's binary digits: each step is taken when it keeps
           mag <= 2^30, so a value that fits ends with sh == 0 and anything
           left over means the product is past 2^30 (saturation) */
        if (sh >= 16 && mag <= 16384u) mag *= 65536u, sh -= 16;
        if (sh >= 8 && mag <= 4194304u) mag *= 256u, sh -= 8;
        if (sh >= 4 && mag <= 67108864u) mag *= 16u, sh -= 4;
        if (sh >= 2 && mag <= 268435456u) mag *= 4u, sh -= 2;
        if (sh >= 1 && mag <= 536870912u) mag *= 2u, sh -= 1;
        if (sh > 0 && mag != 0u) mag = 1073741825u;
    } else if (sh < 0) {
        mag = sh < -63 ? 0u : halve_by(mag, (uint32_t)(-sh)); /* truncation */
    }
    const int32_t r = mag > 1073741824u ? 1073741824 : (int32_t)mag;
    return prod < 0 ? -r : r;
}

uint32_t kvc_fx_quotient_bits(int64_t num, uint64_t den, int32_t e)
{
    if (num == 0) return 0u;
    const uint32_t sign = num < 0 ? 2147483648u : 0u;
    uint64_t mag = (uint64_t)(num < 0 ? -num : num);
    /* mag into [2^61, 2^62), den into [2^36, 2^37) (when it is larger), the
       quotient then into [2^23, 2^24): each normalisation takes the binary
       digits of its shift, largest first (a step is taken when it cannot
       overshoot), so it costs a few instructions instead of a loop of up to
       61 steps, with the same result as shifting one bit at a time */
    int32_t up = 0, down = 0;
    if (mag < 1073741824u) mag *= 4294967296u, up += 32;     /* < 2^30 */
    if (mag < 70368744177664u) mag *= 65536u, up += 16;      /* < 2^46 */
    if (mag < 18014398509481984u) mag *= 256u, up += 8;      /* < 2^54 */
    if (mag < 288230376151711744u) mag *= 16u, up += 4;      /* < 2^58 */
    if (mag < 1152921504606846976u) mag *= 4u, up += 2;      /* < 2^60 */
    if (mag < 2305843009213693952u) mag *= 2u, up += 1;      /* < 2^61 */
    if (den >= 4503599627370496u) den /= 65536u, down += 16; /* >= 2^52 */
    if (den >= 17592186044416u) den /= 256u, down += 8;      /* >= 2^44 */
    if (den >= 1099511627776u) den /= 16u, down += 4;        /* >= 2^40 */
    if (den >= 274877906944u) den /= 4u, down += 2;          /* >= 2^38 */
    if (den >= 137438953472u) den /= 2u, down += 1;          /* >= 2^37 */
    uint64_t quo = mag / den;
    if (quo >= 36028797018963968u) quo /= 4294967296u, down += 32; /* >= 2^55 */
    if (quo >= 549755813888u) quo /= 65536u, down += 16;           /* >= 2^39 */
    if (quo >= 2147483648u) quo /= 256u, down += 8;                /* >= 2^31 */
    if (quo >= 134217728u) quo /= 16u, down += 4;                  /* >= 2^27 */
    if (quo >= 33554432u) quo /= 4u, down += 2;                    /* >= 2^25 */
    if (quo >= 16777216u) quo /= 2u, down += 1;                    /* >= 2^24 */
    if (quo < 8388608u || quo >= 16777216u) return sign;           /* never: mag >= 2^61, den < 2^37 */
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
    const uint32_t b0 = (uint32_t)(row[0] + 256) % 256u; /* a byte's bits: one UXTB */
    const uint32_t b1 = (uint32_t)(row[1] + 256) % 256u;
    const uint32_t b2 = (uint32_t)(row[2] + 256) % 256u;
    const uint32_t b3 = (uint32_t)(row[3] + 256) % 256u;
    return b0 + b1 * 256u + b2 * 65536u + b3 * 16777216u;
}

/* One value term W x: |W x| < 2^31 (W < 2^24, x an int8). */
/*@ requires 0 <= w <= 16776960 && -128 <= x <= 127;
    assigns \nothing;
*/
static inline int32_t weighted(int32_t w, int32_t x) { return w * x; }

/* Row j's score (Q16.16 log2 units) from its key row. */
/*@ requires 1 <= d <= 256;
    requires \valid_read(kr + (0 .. 3 + d)) && \valid_read(q + (0 .. d - 1));
    requires 0 <= cm <= 65535 && -500 <= ce <= 500;
    assigns \nothing;
    ensures -1073741824 <= \result <= 1073741824;
*/
static inline int32_t row_score(const int8_t *kr, const int8_t *q, size_t d, int32_t cm, int32_t ce)
{
    int32_t km, ke;
    kvc_fx_decode_scale(row_scale_bits(kr), &km, &ke);
    return kvc_fx_score(kvc_fx_dot_i8(q, kr + 4, d), cm, km, ce + ke);
}

int kvc_fx_attend_rows(const int8_t *k, size_t kstride, const int8_t *v, size_t vstride, size_t n,
                       const uint32_t *weight_bits, size_t d, size_t dv, const int8_t *q, uint32_t q_scale_bits,
                       uint32_t beta_bits, int32_t *work, uint32_t *out_bits)
{
    /* C = beta * log2(e) * q_scale as cm 2^ce: log2(e) = 47274.7 / 2^15 */
    int32_t bm, be, qm, qe;
    kvc_fx_decode_scale(beta_bits, &bm, &be);
    kvc_fx_decode_scale(q_scale_bits, &qm, &qe);
    const int32_t cm = (int32_t)((uint64_t)(uint32_t)bm * (uint32_t)qm * 47275u / 4294967296u); /* < 2^16 */
    const int32_t ce = be + qe - 15 + 32;

    /* pass 1 (keys, and the values' scales): every score and value scale
       into the caller's workspace, the largest score, and the largest value
       exponent */
    int32_t t_max = -1090519040, e_max = -150; /* below any weighted score: -(2^30 + 2^24) */
    /*@ loop invariant 0 <= j <= n;
        loop invariant -1090519040 <= t_max <= 1090519040;
        loop invariant -150 <= e_max <= 120;
        loop assigns j, t_max, e_max, work[0 .. 2 * n - 1];
        loop variant n - j;
    */
    for (size_t j = 0; j < n; j++) {
        /*@ ghost fx_mul_mono(j + 1, n, kstride); */
        /*@ ghost fx_mul_mono(j + 1, n, vstride); */
        int32_t t = row_score(k + j * kstride, q, d, cm, ce);
        if (weight_bits != 0) { /* + log2 w_j, |.| <= 136 2^16; a zero or invalid weight drops the row */
            int32_t wm, we;
            kvc_fx_decode_scale(weight_bits[j], &wm, &we);
            t = wm == 0 ? INT32_MIN : t + we * 65536 + kvc_fx_log2((uint32_t)wm);
        }
        if (t != INT32_MIN && t > t_max) t_max = t;
        int32_t vm, ve;
        kvc_fx_decode_scale(row_scale_bits(v + j * vstride), &vm, &ve);
        if (vm != 0 && ve > e_max) e_max = ve;
        work[2u * j] = t;                            /* INT32_MIN: 2^(t - t_max) is 0 below */
        work[2u * j + 1u] = (ve + 150) * 65536 + vm; /* the value scale, packed: < 2^25 */
    }

    /* pass 2 (values): p_j = 2^(t_j - t_max) in Q16, the denominator, and the
       value sums; p_j, the row's scale mantissa and its alignment to e_max
       fold into one weight W_j = p_j m_j / 2^(8 + e_max - e_j) < 2^24,
       truncated once per row (8 guard bits), so each element costs one
       multiply-add: |W_j x| < 2^31 */
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
            -2147483648 * (integer)j <= acc[i] <= 2147483648 * (integer)j;
        loop assigns j, den, acc[0 .. 255];
        loop variant n - j;
    */
    for (size_t j = 0; j < n; j++) {
        /*@ ghost fx_mul_mono(j + 1, n, vstride); */
        const int8_t *vr = v + j * vstride;
        /* the workspace is read back defensively: a score or a packed scale
           out of range (only if the caller changed it) is clamped */
        const int64_t diff = (int64_t)work[2u * j] - (int64_t)t_max; /* <= 0 */
        const int32_t u = diff >= 0 ? 0 : diff < -2147483647 ? -2147483647 : (int32_t)diff;
        const uint32_t p = kvc_fx_exp2_neg(u);
        den += p;
        const int32_t packed = work[2u * j + 1u] < 0 ? 0 : work[2u * j + 1u];
        const int32_t vm = packed % 65536, ve = packed / 65536 - 150;
        const uint32_t align = vm == 0 ? 64u : ve >= e_max ? 0u : (uint32_t)(e_max - ve);
        const uint64_t pm = (uint64_t)p * (uint32_t)vm / 256u; /* < 2^16 2^16 / 2^8 */
        //@ assert pm <= 16776960;
        const int32_t w = align > 63u ? 0 : (int32_t)halve_by(pm, align);
        //@ assert 0 <= w <= 16776960;
        /*@ loop invariant 0 <= c <= dv;
            loop invariant \forall integer i; 0 <= i < c ==>
                -2147483648 * ((integer)j + 1) <= acc[i] <= 2147483648 * ((integer)j + 1);
            loop invariant \forall integer i; c <= i < dv ==>
                -2147483648 * (integer)j <= acc[i] <= 2147483648 * (integer)j;
            loop assigns c, acc[0 .. 255];
            loop variant dv - c;
        */
        for (size_t c = 0; c < dv; c++) acc[c] += (int64_t)weighted(w, vr[4 + c]);
    }
    /*@ loop invariant 0 <= c <= dv;
        loop assigns c, out_bits[0 .. dv - 1];
        loop variant dv - c;
    */
    for (size_t c = 0; c < dv; c++) out_bits[c] = den == 0u ? 0u : kvc_fx_quotient_bits(acc[c], den, e_max + 8);
    return 0;
}
