/* exact: keeps every token handed to it, up to its capacity; then it refuses
 * (KVC_E_CAPACITY from the wrapper) instead of silently dropping.
 *
 * Proof structure (verify/ wp_exact, docs/proofs.md): the functions on the
 * typed state (exact_*_st) are proved free of runtime errors with the state
 * predicate exact_ok; the row arrays come from one trusted accessor
 * (exact_rows), and the method table's entries are one-line casts from
 * the stream's void pointer to the typed state. */
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

/*@ // the header fields the plan fixes, and the count within the capacity
    predicate exact_ok(exact_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity && s->count <= s->capacity;
    // the row arrays a trusted accessor gives for s: capacity rows each,
    // disjoint from each other and from the header and the plan
    predicate exact_rows_ok(exact_state *s, kvc_stream_plan *p, kvc_rows *K, kvc_rows *V) =
      kvc_rows_ok(K, s->capacity) && kvc_rows_ok(V, s->capacity) && K->dim == p->d && V->dim == p->dv &&
      \separated(K->base + (0 .. s->capacity * K->stride - 1), V->base + (0 .. s->capacity * V->stride - 1), s, p) &&
      \separated(K, V, s);
*/

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns s->off_k, s->off_v;
    ensures s->off_k == 64;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), \result);
    ensures \result <= 2 * 16777216 * 1032 + 192;
*/
static uint64_t exact_layout(exact_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(exact_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    return cur;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    assigns \nothing;
    ensures \result <= 2 * 16777216 * 1032 + 192;
*/
static uint64_t exact_arena_size(const kvc_stream_plan *p)
{
    exact_state tmp;
    return exact_layout(&tmp, p);
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns *s;
    ensures exact_ok(s, p) && s->magic == KVC_MAGIC_EXACT && s->count == 0;
*/
static void exact_init_st(exact_state *s, const kvc_stream_plan *p)
{
    exact_layout(s, p);
    s->magic = KVC_MAGIC_EXACT;
    s->d = p->d;
    s->dv = p->dv;
    s->capacity = p->capacity;
    s->count = 0;
    s->pad_ = 0;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns \nothing;
    ensures \result == 1 ==> exact_ok(s, p) && s->count == method_in;
*/
static int exact_check_st(const exact_state *s, const kvc_stream_plan *p, uint64_t method_in)
{
    exact_state want;
    exact_layout(&want, p);
    return s->magic == KVC_MAGIC_EXACT && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == want.off_k && s->off_v == want.off_v && s->count <= s->capacity && s->count == method_in;
}

/*@ requires \valid_read(s);
    assigns \nothing;
    ensures \result == 1 <==> s->count < s->capacity;
*/
static int exact_can_accept_st(const exact_state *s) { return s->count < s->capacity; }

/* The wrapper calls update only after can_accept said yes. */
/*@ requires exact_ok(s, p) && exact_rows_ok(s, p, K, V) && s->count < s->capacity;
    requires \valid_read(k + (0 .. p->d - 1)) && \valid_read(v + (0 .. p->dv - 1));
    requires \separated(k + (0 .. p->d - 1), v + (0 .. p->dv - 1),
                        K->base + (0 .. s->capacity * K->stride - 1), V->base + (0 .. s->capacity * V->stride - 1));
    assigns s->count, K->base[s->count * K->stride .. s->count * K->stride + K->stride - 1],
            V->base[s->count * V->stride .. s->count * V->stride + V->stride - 1];
    ensures exact_ok(s, p) && s->count == \old(s->count) + 1;
*/
static void exact_update_st(exact_state *s, const kvc_stream_plan *p, const kvc_rows *K, const kvc_rows *V,
                            const float *k, const float *v)
{
    (void)p;
    //@ ghost kvc_mul_le(s->count + 1, s->capacity, K->stride, K->stride);
    //@ ghost kvc_mul_le(s->count + 1, s->capacity, V->stride, V->stride);
    kvc_row_store(K, s->count, k);
    kvc_row_store(V, s->count, v);
    s->count++;
}

/*@ requires exact_ok(s, p) && exact_rows_ok(s, p, K, V);
    requires \valid(seg) && \separated(seg, s, p, K, V);
    assigns *seg;
    ensures \result == 1 && seg->n == s->count;
*/
static size_t exact_view_st(const exact_state *s, const kvc_stream_plan *p, const kvc_rows *K, const kvc_rows *V,
                            kvc_segment *seg)
{
    (void)p;
    return kvc_segment_rows_uniform(seg, K, V, 0, s->count, 1.0);
}

/*@ requires \valid_read(s) && s->count <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result == s->count * (s->d + s->dv) && \result <= 16777216 * 512;
*/
static uint64_t exact_elements_st(const exact_state *s)
{
    //@ ghost kvc_mul_le(s->count, 16777216, s->d + s->dv, 512);
    return (uint64_t)s->count * (s->d + s->dv);
}

/* ---- the method table's entries: the accessor layer (trusted, docs/proofs.md)
 * Each casts the stream's void pointer to the typed state and builds its row
 * arrays from the offsets that exact_check_st compared with the proved layout
 * (the stream calls check before every entry).
 * trusted-by: exact_check_st against the layout wp_sizes proves inside the
 * method's bytes; the corrupted-arena tests (tests/unit/test_trust.c,
 * test_stream.c) and the API fuzzer (tests/fuzz/fuzz_api.c) under ASan. */
static void exact_rows(const exact_state *s, const kvc_stream_plan *p, const kvc_kernels *kern, kvc_rows *K,
                       kvc_rows *V)
{
    *K = kvc_rows_at(s, s->off_k, s->d, p->dtype, kern);
    *V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, kern);
}

static void exact_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    (void)seed;
    exact_init_st((exact_state *)arena, p);
}

static int exact_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    return exact_check_st((const exact_state *)st, p, method_in);
}

static int exact_can_accept(const void *st) { return exact_can_accept_st((const exact_state *)st); }

static void exact_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    exact_state *s = (exact_state *)st;
    kvc_rows K, V;
    (void)token;
    exact_rows(s, cx->plan, cx->kern, &K, &V);
    exact_update_st(s, cx->plan, &K, &V, k, v);
}

static size_t exact_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const exact_state *s = (const exact_state *)st;
    kvc_rows K, V;
    exact_rows(s, p, NULL, &K, &V);
    return exact_view_st(s, p, &K, &V, seg);
}

static uint64_t exact_elements(const void *st) { return exact_elements_st((const exact_state *)st); }

/* ---- registry entry ---- */
/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->capacity, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
*/
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

const kvc_method_ops kvc_method_ops_exact = {
    .id = KVC_METHOD_EXACT,
    KVC_METHOD_STATE_OPS(exact),
    .can_accept = exact_can_accept,
    .describe = exact_describe,
};
