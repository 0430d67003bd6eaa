/* kvc logits: run a model (llama2.c .bin or Llama GGUF) over given token ids
 * with the exact cache and write every position's logits as .npy; prints the
 * top 5 of the last position. A check of the decoder, independent of any
 * tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_npy.h"
#include "llama2c.h"
#include "logits_cmd.h"
#include "cli.h"
#include "commands.h"

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

kvc_status kvc_model_load_any(const char *path, kvc_l2c_model *m, char *err, size_t errlen)
{
    return ends_with(path, ".gguf") ? kvc_gguf_llama_load(path, m, err, errlen)
                                    : kvc_l2c_model_load(path, m, err, errlen);
}

static void logits_usage(FILE *f)
{
    fprintf(f, "usage: kvc logits --model M.bin|M.gguf --tokens t0,t1,... [--out logits.npy]\n");
}

int kvc_cmd_logits(int argc, char **argv)
{
    const char *tokens = NULL, *out = NULL;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_flag fl[4];
    size_t nf = kvc_common_flags_add(&cf, "m", fl, 0);
    fl[nf++] = (kvc_flag){"--tokens", 's', &tokens, 0, 0, NULL, "t0,t1,..\ttoken ids"};
    fl[nf++] =
        (kvc_flag){"--out", 's', &out, 0, 0, NULL, "FILE.npy\tthe logits, one row per token (default logits.npy)"};
    const int prc = kvc_cli_parse("logits", argc, argv, fl, nf, NULL, logits_usage);
    if (prc) return prc == 1 ? 0 : 2;
    const char *model = cf.model;
    if (!model || !tokens) {
        logits_usage(stderr);
        return 2;
    }
    char err[256];
    kvc_l2c_model m;
    if (kvc_model_load_any(model, &m, err, sizeof err) != KVC_OK) {
        fprintf(stderr, "kvc logits: %s\n", err);
        return 1;
    }
    int ids[4096], n = 0;
    for (const char *p = tokens; *p;) {
        if (n == 4096 || n == m.cfg.seq_len) { /* past what the list or the model's positions hold */
            fprintf(stderr, "kvc logits: more than %d token ids; the model's context is %d positions%s\n", n,
                    m.cfg.seq_len, n == 4096 ? " and this command takes at most 4096" : "");
            kvc_l2c_model_free(&m);
            return 2;
        }
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= m.cfg.vocab_size) {
            fprintf(stderr, "kvc logits: bad token id near '%s' (vocabulary %d)\n", p, m.cfg.vocab_size);
            kvc_l2c_model_free(&m);
            return 2;
        }
        ids[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (n == 0) {
        fprintf(stderr, "kvc logits: --tokens needs at least one token id (comma-separated, e.g. 1,504,42)\n");
        kvc_l2c_model_free(&m);
        return 2;
    }
    const int hs = m.cfg.dim / m.cfg.n_heads;
    kvc_stream_config sc =
        kvc_stream_config_default(KVC_METHOD_EXACT, (uint32_t)hs, (uint32_t)hs, (uint32_t)(n + 1), 1);
    sc.n_sink = 0, sc.n_window = 0;
    kvc_cache_config cc = kvc_l2c_cache_config(&m.cfg, &sc);
    size_t bytes = kvc_cache_arena_bytes(&cc);
    if (kvc_cli_arena_refused("logits", bytes)) {
        kvc_l2c_model_free(&m);
        return 1;
    }
    void *arena = aligned_alloc(KVC_ARENA_ALIGN, KVC_ALIGN_UP(bytes));
    float *all = malloc((size_t)n * m.cfg.vocab_size * sizeof(float));
    kvc_l2c_state s;
    kvc_cache *cache;
    int rc = 1;
    if (!arena || !all || kvc_l2c_state_alloc(&m.cfg, &s) != KVC_OK ||
        kvc_cache_init(arena, bytes, &cc, &cache) != KVC_OK) {
        fprintf(stderr, "kvc logits: out of memory\n");
        goto done;
    }
    for (int pos = 0; pos < n; pos++) {
        const kvc_status fst = kvc_l2c_forward(&m, &s, ids[pos], pos, kvc_l2c_cache_attention, cache);
        if (fst != KVC_OK) {
            char why[160];
            fprintf(stderr, "kvc logits: forward failed at position %d: %s\n", pos,
                    kvc_l2c_failure(&m, &s, fst, why, sizeof why));
            goto done;
        }
        memcpy(all + (size_t)pos * m.cfg.vocab_size, s.logits, (size_t)m.cfg.vocab_size * sizeof(float));
    }
    int top[5] = {0, 0, 0, 0, 0};
    for (int k = 0; k < 5; k++) {
        int best = -1;
        for (int i = 0; i < m.cfg.vocab_size; i++) {
            int used = 0;
            for (int j = 0; j < k; j++) used |= top[j] == i;
            if (!used && (best < 0 || s.logits[i] > s.logits[best])) best = i;
        }
        top[k] = best;
    }
    printf("%d tokens; last position top 5:", n);
    for (int k = 0; k < 5; k++) printf(" %d (%.4f)", top[k], (double)s.logits[top[k]]);
    printf("\n");
    if (out) {
        size_t shape[2] = {(size_t)n, (size_t)m.cfg.vocab_size};
        if (kvc_npy_save(out, all, 2, shape, KVC_NPY_F32, err, sizeof err) != KVC_OK) {
            fprintf(stderr, "kvc logits: %s\n", err);
            goto done;
        }
    }
    rc = 0;
done:
    free(arena), free(all);
    kvc_l2c_state_free(&s);
    kvc_l2c_model_free(&m);
    return rc;
}
