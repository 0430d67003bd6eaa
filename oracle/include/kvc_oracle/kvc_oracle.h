/**
 * @file kvc_oracle.h
 * @brief Host-only reference computations used to judge the methods: exact
 *        attention in double over a prefix, and the matrix norms of the
 *        papers' error bounds (operator norm through LAPACKE).
 */
#ifndef KVC_ORACLE_H
#define KVC_ORACLE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Exact attention of one query over keys/values 0..n-1, in double. */
typedef struct kvc_exact_result {
    double softmax_l2; /**< ||softmax(beta K q)||_2 */
} kvc_exact_result;

/**
 * @brief out[c] = sum_i p_i v_i[c] with p = softmax(beta K q), two-pass in double.
 * @param n >= 1.  @param out dv doubles.
 */
void kvc_exact_attention_f64(const float *q, const float *K, const float *V, size_t n, size_t d, size_t dv, double beta,
                             double *out, kvc_exact_result *res);

/**
 * @brief Exact attention in MPFR with @p prec bits (>= 113), each output
 *        component correctly rounded to double from the @p prec-bit value.
 * @param beta score scale, used exactly as given.
 * @param[out] softmax_l2 ||softmax(beta K q)||_2 (may be NULL).
 * @return 0, or 1 for invalid arguments / out of memory.
 */
int kvc_oracle_attention_mp(const float *q, const float *K, const float *V, size_t n, size_t d, size_t dv, double beta,
                            unsigned prec, double *out, double *softmax_l2);

/**
 * @brief Largest eigenvalue of a symmetric dv x dv matrix G (row-major), i.e.
 *        ||V||_op^2 when G = V^T V. Uses LAPACKE_dsyevr; G is not modified.
 * @return the eigenvalue, or a negative number when LAPACKE fails.
 */
double kvc_sym_max_eig(const double *G, size_t dv);

#ifdef __cplusplus
}
#endif
#endif
