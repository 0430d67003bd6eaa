/* Reference row kernels on typed pointers (contracts: rows_typed.h, proved
 * by WP in the verify job wp_rows). The f32 sums perform exactly the
 * operations the methods performed on float arrays before storage types
 * existed; f16 and int8 use the same order over decoded elements (int8: the
 * row's scale multiplies the finished sum). */
#include <math.h>

#include "rows_typed.h"

void kvc_k_f32_copy__ref(float *r, const float *x, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, r[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) r[c] = x[c];
}

double kvc_k_f32_dot_f64__ref(const float *r, const double *x, size_t dim)
{
    double s = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, s;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) s += (double)r[c] * x[c];
    return s;
}

double kvc_k_f32_dot_rows__ref(const float *a, const float *b, const double *mu, size_t dim)
{
    double s = 0.0;
    if (mu != 0) {
        /*@ loop invariant 0 <= c <= dim;
            loop assigns c, s;
            loop variant dim - c;
        */
        for (size_t c = 0; c < dim; c++) s += ((double)a[c] - mu[c]) * ((double)b[c] - mu[c]);
    } else {
        /*@ loop invariant 0 <= c <= dim;
            loop assigns c, s;
            loop variant dim - c;
        */
        for (size_t c = 0; c < dim; c++) s += (double)a[c] * (double)b[c];
    }
    return s;
}

void kvc_k_f32_axpy__ref(double *acc, double p, const float *r, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc[c] += p * (double)r[c];
}

double kvc_k_f32_absmax__ref(const float *r, size_t dim)
{
    double m = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, m;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++)
        if (fabs((double)r[c]) > m) m = fabs((double)r[c]);
    return m;
}

/* ---- f16 ---- */

void kvc_k_f16_store__ref(uint16_t *r, const float *x, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, r[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) r[c] = kvc_f32_to_f16(x[c]);
    if (dim % 2 != 0) r[dim] = 0; /* the padding is part of the row: arenas stay deterministic */
}

void kvc_k_f16_load__ref(const uint16_t *r, float *x, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, x[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) x[c] = kvc_f16_to_f32(r[c]);
}

double kvc_k_f16_dot_f32__ref(const uint16_t *r, const float *x, size_t dim)
{
    double s = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, s;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) s += (double)x[c] * (double)kvc_f16_to_f32(r[c]);
    return s;
}

double kvc_k_f16_dot_f64__ref(const uint16_t *r, const double *x, size_t dim)
{
    double s = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, s;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) s += (double)kvc_f16_to_f32(r[c]) * x[c];
    return s;
}

double kvc_k_f16_dot_rows__ref(const uint16_t *a, const uint16_t *b, const double *mu, size_t dim)
{
    double s = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, s;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const double m = mu != 0 ? mu[c] : 0.0;
        s += ((double)kvc_f16_to_f32(a[c]) - m) * ((double)kvc_f16_to_f32(b[c]) - m);
    }
    return s;
}

double kvc_k_f16_sqdist_f32__ref(const uint16_t *r, const float *x, size_t dim)
{
    double s = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, s;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const double t = (double)kvc_f16_to_f32(r[c]) - (double)x[c];
        s += t * t;
    }
    return s;
}

void kvc_k_f16_axpy__ref(double *acc, double p, const uint16_t *r, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc[c] += p * (double)kvc_f16_to_f32(r[c]);
}

double kvc_k_f16_absmax__ref(const uint16_t *r, size_t dim)
{
    double m = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, m;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const double a = fabs((double)kvc_f16_to_f32(r[c]));
        if (a > m) m = a;
    }
    return m;
}

/* ---- int8 ---- */

float kvc_k_i8_quantise__ref(int8_t *q, const float *x, size_t dim)
{
    double amax = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, amax;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++)
        if (fabs((double)x[c]) > amax) amax = fabs((double)x[c]);
    const float scale = (float)(amax / 127.0);
    const double inv = scale > 0.0f ? 1.0 / (double)scale : 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, q[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        q[c] = (int8_t)kvc_round_clamp127((double)x[c] * inv);
    }
    const size_t padded = (dim + 3) / 4 * 4;
    //@ assert padded == (dim + 3) / 4 * 4 && dim <= padded <= 256;
    /*@ loop invariant dim <= c <= padded;
        loop assigns c, q[dim .. padded - 1];
        loop variant padded - c;
    */
    for (size_t c = dim; c < padded; c++) q[c] = 0;
    return scale;
}

void kvc_k_i8_load__ref(float s, const int8_t *q, float *x, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, x[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) x[c] = (float)((double)s * (double)q[c]);
}

double kvc_k_i8_dot_f32__ref(float s, const int8_t *q, const float *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)x[c] * (double)q[c];
    return acc * (double)s;
}

double kvc_k_i8_dot_f64__ref(float s, const int8_t *q, const double *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)q[c] * x[c];
    return acc * (double)s;
}

double kvc_k_i8_dot_rows__ref(float sa, const int8_t *qa, float sb, const int8_t *qb, const double *mu, size_t dim)
{
    double acc = 0.0;
    if (mu != 0) {
        /*@ loop invariant 0 <= c <= dim;
            loop assigns c, acc;
            loop variant dim - c;
        */
        for (size_t c = 0; c < dim; c++)
            acc += ((double)sa * (double)qa[c] - mu[c]) * ((double)sb * (double)qb[c] - mu[c]);
        return acc;
    }
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)qa[c] * (double)qb[c]; /* exact in double */
    return acc * (double)sa * (double)sb;
}

double kvc_k_i8_sqdist_f32__ref(float s, const int8_t *q, const float *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const double t = (double)s * (double)q[c] - (double)x[c];
        acc += t * t;
    }
    return acc;
}

void kvc_k_i8_axpy__ref(double *acc, double p, float s, const int8_t *q, size_t dim)
{
    const double ps = p * (double)s;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc[c] += ps * (double)q[c];
}

double kvc_k_i8_absmax__ref(float s, const int8_t *q, size_t dim)
{
    int m = 0;
    /*@ loop invariant 0 <= c <= dim;
        loop invariant 0 <= m <= 128;
        loop assigns c, m;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const int a = q[c] < 0 ? -(int)q[c] : (int)q[c];
        if (a > m) m = a;
    }
    return (double)m * (double)s;
}

/* ---- Q15: the int8 kernels with 16-bit codes. A float times an int16 has
   at most 24 + 15 significant bits, so every product below is exact in
   double, and so is a code-by-code product (30 bits); only the sums round. */

float kvc_k_q15_quantise__ref(int16_t *q, const float *x, size_t dim)
{
    double amax = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, amax;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++)
        if (fabs((double)x[c]) > amax) amax = fabs((double)x[c]);
    const float scale = (float)(amax / 32767.0);
    const double inv = scale > 0.0f ? 1.0 / (double)scale : 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, q[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        q[c] = (int16_t)kvc_round_clamp32767((double)x[c] * inv);
    }
    const size_t padded = (dim + 1) / 2 * 2;
    //@ assert padded == (dim + 1) / 2 * 2 && dim <= padded <= 256;
    /*@ loop invariant dim <= c <= padded;
        loop assigns c, q[dim .. padded - 1];
        loop variant padded - c;
    */
    for (size_t c = dim; c < padded; c++) q[c] = 0;
    return scale;
}

void kvc_k_q15_load__ref(float s, const int16_t *q, float *x, size_t dim)
{
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, x[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) x[c] = (float)((double)s * (double)q[c]);
}

double kvc_k_q15_dot_f32__ref(float s, const int16_t *q, const float *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)x[c] * (double)q[c];
    return acc * (double)s;
}

double kvc_k_q15_dot_f64__ref(float s, const int16_t *q, const double *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)q[c] * x[c];
    return acc * (double)s;
}

double kvc_k_q15_dot_rows__ref(float sa, const int16_t *qa, float sb, const int16_t *qb, const double *mu, size_t dim)
{
    double acc = 0.0;
    if (mu != 0) {
        /*@ loop invariant 0 <= c <= dim;
            loop assigns c, acc;
            loop variant dim - c;
        */
        for (size_t c = 0; c < dim; c++)
            acc += ((double)sa * (double)qa[c] - mu[c]) * ((double)sb * (double)qb[c] - mu[c]);
        return acc;
    }
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc += (double)qa[c] * (double)qb[c]; /* exact: 256 x 2^30 < 2^53 */
    return acc * (double)sa * (double)sb;
}

double kvc_k_q15_sqdist_f32__ref(float s, const int16_t *q, const float *x, size_t dim)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const double t = (double)s * (double)q[c] - (double)x[c];
        acc += t * t;
    }
    return acc;
}

void kvc_k_q15_axpy__ref(double *acc, double p, float s, const int16_t *q, size_t dim)
{
    const double ps = p * (double)s;
    /*@ loop invariant 0 <= c <= dim;
        loop assigns c, acc[0 .. dim - 1];
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) acc[c] += ps * (double)q[c];
}

double kvc_k_q15_absmax__ref(float s, const int16_t *q, size_t dim)
{
    int m = 0;
    /*@ loop invariant 0 <= c <= dim;
        loop invariant 0 <= m <= 32768;
        loop assigns c, m;
        loop variant dim - c;
    */
    for (size_t c = 0; c < dim; c++) {
        const int a = q[c] < 0 ? -(int)q[c] : (int)q[c];
        if (a > m) m = a;
    }
    return (double)m * (double)s;
}
