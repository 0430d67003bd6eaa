/* H2O and TOVA keep, of the tokens that left the window, the ones the
 * decoder's queries attended to most (accumulated, or at the last query).
 * Checked against a replay of the rule that keeps its own score per token,
 * fed from the masses kvc_stream_attend_batch reports (tested to be the
 * softmax probabilities in test_hooks.mass_is_attention): every entry of the
 * view is mapped back to its token (sinks, window and current token by
 * position, the method's rows by their f32 key bits), its mass added to (H2O)
 * or stored as (TOVA) that token's score, and after each step the method must
 * hold exactly the replay's set. Also: a stream whose decoder never observes
 * keeps the most recent tokens (FIFO), and kvc_stream_attend_observed is
 * attend + observe. Bad input, snapshots, budgets and corruption are covered
 * by the tests that iterate the method registry. Deterministic (seeds printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "held_tokens.h"

#define D       ((size_t)8)
#define NQ      ((size_t)2)
#define N_TOK   ((size_t)400)
#define CAP_MAX 64

typedef struct replay {
    double score[N_TOK];
    size_t held[CAP_MAX], n_held;
} replay;

/* One method, one stream, `observe` 1 = the decoder observes every step. */
static int replay_method(kvc_method m, uint64_t seed, int observe)
{
    const uint32_t budget = 40, sink = 4, window = 8, cap = budget - sink - window - 1;
    const int accumulate = m == KVC_METHOD_H2O;
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    /* one key in 37 points where the queries look: heavy hitters */
    float *k = tu_normal(&r, N_TOK, D, 1.0), *v = tu_normal(&r, N_TOK, D, 1.0), *q = tu_normal(&r, N_TOK * NQ, D, 0.5);
    for (size_t j = 0; j < N_TOK; j++) {
        if (j % 37 == 20) k[j * D] += 6.0f;
        for (size_t h = 0; h < NQ; h++) q[(j * NQ + h) * D] += 1.0f;
    }
    kvc_stream_config cfg = kvc_stream_config_default(m, D, D, budget, seed);
    cfg.n_sink = sink, cfg.n_window = window;
    kvc_stream *st = tu_stream(&cfg);
    CHECK(st != NULL);
    static replay rp;
    memset(&rp, 0, sizeof rp);
    double mass[64], work[NQ * (8 + 3)];
    float out[NQ * D];
    size_t got[CAP_MAX], kept_heavy = 0;
    for (size_t j = 0; j < N_TOK; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * D, v + j * D) == KVC_OK);
        if (j >= sink + window + 1) { /* token j - window - 1 just left the window */
            const size_t in = j - window - 1;
            if (rp.n_held < cap) {
                rp.held[rp.n_held++] = in;
            } else {
                size_t low = 0;
                for (size_t i = 1; i < rp.n_held; i++) {
                    const double a = rp.score[rp.held[i]], b = rp.score[rp.held[low]];
                    if (a < b || (a == b && rp.held[i] < rp.held[low])) low = i;
                }
                if (rp.score[in] >= rp.score[rp.held[low]]) rp.held[low] = in;
            }
        }
        const size_t n_got = ht_method_tokens(st, k, D, j + 1, got);
        CHECK_MSG(ht_same_set(got, n_got, rp.held, rp.n_held), "%s seed %llu token %zu: held set differs",
                  kvc_method_name(m), (unsigned long long)seed, j);
        if (!observe) continue;
        const size_t E = kvc_stream_view_entries(st);
        CHECK(E <= 64);
        CHECK(kvc_stream_attend_batch(st, NULL, q + j * NQ * D, 1, NQ, out, mass, work, sizeof work) == KVC_OK);
        /* map the entries: sinks, window + current token (consecutive), then the method's rows */
        const size_t n_sink = j + 1 < sink ? j + 1 : sink;
        const size_t n_recent = j + 1 - n_sink < window + 1 ? j + 1 - n_sink : window + 1;
        for (size_t i = 0; i < n_recent; i++) {
            const size_t t = j + 1 - n_recent + i;
            rp.score[t] = accumulate ? rp.score[t] + mass[n_sink + i] : mass[n_sink + i];
        }
        for (size_t i = 0; i < n_got; i++) {
            const size_t t = got[i];
            const double w = mass[n_sink + n_recent + i];
            rp.score[t] = accumulate ? rp.score[t] + w : w;
        }
        CHECK(kvc_stream_observe(st, NULL, mass, E) == KVC_OK);
    }
    for (size_t i = 0; i < rp.n_held; i++) kept_heavy += rp.held[i] % 37 == 20;
    kvc_stream_stats s;
    CHECK(kvc_stream_get_stats(st, &s) == KVC_OK && s.observes == (observe ? N_TOK : 0));
    if (!observe) /* FIFO: the last `cap` tokens to leave the window */
        for (size_t i = 0; i < rp.n_held; i++) CHECK(rp.held[i] + cap >= N_TOK - window - 1);
    printf("%s seed %llu %s: %zu of %u held are heavy-hitter keys (1 in 37 of the stream)\n", kvc_method_name(m),
           (unsigned long long)seed, observe ? "observed" : "never observed", kept_heavy, cap);
    /* A heavy key's logit is 6 x 1 / sqrt(8) = 2.1 above a typical key's under
       every query (8x the attention), so TOVA, which ranks by the last query
       alone, must keep most of the 11 heavy tokens that left the window; H2O
       ranks by attention summed since arrival, which favours the tokens that
       arrived first (the heavy-hitter bias the paper accepts), so only the
       replay binds it. */
    if (observe && m == KVC_METHOD_TOVA) CHECK(kept_heavy * 4 >= 11u * 3);
    free(st), free(k), free(v), free(q); /* the handle is the arena's start */
    return 0;
}

static int h2o_and_tova_follow_their_rule(void)
{
    const kvc_method ms[] = {KVC_METHOD_H2O, KVC_METHOD_TOVA};
    for (size_t i = 0; i < 2; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            if (replay_method(ms[i], seed, 1)) return 1;
            if (replay_method(ms[i], seed, 0)) return 1;
        }
    return 0;
}

/* kvc_stream_attend_observed = kvc_stream_attend, then kvc_stream_observe of
 * the batched attend's masses: same output bits, same arena bytes after. */
static int attend_observed_is_attend_then_observe(void)
{
    kvc_rng r;
    kvc_rng_seed(&r, 5);
    printf("seed 5\n");
    float *k = tu_normal(&r, N_TOK, D, 1.0), *v = tu_normal(&r, N_TOK, D, 1.0), *q = tu_normal(&r, N_TOK * NQ, D, 1.0);
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        kvc_stream_config cfg = kvc_stream_config_default(m, D, D, m == KVC_METHOD_EXACT ? 512 : 48, 5);
        cfg.n_sink = 4, cfg.n_window = 8, cfg.prefix_len = N_TOK;
        kvc_stream *a = tu_stream(&cfg), *b = tu_stream(&cfg);
        CHECK(a != NULL && b != NULL);
        const size_t bytes = kvc_stream_arena_bytes(&cfg);
        double mass[600], work[NQ * (8 + 3)];
        static double owork[1024];
        float za[NQ * D], zb[NQ * D];
        for (size_t j = 0; j < N_TOK; j++) {
            CHECK(kvc_stream_append(a, NULL, k + j * D, v + j * D) == KVC_OK);
            CHECK(kvc_stream_append(b, NULL, k + j * D, v + j * D) == KVC_OK);
            const size_t wb = kvc_stream_attend_observed_work_bytes(a, NQ);
            CHECK(wb > 0 && wb <= sizeof owork);
            CHECK(kvc_stream_attend_observed(a, NULL, q + j * NQ * D, NQ, za, owork, wb - 8) ==
                  (kvc_method_observes(m) ? KVC_E_ARG : KVC_OK));
            CHECK(kvc_stream_attend_observed(a, NULL, q + j * NQ * D, NQ, za, owork, wb) == KVC_OK);
            CHECK(kvc_stream_attend(b, NULL, q + j * NQ * D, NQ, zb) == KVC_OK);
            CHECK_MSG(memcmp(za, zb, sizeof za) == 0, "%s token %zu", kvc_method_name(m), j);
            if (kvc_method_observes(m)) {
                const size_t E = kvc_stream_view_entries(b);
                CHECK(E <= 600);
                CHECK(kvc_stream_attend_batch(b, NULL, q + j * NQ * D, 1, NQ, zb, mass, work, sizeof work) == KVC_OK);
                CHECK(kvc_stream_observe(b, NULL, mass, E) == KVC_OK);
            }
            CHECK_MSG(memcmp(a, b, bytes) == 0, "%s token %zu: arenas differ", kvc_method_name(m), j);
        }
        printf("%-18s observes=%d: same outputs and arena bytes\n", kvc_method_name(m), kvc_method_observes(m));
        free(a), free(b);
    }
    free(k), free(v), free(q);
    return 0;
}

static const kvc_test_case cases[] = {
    {"h2o_and_tova_follow_their_rule", h2o_and_tova_follow_their_rule},
    {"attend_observed_is_attend_then_observe", attend_observed_is_attend_then_observe}};
KVC_TEST_MAIN(cases)
