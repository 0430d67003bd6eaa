/* kvc eval: stream a trace through one method, compare each output z_j with
 * exact attention over tokens 0..j computed in double, and summarise the
 * errors over the positions where the method is compressing (j + 1 > budget),
 * docs/methods.md section 0. */
#include "eval.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"

#include "method_opts.h"
#include "trace.h"
#include "commands.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double percentile(const double *sorted, size_t n, double pct)
{
    if (n == 0) return NAN;
    size_t rank = (size_t)ceil(pct / 100.0 * (double)n);
    if (rank < 1) rank = 1;
    return sorted[rank - 1];
}

static double mean_of(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return n ? s / (double)n : NAN;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kvc eval --trace DIR --method M --budget B [options] [method flags]\n"
               "  Streams a q/k/v trace through a method and compares every scored position with exact\n"
               "  attention (rel_error and the papers' norm_error, mean and p99). The budget covers\n"
               "  sink + window + current token + method (docs/methods.md section 0); a prefill method\n"
               "  compresses the whole trace as its prompt unless --prefix says otherwise.\n");
}

int kvc_cmd_eval(int argc, char **argv)
{
    const char *trace_dir = NULL, *reference = "auto";
    uint64_t head = 0, prefix = 0, score_from = 0;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_method_opts mo;
    memset(&mo, 0, sizeof mo);
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "Mbskw", fl, 0);
    fl[nf++] = (kvc_flag){"--trace",
                          's',
                          &trace_dir,
                          0,
                          0,
                          NULL,
                          "DIR\tq.npy, k.npy, v.npy: (n, d) or (heads, n, d), float32 or float16"};
    fl[nf++] = (kvc_flag){"--head", 'u', &head, 0, 1u << 20, NULL, "H\thead of a (heads, n, d) trace (default 0)"};
    fl[nf++] = (kvc_flag){"--prefix",
                          'u',
                          &prefix,
                          1,
                          1u << 28,
                          NULL,
                          "P\tprompt length a prefill method compresses (default: the whole trace)"};
    fl[nf++] = (kvc_flag){
        "--reference",
        's',
        &reference,
        0,
        0,
        NULL,
        "auto|mpfr|f64\texact attention in MPFR (160 bits) or two-pass double; auto: MPFR when n*n*d <= 2^31"};
    fl[nf++] = (kvc_flag){"--score-from",
                          'u',
                          &score_from,
                          1,
                          1u << 28,
                          NULL,
                          "J\tscore positions J.. (default: where the method compresses)"};
    const int prc = kvc_cli_parse("eval", argc, argv, fl, nf, &mo, usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_common_flags_finish("eval", &cf)) return 2;
    const char *method_name = cf.method;
    const uint64_t seed = cf.seed, sink = cf.sink, window = cf.window;
    if (!trace_dir || !method_name || !cf.have_budget) {
        fprintf(stderr, "kvc eval: --trace, --method and --budget are required\n");
        usage(stderr);
        return 2;
    }
    if (strcmp(reference, "auto") && strcmp(reference, "mpfr") && strcmp(reference, "f64")) {
        fprintf(stderr, "kvc eval: --reference must be auto, mpfr or f64\n");
        return 2;
    }
#if !KVC_HAVE_ORACLE
    if (!strcmp(reference, "mpfr")) {
        fprintf(stderr, "kvc eval: --reference mpfr needs the oracle, which this kvc was built without: install\n"
                        "  MPFR and LAPACKE (Debian: apt-get install libmpfr-dev liblapacke-dev) and configure\n"
                        "  with -DKVC_BUILD_ORACLE=ON; --reference f64 (auto here) needs neither\n");
        return 2;
    }
#endif
    kvc_method method;
    if (kvc_method_parse(method_name, &method) != KVC_OK) {
        char names[512];
        kvc_method_names(names, sizeof names);
        fprintf(stderr, "kvc eval: unknown method '%s' (%s)\n", method_name, names);
        return 2;
    }
    if (kvc_method_opts_check(&mo, "eval", &method, 1)) return 2;

    kvc_trace tr;
    if (kvc_trace_load(trace_dir, (size_t)head, &tr)) return 1;
    if (tr.d > KVC_MAX_HEAD_DIM || tr.dv > KVC_MAX_HEAD_DIM) {
        fprintf(stderr, "kvc eval: head dimension %zu/%zu exceeds %u\n", tr.d, tr.dv, KVC_MAX_HEAD_DIM);
        kvc_trace_free(&tr);
        return 1;
    }

    kvc_stream_config cfg = kvc_stream_config_default(method, (uint32_t)tr.d, (uint32_t)tr.dv, 1, seed);
    cfg.n_sink = (uint32_t)sink;
    cfg.n_window = (uint32_t)window;
    kvc_method_opts_apply(&mo, &cfg);
    /* a prefill method compresses the whole trace as its prompt unless told otherwise */
    cfg.prefix_len = prefix ? (uint32_t)prefix : (uint32_t)tr.n;
    const int in_bytes = cf.budget.kind == KVC_BUDGET_F16 || cf.budget.kind == KVC_BUDGET_BYTES;
    /* tokens: at most what the trace can fill */
    if (kvc_budget_resolve("eval", &cf.budget, tr.n, 1, &mo, &cfg, 1, kvc_cli_usable_tokens(tr.n, sink, window),
                           "tokens in the trace (or the sink + window + 2 the layout needs)")) {
        kvc_trace_free(&tr);
        return 1;
    }
    if (in_bytes) {
        char text[48];
        kvc_budget_format(&cf.budget, text, sizeof text);
        printf("kvc eval: --budget %s: budget %" PRIu32 " tokens, arena %zu B (%.1f%% of f16 exact, %.1f%% of f32)\n",
               text, cfg.budget, kvc_stream_arena_bytes(&cfg),
               100.0 * (double)kvc_stream_arena_bytes(&cfg) / ((double)tr.n * (tr.d + tr.dv) * 2.0),
               50.0 * (double)kvc_stream_arena_bytes(&cfg) / ((double)tr.n * (tr.d + tr.dv) * 2.0));
    }
    if (score_from >= tr.n) { /* no position would be scored: the metrics would be 0/0 */
        fprintf(stderr, "kvc eval: --score-from %" PRIu64 " is past the trace's last position (%zu tokens, 0..%zu)\n",
                score_from, tr.n, tr.n - 1);
        kvc_trace_free(&tr);
        return 2;
    }
    kvc_eval_result res;
    int use_mp = !strcmp(reference, "mpfr") ||
                 (!strcmp(reference, "auto") && (double)tr.n * (double)tr.n * (double)tr.d <= 2147483648.0);
#if !KVC_HAVE_ORACLE
    use_mp = 0; /* auto: the two-pass double reference (checked against MPFR in tests/oracle) */
#endif
    int rc = kvc_eval_run_ref(&tr, &cfg, trace_dir, (size_t)head, 1, use_mp, (size_t)score_from, &res);
    kvc_trace_free(&tr);
    return rc;
}

int kvc_eval_run(const kvc_trace *tr, const kvc_stream_config *cfg, const char *label, size_t head, int verbose,
                 kvc_eval_result *out)
{
    return kvc_eval_run_ref(tr, cfg, label, head, verbose, 0, 0, out);
}

int kvc_eval_run_ref(const kvc_trace *tr, const kvc_stream_config *cfg, const char *label, size_t head, int verbose,
                     int use_mp, size_t score_from, kvc_eval_result *out)
{
    void *obs_work = NULL; /* kvc_stream_attend_observed's workspace (query-aware methods) */
    size_t obs_cap = 0;
    memset(out, 0, sizeof *out);
    const char *why = kvc_stream_config_problem(cfg);
    if (why) {
        fprintf(stderr, "kvc eval: %s: %s\n", kvc_method_name(cfg->method), why);
        return 1;
    }
    if (cfg->method == KVC_METHOD_EXACT && cfg->budget < tr->n) {
        fprintf(stderr,
                "kvc eval: exact refuses: the trace has %zu tokens but the budget holds %" PRIu32
                "; exact never drops a token (use --budget %zu or a compressing method)\n",
                tr->n, cfg->budget, tr->n);
        return 1;
    }
    kvc_stream_plan plan;
    kvc_stream_plan_make(cfg, &plan);
    if (kvc_cli_arena_refused("eval", plan.arena_bytes)) return 1;
    void *arena = aligned_alloc(KVC_ARENA_ALIGN, (size_t)plan.arena_bytes);
    const size_t n = tr->n, d = tr->d, dv = tr->dv;
    float *z = malloc(dv * sizeof(float));
    double *ex = malloc(dv * sizeof(double));
    double *rel = malloc(n * sizeof(double)), *nrm = malloc(n * sizeof(double));
    /* SubGen's bound is in ||V||_op, which needs LAPACKE; without the oracle its
       normalised error falls back to ||V||_F (the line says which) */
    double *gram = KVC_HAVE_ORACLE && cfg->method == KVC_METHOD_SUBGEN ? calloc(dv * dv, sizeof(double)) : NULL;
    int rc = 1;
    kvc_stream *st = NULL;
    if (!arena || !z || !ex || !rel || !nrm || (KVC_HAVE_ORACLE && cfg->method == KVC_METHOD_SUBGEN && !gram)) {
        fprintf(stderr, "kvc eval: out of memory\n");
        goto done;
    }
    kvc_status s = kvc_stream_init(arena, (size_t)plan.arena_bytes, cfg, &st);
    if (s != KVC_OK) {
        fprintf(stderr, "kvc eval: init failed: %s\n", kvc_status_str(s));
        goto done;
    }
    /* the trace is a known prompt: its last 32 queries are the observation
       window a query-aware method (SnapKV) gets before the tokens; methods
       without the hook ignore them */
    {
        const size_t obs = tr->n < 32 ? tr->n : 32;
        s = kvc_stream_prefill_queries(st, NULL, tr->q + (tr->n - obs) * d, obs);
        if (s != KVC_OK) {
            fprintf(stderr, "kvc eval: prefill queries: %s\n", kvc_status_str(s));
            goto done;
        }
    }
    if (verbose) {
        printf("kvc eval: trace %s (n=%zu, d=%zu, dv=%zu, head %zu), method %s, budget %" PRIu32
               " tokens, seed %" PRIu64 "\n",
               label, n, d, dv, head, kvc_method_name(cfg->method), cfg->budget, cfg->seed);
        printf("  plan: n_sink=%" PRIu32 " n_window=%" PRIu32 " method_tokens=%" PRIu32, plan.n_sink, plan.n_window,
               plan.method_tokens);
        char desc[512];
        kvc_stream_plan_describe(cfg, &plan, desc, sizeof desc);
        fputs(desc, stdout);
        printf(" beta=%g\n", (double)plan.beta);
        printf("  reference: %s\n", use_mp ? "MPFR 160-bit exact attention, correctly rounded to double"
                                           : "two-pass double exact attention");
        printf("  memory: worst case %" PRIu64 " of %" PRIu64 " budget elements; metadata %" PRIu64 " B; arena %" PRIu64
               " B\n",
               plan.worst_elements, plan.budget_elements, plan.metadata_bytes, plan.arena_bytes);
    }

    /* positions where the method compresses: more tokens seen than the budget
       (or from score_from on, so that configurations compare on one set) */
    size_t n_pos = 0, first = score_from ? score_from : cfg->budget < n ? cfg->budget : 0;
    const int observes = kvc_method_observes(cfg->method);
    double vf2 = 0.0;
    /* the tokens before the first scored position are one prompt (one
       kvc_stream_prefill: the state appends reach, and balancekv-prefill in
       mode offline compresses it there); H2O and TOVA attend at every one */
    const size_t whole = observes ? 0 : first;
    if (whole > 0) {
        const size_t wb = kvc_stream_prefill_work_bytes(st, whole);
        void *pw = wb ? aligned_alloc(8, (wb + 7) / 8 * 8) : NULL;
        s = wb && !pw ? KVC_E_ARENA : kvc_stream_prefill(st, NULL, tr->k, d, tr->v, dv, whole, pw, wb);
        free(pw);
        if (s != KVC_OK) {
            fprintf(stderr, "kvc eval: the prompt (tokens 0..%zu) failed: %s\n", whole - 1, kvc_status_str(s));
            goto done;
        }
    }
    for (size_t j = 0; j < n; j++) {
        const float *kj = tr->k + j * d, *vj = tr->v + j * dv, *qj = tr->q + j * d;
        if (j >= whole) s = kvc_stream_append(st, NULL, kj, vj);
        if (s != KVC_OK) {
            fprintf(stderr, "kvc eval: append of token %zu failed: %s\n", j, kvc_status_str(s));
            goto done;
        }
        for (size_t c = 0; c < dv; c++) vf2 += (double)vj[c] * (double)vj[c];
        if (gram)
            for (size_t a = 0; a < dv; a++)
                for (size_t b = 0; b < dv; b++) gram[a * dv + b] += (double)vj[a] * (double)vj[b];
        if (observes) { /* H2O / TOVA: every position attends and is observed, as in a decoder */
            const size_t wb = kvc_stream_attend_observed_work_bytes(st, 1);
            if (wb > obs_cap) {
                free(obs_work);
                obs_cap = wb * 2;
                obs_work = malloc(obs_cap);
                if (obs_work == NULL) {
                    s = KVC_E_CAPACITY;
                    fprintf(stderr, "kvc eval: out of memory\n");
                    goto done;
                }
            }
            s = kvc_stream_attend_observed(st, NULL, qj, 1, z, obs_work, obs_cap);
        } else if (j >= first) {
            s = kvc_stream_attend(st, NULL, qj, 1, z);
        }
        if (j < first) continue;
        if (s != KVC_OK) {
            fprintf(stderr, "kvc eval: attend at token %zu failed: %s\n", j, kvc_status_str(s));
            goto done;
        }
        kvc_exact_result er;
        if (use_mp) {
#if KVC_HAVE_ORACLE
            if (kvc_oracle_attention_mp(qj, tr->k, tr->v, j + 1, d, dv, (double)plan.beta, 160, ex, &er.softmax_l2)) {
                fprintf(stderr, "kvc eval: MPFR reference failed\n");
                goto done;
            }
#endif
        } else {
            kvc_exact_attention_f64(qj, tr->k, tr->v, j + 1, d, dv, (double)plan.beta, ex, &er);
        }
        double diff2 = 0.0, a2 = 0.0;
        for (size_t c = 0; c < dv; c++) {
            double e = (double)z[c] - ex[c];
            diff2 += e * e;
            a2 += ex[c] * ex[c];
        }
        double vnorm = sqrt(vf2);
#if KVC_HAVE_ORACLE
        if (gram) {
            double lam = kvc_sym_max_eig(gram, dv);
            if (lam < 0) {
                fprintf(stderr, "kvc eval: LAPACKE eigenvalue computation failed\n");
                goto done;
            }
            vnorm = sqrt(lam);
        }
#endif
        rel[n_pos] = a2 > 0 ? sqrt(diff2 / a2) : (diff2 > 0 ? INFINITY : 0.0);
        nrm[n_pos] = (er.softmax_l2 * vnorm) > 0 ? sqrt(diff2) / (er.softmax_l2 * vnorm) : 0.0;
        n_pos++;
    }

    kvc_stream_stats stats;
    kvc_stream_get_stats(st, &stats);
    out->positions = n_pos;
    out->mean_rel = mean_of(rel, n_pos);
    out->mean_norm = mean_of(nrm, n_pos);
    qsort(rel, n_pos, sizeof(double), cmp_double);
    qsort(nrm, n_pos, sizeof(double), cmp_double);
    out->p99_rel = percentile(rel, n_pos, 99.0);
    out->p99_norm = percentile(nrm, n_pos, 99.0);
    out->max_tokens = (stats.peak_elements + (d + dv) - 1) / (d + dv);
    out->arena_bytes = (size_t)plan.arena_bytes;
    if (verbose) {
        if (score_from)
            printf("  positions: %zu from %zu on (--score-from)\n", n_pos, score_from);
        else if (first > 0)
            printf("  positions: %zu compressing (token count > budget %" PRIu32 ")\n", n_pos, cfg->budget);
        else
            printf("  positions: all %zu (the trace never exceeds the budget, nothing is compressed)\n", n_pos);
        printf("  %-11s %11s %11s %11s %11s\n", "metric", "mean", "p50", "p99", "max");
        printf("  %-11s %11.4e %11.4e %11.4e %11.4e\n", "rel_error", out->mean_rel, percentile(rel, n_pos, 50),
               out->p99_rel, n_pos ? rel[n_pos - 1] : NAN);
        printf("  %-11s %11.4e %11.4e %11.4e %11.4e   (scale ||softmax||_2 * ||V||_%s)\n", "norm_error", out->mean_norm,
               percentile(nrm, n_pos, 50), out->p99_norm, n_pos ? nrm[n_pos - 1] : NAN, gram ? "op" : "F");
        printf("  cache: peak %" PRIu64 " elements = %" PRIu64 " tokens of budget %" PRIu32 "\n", stats.peak_elements,
               out->max_tokens, cfg->budget);
        char line[256];
        if (kvc_stream_stats_describe(cfg->method, &stats, line, sizeof line) > 0) printf("  %s\n", line);
        printf("mean_rel_error=%.6g p99_rel_error=%.6g mean_norm_error=%.6g max_tokens=%" PRIu64 " arena_bytes=%zu\n",
               out->mean_rel, out->p99_rel, out->mean_norm, out->max_tokens, out->arena_bytes);
    }
    rc = 0;
done:
    free(obs_work);
    free(arena);
    free(z);
    free(ex);
    free(rel);
    free(nrm);
    free(gram);
    return rc;
}
