/* K-norm (Devoto et al. 2024, "A Simple and Effective L2 Norm-Based Strategy
 * for KV Cache Compression"): of the tokens that leave the window, keep the
 * `capacity` ones whose keys have the lowest L2 norm (low-norm keys draw
 * high attention). On the score-and-evict skeleton (shared/evict.h): the
 * score is minus the norm of the key as it arrived (before quantisation,
 * rounded to float), and on equal norms the older token stays. */
#include <math.h>

#include "shared/evict.h"

static double knorm_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    (void)v, (void)token;
    return -(double)(float)sqrt(cx->kern->dot_f32(k, k, s->d));
}

static const kvc_evict_ops knorm_evict = {
    .magic = 0x4B564E33u, /* "KVN3" */
    .ties_keep_older = 1,
    .score = knorm_score,
};

const kvc_method_ops kvc_method_ops_knorm = {KVC_EVICT_METHOD_OPS(KVC_METHOD_KNORM, &knorm_evict)};
