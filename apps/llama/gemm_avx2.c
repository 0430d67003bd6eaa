/* AVX2 + FMA product (compiled with -mavx2 -mfma; called only when the CPU has
 * both). Register tile: 1 panel (two 8-float halves) x up to 6 tokens = 12
 * accumulators; each lane sums over j in order with FMA, as the AVX-512 path. */
#include <immintrin.h>
#include <string.h>

#include "gemm.h"
#include "gemm_avx2_tile.h"

#define NT_MAX 6

static inline __attribute__((always_inline)) void tile(const float *w, size_t cols, const float *x, size_t ldx,
                                                       float *y, size_t ldy, const int NT, size_t live)
{
    __m256 lo[NT_MAX], hi[NT_MAX];
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) lo[t] = _mm256_setzero_ps(), hi[t] = _mm256_setzero_ps();
    for (size_t j = 0; j < cols; j++) {
        const __m256 wl = _mm256_loadu_ps(w + j * KVC_GEMM_PANEL);
        const __m256 wh = _mm256_loadu_ps(w + j * KVC_GEMM_PANEL + 8);
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            const __m256 xb = _mm256_broadcast_ss(x + (size_t)t * ldx + j);
            lo[t] = _mm256_fmadd_ps(wl, xb, lo[t]);
            hi[t] = _mm256_fmadd_ps(wh, xb, hi[t]);
        }
    }
    kvc_gemm_avx2_store_tile(lo, hi, NT, y, ldy, live);
}

void kvc_gemm__avx2(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                    size_t ldy)
{
    const size_t P = KVC_GEMM_PANEL, panels = (rows + P - 1) / P;
    for (size_t p = 0; p < panels; p++) {
        const float *wp = packed + p * P * cols;
        const size_t live = rows - p * P < P ? rows - p * P : P;
        for (size_t t = 0; t < n; t += NT_MAX) {
            const size_t nt = n - t < NT_MAX ? n - t : NT_MAX;
            const float *xt = x + t * ldx;
            float *yt = y + t * ldy + p * P;
            switch (nt) {
            case 1: tile(wp, cols, xt, ldx, yt, ldy, 1, live); break;
            case 2: tile(wp, cols, xt, ldx, yt, ldy, 2, live); break;
            case 3: tile(wp, cols, xt, ldx, yt, ldy, 3, live); break;
            case 4: tile(wp, cols, xt, ldx, yt, ldy, 4, live); break;
            case 5: tile(wp, cols, xt, ldx, yt, ldy, 5, live); break;
            default: tile(wp, cols, xt, ldx, yt, ldy, 6, live); break;
            }
        }
    }
}
