/* Offline BalanceKV (kvc_offline.h), the authors' algorithm:
 *  - survivors: floor(m/2) per round, distinct token ids in range, weights
 *    powers of two up to 2^T, the same output for the same seed;
 *  - the algorithm as its description states it (docs/methods.md), written
 *    here a second time in the plainest form (every round's signs in one
 *    array, the split as a stable sort by weight), must select the same
 *    tokens with the same weights in the same order;
 *  - refusals: every bad argument gets its status and writes nothing.
 * Seeds are fixed and printed; nothing here is statistical. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "portable_math.h"

static size_t survivors(size_t n, unsigned T)
{
    for (unsigned r = 0; r < T; r++) n /= 2u;
    return n;
}

/* The description, literally: blocks of B with zero padding counted in the
 * mean, s_0 = +1, s_i = +1 iff u < 1/2 - gamma a_i, one split at the first c
 * where a class reaches floor(m/2), then the stable sort by weight. */
static size_t literal(const float *K, const float *V, size_t n, size_t d, size_t dv, unsigned T, uint64_t seed,
                      uint32_t *ids_out, double *w_out)
{
    const size_t B = 256;
    const double scale = 0.1 / sqrt((double)d), gamma = 4.0, kappa = 0.025;
    uint32_t *ids = malloc(n * sizeof *ids);
    double *w = malloc(n * sizeof *w), *kb = malloc(B * d * sizeof(double)), *vb = malloc(B * dv * sizeof(double));
    int *s = malloc(n * sizeof *s);
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) ids[i] = (uint32_t)i, w[i] = 1.0;
    size_t m = n;
    for (unsigned round = 0; round < T; round++) {
        for (size_t b0 = 0; b0 < m; b0 += B) {
            const size_t rr = m - b0 < B ? m - b0 : B;
            for (size_t c = 0; c < d; c++) {
                double mu = 0.0;
                for (size_t i = 0; i < rr; i++) mu += (double)K[ids[b0 + i] * d + c];
                mu /= (double)B; /* the padding rows are zeros */
                for (size_t i = 0; i < rr; i++) kb[i * d + c] = (double)K[ids[b0 + i] * d + c] - mu;
            }
            for (size_t i = 0; i < rr; i++)
                for (size_t c = 0; c < dv; c++) vb[i * dv + c] = w[b0 + i] * (double)V[ids[b0 + i] * dv + c];
            for (size_t i = 0; i < rr; i++) {
                double a = 0.0;
                for (size_t j = 0; j < i; j++) {
                    double kk = 0.0, vv = 0.0;
                    for (size_t c = 0; c < d; c++) kk += kb[i * d + c] * kb[j * d + c];
                    for (size_t c = 0; c < dv; c++) vv += vb[i * dv + c] * vb[j * dv + c];
                    double x = scale * kk;
                    if (x > 700.0) x = 700.0;
                    a += s[b0 + j] * kvc_pm_exp(x) * (vv + kappa + 1e-8);
                }
                s[b0 + i] = i == 0 ? 1 : (kvc_rng_unit(&r) < 0.5 - gamma * a ? 1 : -1);
            }
        }
        const size_t half = m / 2;
        size_t cp = 0, cm = 0, c = 0;
        int winner = 0;
        for (c = 0; c < m; c++) {
            cp += s[c] > 0, cm += s[c] < 0;
            if (cp == half || cm == half) {
                winner = cp == half ? 1 : -1;
                break;
            }
        }
        /* weights of this round: 0 dropped, 2 the other class up to c, 1 after c */
        int *rw = malloc(m * sizeof *rw);
        for (size_t i = 0; i < m; i++) rw[i] = i <= c ? (s[i] == winner ? 0 : 2) : 1;
        size_t out = 0;
        uint32_t *nid = malloc(m * sizeof *nid);
        double *nw = malloc(m * sizeof *nw);
        for (int want = 2; want >= 1; want--) /* a stable sort by weight, descending */
            for (size_t i = 0; i < m && out < half; i++)
                if (rw[i] == want) nid[out] = ids[i], nw[out] = w[i] * want, out++;
        memcpy(ids, nid, out * sizeof *ids), memcpy(w, nw, out * sizeof *w);
        free(rw), free(nid), free(nw);
        m = out;
    }
    memcpy(ids_out, ids, m * sizeof *ids), memcpy(w_out, w, m * sizeof *w);
    free(ids), free(w), free(kb), free(vb), free(s);
    return m;
}

static int survivors_and_literal(void)
{
    static const size_t ns[] = {2, 7, 100, 300, 1536};
    static const size_t dims[] = {3, 64};
    size_t runs = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t di = 0; di < 2; di++)
            for (unsigned T = 1; T <= 4; T++) {
                const size_t n = ns[ni], d = dims[di], dv = dims[1 - di];
                if ((n >> T) < 1) continue;
                const uint64_t seed = 1000 + 10 * ni + di + 100 * T;
                kvc_rng r;
                kvc_rng_seed(&r, seed);
                float *K = tu_normal(&r, n, d, 1.0), *V = tu_normal(&r, n, dv, 1.0);
                kvc_balancekv_offline_params prm;
                memset(&prm, 0, sizeof prm);
                prm.rounds = T;
                const size_t wb = kvc_balancekv_offline_work_bytes(n, d, dv, 0);
                double *work = malloc(wb);
                uint32_t *kept = malloc(n * sizeof *kept), *kept2 = malloc(n * sizeof *kept2), *lit = malloc(n * 4);
                float *w = malloc(n * sizeof *w), *w2 = malloc(n * sizeof *w2);
                double *lw = malloc(n * sizeof *lw);
                size_t nk = 0, nk2 = 0;
                CHECK(kvc_balancekv_offline(K, V, n, d, dv, &prm, seed, work, wb, kept, w, &nk) == KVC_OK);
                CHECK_MSG(nk == survivors(n, T), "n %zu T %u: %zu survivors", n, T, nk);
                uint8_t *seen = calloc(n, 1);
                for (size_t i = 0; i < nk; i++) {
                    CHECK(kept[i] < n && !seen[kept[i]]);
                    seen[kept[i]] = 1;
                    const double e = log2((double)w[i]);
                    CHECK_MSG(e == floor(e) && e >= 0.0 && e <= (double)T, "weight %g", (double)w[i]);
                }
                CHECK(kvc_balancekv_offline(K, V, n, d, dv, &prm, seed, work, wb, kept2, w2, &nk2) == KVC_OK);
                CHECK(nk2 == nk && memcmp(kept, kept2, nk * sizeof *kept) == 0 && memcmp(w, w2, nk * sizeof *w) == 0);
                const size_t nl = literal(K, V, n, d, dv, T, seed, lit, lw);
                CHECK(nl == nk);
                for (size_t i = 0; i < nk; i++)
                    CHECK_MSG(lit[i] == kept[i] && lw[i] == (double)w[i],
                              "n %zu d %zu T %u survivor %zu: %u (w %g) vs %u (w %g)", n, d, T, i, kept[i],
                              (double)w[i], lit[i], lw[i]);
                free(seen), free(K), free(V), free(work), free(kept), free(kept2), free(lit), free(w), free(w2),
                    free(lw);
                runs++;
            }
    printf("%zu (n, d, T) runs: survivors, ids, power-of-two weights, repeatable, the same as the literal form "
           "(seeds 1000 + 10 n_i + d_i + 100 T)\n",
           runs);
    return 0;
}

static int refusals_write_nothing(void)
{
    const size_t n = 64, d = 8, dv = 8;
    kvc_rng r;
    kvc_rng_seed(&r, 7);
    float *K = tu_normal(&r, n, d, 1.0), *V = tu_normal(&r, n, dv, 1.0);
    const size_t wb = kvc_balancekv_offline_work_bytes(n, d, dv, 0);
    double *work = malloc(wb + 16);
    uint32_t kept[64];
    float w[64];
    size_t nk = 12345;
    memset(kept, 0xEE, sizeof kept), memset(w, 0xEE, sizeof w);
    kvc_balancekv_offline_params prm;
    memset(&prm, 0, sizeof prm);
    prm.rounds = 2;
#define REFUSED(call, want)                                                                                            \
    do {                                                                                                               \
        CHECK((call) == (want));                                                                                       \
        CHECK(nk == 12345 && kept[0] == 0xEEEEEEEEu);                                                                  \
    } while (0)
    REFUSED(kvc_balancekv_offline(NULL, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, NULL, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    REFUSED(kvc_balancekv_offline(K, V, n, 0, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    REFUSED(kvc_balancekv_offline(K, V, n, d, 257, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    prm.rounds = 0;
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    prm.rounds = 7; /* 64 >> 7 == 0 survivors */
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    prm.rounds = 2, prm.gamma = -1.0f;
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    prm.gamma = 0.0f, prm.block = 1;
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_ARG);
    prm.block = 0;
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb - 1, kept, w, &nk), KVC_E_ARENA);
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, (char *)work + 4, wb, kept, w, &nk), KVC_E_ARENA);
    K[5] = NAN;
    REFUSED(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk), KVC_E_NONFINITE);
    K[5] = 0.0f;
    CHECK(kvc_balancekv_offline(K, V, n, d, dv, &prm, 1, work, wb, kept, w, &nk) == KVC_OK && nk == 16);
    CHECK(kvc_balancekv_offline_work_bytes(0, d, dv, 0) == 0 && kvc_balancekv_offline_work_bytes(n, d, dv, 5000) == 0);
    free(K), free(V), free(work);
    printf("every refusal has its status and leaves the outputs as they were\n");
    return 0;
}

/* balancekv-prefill in mode offline: kvc_stream_prefill stages the prompt's
 * middle and compresses it with kvc_balancekv_offline at the call's end.
 * The stream's survivors must be exactly what the offline form returns for
 * the method's tokens (positions n_sink .. n - n_window - 2) with the walk's
 * seed (the method's first draw), bit for bit in f32; the plain append of a
 * prompt is refused before it reaches the method; refusals of the call
 * change nothing; decoding afterwards never stops; its arena is the
 * survivors and the tail, smaller than the tree's at the same budget. */
static int stream_loads_the_offline_survivors(void)
{
    const uint32_t d = 16, dv = 24, n = 1500, budget = 300;
    const uint64_t seed = 61;
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_BALANCEKV_PREFILL, d, dv, budget, seed);
    cfg.n_sink = 4, cfg.n_window = 32, cfg.prefix_len = n;
    const size_t tree_bytes = kvc_stream_arena_bytes(&cfg);
    CHECK(kvc_stream_config_set(&cfg, "bkv-mode", "offline") == KVC_OK);
    const size_t bytes = kvc_stream_arena_bytes(&cfg);
    CHECK_MSG(bytes > 0 && bytes < tree_bytes, "offline arena %zu B, tree %zu B", bytes, tree_bytes);
    kvc_stream *st = tu_stream(&cfg), *plain = tu_stream(&cfg);
    CHECK(st != NULL && plain != NULL);
    const kvc_stream_plan *p = kvc_stream_get_plan(st);
    const unsigned T = p->bkv.levels;
    const size_t m = n - cfg.n_sink - cfg.n_window - 1;
    CHECK_MSG(p->prefix_method_tokens == m && p->bkv.t == 256 && (m >> T) <= p->method_tokens, "m %u t %u T %u",
              (unsigned)p->prefix_method_tokens, (unsigned)p->bkv.t, T);
    kvc_rng r;
    kvc_rng_seed(&r, 6100);
    float *K = tu_normal(&r, n, d, 1.0), *V = tu_normal(&r, n, dv, 1.0);

    /* a plain append hands the method its first token at append n_sink + n_window + 2 */
    for (uint32_t i = 0; i < cfg.n_sink + cfg.n_window + 1; i++)
        CHECK(kvc_stream_append(plain, NULL, K + i * d, V + i * dv) == KVC_OK);
    const uint64_t before = kvc_stream_checksum(plain);
    const uint32_t i0 = cfg.n_sink + cfg.n_window + 1;
    CHECK(kvc_stream_append(plain, NULL, K + i0 * d, V + i0 * dv) == KVC_E_CAPACITY);
    CHECK(kvc_stream_checksum(plain) == before);

    /* refusals of the call: nothing changes */
    const size_t wb = kvc_stream_prefill_work_bytes(st, n);
    CHECK(wb > 0);
    double *work = malloc(wb + 8);
    const uint64_t fresh = kvc_stream_checksum(st);
    CHECK(kvc_stream_prefill(st, NULL, K, d, V, dv, n, work, wb - 1) == KVC_E_ARENA);
    CHECK(kvc_stream_prefill(st, NULL, K, d, V, dv, n, (char *)work + 4, wb) == KVC_E_ARENA);
    CHECK(kvc_stream_prefill(st, NULL, K, d - 1, V, dv, n, work, wb) == KVC_E_ARG);
    CHECK(kvc_stream_prefill(st, NULL, K, d, V, dv, 0, work, wb) == KVC_E_ARG);
    V[(n - 1) * dv + 3] = NAN;
    CHECK(kvc_stream_prefill(st, NULL, K, d, V, dv, n, work, wb) == KVC_E_NONFINITE);
    V[(n - 1) * dv + 3] = 0.5f;
    CHECK(kvc_stream_checksum(st) == fresh);

    CHECK(kvc_stream_prefill(st, NULL, K, d, V, dv, n, work, wb) == KVC_OK);
    CHECK(kvc_stream_validate(st, bytes) == KVC_OK);

    /* the same walk, called directly on the method's tokens */
    kvc_rng w;
    kvc_rng_seed(&w, seed);
    const uint64_t walk_seed = kvc_rng_next(&w);
    kvc_balancekv_offline_params prm;
    memset(&prm, 0, sizeof prm);
    prm.rounds = T;
    const size_t owb = kvc_balancekv_offline_work_bytes(m, d, dv, 0);
    double *owork = malloc(owb);
    uint32_t *kept = malloc(m * sizeof *kept);
    float *wt = malloc(m * sizeof *wt);
    size_t nk = 0;
    CHECK(kvc_balancekv_offline(K + cfg.n_sink * d, V + cfg.n_sink * dv, m, d, dv, &prm, walk_seed, owork, owb, kept,
                                wt, &nk) == KVC_OK);
    kvc_view view;
    CHECK(kvc_stream_view(st, &view) == KVC_OK);
    const kvc_segment *sv = &view.seg[KVC_STREAM_EXACT_SEGMENTS], *tail = sv + 1;
    CHECK_MSG(sv->n == nk && nk == (m >> T) && tail->n == 0, "survivors %zu, offline %zu, tail %zu", sv->n, nk,
              tail->n);
    for (size_t i = 0; i < nk; i++) {
        CHECK_MSG(memcmp(sv->keys + i * d, K + (cfg.n_sink + kept[i]) * d, d * sizeof(float)) == 0 &&
                      memcmp(sv->values + i * dv, V + (cfg.n_sink + kept[i]) * dv, dv * sizeof(float)) == 0 &&
                      sv->weights[i] == wt[i],
                  "survivor %zu (token %u) differs from the offline form's", i, (unsigned)(cfg.n_sink + kept[i]));
    }

    /* a prompt longer than the plan's prefix_len: the planned part is walked, the rest goes to the tail */
    kvc_stream_config shorter = cfg;
    shorter.prefix_len = n - 300;
    kvc_stream *sh = tu_stream(&shorter);
    CHECK(sh != NULL);
    const size_t swb = kvc_stream_prefill_work_bytes(sh, n);
    double *swork = malloc(swb);
    CHECK(kvc_stream_prefill(sh, NULL, K, d, V, dv, n, swork, swb) == KVC_OK);
    const kvc_stream_plan *sp = kvc_stream_get_plan(sh);
    kvc_view sview;
    CHECK(kvc_stream_view(sh, &sview) == KVC_OK && kvc_stream_validate(sh, kvc_stream_arena_bytes(&shorter)) == KVC_OK);
    CHECK_MSG(sview.seg[KVC_STREAM_EXACT_SEGMENTS].n == (sp->prefix_method_tokens >> sp->bkv.levels) &&
                  sview.seg[KVC_STREAM_EXACT_SEGMENTS + 1].n > 0,
              "prefix %u: %zu survivors, %zu in the tail", (unsigned)sp->prefix_method_tokens,
              sview.seg[KVC_STREAM_EXACT_SEGMENTS].n, sview.seg[KVC_STREAM_EXACT_SEGMENTS + 1].n);
    free(swork), free(sh);

    /* decoding goes on for 4x the budget (the tail is a reservoir), and a second call appends to it */
    for (uint32_t i = 0; i < 4 * budget; i++)
        CHECK(kvc_stream_append(st, NULL, K + (i % n) * d, V + (i % n) * dv) == KVC_OK);
    CHECK(kvc_stream_prefill_work_bytes(st, 10) == 0);
    CHECK(kvc_stream_prefill(st, NULL, K, d, V, dv, 10, NULL, 0) == KVC_OK);
    CHECK(kvc_stream_view(st, &view) == KVC_OK && view.seg[KVC_STREAM_EXACT_SEGMENTS].n == nk);
    CHECK(kvc_stream_validate(st, bytes) == KVC_OK);
    printf("balancekv-prefill offline, n %u, budget %u: arena %zu B (tree %zu B); T %u, %zu survivors equal to "
           "kvc_balancekv_offline's (seed %llu, data seed 6100); plain append refused at token %u\n",
           n, budget, bytes, tree_bytes, T, nk, (unsigned long long)seed, i0);
    free(K), free(V), free(work), free(owork), free(kept), free(wt), free(st), free(plain);
    return 0;
}

/* Issue 49 item 2: plain appends before the prompt's call (a BOS, a system
 * prompt fed token by token) leave tokens in the sinks, the window and the
 * pending slot; those that reach the method during the call were staged
 * without their rows and dropped. For every count of plain appends the
 * mode allows (0 .. n_sink + n_window + 1), the stream must end byte for byte
 * where one call with the whole prompt ends (f32 rows: the window's copies
 * are exact), and nothing may be dropped. */
static int plain_appends_then_prefill_equal_one_call(void)
{
    const uint32_t d = 16, dv = 24, n = 1500, budget = 300;
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_BALANCEKV_PREFILL, d, dv, budget, 62);
    cfg.n_sink = 4, cfg.n_window = 32, cfg.prefix_len = n;
    CHECK(kvc_stream_config_set(&cfg, "bkv-mode", "offline") == KVC_OK);
    const size_t bytes = kvc_stream_arena_bytes(&cfg);
    kvc_rng r;
    kvc_rng_seed(&r, 6200);
    float *K = tu_normal(&r, n, d, 1.0), *V = tu_normal(&r, n, dv, 1.0), *q = tu_normal(&r, 2, d, 1.0);
    kvc_stream *whole = tu_stream(&cfg);
    CHECK(whole != NULL);
    size_t wb = kvc_stream_prefill_work_bytes(whole, n);
    double *work = malloc(wb);
    CHECK(kvc_stream_prefill(whole, NULL, K, d, V, dv, n, work, wb) == KVC_OK);
    const uint64_t want = kvc_stream_checksum(whole);
    float out_whole[2 * 24], out[2 * 24];
    CHECK(kvc_stream_attend(whole, NULL, q, 2, out_whole) == KVC_OK);
    const uint32_t most = cfg.n_sink + cfg.n_window + 1;
    for (uint32_t a = 0; a <= most; a++) {
        kvc_stream *st = tu_stream(&cfg);
        CHECK(st != NULL);
        for (uint32_t i = 0; i < a; i++) CHECK(kvc_stream_append(st, NULL, K + i * d, V + i * dv) == KVC_OK);
        const size_t need = kvc_stream_prefill_work_bytes(st, n - a);
        double *w = malloc(need);
        CHECK(kvc_stream_prefill(st, NULL, K + a * d, d, V + a * dv, dv, n - a, w, need) == KVC_OK);
        CHECK(kvc_stream_validate(st, bytes) == KVC_OK);
        kvc_stream_stats s;
        CHECK(kvc_stream_get_stats(st, &s) == KVC_OK);
        CHECK(kvc_stream_attend(st, NULL, q, 2, out) == KVC_OK);
        CHECK_MSG(kvc_stream_checksum(st) == want && memcmp(out, out_whole, sizeof out) == 0,
                  "%u plain appends then one call of %u: the state differs from one call of %u (out[0] %g vs %g)", a,
                  n - a, n, (double)out[0], (double)out_whole[0]);
        free(w), free(st);
    }
    printf("balancekv-prefill offline: 0..%u plain appends then one call end where one call of %u tokens ends "
           "(seed 62, data seed 6200)\n",
           most, n);
    free(K), free(V), free(q), free(work), free(whole);
    return 0;
}

static const kvc_test_case cases[] = {
    {"survivors_and_literal", survivors_and_literal},
    {"refusals_write_nothing", refusals_write_nothing},
    {"stream_loads_the_offline_survivors", stream_loads_the_offline_survivors},
    {"plain_appends_then_prefill_equal_one_call", plain_appends_then_prefill_equal_one_call}};
KVC_TEST_MAIN(cases)
