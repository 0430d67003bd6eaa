/**
 * @file kvc_bounds.h
 * @brief Statistical checks of each method's error bound against the MPFR
 *        oracle (docs/methods.md section 5).
 *
 * For one trace, a list of budgets and R seeds, kvc_oracle_measure streams the
 * trace through the method and, at P query positions in the second half of
 * the trace, records the normalised error
 *     e = ||z - Attn|| / (||softmax(beta K q)||_2 * ||V||)        (||V||_op for SubGen, ||V||_F else)
 * with Attn from MPFR. The checks are:
 *  (a) failure rate P(e > eps(m)) with eps(m) = C * m^exponent, C declared
 *      (calibrated on another stream), against the claimed failure
 *      probability delta, with an exact Clopper-Pearson interval;
 *  (b) the least-squares slope of log(mean e) against log(memory) with its
 *      confidence interval, against the predicted exponent;
 *  (c) unbiasedness of the numerator and denominator sums where claimed.
 * Positions of one run share its random state, so samples are not
 * independent; the intervals treat them as if they were (narrower than the
 * truth) and every table says so.
 */
#ifndef KVC_ORACLE_BOUNDS_H
#define KVC_ORACLE_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a method claims (one row per method; NULL bound = nothing claimed). */
typedef struct kvc_bound_claim {
    kvc_method method;
    const char *bound;  /**< the inequality, as text */
    int op_norm;        /**< 1: ||V||_op scale (SubGen); 0: ||V||_F */
    double exponent;    /**< eps(m) = C m^exponent; also the predicted slope */
    double delta;       /**< claimed failure probability */
    int unbiased;       /**< numerator and denominator estimates are unbiased */
    int slope_asserted; /**< 0: the slope is measured and compared, but a miss does not fail
                               (the prediction was tested and not met; see source) */
    const char *source; /**< where the claim comes from */
} kvc_bound_claim;

/** @brief The claim of @p m (never NULL; bound == NULL when none). */
const kvc_bound_claim *kvc_bound_claim_of(kvc_method m);

/** A trace held in memory. */
typedef struct kvc_oracle_trace {
    const float *q, *k, *v;
    size_t n, d, dv;
} kvc_oracle_trace;

/** Options of one measurement. */
typedef struct kvc_oracle_opts {
    const uint32_t *budgets; /**< tokens, each a valid budget for the method */
    size_t n_budgets;        /**< 1 .. 16 */
    uint32_t seeds;          /**< R >= 1 */
    uint64_t seed0;          /**< seeds are seed0 .. seed0 + R - 1 */
    size_t n_positions;      /**< P query positions, evenly spaced in [n/2, n-1] */
    uint32_t unbiased_seeds; /**< seeds for check (c) at the first budget (0 = skip) */
    void (*progress)(void *ctx, size_t done, size_t total);
    void *progress_ctx;
} kvc_oracle_opts;

/** Results for one budget. */
typedef struct kvc_oracle_row {
    uint32_t budget;
    uint32_t memory;  /**< tokens given to the method (budget - sink - window - 1; budget for sink-window) */
    size_t n_samples; /**< seeds * positions (errors[seed * positions + p]) */
    size_t seeds, positions;
    double *errors; /**< n_samples normalised errors (owned; kvc_oracle_rows_free) */
    double mean, p99, max;
} kvc_oracle_row;

/** Unbiasedness check (c) at the first budget and the last query position. */
typedef struct kvc_oracle_unbiased {
    uint32_t seeds;
    double max_abs_z_num; /**< largest |z| over the numerator's dv components */
    double z_den;         /**< z of the denominator */
    double z_limit;       /**< |z| above this fails (Bonferroni over dv + 1 tests at alpha = 1e-4) */
} kvc_oracle_unbiased;

/**
 * @brief Measure errors (and unbiasedness) of the method in @p base over budgets and seeds.
 * @param rows  n_budgets rows, filled (free with kvc_oracle_rows_free).
 * @return 0, or 1 after printing why (invalid budget, out of memory).
 */
int kvc_oracle_measure(const kvc_oracle_trace *tr, const kvc_stream_config *base, const kvc_oracle_opts *opts,
                       kvc_oracle_row *rows, kvc_oracle_unbiased *unb);
void kvc_oracle_rows_free(kvc_oracle_row *rows, size_t n);

/** Check (a): failures e > C m^exponent over all rows. */
typedef struct kvc_oracle_failure {
    size_t failures, samples;
    double rate, lo, hi; /**< two-sided Clopper-Pearson interval at conf */
    double conf;
} kvc_oracle_failure;
void kvc_oracle_failure_rate(const kvc_oracle_row *rows, size_t n, double C, double exponent, double conf,
                             kvc_oracle_failure *out);

/** The constant C making the (1 - q) quantile of e / m^exponent equal C
 *  over the rows (calibration). */
double kvc_oracle_calibrate(const kvc_oracle_row *rows, size_t n, double exponent, double q);

/** Check (b): least-squares slope of log(per-seed mean e) on log(memory),
 *  one point per (budget, seed), with a two-sided @p conf interval. 0 on success. */
int kvc_oracle_slope(const kvc_oracle_row *rows, size_t n, double conf, double *slope, double *lo, double *hi);

#ifdef __cplusplus
}
#endif
#endif
