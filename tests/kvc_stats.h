/* Small statistics helpers for the tests: chi-square and normal tail
 * probabilities (regularised incomplete gamma by series / continued fraction). */
#ifndef KVC_STATS_H
#define KVC_STATS_H

#include <math.h>

static double kvc_gamma_q_cf(double a, double x)
{
    double b = x + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-15) break;
    }
    return exp(-x + a * log(x) - lgamma(a)) * h;
}

static double kvc_gamma_p_series(double a, double x)
{
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 100000; n++) {
        ap += 1.0;
        del *= x / ap;
        sum += del;
        if (fabs(del) < fabs(sum) * 1e-16) break;
    }
    return sum * exp(-x + a * log(x) - lgamma(a));
}

/* Upper regularised incomplete gamma Q(a, x). */
static double kvc_gamma_q(double a, double x)
{
    if (x <= 0.0) return 1.0;
    if (x < a + 1.0) return 1.0 - kvc_gamma_p_series(a, x);
    return kvc_gamma_q_cf(a, x);
}

/* P(Chi2_k >= x). */
static double kvc_chi2_sf(double x, double k) { return kvc_gamma_q(0.5 * k, 0.5 * x); }

/* Two-sided normal tail P(|Z| >= z). */
static double kvc_normal_2sided(double z) { return erfc(fabs(z) / sqrt(2.0)); }

/* Pearson chi-square statistic of observed counts against expected counts. */
static double kvc_chi2_stat(const double *obs, const double *expct, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (obs[i] - expct[i]) * (obs[i] - expct[i]) / expct[i];
    return s;
}

#endif
