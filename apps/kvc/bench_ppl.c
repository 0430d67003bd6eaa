/* kvc bench ppl: perplexity of a long text, teacher forced, with every token
 * computed through each method's compressed cache (streaming methods see every
 * token; prefill methods are told the text's length as their prompt length, so
 * they compress it as a prompt with causal replay). One pass per method and
 * budget, spread over the worker threads; exact runs through the same cache
 * manager. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "lmrun.h"

typedef struct ppl_result {
    int status; /* 1 done, -1 n/a, -2 failed */
    double nll, seconds;
    uint64_t peak_bytes;
    uint32_t budget;
    const char *why;
    int done; /* tokens through the model when it stopped (chunk granularity) */
} ppl_result;

static void note_done(void *pctx, int done) { ((ppl_result *)pctx)->done = done; }

typedef struct ppl_ctx {
    const kvc_bench_opts *o;
    const kvc_lm *lm;
    const int *toks;
    int n;
    ppl_result *res;
    kvc_bench_progress prog;
    FILE *csv;              /* rows written as configurations finish, once exact (configuration 0) has */
    pthread_mutex_t csv_mu; /* guards csv and state */
    unsigned char *state;   /* per configuration: 0 running, 1 finished, 2 written */
} ppl_ctx;

static void write_row(const ppl_ctx *pc, int g, double exact_ppl)
{
    const kvc_bench_opts *o = pc->o;
    const ppl_result *r = &pc->res[g];
    const int n = pc->n;
    if (r->status == 1)
        fprintf(pc->csv, "%s,%g,%u,%d,%.6f,%.6f,%.6f,%" PRIu64 ",%.2f,%d\n", kvc_method_name(o->cfg[g].method),
                o->cfg[g].pct, r->budget, n - 1, r->nll / (n - 1), exp(r->nll / (n - 1)), exact_ppl, r->peak_bytes,
                r->seconds, o->cfg[g].headwise);
    else
        fprintf(pc->csv, "%s,%g,%u,%d,,%s,%.6f,,,%d\n", kvc_method_name(o->cfg[g].method), o->cfg[g].pct, r->budget,
                n - 1, r->status == -1 ? "n/a" : "error", exact_ppl, o->cfg[g].headwise);
}

/* Configuration g has finished: its row, and every finished one waiting
 * for exact's perplexity, go to the CSV now (a stopped run keeps them). */
static void row_ready(ppl_ctx *pc, int g)
{
    if (!pc->csv) return;
    pthread_mutex_lock(&pc->csv_mu);
    pc->state[g] = 1;
    if (pc->state[0] >= 1) {
        const ppl_result *e = &pc->res[0];
        const double exact_ppl = e->status == 1 ? exp(e->nll / (pc->n - 1)) : NAN;
        for (int h = 0; h < pc->o->n_cfg; h++)
            if (pc->state[h] == 1) write_row(pc, h, exact_ppl), pc->state[h] = 2;
        fflush(pc->csv);
    }
    pthread_mutex_unlock(&pc->csv_mu);
}

static void run_one(ppl_ctx *pc, int g);

static void run_cfg(void *vctx, int g, int wid)
{
    (void)wid;
    run_one((ppl_ctx *)vctx, g);
    row_ready((ppl_ctx *)vctx, g);
}

static void run_one(ppl_ctx *pc, int g)
{
    const kvc_bench_opts *o = pc->o;
    const kvc_l2c_model *m = &pc->lm->m;
    ppl_result *r = &pc->res[g];
    kvc_stream_config sc;
    r->status = -2;
    r->why = kvc_bench_stream(o, &o->cfg[g], &m->cfg, pc->n, pc->n - 1, &sc);
    r->budget = sc.budget;
    if (r->why) {
        r->status = -1;
        kvc_bench_progress_add(&pc->prog, 0, o->cfg[g].label);
        return;
    }
    kvc_cache *cache;
    kvc_l2c_state s;
    void *arena = kvc_bench_cache_new(o, &o->cfg[g], &m->cfg, pc->n, pc->n - 1, &cache, NULL);
    if (!arena) return;
    if (kvc_l2c_state_alloc_chunk(&m->cfg, KVC_LM_CHUNK, &s) != KVC_OK) {
        free(arena);
        return;
    }
    const double t0 = kvc_bench_now();
    kvc_status st =
        kvc_lm_feed(m, &s, pc->toks, pc->n - 1, 0, kvc_l2c_cache_attention, cache, pc->toks + 1, &r->nll, note_done, r);
    r->seconds = kvc_bench_now() - t0;
    if (st == KVC_OK) {
        uint64_t el, peak;
        kvc_cache_get_usage_bytes(cache, &el, &peak);
        r->peak_bytes = peak;
        r->status = 1;
    } else {
        char why[160];
        const kvc_stream_plan *pl = kvc_stream_get_plan(kvc_cache_get_stream(cache, 0, 0));
        const int whole = pl && pl->method == KVC_METHOD_BALANCEKV_PREFILL && pl->bkv.mode == KVC_BALANCE_OFFLINE;
        fprintf(stderr, "\nkvc bench ppl: %s failed in tokens %d..%d: %s%s\n", o->cfg[g].label, r->done,
                r->done + KVC_LM_CHUNK - 1, kvc_l2c_failure(m, &s, st, why, sizeof why),
                whole && st == KVC_E_CAPACITY ? " (--bkv-mode offline takes its prompt whole, kvc_cache_prefill; "
                                                "perplexity reads every position through the cache: use a tree mode)"
                                              : "");
    }
    kvc_l2c_state_free(&s);
    free(arena);
    kvc_bench_progress_add(&pc->prog, 1.0 + o->cfg[g].pct / 25.0, o->cfg[g].label);
}

static void ppl_usage(FILE *f)
{
    fprintf(f,
            "usage: kvc bench ppl [--text FILE] [--max-tokens N] [options]\n"
            "  Teacher-forced perplexity of FILE (default /usr/share/common-licenses/GPL-3, about\n"
            "  8k tokens for SmolLM2), first N tokens (default: the model's context), every token\n"
            "  through each method's cache. Prints perplexity per method x budget and its ratio to\n"
            "  exact; CSV: one row per configuration.\n%s",
            kvc_bench_shared_usage);
}

int kvc_bench_ppl(int argc, char **argv)
{
    kvc_bench_opts o;
    kvc_bench_opts_init(&o, "ppl");
    const char *text_path = "/usr/share/common-licenses/GPL-3";
    uint64_t max_tokens = 0;
    kvc_flag fl[24];
    size_t nf = kvc_bench_flags_add(&o, fl, 0);
    fl[nf++] = (kvc_flag){"--text", 's', &text_path, 0, 0, NULL, "FILE\tthe text (default the GPL-3 text)"};
    fl[nf++] = (kvc_flag){
        "--max-tokens", 'u', &max_tokens, 2, 1u << 20, NULL, "N\tits first N tokens (default: the model's context)"};
    const int prc = kvc_cli_parse("bench ppl", argc, argv, fl, nf, &o.mo, ppl_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_bench_finish(&o)) return 2;
    char *text = kvc_lm_read_text("bench ppl", text_path);
    if (!text) {
        return 1;
    }
    kvc_lm lm;
    if (kvc_bench_open(&o, &lm)) {
        free(text);
        return 1;
    }
    int ret = 1;
    FILE *csv = NULL;
    unsigned char *pc_state = NULL; /* the rows' write state (ppl_ctx.state) */
    const size_t cap = strlen(text) + 3;
    int *toks = malloc(cap * sizeof(int));
    ppl_result *res = calloc((size_t)o.n_cfg, sizeof(ppl_result));
    int n = toks ? kvc_lm_encode(&lm, text_path, text, toks, (int)cap) : -1;
    if (!res || n < 2) {
        if (n == KVC_BPE_E_BYTE) goto done; /* named where it was found */
        fprintf(stderr, "kvc bench ppl: '%s' gives %d tokens (need 2 or more)\n", text_path, n);
        goto done;
    }
    if (n > lm.m.cfg.seq_len) n = lm.m.cfg.seq_len;
    if (max_tokens && (uint64_t)n > max_tokens) n = (int)max_tokens;
    if (kvc_bench_csv_open(&o, &csv)) goto done;
    printf("kvc bench ppl: %s, %d tokens (%d predicted), seed %" PRIu64 ", %d configurations, %d threads, kernels %s\n",
           text_path, n, n - 1, o.seed, o.n_cfg, o.threads, kvc_l2c_kernels()->name);
    kvc_bench_print_bytes(&o, &lm.m.cfg, n, n - 1);
    ppl_ctx pc = {&o, &lm, toks, n, res, {0}, NULL, PTHREAD_MUTEX_INITIALIZER, NULL};
    if (csv) {
        fprintf(csv, "method,budget_pct,budget_tokens,tokens,nll,perplexity,exact_perplexity,cache_peak_bytes,seconds,"
                     "head_wise\n");
        fflush(csv);
        if (!(pc.state = pc_state = calloc((size_t)o.n_cfg, 1))) goto done;
        pc.csv = csv;
    }
    double work = 0;
    for (int g = 0; g < o.n_cfg; g++) work += 1.0 + o.cfg[g].pct / 25.0;
    kvc_bench_progress_start(&pc.prog, "ppl", o.n_cfg, work, o.quiet);
    kvc_bench_parallel(o.threads, o.n_cfg, run_cfg, &pc);
    kvc_bench_progress_end(&pc.prog);

    const double exact_ppl = res[0].status == 1 ? exp(res[0].nll / (n - 1)) : NAN;
    printf("\nperplexity over %d tokens, (xR) = ratio to exact\n%-20s", n - 1, "method");
    for (int j = 0; j < o.n_pct; j++) printf(" %17g%%", o.pcts[j]);
    printf("\n%-20s %18.4f\n", "exact", exact_ppl);
    for (int row = 0; row < o.n_methods * (o.heads ? 2 : 1); row++) {
        const int i = row / (o.heads ? 2 : 1), hw = o.heads ? row % 2 : 0;
        if (hw && o.methods[i] == KVC_METHOD_EXACT) continue;
        char name[40];
        snprintf(name, sizeof name, "%s%s", kvc_method_name(o.methods[i]), hw ? " heads" : "");
        printf("%-20s", name);
        for (int j = 0; j < o.n_pct; j++) {
            const ppl_result *r = &res[kvc_bench_find(&o, o.methods[i], o.pcts[j], hw)];
            char cell[40];
            if (r->status == 1) {
                const double p = exp(r->nll / (n - 1));
                snprintf(cell, sizeof cell, "%.4f (x%.3f)", p, p / exact_ppl);
            } else
                snprintf(cell, sizeof cell, r->status == -1 ? "n/a" : "error");
            printf(" %18s", cell);
        }
        printf("\n");
    }
    for (int g = 0; g < o.n_cfg; g++)
        if (res[g].status == -1) printf("  n/a: %s: %s\n", o.cfg[g].label, res[g].why);
    ret = 0; /* every CSV row was written as its configuration finished */
    for (int g = 0; g < o.n_cfg; g++)
        if (res[g].status == -2) ret = 1;
done:
    if (csv) fclose(csv);
    free(toks), free(res), free(text), free(pc_state);
    kvc_lm_close(&lm);
    return ret;
}
