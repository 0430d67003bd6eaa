/**
 * @file bpe.h
 * @brief GPT-2 style byte-level BPE tokenizer read from a GGUF file
 *        (tokenizer.ggml.tokens / merges / bos / eos).
 *
 * Pre-tokenisation follows the GPT-2 pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with one simplification: every non-ASCII code point counts as a letter
 * (exact for English text; other scripts may split differently from the
 * reference tokenizer, never losslessly wrong: decode(encode(x)) == x).
 */
#ifndef KVC_BPE_H
#define KVC_BPE_H

#include <stddef.h>

#include "kvc/kvc_types.h"

typedef struct kvc_bpe kvc_bpe;

/** Load from a GGUF file; NULL on failure with a message in @p err. */
kvc_bpe *kvc_bpe_load(const char *gguf_path, char *err, size_t errlen);
void kvc_bpe_free(kvc_bpe *t);
int kvc_bpe_vocab_size(const kvc_bpe *t);
int kvc_bpe_bos(const kvc_bpe *t);
int kvc_bpe_eos(const kvc_bpe *t);

/** Encode UTF-8 @p text into at most @p cap ids; returns the count (or -1 when cap is too small). */
int kvc_bpe_encode(const kvc_bpe *t, const char *text, int *ids, int cap);

/** The bytes of token @p id (byte-level decoded) into @p out (cap bytes, NUL-terminated); returns the length. */
int kvc_bpe_decode(const kvc_bpe *t, int id, char *out, int cap);
#endif
