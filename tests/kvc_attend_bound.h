/* The error bound of an f32-summing attend against the double reference,
 * derived per query and output channel from the data (u = 2^-24):
 *   every score may move by delta_j <= beta sum_c |q_c k_jc| (d + 4) u
 *        + |ln w_j| u + 2 (|s_j| + |M|) u + 4e-7 (a vector exp),
 *   so with A = sum_N a_j e^{s_j - M} |v_j| and D = sum_D b_j e^{s_j - M}
 *   |z' - z| <= (e^delta - 1)(e^delta + 1) A / D          (scores)
 *             + 4 (n + 16) u A / D + 4 u |z|               (the f32 sums)
 * (Higham's gamma_n for the numerator and the denominator sums, the rescales
 * and the int8 scale products). A weight e^{s_j - M} that underflows double
 * (s_j - M < -745) is still e^{s_j - M} > 0 to the table, which may move it
 * by e^{2 delta}: such entries add T e^{2 delta - 745} / D, T = their sum of
 * |v_c| (taken in logs: delta may be huge when a query holds 1e38). And an
 * f32 weight below FLT_MIN = 2^-126 may be flushed to 0 (a vector exp, or a
 * rescale by e^{m_old - m_new} < FLT_MIN that drops what was summed): an
 * absolute error <= 2^-126 per entry, which values near FLT_MAX turn into
 * whole units: 2^-126 (S_c + n |z_c|) / D more, S_c = sum_N |v_c|.
 *
 * A table with KVC_CAP_Q8_INT4 scores int4 keys (d a multiple of 64)
 * against the query quantised per group g of 32 channels: q8_c =
 * round(q_c / sq_g), sq_g = max_g |q_c| / 127, so |q_c - sq_g q8_c| <= sq_g / 2
 * + 2u |q_c|, and K.q = sum_g (sc_g sq_g I_g + mn_g S_g), I_g the exact
 * integer sum of code x q8, S_g the f32 sum of the group's q_c (31 roundings),
 * then at most d / 32 + 8 more roundings of products and sums. With k_c -
 * mn_g = sc_g code_c >= 0 and G = sum_c |q_c| (|mn_g| + k_c - mn_g) >= sum_c
 * |q_c k_c|, such a score moves by at most
 *   beta [ sum_g (sq_g / 2)(1 + 2^-20) sum_{c in g} (k_c - mn_g) + (d + 8) u G ]
 * on top of the delta above (the quantised query's term, then the roundings,
 * (31 + 2 + d / 32 + 6) u G <= (d + 8) u G for d >= 64).
 *
 * A table with KVC_CAP_Q8_PV_INT4 accumulates int4 value rows (int4 and
 * KIVI4 segments, dv a multiple of 64) on integers: per block b of the pass
 * (32 entries from the segment's start; KIVI4: its key blocks, entry i in
 * block (first + i) / 32) and group g it quantises w_t = p_t sc_tg to bytes,
 * s = max_t w_t / 255, |w_t - s w8_t| <= (max_t w_t / 510)(1 + 2^-13) (the
 * roundings of 255 / max, of the product and of s: 1530 u). With the
 * table's weights p~_t <= e^{2 delta} p_t (its score and its maximum) and its
 * denominator >= D e^{-delta} (1 - 4 (n + 16) u), channel c of the output
 * moves by at most
 *   e^{3 delta} / (1 - 4 (n + 16) u) / D * [ sum_b (max_{t in b} p_t sc_tg
 *     / 510)(1 + 2^-13) sum_{t in b} code_tc
 *     + u sum_t p_t (10 |mn_tg| + 3 sc_tg code_tc) ]
 * more (the second line: the f32 sum of 32 p mn, one FMA and one add per
 * block, relative to their terms).
 *
 * Shared by tests/kernels/test_backends.c and
 * the API fuzzer, which both hold every table to it. Needs core/src on the
 * include path (shared/rows.h). */
#ifndef KVC_ATTEND_BOUND_H
#define KVC_ATTEND_BOUND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvc/kvc.h"
#include "ref/rows_typed.h"
#include "shared/rows.h"

#define U 0x1p-24

/* What the bounds need of query q against the view (reference rows, double):
 * A[c] = sum_N a e^{s - M} |v_c|, *den = sum_D b e^{s - M}, the largest score
 * movement *delta (formula in the file comment) and the entries *n seen;
 * positions limited by `skip_last_causal` trailing causal entries. */
/* Doubles of softmax_sums' tail. */
#define KVC_BOUND_TAIL (3 * KVC_MAX_HEAD_DIM)

/* tail: KVC_BOUND_TAIL doubles: [c] the |v_c| of entries whose double
 * weight underflowed, [KVC_MAX_HEAD_DIM + c] S_c of every numerator entry,
 * [2 KVC_MAX_HEAD_DIM + c] the bracket of the integer P.V term above (0 for a
 * table without KVC_CAP_Q8_PV_INT4).
 * caps: the table's KVC_CAP_* bits (KVC_CAP_Q8_INT4, KVC_CAP_Q8_PV_INT4 add their terms). */
static void softmax_sums(const kvc_view *v, const float *q, size_t skip_last_causal, size_t causal_segs, uint32_t caps,
                         double *A, double *tail, double *den, double *delta, size_t *n_seen)
{
    const double beta = (double)v->beta;
    size_t n = 0, causal_total = 0;
    for (size_t s = 0; s < causal_segs; s++) causal_total += v->seg[s].n;
    double M = -INFINITY, dl = 0.0, Dn = 0.0;
    float row[256];
    for (size_t c = 0; c < v->dv; c++)
        A[c] = 0.0, tail[c] = 0.0, tail[KVC_MAX_HEAD_DIM + c] = 0.0, tail[2 * KVC_MAX_HEAD_DIM + c] = 0.0;
    /* the integer P.V term's block in progress: its index, max p sc per group, sum of codes per channel */
    double *pv = tail + 2 * KVC_MAX_HEAD_DIM, bmax[KVC_MAX_HEAD_DIM / 32], bcodes[KVC_MAX_HEAD_DIM];
    size_t bid = SIZE_MAX;
    for (int pass = 0; pass < 2; pass++) {
        size_t e = 0;
        for (size_t s = 0; s < v->n_seg; s++) {
            const kvc_segment *g = &v->seg[s];
            const int int_pv = pass == 1 && (caps & KVC_CAP_Q8_PV_INT4) && (g->role & KVC_SET_NUM) &&
                               kvc_segment_value_dtype(g->dtype) == KVC_DTYPE_I4 && v->dv % 64u == 0;
            const size_t vrow = (size_t)kvc_row_bytes(KVC_DTYPE_I4, v->dv), ngv = v->dv / 32u;
            for (size_t i = 0; i <= g->n; i++) {
                /* the integer P.V term: a block ends at the segment's end or where the next begins */
                if (int_pv && bid != SIZE_MAX && (i == g->n || (g->first + i) / 32u != bid)) {
                    for (size_t c = 0; c < v->dv; c++) pv[c] += bmax[c / 32u] / 510.0 * (1.0 + 0x1p-13) * bcodes[c];
                    bid = SIZE_MAX;
                }
                if (i == g->n) break;
                const size_t my = e;
                if (s < causal_segs) e++;
                if (s < causal_segs && my >= causal_total - skip_last_causal) continue;
                const double w = g->scale * (g->weights ? (double)g->weights[i] : 1.0);
                if (!(w > 0.0)) continue;
                const double lw = log(w);
                kvc_segment_key_load(g, v->d, i, row); /* any storage type, KIVI4 blocks included */
                double dot = 0.0, mag = 0.0;
                for (size_t t = 0; t < v->d; t++) dot += (double)q[t] * row[t], mag += fabs((double)q[t] * row[t]);
                const double x = lw + beta * dot;
                if (pass == 0) {
                    if (x > M) M = x;
                    n++;
                    continue;
                }
                double dj = beta * mag * (double)(v->d + 4) * U + fabs(lw) * U + 2.0 * (fabs(x) + fabs(M)) * U + 4e-7;
                if ((caps & KVC_CAP_Q8_INT4) && g->dtype == KVC_DTYPE_I4 && v->d % 64u == 0) {
                    /* the row's group minima from its bytes (f16 scale, f16 minimum per group) */
                    const unsigned char *rb =
                        (const unsigned char *)g->keys_q + i * (size_t)kvc_row_bytes(KVC_DTYPE_I4, v->d);
                    double qterm = 0.0, G = 0.0;
                    for (size_t gi = 0; gi < v->d / 32u; gi++) {
                        uint16_t hm;
                        memcpy(&hm, rb + 4u * gi + 2u, 2);
                        const double mn = (double)kvc_f16_to_f32(hm);
                        double mq = 0.0, spread = 0.0;
                        for (size_t t = 32u * gi; t < 32u * gi + 32u; t++) {
                            mq = fmax(mq, fabs((double)q[t]));
                            spread += fabs((double)row[t] - mn);
                            G += fabs((double)q[t]) * (fabs(mn) + fabs((double)row[t] - mn));
                        }
                        qterm += mq / 127.0 * 0.5 * (1.0 + 0x1p-20) * spread;
                    }
                    dj += beta * (qterm + G * (double)(v->d + 8) * U);
                }
                if (dj > dl) dl = dj;
                const double p = exp(x - M);
                if (g->role & KVC_SET_DEN) Dn += p;
                if (int_pv && p > 0.0) { /* the row's groups: scale, minimum, codes */
                    const unsigned char *vb = (const unsigned char *)g->values_q + i * vrow;
                    if (bid == SIZE_MAX) {
                        bid = (g->first + i) / 32u;
                        for (size_t c = 0; c < v->dv; c++) bmax[c / 32u] = 0.0, bcodes[c] = 0.0;
                    }
                    for (size_t gi = 0; gi < ngv; gi++) {
                        uint16_t hh[2];
                        memcpy(hh, vb + 4u * gi, sizeof hh);
                        const double sc = (double)kvc_f16_to_f32(hh[0]), mn = (double)kvc_f16_to_f32(hh[1]);
                        bmax[gi] = fmax(bmax[gi], p * sc);
                        for (size_t c = 32u * gi; c < 32u * gi + 32u; c++) {
                            const unsigned byte = vb[4u * ngv + c / 2u];
                            const double code = (double)((c % 2u) ? byte >> 4 : byte & 15u);
                            bcodes[c] += code;
                            pv[c] += U * p * (10.0 * fabs(mn) + 3.0 * sc * code);
                        }
                    }
                }
                if (g->role & KVC_SET_NUM) {
                    kvc_segment_value_load(g, v->dv, i, row);
                    for (size_t c = 0; c < v->dv; c++) {
                        A[c] += p * fabs((double)row[c]);
                        if (!(p > 0.0)) tail[c] += fabs((double)row[c]);
                        tail[KVC_MAX_HEAD_DIM + c] += fabs((double)row[c]);
                    }
                }
            }
        }
    }
    *den = Dn, *delta = dl, *n_seen = n;
}

/* The bound above for query q against the view, every output channel at once. */
static void bounds_of(const kvc_view *v, const float *q, const float *z, size_t skip_last_causal, size_t causal_segs,
                      uint32_t caps, double *bound)
{
    double A[KVC_MAX_HEAD_DIM], tail[KVC_BOUND_TAIL], Dn, delta;
    size_t n;
    softmax_sums(v, q, skip_last_causal, causal_segs, caps, A, tail, &Dn, &delta, &n);
    const double ed = exp(delta), pv_factor = exp(3.0 * delta) / (1.0 - 4.0 * (double)(n + 16) * U);
    for (size_t c = 0; c < v->dv; c++) {
        const double r = A[c] > 0.0 ? A[c] / Dn : 0.0;
        const double under = tail[c] > 0.0 ? exp(2.0 * delta - 745.0 + log(tail[c])) / Dn : 0.0;
        const double flush = 0x1p-126 * (tail[KVC_MAX_HEAD_DIM + c] + (double)n * fabs((double)z[c])) / Dn;
        const double pv = tail[2 * KVC_MAX_HEAD_DIM + c] > 0.0 ? pv_factor * tail[2 * KVC_MAX_HEAD_DIM + c] / Dn : 0.0;
        const double b = !(Dn > 0.0) ? INFINITY /* no denominator: both give 0 (checked exactly) */
                                     : (r > 0.0 ? (ed - 1.0) * (ed + 1.0) * r : 0.0) + under + flush + pv +
                                           4.0 * (double)(n + 16) * U * r + 4.0 * U * fabs((double)z[c]);
        /* NaN only where the double sums themselves overflow (A and D both
           infinite): no bound can be derived there */
        bound[c] = isnan(b) ? INFINITY : b;
    }
}

#endif
