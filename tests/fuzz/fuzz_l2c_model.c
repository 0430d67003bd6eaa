/* Fuzz target: llama2.c checkpoint parser. On success every weight pointer
 * must lie inside the parsed buffer and the model must run one forward step
 * (with a trivial attention hook) without touching memory out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "llama2c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kvc_status copy_v(void *ctx, int layer, int pos, const float *q, const float *k, const float *v, float *out)
{
    const kvc_l2c_config *c = (const kvc_l2c_config *)ctx;
    const int hs = c->dim / c->n_heads, group = c->n_heads / c->n_kv_heads;
    (void)layer, (void)pos, (void)q, (void)k;
    for (int h = 0; h < c->n_heads; h++) memcpy(out + h * hs, v + (h / group) * hs, (size_t)hs * sizeof(float));
    return KVC_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvc_l2c_model m;
    char err[128];
    if (kvc_l2c_model_parse(data, size, &m, err, sizeof err) != KVC_OK) return 0;
    /* keep the forward pass cheap: only small models are run */
    if ((size_t)m.n_floats < (1u << 16)) {
        kvc_l2c_state s;
        if (kvc_l2c_state_alloc(&m.cfg, &s) == KVC_OK) {
            kvc_l2c_forward(&m, &s, 0, 0, copy_v, &m.cfg);
            kvc_l2c_state_free(&s);
        }
    }
    kvc_l2c_model_free(&m);
    return 0;
}
