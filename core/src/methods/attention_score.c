/* The attention-score evictions: H2O (Zhang et al. 2023, "H2O: Heavy-Hitter
 * Oracle for Efficient Generative Inference of Large Language Models") and
 * TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs"). Both keep
 * `capacity` tokens of those that leave the window, each with a score read
 * from the attention the decoder's queries gave it (kvc_stream_observe, or
 * kvc_stream_attend_observed which does both); when the cache is full, the
 * lowest score among the held tokens and the incoming one is evicted.
 *
 *   H2O:  score = attention accumulated over every observed query since the
 *         token arrived (its time in the window included): heavy hitters;
 *   TOVA: score = attention of the last observed query only.
 *
 * The sinks and the window are exact (the stream's), so these are H2O's
 * "heavy hitters + recent window" and TOVA with a protected recent window.
 * The mass is summed over the query heads of the group (TOVA averages them:
 * the same order). Kept tokens have weight 1: no estimator, so no bound on
 * the error beyond the mass of what was dropped.
 *
 * Scores of the window: a token collects attention while in the window, so
 * the method keeps a ring of n_window + 1 accumulators (the window and the
 * current token) indexed by token mod (n_window + 1), each tagged with its
 * token so that a slot reused by a later token (or by one the protected spans
 * took) starts again from zero. Ties go against the oldest token, so a stream
 * whose decoder never observes (all scores 0) keeps the most recent tokens:
 * a FIFO, not a frozen prefix.
 *
 * Arrays: keys capacity x d, values capacity x dv, the token and score of
 * each held row, then the ring's tokens and masses. */
#include "arena.h"
#include "methods.h"
#include "shared/rows.h"

#define KVC_MAGIC_ATTN_SCORE 0x4B564831u /* "KVH1" */

typedef struct attn_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint32_t count; /* held tokens (slots 0 .. count-1) */
    uint32_t ring;  /* n_window + 1 accumulators */
    uint64_t seen;  /* tokens handed to the method */
    uint64_t observes;
    uint64_t off_k, off_v, off_tok, off_score, off_ring_tok, off_ring_mass;
} attn_state;
_Static_assert(sizeof(attn_state) == KVC_SIZE_ATTN_STATE, "attn_state must be the same on every ABI");

/*@ // the header fields the plan fixes, and the count within the capacity
    predicate attn_ok(attn_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity && s->count <= s->capacity;
*/

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns s->off_k, s->off_v, s->off_tok, s->off_score, s->off_ring_tok, s->off_ring_mass;
    ensures sizeof(attn_state) <= s->off_k == 128;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), s->off_tok);
    ensures kvc_region_before(s->off_tok, 8 * p->capacity, s->off_score);
    ensures kvc_region_before(s->off_score, 8 * p->capacity, s->off_ring_tok);
    ensures kvc_region_before(s->off_ring_tok, 8 * (p->n_window + 1), s->off_ring_mass);
    ensures kvc_region_before(s->off_ring_mass, 8 * (p->n_window + 1), \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t attn_layout(attn_state *s, const kvc_stream_plan *p)
{
    const uint64_t ring = (uint64_t)p->n_window + 1u;
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(attn_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_tok = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint64_t));
    s->off_score = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(double));
    s->off_ring_tok = kvc_carve(&cur, ring * sizeof(uint64_t));
    s->off_ring_mass = kvc_carve(&cur, ring * sizeof(double));
    return cur;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t attn_arena_size(const kvc_stream_plan *p)
{
    attn_state tmp;
    return attn_layout(&tmp, p);
}

static void ops_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    attn_state *s = (attn_state *)st;
    (void)seed; /* deterministic */
    attn_layout(s, p);
    s->magic = KVC_MAGIC_ATTN_SCORE;
    s->d = p->d, s->dv = p->dv, s->capacity = p->capacity, s->ring = p->n_window + 1u;
    /* no token has the tag UINT64_MAX, so every accumulator starts empty */
    uint64_t *rt = KVC_AT(s, s->off_ring_tok, uint64_t);
    for (uint32_t i = 0; i < s->ring; i++) rt[i] = UINT64_MAX;
}

/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->capacity, p->metadata_bytes, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
    ensures kvc_metadata_bytes_ok(p->metadata_bytes);
*/
static const char *attn_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    p->capacity = p->method_tokens;
    //@ ghost kvc_mul_le(p->capacity, 16777216, (uint64_t)c->d + c->dv, 512);
    *method_worst = (uint64_t)p->capacity * ((uint64_t)c->d + c->dv);
    p->metadata_bytes = (uint64_t)p->capacity * (sizeof(uint64_t) + sizeof(double)) +
                        ((uint64_t)p->n_window + 1u) * (sizeof(uint64_t) + sizeof(double));
    return NULL;
}

static void ops_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    attn_state *s = (attn_state *)st;
    uint64_t *tok = KVC_AT(s, s->off_tok, uint64_t), *rt = KVC_AT(s, s->off_ring_tok, uint64_t);
    double *score = KVC_AT(s, s->off_score, double), *rm = KVC_AT(s, s->off_ring_mass, double);
    /* the attention this token collected while it was recent */
    const uint32_t r = (uint32_t)(token % s->ring);
    const double mine = rt[r] == token ? rm[r] : 0.0;
    rt[r] = UINT64_MAX, rm[r] = 0.0;
    s->seen++;
    uint32_t slot;
    if (s->count < s->capacity) {
        slot = s->count++;
    } else {
        if (s->capacity == 0) return;
        /* the lowest score goes; ties against the oldest; the incoming token
           is the newest, so it goes only when strictly below every held one */
        uint32_t low = 0;
        for (uint32_t i = 1; i < s->count; i++)
            if (score[i] < score[low] || (score[i] == score[low] && tok[i] < tok[low])) low = i;
        if (!(mine >= score[low])) return;
        slot = low;
    }
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    kvc_row_store(&K, slot, k);
    kvc_row_store(&V, slot, v);
    tok[slot] = token, score[slot] = mine;
}

/* Add (H2O) or set (TOVA) the masses of the held rows and of the recent ones. */
static void observe_with(attn_state *s, const double *mass, size_t n, const double *recent, size_t n_recent,
                         uint64_t first_recent, int accumulate)
{
    double *score = KVC_AT(s, s->off_score, double), *rm = KVC_AT(s, s->off_ring_mass, double);
    uint64_t *rt = KVC_AT(s, s->off_ring_tok, uint64_t);
    for (size_t i = 0; i < n && i < s->count; i++) score[i] = accumulate ? score[i] + mass[i] : mass[i];
    for (size_t i = 0; i < n_recent && i < s->ring; i++) {
        const uint64_t t = first_recent + i;
        const uint32_t r = (uint32_t)(t % s->ring);
        if (rt[r] != t) rt[r] = t, rm[r] = 0.0;
        rm[r] = accumulate ? rm[r] + recent[i] : recent[i];
    }
    s->observes++;
}

static void h2o_observe(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                        size_t n_recent, uint64_t first_recent)
{
    (void)cx;
    observe_with((attn_state *)st, mass, n, recent, n_recent, first_recent, 1);
}

static void tova_observe(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                         size_t n_recent, uint64_t first_recent)
{
    (void)cx;
    observe_with((attn_state *)st, mass, n, recent, n_recent, first_recent, 0);
}

static size_t ops_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const attn_state *s = (const attn_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

/*@ requires \valid_read(s) && s->count <= s->capacity <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result == s->count * (s->d + s->dv) && \result <= s->capacity * (s->d + s->dv);
*/
static uint64_t attn_elements_st(const attn_state *s)
{
    //@ ghost kvc_mul_le(s->count, s->capacity, s->d + s->dv, s->d + s->dv);
    return (uint64_t)s->count * (s->d + s->dv);
}

static void ops_fill_stats(const void *st, kvc_stream_stats *stats)
{
    const attn_state *s = (const attn_state *)st;
    stats->observes = s->observes;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns \nothing;
    ensures \result == 1 ==> attn_ok(s, p) && s->seen == method_in;
*/
static int attn_check_st(const attn_state *s, const kvc_stream_plan *p, uint64_t method_in)
{
    attn_state w;
    attn_layout(&w, p);
    return s->magic == KVC_MAGIC_ATTN_SCORE && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->ring == p->n_window + 1u && s->off_k == w.off_k && s->off_v == w.off_v && s->off_tok == w.off_tok &&
           s->off_score == w.off_score && s->off_ring_tok == w.off_ring_tok && s->off_ring_mass == w.off_ring_mass &&
           s->seen == method_in && s->count == (method_in < s->capacity ? method_in : s->capacity);
}

/* The method table's entries cast the stream's void pointer to the typed
 * state (the accessor layer, trusted: docs/proofs.md "Trusted base"). */
static uint64_t ops_elements(const void *st) { return attn_elements_st((const attn_state *)st); }

static int ops_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    return attn_check_st((const attn_state *)st, p, method_in);
}

static void ops_describe_stats(const kvc_stream_stats *s, kvc_text *out)
{
    kvc_text_add(out, "observes=%llu", (unsigned long long)s->observes);
}

const kvc_method_ops kvc_method_ops_h2o = {
    .id = KVC_METHOD_H2O,
    .plan = attn_plan,
    .arena_size = attn_arena_size,
    .init = ops_init,
    .update = ops_update,
    .view = ops_view,
    .elements = ops_elements,
    .fill_stats = ops_fill_stats,
    .check = ops_check,
    .choices_read_values = 1,
    .observe = h2o_observe,
    .describe_stats = ops_describe_stats,
};

const kvc_method_ops kvc_method_ops_tova = {
    .id = KVC_METHOD_TOVA,
    .plan = attn_plan,
    .arena_size = attn_arena_size,
    .init = ops_init,
    .update = ops_update,
    .view = ops_view,
    .elements = ops_elements,
    .fill_stats = ops_fill_stats,
    .check = ops_check,
    .choices_read_values = 1,
    .observe = tova_observe,
    .describe_stats = ops_describe_stats,
};
