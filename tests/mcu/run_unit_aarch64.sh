#!/bin/sh
# The unit tests (label `unit`) cross-built for aarch64 Linux (clang, Debian's
# arm64 cross libc, the oracle on Debian's multiarch arm64 MPFR and LAPACKE)
# and run under qemu-user: the executables through CMake's emulator, the
# Python-driven tests through the kvc-emulated wrapper (tests/CMakeLists.txt),
# every time limit scaled for emulation (cmake/KvcTesting.cmake).
# Usage: SRC BUILD_DIR. Skips (77) where a piece is missing, except in CI
# (CI=true), where .ci/deps installs them.
set -eu
src=$1 build=$2
missing=""
command -v clang >/dev/null || missing="$missing clang"
command -v qemu-aarch64 >/dev/null || missing="$missing qemu-user"
[ -f /usr/aarch64-linux-gnu/lib/libc.so ] || missing="$missing libc6-dev-arm64-cross"
command -v aarch64-linux-gnu-ld >/dev/null || missing="$missing binutils-aarch64-linux-gnu"
[ -f /usr/lib/aarch64-linux-gnu/libmpfr.so ] || missing="$missing libmpfr-dev:arm64"
[ -f /usr/lib/aarch64-linux-gnu/liblapacke.so ] || missing="$missing liblapacke-dev:arm64"
if [ -n "$missing" ]; then
  echo "aarch64 cross build incomplete (missing:$missing)"
  if [ "${CI:-}" = true ]; then echo "CI=true: .ci/deps should have installed them"; exit 1; fi
  echo "KVC_SKIP"; exit 77
fi
cmake -S "$src" -B "$build" --toolchain "$src/cmake/toolchains/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DKVC_WERROR=ON >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j 2 >"$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }
# Left out: abi.* and install.*, which build and compare for the host's own
# targets (m32 and aarch64 fingerprints, an install tree): the host build runs them.
ctest --test-dir "$build" -L unit -E '^(abi|install)\.' -j 2 --output-on-failure
echo "aarch64: the unit tests passed under qemu-aarch64"
