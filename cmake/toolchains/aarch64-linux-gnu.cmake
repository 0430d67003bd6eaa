# 64-bit Arm Linux (NEON), cross-compiled with clang against Debian's arm64
# cross libc; the results run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR):
#   cmake -S . -B build-a64 --toolchain cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF -DKVC_BUILD_KERNEL_TESTS=ON
# (Debian: apt-get install clang libc6-dev-arm64-cross libgcc-12-dev-arm64-cross
#  binutils-aarch64-linux-gnu qemu-user; clang rather than gcc-aarch64-linux-gnu,
#  which Debian will not install beside gcc-multilib)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER clang)
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
# the cross libc, then Debian's multiarch arm64 packages (libmpfr-dev:arm64,
# liblapacke-dev:arm64: the oracle, for the full test suite under qemu-user)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The emulator's library prefix must hold one C library: with Debian's
# multiarch libc6:arm64 installed (libmpfr-dev:arm64 pulls it in), the cross
# package's loader under -L /usr/aarch64-linux-gnu finds the multiarch
# libc.so.6 first (/lib/aarch64-linux-gnu), a different build of glibc 2.36,
# and pthread_create never returns; so run against the multiarch one alone.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(KVC_QEMU_AARCH64_PREFIX /)
else()
  set(KVC_QEMU_AARCH64_PREFIX /usr/aarch64-linux-gnu)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${KVC_QEMU_AARCH64_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
