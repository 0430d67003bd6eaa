/* KeyDiff (Park et al. 2025, "KeyDiff: Key Similarity-Based KV Cache
 * Eviction for Long-Context LLM Inference in Resource-Constrained
 * Environments"): of the tokens that leave the window, keep the `capacity`
 * ones whose keys are least similar to the others. The anchor is the sum of
 * the normalised keys held plus the incoming one; when the cache is full, the
 * token (held or incoming) whose key has the largest cosine to the anchor is
 * evicted. Query-agnostic and attention-free; kept tokens have weight 1.
 *
 * On the score-and-evict skeleton (shared/evict.h) with a victim rule of its
 * own: a held token's score is the inverse norm of its key as it arrived
 * (before quantisation, rounded to float), and the anchor is recomputed from
 * the held rows at each eviction (O(capacity d), the order of one attend), so
 * no running sum drifts. */
#include <math.h>

#include "shared/evict.h"

static double keydiff_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v,
                            uint64_t token)
{
    (void)v, (void)token;
    const double nk = sqrt(cx->kern->dot_f32(k, k, s->d));
    return nk > 0.0 ? (double)(float)(1.0 / nk) : 0.0; /* a zero key is similar to nothing */
}

static uint32_t keydiff_victim(const kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, double inv_k)
{
    const double *inv = kvc_evict_scores_c(s);
    const kvc_rows K = kvc_rows_at(s, s->off_k, s->d, cx->plan->dtype, cx->kern);
    /* anchor = sum of the normalised held keys and the incoming one */
    double anchor[KVC_MAX_HEAD_DIM];
    for (uint32_t c = 0; c < s->d; c++) anchor[c] = (double)k[c] * inv_k;
    for (uint32_t i = 0; i < s->count; i++) K.rk->axpy(anchor, inv[i], kvc_row(&K, i), s->d);
    /* the most similar to the anchor goes; the incoming key first, so ties keep the held */
    double worst = 0.0;
    for (uint32_t c = 0; c < s->d; c++) worst += (double)k[c] * anchor[c];
    worst *= inv_k;
    uint32_t evict = s->count; /* = the incoming token */
    for (uint32_t i = 0; i < s->count; i++) {
        const double cs = K.rk->dot_f64(kvc_row(&K, i), anchor, s->d) * inv[i];
        if (cs > worst) worst = cs, evict = i;
    }
    return evict;
}

static const kvc_evict_ops keydiff_evict = {
    .magic = 0x4B564B33u, /* "KVK3" */
    .score = keydiff_score,
    .victim = keydiff_victim,
};

const kvc_method_ops kvc_method_ops_keydiff = {KVC_EVICT_METHOD_OPS(KVC_METHOD_KEYDIFF, &keydiff_evict)};
