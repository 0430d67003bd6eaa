/**
 * @file kvc_balancekv.h
 * @brief BalanceKV (Han et al., Algorithms 1-4), streaming with bounded
 *        memory: introspection of a stream whose method is KVC_METHOD_BALANCEKV.
 *
 * Each tree is a MergeAndReduce of SoftmaxBalance halvings in bounded mode:
 * level 0 takes t units, levels 1..T hold t/2 tokens each, the top level T
 * halves in place when full and the input is then stratified-subsampled.
 * Numerator: one tree per value-norm bucket 2^(i-1) < ||v|| <= 2^i, for a
 * window of b_max exponents ending at ceil(log2 max ||v||); denominator: one
 * keys-only tree on (k, 1).
 *
 * Budget -> parameters (method budget B tokens = budget - n_sink - n_window - 1):
 *   levels T = 3, b_max = 8 unless given (see below);
 *   slots per tree  S(t) = t + T*(t/2) + 1;
 *   t = the largest even number with b_max*S(t)*(d+dv) + S(t)*d <= B*(d+dv);
 *   when b_max is not given it starts at 8 and is reduced (to >= 1) while t
 *   would fall below 64 (tiny batches cannot be balanced).
 * Worst-case footprint (elements) = b_max*S(t)*(d+dv) + S(t)*d.
 * Metadata: 8 bytes per slot (weight, token id); walk scratch
 * (d + 2t) doubles + t bytes (kvc_stream_plan.metadata_bytes includes both).
 */
#ifndef KVC_BALANCEKV_H
#define KVC_BALANCEKV_H

#include "kvc/kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** State of one MergeAndReduce tree. */
typedef struct kvc_balancekv_tree_info {
    int32_t
        exponent; /**< bucket exponent i (numerator trees): 2^(i-1) < ||v|| / v_ref <= 2^i, v_ref the first nonzero value norm (so buckets do not depend on the value scale) */
    int live;     /**< the bucket is in use */
    uint32_t levels, t;
    uint32_t count[17]; /**< tokens held per level 0..levels */
    int32_t unit_exp;   /**< level 0 holds units of weight 2^unit_exp */
    int32_t top_exp;    /**< the top level's weight is 2^top_exp */
    uint32_t has_candidate, group_n;
    uint64_t tokens;   /**< raw tokens the tree stands for */
    double weight_sum; /**< sum of the tree's entry weights */
} kvc_balancekv_tree_info;

/**
 * @brief One tree: @p which = -1 for the denominator, 0 .. b_max-1 for the
 *        numerator bucket in that ring slot.
 * @return KVC_OK; KVC_E_STATE when @p st is not a BalanceKV stream; KVC_E_ARG.
 */
kvc_status kvc_balancekv_tree(const kvc_stream *st, int which, kvc_balancekv_tree_info *out);

#ifdef __cplusplus
}
#endif
#endif
