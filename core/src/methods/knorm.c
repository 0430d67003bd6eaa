/* K-norm (Devoto et al. 2024, "A Simple and Effective L2 Norm-Based Strategy
 * for KV Cache Compression"): of the tokens that leave the window, keep the
 * `capacity` ones whose keys have the lowest L2 norm (low-norm keys draw
 * high attention). Sinks and window stay exact (the stream wrapper). An
 * eviction policy, not an estimator: kept tokens have weight 1.
 *
 * A max-heap over the kept slots, keyed by key norm, finds the slot to
 * evict in O(log capacity): a full cache replaces its largest-norm token when
 * the new key's norm is strictly smaller (ties keep the older token).
 * Arrays: keys capacity x d, values capacity x dv, norms, heap (slot ids). */
#include <math.h>

#include "arena.h"
#include "methods.h"
#include "shared/rows.h"

#define KVC_MAGIC_KNORM 0x4B564E32u /* "KVN2" */

typedef struct knorm_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint32_t count; /* kept tokens (slots 0 .. count-1) */
    uint32_t pad_;
    uint64_t seen; /* tokens handed to the method */
    uint64_t off_k, off_v, off_norm, off_heap;
} knorm_state;
_Static_assert(sizeof(knorm_state) == KVC_SIZE_KNORM_STATE, "knorm_state must be the same on every ABI");

/*@ // the header fields the plan fixes, and the count within the capacity
    predicate knorm_ok(knorm_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity && s->count <= s->capacity;
*/

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns s->off_k, s->off_v, s->off_norm, s->off_heap;
    ensures sizeof(knorm_state) <= s->off_k == 64;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), s->off_norm);
    ensures kvc_region_before(s->off_norm, 4 * p->capacity, s->off_heap);
    ensures kvc_region_before(s->off_heap, 4 * p->capacity, \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t knorm_layout(knorm_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(knorm_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_norm = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(float));
    s->off_heap = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint32_t));
    return cur;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t knorm_arena_size(const kvc_stream_plan *p)
{
    knorm_state tmp;
    return knorm_layout(&tmp, p);
}

static void ops_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    knorm_state *s = (knorm_state *)st;
    (void)seed; /* deterministic */
    knorm_layout(s, p);
    s->magic = KVC_MAGIC_KNORM;
    s->d = p->d, s->dv = p->dv, s->capacity = p->capacity;
}

/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->capacity, p->metadata_bytes, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
    ensures kvc_metadata_bytes_ok(p->metadata_bytes);
*/
static const char *knorm_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    p->capacity = p->method_tokens;
    //@ ghost kvc_mul_le(p->capacity, 16777216, (uint64_t)c->d + c->dv, 512);
    *method_worst = (uint64_t)p->capacity * ((uint64_t)c->d + c->dv);
    p->metadata_bytes = (uint64_t)p->capacity * (sizeof(float) + sizeof(uint32_t));
    return NULL;
}

/* The heap holds slot ids. They live in the data region, which validation
 * does not scan, so an id >= n (corrupted data) is read as slot 0: never an
 * out-of-bounds access, at worst a wrong eviction. */
/*@ requires 1 <= n && \valid_read(norm + (0 .. n - 1)) && \valid_read(h + a) && \valid_read(h + b);
    assigns \nothing;
    ensures \result == 0 || \result == 1;
*/
static int heap_less(const float *norm, const uint32_t *h, uint32_t n, uint32_t a, uint32_t b)
{
    const uint32_t x = h[a] < n ? h[a] : 0u, y = h[b] < n ? h[b] : 0u;
    return norm[x] < norm[y] || (norm[x] == norm[y] && x < y);
}

/*@ requires i < 16777216 && \valid_read(norm + (0 .. i)) && \valid(h + (0 .. i));
    requires \separated(norm + (0 .. i), h + (0 .. i));
    assigns h[0 .. i];
*/
static void sift_up(const float *norm, uint32_t *h, uint32_t i)
{
    const uint32_t n = i + 1;
    /*@ loop invariant 0 <= i < n;
        loop assigns i, h[0 .. n - 1];
        loop variant i;
    */
    while (i > 0 && heap_less(norm, h, n, (i - 1) / 2, i)) {
        const uint32_t p = (i - 1) / 2, t = h[p];
        h[p] = h[i], h[i] = t;
        i = p;
    }
}

/*@ requires 1 <= n <= 16777216 && \valid_read(norm + (0 .. n - 1)) && \valid(h + (0 .. n - 1));
    requires \separated(norm + (0 .. n - 1), h + (0 .. n - 1));
    assigns h[0 .. n - 1];
*/
static void sift_down(const float *norm, uint32_t *h, uint32_t n)
{
    uint32_t i = 0;
    /*@ loop invariant 0 <= i < n;
        loop assigns i, h[0 .. n - 1];
        loop variant n - i;
    */
    for (;;) {
        uint32_t big = i;
        const uint32_t l = 2 * i + 1, r = l + 1;
        if (l < n && heap_less(norm, h, n, big, l)) big = l;
        if (r < n && heap_less(norm, h, n, big, r)) big = r;
        if (big == i) return;
        const uint32_t t = h[i];
        h[i] = h[big], h[big] = t;
        i = big;
    }
}

static void ops_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    knorm_state *s = (knorm_state *)st;
    (void)token;
    float *norm = KVC_AT(s, s->off_norm, float);
    uint32_t *h = KVC_AT(s, s->off_heap, uint32_t);
    const float nk = (float)sqrt(cx->kern->dot_f32(k, k, s->d)); /* the incoming key, before quantisation */
    s->seen++;
    uint32_t slot;
    if (s->count < s->capacity) {
        slot = s->count;
        h[s->count] = slot;
        norm[slot] = nk;
        s->count++;
        sift_up(norm, h, s->count - 1);
    } else {
        if (s->capacity == 0 || h[0] >= s->count || !(nk < norm[h[0]])) return; /* keep the lower norms */
        slot = h[0];
        norm[slot] = nk;
        sift_down(norm, h, s->count);
    }
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    kvc_row_store(&K, slot, k);
    kvc_row_store(&V, slot, v);
}

static size_t ops_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const knorm_state *s = (const knorm_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

/*@ requires \valid_read(s) && s->count <= s->capacity <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result == s->count * (s->d + s->dv) && \result <= s->capacity * (s->d + s->dv);
*/
static uint64_t knorm_elements_st(const knorm_state *s)
{
    //@ ghost kvc_mul_le(s->count, s->capacity, s->d + s->dv, s->d + s->dv);
    return (uint64_t)s->count * (s->d + s->dv);
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns \nothing;
    ensures \result == 1 ==> knorm_ok(s, p) && s->seen == method_in;
*/
static int knorm_check_st(const knorm_state *s, const kvc_stream_plan *p, uint64_t method_in)
{
    knorm_state w;
    knorm_layout(&w, p);
    return s->magic == KVC_MAGIC_KNORM && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == w.off_k && s->off_v == w.off_v && s->off_norm == w.off_norm && s->off_heap == w.off_heap &&
           s->seen == method_in && s->count == (method_in < s->capacity ? method_in : s->capacity);
}

/* The method table's entries cast the stream's void pointer to the typed
 * state (the accessor layer, trusted: docs/proofs.md "Trusted base"). */
static uint64_t ops_elements(const void *st) { return knorm_elements_st((const knorm_state *)st); }

static int ops_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    return knorm_check_st((const knorm_state *)st, p, method_in);
}

const kvc_method_ops kvc_method_ops_knorm = {
    .id = KVC_METHOD_KNORM,
    .plan = knorm_plan,
    .arena_size = knorm_arena_size,
    .init = ops_init,
    .update = ops_update,
    .view = ops_view,
    .elements = ops_elements,
    .check = ops_check,
    .choices_read_values = 1,
};
