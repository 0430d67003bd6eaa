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

static const kvc_evict_ops h2o_evict = KVC_EVICT_OBSERVED(0x4B564832u /* "KVH2" */);

const kvc_method_ops kvc_method_ops_h2o =
    KVC_EVICT_OBSERVED_METHOD_OPS(KVC_METHOD_H2O, &h2o_evict, kvc_evict_observe_add);
