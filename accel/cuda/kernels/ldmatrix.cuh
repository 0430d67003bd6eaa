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
// The shuffle form: every lane takes the row addresses it needs from the
// lanes that hold them (one shuffle per tile, two for .trans) and reads the
// word (or the two halves) it is owed from shared memory. All 32 lanes take
// part in every shuffle.
template <bool Trans> __device__ inline void kvc_ldmatrix_x4_shfl(uint32_t r[4], const void *row)
{
    const unsigned lane = threadIdx.x % 32u, g = lane / 4u, t = lane % 4u;
    const unsigned long long mine = (unsigned long long)(uintptr_t)row;
    for (unsigned j = 0; j < 4u; j++) {
        if (!Trans) { // row g of tile j (given by lane 8j + g): its word t
            const unsigned long long at = __shfl_sync(0xffffffffu, mine, (int)(8u * j + g));
            memcpy(&r[j], reinterpret_cast<const unsigned char *>((uintptr_t)at) + 4u * t, 4);
        } else { // rows 2t and 2t + 1 of tile j: element g of each
            const unsigned long long lo = __shfl_sync(0xffffffffu, mine, (int)(8u * j + 2u * t));
            const unsigned long long hi = __shfl_sync(0xffffffffu, mine, (int)(8u * j + 2u * t + 1u));
            uint16_t e[2];
            memcpy(&e[0], reinterpret_cast<const unsigned char *>((uintptr_t)lo) + 2u * g, 2);
            memcpy(&e[1], reinterpret_cast<const unsigned char *>((uintptr_t)hi) + 2u * g, 2);
            r[j] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
        }
    }
}
#endif

// r[j] = lane's fragment of tile j; row: this lane's row address (see above).
// Trans: the transposed load, r[j] = {T_j[2t][g], T_j[2t+1][g]}.
template <bool Trans> __device__ inline void kvc_ldmatrix_x4_t(uint32_t r[4], const void *row)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    if (Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s)
                     : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s)
                     : "memory");
#else
    kvc_ldmatrix_x4_shfl<Trans>(r, row);
#endif
}
__device__ inline void kvc_ldmatrix_x4(uint32_t r[4], const void *row) { kvc_ldmatrix_x4_t<false>(r, row); }
__device__ inline void kvc_ldmatrix_x4_trans(uint32_t r[4], const void *row) { kvc_ldmatrix_x4_t<true>(r, row); }

#endif // KVC_CUDA_LDMATRIX_CUH
