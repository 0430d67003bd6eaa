/* The oracle itself (MPFR attention, statistics) and the bound-check suite:
 * every claimed bound is tested on a fresh stream built to satisfy its
 * assumptions, with a constant declared on a calibration stream. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"
#include "kvc_oracle/kvc_stats.h"
#include "kvc_oracle/kvc_suite.h"
#include "kvc_test.h"
#include "kvc_testutil.h"

/* MPFR vs the float64 two-pass path on well-conditioned inputs. The double
 * path's relative error is below (n + d) * 2^-52 * (a small constant); with
 * n = 600, d = 32 that is ~1.4e-13; we allow 1e-12. */
static int mp_matches_f64_two_pass(void)
{
    printf("seed 401\n");
    kvc_rng r;
    kvc_rng_seed(&r, 401);
    const size_t n = 600, d = 32, dv = 24;
    float *k = tu_normal(&r, n, d, 1.0), *v = tu_normal(&r, n, dv, 1.0), *q = tu_normal(&r, 4, d, 1.0);
    for (size_t i = 0; i < n * dv; i++) v[i] += 1.0f;
    double a[24], b[24], sa, sb, worst = 0;
    for (int h = 0; h < 4; h++) {
        CHECK(kvc_oracle_attention_mp(q + h * d, k, v, n, d, dv, 0.2, 128, a, &sa) == 0);
        kvc_exact_result er;
        kvc_exact_attention_f64(q + h * d, k, v, n, d, dv, 0.2, b, &er);
        sb = er.softmax_l2;
        double e = 0, nn = 0;
        for (size_t c = 0; c < dv; c++) e += (a[c] - b[c]) * (a[c] - b[c]), nn += a[c] * a[c];
        if (sqrt(e / nn) > worst) worst = sqrt(e / nn);
        CHECK(fabs(sa - sb) <= 1e-12 * sa);
    }
    printf("max relative difference %.3e (bound 1e-12)\n", worst);
    CHECK(worst <= 1e-12);
    free(k), free(v), free(q);
    return 0;
}

/* Closed forms: all keys equal -> the mean of the values (correctly rounded);
 * one key far ahead -> exactly its value. */
static int mp_closed_forms(void)
{
    const size_t n = 7, d = 3, dv = 2;
    float k[21], v[14], q[3] = {0.3f, -1.0f, 2.0f};
    for (size_t i = 0; i < n; i++) {
        k[i * 3] = 1.0f, k[i * 3 + 1] = 2.0f, k[i * 3 + 2] = 3.0f;
        v[i * 2] = (float)i, v[i * 2 + 1] = 0.1f * (float)(i * i);
    }
    double out[2], sl2;
    CHECK(kvc_oracle_attention_mp(q, k, v, n, d, dv, 1.0, 200, out, &sl2) == 0);
    /* mean of 0..6 = 3 exactly; mean of 0.1f*i^2 computed from the float values */
    double m1 = 0;
    for (size_t i = 0; i < n; i++) m1 += (double)v[i * 2 + 1];
    m1 /= 7.0;
    printf("equal keys: %.17g (3), %.17g (%.17g); ||softmax|| %.17g (1/sqrt(7) = %.17g)\n", out[0], out[1], m1, sl2,
           1 / sqrt(7.0));
    CHECK(out[0] == 3.0);
    CHECK(fabs(out[1] - m1) <= 2 * DBL_EPSILON * fabs(m1));
    CHECK(fabs(sl2 - 1 / sqrt(7.0)) <= 2 * DBL_EPSILON);
    k[4 * 3] = 500.0f; /* token 4 dominates by a score gap of ~150 */
    CHECK(kvc_oracle_attention_mp(q, k, v, n, d, dv, 1.0, 200, out, &sl2) == 0);
    printf("dominant key: (%.17g, %.17g), softmax_l2 %.17g\n", out[0], out[1], sl2);
    CHECK(out[0] == (double)v[8] && out[1] == (double)v[9] && sl2 == 1.0);
    return 0;
}

/* Scores spread over 1e4: naive float exp overflows, the oracle does not, and
 * it agrees with a max-subtracted double computation. */
static int mp_huge_score_spread(void)
{
    const size_t n = 4, d = 1, dv = 1;
    float k[4] = {10000.0f, 9999.0f, -10000.0f, 0.0f}, v[4] = {1.0f, -1.0f, 5.0f, 7.0f}, q[1] = {1.0f};
    volatile float big = 10000.0f;
    printf("naive expf(10000) = %g\n", (double)expf(big));
    CHECK(isinf(expf(big)));
    double out[1], sl2;
    CHECK(kvc_oracle_attention_mp(q, k, v, n, d, dv, 1.0, 160, out, &sl2) == 0);
    double e1 = exp(-1.0), expect = (1.0 - e1) / (1.0 + e1); /* e^-20000 and e^-10000 vanish */
    printf("oracle %.17g, expected %.17g\n", out[0], expect);
    CHECK(isfinite(out[0]) && fabs(out[0] - expect) <= 4 * DBL_EPSILON);
    return 0;
}

/* kvc eval's fast double path agrees with the oracle on a long trace. */
static int eval_fast_path_matches_oracle(void)
{
    kvc_suite_stream s;
    CHECK(kvc_suite_stream_make(&s, 4096, 16, 6, 0.02, 7) == 0);
    printf("suite stream seed 7, n=4096\n");
    double a[16], b[16], worst = 0;
    for (size_t j = 100; j < 4096; j += 997) {
        CHECK(kvc_oracle_attention_mp(s.tr.q + j * 16, s.tr.k, s.tr.v, j + 1, 16, 16, 0.25, 128, a, NULL) == 0);
        kvc_exact_attention_f64(s.tr.q + j * 16, s.tr.k, s.tr.v, j + 1, 16, 16, 0.25, b, NULL);
        double e = 0, nn = 0;
        for (int c = 0; c < 16; c++) e += (a[c] - b[c]) * (a[c] - b[c]), nn += a[c] * a[c];
        if (sqrt(e / nn) > worst) worst = sqrt(e / nn);
    }
    printf("max relative difference %.3e (bound (n + d) * eps * 8 = %.3e)\n", worst, (4096 + 16) * DBL_EPSILON * 8);
    CHECK(worst <= (4096 + 16) * DBL_EPSILON * 8);
    kvc_suite_stream_free(&s);
    return 0;
}

/* Statistics against known values. */
static int stats_known_values(void)
{
    double lo, hi;
    kvc_clopper_pearson(0, 10, 0.95, &lo, &hi);
    printf("CP(0/10, 95%%) = [%g, %g], exact upper 1 - 0.025^(1/10) = %g\n", lo, hi, 1 - pow(0.025, 0.1));
    CHECK(lo == 0.0 && fabs(hi - (1 - pow(0.025, 0.1))) < 1e-9);
    kvc_clopper_pearson(5, 10, 0.95, &lo, &hi); /* R: binom.test(5, 10) -> 0.187086, 0.812914 */
    CHECK(fabs(lo - 0.187086) < 1e-5 && fabs(hi - 0.812914) < 1e-5);
    double t = kvc_t_quantile(0.975, 10); /* 2.228139 */
    printf("t_0.975(10) = %.6f\n", t);
    CHECK(fabs(t - 2.228139) < 1e-5);
    CHECK(fabs(kvc_betainc(2, 3, 0.4) - 0.5248) < 1e-12); /* I_0.4(2,3) = 0.5248 */
    double x[5] = {0, 1, 2, 3, 4}, y[5] = {1, 3, 5, 7, 9.0000001};
    kvc_linfit f;
    CHECK(kvc_linear_fit(x, y, 5, 0.95, &f) == 0 && fabs(f.slope - 2.0) < 1e-6 && f.slope_lo < 2.0 && f.slope_hi > 2.0);
    return 0;
}

static int run_suite_case(kvc_method m)
{
    kvc_suite_settings s = kvc_suite_defaults();
    kvc_suite_result r;
    printf("streams: calibration seed %llu, test seed %llu; method seeds 1000.. / 5000..; false-alarm rates:\n"
           "failure-rate check 1e-3 (one-sided), slope check 1e-3 (one-sided), unbiasedness 1e-4\n",
           (unsigned long long)s.calib_stream_seed, (unsigned long long)s.test_stream_seed);
    CHECK(kvc_suite_run(m, &s, stdout, &r) == 0);
    kvc_suite_print_header(stdout);
    kvc_suite_print_row(stdout, &r);
    CHECK_MSG(r.pass_failure, "failure rate %.4f, interval [%.4f, %.4f] above the claimed %g", r.failure.rate,
              r.failure.lo, r.failure.hi, r.claim->delta);
    if (!r.slope_met)
        printf("slope %.3f [%.3f, %.3f] is slower than the predicted %g (+%g): reported, not asserted, for this "
               "method (see its claim)\n",
               r.slope, r.slope_lo, r.slope_hi, r.claim->exponent, r.slope_tol);
    CHECK_MSG(r.pass_slope, "slope %.3f [%.3f, %.3f] slower than predicted %g + %g", r.slope, r.slope_lo, r.slope_hi,
              r.claim->exponent, r.slope_tol);
    CHECK_MSG(r.pass_unbiased, "unbiasedness z num %.2f den %.2f limit %.2f", r.unbiased.max_abs_z_num,
              r.unbiased.z_den, r.unbiased.z_limit);
    return 0;
}

static int suite_exact(void) { return run_suite_case(KVC_METHOD_EXACT); }
static int suite_uniform(void) { return run_suite_case(KVC_METHOD_UNIFORM); }
static int suite_subgen(void) { return run_suite_case(KVC_METHOD_SUBGEN); }
static int suite_balancekv(void) { return run_suite_case(KVC_METHOD_BALANCEKV); }
static int suite_balancekv_prefill(void) { return run_suite_case(KVC_METHOD_BALANCEKV_PREFILL); }
static int suite_express(void) { return run_suite_case(KVC_METHOD_EXPRESS); }
static int suite_express_prefill(void) { return run_suite_case(KVC_METHOD_EXPRESS_PREFILL); }

static const kvc_test_case cases[] = {
    {"mp_matches_f64_two_pass", mp_matches_f64_two_pass},
    {"mp_closed_forms", mp_closed_forms},
    {"mp_huge_score_spread", mp_huge_score_spread},
    {"eval_fast_path_matches_oracle", eval_fast_path_matches_oracle},
    {"stats_known_values", stats_known_values},
    {"suite_exact", suite_exact},
    {"suite_uniform", suite_uniform},
    {"suite_subgen", suite_subgen},
    {"suite_balancekv", suite_balancekv},
    {"suite_balancekv_prefill", suite_balancekv_prefill},
    {"suite_express", suite_express},
    {"suite_express_prefill", suite_express_prefill},
};
KVC_TEST_MAIN(cases)
