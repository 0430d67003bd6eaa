/* Recording full-attention prefill (see kv_record.h). */
#include "kv_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_exact.h"

int kvc_kv_record_alloc(kvc_kv_record *r, const kvc_l2c_config *c, int cap)
{
    memset(r, 0, sizeof *r);
    r->n_layers = c->n_layers, r->n_heads = c->n_heads, r->n_kv = c->n_kv_heads;
    r->hs = c->dim / c->n_heads, r->cap = cap;
    r->row = (size_t)r->n_kv * r->hs;
    r->beta = 1.0f / sqrtf((float)r->hs);
    const size_t n = (size_t)r->n_layers * (size_t)cap * r->row;
    r->k = malloc(n * sizeof(float));
    r->v = malloc(n * sizeof(float));
    r->scores = malloc((size_t)cap * sizeof(float));
    if (!r->k || !r->v || !r->scores || r->hs < 1 || r->hs > 256) {
        kvc_kv_record_free(r);
        fprintf(stderr, "kvc bench: out of memory for a %d-token k/v record (or head size %d outside 1..256)\n", cap,
                c->dim / c->n_heads);
        return 1;
    }
    return 0;
}

void kvc_kv_record_free(kvc_kv_record *r)
{
    free(r->k), free(r->v), free(r->scores);
    r->k = r->v = r->scores = NULL;
}

kvc_status kvc_kv_record_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out)
{
    kvc_kv_record *r = (kvc_kv_record *)ctx;
    if (pos < 0 || pos >= r->cap || layer < 0 || layer >= r->n_layers) return KVC_E_ARG;
    const size_t base = (size_t)layer * r->cap * r->row;
    memcpy(r->k + base + (size_t)pos * r->row, k, r->row * sizeof(float));
    memcpy(r->v + base + (size_t)pos * r->row, v, r->row * sizeof(float));
    kvc_attn_exact_f32(q, r->n_heads, r->n_kv, r->hs, r->k + base, r->v + base, (size_t)pos + 1, r->row, r->beta,
                       r->scores, out);
    return KVC_OK;
}

kvc_status kvc_kv_record_replay(const kvc_kv_record *r, kvc_cache *cache, int n)
{
    if (n < 0 || n > r->cap) return KVC_E_ARG;
    for (int p = 0; p < n; p++)
        for (int l = 0; l < r->n_layers; l++) {
            const size_t off = ((size_t)l * r->cap + p) * r->row;
            kvc_status rc = kvc_cache_append(cache, NULL, (uint32_t)l, r->k + off, r->v + off);
            if (rc != KVC_OK) return rc;
        }
    return KVC_OK;
}
