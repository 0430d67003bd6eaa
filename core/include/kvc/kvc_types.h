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

#include "kvc_dtype_list.h"

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
/*@ assigns \nothing;
    ensures \result != \null;
*/
const char *kvc_status_str(kvc_status s);

/** Storage type of cached keys and values (one per stream), one value per
 *  line of kvc_dtype_list.h (its last column says what a row holds; int8 and
 *  Q15: x = scale * q with scale = max|x| / 127 or / 32767; int4: x = min +
 *  scale * q, q in 0..15, per group of 32). The KIVI group-wise types are
 *  described by ::kvc_storage_desc so that a later backend can implement them
 *  without a format change; a configuration naming an unimplemented type is
 *  refused with ::KVC_E_UNSUPPORTED (kvc_dtype_implemented). */
#define KVC_DTYPE_ENUM_ENTRY(NAME, value, name, bits, implemented, ...) KVC_DTYPE_##NAME = value,
typedef enum kvc_dtype {
    KVC_DTYPE_LIST(KVC_DTYPE_ENUM_ENTRY) KVC_DTYPE_ENUM_32BIT =
        0x7fffffff /**< not a type: keeps the enum 4 bytes under -fshort-enums
                                             (arm-none-eabi), so stored configurations have one layout */
} kvc_dtype;
#undef KVC_DTYPE_ENUM_ENTRY

/** Number of ::kvc_dtype values (the size of per-type tables). */
#define KVC_DTYPE_COUNT_ENTRY(NAME, value, name, bits, implemented, ...) +1u
#define KVC_DTYPE_COUNT                                                  (0u KVC_DTYPE_LIST(KVC_DTYPE_COUNT_ENTRY))

/* The implemented types, for the contracts: a disjunction generated from the
 * implemented column of kvc_dtype_list.h (Frama-C preprocesses ACSL). The
 * types stored row by row are those but KIVI4, whose keys are blocks. */
#define KVC_DTYPE_IMPLEMENTED_L(NAME, value, name, bits, implemented, ...) || ((implemented) != 0 && t == (value))
/*@ predicate kvc_dtype_implemented_l(integer t) = \false KVC_DTYPE_LIST(KVC_DTYPE_IMPLEMENTED_L);
    predicate kvc_dtype_rows_l(integer t) = kvc_dtype_implemented_l(t) && t != KVC_DTYPE_KIVI4;
*/

/** Along which axis a storage type groups elements under one scale. */
typedef enum kvc_group_axis {
    KVC_GROUP_NONE = 0,   /**< no scale (f32, f16) */
    KVC_GROUP_ROW = 1,    /**< one group = one row, or `group` consecutive elements of a row */
    KVC_GROUP_CHANNEL = 2 /**< one group = one channel over `block` consecutive tokens (KIVI keys) */
} kvc_group_axis;

/** How a storage type lays out one tensor (keys or values) of a stream. */
typedef struct kvc_storage_desc {
    kvc_dtype dtype;
    uint32_t bits;        /**< bits per element: 32, 16, 8, 16 (Q15), 4, 2 */
    kvc_group_axis axis;  /**< grouping of the scales */
    uint32_t group;       /**< elements per group along the axis (0 = the whole row) */
    uint32_t block;       /**< KVC_GROUP_CHANNEL: tokens per block; the open block stays f16 */
    uint32_t has_scale;   /**< 1: each group stores a scale (f32 for int8, f16 for int4 and KIVI) */
    uint32_t has_min;     /**< 1: each group stores a minimum (asymmetric; f16) */
    uint32_t implemented; /**< 1: this build stores and reads it */
    uint64_t row_bytes;   /**< bytes of one stored row of `dim` elements (row-grouped types; 0 otherwise) */
} kvc_storage_desc;

/**
 * @brief Describe storage type @p t for rows of @p dim elements (keys: is_key 1).
 * @return KVC_OK; KVC_E_ARG for an unknown type or dim outside 1..KVC_MAX_HEAD_DIM.
 */
kvc_status kvc_storage_describe(kvc_dtype t, uint32_t dim, int is_key, kvc_storage_desc *out);

/** Name of a storage type ("f32", "f16", "int8", "q15", "kivi4", "kivi2", "int4"), NULL if unknown. */
/*@ assigns \nothing;
    ensures (t < 0 || t >= KVC_DTYPE_COUNT) ==> \result == \null;
*/
const char *kvc_dtype_name(kvc_dtype t);

/** 1 when this build stores and reads type @p t (the implemented column of kvc_dtype_list.h), else 0. */
/*@ assigns \nothing;
    ensures \result != 0 ==> kvc_dtype_implemented_l(t);
*/
int kvc_dtype_implemented(kvc_dtype t);

/** Parse a storage type name; KVC_E_ARG for an unknown one. */
kvc_status kvc_dtype_parse(const char *name, kvc_dtype *out);

/** Alignment (bytes) every arena must have. */
#define KVC_ARENA_ALIGN 64u
/** Largest key / value dimension any kernel accepts, 1 .. 256 (default 256).
 *  Stack buffers of the kernels are sized by it (a few of d doubles or floats
 *  each): a microcontroller build sets it to its model's head dimension, as a
 *  compile definition of the library and of its users alike (the CMake cache
 *  variable KVC_MAX_HEAD_DIM does both; the proofs assume <= 256). */
#ifndef KVC_MAX_HEAD_DIM
#define KVC_MAX_HEAD_DIM 256u
#endif
/** Largest number of query heads answered by one attend call (GQA group),
 *  1 .. 64 (default 64); the CMake cache variable KVC_MAX_QUERY_HEADS sets it. */
#ifndef KVC_MAX_QUERY_HEADS
#define KVC_MAX_QUERY_HEADS 64u
#endif
#if KVC_MAX_HEAD_DIM < 1 || KVC_MAX_HEAD_DIM > 256
#error "KVC_MAX_HEAD_DIM must be in 1..256"
#endif
#if KVC_MAX_QUERY_HEADS < 1 || KVC_MAX_QUERY_HEADS > 64
#error "KVC_MAX_QUERY_HEADS must be in 1..64"
#endif
/** Largest budget in tokens (keeps every size product far from overflow on 32-bit). */
#define KVC_MAX_BUDGET (1u << 24)

/** Rows one kvc_stream_prefill / kvc_cache_prefill call takes at most (a prompt in one call). */
#define KVC_MAX_PREFILL_TOKENS (1u << 24)

/** Round @p x up to a multiple of ::KVC_ARENA_ALIGN (in the type of @p x,
 *  promoted). Written with a division, not a mask: the same machine code, and
 *  linear arithmetic for the provers (WP treats `&` as uninterpreted). */
#define KVC_ALIGN_UP(x) (((x) + (KVC_ARENA_ALIGN - 1u)) / KVC_ARENA_ALIGN * KVC_ARENA_ALIGN)

#ifdef __cplusplus
}
#endif
#endif /* KVC_TYPES_H */
