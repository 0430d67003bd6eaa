/* The score-and-evict skeleton: what K-norm, KeyDiff, H2O, TOVA, SnapKV and
 * expected-attention share. Of the tokens that leave the window, a method
 * keeps `capacity` rows, each with a score and its token id; while there is
 * room a token takes the next slot, and when the cache is full the lowest
 * score among the held tokens and the incoming one is evicted (on equal
 * scores the older token goes, or stays: `ties_keep_older`). Kept tokens have
 * weight 1: an eviction policy, not an estimator.
 *
 * The skeleton owns the layout (header, key rows, value rows, scores, token
 * ids, then the method's own region), arena_size, init, plan, check, view,
 * elements and update. A method gives its score of an incoming token and,
 * when it needs them, its own region (sized by three constants), a victim
 * rule of its own (KeyDiff's scores change with every token held), a hook
 * after each decision (SnapKV's pooling) and its query-aware hooks. A new
 * score method is a file that fills a kvc_evict_ops and names
 * KVC_EVICT_METHOD_OPS in its method table (docs/extending.md).
 *
 * Proof structure (verify wp_methods, wp_sizes_ilp32): the functions on the
 * typed state (kvc_evict_*_st and the choice of a slot) are proved; the
 * method table's entries cast the stream's void pointer and find the
 * method's kvc_evict_ops through its table (the accessor layer, trusted,
 * docs/proofs.md). */
#ifndef KVC_SHARED_EVICT_H
#define KVC_SHARED_EVICT_H

#include <stdint.h>

#include "arena.h"
#include "methods.h"
#include "shared/rows.h"

/* No slot: the incoming token is not kept. */
#define KVC_EVICT_NONE UINT32_MAX

typedef struct kvc_evict_state {
    uint32_t magic; /* the method's (kvc_evict_ops.magic) */
    uint32_t d, dv, capacity;
    uint32_t count; /* held tokens (slots 0 .. count-1) */
    uint32_t pad_;
    uint64_t seen; /* tokens handed to the method */
    uint64_t off_k, off_v, off_score, off_tok, off_own;
} kvc_evict_state;

/* What a score method gives the skeleton. */
typedef struct kvc_evict_ops {
    uint32_t magic;
    /* 1: on equal scores the older token stays (K-norm); 0: the newer (the
       attention scores, whose all-equal start must keep the recent tokens) */
    uint32_t ties_keep_older;
    /* the method's own region: own_fixed + own_per_window (n_window + 1) +
       own_per_dim d bytes (a header of its own, a ring over the window,
       query rows); 0, 0, 0 for none */
    uint32_t own_fixed, own_per_window, own_per_dim;
    /* the incoming token's score (higher is kept). Called once per token
       before the decision; it may read and write the held scores and its own
       region (SnapKV raises its neighbours' pooled scores) */
    double (*score)(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token);
    /* NULL: the lowest score goes. Otherwise, with the cache full, the slot to
       evict for the incoming token of score sc, or count for the incoming one */
    uint32_t (*victim)(const kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, double sc);
    /* NULL, or told the slot the token took (KVC_EVICT_NONE: dropped), after
       the decision and before its rows are stored */
    void (*placed)(kvc_evict_state *s, uint32_t slot, uint64_t token);
    /* NULL, or the method's own region's check (1: consistent with the plan and count) */
    int (*own_check)(const kvc_evict_state *s, const unsigned char *own, const kvc_stream_plan *p);
    /* NULL, or the own region's first state (the arena is zeroed by init) */
    void (*own_init)(kvc_evict_state *s, unsigned char *own, const kvc_stream_plan *p);
} kvc_evict_ops;

/*@ // a method's own-region constants, in the ranges the layout's proof assumes
    predicate kvc_evict_own_sizes_ok(kvc_evict_ops *eo) =
      \valid_read(eo) && eo->own_fixed <= 4096 && eo->own_per_window <= 64 && eo->own_per_dim <= 4096;
    logic integer kvc_evict_own_bytes_l(kvc_evict_ops *eo, kvc_stream_plan *p) =
      eo->own_fixed + eo->own_per_window * (p->n_window + 1) + eo->own_per_dim * p->d;
    // the header fields the plan fixes, and the count within the capacity
    predicate kvc_evict_ok(kvc_evict_state *s, kvc_stream_plan *p) =
      \valid(s) && kvc_plan_dims_ok(p) && \separated(s, p) && p->capacity <= 16777216 &&
      s->d == p->d && s->dv == p->dv && s->capacity == p->capacity && s->count <= s->capacity;
*/

/* The method's own region, and the held tokens' scores and ids. */
static inline unsigned char *kvc_evict_own(kvc_evict_state *s) { return KVC_AT(s, s->off_own, unsigned char); }
static inline const unsigned char *kvc_evict_own_c(const kvc_evict_state *s)
{
    return KVC_AT_C(s, s->off_own, unsigned char);
}
static inline double *kvc_evict_scores(kvc_evict_state *s) { return KVC_AT(s, s->off_score, double); }
static inline const uint32_t *kvc_evict_tokens(const kvc_evict_state *s) { return KVC_AT_C(s, s->off_tok, uint32_t); }
static inline const double *kvc_evict_scores_c(const kvc_evict_state *s) { return KVC_AT_C(s, s->off_score, double); }

/* The method table's entries the skeleton gives (each finds the method's
 * kvc_evict_ops through kvc_method_ops_of(plan->method)->evict). */
const char *kvc_evict_plan(const kvc_stream_config *c, kvc_stream_plan *p, uint64_t *method_worst);
uint64_t kvc_evict_arena_size(const kvc_stream_plan *p);
void kvc_evict_init(void *st, const kvc_stream_plan *p, uint64_t seed);
void kvc_evict_update(void *st, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token);
size_t kvc_evict_view(const void *st, const kvc_stream_plan *p, kvc_segment *seg);
uint64_t kvc_evict_elements(const void *st);
int kvc_evict_check(const void *st, const kvc_stream_plan *p, uint64_t method_in);

/* A score method's table: the skeleton's entries, its kvc_evict_ops, then
 * whatever else it has (observe, prefill_queries, parameters, printing). */
#define KVC_EVICT_METHOD_OPS(ID, EVICT)                                                                                \
    .id = (ID), KVC_METHOD_STATE_OPS(kvc_evict), .choices_read_values = 1, .evict = (EVICT)

/* ---- attention collected while recent (H2O, TOVA: shared/evict_observed.c) ----
 * A token collects attention while it is in the window, so these methods
 * keep a ring of n_window + 1 accumulators (the window and the current token)
 * indexed by token mod (n_window + 1), each tagged with its token so that a
 * slot reused by a later token (or one the protected spans took) starts
 * again from zero. */
#define KVC_EVICT_OBSERVED_FIXED      64u /* own header: observes, ring */
#define KVC_EVICT_OBSERVED_PER_WINDOW 16u /* a token tag and a mass per ring slot */
/* score: the attention the token collected while it was recent (its ring slot emptied) */
double kvc_evict_observed_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v,
                                uint64_t token);
void kvc_evict_observed_init(kvc_evict_state *s, unsigned char *own, const kvc_stream_plan *p);
int kvc_evict_observed_check(const kvc_evict_state *s, const unsigned char *own, const kvc_stream_plan *p);
/* the observe hooks: add (H2O) or set (TOVA) the masses of the held rows and of the recent ones */
void kvc_evict_observe_add(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                           size_t n_recent, uint64_t first_recent);
void kvc_evict_observe_set(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                           size_t n_recent, uint64_t first_recent);
void kvc_evict_observed_stats(const void *st, kvc_stream_stats *stats);
void kvc_evict_observed_describe_stats(const kvc_stream_stats *s, kvc_text *out);

/* An observing method's score and hooks (its kvc_evict_ops), and its table
 * given its observe hook. */
#define KVC_EVICT_OBSERVED(MAGIC)                                                                                      \
    {                                                                                                                  \
        .magic = (MAGIC), .own_fixed = KVC_EVICT_OBSERVED_FIXED, .own_per_window = KVC_EVICT_OBSERVED_PER_WINDOW,      \
        .score = kvc_evict_observed_score, .own_init = kvc_evict_observed_init, .own_check = kvc_evict_observed_check  \
    }
#define KVC_EVICT_OBSERVED_METHOD_OPS(ID, EVICT, OBSERVE)                                                              \
    {                                                                                                                  \
        KVC_EVICT_METHOD_OPS(ID, EVICT), .observe = (OBSERVE), .fill_stats = kvc_evict_observed_stats,                 \
                                         .describe_stats = kvc_evict_observed_describe_stats                           \
    }

#endif
