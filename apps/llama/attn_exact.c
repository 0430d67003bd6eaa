/* Exact causal attention in float (see attn_exact.h). The 16-lane loops
 * vectorise; on x86-64 with GCC the two hot loops are cloned for AVX-512 and
 * AVX2 and picked at load time. The file is compiled with contraction off so
 * that the clones agree bit for bit. */
#include "attn_exact.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KVC_CLONES
#endif

#define LANES 16

/* scores[j] = beta * <q, K_j> for j < n; returns the largest. */
KVC_CLONES static float score_rows(const float *q, const float *K, size_t n, size_t stride, int hs, float beta,
                                   float *scores)
{
    float mx = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        const float *k = K + j * stride;
        float acc[LANES] = {0};
        const int full = hs - hs % LANES;
        for (int i = 0; i < full; i += LANES)
            for (int l = 0; l < LANES; l++) acc[l] += q[i + l] * k[i + l];
        for (int i = full; i < hs; i++) acc[i - full] += q[i] * k[i];
        for (int w = LANES / 2; w > 0; w /= 2) /* fixed pairwise tree */
            for (int l = 0; l < w; l++) acc[l] += acc[l + w];
        const float s = beta * acc[0];
        scores[j] = s;
        if (s > mx) mx = s;
    }
    return mx;
}

/* out = sum_j p[j] V_j (p already exponentiated), then scaled by 1/z. */
KVC_CLONES static void mix_rows(const float *p, const float *V, size_t n, size_t stride, int hs, float inv_z,
                                float *out)
{
    float acc[256];
    for (int i = 0; i < hs; i++) acc[i] = 0.0f;
    for (size_t j = 0; j < n; j++) {
        const float *v = V + j * stride;
        const float w = p[j];
        for (int i = 0; i < hs; i++) acc[i] += w * v[i];
    }
    for (int i = 0; i < hs; i++) out[i] = acc[i] * inv_z;
}

void kvc_attn_exact_f32(const float *q, int n_heads, int n_kv, int hs, const float *K, const float *V, size_t n,
                        size_t row_stride, float beta, float *scores, float *out)
{
    const int group = n_heads / n_kv;
    for (int h = 0; h < n_heads; h++) {
        const int g = h / group;
        const float mx = score_rows(q + (size_t)h * hs, K + (size_t)g * hs, n, row_stride, hs, beta, scores);
        float z = 0.0f;
        for (size_t j = 0; j < n; j++) {
            scores[j] = expf(scores[j] - mx);
            z += scores[j];
        }
        mix_rows(scores, V + (size_t)g * hs, n, row_stride, hs, 1.0f / z, out + (size_t)h * hs);
    }
}
