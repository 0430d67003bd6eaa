/**
 * @file kvc_cuda.h
 * @brief The CUDA kernel table and the device entry points behind it.
 *
 * Residency model (the minimal one; see accel/cuda/README.md):
 *  - **Rows live where the GPU reads them.** Every key, value and weight
 *    pointer of a kvc_view given to these functions must be readable by the
 *    device: memory from kvc_cuda_alloc_shared (CUDA managed memory, which
 *    the library's host code also reads and writes: the cache's bookkeeping,
 *    stores, method decisions), or from cudaMalloc for the device-only entry
 *    points (kvc_cuda_store_rows, kvc_cuda_pair_gram, kvc_cuda_attend's rows).
 *  - **The caller owns all memory** (the arena, the rows); the table owns
 *    only a small device scratch (queries, per-block partial states, outputs),
 *    grown on demand and kept until kvc_cuda_release.
 *  - **Queries and results are host memory.** q, out, state and mass of a
 *    kvc_attend_batch are copied to and from the device inside the call,
 *    which returns when the results are in place (the calls are synchronous
 *    on the stream they are given; the table uses the default stream).
 *  - **Views are rebuilt by the core at every call** (kvc_stream/kvc_cache
 *    fill a kvc_view from the arena): there is nothing to invalidate when a
 *    method evicts or merges rows.
 * Storage types on the GPU: f32, f16 and int8. Q15 and int4 are not in the
 * table (kvc_kernels_support says so; the core answers KVC_E_UNSUPPORTED).
 *
 * Built two ways from the same sources: with nvcc for a GPU (CMake option
 * KVC_CUDA_GPU), and as C++ against the CPU SIMT runtime (accel/cuda/simt),
 * which is how CI executes the kernels on machines without a GPU.
 */
#ifndef KVC_CUDA_H
#define KVC_CUDA_H

#if !defined(KVC_ADVANCED)
#error                                                                                                                 \
    "kvc_cuda.h is a backend's header, in the advanced tier: #define KVC_ADVANCED before including kvc headers (docs/api.md)"
#endif
#include "kvc/kvc_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The CUDA kernel table ("cuda"): host row kernels of the reference,
 *  the batched attend (causal block, mass, split-K state) on the device.
 *  @return the table, or NULL when no CUDA device can be used. */
const kvc_kernels *kvc_kernels_cuda(void);

/** @brief 1 when this build runs its kernels on the CPU SIMT runtime (no GPU). */
int kvc_cuda_is_cpu_runtime(void);

/** @brief Memory both the host and the device read and write (CUDA managed
 *  memory; host memory on the CPU runtime), for arenas the CUDA table reads.
 *  @param bytes 1 .. the device's free memory. @return NULL on failure. */
void *kvc_cuda_alloc_shared(size_t bytes);
/** @brief Frees what kvc_cuda_alloc_shared returned (NULL allowed). */
void kvc_cuda_free_shared(void *p);

/** @brief Frees the table's device scratch (the next call grows it again). */
void kvc_cuda_release(void);

/** @brief What one kvc_cuda_attend call did (for tests and benchmarks). */
typedef struct kvc_cuda_attend_info {
    uint32_t n_blocks;        /**< split-K blocks of one launch */
    uint32_t tiles_per_block; /**< 128-entry tiles per block */
    uint32_t launches;        /**< query-row groups of at most 8 (each one split + merge) */
    uint64_t included;        /**< entries with weight > 0 the blocks scored, summed over groups */
} kvc_cuda_attend_info;

/**
 * @brief The batched weighted attend of kvc_kernels.h on the device
 *        (kvc_k_attend_batch__ref's semantics, in f32 arithmetic).
 * @param view rows device-readable; segments of types f32, f16 or int8.
 * @param b q/out/state/mass in host memory, as kvc_attend_batch documents.
 * @param tiles_per_block 128-entry tiles per split-K block, 0 for automatic
 *        (about 4 blocks per multiprocessor); 1 .. 65536 otherwise.
 * @param stream a cudaStream_t, or NULL for the default stream.
 * @param info NULL, or receives what the call did.
 * @return KVC_OK; KVC_E_ARG for arguments kvc_k_attend_batch__ref refuses;
 *         KVC_E_UNSUPPORTED for a storage type not on the GPU; KVC_E_BACKEND
 *         when a CUDA call fails. The sums are f32: a query whose f32
 *         denominator falls below (n + 1) 2^-100 (n entries; only a view with
 *         separate N and D sets, its D entries about 69 below N's largest
 *         score) gets NaN outputs, as does one whose sums overflow; the
 *         "cuda" table (kvc_kernels_cuda) answers such a batch from the
 *         reference instead.
 */
kvc_status kvc_cuda_attend(const kvc_view *view, const kvc_attend_batch *b, uint32_t tiles_per_block, void *stream,
                           kvc_cuda_attend_info *info);

/**
 * @brief The attend for a decoder whose queries and outputs live on the GPU:
 *        asynchronous on @p stream, no host copies, no allocation, no state
 *        or mass (kvc_cuda_attend has those).
 * @param view rows device-readable, as for kvc_cuda_attend.
 * @param q n_pos * n_q rows of view->d floats (device), position-major.
 * @param n_pos 1 .. KVC_MAX_BATCH_POSITIONS. @param n_q 1 .. KVC_MAX_QUERY_HEADS.
 * @param causal_segs as kvc_attend_batch.causal_segs (0: no mask).
 * @param out n_pos * n_q rows of view->dv floats (device).
 * @param tiles_per_block as for kvc_cuda_attend.
 * @param scratch device memory, 256-byte aligned, of
 *        kvc_cuda_attend_device_scratch_bytes(view, n_pos, n_q, tiles_per_block) bytes
 *        (it depends on the view's entry counts: size it for the largest).
 * @return KVC_OK (launched; results ready when the stream is);
 *         KVC_E_ARG, KVC_E_UNSUPPORTED, or KVC_E_BACKEND for a launch error.
 */
kvc_status kvc_cuda_attend_device(const kvc_view *view, const float *q, size_t n_pos, size_t n_q, size_t causal_segs,
                                  float *out, uint32_t tiles_per_block, void *scratch, size_t scratch_bytes,
                                  void *stream);

/** @brief Scratch bytes kvc_cuda_attend_device needs for this view and batch
 *  (0 for arguments it would refuse). */
size_t kvc_cuda_attend_device_scratch_bytes(const kvc_view *view, size_t n_pos, size_t n_q, uint32_t tiles_per_block);

/**
 * @brief Quantises n f32 rows (device memory) into rows of type @p dtype
 *        (device memory, kvc_row_bytes(dtype, dim) bytes each), like the
 *        table's `store`: f16 bit-exact; int8 scale bit-exact and codes equal
 *        except where x/scale is within f32 rounding of a half.
 * @param dtype KVC_DTYPE_F32, _F16 or _I8. @param n 0 .. 2^31. @param dim 1 .. 256.
 * @return KVC_OK, KVC_E_ARG, KVC_E_UNSUPPORTED or KVC_E_BACKEND.
 */
kvc_status kvc_cuda_store_rows(unsigned dtype, void *dst, const float *x, size_t n, size_t dim, void *stream);

/**
 * @brief The pair-Gram block G[i][j] = <a_i - mu, b_j - mu> (row-major, f32)
 *        of na rows a and nb rows b of type @p dtype, all in device memory;
 *        the dot_rows entries of the balancing and halving walks.
 * @param mu dim floats (device), or NULL for 0. @param na, nb 0 .. 65535.
 * @return KVC_OK, KVC_E_ARG, KVC_E_UNSUPPORTED or KVC_E_BACKEND.
 */
kvc_status kvc_cuda_pair_gram(unsigned dtype, const void *a, size_t na, const void *b, size_t nb, size_t dim,
                              const float *mu, float *g, void *stream);

#ifdef __cplusplus
}
#endif

#endif
