// One warp's tensor-core product D = A B + C of shape m16n8k16: A 16x16 f16
// (row-major fragments), B 16x8 f16 (column-major fragments), C and D 16x8
// f32. On sm_80 and later it is the PTX instruction
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32; on the CPU SIMT runtime
// (and on older GPUs) it is computed from the same per-lane fragments with
// warp shuffles, so a kernel that uses it runs every line in CI.
//
// The fragment layout is the PTX ISA's for this shape (section "Matrix
// Fragments for mma.m16n8k16 with floating point type"). With
// g = lane / 4 and t = lane % 4, each lane holds
//   a[0] = {A[g][2t],   A[g][2t+1]}      a[1] = {A[g+8][2t],   A[g+8][2t+1]}
//   a[2] = {A[g][2t+8], A[g][2t+9]}      a[3] = {A[g+8][2t+8], A[g+8][2t+9]}
//   b[0] = {B[2t][g],   B[2t+1][g]}      b[1] = {B[2t+8][g],   B[2t+9][g]}
//   c[0] = C[g][2t]   c[1] = C[g][2t+1]   c[2] = C[g+8][2t]   c[3] = C[g+8][2t+1]
// (each a and b register packs two f16, the lower column or row in the low
// half). kvc_mma_frag_* below compute these indices once, for the kernel and
// for the tests that load fragments from plain matrices.
#ifndef KVC_CUDA_MMA_F16_CUH
#define KVC_CUDA_MMA_F16_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "kvc_cuda_compat.h"

// Row and column of element e (0..7) of lane's A fragment (register e / 2, half e % 2).
__host__ __device__ inline unsigned kvc_mma_frag_a_row(unsigned lane, unsigned e)
{
    return lane / 4u + (((e / 2u) & 1u) ? 8u : 0u);
}
__host__ __device__ inline unsigned kvc_mma_frag_a_col(unsigned lane, unsigned e)
{
    return (lane % 4u) * 2u + (e & 1u) + (e >= 4u ? 8u : 0u);
}
// Row (k) and column (n) of element e (0..3) of lane's B fragment.
__host__ __device__ inline unsigned kvc_mma_frag_b_row(unsigned lane, unsigned e)
{
    return (lane % 4u) * 2u + (e & 1u) + (e >= 2u ? 8u : 0u);
}
__host__ __device__ inline unsigned kvc_mma_frag_b_col(unsigned lane, unsigned e)
{
    (void)e;
    return lane / 4u;
}
// Row and column of element e (0..3) of lane's C/D fragment.
__host__ __device__ inline unsigned kvc_mma_frag_c_row(unsigned lane, unsigned e)
{
    return lane / 4u + (e >= 2u ? 8u : 0u);
}
__host__ __device__ inline unsigned kvc_mma_frag_c_col(unsigned lane, unsigned e)
{
    return (lane % 4u) * 2u + (e & 1u);
}

// The two f16 of a packed register, as floats (low half first).
__device__ inline float2 kvc_mma_unpack(uint32_t r)
{
    return make_float2(__half2float(__ushort_as_half((unsigned short)(r & 0xffffu))),
                       __half2float(__ushort_as_half((unsigned short)(r >> 16))));
}

// Two f16 packed into one fragment register, @p lo in the low half.
__host__ __device__ inline uint32_t kvc_mma_pack(__half lo, __half hi)
{
    return (uint32_t)__half_as_ushort(lo) | ((uint32_t)__half_as_ushort(hi) << 16);
}

// D = A B + C for the warp; every lane of the warp calls it with its
// fragments (a full warp, converged, as mma.sync requires).
__device__ inline void kvc_mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
#else
    // Lane (g, t) needs rows g and g+8 of A and columns 2t and 2t+1 of B.
    // Row r of A lives in the four lanes 4(r % 8) .. 4(r % 8) + 3 (registers
    // 0 and 2 for r < 8, 1 and 3 above); column n of B in lanes 4n .. 4n + 3.
    // Every lane takes part in every shuffle (mma.sync is warp-wide).
    const unsigned lane = threadIdx.x % 32u, g = lane / 4u, t = lane % 4u;
    float acc[4] = {c[0], c[1], c[2], c[3]};
    for (unsigned src_t = 0; src_t < 4u; src_t++) {
        const unsigned a_lane = g * 4u + src_t;
        // A[g][2s..2s+1], A[g+8][2s..], A[g][2s+8..], A[g+8][2s+8..] from lane (g, s)
        float2 ar[4];
        for (unsigned i = 0; i < 4u; i++) ar[i] = kvc_mma_unpack(__shfl_sync(0xffffffffu, a[i], (int)a_lane));
        for (unsigned j = 0; j < 2u; j++) { // output columns 2t + j
            const unsigned b_lane = (2u * t + j) * 4u + src_t;
            // B[2s..2s+1][n] and B[2s+8..2s+9][n] from lane (n, s)
            const float2 b0 = kvc_mma_unpack(__shfl_sync(0xffffffffu, b[0], (int)b_lane));
            const float2 b1 = kvc_mma_unpack(__shfl_sync(0xffffffffu, b[1], (int)b_lane));
            acc[j] += ar[0].x * b0.x + ar[0].y * b0.y + ar[2].x * b1.x + ar[2].y * b1.y;      // row g
            acc[2u + j] += ar[1].x * b0.x + ar[1].y * b0.y + ar[3].x * b1.x + ar[3].y * b1.y; // row g + 8
        }
    }
    d[0] = acc[0], d[1] = acc[1], d[2] = acc[2], d[3] = acc[3];
#endif
}

#endif // KVC_CUDA_MMA_F16_CUH
