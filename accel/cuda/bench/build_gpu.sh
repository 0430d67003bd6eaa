#!/usr/bin/env bash
# Builds the GPU binaries of accel/cuda with nvcc (sm_80 and sm_90, the
# strict flags of the cuda label): test_cuda_kernels_gpu, attend_bandwidth
# and batch_race, linking the core library of an existing build.
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
lib=(-lm)
"$nvcc" "${flags[@]}" -o "$out/test_cuda_kernels_gpu" "$here/kvc_cuda.cu" "$here/kvc_cuda_batch.cu" \
    "$here/tests/test_cuda_kernels.cu" "$here/tests/test_cuda_batch.cu" "$build/core/libkvc.a" "${lib[@]}" &
"$nvcc" "${flags[@]}" -o "$out/attend_bandwidth" "$here/kvc_cuda.cu" "$here/bench/attend_bandwidth.cu" \
    "$build/core/libkvc.a" "${lib[@]}" &
"$nvcc" "${flags[@]}" -o "$out/batch_race" "$here/kvc_cuda.cu" "$here/kvc_cuda_batch.cu" "$here/bench/batch_race.cu" \
    "$build/core/libkvc.a" "${lib[@]}" &
wait %1 && wait %2 && wait %3
echo "built $out/test_cuda_kernels_gpu $out/attend_bandwidth $out/batch_race"
