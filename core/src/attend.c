#include "kvc/kvc_attend.h"

#include <math.h>

int kvc_all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int segment_ok(const kvc_segment *s)
{
    if (s->role != KVC_SET_NUM && s->role != KVC_SET_DEN && s->role != KVC_SET_BOTH) return 0;
    if (!(s->scale > 0.0) || !isfinite(s->scale)) return 0;
    if (s->n > KVC_MAX_BUDGET) return 0;
    if (s->n == 0) return 1;
    if (s->keys == NULL) return 0;
    if ((s->role & KVC_SET_NUM) && s->values == NULL) return 0;
    return 1;
}

kvc_status kvc_attend(const kvc_kernels *kern, const kvc_view *view, const float *q, size_t n_q,
                      float *out)
{
    if (view == NULL || q == NULL || out == NULL) return KVC_E_ARG;
    if (n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (view->d < 1 || view->d > KVC_MAX_HEAD_DIM || view->dv < 1 || view->dv > KVC_MAX_HEAD_DIM)
        return KVC_E_ARG;
    if (!(view->beta > 0.0f) || !isfinite(view->beta)) return KVC_E_ARG;
    if (view->n_seg > KVC_VIEW_MAX_SEGMENTS) return KVC_E_ARG;
    for (size_t i = 0; i < view->n_seg; i++)
        if (!segment_ok(&view->seg[i])) return KVC_E_ARG;
    if (kern == NULL) kern = kvc_kernels_ref();
    if (kern->version != KVC_KERNELS_VERSION || kern->attend_f32 == NULL) return KVC_E_BACKEND;
    const kvc_status rc = kern->attend_f32(view, q, n_q, out);
    if (rc != KVC_OK) return rc;
    /* a convex combination of finite values is finite; a ratio of two
       separate estimates need not be: say so rather than hand out Inf/NaN */
    if (!kvc_all_finite(out, n_q * view->dv)) {
        for (size_t i = 0; i < n_q * view->dv; i++) out[i] = 0.0f;
        return KVC_E_RANGE;
    }
    return KVC_OK;
}
