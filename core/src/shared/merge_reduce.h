/* MergeAndReduce, bounded mode (docs/methods.md section 2.2), internal.
 *
 * Levels 0..T. Level 0 holds up to t input units of weight q = 2^e0; every t
 * units it is halved by SoftmaxBalance and the t/2 survivors climb: a level
 * l >= 1 holds 0 or t/2 tokens of weight q 2^l, and an arriving block is
 * either stored there or united with it and halved again (the binary-counter
 * cascade of the paper's Algorithm 4). The top level T keeps t/2 tokens: when
 * a block arrives at a non-empty top, top u block is halved in place and the
 * top's exponent rises by one; from then on the input is stratified-subsampled
 * with q = 2^(top halvings) (one uniform token per q consecutive tokens, its
 * weight q), so every block reaches the top with the top's weight and no
 * level ever mixes weights. Peak footprint: t + T t/2 tokens + 1 candidate,
 * forever, whatever the stream length. */
#ifndef KVC_MERGE_REDUCE_H
#define KVC_MERGE_REDUCE_H

#include "balance.h"

#define KVC_MR_MAX_LEVELS 16u

/* One tree's counters; lives in the arena (plain data, no pointers). */
typedef struct kvc_mr {
    uint32_t count[KVC_MR_MAX_LEVELS + 1]; /* tokens held per level 0..T */
    int32_t e0;                            /* log2 of the unit weight q */
    int32_t top_exp;                       /* log2 of the top level's weight */
    uint32_t store;                        /* which storage block of the slot arrays it uses */
    uint32_t group_n;                      /* raw tokens in the current input group */
    uint32_t has_cand;                     /* the group's candidate slot holds a token */
    uint32_t pad_[2];                      /* keeps `tokens` 8-aligned on every ABI */
    uint64_t tokens; /* raw tokens this tree represents (its weight total, in expectation after merges) */
} kvc_mr;
_Static_assert(sizeof(kvc_mr) == 104, "kvc_mr must be the same on every ABI");

/* Everything a tree operation needs, rebuilt per call from the owner's arena. */
typedef struct kvc_mr_env {
    kvc_rows keys, values; /* slot rows (values.base NULL: keys-only tree) */
    float *weights;
    uint32_t *tokens;
    size_t d, dv;
    uint32_t t, T;
    size_t slots_per_store; /* t + (T-1) t/2 + top_cap + 1 */
    size_t top_cap;         /* t/2 in bounded mode; more in prefill (unbounded-top) mode */
    int bounded;            /* 1: bounded mode; 0: the top level accumulates (prefill) */
    kvc_balance_io bal;     /* beta, kappa, mode, gamma, delta, scratch, keep, rng */
    uint64_t halvings;
} kvc_mr_env;

/*@ requires t <= 16777216 && 1 <= T <= 16 && top_cap <= 268435456;
    assigns \nothing;
    ensures \result == t + (T - 1) * (t / 2) + top_cap + 1;
    ensures \result <= 411041793;
*/
static inline size_t kvc_mr_slots(uint32_t t, uint32_t T, size_t top_cap)
{
    return (size_t)t + (size_t)(T - 1) * (t / 2) + top_cap + 1;
}

/* Set the SoftmaxBalance parameters every halving of the tree uses. */
/*@ requires \valid(e) && mode <= 2;
    assigns e->bal.beta, e->bal.kappa, e->bal.mode, e->bal.gamma, e->bal.delta, e->bal.scratch, e->bal.keep,
            e->bal.rng;
    ensures e->bal.mode == mode && e->bal.scratch == scratch && e->bal.keep == keep && e->bal.rng == rng;
*/
static inline void kvc_mr_env_walk(kvc_mr_env *e, double beta, double kappa, uint32_t mode, double gamma, double delta,
                                   double *scratch, uint8_t *keep, kvc_rng *rng)
{
    e->bal.beta = beta;
    e->bal.kappa = kappa;
    e->bal.mode = (kvc_balance_mode)mode;
    e->bal.gamma = gamma;
    e->bal.delta = delta;
    e->bal.scratch = scratch;
    e->bal.keep = keep;
    e->bal.rng = rng;
}

void kvc_mr_reset(kvc_mr_env *env, kvc_mr *mr, uint32_t store);
/* One raw token (weight 1) through the stratified input stage; v is ignored by a keys-only tree. */
void kvc_mr_push_raw(kvc_mr_env *env, kvc_mr *mr, const float *k, const float *v, uint32_t token);
/* Move every token of `from` into `into` without bias (Bernoulli thinning or
 * exact copies, see merge_reduce.c), then reset `from`. `into` must have the
 * larger unit weight. */
void kvc_mr_merge(kvc_mr_env *env, kvc_mr *into, kvc_mr *from);
/* Tokens held (cache entries) and the slot index of (level, i). */
size_t kvc_mr_held(const kvc_mr *mr, uint32_t T);
size_t kvc_mr_slot(const kvc_mr_env *env, const kvc_mr *mr, uint32_t level, size_t i);
/* The counters of a tree with batches of t, T levels and a top of top_cap
 * are inside what the invariants allow (every count that indexes a slot
 * fits its level, exponents in range, the top's weight tied to the unit
 * weight). bounded: 1 streaming, 0 prefill (unit weight fixed at 1). */
int kvc_mr_ok(const kvc_mr *mr, uint32_t t, uint32_t T, uint64_t top_cap, int bounded);

#endif
