/**
 * @file attn_exact.h
 * @brief Exact causal attention in float for the benchmarks' full-attention
 *        prefill: a chunk of consecutive tokens, every query head of a layer,
 *        over the k/v rows recorded so far. Not a cache method — a fast
 *        reference the benchmarks use to build the context that each method
 *        then compresses.
 */
#ifndef KVC_ATTN_EXACT_H
#define KVC_ATTN_EXACT_H

#include <stddef.h>

/** Floats of scratch kvc_attn_exact_chunk_f32 needs for @p T queries. */
size_t kvc_attn_exact_work_floats(int T, int n_heads, int hs);

/**
 * @brief Causal attention of T consecutive tokens: token t (position pos0 + t)
 *        gets, for every query head h, softmax_j(beta <q_t[h], K[j, g(h)]>)
 *        V[j, g(h)] over j = 0 .. pos0 + t, where g(h) = h / (n_heads / n_kv)
 *        is the GQA kv head of h.
 * @param Q        T rows (stride @p q_stride) of n_heads * hs floats.
 * @param K,V      pos0 + T rows; row j starts at K + j*row_stride, kv head g at + g*hs.
 * @param hs       head size 1 .. 256 (multiples of 16 take the vector path).
 * @param work     kvc_attn_exact_work_floats(T, n_heads, hs) floats.
 * @param outs     T pointers to n_heads * hs floats each.
 * Keys are visited in blocks of 64 with an online softmax (running maximum
 * and sum per query), so each block's rows are read once for all T tokens.
 * Lane sums run in a fixed order with contraction off, so every
 * instruction-set clone gives the same bits.
 */
void kvc_attn_exact_chunk_f32(const float *Q, size_t q_stride, int T, size_t pos0, int n_heads, int n_kv, int hs,
                              const float *K, const float *V, size_t row_stride, float beta, float *work,
                              float *const *outs);
#endif
