/* A whole prompt in one call: the appends of its rows, with the call
 * visible to the method (kvc_prompt_call), bracketed by the method's
 * prefill_open and prefill_close. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stream_internal.h"

/* ---- a whole prompt at once ---- */

/* The method's scratch for a kvc_stream_prefill call of n rows (0: none). */
static size_t prefill_work_need(const kvc_stream *st, size_t n)
{
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    return o->prefill_work_bytes ? o->prefill_work_bytes(kvc_stream_method_of_c(st), &st->plan, n) : 0;
}

size_t kvc_stream_prefill_work_bytes(const kvc_stream *st, size_t n)
{
    if (kvc_stream_check(st) != KVC_OK || n < 1 || n > KVC_MAX_PREFILL_TOKENS) return 0;
    return prefill_work_need(st, n);
}

kvc_status kvc_stream_prefill(kvc_stream *st, const kvc_kernels *kern, const float *keys, size_t key_stride,
                              const float *values, size_t value_stride, size_t n, void *work, size_t work_bytes)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    const size_t d = st->plan.d, dv = st->plan.dv;
    if (keys == NULL || values == NULL || n < 1 || n > KVC_MAX_PREFILL_TOKENS || key_stride < d || value_stride < dv)
        return KVC_E_ARG;
    if (work != NULL && work_bytes > 0 &&
        (kvc_bytes_overlap(work, work_bytes, keys, ((n - 1) * key_stride + d) * sizeof(float)) ||
         kvc_bytes_overlap(work, work_bytes, values, ((n - 1) * value_stride + dv) * sizeof(float))))
        return KVC_E_ARG; /* the call writes work while it reads the rows */
    for (size_t i = 0; i < n; i++)
        if (!kvc_all_finite(keys + i * key_stride, d) || !kvc_all_finite(values + i * value_stride, dv))
            return KVC_E_NONFINITE;
    return kvc_stream_prefill_counted(st, kern, keys, key_stride, values, value_stride, n, work, work_bytes, NULL);
}

/* After the handle, the rows' pointers, n, the strides and finiteness are
 * checked (by kvc_stream_prefill, or by the cache manager once for a layer).
 * Stops at the first token the stream refuses (the tokens before it stay,
 * as a loop of appends leaves them); *appended (may be NULL) counts those taken. */
kvc_status kvc_stream_prefill_counted(kvc_stream *st, const kvc_kernels *kern, const float *keys, size_t key_stride,
                                      const float *values, size_t value_stride, size_t n, void *work, size_t work_bytes,
                                      size_t *appended)
{
    if (appended) *appended = 0;
    const size_t need = prefill_work_need(st, n);
    if (need > 0 && (work == NULL || work_bytes < need || ((uintptr_t)work & 7u) != 0)) return KVC_E_ARENA;
    if ((uint64_t)st->n_seen + n > UINT32_MAX) return KVC_E_CAPACITY; /* token ids are 32-bit */
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    kvc_prompt_call call = {{keys, values, key_stride, value_stride, st->n_seen, 0}, n, work, work_bytes, 0};
    if (o->prefill_open) o->prefill_open(kvc_stream_method_of(st));
    kvc_status rc = KVC_OK;
    for (; call.rows.n < n; call.rows.n++) {
        rc = kvc_stream_append_in_call(st, kern, keys + call.rows.n * key_stride, values + call.rows.n * value_stride,
                                       &call);
        if (rc != KVC_OK) break;
    }
    const kvc_method_ctx cx = {kvc_kernels_or_best(kern), &st->plan, &call};
    if (o->prefill_close) o->prefill_close(kvc_stream_method_of(st), &cx);
    if (appended) *appended = call.rows.n;
    return rc;
}
