/* The single-precision attend ("single" table, kvc_kernels_single()): the
 * reference batched attend's algorithm with every score, exponential and
 * sum in float, for microcontrollers whose FPU is single precision only
 * (Cortex-M4F, M33): there the double reference runs in software, about
 * 20x the instructions. Same structure as attend_batch_ref.c (entries
 * outer, queries inner, one online-softmax state per query), rows of any
 * storage type dequantised to float one at a time. Its error against the
 * double reference is bounded in tests/kernels/test_backends.c with u = 2^-24
 * (the bound every f32-summing table meets). Never picked by
 * kvc_kernels_best(): a decoder asks for it by name or through
 * kvc_kernels_single(). */
#include <math.h>
#include <string.h>

#include "kvc/kvc_kernels.h"
#include "portable_math.h"
#include "rows_ref.h"
#include "shared/f32_state.h"
#include "shared/rows.h"
#include "internal/kvc_internal.h"

/* e^t in float for t <= 0 (also -inf: 0; NaN propagates): t = k ln2 + r,
 * |r| <= ln2/2, e^r by its Taylor series to r^7 (remainder < 2^-27), then
 * 2^k from its exponent bits. Portable bits: basic operations only, and no
 * library call (floorf and ldexpf cost a call each on a microcontroller). */
static float expf_nonpos(float t)
{
    if (t != t) return t;
    if (t >= 0.0f) return 1.0f;
    if (t < -104.0f) return 0.0f;
    int k = (int)(t * 1.44269504f - 0.5f); /* nearest integer (t < 0: truncation of y - 1/2) */
    const float kf = (float)k;
    const float r = (t - kf * 0.693145752f) - kf * 1.42860677e-06f; /* ln 2 = hi (k*hi exact) + lo */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    float er = 1.0f + (r + r * r * p);
    if (k < -125) er *= 0x1p-24f, k += 24; /* the subnormal results: two exact-or-rounded steps */
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    float two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    const float y = er * two_k;
    return y > 1.0f ? 1.0f : y;
}

/* ln(scale) of a segment: scale is 1 for every exact region, so skip the log there */
static float ln_scale_of(const kvc_segment *s) { return s->scale == 1.0 ? 0.0f : (float)kvc_log_pos(s->scale); }

typedef struct rows_of {
    const unsigned char *k, *v;
    size_t ks, vs;
    unsigned dtype; /* of the value rows, and of the key rows but for KIVI4 */
    const kvc_row_kernels *rk;
    int kivi;     /* keys in KIVI4 blocks */
    size_t first; /* KIVI4: entry 0's token in the first block */
} rows_of;

static int segment_rows(const kvc_kernels *kern, const kvc_view *view, const kvc_segment *s, rows_of *r)
{
    if (s->dtype >= KVC_DTYPE_COUNT || !kvc_kernels_support(kern, s->dtype)) return 0;
    /* KIVI4: the keys are read block by block (kvc_kivi4_key_load), the
       values are int4 rows; every other type's rows share one type */
    r->kivi = s->dtype == KVC_DTYPE_KIVI4;
    r->first = r->kivi ? s->first : 0u;
    if (r->first >= KVC_KIVI_BLOCK) return 0;
    r->dtype = kvc_segment_value_dtype(s->dtype);
    r->rk = &kern->rows[r->dtype];
    r->ks = r->kivi ? 0u : (size_t)kvc_row_bytes(s->dtype, view->d);
    r->vs = (size_t)kvc_row_bytes(r->dtype, view->dv);
    r->k = kvc_segment_key_rows(s);
    r->v = kvc_segment_value_rows(s);
    if (s->n > 0 && r->k == NULL) return 0;
    if (s->n > 0 && (s->role & KVC_SET_NUM) && r->v == NULL) return 0;
    return 1;
}

/* Row i as floats: f32 rows in place, the others dequantised into buf. */
static const float *row_floats(const rows_of *r, const unsigned char *base, size_t stride, size_t i, size_t dim,
                               float *buf)
{
    const void *row = base + i * stride;
    if (r->dtype == KVC_DTYPE_F32) return (const float *)row;
    if (r->dtype == KVC_DTYPE_I8) {
        /* scale (f32) then the int8s; s * q in float is the reference load's
           (float)((double)s * q) bit for bit (the double product is exact),
           without the software double multiply of an FPU-single core */
        float sc;
        memcpy(&sc, row, sizeof sc);
        const int8_t *q = (const int8_t *)row + 4;
        for (size_t c = 0; c < dim; c++) buf[c] = sc * (float)q[c];
        return buf;
    }
    r->rk->load(row, buf, dim);
    return buf;
}

/* Entry i's key as floats. */
static const float *key_floats(const rows_of *r, size_t i, size_t d, float *buf)
{
    if (!r->kivi) return row_floats(r, r->k, r->ks, i, d, buf);
    kvc_kivi4_key_load(r->k, r->first + i, buf, d);
    return buf;
}

static float dot_f(const float *a, const float *b, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ln of the entry's weight times the segment's scale (float); 0 = excluded. */
static int entry_log_weight(const kvc_segment *s, float ln_scale, size_t i, float *x0)
{
    float x = ln_scale;
    if (s->weights != NULL) {
        const float w = s->weights[i];
        if (!(w > 0.0f)) return 0;
        x += isfinite(w) ? (float)kvc_pm_log((double)w) : w;
    }
    *x0 = x;
    return 1;
}

static size_t first_position(size_t e, size_t total, size_t n_pos)
{
    const size_t later = total - 1u - e;
    return later >= n_pos - 1u ? 0u : n_pos - 1u - later;
}

kvc_status kvc_k_attend_batch__single(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b,
                                      void *work, size_t work_bytes)
{
    if (kern == NULL || view == NULL || b == NULL || b->q == NULL || b->out == NULL || work == NULL) return KVC_E_ARG;
    const size_t d = view->d, dv = view->dv, n_pos = b->n_pos, n_q = b->n_q;
    if (d < 1 || d > KVC_MAX_HEAD_DIM || dv < 1 || dv > KVC_MAX_HEAD_DIM || view->n_seg > KVC_VIEW_MAX_SEGMENTS)
        return KVC_E_ARG;
    if (n_pos < 1 || n_pos > KVC_MAX_BATCH_POSITIONS || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (((uintptr_t)work % sizeof(double)) != 0 || work_bytes < kvc_attend_work_bytes(n_pos, n_q, dv)) return KVC_E_ARG;
    if (b->causal_segs > view->n_seg) return KVC_E_ARG;
    rows_of rows[KVC_VIEW_MAX_SEGMENTS];
    size_t causal_total = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        if (!segment_rows(kern, view, &view->seg[s], &rows[s])) return KVC_E_ARG;
        if (s < b->causal_segs) causal_total += view->seg[s].n;
    }
    if (b->causal_segs > 0 && causal_total < n_pos) return KVC_E_ARG;

    const size_t Q = n_pos * n_q, W = dv + 3u;
    float *st = (float *)work; /* per query: m, have_m, den, acc[dv] (half the workspace) */
    for (size_t i = 0; i < Q * W; i++) st[i] = 0.0f;
    const float beta = view->beta;
    float kbuf[KVC_MAX_HEAD_DIM], vbuf[KVC_MAX_HEAD_DIM];

    size_t e_causal = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const rows_of *r = &rows[s];
        const float ln_scale = ln_scale_of(seg);
        for (size_t i = 0; i < seg->n; i++) {
            const size_t p0 = s < b->causal_segs ? first_position(e_causal++, causal_total, n_pos) : 0u;
            float x0;
            if (!entry_log_weight(seg, ln_scale, i, &x0)) continue;
            const float *k = key_floats(r, i, d, kbuf);
            const float *v = (seg->role & KVC_SET_NUM) ? row_floats(r, r->v, r->vs, i, dv, vbuf) : NULL;
            for (size_t qi = p0 * n_q; qi < Q; qi++) {
                float *q_st = st + qi * W, *acc = q_st + 3;
                const float x = x0 + beta * dot_f(k, b->q + qi * d, d);
                if (q_st[1] == 0.0f || x > q_st[0]) {
                    const float rs = q_st[1] != 0.0f ? expf_nonpos(q_st[0] - x) : 0.0f;
                    q_st[2] *= rs;
                    for (size_t c = 0; c < dv; c++) acc[c] *= rs;
                    q_st[0] = x;
                    q_st[1] = 1.0f;
                }
                const float p = expf_nonpos(x - q_st[0]);
                if (seg->role == KVC_SET_DEN || seg->role == KVC_SET_BOTH) q_st[2] += p;
                if (v != NULL)
                    for (size_t c = 0; c < dv; c++) acc[c] += p * v[c];
            }
        }
    }
    /* float sums overflow where the reference's doubles do not (values near
       FLT_MAX / n): exact attention, a convex combination of finite values,
       must not come back as KVC_E_RANGE, so such a batch is answered by the
       double reference (rare: it costs software doubles on an M4F) */
    size_t n_entries = 0;
    for (size_t s = 0; s < view->n_seg; s++) n_entries += view->seg[s].n;
    if (kvc_f32_state_needs_reference(st, Q, W, n_entries)) /* and the far-apart split views (shared/f32_state.h) */
        return kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), view, b, work, work_bytes);
    for (size_t qi = 0; qi < Q; qi++) {
        const float *q_st = st + qi * W;
        const float inv = q_st[2] > 0.0f ? 1.0f / q_st[2] : 0.0f;
        for (size_t c = 0; c < dv; c++) b->out[qi * dv + c] = q_st[3 + c] * inv;
        if (b->state != NULL) {
            double *o = b->state + qi * KVC_ATTEND_STATE(dv);
            o[0] = q_st[1] != 0.0f ? (double)q_st[0] : -INFINITY;
            for (size_t c = 0; c < dv + 1u; c++) o[1 + c] = (double)q_st[2 + c];
        }
    }
    if (b->mass == NULL) return KVC_OK;

    size_t e = 0;
    e_causal = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const rows_of *r = &rows[s];
        const float ln_scale = ln_scale_of(seg);
        for (size_t i = 0; i < seg->n; i++, e++) {
            const size_t p0 = s < b->causal_segs ? first_position(e_causal++, causal_total, n_pos) : 0u;
            float x0;
            if (!entry_log_weight(seg, ln_scale, i, &x0)) continue;
            const float *k = key_floats(r, i, d, kbuf);
            float sum = 0.0f;
            for (size_t qi = p0 * n_q; qi < Q; qi++) {
                const float *q_st = st + qi * W;
                if (!(q_st[2] > 0.0f)) continue;
                const float x = x0 + beta * dot_f(k, b->q + qi * d, d);
                sum += expf_nonpos(x - q_st[0]) / q_st[2];
            }
            b->mass[e] += (double)sum;
        }
    }
    return KVC_OK;
}

/* One position, f32 views: the batched kernel one query at a time, with its
 * state on the stack (no workspace in this signature). */
kvc_status kvc_k_attend_f32__single(const kvc_view *view, const float *q, size_t n_q, float *out)
{
    if (view == NULL || q == NULL || out == NULL || n_q < 1 || n_q > KVC_MAX_QUERY_HEADS) return KVC_E_ARG;
    if (view->dv < 1 || view->dv > KVC_MAX_HEAD_DIM || view->d < 1 || view->d > KVC_MAX_HEAD_DIM) return KVC_E_ARG;
    double work[KVC_MAX_HEAD_DIM + 3u]; /* kvc_attend_work_bytes(1, 1, dv) at most (the kernel uses half) */
    for (size_t h = 0; h < n_q; h++) {
        kvc_attend_batch b = {q + h * view->d, 1, 1, 0, out + h * view->dv, NULL, NULL};
        const kvc_status s = kvc_k_attend_batch__single(kvc_kernels_single(), view, &b, work,
                                                        (size_t)kvc_attend_work_bytes(1, 1, view->dv));
        if (s != KVC_OK) return s;
    }
    return KVC_OK;
}
