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

/*@ // the header fields the plan fixes; the RNG counter grows by at most 64
    // per token offered (one bounded rejection draw), so it never nears 2^64
    predicate uniform_ok(uniform_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && 1 <= p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
      s->seen <= 4294967295 && s->rng.counter <= 64 * s->seen;
    // the row arrays and token ids a trusted accessor gives for s: capacity
    // entries each, disjoint from each other and from the header and the plan
    predicate uniform_rows_ok(uniform_state *s, kvc_stream_plan *p, kvc_rows *K, kvc_rows *V, uint32_t *tok) =
      kvc_rows_ok(K, s->capacity) && kvc_rows_ok(V, s->capacity) && K->dim == p->d && V->dim == p->dv &&
      \valid(tok + (0 .. s->capacity - 1)) &&
      \separated(K->base + (0 .. s->capacity * K->stride - 1), V->base + (0 .. s->capacity * V->stride - 1),
                 tok + (0 .. s->capacity - 1), s, p) &&
      \separated(K, V, s, tok + (0 .. s->capacity - 1));
*/

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns s->off_k, s->off_v, s->off_tok;
    ensures s->off_k == 64;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), s->off_tok);
    ensures kvc_region_before(s->off_tok, 4 * p->capacity, \result);
    ensures \result <= 3 * 16777216 * 1032 + 256;
*/
static uint64_t uniform_layout(uniform_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(uniform_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_tok = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint32_t));
    return cur;
}

/* The RNG counter bound is part of the check: a legitimate state never
 * breaks it (at most one draw of at most 64 words per token offered), and a
 * corrupted counter near 2^64 would wrap inside kvc_rng_below. */
/*@ requires kvc_plan_dims_ok(p) && 1 <= p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns \nothing;
    ensures \result == 1 ==> uniform_ok(s, p) && s->seen == method_in;
*/
static int uniform_check_st(const uniform_state *s, const kvc_stream_plan *p, uint64_t method_in)
{
    uniform_state want;
    uniform_layout(&want, p);
    return s->magic == KVC_MAGIC_UNIFORM && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->off_k == want.off_k && s->off_v == want.off_v && s->off_tok == want.off_tok && s->seen == method_in &&
           s->seen <= UINT32_MAX && s->rng.counter <= 64u * s->seen;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    assigns \nothing;
    ensures \result <= 3 * 16777216 * 1032 + 256;
*/
static uint64_t uniform_arena_size(const kvc_stream_plan *p)
{
    uniform_state tmp;
    return uniform_layout(&tmp, p);
}

/*@ requires kvc_plan_dims_ok(p) && 1 <= p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns *s;
    ensures uniform_ok(s, p) && s->magic == KVC_MAGIC_UNIFORM && s->seen == 0;
*/
static void uniform_init_st(uniform_state *s, const kvc_stream_plan *p, uint64_t seed)
{
    uniform_layout(s, p);
    s->magic = KVC_MAGIC_UNIFORM;
    s->d = p->d;
    s->dv = p->dv;
    s->capacity = p->capacity;
    s->seen = 0;
    kvc_rng_seed(&s->rng, seed);
}

/*@ requires \valid_read(s);
    assigns \nothing;
    ensures \result == (s->seen < s->capacity ? s->seen : s->capacity);
*/
static uint32_t kept_of(const uniform_state *s) { return s->seen < s->capacity ? (uint32_t)s->seen : s->capacity; }

/* Store token `token` in reservoir slot `slot`. */
/*@ requires \valid_read(s) && \valid_read(p) && slot < s->capacity && s->capacity <= 16777216;
    requires kvc_rows_ok(K, s->capacity) && kvc_rows_ok(V, s->capacity) && K->dim == p->d && V->dim == p->dv;
    requires \valid(tok + slot);
    requires \valid_read(k + (0 .. p->d - 1)) && \valid_read(v + (0 .. p->dv - 1));
    requires \separated(k + (0 .. p->d - 1), v + (0 .. p->dv - 1),
                        K->base + (0 .. s->capacity * K->stride - 1), V->base + (0 .. s->capacity * V->stride - 1),
                        tok + (0 .. s->capacity - 1));
    assigns K->base[slot * K->stride .. slot * K->stride + K->stride - 1],
            V->base[slot * V->stride .. slot * V->stride + V->stride - 1], tok[slot];
    ensures tok[slot] == token;
*/
static void uniform_put(const uniform_state *s, const kvc_stream_plan *p, const kvc_rows *K, const kvc_rows *V,
                        uint32_t *tok, uint32_t slot, const float *k, const float *v, uint32_t token)
{
    (void)p, (void)s;
    //@ ghost kvc_mul_le(slot + 1, s->capacity, K->stride, K->stride);
    //@ ghost kvc_mul_le(slot + 1, s->capacity, V->stride, V->stride);
    kvc_row_store(K, slot, k);
    kvc_row_store(V, slot, v);
    tok[slot] = token;
}

/* Algorithm R's slot for the token after `seen` offered: the next free one
 * while filling, then uniform in [0, seen] (kept when it falls below the
 * capacity). */
/*@ requires \valid(rng) && seen < 4294967295 && rng->counter <= 64 * seen;
    assigns rng->counter;
    ensures seen < capacity ==> \result == seen;
    ensures rng->counter <= 64 * (seen + 1);
*/
static uint64_t uniform_slot(kvc_rng *rng, uint64_t seen, uint32_t capacity)
{
    if (seen < capacity) return seen;
    if (seen < UINT32_MAX) return kvc_rng_below(rng, (uint32_t)(seen + 1)); /* uniform in [0, seen] */
    /* past 2^32 tokens (not reachable through the stream, whose token ids
       are 32-bit): 53-bit uniform, bias < seen / 2^53 */
    return (uint64_t)(kvc_rng_unit(rng) * (double)(seen + 1));
}

/* Offer one token (id `token`) to the reservoir. The stream hands a method
 * at most UINT32_MAX - 1 tokens (token ids are 32-bit). */
/*@ requires uniform_ok(s, p) && uniform_rows_ok(s, p, K, V, tok) && s->seen < 4294967295 && token < 4294967295;
    requires \valid_read(k + (0 .. p->d - 1)) && \valid_read(v + (0 .. p->dv - 1));
    requires \separated(k + (0 .. p->d - 1), v + (0 .. p->dv - 1),
                        K->base + (0 .. s->capacity * K->stride - 1), V->base + (0 .. s->capacity * V->stride - 1),
                        tok + (0 .. s->capacity - 1));
    assigns s->seen, s->rng.counter, K->base[0 .. s->capacity * K->stride - 1],
            V->base[0 .. s->capacity * V->stride - 1], tok[0 .. s->capacity - 1];
    ensures uniform_ok(s, p) && s->seen == \old(s->seen) + 1;
*/
static void uniform_update_st(uniform_state *s, const kvc_stream_plan *p, const kvc_rows *K, const kvc_rows *V,
                              uint32_t *tok, const float *k, const float *v, uint64_t token)
{
    /* the draw works on a copy of the generator, written back after the
       store: nothing in memory changes before the rows do (the provers then
       need no frame reasoning about the counter) */
    kvc_rng rng = s->rng;
    const uint64_t slot = uniform_slot(&rng, s->seen, s->capacity);
    if (slot < s->capacity) {
        //@ ghost kvc_mul_le(slot + 1, s->capacity, K->stride, K->stride);
        //@ ghost kvc_mul_le(slot + 1, s->capacity, V->stride, V->stride);
        uniform_put(s, p, K, V, tok, (uint32_t)slot, k, v, (uint32_t)token);
    }
    s->rng.counter = rng.counter;
    s->seen++;
}

/*@ requires uniform_ok(s, p) && uniform_rows_ok(s, p, K, V, tok);
    requires \valid(seg) && \separated(seg, s, p, K, V);
    assigns *seg;
    ensures \result == 1 && seg->n == (s->seen < s->capacity ? s->seen : s->capacity);
*/
static size_t uniform_view_st(const uniform_state *s, const kvc_stream_plan *p, const kvc_rows *K, const kvc_rows *V,
                              const uint32_t *tok, kvc_segment *seg)
{
    const uint32_t kept = kept_of(s);
    (void)p, (void)tok;
    return kvc_segment_rows_uniform(seg, K, V, 0, kept, kept ? (double)s->seen / (double)kept : 1.0);
}

/*@ requires \valid_read(s) && s->capacity <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result <= 16777216 * 512;
*/
static uint64_t uniform_elements_st(const uniform_state *s)
{
    const uint32_t kept = kept_of(s);
    //@ ghost kvc_mul_le(kept, 16777216, s->d + s->dv, 512);
    return (uint64_t)kept * (s->d + s->dv);
}

/* ---- the method table's entries: the accessor layer (trusted, docs/proofs.md)
 * Each casts the stream's void pointer to the typed state and builds its row
 * arrays from the offsets that uniform_check_st compared with the proved
 * layout (the stream calls check before every entry).
 * trusted-by: uniform_check_st against the layout wp_sizes proves inside the
 * method's bytes; the corrupted-arena tests (tests/unit/test_trust.c,
 * test_stream.c) and the API fuzzer (tests/fuzz/fuzz_api.c) under ASan. */
static void uniform_regions(const uniform_state *s, const kvc_stream_plan *p, const kvc_kernels *kern, kvc_rows *K,
                            kvc_rows *V, uint32_t **tok)
{
    *K = kvc_rows_at(s, s->off_k, s->d, p->dtype, kern);
    *V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, kern);
    *tok = KVC_AT(s, s->off_tok, uint32_t);
}

static int uniform_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    return uniform_check_st((const uniform_state *)st, p, method_in);
}

static void uniform_init(void *arena, const kvc_stream_plan *p, uint64_t seed)
{
    uniform_init_st((uniform_state *)arena, p, seed);
}

static void uniform_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    uniform_state *s = (uniform_state *)st;
    kvc_rows K, V;
    uint32_t *tok;
    uniform_regions(s, cx->plan, cx->kern, &K, &V, &tok);
    uniform_update_st(s, cx->plan, &K, &V, tok, k, v, token);
}

static size_t uniform_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const uniform_state *s = (const uniform_state *)st;
    kvc_rows K, V;
    uint32_t *tok;
    uniform_regions(s, p, NULL, &K, &V, &tok);
    return uniform_view_st(s, p, &K, &V, tok, seg);
}

static uint64_t uniform_elements(const void *st) { return uniform_elements_st((const uniform_state *)st); }

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
/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->capacity, p->metadata_bytes, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
*/
static const char *uniform_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
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

const kvc_method_ops kvc_method_ops_uniform = {
    .id = KVC_METHOD_UNIFORM,
    KVC_METHOD_STATE_OPS(uniform),
    .describe = uniform_describe,
};
