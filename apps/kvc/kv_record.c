/* Recording full-attention prefill (see kv_record.h). */
#include "kv_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const size_t group = r->n_kv > 0 ? (size_t)(r->n_heads / r->n_kv) : 0;
    r->q = malloc((size_t)r->chunk * r->n_heads * r->hs * sizeof(float));
    r->qg = malloc((size_t)r->chunk * group * r->hs * sizeof(float));
    r->og = malloc((size_t)r->chunk * group * r->hs * sizeof(float));
    r->work = malloc((size_t)kvc_attend_work_bytes((uint64_t)r->chunk, group, (uint64_t)r->hs));
    r->kv_row = malloc(2 * r->row * sizeof(float));
    r->outs = malloc((size_t)r->chunk * sizeof(float *));
    r->obs_q = malloc((size_t)r->n_layers * KVC_KV_OBS * r->n_heads * r->hs * sizeof(float));
    if (!r->k || !r->v || !r->q || !r->qg || !r->og || !r->work || !r->kv_row || !r->outs || !r->obs_q || r->hs < 1 ||
        r->hs > 256 || group < 1 || group > KVC_MAX_QUERY_HEADS) {
        kvc_kv_record_free(r);
        fprintf(stderr, "kvc bench: out of memory for a %d-token k/v record (or head size %d outside 1..256)\n", cap,
                c->dim / c->n_heads);
        return 1;
    }
    return 0;
}

void kvc_kv_record_free(kvc_kv_record *r)
{
    free(r->k), free(r->v), free(r->q), free(r->qg), free(r->og), free(r->work), free(r->kv_row), free(r->outs);
    free(r->obs_q), free(r->score), free(r->logit), free(r->surprise);
    r->score = NULL, r->logit = NULL, r->score_n = 0, r->surprise = NULL;
    r->k = r->v = r->q = r->qg = r->og = r->kv_row = r->obs_q = NULL;
    r->work = NULL;
    r->outs = NULL;
}

/* KVzip's scores of the pending tokens (queries of the repeated context) of
 * kv head h: each context position keeps the largest softmax probability a
 * query of the group gives it, the softmax over positions 0..pos. */
static void score_pending(kvc_kv_record *r, const kvc_kernels *kern, int h)
{
    const size_t G = (size_t)(r->n_heads / r->n_kv), hs = (size_t)r->hs;
    const float *keys = kvc_kv_record_row(r, r->k, r->pend_layer, h, 0);
    float *score = r->score + ((size_t)r->pend_layer * (size_t)r->n_kv + (size_t)h) * (size_t)r->score_n;
    for (int t = 0; t < r->pend_n; t++) {
        const size_t upto = (size_t)(r->pend_pos0 + t) + 1u;
        for (size_t g = 0; g < G; g++) {
            const float *q = r->q + ((size_t)t * (size_t)r->n_heads + (size_t)h * G + g) * hs;
            double top = -INFINITY, z = 0.0;
            for (size_t j = 0; j < upto; j++) {
                r->logit[j] = (double)r->beta * kern->dot_f32(q, keys + j * hs, hs);
                if (r->logit[j] > top) top = r->logit[j];
            }
            for (size_t j = 0; j < upto; j++) z += exp(r->logit[j] - top);
            for (size_t j = 0; j < (size_t)r->score_n; j++) {
                const float p = (float)(exp(r->logit[j] - top) / z);
                if (p > score[j]) score[j] = p;
            }
        }
    }
}

/* Answer the pending tokens of one layer: per kv head, one batched causal
 * attend of the group's query heads over the head's recorded rows. */
static kvc_status flush(kvc_kv_record *r)
{
    const kvc_kernels *kern = kvc_l2c_kernels();
    const size_t G = (size_t)(r->n_heads / r->n_kv), hs = (size_t)r->hs, T = (size_t)r->pend_n;
    const size_t n = (size_t)r->pend_pos0 + T;
    kvc_status rc = KVC_OK;
    for (int h = 0; h < r->n_kv && rc == KVC_OK; h++) {
        kvc_view view;
        memset(&view, 0, sizeof view);
        view.d = view.dv = hs, view.beta = r->beta, view.n_seg = 1;
        view.seg[0].keys = kvc_kv_record_row(r, r->k, r->pend_layer, h, 0);
        view.seg[0].values = kvc_kv_record_row(r, r->v, r->pend_layer, h, 0);
        view.seg[0].n = n, view.seg[0].scale = 1.0, view.seg[0].role = KVC_SET_BOTH, view.seg[0].dtype = KVC_DTYPE_F32;
        for (size_t t = 0; t < T; t++)
            memcpy(r->qg + t * G * hs, r->q + (t * (size_t)r->n_heads + (size_t)h * G) * hs, G * hs * sizeof(float));
        if (r->scoring) score_pending(r, kern, h);
        const kvc_attend_batch b = {r->qg, T, G, 1, r->og, NULL, NULL};
        rc = kern->attend_batch(kern, &view, &b, r->work, (size_t)kvc_attend_work_bytes(T, G, hs));
        for (size_t t = 0; t < T && rc == KVC_OK; t++)
            memcpy(r->outs[t] + (size_t)h * G * hs, r->og + t * G * hs, G * hs * sizeof(float));
    }
    r->pend_n = 0;
    return rc;
}

kvc_status kvc_kv_record_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out)
{
    kvc_kv_record *r = (kvc_kv_record *)ctx;
    if (pos < 0 || pos >= r->cap || layer < 0 || layer >= r->n_layers) return KVC_E_ARG;
    /* deferred tokens must be consecutive positions of one layer */
    if (r->pend_n && (layer != r->pend_layer || pos != r->pend_pos0 + r->pend_n || r->pend_n == r->chunk))
        return KVC_E_STATE;
    for (int h = 0; h < r->n_kv; h++) {
        memcpy(kvc_kv_record_row(r, r->k, layer, h, pos), k + (size_t)h * r->hs, (size_t)r->hs * sizeof(float));
        memcpy(kvc_kv_record_row(r, r->v, layer, h, pos), v + (size_t)h * r->hs, (size_t)r->hs * sizeof(float));
    }
    if (pos >= r->obs_from && pos - r->obs_from < KVC_KV_OBS)
        memcpy(r->obs_q + (((size_t)layer * KVC_KV_OBS + (size_t)(pos - r->obs_from)) * r->n_heads) * r->hs, q,
               (size_t)r->n_heads * r->hs * sizeof(float));
    if (r->pend_n == 0) r->pend_layer = layer, r->pend_pos0 = pos;
    memcpy(r->q + (size_t)r->pend_n * r->n_heads * r->hs, q, (size_t)r->n_heads * r->hs * sizeof(float));
    r->outs[r->pend_n++] = out;
    return r->flush_at < 0 || pos == r->flush_at ? flush(r) : KVC_OK;
}

kvc_status kvc_kv_record_prefill(kvc_kv_record *r, const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n)
{
    const int step = s->chunk < r->chunk ? s->chunk : r->chunk;
    kvc_status st = KVC_OK;
    r->pend_n = 0;
    r->obs_n = n < KVC_KV_OBS ? n : KVC_KV_OBS, r->obs_from = n - r->obs_n;
    if (r->want_surprise && !r->surprise && !(r->surprise = malloc((size_t)r->cap * sizeof(float)))) return KVC_E_ARG;
    const int vocab = m->cfg.vocab_size;
    for (int p = 0; p < n && st == KVC_OK; p += step) {
        const int k = n - p < step ? n - p : step;
        r->flush_at = p + k - 1;
        st = kvc_l2c_forward_chunk(m, s, toks + p, k, p, kvc_kv_record_attention, r, r->want_surprise ? 0 : k);
        /* row t of the logits predicts token p + t + 1 */
        for (int t = 0; r->want_surprise && st == KVC_OK && t < k && p + t + 1 < n; t++) {
            const float *lg = s->logits + (size_t)t * (size_t)vocab;
            double top = lg[0], z = 0.0;
            for (int v = 1; v < vocab; v++) top = lg[v] > top ? lg[v] : top;
            for (int v = 0; v < vocab; v++) z += exp(lg[v] - top);
            r->surprise[p + t + 1] = (float)(log(z) + top - lg[toks[p + t + 1]]);
        }
    }
    if (r->want_surprise && n > 0) r->surprise[0] = 0.0f;
    r->flush_at = -1, r->pend_n = 0;
    return st;
}

kvc_status kvc_kv_record_reconstruct(kvc_kv_record *r, const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n,
                                     const int *ask, int n_ask, int chunk)
{
    if (n < 1 || n_ask < 0 || chunk < 1 || (size_t)n + (size_t)n_ask + (size_t)(chunk < n ? chunk : n) > (size_t)r->cap)
        return KVC_E_ARG;
    free(r->score), free(r->logit);
    r->score = calloc((size_t)r->n_layers * (size_t)r->n_kv * (size_t)n, sizeof(float));
    r->logit = malloc((size_t)r->cap * sizeof(double));
    int *feed = malloc(((size_t)n_ask + (size_t)chunk) * sizeof(int));
    r->score_n = n;
    if (!r->score || !r->logit || !feed) {
        free(r->score), free(r->logit), free(feed);
        r->score = NULL, r->logit = NULL, r->score_n = 0;
        return KVC_E_ARG;
    }
    const int step = s->chunk < r->chunk ? s->chunk : r->chunk;
    kvc_status st = KVC_OK;
    r->pend_n = 0, r->scoring = 1;
    for (int c0 = 0; c0 < n && st == KVC_OK; c0 += chunk) {
        const int len = n - c0 < chunk ? n - c0 : chunk, total = n_ask + len;
        memcpy(feed, ask, (size_t)n_ask * sizeof(int));
        memcpy(feed + n_ask, toks + c0, (size_t)len * sizeof(int));
        for (int p = 0; p < total && st == KVC_OK; p += step) {
            const int k = total - p < step ? total - p : step;
            r->flush_at = n + p + k - 1;
            st = kvc_l2c_forward_chunk(m, s, feed + p, k, n + p, kvc_kv_record_attention, r, k);
        }
    }
    r->flush_at = -1, r->pend_n = 0, r->scoring = 0;
    free(feed);
    return st;
}

kvc_status kvc_kv_record_prefill_queries(const kvc_kv_record *r, kvc_cache *cache)
{
    if (r->obs_n < 1) return KVC_E_STATE;
    for (int l = 0; l < r->n_layers; l++) {
        const kvc_status rc =
            kvc_cache_prefill_queries(cache, kvc_l2c_kernels(), (uint32_t)l,
                                      r->obs_q + (size_t)l * KVC_KV_OBS * r->n_heads * r->hs, (size_t)r->obs_n);
        if (rc != KVC_OK) return rc;
    }
    return KVC_OK;
}

/* The prompt, layer by layer, in one kvc_cache_prefill call each (streams
 * are independent, so this ends in the state token-by-token appends reach;
 * balancekv-prefill in mode offline needs it). One scratch for every layer. */
kvc_status kvc_kv_record_replay(const kvc_kv_record *r, kvc_cache *cache, int n)
{
    if (n < 0 || n > r->cap) return KVC_E_ARG;
    if (n == 0) return KVC_OK;
    const size_t row = (size_t)r->n_kv * (size_t)r->hs;
    float *k = malloc((size_t)n * row * sizeof(float)), *v = malloc((size_t)n * row * sizeof(float));
    const size_t wb = kvc_cache_prefill_work_bytes(cache, (size_t)n);
    void *work = wb ? aligned_alloc(8, (wb + 7) / 8 * 8) : NULL;
    kvc_status rc = k && v && (work || !wb) ? KVC_OK : KVC_E_ARENA;
    for (int l = 0; l < r->n_layers && rc == KVC_OK; l++) {
        for (int p = 0; p < n; p++)
            for (int h = 0; h < r->n_kv; h++) {
                const size_t at = (size_t)p * row + (size_t)h * r->hs;
                memcpy(k + at, kvc_kv_record_row(r, r->k, l, h, p), (size_t)r->hs * sizeof(float));
                memcpy(v + at, kvc_kv_record_row(r, r->v, l, h, p), (size_t)r->hs * sizeof(float));
            }
        rc = kvc_cache_prefill(cache, kvc_l2c_kernels(), (uint32_t)l, k, v, (size_t)n, work, wb);
    }
    free(k), free(v), free(work);
    return rc;
}

kvc_status kvc_kv_record_replay_marked(const kvc_kv_record *r, kvc_cache *cache, int n, const unsigned char *marks)
{
    if (marks == NULL) return kvc_kv_record_replay(r, cache, n);
    if (n < 0 || n > r->cap) return KVC_E_ARG;
    float *kr = r->kv_row, *vr = r->kv_row + r->row;
    for (int p = 0; p < n; p++)
        for (int l = 0; l < r->n_layers; l++) {
            for (int h = 0; h < r->n_kv; h++) {
                memcpy(kr + (size_t)h * r->hs, kvc_kv_record_row(r, r->k, l, h, p), (size_t)r->hs * sizeof(float));
                memcpy(vr + (size_t)h * r->hs, kvc_kv_record_row(r, r->v, l, h, p), (size_t)r->hs * sizeof(float));
            }
            kvc_status rc = kvc_cache_append(cache, kvc_l2c_kernels(), (uint32_t)l, kr, vr);
            if (rc != KVC_OK) return rc;
            /* position p - 1 entered the window with this append: its mark
               replaces the outlier test's verdict (KVC_E_ARG: a token that
               never enters the window; KVC_E_UNSUPPORTED: no protected spans) */
            for (int h = 0; marks && h < r->n_kv && p > 0; h++) {
                const int centre = marks[((size_t)l * (size_t)r->n_kv + (size_t)h) * (size_t)n + (size_t)(p - 1)] != 0;
                rc = kvc_cache_mark(cache, (uint32_t)l, (uint32_t)h, (uint64_t)(p - 1), centre);
                if (rc != KVC_OK && rc != KVC_E_ARG && rc != KVC_E_UNSUPPORTED) return rc;
            }
        }
    return KVC_OK;
}
