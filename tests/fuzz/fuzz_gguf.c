/* Fuzz target: GGUF parser. On success every lookup and every supported
 * dequantisation must stay inside the buffer (ASan checks). */
#include <stdint.h>
#include <stdlib.h>

#include "kvc_gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvc_gguf g;
    char err[128];
    if (kvc_gguf_parse(data, size, &g, err, sizeof err) != KVC_OK) return 0;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const kvc_gguf_kv *kv = &g.kv[i];
        if (kv->type == KVC_GGUF_ARRAY && kv->elem_type == KVC_GGUF_STRING && kv->count < 100000) {
            size_t *offs = malloc((size_t)kv->count * sizeof(size_t) + 1),
                   *lens = malloc((size_t)kv->count * sizeof(size_t) + 1);
            if (offs && lens) kvc_gguf_array_strings(&g, kv, offs, lens);
            free(offs), free(lens);
        }
    }
    uint64_t u;
    double f;
    const char *s;
    size_t n;
    kvc_gguf_get_uint(&g, "llama.block_count", &u);
    kvc_gguf_get_float(&g, "llama.rope.freq_base", &f);
    kvc_gguf_get_string(&g, "general.architecture", &s, &n);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        if (g.tensors[i].n_elems > (1u << 20)) continue;
        float *out = malloc((size_t)g.tensors[i].n_elems * sizeof(float));
        if (out) kvc_gguf_dequantize(&g, &g.tensors[i], out);
        free(out);
    }
    kvc_gguf_free(&g);
    return 0;
}
