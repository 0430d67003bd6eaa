#!/usr/bin/env bash
# The server decode race on a GPU, in one run: the read kernel, kvcompress's
# batched decode (accel/cuda/bench/batch_race.cu: f16, int8 and int4 rows,
# and the recommended compressed cache at 25% of the f16 exact cache's
# bytes) and PyTorch's SDPA (flash and cuDNN backends, f16) on the same
# shapes, L2 flushed and graph-timed on both sides, then a table of times and
# ratios (x cuDNN, x flash). Every step runs whatever the others did and keeps
# its own output under OUT; the exit status is the first failing step's.
#
#   bench/gpu_race.sh prebuild    on any machine with nvcc and cmake (no GPU): the
#                                 core library and the GPU binaries into BUILD/gpu,
#                                 to be carried to the GPU machine
#   bench/gpu_race.sh [quick]     on the GPU machine: builds only what is absent (or
#                                 does not load), then checks, races, tables;
#                                 quick: shapes up to B = 16, n = 32k, 1M rows (< 3 min)
# Environment: OUT (default out/gpu-race), BUILD (default build-gpu), KVC_ARCH
# (default "80 90"), NCU=1 (also profile one split launch per row type with
# ncu: bank conflicts, issue activity, DRAM throughput, occupancy). torch is
# optional (no SDPA rows without it).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu-race}
build=${BUILD:-build-gpu}
mode=${1:-}
mkdir -p "$out"
t0=$(date +%s)
status=0
step() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$out/steps.txt"; }
fail() { step "FAILED: $*"; [ $status -ne 0 ] || status=$1; }

build_all() {
    { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF \
          -DKVC_BUILD_TESTS=OFF -DKVC_VERIFY=OFF &&
          cmake --build "$build" --target kvc -j"$(nproc)" &&
          bash accel/cuda/bench/build_gpu.sh "$build" "$build/gpu"; } >"$out/build.log" 2>&1
}
loads() { [ -x "$1" ] && ! ldd "$1" 2>&1 | grep -q 'not found'; }

if [ "$mode" = prebuild ]; then
    step "prebuild into $build/gpu"
    build_all || { tail -20 "$out/build.log"; exit 1; }
    step "built: carry $build/gpu to the GPU machine"
    exit 0
fi
if ! nvidia-smi -L >/dev/null 2>&1; then echo "gpu_race: no GPU here"; exit 77; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv >"$out/device.txt" 2>&1
cat "$out/device.txt"
bin=$build/gpu
if loads "$bin/batch_race" && loads "$bin/test_cuda_kernels_gpu"; then
    step "using the prebuilt binaries in $bin"
else
    step "building (no prebuilt binaries that load)"
    build_all || { tail -20 "$out/build.log"; fail 2 build; exit $status; }
fi
step "checks: fragment layouts, then the batched decode against the reference"
timeout 120 "$bin/simt_selftest_gpu" good >"$out/selftest.txt" 2>&1 || fail 3 "simt_selftest_gpu (mma/ldmatrix layouts)"
timeout 300 "$bin/test_cuda_kernels_gpu" batch >"$out/batch_checks.txt" 2>&1 || fail 4 "batched decode checks"
tail -3 "$out/batch_checks.txt"
step "kvcompress race${mode:+ ($mode)}"
timeout 900 stdbuf -oL "$bin/batch_race" $mode >"$out/kvc.csv" 2>&1 || fail 5 batch_race
read_tb=$(awk -F, '$1=="read" {print $11}' "$out/kvc.csv")
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    step "torch SDPA race"
    timeout 900 stdbuf -oL python3 bench/gpu_race_torch.py "${read_tb:-1}" $mode >"$out/torch.csv" 2>&1 ||
        fail 6 "torch SDPA"
else
    echo "# torch not installed: no SDPA rows" >"$out/torch.csv"
fi
python3 bench/gpu_race_table.py "$out/kvc.csv" "$out/torch.csv" >"$out/table.md" 2>&1 || fail 7 table
cat "$out/table.md"
if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    step "ncu: one split launch per row type (single 1M, 8 q heads)"
    timeout 300 ncu --kernel-name-base demangled -k "regex:batch_split_kernel" -c 3 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed.sum,dram__bytes_read.sum \
        "$bin/batch_race" ncu >"$out/ncu.txt" 2>&1 || fail 8 ncu
fi
step "done (status $status)"
exit $status
