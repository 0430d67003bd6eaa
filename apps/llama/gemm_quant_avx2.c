/* Quantised-panel product, AVX2 + FMA (compiled with -mavx2 -mfma; called only
 * when the CPU has both). The register tile of kvc_gemm__avx2 (one panel as two
 * 8-float halves x up to 6 tokens); each column's 16 weights are rebuilt from
 * the block's d (and m) with a multiply (exact) and an add, as the GGUF reader
 * dequantises them, then enter the same FMA chains: identical bits to the f32
 * path on the dequantised matrix, and to the AVX-512 one. */
#include <immintrin.h>
#include <string.h>

#include "gemm.h"
#include "gemm_avx2_tile.h"
#include "gemm_quant.h"

#define NT_MAX 6
#define P      KVC_GEMM_PANEL

static inline __attribute__((always_inline)) void tile(const int type, const uint8_t *panel, size_t nb, size_t bb,
                                                       const float *x, size_t ldx, float *y, size_t ldy, const int NT,
                                                       size_t live)
{
    __m256 lo[NT_MAX], hi[NT_MAX];
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) lo[t] = _mm256_setzero_ps(), hi[t] = _mm256_setzero_ps();
    const __m256i nib = _mm256_set1_epi32(15);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = panel + b * bb;
        const __m256 dl = _mm256_loadu_ps((const float *)(const void *)blk);
        const __m256 dh = _mm256_loadu_ps((const float *)(const void *)blk + 8);
        __m256 ml = _mm256_setzero_ps(), mh = _mm256_setzero_ps();
        if (type == KVC_QPANEL_Q4_1)
            ml = _mm256_loadu_ps((const float *)(const void *)blk + P),
            mh = _mm256_loadu_ps((const float *)(const void *)blk + P + 8);
        const float *xb = x + b * 32;
        for (size_t j = 0; j < 32; j++) {
            __m256 wl, wh;
            if (type == KVC_QPANEL_Q4_1) {
                const __m256i v =
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(blk + 8 * P + j * 8)));
                wl = _mm256_add_ps(_mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_and_si256(v, nib))), ml);
                wh = _mm256_add_ps(_mm256_mul_ps(dh, _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4))), mh);
            } else {
                const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(blk + 4 * P + j * P));
                wl = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
                wh = _mm256_mul_ps(dh, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))));
            }
#pragma GCC unroll 6
            for (int t = 0; t < NT; t++) {
                const __m256 xv = _mm256_broadcast_ss(xb + (size_t)t * ldx + j);
                lo[t] = _mm256_fmadd_ps(wl, xv, lo[t]);
                hi[t] = _mm256_fmadd_ps(wh, xv, hi[t]);
            }
        }
    }
    kvc_gemm_avx2_store_tile(lo, hi, NT, y, ldy, live);
}

static void run(const int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                float *y, size_t ldy)
{
    const size_t nb = cols / 32, bb = kvc_qpanel_block_bytes(type), np = (rows + P - 1) / P;
    for (size_t p = 0; p < np; p++) {
        const uint8_t *wp = panels + p * nb * bb;
        const size_t live = rows - p * P < P ? rows - p * P : P;
        for (size_t t = 0; t < n; t += NT_MAX) {
            const size_t nt = n - t < NT_MAX ? n - t : NT_MAX;
            const float *xt = x + t * ldx;
            float *yt = y + t * ldy + p * P;
            switch (nt) {
            case 1: tile(type, wp, nb, bb, xt, ldx, yt, ldy, 1, live); break;
            case 2: tile(type, wp, nb, bb, xt, ldx, yt, ldy, 2, live); break;
            case 3: tile(type, wp, nb, bb, xt, ldx, yt, ldy, 3, live); break;
            case 4: tile(type, wp, nb, bb, xt, ldx, yt, ldy, 4, live); break;
            case 5: tile(type, wp, nb, bb, xt, ldx, yt, ldy, 5, live); break;
            default: tile(type, wp, nb, bb, xt, ldx, yt, ldy, 6, live); break;
            }
        }
    }
}

void kvc_gemm_q__avx2(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                      float *y, size_t ldy)
{
    if (type == KVC_QPANEL_Q4_1)
        run(KVC_QPANEL_Q4_1, panels, rows, cols, x, ldx, n, y, ldy);
    else
        run(KVC_QPANEL_Q8_0, panels, rows, cols, x, ldx, n, y, ldy);
}
