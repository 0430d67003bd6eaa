/* libFuzzer target: the GGUF byte-level BPE tokenizer (apps/llama/bpe.c).
 * An input whose first byte is even is text for two synthetic vocabularies
 * (tests/kvc_gguf_writer.h: every byte value a token, and SmolLM2's, which
 * lacks 21 of them); an odd first byte makes the rest a GGUF file, loaded as
 * a tokenizer and asked to encode fixed texts. Asserted (abort() = a finding):
 *  - an encode either succeeds and decode(encode(x)) == x byte for byte, or
 *    says KVC_BPE_E_BYTE at an offset whose byte, encoded alone, is refused
 *    too (a vocabulary without that byte), and never where every byte has a
 *    token;
 *  - a short id buffer gives KVC_BPE_E_CAP, never a write past it (ASan);
 *  - a hostile GGUF gives NULL with a message, or a tokenizer that obeys the
 *    above.
 * The seed corpus (corpus/bpe, make_bpe_corpus.py) is replayed under ctest. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "kvc_gguf_writer.h"

static void fail(const char *what, int line)
{
    fprintf(stderr, "fuzz_bpe: %s (line %d)\n", what, line);
    abort();
}
#define REQUIRE(c) ((c) ? (void)0 : fail(#c, __LINE__))

/* One text through one tokenizer; `complete`: every byte value has a token. */
static void check_text(const kvc_bpe *t, const char *x, size_t len, int complete)
{
    int *ids = malloc((len + 1) * sizeof(int));
    char *back = malloc(len + 1);
    if (!ids || !back) {
        free(ids), free(back);
        return;
    }
    size_t bad = (size_t)-1;
    const int n = kvc_bpe_encode_n(t, x, len, ids, (int)len + 1, &bad);
    REQUIRE(n >= 0 || n == KVC_BPE_E_BYTE); /* at most one id per byte: the buffer is never short */
    if (n >= 0) {
        const int cap = kvc_bpe_max_token_bytes(t) + 1;
        char *piece = malloc((size_t)cap + 1);
        size_t at = 0;
        REQUIRE(piece != NULL);
        for (int i = 0; i < n; i++) {
            const int l = kvc_bpe_decode(t, ids[i], piece, cap + 1);
            REQUIRE(l > 0 && at + (size_t)l <= len);
            memcpy(back + at, piece, (size_t)l);
            at += (size_t)l;
        }
        REQUIRE(at == len && memcmp(back, x, len) == 0); /* lossless */
        free(piece);
        if (n > 0) { /* one id short: refused, nothing written past */
            int *few = malloc((size_t)(n - 1) * sizeof(int) + 1);
            REQUIRE(kvc_bpe_encode_n(t, x, len, few, n - 1, NULL) == KVC_BPE_E_CAP);
            free(few);
        }
    } else {
        REQUIRE(!complete);
        REQUIRE(bad < len);
        int one[2];
        size_t bad1 = (size_t)-1;
        REQUIRE(kvc_bpe_encode_n(t, x + bad, 1, one, 2, &bad1) == KVC_BPE_E_BYTE && bad1 == 0);
    }
    free(ids), free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kvc_bpe *full, *gaps;
    char err[256];
    if (!full) {
        unsigned char missing[256] = {0};
        for (size_t i = 0; i < sizeof kvc_gw_smollm2_missing_bytes; i++) missing[kvc_gw_smollm2_missing_bytes[i]] = 1;
        size_t n1 = 0, n2 = 0;
        uint8_t *g1 = kvc_gw_tokenizer(NULL, kvc_gw_merges, KVC_GW_N_MERGES, &n1);
        uint8_t *g2 = kvc_gw_tokenizer(missing, kvc_gw_merges, KVC_GW_N_MERGES, &n2);
        REQUIRE(g1 && g2);
        full = kvc_bpe_load_buffer(g1, n1, "full", err, sizeof err);
        gaps = kvc_bpe_load_buffer(g2, n2, "gaps", err, sizeof err);
        REQUIRE(full && gaps);
        free(g1), free(g2);
    }
    if (size == 0) return 0;
    if ((data[0] & 1) == 0) {
        check_text(full, (const char *)data + 1, size - 1, 1);
        check_text(gaps, (const char *)data + 1, size - 1, 0);
        return 0;
    }
    err[0] = 0;
    kvc_bpe *t = kvc_bpe_load_buffer(data + 1, size - 1, "input", err, sizeof err);
    if (!t) {
        REQUIRE(err[0] != 0); /* refused with a message */
        return 0;
    }
    static const char *const texts[] = {"Hello, world! The cat's 3 hats.", "  spaces\t\nand\r\nlines  ",
                                        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "\xff\x00\x01 a"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        check_text(t, texts[i], i == 3 ? 5 : strlen(texts[i]), 0);
    kvc_bpe_free(t);
    return 0;
}
