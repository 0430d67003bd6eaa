/* kvc generate: text from a llama2.c checkpoint with a compressed KV cache. */
#define _POSIX_C_SOURCE 200809L
#include "generate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "method_opts.h"
#include "kvc/kvc.h"
#include "llama2c.h"
#include "commands.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int sample(const float *logits, int n, float temp, kvc_rng *r)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    if (temp <= 0.0f) return best;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)(logits[i] - logits[best]) / temp);
    double u = kvc_rng_unit(r) * sum, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += exp((double)(logits[i] - logits[best]) / temp);
        if (u < acc) return i;
    }
    return n - 1;
}

#ifndef KVC_DEFAULT_MODEL_DIR
#define KVC_DEFAULT_MODEL_DIR "models/stories260K"
#endif

int kvc_model_paths(const char **model, const char **tok)
{
    static char mbuf[4096], tbuf[4096];
    if (!*model) {
        const char *env = getenv("KVC_MODEL");
        if (env) *model = env;
    }
    if (!*tok) {
        const char *env = getenv("KVC_TOKENIZER");
        if (env) *tok = env;
    }
    const char *dir = getenv("KVC_MODEL_DIR");
    if (!dir) dir = KVC_DEFAULT_MODEL_DIR;
    if (!*model) snprintf(mbuf, sizeof mbuf, "%s/stories260K.bin", dir), *model = mbuf;
    if (!*tok) snprintf(tbuf, sizeof tbuf, "%s/tok512.bin", dir), *tok = tbuf;
    return 0;
}

int kvc_model_open(const char *cmd, const char *model_path, const char *tok_path, kvc_l2c_model *m,
                   kvc_l2c_tokenizer *tok)
{
    char err[512];
    kvc_model_paths(&model_path, &tok_path);
    if (kvc_l2c_model_load(model_path, m, err, sizeof err) != KVC_OK) {
        fprintf(stderr,
                "kvc %s: model: %s\n  (stories260K is karpathy's tinyllamas model: stories260K.bin + tok512.bin;\n"
                "   pass --model/--tokenizer, or set KVC_MODEL_DIR)\n",
                cmd, err);
        return 1;
    }
    if (kvc_l2c_tokenizer_load(tok_path, m->cfg.vocab_size, tok, err, sizeof err) != KVC_OK) {
        fprintf(stderr, "kvc %s: tokenizer: %s\n", cmd, err);
        kvc_l2c_model_free(m);
        return 1;
    }
    return 0;
}

int kvc_lm_open(const char *cmd, const char *model_path, const char *tok_path, kvc_lm *lm)
{
    memset(lm, 0, sizeof *lm);
    lm->cmd = cmd;
    const size_t mlen = model_path ? strlen(model_path) : 0;
    if (mlen > 5 && !strcmp(model_path + mlen - 5, ".gguf")) {
        char err[256];
        if (tok_path) { /* the GGUF carries its own tokenizer: a second one would be ignored */
            fprintf(stderr, "kvc %s: --tokenizer '%s' is for llama2.c models; '%s' carries its own tokenizer\n", cmd,
                    tok_path, model_path);
            return 1;
        }
        if (kvc_gguf_llama_load(model_path, &lm->m, err, sizeof err) != KVC_OK ||
            !(lm->bpe = kvc_bpe_load(model_path, err, sizeof err))) {
            fprintf(stderr, "kvc %s: %s\n", cmd, err);
            kvc_l2c_model_free(&lm->m);
            return 1;
        }
        if (kvc_bpe_vocab_size(lm->bpe) > lm->m.cfg.vocab_size) { /* an id past the embedding would read past it */
            fprintf(stderr, "kvc %s: '%s': the tokenizer has %d tokens but token_embd.weight only %d rows\n", cmd,
                    model_path, kvc_bpe_vocab_size(lm->bpe), lm->m.cfg.vocab_size);
            kvc_lm_close(lm);
            return 1;
        }
        return 0;
    }
    return kvc_model_open(cmd, model_path, tok_path, &lm->m, &lm->tok);
}

int kvc_lm_encode(const kvc_lm *lm, const char *source, const char *text, int *ids, int cap)
{
    if (!lm->bpe) {
        if (cap < (int)strlen(text) + 3) return -1;
        return kvc_l2c_encode(&lm->tok, text, ids);
    }
    size_t bad = 0;
    const int n = kvc_bpe_encode_n(lm->bpe, text, strlen(text), ids, cap, &bad);
    if (n == KVC_BPE_E_BYTE)
        fprintf(stderr,
                "kvc %s: %s: byte %zu (0x%02x) has no token in the model's vocabulary; refusing the text rather than "
                "dropping or replacing it\n",
                lm->cmd ? lm->cmd : "", source, bad, (unsigned)(unsigned char)text[bad]);
    return n;
}

int kvc_lm_encode_prefix(const kvc_lm *lm, const char *source, const char *text, int max_tokens, int **ids_out)
{
    /* a token covers at most max_token_length bytes (llama2.c) or its
       longest vocabulary entry's bytes (GGUF BPE): text beyond
       (max_tokens + 16) tokens' worth of bytes cannot reach the first
       max_tokens tokens but a merge at the cut; the cut is moved back to a
       space so no word is split there */
    const int longest = lm->bpe ? kvc_bpe_max_token_bytes(lm->bpe) : lm->tok.max_token_length;
    const size_t per = longest > 0 ? (size_t)longest : 1u;
    size_t len = strlen(text);
    const size_t bound = ((size_t)max_tokens + 16u) * per;
    if (len > bound) {
        len = bound;
        while (len > bound / 2 && text[len] != ' ' && text[len] != '\n') len--;
    }
    char *cut = malloc(len + 1);
    int *ids = malloc((len + 3) * sizeof(int));
    if (!cut || !ids) {
        free(cut), free(ids);
        *ids_out = NULL;
        return -1;
    }
    memcpy(cut, text, len);
    cut[len] = 0;
    int n = kvc_lm_encode(lm, source, cut, ids, (int)len + 3);
    free(cut);
    if (n < 0) {
        free(ids);
        *ids_out = NULL;
        return n;
    }
    if (n > max_tokens) n = max_tokens;
    *ids_out = ids;
    return n;
}

const char *kvc_lm_piece(const kvc_lm *lm, int prev, int tok, char *buf, int cap)
{
    if (lm->bpe) {
        kvc_bpe_decode(lm->bpe, tok, buf, cap);
        return buf;
    }
    char bb[2];
    snprintf(buf, (size_t)cap, "%s", kvc_l2c_decode(&lm->tok, prev, tok, bb));
    return buf;
}

int kvc_lm_end_token(const kvc_lm *lm) { return lm->bpe ? kvc_bpe_eos(lm->bpe) : 1; }

void kvc_lm_close(kvc_lm *lm)
{
    if (lm->bpe)
        kvc_bpe_free(lm->bpe);
    else
        kvc_l2c_tokenizer_free(&lm->tok);
    kvc_l2c_model_free(&lm->m);
    memset(lm, 0, sizeof *lm);
}

static void generate_usage(FILE *f)
{
    fprintf(f, "usage: kvc generate [-m M] [-p PROMPT] [-n STEPS] [--method X] [--budget B] [options] [method flags]\n"
               "  Text from a llama2.c or GGUF Llama model on a compressed cache, then the speed and the\n"
               "  cache's bytes against an f16 exact cache of the same tokens. The model defaults to\n"
               "  $KVC_MODEL (and $KVC_TOKENIZER), else $KVC_MODEL_DIR (default: the clone's\n"
               "  models/stories260K)/{stories260K.bin,tok512.bin}. --budget defaults to the model's\n"
               "  context (larger budgets are clamped to it); shares (P%%, P%%f16) are of the tokens the run\n"
               "  appends (prompt + steps). The library itself starts no threads.\n");
}

int kvc_cmd_generate(int argc, char **argv)
{
    kvc_generate_params p;
    memset(&p, 0, sizeof p);
    p.prompt = "", p.steps = 256, p.temp = 0.0;
    kvc_common_flags cf = kvc_common_flags_default();
    cf.method = "exact";
    kvc_method_opts mo;
    memset(&mo, 0, sizeof mo);
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "mtMbskwT", fl, 0);
    fl[nf++] =
        (kvc_flag){"--prompt", 's', &p.prompt, 0, 0, NULL, "P\tthe prompt (default: BOS; GGUF: \"Once upon a time\")"};
    fl[nf++] = (kvc_flag){
        "--steps", 'u', &p.steps, 1, 1u << 20, NULL, "K\ttokens to generate (default 256, at most the context)"};
    fl[nf++] = (kvc_flag){"--temp", 'f', &p.temp, 0.0, 100.0, NULL, "T\tsampling temperature (default 0: greedy)"};
    const int prc = kvc_cli_parse("generate", argc, argv, fl, nf, &mo, generate_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (kvc_common_flags_finish("generate", &cf)) return 2;
    if (kvc_l2c_set_threads((int)cf.threads) != 0) {
        fprintf(stderr, "kvc generate: cannot start %d decoder threads\n", (int)cf.threads);
        return 1;
    }
    p.model = cf.model, p.tokenizer = cf.tokenizer, p.method = cf.method;
    p.have_budget = cf.have_budget, p.budget = cf.budget;
    p.seed = cf.seed, p.sink = cf.sink, p.window = cf.window;
    return kvc_generate_run(&p, &mo);
}

int kvc_generate_run(const kvc_generate_params *p, const kvc_method_opts *mo)
{
    const char *model_path = p->model, *tok_path = p->tokenizer, *method_name = p->method ? p->method : "exact";
    const char *prompt = p->prompt ? p->prompt : "";
    uint64_t steps = p->steps ? p->steps : 256;
    const uint64_t seed = p->seed, sink = p->sink, window = p->window;
    const double temp = p->temp;
    kvc_method method;
    if (kvc_method_parse(method_name, &method) != KVC_OK) {
        char names[512];
        kvc_method_names(names, sizeof names);
        fprintf(stderr, "kvc generate: unknown method '%s' (%s)\n", method_name, names);
        return 2;
    }
    if (mo && kvc_method_opts_check(mo, "generate", &method, 1)) return 2;
    kvc_lm lm;
    if (kvc_lm_open("generate", model_path, tok_path, &lm)) return 1;
    kvc_l2c_model m = lm.m;
    kvc_bpe *bpe = lm.bpe;
    if (bpe && !*prompt) prompt = "Once upon a time";
    const int ctx = m.cfg.seq_len;
    if (steps > (uint64_t)ctx) steps = (uint64_t)ctx;
    const int hs = m.cfg.dim / m.cfg.n_heads;
    int rc = 1;
    void *arena = NULL;
    int *ptoks = NULL;
    kvc_l2c_state s = {0};
    int np = kvc_lm_encode_prefix(&lm, "--prompt", prompt, ctx, &ptoks); /* only what the context can hold */
    if (np == KVC_BPE_E_BYTE) goto done;                                 /* named where it was found */
    if (np < 1) np = 1;
    /* the cache never holds more than the context: a larger budget is clamped */
    const uint64_t usable = kvc_cli_usable_tokens((uint64_t)ctx, sink, window);
    /* the tokens this run appends: what a share of the context is a share of */
    const uint64_t run_tokens = (uint64_t)np + steps < (uint64_t)ctx ? (uint64_t)np + steps : (uint64_t)ctx;
    kvc_stream_config sc = kvc_stream_config_default(method, (uint32_t)hs, (uint32_t)hs, 1, seed);
    sc.n_sink = (uint32_t)sink, sc.n_window = (uint32_t)window;
    /* prefill methods compress the prompt, then stream: their layout (and so
       the budget a byte count buys) depends on it, so it is set first */
    sc.prefix_len = (uint32_t)np;
    if (mo) kvc_method_opts_apply(mo, &sc);
    {
        kvc_budget whole = {KVC_BUDGET_TOKENS, (double)usable};
        const kvc_budget *b = p->have_budget ? &p->budget : &whole;
        if (kvc_budget_resolve("generate", b, run_tokens, (uint64_t)m.cfg.n_layers * (uint64_t)m.cfg.n_kv_heads, mo,
                               &sc, 0, usable, "model's context length"))
            goto done;
    }
    if (method == KVC_METHOD_EXACT && sc.budget < run_tokens) sc.budget = (uint32_t)run_tokens;
    kvc_cache_config cc = kvc_l2c_cache_config(&m.cfg, &sc);
    const char *why = kvc_cache_config_problem(&cc);
    if (why) {
        fprintf(stderr, "kvc generate: %s\n", why);
        goto done;
    }
    size_t bytes = kvc_cache_arena_bytes(&cc);
    if (kvc_cli_arena_refused("generate", bytes)) goto done;
    arena = kvc_l2c_arena_alloc(bytes);
    kvc_cache *cache;
    if (!arena || !ptoks || kvc_l2c_state_alloc(&m.cfg, &s) != KVC_OK ||
        kvc_cache_init(arena, bytes, &cc, &cache) != KVC_OK) {
        fprintf(stderr, "kvc generate: cannot set up the cache (%zu bytes)\n", bytes);
        goto done;
    }
    {
        /* this decoder reads its prompt through the compressed cache, token by token */
        const kvc_stream_plan *pl0 = kvc_stream_get_plan(kvc_cache_get_stream(cache, 0, 0));
        if (pl0 && method == KVC_METHOD_BALANCEKV_PREFILL && pl0->bkv.mode == KVC_BALANCE_OFFLINE &&
            pl0->prefix_method_tokens > 0) {
            fprintf(stderr,
                    "kvc generate: --bkv-mode offline compresses a prompt given whole (kvc_cache_prefill, "
                    "after a prefill at full attention, as kvc bench recall does); kvc generate reads its "
                    "%d-token prompt through the cache one token at a time: use a tree mode (the default)\n",
                    np);
            goto done;
        }
    }
    kvc_rng r;
    kvc_rng_seed(&r, seed ^ 0x5eedull);
    int token = ptoks[0], prev = 1, pos = 0;
    char bb[2], piece[512];
    if (bpe && kvc_bpe_decode(bpe, token, piece, sizeof piece) > 0) fputs(piece, stdout);
    double t0 = now_s();
    /* --steps counts generated tokens: the prompt's np positions, then
       steps - 1 more forwards sample the steps tokens (the context permitting) */
    const int end = (uint64_t)np + steps - 1u < (uint64_t)ctx ? (int)((uint64_t)np + steps - 1u) : ctx;
    int generated = 0;
    for (; pos < end; pos++) {
        const kvc_status fst = kvc_l2c_forward(&m, &s, token, pos, kvc_l2c_cache_attention, cache);
        if (fst != KVC_OK) {
            const kvc_stream_plan *pl = kvc_stream_get_plan(kvc_cache_get_stream(cache, 0, 0));
            if (fst == KVC_E_CAPACITY && pl && pl->prefix_method_tokens + pl->tail_capacity > 0 &&
                (method == KVC_METHOD_BALANCEKV_PREFILL || method == KVC_METHOD_EXPRESS_PREFILL))
                fprintf(stderr,
                        "\nkvc generate: stopped at position %d: %s compresses the %d-token prompt and keeps "
                        "what follows in the exact tail asked for, which is full (%u tokens with budget "
                        "%u); raise --budget, or drop %s (the default tail is a reservoir that never fills)\n",
                        pos, method_name, np, pl->tail_capacity, sc.budget,
                        method == KVC_METHOD_BALANCEKV_PREFILL ? "--bkv-tail exact" : "--express-tail exact");
            else if (fst == KVC_E_CAPACITY)
                fprintf(stderr,
                        "\nkvc generate: stopped at position %d: the %s cache is full (budget %u); raise --budget\n",
                        pos, method_name, sc.budget);
            else {
                char words[160];
                fprintf(stderr, "\nkvc generate: forward failed at position %d: %s\n", pos,
                        kvc_l2c_failure(&m, &s, fst, words, sizeof words));
            }
            goto done;
        }
        int next = pos + 1 < np ? ptoks[pos + 1] : sample(s.logits, m.cfg.vocab_size, (float)temp, &r);
        if (pos + 1 >= np) generated++;
        if (bpe) {
            if (next == kvc_bpe_eos(bpe)) break;
            kvc_bpe_decode(bpe, next, piece, sizeof piece);
            fputs(piece, stdout);
        } else {
            if (next == 1) break; /* BOS ends a story */
            fputs(kvc_l2c_decode(&lm.tok, token, next, bb), stdout);
        }
        fflush(stdout);
        prev = token;
        token = next;
    }
    (void)prev;
    double dt = now_s() - t0;
    uint64_t el, peak;
    kvc_cache_get_usage_bytes(cache, &el, &peak);
    /* what a llama.cpp user's exact cache of the same tokens takes: f16 keys and values */
    const double f16_exact = (double)run_tokens * m.cfg.n_layers * m.cfg.n_kv_heads * 2.0 * hs * 2.0;
    printf("\n\n%d tokens generated after a %d-token prompt\n", generated, np);
    printf("%d tokens in %.3f s: %.1f tokens/s; method %s (%s rows), budget %" PRIu64
           " tokens/stream; kernels %s; %d decoder threads\n"
           "memory: arena %zu B (rows, weights, ids, scratch, headers) = %.1f%% of the %.0f B an f16 exact cache of"
           " the run's %d tokens (prompt + steps) takes; k/v held %.0f B (peak %.0f B)\n",
           pos, dt, pos / (dt > 0 ? dt : 1e-9), method_name, kvc_dtype_name(sc.dtype), (uint64_t)sc.budget,
           kvc_l2c_kernels()->name, kvc_l2c_threads(), bytes, 100.0 * (double)bytes / f16_exact, f16_exact,
           (int)run_tokens, (double)el, (double)peak);
    rc = 0;
done:
    kvc_l2c_arena_free(arena);
    free(ptoks);
    kvc_l2c_state_free(&s);
    kvc_lm_close(&lm);
    return rc;
}
