/* The stream's read side: its view (the exact regions in token order, then
 * the method's segments), the attend on it, the batched causal attend and
 * split-K parts. Nothing here writes the stream. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stream_internal.h"

static kvc_rows exact_rows(const kvc_stream *st, uint64_t off, uint32_t dim, const kvc_kernels *kern)
{
    return kvc_rows_at(st, off, dim, st->plan.dtype, kern);
}

/* An exact segment: rows [first, first + n) of keys and values, weight 1. */
static void put_segment(kvc_view *view, const kvc_rows *k, const kvc_rows *v, size_t first, size_t n)
{
    kvc_segment *s = &view->seg[view->n_seg++];
    kvc_segment_rows(s, k, v, first);
    s->weights = NULL;
    s->scale = 1.0;
    s->n = n;
    s->role = KVC_SET_BOTH;
}

kvc_status kvc_stream_view(const kvc_stream *st, kvc_view *view)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    if (view == NULL) return KVC_E_ARG;
    kvc_stream_view_fill(st, view);
    return KVC_OK;
}

/* Slots [first, first + n) of an in-order region, in blocks (KIVI4 keys:
 * the first slot's block, from its token) or as rows. */
static void put_region(kvc_view *view, const kvc_rows *k, const kvc_rows *v, size_t first, size_t n, int blocks)
{
    if (!blocks) {
        put_segment(view, k, v, first, n);
        return;
    }
    kvc_segment *s = &view->seg[view->n_seg++];
    s->dtype = KVC_DTYPE_KIVI4;
    s->keys_q = k->base + first / KVC_KIVI_BLOCK * KVC_KIVI_BLOCK * k->stride;
    s->first = first % KVC_KIVI_BLOCK;
    s->values_q = v->base + first * v->stride;
    s->weights = NULL;
    s->scale = 1.0;
    s->n = n;
    s->role = KVC_SET_BOTH;
}

/* The view of a checked stream: the sinks in blocks and in rows, the window
 * ring's closed tokens in two pieces, the open block, the current token
 * (those six in token order: the causal block), the protected spans, then
 * the method's segments. A plan without key blocks leaves the blocks' and
 * the open block's segments empty. */
void kvc_stream_view_fill(const kvc_stream *st, kvc_view *view)
{
    const kvc_stream_plan *p = &st->plan;
    memset(view, 0, sizeof *view);
    view->d = p->d;
    view->dv = p->dv;
    view->beta = p->beta;
    const int blocks = p->key_blocks != 0;
    const uint32_t open = kvc_stream_open_count(st), sink_phase = st->sink_used < p->n_sink;
    const uint32_t sink_open = sink_phase ? open : 0u, win_open = sink_phase ? 0u : open;
    const kvc_rows sk = exact_rows(st, st->lay.off_sink_k, p->d, NULL),
                   sv = exact_rows(st, st->lay.off_sink_v, p->dv, NULL);
    const uint32_t sb = kvc_stream_blocked_slots(st, p->n_sink);
    put_region(view, &sk, &sv, 0, (st->sink_used < sb ? st->sink_used : sb) - sink_open, blocks);
    put_segment(view, &sk, &sv, sb, st->sink_used > sb ? st->sink_used - sb : 0u);
    /* the window ring's closed tokens in two pieces: [head, end) then [0, wrap) */
    const kvc_rows wk = exact_rows(st, st->lay.off_win_k, p->d, NULL),
                   wv = exact_rows(st, st->lay.off_win_v, p->dv, NULL);
    const uint32_t closed = st->win_count - win_open;
    const uint32_t first = closed < p->n_window - st->win_head ? closed : p->n_window - st->win_head;
    put_region(view, &wk, &wv, st->win_head, first, blocks);
    put_region(view, &wk, &wv, 0, closed - first, blocks);
    /* the open block: its tokens in f16, the newest of the in-order regions
       (an empty f16 segment, no rows, for a plan without key blocks) */
    if (blocks) {
        kvc_rows ok = {NULL, 0, p->d, KVC_DTYPE_F16, NULL, NULL}, ov = {NULL, 0, p->dv, KVC_DTYPE_F16, NULL, NULL};
        ok.base = (unsigned char *)KVC_AT_C(
            st, st->lay.off_method + st->lay.method_bytes - kvc_stream_open_block_bytes(p), unsigned char);
        ok.stride = (size_t)kvc_row_bytes(KVC_DTYPE_F16, p->d);
        ov.base = ok.base + KVC_ALIGN_UP((uint64_t)KVC_KIVI_BLOCK * ok.stride);
        ov.stride = (size_t)kvc_row_bytes(KVC_DTYPE_F16, p->dv);
        put_segment(view, &ok, &ov, 0, open);
    } else {
        kvc_segment *g = &view->seg[view->n_seg++]; /* the view is zeroed: no rows, no weights */
        g->dtype = KVC_DTYPE_F16;
        g->scale = 1.0;
        g->role = KVC_SET_BOTH;
    }
    /* the pending token is f32 whatever the storage type */
    const kvc_rows pk = kvc_rows_at(st, st->lay.off_pend_k, p->d, KVC_DTYPE_F32, NULL);
    const kvc_rows pv = kvc_rows_at(st, st->lay.off_pend_v, p->dv, KVC_DTYPE_F32, NULL);
    put_segment(view, &pk, &pv, 0, st->has_pending);
    /* the protected spans: exact, older than the window (not causal) */
    const kvc_rows rk = exact_rows(st, st->lay.off_prot_k, p->d, NULL),
                   rv = exact_rows(st, st->lay.off_prot_v, p->dv, NULL);
    put_segment(view, &rk, &rv, 0, st->prot_count);
    const kvc_method_ops *o = kvc_method_ops_of(p->method);
    if (o->view) view->n_seg += o->view(kvc_stream_method_of_c(st), p, &view->seg[view->n_seg]);
}

kvc_status kvc_stream_attend(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q, float *out)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    return kvc_stream_attend_prechecked(st, kvc_kernels_or_best(kern), q, n_q, out);
}

kvc_status kvc_stream_attend_prechecked(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                        float *out)
{
    kvc_view view;
    if (q == NULL || out == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (!st->has_pending) return KVC_E_STATE; /* nothing appended yet */
    if (!kvc_all_finite(q, n_q * st->plan.d)) return KVC_E_NONFINITE;
    kvc_stream_view_fill(st, &view);
    return kvc_attend_resolved(kern, &view, q, n_q, out);
}

/* ---- batched attend ---- */

size_t kvc_stream_view_entries(const kvc_stream *st)
{
    kvc_view v;
    if (kvc_stream_check(st) != KVC_OK) return 0;
    kvc_stream_view_fill(st, &v);
    return kvc_view_entries_from(&v, 0);
}

size_t kvc_stream_attend_work_bytes(const kvc_stream *st, size_t n_pos, size_t n_q)
{
    if (kvc_stream_check(st) != KVC_OK || n_pos > KVC_MAX_BATCH_POSITIONS || n_q > KVC_MAX_QUERY_HEADS) return 0;
    return (size_t)kvc_attend_work_bytes(n_pos, n_q, st->plan.dv);
}

kvc_status kvc_stream_attend_batch(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_pos,
                                   size_t n_q, float *out, double *mass, void *work, size_t work_bytes)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    return kvc_stream_attend_batch_prechecked(st, kvc_kernels_or_best(kern), q, n_pos, n_q, out, mass, work,
                                              work_bytes);
}

kvc_status kvc_stream_attend_batch_prechecked(const kvc_stream *st, const kvc_kernels *kern, const float *q,
                                              size_t n_pos, size_t n_q, float *out, double *mass, void *work,
                                              size_t work_bytes)
{
    if (q == NULL || out == NULL || work == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS || n_pos < 1 ||
        n_pos > KVC_MAX_BATCH_POSITIONS)
        return KVC_E_ARG;
    if (!st->has_pending) return KVC_E_STATE;
    /* the positions must be the last tokens of the exact block (in token order) */
    const uint64_t recent = st->method_in == 0 && st->prot_count == 0 ? st->n_seen : (uint64_t)st->win_count + 1u;
    if (n_pos > recent) return KVC_E_ARG;
    if (kern->version != KVC_KERNELS_VERSION || kern->attend_batch == NULL) return KVC_E_BACKEND;
    if (!kvc_table_supports(kern, st->plan.dtype) || !kvc_table_supports(kern, KVC_DTYPE_F32)) return KVC_E_UNSUPPORTED;
    if (st->plan.key_blocks && (!kvc_table_supports(kern, KVC_DTYPE_KIVI4) || !kvc_table_supports(kern, KVC_DTYPE_F16)))
        return KVC_E_UNSUPPORTED;
    if (!kvc_all_finite(q, n_pos * n_q * st->plan.d)) return KVC_E_NONFINITE;
    kvc_view view;
    kvc_stream_view_fill(st, &view);
    if (mass != NULL)
        for (size_t i = 0, n = kvc_view_entries_from(&view, 0); i < n; i++) mass[i] = 0.0;
    kvc_attend_batch b = {q, n_pos, n_q, KVC_STREAM_CAUSAL_SEGMENTS, out, mass, NULL};
    const kvc_status rc = kern->attend_batch(kern, &view, &b, work, work_bytes);
    if (rc != KVC_OK) return rc;
    if (!kvc_all_finite(out, n_pos * n_q * st->plan.dv)) {
        for (size_t i = 0; i < n_pos * n_q * st->plan.dv; i++) out[i] = 0.0f;
        return KVC_E_RANGE;
    }
    return KVC_OK;
}

/* ---- split-K ---- */

size_t kvc_stream_attend_part_work_bytes(const kvc_stream *st, size_t n_q)
{
    if (kvc_stream_check(st) != KVC_OK || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return 0;
    return (size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv) + n_q * st->plan.dv * sizeof(float);
}

/* Entries [first, first + count) of a view (in segment order), as a view. */
static void view_slice(const kvc_view *in, size_t first, size_t count, kvc_view *out)
{
    *out = *in;
    out->n_seg = 0;
    size_t at = 0;
    for (size_t s = 0; s < in->n_seg && count > 0; s++) {
        const kvc_segment *g = &in->seg[s];
        if (first >= at + g->n) {
            at += g->n;
            continue;
        }
        const size_t i0 = first > at ? first - at : 0, n = g->n - i0 < count ? g->n - i0 : count;
        kvc_segment *o = &out->seg[out->n_seg++];
        *o = *g;
        o->n = n;
        if (g->dtype == KVC_DTYPE_F32) {
            o->keys = g->keys ? g->keys + i0 * in->d : NULL;
            o->values = g->values ? g->values + i0 * in->dv : NULL;
        } else if (g->dtype == KVC_DTYPE_KIVI4) { /* from token first + i0 of the key blocks */
            const size_t tok = g->first + i0;
            o->keys_q = g->keys_q ? (const unsigned char *)g->keys_q +
                                        tok / KVC_KIVI_BLOCK * (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(in->d)
                                  : NULL;
            o->first = tok % KVC_KIVI_BLOCK;
            o->values_q = g->values_q
                              ? (const unsigned char *)g->values_q + i0 * (size_t)kvc_row_bytes(KVC_DTYPE_I4, in->dv)
                              : NULL;
        } else {
            o->keys_q =
                g->keys_q ? (const unsigned char *)g->keys_q + i0 * (size_t)kvc_row_bytes(g->dtype, in->d) : NULL;
            o->values_q =
                g->values_q ? (const unsigned char *)g->values_q + i0 * (size_t)kvc_row_bytes(g->dtype, in->dv) : NULL;
        }
        if (g->weights) o->weights = g->weights + i0;
        first += n, count -= n;
        at += g->n;
    }
}

kvc_status kvc_stream_attend_part(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                  size_t part, size_t n_parts, double *state, void *work, size_t work_bytes)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    if (q == NULL || state == NULL || work == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS || n_parts < 1 ||
        n_parts > 1024 || part >= n_parts || ((uintptr_t)work % sizeof(double)) != 0 ||
        work_bytes < kvc_stream_attend_part_work_bytes(st, n_q))
        return KVC_E_ARG;
    if (!st->has_pending) return KVC_E_STATE;
    kern = kvc_kernels_or_best(kern); /* NULL: the best table this CPU runs */
    if (kern->version != KVC_KERNELS_VERSION || kern->attend_batch == NULL) return KVC_E_BACKEND;
    if (!kvc_table_supports(kern, st->plan.dtype) || !kvc_table_supports(kern, KVC_DTYPE_F32)) return KVC_E_UNSUPPORTED;
    if (st->plan.key_blocks && (!kvc_table_supports(kern, KVC_DTYPE_KIVI4) || !kvc_table_supports(kern, KVC_DTYPE_F16)))
        return KVC_E_UNSUPPORTED;
    if (!kvc_all_finite(q, n_q * st->plan.d)) return KVC_E_NONFINITE;
    kvc_view view, sub;
    kvc_stream_view_fill(st, &view);
    const size_t E = kvc_view_entries_from(&view, 0);
    const size_t first = (size_t)((uint64_t)E * part / n_parts), last = (size_t)((uint64_t)E * (part + 1) / n_parts);
    view_slice(&view, first, last - first, &sub);
    const size_t kw = (size_t)kvc_attend_work_bytes(1, n_q, st->plan.dv);
    float *out = (float *)(void *)((unsigned char *)work + kw);
    kvc_attend_batch b = {q, 1, n_q, 0, out, NULL, state};
    return kern->attend_batch(kern, &sub, &b, work, kw);
}
