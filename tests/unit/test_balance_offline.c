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

int main(int argc, char **argv)
{
    static const kvc_test_case cases[] = {{"survivors_and_literal", survivors_and_literal},
                                          {"refusals_write_nothing", refusals_write_nothing}};
    return kvc_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
