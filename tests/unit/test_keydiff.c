/* KeyDiff keeps, of the tokens that left the window, the ones whose keys are
 * least similar to the rest: checked against a brute-force replay of its
 * rule (evict the held-or-incoming key with the largest cosine to the sum of
 * the normalised keys), and on a stream where a few distinctive keys hide
 * among near-copies of one direction. Everything else (bad input, snapshots,
 * budgets, corruption, fuzzing) is covered by the tests that iterate the
 * method registry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

static double cosine_to(const float *k, const double *a, size_t d)
{
    double kk = 0, ka = 0;
    for (size_t c = 0; c < d; c++) kk += (double)k[c] * k[c], ka += (double)k[c] * a[c];
    return kk > 0 ? ka / sqrt(kk) : 0.0;
}

static int follows_its_rule_and_keeps_distinct_keys(void)
{
    const size_t d = 8, n = 600;
    const uint32_t budget = 48, sink = 4, window = 8, cap = budget - sink - window - 1;
    printf("seed 9, n %zu, capacity %u; distinctive keys every 50th token\n", n, cap);
    kvc_rng r;
    kvc_rng_seed(&r, 9);
    float *k = tu_normal(&r, n, d, 0.2), *v = tu_normal(&r, n, d, 1.0);
    for (size_t j = 0; j < n; j++) k[j * d] += j % 50 == 25 ? -2.0f : 2.0f; /* near-copies of +e0; a few of -e0 */
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_KEYDIFF, d, d, budget, 1);
    cfg.n_sink = sink, cfg.n_window = window;
    kvc_stream *st = tu_stream(&cfg);
    CHECK(st != NULL);
    /* the replay: token ids held, in slot order */
    size_t held[64], n_held = 0;
    for (size_t j = 0; j < n; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * d, v + j * d) == KVC_OK);
        if (j < sink + window + 1) continue;
        const size_t in = j - window - 1; /* the token that just left the window */
        if (n_held < cap) {
            held[n_held++] = in;
        } else {
            double a[8] = {0};
            for (size_t c = 0; c < d; c++) {
                double s = 0;
                for (size_t i = 0; i < n_held; i++) {
                    const float *x = k + held[i] * d;
                    double nx = 0;
                    for (size_t e = 0; e < d; e++) nx += (double)x[e] * x[e];
                    s += x[c] / sqrt(nx);
                }
                const float *y = k + in * d;
                double ny = 0;
                for (size_t e = 0; e < d; e++) ny += (double)y[e] * y[e];
                a[c] = s + y[c] / sqrt(ny);
            }
            double worst = cosine_to(k + in * d, a, d);
            size_t ev = n_held;
            for (size_t i = 0; i < n_held; i++) {
                const double c = cosine_to(k + held[i] * d, a, d);
                if (c > worst) worst = c, ev = i;
            }
            if (ev < n_held) held[ev] = in;
        }
        kvc_view view;
        CHECK(kvc_stream_view(st, &view) == KVC_OK);
        const kvc_segment *m = &view.seg[KVC_STREAM_EXACT_SEGMENTS];
        CHECK(m->n == n_held && m->weights == NULL);
        for (size_t i = 0; i < n_held; i++)
            CHECK_MSG(memcmp(m->keys + i * d, k + held[i] * d, d * sizeof(float)) == 0 &&
                          memcmp(m->values + i * d, v + held[i] * d, d * sizeof(float)) == 0,
                      "after token %zu, slot %zu: want token %zu", j, i, held[i]);
    }
    /* every distinctive key that left the window is held */
    size_t distinct = 0;
    for (size_t i = 0; i < n_held; i++) distinct += held[i] % 50 == 25;
    printf("after every append the slots match the replay; %zu of %zu held keys are the distinctive ones (%zu left the "
           "window)\n",
           distinct, n_held, (n - window - 1 - 25 + 49) / 50);
    CHECK(distinct == (n - window - 1 - 25 + 49) / 50);
    free(k), free(v), free(st);
    return 0;
}

static const kvc_test_case cases[] = {
    {"follows_its_rule_and_keeps_distinct_keys", follows_its_rule_and_keeps_distinct_keys},
};
KVC_TEST_MAIN(cases)
