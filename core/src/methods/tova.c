/* TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs"): of the
 * tokens that leave the window, keep the `capacity` that the last observed
 * query attended to most (kvc_stream_observe; the mass summed over the query
 * heads of the group, which orders them as TOVA's average does). Sinks and
 * window stay exact: TOVA with a protected recent window. On the
 * score-and-evict skeleton (shared/evict.h), H2O's attention-while-recent
 * ring; ties go against the oldest token. */
#include "shared/evict.h"

static void tova_observe(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                         size_t n_recent, uint64_t first_recent)
{
    (void)cx;
    kvc_evict_observe(st, mass, n, recent, n_recent, first_recent, 0);
}

static const kvc_evict_ops tova_evict = {
    .magic = 0x4B565432u, /* "KVT2" */
    .own_fixed = KVC_EVICT_OBSERVED_FIXED,
    .own_per_window = KVC_EVICT_OBSERVED_PER_WINDOW,
    .score = kvc_evict_observed_score,
    .own_init = kvc_evict_observed_init,
    .own_check = kvc_evict_observed_check,
};

const kvc_method_ops kvc_method_ops_tova = {
    KVC_EVICT_METHOD_OPS(KVC_METHOD_TOVA, &tova_evict),
    .observe = tova_observe,
    .fill_stats = kvc_evict_observed_stats,
    .describe_stats = kvc_evict_observed_describe_stats,
};
