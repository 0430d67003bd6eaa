// Row kernels for a cache kept on the GPU (one source for nvcc and the CPU
// SIMT runtime):
//  - store_kernel: quantise n f32 rows into the library's row layout (the
//    `store` of kvc_row_kernels, for K/V that a decoder produced on the GPU):
//    f32 copied; f16 rounded to nearest even, odd dims padded with a zero
//    half; int8 with scale = max|x| / 127 (f32) ahead of the codes
//    round(x / scale), half away from zero, padded with zeros to 4 bytes;
//  - pair_gram_kernel: G[i][j] = <a_i - mu, b_j - mu> of two sets of rows,
//    the pair-Gram entries of the balancing and halving walks (dot_rows).
// One warp per row (store) or per pair (Gram); lanes stride the elements.
#ifndef KVC_CUDA_ROWS_KERNELS_CUH
#define KVC_CUDA_ROWS_KERNELS_CUH

#include "attend_split.cuh"

namespace kvc_cuda
{

struct store_args {
    const float *x;     // n rows of dim floats
    unsigned char *dst; // n rows of `stride` bytes
    uint32_t n, dim, dtype, stride;
};

__global__ void __launch_bounds__(kThreads) store_kernel(const store_args a)
{
    const uint32_t lane = threadIdx.x % 32u;
    const uint32_t r = blockIdx.x * kWarps + threadIdx.x / 32u;
    if (r >= a.n) return; // warp-uniform
    const float *x = a.x + (size_t)r * a.dim;
    unsigned char *row = a.dst + (size_t)r * a.stride;
    if (a.dtype == DT_F32) {
        for (uint32_t c = lane; c < a.dim; c += 32u) reinterpret_cast<float *>(row)[c] = x[c];
    } else if (a.dtype == DT_F16) {
        __half *h = reinterpret_cast<__half *>(row);
        for (uint32_t c = lane; c < a.dim; c += 32u) h[c] = __float2half_rn(x[c]);
        if (lane == 0 && a.dim % 2u) h[a.dim] = __float2half_rn(0.0f);
    } else {
        float amax = 0.0f;
        for (uint32_t c = lane; c < a.dim; c += 32u) amax = fmaxf(amax, fabsf(x[c]));
        amax = warp_max(amax);
        const float scale = amax / 127.0f;
        signed char *q = reinterpret_cast<signed char *>(row + 4);
        for (uint32_t c = lane; c < (a.dim + 3u) / 4u * 4u; c += 32u) {
            float t = 0.0f;
            if (c < a.dim && scale > 0.0f) t = fminf(fmaxf(x[c] / scale, -127.0f), 127.0f);
            q[c] = (signed char)(int)roundf(t); // half away from zero, like the reference
        }
        if (lane == 0) *reinterpret_cast<float *>(row) = scale;
    }
}

struct gram_args {
    const unsigned char *a, *b; // na and nb rows of `stride` bytes
    const float *mu;            // dim floats, or null for 0
    float *g;                   // na * nb
    uint32_t na, nb, dim, dtype, stride;
};

template <int DT> __device__ float pair_dot(const gram_args &a, const unsigned char *ra, const unsigned char *rb)
{
    const uint32_t lane = threadIdx.x % 32u;
    const float sa = row_scale<DT>(ra), sb = row_scale<DT>(rb);
    float s = 0.0f;
    for (uint32_t c = lane; c < a.dim; c += 32u) {
        const float mu = a.mu != nullptr ? a.mu[c] : 0.0f;
        s += (sa * elem<DT>(ra, c, a.dim) - mu) * (sb * elem<DT>(rb, c, a.dim) - mu);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(kFull, s, o);
    return s; // lane 0 holds the sum
}

// grid (ceil(nb / 4), na): warp w of block (x, i) computes G[i][4x + w]
__global__ void __launch_bounds__(kThreads) pair_gram_kernel(const gram_args a)
{
    const uint32_t i = blockIdx.y, j = blockIdx.x * kWarps + threadIdx.x / 32u;
    if (j >= a.nb) return; // warp-uniform
    const unsigned char *ra = a.a + (size_t)i * a.stride, *rb = a.b + (size_t)j * a.stride;
    float s;
    if (a.dtype == DT_F32)
        s = pair_dot<DT_F32>(a, ra, rb);
    else if (a.dtype == DT_F16)
        s = pair_dot<DT_F16>(a, ra, rb);
    else
        s = pair_dot<DT_I8>(a, ra, rb);
    if (threadIdx.x % 32u == 0) a.g[(size_t)i * a.nb + j] = s;
}

} // namespace kvc_cuda

#endif
