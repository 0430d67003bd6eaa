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

/* ---- int8 (q padded to a multiple of 4 codes) and Q15 (int16 codes padded
   to an even count): one f32 scale per row, the kernels of rows_scaled.h ---- */
#define KVC_SC_BODIES
#include "rows_scaled_types.h"
