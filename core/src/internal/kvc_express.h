/**
 * @file kvc_express.h
 * @brief Thinformer Express (Gong et al.; rebuilt in docs/express.md):
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

#include "kvc/kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Snapshot of an Express state (pointers into the arena; valid until the next append). */
typedef struct kvc_express_state_info {
    uint32_t s, c, round, j, k, h;
    uint64_t t, q, updates;
    uint32_t c_count;         /**< |C| */
    const uint32_t *c_tokens; /**< stream positions of C's points */
    uint32_t level_count[32]; /**< points in Compress2 level l (l < h) */
    const uint32_t *level_tokens[32];
    double weight_sum; /**< t |C| + sum of the buffers' weights */
} kvc_express_state_info;

/** @brief KVC_E_STATE when @p st is not an Express stream. */
kvc_status kvc_express_info(const kvc_stream *st, kvc_express_state_info *out);

/**
 * @brief Scratch bytes for kvc_express_offline over n tokens (0 when @p cfg
 *        is not a valid Express configuration or n is not 4^R s).
 */
size_t kvc_express_offline_scratch_bytes(const kvc_stream_config *cfg, size_t n);

/**
 * @brief Offline-Express (the paper's Alg. 9) over a prefix held by the
 *        caller: the s points the coreset C holds after the method has seen
 *        tokens 0..n-1, computed in one pass with the stream's keyed draws.
 * @param cfg    an Express configuration (method KVC_METHOD_EXPRESS; its s, c,
 *               L, centring, beta and seed are used; sink/window are not).
 * @param K, V   n rows of d and dv floats (the tokens the method sees).
 * @param n      4^R s for some R >= 0.
 * @param scratch 8-byte aligned, >= kvc_express_offline_scratch_bytes(cfg, n).
 * @param[out] out s token indices, in the coreset's order.
 * @return KVC_OK, KVC_E_ARG (bad configuration, pointers or n), KVC_E_ARENA.
 */
kvc_status kvc_express_offline(const kvc_stream_config *cfg, const float *K, const float *V, size_t n, void *scratch,
                               size_t scratch_bytes, uint32_t *out);

#ifdef __cplusplus
}
#endif
#endif
