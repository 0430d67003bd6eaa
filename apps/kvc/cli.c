#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int kvc_cli_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *s == '-' || errno || *end || v < lo || v > hi) {
        fprintf(stderr, "kvc: %s expects an integer in %" PRIu64 "..%" PRIu64 ", got '%s'\n", flag, lo, hi,
                s ? s : "(missing)");
        return 1;
    }
    *out = v;
    return 0;
}

int kvc_cli_f64(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : NAN;
    if (!s || !*s || errno || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "kvc: %s expects a number in %g..%g, got '%s'\n", flag, lo, hi, s ? s : "(missing)");
        return 1;
    }
    *out = v;
    return 0;
}
