/* portable_math.c against the host libm. Bounds, in units in the last place
 * of the libm result (glibc's exp, log and cos are within 1 ulp):
 *  - exp: the reduction r = x - k ln2 is exact up to k * ln2_lo's rounding
 *    (< 2^-60 |r|), the series remainder is < 2^-60, Horner and the final
 *    1 + (r + tail) add at most 1 ulp, ldexp is exact: 1 ulp + libm's 1 = 2;
 *  - log: s = f / (2 + f) is rounded once (1/2 ulp of s, carried to log m
 *    with factor <= 1), e ln2 + log m adds 1, the series < 2^-56: 2 + libm's 1 = 3;
 *  - cos: as exp, where |cos x| >= 2^-10 (near its zeros the relative error
 *    of any reduction grows; there the absolute error is <= 2^-52).
 * Deterministic sweeps (no random input). */
#include <math.h>
#include <stdint.h>

#include "kvc_test.h"
#include "portable_math.h"

static double ulps(double got, double want)
{
    if (got == want) return 0.0;
    const double ulp = nextafter(fabs(want), INFINITY) - fabs(want);
    return fabs(got - want) / ulp;
}

static int exp_log_cos_close_to_libm(void)
{
    const int n = 400000;
    double we = 0, wl = 0, wc = 0, wca = 0;
    for (int i = 0; i <= n; i++) {
        const double x = -745.0 + 1454.5 * i / n; /* the whole finite range of exp */
        const double u = ulps(kvc_pm_exp(x), exp(x));
        if (u > we) we = u;
    }
    for (int i = 1; i <= n; i++) {
        const double x = exp(-740.0 + 1449.0 * i / n); /* subnormal to 1e308 */
        const double u = ulps(kvc_pm_log(x), log(x));
        if (u > wl) wl = u;
    }
    for (int i = 0; i <= n; i++) {
        const double x = -40.0 + 80.0 * i / n;
        const double want = cos(x), got = kvc_pm_cos(x);
        if (fabs(want) >= 0x1p-10) {
            if (ulps(got, want) > wc) wc = ulps(got, want);
        } else if (fabs(got - want) > wca) {
            wca = fabs(got - want);
        }
    }
    printf("largest error: exp %.2f ulp, log %.2f ulp, cos %.2f ulp (|cos| >= 2^-10), %.2e absolute near zeros\n", we,
           wl, wc, wca);
    CHECK(we <= 2.0);
    CHECK(wl <= 3.0);
    CHECK(wc <= 2.0);
    CHECK(wca <= 0x1p-52);
    return 0;
}

static int special_values(void)
{
    CHECK(kvc_pm_exp(0.0) == 1.0 && kvc_pm_exp(-0.0) == 1.0);
    CHECK(kvc_pm_exp(-INFINITY) == 0.0 && kvc_pm_exp(-746.0) == 0.0);
    CHECK(kvc_pm_exp(INFINITY) == INFINITY && kvc_pm_exp(710.0) == INFINITY);
    CHECK(isnan(kvc_pm_exp(NAN)));
    CHECK(kvc_pm_exp(709.78) < INFINITY && kvc_pm_exp(-745.1) > 0.0); /* the last finite and the subnormal end */
    CHECK(kvc_pm_log(1.0) == 0.0 && kvc_pm_log(0.0) == -INFINITY && kvc_pm_log(INFINITY) == INFINITY);
    CHECK(isnan(kvc_pm_log(-1.0)) && isnan(kvc_pm_log(NAN)));
    CHECK(kvc_pm_log(0x1p-1074) == log(0x1p-1074)); /* the smallest subnormal */
    for (int k = -1074; k <= 1023; k++)             /* exact powers of two: k ln 2 to the ulp */
        CHECK(ulps(kvc_pm_log(ldexp(1.0, k)), (double)k * 0.69314718055994530942) <= 1.0);
    CHECK(kvc_pm_cos(0.0) == 1.0 && isnan(kvc_pm_cos(NAN)) && isnan(kvc_pm_cos(INFINITY)));
    CHECK(isnan(kvc_pm_cos(2e6)));
    return 0;
}

/* The trusted contracts of rng.c's libm wrappers (axioms of the wp_rng_float
 * proof): log on (0, 1] is finite in [-746, 0], sqrt on [0, 1521] is finite in
 * [0, 39], cos on [-2^20, 2^20] is finite in [-1, 1]. Swept over each domain,
 * its ends and the subnormals included. */
static int rng_wrapper_contracts(void)
{
    const int n = 200000;
    for (int i = 0; i <= n; i++) {
        const double x = i == 0 ? 0x1p-1074 : exp(-744.0 * (double)(n - i) / n); /* (0, 1], both ends */
        const double y = kvc_pm_log(x);
        CHECK_MSG(isfinite(y) && y >= -746.0 && y <= 0.0, "log(%a) = %a", x, y);
    }
    for (int i = 0; i <= n; i++) {
        const double x = 1521.0 * i / n;
        const double y = sqrt(x);
        CHECK_MSG(isfinite(y) && y >= 0.0 && y <= 39.0, "sqrt(%a) = %a", x, y);
    }
    for (int i = 0; i <= n; i++) {
        const double x = -1048576.0 + 2097152.0 * i / n;
        const double y = kvc_pm_cos(x);
        CHECK_MSG(isfinite(y) && y >= -1.0 && y <= 1.0, "cos(%a) = %a", x, y);
    }
    for (int i = 0; i <= n; i++) { /* the range the random normals use, finely */
        const double x = 6.283185307179586 * i / n;
        const double y = kvc_pm_cos(x);
        CHECK_MSG(isfinite(y) && y >= -1.0 && y <= 1.0, "cos(%a) = %a", x, y);
    }
    return 0;
}

static const kvc_test_case cases[] = {
    {"exp_log_cos_close_to_libm", exp_log_cos_close_to_libm},
    {"special_values", special_values},
    {"rng_wrapper_contracts", rng_wrapper_contracts},
};
KVC_TEST_MAIN(cases)
