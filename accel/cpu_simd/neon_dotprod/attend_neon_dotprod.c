/* AArch64 NEON with the dot-product instructions: the NEON table's vector
 * operations (../neon/neon_ops.h), and int4 keys scored on the integer
 * units with sdot (../common/i4_q8_neon.h; the table sets
 * KVC_CAP_Q8_INT4). Built with -march=armv8.2-a+dotprod (isa.cmake) and
 * picked only where the CPU reports the instructions (KVC_CPU_DOTPROD); any
 * other build leaves this file empty. */
#include "kvc/kvc_kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD)
#include "../neon/neon_ops.h"
#include "../common/i4_q8_neon.h"
#include "../common/attend_simd.h"

KVC_SIMD_ENTRIES(neon_dotprod, KVC_CPU_NEON | KVC_CPU_DOTPROD);
#else
typedef int kvc_neon_dotprod_not_built; /* an empty file is not valid C */
#endif
