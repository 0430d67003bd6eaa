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
 * On the score-and-evict skeleton (shared/evict.h): the score is the pooled
 * one; when full, the lowest among the held tokens and the incoming one is
 * evicted, ties against the oldest, so without observation rows (every
 * score equal) the method keeps the most recent tokens (a FIFO). Its own
 * region: the last two tokens' raw scores, ids and slots, then the
 * observation rows (KVC_SNAPKV_ROWS x d floats). */
#include <math.h>

#include "shared/evict.h"
#include "portable_math.h"

#define KVC_SNAPKV_ROWS 32u /* observation rows kept (positions x query heads of the group) */
#define NO_SLOT         KVC_EVICT_NONE
#define SNAPKV_FIXED    64u /* the own region's header, before the rows */

typedef struct snapkv_own {
    uint32_t n_rows;       /* observation rows given (0 .. KVC_SNAPKV_ROWS) */
    uint32_t prev_slot[2]; /* slots of the last two tokens handed over (newest first), NO_SLOT when not held */
    uint32_t pad_;
    double prev_score[2]; /* their raw scores */
    uint64_t prev_tok[2]; /* their positions */
    double raw;           /* the incoming token's raw score, between score and placed */
} snapkv_own;
_Static_assert(KVC_SNAPKV_ROWS == KVC_SIZE_SNAPKV_ROWS, "kvc_sizes.h sizes the observation rows");
_Static_assert(sizeof(snapkv_own) <= SNAPKV_FIXED, "the own header fits its fixed part");

static snapkv_own *own_of(kvc_evict_state *s) { return (snapkv_own *)(void *)kvc_evict_own(s); }
static const snapkv_own *own_of_c(const kvc_evict_state *s)
{
    return (const snapkv_own *)(const void *)kvc_evict_own_c(s);
}
static float *rows_of(kvc_evict_state *s) { return (float *)(void *)(kvc_evict_own(s) + SNAPKV_FIXED); }

/* log sum_i e^{beta <q_i, k>} over the observation rows (0 without rows: all equal). */
static double raw_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k)
{
    const snapkv_own *o = own_of_c(s);
    if (o->n_rows == 0) return 0.0;
    const float *q = rows_of(s);
    const double beta = (double)cx->plan->beta;
    double l[KVC_SNAPKV_ROWS], m = -INFINITY;
    for (uint32_t i = 0; i < o->n_rows; i++) {
        l[i] = beta * cx->kern->dot_f32(q + (size_t)i * s->d, k, s->d);
        if (l[i] > m) m = l[i];
    }
    double z = 0.0;
    for (uint32_t i = 0; i < o->n_rows; i++) z += kvc_pm_exp(l[i] - m);
    return m + kvc_pm_log(z);
}

/* Pooling over the kernel t-2 .. t+2, as the tokens arrive: this token takes
 * its predecessors' raw scores, and raises theirs if they are held. */
static double snapkv_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    (void)v;
    snapkv_own *o = own_of(s);
    const uint32_t *tok = kvc_evict_tokens(s);
    double *score = kvc_evict_scores(s);
    const double raw = raw_score(s, cx, k);
    double pooled = raw;
    for (int i = 0; i < 2 && (uint64_t)i < s->seen; i++) {
        /* neighbours in the text: the protected spans may have taken tokens between */
        if (o->prev_tok[i] >= token || token - o->prev_tok[i] > 2u) continue;
        if (o->prev_score[i] > pooled) pooled = o->prev_score[i];
        const uint32_t slot = o->prev_slot[i];
        if (slot < s->count && tok[slot] == o->prev_tok[i] && raw > score[slot]) score[slot] = raw;
    }
    o->raw = raw;
    return pooled;
}

/* The slots of the previous tokens (one of them may just have been evicted), then this one's. */
static void snapkv_placed(kvc_evict_state *s, uint32_t slot, uint64_t token)
{
    snapkv_own *o = own_of(s);
    for (int i = 0; i < 2; i++)
        if (o->prev_slot[i] == slot) o->prev_slot[i] = NO_SLOT;
    o->prev_score[1] = o->prev_score[0], o->prev_slot[1] = o->prev_slot[0], o->prev_tok[1] = o->prev_tok[0];
    o->prev_score[0] = o->raw, o->prev_slot[0] = slot, o->prev_tok[0] = token;
}

static void snapkv_own_init(kvc_evict_state *s, unsigned char *own, const kvc_stream_plan *p)
{
    (void)s, (void)p;
    snapkv_own *o = (snapkv_own *)(void *)own;
    o->prev_slot[0] = o->prev_slot[1] = NO_SLOT;
}

static int snapkv_own_check(const kvc_evict_state *s, const unsigned char *own, const kvc_stream_plan *p)
{
    (void)p;
    const snapkv_own *o = (const snapkv_own *)(const void *)own;
    return o->n_rows <= KVC_SNAPKV_ROWS && (o->prev_slot[0] == NO_SLOT || o->prev_slot[0] < s->count) &&
           (o->prev_slot[1] == NO_SLOT || o->prev_slot[1] < s->count);
}

/* Rows accumulate over calls (a decoder may give the window position by
 * position); the last KVC_SNAPKV_ROWS are kept, the ones nearest the end of
 * the prompt. */
static void snapkv_prefill_queries(void *st, const kvc_method_ctx *cx, const float *q, size_t n_rows)
{
    kvc_evict_state *s = (kvc_evict_state *)st;
    (void)cx;
    snapkv_own *o = own_of(s);
    float *rows = rows_of(s);
    const size_t d = s->d;
    for (size_t r = n_rows > KVC_SNAPKV_ROWS ? n_rows - KVC_SNAPKV_ROWS : 0; r < n_rows; r++) {
        if (o->n_rows == KVC_SNAPKV_ROWS) { /* drop the oldest row */
            for (size_t i = 0; i + d < (size_t)KVC_SNAPKV_ROWS * d; i++) rows[i] = rows[i + d];
            o->n_rows--;
        }
        for (size_t c = 0; c < d; c++) rows[(size_t)o->n_rows * d + c] = q[r * d + c];
        o->n_rows++;
    }
}

static void snapkv_stats(const void *st, kvc_stream_stats *stats)
{
    stats->observes = own_of_c((const kvc_evict_state *)st)->n_rows;
}

static void snapkv_describe_stats(const kvc_stream_stats *s, kvc_text *out)
{
    kvc_text_add(out, "observation_rows=%llu", (unsigned long long)s->observes);
}

static const kvc_evict_ops snapkv_evict = {
    .magic = 0x4B565332u, /* "KVS2" */
    .own_fixed = SNAPKV_FIXED,
    .own_per_dim = 4u * KVC_SNAPKV_ROWS,
    .score = snapkv_score,
    .placed = snapkv_placed,
    .own_check = snapkv_own_check,
    .own_init = snapkv_own_init,
};

const kvc_method_ops kvc_method_ops_snapkv = {
    KVC_EVICT_METHOD_OPS(KVC_METHOD_SNAPKV, &snapkv_evict),
    .fill_stats = snapkv_stats,
    .prefill_queries = snapkv_prefill_queries,
    .describe_stats = snapkv_describe_stats,
};
