/* SubGen: sampling distributions, Lemma 2's invariants against an
 * independent shadow of the partition, unbiasedness, bounded memory. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kvc/kvc.h"
#include "kvc_stats.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "internal/kvc_internal.h"

/* SubGen alone: no sinks, no window; token j enters the method at append j+1. */
static kvc_stream_config bare_cfg(uint32_t d, uint32_t t, uint32_t s, uint32_t m_max, float delta0, uint64_t seed)
{
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_SUBGEN, d, d, 1, seed);
    cfg.n_sink = 0, cfg.n_window = 0;
    cfg.params.subgen.t = t, cfg.params.subgen.s = s, cfg.params.subgen.m_max = m_max,
    cfg.params.subgen.delta0 = delta0;
    /* these cases test the paper's mechanics (reservoir, clusters, Lemma 2) and
       its two estimators; the self-normalised reading has its own cases */
    cfg.params.subgen.estimator = KVC_ESTIMATOR_PAPER;
    /* smallest budget that holds the explicit parameters */
    uint64_t elems = (uint64_t)m_max * (t + 1) * d + (uint64_t)s * 2 * d;
    cfg.budget = (uint32_t)((elems + 2 * d - 1) / (2 * d)) + 1;
    return cfg;
}

/* Keys in well separated clusters: centre c at 100 * e_c (+ small noise). */
static float *clustered_keys(kvc_rng *r, size_t n, size_t d, size_t n_clusters, int *label)
{
    float *k = malloc(n * d * sizeof(float));
    for (size_t j = 0; j < n; j++) {
        size_t c = kvc_rng_below(r, (uint32_t)n_clusters);
        if (label) label[j] = (int)c;
        for (size_t i = 0; i < d; i++)
            k[j * d + i] = (float)(0.3 * kvc_rng_normal(r)) + (i == c % d ? 100.0f * (float)(1 + c / d) : 0.0f);
    }
    return k;
}

/* M's slots are i.i.d. draws with P(token i) = ||v_i||^2 / sum ||v||^2:
 * pooled over 300 seeds, chi-square on 40 tokens with distinct norms
 * (39 dof); fails when p < 1e-4 (the false-alarm rate). */
static int value_reservoir_follows_norms(void)
{
    const size_t n = 40, d = 4, seeds = 300;
    const uint32_t s = 16;
    double obs[40] = {0}, ex[40], w[40], total = 0;
    float *k = calloc(n * d, sizeof(float)), *v = calloc(n * d, sizeof(float));
    for (size_t j = 0; j < n; j++) {
        k[j * d] = (float)j; /* distinct keys */
        v[j * d] = (float)(1 + j % 7);
        v[j * d + 1] = (float)(j % 3);
        w[j] = (double)v[j * d] * v[j * d] + (double)v[j * d + 1] * v[j * d + 1];
        total += w[j];
    }
    printf("seeds 1..%zu\n", seeds);
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        kvc_stream_config cfg = bare_cfg(d, 2, s, 64, 0.0f, seed);
        kvc_stream *st = tu_stream(&cfg);
        CHECK(st != NULL);
        for (size_t j = 0; j <= n; j++) CHECK(kvc_stream_append(st, NULL, k + (j % n) * d, v + (j % n) * d) == KVC_OK);
        kvc_subgen_reservoir_info res;
        CHECK(kvc_subgen_reservoir(st, &res) == KVC_OK);
        CHECK(fabs(res.mu - total) < 1e-9 * total);
        for (uint32_t j = 0; j < s; j++) {
            CHECK(res.inv_sqnorm[j] > 0.0f);
            uint32_t tok = res.tokens[j];
            CHECK(tok < n);
            CHECK(fabs(ldexp(res.inv_sqnorm[j], -res.ref_exp) - 1.0 / w[tok]) <= 1e-6 / w[tok]);
            obs[tok] += 1;
        }
        free(st);
    }
    for (size_t j = 0; j < n; j++) ex[j] = (double)seeds * s * w[j] / total;
    double stat = kvc_chi2_stat(obs, ex, (int)n), p = kvc_chi2_sf(stat, (double)n - 1);
    printf("reservoir vs ||v||^2: chi2 = %.2f (39 dof), p = %.4f (fail below 1e-4)\n", stat, p);
    CHECK(p >= 1e-4);
    free(k), free(v);
    return 0;
}

/* Each cluster's t samples are uniform over its members: 3 clusters with
 * fixed radius, pooled over 200 seeds, one chi-square per cluster (Bonferroni:
 * each fails when p < 1e-4 / 3, total false-alarm rate 1e-4). */
static int cluster_samples_uniform(void)
{
    const size_t d = 8, n = 240, seeds = 200;
    const uint32_t t = 8;
    kvc_rng r;
    kvc_rng_seed(&r, 301);
    printf("stream seed 301, sampling seeds 1..%zu\n", seeds);
    int *label = malloc(n * sizeof(int));
    float *k = clustered_keys(&r, n, d, 3, label), *v = tu_normal(&r, n, d, 1.0);
    double *obs = calloc(n, sizeof(double));
    size_t members[3] = {0};
    for (size_t j = 0; j < n; j++) members[label[j]]++;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        kvc_stream_config cfg = bare_cfg(d, t, 4, 8, 5.0f, seed);
        kvc_stream *st = tu_stream(&cfg);
        for (size_t j = 0; j <= n; j++) CHECK(kvc_stream_append(st, NULL, k + (j % n) * d, v + (j % n) * d) == KVC_OK);
        CHECK(kvc_subgen_num_clusters(st) == 3);
        for (uint32_t c = 0; c < 3; c++) {
            kvc_subgen_cluster_info ci;
            CHECK(kvc_subgen_cluster(st, c, &ci) == KVC_OK);
            CHECK(ci.count == members[label[ci.rep_token]]);
            for (uint32_t j = 0; j < t; j++) {
                CHECK(label[ci.sample_tokens[j]] == label[ci.rep_token]);
                obs[ci.sample_tokens[j]] += 1;
            }
        }
        free(st);
    }
    for (int c = 0; c < 3; c++) {
        double o[240], e[240];
        int m = 0;
        for (size_t j = 0; j < n; j++)
            if (label[j] == c) o[m] = obs[j], e[m] = (double)seeds * t / members[c], m++;
        double stat = kvc_chi2_stat(o, e, m), p = kvc_chi2_sf(stat, m - 1);
        printf("cluster %d: %d members, chi2 = %.2f (%d dof), p = %.4f (fail below 3.3e-5)\n", c, m, stat, m - 1, p);
        CHECK(p >= 1e-4 / 3);
    }
    free(label), free(k), free(v), free(obs);
    return 0;
}

/* ---- shadow of the partition (deterministic: independent of the RNG) ---- */
typedef struct shadow {
    size_t d, m, m_max;
    double delta;
    int merged;
    uint32_t rep[64];
    int *owner; /* token -> index into rep[] order id (rep token) */
    const float *keys;
} shadow;

static double dist2(const shadow *sh, uint32_t a, uint32_t b)
{
    return kvc_k_sqdist_f32__ref(sh->keys + (size_t)a * sh->d, sh->keys + (size_t)b * sh->d, sh->d);
}

static void shadow_merge(shadow *sh, uint32_t n_tokens)
{
    int alive[64];
    for (size_t i = 0; i < sh->m; i++) alive[i] = 1;
    for (size_t a = 0; a < sh->m; a++) {
        if (!alive[a]) continue;
        for (size_t b = a + 1; b < sh->m; b++) {
            if (!alive[b] || dist2(sh, sh->rep[a], sh->rep[b]) > sh->delta * sh->delta) continue;
            alive[b] = 0;
            for (uint32_t j = 0; j < n_tokens; j++)
                if (sh->owner[j] == (int)sh->rep[b]) sh->owner[j] = (int)sh->rep[a];
            sh->merged = 1;
        }
    }
    size_t w = 0;
    for (size_t i = 0; i < sh->m; i++)
        if (alive[i]) sh->rep[w++] = sh->rep[i];
    sh->m = w;
}

static void shadow_add(shadow *sh, uint32_t tok)
{
    for (;;) {
        double best = INFINITY;
        size_t bi = 0;
        for (size_t i = 0; i < sh->m; i++) {
            double dd = dist2(sh, sh->rep[i], tok);
            if (dd < best) best = dd, bi = i;
        }
        if (sh->m > 0 && best <= sh->delta * sh->delta) {
            sh->owner[tok] = (int)sh->rep[bi];
            return;
        }
        if (sh->m < sh->m_max) {
            sh->rep[sh->m++] = tok;
            sh->owner[tok] = (int)tok;
            return;
        }
        if (sh->delta == 0.0) {
            double mn = INFINITY;
            for (size_t a = 0; a < sh->m; a++) {
                if (dist2(sh, sh->rep[a], tok) < mn) mn = dist2(sh, sh->rep[a], tok);
                for (size_t b = a + 1; b < sh->m; b++)
                    if (dist2(sh, sh->rep[a], sh->rep[b]) < mn) mn = dist2(sh, sh->rep[a], sh->rep[b]);
            }
            sh->delta = 0.5 * sqrt(mn);
        } else {
            sh->delta *= 2.0;
        }
        shadow_merge(sh, tok);
    }
}

/* Lemma 2, properties 1-5, after every update, on a stream with 40 clusters
 * and m_max = 12 (so the start radius, doublings and merges all happen):
 * the library's representatives, counts and radius equal the shadow's, and
 * over the shadow's partition C_i: (1) x_i in C_i, (2) n_i = |C_i|,
 * (3) ||x_i - k|| <= delta for k in C_i (<= 2 delta once merges happened),
 * (4) ||x_i - x_j|| > delta, (5) every sample of S_i is a member of C_i. */
static int lemma2_invariants_every_update(void)
{
    const size_t d = 8, n = 1500;
    const uint32_t t = 4, m_max = 12;
    kvc_rng r;
    kvc_rng_seed(&r, 302);
    printf("stream seed 302, method seed 9\n");
    float *k = clustered_keys(&r, n, d, 40, NULL), *v = tu_normal(&r, n, d, 1.0);
    kvc_stream_config cfg = bare_cfg(d, t, 4, m_max, 0.0f, 9);
    kvc_stream *st = tu_stream(&cfg);
    shadow sh = {d, 0, m_max, 0.0, 0, {0}, malloc(n * sizeof(int)), k};
    for (size_t j = 0; j < n; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * d, v + j * d) == KVC_OK);
        if (j == 0) continue;
        const uint32_t entered = (uint32_t)j - 1; /* the previous token entered SubGen */
        shadow_add(&sh, entered);
        kvc_stream_stats stats;
        kvc_stream_get_stats(st, &stats);
        CHECK_MSG(stats.counters.clusters == sh.m, "step %zu: %u clusters, shadow %zu", j, stats.counters.clusters,
                  sh.m);
        CHECK(stats.counters.delta == sh.delta);
        const double radius = sh.merged ? 2.0 * sh.delta : sh.delta;
        uint64_t total = 0;
        for (uint32_t i = 0; i < stats.counters.clusters; i++) {
            kvc_subgen_cluster_info ci;
            CHECK(kvc_subgen_cluster(st, i, &ci) == KVC_OK);
            CHECK(ci.rep_token == sh.rep[i]);
            CHECK(memcmp(ci.rep, k + (size_t)ci.rep_token * d, d * sizeof(float)) == 0);
            CHECK(sh.owner[ci.rep_token] == (int)ci.rep_token); /* (1) */
            uint64_t members = 0;
            for (uint32_t tok = 0; tok <= entered; tok++) {
                if (sh.owner[tok] != (int)ci.rep_token) continue;
                members++;
                CHECK_MSG(sqrt(dist2(&sh, ci.rep_token, tok)) <= radius, "(3) step %zu", j);
            }
            CHECK_MSG(ci.count == members, "(2) step %zu cluster %u: %llu vs %llu", j, i, (unsigned long long)ci.count,
                      (unsigned long long)members);
            total += ci.count;
            for (uint32_t s = 0; s < t; s++) {
                CHECK(sh.owner[ci.sample_tokens[s]] == (int)ci.rep_token); /* (5) */
                CHECK(memcmp(ci.samples + (size_t)s * d, k + (size_t)ci.sample_tokens[s] * d, d * sizeof(float)) == 0);
            }
            for (uint32_t i2 = i + 1; i2 < stats.counters.clusters; i2++) {
                kvc_subgen_cluster_info cj;
                kvc_subgen_cluster(st, i2, &cj);
                CHECK(sqrt(dist2(&sh, ci.rep_token, cj.rep_token)) > sh.delta); /* (4) */
            }
        }
        CHECK(total == (uint64_t)entered + 1);
        CHECK(stats.counters.clusters <= m_max);
    }
    kvc_stream_stats stats;
    kvc_stream_get_stats(st, &stats);
    printf("after %zu tokens: clusters=%u doublings=%u merges=%u delta=%.3f\n", n, stats.counters.clusters,
           stats.counters.doublings, stats.counters.merges, stats.counters.delta);
    CHECK(stats.counters.doublings > 0 && stats.counters.merges > 0);
    free(sh.owner), free(st), free(k), free(v);
    return 0;
}

/* The numerator estimate sum_N a e^{beta<q,k>} v and tau = sum_D b e^{beta<q,k>}
 * are unbiased: mean over 400 seeds vs the exact sums, a z-test per
 * component (dv + 1 = 9 tests), each failing when |z| > 4.4 (Bonferroni:
 * total false-alarm rate 9 * 1.1e-5 = 1e-4). */
static int numerator_and_tau_unbiased(void)
{
    const size_t d = 8, n = 300, seeds = 400;
    kvc_rng r;
    kvc_rng_seed(&r, 303);
    printf("stream seed 303, method seeds 1..%zu\n", seeds);
    float *k = clustered_keys(&r, n, d, 10, NULL), *v = tu_normal(&r, n, d, 1.0), *q = tu_normal(&r, 1, d, 0.02);
    for (size_t i = 0; i < n * d; i++) v[i] += 0.5f;
    const double beta = 1.0 / sqrt((double)d);
    double exact[9] = {0};               /* numerator (8), tau */
    for (size_t j = 0; j + 1 < n; j++) { /* tokens 0..n-2 entered the method */
        double e = exp(beta * kvc_k_dot_f32__ref(q, k + j * d, d));
        for (size_t c = 0; c < d; c++) exact[c] += e * v[j * d + c];
        exact[8] += e;
    }
    double sum[9] = {0}, sum2[9] = {0};
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        kvc_stream_config cfg = bare_cfg(d, 4, 8, 6, 0.0f, seed);
        kvc_stream *st = tu_stream(&cfg);
        for (size_t j = 0; j < n; j++) CHECK(kvc_stream_append(st, NULL, k + j * d, v + j * d) == KVC_OK);
        kvc_view view;
        CHECK(kvc_stream_view(st, &view) == KVC_OK);
        double est[9] = {0};
        for (size_t s = 0; s < view.n_seg; s++) {
            const kvc_segment *g = &view.seg[s];
            if (g->role == KVC_SET_BOTH) continue; /* the exact regions (current token) */
            for (size_t i = 0; i < g->n; i++) {
                double w = g->scale * (g->weights ? g->weights[i] : 1.0);
                double e = w * exp(beta * kvc_k_dot_f32__ref(q, g->keys + i * d, d));
                if (g->role == KVC_SET_NUM)
                    for (size_t c = 0; c < d; c++) est[c] += e * g->values[i * d + c];
                else
                    est[8] += e;
            }
        }
        for (int c = 0; c < 9; c++) sum[c] += est[c], sum2[c] += est[c] * est[c];
        free(st);
    }
    for (int c = 0; c < 9; c++) {
        double mean = sum[c] / seeds, var = (sum2[c] - seeds * mean * mean) / (seeds - 1);
        double se = sqrt(var / seeds), z = se > 0 ? (mean - exact[c]) / se : 0.0;
        printf("%s[%d]: mean %.5g exact %.5g  (99.99%% CI half-width %.3g)  z = %.2f\n", c < 8 ? "num" : "tau",
               c < 8 ? c : 0, mean, exact[c], 4.4 * se, z);
        CHECK(fabs(z) <= 4.4);
    }
    free(k), free(v), free(q);
    return 0;
}

/* Zero values are never sampled into M; with only zero values (mu = 0) the
 * method's numerator is zero, so the output is the exact regions' part. */
static int zero_values_never_sampled(void)
{
    const size_t d = 4;
    float k[4 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, zero[4] = {0, 0, 0, 0}, z[4];
    kvc_stream_config cfg = bare_cfg(d, 2, 4, 4, 0.0f, 3);
    kvc_stream *st = tu_stream(&cfg);
    for (int j = 0; j < 4; j++) CHECK(kvc_stream_append(st, NULL, k + j * 4, zero) == KVC_OK);
    kvc_subgen_reservoir_info res;
    CHECK(kvc_subgen_reservoir(st, &res) == KVC_OK);
    CHECK(res.mu == 0.0);
    for (uint32_t j = 0; j < res.s; j++) CHECK(res.inv_sqnorm[j] == 0.0f);
    CHECK(kvc_stream_attend(st, NULL, k, 1, z) == KVC_OK);
    for (int c = 0; c < 4; c++) CHECK(z[c] == 0.0f && isfinite(z[c]));
    kvc_stream_stats stats;
    kvc_stream_get_stats(st, &stats);
    CHECK(stats.counters.clusters == 3); /* keys still cluster */
    free(st);
    return 0;
}

/* More clusters than m_max: the doubling rule keeps the state inside its
 * arena (canary bytes after the arena stay intact) and clusters <= m_max. */
static int doubling_keeps_arena_bound(void)
{
    const size_t d = 16, n = 4000;
    kvc_rng r;
    kvc_rng_seed(&r, 304);
    printf("seed 304\n");
    float *k = clustered_keys(&r, n, d, 200, NULL), *v = tu_normal(&r, n, d, 1.0);
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_SUBGEN, d, d, 200, 4);
    cfg.n_sink = 8, cfg.n_window = 8;
    size_t bytes = kvc_stream_arena_bytes(&cfg);
    unsigned char *a = tu_arena(bytes + 256);
    memset(a + bytes, 0x5C, 256);
    kvc_stream *st;
    CHECK(kvc_stream_init(a, bytes, &cfg, &st) == KVC_OK);
    const kvc_stream_plan *p = kvc_stream_get_plan(st);
    for (size_t j = 0; j < n; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * d, v + j * d) == KVC_OK);
        kvc_stream_stats s;
        kvc_stream_get_stats(st, &s);
        CHECK(s.counters.clusters <= p->m_max);
        CHECK(s.elements <= p->worst_elements && p->worst_elements <= p->budget_elements);
    }
    for (size_t i = 0; i < 256; i++) CHECK(a[bytes + i] == 0x5C);
    kvc_stream_stats s;
    kvc_stream_get_stats(st, &s);
    printf("200 true clusters, m_max=%u: clusters=%u doublings=%u merges=%u delta=%.2f\n", p->m_max,
           s.counters.clusters, s.counters.doublings, s.counters.merges, s.counters.delta);
    CHECK(s.counters.doublings > 0);
    free(a), free(k), free(v);
    return 0;
}

static const kvc_test_case cases[] = {
    {"value_reservoir_follows_norms", value_reservoir_follows_norms},
    {"cluster_samples_uniform", cluster_samples_uniform},
    {"lemma2_invariants_every_update", lemma2_invariants_every_update},
    {"numerator_and_tau_unbiased", numerator_and_tau_unbiased},
    {"zero_values_never_sampled", zero_values_never_sampled},
    {"doubling_keeps_arena_bound", doubling_keeps_arena_bound},
};
KVC_TEST_MAIN(cases)
