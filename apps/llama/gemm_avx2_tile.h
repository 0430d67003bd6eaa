/* The AVX2 products' tile write-back (gemm_avx2.c, gemm_quant_avx2.c): one
 * panel's two 8-float halves for each of NT tokens, a short last panel
 * through a buffer. Included only by files compiled with -mavx2. */
#ifndef KVC_GEMM_AVX2_TILE_H
#define KVC_GEMM_AVX2_TILE_H

#include <immintrin.h>
#include <string.h>

#include "gemm.h"

static inline __attribute__((always_inline)) void
kvc_gemm_avx2_store_tile(const __m256 *lo, const __m256 *hi, const int NT, float *y, size_t ldy, size_t live)
{
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) {
        float *yt = y + (size_t)t * ldy;
        if (live == KVC_GEMM_PANEL) {
            _mm256_storeu_ps(yt, lo[t]);
            _mm256_storeu_ps(yt + 8, hi[t]);
        } else {
            float tmp[KVC_GEMM_PANEL];
            _mm256_storeu_ps(tmp, lo[t]);
            _mm256_storeu_ps(tmp + 8, hi[t]);
            memcpy(yt, tmp, live * sizeof(float));
        }
    }
}
#endif
