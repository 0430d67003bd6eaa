/* H2O (Zhang et al. 2023, "H2O: Heavy-Hitter Oracle for Efficient Generative
 * Inference of Large Language Models"): of the tokens that leave the window,
 * keep the `capacity` with the most attention accumulated over every
 * observed query since the token arrived (its time in the window included):
 * heavy hitters. Scores come from kvc_stream_observe (or
 * kvc_stream_attend_observed, which does both), summed over the query heads
 * of the group; sinks and window stay exact, so this is H2O's "heavy hitters
 * + recent window". On the score-and-evict skeleton (shared/evict.h); ties go
 * against the oldest token, so a decoder that never observes (all scores 0)
 * gets a FIFO, not a frozen prefix. */
#include "shared/evict.h"

static void h2o_observe(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                        size_t n_recent, uint64_t first_recent)
{
    (void)cx;
    kvc_evict_observe(st, mass, n, recent, n_recent, first_recent, 1);
}

static const kvc_evict_ops h2o_evict = {
    .magic = 0x4B564832u, /* "KVH2" */
    .own_fixed = KVC_EVICT_OBSERVED_FIXED,
    .own_per_window = KVC_EVICT_OBSERVED_PER_WINDOW,
    .score = kvc_evict_observed_score,
    .own_init = kvc_evict_observed_init,
    .own_check = kvc_evict_observed_check,
};

const kvc_method_ops kvc_method_ops_h2o = {
    KVC_EVICT_METHOD_OPS(KVC_METHOD_H2O, &h2o_evict),
    .observe = h2o_observe,
    .fill_stats = kvc_evict_observed_stats,
    .describe_stats = kvc_evict_observed_describe_stats,
};
