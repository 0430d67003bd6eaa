/* P.V over int4 value rows on the integer units (AVX2; the AVX-512 file
 * includes it too, being built with -mavx2).
 *
 * An int4 value row holds, per group g of 32 channels, a scale sc and a
 * minimum mn (halves) and codes 0..15, the value mn + sc code. For one query
 * and one block of the pass (<= 32 tokens t, weights p_t in [0, 1]):
 *   sum_t p_t v_tc = sum_t w_tg code_tc + sum_t p_t mn_tg,   w_tg = p_t sc_tg.
 * The first sum runs on integers: per block and group the weights are
 * quantised to 8 bits, s_g = max_t w_tg / 255 and w8_tg = round(w_tg / s_g),
 * so that sum_t w8_tg code_tc is exact (vpmaddubsw of weight bytes and code
 * bytes, vpmaddwd by ones: 4 tokens per 32-bit lane, <= 4 * 255 * 15), then
 * once per block acc_c += s_g I_c + sum_t p_t mn_tg in f32. The value rows'
 * codes are never converted to floats.
 *
 * The added error (derived in tests/kvc_attend_bound.h, which holds tables
 * with KVC_CAP_Q8_PV_INT4 to it): |w_tg - s_g w8_tg| <= (max_t w_tg / 510)
 * (1 + 2^-13) (the roundings of 255 / max, of the product and of s_g: 1530 u),
 * so channel c of a block's numerator moves by at most
 * (max_t w_tg / 510)(1 + 2^-13) sum_t code_tc, plus a few f32 roundings of
 * the block's terms.
 *
 * Layout: for each pair of groups (64 channels, 32 bytes of nibbles per
 * row) the low nibbles are the even channels and the high nibbles the odd
 * ones, group p in the low 128-bit lane, p + 1 in the high one. Four rows'
 * bytes are interleaved (unpack by 8 then 16 bits), so that 32-bit lane j of
 * transposed vector k holds channel 2 (4k + j) (+ 1 for the odd ones; + 32
 * in the high lane) of the four tokens: the weights of the quad are then
 * four bytes broadcast per lane. */
#ifndef KVC_I4_PV_AVX2_H
#define KVC_I4_PV_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* The quads of a block's transposed codes for one pair of groups: 8 quads
 * of 4 tokens x (4 even + 4 odd vectors). */
typedef struct i4_pv_block {
    __m256i codes[8][8];
    float sc[KVC_MAX_HEAD_DIM / 32][32]; /* per group, per token */
    float mn[KVC_MAX_HEAD_DIM / 32][32];
} i4_pv_block;

/* 8 interleaved vectors (4 even channels' quads, then 4 odd) of rows r0..r3,
 * each the 32 nibble bytes of one pair of groups. */
static inline __attribute__((always_inline)) void i4_pv_quad(const __m256i b0, const __m256i b1, const __m256i b2,
                                                             const __m256i b3, __m256i out[8])
{
    const __m256i m15 = _mm256_set1_epi8(15);
    for (int half = 0; half < 2; half++) {
        const __m256i l0 = half ? _mm256_and_si256(_mm256_srli_epi16(b0, 4), m15) : _mm256_and_si256(b0, m15);
        const __m256i l1 = half ? _mm256_and_si256(_mm256_srli_epi16(b1, 4), m15) : _mm256_and_si256(b1, m15);
        const __m256i l2 = half ? _mm256_and_si256(_mm256_srli_epi16(b2, 4), m15) : _mm256_and_si256(b2, m15);
        const __m256i l3 = half ? _mm256_and_si256(_mm256_srli_epi16(b3, 4), m15) : _mm256_and_si256(b3, m15);
        const __m256i a01 = _mm256_unpacklo_epi8(l0, l1), c01 = _mm256_unpackhi_epi8(l0, l1);
        const __m256i a23 = _mm256_unpacklo_epi8(l2, l3), c23 = _mm256_unpackhi_epi8(l2, l3);
        out[4 * half + 0] = _mm256_unpacklo_epi16(a01, a23);
        out[4 * half + 1] = _mm256_unpackhi_epi16(a01, a23);
        out[4 * half + 2] = _mm256_unpacklo_epi16(c01, c23);
        out[4 * half + 3] = _mm256_unpackhi_epi16(c01, c23);
    }
}

/* acc[x][0..dv) += sum_t p[x][t] v_t over the nb (<= 32) int4 value rows of
 * V (stride vs; dv a multiple of 64) for the live queries x < nq. */
static inline __attribute__((always_inline)) void v_i4_pv(const unsigned char *V, size_t vs, size_t nb, size_t dv,
                                                          const float p[3][32], const int live[3], size_t nq,
                                                          float *const acc[3])
{
    const size_t ng = dv / 32u;
    const unsigned char *nib = V + 4u * ng;
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi16(1);
    i4_pv_block blk;
    /* every row's scales and minima as floats, per group: each row's (sc, mn)
       halves copied as one 32-bit word, then 8 tokens at a time split into
       the two halves (mask, shift, pack) and converted */
    uint32_t hdr[KVC_MAX_HEAD_DIM / 32][32];
    for (size_t t = 0; t < 32u; t++)
        for (size_t g = 0; g < ng; g++)
            if (t < nb)
                memcpy(&hdr[g][t], V + t * vs + 4u * g, 4);
            else
                hdr[g][t] = 0u;
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    for (size_t g = 0; g < ng; g++)
        for (size_t u = 0; u < 32u; u += 16u) {
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)(const void *)(hdr[g] + u));
            const __m256i h1 = _mm256_loadu_si256((const __m256i *)(const void *)(hdr[g] + u + 8u));
            /* the packs work per 128-bit lane: 0xD8 puts the 16 halves back in token order */
            const __m256i sc = _mm256_permute4x64_epi64(
                _mm256_packus_epi32(_mm256_and_si256(h0, lo16), _mm256_and_si256(h1, lo16)), 0xD8);
            const __m256i mn = _mm256_permute4x64_epi64(
                _mm256_packus_epi32(_mm256_srli_epi32(h0, 16), _mm256_srli_epi32(h1, 16)), 0xD8);
            _mm256_storeu_ps(blk.sc[g] + u, _mm256_cvtph_ps(_mm256_castsi256_si128(sc)));
            _mm256_storeu_ps(blk.sc[g] + u + 8u, _mm256_cvtph_ps(_mm256_extracti128_si256(sc, 1)));
            _mm256_storeu_ps(blk.mn[g] + u, _mm256_cvtph_ps(_mm256_castsi256_si128(mn)));
            _mm256_storeu_ps(blk.mn[g] + u + 8u, _mm256_cvtph_ps(_mm256_extracti128_si256(mn, 1)));
        }
    for (size_t pp = 0; pp < ng; pp += 2) {
        /* the pair's codes, transposed into quads once for every query */
        for (size_t k = 0; k < 8u; k++) {
            __m256i b[4];
            for (size_t i = 0; i < 4u; i++) {
                const size_t t = 4u * k + i;
                b[i] = t < nb ? _mm256_loadu_si256((const __m256i *)(const void *)(nib + t * vs + 16u * pp)) : zero;
            }
            i4_pv_quad(b[0], b[1], b[2], b[3], blk.codes[k]);
        }
        for (size_t x = 0; x < nq; x++) {
            if (!live[x]) continue;
            /* the weights of the two groups, quantised to bytes */
            uint32_t w8[2][8];
            float sg[2], mnsum[2];
            for (size_t h = 0; h < 2u; h++) {
                const size_t g = pp + h;
                __m256 w[4], mx = _mm256_setzero_ps(), ms = _mm256_setzero_ps();
                for (size_t u = 0; u < 4u; u++) {
                    const __m256 pv = _mm256_loadu_ps(p[x] + 8u * u);
                    w[u] = _mm256_mul_ps(pv, _mm256_loadu_ps(blk.sc[g] + 8u * u));
                    mx = _mm256_max_ps(mx, w[u]);
                    ms = _mm256_fmadd_ps(pv, _mm256_loadu_ps(blk.mn[g] + 8u * u), ms);
                }
                __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
                m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
                const float m = _mm_cvtss_f32(m4);
                __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(ms), _mm256_extractf128_ps(ms, 1));
                s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
                s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
                mnsum[h] = _mm_cvtss_f32(s4);
                sg[h] = m / 255.0f;
                const __m256 inv = _mm256_set1_ps(m > 0.0f ? 255.0f / m : 0.0f);
                /* round to nearest, then bytes in token order (the packs work per 128-bit lane) */
                __m256i i32[4];
                for (size_t u = 0; u < 4u; u++) i32[u] = _mm256_cvtps_epi32(_mm256_mul_ps(w[u], inv));
                const __m256i i16a = _mm256_packus_epi32(i32[0], i32[1]), i16b = _mm256_packus_epi32(i32[2], i32[3]);
                __m256i i8 = _mm256_packus_epi16(i16a, i16b);
                i8 = _mm256_permutevar8x32_epi32(i8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256((__m256i *)(void *)w8[h], i8);
            }
            __m256i ie[4], io[4];
            for (size_t i = 0; i < 4u; i++) ie[i] = zero, io[i] = zero;
            for (size_t k = 0; k < 8u; k++) {
                const __m256i wk = _mm256_setr_epi32((int)w8[0][k], (int)w8[0][k], (int)w8[0][k], (int)w8[0][k],
                                                     (int)w8[1][k], (int)w8[1][k], (int)w8[1][k], (int)w8[1][k]);
                const __m256i *cq = blk.codes[k];
                for (size_t i = 0; i < 4u; i++) {
                    ie[i] = _mm256_add_epi32(ie[i], _mm256_madd_epi16(_mm256_maddubs_epi16(wk, cq[i]), ones));
                    io[i] = _mm256_add_epi32(io[i], _mm256_madd_epi16(_mm256_maddubs_epi16(wk, cq[4 + i]), ones));
                }
            }
            /* back to channel order: lanes of ie[k] are even channels 8k + 2j (+ 32 high), io's the odd */
            float *a = acc[x] + 32u * pp;
            const __m256 s_lo = _mm256_set1_ps(sg[0]), s_hi = _mm256_set1_ps(sg[1]);
            const __m256 n_lo = _mm256_set1_ps(mnsum[0]), n_hi = _mm256_set1_ps(mnsum[1]);
            for (size_t k = 0; k < 4u; k++) {
                const __m256 e = _mm256_cvtepi32_ps(ie[k]), o = _mm256_cvtepi32_ps(io[k]);
                const __m256 lo = _mm256_unpacklo_ps(e, o), hi = _mm256_unpackhi_ps(e, o);
                const __m256 g0 = _mm256_permute2f128_ps(lo, hi, 0x20), g1 = _mm256_permute2f128_ps(lo, hi, 0x31);
                float *a0 = a + 8u * k, *a1 = a + 32u + 8u * k;
                _mm256_storeu_ps(a0, _mm256_add_ps(_mm256_loadu_ps(a0), _mm256_fmadd_ps(s_lo, g0, n_lo)));
                _mm256_storeu_ps(a1, _mm256_add_ps(_mm256_loadu_ps(a1), _mm256_fmadd_ps(s_hi, g1, n_hi)));
            }
        }
    }
}
#define v_i4_pv v_i4_pv

#endif /* KVC_I4_PV_AVX2_H */
