/* The integer attend (kvc_fixed.h) against exact attention in double on the
 * same int8 rows and query. Derived bound, per output channel c (the header's
 * precision notes):
 *  - each score, in log2 units t_j = beta log2(e) <q, k_j>, is off by at most
 *    |t_j| 2^-13 (four 16-bit mantissas truncated: beta, log2 e, the query's
 *    and the row's scale, 2^-15 each, relative) + 2^-16 (Q16.16 truncation);
 *  - so p_j = 2^(t_j - t_max) is off by the factor 2^(dt_j + dt_max), and
 *    by 3 * 2^-16 absolute (table interpolation < 2^-20, the Q16 rounding and
 *    the rounding shift); the bound allows 2 * 2^-16 more for folding it
 *    with the value's 16-bit scale m_j >= 2^15;
 *  - the values' scales lose 2^-15 relative, and the bound allows each
 *    aligned term one unit of 2^(E+16) / den (E the largest value exponent).
 *    The kernel folds p_j, m_j and the alignment 2^(e_j - E) into one weight
 *    W_j = p_j m_j 2^(e_j - E - 8) truncated once, so a term W_j x_jc is off
 *    by less than |x_jc| 2^(E+8) / den <= half that unit: the two allowances
 *    cover it;
 *  - the division and the binary32 truncation 2^-22 relative.
 * |z_c - z*_c| <= [sum_j a_j (|v_jc| + |z*_c|)] / (sum_j p*_j - sum_j a_j)
 *                + 2^-14 max_j |v_jc| + 2^-22 |z*_c|,
 * with a_j = p*_j (2^(dt_j + dt_max) - 1) + 5 * 2^-16.
 * Seeds printed; deterministic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_test.h"

/* n rows of dim int8 in the KVC_DTYPE_I8 layout, from normal floats times `spread` */
static void make_rows(kvc_rng *r, unsigned char *rows, size_t n, size_t dim, double spread, float *deq)
{
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[KVC_DTYPE_I8];
    const size_t rb = (size_t)kvc_row_bytes(KVC_DTYPE_I8, dim);
    float x[256];
    for (size_t j = 0; j < n; j++) {
        const double row_spread = spread * exp(kvc_rng_normal(r)); /* row scales vary */
        for (size_t c = 0; c < dim; c++) x[c] = (float)(kvc_rng_normal(r) * row_spread);
        rk->store(rows + j * rb, x, dim);
        rk->load(rows + j * rb, deq + j * dim, dim);
    }
}

static int matches_double_attention(void)
{
    kvc_rng r;
    kvc_rng_seed(&r, 515);
    printf("seed 515\n");
    double worst = 0.0;
    int cases = 0;
    for (int trial = 0; trial < 120; trial++) {
        const size_t d = 1 + kvc_rng_below(&r, 64), dv = 1 + kvc_rng_below(&r, 64);
        const size_t n = kvc_rng_below(&r, 400);
        const double kspread = trial % 3 == 0 ? 4.0 : 1.0; /* peaked and flat softmaxes */
        const size_t kb = (size_t)kvc_row_bytes(KVC_DTYPE_I8, d), vb = (size_t)kvc_row_bytes(KVC_DTYPE_I8, dv);
        unsigned char *K = malloc(n * kb + 1), *V = malloc(n * vb + 1), qrow[4 + 256];
        float *kd = malloc((n * d + 1) * sizeof(float)), *vd = malloc((n * dv + 1) * sizeof(float)), qd[256];
        make_rows(&r, K, n, d, kspread, kd);
        make_rows(&r, V, n, dv, 1.0, vd);
        make_rows(&r, qrow, 1, d, 1.0, qd);
        const float beta = (float)(1.0 / sqrt((double)d));
        uint32_t qscale_bits;
        memcpy(&qscale_bits, qrow, 4);
        uint32_t out[256];
        /* every other trial weighs its rows (a segment's weights: spread over
           2^-20 .. 2^20, one in eight zero) */
        const int weighted = trial % 2 == 1;
        uint32_t *wbits = malloc((n + 1) * sizeof(uint32_t));
        double *lw = malloc((n + 1) * sizeof(double));
        for (size_t j = 0; j < n; j++) {
            const float w = kvc_rng_below(&r, 8) == 0 ? 0.0f : (float)exp2(40.0 * kvc_rng_unit(&r) - 20.0);
            wbits[j] = kvc_test_f32_bits(w);
            lw[j] = weighted ? (w > 0.0f ? log2((double)w) : -INFINITY) : 0.0;
        }
        int32_t *scores = malloc(KVC_FX_WORK_BYTES(n) + 1); /* + 1: n may be 0 */
        CHECK(kvc_fx_attend_rows((const int8_t *)K, kb, (const int8_t *)V, vb, n, weighted ? wbits : NULL, d, dv,
                                 (const int8_t *)(qrow + 4), qscale_bits, kvc_test_f32_bits(beta), scores, out) == 0);
        free(scores);
        /* exact attention in double on the dequantised rows; dt_j bounds the
           kernel's error on row j's score (header above), plus 5 2^-16 for
           log2 w_j (the 16-bit mantissa: 2^-15 log2(e) < 2.9 2^-16, and
           kvc_fx_log2's 1.5 2^-16) */
        double *t = malloc((n + 1) * sizeof(double)), *dt = malloc((n + 1) * sizeof(double));
        double tmax = -INFINITY, den = 0.0, dt_max = 0.0;
        for (size_t j = 0; j < n; j++) {
            double dot = 0.0;
            for (size_t c = 0; c < d; c++) dot += (double)qd[c] * kd[j * d + c];
            const double s = (double)beta * dot / log(2.0);
            t[j] = s + lw[j];
            dt[j] = fabs(s) * 0x1p-13 + 0x1p-16 + (weighted ? 5.0 * 0x1p-16 : 0.0);
            if (t[j] > tmax) tmax = t[j];
            if (dt[j] > dt_max) dt_max = dt[j]; /* the kernel's largest score is off by at most this */
        }
        for (size_t j = 0; j < n; j++) den += exp2(t[j] - tmax);
        for (size_t c = 0; c < dv; c++) {
            double num = 0.0, vmax = 0.0;
            for (size_t j = 0; j < n; j++) {
                num += exp2(t[j] - tmax) * vd[j * dv + c];
                if (fabs(vd[j * dv + c]) > vmax) vmax = fabs(vd[j * dv + c]);
            }
            const double want = den > 0.0 ? num / den : 0.0;
            double a_sum = 0.0, err_num = 0.0;
            for (size_t j = 0; j < n; j++) {
                if (t[j] == -INFINITY) continue; /* a zero weight: the kernel drops the row too */
                const double pj = exp2(t[j] - tmax);
                const double a = pj * (exp2(dt[j] + dt_max) - 1.0) + 5.0 * 0x1p-16;
                a_sum += a;
                err_num += a * (fabs(vd[j * dv + c]) + fabs(want));
            }
            const double bound = !(den > 0.0) ? 0.0
                                              : err_num / (den - a_sum > 0 ? den - a_sum : 1e-300) + 0x1p-14 * vmax +
                                                    0x1p-22 * fabs(want);
            const double got = kvc_test_bits_f32(out[c]), err = fabs(got - want);
            if (bound > 0 && err / bound > worst) worst = err / bound;
            CHECK_MSG(isfinite(got) && err <= bound, "trial %d d %zu dv %zu n %zu ch %zu: %.9g vs %.9g (bound %.3g)",
                      trial, d, dv, n, c, got, want, bound);
        }
        cases++;
        free(K), free(V), free(kd), free(vd), free(t), free(dt), free(wbits), free(lw);
    }
    printf("%d cases within the derived bound (largest error / bound %.3g)\n", cases, worst);
    return 0;
}

/* The helpers at their edges: what the proofs cover, checked by value. */
static int helpers_at_their_edges(void)
{
    int32_t m, e;
    kvc_fx_decode_scale(kvc_test_f32_bits(1.0f), &m, &e);
    CHECK(m == 32768 && e == -15);
    kvc_fx_decode_scale(kvc_test_f32_bits(-1.0f), &m, &e);
    CHECK(m == 0);
    kvc_fx_decode_scale(kvc_test_f32_bits(INFINITY), &m, &e);
    CHECK(m == 0);
    kvc_fx_decode_scale(0x00000001u, &m, &e); /* subnormal */
    CHECK(m == 0);
    CHECK(kvc_fx_exp2_neg(0) == 65536u && kvc_fx_exp2_neg(-65536) == 32768u && kvc_fx_exp2_neg(-17 * 65536) == 0u);
    CHECK(kvc_fx_exp2_neg(INT32_MIN) == 0u);
    /* kvc_fx_log2 within its documented 1.5 2^-16: every power of two and
       its neighbours, and a sweep with a prime step */
    double worst_log2 = 0.0;
    for (uint32_t b = 0; b < 32; b++)
        for (int64_t dx = -1; dx <= 1; dx++) {
            const int64_t x = ((int64_t)1 << b) + dx;
            if (x < 1 || x > 4294967295LL) continue;
            const double err = fabs(kvc_fx_log2((uint32_t)x) / 65536.0 - log2((double)x));
            if (err > worst_log2) worst_log2 = err;
        }
    for (uint64_t x = 1; x <= 4294967295u; x += 65537u * 13u + (x >> 3)) {
        const double err = fabs(kvc_fx_log2((uint32_t)x) / 65536.0 - log2((double)x));
        if (err > worst_log2) worst_log2 = err;
    }
    printf("kvc_fx_log2: largest error %.3g 2^-16 (bound 1.5)\n", worst_log2 * 65536.0);
    CHECK(worst_log2 <= 1.5 * 0x1p-16);
    CHECK(kvc_fx_log2(1) == 0 && kvc_fx_log2(2) == 65536 && kvc_fx_log2(4294967295u) == 2097152);
    for (int32_t u = 0; u >= -16 * 65536; u -= 997) /* within 2 Q16 units of 2^(u/65536) */
        CHECK(fabs((double)kvc_fx_exp2_neg(u) - 65536.0 * exp2((double)u / 65536.0)) <= 2.0);
    CHECK(kvc_fx_score(4194304, 65535, 65535, 1000) == 1073741824);
    CHECK(kvc_fx_score(-4194304, 65535, 65535, 1000) == -1073741824);
    CHECK(kvc_fx_score(1, 1, 1, -1000) == 0);
    CHECK(kvc_test_bits_f32(kvc_fx_quotient_bits(3, 4, 0)) == 0.75f);
    CHECK(kvc_test_bits_f32(kvc_fx_quotient_bits(-1, 3, 2)) == -(float)(4.0 / 3.0) ||
          fabs(kvc_test_bits_f32(kvc_fx_quotient_bits(-1, 3, 2)) + 4.0 / 3.0) <= 0x1p-22);
    CHECK(kvc_fx_quotient_bits(1, 1, -1000) == 0u);         /* flushed */
    CHECK(kvc_fx_quotient_bits(1, 1, 1000) == 0x7F7FFFFFu); /* the largest finite */
    uint32_t out[4] = {1, 1, 1, 1};
    const int8_t q[4] = {1, 2, 3, 4};
    CHECK(kvc_fx_attend_rows(NULL, 8, NULL, 8, 0, NULL, 4, 4, q, kvc_test_f32_bits(1.0f), kvc_test_f32_bits(0.5f), NULL,
                             out) == 0);
    CHECK(out[0] == 0 && out[3] == 0); /* no rows: zeros */
    return 0;
}

static const kvc_test_case cases[] = {{"matches_double_attention", matches_double_attention},
                                      {"helpers_at_their_edges", helpers_at_their_edges}};
KVC_TEST_MAIN(cases)
