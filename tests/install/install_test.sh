#!/bin/sh
# install_test.sh SOURCE_DIR WORK_DIR STEP
#   install: configure the core alone (C compiler and libm only), build, install into WORK_DIR/prefix
#   find_package: build tests/install/consumer against it with CMake and run it
#   pkg_config: build the same program with pkg-config and run it
#   readme: compile README.md's C quick start against the install (stable tier,
#           no KVC_ADVANCED) and run it
#   kvc_alone: build the kvc command line without the oracle (no MPFR, no
#              LAPACKE): it links neither, generates, and `kvc oracle` says
#              what to install
set -eu
src=$1 work=$2 step=$3
case $step in
  install)
    rm -rf "$work" && mkdir -p "$work"
    cmake -S "$src" -B "$work/build" -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF >"$work/configure.log"
    cmake --build "$work/build" >"$work/build.log"
    cmake --install "$work/build" --prefix "$work/prefix" >"$work/install.log"
    ls "$work/prefix/lib/cmake/kvcompress" "$work/prefix/lib/pkgconfig/kvcompress.pc" "$work/prefix/include/kvc/kvc.h"
    ;;
  find_package)
    cmake -S "$src/tests/install/consumer" -B "$work/consumer-cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
    cmake --build "$work/consumer-cmake" >/dev/null
    "$work/consumer-cmake/decoder"
    ;;
  pkg_config)
    command -v pkg-config >/dev/null || { echo "pkg-config not installed: skipped"; exit 77; }
    mkdir -p "$work/consumer-pc"
    PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --modversion kvcompress
    # shellcheck disable=SC2046
    ${CC:-cc} -std=c11 -O2 -o "$work/consumer-pc/decoder" "$src/tests/install/consumer/decoder.c" \
      $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs kvcompress)
    "$work/consumer-pc/decoder"
    ;;
  readme)
    mkdir -p "$work/readme"
    # the first ```c block of the README, as a newcomer would paste it
    awk '/^```c$/{on=1; next} /^```$/{if (on) exit} on' "$src/README.md" >"$work/readme/quickstart.c"
    [ -s "$work/readme/quickstart.c" ] || { echo "README.md has no C quick start"; exit 1; }
    ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I"$work/prefix/include" -o "$work/readme/quickstart" \
      "$work/readme/quickstart.c" "$work/prefix/lib/libkvc.a" -lm
    "$work/readme/quickstart" && echo "README quick start: compiled against the stable tier and ran (exit 0)"
    ;;
  kvc_alone)
    rm -rf "$work/kvc-alone" && mkdir -p "$work/kvc-alone"
    cmake -S "$src" -B "$work/kvc-alone" -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_TESTS=OFF -DKVC_VERIFY=OFF >"$work/kvc-alone/configure.log"
    cmake --build "$work/kvc-alone" --target kvc_cli -j "$(nproc)" >"$work/kvc-alone/build.log" || { tail -n 30 "$work/kvc-alone/build.log"; exit 1; }
    kvc="$work/kvc-alone/apps/kvc/kvc"
    if ldd "$kvc" | grep -E 'mpfr|lapacke|gmp'; then echo "kvc links the oracle's libraries"; exit 1; fi
    "$kvc" generate --steps 8 | tail -n 2
    rc=0; "$kvc" oracle --suite 2>"$work/kvc-alone/oracle.err" || rc=$?
    cat "$work/kvc-alone/oracle.err"
    [ "$rc" = 2 ] && grep -q "apt-get install libmpfr-dev liblapacke-dev" "$work/kvc-alone/oracle.err" ||
      { echo "kvc oracle without the oracle should exit 2 and say what to install (exit $rc)"; exit 1; }
    ;;
  *) echo "unknown step $step"; exit 2 ;;
esac
