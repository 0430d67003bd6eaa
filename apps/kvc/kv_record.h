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
    /* KVzip's reconstruction scores (kvc_kv_record_reconstruct): [layer][kv
       head][position] of the first score_n positions; NULL until it runs */
    float *score;
    int score_n, scoring; /* scoring: inside kvc_kv_record_reconstruct */
    double *logit;        /* one query's scores over the recorded positions (cap) */
    /* with want_surprise set, kvc_kv_record_prefill also computes each
       position's surprisal, -log p(token | the tokens before it) in nats
       (position 0: 0), into surprise[0 .. n) */
    int want_surprise;
    float *surprise;
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

/**
 * KVzip's importance scores (Kim et al. 2025, "KVzip: Query-Agnostic KV Cache
 * Compression with Context Reconstruction"): after kvc_kv_record_prefill of
 * the @p n context tokens @p toks, the context is repeated in chunks of at
 * most @p chunk tokens, each fed after the instruction @p ask[0..n_ask) at
 * positions n.. (teacher-forced, full attention over the context and the
 * chunk's own repeat; each chunk overwrites the previous one's rows, as
 * KVzip scores long contexts chunk by chunk). Each context position's score,
 * per layer and kv head, is the largest softmax probability any query of the
 * head's group gives it while a chunk is repeated (the softmax over every
 * position before the query). Positions reach n + n_ask + chunk - 1: the
 * record and the model need room for them. Replay takes the first n only.
 */
kvc_status kvc_kv_record_reconstruct(kvc_kv_record *r, const kvc_l2c_model *m, kvc_l2c_state *s, const int *toks, int n,
                                     const int *ask, int n_ask, int chunk);

/** Score of context position @p pos at (@p l, @p h) after kvc_kv_record_reconstruct. */
static inline float kvc_kv_record_score(const kvc_kv_record *r, int l, int h, int pos)
{
    return r->score[((size_t)l * (size_t)r->n_kv + (size_t)h) * (size_t)r->score_n + (size_t)pos];
}

/** Append positions 0..n-1 of every layer to @p cache: one kvc_cache_prefill
 *  call per layer (the state token-order appends reach; balancekv-prefill in
 *  mode offline compresses its prompt there). */
kvc_status kvc_kv_record_replay(const kvc_kv_record *r, kvc_cache *cache, int n);

/** kvc_kv_record_replay where the caller decides the protected spans: once
 *  position p of (layer l, kv head h) has entered the window, it is a centre
 *  (kvc_cache_mark) exactly when marks[(l * n_kv + h) * n + p] is nonzero,
 *  whatever the key-outlier test said; a stream that cannot take a mark (a
 *  sink, no protected spans) is skipped. Token by token (marks go between
 *  appends), so balancekv-prefill in mode offline refuses it. NULL marks: a
 *  plain replay (kvc_kv_record_replay). */
kvc_status kvc_kv_record_replay_marked(const kvc_kv_record *r, kvc_cache *cache, int n, const unsigned char *marks);
#endif
