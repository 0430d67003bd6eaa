// Asynchronous global -> shared copies, the double-buffering primitive of a
// bandwidth-bound kernel: issue the next tile's copies, compute on the
// current tile, then wait. On sm_80 and later these are the PTX instructions
// cp.async.{ca,cg}.shared.global, cp.async.commit_group and
// cp.async.wait_group; on the CPU SIMT runtime they keep the same rules
// (simt_cpu.h: the destination reads as poison until the wait that completes
// its group, and a thread may not end with copies pending), so a missing wait
// shows up as wrong numbers in CI; elsewhere they are plain copies.
//
//   kvc_cp_async(dst_shared, src_global, bytes)   bytes 4, 8 or 16, both aligned to it
//   kvc_cp_async_commit()                         close the group of copies issued so far
//   kvc_cp_async_wait(N)                          complete all closed groups but the newest N
// Every asm names "memory": the compiler may not move a shared-memory load
// above the wait that completes its bytes (nor a store below an issue).
// A wait covers the calling thread's own copies only: a tile read by other
// threads also needs __syncthreads() after the wait.
#ifndef KVC_CUDA_CP_ASYNC_CUH
#define KVC_CUDA_CP_ASYNC_CUH

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kvc_cuda_compat.h"

#if defined(KVC_SIMT_CPU)
#define kvc_cp_async(dst, src, bytes) ::simt::cp_async((dst), (src), (bytes), __FILE__, __LINE__)
#define kvc_cp_async_commit()         ::simt::cp_async_commit()
template <unsigned N> inline void kvc_cp_async_wait_at(const char *file, int line)
{
    ::simt::cp_async_wait(N, file, line);
}
#define kvc_cp_async_wait(N) kvc_cp_async_wait_at<N>(__FILE__, __LINE__)
#else
__device__ inline void kvc_cp_async(void *dst, const void *src, size_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (bytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
    else if (bytes == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
#else
    memcpy(dst, src, bytes);
#endif
}
__device__ inline void kvc_cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <unsigned N> __device__ inline void kvc_cp_async_wait_n()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
#define kvc_cp_async_wait(N) kvc_cp_async_wait_n<N>()
#endif

#endif // KVC_CUDA_CP_ASYNC_CUH
