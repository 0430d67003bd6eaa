# Cortex-M7 (ARMv7E-M, double-precision FPU fpv5-d16), bare metal, newlib.
#   cmake -S . -B build-m7 --toolchain cmake/toolchains/arm-none-eabi-cortex-m7.cmake \
#         -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF
# (Debian: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY) # no startup code to link a test program
set(KVC_MCU_FLAGS "-mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16 -ffunction-sections -fdata-sections")
set(CMAKE_C_FLAGS_INIT "${KVC_MCU_FLAGS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
