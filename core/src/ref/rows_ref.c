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

/* A row-kernel table of the functions <p>_store, <p>_load, ... */
#define KVC_REF_ROW_KERNELS(p)                                                                                         \
    {                                                                                                                  \
        .store = p##_store, .load = p##_load, .dot_f32 = p##_dot_f32, .dot_f64 = p##_dot_f64,                          \
        .dot_rows = p##_dot_rows, .sqdist_f32 = p##_sqdist_f32, .axpy = p##_axpy, .absmax = p##_absmax                 \
    }

/* Every storage type's reference row kernels: both tables below use them
 * (KIVI4's values are int4 rows; its key blocks are read by the attend). */
#define KVC_REF_ROWS                                                                                                   \
    {                                                                                                                  \
        [KVC_DTYPE_F32] = KVC_REF_ROW_KERNELS(f32), [KVC_DTYPE_F16] = KVC_REF_ROW_KERNELS(f16),                        \
        [KVC_DTYPE_I8] = KVC_REF_ROW_KERNELS(i8), [KVC_DTYPE_Q15] = KVC_REF_ROW_KERNELS(q15),                          \
        [KVC_DTYPE_I4] = {.store = kvc_k_i4_store__ref,                                                                \
                          .load = kvc_k_i4_load__ref,                                                                  \
                          .dot_f32 = kvc_k_i4_dot_f32__ref,                                                            \
                          .dot_f64 = kvc_k_i4_dot_f64__ref,                                                            \
                          .dot_rows = kvc_k_i4_dot_rows__ref,                                                          \
                          .sqdist_f32 = kvc_k_i4_sqdist_f32__ref,                                                      \
                          .axpy = kvc_k_i4_axpy__ref,                                                                  \
                          .absmax = kvc_k_i4_absmax__ref},                                                             \
    }

/* The reference table (kernels.c lists it first among the built-in ones):
 * every implemented storage type (KVC_CAP_TYPES, from kvc_dtype_list.h). */
const kvc_kernels kvc_kernels_ref_table = {
    .version = KVC_KERNELS_VERSION,
    .caps = KVC_CAP_TYPES | KVC_CAP_BATCH | KVC_CAP_MASS,
    .name = "ref",
    .attend_f32 = kvc_k_attend_f32__ref,
    .attend_batch = kvc_k_attend_batch__ref,
    .rows = KVC_REF_ROWS,
    .dot_f32 = kvc_k_dot_f32__ref,
    .sqdist_f32 = kvc_k_sqdist_f32__ref,
};

/* The single-precision table: the same rows, the float attend (attend_single.c). */
const kvc_kernels kvc_kernels_single_table = {
    .version = KVC_KERNELS_VERSION,
    .caps = KVC_CAP_TYPES | KVC_CAP_BATCH | KVC_CAP_MASS | KVC_CAP_OPT_IN,
    .name = "single",
    .attend_f32 = kvc_k_attend_f32__single,
    .attend_batch = kvc_k_attend_batch__single,
    .rows = KVC_REF_ROWS,
    .dot_f32 = kvc_k_dot_f32__ref,
    .sqdist_f32 = kvc_k_sqdist_f32__ref,
};
