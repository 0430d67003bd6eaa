/* expected-attention: of the tokens that leave the window, keep the
 * `capacity` that the decoder's coming queries are expected to attend to
 * most. The queries are modelled as Gaussian with the per-dimension mean and
 * variance of the prompt's last queries (kvc_stream_prefill_queries, as for
 * SnapKV); under that model E[e^{beta <q, k>}] = e^{beta <mu, k> + beta^2/2
 * sum_c var_c k_c^2}, and the score is its log plus log ||v|| (a token
 * contributes its value's size). kvpress's ExpectedAttentionPress with a
 * diagonal covariance and no extrapolation of positions (the keys here are
 * the cached, already rotated ones). Without queries the score is log ||v||.
 * On the score-and-evict skeleton (shared/evict.h): the own region holds the
 * query count, then the running mean and squared deviations (Welford). */
#include <math.h>

#include "shared/evict.h"
#include "portable_math.h"

#define EA_FIXED 64u /* the own header: the query count */

static uint64_t *count_of(kvc_evict_state *s) { return (uint64_t *)(void *)kvc_evict_own(s); }
static double *mean_of(kvc_evict_state *s) { return (double *)(void *)(kvc_evict_own(s) + EA_FIXED); }

static double ea_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v, uint64_t token)
{
    (void)token;
    const uint64_t n = *count_of(s);
    const double *mu = mean_of(s), *m2 = mu + s->d, beta = (double)cx->plan->beta;
    double lin = 0.0, quad = 0.0;
    for (uint32_t c = 0; c < s->d && n > 0; c++) {
        lin += mu[c] * k[c];
        quad += m2[c] / (double)n * k[c] * k[c];
    }
    return beta * lin + 0.5 * beta * beta * quad + 0.5 * kvc_pm_log(cx->kern->dot_f32(v, v, s->dv));
}

/* Every row given updates the running moments (all of them: a mean loses nothing). */
static void ea_prefill_queries(void *st, const kvc_method_ctx *cx, const float *q, size_t n_rows)
{
    kvc_evict_state *s = (kvc_evict_state *)st;
    (void)cx;
    uint64_t *n = count_of(s);
    double *mu = mean_of(s), *m2 = mu + s->d;
    for (size_t r = 0; r < n_rows; r++) {
        (*n)++;
        for (uint32_t c = 0; c < s->d; c++) {
            const double x = q[r * s->d + c], delta = x - mu[c];
            mu[c] += delta / (double)*n;
            m2[c] += delta * (x - mu[c]);
        }
    }
}

static void ea_stats(const void *st, kvc_stream_stats *stats)
{
    stats->observes = *(const uint64_t *)(const void *)kvc_evict_own_c((const kvc_evict_state *)st);
}

static const kvc_evict_ops ea_evict = {
    .magic = 0x4B564531u, /* "KVE1" */
    .own_fixed = EA_FIXED,
    .own_per_dim = 2u * sizeof(double),
    .score = ea_score,
};

const kvc_method_ops kvc_method_ops_expected_attention = {
    KVC_EVICT_METHOD_OPS(KVC_METHOD_EXPECTED_ATTENTION, &ea_evict),
    .prefill_queries = ea_prefill_queries,
    .fill_stats = ea_stats,
};
