// The CPU SIMT runtime: CUDA C kernels compiled as C++ and executed on the
// CPU, one fiber per CUDA thread (accel/cuda/README.md, the
// design of section 2.5, written for this project).
//
// What it keeps of CUDA:
//  - __syncthreads() is a real block barrier; every thread of the block must
//    reach the same one (the call site) or the run fails with both sites;
//  - the *_sync warp operations (shuffles with width, ballot, any, all,
//    __syncwarp) are rendezvous of the lanes named in the mask, within the
//    lane's own 32-lane warp: warp-divergent shuffles and per-warp trip counts
//    work as on the GPU; lanes of one rendezvous must call the same
//    operation with the same mask and width, or the run fails;
//  - a thread stops only at a barrier or a warp operation, so lanes run one
//    at a time between them: code that assumes implicit lock-step fails;
//  - deadlock (nobody can move) is an error naming where every thread waits;
//  - fresh device memory and each block's dynamic shared memory are filled
//    with a poison byte (SIMT_POISON, default 0xFF: NaN in every float);
//  - SIMT_SCHEDULE=reverse runs the threads of a block, and the blocks of a
//    grid, in reverse order;
//  - under ThreadSanitizer each CUDA thread is a TSan fiber and the only
//    happens-before edges are CUDA's (barriers, warp operations, a block's
//    start and end), so unsynchronised accesses between the threads of a
//    block are reported even when the serial schedule hides them; under
//    AddressSanitizer the fiber stacks are announced to it.
// Static __shared__ variables are function statics (thread_local): one per
// block, since the blocks of a grid run one after another on the launching
// OS thread; they are not poisoned (a limit the design states).
// Errors print "simt: error: ..." on stderr and exit with status 3.
#ifndef KVC_SIMT_CPU_H
#define KVC_SIMT_CPU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

#include <cuda_runtime_api.h> // the host API (cudaMalloc, ...), defined in simt_cpu.cpp
#include <vector_types.h>     // dim3, uint3 and the qualifier macros (empty on the host)

namespace simt
{

[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The calling CUDA thread's coordinates.
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
void *dynamic_smem();

// Synchronisation points (file and line name them in errors).
void syncthreads(const char *file, int line);

enum warp_op_kind { OP_SHFL, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR, OP_BALLOT, OP_ANY, OP_ALL, OP_SYNCWARP };

// One lane's part of a warp operation: its 8-byte value and argument in,
// the value it receives out (the source lane's value, or the ballot).
uint64_t warp_op(warp_op_kind op, unsigned mask, uint64_t value, int arg, int width, const char *file, int line);

// kernel: the __global__ function launched (its cudaFuncSetAttribute opt-in
// of dynamic shared memory past 48 KiB is honoured), or null.
void launch(dim3 grid, dim3 block, size_t dyn_smem, const std::function<void()> &body, const char *file, int line,
            const void *kernel);

// cp.async (kernels/cp_async.cuh): issue a 4, 8 or 16-byte copy into the
// calling thread's open group (its destination reads as poison until
// completed), close the group, and complete every closed group but the
// newest n. A thread that ends with copies not waited for is an error.
void cp_async(void *dst, const void *src, size_t bytes, const char *file, int line);
void cp_async_commit();
void cp_async_wait(unsigned newest_pending, const char *file, int line);

template <typename T> inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp values are at most 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof v);
    return b;
}

template <typename T> inline T from_bits(uint64_t b)
{
    T v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}

template <typename T> inline T shfl(warp_op_kind op, unsigned mask, T v, int arg, int width, const char *f, int l)
{
    return from_bits<T>(warp_op(op, mask, to_bits(v), arg, width, f, l));
}

} // namespace simt

// ---- the CUDA spellings ----
#define threadIdx (::simt::thread_idx())
#define blockIdx  (::simt::block_idx())
#define blockDim  (::simt::block_dim())
#define gridDim   (::simt::grid_dim())
#define warpSize  32
#undef __launch_bounds__
#define __launch_bounds__(...) // occupancy hints mean nothing here
#undef __shared__
#define __shared__ static thread_local

#define __syncthreads() ::simt::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...)                                                                                                \
    ::simt::warp_op(::simt::OP_SYNCWARP, (__VA_ARGS__ + 0u) ? (__VA_ARGS__ + 0u) : 0xffffffffu, 0, 0, 32, __FILE__,    \
                    __LINE__)
#define __shfl_sync(m, v, lane, ...)                                                                                   \
    ::simt::shfl(::simt::OP_SHFL, (m), (v), (lane), (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, __FILE__, __LINE__)
#define __shfl_up_sync(m, v, d, ...)                                                                                   \
    ::simt::shfl(::simt::OP_SHFL_UP, (m), (v), (int)(d), (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, __FILE__, __LINE__)
#define __shfl_down_sync(m, v, d, ...)                                                                                 \
    ::simt::shfl(::simt::OP_SHFL_DOWN, (m), (v), (int)(d), (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, __FILE__,       \
                 __LINE__)
#define __shfl_xor_sync(m, v, x, ...)                                                                                  \
    ::simt::shfl(::simt::OP_SHFL_XOR, (m), (v), (x), (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, __FILE__, __LINE__)
#define __ballot_sync(m, p)                                                                                            \
    ((unsigned)::simt::warp_op(::simt::OP_BALLOT, (m), (p) ? 1u : 0u, 0, 32, __FILE__, __LINE__))
#define __any_sync(m, p) ((int)::simt::warp_op(::simt::OP_ANY, (m), (p) ? 1u : 0u, 0, 32, __FILE__, __LINE__))
#define __all_sync(m, p) ((int)::simt::warp_op(::simt::OP_ALL, (m), (p) ? 1u : 0u, 0, 32, __FILE__, __LINE__))

// Atomics: real CPU atomics (relaxed), so they stay atomic when blocks run
// on several OS threads.
template <typename T> inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline float atomicAdd(float *p, float v)
{
    float old, want;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        want = old + v;
    } while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}
template <typename T> inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
template <typename T> inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <typename T> inline T atomicCAS(T *p, T cmp, T v)
{
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
template <typename T> inline T atomicMax(T *p, T v)
{
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <typename T> inline T atomicMin(T *p, T v)
{
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Intrinsics the kernels may use (host equivalents).
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __float_as_int(float f) { return simt::from_bits<int>(simt::to_bits(f)); }
inline float __int_as_float(int i) { return simt::from_bits<float>(simt::to_bits(i)); }
inline unsigned __float_as_uint(float f) { return simt::from_bits<unsigned>(simt::to_bits(f)); }
inline float __uint_as_float(unsigned i) { return simt::from_bits<float>(simt::to_bits(i)); }
template <typename T> inline T __ldg(const T *p) { return *p; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

#endif
