/* The counter-based generator. */
#include <errno.h>

#include "kvc/kvc_rng.h"
#include "kvc_stats.h"
#include "kvc_test.h"

static int rng_deterministic_and_counter_based(void)
{
    kvc_rng a, b;
    kvc_rng_seed(&a, 42);
    kvc_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++) {
        uint64_t x = kvc_rng_next(&a);
        CHECK(x == kvc_rng_next(&b));
        CHECK(x == kvc_rng_at(a.key, (uint64_t)i));
        CHECK(a.counter == (uint64_t)i + 1);
    }
    kvc_rng c;
    kvc_rng_seed(&c, 43);
    int same = 0;
    for (int i = 0; i < 1000; i++) same += kvc_rng_next(&c) == kvc_rng_at(a.key, (uint64_t)i);
    CHECK(same == 0);
    return 0;
}

/* kvc_rng_below(10) over 200000 draws: chi-square goodness of fit, 9 dof.
 * Fails when p < 1e-4, the false-alarm rate of this test. */
static int rng_below_uniform_chisq(void)
{
    const uint64_t seed = 7;
    printf("seed %llu\n", (unsigned long long)seed);
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    double obs[10] = {0}, ex[10];
    const int draws = 200000;
    for (int i = 0; i < draws; i++) {
        uint32_t x = kvc_rng_below(&r, 10);
        CHECK(x < 10);
        obs[x] += 1;
    }
    for (int i = 0; i < 10; i++) ex[i] = draws / 10.0;
    double stat = kvc_chi2_stat(obs, ex, 10), p = kvc_chi2_sf(stat, 9);
    printf("chi2 = %.3f, p = %.4f (fail below 1e-4)\n", stat, p);
    CHECK(p >= 1e-4);
    return 0;
}

/* Non-power-of-two bounds near 2^31 stay in range; unit() in [0,1) with mean 1/2. */
static int rng_ranges_and_mean(void)
{
    kvc_rng r;
    kvc_rng_seed(&r, 11);
    printf("seed 11\n");
    const uint32_t bounds[] = {1, 2, 3, 1000003, 2147483647u, 3000000000u, UINT32_MAX};
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++)
        for (int i = 0; i < 10000; i++) {
            uint64_t before = r.counter;
            CHECK(kvc_rng_below(&r, bounds[b]) < bounds[b]);
            CHECK(r.counter > before && r.counter <= before + 64);
        }
    double s = 0;
    const int n = 1000000;
    for (int i = 0; i < n; i++) {
        double u = kvc_rng_unit(&r);
        CHECK(u >= 0.0 && u < 1.0);
        s += u;
    }
    /* mean of n uniforms: sd = 1/sqrt(12 n); 5 sd -> false alarm 6e-7 */
    double z = (s / n - 0.5) / (1.0 / sqrt(12.0 * n));
    printf("unit mean z-score %.3f\n", z);
    CHECK(fabs(z) < 5.0);
    return 0;
}

/* The contracts the proofs trust about libm (core/src/rng.c, rng_log01 /
 * rng_sqrt / rng_cos) and the exact-conversion axiom hold on this platform:
 * results in the stated ranges at the ends of the stated domains, errno untouched. */
static int trusted_libm_contracts(void)
{
    const double xs[] = {4.9406564584124654e-324, 2.2250738585072014e-308, 1.1102230246251565e-16, 0.5, 1.0};
    errno = 0;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double y = log(xs[i]);
        CHECK_MSG(isfinite(y) && y >= -746.0 && y <= 0.0, "log(%g) = %g", xs[i], y);
    }
    const double ss[] = {0.0, 1e-300, 1.0, 73.4, 1521.0};
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        double y = sqrt(ss[i]);
        CHECK(isfinite(y) && y >= 0.0 && y <= 39.0);
    }
    const double cs[] = {0.0, -1.0, 6.283185307179586, 1e10, -1e300, 1.7976931348623157e308};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        double y = cos(cs[i]);
        CHECK(isfinite(y) && y >= -1.0 && y <= 1.0);
    }
    CHECK(errno == 0);
    const uint64_t ks[] = {0, 1, 9007199254740991ull, 9007199254740992ull, 4503599627370497ull};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) CHECK((uint64_t)(double)ks[i] == ks[i]);
    kvc_rng r;
    kvc_rng_seed(&r, 13);
    for (int i = 0; i < 100000; i++) {
        double z = kvc_rng_normal(&r);
        CHECK(isfinite(z) && fabs(z) <= 39.0);
    }
    CHECK(errno == 0);
    return 0;
}

static const kvc_test_case cases[] = {
    {"trusted_libm_contracts", trusted_libm_contracts},
    {"deterministic_and_counter_based", rng_deterministic_and_counter_based},
    {"below_uniform_chisq", rng_below_uniform_chisq},
    {"ranges_and_mean", rng_ranges_and_mean},
};
KVC_TEST_MAIN(cases)
