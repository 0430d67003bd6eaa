/* The decoder's products and chunked forward.
 *  - every GEMM implementation available here stays within the recursive-
 *    summation bound gamma_n * sum_j |x_j w_j| (gamma_n = n u / (1 - n u),
 *    u = 2^-24, n = cols) of a double-precision product, on odd shapes;
 *  - the two FMA implementations (avx2, avx512) give identical bits;
 *  - a chunked forward gives bit-identical logits to token-by-token steps,
 *    with the exact cache and with a compressing one (stories260K, and
 *    SmolLM2 when it is present);
 *  - quantised panels (Q4_1, Q8_0 kept quantised) give the bits of the f32
 *    product on the GGUF reader's dequantised matrix, every implementation,
 *    and SmolLM2's logits are the same loaded either way;
 *  - decoder threads: a threaded product gives the same bits; a split-K
 *    attend gives layer 0's attention within the split-K bound. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "gemm_quant.h"
#include "kvc_gguf.h"
#include "kvc/kvc.h"
#include "kvc_test.h"
#include "smollm2_path.h"
#include "kvc_testutil.h"
#include "llama2c.h"

#ifndef KVC_DEFAULT_MODEL_DIR
#define KVC_DEFAULT_MODEL_DIR "models/stories260K"
#endif

static const char *impls[] = {"scalar", "avx2", "avx512"};

/* xorshift uniform in [-1, 1) */
static float unif(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int gemm_within_summation_bound(void)
{
    const uint64_t seed = 20261123;
    printf("seed %llu\n", (unsigned long long)seed);
    uint64_t s = seed;
    const size_t shapes[][3] = {{1, 1, 1}, {16, 8, 1}, {17, 33, 5}, {40, 576, 7}, {100, 13, 13}, {33, 1536, 6}};
    int tested = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const size_t rows = shapes[sh][0], cols = shapes[sh][1], n = shapes[sh][2], ldx = cols + 3, ldy = rows + 5;
        float *w = malloc(rows * cols * sizeof(float)), *x = malloc(n * ldx * sizeof(float));
        float *pk = malloc(kvc_gemm_packed_floats(rows, cols) * sizeof(float));
        float *y = malloc(n * ldy * sizeof(float));
        CHECK(w && x && pk && y);
        for (size_t i = 0; i < rows * cols; i++) w[i] = unif(&s);
        for (size_t i = 0; i < n * ldx; i++) x[i] = unif(&s) * 4.0f;
        kvc_gemm_pack(w, rows, cols, pk);
        const double u = ldexp(1.0, -24), gamma = (double)cols * u / (1.0 - (double)cols * u);
        for (size_t im = 0; im < 3; im++) {
            if (kvc_gemm_select(impls[im]) != 0) {
                printf("  %s: not available on this CPU\n", impls[im]);
                continue;
            }
            for (size_t i = 0; i < n * ldy; i++) y[i] = -7.0f; /* padding must stay untouched */
            kvc_gemm(pk, rows, cols, x, ldx, n, y, ldy);
            double worst = 0.0;
            for (size_t t = 0; t < n; t++) {
                for (size_t o = 0; o < rows; o++) {
                    double ref = 0.0, mag = 0.0;
                    for (size_t j = 0; j < cols; j++) {
                        ref += (double)x[t * ldx + j] * (double)w[o * cols + j];
                        mag += fabs((double)x[t * ldx + j] * (double)w[o * cols + j]);
                    }
                    const double err = fabs((double)y[t * ldy + o] - ref), bound = gamma * mag;
                    CHECK_MSG(err <= bound, "%s %zux%zu n=%zu: |err| %.3g > bound %.3g at (%zu,%zu)", impls[im], rows,
                              cols, n, err, bound, t, o);
                    if (bound > 0 && err / bound > worst) worst = err / bound;
                }
                for (size_t o = rows; o < ldy; o++) CHECK(y[t * ldy + o] == -7.0f);
            }
            printf("  %-6s %4zu x %4zu, %2zu tokens: largest error / bound = %.3f\n", impls[im], rows, cols, n, worst);
            tested++;
        }
        free(w), free(x), free(pk), free(y);
    }
    kvc_gemm_select(NULL);
    CHECK(tested >= 6); /* at least the scalar path on every shape */
    return 0;
}

static int gemm_fma_paths_identical(void)
{
    if (kvc_gemm_select("avx2") != 0 || kvc_gemm_select("avx512") != 0) {
        printf("SKIP: this CPU lacks avx2+fma or avx512f\n");
        return KVC_TEST_SKIP;
    }
    uint64_t s = 7;
    const size_t rows = 75, cols = 301, n = 11;
    float *w = malloc(rows * cols * 4), *x = malloc(n * cols * 4), *pk = malloc(kvc_gemm_packed_floats(rows, cols) * 4);
    float *a = malloc(n * rows * 4), *b = malloc(n * rows * 4);
    CHECK(w && x && pk && a && b);
    for (size_t i = 0; i < rows * cols; i++) w[i] = unif(&s);
    for (size_t i = 0; i < n * cols; i++) x[i] = unif(&s);
    kvc_gemm_pack(w, rows, cols, pk);
    kvc_gemm_select("avx2");
    kvc_gemm(pk, rows, cols, x, cols, n, a, rows);
    kvc_gemm_select("avx512");
    kvc_gemm(pk, rows, cols, x, cols, n, b, rows);
    CHECK(memcmp(a, b, n * rows * 4) == 0);
    printf("avx2 and avx512 agree bit for bit on %zu outputs\n", n * rows);
    free(w), free(x), free(pk), free(a), free(b);
    return 0;
}

/* Logits of `n` tokens fed one at a time and in chunks of `chunk`, each with a
 * fresh cache of configuration sc: they must be identical bit for bit. */
static int chunk_vs_steps(const kvc_l2c_model *m, const kvc_stream_config *sc, const int *toks, int n, int chunk)
{
    kvc_cache_config cc = kvc_l2c_cache_config(&m->cfg, sc);
    const size_t bytes = kvc_cache_arena_bytes(&cc), V = (size_t)m->cfg.vocab_size;
    CHECK_MSG(bytes > 0, "%s", kvc_cache_config_problem(&cc));
    void *a1 = tu_arena(bytes), *a2 = tu_arena(bytes);
    kvc_cache *c1, *c2;
    CHECK(a1 && a2 && kvc_cache_init(a1, bytes, &cc, &c1) == KVC_OK && kvc_cache_init(a2, bytes, &cc, &c2) == KVC_OK);
    kvc_l2c_state s1, s2;
    CHECK(kvc_l2c_state_alloc(&m->cfg, &s1) == KVC_OK && kvc_l2c_state_alloc_chunk(&m->cfg, chunk, &s2) == KVC_OK);
    float *single = malloc((size_t)n * V * sizeof(float));
    CHECK(single);
    for (int p = 0; p < n; p++) {
        CHECK(kvc_l2c_forward(m, &s1, toks[p], p, kvc_l2c_cache_attention, c1) == KVC_OK);
        memcpy(single + (size_t)p * V, s1.logits, V * sizeof(float));
    }
    int differing = 0;
    for (int p0 = 0; p0 < n; p0 += chunk) {
        const int k = n - p0 < chunk ? n - p0 : chunk;
        CHECK(kvc_l2c_forward_chunk(m, &s2, toks + p0, k, p0, kvc_l2c_cache_attention, c2, 0) == KVC_OK);
        for (int t = 0; t < k; t++)
            differing += memcmp(s2.logits + (size_t)t * V, single + (size_t)(p0 + t) * V, V * sizeof(float)) != 0;
    }
    printf("  %s budget %u, %d tokens in chunks of %d: %d positions differ\n", kvc_method_name(sc->method), sc->budget,
           n, chunk, differing);
    CHECK(differing == 0);
    CHECK(memcmp(a1, a2, bytes) == 0); /* the caches hold the same bytes */
    /* bad arguments are refused */
    CHECK(kvc_l2c_forward_chunk(m, &s2, toks, chunk + 1, n, kvc_l2c_cache_attention, c2, 0) == KVC_E_ARG);
    int bad = m->cfg.vocab_size;
    CHECK(kvc_l2c_forward_chunk(m, &s2, &bad, 1, n, kvc_l2c_cache_attention, c2, 0) == KVC_E_ARG);
    free(single), free(a1), free(a2);
    kvc_l2c_state_free(&s1), kvc_l2c_state_free(&s2);
    return 0;
}

/* stories260K from $KVC_MODEL_DIR (default KVC_DEFAULT_MODEL_DIR): the loader's status, err set on failure */
static kvc_status load_stories260k(kvc_l2c_model *m, char *err, size_t cap)
{
    const char *dir = getenv("KVC_MODEL_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/stories260K.bin", dir ? dir : KVC_DEFAULT_MODEL_DIR);
    return kvc_l2c_model_load(path, m, err, cap);
}

static int chunked_forward_equals_steps(void)
{
    char err[256];
    kvc_l2c_model m;
    if (load_stories260k(&m, err, sizeof err) != KVC_OK) {
        printf("SKIP: stories260K not found (%s); set KVC_MODEL_DIR\n", err);
        return KVC_TEST_SKIP;
    }
    printf("gemm: %s\n", kvc_gemm_impl());
    int toks[100];
    for (int i = 0; i < 100; i++) toks[i] = 1 + (i * 37) % (m.cfg.vocab_size - 1);
    const int hs = m.cfg.dim / m.cfg.n_heads;
    kvc_stream_config ex = kvc_stream_config_default(KVC_METHOD_EXACT, hs, hs, 100, 1);
    kvc_stream_config un = kvc_stream_config_default(KVC_METHOD_UNIFORM, hs, hs, 24, 3);
    un.n_sink = 4, un.n_window = 4;
    int rc = chunk_vs_steps(&m, &ex, toks, 100, 7) || chunk_vs_steps(&m, &ex, toks, 100, 64) ||
             chunk_vs_steps(&m, &un, toks, 100, 13);
    kvc_l2c_model_free(&m);
    CHECK(rc == 0);

    const char *path = kvc_test_smollm2_path();
    if (kvc_gguf_llama_load(path, &m, err, sizeof err) != KVC_OK) {
        printf("SmolLM2 part not run: %s\n", err);
        return 0;
    }
    const int hs2 = m.cfg.dim / m.cfg.n_heads;
    int toks2[40];
    for (int i = 0; i < 40; i++) toks2[i] = 1 + (i * 7919) % (m.cfg.vocab_size - 1);
    kvc_stream_config ex2 = kvc_stream_config_default(KVC_METHOD_EXACT, hs2, hs2, 40, 1);
    ex2.n_sink = 0, ex2.n_window = 0;
    kvc_stream_config sg = kvc_stream_config_default(KVC_METHOD_SUBGEN, hs2, hs2, 24, 5);
    sg.n_sink = 2, sg.n_window = 2;
    rc = chunk_vs_steps(&m, &ex2, toks2, 40, 16) || chunk_vs_steps(&m, &sg, toks2, 40, 9);
    kvc_l2c_model_free(&m);
    CHECK(rc == 0);
    return 0;
}

/* Layer 0's attention outputs and value rows of one run (its inputs depend on
 * the tokens only, so both runs give it the same q, k, v). */
typedef struct l0_rec {
    kvc_cache *c;
    int n_heads, n_kv, hs, n;
    float *out, *v; /* [pos][n_heads * hs], [pos][n_kv * hs] */
} l0_rec;

static kvc_status l0_hook(void *ctx, int layer, int pos, const float *q, const float *k, const float *v, float *out)
{
    l0_rec *r = (l0_rec *)ctx;
    const kvc_status rc = kvc_l2c_cache_attention(r->c, layer, pos, q, k, v, out);
    if (rc == KVC_OK && layer == 0 && pos < r->n) {
        memcpy(r->out + (size_t)pos * r->n_heads * r->hs, out, (size_t)r->n_heads * r->hs * sizeof(float));
        memcpy(r->v + (size_t)pos * r->n_kv * r->hs, v, (size_t)r->n_kv * r->hs * sizeof(float));
    }
    return rc;
}

/* One thread against three (split-K from 8 entries per part): every product
 * gives the same bits (a panel's sums do not depend on who computes them);
 * layer 0's attention of every position within the split-K bound of
 * test_backends (E entries, u = 2^-24, max|v| bounding A/D, the output a
 * convex combination of values): 4 (E + 16) u max|v| + 4 u |z| + 1e-6 max|v|. */
static int threads_match_one_thread(void)
{
    /* products */
    uint64_t s = 7;
    const size_t rows = 200, cols = 96, n = 12;
    float *w = malloc(rows * cols * sizeof(float)), *x = malloc(n * cols * sizeof(float));
    float *pk = malloc(kvc_gemm_packed_floats(rows, cols) * sizeof(float));
    float *y1 = malloc(n * rows * sizeof(float)), *y3 = malloc(n * rows * sizeof(float));
    CHECK(w && x && pk && y1 && y3);
    for (size_t i = 0; i < rows * cols; i++) w[i] = unif(&s);
    for (size_t i = 0; i < n * cols; i++) x[i] = unif(&s);
    kvc_gemm_pack(w, rows, cols, pk);
    CHECK(kvc_l2c_set_threads(1) == 0);
    kvc_gemm(pk, rows, cols, x, cols, n, y1, rows);
    CHECK(kvc_l2c_set_threads(3) == 0 && kvc_l2c_threads() == 3);
    kvc_gemm(pk, rows, cols, x, cols, n, y3, rows);
    CHECK(memcmp(y1, y3, n * rows * sizeof(float)) == 0);
    printf("gemm %zux%zu on %zu tokens: 1 and 3 threads agree bit for bit\n", rows, cols, n);
    free(w), free(x), free(pk), free(y1), free(y3);
    CHECK(kvc_l2c_set_threads(0) == -1 && kvc_l2c_set_threads(65) == -1);

    /* split-K attention in the decoder */
    char err[256];
    kvc_l2c_model m;
    if (load_stories260k(&m, err, sizeof err) != KVC_OK) {
        printf("decoder part not run: stories260K not found (%s); set KVC_MODEL_DIR\n", err);
        CHECK(kvc_l2c_set_threads(1) == 0);
        return 0;
    }
    const int N = 120, hs = m.cfg.dim / m.cfg.n_heads, G = m.cfg.n_heads / m.cfg.n_kv_heads;
    int toks[120];
    for (int i = 0; i < N; i++) toks[i] = 1 + (i * 37) % (m.cfg.vocab_size - 1);
    kvc_stream_config ex = kvc_stream_config_default(KVC_METHOD_EXACT, hs, hs, N, 1);
    kvc_cache_config cc = kvc_l2c_cache_config(&m.cfg, &ex);
    const size_t bytes = kvc_cache_arena_bytes(&cc);
    l0_rec r[2];
    kvc_l2c_set_split_min(8);
    for (int run = 0; run < 2; run++) {
        CHECK(kvc_l2c_set_threads(run ? 3 : 1) == 0);
        void *arena = tu_arena(bytes);
        r[run] = (l0_rec){NULL,
                          m.cfg.n_heads,
                          m.cfg.n_kv_heads,
                          hs,
                          N,
                          malloc((size_t)N * m.cfg.n_heads * hs * sizeof(float)),
                          malloc((size_t)N * m.cfg.n_kv_heads * hs * sizeof(float))};
        CHECK(arena && r[run].out && r[run].v && kvc_cache_init(arena, bytes, &cc, &r[run].c) == KVC_OK);
        kvc_l2c_state st;
        CHECK(kvc_l2c_state_alloc(&m.cfg, &st) == KVC_OK);
        for (int p = 0; p < N; p++) CHECK(kvc_l2c_forward(&m, &st, toks[p], p, l0_hook, &r[run]) == KVC_OK);
        kvc_l2c_state_free(&st);
        free(arena);
    }
    kvc_l2c_set_split_min(512);
    CHECK(kvc_l2c_set_threads(1) == 0);
    CHECK(memcmp(r[0].v, r[1].v, (size_t)N * m.cfg.n_kv_heads * hs * sizeof(float)) == 0);
    const double u = 0x1p-24;
    double worst = 0.0;
    int differing = 0;
    for (int p = 0; p < N; p++)
        for (int h = 0; h < m.cfg.n_heads; h++) {
            const int g = h / G;
            double vmax = 0.0;
            for (int j = 0; j <= p; j++)
                for (int c = 0; c < hs; c++)
                    vmax = fmax(vmax, fabs(r[0].v[((size_t)j * m.cfg.n_kv_heads + g) * hs + c]));
            for (int c = 0; c < hs; c++) {
                const size_t i = ((size_t)p * m.cfg.n_heads + h) * hs + c;
                const double z = r[0].out[i], e = fabs((double)r[1].out[i] - z);
                const double bound = 4.0 * (p + 1 + 16) * u * vmax + 4.0 * u * fabs(z) + 1e-6 * vmax;
                differing += e > 0.0;
                if (bound > 0 && e / bound > worst) worst = e / bound;
                CHECK_MSG(e <= bound, "pos %d head %d ch %d: %.9g vs %.9g (bound %.3g)", p, h, c, r[1].out[i], z,
                          bound);
            }
        }
    printf("layer 0, %d positions: 3 threads (split-K) vs 1 within the bound (%d outputs differ at all; largest "
           "error / bound %.3g)\n",
           N, differing, worst);
    CHECK(differing > 0 || N < 16); /* the split really ran (it regroups sums) */
    for (int run = 0; run < 2; run++) free(r[run].out), free(r[run].v);
    kvc_l2c_model_free(&m);
    return 0;
}

/* Random GGUF blocks of `type` for rows x cols (f16 scales drawn over a
 * wide range, subnormals included; every q value). */
static void random_blocks(uint64_t *s, int type, size_t rows, size_t cols, uint8_t *blk)
{
    const size_t bb = type == KVC_QPANEL_Q4_1 ? 20 : 34, nb = rows * cols / 32;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *p = blk + b * bb;
        for (size_t i = 0; i < bb; i++) p[i] = (uint8_t)((unif(s) + 1.0f) * 128.0f);
        /* scales: exponent field 0..29 (no inf/NaN), either sign */
        for (int h = 0; h < (type == KVC_QPANEL_Q4_1 ? 2 : 1); h++)
            p[2 * h + 1] = (uint8_t)(p[2 * h + 1] % 0x78 | (p[2 * h + 1] & 0x80));
    }
}

static int quantised_panels_match_f32(void)
{
    const uint64_t seed = 99;
    printf("seed %llu\n", (unsigned long long)seed);
    uint64_t s = seed;
    const size_t shapes[][3] = {{1, 32, 1}, {16, 32, 3}, {17, 64, 7}, {40, 96, 13}, {33, 576, 2}};
    size_t compared = 0;
    for (int type = KVC_QPANEL_Q4_1; type <= KVC_QPANEL_Q8_0; type++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            const size_t rows = shapes[sh][0], cols = shapes[sh][1], n = shapes[sh][2],
                         bb = type == KVC_QPANEL_Q4_1 ? 20 : 34;
            uint8_t *blk = malloc(rows * cols / 32 * bb), *qp = malloc(kvc_qpanel_bytes(type, rows, cols));
            float *w = malloc(rows * cols * sizeof(float)),
                  *pk = malloc(kvc_gemm_packed_floats(rows, cols) * sizeof(float));
            float *x = malloc(n * cols * sizeof(float)), *ya = malloc(n * rows * sizeof(float)),
                  *yb = malloc(n * rows * sizeof(float));
            const uint8_t **rp = malloc(rows * sizeof *rp);
            CHECK(blk && qp && w && pk && x && ya && yb && rp);
            random_blocks(&s, type, rows, cols, blk);
            for (size_t i = 0; i < n * cols; i++) x[i] = unif(&s);
            /* the GGUF reader's dequantisation of the same bytes */
            kvc_gguf g;
            memset(&g, 0, sizeof g);
            g.buf = blk, g.len = rows * cols / 32 * bb;
            kvc_gguf_tensor t;
            memset(&t, 0, sizeof t);
            t.n_dims = 2, t.dims[0] = cols, t.dims[1] = rows, t.n_elems = rows * cols, t.data_bytes = g.len;
            t.type = type == KVC_QPANEL_Q4_1 ? KVC_GGML_Q4_1 : KVC_GGML_Q8_0;
            CHECK(kvc_gguf_dequantize(&g, &t, w) == KVC_OK);
            kvc_gemm_pack(w, rows, cols, pk);
            for (size_t r = 0; r < rows; r++) rp[r] = blk + r * (cols / 32) * bb;
            kvc_qpanel_pack(type, rp, rows, cols, qp);
            for (size_t im = 0; im < 3; im++) {
                if (kvc_gemm_select(impls[im]) != 0) continue;
                kvc_gemm(pk, rows, cols, x, cols, n, ya, rows);
                kvc_gemm_q(type, qp, rows, cols, x, cols, n, yb, rows);
                CHECK_MSG(memcmp(ya, yb, n * rows * sizeof(float)) == 0, "%s type %d shape %zux%zu n %zu: bits differ",
                          impls[im], type, rows, cols, n);
                compared++;
            }
            free(blk), free(qp), free(w), free(pk), free(x), free(ya), free(yb), free(rp);
        }
    if (kvc_gemm_select("avx512") != 0 && kvc_gemm_select("avx2") != 0)
        kvc_gemm_select("scalar"); /* the default again */
    printf("%zu (type, shape, implementation) products: quantised panels == f32 panels, bit for bit\n", compared);

    /* SmolLM2: logits of a few tokens with the quantised and with the f32 weights */
    const char *path = kvc_test_smollm2_path();
    char err[256];
    kvc_l2c_model mq, mf;
    if (kvc_gguf_llama_load(path, &mq, err, sizeof err) != KVC_OK) {
        printf("SmolLM2 part not run: %s\n", err);
        return 0;
    }
    setenv("KVC_GGUF_F32", "1", 1);
    const kvc_status rf = kvc_gguf_llama_load(path, &mf, err, sizeof err);
    unsetenv("KVC_GGUF_F32");
    CHECK(rf == KVC_OK);
    int kinds = 0;
    for (int k = 0; k < 5; k++) {
        kinds += mq.qtype[k] != KVC_QPANEL_NONE;
        CHECK(mf.qtype[k] == KVC_QPANEL_NONE);
    }
    printf("SmolLM2: %d of 5 matrix kinds kept quantised (%zu bytes)\n", kinds, 30 * mq.q_layer_bytes);
    CHECK(kinds == 5);
    const int hs = mq.cfg.dim / mq.cfg.n_heads;
    kvc_stream_config ex = kvc_stream_config_default(KVC_METHOD_EXACT, hs, hs, 16, 1);
    ex.n_sink = 0, ex.n_window = 0;
    kvc_l2c_model *ms[2] = {&mq, &mf};
    float *logits[2];
    for (int i = 0; i < 2; i++) {
        kvc_cache_config cc = kvc_l2c_cache_config(&ms[i]->cfg, &ex);
        const size_t bytes = kvc_cache_arena_bytes(&cc);
        void *arena = tu_arena(bytes);
        kvc_cache *c;
        CHECK(arena && kvc_cache_init(arena, bytes, &cc, &c) == KVC_OK);
        kvc_l2c_state st;
        CHECK(kvc_l2c_state_alloc_chunk(&ms[i]->cfg, 8, &st) == KVC_OK);
        int toks[8];
        for (int j = 0; j < 8; j++) toks[j] = 1 + j * 977;
        CHECK(kvc_l2c_forward_chunk(ms[i], &st, toks, 8, 0, kvc_l2c_cache_attention, c, 0) == KVC_OK);
        logits[i] = malloc(8 * (size_t)ms[i]->cfg.vocab_size * sizeof(float));
        memcpy(logits[i], st.logits, 8 * (size_t)ms[i]->cfg.vocab_size * sizeof(float));
        kvc_l2c_state_free(&st);
        free(arena);
    }
    CHECK_MSG(memcmp(logits[0], logits[1], 8 * (size_t)mq.cfg.vocab_size * sizeof(float)) == 0,
              "quantised and f32 weights give different logits");
    printf("SmolLM2: 8 positions of logits identical with quantised and f32 weights\n");
    free(logits[0]), free(logits[1]);
    kvc_l2c_model_free(&mq), kvc_l2c_model_free(&mf);
    return 0;
}

static const kvc_test_case cases[] = {
    {"threads_match_one_thread", threads_match_one_thread},
    {"quantised_panels_match_f32", quantised_panels_match_f32},
    {"gemm_within_summation_bound", gemm_within_summation_bound},
    {"gemm_fma_paths_identical", gemm_fma_paths_identical},
    {"chunked_forward_equals_steps", chunked_forward_equals_steps},
};
KVC_TEST_MAIN(cases)
