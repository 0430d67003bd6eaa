#!/usr/bin/env bash
# Builds the GPU binaries of accel/cuda with nvcc, linking the core library of
# an existing build: test_cuda_kernels_gpu (the kernels' checks), simt_selftest_gpu
# (the mma and ldmatrix fragment layouts on the hardware), attend_bandwidth and
# batch_race. Every CUDA source is compiled once (objects for the architectures
# in KVC_ARCH, default "80 90"), in parallel, then linked. Warnings are not
# errors here (the strict build is ctest's cuda.nvcc_strict_kernels): a newer
# host compiler must not stop a benchmark. Needs no GPU, so a CPU machine can
# build and a GPU machine run (bench/gpu_race.sh prebuild).
# usage: build_gpu.sh BUILD_DIR OUT_DIR   (BUILD_DIR has core/libkvc.a)
set -euo pipefail
build=${1:?usage: build_gpu.sh BUILD_DIR OUT_DIR}
out=${2:?usage: build_gpu.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$out/obj"
gencode=()
for a in ${KVC_ARCH:-80 90}; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
flags=(-std=c++17 -O3 -DKVC_ADVANCED "${gencode[@]}" -Xcompiler -Wall,-Wextra
       -Xptxas -warn-spills,-warn-lmem-usage,-warn-double-usage -I"$here" -I"$here/include" -I"$root/core/include")
srcs=(kvc_cuda.cu kvc_cuda_batch.cu tests/test_cuda_kernels.cu tests/test_cuda_batch.cu tests/test_cuda_mirror.cu
      tests/simt_selftest.cu
      bench/attend_bandwidth.cu bench/batch_race.cu)
pids=()
for s in "${srcs[@]}"; do
    o="$out/obj/$(basename "${s%.cu}").o"
    "$nvcc" "${flags[@]}" -c "$here/$s" -o "$o" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc -eq 0 ] || { echo "build_gpu: a compilation failed"; exit 1; }
o=$out/obj
lib=("$build/core/libkvc.a" -lm)
"$nvcc" "${gencode[@]}" -o "$out/test_cuda_kernels_gpu" "$o/kvc_cuda.o" "$o/kvc_cuda_batch.o" "$o/test_cuda_kernels.o" \
    "$o/test_cuda_batch.o" "$o/test_cuda_mirror.o" "${lib[@]}"
"$nvcc" "${gencode[@]}" -o "$out/simt_selftest_gpu" "$o/simt_selftest.o"
"$nvcc" "${gencode[@]}" -o "$out/attend_bandwidth" "$o/kvc_cuda.o" "$o/attend_bandwidth.o" "${lib[@]}"
"$nvcc" "${gencode[@]}" -o "$out/batch_race" "$o/kvc_cuda.o" "$o/kvc_cuda_batch.o" "$o/batch_race.o" "${lib[@]}"
echo "built $out/{test_cuda_kernels_gpu,simt_selftest_gpu,attend_bandwidth,batch_race} for sm ${KVC_ARCH:-80 90}"
