/* What a SIMD file of accel/cpu_simd exports: its entries of the kernel
 * table, as constant data. kernels.c assembles the table (the reference
 * entries, then these) in code compiled for the baseline ISA: a table built
 * inside an AVX-512 file could itself execute AVX-512 instructions (a struct
 * copy through zmm registers) on a CPU that only asked which tables exist. */
#ifndef KVC_SIMD_ENTRIES_H
#define KVC_SIMD_ENTRIES_H

#include "kvc/kvc_kernels.h"

typedef struct kvc_simd_entries {
    const char *name; /* "avx2", "avx512", "neon" */
    uint32_t needs;   /* KVC_CPU_* */
    uint32_t caps;    /* KVC_CAP_* */
    kvc_attend_fn attend_f32;
    kvc_attend_batch_fn attend_batch;
    /* row kernels per storage type; NULL: the reference one */
    double (*row_dot_f32[KVC_DTYPE_COUNT])(const void *row, const float *x, size_t dim);
    double (*row_dot_f64[KVC_DTYPE_COUNT])(const void *row, const double *x, size_t dim);
    double (*row_dot_rows[KVC_DTYPE_COUNT])(const void *a, const void *b, const double *mu, size_t dim);
    double (*row_sqdist_f32[KVC_DTYPE_COUNT])(const void *row, const float *x, size_t dim);
} kvc_simd_entries;

/* Each file defines `const kvc_simd_entries kvc_simd_entries_<folder>`;
 * kernels.c declares the ones built (KVC_SIMD_TABLES). */

#endif
