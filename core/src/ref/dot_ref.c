/* Reference reductions: scalar, accumulated in double (ground truth for every
 * accelerated dot / distance kernel). */
#include "kvc/kvc_kernels.h"
#include "internal/kvc_internal.h"

double kvc_k_dot_f32__ref(const float *a, const float *b, size_t n)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= i <= n;
        loop assigns i, acc;
        loop variant n - i;
    */
    for (size_t i = 0; i < n; i++) acc += (double)a[i] * (double)b[i];
    return acc;
}

double kvc_k_sqdist_f32__ref(const float *a, const float *b, size_t n)
{
    double acc = 0.0;
    /*@ loop invariant 0 <= i <= n;
        loop assigns i, acc;
        loop variant n - i;
    */
    for (size_t i = 0; i < n; i++) {
        double t = (double)a[i] - (double)b[i];
        acc += t * t;
    }
    return acc;
}
