/**
 * @file attn_exact.h
 * @brief Exact causal attention in float for the benchmarks' full-attention
 *        prefill: one token, every query head of a layer, over the k/v rows
 *        recorded so far. Not a cache method — a fast reference the benchmarks
 *        use to build the context that each method then compresses.
 */
#ifndef KVC_ATTN_EXACT_H
#define KVC_ATTN_EXACT_H

#include <stddef.h>

/**
 * @brief out[h] = softmax_j(beta <q[h], K[j, g(h)]>) V[j, g(h)] for j < n, where
 *        g(h) = h / (n_heads / n_kv) is the GQA kv head of query head h.
 * @param q        n_heads rows of hs floats.
 * @param K,V      n rows; row j starts at K + j*row_stride, kv head g at + g*hs.
 * @param n        1 .. any (rows recorded so far, the current one included).
 * @param hs       head size, 1 .. 256.
 * @param scores   scratch of n floats.
 * @param out      n_heads rows of hs floats.
 * Sums run over 16 fixed lanes in a fixed order (contraction off), so every
 * instruction-set clone gives the same bits.
 */
void kvc_attn_exact_f32(const float *q, int n_heads, int n_kv, int hs, const float *K, const float *V, size_t n,
                        size_t row_stride, float beta, float *scores, float *out);
#endif
