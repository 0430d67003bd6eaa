/* The GGUF byte-level BPE tokenizer (apps/llama/bpe.c) on synthetic
 * vocabularies (tests/kvc_gguf_writer.h): every byte string either encodes
 * losslessly, decode(encode(x)) == x, or is refused naming the first byte the
 * vocabulary has no token for. Regressions of issue 27: a pre-token over
 * 1,000 bytes lost its tail; a byte without a token became token 0
 * (<|endoftext|>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "kvc_gguf_writer.h"
#include "kvc_test.h"

static kvc_bpe *load(int smollm2_gaps)
{
    unsigned char missing[256] = {0};
    if (smollm2_gaps)
        for (size_t i = 0; i < sizeof kvc_gw_smollm2_missing_bytes; i++) missing[kvc_gw_smollm2_missing_bytes[i]] = 1;
    size_t n;
    uint8_t *g = kvc_gw_tokenizer(missing, kvc_gw_merges, KVC_GW_N_MERGES, &n);
    char err[256];
    kvc_bpe *t = g ? kvc_bpe_load_buffer(g, n, "synthetic", err, sizeof err) : NULL;
    if (!t) fprintf(stderr, "load: %s\n", g ? err : "out of memory");
    free(g);
    return t;
}

/* Encode, decode every id and compare with the input; returns the count, or the encoder's error. */
static int round_trip(const kvc_bpe *t, const char *x, size_t len, size_t *bad, int *same)
{
    int *ids = malloc((len + 1) * sizeof(int));
    char *back = malloc(len + 1), piece[512];
    int n = ids && back ? kvc_bpe_encode_n(t, x, len, ids, (int)len + 1, bad) : -3;
    size_t at = 0;
    *same = 0;
    if (n >= 0) {
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            const int l = kvc_bpe_decode(t, ids[i], piece, sizeof piece);
            ok = l > 0 && at + (size_t)l <= len;
            if (ok) memcpy(back + at, piece, (size_t)l), at += (size_t)l;
        }
        *same = ok && at == len && memcmp(back, x, len) == 0;
    }
    free(ids), free(back);
    return n;
}

static int long_pretoken_lossless(void)
{
    kvc_bpe *t = load(0);
    CHECK(t != NULL);
    const size_t len = 5000 + 8;
    char *x = malloc(len);
    CHECK(x != NULL);
    memset(x, 'a', 5000); /* one pre-token of 5,000 letters */
    memcpy(x + 5000, " the end", 8);
    size_t bad = 0;
    int same;
    const int n = round_trip(t, x, len, &bad, &same);
    printf("5,008 bytes (a 5,000-byte pre-token): %d ids, round trip %s\n", n, same ? "equal" : "DIFFERENT");
    CHECK_MSG(n > 0 && same, "every byte of a long pre-token is encoded");
    free(x);
    kvc_bpe_free(t);
    return 0;
}

static int every_byte_or_refused(void)
{
    kvc_bpe *full = load(0), *gaps = load(1);
    CHECK(full != NULL && gaps != NULL);
    char all[256];
    for (int b = 0; b < 256; b++) all[b] = (char)b;
    size_t bad = 0;
    int same;
    CHECK_MSG(round_trip(full, all, 256, &bad, &same) > 0 && same, "all 256 byte values, NUL included, round trip");
    /* the SmolLM2 gaps: refused at the byte, never token 0 */
    const char stray[] = "Hello \xff world";
    CHECK(round_trip(gaps, stray, sizeof stray - 1, &bad, &same) == KVC_BPE_E_BYTE && bad == 6);
    const char u40000[] = "ok \xf1\x80\x80\x80 U+40000"; /* a valid 4-byte character whose lead byte has no token */
    CHECK(round_trip(gaps, u40000, sizeof u40000 - 1, &bad, &same) == KVC_BPE_E_BYTE && bad == 3);
    for (size_t i = 0; i < sizeof kvc_gw_smollm2_missing_bytes; i++) {
        const char one[3] = {'a', (char)kvc_gw_smollm2_missing_bytes[i], 'b'};
        CHECK_MSG(round_trip(gaps, one, 3, &bad, &same) == KVC_BPE_E_BYTE && bad == 1, "byte 0x%02x refused at 1",
                  kvc_gw_smollm2_missing_bytes[i]);
    }
    /* every other byte still round trips in that vocabulary */
    char rest[256];
    size_t n = 0;
    for (int b = 0; b < 256; b++)
        if (!memchr(kvc_gw_smollm2_missing_bytes, b, sizeof kvc_gw_smollm2_missing_bytes)) rest[n++] = (char)b;
    CHECK(round_trip(gaps, rest, n, &bad, &same) > 0 && same);
    printf("256 byte values round trip; the 21 SmolLM2 gaps are refused at their offset; the other %zu bytes round "
           "trip there\n",
           n);
    kvc_bpe_free(full), kvc_bpe_free(gaps);
    return 0;
}

static int merges_apply(void)
{
    kvc_bpe *t = load(0);
    CHECK(t != NULL);
    int ids[16];
    const int n = kvc_bpe_encode(t, " the", ids, 16);
    char piece[64];
    CHECK(n == 1 && kvc_bpe_decode(t, ids[0], piece, sizeof piece) == 4 && memcmp(piece, " the", 4) == 0);
    CHECK(kvc_bpe_encode(t, " the", ids, 0) == KVC_BPE_E_CAP);
    printf("' the' is one token after 3 merges; a short id buffer gives KVC_BPE_E_CAP\n");
    kvc_bpe_free(t);
    return 0;
}

static const kvc_test_case cases[] = {{"long_pretoken_lossless", long_pretoken_lossless},
                                      {"every_byte_or_refused", every_byte_or_refused},
                                      {"merges_apply", merges_apply}};
KVC_TEST_MAIN(cases)
