# accel/cpu_simd/neon_dotprod: AArch64 NEON with the dot-product instructions
# (Armv8.2-A DotProd: sdot/udot; Cortex-A55/A76 and later, Apple M1, Neoverse).
# The one place this table's build is described: core/CMakeLists.txt finds
# this folder, builds attend_neon_dotprod.c with these flags for a matching
# target processor, and lists the table for kvc_kernels_best() (a higher rank
# is preferred; the table needs KVC_CPU_DOTPROD, detected at run time).
set(KVC_SIMD_ARCH "aarch64|arm64|ARM64")
set(KVC_SIMD_FLAGS "-march=armv8.2-a+dotprod")
set(KVC_SIMD_RANK 2)
