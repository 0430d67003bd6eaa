# 64-bit Arm Linux (NEON), cross-compiled; run the results with qemu-user:
#   cmake -S . -B build-a64 --toolchain cmake/toolchains/aarch64-linux-gnu.cmake -DKVC_BUILD_ORACLE=OFF \
#         -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF
# (Debian: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
