#!/usr/bin/env bash
# Instructions per attended token on emulated Cortex-M0+, M4F and M7
# (bench/mcu/attend_insn.c): QEMU's -icount ties the MPS2 timer to retired
# instructions, so the counts are exact and the same on every run and host.
# Builds the firmware with the Debian toolchain (gcc-arm-none-eabi,
# libnewlib-arm-none-eabi, qemu-system-arm) into build-mcu/<cpu>.
#   bash bench/mcu_insn.sh            # prints one table per CPU
set -euo pipefail
cd "$(dirname "$0")/.."
for t in cortex-m0plus:mps2-an385:arm-none-eabi-cortex-m0 cortex-m4:mps2-an386:arm-none-eabi-cortex-m4 \
         cortex-m7:mps2-an500:arm-none-eabi-cortex-m7; do
  IFS=: read -r cpu board toolchain <<<"$t"
  dir=build-mcu/$cpu
  cmake --no-warn-unused-cli -S . -B "$dir" --toolchain "cmake/toolchains/$toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF -DKVC_INSTALL=OFF -DKVC_BUILD_FIRMWARE=ON \
    -DKVC_MAX_HEAD_DIM=64 -DKVC_MAX_QUERY_HEADS=8 >/dev/null
  cmake --build "$dir" --target kvc_attend_insn_fw >/dev/null
  echo "== $cpu ($board): attend of 2 query heads, head dim 8, 64 cached tokens (sink-window)"
  timeout 600 qemu-system-arm -M "$board" -nographic -monitor none -serial none -icount shift=6 \
    -semihosting-config enable=on,target=native -kernel "$dir/tests/mcu/kvc_attend_insn_fw.elf" | tr -d '\r' |
    grep -v "passed, 0 failed"
done
