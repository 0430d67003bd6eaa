/* The query-aware hooks: the attention mass a stream's entries received
 * handed to the method (observe, and the attend that measures it), and the
 * prompt's last queries (SnapKV). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stream_internal.h"

/* ---- the query-aware hooks ---- */

/* kvc_stream_observe on a checked stream with a resolved table. */
static kvc_status observe_prechecked(kvc_stream *st, const kvc_kernels *kern, const double *mass, size_t n_entries)
{
    kvc_view view;
    kvc_stream_view_fill(st, &view);
    if (mass == NULL || n_entries != kvc_view_entries_from(&view, 0)) return KVC_E_ARG;
    for (size_t i = 0; i < n_entries; i++) {
        if (!isfinite(mass[i])) return KVC_E_NONFINITE;
        if (mass[i] < 0.0) return KVC_E_ARG;
    }
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    if (o->observe == NULL) return KVC_OK;
    const kvc_method_ctx cx = {kern, &st->plan, NULL};
    const size_t exact = kvc_view_entries_from(&view, 0) - kvc_view_entries_from(&view, KVC_STREAM_EXACT_SEGMENTS);
    /* the window and the current token follow the sinks in the view, oldest
       first: consecutive tokens ending with the current one (n_seen - 1) */
    const size_t n_recent = (size_t)st->win_count + st->has_pending;
    o->observe(kvc_stream_method_of(st), &cx, mass + exact, n_entries - exact, mass + st->sink_used, n_recent,
               st->n_seen - n_recent);
    return KVC_OK;
}

kvc_status kvc_stream_observe(kvc_stream *st, const kvc_kernels *kern, const double *mass, size_t n_entries)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    return observe_prechecked(st, kvc_kernels_or_best(kern), mass, n_entries); /* NULL: the best table */
}

/* The observed attend's workspace on a checked stream: the attend's, then a mass per view entry. */
static size_t observed_work_need(const kvc_stream *st, size_t n_q)
{
    if (n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return 0;
    kvc_view view;
    kvc_stream_view_fill(st, &view);
    const size_t aw = (size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv);
    return KVC_ALIGN_UP(aw) + kvc_view_entries_from(&view, 0) * sizeof(double);
}

size_t kvc_stream_attend_observed_work_bytes(const kvc_stream *st, size_t n_q)
{
    return kvc_stream_check(st) == KVC_OK ? observed_work_need(st, n_q) : 0;
}

kvc_status kvc_stream_attend_observed(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q, float *out,
                                      void *work, size_t work_bytes)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    return kvc_stream_attend_observed_prechecked(st, kvc_kernels_or_best(kern), q, n_q, out, work, work_bytes);
}

kvc_status kvc_stream_attend_observed_prechecked(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                                 float *out, void *work, size_t work_bytes)
{
    if (kvc_method_ops_of(st->plan.method)->observe == NULL) return kvc_stream_attend_prechecked(st, kern, q, n_q, out);
    const size_t need = observed_work_need(st, n_q);
    if (work == NULL || need == 0 || work_bytes < need || ((uintptr_t)work % sizeof(double)) != 0) return KVC_E_ARG;
    const size_t aw = KVC_ALIGN_UP((size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv));
    double *mass = (double *)(void *)((unsigned char *)work + aw);
    const size_t n = (need - aw) / sizeof(double);
    const kvc_status rc = kvc_stream_attend_batch_prechecked(st, kern, q, 1, n_q, out, mass, work, aw);
    if (rc != KVC_OK) return rc;
    return observe_prechecked(st, kern, mass, n);
}

kvc_status kvc_stream_prefill_queries(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_rows)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    if (q == NULL || n_rows < 1 || n_rows > KVC_MAX_BATCH_POSITIONS) return KVC_E_ARG;
    if (!kvc_all_finite(q, n_rows * st->plan.d)) return KVC_E_NONFINITE;
    const kvc_method_ops *o = kvc_method_ops_of(st->plan.method);
    if (o->prefill_queries == NULL) return KVC_OK;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    const kvc_method_ctx cx = {kern, &st->plan, NULL};
    o->prefill_queries(kvc_stream_method_of(st), &cx, q, n_rows);
    return KVC_OK;
}
