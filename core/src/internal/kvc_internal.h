/**
 * @file kvc_internal.h
 * @brief The library's internal tier: symbols its own tests and proofs call
 *        and a user never needs. Not installed; the reason a symbol lives here
 *        rather than in kvc.h is that its meaning may change with the layout
 *        of an arena or of the reference kernels.
 *
 *  - the scalar reference kernels and the bounded exp/log the proofs use
 *    (contracts here, checked by verify/ with Frama-C/WP);
 *  - each method's private state, for the white-box unit tests
 *    (kvc_subgen.h, kvc_balancekv.h, kvc_uniform.h, kvc_express.h).
 *
 * Needs KVC_ADVANCED (the build of this project defines it everywhere).
 */
#ifndef KVC_INTERNAL_H
#define KVC_INTERNAL_H

#if !defined(KVC_ADVANCED)
#error "kvc_internal.h needs KVC_ADVANCED (the project's own build defines it)"
#endif

#include "kvc/kvc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reference kernels (core/src/ref), proved with Frama-C/WP ---- */

/**
 * @brief Reference weighted attend (see ::kvc_attend_fn). Accumulates in double.
 */
/*@ requires view_ok: kvc_view_ok(view);
    requires n_q_range: 1 <= n_q <= 64;
    requires q_valid: \valid_read(q + (0 .. n_q * view->d - 1));
    requires out_valid: \valid(out + (0 .. n_q * view->dv - 1));
    requires out_sep: \separated(out + (0 .. n_q * view->dv - 1), view);
    requires out_sep_q: \separated(out + (0 .. n_q * view->dv - 1), q + (0 .. n_q * view->d - 1));
    requires out_sep_seg: \forall integer i; 0 <= i < view->n_seg ==>
        \separated(out + (0 .. n_q * view->dv - 1), view->seg[i].keys + (0 .. view->seg[i].n * view->d - 1)) &&
        ((view->seg[i].role == 1 || view->seg[i].role == 3) ==> \separated(out + (0 .. n_q * view->dv - 1), view->seg[i].values + (0 .. view->seg[i].n * view->dv - 1))) &&
        (view->seg[i].weights != \null ==> \separated(out + (0 .. n_q * view->dv - 1), view->seg[i].weights + (0 .. view->seg[i].n - 1)));
    assigns out[0 .. n_q * view->dv - 1];
    ensures ok: \result == KVC_OK;
*/
kvc_status kvc_k_attend_f32__ref(const kvc_view *view, const float *q, size_t n_q, float *out);

/** @brief Reference dot product in double. @param n 0 .. 2^24. */
/*@ requires n <= 16777216;
    requires \valid_read(a + (0 .. n - 1)) && \valid_read(b + (0 .. n - 1));
    assigns \nothing;
*/
double kvc_k_dot_f32__ref(const float *a, const float *b, size_t n);

/** @brief Reference squared distance in double. @param n 0 .. 2^24. */
/*@ requires n <= 16777216;
    requires \valid_read(a + (0 .. n - 1)) && \valid_read(b + (0 .. n - 1));
    assigns \nothing;
*/
double kvc_k_sqdist_f32__ref(const float *a, const float *b, size_t n);

/**
 * @brief e^x for x <= 0, in [0, 1]. The contract is trusted (an axiom for WP).
 * trusted-by: tests/unit/test_attend.c and test_trust.c (range over x <= 0).
 */
/*@ requires x <= 0.0;
    assigns \nothing;
    ensures 0.0 <= \result <= 1.0;
*/
double kvc_exp_nonpos(double x);

/**
 * @brief Natural logarithm of a positive finite number. Trusted contract.
 * trusted-by: tests/unit/test_attend.c and test_trust.c.
 */
/*@ requires x > 0.0;
    assigns \nothing;
*/
double kvc_log_pos(double x);

/** @brief The inner method's state (for introspection and tests), or NULL. */
const void *kvc_stream_method_state(const kvc_stream *st);

/** @p kern, or for NULL the table kvc_kernels_best() names, resolved once per
 *  process (the library's own reading of a NULL table argument).
 *  trusted-by: never NULL (kvc_kernels_best always has the reference table;
 *  tests/kernels/test_backends.c); an atomic cache outside WP's model. */
/*@ requires kern == \null || \valid_read(kern);
    assigns \nothing;
    ensures \valid_read(\result);
*/
const kvc_kernels *kvc_kernels_or_best(const kvc_kernels *kern);

/** kvc_kernels_support on a table already resolved (never NULL). */
/*@ requires \valid_read(kern);
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 ==> t < KVC_DTYPE_COUNT;
*/
int kvc_table_supports(const kvc_kernels *kern, unsigned t);

/** kvc_attend on a table already resolved (never NULL): the library's own
 *  callers resolve a NULL table once per public call and pass it down. */
kvc_status kvc_attend_resolved(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q, float *out);

#ifdef __cplusplus
}
#endif

#include "internal/kvc_subgen.h"
#include "internal/kvc_balancekv.h"
#include "internal/kvc_uniform.h"
#include "internal/kvc_express.h"

#endif /* KVC_INTERNAL_H */
