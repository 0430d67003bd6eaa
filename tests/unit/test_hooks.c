/* The batched attend and the hooks for query-aware methods, exercised with a
 * toy method (tests/unit/method_toy.c) that this test build appends to the
 * registry: every registered method answers the batched attend exactly like
 * the one-position attend, causally, with attention masses that are the
 * softmax probabilities; observe() hands a method its entries' masses and
 * prefill_queries() the prompt's last queries. Deterministic (seeds printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "toy_method.h"

#define D  ((size_t)8)
#define NQ ((size_t)2)

static kvc_stream_config config_of(kvc_method m, kvc_dtype t, uint32_t budget, size_t n)
{
    kvc_stream_config c = kvc_stream_config_default(m, D, D, budget, 3);
    /* KIVI4 windows are whole blocks of 32: 12 held none (and is now refused), so 0 there */
    c.n_sink = 4, c.n_window = t == KVC_DTYPE_KIVI4 ? 0u : 12u, c.dtype = t;
    c.prefix_len = (uint32_t)n;
    return c;
}

static int registry_lists_toy(void)
{
    kvc_method m;
    CHECK(kvc_method_parse("toy", &m) == KVC_OK && m == KVC_METHOD_TOY);
    CHECK(kvc_method_at(kvc_method_count() - 1) == KVC_METHOD_TOY);
    printf("%zu methods, the last one the toy\n", kvc_method_count());
    return 0;
}

/* n_pos = 1 gives the bits of kvc_stream_attend, for every method and storage type. */
static int batch_of_one_is_attend(void)
{
    const size_t n = 300;
    kvc_rng r;
    kvc_rng_seed(&r, 11);
    printf("seed 11, n %zu\n", n);
    float *k = tu_normal(&r, n, D, 1.0), *v = tu_normal(&r, n, D, 1.0), *q = tu_normal(&r, n * NQ, D, 1.0);
    float a[NQ * 8], b[NQ * 8];
    double work[NQ * (8 + 3)];
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
            if (!kvc_dtype_implemented((kvc_dtype)t)) continue;
            kvc_stream_config c = config_of(m, (kvc_dtype)t, m == KVC_METHOD_EXACT ? 400 : 64, n);
            kvc_stream *st = tu_stream(&c);
            CHECK_MSG(st != NULL, "%s %s", kvc_method_name(m), kvc_dtype_name((kvc_dtype)t));
            CHECK(kvc_stream_attend_work_bytes(st, 1, NQ) == sizeof work);
            for (size_t j = 0; j < n; j++) {
                CHECK(kvc_stream_append(st, NULL, k + j * D, v + j * D) == KVC_OK);
                const kvc_status r1 = kvc_stream_attend(st, NULL, q + j * NQ * D, NQ, a);
                const kvc_status r2 =
                    kvc_stream_attend_batch(st, NULL, q + j * NQ * D, 1, NQ, b, NULL, work, sizeof work);
                CHECK_MSG(r1 == r2 && memcmp(a, b, sizeof a) == 0, "%s %s token %zu", kvc_method_name(m),
                          kvc_dtype_name((kvc_dtype)t), j);
            }
            free(st);
        }
    }
    printf("every method x {f32, f16, int8}: batched attend of one position == kvc_stream_attend, bit for bit\n");
    free(k), free(v), free(q);
    return 0;
}

/* While every token is exact, a batch over all positions gives what each
 * position's own attend gave when it was the current token (f32: bit for bit). */
static int batch_is_causal(void)
{
    const size_t n = 17; /* sink 4 + window 12 + current: nothing reaches the method */
    kvc_rng r;
    kvc_rng_seed(&r, 12);
    printf("seed 12, n %zu\n", n);
    float *k = tu_normal(&r, n, D, 1.0), *v = tu_normal(&r, n, D, 1.0), *q = tu_normal(&r, n * NQ, D, 1.0);
    float *one = malloc(n * NQ * D * sizeof(float)), *all = malloc(n * NQ * D * sizeof(float));
    double *work = malloc(n * NQ * (D + 3) * sizeof(double));
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        kvc_stream_config c = config_of(m, KVC_DTYPE_F32, 64, n);
        kvc_stream *st = tu_stream(&c);
        for (size_t j = 0; j < n; j++) {
            CHECK(kvc_stream_append(st, NULL, k + j * D, v + j * D) == KVC_OK);
            CHECK(kvc_stream_attend(st, NULL, q + j * NQ * D, NQ, one + j * NQ * D) == KVC_OK);
        }
        CHECK(kvc_stream_attend_batch(st, NULL, q, n, NQ, all, NULL, work, n * NQ * (D + 3) * sizeof(double)) ==
              KVC_OK);
        CHECK_MSG(memcmp(one, all, n * NQ * D * sizeof(float)) == 0, "%s", kvc_method_name(m));
        /* more positions than the stream holds exactly, a short workspace */
        CHECK(kvc_stream_attend_batch(st, NULL, q, n + 1, NQ, all, NULL, work, (n + 1) * NQ * (D + 3) * 8) ==
              KVC_E_ARG);
        CHECK(kvc_stream_attend_batch(st, NULL, q, n, NQ, all, NULL, work, n * NQ * (D + 3) * 8 - 8) == KVC_E_ARG);
        free(st);
    }
    printf("every method: a batch over the %zu positions == each position's own attend, bit for bit\n", n);
    free(k), free(v), free(q), free(one), free(all), free(work);
    return 0;
}

/* Masses are softmax probabilities: over the denominator set they sum to one
 * per query; for exact attention each equals e^{s_i} / sum_j e^{s_j}. */
static int mass_is_attention(void)
{
    const size_t n = 200, P = 5;
    kvc_rng r;
    kvc_rng_seed(&r, 13);
    printf("seed 13, n %zu, %zu positions x %zu heads\n", n, P, NQ);
    float *k = tu_normal(&r, n, D, 1.0), *v = tu_normal(&r, n, D, 1.0), *q = tu_normal(&r, P * NQ, D, 1.0);
    float out[5 * 2 * 8];
    double work[5 * 2 * (8 + 3)];
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        kvc_stream_config c = config_of(m, KVC_DTYPE_F32, m == KVC_METHOD_EXACT ? 256 : 64, n);
        kvc_stream *st = tu_stream(&c);
        for (size_t j = 0; j < n; j++) CHECK(kvc_stream_append(st, NULL, k + j * D, v + j * D) == KVC_OK);
        const size_t E = kvc_stream_view_entries(st);
        double *mass = malloc(E * sizeof(double));
        CHECK(kvc_stream_attend_batch(st, NULL, q, P, NQ, out, mass, work, sizeof work) == KVC_OK);
        kvc_view view;
        CHECK(kvc_stream_view(st, &view) == KVC_OK);
        double den_sum = 0.0;
        size_t e = 0;
        for (size_t s = 0; s < view.n_seg; s++)
            for (size_t i = 0; i < view.seg[s].n; i++, e++) {
                CHECK(mass[e] >= 0.0);
                if (view.seg[s].role & KVC_SET_DEN) den_sum += mass[e];
            }
        /* P*NQ sums of E terms each rounded once: tolerance E * eps per query */
        const double tol = (double)(P * NQ) * (double)E * 2.3e-16 * 4.0;
        CHECK_MSG(fabs(den_sum - (double)(P * NQ)) <= tol, "%s: %.17g", kvc_method_name(m), den_sum);
        if (m == KVC_METHOD_EXACT) {               /* brute force: position p sees tokens 0 .. n-P+p */
            const double beta = (double)view.beta; /* the float the kernel uses */
            double worst = 0.0;
            /* each entry's probability, recomputed from the token its key row came from */
            e = 0;
            for (size_t s = 0; s < view.n_seg; s++)
                for (size_t i = 0; i < view.seg[s].n; i++, e++) {
                    const float *kr = view.seg[s].keys + i * D;
                    size_t tok = n;
                    for (size_t u = 0; u < n && tok == n; u++)
                        if (memcmp(kr, k + u * D, D * sizeof(float)) == 0) tok = u;
                    CHECK(tok < n);
                    double want = 0.0;
                    for (size_t p = 0; p < P; p++)
                        for (size_t h = 0; h < NQ; h++) {
                            const size_t last = n - P + p;
                            if (tok > last) continue;
                            const float *qq = q + (p * NQ + h) * D;
                            double mx = -INFINITY, z = 0.0, mine = 0.0;
                            for (size_t u = 0; u <= last; u++) {
                                double s_ = 0;
                                for (size_t cc = 0; cc < D; cc++) s_ += (double)qq[cc] * k[u * D + cc];
                                if (beta * s_ > mx) mx = beta * s_;
                            }
                            for (size_t u = 0; u <= last; u++) {
                                double s_ = 0;
                                for (size_t cc = 0; cc < D; cc++) s_ += (double)qq[cc] * k[u * D + cc];
                                z += exp(beta * s_ - mx);
                                if (u == tok) mine = exp(beta * s_ - mx);
                            }
                            want += mine / z;
                        }
                    /* P*NQ probabilities, each a ratio of n-term sums of exps (a few ulp each): n eps per query */
                    const double ptol = (double)(P * NQ) * (double)n * 2.3e-16 * 4.0;
                    if (fabs(mass[e] - want) > worst) worst = fabs(mass[e] - want);
                    CHECK_MSG(fabs(mass[e] - want) <= ptol, "token %zu: %.17g vs %.17g", tok, mass[e], want);
                }
            printf("exact: largest |mass - brute force| %.3g\n", worst);
        }
        free(mass), free(st);
    }
    printf("every method: masses >= 0, the denominator set's sum to one per query; exact: e^s/sum e^s per entry\n");
    free(k), free(v), free(q);
    return 0;
}

/* observe() reaches the method with its own entries' masses; the toy evicts
 * the least-attended entry; bad masses are refused and change nothing. */
static int observe_drives_eviction(void)
{
    const size_t n = 120;
    kvc_rng r;
    kvc_rng_seed(&r, 14);
    printf("seed 14, n %zu\n", n);
    float *k = tu_normal(&r, n, D, 1.0), *v = tu_normal(&r, n, D, 1.0), *q = tu_normal(&r, n * NQ, D, 1.0);
    float out[2 * 8];
    double work[2 * (8 + 3)];
    kvc_stream_config c = config_of(KVC_METHOD_TOY, KVC_DTYPE_F32, 32, n); /* method capacity 32-4-12-1 = 15 */
    kvc_stream *st = tu_stream(&c);
    const size_t bytes = kvc_stream_arena_bytes(&c);
    unsigned char *snap = malloc(bytes);
    size_t evictions = 0;
    for (size_t j = 0; j < n; j++) {
        toy_info before, after;
        CHECK(toy_get(st, &before) == 0);
        /* which slot the next token to reach the method will take */
        uint32_t lowest = 0;
        for (uint32_t i = 1; i < before.count; i++)
            if (before.score[i] < before.score[lowest]) lowest = i;
        CHECK(kvc_stream_append(st, NULL, k + j * D, v + j * D) == KVC_OK);
        CHECK(toy_get(st, &after) == 0);
        if (before.count == 15 && after.count == 15) {
            const uint32_t arrived = (uint32_t)(j - 13); /* the token that left the window: j - window - 1 */
            CHECK_MSG(after.tokens[lowest] == arrived, "token %zu: slot %u holds %u, want %u", j, lowest,
                      after.tokens[lowest], arrived);
            evictions++;
        }
        const size_t E = kvc_stream_view_entries(st);
        double *mass = malloc(E * sizeof(double));
        CHECK(kvc_stream_attend_batch(st, NULL, q + j * NQ * D, 1, NQ, out, mass, work, sizeof work) == KVC_OK);
        /* refusals leave the arena as it was */
        memcpy(snap, st, bytes);
        CHECK(kvc_stream_observe(st, NULL, mass, E - 1) == KVC_E_ARG);
        const double keep = mass[E - 1];
        mass[E - 1] = NAN;
        CHECK(kvc_stream_observe(st, NULL, mass, E) == KVC_E_NONFINITE);
        mass[E - 1] = -1.0;
        CHECK(kvc_stream_observe(st, NULL, mass, E) == KVC_E_ARG);
        mass[E - 1] = keep;
        CHECK(memcmp(snap, st, bytes) == 0);
        CHECK(toy_get(st, &before) == 0);
        double *old = malloc(15 * sizeof(double));
        memcpy(old, before.score, before.count * sizeof(double));
        CHECK(kvc_stream_observe(st, NULL, mass, E) == KVC_OK);
        CHECK(toy_get(st, &after) == 0);
        /* the method's entries come after the exact segments: sinks, window, current */
        const size_t first = E - after.count;
        for (uint32_t i = 0; i < after.count; i++) CHECK(after.score[i] == old[i] + mass[first + i]);
        CHECK(after.observes == j + 1);
        free(old), free(mass);
    }
    CHECK(evictions > 50);
    printf("%zu evictions, each of the least-attended entry; observe refusals left the arena unchanged\n", evictions);
    /* prefill queries reach the method; other methods accept and ignore them */
    CHECK(kvc_stream_prefill_queries(st, NULL, q, 3) == KVC_OK);
    toy_info ti;
    CHECK(toy_get(st, &ti) == 0 && ti.prefill_rows == 3);
    double sum = 0.0;
    for (size_t i = 0; i < 3 * D; i++) sum += q[i];
    CHECK(ti.prefill_sum == sum);
    float bad[8] = {0, 0, 0, NAN, 0, 0, 0, 0};
    memcpy(snap, st, bytes);
    CHECK(kvc_stream_prefill_queries(st, NULL, bad, 1) == KVC_E_NONFINITE);
    CHECK(kvc_stream_prefill_queries(st, NULL, q, 0) == KVC_E_ARG);
    CHECK(memcmp(snap, st, bytes) == 0);
    kvc_stream_config e = config_of(KVC_METHOD_EXACT, KVC_DTYPE_F32, 64, n);
    kvc_stream *ex = tu_stream(&e);
    CHECK(kvc_stream_prefill_queries(ex, NULL, q, 3) == KVC_OK);
    printf("prefill queries: 3 rows reached the toy (sum %.6g); exact accepts and ignores them\n", sum);
    free(ex), free(st), free(snap), free(k), free(v), free(q);
    return 0;
}

static const kvc_test_case cases[] = {{"registry_lists_toy", registry_lists_toy},
                                      {"batch_of_one_is_attend", batch_of_one_is_attend},
                                      {"batch_is_causal", batch_is_causal},
                                      {"mass_is_attention", mass_is_attention},
                                      {"observe_drives_eviction", observe_drives_eviction}};
KVC_TEST_MAIN(cases)
