#!/usr/bin/env bash
# Builds the GPU binaries of accel/cuda with nvcc (sm_80 and sm_90, the
# strict flags of the cuda label): test_cuda_kernels_gpu and
# attend_bandwidth, linking the core library of an existing build.
# usage: build_gpu.sh BUILD_DIR OUT_DIR   (BUILD_DIR has core/libkvc.a)
set -euo pipefail
build=${1:?usage: build_gpu.sh BUILD_DIR OUT_DIR}
out=${2:?usage: build_gpu.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$out"
flags=(-std=c++17 -O3 -DKVC_ADVANCED -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
       --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror
       -Xptxas -warn-spills,-warn-lmem-usage,-warn-double-usage
       -I"$here" -I"$here/include" -I"$root/core/include")
"$nvcc" "${flags[@]}" -o "$out/test_cuda_kernels_gpu" "$here/kvc_cuda.cu" "$here/tests/test_cuda_kernels.cu" "$build/core/libkvc.a" -lm
"$nvcc" "${flags[@]}" -o "$out/attend_bandwidth" "$here/kvc_cuda.cu" "$here/bench/attend_bandwidth.cu" "$build/core/libkvc.a" -lm
echo "built $out/test_cuda_kernels_gpu $out/attend_bandwidth"
