/* The reference row kernels on typed pointers, with the ACSL contracts WP
 * proves (verify/, job wp_rows): every read and write inside the row and the
 * vector, nothing else assigned. rows_ref.c wraps them into the table's
 * `void *row` entries (an int8 row is [f32 scale][dim int8][padding]).
 * dim is a head dimension: 1 .. KVC_MAX_HEAD_DIM (256). */
#ifndef KVC_ROWS_TYPED_H
#define KVC_ROWS_TYPED_H

#include <stddef.h>
#include <stdint.h>

/* ---- f32 ---- */

/*@ requires 1 <= dim <= 256;
    requires \valid(r + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    requires \separated(r + (0 .. dim - 1), x + (0 .. dim - 1));
    assigns r[0 .. dim - 1];
*/
void kvc_k_f32_copy__ref(float *r, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f32_dot_f64__ref(const float *r, const double *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(a + (0 .. dim - 1)) && \valid_read(b + (0 .. dim - 1));
    requires mu == \null || \valid_read(mu + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f32_dot_rows__ref(const float *a, const float *b, const double *mu, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid(acc + (0 .. dim - 1)) && \valid_read(r + (0 .. dim - 1));
    requires \separated(acc + (0 .. dim - 1), r + (0 .. dim - 1));
    assigns acc[0 .. dim - 1];
*/
void kvc_k_f32_axpy__ref(double *acc, double p, const float *r, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f32_absmax__ref(const float *r, size_t dim);

/* ---- f16 (binary16 bits); the conversions are trusted like the libm
   wrappers (bit casts WP does not model) ---- */

/* trusted-by: tests/unit/test_dtype.c (round trip, extremes, subnormals) */
/*@ assigns \nothing; */
uint16_t kvc_f32_to_f16(float f);

/* trusted-by: tests/unit/test_dtype.c (round trip, extremes, subnormals) */
/*@ assigns \nothing; */
float kvc_f16_to_f32(uint16_t h);

/*@ requires 1 <= dim <= 256;
    requires \valid(r + (0 .. dim + dim % 2 - 1)) && \valid_read(x + (0 .. dim - 1));
    requires \separated(r + (0 .. dim + dim % 2 - 1), x + (0 .. dim - 1));
    assigns r[0 .. dim + dim % 2 - 1];
*/
void kvc_k_f16_store__ref(uint16_t *r, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1)) && \valid(x + (0 .. dim - 1));
    requires \separated(r + (0 .. dim - 1), x + (0 .. dim - 1));
    assigns x[0 .. dim - 1];
*/
void kvc_k_f16_load__ref(const uint16_t *r, float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f16_dot_f32__ref(const uint16_t *r, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f16_dot_f64__ref(const uint16_t *r, const double *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(a + (0 .. dim - 1)) && \valid_read(b + (0 .. dim - 1));
    requires mu == \null || \valid_read(mu + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f16_dot_rows__ref(const uint16_t *a, const uint16_t *b, const double *mu, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1)) && \valid_read(x + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f16_sqdist_f32__ref(const uint16_t *r, const float *x, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid(acc + (0 .. dim - 1)) && \valid_read(r + (0 .. dim - 1));
    requires \separated(acc + (0 .. dim - 1), r + (0 .. dim - 1));
    assigns acc[0 .. dim - 1];
*/
void kvc_k_f16_axpy__ref(double *acc, double p, const uint16_t *r, size_t dim);

/*@ requires 1 <= dim <= 256;
    requires \valid_read(r + (0 .. dim - 1));
    assigns \nothing;
*/
double kvc_k_f16_absmax__ref(const uint16_t *r, size_t dim);

/* t rounded half away from zero and clamped to [-127, 127] (trusted like the
   f16 conversions: float-to-int rounding is beyond the provers).
   trusted-by: tests/unit/test_dtype.c */
/*@ assigns \nothing;
    ensures -127 <= \result <= 127;
*/
int kvc_round_clamp127(double t);

/* t rounded half away from zero and clamped to [-32767, 32767] (trusted,
   like kvc_round_clamp127).
   trusted-by: tests/unit/test_dtype.c */
/*@ assigns \nothing;
    ensures -32767 <= \result <= 32767;
*/
int kvc_round_clamp32767(double t);

/* ---- int8 (q padded to a multiple of 4 codes) and Q15 (int16 codes padded
   to an even count): one f32 scale per row, the kernels of rows_scaled.h ---- */
#include "rows_scaled_types.h"

#endif
