/* Thin wrappers around libm whose contracts (kvc_kernels.h) are trusted by the
 * proofs: WP sees only the prototype. tests/unit checks the contracts hold. */
#include "kvc/kvc_kernels.h"

#include <math.h>

double kvc_exp_nonpos(double x)
{
    double y = exp(x);
    return y > 1.0 ? 1.0 : y; /* exp(-0.0) == 1; the clamp only guards libm quirks */
}

double kvc_log_pos(double x) { return log(x); }
