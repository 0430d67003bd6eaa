/* The microcontroller decoder (story.h): llama2.c's forward pass on int8
 * weight rows (one f32 scale per row), greedy sampling, llama2.c's
 * tokenizer decoding. No allocation: the activations are static buffers. */
#include "story.h"

#include <math.h>
#include <string.h>

#include "portable_math.h"

static float g_x[KVC_STORY_MAX_DIM], g_xb[KVC_STORY_MAX_DIM], g_xb2[KVC_STORY_MAX_DIM];
static float g_q[KVC_STORY_MAX_DIM], g_k[KVC_STORY_MAX_DIM], g_v[KVC_STORY_MAX_DIM];
static float g_hb[KVC_STORY_MAX_HIDDEN], g_hb2[KVC_STORY_MAX_HIDDEN];
static float g_logits[KVC_STORY_MAX_VOCAB];

size_t kvc_story_activation_bytes(void)
{
    return sizeof g_x + sizeof g_xb + sizeof g_xb2 + sizeof g_q + sizeof g_k + sizeof g_v + sizeof g_hb + sizeof g_hb2 +
           sizeof g_logits;
}

/* bytes of one int8 row of n elements: f32 scale, n int8, padded to 4 */
static size_t row_bytes(int n) { return 4u + ((size_t)n + 3u) / 4u * 4u; }

static int32_t rd32(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static float rdf(const unsigned char *p)
{
    const int32_t b = rd32(p);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

const char *kvc_story_open(kvc_story *s, const void *blob, size_t bytes)
{
    const unsigned char *p = (const unsigned char *)blob, *end = p + bytes;
    if (bytes < 32 || memcmp(p, "KVS1", 4) != 0) return "not a story blob (pack_story.py writes one)";
    s->dim = rd32(p + 4), s->hidden = rd32(p + 8), s->n_layers = rd32(p + 12), s->n_heads = rd32(p + 16);
    s->n_kv_heads = rd32(p + 20), s->vocab = rd32(p + 24), s->seq_len = rd32(p + 28);
    if (s->dim < 2 || s->dim > KVC_STORY_MAX_DIM || s->hidden < 1 || s->hidden > KVC_STORY_MAX_HIDDEN || s->vocab < 3 ||
        s->vocab > KVC_STORY_MAX_VOCAB || s->n_layers < 1 || s->n_layers > 64 || s->n_heads < 1 || s->n_kv_heads < 1 ||
        s->n_heads % s->n_kv_heads != 0 || s->dim % s->n_heads != 0 || (s->dim / s->n_heads) % 2 != 0 || s->seq_len < 1)
        return "model shape outside this decoder's static limits";
    const int kv_dim = s->dim / s->n_heads * s->n_kv_heads;
    p += 32;
    s->emb = p;
    p += (size_t)s->vocab * row_bytes(s->dim);
    s->layers = p;
    s->layer_bytes =
        (size_t)(2 * s->dim + 2 * kv_dim + 2 * s->hidden) * row_bytes(s->dim) + (size_t)s->dim * row_bytes(s->hidden);
    p += (size_t)s->n_layers * s->layer_bytes;
    s->rms_att = (const float *)(const void *)p;
    p += (size_t)s->n_layers * s->dim * 4u;
    s->rms_ffn = (const float *)(const void *)p;
    p += (size_t)s->n_layers * s->dim * 4u;
    s->rms_final = (const float *)(const void *)p;
    p += (size_t)s->dim * 4u;
    s->wcls = p;
    p += (size_t)s->vocab * row_bytes(s->dim);
    if (p + 4 > end) return "blob too short for its model";
    p += 4; /* max_token_length */
    for (int i = 0; i < s->vocab; i++) {
        if (p + 8 > end) return "blob too short for its tokenizer";
        const int32_t n = rd32(p + 4);
        if (n < 0 || p + 8 + n > end) return "tokenizer entry out of range";
        s->vocab_text[i] = (const char *)p + 8, s->vocab_len[i] = n;
        p += 8u + ((size_t)n + 3u) / 4u * 4u;
    }
    return NULL;
}

kvc_cache_config kvc_story_cache_config(const kvc_story *s, const kvc_stream_config *stream)
{
    kvc_cache_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = (uint32_t)s->n_layers, c.n_heads = (uint32_t)s->n_heads, c.n_kv_heads = (uint32_t)s->n_kv_heads;
    c.head_dim = (uint32_t)(s->dim / s->n_heads);
    c.stream = *stream;
    c.policy = KVC_BUDGET_UNIFORM;
    return c;
}

/* y[rows] = W x for int8 rows of n elements: scale_i * sum_j q_ij x_j */
static void matmul(float *y, const unsigned char *w, const float *x, int rows, int n)
{
    const size_t rb = row_bytes(n);
    for (int i = 0; i < rows; i++, w += rb) {
        const int8_t *q = (const int8_t *)(const void *)(w + 4);
        float acc = 0.0f;
        for (int j = 0; j < n; j++) acc += (float)q[j] * x[j];
        y[i] = rdf(w) * acc;
    }
}

static void rmsnorm(float *o, const float *x, const float *w, int n)
{
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss = 1.0f / sqrtf(ss / (float)n + 1e-5f);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}

/* llama2.c's RoPE on consecutive pairs: frequency base^(-i/hs) of the pair's
 * place i in its head, angle pos * frequency (portable exp/log/cos). The
 * cos/sin of one position serve every head of every layer: computed once per
 * token into cs (hs floats: cos, sin of each pair). */
static void rope_table(float *cs, int hs, int pos)
{
    for (int i = 0; i < hs; i += 2) {
        const double freq = kvc_pm_exp(-kvc_pm_log(10000.0) * (double)i / (double)hs);
        const double val = (double)(float)((float)pos * (float)freq);
        cs[i] = (float)kvc_pm_cos(val), cs[i + 1] = (float)kvc_pm_cos(val - 1.57079632679489661923);
    }
}

static void rope(float *vec, int n, int hs, const float *cs)
{
    for (int i = 0; i < n; i += 2) {
        const float fcr = cs[i % hs], fci = cs[i % hs + 1];
        const float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * fcr - v1 * fci;
        vec[i + 1] = v0 * fci + v1 * fcr;
    }
}

static void embed(const kvc_story *s, int token, float *x)
{
    const unsigned char *row = s->emb + (size_t)token * row_bytes(s->dim);
    const int8_t *q = (const int8_t *)(const void *)(row + 4);
    const float sc = rdf(row);
    for (int j = 0; j < s->dim; j++) x[j] = sc * (float)q[j];
}

/* one token through the model; the logits in g_logits */
static kvc_status forward(const kvc_story *s, kvc_cache *cache, const kvc_kernels *kern, int token, int pos)
{
    const int dim = s->dim, hs = dim / s->n_heads, kv_dim = hs * s->n_kv_heads, hid = s->hidden;
    const size_t rd = row_bytes(dim);
    float cs[KVC_STORY_MAX_DIM];
    rope_table(cs, hs, pos);
    embed(s, token, g_x);
    for (int l = 0; l < s->n_layers; l++) {
        const unsigned char *w = s->layers + (size_t)l * s->layer_bytes;
        const unsigned char *wq = w, *wk = wq + (size_t)dim * rd, *wv = wk + (size_t)kv_dim * rd;
        const unsigned char *wo = wv + (size_t)kv_dim * rd, *w1 = wo + (size_t)dim * rd;
        const unsigned char *w2 = w1 + (size_t)hid * rd, *w3 = w2 + (size_t)dim * row_bytes(hid);
        rmsnorm(g_xb, g_x, s->rms_att + (size_t)l * dim, dim);
        matmul(g_q, wq, g_xb, dim, dim);
        matmul(g_k, wk, g_xb, kv_dim, dim);
        matmul(g_v, wv, g_xb, kv_dim, dim);
        rope(g_q, dim, hs, cs);
        rope(g_k, kv_dim, hs, cs);
        kvc_status st = kvc_cache_append(cache, kern, (uint32_t)l, g_k, g_v);
        if (st == KVC_OK) st = kvc_cache_attend(cache, kern, (uint32_t)l, g_q, g_xb);
        if (st != KVC_OK) return st;
        matmul(g_xb2, wo, g_xb, dim, dim);
        for (int j = 0; j < dim; j++) g_x[j] += g_xb2[j];
        rmsnorm(g_xb, g_x, s->rms_ffn + (size_t)l * dim, dim);
        matmul(g_hb, w1, g_xb, hid, dim);
        matmul(g_hb2, w3, g_xb, hid, dim);
        for (int j = 0; j < hid; j++) {
            const float a = g_hb[j];
            g_hb[j] = a / (1.0f + (float)kvc_pm_exp(-(double)a)) * g_hb2[j]; /* SwiGLU */
        }
        matmul(g_xb2, w2, g_hb, dim, hid);
        for (int j = 0; j < dim; j++) g_x[j] += g_xb2[j];
    }
    rmsnorm(g_xb, g_x, s->rms_final, dim);
    matmul(g_logits, s->wcls, g_xb, s->vocab, dim);
    return KVC_OK;
}

/* llama2.c's piece rules: no leading space right after BOS; <0xXX> is a raw byte */
static void emit_piece(const kvc_story *s, int prev, int token, void (*emit)(const char *text, size_t len, void *ctx),
                       void *ctx)
{
    const char *t = s->vocab_text[token];
    size_t n = (size_t)s->vocab_len[token];
    if (prev == 1 && n > 0 && t[0] == ' ') t++, n--;
    if (n == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && t[5] == '>') {
        char b = 0;
        for (int i = 3; i < 5; i++) {
            const char c = t[i];
            b = (char)(b * 16 + (c >= 'A' ? (c & 0xDF) - 'A' + 10 : c - '0'));
        }
        if (b == '\n' || b == '\t' || (b >= 32 && b < 127)) emit(&b, 1, ctx);
        return;
    }
    emit(t, n, ctx);
}

int kvc_story_generate(const kvc_story *s, kvc_cache *cache, const kvc_kernels *kern, int steps,
                       void (*emit)(const char *text, size_t len, void *ctx), void *ctx, kvc_status *status)
{
    int token = 1, pos = 0; /* BOS */
    for (; pos < steps && pos < s->seq_len; pos++) {
        const kvc_status st = forward(s, cache, kern, token, pos);
        if (st != KVC_OK) {
            if (status) *status = st;
            return -1;
        }
        int next = 0;
        for (int i = 1; i < s->vocab; i++)
            if (g_logits[i] > g_logits[next]) next = i;
        if (next == 1) break;
        emit_piece(s, token, next, emit, ctx);
        token = next;
    }
    if (status) *status = KVC_OK;
    return pos;
}
