/**
 * @file kvc_cache.h
 * @brief The cache manager a decoder calls: one compressed stream per
 *        (layer, kv-head), carved from one arena, with per-layer budgets.
 *
 * Per token and layer the decoder calls kvc_cache_append(layer, k, v) with the
 * post-RoPE keys/values of all kv-heads, then kvc_cache_attend(layer, q, out)
 * with the queries of all query heads; the query heads of one GQA group are
 * answered by one attend call on their kv-head's stream.
 *
 * Threads (kvc.h, docs/threads.md): different layers may be appended and
 * attended from different threads at once; within a layer, an append or an
 * observed attend needs the layer to itself, while plain attends may overlap.
 */
#ifndef KVC_CACHE_H
#define KVC_CACHE_H

#include "kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How the per-(layer, head) budget is spread over layers. */
typedef enum kvc_budget_policy {
    KVC_BUDGET_UNIFORM = 0,            /**< every layer gets `budget` */
    KVC_BUDGET_PYRAMID = 1,            /**< PyramidKV: linear from (1+r)*budget at layer 0 to
                                 (1-r)*budget at the last layer, r = pyramid_ratio;
                                 the total is at most n_layers * budget */
    KVC_BUDGET_HEADS = 2,              /**< head-wise: every (layer, kv head) its own method,
                                 budget, sinks, window and protected slots, from a table given to
                                 kvc_cache_init_heads (kept in the arena); the
                                 streams are sized for their own budgets (ragged,
                                 not masked) */
    KVC_BUDGET_ENUM_32BIT = 0x7fffffff /**< not a policy: keeps the enum 4 bytes under
                                              -fshort-enums (arm-none-eabi): one arena layout */
} kvc_budget_policy;

/** One stream's own settings under KVC_BUDGET_HEADS. Everything else (storage
 *  type, method parameters, protect_radius, seed) comes from the cache
 *  configuration's `stream`. */
typedef struct kvc_cache_head {
    uint32_t method;    /**< kvc_method */
    uint32_t budget;    /**< tokens, as kvc_stream_config.budget */
    uint32_t n_sink;    /**< as kvc_stream_config.n_sink */
    uint32_t n_window;  /**< as kvc_stream_config.n_window */
    uint32_t n_protect; /**< as kvc_stream_config.n_protect (a share of this head's budget) */
} kvc_cache_head;

/** Largest number of layers / kv-heads a cache accepts. */
#define KVC_CACHE_MAX_LAYERS 256u
#define KVC_CACHE_MAX_HEADS  256u

/** Cache configuration (plain data). */
typedef struct kvc_cache_config {
    uint32_t n_layers;   /**< 1 .. KVC_CACHE_MAX_LAYERS */
    uint32_t n_heads;    /**< query heads, a multiple of n_kv_heads, <= n_kv_heads * KVC_MAX_QUERY_HEADS */
    uint32_t n_kv_heads; /**< 1 .. KVC_CACHE_MAX_HEADS */
    uint32_t head_dim;   /**< 1 .. KVC_MAX_HEAD_DIM (keys and values) */
    /** Per-stream settings: method, budget (tokens per layer and kv-head, the
     *  layer average under PYRAMID), n_sink, n_window, beta, seed, SubGen
     *  parameters. Its d/dv fields are ignored (head_dim is used). Stream
     *  (l, h) is seeded with seed + l * n_kv_heads + h. */
    kvc_stream_config stream;
    kvc_budget_policy policy;
    float pyramid_ratio; /**< r in [0, 1); 0 -> 0.5 */
} kvc_cache_config;

/*@ // the cache-wide fields the layout reads, in the ranges kvc_cache_config_problem accepts
    predicate kvc_cache_dims_ok(kvc_cache_config *c) =
      \valid_read(c) && 1 <= c->n_layers <= 256 && 1 <= c->n_kv_heads <= 256;
    logic integer kvc_cache_streams_l(kvc_cache_config *c) = c->n_layers * c->n_kv_heads;
    // the head-wise table, present exactly when the policy needs it
    predicate kvc_cache_heads_ok(kvc_cache_config *c, kvc_cache_head *heads) =
      heads == \null || \valid_read(heads + (0 .. kvc_cache_streams_l(c) - 1));
*/

/** Opaque cache state at the start of its arena. */
typedef struct kvc_cache kvc_cache;

/**
 * @brief As kvc_cache_config_problem, and which layer breaks the rule.
 * @param[out] layer  the first layer whose stream configuration (its budget
 *        under the policy) is refused; UINT32_MAX for a cache-wide rule or
 *        none. May be NULL.
 */
/*@ requires cfg == \null || \valid_read(cfg);
    requires layer == \null || (\valid(layer) && \separated(layer, cfg));
    assigns *layer;
    ensures \result == \null ==> kvc_cache_dims_ok(cfg);
*/
const char *kvc_cache_config_problem_at(const kvc_cache_config *cfg, uint32_t *layer);

/** @brief Why @p cfg is rejected (a static sentence), or NULL when it is valid. */
/*@ requires cfg == \null || \valid_read(cfg);
    assigns \nothing;
    ensures \result == \null ==> kvc_cache_dims_ok(cfg);
*/
const char *kvc_cache_config_problem(const kvc_cache_config *cfg);

/** @brief Arena bytes for @p cfg, 0 when invalid (at most PTRDIFF_MAX, and 2^61 on
 *  64-bit targets; a multiple of 64). */
/*@ requires cfg == \null || \valid_read(cfg);
    assigns \nothing;
    ensures \result <= PTRDIFF_MAX && \result % 64 == 0;
*/
size_t kvc_cache_arena_bytes(const kvc_cache_config *cfg);

/**
 * @brief Why a head-wise configuration is rejected (a static sentence), or NULL.
 * @param cfg    policy KVC_BUDGET_HEADS; its stream.method / budget / n_sink /
 *               n_window are ignored (the table gives them).
 * @param heads  n_layers x n_kv_heads entries, layer-major.
 * @param[out] layer,head  the first entry refused (UINT32_MAX for a cache-wide
 *               rule or none); may be NULL.
 */
/*@ requires cfg == \null || \valid_read(cfg);
    requires cfg != \null && kvc_cache_dims_ok(cfg) ==> kvc_cache_heads_ok(cfg, heads);
    requires layer == \null || (\valid(layer) && \separated(layer, cfg));
    requires head == \null || (\valid(head) && \separated(head, cfg) && (layer == \null || \separated(layer, head)));
    assigns *layer, *head;
    ensures \result == \null ==> kvc_cache_dims_ok(cfg);
*/
const char *kvc_cache_heads_problem(const kvc_cache_config *cfg, const kvc_cache_head *heads, uint32_t *layer,
                                    uint32_t *head);

/** @brief Arena bytes of a head-wise cache, 0 when kvc_cache_heads_problem refuses it. */
/*@ requires cfg == \null || \valid_read(cfg);
    requires cfg != \null && kvc_cache_dims_ok(cfg) ==> kvc_cache_heads_ok(cfg, heads);
    assigns \nothing;
    ensures \result <= PTRDIFF_MAX && \result % 64 == 0;
*/
size_t kvc_cache_arena_bytes_heads(const kvc_cache_config *cfg, const kvc_cache_head *heads);

/**
 * @brief kvc_cache_init for KVC_BUDGET_HEADS: the table is copied into the
 *        arena (and covered by the header's digest), so a snapshot carries it.
 * @return KVC_OK, KVC_E_ARG (kvc_cache_heads_problem), KVC_E_UNSUPPORTED or KVC_E_ARENA.
 */
kvc_status kvc_cache_init_heads(void *arena, size_t arena_bytes, const kvc_cache_config *cfg,
                                const kvc_cache_head *heads, kvc_cache **out);

/** @brief The settings stream (layer, kv_head) was built with (under every policy). */
kvc_status kvc_cache_get_head(const kvc_cache *c, uint32_t layer, uint32_t kv_head, kvc_cache_head *out);

/** @brief 1 when some stream's method observes (kvc_method_observes): the decoder should attend
 *         through kvc_cache_attend_observed; 0 otherwise or for a bad handle. */
int kvc_cache_observes(const kvc_cache *c);

/** @brief Budget (tokens) of each kv-head stream of @p layer under @p cfg; 0 when a cache-wide
 *         field is invalid or layer >= n_layers (a layer whose own budget breaks a stream rule
 *         still gets its budget, to name it in a message), and under KVC_BUDGET_HEADS. */
uint32_t kvc_cache_get_layer_budget(const kvc_cache_config *cfg, uint32_t layer);

/**
 * @brief Initialise a cache in @p arena (KVC_ARENA_ALIGN-aligned,
 *        >= kvc_cache_arena_bytes bytes).
 * @return KVC_OK, KVC_E_ARG, KVC_E_UNSUPPORTED or KVC_E_ARENA.
 */
kvc_status kvc_cache_init(void *arena, size_t arena_bytes, const kvc_cache_config *cfg, kvc_cache **out);

/**
 * @brief Append one token's keys and values for @p layer.
 * @param k,v  n_kv_heads x head_dim floats each (finite).
 * @return KVC_OK, or the first failing stream's status; on error no stream of
 *         the layer changed (every input is checked before any append).
 */
kvc_status kvc_cache_append(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *k, const float *v);

/** @brief Scratch bytes kvc_cache_prefill needs for @p n tokens: the largest of its
 *         streams' (kvc_stream_prefill_work_bytes), so one buffer serves every layer and
 *         head in turn; 0 when no stream needs any, or for a bad handle or n. */
size_t kvc_cache_prefill_work_bytes(const kvc_cache *c, size_t n);

/**
 * @brief Append @p n tokens of @p layer at once (kvc_stream_prefill on each
 *        kv head's stream): the prompt of a decoder that prefills at full
 *        attention, then decodes. balancekv-prefill in mode offline needs it.
 * @param k,v   n x n_kv_heads x head_dim floats each (token-major, then head), finite.
 * @param n     1 .. KVC_MAX_PREFILL_TOKENS.
 * @param work  kvc_cache_prefill_work_bytes(c, n) bytes, 8-aligned (NULL when 0),
 *              overlapping neither @p k nor @p v (KVC_E_ARG otherwise: the
 *              call writes work while it still reads the rows).
 * @return KVC_OK, or the first failing stream's status; a refusal of the
 *         inputs (KVC_E_ARG, KVC_E_ARENA, KVC_E_NONFINITE, KVC_E_CORRUPT)
 *         changes no stream. A stream that fills mid-call (exact, or an
 *         exact tail: KVC_E_CAPACITY) leaves the state a loop of
 *         kvc_cache_append calls leaves: tokens 0 .. t-1 in every head of the
 *         layer, token t and later in none.
 */
kvc_status kvc_cache_prefill(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *k, const float *v,
                             size_t n, void *work, size_t work_bytes);

/**
 * @brief Attend all query heads of @p layer.
 * @param q    n_heads x head_dim floats.  @param out  n_heads x head_dim floats.
 */
kvc_status kvc_cache_attend(const kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q, float *out);

/** @brief Workspace bytes kvc_cache_attend_observed needs now for @p layer (the largest of its
 *         streams'; ask before each call, the views grow); 0 for a bad handle or layer. */
size_t kvc_cache_attend_observed_work_bytes(const kvc_cache *c, uint32_t layer);

/**
 * @brief kvc_cache_attend for query-aware methods (kvc_method_observes): each
 *        kv head's stream also receives the attention its entries got from the
 *        head's query group (kvc_stream_attend_observed).
 * @param work  kvc_cache_attend_observed_work_bytes(c, layer) bytes, 8-aligned.
 * @return KVC_OK or the first failing stream's status (earlier heads have
 *         observed: a failure here means a corrupted cache or bad input).
 */
kvc_status kvc_cache_attend_observed(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q, float *out,
                                     void *work, size_t work_bytes);

/**
 * @brief Query-aware methods (SnapKV): the prompt's last queries of @p layer,
 *        given before the prompt is appended; each kv head's stream receives
 *        the rows of its query group (kvc_stream_prefill_queries). Methods
 *        without the hook ignore them.
 * @param q      n_pos x n_heads x head_dim finite floats (position-major, then head).
 * @param n_pos  1 .. KVC_MAX_BATCH_POSITIONS.
 * @return KVC_OK; KVC_E_ARG; KVC_E_NONFINITE (nothing given to any stream); KVC_E_CORRUPT.
 */
kvc_status kvc_cache_prefill_queries(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q,
                                     size_t n_pos);

/**
 * @brief kvc_stream_mark on the stream of (@p layer, @p kv_head): token
 *        @p token (0-based position) is a protected-span centre (@p centre 1)
 *        or not (0), whatever the key-outlier test said.
 * @return as kvc_stream_mark; KVC_E_ARG also for a layer or head out of range.
 */
kvc_status kvc_cache_mark(kvc_cache *c, uint32_t layer, uint32_t kv_head, uint64_t token, int centre);

/**
 * @brief kvc_stream_observe on the stream of (@p layer, @p kv_head): the
 *        attention mass its view entries received from an attend computed
 *        elsewhere (a device's kvc_cuda_batch_attend_mass, mapped to view order
 *        by kvc_mirror_view_mass). kvc_cache_attend_observed does both at once
 *        on the host.
 * @param mass  @p n = kvc_stream_view_entries of that stream finite doubles >= 0.
 * @return as kvc_stream_observe; KVC_E_ARG also for a layer or head out of range.
 */
kvc_status kvc_cache_observe(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, uint32_t kv_head,
                             const double *mass, size_t n);

/** @brief The stream of (layer, kv_head), or NULL when out of range. */
const kvc_stream *kvc_cache_get_stream(const kvc_cache *c, uint32_t layer, uint32_t kv_head);

/** The configuration @p c was built with (heads, head_dim, layers, stream);
 *  NULL for a NULL or corrupted cache. */
const kvc_cache_config *kvc_cache_get_config(const kvc_cache *c);

/** @brief Cache elements held now / at peak, summed over every stream. */
kvc_status kvc_cache_get_usage(const kvc_cache *c, uint64_t *elements, uint64_t *peak_elements);

/** @brief The same in bytes of the storage type (elements x kvc_element_bytes(dtype, head_dim);
 *  the current token of each stream, kept in f32, is counted at the storage type's cost). */
kvc_status kvc_cache_get_usage_bytes(const kvc_cache *c, uint64_t *bytes, uint64_t *peak_bytes);

/**
 * @brief Full validation of a cache arena (e.g. restored from a snapshot):
 *        the header, the offset table recomputed entry by entry, and every
 *        stream validated as kvc_stream_validate does, with its configuration
 *        checked against its (layer, head). Every cache call runs the cheap
 *        part of this on the streams it touches.
 * @param arena_bytes  bytes readable at @p arena.
 * @return KVC_OK, KVC_E_ARG (NULL), KVC_E_ARENA (misaligned or too short),
 *         KVC_E_STATE (never initialised), KVC_E_CORRUPT.
 */
kvc_status kvc_cache_validate(const void *arena, size_t arena_bytes);

/** @brief 64-bit checksum of the whole cache arena, data included (0 for a bad handle);
 *         keep it beside a snapshot to detect corrupted data. */
uint64_t kvc_cache_checksum(const kvc_cache *c);

#ifdef __cplusplus
}
#endif
#endif
