/* Fuzz target: llama2.c tokenizer parser, then encode/decode with it. The
 * first input byte picks the vocabulary size the model would claim. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "llama2c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    kvc_l2c_tokenizer t;
    char err[128];
    int vocab = 1 + data[0];
    if (kvc_l2c_tokenizer_parse(data + 1, size - 1, vocab, &t, err, sizeof err) != KVC_OK) return 0;
    static const char *texts[] = {"", "a", "Once upon a time", "\xc3\xa9\xe2\x82\xac!", "ab ab ab"};
    int toks[64];
    char bb[2];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int n = kvc_l2c_encode(&t, texts[i], toks);
        for (int j = 1; j < n; j++) {
            if (toks[j] < 0) abort();
            (void)kvc_l2c_decode(&t, toks[j - 1], toks[j], bb);
        }
    }
    kvc_l2c_tokenizer_free(&t);
    return 0;
}
