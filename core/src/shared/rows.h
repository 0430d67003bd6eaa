/* Typed row arrays: how method code reaches cached keys and values. A row
 * array is an arena region of `n` rows of kvc_row_bytes(dtype, dim) bytes;
 * rows are written by the table's `store` kernel (quantising on append) and
 * moved as opaque bytes (a quantised row moves without requantising), and
 * every computation on them goes through the table's row kernels. Method
 * code never casts a row to float. */
#ifndef KVC_ROWS_H
#define KVC_ROWS_H

#include <string.h>

#include "arena.h"
#include "kvc/kvc_kernels.h"

typedef struct kvc_rows {
    unsigned char *base;
    size_t stride; /* bytes per row */
    size_t dim;
    unsigned dtype;
    const kvc_row_kernels *rk; /* NULL where only the layout is needed (views, checks) */
} kvc_rows;

/* Bytes of n rows of dim elements. */
static inline uint64_t kvc_rows_bytes(unsigned dtype, uint64_t n, uint64_t dim)
{
    return n * kvc_row_bytes(dtype, dim);
}

/* The row array at byte offset `off` of `owner`. */
static inline kvc_rows kvc_rows_at(const void *owner, uint64_t off, size_t dim, unsigned dtype, const kvc_kernels *kern)
{
    kvc_rows r;
    r.base = (unsigned char *)owner + (size_t)off;
    r.stride = (size_t)kvc_row_bytes(dtype, dim);
    r.dim = dim;
    r.dtype = dtype;
    r.rk = kern ? &kern->rows[dtype] : NULL;
    return r;
}

static inline void *kvc_row(const kvc_rows *r, size_t i) { return r->base + i * r->stride; }

/* Quantise x into row i. */
static inline void kvc_row_store(const kvc_rows *r, size_t i, const float *x)
{
    r->rk->store(kvc_row(r, i), x, r->dim);
}

/* Row i of `from` into row j of `to` (same type and dim), as bytes. */
static inline void kvc_row_copy(const kvc_rows *to, size_t j, const kvc_rows *from, size_t i)
{
    if (to->base + j * to->stride != from->base + i * from->stride)
        memcpy(kvc_row(to, j), kvc_row(from, i), to->stride);
}

/* Rows [i, i + n) of `from` into rows [j, j + n) of `to`. */
static inline void kvc_rows_copy(const kvc_rows *to, size_t j, const kvc_rows *from, size_t i, size_t n)
{
    if (n > 0 && to->base + j * to->stride != from->base + i * from->stride)
        memmove(kvc_row(to, j), kvc_row(from, i), n * to->stride);
}

/* A segment's key and value rows as bytes, whatever its storage type (f32
 * segments keep them in keys/values, the others in keys_q/values_q). */
static inline const unsigned char *kvc_segment_key_rows(const kvc_segment *s)
{
    return (const unsigned char *)(s->dtype == KVC_DTYPE_F32 ? (const void *)s->keys : s->keys_q);
}

static inline const unsigned char *kvc_segment_value_rows(const kvc_segment *s)
{
    return (const unsigned char *)(s->dtype == KVC_DTYPE_F32 ? (const void *)s->values : s->values_q);
}

/* Segment rows [first, first + n) of keys k and values v (v may be NULL for a key-only set). */
static inline void kvc_segment_rows(kvc_segment *s, const kvc_rows *k, const kvc_rows *v, size_t first)
{
    s->dtype = k->dtype;
    if (k->dtype == KVC_DTYPE_F32) {
        s->keys = (const float *)(const void *)kvc_row(k, first);
        s->values = v ? (const float *)(const void *)kvc_row(v, first) : NULL;
    } else {
        s->keys_q = kvc_row(k, first);
        s->values_q = v ? kvc_row(v, first) : NULL;
    }
}

#endif
