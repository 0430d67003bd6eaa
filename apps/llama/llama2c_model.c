/* llama2.c checkpoint loader (the forward pass is llama_forward.c), and the
 * packing of a loaded model's matrices for the decoder's products. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kvc_err.h"
#include "llama2c.h"

kvc_status kvc_l2c_model_parse(const uint8_t *buf, size_t len, kvc_l2c_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (err && errlen) err[0] = 0;
    if (buf == NULL || len < 28)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "checkpoint truncated: %zu bytes, header needs 28", len);
    int32_t h[7];
    memcpy(h, buf, sizeof h);
    if (h[5] == INT32_MIN) return kvc_errf(err, errlen, KVC_E_FORMAT, "implausible vocab size %d", h[5]);
    kvc_l2c_config c = {h[0], h[1], h[2], h[3], h[4], h[5] < 0 ? -h[5] : h[5], h[6], h[5] > 0, 10000.0f, 1e-5f};
    if (c.dim < 1 || c.dim > 65536 || c.hidden_dim < 1 || c.hidden_dim > 262144 || c.n_layers < 1 || c.n_layers > 256 ||
        c.n_heads < 1 || c.n_heads > 1024 || c.n_kv_heads < 1 || c.n_kv_heads > c.n_heads || c.vocab_size < 1 ||
        c.vocab_size > 1000000 || c.seq_len < 1 || c.seq_len > 1048576)
        return kvc_errf(err, errlen, KVC_E_FORMAT,
                        "implausible header: dim %d hidden %d layers %d heads %d kv_heads %d vocab %d seq_len %d", h[0],
                        h[1], h[2], h[3], h[4], h[5], h[6]);
    if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 || (c.dim / c.n_heads) % 2 != 0)
        return kvc_errf(
            err, errlen, KVC_E_FORMAT,
            "inconsistent header: dim %d not divisible into %d even heads, or %d heads not a multiple of %d kv heads",
            c.dim, c.n_heads, c.n_heads, c.n_kv_heads);
    const uint64_t D = (uint64_t)c.dim, H = (uint64_t)c.hidden_dim, L = (uint64_t)c.n_layers,
                   V = (uint64_t)c.vocab_size;
    const uint64_t hs = D / (uint64_t)c.n_heads, kvd = hs * (uint64_t)c.n_kv_heads;
    const uint64_t n = V * D + L * D + L * D * D + 2 * L * D * kvd + L * D * D + L * D + 3 * L * D * H + D +
                       (uint64_t)c.seq_len * hs + (c.shared_classifier ? 0 : V * D);
    const uint64_t need = 28 + n * 4;
    if ((uint64_t)len != need)
        return kvc_errf(err, errlen, KVC_E_FORMAT,
                        "checkpoint size %zu bytes does not match its header (%llu expected)", len,
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
    return kvc_l2c_model_pack(m, err, errlen);
}

static kvc_status read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    return kvc_read_regular_file(path, buf, len, err, errlen);
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
    free(m->packed);
    free(m->qpacked);
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

/* ---- packing ---- */

/* Rows of several row-major blocks (each `cols` wide), stacked, into one packed matrix. */
static void pack_stacked(const float *const *blocks, const size_t *rows, int n_blocks, size_t cols, float *tmp,
                         float *dst)
{
    size_t r = 0;
    for (int b = 0; b < n_blocks; b++) {
        memcpy(tmp + r * cols, blocks[b], rows[b] * cols * sizeof(float));
        r += rows[b];
    }
    kvc_gemm_pack(tmp, r, cols, dst);
}

kvc_status kvc_l2c_model_pack(kvc_l2c_model *m, char *err, size_t errlen)
{
    const kvc_l2c_config *c = &m->cfg;
    const size_t D = (size_t)c->dim, H = (size_t)c->hidden_dim, L = (size_t)c->n_layers, V = (size_t)c->vocab_size;
    const size_t kvd = D / (size_t)c->n_heads * (size_t)c->n_kv_heads;
    /* a kind the loader kept quantised (m->qtype) gets no f32 panels */
    const size_t f_qkv = m->qtype[KVC_L2C_QKV] ? 0 : kvc_gemm_packed_floats(D + 2 * kvd, D);
    const size_t f_wo = m->qtype[KVC_L2C_WO] ? 0 : kvc_gemm_packed_floats(D, D);
    const size_t f_w13 = m->qtype[KVC_L2C_W13] ? 0 : kvc_gemm_packed_floats(2 * H, D);
    const size_t f_w2 = m->qtype[KVC_L2C_W2] ? 0 : kvc_gemm_packed_floats(D, H);
    const size_t layer = f_qkv + f_wo + f_w13 + f_w2, f_cls = m->qtype[KVC_L2C_CLS] ? 0 : kvc_gemm_packed_floats(V, D);
    const size_t keep = V * D + 2 * L * D + D; /* emb, rms_att, rms_ffn, rms_final */
    const size_t tmp_rows = (D + 2 * kvd) > 2 * H ? (D + 2 * kvd) : 2 * H;
    float *packed = L * layer + f_cls > 0 ? malloc((L * layer + f_cls) * sizeof(float)) : NULL;
    float *tmp = malloc((tmp_rows * (D > H ? D : H)) * sizeof(float));
    float *small = malloc(keep * sizeof(float));
    if ((!packed && L * layer + f_cls > 0) || !tmp || !small) {
        free(packed), free(tmp), free(small);
        kvc_l2c_model_free(m);
        return kvc_errf(err, errlen, KVC_E_CAPACITY, "out of memory packing %zu weights", L * layer + f_cls);
    }
    for (size_t l = 0; layer > 0 && l < L; l++) {
        float *dst = packed + l * layer;
        const float *qkv[3] = {m->wq + l * D * D, m->wk + l * D * kvd, m->wv + l * D * kvd};
        const size_t qkv_rows[3] = {D, kvd, kvd};
        if (f_qkv) pack_stacked(qkv, qkv_rows, 3, D, tmp, dst);
        if (f_wo) kvc_gemm_pack(m->wo + l * D * D, D, D, dst + f_qkv);
        const float *w13[2] = {m->w1 + l * D * H, m->w3 + l * D * H};
        const size_t w13_rows[2] = {H, H};
        if (f_w13) pack_stacked(w13, w13_rows, 2, D, tmp, dst + f_qkv + f_wo);
        if (f_w2) kvc_gemm_pack(m->w2 + l * D * H, D, H, dst + f_qkv + f_wo + f_w13);
    }
    if (f_cls) kvc_gemm_pack(m->wcls, V, D, packed + L * layer);
    float *p = small;
    memcpy(p, m->emb, V * D * sizeof(float));
    memcpy(p + V * D, m->rms_att, L * D * sizeof(float));
    memcpy(p + V * D + L * D, m->rms_ffn, L * D * sizeof(float));
    memcpy(p + V * D + 2 * L * D, m->rms_final, D * sizeof(float));
    free(tmp);
    free(m->data);
    m->data = small;
    m->emb = small, m->rms_att = small + V * D, m->rms_ffn = small + V * D + L * D;
    m->rms_final = small + V * D + 2 * L * D;
    m->wq = m->wk = m->wv = m->wo = m->w1 = m->w2 = m->w3 = m->wcls = NULL;
    m->packed = packed;
    m->packed_layer_floats = layer;
    m->off_wo = f_qkv, m->off_w13 = f_qkv + f_wo, m->off_w2 = f_qkv + f_wo + f_w13;
    m->off_cls = L * layer;
    return KVC_OK;
}
