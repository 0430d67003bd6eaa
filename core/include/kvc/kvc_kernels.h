/**
 * @file kvc_kernels.h
 * @brief The weighted-cache view and the versioned table of hot kernels.
 *
 * Every method exposes its cache as a ::kvc_view: a few segments, each a block
 * of n keys (and values), a per-entry weight (or 1) times a common scale, and a
 * role saying whether the block belongs to the numerator set N, the
 * denominator set D, or both. One `attend` kernel answers every query:
 *
 *     z(q) = sum_{i in N} a_i e^{beta<q,k_i>} v_i / sum_{i in D} b_i e^{beta<q,k_i>}
 *
 * computed stably as an online softmax over s_i + ln w_i (weight 0 = excluded),
 * subtracting the running maximum over N u D, so weights that grow like
 * n/budget cannot overflow.
 */
#ifndef KVC_KERNELS_H
#define KVC_KERNELS_H

#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which set(s) of the weighted query a segment belongs to (bit mask). */
enum {
    KVC_SET_NUM = 1u,  /**< numerator set N (needs values) */
    KVC_SET_DEN = 2u,  /**< denominator set D (values may be NULL) */
    KVC_SET_BOTH = 3u  /**< same entry, same weight, in N and in D */
};

/** Largest number of segments one view can hold. */
#define KVC_VIEW_MAX_SEGMENTS 8u

/** One block of cache entries with a common role. Pointers are transient:
 *  they are rebuilt from arena offsets each time a view is taken. */
typedef struct kvc_segment {
    const float *keys;    /**< n rows of d floats, row-major */
    const float *values;  /**< n rows of dv floats; may be NULL iff role == KVC_SET_DEN */
    const float *weights; /**< n per-entry multipliers >= 0, or NULL for all 1 */
    double scale;         /**< common multiplier > 0 applied to every entry */
    size_t n;             /**< number of entries (0 allowed) */
    unsigned role;        /**< KVC_SET_NUM, KVC_SET_DEN or KVC_SET_BOTH */
} kvc_segment;

/** A method's cache as the attend kernel sees it. */
typedef struct kvc_view {
    kvc_segment seg[KVC_VIEW_MAX_SEGMENTS];
    size_t n_seg; /**< 0 .. KVC_VIEW_MAX_SEGMENTS */
    size_t d;     /**< key dimension, 1 .. KVC_MAX_HEAD_DIM */
    size_t dv;    /**< value dimension, 1 .. KVC_MAX_HEAD_DIM */
    float beta;   /**< score scale, finite and > 0 */
} kvc_view;

/*@ predicate kvc_segment_ok(kvc_segment *s, integer d, integer dv) =
      \valid_read(s) &&
      0 <= s->n <= 16777216 &&
      (s->role == 1 || s->role == 2 || s->role == 3) &&
      // scale: finite and > 0, as documented and as kvc_attend() checks
      \is_finite(s->scale) && s->scale > 0.0 &&
      \valid_read(s->keys + (0 .. s->n * d - 1)) &&
      ((s->role == 1 || s->role == 3) ==> \valid_read(s->values + (0 .. s->n * dv - 1))) &&
      (s->weights != \null ==> \valid_read(s->weights + (0 .. s->n - 1)));

    predicate kvc_view_ok(kvc_view *v) =
      \valid_read(v) &&
      1 <= v->d <= 256 && 1 <= v->dv <= 256 &&
      0 <= v->n_seg <= 8 &&
      \forall integer i; 0 <= i < v->n_seg ==> kvc_segment_ok(&v->seg[i], v->d, v->dv);
*/

/**
 * @brief Signature of an attend kernel: answer @p n_q queries (all query heads
 *        of one kv-head group, GQA) against one weighted view.
 * @param view  the cache; d, dv in 1..KVC_MAX_HEAD_DIM, beta > 0.
 * @param q     n_q rows of view->d floats (finite).
 * @param n_q   1 .. KVC_MAX_QUERY_HEADS.
 * @param out   n_q rows of view->dv floats; all-zero rows where the denominator is 0.
 * @return KVC_OK, or KVC_E_ARG for out-of-range dimensions / NULL pointers.
 */
typedef kvc_status (*kvc_attend_fn)(const kvc_view *view, const float *q, size_t n_q,
                                    float *out);

/** Version of ::kvc_kernels; bumped whenever an entry is added or changed. */
#define KVC_KERNELS_VERSION 1u

/** A backend's kernels. Entries a backend lacks point at the reference ones. */
typedef struct kvc_kernels {
    uint32_t version;   /**< KVC_KERNELS_VERSION */
    const char *name;   /**< "ref", "avx2", "cuda", ... */
    kvc_attend_fn attend_f32;
    /** <a, b> over n floats, accumulated in double. */
    double (*dot_f32)(const float *a, const float *b, size_t n);
    /** ||a - b||^2 over n floats, accumulated in double. */
    double (*sqdist_f32)(const float *a, const float *b, size_t n);
} kvc_kernels;

/** The scalar reference kernels (ground truth). Never NULL. */
const kvc_kernels *kvc_kernels_ref(void);

/** The best table available on this machine (the reference one when no
 *  accelerated backend is built in). Never NULL. */
const kvc_kernels *kvc_kernels_best(void);

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
 * @brief e^x for x <= 0, in [0, 1]. The contract is trusted (an axiom for WP)
 *        and checked at run time by the unit tests.
 */
/*@ requires x <= 0.0;
    assigns \nothing;
    ensures 0.0 <= \result <= 1.0;
*/
double kvc_exp_nonpos(double x);

/**
 * @brief Natural logarithm of a positive finite number. Trusted contract,
 *        checked at run time by the unit tests.
 */
/*@ requires x > 0.0;
    assigns \nothing;
*/
double kvc_log_pos(double x);

#ifdef __cplusplus
}
#endif
#endif /* KVC_KERNELS_H */
