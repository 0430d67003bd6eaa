/* libFuzzer target: the Llama GGUF model loader (apps/llama/llama_gguf.c:
 * metadata, tensor table, shapes, dequantisation, packing) through to the
 * first forward pass, on tiny synthetic models (corpus/gguf_model,
 * make_gguf_model_corpus.py) and what the fuzzer makes of them. Asserted
 * (abort() = a finding):
 *  - a file is refused with a message, or loads (a NaN or Inf weight is
 *    refused: corpus/gguf_model/bad_nan_weight.gguf, cli.gguf_loader_refuses);
 *  - a loaded model's forward step on an exact cache gives KVC_OK with every
 *    logit finite, or KVC_E_RANGE naming a layer (or the logits) and the
 *    position: never a NaN logit handed out;
 *  - no crash, leak or undefined behaviour on the way (ASan/UBSan).
 * The tokenizer in the same file, when there is one, is loaded too and must
 * encode a fixed text losslessly or refuse a byte by its offset. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "kvc/kvc.h"
#include "llama2c.h"

static void fail(const char *what, int line)
{
    fprintf(stderr, "fuzz_gguf_model: %s (line %d)\n", what, line);
    abort();
}
#define REQUIRE(c) ((c) ? (void)0 : fail(#c, __LINE__))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    kvc_l2c_model m;
    if (kvc_gguf_llama_load_buffer(data, size, "input", &m, err, sizeof err) != KVC_OK) {
        REQUIRE(err[0] != 0);
        return 0;
    }
    const kvc_l2c_config *c = &m.cfg;
    /* keep each input fast: the fuzzer grows models, not forward passes */
    if ((uint64_t)c->dim * (uint64_t)c->hidden_dim * (uint64_t)c->n_layers > (1u << 22) ||
        (uint64_t)c->vocab_size * (uint64_t)c->dim > (1u << 22)) {
        kvc_l2c_model_free(&m);
        return 0;
    }
    const int hs = c->dim / c->n_heads;
    kvc_stream_config sc = kvc_stream_config_default(KVC_METHOD_EXACT, (uint32_t)hs, (uint32_t)hs, 4, 1);
    sc.n_sink = 0, sc.n_window = 0;
    kvc_cache_config cc = kvc_l2c_cache_config(c, &sc);
    const size_t bytes = kvc_cache_arena_bytes(&cc);
    void *arena = bytes ? kvc_l2c_arena_alloc(bytes) : NULL;
    kvc_cache *cache = NULL;
    kvc_l2c_state s;
    memset(&s, 0, sizeof s);
    if (arena && kvc_cache_init(arena, bytes, &cc, &cache) == KVC_OK && kvc_l2c_state_alloc(c, &s) == KVC_OK) {
        for (int pos = 0; pos < 2 && pos < c->seq_len; pos++) {
            const int token = (int)(data[size - 1 - (size_t)pos % size] % (unsigned)c->vocab_size);
            const kvc_status st = kvc_l2c_forward(&m, &s, token, pos, kvc_l2c_cache_attention, cache);
            if (st == KVC_E_RANGE) { /* named: a layer or the logits, at this position */
                REQUIRE(s.bad_layer >= 0 && s.bad_layer <= c->n_layers && s.bad_pos == pos);
                break;
            }
            if (st != KVC_OK) fprintf(stderr, "forward at %d: %s\n", pos, kvc_status_str(st));
            REQUIRE(st == KVC_OK);
            REQUIRE(kvc_all_finite(s.logits, (size_t)c->vocab_size));
        }
    }
    kvc_l2c_state_free(&s);
    kvc_l2c_arena_free(arena);
    kvc_bpe *t = kvc_bpe_load_buffer(data, size, "input", err, sizeof err);
    if (t) {
        static const char text[] = "The quick brown fox, 42 times.";
        int ids[64];
        size_t bad = 0;
        const int n = kvc_bpe_encode_n(t, text, sizeof text - 1, ids, 64, &bad);
        REQUIRE(n >= 0 || (n == KVC_BPE_E_BYTE && bad < sizeof text - 1));
        kvc_bpe_free(t);
    }
    kvc_l2c_model_free(&m);
    return 0;
}
