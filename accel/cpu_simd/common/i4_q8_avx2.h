/* int4 rows scored on the integer units (AVX2; the AVX-512 file includes it
 * too, being built with -mavx2): the query quantised to int8 per group of 32
 * channels, K.q as sum_g (sc_g sq_g I_g + mn_g S_g) with I_g = sum of code x
 * q8 over the group, exact in integers (|I_g| <= 32 * 15 * 127), S_g the
 * group's float sum of q; each group's mn_g S_g / 4 joins the four lanes of
 * its partial sums, so that a row's score is one horizontal sum. The ISA file includes this before
 * ../common/attend_simd.h, which then uses it for int4 keys when d is a
 * multiple of 64 (two groups fill one 256-bit vector of codes).
 *
 * Layout of a prepared query (Q8_BYTES(d), written by q8_prepare in
 * attend_simd.h): for each pair of groups p, p+1 (64 channels), 32 bytes of
 * the even channels' q8 (group p's 16 then group p+1's, as the codes' low
 * nibbles lie in a row) and 32 bytes of the odd channels'; then d / 32
 * floats sq_g and d / 32 floats S_g.
 *
 * The error against the scores of the dequantised rows (derived in
 * tests/kvc_attend_bound.h, which holds the tables with KVC_CAP_Q8_INT4 to
 * it): the quantised query moves each score by at most
 * sum_g (sq_g / 2) sum_{c in g} (k_c - mn_g), a few units of 2^-24 more for
 * the f32 products and sums. */
#ifndef KVC_I4_Q8_AVX2_H
#define KVC_I4_Q8_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Scores of rows 0 .. nb-1 (nb <= 32) of int4 keys (row stride ks, d a
 * multiple of 64) against nq <= 3 prepared queries, into s3[x][j]; rows
 * four at a time, each row's codes split once for the queries. */
static inline __attribute__((always_inline)) void v_i4_q8_scores(const unsigned char *K, size_t ks, size_t nb, size_t d,
                                                                 const unsigned char *const q8[3], size_t nq,
                                                                 float s3[3][32])
{
    const size_t ng = d / 32u;
    const __m256i m15 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2); /* sc_p to lanes 0-3, sc_p+1 to 4-7 */
    const __m256i spread_mn = _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3);
    /* per query and pair of groups, once per call: sq_p in lanes 0-3 and
       sq_p+1 in 4-7; S_p / 4 and S_p+1 / 4 likewise (exact: a power of two),
       so that a row's minima terms mn_g S_g join its lanes' sum */
    __m256 qs[3][KVC_MAX_HEAD_DIM / 64], qsum[3][KVC_MAX_HEAD_DIM / 64];
    for (size_t x = 0; x < nq; x++) {
        const float *sq = (const float *)(const void *)(q8[x] + d), *sum = sq + ng;
        for (size_t p = 0; p < ng; p += 2) {
            qs[x][p / 2] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(sq[p])), _mm_set1_ps(sq[p + 1]), 1);
            qsum[x][p / 2] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(0.25f * sum[p])),
                                                  _mm_set1_ps(0.25f * sum[p + 1]), 1);
        }
    }
    for (size_t j = 0; j < nb; j += 4) {
        const size_t g4 = nb - j < 4 ? nb - j : 4;
        __m256 a[3][4];
        for (size_t x = 0; x < 3; x++)
            for (size_t i = 0; i < 4; i++) a[x][i] = _mm256_setzero_ps();
        for (size_t i = 0; i < g4; i++) {
            const unsigned char *row = K + (j + i) * ks, *nib = row + 4u * ng;
            for (size_t p = 0; p < ng; p += 2) {
                /* sc_p, mn_p, sc_p+1, mn_p+1 from their halves */
                const __m256 h = _mm256_castps128_ps256(
                    _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)(row + 4u * p))));
                const __m256 sc = _mm256_permutevar8x32_ps(h, spread), mn = _mm256_permutevar8x32_ps(h, spread_mn);
                const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(nib + 16u * p));
                const __m256i lo = _mm256_and_si256(b, m15), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m15);
                for (size_t x = 0; x < nq; x++) {
                    const unsigned char *qq = q8[x] + 64u * (p / 2u);
                    const __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)qq);
                    const __m256i o = _mm256_loadu_si256((const __m256i *)(const void *)(qq + 32));
                    const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(lo, e), _mm256_maddubs_epi16(hi, o));
                    a[x][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(pr, ones)),
                                              _mm256_mul_ps(sc, qs[x][p / 2]), a[x][i]);
                    a[x][i] = _mm256_fmadd_ps(mn, qsum[x][p / 2], a[x][i]);
                }
            }
        }
        for (size_t x = 0; x < nq; x++) {
            const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[x][0], a[x][1]), _mm256_hadd_ps(a[x][2], a[x][3]));
            float four[4];
            _mm_storeu_ps(four, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
            for (size_t i = 0; i < g4; i++) s3[x][j + i] = four[i];
        }
    }
}
#define v_i4_q8_scores v_i4_q8_scores

#endif /* KVC_I4_Q8_AVX2_H */
