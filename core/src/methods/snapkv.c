/* SnapKV (Li et al. 2024, "SnapKV: LLM Knows What You are Looking for Before
 * Generation"), in the form a stream bounded at every token can run: the
 * decoder hands the method the prompt's last queries *before* the prompt is
 * appended (kvc_stream_prefill_queries / kvc_cache_prefill_queries: the
 * "observation window", question-agnostic when it is the end of the context
 * without the question); each token that leaves the window is scored by the
 * attention those queries give it, pooled over its neighbours, and of those
 * tokens the method keeps the `capacity` with the highest scores.
 *
 * Score of token t: log sum_i e^{beta <q_i, k_t>} over the (at most
 * KVC_SNAPKV_ROWS) observation rows. SnapKV sums softmax probabilities,
 * sum_i e^{beta <q_i, k_t>} / Z_i; the partition functions Z_i run over the
 * whole prompt, which a stream has not seen when it must decide, so each
 * query here weighs in with its Z_i (queries of one observation window are
 * alike, so the ranking is close). Pooling: SnapKV max-pools the scores over
 * a kernel of 5 positions, keeping spans rather than isolated tokens; here a
 * token's pooled score is the max of its own and its two predecessors'
 * (already scored), and its arrival raises the pooled scores of those two
 * when they are held: the same kernel, applied as the tokens arrive (only
 * between tokens at most 2 positions apart: the protected spans may take
 * tokens out of the sequence).
 *
 * When full, the lowest pooled score among the held tokens and the incoming
 * one is evicted, ties against the oldest; without observation rows every
 * score is equal and the method keeps the most recent tokens (a FIFO). Kept
 * tokens have weight 1. Arrays: keys, values, the token and pooled score of
 * each held row, the observation rows (KVC_SNAPKV_ROWS x d floats). */
#include <math.h>

#include "arena.h"
#include "methods.h"
#include "shared/rows.h"
#include "portable_math.h"

#define KVC_MAGIC_SNAPKV 0x4B565331u /* "KVS1" */
#define KVC_SNAPKV_ROWS  32u         /* observation rows kept (positions x query heads of the group) */
#define NO_SLOT          UINT32_MAX

typedef struct snapkv_state {
    uint32_t magic;
    uint32_t d, dv, capacity;
    uint32_t count;        /* held tokens (slots 0 .. count-1) */
    uint32_t n_rows;       /* observation rows given (0 .. KVC_SNAPKV_ROWS) */
    uint64_t seen;         /* tokens handed to the method */
    double prev_score[2];  /* raw scores of the last two tokens handed over (newest first) */
    uint64_t prev_tok[2];  /* their positions */
    uint32_t prev_slot[2]; /* their slots, NO_SLOT when not held */
    uint64_t off_k, off_v, off_tok, off_score, off_q;
} snapkv_state;
_Static_assert(KVC_SNAPKV_ROWS == KVC_SIZE_SNAPKV_ROWS, "kvc_sizes.h sizes the observation rows");
_Static_assert(sizeof(snapkv_state) == KVC_SIZE_SNAPKV_STATE, "snapkv_state must be the same on every ABI");

/*@ // the header fields the plan fixes, and the count within the capacity
    predicate snapkv_ok(snapkv_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity && s->count <= s->capacity;
*/

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns s->off_k, s->off_v, s->off_tok, s->off_score, s->off_q;
    ensures sizeof(snapkv_state) <= s->off_k == 128;
    ensures kvc_region_before(s->off_k, kvc_stream_rows_l(p, p->capacity, p->d), s->off_v);
    ensures kvc_region_before(s->off_v, kvc_stream_rows_l(p, p->capacity, p->dv), s->off_tok);
    ensures kvc_region_before(s->off_tok, 8 * p->capacity, s->off_score);
    ensures kvc_region_before(s->off_score, 8 * p->capacity, s->off_q);
    ensures kvc_region_before(s->off_q, 32 * 4 * p->d, \result);
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t snapkv_layout(snapkv_state *s, const kvc_stream_plan *p)
{
    uint64_t cur = KVC_ALIGN_UP((uint64_t)sizeof(snapkv_state));
    s->off_k = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->d));
    s->off_v = kvc_carve(&cur, kvc_rows_bytes(p->dtype, p->capacity, p->dv));
    s->off_tok = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(uint64_t));
    s->off_score = kvc_carve(&cur, (uint64_t)p->capacity * sizeof(double));
    s->off_q = kvc_carve(&cur, (uint64_t)KVC_SNAPKV_ROWS * p->d * sizeof(float));
    return cur;
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    assigns \nothing;
    ensures kvc_method_bytes_ok(\result);
*/
static uint64_t snapkv_arena_size(const kvc_stream_plan *p)
{
    snapkv_state tmp;
    return snapkv_layout(&tmp, p);
}

static void ops_init(void *st, const kvc_stream_plan *p, uint64_t seed)
{
    snapkv_state *s = (snapkv_state *)st;
    (void)seed; /* deterministic */
    snapkv_layout(s, p);
    s->magic = KVC_MAGIC_SNAPKV;
    s->d = p->d, s->dv = p->dv, s->capacity = p->capacity;
    s->prev_slot[0] = s->prev_slot[1] = NO_SLOT;
}

/*@ requires kvc_method_plan_pre(c, p) && \valid(method_worst) && \separated(method_worst, c, p);
    assigns p->capacity, p->metadata_bytes, *method_worst;
    ensures kvc_method_plan_post(c, p, *method_worst) && p->capacity == p->method_tokens;
    ensures kvc_metadata_bytes_ok(p->metadata_bytes);
*/
static const char *snapkv_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst)
{
    p->capacity = p->method_tokens;
    //@ ghost kvc_mul_le(p->capacity, 16777216, (uint64_t)c->d + c->dv, 512);
    *method_worst = (uint64_t)p->capacity * ((uint64_t)c->d + c->dv);
    p->metadata_bytes =
        (uint64_t)p->capacity * (sizeof(uint64_t) + sizeof(double)) + (uint64_t)KVC_SNAPKV_ROWS * c->d * sizeof(float);
    return NULL;
}

/* log sum_i e^{beta <q_i, k>} over the observation rows (0 without rows: all equal). */
static double raw_score(const snapkv_state *s, const kvc_method_ctx *cx, const float *k)
{
    if (s->n_rows == 0) return 0.0;
    const float *q = KVC_AT_C(s, s->off_q, float);
    const double beta = (double)cx->plan->beta;
    double l[KVC_SNAPKV_ROWS], m = -INFINITY;
    for (uint32_t i = 0; i < s->n_rows; i++) {
        l[i] = beta * cx->kern->dot_f32(q + (size_t)i * s->d, k, s->d);
        if (l[i] > m) m = l[i];
    }
    double z = 0.0;
    for (uint32_t i = 0; i < s->n_rows; i++) z += kvc_pm_exp(l[i] - m);
    return m + kvc_pm_log(z);
}

static void ops_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    snapkv_state *s = (snapkv_state *)st;
    uint64_t *tok = KVC_AT(s, s->off_tok, uint64_t);
    double *score = KVC_AT(s, s->off_score, double);
    const double raw = raw_score(s, cx, k);
    /* pooling over the kernel t-2 .. t+2, as the tokens arrive: this token
       takes its predecessors' raw scores, and raises theirs if they are held */
    double pooled = raw;
    for (int i = 0; i < 2 && (uint64_t)i < s->seen; i++) {
        /* neighbours in the text: the protected spans may have taken tokens between */
        if (s->prev_tok[i] >= token || token - s->prev_tok[i] > 2u) continue;
        if (s->prev_score[i] > pooled) pooled = s->prev_score[i];
        const uint32_t slot = s->prev_slot[i];
        if (slot < s->count && tok[slot] == s->prev_tok[i] && raw > score[slot]) score[slot] = raw;
    }
    s->seen++;
    uint32_t slot = NO_SLOT;
    if (s->count < s->capacity) {
        slot = s->count++;
    } else if (s->capacity > 0) {
        uint32_t low = 0;
        for (uint32_t i = 1; i < s->count; i++)
            if (score[i] < score[low] || (score[i] == score[low] && tok[i] < tok[low])) low = i;
        if (pooled >= score[low]) slot = low; /* the incoming token is the newest: ties keep it */
    }
    /* the slots of the previous tokens: one of them may just have been evicted */
    for (int i = 0; i < 2; i++)
        if (s->prev_slot[i] == slot) s->prev_slot[i] = NO_SLOT;
    s->prev_score[1] = s->prev_score[0], s->prev_slot[1] = s->prev_slot[0], s->prev_tok[1] = s->prev_tok[0];
    s->prev_score[0] = raw, s->prev_slot[0] = slot, s->prev_tok[0] = token;
    if (slot == NO_SLOT) return;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, cx->plan->dtype, cx->kern);
    kvc_row_store(&K, slot, k);
    kvc_row_store(&V, slot, v);
    tok[slot] = token, score[slot] = pooled;
}

/* Rows accumulate over calls (a decoder may give the window position by
 * position); the last KVC_SNAPKV_ROWS are kept, the ones nearest the end of
 * the prompt. */
static void ops_prefill_queries(void *st, const kvc_method_ctx *cx, const float *q, size_t n_rows)
{
    snapkv_state *s = (snapkv_state *)st;
    (void)cx;
    float *rows = KVC_AT(s, s->off_q, float);
    const size_t d = s->d;
    for (size_t r = n_rows > KVC_SNAPKV_ROWS ? n_rows - KVC_SNAPKV_ROWS : 0; r < n_rows; r++) {
        if (s->n_rows == KVC_SNAPKV_ROWS) { /* drop the oldest row */
            for (size_t i = 0; i + d < (size_t)KVC_SNAPKV_ROWS * d; i++) rows[i] = rows[i + d];
            s->n_rows--;
        }
        for (size_t c = 0; c < d; c++) rows[(size_t)s->n_rows * d + c] = q[r * d + c];
        s->n_rows++;
    }
}

static size_t ops_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg)
{
    const snapkv_state *s = (const snapkv_state *)st;
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, p->dtype, NULL);
    const kvc_rows V = kvc_rows_at(s, s->off_v, s->dv, p->dtype, NULL);
    return kvc_segment_rows_uniform(seg, &K, &V, 0, s->count, 1.0);
}

/*@ requires \valid_read(s) && s->count <= s->capacity <= 16777216 && s->d <= 256 && s->dv <= 256;
    assigns \nothing;
    ensures \result == s->count * (s->d + s->dv) && \result <= s->capacity * (s->d + s->dv);
*/
static uint64_t snapkv_elements_st(const snapkv_state *s)
{
    //@ ghost kvc_mul_le(s->count, s->capacity, s->d + s->dv, s->d + s->dv);
    return (uint64_t)s->count * (s->d + s->dv);
}

/*@ requires kvc_plan_dims_ok(p) && p->capacity <= 16777216;
    requires \valid(s) && \separated(s, p);
    assigns \nothing;
    ensures \result == 1 ==> snapkv_ok(s, p) && s->seen == method_in;
*/
static int snapkv_check_st(const snapkv_state *s, const kvc_stream_plan *p, uint64_t method_in)
{
    snapkv_state w;
    snapkv_layout(&w, p);
    return s->magic == KVC_MAGIC_SNAPKV && s->d == p->d && s->dv == p->dv && s->capacity == p->capacity &&
           s->n_rows <= KVC_SNAPKV_ROWS && s->off_k == w.off_k && s->off_v == w.off_v && s->off_tok == w.off_tok &&
           s->off_score == w.off_score && s->off_q == w.off_q && s->seen == method_in &&
           s->count == (method_in < s->capacity ? method_in : s->capacity) &&
           (s->prev_slot[0] == NO_SLOT || s->prev_slot[0] < s->count) &&
           (s->prev_slot[1] == NO_SLOT || s->prev_slot[1] < s->count);
}

/* The method table's entries cast the stream's void pointer to the typed
 * state (the accessor layer, trusted: docs/proofs.md "Trusted base"). */
static uint64_t ops_elements(const void *st) { return snapkv_elements_st((const snapkv_state *)st); }

static int ops_check(const void *st, const kvc_stream_plan *p, uint64_t method_in)
{
    return snapkv_check_st((const snapkv_state *)st, p, method_in);
}

static void ops_fill_stats(const void *st, kvc_stream_stats *stats)
{
    const snapkv_state *s = (const snapkv_state *)st;
    stats->observes = s->n_rows;
}

static void ops_describe_stats(const kvc_stream_stats *s, kvc_text *out)
{
    kvc_text_add(out, "observation_rows=%llu", (unsigned long long)s->observes);
}

const kvc_method_ops kvc_method_ops_snapkv = {
    .id = KVC_METHOD_SNAPKV,
    .plan = snapkv_plan,
    .arena_size = snapkv_arena_size,
    .init = ops_init,
    .update = ops_update,
    .view = ops_view,
    .elements = ops_elements,
    .fill_stats = ops_fill_stats,
    .check = ops_check,
    .choices_read_values = 1,
    .prefill_queries = ops_prefill_queries,
    .describe_stats = ops_describe_stats,
};
