/**
 * @file kvc_types.h
 * @brief Status codes, storage types, limits and arena conventions shared by
 *        every kvcompress module.
 *
 * Conventions (see the project README):
 *  - every state lives inside one caller-provided arena; the first bytes of the
 *    arena are the state header, everything else is addressed by byte offsets
 *    from that header, so an arena can be memcpy'd, snapshotted and restored;
 *  - arenas must be aligned to ::KVC_ARENA_ALIGN bytes;
 *  - a function that returns an error leaves its state byte-for-byte unchanged.
 */
#ifndef KVC_TYPES_H
#define KVC_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every fallible call. 0 is success, errors are negative. */
typedef enum kvc_status {
    KVC_OK = 0,
    KVC_E_ARG = -1,         /**< a parameter is out of its documented range */
    KVC_E_ARENA = -2,       /**< arena too small or misaligned */
    KVC_E_STATE = -3,       /**< state not initialised, corrupted, or call out of order */
    KVC_E_NONFINITE = -4,   /**< NaN or Inf in an input vector */
    KVC_E_CAPACITY = -5,    /**< the method cannot hold more tokens (e.g. exact is full) */
    KVC_E_UNSUPPORTED = -6, /**< valid request this build/method does not implement */
    KVC_E_BACKEND = -7,     /**< accelerator failure */
    KVC_E_FORMAT = -8,      /**< malformed input file or buffer */
    KVC_E_CORRUPT = -9,     /**< an initialised state whose header fails validation (a flipped
                                 bit, a snapshot from another format version or truncated) */
    KVC_E_RANGE = -10       /**< a result does not fit a float: a method whose numerator and
                                 denominator are separate estimates (SubGen, BalanceKV) saw its
                                 denominator collapse; the output is zeroed */
} kvc_status;

/**
 * @brief Human-readable text for a status.
 * @param s any value (unknown values give "unknown status").
 * @return a static string, never NULL.
 */
const char *kvc_status_str(kvc_status s);

/** Storage type of cached keys and values. Only ::KVC_DTYPE_F32 is implemented. */
typedef enum kvc_dtype {
    KVC_DTYPE_F32 = 0,
    KVC_DTYPE_F16 = 1,
    KVC_DTYPE_I8 = 2,
    KVC_DTYPE_Q15 = 3
} kvc_dtype;

/** Alignment (bytes) every arena must have. */
#define KVC_ARENA_ALIGN 64u
/** Largest key / value dimension any kernel accepts. */
#define KVC_MAX_HEAD_DIM 256u
/** Largest number of query heads answered by one attend call (GQA group). */
#define KVC_MAX_QUERY_HEADS 64u
/** Largest budget in tokens (keeps every size product far from overflow on 32-bit). */
#define KVC_MAX_BUDGET (1u << 24)

/** Round @p x up to a multiple of ::KVC_ARENA_ALIGN (in the type of @p x). */
#define KVC_ALIGN_UP(x) (((x) + (KVC_ARENA_ALIGN - 1u)) & ~(KVC_ARENA_ALIGN - 1u + 0 * (x)))

#ifdef __cplusplus
}
#endif
#endif /* KVC_TYPES_H */
