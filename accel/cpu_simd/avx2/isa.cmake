# accel/cpu_simd/avx2: x86-64 AVX2 + FMA + F16C. The one place this table's build is described:
# core/CMakeLists.txt finds this folder, builds attend_avx2.c with these flags
# for a matching target processor, and lists the table for kvc_kernels_best()
# (a higher rank is preferred); the tests find the folder the same way.
set(KVC_SIMD_ARCH "x86_64|AMD64|amd64")
set(KVC_SIMD_FLAGS "-mavx2;-mfma;-mf16c")
set(KVC_SIMD_RANK 1)
