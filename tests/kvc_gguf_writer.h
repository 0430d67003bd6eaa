/* A GGUF writer for tests: a byte-level BPE tokenizer (GPT-2's
 * bytes_to_unicode token strings) in memory, for the tokenizer's unit test
 * and its fuzz target. Version 3, no tensors. */
#ifndef KVC_GGUF_WRITER_H
#define KVC_GGUF_WRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct kvc_gw {
    uint8_t *p;
    size_t n, cap;
    int failed;
} kvc_gw;

static void kvc_gw_put(kvc_gw *w, const void *src, size_t n)
{
    if (w->failed) return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4096;
        while (cap < w->n + n) cap *= 2;
        uint8_t *q = (uint8_t *)realloc(w->p, cap);
        if (!q) {
            w->failed = 1;
            return;
        }
        w->p = q, w->cap = cap;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}
static void kvc_gw_u32(kvc_gw *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    kvc_gw_put(w, b, 4);
}
static void kvc_gw_u64(kvc_gw *w, uint64_t v)
{
    kvc_gw_u32(w, (uint32_t)v);
    kvc_gw_u32(w, (uint32_t)(v >> 32));
}
static void kvc_gw_str(kvc_gw *w, const char *s, size_t n)
{
    kvc_gw_u64(w, n);
    kvc_gw_put(w, s, n);
}

/* GPT-2's bytes_to_unicode: the code point of byte b, as UTF-8 into o (1-2 bytes). */
static size_t kvc_gw_byte_token(unsigned b, char *o)
{
    unsigned cp = b, k = 0;
    const int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    if (!keep) {
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) return o[0] = (char)cp, 1;
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/**
 * A GPT-2 tokenizer GGUF: token 0 "<|endoftext|>", then one token per byte
 * value not in @p missing (a 256-entry table, 1 = no token for that byte; NULL:
 * every byte), then the merges' results; @p merges are "left right" pairs of
 * byte-level strings (n_merges of them). Returns malloc'd bytes (free them)
 * and their count in *len; NULL when out of memory.
 */
static uint8_t *kvc_gw_tokenizer(const unsigned char *missing, const char *const *merges, size_t n_merges, size_t *len)
{
    kvc_gw w = {0};
    size_t n_tokens = 1;
    for (unsigned b = 0; b < 256; b++) n_tokens += !(missing && missing[b]);
    n_tokens += n_merges;
    kvc_gw_u32(&w, 0x46554747u); /* "GGUF" */
    kvc_gw_u32(&w, 3);
    kvc_gw_u64(&w, 0); /* tensors */
    kvc_gw_u64(&w, 4); /* metadata entries */
    kvc_gw_str(&w, "tokenizer.ggml.model", 20);
    kvc_gw_u32(&w, 8);
    kvc_gw_str(&w, "gpt2", 4);
    kvc_gw_str(&w, "tokenizer.ggml.eos_token_id", 27);
    kvc_gw_u32(&w, 4);
    kvc_gw_u32(&w, 0);
    kvc_gw_str(&w, "tokenizer.ggml.tokens", 21);
    kvc_gw_u32(&w, 9);
    kvc_gw_u32(&w, 8);
    kvc_gw_u64(&w, n_tokens);
    kvc_gw_str(&w, "<|endoftext|>", 13);
    for (unsigned b = 0; b < 256; b++) {
        if (missing && missing[b]) continue;
        char t[2];
        kvc_gw_str(&w, t, kvc_gw_byte_token(b, t));
    }
    for (size_t i = 0; i < n_merges; i++) { /* the merge's result: the pair without its space */
        char t[256];
        size_t k = 0;
        for (const char *c = merges[i]; *c && k < sizeof t; c++)
            if (*c != ' ') t[k++] = *c;
        kvc_gw_str(&w, t, k);
    }
    kvc_gw_str(&w, "tokenizer.ggml.merges", 21);
    kvc_gw_u32(&w, 9);
    kvc_gw_u32(&w, 8);
    kvc_gw_u64(&w, n_merges);
    for (size_t i = 0; i < n_merges; i++) kvc_gw_str(&w, merges[i], strlen(merges[i]));
    if (w.failed) {
        free(w.p);
        return NULL;
    }
    *len = w.n;
    return w.p;
}

/* SmolLM2-135M's vocabulary has no token for these 21 byte values. */
static const unsigned char kvc_gw_smollm2_missing_bytes[21] = {0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, 0xc0,
                                                               0xc1, 0xf1, 0xf2, 0xf5, 0xf6, 0xf7, 0xf8,
                                                               0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff};

/* A few GPT-2 style merges over byte-level strings ("Ġ" is the space). */
static const char *const kvc_gw_merges[] = {"Ġ t", "h e", "Ġt he", "i n",   "a n",       "Ġ a", "e r",
                                            "o n", "Ġ w", "a a",   "aa aa", "aaaa aaaa", "Ã ©", "Ġ Ã©"};
#define KVC_GW_N_MERGES (sizeof kvc_gw_merges / sizeof kvc_gw_merges[0])
#endif
