/**
 * @file kvc_attend.h
 * @brief Checked entry point of the weighted-cache query.
 */
#ifndef KVC_ATTEND_H
#define KVC_ATTEND_H

#include "kvc_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Validate a view and answer @p n_q queries with @p kern's attend
 *        kernel (the reference kernel when @p kern is NULL).
 * @param view  d, dv in 1..KVC_MAX_HEAD_DIM; beta finite > 0; n_seg <= 8; every
 *              segment: role in {NUM, DEN, BOTH}, keys non-NULL when n > 0,
 *              values non-NULL when in N, scale finite > 0.
 * @param q     n_q x d floats.  @param n_q 1..KVC_MAX_QUERY_HEADS.
 * @param out   n_q x dv floats.
 * @return KVC_OK; KVC_E_ARG for a malformed view or pointer; KVC_E_BACKEND
 *         when @p kern has no attend entry or the wrong version; KVC_E_RANGE
 *         (output zeroed) when a result is not a finite float, which only a
 *         view whose numerator and denominator sets differ can produce.
 */
kvc_status kvc_attend(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q,
                      float *out);

/** @brief 1 when all @p n floats are finite, else 0. */
int kvc_all_finite(const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
