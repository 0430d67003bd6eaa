/* The batched attend of every SIMD table, written once over a vector of VW
 * floats; an ISA file (avx2/, avx512/, neon/) defines the vector type and its
 * operations, then includes this file, which defines the table builder
 * kvc_simd_table(). Compiled only inside such a file, with its ISA flags.
 *
 * The ISA file provides:
 *   VW                         lanes per vector (a power of two <= 32)
 *   vf                         the vector type
 *   v_zero() v_set1(f) v_load(p) v_store(p, v)
 *   v_add v_sub v_mul v_max v_fma(a, b, c) = a * b + c
 *   v_row(t, row, c)           VW elements c.. of a stored row, as floats
 *                              (int8 without its scale)
 *   v_hsum(v) v_hmax(v)        horizontal sum / maximum
 *   v_hsum4(a0, a1, a2, a3, o) o[0..3] = the horizontal sums of the four
 *   v_exp(v)                   e^x for x <= 0 (-inf: 0), relative error < 2e-7
 *   v_half_to_float(h)         optional: one IEEE half as a float (else kvc_f16_to_f32)
 *   v_i4_q8_scores(...)        optional: int4 key rows scored on the integer units
 *                              against int8 queries (common/i4_q8_avx2.h); the table
 *                              then sets KVC_CAP_Q8_INT4
 *   v_i4_pv(...)               optional: int4 value rows accumulated on the integer units
 *                              with the weights quantised per block (common/i4_pv_avx2.h);
 *                              the table then sets KVC_CAP_Q8_PV_INT4
 *   v_nibbles32(nib, sc, mn, x) optional: 32 int4 codes (16 bytes, code 2i in the low
 *                              nibble of byte i) as x[i] = mn + code_i * sc, the
 *                              reference's values (else a loop over the bytes)
 *
 * The kernel works on blocks of VW entries of one segment: for every query it
 * computes the block's scores (3 queries per row load where the shape
 * allows, rows staying in L1 across the queries), takes the block maximum,
 * rescales the running sums at most once per block, and adds e^{s_j - m} times
 * each value row. Sums are in f32, as in flash-decoding; the reference kernel
 * (double) is the ground truth, and tests/kernels/test_backends.c bounds the
 * difference from the reduction lengths. Attention mass, when asked for,
 * is a second pass over the keys (segment_mass). int4 and KIVI4 segments
 * go block by block through the f32 pass (dequantised_segment_pass: dequantised
 * on the stack, or read as stored by the integer paths), and so do Q15 rows. */
#ifndef KVC_ATTEND_SIMD_H
#define KVC_ATTEND_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvc/kvc_kernels.h"
#include "ref/rows_ref.h"
#include "shared/f32_state.h"
#include "shared/rows.h"
#include "simd_entries.h"
#include "internal/kvc_internal.h"

/* Entries per block of the pass: 32 on every ISA (4 AVX2 vectors, 2
 * AVX-512, 8 NEON), so that the per-query work of a block (its maximum, the
 * rescale, the exponentials' sum) is paid once per 32 entries, not once per
 * vector: with one vector per block that work took about as long as the
 * scores (perf on AVX2, int8, 2026-11-30). */
#define BLK 32
#define NV  (BLK / VW) /* vectors per block */
_Static_assert(BLK % VW == 0, "a block is whole vectors");

/* One stored half as a float (exact): the ISA file may give its instruction
 * (F16C, NEON's fcvtl), else the library's conversion. */
#ifndef v_half_to_float
#define v_half_to_float(h) kvc_f16_to_f32(h)
#endif

/* One element of a stored row, as a float (int8 without its scale). */
KVC_INLINE float ld1(unsigned t, const unsigned char *row, size_t c)
{
    if (t == KVC_DTYPE_F32) {
        float f;
        memcpy(&f, row + 4 * c, 4);
        return f;
    }
    if (t == KVC_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, row + 2 * c, 2);
        return kvc_f16_to_f32(h);
    }
    return (float)(int8_t)row[4 + c];
}

/* The factor every element of the row carries (the int8 scale, else 1). */
KVC_INLINE float row_scale(unsigned t, const unsigned char *row)
{
    float s = 1.0f;
    if (t == KVC_DTYPE_I8) memcpy(&s, row, 4);
    return s;
}

/* <row, q> over d elements, f32 accumulation (two accumulators). */
KVC_INLINE float dot_row(unsigned t, const unsigned char *row, const float *q, size_t d)
{
    vf a0 = v_zero(), a1 = v_zero();
    size_t c = 0;
    for (; c + 2 * VW <= d; c += 2 * VW) {
        a0 = v_fma(v_row(t, row, c), v_load(q + c), a0);
        a1 = v_fma(v_row(t, row, c + VW), v_load(q + c + VW), a1);
    }
    for (; c + VW <= d; c += VW) a0 = v_fma(v_row(t, row, c), v_load(q + c), a0);
    float s = v_hsum(v_add(a0, a1));
    for (; c < d; c++) s += ld1(t, row, c) * q[c];
    return s * row_scale(t, row);
}

/* The scores <row_j, q>, j < nb (<= BLK), into s[]: four rows at a time, a
 * last group of fewer rows padded with zero accumulators, so that every row's
 * sum is reduced in the same order whatever nb is (a token's scores then do
 * not depend on how many later tokens share its block: a chunked prefill and
 * a token-by-token one agree bit for bit). */
KVC_INLINE void dot_block(unsigned t, const unsigned char *K, size_t ks, size_t nb, const float *q, size_t d, float *s)
{
    const size_t dvec = d / VW * VW;
    for (size_t j = 0; j < nb; j += 4) {
        const unsigned char *R = K + j * ks;
        const size_t g = nb - j < 4 ? nb - j : 4;
        vf a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
        if (g == 4) {
            for (size_t c = 0; c < dvec; c += VW) {
                const vf qv = v_load(q + c);
                a0 = v_fma(v_row(t, R, c), qv, a0), a1 = v_fma(v_row(t, R + ks, c), qv, a1);
                a2 = v_fma(v_row(t, R + 2 * ks, c), qv, a2), a3 = v_fma(v_row(t, R + 3 * ks, c), qv, a3);
            }
            v_hsum4(a0, a1, a2, a3, s + j);
        } else {
            for (size_t c = 0; c < dvec; c += VW) {
                const vf qv = v_load(q + c);
                a0 = v_fma(v_row(t, R, c), qv, a0);
                if (g > 1) a1 = v_fma(v_row(t, R + ks, c), qv, a1);
                if (g > 2) a2 = v_fma(v_row(t, R + 2 * ks, c), qv, a2);
            }
            float four[4];
            v_hsum4(a0, a1, a2, a3, four);
            memcpy(s + j, four, g * sizeof(float));
        }
    }
    if (dvec < d) /* d not a multiple of VW: the last elements one by one */
        for (size_t j = 0; j < nb; j++)
            for (size_t c = dvec; c < d; c++) s[j] += ld1(t, K + j * ks, c) * q[c];
    if (t == KVC_DTYPE_I8)
        for (size_t j = 0; j < nb; j++) s[j] *= row_scale(t, K + j * ks);
}

/* Scores of 3 queries against a full block (s3[x][j]), each chunk of four
 * rows loaded (and converted) once for the three: 12 accumulators. d must be
 * a multiple of VW. */
KVC_INLINE void dot_block_q3(unsigned t, const unsigned char *K, size_t ks, const float *q0, const float *q1,
                             const float *q2, size_t d, float s3[3][BLK])
{
    for (size_t j = 0; j < BLK; j += 4) {
        const unsigned char *R = K + j * ks;
        vf a[3][4];
        for (size_t x = 0; x < 3; x++)
            for (size_t i = 0; i < 4; i++) a[x][i] = v_zero();
        for (size_t c = 0; c < d; c += VW) {
            const vf v0 = v_load(q0 + c), v1 = v_load(q1 + c), v2 = v_load(q2 + c);
            for (size_t i = 0; i < 4; i++) {
                const vf r = v_row(t, R + i * ks, c);
                a[0][i] = v_fma(r, v0, a[0][i]);
                a[1][i] = v_fma(r, v1, a[1][i]);
                a[2][i] = v_fma(r, v2, a[2][i]);
            }
        }
        for (size_t x = 0; x < 3; x++) v_hsum4(a[x][0], a[x][1], a[x][2], a[x][3], s3[x] + j);
    }
    if (t == KVC_DTYPE_I8)
        for (size_t j = 0; j < BLK; j++) {
            const float sc = row_scale(t, K + j * ks);
            s3[0][j] *= sc, s3[1][j] *= sc, s3[2][j] *= sc;
        }
}

/* Floats per channel of a channel-major key block (KIVI4 keys, dequantised
 * once per 32-token block): the block's 32 tokens, then VW zeros, so that
 * the vectors that cover nb tokens from any offset o (o + nb <= 32) stay
 * inside the channel. */
#define KCOL_STRIDE (KVC_KIVI_BLOCK + VW)

/* Where a pass block's key scores come from when not from rows of its
 * storage type: a KIVI4 block's columns, or int4 rows scored against the
 * prepared int8 queries. */
typedef struct key_source {
    const float *cols;        /* channel-major keys (dot_cols), or NULL */
    const unsigned char *i4;  /* int4 key rows (v_i4_q8_scores), or NULL */
    size_t i4_stride;         /* their row bytes */
    const unsigned char *q8;  /* the prepared queries, Q8_BYTES(d) each */
    const unsigned char *vi4; /* int4 value rows accumulated by v_i4_pv, or NULL */
    size_t vi4_stride;        /* their row bytes */
} key_source;

/* Bytes of one prepared query (common/i4_q8_avx2.h: the int8 channels, then
 * a scale and a float sum per group of 32). */
#define Q8_BYTES(d) ((d) + (d) / 4u)

/* Query q (d a multiple of 64) prepared for integer int4 scores: per group
 * of 32 channels the scale sq = max |q_c| / 127 and q8_c = round(q_c / sq)
 * (|q_c - sq q8_c| <= sq / 2 + 2u |q_c|), the even and odd channels apart as
 * the codes' nibbles lie, and S = the group's float sum of q_c. */
static void q8_prepare(const float *q, size_t d, unsigned char *out)
{
    const size_t ng = d / 32u;
    for (size_t g = 0; g < ng; g++) {
        const float *qg = q + 32u * g;
        float m = 0.0f, sum = 0.0f;
        for (size_t c = 0; c < 32u; c++) m = fabsf(qg[c]) > m ? fabsf(qg[c]) : m, sum += qg[c];
        const float sq = m / 127.0f, inv = m > 0.0f ? 127.0f / m : 0.0f;
        unsigned char *e = out + 64u * (g / 2u) + 16u * (g % 2u), *o = e + 32u;
        for (size_t i = 0; i < 16u; i++) {
            const long a = lrintf(qg[2u * i] * inv), b = lrintf(qg[2u * i + 1u] * inv);
            e[i] = (unsigned char)(int8_t)(a > 127 ? 127 : a < -127 ? -127 : a);
            o[i] = (unsigned char)(int8_t)(b > 127 ? 127 : b < -127 ? -127 : b);
        }
        memcpy(out + d + 4u * g, &sq, 4), memcpy(out + d + 4u * (ng + g), &sum, 4);
    }
}

/* Scores of nb <= BLK tokens whose keys are columns of a channel-major block
 * (token j: kc[c * KCOL_STRIDE + j]) against nq <= 3 queries: lanes are
 * tokens, so a channel is one broadcast and one FMA per query and vector,
 * and no horizontal sum is left. Lanes past nb hold finite values (later
 * tokens of the block, the padding's zeros, or zeros here) that the pass
 * masks. */
KVC_INLINE void dot_cols(const float *kc, const float *const qx[3], size_t nq, size_t nb, size_t d, float s3[3][BLK])
{
    const size_t nv = (nb + VW - 1u) / VW;
    /* two vectors of tokens per sweep over the channels: 6 accumulators, 3
       broadcasts and a column in registers (with all NV = 4 of AVX2 at once,
       12 accumulators, gcc 12 kept one on the stack: a store-forwarding
       chain that took 11% of the KIVI4 pass under perf) */
    for (size_t u0 = 0; u0 < NV; u0 += 2) {
        vf a[3][2];
        for (size_t x = 0; x < 3; x++) a[x][0] = v_zero(), a[x][1] = v_zero();
        if (u0 < nv)
            for (size_t c = 0; c < d; c++)
                for (size_t u = u0; u < u0 + 2 && u < nv; u++) {
                    const vf k = v_load(kc + c * KCOL_STRIDE + u * VW);
                    for (size_t x = 0; x < nq; x++) a[x][u - u0] = v_fma(v_set1(qx[x][c]), k, a[x][u - u0]);
                }
        for (size_t x = 0; x < nq; x++)
            for (size_t u = u0; u < u0 + 2 && u < NV; u++) v_store(s3[x] + u * VW, a[x][u - u0]);
    }
}

/* Scores of a pass block's nb entries (from entry j0) against nq <= 3
 * queries q0.. when a key source gives them: KIVI4 columns or int4 rows on
 * the integer units. Lanes past nb hold finite values the pass masks. 0 when
 * src gives no scores (the rows of the segment's type do). */
KVC_INLINE int source_scores(const key_source *src, const kvc_attend_batch *b, size_t d, size_t j0, size_t nb,
                             size_t q0, size_t nq, float s3[3][BLK])
{
    if (src && src->cols) {
        const float *qx[3] = {b->q + q0 * d, b->q + (q0 + (nq > 1)) * d, b->q + (q0 + 2 * (nq > 2)) * d};
        dot_cols(src->cols + j0, qx, nq, nb, d, s3);
        return 1;
    }
#ifdef v_i4_q8_scores
    if (src && src->i4) {
        const size_t qb = Q8_BYTES(d);
        const unsigned char *qx[3] = {src->q8 + q0 * qb, src->q8 + (q0 + (nq > 1)) * qb,
                                      src->q8 + (q0 + 2 * (nq > 2)) * qb};
        for (size_t x = 0; x < nq; x++)
            for (size_t j = nb; j < BLK; j++) s3[x][j] = 0.0f;
        v_i4_q8_scores(src->i4 + j0 * src->i4_stride, src->i4_stride, nb, d, qx, nq, s3);
        return 1;
    }
#endif
    return 0;
}

/* acc += sum_j p_j row_j over the nb rows of a block, eight (then four, then
 * one) vectors of channels at a time held in registers (read and written once
 * per block). */
KVC_INLINE void axpy_block(unsigned t, float *acc, const float *p, const unsigned char *V, size_t vs, size_t nb,
                           size_t dv)
{
    float ps[BLK];
    for (size_t j = 0; j < nb; j++) ps[j] = t == KVC_DTYPE_I8 ? p[j] * row_scale(t, V + j * vs) : p[j];
    size_t c = 0;
    for (; c + 8 * VW <= dv; c += 8 * VW) { /* eight vectors of channels: a head of 64 on AVX2 in one pass */
        vf a[8];
        for (size_t i = 0; i < 8; i++) a[i] = v_load(acc + c + i * VW);
        for (size_t j = 0; j < nb; j++) {
            const unsigned char *v = V + j * vs;
            const vf pv = v_set1(ps[j]);
            for (size_t i = 0; i < 8; i++) a[i] = v_fma(pv, v_row(t, v, c + i * VW), a[i]);
        }
        for (size_t i = 0; i < 8; i++) v_store(acc + c + i * VW, a[i]);
    }
    for (; c + 4 * VW <= dv; c += 4 * VW) {
        vf a0 = v_load(acc + c), a1 = v_load(acc + c + VW), a2 = v_load(acc + c + 2 * VW),
           a3 = v_load(acc + c + 3 * VW);
        for (size_t j = 0; j < nb; j++) {
            const unsigned char *v = V + j * vs;
            const vf pv = v_set1(ps[j]);
            a0 = v_fma(pv, v_row(t, v, c), a0), a1 = v_fma(pv, v_row(t, v, c + VW), a1);
            a2 = v_fma(pv, v_row(t, v, c + 2 * VW), a2), a3 = v_fma(pv, v_row(t, v, c + 3 * VW), a3);
        }
        v_store(acc + c, a0), v_store(acc + c + VW, a1), v_store(acc + c + 2 * VW, a2), v_store(acc + c + 3 * VW, a3);
    }
    for (; c + VW <= dv; c += VW) {
        vf a = v_load(acc + c);
        for (size_t j = 0; j < nb; j++) a = v_fma(v_set1(ps[j]), v_row(t, V + j * vs, c), a);
        v_store(acc + c, a);
    }
    for (; c < dv; c++)
        for (size_t j = 0; j < nb; j++) acc[c] += ps[j] * ld1(t, V + j * vs, c);
}

/* Vectors of channels per pass of axpy_block_q3 (3 x nvec accumulators, 3
 * broadcasts and the row in registers): 4 for rows read from the cache; the
 * ISA file may set fewer for rows dequantised on the stack, AXPY3_STAGED_VECS
 * (AVX2: 2. With 4, gcc 12 spilled one accumulator there, a store-forwarding
 * chain that took 17% of the int4 pass under perf; 2 in the row passes made
 * f32 and f16 5-10% slower. A/B at n = 16384, 2026-11-30). */
#ifndef AXPY3_STAGED_VECS
#define AXPY3_STAGED_VECS 4
#endif

/* The same for three queries at once: each chunk of a value row is loaded
 * (and converted) once for the three accumulators, four vectors of channels
 * x three queries = 12 accumulators. Per channel the operations are those of
 * axpy_block, in the same order, so the results are the same bits. */
KVC_INLINE void axpy_block_q3(unsigned t, float *acc0, float *acc1, float *acc2, const float p[3][BLK],
                              const unsigned char *V, size_t vs, size_t nb, size_t dv, size_t nvec)
{
    float ps[3][BLK];
    for (size_t j = 0; j < nb; j++) {
        const float sc = t == KVC_DTYPE_I8 ? row_scale(t, V + j * vs) : 1.0f;
        for (size_t x = 0; x < 3; x++) ps[x][j] = t == KVC_DTYPE_I8 ? p[x][j] * sc : p[x][j];
    }
    float *acc[3] = {acc0, acc1, acc2};
    size_t c = 0;
    for (; c + nvec * VW <= dv; c += nvec * VW) { /* nvec <= 4: a constant at every call */
        vf a[3][4];
        for (size_t x = 0; x < 3; x++)
            for (size_t i = 0; i < nvec; i++) a[x][i] = v_load(acc[x] + c + i * VW);
        for (size_t j = 0; j < nb; j++) {
            const unsigned char *v = V + j * vs;
            const vf p0 = v_set1(ps[0][j]), p1 = v_set1(ps[1][j]), p2 = v_set1(ps[2][j]);
            for (size_t i = 0; i < nvec; i++) {
                const vf r = v_row(t, v, c + i * VW);
                a[0][i] = v_fma(p0, r, a[0][i]), a[1][i] = v_fma(p1, r, a[1][i]), a[2][i] = v_fma(p2, r, a[2][i]);
            }
        }
        for (size_t x = 0; x < 3; x++)
            for (size_t i = 0; i < nvec; i++) v_store(acc[x] + c + i * VW, a[x][i]);
    }
    for (; c + VW <= dv; c += VW) {
        vf a0 = v_load(acc0 + c), a1 = v_load(acc1 + c), a2 = v_load(acc2 + c);
        for (size_t j = 0; j < nb; j++) {
            const vf r = v_row(t, V + j * vs, c);
            a0 = v_fma(v_set1(ps[0][j]), r, a0), a1 = v_fma(v_set1(ps[1][j]), r, a1),
            a2 = v_fma(v_set1(ps[2][j]), r, a2);
        }
        v_store(acc0 + c, a0), v_store(acc1 + c, a1), v_store(acc2 + c, a2);
    }
    for (; c < dv; c++)
        for (size_t j = 0; j < nb; j++) {
            const float e = ld1(t, V + j * vs, c);
            acc0[c] += ps[0][j] * e, acc1[c] += ps[1][j] * e, acc2[c] += ps[2][j] * e;
        }
}

static float exp1(float x)
{
    float in[BLK], out[BLK];
    for (size_t j = 0; j < BLK; j++) in[j] = x;
    v_store(out, v_exp(v_load(in)));
    return out[0];
}

/* Entries j0 .. j0+nb-1 of a segment: ln(scale w_j) (-inf for a zero
 * weight), and under the causal mask the first position that sees each
 * (p0, 0 without the mask; the causal entry counter advances). Lanes of lw
 * past nb: 0; p0 past nb is not written. */
KVC_INLINE void block_weights(const kvc_segment *seg, double ln_scale, size_t j0, size_t nb, const kvc_attend_batch *b,
                              size_t n_causal_total, size_t *e_causal, int causal, float lw[BLK], size_t p0[BLK])
{
    for (size_t j = 0; j < BLK; j++) lw[j] = 0.0f;
    for (size_t j = 0; j < nb; j++) { /* (p0 past nb is never read) */
        p0[j] = 0;
        double x = ln_scale;
        if (seg->weights) {
            const double w = (double)seg->weights[j0 + j];
            x = w > 0.0 ? x + (isfinite(w) ? kvc_log_pos(w) : w) : -INFINITY;
        }
        lw[j] = (float)x;
        if (causal) {
            const size_t e = (*e_causal)++, later = n_causal_total - 1u - e;
            p0[j] = later >= b->n_pos - 1u ? 0u : b->n_pos - 1u - later;
        }
    }
}

/* One segment of one storage type, for every query: the block loop.
 * st: per query {m, have_m, den, acc[dv]} in f32. */
KVC_INLINE void segment_pass(unsigned t, const kvc_view *view, const kvc_segment *seg, const kvc_attend_batch *b,
                             size_t n_causal_total, size_t *e_causal, int causal, float *st, const key_source *src,
                             int staged)
{
    const size_t d = view->d, dv = view->dv, n_q = b->n_q, Q = b->n_pos * n_q, W = dv + 3u;
    const size_t ks = (size_t)kvc_row_bytes(t, d), vs = (size_t)kvc_row_bytes(t, dv);
    const unsigned char *K = kvc_segment_key_rows(seg), *V = kvc_segment_value_rows(seg);
    const int in_num = (seg->role & KVC_SET_NUM) != 0, in_den = (seg->role & KVC_SET_DEN) != 0;
    const vf beta = v_set1(view->beta);
    const double ln_scale = kvc_log_pos(seg->scale);
    /* 0 * (beta * score) summed over every score: 0, or NaN once a score is
       not finite (|q.k| past f32's range, a NaN stored in a row), which the
       f32 pass cannot answer: the batch then goes to the reference (double
       scores: the right answer, or its KVC_E_RANGE), never a silent result */
    vf poison = v_zero();
    const vf zero = v_zero();
    for (size_t j0 = 0; j0 < seg->n; j0 += BLK) {
        const size_t nb = seg->n - j0 < BLK ? seg->n - j0 : BLK;
        float lw[BLK];
        size_t p0[BLK];
        block_weights(seg, ln_scale, j0, nb, b, n_causal_total, e_causal, causal, lw, p0);
        int masked = causal;
        for (size_t j = 0; j < nb; j++) masked |= lw[j] == -INFINITY;
        /* the queries three at a time: their scores share each key-row load,
           their accumulations each value-row load */
        for (size_t q0 = 0; q0 < Q; q0 += 3) {
            const size_t nqg = Q - q0 < 3 ? Q - q0 : 3;
            float s3[3][BLK], pj[3][BLK];
            int live[3] = {0, 0, 0};
            if (source_scores(src, b, d, j0, nb, q0, nqg, s3)) { /* KIVI4 columns, int4 on integers */
            } else if (nqg == 3 && nb == BLK && d % VW == 0) {
                dot_block_q3(t, K + j0 * ks, ks, b->q + q0 * d, b->q + (q0 + 1) * d, b->q + (q0 + 2) * d, d, s3);
            } else {
                for (size_t x = 0; x < nqg; x++) {
                    for (size_t j = nb; j < BLK; j++) s3[x][j] = 0.0f;
                    dot_block(t, K + j0 * ks, ks, nb, b->q + (q0 + x) * d, d, s3[x]);
                }
            }
            for (size_t x = 0; x < nqg; x++) {
                const size_t qi = q0 + x, pos = qi / n_q;
                float *q_st = st + qi * W, *acc = q_st + 3, *s = s3[x];
                for (size_t u = 0; u < BLK; u += VW) {
                    poison = v_add(poison, v_mul(v_mul(beta, v_load(s + u)), zero));
                    v_store(s + u, v_fma(beta, v_load(s + u), v_load(lw + u)));
                }
                float mb = -INFINITY;
                if (masked || nb < BLK) {
                    for (size_t j = 0; j < nb; j++) {
                        if (lw[j] == -INFINITY || pos < p0[j]) s[j] = -INFINITY;
                        if (s[j] > mb) mb = s[j];
                    }
                } else { /* every entry seen: the block maximum in registers */
                    vf mv = v_load(s);
                    for (size_t u = VW; u < BLK; u += VW) mv = v_max(mv, v_load(s + u));
                    mb = v_hmax(mv);
                }
                if (mb == -INFINITY) continue; /* nothing of this block is seen by this query */
                if (q_st[1] == 0.0f || mb > q_st[0]) {
                    const float r = q_st[1] != 0.0f ? exp1(q_st[0] - mb) : 0.0f;
                    q_st[2] *= r;
                    const vf rv = v_set1(r);
                    size_t c = 0;
                    for (; c + VW <= dv; c += VW) v_store(acc + c, v_mul(rv, v_load(acc + c)));
                    for (; c < dv; c++) acc[c] *= r;
                    q_st[0] = mb, q_st[1] = 1.0f;
                }
                for (size_t j = nb; j < BLK; j++) s[j] = -INFINITY;
                const vf mq = v_set1(q_st[0]);
                vf ps = v_zero();
                for (size_t u = 0; u < BLK; u += VW) {
                    const vf pv = v_exp(v_sub(v_load(s + u), mq));
                    v_store(pj[x] + u, pv);
                    ps = v_add(ps, pv);
                }
                if (in_den) q_st[2] += v_hsum(ps);
                live[x] = 1;
            }
            if (!in_num) continue;
#ifdef v_i4_pv
            if (src && src->vi4) { /* int4 value rows on the integer units */
                float *const accs[3] = {st + q0 * W + 3, st + (q0 + (nqg > 1)) * W + 3,
                                        st + (q0 + 2 * (nqg > 2)) * W + 3};
                v_i4_pv(src->vi4 + j0 * src->vi4_stride, src->vi4_stride, nb, dv, (const float(*)[BLK])pj, live, nqg,
                        accs);
                continue;
            }
#endif
            if (nqg == 3 && live[0] && live[1] && live[2]) {
                axpy_block_q3(t, st + q0 * W + 3, st + (q0 + 1) * W + 3, st + (q0 + 2) * W + 3, (const float(*)[BLK])pj,
                              V + j0 * vs, vs, nb, dv, staged ? AXPY3_STAGED_VECS : 4u);
            } else {
                for (size_t x = 0; x < nqg; x++)
                    if (live[x]) axpy_block(t, st + (q0 + x) * W + 3, pj[x], V + j0 * vs, vs, nb, dv);
            }
        }
    }
    if (v_hsum(poison) != 0.0f) st[2] = NAN; /* the final check sends the batch to the reference */
}

/* The attention mass of one segment's entries (kvc_attend_batch.mass): a
 * second pass over the key rows once every query's maximum m and
 * denominator are final; entry j gets sum over the queries that see it of
 * e^{x_j - m} / den, x_j = beta <q, k_j> + ln w_j computed as the first pass
 * computes it (f32), the exponential and the sum in double. */
KVC_INLINE void segment_mass(unsigned t, const kvc_view *view, const kvc_segment *seg, const kvc_attend_batch *b,
                             size_t n_causal_total, size_t *e_causal, int causal, const float *st, double *mass,
                             const key_source *src)
{
    const size_t d = view->d, n_q = b->n_q, Q = b->n_pos * n_q, W = view->dv + 3u;
    const size_t ks = (size_t)kvc_row_bytes(t, d);
    const unsigned char *K = kvc_segment_key_rows(seg);
    const vf beta = v_set1(view->beta);
    const double ln_scale = kvc_log_pos(seg->scale);
    for (size_t j0 = 0; j0 < seg->n; j0 += BLK) {
        const size_t nb = seg->n - j0 < BLK ? seg->n - j0 : BLK;
        float lw[BLK];
        size_t p0[BLK];
        block_weights(seg, ln_scale, j0, nb, b, n_causal_total, e_causal, causal, lw, p0);
        for (size_t qi = 0; qi < Q; qi++) {
            const float *q_st = st + qi * W;
            if (!(q_st[2] > 0.0f)) continue;
            float sc[BLK];
            for (size_t j = 0; j < BLK; j++) sc[j] = 0.0f;
            float s3[3][BLK]; /* the first pass's scores, from the same source */
            if (source_scores(src, b, d, j0, nb, qi, 1, s3))
                memcpy(sc, s3[0], sizeof sc);
            else
                dot_block(t, K + j0 * ks, ks, nb, b->q + qi * d, d, sc);
            for (size_t u = 0; u < BLK; u += VW) v_store(sc + u, v_fma(beta, v_load(sc + u), v_load(lw + u)));
            const size_t pos = qi / n_q;
            for (size_t j = 0; j < nb; j++) {
                if (lw[j] == -INFINITY || pos < p0[j]) continue;
                mass[j0 + j] += exp((double)sc[j] - (double)q_st[0]) / (double)q_st[2];
            }
        }
    }
}

/* int4 codes as floats, min + q scale computed in float: the same value the
 * reference load gives, bit for bit. The exact sum needs at most 44 bits
 * (a half's 11 bits plus q's 4, over exponents from 2^-24 to 2^20), so the
 * reference's double holds it exactly and its one rounding to float is the
 * one rounding of fmaf / of the float sum of an exact product (q scale has
 * 15 bits). Written as plain loops over a group so that the compiler
 * vectorises them for this file's ISA. */
KVC_INLINE void i4_codes_to_f32(const unsigned char *nib, size_t c0, size_t n, float sc, float mn, float *x,
                                size_t stride)
{
    size_t j = 0;
    if (c0 & 1u) { /* an odd start: its high nibble first */
        x[0] = mn + (float)(nib[c0 >> 1] >> 4) * sc;
        j = 1;
    }
    if (stride == 1) /* a byte at a time, both nibbles: the loop the compiler vectorises */
        for (; j + 2 <= n; j += 2) {
            const unsigned b = nib[(c0 + j) >> 1];
            x[j] = mn + (float)(b & 15u) * sc;
            x[j + 1] = mn + (float)(b >> 4) * sc;
        }
    else
        for (; j + 2 <= n; j += 2) {
            const unsigned b = nib[(c0 + j) >> 1];
            x[j * stride] = mn + (float)(b & 15u) * sc;
            x[(j + 1) * stride] = mn + (float)(b >> 4) * sc;
        }
    if (j < n) x[j * stride] = mn + (float)(nib[(c0 + j) >> 1] & 15u) * sc; /* an even last code: low nibble */
}

/* An int4 row (rows_int4.c's layout) as floats. */
KVC_INLINE void i4_row_to_f32(const unsigned char *row, float *x, size_t dim)
{
    const size_t ng = (dim + 31u) / 32u;
    const unsigned char *nib = row + 4u * ng;
    for (size_t g = 0; g < ng; g++) {
        uint16_t h[2];
        memcpy(h, row + 4u * g, sizeof h);
        const size_t c0 = 32u * g, n = dim - c0 < 32u ? dim - c0 : 32u;
#ifdef v_nibbles32
        if (n == 32u) { /* a whole group: the ISA's vector unpack (the same values) */
            v_nibbles32(nib + 16u * g, v_half_to_float(h[0]), v_half_to_float(h[1]), x + c0);
            continue;
        }
#endif
        i4_codes_to_f32(nib, c0, n, v_half_to_float(h[0]), v_half_to_float(h[1]), x + c0, 1);
    }
}

/* A KIVI4 key block's 32 tokens channel-major (channel c's at kc + c *
 * KCOL_STRIDE; the stride's padding is the caller's): each channel an int4
 * row of 32 codes, its scale and minimum read once. Tokens past a last,
 * partly filled block decode to finite values the pass masks. */
KVC_INLINE void kivi4_block_to_cols(const unsigned char *block, float *kc, size_t d)
{
    for (size_t c = 0; c < d; c++) {
        const unsigned char *ch = block + 20u * c;
        uint16_t h[2];
        memcpy(h, ch, sizeof h);
#ifdef v_nibbles32
        v_nibbles32(ch + 4, v_half_to_float(h[0]), v_half_to_float(h[1]), kc + c * KCOL_STRIDE);
#else
        i4_codes_to_f32(ch + 4, 0, KVC_KIVI_BLOCK, v_half_to_float(h[0]), v_half_to_float(h[1]), kc + c * KCOL_STRIDE,
                        1);
#endif
    }
}

/* An int4 segment (groups of 32 with an f16 scale and minimum each), a
 * KIVI4 one (its keys per channel over 32 tokens, its values int4 rows) or a
 * Q15 one (a scale per row): every block of BLK rows is dequantised into f32
 * rows on the stack with the reference's values (min + q * scale or scale *
 * q, rounded to float once; int4 by the ISA's vector unpack) and goes through
 * the f32 pass, block by block, so the blocks, the causal count and the
 * weights line up with what one f32 segment of those values would do. KIVI4
 * keys are dequantised a whole 32-token key block at a time, channel-major as
 * stored (no transposition), and the pass takes their scores from the columns
 * (dot_cols). Where the ISA has the integer paths, int4 keys are not
 * dequantised (v_i4_q8_scores against the prepared queries, d % 64 == 0) and
 * neither are int4 value rows (v_i4_pv, dv % 64 == 0): the pass reads them
 * as stored. With `mass` the block goes through the mass pass instead
 * (values not read). */
static void dequantised_segment_pass(unsigned t, const kvc_view *view, const kvc_segment *seg,
                                     const kvc_attend_batch *b, size_t n_causal_total, size_t *e_causal, int causal,
                                     float *st, double *mass, const unsigned char *q8)
{
    const unsigned vt = kvc_segment_value_dtype(t); /* KIVI4: int4 value rows */
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[vt];
    const size_t d = view->d, dv = view->dv;
    const size_t ks = t == KVC_DTYPE_KIVI4 ? 0u : (size_t)kvc_row_bytes(t, d), vs = (size_t)kvc_row_bytes(vt, dv);
    const unsigned char *K = kvc_segment_key_rows(seg), *V = kvc_segment_value_rows(seg);
    const int in_num = (seg->role & KVC_SET_NUM) != 0 && mass == NULL;
    union { /* row-major keys, or KIVI4's channel-major key block */
        float rows[BLK * KVC_MAX_HEAD_DIM];
        float cols[KVC_MAX_HEAD_DIM * KCOL_STRIDE];
    } kbuf;
    float *kf = kbuf.rows, vfl[BLK * KVC_MAX_HEAD_DIM];
    key_source src = {NULL, NULL, 0, NULL, NULL, 0};
    const int i4_int = t == KVC_DTYPE_I4 && q8 != NULL; /* int4 keys scored on integers, not dequantised */
#ifdef v_i4_pv
    const int pv_int = vt == KVC_DTYPE_I4 && dv % 64u == 0; /* int4 value rows accumulated on integers */
#else
    const int pv_int = 0;
#endif
    const size_t first = t == KVC_DTYPE_KIVI4 ? seg->first : 0u;
    size_t have_block = SIZE_MAX; /* the KIVI4 key block now in kbuf.cols */
    if (t == KVC_DTYPE_KIVI4)
        for (size_t c = 0; c < d; c++) memset(kbuf.cols + c * KCOL_STRIDE + KVC_KIVI_BLOCK, 0, VW * sizeof(float));
    for (size_t j0 = 0, nb; j0 < seg->n; j0 += nb) {
        nb = seg->n - j0 < BLK ? seg->n - j0 : BLK;
        if (t == KVC_DTYPE_KIVI4) {
            /* KIVI4 keys: a block of the pass stays inside one key block,
               dequantised once for all of its pass blocks */
            const size_t in_block = KVC_KIVI_BLOCK - (first + j0) % KVC_KIVI_BLOCK;
            if (nb > in_block) nb = in_block;
            const size_t pos = first + j0, blk = pos / KVC_KIVI_BLOCK;
            if (blk != have_block) {
                kivi4_block_to_cols(K + blk * KVC_KIVI4_KEY_BLOCK_BYTES(d), kbuf.cols, d);
                have_block = blk;
            }
            src.cols = kbuf.cols + pos % KVC_KIVI_BLOCK;
        }
        for (size_t j = 0; j < nb; j++) {
            /* int4 rows in float (the reference's values, faster); Q15 by the reference load */
            if (t == KVC_DTYPE_I4) {
                if (!i4_int) i4_row_to_f32(K + (j0 + j) * ks, kf + j * d, d);
            } else if (t != KVC_DTYPE_KIVI4)
                rk->load(K + (j0 + j) * ks, kf + j * d, d);
            if (in_num && pv_int)
                ; /* read as they are by v_i4_pv */
            else if (in_num && vt == KVC_DTYPE_I4)
                i4_row_to_f32(V + (j0 + j) * vs, vfl + j * dv, dv);
            else if (in_num)
                rk->load(V + (j0 + j) * vs, vfl + j * dv, dv);
        }
        if (i4_int) src.i4 = K + j0 * ks, src.i4_stride = ks, src.q8 = q8;
        if (pv_int && in_num) src.vi4 = V + j0 * vs, src.vi4_stride = vs;
        kvc_segment sub = *seg;
        sub.dtype = KVC_DTYPE_F32;
        sub.keys = kf, sub.values = in_num ? vfl : NULL, sub.keys_q = NULL, sub.values_q = NULL;
        sub.weights = seg->weights ? seg->weights + j0 : NULL;
        sub.n = nb;
        if (mass)
            segment_mass(KVC_DTYPE_F32, view, &sub, b, n_causal_total, e_causal, causal, st, mass + j0,
                         src.cols || src.i4 ? &src : NULL);
        else
            segment_pass(KVC_DTYPE_F32, view, &sub, b, n_causal_total, e_causal, causal, st,
                         src.cols || src.i4 || src.vi4 ? &src : NULL, 1);
    }
}

static kvc_status attend_batch_simd(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b,
                                    void *work, size_t work_bytes)
{
    /* what this kernel does not do, and malformed calls, go to the reference
       (which checks and refuses the latter) */
    const kvc_kernels *ref = kvc_kernels_ref();
    if (kern == NULL || view == NULL || b == NULL || b->q == NULL || b->out == NULL || work == NULL ||
        view->n_seg > KVC_VIEW_MAX_SEGMENTS || b->causal_segs > view->n_seg || b->n_pos < 1 ||
        b->n_pos > KVC_MAX_BATCH_POSITIONS || b->n_q < 1 || b->n_q > KVC_MAX_QUERY_HEADS || view->d < 1 ||
        view->d > KVC_MAX_HEAD_DIM || view->dv < 1 || view->dv > KVC_MAX_HEAD_DIM ||
        ((uintptr_t)work % sizeof(double)) != 0 || work_bytes < kvc_attend_work_bytes(b->n_pos, b->n_q, view->dv))
        return ref->attend_batch(ref, view, b, work, work_bytes);
    size_t causal_total = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const void *k = kvc_segment_key_rows(seg), *v = kvc_segment_value_rows(seg);
        if ((seg->dtype > KVC_DTYPE_I8 && seg->dtype != KVC_DTYPE_I4 && seg->dtype != KVC_DTYPE_Q15 &&
             seg->dtype != KVC_DTYPE_KIVI4) ||
            (seg->dtype == KVC_DTYPE_KIVI4 && seg->first >= KVC_KIVI_BLOCK) ||
            (seg->n > 0 && (k == NULL || ((seg->role & KVC_SET_NUM) && v == NULL))))
            return ref->attend_batch(ref, view, b, work, work_bytes);
        if (s < b->causal_segs) causal_total += seg->n;
    }
    if (b->causal_segs > 0 && causal_total < b->n_pos) return ref->attend_batch(ref, view, b, work, work_bytes);
    const size_t Q = b->n_pos * b->n_q, W = view->dv + 3u;
    float *st = (float *)work; /* f32 state: half the room the doubles of the contract give */
    memset(st, 0, Q * W * sizeof(float));
    /* int4 keys on the integer units: every query prepared once, in the
       workspace's other half when it has the room (d <= 3.2 (dv + 3)) */
    const unsigned char *q8 = NULL;
#ifdef v_i4_q8_scores
    int any_i4 = 0;
    for (size_t s = 0; s < view->n_seg; s++) any_i4 |= view->seg[s].dtype == KVC_DTYPE_I4 && view->seg[s].n > 0;
    if (any_i4 && view->d % 64u == 0 && work_bytes - Q * W * sizeof(float) >= Q * Q8_BYTES(view->d)) {
        unsigned char *qp = (unsigned char *)(st + Q * W);
        for (size_t qi = 0; qi < Q; qi++) q8_prepare(b->q + qi * view->d, view->d, qp + qi * Q8_BYTES(view->d));
        q8 = qp;
    }
#endif
    size_t e_causal = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const int causal = s < b->causal_segs;
        switch (seg->dtype) { /* one specialised loop per storage type */
        case KVC_DTYPE_F32:
            segment_pass(KVC_DTYPE_F32, view, seg, b, causal_total, &e_causal, causal, st, NULL, 0);
            break;
        case KVC_DTYPE_F16:
            segment_pass(KVC_DTYPE_F16, view, seg, b, causal_total, &e_causal, causal, st, NULL, 0);
            break;
        case KVC_DTYPE_I4:
        case KVC_DTYPE_Q15:
        case KVC_DTYPE_KIVI4:
            dequantised_segment_pass(seg->dtype, view, seg, b, causal_total, &e_causal, causal, st, NULL, q8);
            break;
        default: segment_pass(KVC_DTYPE_I8, view, seg, b, causal_total, &e_causal, causal, st, NULL, 0); break;
        }
    }
    /* The f32 sums overflow where the reference's doubles do not (values
       near FLT_MAX / n, scores past FLT_MAX): exact attention is a convex
       combination of finite values, so it must not come back as KVC_E_RANGE.
       A batch whose sums are not all finite goes to the reference instead
       (kvc_attend.h: only views whose N and D sets differ may overflow),
       and so does one with a score that is not finite (segment_pass marks
       it with a NaN denominator). */
    size_t n_entries = 0;
    for (size_t s = 0; s < view->n_seg; s++) n_entries += view->seg[s].n;
    if (kvc_f32_state_needs_reference(st, Q, W, n_entries)) /* and far-apart split views: shared/f32_state.h */
        return ref->attend_batch(ref, view, b, work, work_bytes);
    for (size_t qi = 0; qi < Q; qi++) {
        const float *q_st = st + qi * W;
        const float inv = q_st[2] > 0.0f ? 1.0f / q_st[2] : 0.0f;
        for (size_t c = 0; c < view->dv; c++) b->out[qi * view->dv + c] = q_st[3 + c] * inv;
    }
    if (b->mass != NULL) { /* the second pass: keys only */
        size_t e = 0;
        e_causal = 0;
        for (size_t s = 0; s < view->n_seg; s++) {
            const kvc_segment *seg = &view->seg[s];
            const int causal = s < b->causal_segs;
            switch (seg->dtype) {
            case KVC_DTYPE_F32:
                segment_mass(KVC_DTYPE_F32, view, seg, b, causal_total, &e_causal, causal, st, b->mass + e, NULL);
                break;
            case KVC_DTYPE_F16:
                segment_mass(KVC_DTYPE_F16, view, seg, b, causal_total, &e_causal, causal, st, b->mass + e, NULL);
                break;
            case KVC_DTYPE_I4:
            case KVC_DTYPE_Q15:
            case KVC_DTYPE_KIVI4:
                dequantised_segment_pass(seg->dtype, view, seg, b, causal_total, &e_causal, causal, st, b->mass + e,
                                         q8);
                break;
            default:
                segment_mass(KVC_DTYPE_I8, view, seg, b, causal_total, &e_causal, causal, st, b->mass + e, NULL);
                break;
            }
            e += seg->n;
        }
    }
    if (b->state !=
        NULL) /* split-K: widen the state to doubles (last query first: the f32 one is read before overwritten) */
        for (size_t qi = Q; qi-- > 0;) {
            const float *q_st = st + qi * W;
            double *o = b->state + qi * KVC_ATTEND_STATE(view->dv);
            const float m = q_st[0], have = q_st[1];
            o[0] = have != 0.0f ? (double)m : -INFINITY;
            for (size_t c = 0; c < view->dv + 1u; c++) o[1 + c] = (double)q_st[2 + c];
        }
    return KVC_OK;
}

/* The one-position f32 attend: the batched kernel over a stack workspace, one head at a time. */
static kvc_status attend_f32_simd(const kvc_view *view, const float *q, size_t n_q, float *out)
{
    double work[KVC_MAX_HEAD_DIM + 3];
    for (size_t h = 0; h < n_q; h++) {
        const kvc_attend_batch b = {q + h * view->d, 1, 1, 0, out + h * view->dv, NULL, NULL};
        const kvc_status rc = attend_batch_simd(kvc_kernels_ref(), view, &b, work, sizeof work);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

/* ---- the reductions of the walks and of SubGen, in double as the
 * reference, over VW lanes: each lane sums every VW-th element in order and
 * the lanes are added at the end. The order differs from the reference's
 * sequential sum, so the results may differ in the last bits, and a method
 * whose choices compare such sums (the balancing and halving walks) may
 * choose differently on this table: tests/kernels/test_backends.c finds
 * which (methods_on_every_table) and checks their invariants. An int8
 * product without centre sums integers, exact in any order: the same bits. */
KVC_INLINE double lanes_sum(const double *acc)
{
    double s = 0.0;
    for (size_t l = 0; l < VW; l++) s += acc[l];
    return s;
}

KVC_INLINE double dot_rows_simd(unsigned t, const unsigned char *a, const unsigned char *b, const double *mu,
                                size_t dim)
{
    double acc[VW];
    float fa[VW], fb[VW];
    for (size_t l = 0; l < VW; l++) acc[l] = 0.0;
    const double sa = row_scale(t, a), sb = row_scale(t, b);
    size_t c = 0;
    for (; c + VW <= dim; c += VW) {
        v_store(fa, v_row(t, a, c)), v_store(fb, v_row(t, b, c));
        if (mu)
            for (size_t l = 0; l < VW; l++) acc[l] += (sa * fa[l] - mu[c + l]) * (sb * fb[l] - mu[c + l]);
        else
            for (size_t l = 0; l < VW; l++) acc[l] += (double)fa[l] * (double)fb[l];
    }
    for (; c < dim; c++)
        acc[0] += mu ? (sa * ld1(t, a, c) - mu[c]) * (sb * ld1(t, b, c) - mu[c]) : (double)ld1(t, a, c) * ld1(t, b, c);
    const double s = lanes_sum(acc);
    return mu ? s : s * sa * sb;
}

KVC_INLINE double dot_f64_simd(unsigned t, const unsigned char *row, const double *x, size_t dim)
{
    double acc[VW];
    float f[VW];
    for (size_t l = 0; l < VW; l++) acc[l] = 0.0;
    size_t c = 0;
    for (; c + VW <= dim; c += VW) {
        v_store(f, v_row(t, row, c));
        for (size_t l = 0; l < VW; l++) acc[l] += (double)f[l] * x[c + l];
    }
    for (; c < dim; c++) acc[0] += (double)ld1(t, row, c) * x[c];
    return lanes_sum(acc) * (double)row_scale(t, row);
}

KVC_INLINE double sqdist_simd(unsigned t, const unsigned char *row, const float *x, size_t dim)
{
    double acc[VW];
    float f[VW];
    for (size_t l = 0; l < VW; l++) acc[l] = 0.0;
    const double s = row_scale(t, row);
    size_t c = 0;
    for (; c + VW <= dim; c += VW) {
        v_store(f, v_row(t, row, c));
        for (size_t l = 0; l < VW; l++) {
            const double e = s * f[l] - (double)x[c + l];
            acc[l] += e * e;
        }
    }
    for (; c < dim; c++) {
        const double e = s * ld1(t, row, c) - (double)x[c];
        acc[0] += e * e;
    }
    return lanes_sum(acc);
}

#define KVC_SIMD_ROW_KERNELS(ty, T)                                                                                    \
    static double ty##_dot_rows(const void *a, const void *b, const double *mu, size_t dim)                            \
    {                                                                                                                  \
        return dot_rows_simd(T, (const unsigned char *)a, (const unsigned char *)b, mu, dim);                          \
    }                                                                                                                  \
    static double ty##_dot_f64(const void *r, const double *x, size_t dim) { return dot_f64_simd(T, r, x, dim); }      \
    static double ty##_sqdist(const void *r, const float *x, size_t dim) { return sqdist_simd(T, r, x, dim); }
KVC_SIMD_ROW_KERNELS(f32, KVC_DTYPE_F32)
KVC_SIMD_ROW_KERNELS(f16, KVC_DTYPE_F16)
KVC_SIMD_ROW_KERNELS(i8, KVC_DTYPE_I8)

static double f32_dot(const void *row, const float *x, size_t dim) { return dot_row(KVC_DTYPE_F32, row, x, dim); }
static double f16_dot(const void *row, const float *x, size_t dim) { return dot_row(KVC_DTYPE_F16, row, x, dim); }
static double i8_dot(const void *row, const float *x, size_t dim) { return dot_row(KVC_DTYPE_I8, row, x, dim); }

#ifdef v_i4_q8_scores
#define KVC_SIMD_Q8_CAP KVC_CAP_Q8_INT4
#else
#define KVC_SIMD_Q8_CAP 0u
#endif
#ifdef v_i4_pv
#define KVC_SIMD_PV_CAP KVC_CAP_Q8_PV_INT4
#else
#define KVC_SIMD_PV_CAP 0u
#endif

/* This ISA's entries of the kernel table (kernels.c assembles the table). */
#define KVC_SIMD_ENTRIES(isa, needs_bits)                                                                              \
    const kvc_simd_entries kvc_simd_entries_##isa = {                                                                  \
        .name = #isa,                                                                                                  \
        .needs = (needs_bits),                                                                                         \
        .caps =                                                                                                        \
            KVC_CAP_F32 | KVC_CAP_F16 | KVC_CAP_I8 | KVC_CAP_BATCH | KVC_CAP_MASS | KVC_SIMD_Q8_CAP | KVC_SIMD_PV_CAP, \
        .attend_f32 = attend_f32_simd,                                                                                 \
        .attend_batch = attend_batch_simd,                                                                             \
        .row_dot_f32 = {[KVC_DTYPE_F32] = f32_dot, [KVC_DTYPE_F16] = f16_dot, [KVC_DTYPE_I8] = i8_dot},                \
        .row_dot_f64 = {[KVC_DTYPE_F32] = f32_dot_f64, [KVC_DTYPE_F16] = f16_dot_f64, [KVC_DTYPE_I8] = i8_dot_f64},    \
        .row_dot_rows =                                                                                                \
            {[KVC_DTYPE_F32] = f32_dot_rows, [KVC_DTYPE_F16] = f16_dot_rows, [KVC_DTYPE_I8] = i8_dot_rows},            \
        .row_sqdist_f32 = {[KVC_DTYPE_F32] = f32_sqdist, [KVC_DTYPE_F16] = f16_sqdist, [KVC_DTYPE_I8] = i8_sqdist}}

#endif /* KVC_ATTEND_SIMD_H */
