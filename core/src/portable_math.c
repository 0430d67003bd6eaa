/* Portable exp, log and cos (portable_math.h): range reduction with
 * constants split so that the reduction is exact, then truncated series
 * whose remainders are below 2^-56 on the reduced range. */
#include "portable_math.h"

#include <math.h>

/* ln 2 and pi/2 in two parts: the high parts have enough trailing zero bits
 * that k * HI is exact for the |k| reached here. */
#define LN2_HI   6.93147180369123816490e-01 /* 0x3FE62E42FEE00000 */
#define LN2_LO   1.90821492927058770002e-10 /* ln 2 - LN2_HI */
#define INV_LN2  1.44269504088896338700e+00
#define PIO2_HI  1.57079632673412561417e+00 /* 0x3FF921FB54400000 */
#define PIO2_LO  6.07710050650619224932e-11 /* pi/2 - PIO2_HI */
#define INV_PIO2 6.36619772367581382433e-01

/* e^r - 1 - r for |r| <= 0.35: Taylor to r^13 (remainder < 0.35^14 / 14! < 2^-60). */
static double expm1_tail(double r)
{
    static const double c[12] = {1.0 / 2,       1.0 / 6,        1.0 / 24,        1.0 / 120,
                                 1.0 / 720,     1.0 / 5040,     1.0 / 40320,     1.0 / 362880,
                                 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800};
    double p = c[11];
    for (int i = 10; i >= 0; i--) p = p * r + c[i];
    return r * r * p;
}

double kvc_pm_exp(double x)
{
    if (x != x) return x;
    if (x > 709.782712893383973) return HUGE_VAL;
    if (x < -745.2) return 0.0;
    /* k = nearest integer to x / ln 2 (|k| <= 1076, so k * LN2_HI is exact) */
    const double kd = floor(x * INV_LN2 + 0.5);
    const double r = (x - kd * LN2_HI) - kd * LN2_LO;
    const double er = 1.0 + (r + expm1_tail(r));
    return ldexp(er, (int)kd);
}

double kvc_pm_log(double x)
{
    if (x != x || x < 0.0) return NAN;
    if (x == 0.0) return -HUGE_VAL;
    if (x == HUGE_VAL) return x;
    int e;
    double m = frexp(x, &e); /* x = m 2^e, m in [1/2, 1) */
    if (m < 0.70710678118654752440) m *= 2.0, e -= 1;
    /* log m = 2 atanh s, s = (m - 1) / (m + 1), |s| <= 0.1716: series to s^25 */
    const double f = m - 1.0;
    const double s = f / (2.0 + f), s2 = s * s;
    double p = 1.0 / 25;
    for (int j = 23; j >= 3; j -= 2) p = p * s2 + 1.0 / j;
    const double log_m = 2.0 * s + 2.0 * s * (s2 * p);
    const double ed = (double)e;
    return ed * LN2_HI + (ed * LN2_LO + log_m);
}

/* sin and cos on |r| <= pi/4: Taylor to r^17 / r^18 (remainder < 2^-58). */
static double sin_reduced(double r)
{
    /* sin r = r + r^3 P(r^2), P's coefficients from r^16/17! down to -1/3! */
    static const double c[8] = {1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0,
                                1.0 / 362880.0,          -1.0 / 5040.0,          1.0 / 120.0,        -1.0 / 6.0};
    const double r2 = r * r;
    double p = c[0];
    for (int i = 1; i < 8; i++) p = p * r2 + c[i];
    return r + r * r2 * p;
}

static double cos_reduced(double r)
{
    /* cos r = 1 - (r^2/2 - r^4 P(r^2)), P's coefficients from -r^14/18! down to 1/4! */
    const double r2 = r * r;
    static const double c[8] = {
        -1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0, 1.0 / 479001600.0,
        -1.0 / 3628800.0,          1.0 / 40320.0,          -1.0 / 720.0,         1.0 / 24.0};
    double p = c[0];
    for (int i = 1; i < 8; i++) p = p * r2 + c[i];
    return 1.0 - (0.5 * r2 - r2 * r2 * p);
}

double kvc_pm_cos(double x)
{
    if (!(fabs(x) <= 1048576.0)) return NAN;
    /* x = k pi/2 + r, |r| <= pi/4 (|k| <= 2^20: k * PIO2_HI exact) */
    const double kd = floor(x * INV_PIO2 + 0.5);
    const double r = (x - kd * PIO2_HI) - kd * PIO2_LO;
    switch ((int)(fmod(kd, 4.0) + 4.0) % 4) {
    case 0: return cos_reduced(r);
    case 1: return -sin_reduced(r);
    case 2: return -cos_reduced(r);
    default: return sin_reduced(r);
    }
}
