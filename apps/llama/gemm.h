/**
 * @file gemm.h
 * @brief The decoder's matrix products: Y = X W^T for a chunk of tokens, with
 *        W (rows x cols, row-major, as in the model files) packed once into
 *        panels of KVC_GEMM_PANEL output rows.
 *
 * Packed layout: panel p holds, for every input column j in order, the
 * KVC_GEMM_PANEL weights W[p*P + i][j] (i = 0..P-1; rows past `rows` are 0).
 * Every output element is one sum over j = 0..cols-1 in increasing order, one
 * accumulator per element, so its value does not depend on how many tokens
 * are in the chunk or where the element falls in a tile: a chunk forward and
 * a token-by-token forward give identical bits. The SIMD paths use fused
 * multiply-add (one rounding per step), the scalar path a multiply and an add;
 * both stay within the recursive-summation bound 2*cols*eps*sum_j |x_j w_j|.
 *
 * Implementations: "avx512" and "avx2" (x86-64, picked at run time when the
 * CPU has them; identical results, both FMA in the same order) and "scalar".
 * KVC_GEMM=scalar|avx2|avx512 in the environment forces one (for tests and
 * comparisons); an unavailable choice falls back to the best available one.
 */
#ifndef KVC_GEMM_H
#define KVC_GEMM_H

#include <stddef.h>

/** Output rows per packed panel. */
#define KVC_GEMM_PANEL 16

/** Floats of the packed form of a rows x cols matrix (rows rounded up to a panel). */
size_t kvc_gemm_packed_floats(size_t rows, size_t cols);

/** Pack @p w (rows x cols, row-major) into @p packed (kvc_gemm_packed_floats floats). */
void kvc_gemm_pack(const float *w, size_t rows, size_t cols, float *packed);

/**
 * @brief y[t*ldy + o] = sum_j x[t*ldx + j] * W[o][j] for t < n, o < rows.
 * @param packed  from kvc_gemm_pack(W, rows, cols).
 * @param x       n rows of @p cols floats, row stride @p ldx >= cols.
 * @param y       n rows, row stride @p ldy >= rows; must not overlap @p x.
 */
void kvc_gemm(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
              size_t ldy);

/** The implementation kvc_gemm uses ("avx512", "avx2" or "scalar"). */
const char *kvc_gemm_impl(void);

/** Force an implementation by name; returns 0 when it is available here, -1 otherwise (unchanged). */
int kvc_gemm_select(const char *name);

/* Implementation entry points (same contract as kvc_gemm). */
void kvc_gemm__scalar(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                      size_t ldy);
void kvc_gemm__avx2(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                    size_t ldy);
void kvc_gemm__avx512(const float *packed, size_t rows, size_t cols, const float *x, size_t ldx, size_t n, float *y,
                      size_t ldy);
#endif
