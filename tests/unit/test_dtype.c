/* Storage types, for every registered method (iterated from the registry):
 *  - a method whose choices do not depend on the values of keys and values
 *    (methods.h: choices_read_values == 0) keeps, with f16 or int8 storage, exactly the
 *    entries and weights it keeps with f32, and its output moves by no more
 *    than what the rows' quantisation errors allow. With every score moved by
 *    at most delta = max_i beta |<q, k'_i - k_i>| and values by Dv_i:
 *      |z' - z| <= [(e^delta - 1)(e^delta + 1) A + e^{2 delta} Dv] / D + rounding,
 *    A = sum_N a_i e^{s_i} |v_i|, Dv = sum_N a_i e^{s_i} |Dv_i|, D = sum_D b_i e^{s_i}
 *    (N and D may differ, as in SubGen; the bound needs only fixed weights);
 *  - every method: arenas validate, are smaller than f32's, are deterministic,
 *    and outputs are finite (or KVC_E_RANGE with zeros).
 * Row kernels themselves: f16 round trip exact on representable values and
 * within 2^-11 relative otherwise; int8 and Q15 within scale/2 per element; int4
 * within half a step of its group's grid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "methods.h"
#include "ref/rows_ref.h"
#include "ref/rows_typed.h"

#define D  ((size_t)16)
#define NQ ((size_t)2)

static const kvc_row_kernels *rk(unsigned t) { return &kvc_kernels_ref()->rows[t]; }

static int row_kernels_round_trip(void)
{
    kvc_rng r;
    kvc_rng_seed(&r, 21);
    printf("seed 21\n");
    unsigned char row[4 * 256 + 8];
    float x[256], y[256];
    double worst16 = 0.0, worst8 = 0.0, worst15 = 0.0, worst4 = 0.0;
    for (int rep = 0; rep < 2000; rep++) {
        const size_t dim = 1 + kvc_rng_below(&r, 256);
        const double scale = ldexp(1.0, (int)kvc_rng_below(&r, 32) - 20); /* |x| well below 65504 */
        for (size_t c = 0; c < dim; c++) x[c] = (float)(kvc_rng_normal(&r) * scale);
        rk(KVC_DTYPE_F16)->store(row, x, dim);
        rk(KVC_DTYPE_F16)->load(row, y, dim);
        for (size_t c = 0; c < dim; c++) {
            /* normal halves: relative 2^-11; subnormal halves: absolute 2^-25 */
            const double err = fabs((double)y[c] - x[c]), tol = fmax(fabs((double)x[c]) * 0x1p-11, 0x1p-25);
            CHECK_MSG(err <= tol, "f16 %g -> %g", x[c], y[c]);
            if (fabs((double)x[c]) > 1e-4 && err / fabs((double)x[c]) > worst16) worst16 = err / fabs((double)x[c]);
        }
        rk(KVC_DTYPE_F16)->store(row, y, dim); /* idempotent */
        rk(KVC_DTYPE_F16)->load(row, x, dim);
        CHECK(memcmp(x, y, dim * sizeof(float)) == 0);
        for (size_t c = 0; c < dim; c++) x[c] = (float)(kvc_rng_normal(&r) * scale);
        rk(KVC_DTYPE_I8)->store(row, x, dim);
        rk(KVC_DTYPE_I8)->load(row, y, dim);
        const double amax = rk(KVC_DTYPE_I8)->absmax(row, dim);
        double xmax = 0.0;
        for (size_t c = 0; c < dim; c++) xmax = fmax(xmax, fabs((double)x[c]));
        for (size_t c = 0; c < dim; c++) {
            /* half a step of max|x|/127, plus the float roundings of scale and product */
            const double err = fabs((double)y[c] - x[c]), tol = xmax / 254.0 * (1.0 + 1e-6) + xmax * 0x1p-23;
            CHECK_MSG(err <= tol, "int8 %g -> %g (max %g)", x[c], y[c], xmax);
            if (err / xmax > worst8) worst8 = err / xmax;
        }
        CHECK(fabs(amax - xmax) <= xmax * 0x1p-22);
        /* the reductions agree with the loaded floats to rounding */
        double want = 0.0;
        for (size_t c = 0; c < dim; c++) want += (double)y[c] * (double)x[c];
        double mag = 0.0;
        for (size_t c = 0; c < dim; c++) mag += fabs((double)y[c] * x[c]);
        CHECK(fabs(rk(KVC_DTYPE_I8)->dot_f32(row, x, dim) - want) <= mag * (double)dim * 0x1p-23);
        /* Q15: the same with 16-bit codes, half a step of max|x|/32767 */
        for (size_t c = 0; c < dim; c++) x[c] = (float)(kvc_rng_normal(&r) * scale);
        rk(KVC_DTYPE_Q15)->store(row, x, dim);
        rk(KVC_DTYPE_Q15)->load(row, y, dim);
        xmax = 0.0;
        for (size_t c = 0; c < dim; c++) xmax = fmax(xmax, fabs((double)x[c]));
        for (size_t c = 0; c < dim; c++) {
            const double err = fabs((double)y[c] - x[c]), tol = xmax / 65534.0 * (1.0 + 1e-6) + xmax * 0x1p-23;
            CHECK_MSG(err <= tol, "q15 %g -> %g (max %g)", x[c], y[c], xmax);
            if (err / xmax > worst15) worst15 = err / xmax;
        }
        CHECK(fabs(rk(KVC_DTYPE_Q15)->absmax(row, dim) - xmax) <= xmax * 0x1p-22);
        want = 0.0, mag = 0.0;
        for (size_t c = 0; c < dim; c++) want += (double)y[c] * (double)x[c], mag += fabs((double)y[c] * x[c]);
        CHECK(fabs(rk(KVC_DTYPE_Q15)->dot_f32(row, x, dim) - want) <= mag * (double)dim * 0x1p-23);
        CHECK(fabs(rk(KVC_DTYPE_Q15)->sqdist_f32(row, y, dim)) <= mag * (double)dim * 0x1p-40);
        /* int4, groups of 32: the stored minimum is the half at or below the
           group's lo (down by at most |lo| 2^-10, or 2^-24 among subnormals),
           the step the smallest half covering the range in 15 steps (up by a
           relative 2^-10, or 2^-24); each element is within half a step */
        for (size_t c = 0; c < dim; c++) x[c] = (float)(kvc_rng_normal(&r) * scale);
        rk(KVC_DTYPE_I4)->store(row, x, dim);
        rk(KVC_DTYPE_I4)->load(row, y, dim);
        for (size_t g0 = 0; g0 < dim; g0 += 32) {
            const size_t g1 = g0 + 32 < dim ? g0 + 32 : dim;
            double lo = x[g0], hi = x[g0];
            for (size_t c = g0; c < g1; c++) lo = fmin(lo, x[c]), hi = fmax(hi, x[c]);
            const double range = hi - lo + fabs(lo) * 0x1p-10 + 0x1p-24;
            const double step = (range / 15.0) * (1.0 + 0x1p-10) + 0x1p-24;
            for (size_t c = g0; c < g1; c++) {
                const double err = fabs((double)y[c] - x[c]), tol = step / 2.0 + fabs((double)x[c]) * 0x1p-23;
                CHECK_MSG(err <= tol, "int4 %g -> %g (group range [%g, %g])", x[c], y[c], lo, hi);
                if (hi - lo > 0x1p-10 && err / (hi - lo) > worst4) worst4 = err / (hi - lo); /* normal halves */
            }
        }
        want = 0.0, mag = 0.0;
        for (size_t c = 0; c < dim; c++) want += (double)y[c] * (double)x[c], mag += fabs((double)y[c] * x[c]);
        CHECK(fabs(rk(KVC_DTYPE_I4)->dot_f32(row, x, dim) - want) <= mag * (double)dim * 0x1p-23);
        CHECK(fabs(rk(KVC_DTYPE_I4)->sqdist_f32(row, y, dim)) <= mag * (double)dim * 0x1p-40);
    }
    /* the trusted rounding contract: half away from zero, clamped to [-127, 127] */
    static const double in[] = {0.5, -0.5, 1.49999, 126.5, 127.4, 1e30, -1e30, -126.5, 0.0, -0.49};
    static const int want_q[] = {1, -1, 1, 127, 127, 127, -127, -127, 0, 0};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK_MSG(kvc_round_clamp127(in[i]) == want_q[i], "%g", in[i]);
    static const double in15[] = {0.5, -0.5, 32766.5, 32767.4, 1e30, -1e30, -32766.5, 0.0, -0.49, 0.0 / 0.0};
    static const int want15[] = {1, -1, 32767, 32767, 32767, -32767, -32767, 0, 0, 32767};
    for (size_t i = 0; i < sizeof in15 / sizeof in15[0]; i++)
        CHECK_MSG(kvc_round_clamp32767(in15[i]) == want15[i], "%g", in15[i]);
    /* f16 extremes: saturation at 65504, NaN stays NaN, the smallest subnormal */
    float big[3] = {1e6f, -7e4f, 6e-8f};
    rk(KVC_DTYPE_F16)->store(row, big, 3);
    rk(KVC_DTYPE_F16)->load(row, y, 3);
    CHECK(y[0] == 65504.0f && y[1] == -65504.0f && y[2] == 0x1p-24f);
    /* int4 past the halves' range: the group's grid saturates (minimum and step
       at most 65504), and an element beyond it takes the grid's top code, not
       the bottom one (the code's rounding must not see a quotient past a long) */
    float wide[4] = {1e38f, 1.0f, -1e38f, 3e20f};
    for (size_t i = 0; i < 2; i++) {
        const float pair[2] = {wide[2 * i], wide[2 * i + 1]};
        rk(KVC_DTYPE_I4)->store(row, pair, 2);
        rk(KVC_DTYPE_I4)->load(row, y, 2);
        const float top = y[0] > y[1] ? y[0] : y[1], bottom = y[0] > y[1] ? y[1] : y[0];
        CHECK_MSG(pair[0] > pair[1] ? y[0] == top && y[0] > 65504.0f : y[0] == bottom && y[0] == -65504.0f,
                  "int4 %g -> %g (pair %g, %g -> %g)", pair[0], y[0], pair[1], y[1], top);
    }
    printf("f16: worst relative error %.3g (bound 2^-11 = %.3g); int8: worst error / max|x| %.3g (bound 1/254 = %.3g); "
           "q15: worst error / max|x| %.3g (bound 1/65534 = %.3g); "
           "int4: worst error / group range %.3g (bound 1/30 = %.3g, plus the halves' rounding)\n",
           worst16, 0x1p-11, worst8, 1.0 / 254, worst15, 1.0 / 65534, worst4, 1.0 / 30);
    return 0;
}

/* A view's entries in segment order, each read through the segment loaders
 * (any storage type, KIVI4's blocks included), with its weight and role. */
typedef struct flat_entry {
    float k[D], v[D];
    double w;
    unsigned role;
} flat_entry;

#define MAX_FLAT 1024

static size_t flatten(const kvc_view *v, flat_entry *out)
{
    size_t n = 0;
    for (size_t s = 0; s < v->n_seg; s++)
        for (size_t i = 0; i < v->seg[s].n && n < MAX_FLAT; i++, n++) {
            const kvc_segment *g = &v->seg[s];
            out[n].w = g->scale * (g->weights ? (double)g->weights[i] : 1.0);
            out[n].role = g->role;
            CHECK(kvc_segment_key_load(g, D, i, out[n].k));
            if (g->role & KVC_SET_NUM) CHECK(kvc_segment_value_load(g, D, i, out[n].v));
        }
    return n;
}

/* The quantisation bound for one query against two views with the same
 * entries and weights (same_structure), entry by entry in view order. */
static int check_bound(const kvc_view *vf, const kvc_view *vq, const float *q, const float *zf, const float *zq,
                       double *worst_ratio)
{
    static flat_entry ef[MAX_FLAT], eq[MAX_FLAT];
    const size_t n = flatten(vf, ef);
    CHECK(flatten(vq, eq) == n && n < MAX_FLAT);
    const double beta = (double)vf->beta;
    double M = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const double x = beta * kvc_kernels_ref()->dot_f32(q, ef[i].k, D);
        if (x > M) M = x;
    }
    double delta = 0.0;
    double A[D], Dv[D], den = 0.0;
    memset(A, 0, sizeof A), memset(Dv, 0, sizeof Dv);
    for (size_t i = 0; i < n; i++) {
        const double w = ef[i].w;
        if (!(w > 0.0)) continue;
        const double sf = beta * kvc_kernels_ref()->dot_f32(q, ef[i].k, D);
        const double sq = beta * kvc_kernels_ref()->dot_f32(q, eq[i].k, D);
        if (fabs(sq - sf) > delta) delta = fabs(sq - sf);
        const double e = w * exp(sf - M);
        if (ef[i].role & KVC_SET_DEN) den += e;
        if (ef[i].role & KVC_SET_NUM)
            for (size_t c = 0; c < D; c++) {
                A[c] += e * fabs((double)ef[i].v[c]);
                Dv[c] += e * fabs((double)eq[i].v[c] - ef[i].v[c]);
            }
    }
    if (!(den > 0.0)) return 1;
    const double ed = exp(delta);
    for (size_t c = 0; c < D; c++) {
        /* rounding: n-term double sums (n eps relative to A/D) and the float outputs (2^-24 each) */
        const double round = 4.0 * (double)n * 2.3e-16 * (A[c] / den + fabs((double)zf[c])) +
                             0x1p-24 * (fabs((double)zf[c]) + fabs((double)zq[c])) +
                             A[c] / den * 0x1p-22; /* the int8 kernels scale once per row (dot, axpy) */
        const double bound = ((ed - 1.0) * (ed + 1.0) * A[c] + ed * ed * Dv[c]) / den + round;
        const double err = fabs((double)zq[c] - zf[c]);
        if (bound > 0 && err / bound > *worst_ratio) *worst_ratio = err / bound;
        if (err > bound) {
            fprintf(stderr, "channel %zu: |z' - z| = %.3g > bound %.3g (delta %.3g)\n", c, err, bound, delta);
            return 0;
        }
    }
    return 1;
}

/* The same entries and weights: the causal block (the sinks, window, open
 * block and current token, which a KIVI4 plan splits into other segments)
 * counted as one, every other segment compared as it is. */
static int same_structure(const kvc_view *a, const kvc_view *b)
{
    const size_t causal = KVC_STREAM_EXACT_SEGMENTS - 1u;
    size_t na = 0, nb = 0;
    for (size_t s = 0; s < causal; s++) na += a->seg[s].n, nb += b->seg[s].n;
    if (a->n_seg != b->n_seg || na != nb) return 0;
    for (size_t s = causal; s < a->n_seg; s++) {
        const kvc_segment *x = &a->seg[s], *y = &b->seg[s];
        if (x->n != y->n || x->role != y->role || x->scale != y->scale || (x->weights == NULL) != (y->weights == NULL))
            return 0;
        if (x->weights && x->n && memcmp(x->weights, y->weights, x->n * sizeof(float)) != 0) return 0;
    }
    return 1;
}

static int every_method_every_dtype(void)
{
    const size_t n = 400;
    kvc_rng r;
    kvc_rng_seed(&r, 22);
    printf("seed 22, n %zu, d %zu\n", n, D);
    float *k = tu_normal(&r, n, D, 1.0), *v = tu_normal(&r, n, D, 1.0), *q = tu_normal(&r, n * NQ, D, 1.0);
    for (size_t j = 0; j < n; j++) { /* per-token scales over a decade */
        const float s = (float)(0.3 + 2.7 * kvc_rng_unit(&r));
        for (size_t c = 0; c < D; c++) k[j * D + c] *= s, v[j * D + c] *= s;
    }
    for (size_t mi = 0; mi < kvc_method_count(); mi++) {
        const kvc_method m = kvc_method_at(mi);
        const kvc_method_ops *ops = kvc_method_ops_of(m);
        for (unsigned t = 1; t < KVC_DTYPE_COUNT; t++) {
            if (!kvc_dtype_implemented((kvc_dtype)t)) continue;
            kvc_stream_config cf = kvc_stream_config_default(m, D, D, m == KVC_METHOD_EXACT ? 512 : 128, 5);
            /* KIVI4's window holds whole blocks of 32: the f32 reference gets the same window */
            cf.n_sink = 8, cf.n_window = t == KVC_DTYPE_KIVI4 ? 32 : 16, cf.prefix_len = (uint32_t)n;
            kvc_stream_config cq = cf;
            cq.dtype = (kvc_dtype)t;
            kvc_stream *sf = tu_stream(&cf), *sq = tu_stream(&cq), *sq2 = tu_stream(&cq);
            const size_t bq = kvc_stream_arena_bytes(&cq);
            CHECK(bq < kvc_stream_arena_bytes(&cf));
            double worst = 0.0;
            size_t bounded = 0;
            for (size_t j = 0; j < n; j++) {
                CHECK(kvc_stream_append(sf, NULL, k + j * D, v + j * D) == KVC_OK);
                CHECK(kvc_stream_append(sq, NULL, k + j * D, v + j * D) == KVC_OK);
                CHECK(kvc_stream_append(sq2, NULL, k + j * D, v + j * D) == KVC_OK);
                if (j % 7 != 0 && j != n - 1) continue;
                float zf[NQ * D], zq[NQ * D];
                const kvc_status rf = kvc_stream_attend(sf, NULL, q + j * NQ * D, NQ, zf);
                const kvc_status rq = kvc_stream_attend(sq, NULL, q + j * NQ * D, NQ, zq);
                CHECK(rq == KVC_OK || rq == KVC_E_RANGE);
                for (size_t i = 0; i < NQ * D; i++) CHECK(isfinite(zq[i]));
                kvc_view vf, vq;
                CHECK(kvc_stream_view(sf, &vf) == KVC_OK && kvc_stream_view(sq, &vq) == KVC_OK);
                if (ops->choices_read_values) continue;
                CHECK_MSG(same_structure(&vf, &vq), "%s %s token %zu: entries or weights differ",
                          kvc_method_name(ops->id), kvc_dtype_name((kvc_dtype)t), j);
                if (rf != KVC_OK || rq != KVC_OK) continue;
                for (size_t h = 0; h < NQ; h++)
                    CHECK_MSG(check_bound(&vf, &vq, q + (j * NQ + h) * D, zf + h * D, zq + h * D, &worst),
                              "%s %s token %zu", kvc_method_name(ops->id), kvc_dtype_name((kvc_dtype)t), j);
                bounded++;
            }
            CHECK(kvc_stream_validate(sq, bq) == KVC_OK);
            CHECK(memcmp(sq, sq2, bq) == 0); /* deterministic */
            if (ops->choices_read_values)
                printf("%-18s %-5s arena %6zu B (f32 %6zu): valid, deterministic, finite (choices read values)\n",
                       kvc_method_name(ops->id), kvc_dtype_name((kvc_dtype)t), bq, kvc_stream_arena_bytes(&cf));
            else
                printf("%-18s %-5s arena %6zu B (f32 %6zu): same entries and weights; %zu queries within the bound "
                       "(largest error / bound %.3f)\n",
                       kvc_method_name(ops->id), kvc_dtype_name((kvc_dtype)t), bq, kvc_stream_arena_bytes(&cf),
                       bounded * NQ, worst);
            free(sf), free(sq), free(sq2);
        }
    }
    free(k), free(v), free(q);
    return 0;
}

/* KIVI4 key blocks against their definition, decoded here from the bytes
 * (channel c: u16 scale, u16 minimum, then token j's nibble at byte 4 + j/2,
 * the high half for odd j): every element within half its channel's step of
 * the key (the rounding to the nearest of 16 levels: |x - (min + q s)| <= s/2,
 * plus the double arithmetic's 2^-40 relative), the float load that value
 * rounded once, the reference dot the ordered double sum of those values, and
 * each channel's step set by that channel alone: with an outlier channel 200x
 * larger (which would stretch a per-token group's grid), every other
 * channel's step stays within (its own range + one f16 ulp of its minimum) /
 * 15, rounded up to the next half. Out-of-range arguments write nothing. */
static int kivi4_keys_per_channel(void)
{
    static const size_t dims[] = {1, 7, 64, 100, 256}, toks[] = {1, 5, 31, 32};
    kvc_rng r;
    kvc_rng_seed(&r, 77);
    printf("kivi4: seed 77\n");
    size_t checked = 0;
    double worst = 0.0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
            const size_t d = dims[di], nt = toks[ti];
            float *k = malloc(KVC_KIVI_BLOCK * d * sizeof(float)), q[256], x[256];
            unsigned char *blk = malloc((size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
            for (size_t j = 0; j < nt; j++)
                for (size_t c = 0; c < d; c++) k[j * d + c] = (float)(kvc_rng_normal(&r) * (c == 0 ? 200.0 : 1.0));
            for (size_t c = 0; c < d; c++) q[c] = (float)kvc_rng_normal(&r);
            kvc_kivi4_key_block_store(blk, k, nt, d);
            CHECK(kvc_kivi4_key_bytes(nt, d) == KVC_KIVI4_KEY_BLOCK_BYTES(d));
            for (size_t j = 0; j < nt; j++) {
                kvc_kivi4_key_load(blk, j, x, d);
                double dot = 0.0;
                for (size_t c = 0; c < d; c++) {
                    const unsigned char *ch = blk + 20u * c;
                    uint16_t h[2];
                    memcpy(h, ch, sizeof h);
                    const double sc = (double)kvc_f16_to_f32(h[0]), mn = (double)kvc_f16_to_f32(h[1]);
                    const unsigned code = (ch[4 + j / 2] >> (4u * (j & 1u))) & 15u;
                    const double val = mn + (double)code * sc;
                    dot += val * (double)q[c];
                    const double err = fabs(val - (double)k[j * d + c]);
                    CHECK_MSG(err <= sc / 2.0 + fabs(val) * 0x1p-40,
                              "d %zu tok %zu/%zu ch %zu: error %.3g > step/2 %.3g", d, j, nt, c, err, sc / 2.0);
                    if (sc > 0.0 && err / sc > worst) worst = err / sc;
                    CHECK(x[c] == (float)val);
                    if (c > 0 && j == 0) { /* the step of this channel, from this channel alone */
                        double lo = k[c], hi = k[c];
                        for (size_t t = 1; t < nt; t++) {
                            const double e = k[t * d + c];
                            lo = e < lo ? e : lo, hi = e > hi ? e : hi;
                        }
                        const double ulp_lo = fabs(lo) * 0x1p-10 + 0x1p-24;
                        CHECK_MSG(sc <= ((hi - lo) + ulp_lo) / 15.0 * (1.0 + 0x1p-10) + 0x1p-24,
                                  "d %zu ch %zu: step %.3g for range %.3g", d, c, sc, hi - lo);
                    }
                    checked++;
                }
                CHECK(kvc_kivi4_key_dot_f32(blk, j, q, d) == dot);
            }
            /* from f16 rows (a cache's open block): the same bytes as from those rows' floats */
            {
                const size_t hb = (size_t)kvc_row_bytes(KVC_DTYPE_F16, d);
                unsigned char *h = malloc(nt * hb), *b16 = malloc((size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
                float *kr = malloc(nt * d * sizeof(float));
                for (size_t j = 0; j < nt; j++) {
                    rk(KVC_DTYPE_F16)->store(h + j * hb, k + j * d, d);
                    rk(KVC_DTYPE_F16)->load(h + j * hb, kr + j * d, d);
                }
                unsigned char *bf = malloc((size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
                memset(bf, 0xAB, (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
                memset(b16, 0xCD, (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
                kvc_kivi4_key_block_store(bf, kr, nt, d);
                kvc_kivi4_key_block_store_f16(b16, h, nt, d);
                CHECK(memcmp(bf, b16, (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d)) == 0);
                /* the padding after the channels is zero (deterministic arenas) */
                for (size_t o = 20u * d; o < (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d); o++) CHECK(bf[o] == 0);
                free(h), free(b16), free(kr), free(bf);
            }
            /* refused arguments leave the block as it was */
            unsigned char *copy = malloc((size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
            memcpy(copy, blk, (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d));
            kvc_kivi4_key_block_store(blk, k, 0, d);
            kvc_kivi4_key_block_store(blk, k, KVC_KIVI_BLOCK + 1u, d);
            kvc_kivi4_key_block_store(blk, NULL, nt, d);
            kvc_kivi4_key_block_store_f16(blk, NULL, nt, d);
            CHECK(memcmp(copy, blk, (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d)) == 0);
            free(copy), free(blk), free(k);
        }
    printf("kivi4: %zu elements within half their channel's step (largest error / step %.3f)\n", checked, worst);
    return 0;
}

static const kvc_test_case cases[] = {{"row_kernels_round_trip", row_kernels_round_trip},
                                      {"every_method_every_dtype", every_method_every_dtype},
                                      {"kivi4_keys_per_channel", kivi4_keys_per_channel}};
KVC_TEST_MAIN(cases)
