/**
 * @file kvc_stats.h
 * @brief Exact-enough statistics for the bound checks: regularised incomplete
 *        beta, Clopper-Pearson intervals, Student-t quantiles, least squares.
 */
#ifndef KVC_ORACLE_STATS_H
#define KVC_ORACLE_STATS_H

#include <stddef.h>

/** Regularised incomplete beta I_x(a, b), a, b > 0, x in [0, 1]. */
double kvc_betainc(double a, double b, double x);

/** Student-t CDF with @p nu > 0 degrees of freedom. */
double kvc_t_cdf(double t, double nu);

/** Student-t quantile: the t with kvc_t_cdf(t, nu) = p, p in (0, 1). */
double kvc_t_quantile(double p, double nu);

/**
 * @brief Exact (Clopper-Pearson) two-sided interval for a binomial proportion.
 * @param k successes, @param n trials (n >= 1), @param conf e.g. 0.99.
 */
void kvc_clopper_pearson(size_t k, size_t n, double conf, double *lo, double *hi);

/** Least-squares line y = a + b x with the slope's standard error and a
 *  two-sided @p conf interval from the t distribution (n >= 3). */
typedef struct kvc_linfit {
    double intercept, slope, slope_se, slope_lo, slope_hi;
} kvc_linfit;
int kvc_linear_fit(const double *x, const double *y, size_t n, double conf, kvc_linfit *out);

#endif
