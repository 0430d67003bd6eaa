/* Thin wrappers around libm whose contracts (kvc_kernels.h) are trusted by the
 * proofs: WP sees only the prototype. tests/unit checks the contracts hold. */
#include "kvc/kvc_kernels.h"

#include <errno.h>
#include <math.h>

/* The contracts say `assigns \nothing`, but glibc's exp sets errno to ERANGE
 * when the result underflows (x below about -708), which attend reaches for
 * far-off scores; log may set it too on a misuse. errno is put back, so the
 * trusted contract is what the code does. */
double kvc_exp_nonpos(double x)
{
    const int saved = errno;
    double y = exp(x);
    errno = saved;
    return y > 1.0 ? 1.0 : y; /* exp(-0.0) == 1; the clamp only guards libm quirks */
}

double kvc_log_pos(double x)
{
    const int saved = errno;
    const double y = log(x);
    errno = saved;
    return y;
}
