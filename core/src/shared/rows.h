/* Typed row arrays: how method code reaches cached keys and values. A row
 * array is an arena region of `n` rows of kvc_row_bytes(dtype, dim) bytes;
 * rows are written by the table's `store` kernel (quantising on append) and
 * moved as opaque bytes (a quantised row moves without requantising), and
 * every computation on them goes through the table's row kernels. Method
 * code never casts a row to float. */
#ifndef KVC_ROWS_H
#define KVC_ROWS_H

#include <stdint.h>
#include <string.h>

#include "acsl_lemmas.h"
#include "arena.h"
#include "kvc/kvc_kernels.h"

typedef struct kvc_rows {
    unsigned char *base;
    size_t stride; /* bytes per row */
    size_t dim;
    unsigned dtype;
    const kvc_row_kernels *rk; /* NULL where only the layout is needed (views, checks) */
    kvc_row_journal *journal;  /* NULL, or where the writes below are recorded (kvc_kernels::journal) */
} kvc_rows;

/*@ // n rows of r, readable and writable (what an accessor of the proofs' trusted base gives)
    predicate kvc_rows_ok(kvc_rows *r, integer n) =
      \valid_read(r) && 1 <= r->dim <= 256 && 0 < r->stride <= 1032 && 0 <= n <= 16777216 && \valid(r->base + (0 .. n * r->stride - 1));
*/

/* Bytes of n rows of dim elements. Up to 2^40 rows: the tree and cluster
 * methods carve arrays of up to 2^33 slots (their plans bound slots * d by
 * the budget's elements, not slots by the budget's tokens). */
/*@ requires n <= 1099511627776 && dim <= 256;
    assigns \nothing;
    ensures \result == n * kvc_row_bytes_l(dtype, dim);
    ensures \result <= n * 1032;
    ensures n <= 16777216 ==> \result <= 16777216 * 1032;
*/
static inline uint64_t kvc_rows_bytes(unsigned dtype, uint64_t n, uint64_t dim)
{
    const uint64_t row = kvc_row_bytes(dtype, dim);
    //@ ghost kvc_mul_le(n, n, row, 1032);
    //@ ghost if (n <= 16777216) kvc_mul_le(n, 16777216, row, 1032);
    return n * row;
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
    r.journal = kern ? kern->journal : NULL;
    return r;
}

static inline void *kvc_row(const kvc_rows *r, size_t i) { return r->base + i * r->stride; }

/* Rows [i, i + n) of r were written: a run in r's journal, if it has one.
 * trusted-by: outside WP (under Frama-C the call is no code at all, so the
 * write helpers' proved contracts describe the arena only);
 * tests/unit/test_mirror.c replays every method's journal under every storage
 * type into a mirror and checks it byte for byte against the view, and a
 * journal with one run dropped must fail it. */
#if defined(__FRAMAC__)
#define kvc_rows_record(r, i, n) ((void)0)
#else
static inline void kvc_rows_record(const kvc_rows *r, size_t i, size_t n)
{
    kvc_row_journal *j = r->journal;
    if (j == NULL || n == 0) return;
    const uintptr_t at = (uintptr_t)(r->base + i * r->stride), base = (uintptr_t)j->base;
    if (at < base || at - base >= j->bytes) return; /* not in the mirrored arena (a call's scratch) */
    const uint64_t off = (uint64_t)(at - base);
    if (j->count > 0) { /* extend the last run when this one continues it */
        kvc_row_write *last = &j->writes[j->count - 1];
        if (last->stride == r->stride && last->offset + (uint64_t)last->rows * last->stride == off &&
            last->rows <= UINT32_MAX - n) {
            last->rows += (uint32_t)n;
            return;
        }
    }
    if (j->count >= j->capacity) {
        j->dropped += n;
        return;
    }
    j->writes[j->count].offset = off;
    j->writes[j->count].stride = (uint32_t)r->stride;
    j->writes[j->count].rows = (uint32_t)n;
    j->count++;
}
#endif

/* Quantise x into row i.
 * trusted-by: tests/kernels/test_backends.c runs every table's row kernels
 * against the reference ones, whose contracts wp_rows proves; the dispatch
 * through the table is outside WP (Frama-C 25 cannot prove a call through a
 * function pointer). */
/*@ requires \valid_read(r) && 1 <= r->dim <= 256;
    requires \valid(r->base + (i * r->stride .. i * r->stride + r->stride - 1));
    requires \valid_read(x + (0 .. r->dim - 1));
    requires \separated(r->base + (i * r->stride .. i * r->stride + r->stride - 1), x + (0 .. r->dim - 1));
    assigns r->base[i * r->stride .. i * r->stride + r->stride - 1];
*/
static inline void kvc_row_store(const kvc_rows *r, size_t i, const float *x)
{
    r->rk->store(kvc_row(r, i), x, r->dim);
    kvc_rows_record(r, i, 1);
}

/* Row i of r into the floats x (dequantised).
 * trusted-by: as kvc_row_store (the table's load kernels against the
 * reference ones, whose contracts wp_rows proves). */
/*@ requires \valid_read(r) && 1 <= r->dim <= 256;
    requires \valid_read(r->base + (i * r->stride .. i * r->stride + r->stride - 1));
    requires \valid(x + (0 .. r->dim - 1));
    assigns x[0 .. r->dim - 1];
*/
static inline void kvc_row_load(const kvc_rows *r, size_t i, float *x) { r->rk->load(kvc_row(r, i), x, r->dim); }

/* acc += p * row i of r (dequantised), in double.
 * trusted-by: as kvc_row_store (the table's axpy kernels against the
 * reference ones, whose contracts wp_rows proves). */
/*@ requires \valid_read(r) && 1 <= r->dim <= 256;
    requires \valid_read(r->base + (i * r->stride .. i * r->stride + r->stride - 1));
    requires \valid(acc + (0 .. r->dim - 1));
    assigns acc[0 .. r->dim - 1];
*/
static inline void kvc_row_axpy(const kvc_rows *r, size_t i, double *acc, double p)
{
    r->rk->axpy(acc, p, kvc_row(r, i), r->dim);
}

/* Row i of an f32 row array as floats.
 * trusted-by: an f32 row is dim floats (kvc_row_bytes(KVC_DTYPE_F32, dim) ==
 * 4 dim, wp_sizes) at a 4-aligned offset (every region is 64-aligned and
 * every row size a multiple of 4); the reinterpretation is a cast outside
 * WP's typed memory model. Checked by the f32 runs of every method under
 * ASan (tests/unit/test_stream.c, tests/fuzz/fuzz_api.c). */
/*@ requires \valid_read(r) && 1 <= r->dim <= 256 && r->dtype == 0;
    requires \valid_read(r->base + (i * r->stride .. i * r->stride + r->stride - 1));
    assigns \nothing;
    ensures \valid_read(\result + (0 .. r->dim - 1));
*/
static inline const float *kvc_row_f32(const kvc_rows *r, size_t i)
{
    return (const float *)(const void *)kvc_row(r, i);
}

/* Row i of `from` into row j of `to` (same type and dim), as bytes. */
/*@ requires \valid_read(to) && \valid_read(from) && to->stride == from->stride;
    requires 0 < to->stride && j * to->stride + to->stride <= 17314086912 && i * to->stride + to->stride <= 17314086912;
    requires \valid(to->base + (j * to->stride .. j * to->stride + to->stride - 1));
    requires \valid_read(from->base + (i * to->stride .. i * to->stride + to->stride - 1));
    requires \separated(to->base + (j * to->stride .. j * to->stride + to->stride - 1),
                        from->base + (i * to->stride .. i * to->stride + to->stride - 1));
    assigns to->base[j * to->stride .. j * to->stride + to->stride - 1];
*/
static inline void kvc_row_copy(const kvc_rows *to, size_t j, const kvc_rows *from, size_t i)
{
    const size_t n = to->stride, at = j * n, from_at = i * n;
    /*@ loop invariant 0 <= b <= n;
        loop assigns b, to->base[at .. at + n - 1];
        loop variant n - b;
    */
    for (size_t b = 0; b < n; b++) to->base[at + b] = from->base[from_at + b];
    kvc_rows_record(to, j, 1);
}

/* Rows [i, i + n) of `from` into rows [j, j + n) of `to`. */
static inline void kvc_rows_copy(const kvc_rows *to, size_t j, const kvc_rows *from, size_t i, size_t n)
{
    if (n > 0 && to->base + j * to->stride != from->base + i * from->stride) {
        memmove(kvc_row(to, j), kvc_row(from, i), n * to->stride);
        kvc_rows_record(to, j, n);
    }
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

/* Segment rows [first, first + n) of keys k and values v (v may be NULL for a key-only set).
 * trusted-by: tests/unit/test_dtype.c (every method's view attended under
 * every storage type) and tests/kernels/test_backends.c (methods on every
 * table); f32 rows are reinterpreted as floats here, a cast outside WP's
 * typed memory model. */
/*@ requires \valid(s) && \valid_read(k) && (v == \null || \valid_read(v)) && \separated(s, k) && \separated(s, v);
    assigns s->dtype, s->keys, s->values, s->keys_q, s->values_q;
*/
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
