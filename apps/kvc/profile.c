/* kvc profile: which (layer, kv head) of a model looks where. The model runs
 * with an exact cache over a few prompts (a text file and/or passkey
 * prompts); at every position past the first sinks + window + 64 tokens, each
 * kv head's query group attends with its attention masses
 * (kvc_stream_attend_batch), and the head collects
 *   local: the mass on the first `sink` tokens and the last `window` ones;
 *   top:   of the rest ("far"), the share held by its 8 largest entries.
 * Averaged over positions and query heads, a head is
 *   streaming  when local >= --local (default 0.9): sinks + window answer it;
 *   retrieval  when not, and top >= --top (default 0.5): it fetches a few far tokens;
 *   diffuse    otherwise: its far mass is spread (what sampling methods estimate).
 * The thresholds follow the split DuoAttention makes between streaming and
 * retrieval heads; they are parameters, and the file keeps the scores, so a
 * user can re-cut it. Output: one line per (layer, kv head), read by
 * `kvc bench ... --head-profile FILE` (apps/kvc/head_profile.c). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "generate.h"
#include "head_profile.h"
#include "kvc/kvc.h"
#include "lmrun.h"
#include "passkey.h"
#include "commands.h"

#define TOP_K 8

typedef struct prof_ctx {
    kvc_cache *cache;
    int n_kv, group, hs;
    uint32_t sink, window;
    double *local, *top, *count; /* [layer][kv head] sums */
    double *mass;                /* one stream's view entries */
    size_t mass_cap;
    unsigned char *work;
    size_t work_cap;
} prof_ctx;

/* Sum of the k largest of x[0..n) (k small: a running top list). */
static double top_sum(const double *x, size_t n, int k)
{
    double best[TOP_K] = {0};
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        if (have < k) {
            best[have++] = x[i];
            continue;
        }
        int low = 0;
        for (int j = 1; j < k; j++)
            if (best[j] < best[low]) low = j;
        if (x[i] > best[low]) best[low] = x[i];
    }
    double s = 0.0;
    for (int j = 0; j < have; j++) s += best[j];
    return s;
}

static kvc_status profiling_attention(void *vctx, int layer, int pos, const float *q, const float *k, const float *v,
                                      float *out)
{
    prof_ctx *c = (prof_ctx *)vctx;
    (void)pos;
    kvc_status rc = kvc_cache_append(c->cache, NULL, (uint32_t)layer, k, v);
    if (rc != KVC_OK) return rc;
    for (int h = 0; h < c->n_kv; h++) {
        const kvc_stream *st = kvc_cache_get_stream(c->cache, (uint32_t)layer, (uint32_t)h);
        const size_t E = kvc_stream_view_entries(st), wb = kvc_stream_attend_work_bytes(st, 1, (size_t)c->group);
        if (E > c->mass_cap) {
            free(c->mass);
            c->mass_cap = 2 * E;
            if (!(c->mass = malloc(c->mass_cap * sizeof(double)))) return KVC_E_CAPACITY;
        }
        if (wb > c->work_cap) {
            free(c->work);
            c->work_cap = wb;
            if (!(c->work = aligned_alloc(64, (wb + 63) / 64 * 64))) return KVC_E_CAPACITY;
        }
        const size_t off = (size_t)h * c->group * c->hs;
        rc = kvc_stream_attend_batch(st, NULL, q + off, 1, (size_t)c->group, out + off, c->mass, c->work, c->work_cap);
        if (rc != KVC_OK) return rc;
        /* the exact stream's view: sinks, window, current token, then the rest in order */
        const size_t near = (size_t)c->sink + c->window + 1;
        if (E < near + 64) continue; /* too few far tokens to tell a head's kind */
        double local = 0.0, far = 0.0;
        for (size_t i = 0; i < near; i++) local += c->mass[i];
        for (size_t i = near; i < E; i++) far += c->mass[i];
        const size_t at = (size_t)layer * c->n_kv + h;
        c->local[at] += local / c->group;
        c->top[at] += far > 0.0 ? top_sum(c->mass + near, E - near, TOP_K) / far : 0.0;
        c->count[at] += 1.0;
    }
    return KVC_OK;
}

static void profile_usage(FILE *f)
{
    fprintf(f, "usage: kvc profile --out FILE [--text T] [--tokens N] [--passkeys P] [--sink S] [--window W]\n"
               "                   [--local X] [--top Y] [--seed S] [--model M] [--tokenizer T]\n"
               "  Scores every (layer, kv head) of the model on the first N tokens of T (default 2048)\n"
               "  and on P passkey prompts of N tokens (default 2; keys and depths from --seed, default 7):\n"
               "  local = attention on the first S (default 4) and last W (default 64) tokens, top = share\n"
               "  of the rest held by its 8 largest entries. A head is streaming when local >= X (0.9),\n"
               "  else retrieval when top >= Y (0.5), else diffuse. FILE: one line per head, read by\n"
               "  kvc bench --head-profile.\n");
}

/* Run toks[0..n) through the model with a fresh exact cache, adding to the sums. */
static int profile_run(const kvc_lm *lm, prof_ctx *c, const int *toks, int n)
{
    kvc_stream_config sc =
        kvc_stream_config_default(KVC_METHOD_EXACT, (uint32_t)c->hs, (uint32_t)c->hs, (uint32_t)n + 1u, 1);
    sc.n_sink = c->sink, sc.n_window = c->window;
    void *arena = kvc_lm_cache_new("profile", &lm->m.cfg, &sc, KVC_BUDGET_UNIFORM, &c->cache, NULL);
    if (!arena) return 1;
    kvc_l2c_state s = {0};
    int rc = 1;
    if (kvc_l2c_state_alloc_chunk(&lm->m.cfg, KVC_LM_CHUNK, &s) == KVC_OK) {
        const kvc_status st = kvc_lm_feed(&lm->m, &s, toks, n, 0, profiling_attention, c, NULL, NULL, NULL, NULL);
        if (st == KVC_OK)
            rc = 0;
        else
            fprintf(stderr, "kvc profile: the run failed: %s\n", kvc_status_str(st));
    }
    kvc_l2c_state_free(&s);
    kvc_l2c_arena_free(arena);
    return rc;
}

int kvc_cmd_profile(int argc, char **argv)
{
    const char *out_path = NULL, *text_path = NULL;
    uint64_t tokens = 2048, passkeys = 2, sink = 4, window = 64, seed = 7;
    double local_min = 0.9, top_min = 0.5;
    kvc_common_flags cf = kvc_common_flags_default();
    kvc_flag fl[16];
    size_t nf = kvc_common_flags_add(&cf, "mt", fl, 0);
    fl[nf++] =
        (kvc_flag){"--out", 's', &out_path, 0, 0, NULL, "FILE\tone line per head, read by kvc bench --head-profile"};
    fl[nf++] = (kvc_flag){"--text", 's', &text_path, 0, 0, NULL, "T\tthe text scored (default the GPL-3 text)"};
    fl[nf++] = (kvc_flag){"--tokens",
                          'u',
                          &tokens,
                          256,
                          1u << 20,
                          NULL,
                          "N\ttokens of the text and of each passkey prompt (default 2048)"};
    fl[nf++] = (kvc_flag){"--passkeys", 'u', &passkeys, 0, 64, NULL, "P\tpasskey prompts (default 2)"};
    fl[nf++] = (kvc_flag){"--sink", 'u', &sink, 0, 1024, NULL, "S\tfirst tokens of the local share (default 4)"};
    fl[nf++] = (kvc_flag){"--window", 'u', &window, 0, 4096, NULL, "W\tlast tokens of the local share (default 64)"};
    fl[nf++] = (kvc_flag){"--seed", 'u', &seed, 0, UINT32_MAX, NULL, "S\tkeys and depths of the passkeys (default 7)"};
    fl[nf++] =
        (kvc_flag){"--local", 'f', &local_min, 0, 1, NULL, "X\tstreaming when the local share >= X (default 0.9)"};
    fl[nf++] =
        (kvc_flag){"--top", 'f', &top_min, 0, 1, NULL, "Y\telse retrieval when the top-8 share >= Y (default 0.5)"};
    const int prc = kvc_cli_parse("profile", argc, argv, fl, nf, NULL, profile_usage);
    if (prc) return prc == 1 ? 0 : 2;
    if (!out_path || (!text_path && passkeys == 0)) {
        fprintf(stderr, "kvc profile: --out and at least one prompt (--text, or --passkeys >= 1) are required\n");
        return 2;
    }
    char *text = NULL;
    if (text_path && !(text = kvc_lm_read_text("profile", text_path))) {
        return 1;
    }
    kvc_lm lm;
    if (kvc_lm_open("profile", cf.model, cf.tokenizer, &lm)) {
        free(text);
        return 1;
    }
    const kvc_l2c_config *mc = &lm.m.cfg;
    if (tokens > (uint64_t)mc->seq_len) tokens = (uint64_t)mc->seq_len;
    const int L = mc->n_layers, nkv = mc->n_kv_heads, n = (int)tokens;
    prof_ctx c;
    memset(&c, 0, sizeof c);
    c.n_kv = nkv, c.group = mc->n_heads / nkv, c.hs = mc->dim / mc->n_heads;
    c.sink = (uint32_t)sink, c.window = (uint32_t)window;
    c.local = calloc((size_t)L * nkv, sizeof(double));
    c.top = calloc((size_t)L * nkv, sizeof(double));
    c.count = calloc((size_t)L * nkv, sizeof(double));
    int *toks = malloc((size_t)n * sizeof(int));
    int rc = 1, runs = 0;
    if (!c.local || !c.top || !c.count || !toks) {
        fprintf(stderr, "kvc profile: out of memory\n");
        goto done;
    }
    if (text) {
        int *ids = NULL;
        const int got = kvc_lm_encode_prefix(&lm, text_path, text, n, &ids);
        if (got == KVC_BPE_E_BYTE) goto done; /* named where it was found */
        if (got < (int)(sink + window + 65)) {
            fprintf(stderr, "kvc profile: '%s' gives %d tokens, too few to profile\n", text_path, got);
            free(ids);
            goto done;
        }
        printf("kvc profile: %s, %d tokens\n", text_path, got);
        fflush(stdout);
        const int bad = profile_run(&lm, &c, ids, got);
        free(ids);
        if (bad) goto done;
        runs++;
    }
    kvc_rng r;
    kvc_rng_seed(&r, seed);
    for (uint64_t p = 0; p < passkeys; p++) {
        kvc_passkey pk;
        const double depth = 0.1 + 0.8 * kvc_rng_unit(&r);
        const unsigned key = 10000u + (unsigned)(kvc_rng_unit(&r) * 89999.0);
        if (kvc_passkey_build(&lm, n, 0, depth, key, toks, &pk)) goto done;
        const int len = pk.n_hay + pk.n_question;
        printf("kvc profile: passkey prompt %d of %d tokens, needle at %d (seed %llu)\n", (int)p + 1, len,
               pk.needle_tok, (unsigned long long)seed);
        fflush(stdout);
        if (profile_run(&lm, &c, toks, len)) goto done;
        runs++;
    }
    kvc_head_profile hp;
    memset(&hp, 0, sizeof hp);
    hp.n_layers = L, hp.n_kv_heads = nkv;
    int kinds[KVC_HEAD_KINDS] = {0};
    for (int i = 0; i < L * nkv; i++) {
        const double cnt = c.count[i] > 0 ? c.count[i] : 1.0;
        hp.local[i] = c.local[i] / cnt, hp.top[i] = c.top[i] / cnt;
        hp.kind[i] = hp.local[i] >= local_min ? KVC_HEAD_STREAMING
                     : hp.top[i] >= top_min   ? KVC_HEAD_RETRIEVAL
                                              : KVC_HEAD_DIFFUSE;
        kinds[hp.kind[i]]++;
    }
    char note[256];
    snprintf(note, sizeof note,
             "%d runs of %d tokens, sink %llu window %llu, local >= %g streaming, top-8 >= %g retrieval", runs, n,
             (unsigned long long)sink, (unsigned long long)window, local_min, top_min);
    if (kvc_head_profile_write(out_path, &hp, note)) goto done;
    printf("kvc profile: %d layers x %d kv heads: %d streaming, %d retrieval, %d diffuse -> %s\n", L, nkv,
           kinds[KVC_HEAD_STREAMING], kinds[KVC_HEAD_RETRIEVAL], kinds[KVC_HEAD_DIFFUSE], out_path);
    rc = 0;
done:
    free(c.local), free(c.top), free(c.count), free(c.mass), free(c.work), free(toks), free(text);
    kvc_lm_close(&lm);
    return rc;
}
