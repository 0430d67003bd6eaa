/* Arm Advanced SIMD (NEON, AArch64) kernel table (4 lanes): the vector
 * operations of neon_ops.h over the shared batched attend
 * (../common/attend_simd.h). AArch64 always has NEON, so no extra flag is
 * needed; a 32-bit Arm or x86 build leaves this file empty. */
#include "kvc/kvc_kernels.h"
#include "../common/exp_poly.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include "neon_ops.h"
#include "../common/attend_simd.h"

KVC_SIMD_ENTRIES(neon, KVC_CPU_NEON);
#else
typedef int kvc_neon_not_built; /* an empty file is not valid C */
#endif
