#!/bin/sh
# Cross-build the core and tests/kernels for aarch64 (clang, Debian's arm64
# cross libc) and run the kernel tests under qemu-user. Usage: SRC BUILD_DIR.
set -eu
src=$1 build=$2
missing=""
command -v clang >/dev/null || missing="$missing clang"
command -v qemu-aarch64 >/dev/null || missing="$missing qemu-aarch64"
[ -f /usr/aarch64-linux-gnu/lib/libc.so ] || missing="$missing libc6-dev-arm64-cross"
ls /usr/lib/gcc-cross/aarch64-linux-gnu/*/libgcc.a >/dev/null 2>&1 || missing="$missing libgcc-12-dev-arm64-cross"
command -v aarch64-linux-gnu-ld >/dev/null || missing="$missing binutils-aarch64-linux-gnu"
if [ -n "$missing" ]; then
  echo "aarch64 cross toolchain incomplete (missing:$missing)"
  if [ "${CI:-}" = true ]; then echo "CI=true: .ci/deps should have installed them"; exit 1; fi
  echo "skipped"; exit 77
fi
cmake -S "$src" -B "$build" --toolchain "$src/cmake/toolchains/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF -DKVC_BUILD_KERNEL_TESTS=ON -DKVC_INSTALL=OFF \
  -DKVC_WERROR=ON >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target test_backends -j 2
# every kernels case but the NEON table (every_table_matches_reference would test
# it a second time), then the NEON table, which must run, not skip
ctest --test-dir "$build" -L kernels -E "table_neon|every_table_matches_reference" --output-on-failure
rc=0
# one C library under the emulator (see cmake/toolchains/aarch64-linux-gnu.cmake)
prefix=/usr/aarch64-linux-gnu
[ -e /lib/ld-linux-aarch64.so.1 ] && prefix=/
qemu-aarch64 -L "$prefix" "$build/tests/kernels/test_backends" table_neon || rc=$?
[ "$rc" -eq 0 ] || { echo "table_neon did not pass under qemu (exit $rc)"; exit 1; }
echo "aarch64: every kernels case passed under qemu-aarch64, NEON table included"
