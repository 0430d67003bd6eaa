#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_oracle/kvc_oracle.h"

void kvc_exact_attention_f64(const float *q, const float *K, const float *V, size_t n, size_t d,
                             size_t dv, double beta, double *out, kvc_exact_result *res)
{
    double m = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        const float *k = K + i * d;
        for (size_t c = 0; c < d; c++) s += (double)q[c] * (double)k[c];
        s *= beta;
        if (s > m) m = s;
    }
    double den = 0.0, sq = 0.0;
    for (size_t c = 0; c < dv; c++) out[c] = 0.0;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        const float *k = K + i * d;
        for (size_t c = 0; c < d; c++) s += (double)q[c] * (double)k[c];
        const double p = exp(beta * s - m);
        den += p;
        sq += p * p;
        const float *v = V + i * dv;
        for (size_t c = 0; c < dv; c++) out[c] += p * (double)v[c];
    }
    for (size_t c = 0; c < dv; c++) out[c] /= den;
    if (res) res->softmax_l2 = sqrt(sq) / den;
}

double kvc_sym_max_eig(const double *G, size_t dv)
{
    double *a = malloc(dv * dv * sizeof(double));
    double *w = malloc(dv * sizeof(double));
    double *z = malloc(dv * sizeof(double));
    lapack_int *isuppz = malloc(2 * dv * sizeof(lapack_int));
    double result = -1.0;
    if (a && w && z && isuppz) {
        memcpy(a, G, dv * dv * sizeof(double));
        lapack_int found = 0;
        lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'N', 'I', 'U', (lapack_int)dv, a,
                                         (lapack_int)dv, 0.0, 0.0, (lapack_int)dv, (lapack_int)dv,
                                         0.0, &found, w, z, 1, isuppz);
        if (info == 0 && found == 1) result = w[0];
    }
    free(a);
    free(w);
    free(z);
    free(isuppz);
    return result;
}
