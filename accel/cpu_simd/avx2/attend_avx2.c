/* AVX2 + FMA + F16C kernel table: the batched attend and the scoring row
 * kernel for f32, f16 and int8 rows. Compiled with -mavx2 -mfma -mf16c for
 * this file only; elsewhere (a build without those flags) it is empty and
 * kernels.c does not list it.
 *
 * The batched attend works on blocks of 8 entries of one segment: for every
 * query it computes the 8 scores (rows stay in L1 across the queries), takes
 * the block's maximum, rescales its running sums at most once per block, and
 * adds p_j = e^{s_j - m} (vector exp, below) times each value row. Sums are
 * in f32, as in flash-decoding; the reference kernel (double) is the ground
 * truth and tests/kernels/test_backends.c bounds the difference from the
 * reduction lengths. Attention mass is not computed here: a call that asks
 * for it goes to the reference kernel. */
#include "kvc/kvc_kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "ref/rows_ref.h"
#include "shared/rows.h"

#define KVC_INLINE static inline __attribute__((always_inline))
#define BLK 8

/* ---- rows: 8 elements from c, as floats (int8 without its scale) ---- */
KVC_INLINE __m256 ld8(unsigned t, const unsigned char *row, size_t c)
{
    if (t == KVC_DTYPE_F32) return _mm256_loadu_ps((const float *)(const void *)row + c);
    if (t == KVC_DTYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c)));
    const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(row + 4 + c));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
}

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

KVC_INLINE float hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* <row, q> over d elements, f32 accumulation (two accumulators). */
KVC_INLINE float dot_row(unsigned t, const unsigned char *row, const float *q, size_t d)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t c = 0;
    for (; c + 16 <= d; c += 16) {
        a0 = _mm256_fmadd_ps(ld8(t, row, c), _mm256_loadu_ps(q + c), a0);
        a1 = _mm256_fmadd_ps(ld8(t, row, c + 8), _mm256_loadu_ps(q + c + 8), a1);
    }
    for (; c + 8 <= d; c += 8) a0 = _mm256_fmadd_ps(ld8(t, row, c), _mm256_loadu_ps(q + c), a0);
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; c < d; c++) s += ld1(t, row, c) * q[c];
    return s * row_scale(t, row);
}

/* acc += p * row over dv elements. */
KVC_INLINE void axpy_row(unsigned t, float *acc, float p, const unsigned char *row, size_t dv)
{
    p *= row_scale(t, row);
    const __m256 pv = _mm256_set1_ps(p);
    size_t c = 0;
    for (; c + 8 <= dv; c += 8) _mm256_storeu_ps(acc + c, _mm256_fmadd_ps(pv, ld8(t, row, c), _mm256_loadu_ps(acc + c)));
    for (; c < dv; c++) acc[c] += p * ld1(t, row, c);
}

/* The 8 scores <row_j, q>, j < nb (<= 8), as one vector: 8 accumulators
 * over d, then one hadd tree instead of 8 horizontal sums. */
KVC_INLINE __m256 dot8_rows(unsigned t, const unsigned char *K, size_t ks, size_t nb, const float *q, size_t d)
{
    __m256 a[BLK];
    for (size_t j = 0; j < BLK; j++) a[j] = _mm256_setzero_ps();
    size_t c = 0;
    if (nb == BLK) {
        for (; c + 8 <= d; c += 8) {
            const __m256 qv = _mm256_loadu_ps(q + c);
            for (size_t j = 0; j < BLK; j++) a[j] = _mm256_fmadd_ps(ld8(t, K + j * ks, c), qv, a[j]);
        }
    } else {
        for (; c + 8 <= d; c += 8) {
            const __m256 qv = _mm256_loadu_ps(q + c);
            for (size_t j = 0; j < nb; j++) a[j] = _mm256_fmadd_ps(ld8(t, K + j * ks, c), qv, a[j]);
        }
    }
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    __m256 sum = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    if (c < d) { /* d not a multiple of 8: the last elements one by one */
        float tail[BLK] = {0};
        for (size_t j = 0; j < nb; j++)
            for (size_t cc = c; cc < d; cc++) tail[j] += ld1(t, K + j * ks, cc) * q[cc];
        sum = _mm256_add_ps(sum, _mm256_loadu_ps(tail));
    }
    if (t == KVC_DTYPE_I8) { /* each row's scale */
        float scale[BLK] = {0};
        for (size_t j = 0; j < nb; j++) scale[j] = row_scale(t, K + j * ks);
        sum = _mm256_mul_ps(sum, _mm256_loadu_ps(scale));
    }
    return sum;
}

/* Scores of 3 queries against a full block of 8 rows, each row chunk loaded
 * (and converted) once for the three: 4 rows x 3 queries = 12 accumulators
 * per half block. Results in s[3][8]; d must be a multiple of 8. */
KVC_INLINE void dot8_rows_q3(unsigned t, const unsigned char *K, size_t ks, const float *q0, const float *q1,
                             const float *q2, size_t d, __m256 out[3])
{
    __m128 half[2][3];
    for (size_t h = 0; h < 2; h++) {
        const unsigned char *R = K + 4 * h * ks;
        __m256 a[3][4];
        for (size_t x = 0; x < 3; x++)
            for (size_t j = 0; j < 4; j++) a[x][j] = _mm256_setzero_ps();
        for (size_t c = 0; c < d; c += 8) {
            const __m256 v0 = _mm256_loadu_ps(q0 + c), v1 = _mm256_loadu_ps(q1 + c), v2 = _mm256_loadu_ps(q2 + c);
            for (size_t j = 0; j < 4; j++) {
                const __m256 r = ld8(t, R + j * ks, c);
                a[0][j] = _mm256_fmadd_ps(r, v0, a[0][j]);
                a[1][j] = _mm256_fmadd_ps(r, v1, a[1][j]);
                a[2][j] = _mm256_fmadd_ps(r, v2, a[2][j]);
            }
        }
        for (size_t x = 0; x < 3; x++) {
            const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[x][0], a[x][1]), _mm256_hadd_ps(a[x][2], a[x][3]));
            half[h][x] = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
        }
    }
    for (size_t x = 0; x < 3; x++) {
        __m256 sum = _mm256_set_m128(half[1][x], half[0][x]);
        if (t == KVC_DTYPE_I8) {
            float scale[BLK];
            for (size_t j = 0; j < BLK; j++) scale[j] = row_scale(t, K + j * ks);
            sum = _mm256_mul_ps(sum, _mm256_loadu_ps(scale));
        }
        out[x] = sum;
    }
}

/* acc += sum_j p_j row_j over the nb rows of a block, 64 channels at a time
 * held in registers (the accumulators are read and written once per block). */
KVC_INLINE void axpy_block(unsigned t, float *acc, const float *p, const unsigned char *V, size_t vs, size_t nb, size_t dv)
{
    float ps[BLK];
    if (t == KVC_DTYPE_I8)
        for (size_t j = 0; j < nb; j++) ps[j] = p[j] * row_scale(t, V + j * vs);
    else
        memcpy(ps, p, nb * sizeof(float));
    size_t c = 0;
    for (; c + 64 <= dv; c += 64) {
        __m256 a0 = _mm256_loadu_ps(acc + c), a1 = _mm256_loadu_ps(acc + c + 8), a2 = _mm256_loadu_ps(acc + c + 16),
               a3 = _mm256_loadu_ps(acc + c + 24), a4 = _mm256_loadu_ps(acc + c + 32), a5 = _mm256_loadu_ps(acc + c + 40),
               a6 = _mm256_loadu_ps(acc + c + 48), a7 = _mm256_loadu_ps(acc + c + 56);
        for (size_t j = 0; j < nb; j++) {
            const unsigned char *v = V + j * vs;
            const __m256 pv = _mm256_set1_ps(ps[j]);
            a0 = _mm256_fmadd_ps(pv, ld8(t, v, c), a0), a1 = _mm256_fmadd_ps(pv, ld8(t, v, c + 8), a1);
            a2 = _mm256_fmadd_ps(pv, ld8(t, v, c + 16), a2), a3 = _mm256_fmadd_ps(pv, ld8(t, v, c + 24), a3);
            a4 = _mm256_fmadd_ps(pv, ld8(t, v, c + 32), a4), a5 = _mm256_fmadd_ps(pv, ld8(t, v, c + 40), a5);
            a6 = _mm256_fmadd_ps(pv, ld8(t, v, c + 48), a6), a7 = _mm256_fmadd_ps(pv, ld8(t, v, c + 56), a7);
        }
        _mm256_storeu_ps(acc + c, a0), _mm256_storeu_ps(acc + c + 8, a1), _mm256_storeu_ps(acc + c + 16, a2);
        _mm256_storeu_ps(acc + c + 24, a3), _mm256_storeu_ps(acc + c + 32, a4), _mm256_storeu_ps(acc + c + 40, a5);
        _mm256_storeu_ps(acc + c + 48, a6), _mm256_storeu_ps(acc + c + 56, a7);
    }
    for (; c + 8 <= dv; c += 8) {
        __m256 a = _mm256_loadu_ps(acc + c);
        for (size_t j = 0; j < nb; j++) a = _mm256_fmadd_ps(_mm256_set1_ps(ps[j]), ld8(t, V + j * vs, c), a);
        _mm256_storeu_ps(acc + c, a);
    }
    for (; c < dv; c++)
        for (size_t j = 0; j < nb; j++) acc[c] += ps[j] * ld1(t, V + j * vs, c);
}

/* e^x for 8 lanes, x <= 0 (or -inf: 0): Cody-Waite reduction x = n ln2 + r,
 * |r| <= ln2/2, a degree-6 polynomial for e^r (relative error < 2e-7), and
 * 2^n through the exponent bits. Below -87.3 the result flushes to 0. */
KVC_INLINE __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

static float exp1(float x)
{
    float in[8] = {x, x, x, x, x, x, x, x}, out[8];
    _mm256_storeu_ps(out, exp8(_mm256_loadu_ps(in)));
    return out[0];
}

/* One segment of one storage type, for every query: the block loop. */
KVC_INLINE void segment_pass(unsigned t, const kvc_view *view, const kvc_segment *seg, const kvc_attend_batch *b,
                             size_t n_causal_total, size_t *e_causal, int causal, float *st)
{
    const size_t d = view->d, dv = view->dv, n_q = b->n_q, Q = b->n_pos * n_q, W = dv + 3u;
    const size_t ks = (size_t)kvc_row_bytes(t, d), vs = (size_t)kvc_row_bytes(t, dv);
    const unsigned char *K = kvc_segment_key_rows(seg), *V = kvc_segment_value_rows(seg);
    const int in_num = (seg->role & KVC_SET_NUM) != 0, in_den = (seg->role & KVC_SET_DEN) != 0;
    const float beta = view->beta;
    const double ln_scale = kvc_log_pos(seg->scale);
    for (size_t j0 = 0; j0 < seg->n; j0 += BLK) {
        const size_t nb = seg->n - j0 < BLK ? seg->n - j0 : BLK;
        float lw[BLK] = {0};
        size_t p0[BLK];
        for (size_t j = 0; j < nb; j++) {
            double x = ln_scale;
            if (seg->weights) {
                const double w = (double)seg->weights[j0 + j];
                x = w > 0.0 ? x + (isfinite(w) ? kvc_log_pos(w) : w) : -INFINITY;
            }
            lw[j] = (float)x;
            if (causal) {
                const size_t e = (*e_causal)++, later = n_causal_total - 1u - e;
                p0[j] = later >= b->n_pos - 1u ? 0u : b->n_pos - 1u - later;
            } else {
                p0[j] = 0;
            }
        }
        int masked = causal;
        for (size_t j = 0; j < nb; j++) masked |= lw[j] == -INFINITY;
        __m256 sc3[3];
        size_t sc3_first = (size_t)-1; /* the first query whose scores sc3 holds (three at a time) */
        for (size_t qi = 0; qi < Q; qi++) {
            float *q_st = st + qi * W, *acc = q_st + 3;
            const size_t pos = qi / n_q;
            float s[BLK];
            __m256 dots;
            const int cached = sc3_first != (size_t)-1 && qi - sc3_first < 3;
            if (nb == BLK && d % 8 == 0 && (cached || (qi % 3 == 0 && qi + 3 <= Q))) {
                if (!cached) {
                    dot8_rows_q3(t, K + j0 * ks, ks, b->q + qi * d, b->q + (qi + 1) * d, b->q + (qi + 2) * d, d, sc3);
                    sc3_first = qi;
                }
                dots = sc3[qi - sc3_first];
            } else {
                dots = dot8_rows(t, K + j0 * ks, ks, nb, b->q + qi * d, d);
            }
            _mm256_storeu_ps(s, _mm256_fmadd_ps(_mm256_set1_ps(beta), dots, _mm256_loadu_ps(lw)));
            float mb = -INFINITY;
            if (masked || nb < BLK) {
                for (size_t j = 0; j < nb; j++) {
                    if (lw[j] == -INFINITY || pos < p0[j]) s[j] = -INFINITY;
                    if (s[j] > mb) mb = s[j];
                }
            } else { /* every entry seen: the block maximum in registers */
                __m256 mx = _mm256_loadu_ps(s);
                mx = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 1));
                mx = _mm256_max_ps(mx, _mm256_permute_ps(mx, 0x4E));
                mx = _mm256_max_ps(mx, _mm256_permute_ps(mx, 0xB1));
                mb = _mm256_cvtss_f32(mx);
            }
            if (mb == -INFINITY) continue; /* nothing of this block is seen by this query */
            if (q_st[1] == 0.0f || mb > q_st[0]) {
                const float r = q_st[1] != 0.0f ? exp1(q_st[0] - mb) : 0.0f;
                q_st[2] *= r;
                const __m256 rv = _mm256_set1_ps(r);
                size_t c = 0;
                for (; c + 8 <= dv; c += 8) _mm256_storeu_ps(acc + c, _mm256_mul_ps(rv, _mm256_loadu_ps(acc + c)));
                for (; c < dv; c++) acc[c] *= r;
                q_st[0] = mb, q_st[1] = 1.0f;
            }
            float pj[BLK];
            for (size_t j = nb; j < BLK; j++) s[j] = -INFINITY;
            const __m256 pv = exp8(_mm256_sub_ps(_mm256_loadu_ps(s), _mm256_set1_ps(q_st[0])));
            _mm256_storeu_ps(pj, pv);
            if (in_den) q_st[2] += hsum(pv);
            if (in_num) axpy_block(t, acc, pj, V + j0 * vs, vs, nb, dv);
        }
    }
}

static kvc_status attend_batch_avx2(const kvc_kernels *kern, const kvc_view *view, const kvc_attend_batch *b,
                                    void *work, size_t work_bytes)
{
    /* what this kernel does not do, and malformed calls, go to the reference
       (which checks and refuses the latter) */
    if (kern == NULL || view == NULL || b == NULL || b->mass != NULL || b->q == NULL || b->out == NULL ||
        work == NULL || view->n_seg > KVC_VIEW_MAX_SEGMENTS || b->causal_segs > view->n_seg || b->n_pos < 1 ||
        b->n_pos > KVC_MAX_BATCH_POSITIONS || b->n_q < 1 || b->n_q > KVC_MAX_QUERY_HEADS || view->d < 1 ||
        view->d > KVC_MAX_HEAD_DIM || view->dv < 1 || view->dv > KVC_MAX_HEAD_DIM ||
        ((uintptr_t)work % sizeof(double)) != 0 || work_bytes < kvc_attend_work_bytes(b->n_pos, b->n_q, view->dv))
        return kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), view, b, work, work_bytes);
    size_t causal_total = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const void *k = kvc_segment_key_rows(seg), *v = kvc_segment_value_rows(seg);
        if (seg->dtype > KVC_DTYPE_I8 || (seg->n > 0 && (k == NULL || ((seg->role & KVC_SET_NUM) && v == NULL))))
            return kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), view, b, work, work_bytes);
        if (s < b->causal_segs) causal_total += seg->n;
    }
    if (b->causal_segs > 0 && causal_total < b->n_pos)
        return kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), view, b, work, work_bytes);
    const size_t Q = b->n_pos * b->n_q, W = view->dv + 3u;
    float *st = (float *)work; /* per query: m, have_m, den, acc[dv] (f32: half the doubles' room) */
    memset(st, 0, Q * W * sizeof(float));
    size_t e_causal = 0;
    for (size_t s = 0; s < view->n_seg; s++) {
        const kvc_segment *seg = &view->seg[s];
        const int causal = s < b->causal_segs;
        switch (seg->dtype) {
        case KVC_DTYPE_F32: segment_pass(KVC_DTYPE_F32, view, seg, b, causal_total, &e_causal, causal, st); break;
        case KVC_DTYPE_F16: segment_pass(KVC_DTYPE_F16, view, seg, b, causal_total, &e_causal, causal, st); break;
        default: segment_pass(KVC_DTYPE_I8, view, seg, b, causal_total, &e_causal, causal, st); break;
        }
    }
    for (size_t qi = 0; qi < Q; qi++) {
        const float *q_st = st + qi * W;
        const float inv = q_st[2] > 0.0f ? 1.0f / q_st[2] : 0.0f;
        for (size_t c = 0; c < view->dv; c++) b->out[qi * view->dv + c] = q_st[3 + c] * inv;
    }
    if (b->state != NULL) /* split-K: widen the state to doubles (written after the f32 one is read) */
        for (size_t qi = Q; qi-- > 0;) {
            const float *q_st = st + qi * W;
            double *o = b->state + qi * KVC_ATTEND_STATE(view->dv);
            const float m = q_st[0], have = q_st[1];
            o[0] = have != 0.0f ? (double)m : -INFINITY;
            for (size_t c = 0; c < view->dv + 1u; c++) o[1 + c] = (double)q_st[2 + c];
        }
    return KVC_OK;
}

/* The one-position f32 attend: the batched kernel over a stack workspace,
 * one head at a time. */
static kvc_status attend_f32_avx2(const kvc_view *view, const float *q, size_t n_q, float *out)
{
    double work[KVC_MAX_HEAD_DIM + 3];
    for (size_t h = 0; h < n_q; h++) {
        const kvc_attend_batch b = {q + h * view->d, 1, 1, 0, out + h * view->dv, NULL, NULL};
        const kvc_status rc = attend_batch_avx2(kvc_kernels_ref(), view, &b, work, sizeof work);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

static double f32_dot(const void *row, const float *x, size_t dim) { return dot_row(KVC_DTYPE_F32, row, x, dim); }
static double f16_dot(const void *row, const float *x, size_t dim) { return dot_row(KVC_DTYPE_F16, row, x, dim); }
static double i8_dot(const void *row, const float *x, size_t dim) { return dot_row(KVC_DTYPE_I8, row, x, dim); }

const kvc_kernels *kvc_kernels_avx2_table(void);
const kvc_kernels *kvc_kernels_avx2_table(void)
{
    static kvc_kernels t;
    static int state; /* 0 not built, 1 being built, 2 ready: built once, whoever calls first */
    int expect = 0;
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2 &&
        __atomic_compare_exchange_n(&state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        kvc_kernels x = *kvc_kernels_ref(); /* the reference entries, then ours */
        x.name = "avx2";
        x.needs = KVC_CPU_AVX2;
        x.caps = KVC_CAP_F32 | KVC_CAP_F16 | KVC_CAP_I8 | KVC_CAP_BATCH; /* mass: by the reference */
        x.attend_f32 = attend_f32_avx2;
        x.attend_batch = attend_batch_avx2;
        x.rows[KVC_DTYPE_F32].dot_f32 = f32_dot;
        x.rows[KVC_DTYPE_F16].dot_f32 = f16_dot;
        x.rows[KVC_DTYPE_I8].dot_f32 = i8_dot;
        t = x;
        __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
    }
    while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2) {
    }
    return &t;
}
#else
typedef int kvc_avx2_not_built; /* an empty file is not valid C */
#endif
