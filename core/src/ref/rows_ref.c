/* Reference row kernels for every implemented storage type (f32, f16, int8).
 * A row is one cached key or value. Reductions accumulate in double, in
 * index order; the f32 kernels perform exactly the operations the methods
 * performed on float arrays before storage types existed, so f32 results are
 * bit-identical to them. The int8 kernels factor the row's scale out of the
 * sum (scale * sum q_c x_c), the order a SIMD backend uses too. */
#include <math.h>
#include <string.h>

#include "kvc/kvc_kernels.h"
#include "rows_ref.h"

/* ---- f16 <-> f32, IEEE binary16, round to nearest even ---- */

/* Largest finite half: stored values saturate there (a cache of finite
   inputs never holds an infinity). */
#define KVC_F16_MAX_BITS 0x7BFFu

uint16_t kvc_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t e = (x >> 23) & 0xFFu;
    uint32_t m = x & 0x7FFFFFu;
    if (e == 0xFFu) return (uint16_t)(sign | (m ? 0x7E00u : KVC_F16_MAX_BITS)); /* NaN stays NaN */
    const int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31) return (uint16_t)(sign | KVC_F16_MAX_BITS);
    if (he <= 0) { /* half subnormal (or zero): value = hm * 2^-24 */
        if (he < -10) return sign;
        m |= 0x800000u;
        const uint32_t shift = (uint32_t)(14 - he);
        uint32_t hm = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = ((uint32_t)he << 10) | (m >> 13);
    const uint32_t rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
    if (h > KVC_F16_MAX_BITS) h = KVC_F16_MAX_BITS;
    return (uint16_t)(sign | h);
}

float kvc_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t x;
    if (e == 0) {
        const float f = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return sign ? -f : f;
    }
    if (e == 31) x = sign | 0x7F800000u | (m << 13);
    else x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* ---- f32 ---- */

static void f32_store(void *row, const float *x, size_t dim) { memcpy(row, x, dim * sizeof(float)); }
static void f32_load(const void *row, float *x, size_t dim) { memcpy(x, row, dim * sizeof(float)); }

static double f32_dot_f32(const void *row, const float *x, size_t dim)
{
    const float *r = (const float *)row;
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) s += (double)x[c] * (double)r[c];
    return s;
}

static double f32_dot_f64(const void *row, const double *x, size_t dim)
{
    const float *r = (const float *)row;
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) s += (double)r[c] * x[c];
    return s;
}

static double f32_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    const float *x = (const float *)a, *y = (const float *)b;
    double s = 0.0;
    if (mu != NULL) {
        for (size_t c = 0; c < dim; c++) s += ((double)x[c] - mu[c]) * ((double)y[c] - mu[c]);
    } else {
        for (size_t c = 0; c < dim; c++) s += (double)x[c] * (double)y[c];
    }
    return s;
}

static double f32_sqdist_f32(const void *row, const float *x, size_t dim)
{
    const float *r = (const float *)row;
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) {
        const double t = (double)r[c] - (double)x[c];
        s += t * t;
    }
    return s;
}

static void f32_axpy(double *acc, double p, const void *row, size_t dim)
{
    const float *r = (const float *)row;
    for (size_t c = 0; c < dim; c++) acc[c] += p * (double)r[c];
}

static double f32_absmax(const void *row, size_t dim)
{
    const float *r = (const float *)row;
    double m = 0.0;
    for (size_t c = 0; c < dim; c++)
        if (fabs((double)r[c]) > m) m = fabs((double)r[c]);
    return m;
}

/* ---- f16: the same sums over the decoded elements ---- */

static void f16_store(void *row, const float *x, size_t dim)
{
    uint16_t *r = (uint16_t *)row;
    for (size_t c = 0; c < dim; c++) r[c] = kvc_f32_to_f16(x[c]);
    if (dim & 1u) r[dim] = 0; /* the padding is part of the row: keep arenas deterministic */
}

static void f16_load(const void *row, float *x, size_t dim)
{
    const uint16_t *r = (const uint16_t *)row;
    for (size_t c = 0; c < dim; c++) x[c] = kvc_f16_to_f32(r[c]);
}

#define F16(r, c) ((double)kvc_f16_to_f32(((const uint16_t *)(r))[c]))

static double f16_dot_f32(const void *row, const float *x, size_t dim)
{
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) s += (double)x[c] * F16(row, c);
    return s;
}

static double f16_dot_f64(const void *row, const double *x, size_t dim)
{
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) s += F16(row, c) * x[c];
    return s;
}

static double f16_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) {
        const double m = mu ? mu[c] : 0.0;
        s += (F16(a, c) - m) * (F16(b, c) - m);
    }
    return s;
}

static double f16_sqdist_f32(const void *row, const float *x, size_t dim)
{
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) {
        const double t = F16(row, c) - (double)x[c];
        s += t * t;
    }
    return s;
}

static void f16_axpy(double *acc, double p, const void *row, size_t dim)
{
    for (size_t c = 0; c < dim; c++) acc[c] += p * F16(row, c);
}

static double f16_absmax(const void *row, size_t dim)
{
    double m = 0.0;
    for (size_t c = 0; c < dim; c++)
        if (fabs(F16(row, c)) > m) m = fabs(F16(row, c));
    return m;
}

/* ---- int8 with one f32 scale per row: [scale][q_0 .. q_dim-1][pad] ---- */

static float i8_scale(const void *row)
{
    float s;
    memcpy(&s, row, sizeof s);
    return s;
}

static const int8_t *i8_q(const void *row) { return (const int8_t *)row + sizeof(float); }

static void i8_store(void *row, const float *x, size_t dim)
{
    double amax = 0.0;
    for (size_t c = 0; c < dim; c++)
        if (fabs((double)x[c]) > amax) amax = fabs((double)x[c]);
    const float scale = (float)(amax / 127.0);
    int8_t *q = (int8_t *)row + sizeof(float);
    memcpy(row, &scale, sizeof scale);
    const double inv = scale > 0.0f ? 1.0 / (double)scale : 0.0;
    for (size_t c = 0; c < dim; c++) {
        double t = (double)x[c] * inv;
        t = t >= 0.0 ? floor(t + 0.5) : -floor(-t + 0.5); /* round half away from zero */
        if (t > 127.0) t = 127.0;
        if (t < -127.0) t = -127.0;
        q[c] = (int8_t)t;
    }
    for (size_t c = dim; c < ((dim + 3u) & ~(size_t)3u); c++) q[c] = 0;
}

static void i8_load(const void *row, float *x, size_t dim)
{
    const double s = (double)i8_scale(row);
    const int8_t *q = i8_q(row);
    for (size_t c = 0; c < dim; c++) x[c] = (float)(s * (double)q[c]);
}

static double i8_dot_f32(const void *row, const float *x, size_t dim)
{
    const int8_t *q = i8_q(row);
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) s += (double)x[c] * (double)q[c];
    return s * (double)i8_scale(row);
}

static double i8_dot_f64(const void *row, const double *x, size_t dim)
{
    const int8_t *q = i8_q(row);
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) s += (double)q[c] * x[c];
    return s * (double)i8_scale(row);
}

static double i8_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    const int8_t *qa = i8_q(a), *qb = i8_q(b);
    const double sa = (double)i8_scale(a), sb = (double)i8_scale(b);
    double s = 0.0;
    if (mu != NULL) {
        for (size_t c = 0; c < dim; c++) s += (sa * qa[c] - mu[c]) * (sb * qb[c] - mu[c]);
        return s;
    }
    for (size_t c = 0; c < dim; c++) s += (double)qa[c] * (double)qb[c]; /* exact in double */
    return s * sa * sb;
}

static double i8_sqdist_f32(const void *row, const float *x, size_t dim)
{
    const int8_t *q = i8_q(row);
    const double sc = (double)i8_scale(row);
    double s = 0.0;
    for (size_t c = 0; c < dim; c++) {
        const double t = sc * (double)q[c] - (double)x[c];
        s += t * t;
    }
    return s;
}

static void i8_axpy(double *acc, double p, const void *row, size_t dim)
{
    const int8_t *q = i8_q(row);
    const double ps = p * (double)i8_scale(row);
    for (size_t c = 0; c < dim; c++) acc[c] += ps * (double)q[c];
}

static double i8_absmax(const void *row, size_t dim)
{
    const int8_t *q = i8_q(row);
    int m = 0;
    for (size_t c = 0; c < dim; c++) {
        const int a = q[c] < 0 ? -q[c] : q[c];
        if (a > m) m = a;
    }
    return (double)m * (double)i8_scale(row);
}

/* The reference table (kernels.c lists it first among the built-in ones). */
const kvc_kernels kvc_kernels_ref_table = {
    KVC_KERNELS_VERSION,
    KVC_CAP_F32 | KVC_CAP_F16 | KVC_CAP_I8 | KVC_CAP_BATCH | KVC_CAP_MASS,
    0u,
    "ref",
    kvc_k_attend_f32__ref,
    kvc_k_attend_batch__ref,
    {
        [KVC_DTYPE_F32] = {f32_store, f32_load, f32_dot_f32, f32_dot_f64, f32_dot_rows, f32_sqdist_f32, f32_axpy,
                           f32_absmax},
        [KVC_DTYPE_F16] = {f16_store, f16_load, f16_dot_f32, f16_dot_f64, f16_dot_rows, f16_sqdist_f32, f16_axpy,
                           f16_absmax},
        [KVC_DTYPE_I8] = {i8_store, i8_load, i8_dot_f32, i8_dot_f64, i8_dot_rows, i8_sqdist_f32, i8_axpy, i8_absmax},
    },
    kvc_k_dot_f32__ref,
    kvc_k_sqdist_f32__ref,
};
