/* Quantised-panel products: packing and the scalar path (see gemm_quant.h). */
#include "gemm_quant.h"

#include <string.h>

#include "gemm.h"
#include "kvc_npy.h"

#define P KVC_GEMM_PANEL

size_t kvc_qpanel_block_bytes(int type)
{
    return type == KVC_QPANEL_Q4_1 ? 2 * P * 4 + 32 * P / 2 : type == KVC_QPANEL_Q8_0 ? P * 4 + 32 * P : 0;
}

size_t kvc_qpanel_bytes(int type, size_t rows, size_t cols)
{
    return (rows + P - 1) / P * (cols / 32) * kvc_qpanel_block_bytes(type);
}

/* The GGUF reader's half conversion (apps/io), so that d and m are its values. */
static float half_to_float(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return kvc_half_to_float(h);
}

void kvc_qpanel_pack(int type, const uint8_t *const *row_blocks, size_t rows, size_t cols, uint8_t *dst)
{
    const size_t nb = cols / 32, bb = kvc_qpanel_block_bytes(type), panels = (rows + P - 1) / P;
    memset(dst, 0, kvc_qpanel_bytes(type, rows, cols));
    for (size_t p = 0; p < panels; p++)
        for (size_t b = 0; b < nb; b++) {
            uint8_t *blk = dst + (p * nb + b) * bb;
            for (size_t i = 0; i < P && p * P + i < rows; i++) {
                const uint8_t *src = row_blocks[p * P + i] + b * (type == KVC_QPANEL_Q4_1 ? 20 : 34);
                const float d = half_to_float(src);
                memcpy(blk + 4 * i, &d, 4);
                if (type == KVC_QPANEL_Q4_1) {
                    const float m = half_to_float(src + 2);
                    memcpy(blk + 4 * (P + i), &m, 4);
                    uint8_t *q = blk + 8 * P;
                    for (size_t j = 0; j < 32; j++) { /* element j: low nibbles 0..15, high 16..31 */
                        const unsigned v = j < 16 ? src[4 + j] & 15u : src[4 + j - 16] >> 4;
                        q[j * 8 + i % 8] |= (uint8_t)(i < 8 ? v : v << 4);
                    }
                } else {
                    int8_t *q = (int8_t *)(blk + 4 * P);
                    for (size_t j = 0; j < 32; j++) q[j * P + i] = (int8_t)src[2 + j];
                }
            }
        }
}

/* Weight (row i, column j of the block) as the GGUF reader dequantises it. */
static inline float weight(int type, const uint8_t *blk, size_t i, size_t j)
{
    float d;
    memcpy(&d, blk + 4 * i, 4);
    if (type == KVC_QPANEL_Q4_1) {
        float m;
        memcpy(&m, blk + 4 * (P + i), 4);
        const uint8_t b = blk[8 * P + j * 8 + i % 8];
        return d * (float)(i < 8 ? b & 15u : b >> 4) + m;
    }
    return d * (float)((const int8_t *)(blk + 4 * P))[j * P + i];
}

/* As kvc_gemm__scalar: P sums per token over j in order, a multiply and an add. */
void kvc_gemm_q__scalar(int type, const uint8_t *panels, size_t rows, size_t cols, const float *x, size_t ldx, size_t n,
                        float *y, size_t ldy)
{
    const size_t nb = cols / 32, bb = kvc_qpanel_block_bytes(type), np = (rows + P - 1) / P;
    for (size_t p = 0; p < np; p++) {
        const size_t live = rows - p * P < P ? rows - p * P : P;
        for (size_t t = 0; t < n; t++) {
            float acc[P] = {0};
            const float *xt = x + t * ldx;
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = panels + (p * nb + b) * bb;
                for (size_t j = 0; j < 32; j++) {
                    const float xj = xt[b * 32 + j];
                    for (size_t i = 0; i < P; i++) acc[i] += weight(type, blk, i, j) * xj;
                }
            }
            memcpy(y + t * ldy + p * P, acc, live * sizeof(float));
        }
    }
}
