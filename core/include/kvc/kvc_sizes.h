/**
 * @file kvc_sizes.h
 * @brief Arena sizes as integer constant expressions, for static buffers:
 *
 *     static _Alignas(KVC_ARENA_ALIGN) unsigned char arena[
 *         KVC_CACHE_ARENA_BYTES(5, 4, KVC_SINK_WINDOW_ARENA_BYTES(KVC_DTYPE_I8, 8, 8, 256, 4))];
 *
 * Each macro gives exactly what the size function returns for the same
 * configuration (kvc_stream_arena_bytes, kvc_cache_arena_bytes):
 * tests/unit/test_sizes.c compares them over a grid of storage types, head
 * dimensions, budgets, sinks and windows, for every registered method that
 * has one. The arena layout is the same on every target (fixed-width
 * headers), so one constant serves a device and its host.
 *
 * Covered: the methods whose arena is rows and per-token arrays of the
 * budget (exact, sink-window, uniform, knorm, keydiff, h2o, tova, snapkv,
 * expected-attention),
 * with no protected spans (n_protect = 0) and the cache's uniform policy.
 * SubGen, BalanceKV and Express derive cluster counts, tree levels and cache
 * sizes from the budget at run time: size them with kvc_stream_arena_bytes
 * (kvc_cache_arena_bytes for a cache). Arguments must be valid (the
 * size functions return 0 for an invalid configuration; these macros do
 * not check).
 */
#ifndef KVC_SIZES_H
#define KVC_SIZES_H

#include <stdint.h>

#include "kvc_types.h"

/** Bytes of one stored row of @p dim elements of type @p t, 0 for a type not stored row by
 *  row: the groups' scale bytes, then the elements packed and padded to 4 bytes, from the
 *  columns of kvc_dtype_list.h (kvc_row_bytes is this; int4: per group of 32 an f16 scale
 *  and minimum, then the nibbles, 2 per byte). */
#define KVC_ROW_BYTES_CASE_(t, dim, NAME, value, name, bits, implemented, rows, scale_bytes, group, ...)               \
    (t) == (value) && (rows)                                                                                           \
        ? (uint64_t)(scale_bytes) * ((group) ? ((uint64_t)(dim) + (group)-1u) / ((group) + !(group)) : 1u) +           \
              ((bits) * (uint64_t)(dim) + 31u) / 32u * 4u                                                              \
        :
#define KVC_ROW_BYTES(t, dim) ((uint64_t)(KVC_DTYPE_LIST_WITH(KVC_ROW_BYTES_CASE_, t, dim) 0u))

/* The same sizes in ACSL, for the proofs of the size arithmetic (verify/:
 * wp_sizes on LP64 and ILP32), written out per type in the simplest form the
 * provers read; types 4 and 5 (KIVI) have no rows. Not a second list: WP
 * proves kvc_row_bytes (kvc_kernels.h), which is KVC_ROW_BYTES, equal to it
 * for every type, so a column changed in kvc_dtype_list.h without this
 * fails the verify label. */
/*@ logic integer kvc_row_bytes_l(integer t, integer dim) =
      t == 0 ? 4 * dim :
      t == 1 ? (2 * dim + 3) / 4 * 4 :
      t == 2 ? 4 + (dim + 3) / 4 * 4 :
      t == 3 ? 4 + (2 * dim + 3) / 4 * 4 :
      t == 6 ? 4 * ((dim + 31) / 32) + ((dim + 1) / 2 + 3) / 4 * 4 : 0;
    logic integer kvc_align_l(integer x) = (x + 63) / 64 * 64;
    // a carved region: 64-aligned, and it ends at or before `next`
    predicate kvc_region_before(integer off, integer bytes, integer next) =
      off % 64 == 0 && 0 <= off && 0 <= bytes && off + bytes <= next;
*/

/** @p x rounded up to KVC_ARENA_ALIGN, as uint64_t. */
#define KVC_SIZE_ALIGN(x) (((uint64_t)(x) + (KVC_ARENA_ALIGN - 1u)) / KVC_ARENA_ALIGN * KVC_ARENA_ALIGN)

/* The fixed-width headers (each checked by a _Static_assert where it is defined). */
#define KVC_SIZE_STREAM_HEADER 496u /**< struct kvc_stream */
#define KVC_SIZE_CACHE_HEADER  208u /**< struct kvc_cache */
#define KVC_SIZE_EXACT_STATE   40u  /**< exact's state */
#define KVC_SIZE_UNIFORM_STATE 64u  /**< uniform's state */
#define KVC_SIZE_EVICT_STATE   72u  /**< the score-and-evict methods' state (knorm, keydiff, h2o, tova, snapkv) */
#define KVC_SIZE_SNAPKV_ROWS   32u  /**< snapkv's observation rows */

/** n rows of dim elements of type t, aligned. */
#define KVC_SIZE_ROWS(t, n, dim) KVC_SIZE_ALIGN((uint64_t)(n)*KVC_ROW_BYTES(t, dim))

/** The stream wrapper: header, sinks, window ring, the pending token (and an
 *  f32 staging row for a quantised type), then @p method_bytes. Row types only:
 *  a KVC_DTYPE_KIVI4 stream (int4 rows, a window rounded down to whole blocks of
 *  32, an f16 open block) is sized by kvc_stream_arena_bytes. */
#define KVC_SIZE_STREAM(t, d, dv, n_sink, n_window, method_bytes)                                                      \
    (KVC_SIZE_ALIGN(KVC_SIZE_STREAM_HEADER) + KVC_SIZE_ROWS(t, n_sink, d) + KVC_SIZE_ROWS(t, n_sink, dv) +             \
     KVC_SIZE_ROWS(t, n_window, d) + KVC_SIZE_ROWS(t, n_window, dv) + KVC_SIZE_ALIGN(4u * (uint64_t)(d)) +             \
     KVC_SIZE_ALIGN(4u * ((uint64_t)(dv) + ((t) == KVC_DTYPE_F32 ? 0u : (uint64_t)(d) + (uint64_t)(dv)))) +            \
     KVC_SIZE_ALIGN(method_bytes))

/** A method's rows for cap tokens after its state of @p state bytes. */
#define KVC_SIZE_METHOD_ROWS(state, t, d, dv, cap)                                                                     \
    (KVC_SIZE_ALIGN(state) + KVC_SIZE_ROWS(t, cap, d) + KVC_SIZE_ROWS(t, cap, dv))

/** The tokens a non-window method holds: budget - n_sink - n_window - 1 (the current token). */
#define KVC_SIZE_CAP(budget, n_sink, n_window) ((uint64_t)(budget) - (n_sink) - (n_window)-1u)

/** Sink-window: @p budget tokens, @p n_sink of them sinks, the rest the window and the current token. */
#define KVC_SINK_WINDOW_ARENA_BYTES(t, d, dv, budget, n_sink)                                                          \
    KVC_SIZE_STREAM(t, d, dv, n_sink, (uint64_t)(budget) - (n_sink)-1u, 0u)

/** Exact: keeps budget - n_sink - n_window - 1 tokens beside its sinks and window. */
#define KVC_EXACT_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                                      \
    KVC_SIZE_STREAM(t, d, dv, n_sink, n_window,                                                                        \
                    KVC_SIZE_METHOD_ROWS(KVC_SIZE_EXACT_STATE, t, d, dv, KVC_SIZE_CAP(budget, n_sink, n_window)))

/** Uniform (reservoir): rows and a token index per held token. */
#define KVC_UNIFORM_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                                    \
    KVC_SIZE_STREAM(t, d, dv, n_sink, n_window,                                                                        \
                    KVC_SIZE_METHOD_ROWS(KVC_SIZE_UNIFORM_STATE, t, d, dv, KVC_SIZE_CAP(budget, n_sink, n_window)) +   \
                        KVC_SIZE_ALIGN(4u * KVC_SIZE_CAP(budget, n_sink, n_window)))

/** The score-and-evict methods: rows, a score (8 bytes) and a token id (4)
 *  per held token, then @p own bytes of the method's own region. */
#define KVC_SIZE_EVICT(t, d, dv, cap, own)                                                                             \
    (KVC_SIZE_METHOD_ROWS(KVC_SIZE_EVICT_STATE, t, d, dv, cap) + KVC_SIZE_ALIGN(8u * (uint64_t)(cap)) +                \
     KVC_SIZE_ALIGN(4u * (uint64_t)(cap)) + KVC_SIZE_ALIGN(own))

/** K-norm: the skeleton's arrays only. */
#define KVC_KNORM_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                                      \
    KVC_SIZE_STREAM(t, d, dv, n_sink, n_window, KVC_SIZE_EVICT(t, d, dv, KVC_SIZE_CAP(budget, n_sink, n_window), 0u))

/** KeyDiff: the skeleton's arrays only. */
#define KVC_KEYDIFF_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                                    \
    KVC_KNORM_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)

/** H2O and TOVA: and a ring of n_window + 1 token tags and masses after a 64-byte header. */
#define KVC_H2O_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                                        \
    KVC_SIZE_STREAM(                                                                                                   \
        t, d, dv, n_sink, n_window,                                                                                    \
        KVC_SIZE_EVICT(t, d, dv, KVC_SIZE_CAP(budget, n_sink, n_window), 64u + 16u * ((uint64_t)(n_window) + 1u)))
/** TOVA has H2O's layout. */
#define KVC_TOVA_ARENA_BYTES(t, d, dv, budget, n_sink, n_window) KVC_H2O_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)

/** SnapKV: and the observation rows after a 64-byte header. */
#define KVC_SNAPKV_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                                     \
    KVC_SIZE_STREAM(t, d, dv, n_sink, n_window,                                                                        \
                    KVC_SIZE_EVICT(t, d, dv, KVC_SIZE_CAP(budget, n_sink, n_window),                                   \
                                   64u + 4u * KVC_SIZE_SNAPKV_ROWS * (uint64_t)(d)))

/** expected-attention: and the prompt queries' mean and squared deviations (2 doubles a dimension) after a 64-byte header. */
#define KVC_EXPECTED_ATTENTION_ARENA_BYTES(t, d, dv, budget, n_sink, n_window)                                         \
    KVC_SIZE_STREAM(t, d, dv, n_sink, n_window,                                                                        \
                    KVC_SIZE_EVICT(t, d, dv, KVC_SIZE_CAP(budget, n_sink, n_window), 64u + 16u * (uint64_t)(d)))

/** A cache of n_layers x n_kv_heads streams of @p stream_bytes each (policy
 *  KVC_BUDGET_UNIFORM): the header, the table of offsets, then the streams. */
#define KVC_CACHE_ARENA_BYTES(n_layers, n_kv_heads, stream_bytes)                                                      \
    (KVC_SIZE_ALIGN(KVC_SIZE_CACHE_HEADER) + KVC_SIZE_ALIGN(8u * (uint64_t)(n_layers) * (n_kv_heads)) +                \
     (uint64_t)(n_layers) * (n_kv_heads)*KVC_SIZE_ALIGN(stream_bytes))

#endif
