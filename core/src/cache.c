/* Cache manager: n_layers x n_kv_heads streams in one arena. The header keeps
 * each stream's offset (a table right after it); streams are independent
 * state machines, so the manager itself holds no per-token state. */
#include "kvc/kvc_cache.h"

#include "arena.h"
#include "kvc/kvc_attend.h"

#define KVC_MAGIC_CACHE 0x4B564331u /* "KVC1" */

struct kvc_cache {
    uint32_t magic;
    uint32_t pad_;
    kvc_cache_config cfg;
    size_t off_table; /* n_layers * n_kv_heads stream offsets (size_t) */
};

static uint32_t layer_budget(const kvc_cache_config *c, uint32_t layer)
{
    if (c->policy == KVC_BUDGET_UNIFORM || c->n_layers == 1) return c->stream.budget;
    const double r = c->pyramid_ratio > 0.0f ? (double)c->pyramid_ratio : 0.5;
    const double frac = 1.0 + r - 2.0 * r * (double)layer / (double)(c->n_layers - 1u);
    return (uint32_t)((double)c->stream.budget * frac); /* floor: the total never exceeds L * budget */
}

static kvc_stream_config stream_config(const kvc_cache_config *c, uint32_t layer, uint32_t head)
{
    kvc_stream_config s = c->stream;
    s.d = c->head_dim;
    s.dv = c->head_dim;
    s.budget = layer_budget(c, layer);
    s.seed = c->stream.seed + (uint64_t)layer * c->n_kv_heads + head;
    return s;
}

const char *kvc_cache_config_problem(const kvc_cache_config *c)
{
    if (c == NULL) return "configuration is NULL";
    if (c->n_layers < 1 || c->n_layers > KVC_CACHE_MAX_LAYERS) return "n_layers must be in 1..256";
    if (c->n_kv_heads < 1 || c->n_kv_heads > KVC_CACHE_MAX_HEADS) return "n_kv_heads must be in 1..256";
    if (c->n_heads < c->n_kv_heads || c->n_heads % c->n_kv_heads != 0)
        return "n_heads must be a positive multiple of n_kv_heads";
    if (c->n_heads / c->n_kv_heads > KVC_MAX_QUERY_HEADS) return "at most 64 query heads per kv-head";
    if (c->head_dim < 1 || c->head_dim > KVC_MAX_HEAD_DIM) return "head_dim must be in 1..256";
    if (c->policy != KVC_BUDGET_UNIFORM && c->policy != KVC_BUDGET_PYRAMID) return "unknown budget policy";
    if (!(c->pyramid_ratio >= 0.0f && c->pyramid_ratio < 1.0f)) return "pyramid_ratio must be in [0, 1)";
    for (uint32_t l = 0; l < c->n_layers; l++) {
        kvc_stream_config s = stream_config(c, l, 0);
        const char *why = kvc_stream_config_problem(&s);
        if (why) return why;
    }
    return NULL;
}

uint32_t kvc_cache_layer_budget(const kvc_cache_config *c, uint32_t layer)
{
    if (kvc_cache_config_problem(c) != NULL || layer >= c->n_layers) return 0;
    return layer_budget(c, layer);
}

/* Layout: header, offset table, then every stream arena in (layer, head) order. */
static size_t cache_layout(const kvc_cache_config *c, size_t *table)
{
    size_t cur = KVC_ALIGN_UP(sizeof(struct kvc_cache));
    const size_t n = (size_t)c->n_layers * c->n_kv_heads;
    size_t off_table = kvc_carve(&cur, n * sizeof(size_t));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        for (uint32_t h = 0; h < c->n_kv_heads; h++) {
            kvc_stream_config s = stream_config(c, l, h);
            size_t off = kvc_carve(&cur, kvc_stream_arena_size(&s));
            if (table) table[(size_t)l * c->n_kv_heads + h] = off;
        }
    }
    (void)off_table;
    return cur;
}

size_t kvc_cache_arena_size(const kvc_cache_config *c)
{
    if (kvc_cache_config_problem(c) != NULL) return 0;
    kvc_stream_config s = stream_config(c, 0, 0);
    kvc_stream_plan p;
    if (kvc_stream_plan_make(&s, &p) != KVC_OK) return 0;
    return cache_layout(c, NULL);
}

static const size_t *table_of(const kvc_cache *c) { return KVC_AT_C(c, c->off_table, size_t); }

kvc_status kvc_cache_init(void *arena, size_t arena_bytes, const kvc_cache_config *cfg, kvc_cache **out)
{
    if (cfg == NULL || out == NULL) return KVC_E_ARG;
    if (kvc_cache_config_problem(cfg) != NULL) return KVC_E_ARG;
    kvc_stream_config s0 = stream_config(cfg, 0, 0);
    kvc_stream_plan p;
    kvc_status rc = kvc_stream_plan_make(&s0, &p);
    if (rc != KVC_OK) return rc;
    const size_t need = cache_layout(cfg, NULL);
    if (!kvc_arena_ok(arena, arena_bytes, need)) return KVC_E_ARENA;
    memset(arena, 0, need);
    kvc_cache *c = (kvc_cache *)arena;
    c->cfg = *cfg;
    c->off_table = KVC_ALIGN_UP(sizeof(struct kvc_cache));
    size_t *table = KVC_AT(c, c->off_table, size_t);
    cache_layout(cfg, table);
    for (uint32_t l = 0; l < cfg->n_layers; l++) {
        for (uint32_t h = 0; h < cfg->n_kv_heads; h++) {
            kvc_stream_config s = stream_config(cfg, l, h);
            const size_t off = table[(size_t)l * cfg->n_kv_heads + h];
            kvc_stream *st;
            rc = kvc_stream_init(KVC_AT(c, off, void), kvc_stream_arena_size(&s), &s, &st);
            if (rc != KVC_OK) return rc; /* cannot happen: the configuration was checked */
        }
    }
    c->magic = KVC_MAGIC_CACHE;
    *out = c;
    return KVC_OK;
}

static int cache_ok(const kvc_cache *c) { return c != NULL && c->magic == KVC_MAGIC_CACHE; }

const kvc_stream *kvc_cache_stream(const kvc_cache *c, uint32_t layer, uint32_t kv_head)
{
    if (!cache_ok(c) || layer >= c->cfg.n_layers || kv_head >= c->cfg.n_kv_heads) return NULL;
    return KVC_AT_C(c, table_of(c)[(size_t)layer * c->cfg.n_kv_heads + kv_head], kvc_stream);
}

static kvc_stream *stream_mut(kvc_cache *c, uint32_t layer, uint32_t h)
{
    return KVC_AT(c, table_of(c)[(size_t)layer * c->cfg.n_kv_heads + h], kvc_stream);
}

kvc_status kvc_cache_append(kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *k,
                            const float *v)
{
    if (!cache_ok(c)) return KVC_E_STATE;
    if (layer >= c->cfg.n_layers || k == NULL || v == NULL) return KVC_E_ARG;
    const size_t hd = c->cfg.head_dim, nkv = c->cfg.n_kv_heads;
    /* check everything a stream could refuse before the first stream changes */
    if (!kvc_all_finite(k, nkv * hd) || !kvc_all_finite(v, nkv * hd)) return KVC_E_NONFINITE;
    for (uint32_t h = 0; h < nkv; h++) {
        kvc_status rc = kvc_stream_append(stream_mut(c, layer, h), kern, k + h * hd, v + h * hd);
        if (rc != KVC_OK) {
            /* only exact can refuse a finite token (capacity), and its streams of
               one layer fill in lockstep, so this is always the first head */
            return rc;
        }
    }
    return KVC_OK;
}

kvc_status kvc_cache_attend(const kvc_cache *c, const kvc_kernels *kern, uint32_t layer, const float *q,
                            float *out)
{
    if (!cache_ok(c)) return KVC_E_STATE;
    if (layer >= c->cfg.n_layers || q == NULL || out == NULL) return KVC_E_ARG;
    const size_t hd = c->cfg.head_dim, nkv = c->cfg.n_kv_heads, group = c->cfg.n_heads / nkv;
    for (uint32_t h = 0; h < nkv; h++) {
        kvc_status rc = kvc_stream_attend(kvc_cache_stream(c, layer, h), kern, q + h * group * hd, group,
                                          out + h * group * hd);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

kvc_status kvc_cache_usage(const kvc_cache *c, uint64_t *elements, uint64_t *peak_elements)
{
    if (!cache_ok(c)) return KVC_E_STATE;
    uint64_t e = 0, p = 0;
    for (uint32_t l = 0; l < c->cfg.n_layers; l++) {
        for (uint32_t h = 0; h < c->cfg.n_kv_heads; h++) {
            kvc_stream_stats s;
            kvc_stream_get_stats(kvc_cache_stream(c, l, h), &s);
            e += s.elements;
            p += s.peak_elements;
        }
    }
    if (elements) *elements = e;
    if (peak_elements) *peak_elements = p;
    return KVC_OK;
}
