/* toy: a test-only query-aware method exercising the hooks the real H2O, TOVA
 * and SnapKV (core/src/shared/evict_observed.c, core/src/methods/snapkv.c) use. It keeps up to `capacity` tokens; observe() adds each
 * entry's attention mass to its score; when full, a new token evicts the
 * lowest-score entry (ties: the lowest slot). prefill_queries() records how
 * many rows it got and their sum. Built only into tests/unit/test_hooks. */
#include "arena.h"
#include "methods.h"
#include "shared/rows.h"
#include "toy_method.h"
#include "internal/kvc_internal.h"

#define KVC_MAGIC_TOY 0x4B565431u /* "KVT1" */

typedef struct toy_state {
    uint32_t magic, d, dv, capacity, count, pad_;
    uint64_t seen, observes, prefill_rows;
    double prefill_sum;
    uint64_t off_k, off_v, off_tok, off_score;
} toy_state;

static uint64_t toy_layout(toy_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(toy_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_tok = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint32_t));
    s->off_score = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(double));
    return cur;
}

static const char *toy_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *worst)
{
    p->capacity = p->method_tokens;
    *worst = (uint64_t)p->capacity * ((uint64_t)c->d + c->dv);
    p->metadata_bytes = (uint64_t)p->capacity * (sizeof(uint32_t) + sizeof(double));
    return NULL;
}

static uint64_t toy_arena_size(const kvc_stream_plan *p)
{
    toy_state t;
    return toy_layout(&t, p);
}

static void toy_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    toy_state *s = (toy_state *)st;
    (void)seed;
    toy_layout(s, p);
    s->magic = KVC_MAGIC_TOY, s->d = p->d, s->dv = p->dv, s->capacity = p->capacity;
}

static void toy_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    toy_state *s = (toy_state *)st;
    double *score = KVC_AT(s, s->off_score, double);
    uint32_t slot = s->count;
    if (s->count < s->capacity) {
        s->count++;
    } else {
        slot = 0;
        for (uint32_t i = 1; i < s->count; i++)
            if (score[i] < score[slot]) slot = i;
    }
    s->seen++;
    if (s->capacity == 0) return;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    kvc_row_store(&K, slot, k);
    kvc_row_store(&V, slot, v);
    KVC_AT(s, s->off_tok, uint32_t)[slot] = (uint32_t)token;
    score[slot] = 0.0;
}

static size_t toy_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const toy_state *s = (const toy_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL),
                   V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

static uint64_t toy_elements(const void *st)
{
    const toy_state *s = (const toy_state *)st;
    return (uint64_t)s->count * (s->d + s->dv);
}

static int toy_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    const toy_state *s = (const toy_state *)st;
    toy_state w;
    toy_layout(&w, p);
    return s->magic == KVC_MAGIC_TOY && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == w.off_k && s->off_v == w.off_v && s->off_tok == w.off_tok && s->off_score == w.off_score &&
           s->seen == method_in && s->count == (method_in < s->capacity ? method_in : s->capacity);
}

static void toy_observe(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                        size_t n_recent, uint64_t first_recent)
{
    toy_state *s = (toy_state *)st;
    (void)cx, (void)recent, (void)n_recent, (void)first_recent;
    double *score = KVC_AT(s, s->off_score, double);
    for (size_t i = 0; i < n && i < s->count; i++) score[i] += mass[i];
    s->observes++;
}

static void toy_prefill_queries(void *st, const kvc_method_ctx *cx, const float *q, size_t n_rows)
{
    toy_state *s = (toy_state *)st;
    for (size_t i = 0; i < n_rows * cx->plan->d; i++) s->prefill_sum += q[i];
    s->prefill_rows += n_rows;
}

const kvc_method_ops kvc_method_ops_toy = {
    .id = KVC_METHOD_TOY,
    .plan = toy_plan,
    .arena_size = toy_arena_size,
    .init = toy_init,
    .update = toy_update,
    .view = toy_view,
    .elements = toy_elements,
    .check = toy_check,
    .choices_read_values = 1,
    .observe = toy_observe,
    .prefill_queries = toy_prefill_queries,
};

int toy_get(const kvc_stream *st, toy_info *out)
{
    const toy_state *s = (const toy_state *)kvc_stream_method_state(st);
    if (s == NULL || s->magic != KVC_MAGIC_TOY) return -1;
    out->count = s->count, out->observes = s->observes, out->prefill_rows = s->prefill_rows;
    out->prefill_sum = s->prefill_sum;
    out->tokens = KVC_AT_C(s, s->off_tok, uint32_t), out->score = KVC_AT_C(s, s->off_score, double);
    return 0;
}
