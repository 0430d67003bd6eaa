// One warp loads four 8x8 tiles of 16-bit elements from shared memory into
// the register fragments of the tensor-core products (mma_f16.cuh). On sm_75
// and later it is the PTX instruction ldmatrix.sync.aligned.m8n8.x4(.trans)
// .shared.b16; on the CPU SIMT runtime (and older GPUs) the same per-lane
// result is assembled with warp shuffles, so the kernels that use it run
// every line in CI.
//
// Layout (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): lane i
// gives the address of row i % 8 of tile i / 8 (16 contiguous bytes: 8
// elements); with g = lane / 4 and t = lane % 4, register j of every lane
// receives from tile j
//   plain   {T[g][2t], T[g][2t+1]}        (row g: an A or B fragment of keys)
//   .trans  {T[2t][g], T[2t+1][g]}        (column g: the B fragment of values)
// the lower element in the low half. Row addresses are 16-byte aligned; the
// rows of a tile may lie anywhere in shared memory (a swizzled tile puts them
// where the bank map wants them).
#ifndef KVC_CUDA_LDMATRIX_CUH
#define KVC_CUDA_LDMATRIX_CUH

#include <stdint.h>
#include <string.h>

#include "kvc_cuda_compat.h"

#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750)
// The shuffle form: each lane reads its own row's four words, then every
// lane takes the word (or the two halves) it is owed from the lane that
// read that row. All 32 lanes take part in every shuffle.
template <bool Trans> __device__ inline void kvc_ldmatrix_x4_shfl(uint32_t r[4], const void *row)
{
    const unsigned lane = threadIdx.x % 32u, g = lane / 4u, t = lane % 4u;
    uint32_t w[4];
    memcpy(w, row, 16);
    for (unsigned j = 0; j < 4u; j++) {
        uint32_t got = 0;
        for (unsigned q = 0; q < 4u; q++) {
            if (!Trans) { // row g of tile j was read by lane 8j + g: its word t
                const uint32_t v = __shfl_sync(0xffffffffu, w[q], (int)(8u * j + g));
                if (q == t) got = v;
            } else { // rows 2t and 2t + 1 of tile j, element g of each: word g / 2, half g % 2
                const uint32_t lo = __shfl_sync(0xffffffffu, w[q], (int)(8u * j + 2u * t));
                const uint32_t hi = __shfl_sync(0xffffffffu, w[q], (int)(8u * j + 2u * t + 1u));
                if (q == g / 2u) {
                    const unsigned sh = 16u * (g % 2u);
                    got = ((lo >> sh) & 0xffffu) | (((hi >> sh) & 0xffffu) << 16);
                }
            }
        }
        r[j] = got;
    }
}
#endif

// r[j] = lane's fragment of tile j; row: this lane's row address (see above).
__device__ inline void kvc_ldmatrix_x4(uint32_t r[4], const void *row)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
#else
    kvc_ldmatrix_x4_shfl<false>(r, row);
#endif
}

// The transposed load: r[j] = {T_j[2t][g], T_j[2t+1][g]}.
__device__ inline void kvc_ldmatrix_x4_trans(uint32_t r[4], const void *row)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
#else
    kvc_ldmatrix_x4_shfl<true>(r, row);
#endif
}

#endif // KVC_CUDA_LDMATRIX_CUH
