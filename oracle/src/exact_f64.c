#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_oracle/kvc_oracle.h"

void kvc_exact_attention_f64(const float *q, const float *K, const float *V, size_t n, size_t d, size_t dv, double beta,
                             double *out, kvc_exact_result *res)
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
