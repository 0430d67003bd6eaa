/* TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs"): of the
 * tokens that leave the window, keep the `capacity` that the last observed
 * query attended to most (kvc_stream_observe; the mass summed over the query
 * heads of the group, which orders them as TOVA's average does). Sinks and
 * window stay exact: TOVA with a protected recent window. On the
 * score-and-evict skeleton (shared/evict.h), H2O's attention-while-recent
 * ring; ties go against the oldest token. */
#include "shared/evict.h"

static const kvc_evict_ops tova_evict = KVC_EVICT_OBSERVED(0x4B565432u /* "KVT2" */);

const kvc_method_ops kvc_method_ops_tova =
    KVC_EVICT_OBSERVED_METHOD_OPS(KVC_METHOD_TOVA, &tova_evict, kvc_evict_observe_set);
