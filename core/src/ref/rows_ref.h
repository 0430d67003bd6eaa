/* The reference row kernels (rows_ref.c) and the f16 conversions, internal. */
#ifndef KVC_ROWS_REF_H
#define KVC_ROWS_REF_H

#include "kvc/kvc_kernels.h"

extern const kvc_kernels kvc_kernels_ref_table;
extern const kvc_kernels kvc_kernels_single_table;

/* IEEE binary16 round-to-nearest-even (finite inputs saturate at +-65504): rows_typed.h */
#include "rows_typed.h"

/* int4 rows (rows_int4.c): groups of 32 along the row */
#define KVC_I4_MAX_GROUPS ((KVC_MAX_HEAD_DIM + 31u) / 32u)
void kvc_k_i4_store__ref(void *row, const float *x, size_t dim);
void kvc_k_i4_load__ref(const void *row, float *x, size_t dim);
double kvc_k_i4_dot_f32__ref(const void *row, const float *x, size_t dim);
double kvc_k_i4_dot_f64__ref(const void *row, const double *x, size_t dim);
double kvc_k_i4_dot_rows__ref(const void *a, const void *b, const double *mu, size_t dim);
double kvc_k_i4_sqdist_f32__ref(const void *row, const float *x, size_t dim);
void kvc_k_i4_axpy__ref(double *acc, double p, const void *row, size_t dim);
double kvc_k_i4_absmax__ref(const void *row, size_t dim);

/* KIVI4 key blocks (rows_kivi.c): token i's score dot in the reference's
   order (the doubles min + q scale, channel by channel, as an int4 row's dot) */
double kvc_kivi4_key_dot_f32(const void *keys, size_t i, const float *q, size_t d);

kvc_status kvc_k_attend_batch__ref(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b, void *work,
                                   size_t work_bytes);

/* the single-precision attend (attend_single.c) */
kvc_status kvc_k_attend_batch__single(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b,
                                      void *work, size_t work_bytes);
kvc_status kvc_k_attend_f32__single(const kvc_view *view, const float *q, size_t n_q, float *out);

#endif
