#!/usr/bin/env bash
# docs/gpu.md's decoder example, as a reader would paste it: the first ```c
# block of the page, compiled as C11 with every warning an error, linked
# against the CUDA table on the CPU SIMT runtime, and run (exit 0).
# usage: docs_example.sh PAGE WORK_DIR CC CXX CUDA_INCLUDE ROOT LIBS...
set -euo pipefail
page=$1 work=$2 cc=$3 cxx=$4 cuda_inc=$5 root=$6
shift 6
mkdir -p "$work"
awk '/^```c$/{on=1; next} /^```$/{if (on) exit} on' "$page" >"$work/example.c"
[ -s "$work/example.c" ] || { echo "$page has no C example"; exit 1; }
"$cc" -std=c11 -O1 -Wall -Wextra -Werror -I"$root/core/include" -I"$root/accel/cuda/include" -I"$cuda_inc" \
    -c "$work/example.c" -o "$work/example.o"
"$cxx" -o "$work/example" "$work/example.o" "$@" -lm -lpthread # the runtime is C++
"$work/example"
echo "docs/gpu.md example: compiled as C11 and ran"
