/* KeyDiff (Park et al. 2025, "KeyDiff: Key Similarity-Based KV Cache
 * Eviction for Long-Context LLM Inference in Resource-Constrained
 * Environments"): of the tokens that leave the window, keep the `capacity`
 * ones whose keys are least similar to the others. The anchor is the sum of
 * the normalised keys held plus the incoming one; when the cache is full, the
 * token (held or incoming) whose key has the largest cosine to the anchor is
 * evicted. Query-agnostic and attention-free; kept tokens have weight 1.
 *
 * The anchor is recomputed from the held rows at each eviction (O(capacity
 * d), the order of one attend), so no running sum drifts and the state is
 * the rows alone. Arrays: keys capacity x d, values capacity x dv, the
 * inverse norm of each held key (of the key as it arrived, before
 * quantisation). */
#include <math.h>

#include "arena.h"
#include "methods.h"
#include "shared/rows.h"

#define KVC_MAGIC_KEYDIFF 0x4B564B32u /* "KVK2" */

typedef struct keydiff_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint32_t count; /* held tokens (slots 0 .. count-1) */
    uint32_t pad_;
    uint64_t seen; /* tokens handed to the method */
    uint64_t off_k, off_v, off_inv;
} keydiff_state;
_Static_assert(sizeof(keydiff_state) == KVC_SIZE_KEYDIFF_STATE, "keydiff_state must be the same on every ABI");

/*@ // the header fields the plan fixes, and the count within the capacity
    predicate keydiff_ok(keydiff_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity && s->count <= s->capacity;
*/

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns s->off_k, s->off_v, s->off_inv;
    ensures sizeof(keydiff_state) <= s->off_k == 64;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), s->off_inv);
    ensures kvc_region_before(s->off_inv, 4 * p->capacity, \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t keydiff_layout(keydiff_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(keydiff_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_inv = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(float));
    return cur;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t keydiff_arena_size(const kvc_stream_plan *p)
{
    keydiff_state tmp;
    return keydiff_layout(&tmp, p);
}

static void ops_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    keydiff_state *s = (keydiff_state *)st;
    (void)seed; /* deterministic */
    keydiff_layout(s, p);
    s->magic = KVC_MAGIC_KEYDIFF;
    s->d = p->d, s->dv = p->dv, s->capacity = p->capacity;
}

/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->capacity, p->metadata_bytes, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
    ensures kvc_metadata_bytes_ok(p->metadata_bytes);
*/
static const char *keydiff_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    p->capacity = p->method_tokens;
    //@ ghost kvc_mul_le(p->capacity, 16777216, (uint64_t)c->d + c->dv, 512);
    *method_worst = (uint64_t)p->capacity * ((uint64_t)c->d + c->dv);
    p->metadata_bytes = (uint64_t)p->capacity * sizeof(float);
    return NULL;
}

static void ops_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    keydiff_state *s = (keydiff_state *)st;
    (void)token;
    float *inv = KVC_AT(s, s->off_inv, float);
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    const double nk = sqrt(cx->kern->dot_f32(k, k, s->d));
    const float inv_k = nk > 0.0 ? (float)(1.0 / nk) : 0.0f; /* a zero key is similar to nothing */
    s->seen++;
    uint32_t slot;
    if (s->count < s->capacity) {
        slot = s->count++;
    } else {
        if (s->capacity == 0) return;
        /* anchor = sum of the normalised held keys and the incoming one */
        double anchor[KVC_MAX_HEAD_DIM];
        for (uint32_t c = 0; c < s->d; c++) anchor[c] = (double)k[c] * inv_k;
        for (uint32_t i = 0; i < s->count; i++) K.rk->axpy(anchor, (double)inv[i], kvc_row(&K, i), s->d);
        /* the most similar to the anchor goes; the incoming key first, so ties keep the held */
        double worst = 0.0;
        for (uint32_t c = 0; c < s->d; c++) worst += (double)k[c] * anchor[c];
        worst *= inv_k;
        uint32_t evict = s->count; /* = the incoming token */
        for (uint32_t i = 0; i < s->count; i++) {
            const double cs = K.rk->dot_f64(kvc_row(&K, i), anchor, s->d) * (double)inv[i];
            if (cs > worst) worst = cs, evict = i;
        }
        if (evict == s->count) return;
        slot = evict;
    }
    inv[slot] = inv_k;
    kvc_row_store(&K, slot, k);
    kvc_row_store(&V, slot, v);
}

static size_t ops_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const keydiff_state *s = (const keydiff_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

/*@ requires \valid_read(s) && s->count <= s->capacity <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result == s->count * (s->d + s->dv) && \result <= s->capacity * (s->d + s->dv);
*/
static uint64_t keydiff_elements_st(const keydiff_state *s)
{
    //@ ghost kvc_mul_le(s->count, s->capacity, s->d + s->dv, s->d + s->dv);
    return (uint64_t)s->count * (s->d + s->dv);
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns \nothing;
    ensures \result == 1 ==> keydiff_ok(s, p) && s->seen == method_in;
*/
static int keydiff_check_st(const keydiff_state *s, const kvc_stream_plan *p, uint64_t method_in)
{
    keydiff_state w;
    keydiff_layout(&w, p);
    return s->magic == KVC_MAGIC_KEYDIFF && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == w.off_k && s->off_v == w.off_v && s->off_inv == w.off_inv && s->seen == method_in &&
           s->count == (method_in < s->capacity ? method_in : s->capacity);
}

/* The method table's entries cast the stream's void pointer to the typed
 * state (the accessor layer, trusted: docs/proofs.md "Trusted base"). */
static uint64_t ops_elements(const void *st) { return keydiff_elements_st((const keydiff_state *)st); }

static int ops_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    return keydiff_check_st((const keydiff_state *)st, p, method_in);
}

const kvc_method_ops kvc_method_ops_keydiff = {
    .id = KVC_METHOD_KEYDIFF,
    .plan = keydiff_plan,
    .arena_size = keydiff_arena_size,
    .init = ops_init,
    .update = ops_update,
    .view = ops_view,
    .elements = ops_elements,
    .check = ops_check,
    .choices_read_values = 1,
};
