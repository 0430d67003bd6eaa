/**
 * @file kvc_suite.h
 * @brief The bound-check suite: for each method with a claim, declare its
 *        constant on a calibration stream, then test the claim on a fresh
 *        stream built to satisfy the theorem's assumptions.
 *
 * Streams ("bounded clustered"): n tokens in d dimensions; keys are one of
 * `clusters` centres (norm 2) plus noise of norm ~ `key_noise` (so the keys are
 * (clusters, 2*key_noise)-clusterable, SubGen's Definition 1); queries have
 * norm <= 2 (SubGen's r); values are a common mean (norm 1) plus unit Gaussian
 * noise, clipped to norm <= 4 (bounded norms, BalanceKV/Express assumptions).
 */
#ifndef KVC_ORACLE_SUITE_H
#define KVC_ORACLE_SUITE_H

#include <stdio.h>

#include "kvc_bounds.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An owned synthetic trace. */
typedef struct kvc_suite_stream {
    kvc_oracle_trace tr;
    float *buf;
} kvc_suite_stream;

/** Build a bounded clustered stream (see file comment). 0 on success. */
int kvc_suite_stream_make(kvc_suite_stream *s, size_t n, size_t d, size_t clusters, double key_noise, uint64_t seed);
void kvc_suite_stream_free(kvc_suite_stream *s);

/** One method's row of the bound-check table. */
typedef struct kvc_suite_result {
    kvc_method method;
    const kvc_bound_claim *claim;
    double C;                   /**< declared constant (calibrated) */
    double calib_quantile;      /**< C is this quantile of e / m^exponent on the calibration stream */
    kvc_oracle_failure failure; /**< on the fresh stream */
    double slope, slope_lo, slope_hi, slope_tol;
    kvc_oracle_unbiased unbiased;
    double mean_err_first, mean_err_last; /**< mean e at the smallest / largest budget */
    uint32_t memory_first, memory_last;   /**< their method memory (tokens) */
    int pass_failure, pass_slope, pass_unbiased;
    int slope_met; /**< the slope check held (even where it is only reported) */
} kvc_suite_result;

/** Suite settings (defaults from kvc_suite_defaults). */
typedef struct kvc_suite_settings {
    size_t n, d, clusters, positions;
    double key_noise;
    uint32_t budgets[8];
    size_t n_budgets;
    uint32_t seeds, unbiased_seeds;
    uint32_t n_sink, n_window;
    uint64_t calib_stream_seed, test_stream_seed;
    double conf;      /**< two-sided confidence of every interval */
    double slope_tol; /**< the slope may be this much shallower than predicted */
} kvc_suite_settings;

kvc_suite_settings kvc_suite_defaults(void);

/** Run the suite for one method; prints progress to @p log when not NULL. 0 on success. */
int kvc_suite_run(kvc_method m, const kvc_suite_settings *s, FILE *log, kvc_suite_result *out);

/** Print the table header / one row (Markdown), and the CSV equivalents. */
void kvc_suite_print_header(FILE *f);
void kvc_suite_print_row(FILE *f, const kvc_suite_result *r);
void kvc_suite_csv_header(FILE *f);
void kvc_suite_csv_row(FILE *f, const kvc_suite_result *r);

#ifdef __cplusplus
}
#endif
#endif
