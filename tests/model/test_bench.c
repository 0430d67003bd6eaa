/* The benchmark machinery of kvc bench: passkey prompts, answer parsing, and
 * the recording full-attention prefill that seeds every method's cache. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_record.h"
#include "kvc_test.h"
#include "smollm2_path.h"
#include "lmrun.h"
#include "passkey.h"

static int open_stories(kvc_lm *lm)
{
    static char model[4096], tok[4096];
    snprintf(model, sizeof model, "%s/stories260K.bin", KVC_DEFAULT_MODEL_DIR);
    snprintf(tok, sizeof tok, "%s/tok512.bin", KVC_DEFAULT_MODEL_DIR);
    return kvc_lm_open("test", model, tok, lm);
}

static int open_smollm2(kvc_lm *lm)
{
    const char *path = kvc_test_smollm2_or_skip();
    if (!path) return KVC_TEST_SKIP;
    return kvc_lm_open("test", path, NULL, lm) ? 1 : 0;
}

static void text_of(const kvc_lm *lm, const int *toks, int a, int b, char *out, size_t cap)
{
    char piece[256];
    out[0] = 0;
    for (int i = a; i < b; i++) {
        kvc_lm_piece(lm, i > 0 ? toks[i - 1] : -1, toks[i], piece, sizeof piece);
        strncat(out, piece, cap - strlen(out) - 1);
    }
}

/* The prompt fills the context up to the answer room (within one filler
 * block), the needle sits where needle_tok says and nowhere else, and deeper
 * needles sit later. */
static int check_layout(const kvc_lm *lm, int context)
{
    const int room = 12;
    int *toks = malloc((size_t)context * sizeof(int));
    char *text = malloc(65536);
    CHECK(toks && text);
    int last_needle = -1;
    for (int d = 0; d <= 4; d++) {
        kvc_passkey pk;
        const unsigned key = 12345u + 1111u * (unsigned)d;
        CHECK(kvc_passkey_build(lm, context, room, d / 4.0, key, toks, &pk) == 0);
        const int n = pk.n_hay + pk.n_question;
        CHECK_MSG(n <= context - room, "%d tokens for a %d-token context", n, context);
        CHECK_MSG(n > context - room - 40, "prompt of %d tokens leaves most of %d unused", n, context);
        CHECK(pk.n_question >= 5 && pk.n_question <= 40); /* 38 bytes: at most one token per byte and a BOS */
        CHECK_MSG(pk.needle_tok > last_needle, "depth %d: needle at %d, previous %d", d, pk.needle_tok, last_needle);
        last_needle = pk.needle_tok;
        char key_s[8];
        snprintf(key_s, sizeof key_s, "%05u", key);
        CHECK(strcmp(key_s, pk.key) == 0);
        text_of(lm, toks, 0, pk.needle_tok, text, 65536);
        CHECK_MSG(strstr(text, key_s) == NULL && strstr(text, "pass key") == NULL, "key before the needle");
        text_of(lm, toks, pk.needle_tok, pk.needle_tok + 40, text, 65536);
        char want[64];
        snprintf(want, sizeof want, "The pass key is %s.", key_s);
        CHECK_MSG(strstr(text, want) != NULL, "needle text '%s'", text);
        text_of(lm, toks, pk.n_hay, n, text, 65536);
        CHECK_MSG(strstr(text, "What is the pass key? The pass key is") != NULL, "question '%s'", text);
    }
    free(toks), free(text);
    return 0;
}

static int passkey_prompt_layout(void)
{
    kvc_lm lm;
    CHECK(open_stories(&lm) == 0);
    int rc = check_layout(&lm, 400); /* stories260K: 512-token context */
    /* a natural-text haystack (--haystack): same layout rules */
    char *story = kvc_lm_read_text("test", KVC_STORY_PATH);
    CHECK(story && kvc_passkey_set_haystack(story) == 0);
    if (!rc) rc = check_layout(&lm, 400);
    kvc_passkey_set_haystack(NULL);
    free(story);
    kvc_lm_close(&lm);
    if (rc) return rc;
    int s = open_smollm2(&lm);
    if (s) {
        printf("(SmolLM2 part skipped)\n");
        return s == KVC_TEST_SKIP ? 0 : 1;
    }
    rc = check_layout(&lm, 2048);
    kvc_lm_close(&lm);
    return rc;
}

static int passkey_answer_parsing(void)
{
    const char *in[] = {" 71432.", "71432", " the 12th", "", "no digits", " 0712345678901234567", "a1b2"};
    const char *want[] = {"71432", "71432", "12", "", "", "071234567890123", "1"};
    for (int i = 0; i < 7; i++) {
        char out[16];
        kvc_passkey_answer(in[i], out);
        CHECK_MSG(strcmp(out, want[i]) == 0, "'%s' -> '%s', want '%s'", in[i], out, want[i]);
    }
    return 0;
}

/* The recording prefill's float attention (the decoder's kernel table's
 * batched attend) against the cache manager's exact method (the reference,
 * double accumulation) on every call of a real forward. Bound, per output
 * element: the scores carry at most g_hs * S of rounding (S = the largest
 * beta * sum_i |q_i k_i|), the max subtraction and exp a few ulps (the
 * vector exp: 2e-7 relative), so each softmax weight is off by a factor
 * within exp(+-2 (g_hs S + 4 eps)); the online softmax's rescalings (at most
 * one per block of entries; 4 entries per block on the narrowest table, so
 * nb = (pos + 4) / 4 blocks) add g_{2 nb};
 * the normaliser and the weighted sum of values add g_n; the output is a
 * convex combination of values, so |err| <= max|v| * (2 (2 (g_hs S + 4 eps))
 * + 2 g_n + 2 g_{2 nb}), g_k = k eps / (1 - k eps). */
typedef struct pair_ctx {
    kvc_kv_record rec;
    kvc_cache *cache;
    int calls, hs, n_heads, n_kv;
    double worst_ratio;
} pair_ctx;

static double gamma_k(double k)
{
    const double e = FLT_EPSILON / 2;
    return k * e / (1 - k * e);
}

static kvc_status both(void *vctx, int layer, int pos, const float *q, const float *k, const float *v, float *out)
{
    pair_ctx *c = (pair_ctx *)vctx;
    float ref[16 * 256];
    kvc_status st = kvc_l2c_cache_attention(c->cache, layer, pos, q, k, v, ref);
    if (st != KVC_OK) return st;
    st = kvc_kv_record_attention(&c->rec, layer, pos, q, k, v, out);
    if (st != KVC_OK) return st;
    const int hs = c->hs, group = c->n_heads / c->n_kv;
    for (int h = 0; h < c->n_heads; h++) {
        const int g = h / group;
        double S = 0, vmax = 0;
        for (int j = 0; j <= pos; j++) {
            const float *kj = kvc_kv_record_row(&c->rec, c->rec.k, layer, g, j);
            const float *vj = kvc_kv_record_row(&c->rec, c->rec.v, layer, g, j);
            double s = 0;
            for (int i = 0; i < hs; i++) {
                s += fabs((double)q[h * hs + i] * kj[i]);
                if (fabs(vj[i]) > vmax) vmax = fabs(vj[i]);
            }
            if (s * c->rec.beta > S) S = s * c->rec.beta;
        }
        const double w = gamma_k(hs) * S + 4 * FLT_EPSILON;
        const double tol = vmax * (4 * w + 2 * gamma_k(pos + 1) + 2 * gamma_k(2 * ((pos + 4) / 4)));
        for (int i = 0; i < hs; i++) {
            const double e = fabs((double)out[h * hs + i] - ref[h * hs + i]);
            if (tol > 0 && e / tol > c->worst_ratio) c->worst_ratio = e / tol;
            if (e > tol) {
                fprintf(stderr, "layer %d pos %d head %d: |diff| %.3g > bound %.3g\n", layer, pos, h, e, tol);
                return KVC_E_STATE; /* reported above */
            }
        }
    }
    c->calls++;
    return KVC_OK;
}

static int record_attention_matches_cache_exact(void)
{
    kvc_lm lm;
    CHECK(open_stories(&lm) == 0);
    const kvc_l2c_config *mc = &lm.m.cfg;
    int toks[512];
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
                       "One day, she saw a big red ball in the park. She ran to the ball and kicked it very hard.";
    int n = kvc_lm_encode(&lm, "the story", text, toks, 512);
    CHECK(n > 20);
    pair_ctx c;
    memset(&c, 0, sizeof c);
    c.hs = mc->dim / mc->n_heads, c.n_heads = mc->n_heads, c.n_kv = mc->n_kv_heads;
    CHECK(kvc_kv_record_alloc(&c.rec, mc, n) == 0);
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_EXACT, (uint32_t)c.hs, (uint32_t)c.hs, (uint32_t)n, 1);
    void *arena = kvc_lm_cache_new("test", mc, &sc, KVC_BUDGET_UNIFORM, &c.cache, NULL);
    CHECK(arena);
    kvc_l2c_state s;
    CHECK(kvc_l2c_state_alloc_chunk(mc, KVC_LM_CHUNK, &s) == KVC_OK);
    kvc_status st = kvc_lm_feed(&lm.m, &s, toks, n, 0, both, &c, NULL, NULL, NULL, NULL);
    printf("%d attention calls, worst |diff| / bound = %.3g\n", c.calls, c.worst_ratio);
    CHECK_MSG(st == KVC_OK, "%s", kvc_status_str(st));
    CHECK(c.calls == n * mc->n_layers);
    /* replaying the record into a fresh exact cache holds the same rows: the
     * same query gets the same bits from both caches */
    kvc_cache *c2;
    void *arena2 = kvc_lm_cache_new("test", mc, &sc, KVC_BUDGET_UNIFORM, &c2, NULL);
    CHECK(arena2 && kvc_kv_record_replay(&c.rec, c2, n) == KVC_OK);
    float q[16 * 256], o1[16 * 256], o2[16 * 256];
    for (int i = 0; i < mc->n_heads * c.hs; i++) q[i] = (float)sin(0.37 * i);
    for (int l = 0; l < mc->n_layers; l++) {
        CHECK(kvc_cache_attend(c.cache, NULL, (uint32_t)l, q, o1) == KVC_OK);
        CHECK(kvc_cache_attend(c2, NULL, (uint32_t)l, q, o2) == KVC_OK);
        CHECK_MSG(memcmp(o1, o2, (size_t)mc->n_heads * c.hs * sizeof(float)) == 0, "layer %d differs", l);
    }
    uint64_t e1, p1, e2, p2;
    kvc_cache_get_usage(c.cache, &e1, &p1), kvc_cache_get_usage(c2, &e2, &p2);
    CHECK(e1 == e2);
    CHECK(kvc_kv_record_replay(&c.rec, c2, n + 1) == KVC_E_ARG);
    /* the chunked prefill defers each layer's answers to the chunk's last
     * token; every query's arithmetic is the same, so the logits are too */
    float *logits_steps = malloc((size_t)mc->vocab_size * sizeof(float));
    CHECK(logits_steps);
    kvc_kv_record r2;
    CHECK(kvc_kv_record_alloc(&r2, mc, n) == 0);
    CHECK(kvc_lm_feed(&lm.m, &s, toks, n - 1, 0, kvc_kv_record_attention, &r2, NULL, NULL, NULL, NULL) == KVC_OK);
    CHECK(kvc_l2c_forward_chunk(&lm.m, &s, toks + n - 1, 1, n - 1, kvc_kv_record_attention, &r2, 0) == KVC_OK);
    memcpy(logits_steps, s.logits, (size_t)mc->vocab_size * sizeof(float));
    kvc_kv_record_free(&r2);
    CHECK(kvc_kv_record_alloc(&r2, mc, n) == 0);
    CHECK(kvc_kv_record_prefill(&r2, &lm.m, &s, toks, n - 1) == KVC_OK);
    CHECK(kvc_l2c_forward_chunk(&lm.m, &s, toks + n - 1, 1, n - 1, kvc_kv_record_attention, &r2, 0) == KVC_OK);
    CHECK_MSG(memcmp(logits_steps, s.logits, (size_t)mc->vocab_size * sizeof(float)) == 0,
              "chunked prefill changed the logits");
    CHECK(memcmp(r2.k, c.rec.k, (size_t)mc->n_layers * n * c.rec.row * sizeof(float)) == 0);
    kvc_kv_record_free(&r2);
    free(logits_steps);
    free(arena), free(arena2);
    kvc_l2c_state_free(&s);
    kvc_kv_record_free(&c.rec);
    kvc_lm_close(&lm);
    return 0;
}

static const kvc_test_case cases[] = {
    {"passkey_prompt_layout", passkey_prompt_layout},
    {"passkey_answer_parsing", passkey_answer_parsing},
    {"record_attention_matches_cache_exact", record_attention_matches_cache_exact},
};
KVC_TEST_MAIN(cases)
