/* Exact causal attention in float (see attn_exact.h). Head sizes that are a
 * multiple of 16 run on 16-lane vector values (GCC/Clang vector extensions);
 * on x86-64 with GCC the two hot loops are also cloned for AVX-512 and AVX2
 * and picked at load time. The file is compiled with contraction off so that
 * the clones agree bit for bit. */
#include "attn_exact.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KVC_CLONES
#endif

#define LANES 16

#if defined(__GNUC__)
/* 16 float lanes as one value: AVX-512 makes it one register, AVX2 two, SSE
 * four; the lane arithmetic (and so every bit) is the same on each. */
typedef float v16 __attribute__((vector_size(LANES * sizeof(float))));

/* helpers pass vectors by pointer: vector arguments would depend on the ISA's ABI */
static inline void load16(v16 *r, const float *p) { __builtin_memcpy(r, p, sizeof *r); }

static inline float reduce16(const v16 *a)
{
    float l[LANES];
    __builtin_memcpy(l, a, sizeof l);
    for (int w = LANES / 2; w > 0; w /= 2) /* fixed pairwise tree */
        for (int i = 0; i < w; i++) l[i] += l[i + w];
    return l[0];
}
#endif

#define BLOCK 64 /* keys per block: a block's k/v rows stay in L1/L2 while every query visits them */

/* Dot products of q with rows K_j, j in [j0, j1): sc[j - j0] = beta * <q, K_j>; returns the largest. */
KVC_CLONES static float block_scores(const float *q, const float *K, size_t j0, size_t j1, size_t stride, int hs,
                                     float beta, float *sc)
{
    float mx = -INFINITY;
#if defined(__GNUC__)
    if (hs % LANES == 0) {
        for (size_t j = j0; j < j1; j++) {
            const float *k = K + j * stride;
            v16 acc, kb, qb;
            load16(&kb, k), load16(&qb, q);
            acc = qb * kb;
            for (int b = 1; b < hs / LANES; b++) {
                load16(&kb, k + b * LANES), load16(&qb, q + b * LANES);
                acc += qb * kb;
            }
            const float x = beta * reduce16(&acc);
            sc[j - j0] = x;
            if (x > mx) mx = x;
        }
        return mx;
    }
#endif
    for (size_t j = j0; j < j1; j++) {
        const float *k = K + j * stride;
        float acc = 0.0f;
        for (int i = 0; i < hs; i++) acc += q[i] * k[i];
        const float x = beta * acc;
        sc[j - j0] = x;
        if (x > mx) mx = x;
    }
    return mx;
}

/* acc = acc * r + sum_j p[j - j0] V_j over [j0, j1). */
KVC_CLONES static void block_mix(float *acc, float r, const float *p, const float *V, size_t j0, size_t j1,
                                 size_t stride, int hs)
{
#if defined(__GNUC__)
    if (hs % LANES == 0 && hs <= 256) {
        v16 a[256 / LANES];
        const int nb = hs / LANES;
        for (int b = 0; b < nb; b++) {
            load16(&a[b], acc + b * LANES);
            a[b] *= r;
        }
        for (size_t j = j0; j < j1; j++) {
            const float *v = V + j * stride;
            const float w = p[j - j0];
            for (int b = 0; b < nb; b++) {
                v16 vb;
                load16(&vb, v + b * LANES);
                a[b] += w * vb;
            }
        }
        for (int b = 0; b < nb; b++) __builtin_memcpy(acc + b * LANES, &a[b], sizeof a[b]);
        return;
    }
#endif
    for (int i = 0; i < hs; i++) acc[i] *= r;
    for (size_t j = j0; j < j1; j++)
        for (int i = 0; i < hs; i++) acc[i] += p[j - j0] * V[j * stride + i];
}

size_t kvc_attn_exact_work_floats(int T, int n_heads, int hs)
{
    return (size_t)T * n_heads * ((size_t)hs + 2) + BLOCK;
}

void kvc_attn_exact_chunk_f32(const float *Q, size_t q_stride, int T, size_t pos0, int n_heads, int n_kv, int hs,
                              const float *K, const float *V, size_t row_stride, float beta, float *work,
                              float *const *outs)
{
    const int group = n_heads / n_kv;
    const size_t per = (size_t)hs + 2; /* accumulator, running max, running sum */
    float *sc = work + (size_t)T * n_heads * per;
    for (size_t i = 0; i < (size_t)T * n_heads; i++) {
        float *a = work + i * per;
        for (int d = 0; d < hs; d++) a[d] = 0.0f;
        a[hs] = -INFINITY, a[hs + 1] = 0.0f;
    }
    const size_t n = pos0 + (size_t)T; /* keys 0 .. n-1; query t sees 0 .. pos0 + t */
    for (size_t j0 = 0; j0 < n; j0 += BLOCK) {
        const size_t j1 = j0 + BLOCK < n ? j0 + BLOCK : n;
        for (int g = 0; g < n_kv; g++) {
            const float *Kg = K + (size_t)g * hs, *Vg = V + (size_t)g * hs;
            for (int t = 0; t < T; t++) {
                const size_t last = pos0 + (size_t)t + 1;
                if (j0 >= last) continue;
                const size_t e = j1 < last ? j1 : last;
                for (int hh = 0; hh < group; hh++) {
                    const int h = g * group + hh;
                    float *a = work + ((size_t)t * n_heads + h) * per;
                    const float bm = block_scores(Q + (size_t)t * q_stride + (size_t)h * hs, Kg, j0, e, row_stride,
                                                  hs, beta, sc);
                    const float m_new = bm > a[hs] ? bm : a[hs];
                    const float r = a[hs] == -INFINITY ? 0.0f : expf(a[hs] - m_new);
                    float z = 0.0f;
                    for (size_t j = j0; j < e; j++) {
                        sc[j - j0] = expf(sc[j - j0] - m_new);
                        z += sc[j - j0];
                    }
                    block_mix(a, r, sc, Vg, j0, e, row_stride, hs);
                    a[hs] = m_new, a[hs + 1] = a[hs + 1] * r + z;
                }
            }
        }
    }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            const float *a = work + ((size_t)t * n_heads + h) * per;
            const float inv = 1.0f / a[hs + 1];
            for (int d = 0; d < hs; d++) outs[t][(size_t)h * hs + d] = a[d] * inv;
        }
}
