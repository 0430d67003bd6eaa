#include <math.h>

#include "kvc_oracle/kvc_stats.h"

/* Continued fraction for I_x(a, b) (modified Lentz). */
static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0, c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 10000; m++) {
        double m2 = 2.0 * m, aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-15) break;
    }
    return h;
}

double kvc_betainc(double a, double b, double x)
{
    if (x <= 0.0) return 0.0;
    if (x >= 1.0) return 1.0;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1.0) / (a + b + 2.0)) return exp(lbt) * betacf(a, b, x) / a;
    return 1.0 - exp(lbt) * betacf(b, a, 1.0 - x) / b;
}

double kvc_t_cdf(double t, double nu)
{
    double x = nu / (nu + t * t), tail = 0.5 * kvc_betainc(0.5 * nu, 0.5, x);
    return t >= 0 ? 1.0 - tail : tail;
}

double kvc_t_quantile(double p, double nu)
{
    double lo = -1e6, hi = 1e6;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (kvc_t_cdf(mid, nu) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Quantile of Beta(a, b) by bisection on the CDF. */
static double beta_quantile(double p, double a, double b)
{
    double lo = 0.0, hi = 1.0;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (kvc_betainc(a, b, mid) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

void kvc_clopper_pearson(size_t k, size_t n, double conf, double *lo, double *hi)
{
    double alpha = 1.0 - conf;
    *lo = k == 0 ? 0.0 : beta_quantile(alpha / 2, (double)k, (double)(n - k + 1));
    *hi = k == n ? 1.0 : beta_quantile(1.0 - alpha / 2, (double)(k + 1), (double)(n - k));
}

int kvc_linear_fit(const double *x, const double *y, size_t n, double conf, kvc_linfit *out)
{
    if (n < 3) return 1;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    double sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    if (sxx <= 0) return 1;
    out->slope = sxy / sxx;
    out->intercept = my - out->slope * mx;
    double rss = 0;
    for (size_t i = 0; i < n; i++) {
        double r = y[i] - out->intercept - out->slope * x[i];
        rss += r * r;
    }
    out->slope_se = sqrt(rss / (double)(n - 2) / sxx);
    double tq = kvc_t_quantile(0.5 + conf / 2, (double)(n - 2));
    out->slope_lo = out->slope - tq * out->slope_se;
    out->slope_hi = out->slope + tq * out->slope_se;
    return 0;
}
