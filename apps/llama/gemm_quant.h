/**
 * @file gemm_quant.h
 * @brief The decoder's products on GGUF-quantised weights without expanding
 *        them to f32: Q4_1 (d, m, 4-bit q: w = d q + m) and Q8_0 (d, 8-bit q:
 *        w = d q) rows are repacked into panels of KVC_GEMM_PANEL rows x 32
 *        columns, and each weight is rebuilt in registers as the GGUF reader
 *        would dequantise it (a product that is exact in f32, then the add).
 *        The sums are then the same operations, in the same order, as
 *        kvc_gemm on the dequantised matrix: identical bits, for about a fifth
 *        (Q4_1: 0.75 B per weight) or a third (Q8_0: 1.125 B) of the bytes.
 *
 * Panel layout, per panel then per block of 32 columns: the 16 rows' scales d
 * (f32) and, for Q4_1, their minima m (f32); then, column by column, the 16
 * rows' q: Q4_1 8 bytes (byte k = q[row k] | q[row k + 8] << 4), Q8_0 16
 * bytes (int8, row order). Rows past `rows` are zeros.
 */
#ifndef KVC_GEMM_QUANT_H
#define KVC_GEMM_QUANT_H

#include <stddef.h>
#include <stdint.h>

/** Panel types (the GGUF block types they come from). */
enum { KVC_QPANEL_NONE = 0, KVC_QPANEL_Q4_1 = 1, KVC_QPANEL_Q8_0 = 2 };

/** Bytes of one 32-column block of one panel; 0 for an unknown type. */
size_t kvc_qpanel_block_bytes(int type);

/** Bytes of the panels of a rows x cols matrix (cols a multiple of 32). */
size_t kvc_qpanel_bytes(int type, size_t rows, size_t cols);

/**
 * @brief Repack rows from their GGUF blocks: @p row_blocks[r] points at row
 *        r's cols/32 ggml blocks (Q4_1: 20 bytes each, Q8_0: 34 bytes).
 * @param dst kvc_qpanel_bytes(type, rows, cols) bytes.
 */
void kvc_qpanel_pack(int type, const uint8_t *const *row_blocks, size_t rows, size_t cols, uint8_t *dst);

/** y = x W^T as kvc_gemm, W given as panels (same bits as kvc_gemm on the
 *  dequantised W with the implementation kvc_gemm_impl() names). */
void kvc_gemm_q(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                float *y, size_t ldy);

/* Implementations (same contract; avx2 needs AVX2 + FMA). */
void kvc_gemm_q__scalar(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                        float *y, size_t ldy);
void kvc_gemm_q__avx2(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                      float *y, size_t ldy);
#endif
