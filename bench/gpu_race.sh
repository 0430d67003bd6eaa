#!/usr/bin/env bash
# The server decode race on a GPU, in one run: the read kernel, kvcompress's
# batched decode (accel/cuda/bench/batch_race.cu: f16, int8 and int4 rows,
# and the recommended compressed cache at 25% of the f16 exact cache's
# bytes) and PyTorch's SDPA (flash and cuDNN backends, f16) on the same
# shapes, then a table of times and ratios. Needs nvcc, cmake, a GPU, and
# torch for the SDPA rows (skipped without it). About 3 minutes on an H100.
#   bench/gpu_race.sh [quick]      (quick: the shapes up to B = 16, n = 32k, 1M rows)
# Environment: OUT (default out/gpu-race), BUILD (default build-gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu-race}
build=${BUILD:-build-gpu}
mode=${1:-}
mkdir -p "$out"
if ! nvidia-smi -L >/dev/null 2>&1; then echo "gpu_race: no GPU here"; exit 77; fi
nvidia-smi -L | tee "$out/device.txt"
# the core library (no oracle, apps or tests) and the GPU binaries
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF \
    -DKVC_BUILD_TESTS=OFF -DKVC_VERIFY=OFF >"$out/cmake.log"
cmake --build "$build" --target kvc -j"$(nproc)" >>"$out/cmake.log"
bash accel/cuda/bench/build_gpu.sh "$build" "$build/gpu" >"$out/nvcc.log" 2>&1 || { tail -20 "$out/nvcc.log"; exit 1; }
# correctness first: the batched decode's checks on this GPU
"$build/gpu/test_cuda_kernels_gpu" batch | tee "$out/batch_checks.txt" | tail -3
stdbuf -oL "$build/gpu/batch_race" $mode | tee "$out/kvc.csv"
read_tb=$(awk -F, '$1=="read" {print $10}' "$out/kvc.csv")
if python3 -c "import torch" 2>/dev/null; then
    stdbuf -oL python3 bench/gpu_race_torch.py "$read_tb" $mode | tee "$out/torch.csv"
else
    echo "# torch not installed: no SDPA rows" | tee "$out/torch.csv"
fi
python3 bench/gpu_race_table.py "$out/kvc.csv" "$out/torch.csv" | tee "$out/table.md"
