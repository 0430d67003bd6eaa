// Integer codes to the f16 pairs a tensor-core fragment holds, a few integer
// instructions per pair (TensorRT-LLM's XQA and FasterTransformer do the same):
//
//   int8  four signed codes c (one 32-bit word) -> {c0, c1}, {c2, c3}:
//         flip the sign bits (c + 128 in 0..255), place each byte under the
//         f16 exponent byte 0x64 (1024 + (c + 128), exact: f16 has 11 bits),
//         then subtract 1152 from both halves at once: exactly c.
//   int4  nibbles n (0..15): the two halves of a word masked to one nibble
//         each, under 0x64 (1024 + n), minus 1024: exact. Which nibbles pair
//         up is the shift: (w >> s) & 0x000F000F pairs bit s of byte 0 with
//         bit s of byte 2. Bytes b, b + 1 of a word first spread to the two
//         halves (one PRMT) pair the nibbles of neighbouring bytes.
//
// On a GPU: __byte_perm (PRMT), one LOP3 per pair and __hsub2; on the CPU SIMT runtime (and in
// host code) the same bits by shifts and an f32 subtraction, which is exact
// here. The subtrahend is a parameter so that the bug matrix can inject a
// wrong constant (kernels/injected_bug.cuh).
#ifndef KVC_CUDA_DEQUANT_CUH
#define KVC_CUDA_DEQUANT_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "kvc_cuda_compat.h"

constexpr float kI8Magic = 1152.0f; // 1024 (the exponent byte 0x64) + 128 (the sign flip)
constexpr float kI4Magic = 1024.0f; // the exponent byte 0x64 alone: nibbles are unsigned

// Bytes b0, b1 of x under the exponent byte 0x64: the f16 pair {1024 + b0, 1024 + b1}.
__device__ inline uint32_t kvc_bytes_under_0x64(uint32_t x, unsigned first_byte)
{
#if defined(__CUDA_ARCH__)
    return __byte_perm(x, 0x64646464u, first_byte == 0 ? 0x5140u : 0x7362u);
#else
    const uint32_t b0 = (x >> (8u * first_byte)) & 0xffu, b1 = (x >> (8u * first_byte + 8u)) & 0xffu;
    return (b0 | 0x6400u) | ((b1 | 0x6400u) << 16);
#endif
}

// Both halves of an f16 pair minus m (exact when the pair is 1024 + k, k < 1024, and m is 1024 + an integer).
__device__ inline uint32_t kvc_f16x2_minus(uint32_t pair, float m)
{
#if defined(__CUDA_ARCH__)
    const __half2 r = __hsub2(*reinterpret_cast<const __half2 *>(&pair), __float2half2_rn(m));
    return *reinterpret_cast<const uint32_t *>(&r);
#else
    const float lo = __half2float(__ushort_as_half((unsigned short)(pair & 0xffffu))) - m;
    const float hi = __half2float(__ushort_as_half((unsigned short)(pair >> 16))) - m;
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | ((uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16);
#endif
}

// Four int8 codes (byte k = code k) -> lo = {c0, c1}, hi = {c2, c3} as f16.
__device__ inline void kvc_i8x4_to_f16x2(uint32_t codes, uint32_t &lo, uint32_t &hi, float magic = kI8Magic)
{
    const uint32_t u = codes ^ 0x80808080u; // c + 128, unsigned
    lo = kvc_f16x2_minus(kvc_bytes_under_0x64(u, 0), magic);
    hi = kvc_f16x2_minus(kvc_bytes_under_0x64(u, 2), magic);
}

// The nibbles at bit `shift` of bytes 0 and 2 of w -> the f16 pair {n_lo, n_hi}.
__device__ inline uint32_t kvc_i4_pair(uint32_t w, unsigned shift, float magic = kI4Magic)
{
    return kvc_f16x2_minus(((w >> shift) & 0x000F000Fu) | 0x64006400u, magic);
}

// Bytes b, b + 1 of w (b = 0 or 2) into the low bytes of the two halves: {byte b, byte b + 1}.
__device__ inline uint32_t kvc_spread_bytes(uint32_t w, unsigned b)
{
#if defined(__CUDA_ARCH__)
    return __byte_perm(w, 0u, b == 0 ? 0x4140u : 0x4342u);
#else
    return ((w >> (8u * b)) & 0xffu) | (((w >> (8u * b + 8u)) & 0xffu) << 16);
#endif
}

#endif // KVC_CUDA_DEQUANT_CUH
