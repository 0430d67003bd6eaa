#!/bin/sh
# The unit tests (label `unit`) cross-built for aarch64 Linux (clang, Debian's
# arm64 cross libc, the oracle on Debian's multiarch arm64 MPFR and LAPACKE)
# and run under qemu-user: the executables through CMake's emulator, the
# Python-driven tests through the kvc-emulated wrapper (tests/CMakeLists.txt),
# every time limit scaled for emulation (cmake/KvcTesting.cmake).
# Usage: SRC BUILD_DIR. Skips (77) where a piece is missing, except in CI
# (CI=true), where .ci/deps installs them (tests/aarch64_env.sh).
set -eu
src=$1 build=$2
extra_checks="/usr/lib/aarch64-linux-gnu/libmpfr.so|libmpfr-dev:arm64 /usr/lib/aarch64-linux-gnu/liblapacke.so|liblapacke-dev:arm64"
. "$src/tests/aarch64_env.sh"
cmake -S "$src" -B "$build" --toolchain "$src/cmake/toolchains/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DKVC_WERROR=ON >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
# Left out: abi.* and install.*, which build and compare for the host's own
# targets (m32 and aarch64 fingerprints, an install tree): the host build runs
# them; docs.*, which read the source tree and run nothing built; and cli.*,
# the command line's vocabulary and refusals driven by Python (hundreds of kvc
# runs each: under emulation one of them took over ten minutes on one core, at
# the end of CI's release pass), run natively in both of .ci/test's builds.
# What runs here is every C unit test executable: the core on aarch64.
excluded='^(abi|install|docs|cli)\.'
# only the executables the tests below run (and what they depend on), not the
# whole tree: the tests' commands name them
targets=$(ctest --test-dir "$build" -N -L unit -E "$excluded" --show-only=json-v1 | python3 -c '
import json, os, sys
build = os.path.realpath(sys.argv[1])
names = {os.path.basename(a) for t in json.load(sys.stdin)["tests"] for a in t.get("command", [])
         if os.path.realpath(a).startswith(build + "/")}
print(" ".join(sorted(names)))' "$build")
[ -n "$targets" ] || { echo "no unit test executables found in $build"; exit 1; }
cmake --build "$build" -j 2 --target $targets >"$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }
ctest --test-dir "$build" -L unit -E "$excluded" -j 2 --output-on-failure
echo "aarch64: the unit tests passed under qemu-aarch64"
