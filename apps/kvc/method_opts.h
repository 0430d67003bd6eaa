#ifndef KVC_APP_METHOD_OPTS_H
#define KVC_APP_METHOD_OPTS_H
/* The method tuning flags shared by `kvc eval` and `kvc bench`:
 *   --beta X  --subgen-t T --subgen-s S --subgen-mmax M --subgen-delta0 R
 *   --bkv-t T --bkv-levels L --bkv-bmax B --bkv-mode practical|theory|smaller-class
 *   --bkv-gamma G --bkv-rho R --bkv-kappa K --bkv-tail exact|uniform
 *   --express-s S --express-c C --express-L theory|<L> --express-delta D
 *   --express-center on|off
 * Unset flags leave the library's defaults (0 = derive). */
#include "kvc/kvc.h"

typedef struct kvc_method_opts {
    double beta;
    uint64_t sg_t, sg_s, sg_mmax;
    double sg_delta0;
    uint64_t bkv_t, bkv_levels, bkv_bmax;
    double bkv_gamma, bkv_rho, bkv_kappa;
    uint32_t bkv_mode, bkv_tail;
    uint64_t x_s, x_c;
    uint32_t x_lmode, x_center;
    double x_L, x_delta;
} kvc_method_opts;

/** Usage lines for the flags (two-space indent). */
extern const char kvc_method_opts_usage[];

/**
 * @brief Take @p flag with value @p val if it is one of the method flags.
 * @return 1 taken, 0 not a method flag, -1 bad value (a message was printed).
 */
int kvc_method_opts_take(kvc_method_opts *o, const char *flag, const char *val);

/** Copy the set flags into @p cfg (fields left 0 keep the library's defaults). */
void kvc_method_opts_apply(const kvc_method_opts *o, kvc_stream_config *cfg);

/** Append " --flag value" for every set flag to @p buf (for labels and CSV). */
void kvc_method_opts_describe(const kvc_method_opts *o, char *buf, size_t cap);
#endif
