/* When an f32 attend state cannot stand for the double reference's answer.
 *
 * The f32-summing tables (ref/attend_single.c, the SIMD tables of
 * accel/cpu_simd) keep per query {m, have_m, den, acc[dv]} in float, every
 * weight e^{x_j - m} taken relative to the largest score m seen. In a view
 * whose numerator and denominator sets are one, m is a denominator entry's,
 * so den >= 1 and the float state is as good as its roundings. A view with
 * separate N and D sets (kvc_attend.h: the "may diverge" estimators) may put
 * its largest score in N alone, every D entry far below it: den is then
 * e^{-Delta}, which float holds only down to 2^-126 (normal) or 2^-149
 * (subnormal), and the vector exps flush a weight below 2^-126 to 0. What
 * comes out is not rounding but a different answer: subnormal den divides
 * with few bits, a den summed from flushed weights is 0 (out 0 with KVC_OK
 * where the reference's double den gives e^{Delta} times the values, or
 * KVC_E_RANGE past FLT_MAX), and acc / den may overflow to inf.
 *
 * So a state is answered by the reference when, for any query:
 *  - a sum is not finite (float overflow where double does not);
 *  - it saw an entry and den < (n + 1) 2^-100, n the view's entries: each
 *    of at most n flushed weights is below 2^-126, together below
 *    2^-26 den, the same order as den's own rounding (n u);
 *  - some acc_c / den is not a finite float.
 * In a view with one set none of these can happen below the overflow of
 * the first, so the test costs a pass over Q (dv + 3) floats. */
#ifndef KVC_F32_STATE_H
#define KVC_F32_STATE_H

#include <math.h>
#include <stddef.h>

/* 1 when the f32 state of Q queries (W = dv + 3 floats each: m, have_m,
 * den, acc[dv]) over a view of n_entries entries must go to the reference. */
static inline int kvc_f32_state_needs_reference(const float *st, size_t Q, size_t W, size_t n_entries)
{
    const float den_min = ((float)n_entries + 1.0f) * 0x1p-100f;
    for (size_t i = 0; i < Q; i++) {
        const float *q = st + i * W;
        for (size_t c = 2; c < W; c++)
            if (!isfinite(q[c])) return 1;
        if (q[1] == 0.0f) continue; /* saw nothing: zeros, as the reference */
        if (!(q[2] >= den_min)) return 1;
        const float inv = 1.0f / q[2];
        for (size_t c = 3; c < W; c++)
            if (!isfinite(q[c] * inv)) return 1;
    }
    return 0;
}

#endif
