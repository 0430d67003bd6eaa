#!/bin/sh
# Cross-build the core and tests/kernels for aarch64 (clang, Debian's arm64
# cross libc) and run the kernel tests under qemu-user. Usage: SRC BUILD_DIR.
set -eu
src=$1 build=$2
. "$src/tests/aarch64_env.sh"
cmake -S "$src" -B "$build" --toolchain "$src/cmake/toolchains/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF -DKVC_BUILD_KERNEL_TESTS=ON -DKVC_INSTALL=OFF \
  -DKVC_WERROR=ON >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target test_backends -j 2
# every kernels case but the NEON tables (every_table_matches_reference would test
# them a second time), then each NEON table, which must run, not skip (qemu-user's
# default CPU has the dot product). neon_dotprod is neon's code (neon_ops.h, the
# same attend_simd.h) but for its int4 scores (i4_q8_neon.h): under qemu, where
# the whole case set costs several minutes a table, it runs its int4 cases
# (table_int4_: 60, d = 64..256); on Arm hardware ctest runs all of them.
ctest --test-dir "$build" -L kernels -E "table_neon|every_table_matches_reference" --output-on-failure
for table in neon int4_neon_dotprod; do
  rc=0
  qemu-aarch64 -L "$qemu_prefix" "$build/tests/kernels/test_backends" "table_$table" || rc=$?
  [ "$rc" -eq 0 ] || { echo "table_$table did not pass under qemu (exit $rc)"; exit 1; }
done
echo "aarch64: every kernels case passed under qemu-aarch64, both NEON tables included"
