/* The exp and log of the reference kernels, whose contracts (kvc_kernels.h)
 * are trusted by the proofs: WP sees only the prototype. tests/unit checks
 * the contracts hold. They use portable_math.c, not libm, so that scores and
 * their sums have the same bits on every target. */
#include "kvc/kvc_kernels.h"

#include <errno.h>
#include "portable_math.h"
#include "internal/kvc_internal.h"

/* The contracts say `assigns \nothing`, but a C library's ldexp may set errno
 * to ERANGE when the result underflows (x below about -708), which attend
 * reaches for far-off scores. errno is put back, so the trusted contract is
 * what the code does. */
double kvc_exp_nonpos(double x)
{
    const int saved = errno;
    double y = kvc_pm_exp(x);
    errno = saved;
    return y > 1.0 ? 1.0 : y; /* exp(-0.0) == 1; the clamp only guards libm quirks */
}

double kvc_log_pos(double x)
{
    const int saved = errno;
    const double y = kvc_pm_log(x);
    errno = saved;
    return y;
}
