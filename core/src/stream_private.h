/* The stream's entries for the cache manager (cache.c), private to core/src:
 * the per-call check once, then the entry points and fields of a stream that
 * has just passed it (no second check), and the header's size. plan.h is the
 * planner's alone: the planner needs nothing of a stream but its header's
 * size, which is the constant KVC_SIZE_STREAM_HEADER (kvc_sizes.h). */
#ifndef KVC_STREAM_PRIVATE_H
#define KVC_STREAM_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_stream.h"

/*@ assigns \nothing;
    ensures \result == 496;
*/
size_t kvc_stream_header_bytes(void);

kvc_status kvc_stream_check(const kvc_stream *st);
const kvc_stream_plan *kvc_stream_plan_of(const kvc_stream *st);
const kvc_stream_config *kvc_stream_config_of(const kvc_stream *st);
kvc_status kvc_stream_append_prechecked(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v);
/* Whether two byte ranges share a byte (a caller's scratch against the rows it must not write). */
static inline int kvc_bytes_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}
/* kvc_stream_prefill after its input checks (handle, rows, n, strides,
 * finiteness, scratch overlap), and the tokens it appended (*appended, may be
 * NULL): it stops at the first token the stream refuses, as a loop of appends
 * would. */
kvc_status kvc_stream_prefill_counted(kvc_stream *st, const kvc_kernels *kern, const float *keys, size_t key_stride,
                                      const float *values, size_t value_stride, size_t n, void *work, size_t work_bytes,
                                      size_t *appended);
/* The read side after kvc_stream_check, on a resolved table (never NULL: a
 * public entry resolves a NULL table once, kvc_kernels_or_best, and passes it
 * down; the cache resolves it once for a whole layer). */
kvc_status kvc_stream_attend_prechecked(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                        float *out);
kvc_status kvc_stream_attend_batch_prechecked(const kvc_stream *st, const kvc_kernels *kern, const float *q,
                                              size_t n_pos, size_t n_q, float *out, double *mass, void *work,
                                              size_t work_bytes);
kvc_status kvc_stream_attend_observed_prechecked(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                                 float *out, void *work, size_t work_bytes);

#endif
