/* Exact attention in MPFR. Scores are formed from the float inputs without
 * error (each float product has <= 48 significant bits and `prec` >= 113
 * holds their sums of up to 2^16 terms exactly unless the exponents spread
 * over more than prec - 64 bits), exponentials and sums carry `prec` bits, and
 * each output is rounded once to the nearest double. */
#include <mpfr.h>
#include <stdlib.h>

#include "kvc_oracle/kvc_oracle.h"

int kvc_oracle_attention_mp(const float *q, const float *K, const float *V, size_t n, size_t d, size_t dv, double beta,
                            unsigned prec, double *out, double *softmax_l2)
{
    if (n == 0 || d == 0 || dv == 0 || prec < 113 || !q || !K || !V || !out) return 1;
    mpfr_t acc, t, m, den, sq, b;
    mpfr_t *s = malloc(n * sizeof(mpfr_t));
    mpfr_t *num = malloc(dv * sizeof(mpfr_t));
    if (!s || !num) {
        free(s), free(num);
        return 1;
    }
    mpfr_inits2((mpfr_prec_t)prec, acc, t, m, den, sq, b, (mpfr_ptr)0);
    mpfr_set_d(b, beta, MPFR_RNDN); /* beta is a double: exact */
    for (size_t i = 0; i < n; i++) {
        mpfr_init2(s[i], (mpfr_prec_t)prec);
        mpfr_set_zero(acc, 1);
        for (size_t c = 0; c < d; c++) {
            mpfr_set_flt(t, q[c], MPFR_RNDN);
            mpfr_mul_d(t, t, (double)K[i * d + c], MPFR_RNDN); /* exact: 48 bits */
            mpfr_add(acc, acc, t, MPFR_RNDN);
        }
        mpfr_mul(s[i], acc, b, MPFR_RNDN);
        if (i == 0 || mpfr_greater_p(s[i], m)) mpfr_set(m, s[i], MPFR_RNDN);
    }
    for (size_t c = 0; c < dv; c++) {
        mpfr_init2(num[c], (mpfr_prec_t)prec);
        mpfr_set_zero(num[c], 1);
    }
    mpfr_set_zero(den, 1);
    mpfr_set_zero(sq, 1);
    for (size_t i = 0; i < n; i++) {
        mpfr_sub(t, s[i], m, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_add(den, den, t, MPFR_RNDN);
        mpfr_fma(sq, t, t, sq, MPFR_RNDN);
        for (size_t c = 0; c < dv; c++) {
            mpfr_mul_d(acc, t, (double)V[i * dv + c], MPFR_RNDN);
            mpfr_add(num[c], num[c], acc, MPFR_RNDN);
        }
    }
    for (size_t c = 0; c < dv; c++) {
        mpfr_div(t, num[c], den, MPFR_RNDN);
        out[c] = mpfr_get_d(t, MPFR_RNDN);
        mpfr_clear(num[c]);
    }
    if (softmax_l2) {
        mpfr_sqrt(t, sq, MPFR_RNDN);
        mpfr_div(t, t, den, MPFR_RNDN);
        *softmax_l2 = mpfr_get_d(t, MPFR_RNDN);
    }
    for (size_t i = 0; i < n; i++) mpfr_clear(s[i]);
    mpfr_clears(acc, t, m, den, sq, b, (mpfr_ptr)0);
    mpfr_free_cache();
    free(s), free(num);
    return 0;
}
