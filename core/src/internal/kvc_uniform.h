/**
 * @file kvc_uniform.h
 * @brief Uniform reservoir sampling (Vitter's Algorithm R) of the tokens that
 *        leave the exact window; every kept token has weight seen/kept in N and D.
 *
 * Capacity r = budget - n_sink - n_window - 1 tokens; worst-case footprint
 * r*(d+dv) elements; metadata 4 bytes (token id) per slot.
 */
#ifndef KVC_UNIFORM_H
#define KVC_UNIFORM_H

#include "kvc/kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The reservoir of a uniform stream (pointers valid until the next append). */
typedef struct kvc_uniform_info {
    uint32_t capacity;      /**< r */
    uint32_t kept;          /**< min(seen, r) */
    uint64_t seen;          /**< tokens offered to the reservoir */
    const uint32_t *tokens; /**< kept stream positions */
} kvc_uniform_info;

/** @brief KVC_E_STATE when @p st is not a uniform stream. */
kvc_status kvc_uniform_reservoir(const kvc_stream *st, kvc_uniform_info *out);

#ifdef __cplusplus
}
#endif
#endif
