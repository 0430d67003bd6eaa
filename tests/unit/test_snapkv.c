/* SnapKV keeps, of the tokens that left the window, the ones the prompt's
 * last queries (given first, kvc_stream_prefill_queries) attend to most,
 * max-pooled over neighbours. Checked against a replay of its rule: raw score
 * log sum_i e^{beta <q_i, k_t>} (the reference kernel's dot, as the method
 * computes it), pooled score max over t-2..t, a token's arrival raising its
 * two held predecessors, eviction of the lowest pooled score with ties
 * against the oldest; held sets compared after every append (rows mapped back
 * to tokens by their f32 key bits). Also: the observation rows accumulate and
 * keep the last 32; without rows the method is a FIFO; keys that point where
 * the queries look are kept. Deterministic (seeds printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "held_tokens.h"

#define D     ((size_t)8)
#define N_TOK ((size_t)400)
#define ROWS  32u

static double raw_score(const float *q, size_t n_rows, const float *k, double beta)
{
    if (n_rows == 0) return 0.0;
    double l[ROWS], m = -INFINITY, z = 0.0;
    for (size_t i = 0; i < n_rows; i++) {
        l[i] = beta * kvc_kernels_ref()->dot_f32(q + i * D, k, D);
        if (l[i] > m) m = l[i];
    }
    for (size_t i = 0; i < n_rows; i++) z += exp(l[i] - m);
    return m + log(z);
}

/* One stream with n_given observation rows (0: none), replayed token by token. */
static int replay(uint64_t seed, size_t n_given)
{
    const uint32_t budget = 40, sink = 4, window = 8, cap = budget - sink - window - 1;
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    float *k = tu_normal(&r, N_TOK, D, 1.0), *v = tu_normal(&r, N_TOK, D, 1.0), *q = tu_normal(&r, 40, D, 0.3);
    for (size_t i = 0; i < 40; i++) q[i * D] += 1.5f; /* the queries look along +e0 */
    for (size_t j = 0; j < N_TOK; j++)
        if (j % 29 == 10) k[j * D] += 4.0f; /* and these keys point there */
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_SNAPKV, D, D, budget, seed);
    cfg.n_sink = sink, cfg.n_window = window;
    kvc_stream *st = tu_stream(&cfg);
    CHECK(st != NULL);
    /* rows given in two calls; the method keeps the last 32 */
    if (n_given) {
        const size_t first = n_given / 2;
        CHECK(kvc_stream_prefill_queries(st, NULL, q, first) == KVC_OK);
        CHECK(kvc_stream_prefill_queries(st, NULL, q + first * D, n_given - first) == KVC_OK);
    }
    const size_t n_rows = n_given < ROWS ? n_given : ROWS;
    const float *rows = q + (n_given - n_rows) * D;
    const double beta = 1.0 / sqrt((double)D);
    CHECK(kvc_stream_get_plan(st)->beta == (float)beta);
    static double raw[N_TOK], pooled[N_TOK];
    size_t held[64], n_held = 0, got[64], kept_planted = 0;
    for (size_t j = 0; j < N_TOK; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * D, v + j * D) == KVC_OK);
        if (j >= sink + window + 1) {
            const size_t t = j - window - 1; /* the token that just left the window */
            raw[t] = raw_score(rows, n_rows, k + t * D, (double)kvc_stream_get_plan(st)->beta);
            pooled[t] = raw[t];
            for (size_t back = 1; back <= 2 && t >= sink + back; back++) {
                const size_t u = t - back;
                if (raw[u] > pooled[t]) pooled[t] = raw[u];
                for (size_t i = 0; i < n_held; i++)
                    if (held[i] == u && raw[t] > pooled[u]) pooled[u] = raw[t];
            }
            if (n_held < cap) {
                held[n_held++] = t;
            } else {
                size_t low = 0;
                for (size_t i = 1; i < n_held; i++) {
                    const double a = pooled[held[i]], b = pooled[held[low]];
                    if (a < b || (a == b && held[i] < held[low])) low = i;
                }
                if (pooled[t] >= pooled[held[low]]) held[low] = t;
            }
        }
        const size_t n_got = ht_method_tokens(st, k, D, j + 1, got);
        CHECK_MSG(ht_same_set(got, n_got, held, n_held), "seed %llu rows %zu token %zu: held set differs",
                  (unsigned long long)seed, n_given, j);
    }
    for (size_t i = 0; i < n_held; i++) kept_planted += held[i] % 29 == 10;
    kvc_stream_stats s;
    CHECK(kvc_stream_get_stats(st, &s) == KVC_OK && s.observes == n_rows);
    printf("seed %llu, %zu rows given (%zu kept): %zu of %u held are keys along the queries (1 in 29 of the stream)\n",
           (unsigned long long)seed, n_given, n_rows, kept_planted, cap);
    if (n_given == 0) /* FIFO: the last `cap` tokens to leave the window */
        for (size_t i = 0; i < n_held; i++) CHECK(held[i] + cap >= N_TOK - window - 1);
    /* a planted key scores e^{1.5 x 4 / sqrt 8} ~ 8x a typical key under every row, and pooling
       gives its two neighbours on each side its score: the held set is planted keys and their
       spans (chance: 5 tokens in 29) bar the odd random key that outscores a span's edge; the
       exact rule is checked by the replay above, this only shows it selects what SnapKV should */
    if (n_given) {
        size_t in_span = 0;
        for (size_t i = 0; i < n_held; i++) {
            const size_t t = held[i], m = t % 29;
            in_span += m >= 8 && m <= 12;
        }
        printf("  %zu of %zu held tokens lie in the +-2 spans of planted keys\n", in_span, n_held);
        CHECK(in_span * 4 >= n_held * 3 && kept_planted >= cap / 5);
    }
    free(st), free(k), free(v), free(q);
    return 0;
}

static int follows_its_rule(void)
{
    const size_t given[] = {0, 5, 32, 40};
    for (uint64_t seed = 1; seed <= 3; seed++)
        for (size_t i = 0; i < 4; i++)
            if (replay(seed, given[i])) return 1;
    return 0;
}

/* kvc_cache_prefill_queries gives each kv head its group's rows of every
 * position, and a non-finite query anywhere leaves every stream unchanged. */
static int cache_gives_each_group_its_rows(void)
{
    kvc_cache_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = 2, c.n_kv_heads = 2, c.n_heads = 4, c.head_dim = D;
    c.stream = kvc_stream_config_default(KVC_METHOD_SNAPKV, D, D, 40, 3);
    c.stream.n_sink = 4, c.stream.n_window = 8;
    const size_t bytes = kvc_cache_arena_bytes(&c);
    void *arena = tu_arena(bytes);
    kvc_cache *cache;
    CHECK(kvc_cache_init(arena, bytes, &c, &cache) == KVC_OK);
    kvc_rng r;
    kvc_rng_seed(&r, 8);
    printf("seed 8\n");
    float *q = tu_normal(&r, 3 * 4, D, 1.0);
    const uint64_t before = kvc_cache_checksum(cache);
    q[7 * D + 3] = NAN; /* position 1, query head 3 */
    CHECK(kvc_cache_prefill_queries(cache, NULL, 1, q, 3) == KVC_E_NONFINITE);
    CHECK(kvc_cache_checksum(cache) == before);
    q[7 * D + 3] = 0.5f;
    CHECK(kvc_cache_prefill_queries(cache, NULL, 1, q, 0) == KVC_E_ARG);
    CHECK(kvc_cache_prefill_queries(cache, NULL, 2, q, 3) == KVC_E_ARG);
    CHECK(kvc_cache_prefill_queries(cache, NULL, 1, q, 3) == KVC_OK);
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t h = 0; h < 2; h++) {
            kvc_stream_stats s;
            CHECK(kvc_stream_get_stats(kvc_cache_get_stream(cache, l, h), &s) == KVC_OK);
            CHECK_MSG(s.observes == (l == 1 ? 6u : 0u), "layer %u head %u: %llu rows", l, h,
                      (unsigned long long)s.observes);
        }
    free(arena), free(q);
    return 0;
}

static const kvc_test_case cases[] = {{"follows_its_rule", follows_its_rule},
                                      {"cache_gives_each_group_its_rows", cache_gives_each_group_its_rows}};
KVC_TEST_MAIN(cases)
