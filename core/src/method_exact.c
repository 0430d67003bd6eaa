/* exact: keeps every token handed to it, up to its capacity; then it refuses
 * (KVC_E_CAPACITY from the wrapper) instead of silently dropping. */
#include "arena.h"
#include "methods.h"

typedef struct exact_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint32_t count;
    uint32_t pad_;
    uint64_t off_k, off_v;
} exact_state;
_Static_assert(sizeof(exact_state) == 40, "exact_state must be the same on every ABI");

static uint64_t exact_layout(exact_state *s, uint32_t d, uint32_t dv, uint32_t capacity)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(exact_state));
    s->off_k = kvc_carve(&cur, (uint64_t)capacity * d * sizeof(float));
    s->off_v = kvc_carve(&cur, (uint64_t)capacity * dv * sizeof(float));
    return cur;
}

uint64_t kvc_exact_arena_size(uint32_t d, uint32_t dv, uint32_t capacity)
{
    exact_state tmp;
    return exact_layout(&tmp, d, dv, capacity);
}

void kvc_exact_init(void *arena, uint32_t d, uint32_t dv, uint32_t capacity)
{
    exact_state *s = (exact_state *)arena;
    exact_layout(s, d, dv, capacity);
    s->magic = KVC_MAGIC_EXACT;
    s->d = d;
    s->dv = dv;
    s->capacity = capacity;
    s->count = 0;
}

int kvc_exact_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const exact_state *s = (const exact_state *)st;
    exact_state want;
    exact_layout(&want, p->d, p->dv, p->capacity);
    return s->magic == KVC_MAGIC_EXACT && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == want.off_k && s->off_v == want.off_v && s->count <= s->capacity && s->count == method_in;
}

int kvc_exact_can_accept(const void *st)
{
    const exact_state *s = (const exact_state *)st;
    return s->count < s->capacity;
}

void kvc_exact_update(void *st, const float *k, const float *v, uint64_t token)
{
    exact_state *s = (exact_state *)st;
    (void)token;
    memcpy(KVC_AT(s, s->off_k, float) + (size_t)s->count * s->d, k, s->d * sizeof(float));
    memcpy(KVC_AT(s, s->off_v, float) + (size_t)s->count * s->dv, v, s->dv * sizeof(float));
    s->count++;
}

size_t kvc_exact_view(const void *st, kvc_segment *seg)
{
    const exact_state *s = (const exact_state *)st;
    return kvc_segment_uniform(seg, KVC_AT_C(s, s->off_k, float), KVC_AT_C(s, s->off_v, float), s->count, 1.0);
}

uint64_t kvc_exact_elements(const void *st)
{
    const exact_state *s = (const exact_state *)st;
    return (uint64_t)s->count * (s->d + s->dv);
}

/* ---- registry entry ---- */
static const char *ops_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    const uint64_t tok = (uint64_t)c->d + c->dv;
    p->capacity = p->method_tokens;
    *method_worst = (uint64_t)p->capacity * tok;
    return NULL;
}
static uint64_t ops_arena_size(const kvc_stream_plan *p) { return kvc_exact_arena_size(p->d, p->dv, p->capacity); }
static void ops_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    (void)seed;
    kvc_exact_init(st, p->d, p->dv, p->capacity);
}
static void ops_update(void *st, const kvc_kernels *kern, const float *k, const float *v, uint64_t token)
{
    (void)kern;
    kvc_exact_update(st, k, v, token);
}
const kvc_method_ops kvc_method_ops_exact = {
    KVC_METHOD_EXACT, "exact", "every token; refuses (KVC_E_CAPACITY) when the budget is full", 0, NULL, ops_plan,
    ops_arena_size, ops_init, kvc_exact_can_accept, ops_update, kvc_exact_view, kvc_exact_elements, NULL,
    kvc_exact_check, NULL, 0};
