/* The cache manager and the llama2.c decoder on the real stories260K model.
 * Model tests skip (77) with a message when the model is not found: set
 * KVC_MODEL_DIR, default: the repository's models/stories260K. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc/kvc.h"
#include "kvc_oracle/kvc_oracle.h"
#include "kvc_test.h"
#include "smollm2_path.h"
#include "kvc_testutil.h"
#include "bpe.h"
#include "llama2c.h"
#include "kvc/kvc_rng.h"

#ifndef KVC_DEFAULT_MODEL_DIR
#define KVC_DEFAULT_MODEL_DIR "models/stories260K"
#endif

static int load_model(kvc_l2c_model *m, kvc_l2c_tokenizer *t)
{
    const char *dir = getenv("KVC_MODEL_DIR");
    if (!dir) dir = KVC_DEFAULT_MODEL_DIR;
    char mp[4096], tp[4096], err[256];
    snprintf(mp, sizeof mp, "%s/stories260K.bin", dir);
    snprintf(tp, sizeof tp, "%s/tok512.bin", dir);
    if (kvc_l2c_model_load(mp, m, err, sizeof err) != KVC_OK) {
        printf("SKIP: stories260K not found (%s); set KVC_MODEL_DIR\n", err);
        return KVC_TEST_SKIP;
    }
    if (kvc_l2c_tokenizer_load(tp, m->cfg.vocab_size, t, err, sizeof err) != KVC_OK) {
        printf("tokenizer: %s\n", err);
        kvc_l2c_model_free(m);
        return 1;
    }
    return 0;
}

/* A cache manager for model config @p c with per-stream settings @p sc, in a
 * fresh arena (returned; free it). NULL when the configuration is rejected. */
static void *model_cache(const kvc_l2c_config *c, const kvc_stream_config *sc, kvc_cache **cache)
{
    kvc_cache_config cc = kvc_l2c_cache_config(c, sc);
    size_t bytes = kvc_cache_arena_bytes(&cc);
    void *arena = bytes ? tu_arena(bytes) : NULL;
    if (arena && kvc_cache_init(arena, bytes, &cc, cache) != KVC_OK) {
        free(arena);
        arena = NULL;
    }
    return arena;
}

/* A straightforward exact attention with its own k/v arrays (as llama2.c
 * does it), used only as the reference of the test below. */
typedef struct plain_ctx {
    int n_heads, n_kv, hs, cap;
    float *k, *v; /* [layer][pos][kv_dim] */
} plain_ctx;

static kvc_status plain_attention(void *vctx, int layer, int pos, const float *q, const float *k, const float *v,
                                  float *out)
{
    plain_ctx *c = (plain_ctx *)vctx;
    const int kvd = c->n_kv * c->hs, group = c->n_heads / c->n_kv;
    float *K = c->k + (size_t)layer * c->cap * kvd, *V = c->v + (size_t)layer * c->cap * kvd;
    memcpy(K + (size_t)pos * kvd, k, kvd * sizeof(float));
    memcpy(V + (size_t)pos * kvd, v, kvd * sizeof(float));
    double *att = malloc((size_t)(pos + 1) * sizeof(double));
    for (int h = 0; h < c->n_heads; h++) {
        const float *qh = q + h * c->hs;
        const int kh = h / group;
        double mx = -INFINITY, sum = 0;
        for (int t = 0; t <= pos; t++) {
            double s = 0;
            for (int i = 0; i < c->hs; i++) s += (double)qh[i] * K[(size_t)t * kvd + kh * c->hs + i];
            att[t] = s / sqrt((double)c->hs);
            if (att[t] > mx) mx = att[t];
        }
        for (int t = 0; t <= pos; t++) sum += (att[t] = exp(att[t] - mx));
        for (int i = 0; i < c->hs; i++) {
            double acc = 0;
            for (int t = 0; t <= pos; t++) acc += att[t] * V[(size_t)t * kvd + kh * c->hs + i];
            out[h * c->hs + i] = (float)(acc / sum);
        }
    }
    free(att);
    return KVC_OK;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* exact through the cache manager vs the straightforward attention above:
 * 200 greedy tokens identical; logits differ only by rounding (both
 * accumulate attention in double; they differ in summation order). */
static int exact_cache_matches_plain_attention(void)
{
    kvc_l2c_model m;
    kvc_l2c_tokenizer t;
    int rc = load_model(&m, &t);
    if (rc) return rc;
    const int steps = 200, hs = m.cfg.dim / m.cfg.n_heads;
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_EXACT, hs, hs, steps, 1);
    kvc_cache *cache;
    void *arena = model_cache(&m.cfg, &sc, &cache);
    CHECK(arena != NULL);
    plain_ctx pc = {m.cfg.n_heads, m.cfg.n_kv_heads, hs, steps, NULL, NULL};
    pc.k = malloc((size_t)m.cfg.n_layers * steps * m.cfg.n_kv_heads * hs * sizeof(float));
    pc.v = malloc((size_t)m.cfg.n_layers * steps * m.cfg.n_kv_heads * hs * sizeof(float));
    kvc_l2c_state a, b;
    CHECK(kvc_l2c_state_alloc(&m.cfg, &a) == KVC_OK && kvc_l2c_state_alloc(&m.cfg, &b) == KVC_OK);
    int ta = 1, tb = 1;
    double max_diff = 0;
    for (int pos = 0; pos < steps; pos++) {
        CHECK(kvc_l2c_forward(&m, &a, ta, pos, kvc_l2c_cache_attention, cache) == KVC_OK);
        CHECK(kvc_l2c_forward(&m, &b, tb, pos, plain_attention, &pc) == KVC_OK);
        for (int i = 0; i < m.cfg.vocab_size; i++) {
            double dd = fabs((double)a.logits[i] - b.logits[i]);
            if (dd > max_diff) max_diff = dd;
        }
        ta = argmax(a.logits, m.cfg.vocab_size);
        tb = argmax(b.logits, m.cfg.vocab_size);
        CHECK_MSG(ta == tb, "greedy tokens differ at position %d: %d vs %d", pos, ta, tb);
    }
    printf("200 greedy tokens identical; max |logit difference| %.3e\n", max_diff);
    CHECK(max_diff < 1e-3);
    uint64_t el, peak;
    CHECK(kvc_cache_get_usage(cache, &el, &peak) == KVC_OK);
    CHECK(el == (uint64_t)steps * m.cfg.n_layers * m.cfg.n_kv_heads * 2 * hs);
    free(arena), free(pc.k), free(pc.v);
    kvc_l2c_state_free(&a), kvc_l2c_state_free(&b);
    kvc_l2c_tokenizer_free(&t), kvc_l2c_model_free(&m);
    return 0;
}

/* Greedy decoding from BOS gives the model's known opening line. */
static int greedy_text_is_readable(void)
{
    kvc_l2c_model m;
    kvc_l2c_tokenizer t;
    int rc = load_model(&m, &t);
    if (rc) return rc;
    const int hs = m.cfg.dim / m.cfg.n_heads;
    const kvc_method methods[2] = {KVC_METHOD_EXACT, KVC_METHOD_SUBGEN};
    for (int mi = 0; mi < 2; mi++) {
        kvc_stream_config sc = kvc_stream_config_default(methods[mi], hs, hs, mi == 0 ? 512 : 128, 1);
        kvc_cache *cache;
        void *arena = model_cache(&m.cfg, &sc, &cache);
        CHECK(arena != NULL);
        kvc_l2c_state s;
        CHECK(kvc_l2c_state_alloc(&m.cfg, &s) == KVC_OK);
        char text[4096] = {0}, bb[2];
        int tok = 1;
        for (int pos = 0; pos < 40; pos++) {
            CHECK(kvc_l2c_forward(&m, &s, tok, pos, kvc_l2c_cache_attention, cache) == KVC_OK);
            int next = argmax(s.logits, m.cfg.vocab_size);
            strncat(text, kvc_l2c_decode(&t, tok, next, bb), sizeof text - strlen(text) - 1);
            tok = next;
        }
        printf("%s: %s\n", kvc_method_name(methods[mi]), text);
        CHECK(strncmp(text, "Once upon a time, there was a little girl named Lily", 52) == 0);
        free(arena);
        kvc_l2c_state_free(&s);
    }
    kvc_l2c_tokenizer_free(&t), kvc_l2c_model_free(&m);
    return 0;
}

/* Per-layer budgets (uniform and pyramid): every stream's worst case fits its
 * budget, the total never exceeds n_layers * budget, the arena is exactly the
 * size function, and a long stream never writes past it (canary). */
static int per_layer_budgets_fit_arena(void)
{
    const uint32_t L = 6, nkv = 2, nh = 4, hd = 8, budget = 100;
    for (int pol = 0; pol < 2; pol++) {
        kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_SUBGEN, hd, hd, budget, 3);
        sc.n_sink = 4, sc.n_window = 8;
        kvc_cache_config cc = {L, nh, nkv, hd, sc, pol ? KVC_BUDGET_PYRAMID : KVC_BUDGET_UNIFORM, 0.0f};
        CHECK(kvc_cache_config_problem(&cc) == NULL);
        size_t bytes = kvc_cache_arena_bytes(&cc), sum_streams = 0;
        uint64_t total = 0;
        for (uint32_t l = 0; l < L; l++) {
            uint32_t b = kvc_cache_get_layer_budget(&cc, l);
            total += b;
            kvc_stream_config s = sc;
            s.budget = b;
            kvc_stream_plan p;
            CHECK(kvc_stream_plan_make(&s, &p) == KVC_OK);
            CHECK(p.worst_elements <= p.budget_elements);
            sum_streams += nkv * KVC_ALIGN_UP(p.arena_bytes);
            printf("%s layer %u: budget %u, worst %llu of %llu elements\n", pol ? "pyramid" : "uniform", l, b,
                   (unsigned long long)p.worst_elements, (unsigned long long)p.budget_elements);
            if (pol && l > 0) CHECK(b <= kvc_cache_get_layer_budget(&cc, l - 1));
        }
        CHECK(total <= (uint64_t)L * budget);
        CHECK(bytes >= sum_streams && bytes - sum_streams <= KVC_ALIGN_UP(sizeof(size_t) * L * nkv) + 256);
        unsigned char *a = tu_arena(bytes + 128);
        memset(a + bytes, 0x3C, 128);
        kvc_cache *c;
        CHECK(kvc_cache_init(a, bytes, &cc, &c) == KVC_OK);
        CHECK(kvc_cache_init(a, bytes - 1, &cc, &c) == KVC_E_ARENA);
        CHECK(kvc_cache_init(a, bytes, &cc, &c) == KVC_OK);
        kvc_rng r;
        kvc_rng_seed(&r, 5);
        float k[16], v[16], q[32], out[32];
        for (int pos = 0; pos < 1000; pos++) {
            for (int i = 0; i < 16; i++) k[i] = (float)(3 * kvc_rng_normal(&r)), v[i] = (float)kvc_rng_normal(&r);
            for (int i = 0; i < 32; i++) q[i] = (float)kvc_rng_normal(&r);
            for (uint32_t l = 0; l < L; l++) {
                CHECK(kvc_cache_append(c, NULL, l, k, v) == KVC_OK);
                CHECK(kvc_cache_attend(c, NULL, l, q, out) == KVC_OK);
            }
        }
        uint64_t el, peak, worst = 0;
        CHECK(kvc_cache_get_usage(c, &el, &peak) == KVC_OK);
        for (uint32_t l = 0; l < L; l++)
            worst += nkv * kvc_stream_get_plan(kvc_cache_get_stream(c, l, 0))->worst_elements;
        printf("peak %llu elements, worst-case sum %llu\n", (unsigned long long)peak, (unsigned long long)worst);
        CHECK(peak <= worst);
        for (int i = 0; i < 128; i++) CHECK(a[bytes + i] == 0x3C);
        free(a);
    }
    return 0;
}

/* Bad input to the cache manager: clear status, nothing changed. */
static int cache_rejects_bad_input_unchanged(void)
{
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_UNIFORM, 4, 4, 20, 1);
    sc.n_sink = 2, sc.n_window = 2;
    kvc_cache_config cc = {2, 4, 2, 4, sc, KVC_BUDGET_UNIFORM, 0.0f};
    size_t bytes = kvc_cache_arena_bytes(&cc);
    kvc_cache *c;
    void *a = tu_arena(bytes);
    CHECK(kvc_cache_init(a, bytes, &cc, &c) == KVC_OK);
    float k[8] = {1, 2, 3, 4, 5, 6, 7, 8}, q[16] = {0}, out[16];
    CHECK(kvc_cache_attend(c, NULL, 0, q, out) == KVC_E_STATE); /* before any append */
    for (int i = 0; i < 30; i++) CHECK(kvc_cache_append(c, NULL, 0, k, k) == KVC_OK);
    unsigned char *copy = malloc(bytes);
    memcpy(copy, a, bytes);
    float bad[8];
    memcpy(bad, k, sizeof bad);
    bad[7] = NAN; /* last head: the first head must not have been appended either */
    CHECK(kvc_cache_append(c, NULL, 0, k, bad) == KVC_E_NONFINITE);
    CHECK(kvc_cache_append(c, NULL, 2, k, k) == KVC_E_ARG);
    CHECK(kvc_cache_append(c, NULL, 0, NULL, k) == KVC_E_ARG);
    CHECK(memcmp(copy, a, bytes) == 0);
    kvc_cache_config bad_cfg = cc;
    bad_cfg.n_heads = 3;
    CHECK(kvc_cache_config_problem(&bad_cfg) != NULL && kvc_cache_arena_bytes(&bad_cfg) == 0);
    printf("n_heads 3 with 2 kv heads: %s\n", kvc_cache_config_problem(&bad_cfg));
    free(copy), free(a);
    return 0;
}

/* Loaders: truncated, oversized and inconsistent files get KVC_E_FORMAT and a message. */
static int loaders_reject_bad_files(void)
{
    kvc_l2c_model m;
    kvc_l2c_tokenizer t;
    char err[256];
    int32_t hdr[7] = {64, 172, 5, 8, 4, 512, 512};
    size_t good = 28 + 264128 * 4;
    uint8_t *buf = calloc(good + 8, 1);
    memcpy(buf, hdr, sizeof hdr);
    CHECK(kvc_l2c_model_parse(buf, good, &m, err, sizeof err) == KVC_OK);
    kvc_l2c_model_free(&m);
    const size_t lens[] = {0, 10, 28, good - 1, good + 4};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        CHECK(kvc_l2c_model_parse(buf, lens[i], &m, err, sizeof err) == KVC_E_FORMAT);
        CHECK(err[0] != 0 && m.data == NULL);
        printf("checkpoint of %zu bytes: %s\n", lens[i], err);
    }
    const int32_t bad_hdrs[][7] = {
        {0, 172, 5, 8, 4, 512, 512},        {64, 172, 5, 8, 3, 512, 512},
        {64, 172, 5, 7, 7, 512, 512},       {64, 172, -5, 8, 4, 512, 512},
        {64, 172, 5, 8, 4, INT32_MIN, 512}, {65536, 262144, 256, 1024, 1024, 1000000, 1048576}};
    for (size_t i = 0; i < sizeof bad_hdrs / sizeof bad_hdrs[0]; i++) {
        memcpy(buf, bad_hdrs[i], 28);
        CHECK(kvc_l2c_model_parse(buf, good, &m, err, sizeof err) == KVC_E_FORMAT);
        printf("header %zu: %s\n", i, err);
    }
    memcpy(buf, hdr, sizeof hdr);
    float nan = NAN;
    memcpy(buf + 28 + 400, &nan, 4);
    CHECK(kvc_l2c_model_parse(buf, good, &m, err, sizeof err) == KVC_E_FORMAT);
    printf("NaN weight: %s\n", err);
    /* tokenizer: 2 tokens */
    uint8_t tb[64];
    int32_t maxlen = 4, n1 = 1, n2 = 2;
    float sc = 0.5f;
    size_t o = 0;
    memcpy(tb + o, &maxlen, 4), o += 4;
    memcpy(tb + o, &sc, 4), o += 4, memcpy(tb + o, &n1, 4), o += 4, tb[o++] = 'a';
    memcpy(tb + o, &sc, 4), o += 4, memcpy(tb + o, &n2, 4), o += 4, tb[o++] = 'b', tb[o++] = 'c';
    CHECK(kvc_l2c_tokenizer_parse(tb, o, 2, &t, err, sizeof err) == KVC_OK);
    kvc_l2c_tokenizer_free(&t);
    for (size_t cut = 0; cut < o; cut++) {
        CHECK(kvc_l2c_tokenizer_parse(tb, cut, 2, &t, err, sizeof err) == KVC_E_FORMAT);
        CHECK(t.vocab == NULL);
    }
    CHECK(kvc_l2c_tokenizer_parse(tb, o, 3, &t, err, sizeof err) == KVC_E_FORMAT);
    printf("vocab mismatch: %s\n", err);
    CHECK(kvc_l2c_tokenizer_parse(tb, o, 1, &t, err, sizeof err) == KVC_E_FORMAT);
    printf("trailing bytes: %s\n", err);
    int32_t huge = 100;
    memcpy(tb + 8, &huge, 4);
    CHECK(kvc_l2c_tokenizer_parse(tb, o, 2, &t, err, sizeof err) == KVC_E_FORMAT);
    printf("token longer than max: %s\n", err);
    free(buf);
    return 0;
}

/* SmolLM2-135M (GGUF): the byte-level BPE round-trips text exactly, and greedy
 * decoding of "The capital of France is" continues with " Paris" through the
 * cache manager (exact). Skips without the model ($KVC_SMOLLM2 or the fetch
 * script's default cache). */
static int smollm2_tokenizer_and_greedy(void)
{
    const char *path = kvc_test_smollm2_or_skip();
    if (!path) return KVC_TEST_SKIP;
    char err[256];
    kvc_bpe *t = kvc_bpe_load(path, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    const char *texts[] = {"Hello, world! It's 2026 and the price is $1234.56.", "  spaces\n\tand tabs  ",
                           "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xe2\x9c\x93"};
    for (int i = 0; i < 3; i++) {
        int ids[256];
        int n = kvc_bpe_encode(t, texts[i], ids, 256);
        CHECK(n > 0);
        char buf[1024] = {0}, piece[256];
        for (int j = 0; j < n; j++) {
            kvc_bpe_decode(t, ids[j], piece, sizeof piece);
            strncat(buf, piece, sizeof buf - strlen(buf) - 1);
        }
        CHECK_MSG(strcmp(buf, texts[i]) == 0, "round trip of text %d", i);
    }
    kvc_l2c_model m;
    CHECK_MSG(kvc_gguf_llama_load(path, &m, err, sizeof err) == KVC_OK, "%s", err);
    int ids[64];
    int n = kvc_bpe_encode(t, "The capital of France is", ids, 64);
    const int hs = m.cfg.dim / m.cfg.n_heads;
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_EXACT, hs, hs, 64, 1);
    sc.n_sink = 0, sc.n_window = 0;
    kvc_cache *cache;
    void *arena = model_cache(&m.cfg, &sc, &cache);
    CHECK(arena != NULL);
    kvc_l2c_state s;
    CHECK(kvc_l2c_state_alloc(&m.cfg, &s) == KVC_OK);
    char out[256] = {0}, piece[256];
    int tok = ids[0];
    for (int pos = 0; pos < n + 2; pos++) {
        CHECK(kvc_l2c_forward(&m, &s, tok, pos, kvc_l2c_cache_attention, cache) == KVC_OK);
        if (pos + 1 < n) {
            tok = ids[pos + 1];
            continue;
        }
        tok = argmax(s.logits, m.cfg.vocab_size);
        kvc_bpe_decode(t, tok, piece, sizeof piece);
        strncat(out, piece, sizeof out - strlen(out) - 1);
    }
    printf("\"The capital of France is\" -> \"%s\"\n", out);
    CHECK(strncmp(out, " Paris", 6) == 0);
    free(arena);
    kvc_l2c_state_free(&s);
    kvc_l2c_model_free(&m);
    kvc_bpe_free(t);
    return 0;
}

/* tests/data/story.txt into buf (NUL-terminated); its length, 0 if unreadable. */
static size_t read_story(char *buf, size_t cap)
{
    FILE *fp = fopen(KVC_STORY_PATH, "rb");
    if (fp == NULL) return 0;
    const size_t n = fread(buf, 1, cap - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return n;
}

/* The llama2.c reference merge loop (O(n^2) lookups), kept here as the
 * ground truth for the heap-based one in llama2c_tokenizer.c. */
static int ref_lookup(const kvc_l2c_tokenizer *t, const char *s)
{
    for (int i = 0; i < t->vocab_size; i++)
        if (strcmp(t->vocab[i], s) == 0) return i;
    return -1;
}

static int ref_merge(const kvc_l2c_tokenizer *t, int *out, int n)
{
    char pair[1024];
    for (;;) {
        float best = -1e10f;
        int best_id = -1, best_i = -1;
        for (int i = 1; i + 1 < n; i++) {
            snprintf(pair, sizeof pair, "%s%s", t->vocab[out[i]], t->vocab[out[i + 1]]);
            int id = ref_lookup(t, pair);
            if (id >= 0 && t->scores[id] > best) best = t->scores[id], best_id = id, best_i = i;
        }
        if (best_i < 0) return n;
        out[best_i] = best_id;
        memmove(out + best_i + 1, out + best_i + 2, (size_t)(n - best_i - 2) * sizeof(int));
        n--;
    }
}

/* Symbols before merging: encode with a tokenizer copy whose merges are all
 * below the floor, so kvc_l2c_encode returns the unmerged symbols. */
static int symbols_of(const kvc_l2c_tokenizer *t, const char *text, int *out)
{
    kvc_l2c_tokenizer u = *t;
    float *low = malloc((size_t)t->vocab_size * sizeof(float));
    for (int i = 0; i < t->vocab_size; i++) low[i] = -1e30f;
    u.scores = low;
    int n = kvc_l2c_encode(&u, text, out);
    free(low);
    return n;
}

/* The heap-based merge gives the reference's tokens on the test story, on
 * random byte strings (UTF-8 and not) and on repetitive text. */
static int tokenizer_merges_equal_reference(void)
{
    kvc_l2c_model m;
    kvc_l2c_tokenizer t;
    int rc = load_model(&m, &t);
    if (rc) return rc;
    char story[4096];
    CHECK(read_story(story, sizeof story) > 0);
    char text[2048];
    kvc_rng r;
    kvc_rng_seed(&r, 77);
    printf("seed 77: the story and 150 random strings\n");
    int *a = malloc(sizeof(int) * 8192), *b = malloc(sizeof(int) * 8192);
    for (int trial = -1; trial < 150; trial++) {
        const char *x = story;
        if (trial >= 0) {
            const size_t len = kvc_rng_below(&r, 300);
            for (size_t i = 0; i < len; i++) {
                const uint32_t kind = kvc_rng_below(&r, 10);
                text[i] = kind < 6   ? (char)('a' + kvc_rng_below(&r, 6))
                          : kind < 8 ? ' '
                                     : (char)(1 + kvc_rng_below(&r, 255));
            }
            text[len] = 0;
            x = text;
        }
        const int na = kvc_l2c_encode(&t, x, a);
        int nb = symbols_of(&t, x, b);
        nb = ref_merge(&t, b, nb);
        CHECK_MSG(na == nb && memcmp(a, b, (size_t)na * sizeof(int)) == 0, "trial %d: %d vs %d tokens", trial, na, nb);
    }
    free(a), free(b);
    kvc_l2c_tokenizer_free(&t), kvc_l2c_model_free(&m);
    return 0;
}

/* 256 KB of text encodes in O(n log n): the reference loop took 18 s for
 * 11 KB and over 180 s for 54 KB (quadratic: hours here). ctest's TIMEOUT
 * for this case (60 s) is the check, with a margin of ~100x over what the
 * heap version needs on a slow machine; it measures no speed. */
static int tokenizer_long_text_subquadratic(void)
{
    kvc_l2c_model m;
    kvc_l2c_tokenizer t;
    int rc = load_model(&m, &t);
    if (rc) return rc;
    char story[4096];
    const size_t sl = read_story(story, sizeof story);
    CHECK(sl > 0);
    const size_t total = 256 * 1024;
    char *text = malloc(total + 1);
    for (size_t i = 0; i < total; i++) text[i] = story[i % sl];
    text[total] = 0;
    int *ids = malloc((total + 3) * sizeof(int));
    const int n = kvc_l2c_encode(&t, text, ids);
    printf("%zu bytes -> %d tokens\n", total, n);
    CHECK(n > (int)(total / 16) && n < (int)total);
    free(text), free(ids);
    kvc_l2c_tokenizer_free(&t), kvc_l2c_model_free(&m);
    return 0;
}

static const kvc_test_case cases[] = {
    {"smollm2_tokenizer_and_greedy", smollm2_tokenizer_and_greedy},
    {"exact_cache_matches_plain_attention", exact_cache_matches_plain_attention},
    {"greedy_text_is_readable", greedy_text_is_readable},
    {"per_layer_budgets_fit_arena", per_layer_budgets_fit_arena},
    {"cache_rejects_bad_input_unchanged", cache_rejects_bad_input_unchanged},
    {"loaders_reject_bad_files", loaders_reject_bad_files},
    {"tokenizer_merges_equal_reference", tokenizer_merges_equal_reference},
    {"tokenizer_long_text_subquadratic", tokenizer_long_text_subquadratic},
};
KVC_TEST_MAIN(cases)
