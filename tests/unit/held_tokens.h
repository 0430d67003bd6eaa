/* Which tokens a method holds, read back from a stream's view: the rows of
 * the method's own segments (after the exact ones) mapped to the appended
 * token whose f32 key has the same bits. For the tests of the selection
 * methods (h2o, tova, snapkv), f32 storage and distinct keys only. */
#ifndef KVC_TEST_HELD_TOKENS_H
#define KVC_TEST_HELD_TOKENS_H

#include <stdint.h>
#include <string.h>

#include "kvc/kvc.h"

/* The token of a row: the one of the n appended keys (d floats each) with its bits. */
static size_t ht_token_of_key(const float *k, size_t d, const float *row, size_t n)
{
    for (size_t t = 0; t < n; t++)
        if (memcmp(k + t * d, row, d * sizeof(float)) == 0) return t;
    return SIZE_MAX;
}

/* The tokens of the method's rows into out (room for all); SIZE_MAX for a bad stream. */
static size_t ht_method_tokens(const kvc_stream *st, const float *k, size_t d, size_t n_seen, size_t *out)
{
    kvc_view v;
    if (kvc_stream_view(st, &v) != KVC_OK) return SIZE_MAX;
    size_t m = 0;
    for (size_t s = KVC_STREAM_EXACT_SEGMENTS; s < v.n_seg; s++)
        for (size_t i = 0; i < v.seg[s].n; i++) out[m++] = ht_token_of_key(k, d, v.seg[s].keys + i * d, n_seen);
    return m;
}

/* 1 when a[0..na) and b[0..nb) hold the same tokens (no repeats). */
static int ht_same_set(const size_t *a, size_t na, const size_t *b, size_t nb)
{
    if (na != nb) return 0;
    for (size_t i = 0; i < na; i++) {
        size_t j = 0;
        while (j < nb && b[j] != a[i]) j++;
        if (j == nb) return 0;
    }
    return 1;
}
#endif
