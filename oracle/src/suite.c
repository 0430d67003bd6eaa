/* The bound-check suite (kvc_suite.h): calibrate each method's constant on
 * one stream, then test failure rate, slope and unbiasedness on another. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_suite.h"

kvc_suite_settings kvc_suite_defaults(void)
{
    kvc_suite_settings s;
    memset(&s, 0, sizeof s);
    s.n = 2048, s.d = 16, s.clusters = 6, s.positions = 32, s.key_noise = 0.02;
    /* sink 16 + window 16 + current 1: method memory 127, 255, 511, 1023 tokens */
    const uint32_t b[4] = {160, 288, 544, 1056};
    memcpy(s.budgets, b, sizeof b);
    s.n_budgets = 4;
    s.seeds = 64, s.unbiased_seeds = 400;
    s.n_sink = 16, s.n_window = 16;
    s.calib_stream_seed = 1, s.test_stream_seed = 2;
    s.conf = 0.998; /* two-sided 99.8% = one-sided 99.9% */
    s.slope_tol = 0.15;
    return s;
}

int kvc_suite_stream_make(kvc_suite_stream *s, size_t n, size_t d, size_t clusters, double key_noise, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    if (n < 4 || d < 1 || clusters < 1) return 1;
    s->buf = malloc((3 * n * d + clusters * d + d) * sizeof(float));
    if (!s->buf) return 1;
    float *q = s->buf, *k = q + n * d, *v = k + n * d, *cent = v + n * d, *mean = cent + clusters * d;
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    /* unit-norm directions scaled to norm 2 for centres; the value mean has norm 1 */
    for (size_t c = 0; c <= clusters; c++) {
        float *x = c < clusters ? cent + c * d : mean;
        double nn = 0;
        for (size_t i = 0; i < d; i++) x[i] = (float)kvc_rng_normal(&r), nn += (double)x[i] * x[i];
        double sc = (c < clusters ? 2.0 : 1.0) / sqrt(nn);
        for (size_t i = 0; i < d; i++) x[i] = (float)(x[i] * sc);
    }
    for (size_t j = 0; j < n; j++) {
        size_t c = kvc_rng_below(&r, (uint32_t)clusters);
        for (size_t i = 0; i < d; i++)
            k[j * d + i] = cent[c * d + i] + (float)(key_noise / sqrt((double)d) * kvc_rng_normal(&r));
        /* queries: a random centre's direction, norm <= 2 */
        size_t cq = kvc_rng_below(&r, (uint32_t)clusters);
        double a = kvc_rng_unit(&r);
        for (size_t i = 0; i < d; i++) q[j * d + i] = (float)(a * cent[cq * d + i]);
        double nn = 0;
        for (size_t i = 0; i < d; i++) {
            v[j * d + i] = mean[i] + (float)(kvc_rng_normal(&r) / sqrt((double)d));
            nn += (double)v[j * d + i] * v[j * d + i];
        }
        if (nn > 16.0)
            for (size_t i = 0; i < d; i++) v[j * d + i] = (float)(v[j * d + i] * 4.0 / sqrt(nn));
    }
    s->tr = (kvc_oracle_trace){q, k, v, n, d, d};
    return 0;
}

void kvc_suite_stream_free(kvc_suite_stream *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

static void progress(void *ctx, size_t done, size_t total)
{
    FILE *f = (FILE *)ctx;
    if (f && (done == total || done % 16 == 0)) {
        fprintf(f, "\r  %zu/%zu runs", done, total);
        if (done == total) fputc('\n', f);
        fflush(f);
    }
}

int kvc_suite_run(kvc_method m, const kvc_suite_settings *s, FILE *log, kvc_suite_result *out)
{
    memset(out, 0, sizeof *out);
    out->method = m;
    out->claim = kvc_bound_claim_of(m);
    out->slope_tol = s->slope_tol;
    const int is_exact = m == KVC_METHOD_EXACT;
    kvc_suite_stream calib, test;
    if (kvc_suite_stream_make(&calib, s->n, s->d, s->clusters, s->key_noise, s->calib_stream_seed) ||
        kvc_suite_stream_make(&test, s->n, s->d, s->clusters, s->key_noise, s->test_stream_seed)) {
        kvc_suite_stream_free(&calib);
        return 1;
    }
    kvc_stream_config cfg = kvc_stream_config_default(m, (uint32_t)s->d, (uint32_t)s->d, s->budgets[0], 0);
    cfg.n_sink = s->n_sink, cfg.n_window = s->n_window;
    cfg.prefix_len = (uint32_t)s->n; /* prefill methods: the stream is the prompt */
    /* BalanceKV's claims are about t (error ~ 1/t at fixed structure): hold the
       structure fixed across budgets so memory buys batch size / rounds, not
       more buckets. The stream's value norms span exponents 0..2. */
    cfg.params.balancekv.b_max = m == KVC_METHOD_BALANCEKV ? 3u : 0u;
    /* The claims are the papers' theorems about the papers' estimators
       (separate numerator and denominator). The self-normalised default is
       bounded by the values' hull instead (tests/unit, tests/model's
       divergence test); README gives its suite figures. */
    cfg.params.subgen.estimator = KVC_ESTIMATOR_PAPER;
    if (m == KVC_METHOD_BALANCEKV) cfg.params.balancekv.estimator = KVC_ESTIMATOR_PAPER;
    cfg.params.balancekv.t = m == KVC_METHOD_BALANCEKV_PREFILL ? 16u : 0u;
    uint32_t exact_budget[1] = {(uint32_t)s->n};
    kvc_oracle_opts o = {is_exact ? exact_budget : s->budgets,
                         is_exact ? 1 : s->n_budgets,
                         s->seeds,
                         1000,
                         s->positions,
                         s->unbiased_seeds,
                         log ? progress : NULL,
                         log};
    kvc_oracle_row rows[16];
    int rc = 1;
    const double q = out->claim->delta / 4.0; /* calibrate at a quarter of the claimed failure rate */
    out->calib_quantile = 1.0 - q;
    if (is_exact) {
        out->C = 1e-6; /* declared, not calibrated: rounding only */
    } else if (out->claim->bound) {
        if (log)
            fprintf(log, "%s: calibration stream (seed %llu)\n", kvc_method_name(m),
                    (unsigned long long)s->calib_stream_seed);
        if (kvc_oracle_measure(&calib.tr, &cfg, &o, rows, NULL)) goto done;
        out->C = kvc_oracle_calibrate(rows, o.n_budgets, out->claim->exponent, q);
        kvc_oracle_rows_free(rows, o.n_budgets);
    }
    if (log)
        fprintf(log, "%s: test stream (seed %llu), declared C = %.4g\n", kvc_method_name(m),
                (unsigned long long)s->test_stream_seed, out->C);
    o.seed0 = 5000; /* fresh method seeds too */
    if (kvc_oracle_measure(&test.tr, &cfg, &o, rows, &out->unbiased)) goto done;
    out->mean_err_first = rows[0].mean;
    out->mean_err_last = rows[o.n_budgets - 1].mean;
    out->memory_first = rows[0].memory;
    out->memory_last = rows[o.n_budgets - 1].memory;
    if (out->claim->bound) {
        kvc_oracle_failure_rate(rows, o.n_budgets, out->C, out->claim->exponent, s->conf, &out->failure);
        out->pass_failure = out->failure.lo <= out->claim->delta;
    } else {
        kvc_oracle_failure_rate(rows, o.n_budgets, INFINITY, 0.0, s->conf, &out->failure);
        out->pass_failure = 1;
    }
    if (o.n_budgets >= 2) {
        if (kvc_oracle_slope(rows, o.n_budgets, s->conf, &out->slope, &out->slope_lo, &out->slope_hi)) {
            kvc_oracle_rows_free(rows, o.n_budgets);
            goto done;
        }
        /* one-sided: fail only when the error provably falls slower than predicted */
        out->pass_slope = out->claim->exponent == 0.0 || out->slope_lo <= out->claim->exponent + s->slope_tol;
        out->slope_met = out->pass_slope;
        if (!out->claim->slope_asserted) out->pass_slope = 1; /* reported, not asserted */
    } else {
        out->slope = out->slope_lo = out->slope_hi = NAN;
        out->pass_slope = out->slope_met = 1;
    }
    out->pass_unbiased =
        !out->claim->unbiased || out->unbiased.seeds == 0 ||
        (out->unbiased.max_abs_z_num <= out->unbiased.z_limit && fabs(out->unbiased.z_den) <= out->unbiased.z_limit);
    kvc_oracle_rows_free(rows, o.n_budgets);
    rc = 0;
done:
    kvc_suite_stream_free(&calib);
    kvc_suite_stream_free(&test);
    return rc;
}

void kvc_suite_print_header(FILE *f)
{
    fprintf(f, "| method | bound | declared C | claimed fail. | measured fail. rate [99.8%% CI] | slope [99.8%% CI] "
               "(predicted) | unbiased max \\|z\\| (limit) | verdict |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|\n");
}

void kvc_suite_print_row(FILE *f, const kvc_suite_result *r)
{
    const kvc_bound_claim *c = r->claim;
    char slope[96], unb[64];
    if (isnan(r->slope))
        snprintf(slope, sizeof slope, "n/a (one budget)");
    else
        snprintf(slope, sizeof slope, "%.3f [%.3f, %.3f] (%s)", r->slope, r->slope_lo, r->slope_hi,
                 c->exponent != 0.0 ? (c->exponent == -0.5 ? "-0.5" : "-1") : "none");
    if (r->unbiased.seeds)
        snprintf(unb, sizeof unb, "%.2f, den %.2f (%.2f)", r->unbiased.max_abs_z_num, fabs(r->unbiased.z_den),
                 r->unbiased.z_limit);
    else
        snprintf(unb, sizeof unb, "not claimed");
    int ok = r->pass_failure && r->pass_slope && r->pass_unbiased;
    char fail[96], cst[32], dl[16];
    if (c->bound) {
        snprintf(fail, sizeof fail, "%zu/%zu = %.4f [%.4f, %.4f]", r->failure.failures, r->failure.samples,
                 r->failure.rate, r->failure.lo, r->failure.hi);
        snprintf(cst, sizeof cst, "%.4g", r->C);
        snprintf(dl, sizeof dl, "%g", c->delta);
    } else {
        snprintf(fail, sizeof fail, "n/a (mean e %.3g at m=%u, %.3g at m=%u)", r->mean_err_first, r->memory_first,
                 r->mean_err_last, r->memory_last);
        snprintf(cst, sizeof cst, "-");
        snprintf(dl, sizeof dl, "-");
    }
    const char *verdict = !c->bound      ? "measured"
                          : !ok          ? "FAIL"
                          : r->slope_met ? "pass"
                                         : "pass (slope prediction not met, reported)";
    fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", kvc_method_name(r->method),
            c->bound ? c->bound : "none claimed", cst, dl, fail, slope, unb, verdict);
}

void kvc_suite_csv_header(FILE *f)
{
    fprintf(f,
            "method,declared_C,calib_quantile,claimed_delta,failures,samples,rate,rate_lo,rate_hi,slope,slope_lo,"
            "slope_hi,predicted_slope,unbiased_max_z_num,unbiased_z_den,z_limit,mean_err_first,mean_err_last,pass\n");
}

void kvc_suite_csv_row(FILE *f, const kvc_suite_result *r)
{
    fprintf(f, "%s,%.6g,%.6g,%g,%zu,%zu,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%g,%.4g,%.4g,%.4g,%.6g,%.6g,%d\n",
            kvc_method_name(r->method), r->C, r->calib_quantile, r->claim->delta, r->failure.failures,
            r->failure.samples, r->failure.rate, r->failure.lo, r->failure.hi, r->slope, r->slope_lo, r->slope_hi,
            r->claim->exponent, r->unbiased.max_abs_z_num, r->unbiased.z_den, r->unbiased.z_limit, r->mean_err_first,
            r->mean_err_last, r->pass_failure && r->pass_slope && r->pass_unbiased);
}
