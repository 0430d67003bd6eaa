#ifndef KVC_APP_KV_RECORD_H
#define KVC_APP_KV_RECORD_H
/* Full-attention prefill that records every layer's k/v rows, so that one
 * exact pass over a context can seed the cache of every method (kvc bench):
 * the attention hook stores the token's k/v and answers with exact attention
 * over everything recorded so far, through the batched causal attend of the
 * decoder's kernel table (kvc_l2c_kernels(): the library's SIMD table where
 * the CPU has one; f32 sums, online softmax). Inside
 * kvc_kv_record_prefill the hook defers each layer's answers to the chunk's
 * last token and computes them together, reading the recorded rows once per
 * chunk instead of once per token (kvc_l2c_forward_chunk reads a token's
 * attention output only after the whole chunk's hooks have run). */
#include "llama2c.h"

typedef struct kvc_kv_record {
    int n_layers, n_heads, n_kv, hs, cap;
    size_t row;   /* n_kv * hs floats: one token's k (or v) of one layer */
    float beta;   /* 1/sqrt(hs), the model's score scale */
    float *k, *v; /* [layer][kv head][pos][hs]: each head's rows contiguous, a cache segment */
    /* deferred queries of one layer of one chunk */
    int chunk, pend_layer, pend_pos0, pend_n, flush_at;
    float *q;       /* [pending token][query head][hs] */
    float *qg, *og; /* one kv head's group: [token][group head][hs] in, out */
    double *work;   /* kvc_attend_work_bytes(chunk, group, hs) */
    float *kv_row;  /* one position's k rows of every kv head, then its v rows (replay) */
    float **outs;
    /* the queries of the last KVC_KV_OBS positions of the last prefill (SnapKV's observation window) */
    float *obs_q; /* [layer][position][query head][hs] */
    int obs_from, obs_n;
} kvc_kv_record;

/** Positions of the observation window a prefill keeps the queries of. */
#define KVC_KV_OBS 32

/** Key (or, with r->v, value) row of kv head @p h at position @p pos of layer @p l. */
static inline float *kvc_kv_record_row(const kvc_kv_record *r, float *base, int l, int h, int pos)
{
    return base + (((size_t)l * (size_t)r->n_kv + (size_t)h) * (size_t)r->cap + (size_t)pos) * (size_t)r->hs;
}

/** Room for @p cap positions of model @p c; 0, or 1 after printing "out of memory". */
int kvc_kv_record_alloc(kvc_kv_record *r, const kvc_l2c_config *c, int cap);
void kvc_kv_record_free(kvc_kv_record *r);

/** Attention hook (ctx = kvc_kv_record*): record k/v at @p pos, answer exactly
 *  over positions 0..pos. KVC_E_ARG when pos is outside the record. */
kvc_status kvc_kv_record_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out);

/** Feed toks[0..n) from position 0 through the model in chunks of s->chunk
 *  (at most the record's chunk), recording and answering chunk by chunk. */
kvc_status kvc_kv_record_prefill(kvc_kv_record *r, const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n);

/** Hand the recorded observation window (the queries of the last positions
 *  of the last prefill, at most KVC_KV_OBS) to every layer of @p cache
 *  (kvc_cache_prefill_queries), as a decoder does before appending a prompt. */
kvc_status kvc_kv_record_prefill_queries(const kvc_kv_record *r, kvc_cache *cache);

/** Append positions 0..n-1 of every layer to @p cache, in token order. */
kvc_status kvc_kv_record_replay(const kvc_kv_record *r, kvc_cache *cache, int n);
#endif
