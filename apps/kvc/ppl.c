/* kvc ppl: teacher-force a text through the model with a compressed cache and
 * with the exact cache. Besides perplexity it measures, inside the compressed
 * run, each layer's attention error: the hook keeps that run's own k/v history
 * (measurement only; the decoder attends through the cache) and compares every
 * head's output with exact attention in double over that history, at the
 * positions where the layer's cache is over budget.
 *
 * It also checks every output against the box of the values its kv head has
 * seen (per coordinate, the min and max so far): exact attention lies in that
 * box, so an output inside it is within the box's diagonal of exact, and an
 * output outside it is what made SubGen and BalanceKV diverge (README). The
 * check costs O(hs) per head and position, so it always runs. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "generate.h"
#include "lmrun.h"
#include "method_opts.h"
#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"
#include "ppl.h"
#include "commands.h"

typedef struct measure_ctx {
    kvc_cache *cache;
    const kvc_cache_config *cc;
    int n_layers, n_heads, n_kv, hs, cap;
    float *hist_k, *hist_v; /* [layer][kv head][cap][hs] */
    double *err_sum;        /* per layer */
    uint64_t *err_n;        /* per layer (head-positions) */
    double *ex;
    float *box_lo, *box_hi; /* [layer][kv head][hs]: the values seen so far */
    float *vmax;            /* [layer][kv head]: largest |value element| so far */
    uint64_t *box_out;      /* per layer: (position, head) outputs outside the box */
    double *box_excess;     /* per layer: max distance outside / box diagonal */
} measure_ctx;

/* Rounding slack of the box test, per coordinate: the output is a ratio of
 * f32 weighted sums over n + 1 entries (SIMD blocks, f32 accumulators);
 * each sum's relative error is at most gamma_{n+1} = (n + 1) u / (1 - (n + 1) u)
 * with u = 2^-24, so a convex combination can leave the box by at most
 * 2 gamma_{n+1} max|v| (numerator and denominator), doubled for the merge
 * of split-K parts and the storage's round trip. */
static double box_slack(int pos, float vmax)
{
    const double u = 0x1p-24, g = (pos + 1.0) * u / (1.0 - (pos + 1.0) * u);
    return 4.0 * g * (double)vmax;
}

/* Widen the running box by this position's values, then test every head's output. */
static void box_check(measure_ctx *c, int layer, int pos, const float *v, const float *out)
{
    const int hs = c->hs, group = c->n_heads / c->n_kv;
    for (int h = 0; h < c->n_kv; h++) {
        const size_t b = ((size_t)layer * c->n_kv + h) * hs;
        float *lo = c->box_lo + b, *hi = c->box_hi + b, *vm = c->vmax + (size_t)layer * c->n_kv + h;
        for (int i = 0; i < hs; i++) {
            const float x = v[h * hs + i];
            if (pos == 0 || x < lo[i]) lo[i] = x;
            if (pos == 0 || x > hi[i]) hi[i] = x;
            if (fabsf(x) > *vm) *vm = fabsf(x);
        }
    }
    for (int qh = 0; qh < c->n_heads; qh++) {
        const int h = qh / group;
        const size_t b = ((size_t)layer * c->n_kv + h) * hs;
        const float *lo = c->box_lo + b, *hi = c->box_hi + b;
        const double slack = box_slack(pos, c->vmax[(size_t)layer * c->n_kv + h]);
        double out2 = 0, diag2 = 0;
        int outside = 0;
        for (int i = 0; i < hs; i++) {
            const double o = out[qh * hs + i];
            const double dist = o < lo[i] ? lo[i] - o : o > hi[i] ? o - hi[i] : 0.0;
            if (!(dist <= slack)) outside = 1; /* NaN counts as outside */
            out2 += dist * dist, diag2 += ((double)hi[i] - lo[i]) * ((double)hi[i] - lo[i]);
        }
        if (outside) c->box_out[layer]++;
        const double ex = diag2 > 0 ? sqrt(out2 / diag2) : (out2 > 0 ? INFINITY : 0.0);
        if (!(ex <= c->box_excess[layer])) c->box_excess[layer] = ex; /* NaN sticks */
    }
}

static kvc_status measuring_attention(void *vctx, int layer, int pos, const float *q, const float *k, const float *v,
                                      float *out)
{
    measure_ctx *c = (measure_ctx *)vctx;
    kvc_status rc = kvc_l2c_cache_attention(c->cache, layer, pos, q, k, v, out);
    if (rc != KVC_OK) return rc;
    if (c->box_lo) box_check(c, layer, pos, v, out);
    if (c->hist_k == NULL) return rc;
    const int hs = c->hs, group = c->n_heads / c->n_kv;
    for (int h = 0; h < c->n_kv; h++) {
        size_t base = (((size_t)layer * c->n_kv + h) * c->cap) * hs;
        memcpy(c->hist_k + base + (size_t)pos * hs, k + h * hs, hs * sizeof(float));
        memcpy(c->hist_v + base + (size_t)pos * hs, v + h * hs, hs * sizeof(float));
    }
    if ((uint32_t)pos + 1u <= kvc_cache_get_layer_budget(c->cc, (uint32_t)layer)) return KVC_OK;
    for (int qh = 0; qh < c->n_heads; qh++) {
        int h = qh / group;
        size_t base = (((size_t)layer * c->n_kv + h) * c->cap) * hs;
        kvc_exact_attention_f64(q + qh * hs, c->hist_k + base, c->hist_v + base, (size_t)pos + 1, hs, hs,
                                1.0 / sqrt((double)hs), c->ex, NULL);
        double e = 0, a = 0;
        for (int i = 0; i < hs; i++) {
            double dd = (double)out[qh * hs + i] - c->ex[i];
            e += dd * dd, a += c->ex[i] * c->ex[i];
        }
        c->err_sum[layer] += a > 0 ? sqrt(e / a) : 0.0;
        c->err_n[layer]++;
    }
    return KVC_OK;
}

/* Teacher-forced NLL of toks[1..n-1]; fills per-layer errors when measuring. */
static int run_pass(const kvc_l2c_model *m, const int *toks, int n, const kvc_cache_config *cc, int measure,
                    double *nll_out, double *err_sum, uint64_t *err_n, uint64_t *box_out, double *box_excess)
{
    const int hs = m->cfg.dim / m->cfg.n_heads;
    kvc_l2c_state s;
    measure_ctx c;
    memset(&c, 0, sizeof c);
    int rc = 1;
    void *arena = kvc_lm_cache_new("ppl", &m->cfg, &cc->stream, cc->policy, &c.cache, NULL);
    if (!arena) return 1;
    if (kvc_l2c_state_alloc_chunk(&m->cfg, KVC_LM_CHUNK, &s) != KVC_OK) {
        kvc_l2c_arena_free(arena);
        fprintf(stderr, "kvc ppl: out of memory\n");
        return 1;
    }
    c.cc = cc, c.n_layers = m->cfg.n_layers, c.n_heads = m->cfg.n_heads, c.n_kv = m->cfg.n_kv_heads;
    c.hs = hs, c.cap = n, c.err_sum = err_sum, c.err_n = err_n;
    c.ex = malloc((size_t)hs * sizeof(double));
    if (box_out) {
        const size_t nb = (size_t)c.n_layers * c.n_kv;
        c.box_lo = malloc(nb * hs * sizeof(float)), c.box_hi = malloc(nb * hs * sizeof(float));
        c.vmax = calloc(nb, sizeof(float));
        c.box_out = box_out, c.box_excess = box_excess;
        if (!c.box_lo || !c.box_hi || !c.vmax) {
            fprintf(stderr, "kvc ppl: out of memory\n");
            goto done;
        }
    }
    if (measure) {
        size_t nh = (size_t)c.n_layers * c.n_kv * (size_t)n * hs;
        c.hist_k = malloc(nh * sizeof(float)), c.hist_v = malloc(nh * sizeof(float));
        if (!c.hist_k || !c.hist_v) {
            fprintf(stderr, "kvc ppl: out of memory\n");
            goto done;
        }
    }
    /* teacher forcing: token i predicts token i + 1; the last one predicts nothing */
    kvc_status st = kvc_lm_feed(m, &s, toks, n - 1, 0, measuring_attention, &c, toks + 1, nll_out, NULL, NULL);
    if (st != KVC_OK) {
        char why[160];
        fprintf(stderr, "kvc ppl: forward failed: %s\n", kvc_l2c_failure(m, &s, st, why, sizeof why));
        goto done;
    }
    rc = 0;
done:
    free(c.hist_k), free(c.hist_v), free(c.ex), free(c.box_lo), free(c.box_hi), free(c.vmax);
    kvc_l2c_arena_free(arena);
    kvc_l2c_state_free(&s);
    return rc;
}

static void ppl_usage(FILE *f)
{
    fprintf(f, "usage: kvc ppl --method M --budget B --text FILE [options] [method flags]\n"
               "  Teacher-forces FILE (at most the model's context) with the compressed cache and with\n"
               "  exact; prints per-layer mean relative attention error and ends with\n"
               "  tokens=<n> nll=<x> perplexity=<x> exact_perplexity=<x>\n");
}

int kvc_cmd_ppl(int argc, char **argv)
{
    const char *text_path = NULL, *policy = "uniform";
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_method_opts mo;
    memset(&mo, 0, sizeof mo);
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "mtMbskwT", fl, 0);
    fl[nf++] = (kvc_flag){
        "--text", 's', &text_path, 0, 0, NULL, "FILE\tthe text to teacher-force (at most the model's context)"};
    fl[nf++] =
        (kvc_flag){"--policy",
                   's',
                   &policy,
                   0,
                   0,
                   NULL,
                   "uniform|pyramid\tper-layer budgets: equal, or PyramidKV's falling with depth (default uniform)"};
    const int prc = kvc_cli_parse("ppl", argc, argv, fl, nf, &mo, ppl_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_common_flags_finish("ppl", &cf)) return 2;
    if (kvc_l2c_set_threads((int)cf.threads) != 0) {
        fprintf(stderr, "kvc ppl: cannot start %d decoder threads\n", (int)cf.threads);
        return 1;
    }
    const char *model_path = cf.model, *tok_path = cf.tokenizer, *method_name = cf.method;
    const uint64_t seed = cf.seed, sink = cf.sink, window = cf.window;
    const int have_budget = cf.have_budget;
    kvc_method method;
    if (!method_name || !text_path || !have_budget) {
        fprintf(stderr, "kvc ppl: --method, --budget and --text are required (see --help)\n");
        return 2;
    }
    if (kvc_method_parse(method_name, &method) != KVC_OK) {
        fprintf(stderr, "kvc ppl: unknown method '%s'\n", method_name);
        return 2;
    }
    if (kvc_method_opts_check(&mo, "ppl", &method, 1)) return 2;
    if (strcmp(policy, "uniform") && strcmp(policy, "pyramid")) {
        fprintf(stderr, "kvc ppl: --policy must be uniform or pyramid\n");
        return 2;
    }
    kvc_ppl_result r;
    return kvc_ppl_run(model_path, tok_path, text_path, method, &cf.budget, (uint32_t)sink, (uint32_t)window, seed,
                       !strcmp(policy, "pyramid"), 1, &mo, &r);
}

int kvc_ppl_run(const char *model_path, const char *tok_path, const char *text_path, kvc_method method,
                const kvc_budget *budget_spec, uint32_t sink, uint32_t window, uint64_t seed, int pyramid,
                unsigned flags, const kvc_method_opts *mo, kvc_ppl_result *out)
{
    const int verbose = (flags & KVC_PPL_VERBOSE) != 0, measure = (flags & KVC_PPL_NO_ERROR) == 0;
    kvc_lm lm;
    memset(out, 0, sizeof *out);
    char *text = kvc_lm_read_text("ppl", text_path);
    if (!text) {
        return 1;
    }
    if (kvc_lm_open("ppl", model_path, tok_path, &lm)) {
        free(text);
        return 1;
    }
    const kvc_l2c_model m = lm.m;
    int *toks = NULL; /* only what the context can hold is encoded */
    int n = kvc_lm_encode_prefix(&lm, text_path, text, m.cfg.seq_len, &toks);
    if (n == KVC_BPE_E_BYTE) { /* named where it was found */
        free(text);
        kvc_lm_close(&lm);
        return 1;
    }
    if (n < 0) n = 0;
    const int hs = m.cfg.dim / m.cfg.n_heads, L = m.cfg.n_layers;
    double *err_sum = calloc((size_t)L, sizeof(double));
    uint64_t *err_n = calloc((size_t)L, sizeof(uint64_t));
    uint64_t *box_out = calloc((size_t)L, sizeof(uint64_t));
    double *box_excess = calloc((size_t)L, sizeof(double));
    int rc = 1;
    if (n < 2 || !err_sum || !err_n || !box_out || !box_excess) {
        fprintf(stderr, "kvc ppl: text '%s' gives %d tokens; need at least 2\n", text_path, n);
        goto done;
    }
    kvc_stream_config sc = kvc_stream_config_default(method, (uint32_t)hs, (uint32_t)hs, 1, seed);
    sc.n_sink = sink, sc.n_window = window;
    /* prefill methods compress the whole text as the prompt: set before the
       budget is resolved (a byte budget buys tokens by the layout it sets) */
    sc.prefix_len = (uint32_t)n;
    if (mo) kvc_method_opts_apply(mo, &sc);
    /* every token goes through the cache: a larger token budget holds nothing more */
    if (kvc_budget_resolve("ppl", budget_spec, (uint64_t)n, (uint64_t)L * (uint64_t)m.cfg.n_kv_heads, mo, &sc, !verbose,
                           kvc_cli_usable_tokens((uint64_t)n, sink, window),
                           "tokens of the text the context holds (or the sink + window + 2 the layout needs)"))
        goto done;
    const uint32_t budget = sc.budget;
    if (method == KVC_METHOD_EXACT && budget < (uint32_t)n) {
        fprintf(stderr, "kvc ppl: exact refuses: the text has %d tokens but the budget holds %u\n", n, budget);
        goto done;
    }
    kvc_cache_config cc = kvc_l2c_cache_config(&m.cfg, &sc);
    cc.policy = pyramid ? KVC_BUDGET_PYRAMID : KVC_BUDGET_UNIFORM;
    uint32_t bad_layer;
    const char *why = kvc_cache_config_problem_at(&cc, &bad_layer);
    if (why) {
        if (bad_layer != UINT32_MAX) {
            fprintf(stderr, "kvc ppl: layer %u (budget %u under the %s policy): %s\n", bad_layer,
                    kvc_cache_get_layer_budget(&cc, bad_layer), pyramid ? "pyramid" : "uniform", why);
        } else {
            fprintf(stderr, "kvc ppl: %s\n", why);
        }
        goto done;
    }
    if (method == KVC_METHOD_BALANCEKV_PREFILL && sc.params.balancekv.mode == KVC_BALANCE_OFFLINE &&
        (uint64_t)n > (uint64_t)sc.n_sink + sc.n_window + 1u) {
        /* issue 49: this failed with a bare "capacity exhausted" at the first method token */
        fprintf(stderr,
                "kvc ppl: --bkv-mode offline compresses a prompt given whole (kvc_cache_prefill); kvc ppl reads "
                "its %d-token text through the cache one token at a time: use a tree mode (the default); kvc "
                "eval --prefix N hands a prompt whole\n",
                n);
        goto done;
    }
    kvc_stream_config ec = kvc_stream_config_default(KVC_METHOD_EXACT, (uint32_t)hs, (uint32_t)hs, (uint32_t)n, seed);
    ec.n_sink = 0, ec.n_window = 0; /* the reference keeps every token: no sink or window to size */
    kvc_cache_config ecc = kvc_l2c_cache_config(&m.cfg, &ec);
    double nll, exact_nll;
    if (run_pass(&m, toks, n, &cc, measure, &nll, err_sum, err_n, box_out, box_excess)) goto done;
    uint64_t *dummy_n = calloc((size_t)L, sizeof(uint64_t));
    double *dummy_s = calloc((size_t)L, sizeof(double));
    int erc = run_pass(&m, toks, n, &ecc, 0, &exact_nll, dummy_s, dummy_n, NULL, NULL);
    free(dummy_n), free(dummy_s);
    if (erc) goto done;
    double tot = 0;
    uint64_t cnt = 0;
    if (verbose) {
        printf("kvc ppl: %s, %d tokens, method %s, budget %u tokens per (layer, kv-head)%s, seed %" PRIu64 "\n",
               text_path, n, kvc_method_name(method), budget, pyramid ? " (pyramid)" : "", seed);
        printf("  %-6s %8s %12s %14s %12s %12s\n", "layer", "budget", "positions", "mean_rel_attn", "out_of_box",
               "box_excess");
    }
    for (int l = 0; l < L; l++) {
        double mean = err_n[l] ? err_sum[l] / (double)err_n[l] : NAN;
        if (verbose)
            printf("  %-6d %8u %12" PRIu64 " %14.4e %12" PRIu64 " %12.3e\n", l,
                   kvc_cache_get_layer_budget(&cc, (uint32_t)l), err_n[l] / (uint64_t)m.cfg.n_heads, mean, box_out[l],
                   box_excess[l]);
        tot += err_sum[l], cnt += err_n[l];
        out->box_outside += box_out[l];
        if (!(box_excess[l] <= out->box_excess)) out->box_excess = box_excess[l], out->box_worst_layer = l;
    }
    out->tokens = n - 1;
    out->nll = nll / (double)(n - 1);
    out->perplexity = exp(out->nll);
    out->exact_perplexity = exp(exact_nll / (double)(n - 1));
    out->mean_rel_attn = cnt ? tot / (double)cnt : NAN;
    if (verbose) {
        printf("  mean relative attention error over layers, heads and compressing positions: %.4e\n",
               out->mean_rel_attn);
        printf("  outputs outside the box of the values seen: %" PRIu64 " of %" PRIu64
               " (largest distance outside / box diagonal %.3e, layer %d)\n",
               out->box_outside, (uint64_t)n * (uint64_t)L * (uint64_t)m.cfg.n_heads, out->box_excess,
               out->box_worst_layer);
        printf("tokens=%d nll=%.6f perplexity=%.6f exact_perplexity=%.6f\n", out->tokens, out->nll, out->perplexity,
               out->exact_perplexity);
    }
    rc = 0;
done:
    free(text), free(toks), free(err_sum), free(err_n), free(box_out), free(box_excess);
    kvc_lm_close(&lm);
    return rc;
}
