/**
 * @file kvc_subgen.h
 * @brief SubGen (Zandieh et al., Algorithm 1) with the bounded-memory rule:
 *        introspection of a stream whose method is KVC_METHOD_SUBGEN.
 *
 * State: at most m_max clusters (representative x_i kept apart from its t
 * uniform samples S_i, count n_i) and a value reservoir M of s (k, v) slots,
 * each an independent draw with probability ||v||^2 / sum ||v||^2.
 * Query: N = M with a = mu / (s ||v||^2); D = union of S_i with b = n_i / t.
 *
 * Budget -> parameters (method budget B tokens = budget - n_sink - n_window - 1):
 *   t = 8 unless given; s = floor(B / 2) unless given;
 *   m_max = floor((B*(d+dv) - s*(d+dv)) / ((t+1)*d)) unless given.
 * Worst-case footprint (elements): m_max*(t+1)*d + s*(d+dv);
 * metadata bytes: m_max*(4 + 8) + m_max*t*(4 + 4) + s*(4 + 4).
 *
 * Values whose squared norm is 0 (or so small that 1/||v||^2 overflows a
 * float) are never sampled into M; they still count in the clusters.
 */
#ifndef KVC_SUBGEN_H
#define KVC_SUBGEN_H

#include "kvc/kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One live cluster (pointers into the arena; valid until the next append). */
typedef struct kvc_subgen_cluster_info {
    const float *rep;              /**< d floats: the representative x_i */
    uint32_t rep_token;            /**< stream position of the representative */
    uint64_t count;                /**< n_i */
    uint32_t t;                    /**< samples per cluster */
    const float *samples;          /**< t x d floats */
    const uint32_t *sample_tokens; /**< t stream positions */
} kvc_subgen_cluster_info;

/** The value reservoir M. */
typedef struct kvc_subgen_reservoir_info {
    uint32_t s;              /**< slots */
    double mu;               /**< sum of ||v||^2 over the method's tokens */
    const float *keys;       /**< s x d */
    const float *values;     /**< s x dv */
    const float *inv_sqnorm; /**< s floats: 2^ref_exp / ||v||^2 (so they stay near 1 at any
                                     value scale), 0 = empty slot */
    int32_t ref_exp;         /**< the exponent above: 1/||v||^2 = inv_sqnorm * 2^-ref_exp */
    const uint32_t *tokens;  /**< s stream positions */
} kvc_subgen_reservoir_info;

/** @brief Number of live clusters (0 for a non-SubGen or invalid stream). */
uint32_t kvc_subgen_num_clusters(const kvc_stream *st);

/** @brief Cluster @p i (0 .. num_clusters-1). KVC_E_ARG when out of range,
 *         KVC_E_STATE when the stream is not SubGen. */
kvc_status kvc_subgen_cluster(const kvc_stream *st, uint32_t i, kvc_subgen_cluster_info *out);

/** @brief The value reservoir. */
kvc_status kvc_subgen_reservoir(const kvc_stream *st, kvc_subgen_reservoir_info *out);

#ifdef __cplusplus
}
#endif
#endif
