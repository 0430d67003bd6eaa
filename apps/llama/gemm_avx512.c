/* AVX-512 product (compiled with -mavx512f; called only when the CPU has it).
 * Register tile: 2 panels (32 output rows) x up to 6 tokens = 12 accumulators;
 * each accumulator lane sums over j in order with FMA, as the AVX2 path does. */
#include <immintrin.h>
#include <string.h>

#include "gemm.h"

#define NT_MAX 6

static inline __attribute__((always_inline)) void tile(const float *w0, size_t cols, const float *x, size_t ldx,
                                                       float *y, size_t ldy, const int NP, const int NT, size_t live0,
                                                       size_t live1)
{
    const float *w1 = w0 + (size_t)KVC_GEMM_PANEL * cols;
    __m512 a0[NT_MAX], a1[NT_MAX];
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) a0[t] = _mm512_setzero_ps(), a1[t] = _mm512_setzero_ps();
    for (size_t j = 0; j < cols; j++) {
        const __m512 wa = _mm512_loadu_ps(w0 + j * KVC_GEMM_PANEL);
        const __m512 wb = NP > 1 ? _mm512_loadu_ps(w1 + j * KVC_GEMM_PANEL) : _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            const __m512 xb = _mm512_set1_ps(x[(size_t)t * ldx + j]);
            a0[t] = _mm512_fmadd_ps(wa, xb, a0[t]);
            if (NP > 1) a1[t] = _mm512_fmadd_ps(wb, xb, a1[t]);
        }
    }
    const __mmask16 m0 = (__mmask16)((1u << live0) - 1u), m1 = (__mmask16)((1u << live1) - 1u);
#pragma GCC unroll 6
    for (int t = 0; t < NT; t++) {
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, m0, a0[t]);
        if (NP > 1) _mm512_mask_storeu_ps(y + (size_t)t * ldy + KVC_GEMM_PANEL, m1, a1[t]);
    }
}

#define TILE_CASES(NP)                                                                                                 \
    switch (nt) {                                                                                                      \
    case 1: tile(wp, cols, xt, ldx, yt, ldy, NP, 1, live0, live1); break;                                              \
    case 2: tile(wp, cols, xt, ldx, yt, ldy, NP, 2, live0, live1); break;                                              \
    case 3: tile(wp, cols, xt, ldx, yt, ldy, NP, 3, live0, live1); break;                                              \
    case 4: tile(wp, cols, xt, ldx, yt, ldy, NP, 4, live0, live1); break;                                              \
    case 5: tile(wp, cols, xt, ldx, yt, ldy, NP, 5, live0, live1); break;                                              \
    default: tile(wp, cols, xt, ldx, yt, ldy, NP, 6, live0, live1); break;                                             \
    }

void kvc_gemm__avx512(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                      size_t ldy)
{
    const size_t P = KVC_GEMM_PANEL, panels = (rows + P - 1) / P;
    for (size_t p = 0; p < panels; p += 2) {
        const float *wp = packed + p * P * cols;
        const size_t r0 = rows - p * P;
        const size_t live0 = r0 < P ? r0 : P;
        const size_t live1 = p + 1 < panels ? (r0 - P < P ? r0 - P : P) : 0;
        for (size_t t = 0; t < n; t += NT_MAX) {
            const size_t nt = n - t < NT_MAX ? n - t : NT_MAX;
            const float *xt = x + t * ldx;
            float *yt = y + t * ldy + p * P;
            if (p + 1 < panels) {
                TILE_CASES(2)
            } else {
                TILE_CASES(1)
            }
        }
    }
}
