/* uniform: Vitter's Algorithm R over the tokens leaving the window. Each kept
 * token stands for seen/kept tokens in both sets, so numerator and
 * denominator are unbiased estimates of the full sums. */
#include "arena.h"
#include "kvc/kvc_rng.h"
#include "methods.h"
#include "shared/rows.h"
#include "internal/kvc_internal.h"

typedef struct uniform_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint64_t seen;
    kvc_rng rng;
    uint64_t off_k, off_v, off_tok;
} uniform_state;
_Static_assert(sizeof(uniform_state) == KVC_SIZE_UNIFORM_STATE, "uniform_state must be the same on every ABI");

static uint64_t uniform_layout(uniform_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(uniform_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_tok = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint32_t));
    return cur;
}

static int uniform_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const uniform_state *s = (const uniform_state *)st;
    uniform_state want;
    uniform_layout(&want, p);
    return s->magic == KVC_MAGIC_UNIFORM && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == want.off_k && s->off_v == want.off_v && s->off_tok == want.off_tok && s->seen == method_in;
}

static uint64_t uniform_arena_size(const kvc_stream_plan *p)
{
    uniform_state tmp;
    return uniform_layout(&tmp, p);
}

static void uniform_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    uniform_state *s = (uniform_state *)arena;
    uniform_layout(s, p);
    s->magic = KVC_MAGIC_UNIFORM;
    s->d = p->d;
    s->dv = p->dv;
    s->capacity = p->capacity;
    s->seen = 0;
    kvc_rng_seed(&s->rng, seed);
}

static uint32_t kept_of(const uniform_state *s) { return s->seen < s->capacity ? (uint32_t)s->seen : s->capacity; }

static void uniform_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    uniform_state *s = (uniform_state *)st;
    uint64_t slot;
    if (s->seen < s->capacity) {
        slot = s->seen;
    } else if (s->seen < UINT32_MAX) {
        slot = kvc_rng_below(&s->rng, (uint32_t)(s->seen + 1)); /* uniform in [0, seen] */
    } else {
        /* past 2^32 tokens: 53-bit uniform, bias < seen / 2^53 */
        slot = (uint64_t)(kvc_rng_unit(&s->rng) * (double)(s->seen + 1));
    }
    s->seen++;
    if (slot >= s->capacity) return;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    kvc_row_store(&K, (size_t)slot, k);
    kvc_row_store(&V, (size_t)slot, v);
    KVC_AT(s, s->off_tok, uint32_t)[slot] = (uint32_t)token;
}

static size_t uniform_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const uniform_state *s = (const uniform_state *)st;
    const uint32_t kept = kept_of(s);
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, kept, kept ? (double)s->seen / (double)kept : 1.0);
}

static uint64_t uniform_elements(const void *st)
{
    const uniform_state *s = (const uniform_state *)st;
    return (uint64_t)kept_of(s) * (s->d + s->dv);
}

kvc_status kvc_uniform_reservoir(const kvc_stream *st, kvc_uniform_info *out)
{
    const kvc_stream_plan *p = kvc_stream_get_plan(st);
    if (p == NULL || p->method != KVC_METHOD_UNIFORM || out == NULL) return KVC_E_STATE;
    const uniform_state *s = (const uniform_state *)kvc_stream_method_state(st);
    out->capacity = s->capacity;
    out->kept = kept_of(s);
    out->seen = s->seen;
    out->tokens = KVC_AT_C(s, s->off_tok, uint32_t);
    return KVC_OK;
}

/* ---- registry entry ---- */
static const char *ops_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const uint64_t tok = (uint64_t)c->d + c->dv;
    p->capacity = p->method_tokens;
    *method_worst = (uint64_t)p->capacity * tok;
    p->metadata_bytes = (uint64_t)p->capacity * sizeof(uint32_t);
    return NULL;
}
static void uniform_describe(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out)
{
    (void)c;
    kvc_text_add(out, " capacity=%u", (unsigned)p->capacity);
}

const kvc_method_ops kvc_method_ops_uniform = {KVC_METHOD_UNIFORM,
                                               0,
                                               NULL,
                                               ops_plan,
                                               uniform_arena_size,
                                               uniform_init,
                                               NULL,
                                               uniform_update,
                                               uniform_view,
                                               uniform_elements,
                                               NULL,
                                               uniform_check,
                                               NULL,
                                               0,
                                               0,
                                               NULL,
                                               NULL,
                                               uniform_describe,
                                               NULL};
