/* Recording full-attention prefill (see kv_record.h). */
#include "kv_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_exact.h"
#include "lmrun.h"

int kvc_kv_record_alloc(kvc_kv_record *r, const kvc_l2c_config *c, int cap)
{
    memset(r, 0, sizeof *r);
    r->n_layers = c->n_layers, r->n_heads = c->n_heads, r->n_kv = c->n_kv_heads;
    r->hs = c->dim / c->n_heads, r->cap = cap;
    r->row = (size_t)r->n_kv * r->hs;
    r->beta = 1.0f / sqrtf((float)r->hs);
    r->chunk = KVC_LM_CHUNK, r->flush_at = -1;
    const size_t n = (size_t)r->n_layers * (size_t)cap * r->row;
    r->k = malloc(n * sizeof(float));
    r->v = malloc(n * sizeof(float));
    r->q = malloc((size_t)r->chunk * r->n_heads * r->hs * sizeof(float));
    r->work = malloc(kvc_attn_exact_work_floats(r->chunk, r->n_heads, r->hs) * sizeof(float));
    r->outs = malloc((size_t)r->chunk * sizeof(float *));
    if (!r->k || !r->v || !r->q || !r->work || !r->outs || r->hs < 1 || r->hs > 256) {
        kvc_kv_record_free(r);
        fprintf(stderr, "kvc bench: out of memory for a %d-token k/v record (or head size %d outside 1..256)\n", cap,
                c->dim / c->n_heads);
        return 1;
    }
    return 0;
}

void kvc_kv_record_free(kvc_kv_record *r)
{
    free(r->k), free(r->v), free(r->q), free(r->work), free(r->outs);
    r->k = r->v = r->q = r->work = NULL;
    r->outs = NULL;
}

static void flush(kvc_kv_record *r)
{
    const size_t base = (size_t)r->pend_layer * r->cap * r->row;
    kvc_attn_exact_chunk_f32(r->q, (size_t)r->n_heads * r->hs, r->pend_n, (size_t)r->pend_pos0, r->n_heads, r->n_kv,
                             r->hs, r->k + base, r->v + base, r->row, r->beta, r->work, r->outs);
    r->pend_n = 0;
}

kvc_status kvc_kv_record_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out)
{
    kvc_kv_record *r = (kvc_kv_record *)ctx;
    if (pos < 0 || pos >= r->cap || layer < 0 || layer >= r->n_layers) return KVC_E_ARG;
    /* deferred tokens must be consecutive positions of one layer */
    if (r->pend_n && (layer != r->pend_layer || pos != r->pend_pos0 + r->pend_n || r->pend_n == r->chunk))
        return KVC_E_STATE;
    const size_t base = (size_t)layer * r->cap * r->row;
    memcpy(r->k + base + (size_t)pos * r->row, k, r->row * sizeof(float));
    memcpy(r->v + base + (size_t)pos * r->row, v, r->row * sizeof(float));
    if (r->pend_n == 0) r->pend_layer = layer, r->pend_pos0 = pos;
    memcpy(r->q + (size_t)r->pend_n * r->n_heads * r->hs, q, (size_t)r->n_heads * r->hs * sizeof(float));
    r->outs[r->pend_n++] = out;
    if (r->flush_at < 0 || pos == r->flush_at) flush(r);
    return KVC_OK;
}

kvc_status kvc_kv_record_prefill(kvc_kv_record *r, const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n)
{
    const int step = s->chunk < r->chunk ? s->chunk : r->chunk;
    kvc_status st = KVC_OK;
    r->pend_n = 0;
    for (int p = 0; p < n && st == KVC_OK; p += step) {
        const int k = n - p < step ? n - p : step;
        r->flush_at = p + k - 1;
        st = kvc_l2c_forward_chunk(m, s, toks + p, k, p, kvc_kv_record_attention, r, k);
    }
    r->flush_at = -1, r->pend_n = 0;
    return st;
}

kvc_status kvc_kv_record_replay(const kvc_kv_record *r, kvc_cache *cache, int n)
{
    if (n < 0 || n > r->cap) return KVC_E_ARG;
    for (int p = 0; p < n; p++)
        for (int l = 0; l < r->n_layers; l++) {
            const size_t off = ((size_t)l * r->cap + p) * r->row;
            kvc_status rc = kvc_cache_append(cache, kvc_l2c_kernels(), (uint32_t)l, r->k + off, r->v + off);
            if (rc != KVC_OK) return rc;
        }
    return KVC_OK;
}
