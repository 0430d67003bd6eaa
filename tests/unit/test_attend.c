/* The reference attend kernel and its checked entry point. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"
#include "kvc_test.h"
#include "kvc_testutil.h"
#include "internal/kvc_internal.h"

#define SEED 20261122u

static kvc_view one_segment(const float *k, const float *v, const float *w, size_t n, size_t d, size_t dv, float beta)
{
    kvc_view view;
    memset(&view, 0, sizeof view);
    view.d = d;
    view.dv = dv;
    view.beta = beta;
    view.n_seg = 1;
    view.seg[0] = (kvc_segment){k, v, w, 1.0, n, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
    return view;
}

static double rel_diff_fd(const float *z, const double *x, size_t n)
{
    double e = 0, a = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)z[i] - x[i]) * ((double)z[i] - x[i]);
        a += x[i] * x[i];
    }
    return sqrt(e / a);
}

/* All weights 1 = plain softmax attention. The kernel accumulates in double
 * and rounds once to float, so the only error of size is the final rounding:
 * |z - A| <= eps_f32 * |A| per component; we allow 2 * eps_f32 in norm. */
static int attend_weights_one_is_softmax(void)
{
    printf("seed %u\n", SEED);
    kvc_rng r;
    kvc_rng_seed(&r, SEED);
    const size_t n = 777, d = 64, dv = 48;
    float *k = tu_normal(&r, n, d, 1.0), *v = tu_normal(&r, n, dv, 1.0), *q = tu_normal(&r, 1, d, 2.0);
    for (size_t i = 0; i < n * dv; i++) v[i] += 0.5f; /* non-zero mean: |A| not ~ 0 */
    float z[48];
    double ex[48];
    kvc_view view = one_segment(k, v, NULL, n, d, dv, 0.125f);
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, 1, z) == KVC_OK);
    kvc_exact_attention_f64(q, k, v, n, d, dv, 0.125, ex, NULL);
    double rel = rel_diff_fd(z, ex, dv);
    printf("relative difference %.3e (bound %.3e)\n", rel, 2.0 * FLT_EPSILON);
    CHECK(rel <= 2.0 * FLT_EPSILON);
    free(k), free(v), free(q);
    return 0;
}

/* Weight 2 on one token == that token duplicated with weight 1 each, and a
 * segment scale of 2 == per-entry weights of 2. */
static int attend_weight_two_equals_duplicate(void)
{
    printf("seed %u\n", SEED + 1);
    kvc_rng r;
    kvc_rng_seed(&r, SEED + 1);
    const size_t n = 50, d = 16, dv = 16;
    float *k = tu_normal(&r, n + 1, d, 1.0), *v = tu_normal(&r, n + 1, dv, 1.0), *q = tu_normal(&r, 1, d, 1.0);
    /* duplicate token 7 at the end */
    memcpy(k + n * d, k + 7 * d, d * sizeof(float));
    memcpy(v + n * dv, v + 7 * dv, dv * sizeof(float));
    float w[50], z_dup[16], z_w[16], z_scale[16];
    for (size_t i = 0; i < n; i++) w[i] = 1.0f;
    w[7] = 2.0f;
    kvc_view dup = one_segment(k, v, NULL, n + 1, d, dv, 0.25f);
    kvc_view wv = one_segment(k, v, w, n, d, dv, 0.25f);
    CHECK(kvc_attend(kvc_kernels_ref(), &dup, q, 1, z_dup) == KVC_OK);
    CHECK(kvc_attend(kvc_kernels_ref(), &wv, q, 1, z_w) == KVC_OK);
    for (size_t c = 0; c < dv; c++)
        CHECK_MSG(fabsf(z_dup[c] - z_w[c]) <= 4 * FLT_EPSILON * (fabsf(z_dup[c]) + 1e-3f), "c=%zu %g %g", c, z_dup[c],
                  z_w[c]);
    /* scale 2 on every entry changes nothing (it cancels in the ratio) */
    kvc_view sc = one_segment(k, v, NULL, n, d, dv, 0.25f);
    sc.seg[0].scale = 2.0;
    kvc_view plain = one_segment(k, v, NULL, n, d, dv, 0.25f);
    float z_plain[16];
    CHECK(kvc_attend(kvc_kernels_ref(), &sc, q, 1, z_scale) == KVC_OK);
    CHECK(kvc_attend(kvc_kernels_ref(), &plain, q, 1, z_plain) == KVC_OK);
    for (size_t c = 0; c < dv; c++)
        CHECK(fabsf(z_scale[c] - z_plain[c]) <= 4 * FLT_EPSILON * (fabsf(z_plain[c]) + 1e-3f));
    free(k), free(v), free(q);
    return 0;
}

/* Splitting a block into several segments gives the same answer (online softmax). */
static int attend_segments_split_invariant(void)
{
    printf("seed %u\n", SEED + 2);
    kvc_rng r;
    kvc_rng_seed(&r, SEED + 2);
    const size_t n = 301, d = 32, dv = 32;
    float *k = tu_normal(&r, n, d, 1.5), *v = tu_normal(&r, n, dv, 1.0), *q = tu_normal(&r, 1, d, 1.5);
    float z1[32], z2[32];
    kvc_view whole = one_segment(k, v, NULL, n, d, dv, 0.2f);
    kvc_view split = whole;
    split.n_seg = 3;
    split.seg[0].n = 100;
    split.seg[1] = (kvc_segment){k + 100 * d, v + 100 * dv, NULL, 1.0, 1, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
    split.seg[2] = (kvc_segment){k + 101 * d, v + 101 * dv, NULL, 1.0, 200, KVC_SET_BOTH, KVC_DTYPE_F32, NULL, NULL, 0};
    CHECK(kvc_attend(kvc_kernels_ref(), &whole, q, 1, z1) == KVC_OK);
    CHECK(kvc_attend(kvc_kernels_ref(), &split, q, 1, z2) == KVC_OK);
    for (size_t c = 0; c < dv; c++) CHECK(fabsf(z1[c] - z2[c]) <= 4 * FLT_EPSILON * (fabsf(z1[c]) + 1e-3f));
    free(k), free(v), free(q);
    return 0;
}

/* Separate numerator and denominator sets with their own weights, against
 * the formula evaluated directly in double. */
static int attend_separate_num_den(void)
{
    printf("seed %u\n", SEED + 3);
    kvc_rng r;
    kvc_rng_seed(&r, SEED + 3);
    const size_t nn = 40, nd = 60, d = 8, dv = 8;
    float *kn = tu_normal(&r, nn, d, 1.0), *vn = tu_normal(&r, nn, dv, 1.0), *kd = tu_normal(&r, nd, d, 1.0);
    float *q = tu_normal(&r, 1, d, 1.0), a[40], b[60], z[8];
    for (size_t i = 0; i < nn; i++) a[i] = (float)(0.1 + 3.0 * kvc_rng_unit(&r));
    for (size_t i = 0; i < nd; i++) b[i] = (float)(0.1 + 3.0 * kvc_rng_unit(&r));
    kvc_view view;
    memset(&view, 0, sizeof view);
    view.d = d, view.dv = dv, view.beta = 0.5f, view.n_seg = 2;
    view.seg[0] = (kvc_segment){kn, vn, a, 1.5, nn, KVC_SET_NUM, KVC_DTYPE_F32, NULL, NULL, 0};
    view.seg[1] = (kvc_segment){kd, NULL, b, 0.75, nd, KVC_SET_DEN, KVC_DTYPE_F32, NULL, NULL, 0};
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, 1, z) == KVC_OK);
    double num[8] = {0}, den = 0;
    for (size_t i = 0; i < nn; i++) {
        double s = 0.5 * kvc_k_dot_f32__ref(q, kn + i * d, d), p = 1.5 * a[i] * exp(s);
        for (size_t c = 0; c < dv; c++) num[c] += p * vn[i * dv + c];
    }
    for (size_t i = 0; i < nd; i++) den += 0.75 * b[i] * exp(0.5 * kvc_k_dot_f32__ref(q, kd + i * d, d));
    for (size_t c = 0; c < dv; c++) num[c] /= den;
    double rel = rel_diff_fd(z, num, dv);
    printf("relative difference %.3e\n", rel);
    CHECK(rel <= 2.0 * FLT_EPSILON);
    free(kn), free(vn), free(kd), free(q);
    return 0;
}

/* Weights of 1e30 and scores near 1000 (e^1000 overflows double) still give
 * the right, finite answer: the maximum is taken over s + ln w. */
static int attend_huge_weights_and_scores(void)
{
    const size_t d = 4, dv = 2;
    float k[3 * 4] = {250, 0, 0, 0, 249, 0, 0, 0, 0, 0, 0, 0};
    float v[3 * 2] = {1, 0, 0, 1, 5, 5};
    float w[3] = {1e30f, 1e30f, 1.0f};
    float q[4] = {4, 0, 0, 0}, z[2];
    kvc_view view = one_segment(k, v, w, 3, d, dv, 1.0f);
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, 1, z) == KVC_OK);
    /* scores 1000, 996, 0: p ~ [1, e^-4, ~0] */
    double e4 = exp(-4.0), p0 = 1.0 / (1.0 + e4), p1 = e4 / (1.0 + e4);
    printf("z = (%g, %g), expected (%g, %g)\n", z[0], z[1], p0, p1);
    CHECK(isfinite(z[0]) && isfinite(z[1]));
    CHECK(fabs(z[0] - p0) < 1e-6 && fabs(z[1] - p1) < 1e-6);
    return 0;
}

/* n_q queries in one call equal n_q single calls bit for bit (GQA batching). */
static int attend_multi_query_matches_single(void)
{
    printf("seed %u\n", SEED + 4);
    kvc_rng r;
    kvc_rng_seed(&r, SEED + 4);
    const size_t n = 120, d = 16, dv = 16, nq = 6;
    float *k = tu_normal(&r, n, d, 1.0), *v = tu_normal(&r, n, dv, 1.0), *q = tu_normal(&r, nq, d, 1.0);
    float zb[6 * 16], z1[16];
    kvc_view view = one_segment(k, v, NULL, n, d, dv, 0.25f);
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, nq, zb) == KVC_OK);
    for (size_t h = 0; h < nq; h++) {
        CHECK(kvc_attend(kvc_kernels_ref(), &view, q + h * d, 1, z1) == KVC_OK);
        CHECK(memcmp(z1, zb + h * dv, dv * sizeof(float)) == 0);
    }
    free(k), free(v), free(q);
    return 0;
}

static int attend_rejects_malformed_views(void)
{
    float k[4] = {1, 2, 3, 4}, v[4] = {1, 1, 1, 1}, q[2] = {1, 1}, z[2];
    kvc_view good = one_segment(k, v, NULL, 2, 2, 2, 1.0f), bad;
    CHECK(kvc_attend(kvc_kernels_ref(), &good, q, 1, z) == KVC_OK);
    bad = good, bad.d = 0;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.dv = KVC_MAX_HEAD_DIM + 1;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.n_seg = KVC_VIEW_MAX_SEGMENTS + 1;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.seg[0].role = 0;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.seg[0].keys = NULL;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.seg[0].values = NULL;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.beta = NAN;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    bad = good, bad.seg[0].scale = 0.0;
    CHECK(kvc_attend(kvc_kernels_ref(), &bad, q, 1, z) == KVC_E_ARG);
    CHECK(kvc_attend(kvc_kernels_ref(), &good, q, 0, z) == KVC_E_ARG);
    CHECK(kvc_attend(kvc_kernels_ref(), &good, NULL, 1, z) == KVC_E_ARG);
    kvc_kernels broken = *kvc_kernels_ref();
    broken.version = 999;
    CHECK(kvc_attend(&broken, &good, q, 1, z) == KVC_E_BACKEND);
    return 0;
}

/* All weights zero (empty denominator) gives zeros, not NaN. */
static int attend_empty_denominator_is_zero(void)
{
    float k[4] = {1, 2, 3, 4}, v[4] = {1, 1, 1, 1}, q[2] = {1, 1}, z[2] = {7, 7}, w[2] = {0, 0};
    kvc_view view = one_segment(k, v, w, 2, 2, 2, 1.0f);
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, 1, z) == KVC_OK);
    CHECK(z[0] == 0.0f && z[1] == 0.0f);
    view.n_seg = 0;
    z[0] = z[1] = 7;
    CHECK(kvc_attend(kvc_kernels_ref(), &view, q, 1, z) == KVC_OK);
    CHECK(z[0] == 0.0f && z[1] == 0.0f);
    return 0;
}

/* The trusted contracts of kvc_exp_nonpos / kvc_log_pos (axioms for WP) hold. */
static int math_wrapper_contracts(void)
{
    const double xs[] = {-0.0, 0.0, -1e-300, -1e-10, -0.5, -1.0, -20.0, -700.0, -745.2, -1e5, -1e308, -INFINITY};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double y = kvc_exp_nonpos(xs[i]);
        CHECK_MSG(y >= 0.0 && y <= 1.0, "exp(%g) = %g", xs[i], y);
    }
    for (double x = 0.0; x > -800.0; x -= 0.37) CHECK(kvc_exp_nonpos(x) >= 0.0 && kvc_exp_nonpos(x) <= 1.0);
    const double ps[] = {DBL_MIN, 1e-300, FLT_MIN, 1e-7, 1.0, 3.0, FLT_MAX, 1e300, DBL_MAX};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) CHECK(isfinite(kvc_log_pos(ps[i])));
    return 0;
}

static const kvc_test_case cases[] = {
    {"weights_one_is_softmax", attend_weights_one_is_softmax},
    {"weight_two_equals_duplicate", attend_weight_two_equals_duplicate},
    {"segments_split_invariant", attend_segments_split_invariant},
    {"separate_num_den", attend_separate_num_den},
    {"huge_weights_and_scores", attend_huge_weights_and_scores},
    {"multi_query_matches_single", attend_multi_query_matches_single},
    {"rejects_malformed_views", attend_rejects_malformed_views},
    {"empty_denominator_is_zero", attend_empty_denominator_is_zero},
    {"math_wrapper_contracts", math_wrapper_contracts},
};
KVC_TEST_MAIN(cases)
