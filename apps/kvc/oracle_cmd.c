/* kvc oracle: bound checks against the MPFR oracle.
 *   kvc oracle --trace DIR --method M --budget a,b,c [--seeds R] [--csv FILE]
 *     measures one method on one trace (constants from --C, else reported only);
 *   kvc oracle --suite [--csv FILE]
 *     the bound-check table of every method (calibrate, then test). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "method_opts.h"
#include "kvc/kvc.h"
#if KVC_HAVE_ORACLE
#include "kvc_oracle/kvc_suite.h"
#endif
#include "trace.h"
#include "commands.h"

#if KVC_HAVE_ORACLE
static void progress(void *ctx, size_t done, size_t total)
{
    (void)ctx;
    if (done == total || done % 8 == 0) {
        fprintf(stderr, "\r  %zu/%zu runs", done, total);
        if (done == total) fputc('\n', stderr);
    }
}

static int run_suite(const char *csv)
{
    kvc_suite_settings s = kvc_suite_defaults();
    /* every method of the registry */
    kvc_method methods[64];
    const size_t N_SUITE = kvc_method_count() < 64 ? kvc_method_count() : 64;
    for (size_t i = 0; i < N_SUITE; i++) methods[i] = kvc_method_at(i);
    kvc_suite_result res[64];
    int all_ok = 1;
    fprintf(stderr,
            "bound-check suite: n=%zu d=%zu clusters=%zu key_noise=%g, %u seeds x %zu positions, "
            "budgets 160,288,544,1056 (sink %u, window %u), unbiasedness over %u seeds\n",
            s.n, s.d, s.clusters, s.key_noise, s.seeds, s.positions, s.n_sink, s.n_window, s.unbiased_seeds);
    for (size_t i = 0; i < N_SUITE; i++) {
        if (kvc_suite_run(methods[i], &s, stderr, &res[i])) return 1;
        if (res[i].claim->bound) all_ok &= res[i].pass_failure && res[i].pass_slope && res[i].pass_unbiased;
    }
    printf("\n");
    kvc_suite_print_header(stdout);
    for (size_t i = 0; i < N_SUITE; i++) kvc_suite_print_row(stdout, &res[i]);
    printf("\nDeclared constants (eps(m) = C m^exponent, claimed failure probability delta) and why:\n");
    for (size_t i = 0; i < N_SUITE; i++) {
        const kvc_bound_claim *c = res[i].claim;
        if (c->bound)
            printf("- %s: eps(m) = %.4g m^%g, delta = %g, C %s. Claim: %s.\n", kvc_method_name(res[i].method), res[i].C,
                   c->exponent, c->delta,
                   res[i].method == KVC_METHOD_EXACT ? "fixed at 1e-6 (float storage rounding, no calibration)"
                                                     : "calibrated at the (1 - delta/4) quantile",
                   c->source);
        else
            printf("- %s: no bound (%s).\n", kvc_method_name(res[i].method), c->source);
    }
    printf("\nC: the (1 - delta/4) quantile of e / m^exponent on a calibration stream (seed %llu), tested on a\n"
           "fresh stream (seed %llu) with fresh method seeds. A claim fails when the lower end of the failure-rate\n"
           "interval exceeds the claimed probability, when the slope's interval lies entirely above\n"
           "predicted + %.2f, or when an unbiasedness |z| exceeds its limit. Positions of one run are\n"
           "correlated, so the intervals are narrower than exact ones would be.\n",
           (unsigned long long)s.calib_stream_seed, (unsigned long long)s.test_stream_seed, s.slope_tol);
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f) {
            fprintf(stderr, "kvc oracle: cannot write '%s'\n", csv);
            return 1;
        }
        kvc_suite_csv_header(f);
        for (size_t i = 0; i < N_SUITE; i++) kvc_suite_csv_row(f, &res[i]);
        fclose(f);
    }
    return all_ok ? 0 : 3;
}

static void oracle_usage(FILE *f)
{
    fprintf(f, "usage: kvc oracle --trace DIR --method M --budget B,B,.. [options] [method flags]\n"
               "       kvc oracle --suite [--csv FILE]\n"
               "  Normalised errors e = ||z - Attn|| / (||softmax||_2 ||V||) against MPFR exact attention at P\n"
               "  positions in the trace's second half, R seeds per budget; slope of log mean e on log memory;\n"
               "  with --C, the failure rate P(e > C m^exponent). --suite: the bound-check table.\n");
}

#endif

int kvc_cmd_oracle(int argc, char **argv)
{
#if !KVC_HAVE_ORACLE
    (void)argc, (void)argv;
    fprintf(stderr, "kvc oracle: this kvc was built without the oracle (MPFR and LAPACKE). Install them\n"
                    "  (Debian: apt-get install libmpfr-dev liblapacke-dev) and configure with\n"
                    "  -DKVC_BUILD_ORACLE=ON, the default of the full build (bash .ci/test).\n");
    return 2;
#else
    const char *trace_dir = NULL, *budgets_s = NULL, *csv = NULL;
    uint64_t seeds = 32, positions = 16, head = 0;
    double C = NAN;
    int suite = 0;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_method_opts mo;
    memset(&mo, 0, sizeof mo);
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "Mkw", fl, 0);
    fl[nf++] = (kvc_flag){"--trace", 's', &trace_dir, 0, 0, NULL, "DIR\ttrace folder (q.npy, k.npy, v.npy)"};
    fl[nf++] = (kvc_flag){"--budget",
                          's',
                          &budgets_s,
                          0,
                          0,
                          NULL,
                          "B,B,..\tup to 16 budgets (memory points of the slope), each " KVC_BUDGET_SYNTAX};
    fl[nf++] = (kvc_flag){"--csv", 's', &csv, 0, 0, NULL, "FILE\tone row per budget (or suite row)"};
    fl[nf++] = (kvc_flag){"--seeds", 'u', &seeds, 2, 100000, NULL, "R\tseeds per budget"};
    fl[nf++] =
        (kvc_flag){"--positions", 'u', &positions, 1, 100000, NULL, "P\tquery positions in the trace's second half"};
    fl[nf++] = (kvc_flag){"--head", 'u', &head, 0, 1u << 20, NULL, "H\thead of a (heads, n, d) trace (default 0)"};
    fl[nf++] = (kvc_flag){"--C", 'f', &C, 0.0, 1e30, NULL, "c\tthe failure rate P(e > c m^exponent) is reported"};
    fl[nf++] = (kvc_flag){"--suite", 'b', &suite, 0, 0, NULL, "\tthe bound-check table of every method instead"};
    const int prc = kvc_cli_parse("oracle", argc, argv, fl, nf, &mo, oracle_usage);
    if (prc) return prc == 1 ? 0 : 2;
    const char *method_name = cf.method;
    const uint64_t sink = cf.sink, window = cf.window;
    if (suite) return run_suite(csv);
    kvc_method method;
    uint32_t budgets[16];
    size_t nb;
    if (!trace_dir || !method_name || !budgets_s) {
        fprintf(stderr, "kvc oracle: --trace, --method and --budget are required (or --suite)\n");
        return 2;
    }
    if (kvc_method_parse(method_name, &method) != KVC_OK) {
        fprintf(stderr, "kvc oracle: unknown method '%s'\n", method_name);
        return 2;
    }
    if (kvc_method_opts_check(&mo, "oracle", &method, 1)) return 2;
    kvc_budget specs[16];
    const int n_specs = kvc_budget_list("--budget", budgets_s, specs, 16);
    if (n_specs < 0) return 2;
    nb = (size_t)n_specs;
    kvc_trace tr;
    if (kvc_trace_load(trace_dir, (size_t)head, &tr)) return 1;
    if (positions > tr.n / 2) positions = tr.n / 2;
    kvc_oracle_trace ot = {tr.q, tr.k, tr.v, tr.n, tr.d, tr.dv};
    kvc_stream_config cfg = kvc_stream_config_default(method, (uint32_t)tr.d, (uint32_t)tr.dv, 1, 0);
    cfg.n_sink = (uint32_t)sink, cfg.n_window = (uint32_t)window;
    kvc_method_opts_apply(&mo, &cfg);
    cfg.prefix_len = (uint32_t)tr.n;
    for (size_t b = 0; b < nb; b++) { /* each budget in tokens of this trace */
        kvc_stream_config cb = cfg;
        if (kvc_budget_resolve("oracle", &specs[b], tr.n, 1, &mo, &cb, 1, 0, NULL)) {
            kvc_trace_free(&tr);
            return 2;
        }
        budgets[b] = cb.budget;
    }
    cfg.budget = budgets[0];
    for (size_t b = 0; b < nb; b++) { /* say which budget a method refuses, and why, before measuring */
        kvc_stream_config cb = cfg;
        cb.budget = budgets[b];
        const char *why = kvc_stream_config_problem(&cb);
        if (why) {
            fprintf(stderr, "kvc oracle: %s refuses budget %u (sink %u, window %u): %s\n", method_name, budgets[b],
                    cfg.n_sink, cfg.n_window, why);
            kvc_trace_free(&tr);
            return 2;
        }
    }
    kvc_oracle_opts o = {budgets, nb, (uint32_t)seeds, 1, (size_t)positions, 0, progress, NULL};
    kvc_oracle_row rows[16];
    const kvc_bound_claim *claim = kvc_bound_claim_of(method);
    fprintf(stderr, "kvc oracle: %s, %s, %zu budgets x %" PRIu64 " seeds x %zu positions\n", trace_dir, method_name, nb,
            seeds, (size_t)positions);
    if (kvc_oracle_measure(&ot, &cfg, &o, rows, NULL)) {
        kvc_trace_free(&tr);
        return 1;
    }
    printf("trace %s (n=%zu, d=%zu, head %" PRIu64 "), method %s; e scale ||softmax||_2 * ||V||_%s\n", trace_dir, tr.n,
           tr.d, head, method_name, claim->op_norm ? "op" : "F");
    printf("%8s %8s %12s %12s %12s\n", "budget", "memory", "mean_e", "p99_e", "max_e");
    for (size_t b = 0; b < nb; b++)
        printf("%8u %8u %12.4e %12.4e %12.4e\n", rows[b].budget, rows[b].memory, rows[b].mean, rows[b].p99,
               rows[b].max);
    double slope = NAN, lo = NAN, hi = NAN;
    if (nb >= 2 && kvc_oracle_slope(rows, nb, 0.998, &slope, &lo, &hi) == 0) {
        char pred[32];
        if (claim->exponent != 0.0)
            snprintf(pred, sizeof pred, "predicted %g", claim->exponent);
        else
            snprintf(pred, sizeof pred, "no prediction");
        printf("slope of log mean e on log memory: %.3f [99.8%% CI %.3f, %.3f]; %s\n", slope, lo, hi, pred);
    }
    kvc_oracle_failure fr = {0};
    if (!isnan(C)) {
        kvc_oracle_failure_rate(rows, nb, C, claim->exponent, 0.998, &fr);
        printf("failure rate P(e > %g m^%g) = %zu/%zu = %.4f [99.8%% CI %.4f, %.4f]; claimed %g\n", C, claim->exponent,
               fr.failures, fr.samples, fr.rate, fr.lo, fr.hi, claim->delta);
    }
    int rc = 0;
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f) {
            fprintf(stderr, "kvc oracle: cannot write '%s'\n", csv);
            rc = 1;
        } else {
            fprintf(f, "method,budget,memory,seeds,positions,mean_e,p99_e,max_e,slope,slope_lo,slope_hi\n");
            for (size_t b = 0; b < nb; b++)
                fprintf(f, "%s,%u,%u,%zu,%zu,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", method_name, rows[b].budget,
                        rows[b].memory, rows[b].seeds, rows[b].positions, rows[b].mean, rows[b].p99, rows[b].max, slope,
                        lo, hi);
            fclose(f);
        }
    }
    kvc_oracle_rows_free(rows, nb);
    kvc_trace_free(&tr);
    return rc;
#endif
}
