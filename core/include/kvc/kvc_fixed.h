/**
 * @file kvc_fixed.h
 * @brief The integer attend: softmax attention over int8 rows (KVC_DTYPE_I8:
 *        an IEEE binary32 scale, then the int8 elements) with no floating-point
 *        instruction at all, for cores without an FPU (Cortex-M0+, M3) and for
 *        proofs: scales are decoded from their bits with integer operations,
 *        scores are int32 fixed point in log2 units, exponentials come from a
 *        257-entry table, sums are int64, one division per output, and the
 *        outputs are built as binary32 bit patterns. Every function carries an
 *        ACSL contract proved by Frama-C/WP (verify/, job wp_fixed: absence of
 *        runtime errors and of overflow).
 *
 * Precision (the unit test bounds it against the double reference): scales
 * keep 16 significant bits, exponentials have a relative error below 2^-15,
 * probabilities are Q16 (weights below 2^-16 of the largest are dropped).
 */
#ifndef KVC_FIXED_H
#define KVC_FIXED_H

#if !defined(KVC_ADVANCED)
#error "kvc_fixed.h is in the advanced tier: #define KVC_ADVANCED before including it (docs/api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest number of rows of one integer attend (keeps the int64 sums exact). */
#define KVC_FX_MAX_ROWS 1048576u

/** Bytes of the workspace kvc_fx_attend_rows needs for n rows (two int32 each:
 *  the score and the value row's decoded scale). */
#define KVC_FX_WORK_BYTES(n) ((size_t)(n)*2u * sizeof(int32_t))

/**
 * @brief A non-negative binary32 scale as m 2^e, m in [2^15, 2^16) (its 16
 *        leading significant bits, truncated). Zero, subnormals, negative
 *        values, infinities and NaN give m = 0 (the row then counts as zero).
 */
/*@ requires \valid(mant) && \valid(exp) && \separated(mant, exp);
    assigns *mant, *exp;
    ensures 0 <= *mant <= 65535;
    ensures *mant == 0 || *mant >= 32768;
    ensures -150 <= *exp <= 120;
*/
void kvc_fx_decode_scale(uint32_t bits, int32_t *mant, int32_t *exp);

/**
 * @brief 2^(u / 65536) for u <= 0 (u in Q16.16 log2 units), in Q16: 65536 at
 *        u = 0, 0 below u = -17 * 65536. Table of 257 entries and linear
 *        interpolation, then a rounding shift.
 */
/*@ requires u <= 0;
    assigns \nothing;
    ensures 0 <= \result <= 65536;
*/
uint32_t kvc_fx_exp2_neg(int32_t u);

/**
 * @brief log2(x) in Q16.16 for x >= 1: the position of the leading bit
 *        (counted by binary digits, no loop) plus log2 of the next 23 bits
 *        from a 257-entry table with linear interpolation; within 1.5 2^-16
 *        of log2(x) (table rounding 0.5 2^-16, interpolation 0.18 2^-16, final
 *        rounding 0.5 2^-16, the dropped 8 low bits 0.01 2^-16).
 */
/*@ requires x >= 1;
    assigns \nothing;
    ensures 0 <= \result <= 2097152;
*/
int32_t kvc_fx_log2(uint32_t x);

/** @brief Integer dot product of two int8 vectors of length d (0 .. 256). */
/*@ requires d <= 256;
    requires \valid_read(a + (0 .. d - 1)) && \valid_read(b + (0 .. d - 1));
    assigns \nothing;
    ensures -16384 * (integer)d <= \result <= 16384 * (integer)d;
*/
int32_t kvc_fx_dot_i8(const int8_t *a, const int8_t *b, size_t d);

/**
 * @brief A score in Q16.16 log2 units: dot * cm * km * 2^e, clamped to
 *        [-2^30, 2^30] (saturation: the softmax then sees +-16384 binary orders).
 */
/*@ requires -4194304 <= dot <= 4194304;
    requires 0 <= cm <= 65535 && 0 <= km <= 65535;
    requires -1000 <= e <= 1000;
    assigns \nothing;
    ensures -1073741824 <= \result <= 1073741824;
*/
int32_t kvc_fx_score(int32_t dot, int32_t cm, int32_t km, int32_t e);

/**
 * @brief The binary32 bit pattern of num / den * 2^e (truncated to 24
 *        significant bits); 0 below the normal range, the largest finite
 *        value above it.
 */
/*@ requires 0 < den <= 4611686018427387904;
    requires -4611686018427387904 <= num <= 4611686018427387904;
    requires -2000 <= e <= 2000;
    assigns \nothing;
*/
uint32_t kvc_fx_quotient_bits(int64_t num, uint64_t den, int32_t e);

/**
 * @brief Softmax attention of one query over n int8 rows, all in integers.
 *        Two passes: the keys and the values' scales (into @p work), then the
 *        values' elements; each row is read once.
 * @param k, v       rows of keys and values: row j at k + j * kstride (resp.
 *                   v + j * vstride): 4 bytes of binary32 scale (little-endian),
 *                   then the d (dv) int8 elements (the KVC_DTYPE_I8 layout).
 * @param n          0 .. KVC_FX_MAX_ROWS rows (0: out is all zero).
 * @param weight_bits NULL (every weight 1) or n binary32 bit patterns w_j >= 0
 *                   (a segment's weights): row j counts w_j times, through
 *                   log2 w_j added to its score (kvc_fx_log2 of the 16-bit
 *                   mantissa); 0, subnormal, negative, inf or NaN drop the row.
 * @param d, dv      1 .. 256.  @param kstride >= 4 + d, @param vstride >= 4 + dv (bytes).
 * @param q          d int8: the query is q * q_scale (binary32 bits, >= 0).
 * @param beta_bits  the score scale (binary32 bits, > 0).
 * @param work       caller workspace of 2 n int32 (KVC_FX_WORK_BYTES(n) bytes); overwritten.
 * @param out_bits   dv binary32 bit patterns of sum_j w_j p_j v_j / sum_j w_j p_j (zeros
 *                   when no row counts).
 * @return 0 (the contract leaves no way to fail).
 */
/*@ requires 1 <= d <= 256 && 1 <= dv <= 256 && n <= 1048576;
    requires 4 + d <= kstride <= 1024 && 4 + dv <= vstride <= 1024;
    requires n > 0 ==> \valid_read(k + (0 .. n * kstride - 1));
    requires n > 0 ==> \valid_read(v + (0 .. n * vstride - 1));
    requires \valid_read(q + (0 .. d - 1));
    requires weight_bits != \null && n > 0 ==> \valid_read(weight_bits + (0 .. n - 1));
    requires n > 0 ==> \valid(work + (0 .. 2 * n - 1));
    requires \valid(out_bits + (0 .. dv - 1));
    requires n > 0 ==> \separated(work + (0 .. 2 * n - 1), out_bits + (0 .. dv - 1));
    assigns out_bits[0 .. dv - 1], work[0 .. 2 * n - 1];
    ensures \result == 0;
*/
int kvc_fx_attend_rows(const int8_t *k, size_t kstride, const int8_t *v, size_t vstride, size_t n,
                       const uint32_t *weight_bits, size_t d, size_t dv, const int8_t *q, uint32_t q_scale_bits,
                       uint32_t beta_bits, int32_t *work, uint32_t *out_bits);

#ifdef __cplusplus
}
#endif

#endif
