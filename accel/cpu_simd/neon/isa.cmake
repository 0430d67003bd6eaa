# accel/cpu_simd/neon: 64-bit Arm Advanced SIMD. The one place this table's build is described:
# core/CMakeLists.txt finds this folder, builds attend_neon.c with these flags
# for a matching target processor, and lists the table for kvc_kernels_best()
# (a higher rank is preferred); the tests find the folder the same way.
set(KVC_SIMD_ARCH "aarch64|arm64|ARM64")
set(KVC_SIMD_FLAGS "")
set(KVC_SIMD_RANK 1)
