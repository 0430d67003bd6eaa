/**
 * @file kvc_attend.h
 * @brief Checked entry point of the weighted-cache query.
 */
#ifndef KVC_ATTEND_H
#define KVC_ATTEND_H

#if !defined(KVC_ADVANCED)
#error "kvc_attend.h is in the advanced tier: #define KVC_ADVANCED before including it (docs/api.md)"
#endif

#include "kvc_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Validate a view and answer @p n_q queries with @p kern's attend
 *        kernel (the reference kernel when @p kern is NULL).
 * @param view  d, dv in 1..KVC_MAX_HEAD_DIM; beta finite > 0; n_seg <= 8; every
 *              segment: role in {NUM, DEN, BOTH}, dtype < KVC_DTYPE_COUNT, keys
 *              (f32) or keys_q (other types) non-NULL when n > 0, values /
 *              values_q non-NULL when in N, scale finite > 0. An all-f32 view
 *              takes @p kern's attend_f32 (the proved kernel in the reference
 *              table); a view with another storage type takes attend_batch,
 *              one head at a time (use kern->attend_batch directly to read the
 *              rows once for every head and position).
 * @param q     n_q x d floats.  @param n_q 1..KVC_MAX_QUERY_HEADS.
 * @param out   n_q x dv floats.
 * @return KVC_OK; KVC_E_ARG for a malformed view or pointer; KVC_E_BACKEND
 *         when @p kern has no attend entry or the wrong version;
 *         KVC_E_UNSUPPORTED when it has no row kernels for a segment's type; KVC_E_RANGE
 *         (output zeroed) when a result is not a finite float, which only a
 *         view whose numerator and denominator sets differ can produce.
 */
kvc_status kvc_attend(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q, float *out);

/**
 * @brief Split-K: merge the states of @p n_parts attends over disjoint parts
 *        of one cache (kvc_attend_batch.state, or kvc_stream_attend_part) into
 *        the attention output, exactly as one pass would have combined them:
 *        M = max m_i, den = sum den_i e^{m_i - M}, out = sum acc_i e^{m_i - M} / den.
 * @param parts      n_parts pointers, each to n_queries states of KVC_ATTEND_STATE(dv) doubles.
 * @param n_parts    1 .. 1024.  @param n_queries 1 .. KVC_MAX_BATCH_POSITIONS * KVC_MAX_QUERY_HEADS.
 * @param out        n_queries rows of dv floats (zeros where no part saw a denominator entry).
 * @return KVC_OK; KVC_E_ARG (NULL, sizes); KVC_E_NONFINITE when a state holds a
 *         maximum that is NaN or +inf, or a sum that is not finite (no attend writes
 *         one; out untouched); KVC_E_RANGE when a result is not a finite float (out zeroed).
 */
kvc_status kvc_attend_merge(const double *const *parts, size_t n_parts, size_t n_queries, size_t dv, float *out);

/** @brief 1 when all @p n floats are finite, else 0. */
/*@ requires \valid_read(x + (0 .. n - 1));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> (\forall integer i; 0 <= i < n ==> \is_finite(x[i]));
*/
int kvc_all_finite(const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
