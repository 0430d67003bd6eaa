/**
 * @file kvc_offline.h
 * @brief Offline compression of a prompt's keys and values held by the
 *        caller (advanced tier): BalanceKV as its authors' code runs it
 *        (ksheth96/BalanceKV, `balanced_walk`; docs/methods.md "BalanceKV
 *        offline"). The streaming methods bound their memory while tokens
 *        arrive; this form sees the whole prompt at once, as a prefill does,
 *        and needs scratch proportional to it (caller memory, freed after).
 */
#ifndef KVC_OFFLINE_H
#define KVC_OFFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Parameters of kvc_balancekv_offline; 0 means the authors' value. */
typedef struct kvc_balancekv_offline_params {
    uint32_t rounds;   /**< T halvings, 1 .. 16: about n / 2^T tokens survive (no default: required) */
    uint32_t block;    /**< tokens per walk, 2 .. 4096; 0 -> 256 */
    float gamma;       /**< sign step: p = 1/2 - gamma a, > 0; 0 -> 4 */
    float temperature; /**< the walk's kernel uses e^{temperature <k, k'> / sqrt(d)}, > 0; 0 -> 0.1 */
    float kappa;       /**< value kernel <w v, w' v'> + kappa + 1e-8, >= 0; 0 -> 0.025 */
} kvc_balancekv_offline_params;

/** Scratch bytes kvc_balancekv_offline needs for @p n tokens of dimensions d, dv
 *  walked in blocks of @p block tokens (0 -> 256); 0 for sizes out of range. */
size_t kvc_balancekv_offline_work_bytes(size_t n, size_t d, size_t dv, size_t block);

/**
 * @brief Compress @p n tokens to about n / 2^T weighted tokens. Each round
 *        walks the survivors in blocks (keys centred on the block's mean,
 *        zero rows padding the last block), one sign per token: s_0 = +1,
 *        then s_i = +1 with probability 1/2 - gamma sum_{j<i} K_ij s_j,
 *        K_ij = e^{temperature <kbar_i, kbar_j> / sqrt(d)} (<w_i v_i, w_j v_j>
 *        + kappa + 1e-8). The signs of all blocks, in order, then make one
 *        split: at the first index c where a sign class reaches floor(m/2),
 *        that class's tokens up to c are dropped, the other class's tokens up
 *        to c survive with weight 2, and the tokens after c follow with
 *        weight 1 until floor(m/2) survive (the authors' stable sort by
 *        weight); weights multiply over the rounds, and survivors are
 *        re-blocked in that order.
 * @param keys, values  n rows of d (dv) finite floats.
 * @param n       2^T .. 2^24 tokens.
 * @param d, dv   1 .. KVC_MAX_HEAD_DIM.
 * @param prm     rounds required; the rest 0 for the authors' values.
 * @param seed    the walk's random stream (same seed, same input: same output).
 * @param work    kvc_balancekv_offline_work_bytes(n, d, dv, prm->block) bytes, 8-aligned.
 * @param kept    n entries: receives the survivors' token indices (in the last round's order).
 * @param weight  n entries: receives their weights (a survivor stands for that many tokens).
 * @param n_kept  receives the number of survivors (floor halvings of n).
 * @return KVC_OK; KVC_E_ARG for NULL pointers, sizes or parameters out of
 *         range; KVC_E_ARENA for short or misaligned scratch;
 *         KVC_E_NONFINITE for a non-finite input. Nothing is written on error.
 *         Read the survivors self-normalised: sum w e^{s} v / sum w e^{s}.
 */
kvc_status kvc_balancekv_offline(const float *keys, const float *values, size_t n, size_t d, size_t dv,
                                 const kvc_balancekv_offline_params *prm, uint64_t seed, void *work, size_t work_bytes,
                                 uint32_t *kept, float *weight, size_t *n_kept);

#ifdef __cplusplus
}
#endif
#endif /* KVC_OFFLINE_H */
