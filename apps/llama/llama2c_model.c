/* llama2.c checkpoint loader and forward pass (RMSNorm, RoPE, GQA, SwiGLU,
 * shared or separate classifier), attention through a hook (the cache manager). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_err.h"
#include "llama2c.h"

kvc_status kvc_l2c_model_parse(const uint8_t *buf, size_t len, kvc_l2c_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (err && errlen) err[0] = 0;
    if (buf == NULL || len < 28) return kvc_errf(err, errlen, KVC_E_FORMAT, "checkpoint truncated: %zu bytes, header needs 28", len);
    int32_t h[7];
    memcpy(h, buf, sizeof h);
    if (h[5] == INT32_MIN) return kvc_errf(err, errlen, KVC_E_FORMAT, "implausible vocab size %d", h[5]);
    kvc_l2c_config c = {h[0], h[1], h[2], h[3], h[4], h[5] < 0 ? -h[5] : h[5], h[6], h[5] > 0, 10000.0f, 1e-5f};
    if (c.dim < 1 || c.dim > 65536 || c.hidden_dim < 1 || c.hidden_dim > 262144 || c.n_layers < 1 ||
        c.n_layers > 256 || c.n_heads < 1 || c.n_heads > 1024 || c.n_kv_heads < 1 || c.n_kv_heads > c.n_heads ||
        c.vocab_size < 1 || c.vocab_size > 1000000 || c.seq_len < 1 || c.seq_len > 1048576)
        return kvc_errf(err, errlen, KVC_E_FORMAT,
                    "implausible header: dim %d hidden %d layers %d heads %d kv_heads %d vocab %d seq_len %d", h[0],
                    h[1], h[2], h[3], h[4], h[5], h[6]);
    if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 || (c.dim / c.n_heads) % 2 != 0)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "inconsistent header: dim %d not divisible into %d even heads, or %d heads not a multiple of %d kv heads", c.dim, c.n_heads, c.n_heads, c.n_kv_heads);
    const uint64_t D = (uint64_t)c.dim, H = (uint64_t)c.hidden_dim, L = (uint64_t)c.n_layers, V = (uint64_t)c.vocab_size;
    const uint64_t hs = D / (uint64_t)c.n_heads, kvd = hs * (uint64_t)c.n_kv_heads;
    const uint64_t n = V * D + L * D + L * D * D + 2 * L * D * kvd + L * D * D + L * D + 3 * L * D * H + D +
                       (uint64_t)c.seq_len * hs + (c.shared_classifier ? 0 : V * D);
    const uint64_t need = 28 + n * 4;
    if ((uint64_t)len != need)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "checkpoint size %zu bytes does not match its header (%llu expected)", len,
                    (unsigned long long)need);
    m->data = malloc(n * sizeof(float));
    if (!m->data) return kvc_errf(err, errlen, KVC_E_CAPACITY, "out of memory for %llu floats", (unsigned long long)n);
    memcpy(m->data, buf + 28, n * sizeof(float));
    m->cfg = c;
    m->n_floats = n;
    const float *p = m->data;
    m->emb = p, p += V * D;
    m->rms_att = p, p += L * D;
    m->wq = p, p += L * D * D;
    m->wk = p, p += L * D * kvd;
    m->wv = p, p += L * D * kvd;
    m->wo = p, p += L * D * D;
    m->rms_ffn = p, p += L * D;
    m->w1 = p, p += L * D * H;
    m->w2 = p, p += L * D * H;
    m->w3 = p, p += L * D * H;
    m->rms_final = p, p += D;
    p += (uint64_t)c.seq_len * hs; /* freq_cis_real / imag: unused (RoPE computed) */
    m->wcls = c.shared_classifier ? m->emb : p;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(m->data[i])) {
            kvc_l2c_model_free(m);
            return kvc_errf(err, errlen, KVC_E_FORMAT, "checkpoint has a non-finite weight at float %zu", i);
        }
    return KVC_OK;
}

static kvc_status read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kvc_errf(err, errlen, KVC_E_ARG, "cannot open '%s'", path);
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap > ((size_t)1 << 34)) break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb, cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        return kvc_errf(err, errlen, KVC_E_ARG, "cannot read '%s'", path);
    }
    *buf = b, *len = n;
    return KVC_OK;
}

kvc_status kvc_l2c_model_load(const char *path, kvc_l2c_model *m, char *err, size_t errlen)
{
    uint8_t *b;
    size_t n;
    memset(m, 0, sizeof *m);
    kvc_status rc = read_file(path, &b, &n, err, errlen);
    if (rc != KVC_OK) return rc;
    rc = kvc_l2c_model_parse(b, n, m, err, errlen);
    free(b);
    return rc;
}

void kvc_l2c_model_free(kvc_l2c_model *m)
{
    free(m->data);
    memset(m, 0, sizeof *m);
}

kvc_status kvc_l2c_tokenizer_load(const char *path, int vocab_size, kvc_l2c_tokenizer *t, char *err, size_t errlen)
{
    uint8_t *b;
    size_t n;
    memset(t, 0, sizeof *t);
    kvc_status rc = read_file(path, &b, &n, err, errlen);
    if (rc != KVC_OK) return rc;
    rc = kvc_l2c_tokenizer_parse(b, n, vocab_size, t, err, errlen);
    free(b);
    return rc;
}

/* ---- forward ---- */
kvc_status kvc_l2c_state_alloc(const kvc_l2c_config *c, kvc_l2c_state *s)
{
    const size_t D = (size_t)c->dim, kvd = (size_t)c->dim / c->n_heads * c->n_kv_heads;
    memset(s, 0, sizeof *s);
    s->x = calloc(D, 4), s->xb = calloc(D, 4), s->xb2 = calloc(D, 4);
    s->hb = calloc((size_t)c->hidden_dim, 4), s->hb2 = calloc((size_t)c->hidden_dim, 4);
    s->q = calloc(D, 4), s->k = calloc(kvd, 4), s->v = calloc(kvd, 4), s->att_out = calloc(D, 4);
    s->logits = calloc((size_t)c->vocab_size, 4);
    if (!s->x || !s->xb || !s->xb2 || !s->hb || !s->hb2 || !s->q || !s->k || !s->v || !s->att_out || !s->logits) {
        kvc_l2c_state_free(s);
        return KVC_E_CAPACITY;
    }
    return KVC_OK;
}

void kvc_l2c_state_free(kvc_l2c_state *s)
{
    free(s->x), free(s->xb), free(s->xb2), free(s->hb), free(s->hb2);
    free(s->q), free(s->k), free(s->v), free(s->att_out), free(s->logits);
    memset(s, 0, sizeof *s);
}

kvc_cache_config kvc_l2c_cache_config(const kvc_l2c_config *c, const kvc_stream_config *stream)
{
    kvc_cache_config cc;
    memset(&cc, 0, sizeof cc);
    cc.n_layers = (uint32_t)c->n_layers;
    cc.n_heads = (uint32_t)c->n_heads;
    cc.n_kv_heads = (uint32_t)c->n_kv_heads;
    cc.head_dim = (uint32_t)(c->dim / c->n_heads);
    cc.stream = *stream;
    cc.policy = KVC_BUDGET_UNIFORM;
    return cc;
}

kvc_status kvc_l2c_cache_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out)
{
    kvc_cache *c = (kvc_cache *)ctx;
    (void)pos;
    kvc_status rc = kvc_cache_append(c, NULL, (uint32_t)layer, k, v);
    if (rc != KVC_OK) return rc;
    return kvc_cache_attend(c, NULL, (uint32_t)layer, q, out);
}

static void rmsnorm(float *o, const float *x, const float *w, int n, float eps)
{
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}

/* xout (d) = W (d x n) @ x (n) */
static void matmul(float *xout, const float *x, const float *w, int n, int d)
{
    for (int i = 0; i < d; i++) {
        float val = 0.0f;
        const float *row = w + (size_t)i * n;
        for (int j = 0; j < n; j++) val += row[j] * x[j];
        xout[i] = val;
    }
}

kvc_status kvc_l2c_forward(const kvc_l2c_model *m, kvc_l2c_state *s, int token, int pos, kvc_l2c_attn_fn attn,
                           void *ctx)
{
    const kvc_l2c_config *c = &m->cfg;
    if (token < 0 || token >= c->vocab_size || pos < 0) return KVC_E_ARG;
    const int D = c->dim, hs = D / c->n_heads, kvd = hs * c->n_kv_heads, H = c->hidden_dim;
    memcpy(s->x, m->emb + (size_t)token * D, (size_t)D * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {
        rmsnorm(s->xb, s->x, m->rms_att + (size_t)l * D, D, c->norm_eps);
        matmul(s->q, s->xb, m->wq + (size_t)l * D * D, D, D);
        matmul(s->k, s->xb, m->wk + (size_t)l * D * kvd, D, kvd);
        matmul(s->v, s->xb, m->wv + (size_t)l * D * kvd, D, kvd);
        /* RoPE, as llama2.c: rotate consecutive pairs of every head */
        for (int i = 0; i < D; i += 2) {
            int head_dim = i % hs;
            float freq = 1.0f / powf(c->rope_base, (float)head_dim / (float)hs);
            float val = (float)pos * freq, fcr = cosf(val), fci = sinf(val);
            int rotn = i < kvd ? 2 : 1;
            for (int r = 0; r < rotn; r++) {
                float *vec = r == 0 ? s->q : s->k;
                float v0 = vec[i], v1 = vec[i + 1];
                vec[i] = v0 * fcr - v1 * fci;
                vec[i + 1] = v0 * fci + v1 * fcr;
            }
        }
        kvc_status rc = attn(ctx, l, pos, s->q, s->k, s->v, s->att_out);
        if (rc != KVC_OK) return rc;
        matmul(s->xb2, s->att_out, m->wo + (size_t)l * D * D, D, D);
        for (int i = 0; i < D; i++) s->x[i] += s->xb2[i];
        rmsnorm(s->xb, s->x, m->rms_ffn + (size_t)l * D, D, c->norm_eps);
        matmul(s->hb, s->xb, m->w1 + (size_t)l * D * H, D, H);
        matmul(s->hb2, s->xb, m->w3 + (size_t)l * D * H, D, H);
        for (int i = 0; i < H; i++) {
            float val = s->hb[i];
            val *= 1.0f / (1.0f + expf(-val)); /* SiLU */
            s->hb[i] = val * s->hb2[i];
        }
        matmul(s->xb, s->hb, m->w2 + (size_t)l * D * H, H, D);
        for (int i = 0; i < D; i++) s->x[i] += s->xb[i];
    }
    rmsnorm(s->x, s->x, m->rms_final, D, c->norm_eps);
    matmul(s->logits, s->x, m->wcls, D, c->vocab_size);
    return KVC_OK;
}
