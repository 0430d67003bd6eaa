#!/usr/bin/env bash
# Line coverage of accel/cuda's CUDA sources (kvc_cuda.cu, kvc_cuda_batch.cu and the kernels'
# .cuh) as the CPU SIMT runtime executes them: builds the kernels' test with
# gcov instrumentation (g++ --coverage, -O0), runs it in the default mode and
# in the bug matrix's mode, and prints gcov's lines-executed per file. The
# injected bugs are preprocessed out (no KVC_BUG_MATRIX), so not counted. Fails
# unless every line of the kernels (.cuh) ran.
# usage: coverage.sh BUILD_DIR   (BUILD_DIR has core/libkvc.a)
set -euo pipefail
build=$(cd "${1:?usage: coverage.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-std=c++17 -g -x c++ -DKVC_SIMT_CPU -DKVC_ADVANCED -Wno-unknown-pragmas -I"$here" -I"$here/simt" -I"$here/include"
       -I"$root/core/include" -I"$cuda_inc")
cd "$work"
g++ "${flags[@]}" -O0 --coverage -c "$here/kvc_cuda.cu" -o kvc_cuda.o
g++ "${flags[@]}" -O0 --coverage -c "$here/kvc_cuda_batch.cu" -o kvc_cuda_batch.o
g++ "${flags[@]}" -O1 -c "$here/tests/test_cuda_kernels.cu" -o driver.o
g++ "${flags[@]}" -O1 -c "$here/tests/test_cuda_batch.cu" -o driver_batch.o
g++ "${flags[@]}" -O1 -c "$here/tests/test_cuda_mirror.cu" -o driver_mirror.o
g++ -std=c++17 -O1 -x c++ -DKVC_SIMT_CPU -I"$here/simt" -I"$cuda_inc" -c "$here/simt/simt_cpu.cpp" -o simt.o
g++ --coverage -o cov kvc_cuda.o kvc_cuda_batch.o driver.o driver_batch.o driver_mirror.o simt.o "$build/core/libkvc.a" -lm
./cov >/dev/null
./cov matrix >/dev/null || true
report() { gcov -o . kvc_cuda.o kvc_cuda_batch.o 2>/dev/null; }
report | grep -A1 -E "^File '.*(kvc_cuda\.cu|kvc_cuda_batch\.cu|[a-z_0-9]+\.cuh)'" |
    sed -n 's/^File .\(.*\).$/\1/p; s/^Lines executed:/  lines executed: /p' | sed "s|$root/||"
# every kernel line must have run (the host side's error paths need failing CUDA calls)
report | grep -A1 -E "^File '.*\.cuh'" | grep -q -v -E "^File|100.00%|^--" &&
    { echo "coverage: a kernel line did not execute"; exit 1; }
echo "coverage: every line of the kernels (.cuh) executed"
