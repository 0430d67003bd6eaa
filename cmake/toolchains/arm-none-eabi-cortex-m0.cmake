# Cortex-M0/M0+ (ARMv6-M, no FPU: soft float), bare metal, newlib.
#   cmake -S . -B build-m0 --toolchain cmake/toolchains/arm-none-eabi-cortex-m0.cmake \
#         -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft -ffunction-sections -fdata-sections")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
