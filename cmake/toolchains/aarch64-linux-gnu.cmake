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
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
