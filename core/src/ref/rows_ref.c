/* The table's row kernels: thin wrappers that give each typed reference
 * kernel (rows_typed.c, proved by WP) its `void *row` entry. An int8 row is
 * [f32 scale][dim int8][zeros to a multiple of 4], a Q15 row the same with
 * int16 codes. */
#include <string.h>

#include "kvc/kvc_kernels.h"
#include "rows_ref.h"
#include "rows_typed.h"
#include "internal/kvc_internal.h"

/* ---- f32 ---- */
static void f32_store(void *row, const float *x, size_t dim) { kvc_k_f32_copy__ref((float *)row, x, dim); }
static void f32_load(const void *row, float *x, size_t dim) { kvc_k_f32_copy__ref(x, (const float *)row, dim); }
static double f32_dot_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_dot_f32__ref(x, (const float *)row, dim);
}
static double f32_dot_f64(const void *row, const double *x, size_t dim)
{
    return kvc_k_f32_dot_f64__ref((const float *)row, x, dim);
}
static double f32_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    return kvc_k_f32_dot_rows__ref((const float *)a, (const float *)b, mu, dim);
}
static double f32_sqdist_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_sqdist_f32__ref((const float *)row, x, dim);
}
static void f32_axpy(double *acc, double p, const void *row, size_t dim)
{
    kvc_k_f32_axpy__ref(acc, p, (const float *)row, dim);
}
static double f32_absmax(const void *row, size_t dim) { return kvc_k_f32_absmax__ref((const float *)row, dim); }

/* ---- f16 ---- */
#define H(r) ((const uint16_t *)(r))
static void f16_store(void *row, const float *x, size_t dim) { kvc_k_f16_store__ref((uint16_t *)row, x, dim); }
static void f16_load(const void *row, float *x, size_t dim) { kvc_k_f16_load__ref(H(row), x, dim); }
static double f16_dot_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_f16_dot_f32__ref(H(row), x, dim);
}
static double f16_dot_f64(const void *row, const double *x, size_t dim)
{
    return kvc_k_f16_dot_f64__ref(H(row), x, dim);
}
static double f16_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    return kvc_k_f16_dot_rows__ref(H(a), H(b), mu, dim);
}
static double f16_sqdist_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_f16_sqdist_f32__ref(H(row), x, dim);
}
static void f16_axpy(double *acc, double p, const void *row, size_t dim) { kvc_k_f16_axpy__ref(acc, p, H(row), dim); }
static double f16_absmax(const void *row, size_t dim) { return kvc_k_f16_absmax__ref(H(row), dim); }

/* ---- int8 ---- */
static float i8_scale(const void *row)
{
    float s;
    memcpy(&s, row, sizeof s);
    return s;
}
#define Q(r) ((const int8_t *)(r) + sizeof(float))
static void i8_store(void *row, const float *x, size_t dim)
{
    const float s = kvc_k_i8_quantise__ref((int8_t *)row + sizeof(float), x, dim);
    memcpy(row, &s, sizeof s);
}
static void i8_load(const void *row, float *x, size_t dim) { kvc_k_i8_load__ref(i8_scale(row), Q(row), x, dim); }
static double i8_dot_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_i8_dot_f32__ref(i8_scale(row), Q(row), x, dim);
}
static double i8_dot_f64(const void *row, const double *x, size_t dim)
{
    return kvc_k_i8_dot_f64__ref(i8_scale(row), Q(row), x, dim);
}
static double i8_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    return kvc_k_i8_dot_rows__ref(i8_scale(a), Q(a), i8_scale(b), Q(b), mu, dim);
}
static double i8_sqdist_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_i8_sqdist_f32__ref(i8_scale(row), Q(row), x, dim);
}
static void i8_axpy(double *acc, double p, const void *row, size_t dim)
{
    kvc_k_i8_axpy__ref(acc, p, i8_scale(row), Q(row), dim);
}
static double i8_absmax(const void *row, size_t dim) { return kvc_k_i8_absmax__ref(i8_scale(row), Q(row), dim); }

/* ---- Q15: [f32 scale][dim int16][zeros to a multiple of 4 bytes] ---- */
#define Q16(r) ((const int16_t *)((const unsigned char *)(r) + sizeof(float)))
static void q15_store(void *row, const float *x, size_t dim)
{
    const float s = kvc_k_q15_quantise__ref((int16_t *)((unsigned char *)row + sizeof(float)), x, dim);
    memcpy(row, &s, sizeof s);
}
static void q15_load(const void *row, float *x, size_t dim) { kvc_k_q15_load__ref(i8_scale(row), Q16(row), x, dim); }
static double q15_dot_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_q15_dot_f32__ref(i8_scale(row), Q16(row), x, dim);
}
static double q15_dot_f64(const void *row, const double *x, size_t dim)
{
    return kvc_k_q15_dot_f64__ref(i8_scale(row), Q16(row), x, dim);
}
static double q15_dot_rows(const void *a, const void *b, const double *mu, size_t dim)
{
    return kvc_k_q15_dot_rows__ref(i8_scale(a), Q16(a), i8_scale(b), Q16(b), mu, dim);
}
static double q15_sqdist_f32(const void *row, const float *x, size_t dim)
{
    return kvc_k_q15_sqdist_f32__ref(i8_scale(row), Q16(row), x, dim);
}
static void q15_axpy(double *acc, double p, const void *row, size_t dim)
{
    kvc_k_q15_axpy__ref(acc, p, i8_scale(row), Q16(row), dim);
}
static double q15_absmax(const void *row, size_t dim) { return kvc_k_q15_absmax__ref(i8_scale(row), Q16(row), dim); }

/* Every storage type's reference row kernels: both tables below use them. */
#define KVC_REF_ROWS                                                                                                   \
    {                                                                                                                  \
        [KVC_DTYPE_F32] = {f32_store,    f32_load,       f32_dot_f32, f32_dot_f64,                                     \
                           f32_dot_rows, f32_sqdist_f32, f32_axpy,    f32_absmax},                                     \
        [KVC_DTYPE_F16] = {f16_store,    f16_load,       f16_dot_f32, f16_dot_f64,                                     \
                           f16_dot_rows, f16_sqdist_f32, f16_axpy,    f16_absmax},                                     \
        [KVC_DTYPE_I8] = {i8_store, i8_load, i8_dot_f32, i8_dot_f64, i8_dot_rows, i8_sqdist_f32, i8_axpy, i8_absmax},  \
        [KVC_DTYPE_Q15] = {q15_store,    q15_load,       q15_dot_f32, q15_dot_f64,                                     \
                           q15_dot_rows, q15_sqdist_f32, q15_axpy,    q15_absmax},                                     \
        [KVC_DTYPE_I4] = {kvc_k_i4_store__ref,   kvc_k_i4_load__ref,     kvc_k_i4_dot_f32__ref,                        \
                          kvc_k_i4_dot_f64__ref, kvc_k_i4_dot_rows__ref, kvc_k_i4_sqdist_f32__ref,                     \
                          kvc_k_i4_axpy__ref,    kvc_k_i4_absmax__ref},                                                \
    }

/* The reference table (kernels.c lists it first among the built-in ones). */
const kvc_kernels kvc_kernels_ref_table = {
    KVC_KERNELS_VERSION,
    KVC_CAP_F32 | KVC_CAP_F16 | KVC_CAP_I8 | KVC_CAP_Q15 | KVC_CAP_I4 | KVC_CAP_KIVI4 | KVC_CAP_BATCH | KVC_CAP_MASS,
    0u,
    "ref",
    kvc_k_attend_f32__ref,
    kvc_k_attend_batch__ref,
    KVC_REF_ROWS,
    kvc_k_dot_f32__ref,
    kvc_k_sqdist_f32__ref,
};

/* The single-precision table: the same rows, the float attend (attend_single.c). */
const kvc_kernels kvc_kernels_single_table = {
    KVC_KERNELS_VERSION,
    KVC_CAP_F32 | KVC_CAP_F16 | KVC_CAP_I8 | KVC_CAP_Q15 | KVC_CAP_I4 | KVC_CAP_KIVI4 | KVC_CAP_BATCH | KVC_CAP_MASS |
        KVC_CAP_OPT_IN,
    0u,
    "single",
    kvc_k_attend_f32__single,
    kvc_k_attend_batch__single,
    KVC_REF_ROWS,
    kvc_k_dot_f32__ref,
    kvc_k_sqdist_f32__ref,
};
