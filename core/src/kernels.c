/* The kernel tables. Only the reference table exists in this build; the
 * accelerated ones (accel/) register through kvc_kernels_best once built. */
#include "kvc/kvc_kernels.h"

static const kvc_kernels kvc_ref_table = {
    KVC_KERNELS_VERSION, "ref", kvc_k_attend_f32__ref, kvc_k_dot_f32__ref, kvc_k_sqdist_f32__ref,
};

const kvc_kernels *kvc_kernels_ref(void) { return &kvc_ref_table; }

const kvc_kernels *kvc_kernels_best(void) { return &kvc_ref_table; }
