#!/usr/bin/env bash
# Code size per method on a Cortex-M4F (Release, -ffunction-sections,
# --gc-sections): bench/mcu/size_probe.c linked once with every method
# (KVC_METHODS empty) and once per method alone (KVC_METHODS=<ident>), with
# KVC_DESCRIBE=OFF (no printf), and run under QEMU to check it works. Prints
# text/data/bss of each firmware (startup, newlib's exit path and libgcc's
# helpers are in every line).
#   bash bench/mcu_code_size.sh
set -euo pipefail
cd "$(dirname "$0")/.."
idents=$(sed -n 's/^ *X(\([a-z_0-9]*\),.*/\1/p' core/include/kvc/kvc_method_list.h)
printf "%-20s %8s %6s %6s %s\n" "methods" "text" "data" "bss" "runs"
for m in ${KVC_SIZE_METHODS:-all $idents}; do
  dir=build-mcu/size-$m
  sel=""; [ "$m" != all ] && sel=$m
  cmake --no-warn-unused-cli -S . -B "$dir" --toolchain cmake/toolchains/arm-none-eabi-cortex-m4.cmake \
    -DCMAKE_BUILD_TYPE=Release -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF -DKVC_INSTALL=OFF \
    -DKVC_BUILD_FIRMWARE=ON -DKVC_MAX_HEAD_DIM=64 -DKVC_MAX_QUERY_HEADS=8 -DKVC_DESCRIBE=OFF "-DKVC_METHODS=$sel" >/dev/null
  cmake --build "$dir" --target kvc_size_probe_fw >/dev/null
  elf=$dir/tests/mcu/kvc_size_probe_fw.elf
  rc=0
  timeout 120 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
    -semihosting-config enable=on,target=native -kernel "$elf" >/dev/null || rc=$?
  read -r text data bss _ < <(arm-none-eabi-size "$elf" | tail -1)
  printf "%-20s %8s %6s %6s %s\n" "$m" "$text" "$data" "$bss" "$([ $rc -eq 0 ] && echo ok || echo "exit $rc")"
done
