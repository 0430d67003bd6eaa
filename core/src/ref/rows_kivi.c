/* KIVI int4 key blocks (KVC_DTYPE_KIVI4; Liu et al. 2024, "KIVI"): the keys
 * of 32 consecutive tokens quantised per channel, so an outlier channel gets
 * its own scale instead of stretching every token's grid. A block is the
 * transpose of 32 rows: channel c's 32 values form one int4 row of 32
 * elements (rows_int4.c: an f16 scale, an f16 minimum, 16 bytes of nibbles,
 * token 2i in the low nibble), 20 bytes per channel, channels in order, then
 * zeros up to the bytes of 32 int4 rows (none where d is a multiple of 32):
 *
 *   block = [channel 0: u16 scale, u16 min, 16 B][channel 1: ...] ... [0 ...]
 *
 * Reusing the int4 row for the channel vector gives KIVI the same grid
 * (stored halves, round to nearest, saturation at +-65504) and every value
 * the same definition: min_c + q * scale_c, evaluated in double. A KIVI4
 * segment's values are plain int4 rows (per token, groups of 32), which is
 * KIVI's value layout. */
#include <string.h>

#include "acsl_lemmas.h"
#include "rows_ref.h"
#include "shared/rows.h"

/* Channel c's 20 bytes: an int4 row of KVC_KIVI_BLOCK elements. */
#define CHANNEL_BYTES ((size_t)KVC_ROW_BYTES(KVC_DTYPE_I4, KVC_KIVI_BLOCK))
_Static_assert(CHANNEL_BYTES == 20u, "a channel is one int4 row of a block's 32 tokens");
_Static_assert(KVC_KIVI4_KEY_BLOCK_BYTES(64) == 20u * 64u, "no padding where d is a multiple of 32");

uint64_t kvc_kivi4_key_bytes(uint64_t n, uint64_t d)
{
    const uint64_t blocks = (n + KVC_KIVI_BLOCK - 1u) / KVC_KIVI_BLOCK, row = kvc_row_bytes(KVC_DTYPE_I4, d);
    //@ ghost kvc_mul_le(blocks, 134217729, 32 * row, 32 * 1032);
    return blocks * (KVC_KIVI_BLOCK * row); /* KVC_KIVI4_KEY_BLOCK_BYTES(d) blocks */
}

/* One channel's 32 values (a partial block repeats its first token's value:
 * the grid spans only the tokens present, and the unused codes are
 * deterministic) into its int4 row; then the padding zeroed. */
typedef float (*key_at_fn)(const void *src, size_t t, size_t c, size_t d);

static void block_store(void *block, const void *src, key_at_fn at, size_t n_tok, size_t d)
{
    unsigned char *b = (unsigned char *)block;
    float x[KVC_KIVI_BLOCK];
    for (size_t c = 0; c < d; c++) {
        for (size_t t = 0; t < KVC_KIVI_BLOCK; t++) x[t] = at(src, t < n_tok ? t : 0u, c, d);
        kvc_k_i4_store__ref(b + c * CHANNEL_BYTES, x, KVC_KIVI_BLOCK);
    }
    memset(b + d * CHANNEL_BYTES, 0, (size_t)KVC_KIVI4_KEY_BLOCK_BYTES(d) - d * CHANNEL_BYTES);
}

static float at_f32(const void *src, size_t t, size_t c, size_t d) { return ((const float *)src)[t * d + c]; }

static float at_f16(const void *src, size_t t, size_t c, size_t d)
{
    uint16_t h;
    memcpy(&h, (const unsigned char *)src + t * (size_t)kvc_row_bytes(KVC_DTYPE_F16, d) + 2u * c, sizeof h);
    return kvc_f16_to_f32(h);
}

static int block_args_ok(const void *block, const void *src, size_t n_tok, size_t d)
{
    return block != NULL && src != NULL && n_tok >= 1 && n_tok <= KVC_KIVI_BLOCK && d >= 1 && d <= KVC_MAX_HEAD_DIM;
}

void kvc_kivi4_key_block_store(void *block, const float *keys, size_t n_tok, size_t d)
{
    if (block_args_ok(block, keys, n_tok, d)) block_store(block, keys, at_f32, n_tok, d);
}

void kvc_kivi4_key_block_store_f16(void *block, const void *rows_f16, size_t n_tok, size_t d)
{
    if (block_args_ok(block, rows_f16, n_tok, d)) block_store(block, rows_f16, at_f16, n_tok, d);
}

/* Channel c of token j (0..31) of a block: min + q * scale, in double. */
static double key_element(const unsigned char *block, size_t j, size_t c)
{
    const unsigned char *ch = block + c * CHANNEL_BYTES;
    uint16_t h[2];
    memcpy(h, ch, sizeof h);
    const unsigned q = (ch[4u + (j >> 1)] >> ((j & 1u) * 4u)) & 15u;
    return (double)kvc_f16_to_f32(h[1]) + (double)q * (double)kvc_f16_to_f32(h[0]);
}

/* The block holding token i of KIVI4 key blocks starting at keys. */
static const unsigned char *block_of(const void *keys, size_t i, size_t d)
{
    return (const unsigned char *)keys + i / KVC_KIVI_BLOCK * KVC_KIVI4_KEY_BLOCK_BYTES(d);
}

double kvc_kivi4_key_dot_f32(const void *keys, size_t i, const float *q, size_t d)
{
    const unsigned char *block = block_of(keys, i, d);
    double s = 0.0;
    for (size_t c = 0; c < d; c++) s += key_element(block, i % KVC_KIVI_BLOCK, c) * (double)q[c];
    return s;
}

void kvc_kivi4_key_load(const void *keys, size_t i, float *x, size_t d)
{
    if (keys == NULL || x == NULL || d < 1 || d > KVC_MAX_HEAD_DIM) return;
    const unsigned char *block = block_of(keys, i, d);
    for (size_t c = 0; c < d; c++) x[c] = (float)key_element(block, i % KVC_KIVI_BLOCK, c);
}

int kvc_segment_key_load(const kvc_segment *s, size_t d, size_t i, float *x)
{
    if (s == NULL || x == NULL || i >= s->n || d < 1 || d > KVC_MAX_HEAD_DIM || s->dtype >= KVC_DTYPE_COUNT) return 0;
    if (s->dtype == KVC_DTYPE_KIVI4) {
        if (s->keys_q == NULL || s->first >= KVC_KIVI_BLOCK) return 0;
        kvc_kivi4_key_load(s->keys_q, s->first + i, x, d);
        return 1;
    }
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[s->dtype];
    const unsigned char *K = kvc_segment_key_rows(s);
    if (rk->load == NULL || K == NULL) return 0;
    rk->load(K + i * (size_t)kvc_row_bytes(s->dtype, d), x, d);
    return 1;
}

int kvc_segment_value_load(const kvc_segment *s, size_t dv, size_t i, float *x)
{
    if (s == NULL || x == NULL || i >= s->n || dv < 1 || dv > KVC_MAX_HEAD_DIM || s->dtype >= KVC_DTYPE_COUNT) return 0;
    const unsigned t = kvc_segment_value_dtype(s->dtype);
    const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[t];
    const unsigned char *V = kvc_segment_value_rows(s);
    if (rk->load == NULL || V == NULL) return 0;
    rk->load(V + i * (size_t)kvc_row_bytes(t, dv), x, dv);
    return 1;
}
