#ifndef KVC_APP_TRACE_H
#define KVC_APP_TRACE_H
#include <stddef.h>

/** One head of a trace: q (n x d), k (n x d), v (n x dv), owned. */
typedef struct kvc_trace {
    size_t n, d, dv;
    float *q, *k, *v;
} kvc_trace;

/**
 * @brief Load DIR/{q,k,v}.npy. 2-d arrays are (n, d); 3-d are (heads, n, d),
 *        from which query head @p head is taken and the kv head it maps to
 *        (head * kv_heads / q_heads, grouped-query attention).
 * @return 0, or 1 after printing a clear message to stderr.
 */
int kvc_trace_load(const char *dir, size_t head, kvc_trace *tr);
void kvc_trace_free(kvc_trace *tr);
#endif
