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
#include <stdint.h>

#include "kvc/kvc_types.h"

typedef struct kvc_bpe kvc_bpe;

/** Load from a GGUF file; NULL on failure with a message in @p err. */
kvc_bpe *kvc_bpe_load(const char *gguf_path, char *err, size_t errlen);
/** The same from the bytes of a GGUF file in memory (@p name names it in messages; @p buf may be freed after). */
kvc_bpe *kvc_bpe_load_buffer(const uint8_t *buf, size_t n, const char *name, char *err, size_t errlen);
void kvc_bpe_free(kvc_bpe *t);
int kvc_bpe_vocab_size(const kvc_bpe *t);
int kvc_bpe_bos(const kvc_bpe *t);
int kvc_bpe_eos(const kvc_bpe *t);

/** Pre-tokens longer than this many bytes are encoded in pieces of at most
 *  this many (the merge loop is quadratic in a piece's length; a 10 MB run
 *  of letters would never end). Lossless either way; the ids may differ
 *  from the reference tokenizer's at the cut. */
#define KVC_BPE_PIECE_MAX 1000

/** kvc_bpe_encode_n: @p cap was too small. */
#define KVC_BPE_E_CAP (-1)
/** kvc_bpe_encode_n: a byte has no token in this vocabulary (GGUF
 *  vocabularies may lack byte tokens: SmolLM2 has none for 21 byte values,
 *  among them 0x04, 0xc0 and 0xff). No id sequence decodes to such a text,
 *  so it is refused rather than given the unknown token. */
#define KVC_BPE_E_BYTE (-2)

/**
 * @brief Encode the @p len bytes of @p text (any bytes, NUL included) into at
 *        most @p cap ids, losslessly: the bytes of the ids, decoded in order,
 *        are @p text.
 * @return the count; KVC_BPE_E_CAP; or KVC_BPE_E_BYTE with *bad_pos (when
 *         not NULL) the offset of the first byte the vocabulary cannot say.
 */
int kvc_bpe_encode_n(const kvc_bpe *t, const char *text, size_t len, int *ids, int cap, size_t *bad_pos);

/** kvc_bpe_encode_n over a NUL-terminated string. */
int kvc_bpe_encode(const kvc_bpe *t, const char *text, int *ids, int cap);

/** The most bytes one token decodes to (bounds the bytes a count of tokens can cover). */
int kvc_bpe_max_token_bytes(const kvc_bpe *t);

/** The bytes of token @p id (byte-level decoded) into @p out (cap bytes, NUL-terminated; a token may
 *  hold a NUL byte, so use the length); returns the length. */
int kvc_bpe_decode(const kvc_bpe *t, int id, char *out, int cap);
#endif
