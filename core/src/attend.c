#include "kvc/kvc_attend.h"
#include "shared/rows.h"
#include "internal/kvc_internal.h"

#include <math.h>

int kvc_all_finite(const float *x, size_t n)
{
    /*@ loop invariant 0 <= i <= n;
        loop invariant \forall integer j; 0 <= j < i ==> \is_finite(x[j]);
        loop assigns i;
        loop variant n - i;
    */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int segment_ok(const kvc_segment *s)
{
    if (s->role != KVC_SET_NUM && s->role != KVC_SET_DEN && s->role != KVC_SET_BOTH) return 0;
    if (!(s->scale > 0.0) || !isfinite(s->scale)) return 0;
    if (s->n > KVC_MAX_BUDGET || s->dtype >= KVC_DTYPE_COUNT) return 0;
    if (s->n == 0) return 1;
    const void *k = kvc_segment_key_rows(s), *v = kvc_segment_value_rows(s);
    if (k == NULL) return 0;
    if ((s->role & KVC_SET_NUM) && v == NULL) return 0;
    return 1;
}

/* A view with a quantised segment: the batched kernel, one head at a time
 * (its per-query state, dv + 3 doubles, fits the stack; callers who want
 * every head in one pass over the rows use kvc_attend_batch). */
static kvc_status attend_typed(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q, float *out)
{
    double work[KVC_MAX_HEAD_DIM + 3];
    for (size_t h = 0; h < n_q; h++) {
        kvc_attend_batch b = {q + h * view->d, 1, 1, 0, out + h * view->dv, NULL, NULL};
        const kvc_status rc = kern->attend_batch(kern, view, &b, work, sizeof work);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

/*@ requires \valid_read(view) && view->n_seg <= KVC_VIEW_MAX_SEGMENTS;
    assigns \nothing;
    ensures \result == 1 <==> (\forall integer i; 0 <= i < view->n_seg ==> view->seg[i].dtype == KVC_DTYPE_F32);
    ensures \result == 0 || \result == 1;
*/
static int all_f32(const kvc_view *view)
{
    /*@ loop invariant 0 <= i <= view->n_seg;
        loop invariant \forall integer j; 0 <= j < i ==> view->seg[j].dtype == KVC_DTYPE_F32;
        loop assigns i;
        loop variant view->n_seg - i;
    */
    for (size_t i = 0; i < view->n_seg; i++)
        if (view->seg[i].dtype != KVC_DTYPE_F32) return 0;
    return 1;
}

kvc_status kvc_attend(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q, float *out)
{
    return kvc_attend_resolved(kvc_kernels_or_best(kern), view, q, n_q, out); /* NULL: the best table this CPU runs */
}

kvc_status kvc_attend_resolved(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q, float *out)
{
    if (view == NULL || q == NULL || out == NULL) return KVC_E_ARG;
    if (n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (view->d < 1 || view->d > KVC_MAX_HEAD_DIM || view->dv < 1 || view->dv > KVC_MAX_HEAD_DIM) return KVC_E_ARG;
    if (!(view->beta > 0.0f) || !isfinite(view->beta)) return KVC_E_ARG;
    if (view->n_seg > KVC_VIEW_MAX_SEGMENTS) return KVC_E_ARG;
    for (size_t i = 0; i < view->n_seg; i++)
        if (!segment_ok(&view->seg[i])) return KVC_E_ARG;
    if (kern->version != KVC_KERNELS_VERSION || kern->attend_f32 == NULL || kern->attend_batch == NULL)
        return KVC_E_BACKEND;
    for (size_t i = 0; i < view->n_seg; i++)
        if (view->seg[i].n > 0 && !kvc_table_supports(kern, view->seg[i].dtype)) return KVC_E_UNSUPPORTED;
    /* f32 views take the proved one-position kernel */
    const kvc_status rc = all_f32(view) ? kern->attend_f32(view, q, n_q, out) : attend_typed(kern, view, q, n_q, out);
    if (rc != KVC_OK) return rc;
    /* a convex combination of finite values is finite; a ratio of two
       separate estimates need not be: say so rather than hand out Inf/NaN */
    if (!kvc_all_finite(out, n_q * view->dv)) {
        for (size_t i = 0; i < n_q * view->dv; i++) out[i] = 0.0f;
        return KVC_E_RANGE;
    }
    return KVC_OK;
}

kvc_status kvc_attend_merge(const double *const *parts, size_t n_parts, size_t n_queries, size_t dv, float *out)
{
    if (parts == NULL || out == NULL || n_parts < 1 || n_parts > 1024 || n_queries < 1 ||
        n_queries > (size_t)KVC_MAX_BATCH_POSITIONS * KVC_MAX_QUERY_HEADS || dv < 1 || dv > KVC_MAX_HEAD_DIM)
        return KVC_E_ARG;
    for (size_t i = 0; i < n_parts; i++)
        if (parts[i] == NULL) return KVC_E_ARG;
    const size_t W = KVC_ATTEND_STATE(dv);
    /* a state an attend writes has a maximum that is finite or -inf (saw
       nothing) and finite sums: anything else (a NaN maximum merged as
       "nothing seen" gave zeros and KVC_OK) is refused before out is written */
    for (size_t i = 0; i < n_parts; i++)
        for (size_t qi = 0; qi < n_queries; qi++) {
            const double *st = parts[i] + qi * W;
            if (!(st[0] == -INFINITY || isfinite(st[0]))) return KVC_E_NONFINITE;
            for (size_t c = 1; c < W; c++)
                if (!isfinite(st[c])) return KVC_E_NONFINITE;
        }
    int finite = 1;
    for (size_t qi = 0; qi < n_queries; qi++) {
        double M = -INFINITY;
        for (size_t i = 0; i < n_parts; i++)
            if (parts[i][qi * W] > M) M = parts[i][qi * W];
        double den = 0.0, acc[KVC_MAX_HEAD_DIM];
        for (size_t c = 0; c < dv; c++) acc[c] = 0.0;
        if (M > -INFINITY)
            for (size_t i = 0; i < n_parts; i++) {
                const double *st = parts[i] + qi * W;
                if (!(st[0] > -INFINITY)) continue; /* this part saw nothing */
                const double r = kvc_exp_nonpos(st[0] - M > 0.0 ? 0.0 : st[0] - M);
                den += st[1] * r;
                for (size_t c = 0; c < dv; c++) acc[c] += st[2 + c] * r;
            }
        const double inv = den > 0.0 ? 1.0 / den : 0.0;
        for (size_t c = 0; c < dv; c++) {
            out[qi * dv + c] = (float)(acc[c] * inv);
            finite &= isfinite(out[qi * dv + c]) != 0;
        }
    }
    if (!finite) {
        for (size_t i = 0; i < n_queries * dv; i++) out[i] = 0.0f;
        return KVC_E_RANGE;
    }
    return KVC_OK;
}
