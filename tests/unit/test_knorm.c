/* K-norm keeps, of the tokens that left the window, the ones whose keys have
 * the lowest L2 norm: checked against a brute-force selection. Everything
 * else (bad input, snapshots, budgets, corruption, fuzzing) is covered by the
 * tests that iterate the method registry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double norm_of(const float *k, size_t d)
{
    double s = 0;
    for (size_t c = 0; c < d; c++) s += (double)k[c] * k[c];
    return sqrt(s);
}

static int keeps_lowest_key_norms(void)
{
    const size_t d = 8, n = 700;
    const uint32_t budget = 64, sink = 4, window = 8, cap = budget - sink - window - 1;
    printf("seed 5, n %zu, capacity %u\n", n, cap);
    kvc_rng r;
    kvc_rng_seed(&r, 5);
    float *k = tu_normal(&r, n, d, 1.0), *v = tu_normal(&r, n, d, 1.0);
    for (size_t j = 0; j < n; j++) { /* spread the norms over two decades */
        const float s = (float)(0.1 + 3.0 * kvc_rng_unit(&r));
        for (size_t c = 0; c < d; c++) k[j * d + c] *= s;
    }
    kvc_stream_config cfg = kvc_stream_config_default(KVC_METHOD_KNORM, d, d, budget, 1);
    cfg.n_sink = sink, cfg.n_window = window;
    kvc_stream *st = tu_stream(&cfg);
    CHECK(st != NULL);
    double *left = malloc(n * sizeof(double)), *kept = malloc(cap * sizeof(double));
    for (size_t j = 0; j < n; j++) {
        CHECK(kvc_stream_append(st, NULL, k + j * d, v + j * d) == KVC_OK);
        /* tokens that left the window: all but sinks, the window and the current one */
        if (j + 1 <= sink + window + 1) continue;
        const size_t n_left = j + 1 - sink - window - 1;
        kvc_view view;
        CHECK(kvc_stream_view(st, &view) == KVC_OK);
        const kvc_segment *m = &view.seg[KVC_STREAM_EXACT_SEGMENTS];
        const size_t want = n_left < cap ? n_left : cap;
        CHECK(m->n == want && m->weights == NULL && m->scale == 1.0);
        for (size_t i = 0; i < n_left; i++) left[i] = norm_of(k + (sink + i) * d, d);
        qsort(left, n_left, sizeof(double), cmp_double);
        for (size_t i = 0; i < want; i++) kept[i] = norm_of(m->keys + i * d, d);
        qsort(kept, want, sizeof(double), cmp_double);
        for (size_t i = 0; i < want; i++)
            CHECK_MSG(kept[i] == left[i], "token %zu: kept norm %g, want %g", j, kept[i], left[i]);
        /* each kept key comes with its own value */
        for (size_t i = 0; i < want; i++) {
            size_t src = n;
            for (size_t t = sink; t < j + 1 && src == n; t++)
                if (memcmp(m->keys + i * d, k + t * d, d * sizeof(float)) == 0) src = t;
            CHECK(src < n && memcmp(m->values + i * d, v + src * d, d * sizeof(float)) == 0);
        }
    }
    printf("after every append: the kept keys are the %u lowest norms of the tokens that left the window\n", cap);
    free(left), free(kept), free(k), free(v), free(st);
    return 0;
}

static const kvc_test_case cases[] = {{"keeps_lowest_key_norms", keeps_lowest_key_norms}};
KVC_TEST_MAIN(cases)
