// One kernel source for nvcc (the GPU) and for the CPU SIMT runtime
// (KVC_SIMT_CPU: the source compiled as C++ against simt/simt_cpu.h). The
// kernels use these two spellings instead of `<<<>>>` and
// `extern __shared__`; everything else is plain CUDA C.
#ifndef KVC_CUDA_COMPAT_H
#define KVC_CUDA_COMPAT_H

#if defined(KVC_SIMT_CPU)
#include "simt/simt_cpu.h"
#define KVC_LAUNCH(kernel, grid, block, smem, stream, ...)                                                             \
    ((void)(stream), ::simt::launch(                                                                                   \
                         dim3(grid), dim3(block), (smem), [&] { kernel(__VA_ARGS__); }, __FILE__, __LINE__,            \
                         reinterpret_cast<const void *>(kernel)))
#define KVC_DYN_SMEM(T, name) T *name = static_cast<T *>(::simt::dynamic_smem())
#else
#include <cuda_runtime.h>
#define KVC_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#define KVC_DYN_SMEM(T, name)                              extern __shared__ T name[]
#endif

#endif
