/* kvc demo: the README's main job.
 * With the stories260K model (found through --model/--tokenizer, $KVC_MODEL,
 * $KVC_TOKENIZER, $KVC_MODEL_DIR or the repository's models/stories260K): greedy
 * text with exact and with subgen at 25% of the context, then a table of
 * perplexity and mean relative attention error per method at 25% and 50%.
 * Without it (or with --synthetic): a clustered synthetic trace and a table
 * of every method at one budget. */
#include "method_opts.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "eval.h"
#include "generate.h"
#include "kvc/kvc.h"
#include "ppl.h"
#include "synth.h"
#include "commands.h"

/* every method of the library's registry */
#define N_METHODS kvc_method_count()

static int synthetic_demo(uint64_t n, uint64_t d, uint64_t budget, uint64_t seed, const char *dir)
{
    const kvc_synth_params sp = {"clustered", n, d, 0, seed, 0, 0, dir};
    printf("$ kvc synth --kind clustered --n %" PRIu64 " --d %" PRIu64 " --seed %" PRIu64 " --out %s\n", n, d, seed,
           dir);
    if (kvc_synth_run(&sp) != 0) return 1;
    kvc_trace tr;
    if (kvc_trace_load(dir, 0, &tr)) return 1;
    printf("\n%-18s %8s %12s %12s %12s %10s %12s\n", "method", "budget", "mean_rel", "p99_rel", "mean_norm",
           "max_tokens", "arena_bytes");
    int rc = 0;
    for (size_t i = 0; i < N_METHODS; i++) {
        uint32_t b = kvc_method_at(i) == KVC_METHOD_EXACT ? (uint32_t)tr.n : (uint32_t)budget;
        kvc_stream_config cfg = kvc_stream_config_default(kvc_method_at(i), (uint32_t)tr.d, (uint32_t)tr.dv, b, seed);
        cfg.prefix_len = (uint32_t)tr.n; /* prefill: the trace is the prompt */
        kvc_eval_result r;
        if (kvc_eval_run(&tr, &cfg, dir, 0, 0, &r) != 0) {
            rc = 1;
            continue;
        }
        printf("%-18s %8" PRIu32 " %12.4e %12.4e %12.4e %10" PRIu64 " %12zu\n", kvc_method_name(kvc_method_at(i)), b,
               r.mean_rel, r.p99_rel, r.mean_norm, r.max_tokens, r.arena_bytes);
    }
    printf("(errors over positions where the cache is over budget; exact runs at the trace length.\n"
           " norm_error uses ||V||_op for subgen, ||V||_F otherwise; see `kvc eval --help`.)\n");
    kvc_trace_free(&tr);
    return rc;
}

static int model_demo(const char *model, const char *tok, const char *text, int ctx, uint64_t seed)
{
    /* exact, then the recommended configuration (docs/quality.md, "At equal bytes"):
       sink-window with int8 rows and a quarter of the budget for protected spans,
       at 25% of an f16 exact cache's bytes */
    kvc_method_opts rec;
    memset(&rec, 0, sizeof rec);
    rec.have_dtype = 1, rec.dtype = KVC_DTYPE_I8, rec.protect_pct = 25;
    for (int i = 0; i < 2; i++) {
        if (i)
            printf("$ kvc generate --method sink-window --dtype int8 --protect 25 --budget 25%%f16 --steps %d\n",
                   ctx / 2);
        else
            printf("$ kvc generate --method exact --steps %d\n", ctx / 2);
        kvc_generate_params gp;
        memset(&gp, 0, sizeof gp);
        gp.model = model, gp.tokenizer = tok, gp.method = i ? "sink-window" : "exact", gp.prompt = "";
        gp.steps = (uint64_t)(ctx / 2), gp.seed = seed, gp.sink = 32, gp.window = 32;
        gp.have_budget = i, gp.budget.kind = KVC_BUDGET_F16, gp.budget.value = 25;
        if (kvc_generate_run(&gp, i ? &rec : NULL) != 0) return 1;
        printf("\n");
    }
    printf("$ kvc ppl --text %s --method M --budget B   (context %d; budgets 25%% and 50%%)\n", text, ctx);
    printf("%-18s %8s %12s %16s %12s\n", "method", "budget", "perplexity", "exact_perplexity", "mean_rel_attn");
    for (int frac = 4; frac >= 2; frac /= 2) {
        for (size_t i = 0; i < N_METHODS; i++) {
            uint32_t b = kvc_method_at(i) == KVC_METHOD_EXACT ? (uint32_t)ctx : (uint32_t)(ctx / frac);
            if (kvc_method_at(i) == KVC_METHOD_EXACT && frac != 4) continue;
            kvc_ppl_result r;
            const kvc_budget bb = {KVC_BUDGET_TOKENS, (double)b};
            if (kvc_ppl_run(model, tok, text, kvc_method_at(i), &bb, 32, 32, seed, 0, 0, NULL, &r) != 0) return 1;
            if (r.mean_rel_attn == r.mean_rel_attn)
                printf("%-18s %8u %12.4f %16.4f %12.4e\n", kvc_method_name(kvc_method_at(i)), b, r.perplexity,
                       r.exact_perplexity, r.mean_rel_attn);
            else /* NaN: the cache never went over budget */
                printf("%-18s %8u %12.4f %16.4f %12s\n", kvc_method_name(kvc_method_at(i)), b, r.perplexity,
                       r.exact_perplexity, "-");
        }
    }
    printf("(mean_rel_attn: relative error of each layer's attention output against exact attention over the\n"
           " same run's keys/values, averaged over layers, heads and positions where the cache is over budget)\n");
    return 0;
}

static void demo_usage(FILE *f)
{
    fprintf(f, "usage: kvc demo [--model M.bin --tokenizer T.bin] [--text FILE] [--synthetic] [options]\n"
               "  With a llama2.c model (default: the clone's models/stories260K): greedy text with the\n"
               "  exact cache and with the recommended compressed one (sink-window, int8 rows, protected spans\n"
               "  at 25%% of an f16 exact cache's bytes), then a perplexity table of every method at 25%% and\n"
               "  50%% of the context on FILE. With --synthetic (or no model): every method on a clustered\n"
               "  synthetic trace at one budget (tokens or P%% of --n).\n");
}

int kvc_cmd_demo(int argc, char **argv)
{
    uint64_t n = 8192, d = 64;
    const char *dir = "out/demo-trace", *text = "tests/data/story.txt";
    int synthetic = 0;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "mtbs", fl, 0);
    fl[nf++] = (kvc_flag){
        "--text", 's', &text, 0, 0, NULL, "FILE\ttext of the perplexity table (default tests/data/story.txt)"};
    fl[nf++] =
        (kvc_flag){"--synthetic", 'b', &synthetic, 0, 0, NULL, "\tthe synthetic table even when a model is found"};
    fl[nf++] = (kvc_flag){"--n", 'u', &n, 2, 1u << 20, NULL, "N\tsynthetic: tokens of the trace (default 8192)"};
    fl[nf++] = (kvc_flag){"--d", 'u', &d, 1, KVC_MAX_HEAD_DIM, NULL, "D\tsynthetic: head dimension (default 64)"};
    fl[nf++] = (kvc_flag){
        "--dir", 's', &dir, 0, 0, NULL, "DIR\tsynthetic: where the trace is written (default out/demo-trace)"};
    const int prc = kvc_cli_parse("demo", argc, argv, fl, nf, NULL, demo_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_common_flags_finish("demo", &cf)) return 2;
    const char *model = cf.model, *tok = cf.tokenizer;
    const uint64_t seed = cf.seed;
    uint64_t budget = 512; /* the synthetic table's default, in tokens */
    if (cf.have_budget) {
        if (cf.budget.kind != KVC_BUDGET_TOKENS && cf.budget.kind != KVC_BUDGET_CONTEXT) {
            fprintf(stderr, "kvc demo: the synthetic table takes --budget in tokens or P%% of --n\n");
            return 2;
        }
        budget = cf.budget.kind == KVC_BUDGET_TOKENS ? (uint64_t)cf.budget.value
                                                     : (uint64_t)(cf.budget.value / 100.0 * (double)n + 0.999999);
    }
    if (!synthetic) {
        kvc_model_paths(&model, &tok);
        FILE *f = fopen(model, "rb");
        if (f) {
            fclose(f);
            kvc_l2c_model m;
            kvc_l2c_tokenizer t;
            if (kvc_model_open("demo", model, tok, &m, &t)) return 1;
            int ctx = m.cfg.seq_len;
            kvc_l2c_tokenizer_free(&t);
            kvc_l2c_model_free(&m);
            printf("model %s (context %d)\n\n", model, ctx);
            return model_demo(model, tok, text, ctx, seed);
        }
        printf("kvc demo: no model at %s.\n"
               "  The stories260K model ships in the clone's models/stories260K; pass --model/--tokenizer\n"
               "  or set KVC_MODEL_DIR. Showing the synthetic table instead.\n\n",
               model);
    }
    return synthetic_demo(n, d, budget, seed, dir);
}
