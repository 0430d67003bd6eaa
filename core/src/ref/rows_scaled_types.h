/* The types whose row kernels rows_scaled.h writes, one instance each (no
 * include guard): their prototypes where KVC_SC_BODIES is not defined
 * (rows_typed.h), their definitions where it is (rows_typed.c). */
#define KVC_SC_T        int8_t
#define KVC_SC_FN(op)   kvc_k_i8_##op##__ref
#define KVC_SC_MAX      127.0
#define KVC_SC_MAX_CODE 127
#define KVC_SC_ROUND    kvc_round_clamp127
#define KVC_SC_PAD      4
#include "rows_scaled.h"

#define KVC_SC_T        int16_t
#define KVC_SC_FN(op)   kvc_k_q15_##op##__ref
#define KVC_SC_MAX      32767.0
#define KVC_SC_MAX_CODE 32767
#define KVC_SC_ROUND    kvc_round_clamp32767
#define KVC_SC_PAD      2
#include "rows_scaled.h"
#undef KVC_SC_BODIES
