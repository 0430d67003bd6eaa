/* Cache manager: n_layers x n_kv_heads streams in one arena. The header keeps
 * each stream's offset (a table right after it) and, under KVC_BUDGET_HEADS,
 * each stream's own method, budget, sinks, window and protected slots (a
 * second table); streams
 * are independent state machines, so the manager itself holds no per-token
 * state. */
#include "kvc/kvc_cache.h"

#include <stdint.h>

#include "arena.h"
#include "plan.h"
#include "stream_private.h"
#include "internal/kvc_internal.h"
#include "kvc/kvc_attend.h"

_Static_assert(sizeof(kvc_budget_policy) == 4, "enums stored in arenas are 4 bytes on every ABI");

#define KVC_MAGIC_CACHE 0x4B564334u /* "KVC4": format 4 (the stream configuration's parameters by name), see arena.h */

struct kvc_cache {
    uint32_t magic;
    uint32_t pad_;
    uint64_t off_table;   /* n_layers * n_kv_heads stream offsets (uint64_t) */
    uint64_t total_bytes; /* the whole cache arena */
    uint64_t digest;      /* of cfg, off_table and total_bytes (fixed at init) */
    kvc_cache_config cfg;
};
_Static_assert(sizeof(kvc_cache_config) == 176, "kvc_cache_config must be the same on every ABI");
_Static_assert(sizeof(struct kvc_cache) == KVC_SIZE_CACHE_HEADER, "the cache header must be the same on every ABI");

/* The largest cache arena: what the platform can address, and at most 2^61
 * bytes on LP64, so that the 64-bit cursor cannot wrap while the streams are
 * laid out (each stream's arena is at most PTRDIFF_MAX: cache_layout checks
 * the sum before every addition). */
#define KVC_CACHE_BYTES_MAX                                                                                            \
    ((uint64_t)PTRDIFF_MAX < 2305843009213693952ull ? (uint64_t)PTRDIFF_MAX : 2305843009213693952ull)

static uint64_t cache_layout(const kvc_cache_config *c, const kvc_cache_head *heads, uint64_t *table);

/* Where the tables sit: the offsets right after the header, then (head-wise
 * policy only) the settings; tables_end is where the first stream may start. */
/*@ requires kvc_cache_dims_ok(c);
    assigns \nothing;
    ensures \result == kvc_cache_streams_l(c) && 1 <= \result <= 65536;
*/
static uint64_t n_streams(const kvc_cache_config *c)
{
    //@ ghost kvc_mul_le(c->n_layers, 256, c->n_kv_heads, 256);
    return (uint64_t)c->n_layers * c->n_kv_heads;
}
/*@ assigns \nothing;
    ensures \result == 256;
*/
static uint64_t table_off(void) { return KVC_ALIGN_UP((uint64_t)sizeof(struct kvc_cache)); }
/*@ requires kvc_cache_dims_ok(c);
    assigns \nothing;
    ensures \result % 64 == 0 && 256 + 8 * kvc_cache_streams_l(c) <= \result <= 256 + 8 * 65536 + 63;
*/
static uint64_t heads_off(const kvc_cache_config *c)
{
    return KVC_ALIGN_UP(table_off() + n_streams(c) * sizeof(uint64_t));
}
/*@ requires kvc_cache_dims_ok(c);
    assigns \nothing;
    ensures \result <= 20 * 65536;
    ensures c->policy == KVC_BUDGET_HEADS ==> \result == 20 * kvc_cache_streams_l(c);
*/
static uint64_t heads_bytes(const kvc_cache_config *c)
{
    return c->policy == KVC_BUDGET_HEADS ? n_streams(c) * sizeof(kvc_cache_head) : 0;
}
/*@ requires kvc_cache_dims_ok(c);
    assigns \nothing;
    ensures \result % 64 == 0 && 256 + 8 * kvc_cache_streams_l(c) <= \result <= 2097152;
*/
static uint64_t tables_end(const kvc_cache_config *c) { return KVC_ALIGN_UP(heads_off(c) + heads_bytes(c)); }

static const kvc_cache_head *heads_of(const kvc_cache *c)
{
    return c->cfg.policy == KVC_BUDGET_HEADS ? KVC_AT_C(c, heads_off(&c->cfg), kvc_cache_head) : NULL;
}

static uint64_t cache_digest(const kvc_cache *c)
{
    uint64_t h = kvc_digest(KVC_DIGEST_SEED, &c->off_table, sizeof c->off_table);
    h = kvc_digest(h, &c->total_bytes, sizeof c->total_bytes);
    h = kvc_digest(h, &c->cfg, sizeof c->cfg);
    if (c->cfg.policy == KVC_BUDGET_HEADS) h = kvc_digest(h, heads_of(c), (size_t)heads_bytes(&c->cfg));
    return h;
}

static uint32_t layer_budget(const kvc_cache_config *c, uint32_t layer)
{
    if (c->policy != KVC_BUDGET_PYRAMID || c->n_layers == 1) return c->stream.budget;
    const double r = c->pyramid_ratio > 0.0f ? (double)c->pyramid_ratio : 0.5;
    const double frac = 1.0 + r - 2.0 * r * (double)layer / (double)(c->n_layers - 1u);
    return (uint32_t)((double)c->stream.budget * frac); /* floor: the total never exceeds L * budget */
}

/* The configuration of stream (layer, head); `heads` is the head-wise table
 * (NULL under the other policies).
 * trusted-by: assigns nothing (a copy of c->stream with five fields set, and
 * layer_budget's float arithmetic, which WP's integer models do not cover);
 * tests/model/test_model.c (per_layer_budgets_fit_arena) checks the pyramid
 * and uniform budgets, tests/unit/test_cache_heads.c the head-wise table. */
/*@ requires kvc_cache_dims_ok(c) && kvc_cache_heads_ok(c, heads) && layer < c->n_layers && head < c->n_kv_heads;
    assigns \nothing;
*/
static kvc_stream_config stream_config(const kvc_cache_config *c, const kvc_cache_head *heads, uint32_t layer,
                                       uint32_t head)
{
    kvc_stream_config s = c->stream;
    s.d = c->head_dim;
    s.dv = c->head_dim;
    s.budget = layer_budget(c, layer);
    if (heads != NULL) {
        const kvc_cache_head *e = &heads[(size_t)layer * c->n_kv_heads + head];
        s.method = (kvc_method)e->method;
        s.budget = e->budget, s.n_sink = e->n_sink, s.n_window = e->n_window, s.n_protect = e->n_protect;
    }
    s.seed = c->stream.seed + (uint64_t)layer * c->n_kv_heads + head;
    return s;
}

/* The rules of every policy; `heads` must be given exactly under KVC_BUDGET_HEADS. */
/*@ requires c == \null || \valid_read(c);
    requires c != \null && kvc_cache_dims_ok(c) ==> kvc_cache_heads_ok(c, heads);
    requires layer == \null || (\valid(layer) && \separated(layer, c));
    requires head == \null || (\valid(head) && \separated(head, c) && (layer == \null || \separated(layer, head)));
    assigns *layer, *head;
    ensures \result == \null ==> kvc_cache_dims_ok(c);
*/
static const char *cache_problem(const kvc_cache_config *c, const kvc_cache_head *heads, uint32_t *layer,
                                 uint32_t *head)
{
    if (layer) *layer = UINT32_MAX;
    if (head) *head = UINT32_MAX;
    if (c == NULL) return "configuration is NULL";
    if (c->n_layers < 1 || c->n_layers > KVC_CACHE_MAX_LAYERS) return "n_layers must be in 1..256";
    if (c->n_kv_heads < 1 || c->n_kv_heads > KVC_CACHE_MAX_HEADS) return "n_kv_heads must be in 1..256";
    if (c->n_heads < c->n_kv_heads || c->n_heads % c->n_kv_heads != 0)
        return "n_heads must be a positive multiple of n_kv_heads";
    if (c->n_heads / c->n_kv_heads > KVC_MAX_QUERY_HEADS) return "at most 64 query heads per kv-head";
    if (c->head_dim < 1 || c->head_dim > KVC_MAX_HEAD_DIM) return "head_dim must be in 1..256";
    if (c->policy != KVC_BUDGET_UNIFORM && c->policy != KVC_BUDGET_PYRAMID && c->policy != KVC_BUDGET_HEADS)
        return "unknown budget policy";
    if (c->policy == KVC_BUDGET_HEADS && heads == NULL)
        return "the head-wise policy needs its table: use kvc_cache_init_heads";
    if (c->policy != KVC_BUDGET_HEADS && heads != NULL) return "a head-wise table needs policy KVC_BUDGET_HEADS";
    if (!(c->pyramid_ratio >= 0.0f && c->pyramid_ratio < 1.0f)) return "pyramid_ratio must be in [0, 1)";
    /* streams of one layer differ only in their seed unless the table says otherwise */
    const uint32_t per_layer = heads != NULL ? c->n_kv_heads : 1u;
    /*@ loop invariant 0 <= l <= c->n_layers;
        loop assigns l;
        loop variant c->n_layers - l;
    */
    for (uint32_t l = 0; l < c->n_layers; l++) {
        /*@ loop invariant 0 <= h <= per_layer;
            loop assigns h;
            loop variant per_layer - h;
        */
        for (uint32_t h = 0; h < per_layer; h++) {
            kvc_stream_config s = stream_config(c, heads, l, h);
            const char *why = kvc_stream_config_problem(&s);
            if (why) {
                if (layer) *layer = l;
                if (head && heads != NULL) *head = h;
                return why;
            }
        }
    }
    if (cache_layout(c, heads, NULL) == 0) return "the cache arena would exceed what this platform can address";
    return NULL;
}

const char *kvc_cache_config_problem_at(const kvc_cache_config *c, uint32_t *layer)
{
    return cache_problem(c, NULL, layer, NULL);
}

const char *kvc_cache_config_problem(const kvc_cache_config *c) { return cache_problem(c, NULL, NULL, NULL); }

const char *kvc_cache_heads_problem(const kvc_cache_config *cfg, const kvc_cache_head *heads, uint32_t *layer,
                                    uint32_t *head)
{
    if (heads == NULL) {
        if (layer) *layer = UINT32_MAX;
        if (head) *head = UINT32_MAX;
        return "the head-wise table is NULL";
    }
    return cache_problem(cfg, heads, layer, head);
}

uint32_t kvc_cache_get_layer_budget(const kvc_cache_config *c, uint32_t layer)
{
    /* defined whenever the cache-wide fields are valid, so that a caller can
       name the budget of the layer kvc_cache_config_problem_at refused */
    uint32_t bad;
    if (kvc_cache_config_problem_at(c, &bad) != NULL && bad == UINT32_MAX) return 0;
    if (layer >= c->n_layers || c->policy == KVC_BUDGET_HEADS) return 0;
    return layer_budget(c, layer);
}

/* Layout: header, offset table, then every stream arena in (layer, head)
 * order. Sizes in 64 bits; 0 when the total exceeds what the platform can
 * address (KVC_CACHE_BYTES_MAX). The sum is checked before each addition,
 * so the cursor never wraps, whatever the streams' sizes. */
/*@ requires kvc_cache_dims_ok(c) && kvc_cache_heads_ok(c, heads);
    requires table == \null || (\valid(table + (0 .. kvc_cache_streams_l(c) - 1)) &&
                                \separated(table + (0 .. kvc_cache_streams_l(c) - 1), c));
    assigns table[0 .. kvc_cache_streams_l(c) - 1];
    ensures \result == 0 || (\result % 64 == 0 && 256 + 8 * kvc_cache_streams_l(c) <= \result <= KVC_CACHE_BYTES_MAX);
    ensures \result != 0 && table != \null ==>
      (\forall integer i; 0 <= i < kvc_cache_streams_l(c) ==>
         table[i] % 64 == 0 && 256 + 8 * kvc_cache_streams_l(c) <= table[i] <= \result) &&
      (\forall integer i; 0 <= i < kvc_cache_streams_l(c) - 1 ==> table[i] <= table[i + 1]);
*/
static uint64_t cache_layout(const kvc_cache_config *c, const kvc_cache_head *heads, uint64_t *table)
{
    const uint32_t n_kv = c->n_kv_heads;
    const uint64_t n = n_streams(c), first = tables_end(c);
    uint64_t cur = first;
    /*@ loop invariant 0 <= i <= n && first <= cur <= KVC_CACHE_BYTES_MAX + 63 && cur % 64 == 0;
        loop invariant table != \null ==> \forall integer j; 0 <= j < i ==> table[j] % 64 == 0 && first <= table[j] <= cur;
        loop invariant table != \null ==> \forall integer j; 0 <= j < i - 1 ==> table[j] <= table[j + 1];
        loop assigns i, cur, table[0 .. n - 1];
        loop variant n - i;
    */
    for (uint64_t i = 0; i < n; i++) {
        const kvc_stream_config s = stream_config(c, heads, (uint32_t)(i / n_kv), (uint32_t)(i % n_kv));
        const uint64_t bytes = kvc_stream_arena_bytes(&s);
        if (cur > KVC_CACHE_BYTES_MAX || bytes > KVC_CACHE_BYTES_MAX - cur) return 0;
        const uint64_t off = kvc_carve(&cur, bytes);
        if (table) table[i] = off;
    }
    return cur > KVC_CACHE_BYTES_MAX ? 0 : cur;
}

size_t kvc_cache_arena_bytes(const kvc_cache_config *c)
{
    if (kvc_cache_config_problem(c) != NULL) return 0;
    return (size_t)cache_layout(c, NULL, NULL);
}

size_t kvc_cache_arena_bytes_heads(const kvc_cache_config *c, const kvc_cache_head *heads)
{
    if (kvc_cache_heads_problem(c, heads, NULL, NULL) != NULL) return 0;
    return (size_t)cache_layout(c, heads, NULL);
}

static const uint64_t *table_of(const kvc_cache *c) { return KVC_AT_C(c, c->off_table, uint64_t); }

static kvc_status cache_init(void *arena, size_t arena_bytes, const kvc_cache_config *cfg, const kvc_cache_head *heads,
                             kvc_cache **out)
{
    if (cfg == NULL || out == NULL) return KVC_E_ARG;
    if (cache_problem(cfg, heads, NULL, NULL) != NULL) return KVC_E_ARG;
    const uint64_t need = cache_layout(cfg, heads, NULL);
    if (need == 0) return KVC_E_ARG;
    if (!kvc_arena_ok(arena, arena_bytes, need)) return KVC_E_ARENA;
    memset(arena, 0, (size_t)need);
    kvc_cache *c = (kvc_cache *)arena;
    c->cfg = *cfg;
    c->off_table = table_off();
    c->total_bytes = need;
    uint64_t *table = KVC_AT(c, c->off_table, uint64_t);
    if (heads != NULL) memcpy(KVC_AT(c, heads_off(cfg), kvc_cache_head), heads, (size_t)heads_bytes(cfg));
    cache_layout(cfg, heads, table);
    for (uint32_t l = 0; l < cfg->n_layers; l++) {
        for (uint32_t h = 0; h < cfg->n_kv_heads; h++) {
            kvc_stream_config s = stream_config(cfg, heads, l, h);
            const uint64_t off = table[(size_t)l * cfg->n_kv_heads + h];
            kvc_stream *st;
            kvc_status rc = kvc_stream_init(KVC_AT(c, off, void), kvc_stream_arena_bytes(&s), &s, &st);
            if (rc != KVC_OK) return rc; /* cannot happen: the configuration was checked */
        }
    }
    c->digest = cache_digest(c);
    c->magic = KVC_MAGIC_CACHE;
    *out = c;
    return KVC_OK;
}

kvc_status kvc_cache_init(void *arena, size_t arena_bytes, const kvc_cache_config *cfg, kvc_cache **out)
{
    return cache_init(arena, arena_bytes, cfg, NULL, out);
}

kvc_status kvc_cache_init_heads(void *arena, size_t arena_bytes, const kvc_cache_config *cfg,
                                const kvc_cache_head *heads, kvc_cache **out)
{
    if (heads == NULL) return KVC_E_ARG;
    return cache_init(arena, arena_bytes, cfg, heads, out);
}

/* The fixed header: magic, digest, table placement. */
static kvc_status cache_check(const kvc_cache *c)
{
    if (c == NULL) return KVC_E_STATE;
    if (!kvc_aligned(c)) return KVC_E_ARENA;
    if (c->magic != KVC_MAGIC_CACHE)
        return KVC_MAGIC_FAMILY(c->magic) == KVC_MAGIC_FAMILY(KVC_MAGIC_CACHE) ? KVC_E_CORRUPT : KVC_E_STATE;
    /* the shape first: it places the tables the digest covers */
    if (c->off_table != table_off() || c->cfg.n_layers < 1 || c->cfg.n_layers > KVC_CACHE_MAX_LAYERS ||
        c->cfg.n_kv_heads < 1 || c->cfg.n_kv_heads > KVC_CACHE_MAX_HEADS || c->cfg.head_dim < 1 ||
        c->cfg.head_dim > KVC_MAX_HEAD_DIM || c->cfg.n_heads < c->cfg.n_kv_heads ||
        c->cfg.n_heads % c->cfg.n_kv_heads != 0 || c->cfg.n_heads / c->cfg.n_kv_heads > KVC_MAX_QUERY_HEADS ||
        c->cfg.policy > KVC_BUDGET_HEADS || c->total_bytes < tables_end(&c->cfg))
        return KVC_E_CORRUPT;
    if (c->digest != cache_digest(c)) return KVC_E_CORRUPT;
    return KVC_OK;
}

/* Stream (layer, h) of a checked cache, or NULL when its table entry or the
 * stream there does not check out (a valid stream of another layer or head,
 * e.g. from a corrupted offset, differs in its configuration's seed). */
static const kvc_stream *stream_at(const kvc_cache *c, uint32_t layer, uint32_t h)
{
    const uint64_t first = tables_end(&c->cfg);
    const uint64_t off = table_of(c)[(size_t)layer * c->cfg.n_kv_heads + h];
    if (!kvc_region_ok(off, kvc_stream_header_bytes(), first, c->total_bytes)) return NULL;
    const kvc_stream *st = KVC_AT_C(c, off, kvc_stream);
    if (kvc_stream_check(st) != KVC_OK || kvc_stream_plan_of(st)->arena_bytes > c->total_bytes - off) return NULL;
    const kvc_stream_config want = stream_config(&c->cfg, heads_of(c), layer, h);
    if (memcmp(&want, kvc_stream_config_of(st), sizeof want) != 0) return NULL;
    return st;
}

/* Stream (layer, h) that stream_at has just accepted: no second check. */
static kvc_stream *stream_checked_at(const kvc_cache *c, uint32_t layer, uint32_t h)
{
    return (kvc_stream *)(uintptr_t)KVC_AT_C(c, table_of(c)[(size_t)layer * c->cfg.n_kv_heads + h], kvc_stream);
}

kvc_status kvc_cache_validate(const void *arena, size_t arena_bytes)
{
    if (arena == NULL) return KVC_E_ARG;
    if (!kvc_aligned(arena) || arena_bytes < sizeof(struct kvc_cache)) return KVC_E_ARENA;
    const kvc_cache *c = (const kvc_cache *)arena;
    /* the tables must be readable before the digest reads them */
    if (c->magic == KVC_MAGIC_CACHE && c->cfg.n_layers <= KVC_CACHE_MAX_LAYERS &&
        c->cfg.n_kv_heads <= KVC_CACHE_MAX_HEADS && c->cfg.policy <= KVC_BUDGET_HEADS &&
        arena_bytes < tables_end(&c->cfg))
        return KVC_E_ARENA;
    kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    const kvc_cache_head *heads = heads_of(c);
    if (cache_problem(&c->cfg, heads, NULL, NULL) != NULL) return KVC_E_CORRUPT;
    if (arena_bytes < c->total_bytes) return KVC_E_ARENA;
    /* the table recomputed entry by entry, and every stream validated in full */
    uint64_t cur = tables_end(&c->cfg);
    for (uint32_t l = 0; l < c->cfg.n_layers; l++) {
        for (uint32_t h = 0; h < c->cfg.n_kv_heads; h++) {
            kvc_stream_config s = stream_config(&c->cfg, heads, l, h);
            const uint64_t off = kvc_carve(&cur, kvc_stream_arena_bytes(&s));
            if (table_of(c)[(size_t)l * c->cfg.n_kv_heads + h] != off || cur > c->total_bytes) return KVC_E_CORRUPT;
            rc = kvc_stream_validate(KVC_AT_C(c, off, void), (size_t)(c->total_bytes - off));
            if (rc != KVC_OK) return rc == KVC_E_STATE || rc == KVC_E_ARENA ? KVC_E_CORRUPT : rc;
            if (stream_at(c, l, h) == NULL) return KVC_E_CORRUPT;
        }
    }
    return cur == c->total_bytes ? KVC_OK : KVC_E_CORRUPT;
}

uint64_t kvc_cache_checksum(const kvc_cache *c)
{
    if (cache_check(c) != KVC_OK) return 0;
    const uint64_t h = kvc_digest(KVC_DIGEST_SEED, c, (size_t)c->total_bytes);
    return h ? h : 1u;
}

kvc_status kvc_cache_get_head(const kvc_cache *c, uint32_t layer, uint32_t kv_head, kvc_cache_head *out)
{
    const kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (out == NULL || layer >= c->cfg.n_layers || kv_head >= c->cfg.n_kv_heads) return KVC_E_ARG;
    const kvc_stream_config s = stream_config(&c->cfg, heads_of(c), layer, kv_head);
    out->method = (uint32_t)s.method, out->budget = s.budget, out->n_sink = s.n_sink, out->n_window = s.n_window;
    out->n_protect = s.n_protect;
    return KVC_OK;
}

int kvc_cache_observes(const kvc_cache *c)
{
    if (cache_check(c) != KVC_OK) return 0;
    const kvc_cache_head *heads = heads_of(c);
    if (heads == NULL) return kvc_method_observes(c->cfg.stream.method);
    for (uint64_t i = 0; i < n_streams(&c->cfg); i++)
        if (kvc_method_observes((kvc_method)heads[i].method)) return 1;
    return 0;
}

const kvc_stream *kvc_cache_get_stream(const kvc_cache *c, uint32_t layer, uint32_t kv_head)
{
    if (cache_check(c) != KVC_OK || layer >= c->cfg.n_layers || kv_head >= c->cfg.n_kv_heads) return NULL;
    return stream_at(c, layer, kv_head);
}

kvc_status kvc_cache_mark(kvc_cache *c, uint32_t layer, uint32_t kv_head, uint64_t token, int centre)
{
    const kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (layer >= c->cfg.n_layers || kv_head >= c->cfg.n_kv_heads) return KVC_E_ARG;
    if (stream_at(c, layer, kv_head) == NULL) return KVC_E_CORRUPT;
    return kvc_stream_mark(stream_checked_at(c, layer, kv_head), token, centre);
}

kvc_status kvc_cache_observe(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, uint32_t kv_head,
                             const double *mass, size_t n)
{
    const kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (layer >= c->cfg.n_layers || kv_head >= c->cfg.n_kv_heads) return KVC_E_ARG;
    if (stream_at(c, layer, kv_head) == NULL) return KVC_E_CORRUPT;
    return kvc_stream_observe(stream_checked_at(c, layer, kv_head), kern, mass, n);
}

kvc_status kvc_cache_append(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *k, const float *v)
{
    kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (layer >= c->cfg.n_layers || k == NULL || v == NULL) return KVC_E_ARG;
    const size_t hd = c->cfg.head_dim, nkv = c->cfg.n_kv_heads;
    /* check everything a stream could refuse before the first stream changes */
    if (!kvc_all_finite(k, nkv * hd) || !kvc_all_finite(v, nkv * hd)) return KVC_E_NONFINITE;
    /* every stream of the layer is checked (once) before the first changes;
       appending to one stream touches no other, nor the table */
    for (uint32_t h = 0; h < nkv; h++)
        if (stream_at(c, layer, h) == NULL) return KVC_E_CORRUPT;
    for (uint32_t h = 0; h < nkv; h++) {
        rc = kvc_stream_append_prechecked(stream_checked_at(c, layer, h), kern, k + h * hd, v + h * hd);
        if (rc != KVC_OK) {
            /* only exact can refuse a checked, finite token (capacity), and
               its streams of one layer fill in lockstep: the first head */
            return rc;
        }
    }
    return KVC_OK;
}

size_t kvc_cache_prefill_work_bytes(const kvc_cache *c, size_t n)
{
    if (cache_check(c) != KVC_OK || n < 1 || n > KVC_MAX_PREFILL_TOKENS) return 0;
    size_t most = 0;
    for (uint32_t l = 0; l < c->cfg.n_layers; l++)
        for (uint32_t h = 0; h < c->cfg.n_kv_heads; h++) {
            const kvc_stream *st = stream_at(c, l, h);
            const size_t b = st ? kvc_stream_prefill_work_bytes(st, n) : 0;
            if (b > most) most = b;
        }
    return most;
}

kvc_status kvc_cache_prefill(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *k, const float *v,
                             size_t n, void *work, size_t work_bytes)
{
    kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (layer >= c->cfg.n_layers || k == NULL || v == NULL || n < 1 || n > KVC_MAX_PREFILL_TOKENS) return KVC_E_ARG;
    const size_t hd = c->cfg.head_dim, nkv = c->cfg.n_kv_heads;
    /* every input a stream could refuse, checked before the first changes */
    if (!kvc_all_finite(k, n * nkv * hd) || !kvc_all_finite(v, n * nkv * hd)) return KVC_E_NONFINITE;
    if (work != NULL && work_bytes > 0 &&
        (kvc_bytes_overlap(work, work_bytes, k, n * nkv * hd * sizeof(float)) ||
         kvc_bytes_overlap(work, work_bytes, v, n * nkv * hd * sizeof(float))))
        return KVC_E_ARG; /* the call writes work while it reads the rows */
    for (uint32_t h = 0; h < nkv; h++) {
        const kvc_stream *st = stream_at(c, layer, h);
        if (st == NULL) return KVC_E_CORRUPT;
        const size_t need = kvc_stream_prefill_work_bytes(st, n);
        if (need > 0 && (work == NULL || work_bytes < need || ((uintptr_t)work & 7u) != 0)) return KVC_E_ARENA;
    }
    /* The heads stay in step, as a loop of appends keeps them: head 0 goes
       first and stops at the first token it refuses (an exact store or an
       exact tail that fills); the other heads then take exactly as many.
       Whether a stream takes a finite token depends only on its plan and its
       counts, which the streams of a layer share, so they refuse together. */
    size_t taken = 0;
    const kvc_status first = kvc_stream_prefill_counted(stream_checked_at(c, layer, 0), kern, k, nkv * hd, v, nkv * hd,
                                                        n, work, work_bytes, &taken);
    for (uint32_t h = 1; h < nkv && taken > 0; h++) {
        size_t got = 0;
        rc = kvc_stream_prefill_counted(stream_checked_at(c, layer, h), kern, k + h * hd, nkv * hd, v + h * hd,
                                        nkv * hd, taken, work, work_bytes, &got);
        if (rc != KVC_OK || got != taken) return KVC_E_CORRUPT; /* a head that refused what head 0 took */
    }
    return first;
}

/* Every kv head of a layer answers its query group; `observed`: each stream
 * also receives its entries' attention. The cache and every stream are
 * checked and the table resolved once, here; the streams' entries below
 * check and resolve nothing again. */
static kvc_status attend_heads(const kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q, float *out,
                               int observed, void *work, size_t work_bytes)
{
    kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (layer >= c->cfg.n_layers || q == NULL || out == NULL) return KVC_E_ARG;
    const size_t hd = c->cfg.head_dim, nkv = c->cfg.n_kv_heads, group = c->cfg.n_heads / nkv;
    for (uint32_t h = 0; h < nkv; h++)
        if (stream_at(c, layer, h) == NULL) return KVC_E_CORRUPT;
    const kvc_kernels *table = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    for (uint32_t h = 0; h < nkv; h++) {
        kvc_stream *st = stream_checked_at(c, layer, h);
        const float *qh = q + h * group * hd;
        float *oh = out + h * group * hd;
        rc = observed ? kvc_stream_attend_observed_prechecked(st, table, qh, group, oh, work, work_bytes)
                      : kvc_stream_attend_prechecked(st, table, qh, group, oh);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

kvc_status kvc_cache_attend(const kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q, float *out)
{
    return attend_heads(c, kern, layer, q, out, 0, NULL, 0);
}

kvc_status kvc_cache_prefill_queries(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q,
                                     size_t n_pos)
{
    kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    if (layer >= c->cfg.n_layers || q == NULL || n_pos < 1 || n_pos > KVC_MAX_BATCH_POSITIONS) return KVC_E_ARG;
    const size_t hd = c->cfg.head_dim, nkv = c->cfg.n_kv_heads, nh = c->cfg.n_heads, group = nh / nkv;
    if (!kvc_all_finite(q, n_pos * nh * hd)) return KVC_E_NONFINITE; /* before any stream takes rows */
    for (uint32_t h = 0; h < nkv; h++)
        if (stream_at(c, layer, h) == NULL) return KVC_E_CORRUPT;
    for (size_t p = 0; p < n_pos; p++)
        for (uint32_t h = 0; h < nkv; h++) {
            rc = kvc_stream_prefill_queries(stream_checked_at(c, layer, h), kern, q + (p * nh + h * group) * hd, group);
            if (rc != KVC_OK) return rc;
        }
    return KVC_OK;
}

size_t kvc_cache_attend_observed_work_bytes(const kvc_cache *c, uint32_t layer)
{
    if (cache_check(c) != KVC_OK || layer >= c->cfg.n_layers) return 0;
    const size_t group = c->cfg.n_heads / c->cfg.n_kv_heads;
    size_t most = 0;
    for (uint32_t h = 0; h < c->cfg.n_kv_heads; h++) {
        const size_t w = kvc_stream_attend_observed_work_bytes(stream_at(c, layer, h), group);
        if (w == 0) return 0;
        if (w > most) most = w;
    }
    return most;
}

kvc_status kvc_cache_attend_observed(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q, float *out,
                                     void *work, size_t work_bytes)
{
    return attend_heads(c, kern, layer, q, out, 1, work, work_bytes);
}

const kvc_cache_config *kvc_cache_get_config(const kvc_cache *c) { return cache_check(c) == KVC_OK ? &c->cfg : NULL; }

kvc_status kvc_cache_get_usage(const kvc_cache *c, uint64_t *elements, uint64_t *peak_elements)
{
    kvc_status rc = cache_check(c);
    if (rc != KVC_OK) return rc;
    uint64_t e = 0, p = 0;
    for (uint32_t l = 0; l < c->cfg.n_layers; l++) {
        for (uint32_t h = 0; h < c->cfg.n_kv_heads; h++) {
            kvc_stream_stats s;
            if (kvc_stream_get_stats(stream_at(c, l, h), &s) != KVC_OK) return KVC_E_CORRUPT;
            e += s.elements;
            p += s.peak_elements;
        }
    }
    if (elements) *elements = e;
    if (peak_elements) *peak_elements = p;
    return KVC_OK;
}

kvc_status kvc_cache_get_usage_bytes(const kvc_cache *c, uint64_t *bytes, uint64_t *peak_bytes)
{
    uint64_t e, p;
    const kvc_status rc = kvc_cache_get_usage(c, &e, &p);
    if (rc != KVC_OK) return rc;
    const double per = kvc_element_bytes(c->cfg.stream.dtype, c->cfg.head_dim);
    if (bytes) *bytes = (uint64_t)((double)e * per + 0.5);
    if (peak_bytes) *peak_bytes = (uint64_t)((double)p * per + 0.5);
    return KVC_OK;
}
