/* exact: keeps every token handed to it, up to its capacity; then it refuses
 * (KVC_E_CAPACITY from the wrapper) instead of silently dropping. */
#include "arena.h"
#include "methods.h"
#include "shared/rows.h"

typedef struct exact_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint32_t count;
    uint32_t pad_;
    uint64_t off_k, off_v;
} exact_state;
_Static_assert(sizeof(exact_state) == KVC_SIZE_EXACT_STATE, "exact_state must be the same on every ABI");

static uint64_t exact_layout(exact_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(exact_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    return cur;
}

static uint64_t exact_arena_size(const kvc_stream_plan *p)
{
    exact_state tmp;
    return exact_layout(&tmp, p);
}

static void exact_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    exact_state *s = (exact_state *)arena;
    (void)seed;
    exact_layout(s, p);
    s->magic = KVC_MAGIC_EXACT;
    s->d = p->d;
    s->dv = p->dv;
    s->capacity = p->capacity;
    s->count = 0;
}

static int exact_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const exact_state *s = (const exact_state *)st;
    exact_state want;
    exact_layout(&want, p);
    return s->magic == KVC_MAGIC_EXACT && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == want.off_k && s->off_v == want.off_v && s->count <= s->capacity && s->count == method_in;
}

static int exact_can_accept(const void *st)
{
    const exact_state *s = (const exact_state *)st;
    return s->count < s->capacity;
}

static void exact_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    exact_state *s = (exact_state *)st;
    (void)token;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    kvc_row_store(&K, s->count, k);
    kvc_row_store(&V, s->count, v);
    s->count++;
}

static size_t exact_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const exact_state *s = (const exact_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

static uint64_t exact_elements(const void *st)
{
    const exact_state *s = (const exact_state *)st;
    return (uint64_t)s->count * (s->d + s->dv);
}

/* ---- registry entry ---- */
static const char *exact_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const uint64_t tok = (uint64_t)c->d + c->dv;
    p->capacity = p->method_tokens;
    *method_worst = (uint64_t)p->capacity * tok;
    return NULL;
}
static void exact_describe(const kvc_stream_config *c, const kvc_stream_plan *p, kvc_text *out)
{
    (void)c;
    kvc_text_add(out, " capacity=%u", (unsigned)p->capacity);
}

const kvc_method_ops kvc_method_ops_exact = {KVC_METHOD_EXACT,
                                             0,
                                             NULL,
                                             exact_plan,
                                             exact_arena_size,
                                             exact_init,
                                             exact_can_accept,
                                             exact_update,
                                             exact_view,
                                             exact_elements,
                                             NULL,
                                             exact_check,
                                             NULL,
                                             0,
                                             0,
                                             NULL,
                                             NULL,
                                             exact_describe,
                                             NULL};
