/* A llama2.c decoder small enough for a microcontroller: int8 weights read
 * in place from a packed blob (pack_story.py; flash on a device), float
 * activations in static buffers, attention through a kvcompress cache.
 * Every operation is IEEE single or double arithmetic in a fixed order with
 * the core's portable exp/log/cos, so a host build and a Cortex-M build of
 * the same blob and cache configuration print the same text. */
#ifndef KVC_STORY_H
#define KVC_STORY_H

#include <stddef.h>
#include <stdint.h>

#include "kvc/kvc.h"

/* compile-time limits of the static activation buffers (stories260K: 64, 172, 512) */
#define KVC_STORY_MAX_DIM    64
#define KVC_STORY_MAX_HIDDEN 256
#define KVC_STORY_MAX_VOCAB  512

typedef struct kvc_story {
    int dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len;
    const unsigned char *emb;    /* vocab int8 rows of dim */
    const unsigned char *layers; /* per layer: wq, wk, wv, wo, w1, w2, w3 (int8 rows) */
    size_t layer_bytes;          /* bytes of one layer's matrices */
    const float *rms_att, *rms_ffn, *rms_final;
    const unsigned char *wcls;                   /* vocab int8 rows of dim */
    const char *vocab_text[KVC_STORY_MAX_VOCAB]; /* token pieces, NUL-free: see vocab_len */
    int vocab_len[KVC_STORY_MAX_VOCAB];
} kvc_story;

/** Read a blob in place. Returns NULL, or what is wrong with it. */
const char *kvc_story_open(kvc_story *s, const void *blob, size_t bytes);

/** The cache configuration the decoder needs for @p s with @p stream's method,
 *  budget and storage type. */
kvc_cache_config kvc_story_cache_config(const kvc_story *s, const kvc_stream_config *stream);

/** Greedy decoding from BOS for at most @p steps tokens (stops at BOS or at
 *  seq_len), attention through @p cache (initialised from
 *  kvc_story_cache_config) on kernel table @p kern; each token's text goes to
 *  @p emit. Returns the number of tokens generated, or -1 when the cache
 *  refused a call (its status in *status). */
int kvc_story_generate(const kvc_story *s, kvc_cache *cache, const kvc_kernels *kern, int steps,
                       void (*emit)(const char *text, size_t len, void *ctx), void *ctx, kvc_status *status);

/** Bytes of the decoder's static activation buffers (for a RAM map). */
size_t kvc_story_activation_bytes(void);

#endif
