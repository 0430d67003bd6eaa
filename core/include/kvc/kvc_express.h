/**
 * @file kvc_express.h
 * @brief Thinformer Express (Gong et al.; rebuilt in EXPRESS.md):
 *        introspection of a stream whose method is KVC_METHOD_EXPRESS.
 *
 * Budget -> parameters (method budget B tokens = budget - n_sink - n_window - 1):
 * c = s unless given, and s = the largest power of two whose worst case
 * 6s - 2s/c - 1 fits B. Arena: 4s coreset slots plus 4s - 4s/c Compress2
 * slots; kernel-halving scratch (d + 8s) doubles + 4s bytes. The first
 * 4s + n_sink + n_window queries are exact.
 */
#ifndef KVC_EXPRESS_H
#define KVC_EXPRESS_H

#include "kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Snapshot of an Express state (pointers into the arena; valid until the next append). */
typedef struct kvc_express_state_info {
    uint32_t s, c, round, j, k, h;
    uint64_t t, q, updates;
    uint32_t c_count;                /**< |C| */
    const uint32_t *c_tokens;        /**< stream positions of C's points */
    uint32_t level_count[32];        /**< points in Compress2 level l (l < h) */
    const uint32_t *level_tokens[32];
    double weight_sum;               /**< t |C| + sum of the buffers' weights */
} kvc_express_state_info;

/** @brief KVC_E_STATE when @p st is not an Express stream. */
kvc_status kvc_express_info(const kvc_stream *st, kvc_express_state_info *out);

#ifdef __cplusplus
}
#endif
#endif
