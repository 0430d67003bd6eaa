/* The benchmarks' OpenBLAS peer: exact attention of a few query heads over n
 * f32 rows as a BLAS user writes it (scores by sgemm, a softmax loop, the
 * output by sgemm), with Debian's libopenblas loaded at run time (dlopen), so
 * that neither the library nor its tests depend on it. */
#ifndef KVC_OPENBLAS_PEER_H
#define KVC_OPENBLAS_PEER_H

#include <stddef.h>

/** Load OpenBLAS ($KVC_OPENBLAS, else libopenblas.so.0 from the loader's path
 *  or Debian's openblas-pthread / openblas-openmp folders). NULL on success,
 *  else why not (a sentence). */
const char *kvc_openblas_load(void);

/** Threads OpenBLAS may use (after a successful load). */
void kvc_openblas_threads(int n);

/**
 * @brief out[h] = softmax(beta K q_h) V for h < nq: K, V n x d row-major f32.
 * @param scores  n * nq floats of scratch.
 */
void kvc_openblas_attend(const float *K, const float *V, size_t n, size_t d, const float *q, size_t nq, float beta,
                         float *scores, float *out);
#endif
