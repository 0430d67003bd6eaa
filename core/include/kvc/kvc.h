/**
 * @file kvc.h
 * @brief kvcompress umbrella header: streaming KV-cache compression with a
 *        bounded attention error, in caller-provided memory.
 *
 * Two tiers, as zstd has (docs/api.md): what this header declares by default
 * is the stable surface; `#define KVC_ADVANCED` before including it adds the
 * advanced tier listed below.
 *
 * Thread safety (docs/threads.md; tests/unit/test_threads.c runs every
 * allowed pattern under ThreadSanitizer). The library starts no threads,
 * holds no global mutable state and takes no locks; an arena is plain memory,
 * so what may overlap follows from which calls write it:
 *  - Writers of a stream: kvc_stream_init, _append, _prefill, _mark,
 *    _observe, _attend_observed, _prefill_queries (and kvc_cache_init,
 *    _append, _prefill, _attend_observed, _prefill_queries for every stream
 *    of their layer; kvc_cache_mark for its one stream). A prefill's `work`
 *    is the call's own until it returns.
 *    A writer needs the stream to itself: no other call, reader or writer,
 *    on that stream meanwhile. Two threads appending to one stream without
 *    the caller's lock race, and the stream's own checks then report
 *    KVC_E_CORRUPT from then on.
 *  - Readers: kvc_stream_attend, _attend_batch, _attend_part, _view,
 *    _get_stats, _checksum, _validate and the size and usage queries (and
 *    kvc_cache_attend, _stream, _usage, _checksum, _validate). Any number may
 *    run at once on one stream, e.g. the parts of a split-K attend.
 *  - Different streams never share bytes: separate arenas, and the layers of
 *    one kvc_cache (each (layer, kv head) its own stream), may be written
 *    from different threads at once. Its layer is the unit a decoder thread
 *    owns.
 *  - Kernel tables (kvc_kernels_ref, _best, _at; accel/cuda's table, which
 *    serialises its device scratch itself) are immutable and shared freely.
 *  - A kvc_rng belongs to one thread at a time.
 * Everything else (a writer next to readers of one stream) needs the
 * caller's lock, e.g. a reader-writer lock per stream or per layer.
 */
#ifndef KVC_H
#define KVC_H

/* ---- the stable tier: status and storage types, sizes, the kernel
 * tables by name, the method registry, one stream, the cache manager ---- */
#include "kvc_types.h"
#include "kvc_sizes.h"
#include "kvc_kernels.h"
#include "kvc_stream.h"
#include "kvc_cache.h"

/* ---- the advanced tier (#define KVC_ADVANCED before this header): the
 * batched, split-K and observed attends of one stream, its raw view, the
 * kernel-table entry points for backend authors, the attend kernel itself,
 * the integer (fixed-point) attend, the counter-based RNG, offline BalanceKV
 * the budget grammar and the mirror of a stream in another memory. These may change
 * between minor versions; the stable tier does not. ---- */
#if defined(KVC_ADVANCED)
#include "kvc_rng.h"
#include "kvc_attend.h"
#include "kvc_fixed.h"
#include "kvc_offline.h"
#include "kvc_budget.h"
#include "kvc_mirror.h"
#endif

#endif
