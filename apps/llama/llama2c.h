/**
 * @file llama2c.h
 * @brief A llama2.c-format decoder (float32 checkpoint + tokenizer) whose
 *        attention goes only through the kvcompress cache manager.
 *
 * Loaders treat files as hostile: header fields are range-checked, the file
 * size must match the header exactly, and every failure returns KVC_E_FORMAT
 * with a one-line message.
 */
#ifndef KVC_LLAMA2C_H
#define KVC_LLAMA2C_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc_cache.h"

/** Checkpoint header (7 int32 in the file). */
typedef struct kvc_l2c_config {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier; /**< vocab_size was positive in the file */
    float rope_base;       /**< RoPE theta (llama2.c: 10000) */
    float norm_eps;        /**< RMSNorm epsilon (llama2.c: 1e-5) */
} kvc_l2c_config;

/** Model weights. The loaders read row-major matrices, then pack them for the
 *  decoder's products (gemm.h) and keep only what stays row-major: the
 *  embedding table and the norm weights. */
typedef struct kvc_l2c_model {
    kvc_l2c_config cfg;
    float *data;     /**< owned: emb, rms_att, rms_ffn, rms_final (row-major) */
    size_t n_floats; /**< weights the file held (all matrices included) */
    const float *emb, *rms_att, *rms_ffn, *rms_final;
    /** Row-major matrices: valid only inside the loaders, NULL afterwards. */
    const float *wq, *wk, *wv, *wo, *w1, *w2, *w3, *wcls;
    float *packed;              /**< owned: per layer [q;k;v], wo, [w1;w3], w2 in gemm panels, then the classifier */
    size_t packed_layer_floats; /**< floats of one layer's packed matrices */
    size_t off_wo, off_w13, off_w2; /**< offsets inside one layer's block */
    size_t off_cls;                 /**< offset of the packed classifier */
    /** GGUF-quantised weights kept quantised (gemm_quant.h): per matrix kind
     *  (KVC_L2C_QKV, _WO, _W13, _W2, _CLS) its panel type, 0 = the f32 panels;
     *  same results as the f32 panels, a fifth to a third of the bytes read. */
    int qtype[5];
    uint8_t *qpacked;               /**< owned: per layer [q;k;v], wo, [w1;w3], w2, then the classifier */
    size_t q_layer_bytes, q_off[5]; /**< bytes of one layer; offset of each kind (the classifier's from the start) */
} kvc_l2c_model;

/** Matrix kinds of a layer (and the classifier), in packing order. */
enum { KVC_L2C_QKV = 0, KVC_L2C_WO = 1, KVC_L2C_W13 = 2, KVC_L2C_W2 = 3, KVC_L2C_CLS = 4 };

/**
 * @brief Pack the row-major matrices of a freshly loaded model for the decoder
 *        and drop the row-major copies (loaders call it; @p m->data must hold
 *        the full llama2.c layout of wq..wcls the pointers name). Matrix kinds
 *        already kept quantised (m->qtype set by the GGUF loader) get no f32
 *        panels.
 * @return KVC_OK, or KVC_E_CAPACITY (out of memory; the model is freed).
 */
kvc_status kvc_l2c_model_pack(kvc_l2c_model *m, char *err, size_t errlen);

/** llama2.c tokenizer. */
typedef struct kvc_l2c_tokenizer {
    int vocab_size, max_token_length;
    char **vocab; /**< NUL-terminated pieces (owned) */
    int *lens;    /**< byte length of each piece */
    float *scores;
    int *sorted; /**< token ids sorted by piece, for encoding */
} kvc_l2c_tokenizer;

/**
 * @brief Load a Llama-architecture GGUF file (F32/F16/Q8_0/Q4_0/Q4_1 tensors,
 *        dequantised to float32): dimensions, RoPE base, RMSNorm epsilon and
 *        context from its metadata, tied embeddings when output.weight is absent.
 *        Every tensor's shape is checked against the metadata before anything
 *        is allocated; a tensor of a layer past llama.block_count and a
 *        non-finite weight are refused by name.
 * @return KVC_OK; KVC_E_FORMAT / KVC_E_UNSUPPORTED with a message; KVC_E_ARG (cannot read).
 */
kvc_status kvc_gguf_llama_load(const char *path, kvc_l2c_model *m, char *err, size_t errlen);
/** The same from a GGUF file's bytes in memory (@p name names it in messages; @p buf may be freed after). */
kvc_status kvc_gguf_llama_load_buffer(const uint8_t *buf, size_t n, const char *name, kvc_l2c_model *m, char *err,
                                      size_t errlen);

/** Parse a checkpoint held in memory (copied). */
kvc_status kvc_l2c_model_parse(const uint8_t *buf, size_t len, kvc_l2c_model *m, char *err, size_t errlen);
kvc_status kvc_l2c_model_load(const char *path, kvc_l2c_model *m, char *err, size_t errlen);
void kvc_l2c_model_free(kvc_l2c_model *m);

/** Parse a tokenizer; @p vocab_size comes from the model. */
kvc_status kvc_l2c_tokenizer_parse(const uint8_t *buf, size_t len, int vocab_size, kvc_l2c_tokenizer *t, char *err,
                                   size_t errlen);
kvc_status kvc_l2c_tokenizer_load(const char *path, int vocab_size, kvc_l2c_tokenizer *t, char *err, size_t errlen);
void kvc_l2c_tokenizer_free(kvc_l2c_tokenizer *t);

/** Encode text (BOS first, llama2.c's dummy-prefix space and byte fallback).
 *  @param out room for strlen(text) + 3 tokens. @return the token count. */
int kvc_l2c_encode(const kvc_l2c_tokenizer *t, const char *text, int *out);
/** Text of @p token following @p prev (strips the space after BOS; raw bytes for <0xXX>). */
const char *kvc_l2c_decode(const kvc_l2c_tokenizer *t, int prev, int token, char byte_buf[2]);

/** Attention hook: answers one layer of one position. The default uses a
 *  kvc_cache; tests may plug a straightforward exact attention in. */
typedef kvc_status (*kvc_l2c_attn_fn)(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                      float *out);

/** Run state (activations for a chunk of up to `chunk` tokens), owned. */
typedef struct kvc_l2c_state {
    int chunk; /**< most tokens one kvc_l2c_forward_chunk call takes */
    float *x, *xb, *xb2, *qkv, *att_out, *hb, *rope;
    float *logits; /**< chunk rows of vocab_size; row 0 after kvc_l2c_forward */
    int bad_layer; /**< after a forward's KVC_E_RANGE: the layer whose output was not finite
                         (n_layers: the logits), else -1 */
    int bad_pos;   /**< and the position of the first such row */
} kvc_l2c_state;

/** State for one token at a time. */
kvc_status kvc_l2c_state_alloc(const kvc_l2c_config *c, kvc_l2c_state *s);
/** State for chunks of up to @p chunk tokens (1 .. 4096). */
kvc_status kvc_l2c_state_alloc_chunk(const kvc_l2c_config *c, int chunk, kvc_l2c_state *s);
void kvc_l2c_state_free(kvc_l2c_state *s);

/** The cache configuration matching a model (heads, head_dim, layers). */
kvc_cache_config kvc_l2c_cache_config(const kvc_l2c_config *c, const kvc_stream_config *stream);

/** The kernel table the decoder's cache calls use: kvc_kernels_best() (KVC_KERNELS forces one;
 *  KVC_KERNELS=cuda picks accel/cuda's table in builds that have it). */
const kvc_kernels *kvc_l2c_kernels(void);

/** When $KVC_KERNELS is set to a table this build cannot run here (which
 *  kvc_kernels_best() would ignore), a sentence saying so and listing the
 *  tables it can, into @p buf; else NULL. */
const char *kvc_l2c_kernels_env_problem(char *buf, size_t cap);

/** Memory for a cache arena the chosen kernel table can read: CUDA managed
 *  memory when the table is "cuda" on a GPU (KVC_KERNELS=cuda), else
 *  KVC_ARENA_ALIGN-aligned host memory. NULL when out of memory. */
void *kvc_l2c_arena_alloc(size_t bytes);
/** Frees what kvc_l2c_arena_alloc returned (NULL allowed). */
void kvc_l2c_arena_free(void *arena);

/** The default attention hook (ctx = kvc_cache*): append, then attend. With
 *  more than one decoder thread and a long enough cache, the attend runs
 *  split-K on the threads (kvc_stream_attend_part per kv head and part,
 *  kvc_attend_merge). */
kvc_status kvc_l2c_cache_attention(void *ctx, int layer, int pos, const float *q, const float *k, const float *v,
                                   float *out);

/** Decoder threads (1 .. 64; default 1): the matrix products split by output
 *  panels (same bits whatever the count) and the cache attends split-K (same
 *  to rounding). 0 ok, -1 bad count or a thread that could not start. */
int kvc_l2c_set_threads(int n);
/** Decoder threads in use. */
int kvc_l2c_threads(void);
/** Split an attend only when each part gets at least @p entries cache entries
 *  (default 512; tests lower it to split small caches). */
void kvc_l2c_set_split_min(size_t entries);

/** One forward step: logits for @p token at position @p pos (into s->logits). */
kvc_status kvc_l2c_forward(const kvc_l2c_model *m, kvc_l2c_state *s, int token, int pos, kvc_l2c_attn_fn attn,
                           void *ctx);

/**
 * @brief Forward @p n consecutive tokens at positions pos0 .. pos0+n-1, layer by
 *        layer: each layer's products run on the whole chunk, and its attention
 *        hook is called token by token in order (append then attend), so the
 *        cache sees exactly what n single steps would show it and the outputs
 *        are bit-identical to n calls of kvc_l2c_forward.
 * @param n           1 .. s->chunk.
 * @param logits_from logits are computed for tokens logits_from .. n-1 (row t of
 *                    s->logits); n computes none.
 * @return KVC_OK; KVC_E_ARG (bad token, position or n); the hook's status (the
 *         cache then holds the tokens before the failing one of that layer);
 *         KVC_E_RANGE when a layer's output or a logit is NaN or Inf (s->bad_layer
 *         and s->bad_pos say where; kvc_l2c_failure words it): nothing
 *         non-finite reaches the caller as logits.
 */
kvc_status kvc_l2c_forward_chunk(const kvc_l2c_model *m, kvc_l2c_state *s, const int *tokens, int n, int pos0,
                                 kvc_l2c_attn_fn attn, void *ctx, int logits_from);

/** A forward's failure @p st in words, into @p buf: for KVC_E_RANGE the layer (or the logits) and the
 *  position that went non-finite, else the status's name. Returns buf. */
const char *kvc_l2c_failure(const kvc_l2c_model *m, const kvc_l2c_state *s, kvc_status st, char *buf, size_t cap);
#endif
