/* Reference batched attend: n_pos positions x n_q heads against one view of
 * any storage type. Entries are the outer loop and queries the inner one, so
 * each cached row is read once per call however many queries there are; each
 * query keeps its own online-softmax state (running max m, denominator, and
 * dv accumulators) in the caller's workspace. For one query the operations
 * and their order are exactly those of kvc_k_attend_f32__ref, so on an f32
 * view both kernels give the same bits (tests/kernels/test_backends.c compares them). */
#include <math.h>
#include <string.h>

#include "kvc/kvc_kernels.h"
#include "shared/rows.h"
#include "rows_ref.h"
#include "internal/kvc_internal.h"

/* e^t for t <= 0 that may also be -inf or NaN (same as attend_ref.c). */
static double exp_nonpos_ext(double t)
{
    if (t > 0.0) return 1.0;
    if (isfinite(t)) return kvc_exp_nonpos(t);
    return t < 0.0 ? 0.0 : t;
}

typedef struct rows_of {
    const unsigned char *k, *v; /* row bases (KIVI4 keys: the first key block) */
    size_t ks, vs;              /* row strides, bytes (KIVI4 keys: 0, read by block) */
    const kvc_row_kernels *rk;  /* the value rows' kernels, and the key rows' but for KIVI4 */
    int kivi;                   /* keys in KIVI4 blocks */
    size_t first;               /* KIVI4: entry 0's token in the first block */
} rows_of;

static int segment_rows(const kvc_kernels *kern, const kvc_view *view, const kvc_segment *s, rows_of *r)
{
    if (s->dtype >= KVC_DTYPE_COUNT || !kvc_kernels_support(kern, s->dtype)) return 0;
    const unsigned vt = kvc_segment_value_dtype(s->dtype);
    r->kivi = s->dtype == KVC_DTYPE_KIVI4;
    r->first = r->kivi ? s->first : 0u;
    if (r->first >= KVC_KIVI_BLOCK) return 0;
    r->rk = &kern->rows[vt];
    r->ks = r->kivi ? 0u : (size_t)kvc_row_bytes(s->dtype, view->d);
    r->vs = (size_t)kvc_row_bytes(vt, view->dv);
    r->k = kvc_segment_key_rows(s);
    r->v = kvc_segment_value_rows(s);
    if (s->n > 0 && r->k == NULL) return 0;
    if (s->n > 0 && (s->role & KVC_SET_NUM) && r->v == NULL) return 0;
    return 1;
}

/* ln of the entry's weight times the segment's scale; 0 = excluded. */
static int entry_log_weight(const kvc_segment *s, double ln_scale, size_t i, double *x0)
{
    double x = ln_scale;
    if (s->weights != NULL) {
        const double w = (double)s->weights[i];
        if (!(w > 0.0)) return 0;
        x += isfinite(w) ? kvc_log_pos(w) : w;
    }
    *x0 = x;
    return 1;
}

/* Entry i's score dot: the table's row kernel, or for a KIVI4 token the
 * doubles of its definition (min + q scale) dotted in channel order, like an
 * int4 row's dot (kvc_kivi4_key_dot_f32). */
static double key_dot(const rows_of *r, size_t i, const float *q, size_t d)
{
    if (r->kivi) return kvc_kivi4_key_dot_f32(r->k, r->first + i, q, d);
    return r->rk->dot_f32(r->k + i * r->ks, q, d);
}

/* The first position that sees entry e of the causal block of `total` entries. */
static size_t first_position(size_t e, size_t total, size_t n_pos)
{
    const size_t later = total - 1u - e; /* entries after e in the block */
    return later >= n_pos - 1u ? 0u : n_pos - 1u - later;
}

kvc_status kvc_k_attend_batch__ref(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b, void *work,
                                   size_t work_bytes)
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
    if (b->causal_segs > 0 && causal_total < n_pos) return KVC_E_ARG; /* the positions must be in the block */

    const size_t Q = n_pos * n_q, W = dv + 3u;
    double *st = (double *)work; /* per query: m, have_m, den, acc[dv] */
    for (size_t i = 0; i < Q * W; i++) st[i] = 0.0;
    const double beta = (double)view->beta;

    size_t e_causal = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const rows_of *r = &rows[s];
        const double ln_scale = kvc_log_pos(seg->scale);
        for (size_t i = 0; i < seg->n; i++) {
            const size_t p0 = s < b->causal_segs ? first_position(e_causal++, causal_total, n_pos) : 0u;
            double x0;
            if (!entry_log_weight(seg, ln_scale, i, &x0)) continue;
            const void *vrow = (seg->role & KVC_SET_NUM) ? (const void *)(r->v + i * r->vs) : NULL;
            for (size_t qi = p0 * n_q; qi < Q; qi++) {
                double *q_st = st + qi * W, *acc = q_st + 3;
                const double x = x0 + beta * key_dot(r, i, b->q + qi * d, d);
                if (q_st[1] == 0.0 || x > q_st[0]) {
                    const double rs = q_st[1] != 0.0 ? exp_nonpos_ext(q_st[0] - x) : 0.0;
                    q_st[2] *= rs;
                    for (size_t c = 0; c < dv; c++) acc[c] *= rs;
                    q_st[0] = x;
                    q_st[1] = 1.0;
                }
                const double p = exp_nonpos_ext(x - q_st[0]);
                if (seg->role == KVC_SET_DEN || seg->role == KVC_SET_BOTH) q_st[2] += p;
                if (vrow != NULL) r->rk->axpy(acc, p, vrow, dv);
            }
        }
    }
    for (size_t qi = 0; qi < Q; qi++) {
        const double *q_st = st + qi * W;
        const double inv = q_st[2] > 0.0 ? 1.0 / q_st[2] : 0.0;
        for (size_t c = 0; c < dv; c++) b->out[qi * dv + c] = (float)(q_st[3 + c] * inv);
        if (b->state != NULL) { /* split-K: the unnormalised state */
            double *o = b->state + qi * KVC_ATTEND_STATE(dv);
            o[0] = q_st[1] != 0.0 ? q_st[0] : -INFINITY;
            for (size_t c = 0; c < dv + 1u; c++) o[1 + c] = q_st[2 + c];
        }
    }
    if (b->mass == NULL) return KVC_OK;

    /* second pass: each entry's share w_i e^{x - m} / den, summed over the queries that see it */
    size_t e = 0;
    e_causal = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const rows_of *r = &rows[s];
        const double ln_scale = kvc_log_pos(seg->scale);
        for (size_t i = 0; i < seg->n; i++, e++) {
            const size_t p0 = s < b->causal_segs ? first_position(e_causal++, causal_total, n_pos) : 0u;
            double x0;
            if (!entry_log_weight(seg, ln_scale, i, &x0)) continue;
            double sum = 0.0;
            for (size_t qi = p0 * n_q; qi < Q; qi++) {
                const double *q_st = st + qi * W;
                if (!(q_st[2] > 0.0)) continue;
                const double x = x0 + beta * key_dot(r, i, b->q + qi * d, d);
                sum += exp_nonpos_ext(x - q_st[0]) / q_st[2];
            }
            b->mass[e] += sum;
        }
    }
    return KVC_OK;
}
