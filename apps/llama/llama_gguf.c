/* Llama-architecture GGUF -> the decoder's float32 weights (llama2c.h).
 * Tensor names are llama.cpp's (token_embd, blk.N.attn_norm / attn_q / attn_k
 * / attn_v / attn_output / ffn_norm / ffn_gate / ffn_down / ffn_up,
 * output_norm, output). A ggml weight of dims [in, out] is `out` rows of `in`
 * floats, which is exactly the decoder's matmul layout. GGUF's llama q/k
 * weights are stored permuted for interleaved-pair RoPE, the rotation the
 * decoder applies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvc_err.h"
#include "gemm_quant.h"
#include "kvc_gguf.h"
#include "llama2c.h"

/* Check that tensor `name` exists with `rows` x `cols` (ggml dims [cols, rows])
 * and a storage type the loader reads, before anything is allocated. */
static kvc_status check_shape(const kvc_gguf *g, const char *name, uint64_t cols, uint64_t rows, char *err,
                              size_t errlen)
{
    const kvc_gguf_tensor *t = kvc_gguf_tensor_find(g, name);
    if (!t) return kvc_errf(err, errlen, KVC_E_FORMAT, "tensor '%s' is missing", name);
    const uint64_t r = t->n_dims > 1 ? t->dims[1] : 1;
    if (t->dims[0] != cols || r != rows || t->n_elems != cols * rows)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]", name,
                        (unsigned long long)t->dims[0], (unsigned long long)r, (unsigned long long)cols,
                        (unsigned long long)rows);
    if (t->type != KVC_GGML_F32 && t->type != KVC_GGML_F16 && t->type != KVC_GGML_Q8_0 && t->type != KVC_GGML_Q4_1 &&
        t->type != KVC_GGML_Q4_0)
        return kvc_errf(err, errlen, KVC_E_UNSUPPORTED, "tensor '%s' has storage type %u, not supported", name,
                        t->type);
    return KVC_OK;
}

/* Dequantise tensor `name` (its n elements checked by check_shape before
 * anything was allocated) into dst; every weight must be finite (a NaN
 * weight gives NaN logits at every position). */
static kvc_status take(const kvc_gguf *g, const char *name, uint64_t n, float *dst, char *err, size_t errlen)
{
    const kvc_gguf_tensor *t = kvc_gguf_tensor_find(g, name);
    const kvc_status rc = kvc_gguf_dequantize(g, t, dst);
    if (rc != KVC_OK) return kvc_errf(err, errlen, rc, "tensor '%s' has storage type %u, not supported", name, t->type);
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(dst[i]))
            return kvc_errf(err, errlen, KVC_E_FORMAT, "tensor '%s' holds a non-finite weight (%g) at element %llu",
                            name, (double)dst[i], (unsigned long long)i);
    return KVC_OK;
}

/* Every tensor named blk.N.* must have N < block_count: a file whose
 * block_count is short of its layers would run with layers missing. */
static kvc_status check_layers(const kvc_gguf *g, uint64_t L, char *err, size_t errlen)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvc_gguf_tensor *t = &g->tensors[i];
        const char *nm = (const char *)g->buf + t->name_off;
        if (t->name_len < 5 || memcmp(nm, "blk.", 4) != 0) continue;
        uint64_t layer = 0;
        size_t j = 4;
        while (j < t->name_len && j < 24 && nm[j] >= '0' && nm[j] <= '9')
            layer = layer * 10 + (uint64_t)(nm[j++] - '0');
        if (j > 4 && layer >= L)
            return kvc_errf(err, errlen, KVC_E_FORMAT,
                            "tensor '%.*s' belongs to layer %llu, but llama.block_count says %llu layers",
                            (int)(t->name_len < 96 ? t->name_len : 96), nm, (unsigned long long)layer,
                            (unsigned long long)L);
    }
    return KVC_OK;
}

/* The panel type of tensor `name`: its GGUF block type when the product can
 * read it quantised (Q4_1, Q8_0; 32-column blocks), else none. */
static int panel_type(const kvc_gguf *g, const char *name)
{
    const kvc_gguf_tensor *t = kvc_gguf_tensor_find(g, name);
    if (!t || t->n_dims != 2 || t->dims[0] % 32 != 0) return KVC_QPANEL_NONE;
    return t->type == KVC_GGML_Q4_1 ? KVC_QPANEL_Q4_1 : t->type == KVC_GGML_Q8_0 ? KVC_QPANEL_Q8_0 : KVC_QPANEL_NONE;
}

/* Row pointers of tensor `name` (rows of cols/32 ggml blocks) appended at rp[*r...]. */
static void add_rows(const kvc_gguf *g, const char *name, int type, const uint8_t **rp, size_t *r)
{
    const kvc_gguf_tensor *t = kvc_gguf_tensor_find(g, name);
    const size_t row_bytes = (size_t)t->dims[0] / 32 * (type == KVC_QPANEL_Q4_1 ? 20 : 34);
    for (uint64_t i = 0; i < t->dims[1]; i++) rp[(*r)++] = g->buf + t->data_off + (size_t)i * row_bytes;
}

/* Keep the quantised matrices quantised (gemm_quant.h) where every layer's
 * tensors of a kind share one panel type; the f32 packing that follows skips
 * those kinds (the results are the same bits either way). */
static kvc_status pack_quantised(const kvc_gguf *g, kvc_l2c_model *m, char *err, size_t errlen)
{
    const kvc_l2c_config *c = &m->cfg;
    const size_t D = (size_t)c->dim, H = (size_t)c->hidden_dim, L = (size_t)c->n_layers, V = (size_t)c->vocab_size;
    const size_t kvd = D / (size_t)c->n_heads * (size_t)c->n_kv_heads;
    static const char *const parts[4][3] = {{"attn_q", "attn_k", "attn_v"},
                                            {"attn_output", NULL, NULL},
                                            {"ffn_gate", "ffn_up", NULL},
                                            {"ffn_down", NULL, NULL}};
    const size_t rows[5] = {D + 2 * kvd, D, 2 * H, D, V}, cols[5] = {D, D, D, H, D};
    char name[64];
    for (int k = 0; k < 4; k++) { /* one type for every tensor of the kind, in every layer */
        int type = -1;
        for (size_t l = 0; l < L && type != KVC_QPANEL_NONE; l++)
            for (int p = 0; p < 3 && parts[k][p]; p++) {
                snprintf(name, sizeof name, "blk.%zu.%s.weight", l, parts[k][p]);
                const int t = panel_type(g, name);
                type = type == -1 || type == t ? t : KVC_QPANEL_NONE;
            }
        m->qtype[k] = type < 0 ? KVC_QPANEL_NONE : type;
    }
    const char *cls_name = c->shared_classifier ? "token_embd.weight" : "output.weight";
    m->qtype[KVC_L2C_CLS] = panel_type(g, cls_name);
    size_t layer = 0;
    for (int k = 0; k < 4; k++) {
        m->q_off[k] = layer;
        layer += m->qtype[k] ? kvc_qpanel_bytes(m->qtype[k], rows[k], cols[k]) : 0;
    }
    m->q_layer_bytes = layer;
    m->q_off[KVC_L2C_CLS] = L * layer;
    const size_t total = L * layer + (m->qtype[KVC_L2C_CLS] ? kvc_qpanel_bytes(m->qtype[KVC_L2C_CLS], V, D) : 0);
    if (total == 0) return KVC_OK;
    size_t max_rows = V;
    for (int k = 0; k < 4; k++) max_rows = rows[k] > max_rows ? rows[k] : max_rows;
    m->qpacked = malloc(total);
    const uint8_t **rp = malloc(max_rows * sizeof *rp);
    if (!m->qpacked || !rp) {
        free(rp);
        return kvc_errf(err, errlen, KVC_E_CAPACITY, "out of memory for %zu bytes of quantised weights", total);
    }
    for (size_t l = 0; l < L; l++)
        for (int k = 0; k < 4; k++) {
            if (!m->qtype[k]) continue;
            size_t r = 0;
            for (int p = 0; p < 3 && parts[k][p]; p++) {
                snprintf(name, sizeof name, "blk.%zu.%s.weight", l, parts[k][p]);
                add_rows(g, name, m->qtype[k], rp, &r);
            }
            kvc_qpanel_pack(m->qtype[k], rp, rows[k], cols[k], m->qpacked + l * layer + m->q_off[k]);
        }
    if (m->qtype[KVC_L2C_CLS]) {
        size_t r = 0;
        add_rows(g, cls_name, m->qtype[KVC_L2C_CLS], rp, &r);
        kvc_qpanel_pack(m->qtype[KVC_L2C_CLS], rp, V, D, m->qpacked + m->q_off[KVC_L2C_CLS]);
    }
    free(rp);
    return KVC_OK;
}

static kvc_status meta_u(const kvc_gguf *g, const char *key, uint64_t lo, uint64_t hi, int *out, char *err,
                         size_t errlen)
{
    uint64_t v;
    if (kvc_gguf_get_uint(g, key, &v) != KVC_OK || v < lo || v > hi)
        return kvc_errf(err, errlen, KVC_E_FORMAT, "metadata '%s' is missing or outside %llu..%llu", key,
                        (unsigned long long)lo, (unsigned long long)hi);
    *out = (int)v;
    return KVC_OK;
}

kvc_status kvc_gguf_llama_load(const char *path, kvc_l2c_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    uint8_t *buf;
    size_t n;
    kvc_status rd = kvc_read_regular_file(path, &buf, &n, err, errlen);
    if (rd != KVC_OK) return rd;
    rd = kvc_gguf_llama_load_buffer(buf, n, path, m, err, errlen);
    free(buf);
    return rd;
}

kvc_status kvc_gguf_llama_load_buffer(const uint8_t *buf, size_t n, const char *path, kvc_l2c_model *m, char *err,
                                      size_t errlen)
{
    memset(m, 0, sizeof *m);
    kvc_gguf g;
    kvc_status rc = kvc_gguf_parse(buf, n, &g, err, errlen);
    if (rc != KVC_OK) return rc;
    kvc_l2c_config c;
    memset(&c, 0, sizeof c);
    const char *arch;
    size_t alen;
    double base = 10000.0, eps = 1e-5;
    if (kvc_gguf_get_string(&g, "general.architecture", &arch, &alen) != KVC_OK || alen != 5 ||
        memcmp(arch, "llama", 5)) {
        rc = kvc_errf(err, errlen, KVC_E_UNSUPPORTED, "'%s' is not a llama-architecture GGUF", path);
        goto done;
    }
    if ((rc = meta_u(&g, "llama.block_count", 1, 256, &c.n_layers, err, errlen)) ||
        (rc = meta_u(&g, "llama.embedding_length", 1, 65536, &c.dim, err, errlen)) ||
        (rc = meta_u(&g, "llama.feed_forward_length", 1, 262144, &c.hidden_dim, err, errlen)) ||
        (rc = meta_u(&g, "llama.attention.head_count", 1, 1024, &c.n_heads, err, errlen)) ||
        (rc = meta_u(&g, "llama.attention.head_count_kv", 1, 1024, &c.n_kv_heads, err, errlen)) ||
        (rc = meta_u(&g, "llama.context_length", 1, 1u << 24, &c.seq_len, err, errlen)))
        goto done;
    kvc_gguf_get_float(&g, "llama.rope.freq_base", &base);
    kvc_gguf_get_float(&g, "llama.attention.layer_norm_rms_epsilon", &eps);
    /* both divide or take logarithms in every forward step: a NaN, a zero or
       a negative value would give a model whose logits are all NaN */
    /* and the values must mean what the names say (issue 49: 1e-30 and 1e30
       were accepted): a rotary base above 1, so that the frequencies
       base^(-2i/d) fall with i (published models: 1e4 .. 1e7; up to 1e12
       accepted); an epsilon that only guards a division, small beside the
       mean square of an activation (published: 1e-6 .. 1e-5; up to 0.1) */
    if (!isfinite(base) || !(base > 1.0) || !(base <= 1e12)) {
        rc = kvc_errf(err, errlen, KVC_E_FORMAT, "llama.rope.freq_base is %g; it must be in (1, 1e12]", base);
        goto done;
    }
    if (!isfinite(eps) || !(eps > 0.0) || (float)eps <= 0.0f || !(eps <= 0.1)) {
        rc = kvc_errf(err, errlen, KVC_E_FORMAT, "llama.attention.layer_norm_rms_epsilon is %g; it must be in (0, 0.1]",
                      eps);
        goto done;
    }
    c.rope_base = (float)base;
    c.norm_eps = (float)eps;
    const kvc_gguf_tensor *emb = kvc_gguf_tensor_find(&g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->dims[0] != (uint64_t)c.dim || emb->dims[1] > 1000000) {
        rc = kvc_errf(err, errlen, KVC_E_FORMAT, "token_embd.weight is missing or does not match embedding_length");
        goto done;
    }
    c.vocab_size = (int)emb->dims[1];
    c.shared_classifier = kvc_gguf_tensor_find(&g, "output.weight") == NULL;
    if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 || (c.dim / c.n_heads) % 2 != 0) {
        rc = kvc_errf(err, errlen, KVC_E_FORMAT, "inconsistent heads: dim %d, %d heads, %d kv heads", c.dim, c.n_heads,
                      c.n_kv_heads);
        goto done;
    }
    const uint64_t D = (uint64_t)c.dim, H = (uint64_t)c.hidden_dim, L = (uint64_t)c.n_layers,
                   V = (uint64_t)c.vocab_size;
    const uint64_t kvd = D / (uint64_t)c.n_heads * (uint64_t)c.n_kv_heads;
    /* every tensor's shape against the metadata before anything is
       allocated: the allocation below is their sum, so a file whose
       metadata asks for more than its tensors hold is refused here by name */
    if ((rc = check_layers(&g, L, err, errlen)) || (rc = check_shape(&g, "token_embd.weight", D, V, err, errlen)) ||
        (rc = check_shape(&g, "output_norm.weight", D, 1, err, errlen)) ||
        (!c.shared_classifier && (rc = check_shape(&g, "output.weight", D, V, err, errlen))))
        goto done;
    /* a layer's tensors (llama.cpp's names), their ggml shapes [cols, rows] */
    static const char *const part[9] = {"attn_norm", "attn_q",   "attn_k",   "attn_v", "attn_output",
                                        "ffn_norm",  "ffn_gate", "ffn_down", "ffn_up"};
    const uint64_t cols[9] = {D, D, D, D, D, D, D, H, D}, rows[9] = {1, D, kvd, kvd, D, 1, H, D, H};
    char name[64];
    for (uint64_t l = 0; l < L; l++)
        for (int k = 0; k < 9; k++) {
            snprintf(name, sizeof name, "blk.%llu.%s.weight", (unsigned long long)l, part[k]);
            if ((rc = check_shape(&g, name, cols[k], rows[k], err, errlen))) goto done;
        }
    const uint64_t total =
        V * D + L * (2 * D + 2 * D * D + 2 * D * kvd + 3 * D * H) + D + (c.shared_classifier ? 0 : V * D);
    m->data = malloc((size_t)total * sizeof(float));
    if (!m->data) {
        rc = kvc_errf(err, errlen, KVC_E_CAPACITY, "out of memory for %llu floats", (unsigned long long)total);
        goto done;
    }
    m->n_floats = (size_t)total;
    m->cfg = c;
    float *p = m->data;
    float *emb_p = p, *rms_att = (p += V * D), *wq = (p += L * D), *wk = (p += L * D * D), *wv = (p += L * D * kvd);
    float *wo = (p += L * D * kvd), *rms_ffn = (p += L * D * D), *w1 = (p += L * D), *w2 = (p += L * D * H);
    float *w3 = (p += L * D * H), *rms_final = (p += L * D * H), *wcls = (p += D);
    m->emb = emb_p, m->rms_att = rms_att, m->wq = wq, m->wk = wk, m->wv = wv, m->wo = wo, m->rms_ffn = rms_ffn;
    m->w1 = w1, m->w2 = w2, m->w3 = w3, m->rms_final = rms_final;
    m->wcls = c.shared_classifier ? emb_p : wcls;
    if ((rc = take(&g, "token_embd.weight", D * V, emb_p, err, errlen))) goto done;
    if ((rc = take(&g, "output_norm.weight", D, rms_final, err, errlen))) goto done;
    if (!c.shared_classifier && (rc = take(&g, "output.weight", D * V, wcls, err, errlen))) goto done;
    for (uint64_t l = 0; l < L; l++) {
        float *const dst[9] = {rms_att + l * D, wq + l * D * D, wk + l * D * kvd, wv + l * D * kvd, wo + l * D * D,
                               rms_ffn + l * D, w1 + l * D * H, w2 + l * D * H,   w3 + l * D * H};
        for (int k = 0; k < 9; k++) {
            snprintf(name, sizeof name, "blk.%llu.%s.weight", (unsigned long long)l, part[k]);
            if ((rc = take(&g, name, cols[k] * rows[k], dst[k], err, errlen))) goto done;
        }
    }
    if (getenv("KVC_GGUF_F32") == NULL && (rc = pack_quantised(&g, m, err, errlen))) /* KVC_GGUF_F32: f32 panels only */
        goto done;
    rc = kvc_l2c_model_pack(m, err, errlen); /* on failure the model is already freed */
done:
    if (rc != KVC_OK) kvc_l2c_model_free(m);
    kvc_gguf_free(&g);
    return rc;
}
