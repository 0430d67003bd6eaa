/* OpenBLAS peer (see openblas_peer.h). */
#define _POSIX_C_SOURCE 200809L
#include "openblas_peer.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>

/* CBLAS enums (cblas.h values, fixed by the standard interface) */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*set_threads_fn)(int n);

static sgemm_fn g_sgemm;
static set_threads_fn g_set_threads;

const char *kvc_openblas_load(void)
{
    if (g_sgemm) return NULL;
    const char *env = getenv("KVC_OPENBLAS");
    const char *cands[] = {env,
                           "libopenblas.so.0",
                           "libopenblas.so",
                           "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                           "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
                           "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !h; i++)
        if (cands[i]) h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return "OpenBLAS not found (apt-get install libopenblas0-pthread, or set KVC_OPENBLAS to its path)";
    void *s = dlsym(h, "cblas_sgemm"), *t = dlsym(h, "openblas_set_num_threads");
    if (!s || !t) return "the OpenBLAS found lacks cblas_sgemm or openblas_set_num_threads";
    /* object pointer to function pointer: POSIX guarantees dlsym's result converts */
    *(void **)&g_sgemm = s;
    *(void **)&g_set_threads = t;
    return NULL;
}

void kvc_openblas_threads(int n)
{
    if (g_set_threads) g_set_threads(n);
}

void kvc_openblas_attend(const float *K, const float *V, size_t n, size_t d, const float *q, size_t nq, float beta,
                         float *scores, float *out)
{
    /* S (n x nq) = beta K Q^T */
    g_sgemm(ROW_MAJOR, NO_TRANS, TRANS, (int)n, (int)nq, (int)d, beta, K, (int)d, q, (int)d, 0.0f, scores, (int)nq);
    for (size_t h = 0; h < nq; h++) { /* softmax of column h, in place */
        float m = -INFINITY, sum = 0.0f;
        for (size_t i = 0; i < n; i++) m = fmaxf(m, scores[i * nq + h]);
        for (size_t i = 0; i < n; i++) sum += scores[i * nq + h] = expf(scores[i * nq + h] - m);
        const float inv = 1.0f / sum;
        for (size_t i = 0; i < n; i++) scores[i * nq + h] *= inv;
    }
    /* O (nq x d) = P^T V */
    g_sgemm(ROW_MAJOR, TRANS, NO_TRANS, (int)nq, (int)d, (int)n, 1.0f, scores, (int)nq, V, (int)d, 0.0f, out, (int)d);
}
