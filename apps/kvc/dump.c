/* kvc dump: run the model with the exact cache, greedily after a prompt or
 * teacher-forced over a text file, and write each layer's post-RoPE q/k/v as
 * DIR/L<l>/{q,k,v}.npy, shapes (n_heads, n, hd) for q and (n_kv_heads, n, hd)
 * for k and v (kvc eval maps query heads to their kv head). Works for
 * llama2.c checkpoints and Llama GGUF files alike. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "generate.h"
#include "kvc/kvc.h"
#include "kvc_npy.h"
#include "lmrun.h"
#include "commands.h"

typedef struct rec_ctx {
    kvc_cache *cache;
    int n_heads, n_kv, hs, cap;
    float *q, *k, *v; /* [layer][head][cap][hs] */
} rec_ctx;

static kvc_status recording_attention(void *vctx, int layer, int pos, const float *q, const float *k, const float *v,
                                      float *out)
{
    rec_ctx *c = (rec_ctx *)vctx;
    for (int h = 0; h < c->n_heads; h++)
        memcpy(c->q + (((size_t)layer * c->n_heads + h) * c->cap + pos) * c->hs, q + h * c->hs, c->hs * sizeof(float));
    for (int h = 0; h < c->n_kv; h++) {
        memcpy(c->k + (((size_t)layer * c->n_kv + h) * c->cap + pos) * c->hs, k + h * c->hs, c->hs * sizeof(float));
        memcpy(c->v + (((size_t)layer * c->n_kv + h) * c->cap + pos) * c->hs, v + h * c->hs, c->hs * sizeof(float));
    }
    return kvc_l2c_cache_attention(c->cache, layer, pos, q, k, v, out);
}

static int make_dir(const char *p) { return kvc_mkdirs("dump", p); }

/* Copy rows [head][0..n) out of a [head][cap] layout. */
static float *compact(const float *src, int heads, int cap, int n, int hs)
{
    float *o = malloc((size_t)heads * n * hs * sizeof(float));
    if (!o) return NULL;
    for (int h = 0; h < heads; h++)
        memcpy(o + (size_t)h * n * hs, src + (size_t)h * cap * hs, (size_t)n * hs * sizeof(float));
    return o;
}

static void dump_usage(FILE *f)
{
    fprintf(f, "usage: kvc dump --steps K --out DIR [--prompt P | --text FILE] [--layers a,b,..]\n"
               "                [--model M.bin|M.gguf] [--tokenizer T.bin]\n"
               "  K tokens (at most the model's context) with the exact cache: the prompt, then greedy\n"
               "  decoding; or, with --text, FILE's first K tokens teacher-forced. Writes\n"
               "  DIR/L<l>/{q,k,v}.npy for every layer (or the listed ones).\n");
}

int kvc_cmd_dump(int argc, char **argv)
{
    const char *model_path = NULL, *tok_path = NULL, *prompt = "", *out_dir = NULL, *text_path = NULL;
    int layer_list[KVC_CACHE_MAX_LAYERS], n_layer_list = 0;
    uint64_t steps = 0;
    const char *layers = NULL;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_flag fl[12];
    size_t nf = kvc_common_flags_add(&cf, "mt", fl, 0);
    fl[nf++] = (kvc_flag){"--prompt", 's', &prompt, 0, 0, NULL, "P\tthe prompt, then greedy decoding"};
    fl[nf++] = (kvc_flag){"--out", 's', &out_dir, 0, 0, NULL, "DIR\twrites DIR/L<l>/{q,k,v}.npy"};
    fl[nf++] = (kvc_flag){"--text", 's', &text_path, 0, 0, NULL, "FILE\tteacher-force FILE's first K tokens instead"};
    fl[nf++] = (kvc_flag){"--layers", 's', &layers, 0, 0, NULL, "a,b,..\tonly these layers (default all)"};
    fl[nf++] = (kvc_flag){"--steps", 'u', &steps, 1, 1u << 20, NULL, "K\ttokens (at most the model's context)"};
    const int prc = kvc_cli_parse("dump", argc, argv, fl, nf, NULL, dump_usage);
    if (prc) return prc == 1 ? 0 : 2;
    model_path = cf.model, tok_path = cf.tokenizer;
    if (layers) {
        char *end = NULL;
        for (const char *p = layers; *p; p = *end ? end + 1 : end) {
            long l = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',') || l < 0 || l >= (long)KVC_CACHE_MAX_LAYERS ||
                n_layer_list == (int)KVC_CACHE_MAX_LAYERS) {
                fprintf(stderr, "kvc dump: --layers expects comma-separated layer numbers, got '%s'\n", layers);
                return 2;
            }
            layer_list[n_layer_list++] = (int)l;
        }
    }
    if (!out_dir || steps == 0) {
        fprintf(stderr, "kvc dump: --steps and --out are required\n");
        return 2;
    }
    if (text_path && *prompt) {
        fprintf(stderr, "kvc dump: --prompt and --text exclude each other\n");
        return 2;
    }
    char *text = NULL;
    if (text_path && !(text = kvc_lm_read_text("dump", text_path))) {
        return 1;
    }
    kvc_lm lm;
    if (kvc_lm_open("dump", model_path, tok_path, &lm)) {
        free(text);
        return 1;
    }
    const kvc_l2c_model m = lm.m;
    for (int i = 0; i < n_layer_list; i++)
        if (layer_list[i] >= m.cfg.n_layers) {
            fprintf(stderr, "kvc dump: layer %d: the model has %d layers (0..%d)\n", layer_list[i], m.cfg.n_layers,
                    m.cfg.n_layers - 1);
            free(text);
            kvc_lm_close(&lm);
            return 2;
        }
    if (text) prompt = text;
    if (steps > (uint64_t)m.cfg.seq_len) steps = (uint64_t)m.cfg.seq_len;
    const int hs = m.cfg.dim / m.cfg.n_heads, L = m.cfg.n_layers, n = (int)steps;
    rec_ctx c = {NULL, m.cfg.n_heads, m.cfg.n_kv_heads, hs, n, NULL, NULL, NULL};
    /* an exact cache of the whole run: no sink or window regions (with the
       default 32 + 32 a run of 65 steps was refused as "out of memory") */
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_EXACT, (uint32_t)hs, (uint32_t)hs, (uint32_t)n + 1u, 1);
    sc.n_sink = 0, sc.n_window = 0;
    kvc_cache_config cc = kvc_l2c_cache_config(&m.cfg, &sc);
    size_t bytes = kvc_cache_arena_bytes(&cc);
    if (bytes == 0) {
        fprintf(stderr, "kvc dump: cannot hold %d steps: %s\n", n, kvc_cache_config_problem(&cc));
        free(text);
        kvc_lm_close(&lm);
        return 1;
    }
    if (kvc_cli_arena_refused("dump", bytes)) {
        free(text);
        kvc_lm_close(&lm);
        return 1;
    }
    void *arena = aligned_alloc(KVC_ARENA_ALIGN, KVC_ALIGN_UP(bytes));
    int *ptoks = malloc((strlen(prompt) + 3) * sizeof(int));
    kvc_l2c_state s = {0};
    c.q = malloc((size_t)L * c.n_heads * n * hs * sizeof(float));
    c.k = malloc((size_t)L * c.n_kv * n * hs * sizeof(float));
    c.v = malloc((size_t)L * c.n_kv * n * hs * sizeof(float));
    int rc = 1;
    if (!arena || !ptoks || !c.q || !c.k || !c.v || kvc_l2c_state_alloc_chunk(&m.cfg, KVC_LM_CHUNK, &s) != KVC_OK ||
        kvc_cache_init(arena, bytes, &cc, &c.cache) != KVC_OK) {
        fprintf(stderr, "kvc dump: out of memory\n");
        goto done;
    }
    int np = kvc_lm_encode(&lm, text ? text_path : "the prompt", prompt, ptoks, (int)strlen(prompt) + 3);
    if (np < 1) {
        if (np == KVC_BPE_E_BYTE) goto done; /* named where it was found */
        fprintf(stderr, "kvc dump: the prompt gives no tokens\n");
        goto done;
    }
    if (text && np < n) {
        fprintf(stderr, "kvc dump: '%s' has %d tokens, fewer than --steps %d\n", text_path, np, n);
        goto done;
    }
    /* the prompt (or text) in chunks, then greedy decoding one token at a time */
    const int fed = np < n ? np : n;
    char why[160];
    kvc_status fst = kvc_lm_feed(&m, &s, ptoks, fed - 1, 0, recording_attention, &c, NULL, NULL, NULL, NULL);
    if (fst != KVC_OK) {
        fprintf(stderr, "kvc dump: forward failed: %s\n", kvc_l2c_failure(&m, &s, fst, why, sizeof why));
        goto done;
    }
    int token = ptoks[fed - 1];
    for (int pos = fed - 1; pos < n; pos++) {
        if ((fst = kvc_l2c_forward(&m, &s, token, pos, recording_attention, &c)) != KVC_OK) {
            fprintf(stderr, "kvc dump: forward failed at position %d: %s\n", pos,
                    kvc_l2c_failure(&m, &s, fst, why, sizeof why));
            goto done;
        }
        token = kvc_lm_argmax(s.logits, m.cfg.vocab_size);
    }
    if (make_dir(out_dir)) goto done;
    for (int li = 0; li < (n_layer_list ? n_layer_list : L); li++) {
        const int l = n_layer_list ? layer_list[li] : li;
        char dir[4096], path[4200], err[256];
        snprintf(dir, sizeof dir, "%s/L%d", out_dir, l);
        if (make_dir(dir)) goto done;
        const char *names[3] = {"q.npy", "k.npy", "v.npy"};
        const float *src[3] = {c.q + (size_t)l * c.n_heads * n * hs, c.k + (size_t)l * c.n_kv * n * hs,
                               c.v + (size_t)l * c.n_kv * n * hs};
        const int heads[3] = {c.n_heads, c.n_kv, c.n_kv};
        for (int a = 0; a < 3; a++) {
            float *buf = compact(src[a], heads[a], n, n, hs);
            size_t shape[3] = {(size_t)heads[a], (size_t)n, (size_t)hs};
            snprintf(path, sizeof path, "%s/%s", dir, names[a]);
            kvc_status st = buf ? kvc_npy_save(path, buf, 3, shape, KVC_NPY_F32, err, sizeof err) : KVC_E_CAPACITY;
            free(buf);
            if (st != KVC_OK) {
                fprintf(stderr, "kvc dump: %s: %s\n", path, err);
                goto done;
            }
        }
    }
    printf("kvc dump: %d tokens, %d layers -> %s/L<l>/{q,k,v}.npy (q: %d heads, k/v: %d heads, head_dim %d)\n", n,
           n_layer_list ? n_layer_list : L, out_dir, c.n_heads, c.n_kv, hs);
    rc = 0;
done:
    free(arena), free(ptoks), free(c.q), free(c.k), free(c.v);
    kvc_l2c_state_free(&s);
    kvc_lm_close(&lm);
    free(text);
    return rc;
}
